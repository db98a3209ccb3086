import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore
import SetteeIndex
import SetteeStore

/// `/{db}/_design/{ddoc}/_rewrite/{path}`: a design document's `rewrites` — a JavaScript function of the request
/// (CouchDB 3's form) or a list of `{from, to, method, query}` rules — maps the request to another path of the
/// node, which is then served as if requested (paths are relative to the design document; `..` climbs out of
/// it). A rewrite that leads to another rewrite counts against a limit of 100, as CouchDB's `rewrite_limit`.
extension CouchResponder {
    static let rewriteLimit = 100

    func rewrite(_ call: inout Call, _ target: Keyspace, designID: String, depth: Int = 0) async throws -> Response {
        let s = call.segments
        guard depth < Self.rewriteLimit else {
            throw CouchError.badRequest("Exceeded rewrite recursion limit")
        }
        let (db, c) = try target.open(call.node)
        let hasBody = call.method != .get && call.method != .head
        let body: [UInt8] = hasBody ? try await call.bodyBytes() : []
        let security = (try? db.metadata("security")) ?? SecurityObject.adminOnlyJSON
        let request = JavaScriptRequest.make(call, database: db, body: hasBody ? body : nil, security: security)
        let design = try await blocking { try DesignFunctionRoutes.Design.load(c, id: designID) }
        var rewritten: JSONObject
        var fromRules = false
        switch design.body["rewrites"] {
        case .string?:
            let answer = try await blocking {
                try JavaScriptEngine.shared.call(designDocumentID: design.id, revision: design.revision,
                                                 designDocument: design.json, path: ["rewrites"], arguments: [request])
            }
            if let error = JavaScriptError.from(answer: answer) { throw error }
            guard case .array(let items) = answer, let kind = items.first?.stringValue else {
                throw CouchError(.internalServerError, "rewrite_error", "bad rewrite: \(answer.jsonString.prefix(200))")
            }
            if kind == "no_dispatch_rule" { throw CouchError(.notFound, "not_found", "Invalid path.") }
            guard kind == "ok", items.count == 2 else {
                throw CouchError(.internalServerError, "rewrite_error", "bad rewrite: \(answer.jsonString.prefix(200))")
            }
            switch items[1] {
            case .string(let path): rewritten = ["path": .string(path)]
            case .object(let o): rewritten = o
            default: throw CouchError(.notFound, "not_found", "Invalid path.")
            }
        case .array(let rules)?:
            let rest = Array(s.dropFirst(4))
            try RewriteRules.checkClimbing(rules, secure: call.node.configuration.secureRewrites)
            guard let match = RewriteRules.match(rules, path: rest, method: call.method.rawValue, query: call.query.values) else {
                throw CouchError(.notFound, "not_found", "Invalid path.")
            }
            rewritten = match
            fromRules = true
        default:
            throw CouchError(.notFound, "not_found", "Invalid path.")
        }
        // An early response: the function answered the request itself.
        if let code = rewritten["code"]?.intValue {
            return try DesignFunctionRoutes.render(.object(rewritten), defaultType: "text/html; charset=utf-8",
                                                   status: HTTPResponse.Status(code: Int(code)))
        }
        guard let pathValue = rewritten["path"]?.stringValue else { throw CouchError(.notFound, "not_found", "Invalid path.") }
        // The path is relative to the design document: /{db}/_design/{ddoc}/ + path, with `..` resolved.
        var pathPart = pathValue, queryPart: String?
        if let q = pathValue.firstIndex(of: "?") {
            pathPart = String(pathValue[..<q])
            queryPart = String(pathValue[pathValue.index(after: q)...])
        }
        var segments = Array(s.prefix(3))
        if pathPart.hasPrefix("/") {
            // A rule's `to` is relative to the design document even with a leading `/` (CouchDB's
            // `chttpd_rewrite:path_to_list/3` drops empty segments); a function's path with one is absolute.
            if !fromRules { segments = [] }
            pathPart.removeFirst()
        }
        for piece in pathPart.split(separator: "/", omittingEmptySubsequences: true) {
            switch piece {
            case ".": continue
            case "..":
                // `[chttpd] secure_rewrites`: rules may not climb out of their database.
                if fromRules && segments.count <= 1 && call.node.configuration.secureRewrites {
                    throw CouchError(.internalServerError, "insecure_rewrite_rule", "too many ../.. segments")
                }
                if !segments.isEmpty { segments.removeLast() }
            default: segments.append(String(piece).removingPercentEncoding ?? String(piece))
            }
        }
        var query = QueryOptions(queryPart)
        if case .object(let q)? = rewritten["query"] {
            for (k, v) in q { query.set(k, v.stringValue ?? v.jsonString) }
        } else if queryPart == nil {
            // Without a query of its own, the rewritten request keeps the original one.
            for (k, v) in call.query.values { query.set(k, v) }
        }
        var head = call.request.head
        if let method = rewritten["method"]?.stringValue.flatMap({ HTTPRequest.Method($0.uppercased()) }) { head.method = method }
        if case .object(let h)? = rewritten["headers"] {
            for (k, v) in h {
                if let name = HTTPField.Name(k), let value = v.stringValue { head.headerFields[name] = value }
            }
        }
        var newBody = body
        if let b = rewritten["body"] { newBody = Array((b.stringValue ?? b.jsonString).utf8) }
        head.headerFields[.contentLength] = newBody.isEmpty ? nil : String(newBody.count)
        let encodedPath = "/" + segments.map(Call.escapePathSegment).joined(separator: "/")
        head.path = encodedPath + (query.values.isEmpty ? "" : "?" + query.encoded)
        var next = Call(request: Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: newBody))), node: call.node,
                        query: query, segments: segments, remoteAddress: call.remoteAddress)
        next.userCtx = call.userCtx
        next.route = .rewrite
        if segments.count >= 4, segments[1] == "_design", segments[3] == "_rewrite", let db = segments.first {
            let nextTarget = try Keyspace(db)
            try Auth.authorize(&next, nextTarget)
            return try await rewrite(&next, nextTarget, designID: "_design/" + segments[2], depth: depth + 1)
        }
        return try await dispatch(&next)
    }
}

/// CouchDB's older rewrite rules: `[{"from": "/a/:id/*", "to": "_show/x/:id", "method": "GET", "query": {…}}]`.
/// `:name` matches one segment and binds it; `*` matches the rest; bound names fill `:name` and `*` in `to` and in
/// the query's values (a value that is exactly `:name` takes the bound value as JSON when it parses).
enum RewriteRules {
    /// `[chttpd] secure_rewrites` (on by default): a rule whose `from` or `to` has more than two `..` segments is
    /// refused, and with it every request to the rewrite (CouchDB's `path_to_list/3` parses all rules before
    /// matching one). Two `..` reach the database from its design document (`"to": "../../doc"`, or
    /// `"/../../doc"`); a third would leave it.
    static func checkClimbing(_ rules: [JSON], secure: Bool) throws {
        guard secure else { return }
        for rule in rules {
            for key in ["from", "to"] {
                let pattern = rule[key]?.stringValue ?? ""
                if pattern.split(separator: "/").filter({ $0 == ".." }).count > 2 {
                    throw CouchError(.internalServerError, "insecure_rewrite_rule", "too many ../.. segments")
                }
            }
        }
    }

    static func match(_ rules: [JSON], path: [String], method: String, query: [String: String]) -> JSONObject? {
        for rule in rules {
            guard case .object(let r) = rule else { continue }
            if let m = r["method"]?.stringValue, m != "*", m.uppercased() != method { continue }
            let from = (r["from"]?.stringValue ?? "").split(separator: "/", omittingEmptySubsequences: true).map(String.init)
            var bindings: [String: String] = query
            var matched = true
            var i = 0
            var rest: [String] = []
            for (k, piece) in from.enumerated() {
                if piece == "*" {
                    rest = Array(path[min(i, path.count)...])
                    i = path.count
                    _ = k
                    break
                }
                guard i < path.count else { matched = false; break }
                if piece.hasPrefix(":") {
                    bindings[String(piece.dropFirst())] = path[i]
                } else if piece != path[i] {
                    matched = false
                    break
                }
                i += 1
            }
            if !matched || (i < path.count && from.last != "*") { continue }
            if from.last == "*" { bindings["*"] = rest.joined(separator: "/") }
            var to = r["to"]?.stringValue ?? ""
            var parts: [String] = []
            for piece in to.split(separator: "/", omittingEmptySubsequences: false) {
                if piece == "*" { parts.append(bindings["*"] ?? "") } else if piece.hasPrefix(":"), let v = bindings[String(piece.dropFirst())] {
                    parts.append(v)
                } else {
                    parts.append(String(piece))
                }
            }
            to = parts.joined(separator: "/")
            var out: JSONObject = ["path": .string(to)]
            var q = JSONObject()
            for (k, v) in query { q[k] = .string(v) }
            /// A query value with `:name` and `*` (also inside arrays and objects) replaced by what they bound.
            func substitute(_ v: JSON) -> JSON {
                switch v {
                case .string(let text) where text.hasPrefix(":") || text == "*":
                    return bindings[text == "*" ? "*" : String(text.dropFirst())].map(JSON.string) ?? v
                case .array(let items): return .array(items.map(substitute))
                case .object(let members): return .object(JSONObject(members.map { ($0.key, substitute($0.value)) }))
                default: return v
                }
            }
            if case .object(let ruleQuery)? = r["query"] {
                for (k, v) in ruleQuery {
                    let value = substitute(v)
                    q[k] = .string(value.stringValue ?? value.jsonString)
                }
            }
            out["query"] = .object(q)
            return out
        }
        return nil
    }
}
