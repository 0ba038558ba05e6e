import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// What only the PostgreSQL store has to show: migrations that several replicas run at once apply
/// once, a newer schema is refused, tokens are stored as SHA-256 only, the pool stays within its bound.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct PostgresStateStoreTests {
    @Test func replicasStartingAtOnceMigrateOnce() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 6) { _ in
                do {
                    _ = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 1))
                } catch {
                    failures.withLock { $0.append(String(describing: error)) }
                }
            }
            c.expect(failures.withLock { $0 }.isEmpty)
            let versions = try PostgresConnection(url: url, timeout: 5).execute("SELECT version FROM schema_migrations ORDER BY version")
            c.expect(versions.rows.map { $0[0] } == (1...PostgresSchema.version).map { String($0) })
            // And again, on a database already up to date: nothing to do.
            _ = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 1))
            try c.expect(PostgresConnection(url: url, timeout: 5).execute("SELECT count(*) FROM schema_migrations").scalar
                    == String(PostgresSchema.version))
        }
    }

    @Test func aDatabaseFromANewerBuildIsRefused() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            _ = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 1))
            try PostgresConnection(url: url, timeout: 5).execute("INSERT INTO schema_migrations (version) VALUES (\(PostgresSchema.version + 1))")
            do {
                _ = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 1))
                c.expect(false, "a newer schema was accepted")
            } catch {
                c.expect((error as? StateStoreError)?.kind == .newerSchema, "\(error)")
            }
        }
    }

    @Test func tokensAreStoredAsTheirSHA256Only() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 1))
            var d = StateFixture.download("x", .queued)
            let token = "f00dfacecafebeef0123456789abcdef"
            d.tokens = [TokenHash(token: token)]
            try store.commit(StateBatch(upserts: [d]))
            let db = try PostgresConnection(url: url, timeout: 5)
            try c.expect(db.execute("SELECT encode(hash, 'hex') FROM tokens").scalar == PostgresArray.hex(TokenHash(token: token).digest))
            let dump = try db.execute("SELECT d::text, t::text FROM downloads d JOIN tokens t ON t.download = d.id").rows
            c.expect(dump.count == 1 && !dump.flatMap { $0 }.contains { $0?.contains(token) == true })
        }
    }

    @Test func thePoolOpensAtMostItsCapacity() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let pool = PostgresPool(url: url, capacity: 3)
            final class Peak: @unchecked Sendable {
                let lock = NSLock()
                var value = 0
            }
            let peak = Peak()
            let finished = DispatchGroup()
            for _ in 0..<12 {  // Threads of their own (concurrentPerform runs only as many as there are cores).
                finished.enter()
                Thread.detachNewThread {
                    try? pool.withConnection { db throws(StateStoreError) in
                        try db.execute("SELECT pg_sleep(0.1)")
                        peak.lock.withLock { peak.value = max(peak.value, pool.openConnections) }
                    }
                    finished.leave()
                }
            }
            c.expect(finished.wait(timeout: .now() + 30) == .success)
            c.expect(peak.lock.withLock { peak.value } == 3 && pool.openConnections <= 3)
            c.expect(pool.reachable)
        }
    }

    @Test func anUnreachableDatabaseThrowsAndSaysSo() async throws {
        try await blocking { c in
            let pool = PostgresPool(url: "postgres://replica:secret-never-shown@127.0.0.1:1/none", capacity: 1, connectTimeout: 1)
            var text = ""
            do {
                _ = try pool.withConnection { db throws(StateStoreError) in try db.execute("SELECT 1") }
                c.expect(false, "an unreachable database answered")
            } catch {
                text = String(describing: error)
            }
            c.expect(text.contains("127.0.0.1") && !text.contains("secret-never-shown"), "\(text)")
            c.expect(!pool.reachable)
        }
    }
}
