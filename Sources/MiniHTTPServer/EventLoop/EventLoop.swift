import Basics
import CLinux
import Foundation
import Synchronization

/// One thread that owns an epoll selector, every socket registered with it, a timer heap, and a
/// queue other threads hand work to (woken through an eventfd). It is also a Swift `TaskExecutor`:
/// tasks started with `Task(executorPreference: loop)` run on the loop thread until they hop
/// elsewhere, so a handler that never really suspends costs no thread hop.
///
/// Everything not marked thread-safe must only be touched on the loop thread.
final class EventLoop: TaskExecutor, @unchecked Sendable {
    private struct Inbox {
        var closures: [@Sendable () -> Void] = []
        var jobs: [UnownedJob] = []
        /// The loop was asked to stop (its stop ran on the loop thread): `executeIfRunning` refuses.
        var stopping = false
        var stopped = false
        var isEmpty: Bool { closures.isEmpty && jobs.isEmpty }
    }

    private let selector: Selector
    private let inbox = Mutex(Inbox())
    /// Set by producers after queuing, so the loop skips the lock when nothing was handed over.
    private let inboxPending = Atomic<Bool>(false)
    // @exclusivity(unchecked) on the vars below and `afterJobs`: loop-thread only, no overlapping access; skips the runtime exclusivity check per access.
    @exclusivity(unchecked)
    private var registrations = RegistrationTable()
    @exclusivity(unchecked)
    private var localJobs: [UnownedJob] = []
    @exclusivity(unchecked)
    private var timers = TimerHeap()
    @exclusivity(unchecked)
    private var stopRequested = false
    @exclusivity(unchecked)
    private var thread: pthread_t?
    private let started = DispatchSemaphore(value: 0)
    /// Called on the loop thread right before the thread exits.
    @exclusivity(unchecked)
    private var onExit: [() -> Void] = []

    /// The read and write buffers every connection of this loop shares (loop thread only).
    let buffers = LoopBuffers()
    /// The `Date` header's bytes, formatted once per second (see `dateHeader`).
    @exclusivity(unchecked)
    private var dateCache = HTTPDateCache()
    /// Wall-clock seconds sampled once per loop iteration (see `sampleClocks`).
    @exclusivity(unchecked)
    private var wallSecond: Int = {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &ts)
        return ts.tv_sec
    }()
    /// Monotonic time (ns) sampled once per loop iteration, like nginx's cached time.
    @exclusivity(unchecked)
    private(set) var now: UInt64 = monotonicNanoseconds()

    /// Where the loop's own warnings go (`ServerConfiguration.diagnostics`).
    private let diagnostics: @Sendable (String) -> Void

    init(diagnostics: @escaping @Sendable (String) -> Void = ServerConfiguration.writeToStandardError) throws {
        selector = try Selector()
        self.diagnostics = diagnostics
    }

    // MARK: Thread

    /// Starts the loop thread named `name`, lowered to `nice` (`ThreadNice`) before it runs anything;
    /// `yield`: the requests to give way this loop follows (a bulk loop's).
    func start(name: String, nice: Int = 0, yield: BulkLoopYield? = nil) {
        if let yield {
            yielding = yield
            dutyCycle = DutyCycle(share: yield.share)
        }
        let t = Thread { [self] in
            thread = pthread_self()
            kernelThreadID = ThreadNice.currentThreadID
            if let failure = ThreadNice.lowerCurrentThread(to: nice) {
                diagnostics("event loop: setpriority(\(nice)) failed: errno \(failure)")
            }
            started.signal()
            run()
        }
        t.name = name
        t.stackSize = 1 << 20
        t.start()
        started.wait()
    }

    /// The requests to give way this loop follows (`BulkLoopYield`), and where it is in its cycle.
    private var yielding: BulkLoopYield?
    @exclusivity(unchecked)
    private var dutyCycle = DutyCycle(share: 1)

    /// After each piece of work (an event, a handed-over closure, a timer): while
    /// the application asks the loop to give way, it sleeps once it used its share of the CPU.
    private func giveWayIfAsked() {
        guard let yielding else { return }
        let asked = yielding.isRequested(at: monotonicNanoseconds())
        guard let rest = dutyCycle.step(asked: asked, cpu: yielding.threadCPU) else { return }
        yielding.sleep(rest)
        dutyCycle.rested(cpu: yielding.threadCPU())
    }

    /// The loop thread's kernel thread id (0 before `start`); for tests.
    @exclusivity(unchecked)
    private(set) var kernelThreadID: Int32 = 0

    /// The loop thread's pthread id as a number (0 before `start`); for tests.
    var threadID: UInt {
        guard let thread else { return 0 }
        return UInt(thread)
    }

    /// True on the loop thread.
    var inEventLoop: Bool {
        guard let thread else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// Asks the loop to exit after its current iteration; `completion` runs on the loop thread last,
    /// or at once on the caller's thread when the loop had exited already (nothing else would run it).
    func stop(completion: @escaping @Sendable () -> Void) {
        let queued = queue(refusingOnceStopping: false) { [self] in
            stopRequested = true
            inbox.withLock { $0.stopping = true }
            onExit.append(completion)
        }
        if !queued { completion() }
    }

    private func run() {
        while !stopRequested {
            let timeout: Int32
            if !localJobs.isEmpty {
                timeout = 0
            } else if let next = timers.nextDeadline {
                let now = monotonicNanoseconds()
                timeout = next <= now ? 0 : Int32(clamping: (next - now + 999_999) / 1_000_000)
            } else {
                timeout = -1
            }
            do {
                try selector.wait(timeoutMilliseconds: timeout, woke: { sampleClocks() }) { events, data in
                    dispatch(events, data: data)
                    giveWayIfAsked()
                }
            } catch {
                diagnostics("event loop: \(error)")
            }
            runDueTimers()
            drainInbox()
            runLocalJobs()
        }
        // Leftover work must not be lost: forward jobs to the global pool, run closures here.
        let leftovers = inbox.withLock { box -> Inbox in
            box.stopped = true
            let copy = box
            box = Inbox(stopping: true, stopped: true)
            return copy
        }
        for closure in leftovers.closures { closure() }
        for job in localJobs + leftovers.jobs { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
        localJobs = []
        // Drop what could keep objects (and this loop) alive in a cycle.
        timers = TimerHeap()
        registrations = RegistrationTable()
        afterJobs = []
        selector.close()
        for body in onExit { body() }
        onExit = []
    }

    private func runDueTimers() {
        guard !timers.isEmpty else { return }
        while let entry = timers.popDue(now: now) {
            switch entry.action {
            case .registration(let fd, let id):
                registrations.handler(fd: Int(fd), id: id)?.timerFired(deadline: entry.deadline)
            case .closure(let body): body()
            }
            giveWayIfAsked()
        }
    }

    private func drainInbox() {
        guard inboxPending.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let box = inbox.withLock { box -> Inbox in
            guard !box.isEmpty else { return Inbox() }
            let copy = box
            box.closures = []
            box.jobs = []
            return copy
        }
        for closure in box.closures {
            closure()
            giveWayIfAsked()
        }
        localJobs.append(contentsOf: box.jobs)
    }

    private func runLocalJobs() {
        guard !localJobs.isEmpty else { return }
        // Run only the jobs present now; jobs they enqueue run next iteration (after I/O).
        let jobs = localJobs
        localJobs = []
        let executor = asUnownedTaskExecutor()
        for job in jobs { job.runSynchronously(on: executor) }
        for hook in afterJobs { hook() }
    }

    /// Run on the loop thread after each batch of task jobs (no task is running then). Unchecked
    /// exclusivity like the loop's other state (see the note at the top).
    @exclusivity(unchecked)
    var afterJobs: [() -> Void] = []

    // MARK: Cross-thread work

    /// Runs `body` on the loop thread (later, even when called on it), or inline on the caller's
    /// thread once the loop exited (see `executeIfRunning` for work that must not). Thread-safe.
    func execute(_ body: @escaping @Sendable () -> Void) {
        if !queue(refusingOnceStopping: false, body) {
            // The loop is gone and everything it owned is closed: run here so nobody waits forever.
            body()
        }
    }

    /// Queues `body` to run on the loop thread (later, even when called on it) and returns true; or
    /// returns false, and `body` never runs, once the loop was asked to stop. For work that must
    /// run on this loop's thread or not at all (a connection handed over: the caller keeps it and
    /// acts on its own thread), where `execute` would run it inline on the wrong thread. Thread-safe.
    func executeIfRunning(_ body: @escaping @Sendable () -> Void) -> Bool {
        queue(refusingOnceStopping: true, body)
    }

    /// Puts `body` in the inbox and wakes the loop; false (not queued) once the loop exited, or
    /// once it was asked to stop when `refusingOnceStopping`.
    private func queue(refusingOnceStopping: Bool, _ body: @escaping @Sendable () -> Void) -> Bool {
        // The wake-up write happens under the lock: once the loop marked itself stopped (under the
        // same lock) and closed its eventfd, nobody writes to that descriptor number again.
        inbox.withLock { box -> Bool in
            if box.stopped || (refusingOnceStopping && box.stopping) { return false }
            let wasEmpty = box.isEmpty
            box.closures.append(body)
            inboxPending.store(true, ordering: .releasing)
            if wasEmpty { selector.wakeup() }
            return true
        }
    }

    /// TaskExecutor: jobs of tasks that prefer this loop run on its thread.
    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        if inEventLoop && !stopRequested {
            localJobs.append(unowned)
            return
        }
        let stopped = inbox.withLock { box -> Bool in
            if box.stopped { return true }
            let wasEmpty = box.isEmpty
            box.jobs.append(unowned)
            inboxPending.store(true, ordering: .releasing)
            if wasEmpty { selector.wakeup() }
            return false
        }
        if stopped { globalConcurrentExecutor.enqueue(ExecutorJob(unowned)) }
    }

    // MARK: Registrations (loop thread)

    /// Delivers one epoll event: `data` carries fd and registration id, so an event for a closed
    /// (and possibly reused) descriptor never reaches the new owner.
    func dispatch(_ events: UInt32, data: UInt64) {
        let fd = Int(truncatingIfNeeded: data & 0xFFFF_FFFF)
        let id = UInt32(truncatingIfNeeded: data >> 32)
        registrations.handler(fd: fd, id: id)?.handleEvent(events)
    }

    static func eventData(fd: Int32, registrationID: UInt32) -> UInt64 {
        UInt64(registrationID) << 32 | UInt64(UInt32(bitPattern: fd))
    }

    /// Registers `fd` for `events`; returns the registration id that guards against fd reuse.
    @discardableResult
    func register(fd: Int32, events: UInt32, handler: Selectable) throws -> UInt32 {
        let id = registrations.add(fd: fd, handler: handler)
        do {
            try selector.add(fd: fd, events: events, data: Self.eventData(fd: fd, registrationID: id))
        } catch {
            registrations.remove(fd: fd)
            throw error
        }
        return id
    }

    /// Forgets the registration of `fd` and removes it from epoll. Call before closing the fd;
    /// with `closing` the epoll_ctl is skipped (close(2) of the only descriptor removes it).
    func deregister(fd: Int32, closing: Bool = false) {
        if !closing { selector.remove(fd: fd) }
        registrations.remove(fd: fd)
    }

    // MARK: Timers (loop thread)

    func schedule(at deadline: UInt64, fd: Int32, registrationID: UInt32) {
        timers.push(deadline, .registration(fd: fd, id: registrationID))
    }

    func schedule(at deadline: UInt64, _ body: @escaping () -> Void) {
        timers.push(deadline, .closure(body))
    }

    // MARK: Clocks and the Date header

    /// Samples the monotonic and (coarse) wall clocks once per loop iteration, like nginx's
    /// cached time: timers, timeouts and `Date` headers read these instead of a clock call each.
    private func sampleClocks() {
        now = monotonicNanoseconds()
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &ts)
        wallSecond = ts.tv_sec
    }

    /// The current time as an IMF-fixdate (29 UTF-8 bytes) as of this loop iteration, formatted
    /// once per second (loop thread). The bytes live in the loop's own storage: use them before
    /// the loop's next date refresh.
    var dateHeader: UnsafeBufferPointer<UInt8> { dateCache.bytes(forSecond: wallSecond) }
}
