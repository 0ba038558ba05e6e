/// Runs one loop's request handlers in as few task resumptions as possible (loop thread only).
///
/// Connections with a complete request join a FIFO (`ready`). One *active* worker task (which
/// prefers the loop as its executor) drains it: a batch of requests that became ready in one loop
/// iteration costs one task resumption, not one per request. A handler that suspends keeps its
/// worker: the next request that becomes ready while the active worker is suspended in a handler
/// retires it (it exits once that request is done) and wakes a spare worker or starts a new one,
/// and so does the loop after each batch of task jobs when requests wait behind a worker that
/// suspended in a handler: a slow handler never delays another connection's request. A worker whose task was cancelled
/// (its client left, or shutdown stopped a stream) is retired the same way: cancellation is sticky.
final class HandlerWorkers {
    let loop: EventLoop
    /// Connections whose request waits for a worker, in arrival order (from `head`).
    private var ready: [Connection] = []
    private var head = 0
    /// The worker that drains `ready` (nil: none, start one on the next request).
    private var active: HandlerWorker?
    /// A retired worker that finished its request and waits to become active again.
    private var spare: HandlerWorker?
    private var stopped = false

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// After a batch of task jobs (so no worker is running): an active worker that is inside a
    /// handler is suspended there; if requests wait behind it, hand them to another worker.
    func afterJobs() {
        if let worker = active, worker.serving != nil, head < ready.count { retire(worker) }
    }

    /// `connection` has a request in `queuedRequest`: make sure a worker will serve it.
    func enqueue(_ connection: Connection) {
        ready.append(connection)
        guard let worker = active else {
            activate()
            return
        }
        if worker.waiter != nil {
            worker.resume(true)  // idle: one resumption serves everything queued until it runs
        } else if worker.serving != nil && !worker.isCurrentTask {
            // Suspended inside a handler (we are not running on it): let it finish that request
            // alone and hand the queue to another worker.
            retire(worker)
        }
        // Otherwise it is running (this is a pipelined request found while it answers) or already
        // resumed: it takes the request when it loops.
    }

    /// The next connection to serve, if any.
    func next() -> Connection? {
        guard head < ready.count else { return nil }
        let connection = ready[head]
        head += 1
        if head == ready.count {
            ready.removeAll(keepingCapacity: ready.count <= 1024)
            head = 0
        } else if head >= 64 && head * 2 >= ready.count {
            ready.removeFirst(head)
            head = 0
        }
        return connection
    }

    /// Whether `worker` should keep draining the queue or stop (retired, cancelled or stopped).
    func keepsServing(_ worker: HandlerWorker) -> Bool {
        active === worker && !worker.retired
    }

    /// `worker` found the queue empty: park it as the active worker (returns true to wait), or
    /// tell it to end (retired workers become the spare when there is none).
    func parkWhenIdle(_ worker: HandlerWorker) -> Bool {
        if stopped || Task.isCancelled { return false }
        if active === worker { return true }
        if spare == nil && !worker.cancelled {
            spare = worker
            return true
        }
        return false
    }

    /// Stops `worker` from taking further requests; another takes over the queue.
    func retire(_ worker: HandlerWorker) {
        worker.retired = true
        if active === worker {
            active = nil
            if head < ready.count { activate() }
        }
    }

    /// `worker` ends (its task returns).
    func ended(_ worker: HandlerWorker) {
        if spare === worker { spare = nil }
        retire(worker)
    }

    /// The loop stops: idle workers end; later requests get a worker that ends when idle.
    func stop() {
        stopped = true
        if let worker = spare {
            spare = nil
            worker.resume(false)
        }
        if let worker = active, worker.waiter != nil {
            active = nil
            worker.resume(false)
        }
    }

    /// Makes the spare (or a new worker) the active one; it runs after the current I/O batch.
    private func activate() {
        if let worker = spare {
            spare = nil
            worker.retired = false
            active = worker
            worker.resume(true)
            return
        }
        let worker = HandlerWorker(workers: self)
        active = worker
        worker.start()
    }
}

/// One handler task of a loop's `HandlerWorkers` (loop thread only).
final class HandlerWorker: @unchecked Sendable {
    /// Strong: the cycle through `HandlerWorkers.active`/`spare` ends when the task ends.
    let workers: HandlerWorkers
    // @exclusivity(unchecked) on the vars below: loop-thread only (the task hops back first), no overlapping access; skips the runtime check.
    /// Set while the worker waits for requests.
    @exclusivity(unchecked)
    var waiter: UnsafeContinuation<Bool, Never>?
    /// A resumption that arrived before the worker started waiting.
    @exclusivity(unchecked)
    private var pendingResume: Bool?
    /// The connection whose request it is answering (the handler may be suspended).
    @exclusivity(unchecked)
    var serving: Connection?
    @exclusivity(unchecked)
    var retired = false
    /// Its task was cancelled: it must not answer anyone else.
    @exclusivity(unchecked)
    var cancelled = false
    @exclusivity(unchecked)
    private var task: Task<Void, Never>?
    /// The task's identity, for `isCurrentTask` (only compared, never used to reach the task).
    @exclusivity(unchecked)
    private var taskIdentity: UnsafeCurrentTask?

    init(workers: HandlerWorkers) {
        self.workers = workers
    }

    func start() {
        // The task prefers the loop as its executor: it runs on the loop thread right after the
        // current I/O batch, and a handler that never suspends costs no thread hop.
        task = Task(executorPreference: workers.loop) { [self] in await run() }
    }

    /// Whether the code running now is this worker's task.
    var isCurrentTask: Bool {
        withUnsafeCurrentTask { current in current != nil && current == taskIdentity }
    }

    func resume(_ proceed: Bool) {
        if let waiter = waiter.take() {
            waiter.resume(returning: proceed)
        } else {
            pendingResume = proceed
        }
    }

    /// Cancels the task (the connection it serves went away); it ends after that request.
    func cancel() {
        cancelled = true
        task?.cancel()
        workers.retire(self)
    }

    private nonisolated(nonsending) func run() async {
        withUnsafeCurrentTask { taskIdentity = $0 }
        let loop = workers.loop
        while true {
            if !loop.inEventLoop { await loop.hop() }
            if workers.keepsServing(self), let connection = workers.next() {
                serving = connection
                connection.servingWorker = self
                await connection.serveQueuedRequest()
                if !loop.inEventLoop { await loop.hop() }
                if connection.servingWorker === self { connection.servingWorker = nil }
                serving = nil
                continue
            }
            guard workers.parkWhenIdle(self) else { break }
            let proceed: Bool
            if let early = pendingResume.take() {
                proceed = early
            } else {
                proceed = await withUnsafeContinuation { waiter = $0 }
            }
            if !proceed { break }
        }
        taskIdentity = nil
        task = nil
        workers.ended(self)
    }
}
