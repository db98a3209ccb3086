// Couchbase Lite's replication protocol against CouchDB's (issue: Couchbase Lite apps sync with Settee).
//
//   replicate-blip      `count` documents pushed from a local store to a `settee serve` node by a `settee replicate`
//                       process, over Couchbase Lite's protocol (ws://…/_blipsync) and over CouchDB's (http://),
//                       alternating, a fresh target database each round: docs/s over BLIP, with CouchDB's protocol in
//                       the same run as the baseline (goal ≥ 1.0×: the protocol needs fewer round trips).
//   replicate-blip-rss  the pulling process's peak RSS (VmHWM) pulling `count` and then 10 × `count` documents over
//                       BLIP from a node into an empty local database: the ratio (goal: flat, ≤ 1.25×).
import Foundation
import SetteeCore
import SetteeReplication
import SetteeStore
import Synchronization

let blipReplicationWorkloads = ["replicate-blip", "replicate-blip-rss"]

@MainActor func runBLIPReplicationWorkloads(selected: [String], ids: [String], docs: [JSONObject], workDir: String,
                                            info: (String) -> Void) throws {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("settee").path
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        throw HTTPBenchFailure(message: "no settee binary at \(binary): swift build -c release --product settee")
    }
    let root = workDir + "/blip"
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root + "/node", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let node = try SetteeServerProcess(binary: binary, dataDirectory: root + "/node", logPath: root + "/node.log")
    defer { node.stop() }
    let http = try HTTPConnection(port: node.port)
    defer { http.disconnect() }

    if selected.contains("replicate-blip") {
        try pushBothWays(binary: binary, node: node, http: http, ids: ids, docs: docs, root: root, info: info)
    }
    if selected.contains("replicate-blip-rss") {
        try pullMemory(binary: binary, node: node, http: http, ids: ids, docs: docs, root: root, info: info)
    }
}

/// A local database of `count` documents (`ids`/`docs` repeated with a suffix past their end).
private func makeLocalDatabase(_ directory: String, count: Int, ids: [String], docs: [JSONObject]) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let db = try Database(name: "src", config: DatabaseConfiguration(directory: directory))
    defer { db.close() }
    let c = try db.defaultCollection()
    for start in stride(from: 0, to: count, by: 1000) {
        let writes = (start..<min(count, start + 1000)).map { i in
            RevisionWrite(id: i < ids.count ? ids[i] : "\(ids[i % ids.count])-\(i / ids.count)", body: docs[i % docs.count],
                          mode: .edit(parent: nil))
        }
        for r in try c.write(writes) { _ = try r.get() }
    }
}

/// Runs `settee replicate` to completion; its wall time and peak RSS (KiB, sampled while it runs).
private func replicate(_ binary: String, _ arguments: [String]) throws -> (seconds: Double, peakKiB: Int) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = ["replicate", "--quiet"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let peak = Mutex(0)
    let start = DispatchTime.now().uptimeNanoseconds
    try process.run()
    let pid = process.processIdentifier
    let sampler = Thread {
        while process.isRunning {
            let kib = vmHWM(pid)
            peak.withLock { $0 = max($0, kib) }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }
    sampler.start()
    let text = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    guard process.terminationStatus == 0 else {
        throw HTTPBenchFailure(message: "settee replicate \(arguments.joined(separator: " ")) failed: "
                               + String(decoding: text.prefix(600), as: UTF8.self))
    }
    return (seconds, peak.withLock { $0 })
}

private func docCount(_ http: HTTPConnection, _ db: String) throws -> Int64 {
    let r = try http.request(method: "GET", path: "/" + db)
    return ((try? JSON.parse(r.body))?["doc_count"]?.intValue) ?? -1
}

@MainActor private func pushBothWays(binary: String, node: SetteeServerProcess, http: HTTPConnection, ids: [String],
                                     docs: [JSONObject], root: String, info: (String) -> Void) throws {
    let count = ids.count
    try makeLocalDatabase(root + "/local", count: count, ids: ids, docs: docs)
    info("replicate-blip: local source holds \(count) documents")
    var best: [String: Double] = [:]
    for round in 0..<rounds {
        // Alternating, each protocol first in turn, so neither always meets a warmer machine.
        let order = round % 2 == 0 ? ["ws", "http"] : ["http", "ws"]
        for scheme in order {
            let db = "push-\(scheme)-\(round)"
            let created = try http.request(method: "PUT", path: "/" + db)
            guard created.status == 201 else { throw HTTPBenchFailure(message: "PUT /\(db) → \(created.status)") }
            let run = try replicate(binary, ["--data", root + "/local", "src", "\(scheme)://127.0.0.1:\(node.port)/\(db)"])
            let stored = try docCount(http, db)
            guard stored == Int64(count) else {
                throw HTTPBenchFailure(message: "\(scheme) push stored \(stored) documents, expected \(count)")
            }
            best[scheme] = min(best[scheme] ?? .infinity, run.seconds)
            info(String(format: "replicate-blip: round %d %@ %.2f s (%.0f docs/s)", round, scheme, run.seconds, Double(count) / run.seconds))
            _ = try http.request(method: "DELETE", path: "/" + db)
        }
    }
    let blip = Double(count) / best["ws"]!, couch = Double(count) / best["http"]!
    report(Figure(workload: "replicate-blip", metric: "push docs/s over Couchbase Lite's protocol (settee replicate → node)",
                  value: blip, baseline: couch, baselineName: "the same push over CouchDB's protocol", goal: 1.0))
}

@MainActor private func pullMemory(binary: String, node: SetteeServerProcess, http: HTTPConnection, ids: [String],
                                   docs: [JSONObject], root: String, info: (String) -> Void) throws {
    var peaks: [Int: Int] = [:]
    for count in [ids.count, ids.count * 10] {
        let db = "pull-\(count)"
        let source = root + "/pull-source-\(count)"
        try makeLocalDatabase(source, count: count, ids: ids, docs: docs)
        // The node gets the documents over CouchDB's protocol (its own loader), then a fresh process pulls them.
        _ = try http.request(method: "PUT", path: "/" + db)
        _ = try replicate(binary, ["--data", source, "src", "http://127.0.0.1:\(node.port)/\(db)"])
        try? FileManager.default.removeItem(atPath: source)
        let target = root + "/pull-target-\(count)"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        let run = try replicate(binary, ["--data", target, "--create-target", "--pull", "copy", "ws://127.0.0.1:\(node.port)/\(db)"])
        peaks[count] = run.peakKiB
        info(String(format: "replicate-blip-rss: pulled %d documents over BLIP in %.1f s (%.0f docs/s), peak RSS %d MB",
                    count, run.seconds, Double(count) / run.seconds, run.peakKiB / 1024))
        try? FileManager.default.removeItem(atPath: target)
        _ = try http.request(method: "DELETE", path: "/" + db)
    }
    let small = peaks[ids.count]!, large = peaks[ids.count * 10]!
    report(Figure(workload: "replicate-blip-rss", metric: "pulling process peak RSS MB at 10× the documents",
                  value: Double(large) / 1024, baseline: Double(small) / 1024, baselineName: "the same pull of 1×",
                  goal: 0.8, unit: " MB", lowerIsBetter: true))
}
