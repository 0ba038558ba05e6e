import Basics
import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

@Suite struct PartialFileTests {
    @Test func appendsHashesAndResumesWithRehash() throws {
        let path = EngineFixture.root().appendingPathComponent("p.part").path
        let body = EngineFixture.body(3 * PartialFile.bufferSize + 12_345)
        let file = try PartialFile(path: path, keep: 0)
        // Mixed chunk sizes: small (buffered) and larger than the buffer (written through).
        var offset = 0
        for size in [10, 70_000, PartialFile.bufferSize + 5, 1, 500_000] where offset < body.count {
            let end = min(body.count, offset + size)
            try body[offset..<end].withUnsafeBytes { try file.append($0) }
            offset = end
        }
        try body[offset...].withUnsafeBytes { try file.append($0) }
        #expect(file.length == Int64(body.count))
        try file.sync()
        #expect(file.durableLength == Int64(body.count))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body))
        #expect(file.sha256Hex == SHA256Hasher.hex(body))
        let closed = file.close()
        #expect(closed.length == Int64(body.count) && closed.kept != nil)

        // Re-open keeping fewer bytes: the tail is cut and the kept bytes re-hashed from disk.
        let kept = 1_234_567
        let again = try PartialFile(path: path, keep: Int64(kept))
        #expect(again.length == Int64(kept))
        #expect(FileStore.fileSize(path) == Int64(kept))
        try body[kept...].withUnsafeBytes { try again.append($0) }
        try again.fullSync()
        #expect(again.sha256Hex == SHA256Hasher.hex(body))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body))

        // Starting over drops the buffered and written bytes alike, into a new file: a descriptor
        // opened on the old version still reads the old bytes (a streaming reader never splices).
        let reader = open(path, O_RDONLY)
        defer { close(reader) }
        try ([1, 2, 3] as [UInt8]).withUnsafeBytes { try again.append($0) }
        try again.replaceWithEmpty(settingAsideAt: path + ".aside")
        try ([9, 8] as [UInt8]).withUnsafeBytes { try again.append($0) }
        _ = again.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data([9, 8]))
        var old = [UInt8](repeating: 0, count: 4)
        #expect(pread(reader, &old, 4, 0) == 4 && old == Array(body[0..<4]))
        FileStore.remove(path + ".aside")
    }

    @Test func inProcessHasherSkipsTheReRead() throws {
        let path = EngineFixture.root().appendingPathComponent("q.part").path
        let body = EngineFixture.body(100_000)
        let first = try PartialFile(path: path, keep: 0)
        try body[0..<60_000].withUnsafeBytes { try first.append($0) }
        let closed = first.close()
        let second = try PartialFile(path: path, keep: closed.length, hash: closed.kept)
        try body[60_000...].withUnsafeBytes { try second.append($0) }
        #expect(second.sha256Hex == SHA256Hasher.hex(body))
    }

    /// The kept bytes changed on disk while the partial was closed (outside the service: the same
    /// size, another byte): the hash kept in memory is not taken, they are read and hashed again,
    /// so the digest is the file's (before, the file completed with the digest of what was
    /// received, which it no longer held).
    @Test func aFileChangedWhileClosedIsHashedAgain() throws {
        let path = EngineFixture.root().appendingPathComponent("t.part").path
        let body = EngineFixture.body(100_000)
        let first = try PartialFile(path: path, keep: 0)
        try body[0..<60_000].withUnsafeBytes { try first.append($0) }
        let closed = first.close()
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: 1000)
        try handle.write(contentsOf: Data([body[1000] ^ 0xFF]))
        try handle.close()
        let second = try PartialFile(path: path, keep: closed.length, hash: closed.kept)
        try body[60_000...].withUnsafeBytes { try second.append($0) }
        var changed = body
        changed[1000] ^= 0xFF
        #expect(second.sha256Hex == SHA256Hasher.hex(changed))
    }

    /// Segmented fetch: a read-back of pieces written in place that fails midway (here the file is
    /// shorter than asked: a piece not there yet) counts what it hashed, and the next absorb goes on
    /// from there: no byte is hashed twice, the digest is the file's.
    @Test func anAbsorbThatFailsMidwayGoesOnWhereItStopped() throws {
        let path = EngineFixture.root().appendingPathComponent("s.part").path
        let body = EngineFixture.body(3 << 20)
        let file = try PartialFile(path: path, keep: 0)
        try body[0..<1000].withUnsafeBytes { try file.append($0) }
        try file.flush()
        // Another connection wrote [1000, 2.5 MiB) in place; the rest is not there yet.
        let partEnd = (5 << 20) / 2
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        #expect(body[1000..<partEnd].withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 1000) } == partEnd - 1000)
        #expect(throws: SystemError.self) { try file.absorb(upTo: Int64(body.count)) }
        #expect(file.length == Int64(partEnd))
        #expect(body[partEnd...].withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(partEnd)) } == body.count - partEnd)
        close(fd)
        try file.absorb(upTo: Int64(body.count))
        #expect(file.length == Int64(body.count))
        #expect(file.sha256Hex == SHA256Hasher.hex(body))
        _ = file.close()
    }

    @Test func sha256KnownAnswer() {
        #expect(SHA256Hasher.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Hasher.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func noSpaceLeavesLengthHashAndFileInAgreement() throws {
        let path = EngineFixture.root().appendingPathComponent("full.part").path
        let budget = PartialFile.bufferSize + 100
        let used = OriginLock(0)
        // The device fills after `budget` bytes: one short write, then ENOSPC.
        let file = try PartialFile(path: path, keep: 0, write: { fd, base, count, at in
            used.withLock { total -> Int in
                let allowed = min(count, budget - total)
                guard allowed > 0 else { errno = ENOSPC; return -1 }
                let n = Glibc.pwrite(fd, base, allowed, at)  // A short direct call is refused: not counted.
                total += max(0, n)
                return n
            }
        })
        // Enough bytes that the appender runs out of buffers behind the failed write: an append throws.
        let body = EngineFixture.body((PartialFile.depth + 3) * PartialFile.bufferSize)
        var failure: SystemError?
        var offset = 0
        while offset < body.count, failure == nil {
            let end = min(body.count, offset + 300_000)
            do {
                try body[offset..<end].withUnsafeBytes { try file.append($0) }
                offset = end
            } catch let error as SystemError {
                failure = error
            }
        }
        #expect(failure?.isNoSpace == true)
        #expect(offset < body.count)
        // The failed chunk is not counted; what was accepted is in the file or still buffered.
        #expect(file.length == Int64(offset))
        #expect(file.sha256Hex == SHA256Hasher.hex(Array(body[..<offset])))
        let closed = file.close()
        // Closing cannot flush the rest: it reports exactly what reached the file, without a hash.
        #expect(closed.kept == nil)
        #expect(closed.length == Int64(budget))
        #expect(FileStore.fileSize(path) == Int64(budget))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body[..<budget]))
    }

    /// A failed write is thrown by a later append or the flush; its bytes stay counted and hashed,
    /// and are written first by the next flush, which throws again while the disk is still full and
    /// completes the file once space is back: nothing is lost or written twice.
    @Test func failedWriteIsRetriedByTheNextFlushOnceSpaceIsBack() throws {
        let path = EngineFixture.root().appendingPathComponent("retry.part").path
        let full = OriginLock(true)
        let file = try PartialFile(path: path, keep: 0, write: { fd, base, count, at in
            guard !full.withLock({ $0 }) else { errno = ENOSPC; return -1 }
            return Glibc.pwrite(fd, base, count, at)
        })
        let body = EngineFixture.body(2 * PartialFile.bufferSize + 4_321)
        var accepted = 0
        while accepted < body.count {
            let end = min(body.count, accepted + 100_000)
            do {
                try body[accepted..<end].withUnsafeBytes { try file.append($0) }
            } catch {
                #expect((error as? SystemError)?.isNoSpace == true)
                break
            }
            accepted = end
        }
        #expect(accepted >= 1_000_000)  // The first buffer was full before anything was written.
        #expect(throws: SystemError.self) { try file.flush() }
        #expect(file.length == Int64(accepted) && file.writtenLength == 0)
        #expect(FileStore.fileSize(path) == 0)
        #expect(file.sha256Hex == SHA256Hasher.hex(Array(body[..<accepted])))
        full.withLock { $0 = false }
        try body[accepted...].withUnsafeBytes { try file.append($0) }
        try file.sync()
        #expect(file.writtenLength == Int64(body.count) && file.durableLength == Int64(body.count))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body))
        #expect(file.sha256Hex == SHA256Hasher.hex(body))
        #expect(file.close().kept != nil)
    }

    /// `whenWritten` hands over a descriptor once every appended byte is in the file, without waiting
    /// itself; `written` (readable from any thread) then covers them, kept bytes included.
    @Test func whenWrittenHandsADescriptorOnceTheBytesAreInTheFile() throws {
        let path = EngineFixture.root().appendingPathComponent("written.part").path
        let kept = 12_345
        let head = EngineFixture.body(kept, seed: 7)
        try Data(head).write(to: URL(fileURLWithPath: path))
        let file = try PartialFile(path: path, keep: Int64(kept))
        #expect(file.writtenLength == Int64(kept))
        let body = EngineFixture.body(2 * PartialFile.bufferSize + 99_999)
        for start in stride(from: 0, to: body.count, by: 65_536) {
            try body[start..<min(body.count, start + 65_536)].withUnsafeBytes { try file.append($0) }
        }
        let total = Int64(kept + body.count)
        let written = file.written
        let told = OriginLock<(Int32?, Int64, Int64?, Int64)?>(nil)
        let done = DispatchSemaphore(value: 0)
        file.whenWritten { descriptor, length in
            var size: Int64?
            if let descriptor {
                var st = stat()
                if fstat(descriptor, &st) == 0 { size = Int64(st.st_size) }
                Glibc.close(descriptor)
            }
            told.withLock { $0 = (descriptor, length, size, written.value) }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        let (descriptor, length, size, seen) = try #require(told.withLock { $0 })
        #expect(descriptor != nil && length == total && size == total && seen == total)
        // Nothing in flight: told at once, on this thread.
        let now = OriginLock<Int64?>(nil)
        file.whenWritten { descriptor, length in
            if let descriptor { Glibc.close(descriptor) }
            now.withLock { $0 = length }
        }
        #expect(now.withLock { $0 } == total)
        #expect(file.sha256Hex == SHA256Hasher.hex(head + body))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(head + body))
        #expect(file.close().length == total)
    }

    /// A followed download: each append handed over at once reaches the file without a flush and
    /// without a full buffer, and every length told is already in the file (never ahead of it).
    @Test func handOverPutsEachAppendInTheFileAndTellsWhatIsThere() throws {
        let path = EngineFixture.root().appendingPathComponent("handover.part").path
        let body = EngineFixture.body(2 * PartialFile.bufferSize + 54_321, seed: 3)
        let file = try PartialFile(path: path, keep: 0)
        let told = OriginLock<(lengths: [Int64], ahead: Int)>(([], 0))
        file.whenAdvanced { length in
            let size = FileStore.fileSize(path) ?? -1
            told.withLock {
                $0.lengths.append(length)
                if size < length { $0.ahead += 1 }
            }
        }
        var offset = 0
        var sizes = [1, 4_095, 70_000, PartialFile.bufferSize - 3, 16_384, 300_001]
        while offset < body.count {
            let size = min(body.count - offset, sizes.isEmpty ? 65_536 : sizes.removeFirst())
            try body[offset..<(offset + size)].withUnsafeBytes { try file.append($0) }
            offset += size
            file.handOver()
            let deadline = Date().addingTimeInterval(20)
            while file.writtenLength < Int64(offset) && Date() < deadline { usleep(1_000) }
            #expect(file.writtenLength == Int64(offset))
            #expect(FileStore.fileSize(path) == Int64(offset))
        }
        let deadline = Date().addingTimeInterval(20)
        while told.withLock({ $0.lengths.last }) != Int64(body.count) && Date() < deadline { usleep(1_000) }
        let (lengths, ahead) = told.withLock { $0 }
        #expect(lengths.last == Int64(body.count) && lengths == lengths.sorted() && ahead == 0)
        #expect(file.sha256Hex == SHA256Hasher.hex(body))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body))
        #expect(file.close().length == Int64(body.count))
    }

    /// Syncs and resumes at offsets that are not page multiples, on disk and on tmpfs.
    @Test(arguments: [false, true])
    func unalignedSyncsAndResumesKeepBytesAndHashExact(onTmpfs: Bool) throws {
        let directory = onTmpfs ? URL(fileURLWithPath: "/dev/shm") : EngineFixture.root()
        let path = directory.appendingPathComponent("odd-\(UUID().uuidString).part").path
        defer { unlink(path) }
        let body = EngineFixture.body(2 * PartialFile.bufferSize + 7_777)
        let file = try PartialFile(path: path, keep: 0)
        var offset = 0
        for size in [1, 4_095, 4_097, 100_003, PartialFile.bufferSize - 3, 333_333] {
            try body[offset..<(offset + size)].withUnsafeBytes { try file.append($0) }
            offset += size
            try file.sync()
            #expect(FileStore.fileSize(path) == Int64(offset))
        }
        let closed = file.close()
        #expect(closed.length == Int64(offset))
        let kept = 50_003
        let resumed = try PartialFile(path: path, keep: Int64(kept))
        try body[kept...].withUnsafeBytes { try resumed.append($0) }
        #expect(resumed.sha256Hex == SHA256Hasher.hex(body))
        try resumed.fullSync()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body))
        let again = resumed.close()
        let continued = try PartialFile(path: path, keep: again.length, hash: again.kept)
        try ([1, 2, 3] as [UInt8]).withUnsafeBytes { try continued.append($0) }
        #expect(continued.sha256Hex == SHA256Hasher.hex(body + [1, 2, 3]))
        _ = continued.close()
        #expect(FileStore.fileSize(path) == Int64(body.count + 3))
    }

    @Test func replaceWithEmptySetsTheOldBytesAsideAndStartsANewFile() throws {
        let path = EngineFixture.root().appendingPathComponent("r.part").path
        let file = try PartialFile(path: path, keep: 0)
        try [UInt8](repeating: 7, count: 10).withUnsafeBytes { try file.append($0) }
        try file.sync()
        let aside = path + ".1" + FileStore.trashSuffix
        try file.replaceWithEmpty(settingAsideAt: aside)
        #expect(file.length == 0 && file.durableLength == 0)
        #expect(FileStore.fileSize(aside) == 10)
        #expect(FileStore.fileSize(path) == 0)
        try [UInt8]([1, 2, 3]).withUnsafeBytes { try file.append($0) }
        try file.sync()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data([1, 2, 3]))
        #expect(file.sha256Hex == SHA256Hasher.hex([1, 2, 3]))
        #expect(file.close().length == 3)
    }
}
