// HTTP workloads: `settee serve` as a child process, driven over loopback by keep-alive clients: blocking ones
// (HTTPClient.swift) on Threads, and for http-get 16 connections polled from one thread (PolledHTTPClient.swift,
// as `wrk -t1 -c16`), so that the load generator doesn't take the CPU the server is measured on.
//
//   http-bulk     load the `count` documents with POST /{db}/_bulk_docs, batches of 1000, over 4 connections;
//                 also the ratio to the local (in-process) insert rate measured in the same run.
//   http-get      GET /{db}/{id} for random ids, 16 keep-alive connections, 100k requests after a warm-up.
//                 `--http1-channel settee|hummingbird` picks the server's HTTP/1.1 channel, to compare the two.
//   http-changes  GET /{db}/_changes of every document in one normal response: rows/s.
//   find          Mango: POST /{db}/_index and _find over HTTP (FindWorkload.swift).
//   starvation    GETs of one database while another's endless map functions run (StarvationWorkload.swift).
//
// http-get and http-changes need the documents on the server, so the load always runs (reported only when
// http-bulk is selected). Every response's status is checked; any error fails the run (exit status 1).
import Foundation
import SetteeCore
import SetteeStore

let httpWorkloads = ["http-bulk", "http-get", "http-changes", "validate-bulk", "view-build-js", "find", "starvation"]

struct HTTPBenchFailure: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Runs the selected HTTP workloads; on any failure prints it, stops the server and exits with status 1.
@MainActor func runHTTPWorkloads(selected: [String], ids: [String], docs: [JSONObject], docBytes: [[UInt8]],
                                 workDir: String, jsonOutput: Bool) {
    let bench = HTTPBench(selected: selected, ids: ids, docs: docs, docBytes: docBytes, workDir: workDir,
                          jsonOutput: jsonOutput)
    do {
        try bench.run()
    } catch {
        bench.server?.stop()
        FileHandle.standardError.write(Data("settee-bench: HTTP workloads FAILED: \(error)\n".utf8))
        if let log = bench.server?.logPath, let text = try? String(contentsOfFile: log, encoding: .utf8), !text.isEmpty {
            FileHandle.standardError.write(Data("server log (\(log)):\n\(text.suffix(4000))\n".utf8))
        }
        exit(1)
    }
}

@MainActor final class HTTPBench {
    let selected: [String]
    let ids: [String]
    let docs: [JSONObject]
    let docBytes: [[UInt8]]
    let workDir: String
    let jsonOutput: Bool
    var server: SetteeServerProcess?
    let dbName = "bench"
    var count: Int { ids.count }

    let bulkBatch = 1000
    let bulkClients = 4
    let getClients = 16
    let getRequests = 100_000
    let getWarmup = 4_000
    let changesRuns = 3

    init(selected: [String], ids: [String], docs: [JSONObject], docBytes: [[UInt8]], workDir: String, jsonOutput: Bool) {
        self.selected = selected
        self.ids = ids
        self.docs = docs
        self.docBytes = docBytes
        self.workDir = workDir
        self.jsonOutput = jsonOutput
    }

    /// Progress and context lines: stdout normally, stderr under --json (stdout holds only the JSON).
    func info(_ line: String) {
        if jsonOutput {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        } else {
            print(line)
        }
    }

    func run() throws {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("settee").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw HTTPBenchFailure(message: "no settee binary at \(binary): the HTTP workloads run the server built next to "
                + "settee-bench. Build it first:  swift build -c release --product settee")
        }
        info(describeBinary(binary))

        // The local insert rate for the http-bulk ratio: this run's `insert` figure, or measured here.
        var localInsertRate: Double?
        if selected.contains("http-bulk") {
            if let f = figures.first(where: { $0.workload == "insert" && $0.metric == "docs" }) {
                localInsertRate = f.value
            } else {
                localInsertRate = try measureLocalInsert()
                info("http-bulk (local insert, same loop as `insert`, measured for the ratio): \(Int(localInsertRate!)) docs/s")
            }
        }

        let dataDir = workDir + "/http-data"
        try? FileManager.default.removeItem(atPath: dataDir)
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        let server = try SetteeServerProcess(binary: binary, dataDirectory: dataDir, logPath: workDir + "/http-server.log",
                                             extraArguments: http1Channel.map { ["--http1-channel", $0] } ?? [])
        self.server = server
        info("http     server pid \(server.process.processIdentifier) on 127.0.0.1:\(server.port)"
            + " (HTTP/1.1 channel: \(http1Channel ?? "default"))")
        defer {
            server.stop()
            try? FileManager.default.removeItem(atPath: dataDir)
        }

        let admin = try HTTPConnection(port: server.port)
        let created = try admin.request(method: "PUT", path: "/\(dbName)")
        try expect(created, [201, 202], "PUT /\(dbName)")

        try bulkLoad(localInsertRate: localInsertRate, report: selected.contains("http-bulk"))

        let infoResponse = try admin.request(method: "GET", path: "/\(dbName)")
        try expect(infoResponse, [200], "GET /\(dbName)")
        let dbInfo = try JSON.parse(infoResponse.body)
        guard dbInfo["doc_count"]?.intValue == Int64(count) else {
            throw HTTPBenchFailure(message: "after the load, doc_count is \(dbInfo["doc_count"]?.jsonString ?? "missing"), expected \(count)")
        }
        let updateSeq = dbInfo["update_seq"].map { $0.stringValue ?? $0.jsonString } ?? ""

        if selected.contains("http-get") { try getWorkload(port: server.port) }
        if selected.contains("validate-bulk") { try validateBulk(admin) }
        if selected.contains("view-build-js") { try viewBuildMemory(admin, server: server) }
        if selected.contains("find") { try findWorkload(admin) }
        if selected.contains("starvation") { try starvationWorkload(port: server.port) }
        if selected.contains("http-changes") { try changesWorkload(admin, updateSeq: updateSeq) }
        admin.disconnect()
    }

    func describeBinary(_ path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var text = "http     server binary: \(resolved)"
        if let attrs = try? FileManager.default.attributesOfItem(atPath: resolved) {
            if let date = attrs[.modificationDate] as? Date {
                let f = DateFormatter()
                f.dateFormat = "yyyy-MM-dd HH:mm:ss"
                text += " (built \(f.string(from: date)))"
            }
        }
        let components = URL(fileURLWithPath: resolved).pathComponents
        if components.contains("debug") || components.contains(where: { $0.hasSuffix("-debug") }) {
            text += "\n         WARNING: this is a DEBUG build; for meaningful numbers run  swift build -c release --product settee  "
                + "and .build/release/settee-bench"
        } else if components.contains("release") || components.contains(where: { $0.hasSuffix("-release") }) {
            text += " [release build]"
        }
        return text
    }

    func expect(_ r: HTTPResponse, _ statuses: Set<Int>, _ what: String) throws {
        guard statuses.contains(r.status) else {
            throw HTTPBenchFailure(message: "\(what): HTTP \(r.status): \(String(decoding: r.body.prefix(500), as: UTF8.self))")
        }
    }

    /// The `insert` workload's loop on a fresh Database (used when `insert` is not selected).
    func measureLocalInsert() throws -> Double {
        let dir = workDir + "/http-local-insert"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try Database(name: "bench", config: DatabaseConfiguration(directory: dir))
        defer { db.close() }
        let c = try db.defaultCollection()
        let count = self.count, batch = bulkBatch
        let t = try measure {
            for start in stride(from: 0, to: count, by: batch) {
                let writes = (start..<min(count, start + batch)).map {
                    RevisionWrite(id: ids[$0], body: docs[$0], mode: .edit(parent: nil))
                }
                for r in try c.write(writes) { _ = try r.get() }
            }
        }
        return Double(count) / t
    }

    // MARK: http-bulk

    /// Loads the documents into `database` (a fresh one; default the workloads' database) and returns the rate;
    /// reports it as http-bulk when asked.
    @discardableResult
    func bulkLoad(localInsertRate: Double?, report shouldReport: Bool, database: String? = nil) throws -> Double {
        let dbName = database ?? self.dbName
        // Request bodies, built before timing: {"docs":[{"_id":"doc…", <the document's members>}, …]}.
        var bodies: [[UInt8]] = []
        for start in stride(from: 0, to: count, by: bulkBatch) {
            var body: [UInt8] = Array(#"{"docs":["#.utf8)
            for i in start..<min(count, start + bulkBatch) {
                if i > start { body.append(UInt8(ascii: ",")) }
                body.append(contentsOf: #"{"_id":"#.utf8)
                body.append(contentsOf: JSON.string(ids[i]).serializedBytes)
                let doc = docBytes[i]
                precondition(doc.first == UInt8(ascii: "{") && doc.count > 2, "documents are non-empty objects")
                body.append(UInt8(ascii: ","))
                body.append(contentsOf: doc.dropFirst())
            }
            body.append(contentsOf: "]}".utf8)
            bodies.append(body)
        }
        let clients = min(bulkClients, bodies.count)
        let port = server!.port
        let connections = try (0..<clients).map { _ in try HTTPConnection(port: port) }
        // Client k sends batches k, k + clients, …
        let requests: [[(batch: Int, bytes: [UInt8])]] = (0..<clients).map { k in
            stride(from: k, to: bodies.count, by: clients).map {
                ($0, connections[k].encodeRequest(method: "POST", path: "/\(dbName)/_bulk_docs", body: bodies[$0]))
            }
        }
        bodies = []
        let sendable = UncheckedBox((connections, requests))
        var results: [ClientResult<(batch: Int, response: HTTPResponse)>] = []
        let t = measure {
            results = onThreads(clients) { k in
                let (connections, requests) = sendable.value
                var out = ClientResult<(batch: Int, response: HTTPResponse)>()
                for r in requests[k] {
                    do {
                        let response = try connections[k].send(r.bytes)
                        out.items.append((r.batch, response))
                    } catch {
                        out.fail("batch \(r.batch): \(error)")
                        break
                    }
                }
                out.reconnects = connections[k].reconnects
                return out
            }
        }
        connections.forEach { $0.disconnect() }
        // Check every response: 201, one row per document, each ok with the right id.
        var errors = results.reduce(0) { $0 + $1.errors }
        var firstError = results.compactMap(\.firstError).first
        var written = 0
        for result in results {
            for (batch, response) in result.items {
                func fail(_ message: String) {
                    errors += 1
                    if firstError == nil { firstError = "batch \(batch): \(message)" }
                }
                guard response.status == 201 else {
                    fail("HTTP \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
                    continue
                }
                guard let rows = (try? JSON.parse(response.body))?.arrayValue else { fail("response is not a JSON array"); continue }
                let first = batch * bulkBatch
                let expected = min(count, first + bulkBatch) - first
                guard rows.count == expected else { fail("\(rows.count) rows for \(expected) documents"); continue }
                for (j, row) in rows.enumerated() {
                    if row["ok"]?.boolValue == true, row["id"]?.stringValue == ids[first + j], row["rev"]?.stringValue != nil {
                        written += 1
                    } else {
                        fail("row \(j): \(row.jsonString)")
                    }
                }
            }
        }
        let reconnects = results.reduce(0) { $0 + $1.reconnects }
        guard errors == 0, written == count else {
            throw HTTPBenchFailure(message: "http-bulk: \(errors) error(s), \(written)/\(count) documents written; first: \(firstError ?? "-")")
        }
        if reconnects > 0 { info("http-bulk: note: \(reconnects) reconnection(s) (server closed keep-alive connections)") }
        let rate = Double(count) / t
        guard shouldReport else {
            info("http     (load of \(dbName): \(count) docs via _bulk_docs in \(String(format: "%.2f", t)) s)")
            return rate
        }
        report(Figure(workload: "http-bulk", metric: "docs via POST _bulk_docs (batches of \(bulkBatch), \(clients) connections)",
                      value: rate, baseline: nil, baselineName: nil, goal: 55_000))
        if let localInsertRate {
            report(Figure(workload: "http-bulk", metric: "docs via POST _bulk_docs vs local insert", value: rate,
                          baseline: localInsertRate, baselineName: "local insert (same run)", goal: 0.4))
        }
        return rate
    }

    // MARK: validate-bulk

    /// `_bulk_docs` into a database with a typical `validate_doc_update` (field and role checks, run in settee-js)
    /// against the same load into one without: goal ≥ 0.7×. The two loads alternate for `rounds` rounds, each into
    /// fresh databases, and the best of each counts (this machine's speed swings by a third from one second to the
    /// next).
    func validateBulk(_ admin: HTTPConnection) throws {
        let validator = #"{"validate_doc_update": "function(newDoc, oldDoc, userCtx, secObj) { if (newDoc._deleted) return; if (typeof newDoc.type !== 'string') throw({forbidden: 'type is required'}); if (typeof newDoc.email !== 'string' || newDoc.email.indexOf('@') < 0) throw({forbidden: 'a valid email is required'}); if (oldDoc && oldDoc.type !== newDoc.type && userCtx.roles.indexOf('_admin') < 0) throw({unauthorized: 'only admins change types'}); }"}"#
        var plain = 0.0, validated = 0.0
        for round in 0..<rounds {
            let (plainDB, validatedDB) = ("plain\(round)", "validated\(round)")
            for name in [plainDB, validatedDB] {
                try expect(try admin.request(method: "PUT", path: "/\(name)"), [201, 202], "PUT /\(name)")
            }
            try expect(try admin.request(method: "PUT", path: "/\(validatedDB)/_design/rules", body: Array(validator.utf8)),
                       [201], "PUT /\(validatedDB)/_design/rules")
            plain = max(plain, try bulkLoad(localInsertRate: nil, report: false, database: plainDB))
            validated = max(validated, try bulkLoad(localInsertRate: nil, report: false, database: validatedDB))
            for name in [plainDB, validatedDB] {
                try expect(try admin.request(method: "DELETE", path: "/\(name)"), [200, 202], "DELETE /\(name)")
            }
        }
        report(Figure(workload: "validate-bulk", metric: "docs via _bulk_docs with a validate_doc_update vs without",
                      value: validated, baseline: plain, baselineName: "_bulk_docs without one", goal: 0.7))
    }

    // MARK: view-build-js (memory)

    /// The node's peak memory while it builds a JavaScript view over the loaded documents (`GET …/_view/…?limit=0`
    /// from nothing): the server's high-water mark (reset just before) plus its query servers'. Goal ≤ 200 MB.
    func viewBuildMemory(_ admin: HTTPConnection, server: SetteeServerProcess) throws {
        let design = #"{"views": {"js": {"map": "function(doc) { if (doc.type) emit([doc.address.city, doc.age], 1); }", "reduce": "_sum"}}}"#
        try expect(try admin.request(method: "PUT", path: "/\(dbName)/_design/bench", body: Array(design.utf8)), [201],
                   "PUT /\(dbName)/_design/bench")
        let pid = server.process.processIdentifier
        let before = vmRSS(pid)
        resetPeakRSS(pid)
        let started = Date()
        let built = try admin.request(method: "GET", path: "/\(dbName)/_design/bench/_view/js?limit=0&reduce=false")
        try expect(built, [200], "GET /\(dbName)/_design/bench/_view/js")
        let seconds = Date().timeIntervalSince(started)
        let nodePeak = vmHWM(pid)
        let servers = childProcesses(of: pid).filter { commandLine(of: $0).contains("settee-js") }
        let serverPeak = servers.reduce(0) { $0 + vmHWM($1) }
        let total = (nodePeak + serverPeak) / 1024
        var figure = Figure(workload: "view-build-js", metric: "peak RSS of the node building it over HTTP (settee serve \(nodePeak / 1024) MB, \(before / 1024) MB before; \(servers.count) query servers \(serverPeak / 1024) MB; \(Int(Double(count) / seconds)) docs/s)",
                            value: Double(total), baseline: nil, baselineName: nil, goal: nil)
        figure.unit = "MB"
        report(figure)
        info("view-build-js: the node's peak RSS \(total) MB (goal ≤ 200 MB) \(total <= 200 ? "✓" : "✗")")
    }

    // MARK: http-get

    func getWorkload(port: Int) throws {
        let clients = getClients
        let encoder = try HTTPConnection(port: port)
        defer { encoder.disconnect() }
        var rng = SeededGenerator(seed: 7)
        let order = (0..<(getWarmup + getRequests)).map { _ in Int(rng.next() % UInt64(count)) }
        // Per client: (document index, request bytes); the first getWarmup requests overall are the warm-up.
        func plan(_ range: Range<Int>) -> [[(doc: Int, bytes: [UInt8])]] {
            (0..<clients).map { k in
                stride(from: range.lowerBound + k, to: range.upperBound, by: clients).map { n in
                    let i = order[n]
                    return (i, encoder.encodeRequest(method: "GET", path: "/\(dbName)/\(ids[i])"))
                }
            }
        }
        let warmup = plan(0..<getWarmup)
        let timed = plan(getWarmup..<(getWarmup + getRequests))

        // The clients are keep-alive connections driven from one thread (PolledHTTPClients), as `wrk` does.
        func runPhase(_ requests: [[(doc: Int, bytes: [UInt8])]]) throws -> [ClientResult<Int>] {
            try PolledHTTPClients.run(port: port, requests: requests.map { $0.map(\.bytes) }) { k, n, status, body in
                let doc = requests[k][n].doc
                guard status == 200 else {
                    return "GET \(ids[doc]): HTTP \(status): \(String(decoding: body.prefix(300), as: UTF8.self))"
                }
                guard body.first == UInt8(ascii: "{") else { return "GET \(ids[doc]): body is not a JSON object" }
                // Spot-check the content: every 64th response is parsed and its _id compared.
                if n % 64 == 0 {
                    let parsed = try? JSON.parse(Array(body))
                    guard parsed?["_id"]?.stringValue == ids[doc], parsed?["_rev"]?.stringValue != nil else {
                        return "GET \(ids[doc]): unexpected body \(String(decoding: body.prefix(300), as: UTF8.self))"
                    }
                }
                return nil
            }
        }

        let warm = try runPhase(warmup)
        try checkClients(warm, "http-get (warm-up)")
        var results: [ClientResult<Int>] = []
        let pid = server!.process.processIdentifier
        let cpuBefore = processCPUSeconds(pid)
        let clientBefore = processCPUSeconds(getpid())
        let t = try measure { results = try runPhase(timed) }
        let cpuAfter = processCPUSeconds(pid)
        let clientAfter = processCPUSeconds(getpid())
        try checkClients(results, "http-get")
        let done = results.reduce(0) { $0 + ($1.items.first ?? 0) }
        guard done == getRequests else { throw HTTPBenchFailure(message: "http-get: \(done)/\(getRequests) requests succeeded") }
        if let before = cpuBefore, let after = cpuAfter {
            // Independent of how fast the host runs at the moment: what one GET costs the server in CPU.
            info("http-get (diagnostic) server CPU per GET: \(String(format: "%.1f", (after - before) / Double(getRequests) * 1e6)) µs "
                + "(user + system, \(String(format: "%.2f", (after - before) / t)) cores busy)")
        }
        if let before = clientBefore, let after = clientAfter {
            // The load generator's share of the machine (the server and it share the cores).
            info("http-get (diagnostic) client CPU per GET: \(String(format: "%.1f", (after - before) / Double(getRequests) * 1e6)) µs "
                + "(\(String(format: "%.2f", (after - before) / t)) cores busy)")
        }
        let channel = http1Channel.map { ", \($0) HTTP/1.1 channel" } ?? ""
        report(Figure(workload: "http-get", metric: "GET /db/id requests (\(clients) keep-alive connections, \(getRequests) requests\(channel))",
                      value: Double(getRequests) / t, baseline: nil, baselineName: nil, goal: 20_000))
    }

    /// A process's CPU time so far (user + system), from /proc on Linux; nil elsewhere.
    func processCPUSeconds(_ pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (user + system) / ticks
    }

    func checkClients<T>(_ results: [ClientResult<T>], _ what: String) throws {
        let errors = results.reduce(0) { $0 + $1.errors }
        guard errors == 0 else {
            throw HTTPBenchFailure(message: "\(what): \(errors) error(s); first: \(results.compactMap(\.firstError).first ?? "-")")
        }
    }

    // MARK: http-changes

    func changesWorkload(_ conn: HTTPConnection, updateSeq: String) throws {
        let request = conn.encodeRequest(method: "GET", path: "/\(dbName)/_changes")
        func fetch() throws -> HTTPResponse {
            let r = try conn.send(request)
            try expect(r, [200], "GET /\(dbName)/_changes")
            return r
        }
        // Check a response: `count` rows with ids, increasing seqs, last_seq = the last row's seq = update_seq.
        func verify(_ r: HTTPResponse) throws {
            let feed = try JSON.parse(r.body)
            guard let rows = feed["results"]?.arrayValue else { throw HTTPBenchFailure(message: "_changes: no results array") }
            guard rows.count == count else { throw HTTPBenchFailure(message: "_changes: \(rows.count) rows, expected \(count)") }
            func seqText(_ j: JSON?) -> String? { j.map { $0.stringValue ?? $0.jsonString } }
            var previous: Int64 = -1
            for row in rows {
                guard row["id"]?.stringValue != nil, row["changes"]?[0]?["rev"]?.stringValue != nil,
                      let seq = row["seq"].flatMap({ $0.intValue ?? $0.stringValue.flatMap { Int64($0.prefix { $0.isNumber }) } }),
                      seq > previous
                else { throw HTTPBenchFailure(message: "_changes: bad row \(row.jsonString)") }
                previous = seq
            }
            guard let last = seqText(feed["last_seq"]), last == seqText(rows.last?["seq"]), last == updateSeq else {
                throw HTTPBenchFailure(message: "_changes: last_seq \(seqText(feed["last_seq"]) ?? "missing"), last row seq "
                    + "\(seqText(rows.last?["seq"]) ?? "-"), update_seq \(updateSeq)")
            }
        }
        try verify(try fetch())  // warm-up, checked
        var times: [Double] = []
        var bytes = 0
        for _ in 0..<changesRuns {
            var r: HTTPResponse?
            times.append(try measure { r = try fetch() })
            try verify(r!)
            bytes = r!.body.count
        }
        let median = times.sorted()[times.count / 2]
        info("http-changes: \(changesRuns) runs of \(count) rows (\(bytes / 1024) KiB): "
            + times.map { String(format: "%.3f s", $0) }.joined(separator: ", ") + "; reporting the median")
        report(Figure(workload: "http-changes", metric: "rows via GET /db/_changes (one normal response)",
                      value: Double(count) / median, baseline: nil, baselineName: nil, goal: 200_000))
    }
}

// MARK: - Threads

/// What one client thread did: its items, and its errors (counted; the first kept).
struct ClientResult<T>: @unchecked Sendable {
    var items: [T] = []
    var errors = 0
    var firstError: String?
    var reconnects = 0
    mutating func fail(_ message: String) {
        errors += 1
        if firstError == nil { firstError = message }
    }
}

/// Hands non-Sendable values (connections, each used by one thread only) to threads.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

private final class ResultSlots<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [T?]
    init(_ n: Int) { slots = Array(repeating: nil, count: n) }
    func set(_ i: Int, _ value: T) { lock.lock(); slots[i] = value; lock.unlock() }
    func values() -> [T] { lock.lock(); defer { lock.unlock() }; return slots.map { $0! } }
}

/// Runs `body(k)` for k in 0..<n, each on its own Thread, and returns the results in order.
func onThreads<T>(_ n: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
    let slots = ResultSlots<T>(n)
    let done = DispatchSemaphore(value: 0)
    for k in 0..<n {
        let thread = Thread {
            slots.set(k, body(k))
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    for _ in 0..<n { done.wait() }
    return slots.values()
}

// MARK: - Server process

/// `settee serve --data DIR --port 0 --log-level warning` as a child process; stop() sends SIGTERM.
final class SetteeServerProcess {
    let process = Process()
    let port: Int
    let logPath: String

    init(binary: String, dataDirectory: String, logPath: String, extraArguments: [String] = []) throws {
        self.logPath = logPath
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--data", dataDirectory, "--port", "0", "--log-level", "warning"] + extraArguments
        let output = Pipe()
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath) ?? FileHandle.nullDevice
        try process.run()
        let handle = output.fileHandleForReading
        var text = ""
        var found = 0
        let deadline = Date().addingTimeInterval(60)
        while found == 0 && Date() < deadline {
            let data = handle.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
            if let range = text.range(of: #"listening on http://[0-9.]+:([0-9]+)"#, options: .regularExpression) {
                found = Int(text[range].split(separator: ":").last ?? "") ?? 0
            }
        }
        guard found != 0 else {
            if process.isRunning { process.terminate() }
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw HTTPBenchFailure(message: "settee serve did not report its port. stdout: \(text) stderr: \(log)")
        }
        port = found
    }

    /// SIGTERM (graceful), then waits up to 30 s before SIGKILL.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            FileHandle.standardError.write(Data("settee-bench: server did not exit after SIGTERM; killing it\n".utf8))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
