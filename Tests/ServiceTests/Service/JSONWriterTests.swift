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
        ("integer extremes", ["min": Int64.min, "max": Int64.max, "imin": Int.min, "zero": 0, "nine": 9, "ten": 10, "mnine": -9,
                              "mten": -10, "i32": Int32.min, "d": -1234.0] as [String: Any]),
        ("escapes", ["s": "quote \" backslash \\ slash / nl \n cr \r tab \t bell \u{07} nul \u{00} é ✓"] as [String: Any]),
        ("array of objects", [["k": 1], ["k": 2]] as [Any]),
        ("camelCase keys", ["bytesWritten": 1, "bytesExpected": 2, "etaSeconds": 3, "error": 4, "id": 5] as [String: Any]),
    ] }

    @Test(arguments: 0..<8)
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
        AccessLogEntry(method: "GET", path: "/downloads/x/file", status: 206, bytes: 1_234_567_890_123, durationSeconds: 0.5,
                       remoteAddress: "10.0.0.7"),
        // Longer than the 1 KiB stack buffer: built again in an array.
        AccessLogEntry(method: "GET", path: "/" + String(repeating: "p", count: 2_000), status: 404, bytes: 80, durationSeconds: 0.001,
                       remoteAddress: "127.0.0.1"),
        AccessLogEntry(method: "GET", path: "/" + String(repeating: "\u{01}", count: 200), status: 404, bytes: 80,
                       durationSeconds: 0.001, remoteAddress: "127.0.0.1", aborted: "client left"),
        AccessLogEntry(method: "GET", path: "/fetch", status: 200, bytes: 7, durationSeconds: 31, remoteAddress: "::1",
                       aborted: "write timeout: \"no\" byte taken"),
    ])
    func matchesTheGeneralLogger(_ entry: AccessLogEntry) {
        let lines = Mutex<[String]>([])
        let logger = Logger { line in lines.withLock { $0.append(line) } }
        let date = Date(timeIntervalSince1970: 1_800_000_000.25)
        logger.request(entry, at: date)
        var fields: [String: Any] = [
            "method": entry.method, "path": entry.path, "status": entry.status, "bytes": entry.bytes,
            "durationMs": Logger.milliseconds(entry.durationSeconds), "remote": entry.remoteAddress,
        ]
        if let aborted = entry.aborted { fields["aborted"] = aborted }
        logger.log(.info, "request", fields, at: date)
        let written = lines.withLock { $0 }
        #expect(written.count == 2 && written[0] == written[1], "\(written)")
    }
}

/// The typed writer behind the API's answers: the same bytes as Foundation for the same values.
@Suite struct JSONValueTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000.123)
    static let t1 = Date(timeIntervalSince1970: 1_800_000_042.9999)

    /// The snapshot as the API documents it, built independently of `SnapshotJSON`.
    static func documented(_ s: DownloadSnapshot) -> [String: Any] {
        func orNull(_ v: Any?) -> Any { v ?? NSNull() }
        var o: [String: Any] = [
            "id": s.id, "url": URLCredentials.redacted(s.url), "state": s.state.rawValue,
            "storage": s.storage.rawValue, "bytesWritten": s.bytesWritten, "bytesExpected": orNull(s.bytesExpected),
            "fraction": orNull(s.fraction), "bytesPerSecond": s.bytesPerSecond, "etaSeconds": orNull(s.etaSeconds),
            "callers": s.callers, "resumable": s.resumable,
            "createdAt": JSON.timestamp(s.createdAt), "updatedAt": JSON.timestamp(s.updatedAt),
            "links": ["self": "/downloads/\(s.id)", "progress": "/downloads/\(s.id)/progress", "file": "/downloads/\(s.id)/file"],
        ]
        if s.state == .completed {
            o["sha256"] = orNull(s.sha256); o["size"] = orNull(s.size); o["path"] = orNull(s.path); o["fileName"] = orNull(s.fileName)
        }
        if let reason = s.reason { o["reason"] = reason }
        if let e = s.error {
            o["error"] = e.httpStatus.map { ["code": e.code.rawValue, "message": e.message, "httpStatus": $0] as [String: Any] }
                ?? ["code": e.code.rawValue, "message": e.message]
        }
        return o
    }

    static let snapshots: [DownloadSnapshot] = [
        DownloadSnapshot(id: "a1", url: "http://h/x", state: .downloading, storage: .cache, bytesWritten: 5,
                         createdAt: t0, updatedAt: t1),
        DownloadSnapshot(id: "b2", url: "https://user:pw@h:8443/p?q=\"1\"", state: .downloading, storage: .persistent,
                         bytesWritten: 1 << 40, bytesExpected: 1 << 41, fraction: 0.5, bytesPerSecond: 123456.789,
                         etaSeconds: 12.25, callers: 3, resumable: true, createdAt: t0, updatedAt: t1),
        DownloadSnapshot(id: "c3", url: "http://h/done", state: .completed, storage: .cache, bytesWritten: 9,
                         bytesExpected: 9, fraction: 1, createdAt: t0, updatedAt: t1, sha256: "ab", size: 9,
                         path: "/var/cache/c3-done", fileName: "dønë \"1\".bin"),
        DownloadSnapshot(id: "d4", url: "http://h/gone", state: .failed, storage: .cache, createdAt: t0, updatedAt: t1,
                         error: DownloadFailure(code: .httpError, message: "origin said 404\n", httpStatus: 404)),
        DownloadSnapshot(id: "e5", url: "http://h/cut", state: .failed, storage: .cache, createdAt: t0, updatedAt: t1,
                         error: DownloadFailure(code: .retriesExhausted, message: "gave up")),
        DownloadSnapshot(id: "f6", url: "http://h/p", state: .paused, storage: .cache, bytesWritten: 7, createdAt: t0, updatedAt: t1),
        DownloadSnapshot(id: "g7", url: "http://h/private", state: .paused, storage: .cache, bytesWritten: 7, createdAt: t0,
                         updatedAt: t1, isPrivate: true, reason: "credentials_required"),
    ]

    @Test(arguments: 0..<7)
    func snapshotMatchesTheDocumentedObject(_ index: Int) throws {
        let s = Self.snapshots[index]
        #expect(SnapshotJSON.object(s).bytes == Array(try JSONWriterTests.foundation(Self.documented(s)).utf8))
    }

    @Test func enqueuedAndResumedAddTheirMembersInKeyOrder() throws {
        let s = Self.snapshots[1]
        var expected = Self.documented(s)
        expected["token"] = "tok"
        expected["coalesced"] = true
        expected["reused"] = false
        expected["links"] = ["self": "/downloads/b2", "progress": "/downloads/b2/progress", "file": "/downloads/b2/file",
                             "cancel": "/downloads/tok"]
        let enqueued = SnapshotJSON.enqueued(Enqueued(token: "tok", snapshot: s, coalesced: true))
        #expect(enqueued.bytes == Array(try JSONWriterTests.foundation(expected).utf8))

        var resumed = Self.documented(s)
        resumed["offset"] = 42
        resumed["restarted"] = false
        #expect(DownloadAPI.eventData(.resumed(offset: 42, restarted: false, s)) == (try JSONWriterTests.foundation(resumed)))
    }

    @Test func objectSetsReplaceAndRemove() {
        var o = JSONObject(["b": .int(1), "a": .null])
        o["b"] = .string("x")
        o["c"] = .bool(true)
        o["a"] = nil
        #expect(o.bytes == Array(#"{"b":"x","c":true}"#.utf8))
        #expect(JSONValue.array([.double(2.0), .double(0.5), .double(.nan), .int(-3)]).string == "[2,0.5,null,-3]")
    }

    /// Times whose milliseconds are exact in binary, so both writers see the same value.
    @Test(arguments: [0.0, 0.125, 0.875, 1_800_000_000.5, 951_782_400.375, 1_078_012_800.25, -0.5, -86_400.125, 253_402_300_799.875])
    func timestampMatchesISO8601FormatStyle(_ seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(JSON.timestamp(date) == Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).format(date))
    }

    /// Milliseconds are truncated, after the value is read to the nearest microsecond-ish double
    /// (Foundation truncates the raw double, so it writes .122 for 1_800_000_000.123).
    @Test func timestampTruncatesToMilliseconds() {
        #expect(JSON.timestamp(Date(timeIntervalSince1970: 1_800_000_000.123)) == "2027-01-15T08:00:00.123Z")
        #expect(JSON.timestamp(Date(timeIntervalSince1970: 1_800_000_042.9999)) == "2027-01-15T08:00:42.999Z")
        #expect(JSON.timestamp(Date(timeIntervalSince1970: -0.0004)) == "1969-12-31T23:59:59.999Z")
    }

    /// A damaged stored row's time is written as the nearest one of the years 0–9999; it used to trap.
    @Test func timestampsOutOfRangeNeverTrap() {
        #expect(JSON.timestamp(Date(timeIntervalSince1970: 1e300)) == "9999-12-31T23:59:59.999Z")
        #expect(JSON.timestamp(Date(timeIntervalSince1970: -.infinity)) == "0000-01-01T00:00:00.000Z")
        #expect(JSON.timestamp(Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00.000Z")
    }

    /// The computed calendar against glibc's `gmtime_r`, day by day over 1600–2400 (leap
    /// centuries, the epoch, negative days) and at 5 000 seeded instants over years 0–9999.
    @Test func civilDatesMatchGmtime() {
        func gmtime(_ seconds: Int64) -> CivilDate {
            var t = time_t(seconds)
            var parts = tm()
            _ = gmtime_r(&t, &parts)
            return CivilDate(year: Int64(parts.tm_year) + 1900, month: Int64(parts.tm_mon) + 1, day: Int64(parts.tm_mday))
        }
        var mismatches = 0
        for days in Int64(-135_140)...Int64(157_054) where CivilDate(daysSince1970: days) != gmtime(days * 86_400) {
            mismatches += 1
        }
        #expect(mismatches == 0)
        var random = SplitMix64(seed: 0x7157)
        for _ in 0..<5_000 {
            let seconds = Int64.random(in: -62_167_219_200..<253_402_300_800, using: &random)
            let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
            #expect(CivilDate(daysSince1970: days) == gmtime(seconds), "\(seconds)")
        }
    }
}

/// `GET /downloads/{id}` answers from the cached encoding only while the snapshot is the same.
@Suite struct SnapshotAnswerCacheTests {
    @Test func answerIsReusedUntilTheSnapshotChanges() async throws {
        // A transfer that never moves (the fake driver's attempts wait): the snapshot only changes
        // when the test changes it.
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        let url = "http://o.test/cached.bin"
        let created = APILimitsTests.json(await APILimitsTests.post(api, url, from: "127.0.0.1:1"))
        let id = try #require(created["id"] as? String)
        func get() async -> [UInt8] {
            let response = await api.respond(to: Request(method: "GET", target: "/downloads/\(id)"))
            guard case .bytes(let bytes) = response.body else { return [] }
            return bytes
        }
        func current() throws -> [UInt8] { SnapshotJSON.object(try #require(engine.snapshot(id: id))).bytes }
        /// The answer equals the snapshot's encoding, read just before or just after it.
        func answerIsCurrent() async throws -> [UInt8] {
            let before = try current()
            let answer = await get()
            let after = try current()
            #expect(answer == before || answer == after)
            return answer
        }

        let first = try await answerIsCurrent()
        #expect(try await answerIsCurrent() == first || (try current()) != first)
        // A second caller changes the snapshot (callers 2): the answer follows at once.
        _ = await APILimitsTests.post(api, url, from: "127.0.0.1:2")
        let second = try await answerIsCurrent()
        #expect(String(decoding: second, as: UTF8.self).contains(#""callers":2"#))
        await engine.shutdown()
    }

    @Test func encodesOncePerValueAndStaysBounded() {
        let cache = LatestEncodingCache<String, String>(capacity: 2)
        let encodings = Mutex(0)
        func encoded(_ value: String, id: String) -> String {
            cache.encoded(value, id: id) { encodings.withLock { $0 += 1 }; return $0.uppercased() }
        }
        for _ in 0..<10 { #expect(encoded("a", id: "1") == "A") }
        #expect(encodings.withLock { $0 } == 1)
        #expect(encoded("b", id: "1") == "B")
        #expect(encoded("a", id: "1") == "A")
        #expect(encodings.withLock { $0 } == 3)
        for id in ["2", "3", "4"] { _ = encoded("x", id: id) }
        #expect(encoded("a", id: "1") == "A")
    }
}
