import Foundation

/// SHA-256 of a few bytes in memory, for whoever outside the engine needs one (the service's page
/// names its inline script and style by hash in its Content-Security-Policy).
public enum SHA256Digest {
    /// The digest of `bytes`, base64-encoded (as CSP source expressions want it).
    public static func base64(of bytes: [UInt8]) -> String {
        let hex = Array(SHA256Hasher.hex(bytes).utf8)
        func nibble(_ c: UInt8) -> UInt8 { c <= 0x39 ? c - 0x30 : c - 0x61 + 10 }
        let digest = stride(from: 0, to: hex.count, by: 2).map { nibble(hex[$0]) << 4 | nibble(hex[$0 + 1]) }
        return Data(digest).base64EncodedString()
    }
}
