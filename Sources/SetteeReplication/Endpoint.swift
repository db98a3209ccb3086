public import SetteeCore
import Foundation

/// One side of a replication: a database the replicator reads changes and revisions from, or writes
/// revisions to, in the terms of the CouchDB replication protocol.
///
/// Two implementations ship: ``LocalEndpoint`` (a Settee collection in this process, no sockets) and
/// ``RemoteEndpoint`` (any CouchDB-compatible server over HTTP: Settee, Apache CouchDB, PouchDB Server).
/// ``FaultInjectingEndpoint`` wraps either to exercise the replicator's error paths.
///
/// Every call fails with a ``ReplicationError``: what the peer answered (its kind says whether a retry may help), or
/// `.local` when this side's store failed.
public protocol Endpoint: Sendable {
    /// What identifies this database across runs (a URL without credentials, or a local database's uuid and
    /// collection). Part of the replication id, so it must not change between runs.
    var identity: String { get }

    /// A human-readable name without credentials, for status and `_active_tasks`.
    var displayName: String { get }

    /// `GET /{db}`: the database's update sequence and counts.
    /// - Throws: ``ReplicationError`` `.notFound` when the database does not exist.
    func databaseInfo() async throws(ReplicationError) -> EndpointDatabaseInfo

    /// `PUT /{db}`: creates the database (`create_target`). Succeeds if it already exists.
    func createDatabase() async throws(ReplicationError)

    /// `GET|POST /{db}/_changes?style=all_docs`: the next batch of changes after `since`.
    /// With `.longpoll` the call waits (up to the timeout) when there is nothing new.
    func changes(_ request: ChangesRequest) async throws(ReplicationError) -> ChangesBatch

    /// `POST /{db}/_revs_diff`: which of the given revisions this database lacks. Ids with nothing missing
    /// are absent from the result.
    func revsDiff(_ revisions: [(id: String, revs: [RevID])]) async throws(ReplicationError) -> [String: RevTree.RevsDiff]

    /// `POST /{db}/_bulk_get?revs=true&latest=true&attachments=true` (or `open_revs` GETs where a peer lacks
    /// `_bulk_get`): the requested revisions with their ancestry and the attachment bodies newer than
    /// `attsSince`. Revisions the database no longer has are left out.
    func fetch(_ requests: [FetchRequest]) async throws(ReplicationError) -> [ReplicatedRevision]

    /// `POST /{db}/_bulk_docs` with `new_edits: false`: stores revisions with their history as given.
    /// - Returns: the documents that failed (403 forbidden, 409, missing attachment stubs…); the rest are stored.
    func write(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [DocumentFailure]

    /// `GET /{db}/_local/{id}`: a checkpoint document (with `_rev`), or nil when there is none.
    func localDocument(id: String) async throws(ReplicationError) -> JSONObject?

    /// `PUT /{db}/_local/{id}`: saves a checkpoint document; `body["_rev"]` must be the current revision.
    /// - Returns: the new revision.
    func putLocalDocument(id: String, body: JSONObject) async throws(ReplicationError) -> String

    /// `POST /{db}/_ensure_full_commit`: makes what was written durable before a checkpoint records it.
    func ensureFullCommit() async throws(ReplicationError)
}

/// What ``Endpoint/databaseInfo()`` reports.
public struct EndpointDatabaseInfo: Sendable {
    /// The database's name on its server.
    public var name: String
    /// The current update sequence (opaque: an integer for Settee, a string for CouchDB 2+).
    public var updateSeq: JSON
    /// Live documents.
    public var docCount: Int?
    /// The server's `instance_start_time`, when reported.
    public var instanceStartTime: String?

    public init(name: String, updateSeq: JSON, docCount: Int? = nil, instanceStartTime: String? = nil) {
        self.name = name
        self.updateSeq = updateSeq
        self.docCount = docCount
        self.instanceStartTime = instanceStartTime
    }
}

/// A `_changes` request as the replicator makes it (always `style=all_docs`).
public struct ChangesRequest: Sendable {
    /// How to wait when nothing is new.
    public enum Feed: Sendable, Equatable {
        /// Return at once.
        case normal
        /// Wait until a change arrives or `timeout` passes; `heartbeat` keeps an HTTP connection alive.
        case longpoll(timeout: Duration, heartbeat: Duration)
    }

    /// The sequence to start after (opaque; `0` for the beginning).
    public var since: JSON
    /// The most rows to return.
    public var limit: Int
    public var feed: Feed
    /// `filter=_doc_ids`: only these documents.
    public var documentIDs: [String]?
    /// `filter=_selector`: only documents matching this Mango selector.
    public var selector: JSON?
    /// `filter=ddoc/name`: a design document's filter function, given `queryParams` as `req.query`.
    public var filter: String?
    public var queryParams: [String: String] = [:]

    public init(since: JSON, limit: Int, feed: Feed = .normal, documentIDs: [String]? = nil, selector: JSON? = nil,
                filter: String? = nil, queryParams: [String: String] = [:]) {
        self.since = since
        self.limit = limit
        self.feed = feed
        self.documentIDs = documentIDs
        self.selector = selector
        self.filter = filter
        self.queryParams = queryParams
    }
}

/// One row of a `_changes` feed: a document and its leaf revisions.
public struct ChangeEntry: Sendable {
    public var seq: JSON
    public var id: String
    public var revs: [RevID]
    public var deleted: Bool
    /// The reader lost access to the document (Sync Gateway's channels: it left the reader's channels, or the
    /// reader lost a channel): nothing to fetch; a pull with auto-purge purges its copy.
    public var accessRemoved = false

    public init(seq: JSON, id: String, revs: [RevID], deleted: Bool) {
        self.seq = seq
        self.id = id
        self.revs = revs
        self.deleted = deleted
    }

    /// A change the reader lost access to (``accessRemoved``) or not.
    public init(seq: JSON, id: String, revs: [RevID], deleted: Bool, accessRemoved: Bool) {
        self.init(seq: seq, id: id, revs: revs, deleted: deleted)
        self.accessRemoved = accessRemoved
    }
}

/// A page of the change feed.
public struct ChangesBatch: Sendable {
    public var results: [ChangeEntry]
    /// Where the next request starts (`last_seq`).
    public var lastSeq: JSON
    /// How many changes remain after this batch, when the peer says.
    public var pending: Int?

    public init(results: [ChangeEntry], lastSeq: JSON, pending: Int? = nil) {
        self.results = results
        self.lastSeq = lastSeq
        self.pending = pending
    }
}

/// Revisions of one document to fetch, and the ancestors the target already has (`atts_since`), so that only
/// attachments newer than those travel.
public struct FetchRequest: Sendable {
    public var id: String
    public var revs: [RevID]
    public var attsSince: [RevID]

    public init(id: String, revs: [RevID], attsSince: [RevID] = []) {
        self.id = id
        self.revs = revs
        self.attsSince = attsSince
    }
}

/// A revision in transit: what `_bulk_get?revs=true` returns and `_bulk_docs` with `new_edits:false` takes.
public struct ReplicatedRevision: Sendable {
    public var id: String
    /// The revision's ancestry, newest first (`history[0]` is the revision itself).
    public var history: [RevID]
    public var deleted: Bool
    /// The document's properties without `_id`, `_rev`, `_deleted` and `_revisions`. `_attachments`, when
    /// present, holds stubs (`content_type`, `revpos`, `digest`, `length`, `stub: true`).
    public var body: JSONObject
    /// Attachment bodies travelling with the revision, by digest. Stubs without an entry here are ones the
    /// target already has.
    public var attachments: [String: [UInt8]]
    /// The encoding of attachment bodies that travel as their source stored them (`gzip`), by digest; the others
    /// are the attachments' own bytes. The target stores such a body as it came, as CouchDB's replicator does.
    public var attachmentEncodings: [String: String] = [:]
    /// Attachment bodies travelling with the revision in files rather than in memory, by digest: the large ones a
    /// replicator read from a remote source's multipart answer. (Encodings as for ``attachments``.)
    package var stagedAttachments: [String: StagedAttachment] = [:]

    /// Whether any attachment body travels with the revision (in memory or staged).
    public var carriesAttachmentBodies: Bool { !attachments.isEmpty || !stagedAttachments.isEmpty }

    /// The body of the attachment with `digest` that travels with the revision (a staged one read whole), or nil.
    public func attachmentBytes(_ digest: String) throws(ReplicationError) -> [UInt8]? {
        if let bytes = attachments[digest] { return bytes }
        return try stagedAttachments[digest]?.bytes()
    }

    /// The revision itself.
    public var rev: RevID { history[0] }

    public init(id: String, history: [RevID], deleted: Bool, body: JSONObject, attachments: [String: [UInt8]] = [:]) {
        precondition(!history.isEmpty, "a replicated revision needs its own id in history")
        self.id = id
        self.history = history
        self.deleted = deleted
        self.body = body
        self.attachments = attachments
    }
}

/// A document a target refused, with CouchDB's error and reason.
public struct DocumentFailure: Sendable, Equatable, CustomStringConvertible {
    public var id: String
    public var rev: String?
    public var error: String
    public var reason: String

    public init(id: String, rev: String?, error: String, reason: String) {
        self.id = id
        self.rev = rev
        self.error = error
        self.reason = reason
    }

    public var description: String { "\(id)\(rev.map { "@" + $0 } ?? ""): \(error) (\(reason))" }
}

/// Why a replication (or one request of it) failed.
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// The peer could not be reached, timed out, or cut a response short: retried with backoff.
        case unreachable
        /// The peer answered 5xx or something unparseable: retried with backoff.
        case transient
        /// 401: credentials missing or wrong. Stops the replication.
        case unauthorized
        /// 403 on the database itself. Stops the replication.
        case forbidden
        /// 404: the database does not exist (and `createTarget` is off). Stops the replication.
        case notFound
        /// A request the peer rejected as malformed (4xx other than the above).
        case badRequest
        /// The peer does not implement an endpoint (405, 501, or 404 on a sub-resource).
        case unsupported
        /// The replication was stopped.
        case cancelled
        /// The TLS handshake failed: the peer's certificate did not verify (unknown CA, self-signed, expired,
        /// wrong host name) or the peer does not speak TLS. Stops the replication.
        case tls
        /// This side failed: its storage (a full disk, an I/O error), a closed database, or an internal error.
        /// Stops the replication; not the peer's fault.
        case local
    }

    public var kind: Kind
    public var message: String
    /// The HTTP status, when the peer answered.
    public var status: Int?

    public init(_ kind: Kind, _ message: String, status: Int? = nil) {
        self.kind = kind
        self.message = message
        self.status = status
    }

    /// Any error as a replication error: itself, or a local failure (a store error keeps its message).
    public static func from(_ error: any Error) -> ReplicationError {
        if let e = error as? ReplicationError { return e }
        if error is CancellationError { return ReplicationError(.cancelled, "The replication was stopped") }
        return ReplicationError(.local, "\(error)")
    }

    /// Runs `body`, turning any other error it throws into a replication error (``from(_:)``): what an
    /// ``Endpoint`` implementation wraps its work in.
    public static func mapping<T>(_ body: () async throws -> T) async throws(ReplicationError) -> T {
        do {
            return try await body()
        } catch {
            throw ReplicationError.from(error)
        }
    }

    /// Whether retrying later may succeed.
    public var isTransient: Bool { kind == .unreachable || kind == .transient }

    /// What a peer's refusal with an HTTP status stands for — an HTTP answer, a refused WebSocket handshake, or a
    /// BLIP error (Sync Gateway answers in HTTP statuses): the one table. 401, 403 and 404 stop a replication, 405
    /// and 501 are `.unsupported` (a fallback may apply), 408, 429 and 5xx are retried, the rest is `.badRequest`.
    static func peer(status: Int, _ message: String) -> ReplicationError {
        switch status {
        case 401: ReplicationError(.unauthorized, message, status: 401)
        case 403: ReplicationError(.forbidden, message, status: 403)
        case 404: ReplicationError(.notFound, message, status: 404)
        case 405, 501: ReplicationError(.unsupported, message, status: status)
        case 408, 429, 500...: ReplicationError(.transient, message, status: status)
        default: ReplicationError(.badRequest, message, status: status)
        }
    }

    public var description: String {
        "\(kind.rawValue)\(status.map { " (HTTP \($0))" } ?? ""): \(message)"
    }
}

extension JSON {
    /// A sequence as it goes into a URL query (`since=`): strings as they are, numbers as their digits.
    var sequenceText: String {
        switch self {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .double(let d): return String(Int64(d))
        case .null: return "0"
        default: return jsonString
        }
    }
}
