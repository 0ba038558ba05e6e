import Foundation
import Synchronization

// The state area as start-up found it, and the state's commits.
extension DownloadEngine {
    /// State files start-up found unusable and renamed aside (a damaged `state.db`, an unreadable
    /// `journal.json`): the engine started without what they held. The service logs each as an error.
    public var stateSetAside: [String] {
        guard case .unreadable(let journal) = recovery.journal else { return recovery.damagedStateKeptAt.map { [$0] } ?? [] }
        return [recovery.damagedStateKeptAt, journal].compactMap { $0 }
    }

    /// Downloads imported from an earlier release's `journal.json` at this start, entries that could
    /// not be, and where the journal was then kept (nil: deleted, all imported). Nil: no journal.
    public var importedJournal: (downloads: Int, skipped: Int, keptAt: String?)? {
        guard case .imported(let count, let skipped, let keptAt) = recovery.journal else { return nil }
        return (count, skipped, keptAt)
    }

    /// Why the database set aside at this start was found damaged (nil: none was).
    public var stateDamage: String? { recovery.stateDamage }

    /// Damaged databases an earlier start set aside, still kept: no file is swept while one is.
    public var damagedStatesKeptEarlier: [String] { recovery.damagedStatesKeptEarlier }

    /// Journals an earlier start could not wholly import, still kept: no file is swept while one is.
    public var journalsKeptEarlier: [String] {
        guard case .keptEarlier(let paths) = recovery.journal else { return [] }
        return paths
    }

    /// How many certificates `--ca-file` added to the system's roots (nil: none given).
    public var trustedCertificateCount: Int? { Self.trust(of: core.driver)?.count }

    /// The extra CAs `driver`'s transfers trust (webhook deliveries trust them too).
    static func trust(of driver: TransferStarting) -> TrustedCertificates? { (driver as? CurlTransferDriver)?.settings.trust }

    /// Waits (at most `timeout` seconds) until every change decided before this call is committed,
    /// so that what was just answered survives a crash (a cancelled token does not come back).
    /// Changes at once share a commit. False when the wait timed out (commits failing: the change
    /// holds in memory and its commit is retried).
    public func committed(within timeout: Double) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answered = Mutex(false)
            let answer: @Sendable (Bool) -> Void = { done in
                if answered.withLock({ was in defer { was = true }; return !was }) { continuation.resume(returning: done) }
            }
            core.stateWriter.whenDurable { answer(true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { answer(false) }
        }
    }

    /// Calls `handler` (on the state writer's thread) when commits of the state start failing, with
    /// why (they are retried every second), and with nil once one succeeds again. The service logs it.
    public func onStateCommitHealth(_ handler: @escaping @Sendable (_ failure: String?) -> Void) {
        core.stateWriter.onHealthChange { handler($0?.description) }
    }
}
