/// A JSON value, as parsed from or serialized to RFC 8259 text.
///
/// Numbers keep the distinction the text made: `1` is ``int(_:)``, while `1.0`, `1e2` and integers
/// outside `Int64` are ``double(_:)``; the two cases are never equal to each other. Objects keep
/// their keys in parse (or insertion) order, but compare equal regardless of order — see ``JSONObject``.
///
/// ```swift
/// let doc: JSON = ["_id": "a", "n": 1, "tags": ["x", "y"]]
/// doc["n"]?.intValue          // 1
/// doc["tags"]?[1]?.stringValue // "y"
/// doc.jsonString              // {"_id":"a","n":1,"tags":["x","y"]}
/// ```
///
/// `JSON` is a value type and `Sendable`.
public enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    /// An integer written without fraction or exponent that fits in `Int64`.
    case int(Int64)
    /// Any other number.
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)
}

// MARK: - Access

extension JSON {
    /// The member named `key`, or `nil` if this is not an object or has no such member.
    public subscript(key: String) -> JSON? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The element at `index`, or `nil` if this is not an array or `index` is out of range.
    public subscript(index: Int) -> JSON? {
        if case .array(let array) = self, array.indices.contains(index) { return array[index] }
        return nil
    }

    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, if this is an int, or a double with an integral value that fits in `Int64`.
    public var intValue: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int64(exactly: value)
        default: return nil
        }
    }

    /// The number as a `Double`, if this is an int or a double.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The boolean, if this is a boolean.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The object, if this is an object.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSON]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The type's name as Mango's `$type` and SQL++'s `TYPE()` spell it: `null`, `boolean`, `number`, `string`,
    /// `array` or `object`.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Whether this is `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

// MARK: - Literals

extension JSON: ExpressibleByNilLiteral {
    public init(nilLiteral: ()) { self = .null }
}

extension JSON: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSON: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .int(value) }
}

extension JSON: ExpressibleByFloatLiteral {
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSON: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSON: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
}

extension JSON: ExpressibleByDictionaryLiteral {
    /// Builds an object; a repeated key keeps its first position and its last value.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(JSONObject(elements))
    }
}

extension JSON: CustomStringConvertible {
    /// The compact JSON text, as ``jsonString``.
    public var description: String { jsonString }
}
