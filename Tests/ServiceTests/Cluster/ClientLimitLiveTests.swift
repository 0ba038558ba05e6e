@testable import DownloaderEngine
import Foundation
import MiniHTTPServer
import Synchronization
import Testing
@testable import DownloadService

/// `--max-downloads-per-client` across replicas: counted in the database under the client's own
/// address, which a forwarding replica vouches for to the holder with an HMAC under the cluster's
/// shared secret (a value that does not verify is ignored).
@Suite(.timeLimit(.minutes(3)))
struct ClientLimitLiveTests {
    static let secret = Array("0123456789abcdef0123456789abcdef".utf8)

    static func request(_ method: String, _ target: String, from remote: String, body: String = "",
                        vouching: String? = nil) -> Request {
        var headers = HTTPHeaders()
        if !body.isEmpty { headers["Content-Type"] = "application/json" }
        if let vouching { headers[ClientSigning.field] = vouching }
        return Request(method: method, target: target, headers: headers, body: Array(body.utf8), remoteAddress: remote + ":40000")
    }

    @Test func aSignatureVerifiesOnlyUnderItsSecretForItsAddressAndForAMinute() {
        let now: Int64 = 1_800_000_000
        let value = ClientSignature.value(client: "192.0.2.7", secret: Self.secret, now: now)
        #expect(ClientSignature.client(from: value, secret: Self.secret, now: now) == "192.0.2.7")
        #expect(ClientSignature.client(from: value, secret: Array("another secret".utf8), now: now) == nil)
        let other = ClientSignature.value(client: "198.51.100.1", secret: Self.secret, now: now)
        let swapped = "192.0.2.7 \(now) " + String(other.split(separator: " ").last ?? "")
        #expect(ClientSignature.client(from: swapped, secret: Self.secret, now: now) == nil, "another address's HMAC")
        #expect(ClientSignature.client(from: "192.0.2.7", secret: Self.secret, now: now) == nil)
        #expect(ClientSignature.client(from: "192.0.2.7 00", secret: Self.secret, now: now) == nil)
        #expect(ClientSignature.client(from: value, secret: [], now: now) == nil)
        // Good for a minute either side of its time (the replicas' clocks), not later: a value seen
        // once is not replayed under that address.
        #expect(ClientSignature.client(from: value, secret: Self.secret, now: now + 60) == "192.0.2.7")
        #expect(ClientSignature.client(from: value, secret: Self.secret, now: now - 60) == "192.0.2.7")
        #expect(ClientSignature.client(from: value, secret: Self.secret, now: now + 61) == nil)
        // Any time, signed or not, is read without overflow (Int64.min once crashed the replica).
        for extreme in [Int64.min, Int64.max] {
            #expect(ClientSignature.client(from: "192.0.2.7 \(extreme) 00", secret: Self.secret, now: now) == nil)
            let signed = ClientSignature.value(client: "192.0.2.7", secret: Self.secret, now: extreme)
            #expect(ClientSignature.client(from: signed, secret: Self.secret, now: now) == nil)
            #expect(ClientSignature.client(from: signed, secret: Self.secret, now: extreme) == "192.0.2.7")
        }
        let restamped = value.replacingOccurrences(of: " \(now) ", with: " \(now + 3600) ")
        #expect(ClientSignature.client(from: restamped, secret: Self.secret, now: now + 3600) == nil, "the time is signed too")
        // The IPv6 form works as well.
        #expect(ClientSignature.client(from: ClientSignature.value(client: "::1", secret: Self.secret, now: now),
                                       secret: Self.secret, now: now) == "::1")
        var signing = ClientSigning(secret: Self.secret)
        signing.now = { now + 30 }
        #expect(signing.client(of: Self.request("GET", "/", from: "10.0.0.9", vouching: value)) == "192.0.2.7")
        #expect(signing.client(of: Self.request("GET", "/", from: "10.0.0.9", vouching: swapped)) == "10.0.0.9")
        #expect(signing.client(of: Self.request("GET", "/", from: "10.0.0.9")) == "10.0.0.9")
        signing.now = { now + 120 }
        #expect(signing.client(of: Self.request("GET", "/", from: "10.0.0.9", vouching: value)) == "10.0.0.9", "two minutes later")
    }

    /// The forwarding replica sends the signed address its client connected from, never a value
    /// the client sent in that field.
    @Test func theForwarderVouchesForItsClient() async throws {
        let holder = try TestOrigin(bodySize: 10, path: "/downloads/abc")
        defer { holder.stop() }
        let b = try InProcessReplica("b", forwarder: PeerForwarder(signing: ClientSigning(secret: Self.secret)))
        b.sendEverything(to: holder.baseURL)
        try await withTimeout(30) {
            _ = try await b.client.request("GET", "/downloads/abc", headers: [ClientSigning.field: "203.0.113.5 forged"])
            let sent = try #require(holder.requests(path: "/downloads/abc").first)
            let values = sent.headers.filter { $0.name.lowercased() == ClientSigning.field.lowercased() }.map(\.value)
            #expect(values.count == 1 && values.first.flatMap { ClientSignature.client(from: $0, secret: Self.secret,
                                                                                   now: Int64(Date().timeIntervalSince1970)) } == "127.0.0.1",
                    "\(values)")
        }
        await b.stop()
    }

    /// Two replicas on one database, each with its own API: one client's downloads on both count
    /// against one limit; a forwarded request counts under the address its replica vouched for.
    @Test(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"))
    func theLimitCoversEveryReplica() async throws {
        let database = try await onThread { try PostgresServer.shared.createDatabase() }
        let origin = try TestOrigin(bodySize: 8 << 20, settings: ClusterLeaseLiveTests.throttled)
        defer { origin.stop() }
        let shared = ClusterLeaseLiveTests.sharedDirectory()
        defer { try? FileManager.default.removeItem(at: shared) }
        let engines = try await onThread {
            try ["a", "b"].map { try ClusterLeaseLiveTests.replica($0, database: database, shared: shared) }
        }
        defer { ClusterLeaseLiveTests.shutdown(engines) }
        let secret = try #require(engines[0].configuration.clusterDatabase?.sharedSecret(named: ClientSigning.secretName) { Self.secret })
        #expect(engines[1].configuration.clusterDatabase?.sharedSecret(named: ClientSigning.secretName) { [1, 2, 3] } == secret,
                "the first replica's secret is everyone's")
        let apis = engines.map { engine in
            var api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
            api.callerQuota = ClusterCallerQuota(limit: 2, store: engine.configuration.clusterDatabase!.clientTokens(recent: 1))
            api.forwarding.signing = ClientSigning(secret: secret)
            return api
        }
        @Sendable func post(_ replica: Int, _ n: Int, from remote: String, vouching: String? = nil) async -> RawAnswer {
            let body = #"{"url":"\#(origin.url)?n=\#(n)"}"#
            return RawAnswer(await apis[replica].respond(to: Self.request("POST", "/downloads", from: remote, body: body, vouching: vouching)))
        }
        try await withTimeout(60) {
            let first = await post(0, 1, from: "192.0.2.7")
            #expect(first.status == 202)
            #expect(await post(1, 2, from: "192.0.2.7").status == 202, "the second on another replica")
            let third = await post(0, 3, from: "192.0.2.7")
            #expect(third.status == 429 && third.code == "too_many_downloads", "the limit is the cluster's: \(third.status)")
            #expect(await post(1, 3, from: "192.0.2.7").status == 429)
            #expect(await post(1, 3, from: "198.51.100.1").status == 202, "another client")
            // Forwarded from 10.0.0.9: counted under the address it vouches for, unless the HMAC is wrong.
            let vouched = ClientSignature.value(client: "192.0.2.7", secret: secret, now: Int64(Date().timeIntervalSince1970))
            #expect(await post(0, 4, from: "10.0.0.9", vouching: vouched).status == 429)
            let forged = ClientSignature.value(client: "192.0.2.8", secret: Array("not the secret".utf8), now: Int64(Date().timeIntervalSince1970))
            #expect(await post(0, 4, from: "10.0.0.9", vouching: forged).status == 202, "counted under 10.0.0.9")
            // Withdrawing a token on its replica frees a place on every replica.
            let token = try #require(first.string("token"))
            let withdrawn = RawAnswer(await apis[0].respond(to: Self.request("DELETE", "/downloads/\(token)", from: "192.0.2.7")))
            #expect(withdrawn.status == 200)
            #expect(await post(1, 5, from: "192.0.2.7").status == 202)
            #expect(await post(1, 6, from: "192.0.2.7").status == 429)
        }
    }

    /// A token that ended without its place being freed here (its download removed) stops counting
    /// once the rows' grace (`recent`) has passed.
    @Test(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"))
    func aDeadTokenStopsCountingAfterTheGrace() async throws {
        try await Self.withOneReplica(origin: TestOrigin(bodySize: 8 << 20, settings: ClusterLeaseLiveTests.throttled)) {
            engine, origin, store, quota in
            #expect(quota.reserve("192.0.2.7"))
            let enqueued = try engine.request(DownloadRequest(url: origin.url))
            quota.commit("192.0.2.7", token: enqueued.token)
            #expect(quota.pending == 0 && store.count(client: "192.0.2.7") == 1)
            #expect(!quota.reserve("192.0.2.7"))
            // A reservation that is cancelled frees its place at once.
            #expect(quota.reserve("198.51.100.1"))
            quota.cancel("198.51.100.1")
            #expect(store.count(client: "198.51.100.1") == 0)
            // Removed by the operator: the token is gone from `tokens`; past the grace it no longer counts.
            #expect(try engine.removing(id: enqueued.snapshot.id) != nil, "removed")
            #expect(await InProcessReplica.eventually(within: 10) { quota.reserve("192.0.2.7") })
        }
    }
}

extension ClientLimitLiveTests {
    /// One replica on a fresh database fetching from `origin`, and a quota of one place per client
    /// counted in that database (rows count 1 s without a live token); `body` runs within 60 s.
    static func withOneReplica(origin: TestOrigin,
                               _ body: @escaping @Sendable (DownloadEngine, TestOrigin, ClientTokenStore, ClusterCallerQuota) async throws -> Void)
        async throws {
        defer { origin.stop() }
        let database = try await onThread { try PostgresServer.shared.createDatabase() }
        let shared = ClusterLeaseLiveTests.sharedDirectory()
        defer { try? FileManager.default.removeItem(at: shared) }
        let engine = try await onThread { try ClusterLeaseLiveTests.replica("a", database: database, shared: shared) }
        defer { ClusterLeaseLiveTests.shutdown([engine]) }
        let store = try #require(engine.configuration.clusterDatabase).clientTokens(recent: 1)
        let quota = ClusterCallerQuota(limit: 1, store: store)
        try await withTimeout(60) { try await body(engine, origin, store, quota) }
    }

    /// A completed download's token holds no place: past the rows' grace the client may start another.
    @Test(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"))
    func aCompletedDownloadsTokenHoldsNoPlace() async throws {
        try await Self.withOneReplica(origin: TestOrigin(bodySize: 64 << 10)) { engine, origin, _, quota in
            #expect(quota.reserve("192.0.2.7"))
            let enqueued = try engine.request(DownloadRequest(url: origin.url))
            quota.commit("192.0.2.7", token: enqueued.token)
            #expect(!quota.reserve("192.0.2.7"))
            _ = try await EngineFixture.waitFor(engine, id: enqueued.snapshot.id, [.completed])
            #expect(engine.liveTokens(among: [enqueued.token]) == [enqueued.token], "the token still reaches the file")
            #expect(await InProcessReplica.eventually(within: 10) { quota.reserve("192.0.2.7") })
        }
    }

    /// Far from the limit a reservation claims a block and the spare places serve the client's next
    /// requests without the database; never more places than the limit, whatever the blocks.
    @Test(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"))
    func blocksOfPlacesNeverGoBeyondTheLimit() async throws {
        let database = try await onThread { try PostgresServer.shared.createDatabase() }
        let store = try await onThread { try ClusterDatabase.connect(url: database, poolSize: 2, within: 5).clientTokens(recent: 10) }
        try await onThread {
            let quota = ClusterCallerQuota(limit: 1000, store: store)
            #expect(quota.reserve("192.0.2.7"))
            #expect(store.count(client: "192.0.2.7") == 32, "one block claimed")
            for _ in 0..<31 { #expect(quota.reserve("192.0.2.7")) }
            #expect(store.count(client: "192.0.2.7") == 32, "the spares were given without claiming more")
            #expect(quota.reserve("192.0.2.7"))
            #expect(store.count(client: "192.0.2.7") == 64, "the next block")
            // A burst from one client: one block is claimed at a time, the others claim a place each.
            let burst = ClusterCallerQuota(limit: 1000, store: store)
            let granted = Mutex(0)
            let finished = DispatchGroup()
            for _ in 0..<30 {  // Threads of their own (concurrentPerform runs only as many as there are cores).
                finished.enter()
                Thread.detachNewThread {
                    if burst.reserve("203.0.113.5") { granted.withLock { $0 += 1 } }
                    finished.leave()
                }
            }
            #expect(finished.wait(timeout: .now() + 30) == .success)
            let claimed = store.count(client: "203.0.113.5") ?? -1
            #expect(granted.withLock { $0 } == 30 && claimed >= 30 && claimed <= 32 + 29, "30 at once claimed \(claimed) places")
            let near = ClusterCallerQuota(limit: 40, store: store)
            let nearGranted = (0..<60).filter { _ in near.reserve("198.51.100.1") }.count
            #expect(nearGranted == 40 && store.count(client: "198.51.100.1") == 40, "exactly the limit: \(nearGranted)")
        }
    }
}

/// A response's status and JSON, for answers taken from the API without a connection.
struct RawAnswer {
    let status: Int
    let json: [String: Any]

    init(_ response: Response) {
        status = response.status
        if case .bytes(let body) = response.body {
            json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
        } else {
            json = [:]
        }
    }

    var code: String? { (json["error"] as? [String: Any])?["code"] as? String }
    func string(_ key: String) -> String? { json[key] as? String }
}

/// Replicas keep no SQLite file in the directory they share: started at once on a fresh one, each
/// opened and migrated the same `state.db` (the webhook journal's) and some failed to start.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterSharedDirectoryTests {
    @Test func replicasStartedAtOnceShareNoSQLiteFile() async throws {
        let database = try await onThread { try PostgresServer.shared.createDatabase() }
        let shared = ClusterLeaseLiveTests.sharedDirectory()
        defer { try? FileManager.default.removeItem(at: shared) }
        async let a = onThread { try ClusterLeaseLiveTests.replica("a", database: database, shared: shared) }
        async let b = onThread { try ClusterLeaseLiveTests.replica("b", database: database, shared: shared) }
        async let c = onThread { try ClusterLeaseLiveTests.replica("c", database: database, shared: shared) }
        let engines = try await [a, b, c]
        defer { ClusterLeaseLiveTests.shutdown(engines) }
        let files = FileManager.default.enumerator(atPath: shared.path)?.compactMap { $0 as? String } ?? []
        #expect(!files.contains { $0.hasSuffix(SQLiteStateStore.fileName) || $0.contains(SQLiteStateStore.fileName + "-") }, "\(files)")
    }

    /// A replica marks the areas it shares; a single process started on one of them by mistake is
    /// refused (its start-up sweep would delete the replicas' files), also once the replicas stopped.
    @Test func aSingleProcessOnAClustersSharedAreasIsRefused() async throws {
        let database = try await onThread { try PostgresServer.shared.createDatabase() }
        let shared = ClusterLeaseLiveTests.sharedDirectory()
        defer { try? FileManager.default.removeItem(at: shared) }
        let replica = try await ServiceProcess.start(arguments: ["--cluster-db", database, "--shared-dir", shared.path])
        #expect(try await replica.client.request("GET", "/healthz").status == 200)
        #expect(try await replica.stop() == 0)
        for area in ["cache", "persistent", "partial"] {
            #expect(FileManager.default.fileExists(atPath: shared.appendingPathComponent(area + "/.download-service-cluster").path), "\(area)")
        }
        let kept = shared.appendingPathComponent("cache/0123456789abcdef.bin")
        #expect(FileManager.default.createFile(atPath: kept.path, contents: Data("kept".utf8)))
        do {
            // Its areas are `<root>/state`, `<root>/cache` (the replicas' cache area) and `<root>/data`.
            let single = try await ServiceProcess.start(root: shared)
            _ = try await single.stop()
            Issue.record("a single process started on a cluster's cache area")
        } catch let failure as ServiceProcess.Failure {
            #expect(failure.description.contains("--cache-dir \(shared.path)/cache is a cluster's shared area"), "\(failure)")
        }
        #expect(FileManager.default.fileExists(atPath: kept.path), "nothing swept")
    }
}
