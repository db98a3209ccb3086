// Replication workloads (issue: replicator speed).
//
//   replicate              `count` documents from one `settee serve` to another over loopback: the target node
//                          pulls (POST /_replicate on it), so it is the replicating process; docs/s against
//                          CouchDB 3.5's replicator (2.2k docs/s on this workload, the issue's reference), and the
//                          replicating process's peak RSS (VmHWM). Also local → local in this process.
//   replicate-incremental  after 1% of the documents change on the source, the same replication again (from its
//                          checkpoint): how many times faster than the full one (goal ≥ 33×, i.e. ≤ 3% of the time).
import Foundation
import Synchronization
import SetteeCore
import SetteeReplication
import SetteeStore

let replicationWorkloads = ["replicate", "replicate-incremental"]
/// CouchDB 3.5's replicator on this workload (the issue's figure): the baseline for `replicate`.
let couchDBReplicatorRate = 2_200.0

@MainActor func runReplicationWorkloads(selected: [String], ids: [String], docBytes: [[UInt8]], docs: [JSONObject],
                                        workDir: String, jsonOutput: Bool) throws {
    func info(_ line: String) {
        if jsonOutput { FileHandle.standardError.write(Data((line + "\n").utf8)) } else { print(line) }
    }
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("settee").path
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        throw HTTPBenchFailure(message: "no settee binary at \(binary): swift build -c release --product settee")
    }
    if ProcessInfo.processInfo.environment["SETTEE_BENCH_LOCAL_ONLY"] == nil {
        try httpReplication(selected: selected, ids: ids, docBytes: docBytes, docs: docs, workDir: workDir, binary: binary,
                            info: info)
    }
    if selected.contains("replicate") {
        try localReplication(ids: ids, docs: docs, workDir: workDir)
    }
}

@MainActor func httpReplication(selected: [String], ids: [String], docBytes: [[UInt8]], docs: [JSONObject], workDir: String,
                                binary: String, info: (String) -> Void) throws {
    let count = ids.count
    let dirA = workDir + "/rep-a", dirB = workDir + "/rep-b"
    for d in [dirA, dirB] {
        try? FileManager.default.removeItem(atPath: d)
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    }
    let a = try SetteeServerProcess(binary: binary, dataDirectory: dirA, logPath: workDir + "/rep-a.log")
    defer { a.stop() }
    let connA = try HTTPConnection(port: a.port)
    func check(_ r: HTTPResponse, _ ok: Set<Int>, _ what: String) throws {
        guard ok.contains(r.status) else {
            throw HTTPBenchFailure(message: "\(what) → \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))")
        }
    }
    try check(try connA.request(method: "PUT", path: "/src"), [201], "PUT /src")
    for start in stride(from: 0, to: count, by: 1000) {
        var body: [UInt8] = Array(#"{"docs":["#.utf8)
        for i in start..<min(count, start + 1000) {
            if i > start { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: #"{"_id":"#.utf8)
            body.append(contentsOf: JSON.string(ids[i]).serializedBytes)
            body.append(UInt8(ascii: ","))
            body.append(contentsOf: docBytes[i].dropFirst())
        }
        body.append(contentsOf: "]}".utf8)
        try check(try connA.request(method: "POST", path: "/src/_bulk_docs", body: body), [201], "load _bulk_docs")
    }
    info("replicate: source loaded with \(count) documents (pid \(a.process.processIdentifier))")

    let spec = Array(#"{"source":"http://127.0.0.1:\#(a.port)/src","target":"copy","create_target":true}"#.utf8)
    var fullTime = Double.infinity
    var peakRSS = 0
    var peaks = MemorySampler.Peaks()
    var target: SetteeServerProcess?
    defer { target?.stop() }
    for round in 0..<rounds {
        // A fresh target node each round: its peak RSS is the replication's.
        target?.stop()
        try? FileManager.default.removeItem(atPath: dirB)
        try FileManager.default.createDirectory(atPath: dirB, withIntermediateDirectories: true)
        let b = try SetteeServerProcess(binary: binary, dataDirectory: dirB, logPath: workDir + "/rep-b.log")
        target = b
        let connB = try HTTPConnection(port: b.port)
        var response: HTTPResponse?
        let sampler = MemorySampler(pid: b.process.processIdentifier)
        let t = try measure { response = try connB.request(method: "POST", path: "/_replicate", body: spec) }
        try check(response!, [200], "POST /_replicate (round \(round))")
        let written = try JSON.parse(response!.body)["history"]?[0]?["docs_written"]?.intValue ?? -1
        guard written == Int64(count) else {
            throw HTTPBenchFailure(message: "the replication wrote \(written) documents, expected \(count)")
        }
        let info = try JSON.parse(try connB.request(method: "GET", path: "/copy").body)
        guard info["doc_count"]?.intValue == Int64(count) else {
            throw HTTPBenchFailure(message: "target doc_count \(info["doc_count"]?.jsonString ?? "?"), expected \(count)")
        }
        let seen = sampler.stop()
        peaks.merge(seen)
        peakRSS = max(peakRSS, vmHWM(b.process.processIdentifier))
        fullTime = min(fullTime, t)
        connB.disconnect()
    }
    if selected.contains("replicate") {
        report(Figure(workload: "replicate", metric: "http docs (node → node)", value: Double(count) / fullTime,
                      baseline: couchDBReplicatorRate, baselineName: "CouchDB 3.5 replicator", goal: 22_000 / couchDBReplicatorRate))
        report(Figure(workload: "replicate", metric: "peak RSS MB of the replicating node", value: Double(peakRSS) / 1024,
                      baseline: nil, baselineName: nil, goal: nil))
        report(Figure(workload: "replicate", metric: "peak anonymous memory MB of the replicating node (heap: its own state)",
                      value: Double(peaks.anonymousKiB) / 1024, baseline: nil, baselineName: nil, goal: nil))
        info("replicate: peak RSS \(peakRSS / 1024) MB (goal ≤ 150 MB) \(peakRSS / 1024 <= 150 ? "✓" : "✗") = anonymous (heap) ≤ \(peaks.anonymousKiB / 1024) MB"
             + " + file-backed ≤ \(peaks.fileKiB / 1024) MB (the memory-mapped database and the binary: page cache, grows with the data read)"
             + " + shared ≤ \(peaks.sharedKiB / 1024) MB (SQLite's WAL index)")
    }

    if selected.contains("replicate-incremental"), let b = target {
        // 1% of the documents change on the source; the next run starts from the checkpoint. Each round changes
        // a different 1% and the best round counts, as for the full run.
        let step = 100
        let connB = try HTTPConnection(port: b.port)
        var t = Double.infinity
        var changed = 0
        for round in 0..<rounds {
            let keys = stride(from: round % step, to: count, by: step).map { JSON.string(ids[$0]) }
            let all = try connA.request(method: "POST", path: "/src/_all_docs",
                                        body: JSON.object(["keys": .array(keys)]).serializedBytes)
            try check(all, [200], "_all_docs keys")
            var edits: [JSON] = []
            for row in try JSON.parse(all.body)["rows"]?.arrayValue ?? [] {
                guard let id = row["id"]?.stringValue, let rev = row["value"]?["rev"], let i = Int(id.dropFirst(3)) else { continue }
                var doc = docs[i]
                doc["_id"] = .string(id)
                doc["_rev"] = rev
                doc["edited"] = .int(Int64(round))
                edits.append(.object(doc))
            }
            try check(try connA.request(method: "POST", path: "/src/_bulk_docs",
                                        body: JSON.object(["docs": .array(edits)]).serializedBytes), [201], "edit 1%")
            var response: HTTPResponse?
            t = min(t, try measure { response = try connB.request(method: "POST", path: "/_replicate", body: spec) })
            try check(response!, [200], "incremental POST /_replicate")
            let written = try JSON.parse(response!.body)["history"]?[0]?["docs_written"]?.intValue ?? -1
            guard written == Int64(edits.count) else {
                throw HTTPBenchFailure(message: "the incremental replication wrote \(written), expected \(edits.count)")
            }
            changed = edits.count
        }
        info("replicate-incremental: \(changed) documents changed per round")
        report(Figure(workload: "replicate-incremental", metric: "speedup over the full run (1% changed)",
                      value: fullTime / t, baseline: nil, baselineName: nil, goal: 100.0 / 3.0))
        info(String(format: "replicate-incremental: %.3f s vs full %.3f s = %.2f%% (goal ≤ 3%%)", t, fullTime, t / fullTime * 100))
        connB.disconnect()
    }
    connA.disconnect()
}

/// Local → local in this process (no sockets): the replicator's own overhead.
@MainActor func localReplication(ids: [String], docs: [JSONObject], workDir: String) throws {
    let count = ids.count
    do {
        let dir = workDir + "/rep-local"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let src = try Database(name: "src", config: DatabaseConfiguration(directory: dir))
        defer { src.close() }
        let sc = try src.defaultCollection()
        for start in stride(from: 0, to: count, by: 1000) {
            let writes = (start..<min(count, start + 1000)).map { RevisionWrite(id: ids[$0], body: docs[$0], mode: .edit(parent: nil)) }
            for r in try sc.write(writes) { _ = try r.get() }
        }
        var best = Double.infinity
        for round in 0..<rounds {
            let dst = try Database(name: "dst\(round)", config: DatabaseConfiguration(directory: dir))
            let source = LocalEndpoint(collection: sc), target = LocalEndpoint(collection: try dst.defaultCollection())
            let start = DispatchTime.now().uptimeNanoseconds
            let result = try blockingAwait { try await Replication(source: source, target: target).run() }
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            guard result.status.docsWritten == count else {
                throw HTTPBenchFailure(message: "local replication wrote \(result.status.docsWritten), expected \(count)")
            }
            dst.close()
        }
        report(Figure(workload: "replicate", metric: "local docs (in process)", value: Double(count) / best,
                      baseline: couchDBReplicatorRate, baselineName: "CouchDB 3.5 replicator", goal: nil))
    }
}

/// Samples a process's resident memory every 50 ms while running: the peak of its anonymous memory (heap,
/// stacks: what a replication's own state costs), of its file-backed pages (SQLite's memory-mapped database
/// file, which grows with the data read and is page cache the kernel can take back) and of its shared memory
/// (SQLite's WAL index). VmHWM is their sum's peak. Also the peaks of its open files and threads.
final class MemorySampler: Sendable {
    struct Peaks: Sendable {
        var anonymousKiB = 0
        var fileKiB = 0
        var sharedKiB = 0
        var files = 0
        var threads = 0
        /// VmHWM, filled in by the caller.
        var rssKiB = 0
        mutating func merge(_ other: Peaks) {
            anonymousKiB = max(anonymousKiB, other.anonymousKiB)
            fileKiB = max(fileKiB, other.fileKiB)
            sharedKiB = max(sharedKiB, other.sharedKiB)
            files = max(files, other.files)
            threads = max(threads, other.threads)
            rssKiB = max(rssKiB, other.rssKiB)
        }
    }
    private let state = Mutex<(peaks: Peaks, running: Bool)>((Peaks(), true))
    private let finished = DispatchSemaphore(value: 0)

    init(pid: Int32) {
        let thread = Thread { [self] in
            while state.withLock({ $0.running }) {
                let sample = Self.sample(pid)
                state.withLock { $0.peaks.merge(sample) }
                Thread.sleep(forTimeInterval: 0.05)
            }
            finished.signal()
        }
        thread.start()
    }

    /// Stops sampling; the peaks seen.
    func stop() -> Peaks {
        state.withLock { $0.running = false }
        finished.wait()
        return state.withLock { $0.peaks }
    }

    static func sample(_ pid: Int32) -> Peaks {
        var out = Peaks()
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return out }
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let kib = Int(fields[1]) else { continue }
            switch fields[0] {
            case "RssAnon:": out.anonymousKiB = kib
            case "RssFile:": out.fileKiB = kib
            case "RssShmem:": out.sharedKiB = kib
            default: break
            }
        }
        out.files = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
        out.threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0
        return out
    }
}

/// Peak resident set size of a process in KiB (`VmHWM` in /proc/PID/status).

func vmHWM(_ pid: Int32) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// Runs async work to completion from synchronous code.
func blockingAwait<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: Result<T, Error>?
    Task {
        do { result = .success(try await work()) } catch { result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try result!.get()
}
