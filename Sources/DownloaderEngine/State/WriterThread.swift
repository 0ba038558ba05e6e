import Foundation

/// One dedicated thread running the jobs given to it, one at a time, in order: the state store's
/// only user (`StateWriter`). `sync` must never be called from the thread itself.
final class WriterThread: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var jobs: [@Sendable () -> Void] = []
    private var stopping = false

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    /// Runs `job` on the thread after the jobs before it.
    func async(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Runs `job` on the thread after the jobs before it, and waits for its result.
    func sync<T, E: Error>(_ job: @escaping () throws(E) -> T) throws(E) -> T {
        let done = DispatchSemaphore(value: 0)
        // Handed over to the thread and back; the semaphore orders the accesses.
        nonisolated(unsafe) var result: Result<T, E>?
        nonisolated(unsafe) let body = job
        async {
            result = Result { () throws(E) -> T in try body() }
            done.signal()
        }
        done.wait()
        return try result!.get()
    }

    /// Ends the thread once the jobs given so far have run.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job() }
        }
    }
}
