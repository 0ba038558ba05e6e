import Foundation
import Synchronization
import Testing
@testable import MiniHTTPServer

/// Several event loops: connections are handed out round-robin and stay on their loop; shutdown
/// stops every loop; port 0 gives one port for all of them.
@Suite("HTTPServer event loops")
struct HTTPServerEventLoopsTests {
    /// The handler answers "<path> on <pthread id>": it runs on its connection's loop thread.
    static let whoAmI: HTTPHandler = { request in
        Response(body: .bytes(Array("\(request.path) on \(UInt(pthread_self()))".utf8)))
    }

    /// Which loop (index into `threads`) answered `text`; nil when none did.
    static func loopIndex(_ text: String, _ threads: [UInt]) -> Int? {
        guard let id = text.split(separator: " ").last.flatMap({ UInt($0) }) else { return nil }
        return threads.firstIndex(of: id)
    }

    /// Starts a server on port 0 with `loops` event loops, runs `body`, always shuts it down.
    static func withLoops(_ loops: Int, _ body: @escaping @Sendable (_ port: Int, _ threads: [UInt]) async throws -> Void) async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.eventLoopCount = loops
        configuration.shutdownGracePeriod = 2
        let server = HTTPServer(configuration: configuration, handler: whoAmI)
        let port = try server.start()
        let threads = server.eventLoopThreadIDs
        do {
            try await withTimeout(30) { try await body(port, threads) }
            await server.shutdown()
        } catch {
            await server.shutdown()
            throw error
        }
    }

    @Test func defaultLoopCountIsHalfTheOnlineCPUs() {
        let configuration = ServerConfiguration()
        #expect(configuration.eventLoopCount == max(1, ProcessInfo.processInfo.activeProcessorCount / 2))
        #expect(configuration.eventLoopCount == ServerConfiguration.defaultEventLoopCount)
    }

    @Test func severalLoopsServeConcurrentConnectionsEachOnItsOwnLoop() async throws {
        try await Self.withLoops(3) { port, threads in
            #expect(threads.count == 3 && Set(threads).count == 3 && !threads.contains(0))
            // Connected and answered one after another: accept order is connection order, so the
            // round-robin hand-out gives each loop two of the six.
            var clients: [RawHTTPClient] = []
            var loopOf: [Int] = []
            for i in 0..<6 {
                let client = try await RawHTTPClient.connect(port: port)
                try await client.send(get("/first\(i)"))
                let text = try await client.readResponse().bodyText
                #expect(text.hasPrefix("/first\(i) on "))
                clients.append(client)
                loopOf.append(Self.loopIndex(text, threads) ?? -1)
            }
            #expect(loopOf == [0, 1, 2, 0, 1, 2])

            // Then all at once, several keep-alive requests each: every answer comes from the
            // connection's own loop.
            let all = clients, expected = loopOf
            try await withThrowingTaskGroup(of: Int.self) { group in
                for (i, client) in all.enumerated() {
                    group.addTask {
                        var ok = 0
                        for round in 0..<5 {
                            try await client.send(get("/c\(i)r\(round)"))
                            let text = try await client.readResponse().bodyText
                            if text.hasPrefix("/c\(i)r\(round) on "), Self.loopIndex(text, threads) == expected[i] { ok += 1 }
                        }
                        return ok
                    }
                }
                var ok = 0
                for try await n in group { ok += n }
                #expect(ok == 30)
            }
            for client in all { client.close() }
        }
    }

    @Test func shutdownWithSeveralLoopsStopsEveryLoopAndClosesEveryConnection() async throws {
        let started = Gate(), release = Gate()
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.eventLoopCount = 4
        configuration.shutdownGracePeriod = 5
        let server = HTTPServer(configuration: configuration) { request in
            if request.path == "/hold" {
                started.open()
                await release.wait()
            }
            return Response(body: .bytes(Array("done \(request.path)".utf8)))
        }
        let port = try server.start()
        let listening = Self.listeningSockets(port: port)
        #expect(!listening.isEmpty)
        try await withTimeout(30) {
            var idle: [RawHTTPClient] = []
            for i in 0..<7 {
                let client = try await RawHTTPClient.connect(port: port)
                try await client.send(get("/idle\(i)"))
                #expect(try await client.readResponse().bodyText == "done /idle\(i)")
                idle.append(client)
            }
            let busy = try await RawHTTPClient.connect(port: port)  // the 8th: on the last loop
            try await busy.send(get("/hold"))
            await started.wait()

            async let stopped: Void = server.shutdown()
            release.open()
            // The request in flight finishes within the grace period, closing the connection.
            let answer = try await busy.readResponse()
            #expect(answer.bodyText == "done /hold")
            #expect(try await busy.readsEndOfStream())
            for client in idle { #expect(try await client.readsEndOfStream()) }
            await stopped
            await server.shutdown()  // a second call returns at once
            // Its listening sockets are closed. (Not "a connect to the port fails": under parallel
            // tests another server may be given the same port at once.)
            #expect(Self.listeningSockets(port: port).isEmpty)
        }
    }

    /// This process's listening TCP sockets on `port`, as `socket:[inode]` (`/proc/net/tcp*`
    /// entries in state LISTEN, matched with this process's descriptors).
    static func listeningSockets(port: Int) -> Set<String> {
        let hexPort = String(format: ":%04X", port)
        var inodes: Set<String> = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                if fields.count > 9, fields[1].hasSuffix(hexPort), fields[3] == "0A" { inodes.insert("socket:[\(fields[9])]") }
            }
        }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") })
            .intersection(inodes)
    }

    @Test func portZeroGivesOnePortForEveryLoop() async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.eventLoopCount = 4
        let a = HTTPServer(configuration: configuration, handler: Self.whoAmI)
        let b = HTTPServer(configuration: configuration, handler: Self.whoAmI)
        let portA = try a.start()
        let portB = try b.start()
        #expect(portA > 0 && portB > 0 && portA != portB)
        #expect(throws: (any Error).self) { _ = try a.start() }
        let threadsA = a.eventLoopThreadIDs, threadsB = b.eventLoopThreadIDs
        try await withTimeout(30) {
            var loops: [Int] = []
            for i in 0..<8 {
                let client = try await RawHTTPClient.connect(port: portA)
                try await client.send(get("/a\(i)", "Connection: close\r\n"))
                let text = try await client.readResponse().bodyText
                #expect(text.hasPrefix("/a\(i) on "))
                loops.append(Self.loopIndex(text, threadsA) ?? -1)
            }
            #expect(loops == [0, 1, 2, 3, 0, 1, 2, 3])
            let client = try await RawHTTPClient.connect(port: portB)
            try await client.send(get("/b"))
            #expect(Self.loopIndex(try await client.readResponse().bodyText, threadsB) == 0)
        }
        await a.shutdown()
        await b.shutdown()
        #expect(a.eventLoopThreadIDs.isEmpty)
    }

    @Test func loopCountBelowOneMeansOneLoop() async throws {
        try await Self.withLoops(0) { port, threads in
            #expect(threads.count == 1)
            for i in 0..<3 {
                let client = try await RawHTTPClient.connect(port: port)
                try await client.send(get("/x\(i)"))
                #expect(Self.loopIndex(try await client.readResponse().bodyText, threads) == 0)
            }
        }
    }
}
