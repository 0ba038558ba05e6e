/// The transfer layer used by the public initialiser: the libcurl driver.
func makeDefaultTransferDriver(_ configuration: EngineConfiguration) -> TransferStarting {
    CurlTransferDriver()
}
