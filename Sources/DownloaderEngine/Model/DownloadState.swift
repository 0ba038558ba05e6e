/// Where a download is in its life.
public enum DownloadState: String, Sendable, Codable, CaseIterable {
    /// Waiting for a transfer slot (shared fairly among clients).
    case queued
    /// A transfer is running (or backing off between retries).
    case downloading
    /// No caller is interested; the partial file is kept for a later resume.
    case paused
    /// The file is verified and stored.
    case completed
    /// Ended with an error (see `DownloadSnapshot.error`).
    case failed
}

/// Where a completed file is stored.
public enum StorageClass: String, Sendable, Codable, CaseIterable {
    /// Purgeable: `$XDG_CACHE_HOME/download-service`.
    case cache
    /// Kept until deleted: `$XDG_DATA_HOME/download-service`.
    case persistent
}
