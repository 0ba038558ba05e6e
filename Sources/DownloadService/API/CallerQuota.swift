import Foundation
import Synchronization

/// `--max-downloads-per-client`: live caller tokens of unfinished downloads one client address may
/// hold. A client at its limit first has its tokens checked against the engine (tokens the engine
/// dropped, and those of downloads that completed or failed, no longer count); if it is still at
/// the limit, the request is refused (429 `too_many_downloads`).
/// That check looks at every token the client holds, so a check that freed nothing is not repeated
/// for the same client within `recheckInterval` (a client hammering at its limit is refused at
/// the cost of a lookup, not of a sweep through its 1,000 tokens per request); cancelling a token
/// frees its place at once. Memory stays bounded: when the tokens tracked grow past twice what the
/// last sweep kept, every client's tokens are checked once.
final class CallerQuota: Sendable {
    typealias LiveCheck = @Sendable ([String]) -> Set<String>

    private struct State {
        var tokens: CallerTokens
        var sweepAbove = 10_000
        /// Clients whose last check freed nothing, and when they may be checked again.
        var recheckAfter: [String: UInt64] = [:]
    }

    private let state: Mutex<State>
    private let liveTokens: LiveCheck
    private let now: @Sendable () -> UInt64
    let recheckInterval: UInt64

    /// `now` is a monotonic clock in nanoseconds (injectable for tests).
    init(limit: Int, recheckInterval: Double = 1, now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
         liveTokens: @escaping LiveCheck) {
        state = Mutex(State(tokens: CallerTokens(limit: limit)))
        self.recheckInterval = UInt64(recheckInterval * 1e9)
        self.now = now
        self.liveTokens = liveTokens
    }

    var limit: Int { state.withLock { $0.tokens.limit } }

    /// Takes a place for `client`; false when it holds `limit` live tokens.
    func reserve(_ client: String) -> Bool {
        let time = now()
        let held = state.withLock { state -> [String]? in
            if state.tokens.reserve(client) { return nil }
            if let after = state.recheckAfter[client], time < after { return [] }
            return Array(state.tokens.tokens(of: client))
        }
        guard let held else { return true }
        guard !held.isEmpty else { return false }
        let live = liveTokens(held)
        return state.withLock { state in
            for token in held where !live.contains(token) { state.tokens.remove(token) }
            if state.tokens.reserve(client) {
                state.recheckAfter[client] = nil
                return true
            }
            if state.recheckAfter.count >= 4_096 { state.recheckAfter = state.recheckAfter.filter { time < $0.value } }
            state.recheckAfter[client] = time + recheckInterval
            return false
        }
    }

    func commit(_ client: String, token: String) {
        let sweep = state.withLock { state -> [String]? in
            state.tokens.commit(client, token: token)
            return state.tokens.totalTokens > state.sweepAbove ? Array(state.tokens.clientOf.keys) : nil
        }
        guard let sweep else { return }
        let live = liveTokens(sweep)
        state.withLock { state in
            for token in sweep where !live.contains(token) { state.tokens.remove(token) }
            state.sweepAbove = max(10_000, 2 * state.tokens.totalTokens)
        }
    }

    func cancel(_ client: String) { state.withLock { $0.tokens.cancel(client) } }

    func remove(_ token: String) { state.withLock { $0.tokens.remove(token) } }

    /// Tokens tracked for `client` (live or not yet found dead).
    func count(_ client: String) -> Int { state.withLock { $0.tokens.tokens(of: client).count } }
}
