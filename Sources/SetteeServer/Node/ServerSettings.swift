import Foundation

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
/// | `settee` | `query_timeout`, `idle_timeout` (start-up only), `max_json_depth`, `full_sync` (start-up only) |
enum ServerSettings {
    static func sections(of c: ServerConfiguration) -> [String: [String: String]] {
        var s: [String: [String: String]] = [:]
        s["couchdb"] = [
            "max_document_size": String(c.maxDocumentSize),
            "max_attachment_size": String(c.maxAttachmentSize),
            "max_bulk_docs_count": String(c.maxBulkDocs),
            "max_bulk_get_count": String(c.maxBulkDocs),
            "single_node": "true",
            "default_security": "admin_only",
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
            "authentication_db": "_users",
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
        if let v = auth("timeout").flatMap(Double.init), v > 0 { c.security.sessionTimeout = v }
        if let v = auth("iterations").flatMap(Int.init), (1...10_000_000).contains(v) { c.security.pbkdf2Iterations = v }
        if let v = auth("allow_persistent_cookies").flatMap(Bool.init) { c.security.allowPersistentCookies = v }
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
