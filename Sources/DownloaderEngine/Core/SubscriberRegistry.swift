import Foundation
import Synchronization

/// Who listens to which download. Its own lock, never taking the engine's lock, so the engine may
/// publish while holding its own; it is held while pushing progress and while the pacer's tick
/// decides (lock order: registry, then a queue's). Progress wake-ups are paced by `pacer` once there
/// are many subscribers (see `ProgressPacing`), and a progress visits only the queues it can change
/// (see `SubscriberParking`).
final class SubscriberRegistry: @unchecked Sendable {
    let pacer: ProgressPacer
    private let lock = NSLock()
    private var byDownload: [String: SubscriberParking<SubscriberQueue>] = [:]
    private var downloadOf: [UInt64: String] = [:]
    private var nextID: UInt64 = 0

    /// Pacing on `scheduler`'s clock and timers.
    convenience init(scheduler: any Scheduler, pacing: ProgressPacing = ProgressPacing()) {
        self.init(pacer: ProgressPacer(pacing: pacing, scheduler: scheduler))
    }

    init(pacer: ProgressPacer) {
        self.pacer = pacer
    }

    /// A queue for `downloadID`'s events after `sequence` (the engine's event sequence when the
    /// subscriber's first element was taken).
    func makeQueue(for downloadID: String, after sequence: UInt64 = 0) -> SubscriberQueue {
        lock.lock()
        nextID += 1
        let id = nextID
        let queue = SubscriberQueue(id: id, downloadID: downloadID, startSequence: sequence, pacer: pacer) { [weak self] queueID in
            self?.remove(queueID)
        }
        queue.registry = self
        byDownload[downloadID, default: SubscriberParking()].add(id, queue)
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
        byDownload[download]?.remove(queueID)
        if byDownload[download]?.isEmpty == true {
            byDownload[download] = nil
            pacer.setLatestProgress(nil, of: download)
        }
    }

    /// The relay's event for `downloadID` (cluster mode), recorded as `publish` records it: a
    /// progress as the newest, a lifecycle event clearing it; only while the download has queues
    /// (checked under the lock `remove` clears the record under: a record made after the last
    /// queue went would stay for good).
    func recordRelayed(_ event: DownloadEvent, of downloadID: String) {
        lock.lock()
        defer { lock.unlock() }
        guard byDownload[downloadID] != nil else { return }
        pacer.setLatestProgress(event.isProgress ? event : nil, of: downloadID)
    }

    func queues(for downloadID: String) -> [SubscriberQueue] {
        lock.lock()
        defer { lock.unlock() }
        return byDownload[downloadID]?.all ?? []
    }

    func all() -> [SubscriberQueue] {
        lock.lock()
        defer { lock.unlock() }
        return byDownload.values.flatMap { $0.all }
    }

    /// A consumer's ask or the pacer's tick of a queue: `decide` (the queue's decision, under its
    /// lock: whether the queue is parked after it) runs under the registry's lock, so no progress is
    /// recorded while it reads the newest one, and the queue is parked or awake as its state now says
    /// before any progress looks.
    func deciding<T>(_ queue: SubscriberQueue, _ decide: () -> (T, parked: Bool)) -> T {
        lock.lock()
        defer { lock.unlock() }
        let (result, parked) = decide()
        if parked {
            byDownload[queue.downloadID]?.park(queue.id)
        } else {
            byDownload[queue.downloadID]?.unpark(queue.id)
        }
        return result
    }

    /// For tests: how many of the download's queues a progress visits.
    func awakeCount(of downloadID: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return byDownload[downloadID]?.awake.count ?? 0
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return downloadOf.count
    }

    /// Delivers `event` (number `sequence` of the engine's events) to the download's subscribers
    /// that subscribed before it was decided.
    func publish(_ event: DownloadEvent, to downloadID: String, sequence: UInt64 = .max) {
        guard case .progress = event else {
            // Parked queues stay parked: a lifecycle event leaves no consumer waiting for progress
            // (a waiting one is handed it, a busy one finds it pending), and only a consumer that
            // waits is offered progress.
            lock.lock()
            let queues = byDownload[downloadID]?.all ?? []
            lock.unlock()
            guard !queues.isEmpty else { return }
            pacer.setLatestProgress(nil, of: downloadID)
            let pace = pacer.pace()
            for queue in queues where queue.startSequence < sequence { queue.push(event, pace: pace) }
            return
        }
        // Progress (up to 10 a second): recorded as the download's newest, then offered under the
        // lock to the awake queues only, without copying the list; a queue that turns out busy or
        // now waits for the tick is parked. Safe: an offer never detaches a queue (no re-entry),
        // and waking a consumer only enqueues its task or calls its waker. Not copied into the
        // queues: a busy consumer takes the record when it asks, the tick and a consumer that runs
        // late are handed the newest.
        lock.lock()
        defer { lock.unlock() }
        guard var queues = byDownload.removeValue(forKey: downloadID) else { return }
        defer { byDownload[downloadID] = queues }
        guard let recorded = pacer.setLatestProgress(event, of: downloadID, sequence: sequence) else { return }
        let pace = pacer.pace()
        var parked: [UInt64] = []
        for (id, queue) in queues.awake where queue.startSequence < sequence {
            if queue.offer(recorded, pace: pace) { parked.append(id) }
        }
        for id in parked { queues.park(id) }
    }
}
