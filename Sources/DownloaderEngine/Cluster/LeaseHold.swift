import Foundation
import Synchronization

/// One lease this replica holds: its key and epoch, the download it covers, and when (monotonic
/// seconds) it may last be written under. Shared by the `LeaseKeeper` (renews it), the download's
/// writers (ask `mayWrite` before each write of a file or a row) and the engine. Once `stop`ped it
/// never allows a write again.
final class LeaseHold: @unchecked Sendable {
    let key: String
    let epoch: Int64
    private let state: Mutex<HeldLease>
    /// The local deadline as a bit pattern (read on every body write, without a lock).
    private let deadlineBits: Atomic<UInt64>
    private let stopped = Atomic<Bool>(false)
    private let ttl: Double
    /// The download covered (set once the download is known: a new one gets its id after the grant).
    /// Under the engine's lock.
    var id: String?
    /// The engine decided to write the final row, release and evict (under the engine's lock).
    var releasing = false
    /// A completed download stays held until then (monotonic; `LeaseLinger`), and a check is due
    /// then (under the engine's lock).
    var lingersUntil: Double?
    var lingerCheckDue = false

    init(key: String, epoch: Int64, acquiredAt: Double, ttl: Double) {
        self.key = key
        self.epoch = epoch
        self.ttl = ttl
        state = Mutex(HeldLease(key: key, epoch: epoch, renewedAt: acquiredAt))
        deadlineBits = Atomic((acquiredAt + ttl).bitPattern)
    }

    var lease: HeldLease { state.withLock { $0 } }

    /// The lease after a successful renewal (the keeper's thread).
    func update(_ lease: HeldLease) {
        state.withLock { $0 = lease }
        deadlineBits.store((lease.renewedAt + ttl).bitPattern, ordering: .releasing)
    }

    /// Whether a file or row may still be written at `now` (monotonic): not stopped, and before the
    /// local deadline (start of the last successful renewal + TTL).
    func mayWrite(now: Double) -> Bool {
        !stopped.load(ordering: .acquiring) && now < Double(bitPattern: deadlineBits.load(ordering: .acquiring))
    }

    /// Nothing more is written under this lease. true for the first call only.
    @discardableResult
    func stop() -> Bool {
        stopped.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// The partial this epoch writes (`EpochFiles.partial`), once the download is known.
    var partFile: String? { id.map { EpochFiles.partial(id: $0, epoch: epoch) } }
}
