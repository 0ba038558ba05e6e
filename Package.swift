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
        .target(name: "MiniHTTPServer", dependencies: ["CLinux"]),
        .target(name: "DownloaderEngine", dependencies: ["CCurl", "CCrypto", "CLinux"]),
        .executableTarget(
            name: "DownloadService",
            dependencies: ["MiniHTTPServer", "DownloaderEngine", "CLinux"]
        ),
        .testTarget(
            name: "ServiceTests",
            dependencies: ["MiniHTTPServer", "DownloaderEngine", "DownloadService", "CLinux"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
