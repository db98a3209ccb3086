public import Foundation
public import SetteeCore

/// Subscript by key to a ``Fragment`` (Couchbase Lite's `DictionaryFragment`).
public protocol DictionaryFragment {
    subscript(key: String) -> Fragment { get }
}

/// Subscript by index to a ``Fragment`` (Couchbase Lite's `ArrayFragment`).
public protocol ArrayFragment {
    subscript(index: Int) -> Fragment { get }
}

/// Subscript by key to a ``MutableFragment`` (Couchbase Lite's `MutableDictionaryFragment`).
public protocol MutableDictionaryFragment {
    subscript(key: String) -> MutableFragment { get }
}

/// Subscript by index to a ``MutableFragment`` (Couchbase Lite's `MutableArrayFragment`).
public protocol MutableArrayFragment {
    subscript(index: Int) -> MutableFragment { get }
}

/// A value's typed getters (Couchbase Lite's `FragmentProtocol`).
public protocol FragmentProtocol {
    var value: Any? { get }
    var string: String? { get }
    var int: Int { get }
    var int64: Int64 { get }
    var float: Float { get }
    var double: Double { get }
    var number: NSNumber? { get }
    var boolean: Bool { get }
    var date: Date? { get }
    var blob: Blob? { get }
    var array: ArrayObject? { get }
    var dictionary: DictionaryObject? { get }
    var exists: Bool { get }
}

/// A value's typed getters and setters (Couchbase Lite's `MutableFragmentProtocol`; its containers are the
/// mutable ones).
public protocol MutableFragmentProtocol: FragmentProtocol {
    var value: Any? { get set }
    var string: String? { get set }
    var number: NSNumber? { get set }
    var int: Int { get set }
    var int64: Int64 { get set }
    var float: Float { get set }
    var double: Double { get set }
    var boolean: Bool { get set }
    var date: Date? { get set }
    var blob: Blob? { get set }
    var array: MutableArrayObject? { get set }
    var dictionary: MutableDictionaryObject? { get set }
}

/// A value reached by subscripts, present or not (Couchbase Lite's `Fragment`): `doc["address"]["city"].string`.
/// A path that leads nowhere gives a fragment whose ``exists`` is false and whose getters return nil or 0.
public class Fragment: FragmentProtocol, DictionaryFragment, ArrayFragment {
    private let stored: JSON?
    let database: Database?

    package init(_ json: JSON?, database: Database?) {
        self.stored = json
        self.database = database
    }

    /// The value as stored JSON (Settee's), nil when the path leads nowhere.
    public var json: JSON? { stored }

    /// The value as ``DictionaryObject/value(forKey:)`` returns one.
    public var value: Any? { json.flatMap { DocumentValue.read($0, database: database) } }
    public var string: String? { DocumentValue.string(json) }
    public var number: NSNumber? { DocumentValue.number(json) }
    public var int: Int { Int(truncatingIfNeeded: DocumentValue.int64(json)) }
    public var int64: Int64 { DocumentValue.int64(json) }
    public var float: Float { Float(DocumentValue.double(json)) }
    public var double: Double { DocumentValue.double(json) }
    public var boolean: Bool { DocumentValue.boolean(json) }
    public var date: Date? { DocumentValue.date(json) }
    public var blob: Blob? { value as? Blob }
    public var array: ArrayObject? { value as? ArrayObject }
    public var dictionary: DictionaryObject? { value as? DictionaryObject }
    /// Whether the path leads to a value (null included).
    public var exists: Bool { json != nil }

    public subscript(key: String) -> Fragment { Fragment(json?[key], database: database) }
    public subscript(index: Int) -> Fragment { Fragment(json?[index], database: database) }
}

/// A value reached by subscripts on a mutable document or container, which you can also set (Couchbase Lite's
/// `MutableFragment`): `doc["address"]["city"].string = "Lyon"`. Setting through a path that leads nowhere
/// does nothing, as in Couchbase Lite.
public final class MutableFragment: Fragment, MutableDictionaryFragment, MutableArrayFragment {
    private enum Parent {
        case dictionary(MutableDictionaryObject, String)
        case array(MutableArrayObject, Int)
        case none
    }
    private let parent: Parent

    init(dictionary: MutableDictionaryObject, key: String) {
        parent = .dictionary(dictionary, key)
        super.init(nil, database: dictionary.database)
    }

    init(array: MutableArrayObject, index: Int) {
        parent = .array(array, index)
        super.init(nil, database: array.database)
    }

    private init(missing database: Database?) {
        parent = .none
        super.init(nil, database: database)
    }

    public override var json: JSON? {
        switch parent {
        case .dictionary(let d, let key): return d.json(forKey: key)
        case .array(let a, let index): return a.json(at: index)
        case .none: return nil
        }
    }

    private func set(_ newValue: Any?) {
        switch parent {
        case .dictionary(let d, let key): d.setValue(newValue, forKey: key)
        case .array(let a, let index): if a.items.indices.contains(index) { a.setValue(newValue, at: index) }
        case .none: break
        }
    }

    public override var value: Any? {
        get {
            switch parent {
            case .dictionary(let d, let key): return d.value(forKey: key)
            case .array(let a, let index): return a.value(at: index)
            case .none: return nil
            }
        }
        set { set(newValue) }
    }
    public override var string: String? {
        get { super.string }
        set { set(newValue) }
    }
    public override var number: NSNumber? {
        get { super.number }
        set { set(newValue) }
    }
    public override var int: Int {
        get { super.int }
        set { set(newValue) }
    }
    public override var int64: Int64 {
        get { super.int64 }
        set { set(newValue) }
    }
    public override var float: Float {
        get { super.float }
        set { set(newValue) }
    }
    public override var double: Double {
        get { super.double }
        set { set(newValue) }
    }
    public override var boolean: Bool {
        get { super.boolean }
        set { set(newValue) }
    }
    public override var date: Date? {
        get { super.date }
        set { set(newValue) }
    }
    public override var blob: Blob? {
        get { value as? Blob }
        set { set(newValue) }
    }
    /// The value when it is an array: mutable, the parent's own.
    public override var array: MutableArrayObject? {
        get { value as? MutableArrayObject }
        set { set(newValue) }
    }
    /// The value when it is an object: mutable, the parent's own.
    public override var dictionary: MutableDictionaryObject? {
        get { value as? MutableDictionaryObject }
        set { set(newValue) }
    }

    public override subscript(key: String) -> MutableFragment {
        guard let d = value as? MutableDictionaryObject else { return MutableFragment(missing: database) }
        return MutableFragment(dictionary: d, key: key)
    }

    public override subscript(index: Int) -> MutableFragment {
        guard let a = value as? MutableArrayObject else { return MutableFragment(missing: database) }
        return MutableFragment(array: a, index: index)
    }
}

/// A document reached by subscript on a collection (Couchbase Lite's `DocumentFragment`):
/// `collection["hotel::1"]["name"].string`.
public final class DocumentFragment: DictionaryFragment {
    /// The document, nil when the collection has none by that id (or it could not be read).
    public let document: Document?

    init(_ document: Document?) { self.document = document }

    /// Whether the document exists.
    public var exists: Bool { document != nil }

    /// The document's property `key`.
    public subscript(key: String) -> Fragment { document?[key] ?? Fragment(nil, database: nil) }
}

extension Collection {
    /// The document `id` as a ``DocumentFragment`` (Couchbase Lite's collection subscript).
    public subscript(id: String) -> DocumentFragment { DocumentFragment(try? document(id: id)) }
}
