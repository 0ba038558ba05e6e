import Foundation
import Testing
@testable import DownloaderEngine

/// Reading and writing a state area's database from tests, through the store itself.
enum StateFixture {
    /// Every download stored in `stateDirectory` (a second connection: the engine's may be open).
    static func read(_ stateDirectory: String) throws -> [StoredDownload] {
        try SQLiteStateStore.open(directory: stateDirectory).store.load()
    }

    /// What `engine` has committed once everything decided so far is.
    static func stored(_ engine: DownloadEngine) throws -> [StoredDownload] {
        engine.core.stateWriter.flush()
        return try read(engine.core.store.stateDirectory)
    }

    /// Stores `downloads` in `stateDirectory` (created when missing), as a running engine would.
    static func write(_ downloads: [StoredDownload], to stateDirectory: String) throws {
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        try SQLiteStateStore.open(directory: stateDirectory).store.commit(StateBatch(upserts: downloads))
    }

    /// The bytes of the database file and its WAL.
    static func fileBytes(_ stateDirectory: String) -> [UInt8] {
        ["", "-wal"].flatMap { suffix in
            FileManager.default.contents(atPath: stateDirectory + "/" + SQLiteStateStore.fileName + suffix).map { [UInt8]($0) } ?? []
        }
    }

    /// A download in `state` with every optional empty.
    static func download(_ id: String, _ state: DownloadState, url: String? = nil) -> StoredDownload {
        StoredDownload(id: id, url: url ?? "http://o.test/\(id)", storage: .cache, state: state, validator: nil, expectedTotal: nil,
                       verifiedOffset: 0, expectedSHA256: nil, expectedSize: nil, fileName: nil, finalPath: nil, sha256: nil,
                       size: nil, createdAt: Date(timeIntervalSince1970: 1000), updatedAt: Date(timeIntervalSince1970: 1001),
                       lastAccess: Date(timeIntervalSince1970: 1002), error: nil)
    }
}

extension [UInt8] {
    /// Whether `needle` occurs anywhere in these bytes.
    func contains(bytes needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        let first = needle[0]
        var index = 0
        while index <= count - needle.count {
            if self[index] == first, self[index..<index + needle.count].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }
}
