import CCrypto

/// Incremental SHA-256 over libcrypto's EVP API. Not thread-safe: one writer at a time.
/// Sendable only for hand-over between threads; never used from two at once.
final class SHA256Hasher: @unchecked Sendable {
    private var context: OpaquePointer?

    init() {
        context = EVP_MD_CTX_new()
        reset()
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Starts over as if nothing was hashed.
    func reset() {
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest so far as lower-case hex, without disturbing the running state.
    func hexDigest() -> String {
        let copy = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(copy) }
        EVP_MD_CTX_copy_ex(copy, context)
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(copy, &digest, &length)
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for b in digest.prefix(Int(length)) {
            out.append(hex[Int(b >> 4)])
            out.append(hex[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One-shot digest of `bytes`, as lower-case hex.
    static func hex(_ bytes: [UInt8]) -> String {
        let h = SHA256Hasher()
        h.update(bytes)
        return h.hexDigest()
    }
}
