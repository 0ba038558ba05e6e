import Foundation
import Synchronization

/// Who listens to which download. Its own lock, held while calling out only to push progress to
/// queues and tick them (neither re-enters it), and never taking the engine's lock, so the engine
/// may publish while holding its own. Progress wake-ups are paced
/// by `pacer` once there are many subscribers (see `ProgressPacing`).
///
/// Publishing progress costs what it delivers, not one step per subscriber: a queue whose consumer
/// waits for the pacer's tick (`SubscriberQueueState.awaitsTick`: most of them, with 10 000
/// subscribers at the shared budget) is left out of the download's `awake` queues until its tick
/// (run here, under the lock) or a lifecycle event takes it back in.
final class SubscriberRegistry: @unchecked Sendable {
    /// A download's queues: all of them, and those a progress may change (every queue but those
    /// awaiting the pacer's tick; a superset of them is harmless, a queue missing wrongly is not).
    private struct Subscribers {
        var all: [UInt64: SubscriberQueue] = [:]
        var awake: [UInt64: SubscriberQueue] = [:]
    }

    let pacer: ProgressPacer
    private let lock = NSLock()
    private var byDownload: [String: Subscribers] = [:]
    private var downloadOf: [UInt64: String] = [:]
    private var nextID: UInt64 = 0
    /// Every queue's ticker (one closure for all: an idle subscriber keeps no context of its own).
    private var ticker: SubscriberQueue.Ticker?

    /// Pacing on `scheduler`'s clock and timers.
    convenience init(scheduler: any Scheduler, pacing: ProgressPacing = ProgressPacing()) {
        self.init(pacer: ProgressPacer(pacing: pacing, scheduler: scheduler))
    }

    init(pacer: ProgressPacer) {
        self.pacer = pacer
        ticker = { [weak self] queue, pace in
            if let self { self.tick(queue, pace: pace) } else { queue.tickNow(pace: pace) }
        }
    }

    /// A queue for `downloadID`'s events after `sequence` (the engine's event sequence when the
    /// subscriber's first element was taken).
    func makeQueue(for downloadID: String, after sequence: UInt64 = 0) -> SubscriberQueue {
        lock.lock()
        nextID += 1
        let id = nextID
        let queue = SubscriberQueue(id: id, downloadID: downloadID, startSequence: sequence, pacer: pacer, ticker: ticker,
                                    onDetach: { [weak self] queueID in self?.remove(queueID) })
        byDownload[downloadID, default: Subscribers()].all[id] = queue
        byDownload[downloadID]?.awake[id] = queue
        downloadOf[id] = downloadID
        pacer.setSubscribers(downloadOf.count)
        lock.unlock()
        return queue
    }

    private func remove(_ queueID: UInt64) {
        lock.lock()
        defer { lock.unlock() }
        guard let download = downloadOf.removeValue(forKey: queueID) else { return }
        pacer.setSubscribers(downloadOf.count)
        byDownload[download]?.all[queueID] = nil
        byDownload[download]?.awake[queueID] = nil
        if byDownload[download]?.all.isEmpty == true {
            byDownload[download] = nil
            pacer.setLatestProgress(nil, of: download)
        }
    }

    func queues(for downloadID: String) -> [SubscriberQueue] {
        lock.lock()
        defer { lock.unlock() }
        return byDownload[downloadID].map { Array($0.all.values) } ?? []
    }

    func all() -> [SubscriberQueue] {
        lock.lock()
        defer { lock.unlock() }
        return byDownload.values.flatMap { $0.all.values }
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return downloadOf.count
    }

    /// How many of the download's queues a progress publish visits now.
    func awakeCount(of downloadID: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return byDownload[downloadID]?.awake.count ?? 0
    }

    /// Delivers `event` (number `sequence` of the engine's events) to the download's subscribers
    /// that subscribed before it was decided.
    func publish(_ event: DownloadEvent, to downloadID: String, sequence: UInt64 = .max) {
        guard case .progress = event else {
            let queues = queues(for: downloadID)
            guard !queues.isEmpty else { return }
            pacer.setLatestProgress(nil, of: downloadID)
            let pace = pacer.pace()
            for queue in queues where queue.startSequence < sequence { queue.push(event, pace: pace) }
            // Every consumer was handed the event (or holds it pending): none awaits a tick now.
            // Pushed outside the lock (a terminal event detaches), so taken back in afterwards.
            lock.lock()
            if let all = byDownload[downloadID]?.all { byDownload[downloadID]?.awake = all }
            lock.unlock()
            return
        }
        // Progress (up to 10 a second): pushed under the lock, to the awake queues only. Safe: a
        // progress push never detaches a queue (no re-entry), and waking a consumer only enqueues
        // its task. Recorded first: a deferred progress is not copied into the queues, and a
        // consumer that runs late (or is ticked later) is handed the newest progress.
        lock.lock()
        defer { lock.unlock() }
        guard byDownload[downloadID] != nil else { return }
        pacer.setLatestProgress(event, of: downloadID)
        let pace = pacer.pace()
        let asleep = pushAwake(event, of: downloadID, sequence: sequence, pace: pace)
        for id in asleep { byDownload[downloadID]?.awake[id] = nil }
    }

    /// Under the lock: pushes `event` to the download's awake queues that subscribed before it;
    /// returns those that now await a tick. (A function of its own so that the copy it iterates is
    /// released before the caller changes the dictionary.)
    private func pushAwake(_ event: DownloadEvent, of downloadID: String, sequence: UInt64, pace: ProgressPace) -> [UInt64] {
        guard let awake = byDownload[downloadID]?.awake else { return [] }
        var asleep: [UInt64] = []
        for (id, queue) in awake where queue.startSequence < sequence {
            if queue.push(event, pace: pace) { asleep.append(id) }
        }
        return asleep
    }

    /// The pacer's tick of `queue`, under the lock (so no publish runs between the queue's decision
    /// and its return to the awake queues): the queue is awake again unless it still awaits a tick.
    private func tick(_ queue: SubscriberQueue, pace: ProgressPace) {
        lock.lock()
        defer { lock.unlock() }
        if !queue.tickNow(pace: pace), byDownload[queue.downloadID]?.all[queue.id] != nil {
            byDownload[queue.downloadID]?.awake[queue.id] = queue
        }
    }
}
