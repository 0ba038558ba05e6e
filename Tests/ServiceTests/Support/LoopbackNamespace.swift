import Foundation
import Testing

/// Tests that make something fetch URLs through a real proxy run in a network namespace that has
/// only loopback: nothing they do can leave the machine, whatever the code under test gets wrong.
///
/// `run(suite:)` (from an ordinary test) starts this test binary again under
/// `unshare -n sh -c 'ip link set lo up; exec …'` with a filter for `suite` and
/// `DOWNLOAD_SERVICE_TEST_NETNS=1`; the suite itself is enabled only there (`isInside`), which also
/// checks that loopback is the only interface.
enum LoopbackNamespace {
    static let variable = "DOWNLOAD_SERVICE_TEST_NETNS"

    /// True in the child started by `run`, inside a namespace whose only interface is `lo`.
    static var isInside: Bool {
        guard ProcessInfo.processInfo.environment[variable] == "1" else { return false }
        // /proc/self/net/dev lists this namespace's interfaces (sysfs would show the host's).
        let table = (try? String(contentsOfFile: "/proc/self/net/dev", encoding: .utf8)) ?? ""
        let interfaces = table.split(separator: "\n").dropFirst(2).compactMap { $0.split(separator: ":").first }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        return interfaces == ["lo"]
    }

    /// Runs the suites matching `filter` in a loopback-only namespace; records an issue (with the
    /// child's output) unless they all ran and passed. `resolver`: the `/etc/resolv.conf` the
    /// child sees instead of the host's (bound over it in a mount namespace of its own).
    static func run(suite filter: String, resolver: String? = nil, timeout: Double = 240) async throws {
        let resolvConf = resolver.map { _ in FileManager.default.temporaryDirectory.appendingPathComponent("ds-resolv-\(UUID().uuidString)").path }
        if let resolvConf, let resolver { try resolver.write(toFile: resolvConf, atomically: true, encoding: .utf8) }
        defer { if let resolvConf { try? FileManager.default.removeItem(atPath: resolvConf) } }
        let output = try await onThread { () -> (Int32?, String) in
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            // A mount namespace of its own too when a resolver file is bound (private: the host's
            // /etc/resolv.conf is never touched).
            var script = "ip link set lo up && "
            if let resolvConf { script += "mount --bind '\(resolvConf)' /etc/resolv.conf && " }
            process.arguments = (resolvConf == nil ? ["-n"] : ["-n", "-m", "--propagation", "private"])
                + ["sh", "-c", script + #"exec "$0" "$@""#, CommandLine.arguments[0], "--testing-library", "swift-testing", "--filter", filter]
            process.environment = ProcessInfo.processInfo.environment.merging([variable: "1"]) { $1 }
            let pipe = try ChildPipe()
            process.standardOutput = .pipe(pipe)
            process.standardError = .pipe(pipe)
            let log = LogCollector()
            process.terminationHandler = { log.exited($0.terminationStatus ?? -1) }
            try process.run()
            log.follow(pipe)
            let status = log.waitForExit(timeout: timeout)
            if status == nil { process.signal(SIGKILL) }
            return (status, log.text)
        }
        let (status, text) = output
        let plain = text.replacingOccurrences(of: "\u{1B}[", with: "").replacingOccurrences(of: #"[0-9;]*m"#, with: "", options: .regularExpression)
        let ran = plain.contains("Test run with") && !plain.contains("Test run with 0 tests") && !plain.contains(" skipped")
        let passed = status == 0 && ran && plain.contains(" passed after ")
        #expect(passed, "\(filter) in a loopback-only namespace: exit \(String(describing: status))\n\(String(plain.suffix(6000)))")
    }
}
