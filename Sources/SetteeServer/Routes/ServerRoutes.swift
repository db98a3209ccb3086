import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeReplication
import SetteeStore

/// Server-level endpoints: `/`, `_up`, `_all_dbs`, `_uuids`, `_session`, `_active_tasks`, `_metrics`.
enum ServerRoutes {
    static let version = "3.5.0"

    static func welcome(_ call: Call) throws -> Response {
        guard call.method == .get || call.method == .head else { throw CouchError.methodNotAllowed("GET,HEAD") }
        return Reply.json(.ok, [
            "couchdb": "Welcome", "version": .string(version), "uuid": .string(call.node.uuid),
            "features": ["keyspaces"],
            "vendor": ["name": "Settee", "version": "0.1.0"],
        ])
    }

    static func handle(_ call: inout Call) async throws -> Response {
        let name = call.segments[0]
        if name == "_node" { return try await NodeRoutes.handle(&call) }
        if name == "_db_updates" && call.segments.count == 1 { return try await DatabaseUpdatesRoutes.handle(call) }
        if name == "_membership" && call.segments.count == 1 { return try NodeRoutes.membership(call) }
        if name == "_scheduler" && call.method == .get {
            try Auth.checkAdmin(call)
            return try await scheduler(call)
        }
        guard call.segments.count == 1 else { throw CouchError.notFound("missing") }
        switch (name, call.method) {
        case ("_up", .get), ("_up", .head):
            return Reply.json(.ok, ["status": "ok", "seeds": [:]])
        case ("_all_dbs", .get):
            try Auth.checkAdmin(call)
            return Reply.json(.ok, .array(try listedDatabases(call).map(JSON.string)))
        case ("_dbs_info", .get):
            try Auth.checkAdmin(call)
            let names = try listedDatabases(call)
            var infos: [JSON] = []
            for name in names {
                if let info = try? await DatabaseRoutes.info(call.node, name) { infos.append(["key": .string(name), "info": info]) }
            }
            return Reply.json(.ok, .array(infos))
        case ("_dbs_info", .post):
            try Auth.checkAdmin(call)
            try call.requireJSONContentType()
            let body = try await call.bodyObject()
            guard let keys = body["keys"]?.arrayValue else { throw CouchError.badRequest("`keys` member must exist.") }
            guard keys.count <= 100 else { throw CouchError.badRequest("`keys` member must be at most 100 long.") }
            var infos: [JSON] = []
            for key in keys {
                let name = key.stringValue ?? key.jsonString
                if let info = try? await DatabaseRoutes.info(call.node, name) {
                    infos.append(["key": .string(name), "info": info])
                } else {
                    infos.append(["key": .string(name), "error": "not_found"])
                }
            }
            return Reply.json(.ok, .array(infos))
        case ("_uuids", .get):
            let settings = call.node.configuration.uuids
            let count = try call.query.int("count") ?? 1
            guard count <= settings.maxCount else { throw CouchError.badRequest("count parameter too large") }
            let ids = call.node.uuids.next(count, settings)
            return Reply.json(.ok, ["uuids": .array(ids.map(JSON.string))],
                              headers: [.cacheControl: "must-revalidate, no-cache", HTTPField.Name("Pragma")!: "no-cache",
                                        .expires: "Fri, 01 Jan 1990 00:00:00 GMT",
                                        .eTag: "\"\(MD5.hex(Array(ids.joined().utf8)))\""])
        case ("_active_tasks", .get):
            try Auth.checkAdmin(call)
            return Reply.json(.ok, .array(call.node.tasks.list + call.node.replications.activeTasks))
        case ("_metrics", .get):
            try Auth.checkAdmin(call)
            return Reply.raw(.ok, call.node.metrics.render(), contentType: "text/plain; version=0.0.4")
        case ("_session", _):
            return try await session(&call)
        case ("_dbs_info", _):
            throw CouchError.methodNotAllowed("GET,HEAD,POST")
        case ("_up", _), ("_all_dbs", _), ("_uuids", _), ("_active_tasks", _), ("_metrics", _):
            throw CouchError.methodNotAllowed("GET")
        case ("_replicate", .post):
            try Auth.checkAdmin(call)
            let body = try await call.bodyObject()
            let (status, answer) = try await call.node.replications.replicate(body, writer: call.writer)
            return Reply.json(HTTPResponse.Status(code: status), answer)
        case ("_replicate", _):
            throw CouchError.methodNotAllowed("POST")
        case ("_scheduler", _):
            throw CouchError(.notFound, "not_found", "missing")
        default:
            throw CouchError(.badRequest, "illegal_database_name",
                             "Name: '\(name)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
        }
    }

    /// The database names `_all_dbs` and `GET /_dbs_info` list: sorted, with `start_key`/`end_key` (or
    /// `startkey`/`endkey`, JSON strings), `inclusive_end`, `descending`, `skip` and `limit`.
    static func listedDatabases(_ call: Call) throws -> [String] {
        let q = call.query
        var names = call.node.databaseNames()
        let descending = try q.bool("descending")
        func key(_ a: String, _ b: String) throws -> String? {
            guard let v = try q.json(a) ?? q.json(b) else { return nil }
            guard let s = v.stringValue else { throw CouchError(.badRequest, "query_parse_error", "Invalid value for \(a)") }
            return s
        }
        let start = try key("start_key", "startkey"), end = try key("end_key", "endkey")
        let inclusiveEnd = try q.bool("inclusive_end", default: true)
        if descending { names.reverse() }
        names = names.filter { name in
            if let start, descending ? name > start : name < start { return false }
            if let end {
                if descending ? name < end : name > end { return false }
                if !inclusiveEnd && name == end { return false }
            }
            return true
        }
        let skip = try q.int("skip") ?? 0
        let limit = try q.int("limit") ?? Int.max
        guard skip >= 0, limit >= 0 else { throw CouchError(.badRequest, "query_parse_error", "skip and limit must be positive integers") }
        return Array(names.dropFirst(skip).prefix(limit))
    }

    /// `/_scheduler/jobs` and `/_scheduler/docs[/_replicator[/{docid}]]`: replication jobs and `_replicator`
    /// documents with their state.
    static func scheduler(_ call: Call) async throws -> Response {
        let s = call.segments
        let tasks = call.node.replications.activeTasks.compactMap(\.objectValue)
        func job(_ t: JSONObject) -> JSON {
            ["id": t["replication_id"] ?? .null, "database": t["database"] ?? .null, "doc_id": t["doc_id"] ?? .null,
             "source": t["source"] ?? .null, "target": t["target"] ?? .null, "pid": t["pid"] ?? .null,
             "node": .string(call.node.configuration.nodeName), "user": .null,
             "start_time": .string(ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(t["started_on"]?.intValue ?? 0)))),
             "info": ["revisions_checked": t["revisions_checked"] ?? 0, "missing_revisions_found": t["missing_revisions_found"] ?? 0,
                      "docs_read": t["docs_read"] ?? 0, "docs_written": t["docs_written"] ?? 0,
                      "doc_write_failures": t["doc_write_failures"] ?? 0, "changes_pending": t["changes_pending"] ?? .null,
                      "checkpointed_source_seq": t["checkpointed_source_seq"] ?? .null],
             "history": [["type": "started", "timestamp": .string(ISO8601DateFormatter().string(
                from: Date(timeIntervalSince1970: Double(t["started_on"]?.intValue ?? 0))))]]]
        }
        if s.count == 2 && s[1] == "jobs" {
            // Running jobs, then those that stopped on an error (with `state: failed` and the error in `info`).
            var jobs = tasks.map(job)
            // Jobs waiting for a slot (`[replicator] max_jobs`).
            for p in call.node.replications.pendingJobs {
                jobs.append(["id": .string(p.id), "database": p.docID == nil ? .null : .string(SystemDatabase.replicator.rawValue),
                             "doc_id": p.docID.map(JSON.string) ?? .null, "source": .string(RemoteEndpoint.redact(p.source)),
                             "target": .string(RemoteEndpoint.redact(p.target)), "pid": .null, "node": .string(call.node.configuration.nodeName),
                             "user": .null, "state": "pending", "info": .null,
                             "history": [["type": "added", "timestamp": .string(ISO8601DateFormatter().string(from: Date()))]]])
            }
            for case .object(let f) in call.node.replications.failures {
                guard case .object(var j) = job(f) else { continue }
                j["state"] = "failed"
                j["info"] = ["error": f["last_error"] ?? .null]
                j["history"] = [["type": "crashed", "reason": f["last_error"] ?? .null,
                                 "timestamp": .string(ISO8601DateFormatter().string(
                                    from: Date(timeIntervalSince1970: Double(f["updated_on"]?.intValue ?? 0))))]]
                jobs.append(.object(j))
            }
            return Reply.json(.ok, ["total_rows": .int(Int64(jobs.count)), "offset": 0, "jobs": .array(jobs)])
        }
        guard s.count >= 2, s[1] == "docs", s.count <= 4, s.count == 2 || s[2] == SystemDatabase.replicator.rawValue else {
            throw CouchError.notFound("missing")
        }
        var docs: [JSON] = []
        let pendingDocs = Set(call.node.replications.pendingJobs.compactMap(\.docID))
        if let db = try? call.node.database(SystemDatabase.replicator.rawValue) {
            let c = try db.defaultCollection()
            let rows = try await blocking {
                var options = Collection.AllDocsOptions()
                options.includeDocs = true
                return try c.allDocs(options).rows
            }
            for row in rows where !row.id.hasPrefix("_design/") {
                guard let body = row.body, case .object(let doc) = try JSON.parse(body) else { continue }
                let running = tasks.first { $0["doc_id"]?.stringValue == row.id }
                var state = doc["_replication_state"]?.stringValue ?? "pending"
                if let running { state = running["state"]?.stringValue == "offline" ? "crashing" : "running" }
                if pendingDocs.contains(row.id) { state = "pending" }
                var d: JSONObject = ["database": .string(SystemDatabase.replicator.rawValue), "doc_id": .string(row.id),
                                     "id": running?["replication_id"] ?? doc["_replication_id"] ?? .null,
                                     "node": .string(call.node.configuration.nodeName), "state": .string(state),
                                     "source": redact(doc["source"]), "target": redact(doc["target"]),
                                     "error_count": running?["error_count"] ?? 0,
                                     "last_updated": doc["_replication_state_time"] ?? .null]
                if let running {
                    var info = job(running)["info"]?.objectValue ?? [:]
                    if let e = running["last_error"] { info["error"] = e }
                    d["info"] = .object(info)
                } else {
                    d["info"] = doc["_replication_stats"] ?? .null
                }
                if let reason = doc["_replication_state_reason"] { d["info"] = ["error": reason] }
                docs.append(.object(d))
            }
        }
        if s.count == 4 {
            guard let doc = docs.first(where: { $0["doc_id"]?.stringValue == s[3] }) else { throw CouchError.notFound("missing") }
            return Reply.json(.ok, doc)
        }
        return Reply.json(.ok, ["total_rows": .int(Int64(docs.count)), "offset": 0, "docs": .array(docs)])
    }

    /// A replication endpoint without its password (a URL string, or the `url` of an object; headers dropped).
    static func redact(_ endpoint: JSON?) -> JSON {
        switch endpoint {
        case .string(let s)?: return .string(RemoteEndpoint.redact(s))
        case .object(let o)?: return .string(RemoteEndpoint.redact(o["url"]?.stringValue ?? ""))
        default: return .null
        }
    }

    /// `/_session`: cookie login (POST), who am I (GET), logout (DELETE).
    static func session(_ call: inout Call) async throws -> Response {
        let node = call.node
        switch call.method {
        case .get, .head:
            var handlers = node.jwt == nil ? ["cookie", "default"] : ["cookie", "default", "jwt"]
            if node.configuration.security.proxy.enabled { handlers.insert("proxy", at: 0) }
            var info: JSONObject = ["authentication_handlers": .array(handlers.map(JSON.string)),
                                    "authentication_db": .string(node.configuration.security.authenticationDB)]
            if let method = call.userCtx.method { info["authenticated"] = .string(method) }
            return Reply.json(.ok, ["ok": true, "userCtx": call.userCtx.json, "info": .object(info)])
        case .post:
            let bytes = try await call.bodyBytes()
            var name: String?, password: String?
            if call.header(.contentType)?.contains("application/x-www-form-urlencoded") == true {
                let form = QueryOptions(String(decoding: bytes, as: UTF8.self))
                name = form["name"] ?? form["username"]
                password = form["password"]
            } else {
                guard call.header(.contentType)?.lowercased().contains("json") ?? true else { throw CouchError.badContentType }
                let body = try call.parseJSON(bytes)
                name = body["name"]?.stringValue ?? body["username"]?.stringValue
                password = body["password"]?.stringValue
            }
            guard let name, let password, !name.isEmpty else { throw CouchError.badCredentials }
            let context: UserContext, salt: String
            if !node.config.hasAdmins {
                // Admin party: any name logs in, as admin.
                (context, salt) = (UserContext(name: name, roles: ["_admin"], method: "cookie"), "")
            } else {
                guard let found = try await Auth.login(call, name: name, password: password) else {
                    throw CouchError.badCredentials
                }
                (context, salt) = found
            }
            let settings = node.configuration
            let cookie = node.cookies.header(node.cookies.make(user: name, salt: salt),
                                             secure: settings.security.secureCookies,
                                             crossSite: settings.cors?.credentials == true,
                                             persistent: settings.security.allowPersistentCookies)
            return Reply.json(.ok, ["ok": true, "name": .string(name), "roles": .array(context.roles.map(JSON.string))],
                              headers: [.setCookie: cookie])
        case .delete:
            if let cookie = Auth.sessionToken(call), let (_, time, _, _) = node.cookies.parse(cookie) {
                node.revokedCookies.revoke(cookie, until: Date(timeIntervalSince1970: Double(time) + node.cookies.timeout))
            }
            return Reply.json(.ok, ["ok": true], headers: [.setCookie: SessionCookies.clearHeader])
        default:
            throw CouchError.methodNotAllowed("GET,HEAD,POST,DELETE")
        }
    }
}
