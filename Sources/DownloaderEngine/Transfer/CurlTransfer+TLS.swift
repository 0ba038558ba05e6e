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
}
