// Adoption on demand (cluster mode): an action on a download that nobody holds makes this replica
// its holder for the action. The plain methods (`cancel(token:)`, `operatorPause(id:)`, …) adopt
// too and answer as for an unknown download when another replica holds it; these throwing forms
// say so with `heldElsewhere` (and the holder's URL) instead.
extension DownloadEngine {
    /// Runs `action` with download `id` held here: when nobody holds it, its lease is taken and
    /// its row (and tokens) adopted first; afterwards it stays (live: its transfer runs) or is
    /// released and evicted. Throws `heldElsewhere` when another replica holds it. `removing`: the
    /// action removes it, so its kept bytes need not be copied here. A single process just runs `action`.
    public func holding<T>(id: String, removing: Bool = false, _ action: () throws(EngineError) -> T) throws(EngineError) -> T {
        try core.clusterAdopt(id: id, removing: removing)
        defer { core.clusterSettle(id: id) }
        return try action()
    }

    /// `holding(id:_:)` for the download of caller token `token`.
    public func holding<T>(token: String, _ action: () -> T) throws(EngineError) -> T {
        let id = try core.clusterAdopt(token: token)
        defer { core.clusterSettle(id: id) }
        return action()
    }

    /// `cancel(token:)`, throwing `heldElsewhere` when another replica holds the download.
    public func cancelling(token: String) throws(EngineError) -> DownloadSnapshot? {
        try holding(token: token) { cancelHere(token: token) }
    }

    /// `operatorPause(id:)`, throwing `heldElsewhere` when another replica holds the download.
    public func operatorPausing(id: String) throws(EngineError) -> OperatorOutcome {
        try holding(id: id) { () throws(EngineError) in try core.operatorPause(id: id) }
    }

    /// `operatorResume(id:)`, throwing `heldElsewhere` when another replica holds the download.
    public func operatorResuming(id: String) throws(EngineError) -> OperatorOutcome {
        try holding(id: id) { () throws(EngineError) in try core.operatorResume(id: id) }
    }

    /// `remove(id:)`, throwing `heldElsewhere` when another replica holds the download.
    public func removing(id: String) throws(EngineError) -> DownloadSnapshot? {
        try holding(id: id, removing: true) { () throws(EngineError) in try core.remove(id: id) }
    }

    /// Cancels on this replica only (what `cancel(token:)` does once the download is here).
    func cancelHere(token: String) -> DownloadSnapshot? {
        guard let snapshot = core.cancel(token: token) else { return nil }
        webhooks.drop(token: token)  // the caller's callback goes with its token
        return snapshot
    }
}
