import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// A segmented attempt's crew opens the descriptor its fetches write through and closes it when it
/// goes. The attempt holds the crew, and a running transfer holds its delegate, as libcurl's loop
/// holds a transfer until it ended. A download removed while its first connection was still being
/// started left nothing holding the attempt once that connection had ended: the crew went, closed
/// the descriptor, and the fetches' cancels, which end on the loop's next turn, then wrote their
/// gathered bytes through a closed (or reused) descriptor, and the crew's hashing waited forever.
@Suite struct SegmentCrewLifetimeTests {
    /// Transfers ended only by the test. A cancel is recorded and ends nothing (the loop ends it on
    /// its next turn: `endCancelled`); a transfer lets its delegate go once it ended.
    final class ManualDriver: TransferStarting, @unchecked Sendable {
        final class Handle: TransferHandle, @unchecked Sendable {
            let index: Int
            private let lock = NSLock()
            private var delegate: TransferDelegate?
            private var sink: BodySink?
            private var head: ResponseHead?
            private var cancelAsked = false
            private var sent: Int64 = 0

            init(index: Int, delegate: TransferDelegate) {
                self.index = index
                self.delegate = delegate
            }

            var target: TransferDelegate? { lock.withLock { delegate } }
            var wasCancelled: Bool { lock.withLock { cancelAsked } }

            func cancel() { lock.withLock { cancelAsked = true } }

            @discardableResult
            func respond(_ status: Int, _ headers: [String: String]) -> Bool {
                let h = ResponseHead(status: status, headers: headers.reduce(into: [:]) { $0[$1.key.lowercased()] = [$1.value] },
                                     effectiveURL: "http://o.test/big.bin")
                guard let delegate = target else { return false }
                head = h
                switch delegate.transfer(didReceive: h) {
                case .success(let s): lock.withLock { sink = s }; return true
                case .failure(let f): end(.failure(f)); return false
                }
            }

            func send(_ bytes: ArraySlice<UInt8>) throws {
                guard let sink = lock.withLock({ sink }) else { return }
                try bytes.withUnsafeBytes { try sink.write($0) }
                lock.withLock { sent += Int64(bytes.count) }
            }

            func finish() {
                guard let head else { return }
                end(.success(TransferSummary(head: head, bodyBytes: lock.withLock { sent })))
            }

            func endCancelled() { end(.failure(TransferFailure(.cancelled, "cancelled"))) }

            private func end(_ result: Result<TransferSummary, TransferFailure>) {
                let delegate = lock.withLock { () -> TransferDelegate? in
                    defer { self.delegate = nil; sink = nil }
                    return self.delegate
                }
                delegate?.transfer(didFinishWith: result)
            }
        }

        private let handles = Mutex<[Handle]>([])
        var onStart: (@Sendable (Handle) -> Void)?

        func start(_ request: TransferRequest, delegate: TransferDelegate) -> TransferHandle {
            let handle = handles.withLock { list in
                let handle = Handle(index: list.count, delegate: delegate)
                list.append(handle)
                return handle
            }
            onStart?(handle)
            return handle
        }

        var started: [Handle] { handles.withLock { $0 } }
    }

    @Test func aRemovedDownloadsCrewOutlivesItsRunningFetches() async throws {
        let body = EngineFixture.body(40_000)
        let driver = ManualDriver()
        let root = EngineFixture.root()
        var c = EngineFixture.configuration(root)
        c.maxConnectionsPerDownload = 4
        c.minimumSegmentBytes = 10_000
        c.segmentProbeSeconds = 0
        let engine = try DownloadEngine(configuration: c, driver: driver, scheduler: EagerScheduler(), diskPressure: .disabled)
        final class Watch: @unchecked Sendable { weak var crew: SegmentCrew?; var removed = false }
        let watch = Watch()
        driver.onStart = { handle in
            switch handle.index {
            case 0:
                // All inside the first connection's start, before the engine holds its handle:
                // the head (the crew starts its fetches), the prefix, its end, then the removal.
                guard let attempt = handle.target as? Attempt,
                      handle.respond(200, ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Length": "40000"]) else { return }
                watch.crew = attempt.crew
                try? handle.send(body[0..<10_000])
                handle.finish()
                watch.removed = engine.remove(id: attempt.recordID) != nil
            default:
                // Each fetch is answered and has bytes gathered, not yet written.
                let first = 10_000 * handle.index
                handle.respond(206, ["ETag": "\"v1\"", "Content-Range": "bytes \(first)-\(first + 9_999)/40000"])
                try? handle.send(body[first..<first + 500])
            }
        }
        let id = try engine.request(DownloadRequest(url: "http://o.test/big.bin", connections: 4)).snapshot.id
        try await withTimeout(20) {
            while driver.started.count < 4 || driver.started.dropFirst().contains(where: { !$0.wasCancelled }) {
                try await Task.sleep(nanoseconds: 5_000_000)
            }
        }
        #expect(watch.removed, "the download was removed inside the first start")
        let fetches = Array(driver.started.dropFirst())
        #expect(fetches.allSatisfy { $0.target is SegmentFetch })
        // The removal cancelled the fetches; the loop has not ended them yet: the crew is still
        // there, and so is the descriptor they write their gathered bytes through.
        #expect(watch.crew != nil, "the crew went while its fetches still run")
        for fetch in fetches { fetch.endCancelled() }
        // Then nothing holds it any more (no cycle kept).
        try await withTimeout(20) {
            while watch.crew != nil { try await Task.sleep(nanoseconds: 5_000_000) }
        }
        #expect(engine.snapshot(id: id) == nil)
        await engine.shutdown()
    }
}
