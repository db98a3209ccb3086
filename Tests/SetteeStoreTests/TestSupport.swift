import Foundation
@_exported import SetteeTestSupport
import SetteeCore
@testable import SetteeStore

extension TempDir {
    func open(_ name: String = "db") throws -> Database {
        try Database(name: name, config: DatabaseConfiguration(directory: path))
    }
}

func obj(_ json: String) -> JSONObject {
    guard case .object(let o) = try! JSON.parse(json) else { fatalError("not an object: \(json)") }
    return o
}

func rev(_ s: String) -> RevID { RevID(s)! }
