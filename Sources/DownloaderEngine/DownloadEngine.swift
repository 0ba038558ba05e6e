/// The one owner of download state: coalescing, caller tokens, transfers, storage and subscribers.
/// CONTRACT ONLY: the engine helper replaces these bodies; the signatures are what callers use.
public final class DownloadEngine: Sendable {
    public let configuration: EngineConfiguration

    /// Creates the storage areas, loads the state journal and carries on downloads that were running.
    public init(configuration: EngineConfiguration) throws {
        self.configuration = configuration
        fatalError("not implemented yet")
    }

    /// Registers a caller for `request.url`: joins the existing download for the normalised URL,
    /// resumes a paused one, answers from a stored file, or starts a new one. Never awaits.
    public func request(_ request: DownloadRequest) throws(EngineError) -> Enqueued {
        fatalError("not implemented yet")
    }

    /// Withdraws the caller's interest. Returns the download's snapshot (state `paused` when it was
    /// the last caller of an unfinished download), or nil for an unknown or already-used token.
    public func cancel(token: String) -> DownloadSnapshot? {
        fatalError("not implemented yet")
    }

    public func snapshot(id: String) -> DownloadSnapshot? {
        fatalError("not implemented yet")
    }

    /// Every download, newest first.
    public func list() -> [DownloadSnapshot] {
        fatalError("not implemented yet")
    }

    /// Events for download `id`, starting with its current snapshot; nil for an unknown id.
    public func subscribe(id: String) -> DownloadSubscription? {
        fatalError("not implemented yet")
    }

    /// The stored file of a completed download; nil when unknown or not completed.
    public func completedFile(id: String) -> CompletedFile? {
        fatalError("not implemented yet")
    }

    public var statistics: EngineStatistics {
        fatalError("not implemented yet")
    }

    /// Stops every transfer, keeping partials and journaling running downloads so they carry on
    /// after a restart; ends every subscription.
    public func shutdown() async {
        fatalError("not implemented yet")
    }
}

/// Events of one download for one subscriber. Progress is conflated (a slow reader sees the latest
/// snapshot); lifecycle events are kept. Ends after `completed`/`failed`, on engine shutdown, or
/// when the consuming task is cancelled.
public final class DownloadSubscription: AsyncSequence, Sendable {
    public typealias Element = DownloadEvent

    public struct AsyncIterator: AsyncIteratorProtocol {
        public mutating func next() async -> DownloadEvent? {
            fatalError("not implemented yet")
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator() }
}
