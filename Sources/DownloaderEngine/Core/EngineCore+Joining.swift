// Cluster mode: a request or an action joins a download through its lease (this replica takes it
// and adopts the download from the database, or is told who holds it), and afterwards a lease
// granted for nothing is given back and a download that is not live is let go.
extension EngineCore {
    /// Before a request joins `key` (no lock held): makes sure this replica holds the key's lease
    /// and has its download (if there is one) in memory, adopted from the database. Throws
    /// `heldElsewhere` when another replica holds it.
    func clusterPrepare(_ key: CoalescingKey) throws(EngineError) {
        guard let cluster else { return }
        let name = key.leaseName
        // Already here: joined without waiting for the key's adoption lock, which a takeover of this
        // very download holds while it copies its partial (minutes for a large file on a volume
        // without server-side copy). Another key's takeover never holds this key's lock.
        let here = { self.locked { self.byURL[key] != nil || cluster.pending[name] != nil } }
        if here() { return }
        cluster.adoption.lock(name)
        defer { cluster.adoption.unlock(name) }
        if here() { return }
        if let hold = try takeAndAdopt(name, cluster) {
            locked { cluster.pending[name] = hold }  // A new download: created by the join.
            cluster.keeper.add(hold)
        }
    }

    /// Before an action on download `id` (a cancel, an operator action; no lock held): when nobody
    /// holds it, this replica takes its lease and adopts it, so the ordinary engine code acts on
    /// it; `clusterSettle(id:)` afterwards keeps it (live) or releases and evicts it. An id the
    /// database does not know is left alone (the action answers as for an unknown id). Throws
    /// `heldElsewhere` when another replica holds it.
    func clusterAdopt(id: String, removing: Bool = false) throws(EngineError) {
        guard let cluster else { return }
        if locked({ byID[id] != nil }) { return }  // Already here: no wait for a takeover's copy.
        // The lease key is found before its adoption lock is taken (a download's key never changes),
        // then everything is checked again under it.
        let found: String?
        do throws(StateStoreError) {
            found = try cluster.store.leaseKey(ofID: id)
        } catch {
            throw .databaseUnavailable()
        }
        guard let name = found else { return }
        cluster.adoption.lock(name)
        defer { cluster.adoption.unlock(name) }
        guard !locked({ byID[id] != nil || cluster.pending[name] != nil || cluster.held[name] != nil }) else { return }
        if let unused = try takeAndAdopt(name, cluster, keepingBytes: !removing) {
            cluster.keeper.remove(unused)
            if unused.stop() { _ = try? cluster.leases.release(key: unused.key, epoch: unused.epoch) }
        }
    }

    /// `clusterAdopt(id:)` for the download of caller token `token`; returns its id (nil: unknown).
    func clusterAdopt(token: String) throws(EngineError) -> String? {
        let hash = TokenHash(token: token)
        if let id = locked({ tokens[hash] }) { return id }
        guard let cluster else { return nil }
        let found: String?
        do throws(StateStoreError) {
            found = try cluster.store.downloadID(ofToken: hash)
        } catch {
            throw .databaseUnavailable()
        }
        guard let id = found else { return nil }
        try clusterAdopt(id: id)
        return id
    }

    /// After an action on download `id`: a download that is not live is released and evicted.
    func clusterSettle(id: String?) {
        guard cluster != nil, let id else { return }
        decide { if let record = byID[id] { clusterCheck(record) } }
    }

    /// After a request joined `key` (no lock held): a lease granted for nothing is given back, a
    /// download that is not live (answered from its file, refused) is released and evicted.
    func clusterAfterJoin(_ key: CoalescingKey) {
        guard let cluster else { return }
        decide {
            if let hold = cluster.pending.removeValue(forKey: key.leaseName) {
                effects.append { [self] in cluster.queue.async { self.releaseUnused(hold) } }
            }
            if let record = byURL[key] {
                clusterLinger(record)
                clusterCheck(record)
            }
        }
    }

    /// After a request was answered a token (no lock held): it is committed before the caller hears
    /// it, so a `DELETE` on any other replica right after the `POST` finds it (the writer's next
    /// commit may be up to `stateMinInterval` away). Requests at once share a commit; a database
    /// that does not answer within `tokenPublishWait` seconds holds nobody longer (the writer
    /// retries). A single process answers at once.
    func clusterPublishTokens() {
        guard cluster != nil else { return }
        stateWriter.publish(timeout: Self.tokenPublishWait)
    }

    static let tokenPublishWait: Double = 5

    /// Under `lock`: whether a new download for `key` may start (single process: always; cluster
    /// mode: under the lease `clusterPrepare` took, still pending).
    func clusterLeaseReady(_ key: CoalescingKey) -> Bool {
        guard let cluster else { return true }
        return cluster.pending[key.leaseName] != nil
    }

    /// Under `lock`: a new download takes the lease granted for its key.
    func clusterAttach(_ record: DownloadRecord) {
        guard let cluster, let hold = cluster.pending.removeValue(forKey: record.key.leaseName) else { return }
        hold.id = record.id
        record.lease = hold
        cluster.held[hold.key] = record
    }
}
