import Foundation
import Glibc

/// A real Squid (Debian's) as the upstream proxy for tests, on loopback: the system's default
/// configuration (`/etc/squid/squid.conf`: CONNECT only to port 443, requests from localhost only)
/// with nothing changed but where it listens and writes, a quick shutdown and no ICMP pinger, plus,
/// when asked, an `https_port` with a test certificate and Basic authentication required of every client. Runs in the foreground
/// (`-N`) as a child; always call `stop()`. Only ever started inside a loopback-only network
/// namespace (`LoopbackNamespace`), so whatever it is asked to reach stays on this machine.
final class SquidProxy: @unchecked Sendable {
    static let binary = "/usr/sbin/squid"
    struct Failure: Error, CustomStringConvertible { var description: String }

    let directory: URL
    let port: UInt16
    /// The TLS port, when started with a certificate.
    let httpsPort: UInt16?
    private let process = ChildProcess()

    /// `http://127.0.0.1:<port>`.
    var url: String { "http://127.0.0.1:\(port)" }
    /// `https://localhost:<httpsPort>` (the test certificates name localhost).
    var httpsURL: String? { httpsPort.map { "https://localhost:\($0)" } }

    init(tls: TestCertificates.Leaf? = nil, credentials: (user: String, password: String)? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("squid-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o777)  // Squid drops to the `proxy` user.
        port = try Self.freePort()
        httpsPort = tls == nil ? nil : try Self.freePort()
        let dir = directory.path
        var conf = try String(contentsOfFile: "/etc/squid/squid.conf", encoding: .utf8)
        conf = conf.replacingOccurrences(of: "\nhttp_port 3128\n", with: "\nhttp_port 127.0.0.1:\(port)\n")
        conf = conf.replacingOccurrences(of: "\ncoredump_dir /var/spool/squid\n", with: "\ncoredump_dir \(dir)\n")
        if let credentials {
            try Self.passwordFile(user: credentials.user, password: credentials.password, at: "\(dir)/passwd")
            let rules = """
            auth_param basic program /usr/lib/squid/basic_ncsa_auth \(dir)/passwd
            acl authenticated proxy_auth REQUIRED
            http_access deny !authenticated
            include /etc/squid/conf.d/*.conf
            """
            conf = conf.replacingOccurrences(of: "include /etc/squid/conf.d/*.conf", with: rules)
        }
        if let tls, let httpsPort { conf += "\nhttps_port 127.0.0.1:\(httpsPort) tls-cert=\(tls.certificate) tls-key=\(tls.key)\n" }
        conf += """

        pid_filename \(dir)/squid.pid
        access_log stdio:\(dir)/access.log
        cache_log \(dir)/cache.log
        shutdown_lifetime 0 seconds
        pinger_enable off

        """
        let confPath = "\(dir)/squid.conf"
        try conf.write(toFile: confPath, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["-N", "-f", confPath]
        process.standardOutput = .null
        process.standardError = .null
        try process.run()
        do {
            try waitUntilListening(port, seconds: 20)
            if let httpsPort { try waitUntilListening(httpsPort, seconds: 20) }
        } catch {
            stop()
            throw Failure(description: "squid did not start: \(error) \(cacheLog)")
        }
    }

    deinit { stop() }

    var cacheLog: String { (try? String(contentsOfFile: directory.path + "/cache.log", encoding: .utf8)) ?? "" }

    /// The access log's lines (one per finished request or tunnel, e.g. `… TCP_TUNNEL/200 … CONNECT 127.0.0.1:443 …`).
    var accessLog: [String] {
        ((try? String(contentsOfFile: directory.path + "/access.log", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The targets of the CONNECTs it logged, e.g. "127.0.0.1:443", with their result ("TCP_TUNNEL/200").
    var tunnels: [(target: String, result: String)] {
        accessLog.compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard let method = fields.firstIndex(of: "CONNECT"), method + 1 < fields.count, method >= 2 else { return nil }
            return (fields[method + 1], fields[method - 2])
        }
    }

    /// Waits (bounded) until `count` tunnels are logged (Squid logs a tunnel when it closes).
    func waitForTunnels(_ count: Int, seconds: Double = 10) async throws -> [(target: String, result: String)] {
        let deadline = Date().addingTimeInterval(seconds)
        while tunnels.count < count && Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        return tunnels
    }

    /// SIGTERM (quick with `shutdown_lifetime 0`), SIGKILL after 1 s; removes the directory.
    func stop() {
        process.stop(grace: 1)
        try? FileManager.default.removeItem(at: directory)
    }

    private static func passwordFile(user: String, password: String, at path: String) throws {
        let out = try ChildPipe()
        let process = ChildProcess("/usr/bin/openssl", ["passwd", "-apr1", password], standardOutput: .pipe(out), standardError: .inherit)
        try process.run()
        let hash = out.readText(timeout: 20).trimmingCharacters(in: .whitespacesAndNewlines)
        process.waitUntilExit(timeout: 20)
        try "\(user):\(hash)\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
    }

    private static func freePort() throws -> UInt16 {
        let (fd, port) = try OriginSocket.listenOnLoopback()
        close(fd)
        return port
    }

    /// Waits until Squid says it accepts on `port` (its cache log), then until a connect succeeds.
    /// The port was found free and released: until Squid logs it, whoever answers on it may be
    /// another test's listener.
    private func waitUntilListening(_ port: UInt16, seconds: Double) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard process.isRunning else { throw Failure(description: "squid exited with \(process.terminationStatus ?? -1)") }
            guard cacheLog.contains("local=127.0.0.1:\(port) ") else {
                usleep(50_000)
                continue
            }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let connected = OriginSocket.connectToLoopback(fd, port: port)
            close(fd)
            if connected == 0 { return }
            usleep(50_000)  // Start-up poll: Squid gives no other readiness signal.
        }
        throw Failure(description: "not listening on \(port) after \(seconds) s")
    }
}
