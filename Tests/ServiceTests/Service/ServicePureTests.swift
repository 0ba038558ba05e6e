import DownloaderEngine
import Foundation
import Testing
@testable import DownloadService

@Suite struct CommandLineOptionsTests {
    private func parse(_ args: [String], env: [String: String] = ["HOME": "/home/u"]) -> CommandLineOptions.Outcome {
        CommandLineOptions.parse(arguments: args, environment: env)
    }

    @Test func defaultsFollowXDG() throws {
        guard case .run(let c) = parse([]) else { Issue.record("expected run"); return }
        #expect(c.host == "127.0.0.1" && c.port == 8080 && c.maxConcurrent == 4)
        #expect(c.cacheDirectory == "/home/u/.cache/download-service")
        #expect(c.dataDirectory == "/home/u/.local/share/download-service")
        #expect(c.stateDirectory == "/home/u/.local/state/download-service")
        #expect(c.authToken == nil && c.maxFileSize == nil && c.cacheMaxBytes == nil && !c.allowPrivateNetworks)
        guard case .run(let x) = parse([], env: ["HOME": "/h", "XDG_CACHE_HOME": "/c", "XDG_DATA_HOME": "relative"]) else {
            Issue.record("expected run")
            return
        }
        #expect(x.cacheDirectory == "/c/download-service")
        #expect(x.dataDirectory == "/h/.local/share/download-service")  // relative XDG values are ignored
    }

    @Test func flagsWinOverEnvironment() {
        let env = ["HOME": "/h", "DOWNLOAD_SERVICE_PORT": "9000", "DOWNLOAD_SERVICE_AUTH_TOKEN": "envtoken",
                   "DOWNLOAD_SERVICE_ALLOW_PRIVATE_NETWORKS": "yes"]
        guard case .run(let c) = parse(["--port=9001", "--max-file-size", "10G", "--cache-max-bytes", "512MiB",
                                        "--host", "0.0.0.0", "--cache-dir", "/var/cache/ds"], env: env) else {
            Issue.record("expected run"); return
        }
        #expect(c.port == 9001 && c.host == "0.0.0.0" && c.authToken == "envtoken" && c.allowPrivateNetworks)
        #expect(c.maxFileSize == 10 << 30 && c.cacheMaxBytes == 512 << 20 && c.cacheDirectory == "/var/cache/ds")
    }

    /// `--min-speed` (or its variable) reaches the engine; off by default.
    @Test func minSpeedReachesTheEngine() {
        guard case .run(let off) = parse([]), case .run(let c) = parse(["--min-speed", "16K"]),
              case .run(let e) = parse([], env: ["HOME": "/h", "DOWNLOAD_SERVICE_MIN_SPEED": "1M"]) else {
            Issue.record("expected run"); return
        }
        #expect(off.engineConfiguration.minSpeed == 0)
        #expect(c.engineConfiguration.minSpeed == 16 << 10 && e.engineConfiguration.minSpeed == 1 << 20)
        guard case .invalid(let message) = parse(["--min-speed", "fast"]) else { Issue.record("accepted"); return }
        #expect(message.contains("--min-speed"))
    }

    /// `--disk-full-wait` (or its variable) reaches the engine: 600 s by default, 0 to fail at once.
    @Test func diskFullWaitReachesTheEngine() {
        guard case .run(let normal) = parse([]), case .run(let c) = parse(["--disk-full-wait", "0"]),
              case .run(let e) = parse([], env: ["HOME": "/h", "DOWNLOAD_SERVICE_DISK_FULL_WAIT": "30"]) else {
            Issue.record("expected run"); return
        }
        #expect(normal.engineConfiguration.diskFullWait == 600)
        #expect(c.engineConfiguration.diskFullWait == 0 && e.engineConfiguration.diskFullWait == 30)
        guard case .invalid(let message) = parse(["--disk-full-wait", "-1"]) else { Issue.record("accepted"); return }
        #expect(message.contains("--disk-full-wait"))
    }

    /// A flag replaces a bad variable as it replaces a good one; `--help` answers whatever the
    /// environment holds; a bad variable nothing replaces is named.
    @Test func aBadVariableIsReportedOnlyWhenNoFlagReplacesIt() {
        let env = ["HOME": "/h", "DOWNLOAD_SERVICE_PORT": "abc"]
        guard case .run(let c) = parse(["--port", "0"], env: env) else { Issue.record("expected run"); return }
        #expect(c.port == 0)
        #expect(parse(["--help"], env: env) == .help && parse(["--version"], env: env) == .version)
        guard case .invalid(let message) = parse([], env: env) else { Issue.record("expected invalid"); return }
        #expect(message.hasPrefix("DOWNLOAD_SERVICE_PORT: ") && message.contains("--port"))
    }

    @Test(arguments: [("5B", Int64(5)), ("5", 5), ("1KiB", 1024), ("1kb", 1024), ("2M", 2 << 20), ("1TiB", 1 << 40)])
    func byteCounts(text: String, bytes: Int64) throws {
        #expect(try CommandLineOptions.byteCount(text, "--x") == bytes)
    }

    @Test(arguments: [
        ("127.0.0.1", true), ("127.9.8.7", true), ("::1", true), ("::ffff:127.0.0.1", true),
        ("0.0.0.0", false), ("::", false), ("192.168.1.2", false), ("128.0.0.1", false), ("::2", false),
    ])
    func loopbackHosts(host: String, loopback: Bool) {
        #expect(ServiceConfiguration.isLoopback(host) == loopback)
        var c = ServiceConfiguration(environment: ["HOME": "/h"])
        c.host = host
        #expect(c.isOpenBeyondLoopback == !loopback)
        // An operator token alone leaves the caller routes open: still open, still guarded.
        c.adminToken = "a"
        #expect(c.isOpenBeyondLoopback == !loopback)
        #expect(c.callersNeedNoToken)
        c.authToken = "t"
        #expect(!c.isOpenBeyondLoopback)
        #expect(!c.callersNeedNoToken)
    }

    @Test(arguments: [
        (["--port", "70000"], "--port"), (["--port"], "needs a value"), (["--bogus"], "unknown option"),
        (["--max-concurrent", "0"], "--max-concurrent"), (["--cache-dir", "rel/dir"], "absolute"),
        (["--max-file-size", "12Q"], "byte count"), (["--allow-private-networks=maybe"], "true or false"),
        (["--auth-token="], "empty"), (["--max-file-size", "5iB"], "byte count"), (["--max-file-size", "iB"], "byte count"),
        (["--retry-base-delay", "45"], "--retry-base-delay"), (["--host", "localhost"], "numeric"), (["--host", ""], "numeric"),
    ])
    func rejectsBadValues(args: [String], fragment: String) {
        guard case .invalid(let message) = parse(args) else { Issue.record("accepted \(args)"); return }
        #expect(message.contains(fragment), "\(message)")
    }

    /// A misspelt flag's inline value (a secret, say) is not repeated in the error.
    @Test func anUnknownOptionIsNamedWithoutItsValue() {
        guard case .invalid(let message) = parse(["--webhook-secre=TOPSECRET"]) else { Issue.record("accepted"); return }
        #expect(message == "unknown option '--webhook-secre' (see --help)")
    }

    @Test func helpListsEveryFlagWithItsVariable() {
        #expect(parse(["--help"]) == .help)
        for option in CommandLineOptions.options {
            #expect(CommandLineOptions.usage.contains(option.flag))
            #expect(CommandLineOptions.usage.contains(option.environmentName))
        }
        #expect(CommandLineOptions.options.first { $0.flag == "--max-concurrent" }?.environmentName == "DOWNLOAD_SERVICE_MAX_CONCURRENT")
    }
}

@Suite struct CreateDownloadBodyTests {
    private func error(_ json: String) -> String? {
        if case .failure(let e) = CreateDownloadBody.parse(Array(json.utf8)) { return e.code }
        return nil
    }

    @Test func acceptsAFullBody() throws {
        let hash = String(repeating: "aB", count: 32)
        let r = try CreateDownloadBody.parse(Array(#"{"url":"https://example.com/a.iso","storage":"persistent","sha256":"\#(hash)","size":10}"#.utf8)).get()
        #expect(r == DownloadRequest(url: "https://example.com/a.iso", storage: .persistent, sha256: hash.lowercased(), size: 10))
        let d = try CreateDownloadBody.parse(Array(#"{"url":"http://h/x","storage":null}"#.utf8)).get()
        #expect(d.storage == .cache && d.sha256 == nil && d.size == nil)
    }

    @Test(arguments: [
        ("", "malformed_json"), ("{", "malformed_json"), ("[1]", "invalid_body"), ("\"x\"", "invalid_body"),
        ("{}", "missing_url"), (#"{"url":null}"#, "missing_url"), (#"{"url":5}"#, "invalid_url"),
        (#"{"url":true}"#, "invalid_url"), (#"{"url":"http://h/","storage":"tmp"}"#, "invalid_storage"), (#"{"url":"http://h/","storage":1}"#, "invalid_storage"),
        (#"{"url":"http://h/","sha256":"abc"}"#, "invalid_sha256"), (#"{"url":"http://h/","size":-1}"#, "invalid_size"),
        (#"{"url":"http://h/","size":1.5}"#, "invalid_size"), (#"{"url":"http://h/","size":"1"}"#, "invalid_size"),
        (#"{"url":"http://h/","size":true}"#, "invalid_size"), (#"{"url":"http://h/","size":9007199254740992}"#, "invalid_size"),
        (#"{"url":"http://h/","header":{"Authorization":"Bearer t"}}"#, "invalid_body"), (#"{"url":"http://h/","x":1}"#, "invalid_body"),
        (#"{"sha265":"00","url":"http://h/"}"#, "invalid_body"),
    ])
    func rejects(json: String, code: String) {
        #expect(error(json) == code, "\(json)")
    }

    /// A misspelt member is named, never ignored (it would be a download without the check or the
    /// credentials meant); the callback is a member like the others.
    @Test func namesAnUnknownMember() throws {
        guard case .failure(let refused) = CreateDownloadBody.parse(Array(#"{"url":"http://h/","sha265":"ab","storage":"cache"}"#.utf8)) else {
            Issue.record("accepted")
            return
        }
        #expect(refused.status == 400 && refused.message.hasPrefix(#"unknown member "sha265""#), "\(refused.message)")
        #expect(throws: Never.self) { try CreateDownloadBody.parse(Array(#"{"url":"http://h/","callback":null}"#.utf8)).get() }
    }
}

@Suite struct EndpointTests {
    @Test(arguments: [
        ("/healthz", Endpoint.health), ("/metrics", .metrics), ("/downloads", .downloads), ("/downloads/", .downloads),
        ("/downloads/ab12", .download("ab12")), ("/downloads/ab12/progress", .progress("ab12")),
        ("/downloads/ab12/file", .file("ab12")), ("/downloads/ab12/file/", .file("ab12")),
        ("/", .page), ("/events", .events), ("/events/", .events), ("/readyz", .ready), ("/fetch", .fetch),
        ("/fetch/pkg-1.0-py3-none-any.whl", .fetch), ("/fetch/Release/", .fetch), ("/fetch/a%20b.iso", .fetch),
        ("/downloads/ab12/progress/", .progress("ab12")), ("/downloads/AZaz09-_", .download("AZaz09-_")),
        ("/downloads/" + String(repeating: "a", count: 128), .download(String(repeating: "a", count: 128))),
    ])
    func recognises(path: String, endpoint: Endpoint) {
        #expect(Endpoint(path: path) == endpoint)
    }

    @Test(arguments: ["", "/healthz/x", "/events/x", "/events//", "/downloads/a.b", "/downloads/%2e%2e", "/downloads/x/other", "/downloads//file", "downloads",
                       "//", "/healthz//", "/downloads/x/file/y", "/downloads/x/file/y/", "/downloads/x/file//", "/downloads/x/progress/file/x",
                       "/healthzz", "/health", "/Healthz", "/downloads/ab12/fil", "/downloads/ab12/files", "/a/b/c/d/e",
                       "/downloads/\u{e9}", "/downloads/" + String(repeating: "a", count: 129), "/fetch/x/y", "/fetch//", "healthz/"])
    func rejects(path: String) {
        #expect(Endpoint(path: path) == nil)
    }

    @Test func allowLists() {
        #expect(Endpoint.downloads.allowedMethods == ["GET", "HEAD", "POST"])
        #expect(Endpoint.download("x").allowedMethods.contains("DELETE"))
        #expect(!Endpoint.file("x").allowedMethods.contains("POST"))
        let endpoints: [Endpoint] = [.health, .ready, .metrics, .downloads, .download("x"), .progress("x"), .file("x"),
                                     .fetch, .events, .page]
        for endpoint in endpoints {
            for method in ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "get", ""] {
                #expect(endpoint.allows(method) == endpoint.allowedMethods.contains(method), "\(endpoint) \(method)")
            }
        }
    }
}

@Suite struct WireFormatTests {
    @Test func serverSentEventFraming() {
        let e = ServerSentEvent(id: 7, event: "progress", data: "{\"a\":1}\nsecond\rline", retryMilliseconds: 2000)
        #expect(e.encoded == "retry: 2000\nid: 7\nevent: progress\ndata: {\"a\":1}\ndata: secondline\n\n")
        #expect(ServerSentEvent.comment("keep-alive") == ": keep-alive\n\n")
    }

    @Test func snapshotJSONHasExplicitNulls() throws {
        let t = Date(timeIntervalSince1970: 0)
        let s = DownloadSnapshot(id: "d1", url: "http://h/x", state: .downloading, storage: .cache, bytesWritten: 5,
                                 createdAt: t, updatedAt: t)
        let o = try #require(JSONSerialization.jsonObject(with: Data(SnapshotJSON.object(s).bytes)) as? [String: Any])
        #expect(o["bytesExpected"] is NSNull && o["fraction"] is NSNull && o["etaSeconds"] is NSNull)
        #expect(o["createdAt"] as? String == "1970-01-01T00:00:00.000Z")
        #expect(o["sha256"] == nil && o["error"] == nil)
        let event = DownloadAPI.serverSentEvent(for: .resumed(offset: 3, restarted: true, s), id: 9)
        #expect(event.event == "resumed" && event.data.contains(#""offset":3"#) && event.data.contains(#""restarted":true"#))
    }

    @Test func prometheusText() {
        var stats = EngineStatistics()
        stats.bytesFetched = 42
        stats.subscribers = 2
        stats.waitingForSpace = 1
        stats.completions = 6
        stats.failures = [.httpError: 2]
        let text = ServiceMetrics.render(states: [.paused: 3], engine: stats, eventWatchers: 4,
                                         http: .init(requestsByStatus: [404: 1, 200: 5], fileBytesServed: 9))
        #expect(text.contains("download_service_downloads{state=\"paused\"} 3\n"))
        #expect(text.contains("download_service_downloads{state=\"failed\"} 0\n"))
        #expect(text.contains("download_service_bytes_fetched_total 42\n"))
        #expect(text.contains("download_service_bytes_served_total 9\n"))
        #expect(text.contains("download_service_sse_subscribers 2\n"))
        #expect(text.contains("# TYPE download_service_downloads_waiting_for_space gauge\ndownload_service_downloads_waiting_for_space 1\n"))
        #expect(text.contains("# TYPE download_service_event_watchers gauge\ndownload_service_event_watchers 4\n"))
        #expect(text.contains("download_service_http_requests_total{status=\"200\"} 5\ndownload_service_http_requests_total{status=\"404\"} 1\n"))
        #expect(text.contains("# TYPE download_service_resumes_total counter\n"))
        #expect(text.contains("# TYPE download_service_downloads_completed_total counter\ndownload_service_downloads_completed_total 6\n"))
        #expect(text.contains("download_service_downloads_failed_total{code=\"http_error\"} 2\n"))
        #expect(text.contains("download_service_downloads_failed_total{code=\"checksum_mismatch\"} 0\n"))
        #expect(!text.contains("cluster"), "a single process shows no cluster metrics")
        var cluster = ClusterStatistics()
        (cluster.leasesHeld, cluster.takeovers, cluster.fencedWrites) = (4, 2, 7)
        stats.cluster = cluster
        let clustered = ServiceMetrics.render(states: [:], engine: stats, eventWatchers: 0, http: .init(requestsByStatus: [:], fileBytesServed: 0))
        #expect(clustered.contains("# TYPE download_service_cluster_leases_held gauge\ndownload_service_cluster_leases_held 4\n"))
        #expect(clustered.contains("# TYPE download_service_cluster_takeovers_total counter\ndownload_service_cluster_takeovers_total 2\n"))
        #expect(clustered.contains("# TYPE download_service_cluster_fenced_writes_total counter\ndownload_service_cluster_fenced_writes_total 7\n"))
        #expect(clustered.contains("# TYPE download_service_cluster_janitor gauge\ndownload_service_cluster_janitor 0\n"))
        stats.cluster?.janitor = true
        let janitor = ServiceMetrics.render(states: [:], engine: stats, eventWatchers: 0, http: .init(requestsByStatus: [:], fileBytesServed: 0))
        #expect(janitor.contains("download_service_cluster_janitor 1\n"))
    }

    @Test func bearerAuthComparesWholeTokens() {
        let auth = BearerAuth(token: "s3cret")
        #expect(auth.allows(authorization: "Bearer s3cret"))
        #expect(auth.allows(authorization: "bearer s3cret"))
        for bad in [nil, "", "Bearer", "Bearer ", "Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "Bearer S3cret"] {
            #expect(!auth.allows(authorization: bad), "\(bad ?? "nil")")
        }
    }

    @Test func fileHeaders() {
        #expect(FileHeaders.attachment(fileName: "a b.iso") == #"attachment; filename="a b.iso"; filename*=UTF-8''a%20b.iso"#)
        #expect(FileHeaders.attachment(fileName: "ü\".txt") == #"attachment; filename="__.txt"; filename*=UTF-8''%C3%BC%22.txt"#)
        #expect(FileHeaders.percentEncoded("Az09!#$&+-.^_`|~ %'()*/:;<=>?@[]{}\u{7f}") ==
                "Az09!#$&+-.^_`|~%20%25%27%28%29%2A%2F%3A%3B%3C%3D%3E%3F%40%5B%5D%7B%7D%7F")
        #expect(FileHeaders.percentEncoded("日本.iso") == "%E6%97%A5%E6%9C%AC.iso")
        let sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        #expect(FileHeaders.reprDigest(sha256Hex: sha) == "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:")
        #expect(FileHeaders.reprDigest(sha256Hex: "zz") == nil)
        #expect(FileHeaders.reprDigest(sha256Hex: String(repeating: "a", count: 62) + "é") == nil)  // 64 bytes, 63 characters
        #expect(FileHeaders.reprDigest(sha256Hex: sha.uppercased()) == FileHeaders.reprDigest(sha256Hex: sha))
    }
}

@Suite struct ServingNiceOptionTests {
    @Test(arguments: [("0", 0), ("10", 10), ("19", 19), (" 5", 5)])
    func acceptsZeroToNineteen(value: String, expected: Int) {
        guard case .run(let c) = CommandLineOptions.parse(arguments: ["--serving-nice", value], environment: ["HOME": "/h"]) else {
            Issue.record("expected run"); return
        }
        #expect(c.servingNice == expected)
    }

    @Test(arguments: ["-1", "20", "ten", "", "1.5"])
    func rejectsAnythingElse(value: String) {
        guard case .invalid(let message) = CommandLineOptions.parse(arguments: ["--serving-nice=\(value)"], environment: ["HOME": "/h"]) else {
            Issue.record("expected invalid for '\(value)'"); return
        }
        #expect(message.contains("--serving-nice must be 0-19"))
    }

    @Test func onByDefaultAndFollowsTheEnvironment() {
        guard case .run(let d) = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h"]),
              case .run(let e) = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h", "DOWNLOAD_SERVICE_SERVING_NICE": "0",
                                                                                      "DOWNLOAD_SERVICE_SERVING_LOOPS": "2"])
        else { Issue.record("expected run"); return }
        #expect(d.servingNice == 10 && d.servingLoops == 1)
        #expect(e.servingNice == 0 && e.servingLoops == 2)
    }

    @Test(arguments: [("0", 0), ("1", 1), ("16", 16), (" 2", 2)])
    func servingLoopsAcceptsZeroToSixteen(value: String, expected: Int) {
        guard case .run(let c) = CommandLineOptions.parse(arguments: ["--serving-loops", value], environment: ["HOME": "/h"]) else {
            Issue.record("expected run"); return
        }
        #expect(c.servingLoops == expected)
    }

    @Test(arguments: ["-1", "17", "one", "", "1.5"])
    func servingLoopsRejectsAnythingElse(value: String) {
        guard case .invalid(let message) = CommandLineOptions.parse(arguments: ["--serving-loops=\(value)"], environment: ["HOME": "/h"]) else {
            Issue.record("expected invalid for '\(value)'"); return
        }
        #expect(message.contains("--serving-loops must be 0-16"))
    }

    @Test(arguments: [("1", 1), ("20", 20), ("100", 100), (" 35", 35)])
    func servingCPUShareAcceptsOneToAHundred(value: String, expected: Int) {
        guard case .run(let c) = CommandLineOptions.parse(arguments: ["--serving-cpu-share", value], environment: ["HOME": "/h"]),
              case .run(let d) = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h"]) else {
            Issue.record("expected run"); return
        }
        #expect(c.servingCPUShare == expected && d.servingCPUShare == 20)
    }

    @Test(arguments: ["0", "101", "-5", "half", "", "0.5"])
    func servingCPUShareRejectsAnythingElse(value: String) {
        guard case .invalid(let message) = CommandLineOptions.parse(arguments: ["--serving-cpu-share=\(value)"], environment: ["HOME": "/h"]) else {
            Issue.record("expected invalid for '\(value)'"); return
        }
        #expect(message.contains("--serving-cpu-share must be 1-100"))
    }

    /// A progress stream's ids go on from a reconnecting client's `Last-Event-ID`; an id it could
    /// not have sent starts again at 1 (never wrapping to 0).
    @Test(arguments: [(String?.none, UInt64(1)), ("41", 42), (" 7 ", 8), ("abc", 1), ("-1", 1), ("18446744073709551615", 1),
                      ("9007199254740991", 9_007_199_254_740_992), ("9007199254740992", 1)])
    func progressStreamIDsFollowLastEventID(last: String?, first: UInt64) {
        #expect(DownloadAPI.firstEventID(after: last) == first)
    }

}
