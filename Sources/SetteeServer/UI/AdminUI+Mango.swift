import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// The Mango box of the query page (`/_utils/db/{db}/query?mango=…`): a `_find` body run through the node's own
/// `POST /{db}/_find`, its documents, warning and bookmark, and the index `_explain` chose.
extension AdminUI {
    static let defaultMango = #"{"selector": {}, "limit": 10}"#

    /// Runs the Mango query in `text` and adds its answer to the page's data; returns the status for the page.
    func runMango(_ db: String, _ text: String, into data: inout [String: Any]) async -> HTTPResponse.Status {
        data["mango"] = text
        guard let body = try? JSON.parse(Array(text.utf8)), case .object = body else {
            data["mangoError"] = "The Mango query must be a JSON object, like {\"selector\": {\"city\": \"Paris\"}}."
            return .badRequest
        }
        let started = DispatchTime.now().uptimeNanoseconds
        let result = await api(.post, [db, "_find"], body: body)
        let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
        guard result.ok else {
            data["mangoError"] = result.message
            return HTTPResponse.Status(code: result.status)
        }
        let explain = await api(.post, [db, "_explain"], body: body)
        if explain.ok, let index = explain.json["index"] {
            let name = index["name"]?.stringValue ?? ""
            data["mangoIndex"] = index["ddoc"]?.stringValue.map { "\($0) / \(name)" } ?? name
        }
        let docs = result.json["docs"]?.arrayValue ?? []
        data["mangoDocs"] = docs.prefix(1000).map { doc -> [String: Any] in
            let id = doc["_id"]?.stringValue ?? ""
            return ["id": id, "docHref": id.isEmpty ? "" : docHref(db, id), "doc": UIFormat.cell(doc)]
        }
        data["mangoCount"] = docs.count
        data["mangoElapsed"] = String(format: "%.1f", ms)
        if let warning = result.json["warning"]?.stringValue { data["mangoWarning"] = warning }
        if let bookmark = result.json["bookmark"]?.stringValue { data["mangoBookmark"] = bookmark }
        data["mangoJSON"] = UIFormat.pretty(result.json)
        data["mangoRan"] = true
        return .ok
    }
}
