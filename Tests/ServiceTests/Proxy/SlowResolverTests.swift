import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A nameserver that never answers (run in a loopback-only namespace whose `/etc/resolv.conf`
/// names one on 127.0.0.1, `LoopbackNamespaceRunTests`): an attempt whose lookup is cut short by
/// its connect timeout ends at once, and never holds up another download's bytes (libcurl would
/// wait for the lookup's thread on the transfers' one loop thread: `CURLOPT_QUICK_EXIT`).
@Suite(.enabled(if: LoopbackNamespace.isInside), .timeLimit(.minutes(2)))
struct SlowResolverTests {
    static let resolvConf = "nameserver 127.0.0.1\noptions timeout:4 attempts:1\n"

    @Test func aLookupThatNeverEndsNeverHoldsUpAnotherDownload() async throws {
        // The nameserver: takes every query, answers none.
        let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(udp >= 0)
        defer { close(udp) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(53).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(udp, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        } }
        #expect(bound == 0, "bind 127.0.0.1:53: errno \(errno)")

        let origin = try TestOrigin(bodySize: 8 << 20)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 2 << 20 }  // ~4 s of bytes arriving steadily
        let engine = try EngineLiveTests.engine { $0.connectTimeout = 0.5 }
        let flowing = try engine.request(DownloadRequest(url: origin.url)).snapshot.id
        // The largest pause between two changes of the flowing download's byte count.
        let gaps = try await onThread { () -> (largest: Double, state: DownloadState?) in
            var last = (bytes: Int64(-1), at: Date())
            var largest = 0.0
            var asked = false
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                let snapshot = engine.snapshot(id: flowing)
                if let snapshot, snapshot.state == .completed || snapshot.state == .failed { return (largest, snapshot.state) }
                let bytes = snapshot?.bytesWritten ?? 0
                if bytes != last.bytes {
                    if last.bytes > 0 { largest = max(largest, Date().timeIntervalSince(last.at)) }
                    last = (bytes, Date())
                }
                if !asked, bytes > 1 << 20 {
                    asked = true
                    _ = try engine.request(DownloadRequest(url: "http://never-answered.test/x"))
                }
                usleep(10_000)
            }
            return (largest, nil)
        }
        #expect(gaps.state == .completed)
        // Without QUICK_EXIT the loop thread waited ~3.5 s for each lookup the connect timeout cut.
        #expect(gaps.largest < 2, "the download's bytes paused \(gaps.largest) s")
        await engine.shutdown()
    }
}
