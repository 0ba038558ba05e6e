import CLinux
import Foundation
import Glibc
import Testing

/// The test origin is itself tested: its range and If-Range decisions, and a live exchange.
@Suite struct TestOriginTests {
    @Test(arguments: [
        ("bytes=0-", 100, OriginResponder.RangeOutcome.satisfiable(0..<100)),
        ("bytes=10-", 100, .satisfiable(10..<100)),
        ("bytes=10-19", 100, .satisfiable(10..<20)),
        ("bytes=90-500", 100, .satisfiable(90..<100)),
        ("bytes=-10", 100, .satisfiable(90..<100)),
        ("bytes=-500", 100, .satisfiable(0..<100)),
        ("bytes=100-", 100, .unsatisfiable),
        ("bytes=-0", 100, .unsatisfiable),
        ("bytes=5-3", 100, .ignore),
        ("bytes=0-1,5-6", 100, .ignore),
        ("items=0-", 100, .ignore),
        ("bytes=x-", 100, .ignore),
    ])
    func rangeParsing(header: String, size: Int, expected: OriginResponder.RangeOutcome) {
        #expect(OriginResponder.parseRange(header, size: size) == expected)
    }

    @Test func ifRangeFollowsRFC9110() {
        let date = "Tue, 14 Nov 2023 22:13:20 GMT"
        #expect(OriginResponder.ifRangeHolds(nil, etag: nil, lastModified: nil))
        #expect(OriginResponder.ifRangeHolds("\"a\"", etag: "\"a\"", lastModified: date))
        #expect(!OriginResponder.ifRangeHolds("\"a\"", etag: "\"b\"", lastModified: date))
        #expect(!OriginResponder.ifRangeHolds("W/\"a\"", etag: "W/\"a\"", lastModified: date))
        #expect(!OriginResponder.ifRangeHolds("\"a\"", etag: "W/\"a\"", lastModified: date))
        #expect(!OriginResponder.ifRangeHolds("\"a\"", etag: nil, lastModified: date))
        #expect(OriginResponder.ifRangeHolds(date, etag: "\"a\"", lastModified: date))
        #expect(!OriginResponder.ifRangeHolds(date, etag: nil, lastModified: nil))
        #expect(!OriginResponder.ifRangeHolds("Wed, 15 Nov 2023 22:13:20 GMT", etag: nil, lastModified: date))
    }

    @Test func httpDates() {
        #expect(OriginHTTPDate.format(epochSeconds: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(OriginHTTPDate.format(epochSeconds: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(OriginHTTPDate.format(epochSeconds: 1_700_000_000) == "Tue, 14 Nov 2023 22:13:20 GMT")
    }

    @Test func bodiesDifferPerVersionAndAreRangeConsistent() {
        let seed1 = OriginBody.seed(path: "/file", version: 1)
        let seed2 = OriginBody.seed(path: "/file", version: 2)
        let whole = OriginBody.bytes(seed: seed1, range: 0..<1000)
        #expect(Array(whole[333..<777]) == OriginBody.bytes(seed: seed1, range: 333..<777))
        #expect(whole != OriginBody.bytes(seed: seed2, range: 0..<1000))
        #expect(Array(whole[1...]) != Array(whole[..<999]))
    }

    @Test func servesRangesValidatorsAndRecordsRequests() async throws {
        let origin = try TestOrigin(bodySize: 5000)
        defer { origin.stop() }
        let body = origin.expectedBody()
        let etag = try #require(origin.etag())

        let full = try await RawHTTP.get(port: origin.port, path: "/file")
        #expect(full.status == 200)
        #expect(full.body == body)
        #expect(full.header("etag") == etag)
        #expect(full.header("last-modified") == origin.lastModified())

        let ranged = try await RawHTTP.get(port: origin.port, path: "/file", headers: ["Range: bytes=1000-", "If-Range: \(etag)"])
        #expect(ranged.status == 206)
        #expect(ranged.header("content-range") == "bytes 1000-4999/5000")
        #expect(ranged.body == Array(body[1000...]))

        origin.changeVersion()
        let changed = try await RawHTTP.get(port: origin.port, path: "/file", headers: ["Range: bytes=1000-", "If-Range: \(etag)"])
        #expect(changed.status == 200)
        #expect(changed.body == origin.expectedBody())
        #expect(changed.body != body)

        origin.inject(.status(503, retryAfter: "7"), times: 1)
        let failed = try await RawHTTP.get(port: origin.port, path: "/file")
        #expect(failed.status == 503)
        #expect(failed.header("retry-after") == "7")
        #expect(try await RawHTTP.get(port: origin.port, path: "/file").status == 200)

        origin.inject(.cut(afterBodyBytes: 100))
        let cut = try await RawHTTP.get(port: origin.port, path: "/file")
        #expect(cut.body.count == 100)

        origin.redirect(from: "/old", to: "/file")
        let hop = try await RawHTTP.get(port: origin.port, path: "/old")
        #expect(hop.status == 302)
        #expect(hop.header("location") == origin.url)
        #expect(hop.header("etag") != origin.etag())

        let recorded = origin.requests(path: "/file")
        #expect(recorded.count == 6)
        #expect(recorded[1].header("range") == "bytes=1000-")
        #expect(recorded[1].header("if-range") == etag)
        #expect(origin.getCount() == 6)
        #expect(origin.getCount(path: "/old") == 1)
        try await origin.waitForGETs(6)
        await #expect(throws: TimeoutError.self) { try await origin.waitForGETs(7, timeout: 0.2) }
    }
}

/// A minimal blocking HTTP/1.1 client for checking the test origin: one request with
/// `Connection: close`, read to EOF.
enum RawHTTP {
    struct Reply: Sendable {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
    }

    static func get(port: UInt16, path: String, headers: [String] = []) async throws -> Reply {
        try await withTimeout(10) {
            try exchange(port: port, request: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                + headers.map { $0 + "\r\n" }.joined() + "\r\n")
        }
    }

    private static func exchange(port: UInt16, request: String) throws -> Reply {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw OriginError("socket") }
        defer { close(fd) }
        guard OriginSocket.connectToLoopback(fd, port: port) == 0 else { throw OriginError("connect: errno \(errno)") }
        OriginSocket.setReceiveTimeout(fd, seconds: 5)
        guard OriginSocket.send(fd, request) else { throw OriginError("send") }
        var received: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 65536)
        while let count = scratch.withUnsafeMutableBytes({ OriginSocket.receive(fd, into: $0) }) {
            received += scratch[..<count]
        }
        guard let split = received.indices.dropLast(3).first(where: {
            received[$0] == 13 && received[$0 + 1] == 10 && received[$0 + 2] == 13 && received[$0 + 3] == 10
        }) else { throw OriginError("no head") }
        let lines = String(decoding: received[..<split], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        let headers = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return Reply(status: status, headers: headers, body: Array(received[(split + 4)...]))
    }
}
