import Synchronization

extension DownloadEngine {
    /// Joins (or starts, or resumes) the download for `request.url` as a streaming reader: it counts
    /// as a caller (in `callers` and against `maxCallersPerDownload`) for as long as the returned
    /// reader is open; closing it (or dropping it) withdraws that interest, and when it was the last
    /// the download pauses with its bytes kept, exactly as when the last caller token is cancelled.
    /// Readers are not stored. Throws as `request(_:)` does.
    public func attachReader(_ request: DownloadRequest) throws(EngineError) -> DownloadReader {
        let request = try screened(request)
        let core = self.core
        return try core.join(request, as: .reader) { joined in
            let (id, tail) = (joined.record.id, joined.record.tail!)
            return DownloadReader(id: id, snapshot: joined.record.snapshot(), coalesced: joined.coalesced,
                                  tail: tail) { core.detachReader(id: id, tail: tail) }
        }
    }
}

/// One streaming reader's hold on a download, and its view of the bytes (`TailState`).
public final class DownloadReader: Sendable {
    public let id: String
    /// The download when the reader joined.
    public let snapshot: DownloadSnapshot
    /// An existing transfer or stored file was joined.
    public let coalesced: Bool
    private let tail: DownloadTail
    private let detach: @Sendable () -> Void
    /// Whether the reader is open, and its watcher on `tail`: one lock, so that `watch` and `close`
    /// decide in one order (a watcher registered after `close` took the last one would stay on the
    /// tail, and be told, until the download goes away).
    private let hold = Mutex(Hold())

    private struct Hold {
        var open = true
        var watcher: UInt64?
    }

    init(id: String, snapshot: DownloadSnapshot, coalesced: Bool, tail: DownloadTail, detach: @escaping @Sendable () -> Void) {
        self.id = id
        self.snapshot = snapshot
        self.coalesced = coalesced
        self.tail = tail
        self.detach = detach
    }

    deinit { close() }

    /// What can be read now.
    public var state: TailState { tail.current }

    /// Signs of the download's life beyond `state` (bytes on other connections, the final checks).
    public var liveness: TailLiveness { tail.liveness }

    /// `onChange` is called (on an engine thread: do little, e.g. wake a stream) after `state`
    /// changed, until the reader is closed: after any change but new bytes, and after new bytes
    /// when asked for (`awaitMoreBytes`). Changes close together are told once. One watcher per
    /// reader; a second call replaces the first; on a closed reader it does nothing.
    public func watch(_ onChange: @escaping @Sendable () -> Void) {
        // Registered under the reader's lock (the tail's lock is taken inside it, never the other
        // way round): a closed reader registers nothing.
        let previous = hold.withLock { hold -> UInt64? in
            guard hold.open else { return nil }
            let previous = hold.watcher
            hold.watcher = tail.watch(onChange)
            return previous
        }
        if let previous { tail.unwatch(previous) }
    }

    /// The watcher is told when the next bytes land (once per call; for a reader that sent every
    /// byte there was). Read `state` again after asking: bytes that landed before are not told.
    public func awaitMoreBytes() {
        if let id = hold.withLock({ $0.watcher }) { tail.awaitMoreBytes(id) }
    }

    /// Withdraws the reader's interest (once; later calls do nothing).
    public func close() {
        let (wasOpen, watcher) = hold.withLock { hold in
            defer { hold = Hold(open: false, watcher: nil) }
            return (hold.open, hold.watcher)
        }
        guard wasOpen else { return }
        if let watcher { tail.unwatch(watcher) }
        detach()
    }
}
