import Foundation

/// One download as the state store keeps it: what survives a restart. `verifiedOffset` is the
/// durable length of `partials/<id>.part` (a start-up cuts the file back to it). A completed
/// download names its file in `finalPath` (with `sha256` and `size`); a not-yet-completed one with
/// `finalPath`, `sha256` and `size` is a publishing intent (the file was verified and fsynced; the
/// start-up finishes the rename). Caller tokens are kept as their hashes only.
struct StoredDownload: Sendable, Equatable {
    var id: String
    var url: String
    var storage: StorageClass
    var state: DownloadState
    var validator: Validator?
    /// Total size announced by the origin, when known.
    var expectedTotal: Int64?
    /// Bytes of the partial known to be on stable storage (never ahead of durable data).
    var verifiedOffset: Int64
    var expectedSHA256: String?
    var expectedSize: Int64?
    var fileName: String?
    var finalPath: String?
    var sha256: String?
    var size: Int64?
    var createdAt: Date
    var updatedAt: Date
    var lastAccess: Date
    var error: DownloadFailure?
    /// The origin's `Content-Type` of the body, the body's version (a new one whenever it started
    /// again from 0; `/fetch` names it in its ETag when the origin gave none) and when it last
    /// changed (a version after the first).
    var contentType: String? = nil
    var generation: UInt64 = 0
    var changedAt: Date? = nil
    /// Segmented fetch: the connections asked for, and the segments with their durable offsets
    /// (the first is the prefix, durable up to `verifiedOffset`); nil when fetched on one connection.
    var connections: Int = 1
    var segments: [Segment]? = nil
    /// Whether this version's first answer offered byte ranges with a strong validator (nil: not
    /// seen), and whether the origin refused a second connection or a piece met another version:
    /// a restart keeps the download on one connection as the running engine did.
    var rangesOffered: Bool? = nil
    var segmentsRefused = false
    /// The live callers' token hashes.
    var tokens: Set<TokenHash> = []
    /// A credentialed download's keyed hash of its caller's headers (`CoalescingKey.credential`);
    /// the headers themselves are never stored.
    var credentialKey: [UInt8]? = nil
    /// The operator holds the download paused (table `operator_holds`).
    var held = false
    /// Cluster mode: the lease whose epoch must still hold for this row to be written (nil: none).
    var fence: LeaseFence? = nil
    /// The group of the client that asked first (`DownloadRecord.clientGroup`): its place in the
    /// transfer queue's fairness and in the bound of partials it left, after a restart or a
    /// takeover too. An address or network, never a credential.
    var clientGroup: String? = nil
}
