import Foundation

// Callers joining and leaving.
extension EngineCore {
    /// Who joins a download: a caller by its token's hash (what is stored; the token itself never
    /// is), or a streaming reader whose interest lasts as long as it stays attached (not stored).
    enum Joiner {
        case caller(TokenHash)
        case reader
    }

    /// What joining gave: the download's record, whether an existing transfer or file was joined,
    /// and whether that file was found by its digest under another URL.
    struct Joined {
        var record: DownloadRecord
        var coalesced: Bool
        var reused = false
    }

    /// `request` as screened (`DownloadEngine.screened`: its URL normalised, credentials moved).
    func request(_ request: DownloadRequest) throws(EngineError) -> Enqueued {
        let token = random.hex(byteCount: 16)
        return try join(request, as: .caller(TokenHash(token: token))) { joined in
            Enqueued(token: token, snapshot: joined.record.snapshot(), coalesced: joined.coalesced, reused: joined.reused)
        }
    }

    /// Joins (or starts, or resumes) the download for the (screened) request's URL and headers as
    /// `joiner`, or a stored file with the asked `sha256`; `answer` reads what the caller needs
    /// under the same lock.
    func join<T>(_ request: DownloadRequest, as joiner: Joiner, answer: (Joined) -> T) throws(EngineError) -> T {
        let url = request.url
        let sha = try Self.normalizedSHA256(request.sha256)
        if let size = request.size, size < 0 { throw .invalidURL("size must not be negative") }
        let headers = try CallerHeaders.validate(request.headers).get()
        let key = coalescingKey(url: url, headers: headers)
        // Cluster mode: a new download starts only under the lease taken for it. When that lease was
        // stopped before the join (the database answered too late for it to be renewed), or the
        // download seen went away meanwhile, the lease is taken again (bounded).
        for _ in 0..<Self.joinAttempts {
            try clusterPrepare(key)
            defer { clusterAfterJoin(key) }
            if cluster != nil, let prepared = locked({ hooks.leasePrepared }) { prepared(key.leaseName) }
            if let answered = try join(request, url: url, key: key, headers: headers, sha: sha, as: joiner, answer: answer) {
                return answered
            }
        }
        throw .databaseUnavailable()
    }

    static let joinAttempts = 3

    /// A request's `sha256` in lower case; `invalidChecksum` when it is not 64 hex digits.
    static func normalizedSHA256(_ given: String?) throws(EngineError) -> String? {
        guard let given else { return nil }
        guard let normalized = ChecksumFormat.normalizedSHA256(given) else { throw .invalidChecksum("sha256 must be 64 hex digits") }
        return normalized
    }

    /// `join`'s one attempt under the lease `clusterPrepare` took; nil: a new download would start
    /// without its lease.
    private func join<T>(_ request: DownloadRequest, url: String, key: CoalescingKey, headers: CallerHeaders, sha: String?,
                         as joiner: Joiner, answer: (Joined) -> T) throws(EngineError) -> T? {
        // A stored file's stat runs before the lock is taken: a slow disk never holds the engine.
        // (Checked again below that the path is still the one stat'ed.)
        let (storedPath, storedSize, reusePath, reuseSize): (String?, Int64?, String?, Int64?) = locked {
            let own = byURL[key]
            let stored = own.flatMap { $0.state == .completed ? $0.finalPath : nil }
            // The URL's own stored file answers, unless it is of another digest than asked: then
            // a stored file of that digest does (else the conflict below).
            let ownAnswers = stored != nil && (sha == nil || own?.sha256 == sha)
            let reuse = ownAnswers ? nil : sha.flatMap { reusable(sha256: $0, credential: key.credential) }
            return (stored, own?.size, reuse?.finalPath, reuse?.size)
        }
        // Gone, or changed on disk (another size): fetched anew. The same for a file that would be
        // reused: never answered `completed` from a file that is not the one verified.
        func vanished(_ path: String, _ size: Int64?) -> Bool { size.map { FileStore.isSurelyNot(path, size: $0) } ?? true }
        let storedFileVanished = storedPath.map { vanished($0, storedSize) } ?? false
        let reuseFileVanished = reusePath.map { vanished($0, reuseSize) } ?? false
        return try decide { () throws(EngineError) -> T? in
            guard !shuttingDown else { throw .shuttingDown() }
            let now = clock.now()
            var found = byURL[key]
            var reused = false
            if let sha, found?.state != .completed || found?.sha256 != sha, reusePath != nil,
               let stored = reusable(sha256: sha, credential: key.credential), stored.finalPath == reusePath {
                if reuseFileVanished {
                    completedFileChanged(stored)  // It fails (as its file route would find); this URL is fetched.
                } else {
                    // Content-addressed reuse: the stored file answers; this URL is not recorded.
                    found = stored
                    reused = true
                }
            }
            if cluster == nil, let failed = found, failed.state == .failed, failed.interest > 0,
               failed.expectedSHA256 != sha || failed.expectedSize != request.size {
                // Its callers' verdict stands: restarted in place, the download could complete
                // unverified against what they asked for (or fail again against what the newcomer
                // did not). A newcomer with other expectations gets a download of its own; the
                // failed one keeps its callers until they leave or it is forgotten. (Cluster mode
                // keeps one download per lease key: there it restarts in place.)
                found = nil
                sharedKeys.insert(key)
            }
            guard let record = found else {
                guard clusterLeaseReady(key) else { return nil }
                let record = startDownload(url: url, key: key, headers: headers, request, sha: sha, as: joiner, at: now)
                return answer(Joined(record: record, coalesced: false))
            }
            let full = record.interest >= max(1, configuration.maxCallersPerDownload)
            // Tokens of an ended download hold nothing (no transfer to keep alive): room is made by
            // dropping one (below, once the request is known to join). A running download's
            // callers are real: the newcomer is refused.
            if full && record.state != .completed && record.state != .failed {
                throw EngineError.tooManyCallers("the download already has \(record.interest) callers").about(record.id)
            }
            try checkExpectations(record, sha: sha, size: request.size)
            if full, let dropped = record.tokens.popFirst() {
                tokens[dropped] = nil
                if let tell = hooks.tokenDropped { effects.append { tell(dropped) } }
            }
            if record.state == .completed, storedFileVanished, record.finalPath == storedPath {
                completedFileChanged(record)  // Failed (told, stored) before this caller starts it anew.
            }
            if request.storage == .persistent && record.storage == .cache {
                // `persistent` wins; a completed cache file moves into the data area (served from where it is meanwhile).
                record.storage = .persistent
                placeFile(record)
            }
            record.updatedAt = now
            if !reused { adoptJoiner(record, url: url, headers: headers) }
            let coalesced = record.state != .paused && record.state != .failed
            if coalesced { stats.coalescedJoins += 1 }
            if record.state == .completed { record.lastAccess = now }
            askConnections(record, request)
            tellJoining(record, request, as: joiner)
            if record.interest == 0 { record.clientGroup = request.clientGroup }  // Nobody else's any more: the newcomer's.
            add(joiner, to: record)  // First: what the join tells watchers counts the newcomer.
            handle(.callerJoined, for: record)
            save(record)  // Tokens are stored (hashed): they keep working after a restart.
            return answer(Joined(record: record, coalesced: coalesced, reused: reused))
        }
    }

    private func startDownload(url: String, key: CoalescingKey, headers: CallerHeaders, _ request: DownloadRequest, sha: String?,
                               as joiner: Joiner, at now: Date) -> DownloadRecord {
        var id = random.hex(byteCount: 8)
        while byID[id] != nil { id = random.hex(byteCount: 8) }
        let (lifecycle, actions) = DownloadLifecycle.start()
        let record = DownloadRecord(id: id, url: url, storage: request.storage, lifecycle: lifecycle, now: now,
                                    tau: configuration.rateTimeConstant, progressInterval: configuration.progressInterval,
                                    ignoring: configuration.coalesceIgnoreQuery, credential: key.credential)
        if !headers.isEmpty { record.credentials = headers }
        record.expectedSHA256 = sha
        record.expectedSize = request.size
        record.clientGroup = request.clientGroup
        askConnections(record, request)
        byID[id] = record
        byURL[record.key] = record
        clusterAttach(record)
        add(joiner, to: record)
        tellCreated(record, request, as: joiner)
        handle(actions, for: record)
        publishCreated(record)  // after its first decisions (queued or downloading); none publishes
        save(record)
        return record
    }

    private func add(_ joiner: Joiner, to record: DownloadRecord) {
        switch joiner {
        case .caller(let token):
            tokens[token] = record.id
            record.tokens.insert(token)
        case .reader:
            record.readers += 1
            record.attempt?.followed.store(true, ordering: .relaxed)
            if record.tail == nil {
                let tail = DownloadTail(record.tailState(partialPath: partialPath(of: record)), teller: tailTeller)
                let stage = record.lifecycle.attempt?.stage
                tail.setFinishing(stage == .settling || stage == .publishing)
                record.tail = tail
            }
        }
    }

    private func checkExpectations(_ record: DownloadRecord, sha: String?, size: Int64?) throws(EngineError) {
        if record.state == .failed {
            // A failed download starts afresh: the restarting request's expectations apply (its
            // callers, if any, asked for the same ones: `join` gives other expectations a download
            // of their own).
            record.expectedSHA256 = sha
            record.expectedSize = size
            return
        }
        if let conflict = expectationConflict(record, sha: sha, size: size) { throw conflict }
        guard record.state != .completed else { return }
        if sha != nil && record.expectedSHA256 == nil { record.expectedSHA256 = sha }
        if size != nil && record.expectedSize == nil && record.expectedTotal == nil { record.expectedSize = size }
    }

    /// Under `lock`: why a request with these expectations may not join `record` (nil: it may). A
    /// failed download takes any (it starts afresh).
    func expectationConflict(_ record: DownloadRecord, sha: String?, size: Int64?) -> EngineError? {
        guard record.state != .failed else { return nil }
        // Being published, the file's digest and size are known as once it completed.
        let file = record.state == .completed ? (sha256: record.sha256, size: record.size)
            : (sha256: record.publishing?.sha256, size: record.publishing?.size ?? record.expectedTotal)
        if let sha, let known = record.expectedSHA256 ?? file.sha256, known != sha {
            return EngineError.conflict("sha256 differs from the existing download's").about(record.id)
        }
        if let size, let known = record.expectedSize ?? file.size, known != size {
            return EngineError.conflict("size differs from the existing download's").about(record.id)
        }
        guard record.state != .completed else { return nil }
        // A newcomer's expectations bind the download only when nobody else holds it: imposed on
        // callers who did not ask for them, a wrong sha256 or size would fail their download and
        // throw its bytes away.
        let newSHA = sha != nil && record.expectedSHA256 == nil
        let newSize = size != nil && record.expectedSize == nil && record.expectedTotal == nil
        if (newSHA || newSize) && record.interest > 0 {
            return EngineError.conflict("the download is shared with callers that gave no \(newSHA ? "sha256" : "size"); ask without it and compare what the download reports")
                .about(record.id)
        }
        return nil
    }

    func cancel(token: String) -> DownloadSnapshot? {
        let token = TokenHash(token: token)
        return decide {
            guard let id = tokens.removeValue(forKey: token), let record = byID[id] else { return nil }
            record.tokens.remove(token)
            record.updatedAt = clock.now()
            record.story.pauseReason = .callerCancelled
            handle(.callerLeft(remaining: record.interest, partial: record.partialFacts), for: record)
            return record.snapshot()
        }
    }

    /// A streaming reader of download `id` let go; `tail`: the view it was given (of the record it
    /// joined: one adopted again meanwhile in cluster mode has readers of its own).
    func detachReader(id: String, tail: DownloadTail) {
        decide {
            guard let record = byID[id], record.tail === tail, record.readers > 0 else { return }
            record.readers -= 1
            record.story.pauseReason = .readerLeft
            handle(.callerLeft(remaining: record.interest, partial: record.partialFacts), for: record)
        }
    }
}
