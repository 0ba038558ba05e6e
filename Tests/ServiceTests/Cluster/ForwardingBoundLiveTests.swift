import Foundation
import MiniHTTPServer
import Synchronization
import Testing
@testable import DownloadService

/// The forwarder's bound with a holder that answers slowly: more requests than the bound at once
/// wait their turn and all get the holder's answer, never more than the bound reaching it at once;
/// beyond the waiting bound a request is 503 `held_elsewhere` with `Retry-After`.
@Suite(.timeLimit(.minutes(2)))
struct ForwardingBoundLiveTests {
    /// A holder answering every request `200 {"ok":true}` after `delay` seconds; counts requests
    /// and the most it had at once.
    final class SlowHolder: Sendable {
        let server: HTTPServer
        let port: Int
        /// Requests at the holder now, the most at once, and those answered.
        final class Counts: Sendable {
            let value = Mutex((now: 0, most: 0, answered: 0))
        }

        private let counts = Counts()

        var url: String { "http://127.0.0.1:\(port)" }
        var most: Int { counts.value.withLock { $0.most } }
        var answered: Int { counts.value.withLock { $0.answered } }

        init(delay: Double) throws {
            var configuration = ServerConfiguration()
            configuration.host = "127.0.0.1"
            configuration.port = 0
            configuration.shutdownGracePeriod = 1
            let counts = self.counts
            server = HTTPServer(configuration: configuration) { _ in
                counts.value.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                try? await Task.sleep(for: .seconds(delay))
                counts.value.withLock {
                    $0.now -= 1
                    $0.answered += 1
                }
                return .json(Array(#"{"ok":true}"#.utf8))
            }
            port = try server.start()
        }
    }

    static func forwarder(exchanges: Int, waiting: Int, maxWait: Double) -> PeerForwarder {
        var settings = PeerForwarder.Settings()
        settings.maxExchanges = exchanges
        settings.maxWaiting = waiting
        settings.maxWait = maxWait
        return PeerForwarder(settings: settings)
    }

    /// `count` requests at once on `replica` (`GET /downloads/abc`, forwarded): their statuses and error codes.
    static func askAtOnce(_ replica: InProcessReplica, _ count: Int) async -> [(status: Int, code: String?, retryAfter: String?)] {
        await withTaskGroup(of: (status: Int, code: String?, retryAfter: String?).self) { group in
            for _ in 0..<count {
                group.addTask {
                    guard let answer = try? await replica.client.request("GET", "/downloads/abc") else { return (0, nil, nil) }
                    return (answer.status, ForwardingLiveTests.errorCode(answer), answer.header("Retry-After"))
                }
            }
            var answers: [(status: Int, code: String?, retryAfter: String?)] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
    }

    /// Replica `b` forwarding everything, within `exchanges`/`waiting`/`maxWait`, to a holder answering
    /// after `delay` seconds; `body` runs under a 60 s timeout, then both stop.
    static func withBoundedReplica(delay: Double, exchanges: Int, waiting: Int, maxWait: Double,
                                   _ body: @escaping @Sendable (SlowHolder, InProcessReplica) async throws -> Void) async throws {
        let holder = try SlowHolder(delay: delay)
        let b = try InProcessReplica("b", forwarder: Self.forwarder(exchanges: exchanges, waiting: waiting, maxWait: maxWait))
        b.sendEverything(to: holder.url)
        var failure: (any Error)?
        do { try await withTimeout(60) { try await body(holder, b) } } catch { failure = error }
        await b.stop()
        await holder.server.shutdown()
        if let failure { throw failure }
    }

    /// 200s, and `held_elsewhere` refusals with `Retry-After: 1`, among `answers`.
    static func tally(_ answers: [(status: Int, code: String?, retryAfter: String?)]) -> (succeeded: Int, refused: Int) {
        (answers.filter { $0.status == 200 }.count,
         answers.filter { $0.status == 503 && $0.code == "held_elsewhere" && $0.retryAfter == "1" }.count)
    }

    @Test func moreRequestsThanTheBoundWaitTheirTurnAndAllSucceed() async throws {
        try await Self.withBoundedReplica(delay: 0.5, exchanges: 4, waiting: 32, maxWait: 30) { holder, b in
            let answers = await Self.askAtOnce(b, 20)
            #expect(answers.count == 20)
            #expect(Self.tally(answers).succeeded == 20, "\(answers.map(\.status))")
            #expect(holder.answered == 20)
            #expect(holder.most <= 4)
            #expect(await InProcessReplica.eventually(within: 5) {
                b.api.forwarding.forwarder.exchanges == 0 && b.api.forwarding.forwarder.waiting == 0
            })
        }
    }

    @Test func beyondTheWaitingBoundIs503HeldElsewhere() async throws {
        // All 10 arrive while the first 2 are at the holder (3 s each): 2 run, 3 wait, 5 are refused.
        try await Self.withBoundedReplica(delay: 3, exchanges: 2, waiting: 3, maxWait: 30) { holder, b in
            let answers = await Self.askAtOnce(b, 10)
            let shown = answers.map { "\($0.status) \($0.code ?? "-") \($0.retryAfter ?? "-")" }
            let (succeeded, refused) = Self.tally(answers)
            #expect(succeeded == 5 && refused == 5, "\(shown)")
            #expect(holder.answered == 5 && holder.most <= 2)
        }
    }

    @Test func aRequestWaitingLongerThanTheLongestWaitIs503() async throws {
        // The holder answers after 5 s: the two requests behind the first wait 0.5 s and are refused,
        // also when a loaded machine starts them seconds apart.
        try await Self.withBoundedReplica(delay: 5, exchanges: 1, waiting: 8, maxWait: 0.5) { _, b in
            let answers = await Self.askAtOnce(b, 3)
            let (succeeded, refused) = Self.tally(answers)
            #expect(succeeded == 1 && refused == 2, "\(answers.map(\.status))")
        }
    }
}
