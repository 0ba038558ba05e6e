import Foundation
import Glibc

/// One blocking loopback socket for the connection-limit tests: connects to 127.0.0.1:`port`
/// from a chosen loopback source address (127.0.0.x, so per-IP limits can be told apart), sends,
/// and reads until the server closes. Every call is bounded by SO_RCVTIMEO/SO_SNDTIMEO.
final class LoopbackExchange: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { Glibc.close(fd) }

    static func connect(port: Int, from source: String = "127.0.0.1", timeout: Int = 10) async throws -> LoopbackExchange {
        try await onThread {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
            let exchange = LoopbackExchange(fd: fd)
            var tv = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            var remote = sockaddr_in()
            remote.sin_family = sa_family_t(AF_INET)
            remote.sin_port = UInt16(port).bigEndian
            inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
            let size = socklen_t(MemoryLayout<sockaddr_in>.size)
            guard withUnsafePointer(to: &local, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }) == 0,
                  withUnsafePointer(to: &remote, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, size) } }) == 0
            else { throw Failure(description: "bind/connect from \(source): errno \(errno)") }
            return exchange
        }
    }

    func send(_ text: String) async throws {
        let bytes = Array(text.utf8)
        let fd = self.fd
        try await onThread {
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw Failure(description: "send: errno \(errno)") }
                sent += n
            }
        }
    }

    /// Reads until `stop` says the bytes so far are enough, or the peer closes (bounded by the timeout).
    func read(until stop: @escaping @Sendable ([UInt8]) -> Bool = { _ in false }) async throws -> [UInt8] {
        let fd = self.fd
        return try await onThread {
            var out: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while !stop(out) {
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && out.isEmpty { throw Failure(description: "recv: errno \(errno)") }
                if n <= 0 { break }
                out += chunk[..<n]
            }
            return out
        }
    }

    /// One GET on a kept-alive connection; returns the response text (head and a small body).
    func get(_ path: String) async throws -> String {
        try await send("GET \(path) HTTP/1.1\r\nHost: t\r\n\r\n")
        let bytes = try await read { bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            guard let end = text.range(of: "\r\n\r\n") else { return false }
            let length = text[..<end.lowerBound].split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            return bytes.count >= text.utf8.distance(from: text.utf8.startIndex, to: end.upperBound.samePosition(in: text.utf8)!) + length
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
