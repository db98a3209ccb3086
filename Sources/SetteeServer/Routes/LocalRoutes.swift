import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeStore

/// `/{db}/_local/{id}`: per-node documents (replication checkpoints), never replicated or in `_changes`.
enum LocalRoutes {
    static func handle(_ call: inout Call, _ target: Keyspace, id: String) async throws -> Response {
        let (_, c) = try target.open(call.node)
        switch call.method {
        case .get, .head:
            let doc = try await blocking { try c.localDocument(id: id) }
            guard let doc else { throw CouchError.notFound("missing") }
            var out: JSONObject = ["_id": .string(doc.id), "_rev": .string(doc.rev)]
            for (k, v) in doc.body { out[k] = v }
            return Reply.json(.ok, .object(out))
        case .put:
            var body = try await call.bodyObject()
            let rev = body.removeValue(forKey: "_rev")?.stringValue ?? call.query["rev"]
            body.removeValue(forKey: "_id")
            let value = body
            let newRev = try await blocking { try c.putLocal(id: id, body: value, rev: rev) }
            return Reply.json(.created, ["ok": true, "id": .string(id), "rev": .string(newRev)])
        case .delete:
            guard let rev = call.query["rev"] ?? DocumentRoutes.ifMatch(call) else { throw CouchError.conflict }
            try await blocking { try c.deleteLocal(id: id, rev: rev) }
            return Reply.json(.ok, ["ok": true, "id": .string(id), "rev": "0-0"])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }
}
