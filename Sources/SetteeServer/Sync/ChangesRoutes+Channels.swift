import Foundation
import SetteeCore
import SetteeIndex
import SetteeStore

/// The change feed of a database with a sync function, for a reader limited to channels, or for anyone asking for
/// some channels (Sync Gateway's `filter=sync_gateway/bychannel&channels=a,b`).
extension ChangesRoutes {
    /// Who reads a channel feed, and which channels it asked for.
    struct ChannelFeed: Sendable {
        let index: ChannelIndex
        let user: String?
        let roles: [String]
        /// Whether the reader is limited to its channels (not a database admin).
        let limited: Bool
        /// `channels=…` of `filter=sync_gateway/bychannel`, or nil: every channel of the reader's.
        let requested: Set<String>?
        /// The reader the request was admitted with (``SyncGate``), used by a normal feed's one scan instead of
        /// reading the grants again; nil: read them at each scan (live feeds).
        var admitted: ChannelIndex.Reader? = nil
    }

    /// Sync Gateway's channel filter.
    static let byChannelFilter = "sync_gateway/bychannel"

    /// The channels a `filter=sync_gateway/bychannel` request names (`channels=a,b`, or a `channels` array or
    /// string in a POST body).
    static func requestedChannels(_ q: QueryOptions, body: JSONObject) throws -> Set<String> {
        var names: [String] = []
        if let text = q["channels"] {
            names = text.split(separator: ",").map { String($0) }
        } else if let list = body["channels"]?.arrayValue {
            names = list.compactMap(\.stringValue)
        } else if let text = body["channels"]?.stringValue {
            names = text.split(separator: ",").map { String($0) }
        }
        guard !names.isEmpty else {
            throw CouchError.badRequest("filter=\(byChannelFilter) needs a `channels` parameter (a comma-separated list).")
        }
        return Set(names)
    }

    /// ``scan(_:_:_:since:)`` through the channel index: the reader's documents, the backfill of channels granted
    /// after `since`, and `removed` rows for documents that left the reader's channels. With a backfill of
    /// documents at or below `since`, the whole feed up to the index's sequence is answered (no `limit`): those
    /// rows sort below `since`, and a page of them could not be resumed from a sequence.
    static func scanChannels(_ c: SetteeStore.Collection, _ db: Database, _ o: Options, feed: ChannelFeed,
                             since: UInt64) throws -> ([[UInt8]], UInt64, Int) {
        var reader: ChannelIndex.Reader
        if try feed.index.syncFunction() == nil {
            reader = .everything  // the database is CouchDB's (now): no channels
        } else if let admitted = feed.admitted {
            reader = admitted
        } else if feed.limited {
            reader = try feed.index.reader(user: feed.user, roles: feed.roles, in: c)
        } else {
            reader = .everything
            reader.through = try feed.index.catchUp(c)
        }
        if let requested = feed.requested { reader = reader.restricted(to: requested) }
        if reader.all {
            var unfiltered = o
            unfiltered.channelFeed = nil
            return try scan(c, db, unfiltered, since: since)
        }
        var opts = SetteeStore.Collection.ChangesOptions(since: since)
        opts.allLeaves = o.allLeaves
        opts.conflicts = o.conflicts && o.includeDocs
        opts.includeDocs = o.includeDocs || o.selector != nil || o.javascript != nil
        let filtered = o.selector != nil || o.designOnly || o.javascript != nil
        // A limited reader is offered each document's current revision only: a conflicting leaf has routing of
        // its own.
        if feed.limited { opts.allLeaves = false; opts.conflicts = false }
        let (entries, through) = try feed.index.changes(in: c, for: reader, since: since, options: opts, limit: nil)
        // Rows at or below `since` (a channel granted since) can't be paged by sequence: then no `limit`.
        let backfill = entries.contains { $0.sequence <= since }
        var rows: [[UInt8]] = []
        var last = max(since, through)
        let ordered = o.descending ? entries.reversed() : entries
        let onlyIDs = o.docIDs.map(Set.init)
        // When the limit is reached, the entries sharing the last one's sequence still go (a revocation's rows all
        // carry its sequence: a page ending among them could not be resumed).
        var cutAt: UInt64?
        for entry in ordered {
            if let cutAt, entry.sequence != cutAt { break }
            switch entry {
            case .change(let row):
                if o.designOnly && !row.id.hasPrefix("_design/") { continue }
                if let onlyIDs, !onlyIDs.contains(row.id) { continue }
                var docBytes: [UInt8]?
                if let body = row.body {
                    docBytes = DocumentBytes.splice(id: row.id, rev: row.rev.description, deleted: row.deleted, body: body)
                }
                if let selector = o.selector {
                    guard let bytes = docBytes, let doc = try? JSON.parse(bytes), ViewCollator.matches(selector, doc) else { continue }
                }
                if let js = o.javascript {
                    let bytes = docBytes ?? DocumentBytes.splice(id: row.id, rev: row.rev.description, deleted: row.deleted,
                                                                 body: Array("{}".utf8))
                    guard let doc = try? JSON.parse(bytes), try js.passes(doc) else { continue }
                }
                rows.append(try render(row, doc: o.includeDocs ? docBytes : nil, db: db, o: o))
            case .removed(let seq, let id, let rev, let channels, let revoked):
                if filtered || !(onlyIDs?.contains(id) ?? true) { continue }
                rows.append(renderRemoved(seq: seq, id: id, rev: rev, channels: channels, revoked: revoked,
                                          includeDoc: o.includeDocs, o: o))
            }
            if !backfill, cutAt == nil, let limit = o.limit, rows.count >= limit {
                if !o.descending { last = max(since, entry.sequence) }
                cutAt = entry.sequence
            }
        }
        return (rows, last, 0)
    }

    /// A document that left the reader's channels, as Sync Gateway writes it: `removed` names the channels
    /// (`revoked`: the reader lost them), and the document, when asked for, is only `{"_id", "_rev", "_removed": true}`.
    static func renderRemoved(seq: UInt64, id: String, rev: RevID, channels: [String], revoked: Bool = false,
                              includeDoc: Bool, o: Options) -> [UInt8] {
        var out: [UInt8] = Array(#"{"seq":"#.utf8)
        o.sequences.append(seq, to: &out)
        out.append(contentsOf: #","id":"#.utf8)
        JSON.appendString(id, to: &out)
        out.append(contentsOf: #","removed":"#.utf8)
        JSON.array(channels.map(JSON.string)).serialize(into: &out)
        out.append(contentsOf: #","changes":[{"rev":"#.utf8)
        JSON.appendString(rev.description, to: &out)
        out.append(contentsOf: "}]".utf8)
        if revoked { out.append(contentsOf: #","revoked":true"#.utf8) }
        if includeDoc {
            out.append(contentsOf: #","doc":{"_id":"#.utf8)
            JSON.appendString(id, to: &out)
            out.append(contentsOf: #","_rev":"#.utf8)
            JSON.appendString(rev.description, to: &out)
            out.append(contentsOf: #","_removed":true}"#.utf8)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
