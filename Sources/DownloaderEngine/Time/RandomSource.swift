import Foundation

/// Randomness for ids, caller tokens and retry jitter. Injected for tests.
protocol RandomSource: Sendable {
    /// `count` random bytes (cryptographically secure in the system source).
    func bytes(_ count: Int) -> [UInt8]
    /// A uniform value in `0..<1`.
    func unit() -> Double
}

/// `SystemRandomNumberGenerator` (getrandom(2) on Linux).
struct SystemRandom: RandomSource {
    func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    func unit() -> Double {
        var generator = SystemRandomNumberGenerator()
        return Double.random(in: 0..<1, using: &generator)
    }
}

extension RandomSource {
    /// `byteCount` random bytes as lower-case hex.
    func hex(byteCount: Int) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(byteCount * 2)
        for b in bytes(byteCount) {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
