import Basics
import Foundation

/// At most `capacity` connections to the cluster database (`--cluster-db-pool`), opened when first
/// needed and kept while they work; a broken one is dropped and replaced on the next borrow. A
/// borrower waits at most `wait` seconds for a free connection. `reachable` says whether the last
/// attempt to reach the database worked (`/healthz`, `/readyz`, the 503s while it is lost). Every
/// statement on its connections has `statementTimeout` seconds (`PostgresConnection`): one past it
/// breaks its connection, so the database counts as unreachable until a probe reaches it again.
final class PostgresPool: @unchecked Sendable {
    let url: String
    let capacity: Int
    let connectTimeout: Double
    let statementTimeout: Double
    private let condition = MonotonicCondition()
    // Guarded by `condition`.
    private var idle: [PostgresConnection] = []
    private var opened = 0
    private var lastReachable = true

    init(url: String, capacity: Int, connectTimeout: Double = 3, statementTimeout: Double = 5) {
        self.url = url
        self.capacity = max(1, capacity)
        self.connectTimeout = connectTimeout
        self.statementTimeout = statementTimeout
    }

    /// Whether the last connection attempt or statement reached the database.
    var reachable: Bool { condition.withLock { lastReachable } }

    /// Connections open now (idle or borrowed).
    var openConnections: Int { condition.withLock { opened } }

    /// Runs `body` with a connection of the pool; the connection goes back to the pool afterwards
    /// (or is dropped when it broke).
    func withConnection<T>(wait: Double = 5, _ body: (PostgresConnection) throws(StateStoreError) -> T) throws(StateStoreError) -> T {
        let connection = try borrow(wait: wait)
        do throws(StateStoreError) {
            let value = try body(connection)
            giveBack(connection)
            return value
        } catch {
            giveBack(connection)
            throw error
        }
    }

    /// Takes a connection out of the pool for good (a listener's): it counts against `capacity`
    /// until `retire()` gives its place back (after the caller dropped it).
    func dedicate(wait: Double = 1) throws(StateStoreError) -> PostgresConnection {
        try borrow(wait: wait)
    }

    /// A dedicated connection is dropped: its place in the pool is free again.
    func retire() {
        condition.withLock {
            opened -= 1
            condition.signal()
        }
    }

    /// Closes the idle connections (borrowed ones close when given back broken, or at deinit).
    func drain() {
        condition.withLock {
            opened -= idle.count
            idle.removeAll()
        }
    }

    private func borrow(wait: Double) throws(StateStoreError) -> PostgresConnection {
        let deadline = MonotonicCondition.now() + wait
        condition.lock()
        while true {
            while idle.isEmpty && opened >= capacity {
                guard condition.wait(until: deadline) else {
                    condition.unlock()
                    throw StateStoreError(kind: .other, message: "postgres: all \(capacity) connections of the pool are busy")
                }
            }
            guard let connection = idle.popLast() else { break }
            condition.unlock()
            // A session the server ended while it sat idle (a restart, a terminated backend) is
            // dropped here, not handed out to fail its first statement: a lease renewal that failed
            // so would stop its lease while the database answers.
            if connection.stillOpenWhileIdle() { return connection }
            condition.lock()
            opened -= 1
        }
        opened += 1
        condition.unlock()
        do throws(StateStoreError) {
            let connection = try PostgresConnection(url: url, timeout: connectTimeout, statementTimeout: statementTimeout)
            condition.withLock { lastReachable = true }
            return connection
        } catch {
            condition.withLock {
                opened -= 1
                lastReachable = false
                condition.signal()
            }
            throw error
        }
    }

    private func giveBack(_ connection: PostgresConnection) {
        let broken = connection.isBroken
        condition.withLock {
            if broken {
                opened -= 1
                lastReachable = false
            } else {
                idle.append(connection)
                lastReachable = true
            }
            condition.signal()
        }
    }
}
