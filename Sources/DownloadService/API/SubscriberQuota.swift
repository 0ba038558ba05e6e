import Synchronization

/// Progress streams open per download, at most `limit` at once. A stream holds a `Lease` for as long
/// as its response lives; dropping the lease (the stream ended, the client went, or the response
/// was never sent) frees the place.
final class SubscriberQuota: Sendable {
    let limit: Int
    private let open = Mutex<[String: Int]>([:])

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// A place for one more stream of download `id`, or nil when `limit` are open.
    func acquire(_ id: String) -> Lease? {
        let granted = open.withLock { open -> Bool in
            let count = open[id, default: 0]
            guard count < limit else { return false }
            open[id] = count + 1
            return true
        }
        return granted ? Lease(quota: self, id: id) : nil
    }

    /// Streams open for `id`.
    func count(_ id: String) -> Int { open.withLock { $0[id, default: 0] } }

    /// Whether `acquire(id)` would get a place now (a `HEAD` answers as its `GET` would, taking none).
    func hasRoom(_ id: String) -> Bool { count(id) < limit }

    fileprivate func release(_ id: String) {
        open.withLock { open in
            let count = open[id, default: 0]
            open[id] = count > 1 ? count - 1 : nil
        }
    }

    /// One stream's place; released when the lease is deallocated.
    final class Lease: Sendable {
        private let quota: SubscriberQuota
        private let id: String

        fileprivate init(quota: SubscriberQuota, id: String) {
            self.quota = quota
            self.id = id
        }

        deinit { quota.release(id) }
    }
}
