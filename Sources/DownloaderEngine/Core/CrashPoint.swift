/// A place where the engine SIGKILLs its own process, so crash tests through the real executable
/// hit the narrow windows deterministically (`EngineConfiguration.testCrashPoint`; the service reads
/// it from `DOWNLOAD_SERVICE_TEST_CRASH_POINT`). Never set in production.
public enum CrashPoint: Sendable, Equatable {
    /// A verified, fsynced file whose publishing intent is committed, right before its rename.
    case beforePublishRename
    /// Right after that rename, before the state says `completed`.
    case afterPublishRename
    /// Half-way through the `n`th commit of the state store (its first half written inside the
    /// transaction, before its COMMIT).
    case midStateCommit(Int)

    /// `before-publish-rename`, `after-publish-rename`, or `mid-state-commit:N`.
    public init?(_ text: String) {
        switch text {
        case "before-publish-rename": self = .beforePublishRename
        case "after-publish-rename": self = .afterPublishRename
        default:
            guard text.hasPrefix("mid-state-commit:"), let n = Int(text.dropFirst(17)), n > 0 else { return nil }
            self = .midStateCommit(n)
        }
    }
}
