import Basics
import Foundation

/// What a file on disk looks like to HTTP validators.
struct FileMetadata: Equatable, Sendable {
    var size: Int64
    var modified: time_t
    /// Strong, quoted.
    var etag: String
    /// Other strong validators naming the same content, honoured in `If-Range` (e.g. the origin's
    /// ETag of a file the server stores under its own).
    var alsoMatches: [String] = []

    /// `"inode-size-mtime"` in hex: a strong validator derived from stat(2).
    static func derivedETag(inode: UInt64, size: Int64, modifiedNanoseconds: Int64) -> String {
        "\"\(String(inode, radix: 16))-\(String(size, radix: 16))-\(String(modifiedNanoseconds, radix: 16))\""
    }
}

/// Decides how to answer a request for a file: pure function of method, headers and metadata.
enum FilePlan: Equatable {
    case notModified
    case full
    case partial(start: Int64, end: Int64)
    case unsatisfiable

    static func decide(method: String, headers: HTTPHeaders, file: FileMetadata) -> FilePlan {
        let cacheable = method == "GET" || method == "HEAD"
        if cacheable, let inm = headers["If-None-Match"] {
            if matches(inm, etag: file.etag, weak: true) { return .notModified }
        } else if cacheable, let ims = headers["If-Modified-Since"].flatMap(HTTPDate.parseIMFFixdate) {
            if file.modified <= ims { return .notModified }
        }
        guard cacheable, let range = headers["Range"] else { return .full }
        if let ifRange = headers["If-Range"] {
            let value = Substring(ifRange).trimmingSpaces()
            if value.hasPrefix("\"") {
                guard value == file.etag || file.alsoMatches.contains(String(value)) else { return .full }
            } else if value.hasPrefix("W/") {
                return .full  // weak validators never satisfy If-Range
            } else {
                guard let date = HTTPDate.parseIMFFixdate(value), date == file.modified else { return .full }
            }
        }
        switch RangeHeader.evaluate(range, size: file.size) {
        case .full: return .full
        case .partial(let s, let e): return .partial(start: s, end: e)
        case .unsatisfiable: return .unsatisfiable
        }
    }

    /// `If-None-Match` list match (`*` matches anything; weak comparison ignores `W/`).
    static func matches(_ header: String, etag: String, weak: Bool) -> Bool {
        let strip: (Substring) -> Substring = { $0.hasPrefix("W/") ? $0.dropFirst(2) : $0 }
        let ours = strip(Substring(etag))
        for item in header.split(separator: ",") {
            let tag = item.trimmingSpaces()
            if tag == "*" { return true }
            if strip(Substring(tag)) == ours { return true }
        }
        return false
    }
}
