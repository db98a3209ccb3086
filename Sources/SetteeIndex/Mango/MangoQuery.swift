package import SetteeCore

/// A Mango query (the body of `POST /{db}/_find` and `_explain`), validated as CouchDB's `mango_opts:validate_find/1`
/// validates it: every member known, each of the right type, defaults filled in.
package struct MangoQuery: Sendable {
    /// One `sort` field and its direction.
    public struct SortField: Sendable, Equatable {
        public let name: String
        public let path: MangoSelector.FieldPath
        public let descending: Bool
    }

    public let selector: MangoSelector
    /// The selector as the client sent it.
    public let selectorJSON: JSON
    /// `use_index`: a design document (without `_design/`), optionally with an index name.
    public var useIndex: [String] = []
    public var bookmark: String?
    public var limit = 25
    public var skip = 0
    public var sort: [SortField] = []
    /// `fields`: the members returned (dotted paths); empty: whole documents.
    public var fields: [String] = []
    /// The partition queried (`/{db}/_partition/{p}/_find`, or the body's `partition`); nil: the whole database.
    public var partition: String?
    public var r = 1
    public var conflicts = false
    public var update = true
    public var stable = false
    /// `stale: "ok"` (CouchDB's older spelling of `update: false, stable: true`).
    public var stale = false
    public var executionStats = false
    public var allowFallback = true
    /// Only documents this accepts (by id: a reader's channels on a database with a sync function); skip, limit
    /// and bookmarks count the documents it accepts.
    package var documentFilter: (@Sendable (String) -> Bool)?

    /// Whether the sort is descending (all fields share one direction).
    public var descending: Bool { sort.first?.descending ?? false }

    /// Parses and validates a `_find` body.
    /// - Throws: ``MangoError`` with CouchDB's error and reason for a missing selector, an unknown member, a value of
    ///   the wrong type, a bad selector, sort or field list.
    public init(_ body: JSON) throws {
        guard case .object(let members) = body else {
            throw MangoError.badRequest("bad_request", "Request body must be a JSON object")
        }
        guard let selectorJSON = members["selector"] else {
            throw MangoError.badRequest("missing_required_key", "Missing required key: selector")
        }
        guard case .object = selectorJSON else {
            throw MangoError.badRequest("invalid_selector_json", "Selector must be a JSON object, not: \(selectorJSON.jsonString)")
        }
        self.selectorJSON = selectorJSON
        do { selector = try MangoSelector(selectorJSON) } catch { throw MangoQuery.selectorError(error) }
        for (key, value) in members {
            switch key {
            case "selector": continue
            case "use_index": useIndex = try MangoQuery.useIndex(value)
            case "bookmark":
                switch value {
                case .null: bookmark = nil
                case .string(let s): bookmark = s.isEmpty ? nil : s
                default: throw MangoError.badRequest("invalid_bookmark", "Invalid bookmark value: \(value.jsonString)")
                }
            case "limit": limit = try MangoQuery.nonNegative(value)
            case "skip": skip = try MangoQuery.nonNegative(value)
            case "sort": sort = try MangoQuery.sort(value)
            case "fields": fields = try MangoQuery.fields(value)
            case "partition":
                guard case .string(let p) = value else { throw MangoError.badRequest("invalid_value", "Invalid value for partition: \(value.jsonString)") }
                if !p.isEmpty {
                    do { try DocumentIDs.validatePartition(p) } catch { throw MangoError.badRequest("bad_request", error.reason) }
                    partition = p
                }
            case "r":
                guard case .int(let n) = value, n > 0 else {
                    throw MangoError.badRequest("invalid_pos_integer", "\(value.jsonString) is not an integer greater than zero")
                }
                r = Int(n)
            case "conflicts": conflicts = try MangoQuery.boolean(value)
            case "update": update = try MangoQuery.boolean(value)
            case "stable": stable = try MangoQuery.boolean(value)
            case "execution_stats": executionStats = try MangoQuery.boolean(value)
            case "allow_fallback": allowFallback = try MangoQuery.boolean(value)
            case "stale":
                switch value {
                case .string("ok"): stale = true
                case .bool(false): stale = false
                default: throw MangoError.badRequest("invalid_value", "Invalid value for stale: \(value.jsonString)")
                }
            default:
                throw MangoError.badRequest("invalid_key", "Invalid key \(key) for this request.")
            }
        }
    }

    /// CouchDB's error names for a selector's parse errors (the reasons are already CouchDB's).
    static func selectorError(_ error: SetteeError) -> MangoError {
        let reason = error.reason
        let name: String
        if reason.hasPrefix("Invalid operator") { name = "invalid_operator" }
        else if reason.hasPrefix("Bad argument") { name = "bad_arg" }
        else if reason.hasPrefix("Unsupported operator") { name = "not_supported" }
        else if reason.hasPrefix("Invalid field name") { name = "invalid_field_name" }
        else if reason.hasPrefix("Selector must be") { name = "invalid_selector_json" }
        else { name = "invalid_selector" }
        return MangoError.badRequest(name, reason)
    }

    static func nonNegative(_ value: JSON) throws -> Int {
        guard case .int(let n) = value, n >= 0, let i = Int(exactly: n) else {
            throw MangoError.badRequest("invalid_non_neg_integer", "\(value.jsonString) is not an integer greater than or equal to zero")
        }
        return i
    }

    static func boolean(_ value: JSON) throws -> Bool {
        guard case .bool(let b) = value else {
            throw MangoError.badRequest("invalid_boolean", "Invalid boolean value: \(value.jsonString)")
        }
        return b
    }

    /// `"ddoc"`, `"_design/ddoc"`, `"ddoc/name"`, `"_design/ddoc/name"`, `["ddoc"]` or `["ddoc", "name"]`.
    static func useIndex(_ value: JSON) throws -> [String] {
        func invalid() -> MangoError { MangoError.badRequest("invalid_index_name", "Invalid index name: \(value.jsonString)") }
        switch value {
        case .null: return []
        case .string(let s):
            let parts = s.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            switch parts.count {
            case 1: return parts
            case 2: return parts[0] == "_design" ? [parts[1]] : parts
            case 3 where parts[0] == "_design": return [parts[1], parts[2]]
            default: throw invalid()
            }
        case .array(let items):
            let names = items.compactMap(\.stringValue)
            guard names.count == items.count, names.count <= 2 else { throw invalid() }
            if let first = names.first, first.hasPrefix("_design/") {
                return [String(first.dropFirst("_design/".count))] + names.dropFirst()
            }
            return names
        default: throw invalid()
        }
    }

    /// `["a", {"b": "desc"}, …]`, one direction for all (CouchDB's `mango_sort:new/1`).
    static func sort(_ value: JSON) throws -> [SortField] {
        guard case .array(let items) = value else {
            throw MangoError.badRequest("invalid_sort_json", "Sort must be an array of sort specs, not: \(value.jsonString)")
        }
        var out: [SortField] = []
        for item in items {
            let name: String, descending: Bool
            switch item {
            case .string(let s):
                (name, descending) = (s, false)
            case .object(let o) where o.count == 1:
                guard case .string(let dir) = o[0].value, dir == "asc" || dir == "desc" else {
                    throw MangoError.badRequest("invalid_sort_dir", "Invalid sort direction: \(o[0].value.jsonString)")
                }
                (name, descending) = (o[0].key, dir == "desc")
            default:
                throw MangoError.badRequest("invalid_sort_field", "Invalid sort field: \(item.jsonString)")
            }
            let path: MangoSelector.FieldPath
            do { path = try MangoSelector.fieldPath(name) } catch {
                throw MangoError.badRequest("invalid_sort_field", "Invalid sort field: \(item.jsonString)")
            }
            out.append(SortField(name: name, path: path, descending: descending))
        }
        if Set(out.map(\.descending)).count > 1 {
            throw MangoError.badRequest("unsupported_mixed_sort", "Sorts currently only support a single direction for all fields.")
        }
        return out
    }

    static func fields(_ value: JSON) throws -> [String] {
        guard case .array(let items) = value else {
            throw MangoError.badRequest("invalid_fields", "Fields must be an array of strings, not: \(value.jsonString)")
        }
        return try items.map { item in
            guard case .string(let s) = item, (try? MangoSelector.fieldPath(s)) != nil else {
                throw MangoError.badRequest("invalid_field", "Invalid JSON for field spec: \(item.jsonString)")
            }
            return s
        }
    }
}
