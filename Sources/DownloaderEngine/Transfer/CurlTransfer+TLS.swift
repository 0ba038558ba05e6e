import CCurl

// TLS connections an attempt opens (loop thread, from libcurl's SSL_CTX callback and OpenSSL's
// info callback, both inside `curl_multi_perform`).
extension CurlTransfer: TLSAlertListener {
    /// A new TLS connection's context, before its handshake: the extra CAs join the system's roots,
    /// and its fatal alerts are watched while this attempt runs.
    func prepareTLS(_ context: OpaquePointer) {
        settings.trust?.add(to: context)
        TLSHandshakeWatch.watch(context, for: self)
        tlsContexts.append(context)
    }

    func tlsHandshake(sawFatalAlert alert: TLSAlert) {
        if handshakeAlert == nil { handshakeAlert = alert }
    }

    /// The attempt ended: its connections (perhaps kept for reuse) no longer report to it.
    func stopWatchingTLS() {
        TLSHandshakeWatch.forget(tlsContexts, of: self)
        tlsContexts.removeAll()
    }

    /// libcurl's verbose text says bytes came beyond the declared body ("Excess found in a read",
    /// after which it closes the connection and reports success with the body cut at the declared
    /// end): the one sign of a body longer than its `Content-Length`.
    func noteDebugText(_ text: UnsafeRawBufferPointer) {
        if text.starts(with: Self.excessMarker) { excessBody = true }
    }

    static let excessMarker = Array("Excess found".utf8)
}
