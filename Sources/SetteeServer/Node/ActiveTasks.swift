import Foundation
import SetteeCore

/// Long-running work visible in `GET /_active_tasks` (CouchDB's shape: `type`, `database`, `started_on`, …).
final class ActiveTasks: @unchecked Sendable {
    private let lock = NSLock()
    private var tasks: [UUID: JSONObject] = [:]

    /// Registers a task; call the returned closure when it ends.
    func begin(type: String, database: String) -> @Sendable () -> Void {
        let id = UUID()
        let now = Int64(Date().timeIntervalSince1970)
        lock.lock()
        tasks[id] = ["type": .string(type), "database": .string(database), "node": "settee@localhost",
                     "pid": .string("<\(id.uuidString.prefix(8))>"), "progress": 0,
                     "started_on": .int(now), "updated_on": .int(now)]
        lock.unlock()
        return { [weak self] in
            guard let self else { return }
            self.lock.lock()
            self.tasks[id] = nil
            self.lock.unlock()
        }
    }

    /// Whether a task of this type runs on the database.
    func isRunning(type: String, database: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return tasks.values.contains { $0["type"]?.stringValue == type && $0["database"]?.stringValue == database }
    }

    var list: [JSON] {
        lock.lock()
        defer { lock.unlock() }
        return tasks.values.map(JSON.object)
    }
}
