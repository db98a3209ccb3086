import Foundation
import SetteeCore
import SetteeStore

/// The settings Settee uses, under CouchDB's section and key names: how a ``ServerConfiguration`` is shown in
/// `/_node/{node}/_config` and how a change there is applied to it. A value that doesn't parse leaves the start-up
/// setting in force (CouchDB likewise falls back to its default for a malformed value).
///
/// | section | keys |
/// |---|---|
/// | `couchdb` | `max_document_size`, `max_attachment_size`, `max_bulk_docs_count`, `max_bulk_get_count`, `database_dir`, `uuid`, `single_node` |
/// | `chttpd` | `port`, `bind_address`, `max_http_request_size`, `require_valid_user`, `enable_cors`, `allow_jsonp`, `max_connections` (start-up only) |
/// | `chttpd_auth` (or `couch_httpd_auth`) | `timeout`, `iterations`, `allow_persistent_cookies`, `authentication_db`, `proxy_use_secret`, `secret`, `x_auth_username`, `x_auth_roles`, `x_auth_token` |
/// | `chttpd_auth_lockout` | `mode` (`enforce`, `warn`, `off`), `threshold`, `max_lifetime` (milliseconds) |
/// | `cors` | `origins`, `credentials`, `methods`, `headers`, `max_age` |
/// | `uuids` | `algorithm` (`random`, `sequential`, `utc_random`, `utc_id`), `utc_id_suffix`, `max_count` |
/// | `attachments` | `compressible_types`, `compression_level` |
/// | `couchdb` / `query_server_config` | `os_process_timeout` (ms), `max_partition_size`; `reduce_limit`, `os_process_limit`, `os_process_soft_limit` (JavaScript), `query_limit`, `partition_query_limit` |
/// | `replicator` | `max_jobs`, `max_churn`, `interval` (ms): the replication scheduler (live) |
/// | `settee` | `query_timeout`, `idle_timeout` (start-up only), `max_json_depth`, `full_sync` (start-up only) |
enum ServerSettings {
    static func sections(of c: ServerConfiguration) -> [String: [String: String]] {
        var s: [String: [String: String]] = [:]
        s["couchdb"] = [
            "max_document_size": String(c.maxDocumentSize),
            "max_attachment_size": String(c.maxAttachmentSize),
            "max_bulk_docs_count": String(c.maxBulkDocs),
            "max_bulk_get_count": String(c.maxBulkDocs),
            "max_partition_size": String(c.maxPartitionSize),
            "single_node": "true",
            "max_dbs_open": String(OpenPools.defaultLimit),
            "default_security": "admin_only",
            "os_process_timeout": String(c.javascript.timeout.components.seconds * 1000
                                         + c.javascript.timeout.components.attoseconds / 1_000_000_000_000_000),
        ]
        s["replicator"] = ["max_jobs": "500", "max_churn": "20", "interval": "60000"]
        s["couch_peruser"] = ["enable": "false", "delete_dbs": "false", "q": "1", "database_prefix": "userdb-"]
        s["query_server_config"] = [
            "reduce_limit": String(c.javascript.reduceLimit),
            "os_process_limit": String(c.javascript.maxProcesses),
            "os_process_soft_limit": String(c.javascript.idleProcesses),
            "query_limit": c.queryLimit.map(String.init) ?? "infinity",
            "partition_query_limit": c.partitionQueryLimit.map(String.init) ?? "infinity",
        ]
        s["chttpd"] = [
            "port": String(c.port),
            "bind_address": c.host,
            "max_http_request_size": String(c.maxRequestSize),
            "require_valid_user": String(c.requireValidUser),
            "enable_cors": String(c.cors != nil),
            "allow_jsonp": String(c.allowJSONP),
            "decode_plus_to_space": String(c.decodePlusToSpace),
            "max_connections": String(c.maxConnections),
            "authentication_handlers": "{chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}",
        ]
        let security = c.security
        s["chttpd_auth"] = [
            "timeout": String(Int(security.sessionTimeout)),
            "iterations": String(security.pbkdf2Iterations),
            "pbkdf2_prf": "sha256",
            "allow_persistent_cookies": String(security.allowPersistentCookies),
            "authentication_db": security.authenticationDB,
            "proxy_use_secret": String(security.proxy.useSecret),
            "x_auth_username": security.proxy.userHeader,
            "x_auth_roles": security.proxy.rolesHeader,
            "x_auth_token": security.proxy.tokenHeader,
        ]
        s["chttpd_auth_lockout"] = [
            "mode": security.lockoutThreshold > 0 ? "enforce" : "off",
            "threshold": String(max(security.lockoutThreshold, 0)),
            "max_lifetime": String(Int(security.lockoutDuration * 1000)),
        ]
        if let cors = c.cors {
            s["cors"] = [
                "origins": cors.origins.joined(separator: ", "), "credentials": String(cors.credentials),
                "methods": cors.methods.joined(separator: ", "), "headers": cors.headers.joined(separator: ", "),
                "max_age": String(cors.maxAge),
            ]
        }
        s["uuids"] = ["algorithm": c.uuids.algorithm.rawValue, "max_count": String(c.uuids.maxCount)]
        if !c.uuids.utcIDSuffix.isEmpty { s["uuids"]?["utc_id_suffix"] = c.uuids.utcIDSuffix }
        s["attachments"] = [
            "compressible_types": c.attachments.compressibleTypes.joined(separator: ", "),
            "compression_level": String(c.attachments.compressionLevel),
        ]
        s["settee"] = [
            "query_timeout": String(c.queryTimeout), "idle_timeout": String(c.idleTimeout),
            "max_json_depth": String(c.maxJSONDepth), "full_sync": String(c.fullSync),
        ]
        s["log"] = ["level": "info"]
        return s
    }

    /// JWT settings from CouchDB's `[jwt_keys]` (`hmac:KID` base64 secrets, `rsa:KID` and `ec:KID` PEM public keys
    /// with `\n` for newlines) and `[jwt_auth]` (`allowed_algorithms`, `required_claims` as `exp, iat` or
    /// `{iss, "value"}`, `roles_claim_path`/`roles_claim_name`), on top of the start-up ones; nil when neither
    /// section says anything.
    static func jwtConfiguration(_ s: [String: [String: String]], base: JWTConfiguration?) -> JWTConfiguration? {
        let keys = s["jwt_keys"] ?? [:], auth = s["jwt_auth"] ?? [:]
        guard !keys.isEmpty || !auth.isEmpty else { return nil }
        var jwt = base ?? JWTConfiguration()
        if base == nil { jwt.requiredClaims = [] }
        for (name, value) in keys.sorted(by: { $0.key < $1.key }) {
            let pem = value.replacingOccurrences(of: "\\n", with: "\n")
            if name.hasPrefix("hmac:"), let secret = Base64.decode(value.trimmingCharacters(in: .whitespaces)) {
                jwt.hmacSecrets.append(secret)
            } else if name.hasPrefix("rsa:") {
                jwt.rsaPublicKeysPEM.append(pem)
            } else if name.hasPrefix("ec:") {
                jwt.ecPublicKeysPEM.append(pem)
            }
        }
        if let algs = auth["allowed_algorithms"] {
            jwt.allowedAlgorithms = algs.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        if let required = auth["required_claims"] {
            // Top-level items: a bare claim name, or `{name, "value"}`.
            var depth = 0, item = ""
            var items: [String] = []
            for ch in required {
                if ch == "{" { depth += 1 } else if ch == "}" { depth -= 1 }
                if ch == "," && depth == 0 { items.append(item); item = "" } else { item.append(ch) }
            }
            items.append(item)
            for raw in items.map({ $0.trimmingCharacters(in: .whitespaces) }) where !raw.isEmpty {
                if raw.hasPrefix("{"), raw.hasSuffix("}") {
                    let inner = raw.dropFirst().dropLast().split(separator: ",", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                    guard inner.count == 2 else { continue }
                    let value = inner[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"<>"))
                    jwt.requiredClaimValues[inner[0]] = value
                    if !jwt.requiredClaims.contains(inner[0]) { jwt.requiredClaims.append(inner[0]) }
                } else if !jwt.requiredClaims.contains(raw) {
                    jwt.requiredClaims.append(raw)
                }
            }
        }
        if let path = auth["roles_claim_path"] ?? auth["roles_claim_name"], !path.isEmpty { jwt.rolesClaim = path }
        return jwt
    }

    /// The start-up configuration with the config's values applied.
    static func apply(_ s: [String: [String: String]], to startup: ServerConfiguration) -> ServerConfiguration {
        var c = startup
        func value(_ section: String, _ key: String) -> String? { s[section]?[key] }
        func int(_ section: String, _ key: String) -> Int? {
            guard let v = value(section, key)?.trimmingCharacters(in: .whitespaces) else { return nil }
            if v == "infinity" { return Int.max }
            return Int(v)
        }
        func bool(_ section: String, _ key: String) -> Bool? {
            switch value(section, key)?.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true"?: return true
            case "false"?: return false
            default: return nil
            }
        }
        func list(_ text: String) -> [String] {
            text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        /// `chttpd_auth` first, then the older `couch_httpd_auth` (CouchDB 3 reads both).
        func auth(_ key: String) -> String? { value("chttpd_auth", key) ?? value("couch_httpd_auth", key) }

        if let v = int("couchdb", "max_document_size"), v > 0 { c.maxDocumentSize = v }
        if let v = int("couchdb", "max_attachment_size"), v > 0 { c.maxAttachmentSize = v }
        if let v = int("couchdb", "max_bulk_docs_count"), v > 0 { c.maxBulkDocs = v }
        if let v = int("chttpd", "max_http_request_size"), v > 0 { c.maxRequestSize = v }
        if let v = bool("chttpd", "require_valid_user") { c.requireValidUser = v }
        if let v = bool("chttpd", "allow_jsonp") { c.allowJSONP = v }
        if let v = bool("chttpd", "decode_plus_to_space") { c.decodePlusToSpace = v }
        if let v = bool("chttpd", "secure_rewrites") { c.secureRewrites = v }
        if let v = auth("timeout").flatMap(Double.init), v > 0 { c.security.sessionTimeout = v }
        if let v = auth("iterations").flatMap(Int.init), (1...10_000_000).contains(v) { c.security.pbkdf2Iterations = v }
        if let v = auth("allow_persistent_cookies").flatMap(Bool.init) { c.security.allowPersistentCookies = v }
        if let v = auth("authentication_db"), !v.isEmpty { c.security.authenticationDB = v }
        if let v = int("couchdb", "os_process_timeout"), v > 0 { c.javascript.timeout = .milliseconds(v) }
        if let v = value("query_server_config", "reduce_limit") { c.javascript.reduceLimit = v.lowercased() != "false" }
        if let v = int("query_server_config", "os_process_limit"), v > 0 { c.javascript.maxProcesses = min(v, 64) }
        if let v = int("query_server_config", "os_process_soft_limit"), v >= 0 { c.javascript.idleProcesses = min(v, 64) }
        if let v = int("query_server_config", "query_limit"), v >= 0 { c.queryLimit = v == Int.max ? nil : v }
        if let v = int("query_server_config", "partition_query_limit"), v >= 0 { c.partitionQueryLimit = v == Int.max ? nil : v }
        if let v = int("couchdb", "max_partition_size") { c.maxPartitionSize = v }
        if let v = auth("password_regexp") { c.security.passwordRequirements = ErlangTermList.passwordRequirements(v) }
        if let v = auth("proxy_use_secret").flatMap(Bool.init) { c.security.proxy.useSecret = v }
        if let v = auth("secret"), !v.isEmpty { c.security.proxy.secret = v }
        if let v = auth("x_auth_username"), !v.isEmpty { c.security.proxy.userHeader = v }
        if let v = auth("x_auth_roles"), !v.isEmpty { c.security.proxy.rolesHeader = v }
        if let v = auth("x_auth_token"), !v.isEmpty { c.security.proxy.tokenHeader = v }
        let handlers = (value("chttpd", "authentication_handlers") ?? "") + (value("httpd", "authentication_handlers") ?? "")
        c.security.proxy.enabled = handlers.contains("proxy_authentication_handler")
        switch value("chttpd_auth_lockout", "mode") {
        case "off"?: c.security.lockoutThreshold = 0
        case "warn"?: c.security.lockoutWarnOnly = true
        case "enforce"?: c.security.lockoutWarnOnly = false
        default: break
        }
        if value("chttpd_auth_lockout", "mode") != "off", let v = int("chttpd_auth_lockout", "threshold"), v >= 0 {
            c.security.lockoutThreshold = v
        }
        if let v = int("chttpd_auth_lockout", "max_lifetime"), v > 0 { c.security.lockoutDuration = Double(v) / 1000 }

        if let enable = bool("chttpd", "enable_cors") {
            if enable, let origins = value("cors", "origins") {
                var cors = c.cors ?? CORSConfiguration(origins: [])
                cors.origins = list(origins)
                if let v = bool("cors", "credentials") { cors.credentials = v }
                if let v = value("cors", "methods") { cors.methods = list(v).map { $0.uppercased() } }
                if let v = value("cors", "headers") { cors.headers = list(v).map { $0.lowercased() } }
                if let v = int("cors", "max_age"), v >= 0 { cors.maxAge = v }
                c.cors = cors
            } else if !enable {
                c.cors = nil
            }
        }
        if let jwt = jwtConfiguration(s, base: c.security.jwt) { c.security.jwt = jwt }
        if let v = value("uuids", "algorithm").flatMap(UUIDSettings.Algorithm.init(rawValue:)) { c.uuids.algorithm = v }
        c.uuids.utcIDSuffix = value("uuids", "utc_id_suffix") ?? ""
        if let v = int("uuids", "max_count"), v > 0 { c.uuids.maxCount = v }
        if let v = value("attachments", "compressible_types") { c.attachments.compressibleTypes = list(v) }
        if let v = int("attachments", "compression_level"), (0...9).contains(v) { c.attachments.compressionLevel = v }
        if let v = value("settee", "query_timeout").flatMap(Double.init), v >= 0 { c.queryTimeout = v }
        if let v = int("settee", "max_json_depth"), v > 0 { c.maxJSONDepth = v }
        return c
    }
}
