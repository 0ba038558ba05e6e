import Basics
import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// The hashing of a segmented attempt's contiguous prefix (`CrewHashing`): pieces written in place
/// are read back in file order, and a buffer that landed at the hashed front is hashed from memory.
@Suite struct CrewHashingTests {
    typealias Outcome = CrewHashing.Outcome

    final class Record: @unchecked Sendable {
        let lock = NSLock()
        var flushed: [Int64] = []
        var given: [UnsafeMutableRawBufferPointer] = []
        var outcome: Outcome?
        /// Called (outside the lock) after each new hashed length is told.
        var onFlush: (@Sendable () -> Void)?
        let done = DispatchSemaphore(value: 0)
    }

    static let success: Outcome = .success(TransferSummary(head: ResponseHead(status: 206, headers: [:], effectiveURL: "http://o.test/f"),
                                                           bodyBytes: 0))

    /// A partial of `total` bytes: its first `prefix` appended, the rest written in place
    /// (`inFile`), hashed from `prefix` on.
    static func setUp(prefix: [UInt8], inFile: [UInt8], record: Record,
                      readBackAtOnce: Int64 = CrewHashing.readBackAtOnce) throws -> (PartialFile, CrewHashing) {
        let path = EngineFixture.root().appendingPathComponent("h.part").path
        let partial = try PartialFile(path: path, keep: 0)
        try prefix.withUnsafeBytes { try partial.append($0) }
        try partial.flush()
        let fd = open(path, O_WRONLY)
        defer { close(fd) }
        _ = inFile.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(prefix.count)) }
        let total = Int64(prefix.count + inFile.count)
        let hashing = CrewHashing(partial: partial, absorbed: Int64(prefix.count), target: Int64(prefix.count), total: total,
                                  readBackAtOnce: readBackAtOnce,
                                  flushed: { length in
                                      let onFlush = record.lock.withLock {
                                          record.flushed.append(length)
                                          return record.onFlush
                                      }
                                      onFlush?()
                                  },
                                  finished: { outcome in
                                      record.lock.withLock { record.outcome = outcome }
                                      record.done.signal()
                                  },
                                  giveBack: { buffer in record.lock.withLock { record.given.append(buffer) } })
        return (partial, hashing)
    }

    static func buffer(_ bytes: [UInt8]) -> UnsafeMutableRawBufferPointer {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        return buffer
    }

    @Test func aLandedBufferIsHashedFromMemoryAndTheRestIsReadBack() throws {
        let record = Record()
        let prefix = EngineFixture.body(1000)
        let rest = Array(EngineFixture.body(3000)[1000...])
        // The file holds other bytes where the buffer landed: the digest shows which were hashed.
        var inFile = rest
        for index in 0..<500 { inFile[index] ^= 0xff }
        let (partial, hashing) = try Self.setUp(prefix: prefix, inFile: inFile, record: record)
        hashing.start()
        let landed = Self.buffer(Array(rest[0..<500]))
        #expect(hashing.landed(landed, count: 500, at: 1000))
        hashing.grew(to: 1500)
        hashing.grew(to: 3000)
        hashing.finish(Self.success, contiguous: 3000)
        #expect(record.done.wait(timeout: .now() + 10) == .success)
        #expect(partial.sha256Hex == SHA256Hasher.hex(prefix + rest))
        #expect(partial.length == 3000)
        record.lock.withLock {
            #expect(record.given.map(\.baseAddress) == [landed.baseAddress])
            #expect(record.flushed.last == 3000)
            #expect(record.flushed.contains(1500))
        }
        landed.deallocate()
        _ = partial.close()
    }

    @Test func withoutLandedBuffersEveryByteIsReadBack() throws {
        let record = Record()
        let prefix = EngineFixture.body(1000)
        let rest = Array(EngineFixture.body(3000)[1000...])
        let (partial, hashing) = try Self.setUp(prefix: prefix, inFile: rest, record: record)
        hashing.start()
        hashing.finish(Self.success, contiguous: 3000)
        #expect(record.done.wait(timeout: .now() + 10) == .success)
        #expect(partial.sha256Hex == SHA256Hasher.hex(prefix + rest))
        _ = partial.close()
    }

    @Test func atMostAFewBuffersAreHeldAndNoneOnceStoppedAllGivenBack() throws {
        let record = Record()
        let prefix = EngineFixture.body(10)
        let (partial, hashing) = try Self.setUp(prefix: prefix, inFile: Array(repeating: 1, count: 90), record: record)
        hashing.start()
        let buffers = (0...CrewHashing.maxLanded).map { _ in Self.buffer([1, 1, 1]) }
        // Not yet within the contiguous prefix: held, not hashed.
        let taken = buffers.enumerated().map { hashing.landed($1, count: 3, at: 10 + Int64($0) * 3) }
        #expect(taken == Array(repeating: true, count: CrewHashing.maxLanded) + [false])
        hashing.stop()
        #expect(!hashing.landed(buffers[CrewHashing.maxLanded], count: 3, at: 10))
        hashing.finish(.failure(TransferFailure(.cancelled, "cancelled")), contiguous: 10)
        #expect(record.done.wait(timeout: .now() + 10) == .success)
        record.lock.withLock {
            #expect(Set(record.given.map(\.baseAddress)) == Set(buffers.prefix(CrewHashing.maxLanded).map(\.baseAddress)))
        }
        #expect(partial.length == 10)
        for buffer in buffers { buffer.deallocate() }
        _ = partial.close()
    }

    /// A backlog of pieces to read back (hashing lagged) is hashed a bounded read at a time, so a
    /// stop (a pause) lands between two reads instead of after the whole backlog.
    @Test func aStopLandsBetweenTwoReadsBackOfABacklog() throws {
        let record = Record()
        let prefix = EngineFixture.body(100)
        let rest = Array(EngineFixture.body(5100)[100...])
        let (partial, hashing) = try Self.setUp(prefix: prefix, inFile: rest, record: record, readBackAtOnce: 1000)
        record.lock.withLock { record.onFlush = { hashing.stop() } }
        hashing.grew(to: 5100)  // The whole backlog is contiguous before the hashing starts.
        hashing.start()
        let deadline = Date().addingTimeInterval(10)
        while record.lock.withLock({ record.flushed.isEmpty }) && Date() < deadline { usleep(1000) }
        hashing.finish(.failure(TransferFailure(.cancelled, "cancelled")), contiguous: 5100)
        #expect(record.done.wait(timeout: .now() + 10) == .success)
        record.lock.withLock { #expect(record.flushed == [1100]) }
        #expect(partial.length == 1100)
        #expect(partial.sha256Hex == SHA256Hasher.hex(Array((prefix + rest)[..<1100])))
        _ = partial.close()
    }
}
