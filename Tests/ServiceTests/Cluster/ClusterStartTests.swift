@testable import DownloadService
import Foundation
import Glibc
import Testing

/// Cluster mode's options and start-up: a half-given configuration is exit 2, an unreachable
/// database exit 1 after at most about 10 s with `cluster database <host:port/db> unreachable: …`
/// (never the password), and the single process is unchanged without them.
@Suite struct ClusterOptionsTests {
    func parse(_ arguments: [String], environment: [String: String] = [:]) -> CommandLineOptions.Outcome {
        CommandLineOptions.parse(arguments: arguments, environment: environment)
    }

    @Test func theDefaultsAreTheSingleProcess() throws {
        guard case .run(let c) = parse([]) else { Issue.record("no configuration"); return }
        #expect(c.cluster == ClusterOptions() && !c.cluster.isEnabled)
        #expect(c.cluster.leaseTTL == 10 && c.cluster.poolSize == 8)
        #expect(c.engineConfiguration.clusterDatabase == nil)
    }

    @Test func theClusterFlagsAndTheirVariables() throws {
        let flags = parse(["--cluster-db", "postgres://u:p@db:5432/ds", "--shared-dir", "/mnt/shared/", "--advertise-url",
                           "http://10.0.0.5:8080", "--lease-ttl", "3", "--cluster-db-pool", "4"])
        guard case .run(let c) = flags else { Issue.record("\(flags)"); return }
        #expect(c.cluster.database == "postgres://u:p@db:5432/ds" && c.cluster.sharedDirectory == "/mnt/shared/")
        #expect(c.cluster.advertiseURL == "http://10.0.0.5:8080" && c.cluster.leaseTTL == 3 && c.cluster.poolSize == 4)
        let engine = c.engineConfiguration
        #expect(engine.cacheDirectory.path == "/mnt/shared/cache" && engine.dataDirectory.path == "/mnt/shared/persistent")
        #expect(engine.stateDirectory.path == "/mnt/shared/partial")
        let env = parse([], environment: ["DOWNLOAD_SERVICE_CLUSTER_DB": "postgres://db/ds", "DOWNLOAD_SERVICE_SHARED_DIR": "/s",
                                          "DOWNLOAD_SERVICE_LEASE_TTL": "1"])
        guard case .run(let e) = env else { Issue.record("\(env)"); return }
        #expect(e.cluster.database == "postgres://db/ds" && e.cluster.sharedDirectory == "/s" && e.cluster.leaseTTL == 1)
        // An image's area variables are replaced by --shared-dir, not refused.
        let image = parse(["--cluster-db", "postgres://db/ds", "--shared-dir", "/s"], environment: ["DOWNLOAD_SERVICE_STATE_DIR": "/v"])
        guard case .run(let i) = image else { Issue.record("\(image)"); return }
        #expect(i.engineConfiguration.stateDirectory.path == "/s/partial")
    }

    @Test(arguments: [
        (["--cluster-db", "postgres://db/ds"], "--cluster-db needs --shared-dir"),
        (["--shared-dir", "/s"], "--shared-dir is for cluster mode: it needs --cluster-db"),
        (["--cluster-db", "postgres://db/ds", "--shared-dir", "s"], "--shared-dir must be an absolute path"),
        (["--lease-ttl", "0.5"], "--lease-ttl must be seconds in 1.0-3600.0"),
        (["--lease-ttl", "x"], "--lease-ttl must be seconds"),
        (["--cluster-db-pool", "1"], "--cluster-db-pool must be 2-256"),
        (["--advertise-url", "10.0.0.5:8080"], "--advertise-url must be an http:// or https:// URL"),
        (["--cluster-db", ""], "--cluster-db needs a postgres:// URL"),
        (["--lease-ttl", "5"], "--advertise-url, --lease-ttl and --cluster-db-pool are for cluster mode"),
        (["--advertise-url", "http://10.0.0.5:8080"], "--advertise-url, --lease-ttl and --cluster-db-pool are for cluster mode"),
        (["--cluster-db-pool", "4"], "--advertise-url, --lease-ttl and --cluster-db-pool are for cluster mode"),
        (["--cluster-db", "postgres://db/ds", "--shared-dir", "/s", "--host", "0.0.0.0"], "with --host 0.0.0.0 other replicas"),
        (["--cluster-db", "postgres://db/ds", "--shared-dir", "/s", "--host", "::"], "with --host :: other replicas"),
        (["--cluster-db", "postgres://db/ds", "--shared-dir", "/s", "--host", "0:0:0:0:0:0:0:0"], "with --host 0:0:0:0:0:0:0:0 other"),
        (["--cluster-db", "postgres://db/ds", "--shared-dir", "/s", "--host", "::ffff:0.0.0.0"], "with --host ::ffff:0.0.0.0 other"),
        (["--cluster-db", "postgres://db/ds", "--shared-dir", "/s", "--state-dir", "/x"], "--shared-dir replaces --state-dir"),
        (["--data-dir", "/x", "--cluster-db", "postgres://db/ds", "--shared-dir", "/s"], "--shared-dir replaces --data-dir"),
        (["--shared-dir", "/s", "--cache-dir", "/x"], "--shared-dir replaces --cache-dir"),
    ])
    func halfOrBadClusterSettingsAreRefused(arguments: [String], message: String) {
        guard case .invalid(let text) = parse(arguments) else { Issue.record("accepted \(arguments)"); return }
        #expect(text.hasPrefix(message), "\(text)")
    }

    @Test func theHelpListsTheClusterOptions() {
        for flag in ["--cluster-db URL", "--shared-dir DIR", "--advertise-url URL", "--lease-ttl SECONDS", "--cluster-db-pool N",
                     "DOWNLOAD_SERVICE_CLUSTER_DB"] {
            #expect(CommandLineOptions.usage.contains(flag), "\(flag)")
        }
    }
}

@Suite(.timeLimit(.minutes(2))) struct ClusterStartTests {
    /// Runs the service with `arguments` until it exits (at most `timeout` s): its status, stderr and the time it took.
    static func run(_ arguments: [String], timeout: Double = 30) async throws -> (status: Int32?, stderr: String, seconds: Double) {
        try await onThread {
            let process = ChildProcess()
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: root) }
            // stderr goes to a file that only the child opens.
            let errorFile = root + "/stderr"
            process.executableURL = try ServiceProcess.executable()
            let areas = arguments.contains("--shared-dir") ? [] : ["--state-dir", root + "/state", "--cache-dir", root + "/cache",
                                                                   "--data-dir", root + "/data"]
            process.arguments = ["--port", "0", "--log-format", "json"] + areas + arguments
            process.standardOutput = .null
            process.standardError = .file(errorFile)
            let started = Date()
            try process.run()
            var status: Int32?
            if process.waitUntilExit(timeout: timeout) {
                status = process.terminationStatus
            } else {
                process.signal(SIGKILL)
                process.waitUntilExit(timeout: 10)
            }
            let seconds = Date().timeIntervalSince(started)
            let text = (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
            return (status, text, seconds)
        }
    }

    @Test func anUnreachableDatabaseIsExit1AfterAtMostTenSecondsWithoutThePassword() async throws {
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("shared-\(UUID().uuidString)").path
        let (status, stderr, seconds) = try await Self.run(
            ["--cluster-db", "postgres://replica:hunter2-secret@127.0.0.1:1/downloads", "--shared-dir", shared])
        #expect(status == 1)
        #expect(stderr.contains("cluster database 127.0.0.1:1/downloads unreachable: "), "\(stderr)")
        #expect(stderr.contains("127.0.0.1") && stderr.lowercased().contains("refused"), "libpq's own message: \(stderr)")
        #expect(!stderr.contains("hunter2"), "the password leaked: \(stderr)")
        #expect(seconds >= 8 && seconds < 14, "tried for \(seconds) s")
    }

    @Test(arguments: [["--cluster-db", "postgres://127.0.0.1:1/x"], ["--shared-dir", "/tmp/x"]])
    func halfAClusterConfigurationIsExit2(arguments: [String]) async throws {
        let (status, stderr, seconds) = try await Self.run(arguments)
        #expect(status == 2 && stderr.contains("--cluster-db needs --shared-dir") != stderr.contains("it needs --cluster-db"), "\(stderr)")
        #expect(seconds < 5)
    }
}
