import CLinux
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A parsed HTTP/1.x response as read by `RawHTTPClient`.
struct RawHTTPResponse: Sendable {
    var status: Int
    var reason: String
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    /// The first value of `name` (case-insensitive).
    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

struct RawHTTPClientError: Error, CustomStringConvertible {
    var description: String
}

/// A deliberately dumb HTTP/1.1 client over a blocking loopback socket, for tests that need exact
/// control of the bytes on the wire (pipelining, trickling, malformed requests). Every socket
/// operation is bounded by `timeout` (SO_RCVTIMEO/SO_SNDTIMEO) and runs on a private dispatch
/// queue, never blocking Swift's cooperative pool.
final class RawHTTPClient: @unchecked Sendable {
    private let fd: Int32
    private let queue = DispatchQueue(label: "RawHTTPClient")
    private var buffer: [UInt8] = []
    private var closed = false

    private init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        if !closed { Glibc.close(fd) }
    }

    /// Connects to `host:port` (loopback by default; an IPv6 address such as "::1" works too).
    /// `receiveBuffer`: a small socket receive buffer, for a client that reads slowly (or not at all).
    /// `first`: bytes sent right after connecting (a few, to fit the socket buffer in one call).
    static func connect(port: Int, host: String = "127.0.0.1", timeout: Double = 10,
                        receiveBuffer: Int32? = nil, sending first: String? = nil) async throws -> RawHTTPClient {
        try await connect(port: port, host: host, timeout: timeout, receiveBuffer: receiveBuffer,
                          sendingBytes: first.map { Array($0.utf8) })
    }

    /// `connect(sending:)` with bytes (a request head and a small body).
    static func connect(port: Int, host: String = "127.0.0.1", timeout: Double = 10,
                        receiveBuffer: Int32? = nil, sendingBytes first: [UInt8]?) async throws -> RawHTTPClient {
        try await onQueue(DispatchQueue.global()) {
            let family = host.contains(":") ? AF_INET6 : AF_INET
            let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw RawHTTPClientError(description: "socket: errno \(errno)") }
            if var size = receiveBuffer {
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - floor(timeout)) * 1_000_000))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            let rc: Int32
            if family == AF_INET6 {
                var addr = sockaddr_in6()
                addr.sin6_family = sa_family_t(AF_INET6)
                addr.sin6_port = UInt16(port).bigEndian
                inet_pton(AF_INET6, host, &addr.sin6_addr)
                rc = withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
                }
            } else {
                var addr = sockaddr_in()
                addr.sin_family = sa_family_t(AF_INET)
                addr.sin_port = UInt16(port).bigEndian
                inet_pton(AF_INET, host, &addr.sin_addr)
                rc = withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
            guard rc == 0 else {
                let err = errno
                Glibc.close(fd)
                throw RawHTTPClientError(description: "connect: errno \(err)")
            }
            // Sent at once, on the connecting thread: a server timer that starts at accept sees the
            // bytes however long the test's next step waits for a thread.
            if let bytes = first {
                guard Glibc.send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else {
                    let err = errno
                    Glibc.close(fd)
                    throw RawHTTPClientError(description: "send: errno \(err)")
                }
            }
            return RawHTTPClient(fd: fd)
        }
    }

    private static func onQueue<T: Sendable>(_ queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }

    private func run<T: Sendable>(_ body: @escaping @Sendable (RawHTTPClient) throws -> T) async throws -> T {
        try await Self.onQueue(queue) { try body(self) }
    }

    // MARK: Sending

    func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) async throws {
        try await run { client in
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw RawHTTPClientError(description: "send: errno \(errno)")
                }
                offset += n
            }
        }
    }

    /// Sends `text` at once from the calling thread, beside whatever the queue runs (a read that
    /// waits for the answer): for a body trickled while the response is awaited. False once the
    /// connection is gone.
    func sendBeside(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return n == bytes.count
    }

    /// Closes the sending side (the server reads end-of-stream).
    func shutdownWrite() { Glibc.shutdown(fd, Int32(SHUT_WR)) }

    func close() {
        queue.sync {
            if !closed { closed = true; Glibc.close(fd) }
        }
    }

    // MARK: Receiving (queue only)

    /// Reads more bytes into the buffer; returns false at end of stream. Throws on timeout/reset.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer.append(contentsOf: chunk[0..<n])
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw RawHTTPClientError(description: "read timed out") }
            if errno == ECONNRESET { return false }
            throw RawHTTPClientError(description: "recv: errno \(errno)")
        }
    }

    private func readLine() throws -> String {
        while true {
            if let line = buffer.removeFirstLine() { return line }
            guard try fill() else { throw RawHTTPClientError(description: "connection closed mid-line") }
        }
    }

    private func readExactly(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard try fill() else { throw RawHTTPClientError(description: "connection closed mid-body") }
        }
        let out = Array(buffer[..<count])
        buffer.removeFirst(count)
        return out
    }

    private func readHead(interim: Bool = false) throws -> (Int, String, [(name: String, value: String)]) {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ", maxSplits: 2).map(String.init)
        guard parts.count >= 2, let status = Int(parts[1]) else {
            throw RawHTTPClientError(description: "bad status line: \(statusLine)")
        }
        var headers: [(name: String, value: String)] = []
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw RawHTTPClientError(description: "bad header: \(line)") }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        if !interim, (100..<200).contains(status) {
            return try readHead()  // interim response: read the final one
        }
        return (status, parts.count > 2 ? parts[2] : "", headers)
    }

    private func readChunkLocked() throws -> [UInt8]? {
        let sizeLine = try readLine()
        let hex = sizeLine.split(separator: ";").first.map(String.init) ?? ""
        guard let size = Int(hex.trimmingCharacters(in: .whitespaces), radix: 16) else {
            throw RawHTTPClientError(description: "bad chunk size: \(sizeLine)")
        }
        if size == 0 {
            while try !readLine().isEmpty {}
            return nil
        }
        let data = try readExactly(size)
        _ = try readExactly(2)
        return data
    }

    // MARK: Public reading

    /// Reads one full response. `bodyless` for answers to HEAD (headers describe a body not sent).
    func readResponse(bodyless: Bool = false) async throws -> RawHTTPResponse {
        try await run { client in
            let (status, reason, headers) = try client.readHead()
            var response = RawHTTPResponse(status: status, reason: reason, headers: headers, body: [])
            if bodyless || status == 204 || status == 304 { return response }
            if let te = response.header("Transfer-Encoding"), te.lowercased() == "chunked" {
                while let chunk = try client.readChunkLocked() { response.body.append(contentsOf: chunk) }
            } else if let length = response.header("Content-Length").flatMap({ Int($0) }) {
                response.body = try client.readExactly(length)
            } else {
                while try client.fill() {}
                response.body = client.buffer
                client.buffer = []
            }
            return response
        }
    }

    /// Reads only a response head (for streams read chunk by chunk afterwards); with `interim`,
    /// a 1xx head is returned instead of skipped.
    func readResponseHead(interim: Bool = false) async throws -> RawHTTPResponse {
        try await run { client in
            let (status, reason, headers) = try client.readHead(interim: interim)
            return RawHTTPResponse(status: status, reason: reason, headers: headers, body: [])
        }
    }

    /// Reads the next chunk of a chunked body; nil after the last chunk.
    func readChunk() async throws -> [UInt8]? {
        try await run { client in try client.readChunkLocked() }
    }

    /// Reads the remaining chunks of a chunked body in one go (one hop to the client's queue, not
    /// one per chunk); the number of body bytes they carried.
    func readRemainingChunks() async throws -> Int {
        try await run { client in
            var total = 0
            while let chunk = try client.readChunkLocked() { total += chunk.count }
            return total
        }
    }

    /// True once the server has closed the connection (end of stream or reset); false if data arrived.
    func readsEndOfStream() async throws -> Bool {
        try await run { client in
            if !client.buffer.isEmpty { return false }
            return try !client.fill()
        }
    }

    /// Exactly `count` body bytes (after `readResponseHead`).
    func readExactBody(count: Int) async throws -> [UInt8] {
        try await run { client in try client.readExactly(count) }
    }

    /// Everything until the server closes.
    func readToEnd() async throws -> [UInt8] {
        try await run { client in
            while try client.fill() {}
            defer { client.buffer = [] }
            return client.buffer
        }
    }
}
