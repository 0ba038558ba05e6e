/// Where a download's live state is (cluster mode): on this replica, or with the replica that holds
/// its lease (it runs the transfer and owns the download's state while it does), reached at that
/// replica's advertised URL. The service forwards a request for a download held elsewhere to its
/// holder; anything else is answered here.
public enum Placement: Sendable, Equatable {
    case here
    case elsewhere(ownerURL: String)
}

extension DownloadEngine {
    /// Where the download for `request`'s URL (and caller headers) lives. A single process holds
    /// every download itself.
    public func placement(of request: DownloadRequest) -> Placement { .here }

    /// Where download `id` lives.
    public func placement(ofID id: String) -> Placement { .here }

    /// Where the download of caller token `token` lives.
    public func placement(ofToken token: String) -> Placement { .here }
}
