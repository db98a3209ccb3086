import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeStore

/// `/{db}/_partition/{partition}[/…]`: one partition of a partitioned database — its info, `_all_docs`, a
/// partitioned view, and Mango's `_find` and `_explain` over its documents alone.
enum PartitionRoutes {
    static func handle(_ call: inout Call, _ target: Keyspace, _ s: [String]) async throws -> Response {
        guard s.count >= 3 else { throw CouchError.badRequest("invalid_partition_req") }
        let partition = s[2]
        let (db, collection) = try target.open(call.node)
        // (CouchDB checks the partition first for the info request, the database first for the others.)
        if s.count > 3 && !db.isPartitioned { throw CouchError.badRequest("database is not partitioned") }
        do { try DocumentIDs.validatePartition(partition) } catch { throw CouchError.from(error) }
        guard db.isPartitioned else { throw CouchError.badRequest("database is not partitioned") }
        if s.count == 3 {
            guard call.method == .get || call.method == .head else { throw CouchError.methodNotAllowed("GET") }
            let info: JSON = try await blocking {
                let counts = try collection.documentCounts(from: partition + ":", below: partition + ";")
                return [
                    "db_name": .string(db.name),
                    "sizes": ["active": .int(Int64(counts.bytes)), "external": .int(Int64(counts.bytes))],
                    "partition": .string(partition),
                    "doc_count": .int(Int64(counts.live)),
                    "doc_del_count": .int(Int64(counts.deleted)),
                ]
            }
            return Reply.json(.ok, info)
        }
        if let given = call.query["partition"], given != partition {
            throw CouchError(.badRequest, "bad_request", "Conflicting value for `partition` in query string")
        }
        switch s[3] {
        case "_all_docs" where s.count == 4:
            return Reply.raw(.ok, try await BulkRoutes.allDocsBody(&call, target, partition: partition))
        case "_design" where s.count == 7 && s[5] == "_view":
            return try await ViewRoutes.query(&call, target, designID: "_design/" + s[4], view: s[6], partition: partition)
        case "_find" where s.count == 4:
            return try await MangoRoutes.find(&call, target, explain: false, partition: partition)
        case "_explain" where s.count == 4:
            return try await MangoRoutes.find(&call, target, explain: true, partition: partition)
        default:
            throw CouchError.notFound("missing")
        }
    }
}
