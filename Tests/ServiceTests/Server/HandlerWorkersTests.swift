import Foundation
import Synchronization
import Testing
@testable import MiniHTTPServer

/// A counter that lives on another executor: awaiting it suspends the handler for real.
private actor Counter {
    private var value = 0
    func increment() -> Int {
        value += 1
        return value
    }
}

/// The loop's handler workers: handlers of many connections share a few tasks, and a handler that
/// suspends (or is cancelled) must never delay or disturb another connection's request.
@Suite("HTTPServer handler workers")
struct HandlerWorkersTests {
    @Test func cancellationOfALeavingClientDoesNotReachOtherConnections() async throws {
        let entered = Gate()
        let sawCancel = Gate()
        let handler: HTTPHandler = { request in
            switch request.path {
            case "/hold":
                // A stream is cancelled when its client leaves (a plain handler is not: the
                // server does not read while it answers).
                return Response(body: .stream { writer in
                    try await writer.write(Array("hello".utf8))
                    entered.open()
                    do {
                        try await Task.sleep(nanoseconds: 60_000_000_000)
                    } catch {
                        sawCancel.open()
                        throw error
                    }
                })
            default:
                return Response(body: .bytes(Array((Task.isCancelled ? "cancelled" : "fresh").utf8)))
            }
        }
        try await withServer(handler: handler) { port in
            let leaving = try await RawHTTPClient.connect(port: port)
            try await leaving.send(get("/hold"))
            _ = try await leaving.readResponseHead()
            #expect(try await leaving.readChunk() == Array("hello".utf8))
            await entered.wait()
            leaving.close()
            await sawCancel.wait()  // the held handler learns its client left
            let other = try await RawHTTPClient.connect(port: port)
            for _ in 0..<5 {
                try await other.send(get("/check"))
                #expect(try await other.readResponse().bodyText == "fresh")
            }
            // Pipelined requests on a second connection are answered in order by a fresh worker too.
            let pipelined = try await RawHTTPClient.connect(port: port)
            try await pipelined.send(String(repeating: get("/check"), count: 10))
            for _ in 0..<10 {
                #expect(try await pipelined.readResponse().bodyText == "fresh")
            }
        }
    }

    @Test func manySuspendedHandlersDoNotHoldUpAQuickOne() async throws {
        let release = Gate()
        let entered = Mutex(0)
        let allEntered = Gate()
        let waiters = 20
        let handler: HTTPHandler = { request in
            if request.path == "/wait" {
                let count = entered.withLock { n -> Int in
                    n += 1
                    return n
                }
                if count == waiters { allEntered.open() }
                await release.wait()
                return Response(body: .bytes(Array("waited".utf8)))
            }
            return Response(body: .bytes(Array("ok".utf8)))
        }
        try await withServer(handler: handler) { port in
            var held: [RawHTTPClient] = []
            for _ in 0..<waiters {
                let client = try await RawHTTPClient.connect(port: port)
                try await client.send(get("/wait"))
                held.append(client)
            }
            await allEntered.wait()  // every handler is suspended, each on its own worker
            let quick = try await RawHTTPClient.connect(port: port)
            try await quick.send(String(repeating: get("/ok"), count: 5))
            for _ in 0..<5 {
                #expect(try await quick.readResponse().bodyText == "ok")
            }
            release.open()
            for client in held {
                #expect(try await client.readResponse().bodyText == "waited")
            }
        }
    }

    @Test func suspendingAndImmediateHandlersInterleaveOnManyConnections() async throws {
        let counter = Counter()
        let handler: HTTPHandler = { request in
            if request.path.hasPrefix("/actor") {
                let n = await counter.increment()  // suspends: runs on the actor, then comes back
                return Response(body: .bytes(Array("a\(n > 0)\(request.path.dropFirst(6))".utf8)))
            }
            return Response(body: .bytes(Array("i\(request.path.dropFirst(2))".utf8)))
        }
        try await withServer(handler: handler) { port in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for c in 0..<8 {
                    group.addTask {
                        let client = try await RawHTTPClient.connect(port: port)
                        for i in 0..<40 {
                            let suspending = (i + c) % 3 == 0
                            try await client.send(get(suspending ? "/actor\(c)-\(i)" : "/i\(c)-\(i)"))
                            let body = try await client.readResponse().bodyText
                            #expect(body == (suspending ? "atrue\(c)-\(i)" : "i\(c)-\(i)"))
                        }
                        client.close()
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}
