/// SplitMix64: the small seeded generator behind k-means seeding and the tests' synthetic data.
///
/// The same algorithm and constants as `SetteeCore.SeededGenerator`, kept internal here so this target imports
/// nothing and so modules importing both never see two public `SeededGenerator`s.
struct SplitMix64: RandomNumberGenerator, Sendable {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform double in [0, 1) from the top 53 bits.
    mutating func nextUnit() -> Double {
        Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// A uniform index in 0..<bound (bound ≥ 1), by multiply-shift (bias below 2⁻³²  for any practical bound).
    mutating func nextIndex(below bound: Int) -> Int {
        Int(truncatingIfNeeded: (next().multipliedFullWidth(by: UInt64(bound))).high)
    }
}
