import Foundation
import Synchronization

/// Who listens to which download. Its own lock, never held while calling out, and never taking
/// the engine's lock, so the engine may publish while holding its own. Progress wake-ups are paced
/// by `pacer` once there are many subscribers (see `ProgressPacing`).
final class SubscriberRegistry: @unchecked Sendable {
    let pacer: ProgressPacer
    private let lock = NSLock()
    private var byDownload: [String: [UInt64: SubscriberQueue]] = [:]
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
        byDownload[downloadID, default: [:]][id] = queue
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
        byDownload[download]?[queueID] = nil
        if byDownload[download]?.isEmpty == true {
            byDownload[download] = nil
            pacer.setLatestProgress(nil, of: download)
        }
    }

    func queues(for downloadID: String) -> [SubscriberQueue] {
        lock.lock()
        defer { lock.unlock() }
        return byDownload[downloadID].map { Array($0.values) } ?? []
    }

    func all() -> [SubscriberQueue] {
        lock.lock()
        defer { lock.unlock() }
        return byDownload.values.flatMap { $0.values }
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
            let queues = queues(for: downloadID)
            guard !queues.isEmpty else { return }
            pacer.setLatestProgress(nil, of: downloadID)
            let pace = pacer.pace()
            for queue in queues where queue.startSequence < sequence { queue.push(event, pace: pace) }
            return
        }
        // Progress (up to 10 a second to every subscriber): pushed under the lock, without copying
        // the subscriber list. Safe: a progress push never detaches a queue (no re-entry), and
        // waking a consumer only enqueues its task. Recorded first: a deferred progress is not
        // copied into the queues, and a consumer that runs late is handed the newest progress.
        lock.lock()
        defer { lock.unlock() }
        guard let queues = byDownload[downloadID] else { return }
        pacer.setLatestProgress(event, of: downloadID)
        let pace = pacer.pace()
        for queue in queues.values where queue.startSequence < sequence { queue.push(event, pace: pace) }
    }
}
