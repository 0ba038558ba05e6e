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

    static let entries: [JournalEntry] = [
        JournalEntry(id: "a", url: "http://h/", storage: .cache, state: .queued, verifiedOffset: 0,
                     createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 1), lastAccess: Date(timeIntervalSince1970: 2)),
        JournalEntry(id: "b", url: "https://u:p@h:8443/x/y?z=1#f", storage: .persistent, state: .completed,
                     validator: Validator(etag: nil, lastModified: "Tue, 15 Nov 1994 08:12:31 GMT"), expectedTotal: 9,
                     verifiedOffset: 9, expectedSHA256: String(repeating: "ab", count: 32), expectedSize: 9, fileName: "\u{7f}\u{1f}x\"/\\",
                     finalPath: "/var/lib/d/b-x", sha256: String(repeating: "ab", count: 32), size: 9,
                     createdAt: Date(timeIntervalSince1970: 1_800_000_000.000_001), updatedAt: Date(timeIntervalSince1970: 1e-5),
                     lastAccess: Date(timeIntervalSince1970: 4_102_444_800.5), error: nil, tokens: []),
        JournalEntry(id: "c", url: "http://h/c", storage: .cache, state: .failed, verifiedOffset: 3,
                     createdAt: Date(timeIntervalSince1970: 1), updatedAt: Date(timeIntervalSince1970: 1), lastAccess: Date(timeIntervalSince1970: 1),
                     error: DownloadFailure(code: .httpError, message: "404 \"Not Found\"", httpStatus: 404),
                     tokens: Set((0..<50).map { String(format: "%032x", $0) })),
    ]

    /// The hand-written encoder against both readers: the fast one and Codable's (the fallback).
    @Test(arguments: 0..<3)
    func encodedEntriesReadBackTheSame(_ index: Int) throws {
        let entry = Self.entries[index]
        let data = try #require(StateJournal.encode([entry, entry]))
        #expect(StateJournal.decodeFast(data) == [entry, entry])
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let document = try decoder.decode(StateJournal.Document.self, from: data)
        #expect(document.version == 1 && document.downloads == [entry, entry])
    }

    /// The format, pinned: keys in byte order (as JSONEncoder with sorted keys wrote them), nil
    /// optionals left out, dates as numbers, slashes unescaped.
    @Test func writesTheDocumentedFormat() throws {
        #expect(StateJournal.encode([]) == Data(#"{"downloads":[],"version":1}"#.utf8))
        let text = String(decoding: try #require(StateJournal.encode([Self.entries[0]])), as: UTF8.self)
        #expect(text == #"{"downloads":[{"createdAt":0,"id":"a","lastAccess":2,"state":"queued","storage":"cache","updatedAt":1,"#
                + #""url":"http://h/","verifiedOffset":0}],"version":1}"#)
    }

    @Test func agreesWithFoundationOnWhatJSONEncoderWrites() throws {
        let entry = JournalEntry(id: "0123456789abcdef", url: "https://o.test/ü/a b?c=\"d\"&e=\\", storage: .cache, state: .failed,
                                 validator: Validator(etag: "\"x/y\"", lastModified: nil), expectedTotal: 1 << 40,
                                 verifiedOffset: 123_456_789, expectedSHA256: nil, expectedSize: 7, fileName: "a\tb.bin",
                                 finalPath: nil, sha256: nil, size: nil, createdAt: Date(timeIntervalSince1970: 1_800_000_000.123456),
                                 updatedAt: Date(timeIntervalSince1970: 0.1), lastAccess: Date(timeIntervalSince1970: 1e9),
                                 error: DownloadFailure(journalCode: "c", message: "line1\nline2 ☃", httpStatus: nil), tokens: ["t1", "t2"])
        let data = try #require(StateJournal.encode([entry, entry]))
        #expect(StateJournal.decodeFast(data) == [entry, entry])
    }

    static func failedEntry(_ failure: DownloadFailure) -> JournalEntry {
        JournalEntry(id: "f", url: "http://h/f", storage: .cache, state: .failed, verifiedOffset: 0,
                     createdAt: Date(timeIntervalSince1970: 1), updatedAt: Date(timeIntervalSince1970: 2),
                     lastAccess: Date(timeIntervalSince1970: 3), error: failure)
    }

    /// Every failure code is stored as its wire string, as when `code` was a `String`, and reads back
    /// as the same case through both readers.
    @Test(arguments: DownloadFailure.Code.allCases)
    func failureCodesAreStoredAsTheirWireStrings(_ code: DownloadFailure.Code) throws {
        let entry = Self.failedEntry(DownloadFailure(code: code, message: "m", httpStatus: 500))
        let data = try #require(StateJournal.encode([entry]))
        #expect(String(decoding: data, as: UTF8.self) == #"{"downloads":[{"createdAt":1,"error":{"code":""#
                + code.rawValue + #"","httpStatus":500,"message":"m"},"id":"f","lastAccess":3,"state":"failed","#
                + #""storage":"cache","updatedAt":2,"url":"http://h/f","verifiedOffset":0}],"version":1}"#)
        #expect(StateJournal.decodeFast(data)?.first?.error?.code == code)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        #expect(try decoder.decode(StateJournal.Document.self, from: data).downloads == [entry])
    }

    /// A journal that a newer build wrote may hold a failure code this build does not know: the entry
    /// loads (never a corrupt journal, never a dropped download) with code `.unknown`, and writing the
    /// journal back keeps the original string, byte for byte.
    @Test func anUnknownFailureCodeLoadsAsUnknownAndIsWrittenBackUnchanged() throws {
        let text = #"{"downloads":[{"createdAt":1,"error":{"code":"quota_exceeded","httpStatus":507,"message":"m"},"#
            + #""id":"f","lastAccess":3,"state":"failed","storage":"cache","updatedAt":2,"url":"http://h/f","verifiedOffset":0}],"#
            + #""version":1}"#
        let fast = try #require(StateJournal.decodeFast(Data(text.utf8)))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let slow = try decoder.decode(StateJournal.Document.self, from: Data(text.utf8)).downloads
        for entries in [fast, slow] {
            let error = try #require(entries.first?.error)
            #expect(entries.count == 1 && entries[0].state == .failed)
            #expect(error.code == .unknown && error.message == "m" && error.httpStatus == 507)
            #expect(String(decoding: try #require(StateJournal.encode(entries)), as: UTF8.self) == text)
        }
        #expect(fast == slow)
        // A code set afterwards replaces the unknown string.
        var replaced = try #require(fast.first)
        replaced.error?.code = .diskFull
        #expect(String(decoding: try #require(StateJournal.encode([replaced])), as: UTF8.self).contains(#""code":"disk_full""#))

        let directory = EngineFixture.root().path
        try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/journal.json"))
        #expect(StateJournal(directory: directory).load() == .loaded(fast))
    }
}
