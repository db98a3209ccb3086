import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeIndex
import SetteeStore

/// CouchDB's Mango API: `POST /{db}/_find`, `POST /{db}/_explain`, `GET|POST /{db}/_index`,
/// `DELETE /{db}/_index/{ddoc}/json/{name}` and `POST /{db}/_index/_bulk_delete` (and `_find`/`_explain` under
/// `/{db}/_partition/{p}/`). Indexes are design documents with `"language": "query"`. A ``MangoError`` reaches the
/// client with its own status and error name through ``CouchError/from(any:)``.
enum MangoRoutes {
    /// `POST /{db}/_find` or `/{db}/_explain` (`explain`), in the whole database or one partition.
    static func find(_ call: inout Call, _ target: Keyspace, explain: Bool, partition: String? = nil) async throws -> Response {
        guard call.method == .post else { throw CouchError.methodNotAllowed("POST") }
        try call.requireJSONContentType()
        let (_, collection) = try target.open(call.node)
        let body = try await call.bodyJSON()
        var query = try MangoQuery(body)
        if let partition {
            if let given = query.partition, given != partition {
                throw CouchError.badRequest("Conflicting value for `partition` in path and request body")
            }
            query.partition = partition
        }
        let timeout = call.node.configuration.queryTimeout
        let reader = call.reader
        let given = query
        let answer: JSON = try await blocking {
            var request = given
            // On a database with a sync function, a reader finds only documents in its channels.
            if let reader {
                let visible = try ChannelIndex.of(collection.database).visibleIDs(in: collection, to: reader)
                request.documentFilter = { visible.contains($0) }
            }
            let ready = request
            return try Database.withTimeout(timeout) {
                explain ? try MangoExecutor.explain(ready, in: collection)
                    : try MangoExecutor.find(ready, in: collection).json
            }
        }
        return Reply.json(.ok, answer)
    }

    /// `/{db}/_index[/…]`: `s` is the path's segments.
    static func index(_ call: inout Call, _ target: Keyspace, _ s: [String]) async throws -> Response {
        let (_, collection) = try target.open(call.node)
        if s.count == 2 {
            switch call.method {
            case .get, .head: return try await list(&call, collection)
            case .post: return try await create(&call, collection)
            default: throw CouchError.methodNotAllowed("GET,POST")
            }
        }
        if s.count == 3 && s[2] == "_bulk_delete" {
            guard call.method == .post else { throw CouchError.methodNotAllowed("POST") }
            return try await bulkDelete(&call, collection)
        }
        // `_index/{ddoc}/{type}/{name}`, `_index/_design/{ddoc}/{type}/{name}` (or `_design%2F{ddoc}`).
        var rest = Array(s.dropFirst(2))
        if rest.first == "_design" { rest.removeFirst(); if !rest.isEmpty { rest[0] = "_design/" + rest[0] } }
        guard rest.count == 3 else { throw CouchError.notFound("missing") }
        guard call.method == .delete else { throw CouchError.methodNotAllowed("DELETE") }
        let ddoc = rest[0].hasPrefix("_design/") ? rest[0] : "_design/" + rest[0]
        guard rest[1] == "json" else { throw CouchError.notFound("missing") }
        try Auth.checkDocumentWrite(call, id: ddoc)
        try await delete(call, collection, designID: ddoc, name: rest[2])
        return Reply.json(.ok, ["ok": true])
    }

    /// `GET /{db}/_index[?limit=&skip=]`.
    static func list(_ call: inout Call, _ collection: SetteeStore.Collection) async throws -> Response {
        let indexes = try await blocking { try MangoIndex.list(collection) }
        func bad() -> CouchError {
            CouchError(.internalServerError, "invalid_list_index_params", "Index parameter ranges: limit > 1, skip > 0")
        }
        var limit = indexes.count, skip = 0
        if let l = call.query["limit"] { guard let n = Int(l), n >= 1 else { throw bad() }; limit = n }
        if let k = call.query["skip"] { guard let n = Int(k), n >= 0 else { throw bad() }; skip = n }
        let page = indexes.dropFirst(skip).prefix(limit).map(\.json)
        return Reply.json(.ok, ["total_rows": .int(Int64(indexes.count)), "indexes": .array(Array(page))])
    }

    /// `POST /{db}/_index`: adds a json index to its design document (created if needed).
    static func create(_ call: inout Call, _ collection: SetteeStore.Collection) async throws -> Response {
        try call.requireJSONContentType()
        let body = try await call.bodyJSON()
        let creation = try MangoIndex.creation(body)
        try Auth.checkDocumentWrite(call, id: creation.designDocumentID)
        if creation.partitioned == true && !collection.database.isPartitioned {
            throw CouchError(.badRequest, "invalid_design_doc", "partitioned option cannot be true in a non-partitioned database.")
        }
        let writer = call.writer
        let result: String = try await blocking {
            let record = try collection.record(id: creation.designDocumentID)
            var existing: JSONObject?
            if let record, !record.deleted, case .object(let o) = try JSON.parse(record.body) { existing = o }
            guard let updated = try MangoIndex.adding(creation, to: existing) else { return "exists" }
            let parent = record.flatMap { $0.deleted ? nil : $0.revID }
            let write = RevisionWrite(id: creation.designDocumentID, body: updated, mode: .edit(parent: parent))
            switch try collection.write([write], as: writer)[0] {
            case .success: break
            case .failure(let error) where error.code == .conflict:
                throw CouchError(.internalServerError, "error_saving_ddoc", "Encountered a conflict while saving the design document.")
            case .failure(let error):
                throw CouchError(.internalServerError, "error_saving_ddoc", "Unknown error while saving the design document: \(error.reason)")
            }
            return "created"
        }
        return Reply.json(.ok, ["result": .string(result), "id": .string(creation.designDocumentID), "name": .string(creation.name)])
    }

    /// Removes one json index; the design document goes when nothing else is left in it.
    static func delete(_ call: Call, _ collection: SetteeStore.Collection, designID: String, name: String) async throws {
        let writer = call.writer
        try await blocking {
            guard let record = try collection.record(id: designID), !record.deleted,
                  case .object(let body) = try JSON.parse(record.body) else { throw CouchError.notFound("missing") }
            let remaining = try MangoIndex.removing(name, from: body)
            let write = RevisionWrite(id: designID, body: remaining ?? [:], deleted: remaining == nil,
                                      mode: .edit(parent: record.revID))
            if case .failure(let error) = try collection.write([write], as: writer)[0] {
                throw CouchError(.internalServerError, "error_saving_ddoc", "Unknown error while saving the design document: \(error.reason)")
            }
        }
    }

    /// `POST /{db}/_index/_bulk_delete` `{"docids": [...]}`: each design document's index, removed.
    static func bulkDelete(_ call: inout Call, _ collection: SetteeStore.Collection) async throws -> Response {
        try call.requireJSONContentType()
        let body = try await call.bodyObject()
        guard case .array(let ids)? = body["docids"], ids.allSatisfy({ $0.stringValue != nil }) else {
            throw CouchError(.badRequest, "invalid_bulk_docs",
                             "Bulk Delete requires an array of non-null docids. Docids: \((body["docids"] ?? .null).jsonString)")
        }
        var success: [JSON] = [], fail: [JSON] = []
        for case .string(let raw) in ids {
            let id = raw.hasPrefix("_design/") ? raw : "_design/" + raw
            do {
                try Auth.checkDocumentWrite(call, id: id)
                let names: [String] = try await blocking {
                    guard let record = try collection.record(id: id), !record.deleted,
                          case .object(let o) = try JSON.parse(record.body), case .object(let views)? = o["views"] else { return [] }
                    return views.map(\.key)
                }
                guard let name = names.first else { throw CouchError.notFound("missing") }
                try await delete(call, collection, designID: id, name: name)
                success.insert(["id": .string(id), "ok": true], at: 0)
            } catch {
                let e = CouchError.from(any: error)
                fail.insert(["id": .string(id), "error": .string(e.error)], at: 0)
            }
        }
        return Reply.json(.ok, ["success": .array(success), "fail": .array(fail)])
    }
}
