import CLinux
import Foundation
import Testing
@testable import MiniHTTPServer

/// `ServerConfiguration.loopThreadNice`: the pure clamping, and that started loop threads (only
/// they) run at the configured nice value, which handlers on the loop see too.
@Suite("Event-loop thread nice value")
struct LoopThreadNiceTests {
    @Test(arguments: [(-5, 0), (0, 0), (1, 1), (10, 10), (19, 19), (20, 19), (1000, 19)])
    func clampsToWhatAnUnprivilegedThreadMayAsk(requested: Int, expected: Int) {
        #expect(ThreadNice.clamped(requested) == expected)
    }

    @Test(arguments: [
        (0, 0, nil), (0, 10, 10), (0, -3, nil), (5, 10, 10), (10, 10, nil), (15, 10, nil), (0, 40, 19),
    ] as [(Int, Int, Int?)])
    func onlyEverLowers(current: Int, requested: Int, expected: Int?) {
        #expect(ThreadNice.target(current: current, requested: requested) == expected)
    }

    /// The nice value of kernel thread `tid` of this process, from /proc (field 19 of stat).
    static func niceOf(thread tid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8)
        // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
        let afterName = try #require(stat.range(of: ")", options: .backwards)).upperBound
        let fields = stat[afterName...].split(separator: " ")
        return try #require(Int(fields[16]))  // field 19 overall: state is field 3 = fields[0]
    }

    /// Starts `loops` loops at the nice value `nice(base)`, where `base` is the starting thread's
    /// (a test may run niced: `nice swift test`, or on a thread a niced loop created); `body` gets
    /// the port, the loops' kernel thread ids and the value asked for.
    static func withServer(loops: Int, nice: (_ base: Int) -> Int,
                           _ body: @escaping @Sendable (Int, [Int32], _ asked: Int, _ base: Int) async throws -> Void) async throws {
        let base = ThreadNice.current
        let asked = nice(base)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.eventLoopCount = loops
        configuration.loopThreadNice = asked
        configuration.shutdownGracePeriod = 2
        let server = HTTPServer(configuration: configuration) { _ in
            // Where a handler that does not hop runs: on its loop thread, at its nice value.
            Response(body: .bytes(Array("\(ThreadNice.currentThreadID) \(ThreadNice.current)".utf8)))
        }
        let port = try server.start()
        let threads = server.eventLoopKernelThreadIDs
        do {
            try await withTimeout(30) { try await body(port, threads, asked, base) }
            await server.shutdown()
        } catch {
            await server.shutdown()
            throw error
        }
    }

    @Test(.enabled(if: ThreadNice.current < ThreadNice.maximum, "the test thread is already at the lowest priority"))
    func startedLoopThreadsReportTheConfiguredNiceAndNothingElseChanges() async throws {
        let mainThread = getpid()
        let mainBefore = try Self.niceOf(thread: mainThread)
        try await Self.withServer(loops: 2, nice: { base in min(base + 5, ThreadNice.maximum) }) { port, threads, asked, base in
            #expect(asked > base)
            #expect(threads.count == 2 && !threads.contains(0))
            for tid in threads { #expect(try Self.niceOf(thread: tid) == asked) }
            // The process's other threads keep their priority (per-thread, not per-process).
            #expect(try Self.niceOf(thread: mainThread) == mainBefore)
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/who"))
            let parts = try await client.readResponse().bodyText.split(separator: " ")
            #expect(parts.count == 2 && threads.contains(Int32(parts[0]) ?? -1) && parts[1] == "\(asked)")
        }
    }

    @Test func byDefaultLoopsKeepTheStartingThreadsPriority() async throws {
        #expect(ServerConfiguration().loopThreadNice == 0)
        try await Self.withServer(loops: 1, nice: { _ in 0 }) { _, threads, _, base in
            let nice = try Self.niceOf(thread: threads[0])
            #expect(nice == base)
        }
    }
}
