/// Live caller tokens per client address, against a per-client limit. Pure bookkeeping: which
/// tokens are still live is asked of the engine by `CallerQuota`, which feeds the answer back.
struct CallerTokens: Sendable, Equatable {
    let limit: Int
    private(set) var byClient: [String: Set<String>] = [:]
    private(set) var clientOf: [String: String] = [:]
    /// Requests between `reserve` and `commit`/`cancel`, per client.
    private(set) var pending: [String: Int] = [:]

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    var totalTokens: Int { clientOf.count }

    func tokens(of client: String) -> Set<String> { byClient[client] ?? [] }

    /// Takes a place for one more token of `client`; false when the client is at its limit.
    mutating func reserve(_ client: String) -> Bool {
        let used = (byClient[client]?.count ?? 0) + pending[client, default: 0]
        guard used < limit else { return false }
        pending[client, default: 0] += 1
        return true
    }

    /// The reserved place now holds `token`.
    mutating func commit(_ client: String, token: String) {
        cancel(client)
        byClient[client, default: []].insert(token)
        clientOf[token] = client
    }

    /// The reserved place is given back (the request failed).
    mutating func cancel(_ client: String) {
        let count = pending[client, default: 0]
        pending[client] = count > 1 ? count - 1 : nil
    }

    /// `token` is no longer live (cancelled, or the engine dropped it).
    mutating func remove(_ token: String) {
        guard let client = clientOf.removeValue(forKey: token) else { return }
        byClient[client]?.remove(token)
        if byClient[client]?.isEmpty == true { byClient[client] = nil }
    }
}
