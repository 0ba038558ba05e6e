import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Every statement has a client-side deadline: a server that stops answering without closing the
/// connection (its backend frozen with `SIGSTOP`, as a partition or a stalled disk would leave it)
/// fails the statement after `statementTimeout` and breaks the connection, instead of holding the
/// calling thread until the server wakes; the pool then drops it and counts the database lost.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct PostgresDeadlineTests {
    @Test func aStatementTheServerNeverAnswersFailsAtItsDeadline() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let db = try PostgresConnection(url: url, timeout: 5, statementTimeout: 1)
            try c.expect(db.execute("SELECT 41 + 1").scalar == "42")
            let backend = db.backendPID
            kill(backend, SIGSTOP)
            defer { kill(backend, SIGCONT) }
            let started = Date()
            do {
                try db.execute("SELECT 1")
                c.expect(false, "a frozen backend answered")
            } catch let error as StateStoreError {
                let waited = Date().timeIntervalSince(started)
                c.expect(waited >= 0.9 && waited < 10, "failed after \(waited) s, not at the 1 s deadline")
                c.expect(error.message.contains("no answer within 1 s"), "\(error.message)")
            }
            c.expect(db.isBroken, "a connection past its deadline is not used again")
            do {
                try db.execute("SELECT 1")
                c.expect(false, "a given-up connection ran a statement")
            } catch let error as StateStoreError {
                c.expect(error.message.contains("given up"), "\(error.message)")
            }
        }
    }

    /// A statement that is only slow is cancelled by the server just before the client's deadline:
    /// an ordinary error, and the connection stays usable (nothing left running on the server).
    @Test func aSlowStatementIsCancelledByTheServerAndTheConnectionKept() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let db = try PostgresConnection(url: url, timeout: 5, statementTimeout: 2)
            c.expect(PostgresConnection.serverTimeout(2) == 1_500 && PostgresConnection.serverTimeout(30) == 27_000)
            try c.expect(db.execute("SHOW statement_timeout").scalar == "1500ms")
            do {
                try db.execute("SELECT pg_sleep(5)")
                c.expect(false, "a 5 s statement ran under a 2 s deadline")
            } catch let error as StateStoreError {
                c.expect(error.message.contains("statement timeout"), "\(error.message)")
            }
            c.expect(!db.isBroken, "the server's cancel keeps the connection")
            try c.expect(db.execute("SELECT 7").scalar == "7")
        }
    }

    @Test func thePoolDropsTheConnectionAndCountsTheDatabaseLost() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let pool = PostgresPool(url: url, capacity: 2, statementTimeout: 1)
            let backend = try pool.withConnection { db throws(StateStoreError) in db.backendPID }
            c.expect(pool.reachable && pool.openConnections == 1)
            kill(backend, SIGSTOP)
            defer { kill(backend, SIGCONT) }
            c.expect((try? pool.withConnection { db throws(StateStoreError) in try db.execute("SELECT 1") }) == nil)
            c.expect(!pool.reachable && pool.openConnections == 0, "the frozen session's connection is dropped")
            // The next borrow opens a new session, which answers: reachable again.
            try c.expect(pool.withConnection { db throws(StateStoreError) in try db.execute("SELECT 2").scalar } == "2")
            c.expect(pool.reachable && pool.openConnections == 1)
        }
    }

    /// Idle sessions the server ended (a restart or failover, `pg_terminate_backend`,
    /// `idle_session_timeout`) are dropped when borrowed, not handed out to fail their first
    /// statement: a lease renewal that failed so would stop its lease while the database answers.
    @Test func idleConnectionsTheServerEndedAreNotHandedOut() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let pool = PostgresPool(url: url, capacity: 3, statementTimeout: 5)
            // Three sessions at once, given back idle.
            let pids = try pool.withConnection { a throws(StateStoreError) in
                try pool.withConnection { b throws(StateStoreError) in
                    try pool.withConnection { d throws(StateStoreError) in [a.backendPID, b.backendPID, d.backendPID] }
                }
            }
            c.expect(pool.openConnections == 3 && Set(pids).count == 3)
            let admin = try PostgresConnection(url: url, timeout: 5)
            for pid in pids { try admin.execute("SELECT pg_terminate_backend($1)", [String(pid)]) }
            let list = "{" + pids.map(String.init).joined(separator: ",") + "}"
            let deadline = Date().addingTimeInterval(10)
            while try admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", [list]).scalar != "0",
                  Date() < deadline {
                usleep(20_000)
            }
            try c.expect(pool.withConnection { db throws(StateStoreError) in try db.execute("SELECT 5").scalar } == "5",
                         "an ended session was handed out")
            c.expect(pool.reachable && pool.openConnections == 1, "the three ended sessions dropped, one new")
        }
    }

    @Test func severalStatementsAnswerAsOneAndTheFirstFailureWins() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let db = try PostgresConnection(url: url, timeout: 5)
            try c.expect(db.execute("SELECT 1; SELECT 2").scalar == "2", "the last statement's rows, as PQexec")
            do {
                try db.execute("SELECT 1; SELECT * FROM no_such_table; SELECT 3")
                c.expect(false, "a failing statement was not reported")
            } catch let error as StateStoreError {
                c.expect(error.message.contains("no_such_table"), "\(error.message)")
            }
            c.expect(!db.isBroken, "a refused statement leaves the connection usable")
            try c.expect(db.execute("SELECT $1::int + 1", ["4"]).scalar == "5")
        }
    }
}
