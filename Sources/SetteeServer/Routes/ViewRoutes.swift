import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeIndex
import SetteeStore

/// `GET|POST /{db}/_design/{ddoc}/_view/{view}`: views declared with SQL++ expressions in design documents
/// (``DesignView``), queried with CouchDB's parameters and answered in CouchDB's shape.
enum ViewRoutes {
    static func query(_ call: inout Call, _ target: Keyspace, designID: String, view name: String,
                      partition: String? = nil) async throws -> Response {
        let (db, collection) = try target.open(call.node)
        var parsed = try await queryOptions(&call)
        parsed.sequences = call.sequences(db.uuid)
        if let partition {
            if let given = parsed.partition, given != partition {
                throw CouchError(.badRequest, "bad_request", "Conflicting value for `partition` in query string")
            }
            parsed.partition = partition
        }
        let configuration = call.node.configuration
        try applyLimit(&parsed.limit, max: parsed.partition != nil ? configuration.partitionQueryLimit : configuration.queryLimit)
        let options = parsed
        let reader = call.reader
        return try await blocking {
            // On a database with a sync function, a reader's rows are those of documents in its channels.
            var filter: (@Sendable (String) -> Bool)?
            if let reader {
                let visible = try ChannelIndex.of(db).visibleIDs(in: collection, to: reader)
                filter = { visible.contains($0) }
            }
            let (result, reduced) = try run(collection, designID: designID, view: name, options: options, filter: filter)
            return Reply.raw(.ok, try render(result, options: options, reduced: reduced, database: db))
        }
    }

    /// CouchDB's `query_limit` / `partition_query_limit`: a query without a limit gets the maximum, one above it is
    /// refused.
    static func applyLimit(_ limit: inout Int?, max: Int?) throws {
        guard let max else { return }
        guard let given = limit else { limit = max; return }
        if given > max {
            throw CouchError(.badRequest, "query_parse_error", "Limit is too large, must not exceed \(max)")
        }
    }

    /// The view query parameters of a call: the query string, and for POST the JSON body's members and `keys`.
    static func queryOptions(_ call: inout Call, allowOptions: Bool = false) async throws -> Options {
        guard call.method == .get || call.method == .post || call.method == .head || (allowOptions && call.method == .options) else {
            throw CouchError.methodNotAllowed("GET,POST,HEAD")
        }
        var keys: [JSON]?
        var bodyOptions: [String: String] = [:]
        if call.method == .post {
            guard call.header(.contentType)?.lowercased().hasPrefix("application/json") == true else {
                throw CouchError.badContentType
            }
            guard case .object(let body) = try call.parseJSON(try await call.bodyBytes()) else {
                throw CouchError.badRequest("Request body must be a JSON object")
            }
            // CouchDB takes the query parameters in a POST body too (JSON values, as in the query string).
            for (name, value) in body where name != "keys" && name != "queries" {
                if case .string(let text) = value, ["stale", "update", "full_text"].contains(name) {
                    bodyOptions[name] = text
                } else {
                    bodyOptions[name] = value.jsonString
                }
            }
            switch body["keys"] {
            case .array(let k)?: keys = k
            case nil: break
            default: throw CouchError.badRequest("`keys` member must be an array.")
            }
            if case .array? = body["queries"] {
                throw CouchError(.badRequest, "query_parse_error", "Multiple `queries` are not supported; send one query per request")
            }
        }
        // Parameters in both the body and the query string take the query string's (as CouchDB).
        let o = QueryOptions(nil).merging(bodyOptions).merging(call.query.values)
        if keys == nil, let k = try o.json("keys") {
            guard case .array(let list) = k else { throw CouchError(.badRequest, "query_parse_error", "`keys` must be a JSON array") }
            keys = list
        }
        return try Options(o, keys: keys)
    }

    /// Runs a design view's query; whether the result is reduced rows.
    static func run(_ collection: SetteeStore.Collection, designID: String, view name: String,
                    options: Options, filter: (@Sendable (String) -> Bool)? = nil) throws -> (ViewQueryResult, reduced: Bool) {
        guard let record = try collection.record(id: designID) else { throw CouchError.notFound("missing") }
        if record.deleted { throw CouchError.notFound("deleted") }
        guard case .object(let body) = try JSON.parse(record.body) else { throw CouchError.notFound("missing") }
        let design: DesignView
        do {
            design = try DesignView.named(name, in: body, id: designID)
        } catch let e as SetteeError where e.code == .badRequest {
            throw CouchError(.badRequest, "invalid_design_doc", e.reason)
        }
        var q = design.register(on: collection).createQuery()
        q.key = options.key
        q.keys = options.keys
        q.startKey = options.startKey
        q.endKey = options.endKey
        q.startKeyDocID = options.startKeyDocID
        q.endKeyDocID = options.endKeyDocID
        q.inclusiveEnd = options.inclusiveEnd
        q.descending = options.descending
        q.limit = options.limit
        q.skip = options.skip
        q.includeDocs = options.includeDocs
        q.conflicts = options.conflicts
        q.mapOnly = !options.reduce
        q.group = options.group
        q.groupLevel = options.groupLevel
        q.indexUpdateMode = options.update
        q.fullTextQuery = options.fullText
        q.fullTextSnippets = options.snippets
        q.partition = options.partition
        q.documentFilter = filter
        if options.reduce && design.reducer == nil && options.reduceExplicit {
            throw CouchError(.badRequest, "query_parse_error", "Reduce is invalid for map-only views.")
        }
        let result: ViewQueryResult
        do {
            result = try q.run()
        } catch let e as SetteeError where e.code == .badRequest && e.reason.hasPrefix("builtin_reduce_error: ") {
            throw CouchError(.badRequest, "builtin_reduce_error", String(e.reason.dropFirst("builtin_reduce_error: ".count)))
        }
        return (result, design.reducer != nil && options.reduce && options.fullText == nil)
    }

    /// The answer's bytes. `database` supplies attachment bodies for `include_docs` with `attachments=true`.
    static func render(_ result: ViewQueryResult, options: Options, reduced: Bool, database: Database? = nil) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + result.count * 64)
        func append(_ s: String) { out.append(contentsOf: Array(s.utf8)) }
        if reduced {
            append("{")
            if options.updateSeq {
                append("\"update_seq\":")
                options.sequences.append(result.sequenceNumber, to: &out)
                append(",")
            }
            append("\"rows\":[")
        } else {
            append("{\"total_rows\":\(result.totalRows),\"offset\":\(result.offset),")
            if options.updateSeq {
                append("\"update_seq\":")
                options.sequences.append(result.sequenceNumber, to: &out)
                append(",")
            }
            append("\"rows\":[")
        }
        for (i, row) in result.enumerated() {
            if i > 0 { append(",\n") }
            try rowJSON(row, options: options, reduced: reduced, database: database).serialize(into: &out)
        }
        append("]}")
        return out
    }

    /// One row of a view's answer, in CouchDB's shape (also a list function's `getRow()`). `database` supplies
    /// attachment bodies and encodings for `include_docs` with `attachments` / `att_encoding_info`.
    static func rowJSON(_ row: ViewQueryRow, options: Options, reduced: Bool, database: Database? = nil) throws -> JSON {
        var o = JSONObject()
        if reduced {
            o["key"] = row.key
            if case .object(let v)? = row.value, v.count == 1, let reason = v["reduce_overflow_error"] {
                // A JavaScript reduce whose output didn't shrink (`[query_server_config] reduce_limit`).
                o["error"] = "reduce_overflow_error"
                o["reason"] = reason
            } else {
                o["value"] = row.value ?? .null
            }
        } else if row.fullText != nil {
            o["id"] = .string(row.sourceDocumentID ?? "")
            o["matches"] = .array(row.matches.map { m in
                ["range": [.int(Int64(m.offset)), .int(Int64(m.length))], "term": .int(Int64(m.term))]
            })
            o["value"] = row.value ?? .null
            if let snippet = row.snippet(wordStart: "<b>", wordEnd: "</b>"), options.snippets {
                o["snippet"] = .string(snippet)
            }
            if options.includeDocs { o["doc"] = try document(row.document, options: options, database: database) }
        } else {
            o["id"] = .string(row.sourceDocumentID ?? "")
            o["key"] = row.key
            o["value"] = row.value ?? .null
            if options.includeDocs { o["doc"] = try document(row.document, options: options, database: database) }
        }
        return .object(o)
    }

    /// A row's document as `include_docs` gives it: with `attachments=true` each attachment's data inline (base64,
    /// decoded), with `att_encoding_info=true` the stubs of gzip-stored ones with `encoding` and `encoded_length`,
    /// as CouchDB's view rows have them.
    static func document(_ doc: JSON?, options: Options, database: Database?) throws -> JSON {
        guard case .object(var d)? = doc, let database, options.attachments || options.attEncodingInfo else { return doc ?? .null }
        if options.attachments {
            try DocumentOutput.inlineAttachments(&d, database: database)
        } else if options.attEncodingInfo {
            try DocumentOutput.addEncodingInfo(&d, database: database)
        }
        return .object(d)
    }

    /// CouchDB's view query parameters.
    struct Options: Sendable {
        var key: JSON?
        var keys: [JSON]?
        var startKey: JSON?
        var endKey: JSON?
        var startKeyDocID: String?
        var endKeyDocID: String?
        var inclusiveEnd = true
        var descending = false
        var limit: Int?
        var skip = 0
        var includeDocs = false
        var reduce = true
        var reduceExplicit = false
        var group = false
        var groupLevel = 0
        var update: ViewIndexUpdateMode = .before
        var updateSeq = false
        var conflicts = false
        /// With `include_docs`: attachment data inline (`attachments`), encodings in stubs (`att_encoding_info`).
        var attachments = false
        var attEncodingInfo = false
        /// How `update_seq` is written (CouchDB 3's opaque form).
        var sequences = CouchSequence(node: "", databaseUUID: "")
        var fullText: String?
        var snippets = false
        /// The partition to read (the path's `/_partition/{p}/…`, or `?partition=`).
        var partition: String?

        init(_ o: QueryOptions, keys: [JSON]?) throws {
            func json(_ names: String...) throws -> JSON? {
                for n in names { if let v = try parse(o, n) { return v } }
                return nil
            }
            key = try json("key")
            self.keys = keys
            startKey = try json("startkey", "start_key")
            endKey = try json("endkey", "end_key")
            startKeyDocID = try o.jsonString("startkey_docid") ?? o.jsonString("start_key_doc_id")
            endKeyDocID = try o.jsonString("endkey_docid") ?? o.jsonString("end_key_doc_id")
            func bool(_ name: String, default def: Bool = false) throws -> Bool {
                do { return try o.bool(name, default: def) } catch {
                    throw CouchError(.badRequest, "query_parse_error", "Invalid boolean parameter: \(name)=\(o[name] ?? "")")
                }
            }
            inclusiveEnd = try bool("inclusive_end", default: true)
            descending = try bool("descending")
            limit = try int(o, "limit")
            skip = try int(o, "skip") ?? 0
            includeDocs = try bool("include_docs")
            reduceExplicit = o.has("reduce")
            reduce = try bool("reduce", default: true)
            group = try bool("group")
            // group_level is the more specific of the two: with both, it wins.
            if let level = try int(o, "group_level") {
                groupLevel = level
                group = false
            }
            if key != nil && keys != nil {
                throw CouchError(.badRequest, "query_parse_error", "`key` is incompatible with `keys`")
            }
            if keys != nil && (startKey != nil || endKey != nil) {
                throw CouchError(.badRequest, "query_parse_error", "`keys` is incompatible with `startkey` and `endkey`")
            }
            switch o["stale"] {
            case nil: break
            case "ok"?: update = .never
            case "update_after"?: update = .after
            case let v?: throw CouchError(.badRequest, "query_parse_error", "Invalid value for `stale`: \(v) (ok, update_after)")
            }
            switch o["update"] {
            case nil, "true"?: break
            case "false"?: update = .never
            case "lazy"?: update = .after
            case let v?: throw CouchError(.badRequest, "query_parse_error", "Invalid value for `update`: \(v) (true, false, lazy)")
            }
            updateSeq = try bool("update_seq")
            conflicts = try bool("conflicts")
            attachments = try bool("attachments")
            attEncodingInfo = try bool("att_encoding_info")
            fullText = o["full_text"]
            snippets = try bool("snippets")
            if let p = try o.jsonString("partition") {
                do { try DocumentIDs.validatePartition(p) } catch { throw CouchError.from(error) }
                partition = p
            }
        }

        private func parse(_ o: QueryOptions, _ name: String) throws -> JSON? {
            guard let text = o[name] else { return nil }
            do { return try JSON.parse(text) } catch {
                throw CouchError(.badRequest, "query_parse_error", "Invalid JSON for `\(name)`: \(text)")
            }
        }

        private func int(_ o: QueryOptions, _ name: String) throws -> Int? {
            guard let v = o[name] else { return nil }
            guard let n = Int(v), n >= 0 else {
                throw CouchError(.badRequest, "query_parse_error", "Invalid value for integer: \"\(v)\" (`\(name)` must be a non-negative integer)")
            }
            return n
        }
    }

    /// `GET /{db}/_design/{ddoc}/_info`: the design document's views and their index state.
    static func info(_ call: inout Call, _ target: Keyspace, designID: String) async throws -> Response {
        guard call.method == .get || call.method == .head else { throw CouchError.methodNotAllowed("GET,HEAD") }
        let (db, collection) = try target.open(call.node)
        // The views live in the database's file: compacting it (also `POST /{db}/_compact/{ddoc}`) compacts them.
        let compacting = call.node.tasks.isRunning(.databaseCompaction, database: db.name)
        return try await blocking {
            guard let record = try collection.record(id: designID), !record.deleted,
                  case .object(let body) = try JSON.parse(record.body) else { throw CouchError.notFound("missing") }
            let views: [DesignView]
            do { views = try DesignView.all(in: body, id: designID) } catch let e as SetteeError {
                throw CouchError(.badRequest, "invalid_design_doc", e.reason)
            }
            var rows = 0, size = 0, fileSize = 0
            var seq: UInt64 = 0
            var collator = ""
            for design in views {
                let info = try design.register(on: collection).info()
                rows += info.rowCount
                size += info.dataSize
                fileSize += info.fileSize
                seq = max(seq, info.lastSequence)
                collator = info.collatorVersion
            }
            // The signature names the views' definitions: it changes when (and only when) they do, as CouchDB's.
            let signature = Hex.encode(MD5.hash(Array(views.sorted { $0.name < $1.name }
                .map { $0.name + "\u{0}" + $0.version }.joined(separator: "\u{1}").utf8)))
            return Reply.json(.ok, ["name": .string(String(designID.dropFirst("_design/".count))),
                                    "view_index": ["language": .string(DesignView.isJavaScript(body) ? "javascript" : "sqlpp"),
                                                   "signature": .string(signature), "views": .int(Int64(views.count)),
                                                   "rows": .int(Int64(rows)), "update_seq": .int(Int64(seq)), "purge_seq": 0,
                                                   "sizes": ["file": .int(Int64(fileSize)), "active": .int(Int64(size)), "external": .int(Int64(size))],
                                                   "updater_running": false, "compact_running": .bool(compacting), "waiting_commit": false,
                                                   "waiting_clients": 0,
                                                   "updates_pending": ["minimum": 0, "preferred": 0, "total": 0],
                                                   "collator_versions": .array(collator.isEmpty ? [] : [.string(collator)])]])
        }
    }
}
