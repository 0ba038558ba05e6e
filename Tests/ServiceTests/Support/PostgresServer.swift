import Foundation
import Glibc
@testable import DownloaderEngine

/// A real PostgreSQL (Debian's `postgresql` package) for the cluster tests: `initdb` into a temporary
/// directory, then `postgres` in the foreground as a child, listening on 127.0.0.1 only, on a free
/// port, with its socket in that directory. `initdb` and `postgres` refuse to run as root, so as root
/// (this machine, CI) both run as the unprivileged `postgres` user (or `nobody`) through `setpriv`,
/// and the directory is made theirs. The service connects as `replica`, a role that is no superuser
/// and only owns its databases, with a password (SCRAM over TCP). Always call `stop()`;
/// `PostgresServer.shared` is one server for the whole test run, stopped at exit.
final class PostgresServer: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    static let role = "replica"
    static let password = "pw-Zq81-secret"

    /// The directory of `initdb`, `postgres` (the newest installed version), or nil.
    static var binaries: String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.compactMap(Int.init).sorted().reversed().map { "\(root)/\($0)/bin" }
            .first { FileManager.default.isExecutableFile(atPath: $0 + "/postgres") && FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }
    }

    /// Whether the tests that need PostgreSQL can run (they are skipped only when it is not installed).
    static var isInstalled: Bool { binaries != nil }

    let directory: String
    /// The server's port: free when chosen, then released until the server binds it, so another
    /// process may take it meanwhile; `init` then chooses another (`start` fails "already in use").
    private(set) var port: UInt16
    private let bin: String
    private let account: (uid: uid_t, gid: gid_t)?
    private let lock = NSLock()
    private var process: ChildProcess?

    /// The shared server (started at first use, stopped when the test process exits).
    static let shared: PostgresServer = {
        do {
            let server = try PostgresServer()
            atexit { PostgresServer.shared.stopAtExit() }
            return server
        } catch {
            fatalError("PostgreSQL did not start: \(error)")
        }
    }()

    /// `initdb` and start.
    init() throws {
        guard let bin = Self.binaries else { throw Failure(description: "PostgreSQL is not installed (scripts/setup)") }
        self.bin = bin
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("postgres-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        account = try geteuid() == 0 ? Self.unprivilegedAccount() : nil
        if let account { chown(directory, account.uid, account.gid) }
        chmod(directory, 0o700)
        port = try Self.freePort()
        let passwordFile = directory + "/pw"
        try "\(Self.password)\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        if let account { chown(passwordFile, account.uid, account.gid) }
        let initdb = try run(bin + "/initdb", ["-D", directory + "/data", "-U", "admin", "-A", "trust", "--auth-host=scram-sha-256",
                                               "--pwfile=" + passwordFile, "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"])
        guard initdb.waitUntilExit(timeout: 120) else {
            initdb.signal(SIGKILL)
            throw Failure(description: "initdb did not finish within 120 s")
        }
        guard initdb.terminationStatus == 0 else {
            throw Failure(description: "initdb exited with \(initdb.terminationStatus ?? -1) (run it by hand to see why)")
        }
        for attempt in 1...3 {
            do {
                try start()
                break
            } catch let failure as Failure where attempt < 3 && failure.description.contains("already in use") {
                port = try Self.freePort()
            }
        }
        try psql("CREATE ROLE \(Self.role) LOGIN PASSWORD '\(Self.password)' NOSUPERUSER NOCREATEDB NOCREATEROLE")
    }

    deinit { stop() }

    /// Starts `postgres` (after `init`, or again after `stop(removing: false)`), and waits until it answers.
    func start() throws {
        // The server writes its own log (logging collector) into the directory.
        let server = try run(bin + "/postgres", ["-D", directory + "/data", "-p", String(port), "-c", "listen_addresses=127.0.0.1",
                                                 "-c", "unix_socket_directories=" + directory, "-c", "fsync=off",
                                                 "-c", "max_connections=200", "-c", "shared_buffers=16MB",
                                                 "-c", "logging_collector=on", "-c", "log_directory=" + directory,
                                                 "-c", "log_filename=server.log"])
        lock.withLock { process = server }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            guard server.isRunning else { throw Failure(description: "postgres exited: \(log("server.log"))") }
            if (try? PostgresConnection(url: adminURL, timeout: 1)) != nil { return }
            usleep(50_000)  // Start-up poll: postgres gives no other readiness signal.
        }
        throw Failure(description: "postgres did not answer within 30 s: \(log("server.log"))")
    }

    /// Stops `postgres` (fast shutdown: SIGINT; SIGKILL after 10 s); with `removing`, deletes the directory too.
    func stop(removing: Bool = true) {
        let running = lock.withLock { () -> ChildProcess? in
            defer { process = nil }
            return process
        }
        if let running, running.isRunning {
            running.signal(SIGINT)
            if !running.waitUntilExit(timeout: 10) {
                running.signal(SIGKILL)
                running.waitUntilExit(timeout: 10)
            }
        }
        if removing { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Sends `signal` to the server and every process it started (its sessions, its workers):
    /// `SIGSTOP` freezes it the way a partition or a stalled disk would (connections stay open,
    /// nothing answers), `SIGCONT` wakes it.
    func signalAll(_ signal: Int32) {
        guard let server = lock.withLock({ process?.processIdentifier }), server > 0 else { return }
        kill(server, signal)
        for child in Self.children(of: server) { kill(child, signal) }
    }

    /// The processes whose parent is `parent` (from `/proc/<pid>/stat`).
    private static func children(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { name -> pid_t? in
            guard let pid = pid_t(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // After "pid (comm) ": the state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == parent ? pid : nil
        }
    }

    /// At the test process's exit, without relying on the child's waiter thread: SIGQUIT (PostgreSQL's immediate shutdown), reaped with
    /// `waitpid` for at most 5 s, SIGKILL after that; then the directory goes.
    func stopAtExit() {
        let pid = lock.withLock { process?.processIdentifier }
        if let pid, pid > 0 {
            kill(pid, SIGQUIT)
            var status: Int32 = 0
            var gone = false
            for _ in 0..<500 where !gone {
                let reaped = waitpid(pid, &status, WNOHANG)
                gone = reaped == pid || (reaped == -1 && errno == ECHILD)
                if !gone { usleep(10_000) }  // Bounded: 5 s in all.
            }
            if !gone { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The superuser's connection string (over the socket, trusted).
    var adminURL: String { "host=\(directory) port=\(port) user=admin dbname=postgres" }

    /// A new, empty database owned by `replica`, and its URL (TCP, with the password).
    func createDatabase() throws -> String {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try psql("CREATE DATABASE \(name) OWNER \(Self.role)")
        return url(database: name)
    }

    /// `postgres://replica:<password>@127.0.0.1:<port>/<database>`.
    func url(database: String) -> String {
        "postgres://\(Self.role):\(Self.password)@127.0.0.1:\(port)/\(database)"
    }

    /// Runs `sql` as the superuser.
    @discardableResult
    func psql(_ sql: String) throws -> PostgresRows {
        try PostgresConnection(url: adminURL, timeout: 5).execute(sql)
    }

    /// Starts `binary` as the unprivileged account (when root), its output discarded.
    private func run(_ binary: String, _ arguments: [String]) throws -> ChildProcess {
        let process = ChildProcess()
        if let account {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--", binary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments
        }
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.environment = ["PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"]
        process.standardOutput = .null
        process.standardError = .null
        try process.run()
        return process
    }

    private func log(_ name: String) -> String {
        ((try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)) ?? "").suffix(2000).description
    }

    /// `postgres` (Debian's package creates it) or else `nobody`.
    private static func unprivilegedAccount() throws -> (uid: uid_t, gid: gid_t) {
        for name in ["postgres", "nobody"] {
            if let entry = getpwnam(name) { return (entry.pointee.pw_uid, entry.pointee.pw_gid) }
        }
        throw Failure(description: "no unprivileged account (postgres or nobody) to run PostgreSQL as")
    }

    /// Binds 127.0.0.1:0, reads the port the kernel chose, releases it.
    private static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        guard OriginSocket.bindToLoopback(fd, port: 0) == 0 else { throw Failure(description: "bind: errno \(errno)") }
        return OriginSocket.localPort(fd) ?? 0
    }
}
