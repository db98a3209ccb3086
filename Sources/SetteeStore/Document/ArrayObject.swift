public import Foundation
public import SetteeCore

/// Read access to an array's elements (Couchbase Lite's `ArrayProtocol`).
public protocol ArrayProtocol: ArrayFragment {
    var count: Int { get }
    func value(at index: Int) -> Any?
    func string(at index: Int) -> String?
    func number(at index: Int) -> NSNumber?
    func int(at index: Int) -> Int
    func int64(at index: Int) -> Int64
    func float(at index: Int) -> Float
    func double(at index: Int) -> Double
    func boolean(at index: Int) -> Bool
    func date(at index: Int) -> Date?
    func blob(at index: Int) -> Blob?
    func array(at index: Int) -> ArrayObject?
    func dictionary(at index: Int) -> DictionaryObject?
    func toArray() -> [Any]
    func toJSON() -> String
}

/// Write access to an array's elements (Couchbase Lite's `MutableArrayProtocol`). Setters return the array, so
/// edits chain. An index past the end stops the program, as Couchbase Lite's range exception does.
public protocol MutableArrayProtocol: ArrayProtocol, MutableArrayFragment {
    /// The nested array at `index`, editable in place.
    func array(at index: Int) -> MutableArrayObject?
    /// The nested dictionary at `index`, editable in place.
    func dictionary(at index: Int) -> MutableDictionaryObject?
    @discardableResult func setValue(_ value: Any?, at index: Int) -> Self
    @discardableResult func addValue(_ value: Any?) -> Self
    @discardableResult func insertValue(_ value: Any?, at index: Int) -> Self
    @discardableResult func removeValue(at index: Int) -> Self
    @discardableResult func setData(_ data: [Any]?) -> Self
    @discardableResult func setJSON(_ json: String) throws -> Self
    @discardableResult func setString(_ value: String?, at index: Int) -> Self
    @discardableResult func addString(_ value: String?) -> Self
    @discardableResult func insertString(_ value: String?, at index: Int) -> Self
    @discardableResult func setNumber(_ value: NSNumber?, at index: Int) -> Self
    @discardableResult func addNumber(_ value: NSNumber?) -> Self
    @discardableResult func insertNumber(_ value: NSNumber?, at index: Int) -> Self
    @discardableResult func setInt(_ value: Int, at index: Int) -> Self
    @discardableResult func addInt(_ value: Int) -> Self
    @discardableResult func insertInt(_ value: Int, at index: Int) -> Self
    @discardableResult func setInt64(_ value: Int64, at index: Int) -> Self
    @discardableResult func addInt64(_ value: Int64) -> Self
    @discardableResult func insertInt64(_ value: Int64, at index: Int) -> Self
    @discardableResult func setFloat(_ value: Float, at index: Int) -> Self
    @discardableResult func addFloat(_ value: Float) -> Self
    @discardableResult func insertFloat(_ value: Float, at index: Int) -> Self
    @discardableResult func setDouble(_ value: Double, at index: Int) -> Self
    @discardableResult func addDouble(_ value: Double) -> Self
    @discardableResult func insertDouble(_ value: Double, at index: Int) -> Self
    @discardableResult func setBoolean(_ value: Bool, at index: Int) -> Self
    @discardableResult func addBoolean(_ value: Bool) -> Self
    @discardableResult func insertBoolean(_ value: Bool, at index: Int) -> Self
    @discardableResult func setDate(_ value: Date?, at index: Int) -> Self
    @discardableResult func addDate(_ value: Date?) -> Self
    @discardableResult func insertDate(_ value: Date?, at index: Int) -> Self
    @discardableResult func setBlob(_ value: Blob?, at index: Int) -> Self
    @discardableResult func addBlob(_ value: Blob?) -> Self
    @discardableResult func insertBlob(_ value: Blob?, at index: Int) -> Self
    @discardableResult func setArray(_ value: ArrayObject?, at index: Int) -> Self
    @discardableResult func addArray(_ value: ArrayObject?) -> Self
    @discardableResult func insertArray(_ value: ArrayObject?, at index: Int) -> Self
    @discardableResult func setDictionary(_ value: DictionaryObject?, at index: Int) -> Self
    @discardableResult func addDictionary(_ value: DictionaryObject?) -> Self
    @discardableResult func insertDictionary(_ value: DictionaryObject?, at index: Int) -> Self
}

/// A JSON array inside a document or a result (Couchbase Lite's `ArrayObject`): read-only; iterating it gives
/// its elements as ``ArrayObject/value(at:)`` returns them.
public class ArrayObject: ArrayProtocol, Equatable, Hashable, Sequence, CustomStringConvertible {
    /// The elements; a mutable array's handed-out containers and blobs are `.dictionary`/`.array`/`.blob` items.
    var items: [DocumentItem]
    let database: Database?

    package init(_ array: [JSON], database: Database?) {
        self.items = array.map { .json($0) }
        self.database = database
    }

    init(items: [DocumentItem], database: Database?) {
        self.items = items
        self.database = database
    }

    /// The elements as JSON, nested edits included (Settee's).
    public var jsonArray: [JSON] { items.map(\.json) }

    /// An element as stored JSON (Settee's), or nil out of range.
    public func json(at index: Int) -> JSON? { items.indices.contains(index) ? items[index].json : nil }

    public var count: Int { items.count }

    /// The element as Couchbase Lite returns it (see ``DictionaryObject/value(forKey:)``); nil for null or out of
    /// range.
    public func value(at index: Int) -> Any? {
        guard items.indices.contains(index) else { return nil }
        return DocumentValue.read(items[index], database: database)
    }
    public func string(at index: Int) -> String? { DocumentValue.string(json(at: index)) }
    public func number(at index: Int) -> NSNumber? { DocumentValue.number(json(at: index)) }
    public func int(at index: Int) -> Int { Int(truncatingIfNeeded: DocumentValue.int64(json(at: index))) }
    public func int64(at index: Int) -> Int64 { DocumentValue.int64(json(at: index)) }
    public func float(at index: Int) -> Float { Float(DocumentValue.double(json(at: index))) }
    public func double(at index: Int) -> Double { DocumentValue.double(json(at: index)) }
    public func boolean(at index: Int) -> Bool { DocumentValue.boolean(json(at: index)) }
    public func date(at index: Int) -> Date? { DocumentValue.date(json(at: index)) }
    public func blob(at index: Int) -> Blob? { value(at: index) as? Blob }
    public func array(at index: Int) -> ArrayObject? { value(at: index) as? ArrayObject }
    public func dictionary(at index: Int) -> DictionaryObject? { value(at: index) as? DictionaryObject }

    /// The elements as Swift values: `[String: Any]` and `[Any]` for containers, ``Blob``, `NSNull` for null.
    public func toArray() -> [Any] { items.map { DocumentValue.plain($0, database: database) } }

    public func toJSON() -> String { JSON.array(jsonArray).jsonString }

    /// An editable copy.
    public func toMutable() -> MutableArrayObject { MutableArrayObject(copying: self) }

    /// The element at `index` as a ``Fragment`` (a missing one past the end).
    public subscript(index: Int) -> Fragment { Fragment(json(at: index), database: database) }

    public func makeIterator() -> AnyIterator<Any> {
        var i = 0
        return AnyIterator {
            guard i < self.count else { return nil }
            defer { i += 1 }
            return self.value(at: i) ?? NSNull()
        }
    }

    public static func == (a: ArrayObject, b: ArrayObject) -> Bool { a.jsonArray == b.jsonArray }
    public func hash(into hasher: inout Hasher) { hasher.combine(jsonArray) }
    public var description: String { toJSON() }

    func blobs(path: String) -> [(path: String, blob: Blob)] {
        var found: [(String, Blob)] = []
        for (i, item) in items.enumerated() {
            func itemPath() -> String { path + "/" + String(i) }
            switch item {
            case .blob(let b): found.append((itemPath(), b))
            case .dictionary(let d): found += d.blobs(path: itemPath())
            case .array(let a): found += a.blobs(path: itemPath())
            case .json(let j): if Blob.mayHold(j) { found += Blob.stored(in: j, path: itemPath(), database: database) }
            }
        }
        return found
    }
}

/// A JSON array you can edit (Couchbase Lite's `MutableArrayObject`).
///
/// ```swift
/// let tags = MutableArrayObject().addString("pool").addString("spa")
/// doc.setArray(tags, forKey: "amenities")
/// doc.array(forKey: "amenities")?.insertString("gym", at: 0)   // edits the document
/// ```
public final class MutableArrayObject: ArrayObject, MutableArrayProtocol {
    /// An empty array.
    public init() { super.init([], database: nil) }

    /// An array holding `data` (value types as ``MutableDictionaryObject/setValue(_:forKey:)``).
    public init(data: [Any]?) {
        super.init([], database: nil)
        if let data { setData(data) }
    }

    /// An array from JSON array text.
    /// - Throws: ``SetteeError`` `.invalidJSON`, or `.badRequest` when the text is not an array.
    public init(json: String) throws { super.init(try DocumentJSON.array(json), database: nil) }

    override init(_ array: [JSON], database: Database?) { super.init(array, database: database) }

    init(copying other: ArrayObject) { super.init(items: other.items.map(DocumentJSON.copy), database: other.database) }

    public override func value(at index: Int) -> Any? {
        guard items.indices.contains(index) else { return nil }
        if case .json(let stored) = items[index], stored.arrayValue != nil || stored.objectValue != nil {
            items[index] = DocumentValue.item(reading: stored, database: database)
        }
        return DocumentValue.read(items[index], database: database)
    }

    public override func array(at index: Int) -> MutableArrayObject? { value(at: index) as? MutableArrayObject }
    public override func dictionary(at index: Int) -> MutableDictionaryObject? {
        value(at: index) as? MutableDictionaryObject
    }

    public override subscript(index: Int) -> MutableFragment { MutableFragment(array: self, index: index) }

    private func checked(_ index: Int, end: Bool = false) {
        precondition(index >= 0 && (end ? index <= items.count : index < items.count),
                     "Array index \(index) out of range (count \(items.count))")
    }

    /// Replaces the element at `index` (value types as ``MutableDictionaryObject/setValue(_:forKey:)``).
    @discardableResult
    public func setValue(_ value: Any?, at index: Int) -> Self {
        checked(index)
        items[index] = DocumentValue.item(value)
        return self
    }

    /// Appends an element.
    @discardableResult
    public func addValue(_ value: Any?) -> Self {
        items.append(DocumentValue.item(value))
        return self
    }

    /// Inserts an element before `index` (`count` appends).
    @discardableResult
    public func insertValue(_ value: Any?, at index: Int) -> Self {
        checked(index, end: true)
        items.insert(DocumentValue.item(value), at: index)
        return self
    }

    /// Removes the element at `index`.
    @discardableResult
    public func removeValue(at index: Int) -> Self {
        checked(index)
        items.remove(at: index)
        return self
    }

    /// Replaces every element.
    @discardableResult
    public func setData(_ data: [Any]?) -> Self {
        items = (data ?? []).map { DocumentValue.item($0) }
        return self
    }

    /// Replaces every element from JSON array text.
    @discardableResult
    public func setJSON(_ json: String) throws -> Self {
        items = try DocumentJSON.array(json).map { .json($0) }
        return self
    }
}

/// The typed setters, each `setValue(_:at:)`, `addValue(_:)` or `insertValue(_:at:)` with a value of its type.
extension MutableArrayProtocol {
    @discardableResult public func setString(_ value: String?, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addString(_ value: String?) -> Self { addValue(value) }
    @discardableResult public func insertString(_ value: String?, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setNumber(_ value: NSNumber?, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addNumber(_ value: NSNumber?) -> Self { addValue(value) }
    @discardableResult public func insertNumber(_ value: NSNumber?, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setInt(_ value: Int, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addInt(_ value: Int) -> Self { addValue(value) }
    @discardableResult public func insertInt(_ value: Int, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setInt64(_ value: Int64, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addInt64(_ value: Int64) -> Self { addValue(value) }
    @discardableResult public func insertInt64(_ value: Int64, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setFloat(_ value: Float, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addFloat(_ value: Float) -> Self { addValue(value) }
    @discardableResult public func insertFloat(_ value: Float, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setDouble(_ value: Double, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addDouble(_ value: Double) -> Self { addValue(value) }
    @discardableResult public func insertDouble(_ value: Double, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setBoolean(_ value: Bool, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addBoolean(_ value: Bool) -> Self { addValue(value) }
    @discardableResult public func insertBoolean(_ value: Bool, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setDate(_ value: Date?, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addDate(_ value: Date?) -> Self { addValue(value) }
    @discardableResult public func insertDate(_ value: Date?, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setBlob(_ value: Blob?, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addBlob(_ value: Blob?) -> Self { addValue(value) }
    @discardableResult public func insertBlob(_ value: Blob?, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setArray(_ value: ArrayObject?, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addArray(_ value: ArrayObject?) -> Self { addValue(value) }
    @discardableResult public func insertArray(_ value: ArrayObject?, at index: Int) -> Self { insertValue(value, at: index) }
    @discardableResult public func setDictionary(_ value: DictionaryObject?, at index: Int) -> Self { setValue(value, at: index) }
    @discardableResult public func addDictionary(_ value: DictionaryObject?) -> Self { addValue(value) }
    @discardableResult public func insertDictionary(_ value: DictionaryObject?, at index: Int) -> Self { insertValue(value, at: index) }
}
