import Foundation
import Testing
@testable import DownloaderEngine

/// A scripted stand-in for the libcurl driver: records every attempt, and either plays a script
/// (head, body chunks, end) on a background queue or waits for the test to drive it.
final class FakeTransferDriver: TransferStarting, @unchecked Sendable {
    /// What an automatic attempt does.
    struct Script: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        /// Stop after this many body bytes and fail with `failure` (nil: deliver all and succeed).
        var cutAfter: Int?
        var failure: TransferFailure.Kind = .connection
        var chunk = 1000
    }

    private let lock = NSLock()
    private(set) var transfers: [FakeTransfer] = []
    private var waiters: [(key: Int, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var nextWaiter = 0
    /// nil: the attempt stays pending for manual control.
    private let responder: @Sendable (TransferRequest, Int) -> Script?
    /// Runs inside `start`, before the engine holds the handle (an answer that comes first).
    var onStart: (@Sendable (FakeTransfer, Int) -> Void)?

    init(responder: @escaping @Sendable (TransferRequest, Int) -> Script? = { _, _ in nil }) {
        self.responder = responder
    }

    var startCount: Int { lock.lock(); defer { lock.unlock() }; return transfers.count }

    func transfer(_ index: Int) -> FakeTransfer { lock.lock(); defer { lock.unlock() }; return transfers[index] }

    func start(_ request: TransferRequest, delegate: TransferDelegate) -> TransferHandle {
        let transfer = FakeTransfer(request: request, delegate: delegate)
        lock.lock()
        transfers.append(transfer)
        let index = transfers.count - 1
        let ready = waiters.filter { $0.count <= transfers.count }
        waiters.removeAll { $0.count <= transfers.count }
        lock.unlock()
        ready.forEach { $0.continuation.resume() }
        onStart?(transfer, index)
        if let script = responder(request, index) {
            DispatchQueue.global().async { transfer.play(script) }
        }
        return transfer
    }

    /// Waits until at least `count` attempts started; returns early when the task is cancelled.
    func waitForStarts(_ count: Int) async {
        let key = lock.withLock {
            nextWaiter += 1
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                lock.lock()
                if transfers.count >= count || Task.isCancelled {
                    lock.unlock()
                    c.resume()
                } else {
                    waiters.append((key, count, c))
                    lock.unlock()
                }
            }
        } onCancel: {
            lock.lock()
            let mine = waiters.filter { $0.key == key }
            waiters.removeAll { $0.key == key }
            lock.unlock()
            mine.forEach { $0.continuation.resume() }
        }
    }
}

final class FakeTransfer: TransferHandle, @unchecked Sendable {
    let request: TransferRequest
    let delegate: TransferDelegate
    private let lock = NSLock()
    private var sink: BodySink?
    private var finished = false
    /// A body chunk is being handed to the sink; an end told meanwhile (a cancel from another
    /// thread, or from the sink itself) waits in `endAfterSend` until it returns: as on libcurl's
    /// loop thread, the end never overlaps a write nor comes before it returns.
    private var sending = false
    private var endAfterSend: Result<TransferSummary, TransferFailure>?
    private(set) var cancelled = false
    private var written: Int64 = 0
    private var head: ResponseHead?

    init(request: TransferRequest, delegate: TransferDelegate) {
        self.request = request
        self.delegate = delegate
    }

    func header(_ name: String) -> String? {
        request.headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var isCancelled: Bool { lock.lock(); defer { lock.unlock() }; return cancelled }

    func cancel() {
        lock.lock()
        cancelled = true
        lock.unlock()
        end(.failure(TransferFailure(.cancelled, "cancelled")))
    }

    /// Sends the head; returns whether the engine accepted the body.
    @discardableResult
    func respond(_ status: Int, _ headers: [String: String] = [:]) -> Bool {
        let h = ResponseHead(status: status, headers: headers.reduce(into: [:]) { $0[$1.key.lowercased()] = [$1.value] },
                             effectiveURL: request.url)
        head = h
        switch delegate.transfer(didReceive: h) {
        case .success(let s):
            lock.lock(); sink = s; lock.unlock()
            return true
        case .failure(let f):
            end(.failure(f))
            return false
        }
    }

    func send(_ bytes: [UInt8]) throws {
        lock.lock()
        guard let s = sink, !finished else {
            lock.unlock()
            return
        }
        sending = true
        lock.unlock()
        defer {
            lock.lock()
            sending = false
            let ended = endAfterSend
            endAfterSend = nil
            lock.unlock()
            if let ended { delegate.transfer(didFinishWith: ended) }
        }
        try bytes.withUnsafeBytes { try s.write($0) }
        lock.lock(); written += Int64(bytes.count); lock.unlock()
    }

    func finish() {
        guard let head else { return }
        end(.success(TransferSummary(head: head, bodyBytes: written)))
    }

    func fail(_ kind: TransferFailure.Kind, _ message: String = "fake failure", code: Int32? = nil) {
        end(.failure(TransferFailure(kind, message, code: code)))
    }

    private func end(_ result: Result<TransferSummary, TransferFailure>) {
        lock.lock()
        if finished { lock.unlock(); return }
        finished = true
        if sending {
            endAfterSend = result
            lock.unlock()
            return
        }
        lock.unlock()
        delegate.transfer(didFinishWith: result)
    }

    func play(_ script: FakeTransferDriver.Script) {
        guard respond(script.status, script.headers) else { return }
        let limit = script.cutAfter ?? script.body.count
        var offset = 0
        while offset < limit {
            if isCancelled { return }
            let end = min(limit, offset + script.chunk)
            do {
                try send(Array(script.body[offset..<end]))
            } catch let failure as TransferFailure {
                fail(failure.kind, failure.message); return  // As CurlTransfer: the sink chose its failure.
            } catch {
                fail(.disk, "\(error)"); return
            }
            offset = end
        }
        if script.cutAfter != nil { fail(script.failure) } else { finish() }
    }
}

/// Helpers shared by the engine tests.
enum EngineFixture {
    /// All engine test roots live here; roots older than 15 minutes (earlier runs) are swept once
    /// per process, so runs do not pile up directories.
    static let parent: URL = {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("engine-tests")
        let fm = FileManager.default
        let cutoff = Date().addingTimeInterval(-15 * 60)
        for name in (try? fm.contentsOfDirectory(atPath: parent.path)) ?? [] {
            let url = parent.appendingPathComponent(name)
            if let modified = (try? fm.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date, modified < cutoff {
                try? fm.removeItem(at: url)
            }
        }
        return parent
    }()

    static func root() -> URL {
        let url = parent.appendingPathComponent(UUID().uuidString)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func configuration(_ root: URL) -> EngineConfiguration {
        var c = EngineConfiguration(root: root)
        c.retryBaseDelay = 0.01
        c.retryMaxDelay = 0.05
        c.maxAttempts = 4
        c.progressInterval = 0
        c.allowPrivateNetworks = true
        return c
    }

    /// Timers of a second or less (retries, trailing progress, journal batching) run at once on a
    /// `EagerScheduler`: no test here waits on real time for them.
    static func engine(_ root: URL, driver: FakeTransferDriver, scheduler: Scheduler = EagerScheduler(),
                       configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        var c = configuration(root)
        configure(&c)
        return try DownloadEngine(configuration: c, driver: driver, scheduler: scheduler, diskPressure: .disabled)
    }

    static func body(_ count: Int, seed: UInt8 = 1) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &* 7 &+ ($0 >> 8)) }
    }

    /// Collects events until `stop` says so (bounded by the caller's timeout).
    static func events(_ subscription: DownloadSubscription, until stop: @escaping @Sendable (DownloadEvent) -> Bool) async -> [DownloadEvent] {
        var out: [DownloadEvent] = []
        for await event in subscription {
            out.append(event)
            if stop(event) { break }
        }
        return out
    }

    /// The caller `token` leaves; waits (cancellation-aware) for the `.paused` event that follows once
    /// the partial is settled, or a terminal event when the download ended first. Returns that event.
    static func cancelAndSettle(_ engine: DownloadEngine, token: String, id: String) async throws -> DownloadEvent {
        guard let subscription = engine.subscribe(id: id) else { throw TimeoutError(seconds: 0) }
        _ = engine.cancel(token: token)
        return try await withTimeout(10) {
            for await event in subscription {
                if case .paused = event { return event }
                if event.isTerminal { return event }
            }
            throw TimeoutError(seconds: 10)
        }
    }

    /// Requests `url`, answers its attempt (the `index`-th start on `driver`) with a 200 and `headers`,
    /// sends `bytes`, then (when `pause`) lets the only caller leave and waits until the partial is
    /// settled (`cancelAndSettle`): a paused download keeping `bytes`. Returns the request's answer.
    @discardableResult
    static func partial(_ engine: DownloadEngine, driver: FakeTransferDriver, url: String, attempt index: Int = 0,
                        headers: [String: String], sending bytes: [UInt8], pause: Bool = true,
                        client: String? = nil) async throws -> Enqueued {
        let r = try engine.request(DownloadRequest(url: url, clientGroup: client))
        try await withTimeout(20) { await driver.waitForStarts(index + 1) }
        let t = driver.transfer(index)
        #expect(t.respond(200, headers))
        try t.send(bytes)
        if pause {
            let settled = try await cancelAndSettle(engine, token: r.token, id: r.snapshot.id)
            guard case .paused = settled else { Issue.record("not paused: \(settled)"); return r }
        }
        return r
    }

    /// Requests `request`, then waits (`timeout` seconds at most) until its download reaches one of `states`.
    static func requestAndWait(_ engine: DownloadEngine, _ request: DownloadRequest, until states: Set<DownloadState>,
                               timeout: Double = 5) async throws -> (Enqueued, DownloadSnapshot) {
        let r = try engine.request(request)
        let s = try await withTimeout(timeout) { try await waitFor(engine, id: r.snapshot.id, states) }
        return (r, s)
    }

    /// Waits for the download to reach one of `states`.
    static func waitFor(_ engine: DownloadEngine, id: String, _ states: Set<DownloadState>) async throws -> DownloadSnapshot {
        guard let subscription = engine.subscribe(id: id) else { throw TimeoutError(seconds: 0) }
        for await event in subscription where states.contains(event.snapshot.state) {
            if case .progress = event, event.snapshot.state == .downloading, !states.contains(.downloading) { continue }
            return engine.snapshot(id: id) ?? event.snapshot
        }
        if let s = engine.snapshot(id: id), states.contains(s.state) { return s }
        throw TimeoutError(seconds: 0)
    }
}
