import Testing
@testable import DownloaderEngine

/// Which files of the shared areas the cluster janitor deletes (`OrphanSweep.verdict`).
@Suite struct OrphanSweepTests {
    static let id = "00000000000000a1"
    static let rows: [String: OrphanSweep.Row] = [
        id: OrphanSweep.Row(cacheFile: "\(id).2-f.bin", leaseEpoch: 3, partFile: "\(id).2.part"),
        "00000000000000d4": OrphanSweep.Row(cacheFile: "00000000000000d4.1-y.trash"),
        "00000000000000e5": OrphanSweep.Row(dataFile: "00000000000000e5.1-backup.tmp-copy"),
        "00000000000000b2": OrphanSweep.Row(leaseEpoch: nil),
    ]
    static let tombstoned: Set<String> = ["00000000000000c3"]

    @Test(arguments: [
        // Partials: the current epoch's and the one the lease names stay; older ones and unknown ids go once old.
        ("\(id).3.part", OrphanSweep.Area.partial, OrphanSweep.Verdict.keep),
        ("\(id).2.part", .partial, .keep),
        ("\(id).1.part", .partial, .deleteIfOld),
        ("\(id).4.part", .partial, .keep),
        ("00000000000000b2.1.part", .partial, .keep),  // No lease known: nothing to compare with.
        ("00000000000000ff.7.part", .partial, .deleteIfOld),
        ("00000000000000c3.7.part", .partial, .delete),
        // Cache files: the one the row names stays.
        ("\(id).2-f.bin", .cache, .keep),
        ("\(id).1-f.bin", .cache, .deleteIfOld),
        ("00000000000000ff.1-f.bin", .cache, .deleteIfOld),
        ("00000000000000ff.1", .cache, .deleteIfOld),
        ("00000000000000c3.2-f.bin", .cache, .delete),
        ("\(id).2-f.bin.17.trash", .cache, .deleteIfOld),
        ("\(id).3.part.5.trash", .partial, .deleteIfOld),
        // The data area: only a tombstoned id's files.
        ("00000000000000c3.2-f.bin", .data, .delete),
        ("00000000000000ff.1-f.bin", .data, .keep),
        ("\(id).1-f.bin", .data, .keep),
        ("\(id).2-f.bin.tmp-copy", .data, .deleteIfOld),  // A move's copy a crash cut short.
        ("notes.tmp-copy", .data, .keep),
        // A file its row names stays, whatever its name ends with (an origin's names).
        ("00000000000000e5.1-backup.tmp-copy", .data, .keep),
        ("00000000000000e5.1-backup.tmp-copy.tmp-copy", .data, .deleteIfOld),
        ("00000000000000d4.1-y.trash", .cache, .keep),
        // Names that are not ours are never touched.
        ("notes.txt", .cache, .keep),
        ("notes.txt.trash", .cache, .keep),
        ("\(id).part", .partial, .keep),
        ("\(id)-f.bin", .cache, .keep),
        ("00000000000000A1.1.part", .partial, .keep),
        ("\(id).x.part", .partial, .keep),
        ("\(id).0.part", .partial, .keep),
        ("\(id).1.part.tmp", .partial, .keep),
    ] as [(String, OrphanSweep.Area, OrphanSweep.Verdict)])
    func verdicts(name: String, area: OrphanSweep.Area, expected: OrphanSweep.Verdict) {
        #expect(OrphanSweep.verdict(name, in: area, rows: Self.rows, tombstoned: Self.tombstoned) == expected)
    }
}
