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
    /// Eight bytes per draw (each draw is one getrandom(2) call; drawing a byte at a time made a
    /// 16-byte token cost 16 system calls).
    func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var out = [UInt8]()
        out.reserveCapacity(count + 7)
        while out.count < count {
            withUnsafeBytes(of: generator.next()) { out.append(contentsOf: $0) }
        }
        out.removeLast(out.count - count)
        return out
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
