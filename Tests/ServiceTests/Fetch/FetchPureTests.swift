import Testing
@testable import DownloadService
@testable import DownloaderEngine

@Suite struct FetchQueryTests {
    @Test(arguments: [
        ("url=https%3A%2F%2Fo.test%2Fa%2Bb%3Fx%3D1", "https://o.test/a+b?x=1"),
        ("url=https://o.test/a+b?x=1", "https://o.test/a+b?x=1"),  // unencoded: taken as it is
        ("other=1&url=http%3A%2F%2Fo.test%2F", "http://o.test/"),    // unknown parameters ignored
    ])
    func urlIsDecodedOnce(query: String, url: String) throws {
        let parsed = try FetchQuery.parse(query).get()
        #expect(parsed.request.url == url)
        #expect(parsed.request.storage == .cache)
    }

    @Test func optionsAreRead() throws {
        let sha = String(repeating: "ab", count: 32)
        let parsed = try FetchQuery.parse("url=http%3A%2F%2Fo.test%2Ff&storage=persistent&sha256=\(sha)&size=42").get()
        #expect(parsed.request == DownloadRequest(url: "http://o.test/f", storage: .persistent, sha256: sha, size: 42))
    }

    @Test(arguments: [
        (nil, "missing_url"), ("", "missing_url"), ("url=", "missing_url"),
        ("url=a&url=b", "invalid_query"), ("url=x&storage=a&storage=b", "invalid_query"),
        ("url=%zz", "invalid_query"), ("url=%C3%28", "invalid_query"),
        ("url=http://o.test/&storage=tape", "invalid_storage"),
        ("url=http://o.test/&size=-1", "invalid_size"), ("url=http://o.test/&size=ten", "invalid_size"),
        ("url=http://o.test/&size=9007199254740992", "invalid_size"),  // the POST body's bound: 2^53-1
        ("url=http://o.test/&sha256=%zz", "invalid_query"), ("url=http://o.test/&sha256=ab%", "invalid_query"),
    ] as [(String?, String)])
    func badQueriesAreRefused(query: String?, code: String) {
        guard case .failure(let error) = FetchQuery.parse(query) else {
            Issue.record("accepted \(query ?? "nil")")
            return
        }
        #expect(error.code == code)
        #expect(error.status == 400)
    }
}

@Suite struct ByteRangeRequestTests {
    @Test(arguments: [
        (nil, ByteRangeRequest.whole), ("bytes=0-99", .closed(0, 99)), ("bytes=100-", .from(100)),
        ("bytes=-5", .suffix(5)), ("bytes=-0", .whole), ("bytes=5-1", .whole), ("bytes=0-1,3-4", .whole),
        ("items=0-1", .whole), ("bytes=a-b", .whole), (" BYTES=7-8 ", .closed(7, 8)),
    ] as [(String?, ByteRangeRequest)])
    func parses(value: String?, expected: ByteRangeRequest) {
        #expect(ByteRangeRequest.parse(value) == expected)
    }
}

@Suite struct FetchPlanTests {
    static func tail(_ phase: TailState.Phase = .flowing, total: Int64? = 1000, etag: String? = "\"v1\"",
                     generation: UInt64 = 1) -> TailState {
        var t = TailState()
        t.phase = phase
        t.total = total
        t.validator = etag
        t.validatorIsETag = etag != nil
        t.generation = generation
        return t
    }

    static func stream(_ status: Int, _ start: Int64, _ end: Int64?, total: Int64?, range: String?, etag: String = "\"v1\"") -> FetchPlan {
        .stream(.init(status: status, start: start, end: end, total: total, contentRange: range, etag: etag, generation: 1))
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var tail: TailState
        var awaitingHead = false
        var range: String?
        var ifRange: String?
        var ifNoneMatch: String?
        var ifMatch: String?
        var changed = false
        var http10 = false
        var plan: FetchPlan
        var testDescription: String { name }
    }

    static let notFound = DownloadFailure(code: .httpError, message: "404", httpStatus: 404)

    static let rows: [Row] = [
        Row(name: "completed: the stored file", tail: tail(.completed), plan: .serveStored),
        Row(name: "completed, bare Range on a file that changed lately: 409", tail: tail(.completed), range: "bytes=10-",
            changed: true, plan: .refuse(.changed)),
        Row(name: "completed, If-Range on a file that changed lately: the stored file decides", tail: tail(.completed),
            range: "bytes=10-", ifRange: "\"v1\"", changed: true, plan: .serveStored),
        Row(name: "failed before the head: 502", tail: tail(.failed(notFound, stalled: false)), plan: .fail(status: 502, notFound)),
        Row(name: "stalled: 504", tail: tail(.failed(notFound, stalled: true)), plan: .fail(status: 504, notFound)),
        Row(name: "no head yet", tail: tail(.waiting), plan: .wait),
        Row(name: "resume not answered yet", tail: tail(), awaitingHead: true, plan: .wait),
        Row(name: "whole body, size known", tail: tail(), plan: stream(200, 0, 999, total: 1000, range: nil)),
        Row(name: "whole body, size unknown", tail: tail(total: nil), plan: stream(200, 0, nil, total: nil, range: nil)),
        Row(name: "closed range", tail: tail(), range: "bytes=10-19", plan: stream(206, 10, 19, total: 1000, range: "bytes 10-19/1000")),
        Row(name: "range past the end is clamped", tail: tail(), range: "bytes=990-5000",
            plan: stream(206, 990, 999, total: 1000, range: "bytes 990-999/1000")),
        Row(name: "open range", tail: tail(), range: "bytes=500-", plan: stream(206, 500, 999, total: 1000, range: "bytes 500-999/1000")),
        Row(name: "suffix range", tail: tail(), range: "bytes=-10", plan: stream(206, 990, 999, total: 1000, range: "bytes 990-999/1000")),
        Row(name: "start beyond the size: 416", tail: tail(), range: "bytes=1000-", plan: .refuse(.unsatisfiable(total: 1000))),
        Row(name: "size unknown, closed range", tail: tail(total: nil), range: "bytes=5-9",
            plan: stream(206, 5, 9, total: nil, range: "bytes 5-9/*")),
        Row(name: "size unknown, open range: the whole body", tail: tail(total: nil), range: "bytes=5-",
            plan: stream(200, 0, nil, total: nil, range: nil)),
        Row(name: "HTTP/1.0, size unknown: waits for the verdict (no chunks to end cleanly)", tail: tail(total: nil), http10: true,
            plan: .wait),
        Row(name: "HTTP/1.0, size unknown, open range: waits too", tail: tail(total: nil), range: "bytes=5-", http10: true, plan: .wait),
        Row(name: "HTTP/1.0, size unknown, closed range: streamed (its length is known)", tail: tail(total: nil), range: "bytes=5-9",
            http10: true, plan: stream(206, 5, 9, total: nil, range: "bytes 5-9/*")),
        Row(name: "an empty file waits for the verdict (no last byte to hold back)", tail: tail(total: 0), plan: .wait),
        Row(name: "HTTP/1.0, size known: streamed", tail: tail(), http10: true, plan: stream(200, 0, 999, total: 1000, range: nil)),
        Row(name: "If-Range of this version", tail: tail(), range: "bytes=10-", ifRange: "\"v1\"",
            plan: stream(206, 10, 999, total: 1000, range: "bytes 10-999/1000")),
        Row(name: "If-Range of another version: the whole current one", tail: tail(), range: "bytes=10-", ifRange: "\"v0\"",
            plan: stream(200, 0, 999, total: 1000, range: nil)),
        Row(name: "bare Range on a file that changed lately: 409", tail: tail(), range: "bytes=10-", changed: true,
            plan: .refuse(.changed)),
        Row(name: "If-Range on a file that changed lately: honoured", tail: tail(), range: "bytes=10-", ifRange: "\"v1\"",
            changed: true, plan: stream(206, 10, 999, total: 1000, range: "bytes 10-999/1000")),
        Row(name: "If-None-Match of the version landing: 304", tail: tail(), ifNoneMatch: "\"v0\", W/\"v1\"",
            plan: .notModified(etag: "\"v1\"")),
        Row(name: "If-Match of the version landing: the body", tail: tail(), ifMatch: "\"v1\"",
            plan: stream(200, 0, 999, total: 1000, range: nil)),
        Row(name: "If-Match of another version: 412", tail: tail(), ifMatch: "\"v0\"", plan: .refuse(.precondition)),
        Row(name: "If-Match weak: 412 (strong comparison)", tail: tail(), ifMatch: "W/\"v1\"", plan: .refuse(.precondition)),
        Row(name: "If-None-Match *: 304", tail: tail(), ifNoneMatch: "*", plan: .notModified(etag: "\"v1\"")),
        Row(name: "If-None-Match of another version: the body", tail: tail(), ifNoneMatch: "\"v0\"",
            plan: stream(200, 0, 999, total: 1000, range: nil)),
        Row(name: "If-None-Match before the head: waits", tail: tail(), awaitingHead: true, ifNoneMatch: "\"v1\"", plan: .wait),
        Row(name: "completed, If-None-Match: the stored file decides", tail: tail(.completed), ifNoneMatch: "\"v1\"",
            plan: .serveStored),
        Row(name: "no ETag at the origin: a version tag", tail: tail(etag: nil), plan: stream(200, 0, 999, total: 1000, range: nil,
                                                                                              etag: "\"d1-1\"")),
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) {
        let plan = FetchPlan.decide(id: "d1", tail: row.tail, awaitingHead: row.awaitingHead, range: row.range,
                                    ifRange: row.ifRange, ifNoneMatch: row.ifNoneMatch, ifMatch: row.ifMatch, changedRecently: row.changed,
                                    mayChunk: !row.http10)
        #expect(plan == row.plan)
    }
}

@Suite struct FetchCursorTests {
    static func plan(start: Int64 = 0, end: Int64?, total: Int64?) -> FetchPlan.Streaming {
        .init(status: 200, start: start, end: end, total: total, contentRange: nil, etag: "\"e\"", generation: 3)
    }

    static func tail(_ phase: TailState.Phase, available: Int64, total: Int64?, generation: UInt64 = 3) -> TailState {
        var t = TailState()
        t.phase = phase
        t.available = available
        t.total = total
        t.generation = generation
        return t
    }

    @Test func holdsTheLastByteUntilTheVerdict() {
        var cursor = FetchCursor(Self.plan(end: 99, total: 100))
        #expect(cursor.step(Self.tail(.flowing, available: 60, total: 100)) == .send(from: 0, to: 60))
        cursor.sent(upTo: 60)
        #expect(cursor.step(Self.tail(.flowing, available: 100, total: 100)) == .send(from: 60, to: 99))
        cursor.sent(upTo: 99)
        #expect(cursor.step(Self.tail(.flowing, available: 100, total: 100)) == .wait)
        #expect(cursor.step(Self.tail(.completed, available: 100, total: 100)) == .send(from: 99, to: 100))
        cursor.sent(upTo: 100)
        #expect(cursor.step(Self.tail(.completed, available: 100, total: 100)) == .finish)
    }

    @Test func aFailureOrAnotherVersionAborts() {
        var cursor = FetchCursor(Self.plan(end: 99, total: 100))
        let failure = DownloadFailure(code: .checksumMismatch, message: "x")
        // The bytes in the file not sent yet go out first, never the last one.
        #expect(cursor.step(Self.tail(.failed(failure, stalled: false), available: 100, total: 100)) == .send(from: 0, to: 99))
        cursor.sent(upTo: 99)
        #expect(cursor.step(Self.tail(.failed(failure, stalled: false), available: 100, total: 100))
                == .fail("the download failed: checksum_mismatch"))
        #expect(FetchCursor(Self.plan(end: 99, total: 100)).step(Self.tail(.failed(failure, stalled: false), available: 0, total: 100))
                == .fail("the download failed: checksum_mismatch"))
        #expect(cursor.step(Self.tail(.flowing, available: 10, total: 100, generation: 4)) == .abort("the file changed at the origin"))
    }

    @Test func aRangeBeforeTheEndFinishesWithoutTheVerdict() {
        var cursor = FetchCursor(Self.plan(start: 10, end: 19, total: 100))
        #expect(cursor.step(Self.tail(.waiting, available: 5, total: 100)) == .wait)
        #expect(cursor.step(Self.tail(.flowing, available: 50, total: 100)) == .send(from: 10, to: 20))
        cursor.sent(upTo: 20)
        #expect(cursor.step(Self.tail(.flowing, available: 50, total: 100)) == .finish)
    }

    /// Size unknown: any byte landed may be the last, so the stream trails the file by one byte
    /// until the verdict; a failure aborts it short of the last byte landed.
    @Test func sizeUnknownStreamsAllButTheLastByteLandedUntilTheVerdict() {
        var cursor = FetchCursor(Self.plan(end: nil, total: nil))
        #expect(cursor.step(Self.tail(.waiting, available: 0, total: nil)) == .wait)
        #expect(cursor.step(Self.tail(.flowing, available: 1, total: nil)) == .wait)
        #expect(cursor.step(Self.tail(.flowing, available: 70, total: nil)) == .send(from: 0, to: 69))
        cursor.sent(upTo: 69)
        #expect(cursor.step(Self.tail(.flowing, available: 70, total: nil)) == .wait)
        #expect(cursor.step(Self.tail(.flowing, available: 80, total: nil)) == .send(from: 69, to: 79))
        cursor.sent(upTo: 79)
        let failed = Self.tail(.failed(DownloadFailure(code: .checksumMismatch, message: "x"), stalled: false), available: 80, total: nil)
        #expect(cursor.step(failed) == .fail("the download failed: checksum_mismatch"), "never the last byte")
        #expect(cursor.step(Self.tail(.completed, available: 80, total: 80)) == .send(from: 79, to: 80))
        cursor.sent(upTo: 80)
        #expect(cursor.step(Self.tail(.completed, available: 80, total: 80)) == .finish)
    }

    /// A closed range planned while the size was unknown that turns out to end at the file's last
    /// byte: that byte waits for the verdict, as for a range planned with the size known.
    @Test func aRangeFoundToEndAtTheLastByteWaitsForTheVerdict() {
        var cursor = FetchCursor(Self.plan(start: 90, end: 99, total: nil))
        #expect(cursor.step(Self.tail(.flowing, available: 100, total: 100)) == .send(from: 90, to: 99))
        cursor.sent(upTo: 99)
        #expect(cursor.step(Self.tail(.flowing, available: 100, total: 100)) == .wait, "not finished: the last byte is owed")
        let failed = Self.tail(.failed(DownloadFailure(code: .checksumMismatch, message: "x"), stalled: false), available: 100, total: 100)
        #expect(cursor.step(failed) == .fail("the download failed: checksum_mismatch"))
        #expect(cursor.step(Self.tail(.completed, available: 100, total: 100)) == .send(from: 99, to: 100))
    }

    /// Size unknown: the range's last byte may turn out to be the file's, so it waits until a byte
    /// beyond it lands, or for the verdict; a failure then aborts the response one byte short.
    @Test func sizeUnknownAClosedRangesLastByteWaitsForAByteBeyondIt() {
        var cursor = FetchCursor(Self.plan(start: 90, end: 99, total: nil))
        #expect(cursor.step(Self.tail(.flowing, available: 100, total: nil)) == .send(from: 90, to: 99))
        cursor.sent(upTo: 99)
        #expect(cursor.step(Self.tail(.flowing, available: 100, total: nil)) == .wait)
        #expect(cursor.step(Self.tail(.flowing, available: 101, total: nil)) == .send(from: 99, to: 100), "not the last byte")
        let failed = Self.tail(.failed(DownloadFailure(code: .checksumMismatch, message: "x"), stalled: false), available: 100, total: nil)
        #expect(cursor.step(failed) == .fail("the download failed: checksum_mismatch"))
        #expect(cursor.step(Self.tail(.completed, available: 100, total: 100)) == .send(from: 99, to: 100), "verified")
        cursor.sent(upTo: 100)
        #expect(cursor.step(Self.tail(.flowing, available: 101, total: nil)) == .finish)
    }

    @Test func aClosedRangeBeyondTheFinishedFileAborts() {
        let cursor = FetchCursor(Self.plan(start: 50, end: 149, total: nil))
        #expect(cursor.step(Self.tail(.completed, available: 100, total: 100)) == .abort("the range ends beyond the file"))
    }
}
