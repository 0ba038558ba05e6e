import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Segmented fetch in cluster mode, live (engines in one process on a real PostgreSQL, one shared
/// directory): every segment's write checks the lease's local deadline, every segment's durable
/// offset reaches the row at each checkpoint, and a takeover resumes every segment where it stood.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterSegmentsLiveTests {
    static let piece: Int64 = 256 << 10

    /// A replica allowing `connections` per download, in pieces of `piece` bytes, all opened at once.
    static func replica(_ owner: String, database: String, shared: URL, connections: Int,
                        ttl: Double = ClusterLeaseLiveTests.ttl) throws -> DownloadEngine {
        try ClusterLeaseLiveTests.replica(owner, database: database, shared: shared, ttl: ttl) {
            $0.maxConnectionsPerDownload = connections
            $0.minimumSegmentBytes = piece
            $0.segmentProbeSeconds = 0
            $0.userAgent = Self.userAgent(owner)
        }
    }

    /// The `User-Agent` replica `owner` sends: the origin's log tells whose GET each was.
    static func userAgent(_ owner: String) -> String { "download-service/\(owner)" }

    static func origin(size: Int, bytesPerSecond: Int) throws -> TestOrigin {
        var settings = TestOrigin.Settings()
        settings.bytesPerSecond = bytesPerSecond
        return try TestOrigin(bodySize: size, settings: settings)
    }

    /// Download `id`'s stored segments (nil: none).
    static func segments(of id: String, _ database: String) throws -> [Segment]? {
        try PostgresConnection(url: database, timeout: 5).execute("SELECT segments FROM downloads WHERE id = $1", [id])
            .scalar.flatMap(SegmentJournal.segments)
    }

    /// The first byte a ranged GET asks for (nil: not ranged).
    static func rangeStart(_ request: RecordedRequest) -> Int64? {
        guard let range = request.header("Range"), range.hasPrefix("bytes=") else { return nil }
        return Int64(range.dropFirst("bytes=".count).prefix { $0 != "-" })
    }

    @Test func aSegmentedDownloadTakenOverResumesEverySegmentFromItsDurableOffset() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let origin = try Self.origin(size: 3 << 20, bytesPerSecond: 256 << 10)
            defer { origin.stop() }
            let shared = ClusterLeaseLiveTests.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            // A lease of 3 s: b takes over 2-4 s after a stops renewing, well after the frozen state
            // and the GET count are read (with 1 s, a loaded run read them after b's resuming GETs).
            let a = try Self.replica("a", database: database, shared: shared, connections: 4, ttl: 3)
            let b = try Self.replica("b", database: database, shared: shared, connections: 4, ttl: 3)
            defer { ClusterLeaseLiveTests.shutdown([a, b]) }
            let id = try a.request(DownloadRequest(url: origin.url, connections: 4)).snapshot.id
            // Mid-way: the prefix and a later piece both partly durable in the row.
            let midway = try ClusterLeaseLiveTests.wait(10) {
                guard let table = try Self.segments(of: id, database), (try ClusterLeaseLiveTests.leaseRow(database)?.durable ?? 0) > 0
                else { return false }
                return table.dropFirst().contains { $0.next > $0.start && $0.next < $0.end }
            }
            c.expect(midway, "segments are under way on a")
            a.core.clusterAbandonForTests()
            let abandoned = Date()
            usleep(300_000)  // A commit already on its way lands; a writes nothing more.
            let frozen = try c.require(Self.segments(of: id, database))
            let durable = try c.require(ClusterLeaseLiveTests.leaseRow(database)).durable
            c.expect(b.statistics.cluster?.takeovers == 0, "b took over only after the state was read (\(Date().timeIntervalSince(abandoned)) s after a stopped)")
            try c.expect(try ClusterLeaseLiveTests.wait(30) { try ClusterLeaseLiveTests.state(of: id, database) == "completed" },
                         "the download completes on b")
            c.expect(b.statistics.cluster?.takeovers == 1)
            let path = try c.require(PostgresConnection(url: database, timeout: 5)
                .execute("SELECT final_path FROM downloads WHERE id = $1", [id]).scalar)
            try c.expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == origin.expectedBody(), "byte-identical")
            let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
            c.expect(gets.filter { $0.header("Range") == nil }.count == 1, "one full GET, the rest ranged")
            // b's GETs, by their User-Agent (counting from the freeze would also count a GET that a
            // stopped replica's starved thread sent late).
            let after = gets.filter { $0.header("user-agent") == Self.userAgent("b") }
            c.expect(after.allSatisfy { $0.header("Range") != nil && $0.header("If-Range") != nil }, "every GET after the takeover is ranged under If-Range")
            // The prefix from the lease's durable offset, every partly durable piece from its own.
            let starts = Set(after.compactMap(Self.rangeStart))
            c.expect(starts.contains(durable), "the prefix resumes at \(durable): \(starts.sorted())")
            for segment in frozen.dropFirst() where segment.next > segment.start && segment.next < segment.end {
                c.expect(starts.contains(segment.next), "piece \(segment.start)-\(segment.end) resumes at \(segment.next): \(starts.sorted())")
            }
            // No durable byte is fetched again.
            let ranges = EpochFiles.durableRanges(durableOffset: durable, segments: frozen)
            for start in starts {
                c.expect(!ranges.contains { $0.contains(start) }, "a GET from \(start) asks for durable bytes again: \(ranges)")
            }
        }
    }

    /// A holder whose renewals stop altogether (its keeper thread frozen, as under `SIGSTOP` until
    /// its transfer threads run again) while only a segment's connection still writes: that write
    /// finds the deadline passed, the lease stops and nothing more is written, to the file or a row.
    @Test func aHolderPastItsDeadlineWritesNothingMoreFromAnySegment() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            // Two pieces: the prefix [0, 256 KiB) ends first; the second piece runs on alone.
            let origin = try Self.origin(size: 765 << 10, bytesPerSecond: 96 << 10)
            defer { origin.stop() }
            let shared = ClusterLeaseLiveTests.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let a = try Self.replica("a", database: database, shared: shared, connections: 2)
            defer { ClusterLeaseLiveTests.shutdown([a]) }
            let id = try a.request(DownloadRequest(url: origin.url, connections: 2)).snapshot.id
            let prefixDone = try ClusterLeaseLiveTests.wait(10) {
                let written = a.core.locked { a.core.byID[id]?.attempt?.crew?.table }
                guard let written, written.count == 2, let stored = try Self.segments(of: id, database) else { return false }
                return written[0].isComplete && stored[1].next > stored[1].start
            }
            c.expect(prefixDone, "the prefix is written and the second piece under way (durable in the row)")
            let cluster = try c.require(a.core.cluster)
            let crew = try c.require(a.core.locked { a.core.byID[id]?.attempt?.crew })
            cluster.keeper.stop()  // No renewal, and no keeper to notice the deadline (at most a TTL away).
            c.expect(ClusterLeaseLiveTests.wait(ClusterLeaseLiveTests.ttl + 0.5) { (a.statistics.cluster?.fencedWrites ?? 0) > 0 && a.core.locked { a.core.byID[id] } == nil },
                     "the segment's write found the deadline passed: the lease stopped, the download evicted")
            let written = crew.table[1]
            c.expect(written.next < written.end, "the second piece stopped where it stood, not at its end (\(written.end)): \(written.next)")
            let partial = a.core.store.partialDirectory + "/" + EpochFiles.partial(id: id, epoch: 1)
            // Whatever was in flight settles (a write or commit begun before the deadline may land).
            let bytes = ClusterLeaseLiveTests.settled { FileManager.default.contents(atPath: partial) }
            let row = try ClusterLeaseLiveTests.settled { try Self.segments(of: id, database) }
            usleep(1_000_000)
            c.expect(FileManager.default.contents(atPath: partial) == bytes, "the partial does not change")
            try c.expect(try Self.segments(of: id, database) == row, "the row does not change")
            c.expect((row?[1].next ?? .max) <= written.next, "the row holds no byte the file does not: \(String(describing: row))")
        }
    }
}
