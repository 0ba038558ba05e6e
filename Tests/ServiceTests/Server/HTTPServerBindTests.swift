import Basics
import Foundation
import Testing
@testable import MiniHTTPServer

/// `bind()` opens the listening socket before the application is ready (cluster mode advertises
/// the port it got): a client that connects meanwhile waits in the backlog and is served once
/// `start()` runs, on the same port; a bound server that never starts releases its socket.
@Suite("HTTPServer bind before start")
struct HTTPServerBindTests {
    static func server() -> HTTPServer {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.shutdownGracePeriod = 2
        return HTTPServer(configuration: configuration) { request in Response(body: .bytes(Array("hello \(request.path)".utf8))) }
    }

    @Test func aClientConnectedBeforeStartIsServedAfterIt() async throws {
        let server = Self.server()
        let port = try server.bind()
        #expect(port > 0)
        #expect(throws: SystemError.self) { _ = try server.bind() }
        let early = Task { try await HTTPTestClient(port: port).request("GET", "/early") }
        try await Task.sleep(for: .milliseconds(200))  // The client is connected and waiting in the backlog.
        #expect(try server.start() == port)
        let answer = try await withTimeout(10) { try await early.value }
        #expect(answer.status == 200 && answer.text == "hello /early")
        #expect(throws: SystemError.self) { _ = try server.start() }
        await server.shutdown()
    }

    @Test func aBoundServerThatNeverStartsReleasesItsPortAtShutdown() async throws {
        let server = Self.server()
        let port = try server.bind()
        await server.shutdown()
        var configuration = ServerConfiguration()
        configuration.port = port
        let again = HTTPServer(configuration: configuration) { _ in Response(body: .bytes([])) }
        #expect(try again.start() == port, "the port is free again")
        await again.shutdown()
    }
}
