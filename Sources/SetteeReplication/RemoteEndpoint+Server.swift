import Foundation
import NIOHTTP1
public import SetteeCore

/// Requests about the peer's server rather than one database's documents: its welcome object, its databases and
/// their `_db_updates` feed (what `--peer` follows), a database's `_security` object (which `--peer` keeps in
/// step), and endpoints for its other databases.
extension RemoteEndpoint {
    /// `GET /`: the server's welcome object (`uuid`, `version`, `vendor`).
    public func serverInfo() async throws -> JSONObject {
        let r = try await send(.GET, "", root: true)
        guard (200..<300).contains(r.status) else { throw error(for: r, "GET /") }
        return try parse(r.body).objectValue ?? [:]
    }

    /// `GET /_all_dbs` on the server.
    public func allDatabases() async throws -> [String] {
        let r = try await send(.GET, "/_all_dbs", root: true)
        guard (200..<300).contains(r.status) else { throw error(for: r, "GET /_all_dbs") }
        return (try parse(r.body).arrayValue ?? []).compactMap(\.stringValue)
    }

    /// One answer of the server's `GET /_db_updates` (CouchDB's feed of databases created, updated and deleted).
    public struct DatabaseUpdates: Sendable {
        public enum Kind: String, Sendable { case created, updated, deleted }
        /// The events, oldest first (types other than these three are left out).
        public var events: [(database: String, kind: Kind)]
        /// Where the next request starts (`since`).
        public var lastSeq: JSON
    }

    /// `GET /_db_updates` on the server (server admins only on CouchDB and Settee): with `timeout`, a long poll
    /// that answers as soon as a database changes after `since` (`"now"`: from the current end), or after
    /// `timeout` with no events; without, at once.
    public func databaseUpdates(since: JSON, timeout: Duration? = nil) async throws -> DatabaseUpdates {
        var query: [(String, String)] = [("since", since.stringValue ?? since.jsonString)]
        if let timeout {
            query.append(("feed", "longpoll"))
            query.append(("timeout", String(timeout.components.seconds * 1000)))
        }
        let r = try await send(.GET, "/_db_updates", query: query, root: true)
        guard (200..<300).contains(r.status) else { throw error(for: r, "GET /_db_updates") }
        guard case .object(let o) = try parse(r.body), let results = o["results"]?.arrayValue else {
            throw ReplicationError(.transient, "GET /_db_updates: the response has no results")
        }
        let events = results.compactMap { row -> (String, DatabaseUpdates.Kind)? in
            guard let name = row["db_name"]?.stringValue, let kind = row["type"]?.stringValue.flatMap(DatabaseUpdates.Kind.init)
            else { return nil }
            return (name, kind)
        }
        return DatabaseUpdates(events: events, lastSeq: o["last_seq"] ?? results.last?["seq"] ?? since)
    }

    /// `GET /{db}/_security`: the database's security object (`{}` on a CouchDB database that has none).
    public func securityObject() async throws -> JSONObject {
        try await jsonObject(.GET, "/_security")
    }

    /// `PUT /{db}/_security` (a database admin's request; the peer checks the object).
    public func setSecurityObject(_ object: JSONObject) async throws {
        _ = try await jsonObject(.PUT, "/_security", body: .object(object))
    }

    /// The endpoint for another database on the same server, with the same credentials.
    public func sibling(database name: String) throws -> RemoteEndpoint {
        try RemoteEndpoint(url: serverURL + "/" + Self.escapeSegment(name), authentication: authentication,
                           headers: headers, client: client, trustedRootCertificatesPath: trustedRootCertificatesPath,
                           allowInsecureCredentials: allowInsecureCredentials, clientCertificate: clientCertificate)
    }
}
