public import Foundation
package import SetteeIndex

/// The implementation of a node's plain (not TLS) HTTP/1.1 connections (``ServerConfiguration/http1Channel``).
/// TLS and HTTP/2 connections always use Hummingbird's channels.
public enum HTTP1ChannelKind: String, Sendable, CaseIterable {
    /// Settee's own connection handling: NIO's request decoder, then one handler driven by a state machine that
    /// starts one task per request and writes its encoded response in one hop (the default; faster).
    case settee
    /// Hummingbird's `HTTP1Channel`, as it comes: the fallback should Settee's own show a problem.
    case hummingbird
}

/// How a Settee node serves HTTP.
public struct ServerConfiguration: Sendable {
    /// Directory holding one SQLite file per database.
    public var dataDirectory: String
    /// Address to bind. Without an admin, only loopback addresses are allowed.
    public var host: String
    /// TCP port (0 picks a free one).
    public var port: Int
    /// The server admin's name and password; nil means every request is treated as admin ("admin party")
    /// and the server binds loopback only.
    public var admin: (username: String, password: String)?
    /// Largest accepted document body (CouchDB's `max_document_size`, default 8 MiB).
    public var maxDocumentSize: Int
    /// Largest accepted request body (default 64 MiB).
    public var maxRequestSize: Int
    /// Maximum JSON nesting depth of request bodies.
    public var maxJSONDepth: Int
    /// Sync each commit to stable storage.
    public var fullSync: Bool
    /// Peer servers (root URLs, credentials allowed) this node keeps continuous push and pull replications
    /// with, for every database (`settee serve --peer`).
    public var peers: [String] = []
    /// How often the node looks for new databases to replicate with its peers.
    public var peerScanInterval: Duration = .seconds(10)
    /// Most documents in one `_bulk_docs` or `_bulk_get` request (CouchDB's `max_bulk_docs_count`, 10,000).
    public var maxBulkDocs = 10_000
    /// `[couchdb] max_partition_size`: bytes a partition of a partitioned database may hold (0: no limit).
    public var maxPartitionSize = 10 << 30
    /// `[query_server_config] query_limit`: the most rows a view or `_all_docs` query returns (nil: no limit);
    /// also the limit of a query that gives none.
    public var queryLimit: Int?
    /// `[query_server_config] partition_query_limit`: the same for partition queries.
    public var partitionQueryLimit: Int?
    /// Largest accepted attachment, bytes (inline, multipart or standalone; default 64 MiB).
    public var maxAttachmentSize = 64 << 20
    /// Most concurrent client connections; further connections wait in the accept backlog.
    public var maxConnections = 2048
    /// Seconds an idle keep-alive connection (or a client that hasn't finished sending its headers) is kept open.
    public var idleTimeout: Double = 60
    /// Seconds a `_query` request may run before it is stopped with 408 `timeout` (0: no limit). View requests are
    /// not limited: stopping one mid-way would also stop the index update it may be running.
    public var queryTimeout: Double = 60
    /// Cross-origin requests from browsers (CouchDB's `enable_cors`); nil (the default) sends no CORS headers.
    public var cors: CORSConfiguration?
    /// Authentication, password hashing, lockout and JWT settings.
    public var security = SecurityConfiguration()
    /// PEM certificate chain to serve HTTPS with (`--tls-cert`); with ``tlsKeyPath``. Nil serves plain HTTP.
    public var tlsCertificatePath: String?
    /// PEM private key of ``tlsCertificatePath`` (`--tls-key`).
    public var tlsKeyPath: String?
    /// With TLS, require every client to present a certificate that verifies against the CA certificates in this
    /// PEM file (mutual TLS); the handshake fails for anyone else. The server may then listen beyond loopback
    /// without an admin: only holders of such a certificate can connect. (`URLEndpointListener`'s
    /// `ListenerCertificateAuthenticator`.)
    public var tlsClientRootCertificatesPath: String?
    /// With TLS, also offer HTTP/2 (negotiated by ALPN; HTTP/1.1 clients are served as before) (`--http2`).
    public var http2 = false
    /// What serves plain (not TLS) HTTP/1.1 connections (`--http1-channel`): Settee's own connection handling
    /// (the default) or Hummingbird's channel.
    public var http1Channel = HTTP1ChannelKind.settee
    /// PEM CA bundle the replicator verifies HTTPS peers' certificates against (`--ca-file`), instead of the
    /// system's trust store.
    public var caFile: String?
    /// Let replications and peers send credentials over plain HTTP to non-loopback hosts
    /// (`--allow-insecure-credentials`); otherwise only a replication's own `allow_insecure_credentials` does.
    public var allowInsecureCredentials = false
    /// The node's name in `/_membership` and `/_node/{name}` (CouchDB's Erlang node name, `-name` in vm.args).
    public var nodeName = "settee@127.0.0.1"
    /// The JavaScript query servers design functions run in: their time limit (`[couchdb] os_process_timeout`),
    /// `[query_server_config] reduce_limit`, `os_process_limit` and `os_process_soft_limit`.
    package var javascript = JavaScriptEngine.Configuration()
    /// `[chttpd] secure_rewrites`: a design document's rewrite rules may not lead out of their database.
    public var secureRewrites = true
    /// Create `_users` and `_replicator` when the node starts without them, as CouchDB's single-node setup does.
    public var createSystemDatabases = true
    /// A `+` in the request path means a space (CouchDB's `[chttpd] decode_plus_to_space`, on by default); `%2B`
    /// is always a `+`.
    public var decodePlusToSpace = true
    /// Refuse anonymous requests, even to `GET /` (CouchDB's `[chttpd] require_valid_user`).
    public var requireValidUser = false
    /// Wrap JSON answers of GET requests with `callback=` in a JavaScript call (CouchDB's `[chttpd] allow_jsonp`).
    public var allowJSONP = false
    /// How `/_uuids` makes ids (`[uuids]`).
    public var uuids = UUIDSettings()
    /// Which attachments are stored gzip-compressed (`[attachments]`).
    public var attachments = AttachmentSettings()
    /// Checks a name and password that are neither a configured admin's nor a `_users` account's; a pair it
    /// accepts signs in as a server admin. What an in-process listener (`URLEndpointListener`) authenticates with.
    public var passwordAuthenticator: (@Sendable (_ username: String, _ password: String) -> Bool)?

    public init(dataDirectory: String, host: String = "127.0.0.1", port: Int = 5984,
                admin: (username: String, password: String)? = nil,
                maxDocumentSize: Int = 8 << 20, maxRequestSize: Int = 64 << 20, maxJSONDepth: Int = 128,
                fullSync: Bool = false) {
        self.dataDirectory = dataDirectory
        self.host = host
        self.port = port
        self.admin = admin
        self.maxDocumentSize = maxDocumentSize
        self.maxRequestSize = maxRequestSize
        self.maxJSONDepth = maxJSONDepth
        self.fullSync = fullSync
    }

    /// Parses `USER:PASS` (as given to `--admin` or `SETTEE_ADMIN`).
    public static func parseAdmin(_ text: String) -> (username: String, password: String)? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let user = String(text[..<colon]), pass = String(text[text.index(after: colon)...])
        guard !user.isEmpty, !pass.isEmpty else { return nil }
        return (user, pass)
    }

    /// Whether `host` is a loopback address.
    public var bindsLoopbackOnly: Bool {
        if host == "localhost" || host == "::1" { return true }
        // An IPv4 address in 127.0.0.0/8 (not a host name that merely starts with "127.").
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127"
            && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) && UInt8($0) != nil }
    }

    /// Whether the node serves HTTPS.
    public var usesTLS: Bool { tlsCertificatePath != nil || tlsKeyPath != nil }
}

/// How a node authenticates callers (see docs/security.md).
public struct SecurityConfiguration: Sendable {
    /// PBKDF2-SHA256 iterations for newly stored passwords (CouchDB 3.5's default is 600,000). Stored user
    /// documents keep their own count, so changing this only affects passwords set afterwards.
    public var pbkdf2Iterations = 600_000
    /// Lifetime of a `_session` cookie since its issue; a cookie used after 10% of it is re-issued (CouchDB: 600 s).
    public var sessionTimeout: TimeInterval = 600
    /// Failed logins for one user from one address beyond which that pair is locked out (0 disables lockout).
    public var lockoutThreshold = 5
    /// How long a locked-out (user, address) pair stays locked.
    public var lockoutDuration: TimeInterval = 300
    /// JWT bearer authentication; nil disables it.
    public var jwt: JWTConfiguration?
    /// The database holding user documents (CouchDB's `[chttpd_auth] authentication_db`, `_users`).
    public var authenticationDB = SystemDatabase.users.rawValue
    /// Marks cookies `Secure` (set when serving TLS).
    public var secureCookies = false
    /// Session cookies carry `Max-Age` (persist across browser restarts); CouchDB's `allow_persistent_cookies`.
    public var allowPersistentCookies = true
    /// With lockout on, only log (and count) what would be locked instead of refusing (`mode = warn`).
    public var lockoutWarnOnly = false
    /// Proxy authentication (`X-Auth-CouchDB-UserName`…), off unless enabled in `authentication_handlers`.
    public var proxy = ProxyAuthConfiguration()
    /// Rules a new `_users` password must meet (CouchDB's `[couch_httpd_auth] password_regexp`).
    public var passwordRequirements = PasswordRequirements.none

    public init() {}
}

/// CouchDB's `password_regexp`: an Erlang list of regular expressions, each alone or in a tuple with the reason
/// shown when a password doesn't match it (`[{".{10,}", "At least 10 characters."}, "[A-Z]+"]`).
public enum PasswordRequirements: Sendable, Equatable {
    /// No rules (the setting is absent, empty or `[]`).
    case none
    /// Each pattern must match somewhere in the password; the first that doesn't gives the reason.
    case rules([Rule])
    /// The setting is not a list of patterns: CouchDB then refuses to hash any password.
    case invalid

    public struct Rule: Sendable, Equatable {
        public var pattern: String
        public var reason: String?
        public init(pattern: String, reason: String? = nil) { self.pattern = pattern; self.reason = reason }
    }
}

/// JWT bearer tokens (`Authorization: Bearer …`) issued by an identity provider: `sub` names the user and a
/// roles claim lists their roles.
public struct JWTConfiguration: Sendable {
    /// HS256/HS384/HS512 secrets (raw bytes).
    public var hmacSecrets: [[UInt8]] = []
    /// RS256/RS384/RS512 public keys, PEM (`-----BEGIN PUBLIC KEY-----`).
    public var rsaPublicKeysPEM: [String] = []
    /// ES256/ES384/ES512 public keys, PEM (`[jwt_keys] ec:…`).
    public var ecPublicKeysPEM: [String] = []
    /// The algorithms a token may use (`[jwt_auth] allowed_algorithms`); empty allows every one a key exists for.
    public var allowedAlgorithms: [String] = []
    /// Claims that must have a given value (`[jwt_auth] required_claims = {iss, "issuer"}`).
    public var requiredClaimValues: [String: String] = [:]
    /// When set, a token's `aud` must include this value.
    public var audience: String?
    /// When set, a token's `iss` must equal this value.
    public var issuer: String?
    /// The claim holding the roles: a top-level member of that exact name, else a dotted path into the payload
    /// (CouchDB's default is `_couchdb.roles`).
    public var rolesClaim = "_couchdb.roles"
    /// Claims a token must carry (besides `sub`), e.g. `exp`.
    public var requiredClaims: [String] = ["exp"]

    public init(hmacSecrets: [[UInt8]] = [], rsaPublicKeysPEM: [String] = [], audience: String? = nil) {
        self.hmacSecrets = hmacSecrets
        self.rsaPublicKeysPEM = rsaPublicKeysPEM
        self.audience = audience
    }
}

/// Proxy authentication, as CouchDB's `proxy_authentication_handler`: a trusted proxy in front of the node names
/// the user and roles in headers, signed (when `useSecret`) with an HMAC-SHA1 of the name keyed by `secret`.
public struct ProxyAuthConfiguration: Sendable {
    /// Whether the handler is on (`authentication_handlers` lists `proxy_authentication_handler`).
    public var enabled = false
    /// Require `X-Auth-CouchDB-Token` = hex HMAC-SHA1(secret, user name).
    public var useSecret = false
    /// The shared secret for tokens (`[chttpd_auth] secret`).
    public var secret: String?
    public var userHeader = "X-Auth-CouchDB-UserName"
    public var rolesHeader = "X-Auth-CouchDB-Roles"
    public var tokenHeader = "X-Auth-CouchDB-Token"

    public init() {}
}

/// How `/_uuids` makes ids (CouchDB's `[uuids]`).
public struct UUIDSettings: Sendable {
    public enum Algorithm: String, Sendable {
        /// 128 random bits.
        case random
        /// A random 26-hex-digit prefix with a 6-digit suffix growing by a random step; a new prefix on overflow.
        case sequential
        /// 14 hex digits of microseconds since 1970, then 18 random hex digits.
        case utcRandom = "utc_random"
        /// 14 hex digits of microseconds since 1970, then `utc_id_suffix`.
        case utcID = "utc_id"
    }
    public var algorithm = Algorithm.sequential
    public var utcIDSuffix = ""
    /// Most ids one request may ask for.
    public var maxCount = 1000

    public init() {}
}

/// Which attachments are stored gzip-compressed (CouchDB's `[attachments]`).
public struct AttachmentSettings: Sendable {
    /// Content types (`text/*` matches a whole family) stored gzip-encoded.
    public var compressibleTypes = ["text/*", "application/javascript", "application/json", "application/xml"]
    /// zlib level 1–9; 0 turns compression off.
    public var compressionLevel = 8

    public init() {}

    /// Whether an attachment of this content type is stored compressed.
    public func compresses(_ contentType: String) -> Bool {
        guard compressionLevel > 0 else { return false }
        let type = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return compressibleTypes.contains { pattern in
            let p = pattern.lowercased()
            if p.hasSuffix("/*") { return type.hasPrefix(p.dropLast()) }
            return p == type
        }
    }
}
