import Logging
import SetteeBLIP
import SetteeCore
import SetteeReplication
import SetteeStore
import Synchronization

/// Sync Gateway's side of Couchbase Lite's replication protocol, for one connection to one collection.
///
/// - Checkpoints (`getCheckpoint`, `setCheckpoint`) are `_local/checkpoint/{client}` documents, with the local
///   document's `0-N` revisions as their MVCC revisions.
/// - Pull: `subChanges` starts the feed (``BLIPChangesFeed``): `changes` batches from `since`, a caught-up empty
///   `changes`, then — `continuous` — more as commits arrive; the client's answers say which `rev`s to send.
/// - Push: `proposeChanges` (0 send, 304 have it, 409 conflict, as Sync Gateway answers) or `changes` (the known
///   ancestors of each missing revision, as `_revs_diff` finds them), then `rev`s, each written as
///   `_bulk_docs` with `new_edits=false` writes it: ``DocumentInput`` and `Collection.write(_:as:)` with the
///   caller's ``WriteContext``, so the database's write rules (validate_doc_update, size limits) apply.
/// - Attachments and blobs, both ways: `getAttachment` and `proveAttachment` from the client are answered, and a
///   pushed revision's bodies are fetched or proved before it is written (``BLIPAttachments``).
/// - A reader-only caller (``Access/reader``) is refused pushes with HTTP 403.
final class BLIPSyncHandler: Sendable {
    struct Context: Sendable {
        let node: Node
        let database: Database
        let collection: SetteeStore.Collection
        let writer: WriteContext
        let canPush: Bool
        /// Database admins may push design documents, as `_bulk_docs` allows them.
        let canWriteDesign: Bool
        let logger: Logger
        /// On a database with a sync function, the caller who is not its admin: pulls see only its channels.
        var limitedReader: ChannelReader? = nil
    }

    /// Who reads a database's channels (``ChannelIndex/reader(user:roles:in:)``).
    struct ChannelReader: Sendable {
        let user: String?
        let roles: [String]
    }

    let context: Context
    let session: BLIPSession
    /// The attachments of the revisions being sent, which the client may fetch meanwhile.
    let offered = BLIPOfferedAttachments()
    /// The requests answered in tasks of their own at once, at most.
    let slots = BLIPRequestSlots(16)
    /// A collection the connection serves: its pushed-revision writer (group commit) and its pull feed.
    final class Served: Sendable {
        let collection: SetteeStore.Collection
        /// The `collection` property its messages carry, for a client that named its collections (`getCollections`).
        let index: Int?
        let writer: BLIPRevisionWriter
        let feed = Mutex<Task<Void, Never>?>(nil)

        init(collection: SetteeStore.Collection, index: Int?, writer: BLIPRevisionWriter) {
            self.collection = collection
            self.index = index
            self.writer = writer
        }
    }

    /// The URL's collection, for messages without a `collection` property.
    let primary: Served
    /// The collections `getCollections` mapped, by index (nil before it was asked).
    private let served = Mutex<[Int: Served]?>(nil)

    init(context: Context, session: BLIPSession) {
        self.context = context
        self.session = session
        self.primary = Served(collection: context.collection, index: nil,
                              writer: BLIPRevisionWriter(collection: context.collection, writer: context.writer,
                                                                 session: session))
    }

    /// Ends the changes feeds (the connection closed).
    func stop() {
        primary.feed.withLock { $0?.cancel() }
        for one in served.withLock({ Array(($0 ?? [:]).values) }) { one.feed.withLock { $0?.cancel() } }
    }

    /// The collection a request is about: the one its `collection` index names (as `getCollections` mapped it), or
    /// the URL's. Before `getCollections`, index 0 is the URL's collection.
    func target(_ request: BLIPMessage) throws -> Served {
        guard let text = request.properties["collection"] else { return primary }
        let found: Served? = served.withLock { map in
            guard let i = Int(text) else { return nil }
            guard let map else { return i == 0 ? primary : nil }
            return map[i]
        }
        guard let found else {
            throw BLIPSyncError(domain: .http, code: 404, "collection \(text) is not served on this connection")
        }
        return found
    }

    /// Answers one request from the client. Requests are taken in order of arrival; those that wait on the store
    /// are answered in tasks of their own (``BLIPRequestSlots``), so the frames behind them keep being read: a
    /// `rev` goes to the group commit, and a checkpoint or a `changes` list waiting for the store holds up nothing
    /// else. (A client sends a checkpoint once the revisions it covers are answered, and LiteCore offers a
    /// document's next revision only once its last one is answered, so no answer depends on a request behind it.)
    func handle(_ request: BLIPMessage) async {
        do {
            // Messages of a collection-aware client name their collection by its index in `getCollections`.
            if request.profile != "getCollections" { _ = try target(request) }
            switch request.profile ?? "" {
            case "getCheckpoint": await concurrently(request) { try await self.getCheckpoint(request) }
            case "setCheckpoint": await concurrently(request) { try await self.setCheckpoint(request) }
            case "subChanges": try subChanges(request)
            case "changes": await concurrently(request) { try await self.changes(request) }
            case "proposeChanges": await concurrently(request) { try await self.proposeChanges(request) }
            case "rev":
                try requirePush()
                try startRev(request)
            case "getCollections": try await getCollections(request)
            case "getAttachment": await concurrently(request) { try await self.getAttachment(request) }
            case "proveAttachment": await concurrently(request) { try await self.proveAttachment(request) }
            default:
                throw BLIPSyncError(domain: .blip, code: 404, "no handler for profile \(request.profile ?? "(none)")")
            }
        } catch {
            fail(request, error)
        }
    }

    /// Answers `request` in a task of its own once a slot is free (the reader waits for one).
    private func concurrently(_ request: BLIPMessage, _ work: @escaping @Sendable () async throws -> Void) async {
        await slots.acquire()
        let slots = self.slots
        Task {
            defer { slots.release() }
            await self.reply(to: request, work)
        }
    }

    /// Runs `work` and answers `request` with its failure, if any.
    func reply(to request: BLIPMessage, _ work: () async throws -> Void) async {
        do { try await work() } catch { fail(request, error) }
    }

    func fail(_ request: BLIPMessage, _ error: any Error) {
        if let answer = failure(request, error) { session.send(answer) }
    }

    /// The error answer to `request` for `error` (logged when it is the node's fault), or nil when none is owed.
    func failure(_ request: BLIPMessage, _ error: any Error) -> BLIPMessage? {
        // The connection closed while the request waited on the client (a `rev` fetching an attachment): no one to answer.
        if error is BLIPSession.Closed { return nil }
        let mapped = BLIPSyncError.from(error)
        if mapped.code >= 500 { context.logger.warning("BLIP \(request.profile ?? "?"): \(error)") }
        guard !request.flags.contains(.noReply) else { return nil }
        return .error(to: request.number, domain: mapped.domain, code: mapped.code, message: mapped.message)
    }

    func requirePush() throws {
        guard context.canPush else {
            throw BLIPSyncError(domain: .http, code: 403, "You have read-only access to this database: it does not accept pushes.")
        }
    }

    private func json(_ request: BLIPMessage) throws -> JSON {
        do {
            guard let body = try request.jsonBody() else { throw BLIPSyncError(domain: .http, code: 400, "the request has no JSON body") }
            return body
        } catch let error as JSONError {
            throw BLIPSyncError(domain: .http, code: 400, "the request's body is not JSON: \(error)")
        }
    }

    // MARK: Checkpoints

    static func checkpointID(_ client: String) -> String { "_local/checkpoint/" + client }

    private func getCheckpoint(_ request: BLIPMessage) async throws {
        guard let client = request.properties["client"], !client.isEmpty else {
            throw BLIPSyncError(domain: .http, code: 400, "getCheckpoint needs a `client` property")
        }
        let c = try target(request).collection
        guard let doc = try await blocking({ try c.localDocument(id: Self.checkpointID(client)) }) else {
            throw BLIPSyncError(domain: .http, code: 404, "missing")
        }
        session.send(.response(to: request.number, properties: ["rev": doc.rev], body: JSON.object(doc.body).serializedBytes))
    }

    private func setCheckpoint(_ request: BLIPMessage) async throws {
        guard let client = request.properties["client"], !client.isEmpty else {
            throw BLIPSyncError(domain: .http, code: 400, "setCheckpoint needs a `client` property")
        }
        guard case .object(let body) = try json(request) else {
            throw BLIPSyncError(domain: .http, code: 400, "a checkpoint is a JSON object")
        }
        // Couchbase Lite sends an empty `rev` for a new checkpoint.
        let c = try target(request).collection, rev = request.properties["rev"].flatMap { $0.isEmpty ? nil : $0 }
        let newRev = try await blocking { try c.putLocal(id: Self.checkpointID(client), body: body, rev: rev) }
        session.send(.response(to: request.number, properties: ["rev": newRev]))
    }

    /// Couchbase Lite 3.1+ asks for its collections' checkpoints up front (`{"collections": ["scope.name", …],
    /// "checkpoint_ids": […]}`); the answer is, per collection, its checkpoint (`{}` when none) or `null` for a
    /// collection not served. On `/{db}` every collection of the database is served, as Sync Gateway serves a
    /// database's collections on one connection; on `/{db}.{scope}.{collection}` that collection alone. Later
    /// messages name theirs by its index in the list (`collection`).
    private func getCollections(_ request: BLIPMessage) async throws {
        let body = try json(request)
        let ids = body["checkpoint_ids"]?.arrayValue ?? []
        let names = body["collections"]?.arrayValue ?? []
        guard ids.count == names.count else {
            throw BLIPSyncError(domain: .http, code: 400, "collections and checkpoint_ids differ in length")
        }
        let primary = self.primary, database = context.database, writer = context.writer
        let wholeDatabase = primary.collection.scopeName == Scope.defaultScopeName
            && primary.collection.name == SetteeStore.Collection.defaultCollectionName
        var answer: [JSON] = []
        var map: [Int: Served] = [:]
        for (i, name) in names.enumerated() {
            let parts = (name.stringValue ?? "").split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            let (scope, collectionName) = parts.count == 2 ? (parts[0], parts[1]) : (Scope.defaultScopeName, parts.first ?? "")
            let collection: SetteeStore.Collection?
            if scope == primary.collection.scopeName && collectionName == primary.collection.name {
                collection = primary.collection
            } else if wholeDatabase {
                collection = try await blocking { try database.collection(name: collectionName, scope: scope) }
            } else {
                collection = nil
            }
            guard let collection else {
                answer.append(.null)
                continue
            }
            map[i] = Served(collection: collection, index: i,
                            writer: collection === primary.collection ? primary.writer
                                : BLIPRevisionWriter(collection: collection, writer: writer, session: session))
            let client = ids[i].stringValue ?? ""
            let doc = client.isEmpty ? nil : try await blocking { try collection.localDocument(id: Self.checkpointID(client)) }
            answer.append(doc.map { var b = $0.body; b["_rev"] = .string($0.rev); return .object(b) } ?? .object([:]))
        }
        served.withLock { $0 = map }
        session.send(.response(to: request.number, body: JSON.array(answer).serializedBytes))
    }

    // MARK: Pull

    private func subChanges(_ request: BLIPMessage) throws {
        var options = BLIPChangesFeed.Options()
        if let since = request.properties["since"], !since.isEmpty {
            options.since = try BLIPChangesFeed.parseSequence(since)
        }
        options.continuous = request.properties["continuous"].map { $0 == "true" || $0 == "1" } ?? false
        options.activeOnly = request.properties["activeOnly"].map { $0 == "true" || $0 == "1" } ?? false
        if let batch = request.properties["batch"].flatMap(Int.init), batch > 0 { options.batch = min(batch, 1000) }
        if !request.body.isEmpty, let ids = try json(request)["docIDs"]?.arrayValue {
            options.documentIDs = ids.compactMap(\.stringValue)
        }
        if let filter = request.properties["filter"] {
            guard filter == ChangesRoutes.byChannelFilter else {
                throw BLIPSyncError(domain: .http, code: 501, "filter \(filter) is not served")
            }
            let names = (request.properties["channels"] ?? "").split(separator: ",").map { String($0) }.filter { !$0.isEmpty }
            guard !names.isEmpty else {
                throw BLIPSyncError(domain: .http, code: 400, "filter \(filter) needs a `channels` property")
            }
            guard try ChannelIndex.of(context.database).syncFunction() != nil else {
                throw BLIPSyncError(domain: .http, code: 400, "filter \(filter) needs a database with a sync function")
            }
            options.channels = Set(names)
        }
        let target = try self.target(request)
        session.send(.response(to: request.number))
        let changesFeed = BLIPChangesFeed(context: context, collection: target.collection, collectionIndex: target.index,
                                          session: session, offered: offered, options: options)
        let task = Task { await changesFeed.run() }
        target.feed.withLock { old in
            old?.cancel()
            old = task
        }
    }
}

/// An error to answer a BLIP request with: `Error-Domain`, `Error-Code` and a message. CouchDB-shaped errors map
/// through ``CouchError``'s one table: their HTTP status is the code in the `HTTP` domain, as Sync Gateway answers.
struct BLIPSyncError: Error {
    let domain: BLIPMessage.ErrorDomain
    let code: Int
    let message: String

    init(domain: BLIPMessage.ErrorDomain, code: Int, _ message: String) {
        self.domain = domain
        self.code = code
        self.message = message
    }

    static func from(_ error: any Error) -> BLIPSyncError {
        if let error = error as? BLIPSyncError { return error }
        if let error = error as? BLIPError { return BLIPSyncError(domain: .blip, code: 400, error.message) }
        let couch = CouchError.from(any: error)
        return BLIPSyncError(domain: .http, code: couch.status.code, couch.reason)
    }
}
