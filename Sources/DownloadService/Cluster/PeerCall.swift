import Basics
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
    static let globalInit: CURLcode = curl_global_init(ccurl_global_all())

    let url: String
    let method: String
    let fields: [(name: String, value: String)]
    let body: [UInt8]
    let mode: Mode
    let timeouts: Timeouts
    /// Asked in HTTP/1.0, as the client asked: the holder then frames no body it cannot end by
    /// length (an HTTP/1.0 client reads one of unknown size until the close, which an abort also is).
    let http10: Bool

    private let condition = MonotonicCondition()
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

    init(url: String, method: String, fields: [(name: String, value: String)], body: [UInt8], mode: Mode, timeouts: Timeouts,
         http10: Bool = false) {
        self.url = url
        self.http10 = http10
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

    // MARK: - The curl thread (`PeerCall+Curl` performs the exchange)

    /// A header line from the holder; false ends the transfer.
    func headerLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
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
    func received(_ bytes: [UInt8]) -> Bool {
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
                condition.wait(seconds: 0.5)
            }
            lastByte = Self.now()
            return !cancelled
        }
    }

    /// libcurl's progress callback (about once a second at least): true ends the transfer.
    func shouldStop() -> Bool {
        if isCancelled { return true }
        guard case .streamed = mode else { return false }
        // Asked in HTTP/1.0, the holder sends no head until a body of unknown size is verified
        // (its client could not tell a cut from the end): until then only the client's leaving
        // (a cancel), or an hour, ends the exchange.
        let bound = http10 && !headDone ? max(timeouts.stall, Self.http10HeadWait) : timeouts.stall
        return elapsed(since: lastByte) > bound
    }

    /// The longest an HTTP/1.0 exchange waits for the holder's head.
    static let http10HeadWait: Double = 3600

    /// The exchange is over: the answer (or failure) for a waiting handler, the end for a relayed body.
    func finish(ok: Bool, _ detail: String) {
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
