import Foundation
@testable import MiniHTTPServer
import Synchronization
import Testing

/// `maxConnections` / `maxConnectionsPerIP`: the counting (pure) and the canned 503 (live, port 0).
@Suite struct ConnectionCountsTests {
    @Test func countsTotalAndPerAddress() {
        var counts = ConnectionCounts(maxConnections: 3, maxConnectionsPerIP: 2)
        #expect(counts.admit("10.0.0.1") == nil)
        #expect(counts.admit("10.0.0.1") == nil)
        #expect(counts.admit("10.0.0.1") == .addressFull)
        #expect(counts.admit("10.0.0.2") == nil)
        #expect(counts.admit("10.0.0.3") == .serverFull)
        #expect(counts.total == 3 && counts.perIP == ["10.0.0.1": 2, "10.0.0.2": 1])
        counts.release("10.0.0.1")
        #expect(counts.admit("10.0.0.3") == nil)
        counts.release("10.0.0.2")
        counts.release("10.0.0.3")
        counts.release("10.0.0.1")
        #expect(counts.total == 0 && counts.perIP.isEmpty)
        counts.release("10.0.0.9")  // never admitted: nothing goes negative
        #expect(counts.total == 0)
    }

    @Test func withoutAPerAddressLimitOnlyTheTotalCounts() {
        var counts = ConnectionCounts(maxConnections: 2, maxConnectionsPerIP: nil)
        #expect(counts.admit("a") == nil && counts.admit("a") == nil)
        #expect(counts.admit("b") == .serverFull)
        #expect(counts.perIP.isEmpty)
    }

    @Test(arguments: [("127.0.0.1:5300", "127.0.0.1"), ("[::1]:80", "::1"), ("10.1.2.3", "10.1.2.3"), ("::1", "::1")])
    func addressOfARemote(remote: String, ip: String) {
        #expect(ConnectionCounts.ip(ofRemote: remote) == ip)
    }

    @Test(arguments: [
        ("10.1.2.3", "10.1.2.3"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::ffff", "2001:db8:1:2::/64"),
        ("[2001:DB8:1:2::1]", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::1"),  // link-local, unique local, loopback: the address itself
        ("fd00:1:2:3::5", "fd00:1:2:3::5"),
        ("::1", "::1"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("64:ff9b::192.0.2.1", "192.0.2.1"),  // NAT64
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"),  // Teredo (RFC 4380's example)
        ("not an address", "not an address"),
        ("1:2", "1:2"),
    ])
    func anIPv6PeerCountsUnderItsNetwork(address: String, network: String) {
        #expect(ClientNetwork.of(address) == network)
    }

    /// Two addresses of one /64 share the per-address limit; the next /64 has its own.
    @Test func theLimiterCountsIPv6PeersByNetwork() {
        let limiter = ConnectionLimiter(maxConnections: 10, maxConnectionsPerIP: 2, renderError: ServerError.plainText)
        #expect(limiter.admit(remote: "[2001:db8::1]:4000") == nil)
        #expect(limiter.admit(remote: "[2001:db8::2]:4000") == nil)
        #expect(limiter.admit(remote: "[2001:db8::3]:4000") == .addressFull)
        #expect(limiter.admit(remote: "[2001:db8:0:1::3]:4000") == nil)
        limiter.release(remote: "[2001:db8::1]:4000")
        #expect(limiter.admit(remote: "[2001:db8::abcd]:4001") == nil)
    }

    @Test func theRefusalIsACompleteAnswer() throws {
        let limiter = ConnectionLimiter(maxConnections: 1, maxConnectionsPerIP: nil, renderError: ServerError.plainText)
        let text = String(decoding: limiter.refusalBytes(.serverFull), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(text.contains("\r\nRetry-After: 1\r\n") && text.contains("\r\nConnection: close\r\n"))
        #expect(text.contains("\r\nContent-Type: text/plain; charset=utf-8\r\n"))
        let parts = text.components(separatedBy: "\r\n\r\n")
        #expect(parts.count == 2)
        #expect(text.contains("Content-Length: \(parts[1].utf8.count)\r\n"))
        #expect(parts[1] == "the server has too many open connections; retry shortly\n")
        let perAddress = String(decoding: limiter.refusalBytes(.addressFull), as: UTF8.self)
        #expect(perAddress.hasSuffix("\r\n\r\ntoo many open connections from your address; close some and retry\n"))
    }

    /// The refusal is rendered once by the application: its `Retry-After` wins, the fields the
    /// server owns and unsafe ones are dropped, only a `.bytes` body is sent.
    @Test func theRenderedRefusalKeepsTheServersFraming() {
        let seen = Mutex<[ServerError]>([])
        let limiter = ConnectionLimiter(maxConnections: 1, maxConnectionsPerIP: nil) { error in
            seen.withLock { $0.append(error) }
            return Response(status: error.status,
                            headers: ["X-Ok": "1", "Retry-After": "7", "Connection": "keep-alive", "Content-Length": "99",
                                      "X-Bad": "a\r\nb"],
                            body: .stream { _ in })
        }
        #expect(String(decoding: limiter.refusalBytes(.serverFull), as: UTF8.self)
            == "HTTP/1.1 503 Service Unavailable\r\nX-Ok: 1\r\nContent-Length: 0\r\nRetry-After: 7\r\nConnection: close\r\n\r\n")
        #expect(seen.withLock { $0.map(\.kind) } == [.tooManyConnections, .tooManyConnections])
        #expect(seen.withLock { $0.map(\.status) } == [503, 503])
    }
}

@Suite(.timeLimit(.minutes(1)))
struct ConnectionLimitLiveTests {
    static let handler: HTTPHandler = { _ in .json(Array(#"{"ok":true}"#.utf8)) }

    @Test func aConnectionAboveTheLimitGetsA503AndIsClosed() async throws {
        // One loop: a connection's close and the next accept are handled in order on one thread.
        try await withServer(configure: { $0.maxConnections = 3; $0.eventLoopCount = 1 }, handler: Self.handler) { port in
            // Three kept-alive connections, each proven admitted by an answer.
            var held: [LoopbackExchange] = []
            for _ in 0..<3 {
                let connection = try await LoopbackExchange.connect(port: port)
                #expect(try await connection.get("/").hasPrefix("HTTP/1.1 200"))
                held.append(connection)
            }
            let refused = try await LoopbackExchange.connect(port: port)
            try await refused.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let answer = String(decoding: try await refused.read(), as: UTF8.self)  // until the server closes
            #expect(answer.hasPrefix("HTTP/1.1 503 "), "\(answer)")
            #expect(answer.contains("Retry-After: 1") && answer.contains("Connection: close"))
            #expect(answer.hasSuffix("\r\n\r\nthe server has too many open connections; retry shortly\n"))
            // The held connections still work.
            #expect(try await held[0].get("/").hasPrefix("HTTP/1.1 200"))

            // Once one is closed (by the server, so the client knows when), a newcomer is admitted again.
            let leaving = held.removeLast()
            try await leaving.send("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            #expect(String(decoding: try await leaving.read(), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            let again = try await LoopbackExchange.connect(port: port)
            #expect(try await again.get("/").hasPrefix("HTTP/1.1 200"))
            withExtendedLifetime(held) {}
        }
    }

    @Test func thePerAddressLimitCountsEachClientAddress() async throws {
        try await withServer(configure: { $0.maxConnectionsPerIP = 2 }, handler: Self.handler) { port in
            var held: [LoopbackExchange] = []
            for _ in 0..<2 {
                let connection = try await LoopbackExchange.connect(port: port, from: "127.0.0.1")
                #expect(try await connection.get("/").hasPrefix("HTTP/1.1 200"))
                held.append(connection)
            }
            let third = try await LoopbackExchange.connect(port: port, from: "127.0.0.1")
            let answer = String(decoding: try await third.read(), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 503 "), "\(answer)")
            #expect(answer.contains("from your address"))
            // Another loopback address has its own allowance.
            let other = try await LoopbackExchange.connect(port: port, from: "127.0.0.2")
            #expect(try await other.get("/").hasPrefix("HTTP/1.1 200"))
            withExtendedLifetime(held) {}
        }
    }

    /// Beyond the limit a health probe is still answered (a liveness probe refused there would have
    /// the process killed): a few connections more, one request each, probe paths only.
    @Test func aProbeIsAnsweredBeyondTheLimit() async throws {
        try await withServer(configure: {
            $0.maxConnections = 1; $0.eventLoopCount = 1
            $0.answeredBeyondLimit = ["/healthz"]; $0.probeConnectionsBeyondLimit = 2
        }, handler: Self.handler) { port in
            let holder = try await LoopbackExchange.connect(port: port)
            #expect(try await holder.get("/").hasPrefix("HTTP/1.1 200"))
            let probe = try await LoopbackExchange.connect(port: port)
            try await probe.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            let answered = String(decoding: try await probe.read(), as: UTF8.self)  // until the server closes
            #expect(answered.hasPrefix("HTTP/1.1 200") && answered.contains("Connection: close"), "\(answered)")
            let other = try await LoopbackExchange.connect(port: port)
            try await other.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let refused = String(decoding: try await other.read(), as: UTF8.self)
            #expect(refused.hasPrefix("HTTP/1.1 503 ") && refused.contains("too many open connections"), "\(refused)")
            // Two places beyond the limit: the refused one above (answered, waiting for its client to
            // close) and a silent one. Each newcomer takes the place of the oldest that waits on its
            // client alone, at once (a silent socket would otherwise hold its place 1 s), so sockets
            // that never send, or never close, cannot keep a probe out.
            let silent = try await LoopbackExchange.connect(port: port)
            try await Task.sleep(for: .milliseconds(50))
            let later = try await LoopbackExchange.connect(port: port)  // takes the refused one's place
            try await Task.sleep(for: .milliseconds(50))
            let started = Date()
            let third = try await LoopbackExchange.connect(port: port)  // takes the silent one's
            _ = try await silent.read()  // closed by the server
            #expect(Date().timeIntervalSince(started) < 0.5)
            try await third.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(String(decoding: try await third.read(), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            // A silent socket holds its place 1 s at most, and every place comes back: probes are
            // answered again (one place leaked per request above would refuse them).
            _ = try await later.read()  // closed by the server
            for _ in 0..<3 {
                let again = try await LoopbackExchange.connect(port: port)
                try await again.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
                #expect(String(decoding: try await again.read(), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            }
            #expect(try await holder.get("/").hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test func manyRefusalsNeverStopTheServer() async throws {
        try await withServer(configure: { $0.maxConnections = 1 }, handler: Self.handler) { port in
            let holder = try await LoopbackExchange.connect(port: port)
            #expect(try await holder.get("/").hasPrefix("HTTP/1.1 200"))
            for _ in 0..<50 {
                let refused = try await LoopbackExchange.connect(port: port)
                let answer = String(decoding: try await refused.read(), as: UTF8.self)
                #expect(answer.hasPrefix("HTTP/1.1 503 "))
            }
            #expect(try await holder.get("/").hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test func theOpenFileLimitIsRaisedToTheHardLimit() throws {
        let limits = try #require(OpenFileLimit.raiseToHardLimit())
        #expect(limits.soft == limits.hard)
    }
}
