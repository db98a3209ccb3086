/// A JSON object: string keys mapped to ``JSON`` values, in a remembered order.
///
/// The order is the order keys were parsed or first inserted; serialization writes them in that
/// order. Setting an existing key replaces its value in place; a new key goes at the end.
///
/// Equality ignores order: two objects are equal when they have the same keys with equal values,
/// and `hash(into:)` agrees. Use ``JSON/canonicalBytes`` when you need an order-independent byte form.
///
/// ```swift
/// var object: JSONObject = ["b": 1, "a": 2]
/// object["c"] = true        // appended: b, a, c
/// object["b"] = nil         // removed:  a, c
/// object == ["c": true, "a": 2]   // true
/// ```
///
/// Lookups are linear for small objects and hashed once an object has more than
/// ``indexThreshold`` keys. Keys compare as Swift `String`s (canonical equivalence).
public struct JSONObject: Sendable {
    /// One key and its value.
    struct Member: Sendable {
        var key: String
        var value: JSON

        init(key: String, value: JSON) {
            self.key = key
            self.value = value
        }
    }

    /// The members in order. Keys are unique.
    var entries: [Member]
    /// Key → position in `entries`; present only when `entries.count > indexThreshold`.
    var index: [String: Int]?

    /// Objects with more keys than this keep a hash index beside the ordered members.
    static let indexThreshold = 16

    /// An empty object.
    public init() {
        entries = []
        index = nil
    }

    /// Builds an object from pairs in order; a repeated key keeps its first position and its last value.
    public init(_ pairs: [(String, JSON)]) {
        self.init()
        entries.reserveCapacity(pairs.count)
        for (key, value) in pairs {
            self[key] = value
        }
    }

    /// Wraps members the caller guarantees have unique keys (the parser checks them itself).
    init(uniqueEntries: [Member]) {
        entries = uniqueEntries
        index = nil
        if entries.count > Self.indexThreshold { rebuildIndex() }
    }

    /// The number of members.
    public var count: Int { entries.count }

    /// Whether there are no members.
    public var isEmpty: Bool { entries.isEmpty }

    /// The keys in order.
    public var keys: [String] { entries.map(\.key) }

    /// Whether any key satisfies `predicate` (one pass over the members, no copies of their values).
    package func containsKey(where predicate: (String) throws -> Bool) rethrows -> Bool {
        for member in entries where try predicate(member.key) { return true }
        return false
    }

    /// The position of `key` in order, or `nil`.
    func position(of key: String) -> Int? {
        if let index { return index[key] }
        for i in entries.indices where entries[i].key == key {
            return i
        }
        return nil
    }

    /// The value for `key`. Setting `nil` removes the member; setting an existing key keeps its
    /// position; setting a new key appends it.
    public subscript(key: String) -> JSON? {
        get {
            guard let i = position(of: key) else { return nil }
            return entries[i].value
        }
        set {
            if let newValue {
                if let i = position(of: key) {
                    entries[i].value = newValue
                } else {
                    entries.append(Member(key: key, value: newValue))
                    if index != nil {
                        index![key] = entries.count - 1
                    } else if entries.count > Self.indexThreshold {
                        rebuildIndex()
                    }
                }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Removes the member named `key`, returning its value, or `nil` if there was none.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSON? {
        guard let i = position(of: key) else { return nil }
        let removed = entries.remove(at: i).value
        if entries.count > Self.indexThreshold {
            rebuildIndex()
        } else {
            index = nil
        }
        return removed
    }

    /// Whether there is a member named `key`.
    public func contains(key: String) -> Bool {
        position(of: key) != nil
    }

    private mutating func rebuildIndex() {
        var built = [String: Int](minimumCapacity: entries.count)
        for (i, entry) in entries.enumerated() {
            built[entry.key] = i
        }
        index = built
    }
}

extension JSONObject: RandomAccessCollection {
    public typealias Element = (key: String, value: JSON)
    public typealias Index = Int

    public var startIndex: Int { 0 }
    public var endIndex: Int { entries.count }

    /// The member at `position` in order.
    public subscript(position: Int) -> (key: String, value: JSON) {
        let member = entries[position]
        return (member.key, member.value)
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// A repeated key keeps its first position and its last value.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self.init(elements)
    }
}

extension JSONObject: Hashable {
    /// Same keys with equal values, in any order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.entries.count == rhs.entries.count else { return false }
        for member in lhs.entries {
            guard let other = rhs[member.key], other == member.value else { return false }
        }
        return true
    }

    /// Order-independent: combines a commutative sum of per-member hashes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(entries.count)
        var sum = 0
        for member in entries {
            var memberHasher = Hasher()
            memberHasher.combine(member.key)
            memberHasher.combine(member.value)
            sum = sum &+ memberHasher.finalize()
        }
        hasher.combine(sum)
    }
}

extension JSONObject: CustomStringConvertible {
    /// The compact JSON text of the object.
    public var description: String { JSON.object(self).jsonString }
}
