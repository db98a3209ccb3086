import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore

/// `GET /_db_updates`: databases created, updated and deleted on this node, as CouchDB's feed (`feed=normal`,
/// `longpoll`, `continuous`, `eventsource`; `since` (a sequence or `now`), `limit`, `timeout`, `heartbeat`).
/// Server admins only.
enum DatabaseUpdatesRoutes {
    static func handle(_ call: Call) async throws -> Response {
        try Auth.checkAdmin(call)
        guard call.method == .get || call.method == .head || call.method == .post else {
            throw CouchError.methodNotAllowed("GET,HEAD,POST")
        }
        let q = call.query
        let updates = call.node.databaseUpdates
        let shutdown = call.node.shutdownNotice
        let sequences = CouchSequence(node: call.node.configuration.nodeName, databaseUUID: call.node.uuid)
        let feed = q["feed"] ?? "normal"
        guard ["normal", "longpoll", "continuous", "eventsource"].contains(feed) else {
            throw CouchError.badRequest("Supported `feed` types: normal, longpoll, continuous, eventsource")
        }
        var since: UInt64 = 0
        if let text = q["since"] {
            since = text == "now" ? updates.lastSeq : try ChangesRoutes.parseSequence(text)
        }
        let limit = try q.int("limit") ?? Int.max
        let timeout = Duration.milliseconds(max(try q.int("timeout") ?? 60_000, 0))
        var beat: Duration?
        if let hb = q["heartbeat"], hb != "false" {
            beat = hb == "true" ? .seconds(60) : .milliseconds(max(Int(hb) ?? 60_000, 100))
        }
        let heartbeat = beat
        @Sendable func row(_ e: DatabaseUpdates.Event) -> [UInt8] {
            var out = Array(#"{"db_name":"#.utf8)
            JSON.appendString(e.database, to: &out)
            out.append(contentsOf: #","type":""#.utf8)
            out.append(contentsOf: e.kind.rawValue.utf8)
            out.append(contentsOf: #"","seq":"#.utf8)
            sequences.append(e.seq, to: &out)
            out.append(UInt8(ascii: "}"))
            return out
        }
        @Sendable func body(_ events: [DatabaseUpdates.Event], last: UInt64) -> [UInt8] {
            var out = Array("{\"results\":[\n".utf8)
            for (i, e) in events.enumerated() {
                if i > 0 { out.append(contentsOf: ",\n".utf8) }
                out.append(contentsOf: row(e))
            }
            out.append(contentsOf: "\n],\n\"last_seq\":".utf8)
            sequences.append(last, to: &out)
            out.append(contentsOf: "}\n".utf8)
            return out
        }
        // A `since` past the end was given out before this node restarted (the feed lives in memory). A poll is
        // answered at once with the current end, lower than `since`: a follower (a `--peer`) then knows it may have
        // missed events and looks at every database again. Continuous feeds start from the end.
        if since > updates.lastSeq {
            if feed == "normal" || feed == "longpoll" { return Reply.raw(.ok, body([], last: updates.lastSeq)) }
            since = updates.lastSeq
        }
        switch feed {
        case "normal":
            let events = updates.events(since: since, limit: limit)
            return Reply.raw(.ok, body(events, last: events.last?.seq ?? max(since, updates.lastSeq)))
        case "longpoll":
            let start = since
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "must-revalidate"],
                            body: ResponseBody { writer in
                await updates.wait(since: start, timeout: timeout) { shutdown.isRaised }
                let events = updates.events(since: start, limit: limit)
                try await writer.write(ByteBuffer(bytes: body(events, last: events.last?.seq ?? start)))
                try await writer.finish(nil)
            })
        default:
            let eventSource = feed == "eventsource"
            let start = since
            return Response(status: .ok,
                            headers: [.contentType: eventSource ? "text/event-stream" : "application/json",
                                      .cacheControl: "must-revalidate"],
                            body: ResponseBody { writer in
                var cursor = start, sent = 0
                var lastActivity = ContinuousClock.now
                while sent < limit, !Task.isCancelled {
                    let events = updates.events(since: cursor, limit: limit - sent)
                    if !events.isEmpty {
                        var out: [UInt8] = []
                        for e in events {
                            if eventSource {
                                out.append(contentsOf: "data: ".utf8)
                                out.append(contentsOf: row(e))
                                out.append(contentsOf: "\nid: ".utf8)
                                sequences.append(e.seq, quoted: false, to: &out)
                                out.append(contentsOf: "\n\n".utf8)
                            } else {
                                out.append(contentsOf: row(e))
                                out.append(0x0a)
                            }
                        }
                        try await writer.write(ByteBuffer(bytes: out))
                        cursor = events.last!.seq
                        sent += events.count
                        lastActivity = .now
                        continue
                    }
                    let wait = heartbeat ?? timeout
                    await updates.wait(since: cursor, timeout: min(wait, .seconds(1))) { shutdown.isRaised }
                    if updates.lastSeq > cursor { continue }
                    // The server is shutting down: the feed ends with its last line instead of holding it up.
                    if shutdown.isRaised { break }
                    let idle = ContinuousClock.now - lastActivity
                    if let heartbeat {
                        if idle >= heartbeat {
                            try await writer.write(ByteBuffer(string: eventSource ? "event: heartbeat\ndata: \n\n" : "\n"))
                            lastActivity = .now
                        }
                    } else if idle >= timeout {
                        break
                    }
                }
                if !eventSource {
                    var end = Array("{\"last_seq\":".utf8)
                    sequences.append(cursor, to: &end)
                    end.append(contentsOf: "}\n".utf8)
                    try await writer.write(ByteBuffer(bytes: end))
                }
                try await writer.finish(nil)
            })
        }
    }
}
