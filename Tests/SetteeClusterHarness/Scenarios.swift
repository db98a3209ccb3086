import Foundation
import SetteeCore

/// A scenario that did not hold.
public struct ScenarioFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The multi-node scenarios. Each is bounded in time (it fails rather than waits forever), ends by itself, and
/// returns what it checked. They run against any ``Cluster``: local processes or the compose cluster.
public enum Scenarios {
    public typealias Scenario = (name: String, run: @Sendable (any Cluster) async throws -> String)

    /// All scenarios, in the order they are meant to run (later ones use databases made by earlier ones).
    public static let all: [Scenario] = [
        ("write on one node, read on the others", writeOnOneReadEverywhere),
        ("deletions, attachments, _security and design documents converge; views answer on every node", everyKindOfWrite),
        ("conflicting edits during a partition converge", conflictsDuringPartition),
        ("a SIGKILLed node catches up from its checkpoints", killedNodeCatchesUp),
        ("acknowledged writes survive a SIGKILL in the middle of a write load", killDuringLoad),
        ("a rolling restart under load loses nothing", rollingRestart),
        ("a wiped node rejoins and gets everything back", wipedNodeRejoins),
        ("10,000 documents written during churn reach every node", churn),
    ]

    /// Runs every scenario, printing what each checked; returns the failures.
    public static func runAll(_ cluster: any Cluster, only: Set<String>? = nil,
                              print report: @Sendable (String) -> Void = { Swift.print($0) }) async -> [String] {
        report("cluster: \(cluster.summary)")
        var failures: [String] = []
        for (name, run) in all where only == nil || only!.contains(name) {
            let started = Date()
            do {
                let checked = try await run(cluster)
                report(String(format: "PASS  %@ (%.1f s)\n      %@", name, Date().timeIntervalSince(started), checked))
            } catch {
                report(String(format: "FAIL  %@ (%.1f s)\n      %@", name, Date().timeIntervalSince(started), "\(error)"))
                failures.append("\(name): \(error)")
            }
        }
        return failures
    }

    // MARK: Helpers

    static func revs(_ c: any Cluster, _ i: Int, _ db: String) async throws -> [String: String] {
        let r = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)/_all_docs")
        guard r.status == 200, let rows = r.json?["rows"]?.arrayValue else { throw ScenarioFailure("node\(i) /\(db)/_all_docs: \(r.status)") }
        var out: [String: String] = [:]
        for row in rows {
            if let id = row["id"]?.stringValue, let rev = row["value"]?["rev"]?.stringValue { out[id] = rev }
        }
        return out
    }

    static func docCount(_ c: any Cluster, _ i: Int, _ db: String) async throws -> Int {
        let r = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)")
        guard r.status == 200, let n = r.json?["doc_count"]?.intValue else { throw ScenarioFailure("node\(i) /\(db): \(r.status)") }
        return Int(n)
    }

    static func bulk(_ c: any Cluster, _ i: Int, _ db: String, ids: some Sequence<String>, extra: String = "") async throws {
        let docs = ids.map { #"{"_id":"\#($0)","n":1\#(extra)}"# }.joined(separator: ",")
        let r = try await ClusterHTTP.send(.POST, c.url(i) + "/\(db)/_bulk_docs", #"{"docs":[\#(docs)]}"#)
        guard r.status == 201 else { throw ScenarioFailure("node\(i) _bulk_docs: \(r.status) \(r.json?.jsonString ?? "")") }
        if let rows = r.json?.arrayValue, let bad = rows.first(where: { $0["error"] != nil }) {
            throw ScenarioFailure("node\(i) _bulk_docs row failed: \(bad.jsonString)")
        }
    }

    /// Creates `db` on node 0 and waits until the peers have created it too.
    static func createEverywhere(_ c: any Cluster, _ db: String) async throws {
        let r = try await ClusterHTTP.send(.PUT, c.url(0) + "/\(db)")
        guard r.status == 201 || r.status == 412 else { throw ScenarioFailure("PUT /\(db): \(r.status)") }
        for i in 1..<c.count {
            guard await ClusterHTTP.waitFor(seconds: 60, { try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)").status == 200 }) else {
                throw ScenarioFailure("node\(i) never created \(db) from its peers")
            }
        }
    }

    static func sameEverywhere(_ c: any Cluster, _ db: String, seconds: Double) async throws -> Bool {
        await ClusterHTTP.waitFor(seconds: seconds) {
            let reference = try await revs(c, 0, db)
            for i in 1..<c.count where try await revs(c, i, db) != reference { return false }
            return true
        }
    }

    static func elapsed(_ since: Date) -> String { String(format: "%.1f s", Date().timeIntervalSince(since)) }

    // MARK: Scenarios

    @Sendable static func writeOnOneReadEverywhere(_ c: any Cluster) async throws -> String {
        let db = "mn-basic"
        try await createEverywhere(c, db)
        try await bulk(c, 0, db, ids: (0..<100).map { "basic-\($0)" })
        let started = Date()
        guard try await sameEverywhere(c, db, seconds: 90) else {
            throw ScenarioFailure("after 90 s the nodes still differ: counts \(try await (0..<c.count).asyncMap { try await docCount(c, $0, db) })")
        }
        return "wrote 100 docs on node0; every other node has all 100 at the same revisions (\(elapsed(started)))"
    }

    @Sendable static func conflictsDuringPartition(_ c: any Cluster) async throws -> String {
        let db = "mn-conflicts"
        let ids = (0..<20).map { "doc-\($0)" }
        try await createEverywhere(c, db)
        try await bulk(c, 0, db, ids: ids)
        guard try await sameEverywhere(c, db, seconds: 90) else { throw ScenarioFailure("base documents never reached every node") }
        try await c.partitionAll()
        do {
            try await editDuringPartition(c, db, ids)
        } catch {
            try? await c.heal()
            throw error
        }
        let healStart = Date()
        try await c.heal()
        var detail = ""
        let converged = await ClusterHTTP.waitFor(seconds: 150) {
            for id in ids {
                var seen: Set<String> = []
                for i in 0..<c.count {
                    let r = try await ClusterHTTP.send(.GET, c.url(i) + "/\(db)/\(id)?conflicts=true")
                    let conflicts = (r.json?["_conflicts"]?.arrayValue ?? []).compactMap(\.stringValue).sorted()
                    guard conflicts.count == c.count - 1 else { detail = "\(id) on node\(i): \(conflicts.count) conflicts"; return false }
                    seen.insert((r.json?["_rev"]?.stringValue ?? "") + " " + conflicts.joined(separator: ","))
                }
                guard seen.count == 1 else { detail = "\(id): nodes disagree: \(seen)"; return false }
            }
            return true
        }
        guard converged else { throw ScenarioFailure("no convergence 150 s after healing: \(detail)") }
        return "partitioned all \(c.count) nodes, made \(c.count) concurrent edits of each of \(ids.count) docs, healed: every node has the same winning revision and the same \(c.count - 1) conflicts for every doc (\(elapsed(healStart)) after healing)"
    }

    /// Every node edits every document from the same base revision: concurrent edits, one per node.
    static func editDuringPartition(_ c: any Cluster, _ db: String, _ ids: [String]) async throws {
        for i in 0..<c.count {
            let current = try await revs(c, i, db)
            let docs = ids.map { #"{"_id":"\#($0)","_rev":"\#(current[$0] ?? "")","edited_by":"node\#(i)"}"# }.joined(separator: ",")
            let r = try await ClusterHTTP.send(.POST, c.url(i) + "/\(db)/_bulk_docs", #"{"docs":[\#(docs)]}"#)
            guard r.status == 201, r.json?.arrayValue?.allSatisfy({ $0["ok"] == true }) == true else {
                throw ScenarioFailure("node\(i) edit during the partition: \(r.status) \(r.json?.jsonString.prefix(300) ?? "")")
            }
        }
        // The partition holds: after a few seconds node0 still has only its own edits.
        try await Task.sleep(for: .seconds(3))
        let probe = try await ClusterHTTP.send(.GET, c.url(0) + "/\(db)/doc-0?conflicts=true")
        guard probe.json?["_conflicts"] == nil, probe.json?["edited_by"] == "node0" else {
            throw ScenarioFailure("the partition leaked: node0 sees \(probe.json?.jsonString ?? "")")
        }
    }

    @Sendable static func killedNodeCatchesUp(_ c: any Cluster) async throws -> String {
        let db = "mn-kill"
        let last = c.count - 1
        try await createEverywhere(c, db)
        try await bulk(c, 0, db, ids: (0..<200).map { "before-\($0)" })
        guard try await sameEverywhere(c, db, seconds: 90) else { throw ScenarioFailure("the first 200 docs never reached every node") }
        try await Task.sleep(for: .seconds(3))  // let every replication record a checkpoint
        try await c.kill(last)
        try await bulk(c, 0, db, ids: (0..<300).map { "during-\($0)" })
        try await c.restart(last)
        let started = Date()
        guard await ClusterHTTP.waitFor(seconds: 120, { try await docCount(c, last, db) == 500 }) else {
            throw ScenarioFailure("node\(last) has \(try await docCount(c, last, db)) of 500 docs 120 s after its restart")
        }
        // Its replications resumed from their checkpoints: a replication into node`last` that had a session before the
        // kill ran its next session from the sequence it had recorded, not from 0 (the checkpoints' history, as
        // CouchDB keeps it in `_local` documents on both sides).
        // The catch-up may finish before its session records a checkpoint: wait for one.
        var histories: [[JSON]] = [], resumed: [[JSON]] = []
        _ = await ClusterHTTP.waitFor(seconds: 30) {
            let locals = try await ClusterHTTP.send(.GET, c.url(last) + "/\(db)/_local_docs?include_docs=true")
            histories = (locals.json?["rows"]?.arrayValue ?? []).compactMap { $0["doc"]?["history"]?.arrayValue }
            resumed = histories.filter { history in
                history.count >= 2 && history[0]["start_last_seq"].map { JSON.sequenceNumber($0) > 0 } == true
            }
            return !resumed.isEmpty
        }
        guard !resumed.isEmpty else {
            throw ScenarioFailure("no checkpoint on node\(last) shows a session resumed from a recorded sequence: \(histories.map { $0.prefix(2) })")
        }
        return "SIGKILLed node\(last), wrote 300 docs on node0, restarted node\(last): it caught up to 500 docs in \(elapsed(started)); \(resumed.count) of its \(histories.count) replication checkpoints of \(db) show the session after the restart starting from the sequence recorded before it, not from 0"
    }

    @Sendable static func wipedNodeRejoins(_ c: any Cluster) async throws -> String {
        let target = c.count > 1 ? 1 : 0
        let dbs = ["mn-basic", "mn-kinds", "mn-conflicts", "mn-kill", "mn-killload", "mn-rolling"]
        var expected: [String: [String: String]] = [:]
        for db in dbs { expected[db] = try await revs(c, 0, db) }
        try await c.wipe(target)
        let started = Date()
        var missing = ""
        let back = await ClusterHTTP.waitFor(seconds: 150) {
            for db in dbs {
                guard try await revs(c, target, db) == expected[db] else { missing = db; return false }
            }
            return true
        }
        guard back else { throw ScenarioFailure("node\(target) did not get \(missing) back within 150 s of being wiped") }
        let total = expected.values.map(\.count).reduce(0, +)
        return "wiped node\(target)'s data directory and restarted it: it recreated \(dbs.count) databases and got all \(total) docs back at the same revisions (\(elapsed(started)))"
    }

    @Sendable static func churn(_ c: any Cluster) async throws -> String {
        let db = "mn-churn"
        let last = c.count - 1
        try await createEverywhere(c, db)
        var down: Int?
        var written = 0
        let started = Date()
        for batch in 0..<20 {
            if batch == 6 && c.count > 2 { try await c.kill(last); down = last }
            if batch == 13, let d = down { try await c.restart(d); down = nil }
            var node = batch % c.count
            if node == down { node = (node + 1) % c.count }
            try await bulk(c, node, db, ids: (0..<500).map { "churn-\(batch)-\($0)" })
            written += 500
        }
        guard await ClusterHTTP.waitFor(seconds: 180, {
            for i in 0..<c.count where try await docCount(c, i, db) != written { return false }
            return true
        }) else {
            throw ScenarioFailure("after 180 s the counts are \(try await (0..<c.count).asyncMap { try await docCount(c, $0, db) }) of \(written)")
        }
        let reference = Set(try await revs(c, 0, db).keys)
        for i in 1..<c.count where Set(try await revs(c, i, db).keys) != reference {
            throw ScenarioFailure("node\(i) has a different set of ids")
        }
        return "wrote \(written) docs in 20 batches spread over the nodes while node\(last) was SIGKILLed (batches 6–12) and restarted: every node has every one of them (\(elapsed(started)))"
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for e in self { out.append(try await transform(e)) }
        return out
    }
}

extension JSON {
    /// The number at the front of a CouchDB-style sequence (`42`, `"42-g1AAAA…"`); 0 for anything else.
    static func sequenceNumber(_ seq: JSON) -> Int64 {
        if let n = seq.intValue { return n }
        return seq.stringValue.flatMap { Int64($0.prefix { $0.isNumber }) } ?? 0
    }
}
