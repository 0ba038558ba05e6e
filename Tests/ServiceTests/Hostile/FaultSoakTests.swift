import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// Fault-injection soak through the real `download-service` executable: rounds of downloads from
/// `TestOrigin`s (loopback) that cut at random offsets (several times), reset, stall, change their
/// ETag mid-body, answer 500 then recover, answer 404 or 500 for good, while other callers drop
/// progress streams and file downloads midway. Every download must end byte-identical (SHA-256 of the
/// served file equals the origin's body and the snapshot's `sha256`) or failed with the expected code,
/// and the service's open descriptors and RSS must stay flat between the warm-up and the end.
///
/// The service runs with short retry timing and a 12 MiB cache budget, so what it keeps is bounded and
/// reaches its steady state (about 70 completed files and their records) within the warm-up.
/// `swift test` runs a short soak (120 rounds, cut at 60 s once the warm-up and two rounds per lane
/// have run); `scripts/contract-checks` runs 1,000 rounds (at most 240 s) with `HOSTILE_SOAK_ROUNDS` /
/// `HOSTILE_SOAK_SECONDS`. `HOSTILE_SOAK_SEED` replays a run (the seed is printed).
@Suite("Hostile: fault-injection soak through the executable", .serialized, .timeLimit(.minutes(10)))
struct FaultSoakTests {
    static let environment = ProcessInfo.processInfo.environment
    static let rounds = environment["HOSTILE_SOAK_ROUNDS"].flatMap(Int.init) ?? 120
    static let seconds = environment["HOSTILE_SOAK_SECONDS"].flatMap(Double.init) ?? 60
    static let seed = environment["HOSTILE_SOAK_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
    /// `HOSTILE_SOAK_ONLY=<0-99>` runs every round with the fault that percentile picks, no drop-outs.
    static let only = environment["HOSTILE_SOAK_ONLY"].flatMap(Int.init)
    /// Parallel lanes, each with its own origin (faults queue per origin) and one download at a time.
    static let lanes = 4
    /// Descriptors the service may legitimately hold beyond the warm-up count: idle cached origin
    /// connections (one or two per lane) and a stream or two still being torn down.
    static let descriptorSlack = 2 * lanes + 4
    /// RSS growth allowed after the warm-up: 8 MiB for allocator arenas and journal churn, plus
    /// 4 KiB per round for what the service keeps per download by design (a failed download's
    /// record and journal entry stay, up to 1,000; completed ones go with the cache budget).
    /// Each side is the lowest of the samples taken over 1.5 s of quiet (three memory trims), so a
    /// transient peak is not read as growth. With a 32 MiB budget (records still accumulating for
    /// the whole soak) and single samples it read 3.5-12 MB over 900 rounds, failing one CI run.
    /// Before the fixes it was 68 MB: every attempt leaked
    /// (Attempt <-> CurlTransfer cycle, ~4 KiB) and glibc kept freed per-thread arenas (MemoryTrimmer).
    /// A body leaked per round (16-96 KiB; 2 MiB in one round of 16) exceeds the allowance many
    /// times; the per-attempt leak (about 9 KiB per round, 8 MB over 900) would land at its edge.
    static func rssAllowance(rounds: Int) -> Int { 8 << 20 + rounds * 4 * 1024 }

    @Test func everyDownloadEndsIdenticalOrFailedAndNothingLeaks() async throws {
        let service = try await ServiceProcess.start(arguments: [
            "--allow-private-networks", "--max-concurrent", String(Self.lanes),
            "--stall-timeout", "0.5", "--retry-base-delay", "0.01", "--max-attempts", "8",
            "--memory-trim-interval", "0.5", "--cache-max-bytes", "12M",
        ])
        let origins = try (0..<Self.lanes).map { _ in try TestOrigin(bodySize: 1024, path: "/unused") }
        defer { origins.forEach { $0.stop() } }
        for origin in origins { origin.update { $0.stallBound = 5 } }
        let pid = service.process.processIdentifier
        let start = Date()
        let deadline = start.addingTimeInterval(Self.seconds)
        let tally = SoakTally()
        print("fault soak: seed \(Self.seed), up to \(Self.rounds) rounds in \(Self.seconds) s, \(Self.lanes) lanes")

        // Warm-up: allocator arenas, curl's connection cache, the journal and thread pools settle.
        let warmUp = max(Self.lanes, Self.rounds / 5)
        try await runRounds(0..<warmUp, origins: origins, service: service, deadline: .distantFuture, tally: tally)
        let before = try await ProcessSample.settled(pid: pid) { _ in true }
        let afterWarmUp = tally.count
        // At least two rounds per lane are measured whatever the clock says: on a loaded machine the
        // warm-up alone can take the whole budget (31 rounds in 60 s failed a CI run's count check).
        let measuredAtLeast = min(Self.rounds, warmUp + 2 * Self.lanes)
        try await runRounds(warmUp..<Self.rounds, atLeast: measuredAtLeast, origins: origins, service: service,
                            deadline: deadline, tally: tally)
        let measured = tally.count - afterWarmUp
        let after = try await ProcessSample.settled(pid: pid) { $0.descriptors <= before.descriptors + Self.descriptorSlack }

        let health = try await service.client.request("GET", "/healthz")
        #expect(health.status == 200, "the service stopped answering")
        let elapsed = Date().timeIntervalSince(start)
        print("fault soak: \(tally.count) rounds in \(Int(elapsed)) s (seed \(Self.seed)); \(tally.summary)")
        print("fault soak: descriptors \(before.descriptors) -> \(after.descriptors), "
              + "RSS \(before.rssKiB) KiB -> \(after.rssKiB) KiB over \(measured) rounds after the warm-up")
        #expect(tally.failures.isEmpty, "\(tally.failures.count) rounds went wrong:\n\(tally.failures.prefix(10).joined(separator: "\n"))")
        #expect(after.descriptors <= before.descriptors + Self.descriptorSlack,
                "open descriptors grew from \(before.descriptors) to \(after.descriptors)")
        #expect(before.rssKiB > 0 && after.rssKiB > 0, "VmRSS read from /proc: \(before.rssKiB) KiB, \(after.rssKiB) KiB")
        #expect((after.rssKiB - before.rssKiB) * 1024 <= Self.rssAllowance(rounds: measured),
                "RSS grew by \(after.rssKiB - before.rssKiB) KiB over \(measured) rounds")
        #expect(try await service.stop() == 0)
    }

    /// Runs `indices` over the lanes (each lane takes the next index until they run out or, once the
    /// indices below `atLeast` are taken, `deadline` has passed).
    private func runRounds(_ indices: Range<Int>, atLeast: Int? = nil, origins: [TestOrigin], service: ServiceProcess,
                           deadline: Date, tally: SoakTally) async throws {
        let next = SoakCounter(indices.lowerBound)
        let guaranteed = min(atLeast ?? indices.lowerBound, indices.upperBound)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for origin in origins {
                group.addTask {
                    while true {
                        let bound = Date() < deadline ? indices.upperBound : guaranteed
                        guard let index = next.take(below: bound) else { return }
                        let round = SoakRound.make(index: index, seed: Self.seed, only: Self.only)
                        let started = Date()
                        do {
                            try await withTimeout(60) { try await Self.run(round, origin: origin, service: service) }
                            tally.record(round, seconds: Date().timeIntervalSince(started), failure: nil)
                        } catch {
                            tally.record(round, seconds: Date().timeIntervalSince(started), failure: "\(round): \(error)")
                        }
                        origin.clearFaults()
                        if index % 100 == 0, let s = try? ProcessSample.take(pid: service.process.processIdentifier) {
                            print("fault soak: round \(index): \(s.descriptors) fds, RSS \(s.rssKiB) KiB")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    struct RoundFailure: Error, CustomStringConvertible { var description: String }

    static func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw RoundFailure(description: message()) }
    }

    /// One round: fault armed, download requested, callers dropping out, outcome checked.
    static func run(_ round: SoakRound, origin: TestOrigin, service: ServiceProcess) async throws {
        let path = "/soak/\(round.index)-\(seed).bin"
        origin.addResource(path: path, size: round.size)
        switch round.fault {
        case .none: break
        case .cuts(let offsets): for k in offsets { origin.inject(.cut(afterBodyBytes: k)) }
        case .reset(let k): origin.inject(.reset(afterBodyBytes: k))
        case .stall(let k): origin.inject(.stall(afterBodyBytes: k))
        case .changeVersion(let k): origin.inject(.changeVersion(afterBodyBytes: k))
        case .serverErrors(let n): origin.inject(.status(500, retryAfter: nil), times: n)
        case .notFound: origin.inject(.status(404, retryAfter: nil))
        case .serverErrorsForever: origin.inject(.status(500, retryAfter: nil), times: 1000)
        }
        let client = service.client
        let created = try await client.ask(origin.url(path))
        try check(created.status == 202, "POST answered \(created.status): \(created.text)")
        guard let id = created.string("id") else { throw RoundFailure(description: "no id in \(created.text)") }
        do {
            try await follow(round, id: id, path: path, origin: origin, service: service)
        } catch {
            // The service's log lines of this download (its requests, with why a response was cut).
            throw RoundFailure(description: "\(error); service log:\n  "
                               + service.logLines(containing: id).joined(separator: "\n  "))
        }
    }

    /// The rest of a round once download `id` exists: callers dropping out, the outcome checked.
    static func follow(_ round: SoakRound, id: String, path: String, origin: TestOrigin,
                       service: ServiceProcess) async throws {
        let client = service.client
        if round.dropsProgressStream {
            let (head, stream) = try await client.openStream("/downloads/\(id)/progress")
            try check(head.status == 200, "progress answered \(head.status)")
            _ = try await stream.next()
            stream.close()  // Mid-stream, usually mid-transfer.
        }
        let (head, stream) = try await client.openStream("/downloads/\(id)/progress")
        defer { stream.close() }
        try check(head.status == 200, "progress answered \(head.status)")
        guard let end = try await stream.next(where: { $0.event == "completed" || $0.event == "failed" }) else {
            throw RoundFailure(description: "the progress stream ended without an outcome")
        }
        let snapshot = end.json

        switch round.outcome {
        case .identical:
            let error = snapshot["error"].map { "\($0)" } ?? "-"
            try check(end.event == "completed", "ended \(end.event ?? "?"): \(error)")
            let expected = origin.expectedBody(path: path)
            let expectedSHA = sha256(expected)
            try check(snapshot["sha256"] as? String == expectedSHA, "snapshot sha256 \(snapshot["sha256"] ?? "nil") != origin's")
            let file = try await client.request("GET", "/downloads/\(id)/file")
            try check(file.status == 200, "file answered \(file.status)")
            try check(file.body.count == expected.count && sha256(file.body) == expectedSHA,
                      "served \(file.body.count) bytes, SHA-256 differs from the origin's \(expected.count)-byte body")
        case .failed(let code, let status):
            let error = snapshot["error"] as? [String: Any]
            try check(end.event == "failed", "ended \(end.event ?? "?") instead of failing with \(code)")
            try check(error?["code"] as? String == code && error?["httpStatus"] as? Int == status,
                      "failed with \(error ?? [:]) instead of \(code)/\(status)")
        }

        if round.dropsFileDownload && round.outcome == .identical {
            let connection = try await RawHTTPClient.connect(port: service.port,
                                                             sending: "GET /downloads/\(id)/file HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let fileHead = try await connection.readResponseHead()
            try check(fileHead.status == 200, "file answered \(fileHead.status)")
            connection.close()  // After the head: mid-body for the 2 MiB rounds.
        }
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        let hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.hexDigest()
    }
}

/// Hands out round indices to the lanes.
final class SoakCounter: Sendable {
    private let next: Mutex<Int>
    init(_ first: Int) { next = Mutex(first) }

    /// The next index, or nil once `bound` is reached.
    func take(below bound: Int) -> Int? {
        next.withLock { n in
            guard n < bound else { return nil }
            defer { n += 1 }
            return n
        }
    }
}

/// Rounds run, by fault, what went wrong, and the slowest (a round that crawls shows in the log).
final class SoakTally: Sendable {
    static let slowestKept = 3
    private let state = Mutex<(count: Int, byFault: [String: Int], failures: [String], slowest: [(seconds: Double, round: String)])>(
        (0, [:], [], []))

    func record(_ round: SoakRound, seconds: Double, failure: String?) {
        state.withLock {
            $0.count += 1
            $0.byFault[round.fault.name, default: 0] += 1
            if let failure { $0.failures.append(failure) }
            $0.slowest.append((seconds, "\(round)"))
            $0.slowest.sort { $0.seconds > $1.seconds }
            if $0.slowest.count > Self.slowestKept { $0.slowest.removeLast() }
        }
    }

    var count: Int { state.withLock { $0.count } }
    var failures: [String] { state.withLock { $0.failures } }
    var summary: String {
        state.withLock { s in
            s.byFault.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                + "; slowest: " + s.slowest.map { String(format: "%.1f s ", $0.seconds) + $0.round }.joined(separator: "; ")
        }
    }
}

/// The service's open descriptors and resident memory, from /proc.
struct ProcessSample {
    var descriptors: Int
    var rssKiB: Int

    static func take(pid: Int32) throws -> ProcessSample {
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        // FileHandle reads to the end; /proc files report size 0, which whole-file readers may trust.
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/status") else { throw CocoaError(.fileNoSuchFile) }
        defer { try? handle.close() }
        let status = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        let kib = Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        return ProcessSample(descriptors: fds, rssKiB: kib)
    }

    /// A sample once `settled` holds (or after 5 s), with the lowest RSS seen over the next 1.5 s:
    /// the service trims freed memory every 0.5 s, so a single reading can catch a transient peak.
    /// Closing dropped connections and cached origin connections has no event a test can wait on,
    /// so this polls, bounded.
    static func settled(pid: Int32, _ settled: (ProcessSample) -> Bool) async throws -> ProcessSample {
        var sample = try take(pid: pid)
        for _ in 0..<50 where !settled(sample) {
            try await Task.sleep(nanoseconds: 100_000_000)
            sample = try take(pid: pid)
        }
        for _ in 0..<15 {
            try await Task.sleep(nanoseconds: 100_000_000)
            sample.rssKiB = min(sample.rssKiB, try take(pid: pid).rssKiB)
        }
        return sample
    }
}
