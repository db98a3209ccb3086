import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import SetteeCore
import SetteeIndex
import SetteeStore

/// `/{db}/_changes`: normal, longpoll, continuous and eventsource feeds.
///
/// Live feeds subscribe to the database's commit notifications before their first read, so no commit is
/// missed between reading and waiting, and sleep until a commit or a heartbeat tick — no polling.
enum ChangesRoutes {
    enum Feed: String { case normal, longpoll, continuous, eventsource }

    struct Options: Sendable {
        var feed = Feed.normal
        var since: UInt64 = 0
        var sinceNow = false
        var limit: Int?
        var descending = false
        var allLeaves = false
        var includeDocs = false
        var conflicts = false
        var attachments = false
        /// `att_encoding_info`: show how gzip-stored attachments are stored.
        var attEncodingInfo = false
        var docIDs: [String]?
        var selector: MangoSelector?
        var designOnly = false
        /// `filter=ddoc/name` or `filter=_view` with `view=ddoc/name`, until resolved into ``javascript``.
        var javascriptFilterName: (spec: String, view: Bool)?
        var javascript: JavaScriptFilter?
        var heartbeat: Int?          // milliseconds
        var timeout: Int = 60_000     // milliseconds
        /// How sequences are written (set for the feed's database).
        var sequences = CouchSequence(node: "", databaseUUID: "")
        /// A feed read through the channel index (a database with a sync function), or nil.
        var channelFeed: ChannelFeed?
        /// `filter=sync_gateway/bychannel`: the channels asked for.
        var channels: Set<String>?
    }

    static func handle(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        let (db, c) = try target.open(call.node)
        var body = JSONObject()
        switch call.method {
        case .get, .head: break
        case .post:
            let bytes = try await call.bodyBytes()
            if !bytes.isEmpty {
                guard case .object(let o) = try call.parseJSON(bytes) else {
                    throw CouchError.badRequest("Request body must be a JSON object")
                }
                body = o
            }
        default: throw CouchError.methodNotAllowed("GET,HEAD,POST")
        }
        var options = try parse(call.query, body: body)
        options.sequences = call.sequences(db.uuid)
        // A caller who is not a database admin reads through channels when the database has a sync function; a
        // live feed asks again at every scan (a function set, or a `*` grant revoked, while it runs takes effect).
        let limited = call.access < .admin && !call.isAdmin
        if call.reader != nil || options.channels != nil || (limited && options.feed != .normal) {
            let index = ChannelIndex.of(db)
            if options.channels != nil, try index.syncFunction() == nil {
                throw CouchError.badRequest("filter=\(byChannelFilter) needs a database with a sync function.")
            }
            options.channelFeed = ChannelFeed(index: index, user: call.user, roles: call.userCtx.roles,
                                              limited: limited, requested: options.channels,
                                              admitted: options.feed == .normal ? call.reader : nil)
        }
        if let (spec, view) = options.javascriptFilterName {
            let request = JavaScriptRequest.make(call, database: db, body: body.isEmpty ? nil : JSON.object(body).serializedBytes,
                                                 security: (try? db.metadata("security")) ?? SecurityObject.adminOnlyJSON)
            options.javascript = try await blocking { try JavaScriptFilter.resolve(spec, view: view, collection: c, request: request) }
        }
        if options.feed == .eventsource, let lastEventID = call.header(HTTPField.Name("Last-Event-ID")!) {
            options.since = try parseSequence(lastEventID)
        }
        switch options.feed {
        case .normal:
            if options.sinceNow { options.since = db.lastSequence }
            let opts = options
            let (rows, last, pending) = try await blocking { try scan(c, db, opts, since: opts.since) }
            let out = feedBody(rows, last: last, pending: pending, sequences: opts.sequences)
            return Reply.raw(.ok, out)
        case .longpoll:
            return longpoll(db, c, options, node: call.node)
        case .continuous, .eventsource:
            return stream(db, c, options, node: call.node)
        }
    }

    /// A normal or longpoll feed's body in CouchDB's layout, which line-based readers depend on: `{"results":[` on
    /// a line of its own, one change per line (separated by `,\r\n`), then `],` and `last_seq` on lines of their own.
    static func feedBody(_ rows: [[UInt8]], last: UInt64, pending: Int, sequences: CouchSequence) -> [UInt8] {
        var out = feedHead
        out.reserveCapacity(rows.reduce(64) { $0 + $1.count + 3 })
        for (i, row) in rows.enumerated() {
            if i > 0 { out.append(contentsOf: ",\r\n".utf8) }
            out.append(contentsOf: row)
        }
        out.append(contentsOf: "\n],\n\"last_seq\":".utf8)
        sequences.append(last, to: &out)
        out.append(contentsOf: ",\"pending\":\(pending)}\n".utf8)
        return out
    }

    static func parse(_ q: QueryOptions, body: JSONObject) throws -> Options {
        var o = Options()
        if let feed = q["feed"] {
            // `live` is CouchDB's other name for `continuous`.
            guard let f = Feed(rawValue: feed == "live" ? "continuous" : feed) else { throw CouchError.badRequest("Supported `feed` types: normal, continuous, longpoll, eventsource") }
            o.feed = f
        }
        if let since = q["since"] ?? body["since"].map({ $0.stringValue ?? $0.jsonString }) {
            if since == "now" {
                o.sinceNow = true
            } else {
                o.since = try parseSequence(since)
            }
        }
        // CouchDB's `last-event-id` option (any feed) stands for `since`, as the `Last-Event-ID` header does for an
        // eventsource feed (`last_event_id` is an older spelling of Settee's).
        if let lastEventID = q["last-event-id"] ?? q["last_event_id"] {
            o.since = try parseSequence(lastEventID)
            o.sinceNow = false
        }
        o.limit = try q.int("limit")
        o.descending = try q.bool("descending")
        if let style = q["style"] {
            guard style == "all_docs" || style == "main_only" else { throw CouchError.badRequest("Supported `style` values: main_only, all_docs") }
            o.allLeaves = style == "all_docs"
        }
        o.includeDocs = try q.bool("include_docs")
        o.conflicts = try q.bool("conflicts")
        o.attachments = try q.bool("attachments")
        o.attEncodingInfo = try q.bool("att_encoding_info")
        if let hb = q["heartbeat"] {
            if hb == "true" { o.heartbeat = 60_000 } else if hb != "false" {
                guard let ms = Int(hb) else {
                    throw CouchError.badRequest("Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
                }
                guard ms > 0 else { throw CouchError.badRequest("The heartbeat value should be a positive integer (in milliseconds).") }
                o.heartbeat = max(ms, 100)
            }
        }
        if let t = try q.int("timeout") { o.timeout = max(t, 0) }
        if let filter = q["filter"] {
            switch filter {
            case "_doc_ids":
                var ids = body["doc_ids"]
                if ids == nil { ids = try q.json("doc_ids") }
                guard let list = ids?.arrayValue else { throw CouchError.badRequest("`doc_ids` filter parameter is not a list of doc ids.") }
                o.docIDs = list.compactMap(\.stringValue)
            case "_selector":
                guard let selector = body["selector"] else { throw CouchError.badRequest("Selector must be specified in POST payload") }
                do { o.selector = try MangoSelector(selector) } catch { throw CouchError.from(error) }
            case "_design":
                o.designOnly = true
            case "_view":
                guard let view = q["view"] else { throw CouchError.badRequest("`view` filter parameter is not provided.") }
                o.javascriptFilterName = (view, true)
            case byChannelFilter:
                o.channels = try requestedChannels(q, body: body)
            default:
                o.javascriptFilterName = (filter, false)
            }
        }
        return o
    }

    /// Sequences are opaque to clients: accept `N`, `"N"` and CouchDB-style `"N-…"`.
    /// The parsing is `ChangeSequence.parse` in SetteeCore (fuzzed there); errors become 400 `bad_request`.
    static func parseSequence(_ text: String) throws -> UInt64 {
        do { return try ChangeSequence.parse(text) } catch { throw CouchError.from(error) }
    }

    /// Reads rows after `since`; returns rendered rows, the feed's last_seq and pending count.
    static func scan(_ c: SetteeStore.Collection, _ db: Database, _ o: Options, since: UInt64) throws -> ([[UInt8]], UInt64, Int) {
        if let feed = o.channelFeed { return try scanChannels(c, db, o, feed: feed, since: since) }
        let dbSeq = db.lastSequence
        var opts = SetteeStore.Collection.ChangesOptions(since: since)
        opts.descending = o.descending
        opts.allLeaves = o.allLeaves
        opts.conflicts = o.conflicts && o.includeDocs
        opts.includeDocs = o.includeDocs || o.selector != nil || o.javascript != nil
        opts.documentIDs = o.docIDs
        let filtered = o.selector != nil || o.designOnly || o.javascript != nil
        if !filtered { opts.limit = o.limit }
        var rows: [[UInt8]] = []
        // `last_seq` is the sequence of the last change read (a descending feed's oldest), as CouchDB's
        // `fabric_rpc:changes_enumerator` keeps it; a descending feed starts at the database's sequence.
        var last = o.descending ? dbSeq : since
        var limitReached = false
        try c.forEachChange(opts) { row in
            last = row.sequence
            if o.designOnly && !row.id.hasPrefix("_design/") { return true }
            var docBytes: [UInt8]?
            if let body = row.body {
                docBytes = DocumentBytes.splice(id: row.id, rev: row.rev.description, deleted: row.deleted, body: body)
            }
            if let selector = o.selector {
                guard let bytes = docBytes, let doc = try? JSON.parse(bytes), ViewCollator.matches(selector, doc) else { return true }
            }
            if let js = o.javascript {
                let bytes = docBytes ?? DocumentBytes.splice(id: row.id, rev: row.rev.description, deleted: row.deleted, body: Array("{}".utf8))
                guard let doc = try? JSON.parse(bytes), try js.passes(doc) else { return true }
            }
            rows.append(try render(row, doc: o.includeDocs ? docBytes : nil, db: db, o: o))
            if let limit = o.limit, rows.count >= limit {
                limitReached = true
                return false
            }
            return true
        }
        if !o.descending && !limitReached {
            last = max(last, dbSeq)
        }
        var pending = 0
        if limitReached && !o.descending && !filtered && o.docIDs == nil {
            pending = try c.changeCount(since: last)  // one indexed COUNT, not a scan of the rest of the feed
        } else if limitReached && !o.descending {
            var rest = SetteeStore.Collection.ChangesOptions(since: last)
            rest.documentIDs = o.docIDs
            rest.includeDocs = o.selector != nil || o.javascript != nil
            try c.forEachChange(rest) { row in
                if o.designOnly && !row.id.hasPrefix("_design/") { return true }
                if let selector = o.selector {
                    let bytes = DocumentBytes.splice(id: row.id, rev: row.rev.description, deleted: row.deleted, body: row.body ?? [])
                    guard let doc = try? JSON.parse(bytes), ViewCollator.matches(selector, doc) else { return true }
                }
                if let js = o.javascript {
                    let bytes = DocumentBytes.splice(id: row.id, rev: row.rev.description, deleted: row.deleted, body: row.body ?? Array("{}".utf8))
                    guard let doc = try? JSON.parse(bytes), try js.passes(doc) else { return true }
                }
                pending += 1
                return true
            }
        }
        return (rows, last, pending)
    }

    /// The sequence string of a rendered change row (an eventsource event's id).
    static func seqText(_ row: [UInt8]) -> String? {
        guard let json = try? JSON.parse(row), let seq = json["seq"] else { return nil }
        return seq.stringValue ?? seq.jsonString
    }

    static func render(_ row: SetteeStore.Collection.ChangeRow, doc: [UInt8]?, db: Database, o: Options) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + (doc?.count ?? 0))
        out.append(contentsOf: "{\"seq\":".utf8)
        o.sequences.append(row.sequence, to: &out)
        out.append(contentsOf: ",\"id\":".utf8)
        JSON.appendString(row.id, to: &out)
        out.append(contentsOf: #","changes":["#.utf8)
        let revs = row.leaves ?? [row.rev]
        for (i, rev) in revs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"rev":"#.utf8)
            JSON.appendString(rev.description, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        if row.deleted { out.append(contentsOf: #","deleted":true"#.utf8) }
        if let doc {
            out.append(contentsOf: #","doc":"#.utf8)
            if (o.conflicts && row.conflicts?.isEmpty == false) || o.attachments || o.attEncodingInfo {
                guard case .object(var d) = try JSON.parse(doc) else { throw SetteeError(.internalError, "bad doc") }
                if let conflicts = row.conflicts, !conflicts.isEmpty {
                    d["_conflicts"] = .array(conflicts.map { .string($0.description) })
                }
                if o.attachments { try DocumentOutput.inlineAttachments(&d, database: db) }
                if o.attEncodingInfo { try DocumentOutput.addEncodingInfo(&d, database: db) }
                JSON.object(d).serialize(into: &out)
            } else {
                out.append(contentsOf: doc)
            }
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    // MARK: Live feeds

    /// Commit notifications and heartbeat ticks merged into one stream.
    enum Event: Sendable { case commit, tick }

    /// How often a live feed wakes to check its heartbeat and timeout: a quarter of the shorter one, 50 ms–1 s.
    static func tickInterval(heartbeat: Int?, timeout: Int?) -> Int {
        let shortest = [heartbeat, timeout].compactMap { $0 }.min() ?? 4000
        return min(max(shortest / 4, 50), 1000)
    }

    /// Ends on commit-stream end (database closed) and on the server's graceful shutdown (the node's
    /// ``ShutdownNotice``, or ServiceLifecycle's handler where the request runs inside the server's task), so open
    /// feeds finish with their `last_seq` line instead of holding the shutdown.
    static func events(_ db: Database, tick: Int, node: Node) -> (AsyncStream<Event>, @Sendable () -> Void) {
        let commits = db.commits()  // subscribe now, before the first read
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(4))
        let notice = node.shutdownNotice.onShutdown { continuation.finish() }
        let forward = Task {
            await withGracefulShutdownHandler {
                for await _ in commits { continuation.yield(.commit) }
            } onGracefulShutdown: {
                continuation.finish()
            }
            continuation.finish()
        }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(tick))
                continuation.yield(.tick)
            }
        }
        return (stream, { forward.cancel(); ticker.cancel(); continuation.finish(); node.shutdownNotice.remove(notice) })
    }

    static func longpoll(_ db: Database, _ c: SetteeStore.Collection, _ options: Options, node: Node) -> Response {
        var o = options
        if o.sinceNow { o.since = db.lastSequence }
        let (events, stop) = events(db, tick: tickInterval(heartbeat: o.heartbeat, timeout: o.timeout), node: node)
        let opts = o
        let body = ResponseBody { writer in
            defer { stop() }
            try await writer.write(ByteBuffer(bytes: feedHead))
            let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(opts.timeout) * 1_000_000
            var lastBeat = DispatchTime.now().uptimeNanoseconds
            var (rows, last, pending) = try await blocking { try scan(c, db, opts, since: opts.since) }
            if rows.isEmpty {
                for await event in events {
                    if event == .commit {
                        (rows, last, pending) = try await blocking { try scan(c, db, opts, since: opts.since) }
                        if !rows.isEmpty { break }
                    }
                    let now = DispatchTime.now().uptimeNanoseconds
                    if now >= deadline { break }
                    if let hb = opts.heartbeat, now - lastBeat >= UInt64(hb) * 1_000_000 {
                        try await writer.write(ByteBuffer(string: "\n"))
                        lastBeat = now
                    }
                }
            }
            // The head went out when the wait began (as CouchDB sends it), so the rest follows it.
            let out = feedBody(rows, last: last, pending: pending, sequences: opts.sequences)
            try await writer.write(ByteBuffer(bytes: out[feedHead.count...]))
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "must-revalidate"], body: body)
    }

    /// What a normal or longpoll feed's body starts with.
    static let feedHead = Array("{\"results\":[\n".utf8)

    static func stream(_ db: Database, _ c: SetteeStore.Collection, _ options: Options, node: Node) -> Response {
        var o = options
        if o.sinceNow { o.since = db.lastSequence }
        o.descending = false
        let eventSource = o.feed == .eventsource
        // CouchDB: with a heartbeat the feed runs until the client leaves; otherwise it ends after `timeout` idle.
        let idleTimeout: UInt64? = o.heartbeat == nil ? UInt64(o.timeout) * 1_000_000 : nil
        let (events, stop) = events(db, tick: tickInterval(heartbeat: o.heartbeat, timeout: idleTimeout == nil ? nil : o.timeout),
                                    node: node)
        let opts = o
        let body = ResponseBody { writer in
            defer { stop() }
            var since = opts.since
            var sent = 0
            var lastActivity = DispatchTime.now().uptimeNanoseconds
            var lastBeat = lastActivity
            func emit(_ rows: [[UInt8]]) async throws {
                guard !rows.isEmpty else { return }
                var out: [UInt8] = []
                for row in rows {
                    if eventSource {
                        out.append(contentsOf: "data: ".utf8)
                        out.append(contentsOf: row)
                        if let seq = seqText(row) { out.append(contentsOf: "\nid: \(seq)".utf8) }
                        out.append(contentsOf: "\n\n".utf8)
                    } else {
                        out.append(contentsOf: row)
                        out.append(0x0a)
                    }
                }
                try await writer.write(ByteBuffer(bytes: out))
            }
            func poll() async throws -> Bool {
                var current = opts
                if let limit = opts.limit { current.limit = limit - sent }
                let scanOptions = current, from = since
                let (rows, last, _) = try await blocking { try scan(c, db, scanOptions, since: from) }
                since = max(since, last)
                try await emit(rows)
                sent += rows.count
                if !rows.isEmpty { lastActivity = DispatchTime.now().uptimeNanoseconds }
                if let limit = opts.limit, sent >= limit { return false }
                return true
            }
            var keepGoing = try await poll()
            if keepGoing {
                for await event in events {
                    if event == .commit {
                        keepGoing = try await poll()
                        if !keepGoing { break }
                    }
                    let now = DispatchTime.now().uptimeNanoseconds
                    if let idleTimeout, now - lastActivity >= idleTimeout { break }
                    if let hb = opts.heartbeat, now - lastBeat >= UInt64(hb) * 1_000_000 {
                        try await writer.write(ByteBuffer(string: eventSource ? "event: heartbeat\ndata: \n\n" : "\n"))
                        lastBeat = now
                    }
                }
            }
            if !eventSource {
                var end = Array("{\"last_seq\":".utf8)
                opts.sequences.append(since, to: &end)
                end.append(contentsOf: ",\"pending\":0}\n".utf8)
                try await writer.write(ByteBuffer(bytes: end))
            }
            try await writer.finish(nil)
        }
        let contentType = eventSource ? "text/event-stream" : "application/json"
        return Response(status: .ok, headers: [.contentType: contentType, .cacheControl: "must-revalidate"], body: body)
    }
}
