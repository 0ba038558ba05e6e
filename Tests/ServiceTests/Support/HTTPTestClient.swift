import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small blocking HTTP/1.1 client for live tests: one connection per call, every read bounded by
/// a socket timeout, so a hung server fails the test instead of hanging it.
struct HTTPTestClient: Sendable {
    struct Reply: Sendable {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        var text: String { String(decoding: body, as: UTF8.self) }

        /// The body parsed as a JSON object (empty when it is not one).
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
        }

        /// `json[key]` as a string, for the many id/state checks.
        func string(_ key: String) -> String? { json[key] as? String }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    var port: Int
    var timeout: Double = 10

    func request(_ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8] = []) async throws -> Reply {
        let (port, timeout) = (port, timeout)
        return try await onThread {
            let connection = try Connection(port: port, timeout: timeout)
            defer { connection.close() }
            try connection.send(Self.head(method, path, headers: headers, bodyCount: body.count) + body)
            return try connection.readReply(method: method)
        }
    }

    /// Sends `text` as the body (e.g. JSON) with `Content-Type: application/json`.
    func post(_ path: String, json text: String, headers: [String: String] = [:]) async throws -> Reply {
        var h = headers
        h["Content-Type"] = "application/json"
        return try await request("POST", path, headers: h, body: Array(text.utf8))
    }

    /// Opens a streaming GET and returns the connection positioned at the start of the body.
    func openStream(_ path: String, headers: [String: String] = [:]) async throws -> (Reply, EventStream) {
        let (port, timeout) = (port, timeout)
        return try await onThread {
            let connection = try Connection(port: port, timeout: timeout)
            try connection.send(Self.head("GET", path, headers: headers, bodyCount: 0))
            let head = try connection.readHead()
            return (head, EventStream(connection: connection, chunked: head.header("Transfer-Encoding")?.lowercased() == "chunked"))
        }
    }

    static func head(_ method: String, _ path: String, headers: [String: String], bodyCount: Int) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if bodyCount > 0 || method == "POST" { text += "Content-Length: \(bodyCount)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    /// The body of a Server-Sent Events response, read event by event.
    final class EventStream: @unchecked Sendable {
        struct Event: Equatable, Sendable {
            var id: String?
            var event: String?
            var data: String
            var retry: String?

            /// `data` parsed as a JSON object.
            var json: [String: Any] {
                (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
            }
        }

        private let connection: Connection
        private let chunked: Bool
        private var decoded: [UInt8] = []
        /// Comment lines seen so far (e.g. `keep-alive`).
        private(set) var comments: [String] = []
        /// Every byte of the body as received (after de-chunking), for framing checks.
        private(set) var raw: [UInt8] = []

        init(connection: Connection, chunked: Bool) {
            self.connection = connection
            self.chunked = chunked
        }

        /// The next event, or nil when the server ended the stream.
        func next() async throws -> Event? {
            try await onThread { try self.nextBlocking() }
        }

        /// The first event for which `matches` holds (skipping others), or nil if the stream ends.
        func next(where matches: @escaping @Sendable (Event) -> Bool) async throws -> Event? {
            try await onThread {
                while let event = try self.nextBlocking() {
                    if matches(event) { return event }
                }
                return nil
            }
        }

        private func nextBlocking() throws -> Event? {
            var event = Event(data: "")
            var sawField = false
            while let line = try readLine() {
                if line.isEmpty {
                    if sawField { return event }
                    continue
                }
                if line.hasPrefix(":") { comments.append(String(line.dropFirst()).trimmingCharacters(in: .whitespaces)); continue }
                let (field, value) = line.firstIndex(of: ":").map {
                    (String(line[..<$0]), String(line[line.index(after: $0)...]).replacingOccurrences(of: "^ ", with: "", options: .regularExpression))
                } ?? (line, "")
                sawField = true
                switch field {
                case "id": event.id = value
                case "event": event.event = value
                case "retry": event.retry = value
                case "data": event.data += event.data.isEmpty ? value : "\n" + value
                default: break
                }
            }
            return nil
        }

        func close() { connection.close() }

        private func readLine() throws -> String? {
            while true {
                if let nl = decoded.firstIndex(of: 0x0A) {
                    var line = Array(decoded[..<nl])
                    decoded.removeFirst(nl + 1)
                    if line.last == 0x0D { line.removeLast() }
                    return String(decoding: line, as: UTF8.self)
                }
                guard let more = try nextBodyBytes(), !more.isEmpty else { return nil }
                raw += more
                decoded += more
            }
        }

        private func nextBodyBytes() throws -> [UInt8]? {
            guard chunked else { return try connection.readSome() }
            guard let sizeLine = try connection.readLine(), let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else { return nil }
            if size == 0 { return nil }
            let data = try connection.readExactly(size)
            _ = try connection.readLine()
            return data
        }
    }

    /// One TCP connection to 127.0.0.1 with receive/send timeouts.
    final class Connection: @unchecked Sendable {
        private let fd: Int32
        private var buffer: [UInt8] = []
        private var closed = false

        init(port: Int, timeout: Double) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
            var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard rc == 0 else {
                let e = errno
                Glibc.close(fd)
                throw Failure(description: "connect to port \(port): errno \(e)")
            }
        }

        deinit { close() }

        func close() {
            if !closed { closed = true; Glibc.close(fd) }
        }

        func send(_ bytes: [UInt8]) throws {
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw Failure(description: "send: errno \(errno)") }
                offset += n
            }
        }

        /// Whatever arrives next (buffered bytes first); [] at end of stream.
        func readSome() throws -> [UInt8] {
            if !buffer.isEmpty { defer { buffer.removeAll() }; return buffer }
            return try readSomeFromSocket()
        }

        func readLine() throws -> String? {
            while true {
                if let nl = buffer.firstIndex(of: 0x0A) {
                    var line = Array(buffer[..<nl])
                    buffer.removeFirst(nl + 1)
                    if line.last == 0x0D { line.removeLast() }
                    return String(decoding: line, as: UTF8.self)
                }
                let more = try readSomeFromSocket()
                if more.isEmpty { return nil }
                buffer += more
            }
        }

        func readExactly(_ count: Int) throws -> [UInt8] {
            while buffer.count < count {
                let more = try readSomeFromSocket()
                guard !more.isEmpty else { throw Failure(description: "connection closed after \(buffer.count) of \(count) bytes") }
                buffer += more
            }
            defer { buffer.removeFirst(count) }
            return Array(buffer[..<count])
        }

        func readHead() throws -> Reply {
            guard let statusLine = try readLine() else { throw Failure(description: "no response") }
            let parts = statusLine.split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, let status = Int(parts[1]) else { throw Failure(description: "bad status line: \(statusLine)") }
            var headers: [(name: String, value: String)] = []
            while let line = try readLine(), !line.isEmpty {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            return Reply(status: status, headers: headers, body: [])
        }

        func readReply(method: String) throws -> Reply {
            var reply = try readHead()
            if method == "HEAD" || reply.status == 204 || reply.status == 304 { return reply }
            if reply.header("Transfer-Encoding")?.lowercased() == "chunked" {
                while let sizeLine = try readLine(), let size = Int(sizeLine.split(separator: ";")[0], radix: 16), size > 0 {
                    reply.body += try readExactly(size)
                    _ = try readLine()
                }
            } else if let length = reply.header("Content-Length").flatMap(Int.init) {
                reply.body = try readExactly(length)
            } else {
                while case let more = try readSome(), !more.isEmpty { reply.body += more }
            }
            return reply
        }

        private func readSomeFromSocket() throws -> [UInt8] {
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { throw Failure(description: errno == EAGAIN ? "read timed out" : "recv: errno \(errno)") }
            return Array(chunk[..<n])
        }
    }
}
