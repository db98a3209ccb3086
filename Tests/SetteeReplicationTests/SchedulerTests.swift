import Foundation
import SetteeCore
import SetteeTestSupport
import Testing

/// Many databases and many jobs: `--peer` with hundreds of databases (bounded work, files and threads), and the
/// replication scheduler's `[replicator] max_jobs`, `max_churn` and `interval`. Real `settee serve` processes.
@Suite(.serialized) struct SchedulerTests {
    func url(_ s: ServerProcess, _ path: String = "") -> String { "http://127.0.0.1:\(s.port)" + (path.isEmpty ? "" : "/" + path) }

    /// How many files and threads a process holds now.
    static func openFiles(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }
    static func threads(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? -1
    }

    /// Each database's document count on a node (`GET /_dbs_info`), databases starting with `_` left out.
    static func counts(_ base: String) async throws -> [String: Int] {
        let r = try await HTTP.send(.GET, base + "/_dbs_info")
        var out: [String: Int] = [:]
        for row in r.json?.arrayValue ?? [] {
            guard let name = row["key"]?.stringValue, !name.hasPrefix("_"),
                  let n = row["info"]?["doc_count"]?.intValue else { continue }
            out[name] = Int(n)
        }
        return out
    }

    @Test func hundredsOfDatabasesConvergeThroughPeersWithBoundedFilesAndThreads() async throws {
        let dirs = [TempDir(), TempDir()]
        let ports = [freePort(), freePort()]
        // A database limit well below the number of databases: idle ones hold no files.
        for dir in dirs {
            try "[couchdb]\nmax_dbs_open = 40\n".write(toFile: dir.path + "/local.ini", atomically: true, encoding: .utf8)
        }
        let nodes = try (0..<2).map { i in
            try ServerProcess(dataDirectory: dirs[i].path, port: ports[i],
                              extraArguments: ["--peer", "http://admin:secret@127.0.0.1:\(ports[1 - i])", "--peer-scan-interval", "1"])
        }
        defer { nodes.forEach { $0.stop() } }
        let perNode = 100
        // Databases made on each node with a document each (eight clients at a time), then a second document in
        // every third database of the other node's: writes spread over all of them, on both sides.
        for (i, node) in nodes.enumerated() {
            let base = url(node)
            for chunk in stride(from: 0, to: perNode, by: 8) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for d in chunk..<min(perNode, chunk + 8) {
                        group.addTask {
                            let db = base + "/n\(i)-db\(d)"
                            let made = try await HTTP.send(.PUT, db).status
                            let written = try await HTTP.send(.PUT, db + "/first", #"{"node":\#(i)}"#).status
                            #expect(made == 201 && written == 201)
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
        let started = Date()
        var peakFiles = [0, 0], peakThreads = [0, 0]
        var expected: [String: Int] = [:]
        for i in 0..<2 { for d in 0..<perNode { expected["n\(i)-db\(d)"] = 1 } }
        func converged() async throws -> Bool {
            for (i, node) in nodes.enumerated() {
                peakFiles[i] = max(peakFiles[i], Self.openFiles(node.process.processIdentifier))
                peakThreads[i] = max(peakThreads[i], Self.threads(node.process.processIdentifier))
            }
            let a = try await Self.counts(url(nodes[0])), b = try await Self.counts(url(nodes[1]))
            return a == expected && b == expected
        }
        #expect(try await waitFor(seconds: 120) { try await converged() }, "every database reaches the other node")
        print("peers: \(2 * perNode) databases converged in \(Date().timeIntervalSince(started)) s")

        // Writes on both sides into databases the other node made.
        for (i, node) in nodes.enumerated() {
            for d in stride(from: 0, to: perNode, by: 3) {
                let db = url(node, "n\(1 - i)-db\(d)")
                #expect(try await HTTP.send(.PUT, db + "/second-from-\(i)", #"{"node":\#(i)}"#).status == 201)
                expected["n\(1 - i)-db\(d)", default: 0] += 1
            }
        }
        #expect(try await waitFor(seconds: 120) { try await converged() }, "later writes reach the other node")

        // Bounded: with 200 databases, the databases' files within `max_dbs_open` (40), plus the databases in use
        // at that moment, sockets and the event loops' descriptors (78 measured; 200 databases open would be near a
        // thousand); and threads independent of the number of databases.
        print("peers: peak open files \(peakFiles), threads \(peakThreads)")
        for i in 0..<2 {
            #expect(peakFiles[i] < 150, "node\(i) held \(peakFiles[i]) files")
            #expect(peakThreads[i] < 120, "node\(i) ran \(peakThreads[i]) threads")
        }
        // Once the nodes agree they go quiet: no database changes on either side (a replication's checkpoint is
        // no update, else each side's checkpoints would wake the other forever), and no replication runs.
        func lastSeqs() async throws -> [String] {
            try await nodes.asyncMap { try await HTTP.send(.GET, url($0, "_db_updates")).json?["last_seq"]?.jsonString ?? "" }
        }
        let settled = try await lastSeqs()
        try await Task.sleep(for: .seconds(3))
        #expect(try await lastSeqs() == settled, "the nodes keep changing databases after converging")
        let a = try await HTTP.send(.GET, url(nodes[0], "_active_tasks")).json?.arrayValue ?? [nil]
        let b = try await HTTP.send(.GET, url(nodes[1], "_active_tasks")).json?.arrayValue ?? [nil]
        #expect(a.isEmpty && b.isEmpty)
    }

    @Test func theSchedulerRunsAtMostMaxJobsAndRotatesTheOthersIn() async throws {
        let dir = TempDir()
        let node = try ServerProcess(dataDirectory: dir.path)
        defer { node.stop() }
        for (key, value) in [("max_jobs", "2"), ("max_churn", "1"), ("interval", "300")] {
            let r = try await HTTP.send(.PUT, url(node, "_node/_local/_config/replicator/\(key)"), "\"\(value)\"")
            #expect(r.status == 200)
        }
        let jobs = 5
        for j in 0..<jobs {
            #expect(try await HTTP.send(.PUT, url(node, "src\(j)")).status == 201)
            #expect(try await HTTP.send(.PUT, url(node, "src\(j)/doc"), #"{"j":\#(j)}"#).status == 201)
            let body = #"{"source":"src\#(j)","target":"dst\#(j)","create_target":true,"continuous":true}"#
            #expect(try await HTTP.send(.POST, url(node, "_replicate"), body).status == 202)
        }
        // At most two run at once; the others wait, listed as pending by the scheduler.
        var sawPending = false
        for _ in 0..<20 {
            let running = try await HTTP.send(.GET, url(node, "_active_tasks")).json?.arrayValue ?? []
            #expect(running.count <= 2)
            let listed = try await HTTP.send(.GET, url(node, "_scheduler/jobs")).json?["jobs"]?.arrayValue ?? []
            #expect(listed.count == jobs)
            if listed.contains(where: { $0["state"]?.stringValue == "pending" }) { sawPending = true }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(sawPending)
        // Rotation gives every job its turn: every target gets its document.
        #expect(try await waitFor(seconds: 60) {
            for j in 0..<jobs where try await HTTP.send(.GET, url(node, "dst\(j)/doc")).status != 200 { return false }
            return true
        }, "every job ran")
        // A job stopped by the scheduler resumes from its checkpoint: a later write reaches its target too.
        for j in 0..<jobs {
            #expect(try await HTTP.send(.PUT, url(node, "src\(j)/later"), #"{"j":\#(j)}"#).status == 201)
        }
        #expect(try await waitFor(seconds: 60) {
            for j in 0..<jobs where try await HTTP.send(.GET, url(node, "dst\(j)/later")).status != 200 { return false }
            return true
        })
        // Raising max_jobs starts the waiting ones.
        #expect(try await HTTP.send(.PUT, url(node, "_node/_local/_config/replicator/max_jobs"), "\"10\"").status == 200)
        #expect(try await waitFor(seconds: 10) {
            (try await HTTP.send(.GET, url(node, "_active_tasks")).json?.arrayValue ?? []).count == jobs
        })
    }
}
