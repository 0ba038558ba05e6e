// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DownloadService",
    products: [
        .executable(name: "download-service", targets: ["DownloadService"]),
        .library(name: "MiniHTTPServer", targets: ["MiniHTTPServer"]),
        .library(name: "DownloaderEngine", targets: ["DownloaderEngine"]),
    ],
    targets: [
        // Linux headers that Glibc does not expose to Swift: epoll, eventfd, accept4, sendfile.
        .target(name: "CLinux"),
        // libcurl (Debian libcurl4-openssl-dev) with typed wrappers around its variadic setopt/getinfo.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // libcrypto's EVP digest API for SHA-256 (Debian libssl-dev).
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // SQLite (Debian libsqlite3-dev): the state database (`DownloaderEngine/State`).
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // libpq (Debian libpq-dev): PostgreSQL, the state store of cluster mode (`DownloaderEngine/Cluster`).
        .systemLibrary(name: "CPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libssl (the TLS library libcurl links): trusted CA certificates added in libcurl's SSL_CTX
        // callback, and the handshake's fatal alerts watched to tell lasting TLS failures from resets.
        .systemLibrary(name: "CTLS", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        // What the server and the engine share (Foundation/Glibc only): `SystemError` and the one
        // syscall wrapper (`Posix/`), `HTTPDate` + `HTTPDateCache` (`HTTP/`). Neither depends on the other.
        .target(name: "Basics"),
        .target(name: "MiniHTTPServer", dependencies: ["Basics", "CLinux"]),
        .target(name: "DownloaderEngine", dependencies: ["Basics", "CCurl", "CCrypto", "CTLS", "CLinux", "CSQLite", "CPQ"]),
        .executableTarget(
            name: "DownloadService",
            // CCurl: the client that forwards requests to the replica holding a download (`Cluster/PeerCall`).
            dependencies: ["MiniHTTPServer", "DownloaderEngine", "CLinux", "CCurl"]
        ),
        .testTarget(
            name: "ServiceTests",
            dependencies: ["Basics", "MiniHTTPServer", "DownloaderEngine", "DownloadService", "CLinux"],
            // State areas written by earlier releases (read through #filePath).
            exclude: ["Fixtures"],
            // Optimized even in debug builds: the tests' own byte work (bodies made and compared,
            // megabytes per test) ran unoptimized on the two-thread cooperative pool that every
            // concurrently running test shares, stalling the others for tens of seconds.
            swiftSettings: [.unsafeFlags(["-O"])]
        ),
    ],
    swiftLanguageModes: [.v6]
)
