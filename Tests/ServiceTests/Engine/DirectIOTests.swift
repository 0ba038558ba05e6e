import Basics
import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Whole aligned blocks written and read back around the page cache (`DirectIO`, `InPlaceWrites`,
/// `HashReadBack`); the rest, or all of it where direct I/O is refused, through the page cache.
@Suite struct DirectIOTests {
    struct Cut: CustomTestStringConvertible, Sendable {
        let name: String
        let offset: Int64
        let count: Int
        let head: Int
        let middle: Int
        var testDescription: String { name }
    }

    static let cuts: [Cut] = [
        Cut(name: "aligned whole blocks go direct", offset: 8192, count: 8192, head: 0, middle: 8192),
        Cut(name: "aligned, with a tail", offset: 0, count: 4096 + 10, head: 0, middle: 4096),
        Cut(name: "a head up to the boundary, blocks, a tail", offset: 4096 + 100, count: 10_000, head: 3996, middle: 4096),
        Cut(name: "shorter than a block after the head: all buffered", offset: 100, count: 5000, head: 3996, middle: 0),
        Cut(name: "within one block: all head", offset: 100, count: 50, head: 50, middle: 0),
        Cut(name: "nothing", offset: 100, count: 0, head: 0, middle: 0),
        Cut(name: "far offsets", offset: (1 << 40) + 1, count: 1 << 20, head: 4095, middle: (1 << 20) - 4096),
    ]

    @Test(arguments: cuts)
    func split(_ c: Cut) {
        let (head, middle) = DirectIO.split(offset: c.offset, count: c.count)
        #expect(head == c.head && middle == c.middle)
    }

    /// A buffer whose bytes sit at `offset`'s place in a memory block, filled with `body`.
    static func placed(_ body: [UInt8], at offset: Int64) -> (UnsafeMutableRawBufferPointer, UnsafeMutableRawPointer) {
        let skip = Int(offset % Int64(DirectIO.alignment))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: skip + body.count, alignment: DirectIO.alignment)
        body.withUnsafeBytes { (buffer.baseAddress! + skip).copyMemory(from: $0.baseAddress!, byteCount: body.count) }
        return (buffer, buffer.baseAddress! + skip)
    }

    static func file(_ name: String) -> String {
        let path = EngineFixture.root().appendingPathComponent(name).path
        FileManager.default.createFile(atPath: path, contents: nil)
        return path
    }

    /// Writes at aligned and unaligned offsets land byte for byte; where the file system takes
    /// direct writes, only whole aligned blocks go through the direct descriptor.
    @Test func writesLandWholeAndOnlyBlocksGoDirect() throws {
        let path = Self.file("in-place.bin")
        let writes = try InPlaceWrites(path: path)
        let direct = writes.writesDirect
        let pieces: [(offset: Int64, count: Int)] = [(0, 1 << 20), (1 << 20, 5000), ((1 << 20) + 5000, 300_000), (3 << 20, 100)]
        var expected = [UInt8](repeating: 0, count: (3 << 20) + 100)
        var calls: [(fd: Int32, count: Int, at: off_t)] = []
        for (index, piece) in pieces.enumerated() {
            let body = EngineFixture.body(piece.count, seed: UInt8(index + 1))
            expected.replaceSubrange(Int(piece.offset)..<Int(piece.offset) + piece.count, with: body)
            let (buffer, base) = Self.placed(body, at: piece.offset)
            defer { buffer.deallocate() }
            try writes.write(base, count: piece.count, at: piece.offset) { fd, base, count, at in
                calls.append((fd, count, at))
                return Glibc.pwrite(fd, base, count, at)
            }
        }
        let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(written == expected)
        let directCalls = calls.filter { $0.fd != writes.descriptor }
        if direct {
            #expect(directCalls.allSatisfy { $0.at % 4096 == 0 && $0.count % 4096 == 0 })
            // The first MiB whole, the second write's first block, the third's blocks after its head.
            #expect(directCalls.map(\.count) == [1 << 20, 4096, (300_000 - (4096 - 5000 % 4096)) / 4096 * 4096])
        } else {
            #expect(directCalls.isEmpty)
        }
    }

    /// Pages a reader's read (or its readahead) cached from a hole before a direct write of it are
    /// not what a later read through the page cache sees: the written bytes are (the kernel drops
    /// the cached range around a direct write). `/fetch` readers rely on it: they `sendfile` the
    /// contiguous prefix, whose pieces were written direct, and may have read near them before.
    @Test func pagesCachedFromAHoleBeforeADirectWriteShowTheWrittenBytes() throws {
        let path = Self.file("hole.bin")
        let writes = try InPlaceWrites(path: path)
        let end = EngineFixture.body(4096, seed: 9)
        let (endBuffer, endBase) = Self.placed(end, at: 4 << 20)
        defer { endBuffer.deallocate() }
        try writes.write(endBase, count: end.count, at: 4 << 20)
        let reader = open(path, O_RDONLY | O_CLOEXEC)
        try #require(reader >= 0)
        defer { close(reader) }
        func read(_ count: Int, at offset: off_t) -> [UInt8] {
            var bytes = [UInt8](repeating: 0xAA, count: count)
            let got = bytes.withUnsafeMutableBytes { pread(reader, $0.baseAddress, count, offset) }
            return got == count ? bytes : []
        }
        #expect(read(1 << 20, at: 1 << 20) == [UInt8](repeating: 0, count: 1 << 20))  // The hole, cached.
        let body = EngineFixture.body(1 << 20, seed: 3)
        let (buffer, base) = Self.placed(body, at: 1 << 20)
        defer { buffer.deallocate() }
        var directBytes = 0
        try writes.write(base, count: body.count, at: 1 << 20) { fd, base, count, at in
            if fd != writes.descriptor { directBytes += count }
            return Glibc.pwrite(fd, base, count, at)
        }
        #expect(directBytes == (writes.writesDirect ? body.count : 0))
        #expect(read(1 << 20, at: 1 << 20) == body)
        #expect(read(4096, at: 4 << 20) == end)
    }

    /// Bytes not at their offset's place in a memory block cannot go direct: all buffered.
    @Test func misplacedMemoryIsWrittenThroughThePageCache() throws {
        let path = Self.file("misplaced.bin")
        let writes = try InPlaceWrites(path: path)
        let body = EngineFixture.body(3 * 4096)
        let (buffer, base) = Self.placed([0] + body, at: 0)  // One byte off.
        defer { buffer.deallocate() }
        var fds: Set<Int32> = []
        try writes.write(base + 1, count: body.count, at: 0) { fd, base, count, at in
            fds.insert(fd)
            return Glibc.pwrite(fd, base, count, at)
        }
        #expect(fds == [writes.descriptor])
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == body)
    }

    /// A file system that refuses a direct write (`EINVAL`): the bytes go through the page cache,
    /// and so does every later write.
    @Test func aRefusedDirectWriteFallsBackForGood() throws {
        let path = Self.file("refused.bin")
        let writes = try InPlaceWrites(path: path)
        try #require(writes.writesDirect, "this file system takes no direct writes at all")
        let body = EngineFixture.body(2 * 4096)
        let (buffer, base) = Self.placed(body, at: 0)
        defer { buffer.deallocate() }
        var refused = 0
        let call: PageCacheWrites.PositionedWrite = { fd, base, count, at in
            guard fd == writes.descriptor else {
                refused += 1
                errno = EINVAL
                return -1
            }
            return Glibc.pwrite(fd, base, count, at)
        }
        try writes.write(base, count: body.count, at: 0, call: call)
        #expect(!writes.writesDirect)
        try writes.write(base, count: body.count, at: Int64(body.count), call: call)
        #expect(refused == 1)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == body + body)
    }

    static func digest(_ bytes: ArraySlice<UInt8>) -> String {
        let hasher = SHA256Hasher()
        hasher.update(Array(bytes))
        return hasher.hexDigest()
    }

    /// Ranges starting and ending anywhere hash to the same digest as the bytes themselves, read
    /// direct or through the page cache.
    static let ranges: [[Int64]] = [[0, 3 << 20], [100, 5000], [4096 - 1, (1 << 20) + 2], [12_345, (2 << 20) + 4096]]

    @Test(arguments: ranges)
    func readBackHashesExactlyTheRange(_ pair: [Int64]) throws {
        let range = (start: pair[0], count: pair[1])
        let path = Self.file("read-back.bin")
        let body = EngineFixture.body((3 << 20) + 4096 + 77, seed: 9)
        try Data(body).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let expected = Self.digest(body[Int(range.start)..<Int(range.start + range.count)])
        for direct in [true, false] {
            let hasher = SHA256Hasher()
            var reached: Int64 = 0
            try HashReadBack.hash(fd: fd, from: range.start, count: range.count, into: hasher, direct: direct, hashed: { reached = $0 })
            #expect(hasher.hexDigest() == expected)
            #expect(reached == range.start + range.count)
        }
    }

    /// Direct reads refused by the file system: the rest is read through the page cache, the
    /// digest the same; a file shorter than the range fails instead of hashing less.
    @Test func refusedDirectReadsFallBackAndAShortFileFails() throws {
        let path = Self.file("refused-read.bin")
        let body = EngineFixture.body(64 * 1024 + 10, seed: 3)
        try Data(body).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        var refusals = 0
        let hasher = SHA256Hasher()
        try HashReadBack.hash(fd: fd, count: Int64(body.count), into: hasher, read: { reader, base, count, at in
            guard reader == fd else {
                refusals += 1
                errno = EINVAL
                return -1
            }
            return Glibc.pread(reader, base, count, at)
        })
        #expect(hasher.hexDigest() == Self.digest(body[...]))
        #expect(refusals <= 1)
        #expect(throws: SystemError.self) {
            try HashReadBack.hash(fd: fd, from: 10, count: Int64(body.count), into: SHA256Hasher())
        }
    }
}
