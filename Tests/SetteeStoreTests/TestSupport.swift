import Foundation
import SetteeCore
@testable import SetteeStore

/// A fresh temporary directory, removed when the value is discarded by the test's end (best effort).
final class TempDir: @unchecked Sendable {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "settee-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func open(_ name: String = "db") throws -> Database {
        try Database(name: name, config: DatabaseConfiguration(directory: path))
    }
}

func obj(_ json: String) -> JSONObject {
    guard case .object(let o) = try! JSON.parse(json) else { fatalError("not an object: \(json)") }
    return o
}

func rev(_ s: String) -> RevID { RevID(s)! }
