import Basics
@testable import DownloaderEngine
import Glibc
import Testing

/// How an attempt that could not open or write its partial ends: a failing disk is the download's
/// failure; a full one is waited on; a process out of descriptors (or the kernel out of memory) is retried.
@Suite struct AttemptJudgementTests {
    static func ended(errno: Int32, function: String = "open") -> AttemptVerdict {
        let error = SystemError(errno: errno, function: function)
        return AttemptVerdict.judge(.notDone, refusal: nil, result: .failure(TransferFailure(.disk, error.description, code: errno)),
                                    requestedOffset: 0, acceptedOffset: nil, diskError: error)
    }

    @Test(arguments: [EMFILE, ENFILE, ENOMEM])
    func aShortageOfDescriptorsOrMemoryIsRetried(errno: Int32) throws {
        guard case .ended(let end) = Self.ended(errno: errno) else { Issue.record("not an ended attempt"); return }
        #expect(end.failure == nil)
        #expect(!end.discardPartial)
        #expect(end.shortage && end.retryAfter == AttemptEnd.shortageDelay)
    }

    /// A full disk or quota is waited on (`SpaceWait`): no failure yet, the bytes kept.
    @Test(arguments: [ENOSPC, EDQUOT])
    func aFullDiskWaitsForSpace(errno: Int32) throws {
        guard case .ended(let end) = Self.ended(errno: errno) else { Issue.record("not an ended attempt"); return }
        #expect(end.failure == nil && !end.discardPartial)
        #expect(end.noSpace && !end.shortage && end.retryAfter == SpaceWait.retryAfter)
    }

    @Test(arguments: [EIO, EACCES])
    func aDiskFaultFailsTheDownload(errno: Int32) throws {
        guard case .ended(let end) = Self.ended(errno: errno) else { Issue.record("not an ended attempt"); return }
        #expect(end.failure?.code == .diskError)
        #expect(!end.shortage && !end.noSpace)
    }
}
