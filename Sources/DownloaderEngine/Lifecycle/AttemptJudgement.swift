import Basics
/// What settling an ended attempt achieved (on the work queue, without the engine's lock).
enum Settlement: Equatable, Sendable {
    /// The whole body is verified, fsynced and renamed into its area.
    case published(PublishedFile)
    /// The whole body arrived but is wrong (size, SHA-256) or could not be made durable.
    case failed(DownloadFailure, discard: Bool)
    /// The body ended short of the announced size: resume.
    case incomplete
    /// Nothing to verify: the attempt ended without a whole body.
    case notDone

    var isPublished: Bool {
        if case .published = self { return true }
        return false
    }

    /// A later attempt goes on from the partial's bytes.
    var resumes: Bool {
        switch self {
        case .incomplete, .notDone: true
        case .published, .failed: false
        }
    }
}

/// A verified file in its area.
struct PublishedFile: Equatable, Sendable {
    var path: String
    var sha256: String
    var size: Int64
    var storage: StorageClass
}

extension AttemptVerdict {
    /// The verdict on an ended attempt, from what settling achieved, why its head was refused (if
    /// it was), and how its transfer ended. Pure; the lifecycle decides what the verdict means for
    /// the download (an abandoned attempt's failure is not the download's, for one).
    static func judge(_ settlement: Settlement, refusal: HeadJudgement.Refusal?,
                      result: Result<TransferSummary, TransferFailure>, requestedOffset: Int64, acceptedOffset: Int64?,
                      diskError: SystemError?) -> AttemptVerdict {
        switch settlement {
        case .published: return .published
        case .failed(let failure, let discard): return .rejected(failure, discardPartial: discard)
        case .incomplete: return .ended(AttemptEnd())
        case .notDone: break
        }
        var end = AttemptEnd()
        if let refusal {
            switch refusal {
            case .restart: end.restart = true
            case .httpRetry(let status, let retryAfter):
                end.retryAfter = retryAfter
                end.httpStatus = status
                end.reason = "HTTP \(status)"
            case .httpFail(let status):
                // The kept bytes stay (as for any refusal): a resource that comes back the same (a
                // CDN node's passing 404, a signed URL that expired and is asked again with a fresh
                // signature) is resumed with `If-Range`; a changed one answers 200 and starts over.
                end.failure = DownloadFailure(code: .httpError, message: "the origin answered HTTP \(status)", httpStatus: status)
                end.httpStatus = status
                end.reason = "HTTP \(status)"
            case .fail(let failure, let discard):
                end.failure = failure
                end.discardPartial = discard
            }
        } else if case .failure(let failure) = result {
            if let errno = passingErrno(failure, diskError) {
                end.shortage = AttemptEnd.isShortage(errno)
                end.noSpace = !end.shortage
                end.retryAfter = end.shortage ? AttemptEnd.shortageDelay : SpaceWait.retryAfter
            }
            end.reason = failure.message
            end.exhaustionCode = RetryPolicy.exhaustionCode(failure.kind)
            // More bytes than announced: what was kept cannot be trusted either.
            end.discardPartial = failure.kind == .contentLengthMismatch
            end.failure = downloadFailure(after: failure, requestedOffset: requestedOffset, acceptedOffset: acceptedOffset,
                                          diskError: diskError)
        }
        return .ended(end)
    }

    /// The errno of a disk failure that passes (`AttemptEnd.passes`: a shortage, a full disk), else nil.
    private static func passingErrno(_ failure: TransferFailure, _ diskError: SystemError?) -> Int32? {
        guard failure.kind == .disk, let errno = diskError?.errno ?? failure.code, AttemptEnd.passes(errno) else { return nil }
        return errno
    }

    /// nil: retry. Otherwise the failure to report (codes from `RetryPolicy.classify`).
    static func downloadFailure(after failure: TransferFailure, requestedOffset: Int64, acceptedOffset: Int64?,
                                diskError: SystemError?) -> DownloadFailure? {
        switch failure.kind {
        case .cancelled:
            return nil  // Not cancelled by us (we only cancel abandoned attempts): try again.
        case .disk:
            // A shortage passes: tried again (`AttemptEnd.shortage`), the disk is fine. A full disk
            // is waited on (`AttemptEnd.noSpace`): the lifecycle fails it once the wait is over.
            if passingErrno(failure, diskError) != nil { return nil }
            if let diskError { return .disk(diskError) }
            if let code = failure.code { return .disk(SystemError(errno: code, function: "write")) }
            return DownloadFailure(code: .diskError, message: failure.message)
        default:
            switch RetryPolicy.classify(failure.kind) {
            case .retry: return nil
            case .fail(let code): return DownloadFailure(code: code, message: failure.message)
            }
        }
    }
}

extension DownloadFailure {
    /// A failed write, sync or rename: `disk_full` when the device (or quota) is full, else `disk_error`.
    static func disk(_ error: SystemError) -> DownloadFailure {
        error.isNoSpace
            ? DownloadFailure(code: .diskFull, message: "no space left on the device")
            : DownloadFailure(code: .diskError, message: error.description)
    }
}
