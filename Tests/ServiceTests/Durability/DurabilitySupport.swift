import Foundation
import Testing
@testable import DownloaderEngine

/// Helpers for the durability tests that drive the real executable.
enum Durability {
    static let allowLoopback = ["--allow-private-networks"]

    static func root(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ds-\(name)-\(UUID().uuidString)")
    }

    static func sha256(_ bytes: [UInt8]) -> String { SHA256Hasher.hex(bytes) }

    /// SHA-256 of a file's bytes, nil when it cannot be read.
    static func sha256(file path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return SHA256Hasher.hex([UInt8](data))
    }

    /// `GET /downloads` as objects.
    static func list(_ service: ServiceProcess) async throws -> [[String: Any]] {
        let answer = try await service.client.request("GET", "/downloads")
        #expect(answer.status == 200)
        return answer.json["downloads"] as? [[String: Any]] ?? []
    }
}
