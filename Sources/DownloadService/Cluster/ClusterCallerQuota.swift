import DownloaderEngine
import Foundation
import Synchronization

/// Cluster mode's `--max-downloads-per-client`: counted in the database (`ClientTokenStore`), so a
/// client's live caller tokens on every replica count, under the address the request came from
/// (for a forwarded request, the one the forwarding replica vouched for: `ClientSigning`). Places
/// reserved here wait in memory for their commit or cancel (a client's places are interchangeable:
/// any one is taken). A reservation far from the limit claims a block of places, and the spare
/// ones serve the client's next requests here without a database round trip (`ClientAllowance`).
/// One block per client is claimed at a time: the client's other reservations meanwhile (requests
/// are handled on several threads) claim a single place each, so a burst never claims a block per
/// request (30 requests at once once claimed 30 blocks, most of the limit, and later ones were refused).
/// While the database fails, a reservation is let through: the engine answers
/// `database_unavailable` for the request itself.
final class ClusterCallerQuota: CallerLimit {
    let limit: Int
    let store: ClientTokenStore
    /// Commits between two sweeps of rows that no longer count.
    let sweepEvery: Int
    private let random: @Sendable () -> [UInt8]
    private let monotonic: @Sendable () -> Double
    /// Places claimed and not given yet, by client, with when their claim started.
    private struct Spare {
        var places: [[UInt8]]
        var claimedAt: Double
    }
    private let state = Mutex((places: [String: [[UInt8]]](), commits: 0, spare: [String: Spare](), claiming: Set<String>()))

    init(limit: Int, store: ClientTokenStore, sweepEvery: Int = 1_000,
         random: @escaping @Sendable () -> [UInt8] = ClientSigning.freshSecret,
         monotonic: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        self.limit = limit
        self.store = store
        self.sweepEvery = max(1, sweepEvery)
        self.random = random
        self.monotonic = monotonic
    }

    func reserve(_ client: String) -> Bool {
        let (recent, now) = (store.recent, monotonic())
        // A spare place given (nil), else whether this reservation claims a block.
        let claimsBlock: Bool? = state.withLock { state in
            if var spare = state.spare[client] {
                if ClientAllowance.usable(claimedAt: spare.claimedAt, now: now, recent: recent), let place = spare.places.popLast() {
                    state.spare[client] = spare.places.isEmpty ? nil : spare
                    state.places[client, default: []].append(place)
                    return nil
                }
                state.spare[client] = nil
            }
            return state.claiming.insert(client).inserted
        }
        guard let claimsBlock else { return true }
        defer { if claimsBlock { _ = state.withLock { $0.claiming.remove(client) } } }
        let limit = self.limit
        let block: (Int) -> Int = { claimsBlock ? ClientAllowance.block(held: $0, limit: limit) : 1 }
        let places = (0..<block(0)).map { _ in random() }
        switch store.reserve(client: client, limit: limit, places: places, block: block) {
        case 0?:
            return false
        case let taken?:
            state.withLock { state in
                state.places[client, default: []].append(places[0])
                guard taken > 1 else { return }
                if state.spare.count >= ClientAllowance.maximumClients {
                    state.spare = state.spare.filter { ClientAllowance.usable(claimedAt: $0.value.claimedAt, now: now, recent: recent) }
                }
                if state.spare.count < ClientAllowance.maximumClients || state.spare[client] != nil {
                    state.spare[client] = Spare(places: Array(places[1..<taken]), claimedAt: now)
                }
            }
            return true
        case nil:
            return true
        }
    }

    func commit(_ client: String, token: String) {
        let (place, sweep) = state.withLock { state -> ([UInt8]?, Bool) in
            state.commits += 1
            return (Self.take(client, &state.places), state.commits % sweepEvery == 0)
        }
        store.commit(place: place, client: client, token: token)
        if sweep { store.sweep() }
    }

    func cancel(_ client: String) {
        guard let place = state.withLock({ Self.take(client, &$0.places) }) else { return }
        store.release(place: place)
    }

    func remove(_ token: String) {
        store.remove(token: token)
    }

    /// Places reserved here and not yet committed or cancelled.
    var pending: Int { state.withLock { $0.places.values.reduce(0) { $0 + $1.count } } }

    private static func take(_ client: String, _ places: inout [String: [[UInt8]]]) -> [UInt8]? {
        guard var held = places[client], let place = held.popLast() else { return nil }
        places[client] = held.isEmpty ? nil : held
        return place
    }
}
