import Foundation
import Glibc
import Synchronization

/// `LISTEN`s, on a connection of the pool's that it keeps (when the pool has three or more), for
/// the `NOTIFY` a replica sends when it hands its leases over (a clean stop: they lapse at once), and
/// then asks for the search for lapsed leases (`onHandOver`) at once instead of at the next TTL/3.
/// Its own thread: waiting for a notification or reconnecting never delays the keeper's renewals.
/// Notifications are only a shortcut: the timed search finds every lapsed lease anyway, also those
/// announced while this watch was reconnecting.
final class HandOverWatch: @unchecked Sendable {
    static let channel = "download_service_handovers"
    private let pool: PostgresPool
    private let running = Atomic<Bool>(true)
    /// Told on the watch's thread.
    var onHandOver: (@Sendable () -> Void)?

    init(pool: PostgresPool) {
        self.pool = pool
    }

    func start() {
        guard pool.capacity >= 3 else { return }  // At least two connections stay the others'.
        let thread = Thread { [self] in run() }
        thread.name = "download-engine.handovers"
        thread.start()
    }

    /// Ends the thread (within its next wait, at most a second).
    func stop() { running.store(false, ordering: .releasing) }

    private func run() {
        var connection: PostgresConnection?
        while running.load(ordering: .acquiring) {
            guard let listening = connection else {
                connection = listen()
                if connection == nil { usleep(1_000_000) }  // The database is away: try again in a second.
                continue
            }
            var ready = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            _ = poll(&ready, 1, 250)  // Bounded, so that `stop` is seen.
            let notes = listening.notifications()
            if listening.isBroken {
                pool.retire()
                connection = nil
            } else if notes.contains(where: { $0.channel == Self.channel }) {
                onHandOver?()
            }
        }
        if connection != nil { pool.retire() }
    }

    /// A connection of the pool's, listening; nil when none could be had.
    private func listen() -> PostgresConnection? {
        guard let connection = try? pool.dedicate() else { return nil }
        do throws(StateStoreError) {
            try connection.execute("LISTEN \(Self.channel)")
            return connection
        } catch {
            pool.retire()
            return nil
        }
    }
}
