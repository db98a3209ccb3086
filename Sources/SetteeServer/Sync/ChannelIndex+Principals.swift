import Foundation
import SetteeCore
import SetteeStore

/// Users and roles of a database with a sync function (Sync Gateway's principals), and the channels a reader may
/// see.
extension ChannelIndex {
    /// A user's or role's grants as the admin API sets them (`admin_channels`, `admin_roles`).
    struct Principal: Sendable, Equatable {
        var adminChannels: [String] = []
        var adminRoles: [String] = []
        /// The sequence each channel (and `role:name`) was granted at.
        var since: [String: UInt64] = [:]

        var json: JSON {
            ["admin_channels": .array(adminChannels.map(JSON.string)), "admin_roles": .array(adminRoles.map(JSON.string))]
        }
    }

    /// The `meta` key of the sequence of the last `_resync`.
    static let resyncKey = "sync_resync_seq"

    /// The key a user (`alice`) or role (`role:editors`) is stored under; the anonymous caller is `GUEST`.
    static func principalKey(user: String?) -> String { user ?? "GUEST" }
    static func principalKey(role: String) -> String { "role:" + role }

    /// A principal's stored grants, or nil.
    func principal(_ key: String) throws -> Principal? {
        try ensureTables()
        return try database.read { db in try Self.loadPrincipal(key, db: db) }
    }

    private static func loadPrincipal(_ key: String, db: Connection) throws -> Principal? {
        try db.withStatement("SELECT body, since FROM sync_principals WHERE name = ?", [.text(key)]) { stmt -> Principal? in
            guard try stmt.step() else { return nil }
            let body = (try? JSON.parse(stmt.blob(0) ?? [])) ?? [:]
            var since: [String: UInt64] = [:]
            for (name, value) in (try? JSON.parse(stmt.blob(1) ?? []))?.objectValue ?? [:] {
                if let n = value.intValue { since[name] = UInt64(max(0, n)) }
            }
            return Principal(adminChannels: body["admin_channels"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                             adminRoles: body["admin_roles"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                             since: since)
        }
    }

    /// Stores a principal's grants (nil: deletes it). Channels and roles it did not have before are granted at a
    /// new sequence of the database, so a reader that read up to before it gets their documents (Sync Gateway's
    /// backfill); those it keeps keep their sequence. Returns whether it existed before.
    @discardableResult
    func setPrincipal(_ key: String, channels: [String], roles: [String], delete: Bool = false) throws -> Bool {
        try ensureTables()
        return try database.write { db in
            let old = try Self.loadPrincipal(key, db: db)
            // What it loses is revoked at a sequence of its own, so readers since before learn of it.
            func revoke(_ lostChannels: [String], _ lostRoles: [String]) throws {
                guard !lostChannels.isEmpty || !lostRoles.isEmpty else { return }
                let at = Int64(clamping: self.database.nextSequence())
                for c in lostChannels { try Self.recordRevocation(principal: key, kind: .channel, value: c, at: at, db: db) }
                for r in lostRoles { try Self.recordRevocation(principal: key, kind: .role, value: r, at: at, db: db) }
            }
            if delete {
                try db.prepare("DELETE FROM sync_principals WHERE name = ?").run([.text(key)])
                try revoke(old?.adminChannels ?? [], old?.adminRoles ?? [])
                return old != nil
            }
            var since: [String: UInt64] = [:]
            var seq: UInt64?
            func grantedAt(_ name: String) -> UInt64 {
                if let kept = old?.since[name] { return kept }
                if seq == nil { seq = self.database.nextSequence() }
                return seq!
            }
            for c in channels { since[c] = grantedAt(c) }
            for r in roles { since["role:" + r] = grantedAt("role:" + r) }
            try revoke((old?.adminChannels ?? []).filter { !channels.contains($0) },
                       (old?.adminRoles ?? []).filter { !roles.contains($0) })
            let body = Principal(adminChannels: channels, adminRoles: roles).json
            var sinceObject = JSONObject()
            for (name, seq) in since { sinceObject[name] = .int(Int64(clamping: seq)) }
            let sinceJSON = JSON.object(sinceObject)
            try db.prepare("INSERT OR REPLACE INTO sync_principals(name, body, since) VALUES (?, ?, ?)")
                .run([.text(key), .text(body.jsonString), .text(sinceJSON.jsonString)])
            return old != nil
        }
    }

    /// The names of the stored users (or roles).
    func principalNames(roles: Bool) throws -> [String] {
        try ensureTables()
        return try database.read { db in
            try db.withStatement("SELECT name FROM sync_principals ORDER BY name") { stmt in
                var out: [String] = []
                while try stmt.step() {
                    let name = stmt.string(0) ?? ""
                    if name.hasPrefix("role:") == roles { out.append(roles ? String(name.dropFirst(5)) : name) }
                }
                return out
            }
        }
    }

    // MARK: What a reader sees

    /// The channels a reader may see, each with the sequence it was granted at (0: always had it). `all`: the
    /// reader sees every document (an admin, or a user granted the `*` channel).
    struct Reader: Sendable, Equatable {
        var all: Bool
        var channels: [String: UInt64]
        /// The user's roles (CouchDB's `_users` roles, `admin_roles`, and `role()` grants).
        var roles: Set<String> = []
        /// The sequence the channel index was current through when these grants were read: a feed read for this
        /// reader stops there, so it never shows documents of a grant it does not count, or the reverse.
        var through: UInt64 = .max
        /// Channels the reader lost (and does not have from elsewhere), with the sequence it lost each at: a feed
        /// since before that tells the reader their documents are gone (Sync Gateway's revocation).
        var revoked: [String: UInt64] = [:]
        /// The sequence of the last `_resync` (0: none): every channel's documents are backfilled for a reader since
        /// before it, and the documents it routed out of a channel the reader held are `removed` rows.
        var resyncedAt: UInt64 = 0

        static let everything = Reader(all: true, channels: [:])

        /// Only these channels of the reader's (Sync Gateway's `filter=sync_gateway/bychannel`).
        func restricted(to names: Set<String>) -> Reader {
            var r = self
            if all {
                r.all = false
                r.channels = Dictionary(uniqueKeysWithValues: names.map { ($0, 0) })
            } else {
                r.channels = channels.filter { names.contains($0.key) }
            }
            r.revoked = revoked.filter { names.contains($0.key) }
            return r
        }
    }

    /// The channels a user sees: the public channel `!`, their `admin_channels`, their roles' (CouchDB roles from
    /// `_users`, `admin_roles`, and `role()` grants), and `access()` grants to them or their roles.
    func reader(user: String?, roles couchRoles: [String], in collection: SetteeStore.Collection) throws -> Reader {
        // Grants are the database's, from documents of any collection: every collection's index is caught up.
        if database.collectionCount > 1 {
            for other in try database.allCollections() where other.id != collection.id { try catchUp(other) }
        }
        let through = try catchUp(collection)
        let key = Self.principalKey(user: user)
        return try database.read { db in
            var channels: [String: UInt64] = ["!": 0]
            func grant(_ channel: String, at seq: UInt64) {
                channels[channel] = min(channels[channel] ?? .max, seq)
            }
            let me = try Self.loadPrincipal(key, db: db)
            for c in me?.adminChannels ?? [] { grant(c, at: me?.since[c] ?? 0) }
            var roles: [String: UInt64] = [:]
            for r in couchRoles where !r.hasPrefix("_") { roles[r] = 0 }
            for r in me?.adminRoles ?? [] { roles[r] = min(roles[r] ?? .max, me?.since["role:" + r] ?? 0) }
            if user != nil {
                try db.withStatement("SELECT value, min(seq) FROM sync_grants WHERE principal = ? AND kind = 1 GROUP BY value",
                                     [.text(key)]) { stmt in
                    while try stmt.step() {
                        let r = stmt.string(0) ?? ""
                        roles[r] = min(roles[r] ?? .max, UInt64(max(0, stmt.int64(1))))
                    }
                }
            }
            for (r, roleSince) in roles {
                if let role = try Self.loadPrincipal(Self.principalKey(role: r), db: db) {
                    for c in role.adminChannels { grant(c, at: max(roleSince, role.since[c] ?? 0)) }
                }
            }
            var holders: [(String, UInt64)] = roles.map { (Self.principalKey(role: $0.key), $0.value) }
            if user != nil { holders.append((key, 0)) }
            for (holder, holderSince) in holders {
                try db.withStatement("SELECT value, min(seq) FROM sync_grants WHERE principal = ? AND kind = 0 GROUP BY value",
                                     [.text(holder)]) { stmt in
                    while try stmt.step() { grant(stmt.string(0) ?? "", at: max(holderSince, UInt64(max(0, stmt.int64(1))))) }
                }
            }
            // After `_resync` every document may be routed otherwise: every channel counts as granted then, so a
            // reader since before gets its channels' documents again.
            let resynced = UInt64(try db.metaValue(Self.resyncKey) ?? "").flatMap { $0 <= through ? $0 : nil } ?? 0
            channels = channels.filter { $0.value <= through }
            // What the user and its roles lost: channels directly, and the channels of roles it lost.
            var revoked: [String: UInt64] = [:]
            func revoke(_ channel: String, at seq: UInt64) {
                guard channels[channel] == nil, seq <= through else { return }
                revoked[channel] = max(revoked[channel] ?? 0, seq)
            }
            var lostRoles: [(String, UInt64)] = []
            let losers = [key] + roles.keys.map { Self.principalKey(role: $0) }
            try db.withStatement("SELECT kind, value, seq FROM sync_revocations WHERE principal = ?") { stmt in
                for loser in losers {
                    stmt.reset()
                    stmt.bind([.text(loser)])
                    while try stmt.step() {
                        let value = stmt.string(1) ?? "", seq = UInt64(max(0, stmt.int64(2)))
                        if GrantKind(rawValue: stmt.int64(0)) == .role {
                            if loser == key && roles[value] == nil { lostRoles.append((value, seq)) }
                        } else {
                            revoke(value, at: seq)
                        }
                    }
                }
            }
            for (role, seq) in lostRoles {
                if let p = try Self.loadPrincipal(Self.principalKey(role: role), db: db) {
                    for c in p.adminChannels { revoke(c, at: seq) }
                }
                try db.withStatement("SELECT DISTINCT value FROM sync_grants WHERE principal = ? AND kind = 0",
                                     [.text(Self.principalKey(role: role))]) { stmt in
                    while try stmt.step() { revoke(stmt.string(0) ?? "", at: seq) }
                }
            }
            return Reader(all: channels["*"] != nil, channels: channels, roles: Set(roles.keys), through: through,
                          revoked: revoked, resyncedAt: resynced)
        }
    }
}
