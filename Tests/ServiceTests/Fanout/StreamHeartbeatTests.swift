import Foundation
import Synchronization
import Testing
@testable import MiniHTTPServer

/// `ResponseBodyWriter.setIdleHeartbeat`: the decision table and the live behaviour.
@Suite struct StreamHeartbeatTests {
    private static let second: UInt64 = 1_000_000_000

    @Test(arguments: [
        // (now, last output at, output queued, expected)
        (10 * second, 10 * second, false, StreamHeartbeat.Decision.wait(until: 25 * second)),
        (20 * second, 10 * second, false, .wait(until: 25 * second)),
        (25 * second, 10 * second, false, .write),
        (40 * second, 10 * second, false, .write),
        (40 * second, 10 * second, true, .wait(until: 55 * second)),  // client not reading: add nothing
        (11 * second, 10 * second, true, .wait(until: 26 * second)),
    ])
    func decision(now: UInt64, lastOutputAt: UInt64, queued: Bool, expected: StreamHeartbeat.Decision) {
        let heartbeat = StreamHeartbeat(sequence: 1, bytes: [0x3A], interval: 15 * Self.second)
        #expect(heartbeat.decide(now: now, lastOutputAt: lastOutputAt, outputQueued: queued) == expected)
    }

    /// A stream that writes nothing gets the heartbeat bytes, again and again, from the server.
    @Test func idleStreamGetsHeartbeats() async throws {
        let release = Gate()
        let supported = Atomic<Bool>(false)
        let handler: HTTPHandler = { _ in
            Response(headers: ["Content-Type": "text/event-stream"], body: .stream { writer in
                supported.store(writer.setIdleHeartbeat(Array(": keep-alive\n\n".utf8), after: 0.05), ordering: .relaxed)
                try await writer.write(Array("first\n".utf8))
                await release.wait()
            })
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/events"))
            _ = try await client.readResponseHead()
            #expect(try await client.readChunk() == Array("first\n".utf8))
            // Bounded by the client's receive timeout and withServer's 30 s.
            #expect(try await client.readChunk() == Array(": keep-alive\n\n".utf8))
            #expect(try await client.readChunk() == Array(": keep-alive\n\n".utf8))
            release.open()
            // The stream ends normally (a heartbeat may still come before the last chunk).
            while let chunk = try await client.readChunk() {
                #expect(chunk == Array(": keep-alive\n\n".utf8))
            }
        }
        let heartbeatSupported = supported.load(ordering: .relaxed)
        #expect(heartbeatSupported)
    }

    /// Heartbeats never go into a queue a writer is waiting on: a stream pushing far more than the
    /// high watermark with a very short heartbeat interval delivers every byte and ends cleanly.
    @Test func heartbeatDoesNotDisturbAWriterWaitingForDrain() async throws {
        let outcome = Mutex<String>("")
        let payload = Array(repeating: UInt8(ascii: "x"), count: 16 * 1024)
        let handler: HTTPHandler = { _ in
            Response(body: .stream { writer in
                _ = writer.setIdleHeartbeat(Array(":\n\n".utf8), after: 0.001)
                do {
                    for _ in 0..<256 { try await writer.write(payload) }  // 4 MiB through a 64 KiB window
                    outcome.withLock { $0 = "finished" }
                } catch {
                    outcome.withLock { $0 = "threw \(error)" }
                }
            })
        }
        try await withServer(configure: { $0.writeHighWatermark = 64 * 1024; $0.writeLowWatermark = 16 * 1024 },
                             handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/stream"))
            let response = try await client.readResponse()
            let text = response.body.filter { $0 == UInt8(ascii: "x") }.count
            #expect(text == 256 * 16 * 1024)
            // Whatever else arrived is whole heartbeats.
            let rest = response.body.filter { $0 != UInt8(ascii: "x") }
            #expect(rest.count % 3 == 0)
        }
        #expect(outcome.withLock { $0 } == "finished")
    }
}
