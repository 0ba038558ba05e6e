import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The real `download-service` executable, started for a live test on port 0 with its own
/// storage directories. The port comes from the first log line ("listening").
final class ServiceProcess: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let process = Process()
    let root: URL
    private(set) var port = 0
    private let log = LogCollector()

    var client: HTTPTestClient { HTTPTestClient(port: port) }

    /// Starts the service with `arguments` (plus port 0 and storage under `root`) and waits until it
    /// logs where it listens.
    init(root: URL? = nil, arguments: [String] = [], environment: [String: String] = [:], startTimeout: Double = 20) throws {
        self.root = root ?? FileManager.default.temporaryDirectory.appendingPathComponent("ds-\(UUID().uuidString)")
        process.executableURL = try Self.executable()
        process.arguments = ["--port", "0", "--state-dir", self.root.appendingPathComponent("state").path,
                             "--cache-dir", self.root.appendingPathComponent("cache").path,
                             "--data-dir", self.root.appendingPathComponent("data").path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        let log = self.log
        stderr.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil; log.finish() } else { log.append(data) }
        }
        try process.run()
        guard let line = log.waitForLine(containing: #""msg":"listening""#, timeout: startTimeout),
              let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let port = object["port"] as? Int
        else {
            process.terminate()
            throw Failure(description: "service did not report its port; log:\n\(log.text)")
        }
        self.port = port
    }

    /// `init` off the cooperative pool (it waits for the child's first log line).
    static func start(root: URL? = nil, arguments: [String] = [], environment: [String: String] = [:]) async throws -> ServiceProcess {
        try await onThread { try ServiceProcess(root: root, arguments: arguments, environment: environment) }
    }

    deinit {
        if process.isRunning { process.terminate(); process.waitUntilExit() }
    }

    /// Sends `signal` (SIGTERM by default; SIGKILL to simulate a crash) and waits for the exit
    /// status (nil if it did not exit within `timeout`).
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Double = 20) async throws -> Int32? {
        try await onThread { [self] in
            if process.isRunning { kill(process.processIdentifier, signal) }
            return log.waitForEnd(timeout: timeout) ? waitForExit() : nil
        }
    }

    private func waitForExit() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Every log line so far.
    var logLines: [String] { log.lines }

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

/// Collects a child's stderr and lets a test wait for a line.
final class LogCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var data = Data()
    private var ended = false

    func append(_ more: Data) {
        condition.lock(); data.append(more); condition.broadcast(); condition.unlock()
    }

    func finish() {
        condition.lock(); ended = true; condition.broadcast(); condition.unlock()
    }

    var text: String {
        condition.lock(); defer { condition.unlock() }
        return String(decoding: data, as: UTF8.self)
    }

    var lines: [String] { text.split(separator: "\n").map(String.init) }

    /// True once the child closed stderr (it exited), false if `timeout` passed first.
    func waitForEnd(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock(); defer { condition.unlock() }
        while !ended {
            if !condition.wait(until: deadline) { return ended }
        }
        return true
    }

    func waitForLine(containing fragment: String, timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock(); defer { condition.unlock() }
        while true {
            if let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first(where: { $0.contains(fragment) }) {
                return String(line)
            }
            if ended || !condition.wait(until: deadline) { return nil }
        }
    }
}
