import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeIndex
import SetteeQuery
import SetteeSQLPP
import SetteeStore

/// `POST /{db}/_query` (SQL++) and `/{db}/_indexes[/{name}]` (value, full-text, array and vector indexes).
enum QueryRoutes {
    /// Requests above this many bytes of SQL++ are rejected before parsing.
    static let maximumQueryLength = 64 * 1024

    /// `POST /{db}/_query` `{"query": "SELECT …", "params": {…}}` → `{"rows": […]}`; `?explain=true` → `{"plan": "…"}`.
    static func query(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        guard call.method == .post || call.method == .get else { throw CouchError.methodNotAllowed("GET,POST") }
        let (db, _) = try target.open(call.node)
        var text: String?
        var params: [String: JSON] = [:]
        if call.method == .post {
            let body = try await call.bodyObject()
            text = body["query"]?.stringValue ?? body["statement"]?.stringValue
            switch body["params"] ?? body["parameters"] {
            case .object(let o)?: for (k, v) in o { params[k.hasPrefix("$") ? String(k.dropFirst()) : k] = v }
            case nil, .null?: break
            default: throw CouchError.badRequest("\"params\" must be a JSON object")
            }
        } else {
            text = call.query["query"]
        }
        guard let sql = text, !sql.isEmpty else {
            throw CouchError.badRequest("Expected {\"query\": \"SELECT …\"} in the request body")
        }
        guard sql.utf8.count <= maximumQueryLength else {
            throw CouchError(.badRequest, "query_parse_error", "Query is longer than \(maximumQueryLength) bytes")
        }
        let explain = ["true", "1"].contains(call.query["explain"] ?? "")
        let parameters = params
        let timeout = call.node.configuration.queryTimeout
        return try await blocking { try Database.withTimeout(timeout) {
            let query = try db.createQuery(sql)
            query.parameters = Parameters(parameters)
            if explain {
                let plan = try query.explain()
                return Reply.json(.ok, ["plan": .string(plan),
                                        "lines": .array(plan.split(separator: "\n").map { .string(String($0)) })])
            }
            let results = try query.execute()
            var out: [UInt8] = []
            out.reserveCapacity(256)
            out.append(contentsOf: Array("{\"columns\":".utf8))
            JSON.array(results.columnNames.map(JSON.string)).serialize(into: &out)
            out.append(contentsOf: Array(",\"rows\":[".utf8))
            var first = true
            for row in results {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                JSON.object(row.jsonObject).serialize(into: &out)
            }
            out.append(contentsOf: Array("]}".utf8))
            return Reply.raw(.ok, out)
        } }
    }

    /// `GET /{db}/_indexes`, `GET|PUT|DELETE /{db}/_indexes/{name}`.
    static func index(_ call: inout Call, _ target: Keyspace, name: String?) async throws -> Response {
        let (db, defaultCollection) = try target.open(call.node)
        guard let name else {
            guard call.method == .get || call.method == .head else { throw CouchError.methodNotAllowed("GET,HEAD") }
            return try await blocking {
                let manager = try IndexManager.shared(for: db)
                var list: [JSON] = []
                for collection in try db.allCollections() {
                    for info in manager.indexes(of: collection) { list.append(try describe(info, manager)) }
                }
                return Reply.json(.ok, ["total_rows": .int(Int64(list.count)), "indexes": .array(list)])
            }
        }
        switch call.method {
        case .get, .head:
            return try await blocking {
                let manager = try IndexManager.shared(for: db)
                for collection in try db.allCollections() {
                    if let info = manager.indexes(of: collection).first(where: { $0.name == name }),
                       target.isDefaultCollection || collection == defaultCollection {
                        return Reply.json(.ok, try describe(info, manager))
                    }
                }
                throw CouchError(.notFound, "not_found", "Index \(name) does not exist.")
            }
        case .put, .post:
            try Auth.checkDatabaseAdmin(call)
            let body = try await call.bodyJSON()
            let collection = try collectionNamed(body["collection"]?.stringValue, db: db, default: defaultCollection)
            return try await blocking {
                let spec = try IndexSpec(json: body)
                let manager = try IndexManager.shared(for: db)
                let existed = manager.indexes(of: collection).first { $0.name == name }
                if existed?.spec == spec {
                    return Reply.json(.ok, ["ok": true, "name": .string(name), "result": "exists"])
                }
                try manager.createIndex(name, spec: spec, on: collection)
                return Reply.json(.created, ["ok": true, "name": .string(name),
                                             "result": .string(existed == nil ? "created" : "rebuilt")])
            }
        case .delete:
            try Auth.checkDatabaseAdmin(call)
            let collectionName = call.query["collection"]
            return try await blocking {
                let collection = try collectionNamed(collectionName, db: db, default: defaultCollection)
                let manager = try IndexManager.shared(for: db)
                guard manager.indexes(of: collection).contains(where: { $0.name == name }) else {
                    throw CouchError(.notFound, "not_found", "Index \(name) does not exist.")
                }
                try manager.deleteIndex(name, on: collection)
                return Reply.json(.ok, ["ok": true])
            }
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    /// `scope.collection` or `collection` (default scope); nil is the URL's collection.
    static func collectionNamed(_ name: String?, db: Database, default fallback: SetteeStore.Collection) throws -> SetteeStore.Collection {
        guard let name, !name.isEmpty else { return fallback }
        let parts = name.split(separator: ".", maxSplits: 1).map(String.init)
        let (scope, collection) = parts.count == 2 ? (parts[0], parts[1]) : ("_default", parts[0])
        guard let c = try db.collection(name: collection == "_" ? "_default" : collection, scope: scope) else {
            throw CouchError(.notFound, "not_found", "Collection \(name) does not exist.")
        }
        return c
    }

    static func describe(_ info: IndexInfo, _ manager: IndexManager) throws -> JSON {
        var pairs: [(String, JSON)] = [("name", .string(info.name)), ("collection", .string(info.collectionName))]
        if case .object(let spec) = info.spec.json { for (k, v) in spec { pairs.append((k, v)) } }
        pairs.append(("last_seq", .int(Int64(clamping: try manager.lastSequence(of: info)))))
        pairs.append(("state", .string(try manager.state(of: info))))
        if info.spec.kind == .vector {
            let (trained, count) = try manager.withVectorIndex(info) { ($0.isTrained, $0.count) }
            pairs.append(("trained", .bool(trained)))
            pairs.append(("vectors", .int(Int64(count))))
        }
        return .object(JSONObject(pairs))
    }
}
