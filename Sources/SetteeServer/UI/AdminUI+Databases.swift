import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// The databases list (`/_utils/`), creating, deleting and compacting a database, and two of a database's tabs:
/// its change feed (`…/changes`) and its permissions (`…/security`).
extension AdminUI {
    func dashboard() async throws -> Response {
        // "Open a database" (for users who may not list them all).
        if let open = FormData(query: call.request.uri.query).text("open") { return redirect(dbHref(open)) }
        let info = await api(.get, [])
        let all = await api(.get, ["_all_dbs"])
        var rows: [DatabaseRow] = []
        var error: String?
        if all.ok, case .array(let names) = all.json {
            for case .string(let name) in names.prefix(500) {
                let dbInfo = await api(.get, [name])
                let j = dbInfo.json
                rows.append(DatabaseRow(
                    name: name, href: dbHref(name),
                    docs: j["doc_count"]?.intValue.map(String.init) ?? "—",
                    deleted: j["doc_del_count"]?.intValue.map(String.init) ?? "—",
                    size: UIFormat.bytes(j["sizes"]?["file"]?.intValue),
                    seq: j["update_seq"].map(UIFormat.cell) ?? "",
                    dbError: dbInfo.ok ? nil : dbInfo.message))
            }
        } else {
            error = all.message
        }
        let glance = await glance()
        let model = DashboardPage(
            databases: rows, count: rows.count,
            version: info.json["vendor"]?["version"]?.stringValue ?? info.json["version"]?.stringValue ?? "",
            uuid: info.json["uuid"]?.stringValue ?? "",
            glance: glance, hasGlance: !glance.isEmpty, error: error)
        return try page("dashboard", title: "Databases", model, nav: "databases")
    }

    func createDatabase(_ form: FormData) async throws -> Response {
        guard let name = form.text("name") else { return redirect(AdminUI.root + "/", error: "Give the database a name.") }
        let result = await api(.put, [name])
        guard result.ok else { return redirect(AdminUI.root + "/", error: result.message) }
        return redirect(dbHref(name), notice: "Created database \(name).")
    }

    func deleteDatabase(_ db: String) async throws -> Response {
        let result = await api(.delete, [db])
        guard result.ok else { return redirect(dbHref(db), error: result.message) }
        return redirect(AdminUI.root + "/", notice: "Deleted database \(db).")
    }

    func compact(_ db: String) async throws -> Response {
        let result = await api(.post, [db, "_compact"], body: [:])
        guard result.ok else { return redirect(dbHref(db), error: result.message) }
        return redirect(dbHref(db), notice: "Compaction of \(db) started (see the size above when it ends).")
    }

    // MARK: Changes

    func changes(_ db: String) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let recent = await api(.get, [db, "_changes"], query: "descending=true&limit=25&style=all_docs")
        let rows = (recent.json["results"]?.arrayValue ?? []).map { change in
            let id = change["id"]?.stringValue ?? ""
            return ChangeRow(seq: UIFormat.cell(change["seq"]), id: id, href: docHref(db, id),
                             revs: (change["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue }.joined(separator: ", "),
                             deleted: change["deleted"]?.boolValue == true)
        }
        // From the sequence read before the list, so nothing committed in between is missed.
        let since = AdminUI.encodeQuery(info.json["update_seq"].map { $0.stringValue ?? $0.jsonString } ?? "now")
        let model = ChangesPage(
            changes: rows,
            feedURL: "/" + AdminUI.encodeSegment(db) + "/_changes?feed=eventsource&since=\(since)&heartbeat=15000&style=all_docs",
            error: recent.ok ? nil : recent.message)
        return try page("changes", title: "Changes of \(db)", model, database: databaseHeader(db, info.json), nav: "changes")
    }

    // MARK: Permissions

    func security(_ db: String, editing: String? = nil, error: String? = nil,
                  status: HTTPResponse.Status = .ok) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let current = await api(.get, [db, "_security"])
        guard current.ok else { return try errorPage(current, title: db) }
        let model = SecurityPage(json: editing ?? UIFormat.pretty(current.json), error: error)
        return try page("security", title: "Permissions of \(db)", model, database: databaseHeader(db, info.json),
                        nav: "security", status: status)
    }

    func saveSecurity(_ db: String, _ form: FormData) async throws -> Response {
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
}
