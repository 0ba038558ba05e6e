import Foundation

/// A task executor that runs its jobs only when the test says so: a task started with it as its
/// executor preference runs (and, once resumed, runs on) only inside `runAll`. Lets a test resume a
/// consumer and change the world before the consumer actually runs, as a busy machine would.
final class ManualTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let lock = NSLock()
    private var jobs: [UnownedJob] = []

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        lock.withLock { jobs.append(job) }
    }

    /// Jobs enqueued and not run yet.
    var queuedCount: Int { lock.withLock { jobs.count } }

    /// Runs the queued jobs, and those they enqueue, on the calling thread until none is left.
    func runAll() {
        while let job = lock.withLock({ jobs.isEmpty ? nil : jobs.removeFirst() }) {
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
