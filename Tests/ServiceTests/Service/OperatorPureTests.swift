@testable import DownloadService
import DownloaderEngine
import Foundation
import Testing

/// The pure parts of the operator API: who may use which route, the admin routes, `--cache-ttl`,
/// and the `by` of `paused`/`removed` events.
@Suite struct OperatorPureTests {
    typealias V = AccessPolicy.Verdict

    static let callerOK = "Bearer caller"
    static let adminOK = "Bearer admin"
    static let wrong = "Bearer guess"

    /// (auth token, admin token, header, caller routes, /admin)
    static let access: [(String?, String?, String?, V, V)] = [
        (nil, nil, nil, .allowed, .allowed),
        (nil, nil, wrong, .allowed, .allowed),
        ("caller", nil, nil, .missing, .missing),
        ("caller", nil, "  ", .missing, .missing),
        ("caller", nil, callerOK, .allowed, .allowed),
        ("caller", nil, wrong, .wrong, .wrong),
        ("caller", "admin", callerOK, .allowed, .wrong),
        ("caller", "admin", adminOK, .allowed, .allowed),
        ("caller", "admin", "Basic " + Data("x:admin".utf8).base64EncodedString(), .allowed, .allowed),
        ("caller", "admin", wrong, .wrong, .wrong),
        ("caller", "admin", nil, .missing, .missing),
        (nil, "admin", nil, .allowed, .missing),
        (nil, "admin", callerOK, .allowed, .wrong),
        (nil, "admin", adminOK, .allowed, .allowed),
    ]

    @Test(arguments: access.indices)
    func accessTable(_ i: Int) {
        let (auth, admin, header, caller, adminVerdict) = Self.access[i]
        let policy = AccessPolicy(authToken: auth, adminToken: admin)
        #expect(policy.callerAccess(authorization: header) == caller, "row \(i)")
        #expect(policy.adminAccess(authorization: header) == adminVerdict, "row \(i)")
    }

    @Test func adminRoutes() {
        #expect(AdminEndpoint(path: "/admin/downloads/ab12/pause") == .pause("ab12"))
        #expect(AdminEndpoint(path: "/admin/downloads/ab12/resume/") == .resume("ab12"))
        #expect(AdminEndpoint(path: "/admin/downloads/ab12") == .download("ab12"))
        for path in ["/admin", "/admin/", "/admin/downloads", "/admin/downloads/ab12/stop", "/admin/downloads/a%20b/pause",
                     "/admin/uploads/ab12", "/admin/downloads/ab12/pause/x"] {
            #expect(AdminEndpoint(path: path) == nil, "\(path)")
        }
        #expect(AdminEndpoint.isAdmin("/admin") && AdminEndpoint.isAdmin("/admin/x"))
        #expect(!AdminEndpoint.isAdmin("/administrator") && !AdminEndpoint.isAdmin("/downloads"))
        #expect(AdminEndpoint.pause("a").allowedMethods == ["POST"] && AdminEndpoint.download("a").allowedMethods == ["DELETE"])
    }

    @Test func cacheTTLDurations() throws {
        let good: [(String, Double?)] = [("90", 90), ("30s", 30), ("15m", 900), ("12h", 43_200), ("7d", 604_800), ("0", nil),
                                         ("0s", nil), ("1.5h", 5400), (" 2D ", 172_800)]
        for (text, seconds) in good {
            #expect(try CommandLineOptions.duration(text, "--cache-ttl") == seconds, "\(text)")
        }
        for text in ["", "s", "-5", "5w", "1e9d", "nan", "inf", "+3", "3 m x"] {
            #expect(throws: CommandLineOptions.ParseError.self, "\(text)") { try CommandLineOptions.duration(text, "--cache-ttl") }
        }
        guard case .run(let c) = CommandLineOptions.parse(arguments: ["--cache-ttl", "2h", "--admin-token", "a"], environment: ["HOME": "/h"]) else {
            Issue.record("not parsed"); return
        }
        #expect(c.cacheTTL == 7200 && c.adminToken == "a" && c.engineConfiguration.cacheTTL == 7200)
        #expect(c.engineConfiguration.maxIdlePartialsPerClient == 1_000, "--max-downloads-per-client bounds the partials a client left too")
        guard case .run(let e) = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h", "DOWNLOAD_SERVICE_ADMIN_TOKEN": "b",
                                                                                      "DOWNLOAD_SERVICE_CACHE_TTL": "0"]) else {
            Issue.record("not parsed"); return
        }
        #expect(e.adminToken == "b" && e.cacheTTL == nil)
        #expect(CommandLineOptions.parse(arguments: ["--admin-token", ""], environment: ["HOME": "/h"]) != .run(e))
        #expect(CommandLineOptions.usage.contains("--admin-token TOKEN") && CommandLineOptions.usage.contains("--cache-ttl DURATION"))
    }

    @Test func pausedAndRemovedEventsSayBy() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var s = DownloadSnapshot(id: "a", url: "http://o.test/a", state: .paused, storage: .cache, createdAt: now, updatedAt: now,
                                 pausedBy: .operator)
        func data(_ e: DownloadEvent) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(DownloadAPI.eventData(e).utf8))) as? [String: Any] ?? [:]
        }
        #expect(data(.paused(s))["by"] as? String == "operator")
        #expect(data(.paused(s))["pausedBy"] as? String == "operator")
        s.pausedBy = .callers
        #expect(data(.paused(s))["by"] as? String == "callers")
        let removed = data(.removed(by: .retention, s))
        #expect(removed["by"] as? String == "retention" && removed["state"] as? String == "removed")
        #expect(DownloadAPI.eventName(.removed(by: .operator, s)) == "removed")
        #expect(DownloadEvent.removed(by: .operator, s).isTerminal)
        s.state = .downloading
        s.pausedBy = nil
        #expect(data(.progress(s))["by"] == nil && data(.progress(s))["pausedBy"] == nil)
    }
}
