import Foundation
import Synchronization

/// One download as the engine holds it: its lifecycle (the control state, `DownloadLifecycle`) and
/// its data (the partial, the result, progress). Only touched under the engine's lock.
final class DownloadRecord {
    let id: String
    /// Unique among the records of this process: a download evicted and adopted again (cluster
    /// mode) is a new record under the same id, whose timers are its own.
    let incarnation = DownloadRecord.incarnations.add(1, ordering: .relaxed).newValue
    private static let incarnations = Atomic<UInt64>(0)
    /// Normalised URL: the first caller's, or (with ignored query parameters) the one of the
    /// caller that last resumed the download.
    var url: String
    /// What callers are coalesced by (`CoalescingKey`): fixed for the download's life.
    let key: CoalescingKey
    /// Query parameters redacted wherever the URL is shown (`--coalesce-ignore-query`).
    let ignoredQuery: Set<String>
    /// The caller's headers of a credentialed download (`key.credential` is their keyed hash):
    /// in memory only, never stored or shown; nil after a restart until a caller brings them again.
    var credentials: CallerHeaders?
    var storage: StorageClass
    var lifecycle: DownloadLifecycle
    /// The group of the client that asked first (`DownloadRequest.clientGroup`), stored with the
    /// download: a restart or a takeover keeps its place among clients.
    var clientGroup: String?
    /// The digest under which `EngineCore.completedBySHA256` holds this download (nil: not held).
    var indexedSHA256: String?
    var expectedSHA256: String?
    var expectedSize: Int64?
    /// Live callers' token hashes.
    var tokens: Set<TokenHash> = []
    var createdAt: Date
    var updatedAt: Date
    /// Last time the stored file was requested or served (LRU purging).
    var lastAccess: Date

    // The partial file.
    /// Settled bytes in the partial (no attempt writing).
    var keptBytes: Int64 = 0
    /// Bytes of the partial known to be durable; what the state store records.
    var durableOffset: Int64 = 0
    /// Kept bytes were dropped (a restart) and the stored row may still name them: the next
    /// attempt asks the origin only once a commit replaced that row (`EngineCore.recordDroppedBytes`),
    /// or a crash could leave the new version's bytes under the old one's offset and validator.
    var droppedBytesUncommitted = false
    /// The hash of exactly `keptBytes` (in-process resumes skip re-reading the file, if unchanged).
    var keptHash: KeptHash?
    var validator: Validator?
    var expectedTotal: Int64?
    /// The attempt the lifecycle waits on (`lifecycle.attempt`), running or draining.
    var attempt: Attempt?
    /// Cluster mode: the lease this replica holds on the download (nil in a single process).
    var lease: LeaseHold?
    /// Bytes shown in snapshots.
    var bytesWritten: Int64 = 0

    // Result.
    var fileName: String?
    var finalPath: String?
    var sha256: String?
    var size: Int64?
    var error: DownloadFailure?
    /// A verified, fsynced file is being renamed into its area (stored as the download's
    /// `finalPath`/`sha256`/`size` while the state is not yet `completed`).
    var publishing: PublishIntent?

    // Progress.
    var rate: RateEstimator
    var progress: ProgressThrottle

    // Streaming readers (`DownloadReader`): interest that lasts as long as their connection, never stored.
    var readers = 0
    /// What readers follow; made when the first one attaches.
    var tail: DownloadTail?
    /// The origin's `Content-Type` of the accepted body (stored).
    var contentType: String?
    /// Versions of the body so far (a new one whenever it starts again from 0; stored, so a
    /// version's ETag outlives a restart) and heads accepted (since the engine started).
    var generation: UInt64 = 0
    var heads: UInt64 = 0
    /// When the body last started again with different content (a version after the first; stored).
    var changedAt: Date?
    /// Bytes of the current version written to the partial file (readable by readers).
    var flushedBytes: Int64 = 0
    /// The partial file of the current version.
    var partialIdentity: FileIdentity?
    /// The last attempt ended because the origin sent nothing for the stall timeout.
    var lastAttemptStalled = false
    /// What the log's story of the download needs (`EngineCore+Story`).
    var story = StoryLedger()

    // Segmented fetch (`EngineCore+Segments`).
    /// The most connections any caller asked for (1: one), and what the last accepted head allowed.
    var connectionsRequested = 1
    var connectionsGranted = 1
    /// A segment met another version of the file, or the origin refused a second connection: this
    /// download goes on with one connection.
    var segmentsRefused = false
    /// Whether the first response of this version (a whole body) offered byte ranges with a strong
    /// validator (`SegmentPlanner.allowsSegments`); nil until one is seen (stored, with
    /// `segmentsRefused`). A later 206 to a resume does not allow segments its first response did not.
    var rangesOffered: Bool?
    /// An attempt's answer made its kept bytes unusable (a restart): the next body from 0 replaces
    /// them, and is told as a restart although the attempt starts with nothing kept.
    var restartPending = false
    /// The segments of the partial beyond its prefix, as far as they are durable (stored), or as
    /// far as they are written once an attempt settled (its sync made them durable); nil: none.
    var segments: [Segment]?
    /// Bytes the running answer still repeats of the kept ones before the file grows (a resume an
    /// origin that ignores `Range` answered whole, `KeptBytesSkip`): they count in the ETA.
    var repeating: Int64 = 0

    init(id: String, url: String, storage: StorageClass, lifecycle: DownloadLifecycle, now: Date, tau: Double,
         progressInterval: Double, ignoring: Set<String> = [], credential: [UInt8]? = nil) {
        self.id = id
        self.url = url
        self.key = CoalescingKey(url: url, ignoring: ignoring, credential: credential)
        self.ignoredQuery = ignoring
        self.storage = storage
        self.lifecycle = lifecycle
        self.createdAt = now
        self.updatedAt = now
        self.lastAccess = now
        self.rate = RateEstimator(tau: tau)
        self.progress = ProgressThrottle(interval: progressInterval)
    }

    var state: DownloadState { lifecycle.state }

    /// The URL as snapshots and log lines show it (ignored query parameters redacted).
    var shownURL: String { QueryParameters.redacting(url, names: ignoredQuery) }

    /// Private to its callers: made with headers (`CallerHeaders`).
    var isCredentialed: Bool { key.credential != nil }

    /// A credentialed download that lost its headers in a restart: it waits, paused, for a caller
    /// who brings the same ones.
    var waitsForCredentials: Bool { isCredentialed && credentials == nil && state != .completed }

    /// The current attempt's body is being written (or was, and is being settled).
    var isTransferring: Bool { state == .downloading && attempt?.acceptedOffset != nil }

    /// The attempt the lifecycle calls `serial`, when it is the one the record holds.
    func attempt(_ serial: UInt64) -> Attempt? {
        attempt?.serial == serial ? attempt : nil
    }

    var partialFacts: PartialFacts { PartialFacts(keptBytes: keptBytes, resumable: validator != nil) }

    /// Callers and readers together (the per-download cap counts both).
    var interest: Int { tokens.count + readers }

    /// What a reader sees now (`partialPath`: where the partial file lives).
    func tailState(partialPath: String) -> TailState {
        var t = TailState()
        t.heads = heads
        t.generation = generation
        t.validator = validator?.etag ?? validator?.lastModified
        t.validatorIsETag = validator?.etag != nil
        t.contentType = contentType
        t.fileName = fileName ?? FileNameSanitizer.fallback
        t.total = state == .completed ? size : expectedTotal
        t.publishingPath = state == .completed ? nil : publishing?.path
        switch state {
        case .completed:
            t.phase = .completed
            t.available = size ?? 0
            t.path = finalPath ?? ""
            t.sha256 = sha256
        case .failed:
            t.phase = .failed(error ?? DownloadFailure(code: .unknown, message: "failed"), stalled: lastAttemptStalled)
            // What of this version is in the file (readers send it, short of the last byte, before aborting).
            t.available = flushedBytes
            t.path = partialPath
            t.file = partialIdentity
        case .downloading where isTransferring && lifecycle.attempt?.stage == .transferring:
            t.phase = .flowing
            t.available = flushedBytes
            t.path = partialPath
            t.file = partialIdentity
        case .queued, .downloading, .paused:
            t.phase = .waiting
            t.path = partialPath
        }
        return t
    }

    /// What every completion records: the file, its digest and size, and no kept bytes or error.
    func setCompleted(path: String, sha256: String, size: Int64) {
        publishing = nil
        finalPath = path
        self.sha256 = sha256
        self.size = size
        expectedTotal = size
        keptBytes = 0
        durableOffset = 0
        keptHash = nil
        segments = nil
        bytesWritten = size
        error = nil
    }

    func snapshot() -> DownloadSnapshot {
        let written = state == .completed ? (size ?? bytesWritten) : bytesWritten
        let expected = state == .completed ? size : expectedTotal
        var fraction: Double?
        if let expected, expected > 0 { fraction = min(1, Double(written) / Double(expected)) } else if expected == 0 { fraction = 1 }
        let transferring = isTransferring
        return DownloadSnapshot(
            id: id, url: shownURL, state: state, storage: storage,
            bytesWritten: written, bytesExpected: expected, fraction: fraction,
            bytesPerSecond: transferring ? rate.rate : 0,
            etaSeconds: transferring ? rate.eta(remaining: expected.map { $0 - written + repeating }) : nil,
            callers: tokens.count + readers,
            resumable: state != .completed && validator != nil,
            createdAt: createdAt, updatedAt: updatedAt,
            sha256: state == .completed ? sha256 : nil, size: state == .completed ? size : nil,
            path: state == .completed ? finalPath : nil, fileName: fileName, error: error,
            isPrivate: isCredentialed, reason: reason,
            connections: connectionCounts,
            pausedBy: state == .paused ? (lifecycle.held ? .operator : .callers) : nil, changedAt: changedAt)
    }

    /// Why it waits: a paused download for its callers' credentials, a running one for disk space.
    private var reason: String? {
        if state == .paused && waitsForCredentials { return "credentials_required" }
        return lifecycle.waitsForSpace ? DownloadFailure.Code.diskFull.rawValue : nil
    }

    /// Shown once a caller asked for more than one connection.
    private var connectionCounts: ConnectionCounts? {
        guard connectionsRequested > 1 else { return nil }
        let active = isTransferring ? (attempt?.crew?.active ?? 1) : 0
        return ConnectionCounts(requested: connectionsRequested, granted: connectionsGranted, active: active)
    }

    func stored() -> StoredDownload {
        StoredDownload(
            id: id, url: url, storage: storage, state: state, validator: validator, expectedTotal: expectedTotal,
            verifiedOffset: attempt == nil ? min(keptBytes, durableOffset) : durableOffset,
            expectedSHA256: expectedSHA256, expectedSize: expectedSize, fileName: fileName,
            finalPath: publishing?.path ?? finalPath, sha256: publishing?.sha256 ?? sha256, size: publishing?.size ?? size, createdAt: createdAt, updatedAt: updatedAt, lastAccess: lastAccess, error: error,
            contentType: contentType, generation: generation, changedAt: changedAt,
            connections: connectionsRequested, segments: validator == nil ? nil : segments,
            rangesOffered: rangesOffered, segmentsRefused: segmentsRefused, tokens: tokens,
            credentialKey: key.credential, held: lifecycle.held, clientGroup: clientGroup)
    }

    convenience init(stored entry: StoredDownload, tau: Double, progressInterval: Double, ignoring: Set<String> = []) {
        self.init(id: entry.id, url: entry.url, storage: entry.storage, lifecycle: DownloadLifecycle(restoring: entry.state, held: entry.held),
                  now: entry.createdAt, tau: tau, progressInterval: progressInterval, ignoring: ignoring,
                  credential: entry.credentialKey)
        updatedAt = entry.updatedAt
        lastAccess = entry.lastAccess
        validator = entry.validator
        expectedTotal = entry.expectedTotal
        keptBytes = entry.verifiedOffset
        durableOffset = entry.verifiedOffset
        bytesWritten = entry.verifiedOffset
        expectedSHA256 = entry.expectedSHA256
        expectedSize = entry.expectedSize
        fileName = entry.fileName
        finalPath = entry.finalPath
        sha256 = entry.sha256
        size = entry.size
        error = entry.error
        contentType = entry.contentType
        generation = entry.generation
        changedAt = entry.changedAt
        tokens = entry.tokens
        connectionsRequested = max(1, entry.connections)
        segments = entry.segments
        rangesOffered = entry.rangesOffered
        segmentsRefused = entry.segmentsRefused
        clientGroup = entry.clientGroup
    }

    /// A stored download with pieces kept was granted what they warrant: shown again after a
    /// restart or a takeover (`connectionsGranted` is not stored), not 1 until the next head.
    func restoreGranted(limit: Int) {
        guard let segments, segments.count > 1 else { return }
        connectionsGranted = min(SegmentPlanner.granted(requested: connectionsRequested, limit: limit), segments.count)
    }
}

/// A completed file about to be renamed into its storage area: where, and what it holds.
struct PublishIntent: Equatable {
    var path: String
    var sha256: String
    var size: Int64
}
