import Foundation
import SetteeCore
import Synchronization

/// Set once to stop a write load.
final class StopFlag: Sendable {
    private let state = Mutex(false)
    var isSet: Bool { state.withLock { $0 } }
    func set() { state.withLock { $0 = true } }
}

/// Scenarios with every kind of write, and with nodes killed or restarted while clients write.
extension Scenarios {
    /// Deletions, a `_security` object, an attachment and a design document written on different nodes reach every
    /// node, and the design document's JavaScript view answers the same rows everywhere (each node runs its own
    /// query server).
    @Sendable static func everyKindOfWrite(_ c: any Cluster) async throws -> String {
        let db = "mn-kinds"
        try await createEverywhere(c, db)
        try await bulk(c, 0, db, ids: (0..<50).map { "kind-\($0)" })
        guard try await sameEverywhere(c, db, seconds: 90) else { throw ScenarioFailure("the first 50 docs never reached every node") }
        // Deletions on the second node, an attachment on the last, the design document on the first.
        let writer = min(1, c.count - 1), last = c.count - 1
        let current = try await revs(c, writer, db)
        let deletions = (0..<10).map { #"{"_id":"kind-\#($0)","_rev":"\#(current["kind-\($0)"] ?? "")","_deleted":true}"# }
        let deleted = try await ClusterHTTP.send(.POST, c.url(writer) + "/\(db)/_bulk_docs", #"{"docs":[\#(deletions.joined(separator: ","))]}"#)
        guard deleted.status == 201, deleted.json?.arrayValue?.allSatisfy({ $0["ok"] == true }) == true else {
            throw ScenarioFailure("node\(writer) deletions: \(deleted.status) \(deleted.json?.jsonString.prefix(200) ?? "")")
        }
        let attachment = try await ClusterHTTP.send(.PUT, c.url(last) + "/\(db)/with-attachment",
            #"{"kind":"attachment","_attachments":{"note.txt":{"content_type":"text/plain","data":"aGVsbG8gZnJvbSB0aGUgbGFzdCBub2Rl"}}}"#)
        guard attachment.status == 201 else { throw ScenarioFailure("node\(last) attachment: \(attachment.status)") }
        let design = try await ClusterHTTP.send(.PUT, c.url(0) + "/\(db)/_design/kinds",
            #"{"views":{"by_n":{"map":"function (doc) { if (doc.n) { emit(doc._id, doc.n); } }","reduce":"_sum"}}}"#)
        guard design.status == 201 else { throw ScenarioFailure("node0 design document: \(design.status)") }
        // A `_security` object set on the second node (members by name and role; admins keep their access).
        let security = #"{"admins":{"names":[],"roles":["_admin"]},"members":{"names":["kinds-reader"],"roles":["_admin","kinds"]}}"#
        let secured = try await ClusterHTTP.send(.PUT, c.url(writer) + "/\(db)/_security", security)
        guard secured.status == 200 else { throw ScenarioFailure("node\(writer) _security: \(secured.status)") }
        let securityBytes = try JSON.parse(security).canonicalBytes
        let started = Date()
        var detail = ""
        let converged = await ClusterHTTP.waitFor(seconds: 90) {
            let reference = try await revs(c, 0, db)
            guard reference.count == 42 else { detail = "node0 has \(reference.count) live docs"; return false }
            var digests: Set<String> = []
            for i in 0..<c.count {
                guard try await revs(c, i, db) == reference else { detail = "node\(i) differs"; return false }
                let info = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)")
                guard info.json?["doc_del_count"]?.intValue == 10 else { detail = "node\(i): \(info.json?["doc_del_count"]?.intValue ?? -1) deleted"; return false }
                let doc = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)/with-attachment")
                guard let att = doc.json?["_attachments"]?["note.txt"], att["length"]?.intValue == 24,
                      let digest = att["digest"]?.stringValue else { detail = "node\(i): no attachment"; return false }
                digests.insert(digest)
                let view = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)/_design/kinds/_view/by_n?reduce=false")
                guard view.status == 200, view.json?["rows"]?.arrayValue?.count == 40 else {
                    detail = "node\(i) view: \(view.status) \(view.json?.jsonString.prefix(200) ?? "")"
                    return false
                }
                let sum = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)/_design/kinds/_view/by_n")
                guard sum.json?["rows"]?[0]?["value"]?.intValue == 40 else { detail = "node\(i) reduce: \(sum.json?.jsonString ?? "")"; return false }
                let sec = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)/_security")
                guard sec.json?.canonicalBytes == securityBytes else { detail = "node\(i) _security: \(sec.json?.jsonString ?? "")"; return false }
            }
            guard digests.count == 1 else { detail = "attachment digests differ: \(digests)"; return false }
            return true
        }
        guard converged else { throw ScenarioFailure("no convergence within 90 s: \(detail)") }
        return "10 deletions and a _security object on node\(writer), an attachment on node\(last), a design document on node0: every node has the same 42 live docs (the design document among them) and 10 deletions, the same attachment digest and _security object, and the JavaScript view answers 40 rows (sum 40) on each (\(elapsed(started)))"
    }

    /// Writes `batch`-document `_bulk_docs` to `node` until `stop` is set or a write fails; returns the ids the node
    /// acknowledged (201 with `ok` for the row).
    static func writeLoad(_ c: any Cluster, node: @escaping @Sendable () -> Int, db: String, prefix: String,
                          stop: StopFlag, batch: Int = 25) async -> [String] {
        var acknowledged: [String] = []
        var n = 0
        while !stop.isSet {
            let ids = (n..<(n + batch)).map { "\(prefix)-\($0)" }
            n += batch
            let docs = ids.map { #"{"_id":"\#($0)","n":1}"# }.joined(separator: ",")
            guard let r = try? await ClusterHTTP.send(.POST, c.url(node()) + "/\(db)/_bulk_docs", #"{"docs":[\#(docs)]}"#,
                                                     timeout: .seconds(10)), r.status == 201,
                  let rows = r.json?.arrayValue else {
                try? await Task.sleep(for: .milliseconds(100))
                continue
            }
            for (id, row) in zip(ids, rows) where row["ok"] == true { acknowledged.append(id) }
        }
        return acknowledged
    }

    static func holdsAll(_ c: any Cluster, _ i: Int, _ db: String, _ ids: [String]) async throws -> Bool {
        let present = try await revs(c, i, db)
        return ids.allSatisfy { present[$0] != nil }
    }

    /// A client writes to one node while it is SIGKILLed: every write it acknowledged is there after the restart,
    /// and reaches every node.
    @Sendable static func killDuringLoad(_ c: any Cluster) async throws -> String {
        let db = "mn-killload"
        let victim = c.count - 1
        try await createEverywhere(c, db)
        let stop = StopFlag()
        let load = Task { await writeLoad(c, node: { victim }, db: db, prefix: "load", stop: stop) }
        try await Task.sleep(for: .seconds(2))
        try await c.kill(victim)
        try await Task.sleep(for: .milliseconds(500))
        stop.set()
        let acknowledged = await load.value
        guard acknowledged.count > 0 else { throw ScenarioFailure("node\(victim) acknowledged no write before the kill") }
        try await c.restart(victim)
        let started = Date()
        guard try await holdsAll(c, victim, db, acknowledged) else {
            let present = try await revs(c, victim, db)
            let lost = acknowledged.filter { present[$0] == nil }
            throw ScenarioFailure("node\(victim) lost \(lost.count) of \(acknowledged.count) acknowledged writes, e.g. \(lost.prefix(5))")
        }
        guard await ClusterHTTP.waitFor(seconds: 120, {
            for i in 0..<c.count where try await !holdsAll(c, i, db, acknowledged) { return false }
            return true
        }) else { throw ScenarioFailure("the acknowledged writes never reached every node") }
        return "SIGKILLed node\(victim) while a client wrote to it: all \(acknowledged.count) writes it acknowledged were there after the restart and on every node \(elapsed(started)) later"
    }

    /// Each node in turn is restarted gracefully while a client writes to the next one: nothing acknowledged is lost
    /// and every node ends with every document.
    @Sendable static func rollingRestart(_ c: any Cluster) async throws -> String {
        let db = "mn-rolling"
        try await createEverywhere(c, db)
        var acknowledged: [String] = []
        let started = Date()
        for i in 0..<c.count {
            let stop = StopFlag()
            let target = (i + 1) % c.count
            let load = Task { await writeLoad(c, node: { target }, db: db, prefix: "roll\(i)", stop: stop) }
            try await Task.sleep(for: .milliseconds(500))
            try await c.restartGracefully(i)
            try await Task.sleep(for: .milliseconds(500))
            stop.set()
            acknowledged += await load.value
        }
        let all = acknowledged
        guard await ClusterHTTP.waitFor(seconds: 120, {
            for i in 0..<c.count where try await !holdsAll(c, i, db, all) { return false }
            return true
        }) else {
            throw ScenarioFailure("after 120 s the nodes hold \(try await (0..<c.count).asyncMap { try await docCount(c, $0, db) }) of \(all.count) docs")
        }
        return "restarted all \(c.count) nodes one after another (SIGTERM, then start) while a client wrote to the next: every node has all \(all.count) acknowledged docs (\(elapsed(started)))"
    }
}
