import Foundation
import Logging
import SetteeCore
import Synchronization

/// Long-running work visible in `GET /_active_tasks` (CouchDB's shape: `type`, `database`, `started_on`, …).
/// At most one task of a kind runs on a database: ``begin(_:database:)`` refuses a second.
final class ActiveTasks: Sendable {
    /// The kinds of task, named as CouchDB's `_active_tasks` names them.
    enum Kind: String, Sendable {
        case databaseCompaction = "database_compaction"
    }

    private struct Entry {
        let kind: Kind
        let database: String
        let json: JSONObject
    }

    private let tasks = Mutex<[UUID: Entry]>([:])
    /// The node's name (`--node-name`), as its entries report it.
    private let nodeName: String

    init(nodeName: String) {
        self.nodeName = nodeName
    }

    /// Where background tasks report failures.
    let logger = Logger(label: "settee.tasks")

    /// Registers a task, or returns nil when one of that kind already runs on the database. Call the returned
    /// closure when it ends.
    func begin(_ kind: Kind, database: String) -> (@Sendable () -> Void)? {
        let id = UUID()
        let now = Int64(Date().timeIntervalSince1970)
        let json: JSONObject = ["type": .string(kind.rawValue), "database": .string(database), "node": .string(nodeName),
                                "pid": .string("<\(id.uuidString.prefix(8))>"), "progress": 0,
                                "started_on": .int(now), "updated_on": .int(now)]
        let started = tasks.withLock { tasks -> Bool in
            guard !tasks.values.contains(where: { $0.kind == kind && $0.database == database }) else { return false }
            tasks[id] = Entry(kind: kind, database: database, json: json)
            return true
        }
        guard started else { return nil }
        return { [weak self] in
            _ = self?.tasks.withLock { $0.removeValue(forKey: id) }
        }
    }

    /// Whether a task of this kind runs on the database.
    func isRunning(_ kind: Kind, database: String) -> Bool {
        tasks.withLock { $0.values.contains { $0.kind == kind && $0.database == database } }
    }

    var list: [JSON] {
        tasks.withLock { $0.values.map { JSON.object($0.json) } }
    }
}
