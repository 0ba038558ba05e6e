import Foundation
import Testing
@testable import DownloaderEngine

/// Segmented fetch in the engine, against a scripted origin (`RangedFakeOrigin`): pieces of at
/// least 10 000 bytes here (8 MiB in production; a 40 000-byte body is four pieces, one per
/// connection), a limit of 4 connections.
@Suite struct EngineSegmentTests {
    static let url = "http://o.test/big.bin"
    let body = EngineFixture.body(40_000)

    /// `probe`: `EngineConfiguration.segmentProbeSeconds` (0 here: every connection opens at once).
    static func engine(_ driver: FakeTransferDriver, limit: Int = 4, minimum: Int64 = 10_000, probe: Double = 0,
                       root: URL = EngineFixture.root()) throws -> DownloadEngine {
        try EngineFixture.engine(root, driver: driver) {
            $0.maxConnectionsPerDownload = limit
            $0.minimumSegmentBytes = minimum
            $0.segmentProbeSeconds = probe
        }
    }

    /// Requests the URL with `connections` and waits for the terminal event.
    static func fetch(_ engine: DownloadEngine, connections: Int) async throws -> (id: String, events: [DownloadEvent]) {
        let r = try engine.request(DownloadRequest(url: url, connections: connections))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        if r.snapshot.state == .completed { return (r.snapshot.id, []) }
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        return (r.snapshot.id, events)
    }

    static func completedBytes(_ engine: DownloadEngine, _ id: String) throws -> Data {
        let file = try #require(engine.completedFile(id: id))
        return try Data(contentsOf: URL(fileURLWithPath: file.path))
    }

    @Test func fourSegmentsMakeTheSameFileAndEverySegmentCarriesIfRange() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let driver = FakeTransferDriver { request, _ in origin.script(request) }
        let engine = try Self.engine(driver)
        let (id, events) = try await Self.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try Self.completedBytes(engine, id) == Data(body))
        #expect(driver.startCount == 4)
        #expect(driver.transfer(0).range == nil)
        #expect((1..<4).map { driver.transfer($0).range } == ["bytes=10000-19999", "bytes=20000-29999", "bytes=30000-39999"])
        #expect((1..<4).allSatisfy { driver.transfer($0).header("If-Range") == "\"v1\"" })
        #expect(done.connections == ConnectionCounts(requested: 4, granted: 4, active: 0))
        #expect(done.bytesWritten == 40_000)
    }

    /// An origin that answers at most 3 000 bytes of a range: every piece goes on from where each
    /// short answer ended (no piece is abandoned, the download never starts over).
    @Test func cappedRangesAreContinuedPieceByPiece() async throws {
        var origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        origin.maxRangeLength = 3_000
        let driver = FakeTransferDriver { [origin] request, _ in origin.script(request) }
        let engine = try Self.engine(driver)
        let (id, events) = try await Self.fetch(engine, connections: 4)
        guard case .completed = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(try Self.completedBytes(engine, id) == Data(body))
        #expect(engine.statistics.restarts == 0)
        let ranges = (0..<driver.startCount).compactMap { driver.transfer($0).range }
        #expect(ranges.contains("bytes=13000-19999") && ranges.contains("bytes=19000-19999"), "\(ranges)")
    }

    /// An origin whose segment answers name a shorter range than the bytes they bring (no
    /// `Content-Length`, or one that disagrees): none of those bytes is written as the range's; the
    /// segments are abandoned and the file fetched again from 0 on one connection, byte-identical.
    @Test(arguments: [false, true])
    func aSegmentLongerThanItsContentRangeIsAbandoned(withLength: Bool) async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let garbage = [UInt8](repeating: 0, count: 9_000)
        // The first answer is given by hand (it can never finish the file alone); the pieces' and
        // the restart's are scripted.
        let driver = FakeTransferDriver { [body] request, index in
            guard index > 0 else { return nil }
            guard let range = request.headers.first(where: { $0.name == "Range" })?.value,
                  let (first, _) = RangedFakeOrigin.bounds(range, count: body.count) else { return origin.script(request) }
            // Claims 1 000 bytes, sends them and 9 000 more of the wrong kind.
            var headers = ["Content-Range": "bytes \(first)-\(first + 999)/\(body.count)", "ETag": "\"v1\""]
            if withLength { headers["Content-Length"] = "10000" }
            return FakeTransferDriver.Script(status: 206, headers: headers, body: Array(body[first..<first + 1_000]) + garbage, chunk: 1_000)
        }
        let engine = try Self.engine(driver)
        let r = try engine.request(DownloadRequest(url: Self.url, connections: 4))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Length": "40000"]))
        _ = try? driver.transfer(0).send(Array(body[0..<1_000]))  // Refused once the pieces abandoned the attempt.
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try Self.completedBytes(engine, r.snapshot.id) == Data(body), "no byte of the overlong answers in the file")
        // The segments were abandoned: the first answer cancelled, the file asked for again whole.
        let requests = (0..<driver.startCount).map { driver.transfer($0).range ?? "-" }
        #expect(driver.transfer(0).isCancelled && requests.dropFirst().contains("-"), "\(requests)")
    }

    /// The first answer's head can come before the engine holds its connection's handle (the
    /// driver answered while it started it), and the crew be abandoned at once: that connection is
    /// stopped as soon as its handle is known, not left running until it writes again.
    @Test func aCrewAbandonedBeforeTheFirstHandleIsKnownStillStopsIt() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let driver = FakeTransferDriver { request, index in index > 0 ? origin.script(request) : nil }
        let abandoned = OriginLock(false)
        driver.onStart = { transfer, index in
            guard index == 0 else { return }
            transfer.respond(200, ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Length": "40000"])
            // Still inside the driver's start: the engine does not hold this connection's handle yet.
            guard let crew = (transfer.delegate as? Attempt)?.crew else { return }
            crew.abandon("abandoned by the test")
            abandoned.withLock { $0 = true }
        }
        let engine = try Self.engine(driver)
        let (id, events) = try await Self.fetch(engine, connections: 4)
        #expect(abandoned.withLock { $0 }, "the crew was there to abandon")
        guard case .completed = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(try Self.completedBytes(engine, id) == Data(body))
        #expect(driver.transfer(0).isCancelled)
    }

    @Test func oneConnectionByDefaultWhateverTheCallerAsks() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let driver = FakeTransferDriver { request, _ in origin.script(request) }
        let engine = try Self.engine(driver, limit: 1)
        let (id, events) = try await Self.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(driver.startCount == 1)
        #expect(try Self.completedBytes(engine, id) == Data(body))
        #expect(done.connections == ConnectionCounts(requested: 4, granted: 1, active: 0))
    }

    @Test func noConnectionsAskedShowsNoConnections() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let driver = FakeTransferDriver { request, _ in origin.script(request) }
        let engine = try Self.engine(driver)
        let (_, events) = try await Self.fetch(engine, connections: 1)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(driver.startCount == 1)
        #expect(done.connections == nil)
    }

    @Test func connectionsBeyondTheLimitAndTheSizeAreClampedAndReported() async throws {
        let small = EngineFixture.body(2500)
        let origin = RangedFakeOrigin(body: small, etag: "\"v1\"")
        let driver = FakeTransferDriver { request, _ in origin.script(request) }
        let engine = try Self.engine(driver, minimum: 1000)
        let r = try engine.request(DownloadRequest(url: Self.url, connections: 16))
        #expect(r.snapshot.connections?.requested == 16)
        #expect(r.snapshot.connections?.granted == 4)  // The limit, before the size is known.
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.connections == ConnectionCounts(requested: 16, granted: 2, active: 0))  // 2500 bytes: two of ≥ 1000.
        #expect(driver.startCount == 2)
        #expect(driver.transfer(1).range == "bytes=1000-2499")
        #expect(try Self.completedBytes(engine, r.snapshot.id) == Data(small))
    }

    @Test(arguments: [
        RangedFakeOrigin(body: EngineFixture.body(40_000), etag: "W/\"v1\""),
        RangedFakeOrigin(body: EngineFixture.body(40_000), etag: "\"v1\"", acceptRanges: false),
    ])
    func weakETagOrNoAcceptRangesStaysSingleStream(_ origin: RangedFakeOrigin) async throws {
        let driver = FakeTransferDriver { request, _ in origin.script(request) }
        let engine = try Self.engine(driver)
        let (id, events) = try await Self.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(driver.startCount == 1)
        #expect(done.connections == ConnectionCounts(requested: 4, granted: 1, active: 0))
        #expect(try Self.completedBytes(engine, id) == Data(origin.body))
    }

    /// A piece cut for a stall (or `--min-speed`) asks again over a new connection, as does the
    /// fetch that takes over a stalled prefix; one cut otherwise may reuse a kept-alive one.
    @Test func aCutSegmentAsksAgainFromWhereItStood() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        // By the range asked (the pieces' connections start in any order on a loaded machine).
        let driver = FakeTransferDriver { request, _ in
            var script = origin.script(request)
            switch request.headers.first(where: { $0.name.lowercased() == "range" })?.value {
            case "bytes=20000-29999"?: script.cutAfter = 3000  // Segment 2 is cut after 3000 bytes.
            case "bytes=30000-39999"?:  // Segment 3 stalls after 2000.
                script.cutAfter = 2000
                script.failure = .stalled
            case nil:  // The prefix stalls too: a fetch takes it over.
                script.cutAfter = 4000
                script.failure = .stalled
            default: break
            }
            return script
        }
        let engine = try Self.engine(driver)
        let (id, events) = try await Self.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try Self.completedBytes(engine, id) == Data(body))
        let ranges = (0..<driver.startCount).compactMap { driver.transfer($0).range }
        #expect(ranges.contains("bytes=23000-29999"))
        #expect(ranges.contains("bytes=4000-9999"))
        #expect(ranges.contains("bytes=32000-39999"))
        #expect(driver.startCount == 7)
        #expect((1..<driver.startCount).allSatisfy { driver.transfer($0).header("If-Range") == "\"v1\"" })
        let fresh = Set((0..<driver.startCount).filter { driver.transfer($0).request.freshConnection }.compactMap { driver.transfer($0).range })
        #expect(fresh == ["bytes=4000-9999", "bytes=32000-39999"], "only the pieces after a stall: \(fresh)")
    }

    /// An origin that throttles or refuses connections beyond the first (429, 503 with Retry-After,
    /// 403): no piece asks again on its own, the attempt ends as a retry after the origin's wait,
    /// and the download goes on with one connection from its first bytes (it used to fail).
    @Test(arguments: [(429, "2"), (503, "2"), (403, nil)] as [(Int, String?)])
    func anOriginRefusingMoreConnectionsLeavesOne(status: Int, retryAfter: String?) async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let driver = FakeTransferDriver { request, _ in
            let closed = request.headers.contains { $0.name == "Range" && !$0.value.hasSuffix("-") }
            guard closed else { return origin.script(request) }
            return .init(status: status, headers: retryAfter.map { ["Retry-After": $0] } ?? [:], body: [])
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) {
            $0.maxConnectionsPerDownload = 4
            $0.minimumSegmentBytes = 10_000
            $0.segmentProbeSeconds = 0
            $0.retryMaxDelay = 5  // The origin's Retry-After is waited for (the fixture's cap is 0.05 s;
                                  // the scheduler runs waits over 1 s in real time).
        }
        let started = Date()
        let (id, events) = try await Self.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(try Self.completedBytes(engine, id) == Data(body))
        if let retryAfter { #expect(Date().timeIntervalSince(started) >= Double(retryAfter) ?? 0, "the origin's Retry-After") }
        let ranges = (0..<driver.startCount).map { driver.transfer($0).range ?? "-" }
        #expect(ranges.filter { !$0.hasSuffix("-") }.count <= 3, "each piece asked once: \(ranges)")
        // The last request is the one connection's: from 0, or from the bytes the prefix kept.
        #expect(ranges.last?.hasSuffix("-") == true, "one connection to the end: \(ranges)")
        #expect(done.connections?.granted == 1)
    }

    /// More pieces than connections: each connection takes the next piece nobody has, every piece is
    /// asked for exactly once, and the file (its prefix hashed as it grows) verifies.
    /// The crew's first three requests are held until all three started: played at once, the first
    /// could end and its connection start piece 4 and 5 before the crew's thread started piece 2
    /// (seen under load: `bytes=1000-1999, 4000-4999, 5000-5999`).
    @Test func piecesAreHandedOutInFileOrderAndTheWholeFileIsVerified() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"", chunk: 500)
        let driver = FakeTransferDriver { request, index in (1...3).contains(index) ? nil : origin.script(request) }
        let engine = try Self.engine(driver, minimum: 1000)
        let r = try engine.request(DownloadRequest(url: Self.url, connections: 4))
        let id = r.snapshot.id
        let sub = try #require(engine.subscribe(id: id))
        try await withTimeout(10) { await driver.waitForStarts(4) }
        #expect((1...3).map { driver.transfer($0).range } == ["bytes=1000-1999", "bytes=2000-2999", "bytes=3000-3999"])
        for index in 1...3 {
            let held = driver.transfer(index)
            DispatchQueue.global().async { held.play(origin.script(held.request)) }
        }
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try Self.completedBytes(engine, id) == Data(body))
        #expect(done.connections == ConnectionCounts(requested: 4, granted: 4, active: 0))
        let ranges = (1..<driver.startCount).compactMap { driver.transfer($0).range }
        #expect(driver.startCount == 40)  // 40 pieces: the prefix, then one request per piece.
        #expect(Set(ranges) == Set((1..<40).map { "bytes=\($0 * 1000)-\($0 * 1000 + 999)" }))
        #expect((1..<driver.startCount).allSatisfy { driver.transfer($0).header("If-Range") == "\"v1\"" })
    }

    /// The file changes while it is fetched: one segment gets a 200 (If-Range no longer matches),
    /// or a 206 of the new version. The segments are abandoned; the download starts again from 0
    /// on one connection and completes with the new version only.
    @Test(arguments: [false, true])
    func aChangedFileRestartsFromZeroOnOneConnection(_ newETagOn206: Bool) async throws {
        let v1 = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let v2 = RangedFakeOrigin(body: EngineFixture.body(40_000, seed: 9), etag: "\"v2\"")
        let driver = FakeTransferDriver { request, index in
            if index < 2 { return v1.script(request) }
            if index == 2 && newETagOn206 {
                var script = v1.script(request)  // The old bytes' range, labelled with the new ETag.
                script.headers["ETag"] = "\"v2\""
                return script
            }
            return v2.script(request)
        }
        let engine = try Self.engine(driver)
        let (id, events) = try await Self.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(v2.body))
        #expect(try Self.completedBytes(engine, id) == Data(v2.body))
        #expect(done.connections?.granted == 1)
        let restart = try #require((0..<driver.startCount).last { driver.transfer($0).range == nil })
        #expect(restart > 0)
        #expect(driver.startCount == restart + 1)  // One connection after the restart.
    }
}


/// A pause of a segmented download, driven by hand: every segment resumes where it stood.
@Suite struct EngineSegmentPauseTests {
    let body = EngineFixture.body(40_000)

    static func respond206(_ t: FakeTransfer, _ first: Int, _ last: Int) -> Bool {
        t.respond(206, ["Content-Range": "bytes \(first)-\(last)/40000", "ETag": "\"v1\"", "Content-Length": "\(last - first + 1)"])
    }

    /// A download asking for 4 connections whose first answer (the whole 40 000 bytes, ranges
    /// accepted, ETag `"v1"`) was given: its pieces start.
    static func started(_ driver: FakeTransferDriver) async throws -> (engine: DownloadEngine, caller: Enqueued) {
        let engine = try EngineSegmentTests.engine(driver)
        let caller = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Length": "40000"]))
        return (engine, caller)
    }

    /// An origin whose first answer offered no byte ranges (no `Accept-Ranges`) stays on one
    /// connection also when a resume's 206 shows it honours a range: segments need its first
    /// response's word.
    /// `acrossARestart`: the engine restarts while the download is paused (the first answer's
    /// word is stored: before, a restarted engine no longer knew it, and segmented the resume).
    @Test(arguments: [false, true])
    func aResumeOfADownloadWhoseFirstAnswerOfferedNoRangesStaysSingle(acrossARestart: Bool) async throws {
        let root = EngineFixture.root()
        let firstDriver = FakeTransferDriver()
        var engine = try EngineSegmentTests.engine(firstDriver, root: root)
        let first = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        try await withTimeout(20) { await firstDriver.waitForStarts(1) }
        var driver = firstDriver
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Content-Length": "40000"]))
        try driver.transfer(0).send(Array(body[0..<5000]))
        let event = try await EngineFixture.cancelAndSettle(engine, token: first.token, id: first.snapshot.id)
        guard case .paused(let paused) = event else { Issue.record("not paused: \(event)"); return }
        #expect(paused.bytesWritten == 5000 && paused.connections?.granted == 1)
        if acrossARestart {
            await engine.shutdown()
            driver = FakeTransferDriver()
            engine = try EngineSegmentTests.engine(driver, root: root)
        }
        let before = driver.startCount
        let again = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        let sub = try #require(engine.subscribe(id: again.snapshot.id))
        let next = driver
        try await withTimeout(20) { await next.waitForStarts(before + 1) }
        let resumed = driver.transfer(before)
        #expect(resumed.range == "bytes=5000-")
        #expect(resumed.respond(206, ["Content-Range": "bytes 5000-39999/40000", "ETag": "\"v1\"", "Content-Length": "35000",
                                      "Accept-Ranges": "bytes"]))
        try resumed.send(Array(body[5000...]))
        resumed.finish()
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(driver.startCount == before + 1, "no piece asked for: \((0..<driver.startCount).map { driver.transfer($0).range ?? "-" })")
        #expect(done.connections?.granted == 1 && done.sha256 == SHA256Hasher.hex(body))
        await engine.shutdown()
    }

    @Test func pausedSegmentsResumeWhereTheyStoodByteIdentical() async throws {
        let driver = FakeTransferDriver()
        let (engine, r) = try await Self.started(driver)
        let id = r.snapshot.id
        let main = driver.transfer(0)
        #expect(driver.startCount == 4)
        try main.send(Array(body[0..<3000]))
        for i in 1..<4 {
            let start = i * 10_000
            #expect(Self.respond206(driver.transfer(i), start, start + 9999))
            try driver.transfer(i).send(Array(body[start..<(start + 2000 + i)]))
        }
        #expect(engine.snapshot(id: id)?.connections == ConnectionCounts(requested: 4, granted: 4, active: 4))
        let event = try await EngineFixture.cancelAndSettle(engine, token: r.token, id: id)
        guard case .paused(let paused) = event else { Issue.record("not paused: \(event)"); return }
        #expect(paused.bytesWritten == 3000 + 2001 + 2002 + 2003)
        #expect((0..<4).allSatisfy { driver.transfer($0).isCancelled })
        #expect(paused.connections?.active == 0)

        let again = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        let sub = try #require(engine.subscribe(id: id))
        try await withTimeout(20) { await driver.waitForStarts(5) }
        let resumed = driver.transfer(4)
        #expect(resumed.range == "bytes=3000-")
        #expect(resumed.header("If-Range") == "\"v1\"")
        #expect(Self.respond206(resumed, 3000, 39_999))
        #expect(driver.startCount == 8)
        #expect((5..<8).map { driver.transfer($0).range } == ["bytes=12001-19999", "bytes=22002-29999", "bytes=32003-39999"])
        for i in 5..<8 {
            let first = 10_000 * (i - 4) + 2000 + (i - 4)
            let last = 10_000 * (i - 4) + 9999
            #expect(Self.respond206(driver.transfer(i), first, last))
            try driver.transfer(i).send(Array(body[first...last]))
            driver.transfer(i).finish()
        }
        #expect(throws: SegmentStop.self) { try resumed.send(Array(body[3000..<12_000])) }  // Stops at the prefix's end.
        resumed.fail(.disk, "stopped at the prefix's end")
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try EngineSegmentTests.completedBytes(engine, id) == Data(body))
        // The resume counts every piece's kept bytes, not the prefix's alone.
        let resumedAt = events.compactMap { event -> Int64? in
            if case .resumed(_, _, let snapshot) = event { return snapshot.bytesWritten } else { return nil }
        }
        #expect(resumedAt == [paused.bytesWritten], "\(resumedAt)")
        _ = again
    }
}

extension EngineSegmentPauseTests {
    /// Paused after the prefix stopped at its piece's end while the next piece had written more
    /// (bytes the hashing had not reached): those bytes are kept, hashed as the attempt settles,
    /// and the resume goes on after them instead of fetching them again.
    @Test func bytesWrittenAfterThePrefixBeyondTheHashingAreKeptAtAPause() async throws {
        let driver = FakeTransferDriver()
        let (engine, r) = try await Self.started(driver)
        let id = r.snapshot.id
        let main = driver.transfer(0)
        for i in 1..<4 { #expect(Self.respond206(driver.transfer(i), i * 10_000, i * 10_000 + 9999)) }
        #expect(throws: SegmentStop.self) { try main.send(Array(body[0..<10_500])) }  // Stops at its piece's end.
        main.fail(.disk, "stopped at the prefix's end")
        try driver.transfer(1).send(Array(body[10_000..<15_000]))
        try driver.transfer(2).send(Array(body[20_000..<22_000]))
        let event = try await EngineFixture.cancelAndSettle(engine, token: r.token, id: id)
        guard case .paused(let paused) = event else { Issue.record("not paused: \(event)"); return }
        #expect(paused.bytesWritten == 17_000)

        _ = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        let sub = try #require(engine.subscribe(id: id))
        try await withTimeout(20) { await driver.waitForStarts(5) }
        let resumed = driver.transfer(4)
        #expect(resumed.range == "bytes=15000-", "after the kept bytes of the second piece")
        #expect(Self.respond206(resumed, 15_000, 39_999))
        try await withTimeout(20) { await driver.waitForStarts(7) }
        #expect((5..<7).map { driver.transfer($0).range } == ["bytes=22000-29999", "bytes=30000-39999"])
        for (i, first) in [(5, 22_000), (6, 30_000)] {
            let last = first / 10_000 * 10_000 + 9999
            #expect(Self.respond206(driver.transfer(i), first, last))
            try driver.transfer(i).send(Array(body[first...last]))
            driver.transfer(i).finish()
        }
        #expect(throws: SegmentStop.self) { try resumed.send(Array(body[15_000..<21_000])) }
        resumed.fail(.disk, "stopped at the prefix's end")
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try EngineSegmentTests.completedBytes(engine, id) == Data(body))
        await engine.shutdown()
    }

    /// The resumed prefix gets a capped range (a 206 short of its piece's end): a fetch takes the
    /// rest of the piece over, and the download completes byte-identical, never started over.
    @Test func aCappedResumeOfThePrefixIsTakenOverByAFetch() async throws {
        let driver = FakeTransferDriver()
        let (engine, r) = try await Self.started(driver)
        let id = r.snapshot.id
        try driver.transfer(0).send(Array(body[0..<3000]))
        for i in 1..<4 { #expect(Self.respond206(driver.transfer(i), i * 10_000, i * 10_000 + 9999)) }
        guard case .paused = try await EngineFixture.cancelAndSettle(engine, token: r.token, id: id) else {
            Issue.record("not paused")
            return
        }
        _ = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        let sub = try #require(engine.subscribe(id: id))
        try await withTimeout(20) { await driver.waitForStarts(5) }
        let resumed = driver.transfer(4)
        #expect(resumed.range == "bytes=3000-")
        #expect(Self.respond206(resumed, 3000, 5999))  // capped at 3 000 bytes
        try await withTimeout(20) { await driver.waitForStarts(8) }
        for i in 5..<8 {
            let first = 10_000 * (i - 4)
            #expect(Self.respond206(driver.transfer(i), first, first + 9999))
            try driver.transfer(i).send(Array(body[first...(first + 9999)]))
            driver.transfer(i).finish()
        }
        try resumed.send(Array(body[3000..<6000]))
        resumed.finish()
        try await withTimeout(20) { await driver.waitForStarts(9) }
        let takeover = driver.transfer(8)
        #expect(takeover.range == "bytes=6000-9999")
        #expect(Self.respond206(takeover, 6000, 9999))
        try takeover.send(Array(body[6000...9999]))
        takeover.finish()
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(try EngineSegmentTests.completedBytes(engine, id) == Data(body))
        #expect(engine.statistics.restarts == 0)
    }

    /// A paused download whose first segment holds nothing yet still keeps the others' bytes: it is
    /// not an empty paused download to forget (that would leave its partial behind, unowned).
    @Test func pausedSegmentsWithAnEmptyPrefixAreKept() async throws {
        let driver = FakeTransferDriver()
        let root = EngineFixture.root()
        let configure = { (c: inout EngineConfiguration) in
            c.maxConnectionsPerDownload = 4
            c.minimumSegmentBytes = 10_000
            c.segmentProbeSeconds = 0
            c.maxEmptyPausedDownloads = 0
        }
        let engine = try EngineFixture.engine(root, driver: driver, configure: configure)
        let r = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Length": "40000"]))
        for i in 1..<4 {
            #expect(Self.respond206(driver.transfer(i), i * 10_000, i * 10_000 + 9999))
            try driver.transfer(i).send(Array(body[(i * 10_000)..<(i * 10_000 + 2000)]))
        }
        let event = try await EngineFixture.cancelAndSettle(engine, token: r.token, id: r.snapshot.id)
        guard case .paused(let paused) = event else { Issue.record("not paused: \(event)"); return }
        #expect(paused.bytesWritten == 6000)
        await engine.shutdown()
        // Start-up bounds the empty paused downloads it restores; this one keeps its pieces, and
        // resumes them: the prefix from 0 (a whole body of the same version and size), every other
        // piece from where it stood.
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let resumed = FakeTransferDriver { request, _ in origin.script(request) }
        let next = try EngineFixture.engine(root, driver: resumed, configure: configure)
        #expect(next.snapshot(id: r.snapshot.id)?.state == .paused)
        #expect(next.snapshot(id: r.snapshot.id)?.bytesWritten == 6000)
        #expect(next.snapshot(id: r.snapshot.id)?.connections == ConnectionCounts(requested: 4, granted: 4, active: 0),
                "what its pieces were granted, not 1 until the next head")
        let again = try next.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        let done = try await withTimeout(10) { try await EngineFixture.waitFor(next, id: again.snapshot.id, [.completed, .failed]) }
        #expect(done.state == .completed)
        #expect(try EngineSegmentTests.completedBytes(next, r.snapshot.id) == Data(body))
        let ranges = (0..<resumed.startCount).map { resumed.transfer($0).range ?? "-" }
        #expect(ranges == ["-", "bytes=12000-19999", "bytes=22000-29999", "bytes=32000-39999"], "\(ranges)")
        #expect(next.statistics.restarts == 0)
        await next.shutdown()
    }
}

extension RangedFakeOrigin: CustomTestStringConvertible {
    var testDescription: String { "etag \(etag), Accept-Ranges \(acceptRanges)" }
}

extension EngineSegmentPauseTests {
    /// Pieces kept from a segmented attempt are continued where they stood also when the next
    /// attempt gets one connection (here the operator lowered the limit to 1 across a restart; the
    /// same holds after the origin refused a second connection): one connection fetches what each
    /// piece lacks, in file order, and no kept byte is asked for again.
    /// `withBytes`: the pieces (1-3) that got bytes before the pause; those that got none, one
    /// after the other, are asked for in one request.
    @Test(arguments: [[1, 2, 3], [1]])
    func keptPiecesGoOnWhereTheyStoodOnOneConnection(withBytes: [Int]) async throws {
        let driver = FakeTransferDriver()
        let root = EngineFixture.root()
        let engine = try EngineSegmentTests.engine(driver, root: root)
        let r = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Length": "40000"]))
        try await withTimeout(20) { await driver.waitForStarts(4) }
        try driver.transfer(0).send(Array(body[0..<3000]))
        for i in withBytes {
            let start = i * 10_000
            #expect(Self.respond206(driver.transfer(i), start, start + 9999))
            try driver.transfer(i).send(Array(body[start..<(start + 2000 + i)]))
        }
        guard case .paused = try await EngineFixture.cancelAndSettle(engine, token: r.token, id: r.snapshot.id) else {
            Issue.record("not paused")
            return
        }
        await engine.shutdown()

        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"")
        let resumed = FakeTransferDriver { request, _ in origin.script(request) }
        let next = try EngineSegmentTests.engine(resumed, limit: 1, root: root)
        let again = try next.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        let done = try await withTimeout(10) { try await EngineFixture.waitFor(next, id: again.snapshot.id, [.completed, .failed]) }
        #expect(done.state == .completed)
        #expect(try EngineSegmentTests.completedBytes(next, r.snapshot.id) == Data(body))
        let ranges = (0..<resumed.startCount).map { resumed.transfer($0).range ?? "-" }
        let expected = withBytes == [1, 2, 3] ? ["bytes=3000-", "bytes=12001-19999", "bytes=22002-29999", "bytes=32003-39999"]
                                               : ["bytes=3000-", "bytes=12001-19999", "bytes=20000-39999"]
        #expect(ranges == expected, "\(ranges)")
        #expect(done.connections?.granted == 1)
        #expect(next.statistics.restarts == 0)
        await next.shutdown()
    }
}
