import Foundation

/// A private test CA and server certificates made by the `openssl` command line in a temporary
/// directory (P-256 keys, so it takes a few tens of milliseconds): what a TLS origin or an https
/// proxy in a test presents. Every leaf names `localhost`, `127.0.0.1` and `::1` unless said otherwise.
final class TestCertificates: Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    /// A certificate and its key, as PEM files.
    struct Leaf: Sendable {
        var certificate: String
        var key: String
    }

    let directory: URL
    /// The test CA's certificate (what `--ca-file` points at).
    let caFile: String
    /// Valid for localhost, files.test, 127.0.0.1 and ::1, signed by the test CA.
    let server: Leaf
    /// Signed by the test CA, but expired since yesterday.
    let expired: Leaf
    /// Signed by the test CA for `other.test` only.
    let wrongName: Leaf
    /// Valid names, signed by a CA nobody trusts.
    let unknownCA: Leaf
    /// Signed by the test CA for the name `localhost` only (no address).
    let nameOnly: Leaf
    /// Signed by the test CA for the address 127.0.0.1 only (no name).
    let addressOnly: Leaf

    static let names = "DNS:localhost,DNS:files.test,IP:127.0.0.1,IP:::1"

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("certs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let dir = directory.path
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                          "-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "2", "-subj", "/CN=Download Service Test CA"])
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                          "-keyout", "\(dir)/other-ca.key", "-out", "\(dir)/other-ca.pem", "-days", "2", "-subj", "/CN=Unknown CA"])
        caFile = "\(dir)/ca.pem"
        server = try Self.leaf("server", names: Self.names, days: "1", ca: "ca", in: dir)
        expired = try Self.leaf("expired", names: Self.names, days: "-1", ca: "ca", in: dir)
        wrongName = try Self.leaf("wrong-name", names: "DNS:other.test", days: "1", ca: "ca", in: dir)
        unknownCA = try Self.leaf("unknown-ca", names: Self.names, days: "1", ca: "other-ca", in: dir)
        nameOnly = try Self.leaf("name-only", names: "DNS:localhost", days: "1", ca: "ca", in: dir)
        addressOnly = try Self.leaf("address-only", names: "IP:127.0.0.1", days: "1", ca: "ca", in: dir)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    private static func leaf(_ name: String, names: String, days: String, ca: String, in dir: String) throws -> Leaf {
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(dir)/\(name).key",
                     "-out", "\(dir)/\(name).csr", "-subj", "/CN=\(name)"])
        let extensions = "\(dir)/\(name).ext"
        try "subjectAltName=\(names)\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: extensions, atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "\(dir)/\(name).csr", "-CA", "\(dir)/\(ca).pem", "-CAkey", "\(dir)/\(ca).key",
                     "-CAcreateserial", "-out", "\(dir)/\(name).pem", "-days", days, "-extfile", extensions])
        // Readable by servers that drop privileges (Squid runs as `proxy`).
        chmod("\(dir)/\(name).key", 0o644)
        return Leaf(certificate: "\(dir)/\(name).pem", key: "\(dir)/\(name).key")
    }

    /// Runs `openssl` with `arguments`, bounded to 20 s.
    static func openssl(_ arguments: [String]) throws {
        let errors = try ChildPipe()
        let process = ChildProcess("/usr/bin/openssl", arguments, standardOutput: .null, standardError: .pipe(errors))
        try process.run()
        // Read while it runs: a full pipe would stall it.
        let text = errors.readText(timeout: 20)
        guard process.waitUntilExit(timeout: 1) else {
            process.terminate()
            throw Failure(description: "openssl \(arguments.first ?? "") did not finish in 20 s")
        }
        guard process.terminationStatus == 0 else {
            throw Failure(description: "openssl \(arguments.joined(separator: " ")) failed: \(text)")
        }
    }
}
