import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeStore

/// `_bulk_docs`, `_bulk_get`, `_revs_diff` and `_all_docs`: the endpoints replicators lean on.
enum BulkRoutes {
    // MARK: _bulk_docs

    static func bulkDocs(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        guard call.method == .post else { throw CouchError.methodNotAllowed("POST") }
        try call.requireJSONContentType()
        let (_, c) = try target.open(call.node)
        let body = try await call.bodyObject()
        guard let docsValue = body["docs"] else { throw CouchError.badRequest("POST body must include `docs` parameter.") }
        guard let docs = docsValue.arrayValue else { throw CouchError.badRequest("`docs` parameter must be an array.") }
        if let value = body["new_edits"], value.boolValue == nil {
            throw CouchError.badRequest("`new_edits` parameter must be a boolean.")
        }
        if body["all_or_nothing"]?.boolValue == true {
            // CouchDB 3 dropped all-or-nothing commits; it answers every document so, with 417.
            let rows = docs.map { doc -> JSON in
                ["id": doc["_id"] ?? .null, "error": "not_implemented", "reason": "all_or_nothing is not supported"]
            }
            return Reply.json(.expectationFailed, .array(rows))
        }
        guard docs.count <= call.node.configuration.maxBulkDocs else {
            throw CouchError(.contentTooLarge, "max_bulk_docs_count_exceeded", "\(call.node.configuration.maxBulkDocs)")
        }
        let queryNewEdits = try call.query.bool("new_edits", default: true)
        let reader = call.reader
        let newEdits = body["new_edits"]?.boolValue ?? queryNewEdits
        let metrics = call.node.metrics
        let writer = call.writer
        let canWriteDesign = call.access >= .admin
        let maxAttachment = call.node.configuration.maxAttachmentSize
        let compression = call.node.configuration.attachments
        let rows: [JSON] = try await blocking {
            // Parse each document; failures become per-document rows, the rest go in one transaction through the
            // node's write rules (size, `_users`, validate_doc_update: ``WriteRules``), whose refusals are rows too.
            var results = [JSON?](repeating: nil, count: docs.count)
            var writes: [RevisionWrite] = []
            var positions: [Int] = []
            for (i, doc) in docs.enumerated() {
                do {
                    guard case .object(let o) = doc else { throw CouchError.badRequest("Document must be a JSON object") }
                    let id = o["_id"]?.stringValue ?? Hex.random(bytes: 16)
                    if o["_id"] != nil && o["_id"]?.stringValue == nil {
                        throw CouchError(.badRequest, "illegal_docid", "Document id must be a string")
                    }
                    if id.hasPrefix("_local/") {
                        let rev = o["_rev"]?.stringValue
                        var b = o
                        b.removeValue(forKey: "_id")
                        b.removeValue(forKey: "_rev")
                        let newRev = try c.putLocal(id: id, body: b, rev: rev)
                        results[i] = ["ok": true, "id": .string(id), "rev": .string(newRev)]
                        continue
                    }
                    _ = try c.database.isPartitioned ? DocumentIDs.validatePartitioned(id) : DocumentIDs.validate(id)
                    if id.hasPrefix("_design/") && !canWriteDesign { throw Auth.notDatabaseAdmin }
                    var parsed = try DocumentInput.parse(o, id: id)
                    parsed.id = id
                    let write = try DocumentInput.write(parsed, newEdits: newEdits, collection: c, maxAttachmentSize: maxAttachment,
                                                        compression: compression, reader: reader)
                    writes.append(write)
                    positions.append(i)
                } catch {
                    let e = CouchError.from(any: error)
                    // An illegal id fails the whole request, as in CouchDB; other errors are per document.
                    if e.status == .internalServerError || e.error == "illegal_docid" || e.error == "illegal_partition" { throw error }
                    var row: JSONObject = ["id": .string(doc["_id"]?.stringValue ?? "")]
                    row["error"] = .string(e.error)
                    row["reason"] = .string(e.reason)
                    results[i] = .object(row)
                }
            }
            let outcomes = try c.write(writes, as: writer)
            metrics.documentsWritten(outcomes.count { if case .success = $0 { true } else { false } })
            for (k, outcome) in outcomes.enumerated() {
                let i = positions[k], id = writes[k].id
                switch outcome {
                case .success(let rev):
                    results[i] = ["ok": true, "id": .string(id), "rev": .string(rev.description)]
                case .failure(let error):
                    let e = CouchError.from(error)
                    results[i] = ["id": .string(id), "error": .string(e.error), "reason": .string(e.reason)]
                }
            }
            if !newEdits { return results.compactMap { $0 }.filter { $0["error"] != nil } }
            return results.compactMap { $0 }
        }
        return Reply.json(call.quorumStatus(.created), .array(rows))
    }

    // MARK: _bulk_get

    static func bulkGet(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        guard call.method == .post else { throw CouchError.methodNotAllowed("POST") }
        let (db, c) = try target.open(call.node)
        let body = try await call.bodyObject()
        if let n = body["docs"]?.arrayValue?.count, n > call.node.configuration.maxBulkDocs {
            throw CouchError(.contentTooLarge, "max_bulk_get_count_exceeded", "\(call.node.configuration.maxBulkDocs)")
        }
        guard let requests = body["docs"]?.arrayValue else {
            throw CouchError.badRequest("Missing JSON list of 'docs'.")
        }
        var output = try DocumentOutput(call.query)
        let latest = try call.query.bool("latest")
        output.revs = try call.query.bool("revs")
        let baseOutput = output
        let metrics = call.node.metrics
        let reader = call.reader
        // The answer is assembled as bytes: a plain revision (no attachments, no extra metadata) is spliced
        // from its stored body without parsing it; anything else is rendered as a JSON tree.
        let answer: [UInt8] = try await blocking {
            var out: [UInt8] = Array(#"{"results":["#.utf8)
            out.reserveCapacity(requests.count * 400)
            let ids = requests.map { $0["id"]?.stringValue ?? "" }
            // A requested revision that is no longer a leaf is served from the archive until compaction.
            let archived = requests.map { r in baseOutput.archived(r["rev"]?.stringValue.flatMap(RevID.init).map { [$0] } ?? []) }
            let records = try c.records(ids: ids, withTree: true, archived: archived)
            // On a database with a sync function, a reader gets only the revisions in its channels (each checked by
            // its own routing, on the records just read).
            var visible: Set<ChannelIndex.RevisionKey>?
            if let reader {
                var asked: [ChannelIndex.RevisionKey] = []
                for (n, request) in requests.enumerated() {
                    guard let record = records[n], let id = request["id"]?.stringValue else { continue }
                    if let text = request["rev"]?.stringValue, let rev = RevID(text) {
                        for (r, _) in DocumentOutput.openRevs(record, requested: [rev], latest: latest) { asked.append(.init(id: id, rev: r)) }
                    } else {
                        asked.append(.init(id: id, rev: record.revID))
                    }
                }
                visible = try ChannelIndex.of(db).visibleRevisions(asked, in: c, to: reader)
            }
            var read = 0
            for (n, request) in requests.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                guard case .object(let r) = request, let id = r["id"]?.stringValue else {
                    out.append(contentsOf: #"{"id":null,"docs":[{"error":{"id":null,"rev":null,"error":"bad_request","reason":"Document id must be a string"}}]}"#.utf8)
                    continue
                }
                let revText = r["rev"]?.stringValue
                var docOutput = baseOutput
                if let since = r["atts_since"]?.arrayValue {
                    docOutput.attsSince = since.compactMap { $0.stringValue.flatMap(RevID.init) }
                }
                out.append(contentsOf: #"{"id":"#.utf8)
                JSON.appendString(id, to: &out)
                out.append(contentsOf: #","docs":["#.utf8)
                func error(_ rev: String?, _ e: String, _ reason: String) {
                    let value: JSON = ["error": ["id": .string(id), "rev": rev.map(JSON.string) ?? .null, "error": .string(e),
                                                 "reason": .string(reason)]]
                    value.serialize(into: &out)
                }
                func emit(_ record: DocumentRecord, _ rev: RevID, _ body: [UInt8], _ deleted: Bool) throws {
                    out.append(contentsOf: #"{"ok":"#.utf8)
                    if docOutput.isPlainExceptRevs && !DocumentOutput.mayHaveAttachments(body), let tree = record.tree {
                        let history = docOutput.revs ? (rev.generation, tree.history(of: rev)) : nil
                        DocumentBytes.splice(id: record.id, rev: rev.description, deleted: deleted, body: body, into: &out,
                                             revisions: history)
                    } else {
                        JSON.object(try docOutput.render(record, rev: rev, body: body, deleted: deleted, database: db))
                            .serialize(into: &out)
                    }
                    out.append(UInt8(ascii: "}"))
                    read += 1
                }
                var invalidID: SetteeError?
                if db.isPartitioned {
                    do throws(SetteeError) { try DocumentIDs.requirePartition(id) } catch { invalidID = error }
                }
                if let invalidID {
                    let e = CouchError.from(invalidID)
                    error(revText, e.error, e.reason)
                } else if let visible, let record = records[n], revText == nil, !visible.contains(.init(id: id, rev: record.revID)) {
                    error(revText, "forbidden", "You are not allowed to see this document.")
                } else if let record = records[n] {
                    if let revText {
                        if let rev = RevID(revText) {
                            var first = true
                            for (r, found) in DocumentOutput.openRevs(record, requested: [rev], latest: latest) {
                                if !first { out.append(UInt8(ascii: ",")) }
                                first = false
                                if let visible, !visible.contains(.init(id: id, rev: r)) {
                                    error(r.description, "forbidden", "You are not allowed to see this document.")
                                } else if found, let revision = record.revision(r) {
                                    try emit(record, r, revision.body, revision.deleted)
                                } else {
                                    error(r.description, "not_found", "missing")
                                }
                            }
                        } else {
                            error(revText, "bad_request", "Invalid rev format")
                        }
                    } else {
                        try emit(record, record.revID, record.body, record.deleted)
                    }
                } else {
                    error(revText, "not_found", "missing")
                }
                out.append(contentsOf: "]}".utf8)
            }
            out.append(contentsOf: "]}".utf8)
            metrics.documentsRead(read)
            return out
        }
        return Reply.raw(.ok, answer, contentType: "application/json")
    }

    // MARK: _revs_diff

    /// `POST /{db}/_revs_diff`, and `POST /{db}/_missing_revs` (`missingRevs`: CouchDB 1's shape,
    /// `{"missing_revs": {id: [rev…]}}`, listing only documents with missing revisions).
    static func revsDiff(_ call: inout Call, _ target: Keyspace, missingRevs: Bool = false) async throws -> Response {
        guard call.method == .post else { throw CouchError.methodNotAllowed("POST") }
        let (_, c) = try target.open(call.node)
        let body = try await call.bodyObject()
        var request: [(id: String, revs: [RevID])] = []
        for (id, revs) in body {
            guard let list = revs.arrayValue else { throw CouchError.badRequest("Revisions of \(id) must be an array") }
            request.append((id, try list.map { v in
                guard let s = v.stringValue, let r = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
                return r
            }))
        }
        let req = request
        let reader = call.reader
        let diff = try await blocking {
            var diff = try c.revsDiff(req)
            if let reader {
                // A document outside the reader's channels is answered as unknown: all of its revisions missing.
                let visible = try ChannelIndex.of(c.database).visible(req.map(\.id), in: c, to: reader)
                diff.removeAll { !visible.contains($0.id) }
                for (id, revs) in req where !visible.contains(id) && !revs.isEmpty {
                    var seen = Set<RevID>()
                    diff.append((id, RevTree.RevsDiff(missing: revs.filter { seen.insert($0).inserted }, possibleAncestors: [])))
                }
            }
            return diff
        }
        if missingRevs {
            var out = JSONObject()
            for (id, d) in diff where !d.missing.isEmpty { out[id] = .array(d.missing.map { .string($0.description) }) }
            return Reply.json(.ok, ["missing_revs": .object(out)])
        }
        var out = JSONObject()
        for (id, d) in diff {
            var entry: JSONObject = ["missing": .array(d.missing.map { .string($0.description) })]
            if !d.possibleAncestors.isEmpty {
                entry["possible_ancestors"] = .array(d.possibleAncestors.map { .string($0.description) })
            }
            out[id] = .object(entry)
        }
        return Reply.json(.ok, .object(out))
    }

    // MARK: _all_docs

    /// The options of an `_all_docs`-shaped request (`_all_docs`, `_design_docs`, `_local_docs`): from the query
    /// string and, for POST, the JSON body; where both name an option the query string wins, as in CouchDB.
    struct DocListRequest {
        var options = SetteeStore.Collection.AllDocsOptions()
        var keys: [String]?
        var conflicts = false
        var updateSeq = false

        init(_ call: inout Call) async throws {
            let q = call.query
            var bodyOptions = JSONObject()
            switch call.method {
            case .get, .head: break
            case .post:
                // As CouchDB: a body that says it is something else than JSON is 415.
                if let type = call.header(.contentType)?.lowercased(), !type.hasPrefix("application/json") {
                    throw CouchError.badContentType
                }
                bodyOptions = try await call.bodyObject()
            default: throw CouchError.methodNotAllowed("GET,HEAD,POST")
            }
            func option(_ names: String...) throws -> JSON? {
                for n in names { if let v = try q.json(n) { return v } }
                for n in names { if let v = bodyOptions[n] { return v } }
                return nil
            }
            func boolOption(_ name: String, _ def: Bool) throws -> Bool {
                if q.has(name) { return try q.bool(name, default: def) }
                if let v = bodyOptions[name] { return v.boolValue ?? def }
                return def
            }
            func intOption(_ name: String) throws -> Int? {
                if q.has(name) { return try q.int(name) }
                if let v = bodyOptions[name] {
                    guard let n = v.intValue else { throw CouchError(.badRequest, "query_parse_error", "Invalid value for integer: \(v.jsonString)") }
                    return Int(n)
                }
                return nil
            }
            if let k = try option("keys") {
                guard let list = k.arrayValue else { throw CouchError.badRequest("`keys` body member must be an array.") }
                keys = list.map { $0.stringValue ?? $0.jsonString }
            }
            options.startKey = try option("startkey", "start_key").map { $0.stringValue ?? $0.jsonString }
            options.endKey = try option("endkey", "end_key").map { $0.stringValue ?? $0.jsonString }
            if options.startKey == nil, let key = try option("key") { options.startKey = key.stringValue; options.endKey = key.stringValue }
            options.inclusiveEnd = try boolOption("inclusive_end", true)
            options.descending = try boolOption("descending", false)
            options.limit = try intOption("limit")
            if let limit = options.limit, limit < 0 {
                throw CouchError(.badRequest, "query_parse_error", "Invalid value for positive integer: \"\(limit)\"")
            }
            options.skip = try intOption("skip") ?? 0
            if options.skip < 0 {
                throw CouchError(.badRequest, "query_parse_error", "Invalid value for positive integer: \"\(options.skip)\"")
            }
            options.includeDocs = try boolOption("include_docs", false)
            conflicts = try boolOption("conflicts", false)
            updateSeq = try boolOption("update_seq", false)
        }
    }

    /// `GET|POST /{db}/_all_docs`, and `/{db}/_design_docs` (`designOnly`: the rows of design documents only).
    static func allDocs(_ call: inout Call, _ target: Keyspace, designOnly: Bool = false) async throws -> Response {
        Reply.raw(.ok, try await allDocsBody(&call, target, designOnly: designOnly))
    }

    /// The `_all_docs` answer's bytes (also the rows a list function reads from `_list/{name}/_all_docs`).
    static func allDocsBody(_ call: inout Call, _ target: Keyspace, designOnly: Bool = false,
                            partition: String? = nil) async throws -> [UInt8] {
        let (db, c) = try target.open(call.node)
        let parsed = try await DocListRequest(&call)
        var options = parsed.options
        var keys = parsed.keys
        var partition = partition
        if partition == nil, !designOnly, let given = call.query["partition"] {
            guard db.isPartitioned else {
                throw CouchError(.badRequest, "query_parse_error", "`partition` parameter is not supported on this db")
            }
            let p = (try? JSON.parse(Array(given.utf8)))?.stringValue ?? given
            do { try DocumentIDs.validatePartition(p) } catch { throw CouchError.from(error) }
            partition = p
        }
        let configuration = call.node.configuration
        try ViewRoutes.applyLimit(&options.limit, max: partition != nil ? configuration.partitionQueryLimit : configuration.queryLimit)
        // Design documents, or one partition's documents: ids from `low` up to (not including) `high`. Design
        // document ids sort between "_design/" and "_design0" ("0" follows "/"); a partition's between "p:" and
        // "p;" (";" follows ":").
        let idRange: (low: String, high: String)? = designOnly ? ("_design/", "_design0")
            : partition.map { ($0 + ":", $0 + ";") }
        if let (low, high) = idRange {
            if options.descending {
                options.startKey = min(options.startKey ?? high, high)
                options.endKey = max(options.endKey ?? low, low)
            } else {
                options.startKey = max(options.startKey ?? low, low)
                if options.endKey == nil || options.endKey! >= high { options.endKey = high; options.inclusiveEnd = false }
            }
            // (A partition doesn't filter `keys`: each is looked up as given, as in CouchDB.)
            if designOnly { keys = keys?.filter { $0 >= low && $0 < high } }
        }
        let conflicts = parsed.conflicts
        let updateSeq = parsed.updateSeq
        let sequences = call.sequences(db.uuid)
        let opts = options
        let keyList = keys
        let reader = call.reader
        let bytes: [UInt8] = try await blocking {
            var out: [UInt8] = []
            // On a database with a sync function, a reader lists only the documents in its channels.
            let visible = try reader.map { try ChannelIndex.of(db).visibleIDs(in: c, to: $0) }
            func row(_ r: SetteeStore.Collection.AllDocsRow, into out: inout [UInt8]) throws {
                out.append(contentsOf: #"{"id":"#.utf8)
                JSON.appendString(r.id, to: &out)
                out.append(contentsOf: #","key":"#.utf8)
                JSON.appendString(r.id, to: &out)
                out.append(contentsOf: #","value":{"rev":"#.utf8)
                JSON.appendString(r.rev.description, to: &out)
                if r.deleted { out.append(contentsOf: #","deleted":true"#.utf8) }
                out.append(UInt8(ascii: "}"))
                if opts.includeDocs {
                    out.append(contentsOf: #","doc":"#.utf8)
                    if r.deleted {
                        out.append(contentsOf: "null".utf8)
                    } else if conflicts, let record = try c.record(id: r.id, withTree: true), record.conflicted,
                              record.revID == r.rev {  // (the revision the row was read, and checked, at)
                        var output = DocumentOutput()
                        output.conflicts = true
                        out.append(contentsOf: try output.bytes(record, rev: record.revID, body: record.body, deleted: false, database: db))
                    } else {
                        DocumentBytes.splice(id: r.id, rev: r.rev.description, deleted: false, body: r.body ?? [], into: &out)
                    }
                }
                out.append(UInt8(ascii: "}"))
            }
            if let visible, keyList == nil {
                // The reader's documents in the asked range, in id order.
                func inRange(_ id: String) -> Bool {
                    let (low, high) = opts.descending ? (opts.endKey, opts.startKey) : (opts.startKey, opts.endKey)
                    let lowInclusive = opts.descending ? opts.inclusiveEnd : true
                    let highInclusive = opts.descending ? true : opts.inclusiveEnd
                    if let low, id < low || (!lowInclusive && id == low) { return false }
                    if let high, id > high || (!highInclusive && id == high) { return false }
                    return true
                }
                var ids = visible.sorted()
                let live = try c.allDocs(keys: ids, includeDocs: false).compactMap { $0 }.filter { !$0.deleted }
                ids = live.map(\.id).filter(inRange)
                if opts.descending { ids.reverse() }
                let page = Array(ids.dropFirst(opts.skip).prefix(opts.limit ?? Int.max))
                out.append(contentsOf: "{\"total_rows\":\(live.count),\"offset\":\(min(opts.skip, ids.count)),\"rows\":[".utf8)
                // The rows as read now, each revision checked by its own routing (a document may have left the
                // reader's channels since the index was read).
                let read = try c.allDocs(keys: page, includeDocs: opts.includeDocs).compactMap { $0 }
                let shown = try reader.map { try ChannelIndex.of(db).visibleRevisions(read.map { .init(id: $0.id, rev: $0.rev) }, in: c, to: $0) }
                for (i, r) in read.filter({ shown?.contains(.init(id: $0.id, rev: $0.rev)) ?? true }).enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    try row(r, into: &out)
                }
            } else if let keyList {
                var found = try c.allDocs(keys: keyList, includeDocs: opts.includeDocs)
                if let reader {
                    let shown = try ChannelIndex.of(db).visibleRevisions(found.compactMap { $0.map { .init(id: $0.id, rev: $0.rev) } },
                                                                         in: c, to: reader)
                    found = found.map { r in r.flatMap { shown.contains(.init(id: $0.id, rev: $0.rev)) ? $0 : nil } }
                }
                let total = try visible.map { try c.allDocs(keys: $0.sorted(), includeDocs: false).compactMap { $0 }.filter { !$0.deleted }.count }
                    ?? c.documentCounts().live
                out.append(contentsOf: "{\"total_rows\":\(total),\"offset\":null,\"rows\":[".utf8)
                var ordered = Array(zip(keyList, found))
                if opts.descending { ordered.reverse() }
                for (i, (key, r)) in ordered.dropFirst(opts.skip).prefix(opts.limit ?? Int.max).enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    if let r { try row(r, into: &out) } else {
                        out.append(contentsOf: #"{"key":"#.utf8)
                        JSON.appendString(key, to: &out)
                        out.append(contentsOf: #","error":"not_found"}"#.utf8)
                    }
                }
            } else {
                let result = try c.allDocs(opts)
                var total = result.totalRows
                if designOnly {
                    // `_design_docs` counts design documents, as CouchDB 3 does. (A partition's `total_rows` and
                    // `offset` are the database's, as CouchDB's are its shard's.)
                    total = try c.documentCounts(from: "_design/", below: "_design0").live
                }
                out.append(contentsOf: "{\"total_rows\":\(total),\"offset\":\(result.offset),\"rows\":[".utf8)
                for (i, r) in result.rows.enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    try row(r, into: &out)
                }
            }
            out.append(UInt8(ascii: "]"))
            if updateSeq {
                out.append(contentsOf: ",\"update_seq\":".utf8)
                sequences.append(db.lastSequence, to: &out)
            }
            out.append(contentsOf: "}\n".utf8)
            return out
        }
        return bytes
    }

    // MARK: _local_docs

    /// `GET|POST /{db}/_local_docs`: the database's local documents in id order, with `_all_docs`' options.
    /// `total_rows` and `offset` are null, as in CouchDB.
    static func localDocs(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        let (_, c) = try target.open(call.node)
        let parsed = try await DocListRequest(&call)
        let options = parsed.options
        let keys = parsed.keys
        let rows: [JSON] = try await blocking {
            func row(_ doc: SetteeStore.Collection.LocalDocument) -> JSON {
                var r: JSONObject = ["id": .string(doc.id), "key": .string(doc.id), "value": ["rev": .string(doc.rev)]]
                if options.includeDocs {
                    var out: JSONObject = ["_id": .string(doc.id), "_rev": .string(doc.rev)]
                    for (k, v) in doc.body { out[k] = v }
                    r["doc"] = .object(out)
                }
                return .object(r)
            }
            if let keys {
                var list = try keys.map { key -> JSON in
                    guard let doc = try c.localDocument(id: key) else { return ["key": .string(key), "error": "not_found"] }
                    return row(doc)
                }
                if options.descending { list.reverse() }
                return Array(list.dropFirst(options.skip).prefix(options.limit ?? Int.max))
            }
            return try c.localDocuments(options).map(row)
        }
        return Reply.json(.ok, ["total_rows": .null, "offset": .null, "rows": .array(rows)])
    }
}
