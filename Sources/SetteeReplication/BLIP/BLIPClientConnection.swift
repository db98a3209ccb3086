import Logging
import NIOCore
import NIOWebSocket
import SetteeBLIP
import SetteeCore
import Synchronization

/// One open WebSocket to a `_blipsync` endpoint: its ``BLIPSession``, the requests the server sends this side (the
/// pull's `changes`, `rev` and `norev`, and `getAttachment` for revisions being pushed), and what the replicator
/// waits for on it. When the connection ends, every wait fails with a transient error (the replication retries on a
/// new connection from its checkpoint).
final class BLIPClientConnection: Sendable {
    let session: BLIPSession
    /// The endpoint's URL without credentials, for messages.
    let peer: String
    /// The sub-protocol the server chose.
    let subprotocol: String
    /// The pull's feed and the revisions it brings.
    let pull = Mutex<PullState>(PullState())
    /// Attachment bodies of revisions being pushed, by the digest the server asks for them by (`getAttachment`).
    let outgoingAttachments = Mutex<[String: OutgoingAttachment]>([:])
    /// `maxHistory` as the server last said (how many ancestors a pushed `rev` carries).
    let maxHistory = Mutex<Int>(20)
    /// The `sequence` of the next revision offered by a push (`changes` and `rev` carry the local order).
    let pushSequence = Atomic<Int>(0)
    /// The `collection` property of this side's requests: the index `getCollections` gave a named collection.
    let collectionIndex: Int?

    /// An attachment body offered to the server, and how many pushed revisions still refer to it.
    struct OutgoingAttachment: Sendable {
        var bytes: [UInt8]
        var users: Int
    }

    private init(session: BLIPSession, peer: String, subprotocol: String, collectionIndex: Int?) {
        self.session = session
        self.peer = peer
        self.subprotocol = subprotocol
        self.collectionIndex = collectionIndex
    }

    /// Connects (the WebSocket handshake, with the settings' credentials) and starts reading.
    static func open(_ settings: BLIPClient.Settings, logger: Logger) async throws(ReplicationError) -> BLIPClientConnection {
        let headers = try await settings.headers()
        let target = WebSocketClient.Target(host: settings.host, port: settings.port, path: settings.path, tls: settings.tls,
                                            tlsHint: settings.tlsHint, headers: headers, subprotocols: BLIPClient.subprotocols,
                                            displayName: settings.displayName)
        let (channel, subprotocol) = try await WebSocketClient.connect(target)
        let session = BLIPSession(logger: logger)
        let connection = BLIPClientConnection(session: session, peer: settings.displayName, subprotocol: subprotocol,
                                              collectionIndex: settings.collection == nil ? nil : 0)
        logger.debug("BLIP: connected to \(settings.displayName) (\(subprotocol))")
        Task {
            await session.run(channel) { request in connection.handle(request) }
            connection.ended()
        }
        if let collection = settings.collection {
            // Couchbase Lite 3's first message: which collections this connection replicates.
            let name = collection.scope + "." + collection.name
            let body = JSON.object(["collections": [.string(name)], "checkpoint_ids": [""]]).serializedBytes
            let reply = try await connection.request(.request(profile: "getCollections", body: body), tagged: false)
            if let error = reply.errorInfo {
                connection.close()
                throw connection.error(error, "getCollections")
            }
            guard case .array(let answers)? = try? reply.jsonBody(), answers.count == 1, answers[0] != .null else {
                connection.close()
                throw ReplicationError(.notFound, "\(settings.displayName) does not serve the collection \(name)", status: 404)
            }
        }
        return connection
    }

    /// `message` with this connection's `collection` property, when it replicates a named collection.
    func tagged(_ message: BLIPMessage) -> BLIPMessage {
        guard let collectionIndex else { return message }
        var message = message
        message.properties["collection"] = String(collectionIndex)
        return message
    }

    var isClosed: Bool { session.isClosed }

    /// Ends the connection (its reader then fails what waits on it).
    func close() {
        session.close()
        ended()
    }

    /// Sends a request (with the connection's `collection` property unless `tagged` is false) and waits for its
    /// reply; a connection that ends first is a transient error.
    func request(_ message: BLIPMessage, tagged: Bool = true) async throws(ReplicationError) -> BLIPMessage {
        do {
            return try await session.request(tagged ? self.tagged(message) : message)
        } catch {
            throw ReplicationError(.transient, "the connection to \(peer) closed before it answered \(message.profile ?? "a request")")
        }
    }

    /// A BLIP error response to `what` as a replication error.
    func error(_ info: (domain: String, code: Int, message: String), _ what: String) -> ReplicationError {
        ReplicationError.blip(info, what, peer: peer)
    }

    // MARK: Requests from the server

    /// Dispatches one request from the server, in order of arrival. Nothing here waits on the server (a `rev` that
    /// needs its attachments fetched continues in a task of its own), so the reader keeps reading.
    private func handle(_ request: BLIPMessage) {
        switch request.profile ?? "" {
        case "changes": receiveChanges(request)
        case "rev": Task { await self.receiveRev(request) }
        case "norev": receiveNoRev(request)
        case "getAttachment": answerGetAttachment(request)
        case "proveAttachment": answerProveAttachment(request)
        default:
            guard !request.flags.contains(.noReply) else { return }
            session.send(.error(to: request.number, domain: .blip, code: 404,
                                message: "no handler for profile \(request.profile ?? "(none)")"))
        }
    }

    /// `getAttachment` for a revision being pushed: the body with that digest, if a pushed revision offered it.
    private func answerGetAttachment(_ request: BLIPMessage) {
        guard let digest = request.properties["digest"], let body = outgoingAttachments.withLock({ $0[digest]?.bytes }) else {
            session.send(.error(to: request.number, domain: .http, code: 404, message: "no attachment with that digest is being pushed"))
            return
        }
        session.send(.response(to: request.number, body: body))
    }

    /// `proveAttachment`: proves this side has an attachment by hashing it with the server's nonce.
    private func answerProveAttachment(_ request: BLIPMessage) {
        guard let digest = request.properties["digest"], let body = outgoingAttachments.withLock({ $0[digest]?.bytes }) else {
            session.send(.error(to: request.number, domain: .http, code: 404, message: "no attachment with that digest is being pushed"))
            return
        }
        session.send(.response(to: request.number, body: Array(BlobDigest.proof(nonce: request.body, data: body).utf8)))
    }

    /// The connection ended: whatever waits on it fails (transiently: a new connection resumes).
    func ended() {
        let failure = ReplicationError(.transient, "the connection to \(peer) closed")
        let (waiter, revWaiters) = pull.withLock { state -> (PullState.ChangesWaiter?, [CheckedContinuation<PullState.Arrival, any Error>]) in
            if state.ended == nil { state.ended = failure }
            defer { state.waiter = nil; state.revWaiters.removeAll() }
            return (state.waiter, Array(state.revWaiters.values))
        }
        waiter?.continuation.resume(throwing: failure)
        for continuation in revWaiters { continuation.resume(throwing: failure) }
    }
}
