import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// CouchDB's node endpoints: `/_membership`, and under `/_node/{_local|name}/`: `_config` (read and change the
/// node's settings, see ``NodeConfig``), `_stats`, `_system`, `_versions`, `_prometheus`. Server admins only.
enum NodeRoutes {
    static func membership(_ call: Call) throws -> Response {
        try Auth.checkAdmin(call)
        guard call.method == .get || call.method == .head else { throw CouchError.methodNotAllowed("GET") }
        let name = JSON.string(call.node.configuration.nodeName)
        return Reply.json(.ok, ["all_nodes": [name], "cluster_nodes": [name]])
    }

    static func handle(_ call: inout Call) async throws -> Response {
        try Auth.checkAdmin(call)
        let s = call.segments
        guard s.count >= 3 else { throw CouchError.notFound("missing") }
        let node = call.node
        guard s[1] == "_local" || s[1] == node.configuration.nodeName else {
            throw CouchError(.notFound, "not_found", "no such node: \(s[1])")
        }
        switch s[2] {
        case "_config": return try await config(&call, Array(s.dropFirst(3)))
        case "_stats": return try stats(call, Array(s.dropFirst(3)))
        case "_system" where s.count == 3: return try system(call)
        case "_versions" where s.count == 3: return try versions(call)
        case "_prometheus" where s.count == 3:
            return Reply.raw(.ok, node.metrics.render(), contentType: "text/plain; version=0.0.4")
        default: throw CouchError.notFound("missing")
        }
    }

    // MARK: _config

    static func config(_ call: inout Call, _ path: [String]) async throws -> Response {
        let config = call.node.config
        let persist = call.header(HTTPField.Name("X-Couch-Persist")!)?.lowercased() != "false"
        switch (path.count, call.method) {
        case (0, .get):
            let sections = config.snapshot.sections
            return Reply.json(.ok, .object(JSONObject(sections.sorted { $0.key < $1.key }.map { section in
                (section.key, JSON.object(JSONObject(section.value.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) })))
            })))
        case (1, .post) where path[0] == "_reload":
            try config.reload()
            call.node.perUser.refresh()
            call.node.applyOpenDatabaseLimit()
            return Reply.ok()
        case (1, .get):
            let keys = config.snapshot.sections[path[0]] ?? [:]
            return Reply.json(.ok, .object(JSONObject(keys.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) })))
        case (2, .get):
            guard let value = config.value(path[0], path[1]) else {
                throw CouchError(.notFound, "not_found", "unknown_config_value")
            }
            return Reply.json(.ok, .string(value))
        case (2, .put):
            let (section, key) = (path[0], path[1])
            try checkChangeAllowed(config, section, key)
            let body = try await call.bodyBytes()
            guard case .string(var value)? = try? JSON.parse(body) else {
                throw CouchError.badRequest("Value must be a JSON string")
            }
            if section == "admins" {
                value = try await AdminPasswords.hashForStorage(value, iterations: call.node.configuration.security.pbkdf2Iterations)
            }
            let old = try config.set(section, key, value, persist: persist)
            if key == "authentication_db" && ["chttpd_auth", "couch_httpd_auth"].contains(section) {
                call.node.scheduleAuthDesignDocument()
            }
            if section == "couch_peruser" { call.node.perUser.refresh() }
            if section == "couchdb" && key == "max_dbs_open" { call.node.applyOpenDatabaseLimit() }
            return Reply.json(.ok, .string(old))
        case (2, .delete):
            let (section, key) = (path[0], path[1])
            try checkChangeAllowed(config, section, key)
            guard let old = try config.delete(section, key, persist: persist) else {
                throw CouchError(.notFound, "not_found", "unknown_config_value")
            }
            if section == "couch_peruser" { call.node.perUser.refresh() }
            if section == "couchdb" && key == "max_dbs_open" { call.node.applyOpenDatabaseLimit() }
            return Reply.json(.ok, .string(old))
        case (0, _), (1, _): throw CouchError.methodNotAllowed("GET")
        case (2, _): throw CouchError.methodNotAllowed("GET,PUT,DELETE")
        default: throw CouchError.notFound("missing")
        }
    }

    /// CouchDB's blacklist (sections that hold code or processes) and `[chttpd] config_whitelist`.
    static func checkChangeAllowed(_ config: NodeConfig, _ section: String, _ key: String) throws {
        if NodeConfig.blacklisted.contains(section) {
            throw CouchError(.forbidden, "forbidden", "Config section blacklisted for modification over HTTP API.")
        }
        if !NodeConfig.whitelistAllows(config.value("chttpd", "config_whitelist"), section: section, key: key) {
            throw CouchError(.badRequest, "bad_request", "Config modification is not allowed by config_whitelist.")
        }
    }

    // MARK: _stats, _system, _versions

    static func stats(_ call: Call, _ path: [String]) throws -> Response {
        guard call.method == .get else { throw CouchError.methodNotAllowed("GET") }
        var value = call.node.couchStats()
        for step in path {
            guard let next = value[step] else { throw CouchError.notFound("missing") }
            value = next
        }
        return Reply.json(.ok, value)
    }

    static func system(_ call: Call) throws -> Response {
        guard call.method == .get else { throw CouchError.methodNotAllowed("GET") }
        let process = ProcessFigures.read()
        return Reply.json(.ok, [
            "uptime": .int(Int64(Date().timeIntervalSince(call.node.startTime))),
            "memory": ["total": .int(process.residentBytes), "processes": .int(process.residentBytes), "other": 0],
            "run_queue": 0, "ets_table_count": 0, "context_switches": .int(process.contextSwitches),
            "reductions": 0, "garbage_collection_count": 0, "words_reclaimed": 0,
            "io_input": .int(process.bytesRead), "io_output": .int(process.bytesWritten),
            "os_proc_count": 0, "stale_proc_count": 0,
            "process_count": .int(process.threads), "process_limit": 0, "message_queues": [:],
            "internal_replication_jobs": 0, "distribution": [:],
        ])
    }

    static func versions(_ call: Call) throws -> Response {
        guard call.method == .get else { throw CouchError.methodNotAllowed("GET") }
        return Reply.json(.ok, [
            "couchdb_version": .string(ServerRoutes.version),
            "settee_version": .string(SetteeServerVersion.version),
            "collation_driver": ["name": "libicu"],
        ])
    }
}

/// Figures about this process from Linux's `/proc/self` (zero where a platform has none).
struct ProcessFigures {
    var residentBytes: Int64 = 0
    var threads: Int64 = 0
    var contextSwitches: Int64 = 0
    var bytesRead: Int64 = 0
    var bytesWritten: Int64 = 0

    static func read() -> ProcessFigures {
        var f = ProcessFigures()
        func lines(_ path: String) -> [Substring] {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n")
        }
        func number(_ line: Substring) -> Int64 {
            Int64(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") ?? 0
        }
        for line in lines("/proc/self/status") {
            if line.hasPrefix("VmRSS:") { f.residentBytes = number(line) * 1024 }
            if line.hasPrefix("Threads:") { f.threads = number(line) }
            if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                f.contextSwitches += number(line)
            }
        }
        for line in lines("/proc/self/io") {
            if line.hasPrefix("rchar:") { f.bytesRead = number(line) }
            if line.hasPrefix("wchar:") { f.bytesWritten = number(line) }
        }
        return f
    }
}
