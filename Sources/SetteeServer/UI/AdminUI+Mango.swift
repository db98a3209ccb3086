import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// The Mango box of the query page (`/_utils/db/{db}/query?mango=…`): a `_find` body run through the node's own
/// `POST /{db}/_find`, its documents, warning and bookmark, and the index `_explain` chose.
extension AdminUI {
    static let defaultMango = #"{"selector": {}, "limit": 10}"#

    /// Runs the Mango query in `text` and adds its answer to the page's model; returns the status for the page.
    func runMango(_ db: String, _ text: String, into model: inout QueryPage) async -> HTTPResponse.Status {
        model.mango = text
        guard let body = try? JSON.parse(Array(text.utf8)), case .object = body else {
            model.mangoError = "The Mango query must be a JSON object, like {\"selector\": {\"city\": \"Paris\"}}."
            return .badRequest
        }
        let started = DispatchTime.now().uptimeNanoseconds
        let result = await api(.post, [db, "_find"], body: body)
        let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
        guard result.ok else {
            model.mangoError = result.message
            return HTTPResponse.Status(code: result.status)
        }
        let explain = await api(.post, [db, "_explain"], body: body)
        if explain.ok, let index = explain.json["index"] {
            let name = index["name"]?.stringValue ?? ""
            model.mangoIndex = index["ddoc"]?.stringValue.map { "\($0) / \(name)" } ?? name
        }
        let docs = result.json["docs"]?.arrayValue ?? []
        model.mangoDocs = docs.prefix(1000).map { doc in
            let id = doc["_id"]?.stringValue ?? ""
            return MangoDoc(id: id, docHref: id.isEmpty ? "" : docHref(db, id), doc: UIFormat.cell(doc))
        }
        model.mangoCount = docs.count
        model.mangoElapsed = String(format: "%.1f", ms)
        model.mangoWarning = result.json["warning"]?.stringValue
        model.mangoBookmark = result.json["bookmark"]?.stringValue
        model.mangoJSON = UIFormat.pretty(result.json)
        model.mangoRan = true
        return .ok
    }
}
