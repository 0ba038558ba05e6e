import Foundation

// Coalescing keys with caller headers, and content-addressed reuse (issue 15).
extension EngineCore {
    /// The key `url` (normalised) is coalesced by for a caller with `headers`.
    func coalescingKey(url: String, headers: CallerHeaders?) -> CoalescingKey {
        let credential = headers.flatMap { $0.isEmpty ? nil : credentialKey.hash($0.canonicalBytes) }
        return CoalescingKey(url: url, ignoring: configuration.coalesceIgnoreQuery, credential: credential)
    }

    /// Under `lock`: a completed download whose file has digest `sha256` and that a caller with
    /// `credential` may receive (one fetched without headers, or with the same headers). One pass
    /// over the downloads, only for a request that names a digest its own URL does not hold.
    func reusable(sha256: String, credential: [UInt8]?) -> DownloadRecord? {
        byID.values.first { record in
            record.state == .completed && record.sha256 == sha256 && record.finalPath != nil
                && (record.key.credential == nil || record.key.credential == credential)
        }
    }

    /// Under `lock`: what a caller joining `record` brings: its headers (a credentialed download
    /// that lost them in a restart can go on) and, when the join resumes the download, its URL
    /// (with ignored query parameters it may carry a fresher signature than the stored one).
    func adoptJoiner(_ record: DownloadRecord, url: String, headers: CallerHeaders) {
        if record.isCredentialed, !headers.isEmpty { record.credentials = headers }
        if record.state == .paused || record.state == .failed, record.url != url { record.url = url }
    }
}
