import CCrypto

/// A caller token as the engine keeps and stores it: the SHA-256 of the token, never the token. A
/// stolen state file therefore lets nobody cancel others' downloads. The hash is plain (unkeyed):
/// tokens are 128 random bits, so no guess list can reverse it, and a key kept next to the state
/// would be stolen with it. The engine finds a caller by hashing the token it is given.
struct TokenHash: Hashable, Sendable {
    /// The 32 digest bytes, as four big-endian words.
    private let w0, w1, w2, w3: UInt64

    init(token: String) {
        var digest = [UInt8](repeating: 0, count: 32)
        var text = token
        text.withUTF8 { bytes in
            var length: UInt32 = 0
            _ = EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha256(), nil)
        }
        self.init(digest: digest)!
    }

    /// From the 32 stored bytes; nil for any other length.
    init?<Bytes: Collection>(digest: Bytes) where Bytes.Element == UInt8 {
        guard digest.count == 32 else { return nil }
        var words = [UInt64](repeating: 0, count: 4)
        for (index, byte) in digest.enumerated() { words[index / 8] = words[index / 8] << 8 | UInt64(byte) }
        (w0, w1, w2, w3) = (words[0], words[1], words[2], words[3])
    }

    /// The 32 digest bytes.
    var digest: [UInt8] {
        [w0, w1, w2, w3].flatMap { word in (0..<8).reversed().map { UInt8(truncatingIfNeeded: word >> ($0 * 8)) } }
    }
}
