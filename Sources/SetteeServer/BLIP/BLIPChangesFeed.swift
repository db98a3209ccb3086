import Logging
import SetteeBLIP
import SetteeCore
import SetteeReplication
import SetteeStore

/// The pull half of a connection: what `subChanges` asked for, sent as `changes` and `rev` requests.
///
/// From `since`, the collection's feed goes out in `changes` batches (`[[sequence, docID, revID, deleted?], …]`);
/// each batch waits for the client's answer, then the revisions it wants go out as `rev` requests (`id`, `rev`,
/// `sequence`, `history` down to an ancestor the client named, up to its `maxHistory`; `deleted` for a tombstone)
/// and their replies are awaited before the next batch (the client's own flow control). When the feed is caught up
/// an empty `changes` says so; a one-shot feed ends there, a continuous one waits for the next commit.
/// A revision no longer stored is sent as `norev`. A revision with attachments goes out with its `_attachments`
/// stubs and blobs named by SHA-1 (``BLIPAttachments/outgoing(_:database:)``), and they are offered for
/// `getAttachment` until the client answers the `rev`.
struct BLIPChangesFeed: Sendable {
    struct Options: Sendable {
        var since: UInt64 = 0
        var continuous = false
        var activeOnly = false
        var batch = 200
        var documentIDs: [String]?
        /// `filter=sync_gateway/bychannel`'s `channels`: only documents in these (of the reader's).
        var channels: Set<String>?
    }

    let context: BLIPSyncHandler.Context
    /// The collection the feed follows, and the index its messages carry when the client named its collections.
    let collection: SetteeStore.Collection
    let collectionIndex: Int?
    let session: BLIPSession
    /// Where the attachments of each `rev` are offered to the client until it answers.
    let offered: BLIPOfferedAttachments
    let options: Options

    /// The `collection` property of the feed's messages, for a client that named its collections.
    var collectionProperty: BLIPProperties {
        collectionIndex.map { ["collection": String($0)] } ?? [:]
    }

    /// A `since` as the client sends it: JSON, a number or a string of one (`0`, `42`, `"42"`).
    static func parseSequence(_ text: String) throws -> UInt64 {
        let json = try? JSON.parse(text)
        if let n = json?.intValue, n >= 0 { return UInt64(n) }
        let string = json?.stringValue ?? text
        if let n = UInt64(string.split(separator: "-").first ?? "") { return n }
        throw BLIPSyncError(domain: .http, code: 400, "invalid since: \(text)")
    }

    func run() async {
        do {
            try await feed()
        } catch is CancellationError {
        } catch is BLIPSession.Closed {
        } catch {
            context.logger.notice("BLIP changes feed ended: \(error)")
        }
    }

    private func feed() async throws {
        let hasFunction = try ChannelIndex.of(context.database).syncFunction() != nil
        if options.channels != nil || (context.limitedReader != nil && (hasFunction || options.continuous)) {
            return try await channelFeed()
        }
        let commits = context.database.commits()  // subscribed before the first read
        var since = options.since
        var caughtUp = false
        var iterator = commits.makeAsyncIterator()
        while !Task.isCancelled {
            var scan = SetteeStore.Collection.ChangesOptions(since: since)
            scan.limit = options.batch
            // Every leaf, as CouchDB's `style=all_docs` feed: a conflict reaches the client as it is stored here.
            scan.allLeaves = true
            scan.documentIDs = options.documentIDs
            let c = collection, request = scan
            let rows = try await blocking { try c.changes(request) }
            if rows.isEmpty {
                guard try await caughtUpThenWait(&caughtUp, &iterator) else { return }
                continue
            }
            since = rows.last!.sequence
            // activeOnly: a first pull leaves tombstones out (until caught up, as Sync Gateway does).
            let sent = options.activeOnly && !caughtUp ? rows.filter { !$0.deleted } : rows
            if sent.isEmpty { continue }
            try await send(sent)
        }
        throw CancellationError()
    }

    /// The feed through the channel index (``ChannelIndex/changes(in:for:since:options:limit:)``): a reader limited
    /// to its channels, or a client naming channels (`filter=sync_gateway/bychannel`). The reader's grants are read
    /// again for every batch, so a grant or a revocation reaches a continuous pull at its next commit.
    private func channelFeed() async throws {
        let commits = context.database.commits()
        var iterator = commits.makeAsyncIterator()
        let index = ChannelIndex.of(context.database)
        var since = options.since
        var caughtUp = false
        while !Task.isCancelled {
            let c = collection, from = since, opts = options, who = context.limitedReader
            let (entries, through) = try await blocking { () -> ([ChannelIndex.Entry], UInt64) in
                var reader: ChannelIndex.Reader
                if try index.syncFunction() == nil {
                    reader = .everything  // (no channels: the database is CouchDB's; `channels` was refused)
                } else if let who {
                    reader = try index.reader(user: who.user, roles: who.roles, in: c)
                } else {
                    reader = .everything
                    reader.through = try index.catchUp(c)
                }
                if let channels = opts.channels { reader = reader.restricted(to: channels) }
                var scan = SetteeStore.Collection.ChangesOptions(since: from)
                // A limited reader is offered each document's current revision only (as Sync Gateway offers it):
                // a conflicting leaf has routing of its own, outside the reader's channels perhaps.
                scan.allLeaves = who == nil || reader.all
                if reader.all {
                    // (A user granted `*`, and no channels named: every document.)
                    scan.limit = opts.batch
                    scan.documentIDs = opts.documentIDs
                    let rows = try c.changes(scan)
                    return (rows.map { .change($0) }, rows.last?.sequence ?? from)
                }
                var (entries, through) = try index.changes(in: c, for: reader, since: from, options: scan, limit: nil)
                if let ids = opts.documentIDs.map(Set.init) {
                    entries.removeAll { entry in
                        switch entry {
                        case .change(let row): return !ids.contains(row.id)
                        case .removed(_, let id, _, _, _): return !ids.contains(id)
                        }
                    }
                }
                return (entries, max(through, from))
            }
            since = through
            let sent = options.activeOnly && !caughtUp
                ? entries.filter { if case .change(let row) = $0 { return !row.deleted } else { return false } }
                : entries
            if sent.isEmpty {
                guard try await caughtUpThenWait(&caughtUp, &iterator) else { return }
                continue
            }
            var start = 0
            while start < sent.count {
                let end = min(sent.count, start + options.batch)
                try await send(Array(sent[start..<end]))
                start = end
            }
        }
        throw CancellationError()
    }

    /// The feed has nothing more: says so once (an empty `changes`), then, for a continuous feed, waits for the next
    /// commit. Returns false when the feed ends (one-shot, or the database closed).
    private func caughtUpThenWait(_ caughtUp: inout Bool, _ iterator: inout AsyncStream<UInt64>.Iterator) async throws -> Bool {
        if !caughtUp {
            _ = try await session.request(.request(profile: "changes", properties: collectionProperty, body: Array("[]".utf8)))
            caughtUp = true
        }
        guard options.continuous else { return false }
        return await iterator.next() != nil
    }

    /// One revision offered in a `changes` batch: a document's winner, or another leaf of it (a conflict).
    struct Offer {
        var row: SetteeStore.Collection.ChangeRow
        var rev: RevID
    }

    private func send(_ rows: [SetteeStore.Collection.ChangeRow]) async throws {
        try await send(rows.map { ChannelIndex.Entry.change($0) })
    }

    /// Sends a `changes` batch, then the revisions the client asks for. A document that left the reader's
    /// channels goes as `[sequence, docID, revID, 4]`, one whose channel the reader lost as `[…, 2]` (Sync Gateway 3's
    /// removal and revocation flags: Couchbase Lite purges its copy).
    private func send(_ entries: [ChannelIndex.Entry]) async throws {
        var offers: [Offer?] = []
        var items: [JSON] = []
        for entry in entries {
            switch entry {
            case .change(let row):
                for rev in row.leaves ?? [row.rev] {
                    offers.append(Offer(row: row, rev: rev))
                    items.append(rev == row.rev && row.deleted
                        ? [.int(Int64(row.sequence)), .string(row.id), .string(rev.description), .bool(true)]
                        : [.int(Int64(row.sequence)), .string(row.id), .string(rev.description)])
                }
            case .removed(let seq, let id, let rev, _, let revoked):
                offers.append(nil)
                items.append([.int(Int64(seq)), .string(id), .string(rev.description), .int(revoked ? 2 : 4)])
            }
        }
        let reply = try await session.request(.request(profile: "changes", properties: collectionProperty,
                                                       body: JSON.array(items).serializedBytes))
        if let error = reply.errorInfo { throw BLIPSyncError(domain: .http, code: error.code, "changes refused: \(error.message)") }
        let answers = (try? reply.jsonBody())?.arrayValue ?? []
        let maxHistory = reply.properties["maxHistory"].flatMap(Int.init) ?? Int.max
        var wanted: [(offer: Offer, known: Set<String>)] = []
        for (i, answer) in answers.enumerated() where i < offers.count {
            if let offer = offers[i], let known = answer.arrayValue { wanted.append((offer, Set(known.compactMap(\.stringValue)))) }
        }
        guard !wanted.isEmpty else { return }
        let c = collection, ids = wanted.map(\.offer.row.id), revs = wanted.map(\.offer.rev)
        let limited = context.limitedReader
        let (records, outgoing) = try await blocking { () -> ([DocumentRecord?], [BLIPAttachments.Outgoing?]) in
            var records = try c.records(ids: ids, withTree: true)
            // A limited reader gets a revision's body only if the revision's own routing lets it (the channel index
            // may lag a `_resync`, or the reader's grants changed since the `changes` list): else `norev`.
            if let limited, try ChannelIndex.of(c.database).syncFunction() != nil {
                let index = ChannelIndex.of(c.database)
                let reader = try index.reader(user: limited.user, roles: limited.roles, in: c)
                let shown = try index.visibleRevisions(zip(ids, revs).map { .init(id: $0, rev: $1) }, in: c, to: reader)
                for k in records.indices where !shown.contains(.init(id: ids[k], rev: revs[k])) { records[k] = nil }
            }
            // Revisions with attachments go out with them named for Couchbase Lite.
            let outgoing = try records.indices.map { k in
                try records[k]?.revision(revs[k]).flatMap { try BLIPAttachments.outgoing($0.body, database: c.database) }
            }
            return (records, outgoing)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (k, item) in wanted.enumerated() {
                let message = Self.revMessage(item.offer.row, rev: item.offer.rev, record: records[k], body: outgoing[k]?.body,
                                              known: item.known, maxHistory: maxHistory, collectionIndex: collectionIndex)
                if message.profile == "norev" {
                    session.send(message)
                } else {
                    let id = item.offer.row.id, names = outgoing[k]?.names ?? []
                    group.addTask {
                        offered.add(docID: id, names)
                        defer { offered.remove(docID: id, names) }
                        _ = try await session.request(message)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// The `rev` request for revision `rev` of a change (or `norev` when that revision is gone); `body` replaces the
    /// stored body (attachments named for Couchbase Lite).
    static func revMessage(_ row: SetteeStore.Collection.ChangeRow, rev: RevID, record: DocumentRecord?, body: [UInt8]? = nil,
                           known: Set<String>, maxHistory: Int, collectionIndex: Int? = nil) -> BLIPMessage {
        let sequence = String(row.sequence)
        guard let record, let revision = record.revision(rev) else {
            var properties: BLIPProperties = ["id": row.id, "rev": rev.description, "sequence": sequence,
                                              "error": "404", "reason": "missing"]
            if let collectionIndex { properties["collection"] = String(collectionIndex) }
            return .request(profile: "norev", properties: properties, noReply: true)
        }
        var history: [String] = []
        for ancestor in (record.tree?.history(of: rev) ?? []).dropFirst() {
            guard history.count < max(maxHistory - 1, 0) else { break }
            history.append(ancestor.description)
            if known.contains(ancestor.description) { break }
        }
        var properties: BLIPProperties = ["id": row.id, "rev": rev.description, "sequence": sequence]
        if let collectionIndex { properties["collection"] = String(collectionIndex) }
        if revision.deleted { properties["deleted"] = "1" }
        if !history.isEmpty { properties["history"] = history.joined(separator: ",") }
        let sent = body ?? revision.body
        return .request(profile: "rev", properties: properties, body: sent.isEmpty ? Array("{}".utf8) : sent)
    }
}
