import Foundation
import Glibc

/// A real nginx for integration tests: temp prefix directory, one worker, `daemon off`, listening
/// on a free 127.0.0.1 port (found by binding port 0, then released). Files go in `html/` (plain GETs
/// throttled to `limitRate` when given, range requests not); the
/// access log records each request's Range and If-Range, protocol and TLS version. With `tls` it
/// speaks HTTPS (HTTP/2 offered through ALPN when `http2`), on `[::1]` too with `ipv6`.
/// Always call `stop()`.
final class NginxOrigin: @unchecked Sendable {
    /// HTTPS settings.
    struct TLS {
        var certificate: String
        var key: String
        /// Offer HTTP/2 through ALPN.
        var http2 = true
        /// nginx's `ssl_protocols`, e.g. "TLSv1.1" for an origin this service must refuse.
        var protocols = "TLSv1.2 TLSv1.3"
        /// nginx's `ssl_ciphers` (`@SECLEVEL=0` lets OpenSSL 3 offer TLS 1.1 at all).
        var ciphers = "HIGH:!aNULL"
    }
    static let binaryCandidates = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"]

    /// The nginx binary, or nil when it is not installed.
    static var binary: String? { binaryCandidates.first { FileManager.default.isExecutableFile(atPath: $0) } }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let prefix: URL
    private(set) var port: UInt16
    private var process = ChildProcess()

    private let secure: Bool

    /// The IPv4 address it listens on (127.0.0.1 unless told otherwise).
    let address: String

    /// `http://127.0.0.1:<port>`, or `https://localhost:<port>` with TLS (the name the certificates carry).
    var baseURL: String { secure ? "https://localhost:\(port)" : "http://\(address):\(port)" }

    /// Starts nginx serving `files` (name → bytes), each location throttled to `limitRate` bytes/s when given,
    /// on `address`:`port` (0: a free port), and on [::1] too with `ipv6`.
    init(files: [String: [UInt8]], limitRate: Int? = nil, tls: TLS? = nil, ipv6: Bool = false, address: String = "127.0.0.1",
         port: UInt16 = 0) throws {
        guard let binary = Self.binary else { throw Failure(description: "nginx is not installed") }
        prefix = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-\(UUID().uuidString)")
        let html = prefix.appendingPathComponent("html")
        for dir in ["html", "logs", "tmp"] {
            try FileManager.default.createDirectory(at: prefix.appendingPathComponent(dir), withIntermediateDirectories: true)
        }
        for (name, bytes) in files { try Data(bytes).write(to: html.appendingPathComponent(name)) }
        self.port = port == 0 ? try Self.freePort() : port
        self.address = address
        secure = tls != nil
        // A free port is found by binding port 0 and releasing it: another test's listener may take
        // it before nginx binds it. nginx then retries its bind for ~2 s and exits, while the other
        // listener answers in its place: such a start is tried again on another port.
        for attempt in 1...3 {
            do {
                try start(binary: binary, html: html, tls: tls, limitRate: limitRate, ipv6: ipv6)
                return
            } catch let failure as Failure where port == 0 && attempt < 3 && failure.description.contains("Address already in use") {
                self.port = try Self.freePort()
                process = ChildProcess()
            }
        }
    }

    private func start(binary: String, html: URL, tls: TLS?, limitRate: Int?, ipv6: Bool) throws {
        var listen = tls.map { "ssl" + ($0.http2 ? " http2" : "") } ?? ""
        listen = "listen \(address):\(self.port) \(listen);" + (ipv6 ? " listen [::1]:\(self.port) \(listen);" : "")
        let tlsLines = tls.map { """
            ssl_certificate \($0.certificate); ssl_certificate_key \($0.key);
                    ssl_protocols \($0.protocols); ssl_ciphers \($0.ciphers);
            """ } ?? ""
        let user = geteuid() == 0 ? "user root root;\n" : ""
        // Throttled plain GETs (so a test can pause mid-body); range requests go at full speed.
        let rateMap = "map $http_range $origin_rate { \"\" \(limitRate ?? 0); default 0; }"
        let conf = """
        \(user)worker_processes 1;
        daemon off;
        pid \(prefix.path)/nginx.pid;
        error_log \(prefix.path)/logs/error.log warn;
        events { worker_connections 64; }
        http {
            default_type application/octet-stream;
            log_format ranges '$request_uri|$status|$http_range|$http_if_range|$server_protocol|$ssl_protocol|$connection';
            access_log \(prefix.path)/logs/access.log ranges;
            client_body_temp_path \(prefix.path)/tmp/body;
            proxy_temp_path \(prefix.path)/tmp/proxy;
            fastcgi_temp_path \(prefix.path)/tmp/fastcgi;
            uwsgi_temp_path \(prefix.path)/tmp/uwsgi;
            scgi_temp_path \(prefix.path)/tmp/scgi;
            sendfile on;
            \(rateMap)
            server {
                \(listen)
                \(tlsLines)
                root \(html.path);
                location / { limit_rate $origin_rate; }
            }
        }
        """
        let confPath = prefix.appendingPathComponent("nginx.conf").path
        try conf.write(toFile: confPath, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-p", prefix.path, "-c", confPath]
        process.standardOutput = .null
        process.standardError = .null
        let errorLog = prefix.path + "/logs/error.log"
        try? FileManager.default.removeItem(atPath: errorLog)  // this start's messages only
        try process.run()
        do {
            try waitUntilAnswering(seconds: 10)
        } catch {
            process.stop(grace: 5)  // The files stay for another start; `stop()` removes them.
            let log = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
            throw Failure(description: "nginx did not start: \(error) \(log)")
        }
    }

    /// Access log lines: `uri|status|range|if-range|protocol|tls version|connection serial` (`-` for
    /// an absent header).
    func accessLog() -> [[String]] {
        let text = (try? String(contentsOfFile: prefix.path + "/logs/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
    }

    /// Stops nginx (SIGTERM, SIGKILL after 5 s) and removes the prefix directory.
    func stop() {
        process.stop(grace: 5)
        try? FileManager.default.removeItem(at: prefix)
    }

    deinit { stop() }

    /// Binds 127.0.0.1:0, reads the port the kernel chose, releases it.
    private static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        guard OriginSocket.bindToLoopback(fd, port: 0) == 0 else { throw Failure(description: "bind: errno \(errno)") }
        return OriginSocket.localPort(fd) ?? 0
    }

    /// Connects until nginx accepts (bounded: `seconds`, or nginx exiting), once nginx wrote its pid
    /// file: it does so only after binding every listener (before, whoever answers on the port may be
    /// another test's listener).
    private func waitUntilAnswering(seconds: Double) throws {
        let deadline = Date().addingTimeInterval(seconds)
        let pidFile = prefix.path + "/nginx.pid"
        while Date() < deadline {
            guard process.isRunning else { throw Failure(description: "nginx exited with \(process.terminationStatus ?? -1)") }
            guard FileManager.default.fileExists(atPath: pidFile) else {
                usleep(20_000)
                continue
            }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var target = sockaddr_in()
            target.sin_family = sa_family_t(AF_INET)
            target.sin_port = port.bigEndian
            inet_pton(AF_INET, address, &target.sin_addr)
            let connected = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            close(fd)
            if connected == 0 { return }
            usleep(20_000)  // Start-up poll: nginx gives no other readiness signal.
        }
        throw Failure(description: "timed out after \(seconds) s")
    }
}
