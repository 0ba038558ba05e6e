import Foundation
import Testing
@testable import DownloaderEngine

/// HTTPS origins: a real nginx on loopback with certificates from a test CA made by `openssl`
/// (`TestCertificates`), fetched by the engine as the service builds it (`DownloadEngine(configuration:)`,
/// which reads `caFile`). Verification is always on; lasting TLS failures fail at once.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TLSOriginTests {
    static let certificates = Result { try TestCertificates() }

    static func engine(caFile: String?, _ configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        var c = EngineFixture.configuration(EngineFixture.root())
        c.caFile = caFile
        configure(&c)
        return try DownloadEngine(configuration: c)
    }

    static func nginx(_ leaf: KeyPath<TestCertificates, TestCertificates.Leaf>, http2: Bool = true,
                      protocols: String = "TLSv1.2 TLSv1.3", ciphers: String = "HIGH:!aNULL",
                      files: [String: [UInt8]] = ["f.bin": EngineFixture.body(300_000, seed: 9)]) throws -> NginxOrigin {
        let certs = try certificates.get()
        let chosen = certs[keyPath: leaf]
        return try NginxOrigin(files: files, tls: .init(certificate: chosen.certificate, key: chosen.key, http2: http2,
                                                        protocols: protocols, ciphers: ciphers))
    }

    /// nginx over HTTPS (HTTP/2 offered) with the server certificate, plain GETs at 1 MB/s.
    static func throttledNginx(_ files: [String: [UInt8]]) throws -> NginxOrigin {
        let certs = try certificates.get()
        return try NginxOrigin(files: files, limitRate: 1_000_000, tls: .init(certificate: certs.server.certificate, key: certs.server.key))
    }

    /// Fetches `url`; the end state and how long it took.
    static func fetch(_ engine: DownloadEngine, _ url: String) async throws -> (DownloadSnapshot, Double) {
        let start = Date()
        let (_, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: url))
        return (done, Date().timeIntervalSince(start))
    }

    @Test func http2IsUsedWhenTheOriginOffersIt() async throws {
        let body = EngineFixture.body(2_000_000, seed: 3)
        let nginx = try Self.nginx(\.server, files: ["f.bin": body])
        defer { nginx.stop() }
        let engine = try Self.engine(caFile: try Self.certificates.get().caFile)
        let (done, _) = try await Self.fetch(engine, nginx.baseURL + "/f.bin")
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == body)
        let line = try #require(nginx.accessLog().last)
        #expect(line[4] == "HTTP/2.0", "\(line)")
        #expect(line[5] == "TLSv1.2" || line[5] == "TLSv1.3", "\(line)")
        await engine.shutdown()
    }

    /// A segmented fetch from an HTTP/2 origin: each connection's transfer on a connection of its
    /// own. Multiplexed on one connection, the pieces shared the one connection's share that an
    /// origin (or a long link) allows each, which is what more connections are for.
    @Test func segmentsFromAnHTTP2OriginGoOverConnectionsOfTheirOwn() async throws {
        let body = EngineFixture.body(2_000_000, seed: 5)
        // Plain GETs (the prefix) throttled, so that the pieces beside it run while it does.
        let nginx = try Self.throttledNginx(["f.bin": body])
        defer { nginx.stop() }
        let engine = try Self.engine(caFile: try Self.certificates.get().caFile) {
            $0.maxConnectionsPerDownload = 4
            $0.minimumSegmentBytes = 100_000
            $0.segmentProbeSeconds = 0
        }
        let (_, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: nginx.baseURL + "/f.bin", connections: 4))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == body)
        let lines = nginx.accessLog().filter { $0.first == "/f.bin" && $0.count == 7 }
        #expect(lines.allSatisfy { $0[4] == "HTTP/2.0" }, "\(lines)")
        #expect(lines.filter { $0[2] != "-" }.count >= 3, "\(lines)")
        // Four transfers began at once (the prefix and three pieces): a piece that ended before the
        // last one connected may have left its connection to it, hence at least three.
        #expect(Set(lines.map { $0[6] }).count >= 3, "\(lines)")
        await engine.shutdown()
    }

    /// Webhook deliveries trust the `--ca-file` CAs too (a receiver on the internal CA): the
    /// engine's poster verifies nginx's certificate and gets its answer; without the CA it fails.
    @Test func webhookDeliveriesTrustTheCAFile() async throws {
        let nginx = try Self.nginx(\.server, http2: false)
        defer { nginx.stop() }
        let egress = EgressRules(allowPrivateNetworks: true)
        let trusted = CurlWebhookPoster(egress: egress, trust: try TrustedCertificates(pemFile: try Self.certificates.get().caFile))
        let answered = try await onThread { trusted.post(url: nginx.baseURL + "/hook", headers: [], body: Array("{}".utf8), timeout: 5) }
        guard case .answered = answered else { Issue.record("not answered: \(answered)"); return }
        let untrusted = CurlWebhookPoster(egress: egress)
        let refused = try await onThread { untrusted.post(url: nginx.baseURL + "/hook", headers: [], body: Array("{}".utf8), timeout: 5) }
        guard case .failed(let reason) = refused else { Issue.record("answered without the CA: \(refused)"); return }
        #expect(reason.lowercased().contains("certificate"), "\(reason)")
        // The engine hands its poster the CAs it fetches with.
        let engine = try Self.engine(caFile: try Self.certificates.get().caFile)
        #expect((engine.webhooks.poster as? CurlWebhookPoster)?.trust != nil)
        await engine.shutdown()
    }

    @Test func http11WhenTheOriginDoesNotOfferHTTP2() async throws {
        let nginx = try Self.nginx(\.server, http2: false)
        defer { nginx.stop() }
        let engine = try Self.engine(caFile: try Self.certificates.get().caFile)
        let (done, _) = try await Self.fetch(engine, nginx.baseURL + "/f.bin")
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(nginx.accessLog().last?[4] == "HTTP/1.1")
        await engine.shutdown()
    }

    @Test func aPausedDownloadResumesWithARangeOverHTTP2() async throws {
        let body = EngineFixture.body(6_000_000, seed: 5)
        let nginx = try Self.throttledNginx(["big.bin": body])
        defer { nginx.stop() }
        let engine = try Self.engine(caFile: try Self.certificates.get().caFile)
        let url = nginx.baseURL + "/big.bin"
        let (id, kept) = try await EngineLiveTests.pauseMidway(engine, url: url, atLeast: 200_000)
        let (_, done) = try await EngineLiveTests.requestAgain(engine, url, id: id)
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, id) == body)
        let lines = nginx.accessLog()
        #expect(lines.count == 2)
        #expect(lines.last?[1] == "206" && lines.last?[2] == "bytes=\(kept)-" && lines.last?[4] == "HTTP/2.0", "\(lines)")
        await engine.shutdown()
    }

    @Test func aReusedHTTP2ConnectionIsCheckedByTheGuardToo() async throws {
        let nginx = try Self.nginx(\.server)
        defer { nginx.stop() }
        let driver = CurlTransferDriver(trust: try TrustedCertificates(pemFile: try Self.certificates.get().caFile))
        defer { driver.shutdown() }
        let first = try await CurlTransferDriverTests.attempt(.test(nginx.baseURL + "/f.bin"), on: driver)
        guard case .success = try await first.outcome() else { Issue.record("the first attempt failed"); return }

        // HTTP/2 keeps the connection to localhost for reuse: only the pre-request check can refuse it.
        let refused = try await CurlTransferDriverTests.attempt(.test(nginx.baseURL + "/f.bin", allowPrivateNetworks: false), on: driver)
        #expect(try await refused.failureKind() == .blockedAddress)
        #expect(nginx.accessLog().count == 1)
    }

    /// A lasting TLS failure: `failed` with `code` after one attempt, within 1 s, naming the host.
    static func expectFailsAtOnce(_ leaf: KeyPath<TestCertificates, TestCertificates.Leaf>, trusted: Bool = true,
                                  protocols: String = "TLSv1.2 TLSv1.3", ciphers: String = "HIGH:!aNULL",
                                  code: DownloadFailure.Code, reason: String) async throws {
        let nginx = try nginx(leaf, protocols: protocols, ciphers: ciphers)
        defer { nginx.stop() }
        let engine = try engine(caFile: trusted ? try certificates.get().caFile : nil)
        let (done, _) = try await fetch(engine, nginx.baseURL + "/f.bin")
        #expect(done.state == .failed)
        #expect(done.error?.code == code, "\(String(describing: done.error))")
        let message = done.error?.message ?? ""
        #expect(message.contains("localhost"), "\(message)")
        #expect(message.contains(reason), "\(message)")
        #expect(engine.statistics.retries == 0, "at once: no retry (never a wall-clock bound, on a shared machine)")
        #expect(nginx.accessLog().isEmpty)
        await engine.shutdown()
    }

    @Test func aCertificateFromAnUnknownCAFailsAtOnce() async throws {
        try await Self.expectFailsAtOnce(\.unknownCA, code: .tlsCertificate, reason: "unable to get local issuer certificate")
    }

    @Test func theTestCAIsUnknownWithoutTheCAFile() async throws {
        try await Self.expectFailsAtOnce(\.server, trusted: false, code: .tlsCertificate, reason: "unable to get local issuer certificate")
    }

    @Test func anExpiredCertificateFailsAtOnce() async throws {
        try await Self.expectFailsAtOnce(\.expired, code: .tlsCertificate, reason: "certificate has expired")
    }

    @Test func aCertificateForAnotherNameFailsAtOnce() async throws {
        try await Self.expectFailsAtOnce(\.wrongName, code: .tlsCertificate, reason: "subject name")
    }

    @Test func anOriginThatOnlySpeaksTLS11FailsAtOnce() async throws {
        try await Self.expectFailsAtOnce(\.server, protocols: "TLSv1.1", ciphers: "DEFAULT:@SECLEVEL=0",
                                         code: .tlsHandshake, reason: "protocol version")
    }

    @Test func aResetDuringTheHandshakeIsRetriedLikeAnyConnectionError() async throws {
        let listener = try RawListener(.resetAfterFirstBytes)
        defer { listener.stop() }
        let engine = try Self.engine(caFile: try Self.certificates.get().caFile) { $0.maxAttempts = 3 }
        let (done, _) = try await Self.fetch(engine, "https://127.0.0.1:\(listener.port)/f.bin")
        #expect(done.state == .failed)
        #expect(done.error?.code == .retriesExhausted, "\(String(describing: done.error))")
        #expect(listener.connectionCount == 3)
        #expect(engine.statistics.retries == 2)
        await engine.shutdown()
    }

    @Test func theCAFileIsReadOnceAndMustHoldCertificates() throws {
        let certs = try Self.certificates.get()
        #expect(try TrustedCertificates(pemFile: certs.caFile).count == 1)
        let bundle = certs.directory.appendingPathComponent("bundle.pem").path
        let both = try String(contentsOfFile: certs.caFile, encoding: .utf8)
            + String(contentsOfFile: certs.directory.appendingPathComponent("other-ca.pem").path, encoding: .utf8)
        try both.write(toFile: bundle, atomically: true, encoding: .utf8)
        #expect(try TrustedCertificates(pemFile: bundle).count == 2)

        let missing = certs.directory.appendingPathComponent("missing.pem").path
        #expect(throws: TrustedCertificatesError(message: "CA file \(missing) cannot be read: No such file or directory")) {
            try TrustedCertificates(pemFile: missing)
        }
        let empty = certs.directory.appendingPathComponent("empty.pem").path
        try "not a certificate\n".write(toFile: empty, atomically: true, encoding: .utf8)
        #expect(throws: TrustedCertificatesError(message: "CA file \(empty) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")) {
            try TrustedCertificates(pemFile: empty)
        }
        // A block that does not parse, first or between good ones, is named (it stopped the reading:
        // the certificates after it were left out, or the file was refused as holding none).
        let ca = try String(contentsOfFile: certs.caFile, encoding: .utf8)
        let broken = "-----BEGIN CERTIFICATE-----\nMIIBroken==\n-----END CERTIFICATE-----\n"
        for (name, text, failing) in [("first", broken + ca, 1), ("middle", ca + broken + ca, 2)] {
            let file = certs.directory.appendingPathComponent("broken-\(name).pem").path
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let blocks = name == "first" ? 2 : 3
            #expect(throws: TrustedCertificatesError(message: "CA file \(file): certificate \(failing) of \(blocks) does not parse")) {
                try TrustedCertificates(pemFile: file)
            }
        }
        // Every certificate form OpenSSL writes is read: the legacy `X509 CERTIFICATE` header and a
        // `TRUSTED CERTIFICATE` (what `openssl x509 -trustout` writes) count with the plain one.
        let legacy = certs.directory.appendingPathComponent("legacy.pem").path
        try ca.replacingOccurrences(of: "BEGIN CERTIFICATE", with: "BEGIN X509 CERTIFICATE")
            .replacingOccurrences(of: "END CERTIFICATE", with: "END X509 CERTIFICATE").write(toFile: legacy, atomically: true, encoding: .utf8)
        #expect(try TrustedCertificates(pemFile: legacy).count == 1)
        let trusted = certs.directory.appendingPathComponent("trusted.pem").path
        let convert = ChildProcess("/usr/bin/openssl", ["x509", "-in", certs.caFile, "-trustout", "-addtrust", "serverAuth", "-out", trusted],
                                   standardOutput: .null, standardError: .null)
        try convert.run()
        #expect(convert.waitUntilExit(timeout: 20) && convert.terminationStatus == 0)
        let mixed = certs.directory.appendingPathComponent("mixed.pem").path
        try (ca + (try String(contentsOfFile: trusted, encoding: .utf8))).write(toFile: mixed, atomically: true, encoding: .utf8)
        #expect(try TrustedCertificates(pemFile: mixed).count == 2)
        var c = EngineFixture.configuration(EngineFixture.root())
        c.caFile = missing
        #expect(throws: TrustedCertificatesError.self) { try DownloadEngine(configuration: c) }
    }
}
