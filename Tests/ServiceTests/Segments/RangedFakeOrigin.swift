import Foundation
@testable import DownloaderEngine

/// A scripted origin for `FakeTransferDriver` that honours `Range` and `If-Range` like nginx: a
/// range with a matching (or no) `If-Range` gets a 206 of those bytes, anything else the whole body.
struct RangedFakeOrigin: Sendable {
    var body: [UInt8]
    var etag: String
    var acceptRanges = true
    var chunk = 1000
    /// Answers a range with at most this many bytes (an origin capping its answers' length).
    var maxRangeLength: Int?

    func script(_ request: TransferRequest) -> FakeTransferDriver.Script {
        let header = { (name: String) in request.headers.first { $0.name.lowercased() == name.lowercased() }?.value }
        if let range = header("Range"), header("If-Range") == nil || header("If-Range") == etag,
           case (let first, var last)? = Self.bounds(range, count: body.count) {
            if let cap = maxRangeLength { last = min(last, first + cap - 1) }
            return FakeTransferDriver.Script(
                status: 206,
                headers: ["Content-Range": "bytes \(first)-\(last)/\(body.count)", "ETag": etag, "Content-Length": "\(last - first + 1)"],
                body: Array(body[first...last]), chunk: chunk)
        }
        var headers = ["ETag": etag, "Content-Length": "\(body.count)"]
        if acceptRanges { headers["Accept-Ranges"] = "bytes" }
        return FakeTransferDriver.Script(status: 200, headers: headers, body: body, chunk: chunk)
    }

    /// `bytes=a-b` or `bytes=a-`.
    static func bounds(_ range: String, count: Int) -> (Int, Int)? {
        guard range.hasPrefix("bytes=") else { return nil }
        let parts = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let first = Int(parts[0]) else { return nil }
        let last = parts[1].isEmpty ? count - 1 : Int(parts[1]) ?? -1
        return first <= last && last < count ? (first, last) : nil
    }
}

extension FakeTransfer {
    var range: String? { header("Range") }
}
