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
        #expect(EpochFiles.seed(previousPartial: "ab12.3.part", durableOffset: 4096) == .copy(from: "ab12.3.part", ranges: [0..<4096]))
        // Pieces kept behind an empty prefix are seeded too.
        let pieces = SegmentJournal.segments("0-100-0;100-200-150")
        #expect(EpochFiles.seed(previousPartial: "ab12.3.part", durableOffset: 0, segments: pieces) == .copy(from: "ab12.3.part", ranges: [100..<150]))
    }

    /// A segmented download's seed: the prefix up to the lease's durable offset and every later
    /// segment up to its own durable `next`, merged where they touch.
    @Test(arguments: [
        // (durable offset, segments as start-end-next, ranges)
        (4096, nil, [0..<4096]),
        (100, "0-100-100;100-200-150;200-300-200;300-400-400", [0..<150, 300..<400]),
        (60, "0-100-80;100-200-130;200-300-250", [0..<60, 100..<130, 200..<250]),
        (150, "0-100-100;100-200-150;200-300-210", [0..<150, 200..<210]),  // An absorbed prefix covers piece 1.
        (0, "0-100-0;100-200-150", [100..<150]),  // Pieces behind an empty prefix.
        (100, "0-100-100;100-200-200;200-300-300", [0..<300]),
    ] as [(Int64, String?, [Range<Int64>])])
    func aSegmentedSeedIsTheUnionOfTheDurableRanges(durable: Int64, segments: String?, ranges: [Range<Int64>]) {
        #expect(EpochFiles.durableRanges(durableOffset: durable, segments: segments.flatMap(SegmentJournal.segments)) == ranges)
    }

    /// What the new epoch resumes from: the prefix as far as it was copied (at most the durable
    /// offset), every segment cut back to what the copy holds; no segments when nothing was copied.
    @Test(arguments: [
        // (durable offset, segments, copied ranges, kept, resumed segments)
        (100, "0-100-100;100-200-150;200-300-200;300-400-400", [0..<150, 300..<400], 100, "0-100-100;100-200-150;200-300-200;300-400-400"),
        (100, "0-100-100;100-200-150;200-300-200;300-400-400", [0..<120], 100, "0-100-100;100-200-120;200-300-200;300-400-300"),
        (60, "0-100-80;100-200-130", [0..<40], 40, "0-100-40;100-200-100"),
        (60, "0-100-80;100-200-130", [], 0, nil),
        (0, "0-100-0;100-200-150", [100..<150], 0, "0-100-0;100-200-150"),  // Pieces behind an empty prefix resume.
        (4096, nil, [0..<4096], 4096, nil),
        (150, "0-100-100;100-200-150;200-300-210", [0..<150, 200..<210], 150, "0-100-100;100-200-150;200-300-210"),
        // The table older than the lease's durable offset: the prefix absorbed pieces the table shows
        // untouched. Nothing durable is fetched again (a live takeover asked piece 1 from its start).
        (250, "0-100-100;100-200-100;200-300-200;300-400-300", [0..<250], 250, "0-100-100;100-200-200;200-300-250;300-400-300"),
    ] as [(Int64, String?, [Range<Int64>], Int64, String?)])
    func aSeededEpochResumesWhatWasCopied(durable: Int64, segments: String?, copied: [Range<Int64>], kept: Int64, resumed: String?) {
        let seeded = EpochFiles.seeded(durableOffset: durable, segments: segments.flatMap(SegmentJournal.segments), copied: copied)
        #expect(seeded.kept == kept)
        #expect(seeded.segments.map(SegmentJournal.text) == resumed)
    }
}
