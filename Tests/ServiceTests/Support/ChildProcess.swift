import Basics
import Foundation
import Glibc

/// A child process started with `posix_spawn`, for tests: the subset of Foundation's `Process` they use.
///
/// Foundation's `Process.run()` (swift-corelibs-foundation before PR #5472) over-reads `dirent.d_name`
/// while scanning /proc/self/fd and can SIGSEGV the whole test run. This starts children directly:
/// stdin from /dev/null, stdout/stderr inherited, to /dev/null, a file or a `ChildPipe`; every other
/// descriptor closed in the child (`posix_spawn_file_actions_addclosefrom_np`); signal dispositions
/// reset and the mask cleared; a new process group, as `Process` does. One thread per child waits
/// for it (`waitid` with `WNOWAIT`, then reaps under the lock, so `signal` never hits a reused pid);
/// no SIGCHLD handler.
final class ChildProcess: @unchecked Sendable {
    /// Where a standard stream goes.
    enum Stream {
        case inherit
        case null
        /// Created or truncated, mode 0644.
        case file(String)
        case pipe(ChildPipe)
    }

    enum TerminationReason: Equatable { case exit, uncaughtSignal }

    struct Failure: Error, CustomStringConvertible { var description: String }

    var executableURL: URL?
    var arguments: [String] = []
    /// nil: the test process's environment.
    var environment: [String: String]?
    var currentDirectoryURL: URL?
    var standardOutput: Stream = .inherit
    var standardError: Stream = .inherit
    /// Called once, on the child's waiter thread, after the exit status is known.
    var terminationHandler: (@Sendable (ChildProcess) -> Void)?

    private let condition = NSCondition()
    private var pid: pid_t = 0
    private var status: (code: Int32, reason: TerminationReason)?

    init() {}

    init(_ path: String, _ arguments: [String], standardOutput: Stream = .null, standardError: Stream = .null) {
        executableURL = URL(fileURLWithPath: path)
        self.arguments = arguments
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    var processIdentifier: pid_t {
        condition.lock(); defer { condition.unlock() }
        return pid
    }

    /// Started and not yet exited.
    var isRunning: Bool {
        condition.lock(); defer { condition.unlock() }
        return pid != 0 && status == nil
    }

    /// The exit code, or the signal number when killed by a signal (as `Process`); nil while running.
    var terminationStatus: Int32? {
        condition.lock(); defer { condition.unlock() }
        return status?.code
    }

    var terminationReason: TerminationReason? {
        condition.lock(); defer { condition.unlock() }
        return status?.reason
    }

    /// Starts the child; throws if it could not be spawned (e.g. no such executable).
    func run() throws {
        guard let path = executableURL?.path else { throw Failure(description: "no executableURL") }
        condition.lock()
        let started = pid != 0
        condition.unlock()
        guard !started else { throw Failure(description: "\(path) already started") }
        let child = try spawn(path)
        condition.lock(); pid = child; condition.unlock()
        for case .pipe(let pipe) in [standardOutput, standardError] { pipe.closeWriteEnd() }
        Thread.detachNewThread { [self] in waitForChild(child) }
    }

    /// Sends `signal` unless the child has already been reaped.
    func signal(_ signal: Int32) {
        condition.lock(); defer { condition.unlock() }
        if pid != 0 && status == nil { kill(pid, signal) }
    }

    /// SIGTERM.
    func terminate() { signal(SIGTERM) }

    /// Waits up to `timeout` seconds for the exit; true once it has exited.
    @discardableResult
    func waitUntilExit(timeout: Double = 60) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock(); defer { condition.unlock() }
        while status == nil {
            if !condition.wait(until: deadline) { break }
        }
        return status != nil
    }

    /// SIGTERM, SIGKILL after `grace` seconds, then waits (bounded) for the exit. No-op if not running.
    func stop(grace: Double) {
        guard isRunning else { return }
        terminate()
        if !waitUntilExit(timeout: grace) {
            signal(SIGKILL)
            waitUntilExit(timeout: 10)
        }
    }

    private func waitForChild(_ child: pid_t) {
        var info = siginfo_t()
        // WNOWAIT: the child stays a zombie (its pid reserved) until reaped below, under the lock.
        // Fails (ECHILD) only if other code reaped it first (`PostgresServer.stopAtExit`): status -1.
        let waited = (try? syscall("waitid") { waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT) }) != nil
        let code = waited ? info._sifields._sigchld.si_status : -1  // The exit code, or the signal (CLD_KILLED/CLD_DUMPED).
        let reason: TerminationReason = !waited || info.si_code == CLD_EXITED ? .exit : .uncaughtSignal
        condition.lock()
        var ignored: Int32 = 0
        while waitpid(child, &ignored, 0) == -1 && errno == EINTR {}
        status = (code, reason)
        condition.broadcast()
        condition.unlock()
        terminationHandler?(self)
    }

    private func spawn(_ path: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        try check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "addopen stdin")
        for (fd, stream) in [(Int32(1), standardOutput), (2, standardError)] {
            switch stream {
            case .inherit: break
            case .null: try check(posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0), "addopen /dev/null")
            case .file(let file):
                try check(posix_spawn_file_actions_addopen(&actions, fd, file, O_WRONLY | O_CREAT | O_TRUNC, 0o644), "addopen \(file)")
            case .pipe(let pipe):
                guard let end = pipe.writeEnd else { throw Failure(description: "pipe already used") }
                try check(posix_spawn_file_actions_adddup2(&actions, end, fd), "adddup2")
            }
        }
        try check(GNU.addclosefrom(&actions, 3), "addclosefrom_np")
        if let directory = currentDirectoryURL?.path {
            try check(GNU.addchdir(&actions, directory), "addchdir_np")
        }
        var attributes = posix_spawnattr_t()
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        try check(posix_spawnattr_setsigmask(&attributes, &none), "setsigmask")
        try check(posix_spawnattr_setsigdefault(&attributes, &all), "setsigdefault")
        try check(posix_spawnattr_setpgroup(&attributes, 0), "setpgroup")
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP
        try check(posix_spawnattr_setflags(&attributes, Int16(flags)), "setflags")

        let environment = (self.environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = CStrings([path] + arguments), envp = CStrings(environment)
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, argv.pointers, envp.pointers)
        guard rc == 0 else { throw SystemError(errno: rc, function: "posix_spawn \(path)") }
        return child
    }

    private func check(_ rc: Int32, _ what: String) throws {
        if rc != 0 { throw SystemError(errno: rc, function: what) }
    }
}

/// A NULL-terminated array of C strings, freed on deinit.
private final class CStrings {
    let pointers: [UnsafeMutablePointer<CChar>?]

    init(_ strings: [String]) { pointers = strings.map { strdup($0) } + [nil] }

    deinit { for pointer in pointers { free(pointer) } }
}

/// glibc's GNU extensions that `import Glibc` does not declare (no `_GNU_SOURCE`), looked up once
/// with `dlsym`; glibc 2.34+ has all three. Used by `ChildProcess` and `ChildPipe` only.
enum GNU {
    typealias Actions = UnsafeMutablePointer<posix_spawn_file_actions_t>
    static let addclosefrom = function("posix_spawn_file_actions_addclosefrom_np", as: (@convention(c) (Actions, Int32) -> Int32).self)
    static let addchdir = function("posix_spawn_file_actions_addchdir_np",
                                   as: (@convention(c) (Actions, UnsafePointer<CChar>) -> Int32).self)
    static let pipe2 = function("pipe2", as: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)

    private static func function<F>(_ name: String, as type: F.Type) -> F {
        guard let symbol = dlsym(nil, name) else { fatalError("glibc lacks \(name) (needs 2.34+)") }
        return unsafeBitCast(symbol, to: type)
    }
}
