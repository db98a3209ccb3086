/// A message's properties: ordered UTF-8 key/value pairs, encoded as a varint byte count followed by
/// NUL-terminated strings, key and value alternating (BLIP section 3.4; version 3 has no property tokens).
///
/// ```swift
/// var properties: BLIPProperties = ["Profile": "getCheckpoint", "client": "cp-1"]
/// properties["client"]          // "cp-1"
/// ```
package struct BLIPProperties: Sendable, Hashable, ExpressibleByDictionaryLiteral, Sequence {
    /// One key and its value.
    public struct Pair: Sendable, Hashable {
        public var key: String
        public var value: String
    }

    /// The pairs, in the order they were given or received.
    public private(set) var pairs: [Pair] = []

    /// No properties.
    public init() {}

    /// The pairs, in the literal's order.
    public init(dictionaryLiteral elements: (String, String)...) {
        pairs = elements.map { Pair(key: $0.0, value: $0.1) }
    }

    /// The value of the first pair named `key`; setting replaces it (or appends), setting `nil` removes it.
    public subscript(key: String) -> String? {
        get { pairs.first { $0.key == key }?.value }
        set {
            if let index = pairs.firstIndex(where: { $0.key == key }) {
                if let newValue { pairs[index].value = newValue } else { pairs.remove(at: index) }
            } else if let newValue {
                pairs.append(Pair(key: key, value: newValue))
            }
        }
    }

    /// Whether there are no properties.
    public var isEmpty: Bool { pairs.isEmpty }

    /// The pairs in order.
    public func makeIterator() -> IndexingIterator<[Pair]> { pairs.makeIterator() }

    /// Appends the encoded properties (the varint length, then the strings) to `bytes`.
    func write(into bytes: inout [UInt8]) {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(pairs.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 2 })
        for pair in pairs {
            Self.append(pair.key, to: &encoded)
            Self.append(pair.value, to: &encoded)
        }
        Varint.write(UInt64(encoded.count), into: &bytes)
        bytes.append(contentsOf: encoded)
    }

    /// Appends a string and its terminating NUL. A NUL inside it cannot be represented; it is dropped rather than
    /// corrupting the framing.
    private static func append(_ string: String, to encoded: inout [UInt8]) {
        var string = string
        string.withUTF8 { utf8 in
            if utf8.contains(0) {
                encoded.append(contentsOf: utf8.lazy.filter { $0 != 0 })
            } else {
                encoded.append(contentsOf: utf8)
            }
        }
        encoded.append(0)
    }

    /// Decodes the properties at the start of a message's data; returns them and where the body starts.
    /// - Throws: ``BLIPError`` `.badProperties` for a length beyond the data, a missing final NUL, an odd number of
    ///   strings or invalid UTF-8.
    static func read(_ data: ArraySlice<UInt8>) throws(BLIPError) -> (BLIPProperties, Int) {
        var index = data.startIndex
        let length: UInt64
        do {
            length = try Varint.read(data, at: &index)
        } catch {
            throw BLIPError(.badProperties, "message has no property length")
        }
        guard length <= UInt64(data.endIndex - index) else {
            throw BLIPError(.badProperties, "property length \(length) is longer than the message")
        }
        let end = index + Int(length)
        var properties = BLIPProperties()
        guard length > 0 else { return (properties, end) }
        guard data[end - 1] == 0 else { throw BLIPError(.badProperties, "properties do not end with NUL") }
        // Walked over raw bytes: every message's properties come through here (a push reads one set per revision).
        let failure: BLIPError? = data.withUnsafeBufferPointer { buffer -> BLIPError? in
            let base = index - data.startIndex
            let bytes = UnsafeBufferPointer(rebasing: buffer[base..<(base + Int(length))])
            var key: String?
            var start = 0
            for i in bytes.indices where bytes[i] == 0 {
                guard let string = Self.string(UnsafeBufferPointer(rebasing: bytes[start..<i])) else {
                    return BLIPError(.badProperties, "a property is not valid UTF-8")
                }
                if let k = key {
                    properties.pairs.append(Pair(key: k, value: string))
                    key = nil
                } else {
                    key = string
                }
                start = i + 1
            }
            return key == nil ? nil : BLIPError(.badProperties, "properties hold an odd number of strings")
        }
        if let failure { throw failure }
        return (properties, end)
    }

    /// A property's string, or `nil` for bytes that are not UTF-8. ASCII (nearly every property) takes the fast path.
    private static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var ascii = true
        for byte in bytes where byte >= 0x80 { ascii = false; break }
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }
}
