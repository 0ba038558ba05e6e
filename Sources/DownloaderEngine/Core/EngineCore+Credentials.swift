import Foundation

// Coalescing keys with caller headers, and content-addressed reuse (issue 15).
extension EngineCore {
    /// The key `url` (normalised) is coalesced by for a caller with `headers`.
    func coalescingKey(url: String, headers: CallerHeaders?) -> CoalescingKey {
        let credential = headers.flatMap { $0.isEmpty ? nil : credentialKey.hash($0.canonicalBytes) }
        return CoalescingKey(url: url, ignoring: configuration.coalesceIgnoreQuery, credential: credential)
    }

    /// Under `lock`: a completed download whose file has digest `sha256` and that a caller with
    /// `credential` may receive (one fetched without headers, or with the same headers), looked up
    /// by that digest (`completedBySHA256`), not in a pass over every download.
    func reusable(sha256: String, credential: [UInt8]?) -> DownloadRecord? {
        guard let ids = completedBySHA256[sha256] else { return nil }
        var found: DownloadRecord?
        for id in ids.sorted() {  // The same answer every time, whatever the set's order.
            guard let record = byID[id], record.indexedSHA256 == sha256 else {
                completedBySHA256[sha256]?.remove(id)
                continue
            }
            if record.state == .completed, record.sha256 == sha256, record.finalPath != nil,
               record.key.credential == nil || record.key.credential == credential {
                found = record
                break
            }
        }
        if completedBySHA256[sha256]?.isEmpty == true { completedBySHA256[sha256] = nil }
        return found
    }

    /// Under `lock`: `record` completed (or came back completed: a restart, a takeover): found by
    /// its file's digest from now on (`reusable`).
    func indexCompleted(_ record: DownloadRecord) {
        guard let sha = record.sha256, record.indexedSHA256 != sha else { return }
        unindexCompleted(record)
        completedBySHA256[sha, default: []].insert(record.id)
        record.indexedSHA256 = sha
    }

    /// Under `lock`: `record` leaves memory, or its file (a restart after the file vanished).
    func unindexCompleted(_ record: DownloadRecord) {
        guard let sha = record.indexedSHA256 else { return }
        record.indexedSHA256 = nil
        completedBySHA256[sha]?.remove(record.id)
        if completedBySHA256[sha]?.isEmpty == true { completedBySHA256[sha] = nil }
    }

    /// Under `lock`: what a caller joining `record` brings: its headers (a credentialed download
    /// that lost them in a restart can go on) and, when the join resumes the download, its URL
    /// (with ignored query parameters it may carry a fresher signature than the stored one).
    func adoptJoiner(_ record: DownloadRecord, url: String, headers: CallerHeaders) {
        if record.isCredentialed, !headers.isEmpty { record.credentials = headers }
        if record.state == .paused || record.state == .failed, record.url != url { record.url = url }
    }
}
