import Basics
@testable import DownloaderEngine
import Foundation
import Glibc
@testable import MiniHTTPServer
import Testing

/// File names and paths never escape the storage areas: no `..`, separators or NUL in names, and a
/// symlink planted in an area is never followed out of it (writes, size checks, serving).
@Suite struct StoragePathTests {
    /// A storage root and a "secret" file outside every area, with a link to it planted at `link`.
    struct Planted {
        let root: URL
        let secret: String
        static let secretBytes = Array("outside the storage areas\n".utf8)

        init() throws {
            root = EngineFixture.root()
            secret = root.appendingPathComponent("secret.txt").path
            try Data(Self.secretBytes).write(to: URL(fileURLWithPath: secret))
        }

        func plant(at path: String) throws {
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            guard symlink(secret, path) == 0 else { throw SystemError(errno: errno, function: "symlink") }
        }

        var secretUntouched: Bool {
            (try? Data(contentsOf: URL(fileURLWithPath: secret))).map(Array.init) == Self.secretBytes
        }
    }

    @Test(arguments: ["../../etc/passwd", "/etc/passwd", "..", ".", "a/../../b", "evil\u{0}name.txt", "..\\..\\x",
                      "....//....//x", ".hidden", "\u{0}"])
    func fileNamesStayInsideTheArea(raw: String) {
        let name = FileNameSanitizer.sanitize(raw)
        #expect(!name.isEmpty && !name.contains("/") && !name.contains("\\") && !name.contains("\u{0}"))
        #expect(!name.contains("..") && !name.hasPrefix("."))
        let store = "/srv/cache"
        let path = store + "/0123456789abcdef-" + name
        #expect(URL(fileURLWithPath: path).standardized.path.hasPrefix(store + "/"))
    }

    @Test func aPartialIsNeverOpenedThroughAPlantedLink() throws {
        let planted = try Planted()
        let partial = planted.root.appendingPathComponent("state/partials/0123456789abcdef.part").path
        try planted.plant(at: partial)
        #expect(throws: SystemError.self) { _ = try PartialFile(path: partial, keep: 0) }
        #expect(planted.secretUntouched)
    }

    @Test func aCopyIntoAnAreaNeverWritesThroughAPlantedLink() throws {
        let planted = try Planted()
        let store = try FileStore(configuration: EngineConfiguration(root: planted.root))
        let source = store.partialPath(id: "feedfacefeedface")
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: source))
        let target = store.finalPath(id: "feedfacefeedface", fileName: "f.bin", storage: .persistent)
        try planted.plant(at: target + ".tmp-copy")  // where the cross-device copy is staged
        try store.place(from: source, to: target, link: { _, _ in errno = EXDEV; return -1 })
        #expect(planted.secretUntouched)
        #expect(FileStore.fileSize(target) == 4096)

        // The same for a move (publish) across file systems, with the link at the target itself.
        let other = store.finalPath(id: "feedfacefeedface", fileName: "g.bin", storage: .cache)
        try planted.plant(at: other)
        try store.publish(from: source, to: other, rename: { from, to in
            if from == source { errno = EXDEV; return -1 }
            return Glibc.rename(from, to)
        })
        #expect(planted.secretUntouched)
        #expect(FileStore.fileSize(other) == 4096)
    }

    @Test func aLinkIsNeverTakenForAStoredFile() throws {
        let planted = try Planted()
        let link = planted.root.appendingPathComponent("data/0123456789abcdef-file").path
        try planted.plant(at: link)
        #expect(FileStore.fileSize(planted.secret) == Int64(Planted.secretBytes.count))
        #expect(FileStore.fileSize(link) == nil)
    }

    @Test func theServerNeverServesALinkWhenToldNotToFollow() throws {
        let planted = try Planted()
        let link = planted.root.appendingPathComponent("cache/0123456789abcdef-file").path
        try planted.plant(at: link)
        var file = FileResponse(path: link)
        file.followsSymlinks = false
        guard case .failure(let refused) = FileServer.prepare(file, method: "GET", requestHeaders: HTTPHeaders(),
                                                              renderError: ServerError.plainText) else {
            Issue.record("a planted link was served")
            return
        }
        #expect(refused.status == 404 && refused.kind == .fileNotFound)
        // Following stays the default for other uses of the server.
        guard case .success(let prepared) = FileServer.prepare(FileResponse(path: link), method: "GET",
                                                               requestHeaders: HTTPHeaders(),
                                                               renderError: ServerError.plainText) else {
            Issue.record("default open failed")
            return
        }
        if let range = prepared.range { close(range.fd) }
    }

    /// An mtime past 2262 (`touch -d 2300-01-01`) is served; its nanoseconds used to overflow and trap.
    @Test func aFileDatedPastTheYear2262IsServed() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("far-future-\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
        defer { unlink(path) }
        var times = [timespec(tv_sec: 10_413_792_000, tv_nsec: 5), timespec(tv_sec: 10_413_792_000, tv_nsec: 5)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mtim.tv_sec == 10_413_792_000)  // the file system keeps it
        guard case .success(let prepared) = FileServer.prepare(FileResponse(path: path), method: "GET", requestHeaders: HTTPHeaders(),
                                                               renderError: ServerError.plainText) else {
            Issue.record("not served")
            return
        }
        #expect(prepared.status == 200 && prepared.headers["Last-Modified"] == "Mon, 01 Jan 2300 00:00:00 GMT")
        if let range = prepared.range { close(range.fd) }
    }

    @Test func aCompletedFileReplacedByALinkIsNotServed() async throws {
        let origin = try TestOrigin(bodySize: 2000)
        defer { origin.stop() }
        let planted = try Planted()
        var configuration = EngineConfiguration(root: planted.root)
        configuration.allowPrivateNetworks = true
        let engine = try DownloadEngine(configuration: configuration)
        let id = try engine.request(DownloadRequest(url: origin.url)).snapshot.id
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        let path = try #require(done.path)
        #expect(engine.completedFile(id: id) != nil)
        #expect(unlink(path) == 0)
        try planted.plant(at: path)
        #expect(engine.completedFile(id: id) == nil)
        #expect(planted.secretUntouched)
        await engine.shutdown()
    }
}
