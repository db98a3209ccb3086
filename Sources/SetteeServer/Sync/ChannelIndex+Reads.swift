import Foundation
import SetteeCore
import SetteeStore

/// Reads through the channel index: which documents a reader may see, and a reader's change feed.
extension ChannelIndex {
    /// Of `ids`, those whose current revision is in one of the reader's channels.
    func visible(_ ids: [String], in c: SetteeStore.Collection, to reader: Reader) throws -> Set<String> {
        if reader.all { return Set(ids) }
        if ids.isEmpty || reader.channels.isEmpty { return [] }
        try catchUp(c)
        return try database.read { db in
            var out: Set<String> = []
            try db.withStatement("SELECT channel FROM sync_channels WHERE collection = ? AND id = ? AND removed = 0") { stmt in
                for id in Set(ids) {
                    stmt.reset()
                    stmt.bind([.integer(c.id), .text(id)])
                    while try stmt.step() {
                        if reader.channels[stmt.string(0) ?? ""] != nil {
                            out.insert(id)
                            break
                        }
                    }
                }
            }
            return out
        }
    }

    /// Every document in the reader's channels (its current revision is in one of them; tombstones included).
    func visibleIDs(in c: SetteeStore.Collection, to reader: Reader) throws -> Set<String> {
        try catchUp(c)
        return try database.read { db in
            var out: Set<String> = []
            try db.withStatement("SELECT id FROM sync_channels INDEXED BY sync_channels_seq WHERE collection = ? AND channel = ? AND removed = 0") { stmt in
                for channel in reader.channels.keys {
                    stmt.reset()
                    stmt.bind([.integer(c.id), .text(channel)])
                    while try stmt.step() { out.insert(stmt.string(0) ?? "") }
                }
            }
            return out
        }
    }

    /// One entry of a reader's feed: a document in the reader's channels, or one that left them.
    enum Entry: Sendable {
        case change(SetteeStore.Collection.ChangeRow)
        /// The document left `channels` (of the reader's) at `sequence`, or (`revoked`) the reader lost those
        /// channels then; `rev` is its revision when it left them (for a revocation, its latest the index knows).
        case removed(sequence: UInt64, id: String, rev: RevID, channels: [String], revoked: Bool)

        var sequence: UInt64 {
            switch self {
            case .change(let row): return row.sequence
            case .removed(let seq, _, _, _, _): return seq
            }
        }
    }

    /// The reader's changes after `since`, in sequence order, up to the sequence the reader's grants were read at
    /// (``Reader/through``, returned): documents in the reader's channels whose latest change is after `since`, all the
    /// documents of a channel granted after `since` (backfill), and documents that left the reader's channels
    /// after `since` (Sync Gateway's `removed`). Costs what those channels hold, not the database's size.
    func changes(in c: SetteeStore.Collection, for reader: Reader, since: UInt64, options: SetteeStore.Collection.ChangesOptions,
                 limit: Int?) throws -> (entries: [Entry], through: UInt64) {
        let through = reader.through == .max ? try catchUp(c) : reader.through
        /// A document as the index keeps it: its sequence and current revision then.
        struct Kept {
            var seq: UInt64
            var rev: String
            var deleted: Bool
            var channels: [String] = []
        }
        var latest: [String: Kept] = [:]    // visible documents
        var removed: [String: Kept] = [:]   // documents that left channels: when, which
        var revokedDocs: [String: Kept] = [:]  // documents of channels the reader lost
        var entries: [Entry] = []
        // One read transaction: the index's rows and the documents' (one snapshot, the read locks taken once).
        try database.read { db in
            // Queries for the channels read from `since`, others for those granted after it (or all of them after a
            // resync since then), read from the start; at most 512 channels a statement.
            let refill = reader.resyncedAt > since
            let backfilled = reader.channels.filter { refill || $0.value > since }.map(\.key)
            let current = reader.channels.filter { !refill && $0.value <= since }.map(\.key)
            var groups: [([String], Bool)] = []
            for (channels, backfill) in [(current, false), (backfilled, true)] {
                for start in stride(from: 0, to: channels.count, by: 512) {
                    groups.append((Array(channels[start..<min(channels.count, start + 512)]), backfill))
                }
            }
            for (channels, backfill) in groups {
                // (Padded to a power of two with its first channel again, so the statement comes from the cache.)
                let padded = max(4, 1 << (Int.bitWidth - (channels.count - 1).leadingZeroBitCount))
                let names = channels + Array(repeating: channels[0], count: padded - channels.count)
                let sql = "SELECT id, seq, removed, channel, rev, deleted FROM sync_channels INDEXED BY sync_channels_seq WHERE collection = ? AND channel IN ("
                    + Array(repeating: "?", count: names.count).joined(separator: ",") + ") AND seq > ? AND seq <= ?"
                try db.withStatement(sql, [.integer(c.id)] + names.map { .text($0) }
                                     + [.integer(Int64(clamping: backfill ? 0 : since)), .integer(Int64(clamping: through))]) { stmt in
                    while try stmt.step() {
                        let id = stmt.string(0) ?? "", seq = UInt64(stmt.int64(1))
                        let kept = Kept(seq: seq, rev: stmt.string(4) ?? "", deleted: stmt.int64(5) != 0)
                        // A removed row is news to a reader that held the channel at `since` (a resync's too).
                        let channel = stmt.string(3) ?? ""
                        if stmt.int64(2) == 0 {
                            if (latest[id]?.seq ?? 0) < seq { latest[id] = kept }
                        } else if seq > since, (reader.channels[channel] ?? .max) <= since {
                            var entry = removed[id] ?? kept
                            if entry.seq < seq { entry = Kept(seq: seq, rev: kept.rev, deleted: kept.deleted, channels: entry.channels) }
                            entry.channels.append(channel)
                            removed[id] = entry
                        }
                    }
                }
            }
            // The documents of channels the reader lost after `since`: gone, for a reader that may hold them.
            // (Every document of the channel, whatever its sequence: the entry's is the revocation's.)
            try db.withStatement("SELECT id, rev, deleted FROM sync_channels INDEXED BY sync_channels_seq WHERE collection = ? AND channel = ? AND removed = 0") { stmt in
                for (channel, lostAt) in reader.revoked where lostAt > since {
                    stmt.reset()
                    stmt.bind([.integer(c.id), .text(channel)])
                    while try stmt.step() {
                        let id = stmt.string(0) ?? ""
                        var entry = revokedDocs[id] ?? Kept(seq: lostAt, rev: stmt.string(1) ?? "", deleted: stmt.int64(2) != 0)
                        entry.seq = max(entry.seq, lostAt)
                        entry.channels.append(channel)
                        revokedDocs[id] = entry
                    }
                }
            }
            for id in latest.keys {
                removed[id] = nil
                revokedDocs[id] = nil
            }
            for id in removed.keys { revokedDocs[id] = nil }
            // The documents' rows are read only when the feed shows more than the index keeps (bodies, leaves,
            // conflicts); otherwise a row is the index's (its sequence and revision at that sequence).
            guard options.includeDocs || options.allLeaves || options.conflicts else {
                for (id, kept) in latest {
                    guard let rev = RevID(kept.rev) else { continue }
                    entries.append(.change(.init(sequence: kept.seq, id: id, rev: rev, deleted: kept.deleted)))
                }
                return
            }
            let ids = Array(latest.keys)
            var index = 0
            while index < ids.count {
                let chunk = Array(ids[index..<min(ids.count, index + 2_000)])
                index += chunk.count
                var opts = options
                opts.since = 0
                opts.documentIDs = chunk
                opts.limit = nil
                opts.descending = false
                var read: [SetteeStore.Collection.ChangeRow] = []
                try c.forEachChange(opts, db: db) { row in
                    // A document changed after the index caught up waits for the next read (its new revision may
                    // have left the reader's channels).
                    if row.sequence <= through { read.append(row) }
                    return true
                }
                // The bodies go out only for revisions whose own routing the reader may see (the index may lag a
                // `_resync` rewriting the routing).
                let shown = try visibleRevisions(read.map { .init(id: $0.id, rev: $0.rev) }, in: c, to: reader, db: db)
                for row in read where shown.contains(.init(id: row.id, rev: row.rev)) { entries.append(.change(row)) }
            }
        }
        for (gone, revoked) in [(removed, false), (revokedDocs, true)] {
            for (id, kept) in gone {
                guard let rev = RevID(kept.rev) else { continue }
                entries.append(.removed(sequence: kept.seq, id: id, rev: rev, channels: kept.channels.sorted(), revoked: revoked))
            }
        }
        entries.sort { $0.sequence < $1.sequence }
        if let limit, entries.count > limit { entries.removeSubrange(limit...) }
        return (entries, through)
    }
}

extension ChannelIndex {
    /// A document revision, as the per-revision checks name it.
    struct RevisionKey: Hashable, Sendable {
        let id: String
        let rev: RevID
    }

    /// Of these revisions, those the reader may see: each one's own routing (stored with it, never changed)
    /// names one of the reader's channels. A revision without routing (written before the sync function, or
    /// pruned as no longer a leaf) is not visible. What a route serves is checked this way, on the revision it
    /// actually read, so a document changing channels between a check and a read can't slip a body through.
    func visibleRevisions(_ revisions: [RevisionKey], in c: SetteeStore.Collection, to reader: Reader) throws -> Set<RevisionKey> {
        if reader.all { return Set(revisions) }
        if revisions.isEmpty || reader.channels.isEmpty { return [] }
        return try database.read { db in try self.visibleRevisions(revisions, in: c, to: reader, db: db) }
    }

    /// ``visibleRevisions(_:in:to:)`` on a connection the caller holds.
    func visibleRevisions(_ revisions: [RevisionKey], in c: SetteeStore.Collection, to reader: Reader,
                          db: Connection) throws -> Set<RevisionKey> {
        if reader.all { return Set(revisions) }
        var out: Set<RevisionKey> = []
        for key in Set(revisions) {
            guard let bytes = try c.routing(id: key.id, rev: key.rev, db: db) else { continue }
            if Routing(json: bytes).channels.contains(where: { reader.channels[$0] != nil }) { out.insert(key) }
        }
        return out
    }

    /// Whether the reader may see this revision (``visibleRevisions(_:in:to:)``).
    func isVisible(_ id: String, rev: RevID, in c: SetteeStore.Collection, to reader: Reader) throws -> Bool {
        try !visibleRevisions([RevisionKey(id: id, rev: rev)], in: c, to: reader).isEmpty
    }
}
