import CCurl
import CPQ
import CSQLite
import CTLS

/// The versions of the libraries the engine runs with (what `--version` prints), read from the
/// libraries themselves at run time, not from the headers it was built against.
public enum LinkedLibraries {
    /// libcurl's version, e.g. "7.88.1".
    public static var curl: String {
        guard let info = ccurl_version_info(), let version = info.pointee.version else { return "unknown" }
        return String(cString: version)
    }

    /// The TLS backend libcurl names, e.g. "OpenSSL/3.0.19".
    public static var curlTLS: String {
        guard let info = ccurl_version_info(), let ssl = info.pointee.ssl_version else { return "none" }
        return String(cString: ssl)
    }

    /// libcurl's HTTP/2 library, e.g. "nghttp2/1.52.0"; nil without HTTP/2 support.
    public static var http2: String? {
        guard let info = ccurl_version_info(), let nghttp2 = info.pointee.nghttp2_version else { return nil }
        return "nghttp2/" + String(cString: nghttp2)
    }

    /// The TLS library loaded into this process, as it describes itself, e.g. "OpenSSL 3.0.19 27 Jan 2026".
    public static var tls: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }

    /// SQLite's version, e.g. "3.40.1" (the embedded state store).
    public static var sqlite: String { String(cString: sqlite3_libversion()) }

    /// libpq's version, e.g. "15.5" (cluster mode's PostgreSQL client): major.minor from
    /// `PQlibVersion` (major * 10000 + minor since PostgreSQL 10).
    public static var libpq: String {
        let number = Int(PQlibVersion())
        return number >= 100_000 ? "\(number / 10_000).\(number % 10_000)" : "\(number / 10_000).\(number / 100 % 100).\(number % 100)"
    }
}
