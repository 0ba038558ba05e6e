import Foundation
import Testing
@testable import MiniHTTPServer

/// `--host ::` accepts IPv4 whatever the system's `bindv6only`: checked in a loopback-only network
/// namespace (run by `LoopbackNamespaceRunTests`), where the setting is the namespace's own to change.
@Suite(.serialized, .enabled(if: LoopbackNamespace.isInside))
struct DualStackListenerTests {
    @Test func ipv4ClientsReachAListenerOnColonColonEvenWithBindV6OnlySet() async throws {
        try "1\n".write(toFile: "/proc/sys/net/ipv6/bindv6only", atomically: false, encoding: .utf8)
        #expect(try String(contentsOfFile: "/proc/sys/net/ipv6/bindv6only", encoding: .utf8).hasPrefix("1"))
        var configuration = ServerConfiguration()
        configuration.host = "::"
        configuration.port = 0
        let server = HTTPServer(configuration: configuration) { request in
            Response(status: 200, body: .bytes(Array(request.remoteAddress.utf8)))
        }
        let port = try server.start()
        let v4 = try await HTTPTestClient(port: port).request("GET", "/")
        let v6 = try await HTTPTestClient(port: port, host: "::1").request("GET", "/")
        #expect(v4.status == 200 && v6.status == 200)
        #expect(String(decoding: v4.body, as: UTF8.self).hasPrefix("127.0.0.1:"))
        #expect(String(decoding: v6.body, as: UTF8.self).hasPrefix("[::1]:"))
        await server.shutdown()
    }
}
