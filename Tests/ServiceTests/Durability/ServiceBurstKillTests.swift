import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// SIGKILL in the middle of a burst of POSTs (new downloads, completions) and cancels, three times:
/// after each restart every download that had completed before the burst is still completed with
/// its bytes, every download listed completed has the origin's bytes, no cancelled token works
/// again, and the tokens still held keep working.
@Suite(.timeLimit(.minutes(3)))
struct ServiceBurstKillTests {
    static let size = 64 << 10

    /// One caller's POST: its download, its token and whether it cancelled at once.
    struct Posted {
        var id: String
        var token: String
        var url: String
        var cancelled: Bool
    }

    /// What a burst's callers were answered, noted as the answers come (a burst killed part-way
    /// throws, and its answers count all the same).
    struct Answered {
        /// Downloads a POST answered completed: id → URL.
        var completed: [String: String] = [:]
        /// Tokens a DELETE answered 200.
        var cancelled: [String] = []
    }

    /// POSTs `count` new URLs; every other caller cancels (`DELETE` of its token) right after its
    /// POST. Throws when the service goes away part-way; `answered` keeps what was answered until then.
    func burst(_ service: ServiceProcess, _ origin: TestOrigin, _ name: String, count: Int,
               answered: OriginLock<Answered>? = nil) async throws -> [Posted] {
        var posted: [Posted] = []
        for i in 0..<count {
            let path = "/\(name)-\(i).bin"
            origin.addResource(path: path, size: Self.size)
            let created = try await service.client.ask(origin.url(path))
            guard let id = created.string("id"), let token = created.string("token") else {
                throw TimeoutError(seconds: 0)  // not an answer the service gives while it runs
            }
            var entry = Posted(id: id, token: token, url: origin.url(path), cancelled: false)
            if created.status == 200 && created.string("state") == "completed" {
                answered?.withLock { $0.completed[id] = entry.url }
            }
            if i % 2 == 1 {
                let answer = try await service.client.request("DELETE", "/downloads/\(token)")
                entry.cancelled = answer.status == 200
                if entry.cancelled { answered?.withLock { $0.cancelled.append(token) } }
            }
            posted.append(entry)
        }
        return posted
    }

    @Test func sigkillDuringBurstsOfPostsAndCancelsLosesNothingCompletedAndResurrectsNoToken() async throws {
        let origin = try TestOrigin(bodySize: Self.size, path: "/seed.bin")
        defer { origin.stop() }
        let root = Durability.root("bursts")
        var service = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        var completed: [String: String] = [:]  // id → URL, completed before a burst that was killed (or answered so by it)
        var cancelled: [String] = []  // tokens cancelled before a burst that was killed (or by it, answered 200)
        var held: [String] = []  // tokens of completed downloads, never cancelled
        for (round, killAfter) in [0.05, 0.15, 0.3].enumerated() {
            let settled = try await burst(service, origin, "r\(round)", count: 20)
            #expect(settled.filter(\.cancelled).count == 10, "round \(round): a cancel was refused")
            for entry in settled where entry.cancelled { cancelled.append(entry.token) }
            for entry in settled where !entry.cancelled {
                let end = try await service.waitForEnd(id: entry.id)
                #expect(end["state"] as? String == "completed", "round \(round): \(end)")
                completed[entry.id] = entry.url
                held.append(entry.token)
            }
            // A held token cancelled now counts as cancelled from here on.
            if let token = held.popLast() {
                #expect(try await service.client.request("DELETE", "/downloads/\(token)").status == 200)
                cancelled.append(token)
            }
            // Committed by now: the state writer commits at most every 0.2 s.
            try await Task.sleep(for: .seconds(1))

            let victim = service
            let killer = Task { () async throws -> Int32? in
                try await Task.sleep(for: .seconds(killAfter))
                return try await victim.stop(signal: SIGKILL)
            }
            let answered = OriginLock(Answered())
            _ = try? await burst(service, origin, "k\(round)", count: 40, answered: answered)
            #expect(try await killer.value == SIGKILL)
            // What the killed burst was answered holds after the restart too (checked below, and after every later kill).
            let seen = answered.withLock { $0 }
            completed.merge(seen.completed) { before, _ in before }
            cancelled += seen.cancelled

            service = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
            let listed = try await Durability.list(service)
            var byID: [String: [String: Any]] = [:]
            for download in listed { if let id = download["id"] as? String { byID[id] = download } }
            for (id, url) in completed {
                #expect(byID[id]?["state"] as? String == "completed", "after kill \(round + 1): \(url) lost")
            }
            for download in listed where download["state"] as? String == "completed" {
                let url = try #require(download["url"] as? String)
                let sha = Durability.sha256(origin.expectedBody(path: URL(string: url)?.path ?? ""))
                #expect(download["sha256"] as? String == sha, "after kill \(round + 1): \(url) listed with a wrong SHA-256")
                let path = try #require(download["path"] as? String)
                #expect(Durability.sha256(file: path) == sha, "after kill \(round + 1): \(url) completed with wrong bytes")
            }
            for token in cancelled {
                let again = try await service.client.request("DELETE", "/downloads/\(token)")
                #expect(again.status == 404, "after kill \(round + 1): a cancelled token works again")
            }
        }
        // The tokens still held work after three kills (each DELETE here is their first).
        for token in held {
            #expect(try await service.client.request("DELETE", "/downloads/\(token)").status == 200)
        }
        #expect(try await service.stop() == 0)
        try? FileManager.default.removeItem(at: root)
    }
}
