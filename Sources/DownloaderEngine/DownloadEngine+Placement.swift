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
    /// every download itself. In cluster mode: `.here` when this replica holds its lease or nobody
    /// does (a request would take it here), `.elsewhere` while another replica holds it. A URL the
    /// engine would refuse, or a database that cannot be asked, answers `.here` (acting here then
    /// gives the error).
    public func placement(of request: DownloadRequest) -> Placement {
        guard core.cluster != nil, let request = try? screened(request),
              let headers = try? CallerHeaders.validate(request.headers).get() else {
            return .here
        }
        let key = core.coalescingKey(url: request.url, headers: headers)
        if core.locked({ core.byURL[key] != nil }) { return .here }
        return core.placement(ofLease: key.leaseName)
    }

    /// Where download `id` lives (id → its row → its lease key → the lease's holder).
    public func placement(ofID id: String) -> Placement {
        guard let cluster = core.cluster, !core.locked({ core.byID[id] != nil }) else { return .here }
        guard let key = try? cluster.store.leaseKey(ofID: id) else { return .here }
        return core.placement(ofLease: key)
    }

    /// Where the download of caller token `token` lives (token → its download's id → as `placement(ofID:)`).
    public func placement(ofToken token: String) -> Placement {
        let hash = TokenHash(token: token)
        guard let cluster = core.cluster, !core.locked({ core.tokens[hash] != nil }) else { return .here }
        guard let id = try? cluster.store.downloadID(ofToken: hash) else { return .here }
        return placement(ofID: id)
    }
}

extension EngineCore {
    /// `.elsewhere` while another replica holds lease `key`, else `.here`.
    func placement(ofLease key: String?) -> Placement {
        guard let cluster, let key, let holder = try? cluster.leases.holder(key: key),
              holder.owner != cluster.replica.owner else { return .here }
        return .elsewhere(ownerURL: holder.url)
    }
}
