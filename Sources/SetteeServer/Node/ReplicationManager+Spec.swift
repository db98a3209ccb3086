import Foundation
import Logging
import SetteeCore
import SetteeIndex
import SetteeReplication
import SetteeStore
import Synchronization

/// What a replication is: its spec, parsed from a `_replicate` body or a `_replicator` document as CouchDB does,
/// and the endpoints and options it becomes.
extension ReplicationManager {
    /// What a job replicates, normalized from a `_replicate` body or a `_replicator` document.
    struct Spec: Sendable {
        var source: JSON
        var target: JSON
        var continuous = false
        var createTarget = false
        /// `create_target_params`: how a created target is made (`{"partitioned": true}`), as query parameters.
        var createTargetParameters: [(String, String)] = []
        var documentIDs: [String]?
        var selector: JSON?
        /// `filter: "ddoc/name"` and its `query_params`; `filterSource` is the function's code when it was read.
        var filter: String?
        var queryParams: [String: String] = [:]
        var filterSource: String?
        /// `since_seq`: where a replication without checkpoints starts.
        var sinceSequence: JSON?
        /// `allow_insecure_credentials`: credentials may go over plain HTTP to a non-loopback host.
        var allowInsecureCredentials = false
        /// On whose behalf the replication writes into a local database (CouchDB's replication `user_ctx`): the
        /// requester of `_replicate`, a `_replicator` document's `user_ctx`, or the node itself. The target's
        /// write rules (``WriteRules``) judge every replicated revision as this user's.
        var writer: WriteContext = .serverAdmin

        /// Compared to notice that a `_replicator` document's replication changed.
        var fingerprint: String {
            var o: JSONObject = ["source": source, "target": target, "continuous": .bool(continuous),
                                 "create_target": .bool(createTarget)]
            if !createTargetParameters.isEmpty {
                o["create_target_params"] = .object(JSONObject(createTargetParameters.map { ($0.0, JSON.string($0.1)) }))
            }
            if let documentIDs { o["doc_ids"] = .array(documentIDs.map(JSON.string)) }
            if let sinceSequence { o["since_seq"] = sinceSequence }
            if let selector { o["selector"] = selector }
            if let filter {
                o["filter"] = .string(filter)
                o["query_params"] = .object(JSONObject(queryParams.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))
            }
            if allowInsecureCredentials { o["allow_insecure_credentials"] = true }
            if writer != .serverAdmin { o["user_ctx"] = writer.json }
            return JSON.object(o).jsonString
        }
    }

    // MARK: Specs and endpoints

    /// Parses a `_replicate` body or `_replicator` document.
    static func spec(_ body: JSONObject) throws -> Spec {
        guard let source = body["source"], source.stringValue != nil || source.objectValue != nil,
              let target = body["target"], target.stringValue != nil || target.objectValue != nil
        else { throw CouchError.badRequest("Replication needs `source` and `target` (database names or URLs)") }
        var spec = Spec(source: source, target: target)
        for flag in ["continuous", "create_target", "cancel", "allow_insecure_credentials"] {
            if let v = body[flag], !v.isNull, v.boolValue == nil {
                throw CouchError.badRequest("`\(flag)` must be true or false")
            }
        }
        spec.continuous = body["continuous"]?.boolValue ?? false
        spec.createTarget = body["create_target"]?.boolValue ?? false
        switch body["create_target_params"] {
        case nil, .null?: break
        case .object(let params)?:
            spec.createTargetParameters = params.map { ($0.key, $0.value.stringValue ?? $0.value.jsonString) }
            // (Checked here for a local target as `PUT /{db}` checks it for a remote one.)
            if let p = spec.createTargetParameters.first(where: { $0.0 == "partitioned" }), !["true", "false"].contains(p.1) {
                throw CouchError.badRequest("Invalid `partitioned` parameter")
            }
        default: throw CouchError.badRequest("`create_target_params` must be an object")
        }
        spec.allowInsecureCredentials = body["allow_insecure_credentials"]?.boolValue ?? false
        switch body["user_ctx"] {
        case nil, .null?: break
        case .object(let ctx)?:
            guard ctx["name"].map({ $0.isNull || $0.stringValue != nil }) ?? true,
                  let roles = (ctx["roles"] ?? .array([])).arrayValue, roles.allSatisfy({ $0.stringValue != nil }) else {
                throw CouchError.badRequest("`user_ctx` must have a string `name` and an array of string `roles`")
            }
            spec.writer = WriteContext(name: ctx["name"]?.stringValue, roles: roles.compactMap(\.stringValue))
        default: throw CouchError.badRequest("`user_ctx` must be an object")
        }
        if let ids = body["doc_ids"], !ids.isNull {
            guard let list = ids.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw CouchError.badRequest("`doc_ids` must be an array of strings")
            }
            // As CouchDB's replicator: ids are URL-unquoted (`_design%2Ffoo` is `_design/foo`), sorted, deduplicated.
            let ids = list.compactMap(\.stringValue).map { $0.removingPercentEncoding ?? $0 }
            spec.documentIDs = Array(Set(ids)).sorted()
        }
        if let selector = body["selector"], !selector.isNull {
            guard selector.objectValue != nil else { throw CouchError.badRequest("`selector` must be a JSON object") }
            do { _ = try MangoSelector(selector) } catch { throw CouchError.badRequest("Invalid selector: \(error)") }
            spec.selector = selector
        }
        if let since = body["since_seq"], !since.isNull { spec.sinceSequence = since }
        if let filter = body["filter"]?.stringValue, filter != "_doc_ids", filter != "_selector" {
            guard filter.split(separator: "/").count == 2 else {
                throw CouchError.badRequest("`filter` must be of the form `designname/filtername`")
            }
            spec.filter = filter
            switch body["query_params"] {
            case nil, .null?: break
            case .object(let params)?:
                for (k, v) in params { spec.queryParams[k] = v.stringValue ?? v.jsonString }
            default: throw CouchError.badRequest("`query_params` must be an object")
            }
        }
        return spec
    }

    /// A database name (this node) or a URL (any CouchDB-compatible server), as CouchDB accepts them: a string,
    /// or `{"url": …, "headers": {…}, "auth": {"basic": {"username", "password"}}}`.
    /// Remote endpoints verify HTTPS peers against the node's `--ca-file` (if any) and refuse to send credentials
    /// over plain HTTP to a non-loopback host unless the node (`--allow-insecure-credentials`) or the replication
    /// (`allow_insecure_credentials`) allows it.
    func endpoint(_ value: JSON, create: Bool, creationParameters: [(String, String)] = [],
                  allowInsecureCredentials: Bool = false, writer: WriteContext) throws -> any Endpoint {
        var url = value.stringValue
        var headers: [(String, String)] = []
        var auth: RemoteEndpoint.Authentication?
        if case .object(let o) = value {
            url = o["url"]?.stringValue
            for (k, v) in o["headers"]?.objectValue ?? [:] { if let s = v.stringValue { headers.append((k, s)) } }
            if let basic = o["auth"]?["basic"]?.objectValue, let user = basic["username"]?.stringValue {
                auth = .basic(user: user, password: basic["password"]?.stringValue ?? "")
            }
        }
        guard let url, !url.isEmpty else { throw CouchError.badRequest("Endpoint needs a `url`") }
        if url.contains("://") {
            do {
                var remote = try RemoteEndpoint(url: url, authentication: auth, headers: headers,
                                                trustedRootCertificatesPath: node.configuration.caFile,
                                                allowInsecureCredentials: allowInsecureCredentials
                                                    || node.configuration.allowInsecureCredentials)
                remote.creationParameters = creationParameters
                return remote
            } catch let e as ReplicationError {
                throw CouchError.badRequest(e.message)
            }
        }
        let keyspace = try Keyspace(url)
        if create && !Database.exists(name: keyspace.database, inDirectory: node.configuration.dataDirectory) {
            let partitioned = creationParameters.contains { $0.0 == "partitioned" && $0.1 == "true" }
            _ = try? node.createDatabase(keyspace.database, partitioned: partitioned)
        }
        do {
            let (_, collection) = try keyspace.open(node)
            // Size limits, `_users` rules and validate_doc_update: the database's own write rules (``WriteRules``).
            var local = LocalEndpoint(collection: collection)
            local.writeContext = writer
            local.filterEvaluator = Self.filterEvaluator
            local.selectorMatcher = { ViewCollator.matches($0, $1) }
            return local
        } catch let e as SetteeError where e.code == .notFound {
            throw CouchError(.notFound, "db_not_found", "could not open \(url)")
        }
    }

    func options(_ spec: Spec) -> ReplicationOptions {
        var o = ReplicationOptions()
        o.metricsFactory = node.metrics.factory
        o.continuous = spec.continuous
        o.createTarget = spec.createTarget
        o.documentIDs = spec.documentIDs
        o.selector = spec.selector
        o.sinceSequence = spec.sinceSequence
        o.filter = spec.filter
        o.queryParams = spec.queryParams
        o.filterSource = spec.filterSource
        return o
    }

    /// Runs a local source's filter function for the replicator (`filter: "ddoc/name"`), `req.query` being the
    /// replication's `query_params`.
    static let filterEvaluator: LocalEndpoint.FilterEvaluator = { collection, filter, params, document in
        var query = JSONObject()
        for (k, v) in params.sorted(by: { $0.key < $1.key }) { query[k] = .string(v) }
        let request: JSON = ["query": .object(query), "method": "GET", "headers": [:], "body": "undefined",
                             "userCtx": ["db": .string(collection.database.name), "name": nil, "roles": ["_admin"]],
                             "info": ["db_name": .string(collection.database.name)], "form": [:], "cookie": [:]]
        return try JavaScriptFilter.resolve(filter, view: false, collection: collection, request: request).passes(document)
    }

    /// The source's filter function code, to tell a replication with an edited filter from the one before it.
    static func filterSource(_ spec: Spec, _ source: any Endpoint) async -> String? {
        guard let filter = spec.filter else { return nil }
        let parts = filter.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return nil }
        var ddoc: JSONObject?
        if let local = source as? LocalEndpoint {
            ddoc = try? local.collection.record(id: "_design/" + parts[0]).flatMap { r in
                r.deleted ? nil : (try? JSON.parse(r.body))?.objectValue
            }
        } else if let remote = source as? RemoteEndpoint {
            ddoc = try? await remote.document(id: "_design/" + parts[0])
        }
        return ddoc?["filters"]?[parts[1]]?.stringValue
    }

    static func suffix(_ spec: Spec) -> String {
        (spec.continuous ? "+continuous" : "") + (spec.createTarget ? "+create_target" : "")
    }
}
