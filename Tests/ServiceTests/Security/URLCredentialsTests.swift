@testable import DownloadService
@testable import DownloaderEngine
import Foundation
import Testing

/// Credentials in URLs: refused unless `allowURLCredentials`, never shown to callers (pure).
@Suite struct URLCredentialsTests {
    @Test(arguments: ["http://user:pw@example.com/x", "http://user@example.com/x", "https://:pw@example.com/",
                      "http://a%40b:p%3Aw@example.com:8080/f"])
    func refusedByDefault(url: String) {
        guard case .failure(let error) = URLNormalizer.normalize(url) else {
            Issue.record("accepted \(url)")
            return
        }
        #expect(error.code == .urlCredentials)
    }

    @Test(arguments: [
        ("http://user:pw@Example.com/x", "http://user:pw@example.com/x"),
        ("http://user@example.com:80/x#f", "http://user@example.com/x"),
        ("http://a%40b:p%3Aw@example.com:8080/f", "http://a%40b:p%3Aw@example.com:8080/f"),
        ("http://u:p@[::1]:81/f", "http://u:p@[::1]:81/f"),
    ])
    func keptWhenAllowed(url: String, normalized: String) throws {
        #expect(try URLNormalizer.normalize(url, allowCredentials: true).get() == normalized)
    }

    @Test(arguments: [
        ("http://user:s3cret@example.com/x", "http://example.com/x", "user:s3cret"),
        ("https://user@example.com", "https://example.com", "user:"),
        ("http://a%40b:p%3Aw@example.com:8080/f?q=a@b", "http://example.com:8080/f?q=a@b", "a@b:p:w"),
        ("http://u:p@[::1]:81/f", "http://[::1]:81/f", "u:p"),
        ("http://:pw@example.com/", "http://example.com/", ":pw"),
    ])
    func urlCredentialsBecomeBasicAuthorization(url: String, bare: String, pair: String) throws {
        let (stripped, authorization) = URLCredentials.split(url)
        #expect(stripped == bare)
        #expect(authorization == "Basic " + Data(pair.utf8).base64EncodedString())
    }

    /// Escapes are decoded to bytes, UTF-8 or not (a Latin-1 password), as curl sends them; every
    /// escape is decoded, also beside one that is not UTF-8.
    @Test func escapesAreDecodedToBytesUTF8OrNot() {
        let (_, latin1) = URLCredentials.split("http://u:p%E4ss@example.com/x")
        #expect(latin1 == "Basic " + Data([0x75, 0x3A, 0x70, 0xE4, 0x73, 0x73]).base64EncodedString())
        let (_, mixed) = URLCredentials.split("http://a%40%E4:%C3%A9@example.com/x")
        #expect(mixed == "Basic " + Data([0x61, 0x40, 0xE4, 0x3A, 0xC3, 0xA9]).base64EncodedString())
    }

    @Test(arguments: ["http://example.com/a@b", "http://example.com/?q=a@b", "https://example.com/#x@y", "http://example.com"])
    func urlsWithoutCredentialsStayAsTheyAre(url: String) {
        let (stripped, authorization) = URLCredentials.split(url)
        #expect(stripped == url && authorization == nil)
    }

    @Test func theGrammarStillRefusesJunkWithCredentialsAllowed() {
        for url in ["http://us er:pw@example.com/", "http://user:pw@/x", "http://@@example.com/"] {
            #expect((try? URLNormalizer.normalize(url, allowCredentials: true).get()) == nil, "\(url)")
        }
    }

    @Test(arguments: [
        ("http://user:pw@example.com/x", "http://***@example.com/x"),
        ("https://user@example.com", "https://***@example.com"),
        ("http://example.com/a@b", "http://example.com/a@b"),
        ("http://example.com/?q=a@b", "http://example.com/?q=a@b"),
        ("http://u:p@[::1]:81/f", "http://***@[::1]:81/f"),
    ])
    func snapshotsNeverShowCredentials(url: String, shown: String) {
        #expect(URLCredentials.redacted(url) == shown)
    }
}
