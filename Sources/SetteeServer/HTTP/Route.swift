import HTTPTypes

/// What a request was routed to, as the metrics label it (`route="…"` on `settee_http_requests_total` and the
/// request-duration histogram), named by the route table below (``init(method:path:)``); the raw values are the
/// labels, so they never change meaning.
enum Route: String, Sendable, CaseIterable {
    // The server (`/_…`).
    case root
    case up = "_up", allDbs = "_all_dbs", dbsInfo = "_dbs_info", uuids = "_uuids", activeTasks = "_active_tasks"
    case metrics = "_metrics", session = "_session", replicate = "_replicate", scheduler = "_scheduler"
    case membership, dbUpdates = "db_updates", utils, preflight
    /// A `/_…` path that names no server endpoint.
    case unknown
    /// Anything not routed yet (a request refused before routing).
    case other
    // The node (`/_node/{name}/…`).
    case config, stats, system, versions
    // A database (`/{db}/…`).
    case db, doc, local, attachment, changes, blipsync, partition
    case allDocs = "all_docs", bulkDocs = "bulk_docs", bulkGet = "bulk_get", revsDiff = "revs_diff"
    case view, designInfo = "design_info", show, update, list, rewrite
    case query, index, find, explain
    // A database's maintenance endpoints (`/{db}/_compact`, …).
    case revsLimit = "revs_limit", compact, ensureFullCommit = "ensure_full_commit", purge, security
    case viewCleanup = "view_cleanup"
    /// A database's sync function and its users and roles (`/{db}/_config/sync`, `/{db}/_user/…`, `/{db}/_role/…`,
    /// `/{db}/_resync`).
    case sync

    /// The server endpoints routed by their first segment (`/_up`, `/_all_dbs`, …).
    static let serverEndpoints: [Route] = [.up, .allDbs, .dbsInfo, .uuids, .activeTasks, .metrics, .session, .replicate,
                                           .scheduler]
}

// MARK: - The route table

extension Route {
    /// The route table: what a request names, from its method and path segments alone. The dispatcher
    /// (``CouchResponder/dispatch(_:)``) sets it on the call before anything else (a request refused by
    /// authentication is counted under what it asked for) and hands the request to the handler of that route, so
    /// a metric's label and the handler that answered can't disagree.
    init(method: HTTPRequest.Method, path s: [String]) {
        guard let first = s.first else { self = .root; return }
        if first == "_utils" { self = .utils; return }
        if first.hasPrefix("_") && !SystemDatabase.isNamed(first) { self = Route.server(s); return }
        guard s.count > 1 else { self = method == .post ? .doc : .db; return }
        self = Route.database(s)
    }

    /// `/_…`: the server's endpoints and the node's (`/_node/{name}/…`).
    private static func server(_ s: [String]) -> Route {
        let name = s[0]
        if name == "_node" {
            guard s.count >= 3 else { return .unknown }
            switch s[2] {
            case "_config": return .config
            case "_stats": return .stats
            case "_system" where s.count == 3: return .system
            case "_versions" where s.count == 3: return .versions
            case "_prometheus" where s.count == 3: return .metrics
            default: return .unknown
            }
        }
        if s.count == 1 && name == "_db_updates" { return .dbUpdates }
        if s.count == 1 && name == "_membership" { return .membership }
        return Route(rawValue: name).flatMap { serverEndpoints.contains($0) ? $0 : nil } ?? .unknown
    }

    /// `/{db}/…` with at least two segments.
    private static func database(_ s: [String]) -> Route {
        let second = s[1]
        if second.hasPrefix("_design/") && s.count == 2 { return .doc }  // `_design%2F{ddoc}`
        switch second {
        case "_local/": return .other
        case "_all_docs": return .allDocs
        case "_design_docs" where s.count == 2, "_local_docs" where s.count == 2: return .allDocs
        case "_bulk_docs": return .bulkDocs
        case "_bulk_get": return .bulkGet
        case "_revs_diff": return .revsDiff
        case "_missing_revs" where s.count == 2: return .revsDiff
        case "_changes": return .changes
        case "_blipsync" where s.count == 2: return .blipsync
        case "_local": return .local
        case "_design": return design(s)
        case "_query" where s.count == 2: return .query
        case "_indexes" where s.count == 4 && (s[3] == "_pending" || s[3] == "_vectors"): return .index
        case "_indexes" where s.count <= 3: return .index
        case "_index": return .index
        case "_find" where s.count == 2: return .find
        case "_explain" where s.count == 2: return .explain
        case "_partition": return partition(s)
        case "_revs_limit": return .revsLimit
        case "_compact": return .compact
        case "_ensure_full_commit": return .ensureFullCommit
        case "_purge": return .purge
        case "_security": return .security
        case "_view_cleanup": return .viewCleanup
        case "_config" where s.count == 3 && s[2] == "sync": return .sync
        case "_user" where s.count <= 3, "_role" where s.count <= 3, "_resync" where s.count == 2: return .sync
        default:
            if second.hasPrefix("_") { return s.count == 2 ? .other : .attachment }
            return s.count == 2 ? .doc : .attachment
        }
    }

    /// `/{db}/_design/{ddoc}[/…]`.
    private static func design(_ s: [String]) -> Route {
        guard s.count >= 3 else { return .other }
        if s.count == 3 { return .doc }
        switch s[3] {
        case "_view" where s.count == 5: return .view
        case "_info" where s.count == 4: return .designInfo
        case "_show": return .show
        case "_update": return .update
        case "_list": return .list
        case "_rewrite": return .rewrite
        case "_view", "_search": return .other
        default: return .attachment
        }
    }

    /// `/{db}/_partition/{p}[/…]`.
    private static func partition(_ s: [String]) -> Route {
        guard s.count >= 4 else { return .partition }
        switch s[3] {
        case "_all_docs": return .allDocs
        case "_design": return .view
        case "_find": return .find
        case "_explain": return .explain
        default: return .partition
        }
    }
}
