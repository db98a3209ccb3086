/// What a request was routed to, as the metrics label it (`route="…"` on `settee_http_requests_total` and the
/// request-duration histogram). The dispatcher (``CouchResponder/dispatch(_:)``) and the routes it hands requests
/// to set it; the raw values are the labels, so they never change meaning.
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

    /// The server endpoints routed by their first segment (`/_up`, `/_all_dbs`, …).
    static let serverEndpoints: [Route] = [.up, .allDbs, .dbsInfo, .uuids, .activeTasks, .metrics, .session, .replicate,
                                           .scheduler]
}
