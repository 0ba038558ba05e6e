/// What every attempt of a `CurlTransferDriver` shares: the SSRF guard's rules, the response-head
/// budget, the extra trusted CAs and the upstream proxy.
struct TransferSettings: Sendable {
    /// The SSRF guard's rules (`TransferRequest.allowPrivateNetworks` may lift the range ban per attempt).
    var egress = EgressRules()
    /// Bytes of response head accepted per attempt, all hops together.
    var maxResponseHeaderBytes = 64 * 1024
    /// CA certificates trusted on top of the system's roots (origins and an https proxy).
    var trust: TrustedCertificates?
}
