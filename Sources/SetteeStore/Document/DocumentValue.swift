package import Foundation
package import SetteeCore

/// A member of a mutable container: stored JSON, or an object handed out or set (a nested mutable container
/// edited in place, a blob whose content is saved with the document).
enum DocumentItem {
    case json(JSON)
    case dictionary(MutableDictionaryObject)
    case array(MutableArrayObject)
    case blob(Blob)

    /// The item as stored.
    var json: JSON {
        switch self {
        case .json(let value): return value
        case .dictionary(let d): return .object(d.jsonObject)
        case .array(let a): return .array(a.jsonArray)
        case .blob(let b): return .object(b.jsonProperties)
        }
    }
}

/// Conversions between the JSON a document stores and the values Couchbase Lite's API hands out and takes.
///
/// Reading: strings are `String`, numbers and booleans `NSNumber`, objects
/// `DictionaryObject` (or `Blob` when they are blob metadata), arrays `ArrayObject`; null is nil from `value`
/// getters and `NSNull` inside ``DictionaryObject/toDictionary()`` and ``ArrayObject/toArray()``.
///
/// Writing: the types Couchbase Lite takes — `String`, the integer and floating-point types, `Bool`,
/// `NSNumber`, `Date` (stored as an ISO-8601 string), `Blob`, `DictionaryObject`, `ArrayObject`,
/// `[String: Any]`, `[Any]`, `NSNull` and nil (both null) — and Settee's `JSON` and `JSONObject`.
package enum DocumentValue {
    /// A stored value as an immutable container's getters return it.
    package static func read(_ json: JSON, database: Database?) -> Any? {
        switch json {
        case .null: return nil
        // Numbers and booleans are NSNumbers, as Couchbase Lite returns them: `as? Int`, `as? Double` and
        // `as? Bool` all work when the value fits.
        case .bool(let b): return NSNumber(value: b)
        case .int(let i): return NSNumber(value: i)
        case .double(let d): return NSNumber(value: d)
        case .string(let s): return s
        case .array(let a): return ArrayObject(a, database: database)
        case .object(let o):
            if Blob.isBlob(o) { return Blob(stored: o, database: database) }
            return DictionaryObject(o, database: database)
        }
    }

    /// A stored value as a mutable container hands it out: nested containers become mutable ones, kept by the
    /// parent so edits made through them reach the document.
    static func item(reading json: JSON, database: Database?) -> DocumentItem {
        switch json {
        case .array(let a): return .array(MutableArrayObject(a, database: database))
        case .object(let o):
            if Blob.isBlob(o) { return .blob(Blob(stored: o, database: database)) }
            return .dictionary(MutableDictionaryObject(o, database: database))
        default: return .json(json)
        }
    }

    /// The value an item stands for, as the API returns it.
    static func read(_ item: DocumentItem, database: Database?) -> Any? {
        switch item {
        case .json(let json): return read(json, database: database)
        case .dictionary(let d): return d
        case .array(let a): return a
        case .blob(let b): return b
        }
    }

    /// A value given to a setter, as an item: mutable containers are kept as they are (later edits through them
    /// reach the document, as in Couchbase Lite), blobs are kept for their content, the rest is stored as JSON.
    static func item(_ value: Any?) -> DocumentItem {
        if let value {
            // What the typed setters pass, known by its exact type: each case below is a dynamic cast, and an
            // integer or a boolean would first be bridged to an `NSNumber` (the same JSON either way).
            let type = type(of: value)
            if type == String.self { return .json(.string(value as! String)) }
            if type == Int.self { return .json(.int(Int64(value as! Int))) }
            if type == Bool.self { return .json(.bool(value as! Bool)) }
            if type == Double.self { return .json(.double(value as! Double)) }
            if type == Int64.self { return .json(.int(value as! Int64)) }
            if type == MutableArrayObject.self { return .array(value as! MutableArrayObject) }
            if type == MutableDictionaryObject.self { return .dictionary(value as! MutableDictionaryObject) }
        }
        switch value {
        case let d as MutableDictionaryObject: return .dictionary(d)
        case let a as MutableArrayObject: return .array(a)
        case let b as Blob: return .blob(b)
        case let dict as [String: Any] where containsBlob(dict):
            return .dictionary(MutableDictionaryObject(data: dict))
        case let array as [Any] where containsBlob(array):
            return .array(MutableArrayObject(data: array))
        default: return .json(json(value))
        }
    }

    /// A value given to a setter, as JSON. Unsupported types stop the program, as Couchbase Lite's
    /// `Unsupported value type` exception does: they are programming errors, not input.
    package static func json(_ value: Any?) -> JSON {
        guard let value else { return .null }
        switch value {
        case let j as JSON: return j
        case let o as JSONObject: return .object(o)
        case let a as [JSON]: return .array(a)
        case let s as String: return .string(s)
        case let s as Substring: return .string(String(s))
        case let n as NSNumber: return number(n)
        case let b as Bool: return .bool(b)
        case let i as Int: return .int(Int64(i))
        case let i as Int64: return .int(i)
        case let i as Int32: return .int(Int64(i))
        case let i as Int16: return .int(Int64(i))
        case let i as Int8: return .int(Int64(i))
        case let u as UInt: return u <= UInt(Int64.max) ? .int(Int64(u)) : .double(Double(u))
        case let u as UInt64: return u <= UInt64(Int64.max) ? .int(Int64(u)) : .double(Double(u))
        case let u as UInt32: return .int(Int64(u))
        case let u as UInt16: return .int(Int64(u))
        case let u as UInt8: return .int(Int64(u))
        case let d as Double: return .double(d)
        case let f as Float: return .double(Double(f))
        case let date as Date: return .string(ISO8601.format(date))
        case is NSNull: return .null
        case let b as Blob: return .object(b.jsonProperties)
        case let d as DictionaryObject: return .object(d.jsonObject)
        case let a as ArrayObject: return .array(a.jsonArray)
        case let dict as [String: Any]:
            // Swift dictionaries have no order: members are stored sorted, so equal dictionaries store equal text.
            return .object(JSONObject(dict.keys.sorted().map { ($0, json(dict[$0])) }))
        case let array as [Any]: return .array(array.map { json($0) })
        case let array as [Any?]: return .array(array.map { json($0) })
        default:
            preconditionFailure("Unsupported value type \(type(of: value)) for a document property")
        }
    }

    /// An `NSNumber` as JSON: booleans stay booleans, integers integers.
    package static func number(_ n: NSNumber) -> JSON {
        let type = String(cString: n.objCType)
        switch type {
        case "c", "B": return .bool(n.boolValue)  // NSNumber(value: Bool) is a char
        case "f", "d": return .double(n.doubleValue)
        case "Q", "L": return n.uint64Value <= UInt64(Int64.max) ? .int(n.int64Value) : .double(n.doubleValue)
        default: return .int(n.int64Value)
        }
    }

    /// A stored value as plain Swift values (`toDictionary()`/`toArray()`): containers as `[String: Any]` and
    /// `[Any]`, blobs as `Blob`, null as `NSNull`.
    package static func plain(_ json: JSON, database: Database?) -> Any {
        switch json {
        case .null: return NSNull()
        case .array(let a): return a.map { plain($0, database: database) }
        case .object(let o):
            if Blob.isBlob(o) { return Blob(stored: o, database: database) }
            var dict: [String: Any] = [:]
            for (k, v) in o { dict[k] = plain(v, database: database) }
            return dict
        default: return read(json, database: database)!
        }
    }

    static func plain(_ item: DocumentItem, database: Database?) -> Any {
        switch item {
        case .json(let json): return plain(json, database: database)
        case .dictionary(let d): return d.toDictionary()
        case .array(let a): return a.toArray()
        case .blob(let b): return b
        }
    }

    private static func containsBlob(_ value: Any) -> Bool {
        switch value {
        case is Blob: return true
        case let d as [String: Any]: return d.values.contains(where: containsBlob)
        case let a as [Any]: return a.contains(where: containsBlob)
        case let d as MutableDictionaryObject: return d.blobs().isEmpty == false
        case let a as MutableArrayObject: return a.blobs(path: "").isEmpty == false
        default: return false
        }
    }

    // MARK: Typed reads shared by every container, Fragment and Result

    /// Couchbase Lite's `string`: the value when it is a string.
    static func string(_ json: JSON?) -> String? { json?.stringValue }

    /// Couchbase Lite's `number`: the value when it is a number (booleans are numbers too).
    package static func number(_ json: JSON?) -> NSNumber? {
        switch json {
        case .int(let i)?: return NSNumber(value: i)
        case .double(let d)?: return NSNumber(value: d)
        case .bool(let b)?: return NSNumber(value: b)
        default: return nil
        }
    }

    /// Couchbase Lite's `int64`: numbers truncated toward zero, `true` 1, anything else 0.
    static func int64(_ json: JSON?) -> Int64 {
        switch json {
        case .int(let i)?: return i
        case .double(let d)?: return d.isFinite ? Int64(exactly: d.rounded(.towardZero)) ?? (d < 0 ? .min : .max) : 0
        case .bool(let b)?: return b ? 1 : 0
        default: return 0
        }
    }

    /// Couchbase Lite's `double`: numbers, `true` 1, anything else 0.
    static func double(_ json: JSON?) -> Double {
        switch json {
        case .int(let i)?: return Double(i)
        case .double(let d)?: return d
        case .bool(let b)?: return b ? 1 : 0
        default: return 0
        }
    }

    /// Couchbase Lite's `boolean`: true for `true` and nonzero numbers; strings, containers and blobs are
    /// true too (they exist and are not false), null and absent are false.
    static func boolean(_ json: JSON?) -> Bool {
        switch json {
        case .bool(let b)?: return b
        case .int(let i)?: return i != 0
        case .double(let d)?: return d != 0
        case .none, .null?: return false
        default: return true
        }
    }

    /// Couchbase Lite's `date`: an ISO-8601 string parsed, else nil.
    static func date(_ json: JSON?) -> Date? {
        guard let s = json?.stringValue else { return nil }
        return ISO8601.parse(s)
    }
}

/// ISO-8601 dates as Couchbase Lite stores them: UTC, with milliseconds (`2026-11-28T01:24:18.000Z`); read with
/// or without fractional seconds, in any zone offset.
enum ISO8601 {
    static func parse(_ s: String) -> Date? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: s) { return d }
        f.formatOptions = [.withInternetDateTime]
        if let d = f.date(from: s) { return d }
        f.formatOptions = [.withFullDate]
        return f.date(from: s)
    }

    static func format(_ d: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: d)
    }
}
