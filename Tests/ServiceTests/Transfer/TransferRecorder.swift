@testable import DownloaderEngine
import Foundation

/// A value that arrives once; `value()` waits for it and gives up when the waiting task is cancelled
/// (so `withTimeout` can end the wait).
final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [UUID: CheckedContinuation<Value?, Never>] = [:]
    }
    private let state = OriginLock(State())

    init() {}

    /// Sets the value (the first call wins) and wakes every waiter.
    func set(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    var current: Value? { state.withLock { $0.value } }

    func value() async throws -> Value {
        let id = UUID()
        let value = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let ready = state.withLock { state -> Value?? in
                    if let value = state.value { return .some(value) }
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
        guard let value else { throw CancellationError() }
        return value
    }
}

/// A sink that keeps every byte, can fail on demand, and notices writes after the attempt finished.
final class CollectingSink: BodySink, @unchecked Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var writes = 0
        var writesAfterFinish = 0
        var finished = false
    }
    private let state = OriginLock(State())
    /// Fires once at least `threshold` bytes arrived.
    let reachedThreshold = OneShot<Int>()
    private let threshold: Int
    private let failure: Error?

    init(threshold: Int = .max, failWith failure: Error? = nil) {
        self.threshold = threshold
        self.failure = failure
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if let failure { throw failure }
        let total = state.withLock { state -> Int in
            state.writes += 1
            if state.finished { state.writesAfterFinish += 1 }
            state.bytes.append(contentsOf: bytes)
            return state.bytes.count
        }
        if total >= threshold { reachedThreshold.set(total) }
    }

    var bytes: [UInt8] { state.withLock { $0.bytes } }
    var count: Int { state.withLock { $0.bytes.count } }
    var writesAfterFinish: Int { state.withLock { $0.writesAfterFinish } }
    func markFinished() { state.withLock { $0.finished = true } }
}

/// A `TransferDelegate` that records heads and the outcome. By default it accepts 2xx heads into
/// `sink` and rejects others, like the engine does.
final class TransferRecorder: TransferDelegate, @unchecked Sendable {
    let sink: CollectingSink
    let finished = OneShot<Result<TransferSummary, TransferFailure>>()
    let headArrived = OneShot<ResponseHead>()
    private let decide: @Sendable (ResponseHead) -> TransferFailure?
    private let state = OriginLock<(heads: [ResponseHead], finishes: Int)>(([], 0))

    init(sink: CollectingSink = CollectingSink(),
         decide: @escaping @Sendable (ResponseHead) -> TransferFailure? = { head in
             (200..<300).contains(head.status) ? nil : TransferFailure(.rejected, "status \(head.status)")
         }) {
        self.sink = sink
        self.decide = decide
    }

    func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
        state.withLock { $0.heads.append(head) }
        headArrived.set(head)
        if let failure = decide(head) { return .failure(failure) }
        return .success(sink)
    }

    func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
        sink.markFinished()
        state.withLock { $0.finishes += 1 }
        finished.set(result)
    }

    var heads: [ResponseHead] { state.withLock { $0.heads } }
    var finishCount: Int { state.withLock { $0.finishes } }

    /// Waits (bounded) for the outcome.
    func outcome(timeout: Double = 20) async throws -> Result<TransferSummary, TransferFailure> {
        try await withTimeout(timeout) { try await self.finished.value() }
    }

    /// Waits for the outcome and returns the failure kind, or nil on success.
    func failureKind(timeout: Double = 20) async throws -> TransferFailure.Kind? {
        if case .failure(let failure) = try await outcome(timeout: timeout) { return failure.kind }
        return nil
    }
}

extension TransferRequest {
    /// A plain attempt for tests: loopback allowed, short timeouts.
    static func test(_ url: String, headers: [(name: String, value: String)] = [], stallTimeout: Double = 10,
                     maxBodyBytes: Int64? = nil, maxRedirects: Int = 5, allowPrivateNetworks: Bool = true) -> TransferRequest {
        TransferRequest(url: url, headers: headers, connectTimeout: 5, stallTimeout: stallTimeout,
                        maxBodyBytes: maxBodyBytes, maxRedirects: maxRedirects,
                        allowPrivateNetworks: allowPrivateNetworks, userAgent: "transfer-tests/1")
    }
}
