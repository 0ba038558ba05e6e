import Foundation
import Glibc
import Testing

/// Replicas of the real executable in cluster mode: one real PostgreSQL (its own server, so a test
/// may stop and start it), one shared directory, each replica on its own port 0 with its own state
/// area. A replica's advertised URL is its default (`http://127.0.0.1:<port>`).
final class ReplicaSet: @unchecked Sendable {
    let postgres: PostgresServer
    let databaseURL: String
    let shared: String
    let ttl: Int
    private(set) var replicas: [ServiceProcess] = []

    private init(postgres: PostgresServer, databaseURL: String, shared: String, ttl: Int) {
        self.postgres = postgres
        self.databaseURL = databaseURL
        self.shared = shared
        self.ttl = ttl
    }

    /// PostgreSQL, then `count` replicas (started one after the other: each migrates or finds the schema).
    static func start(count: Int = 3, ttl: Int = 2, arguments: [String] = []) async throws -> ReplicaSet {
        let postgres = try await onThread { try PostgresServer() }
        let url = try await onThread { try postgres.createDatabase() }
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("replicas-\(UUID().uuidString)").path
        let set = ReplicaSet(postgres: postgres, databaseURL: url, shared: shared, ttl: ttl)
        for _ in 0..<count {
            set.replicas.append(try await ServiceProcess.start(arguments: set.arguments + arguments))
        }
        return set
    }

    /// Starts `count` more replicas on the same database and directory (one after the other).
    func add(_ count: Int = 1, arguments: [String] = []) async throws {
        for _ in 0..<count {
            replicas.append(try await ServiceProcess.start(arguments: self.arguments + arguments))
        }
    }

    var arguments: [String] {
        Durability.allowLoopback + ["--cluster-db", databaseURL, "--shared-dir", shared, "--lease-ttl", String(ttl)]
    }

    subscript(_ index: Int) -> ServiceProcess { replicas[index] }

    /// A metric's value on `replica` (the sum of its series), nil when absent or unreachable.
    func metric(_ name: String, on replica: ServiceProcess) async -> Double? {
        guard let answer = try? await replica.client.request("GET", "/metrics"), answer.status == 200 else { return nil }
        let values = answer.text.split(separator: "\n").filter { $0.hasPrefix(name + " ") || $0.hasPrefix(name + "{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        return values.isEmpty ? nil : values.reduce(0, +)
    }

    /// The index of the replica that holds a lease (waits at most `seconds`), nil when none does.
    func holder(among indices: [Int]? = nil, seconds: Double = 10) async -> Int? {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            for index in indices ?? Array(replicas.indices) {
                if let held = await metric("download_service_cluster_leases_held", on: replicas[index]), held >= 1 { return index }
            }
            try? await Task.sleep(for: .milliseconds(100))
        } while Date() < deadline
        return nil
    }

    /// Polls `GET /downloads/{id}` on `replica` until `matches` holds (at most `seconds`); the last answer.
    func poll(_ replica: ServiceProcess, id: String, seconds: Double = 20,
              until matches: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(seconds)
        var last: [String: Any] = [:]
        repeat {
            if let answer = try? await replica.client.request("GET", "/downloads/\(id)"), answer.status == 200 {
                last = answer.json
                if matches(last) { return last }
            }
            try await Task.sleep(for: .milliseconds(100))
        } while Date() < deadline
        return last
    }

    /// Every replica's log lines naming download `id` (its story), one block per replica: what a
    /// failure message shows of how a download moved between replicas.
    func stories(of id: String) -> String {
        replicas.enumerated().map { index, replica in
            "replica \(index):\n" + replica.logLines.filter { $0.contains(id) }.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    /// Stops every replica still running (SIGCONT first, for one a test stopped), then PostgreSQL.
    func stop() async {
        for replica in replicas {
            replica.process.signal(SIGCONT)
            _ = try? await replica.stop(timeout: 20)
        }
        let postgres = postgres
        _ = try? await onThread { postgres.stop() }  // Blocking (≤ 10 s): off the cooperative pool.
    }
}
