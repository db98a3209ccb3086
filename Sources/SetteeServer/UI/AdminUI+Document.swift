import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// A database's documents (`/_utils/db/{db}`, paged, with a jump to an id) and a document's editor
/// (`…/doc/{id}`, `…/new`): saving, deleting, and its attachments and conflicts.
extension AdminUI {
    func documents(_ db: String) async throws -> Response {
        let q = FormData(query: call.request.uri.query)
        let limit = min(max(Int(q["limit"] ?? "") ?? 25, 1), 500)
        let skip = max(Int(q["skip"] ?? "") ?? 0, 0)
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        var options = "include_docs=true&conflicts=true&limit=\(limit + 1)&skip=\(skip)"
        if let start = q.text("startkey") { options += "&startkey=" + AdminUI.encodeQuery(JSON.string(start).jsonString) }
        let list = await api(.get, [db, "_all_docs"], query: options)
        guard list.ok else { return try errorPage(list, title: db) }
        var rows: [DocumentRow] = []
        for row in list.json["rows"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue else { continue }
            var preview = row["doc"] ?? .null
            if case .object(var o) = preview {
                for key in o.keys where key.hasPrefix("_") { _ = o.removeValue(forKey: key) }
                preview = .object(o)
            }
            let conflicts = row["doc"]?["_conflicts"]?.arrayValue?.count ?? 0
            rows.append(DocumentRow(id: id, href: docHref(db, id), treeHref: treeHref(db, id),
                                    rev: row["value"]?["rev"]?.stringValue ?? "", preview: UIFormat.cell(preview),
                                    conflictBadge: conflicts > 0 ? "\(conflicts)" : nil))
        }
        let more = rows.count > limit
        if more { rows.removeLast() }
        var model = DocumentsPage(rows: rows, from: rows.isEmpty ? 0 : skip + 1, to: skip + rows.count,
                                  total: list.json["total_rows"]?.intValue.map(String.init) ?? "",
                                  startkey: q.text("startkey"))
        let keep = q.text("startkey").map { "&startkey=" + AdminUI.encodeQuery($0) } ?? ""
        if skip > 0 { model.prevHref = "\(dbHref(db))?skip=\(max(skip - limit, 0))&limit=\(limit)\(keep)" }
        if more { model.nextHref = "\(dbHref(db))?skip=\(skip + limit)&limit=\(limit)\(keep)" }
        return try page("documents", title: db, model, database: databaseHeader(db, info.json), nav: "documents")
    }

    func newDocument(_ db: String) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let uuid = await api(.get, ["_uuids"]).json["uuids"]?[0]?.stringValue ?? UUID().uuidString.lowercased()
        let model = DocumentPage(json: UIFormat.pretty(["_id": .string(uuid)]), isNew: true)
        return try page("document", title: "New document", model, database: databaseHeader(db, info.json), nav: "documents")
    }

    func document(_ db: String, _ id: String, editing: String? = nil, error: String? = nil,
                  status: HTTPResponse.Status = .ok) async throws -> Response {
        let q = FormData(query: call.request.uri.query)
        var options = "conflicts=true&deleted_conflicts=true"
        if let rev = q.text("rev") { options += "&rev=" + AdminUI.encodeQuery(rev) }
        let result = await api(.get, docSegments(db, id), query: options)
        // Database info can be closed to callers who may still read this document (a user's own `_users` entry).
        let info = await api(.get, [db])
        guard info.ok || result.ok else { return try errorPage(info, title: db) }
        var model = DocumentPage(json: "", isLocal: id.hasPrefix("_local/"), id: id, treeHref: treeHref(db, id),
                                 docHref: docHref(db, id), error: error)
        if result.ok, case .object(let doc) = result.json {
            model.rev = doc["_rev"]?.stringValue ?? ""
            model.deleted = doc["_deleted"]?.boolValue == true
            var body = doc
            _ = body.removeValue(forKey: "_conflicts")
            _ = body.removeValue(forKey: "_deleted_conflicts")
            let base = "/" + docSegments(db, id).map(AdminUI.encodeSegment).joined(separator: "/")
            if case .object(let atts)? = doc["_attachments"] {
                for (name, meta) in atts {
                    model.attachments.append(AttachmentRow(
                        name: name, href: base + "/" + AdminUI.encodeSegment(name), type: meta["content_type"]?.stringValue ?? "",
                        length: UIFormat.bytes(meta["length"]?.intValue), digest: meta["digest"]?.stringValue ?? ""))
                }
            }
            model.json = editing ?? UIFormat.pretty(.object(body))
            let conflicts = doc["_conflicts"]?.arrayValue?.compactMap(\.stringValue) ?? []
            model.conflicts = conflicts.map { RevisionLink(rev: $0, href: docHref(db, id) + "?rev=" + AdminUI.encodeQuery($0)) }
            let deletedConflicts = doc["_deleted_conflicts"]?.arrayValue?.compactMap(\.stringValue) ?? []
            if !deletedConflicts.isEmpty { model.deletedConflicts = deletedConflicts.joined(separator: ", ") }
            model.hasDocConflicts = !conflicts.isEmpty
            model.attachmentBase = base
            model.viewingRev = q.text("rev")
        } else if result.status == 404 {
            model.missing = result.message
            model.json = editing ?? UIFormat.pretty(["_id": .string(id)])
        } else {
            return try errorPage(result, title: id)
        }
        return try page("document", title: id, model, database: databaseHeader(db, info.ok ? info.json : .null),
                        nav: "documents", status: status)
    }

    func saveDocument(_ db: String, _ form: FormData) async throws -> Response {
        let text = form["doc"] ?? ""
        let fallbackID = form.text("id")
        func fail(_ message: String, status: HTTPResponse.Status) async throws -> Response {
            if let id = fallbackID { return try await document(db, id, editing: text, error: message, status: status) }
            let info = await api(.get, [db])
            return try page("document", title: "New document", DocumentPage(json: text, isNew: true, error: message),
                            database: databaseHeader(db, info.json), nav: "documents", status: status)
        }
        let parsed: JSON
        do { parsed = try JSON.parse(text) } catch { return try await fail("That is not valid JSON: \(error)", status: .badRequest) }
        guard case .object(let object) = parsed else { return try await fail("A document must be a JSON object.", status: .badRequest) }
        guard let id = object["_id"]?.stringValue ?? fallbackID, !id.isEmpty else {
            return try await fail("The document needs an \"_id\".", status: .badRequest)
        }
        let result = await api(.put, docSegments(db, id), body: parsed)
        guard result.ok else { return try await fail(result.message, status: HTTPResponse.Status(code: result.status)) }
        let rev = result.json["rev"]?.stringValue ?? ""
        return redirect(docHref(db, id), notice: "Saved \(id) as revision \(rev).")
    }

    func deleteDocument(_ db: String, _ id: String, _ form: FormData) async throws -> Response {
        let result = await api(.delete, docSegments(db, id), query: "rev=" + AdminUI.encodeQuery(form["rev"] ?? ""))
        guard result.ok else { return redirect(docHref(db, id), error: result.message) }
        return redirect(dbHref(db), notice: "Deleted \(id) (tombstone \(result.json["rev"]?.stringValue ?? "")).")
    }

    func deleteAttachment(_ db: String, _ id: String, _ form: FormData) async throws -> Response {
        let name = form["name"] ?? ""
        let result = await api(.delete, docSegments(db, id) + [name], query: "rev=" + AdminUI.encodeQuery(form["rev"] ?? ""))
        guard result.ok else { return redirect(docHref(db, id), error: result.message) }
        return redirect(docHref(db, id), notice: "Deleted attachment \(name).")
    }
}
