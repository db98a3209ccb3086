import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore

/// The lazy vector index updater over HTTP (stateless, so a worker can fetch a batch, embed it elsewhere and post
/// the vectors back):
///
/// - `GET /{db}/_indexes/{name}/_pending?limit=50` → `{"index": name, "entries": [{"id", "seq", "value"}]}`: documents
///   whose vector is not computed yet, with the value of the index's expression.
/// - `POST /{db}/_indexes/{name}/_vectors` `{"vectors": [{"id", "seq", "vector": [...] | null}]}` → `{"ok": true,
///   "applied": n, "stale": [ids]}`: stores each vector (null: the document is not indexed). An entry whose document
///   changed since `seq` is not applied (listed in `stale`) and stays pending with its new value. Entries left out
///   are skipped: they stay pending.
enum VectorRoutes {
    static let maximumBatch = 10_000

    static func handle(_ call: inout Call, _ target: Keyspace, name: String, action: String) async throws -> Response {
        let (db, defaultCollection) = try target.open(call.node)
        let collectionName = call.query["collection"]
        switch (action, call.method) {
        case ("_pending", .get), ("_pending", .head):
            let limitText = call.query["limit"] ?? "50"
            guard let limit = Int(limitText), limit > 0, limit <= maximumBatch else {
                throw CouchError.badRequest("limit must be an integer from 1 to \(maximumBatch), got \(limitText)")
            }
            return try await blocking {
                let index = try lazyIndex(name, db: db, collectionName: collectionName, default: defaultCollection)
                let entries = try index.pendingVectors(limit: limit)
                let list: [JSON] = entries.map { entry in
                    .object(JSONObject([("id", .string(entry.documentID)), ("seq", .int(Int64(entry.sequence))),
                                        ("value", entry.value)]))
                }
                return Reply.json(.ok, ["index": .string(name), "entries": .array(list)])
            }
        case ("_vectors", .post), ("_vectors", .put):
            try Auth.checkDatabaseAdmin(call)
            let body = try await call.bodyObject()
            guard case .array(let items)? = body["vectors"] else {
                throw CouchError.badRequest("Expected {\"vectors\": [{\"id\", \"seq\", \"vector\"}]}")
            }
            guard items.count <= maximumBatch else { throw CouchError.badRequest("At most \(maximumBatch) vectors per request") }
            var updates: [(id: String, seq: UInt64, vector: [Float]?)] = []
            for item in items {
                guard case .object(let o) = item, let id = o["id"]?.stringValue, let seq = o["seq"]?.intValue, seq >= 0 else {
                    throw CouchError.badRequest("Each vector needs \"id\" (string) and \"seq\" (integer) as _pending gave them")
                }
                switch o["vector"] {
                case nil, .null?: updates.append((id, UInt64(seq), nil))
                case let v?:
                    guard let floats = VectorSearch.floats(v) else {
                        throw CouchError.badRequest("The vector of \(id) must be an array of numbers or null")
                    }
                    updates.append((id, UInt64(seq), floats))
                }
            }
            let batch = updates
            return try await blocking {
                let index = try lazyIndex(name, db: db, collectionName: collectionName, default: defaultCollection)
                let dimensions = index.info.spec.vector?.dimensions ?? 0
                for update in batch where update.vector != nil && update.vector?.count != dimensions {
                    throw CouchError.badRequest("The vector of \(update.id) has \(update.vector?.count ?? 0) dimensions, index \(name) has \(dimensions)")
                }
                var apply: [(entry: LazyVectorEntry, vector: [Float]?)] = []
                var stale: [JSON] = []
                for update in batch {
                    if let entry = try index.pendingEntry(documentID: update.id, sequence: update.seq) {
                        apply.append((entry, update.vector))
                    } else {
                        stale.append(.string(update.id))
                    }
                }
                try index.setVectors(apply)
                return Reply.json(.ok, ["ok": true, "applied": .int(Int64(apply.count)), "stale": .array(stale)])
            }
        case ("_pending", _):
            throw CouchError.methodNotAllowed("GET,HEAD")
        default:
            throw CouchError.methodNotAllowed("POST,PUT")
        }
    }

    static func lazyIndex(_ name: String, db: Database, collectionName: String?,
                          default fallback: SetteeStore.Collection) throws -> QueryIndex {
        let collection = try QueryRoutes.collectionNamed(collectionName, db: db, default: fallback)
        guard let index = try collection.index(withName: name) else {
            throw CouchError(.notFound, "not_found", "Index \(name) does not exist.")
        }
        guard index.info.spec.vector?.isLazy == true else {
            throw CouchError.badRequest("Index \(name) is not a lazy vector index")
        }
        return index
    }
}
