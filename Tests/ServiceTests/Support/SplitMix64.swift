/// SplitMix64: a small reproducible generator for tests that print their seed (soak rounds, chaos
/// kill moments).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// `next()` reduced to 0..<bound (bound ≥ 1).
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }
}
