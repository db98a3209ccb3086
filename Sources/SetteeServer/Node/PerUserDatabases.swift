import Foundation
import Logging
import SetteeCore
import SetteeStore
import Synchronization

/// CouchDB's `couch_peruser`: with `[couch_peruser] enable = true`, every user in `_users` gets a private
/// database, `userdb-` (`database_prefix`) followed by the user name's UTF-8 bytes in lowercase hex, whose
/// `_security` names the user among its admins and members (added to what is there, as CouchDB adds them). When the
/// user is deleted, the database is deleted with `delete_dbs = true`; otherwise the user's name is taken out of its
/// `_security` and the data stays.
///
/// It follows `_users`' change feed from the start whenever it (re)starts — each step is idempotent — and starts
/// or stops when the settings change through `/_node/{node}/_config` or `_users` is created or deleted.
final class PerUserDatabases: Sendable {
    /// The settings it acts on, read from the node's configuration.
    struct Settings: Equatable, Sendable {
        var enabled = false
        var deleteDatabases = false
        var prefix = "userdb-"

        init(_ config: NodeConfig) {
            enabled = config.value("couch_peruser", "enable")?.lowercased() == "true"
            deleteDatabases = config.value("couch_peruser", "delete_dbs")?.lowercased() == "true"
            if let p = config.value("couch_peruser", "database_prefix"), !p.isEmpty { prefix = p }
        }
    }

    private struct State {
        var follower: Task<Void, Never>?
        var settings: Settings?
        var stopped = false
    }

    private unowned let node: Node
    private let state = Mutex(State())
    private let logger = Logger(label: "settee.peruser")

    init(node: Node) {
        self.node = node
    }

    /// The database of `user`: the prefix and the name's bytes in lowercase hex, each without a leading zero
    /// (CouchDB's `integer_to_list(Byte, 16)`).
    static func databaseName(prefix: String, user: String) -> String {
        prefix + user.utf8.map { String($0, radix: 16) }.joined()
    }

    /// Starts, restarts or stops following `_users` to match the current settings.
    func refresh() {
        let settings = Settings(node.config)
        let exists = Database.exists(name: UserDirectory.database, inDirectory: node.configuration.dataDirectory)
        let previous: Task<Void, Never>? = state.withLock { s in
            if s.stopped { return nil }
            let wanted = settings.enabled && exists ? settings : nil
            if wanted == s.settings && (wanted == nil || s.follower != nil) { return nil }
            let old = s.follower
            s.settings = wanted
            s.follower = wanted.map { settings in Task { [weak self] in await self?.follow(settings) } }
            return old
        }
        previous?.cancel()
    }

    /// Stops following (shutdown).
    func stop() {
        let task = state.withLock { s in
            s.stopped = true
            defer { s.follower = nil }
            return s.follower
        }
        task?.cancel()
    }

    private func follow(_ settings: Settings) async {
        guard let db = try? node.database(UserDirectory.database), let users = try? db.defaultCollection() else { return }
        var since: UInt64 = 0
        while !Task.isCancelled {
            let commits = db.commits()
            do {
                let from = since
                let rows = try await Database.offload { () -> [SetteeStore.Collection.ChangeRow] in
                    try users.changes(SetteeStore.Collection.ChangesOptions(since: from))
                }
                for row in rows where !Task.isCancelled {
                    since = max(since, row.sequence)
                    guard row.id.hasPrefix(UserDirectory.prefix) else { continue }
                    let user = String(row.id.dropFirst(UserDirectory.prefix.count))
                    do {
                        try await Database.offload { try self.apply(user: user, deleted: row.deleted, settings) }
                    } catch {
                        logger.error("couch_peruser: \(row.id): \(error)")
                    }
                }
            } catch {
                logger.error("couch_peruser: reading _users: \(error)")
                return
            }
            var iterator = commits.makeAsyncIterator()
            guard await iterator.next() != nil else { return }  // _users closed (deleted)
        }
    }

    /// One user's change: the database made and the user added to its `_security`, or (deleted) the database
    /// deleted or the user taken out.
    func apply(user: String, deleted: Bool, _ settings: Settings) throws {
        let name = Self.databaseName(prefix: settings.prefix, user: user)
        if !deleted {
            let db: Database
            do {
                db = try node.createDatabase(name)
            } catch let error as SetteeError where error.code == .fileExists {
                db = try node.database(name)
            }
            try editSecurity(db) { section in
                if section.contains(.string(user)) { return nil }
                return [.string(user)] + section
            }
        } else if settings.deleteDatabases {
            do { try node.deleteDatabase(name) } catch let error as SetteeError where error.code == .notFound {}
        } else if let db = try? node.database(name) {
            try editSecurity(db) { section in
                section.contains(.string(user)) ? section.filter { $0 != .string(user) } : nil
            }
        }
    }

    /// Applies `edit` to `admins.names` and `members.names` (nil: unchanged) and stores the object if either changed.
    private func editSecurity(_ db: Database, _ edit: ([JSON]) -> [JSON]?) throws {
        guard case .object(var security) = try db.metadata("security") ?? SecurityObject.adminOnlyJSON else { return }
        var changed = false
        for key in ["admins", "members"] {
            var section = security[key]?.objectValue ?? [:]
            guard let names = edit(section["names"]?.arrayValue ?? []) else { continue }
            section["names"] = .array(names)
            security[key] = .object(section)
            changed = true
        }
        if changed { try node.setSecurityObject(db, security) }
    }
}
