/// The real `TransferStarting`: libcurl's multi interface on one dedicated thread, many concurrent
/// attempts on it.
///
/// Each attempt (`start`) sends a GET with `TransferRequest.headers` over HTTP/1.1, follows up to
/// `maxRedirects` redirects (http/https only: a redirect to another scheme, e.g. `ftp://`, fails
/// with `.unsupportedRedirect`), and reports the FINAL hop's head to
/// `delegate.transfer(didReceive:)` once, before any body byte; 1xx and followed 3xx hops are never
/// reported. Body bytes go to the returned sink synchronously on the transfer thread (a slow disk
/// slows the download: that is the backpressure). Non-2xx bodies are never written, and non-2xx
/// heads are reported whatever their Content-Length; `maxBodyBytes` limits 2xx bodies only
/// (`.tooLarge` before the head when a 2xx declares more, or as soon as more arrives).
/// `didFinishWith` comes exactly once per attempt, from the transfer thread.
///
/// Safety: no proxies from the environment, no cookies, no content decoding (raw bytes), and unless
/// `allowPrivateNetworks`, connections to non-public addresses (`AddressPolicy`) are refused at
/// connect time and before every request, redirects and reused connections included.
///
/// Timing: `connectTimeout` bounds each connect (`.timeout`); `stallTimeout` fails an attempt that
/// received nothing for that long (`.stalled`); before the first response byte the attempt gets
/// `connectTimeout + stallTimeout`.
///
/// Construct one per engine (`CurlTransferDriver()`) and keep it; `shutdown()` (or releasing the
/// last reference) stops the thread and finishes running attempts with `.cancelled`.
final class CurlTransferDriver: TransferStarting {
    private let loop: CurlMultiLoop

    init() {
        loop = CurlMultiLoop()
    }

    deinit {
        loop.shutdown(wait: false)
    }

    func start(_ request: TransferRequest, delegate: TransferDelegate) -> TransferHandle {
        let transfer = CurlTransfer(request: request, delegate: delegate, loop: loop)
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
