/// What every attempt of a `CurlTransferDriver` shares: the SSRF guard's rules, the response-head
/// budget, the extra trusted CAs and the upstream proxy (with the hosts it is not used for, and the
/// resolver the transfer vets proxied hosts with).
struct TransferSettings: Sendable {
    /// The SSRF guard's rules (`TransferRequest.allowPrivateNetworks` may lift the range ban per attempt).
    var egress = EgressRules()
    /// Bytes of response head accepted per attempt, all hops together.
    var maxResponseHeaderBytes = 64 * 1024
    /// CA certificates trusted on top of the system's roots (origins and an https proxy).
    var trust: TrustedCertificates?
    /// Every hop goes through it (tunnelled to a vetted address, `HopRoute`) unless `noProxy` names
    /// its host; nil: every hop connects directly.
    var proxy: UpstreamProxy?
    var noProxy = NoProxyList()
    var resolver: any HostResolver = SystemResolver()

    /// With a proxy the transfer follows redirects itself, hop by hop (each hop is routed and vetted
    /// before its connection exists); without one libcurl follows them.
    var followsRedirectsItself: Bool { proxy != nil }
}
