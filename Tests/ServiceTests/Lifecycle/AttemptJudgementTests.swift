import Basics
@testable import DownloaderEngine
import Glibc
import Testing

/// How an attempt that could not open or write its partial ends: a full or failing disk is the
/// download's failure; a process out of descriptors (or the kernel out of memory) is retried.
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

    @Test(arguments: [(ENOSPC, DownloadFailure.Code.diskFull), (EDQUOT, .diskFull), (EIO, .diskError), (EACCES, .diskError)])
    func aDiskFaultFailsTheDownload(errno: Int32, code: DownloadFailure.Code) throws {
        guard case .ended(let end) = Self.ended(errno: errno) else { Issue.record("not an ended attempt"); return }
        #expect(end.failure?.code == code)
        #expect(!end.shortage)
    }
}
