import Foundation
import MiniHTTPServer

/// Cluster mode: threads of their own for the requests that may wait on the database. The engine's
/// calls into PostgreSQL block their thread until the server answers (at most a statement's
/// deadline, `ClusterDatabase.statementTimeout`); run on the event loop that serves the
/// connection, a database that stops answering would stop that loop, `/healthz` and every other
/// connection on it included. Handlers of such requests prefer these threads (`run`, a Swift task
/// executor): the loop only parses and writes. Half as many threads as the pool has connections
/// (`threads(poolSize:)`): the lease keeper, the janitor and the webhooks borrow from the same pool
/// and must find a connection while requests crowd in. The threads live as long as the process
/// (like the database's probe); jobs wait in arrival order, as many as requests are being handled.
final class DatabaseWorkers: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`: jobs not yet taken, oldest first (a few: one per request being handled here).
    private var jobs: [UnownedJob] = []

    /// Threads for a pool of `poolSize` connections.
    static func threads(poolSize: Int) -> Int { max(2, poolSize / 2) }

    init(threads: Int) {
        for index in 0..<max(1, threads) {
            let thread = Thread { [self] in work() }
            thread.name = "cluster-requests-\(index)"
            thread.start()
        }
    }

    /// Runs `body` on these threads (and whatever it awaits that has no executor of its own).
    func run<T>(_ body: () async -> T) async -> T {
        await withTaskExecutorPreference(self) { await body() }
    }

    /// Which requests come here: those whose answer may need the database (`/metrics` counts the
    /// downloads in it, `/events` reads the feed a reconnecting stream missed). Health, readiness
    /// and the page never wait on it and stay on the loop.
    static func mayWait(_ endpoint: Endpoint?) -> Bool {
        switch endpoint {
        case .health, .ready, .page, nil: false
        case .downloads, .download, .progress, .file, .fileLink, .fetch, .metrics, .events: true
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.withLock {
            jobs.append(unowned)
            condition.signal()
        }
    }

    private func work() {
        let executor = asUnownedTaskExecutor()
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: executor)
        }
    }
}
