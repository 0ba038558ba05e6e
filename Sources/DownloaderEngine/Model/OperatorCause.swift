/// Who paused a download: its callers (the last one left) or the operator (a hold only the
/// operator lifts). Every `paused` event's snapshot says which (`DownloadSnapshot.pausedBy`).
public enum PauseCause: String, Sendable, Codable, Equatable {
    case callers
    case `operator`
}

/// Who removed a download: the operator (`DELETE /admin/downloads/{id}`) or retention (a cache
/// file not requested for `cacheTTL`).
public enum RemovalCause: String, Sendable, Codable, Equatable, CaseIterable {
    case `operator`
    case retention
}

/// What the operator asked of a download, and what came of it.
public enum OperatorOutcome: Sendable, Equatable {
    /// Done (or already so): the download as it is now.
    case done(DownloadSnapshot)
    /// No download with that id (never was, or removed).
    case unknown
    /// Not possible in the download's state (a completed or failed download cannot be paused).
    case invalidState(DownloadSnapshot)
}
