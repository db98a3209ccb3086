import Testing
@testable import SetteeCore

/// Builds random JSON values, biased towards the awkward corners: escapes, non-ASCII, long strings,
/// extreme numbers and deep nesting.
struct RandomJSON {
    var rng: SeededGenerator

    // Scalars without combining marks, so distinct keys never compare equal as Swift strings.
    private static let alphabet: [Unicode.Scalar] = Array("abcXYZ019 _-\"\\/\n\t\r\u{0}\u{1F}\u{7F}éß中😀𝄞".unicodeScalars)

    mutating func string(maxLength: Int) -> String {
        var result = String.UnicodeScalarView()
        let length = Int.random(in: 0...maxLength, using: &rng)
        for _ in 0..<length {
            result.append(Self.alphabet.randomElement(using: &rng)!)
        }
        return String(result)
    }

    mutating func double() -> Double {
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: return Double(Int.random(in: -1000...1000, using: &rng))
        case 1: return Double.random(in: -1...1, using: &rng)
        case 2: return Double(bitPattern: rng.next())   // any bit pattern, possibly huge or tiny
        case 3: return Double.random(in: -1e6...1e6, using: &rng).rounded() / 100
        case 4: return [0.0, -0.0, 0.1, 1e-7, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 1e21].randomElement(using: &rng)!
        default: return Double.random(in: -1e300...1e300, using: &rng)
        }
    }

    mutating func value(depth: Int = 0) -> JSON {
        let leaf = depth >= 6 || Int.random(in: 0..<3, using: &rng) > 0
        if leaf {
            switch Int.random(in: 0..<7, using: &rng) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &rng))
            case 2: return .int(Int64(bitPattern: rng.next()) >> Int64.random(in: 0...63, using: &rng))
            case 3:
                let d = double()
                return .double(d.isFinite ? d : 0.5)
            default: return .string(string(maxLength: Int.random(in: 0..<3, using: &rng) == 0 ? 40 : 8))
            }
        }
        let count = Int.random(in: 0...6, using: &rng)
        if Bool.random(using: &rng) {
            return .array((0..<count).map { _ in value(depth: depth + 1) })
        }
        var object = JSONObject()
        for _ in 0..<count {
            object[string(maxLength: 6)] = value(depth: depth + 1)
        }
        return .object(object)
    }
}

@Suite struct JSONRoundTripTests {
    @Test func randomValuesRoundTripThroughSerializeAndParse() throws {
        var random = RandomJSON(rng: SeededGenerator(seed: 0x5E77EE))
        for _ in 0..<2000 {
            let value = random.value()
            let bytes = value.serializedBytes
            let parsed = try JSON.parse(bytes)
            #expect(parsed == value, "\(value.jsonString)")
            #expect(parsed.serializedBytes == bytes, "key order or formatting changed: \(value.jsonString)")
            #expect(try JSON.parse(value.canonicalBytes) == value)
        }
    }

    @Test func randomDoublesRoundTripExactly() throws {
        var random = RandomJSON(rng: SeededGenerator(seed: 42))
        for _ in 0..<20000 {
            let d = random.double()
            guard d.isFinite else { continue }
            let parsed = try JSON.parse(JSON.double(d).serializedBytes)
            #expect(parsed.doubleValue?.bitPattern == d.bitPattern, "\(d)")
            #expect(parsed == .double(d))
        }
    }

    @Test func randomIntegersRoundTripExactly() throws {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<20000 {
            let n = Int64(bitPattern: rng.next()) >> Int64.random(in: 0...63, using: &rng)
            #expect(try JSON.parse(JSON.int(n).serializedBytes) == .int(n))
        }
    }

    @Test func canonicalBytesAreIndependentOfInsertionOrder() throws {
        var random = RandomJSON(rng: SeededGenerator(seed: 99))
        for _ in 0..<300 {
            guard case .object(let object) = random.value(depth: 5) else { continue }
            var shuffled = Array(object)
            shuffled.shuffle(using: &random.rng)
            let reordered = JSON.object(JSONObject(shuffled.map { ($0.key, $0.value) }))
            #expect(reordered == .object(object))
            #expect(reordered.canonicalBytes == JSON.object(object).canonicalBytes)
        }
    }
}
