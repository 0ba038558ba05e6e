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
        #expect(plan([("Range", "bytes=500-")]) == .unsatisfiable)
    }

    /// Conditionals are read with the strict IMF-fixdate parser: an obsolete form counts as absent.
    @Test func obsoleteDateFormsCountAsAbsent() {
        #expect(plan([("If-Modified-Since", "Wed, 15 Nov 2023 00:00:00 GMT")]) == .notModified)
        #expect(plan([("If-Modified-Since", "Wednesday, 15-Nov-23 00:00:00 GMT")]) == .full)
        #expect(plan([("If-Modified-Since", "Wed Nov 15 00:00:00 2023")]) == .full)
        #expect(plan([("Range", "bytes=5-"), ("If-Range", "Tuesday, 14-Nov-23 22:13:20 GMT")]) == .full)
    }

    @Test func derivedETagIsStrongAndQuoted() {
        let tag = FileMetadata.derivedETag(inode: 255, size: 16, modifiedNanoseconds: 1)
        #expect(tag == "\"ff-10-1\"")
    }
}
