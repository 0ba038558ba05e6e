import Foundation
import Testing
@testable import MiniHTTPServer

@Suite("HTTPServer protocol details")
struct HTTPServerProtocolDetailTests {
    @Test func idleStreamIsCancelledWhenTheClientLeaves() async throws {
        let cancelled = Gate()
        let handler: HTTPHandler = { _ in
            Response(body: .stream { writer in
                try await writer.write(Array("hello".utf8))
                do {
                    try await Task.sleep(nanoseconds: 60_000_000_000)
                } catch {
                    cancelled.open()
                    throw error
                }
            })
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/events"))
            _ = try await client.readResponseHead()
            #expect(try await client.readChunk() == Array("hello".utf8))
            client.close()
            await cancelled.wait()  // bounded by withServer's timeout
        }
    }

    @Test func expectContinueGetsInterimResponse() async throws {
        let handler: HTTPHandler = { request in Response(body: .bytes(request.body)) }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send("POST /u HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
            let interim = try await client.readResponseHead(interim: true)
            #expect(interim.status == 100)
            try await client.send("data")
            #expect(try await client.readResponse().bodyText == "data")
        }
    }

    @Test func headOnBytesResponseSendsNoBody() async throws {
        let handler: HTTPHandler = { _ in Response(body: .bytes(Array("0123456789".utf8))) }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n" + get("/"))
            let head = try await client.readResponse(bodyless: true)
            #expect(head.header("Content-Length") == "10")
            let next = try await client.readResponse()
            #expect(next.status == 200)
            #expect(next.bodyText == "0123456789")
        }
    }

    @Test func handlerMayAnswerFromAnotherThread() async throws {
        let handler: HTTPHandler = { _ in
            await withCheckedContinuation { (c: CheckedContinuation<Response, Never>) in
                Thread.detachNewThread { c.resume(returning: Response(body: .bytes(Array("elsewhere".utf8)))) }
            }
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            for _ in 0..<3 {
                try await client.send(get("/"))
                #expect(try await client.readResponse().bodyText == "elsewhere")
            }
        }
    }
}

@Suite("HTTPServer half-close")
struct HTTPServerHalfCloseTests {
    @Test func clientHalfCloseAfterRequestGetsResponseThenClose() async throws {
        let handler: HTTPHandler = { _ in Response(body: .bytes(Array("bye".utf8))) }
        // A long idle timeout: the close must come from the end-of-stream, not from a timer.
        try await withServer(configure: { $0.idleTimeout = 60 }, handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/"))
            client.shutdownWrite()
            #expect(try await client.readResponse().bodyText == "bye")
            #expect(try await client.readsEndOfStream())
        }
    }
}

@Suite("HTTPServer isolation between connections")
struct HTTPServerIsolationTests {
    @Test func slowHandlerAndStalledReaderDoNotBlockOthers() async throws {
        let dir = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("big.bin").path
        try Data(count: 16 << 20).write(to: URL(fileURLWithPath: path))
        let release = Gate()
        let entered = Gate()
        let handler: HTTPHandler = { request in
            switch request.path {
            case "/wait":
                entered.open()
                await release.wait()
                return Response(body: .bytes(Array("waited".utf8)))
            case "/big": return Response(body: .file(FileResponse(path: path)))
            default: return Response(body: .bytes(Array("ok".utf8)))
            }
        }
        try await withServer(handler: handler) { port in
            let waiting = try await RawHTTPClient.connect(port: port)
            try await waiting.send(get("/wait"))
            try #require(await entered.wait(), "the /wait handler never ran")
            let stalled = try await RawHTTPClient.connect(port: port)
            try await stalled.send(get("/big"))  // never read: its socket buffers fill up
            let other = try await RawHTTPClient.connect(port: port)
            for _ in 0..<3 {
                try await other.send(get("/ok"))
                #expect(try await other.readResponse().bodyText == "ok")
            }
            release.open()
            #expect(try await waiting.readResponse().bodyText == "waited")
            stalled.close()
        }
    }
}
