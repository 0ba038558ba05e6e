@testable import DownloadService
@testable import DownloaderEngine
import Foundation
import MiniHTTPServer
import Synchronization
import Testing

/// The API's per-client and per-download limits, answered in-process by `DownloadAPI` (no socket),
/// plus the flags that set them. The only URLs asked for name loopback and are refused by the guard.
@Suite struct APILimitsTests {
    static func engine() throws -> DownloadEngine {
        try DownloadEngine(configuration: EngineConfiguration(root: EngineFixture.root()))
    }

    static func post(_ api: DownloadAPI, _ url: String, from remote: String) async -> Response {
        var headers = HTTPHeaders()
        headers["Content-Type"] = "application/json"
        return await api.respond(to: Request(method: "POST", target: "/downloads", headers: headers,
                                             body: Array(#"{"url":"\#(url)"}"#.utf8), remoteAddress: remote))
    }

    static func json(_ response: Response) -> [String: Any] {
        guard case .bytes(let bytes) = response.body else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
    }

    static func errorCode(_ response: Response) -> String? {
        (json(response)["error"] as? [String: Any])?["code"] as? String
    }

    @Test func liveCallerTokensPerClientAddressAreCapped() async throws {
        let engine = try Self.engine()
        var api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        api.callerQuota = CallerQuota(limit: 2) { [engine] in engine.liveTokens(among: $0) }
        let url = "http://localhost:9/never"  // refused at connect time; the download and tokens still exist

        let first = await Self.post(api, url, from: "127.0.0.5:4000")
        let second = await Self.post(api, url, from: "127.0.0.5:4001")
        #expect(first.status == 202 && second.status == 202)
        let third = await Self.post(api, url, from: "127.0.0.5:4002")
        #expect(third.status == 429)
        #expect(Self.errorCode(third) == "too_many_downloads")
        #expect(third.headers["Retry-After"] == "30")
        // Another client address has its own allowance.
        #expect(await Self.post(api, url, from: "127.0.0.6:4000").status == 202)
        // Refused requests (403, 400) take no place.
        #expect(await Self.post(api, "http://127.0.0.1:9/x", from: "127.0.0.7:1").status == 403)
        #expect(await Self.post(api, "http://127.0.0.1:9/x", from: "127.0.0.7:1").status == 403)
        #expect(await Self.post(api, "http://localhost:9/a", from: "127.0.0.7:1").status == 202)

        // Cancelling one token frees its place.
        let token = try #require(Self.json(first)["token"] as? String)
        let cancelled = await api.respond(to: Request(method: "DELETE", target: "/downloads/\(token)", remoteAddress: "127.0.0.5:4003"))
        #expect(cancelled.status == 200)
        #expect(await Self.post(api, url, from: "127.0.0.5:4004").status == 202)
        #expect(await Self.post(api, url, from: "127.0.0.5:4005").status == 429)
        await engine.shutdown()
    }

    /// A completed or failed download's tokens hold no place (as at the per-download cap): only
    /// tokens of downloads still queued, running or paused count against the client's limit.
    @Test func tokensOfEndedDownloadsHoldNoPlace() async throws {
        let body = EngineFixture.body(1000)
        let driver = FakeTransferDriver { request, _ in
            if request.url.hasSuffix("/done") { return .init(status: 200, headers: ["Content-Length": "1000"], body: body) }
            if request.url.hasSuffix("/gone") { return .init(status: 404, headers: [:], body: []) }
            return nil  // held: the download keeps running
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let done = try engine.request(DownloadRequest(url: "http://o.test/done"))
        let gone = try engine.request(DownloadRequest(url: "http://o.test/gone"))
        let held = try engine.request(DownloadRequest(url: "http://o.test/held"))
        let leaving = try engine.request(DownloadRequest(url: "http://o.test/shared"))
        let staying = try engine.request(DownloadRequest(url: "http://o.test/shared"))
        _ = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: done.snapshot.id, [.completed]) }
        _ = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: gone.snapshot.id, [.failed]) }
        _ = engine.cancel(token: leaving.token)
        let tokens = [done.token, gone.token, held.token, staying.token, leaving.token]
        #expect(engine.liveTokens(among: tokens) == Set([done.token, gone.token, held.token, staying.token]))
        #expect(engine.tokensHoldingPlaces(among: tokens) == Set([held.token, staying.token]))
        await engine.shutdown()
    }

    /// A `DELETE` of a token is answered once the cancel is committed: a crash right after it
    /// cannot bring the token back (commits here take 0.3 s each).
    @Test func aCancelIsAnsweredOnceItIsCommitted() async throws {
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: FakeTransferDriver())
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        let r = try engine.request(DownloadRequest(url: "http://o.test/held"))
        #expect(try StateFixture.stored(engine).first?.tokens.count == 1)
        engine.core.stateWriter.gateCommits { _ throws(StateStoreError) in Thread.sleep(forTimeInterval: 0.3) }
        let cancelled = await api.respond(to: Request(method: "DELETE", target: "/downloads/\(r.token)", remoteAddress: "127.0.0.5:4000"))
        #expect(cancelled.status == 200)
        let stored = try StateFixture.read(engine.core.store.stateDirectory)
        #expect(stored.first?.tokens.isEmpty == true, "the cancel was on disk when it was answered")
        await engine.shutdown()
    }

    /// An IPv6 client counts under its /64: a host that picks a fresh address of its network per
    /// request still holds one allowance.
    @Test func anIPv6ClientsAddressesShareOneAllowance() async throws {
        let engine = try Self.engine()
        var api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        api.callerQuota = CallerQuota(limit: 2) { [engine] in engine.liveTokens(among: $0) }
        let url = "http://localhost:9/never"
        #expect(await Self.post(api, url, from: "[2001:db8:5::1]:4000").status == 202)
        #expect(await Self.post(api, url, from: "[2001:db8:5::2]:4000").status == 202)
        let third = await Self.post(api, url, from: "[2001:db8:5:0:ffff::9]:4000")
        #expect(third.status == 429 && Self.errorCode(third) == "too_many_downloads")
        #expect(await Self.post(api, url, from: "[2001:db8:6::1]:4000").status == 202)
        await engine.shutdown()
    }

    @Test func tokensTheEngineDroppedNoLongerCount() {
        let live = LiveSet()
        let clock = Mutex<UInt64>(0)
        let checks = Mutex(0)
        let quota = CallerQuota(limit: 1, recheckInterval: 1, now: { clock.withLock { $0 } }) { tokens in
            checks.withLock { $0 += 1 }
            return live.filter(tokens)
        }
        #expect(quota.reserve("a"))
        quota.commit("a", token: "t1")
        live.set(["t1"])
        #expect(!quota.reserve("a"))
        #expect(checks.withLock { $0 } == 1)
        // Refused again within the interval without another check, even once the token died.
        live.set([])  // e.g. the download was forgotten
        for _ in 0..<100 { #expect(!quota.reserve("a")) }
        #expect(checks.withLock { $0 } == 1)
        // Another client at its limit is checked on its own.
        #expect(quota.reserve("b"))
        quota.commit("b", token: "t2")
        live.set(["t2"])
        #expect(!quota.reserve("b"))
        #expect(checks.withLock { $0 } == 2)
        // After the interval, the check runs again and finds the dropped token.
        clock.withLock { $0 = 1_000_000_001 }
        #expect(quota.reserve("a"))
        quota.cancel("a")
        #expect(quota.count("a") == 0)
        // Cancelling a token frees its place at once, check or no check.
        #expect(!quota.reserve("b"))
        quota.remove("t2")
        #expect(quota.reserve("b"))
    }

    @Test func callerTokensBookkeeping() {
        var tokens = CallerTokens(limit: 2)
        let one = tokens.reserve("c"), two = tokens.reserve("c"), three = tokens.reserve("c")
        #expect(one && two && !three)  // two requests in flight hold both places
        tokens.commit("c", token: "t1")
        tokens.cancel("c")
        let four = tokens.reserve("c")
        #expect(four)
        tokens.commit("c", token: "t2")
        let five = tokens.reserve("c")
        #expect(!five)
        tokens.remove("t1")
        tokens.remove("unknown")
        #expect(tokens.tokens(of: "c") == ["t2"] && tokens.totalTokens == 1)
        tokens.remove("t2")
        #expect(tokens.byClient.isEmpty && tokens.pending.isEmpty)
    }

    @Test func progressStreamsPerDownloadAreCapped() async throws {
        let engine = try Self.engine()
        var api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        api.subscriberQuota = SubscriberQuota(limit: 2)
        let a = try engine.request(DownloadRequest(url: "http://localhost:9/a")).snapshot.id
        let b = try engine.request(DownloadRequest(url: "http://localhost:9/b")).snapshot.id
        let get = Request(method: "GET", target: "/")

        var first: Response? = api.progress(id: a, request: get)
        let second = api.progress(id: a, request: get)
        #expect(first?.status == 200 && second.status == 200)
        let third = api.progress(id: a, request: get)
        #expect(third.status == 503)
        // HEAD answers what a GET would, and takes no place.
        #expect(api.progress(id: a, request: Request(method: "HEAD", target: "/")).status == 503)
        #expect(api.progress(id: b, request: Request(method: "HEAD", target: "/")).status == 200)
        #expect(api.subscriberQuota.count(b) == 0)
        #expect(Self.errorCode(third) == "too_many_subscribers")
        #expect(third.headers["Retry-After"] == "5")
        #expect(api.progress(id: b, request: get).status == 200)
        // A response dropped (stream ended, client gone, never sent) gives its place back.
        first = nil
        #expect(api.subscriberQuota.count(a) == 1)
        let again = api.progress(id: a, request: get)
        #expect(again.status == 200)
        // An unknown id takes no place.
        #expect(api.progress(id: "nope", request: get).status == 404)
        #expect(api.subscriberQuota.count("nope") == 0)
        withExtendedLifetime((first, second, again)) {}
        await engine.shutdown()
    }

    @Test func anIdNeverCancelsACallersInterest() async throws {
        let engine = try Self.engine()
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        let created = await Self.post(api, "http://localhost:9/z", from: "127.0.0.1:1")
        let id = try #require(Self.json(created)["id"] as? String)
        let token = try #require(Self.json(created)["token"] as? String)
        #expect(token.count == 32 && id.count == 16 && token != id)  // 128 and 64 random bits, hex
        let byID = await api.respond(to: Request(method: "DELETE", target: "/downloads/\(id)"))
        #expect(byID.status == 404)
        #expect(engine.snapshot(id: id)?.callers == 1)
        #expect(await api.respond(to: Request(method: "DELETE", target: "/downloads/\(token)")).status == 200)
        #expect(await api.respond(to: Request(method: "DELETE", target: "/downloads/\(token)")).status == 404)
        await engine.shutdown()
    }

    @Test func everyRefusalCarriesRetryAfter() {
        #expect(APIError(engineError: .tooManyCallers("x")).headers["Retry-After"] == "60")
        #expect(APIError(engineError: .shuttingDown()).headers["Retry-After"] == "5")
        #expect(APIError.tooManyDownloads(limit: 1).status == 429)
        #expect(APIError(engineError: .destinationForbidden("127.0.0.1 is loopback")).status == 403)
        #expect(APIError(engineError: .urlCredentials("x")).status == 400)
    }

    @Test func securityFlagsParse() throws {
        let env = ["HOME": "/h", "DOWNLOAD_SERVICE_DENY_HOST": "10.0.0.0/8, *.internal"]
        guard case .run(let c) = CommandLineOptions.parse(
            arguments: ["--allow-host", "a.example.com", "--allow-host=127.0.0.1:8080,fc00::/7", "--deny-host", "b.example.com",
                        "--allow-url-credentials", "--max-connections", "100", "--max-connections-per-ip", "10",
                        "--max-subscribers-per-download", "7", "--max-downloads-per-client", "0"],
            environment: env) else {
            Issue.record("expected run")
            return
        }
        #expect(c.allowHosts == ["a.example.com", "127.0.0.1:8080", "fc00::/7"])
        #expect(c.denyHosts == ["10.0.0.0/8", "*.internal", "b.example.com"])
        #expect(c.allowURLCredentials && c.maxConnections == 100 && c.maxConnectionsPerIP == 10)
        #expect(c.maxSubscribersPerDownload == 7 && c.maxDownloadsPerClient == nil)
        #expect(c.engineConfiguration.allowHosts == c.allowHosts && c.engineConfiguration.denyHosts == c.denyHosts)
        #expect(c.engineConfiguration.allowURLCredentials)

        guard case .run(let defaults) = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h"]) else {
            Issue.record("expected run")
            return
        }
        #expect(defaults.allowHosts.isEmpty && defaults.denyHosts.isEmpty && !defaults.allowURLCredentials)
        #expect(defaults.maxConnections == 16_384 && defaults.maxConnectionsPerIP == nil)
        #expect(defaults.maxSubscribersPerDownload == 16_384 && defaults.maxDownloadsPerClient == 1_000)

        for bad in [["--allow-host", "exa mple"], ["--deny-host", "10.0.0.0/40"], ["--allow-host", ""],
                    ["--max-connections", "0"], ["--max-downloads-per-client", "-1"]] {
            guard case .invalid = CommandLineOptions.parse(arguments: bad, environment: ["HOME": "/h"]) else {
                Issue.record("accepted \(bad)")
                continue
            }
        }
    }
}

/// A settable set of live tokens for `CallerQuota` tests.
private final class LiveSet: @unchecked Sendable {
    private let lock = NSLock()
    private var live: Set<String> = []
    func set(_ tokens: Set<String>) { lock.lock(); live = tokens; lock.unlock() }
    func filter(_ tokens: [String]) -> Set<String> {
        lock.lock(); defer { lock.unlock() }
        return Set(tokens.filter(live.contains))
    }
}
