import Foundation
@_exported import SetteeTestSupport
import Settee

extension TempDir {
    func open(_ name: String = "db") throws -> Database {
        try Database(name: name, config: DatabaseConfiguration(directory: path))
    }
}

func object(_ json: String) -> JSONObject {
    guard case .object(let o) = try! JSON.parse(json) else { fatalError("not an object: \(json)") }
    return o
}

/// Saves documents given as JSON text with an `_id` member, in one transaction.
func load(_ collection: Settee.Collection, _ documents: [String]) throws {
    var writes: [RevisionWrite] = []
    for text in documents {
        var body = object(text)
        let id = body.removeValue(forKey: "_id")?.stringValue ?? UUID().uuidString
        writes.append(RevisionWrite(id: id, body: body, mode: .overwrite))
    }
    for result in try collection.write(writes) { _ = try result.get() }
}

/// The rows of a query as compact JSON objects.
func rows(_ db: Database, _ sql: String, _ params: [String: JSON] = [:]) throws -> [String] {
    let query = try db.createQuery(sql)
    if !params.isEmpty { query.parameters = Parameters(params) }
    return try query.execute().map { $0.toJSON() }
}
