import Basics
import Foundation
import Testing
@testable import MiniHTTPServer

@Suite("Range, conditional requests and dates")
struct FilePlanTests {
    @Test(arguments: [
        ("bytes=0-9", RangeHeader.Outcome.partial(start: 0, end: 9)),
        ("bytes=10-", .partial(start: 10, end: 99)),
        ("bytes=-10", .partial(start: 90, end: 99)),
        ("bytes=-1000", .partial(start: 0, end: 99)),
        ("bytes=90-200", .partial(start: 90, end: 99)),
        ("bytes=100-", .unsatisfiable),
        ("bytes=100-200", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=0-1,5-6", .full),
        ("bytes=9-3", .full),
        ("items=0-1", .full),
        ("bytes=a-b", .full),
        ("bytes=", .full),
    ])
    func rangeHeader(value: String, expected: RangeHeader.Outcome) {
        #expect(RangeHeader.evaluate(value, size: 100) == expected)
    }

    @Test func anEmptyFileHasOneSatisfiableRange() {
        #expect(RangeHeader.evaluate("bytes=-5", size: 0) == .full)
        #expect(RangeHeader.evaluate("bytes=-0", size: 0) == .unsatisfiable)
        #expect(RangeHeader.evaluate("bytes=0-", size: 0) == .unsatisfiable)
        #expect(RangeHeader.evaluate("bytes=0-9", size: 0) == .unsatisfiable)
    }

    static let meta = FileMetadata(size: 100, modified: 1_700_000_000, etag: "\"abc\"")

    func plan(_ headers: [(String, String)], method: String = "GET") -> FilePlan {
        FilePlan.decide(method: method, headers: HTTPHeaders(headers.map { (name: $0.0, value: $0.1) }), file: Self.meta)
    }

    @Test func conditionals() {
        let lastModified = HTTPDate.format(Self.meta.modified)
        let earlier = HTTPDate.format(Self.meta.modified - 10)
        #expect(plan([]) == .full)
        #expect(plan([("If-None-Match", "\"abc\"")]) == .notModified)
        #expect(plan([("If-None-Match", "\"x\", W/\"abc\"")]) == .notModified)
        #expect(plan([("If-None-Match", "*")]) == .notModified)
        #expect(plan([("If-None-Match", "\"x\"")]) == .full)
        #expect(plan([("If-None-Match", "\"x\""), ("If-Modified-Since", lastModified)]) == .full)
        #expect(plan([("If-Modified-Since", lastModified)]) == .notModified)
        #expect(plan([("If-Modified-Since", earlier)]) == .full)
        #expect(plan([("If-None-Match", "\"abc\"")], method: "POST") == .full)
        #expect(plan([("Range", "bytes=5-")]) == .partial(start: 5, end: 99))
        #expect(plan([("Range", "bytes=5-"), ("If-Range", "\"abc\"")]) == .partial(start: 5, end: 99))
        #expect(plan([("Range", "bytes=5-"), ("If-Range", "\"other\"")]) == .full)
        #expect(plan([("Range", "bytes=5-"), ("If-Range", "W/\"abc\"")]) == .full)
        #expect(plan([("Range", "bytes=5-"), ("If-Range", lastModified)]) == .partial(start: 5, end: 99))
        #expect(plan([("Range", "bytes=5-"), ("If-Range", earlier)]) == .full)
        // Another strong date naming the same content (an origin's Last-Modified) holds too.
        var stored = Self.meta
        stored.alsoModified = [Self.meta.modified - 10]
        #expect(FilePlan.decide(method: "GET", headers: HTTPHeaders([(name: "Range", value: "bytes=5-"), (name: "If-Range", value: earlier)]),
                                file: stored) == .partial(start: 5, end: 99))
        #expect(plan([("Range", "bytes=500-")]) == .unsatisfiable)
    }

    /// A recipient must accept all three HTTP-date forms (RFC 9110 §5.6.7); 1 700 000 000 is
    /// Tue, 14 Nov 2023 22:13:20 GMT.
    @Test func everyDateFormIsRead() {
        #expect(plan([("If-Modified-Since", "Wed, 15 Nov 2023 00:00:00 GMT")]) == .notModified)
        #expect(plan([("If-Modified-Since", "Wednesday, 15-Nov-23 00:00:00 GMT")]) == .notModified)
        #expect(plan([("If-Modified-Since", "Wed Nov 15 00:00:00 2023")]) == .notModified)
        #expect(plan([("If-Modified-Since", "Tue Nov 14 22:13:19 2023")]) == .full)
        #expect(plan([("Range", "bytes=5-"), ("If-Range", "Tuesday, 14-Nov-23 22:13:20 GMT")]) == .partial(start: 5, end: 99))
        #expect(plan([("Range", "bytes=5-"), ("If-Range", "Tuesday, 14-Nov-23 22:13:21 GMT")]) == .full)
        #expect(plan([("If-Modified-Since", "not a date")]) == .full)
        #expect(plan([("If-Unmodified-Since", "Wed, 15 Nov 2023 00:00:00 +0100")]) == .full, "not a date: ignored")
    }

    /// `If-Match` (strong comparison) and `If-Unmodified-Since` come first (RFC 9110 §13.2.2).
    @Test(arguments: [
        ([("If-Match", "\"abc\"")], FilePlan.full),
        ([("If-Match", "\"x\", \"abc\"")], .full),
        ([("If-Match", "*")], .full),
        ([("If-Match", "\"x\"")], .preconditionFailed),
        ([("If-Match", "W/\"abc\"")], .preconditionFailed),
        ([("If-Match", "\"origin\"")], .full),
        ([("If-Match", "\"x\""), ("If-Unmodified-Since", "Wed, 15 Nov 2023 00:00:00 GMT")], .preconditionFailed),
        ([("If-Match", "\"abc\""), ("Range", "bytes=5-")], .partial(start: 5, end: 99)),
        ([("If-Unmodified-Since", "Wed, 15 Nov 2023 00:00:00 GMT")], .full),
        ([("If-Unmodified-Since", "Tue, 14 Nov 2023 22:13:20 GMT")], .full),
        ([("If-Unmodified-Since", "Tue, 14 Nov 2023 22:13:19 GMT")], .preconditionFailed),
        ([("If-Unmodified-Since", "Sunday, 01-Jan-01 00:00:00 GMT")], .preconditionFailed),
        ([("If-None-Match", "\"origin\"")], .notModified),
        ([("Range", "bytes=5-"), ("If-Range", "\"origin\"")], .partial(start: 5, end: 99)),
    ] as [([(String, String)], FilePlan)])
    func preconditions(_ headers: [(String, String)], _ expected: FilePlan) {
        var meta = Self.meta
        meta.alsoMatches = ["\"origin\""]
        #expect(FilePlan.decide(method: "GET", headers: HTTPHeaders(headers.map { (name: $0.0, value: $0.1) }), file: meta) == expected)
    }

    @Test func derivedETagIsStrongAndQuoted() {
        let tag = FileMetadata.derivedETag(inode: 255, size: 16, modifiedNanoseconds: 1)
        #expect(tag == "\"ff-10-1\"")
    }
}
