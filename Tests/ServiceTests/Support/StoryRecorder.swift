import Foundation
@testable import DownloaderEngine

/// Collects the engine's `DownloadStory` steps (give `tell` as the configuration's storyteller),
/// with a bounded wait for a step to arrive (steps are told off the engine's lock, so shortly after
/// the event a subscriber sees).
final class StoryRecorder: @unchecked Sendable {
    private let condition = NSCondition()
    private var stories: [DownloadStory] = []

    var tell: @Sendable (DownloadStory) -> Void {
        { [self] story in
            condition.lock()
            stories.append(story)
            condition.broadcast()
            condition.unlock()
        }
    }

    /// The steps of download `id` so far, in order.
    func events(of id: String) -> [DownloadStory.Event] {
        condition.lock(); defer { condition.unlock() }
        return stories.filter { $0.id == id }.map(\.event)
    }

    /// Waits (on a thread of its own, `timeout` at most) until a step of `id` satisfies `matches`;
    /// returns the steps of `id` then.
    func wait(for id: String, timeout: Double = 10,
              until matches: @escaping @Sendable (DownloadStory.Event) -> Bool) async throws -> [DownloadStory.Event] {
        try await onThread { [self] in
            let deadline = Date().addingTimeInterval(timeout)
            condition.lock(); defer { condition.unlock() }
            while true {
                let mine = stories.filter { $0.id == id }.map(\.event)
                if mine.contains(where: matches) { return mine }
                if !condition.wait(until: deadline) { throw TimeoutError(seconds: timeout) }
            }
        }
    }
}

extension DownloadStory.Event {
    /// The event's name as the log writes it (`created`, `attempt_started`, …).
    var name: String {
        switch self {
        case .created: "created"
        case .joined: "joined"
        case .resumed: "resumed"
        case .attemptStarted: "attempt_started"
        case .headReceived: "head_received"
        case .retryScheduled: "retry_scheduled"
        case .connectionsDecided: "connections_decided"
        case .paused: "paused"
        case .completed: "completed"
        case .failed: "failed"
        case .purged: "purged"
        case .moved: "moved"
        case .moveFailed: "move_failed"
        case .recovered: "recovered"
        case .stopped: "stopped"
        case .released: "released"
        case .removed: "removed"
        }
    }

    var isEnd: Bool { name == "completed" || name == "failed" }
}
