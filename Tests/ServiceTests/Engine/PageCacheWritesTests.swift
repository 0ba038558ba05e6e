import Basics
import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Aligned buffers reach the kernel in calls of at most `PageCacheWrites.maxBytes` (large writes
/// take high-order page-cache folios, which cost many times more on a VM that hands free memory back).
@Suite struct PageCacheWritesTests {
    @Test func positionedWritesAreSlicedAndContinuedAfterShortOnes() throws {
        let path = EngineFixture.root().appendingPathComponent("sliced.bin").path
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        defer { close(fd) }
        let body = EngineFixture.body(3 * PageCacheWrites.maxBytes + 777)
        let offset: Int64 = 4_096 + 5
        var calls: [(count: Int, at: off_t)] = []
        try body.withUnsafeBytes { bytes in
            try PageCacheWrites.write(fd, bytes.baseAddress!, count: bytes.count, at: offset) { fd, base, count, at in
                calls.append((count, at))
                // Every second call is short: the rest goes on from where it stopped.
                return Glibc.pwrite(fd, base, calls.count % 2 == 0 ? count / 3 : count, at)
            }
        }
        #expect(calls.allSatisfy { $0.count <= PageCacheWrites.maxBytes })
        #expect(calls.first?.count == PageCacheWrites.maxBytes && calls.first?.at == off_t(offset))
        let written = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(written.count == Int(offset) + body.count)
        #expect(written.suffix(body.count) == Data(body))
    }

    @Test func aCallThatWritesNothingFailsInsteadOfLooping() throws {
        var calls = 0
        let bytes = [UInt8](repeating: 1, count: 10)
        #expect(throws: SystemError.self) {
            try bytes.withUnsafeBytes { b in
                try PageCacheWrites.write(-1, b.baseAddress!, count: b.count, at: 0) { _, _, _, _ in
                    calls += 1
                    return 0
                }
            }
        }
        #expect(calls == 1)
    }
}
