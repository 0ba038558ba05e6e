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
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private(set) var head: ResponseHead?
    private var sink: BodySink?
    private var collector: ResponseHeadCollector
    private(set) var bodyBytes: Int64 = 0
    /// Why a callback aborted the transfer (wins over libcurl's own code).
    private(set) var abortReason: TransferFailure?
    /// Why the SSRF guard refused a connection during this attempt, e.g. "127.0.0.1 is loopback".
    private(set) var refusedAddress: String?
    /// Set by callbacks when bytes arrived; the loop turns it into `quietSince`.
    var sawActivity = false
    /// Monotonic nanoseconds since which nothing arrived (starts one connect timeout in the future).
    var quietSince: UInt64 = 0
    var finished = false
    /// Redirect hops libcurl followed (3xx heads with a Location) before the final one.
    private(set) var redirectHops = 0

    /// The SSRF guard's rules for this attempt.
    let egress: EgressRules
    let maxResponseHeaderBytes: Int
    /// Header bytes received so far, all hops together.
    private var headerBytes = 0

    init(request: TransferRequest, delegate: TransferDelegate, loop: CurlMultiLoop,
         egress: EgressRules = EgressRules(), maxResponseHeaderBytes: Int = 64 * 1024) {
        self.request = request
        self.egress = egress
        self.maxResponseHeaderBytes = maxResponseHeaderBytes
        self.delegate = delegate
        self.loop = loop
        self.collector = ResponseHeadCollector(followsRedirects: true)  // CURLOPT_FOLLOWLOCATION is always on.
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
            if (300..<400).contains(status) { redirectHops += 1 }
            return true
        case .invalid(let reason):
            return abort(TransferFailure(.connection, "bad response head: \(reason)"))
        case .finalHead(let status, let headers):
            return deliverHead(status: status, headers: headers)
        }
    }

    /// Body bytes; returns false to abort.
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if isCancelled { return abort(TransferFailure(.cancelled, "cancelled")) }
        guard let head else { return abort(TransferFailure(.connection, "body before the response head")) }
        guard (200..<300).contains(head.status) else {
            return abort(TransferFailure(.rejected, "status \(head.status): body not written"))
        }
        guard let sink else { return abort(TransferFailure(.rejected, "no sink for the body")) }
        sawActivity = true
        if let limit = request.maxBodyBytes, bodyBytes + Int64(bytes.count) > limit {
            return abort(TransferFailure(.tooLarge, "body exceeds \(limit) bytes"))
        }
        do {
            try sink.write(bytes)
        } catch {
            return abort(TransferFailure(.disk, "writing the body failed: \(error)", code: Self.errno(of: error)))
        }
        bodyBytes += Int64(bytes.count)
        return true
    }

    /// The SSRF check for an address libcurl is about to connect to (or reuse a connection to), on
    /// the current hop (its host from libcurl's effective URL, which follows redirects).
    func admits(_ address: IPAddress?, shown: String) -> Bool {
        let hop = currentHop()
        let verdict: EgressRules.Verdict
        if let address {
            verdict = egress.admit(host: hop?.host, port: hop?.port ?? 0, address: address)
        } else {
            verdict = .forbidden("\(shown.isEmpty ? "an unknown address" : shown) is not an IPv4 or IPv6 address")
        }
        guard case .forbidden(let reason) = verdict else { return true }
        refusedAddress = reason
        return false
    }

    /// Before a name lookup: false (and the attempt refused) when the hop's host is refused by
    /// name already (a deny rule, or not on the allow list); addresses are judged at connect time.
    func screensHopHost() -> Bool {
        guard let hop = currentHop(), case .forbidden(let reason) = egress.screen(host: hop.host, port: hop.port) else {
            return true
        }
        refusedAddress = reason
        refuseConnection()
        return false
    }

    /// The host and port of the hop libcurl is working on; nil when it cannot be read.
    private func currentHop() -> HopTarget? {
        var urlPointer: UnsafeMutablePointer<CChar>?
        guard let easy, ccurl_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &urlPointer) == CURLE_OK,
              let urlPointer else { return HopTarget(url: request.url) }
        return HopTarget(url: String(cString: urlPointer))
    }

    /// A reused or new connection's peer is refused: abort with `.blockedAddress`.
    func refuseConnection() {
        let reason = refusedAddress ?? "refused"
        abortReason = abortReason ?? TransferFailure(.blockedAddress, "destination forbidden: \(reason)")
    }

    // MARK: Completion (loop thread)

    /// The outcome once libcurl reports `code`.
    func outcome(for code: CURLcode) -> Result<TransferSummary, TransferFailure> {
        if let abortReason { return .failure(abortReason) }
        guard code == CURLE_OK else {
            let detail = String(cString: errorBuffer)
            return .failure(CurlFailureMapping.failure(for: code, detail: detail, blockedAddress: refusedAddress,
                                                       redirected: redirectHops > 0))
        }
        guard let head else { return .failure(TransferFailure(.connection, "no response head")) }
        return .success(TransferSummary(head: head, bodyBytes: bodyBytes))
    }

    /// Drops the sink and head state after the attempt ended.
    func dropSink() { sink = nil }

    private func deliverHead(status: Int, headers: [String: [String]]) -> Bool {
        var urlPointer: UnsafeMutablePointer<CChar>?
        var effectiveURL = request.url
        if let easy, ccurl_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &urlPointer) == CURLE_OK, let urlPointer {
            effectiveURL = String(cString: urlPointer)
        }
        let head = ResponseHead(status: status, headers: headers, effectiveURL: effectiveURL)
        self.head = head
        // The size limit applies to bodies that would be accepted (2xx): a 404 with a big error
        // page still reaches the delegate, which decides on its status.
        if (200..<300).contains(status), let limit = request.maxBodyBytes,
           let declared = head.value("content-length").flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }),
           declared > limit {
            return abort(TransferFailure(.tooLarge, "the body has \(declared) bytes, more than \(limit)"))
        }
        switch delegate.transfer(didReceive: head) {
        case .success(let sink):
            self.sink = sink
            return !isCancelled || abort(TransferFailure(.cancelled, "cancelled"))
        case .failure(let failure):
            return abort(failure)
        }
    }

    private func abort(_ failure: TransferFailure) -> Bool {
        if abortReason == nil { abortReason = failure }
        return false
    }

    /// The errno behind a sink error, when it carries one.
    static func errno(of error: Error) -> Int32? {
        if let carrying = error as? ErrnoCarrying { return carrying.errnoCode }
        if let posix = error as? POSIXError { return posix.code.rawValue }
        let bridged = error as NSError
        if bridged.domain == NSPOSIXErrorDomain { return Int32(truncatingIfNeeded: bridged.code) }
        return nil
    }
}
