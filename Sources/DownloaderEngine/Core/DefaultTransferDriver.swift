/// The transfer layer used by the public initialiser: the libcurl driver with the SSRF guard's rules.
func makeDefaultTransferDriver(_ configuration: EngineConfiguration) throws(HostRuleError) -> TransferStarting {
    CurlTransferDriver(egress: try EgressRules(configuration), maxResponseHeaderBytes: configuration.maxResponseHeaderBytes)
}
