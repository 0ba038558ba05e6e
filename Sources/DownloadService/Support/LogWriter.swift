import Basics
import Foundation

/// Writes log lines to a file descriptor (stderr) from a thread of its own, so that no event loop
/// or request ever waits for the log's pipe or disk. Lines are gathered for up to `batchDelay`
/// after the first one and go out in one `write`: under load that is one wake-up and one write per
/// batch instead of a futex wake and a write per request. Bounded: while `capacity` bytes are
/// waiting, further lines are dropped and counted, and a warning saying how many were lost is
/// written as soon as there is room again. Reserved lines (downloads' stories) are never dropped:
/// they may fill `reserve` bytes more, and beyond that their caller waits until the writer has
/// taken what is waiting (a log nobody reads slows downloads' steps down instead of losing them).
final class LogWriter: @unchecked Sendable {
    // @unchecked: every stored var is guarded by `condition`.
    private let condition = MonotonicCondition()
    private var pending: [UInt8] = []
    private var dropped = 0
    private var writing = false
    private var flushing = 0
    /// Reserved lines waiting for room.
    private var waitingForRoom = 0
    private let fileDescriptor: Int32
    let capacity: Int
    let reserve: Int
    let batchDelay: TimeInterval

    /// Starts the writer thread; it lives as long as the process.
    init(fileDescriptor: Int32 = 2, capacity: Int = 1 << 20, reserve: Int = 4 << 20, batchDelay: TimeInterval = 0.005) {
        self.fileDescriptor = fileDescriptor
        self.capacity = capacity
        self.reserve = reserve
        self.batchDelay = batchDelay
        let thread = Thread { [self] in run() }
        thread.name = "log-writer"
        thread.start()
    }

    /// Queues `line` and a newline. An ordinary line is counted as dropped when `capacity` bytes
    /// are waiting; a `reserved` one may use `reserve` bytes more, and waits for room beyond that.
    func append(_ line: some Collection<UInt8>, reserved: Bool = false) {
        condition.lock()
        defer { condition.unlock() }
        let size = line.count + 1
        if reserved {
            // A line larger than the whole room goes once nothing else waits.
            while !pending.isEmpty && pending.count + size > capacity + reserve {
                waitingForRoom += 1
                condition.wait()
                waitingForRoom -= 1
            }
        } else if pending.count + size > capacity {
            dropped += 1
            return
        }
        let wasEmpty = pending.isEmpty
        pending.append(contentsOf: line)
        pending.append(UInt8(ascii: "\n"))
        if wasEmpty { condition.signal() }  // only the writer waits while nothing is pending
    }

    /// Returns once everything queued before the call has been written (or after `timeout`).
    func flush(timeout: TimeInterval = 2) {
        let deadline = MonotonicCondition.now() + timeout
        condition.lock()
        defer { condition.unlock() }
        flushing += 1
        defer { flushing -= 1 }
        condition.broadcast()  // cuts the writer's batch delay short
        while (!pending.isEmpty || writing) && condition.wait(until: deadline) {}
    }

    private func run() {
        var batch: [UInt8] = []
        while true {
            condition.lock()
            writing = false
            if flushing > 0 { condition.broadcast() }
            while pending.isEmpty { condition.wait() }
            if flushing == 0 && pending.count < capacity / 2 {
                condition.wait(seconds: batchDelay)
            }
            swap(&batch, &pending)
            let lost = dropped
            dropped = 0
            writing = true
            if waitingForRoom > 0 { condition.broadcast() }
            condition.unlock()

            write(batch)
            if lost > 0 { write(Array(Self.droppedLine(count: lost, at: Date()).utf8) + [UInt8(ascii: "\n")]) }
            batch.removeAll(keepingCapacity: batch.capacity <= 4 * capacity)
        }
    }

    /// Writes all of `bytes`, retrying after interruptions; gives up on any other error (a log
    /// that cannot be written must not take the service down).
    private func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fileDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    static func droppedLine(count: Int, at date: Date) -> String {
        #"{"count":\#(count),"level":"warning","msg":"log lines dropped: the log could not keep up","ts":"\#(JSON.timestamp(date))"}"#
    }
}
