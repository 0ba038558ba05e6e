import Basics
import CCurl
import Foundation
import Synchronization

/// One attempt driven by `CurlMultiLoop`: the libcurl easy handle's owner and its callbacks' target.
///
/// Threading: everything but `cancel()` runs on the loop thread (the libcurl callbacks run inside
/// `curl_multi_perform` there). `cancel()` only flips an atomic flag and queues a removal, so after it
/// returns no new sink write starts; a write already running on the loop thread completes, and
/// `didFinishWith(.cancelled)` follows, after which the sink is never touched again.
final class CurlTransfer: TransferHandle, @unchecked Sendable {
    let request: TransferRequest
    let delegate: TransferDelegate
    private let loop: CurlMultiLoop
    private let cancelRequested = Atomic<Bool>(false)

    // Loop-thread state.
    /// The easy handle while the attempt runs (cleaned up by `CurlMultiLoop.finish`).
    var easy: UnsafeMutableRawPointer?
    /// The retain that keeps this object alive while libcurl holds its pointer.
    var context: Unmanaged<CurlTransfer>?
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// The current hop's `CURLOPT_CONNECT_TO` entry (a tunnelled hop), freed with its easy handle.
    var connectToList: UnsafeMutablePointer<curl_slist>?
    /// The URL of the hop being fetched (the request's, then each redirect's when the transfer
    /// follows them itself) and how it is reached.
    var hopURL: String
    var route = HopRoute.direct
    /// A tunnelled hop's other vetted addresses, in order, still to try if the proxy cannot reach
    /// the one it was asked for (`tunnelFallback`).
    var tunnelFallbacks: [IPAddress] = []
    /// The next hop's URL once the current hop answered with a redirect the transfer follows itself.
    var pendingRedirect: String?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private(set) var head: ResponseHead?
    private var sink: BodySink?
    private var collector: ResponseHeadCollector
    private(set) var bodyBytes: Int64 = 0
    /// Why a callback aborted the transfer (wins over libcurl's own code).
    var abortReason: TransferFailure?
    /// Why the SSRF guard refused a connection during this attempt, e.g. "127.0.0.1 is loopback".
    var refusedAddress: String?
    /// Addresses the guard let this hop connect to (counted from its handle, or from the redirect
    /// libcurl follows): a connect failure after one of them is the network's (tried again), not
    /// the guard's refusal of another address of the name.
    var admittedAddresses = 0
    /// Set by callbacks when bytes arrived; the loop tells `deadlines`.
    var sawActivity = false
    /// The connect, head and stall timers (set when the loop begins the attempt).
    var deadlines: AttemptDeadlines?
    var finished = false
    /// Redirect hops followed (3xx heads with a Location) before the final one.
    var redirectHops = 0
    /// The first fatal alert of a TLS handshake this attempt started.
    var handshakeAlert: TLSAlert?
    /// The `SSL_CTX`s of the TLS connections this attempt opened (watched for alerts until it ends).
    var tlsContexts: [OpaquePointer] = []
    /// The accepted body's length as its Content-Length announced (2xx heads without a transfer
    /// coding); libcurl ignores it (`CURLOPT_IGNORE_CONTENT_LENGTH`) and the transfer counts instead.
    private(set) var declaredLength: Int64?

    /// The guard's rules, the head budget, the trusted CAs.
    let settings: TransferSettings
    var egress: EgressRules { settings.egress }
    var maxResponseHeaderBytes: Int { settings.maxResponseHeaderBytes }
    /// Header bytes received so far, all hops together.
    private var headerBytes = 0

    init(request: TransferRequest, delegate: TransferDelegate, loop: CurlMultiLoop, settings: TransferSettings = TransferSettings()) {
        self.request = request
        self.settings = settings
        self.delegate = delegate
        self.loop = loop
        hopURL = request.url
        // A 3xx with a Location is an interim head when libcurl follows it, a hop's end otherwise.
        collector = ResponseHeadCollector(followsRedirects: !(settings.followsRedirectsItself || !request.credentials.isEmpty))
        errorBuffer.initialize(to: 0)
    }

    deinit {
        errorBuffer.deallocate()
    }

    var isCancelled: Bool { cancelRequested.load(ordering: .acquiring) }

    /// Thread-safe, idempotent and non-blocking.
    func cancel() {
        guard cancelRequested.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        loop.cancel(self)
    }

    // MARK: libcurl callbacks (loop thread)

    /// One header line; returns false to abort.
    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Bool {
        if isCancelled { return abort(TransferFailure(.cancelled, "cancelled")) }
        guard head == nil else { return true }  // Trailers after the body: ignored.
        sawActivity = true
        headerBytes += line.count
        if headerBytes > maxResponseHeaderBytes {
            return abort(TransferFailure(.headerTooLarge, "response heads larger than \(maxResponseHeaderBytes) bytes"))
        }
        switch collector.consume(Array(line)) {
        case .none:
            return true
        case .interimHead(let status):
            if (300..<400).contains(status) {
                redirectHops += 1
                admittedAddresses = 0  // The next hop (libcurl follows it) connects anew.
                deadlines?.headEnded(at: monotonicNanoseconds(), final: false)
            }
            return true
        case .invalid(let reason):
            return abort(TransferFailure(.badResponse, "bad response head: \(reason)"))
        case .finalHead(let status, let headers):
            return deliverHead(status: status, headers: headers)
        }
    }

    /// The longest 416 page read (and dropped); the rest is not read.
    static let maxDroppedBody: Int64 = 1 << 20

    /// Body bytes; returns false to abort.
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if isCancelled { return abort(TransferFailure(.cancelled, "cancelled")) }
        guard let head else { return abort(TransferFailure(.badResponse, "body before the response head")) }
        // A delegate may accept a 416 (the bytes it holds are the whole file): the body goes to its sink to be dropped.
        guard (200..<300).contains(head.status) || head.status == 416 else {
            return abort(TransferFailure(.rejected, "status \(head.status): body not written"))
        }
        guard let sink else { return abort(TransferFailure(.rejected, "no sink for the body")) }
        sawActivity = true
        if head.status == 416 {
            // An error page dropped unread: neither the file's size limit nor its own length
            // applies (a page longer than announced changes nothing of the bytes kept). Past
            // `maxDroppedBody` the connection is dropped: the head was the answer (`outcome`).
            guard bodyBytes + Int64(bytes.count) <= Self.maxDroppedBody else { return false }
            bodyBytes += Int64(bytes.count)
            return true
        }
        if let limit = request.maxBodyBytes, bodyBytes + Int64(bytes.count) > limit {
            return abort(TransferFailure(.tooLarge, "body exceeds \(limit) bytes"))
        }
        if let declared = declaredLength, bodyBytes + Int64(bytes.count) > declared {
            return abort(TransferFailure(.contentLengthMismatch, "the origin sent more than the \(declared) bytes its Content-Length announced"))
        }
        do {
            try sink.write(bytes)
        } catch let failure as TransferFailure {
            return abort(failure)  // The sink judged the body itself (one longer than its Content-Range).
        } catch {
            return abort(TransferFailure(.disk, "writing the body failed: \(error)", code: Self.errno(of: error)))
        }
        bodyBytes += Int64(bytes.count)
        if bodyBytes == declaredLength { deadlines?.bodyComplete(at: monotonicNanoseconds()) }
        return true
    }

    /// The request of the current hop is about to be sent (libcurl's pre-request callback).
    func requestGoesOut() {
        deadlines?.requestSent(at: monotonicNanoseconds())
    }

    /// The failure when a timer of `deadlines` ran out.
    func timedOut(_ kind: TransferFailure.Kind) -> TransferFailure {
        let host = currentHop()?.host ?? "the origin"
        switch kind {
        case .headTimeout:
            return TransferFailure(.headTimeout, "no response head from \(host) within \(request.headTimeout) s of sending the request")
        case .connectTimeout:
            return TransferFailure(.connectTimeout, "connecting to \(host) took longer than \(request.connectTimeout) s")
        default:
            return TransferFailure(.stalled, "no data for \(request.stallTimeout) s")
        }
    }

    /// The failure when a window of `stallTimeout` brought `rate` bytes per second, below `minSpeed`
    /// (a stall: the download reconnects and resumes).
    func tooSlow(_ rate: Double) -> TransferFailure {
        TransferFailure(.stalled, "slower than \(request.minSpeed) bytes/s for \(request.stallTimeout) s (\(Int(rate)) bytes/s)")
    }

    // MARK: Completion (loop thread)

    /// The outcome once libcurl reports `code`.
    func outcome(for code: CURLcode) -> Result<TransferSummary, TransferFailure> {
        if let abortReason { return .failure(abortReason) }
        // An accepted 416 (the bytes kept are the whole file) is its head: how its page ended is moot.
        if let head, head.status == 416 { return .success(TransferSummary(head: head, bodyBytes: 0)) }
        // Every byte the Content-Length announced is in: an error while waiting for the origin's
        // close (a reset instead of a FIN) changes nothing about the body.
        let bodyComplete = head.map { (200..<300).contains($0.status) } == true && declaredLength == bodyBytes
        guard code == CURLE_OK || bodyComplete else {
            let blocked = CurlFailureMapping.refusal(code, refused: refusedAddress, admitted: admittedAddresses)
            var context = CurlFailureMapping.Context(detail: String(cString: errorBuffer), blockedAddress: blocked,
                                                     redirected: redirectHops > 0, host: currentHop()?.host ?? "",
                                                     handshakeAlert: handshakeAlert)
            var status = 0
            if let easy, ccurl_getinfo_long(easy, CURLINFO_HTTP_CONNECTCODE, &status) == CURLE_OK { context.proxyStatus = status }
            if isTunnelled, let proxy = settings.proxy, proxy.scheme == .https, context.proxyStatus == 0 {
                context.tlsProxyHost = EgressRules.normalized(proxy.host)  // No tunnel yet: the TLS peer was the proxy.
            }
            return .failure(CurlFailureMapping.failure(for: code, context))
        }
        guard let head else { return .failure(TransferFailure(.connection, "no response head")) }
        if let declared = declaredLength, bodyBytes < declared {
            return .failure(TransferFailure(.connection, "the body ended after \(bodyBytes) of the \(declared) bytes its Content-Length announced"))
        }
        return .success(TransferSummary(head: head, bodyBytes: bodyBytes))
    }

    /// Loop thread, between libcurl callbacks: the sink's chance to act on held-back bytes; the
    /// seconds until it wants to be asked again (nil: nothing waits).
    func sinkIdle() -> Double? { sink?.idle() }

    /// Drops the sink and head state after the attempt ended.
    func dropSink() { sink = nil }

    private func deliverHead(status: Int, headers: [String: [String]]) -> Bool {
        if followsRedirectsItself, (300..<400).contains(status), let location = ResponseHeadCollector.location(in: headers) {
            return endHopWithRedirect(location: location)
        }
        var urlPointer: UnsafeMutablePointer<CChar>?
        var effectiveURL = request.url
        if let easy, ccurl_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &urlPointer) == CURLE_OK, let urlPointer {
            effectiveURL = String(cString: urlPointer)
        }
        let head = ResponseHead(status: status, headers: headers, effectiveURL: effectiveURL)
        self.head = head
        deadlines?.headEnded(at: monotonicNanoseconds(), final: true)
        switch delegate.transfer(didReceive: head) {
        case .success(let sink):
            self.sink = sink
            // The size limit applies to bodies the delegate accepted: it judges the head first (a
            // 404 with a big error page, a 200 where a segment asked for a range: each its own
            // verdict, not `tooLarge`).
            if (200..<300).contains(status), let limit = request.maxBodyBytes,
               let declared = head.contentLength,
               declared > limit {
                return abort(TransferFailure(.tooLarge, "the body has \(declared) bytes, more than \(limit)"))
            }
            if request.method == .get, head.value("transfer-encoding") == nil,
               let length = head.contentLength, length >= 0 {
                declaredLength = length
                if length == 0 { deadlines?.bodyComplete(at: monotonicNanoseconds()) }
            }
            return !isCancelled || abort(TransferFailure(.cancelled, "cancelled"))
        case .failure(let failure):
            return abort(failure)
        }
    }

    func abort(_ failure: TransferFailure) -> Bool {
        if abortReason == nil { abortReason = failure }
        return false
    }

    /// The errno behind a sink error (`SystemError`, as the engine's sinks throw, `POSIXError`, a
    /// POSIX-domain `NSError`): `TransferFailure.code` for `.disk` (ENOSPC makes it `disk_full`).
    static func errno(of error: Error) -> Int32? {
        if let system = error as? SystemError { return system.errno }
        if let posix = error as? POSIXError { return posix.code.rawValue }
        let bridged = error as NSError
        if bridged.domain == NSPOSIXErrorDomain { return Int32(truncatingIfNeeded: bridged.code) }
        return nil
    }
}
