import Basics
import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Publishing and placing files across areas, with the cross-file-system paths forced by seams.
@Suite struct FileStoreTests {
    static func store() throws -> (FileStore, URL) {
        let root = EngineFixture.root()
        return (try FileStore(configuration: EngineConfiguration(root: root)), root)
    }

    @Test func publishFallsBackToCopyWhenRenameCrossesFileSystems() throws {
        let (store, _) = try Self.store()
        let source = store.partialPath(id: "aaaaaaaaaaaaaaaa")
        let body = EngineFixture.body(3 << 20)  // More than one copy buffer.
        try Data(body).write(to: URL(fileURLWithPath: source))
        let target = store.finalPath(id: "aaaaaaaaaaaaaaaa", fileName: "f.bin", storage: .persistent)
        let renames = OriginLock<[String]>([])
        try store.publish(from: source, to: target, rename: { from, to in
            renames.withLock { $0.append(from) }
            if from == source {  // The direct rename crosses file systems.
                errno = EXDEV
                return -1
            }
            return Glibc.rename(from, to)
        })
        #expect(renames.withLock { $0 } == [source, target + ".tmp-copy"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data(body))
        #expect(!FileManager.default.fileExists(atPath: source))
        #expect(!FileManager.default.fileExists(atPath: target + ".tmp-copy"))
    }

    @Test func publishReportsOtherRenameErrorsAndKeepsTheSource() throws {
        let (store, _) = try Self.store()
        let source = store.partialPath(id: "bbbbbbbbbbbbbbbb")
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: source))
        let target = store.finalPath(id: "bbbbbbbbbbbbbbbb", fileName: "f", storage: .cache)
        #expect(throws: SystemError(errno: EACCES, function: "rename")) {
            try store.publish(from: source, to: target, rename: { _, _ in errno = EACCES; return -1 })
        }
        #expect(FileStore.fileSize(source) == 3)
        #expect(FileStore.fileSize(target) == nil)
    }

    /// The target directory's fsync reports an I/O error: the move is undone, the file back at its
    /// source whole (before, it stayed renamed into the area, where nothing recorded it, and the
    /// source was gone).
    @Test(arguments: [false, true])
    func publishUndoesTheMoveWhenTheDirectorysSyncFails(crossesFileSystems: Bool) throws {
        let (store, _) = try Self.store()
        let source = store.partialPath(id: "dddddddddddddddd")
        try Data([4, 5, 6]).write(to: URL(fileURLWithPath: source))
        let target = store.finalPath(id: "dddddddddddddddd", fileName: "f", storage: .persistent)
        #expect(throws: SystemError(errno: EIO, function: "fsync (directory)")) {
            try store.publish(from: source, to: target, rename: { from, to in
                if crossesFileSystems && from == source {
                    errno = EXDEV
                    return -1
                }
                return Glibc.rename(from, to)
            }, syncDirectory: { _ throws(SystemError) in throw SystemError(errno: EIO, function: "fsync (directory)") })
        }
        #expect(FileStore.fileSize(source) == 3)
        #expect(FileStore.fileSize(target) == nil)
    }

    @Test func placeLinksOrCopiesAndLeavesTheSource() throws {
        let (store, _) = try Self.store()
        let source = store.finalPath(id: "cccccccccccccccc", fileName: "f", storage: .cache)
        try Data([9, 8, 7]).write(to: URL(fileURLWithPath: source))
        let linked = store.finalPath(id: "cccccccccccccccc", fileName: "f", storage: .persistent)
        try Data([0]).write(to: URL(fileURLWithPath: linked))  // A leftover is replaced.
        try store.place(from: source, to: linked)
        #expect(try Data(contentsOf: URL(fileURLWithPath: linked)) == Data([9, 8, 7]))
        #expect(FileStore.fileSize(source) == 3)
        // Across file systems: a durable copy.
        let copied = store.finalPath(id: "cccccccccccccccc", fileName: "g", storage: .persistent)
        try store.place(from: source, to: copied, link: { _, _ in errno = EXDEV; return -1 })
        #expect(try Data(contentsOf: URL(fileURLWithPath: copied)) == Data([9, 8, 7]))
        #expect(FileStore.fileSize(source) == 3)
        // Where links are refused (vfat's EPERM, a FUSE volume's ENOSYS): a copy too.
        for code in [EPERM, ENOSYS] {
            let refused = store.finalPath(id: "cccccccccccccccc", fileName: "h\(code)", storage: .persistent)
            try store.place(from: source, to: refused, link: { _, _ in errno = code; return -1 })
            #expect(try Data(contentsOf: URL(fileURLWithPath: refused)) == Data([9, 8, 7]), "errno \(code)")
        }
        #expect(throws: SystemError(errno: ENOENT, function: "link")) {
            try store.place(from: source + ".missing", to: copied + "2")
        }
    }
}
