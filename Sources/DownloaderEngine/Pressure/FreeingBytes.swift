import Synchronization

/// Bytes of files the engine decided to delete whose deletion has not finished (it runs on the
/// work queue, after the lock): the free space a sample shows does not count them yet. A pressure
/// check adds them to what it samples, or a check running before the last one's deletions are done
/// (the tick's and the one before an attempt) would purge again for space already being freed.
/// Counted when a deletion is decided, uncounted once it is done.
final class FreeingBytes: Sendable {
    enum Area: Sendable {
        /// The state area's partials.
        case partials
        /// The cache area's files.
        case cache
    }

    private let counts = Mutex<(partials: Int64, cache: Int64)>((0, 0))

    func add(_ bytes: Int64, in area: Area) { change(by: bytes, area) }

    func done(_ bytes: Int64, in area: Area) { change(by: -bytes, area) }

    func pending(_ area: Area) -> Int64 {
        counts.withLock { max(0, area == .partials ? $0.partials : $0.cache) }
    }

    private func change(by bytes: Int64, _ area: Area) {
        guard bytes != 0 else { return }
        counts.withLock {
            switch area {
            case .partials: $0.partials &+= bytes
            case .cache: $0.cache &+= bytes
            }
        }
    }
}
