import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeIndex
import SetteeStore

/// `/{db}` and its database-level sub-resources.
enum DatabaseRoutes {
    static func handle(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        let node = call.node
        switch call.method {
        case .put:
            try Auth.checkAdmin(call)
            if target.isDefaultCollection || (target.scope == "_default" && target.collection == "_default") {
                let partitioned: Bool
                switch call.query["partitioned"] {
                case nil, "false": partitioned = false
                case "true": partitioned = true
                default: throw CouchError.badRequest("Invalid `partitioned` parameter")
                }
                _ = try await blocking { try node.createDatabase(target.database, partitioned: partitioned) }
                return Reply.json(.created, ["ok": true],
                                  headers: [.location: call.absoluteURL("/" + Call.escapePathSegment(target.database))])
            }
            let created: Bool = try await blocking {
                let db = try node.database(target.database)
                if try db.collection(name: target.collection, scope: target.scope) != nil { return false }
                _ = try db.createCollection(name: target.collection, scope: target.scope)
                return true
            }
            guard created else {
                throw CouchError(.preconditionFailed, "file_exists", "The collection already exists.")
            }
            return Reply.json(.created, ["ok": true])
        case .get, .head:
            let (db, c) = try target.open(node)
            let compacting = node.tasks.isRunning(.databaseCompaction, database: db.name)
            let sequences = call.sequences(db.uuid)
            let info: JSON = try await blocking { try DatabaseRoutes.info(db, c, target, compacting: compacting, sequences: sequences) }
            if call.method == .head { return Response(status: .ok, headers: [.contentType: "application/json"]) }
            return Reply.json(.ok, info)
        case .delete:
            try Auth.checkAdmin(call)
            if call.query.has("rev") {
                throw CouchError.badRequest("You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
            }
            if target.isDefaultCollection {
                try await blocking { try node.deleteDatabase(target.database) }
            } else {
                if target.scope == "_default" && target.collection == "_default" {
                    throw CouchError.badRequest("The default collection cannot be deleted; DELETE /\(target.database) deletes the database")
                }
                try await blocking {
                    let db = try node.database(target.database)
                    try db.deleteCollection(name: target.collection, scope: target.scope)
                }
            }
            return Reply.ok()
        case .post:
            try call.requireJSONContentType()
            return try await DocumentRoutes.post(&call, target)
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,POST,PUT")
        }
    }

    /// A database's info by name (`_dbs_info`); throws for a missing database.
    static func info(_ node: Node, _ name: String) async throws -> JSON {
        let target = try Keyspace(name)
        let (db, c) = try target.open(node)
        let compacting = node.tasks.isRunning(.databaseCompaction, database: db.name)
        let sequences = CouchSequence(node: node.configuration.nodeName, databaseUUID: db.uuid)
        return try await blocking { try DatabaseRoutes.info(db, c, target, compacting: compacting, sequences: sequences) }
    }

    static func info(_ db: Database, _ c: SetteeStore.Collection, _ target: Keyspace, compacting: Bool = false,
                     sequences: CouchSequence) throws -> JSON {
        let counts = try c.documentCounts()
        let sizes = try db.sizes()
        var out: JSONObject = [
            "db_name": .string(target.isDefaultCollection ? db.name : "\(db.name).\(target.scope).\(target.collection)"),
            "purge_seq": sequences.json(UInt64(try c.purgeCount())),
            "update_seq": sequences.json(db.lastSequence),
            "sizes": ["file": .int(Int64(sizes.file)), "external": .int(Int64(sizes.external)), "active": .int(Int64(sizes.active))],
            "props": db.isPartitioned ? ["partitioned": true] : [:],
            "doc_del_count": .int(Int64(counts.deleted)),
            "doc_count": .int(Int64(counts.live)),
            "disk_format_version": 8,
            "compact_running": .bool(compacting),
            "cluster": ["q": 1, "n": 1, "w": 1, "r": 1],
            "instance_start_time": "0",
            "uuid": .string(db.uuid),
        ]
        if !target.isDefaultCollection {
            out["scope"] = .string(target.scope)
            out["collection"] = .string(target.collection)
        }
        return .object(out)
    }

    static func handleSub(_ call: inout Call, _ target: Keyspace, _ name: String) async throws -> Response {
        // `POST /{db}/_compact/{ddoc}` compacts a design document's views: they live in the database's file, so
        // it is the database's compaction (which rebuilds their tables too).
        let viewCompaction = name == "_compact" && call.segments.count == 3
        guard call.segments.count == 2 || viewCompaction else { throw CouchError.notFound() }
        let (db, c) = try target.open(call.node)
        switch (name, call.method) {
        case ("_revs_limit", .get):
            return Reply.raw(.ok, Array("\(db.revsLimit)\n".utf8))
        case ("_revs_limit", .put):
            try Auth.checkDatabaseAdmin(call)
            guard case .int(let n) = try await call.bodyJSON(), n > 0 else {
                throw CouchError.badRequest("Rev limit has to be an integer")
            }
            try await blocking { try db.setRevsLimit(Int(n)) }
            return Reply.ok()
        case ("_compact", .post), ("_view_cleanup", .post):
            try Auth.checkDatabaseAdmin(call)
            guard call.header(.contentType)?.lowercased().hasPrefix("application/json") == true else {
                throw CouchError.badContentType
            }
            if viewCompaction {
                let designID = "_design/" + call.segments[2]
                guard let record = try await blocking({ try c.record(id: designID) }), !record.deleted else {
                    throw CouchError.notFound("missing")
                }
            }
            // A compaction already running on the database is the one this request asked for.
            if name == "_compact", let done = call.node.tasks.begin(.databaseCompaction, database: db.name) {
                let logger = call.node.tasks.logger
                // A task of the node's background work: shutdown waits for it before closing the databases (and
                // one cancelled before it began ends its active task all the same).
                let started = call.node.background.run {
                    defer { done() }
                    guard !Task.isCancelled else { return }
                    do {
                        try await blocking { try db.compact() }
                    } catch {
                        logger.error("compaction of \(db.name) failed: \(error)")
                    }
                }
                if !started { done() }
            }
            if name == "_view_cleanup" {
                try await blocking {
                    for collection in try db.allCollections() { _ = try DesignView.cleanUp(collection: collection) }
                }
            }
            return Reply.json(.accepted, ["ok": true])
        case ("_ensure_full_commit", .post):
            return Reply.json(.created, ["ok": true, "instance_start_time": "0"])
        case ("_purge", .post):
            try Auth.checkDatabaseAdmin(call)
            let body = try await call.bodyObject()
            var request: [(String, [RevID])] = []
            for (id, revs) in body {
                if db.isPartitioned {
                    do { try DocumentIDs.requirePartition(id) } catch { throw CouchError.from(error) }
                }
                guard let list = revs.arrayValue else { throw CouchError.badRequest("Revisions of \(id) must be an array") }
                request.append((id, try list.map { r in
                    guard let s = r.stringValue, let rev = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
                    return rev
                }))
            }
            let req = request
            let purged: [(String, [RevID])] = try await blocking {
                try req.map { ($0.0, try c.purge(id: $0.0, revisions: $0.1)) }
            }
            var out = JSONObject()
            for (id, revs) in purged { out[id] = .array(revs.map { .string($0.description) }) }
            return Reply.json(.created, ["purge_seq": .null, "purged": .object(out)])
        case ("_security", .get):
            let sec = try await blocking { try db.metadata("security") ?? SecurityObject.adminOnlyJSON }
            return Reply.json(.ok, sec)
        case ("_security", .put):
            let body = try await call.bodyObject()
            try SecurityObject.validate(body)
            let node = call.node
            try await blocking { try node.setSecurityObject(db, body) }
            return Reply.ok()
        default:
            throw CouchError.methodNotAllowed(name == "_revs_limit" || name == "_security" ? "GET,PUT" : "POST")
        }
    }
}
