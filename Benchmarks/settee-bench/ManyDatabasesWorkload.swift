// many-dbs: a thousand databases on one node, replicated to a second node by `--peer` (issue: scale).
//
//   Node A holds `count` documents spread over 1,000 databases. Node B starts with `--peer A` and pulls them all:
//   the time until B has every document ("initial"), then, after one more document is written into each of A's
//   databases, the time until B has those too ("writes spread over all"). The baseline is the same documents in
//   one database, replicated the same way. Also B's peak RSS, open files and threads while it converges: a node
//   with a thousand databases must not hold a connection, a task or a file per database.
import Foundation
import SetteeCore

let manyDatabasesWorkloads = ["many-dbs"]
/// Databases in the `many-dbs` workload.
let manyDatabases = 1_000

@MainActor func runManyDatabases(count: Int, workDir: String, binary: String, info: (String) -> Void) throws {
    let perDatabase = max(1, count / manyDatabases)
    let total = perDatabase * manyDatabases
    func check(_ r: HTTPResponse, _ ok: Set<Int>, _ what: String) throws {
        guard ok.contains(r.status) else {
            throw HTTPBenchFailure(message: "\(what) → \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))")
        }
    }
    func docs(_ prefix: String, _ range: Range<Int>) -> [UInt8] {
        let items = range.map { #"{"_id":"\#(prefix)\#(String(format: "%07d", $0))","n":\#($0),"text":"a document of a per-user database"}"# }
        return Array(#"{"docs":[\#(items.joined(separator: ","))]}"#.utf8)
    }

    /// One run: node A loaded with `databases` databases holding `total` documents, node B pulling them.
    func run(databases: Int) throws -> (initial: Double, spread: Double, peak: MemorySampler.Peaks) {
        let dirA = workDir + "/many-a", dirB = workDir + "/many-b"
        for d in [dirA, dirB] {
            try? FileManager.default.removeItem(atPath: d)
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        }
        let a = try SetteeServerProcess(binary: binary, dataDirectory: dirA, logPath: workDir + "/many-a.log")
        defer { a.stop() }
        let connA = try HTTPConnection(port: a.port)
        defer { connA.disconnect() }
        let names = (0..<databases).map { String(format: "user-%04d", $0) }
        let each = total / databases
        for name in names {
            try check(try connA.request(method: "PUT", path: "/" + name), [201], "PUT /\(name)")
            for start in stride(from: 0, to: each, by: 1000) {
                try check(try connA.request(method: "POST", path: "/\(name)/_bulk_docs", body: docs("d", start..<min(each, start + 1000))),
                          [201], "load \(name)")
            }
        }
        let b = try SetteeServerProcess(binary: binary, dataDirectory: dirB, logPath: workDir + "/many-b.log",
                                        extraArguments: ["--peer", "http://127.0.0.1:\(a.port)", "--peer-scan-interval", "1"])
        defer { b.stop() }
        let connB = try HTTPConnection(port: b.port)
        defer { connB.disconnect() }
        let sampler = MemorySampler(pid: b.process.processIdentifier)
        /// Waits until every database on B holds `expected` documents: the last one first (cheap), then all.
        func waitUntilB(has expected: Int) throws {
            let deadline = Date().addingTimeInterval(600)
            while Date() < deadline {
                let last = try connB.request(method: "GET", path: "/" + names.last!)
                if last.status == 200, (try? JSON.parse(last.body))?["doc_count"]?.intValue == Int64(expected) {
                    let all = try connB.request(method: "GET", path: "/_dbs_info")
                    let rows = (try? JSON.parse(all.body))?.arrayValue ?? []
                    let done = rows.filter { $0["info"]?["doc_count"]?.intValue == Int64(expected) }.count
                    if done == databases { return }
                }
                usleep(50_000)
            }
            throw HTTPBenchFailure(message: "many-dbs: node B did not converge within 600 s")
        }
        let initial = try measure { try waitUntilB(has: each) }
        // One more document in every database of A: writes spread over all of them.
        let spread = try measure {
            for name in names {
                try check(try connA.request(method: "PUT", path: "/\(name)/later", body: Array(#"{"later":true}"#.utf8)),
                          [201], "PUT \(name)/later")
            }
            try waitUntilB(has: each + 1)
        }
        var peak = sampler.stop()
        peak.rssKiB = vmHWM(b.process.processIdentifier)
        return (initial, spread, peak)
    }

    info("many-dbs: \(total) documents in \(manyDatabases) databases (\(perDatabase) each) vs in one database; node B pulls from A by --peer")
    var many = (initial: Double.infinity, spread: Double.infinity, peak: MemorySampler.Peaks())
    var one = (initial: Double.infinity, spread: Double.infinity)
    for _ in 0..<rounds {
        let m = try run(databases: manyDatabases)
        many.initial = min(many.initial, m.initial)
        many.spread = min(many.spread, m.spread)
        many.peak.merge(m.peak)
        let o = try run(databases: 1)
        one.initial = min(one.initial, o.initial)
        one.spread = min(one.spread, o.spread)
    }
    // Rates (documents per second): the ratio is how much of one database's speed a thousand databases keep.
    report(Figure(workload: "many-dbs", metric: "initial sync docs (\(manyDatabases) databases)", value: Double(total) / many.initial,
                  baseline: Double(total) / one.initial, baselineName: "the same documents in 1 database", goal: nil))
    report(Figure(workload: "many-dbs", metric: "writes spread over all databases, docs until on the peer",
                  value: Double(manyDatabases) / many.spread, baseline: Double(manyDatabases) / one.spread,
                  baselineName: "as many writes into 1 database", goal: nil))
    report(Figure(workload: "many-dbs", metric: "peak RSS MB of the pulling node", value: Double(many.peak.rssKiB) / 1024,
                  baseline: nil, baselineName: nil, goal: nil, unit: "MB"))
    report(Figure(workload: "many-dbs", metric: "peak open files of the pulling node", value: Double(many.peak.files),
                  baseline: nil, baselineName: nil, goal: nil, unit: "files"))
    report(Figure(workload: "many-dbs", metric: "peak threads of the pulling node", value: Double(many.peak.threads),
                  baseline: nil, baselineName: nil, goal: nil, unit: "threads"))
    info(String(format: "many-dbs: initial %.2f s (1 database: %.2f s); %d writes spread over all: %.2f s (1 database: %.2f s); "
                + "pulling node peak RSS %d MB, %d open files, %d threads",
                many.initial, one.initial, manyDatabases, many.spread, one.spread, many.peak.rssKiB / 1024,
                many.peak.files, many.peak.threads))
}
