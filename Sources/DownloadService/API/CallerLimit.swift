/// `--max-downloads-per-client` as `POST /downloads` uses it: a place is reserved for the client
/// before the engine is asked, then committed with the caller token it got, or cancelled. One
/// replica counts in memory (`CallerQuota`); cluster mode counts in the database, across replicas
/// (`ClusterCallerQuota`).
protocol CallerLimit: Sendable {
    var limit: Int { get }
    /// Takes a place for `client`; false when it holds `limit` live tokens.
    func reserve(_ client: String) -> Bool
    /// The place `reserve` took is caller token `token`'s.
    func commit(_ client: String, token: String)
    /// The place `reserve` took is not needed.
    func cancel(_ client: String)
    /// Caller token `token` was withdrawn.
    func remove(_ token: String)
}

extension CallerQuota: CallerLimit {}
