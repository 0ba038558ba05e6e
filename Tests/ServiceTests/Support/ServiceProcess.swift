import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The real `download-service` executable, started for a live test on port 0 with its own
/// storage directories. The port comes from the first log line ("listening").
///
/// Exit is observed through `terminationHandler` and stderr is read by a plain thread. Started with
/// `ChildProcess` (posix_spawn), not Foundation's `Process`, whose `run()` can crash on Linux.
final class ServiceProcess: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let process = ChildProcess()
    let root: URL
    private(set) var port = 0
    private let log = LogCollector()

    var client: HTTPTestClient { HTTPTestClient(port: port) }

    /// Starts the service with `arguments` (plus port 0 and storage under `root`) and waits until it
    /// logs where it listens.
    /// `launcher`, when given, runs first and is handed the executable and its arguments (e.g.
    /// `unshare -m sh -c '… && exec "$0" "$@"'`); it must exec the service in the same process.
    init(root: URL? = nil, arguments: [String] = [], environment: [String: String] = [:], startTimeout: Double = 20,
         launcher: [String] = []) throws {
        self.root = root ?? FileManager.default.temporaryDirectory.appendingPathComponent("ds-\(UUID().uuidString)")
        // `--shared-dir` replaces the areas (and refuses their flags beside it).
        let areas = arguments.contains("--shared-dir") ? [] : ["--state-dir", self.root.appendingPathComponent("state").path,
                                                               "--cache-dir", self.root.appendingPathComponent("cache").path,
                                                               "--data-dir", self.root.appendingPathComponent("data").path]
        let serviceArguments = ["--port", "0"] + areas + arguments
        if let first = launcher.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = Array(launcher.dropFirst()) + [try Self.executable().path] + serviceArguments
        } else {
            process.executableURL = try Self.executable()
            process.arguments = serviceArguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stderr = try ChildPipe()
        process.standardError = .pipe(stderr)
        process.standardOutput = .null
        let log = self.log
        process.terminationHandler = { finished in log.exited(finished.terminationStatus ?? -1) }
        try process.run()
        log.follow(stderr)
        guard let line = log.waitForLine(containing: #""msg":"listening""#, timeout: startTimeout),
              let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let port = object["port"] as? Int
        else {
            process.signal(SIGKILL)
            throw Failure(description: "service did not report its port; log:\n\(log.text)")
        }
        self.port = port
    }

    /// The last `limit` log lines that contain `fragment` (a download's id, say): what a failing
    /// check prints so a CI log tells the service's side of the story.
    func logLines(containing fragment: String, limit: Int = 12) -> [String] {
        Array(log.lines.filter { $0.contains(fragment) }.suffix(limit))
    }

    /// `init` off the cooperative pool (it waits for the child's first log line).
    static func start(root: URL? = nil, arguments: [String] = [], environment: [String: String] = [:],
                      launcher: [String] = []) async throws -> ServiceProcess {
        try await onThread { try ServiceProcess(root: root, arguments: arguments, environment: environment, launcher: launcher) }
    }

    /// Waits (bounded) for the process to exit by itself; its status, or nil if still running.
    func waitForExit(timeout: Double = 20) async throws -> Int32? {
        let log = log
        return try await onThread { log.waitForExit(timeout: timeout) }
    }

    /// A service the test did not stop is killed, never waited for.
    deinit {
        if log.exitStatus == nil { process.signal(SIGKILL) }
    }

    /// Sends `signal` (SIGTERM by default; SIGKILL to simulate a crash) and waits for the exit
    /// status (nil if it did not exit within `timeout`).
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Double = 20) async throws -> Int32? {
        let (process, log) = (process, log)
        return try await onThread {
            if log.exitStatus == nil { process.signal(signal) }
            return log.waitForExit(timeout: timeout)
        }
    }

    /// Every log line so far.
    var logLines: [String] { log.lines }

    /// Waits (bounded) until a log line satisfies `matches`; returns it, or nil after `timeout`.
    func waitForLogLine(timeout: Double = 20, where matches: @escaping @Sendable (Substring) -> Bool) async throws -> String? {
        let log = log
        return try await onThread { log.waitForLine(timeout: timeout, where: matches) }
    }

    /// The built executable next to the test bundle (`.build/<config>/download-service`).
    static func executable() throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = directory.appendingPathComponent("download-service")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw Failure(description: "download-service not built next to \(CommandLine.arguments[0]); run swift build first")
    }
}

/// A child's stderr and exit status, with bounded waits for a line or for the exit.
final class LogCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var data = Data()
    private var ended = false
    private var status: Int32?

    /// Reads `pipe` to its end on a thread of its own, appending as it goes, then `finish()`es.
    func follow(_ pipe: ChildPipe) {
        Thread.detachNewThread { [self] in
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(pipe.readEnd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                append(Data(chunk[..<n]))
            }
            finish()
        }
    }

    func append(_ more: Data) {
        condition.lock(); data.append(more); condition.broadcast(); condition.unlock()
    }

    func finish() {
        condition.lock(); ended = true; condition.broadcast(); condition.unlock()
    }

    func exited(_ code: Int32) {
        condition.lock(); status = code; condition.broadcast(); condition.unlock()
    }

    var exitStatus: Int32? {
        condition.lock(); defer { condition.unlock() }
        return status
    }

    var text: String {
        condition.lock(); defer { condition.unlock() }
        return String(decoding: data, as: UTF8.self)
    }

    var lines: [String] { text.split(separator: "\n").map(String.init) }

    /// The exit status, or nil if the child is still running after `timeout`.
    func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock(); defer { condition.unlock() }
        while status == nil {
            if !condition.wait(until: deadline) { break }
        }
        return status
    }

    func waitForLine(containing fragment: String, timeout: Double) -> String? {
        waitForLine(timeout: timeout) { $0.contains(fragment) }
    }

    /// The first whole line (newline-terminated) satisfying `matches`, waiting up to `timeout`.
    func waitForLine(timeout: Double, where matches: (Substring) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock(); defer { condition.unlock() }
        while true {
            let text = String(decoding: data, as: UTF8.self)
            let whole = text.hasSuffix("\n") ? text[...] : text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]
            if let line = whole.split(separator: "\n").first(where: matches) {
                return String(line)
            }
            if ended || !condition.wait(until: deadline) { return nil }
        }
    }
}
