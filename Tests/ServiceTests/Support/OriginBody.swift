/// The deterministic bodies `TestOrigin` serves.
///
/// Byte `i` of the body with seed `s` is lane `i % 8` of `splitmix64(s ^ (i / 8))`, so any range can be
/// generated on its own, a body shifted by one byte never matches, and another seed (another path or
/// version) gives different bytes everywhere.
enum OriginBody {
    /// The seed for `path` at `version`.
    static func seed(path: String, version: Int) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a over the path, then the version mixed in.
        for byte in path.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return mix(hash ^ (UInt64(truncatingIfNeeded: version) &* 0x9e37_79b9_7f4a_7c15))
    }

    /// Fills `buffer` with the body bytes that start at `offset`.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer, seed: UInt64, offset: Int) {
        var index = 0
        var word = mix(seed ^ UInt64(offset / 8))
        while index < buffer.count {
            let position = offset + index
            let lane = position % 8
            if lane == 0 && index > 0 { word = mix(seed ^ UInt64(position / 8)) }
            buffer[index] = UInt8(truncatingIfNeeded: word >> (UInt64(lane) * 8))
            index += 1
        }
    }

    /// The body bytes in `range`.
    static func bytes(seed: UInt64, range: Range<Int>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: range.count) { buffer, count in
            fill(UnsafeMutableRawBufferPointer(buffer), seed: seed, offset: range.lowerBound)
            count = range.count
        }
    }

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
