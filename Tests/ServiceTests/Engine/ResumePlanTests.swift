import Testing
@testable import DownloaderEngine

@Suite struct ResumePlanTests {
    static func head(_ status: Int, _ fields: [String: String]) -> ResponseHead {
        ResponseHead(status: status, headers: fields.reduce(into: [:]) { $0[$1.key.lowercased()] = [$1.value] },
                     effectiveURL: "http://o/f")
    }

    @Test func freshRequestHasNoRange() {
        #expect(ResumePlan.request(kept: 0, validator: Validator(etag: "\"a\"")).headers.isEmpty)
        #expect(ResumePlan.request(kept: 0, validator: nil) == .init(offset: 0, discardsKeptBytes: false, headers: []))
    }

    @Test func resumeWithStrongETag() {
        let plan = ResumePlan.request(kept: 1234, validator: Validator(etag: "\"v1\""))
        #expect(plan.offset == 1234)
        #expect(plan.headers == [.init(name: "Range", value: "bytes=1234-"), .init(name: "If-Range", value: "\"v1\"")])
    }

    @Test func resumeWithLastModified() {
        let lm = "Sun, 06 Nov 1994 08:49:37 GMT"
        let plan = ResumePlan.request(kept: 10, validator: Validator(etag: nil, lastModified: lm))
        #expect(plan.headers == [.init(name: "Range", value: "bytes=10-"), .init(name: "If-Range", value: lm)])
    }

    @Test func noValidatorDiscardsKeptBytes() {
        let plan = ResumePlan.request(kept: 99, validator: nil)
        #expect(plan == .init(offset: 0, discardsKeptBytes: true, headers: []))
    }

    @Test(arguments: [
        // (headers, expected validator)
        (["ETag": "\"abc\""], Validator(etag: "\"abc\"")),
        (["ETag": "W/\"abc\""], nil),
        (["ETag": "W/\"abc\"", "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT", "Date": "Mon, 07 Nov 1994 08:49:37 GMT"], nil),
        (["ETag": "\"abc\"", "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"], Validator(etag: "\"abc\"")),
        (["Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT", "Date": "Sun, 06 Nov 1994 08:49:38 GMT"],
         Validator(etag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")),
        (["Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT", "Date": "Sun, 06 Nov 1994 08:49:37 GMT"], nil),
        (["Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"], nil),
        (["Last-Modified": "garbage", "Date": "Sun, 06 Nov 1994 08:49:37 GMT"], nil),
        (["ETag": "abc"], nil),
        // Not entity tags (a quote or a space inside): no validator, never echoed to clients.
        (["ETag": "\"a\"b\""], nil),
        (["ETag": "\"a b\""], nil),
        (["ETag": "\"a,b\""], nil),  // Valid, but split by the lists of If-Match / If-None-Match.
        (["ETag": "\""], nil),
        (["ETag": "\"\""], Validator(etag: "\"\"")),
        (["ETag": "\"\u{e9}t\u{e9}\""], Validator(etag: "\"\u{e9}t\u{e9}\"")),
        ([:], nil),
        // A body in a coding nobody asked for is not resumed: its tag may name another coding's ranges.
        (["ETag": "\"abc\"", "Content-Encoding": "gzip"], nil),
        (["Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT", "Date": "Sun, 06 Nov 1994 08:49:38 GMT", "Content-Encoding": "br"], nil),
        (["ETag": "\"abc\"", "Content-Encoding": " Identity "], Validator(etag: "\"abc\"")),
    ] as [([String: String], Validator?)])
    func validatorStrength(_ fields: [String: String], _ expected: Validator?) {
        #expect(ResumePlan.validator(of: Self.head(200, fields)) == expected)
    }

    static let resume = ResumePlan.request(kept: 100, validator: Validator(etag: "\"v1\""))

    @Test(arguments: [
        (200, ["Content-Length": "500"], ResumePlan.Decision.accept(offset: 0, restarted: true, total: 500)),
        (206, ["Content-Range": "bytes 100-499/500", "ETag": "\"v1\""], .accept(offset: 100, restarted: false, total: 500)),
        (206, ["Content-Range": "bytes 100-499/*"], .accept(offset: 100, restarted: false, total: 500)),
        // Short of the end, the same version: kept, the rest asked for next.
        (206, ["Content-Range": "bytes 100-199/*"], .accept(offset: 100, restarted: false, total: 500)),
        (206, ["Content-Range": "bytes 100-200/500", "ETag": "\"v1\""], .accept(offset: 100, restarted: false, total: 500)),
        (206, ["Content-Range": "bytes 100-599/*"], .restartNextAttempt(reason: "206 with a Content-Range beyond the end (500 bytes)")),
        // From 0 whatever was asked: a fresh start (capped or not), as a 200 is.
        (206, ["Content-Range": "bytes 0-199/500"], .accept(offset: 0, restarted: true, total: 500)),
        (206, ["Content-Range": "bytes 0-499/500"], .accept(offset: 0, restarted: true, total: 500)),
        (206, ["Content-Range": "bytes 50-499/500"], .restartNextAttempt(reason: "206 starting at 50, expected 100")),
        (206, ["Content-Range": "bytes 100-200/500", "ETag": "\"v2\""], .restartNextAttempt(reason: "206 for a different ETag")),
        (206, [:], .restartNextAttempt(reason: "206 without a usable Content-Range")),
        // A body that is not the range it names: its bytes have no known place.
        (206, ["Content-Range": "bytes 100-199/500", "Content-Length": "400"],
         .restartNextAttempt(reason: "206 whose Content-Length is not the length of its Content-Range")),
        (206, ["Content-Range": "bytes 100-199/500", "Content-Length": "100"], .accept(offset: 100, restarted: false, total: 500)),
        (206, ["Content-Range": "bytes 100-599/600"], .restartNextAttempt(reason: "the total size changed from 500 to 600")),
        (206, ["Content-Range": "bytes 100-499/500", "ETag": "\"v2\""], .restartNextAttempt(reason: "206 for a different ETag")),
        (206, ["Content-Range": "bytes 100-499/500", "ETag": "\"v1\"", "Content-Encoding": "gzip"],
         .restartNextAttempt(reason: "206 in a content coding (gzip), not the bytes kept")),
        (416, [:], .restartNextAttempt(reason: "416: the kept bytes no longer fit the file")),
        (416, ["Content-Range": "bytes */100"], .restartNextAttempt(reason: "416: the kept bytes no longer fit the file")),
        (503, ["Retry-After": "7"], .retry(status: 503, retryAfter: "7")),
        (429, [:], .retry(status: 429, retryAfter: nil)),
        (520, [:], .retry(status: 520, retryAfter: nil)),
        (404, [:], .fail(status: 404)),
        (403, [:], .fail(status: 403)),
        (410, [:], .fail(status: 410)),
        (204, [:], .fail(status: 204)),
    ] as [(Int, [String: String], ResumePlan.Decision)])
    func decisionsOnResume(_ status: Int, _ fields: [String: String], _ expected: ResumePlan.Decision) {
        let decision = ResumePlan.decide(head: Self.head(status, fields), requested: Self.resume,
                                         sentValidator: Validator(etag: "\"v1\""), knownTotal: 500)
        #expect(decision == expected)
    }

    /// `416 bytes */N` with N the bytes kept (and no other validator): they are the whole file.
    @Test(arguments: [
        (["Content-Range": "bytes */100"], Optional<Int64>.none, true),
        (["Content-Range": "bytes */100", "ETag": "\"v1\""], 100, true),
        (["Content-Range": "bytes */100", "ETag": "\"v2\""], nil, false),
        (["Content-Range": "bytes */99"], nil, false),
        (["Content-Range": "bytes 0-1/100"], nil, false),
        (["Content-Range": "bytes */100"], 500, false),
    ] as [([String: String], Int64?, Bool)])
    func a416ForTheBytesKeptIsTheWholeFile(_ fields: [String: String], _ knownTotal: Int64?, _ whole: Bool) {
        let decision = ResumePlan.decide(head: Self.head(416, fields), requested: Self.resume,
                                         sentValidator: Validator(etag: "\"v1\""), knownTotal: knownTotal)
        #expect(decision == (whole ? .accept(offset: 100, restarted: false, total: 100)
                                   : .restartNextAttempt(reason: "416: the kept bytes no longer fit the file")))
    }

    /// A `200` to the resume: under the strong ETag sent (no coding, a length at least the kept
    /// bytes and no other size than known), the whole kept version again: its first 100 bytes are
    /// the kept ones. Otherwise a new version, from 0.
    @Test(arguments: [
        (["ETag": "\"v1\"", "Content-Length": "500"], Optional<Int64>.some(500), 200, true),
        (["ETag": "\"v1\"", "Content-Length": "500"], nil, 200, true),
        (["ETag": "\"v1\"", "Content-Length": "100"], nil, 200, true),
        (["ETag": "\"v1\"", "Content-Length": "99"], nil, 200, false),
        (["ETag": "\"v1\"", "Content-Length": "600"], 500, 200, false),
        (["ETag": "\"v1\""], 500, 200, false),
        (["ETag": "\"v2\"", "Content-Length": "500"], 500, 200, false),
        (["ETag": "W/\"v1\"", "Content-Length": "500"], 500, 200, false),
        (["ETag": "\"v1\"", "Content-Length": "500", "Content-Encoding": "gzip"], 500, 200, false),
        (["Content-Length": "500"], 500, 200, false),
        (["ETag": "\"v1\"", "Content-Length": "500"], 500, 203, false),
    ] as [([String: String], Int64?, Int, Bool)])
    func aWholeAnswerToAResume(_ fields: [String: String], _ knownTotal: Int64?, _ status: Int, _ sameVersion: Bool) {
        let decision = ResumePlan.decide(head: Self.head(status, fields), requested: Self.resume,
                                         sentValidator: Validator(etag: "\"v1\""), knownTotal: knownTotal)
        let length = fields["Content-Length"].flatMap { Int64($0) }
        #expect(decision == (sameVersion ? .accept(offset: 100, restarted: false, total: length)
                                         : .accept(offset: 0, restarted: true, total: length)))
    }

    /// A `Last-Modified` date alone never makes a whole answer the kept version (one second's resolution).
    @Test func aWholeAnswerUnderTheSameDateStartsOver() {
        let date = "Tue, 01 Dec 2026 10:00:00 GMT"
        let resume = ResumePlan.request(kept: 100, validator: Validator(lastModified: date))
        let head = Self.head(200, ["Last-Modified": date, "Date": "Tue, 01 Dec 2026 11:00:00 GMT", "Content-Length": "500"])
        #expect(ResumePlan.decide(head: head, requested: resume, sentValidator: Validator(lastModified: date), knownTotal: 500)
            == .accept(offset: 0, restarted: true, total: 500))
    }

    /// With no size known from before, `bytes N-M/*` is all there is to go by.
    @Test func anUnknownTotalStaysUnknown() {
        #expect(ResumePlan.decide(head: Self.head(206, ["Content-Range": "bytes 100-199/*"]), requested: Self.resume,
                                  sentValidator: Validator(etag: "\"v1\""), knownTotal: nil)
            == .accept(offset: 100, restarted: false, total: nil))
    }

    @Test func freshAttemptAccepts200() {
        let fresh = ResumePlan.request(kept: 0, validator: nil)
        #expect(ResumePlan.decide(head: Self.head(200, [:]), requested: fresh, sentValidator: nil, knownTotal: nil)
            == .accept(offset: 0, restarted: false, total: nil))
        #expect(ResumePlan.decide(head: Self.head(206, ["Content-Range": "bytes 5-9/10"]), requested: fresh,
                                  sentValidator: nil, knownTotal: nil)
            == .restartNextAttempt(reason: "206 starting at 5, expected 0"))
    }

    @Test(arguments: [
        ("bytes 0-9/10", ContentRange(first: 0, last: 9, total: 10)),
        ("bytes 5-9/*", ContentRange(first: 5, last: 9, total: nil)),
        ("bytes 9-5/10", nil), ("bytes 0-10/10", nil), ("items 0-1/2", nil), ("bytes */10", nil), ("bytes 0-9", nil),
        ("bytes 0-9223372036854775806/*", ContentRange(first: 0, last: .max - 1, total: nil)),
        ("bytes 0-9223372036854775807/*", nil),
    ] as [(String, ContentRange?)])
    func contentRange(_ text: String, _ expected: ContentRange?) {
        #expect(ContentRange.parse(text) == expected)
    }

    /// Any origin could send this; its length (one more than Int64.max) used to trap, ending the process.
    @Test func aRangeEndingAtTheLargestOffsetIsRefusedNotTrapped() {
        let fresh = ResumePlan.request(kept: 0, validator: nil)
        let head = Self.head(206, ["Content-Range": "bytes 0-9223372036854775807/*", "Content-Length": "1"])
        guard case .restartNextAttempt = ResumePlan.decide(head: head, requested: fresh, sentValidator: nil, knownTotal: nil) else {
            Issue.record("accepted")
            return
        }
    }
}
