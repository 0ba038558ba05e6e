import CCurl
import Dispatch
import Foundation
import MiniHTTPServer

/// One request to another replica: a libcurl easy handle performed on a thread of its own (the
/// forwarder bounds how many run at once). Buffered: the whole answer (at most `limit` bytes, within
/// the total timeout) is handed over at its end. Streamed: the head is handed over as soon as it
/// arrives and the body flows to the client through `RelayedBody` as it comes, at most about
/// `buffer` bytes held here: beyond that the transfer waits for the client (TCP back-pressure then
/// reaches the holder). Cancelling (the client left) ends the transfer within about a second and
/// closes the connection to the holder. Redirects are not followed; no proxy.
final class PeerCall: @unchecked Sendable {
    enum Mode: Sendable {
        case buffered(limit: Int)
        case streamed(buffer: Int)
    }

    struct Timeouts: Sendable {
        var connect: Double
        /// Buffered: the whole exchange.
        var total: Double
        /// Streamed: no byte from the holder (or no room made by the client) for this long ends it.
        var stall: Double
    }

    /// What the waiting handler gets.
    enum Answer: Sendable {
        /// The holder's status and fields, and (buffered) the whole body.
        case answered(status: Int, fields: [(name: String, value: String)], body: [UInt8])
        case failed(String)
    }

    /// The next thing a relayed body does.
    enum Step {
        case bytes([UInt8])
        /// The holder's body ended complete.
        case finish
        /// It ended short or failed, or the call was cancelled: the client's response must not end cleanly.
        case abort
        case wait
    }

    /// Header bytes accepted from the holder at most.
    static let headLimit = 64 * 1024
    private static let globalInit: CURLcode = curl_global_init(ccurl_global_all())

    let url: String
    let method: String
    let fields: [(name: String, value: String)]
    let body: [UInt8]
    let mode: Mode
    let timeouts: Timeouts

    private let condition = NSCondition()
    // Under `condition`:
    private var waiter: CheckedContinuation<Answer, Never>?
    private var pending: Answer?
    private var delivered = false
    private var cancelled = false
    private var chunks: [[UInt8]] = []
    private var queued = 0
    private var ended: Step?
    private weak var stream: PushStream?
    private var lastDrain: UInt64
    // The curl thread's own:
    private var status = 0
    private var headFields: [(name: String, value: String)] = []
    private var headBytes = 0
    private var headDone = false
    private var collected: [UInt8] = []
    private var tooLarge = false
    private var lastByte: UInt64

    init(url: String, method: String, fields: [(name: String, value: String)], body: [UInt8], mode: Mode, timeouts: Timeouts) {
        self.url = url
        self.method = method
        self.fields = fields
        self.body = body
        self.mode = mode
        self.timeouts = timeouts
        lastDrain = Self.now()
        lastByte = lastDrain
    }

    /// Starts the exchange on its own thread; `done` runs on it when the exchange is over.
    func start(done: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            perform()
            done()
        }
        thread.name = "peer-call"
        thread.start()
    }

    /// Waits for the answer (streamed: its head). Cancelling the task cancels the call.
    func answer() async -> Answer {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Answer, Never>) in
                condition.lock()
                if let answer = pending {
                    pending = nil
                    condition.unlock()
                    c.resume(returning: answer)
                } else {
                    waiter = c
                    condition.unlock()
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Ends the exchange (the client left): the transfer stops and its connection closes.
    func cancel() {
        condition.lock()
        cancelled = true
        chunks = []
        queued = 0
        stream = nil
        condition.broadcast()
        condition.unlock()
    }

    /// A relayed body's next step; `stream` is woken when there is more.
    func next(for stream: PushStream) -> Step {
        condition.lock()
        defer { condition.unlock() }
        self.stream = stream
        lastDrain = Self.now()
        if cancelled { return .abort }
        if !chunks.isEmpty {
            let chunk = chunks.removeFirst()
            queued -= chunk.count
            condition.broadcast()
            return .bytes(chunk)
        }
        return ended ?? .wait
    }

    private var isCancelled: Bool {
        condition.lock()
        defer { condition.unlock() }
        return cancelled
    }

    private func deliver(_ answer: Answer) {
        condition.lock()
        guard !delivered else {
            condition.unlock()
            return
        }
        delivered = true
        lastDrain = Self.now()
        let waiting = waiter
        waiter = nil
        if waiting == nil { pending = answer }
        condition.unlock()
        waiting?.resume(returning: answer)
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    private func elapsed(since time: UInt64) -> Double { Double(Self.now() &- time) / 1e9 }

    // MARK: - The curl thread

    /// A header line from the holder; false ends the transfer.
    fileprivate func headerLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        headBytes += bytes.count
        guard headBytes <= Self.headLimit else { return false }
        lastByte = Self.now()
        guard !headDone else { return true }  // trailers
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .newlines)
        if line.hasPrefix("HTTP/") {
            status = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            headFields = []
        } else if line.isEmpty {
            if status >= 200 {  // a 1xx block is followed by the real one
                headDone = true
                if case .streamed = mode { deliver(.answered(status: status, fields: headFields, body: [])) }
            }
        } else if let colon = line.firstIndex(of: ":") {
            headFields.append((name: line[..<colon].trimmingCharacters(in: .whitespaces),
                               value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return !isCancelled
    }

    /// Body bytes from the holder; false ends the transfer.
    fileprivate func received(_ bytes: [UInt8]) -> Bool {
        lastByte = Self.now()
        switch mode {
        case .buffered(let limit):
            guard collected.count + bytes.count <= limit else {
                tooLarge = true
                return false
            }
            collected += bytes
            return !isCancelled
        case .streamed(let buffer):
            condition.lock()
            guard !cancelled else {
                condition.unlock()
                return false
            }
            chunks.append(bytes)
            queued += bytes.count
            let target = stream
            condition.unlock()
            target?.wake()
            condition.lock()
            defer { condition.unlock() }
            while queued > buffer, !cancelled {
                if elapsed(since: lastDrain) > timeouts.stall {
                    cancelled = true  // the client takes nothing: give up
                    break
                }
                _ = condition.wait(until: Date().addingTimeInterval(0.5))
            }
            lastByte = Self.now()
            return !cancelled
        }
    }

    /// libcurl's progress callback (about once a second at least): true ends the transfer.
    fileprivate func shouldStop() -> Bool {
        if isCancelled { return true }
        if case .streamed = mode, elapsed(since: lastByte) > timeouts.stall { return true }
        return false
    }

    private func perform() {
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        guard Self.globalInit == CURLE_OK, let easy = curl_easy_init() else {
            finish(ok: false, "libcurl could not start")
            return
        }
        defer { curl_easy_cleanup(easy) }
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        // libcurl's own defaults (a form Content-Type on POST, Accept: */*, Expect) never stand in for the client's.
        var sent = fields
        for name in ["Content-Type", "Accept", "Expect"] where !sent.contains(where: { $0.name.lowercased() == name.lowercased() }) {
            sent.append((name: name, value: ""))
        }
        for field in sent { list = curl_slist_append(list, field.value.isEmpty ? "\(field.name):" : "\(field.name): \(field.value)") }
        func long(_ option: CURLoption, _ value: Int) { _ = ccurl_setopt_long(easy, option, value) }
        func text(_ option: CURLoption, _ value: String) { _ = ccurl_setopt_string(easy, option, value) }
        text(CURLOPT_URL, url)
        text(CURLOPT_PROTOCOLS_STR, "http,https")
        text(CURLOPT_PROXY, "")
        text(CURLOPT_NOPROXY, "")
        long(CURLOPT_FOLLOWLOCATION, 0)
        long(CURLOPT_NOSIGNAL, 1)
        long(CURLOPT_PATH_AS_IS, 1)
        long(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        long(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(timeouts.connect * 1000)))
        if case .buffered = mode { long(CURLOPT_TIMEOUT_MS, max(1, Int(timeouts.total * 1000))) }
        long(CURLOPT_FORBID_REUSE, 1)
        long(CURLOPT_SSL_VERIFYPEER, 1)
        long(CURLOPT_SSL_VERIFYHOST, 2)
        if method == "HEAD" {
            long(CURLOPT_NOBODY, 1)
        } else if method == "GET" {
            long(CURLOPT_HTTPGET, 1)
        } else {
            if method == "POST" || !body.isEmpty {
                long(CURLOPT_POST, 1)
                _ = ccurl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
                body.withUnsafeBytes { raw in
                    _ = ccurl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS,
                                             UnsafeMutableRawPointer(mutating: raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
                }
            }
            if method != "POST" { text(CURLOPT_CUSTOMREQUEST, method) }
        }
        _ = ccurl_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
        _ = ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
        _ = ccurl_setopt_header_function(easy) { data, size, count, raw in
            guard let raw else { return 0 }
            let call = Unmanaged<PeerCall>.fromOpaque(raw).takeUnretainedValue()
            return call.headerLine(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
        }
        _ = ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = ccurl_setopt_write_function(easy) { data, size, count, raw in
            guard let raw else { return 0 }
            let call = Unmanaged<PeerCall>.fromOpaque(raw).takeUnretainedValue()
            let bytes = Array(UnsafeRawBufferPointer(start: data, count: size * count))
            return call.received(bytes) ? size * count : 0
        }
        long(CURLOPT_NOPROGRESS, 0)
        _ = ccurl_setopt_pointer(easy, CURLOPT_XFERINFODATA, context)
        _ = ccurl_setopt_xferinfo_function(easy) { raw, _, _, _, _ in
            guard let raw else { return 1 }
            return Unmanaged<PeerCall>.fromOpaque(raw).takeUnretainedValue().shouldStop() ? 1 : 0
        }
        let code = curl_easy_perform(easy)
        let detail = String(cString: errorBuffer)
        finish(ok: code == CURLE_OK, detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail)
    }

    /// The exchange is over: the answer (or failure) for a waiting handler, the end for a relayed body.
    private func finish(ok: Bool, _ detail: String) {
        if case .buffered(let limit) = mode {
            if tooLarge {
                deliver(.failed("the answer is larger than \(limit) bytes"))
            } else if ok, headDone {
                deliver(.answered(status: status, fields: headFields, body: collected))
            } else {
                deliver(.failed(isCancelled ? "cancelled" : detail))
            }
            return
        }
        deliver(.failed(isCancelled ? "cancelled" : headDone ? detail : "no answer: \(detail)"))  // no-op after the head
        condition.lock()
        ended = ok && headDone ? .finish : .abort
        let target = stream
        condition.unlock()
        target?.wake()
    }
}
