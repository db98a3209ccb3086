import Foundation
import Synchronization
import SetteeCore
import SetteeStore

/// A database's sync function and what it routed: which documents each channel holds, and which users and roles
/// documents granted channels and roles to (Sync Gateway's channels, `access()` and `role()`).
///
/// The sync function runs on every write (``WriteRules``) and its outcome is stored with the revision
/// (``RevisionWrite/routing``). This index follows the change feed like Settee's other indexes: for each document
/// changed since it last looked, it reads the winning revision's outcome and updates three tables of the database
/// file:
///
/// ```
/// sync_channels(collection, id, channel, seq, removed, rev, deleted)   a document in a channel, at its latest
///                                                        sequence and revision; or removed
///                                                        from it at `seq` (kept, so readers since then are told)
/// sync_grants(collection, id, principal, kind, value, seq) access (kind 0: a channel) or role (kind 1) granted by
///                                                        document `id` to a user or `role:name`, since `seq`
/// sync_principals(name, body, since)                     users' and roles' admin_channels / admin_roles, each with
///                                                        the sequence it was granted at
/// sync_revocations(principal, kind, value, seq)          a channel or role a user or role lost (a grant document
///                                                        changed, an admin grant removed), at `seq`: readers since
///                                                        before it are told the channel's documents are gone
/// ```
///
/// Reads by channel name `INDEXED BY sync_channels_seq`: without statistics SQLite's planner prefers a scan of the
/// primary key's collection prefix (every row of the collection) to that index.
///
/// A reader catches the index up before it reads (cheap when nothing changed: an in-memory sequence test), and
/// reads only up to the sequence it caught up to, so a grant and the documents it opens are never seen apart.
final class ChannelIndex: Sendable {
    let database: Database

    private struct State {
        /// The sync function's source, once read from `meta` (`.some(nil)`: none).
        var source: String??
        /// Per collection: the sequence the index is current through.
        var caughtUp: [Int64: UInt64] = [:]
        var tablesReady = false
        /// Bumped by ``reset(_:)``: a catch-up that began before it does not record how far it got.
        var generation = 0
    }
    private let state = Mutex(State())

    private init(database: Database) {
        self.database = database
    }

    /// The index of a database (made on first use, kept with the database).
    static func of(_ db: Database) -> ChannelIndex {
        db.extensionObject("settee.sync.channels") { ChannelIndex(database: db) }
    }

    /// The `meta` key of the sync function's source.
    static let functionKey = "sync_function"

    /// Sync Gateway's default sync function: a document is in the channels its `channels` member names.
    static let defaultFunction = "function (doc, oldDoc) { channel(doc.channels); }"

    // MARK: The sync function

    /// The database's sync function, or nil (CouchDB's model: no channels).
    func syncFunction() throws -> String? {
        if let known = state.withLock({ $0.source }) { return known }
        let stored = try database.metadata(Self.functionKey)?.stringValue
        state.withLock { $0.source = .some(stored) }
        return stored
    }

    /// Sets (nil: removes) the sync function. Revisions keep the routing they were written with; `_resync`
    /// routes every current revision again.
    func setSyncFunction(_ source: String?) throws {
        try database.setMetadata(Self.functionKey, source.map(JSON.string) ?? .null)
        if source != nil { try ensureTables() }
        state.withLock { $0.source = .some(source) }
    }

    // MARK: Tables

    func ensureTables() throws {
        if state.withLock({ $0.tablesReady }) { return }
        try database.write { db in
            // A `sync_channels` of an earlier shape (no `rev`): it is derived data, rebuilt from the feed.
            let columns = try db.withStatement("SELECT name FROM pragma_table_info('sync_channels')") { stmt in
                var names: [String] = []
                while try stmt.step() { names.append(stmt.string(0) ?? "") }
                return names
            }
            if !columns.isEmpty && !columns.contains("rev") {
                try db.execute("DROP TABLE sync_channels")
                for c in try self.database.allCollections() { try db.setMetaValue(self.metaKey(c), nil) }
            }
            try db.execute("""
                CREATE TABLE IF NOT EXISTS sync_channels(collection INTEGER NOT NULL, id TEXT NOT NULL,
                    channel TEXT NOT NULL, seq INTEGER NOT NULL, removed INTEGER NOT NULL, rev TEXT NOT NULL,
                    deleted INTEGER NOT NULL, PRIMARY KEY(collection, id, channel)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS sync_channels_seq ON sync_channels(collection, channel, seq);
                CREATE TABLE IF NOT EXISTS sync_grants(collection INTEGER NOT NULL, id TEXT NOT NULL,
                    principal TEXT NOT NULL, kind INTEGER NOT NULL, value TEXT NOT NULL, seq INTEGER NOT NULL,
                    PRIMARY KEY(collection, id, principal, kind, value)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS sync_grants_principal ON sync_grants(principal, kind);
                CREATE TABLE IF NOT EXISTS sync_principals(name TEXT PRIMARY KEY, body TEXT NOT NULL,
                    since TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS sync_revocations(principal TEXT NOT NULL, kind INTEGER NOT NULL,
                    value TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(principal, kind, value)) WITHOUT ROWID;
                """)
        }
        state.withLock { $0.tablesReady = true }
    }

    /// What a grant gives: a channel (`access()`, `admin_channels`) or a role (`role()`, `admin_roles`).
    enum GrantKind: Int64, Sendable {
        case channel = 0
        case role = 1
    }

    // MARK: Following the feed

    /// What a revision's routing says.
    struct Routing: Equatable {
        var channels: Set<String> = []
        /// (principal, kind, value): `alice`/`role:editors` granted a channel or a role.
        var grants: Set<Grant> = []

        struct Grant: Hashable {
            var principal: String
            var kind: GrantKind
            var value: String
        }

        init() {}

        init(json bytes: [UInt8]) {
            guard case .object(let o)? = try? JSON.parse(bytes) else { return }
            channels = Set(o["channels"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            for (kind, key) in [(GrantKind.channel, "access"), (.role, "roles")] {
                for (principal, values) in o[key]?.objectValue ?? [:] {
                    for v in values.arrayValue?.compactMap(\.stringValue) ?? [] {
                        grants.insert(Grant(principal: principal, kind: kind, value: v))
                    }
                }
            }
        }
    }

    /// Brings the index up to the collection's latest change; returns the sequence it is current through.
    @discardableResult
    func catchUp(_ c: SetteeStore.Collection) throws -> UInt64 {
        let target = database.lastSequence
        if let through = state.withLock({ $0.caughtUp[c.id] }), through >= target { return through }
        try ensureTables()
        let generation = state.withLock { $0.generation }
        var through: UInt64 = 0
        var more = true
        while more {
            (through, more) = try catchUpChunk(c)
        }
        state.withLock { if $0.generation == generation { $0.caughtUp[c.id] = max($0.caughtUp[c.id] ?? 0, through) } }
        return through
    }

    private func metaKey(_ c: SetteeStore.Collection) -> String { "sync_index_seq:\(c.id)" }

    /// Up to 2,000 documents of the feed, read from a snapshot, applied in one write transaction. Returns the
    /// sequence the index is then current through, and whether more is left.
    private func catchUpChunk(_ c: SetteeStore.Collection) throws -> (UInt64, Bool) {
        let from = UInt64(try database.read { db in try db.metaValue(self.metaKey(c)) } ?? "0") ?? 0
        let chunk = 2_000
        // Committed before the feed is read, so in the snapshot that reads it (a principal's change takes a
        // sequence without a document: the index is current through it too).
        let committed = database.lastSequence
        var options = SetteeStore.Collection.ChangesOptions(since: from)
        options.limit = chunk
        let rows = try c.changes(options)
        let purged = try c.purges(since: from).map(\.id)
        let more = rows.count == chunk
        let through = more ? rows.last!.sequence : max(rows.last?.sequence ?? 0, from, committed)
        let applied = try database.write { db -> Bool in
            // Another reader may have caught the index up meanwhile.
            guard UInt64(try db.metaValue(self.metaKey(c)) ?? "0") ?? 0 == from else { return false }
            // Purges first: a purged document written again since is in `rows`, after its purge.
            for id in purged {
                try db.prepare("DELETE FROM sync_channels WHERE collection = ? AND id = ?").run([.integer(c.id), .text(id)])
                try db.prepare("DELETE FROM sync_grants WHERE collection = ? AND id = ?").run([.integer(c.id), .text(id)])
            }
            for row in rows where !row.id.hasPrefix("_design/") {
                let routing = try c.routing(id: row.id, rev: row.rev, db: db).map(Routing.init(json:)) ?? Routing()
                try self.apply(routing, id: row.id, seq: Int64(clamping: row.sequence), rev: row.rev, deleted: row.deleted,
                               collection: c.id, db: db)
                // The routing of revisions that stopped being leaves goes (a first revision replaced nothing).
                if row.rev.generation > 1 { try c.pruneRouting(id: row.id, db: db) }
            }
            try db.setMetaValue(self.metaKey(c), String(through))
            return true
        }
        if !applied {
            let now = UInt64(try database.read { db in try db.metaValue(self.metaKey(c)) } ?? "0") ?? 0
            return (now, now < committed)
        }
        return (through, more)
    }

    /// Updates one document's channels and grants to its winning revision's routing, at the document's sequence.
    private func apply(_ routing: Routing, id: String, seq: Int64, rev: RevID, deleted: Bool, collection: Int64,
                       db: Connection) throws {
        var current: [String: Bool] = [:]  // channel → removed
        try db.withStatement("SELECT channel, removed FROM sync_channels WHERE collection = ? AND id = ?",
                             [.integer(collection), .text(id)]) { stmt in
            while try stmt.step() { current[stmt.string(0) ?? ""] = stmt.int64(1) != 0 }
        }
        let revText = rev.description
        for channel in routing.channels {
            try db.prepare("INSERT OR REPLACE INTO sync_channels(collection, channel, id, seq, removed, rev, deleted) VALUES (?, ?, ?, ?, 0, ?, ?)")
                .run([.integer(collection), .text(channel), .text(id), .integer(seq), .text(revText), .integer(deleted ? 1 : 0)])
        }
        for (channel, removed) in current where !removed && !routing.channels.contains(channel) {
            try db.prepare("UPDATE sync_channels SET removed = 1, seq = ?, rev = ?, deleted = ? WHERE collection = ? AND channel = ? AND id = ?")
                .run([.integer(seq), .text(revText), .integer(deleted ? 1 : 0), .integer(collection), .text(channel), .text(id)])
        }
        var existing: Set<Routing.Grant> = []
        try db.withStatement("SELECT principal, kind, value FROM sync_grants WHERE collection = ? AND id = ?",
                             [.integer(collection), .text(id)]) { stmt in
            while try stmt.step() {
                existing.insert(.init(principal: stmt.string(0) ?? "", kind: GrantKind(rawValue: stmt.int64(1)) ?? .channel,
                                      value: stmt.string(2) ?? ""))
            }
        }
        for gone in existing.subtracting(routing.grants) {
            try db.prepare("DELETE FROM sync_grants WHERE collection = ? AND id = ? AND principal = ? AND kind = ? AND value = ?")
                .run([.integer(collection), .text(id), .text(gone.principal), .integer(gone.kind.rawValue), .text(gone.value)])
            try Self.recordRevocation(principal: gone.principal, kind: gone.kind, value: gone.value, at: seq, db: db)
        }
        // A grant the document keeps keeps the sequence it was first made at.
        for new in routing.grants.subtracting(existing) {
            try db.prepare("INSERT INTO sync_grants(collection, id, principal, kind, value, seq) VALUES (?, ?, ?, ?, ?, ?)")
                .run([.integer(collection), .text(id), .text(new.principal), .integer(new.kind.rawValue), .text(new.value),
                      .integer(seq)])
        }
    }

    /// Notes that a principal lost a channel or role at `seq` (whether it still has it from elsewhere is for the
    /// reader to tell).
    static func recordRevocation(principal: String, kind: GrantKind, value: String, at seq: Int64, db: Connection) throws {
        try db.prepare("INSERT OR REPLACE INTO sync_revocations(principal, kind, value, seq) VALUES (?, ?, ?, ?)")
            .run([.text(principal), .integer(kind.rawValue), .text(value), .integer(seq)])
    }

    /// Rebuilds a collection's index after its documents' routing was rewritten (`_resync`): readers since before
    /// get their channels' documents again (every channel counts as granted at the resync's sequence) and are told
    /// of documents no longer in channels they were in (removed rows at that sequence).
    func rebuild(_ c: SetteeStore.Collection) throws {
        try ensureTables()
        try catchUp(c)
        let before = try database.read { db in
            try db.withStatement("SELECT channel, id, rev, deleted FROM sync_channels WHERE collection = ? AND removed = 0",
                                 [.integer(c.id)]) { stmt in
                var rows: [(String, String, String, Int64)] = []
                while try stmt.step() { rows.append((stmt.string(0) ?? "", stmt.string(1) ?? "", stmt.string(2) ?? "", stmt.int64(3))) }
                return rows
            }
        }
        try reset(c)
        try catchUp(c)
        try database.write { db in
            let at = Int64(clamping: self.database.nextSequence())
            for (channel, id, rev, deleted) in before {
                try db.prepare("INSERT OR IGNORE INTO sync_channels(collection, channel, id, seq, removed, rev, deleted) VALUES (?, ?, ?, ?, 1, ?, ?)")
                    .run([.integer(c.id), .text(channel), .text(id), .integer(at), .text(rev), .integer(deleted)])
            }
            try db.setMetaValue(Self.resyncKey, String(at))
        }
    }

    /// Forgets what the index holds for a collection, so the next reader rebuilds it from the feed (after
    /// `_resync`, or when the sync function changed).
    func reset(_ c: SetteeStore.Collection) throws {
        try ensureTables()
        try database.write { db in
            try db.prepare("DELETE FROM sync_channels WHERE collection = ?").run([.integer(c.id)])
            try db.prepare("DELETE FROM sync_grants WHERE collection = ?").run([.integer(c.id)])
            try db.setMetaValue(self.metaKey(c), nil)
        }
        state.withLock {
            $0.caughtUp[c.id] = nil
            $0.generation += 1
        }
    }
}
