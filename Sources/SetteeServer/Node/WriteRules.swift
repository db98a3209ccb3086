import Foundation
import SetteeCore
import SetteeIndex
package import SetteeStore

/// The node's one write-admission step (CouchDB's `couch_db` update path: `before_doc_update`, then
/// `validate_doc_update`), installed on every database the node opens, so every write passes it whatever carried
/// it: HTTP handlers, replication into a local target (by name or URL), peers, `_replicator` jobs, the command
/// line's `replicate` and `load`, and an app writing through the Swift API to a database it serves.
///
/// For each write, in order:
/// 1. Design documents need a database admin (`_security` admins or a server admin), and their JavaScript
///    view functions must compile (CouchDB's `couch_mrview:validate`: 400 `compilation_error` otherwise).
/// 2. In the authentication database (and any database holding its `_design/_auth`): the user-document rules
///    (``UserDirectory``) and password hashing, as CouchDB's `_users` `before_doc_update` does.
/// 3. The document size limit (`[couchdb] max_document_size`) and attachment size limit, for writes others send
///    (not the database's owner's own: ``WriteContext/owner``).
/// 4. The database's `validate_doc_update` functions, every write of the batch in one exchange per function, with
///    the writer's `userCtx` and the database's `_security`.
/// 5. The database's sync function, if it has one (``SyncAdmission``): Sync Gateway's channels and grants.
///
/// A refusal is that write's ``SetteeError`` (its ``SetteeError/underlying`` error, a ``CouchError`` or a
/// ``JavaScriptError``, says exactly how CouchDB answers it); a design function's process failing fails the batch.
struct WriteRules: WriteAdmission {
    /// The node's settings, read at each write (the config API changes them while the node runs).
    let settings: @Sendable () -> Settings
    let validation: ValidationGuard

    struct Settings: Sendable {
        var maxDocumentSize: Int
        var maxAttachmentSize: Int
        var authenticationDB: String
        var pbkdf2Iterations: Int
        var passwordRequirements: PasswordRequirements

        init(_ c: ServerConfiguration) {
            maxDocumentSize = c.maxDocumentSize
            maxAttachmentSize = c.maxAttachmentSize
            authenticationDB = c.security.authenticationDB
            pbkdf2Iterations = c.security.pbkdf2Iterations
            passwordRequirements = c.security.passwordRequirements
        }
    }

    /// The rules of a node: its live settings and validation cache.
    init(config: NodeConfig, validation: ValidationGuard) {
        settings = { Settings(config.snapshot.server) }
        self.validation = validation
    }

    /// The rules of a data directory used without a running node (the command line), with fixed settings.
    init(configuration: ServerConfiguration, validation: ValidationGuard = ValidationGuard()) {
        let fixed = Settings(configuration)
        settings = { fixed }
        self.validation = validation
    }

    func admit(_ writes: [RevisionWrite], to collection: SetteeStore.Collection,
               as context: WriteContext) throws -> [Result<RevisionWrite, SetteeError>] {
        let settings = settings()
        let db = collection.database
        let caller = UserContext(name: context.name, roles: context.roles, method: nil)
        var security: JSON?
        func securityObject() throws -> JSON {
            if let security { return security }
            let loaded = try db.metadata("security") ?? SecurityObject.adminOnlyJSON
            security = loaded
            return loaded
        }
        var access: Access?
        func callerAccess() throws -> Access {
            if let access { return access }
            let found = context.isServerAdmin ? Access.admin : SecurityObject(try securityObject()).access(for: caller)
            access = found
            return found
        }
        let isDefault = collection.scopeName == "_default" && collection.name == "_default"
        let rules = try validation.rules(db)
        let usersDatabase = isDefault && (db.name == settings.authenticationDB || db.name == UserDirectory.database || rules.userRules)
        let hashOnly = db.name == settings.authenticationDB && db.name != UserDirectory.database && !rules.userRules
        let validators = db.name == UserDirectory.database || db.name == settings.authenticationDB ? [] : rules.validators

        let syncSource = usersDatabase ? nil : try ChannelIndex.of(db).syncFunction()
        var verdicts: [Result<RevisionWrite, SetteeError>] = []
        verdicts.reserveCapacity(writes.count)
        var bodyTexts: [[UInt8]?] = []  // with validators or a sync function: each admitted write's body as JSON text
        if !validators.isEmpty || syncSource != nil { bodyTexts.reserveCapacity(writes.count) }
        for var write in writes {
            var text: [UInt8]?
            do {
                let design = write.id.hasPrefix("_design/")
                if design {
                    guard try callerAccess() >= .admin else {
                        throw CouchError(.forbidden, "forbidden", "You are not a db or server admin.")
                    }
                    if !write.deleted { try Self.compileFunctions(of: write) }
                }
                if usersDatabase {
                    write.body = try usersRules(write, in: collection, caller: caller, isAdmin: try callerAccess() >= .admin,
                                                hashOnly: hashOnly, settings)
                }
                // Size limits are for what others send; the owner's own writes (the node's bookkeeping, an app's
                // saves, a command on the data directory) are not held to them.
                let limited = !context.isOwner && settings.maxDocumentSize < (64 << 20)
                if limited || !validators.isEmpty || syncSource != nil {
                    let serialized = JSON.object(write.body).serializedBytes
                    if limited && serialized.count > settings.maxDocumentSize { throw CouchError.tooLarge }
                    text = serialized
                }
                if !context.isOwner { try checkAttachmentSizes(write, limit: settings.maxAttachmentSize) }
            } catch {
                verdicts.append(.failure(Self.refusal(error)))
                bodyTexts.append(nil)
                continue
            }
            verdicts.append(.success(write))
            bodyTexts.append(text)
        }
        if !validators.isEmpty {
            try validate(&verdicts, validators: validators, bodyTexts: bodyTexts, in: collection, caller: caller,
                         security: try securityObject())
        }
        // The sync function (Sync Gateway's) last, on what every other rule admitted.
        if let syncSource {
            try SyncAdmission.route(&verdicts, source: syncSource, bodyTexts: bodyTexts, in: collection, context: context,
                                    isAdmin: context.isOwner || (try callerAccess()) >= .admin)
        }
        return verdicts
    }

    /// validate_doc_update on the writes still standing, in one exchange per function.
    private func validate(_ verdicts: inout [Result<RevisionWrite, SetteeError>], validators: [ValidationGuard.Validator],
                          bodyTexts: [[UInt8]?], in collection: SetteeStore.Collection, caller: UserContext,
                          security: JSON) throws {
        let db = collection.database
        let standing = verdicts.indices.filter { if case .success = verdicts[$0] { return true } else { return false } }
        guard !standing.isEmpty else { return }
        var context = caller.json.objectValue ?? [:]
        context["db"] = .string(db.name)
        let validator = DocumentValidator(validators: validators, userContext: .object(context), security: security)
        let judged = standing.map { i -> RevisionWrite in
            guard case .success(let w) = verdicts[i] else { preconditionFailure() }
            return w
        }
        let texts = zip(standing, judged).map { i, w in bodyTexts[i] ?? JSON.object(w.body).serializedBytes }
        let outcomes = try validator.validateBatch(judged, bodyTexts: texts, in: collection)
        for (k, outcome) in outcomes.enumerated() {
            guard let outcome else { continue }
            // A design function that failed to run (not one that refused) fails the whole batch, as in CouchDB.
            if CouchError.from(any: outcome).status == .internalServerError { throw outcome }
            verdicts[standing[k]] = .failure(Self.refusal(outcome))
        }
    }

    /// The user-document rules of the authentication database: who may write which user document and its roles,
    /// and a plain `password` hashed. Replicated revisions without a password are taken as they are (a replica of
    /// `_users` carries derived keys already), as the HTTP API always took them.
    private func usersRules(_ write: RevisionWrite, in collection: SetteeStore.Collection, caller: UserContext,
                            isAdmin: Bool, hashOnly: Bool, _ settings: Settings) throws -> JSONObject {
        var replicated = false
        if case .replicated = write.mode { replicated = true }
        if replicated && write.body["password"] == nil { return write.body }
        if hashOnly {
            return try UserDirectory.hashPassword(in: write.body, iterations: settings.pbkdf2Iterations,
                                                  requirements: settings.passwordRequirements)
        }
        var existing: JSONObject?
        if let record = try collection.record(id: write.id), !record.deleted, case .object(let o) = try JSON.parse(record.body) {
            existing = o
        }
        return try UserDirectory.prepare(id: write.id, body: write.body, deleted: write.deleted, existing: existing,
                                         caller: caller, isAdmin: isAdmin, iterations: settings.pbkdf2Iterations,
                                         requirements: settings.passwordRequirements)
    }

    /// Attachments carried inline in the write past the node's attachment size limit (`attachment_too_large`).
    private func checkAttachmentSizes(_ write: RevisionWrite, limit: Int) throws {
        guard limit < .max else { return }
        for blob in write.blobs where blob.data.count > limit {
            let name = write.body["_attachments"]?.objectValue?.first { $0.value["digest"]?.stringValue == blob.digest }?.key
            throw CouchError(.contentTooLarge, "attachment_too_large", name ?? blob.digest)
        }
        for staged in write.stagedBlobs where staged.length > limit {
            let name = write.body["_attachments"]?.objectValue?.first { $0.value["digest"]?.stringValue == staged.digest }?.key
            throw CouchError(.contentTooLarge, "attachment_too_large", name ?? staged.digest)
        }
    }

    /// A design document's JavaScript view functions compile (CouchDB's `couch_mrview:validate` refuses the
    /// document otherwise, 400 `compilation_error`): each map, and each reduce that is not a built-in (`_sum`,
    /// `_count`, `_stats`, `_approx_count_distinct`, `_top_N`, `_bottom_N`, `_first`, `_last`, matched by prefix as
    /// CouchDB does; another `_` name is 400
    /// `invalid_design_doc`). Design documents in another language (`query`: Mango's) are not compiled.
    static func compileFunctions(of write: RevisionWrite) throws {
        let language = write.body["language"]?.stringValue ?? "javascript"
        guard language == "javascript", case .object(let views)? = write.body["views"] else { return }
        var sources: [(view: String, kind: String, source: String)] = []
        for (name, view) in views where name != "lib" {
            guard case .object(let v) = view else { continue }
            if let map = v["map"]?.stringValue { sources.append((name, "map", map)) }
            if let reduce = v["reduce"]?.stringValue {
                if reduce.hasPrefix("_") {
                    // As CouchDB 3.5 matches them: by prefix (a bad `_top_N` rank is answered when queried).
                    let builtins = ["_sum", "_count", "_stats", "_approx_count_distinct", "_top_", "_bottom_", "_first", "_last"]
                    guard builtins.contains(where: { reduce.hasPrefix($0) }) else {
                        throw CouchError(.badRequest, "invalid_design_doc", "`\(reduce)` is not a supported reduce function.")
                    }
                } else {
                    sources.append((name, "reduce", reduce))
                }
            }
        }
        guard !sources.isEmpty else { return }
        let library = views["lib"]
        // All of them in one exchange (one process reset); only when one fails, each alone, to name it.
        if (try? JavaScriptEngine.shared.compile(functions: sources.map(\.source), library: library)) != nil { return }
        for entry in sources {
            let failure: JavaScriptError?
            do {
                try JavaScriptEngine.shared.compile(functions: [entry.source], library: entry.kind == "map" ? library : nil)
                failure = nil
            } catch {
                failure = error
            }
            switch failure {
            case nil: continue
            case .compilation(let reason)?:
                throw CouchError(.badRequest, "compilation_error",
                                 "Compilation of the \(entry.kind) function in the '\(entry.view)' view failed: \(reason)")
            case let other?:
                throw other
            }
        }
    }

    /// A rule's error as the refusal of one write: a ``SetteeError`` whose code is CouchDB's error name
    /// (`forbidden`, `unauthorized`, `too_large`, `compilation_error`, …) and whose underlying error is the
    /// original one, which ``CouchError/from(_:)`` answers exactly.
    static func refusal(_ error: any Error) -> SetteeError {
        if let e = error as? SetteeError { return e }
        let couch = CouchError.from(any: error)
        return SetteeError(SetteeError.Code(couch.error), couch.reason, underlying: couch)
    }
}

extension Node {
    /// How a command working on a data directory without a running node (`settee replicate`, `settee load`,
    /// `settee put`) opens its databases: with the node's write rules at their default settings, so writes made
    /// there pass the same admission as writes to a running node.
    package static func databaseConfiguration(directory: String) -> DatabaseConfiguration {
        var c = DatabaseConfiguration(directory: directory)
        c.admission = WriteRules(configuration: ServerConfiguration(dataDirectory: directory))
        return c
    }
}
