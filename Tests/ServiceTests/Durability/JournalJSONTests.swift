import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct JournalJSONTests {
    static func parse(_ text: String) -> JournalJSON? { Array(text.utf8).withUnsafeBytes { JournalJSON.parse($0) } }

    @Test(arguments: [
        (#"{"a":1,"b":[true,false,null],"c":"x"}"#, JournalJSON.object(["a": .number(1), "b": .array([.bool(true), .bool(false), .null]), "c": .string("x")])),
        (" [ -1.5e3 , 0 , 0.25 ] ", .array([.number(-1500), .number(0), .number(0.25)])),
        (#""a\/b\\c\"d\n\u00e9\ud83d\ude00""#, .string("a/b\\c\"d\né😀")),
        ("{}", .object([:])),
        ("[]", .array([])),
    ] as [(String, JournalJSON)])
    func valid(text: String, expected: JournalJSON) {
        #expect(Self.parse(text) == expected)
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\"1}", "01", "1.", "-", "\"abc", "\"\u{01}\"", "tru", "[1] x", "\"\\x\"",
                      "\"\\ud800\"", String(repeating: "[", count: 40) + String(repeating: "]", count: 40)])
    func invalid(text: String) {
        #expect(Self.parse(text) == nil)
    }

    @Test func agreesWithFoundationOnWhatJSONEncoderWrites() throws {
        let entry = JournalEntry(id: "0123456789abcdef", url: "https://o.test/ü/a b?c=\"d\"&e=\\", storage: .cache, state: .failed,
                                 validator: Validator(etag: "\"x/y\"", lastModified: nil), expectedTotal: 1 << 40,
                                 verifiedOffset: 123_456_789, expectedSHA256: nil, expectedSize: 7, fileName: "a\tb.bin",
                                 finalPath: nil, sha256: nil, size: nil, createdAt: Date(timeIntervalSince1970: 1_800_000_000.123456),
                                 updatedAt: Date(timeIntervalSince1970: 0.1), lastAccess: Date(timeIntervalSince1970: 1e9),
                                 error: DownloadFailure(code: "c", message: "line1\nline2 ☃"), tokens: ["t1", "t2"])
        let data = try #require(StateJournal.encode([entry, entry]))
        #expect(StateJournal.decodeFast(data) == [entry, entry])
    }
}
