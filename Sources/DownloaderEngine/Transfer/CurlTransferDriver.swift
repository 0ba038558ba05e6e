/// The real `TransferStarting`: libcurl's multi interface on one dedicated thread, many concurrent
/// attempts on it.
///
/// Each attempt (`start`) sends a GET with `TransferRequest.headers` (HTTP/2 when the origin offers
/// it through ALPN on TLS, else HTTP/1.1), follows up to
/// `maxRedirects` redirects (http/https only: a redirect to another scheme, e.g. `ftp://`, fails
/// with `.unsupportedRedirect`), and reports the FINAL hop's head to
/// `delegate.transfer(didReceive:)` once, before any body byte; 1xx and followed 3xx hops are never
/// reported. Body bytes go to the returned sink synchronously on the transfer thread (a slow disk
/// slows the download: that is the backpressure). Non-2xx bodies are never written, and non-2xx
/// heads are reported whatever their Content-Length; `maxBodyBytes` limits 2xx bodies only
/// (`.tooLarge` before the head when a 2xx declares more, or as soon as more arrives).
/// `didFinishWith` comes exactly once per attempt, from the transfer thread.
///
/// TLS: certificates are always verified (system roots plus `trust`), TLS 1.2 at least; a
/// certificate that does not verify fails with `.tlsCertificate`, a handshake refused for good
/// (fatal alert, version or cipher) with `.tlsHandshake`, a handshake cut by a reset or close with
/// `.connection`. A body longer than its `Content-Length` fails with `.contentLengthMismatch`.
///
/// Proxy: with `proxy`, every hop whose host `noProxy` does not name goes through a `CONNECT`
/// tunnel to an address the transfer resolved and vetted itself (`HopRoute`), and the transfer
/// follows redirects itself, hop by hop; a 407 fails with `.proxyAuth`, another 4xx to CONNECT with
/// `.proxyRefused`.
///
/// Safety: no proxies from the environment, no cookies, no content decoding (raw bytes). The SSRF
/// guard (`egress`, with `TransferRequest.allowPrivateNetworks` also lifting the range ban) judges
/// every connection at connect time (the resolved address libcurl is about to connect to, so DNS
/// rebinding cannot slip past) and again before every request (reused connections), for the first
/// hop and every redirect hop, with that hop's host for name rules; a refusal fails the attempt
/// with `.blockedAddress`. Response heads of all hops together are capped at
/// `maxResponseHeaderBytes` (`.headerTooLarge`).
///
/// Timing (`AttemptDeadlines`): `connectTimeout` bounds each connect, TLS and proxy tunnel included
/// (`.connectTimeout`); `headTimeout` bounds the time from sending a request to the end of its
/// response head, in total (`.headTimeout`); once the final head arrived, `stallTimeout` fails an
/// attempt that received nothing for that long (`.stalled`).
///
/// Construct one per engine (`CurlTransferDriver()`) and keep it; `shutdown()` (or releasing the
/// last reference) stops the thread and finishes running attempts with `.cancelled`.
final class CurlTransferDriver: TransferStarting {
    private let loop: CurlMultiLoop
    /// What every attempt shares (guard rules, head budget, trusted CAs).
    let settings: TransferSettings

    init(egress: EgressRules = EgressRules(), maxResponseHeaderBytes: Int = 64 * 1024, trust: TrustedCertificates? = nil,
         proxy: UpstreamProxy? = nil, noProxy: NoProxyList = NoProxyList(), resolver: any HostResolver = SystemResolver()) {
        loop = CurlMultiLoop()
        settings = TransferSettings(egress: egress, maxResponseHeaderBytes: max(1024, maxResponseHeaderBytes), trust: trust,
                                    proxy: proxy, noProxy: noProxy, resolver: resolver)
    }

    deinit {
        loop.shutdown(wait: false)
    }

    func start(_ request: TransferRequest, delegate: TransferDelegate) -> TransferHandle {
        var settings = self.settings
        settings.egress.allowPrivateNetworks = settings.egress.allowPrivateNetworks || request.allowPrivateNetworks
        let transfer = CurlTransfer(request: request, delegate: delegate, loop: loop, settings: settings)
        loop.submit(transfer)
        return transfer
    }

    /// Stops the transfer thread after finishing every running attempt with `.cancelled`; waits for
    /// the thread (bounded; not when called on the transfer thread itself, e.g. from a delegate
    /// callback). Later `start`s finish at once with `.cancelled`.
    func shutdown() {
        loop.shutdown(wait: true)
    }
}
