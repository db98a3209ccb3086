import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// The query page (`/_utils/db/{db}/query`): a SQL++ query with named parameters, run through the node's own
/// `POST /{db}/_query`, its rows as a table and as JSON, and the plan `explain` gives; and the Mango box
/// (`AdminUI+Mango.swift`).
extension AdminUI {
    func query(_ db: String) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let q = FormData(query: call.request.uri.query)
        let header = databaseHeader(db, info.json)
        let text = q.text("q")
        var model = QueryPage(q: text ?? "SELECT META().id, * FROM _ LIMIT 10", params: q["params"] ?? "", mango: AdminUI.defaultMango)
        if let mango = q.text("mango") {
            let status = await runMango(db, mango, into: &model)
            return try page("query", title: "Query \(db)", model, database: header, nav: "query", status: status)
        }
        if let text {
            var body: JSONObject = ["query": .string(text)]
            if let p = q.text("params") {
                guard case .object(let params)? = try? JSON.parse(p) else {
                    model.error = "Parameters must be a JSON object, like {\"city\": \"Paris\"}."
                    return try page("query", title: "Query \(db)", model, database: header, nav: "query", status: .badRequest)
                }
                body["params"] = .object(params)
            }
            let started = DispatchTime.now().uptimeNanoseconds
            let result = await api(.post, [db, "_query"], body: .object(body))
            let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            let plan = await api(.post, [db, "_query"], query: "explain=true", body: .object(body))
            if plan.ok, let text = plan.json["plan"]?.stringValue, !text.isEmpty { model.plan = text }
            if result.ok {
                let columns = result.json["columns"]?.arrayValue?.compactMap(\.stringValue) ?? []
                let rows = result.json["rows"]?.arrayValue ?? []
                model.columns = columns.map { NamedItem(name: $0) }
                model.rows = rows.prefix(1000).map { row in QueryRow(cells: columns.map { ValueCell(value: UIFormat.cell(row[$0])) }) }
                model.rowCount = rows.count
                model.truncated = rows.count > 1000
                model.elapsed = String(format: "%.1f", ms)
                model.json = UIFormat.pretty(.array(Array(rows.prefix(1000))))
                model.ran = true
            } else {
                model.error = result.message
                return try page("query", title: "Query \(db)", model, database: header, nav: "query",
                                status: HTTPResponse.Status(code: result.status))
            }
        }
        return try page("query", title: "Query \(db)", model, database: header, nav: "query")
    }
}
