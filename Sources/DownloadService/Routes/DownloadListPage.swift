import DownloaderEngine
import Foundation

/// One page of `GET /downloads`, newest first: `state`, `limit` (1 to 1 000, default 1 000) and
/// `after` (the `next` cursor of the page before). Pure.
///
/// The cursor names the last download of the page before by its creation time and id, the list's
/// order, so a download created or removed between two pages moves no other one across the
/// boundary: paging through lists every download that lived throughout exactly once.
struct DownloadListPage: Equatable {
    static let maxLimit = 1_000
    var state: DownloadState?
    var limit = maxLimit
    var after: Cursor?

    /// A position in the list (`ListPosition`), written `<micros>.<id>` in `after` and `next`.
    typealias Cursor = ListPosition

    static func parse(_ items: [(name: String, value: String)]) -> Result<DownloadListPage, APIError> {
        var seen: Set<String> = []
        var page = DownloadListPage()
        for (name, value) in items {
            guard seen.insert(name).inserted else {
                return .failure(.badRequest(.invalidQuery, "the query parameter \(name) is given more than once"))
            }
            switch name {
            case "state":
                guard let state = DownloadState(rawValue: value) else {
                    let names = DownloadState.allCases.map(\.rawValue).joined(separator: ", ")
                    return .failure(.badRequest(.invalidState, "state must be one of \(names)"))
                }
                page.state = state
            case "limit":
                guard let limit = Int(value), (1...maxLimit).contains(limit) else {
                    return .failure(.badRequest(.invalidQuery, "limit must be an integer from 1 to \(maxLimit)"))
                }
                page.limit = limit
            case "after":
                guard let cursor = Cursor(text: value) else {
                    return .failure(.badRequest(.invalidQuery, "after must be the next cursor of a page of this list"))
                }
                page.after = cursor
            default:
                continue  // unknown parameters are ignored, as on /fetch
            }
        }
        return .success(page)
    }

    /// This page of `all` (any order), and the cursor of the next page when more downloads follow.
    func page(of all: [DownloadSnapshot]) -> (downloads: [DownloadSnapshot], next: Cursor?) {
        var keyed = all.map { (cursor: Cursor($0), snapshot: $0) }
        if let after { keyed.removeAll { !after.precedes($0.cursor) } }
        keyed.sort { $0.cursor.precedes($1.cursor) }
        guard keyed.count > limit else { return (keyed.map(\.snapshot), nil) }
        return (keyed.prefix(limit).map(\.snapshot), keyed[limit - 1].cursor)
    }

    /// The path of the page after the one ending at `next`, with this page's `state` and `limit`.
    func nextPath(_ next: Cursor) -> String {
        var query = [state.map { "state=\($0.rawValue)" }, limit == Self.maxLimit ? nil : "limit=\(limit)"].compactMap { $0 }
        query.append("after=\(next.text)")
        return "/downloads?" + query.joined(separator: "&")
    }
}

extension ListPosition {
    /// `<micros>.<id>`; nil for anything else.
    init?(text: String) {
        guard let dot = text.firstIndex(of: "."), let micros = Int64(text[..<dot]) else { return nil }
        let id = text[text.index(after: dot)...]
        guard (1...128).contains(id.utf8.count), id.utf8.allSatisfy(Self.isIDByte) else { return nil }
        self.init(micros: micros, id: String(id))
    }

    var text: String { "\(micros).\(id)" }

    /// Ids are the engine's (hex); the cursor allows what needs no percent-encoding in a query.
    private static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"): true
        default: false
        }
    }
}
