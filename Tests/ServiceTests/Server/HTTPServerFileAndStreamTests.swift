import Foundation
import Synchronization
import Testing
@testable import MiniHTTPServer

/// Live tests for `.file` and `.stream` bodies and for shutdown.
@Suite("HTTPServer files, streams, shutdown")
struct HTTPServerFileAndStreamTests {
    static func fileHandler(_ path: String) -> HTTPHandler {
        { request in
            switch request.path {
            case "/file": return Response(body: .file(FileResponse(path: path, contentType: "text/plain",
                                                                   contentDisposition: "attachment; filename=\"f.txt\"")))
            case "/tagged": return Response(body: .file(FileResponse(path: path, etag: "\"v1\"")))
            default: return Response(body: .file(FileResponse(path: path + ".missing")))
            }
        }
    }

    static func makeFile(bytes: Int) throws -> (dir: URL, path: String, content: [UInt8]) {
        let dir = try makeTempDirectory()
        let block = (0..<4093).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }  // prime length: ranges differ
        var content: [UInt8] = []
        content.reserveCapacity(bytes)
        while content.count < bytes { content.append(contentsOf: block.prefix(bytes - content.count)) }
        let path = dir.appendingPathComponent("f.txt").path
        try Data(content).write(to: URL(fileURLWithPath: path))
        return (dir, path, content)
    }

    @Test func fileFullRangeHeadAndErrors() async throws {
        let (dir, path, content) = try Self.makeFile(bytes: 1000)
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withServer(handler: Self.fileHandler(path)) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/file"))
            let full = try await client.readResponse()
            #expect(full.status == 200)
            #expect(full.body == content)
            #expect(full.header("Content-Length") == "1000")
            #expect(full.header("Accept-Ranges") == "bytes")
            #expect(full.header("Content-Type") == "text/plain")
            #expect(full.header("Content-Disposition") == "attachment; filename=\"f.txt\"")
            #expect(full.header("Last-Modified") != nil)
            let etag = try #require(full.header("ETag"))
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && !etag.hasPrefix("W/"))

            try await client.send(get("/file", "Range: bytes=10-19\r\n"))
            let partial = try await client.readResponse()
            #expect(partial.status == 206)
            #expect(partial.header("Content-Range") == "bytes 10-19/1000")
            #expect(partial.body == Array(content[10...19]))

            try await client.send(get("/file", "Range: bytes=-5\r\n"))
            #expect(try await client.readResponse().body == Array(content[995...]))

            try await client.send(get("/file", "Range: bytes=0-1,5-6\r\n"))
            let multi = try await client.readResponse()
            #expect(multi.status == 200)
            #expect(multi.body.count == 1000)

            try await client.send(get("/file", "Range: bytes=5000-\r\n"))
            let unsatisfiable = try await client.readResponse()
            #expect(unsatisfiable.status == 416)
            #expect(unsatisfiable.header("Content-Range") == "bytes */1000")
            #expect(unsatisfiable.bodyText == "requested range not satisfiable\n")

            try await client.send(get("/file", "If-None-Match: \(etag)\r\n"))
            let notModified = try await client.readResponse()
            #expect(notModified.status == 304)
            #expect(notModified.header("Content-Length") == nil)

            let lastModified = try #require(full.header("Last-Modified"))
            try await client.send(get("/file", "If-Modified-Since: \(lastModified)\r\n"))
            #expect(try await client.readResponse().status == 304)

            try await client.send(get("/file", "Range: bytes=0-3\r\nIf-Range: \"stale\"\r\n"))
            #expect(try await client.readResponse().status == 200)
            try await client.send(get("/file", "Range: bytes=0-3\r\nIf-Range: \(etag)\r\n"))
            #expect(try await client.readResponse().status == 206)

            try await client.send("HEAD /file HTTP/1.1\r\nHost: t\r\n\r\n")
            let head = try await client.readResponse(bodyless: true)
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "1000")
            // No body was sent: the next response follows directly.
            try await client.send(get("/tagged"))
            let tagged = try await client.readResponse()
            #expect(tagged.header("ETag") == "\"v1\"")
            #expect(tagged.body == content)

            try await client.send(get("/missing"))
            let missing = try await client.readResponse()
            #expect(missing.status == 404)
            #expect(missing.bodyText == "file not found\n")
        }
    }

    @Test func largeFileIsSentCompletely() async throws {
        let (dir, path, content) = try Self.makeFile(bytes: 8 << 20)
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withServer(handler: Self.fileHandler(path)) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/file"))
            let response = try await client.readResponse()
            #expect(response.body.count == content.count)
            #expect(response.body == content)
        }
    }

    @Test func slowReaderIsDroppedAfterWriteTimeout() async throws {
        let (dir, path, _) = try Self.makeFile(bytes: 32 << 20)
        defer { try? FileManager.default.removeItem(at: dir) }
        let recorder = AccessLogRecorder()
        try await withServer(configure: { $0.writeTimeout = 0.3; $0.accessLog = recorder.callback },
                             handler: Self.fileHandler(path)) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/file"))
            // Never read: the server must give up and log a partial response.
            // Empty when the wait was cancelled (the server's time limit): a failure, never a crash.
            let entry = try #require(await recorder.next(1).first)
            #expect(entry.status == 200)
            #expect(entry.bytes < 32 << 20)
            client.close()
        }
    }

    @Test func streamIsDeliveredIncrementally() async throws {
        let gates = (0..<3).map { _ in Gate() }
        let handler: HTTPHandler = { _ in
            Response(headers: ["Content-Type": "text/event-stream"], body: .stream { writer in
                for (i, gate) in gates.enumerated() {
                    await gate.wait()
                    try await writer.write(Array("event \(i)\n".utf8))
                }
            })
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/events"))
            gates[0].open()
            let head = try await client.readResponseHead()
            #expect(head.header("Transfer-Encoding") == "chunked")
            #expect(try await client.readChunk() == Array("event 0\n".utf8))
            gates[1].open()  // only now may the second event exist
            #expect(try await client.readChunk() == Array("event 1\n".utf8))
            gates[2].open()
            #expect(try await client.readChunk() == Array("event 2\n".utf8))
            #expect(try await client.readChunk() == nil)
            try await client.send(get("/again"))
            gates.forEach { $0.open() }
            #expect(try await client.readResponse().bodyText == "event 0\nevent 1\nevent 2\n")
        }
    }

    @Test func streamOnHTTP10IsCloseDelimited() async throws {
        let handler: HTTPHandler = { _ in
            Response(body: .stream { writer in
                try await writer.write(Array("a".utf8))
                try await writer.write(Array("b".utf8))
            })
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send("GET / HTTP/1.0\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.header("Transfer-Encoding") == nil)
            #expect(response.header("Connection") == "close")
            #expect(response.bodyText == "ab")
        }
    }

    @Test func clientDisconnectCancelsStreamAndWritesThrow() async throws {
        let ended = Gate()
        let outcome = Mutex<String>("")
        let handler: HTTPHandler = { _ in
            Response(body: .stream { writer in
                do {
                    for _ in 0..<100_000 {
                        try await writer.write(Array(repeating: 120, count: 1024))
                    }
                    outcome.withLock { $0 = "finished" }
                } catch {
                    outcome.withLock { $0 = "threw" }
                }
                ended.open()
            })
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/stream"))
            _ = try await client.readResponseHead()
            _ = try await client.readChunk()
            client.close()
            await ended.wait()
            #expect(outcome.withLock { $0 } == "threw")
        }
    }

    @Test func writerSuspendsAboveHighWatermark() async throws {
        let written = Atomic<Int>(0)
        let release = Gate()
        let handler: HTTPHandler = { _ in
            Response(body: .stream { writer in
                for _ in 0..<4096 {  // 64 MiB if nothing pushed back
                    try await writer.write(Array(repeating: 120, count: 16 * 1024))
                    written.add(16 * 1024, ordering: .relaxed)
                }
                release.open()
            })
        }
        // The rest is read in one go: read chunk by chunk, each of the 4,096 chunks waited for a thread
        // of the test process's busy cooperative pool (78 s in a suite run at load 20-30, against 1.1 s
        // in one go in the same run; the bound was 30 s, then 120 s, and still failed).
        try await withServer(timeout: 120, configure: { $0.writeHighWatermark = 64 * 1024; $0.writeLowWatermark = 16 * 1024 },
                             handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/stream"))
            _ = try await client.readResponseHead()
            // Reading the whole 64 MiB proves the writer resumes; while we are not reading it must not
            // have run far ahead: sample after the first chunk.
            _ = try await client.readChunk()
            let ahead = written.load(ordering: .relaxed)
            #expect(ahead < 16 << 20, "writer ran \(ahead) bytes ahead of a stalled reader")
            let total = try await 16 * 1024 + client.readRemainingChunks()
            #expect(total == 4096 * 16 * 1024)
            await release.wait()
        }
    }

    @Test func gracefulShutdownFinishesInFlightRequests() async throws {
        let inHandler = Gate()
        let release = Gate()
        let handler: HTTPHandler = { request in
            if request.path == "/wait" {
                inHandler.open()
                await release.wait()
                return Response(body: .bytes(Array("finished".utf8)))
            }
            return Response(body: .bytes(Array("quick".utf8)))
        }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.shutdownGracePeriod = 10
        let server = HTTPServer(configuration: configuration, handler: handler)
        let port = try server.start()
        try await withTimeout(20) {
            let idle = try await RawHTTPClient.connect(port: port)
            try await idle.send(get("/quick"))
            #expect(try await idle.readResponse().bodyText == "quick")

            let busy = try await RawHTTPClient.connect(port: port)
            try await busy.send(get("/wait"))
            await inHandler.wait()

            let shutdown = Task { await server.shutdown() }
            let secondShutdown = Task { await server.shutdown() }  // waits for the same shutdown
            // The idle keep-alive connection is closed at once: shutdown has begun.
            #expect(try await idle.readsEndOfStream())
            release.open()
            let response = try await busy.readResponse()
            #expect(response.bodyText == "finished")
            #expect(response.header("Connection") == "close")
            await shutdown.value
            await secondShutdown.value
            await #expect(throws: (any Error).self) { _ = try await RawHTTPClient.connect(port: port) }
        }
    }

    @Test func shutdownCancelsStreams() async throws {
        let handler: HTTPHandler = { _ in
            Response(body: .stream { writer in
                try await writer.write(Array("first".utf8))
                try await Task.sleep(nanoseconds: 60_000_000_000)  // ends only by cancellation
            })
        }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.shutdownGracePeriod = 10
        let server = HTTPServer(configuration: configuration, handler: handler)
        let port = try server.start()
        try await withTimeout(20) {
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/events"))
            _ = try await client.readResponseHead()
            #expect(try await client.readChunk() == Array("first".utf8))
            await server.shutdown()  // must not wait for the 10 s grace period
            #expect(try await client.readChunk() == nil)
        }
    }
}
