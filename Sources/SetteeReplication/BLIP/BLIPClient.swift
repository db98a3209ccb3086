import Foundation
import Logging
import NIOCore
import NIOSSL
import SetteeBLIP
import SetteeCore
import Synchronization

/// Couchbase Lite's replication protocol (BLIP over a WebSocket, `/{db}/_blipsync`) as one side of a replication:
/// what a ``RemoteEndpoint`` with a `ws://` or `wss://` URL does instead of CouchDB's HTTP calls, so the replicator
/// above (batches, checkpoints, retries, conflict resolution, filters, listeners) is the same for both protocols.
///
/// How the ``Endpoint`` calls map onto the protocol, as LiteCore's replicator speaks it:
/// - `databaseInfo` opens the connection: the WebSocket handshake is where credentials are checked (401/403/404).
/// - `localDocument`/`putLocalDocument` are `getCheckpoint`/`setCheckpoint` with the checkpoint id as `client`.
/// - Pushing to the server: `revsDiff` is a `changes` request (the server answers, per revision, `0` or the
///   ancestors it has), and `write` sends one `rev` request per revision (with `history` and `deleted`), all at once;
///   the server's answer to each says whether it stored it.
/// - Pulling from the server: the first `changes` call subscribes (`subChanges` from the checkpoint); the server then
///   sends `changes` requests, which `changes` hands out as batches and the replicator answers (through
///   ``answer(_:wanting:)``) with the revisions the local database lacks; the server sends those as `rev` requests,
///   which `fetch` collects. A one-shot replication's feed ends with the server's empty "caught up" `changes`; a
///   continuous one then subscribes again with `continuous`.
///
/// One connection serves both directions of a replicator (as in Couchbase Lite); it is opened on first use and again
/// after it drops, and ``disconnect()`` closes it when the replicator stops.
final class BLIPClient: Sendable {
    /// The sub-protocols offered, best first (Couchbase Lite 3's, then 2's).
    static let subprotocols = ["BLIP_3+CBMobile_3", "BLIP_3+CBMobile_2"]

    /// Where the endpoint is and how to reach it.
    struct Settings: Sendable {
        /// The endpoint's URL without credentials (`ws://host:port/db`).
        var displayName: String
        var databaseName: String
        var host: String
        var port: Int
        /// `/{db}/_blipsync` (or `/{db}.{scope}.{collection}/_blipsync`), percent-encoded.
        var path: String
        var tls: NIOSSLContext?
        /// How `tls` verifies the server, for a TLS error's message.
        var tlsHint: String
        /// The headers of the handshake: the endpoint's own, and its credentials (signing in first for a session).
        var headers: @Sendable () async throws(ReplicationError) -> [(String, String)]
        /// A named collection (scope, name), asked for with `getCollections` and named by its index (`collection`)
        /// in every message, as Couchbase Lite 3 does; nil for the default collection (no `getCollections`).
        var collection: (scope: String, name: String)?
    }

    /// What identifies the endpoint in a replication id: its URL, and the named collection if any.
    var identity: String {
        settings.collection.map { settings.displayName + "#" + $0.scope + "." + $0.name } ?? settings.displayName
    }

    let settings: Settings
    let logger: Logger
    private let state = Mutex<State>(State())

    private struct State {
        var connection: BLIPClientConnection?
        var connecting: Task<BLIPClientConnection, any Error>?
        /// Bumped by ``disconnect()``, so a connection opening meanwhile is closed rather than kept.
        var generation = 0
    }

    init(settings: Settings, logger: Logger = Logger(label: "settee.replication.blip")) {
        self.settings = settings
        self.logger = logger
    }

    // MARK: The connection

    /// The open connection, opening one if there is none (concurrent callers share one attempt).
    func connection() async throws(ReplicationError) -> BLIPClientConnection {
        enum Found { case open(BLIPClientConnection), opening(Task<BLIPClientConnection, any Error>, generation: Int) }
        let found: Found = state.withLock { state in
            if let open = state.connection, !open.isClosed { return .open(open) }
            state.connection = nil
            if let pending = state.connecting { return .opening(pending, generation: state.generation) }
            let settings = self.settings, logger = self.logger
            let task = Task { () throws -> BLIPClientConnection in
                try await BLIPClientConnection.open(settings, logger: logger)
            }
            state.connecting = task
            return .opening(task, generation: state.generation)
        }
        let task: Task<BLIPClientConnection, any Error>, generation: Int
        switch found {
        case .open(let connection): return connection
        case .opening(let pending, let g): (task, generation) = (pending, g)
        }
        do {
            let connection = try await task.value
            let keep = state.withLock { state in
                if state.connecting == task { state.connecting = nil }
                guard state.generation == generation else { return false }
                if state.connection == nil || state.connection!.isClosed { state.connection = connection }
                return state.connection === connection
            }
            guard keep else {
                connection.close()
                if Task.isCancelled { throw ReplicationError(.cancelled, "stopped") }
                return try await self.connection()
            }
            return connection
        } catch {
            state.withLock { state in if state.connecting == task { state.connecting = nil } }
            if Task.isCancelled { throw ReplicationError(.cancelled, "stopped") }
            throw ReplicationError.from(error)
        }
    }

    /// Closes the connection (the replicator stopped); the next call opens a new one.
    func disconnect() {
        let open = state.withLock { state in
            state.generation += 1
            defer { state.connection = nil }
            return state.connection
        }
        open?.close()
    }

    /// Closes `connection` if it is still the current one (its pull subscription can't continue).
    func drop(_ connection: BLIPClientConnection) {
        state.withLock { state in if state.connection === connection { state.connection = nil } }
        connection.close()
    }

    // MARK: Endpoint calls

    /// Opens the connection: the handshake is the protocol's only way to learn that the database exists and the
    /// credentials are good.
    func databaseInfo() async throws(ReplicationError) -> EndpointDatabaseInfo {
        _ = try await connection()
        return EndpointDatabaseInfo(name: settings.databaseName, updateSeq: .int(0))
    }

    /// `getCheckpoint`: the checkpoint saved under `id` (with its `_rev`), or nil.
    func localDocument(id: String) async throws(ReplicationError) -> JSONObject? {
        let connection = try await self.connection()
        let reply = try await connection.request(.request(profile: "getCheckpoint", properties: ["client": id]))
        if let error = reply.errorInfo {
            if error.code == 404 { return nil }
            throw connection.error(error, "getCheckpoint")
        }
        guard case .object(var body)? = try? reply.jsonBody() else { return [:] }
        if let rev = reply.properties["rev"] { body["_rev"] = .string(rev) }
        return body
    }

    /// `setCheckpoint`: saves the checkpoint `body` (whose `_rev` is the revision it replaces) and returns its new
    /// revision. A stale revision fails with status 409.
    func putLocalDocument(id: String, body: JSONObject) async throws(ReplicationError) -> String {
        var body = body
        var properties: BLIPProperties = ["client": id]
        if let rev = body.removeValue(forKey: "_rev")?.stringValue { properties["rev"] = rev }
        let connection = try await self.connection()
        let reply = try await connection.request(.request(profile: "setCheckpoint", properties: properties,
                                                          body: JSON.object(body).serializedBytes))
        if let error = reply.errorInfo { throw connection.error(error, "setCheckpoint") }
        guard let rev = reply.properties["rev"] else {
            throw ReplicationError(.transient, "setCheckpoint: \(settings.displayName) answered without a `rev`")
        }
        return rev
    }
}

extension ReplicationError {
    /// A BLIP error response as a replication error: Sync Gateway answers in the `HTTP` domain with HTTP statuses.
    static func blip(_ error: (domain: String, code: Int, message: String), _ what: String, peer: String) -> ReplicationError {
        .peer(status: error.code, "\(what) → \(error.domain) \(error.code) \(error.message) (\(peer))")
    }
}
