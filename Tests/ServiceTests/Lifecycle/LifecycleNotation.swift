@testable import DownloaderEngine

/// The short forms the lifecycle table is written in: a state reads `paused #1 settling abandoned`,
/// actions read `keep-settled emit:paused journal`.
enum LifecycleNotation {
    static func state(_ l: DownloadLifecycle) -> String {
        var parts: [String]
        switch l.phase {
        case .queued: parts = ["queued"]
        case .running(.attempt): parts = ["running(attempt)"]
        case .running(.backingOff(let token)): parts = ["running(backingOff#\(token))"]
        case .running(.awaitingDrain): parts = ["running(awaitingDrain)"]
        case .running(.stopped): parts = ["running(stopped)"]
        case .paused: parts = ["paused"]
        case .completed: parts = ["completed"]
        case .failed: parts = ["failed"]
        }
        if let a = l.attempt {
            parts.append("#\(a.serial) \(a.stage)")
            if a.abandoned { parts.append("abandoned") }
        }
        if l.held { parts.append("held") }
        if l.moving { parts.append("moving") }
        return parts.joined(separator: " ")
    }

    static func actions(_ actions: [LifecycleAction]) -> String {
        actions.map(action).joined(separator: " ")
    }

    static func action(_ a: LifecycleAction) -> String {
        switch a {
        case .requestSlot: "request-slot"
        case .leaveQueue: "leave-queue"
        case .releaseSlot: "release-slot"
        case .startAttempt(let serial): "start#\(serial)"
        case .cancelTransfer(let serial): "cancel#\(serial)"
        case .acceptBody: "accept-body"
        case .refuseBody: "refuse-body"
        case .abortUnwanted: "abort-unwanted"
        case .keepDurableOffset: "keep-durable"
        case .settle(let serial): "settle#\(serial)"
        case .closeStaleAttempt: "close-stale"
        case .keepSettledPartial: "keep-settled"
        case .scheduleRetry(let token, let made, let after): "retry#\(token)/\(made)" + (after.map { "(\($0))" } ?? "")
        case .discardPartial: "discard-partial"
        case .forgetValidator: "forget-validator"
        case .recordPublishing: "record-publishing"
        case .recordCompletion: "record-completion"
        case .recordFailure(let f): "record-failure(\(f.code.rawValue))"
        case .clearFailure: "clear-failure"
        case .resetResult: "reset-result"
        case .moveFile: "move-file"
        case .emit(let notice): "emit:\(notice)"
        case .journal: "journal"
        case .housekeeping(.boundEmptyPaused): "bound-empty-paused"
        case .housekeeping(.purgeCache): "purge-cache"
        case .housekeeping(.forgetOldFailures): "forget-old-failures"
        }
    }
}
