import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore
import SetteeIndex
import SetteeStore

/// A design document's show and update functions (`/{db}/_design/{ddoc}/_show/{name}[/{docid}]`,
/// `/{db}/_design/{ddoc}/_update/{name}[/{docid}]`), run in the ``JavaScriptEngine`` as CouchDB runs them.
enum DesignFunctionRoutes {
    /// A loaded design document: id, revision, body with `_id`/`_rev`.
    struct Design: Sendable {
        let id: String
        let revision: String
        let body: JSONObject
        var json: JSON { .object(body) }

        static func load(_ collection: SetteeStore.Collection, id: String) throws -> Design {
            guard let record = try collection.record(id: id), !record.deleted,
                  case .object(var body) = try JSON.parse(record.body) else { throw CouchError.notFound("missing") }
            body["_id"] = .string(id)
            body["_rev"] = .string(record.revID.description)
            return Design(id: id, revision: record.revID.description, body: body)
        }

        /// The function `name` of the member `kind` (`shows`, `updates`, `lists`).
        func requireFunction(_ kind: String, _ name: String) throws {
            guard case .object(let functions)? = body[kind], functions[name] != nil else {
                let what = ["shows": "show", "updates": "update", "lists": "list"][kind] ?? kind
                throw CouchError.notFound("missing \(what) function \(name) on design doc \(id)")
            }
        }
    }

    /// A document as design functions see it (`_id`, `_rev`, body), or nil when missing or deleted.
    static func document(_ collection: SetteeStore.Collection, id: String) throws -> (JSON, rev: String)? {
        guard let record = try collection.record(id: id), !record.deleted,
              case .object(var body) = try JSON.parse(record.body) else { return nil }
        body["_id"] = .string(id)
        body["_rev"] = .string(record.revID.description)
        return (.object(body), record.revID.description)
    }

    // MARK: _show

    static func show(_ call: inout Call, _ target: Keyspace, designID: String, name: String, docID: String?) async throws -> Response {
        guard call.method == .get || call.method == .post || call.method == .head else {
            throw CouchError.methodNotAllowed("GET,POST,HEAD")
        }
        let (db, c) = try target.open(call.node)
        let body: [UInt8]? = call.method == .post ? try await call.bodyBytes() : nil
        let security = (try? db.metadata("security")) ?? SecurityObject.adminOnlyJSON
        let request = JavaScriptRequest.make(call, database: db, body: body, id: docID, security: security)
        let accept = call.header(.accept) ?? ""
        let userCtx = call.userCtx
        let ifNoneMatch = call.header(.ifNoneMatch)
        return try await blocking {
            let design = try Design.load(c, id: designID)
            try design.requireFunction("shows", name)
            let doc = try docID.flatMap { try document(c, id: $0) }
            // As CouchDB: the ETag covers the design document, the document, what the client accepts and who asks.
            let etag = "\"" + Hex.encode(MD5.hash(Array("show|\(design.revision)|\(doc?.rev ?? "")|\(accept)|\(userCtx.name ?? "")|\(userCtx.roles)".utf8))) + "\""
            if let ifNoneMatch, ifNoneMatch.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag }) {
                return Reply.raw(.notModified, [], headers: [.eTag: etag])
            }
            let answer = try JavaScriptEngine.shared.call(designDocumentID: design.id, revision: design.revision,
                                                          designDocument: design.json, path: ["shows", name],
                                                          arguments: [doc?.0 ?? .null, request])
            guard case .array(let items) = answer, items.count == 2, items[0] == .string("resp") else {
                throw JavaScriptError.protocolError("show answered \(answer.jsonString.prefix(200))")
            }
            var response = try render(items[1], defaultType: "text/html; charset=utf-8")
            if response.headers[.eTag] == nil { response.headers[.eTag] = etag } else { response.headers[.eTag] = etag }
            response.headers[.vary] = "Accept"
            return response
        }
    }

    // MARK: _update

    static func update(_ call: inout Call, _ target: Keyspace, designID: String, name: String, docID: String?) async throws -> Response {
        guard call.method == .post || call.method == .put else { throw CouchError.methodNotAllowed("POST,PUT") }
        let (db, c) = try target.open(call.node)
        let body = try await call.bodyBytes()
        let security = (try? db.metadata("security")) ?? SecurityObject.adminOnlyJSON
        let request = JavaScriptRequest.make(call, database: db, body: body, id: docID, security: security)
        let writer = call.writer
        let canWriteDesign = call.access >= .admin
        let metrics = call.node.metrics
        return try await blocking {
            let design = try Design.load(c, id: designID)
            try design.requireFunction("updates", name)
            let doc = try docID.flatMap { try document(c, id: $0) }
            let answer = try JavaScriptEngine.shared.call(designDocumentID: design.id, revision: design.revision,
                                                          designDocument: design.json, path: ["updates", name],
                                                          arguments: [doc?.0 ?? .null, request])
            guard case .array(let items) = answer, items.count == 3, items[0] == .string("up") else {
                throw JavaScriptError.protocolError("update answered \(answer.jsonString.prefix(200))")
            }
            var status: HTTPResponse.Status = .ok
            var extra = HTTPFields()
            if case .object(let newDoc) = items[1] {
                // The document's own `_id` (not the URL's), as CouchDB saves it.
                let id = newDoc["_id"]?.stringValue ?? ""
                if id.isEmpty { throw CouchError(.badRequest, "illegal_docid", "Document id must not be empty") }
                _ = try DocumentIDs.validate(id)
                if id.hasPrefix("_design/") && !canWriteDesign { throw Auth.notDatabaseAdmin }
                var parsed = try DocumentInput.parse(newDoc, id: id)
                parsed.id = id
                let write = try DocumentInput.write(parsed, newEdits: true, collection: c)
                let rev = try c.write([write], as: writer)[0].get()
                metrics.documentsWritten(1)
                extra[HTTPField.Name("X-Couch-Update-NewRev")!] = rev.description
                extra[HTTPField.Name("X-Couch-Id")!] = id
                status = .created
            }
            var response = try render(items[2], defaultType: "text/html; charset=utf-8", status: status)
            for field in extra { response.headers[field.name] = field.value }
            return response
        }
    }

    // MARK: _list

    /// `/{db}/_design/{ddoc}/_list/{list}/{view}` (or `…/_list/{list}/{other ddoc}/{view}`): the view's query, its
    /// rows handed one by one to the list function (`getRow()`), the chunks it `send`s as the response body.
    static func list(_ call: inout Call, _ target: Keyspace, designID: String, name: String,
                     viewDesignID: String, view: String) async throws -> Response {
        let (db, c) = try target.open(call.node)
        // The rows: a view's (a list answers OPTIONS like GET: its function may look at req.method), or _all_docs'.
        var head: JSONObject = [:]
        var rows: [JSON] = []
        var viewOptions: ViewRoutes.Options?
        if view == "_all_docs" && viewDesignID == designID {
            guard case .object(let all) = try JSON.parse(try await BulkRoutes.allDocsBody(&call, target)) else {
                throw CouchError(.internalServerError, "error", "_all_docs answered no object")
            }
            head["total_rows"] = all["total_rows"] ?? .null
            head["offset"] = all["offset"] ?? .null
            if let seq = all["update_seq"] { head["update_seq"] = seq }
            rows = all["rows"]?.arrayValue ?? []
        } else {
            viewOptions = try await ViewRoutes.queryOptions(&call, allowOptions: true)
            viewOptions?.sequences = call.sequences(db.uuid)
        }
        let security = (try? db.metadata("security")) ?? SecurityObject.adminOnlyJSON
        let request = JavaScriptRequest.make(call, database: db, body: nil, security: security)
        let (fixedHead, fixedRows, queryOptions) = (head, rows, viewOptions)
        return try await blocking {
            let design = try Design.load(c, id: designID)
            try design.requireFunction("lists", name)
            var head = fixedHead, rows = fixedRows
            if let options = queryOptions {
                let (result, reduced) = try ViewRoutes.run(c, designID: viewDesignID, view: view, options: options)
                if !reduced {
                    head["total_rows"] = .int(Int64(result.totalRows))
                    head["offset"] = .int(Int64(result.offset))
                }
                if options.updateSeq { head["update_seq"] = options.sequences.json(result.sequenceNumber) }
                rows = try result.map { try ViewRoutes.rowJSON($0, options: options, reduced: reduced, database: db) }
            }
            var body: [UInt8] = []
            func append(_ chunks: JSON) {
                for chunk in chunks.arrayValue ?? [] { body.append(contentsOf: (chunk.stringValue ?? chunk.jsonString).utf8) }
            }
            let start: JSON = try JavaScriptEngine.shared.withDesignDocument(
                id: design.id, revision: design.revision, designDocument: design.json
            ) { send throws(JavaScriptError) -> JSON in
                let first = try send(.array([.string("ddoc"), .string(design.id), .array([.string("lists"), .string(name)]),
                                             .array([.object(head), request])]))
                guard case .array(let items) = first, items.count == 3, items[0] == .string("start") else {
                    if let error = JavaScriptError.from(answer: first) { throw error }
                    throw .protocolError("list answered \(first.jsonString.prefix(200))")
                }
                append(items[1])
                var ended = false
                var response = items[2]
                for row in rows {
                    let answer = try send(.array([.string("list_row"), row]))
                    if answer[0] == .string("error"), let error = JavaScriptError.from(answer: answer) { throw error }
                    guard case .array(let a) = answer, a.count >= 2, let kind = a[0].stringValue else {
                        if let error = JavaScriptError.from(answer: answer) { throw error }
                        throw .protocolError("list_row answered \(answer.jsonString.prefix(200))")
                    }
                    append(a[1])
                    // A function that calls start() only after getRow() has its response head sent with the end.
                    if a.count == 3, case .object = a[2] { response = a[2] }
                    if kind == "end" { ended = true; break }
                }
                if !ended {
                    let answer = try send(.array([.string("list_end")]))
                    guard case .array(let a) = answer, a.count == 2, a[0] == .string("end") else {
                        if let error = JavaScriptError.from(answer: answer) { throw error }
                        throw .protocolError("list_end answered \(answer.jsonString.prefix(200))")
                    }
                    append(a[1])
                }
                return response
            }
            // CouchDB's list responses are JSON unless the function says otherwise (start({headers}) or provides).
            var response = try render(start, defaultType: "application/json")
            response.body = ResponseBody(byteBuffer: ByteBuffer(bytes: body))
            response.headers[.contentLength] = nil
            response.headers[.vary] = "Accept"
            return response
        }
    }

    // MARK: Responses

    /// A design function's response object (`{code, headers, body | json | base64}`, or a string body) as HTTP.
    static func render(_ value: JSON, defaultType: String, status: HTTPResponse.Status = .ok) throws -> Response {
        var code = status
        var headers = HTTPFields()
        var bytes: [UInt8] = []
        var contentType: String?
        switch value {
        case .string(let text):
            bytes = Array(text.utf8)
        case .object(let o):
            if let c = o["code"]?.intValue { code = HTTPResponse.Status(code: Int(c)) }
            if case .object(let h)? = o["headers"] {
                for (k, v) in h {
                    guard let name = HTTPField.Name(k), let text = v.stringValue else { continue }
                    if name == .contentType { contentType = text } else if name != .eTag { headers[name] = text }
                }
            }
            if let json = o["json"] {
                bytes = json.serializedBytes
                contentType = contentType ?? "application/json"
            } else if let b64 = o["base64"]?.stringValue {
                bytes = Array(Data(base64Encoded: b64) ?? Data())
                contentType = contentType ?? "application/binary"
            } else if let body = o["body"] {
                bytes = Array((body.stringValue ?? body.jsonString).utf8)
            }
        case .null:
            break
        default:
            bytes = value.serializedBytes
        }
        return Reply.raw(code, bytes, contentType: contentType ?? defaultType, headers: headers)
    }
}
