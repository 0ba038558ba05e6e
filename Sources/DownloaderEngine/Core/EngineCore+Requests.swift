import Foundation

// Callers joining and leaving.
extension EngineCore {
    func request(_ request: DownloadRequest) throws(EngineError) -> Enqueued {
        let url = try URLNormalizer.normalize(request.url, allowCredentials: configuration.allowURLCredentials).get()
        var sha: String?
        if let given = request.sha256 {
            guard let normalized = ChecksumFormat.normalizedSHA256(given) else {
                throw .invalidChecksum("sha256 must be 64 hex digits")
            }
            sha = normalized
        }
        if let size = request.size, size < 0 { throw .invalidURL("size must not be negative") }
        let token = random.hex(byteCount: 16)
        let tokenHash = TokenHash(token: token)  // What the engine keeps: the hash, never the token.
        // A stored file's stat runs before the lock is taken: a slow disk never holds the engine.
        // (Checked again below that the path is still the one stat'ed.)
        let storedPath: String? = locked { byURL[url].flatMap { $0.state == .completed ? $0.finalPath : nil } }
        let storedFileVanished = storedPath.map { FileStore.fileSize($0) == nil } ?? false
        return try decide { () throws(EngineError) -> Enqueued in
            guard !shuttingDown else { throw .shuttingDown() }
            let now = clock.now()
            guard let record = byURL[url] else {
                return startDownload(url: url, request, sha: sha, token: token, tokenHash, at: now)
            }
            if record.tokens.count >= max(1, configuration.maxCallersPerDownload) {
                // Tokens of an ended download hold nothing (no transfer to keep alive): make room by
                // dropping one. A running download's callers are real: refuse the newcomer.
                guard record.state == .completed || record.state == .failed else {
                    throw .tooManyCallers("the download already has \(record.tokens.count) callers")
                }
                if let dropped = record.tokens.popFirst() { tokens[dropped] = nil }
            }
            try checkExpectations(record, sha: sha, size: request.size)
            if record.state == .completed, storedFileVanished, record.finalPath == storedPath {
                handle(.fileVanished, for: record)
            }
            if request.storage == .persistent && record.storage == .cache {
                // `persistent` wins; a completed cache file moves into the data area (served from where it is meanwhile).
                record.storage = .persistent
                placeFile(record)
            }
            record.updatedAt = now
            let coalesced = record.state != .paused && record.state != .failed
            if coalesced { stats.coalescedJoins += 1 }
            if record.state == .completed { record.lastAccess = now }
            handle(.callerJoined, for: record)
            addToken(tokenHash, to: record)
            save(record)  // Tokens are stored (hashed): they keep working after a restart.
            return Enqueued(token: token, snapshot: record.snapshot(), coalesced: coalesced)
        }
    }

    private func startDownload(url: String, _ request: DownloadRequest, sha: String?, token: String, _ tokenHash: TokenHash,
                               at now: Date) -> Enqueued {
        var id = random.hex(byteCount: 8)
        while byID[id] != nil { id = random.hex(byteCount: 8) }
        let (lifecycle, actions) = DownloadLifecycle.start()
        let record = DownloadRecord(id: id, url: url, storage: request.storage, lifecycle: lifecycle, now: now,
                                    tau: configuration.rateTimeConstant, progressInterval: configuration.progressInterval)
        record.expectedSHA256 = sha
        record.expectedSize = request.size
        byID[id] = record
        byURL[url] = record
        addToken(tokenHash, to: record)
        handle(actions, for: record)
        save(record)
        return Enqueued(token: token, snapshot: record.snapshot(), coalesced: false)
    }

    private func addToken(_ token: TokenHash, to record: DownloadRecord) {
        tokens[token] = record.id
        record.tokens.insert(token)
    }

    private func checkExpectations(_ record: DownloadRecord, sha: String?, size: Int64?) throws(EngineError) {
        if record.state == .failed {
            // A failed download starts afresh: the restarting request's expectations apply.
            record.expectedSHA256 = sha
            record.expectedSize = size
            return
        }
        if let sha {
            if let known = record.expectedSHA256 ?? (record.state == .completed ? record.sha256 : nil), known != sha {
                throw .conflict("sha256 differs from the existing download's")
            }
        }
        if let size {
            if let known = record.expectedSize ?? (record.state == .completed ? record.size : nil), known != size {
                throw .conflict("size differs from the existing download's")
            }
        }
        if record.state != .completed {
            if record.expectedSHA256 == nil { record.expectedSHA256 = sha }
            if record.expectedSize == nil { record.expectedSize = size }
        }
    }

    func cancel(token: String) -> DownloadSnapshot? {
        let token = TokenHash(token: token)
        return decide {
            guard let id = tokens.removeValue(forKey: token), let record = byID[id] else { return nil }
            record.tokens.remove(token)
            record.updatedAt = clock.now()
            handle(.callerLeft(remaining: record.tokens.count, partial: record.partialFacts), for: record)
            return record.snapshot()
        }
    }
}
