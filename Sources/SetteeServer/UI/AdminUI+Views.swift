import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// The Views page (`/_utils/db/{db}/views`): every view of the database's design documents — JavaScript map and
/// reduce functions, SQL++ declarative views, built-in reduces — with its source, and a form that runs one through
/// the node's own `GET /{db}/_design/{ddoc}/_view/{view}` with CouchDB's query parameters.
extension AdminUI {
    /// The query parameters the form passes through to the view, as CouchDB names them.
    static let viewParameters = ["key", "startkey", "endkey", "limit", "skip", "group_level", "reduce", "include_docs",
                                 "descending", "update", "partition"]

    func views(_ db: String) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let q = FormData(query: call.request.uri.query)
        let header = databaseHeader(db, info.json)
        let selected = q.text("view")

        let designs = await api(.get, [db, "_design_docs"], query: "include_docs=true")
        guard designs.ok else { return try errorPage(designs, title: db) }
        var list: [ViewRow] = []
        for row in designs.json["rows"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue, id.hasPrefix("_design/"), case .object(let doc)? = row["doc"],
                  case .object(let views)? = doc["views"] else { continue }
            let ddoc = String(id.dropFirst("_design/".count))
            let language = doc["language"]?.stringValue ?? "javascript"
            for name in views.keys.sorted() where name != "lib" {
                let definition = views[name] ?? .null
                let value = ddoc + "/" + name
                var map = ""
                switch definition["map"] {
                case .string(let source)?: map = source
                case let other?: map = UIFormat.pretty(other)  // a SQL++ declarative view: {key, value, where}
                case nil: break
                }
                list.append(ViewRow(value: value, language: language, map: map, reduce: definition["reduce"]?.stringValue ?? "",
                                    selected: value == selected, href: "\(dbHref(db))/views?view=\(AdminUI.encodeQuery(value))"))
            }
        }
        let reduce = q.text("reduce") ?? "default"
        var model = ViewsPage(
            views: list, hasViews: !list.isEmpty,
            p_key: q["key"] ?? "", p_startkey: q["startkey"] ?? "", p_endkey: q["endkey"] ?? "", p_partition: q["partition"] ?? "",
            p_limit: q["limit"] ?? "20", p_skip: q["skip"] ?? "", p_group_level: q["group_level"] ?? "",
            reduce_default: reduce == "default", reduce_true: reduce == "true", reduce_false: reduce == "false",
            includeDocs: q.flag("include_docs"), descending: q.flag("descending"))

        guard let selected else { return try page("views", title: "Views of \(db)", model, database: header, nav: "views") }
        let parts = selected.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            model.error = "Choose a view as design document/view, like app/by_type."
            return try page("views", title: "Views of \(db)", model, database: header, nav: "views", status: .badRequest)
        }
        var parameters: [String] = []
        for name in Self.viewParameters {
            guard var value = q.text(name) else { continue }
            if name == "include_docs" || name == "descending" { value = q.flag(name) ? "true" : "false" }
            if name == "limit" && value.isEmpty { continue }
            parameters.append(name + "=" + AdminUI.encodeQuery(value))
        }
        if q["limit"] == nil { parameters.append("limit=20") }
        let started = DispatchTime.now().uptimeNanoseconds
        let result = await api(.get, [db, "_design", parts[0], "_view", parts[1]], query: parameters.joined(separator: "&"))
        let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
        model.viewName = selected
        guard result.ok else {
            model.error = result.message
            return try page("views", title: "Views of \(db)", model, database: header, nav: "views",
                            status: HTTPResponse.Status(code: result.status))
        }
        let rows = result.json["rows"]?.arrayValue ?? []
        let includeDocs = rows.contains { $0["doc"] != nil }
        model.showDocs = includeDocs
        model.rows = rows.prefix(1000).map { row in
            let id = row["id"]?.stringValue
            return ViewResultRow(key: Self.jsonCell(row["key"]), value: Self.jsonCell(row["value"]), id: id,
                                 docHref: id.map { docHref(db, $0) }, doc: includeDocs ? Self.jsonCell(row["doc"]) : nil)
        }
        model.rowCount = rows.count
        model.truncated = rows.count > 1000
        if let total = result.json["total_rows"] {
            model.totalRows = UIFormat.cell(total)
            model.offset = result.json["offset"].map(UIFormat.cell) ?? "0"
        }
        model.elapsed = String(format: "%.1f", ms)
        model.json = UIFormat.pretty(result.json)
        model.ran = true
        return try page("views", title: "Views of \(db)", model, database: header, nav: "views")
    }

    /// A key, value or document as JSON text (a string key shows its quotes, as in the API), shortened for a cell.
    static func jsonCell(_ value: JSON?) -> String {
        guard let value else { return "" }
        let text = value.jsonString
        return text.count > 200 ? String(text.prefix(200)) + "…" : text
    }
}
