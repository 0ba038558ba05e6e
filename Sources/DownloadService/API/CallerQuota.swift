import Synchronization

/// `--max-downloads-per-client`: live caller tokens one client address may hold. A client at its
/// limit first has its tokens checked against the engine (tokens the engine dropped no longer
/// count); if it is still at the limit, the request is refused (429 `too_many_downloads`).
/// Memory stays bounded: when the tokens tracked grow past twice what the last sweep kept, every
/// client's tokens are checked once.
final class CallerQuota: Sendable {
    typealias LiveCheck = @Sendable ([String]) -> Set<String>

    private let state: Mutex<(tokens: CallerTokens, sweepAbove: Int)>
    private let liveTokens: LiveCheck

    init(limit: Int, liveTokens: @escaping LiveCheck) {
        state = Mutex((CallerTokens(limit: limit), 10_000))
        self.liveTokens = liveTokens
    }

    var limit: Int { state.withLock { $0.tokens.limit } }

    /// Takes a place for `client`; false when it holds `limit` live tokens.
    func reserve(_ client: String) -> Bool {
        if state.withLock({ $0.tokens.reserve(client) }) { return true }
        let held = Array(state.withLock { $0.tokens.tokens(of: client) })
        let live = liveTokens(held)
        return state.withLock { state in
            for token in held where !live.contains(token) { state.tokens.remove(token) }
            return state.tokens.reserve(client)
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
