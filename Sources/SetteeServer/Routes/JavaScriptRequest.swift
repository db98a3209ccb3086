import Foundation
import HTTPTypes
import SetteeCore
import SetteeIndex
import SetteeStore

/// CouchDB's request object (`req`) as design functions see it: filters, shows, lists, updates and rewrites get it.
enum JavaScriptRequest {
    /// `req` for a call: `method`, `path` (segments), `raw_path`, `requested_path`, `query` (strings), `headers`,
    /// `body` (the raw body, or `"undefined"`), `form` (a form-encoded body's fields), `cookie`, `peer`, `userCtx`,
    /// `secObj`, `info` (the database's `db_name`, `update_seq`, `doc_count`), `id` (a document's id, if any) and `uuid`.
    static func make(_ call: Call, database: Database?, body: [UInt8]?, id: String? = nil,
                     security: JSON = .object([:])) -> JSON {
        var query = JSONObject()
        for (k, v) in call.query.values.sorted(by: { $0.key < $1.key }) { query[k] = .string(v) }
        var headers = JSONObject()
        // HTTP/1.1's Host travels as the request's authority in HTTPTypes.
        if let host = call.request.head.authority { headers["Host"] = .string(host) }
        for field in call.request.headers {
            let name = field.name.canonicalName.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: "-")
            headers[name] = .string(field.value)
        }
        var cookies = JSONObject()
        if let cookie = call.header(.cookie) {
            for part in cookie.split(separator: ";") {
                let kv = part.split(separator: "=", maxSplits: 1)
                if kv.count == 2 { cookies[kv[0].trimmingCharacters(in: .whitespaces)] = .string(String(kv[1])) }
            }
        }
        var form = JSONObject()
        let contentType = call.header(.contentType)?.lowercased() ?? ""
        if let body, contentType.hasPrefix("application/x-www-form-urlencoded") {
            for (k, v) in QueryOptions(String(decoding: body, as: UTF8.self)).values { form[k] = .string(v) }
        }
        var userCtx = call.userCtx.json.objectValue ?? [:]
        userCtx["db"] = database.map { .string($0.name) } ?? .null
        let rawPath = call.request.uri.description
        var info = JSONObject()
        if let database {
            info["db_name"] = .string(database.name)
            info["update_seq"] = .int(Int64(database.lastSequence))
        }
        var req: JSONObject = [
            "info": .object(info),
            "uuid": .string(Hex.random(bytes: 16)),
            "id": id.map(JSON.string) ?? .null,
            "method": .string(call.method.rawValue),
            "requested_path": .array(call.segments.map(JSON.string)),
            "path": .array(call.segments.map(JSON.string)),
            "raw_path": .string(rawPath),
            "query": .object(query),
            "headers": .object(headers),
            "body": body.map { $0.isEmpty ? .string("undefined") : .string(String(decoding: $0, as: UTF8.self)) } ?? .string("undefined"),
            "peer": .string(call.remoteAddress),
            "form": .object(form),
            "cookie": .object(cookies),
            "userCtx": .object(userCtx),
            "secObj": security,
        ]
        if call.method == .get || call.method == .head { req["body"] = .string("undefined") }
        return .object(req)
    }
}

/// A `_changes` filter that runs in JavaScript: `filter=ddoc/name` (a design document's `filters.name`) or
/// `filter=_view&view=ddoc/name` (documents for which the view's map function emits anything).
struct JavaScriptFilter: Sendable {
    let designDocumentID: String
    let revision: String
    let designDocument: JSON
    let path: [String]
    let request: JSON

    /// The filter `ddoc/name` of `collection`, with the request it is given.
    /// - Throws: 404 when the design document or the function is missing, as CouchDB.
    static func resolve(_ spec: String, view: Bool, collection: SetteeStore.Collection, request: JSON) throws -> JavaScriptFilter {
        let parts = spec.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw CouchError.badRequest(view ? "`view` must be of the form `designname/viewname`"
                                             : "`filter` must be of the form `designname/filtername`")
        }
        let id = "_design/" + parts[0]
        guard let record = try collection.record(id: id), !record.deleted,
              case .object(var body) = try JSON.parse(record.body) else {
            throw CouchError.notFound("missing")
        }
        if view {
            guard case .object(let views)? = body["views"], case .object(let v)? = views[parts[1]], v["map"]?.stringValue != nil else {
                throw CouchError.notFound("missing json key: \(parts[1])")
            }
        } else {
            guard case .object(let filters)? = body["filters"], filters[parts[1]] != nil else {
                throw CouchError.notFound("missing json key: \(parts[1])")
            }
        }
        body["_id"] = .string(id)
        body["_rev"] = .string(record.revID.description)
        return JavaScriptFilter(designDocumentID: id, revision: record.revID.description, designDocument: .object(body),
                                path: view ? ["views", parts[1], "map"] : ["filters", parts[1]], request: request)
    }

    /// Whether `document` (with `_id`, `_rev`, and `_deleted` when deleted) passes.
    func passes(_ document: JSON) throws -> Bool {
        try JavaScriptEngine.shared.filter(designDocumentID: designDocumentID, revision: revision,
                                           designDocument: designDocument, path: path, documents: [document],
                                           request: request).first ?? false
    }
}
