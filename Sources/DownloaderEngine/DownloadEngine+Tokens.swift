extension DownloadEngine {
    /// Which of `tokens` are still live caller tokens (not cancelled, dropped at the caller cap,
    /// forgotten with their download, or lost at a restart). One lock for the whole batch.
    public func liveTokens(among tokens: [String]) -> Set<String> {
        let hashed = tokens.map { ($0, TokenHash(token: $0)) }
        let local = core.locked { Set(hashed.filter { core.tokens[$0.1] != nil }.map(\.0)) }
        return local.count == tokens.count ? local : local.union(clusterReads?.liveTokens(among: hashed.filter { !local.contains($0.0) }) ?? [])
    }

    /// Which of `tokens` hold a place in `--max-downloads-per-client` (single process): live caller
    /// tokens of downloads that have not ended. A completed or failed download's tokens keep its
    /// file (or its restart) within reach and hold nothing, as at the per-download cap: a client
    /// that fetched a thousand files and never cancelled a token is not refused for it.
    public func tokensHoldingPlaces(among tokens: [String]) -> Set<String> {
        let hashed = tokens.map { ($0, TokenHash(token: $0)) }
        return core.locked {
            Set(hashed.filter { token in
                guard let id = core.tokens[token.1], let state = core.byID[id]?.state else { return false }
                return state != .completed && state != .failed
            }.map(\.0))
        }
    }

    /// Whether `token` is a live caller token of download `id` (what a private download's snapshot,
    /// progress stream and file are served on).
    public func isCaller(token: String, of id: String) -> Bool {
        let hashed = TokenHash(token: token)
        return core.locked { core.tokens[hashed].map { $0 == id } } ?? clusterReads?.isCaller(hashed, of: id) ?? false
    }

    /// Whether download `id` is private to its callers (made with caller headers). Cluster mode:
    /// throws `databaseUnavailable` when its row could not be read (never taken as public).
    public func isPrivate(id: String) throws(EngineError) -> Bool {
        if let local = core.locked({ core.byID[id]?.isCredentialed }) { return local }
        return try clusterReads?.isPrivate(id: id) ?? false
    }
}

extension DownloadEngine {
    /// A secret for `label` that no caller knows: the HMAC of `label` under the state area's
    /// `coalescing.key` (one per installation; the replicas of a cluster share it).
    public func derivedSecret(label: String) -> [UInt8] {
        core.credentialKey.hash(Array("download-service \(label)".utf8))
    }
}
