import Basics
import Foundation

/// What a file on disk looks like to HTTP validators.
struct FileMetadata: Equatable, Sendable {
    var size: Int64
    var modified: time_t
    /// Strong, quoted.
    var etag: String
    /// Other strong validators naming the same content, honoured in `If-Range`, `If-Match` and
    /// `If-None-Match` (e.g. the origin's ETag of a file the server stores under its own).
    var alsoMatches: [String] = []
    /// Other strong dates naming the same content, honoured in `If-Range` (an exact match).
    var alsoModified: [time_t] = []

    /// Every validator naming this content.
    var etags: [String] { [etag] + alsoMatches }

    /// `"inode-size-mtime"` in hex: a strong validator derived from stat(2).
    static func derivedETag(inode: UInt64, size: Int64, modifiedNanoseconds: Int64) -> String {
        "\"\(String(inode, radix: 16))-\(String(size, radix: 16))-\(String(modifiedNanoseconds, radix: 16))\""
    }
}

/// Decides how to answer a request for a file: pure function of method, headers and metadata.
/// Preconditions in RFC 9110 §13.2.2's order: `If-Match` (else `If-Unmodified-Since`), then
/// `If-None-Match` (else `If-Modified-Since`), then `Range` under `If-Range`. Dates in any of the
/// three HTTP-date forms.
enum FilePlan: Equatable {
    case notModified
    /// `412`: an `If-Match` or `If-Unmodified-Since` the file does not meet.
    case preconditionFailed
    case full
    case partial(start: Int64, end: Int64)
    case unsatisfiable

    static func decide(method: String, headers: HTTPHeaders, file: FileMetadata) -> FilePlan {
        let cacheable = method == "GET" || method == "HEAD"
        if let im = headers["If-Match"] {
            if !ETagList.matches(im, etags: file.etags, weak: false) { return .preconditionFailed }
        } else if let ius = headers["If-Unmodified-Since"].flatMap(HTTPDate.parseStrict) {
            if file.modified > ius { return .preconditionFailed }
        }
        if cacheable, let inm = headers["If-None-Match"] {
            if ETagList.matches(inm, etags: file.etags, weak: true) { return .notModified }
        } else if cacheable, let ims = headers["If-Modified-Since"].flatMap(HTTPDate.parseStrict) {
            if file.modified <= ims { return .notModified }
        }
        guard cacheable, let range = headers["Range"] else { return .full }
        if let ifRange = headers["If-Range"] {
            let value = Substring(ifRange).trimmingSpaces()
            if value.hasPrefix("\"") {
                guard file.etags.contains(String(value)) else { return .full }
            } else if value.hasPrefix("W/") {
                return .full  // weak validators never satisfy If-Range
            } else {
                guard let date = HTTPDate.parseStrict(String(value)), date == file.modified || file.alsoModified.contains(date) else {
                    return .full
                }
            }
        }
        switch RangeHeader.evaluate(range, size: file.size) {
        case .full: return .full
        case .partial(let s, let e): return .partial(start: s, end: e)
        case .unsatisfiable: return .unsatisfiable
        }
    }

    /// The ETag the answer `plan` names: for a `304` or a `206`, the one of the content's other
    /// validators the request's `If-None-Match` or `If-Range` named, when it named one (a client
    /// holding the origin's tag of this content gets that tag back: a cache, or BuildKit's `ADD`,
    /// refuses a `304` naming a tag it does not hold); else the file's own.
    static func etag(answering plan: FilePlan, headers: HTTPHeaders, file: FileMetadata) -> String {
        let condition: (field: String, weak: Bool)
        switch plan {
        case .notModified: condition = ("If-None-Match", true)
        case .partial: condition = ("If-Range", false)
        default: return file.etag
        }
        guard let value = headers[condition.field], Substring(value).trimmingSpaces() != "*" else { return file.etag }
        if ETagList.matches(value, etags: [file.etag], weak: condition.weak) { return file.etag }
        return file.alsoMatches.first { ETagList.matches(value, etags: [$0], weak: condition.weak) } ?? file.etag
    }

}
