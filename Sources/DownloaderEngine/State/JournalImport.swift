import Basics
import Foundation

/// The one-time import of the state file earlier releases kept: `<state dir>/journal.json`,
///
///   {"version": 1, "downloads": [ {"id", "url", "storage", "state", "validator"?: {"etag"?,
///    "lastModified"?}, "expectedTotal"?, "verifiedOffset", "expectedSHA256"?, "expectedSize"?,
///    "fileName"?, "finalPath"?, "sha256"?, "size"?, "createdAt", "updatedAt", "lastAccess" (seconds
///    since 1970), "error"?: {"code", "message", "httpStatus"?}, "tokens"?: ["<32 hex>", …]}, … ]}
///
/// (unknown keys ignored). Its downloads are committed to the store in one batch, tokens hashed,
/// then the file is renamed to `journal.json.imported`. A crash between the two imports it again at
/// the next start, which writes the same rows again (by id). An unreadable file is renamed to
/// `journal.json.corrupt`. Both are kept, never deleted.
enum JournalImport {
    static let fileName = "journal.json"

    enum Outcome: Equatable {
        case none
        case imported(count: Int, keptAt: String)
        case unreadable(keptAt: String)
    }

    /// Imports `journal.json` from `directory` into `store`, when there is one.
    static func run(directory: String, into store: StateStore) throws(StateStoreError) -> Outcome {
        let path = directory + "/" + fileName
        guard let data = FileManager.default.contents(atPath: path) else { return .none }
        guard let downloads = decode(data) else {
            return .unreadable(keptAt: try setAside(path, suffix: ".corrupt"))
        }
        try store.commit(StateBatch(upserts: downloads))
        return .imported(count: downloads.count, keptAt: try setAside(path, suffix: ".imported"))
    }

    /// The journal's downloads; nil when it is not a version-1 journal.
    static func decode(_ data: Data) -> [StoredDownload]? {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let document = try? decoder.decode(Document.self, from: data), document.version == 1 else { return nil }
        return document.downloads.map(\.stored)
    }

    private static func setAside(_ path: String, suffix: String) throws(StateStoreError) -> String {
        do throws(SystemError) {
            return try FileStore.setAside(path, suffix: suffix)
        } catch {
            throw StateStoreError(kind: .other, message: "could not rename \(path) aside: \(error)")
        }
    }

    private struct Document: Decodable {
        var version: Int
        var downloads: [Entry]
    }

    private struct Entry: Decodable {
        struct Failure: Decodable {
            var code: String
            var message: String
            var httpStatus: Int?
        }

        struct Tags: Decodable {
            var etag: String?
            var lastModified: String?
        }

        var id: String
        var url: String
        var storage: StorageClass
        var state: DownloadState
        var validator: Tags?
        var expectedTotal: Int64?
        var verifiedOffset: Int64
        var expectedSHA256: String?
        var expectedSize: Int64?
        var fileName: String?
        var finalPath: String?
        var sha256: String?
        var size: Int64?
        var createdAt: Date
        var updatedAt: Date
        var lastAccess: Date
        var error: Failure?
        var tokens: [String]?

        var stored: StoredDownload {
            StoredDownload(
                id: id, url: url, storage: storage, state: state,
                validator: validator.map { Validator(etag: $0.etag, lastModified: $0.lastModified) },
                expectedTotal: expectedTotal, verifiedOffset: verifiedOffset, expectedSHA256: expectedSHA256,
                expectedSize: expectedSize, fileName: fileName, finalPath: finalPath, sha256: sha256, size: size,
                createdAt: createdAt, updatedAt: updatedAt, lastAccess: lastAccess,
                error: error.map { DownloadFailure(journalCode: $0.code, message: $0.message, httpStatus: $0.httpStatus) },
                tokens: Set((tokens ?? []).map(TokenHash.init(token:))))
        }
    }
}
