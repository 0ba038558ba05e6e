import Foundation

/// Request helpers for live tests of the service: one `RawHTTPClient` connection per call.
/// The request goes out on the connecting thread (`RawHTTPClient.connect(sending:)`), a small body
/// with it: the server's header timer (10 s) starts at accept, and a request sent as a separate
/// step first waits for a cooperative thread and the client's queue. In a whole-suite run on 2
/// cores that once passed 10 s, and the server rightly closed the silent connection unanswered
/// (the fault soak's "connection closed mid-line").
struct HTTPTestClient: Sendable {
    var port: Int
    /// The address to connect to (IPv4 or IPv6).
    var host = "127.0.0.1"
    /// Bodies up to this size go out with the head in one send; a larger one follows it.
    static let inlineBodyBytes = 8 * 1024

    func request(_ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8] = []) async throws -> RawHTTPResponse {
        let head = Self.head(method, path, headers: headers, bodyCount: body.count)
        let inline = body.count <= Self.inlineBodyBytes
        let connection = try await RawHTTPClient.connect(port: port, host: host, sendingBytes: inline ? head + body : head)
        defer { connection.close() }
        if !inline { try await connection.send(body) }
        return try await connection.readResponse(bodyless: method == "HEAD")
    }

    /// POSTs `text` (JSON) with `Content-Type: application/json`.
    func post(_ path: String, json text: String, headers: [String: String] = [:]) async throws -> RawHTTPResponse {
        var h = headers
        h["Content-Type"] = "application/json"
        return try await request("POST", path, headers: h, body: Array(text.utf8))
    }

    /// `POST /downloads` for `url` with the default storage.
    func ask(_ url: String) async throws -> RawHTTPResponse {
        try await post("/downloads", json: #"{"url":"\#(url)"}"#)
    }

    /// Opens a streaming GET (Server-Sent Events) and returns its head and the event reader.
    func openStream(_ path: String, headers: [String: String] = [:]) async throws -> (RawHTTPResponse, EventStream) {
        let connection = try await RawHTTPClient.connect(port: port, host: host,
                                                         sendingBytes: Self.head("GET", path, headers: headers, bodyCount: 0))
        return (try await connection.readResponseHead(), EventStream(connection: connection))
    }

    private static func head(_ method: String, _ path: String, headers: [String: String], bodyCount: Int) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if bodyCount > 0 || method == "POST" { text += "Content-Length: \(bodyCount)\r\n" }
        return Array((text + "\r\n").utf8)
    }
}

extension RawHTTPResponse {
    var text: String { bodyText }

    /// The body parsed as a JSON object (empty when it is not one).
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// `json[key]` as a string, for the many id/state checks.
    func string(_ key: String) -> String? { json[key] as? String }
}

/// The chunked body of a `text/event-stream` response, read event by event (WHATWG parsing:
/// `field: value` lines, comments starting with `:`, a blank line dispatches).
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

    private let connection: RawHTTPClient
    private var pending: [UInt8] = []
    /// Comment lines seen so far (e.g. `keep-alive`).
    private(set) var comments: [String] = []

    init(connection: RawHTTPClient) {
        self.connection = connection
    }

    /// The next event, or nil when the server ended the stream.
    func next() async throws -> Event? {
        var event = Event(data: "")
        var sawField = false
        while let line = try await readLine() {
            if line.isEmpty {
                if sawField { return event }
                continue
            }
            if line.hasPrefix(":") {
                comments.append(line.dropFirst().trimmingCharacters(in: .whitespaces))
                continue
            }
            let colon = line.firstIndex(of: ":")
            let field = colon.map { String(line[..<$0]) } ?? line
            var value = colon.map { String(line[line.index(after: $0)...]) } ?? ""
            if value.hasPrefix(" ") { value.removeFirst() }
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

    /// The first event for which `matches` holds (skipping others), or nil if the stream ends.
    func next(where matches: (Event) -> Bool) async throws -> Event? {
        while let event = try await next() {
            if matches(event) { return event }
        }
        return nil
    }

    func close() { connection.close() }

    private func readLine() async throws -> String? {
        while true {
            if let line = pending.removeFirstLine() { return line }
            guard let chunk = try await connection.readChunk() else { return nil }
            pending += chunk
        }
    }
}
