import Foundation
package import SetteeCore
package import SetteeSQLPP
package import SetteeStore

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
/// mapped unless the design document says `"options": {"include_design": true}`, as in CouchDB.
///
/// A `map` that is a string is CouchDB's JavaScript map function (`"function(doc) { emit(doc.type, 1) }"`), run by
/// the ``JavaScriptEngine``; its `reduce` is then a built-in (`_count`, `_sum`, `_stats`, `_approx_count_distinct`)
/// or a JavaScript reduce function, and `require()` finds modules under the design document's `views.lib`. The
/// view's version is its definition's JSON (and `views.lib`), so editing the design document rebuilds it.
package struct DesignView: Sendable {
    /// The design document's id (`_design/…`) and the view's name in it.
    public let designDocumentID: String
    public let name: String
    public let key: SQLExpression?
    public let text: SQLExpression?
    public let value: SQLExpression?
    public let whereClause: SQLExpression?
    public let reduce: BuiltInReduce?
    /// A Mango json index's columns (a view of a `language: "query"` design document, `map.fields`): each document
    /// having every field emits `[value, …]`.
    public let mangoFields: [MangoSelector.FieldPath]?
    /// A Mango index's `partial_filter_selector`: only documents it matches are indexed.
    public let mangoFilter: MangoSelector?
    /// The JavaScript map function's source, for a JavaScript view.
    public let javascriptMap: String?
    /// The JavaScript reduce function's source, when the reduce is one.
    public let javascriptReduce: String?
    /// The design document's `views.lib` (CommonJS modules for `require` in map functions).
    public let library: JSON?
    /// The view's `options.collation` is `"raw"`: keys sort in Erlang term order instead of CouchDB's collation.
    public let rawCollation: Bool
    /// The design document's `options.local_seq`: documents are mapped with their `_local_seq`.
    public var localSeq = false
    /// Whether design documents are mapped too (the design document's `"options": {"include_design": true}`).
    public let includeDesign: Bool
    /// The design document's `options.partitioned` (nil: the database's own setting applies).
    public var partitionedOption: Bool?
    /// Whether this view is partitioned in `database`: a partitioned database's views are, unless the design
    /// document says `"options": {"partitioned": false}` (a global view).
    public func isPartitioned(in database: Database) -> Bool {
        database.isPartitioned && (partitionedOption ?? true)
    }
    /// The version registered for this view in `database` (a partitioned view's rows are laid out differently).
    public func version(in database: Database) -> String {
        version + (isPartitioned(in: database) ? "+partitioned" : "")
    }
    /// The definition's canonical JSON: the registered version (with the design document's options that change
    /// what is emitted).
    public var version: String { definitionVersion + (localSeq ? "+local_seq" : "") }
    private let definitionVersion: String

    /// The view's internal name among the collection's views: `_design/{ddoc}/{view}`.
    public var viewName: String { designDocumentID + "/" + name }

    /// The SQL++ views of a design document (an empty list when it has no `views`).
    /// - Throws: ``SetteeError`` `.badRequest` with a reason naming the view for JavaScript functions, unknown
    ///   reduces, missing keys and expressions that don't parse.
    public static func all(in body: JSONObject, id: String, checkingLanguage: Bool = true) throws -> [DesignView] {
        guard let views = body["views"] else { return [] }
        guard case .object(let members) = views else {
            throw SetteeError(.badRequest, "`views` must be an object of view definitions")
        }
        let include = try includeDesign(body)
        if checkingLanguage { try checkLanguage(body) }
        let localSeq = body["options"]?["local_seq"]?.boolValue ?? false
        return try members.filter { $0.key != "lib" }.map {
            var view = try DesignView(id: id, name: $0.key, definition: $0.value, includeDesign: include, library: library(body))
            view.localSeq = localSeq
            view.partitionedOption = body["options"]?["partitioned"]?.boolValue
            return view
        }
    }

    /// The view `name` of a design document.
    /// - Throws: `.notFound` (`missing_named_view`) when it has none of that name; the errors of ``all(in:id:)``.
    public static func named(_ name: String, in body: JSONObject, id: String) throws -> DesignView {
        guard case .object(let views)? = body["views"], let definition = views[name], name != "lib" else {
            throw SetteeError(.notFound, "missing_named_view")
        }
        try checkLanguage(body)
        var view = try DesignView(id: id, name: name, definition: definition, includeDesign: try includeDesign(body),
                                  library: library(body))
        view.localSeq = body["options"]?["local_seq"]?.boolValue ?? false
        view.partitionedOption = body["options"]?["partitioned"]?.boolValue
        return view
    }

    /// Whether a design document's views are JavaScript functions (the first view's `map` is a string).
    public static func isJavaScript(_ body: JSONObject) -> Bool {
        guard case .object(let views)? = body["views"] else { return true }
        return !views.contains { $0.key != "lib" && $0.value["map"]?.objectValue != nil }
    }

    /// `views.lib`, the modules JavaScript map functions may `require`.
    static func library(_ body: JSONObject) -> JSON? {
        guard case .object(let views)? = body["views"], let lib = views["lib"], case .object = lib else { return nil }
        return lib  // `add_lib` takes `views.lib` itself; `require('views/lib/…')` resolves in it
    }

    /// Only JavaScript (the default) runs here; CouchDB's Erlang query server and other languages don't.
    static func checkLanguage(_ body: JSONObject) throws {
        switch body["language"] {
        case nil, .null?, .string("javascript")?, .string("query")?: return
        case .string(let other)?:
            throw SetteeError(.badRequest, "unknown_query_language: \(other) (this node runs JavaScript design functions)")
        default:
            throw SetteeError(.badRequest, "`language` must be a string")
        }
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

    init(id: String, name: String, definition: JSON, includeDesign: Bool, library: JSON? = nil) throws {
        self.includeDesign = includeDesign
        func invalid(_ why: String) -> SetteeError {
            SetteeError(.badRequest, "view '\(name)' of \(id): \(why)")
        }
        designDocumentID = id
        self.name = name
        guard case .object(let view) = definition else { throw invalid("a view must be an object with a `map`") }
        rawCollation = view["options"]?["collation"]?.stringValue == "raw"
        switch view["map"] {
        case .string(let source)?:
            javascriptMap = source
            self.library = library
            key = nil
            text = nil
            value = nil
            whereClause = nil
            mangoFields = nil
            mangoFilter = nil
        case .object(let map)? where map["fields"] != nil:
            // A Mango json index, as CouchDB stores one: {"fields": {"a": "asc", …}, "partial_filter_selector": {…}}.
            javascriptMap = nil
            self.library = nil
            (key, text, value, whereClause) = (nil, nil, nil, nil)
            guard case .object(let fields)? = map["fields"], !fields.isEmpty else {
                throw invalid("`map.fields` of a Mango index must be a non-empty object of field: \"asc\"|\"desc\"")
            }
            do {
                mangoFields = try fields.map { try MangoSelector.fieldPath($0.key) }
                switch map["partial_filter_selector"] {
                case nil, .null?: mangoFilter = nil
                case .object(let o)? where o.isEmpty: mangoFilter = nil
                case let selector?: mangoFilter = try MangoSelector(selector)
                }
            } catch {
                throw invalid((error as? SetteeError)?.reason ?? "\(error)")
            }
        case .object(let map)?:
            mangoFields = nil
            mangoFilter = nil
            javascriptMap = nil
            self.library = nil
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
            throw invalid("a view needs a `map`: a JavaScript function, or SQL++ expressions {\"key\": \"…\", \"value\": \"…\", \"where\": \"…\"}")
        }
        switch view["reduce"] {
        case nil, .null?:
            reduce = nil
            javascriptReduce = nil
        case .string(let r)? where r.hasPrefix("_"):
            let builtIn: BuiltInReduce
            do { builtIn = try BuiltInReduce.parse(r) } catch { throw SetteeError(.badRequest, error.reason) }
            if text != nil { throw invalid("a full-text view can't have a reduce") }
            reduce = builtIn
            javascriptReduce = nil
        case .string(let source)?:
            guard javascriptMap != nil else {
                throw invalid("reduce must be one of _count, _sum, _stats (a JavaScript reduce needs a JavaScript map), got \(source)")
            }
            reduce = nil
            javascriptReduce = source
        default: throw invalid("reduce must be a string: a built-in (_count, _sum, _stats) or a JavaScript function")
        }
        definitionVersion = String(decoding: definition.canonicalBytes, as: UTF8.self) + (includeDesign ? "+design" : "")
            + (rawCollation ? "+raw" : "")
            + (self.library.map { "+lib:" + String(decoding: $0.canonicalBytes, as: UTF8.self) } ?? "")
    }

    /// The map function the expressions (or the JavaScript function) describe.
    var map: MapBlock {
        if let source = javascriptMap {
            let library = self.library
            return { document, emit in
                let rows = try JavaScriptEngine.shared.map(functions: [source], library: library, document: .object(document))
                for (key, value) in rows[0] { emit(key, value) }
            }
        }
        if let fields = mangoFields {
            let filter = mangoFilter
            let paths = fields.map(MangoSelector.CompiledPath.init)
            return { document, emit in
                let doc = JSON.object(document)
                if let filter, !ViewCollator.matches(filter, doc) { return }
                var values: [JSON] = []
                values.reserveCapacity(paths.count)
                for path in paths {
                    guard let v = path.value(in: doc) else { return }
                    values.append(v)
                }
                emit(.array(values), nil)
            }
        }
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

    /// The view's reduce, if it has one.
    public var reducer: Reducer? {
        if let javascriptReduce { return .javascript(javascriptReduce) }
        return reduce.map(Reducer.builtIn)
    }

    /// Registers this view's functions on `collection` and returns it, ready to query.
    public func register(on collection: Collection) -> View {
        let view = collection.view(named: viewName)
        var definition = ViewDefinition(map: map, reduce: reducer, version: version(in: collection.database),
                                        includeDesign: includeDesign)
        definition.rawCollation = rawCollation
        definition.partitioned = isPartitioned(in: collection.database)
        if let fields = mangoFields {
            // A Mango index reads its fields and its filter's: parse only those members of each document.
            var members = Set(fields.compactMap(\.first))
            for path in mangoFilter?.fields ?? [] { if let first = path.first { members.insert(first) } }
            members.subtract(["_id", "_rev"])
            definition.members = JSONMemberSelector(members)
        }
        if let source = javascriptMap {
            let library = self.library
            definition.batchMap = { documents in
                try JavaScriptEngine.shared.mapBatch(functions: [source], library: library, serializedDocuments: documents)
                    .map { perFunction in perFunction[0].map { (key: $0.key, value: Optional($0.value)) } }
            }
        }
        definition.localSeq = localSeq
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
               manager.stored(view: name, collection: collection)?.version == design.version(in: collection.database) {
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
