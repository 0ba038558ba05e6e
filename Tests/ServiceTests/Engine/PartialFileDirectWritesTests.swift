import Basics
import CLinux
import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// The single connection's bytes (`PartialFile` through its `WritePipeline`) go around the page
/// cache: wherever the appends start and however they are cut, whole blocks are written direct and
/// only the heads and tails under a block through the page cache; the file and the hash are the
/// bytes appended, and what readers are told is in the file is.
@Suite struct PartialFileDirectWritesTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        /// Bytes already in the file (a resume).
        let kept: Int
        /// Each append handed over at once, as for a download with readers.
        let handOver: Bool
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "from 0, whole buffers", kept: 0, handOver: false),
        Case(name: "resumed inside a block, whole buffers", kept: 100, handOver: false),
        Case(name: "resumed inside a block, each append handed over", kept: 4096 + 7, handOver: true),
        Case(name: "from 0, each append handed over", kept: 0, handOver: true),
    ]

    struct Call: Sendable {
        let direct: Bool
        let count: Int
        let at: off_t
    }

    static func isDirect(_ fd: Int32) -> Bool { fcntl(fd, F_GETFL) & clinux_o_direct() != 0 }

    @Test(arguments: cases)
    func wholeBlocksGoDirectWhereverTheAppendsStart(_ c: Case) throws {
        let path = EngineFixture.root().appendingPathComponent("direct.part").path
        let body = EngineFixture.body(3 * PartialFile.bufferSize + 12_345, seed: 5)
        try Data(body[..<c.kept]).write(to: URL(fileURLWithPath: path))
        let calls = OriginLock<[Call]>([])
        let told = OriginLock<[Int64]>([])
        let file = try PartialFile(path: path, keep: Int64(c.kept), write: { fd, base, count, at in
            let n = Glibc.pwrite(fd, base, count, at)
            if n > 0 { calls.withLock { $0.append(Call(direct: Self.isDirect(fd), count: n, at: at)) } }
            return n
        })
        file.whenAdvanced { length in told.withLock { $0.append(length) } }
        // Cut as libcurl hands a body over: pieces of odd sizes, up to 512 KiB.
        var offset = c.kept
        var sizes = [17, 300_001, 524_288, 4095, 70_000].makeIterator()
        while offset < body.count {
            let size = sizes.next() ?? 524_288
            let end = min(body.count, offset + size)
            try body[offset..<end].withUnsafeBytes { try file.append($0) }
            if c.handOver { file.handOver() }
            offset = end
        }
        try file.sync()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body))
        #expect(file.sha256Hex == SHA256Hasher.hex(body))
        #expect(told.withLock { $0.last } == Int64(body.count))
        _ = file.close()

        let made = calls.withLock { $0 }
        let direct = made.filter(\.direct)
        let buffered = made.filter { !$0.direct }
        #expect(made.reduce(0) { $0 + $1.count } == body.count - c.kept)
        guard !direct.isEmpty else {
            // A file system without direct I/O here: everything through the page cache.
            let probe = open(path, O_RDONLY | O_CLOEXEC)
            defer { close(probe) }
            let reopened = DirectIO.reopen(probe, flags: O_RDONLY)
            if let reopened { close(reopened) }
            #expect(reopened == nil)
            return
        }
        #expect(direct.allSatisfy { $0.at % 4096 == 0 && $0.count % 4096 == 0 })
        #expect(buffered.allSatisfy { $0.count < 4096 }, "\(buffered.map(\.count))")
        // At most a head and a tail per chunk went through the page cache.
        #expect(buffered.reduce(0) { $0 + $1.count } < 2 * 4096 * (direct.count + 1))
    }
}
