import DownloaderEngine
import Foundation
import MiniHTTPServer
import Synchronization
import Testing
@testable import DownloadService

/// The hand-written JSON writer against Foundation's, value by value.
@Suite struct JSONWriterTests {
    static func foundation(_ object: Any) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        return String(decoding: data, as: UTF8.self)
    }

    static var samples: [(String, Any)] { [
        ("empty object", [String: Any]()),
        ("nested", ["b": ["y": 1, "x": [1, 2, 3]], "a": "s", "c": NSNull()] as [String: Any]),
        ("numbers", ["int": 42, "neg": -7, "big": Int64(1) << 53, "u": UInt64(9), "half": 0.5, "whole": 3.0,
                     "tiny": 0.000125, "rate": 123456.789] as [String: Any]),
        ("bools", ["t": true, "f": false] as [String: Any]),
        ("escapes", ["s": "quote \" backslash \\ slash / nl \n cr \r tab \t bell \u{07} nul \u{00} é ✓"] as [String: Any]),
        ("array of objects", [["k": 1], ["k": 2]] as [Any]),
        ("camelCase keys", ["bytesWritten": 1, "bytesExpected": 2, "etaSeconds": 3, "error": 4, "id": 5] as [String: Any]),
    ] }

    @Test(arguments: 0..<7)
    func matchesFoundation(_ index: Int) throws {
        let (name, value) = Self.samples[index]
        #expect(JSON.string(value) == (try Self.foundation(value)), "\(name)")
        // And it parses back to the same structure.
        let parsed = try JSONSerialization.jsonObject(with: Data(JSON.bytes(value)))
        #expect(try Self.foundation(parsed) == (try Self.foundation(value)), "\(name)")
    }

    @Test func nonFiniteAndNilAreNull() {
        #expect(JSON.string(["a": Double.nan, "b": Double.infinity]) == #"{"a":null,"b":null}"#)
        let missing: Int? = nil
        #expect(JSON.string(["a": missing as Any]) == #"{"a":null}"#)
        #expect(JSON.string(["a": JSON.orNull(nil)]) == #"{"a":null}"#)
    }

    @Test func unknownTypesFallBackToFoundation() {
        let value: [String: Any] = ["n": NSNumber(value: 5), "d": ["x": Float(1.5)]]
        #expect(JSON.string(value) == #"{"d":{"x":1.5},"n":5}"#)
    }
}

/// An event's SSE data is encoded once for all of a download's streams.
@Suite struct EventDataCacheTests {
    static func snapshot(_ id: String, bytes: Int64) -> DownloadSnapshot {
        let t = Date(timeIntervalSince1970: 0)
        return DownloadSnapshot(id: id, url: "http://h/\(id)", state: .downloading, storage: .cache, bytesWritten: bytes,
                                createdAt: t, updatedAt: t)
    }

    @Test func encodesEachEventOnceAndStaysBounded() {
        let cache = EventDataCache(capacity: 2)
        let encodings = Mutex(0)
        func data(_ event: DownloadEvent) -> String {
            cache.data(for: event) { event in
                encodings.withLock { $0 += 1 }
                return DownloadAPI.eventData(event)
            }
        }
        let first = DownloadEvent.progress(Self.snapshot("a", bytes: 1))
        for _ in 0..<100 { #expect(data(first) == DownloadAPI.eventData(first)) }
        #expect(encodings.withLock { $0 } == 1)
        let next = DownloadEvent.progress(Self.snapshot("a", bytes: 2))
        #expect(data(next).contains(#""bytesWritten":2"#))
        #expect(encodings.withLock { $0 } == 2)
        // Other downloads beyond the capacity start the cache over; answers stay right.
        for id in ["b", "c", "d"] { _ = data(.progress(Self.snapshot(id, bytes: 1))) }
        #expect(data(next).contains(#""bytesWritten":2"#))
        #expect(encodings.withLock { $0 } == 6)
    }
}

/// The per-request access-log line, written directly, says what the general logger would.
@Suite struct AccessLogLineTests {
    @Test(arguments: [
        AccessLogEntry(method: "GET", path: "/healthz", status: 200, bytes: 15, durationSeconds: 0.000123456, remoteAddress: "127.0.0.1"),
        AccessLogEntry(method: "POST", path: "/d\"o\\w\n", status: 413, bytes: 0, durationSeconds: 2, remoteAddress: "::1"),
    ])
    func matchesTheGeneralLogger(_ entry: AccessLogEntry) {
        let lines = Mutex<[String]>([])
        let logger = Logger { line in lines.withLock { $0.append(line) } }
        let date = Date(timeIntervalSince1970: 1_800_000_000.25)
        logger.request(entry, at: date)
        logger.log(.info, "request", [
            "method": entry.method, "path": entry.path, "status": entry.status, "bytes": entry.bytes,
            "durationMs": Logger.milliseconds(entry.durationSeconds), "remote": entry.remoteAddress,
        ], at: date)
        let written = lines.withLock { $0 }
        #expect(written.count == 2 && written[0] == written[1], "\(written)")
    }
}
