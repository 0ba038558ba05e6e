import Foundation
import Glibc
import Testing

/// The tests' own process launcher (`ChildProcess`, `ChildPipe`), against real programs.
@Suite("Support: ChildProcess", .timeLimit(.minutes(1)))
struct ChildProcessTests {
    /// Runs `program` to its end (bounded) with stdout in a pipe; its output and the process.
    static func output(_ program: String, _ arguments: [String], configure: (ChildProcess) -> Void = { _ in }) throws -> (String, ChildProcess) {
        let out = try ChildPipe()
        let process = ChildProcess(program, arguments, standardOutput: .pipe(out), standardError: .null)
        configure(process)
        try process.run()
        let text = out.readText(timeout: 20)
        #expect(process.waitUntilExit(timeout: 20))
        return (text, process)
    }

    @Test(arguments: [(Int32(0), "exit 0"), (1, "exit 1"), (2, "exit 2"), (255, "exit 255"), (3, "false || exit 3")])
    func theExitStatusIsTheChildsExitCode(expected: Int32, script: String) throws {
        let process = ChildProcess("/bin/sh", ["-c", script])
        try process.run()
        #expect(process.waitUntilExit(timeout: 20))
        #expect(process.terminationStatus == expected && process.terminationReason == .exit && !process.isRunning)
    }

    @Test(arguments: [SIGTERM, SIGKILL, SIGINT])
    func aChildKilledByASignalReportsTheSignal(signal: Int32) throws {
        let process = ChildProcess("/bin/sleep", ["30"])
        try process.run()
        #expect(process.isRunning && process.processIdentifier > 0 && process.terminationStatus == nil)
        #expect(!process.waitUntilExit(timeout: 0.2))
        process.signal(signal)
        #expect(process.waitUntilExit(timeout: 20))
        #expect(process.terminationStatus == signal && process.terminationReason == .uncaughtSignal)
        process.terminate()  // After the exit: nothing to signal, no effect.
    }

    @Test func aChildThatSignalsItselfIsReportedAsSignalled() throws {
        let process = ChildProcess("/bin/sh", ["-c", "kill -USR1 $$"])
        try process.run()
        #expect(process.waitUntilExit(timeout: 20))
        #expect(process.terminationStatus == SIGUSR1 && process.terminationReason == .uncaughtSignal)
    }

    @Test func stdoutAndStderrGoToTheirOwnPipes() throws {
        let (out, err) = (try ChildPipe(), try ChildPipe())
        let process = ChildProcess("/bin/sh", ["-c", "printf out; printf err >&2; exit 4"], standardOutput: .pipe(out), standardError: .pipe(err))
        try process.run()
        #expect(out.readText(timeout: 20) == "out" && err.readText(timeout: 20) == "err")
        #expect(process.waitUntilExit(timeout: 20) && process.terminationStatus == 4)
    }

    @Test func oneSharedPipeGetsBothStreams() throws {
        let pipe = try ChildPipe()
        let process = ChildProcess("/bin/sh", ["-c", "printf a; printf b >&2; printf c"], standardOutput: .pipe(pipe), standardError: .pipe(pipe))
        try process.run()
        #expect(pipe.readText(timeout: 20) == "abc")
    }

    @Test func aFileIsCreatedOrTruncated() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)").path
        defer { unlink(path) }
        try "something much longer than the output\n".write(toFile: path, atomically: true, encoding: .utf8)
        let process = ChildProcess("/bin/sh", ["-c", "echo to-stdout; echo to-stderr >&2"], standardOutput: .null, standardError: .file(path))
        try process.run()
        #expect(process.waitUntilExit(timeout: 20) && process.terminationStatus == 0)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "to-stderr\n")
    }

    @Test func theEnvironmentIsExactlyTheOneGiven() throws {
        let (text, _) = try Self.output("/usr/bin/env", []) { $0.environment = ["A": "b c", "EMPTY": ""] }
        #expect(text.split(separator: "\n").sorted() == ["A=b c", "EMPTY="])
    }

    @Test func withoutAnEnvironmentTheChildInheritsOurs() throws {
        let (text, _) = try Self.output("/usr/bin/env", [])
        let path = try #require(ProcessInfo.processInfo.environment["PATH"])
        #expect(text.split(separator: "\n").contains { $0 == "PATH=\(path)" })
    }

    @Test func theWorkingDirectoryIsTheOneGiven() throws {
        let (text, _) = try Self.output("/bin/pwd", ["-P"]) { $0.currentDirectoryURL = URL(fileURLWithPath: "/usr/bin") }
        #expect(text == "/usr/bin\n")
    }

    @Test func stdinIsDevNull() throws {
        let (text, process) = try Self.output("/bin/sh", ["-c", "cat; readlink /proc/self/fd/0"])
        #expect(text == "/dev/null\n" && process.terminationStatus == 0)
    }

    /// Descriptors the test process holds without close-on-exec (and pipes made for other children)
    /// never reach the child: it has 0, 1, 2 and the one `ls` opens to list the directory.
    @Test func noDescriptorLeaksIntoTheChild() throws {
        let leaky = open("/dev/null", O_RDONLY)  // No O_CLOEXEC on purpose.
        #expect(leaky > 2)
        defer { close(leaky) }
        let other = try ChildPipe()
        let (text, process) = try Self.output("/bin/ls", ["/proc/self/fd"])
        #expect(process.terminationStatus == 0)
        #expect(text.split(separator: "\n").sorted() == ["0", "1", "2", "3"], "\(text)")
        #expect(other.writeEnd != nil)
    }

    @Test func theReadEndSeesEndOfFileWhenTheChildExits() throws {
        let pipe = try ChildPipe()
        let process = ChildProcess("/bin/true", [], standardOutput: .pipe(pipe))
        try process.run()
        #expect(pipe.writeEnd == nil)  // The parent's copy is closed at `run`.
        let started = Date()
        #expect(pipe.readToEnd(timeout: 20).isEmpty && Date().timeIntervalSince(started) < 10)
    }

    @Test func theTerminationHandlerRunsOnceWithTheStatus() throws {
        let done = DispatchSemaphore(value: 0)
        let calls = Calls()
        let process = ChildProcess("/bin/sh", ["-c", "exit 7"])
        process.terminationHandler = { finished in calls.record(finished.terminationStatus); done.signal() }
        try process.run()
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(process.waitUntilExit(timeout: 1))
        #expect(calls.statuses == [7])
    }

    @Test func stopEscalatesToSIGKILLWhenSIGTERMIsIgnored() throws {
        let out = try ChildPipe()
        let process = ChildProcess("/bin/sh", ["-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"], standardOutput: .pipe(out))
        try process.run()
        var first = [UInt8](repeating: 0, count: 6)
        #expect(read(out.readEnd, &first, 6) == 6)  // "ready\n": the trap is set.
        process.stop(grace: 0.3)
        #expect(!process.isRunning && process.terminationStatus == SIGKILL)
    }

    @Test func aMissingExecutableThrowsAndRunsNothing() {
        let process = ChildProcess("/nonexistent/program", [])
        #expect(throws: (any Error).self) { try process.run() }
        #expect(!process.isRunning && process.processIdentifier == 0)
    }

    @Test func aProcessRunsOnlyOnce() throws {
        let process = ChildProcess("/bin/true", [])
        try process.run()
        #expect(throws: ChildProcess.Failure.self) { try process.run() }
        #expect(process.waitUntilExit(timeout: 20))
    }
}

private final class Calls: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Int32?] = []
    func record(_ status: Int32?) { lock.withLock { list.append(status) } }
    var statuses: [Int32?] { lock.withLock { list } }
}
