import Basics
import Foundation

/// The hashing of a segmented attempt once its own transfer ended (`SegmentCrew.mainEnded`): on a
/// queue of its own, the pieces written in place after the prefix are read back and hashed into the
/// partial in file order as the contiguous prefix grows (`PartialFile.absorb`), at least `step`
/// bytes at a time, so that little is left to hash after the last byte; each new length is told
/// (`flushed`: readers see that prefix). It stops hashing once told to stop (between two reads of
/// at most `readBackAtOnce`) or once the disk failed,
/// and ends the attempt (`finished`) once the crew's connections all ended (`finish`), after hashing
/// up to where the pieces then stand.
///
/// A fetch's buffer written exactly where the contiguous prefix ended (the piece at the front of
/// the file's pieces) is handed over as it lands (`landed`, at most `maxLanded` at once) and hashed
/// from memory instead of read back; the buffer then goes back to the crew's `GatherBuffers`.
///
/// Threads: `grew`, `stop` and `finish` from any thread; the callbacks run on the hashing queue,
/// never under its lock. The partial is the hashing's until `finished` is called.
final class CrewHashing: @unchecked Sendable {
    /// The hashing waits for at least this many contiguous bytes (or the end).
    static let step: Int64 = 1 << 20

    /// Bytes read back and hashed at once at most: a stop is noticed between two such reads, so a
    /// pause does not wait for a backlog of pieces (gigabytes when hashing lagged) to be hashed.
    static let readBackAtOnce: Int64 = 8 << 20

    /// Landed buffers held at most (each `WriteBatching` capacity, 1 MiB): a bounded handful.
    static let maxLanded = 2

    typealias Outcome = Result<TransferSummary, TransferFailure>

    /// A buffer whose `count` bytes from `skip` are in the file at `offset`.
    struct Landed {
        let buffer: UnsafeMutableRawBufferPointer
        let skip: Int
        let count: Int
        let offset: Int64
        var end: Int64 { offset + Int64(count) }
    }

    private let partial: PartialFile
    private let total: Int64
    private let readBackAtOnce: Int64
    private let flushed: @Sendable (Int64) -> Void
    private let finished: @Sendable (Outcome) -> Void
    private let giveBack: @Sendable (UnsafeMutableRawBufferPointer) -> Void
    private let queue = DispatchQueue(label: "segments.absorb")

    private let condition = NSCondition()
    // Guarded by `condition`.
    /// Where the contiguous prefix ends, as last told.
    private var target: Int64
    /// How far the partial is hashed.
    private var absorbed: Int64
    private var stopping = false
    private var outcome: Outcome?
    /// Buffers handed over, in file order; none once the hashing ended.
    private var landed: [Landed] = []
    private var ended = false

    /// `partial` is hashed up to `absorbed`; the contiguous prefix ends at `target`.
    init(partial: PartialFile, absorbed: Int64, target: Int64, total: Int64, readBackAtOnce: Int64 = CrewHashing.readBackAtOnce,
         flushed: @escaping @Sendable (Int64) -> Void, finished: @escaping @Sendable (Outcome) -> Void,
         giveBack: @escaping @Sendable (UnsafeMutableRawBufferPointer) -> Void) {
        self.partial = partial
        self.readBackAtOnce = readBackAtOnce
        self.absorbed = absorbed
        self.target = target
        self.total = total
        self.flushed = flushed
        self.finished = finished
        self.giveBack = giveBack
    }

    func start() {
        queue.async { self.run() }
    }

    /// The contiguous prefix now ends at `contiguous`.
    func grew(to contiguous: Int64) {
        condition.withLock {
            guard contiguous > target else { return }
            target = contiguous
            condition.signal()
        }
    }

    /// The `count` bytes from `skip` in `buffer` were written in place at `offset`, where the
    /// contiguous prefix ended: true when the hashing takes the buffer (hashed from it, then given
    /// back); false when it holds `maxLanded` already or stopped (the caller keeps it; the bytes
    /// are read back).
    func landed(_ buffer: UnsafeMutableRawBufferPointer, skip: Int = 0, count: Int, at offset: Int64) -> Bool {
        condition.withLock {
            guard !ended, !stopping, landed.count < Self.maxLanded, count > 0 else { return false }
            landed.append(Landed(buffer: buffer, skip: skip, count: count, offset: offset))
            condition.signal()
            return true
        }
    }

    /// Hash no further (the attempt stops: pause, shutdown, failure, another version).
    func stop() {
        condition.withLock {
            stopping = true
            condition.broadcast()
        }
    }

    /// Every connection ended with `outcome`, the prefix ending at `contiguous`: the rest worth
    /// hashing is hashed, then the attempt ends.
    func finish(_ outcome: Outcome, contiguous: Int64) {
        condition.withLock {
            target = max(target, contiguous)
            self.outcome = outcome
            condition.broadcast()
        }
    }

    private func run() {
        var failed = false
        condition.lock()
        while true {
            let target = target
            let due = target - absorbed >= Self.step || target == total || outcome != nil
            if !failed && !stopping && target > absorbed && due {
                // A landed buffer no longer at the hashed front (never expected) is read back instead.
                while let first = landed.first, first.offset < absorbed {
                    giveBack(landed.removeFirst().buffer)
                }
                let direct = landed.first.flatMap { $0.end <= target && $0.offset - absorbed <= readBackAtOnce ? $0 : nil }
                let reach = direct?.end ?? min(target, absorbed + readBackAtOnce)
                condition.unlock()
                do throws(SystemError) {
                    if let direct {
                        try partial.absorb(upTo: direct.offset)  // The gap before it (none when it landed at the front).
                        try partial.absorb(UnsafeRawBufferPointer(start: direct.buffer.baseAddress! + direct.skip, count: direct.count))
                    } else {
                        try partial.absorb(upTo: reach)
                    }
                    flushed(reach)
                } catch {
                    failed = true  // Settling tries again, and reports the disk's failure.
                }
                condition.lock()
                if direct != nil { giveBack(landed.removeFirst().buffer) }
                if !failed { absorbed = reach }
                continue
            }
            if let outcome {  // Every connection ended and nothing is left worth hashing.
                self.outcome = nil
                ended = true
                let held = landed
                landed = []
                condition.unlock()
                for chunk in held { giveBack(chunk.buffer) }
                finished(outcome)
                return
            }
            condition.wait()
        }
    }
}
