import Foundation
import Synchronization
package import SetteeCore
package import SetteeStore

/// A Mango index: the special `_all_docs` index, or a json index — a view of a design document with
/// `"language": "query"`, stored as CouchDB stores it so it replicates with CouchDB and PouchDB:
///
/// ```json
/// {"_id": "_design/by-city", "language": "query",
///  "views": {"city-type": {"map": {"fields": {"city": "asc", "type": "asc"}, "partial_filter_selector": {}},
///                          "reduce": "_count", "options": {"def": {"fields": ["city", "type"]}}}}}
/// ```
///
/// Settee runs it on its view machinery (``ViewManager``): rows keyed `[city, type]` in CouchDB's collation, per
/// partition in a partitioned database, kept current from the change feed.
package struct MangoIndex: Sendable {
    public enum Kind: String, Sendable { case special, json }

    public let kind: Kind
    /// The design document's id (`_design/…`); nil for `_all_docs`.
    public let designDocumentID: String?
    public let name: String
    /// The columns, in order (`map.fields`'s keys) and their paths.
    public let columns: [String]
    let paths: [MangoSelector.FieldPath]
    /// `map.partial_filter_selector` (or the legacy `selector`), nil when empty.
    public let partialFilter: JSON?
    public let partitioned: Bool
    /// The view's definition as stored (`map`), for `def` in listings.
    let map: JSONObject
    /// The design view that runs it (nil for `_all_docs`).
    let design: DesignView?

    /// The `_all_docs` index every database has.
    static let allDocs = MangoIndex(kind: .special, designDocumentID: nil, name: "_all_docs", columns: ["_id"],
                                    paths: [["_id"]], partialFilter: nil, partitioned: false, map: [:], design: nil)

    /// `{"ddoc", "name", "type", ["partitioned",] "def"}` as `GET /{db}/_index` lists it.
    public var json: JSON {
        if kind == .special {
            return ["ddoc": .null, "name": "_all_docs", "type": "special", "def": ["fields": [["_id": "asc"]]]]
        }
        var def = JSONObject()
        for (key, value) in map {
            switch key {
            case "fields":
                if case .object(let fields) = value {
                    def["fields"] = .array(fields.map { .object(JSONObject([($0.key, $0.value)])) })
                }
            case "partial_filter_selector":
                if case .object(let o) = value, o.isEmpty { continue }
                def[key] = value
            default: def[key] = value
            }
        }
        return .object(JSONObject([("ddoc", .string(designDocumentID ?? "")), ("name", .string(name)),
                                   ("type", "json"), ("partitioned", .bool(partitioned)), ("def", .object(def))]))
    }

    /// The json indexes of a design document (none unless its language is `query`). Views without an object
    /// `map.fields` are skipped, as CouchDB skips them.
    static func all(in body: JSONObject, id: String, database: Database) -> [MangoIndex] {
        guard body["language"]?.stringValue == "query", case .object(let views)? = body["views"] else { return [] }
        let partitionedOption = body["options"]?["partitioned"]?.boolValue
        var out: [MangoIndex] = []
        for (name, definition) in views {
            guard case .object(let view) = definition, case .object(let map)? = view["map"],
                  case .object(let fields)? = map["fields"], !fields.isEmpty,
                  var design = try? DesignView(id: id, name: name, definition: definition, includeDesign: false)
            else { continue }
            design.partitionedOption = partitionedOption
            let filter: JSON? = {
                for key in ["partial_filter_selector", "selector"] {
                    if case .object(let o)? = map[key], !o.isEmpty { return .object(o) }
                }
                return nil
            }()
            out.append(MangoIndex(kind: .json, designDocumentID: id, name: name, columns: fields.map(\.key),
                                  paths: design.mangoFields ?? [], partialFilter: filter,
                                  partitioned: design.isPartitioned(in: database), map: map, design: design))
        }
        return out
    }

    /// Every index of the collection: `_all_docs` first, then json indexes by design document id and name. Read
    /// from the design documents again only after the database changed.
    public static func list(_ collection: Collection) throws -> [MangoIndex] {
        try listWithGeneration(collection).indexes
    }

    /// ``list(_:)`` with a number that changes only when the list does (indexes created, deleted or redefined):
    /// what a cached query plan is keyed by.
    public static func listWithGeneration(_ collection: Collection) throws -> (indexes: [MangoIndex], generation: Int) {
        let cache = collection.database.extensionObject("settee.mango-indexes.\(collection.id)") { IndexListCache() }
        let sequence = collection.database.lastSequence
        if let known = cache.value(at: sequence) { return known }
        let list = try read(collection)
        return cache.set(list, at: sequence)
    }

    private static func read(_ collection: Collection) throws -> [MangoIndex] {
        var options = Collection.AllDocsOptions()
        options.startKey = "_design/"
        options.endKey = "_design0"
        options.inclusiveEnd = false
        options.includeDocs = true
        options.countsRows = false
        let out = [allDocs]
        var json: [MangoIndex] = []
        for row in try collection.allDocs(options).rows where !row.deleted {
            guard let bytes = row.body, case .object(let body)? = try? JSON.parse(bytes) else { continue }
            json += all(in: body, id: row.id, database: collection.database)
        }
        json.sort { ($0.designDocumentID ?? "", $0.name) < ($1.designDocumentID ?? "", $1.name) }
        return out + json
    }

    // MARK: Creating and deleting

    /// A validated `POST /{db}/_index` body.
    public struct Creation: Sendable {
        public let designDocumentID: String
        public let name: String
        /// The view to store under `views.{name}`.
        public let view: JSON
        /// `partitioned` as requested (nil: not given).
        public let partitioned: Bool?
    }

    /// Validates a `POST /{db}/_index` body as CouchDB's `mango_opts:validate_idx_create/1` and `mango_idx_view`.
    /// - Throws: ``MangoError`` with CouchDB's error names (`invalid_index`, `invalid_key`, `invalid_sort_field`, …).
    public static func creation(_ body: JSON) throws -> Creation {
        guard case .object(let members) = body else {
            throw MangoError.badRequest("bad_request", "Request body must be a JSON object")
        }
        var index: JSON?
        var ddoc: String?
        var name: String?
        var partitioned: Bool?
        for (key, value) in members {
            switch key {
            case "index": index = value
            case "type":
                guard case .string(let type) = value else {
                    throw MangoError.badRequest("invalid_string", "Invalid string: \(value.jsonString)")
                }
                switch type {
                case "json": break
                case "text", "nouveau":
                    throw MangoError(.serviceUnavailable, "required index service unavailable", type)
                default: throw MangoError.badRequest("invalid_index", "Invalid type for index: \(type)")
                }
            case "ddoc", "name":
                guard case .string(let s) = value else {
                    throw MangoError.badRequest("invalid_string", "Invalid string: \(value.jsonString)")
                }
                if s.isEmpty { throw MangoError.badRequest("invalid_empty_string", "Index name or ddoc cannot be empty string") }
                if key == "ddoc" { ddoc = s } else { name = s }
            case "w":
                guard case .int(let w) = value, w > 0 else {
                    throw MangoError.badRequest("invalid_pos_integer", "\(value.jsonString) is not an integer greater than zero")
                }
            case "partitioned":
                guard case .bool(let b) = value else {
                    throw MangoError.badRequest("invalid_boolean", "Invalid boolean value: \(value.jsonString)")
                }
                partitioned = b
            default:
                throw MangoError.badRequest("invalid_key", "Invalid key \(key) for this request.")
            }
        }
        guard let index else { throw MangoError.badRequest("missing_required_key", "Missing required key: index") }
        guard case .object(let definition) = index else {
            throw MangoError.badRequest("invalid_index", "JSON indexes must be an object, not: \(index.jsonString)")
        }
        var fields: [(String, String)]?
        var filter: JSON = .object([:])
        for (key, value) in definition {
            switch key {
            case "fields": fields = try MangoQuery.sort(value).map { ($0.name, $0.descending ? "desc" : "asc") }
            case "partial_filter_selector":
                do { filter = try MangoSelector(value).normalizedJSON } catch { throw MangoQuery.selectorError(error) }
                if case .object(let o) = value, o.isEmpty { filter = .object([:]) }
            default:
                throw MangoError.badRequest("invalid_key", "Invalid key \(key) for this request.")
            }
        }
        guard let fields else { throw MangoError.badRequest("missing_required_key", "Missing required key: fields") }
        // CouchDB names an unnamed index (and its design document) by a hash of its definition: the same request
        // twice gives the same index.
        let digest = MD5.hex(body.canonicalBytes)
        var designID = ddoc ?? digest
        if !designID.hasPrefix("_design/") { designID = "_design/" + designID }
        if designID == "_design/" { throw MangoError.badRequest("illegal_docid", "Illegal document id `_design/`") }
        let map: JSON = ["fields": .object(JSONObject(fields.map { ($0.0, .string($0.1)) })), "partial_filter_selector": filter]
        let view: JSON = ["map": map, "reduce": "_count", "options": ["def": index]]
        return Creation(designDocumentID: designID, name: name ?? digest, view: view, partitioned: partitioned)
    }

    /// The design document `existing` (nil: none, or deleted) with the index added. Nil when it already holds this
    /// exact index (CouchDB answers `exists`).
    /// - Throws: ``MangoError`` for a design document of another language or another `partitioned` option.
    public static func adding(_ creation: Creation, to existing: JSONObject?) throws -> JSONObject? {
        var body = existing ?? ["language": "query"]
        if let existing {
            guard existing["language"]?.stringValue == "query" else {
                throw MangoError.badRequest("invalid_ddoc_lang",
                                            "Existing design doc has an invalid language: \((existing["language"] ?? .null).jsonString)")
            }
            if existing["options"]?["partitioned"]?.boolValue != creation.partitioned {
                throw MangoError.badRequest("invalid_partitioned_option",
                                            "Requested partitioned option does not match existing value on design document \(creation.designDocumentID)")
            }
        } else if let partitioned = creation.partitioned {
            body["options"] = ["partitioned": .bool(partitioned)]
        }
        var views: JSONObject = body["views"]?.objectValue ?? [:]
        if views[creation.name] == creation.view { return nil }
        views[creation.name] = creation.view
        body["views"] = .object(views)
        return body
    }

    /// The design document without the index `name`; nil when nothing remains but `{"language": "query"}` (the
    /// design document is then deleted). Throws `not_found` when it has no such index.
    public static func removing(_ name: String, from body: JSONObject) throws -> JSONObject? {
        guard body["language"]?.stringValue == "query", case .object(var views)? = body["views"],
              case .object(let view)? = views[name], case .object(let map)? = view["map"], case .object? = map["fields"]
        else { throw MangoError(.notFound, "not_found", "missing") }
        var out = body
        views[name] = nil
        out["views"] = views.isEmpty ? nil : .object(views)
        out["_id"] = nil
        out["_rev"] = nil
        if out.count == 1, out["language"] != nil { return nil }
        return out
    }
}

/// A collection's Mango indexes as of a database sequence.
final class IndexListCache: Sendable {
    private struct Entry {
        var sequence: UInt64
        var indexes: [MangoIndex]
        var signature: [String]
        var generation: Int
    }
    private let entry = Mutex<Entry?>(nil)

    func value(at sequence: UInt64) -> (indexes: [MangoIndex], generation: Int)? {
        entry.withLock { e in e.flatMap { $0.sequence == sequence ? ($0.indexes, $0.generation) : nil } }
    }

    /// Stores the list read at `sequence`; its generation moves on only if it differs from the last one.
    func set(_ indexes: [MangoIndex], at sequence: UInt64) -> (indexes: [MangoIndex], generation: Int) {
        let signature = indexes.map { "\($0.designDocumentID ?? "")\u{0}\($0.name)\u{0}\($0.partitioned)\u{0}\(JSON.object($0.map).jsonString)" }
        return entry.withLock { e in
            let generation = e.map { $0.signature == signature ? $0.generation : $0.generation + 1 } ?? 0
            e = Entry(sequence: sequence, indexes: indexes, signature: signature, generation: generation)
            return (indexes, generation)
        }
    }
}
