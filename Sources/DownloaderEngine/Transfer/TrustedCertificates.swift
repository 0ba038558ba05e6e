import Basics
import CTLS
import Glibc

/// Extra CA certificates (`EngineConfiguration.caFile`, the service's `--ca-file`) trusted on top of
/// the system's roots, for origins and an https upstream proxy alike.
///
/// libcurl's `CURLOPT_CAINFO` would replace the system bundle (and the linked libcurl has its path
/// compiled in, so `SSL_CERT_FILE` does not help); instead the PEM file is parsed once at start-up
/// and its certificates are added to each new TLS connection's certificate store from libcurl's
/// `SSL_CTX` callback (`add(to:)`), after libcurl has loaded the system's roots into it.
public final class TrustedCertificates: @unchecked Sendable {
    // @unchecked: the X509 objects are never changed after `init`; OpenSSL reference-counts them.
    private let certificates: [OpaquePointer]
    /// The file they came from.
    public let path: String

    /// Reads every certificate of a PEM file; throws when it cannot be read or holds none.
    public init(pemFile path: String) throws(TrustedCertificatesError) {
        self.path = path
        let data: [UInt8]
        do throws(SystemError) {
            data = try Self.read(path)
        } catch {
            throw TrustedCertificatesError(message: "CA file \(path) cannot be read: \(String(cString: strerror(error.errno)))")
        }
        var parsed: [OpaquePointer] = []
        data.withUnsafeBytes { bytes in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(clamping: bytes.count)) else { return }
            defer { BIO_free(bio) }
            // The _AUX reader takes every certificate form: CERTIFICATE, X509 CERTIFICATE, TRUSTED CERTIFICATE.
            while let certificate = PEM_read_bio_X509_AUX(bio, nil, nil, nil) { parsed.append(certificate) }
        }
        ERR_clear_error()  // The read loop ends on "no start line", which is not an error here.
        // The loop also stops at a block that does not parse: every certificate after it would be
        // left out without a word (or the whole file refused as holding none).
        let blocks = ["CERTIFICATE", "X509 CERTIFICATE", "TRUSTED CERTIFICATE"].reduce(0) {
            $0 + Self.occurrences(of: Array("-----BEGIN \($1)-----".utf8), in: data)
        }
        guard !parsed.isEmpty || blocks > 0 else {
            for certificate in parsed { X509_free(certificate) }
            throw TrustedCertificatesError(message: "CA file \(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        guard parsed.count == blocks else {
            for certificate in parsed { X509_free(certificate) }
            throw TrustedCertificatesError(message: "CA file \(path): certificate \(parsed.count + 1) of \(blocks) does not parse")
        }
        certificates = parsed
    }

    /// How often `needle` occurs in `haystack` (the PEM blocks a file announces).
    static func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> Int {
        guard !needle.isEmpty, haystack.count >= needle.count else { return 0 }
        var count = 0
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0] && haystack[index..<(index + needle.count)].elementsEqual(needle) {
                count += 1
                index += needle.count
            } else {
                index += 1
            }
        }
        return count
    }

    /// The whole file (a CA bundle: at most 16 MiB).
    private static func read(_ path: String) throws(SystemError) -> [UInt8] {
        let fd = try syscall("open") { open(path, O_RDONLY | O_CLOEXEC) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count <= 16 << 20 {
            let count = try syscall("read") { chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
        throw SystemError(errno: EFBIG, function: "read")
    }

    deinit {
        for certificate in certificates { X509_free(certificate) }
    }

    /// How many certificates the file holds.
    public var count: Int { certificates.count }

    /// Adds the certificates to the store of `context` (an `SSL_CTX *`). A certificate already in the
    /// store (libcurl may share one store between connections) is left as it is.
    func add(to context: OpaquePointer) {
        guard let store = SSL_CTX_get_cert_store(context) else { return }
        for certificate in certificates { _ = X509_STORE_add_cert(store, certificate) }
        ERR_clear_error()
    }
}

/// A `--ca-file` that cannot be used; `message` names the file and why.
public struct TrustedCertificatesError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
