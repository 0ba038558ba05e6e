import DownloaderEngine
import Synchronization

/// Cluster mode's `--max-downloads-per-client`: counted in the database (`ClientTokenStore`), so a
/// client's live caller tokens on every replica count, under the address the request came from
/// (for a forwarded request, the one the forwarding replica vouched for: `ClientSigning`). Places
/// reserved here wait in memory for their commit or cancel (a client's places are interchangeable:
/// any one is taken). While the database fails, a reservation is let through: the engine answers
/// `database_unavailable` for the request itself.
final class ClusterCallerQuota: CallerLimit {
    let limit: Int
    let store: ClientTokenStore
    /// Commits between two sweeps of rows that no longer count.
    let sweepEvery: Int
    private let random: @Sendable () -> [UInt8]
    private let state = Mutex((places: [String: [[UInt8]]](), commits: 0))

    init(limit: Int, store: ClientTokenStore, sweepEvery: Int = 1_000,
         random: @escaping @Sendable () -> [UInt8] = ClientSigning.freshSecret) {
        self.limit = limit
        self.store = store
        self.sweepEvery = max(1, sweepEvery)
        self.random = random
    }

    func reserve(_ client: String) -> Bool {
        let place = random()
        switch store.reserve(client: client, limit: limit, place: place) {
        case .reserved:
            state.withLock { $0.places[client, default: []].append(place) }
            return true
        case .atLimit:
            return false
        case .unavailable:
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
