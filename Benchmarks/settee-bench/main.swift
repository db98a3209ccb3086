// settee-bench: workloads measured against a baseline in the same run.
//
//   swift run -c release settee-bench [--json] [--count N] [--http1-channel settee|hummingbird] [workload …]
//   swift run -c release settee-bench scale [--counts 100000,1000000] [--out DIR] [workload …]   (ScaleMode.swift)
//
// Workloads: insert, update, get, changes, json (storage core); http-bulk, http-get, http-changes, find (server);
// replicate, replicate-incremental (replicator); replicate-blip, replicate-blip-rss (Couchbase Lite's protocol against
// CouchDB's, and the pulling process's memory at 1× and 10× the documents); query-indexed, index-build, index-catchup, query-parse, fts-build,
// fts-query, array-query, vector (queries and indexes); view-build, view-query, view-reduce, view-build-js (map/reduce views); many-dbs (1,000 databases
// and --peer); deep (10,000 revisions and 1,000 conflicts of one document); md5 (the revision-id digest against
// swift-crypto's); cbl (Couchbase Lite C's cbl-bench and Settee's port of it, side by side); sync-channels (a sync
// function's cost on _bulk_docs, and a user's _changes over 1,000 users × 10 channels). Each prints its rate, the baseline's rate
// and the ratio; `--json` prints one JSON object with every figure.
import Crypto
import Foundation
import SetteeCore
import SetteeStore

var args = Array(CommandLine.arguments.dropFirst())
if args.first == "scale" { runScaleMode(Array(args.dropFirst())) }
let jsonOutput = args.contains("--json")
args.removeAll { $0 == "--json" }
var count = 100_000
if let i = args.firstIndex(of: "--count"), i + 1 < args.count, let n = Int(args[i + 1]) {
    count = n
    args.removeSubrange(i...(i + 1))
}
let allWorkloads = ["insert", "update", "get", "changes", "json", "http-bulk", "http-get", "http-changes", "replicate",
                    "replicate-incremental", "query-indexed", "index-build", "index-catchup", "query-parse",
                    "fts-build", "fts-query", "array-query", "vector", "view-build", "view-query", "view-reduce", "view-build-js",
                    "validate-bulk", "find", "starvation", "many-dbs", "deep", "md5", "cbl", "replicate-blip", "replicate-blip-rss",
                    "sync-channels"]
/// Each timed workload (and its baseline) runs this many times; the best run counts, which filters out
/// interference from other processes on a small machine. `--rounds N` or SETTEE_BENCH_ROUNDS.
var rounds = Int(ProcessInfo.processInfo.environment["SETTEE_BENCH_ROUNDS"] ?? "") ?? 3
if let i = args.firstIndex(of: "--rounds"), i + 1 < args.count, let n = Int(args[i + 1]) {
    rounds = max(1, n)
    args.removeSubrange(i...(i + 1))
}
/// `--http1-channel settee|hummingbird`: what serves the HTTP workloads' plain HTTP/1.1 (`settee serve`'s option of
/// that name), so that the two can be measured side by side; nil leaves the server's default.
var http1Channel: String?
if let i = args.firstIndex(of: "--http1-channel"), i + 1 < args.count {
    guard ["settee", "hummingbird"].contains(args[i + 1]) else {
        FileHandle.standardError.write(Data("--http1-channel must be settee or hummingbird\n".utf8))
        exit(2)
    }
    http1Channel = args[i + 1]
    args.removeSubrange(i...(i + 1))
}

let selected = args.isEmpty ? allWorkloads : args
for w in selected where !allWorkloads.contains(w) {
    FileHandle.standardError.write(Data("unknown workload \(w); known: \(allWorkloads.joined(separator: ", "))\n".utf8))
    exit(2)
}

/// One measured figure.
struct Figure {
    let workload: String
    let metric: String
    let value: Double
    let baseline: Double?
    let baselineName: String?
    let goal: Double?
    /// How the value reads: a rate (`/s`) unless told otherwise.
    var unit = "/s"
    /// A size rather than a rate: the ratio is then baseline ÷ value, so that above 1 is still better.
    var lowerIsBetter = false
    var ratio: Double? { baseline.map { lowerIsBetter ? $0 / value : value / $0 } }
    var meetsGoal: Bool? {
        guard let goal else { return nil }
        return (ratio ?? value) >= goal
    }
}
var figures: [Figure] = []

@MainActor func report(_ f: Figure) {
    figures.append(f)
    guard !jsonOutput else { return }
    // Small values (query rates, sizes in MB) keep a decimal.
    func show(_ v: Double) -> String { abs(v) >= 1000 || !v.isFinite ? "\(Int(exactly: v.rounded()) ?? 0)" : String(format: "%.1f", v) }
    var line = "\(f.workload.padding(toLength: 8, withPad: " ", startingAt: 0)) \(f.metric): \(show(f.value)) \(f.unit)"
    if let b = f.baseline, let name = f.baselineName, let r = f.ratio {
        line += "   baseline \(name): \(show(b)) \(f.unit)   ratio \(String(format: "%.2f", r))"
    }
    if let goal = f.goal, let ok = f.meetsGoal {
        line += "   goal ≥ \(goal)\(f.baseline == nil ? " " + f.unit : "×") \(ok ? "✓" : "✗")"
    }
    print(line)
}

func measure(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

// Settee's process-wide SQLite settings, before any raw-SQLite baseline opens a database (they apply only
// before SQLite initializes), so baselines and Settee run under the same settings.
Connection.configureLibrary()

let workDir = NSTemporaryDirectory() + "settee-bench-\(getpid())"
try? FileManager.default.removeItem(atPath: workDir)
try FileManager.default.createDirectory(atPath: workDir, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: workDir) }

// cbl: Couchbase Lite side by side (CBLWorkload.swift). It runs first, before this process builds the other
// workloads' documents, so that its peak RSS is the workload's own.
if selected.contains(where: cblWorkloads.contains) {
    runCBLWorkload(count: count, rounds: rounds, workDir: workDir, jsonOutput: jsonOutput)
}
let onlyCBL = selected.allSatisfy(cblWorkloads.contains)

// ~300-byte documents with a mix of types.
let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]
func makeDoc(_ i: Int) -> JSONObject {
    var o = JSONObject()
    o["type"] = "user"
    o["name"] = .string("\(words[i % 12].capitalized) \(words[(i / 12) % 12].capitalized)")
    o["email"] = .string("user\(i)@example.com")
    o["age"] = .int(Int64(18 + i % 60))
    o["score"] = .double(Double(i % 1000) / 7.0)
    o["active"] = .bool(i % 3 != 0)
    o["tags"] = .array([.string(words[i % 12]), .string(words[(i + 5) % 12])])
    o["address"] = .object(["city": .string(words[(i + 3) % 12].capitalized + "ville"), "zip": .string(String(10000 + i % 89999))])
    o["bio"] = .string("Member since \(2000 + i % 25). " + String(repeating: words[(i + 7) % 12] + " ", count: 10))
    return o
}
let ids = (0..<(onlyCBL ? 0 : count)).map { String(format: "doc%07d", $0) }
let docs = (0..<(onlyCBL ? 0 : count)).map(makeDoc)
let docBytes = docs.map { JSON.object($0).serializedBytes }
let avgSize = docBytes.reduce(0) { $0 + $1.count } / max(1, count)
if !jsonOutput && !onlyCBL { print("documents: \(count) × ~\(avgSize) bytes") }

let batch = 1000
let needsStore = selected.contains { ["insert", "update", "get", "changes"].contains($0) }
/// The shortest of `rounds` timings of `body` (fresh state is the body's job).
@MainActor func best(_ body: (Int) throws -> Double) rethrows -> Double {
    var shortest = Double.infinity
    for round in 0..<rounds { shortest = min(shortest, try body(round)) }
    return shortest
}

// Baseline: raw SQLite in the same process, same pragmas (WAL, synchronous=NORMAL). Its rounds are
// interleaved with Settee's below, so both see the same conditions on a shared machine.
var rawInsertRate = 0.0
var rawGetRate = 0.0
var raw: RawSQLite?

/// One round of the raw baseline insert into a fresh file; returns seconds.
@MainActor func rawInsertRound(_ round: Int) throws -> Double {
    raw?.close()
    let r = try RawSQLite(path: workDir + "/raw-\(round).sqlite")
    raw = r
    return try measure {
        for start in stride(from: 0, to: count, by: batch) {
            try r.insertBatch(ids: ids[start..<min(count, start + batch)], bodies: docBytes[start..<min(count, start + batch)])
        }
    }
}

var database: Database?
var collection: SetteeStore.Collection?

// The Swift-side work of an insert without SQLite (diagnostic figure: where insert time goes).
if selected.contains("insert") && !jsonOutput {
    var body: [UInt8] = [], treeBytes: [UInt8] = []
    let t = measure {
        var total = 0
        for d in docs {
            body.removeAll(keepingCapacity: true)
            treeBytes.removeAll(keepingCapacity: true)
            let rev = RevID.next(after: nil, deleted: false, body: d, serializingInto: &body)
            RevTree(singleRoot: rev, deleted: false).encode(into: &treeBytes)
            total &+= body.count &+ treeBytes.count
        }
        precondition(total > 0)
    }
    print("insert   (diagnostic) serialization + revision id + tree encoding alone: \(Int(Double(count) / t)) /s")
    if ProcessInfo.processInfo.environment["SETTEE_BENCH_DETAIL"] != nil {
        var buf: [UInt8] = []
        let ts = measure { for d in docs { buf.removeAll(keepingCapacity: true); JSON.object(d).serialize(into: &buf) } }
        let tr = measure { for d in docs { _ = RevID.next(after: nil, deleted: false, body: d) } }
        let tf = measure {
            for d in docs {
                buf.removeAll(keepingCapacity: true)
                _ = RevID.next(after: nil, deleted: false, body: d, serializingInto: &buf)
            }
        }
        func ns(_ t: Double) -> Int { Int(t / Double(count) * 1e9) }
        print("  serialize \(ns(ts)) ns, RevID.next (CouchDB's term + MD5) \(ns(tr)) ns, both in one pass \(ns(tf)) ns")
    }
}

// insert (each round into a fresh database, alternating with the raw baseline; the last database is kept
// for the other workloads)
if needsStore {
    var rawBest = Double.infinity
    let t = try best { round in
        rawBest = min(rawBest, try rawInsertRound(round))
        database?.close()
        database = try Database(name: "bench-\(round)", config: DatabaseConfiguration(directory: workDir))
        let c = try database!.defaultCollection()
        collection = c
        return try measure {
            for start in stride(from: 0, to: count, by: batch) {
                let writes = (start..<min(count, start + batch)).map {
                    RevisionWrite(id: ids[$0], body: docs[$0], mode: .edit(parent: nil))
                }
                for r in try c.write(writes) { _ = try r.get() }
            }
        }
    }
    rawInsertRate = Double(count) / rawBest
    if selected.contains("insert") {
        report(Figure(workload: "insert", metric: "docs", value: Double(count) / t, baseline: rawInsertRate,
                      baselineName: "raw SQLite insert", goal: 0.5))
    }
}

// update
if selected.contains("update"), let c = collection {
    // The edited bodies are prepared up front, as the insert workload's documents are.
    let t = try best { round in
        let revs = try c.changes(.init()).reduce(into: [String: RevID]()) { $0[$1.id] = $1.rev }
        let edited = (0..<count).map { i -> JSONObject in
            var body = docs[i]
            body["age"] = .int(Int64(99 + (i + round) % 7))
            body["round"] = .int(Int64(round))
            return body
        }
        return try measure {
            for start in stride(from: 0, to: count, by: batch) {
                let writes = (start..<min(count, start + batch)).map { i in
                    RevisionWrite(id: ids[i], body: edited[i], mode: .edit(parent: revs[ids[i]]))
                }
                for r in try c.write(writes) { _ = try r.get() }
            }
        }
    }
    report(Figure(workload: "update", metric: "docs", value: Double(count) / t, baseline: rawInsertRate,
                  baselineName: "raw SQLite insert", goal: 0.35))
}

// get
if selected.contains("get"), let c = collection {
    var rng = SeededGenerator(seed: 42)
    let lookups = min(count, 100_000)
    let order = (0..<lookups).map { _ in ids[Int(rng.next() % UInt64(count))] }
    var found = 0
    var rawBest = Double.infinity
    let t = try best { _ in
        if let raw { rawBest = min(rawBest, try measure { for id in order { _ = try raw.get(id) } }) }
        found = 0
        return try measure {
            for id in order where try c.document(id: id) != nil { found += 1 }
        }
    }
    precondition(found == lookups)
    rawGetRate = Double(lookups) / rawBest
    report(Figure(workload: "get", metric: "document(id:)", value: Double(lookups) / t, baseline: rawGetRate,
                  baselineName: "raw SQLite point lookup", goal: 0.5))
}

// changes
if selected.contains("changes"), let c = collection {
    var rows = 0
    let t = try best { _ in
        rows = 0
        return try measure {
            try c.forEachChange(.init()) { _ in rows += 1; return true }
        }
    }
    precondition(rows == count)
    report(Figure(workload: "changes", metric: "rows", value: Double(rows) / t, baseline: nil, baselineName: nil,
                  goal: 500_000))
}
database?.close()
raw?.close()

// md5: the revision-id digest, Settee's own MD5 (SetteeCore, dependency-free) against swift-crypto's (BoringSSL's)
if selected.contains("md5") {
    var ours: [UInt8] = [], theirs: [UInt8] = []
    let tOurs = best { _ in measure { for bytes in docBytes { ours = MD5.hash(bytes) } } }
    let tCrypto = best { _ in measure { for bytes in docBytes { theirs = Array(Insecure.MD5.hash(data: bytes)) } } }
    precondition(ours == theirs)
    report(Figure(workload: "md5", metric: "digests of \(avgSize)-byte documents", value: Double(count) / tOurs,
                  baseline: Double(count) / tCrypto, baselineName: "swift-crypto Insecure.MD5", goal: nil))
}

// json
if selected.contains("json") {
    var parsed = 0
    let tp = try best { _ in
        parsed = 0
        return try measure {
            for bytes in docBytes {
                if case .object = try JSON.parse(bytes) { parsed += 1 }
            }
        }
    }
    precondition(parsed == count)
    report(Figure(workload: "json", metric: "parse docs", value: Double(count) / tp, baseline: nil, baselineName: nil,
                  goal: 500_000))
    var total = 0
    let ts = best { _ in
        measure {
            for d in docs { total &+= JSON.object(d).serializedBytes.count }
        }
    }
    report(Figure(workload: "json", metric: "serialize docs", value: Double(count) / ts, baseline: nil,
                  baselineName: nil, goal: 400_000))
    let fp = try measure {
        for bytes in docBytes { _ = try JSONSerialization.jsonObject(with: Data(bytes)) }
    }
    report(Figure(workload: "json", metric: "Foundation parse docs (reference)", value: Double(count) / fp,
                  baseline: nil, baselineName: nil, goal: nil))
}

// http-bulk, http-get, http-changes: a `settee serve` child process over loopback (HTTPWorkloads.swift).
if selected.contains(where: httpWorkloads.contains) {
    runHTTPWorkloads(selected: selected, ids: ids, docs: docs, docBytes: docBytes, workDir: workDir, jsonOutput: jsonOutput)
}
// replicate, replicate-incremental: two `settee serve` nodes over loopback (ReplicationWorkloads.swift).
if selected.contains(where: replicationWorkloads.contains) {
    do {
        try runReplicationWorkloads(selected: selected, ids: ids, docBytes: docBytes, docs: docs, workDir: workDir,
                                    jsonOutput: jsonOutput)
    } catch {
        FileHandle.standardError.write(Data("settee-bench: replication workloads FAILED: \(error)\n".utf8))
        exit(1)
    }
}
// replicate-blip, replicate-blip-rss: Couchbase Lite's protocol against CouchDB's (BLIPReplicationWorkload.swift).
if selected.contains(where: blipReplicationWorkloads.contains) {
    do {
        try runBLIPReplicationWorkloads(selected: selected, ids: ids, docs: docs, workDir: workDir) { line in
            if jsonOutput { FileHandle.standardError.write(Data((line + "\n").utf8)) } else { print(line) }
        }
    } catch {
        FileHandle.standardError.write(Data("settee-bench: BLIP replication workloads FAILED: \(error)\n".utf8))
        exit(1)
    }
}
// sync-channels: Sync Gateway's channels and sync function on a node (SyncChannelsWorkload.swift).
if selected.contains(where: syncChannelsWorkloads.contains) {
    do {
        try runSyncChannels(ids: ids, docBytes: docBytes, workDir: workDir, rounds: rounds)
    } catch {
        FileHandle.standardError.write(Data("settee-bench: sync-channels FAILED: \(error)\n".utf8))
        exit(1)
    }
}
// many-dbs: 1,000 databases, two nodes, --peer (ManyDatabasesWorkload.swift).
if selected.contains(where: manyDatabasesWorkloads.contains) {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("settee").path
    do {
        try runManyDatabases(count: count, workDir: workDir, binary: binary) { line in
            if jsonOutput { FileHandle.standardError.write(Data((line + "\n").utf8)) } else { print(line) }
        }
    } catch {
        FileHandle.standardError.write(Data("settee-bench: many-dbs FAILED: \(error)\n".utf8))
        exit(1)
    }
}
// deep (DeepDocumentsWorkload.swift).
if selected.contains(where: deepWorkloads.contains) {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("settee").path
    try runDeepDocuments(workDir: workDir, binary: binary) { line in
        if jsonOutput { FileHandle.standardError.write(Data((line + "\n").utf8)) } else { print(line) }
    }
}
// query-indexed, index-build, index-catchup, query-parse (QueryWorkloads.swift).
if selected.contains(where: queryWorkloads.contains) {
    try runQueryWorkloads(selected: selected, ids: ids, docs: docs, workDir: workDir)
}
// fts-build, fts-query, array-query (QueryWorkloads.swift).
if selected.contains(where: textWorkloads.contains) {
    try runTextWorkloads(selected: selected, workDir: workDir)
}
// view-build, view-query, view-reduce (ViewWorkloads.swift).
if selected.contains(where: viewWorkloads.contains) {
    try runViewWorkloads(selected: selected, ids: ids, docs: docs, workDir: workDir)
}
// vector (VectorWorkloads.swift).
if selected.contains(where: vectorWorkloads.contains) {
    try runVectorWorkloads(workDir: workDir, count: count)
}
if jsonOutput {
    var out: [JSON] = []
    for f in figures {
        var o: JSONObject = ["workload": .string(f.workload), "metric": .string(f.metric), "per_second": .double(f.value.rounded())]
        if let b = f.baseline { o["baseline_per_second"] = .double(b.rounded()); o["baseline"] = .string(f.baselineName ?? "") }
        if let r = f.ratio { o["ratio"] = .double((r * 1000).rounded() / 1000) }
        if let g = f.goal { o["goal"] = .double(g) }
        if let ok = f.meetsGoal { o["meets_goal"] = .bool(ok) }
        out.append(.object(o))
    }
    print(JSON.object(["documents": .int(Int64(count)), "avg_doc_bytes": .int(Int64(avgSize)), "results": .array(out)]).jsonString)
}

