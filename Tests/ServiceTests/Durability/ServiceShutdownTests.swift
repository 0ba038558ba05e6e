import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// SIGTERM is a shutdown, not a cancel: transfers stop with their partials flushed and stored, the
/// process exits 0 quickly, and after the restart the downloads carry on by themselves from where
/// they stopped, with their callers' tokens still working.
@Suite(.timeLimit(.minutes(2)))
struct ServiceShutdownTests {
    @Test func sigtermFlushesJournalsAndTheDownloadsCarryOnWithTheirTokens() async throws {
        // Two origins: t0's is unthrottled after the restart (it completes), t1's stays throttled
        // (so it is still running when its caller cancels).
        let origin = try TestOrigin(bodySize: 16 << 20, path: "/t0.bin")
        defer { origin.stop() }
        let slow = try TestOrigin(bodySize: 40 << 20, path: "/t1.bin")
        defer { slow.stop() }
        origin.update { $0.bytesPerSecond = 1 << 20 }
        slow.update { $0.bytesPerSecond = 1 << 20 }
        // Each first answer stops after 1 MiB until the service leaves (at the SIGTERM), so no
        // download can complete before it: unheld, t0's 16 s at 1 MiB/s ran out under load before the
        // test reached its SIGTERM (it was stored `completed`). The service's 30 s stall timeout
        // would reconnect, with the rest still throttled.
        for o in [origin, slow] {
            o.update { $0.stallBound = 100 }
            o.inject(.stall(afterBodyBytes: 1 << 20))
        }
        let urls = [origin.url("/t0.bin"), slow.url("/t1.bin")]
        let root = Durability.root("sigterm")
        let first = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        var ids: [String] = []
        var tokens: [String] = []
        for url in urls {
            let created = try await first.client.ask(url)
            ids.append(try #require(created.string("id")))
            tokens.append(try #require(created.string("token")))
        }
        for id in ids {
            let (_, stream) = try await first.client.openStream("/downloads/\(id)/progress")
            _ = try await stream.next { ($0.json["bytesWritten"] as? Int ?? 0) >= 512 << 10 }
            stream.close()
        }
        let asked = Date()
        #expect(try await first.stop(signal: SIGTERM) == 0)
        // Below the server's 10 s grace and the engine's 10 s drain, with room for a loaded machine.
        #expect(Date().timeIntervalSince(asked) < 9, "the shutdown took too long")

        // Every partial was flushed and its full length stored as durable.
        let state = root.appendingPathComponent("state").path
        let entries = try StateFixture.read(state)
        #expect(entries.count == 2)
        var offsets: [String: Int64] = [:]
        for entry in entries {
            #expect(entry.state == .downloading, "\(entry.id) is \(entry.state)")
            #expect(entry.verifiedOffset > 0)
            #expect(FileStore.fileSize(state + "/partials/\(entry.id).part") == entry.verifiedOffset)
            #expect(entry.tokens.count == 1)
            offsets[entry.url] = entry.verifiedOffset
        }

        origin.update { $0.bytesPerSecond = nil }
        let second = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        // t1's caller is still its caller: its token cancels (pauses) it, keeping the stored bytes.
        let cancelled = try await second.client.request("DELETE", "/downloads/\(tokens[1])")
        #expect(cancelled.status == 200 && cancelled.string("state") == "paused", "\(cancelled.bodyText)")
        #expect(Int64(cancelled.json["bytesWritten"] as? Int ?? 0) >= offsets[urls[1]] ?? .max)
        // t0 carries on by itself and resumes exactly where it stopped.
        let done = try await second.waitForEnd(id: ids[0])
        #expect(done["state"] as? String == "completed")
        #expect(done["sha256"] as? String == Durability.sha256(origin.expectedBody(path: "/t0.bin")))
        let resumedAt = origin.requests(path: "/t0.bin").last?.header("range")
        #expect(resumedAt == "bytes=\(offsets[urls[0]] ?? -1)-")
        #expect(try await second.stop() == 0)
    }

    /// A `/fetch` reader waiting for bytes the stopped transfer will never bring does not hold the
    /// shutdown for the server's whole grace period (10 s): its answer ends short at once.
    @Test func aStreamingFetchDoesNotHoldTheShutdown() async throws {
        let origin = try ServiceLiveTests.originStallingAtOneMiB(bodySize: 4 << 20, seconds: 60)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Durability.allowLoopback)
        let reader = try await FetchLiveTests.open(service, origin.url)
        defer { reader.close() }
        let head = try await reader.readResponseHead()
        let id = try #require(head.header("X-Download-Id"))
        try await ServiceLiveTests.waitForTheStall(service, id: id)
        let asked = Date()
        #expect(try await service.stop() == 0)
        #expect(Date().timeIntervalSince(asked) < 9, "the shutdown waited for the reader (its 10 s grace)")
        let body = try await reader.readToEnd()
        #expect(body.count < 4 << 20, "a truncated body, never a complete-looking one")
    }

    /// A second SIGINT or SIGTERM while the first one's shutdown runs (an operator's second
    /// Ctrl-C) exits at once, with 128 + that signal and a line saying so.
    @Test func aSecondSignalExitsAtOnce() async throws {
        let service = try await ServiceProcess.start(arguments: Durability.allowLoopback)
        let pid = service.process.processIdentifier
        // Back to back, before the graceful stop can end (an idle service's takes milliseconds).
        // Both pending at once are delivered lowest first: either one may be the second.
        kill(pid, SIGTERM)
        kill(pid, SIGINT)
        let status = try await service.stop(signal: 0, timeout: 20)
        #expect(status == 128 + SIGINT || status == 128 + SIGTERM, "exit \(String(describing: status))")
        #expect(service.logLines.contains { $0.contains("another shutdown signal: exiting at once") })
    }

    /// `--shutdown-delay`: after SIGTERM, `/readyz` answers `503 shutting_down` at once while the
    /// rest keeps serving (a load balancer's time to stop sending), then the stop goes as usual.
    /// SIGINT (an operator's Ctrl-C) does not wait.
    @Test func aShutdownDelayKeepsServingWhileReadinessSaysNo() async throws {
        let service = try await ServiceProcess.start(arguments: Durability.allowLoopback + ["--shutdown-delay", "3"])
        #expect(try await service.client.request("GET", "/readyz").status == 200)
        let asked = Date()
        kill(service.process.processIdentifier, SIGTERM)
        let ready = try await withTimeout(20) { () async throws -> RawHTTPResponse in
            while true {
                let answer = try await service.client.request("GET", "/readyz")
                if answer.status != 200 { return answer }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(ready.status == 503 && ready.bodyText.contains("shutting_down") && ready.header("Retry-After") != nil)
        #expect(try await service.client.request("GET", "/healthz").status == 200, "still serving")
        #expect(try await service.waitForExit(timeout: 20) == 0)
        #expect(Date().timeIntervalSince(asked) >= 3, "stopped after the delay")

        let interrupted = try await ServiceProcess.start(arguments: Durability.allowLoopback + ["--shutdown-delay", "30"])
        let interruptedAt = Date()
        #expect(try await interrupted.stop(signal: SIGINT) == 0)
        #expect(Date().timeIntervalSince(interruptedAt) < 15, "Ctrl-C does not wait out the delay")

        // A second signal during the delay ends it: the graceful stop follows (exit 0, "stopped").
        let impatient = try await ServiceProcess.start(arguments: Durability.allowLoopback + ["--shutdown-delay", "30"])
        let impatientAt = Date()
        kill(impatient.process.processIdentifier, SIGTERM)
        _ = try await impatient.waitForLogLine { $0.contains("shutting down") }
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await impatient.stop(signal: SIGINT) == 0)
        #expect(Date().timeIntervalSince(impatientAt) < 15)
        #expect(impatient.logLines.contains { $0.contains(#""msg":"stopped""#) }, "the graceful stop's last line")
    }

    /// A `/fetch` still waiting for the origin's head when the service stops is answered at once
    /// (`503 shutting_down`), not left without an answer until the server's 10 s grace ran out.
    @Test func aFetchWaitingForTheOriginIsAnsweredShuttingDown() async throws {
        let origin = try TestOrigin(bodySize: 1024)
        defer { origin.stop() }
        origin.update { $0.headByteDelay = 1 }  // a head of minutes
        let service = try await ServiceProcess.start(arguments: Durability.allowLoopback)
        let reader = try await FetchLiveTests.open(service, origin.url)
        defer { reader.close() }
        let deadline = Date().addingTimeInterval(10)
        while origin.requests().isEmpty && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!origin.requests().isEmpty, "the origin was asked")
        let asked = Date()
        kill(service.process.processIdentifier, SIGTERM)
        let head = try await reader.readResponseHead()
        #expect(head.status == 503, "\(head.status)")
        let body = try await reader.readToEnd()
        #expect(String(decoding: body, as: UTF8.self).contains("shutting_down"))
        #expect(try await service.stop(signal: 0) == 0)
        #expect(Date().timeIntervalSince(asked) < 8, "answered and stopped without waiting for the server's grace")
    }
}
