import Foundation
import Glibc

/// A webhook receiver for tests: an HTTP/1.1 server on 127.0.0.1 (port 0) that records every
/// request (method, target, headers, body) and answers each with the next of `answers` (then 200),
/// one request per connection. Plain blocking sockets, a thread per connection, 1 MiB bodies at
/// most. Always call `stop()`.
final class WebhookReceiver: Sendable {
    struct Answer: Sendable {
        var status: Int
        var retryAfter: String? = nil
        /// Hold the answer until `release()` (or `stop()`, or 20 s): a client killed meanwhile never gets it.
        var held = false
    }

    struct Received: Sendable {
        var method: String
        var target: String
        /// Header names lower-cased.
        var headers: [String: String]
        var body: [UInt8]
        /// When the whole request was read (on the connection's thread: a test's own task may be
        /// scheduled late on a loaded machine, the receiver's clock is not).
        var at = Date()

        var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] }
    }

    private let connections: ConnectionThreads
    private let state = OriginLock<(answers: [Answer], received: [Received])>(([], []))
    private let released = DispatchSemaphore(value: 0)

    var port: UInt16 { connections.port }

    init(answers: [Answer] = []) throws {
        connections = try ConnectionThreads()
        state.withLock { $0.answers = answers }
        connections.start { [self] fd in serve(fd) }
    }

    /// `http://127.0.0.1:<port>` + `path`.
    func url(_ path: String = "/hook") -> String { "http://127.0.0.1:\(port)\(path)" }

    var received: [Received] { state.withLock { $0.received } }

    /// Answers for the next requests (replacing those not used yet).
    func answerNext(_ answers: [Answer]) { state.withLock { $0.answers = answers } }

    /// Waits (polling every 20 ms, at most `timeout` seconds) until `count` requests arrived.
    func waitFor(_ count: Int, timeout: Double = 20) async throws -> [Received] {
        try await withTimeout(timeout) {
            while true {
                let got = self.received
                if got.count >= count { return got }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
        }
    }

    private func serve(_ fd: Int32) {
        OriginSocket.setReceiveTimeout(fd, seconds: 5)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var headEnd: Int?
        var needed = Int.max
        while bytes.count < needed && bytes.count <= 1 << 20 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            bytes += buffer[0..<count]
            if headEnd == nil, let end = Self.find([13, 10, 13, 10], in: bytes) {
                headEnd = end + 4
                let head = String(decoding: bytes[0..<end], as: UTF8.self)
                let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                needed = end + 4 + length
            }
        }
        guard let headEnd else { return }
        let lines = String(decoding: bytes[0..<(headEnd - 4)], as: UTF8.self).split(separator: "\r\n")
        let requestLine = lines.first?.split(separator: " ") ?? []
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let received = Received(method: requestLine.first.map(String.init) ?? "", target: requestLine.dropFirst().first.map(String.init) ?? "",
                                headers: headers, body: Array(bytes[headEnd..<min(bytes.count, needed)]))
        let answer = state.withLock { s -> Answer in
            s.received.append(received)
            return s.answers.isEmpty ? Answer(status: 200) : s.answers.removeFirst()
        }
        if answer.held { _ = released.wait(timeout: .now() + 20) }
        var response = "HTTP/1.1 \(answer.status) Answer\r\nContent-Length: 2\r\nConnection: close\r\n"
        if let retryAfter = answer.retryAfter { response += "Retry-After: \(retryAfter)\r\n" }
        response += "\r\nok"
        _ = Array(response.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        for start in 0...(bytes.count - needle.count) where bytes[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }

    /// Lets a held answer go.
    func release() { released.signal() }

    /// Closes the listener and every connection (letting held answers go); waits up to 5 s for the threads.
    func stop() { connections.stop { released.signal() } }
}
