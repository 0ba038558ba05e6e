import Basics
import Foundation
import Testing

/// `HTTPDate`: IMF-fixdate formatting, the strict fixed-position parser (the server's conditional
/// requests) and the three-form parser (the engine's `Retry-After`, `Last-Modified`, `Date`).
@Suite("Basics: HTTPDate")
struct HTTPDateTests {
    static let example: time_t = 784_111_777  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test func formatsIMFFixdate() {
        #expect(HTTPDate.format(Self.example) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(1_700_000_000) == "Tue, 14 Nov 2023 22:13:20 GMT")
    }

    @Test func strictParserTakesOnlyIMFFixdate() {
        #expect(HTTPDate.parseIMFFixdate("Sun, 06 Nov 1994 08:49:37 GMT") == Self.example)
        #expect(HTTPDate.parseIMFFixdate("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
        #expect(HTTPDate.parseIMFFixdate("Sun Nov  6 08:49:37 1994") == nil)
        #expect(HTTPDate.parseIMFFixdate("Sun, 06 nov 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parseIMFFixdate("Sun, 06 Nov 1994 24:49:37 GMT") == nil)
        #expect(HTTPDate.parseIMFFixdate("Sun, 06 Nov 1994 08:49:37 UTC") == nil)
        #expect(HTTPDate.parseIMFFixdate("garbage") == nil)
    }

    /// The conditional requests' parser: the three forms as RFC 9110 writes them, nothing looser.
    @Test(arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", example),
        ("Sunday, 06-Nov-94 08:49:37 GMT", example),
        ("Sun Nov  6 08:49:37 1994", example),
        ("Sun Nov 16 08:49:37 1994", example + 10 * 86_400),
        ("Sunday, 06-Nov-05 08:49:37 GMT", 1_131_266_977),
        ("Wed, 15 Nov 2023 00:00:00 +0100", nil),
        ("Wed, 15 Nov 2023 00:00:00 PST", nil),
        ("Sunday, 06-Nov-94 08:49:37 PST", nil),
        ("Sunday, 06-Nov-1994 08:49:37 GMT", nil),
        ("Sun Nov  6 08:49:37 94", nil),
        ("Sun Nov 6 08:49:37 1994", nil),
        ("Sunday, 6-Nov-94 08:49:37 GMT", nil),
        ("garbage", nil),
        ("", nil),
    ] as [(String, time_t?)])
    func strictThreeFormParser(_ text: String, _ expected: time_t?) {
        #expect(HTTPDate.parseStrict(text) == expected)
    }

    @Test func generalParserTakesAllThreeForms() {
        let expected = Date(timeIntervalSince1970: TimeInterval(Self.example))
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.parse("sun, 06 NOV 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-05 08:49:37 GMT") == Date(timeIntervalSince1970: 1_131_266_977))
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:60 GMT") == expected + 22)  // a leap second reads as :59
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49 GMT") == nil)
        #expect(HTTPDate.parse("garbage") == nil)
    }

    @Test func bothParsersReadWhatFormatWrites() {
        var t: time_t = 0
        while t < 4_000_000_000 {
            let text = HTTPDate.format(t)
            #expect(HTTPDate.parseIMFFixdate(text) == t, "\(text)")
            #expect(HTTPDate.parse(text) == Date(timeIntervalSince1970: TimeInterval(t)), "\(text)")
            t += 86_399 * 37 + 11
        }
    }

    @Test func theCacheFollowsTheSecondItIsAskedFor() {
        var cache = HTTPDateCache()
        func text(_ second: Int) -> String { String(decoding: cache.bytes(forSecond: second), as: UTF8.self) }
        #expect(text(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(text(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(text(784_111_778) == "Sun, 06 Nov 1994 08:49:38 GMT")
        #expect(text(1_700_000_000) == "Tue, 14 Nov 2023 22:13:20 GMT")
        #expect(text(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }
}
