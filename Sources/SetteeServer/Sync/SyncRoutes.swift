import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeIndex
import SetteeStore

/// A database's sync function and its users and roles, in Sync Gateway's admin API shapes (database admins only):
///
/// - `GET|PUT|DELETE /{db}/_config/sync`: the sync function, as JavaScript text.
/// - `GET /{db}/_user/`, `GET|PUT|DELETE /{db}/_user/{name}`: a user's `admin_channels` and `admin_roles`
///   (`GUEST` is the anonymous caller). Users sign in as CouchDB's do (`_users`, cookies, JWT); these say what
///   they read in this database.
/// - `GET /{db}/_role/`, `GET|PUT|DELETE /{db}/_role/{name}`: a role's `admin_channels`.
/// - `POST /{db}/_resync`: runs the sync function again over every document's current revision (after changing
///   it), as an admin, and rebuilds the channel index; readers since before get their channels' documents again.
enum SyncRoutes {
    static func handle(_ call: inout Call, _ target: Keyspace, _ s: [String]) async throws -> Response {
        let (db, c) = try target.open(call.node)
        let index = ChannelIndex.of(db)
        switch s[1] {
        case "_config": return try await config(&call, index)
        case "_resync":
            guard call.method == .post else { throw CouchError.methodNotAllowed("POST") }
            let count = try await blocking { try resync(c, index: index) }
            return Reply.json(.ok, ["ok": true, "documents": .int(Int64(count))])
        default:
            let roles = s[1] == "_role"
            return try await principal(&call, index, roles: roles, name: s.count == 3 ? s[2] : nil)
        }
    }

    // MARK: The sync function

    static func config(_ call: inout Call, _ index: ChannelIndex) async throws -> Response {
        switch call.method {
        case .get, .head:
            guard let source = try await blocking({ try index.syncFunction() }) else {
                throw CouchError.notFound("This database has no sync function.")
            }
            return Reply.raw(.ok, Array(source.utf8), contentType: "application/javascript")
        case .put:
            let bytes = try await call.bodyBytes()
            var source = String(decoding: bytes, as: UTF8.self)
            if call.header(.contentType)?.lowercased().hasPrefix("application/json") == true {
                // Also accepted: a JSON string, or Sync Gateway's database config shape {"sync": "…"}.
                switch try call.parseJSON(bytes) {
                case .string(let text): source = text
                case .object(let o) where o["sync"]?.stringValue != nil: source = o["sync"]!.stringValue!
                default: throw CouchError.badRequest("The body must be the sync function's JavaScript text.")
                }
            }
            let trimmed = source.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { throw CouchError.badRequest("The sync function is empty.") }
            let text = trimmed
            try await blocking {
                do {
                    try JavaScriptEngine.shared.compile(functions: [text], library: nil)
                } catch let error as JavaScriptError {
                    guard case .compilation(let reason) = error else { throw error }
                    throw CouchError(.badRequest, "compilation_error", "The sync function does not compile: \(reason)")
                }
                try index.setSyncFunction(text)
            }
            return Reply.json(.created, ["ok": true])
        case .delete:
            try await blocking { try index.setSyncFunction(nil) }
            return Reply.ok()
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    /// Runs the sync function over every current revision of the collection (as an admin, `oldDoc` null) and
    /// rebuilds the channel index from what it says. Returns how many documents it routed.
    static func resync(_ c: SetteeStore.Collection, index: ChannelIndex) throws -> Int {
        guard let source = try index.syncFunction() else {
            throw CouchError.badRequest("This database has no sync function.")
        }
        var options = SetteeStore.Collection.ChangesOptions(since: 0)
        options.includeDocs = true
        var batch: [(id: String, rev: RevID, pair: [UInt8])] = []
        var total = 0
        let user: JSON = ["name": .null, "roles": [], "channels": [], "admin": true]
        func flush() throws {
            guard !batch.isEmpty else { return }
            let outcomes = try JavaScriptEngine.shared.syncBatch(source: source, userContext: user, count: batch.count) { k, out in
                out.append(contentsOf: batch[k].pair)
            }
            var routed: [(id: String, rev: RevID, routing: [UInt8])] = []
            for (entry, outcome) in zip(batch, outcomes) {
                // A document the function now refuses is in no channel.
                routed.append((entry.id, entry.rev, (try? outcome.get())?.routing ?? Array(#"{"channels":[]}"#.utf8)))
            }
            try c.setRouting(routed)
            total += routed.count
            batch.removeAll(keepingCapacity: true)
        }
        var rows: [SetteeStore.Collection.ChangeRow] = []
        try c.forEachChange(options) { row in
            if !row.id.hasPrefix("_design/") { rows.append(row) }
            return true
        }
        for row in rows {
            var doc = DocumentBytes.splice(id: row.id, rev: row.rev.description, deleted: row.deleted, body: row.body ?? Array("{}".utf8))
            doc.append(contentsOf: ",null".utf8)
            batch.append((row.id, row.rev, doc))
            if batch.count == 500 { try flush() }
        }
        try flush()
        try index.rebuild(c)
        return total
    }

    // MARK: Users and roles

    static func principal(_ call: inout Call, _ index: ChannelIndex, roles: Bool, name: String?) async throws -> Response {
        guard let name, !name.isEmpty else {
            guard call.method == .get || call.method == .head else { throw CouchError.methodNotAllowed("GET,HEAD") }
            let names = try await blocking { try index.principalNames(roles: roles) }
            return Reply.json(.ok, .array(names.map(JSON.string)))
        }
        let key = roles ? ChannelIndex.principalKey(role: name) : name
        switch call.method {
        case .get, .head:
            // (Users are the node's, in `_users`: one with no grants here has none.)
            let stored = try await blocking { try index.principal(key) }
            guard let p = stored ?? (roles ? nil : ChannelIndex.Principal()) else {
                throw CouchError.notFound("No such role.")
            }
            var out: JSONObject = ["name": .string(name), "admin_channels": .array(p.adminChannels.map(JSON.string))]
            if !roles {
                out["admin_roles"] = .array(p.adminRoles.map(JSON.string))
                // What the user reads now: its own grants, its roles', and those documents gave it.
                let c = try index.database.defaultCollection()
                let reader = try await blocking {
                    try index.reader(user: name == "GUEST" ? nil : name, roles: [], in: c)
                }
                out["all_channels"] = .array(reader.channels.keys.sorted().map(JSON.string))
                out["roles"] = .array(reader.roles.sorted().map(JSON.string))
            }
            return Reply.json(.ok, .object(out))
        case .put:
            let body = try await call.bodyObject()
            func names(_ key: String) throws -> [String] {
                guard let value = body[key], !value.isNull else { return [] }
                guard let list = value.arrayValue,
                      list.allSatisfy({ $0.stringValue.map { !$0.isEmpty && !$0.contains(":") } ?? false }) else {
                    throw CouchError.badRequest("`\(key)` must be an array of names (not empty, without `:`).")
                }
                return Array(Set(list.compactMap(\.stringValue))).sorted()
            }
            let channels = try names("admin_channels")
            let granted = roles ? [] : try names("admin_roles")
            if roles && body["admin_roles"] != nil { throw CouchError.badRequest("A role has no `admin_roles`.") }
            let existed = try await blocking { try index.setPrincipal(key, channels: channels, roles: granted) }
            return Reply.json(existed ? .ok : .created, ["ok": true])
        case .delete:
            guard try await blocking({ try index.setPrincipal(key, channels: [], roles: [], delete: true) }) else {
                throw CouchError.notFound(roles ? "No such role." : "No such user.")
            }
            return Reply.ok()
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }
}

extension Node {
    /// Sets a database's sync function from the node's configuration (`settee serve --sync-function DB=…`, or the
    /// configuration file's `databases` object in Sync Gateway's shape, `{"db": {"sync": "function …"}}`): the
    /// database is created if missing, the function must compile, and it replaces the one the database had.
    /// Revisions written before keep their channels until `POST /{db}/_resync`.
    public func installSyncFunction(database name: String, source: String) throws {
        let text = source.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw SetteeError(.badRequest, "The sync function of \(name) is empty.") }
        do {
            try JavaScriptEngine.shared.compile(functions: [text], library: nil)
        } catch {
            throw SetteeError(.badRequest, "The sync function of \(name) does not compile: \(error)")
        }
        let db = try (try? database(name)) ?? createDatabase(name)
        let index = ChannelIndex.of(db)
        if try index.syncFunction() != text { try index.setSyncFunction(text) }
    }
}
