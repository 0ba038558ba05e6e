import Foundation

/// Who listens to which download. Its own lock, never held while calling out, and never taking
/// the engine's lock, so the engine may publish while holding its own.
final class SubscriberRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var byDownload: [String: [UInt64: SubscriberQueue]] = [:]
    private var downloadOf: [UInt64: String] = [:]
    private var nextID: UInt64 = 0

    func makeQueue(for downloadID: String) -> SubscriberQueue {
        lock.lock()
        nextID += 1
        let id = nextID
        let queue = SubscriberQueue(id: id) { [weak self] queueID in self?.remove(queueID) }
        byDownload[downloadID, default: [:]][id] = queue
        downloadOf[id] = downloadID
        lock.unlock()
        return queue
    }

    private func remove(_ queueID: UInt64) {
        lock.lock()
        defer { lock.unlock() }
        guard let download = downloadOf.removeValue(forKey: queueID) else { return }
        byDownload[download]?[queueID] = nil
        if byDownload[download]?.isEmpty == true { byDownload[download] = nil }
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

    func publish(_ event: DownloadEvent, to downloadID: String) {
        for queue in queues(for: downloadID) { queue.push(event) }
    }
}
