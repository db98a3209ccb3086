import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import NIOCore
import SetteeCore

/// The admin UI at `/_utils`: server-rendered pages (Mustache templates) over the node's own CouchDB API.
///
/// Every page and form reads and writes through ``api(_:_:query:body:rawBody:contentType:)``, which dispatches to
/// the same route handlers as HTTP clients use, as the signed-in user: the UI can do exactly what that user can do
/// with curl, with the same errors. Forms post back to `/_utils/…` and redirect (post/redirect/get); a small script
/// (`/_utils/assets/app.js`) adds the live parts: the change feed, replication progress and index builds.
struct AdminUI {
    let responder: CouchResponder
    var call: Call

    static let root = "/_utils"

    static func handle(_ call: inout Call, responder: CouchResponder) async throws -> Response {
        call.route = "utils"
        let ui = AdminUI(responder: responder, call: call)
        do {
            return try await ui.route()
        } catch {
            // Errors are pages for browsers (which ask for text/html); API clients and assets get CouchDB's JSON.
            if call.segments.dropFirst().first == "assets" || !call.accepts("text/html") { throw error }
            let couch = CouchError.from(any: error)
            return try ui.page("error", title: "\(couch.status.code) \(couch.error)", ["error": couch.reason],
                               status: couch.status)
        }
    }

    var signedIn: Bool { !call.node.config.hasAdmins || call.userCtx.name != nil }
    var method: HTTPRequest.Method { call.method }

    func route() async throws -> Response {
        let s = Array(call.segments.dropFirst())
        if s.isEmpty && !call.request.uri.path.hasSuffix("/") { return redirect(AdminUI.root + "/") }
        if s.first == "assets" {
            guard s.count == 2, method == .get || method == .head else { throw CouchError.notFound("missing") }
            return try UIAssets.response(named: s[1], request: call.request)
        }
        if s == ["login"] { return try await login() }
        guard signedIn else {
            let next = call.request.uri.path + (call.request.uri.query.map { "?" + $0 } ?? "")
            return redirect("\(AdminUI.root)/login?next=\(AdminUI.encodeQuery(next))")
        }
        var form = FormData(query: nil)
        if method == .post {
            form = FormData(try await bodyBytes())
            try CSRF.check(call, form)
        } else if method != .get && method != .head {
            throw CouchError.methodNotAllowed("GET,HEAD,POST")
        }
        let post = method == .post
        if s.isEmpty { return try await dashboard() }
        switch (s[0], s.count, post) {
        case ("logout", 1, true): return try await logout()
        case ("databases", 1, true): return try await createDatabase(form)
        case ("replication", 1, false): return try await replication()
        case ("replication", 1, true): return try await startReplication(form)
        case ("replication", 2, true) where s[1] == "delete": return try await deleteReplication(form)
        case ("metrics", 1, false): return try await metrics()
        case ("account", 1, false): return try await account()
        case ("account", 1, true): return try await changePassword(form)
        case ("db", 2..., _): return try await database(Array(s.dropFirst()), form: form, post: post)
        default: throw CouchError.notFound("No such page in the admin UI.")
        }
    }

    private func database(_ s: [String], form: FormData, post: Bool) async throws -> Response {
        let db = s[0]
        switch (s.count, post) {
        case (1, false): return try await documents(db)
        case (2, true) where s[1] == "delete": return try await deleteDatabase(db)
        case (2, true) where s[1] == "compact": return try await compact(db)
        case (2, false) where s[1] == "new": return try await newDocument(db)
        case (2, true) where s[1] == "save": return try await saveDocument(db, form)
        case (2, _) where s[1] == "query": return try await query(db)
        case (2, false) where s[1] == "views": return try await views(db)
        case (2, false) where s[1] == "indexes": return try await indexes(db)
        case (2, true) where s[1] == "indexes": return try await createIndex(db, form)
        case (3, true) where s[1] == "indexes" && s[2] == "delete": return try await deleteIndex(db, form)
        case (2, false) where s[1] == "changes": return try await changes(db)
        case (2, false) where s[1] == "security": return try await security(db)
        case (2, true) where s[1] == "security": return try await saveSecurity(db, form)
        case (3, false) where s[1] == "doc": return try await document(db, s[2])
        case (4, true) where s[1] == "doc" && s[3] == "delete": return try await deleteDocument(db, s[2], form)
        case (4, true) where s[1] == "doc" && s[3] == "delete-attachment": return try await deleteAttachment(db, s[2], form)
        case (3, false) where s[1] == "tree": return try await tree(db, s[2])
        case (4, true) where s[1] == "tree" && s[3] == "resolve": return try await resolve(db, s[2], form)
        default: throw CouchError.notFound("No such page in the admin UI.")
        }
    }

    // MARK: Sign-in

    private func login() async throws -> Response {
        let query = FormData(query: call.request.uri.query)
        var next = query["next"] ?? AdminUI.root + "/"
        if !next.hasPrefix(AdminUI.root) || next.hasPrefix("//") { next = AdminUI.root + "/" }
        if method == .post {
            let form = FormData(try await bodyBytes())
            try CSRF.checkOrigin(call)
            let name = form["name"] ?? "", password = form["password"] ?? ""
            let result = await api(.post, ["_session"], body: ["name": .string(name), "password": .string(password)])
            if result.ok, let cookie = result.headers[.setCookie] {
                var response = redirect(next)
                response.headers[.setCookie] = cookie
                return response
            }
            return try page("login", title: "Sign in", ["nextEncoded": AdminUI.encodeQuery(next), "name": name, "error": result.message],
                            status: result.status == 403 ? .forbidden : .unauthorized, chrome: false)
        }
        if !call.node.config.hasAdmins { return redirect(next) }
        return try page("login", title: "Sign in", ["nextEncoded": AdminUI.encodeQuery(next)], chrome: false)
    }

    private func logout() async throws -> Response {
        let result = await api(.delete, ["_session"])
        var response = redirect("\(AdminUI.root)/login")
        response.headers[.setCookie] = result.headers[.setCookie] ?? SessionCookies.clearHeader
        return response
    }

    // MARK: Databases

    private func dashboard() async throws -> Response {
        // "Open a database" (for users who may not list them all).
        if let open = FormData(query: call.request.uri.query).text("open") { return redirect(dbHref(open)) }
        let info = await api(.get, [])
        let all = await api(.get, ["_all_dbs"])
        var rows: [[String: Any]] = []
        var error: String?
        if all.ok, case .array(let names) = all.json {
            for case .string(let name) in names.prefix(500) {
                let dbInfo = await api(.get, [name])
                let j = dbInfo.json
                rows.append([
                    "name": name, "href": dbHref(name),
                    "docs": j["doc_count"]?.intValue.map(String.init) ?? "—",
                    "deleted": j["doc_del_count"]?.intValue.map(String.init) ?? "—",
                    "size": UIFormat.bytes(j["sizes"]?["file"]?.intValue),
                    "seq": j["update_seq"].map(UIFormat.cell) ?? "",
                ])
                if !dbInfo.ok { rows[rows.count - 1]["dbError"] = dbInfo.message }
            }
        } else {
            error = all.message
        }
        var data: [String: Any] = [
            "databases": rows, "count": rows.count,
            "version": info.json["vendor"]?["version"]?.stringValue ?? info.json["version"]?.stringValue ?? "",
            "uuid": info.json["uuid"]?.stringValue ?? "",
        ]
        let glance = await glance()
        data["glance"] = glance
        data["hasGlance"] = !glance.isEmpty
        if let error { data["error"] = error }
        return try page("dashboard", title: "Databases", data, nav: "databases")
    }

    private func createDatabase(_ form: FormData) async throws -> Response {
        guard let name = form.text("name") else { return redirect(AdminUI.root + "/", error: "Give the database a name.") }
        let result = await api(.put, [name])
        guard result.ok else { return redirect(AdminUI.root + "/", error: result.message) }
        return redirect(dbHref(name), notice: "Created database \(name).")
    }

    private func deleteDatabase(_ db: String) async throws -> Response {
        let result = await api(.delete, [db])
        guard result.ok else { return redirect(dbHref(db), error: result.message) }
        return redirect(AdminUI.root + "/", notice: "Deleted database \(db).")
    }

    private func compact(_ db: String) async throws -> Response {
        let result = await api(.post, [db, "_compact"], body: [:])
        guard result.ok else { return redirect(dbHref(db), error: result.message) }
        return redirect(dbHref(db), notice: "Compaction of \(db) started (see the size above when it ends).")
    }

    // MARK: Documents

    private func documents(_ db: String) async throws -> Response {
        let q = FormData(query: call.request.uri.query)
        let limit = min(max(Int(q["limit"] ?? "") ?? 25, 1), 500)
        let skip = max(Int(q["skip"] ?? "") ?? 0, 0)
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        var options = "include_docs=true&conflicts=true&limit=\(limit + 1)&skip=\(skip)"
        if let start = q.text("startkey") { options += "&startkey=" + AdminUI.encodeQuery(JSON.string(start).jsonString) }
        let list = await api(.get, [db, "_all_docs"], query: options)
        guard list.ok else { return try errorPage(list, title: db) }
        var rows: [[String: Any]] = []
        for row in list.json["rows"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue else { continue }
            var preview = row["doc"] ?? .null
            if case .object(var o) = preview {
                for key in o.keys where key.hasPrefix("_") { _ = o.removeValue(forKey: key) }
                preview = .object(o)
            }
            let conflicts = row["doc"]?["_conflicts"]?.arrayValue?.count ?? 0
            rows.append(["id": id, "href": docHref(db, id), "treeHref": treeHref(db, id),
                         "rev": row["value"]?["rev"]?.stringValue ?? "",
                         "preview": UIFormat.cell(preview)])
            if conflicts > 0 { rows[rows.count - 1]["conflictBadge"] = "\(conflicts)" }
        }
        let more = rows.count > limit
        if more { rows.removeLast() }
        var data: [String: Any] = dbData(db, info.json)
        data["rows"] = rows
        data["from"] = rows.isEmpty ? 0 : skip + 1
        data["to"] = skip + rows.count
        data["total"] = list.json["total_rows"]?.intValue.map(String.init) ?? ""
        if let start = q.text("startkey") { data["startkey"] = start }
        let keep = q.text("startkey").map { "&startkey=" + AdminUI.encodeQuery($0) } ?? ""
        if skip > 0 { data["prevHref"] = "\(dbHref(db))?skip=\(max(skip - limit, 0))&limit=\(limit)\(keep)" }
        if more { data["nextHref"] = "\(dbHref(db))?skip=\(skip + limit)&limit=\(limit)\(keep)" }
        return try page("documents", title: db, data, nav: "documents")
    }

    private func newDocument(_ db: String) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let uuid = await api(.get, ["_uuids"]).json["uuids"]?[0]?.stringValue ?? UUID().uuidString.lowercased()
        var data = dbData(db, info.json)
        data["json"] = UIFormat.pretty(["_id": .string(uuid)])
        data["isNew"] = true
        return try page("document", title: "New document", data, nav: "documents")
    }

    private func document(_ db: String, _ id: String, editing: String? = nil, error: String? = nil,
                          status: HTTPResponse.Status = .ok) async throws -> Response {
        let q = FormData(query: call.request.uri.query)
        var options = "conflicts=true&deleted_conflicts=true"
        if let rev = q.text("rev") { options += "&rev=" + AdminUI.encodeQuery(rev) }
        let result = await api(.get, docSegments(db, id), query: options)
        // Database info can be closed to callers who may still read this document (a user's own `_users` entry).
        let info = await api(.get, [db])
        guard info.ok || result.ok else { return try errorPage(info, title: db) }
        var data = dbData(db, info.ok ? info.json : .null)
        data["isLocal"] = id.hasPrefix("_local/")
        data["id"] = id
        data["treeHref"] = treeHref(db, id)
        data["docHref"] = docHref(db, id)
        if result.ok, case .object(let doc) = result.json {
            let rev = doc["_rev"]?.stringValue ?? ""
            data["rev"] = rev
            data["deleted"] = doc["_deleted"]?.boolValue == true
            var body = doc
            _ = body.removeValue(forKey: "_conflicts")
            _ = body.removeValue(forKey: "_deleted_conflicts")
            var attachments: [[String: Any]] = []
            if case .object(let atts)? = doc["_attachments"] {
                for (name, meta) in atts {
                    attachments.append([
                        "name": name,
                        "href": "/" + docSegments(db, id).map(AdminUI.encodeSegment).joined(separator: "/") + "/" + AdminUI.encodeSegment(name),
                        "type": meta["content_type"]?.stringValue ?? "",
                        "length": UIFormat.bytes(meta["length"]?.intValue), "digest": meta["digest"]?.stringValue ?? "",
                    ])
                }
            }
            data["attachments"] = attachments
            data["json"] = editing ?? UIFormat.pretty(.object(body))
            let conflicts = doc["_conflicts"]?.arrayValue?.compactMap(\.stringValue) ?? []
            data["conflicts"] = conflicts.map { ["rev": $0, "href": docHref(db, id) + "?rev=" + AdminUI.encodeQuery($0)] }
            let deletedConflicts = doc["_deleted_conflicts"]?.arrayValue?.compactMap(\.stringValue) ?? []
            if !deletedConflicts.isEmpty { data["deletedConflicts"] = deletedConflicts.joined(separator: ", ") }
            data["hasDocConflicts"] = !conflicts.isEmpty
            data["attachmentBase"] = "/" + docSegments(db, id).map(AdminUI.encodeSegment).joined(separator: "/")
            if let rev = q.text("rev") { data["viewingRev"] = rev }
        } else if result.status == 404 {
            data["missing"] = result.message
            data["json"] = editing ?? UIFormat.pretty(["_id": .string(id)])
        } else {
            return try errorPage(result, title: id)
        }
        if let error { data["error"] = error }
        return try page("document", title: id, data, nav: "documents", status: status)
    }

    private func saveDocument(_ db: String, _ form: FormData) async throws -> Response {
        let text = form["doc"] ?? ""
        let fallbackID = form.text("id")
        func fail(_ message: String, status: HTTPResponse.Status) async throws -> Response {
            if let id = fallbackID { return try await document(db, id, editing: text, error: message, status: status) }
            let info = await api(.get, [db])
            var data = dbData(db, info.json)
            data["json"] = text
            data["isNew"] = true
            data["error"] = message
            return try page("document", title: "New document", data, nav: "documents", status: status)
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

    private func deleteDocument(_ db: String, _ id: String, _ form: FormData) async throws -> Response {
        let result = await api(.delete, docSegments(db, id), query: "rev=" + AdminUI.encodeQuery(form["rev"] ?? ""))
        guard result.ok else { return redirect(docHref(db, id), error: result.message) }
        return redirect(dbHref(db), notice: "Deleted \(id) (tombstone \(result.json["rev"]?.stringValue ?? "")).")
    }

    private func deleteAttachment(_ db: String, _ id: String, _ form: FormData) async throws -> Response {
        let name = form["name"] ?? ""
        let result = await api(.delete, docSegments(db, id) + [name], query: "rev=" + AdminUI.encodeQuery(form["rev"] ?? ""))
        guard result.ok else { return redirect(docHref(db, id), error: result.message) }
        return redirect(docHref(db, id), notice: "Deleted attachment \(name).")
    }

    // MARK: Revision tree and conflicts

    private func leaves(_ db: String, _ id: String) async -> (APIResult, [(rev: String, deleted: Bool, start: Int, ids: [String], body: JSONObject)]) {
        let result = await api(.get, docSegments(db, id), query: "open_revs=all&revs=true")
        var out: [(rev: String, deleted: Bool, start: Int, ids: [String], body: JSONObject)] = []
        for entry in result.json.arrayValue ?? [] {
            guard case .object(let doc)? = entry["ok"], let rev = doc["_rev"]?.stringValue else { continue }
            let revisions = doc["_revisions"]
            let start = Int(revisions?["start"]?.intValue ?? Int64(RevID(rev)?.generation ?? 1))
            let ids = revisions?["ids"]?.arrayValue?.compactMap(\.stringValue) ?? []
            var body = doc
            _ = body.removeValue(forKey: "_revisions")
            out.append((rev, doc["_deleted"]?.boolValue == true, start, ids, body))
        }
        return (result, out)
    }

    private func tree(_ db: String, _ id: String) async throws -> Response {
        if id.hasPrefix("_local/") {
            throw CouchError.notFound("Local documents have no revision tree: they are not replicated and keep one revision.")
        }
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let (result, found) = await leaves(db, id)
        guard result.ok else { return try errorPage(result, title: id) }
        guard !found.isEmpty else { throw CouchError.notFound("\(id) has no revisions.") }
        let view = RevisionTreeView(leaves: found.map { ($0.rev, $0.deleted, $0.start, $0.ids) })
        let winner = view.winner ?? ""
        var data = dbData(db, info.json)
        data["id"] = id
        data["docHref"] = docHref(db, id)
        data["resolveHref"] = treeHref(db, id) + "/resolve"
        data["svg"] = view.svg { docHref(db, id) + "?rev=" + AdminUI.encodeQuery($0) }
        data["winner"] = winner
        let conflicts = view.conflicts
        data["hasConflicts"] = !conflicts.isEmpty
        data["conflictCount"] = conflicts.count
        data["revisionCount"] = view.nodes.count
        var leafRows: [[String: Any]] = []
        for leaf in found.sorted(by: { ($0.rev == winner ? 0 : 1, $0.rev) < ($1.rev == winner ? 0 : 1, $1.rev) }) {
            let state = leaf.rev == winner ? "winner" : leaf.deleted ? "deleted" : "conflict"
            var body = leaf.body
            _ = body.removeValue(forKey: "_rev")
            leafRows.append(["rev": leaf.rev, "state": state, "deleted": leaf.deleted, "canKeep": !leaf.deleted && !conflicts.isEmpty,
                             "json": UIFormat.pretty(.object(body)),
                             "href": docHref(db, id) + "?rev=" + AdminUI.encodeQuery(leaf.rev)])
        }
        data["leaves"] = leafRows
        // What the live leaves disagree on, member by member (the winner first).
        let live = found.filter { !$0.deleted }.sorted { ($0.rev == winner ? 0 : 1, $0.rev) < ($1.rev == winner ? 0 : 1, $1.rev) }
        if live.count > 1 {
            var keys: [String] = []
            for leaf in live { for key in leaf.body.keys where !key.hasPrefix("_") && !keys.contains(key) { keys.append(key) } }
            var diffs: [[String: Any]] = []
            for key in keys {
                let values = live.map { $0.body[key] }
                guard Set(values.map { $0?.jsonString ?? "(missing)" }).count > 1 else { continue }
                diffs.append(["key": key, "values": values.map { ["value": $0.map(UIFormat.cell) ?? "(missing)"] }])
            }
            data["diffRevs"] = live.map { ["rev": UIFormat.shortRev($0.rev)] }
            data["diffs"] = diffs
            data["hasDiffs"] = !diffs.isEmpty
        }
        if let w = found.first(where: { $0.rev == winner }) {
            var body = w.body
            _ = body.removeValue(forKey: "_rev")
            _ = body.removeValue(forKey: "_id")
            data["mergeJSON"] = UIFormat.pretty(.object(body))
        }
        return try page("tree", title: "Revisions of \(id)", data, nav: "documents")
    }

    /// Resolves a conflict: the kept leaf stays (optionally with an edited body written as its child), and every
    /// other live leaf gets a tombstone, all in one `_bulk_docs`.
    private func resolve(_ db: String, _ id: String, _ form: FormData) async throws -> Response {
        guard let keep = form.text("keep") else { return redirect(treeHref(db, id), error: "Pick the revision to keep.") }
        let (result, found) = await leaves(db, id)
        guard result.ok else { return redirect(treeHref(db, id), error: result.message) }
        guard found.contains(where: { $0.rev == keep && !$0.deleted }) else {
            return redirect(treeHref(db, id), error: "\(keep) is not a live leaf of \(id) any more; the tree changed. Look again.")
        }
        var docs: [JSON] = []
        if let edited = form.text("body") {
            guard case .object(var body)? = try? JSON.parse(edited) else {
                return redirect(treeHref(db, id), error: "The merged document is not a JSON object.")
            }
            body["_id"] = .string(id)
            body["_rev"] = .string(keep)
            docs.append(.object(body))
        }
        let losers = found.filter { !$0.deleted && $0.rev != keep }
        for loser in losers { docs.append(["_id": .string(id), "_rev": .string(loser.rev), "_deleted": true]) }
        guard !docs.isEmpty else { return redirect(treeHref(db, id), notice: "Nothing to resolve.") }
        let write = await api(.post, [db, "_bulk_docs"], body: ["docs": .array(docs)])
        guard write.ok else { return redirect(treeHref(db, id), error: write.message) }
        let failures = (write.json.arrayValue ?? []).compactMap { r -> String? in
            r["error"].map { "\(r["rev"]?.stringValue ?? ""): \($0.stringValue ?? "") \(r["reason"]?.stringValue ?? "")" }
        }
        guard failures.isEmpty else { return redirect(treeHref(db, id), error: "Not resolved: " + failures.joined(separator: "; ")) }
        let kept = form.text("body") == nil ? keep : (write.json[0]?["rev"]?.stringValue ?? keep)
        return redirect(treeHref(db, id), notice: "Resolved: kept \(kept), deleted \(losers.count) conflicting revision\(losers.count == 1 ? "" : "s").")
    }

    // MARK: Query

    private func query(_ db: String) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let q = FormData(query: call.request.uri.query)
        var data = dbData(db, info.json)
        let text = q.text("q")
        data["q"] = text ?? "SELECT META().id, * FROM _ LIMIT 10"
        data["params"] = q["params"] ?? ""
        data["mango"] = AdminUI.defaultMango
        if let mango = q.text("mango") {
            let status = await runMango(db, mango, into: &data)
            return try page("query", title: "Query \(db)", data, nav: "query", status: status)
        }
        if let text {
            var body: JSONObject = ["query": .string(text)]
            if let p = q.text("params") {
                guard case .object(let params)? = try? JSON.parse(p) else {
                    data["error"] = "Parameters must be a JSON object, like {\"city\": \"Paris\"}."
                    return try page("query", title: "Query \(db)", data, nav: "query", status: .badRequest)
                }
                body["params"] = .object(params)
            }
            let started = DispatchTime.now().uptimeNanoseconds
            let result = await api(.post, [db, "_query"], body: .object(body))
            let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            let plan = await api(.post, [db, "_query"], query: "explain=true", body: .object(body))
            if plan.ok, let text = plan.json["plan"]?.stringValue, !text.isEmpty { data["plan"] = text }
            if result.ok {
                let columns = result.json["columns"]?.arrayValue?.compactMap(\.stringValue) ?? []
                let rows = result.json["rows"]?.arrayValue ?? []
                data["columns"] = columns.map { ["name": $0] }
                data["rows"] = rows.prefix(1000).map { row in ["cells": columns.map { ["value": UIFormat.cell(row[$0])] }] }
                data["rowCount"] = rows.count
                data["truncated"] = rows.count > 1000
                data["elapsed"] = String(format: "%.1f", ms)
                data["json"] = UIFormat.pretty(.array(Array(rows.prefix(1000))))
                data["ran"] = true
            } else {
                data["error"] = result.message
                return try page("query", title: "Query \(db)", data, nav: "query", status: HTTPResponse.Status(code: result.status))
            }
        }
        return try page("query", title: "Query \(db)", data, nav: "query")
    }

    // MARK: Indexes

    private func indexes(_ db: String, error: String? = nil, form: FormData? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let list = await api(.get, [db, "_indexes"])
        var data = dbData(db, info.json)
        // update_seq is CouchDB's "N-…" string; its number is what an index's last_seq compares with.
        let updateSeq = info.json["update_seq"].map { $0.intValue ?? Int64((try? ChangeSequence.parse($0.stringValue ?? "")) ?? 0) } ?? 0
        var rows: [[String: Any]] = []
        for entry in list.json["indexes"]?.arrayValue ?? [] {
            let lastSeq = entry["last_seq"]?.intValue ?? 0
            var options: [String] = []
            if let w = entry["where"]?.stringValue { options.append("where \(w)") }
            if let p = entry["path"]?.stringValue { options.append("path \(p)") }
            if let l = entry["language"]?.stringValue { options.append("language \(l)") }
            if entry["ignoreAccents"]?.boolValue == true { options.append("ignoreAccents") }
            for key in ["dimensions", "centroids", "metric", "encoding", "numProbes"] {
                if let v = entry[key], v != .null { options.append("\(key) \(UIFormat.cell(v))") }
            }
            if entry["lazy"]?.boolValue == true { options.append("lazy") }
            if let trained = entry["trained"]?.boolValue { options.append(trained ? "trained" : "not trained yet") }
            if let n = entry["vectors"]?.intValue { options.append("\(n) vectors") }
            let percent = updateSeq == 0 ? 100 : Int(min(100, Double(lastSeq) * 100 / Double(updateSeq)))
            rows.append([
                "name": entry["name"]?.stringValue ?? "", "collection": entry["collection"]?.stringValue ?? "",
                "type": entry["type"]?.stringValue ?? "",
                "expressions": (entry["expressions"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", "),
                "options": options.joined(separator: " · "),
                "state": entry["state"]?.stringValue ?? "", "lastSeq": lastSeq, "percent": percent,
            ])
        }
        data["indexes"] = rows
        data["updateSeq"] = updateSeq
        if !list.ok { data["error"] = list.message }
        if let error { data["error"] = error }
        let f = form ?? FormData(query: nil)
        data["form"] = ["name": f["name"] ?? "", "expressions": f["expressions"] ?? "", "where": f["where"] ?? "",
                        "path": f["path"] ?? "", "collection": f["collection"] ?? "", "dimensions": f["dimensions"] ?? "",
                        "centroids": f["centroids"] ?? "", "language": f["language"] ?? "", "numProbes": f["numProbes"] ?? ""]
        return try page("indexes", title: "Indexes of \(db)", data, nav: "indexes", status: status)
    }

    private func createIndex(_ db: String, _ form: FormData) async throws -> Response {
        guard let name = form.text("name") else { return try await indexes(db, error: "Give the index a name.", form: form, status: .badRequest) }
        let type = form.text("type") ?? "value"
        var body: JSONObject = ["type": .string(type)]
        if let e = form.text("expressions") { body["expressions"] = .string(e) }
        if let c = form.text("collection") { body["collection"] = .string(c) }
        switch type {
        case "value":
            if let w = form.text("where") { body["where"] = .string(w) }
        case "fulltext":
            if let w = form.text("where") { body["where"] = .string(w) }
            if let l = form.text("language") { body["language"] = .string(l) }
            body["ignoreAccents"] = .bool(form.flag("ignoreAccents"))
        case "array":
            if let p = form.text("path") { body["path"] = .string(p) }
        case "vector":
            for key in ["dimensions", "centroids", "numProbes"] {
                if let v = form.text(key) {
                    guard let n = Int64(v) else { return try await indexes(db, error: "\(key) must be a whole number.", form: form, status: .badRequest) }
                    body[key] = .int(n)
                }
            }
            if let m = form.text("metric") { body["metric"] = .string(m) }
            if let e = form.text("encoding") { body["encoding"] = .string(e) }
            if form.flag("lazy") { body["lazy"] = true }
        default: break
        }
        let result = await api(.put, [db, "_indexes", name], body: .object(body))
        guard result.ok else {
            return try await indexes(db, error: result.message, form: form, status: HTTPResponse.Status(code: result.status))
        }
        let how = result.json["result"]?.stringValue ?? "created"
        return redirect("\(dbHref(db))/indexes", notice: "Index \(name): \(how).")
    }

    private func deleteIndex(_ db: String, _ form: FormData) async throws -> Response {
        let name = form["name"] ?? ""
        let query = form.text("collection").map { "collection=" + AdminUI.encodeQuery($0) }
        let result = await api(.delete, [db, "_indexes", name], query: query)
        guard result.ok else { return redirect("\(dbHref(db))/indexes", error: result.message) }
        return redirect("\(dbHref(db))/indexes", notice: "Dropped index \(name).")
    }

    // MARK: Changes

    private func changes(_ db: String) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let recent = await api(.get, [db, "_changes"], query: "descending=true&limit=25&style=all_docs")
        var data = dbData(db, info.json)
        data["changes"] = (recent.json["results"]?.arrayValue ?? []).map { change -> [String: Any] in
            let id = change["id"]?.stringValue ?? ""
            return ["seq": UIFormat.cell(change["seq"]), "id": id, "href": docHref(db, id),
                    "revs": (change["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue }.joined(separator: ", "),
                    "deleted": change["deleted"]?.boolValue == true]
        }
        // From the sequence read before the list, so nothing committed in between is missed.
        let since = AdminUI.encodeQuery(info.json["update_seq"].map { $0.stringValue ?? $0.jsonString } ?? "now")
        data["feedURL"] = "/" + AdminUI.encodeSegment(db) + "/_changes?feed=eventsource&since=\(since)&heartbeat=15000&style=all_docs"
        if !recent.ok { data["error"] = recent.message }
        return try page("changes", title: "Changes of \(db)", data, nav: "changes")
    }

    // MARK: Permissions

    private func security(_ db: String, editing: String? = nil, error: String? = nil,
                          status: HTTPResponse.Status = .ok) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let current = await api(.get, [db, "_security"])
        guard current.ok else { return try errorPage(current, title: db) }
        var data = dbData(db, info.json)
        data["json"] = editing ?? UIFormat.pretty(current.json)
        if let error { data["error"] = error }
        return try page("security", title: "Permissions of \(db)", data, nav: "security", status: status)
    }

    private func saveSecurity(_ db: String, _ form: FormData) async throws -> Response {
        let text = form["security"] ?? ""
        guard case .object? = try? JSON.parse(text) else {
            return try await security(db, editing: text, error: "The security object must be a JSON object.", status: .badRequest)
        }
        let result = await api(.put, [db, "_security"], rawBody: Array(text.utf8))
        guard result.ok else {
            return try await security(db, editing: text, error: result.message, status: HTTPResponse.Status(code: result.status))
        }
        return redirect("\(dbHref(db))/security", notice: "Saved the permissions of \(db).")
    }

    // MARK: Replication

    private func replication() async throws -> Response {
        let docs = await api(.get, ["_scheduler", "docs"])
        let tasks = await api(.get, ["_active_tasks"])
        let dbs = await api(.get, ["_all_dbs"])
        var data: [String: Any] = [:]
        data["jobs"] = (docs.json["docs"]?.arrayValue ?? []).map { d -> [String: Any] in
            ["docId": d["doc_id"]?.stringValue ?? "", "source": d["source"]?.stringValue ?? "",
             "target": d["target"]?.stringValue ?? "", "state": d["state"]?.stringValue ?? "",
             "written": UIFormat.cell(d["info"]?["docs_written"]), "updated": d["last_updated"]?.stringValue ?? "",
             "error": d["info"]?["error"]?.stringValue ?? ""]
        }
        data["tasks"] = (tasks.json.arrayValue ?? []).filter { $0["type"]?.stringValue == "replication" }.map { t -> [String: Any] in
            ["id": t["replication_id"]?.stringValue ?? "", "source": t["source"]?.stringValue ?? "",
             "target": t["target"]?.stringValue ?? "", "state": t["state"]?.stringValue ?? "",
             "read": UIFormat.cell(t["docs_read"]), "written": UIFormat.cell(t["docs_written"]),
             "pending": UIFormat.cell(t["changes_pending"]), "seq": UIFormat.cell(t["checkpointed_source_seq"])]
        }
        data["databases"] = (dbs.json.arrayValue ?? []).compactMap(\.stringValue).map { ["name": $0] }
        var errors: [String] = []
        if !docs.ok { errors.append(docs.message) }
        if !tasks.ok { errors.append(tasks.message) }
        if !errors.isEmpty { data["error"] = errors.joined(separator: " · ") }
        return try page("replication", title: "Replication", data, nav: "replication")
    }

    private func startReplication(_ form: FormData) async throws -> Response {
        guard let source = form.text("source"), let target = form.text("target") else {
            return redirect("\(AdminUI.root)/replication", error: "A replication needs a source and a target.")
        }
        let created = await api(.put, ["_replicator"])
        guard created.ok || created.status == 412 else { return redirect("\(AdminUI.root)/replication", error: created.message) }
        var doc: JSONObject = ["source": .string(source), "target": .string(target),
                               "continuous": .bool(form.flag("continuous")), "create_target": .bool(form.flag("create_target"))]
        let result: APIResult
        if let id = form.text("id") {
            doc["_id"] = .string(id)
            result = await api(.put, ["_replicator", id], body: .object(doc))
        } else {
            result = await api(.post, ["_replicator"], body: .object(doc))
        }
        guard result.ok else { return redirect("\(AdminUI.root)/replication", error: result.message) }
        let id = result.json["id"]?.stringValue ?? ""
        return redirect("\(AdminUI.root)/replication", notice: "Started replication \(id): \(source) → \(target).")
    }

    private func deleteReplication(_ form: FormData) async throws -> Response {
        let id = form["id"] ?? ""
        let doc = await api(.get, ["_replicator", id])
        guard doc.ok, let rev = doc.json["_rev"]?.stringValue else { return redirect("\(AdminUI.root)/replication", error: doc.message) }
        let result = await api(.delete, ["_replicator", id], query: "rev=" + AdminUI.encodeQuery(rev))
        guard result.ok else { return redirect("\(AdminUI.root)/replication", error: result.message) }
        return redirect("\(AdminUI.root)/replication", notice: "Stopped and removed replication \(id).")
    }

    // MARK: Account

    private func account(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let session = await api(.get, ["_session"])
        let ctx = session.json["userCtx"]
        var data: [String: Any] = [
            "name": ctx?["name"]?.stringValue ?? "",
            "roles": (ctx?["roles"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", "),
            "method": session.json["info"]?["authenticated"]?.stringValue ?? "",
        ]
        if let name = call.userCtx.name, call.node.config.snapshot.admins[name] == nil {
            data["canChangePassword"] = true
        } else if call.node.config.hasAdmins, call.userCtx.name != nil {
            data["configuredAdmin"] = true
        }
        if let error { data["error"] = error }
        return try page("account", title: "Your account", data, nav: "account", status: status)
    }

    /// A `_users` member changes their own password: the same `PUT /_users/org.couchdb.user:NAME` a CouchDB client
    /// makes (the `_users` rules let a user update their own document), after checking the current password.
    private func changePassword(_ form: FormData) async throws -> Response {
        guard let name = call.userCtx.name, call.node.config.snapshot.admins[name] == nil else {
            return try await account(error: "The server admin's password is set where the node starts (--admin or SETTEE_ADMIN).", status: .badRequest)
        }
        let current = form["current"] ?? "", new = form["password"] ?? ""
        guard new.count >= 1, new == form["confirm"] else {
            return try await account(error: "The new passwords are empty or do not match.", status: .badRequest)
        }
        guard try await Auth.login(call, name: name, password: current) != nil else {
            return try await account(error: "The current password is not right.", status: .forbidden)
        }
        let docID = "org.couchdb.user:" + name
        let existing = await api(.get, ["_users", docID])
        guard existing.ok, case .object(var doc) = existing.json else { return try await account(error: existing.message, status: .badRequest) }
        doc["password"] = .string(new)
        let saved = await api(.put, ["_users", docID], body: .object(doc))
        guard saved.ok else { return try await account(error: saved.message, status: HTTPResponse.Status(code: saved.status)) }
        // The new salt ends every session of this user, this one included: sign in again.
        var response = redirect("\(AdminUI.root)/login?notice=" + AdminUI.encodeQuery("Password changed: sign in with the new one."))
        response.headers[.setCookie] = SessionCookies.clearHeader
        return response
    }

    // MARK: Metrics

    /// Prometheus samples from `/_metrics`: (name, labels, value).
    private func samples() async -> [(name: String, labels: String, value: Double)]? {
        let result = await api(.get, ["_metrics"])
        guard result.ok else { return nil }
        var out: [(String, String, Double)] = []
        for line in result.text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let series = line[..<space]
            if let brace = series.firstIndex(of: "{") {
                out.append((String(series[..<brace]), String(series[brace...]), value))
            } else {
                out.append((String(series), "", value))
            }
        }
        return out
    }

    private func glance() async -> [[String: Any]] {
        guard let samples = await samples() else { return [] }
        func sum(_ name: String, _ filter: (String) -> Bool = { _ in true }) -> Double {
            samples.filter { $0.name == name && filter($0.labels) }.reduce(0) { $0 + $1.value }
        }
        func n(_ v: Double) -> String { v == v.rounded() ? String(Int64(v)) : String(format: "%.2f", v) }
        let uptime = Date().timeIntervalSince(call.node.startTime)
        return [
            ["label": "HTTP requests", "value": n(sum("settee_http_requests_total"))],
            ["label": "errors (4xx / 5xx)", "value": "\(n(sum("settee_http_requests_total") { $0.contains("status=\"4") })) / \(n(sum("settee_http_requests_total") { $0.contains("status=\"5") }))"],
            ["label": "documents written", "value": n(sum("settee_documents_written_total"))],
            ["label": "documents read", "value": n(sum("settee_documents_read_total"))],
            ["label": "open databases", "value": n(sum("settee_open_databases"))],
            ["label": "auth failures", "value": n(sum("settee_auth_failures_total"))],
            ["label": "uptime", "value": uptime < 3600 ? "\(Int(uptime / 60)) min" : String(format: "%.1f h", uptime / 3600)],
        ]
    }

    private func metrics() async throws -> Response {
        guard let samples = await samples() else { return try errorPage(await api(.get, ["_metrics"]), title: "Metrics") }
        let rows = samples.filter { !$0.name.hasSuffix("_bucket") }.map { s -> [String: Any] in
            ["name": s.name, "labels": s.labels,
             "value": s.value == s.value.rounded() && abs(s.value) < 1e15 ? String(Int64(s.value)) : String(format: "%.6g", s.value)]
        }
        let glance = await glance()
        return try page("metrics", title: "Metrics", ["glance": glance, "hasGlance": !glance.isEmpty, "samples": rows], nav: "metrics")
    }

    // MARK: Rendering

    func dbHref(_ db: String) -> String { "\(AdminUI.root)/db/\(AdminUI.encodeSegment(db))" }
    func docHref(_ db: String, _ id: String) -> String { "\(dbHref(db))/doc/\(AdminUI.encodeSegment(id))" }
    func treeHref(_ db: String, _ id: String) -> String { "\(dbHref(db))/tree/\(AdminUI.encodeSegment(id))" }

    /// The API path segments of a document (`_design/x` and `_local/x` are two segments there).
    func docSegments(_ db: String, _ id: String) -> [String] {
        for prefix in ["_design/", "_local/"] where id.hasPrefix(prefix) {
            return [db, String(prefix.dropLast()), String(id.dropFirst(prefix.count))]
        }
        return [db, id]
    }

    func dbData(_ db: String, _ info: JSON) -> [String: Any] {
        [
            "db": db, "dbHref": dbHref(db),
            "dbDocs": info["doc_count"]?.intValue.map(String.init) ?? "—",
            "dbDeleted": info["doc_del_count"]?.intValue.map(String.init) ?? "—",
            "dbSize": UIFormat.bytes(info["sizes"]?["file"]?.intValue),
            "dbSeq": info["update_seq"].map(UIFormat.cell) ?? "",
        ]
    }

    private func bodyBytes() async throws -> [UInt8] {
        var c = call
        return try await c.bodyBytes()
    }

    func redirect(_ location: String, notice: String? = nil, error: String? = nil) -> Response {
        var url = location
        var params: [String] = []
        if let notice { params.append("notice=" + AdminUI.encodeQuery(notice)) }
        if let error { params.append("error=" + AdminUI.encodeQuery(error)) }
        if !params.isEmpty { url += (url.contains("?") ? "&" : "?") + params.joined(separator: "&") }
        var headers = HTTPFields()
        headers[.location] = url
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    func errorPage(_ result: APIResult, title: String) throws -> Response {
        try page("error", title: title, ["error": result.message], status: HTTPResponse.Status(code: result.status))
    }

    func page(_ template: String, title: String, _ data: [String: Any], nav: String = "",
              status: HTTPResponse.Status = .ok, chrome: Bool = true) throws -> Response {
        var context = data
        context["title"] = title
        context["csrf"] = CSRF.token(for: call)
        context["user"] = call.userCtx.name ?? (!call.node.config.hasAdmins ? "admin party" : "")
        context["canSignOut"] = call.userCtx.name != nil && call.node.config.hasAdmins
        context["isAdmin"] = call.isAdmin
        context["asset"] = UIAssets.version
        context["chrome"] = chrome
        context["nav_" + nav] = true
        let q = FormData(query: call.request.uri.query)
        if context["notice"] == nil, let notice = q.text("notice") { context["notice"] = notice }
        if context["error"] == nil, let error = q.text("error") { context["error"] = error }
        guard let html = UITemplates.library.render(context, withTemplate: template) else {
            throw CouchError(.internalServerError, "internal_server_error", "missing UI template \(template)")
        }
        return AdminUI.html(status, html)
    }

    static func html(_ status: HTTPResponse.Status, _ html: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Content-Security-Policy")!] =
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }
}
