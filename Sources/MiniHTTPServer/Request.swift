/// A parsed HTTP/1.x request as handed to the handler, with its whole (bounded) body.
public struct Request: Sendable {
    /// The method token exactly as sent, e.g. `GET`.
    public var method: String
    /// The raw request-target, e.g. `/downloads?state=paused`.
    public var target: String
    /// The target's path, without the query, not percent-decoded.
    public var path: String
    /// The raw query string after `?`, if any.
    public var query: String?
    /// HTTP version as (major, minor), e.g. (1, 1).
    public var version: (major: Int, minor: Int)
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// The peer's address as text, e.g. `127.0.0.1:53122`.
    public var remoteAddress: String
    /// The connection's client side: whether the client shut down its sending side (nil outside a server).
    public var peerSide: PeerSide?

    public init(
        method: String, target: String, version: (major: Int, minor: Int) = (1, 1),
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], remoteAddress: String = ""
    ) {
        self.method = method
        self.target = target
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            self.path = String(target[..<q])
            self.query = String(target[target.utf8.index(after: q)...])
        } else {
            self.path = target
            self.query = nil
        }
        self.version = version
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The peer's IP address alone, e.g. `127.0.0.1` (for per-client limits).
    public var remoteIP: String { ConnectionCounts.ip(ofRemote: remoteAddress) }

    /// Query parameters, `+` and percent-escapes decoded, in order.
    public var queryItems: [(name: String, value: String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                let plus = s.replacingOccurrences(of: "+", with: " ")
                return plus.removingPercentEncoding ?? plus
            }
            return (name: decode(parts[0]), value: parts.count > 1 ? decode(parts[1]) : "")
        }
    }
}

import Foundation
