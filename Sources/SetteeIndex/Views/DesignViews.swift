import SetteeCore
import SetteeSQLPP
import SetteeStore

/// A view declared in a design document with SQL++ expressions — how views are defined over HTTP, where no Swift
/// closure exists:
///
/// ```json
/// {"_id": "_design/app",
///  "views": {"by_type_name": {"map": {"key": "[type, name]", "value": "phone", "where": "type = 'person'"},
///                             "reduce": "_count"},
///            "text": {"map": {"text": "body", "value": "title"}}}}
/// ```
///
/// Each document passing `where` emits one row: `key` (a missing key emits nothing) and `value` (missing: null);
/// `text` instead of `key` makes a full-text view. `reduce` is `_count`, `_sum` or `_stats`. Design documents are not
/// mapped unless the design document says `"options": {"include_design": true}`, as in CouchDB. JavaScript map and
/// reduce functions (strings) are refused. The view's version is its definition's JSON, so editing the design
/// document rebuilds it.
public struct DesignView: Sendable {
    /// The design document's id (`_design/…`) and the view's name in it.
    public let designDocumentID: String
    public let name: String
    public let key: SQLExpression?
    public let text: SQLExpression?
    public let value: SQLExpression?
    public let whereClause: SQLExpression?
    public let reduce: BuiltInReduce?
    /// Whether design documents are mapped too (the design document's `"options": {"include_design": true}`).
    public let includeDesign: Bool
    /// The definition's canonical JSON: the registered version.
    public let version: String

    /// The view's internal name among the collection's views: `_design/{ddoc}/{view}`.
    public var viewName: String { designDocumentID + "/" + name }

    /// The SQL++ views of a design document (an empty list when it has no `views`).
    /// - Throws: ``SetteeError`` `.badRequest` with a reason naming the view for JavaScript functions, unknown
    ///   reduces, missing keys and expressions that don't parse.
    public static func all(in body: JSONObject, id: String) throws -> [DesignView] {
        guard let views = body["views"] else { return [] }
        guard case .object(let members) = views else {
            throw SetteeError(.badRequest, "`views` must be an object of view definitions")
        }
        let include = try includeDesign(body)
        return try members.map { try DesignView(id: id, name: $0.key, definition: $0.value, includeDesign: include) }
    }

    /// The view `name` of a design document.
    /// - Throws: `.notFound` (`missing_named_view`) when it has none of that name; the errors of ``all(in:id:)``.
    public static func named(_ name: String, in body: JSONObject, id: String) throws -> DesignView {
        guard case .object(let views)? = body["views"], let definition = views[name] else {
            throw SetteeError(.notFound, "missing_named_view")
        }
        return try DesignView(id: id, name: name, definition: definition, includeDesign: try includeDesign(body))
    }

    /// The design document's `options.include_design` (CouchDB's switch for mapping design documents too).
    static func includeDesign(_ body: JSONObject) throws -> Bool {
        switch body["options"] {
        case nil, .null?: return false
        case .object(let options)?:
            switch options["include_design"] {
            case nil, .null?: return false
            case .bool(let b)?: return b
            default: throw SetteeError(.badRequest, "`options.include_design` must be true or false")
            }
        default: throw SetteeError(.badRequest, "`options` must be an object")
        }
    }

    init(id: String, name: String, definition: JSON, includeDesign: Bool) throws {
        self.includeDesign = includeDesign
        func invalid(_ why: String) -> SetteeError {
            SetteeError(.badRequest, "view '\(name)' of \(id): \(why)")
        }
        designDocumentID = id
        self.name = name
        guard case .object(let view) = definition else { throw invalid("a view must be an object with a `map`") }
        switch view["map"] {
        case .string?:
            throw invalid("JavaScript map functions are not supported by Settee. Declare the view with SQL++ expressions: {\"map\": {\"key\": \"[type, name]\", \"value\": \"phone\", \"where\": \"type = 'person'\"}}")
        case .object(let map)?:
            func expression(_ member: String) throws -> SQLExpression? {
                switch map[member] {
                case nil, .null?: return nil
                case .string(let text)?:
                    do { return try SQLPPParser.parseExpression(text) } catch {
                        throw invalid("`\(member)` does not parse: \(error.reason)")
                    }
                default: throw invalid("`map.\(member)` must be a SQL++ expression in a string")
                }
            }
            for member in map.keys where !["key", "value", "where", "text"].contains(member) {
                throw invalid("unknown member `map.\(member)` (expected key, text, value, where)")
            }
            key = try expression("key")
            text = try expression("text")
            value = try expression("value")
            whereClause = try expression("where")
            if (key == nil) == (text == nil) { throw invalid("the map needs exactly one of `key` and `text`") }
        default:
            throw invalid("a view needs a `map`: {\"key\": \"…\", \"value\": \"…\", \"where\": \"…\"}")
        }
        switch view["reduce"] {
        case nil, .null?: reduce = nil
        case .string(let r)?:
            guard let builtIn = BuiltInReduce(rawValue: r) else {
                throw invalid("reduce must be one of _count, _sum, _stats (JavaScript reduce functions are not supported), got \(r)")
            }
            if text != nil { throw invalid("a full-text view can't have a reduce") }
            reduce = builtIn
        default: throw invalid("reduce must be one of _count, _sum, _stats")
        }
        version = String(decoding: definition.canonicalBytes, as: UTF8.self) + (includeDesign ? "+design" : "")
    }

    /// The map function the expressions describe.
    var map: MapBlock {
        let key = self.key, text = self.text, value = self.value, condition = self.whereClause
        return { document, emit in
            let evaluator = Evaluator()
            let source = SourceDocument(id: document["_id"]?.stringValue ?? "", revisionID: document["_rev"]?.stringValue ?? "",
                                        body: .object(document))
            if let condition, try !evaluator.isTrue(condition, in: Row(primaryName: "_", primary: source)) { return }
            let v: JSON? = try value.map { try evaluator.evaluate($0, document: source) ?? .null }
            if let text {
                if case .string(let s)? = try evaluator.evaluate(text, document: source) { emit(TextKey(s), v) }
            } else if let key, let k = try evaluator.evaluate(key, document: source) {
                emit(k, v)
            }
        }
    }

    /// Registers this view's functions on `collection` and returns it, ready to query.
    public func register(on collection: Collection) -> View {
        let view = collection.view(named: viewName)
        let definition = ViewDefinition(map: map, reduce: reduce.map(Reducer.builtIn), version: version,
                                        includeDesign: includeDesign)
        ViewManager.register(definition, view: viewName, collection: collection)
        return view
    }

    /// Drops the stored indexes of design views whose design document no longer declares them, or declares them
    /// differently (CouchDB's `_view_cleanup`). Returns how many were dropped.
    public static func cleanUp(collection: Collection) throws -> Int {
        let manager = try ViewManager.shared(for: collection.database)
        var dropped = 0
        for name in manager.storedViews(of: collection) where name.hasPrefix("_design/") {
            // `_design/{ddoc}/{view}`
            let parts = name.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
            var keep = false
            if parts.count == 3, let record = try collection.record(id: "_design/" + parts[1]), !record.deleted,
               case .object(let body) = try JSON.parse(record.body),
               let design = try? DesignView.named(String(parts[2]), in: body, id: "_design/" + parts[1]),
               manager.stored(view: name, collection: collection)?.version == design.version {
                keep = true
            }
            if !keep {
                try manager.deleteIndex(view: name, collection: collection)
                dropped += 1
            }
        }
        return dropped
    }
}
