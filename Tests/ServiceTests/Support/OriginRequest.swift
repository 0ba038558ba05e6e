import Foundation

/// A request `TestOrigin` received, as recorded for assertions.
struct RecordedRequest: Sendable, Equatable {
    var method: String
    /// The request target's path (query string removed).
    var path: String
    /// Header fields in wire order, names as sent.
    var headers: [Header]
    /// Which accepted connection carried it (0, 1, 2, … in accept order).
    var connection: Int

    struct Header: Sendable, Equatable {
        var name: String
        var value: String
    }

    /// The first value of `name` (any case), or nil.
    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Parses one request head (up to and including the blank line). Pure; used by `TestOrigin`.
enum OriginRequestParser {
    enum Outcome: Equatable {
        /// The head is not complete yet.
        case needMoreData
        /// A head of `length` bytes.
        case parsed(method: String, target: String, version: String, headers: [RecordedRequest.Header], length: Int)
        case invalid(String)
    }

    /// Largest request head accepted.
    static let maxHeadBytes = 64 * 1024

    static func parse(_ bytes: [UInt8]) -> Outcome {
        guard let end = headEnd(bytes) else {
            return bytes.count > maxHeadBytes ? .invalid("head too large") : .needMoreData
        }
        guard end <= maxHeadBytes else { return .invalid("head too large") }
        guard let text = String(validating: bytes[..<end], as: UTF8.self) else { return .invalid("not UTF-8") }
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        while lines.last == "" { lines.removeLast() }
        guard !lines.isEmpty else { return .invalid("empty head") }
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else { return .invalid("bad request line") }
        var headers: [RecordedRequest.Header] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                return .invalid("bad header line")
            }
            let name = String(line[..<colon])
            guard !name.contains(" ") && !name.contains("\t") else { return .invalid("space in header name") }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append(.init(name: name, value: value))
        }
        return .parsed(method: String(requestLine[0]), target: String(requestLine[1]),
                       version: String(requestLine[2]), headers: headers, length: end)
    }

    /// The index just past "\r\n\r\n", or nil.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count
        where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
            return index + 1
        }
        return nil
    }
}
