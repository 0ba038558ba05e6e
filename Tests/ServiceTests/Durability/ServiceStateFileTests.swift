import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// What the operator sees of the state file through the real executable: a damaged database is
/// logged as an error naming where it was kept, a newer build's database stops the start with a
/// clear message, and a clean stop leaves a database the `sqlite3` shell reads.
@Suite(.timeLimit(.minutes(2)))
struct ServiceStateFileTests {
    @Test func aDamagedDatabaseIsLoggedAndKeptAside() async throws {
        let root = Durability.root("damaged")
        let state = root.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try garbage.write(to: state.appendingPathComponent("state.db"))
        let service = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        let aside = state.appendingPathComponent("state.db.damaged").path
        let logged = service.logLines.first { $0.contains(#""level":"error""#) && $0.contains("state file damaged") }
        #expect(logged?.contains(aside) == true, "\(service.logLines)")
        #expect(FileManager.default.contents(atPath: aside) == garbage)
        let listed = try await service.client.request("GET", "/downloads")
        #expect(listed.status == 200 && (listed.json["downloads"] as? [Any])?.isEmpty == true)
        #expect(try await service.stop() == 0)
    }

    @Test func aDatabaseFromANewerBuildStopsTheStart() async throws {
        let root = Durability.root("newer")
        let state = root.appendingPathComponent("state").path
        try StateFixture.write([StateFixture.download("0123456789abcdef", .paused)], to: state)
        let db = try SQLiteConnection(path: state + "/state.db")
        try db.execute("PRAGMA user_version = 99")
        db.close()
        let stderr = try ChildPipe()
        let process = ChildProcess(try ServiceProcess.executable().path,
                                   ["--port", "0", "--state-dir", state, "--cache-dir", root.appendingPathComponent("cache").path,
                                    "--data-dir", root.appendingPathComponent("data").path],
                                   standardOutput: .null, standardError: .pipe(stderr))
        try process.run()
        let output = try await onThread { stderr.readText(timeout: 30) }
        _ = try await onThread { process.waitUntilExit(timeout: 30) }
        #expect(process.terminationStatus == 1)
        #expect(output.contains("could not start") && output.contains("schema version 99"), "\(output)")
        #expect(FileManager.default.fileExists(atPath: state + "/state.db") && !FileManager.default.fileExists(atPath: state + "/state.db.damaged"))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "needs the sqlite3 shell (scripts/setup)"))
    func aCleanStopLeavesADatabaseTheShellReads() async throws {
        let origin = try TestOrigin(bodySize: 10_000, path: "/s.bin")
        defer { origin.stop() }
        let root = Durability.root("shell")
        let service = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        let created = try await service.client.ask(origin.url)
        let id = try #require(created.string("id"))
        _ = try await service.waitForEnd(id: id)
        #expect(try await service.stop() == 0)
        let out = try ChildPipe()
        let shell = ChildProcess("/usr/bin/sqlite3", ["-readonly", root.appendingPathComponent("state/state.db").path,
                                                      "SELECT id, state FROM downloads; PRAGMA integrity_check;"],
                                 standardOutput: .pipe(out), standardError: .inherit)
        try shell.run()
        let text = try await onThread { out.readText(timeout: 30) }
        _ = try await onThread { shell.waitUntilExit(timeout: 30) }
        #expect(text == "\(id)|completed\nok\n", "\(text)")
    }
}
