public import Foundation
public import SetteeCore

/// Read access to a dictionary's members (Couchbase Lite's `DictionaryProtocol`), shared by ``DictionaryObject``,
/// ``Document`` and query results.
public protocol DictionaryProtocol: DictionaryFragment {
    var count: Int { get }
    var keys: [String] { get }
    func value(forKey key: String) -> Any?
    func string(forKey key: String) -> String?
    func number(forKey key: String) -> NSNumber?
    func int(forKey key: String) -> Int
    func int64(forKey key: String) -> Int64
    func float(forKey key: String) -> Float
    func double(forKey key: String) -> Double
    func boolean(forKey key: String) -> Bool
    func date(forKey key: String) -> Date?
    func blob(forKey key: String) -> Blob?
    func array(forKey key: String) -> ArrayObject?
    func dictionary(forKey key: String) -> DictionaryObject?
    func contains(key: String) -> Bool
    func toDictionary() -> [String: Any]
    func toJSON() -> String
}

/// Write access to a dictionary's members (Couchbase Lite's `MutableDictionaryProtocol`). Every setter returns the
/// dictionary, so edits chain; nil sets JSON null (``removeValue(forKey:)`` removes a member).
public protocol MutableDictionaryProtocol: DictionaryProtocol, MutableDictionaryFragment {
    /// The nested array under `key`, editable in place.
    func array(forKey key: String) -> MutableArrayObject?
    /// The nested dictionary under `key`, editable in place.
    func dictionary(forKey key: String) -> MutableDictionaryObject?
    @discardableResult func setValue(_ value: Any?, forKey key: String) -> Self
    @discardableResult func setString(_ value: String?, forKey key: String) -> Self
    @discardableResult func setNumber(_ value: NSNumber?, forKey key: String) -> Self
    @discardableResult func setInt(_ value: Int, forKey key: String) -> Self
    @discardableResult func setInt64(_ value: Int64, forKey key: String) -> Self
    @discardableResult func setFloat(_ value: Float, forKey key: String) -> Self
    @discardableResult func setDouble(_ value: Double, forKey key: String) -> Self
    @discardableResult func setBoolean(_ value: Bool, forKey key: String) -> Self
    @discardableResult func setDate(_ value: Date?, forKey key: String) -> Self
    @discardableResult func setBlob(_ value: Blob?, forKey key: String) -> Self
    @discardableResult func setArray(_ value: ArrayObject?, forKey key: String) -> Self
    @discardableResult func setDictionary(_ value: DictionaryObject?, forKey key: String) -> Self
    @discardableResult func setData(_ data: [String: Any]) -> Self
    @discardableResult func setJSON(_ json: String) throws -> Self
    @discardableResult func removeValue(forKey key: String) -> Self
}

/// A JSON object inside a document or a result (Couchbase Lite's `DictionaryObject`): read-only; iterating it
/// gives its keys. ``toMutable()`` makes an editable copy.
///
/// ```swift
/// if let address = doc.dictionary(forKey: "address") {
///     print(address.string(forKey: "city") ?? "-", address.count)
/// }
/// ```
public class DictionaryObject: DictionaryProtocol, Equatable, Hashable, Sequence, CustomStringConvertible {
    /// The members as stored. A mutable dictionary keeps a placeholder here for each member in ``live``.
    ///
    /// A document read from the store starts from its body's bytes (``init(storedBody:database:)``): a getter
    /// for one member reads that member from the bytes, and the body is parsed once something needs every member
    /// (its keys, its count, a mutable copy, equality). Couchbase Lite reads a document's properties from its
    /// stored Fleece the same way; a read that looks at a property or two never builds the rest.
    final var object: JSONObject {
        get { parsedObject ?? materialized() }
        _modify {
            if parsedObject == nil { parsedObject = materialized() }
            yield &parsedObject!
        }
        set {
            parsedObject = newValue
            storedBody = nil
        }
    }
    private var parsedObject: JSONObject?
    /// A stored body not parsed yet (without `_attachments`, which a document takes apart when it is read).
    private var storedBody: [UInt8]?
    /// Members handed out or set as objects: nested mutable containers edited in place, blobs.
    var live: [String: DocumentItem] = [:]
    /// The database blobs read their content from (the document's), if any.
    let database: Database?

    package init(_ object: JSONObject, database: Database?) {
        parsedObject = object
        self.database = database
    }

    /// A dictionary over a stored body's bytes, parsed when first needed whole. The store wrote the body from a
    /// parsed object, so it parses; bytes damaged since (a file changed outside SQLite) that the member scan still
    /// follows can answer a getter and then, once parsed, read as an empty dictionary — where the eager read threw
    /// `.internalError` — since a getter has no way to throw.
    init(storedBody: [UInt8], database: Database?) {
        self.storedBody = storedBody
        self.database = database
    }

    /// Whether the stored body has been parsed (or there was none): tests check that getters don't parse it.
    final var isParsed: Bool { parsedObject != nil }

    private final func materialized() -> JSONObject {
        let parsed = storedBody.flatMap { try? DocumentRecord.parseBody($0) } ?? JSONObject()
        parsedObject = parsed
        storedBody = nil
        return parsed
    }

    /// The member read from the stored bytes alone, while the body is not parsed; nil once it is (or when the
    /// scan can't tell), for the caller to look in ``object``.
    private final func storedMember(_ key: String) -> JSON?? {
        guard parsedObject == nil, let storedBody else { return nil }
        switch storedBody.withUnsafeBytes({ JSON.storedMember($0, key: key) }) {
        case .missing: return .some(nil)
        case .value(let value): return .some(value)
        case .undecided: return nil
        }
    }

    /// The members as JSON, nested edits included (Settee's, beside Couchbase Lite's ``toDictionary()``).
    public var jsonObject: JSONObject {
        guard !live.isEmpty else { return object }
        var out = object
        for (key, item) in live { out[key] = item.json }
        return out
    }

    /// A member as stored JSON (Settee's), or nil when absent.
    public func json(forKey key: String) -> JSON? {
        if let item = live[key] { return item.json }
        if let stored = storedMember(key) { return stored }
        return object[key]
    }

    public var count: Int { object.count }
    public var keys: [String] { object.keys }
    public func contains(key: String) -> Bool {
        if let stored = storedMember(key) { return stored != nil }
        return object.contains(key: key)
    }

    /// The member as Couchbase Lite returns it: `String`, `Int`, `Double`, `Bool`, ``Blob``, ``ArrayObject``,
    /// ``DictionaryObject``; nil when absent or null.
    public func value(forKey key: String) -> Any? {
        if let item = live[key] { return DocumentValue.read(item, database: database) }
        if let stored = storedMember(key) { return stored.flatMap { DocumentValue.read($0, database: database) } }
        return object[key].flatMap { DocumentValue.read($0, database: database) }
    }
    public func string(forKey key: String) -> String? { DocumentValue.string(json(forKey: key)) }
    public func number(forKey key: String) -> NSNumber? { DocumentValue.number(json(forKey: key)) }
    /// The member as an integer: numbers truncated, `true` 1; 0 when absent or not a number.
    public func int(forKey key: String) -> Int { Int(truncatingIfNeeded: DocumentValue.int64(json(forKey: key))) }
    public func int64(forKey key: String) -> Int64 { DocumentValue.int64(json(forKey: key)) }
    public func float(forKey key: String) -> Float { Float(DocumentValue.double(json(forKey: key))) }
    public func double(forKey key: String) -> Double { DocumentValue.double(json(forKey: key)) }
    /// True when the member is `true`, a nonzero number, or any other non-null value.
    public func boolean(forKey key: String) -> Bool { DocumentValue.boolean(json(forKey: key)) }
    /// The member parsed as an ISO-8601 date, when it is such a string.
    public func date(forKey key: String) -> Date? { DocumentValue.date(json(forKey: key)) }
    public func blob(forKey key: String) -> Blob? { value(forKey: key) as? Blob }
    public func array(forKey key: String) -> ArrayObject? { value(forKey: key) as? ArrayObject }
    public func dictionary(forKey key: String) -> DictionaryObject? { value(forKey: key) as? DictionaryObject }

    /// The members as Swift values: `[String: Any]` and `[Any]` for containers, ``Blob``, `NSNull` for null.
    public func toDictionary() -> [String: Any] {
        var out: [String: Any] = [:]
        for (key, value) in object {
            if let item = live[key] {
                out[key] = DocumentValue.plain(item, database: database)
            } else {
                out[key] = DocumentValue.plain(value, database: database)
            }
        }
        return out
    }

    /// The members as JSON text.
    public func toJSON() -> String { JSON.object(jsonObject).jsonString }

    /// An editable copy.
    public func toMutable() -> MutableDictionaryObject { MutableDictionaryObject(copying: self) }

    /// The member `key` as a ``Fragment``, for chained reads: `dict["address"]["city"].string`.
    public subscript(key: String) -> Fragment { Fragment(json(forKey: key), database: database) }

    public func makeIterator() -> IndexingIterator<[String]> { keys.makeIterator() }

    /// Equal when the members are (order aside).
    public static func == (a: DictionaryObject, b: DictionaryObject) -> Bool { a.jsonObject == b.jsonObject }
    public func hash(into hasher: inout Hasher) { hasher.combine(jsonObject) }
    public var description: String { toJSON() }

    /// Every blob in the dictionary, nested ones included, with their key paths (`/avatar`, `/photos/0`).
    func blobs(path: String = "") -> [(path: String, blob: Blob)] {
        var found: [(String, Blob)] = []
        // A member's path is built only where a blob may be: most members are scalars, and every save asks.
        func keyPath(_ key: String) -> String { path + "/" + Blob.escape(key) }
        let anyLive = !live.isEmpty
        for (key, value) in object {
            // A member in `live` has null (a placeholder) or the container it was read from in `object`: only
            // those are looked up there.
            let item: DocumentItem? = anyLive && value.mayBeLive ? live[key] : nil
            switch item {
            case .blob(let b)?: found.append((keyPath(key), b))
            case .dictionary(let d)?: found += d.blobs(path: keyPath(key))
            case .array(let a)?: found += a.blobs(path: keyPath(key))
            case .json(let j)?: if Blob.mayHold(j) { found += Blob.stored(in: j, path: keyPath(key), database: database) }
            case nil: if Blob.mayHold(value) { found += Blob.stored(in: value, path: keyPath(key), database: database) }
            }
        }
        return found
    }
}

extension JSON {
    /// Whether a mutable dictionary's member with this stored value may have its current value in `live`: a
    /// placeholder (null) or the container it was handed out from.
    fileprivate var mayBeLive: Bool {
        switch self {
        case .null, .array, .object: return true
        default: return false
        }
    }
}

/// A JSON object you can edit (Couchbase Lite's `MutableDictionaryObject`). Nested containers it hands out are
/// its own: editing them edits it.
///
/// ```swift
/// let address = MutableDictionaryObject()
///     .setString("1 Main St", forKey: "street")
///     .setString("Paris", forKey: "city")
/// doc.setDictionary(address, forKey: "address")
/// doc.dictionary(forKey: "address")?.setString("Lyon", forKey: "city")   // edits the document
/// ```
public final class MutableDictionaryObject: DictionaryObject, MutableDictionaryProtocol {
    /// An empty dictionary.
    public init() { super.init(JSONObject(), database: nil) }

    /// A dictionary holding `data` (see ``setValue(_:forKey:)`` for the value types).
    public init(data: [String: Any]?) {
        super.init(JSONObject(), database: nil)
        if let data { setData(data) }
    }

    /// A dictionary from JSON object text.
    /// - Throws: ``SetteeError`` `.invalidJSON` or `.badRequest` when the text is not a JSON object.
    public init(json: String) throws {
        super.init(try DocumentJSON.object(json), database: nil)
    }

    override init(_ object: JSONObject, database: Database?) { super.init(object, database: database) }

    init(copying other: DictionaryObject) {
        super.init(other.object, database: other.database)
        for (key, item) in other.live { live[key] = DocumentJSON.copy(item) }
    }

    public override func value(forKey key: String) -> Any? {
        guard let stored = object[key] else { return nil }
        if let item = live[key] { return DocumentValue.read(item, database: database) }
        switch stored {
        case .array, .object:
            let item = DocumentValue.item(reading: stored, database: database)
            live[key] = item
            return DocumentValue.read(item, database: database)
        default:
            return DocumentValue.read(stored, database: database)
        }
    }

    /// The member when it is an array: mutable, and the dictionary's own (edits reach it).
    public override func array(forKey key: String) -> MutableArrayObject? { value(forKey: key) as? MutableArrayObject }
    /// The member when it is an object: mutable, and the dictionary's own (edits reach it).
    public override func dictionary(forKey key: String) -> MutableDictionaryObject? {
        value(forKey: key) as? MutableDictionaryObject
    }

    /// The member `key` as a ``MutableFragment``: `dict["address"]["city"].string = "Paris"`.
    public override subscript(key: String) -> MutableFragment { MutableFragment(dictionary: self, key: key) }

    /// Sets a member. Takes `String`, integer and floating-point types, `Bool`, `NSNumber`, `Date` (stored as
    /// ISO-8601 text), ``Blob``, ``DictionaryObject``, ``ArrayObject``, `[String: Any]`, `[Any]`, `NSNull`, nil
    /// (JSON null), and Settee's `JSON`/`JSONObject`. A mutable container set here stays shared: later edits to it
    /// show in this dictionary, as in Couchbase Lite.
    @discardableResult
    public func setValue(_ value: Any?, forKey key: String) -> Self {
        let item = DocumentValue.item(value)
        if case .json(let json) = item {
            if !live.isEmpty { live.removeValue(forKey: key) }
            object[key] = json
        } else {
            object[key] = .null  // keeps the member's place; the value lives in `live`
            live[key] = item
        }
        return self
    }

    /// Replaces every member.
    @discardableResult
    public func setData(_ data: [String: Any]) -> Self {
        object = JSONObject()
        live = [:]
        for key in data.keys.sorted() { setValue(data[key], forKey: key) }
        return self
    }

    /// Replaces every member from JSON object text.
    /// - Throws: ``SetteeError`` `.invalidJSON` or `.badRequest` when the text is not a JSON object.
    @discardableResult
    public func setJSON(_ json: String) throws -> Self {
        object = try DocumentJSON.object(json)
        live = [:]
        return self
    }

    /// Removes a member.
    @discardableResult
    public func removeValue(forKey key: String) -> Self {
        object.removeValue(forKey: key)
        live.removeValue(forKey: key)
        return self
    }
}

/// The typed setters, each `setValue(_:forKey:)` with a value of its type.
extension MutableDictionaryProtocol {
    @discardableResult public func setString(_ value: String?, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setNumber(_ value: NSNumber?, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setInt(_ value: Int, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setInt64(_ value: Int64, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setFloat(_ value: Float, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setDouble(_ value: Double, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setBoolean(_ value: Bool, forKey key: String) -> Self { setValue(value, forKey: key) }
    /// Stores a date as ISO-8601 text in UTC with milliseconds, as Couchbase Lite does.
    @discardableResult public func setDate(_ value: Date?, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setBlob(_ value: Blob?, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult public func setArray(_ value: ArrayObject?, forKey key: String) -> Self { setValue(value, forKey: key) }
    @discardableResult
    public func setDictionary(_ value: DictionaryObject?, forKey key: String) -> Self { setValue(value, forKey: key) }
}

/// JSON text and copies for the document model.
enum DocumentJSON {
    static func object(_ text: String) throws -> JSONObject {
        let parsed: JSON
        do { parsed = try JSON.parse(text) } catch { throw SetteeError(.invalidJSON, "\(error)", underlying: error) }
        guard case .object(let object) = parsed else { throw SetteeError(.badRequest, "Document body must be a JSON object") }
        return object
    }

    static func array(_ text: String) throws -> [JSON] {
        let parsed: JSON
        do { parsed = try JSON.parse(text) } catch { throw SetteeError(.invalidJSON, "\(error)", underlying: error) }
        guard case .array(let array) = parsed else { throw SetteeError(.badRequest, "Expected a JSON array") }
        return array
    }

    /// A deep copy of an item (blobs are shared: they are values once created).
    static func copy(_ item: DocumentItem) -> DocumentItem {
        switch item {
        case .json, .blob: return item
        case .dictionary(let d): return .dictionary(MutableDictionaryObject(copying: d))
        case .array(let a): return .array(MutableArrayObject(copying: a))
        }
    }
}
