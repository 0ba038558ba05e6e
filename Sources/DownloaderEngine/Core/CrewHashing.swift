import Basics
import Foundation

/// The hashing of a segmented attempt once its own transfer ended (`SegmentCrew.mainEnded`): on a
/// queue of its own, the pieces written in place after the prefix are read back and hashed into the
/// partial in file order as the contiguous prefix grows (`PartialFile.absorb`), at least `step`
/// bytes at a time, so that little is left to hash after the last byte; each new length is told
/// (`flushed`: readers see that prefix). It stops hashing once told to stop (or the disk failed),
/// and ends the attempt (`finished`) once the crew's connections all ended (`finish`), after hashing
/// up to where the pieces then stand.
///
/// Threads: `grew`, `stop` and `finish` from any thread; the callbacks run on the hashing queue,
/// never under its lock. The partial is the hashing's until `finished` is called.
final class CrewHashing: @unchecked Sendable {
    /// The hashing waits for at least this many contiguous bytes (or the end).
    static let step: Int64 = 1 << 20

    typealias Outcome = Result<TransferSummary, TransferFailure>

    private let partial: PartialFile
    private let total: Int64
    private let flushed: @Sendable (Int64) -> Void
    private let finished: @Sendable (Outcome) -> Void
    private let queue = DispatchQueue(label: "segments.absorb")

    private let condition = NSCondition()
    // Guarded by `condition`.
    /// Where the contiguous prefix ends, as last told.
    private var target: Int64
    /// How far the partial is hashed.
    private var absorbed: Int64
    private var stopping = false
    private var outcome: Outcome?

    /// `partial` is hashed up to `absorbed`; the contiguous prefix ends at `target`.
    init(partial: PartialFile, absorbed: Int64, target: Int64, total: Int64,
         flushed: @escaping @Sendable (Int64) -> Void, finished: @escaping @Sendable (Outcome) -> Void) {
        self.partial = partial
        self.absorbed = absorbed
        self.target = target
        self.total = total
        self.flushed = flushed
        self.finished = finished
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
                condition.unlock()
                do throws(SystemError) {
                    try partial.absorb(upTo: target)
                    flushed(target)
                } catch {
                    failed = true  // Settling tries again, and reports the disk's failure.
                }
                condition.lock()
                if !failed { absorbed = target }
                continue
            }
            if let outcome {  // Every connection ended and nothing is left worth hashing.
                self.outcome = nil
                condition.unlock()
                finished(outcome)
                return
            }
            condition.wait()
        }
    }
}
