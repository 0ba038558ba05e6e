import Basics
import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// Caller headers in the engine (issue 15): the coalescing key, what the transfer is given, the
/// state store, and a restart.
@Suite struct EngineCredentialsTests {
    static let secret = "Bearer s3cr3t-VALUE-never-shown"
    static let auth = ["Authorization": secret]

    @Test func sameHeadersCoalesceOtherHeadersOrNoneDoNot() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let url = "http://o.test/private.bin"
        let a = try engine.request(DownloadRequest(url: url, headers: Self.auth))
        // Names are case-insensitive: the same headers.
        let b = try engine.request(DownloadRequest(url: url, headers: ["authorization": Self.secret]))
        let other = try engine.request(DownloadRequest(url: url, headers: ["Authorization": "Bearer other"]))
        let bare = try engine.request(DownloadRequest(url: url))
        let extra = try engine.request(DownloadRequest(url: url, headers: Self.auth.merging(["X-Api-Key": "k"]) { a, _ in a }))
        #expect(a.snapshot.id == b.snapshot.id && b.coalesced)
        #expect(Set([a.snapshot.id, other.snapshot.id, bare.snapshot.id, extra.snapshot.id]).count == 4)
        #expect(a.snapshot.isPrivate && other.snapshot.isPrivate && !bare.snapshot.isPrivate)
        try await withTimeout(20) { await driver.waitForStarts(4) }
        let requests = (0..<4).map { driver.transfer($0).request }
        let sent = requests.map { Dictionary($0.credentials.map { ($0.name.lowercased(), $0.value) }) { a, _ in a } }
        #expect(sent.contains(["authorization": Self.secret]))
        #expect(sent.contains(["authorization": "Bearer other"]))
        #expect(sent.contains([:]))
        #expect(sent.contains(["authorization": Self.secret, "x-api-key": "k"]))
        // Never mixed into the engine's own headers (Range, If-Range).
        #expect(requests.allSatisfy { $0.headers.isEmpty })
        #expect(engine.isCaller(token: a.token, of: a.snapshot.id) && !engine.isCaller(token: bare.token, of: a.snapshot.id))
        await engine.shutdown()
    }

    /// A `HEAD /fetch` of a URL with `user:password@` (`--allow-url-credentials`) finds the download
    /// its `GET` joined (the credential keys it), screens its expectations against that one, and
    /// asks the origin with the credentials as a header, the URL without them.
    @Test func aURLsCredentialsKeyItsHeadAsTheyKeyItsGet() async throws {
        let driver = FakeTransferDriver { request, _ in
            .init(status: 200, headers: ["Content-Length": "3"], body: request.method == .head ? [] : [1, 2, 3])
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.allowURLCredentials = true }
        let url = "http://u:p@o.test/private.bin"
        let (joined, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: url), until: [.completed])
        #expect(engine.peek(DownloadRequest(url: url))?.id == joined.snapshot.id)
        #expect(engine.peek(DownloadRequest(url: "http://o.test/private.bin")) == nil, "without the credentials: another download")
        #expect(throws: EngineError.conflict("")) { try engine.screenExpectations(DownloadRequest(url: url, size: 4)) }
        #expect(throws: Never.self) { try engine.screenExpectations(DownloadRequest(url: "http://o.test/private.bin", size: 4)) }

        _ = try await engine.probe(DownloadRequest(url: "http://u:p@o.test/other.bin"))
        let probe = try #require(driver.transfers.last?.request)
        #expect(probe.method == .head && probe.url == "http://o.test/other.bin")
        #expect(probe.credentials.map(\.name) == ["Authorization"] && probe.credentials.first?.value.hasPrefix("Basic ") == true)
        await engine.shutdown()
    }

    @Test(arguments: [
        ["Host": "x"], ["range": "bytes=0-"], ["If-None-Match": "*"], ["Content-Type": "a/b"], ["Accept-Encoding": "gzip"],
        ["Expect": "100-continue"], ["TE": "trailers"], ["Trailer": "x"], ["Transfer-Encoding": "chunked"],
        ["Upgrade": "h2c"], ["Connection": "close"], ["Keep-Alive": "5"], ["Proxy-Authorization": "Basic x"],
        ["Bad Name": "x"], ["": "x"], ["X-A": ""], ["X-A": " padded"], ["X-A": "a\r\nX-B: b"], ["X-A": "nul\u{0}"],
        ["X-A": "a", "x-a": "b"], ["X-A": String(repeating: "v", count: 8 * 1024)],
        Dictionary(uniqueKeysWithValues: (0..<17).map { ("X-H\($0)", "v") }),
    ])
    func refusedHeaders(headers: [String: String]) {
        #expect(throws: EngineError.invalidHeaders("")) { try CallerHeaders.validate(headers.map { (name: $0.key, value: $0.value) }).get() }
    }

    @Test func theEngineRefusesThemBeforeAnythingIsCreated() throws {
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: FakeTransferDriver())
        #expect(throws: EngineError.invalidHeaders("")) { try engine.request(DownloadRequest(url: "http://o.test/f", headers: ["Range": "bytes=0-"])) }
        #expect(engine.list().isEmpty)
    }

    @Test func acceptedHeadersAndMessagesWithoutValues() throws {
        let fields = (0..<16).map { (name: "X-H\($0)", value: "v a\t\u{e9}\($0)") }
        #expect((try? CallerHeaders.validate(fields).get())?.fields.count == 16)
        guard case .failure(let error) = CallerHeaders.validate([(name: "Proxy-Authorization", value: "hunter2")]) else {
            Issue.record("accepted")
            return
        }
        #expect(error.message.contains("Proxy-Authorization") && !error.message.contains("hunter2"))
        guard case .failure(let bad) = CallerHeaders.validate([(name: "X-A", value: "hunter2 ")]) else { Issue.record("accepted"); return }
        #expect(!bad.message.contains("hunter2"))
        // Sorted by folded name; the canonical form folds names, keeps values.
        let sorted = try CallerHeaders.validate([(name: "b", value: "2"), (name: "A", value: "1")]).get()
        #expect(sorted.fields.map(\.name) == ["A", "b"])
        #expect(String(decoding: sorted.canonicalBytes, as: UTF8.self) == "a:1\r\nb:2\r\n")
    }

    @Test func restartWaitsForCredentialsThenResumesFromTheKeptBytes() async throws {
        let root = EngineFixture.root()
        let body = EngineFixture.body(50_000)
        let url = "http://o.test/private.bin"
        let firstDriver = FakeTransferDriver()
        let engine = try EngineFixture.engine(root, driver: firstDriver)
        let r = try engine.request(DownloadRequest(url: url, headers: Self.auth))
        try await withTimeout(20) { await firstDriver.waitForStarts(1) }
        let t = firstDriver.transfer(0)
        #expect(t.respond(200, ["Content-Length": "\(body.count)", "ETag": "\"v1\""]))
        try t.send(Array(body[0..<20_000]))
        await engine.shutdown()

        // The store holds the keyed hash, never the value; the key has its own 0600 file.
        let state = root.appendingPathComponent("state")
        var rowsRead = false
        for name in try FileManager.default.contentsOfDirectory(atPath: state.path) where name.hasPrefix("state.db") {
            let bytes = try Data(contentsOf: state.appendingPathComponent(name))
            #expect(bytes.range(of: Data("s3cr3t".utf8)) == nil, "\(name)")
            if bytes.range(of: Data(url.utf8)) != nil { rowsRead = true }
        }
        #expect(rowsRead, "the scan read the download's row (its URL is stored)")
        let keyPath = state.appendingPathComponent(CredentialKey.fileName).path
        var st = stat()
        #expect(stat(keyPath, &st) == 0 && st.st_mode & 0o777 == 0o600)
        let key = try Data(contentsOf: URL(fileURLWithPath: keyPath))
        #expect(key.count == CredentialKey.length)
        for name in try FileManager.default.contentsOfDirectory(atPath: state.path) where name.hasPrefix("state.db") {
            #expect(try Data(contentsOf: state.appendingPathComponent(name)).range(of: key) == nil)
        }

        let driver = FakeTransferDriver()
        let second = try EngineFixture.engine(root, driver: driver)
        let waiting = try #require(second.snapshot(id: r.snapshot.id))
        #expect(waiting.state == .paused && waiting.reason == "credentials_required" && waiting.isPrivate)
        #expect(waiting.bytesWritten > 0)
        let kept = waiting.bytesWritten
        #expect(second.isCaller(token: r.token, of: r.snapshot.id))
        // Without the headers, or with others: a download of its own.
        let bare = try second.request(DownloadRequest(url: url))
        #expect(bare.snapshot.id != r.snapshot.id)
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(second.snapshot(id: r.snapshot.id)?.state == .paused)
        // An operator's hold, lifted: it still waits for the headers (never asks the origin without).
        guard case .done = second.operatorPause(id: r.snapshot.id), case .done = second.operatorResume(id: r.snapshot.id) else {
            Issue.record("the operator's pause or resume was refused")
            return
        }
        let afterHold = try #require(second.snapshot(id: r.snapshot.id))
        #expect(afterHold.state == .paused && afterHold.reason == "credentials_required")
        // The same headers resume it from the kept bytes.
        let again = try second.request(DownloadRequest(url: url, headers: ["AUTHORIZATION": Self.secret]))
        #expect(again.snapshot.id == r.snapshot.id)
        try await withTimeout(20) { await driver.waitForStarts(2) }
        let resumed = driver.transfer(1)
        #expect(resumed.request.credentials.map(\.value) == [Self.secret])
        #expect(resumed.header("Range") == "bytes=\(kept)-")
        #expect(resumed.header("If-Range") == "\"v1\"")
        #expect(resumed.respond(206, ["Content-Range": "bytes \(kept)-49999/50000", "ETag": "\"v1\""]))
        try resumed.send(Array(body[Int(kept)...]))
        resumed.finish()
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(second, id: r.snapshot.id, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == SHA256Hasher.hex(body) && done.reason == nil)
        await second.shutdown()
    }

    @Test func theKeyFileIsKeptAcrossStartsAndAWrongOneIsRefused() throws {
        let root = EngineFixture.root()
        _ = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let path = root.appendingPathComponent("state/\(CredentialKey.fileName)")
        let key = try Data(contentsOf: path)
        _ = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(try Data(contentsOf: path) == key)
        try Data([1, 2, 3]).write(to: path)
        #expect(throws: SystemError.self) { try EngineFixture.engine(root, driver: FakeTransferDriver()) }
    }

    /// Replicas starting together on a fresh shared directory all end up with one key (never a
    /// key of their own that the file does not hold, never a half-written file).
    @Test func processesMakingTheKeyAtOnceAllGetTheSameOne() throws {
        for _ in 0..<30 {
            let directory = EngineFixture.root().path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let keys = Mutex<[[UInt8]]>([])
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                do {
                    let key = try CredentialKey.loadOrCreate(directory: directory, random: SystemRandom())
                    keys.withLock { $0.append(key.hash([1])) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            let stored = try CredentialKey.loadOrCreate(directory: directory, random: SystemRandom()).hash([1])
            #expect(keys.withLock { $0 }.allSatisfy { $0 == stored } && keys.withLock { $0.count } == 8)
            let left = try FileManager.default.contentsOfDirectory(atPath: directory)
            #expect(left == [CredentialKey.fileName], "no temporary left: \(left)")
        }
    }

    /// On a filesystem without hard links (vfat, many FUSE volumes: `link` is EPERM) the key is
    /// made in place, and read back the same by later starts, also by several at once.
    @Test func theKeyIsMadeWhereTheFilesystemHasNoHardLinks() throws {
        let noLinks: @Sendable (String, String) -> Int32 = { _, _ in errno = EPERM; return -1 }
        let directory = EngineFixture.root().path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keys = Mutex<[[UInt8]]>([])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 6) { _ in
            do {
                let key = try CredentialKey.loadOrCreate(directory: directory, random: SystemRandom(), link: noLinks)
                keys.withLock { $0.append(key.hash([1])) }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let stored = try CredentialKey.loadOrCreate(directory: directory, random: SystemRandom(), link: noLinks).hash([1])
        #expect(keys.withLock { $0 }.allSatisfy { $0 == stored } && keys.withLock { $0.count } == 6)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == [CredentialKey.fileName])
        let mode = try #require(FileManager.default.attributesOfItem(atPath: directory + "/" + CredentialKey.fileName)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
    }

    @Test func hmacMatchesRFC4231() {
        // RFC 4231 test case 2.
        let key = CredentialKey(bytes: Array("Jefe".utf8))
        let mac = key.hash(Array("what do ya want for nothing?".utf8))
        #expect(mac.map { String(format: "%02x", $0) }.joined() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}
