import Testing
@testable import DownloaderEngine

/// The lease rules on an injected clock: renew every TTL/3, stop at once when a renewal is refused
/// or fails or the local deadline has passed, write nothing after the deadline.
@Suite struct LeasePolicyTests {
    let policy = LeasePolicy(ttl: 9)
    let lease = HeldLease(key: "k", epoch: 4, renewedAt: 100)

    @Test(arguments: [
        (100.0, LeasePolicy.Decision.wait(until: 103)),
        (102.99, .wait(until: 103)),
        (103.0, .renew),
        (108.99, .renew),
        (109.0, .stop(.deadlinePassed)),
        (500.0, .stop(.deadlinePassed)),
    ])
    func decisionsOverTime(now: Double, expected: LeasePolicy.Decision) {
        #expect(policy.decide(lease, now: now) == expected)
    }

    @Test func writesEndAtTheLocalDeadline() {
        #expect(policy.deadline(lease) == 109)
        #expect(policy.mayWrite(lease, now: 108.999))
        #expect(!policy.mayWrite(lease, now: 109))
        #expect(policy.interval == 3)
    }

    @Test func aSuccessfulRenewalCountsFromWhenItStarted() {
        let (next, decision) = policy.renewed(lease, startedAt: 103, outcome: .renewed, now: 104.5)
        #expect(next.renewedAt == 103 && next.epoch == 4)
        #expect(decision == .wait(until: 106))
        #expect(policy.deadline(next) == 112)
        // A renewal that started before the last success (a late answer) never moves the deadline back.
        let (same, _) = policy.renewed(next, startedAt: 101, outcome: .renewed, now: 105)
        #expect(same.renewedAt == 103)
        // Answered after the deadline it had: the transfer stops even so (it may have been fenced meanwhile).
        let (_, late) = policy.renewed(lease, startedAt: 103, outcome: .renewed, now: 112.5)
        #expect(late == .stop(.deadlinePassed))
    }

    @Test(arguments: [
        (LeasePolicy.RenewalOutcome.refused, 104.0, LeasePolicy.Decision.stop(.refused)),
        (.refused, 200.0, .stop(.refused)),
        (.failed, 104.0, .stop(.unreachable)),
        (.failed, 109.5, .stop(.deadlinePassed)),
    ])
    func aRefusedOrFailedRenewalStopsTheTransferAtOnce(outcome: LeasePolicy.RenewalOutcome, now: Double,
                                                        expected: LeasePolicy.Decision) {
        let (next, decision) = policy.renewed(lease, startedAt: 103, outcome: outcome, now: now)
        #expect(decision == expected)
        #expect(next == lease, "a renewal that did not succeed extends nothing")
    }

    @Test func theSearchForLapsedLeasesRunsEveryThirdOfTheTTL() {
        #expect(policy.scanDue(last: nil, now: 0))
        #expect(!policy.scanDue(last: 10, now: 12.9))
        #expect(policy.scanDue(last: 10, now: 13))
    }
}

/// Each epoch's file names, and where a new epoch's partial starts from.
@Suite struct EpochFilesTests {
    @Test func eachEpochWritesItsOwnFiles() {
        #expect(EpochFiles.partial(id: "ab12", epoch: 3) == "ab12.3.part")
        #expect(EpochFiles.partial(id: "ab12", epoch: 3) != EpochFiles.partial(id: "ab12", epoch: 4))
        #expect(EpochFiles.completed(id: "ab12", epoch: 3, name: "x.iso") == "ab12.3-x.iso")
        #expect(EpochFiles.completed(id: "ab12", epoch: 3, name: nil) == "ab12.3")
    }

    @Test(arguments: [
        ("ab12.3.part", Int64?.some(3)),
        ("ab12.17.part", 17),
        ("ab12.part", nil),
        ("ab12.0.part", nil),
        ("ab12.-1.part", nil),
        ("ab12.3.part.tmp", nil),
        ("ab123.3.part", nil),
        ("ab12.x.part", nil),
    ])
    func theEpochIsReadBackFromAPartialsName(name: String, epoch: Int64?) {
        #expect(EpochFiles.epoch(ofPartial: name, id: "ab12") == epoch)
    }

    @Test func aNewEpochIsSeededUpToTheDurableOffsetOnly() {
        #expect(EpochFiles.seed(previousPartial: nil, durableOffset: 0) == .empty)
        #expect(EpochFiles.seed(previousPartial: "ab12.3.part", durableOffset: 0) == .empty)
        #expect(EpochFiles.seed(previousPartial: nil, durableOffset: 500) == .empty)
        #expect(EpochFiles.seed(previousPartial: "ab12.3.part", durableOffset: 4096) == .copy(from: "ab12.3.part", length: 4096))
    }
}
