import Foundation

/// Batches handed from one thread to another in order, at most `capacity` of them waiting (the
/// producer waits while the consumer is behind): start-up's rows are read and turned into records
/// on the state writer's thread while the start-up thread restores the batches before. One
/// producer, one consumer; the producer always finishes (`finish`), with the error that ended it.
final class BatchHandOff<Batch>: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    // Guarded by `condition`.
    private var waiting: [Batch?] = []
    private var head = 0
    private var finished = false
    private var failure: StateStoreError?

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Producer: hands `batch` on, after waiting while `capacity` batches wait already.
    func put(_ batch: Batch) {
        condition.lock()
        while waiting.count - head >= capacity { condition.wait() }
        if head == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            head = 0
        }
        waiting.append(batch)
        condition.broadcast()
        condition.unlock()
    }

    /// Producer: no more batches; `failure`: why they ended early (the consumer throws it once it
    /// took the batches before).
    func finish(_ failure: StateStoreError? = nil) {
        condition.lock()
        finished = true
        self.failure = failure
        condition.broadcast()
        condition.unlock()
    }

    /// Consumer: the next batch, waiting for it; nil once every batch was taken and the producer
    /// finished without an error.
    func next() throws(StateStoreError) -> Batch? {
        condition.lock()
        defer { condition.unlock() }
        while head == waiting.count && !finished { condition.wait() }
        guard head < waiting.count else {
            if let failure { throw failure }
            return nil
        }
        let batch = waiting[head].take()
        head += 1
        condition.broadcast()
        return batch!
    }
}
