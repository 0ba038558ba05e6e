/// What the engine makes of an attempt's response head: `ResumePlan`'s reading of the status,
/// ranges and validators, then the limits (the largest file allowed, the size a caller expects). Pure.
enum HeadJudgement: Equatable, Sendable {
    /// Write the body at `offset` (0: a full body); `total` is the file's size when announced.
    case accept(offset: Int64, total: Int64?)
    case refuse(Refusal)

    /// Why a head was refused: what the attempt's end will mean.
    enum Refusal: Equatable, Sendable {
        /// An unusable partial answer: discard the kept bytes, try again from 0.
        case restart(String)
        /// A transient HTTP answer (5xx, 408, 429): retry, honouring `Retry-After`.
        case httpRetry(status: Int, retryAfter: String?)
        /// A final HTTP answer.
        case httpFail(status: Int)
        /// A limit or expectation the file breaks; `discard`: the kept bytes go too.
        case fail(DownloadFailure, discard: Bool)

        /// The message the aborted transfer reports.
        var transferMessage: String {
            switch self {
            case .restart(let reason): reason
            case .httpRetry(let status, _), .httpFail(let status): "HTTP \(status)"
            case .fail(let failure, _): failure.code == .tooLarge ? "too large" : "size mismatch"
            }
        }
    }

    static func judge(_ head: ResponseHead, plan: ResumePlan.Request, sentValidator: Validator?, knownTotal: Int64?,
                      maxFileSize: Int64?, expectedSize: Int64?) -> HeadJudgement {
        switch ResumePlan.decide(head: head, requested: plan, sentValidator: sentValidator, knownTotal: knownTotal) {
        case .restartNextAttempt(let reason):
            return .refuse(.restart(reason))
        case .retry(let status, let retryAfter):
            return .refuse(.httpRetry(status: status, retryAfter: retryAfter))
        case .fail(let status):
            return .refuse(.httpFail(status: status))
        case .accept(let offset, let restarted, let total):
            // A full body to a resume: the kept bytes are of another version, nothing to keep them for.
            if let limit = maxFileSize, let total, total > limit {
                return .refuse(.fail(DownloadFailure(code: .tooLarge, message: "the file has \(total) bytes, more than the limit of \(limit)"),
                                     discard: restarted))
            }
            if let expected = expectedSize, let total, total != expected {
                return .refuse(.fail(DownloadFailure(code: .sizeMismatch, message: "the origin announces \(total) bytes, expected \(expected)"),
                                     discard: true))
            }
            return .accept(offset: offset, total: total)
        }
    }
}
