public import SetteeCore
public import SetteeStore

/// A map function: receives a document (its body with `_id` and `_rev`) and emits any number of key/value rows.
///
/// It must be pure (same document, same rows), free of side effects and thread-safe. A map function that throws
/// skips that document (the error is counted in ``ViewInfo/mapErrors``) without stopping the index.
public typealias MapBlock = @Sendable (_ document: JSONObject, _ emit: Emitter) throws -> Void

/// A reduce function: combines rows' keys and values into one value. With `rereduce` true it is given values it
/// returned before (and no keys) and must combine those — Settee does call it that way, for large ranges.
public typealias ReduceBlock = @Sendable (_ keys: [JSON], _ values: [JSON], _ rereduce: Bool) throws -> JSON

/// A full-text key: emitting one (`emit(TextKey(body), title)`) makes the view a full-text view, queried with
/// ``ViewQuery/fullTextQuery``. Don't emit full-text and regular keys from the same view.
public struct TextKey: Sendable, Hashable {
    public let text: String
    public init(_ text: String) { self.text = text }
}

/// What a map function calls to emit a row: `emit(key, value)`.
///
/// Keys and values are any JSON (`emit(["Smith", "Ann"], doc["phone"])`); the value may be nil (no value, the
/// cheapest). A value that is an object with an `_id` member redirects the row's ``ViewQueryRow/documentID`` (and
/// ``ViewQueryRow/document``) to that document.
public final class Emitter {
    struct Row {
        let key: JSON
        let value: JSON?
        let text: String?  // a TextKey's text
    }
    var rows: [Row] = []

    init() {}

    /// Emits a row with a JSON key.
    public func callAsFunction(_ key: JSON, _ value: JSON? = nil) {
        rows.append(Row(key: key, value: value, text: nil))
    }

    /// Emits a row with a string key.
    public func callAsFunction(_ key: String, _ value: JSON? = nil) {
        rows.append(Row(key: .string(key), value: value, text: nil))
    }

    /// Emits a full-text row: the text is indexed for ``ViewQuery/fullTextQuery``.
    public func callAsFunction(_ key: TextKey, _ value: JSON? = nil) {
        rows.append(Row(key: .string(key.text), value: value, text: key.text))
    }
}

/// The built-in reduce functions CouchDB offers (and Settee stores partial results of, so a reduce over a whole view
/// reads a few hundred stored values, not every row).
public enum BuiltInReduce: Sendable, Hashable {
    /// The number of rows.
    case count
    /// The sum of numeric values (arrays of numbers and objects of numbers are summed member-wise).
    case sum
    /// `{"sum", "count", "min", "max", "sumsqr"}` of numeric values.
    case stats
    /// An estimate of the number of distinct keys (HyperLogLog, 2¹¹ registers, as CouchDB's).
    case approxCountDistinct
    /// The `n` (1…100) greatest values, greatest first, in view collation (`_top_N`).
    case top(Int)
    /// The `n` (1…100) least values, least first (`_bottom_N`).
    case bottom(Int)
    /// The value of the first row in key order (`_first`), of the last (`_last`).
    case first
    case last

    /// CouchDB's name of it: `_count`, `_sum`, `_stats`, `_approx_count_distinct`, `_top_N`, `_bottom_N`, `_first`, `_last`.
    public var rawValue: String {
        switch self {
        case .count: return "_count"
        case .sum: return "_sum"
        case .stats: return "_stats"
        case .approxCountDistinct: return "_approx_count_distinct"
        case .top(let n): return "_top_\(n)"
        case .bottom(let n): return "_bottom_\(n)"
        case .first: return "_first"
        case .last: return "_last"
        }
    }

    /// A design document's built-in reduce name, read as CouchDB reads it: a known name followed by anything
    /// (`"_sum\n"` and `"_statsorama"` are `_sum` and `_stats`); `_top_N`/`_bottom_N` with N in 1…100.
    /// - Throws: ``SetteeError`` `.badRequest` with CouchDB's reason for an unknown name or a bad rank.
    public static func parse(_ text: String) throws(SetteeError) -> BuiltInReduce {
        for (prefix, make) in [("_top_", BuiltInReduce.top), ("_bottom_", BuiltInReduce.bottom)] where text.hasPrefix(prefix) {
            let digits = text.dropFirst(prefix.count).prefix { $0.isNumber }
            guard !digits.isEmpty, let n = Int(digits) else { throw SetteeError(.badRequest, "invalid rank reducer") }
            guard (1...100).contains(n) else { throw SetteeError(.badRequest, "rank value must be between 1 and 100") }
            return make(n)
        }
        // Longest names first: `_count` is not read as a prefix of anything longer, but keep the rule general.
        let names: [(String, BuiltInReduce)] = [("_approx_count_distinct", .approxCountDistinct), ("_count", .count),
                                                ("_stats", .stats), ("_sum", .sum), ("_first", .first), ("_last", .last)]
        for (name, kind) in names where text.hasPrefix(name) { return kind }
        throw SetteeError(.badRequest, "`\(text)` is not a supported reduce function.")
    }

    public init?(rawValue: String) {
        switch rawValue {
        case "_count": self = .count
        case "_sum": self = .sum
        case "_stats": self = .stats
        case "_approx_count_distinct": self = .approxCountDistinct
        case "_first": self = .first
        case "_last": self = .last
        default:
            for (prefix, make) in [("_top_", BuiltInReduce.top), ("_bottom_", BuiltInReduce.bottom)] where rawValue.hasPrefix(prefix) {
                guard let n = Int(rawValue.dropFirst(prefix.count)), (1...100).contains(n) else { return nil }
                self = make(n)
                return
            }
            return nil
        }
    }
}

/// A view's reduce: a built-in, a closure, or a JavaScript function of a design document.
public enum Reducer: Sendable {
    case builtIn(BuiltInReduce)
    case custom(ReduceBlock)
    /// A JavaScript reduce function's source, run by the ``JavaScriptEngine``. It is given keys as CouchDB gives
    /// them, `[key, document id]` pairs (``usesDocumentIDs``).
    case javascript(String)

    /// The answer for a group from its (re)reduced value: `_approx_count_distinct` keeps a HyperLogLog sketch
    /// until then, and answers its estimate.
    public func finalize(_ value: JSON) -> JSON {
        if case .builtIn(.approxCountDistinct) = self { return BuiltInReducers.estimate(value) }
        return value
    }

    /// `{"reduce_overflow_error": reason}` for a reduce refused by `reduce_limit`, else nil.
    static func overflow(_ error: JavaScriptError) -> JSON? {
        if case .thrown(let name, let reason) = error, name == "reduce_overflow_error" {
            return ["reduce_overflow_error": .string(reason)]
        }
        return nil
    }

    /// Whether the keys it is given are `[key, document id]` pairs rather than keys.
    var usesDocumentIDs: Bool {
        if case .javascript = self { return true }
        return false
    }

    /// Reduces rows (`rereduce` false) or previous results (`rereduce` true).
    public func reduce(keys: [JSON], values: [JSON], rereduce: Bool) throws -> JSON {
        switch self {
        case .builtIn(let b): return try BuiltInReducers.reduce(b, keys: keys, values: values, rereduce: rereduce)
        case .custom(let block): return try block(keys, values, rereduce)
        case .javascript(let source):
            if rereduce {
                if let overflow = values.first(where: { $0["reduce_overflow_error"] != nil }) { return overflow }
                do {
                    return try JavaScriptEngine.shared.rereduce(functions: [source], values: values)[0]
                } catch {
                    if let overflow = Self.overflow(error) { return overflow }
                    throw error
                }
            }
            var rows: [(key: JSON, id: String, value: JSON)] = []
            rows.reserveCapacity(values.count)
            for (key, value) in zip(keys, values) {
                if case .array(let pair) = key, pair.count == 2 {
                    rows.append((pair[0], pair[1].stringValue ?? "", value))
                } else {
                    rows.append((key, "", value))
                }
            }
            do {
                return try JavaScriptEngine.shared.reduce(functions: [source], rows: rows)[0]
            } catch {
                // As CouchDB: the reduction becomes `{"reduce_overflow_error": reason}`, shown as the row's error.
                if let overflow = Self.overflow(error) { return overflow }
                throw error
            }
        }
    }
}

/// A map/reduce view of a collection (Couchbase Lite 1.x's `CBLView`): a persistent index of the rows its map
/// function emits, sorted by CouchDB's collation and kept current from the change feed.
///
/// ```swift
/// let phones = collection.view(named: "phones")
/// phones.setMapBlock({ doc, emit in
///     for phone in doc["phones"]?.arrayValue ?? [] { emit(phone, doc["name"]) }
/// }, version: "2")
/// let rows = try phones.createQuery().run()
/// ```
///
/// Map and reduce functions are not persistent: register them each time the app starts, before querying. Change
/// `version` whenever the functions change; the index is then rebuilt.
public final class View: Sendable {
    /// The view's name (unique within its collection).
    public let name: String
    /// The collection it indexes.
    public let collection: Collection

    init(name: String, collection: Collection) {
        self.name = name
        self.collection = collection
    }

    private var manager: ViewManager {
        get throws { try ViewManager.shared(for: collection.database) }
    }

    /// Registers the map function (no reduce). A version different from the stored index's rebuilds it.
    public func setMapBlock(_ map: @escaping MapBlock, version: String) {
        register(ViewDefinition(map: map, reduce: nil, version: version))
    }

    /// Registers map and reduce closures. `reduce` gets `rereduce` true when combining earlier results.
    public func setMapReduce(_ map: @escaping MapBlock, _ reduce: @escaping ReduceBlock, version: String) {
        register(ViewDefinition(map: map, reduce: .custom(reduce), version: version))
    }

    /// Registers a map function with a built-in reduce (`_count`, `_sum`, `_stats`).
    public func setMapReduce(_ map: @escaping MapBlock, _ reduce: BuiltInReduce, version: String) {
        register(ViewDefinition(map: map, reduce: .builtIn(reduce), version: version))
    }

    private func register(_ definition: ViewDefinition) {
        ViewManager.register(definition, view: name, collection: collection)
    }

    /// Whether a map function is registered.
    public var isRegistered: Bool { ViewManager.definition(view: name, collection: collection) != nil }

    /// A query over this view (all rows, ascending, updated first).
    public func createQuery() -> ViewQuery { ViewQuery(view: self) }

    /// Brings the index up to date with the change feed now.
    public func updateIndex() throws {
        try manager.update(view: name, collection: collection)
    }

    /// The index's state: rows, last sequence absorbed, whether it is full-text, map errors.
    public func info() throws -> ViewInfo {
        try manager.info(view: name, collection: collection)
    }

    /// Drops the index (the registered functions stay; the next query rebuilds it).
    public func deleteIndex() throws {
        try manager.deleteIndex(view: name, collection: collection)
    }

    /// Forgets the map/reduce functions and drops the index.
    public func delete() throws {
        ViewManager.unregister(view: name, collection: collection)
        try manager.deleteIndex(view: name, collection: collection)
    }

    /// The sum of numeric values (others count as 0): a reduce function's helper, as in Couchbase Lite.
    public static func totalValues(_ values: [JSON]) -> Double {
        values.reduce(0) { $0 + ($1.doubleValue ?? 0) }
    }
}

/// A view index's state.
public struct ViewInfo: Sendable {
    public let name: String
    /// The registered version the index was built with.
    public let version: String
    /// Rows in the index.
    public let rowCount: Int
    /// The last database sequence the index has absorbed.
    public let lastSequence: UInt64
    /// Whether the view emits ``TextKey``s.
    public let isFullText: Bool
    /// Documents whose map function threw (skipped) since the index was built.
    public let mapErrors: Int
    /// Bytes of the index's rows (its tables' and indexes' payload: CouchDB's `sizes.active`).
    public var dataSize: Int = 0
    /// Bytes of the pages the index's tables and indexes take in the database file (CouchDB's `sizes.file`).
    public var fileSize: Int = 0
    /// The version of the collation data keys are sorted with (ICU's).
    public var collatorVersion: String = ""
}

extension Collection {
    /// The view `name` of this collection (Couchbase Lite's `viewNamed`), created on first use.
    public func view(named name: String) -> View {
        View(name: name, collection: self)
    }

    /// The names of this collection's stored view indexes.
    public func views() throws -> [String] {
        try ViewManager.shared(for: database).storedViews(of: self)
    }
}
