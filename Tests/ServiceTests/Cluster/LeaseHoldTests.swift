import Foundation
import Testing
@testable import DownloaderEngine

/// What a held lease allows its writers (pure but for the clock argument), and the seeding of a new
/// epoch's partial from the previous one's durable prefix.
@Suite struct LeaseHoldTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var renewedAt: Double?
        var stopped = false
        var now: Double
        var mayWrite: Bool
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "just acquired", now: 100, mayWrite: true),
        Case(name: "just before the deadline", now: 102.999, mayWrite: true),
        Case(name: "at the deadline", now: 103, mayWrite: false),
        Case(name: "past the deadline", now: 150, mayWrite: false),
        Case(name: "renewed: the deadline counts from the renewal's start", renewedAt: 102, now: 104.5, mayWrite: true),
        Case(name: "renewed, then past", renewedAt: 102, now: 105, mayWrite: false),
        Case(name: "stopped", stopped: true, now: 100, mayWrite: false),
        Case(name: "stopped after a renewal", renewedAt: 102, stopped: true, now: 102.5, mayWrite: false),
    ]

    @Test(arguments: cases) func mayWrite(_ c: Case) {
        let hold = LeaseHold(key: "k", epoch: 2, acquiredAt: 100, ttl: 3)
        if let renewedAt = c.renewedAt { hold.update(HeldLease(key: "k", epoch: 2, renewedAt: renewedAt)) }
        if c.stopped { #expect(hold.stop()) }
        #expect(hold.mayWrite(now: c.now) == c.mayWrite)
    }

    @Test func aLeaseStopsOnceAndNamesItsEpochsPartial() {
        let hold = LeaseHold(key: "k", epoch: 7, acquiredAt: 0, ttl: 1)
        #expect(hold.partFile == nil)
        hold.id = "abc"
        #expect(hold.partFile == "abc.7.part")
        #expect(hold.stop())
        #expect(!hold.stop(), "the second stop is not the first")
        #expect(hold.isStopped)
    }

    @Test func seedingCopiesTheDurablePrefixOnly() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ds-seed-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(FileManager.default.createFile(atPath: dir + "/x.1.part", contents: Data(bytes)))
        #expect(EpochSeeding.copy(from: dir + "/x.1.part", to: dir + "/x.2.part", length: 2_500_000) == 2_500_000)
        #expect(FileManager.default.contents(atPath: dir + "/x.2.part") == Data(bytes[..<2_500_000]))
        // A shorter source gives what it has; a missing one nothing (and no file).
        #expect(EpochSeeding.copy(from: dir + "/x.1.part", to: dir + "/x.3.part", length: 9_000_000) == 3_000_000)
        #expect(EpochSeeding.copy(from: dir + "/gone.part", to: dir + "/x.4.part", length: 10) == 0)
        #expect(!FileManager.default.fileExists(atPath: dir + "/x.4.part"))
        #expect(EpochSeeding.copy(from: dir + "/x.1.part", to: dir + "/x.5.part", length: 0) == 0)
    }

    @Test func seedingCopiesEachDurableRangeInPlace() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ds-seed-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        #expect(FileManager.default.createFile(atPath: dir + "/x.1.part", contents: Data(bytes)))
        let ranges: [Range<Int64>] = [0..<1_500_000, 2_000_000..<2_100_000, 2_900_000..<3_200_000]
        let copied = EpochSeeding.seed(from: dir + "/x.1.part", to: dir + "/x.2.part", ranges: ranges).copied
        #expect(copied == [0..<1_500_000, 2_000_000..<2_100_000, 2_900_000..<3_000_000], "cut where the source ends")
        let seeded = try #require(FileManager.default.contents(atPath: dir + "/x.2.part"))
        #expect(seeded.count == 3_000_000)
        for range in copied {
            #expect(seeded[Int(range.lowerBound)..<Int(range.upperBound)] == Data(bytes[Int(range.lowerBound)..<Int(range.upperBound)]))
        }
        #expect(seeded[1_500_000..<2_000_000].allSatisfy { $0 == 0 }, "a gap stays a hole")
        #expect(EpochSeeding.seed(from: dir + "/gone.part", to: dir + "/x.3.part", ranges: ranges) == ([], false))
        #expect(!FileManager.default.fileExists(atPath: dir + "/x.3.part"))
    }

    /// A partial's name on the shared volume replaced by a symbolic link is never followed out of
    /// it: nothing of the link's target is copied. A seeded partial is readable as any partial is.
    @Test func seedingNeverFollowsALinkAndMakesAPartialLikeAnyOther() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ds-seed-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(FileManager.default.createFile(atPath: dir + "/secret", contents: Data(repeating: 7, count: 4096)))
        #expect(symlink(dir + "/secret", dir + "/x.1.part") == 0)
        #expect(EpochSeeding.seed(from: dir + "/x.1.part", to: dir + "/x.2.part", ranges: [0..<4096]).copied.isEmpty)
        #expect(FileManager.default.contents(atPath: dir + "/x.2.part") == nil, "no partial made of the link's target")
        #expect(FileManager.default.createFile(atPath: dir + "/y.1.part", contents: Data(repeating: 1, count: 100)))
        #expect(EpochSeeding.seed(from: dir + "/y.1.part", to: dir + "/y.2.part", ranges: [0..<100]).copied == [0..<100])
        let mode = try #require(FileManager.default.attributesOfItem(atPath: dir + "/y.2.part")[.posixPermissions] as? Int)
        #expect(mode & 0o044 == 0o044, "readable as a partial made by PartialFile (0644 under the umask)")
    }

    /// Across filesystems (the temporary directory and `/dev/shm`) the kernel may refuse to copy
    /// (`EXDEV`): the copy is made by hand, the same bytes.
    @Test(.enabled(if: FileManager.default.isWritableFile(atPath: "/dev/shm"))) func seedingAcrossFilesystemsCopiesByHand() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ds-seed-\(UUID().uuidString)").path
        let other = "/dev/shm/ds-seed-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir); unlink(other) }
        let bytes = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        #expect(FileManager.default.createFile(atPath: dir + "/x.1.part", contents: Data(bytes)))
        #expect(EpochSeeding.seed(from: dir + "/x.1.part", to: other, ranges: [0..<1_000_000, 1_500_000..<2_000_000]).copied
                == [0..<1_000_000, 1_500_000..<2_000_000])
        let seeded = try #require(FileManager.default.contents(atPath: other))
        #expect(seeded[..<1_000_000] == Data(bytes[..<1_000_000]) && seeded[1_500_000...] == Data(bytes[1_500_000...]))
    }
}
