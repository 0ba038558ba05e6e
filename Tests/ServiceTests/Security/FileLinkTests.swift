import Foundation
import Testing
@testable import DownloadService

/// Links to one file that need no token (`FileLink`): they open that file, for five minutes, under
/// the tokens they were signed with, and nothing else.
@Suite struct FileLinkTests {
    static func query(_ path: String) -> (expires: String?, signature: String?) {
        let items = URLComponents(string: "http://h" + path)?.queryItems ?? []
        return (items.first { $0.name == "expires" }?.value, items.first { $0.name == "signature" }?.value)
    }

    @Test func aLinkOpensOneFileForFiveMinutes() {
        let secret = Array("a secret no caller knows".utf8)
        let links = FileLink(secret: secret, tokens: ["caller", nil])
        let now = 1_800_000_000.5
        let link = links.path(id: "0123456789abcdef", now: now)
        #expect(link.expires == 1_800_000_300 && link.path.hasPrefix("/downloads/0123456789abcdef/file?expires=1800000300&signature="))
        let (expires, signature) = Self.query(link.path)
        func admits(_ id: String = "0123456789abcdef", e: String? = expires, s: String? = signature, at t: Double = now,
                    by: FileLink = links) -> Bool {
            by.admits(id: id, expires: e, signature: s, now: t)
        }
        #expect(admits() && admits(at: now + 299))
        #expect(!admits(at: now + 300), "lapsed")
        #expect(!admits("0123456789abcdee"), "another file")
        #expect(!admits(by: FileLink(secret: secret, tokens: ["other", nil])), "signed under other tokens")
        #expect(!admits(by: FileLink(secret: secret, tokens: [nil, "caller"])), "the same token in another role")
        // A caller knows the tokens, not the secret: it cannot sign a link itself.
        #expect(!admits(by: FileLink(secret: [], tokens: ["caller", nil])), "the tokens alone")
        #expect(!admits(by: FileLink(secret: Array("another installation".utf8), tokens: ["caller", nil])))
        #expect(!admits(s: signature.map { String($0.dropLast()) + ($0.hasSuffix("0") ? "1" : "0") }), "another signature")
        #expect(!admits(e: expires.map { String(Int64($0)! + 1) }), "another time")
        #expect(!admits(e: nil) && !admits(s: nil) && !admits(e: "x") && !admits(s: ""))
        // One that claims to last longer than links do (signed on a clock far ahead) is not taken.
        let ahead = links.path(id: "0123456789abcdef", now: now + 3600)
        let far = Self.query(ahead.path)
        #expect(!admits(e: far.expires, s: far.signature))
        #expect(admits(e: far.expires, s: far.signature, at: now + 3600))
    }
}
