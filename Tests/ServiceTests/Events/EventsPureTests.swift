@testable import DownloaderEngine
import Foundation
import MiniHTTPServer
import Testing
@testable import DownloadService

/// The pure parts of `GET /events` and `GET /`: where a token may come from, the option, the page's
/// policy naming exactly its inline script and style, and the history's bounds.
@Suite struct EventsPureTests {
    @Test func tokenInTheQueryOnlyForTheStreamAndFiles() {
        func authorization(_ method: String, _ target: String, header: String? = nil) -> String? {
            var headers = HTTPHeaders()
            if let header { headers["Authorization"] = header }
            let request = Request(method: method, target: target, headers: headers)
            return QueryToken.authorization(for: Endpoint(path: request.path)!, request)
        }
        #expect(authorization("GET", "/events?access_token=s%2Bx") == "Bearer s+x")
        #expect(authorization("HEAD", "/downloads/ab/file?access_token=t") == "Bearer t")
        #expect(authorization("GET", "/events?access_token=t", header: "Bearer h") == "Bearer h")  // the header wins
        #expect(authorization("GET", "/events?access_token=") == nil)
        #expect(authorization("GET", "/events") == nil)
        #expect(authorization("GET", "/downloads?access_token=t") == nil)
        #expect(authorization("POST", "/downloads?access_token=t") == nil)
        #expect(authorization("GET", "/downloads/ab/progress?access_token=t") == nil)
        #expect(authorization("GET", "/metrics?access_token=t") == nil)
    }

    @Test func maxEventSubscribersOption() {
        let base = ["HOME": "/home/u"]
        guard case .run(let c) = CommandLineOptions.parse(arguments: ["--max-event-subscribers", "7"], environment: base) else {
            Issue.record("refused")
            return
        }
        #expect(c.maxEventSubscribers == 7)
        guard case .run(let d) = CommandLineOptions.parse(arguments: [], environment: base) else {
            Issue.record("refused the defaults")
            return
        }
        #expect(d.maxEventSubscribers == 1_024)
        guard case .invalid(let message) = CommandLineOptions.parse(arguments: ["--max-event-subscribers", "0"], environment: base) else {
            Issue.record("accepted 0")
            return
        }
        #expect(message.contains("--max-event-subscribers"))
    }

    /// The policy's hashes are those of the very script and style the page inlines, nothing is
    /// allowed inline otherwise, and the page names no other origin.
    @Test func pagePolicyNamesItsInlineScriptAndStyle() throws {
        let page = String(decoding: OperatorPage.body, as: UTF8.self)
        func inline(_ tag: String) throws -> String {
            let start = try #require(page.range(of: "<\(tag)>"))
            let end = try #require(page.range(of: "</\(tag)>", range: start.upperBound..<page.endIndex))
            return String(page[start.upperBound..<end.lowerBound])
        }
        let policy = OperatorPage.contentSecurityPolicy
        #expect(policy.contains("script-src 'sha256-\(SHA256Digest.base64(of: Array(try inline("script").utf8)))'"))
        #expect(policy.contains("style-src 'sha256-\(SHA256Digest.base64(of: Array(try inline("style").utf8)))'"))
        #expect(policy.hasPrefix("default-src 'none';") && !policy.contains("unsafe"))
        #expect(page.components(separatedBy: "<script").count == 2 && page.components(separatedBy: "<style").count == 2)
        #expect(!page.contains("src=") && !page.contains("href=\"http") && !page.contains("@import") && !page.contains("url("))
        #expect(!page.contains(" style=") && !page.contains("onclick") && !page.contains("javascript:"))
        #expect(SHA256Digest.base64(of: Array("abc".utf8)) == "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
    }

    @Test func historyIndexesSurviveWrapping() {
        var history = FeedHistory(capacity: 3, droppedUpTo: 10)
        for id in UInt64(11)...15 {
            history.append(.init(id: id, download: "d", kind: .created(EventFeedTests.snapshot("d"))))
        }
        #expect(history.count == 3 && history.oldestIndex == 2 && history.droppedUpTo == 12)
        #expect(history.entry(at: 1) == nil && history.entry(at: 2)?.id == 13 && history.entry(at: 4)?.id == 15)
        #expect(history.entry(at: 5) == nil)
        #expect(history.index(after: 11, newestIssued: 15) == nil)
        #expect(history.index(after: 12, newestIssued: 15) == 2)
        #expect(history.index(after: 14, newestIssued: 15) == 4)
        #expect(history.index(after: 15, newestIssued: 15) == 5)
        #expect(history.index(after: 16, newestIssued: 15) == nil)
    }
}
