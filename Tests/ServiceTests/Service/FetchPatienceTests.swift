import DownloaderEngine
import Foundation
import Testing
@testable import DownloadService

/// How long a `/fetch` reader waits before its answer's head for a download that does not move on:
/// each stand counted while it lasts, from 0 again once the download left it.
@Suite struct FetchPatienceTests {
    typealias S = FetchPatience.Stand

    /// (stands seen, one second apart) → the verdict at the last one.
    @Test(arguments: [
        ([S.moving, .moving, .moving], FetchPatience.Verdict.wait),
        (Array(repeating: .queued, count: 10), .wait),
        (Array(repeating: .queued, count: 11), .giveUpQueued),
        (Array(repeating: .held, count: 3), .wait),
        (Array(repeating: .held, count: 4), .giveUpHeld),
        (Array(repeating: .waitingForSpace, count: 4), .giveUpForSpace),
        // Moving on in between starts the wait again.
        ([.waitingForSpace, .waitingForSpace, .moving, .waitingForSpace, .waitingForSpace, .waitingForSpace], .wait),
        ([.held, .held, .held, .waitingForSpace], .wait),
        ([.queued, .queued, .held, .held, .held, .held], .giveUpHeld),
    ] as [([S], FetchPatience.Verdict)])
    func verdicts(stands: [S], verdict: FetchPatience.Verdict) {
        var patience = FetchPatience(queuedLimit: 10, stallTimeout: 3)
        var last = FetchPatience.Verdict.wait
        for stand in stands {
            last = patience.judge(stand)
            guard last == .wait else { break }
            patience.waited(1, at: stand)
        }
        #expect(last == verdict)
    }

    /// A download waiting for disk space counts as such only while another caller wants it too:
    /// a sole reader that gave up would leave it paused, its partial the first a low disk purges.
    @Test func waitingForSpaceCountsOnlyWithOtherCallers() {
        func snapshot(_ state: DownloadState, callers: Int, reason: String? = nil, pausedBy: PauseCause? = nil) -> DownloadSnapshot {
            DownloadSnapshot(id: "a", url: "http://o.test/f", state: state, storage: .cache, callers: callers,
                             createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0), reason: reason,
                             pausedBy: pausedBy)
        }
        #expect(DownloadAPI.stand(of: snapshot(.downloading, callers: 2, reason: "disk_full")) == .waitingForSpace)
        #expect(DownloadAPI.stand(of: snapshot(.downloading, callers: 1, reason: "disk_full")) == .moving)
        #expect(DownloadAPI.stand(of: snapshot(.downloading, callers: 2)) == .moving)
        #expect(DownloadAPI.stand(of: snapshot(.queued, callers: 1)) == .queued)
        #expect(DownloadAPI.stand(of: snapshot(.paused, callers: 1, pausedBy: .operator)) == .held)
        #expect(DownloadAPI.stand(of: nil) == .moving)
    }
}
