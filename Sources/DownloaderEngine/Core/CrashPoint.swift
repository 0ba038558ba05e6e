/// A place where the engine SIGKILLs its own process, so crash tests through the real executable
/// hit the narrow windows deterministically (`EngineConfiguration.testCrashPoint`; the service reads
/// it from `DOWNLOAD_SERVICE_TEST_CRASH_POINT`). Never set in production.
public enum CrashPoint: Sendable, Equatable {
    /// A verified, fsynced file whose publishing intent is journaled, right before its rename.
    case beforePublishRename
    /// Right after that rename, before the journal says `completed`.
    case afterPublishRename
    /// Half-way through writing the temporary file of the `n`th journal write (before its fsync
    /// and rename).
    case midJournalWrite(Int)

    /// `before-publish-rename`, `after-publish-rename`, or `mid-journal-write:N`.
    public init?(_ text: String) {
        switch text {
        case "before-publish-rename": self = .beforePublishRename
        case "after-publish-rename": self = .afterPublishRename
        default:
            guard text.hasPrefix("mid-journal-write:"), let n = Int(text.dropFirst(18)), n > 0 else { return nil }
            self = .midJournalWrite(n)
        }
    }
}
