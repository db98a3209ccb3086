import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// A database's SQL++ indexes (`/_utils/db/{db}/indexes`): each with its options and build progress, and the
/// forms that create one (value, full-text, array or vector) and drop one.
extension AdminUI {
    func indexes(_ db: String, error: String? = nil, form: FormData? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let list = await api(.get, [db, "_indexes"])
        // update_seq is CouchDB's "N-…" string; its number is what an index's last_seq compares with.
        let updateSeq = info.json["update_seq"].map { $0.intValue ?? Int64((try? ChangeSequence.parse($0.stringValue ?? "")) ?? 0) } ?? 0
        var rows: [IndexRow] = []
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
            rows.append(IndexRow(
                name: entry["name"]?.stringValue ?? "", collection: entry["collection"]?.stringValue ?? "",
                type: entry["type"]?.stringValue ?? "",
                expressions: (entry["expressions"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", "),
                options: options.joined(separator: " · "),
                state: entry["state"]?.stringValue ?? "", lastSeq: lastSeq, percent: percent))
        }
        let f = form ?? FormData(query: nil)
        let fields = IndexForm(name: f["name"] ?? "", expressions: f["expressions"] ?? "", where: f["where"] ?? "",
                               path: f["path"] ?? "", collection: f["collection"] ?? "", dimensions: f["dimensions"] ?? "",
                               centroids: f["centroids"] ?? "", language: f["language"] ?? "", numProbes: f["numProbes"] ?? "")
        let model = IndexesPage(indexes: rows, updateSeq: updateSeq, form: fields, error: error ?? (list.ok ? nil : list.message))
        return try page("indexes", title: "Indexes of \(db)", model, database: databaseHeader(db, info.json),
                        nav: "indexes", status: status)
    }

    func createIndex(_ db: String, _ form: FormData) async throws -> Response {
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

    func deleteIndex(_ db: String, _ form: FormData) async throws -> Response {
        let name = form["name"] ?? ""
        let query = form.text("collection").map { "collection=" + AdminUI.encodeQuery($0) }
        let result = await api(.delete, [db, "_indexes", name], query: query)
        guard result.ok else { return redirect("\(dbHref(db))/indexes", error: result.message) }
        return redirect("\(dbHref(db))/indexes", notice: "Dropped index \(name).")
    }
}
