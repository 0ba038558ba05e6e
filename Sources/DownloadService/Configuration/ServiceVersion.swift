import DownloaderEngine

/// The service's version and the libraries it runs with (`--version`).
enum ServiceVersion {
    static let current = "1.0"

    /// `download-service 1.0`, then libcurl (with its TLS and HTTP/2 backends), the TLS library
    /// loaded, SQLite (the state store) and libpq (cluster mode), one per line.
    static var report: String {
        let backends = [LinkedLibraries.curlTLS] + (LinkedLibraries.http2.map { [$0] } ?? [])
        return """
        download-service \(current)
        libcurl \(LinkedLibraries.curl) (\(backends.joined(separator: ", ")))
        TLS library: \(LinkedLibraries.tls)
        SQLite \(LinkedLibraries.sqlite)
        libpq \(LinkedLibraries.libpq)
        """
    }
}
