import CCrypto

/// HMAC-SHA256 (RFC 2104) over libcrypto's SHA-256, for `X-Signature-256`. Pure.
public enum HMACSHA256 {
    static func digest(key: [UInt8], message: [UInt8]) -> [UInt8] {
        let block = 64
        var k = key.count > block ? sha256(key) : key
        k += [UInt8](repeating: 0, count: block - k.count)
        let inner = sha256(k.map { $0 ^ 0x36 } + message)
        return sha256(k.map { $0 ^ 0x5c } + inner)
    }

    public static func hex(key: [UInt8], message: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: digest(key: key, message: message).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] },
                      as: UTF8.self)
    }

    private static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        bytes.withUnsafeBytes { raw in
            _ = EVP_Digest(raw.baseAddress, raw.count, &out, &length, EVP_sha256(), nil)
        }
        return out
    }
}
