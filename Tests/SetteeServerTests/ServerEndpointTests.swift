import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

@Suite("Server endpoints")
struct ServerEndpointTests {
    @Test func welcomeReportsCouchDBVersionVendorAndNodeUUID() async throws {
        try await withServer { c in
            let r = try await c.get("/")
            #expect(r.status == .ok)
            #expect(r.header(.contentType) == "application/json")
            #expect(r["couchdb"] == "Welcome")
            #expect(r["version"]?.stringValue?.hasPrefix("3.") == true)
            #expect(r["vendor"]?["name"] == "Settee")
            #expect(r["uuid"]?.stringValue == c.node.uuid)
            #expect(r["uuid"]?.stringValue?.count == 32)
        }
    }

    @Test func nodeUUIDIsStableAcrossNodesOnTheSameDataDirectory() async throws {
        let dir = TempDataDir()
        let first = try makeNode(dir: dir)
        let uuid1 = LockedBox<String?>(nil)
        try await withServer(node: first) { c in uuid1.value = try await c.get("/")["uuid"]?.stringValue }
        first.closeAll()
        let second = try makeNode(dir: dir)
        try await withServer(node: second) { c in
            let uuid2 = try await c.get("/")["uuid"]?.stringValue
            #expect(uuid2 != nil)
            #expect(uuid2 == uuid1.value)
        }
        second.closeAll()
        // A different directory is a different node.
        let otherDir = TempDataDir()
        let third = try makeNode(dir: otherDir)
        #expect(third.uuid != first.uuid)
        third.closeAll()
    }

    @Test func headOnRootIsOK() async throws {
        try await withServer { c in
            let r = try await c.request(.head, "/")
            #expect(r.status == .ok)
        }
    }

    @Test func upReportsStatusOK() async throws {
        try await withServer { c in
            let r = try await c.get("/_up")
            #expect(r.status == .ok)
            #expect(r["status"] == "ok")
        }
    }

    @Test func allDbsListsDatabasesSortedWithPaging() async throws {
        try await withServer { c in
            // A fresh node has CouchDB's system databases.
            #expect(try await c.get("/_all_dbs").json == ["_replicator", "_users"])
            try await c.createDB("zeta")
            try await c.createDB("alpha")
            try await c.createDB("mid")
            #expect(try await c.get("/_all_dbs").json == ["_replicator", "_users", "alpha", "mid", "zeta"])
            #expect(try await c.get("/_all_dbs?descending=true").json == ["zeta", "mid", "alpha", "_users", "_replicator"])
            #expect(try await c.get("/_all_dbs?limit=1&skip=3").json == ["mid"])
            #expect(try await c.get(#"/_all_dbs?start_key="alpha"&end_key="mid""#).json == ["alpha", "mid"])
            #expect(try await c.get(#"/_all_dbs?startkey="b"&inclusive_end=false&endkey="zeta""#).json == ["mid"])
            #expect(try await c.get(#"/_all_dbs?descending=true&start_key="mid""#).json == ["mid", "alpha", "_users", "_replicator"])
            _ = try await c.delete("/mid")
            #expect(try await c.get("/_all_dbs").json == ["_replicator", "_users", "alpha", "zeta"])
            let infos = try await c.post("/_dbs_info", #"{"keys": ["alpha", "nope"]}"#)
            #expect(infos.json[0]?["info"]?["db_name"] == "alpha")
            #expect(infos.json[1]?["error"] == "not_found")
        }
    }

    @Test func uuidsReturnsRequestedCountOfDistinctHexIDs() async throws {
        try await withServer { c in
            let one = try await c.get("/_uuids")
            #expect(one.status == .ok)
            #expect(one["uuids"]?.arrayValue?.count == 1)
            let r = try await c.get("/_uuids?count=5")
            let uuids = r["uuids"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(uuids.count == 5)
            #expect(Set(uuids).count == 5)
            for u in uuids {
                #expect(u.count == 32)
                #expect(u.allSatisfy { $0.isHexDigit && !$0.isUppercase })
            }
        }
    }

    @Test func uuidsRejectsInvalidAndExcessiveCounts() async throws {
        try await withServer { c in
            expectError(try await c.get("/_uuids?count=abc"), .badRequest, "bad_request")
            expectError(try await c.get("/_uuids?count=100000"), .badRequest, "bad_request")
        }
    }

    @Test func activeTasksIsAnEmptyList() async throws {
        try await withServer { c in
            let r = try await c.get("/_active_tasks")
            #expect(r.status == .ok)
            #expect(r.json == [])
        }
    }

    /// Each request is counted under the route it was dispatched to (``Route``'s labels).
    @Test func requestsAreCountedUnderTheirRoutes() async throws {
        try await withServer { c in
            try await c.createDB("r")
            _ = try await c.put("/r/a", #"{"n":1}"#)
            _ = try await c.get("/r/_all_docs")
            _ = try await c.post("/r/_compact", "{}")
            _ = try await c.get("/r/_changes")
            _ = try await c.get("/_no_such_endpoint")
            _ = try await c.get("/_uuids")
            let text = try await c.get("/_metrics").text
            for (route, method) in [("db", "PUT"), ("doc", "PUT"), ("all_docs", "GET"), ("compact", "POST"),
                                    ("changes", "GET"), ("unknown", "GET"), ("_uuids", "GET")] {
                #expect(text.contains("settee_http_requests_total{route=\"\(route)\",method=\"\(method)\""), "\(route) \(method)")
            }
        }
    }

    /// The route table names every endpoint from its method and path alone, before authentication: a refused
    /// request is counted under what it asked for.
    @Test(arguments: [
        ("GET", "/", Route.root), ("GET", "/_utils/database", .utils), ("GET", "/_up", .up), ("GET", "/_all_dbs", .allDbs),
        ("GET", "/_node/_local/_config/couchdb", .config), ("GET", "/_node/n/_prometheus", .metrics),
        ("GET", "/_membership", .membership), ("GET", "/_db_updates", .dbUpdates), ("GET", "/_nope", .unknown),
        ("PUT", "/db", .db), ("POST", "/db", .doc), ("GET", "/db/a", .doc), ("GET", "/db/a/b.txt", .attachment),
        ("GET", "/db/_design/d", .doc), ("GET", "/db/_design%2Fd".removingPercentEncoding!, .doc),
        ("GET", "/db/_design/d/_view/v", .view), ("GET", "/db/_design/d/_info", .designInfo),
        ("GET", "/db/_design/d/_show/s/a", .show), ("PUT", "/db/_design/d/_update/u/a", .update),
        ("GET", "/db/_design/d/_list/l/v", .list), ("GET", "/db/_design/d/_rewrite/x", .rewrite),
        ("GET", "/db/_design/d/logo.png", .attachment), ("GET", "/db/_design/d/_view", .other),
        ("GET", "/db/_all_docs", .allDocs), ("GET", "/db/_design_docs", .allDocs), ("GET", "/db/_local_docs", .allDocs),
        ("POST", "/db/_bulk_docs", .bulkDocs), ("POST", "/db/_bulk_get", .bulkGet), ("POST", "/db/_revs_diff", .revsDiff),
        ("POST", "/db/_missing_revs", .revsDiff), ("GET", "/db/_changes", .changes), ("GET", "/db/_blipsync", .blipsync),
        ("GET", "/db/_local/x", .local), ("POST", "/db/_query", .query), ("GET", "/db/_indexes", .index),
        ("GET", "/db/_indexes/i/_pending", .index), ("POST", "/db/_index", .index), ("POST", "/db/_find", .find),
        ("POST", "/db/_explain", .explain), ("GET", "/db/_partition/p", .partition),
        ("GET", "/db/_partition/p/_all_docs", .allDocs), ("GET", "/db/_partition/p/_design/d/_view/v", .view),
        ("POST", "/db/_partition/p/_find", .find), ("PUT", "/db/_revs_limit", .revsLimit), ("POST", "/db/_compact", .compact),
        ("POST", "/db/_compact/d", .compact), ("POST", "/db/_ensure_full_commit", .ensureFullCommit),
        ("POST", "/db/_purge", .purge), ("PUT", "/db/_security", .security), ("POST", "/db/_view_cleanup", .viewCleanup),
        ("GET", "/db/_other", .other), ("GET", "/db/_local/", .other), ("GET", "/_users/org.couchdb.user:a", .doc),
    ] as [(String, String, Route)])
    func theRouteTableNamesEveryEndpoint(method: String, path: String, route: Route) {
        // (`/db/_local%2F`: a segment that is `_local/` once decoded.)
        let segments = path == "/db/_local/" ? ["db", "_local/"] : path.split(separator: "/").map(String.init)
        let named = Route(method: HTTPRequest.Method(method)!, path: segments)
        #expect(named == route, "\(method) \(path)")
    }

    @Test func metricsExposeRequestCounterInPrometheusFormat() async throws {
        try await withServer { c in
            _ = try await c.get("/_up")
            _ = try await c.get("/nosuchdb")
            let r = try await c.get("/_metrics")
            #expect(r.status == .ok)
            #expect(r.header(.contentType)?.hasPrefix("text/plain") == true)
            #expect(r.text.contains("settee_http_requests_total"))
            #expect(r.text.contains("status=\"404\""))
            #expect(r.text.contains("route=\"_up\""))
            // The open-handle cache (`max_dbs_open`): databases holding connections, and their files.
            #expect(try await c.put("/metered", "").status == .created)
            func gauges() async throws -> (databases: Double, files: Double) {
                let text = try await c.get("/_metrics").text
                func gauge(_ name: String) -> Double {
                    text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) } ?? -1
                }
                return (gauge("settee_databases_holding_connections"), gauge("settee_database_open_files"))
            }
            // Read right after a use of the database (one unused for a second closes its connections; on a loaded
            // machine the gap can be that long, so a few tries).
            var seen = (databases: -1.0, files: -1.0)
            for _ in 0..<10 where seen.databases < 1 {
                _ = try await c.get("/metered")
                seen = try await gauges()
            }
            #expect(seen.databases >= 1)
            #expect(seen.files >= 3 * seen.databases, "a database holds its file, WAL and WAL index at least: \(seen)")
        }
    }

    /// A replication over the live HTTP server records each stage into `settee_replication_stage_duration_seconds`,
    /// which `/_metrics` and `/_node/_local/_prometheus` render as a histogram with a `stage` label.
    /// Every place a node names itself says the `--node-name` it was given: `_membership`, `_active_tasks`,
    /// `_scheduler/jobs` and `_scheduler/docs`.
    @Test func tasksAndJobsCarryTheConfiguredNodeName() async throws {
        let dir = TempDataDir()
        var configuration = ServerConfiguration(dataDirectory: dir.path, port: 0)
        configuration.nodeName = "settee@node-7.example"
        let node = try Node(configuration: configuration)
        try await withServer(node: node) { c in
            #expect(try await c.get("/_membership")["all_nodes"] == ["settee@node-7.example"])
            try await c.createDB("src")
            #expect(try await c.put("/src/a", #"{"n":1}"#).status == .created)
            let started = try await c.post("/_replicate", #"{"source":"src","target":"dst","create_target":true,"continuous":true}"#)
            #expect(started.status == .accepted || started.status == .ok, "\(started.text)")
            var tasks: [JSON] = []
            for _ in 0..<100 {
                tasks = try await c.get("/_active_tasks").json.arrayValue ?? []
                if !tasks.isEmpty { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(!tasks.isEmpty)
            for task in tasks { #expect(task["node"] == "settee@node-7.example", "\(task)") }
            let jobs = try await c.get("/_scheduler/jobs")["jobs"]?.arrayValue ?? []
            #expect(!jobs.isEmpty)
            for job in jobs { #expect(job["node"] == "settee@node-7.example", "\(job)") }
            let cancelled = try await c.post("/_replicate", #"{"source":"src","target":"dst","create_target":true,"continuous":true,"cancel":true}"#)
            #expect(cancelled.status == .ok, "\(cancelled.text)")
        }
        node.closeAll()
    }

    @Test func metricsExposeReplicationStageTimers() async throws {
        try await withServer(mode: .live) { c in
            try await c.createDB("src")
            let docs = (0..<25).map { #"{"_id":"d\#($0)","n":\#($0)}"# }.joined(separator: ",")
            #expect(try await c.post("/src/_bulk_docs", #"{"docs":[\#(docs)]}"#).status == .created)
            let r = try await c.post("/_replicate", #"{"source":"src","target":"dst","create_target":true}"#)
            #expect(r.status == .ok, "\(r.text)")
            #expect(r["ok"] == true)
            #expect(r["history"]?[0]?["docs_written"] == 25)

            for path in ["/_metrics", "/_node/_local/_prometheus"] {
                let m = try await c.get(path)
                #expect(m.status == .ok)
                // Each series' value, by its name and labels as rendered.
                var values: [String: Double] = [:]
                for line in m.text.split(separator: "\n") where line.hasPrefix("settee_replication_stage_duration_seconds") {
                    guard let space = line.lastIndex(of: " ") else { continue }
                    values[String(line[..<space])] = Double(line[line.index(after: space)...])
                }
                let name = "settee_replication_stage_duration_seconds"
                for stage in ["changes", "revs_diff", "fetch", "write", "checkpoint", "total"] {
                    let count = values["\(name)_count{stage=\"\(stage)\"}"] ?? 0
                    let sum = values["\(name)_sum{stage=\"\(stage)\"}"] ?? 0
                    #expect(count >= 1, "\(path): \(stage) count")
                    #expect(sum > 0, "\(path): \(stage) sum")
                    #expect(values["\(name)_bucket{stage=\"\(stage)\",le=\"+Inf\"}"] == count, "\(path): \(stage) +Inf bucket")
                    // The replication buckets (1 ms … 300 s), not the request ones.
                    #expect(values["\(name)_bucket{stage=\"\(stage)\",le=\"300.0\"}"] == count, "\(path): \(stage) 300 s bucket")
                }
                // One run: one `total`; at least one batch read, diffed, fetched, written and checkpointed.
                #expect(values["\(name)_count{stage=\"total\"}"] == 1)
            }
        }
    }

    @Test func wrongMethodOnServerEndpointIs405() async throws {
        try await withServer { c in
            expectError(try await c.delete("/_all_dbs"), .methodNotAllowed, "method_not_allowed")
            expectError(try await c.post("/_uuids", "{}"), .methodNotAllowed, "method_not_allowed")
            expectError(try await c.post("/", "{}"), .methodNotAllowed, "method_not_allowed")
        }
    }

    @Test func unknownUnderscorePathIsIllegalDatabaseName() async throws {
        try await withServer { c in
            expectError(try await c.get("/_nope"), .badRequest, "illegal_database_name")
        }
    }
}

/// A mutable box for passing a value out of a `@Sendable` closure.
final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: T
    init(_ value: T) { _value = value }
    var value: T {
        get { lock.lock(); defer { lock.unlock() }; return _value }
        set { lock.lock(); _value = newValue; lock.unlock() }
    }
}
