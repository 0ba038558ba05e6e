import Foundation
import Testing
@testable import DownloaderEngine

/// `WebhookRegistrations`: by id, and indexed by download and by caller token, the indexes kept
/// in step with inserts, replacements and removals.
@Suite struct WebhookRegistrationsTests {
    static func registration(_ id: String, download: String, token: String) -> WebhookRegistration {
        WebhookRegistration(id: id, downloadID: download, tokenHash: TokenHash(token: token), url: "http://r.test/\(id)",
                            events: [.completed], createdAt: Date(timeIntervalSince1970: 0))
    }

    @Test func indexesFollowInsertsReplacementsAndRemovals() {
        var r = WebhookRegistrations()
        r.insert(Self.registration("a", download: "d1", token: "t1"))
        r.insert(Self.registration("b", download: "d1", token: "t2"))
        r.insert(Self.registration("c", download: "d2", token: "t1"))
        #expect(r.count == 3)
        #expect(Set(r.of(download: "d1").map(\.id)) == ["a", "b"])
        #expect(Set(r.ids(ofToken: TokenHash(token: "t1"))) == ["a", "c"])
        // Replaced under its id: moved to its new download and token, gone from the old ones.
        r.insert(Self.registration("a", download: "d2", token: "t3"))
        #expect(r.count == 3)
        #expect(r.of(download: "d1").map(\.id) == ["b"])
        #expect(Set(r.of(download: "d2").map(\.id)) == ["a", "c"])
        #expect(r.ids(ofToken: TokenHash(token: "t1")) == ["c"])
        #expect(r.ids(ofToken: TokenHash(token: "t3")) == ["a"])
        r.remove("c")
        r.remove("missing")
        #expect(r["c"] == nil && r["a"]?.downloadID == "d2")
        #expect(r.of(download: "d2").map(\.id) == ["a"])
        #expect(r.ids(ofToken: TokenHash(token: "t1")).isEmpty)
        #expect(r.of(download: "d9").isEmpty && r.count == 2)
    }
}
