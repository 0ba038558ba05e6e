import Foundation
import Testing
@testable import DownloaderEngine

/// The engine with the libcurl driver against a real nginx (strong ETags, byte ranges, If-Range).
@Suite struct EngineNginxTests {
    @Test func downloadPauseAndResumeAgainstNginx() async throws {
        guard NginxOrigin.binary != nil else {
            Issue.record("SKIPPED: nginx binary not found in \(NginxOrigin.binaryCandidates); install nginx to run this test")
            return
        }
        let body = EngineFixture.body(8_000_000, seed: 42)
        let nginx = try NginxOrigin(files: ["big.bin": body, "small.bin": Array(body[0..<1000])], limitRate: 1_000_000)
        defer { nginx.stop() }
        let engine = try EngineLiveTests.engine()
        // Small file straight through.
        let small = try engine.request(DownloadRequest(url: nginx.baseURL + "/small.bin"))
        #expect(try await EngineLiveTests.finish(engine, small.snapshot.id).state == .completed)
        #expect(try EngineLiveTests.stored(engine, small.snapshot.id) == Array(body[0..<1000]))
        // Big file: pause midway, resume with Range + If-Range.
        let (id, kept) = try await EngineLiveTests.pauseMidway(engine, url: nginx.baseURL + "/big.bin",
                                                                 atLeast: 200_000)
        #expect(kept >= 200_000 && kept < 8_000_000)
        _ = try engine.request(DownloadRequest(url: nginx.baseURL + "/big.bin"))
        let done = try await EngineLiveTests.finish(engine, id)
        #expect(done.state == .completed)
        #expect(done.fileName == "big.bin")
        #expect(try EngineLiveTests.stored(engine, id) == body)
        let lines = nginx.accessLog().filter { $0.first == "/big.bin" }
        #expect(lines.count == 2)
        if lines.count == 2 {
            #expect(lines[0][2] == "-")
            #expect(lines[1][1] == "206")
            #expect(lines[1][2] == "bytes=\(kept)-")
            // nginx logs '"' as \x22; the If-Range must be its strong ETag, quotes included.
            let ifRange = lines[1][3].replacingOccurrences(of: "\\x22", with: "\"")
            #expect(ifRange.hasPrefix("\"") && ifRange.hasSuffix("\"") && ifRange.count > 2, "\(ifRange)")
        }
        #expect(engine.statistics.resumes == 1)
        await engine.shutdown()
    }
}

