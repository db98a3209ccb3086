import Foundation
import Synchronization
import SetteeCore
import SetteeIndex
import SetteeStore

/// Runs the `validate_doc_update` functions of a database's design documents on every write CouchDB runs them on
/// (interactive writes, `_bulk_docs`, replicated revisions), in the ``JavaScriptEngine``. `_users` (and any
/// database holding the authentication `_design/_auth`) has its rules enforced natively (``UserDirectory``)
/// instead; its `_design/_auth` states the same rules.
///
/// Which design documents have a function is cached per database and recomputed after any commit that changed a
/// design document, whatever wrote it (the store counts those commits: ``Database/designDocumentGeneration``).
/// ``WriteRules`` runs them, on every write path.
final class ValidationGuard: Sendable {
    /// One design document's validation function.
    struct Validator: Sendable {
        let id: String
        let revision: String
        let designDocument: JSON
    }

    /// What a database's design documents ask of writes.
    struct Rules: Sendable {
        /// Design documents with a `validate_doc_update`.
        var validators: [Validator] = []
        /// A `_design/_auth` holding the authentication database's rules (``UserDirectory/authDesignDocument``),
        /// which Settee enforces natively wherever it is (e.g. a replica of `_users`).
        var userRules = false
    }

    /// A database's rules, with the database (its uuid: a re-created one is another) and the design-document
    /// generation they were read at.
    private struct Cached: Sendable {
        var uuid: String
        var generation: Int
        var rules: Rules
    }
    private let cache = Mutex<[String: Cached]>([:])

    /// Forget what is known of a database (a design document of it was written, or it was deleted).
    func invalidate(_ database: String) {
        _ = cache.withLock { $0.removeValue(forKey: database) }
    }

    /// The rules of the database's default collection's design documents.
    func rules(_ db: Database) throws -> Rules {
        // Read before the design documents: a design commit meanwhile moves it, and the next call reads again.
        let generation = db.designDocumentGeneration
        if let known = cache.withLock({ $0[db.name] }), known.uuid == db.uuid, known.generation == generation {
            return known.rules
        }
        let c = try db.defaultCollection()
        var options = SetteeStore.Collection.AllDocsOptions()
        options.startKey = "_design/"
        options.endKey = "_design0"
        options.inclusiveEnd = false
        options.includeDocs = true
        var found = Rules()
        let native = UserDirectory.authDesignDocument["validate_doc_update"]
        for row in try c.allDocs(options).rows {
            guard let body = row.body, case .object(var doc)? = try? JSON.parse(body) else { continue }
            guard let f = doc["validate_doc_update"], !f.isNull else { continue }
            if row.id == "_design/_auth" && f == native {
                found.userRules = true
            } else {
                doc["_id"] = .string(row.id)
                doc["_rev"] = .string(row.rev.description)
                found.validators.append(Validator(id: row.id, revision: row.rev.description, designDocument: .object(doc)))
            }
        }
        cache.withLock { $0[db.name] = Cached(uuid: db.uuid, generation: generation, rules: found) }
        return found
    }
}

/// The `validate_doc_update` functions of one database, for one caller's writes.
struct DocumentValidator: Sendable {
    let validators: [ValidationGuard.Validator]
    let userContext: JSON
    let security: JSON

    /// The function's `newDoc` (the write's body with `_id`, `_rev` — the parent's, or a replicated revision's own —
    /// and `_deleted`) and `oldDoc` (the current revision with `_id` and `_rev`, or null).
    static func arguments(_ write: RevisionWrite, current: (rev: String, body: JSONObject)?) -> (new: JSON, old: JSON) {
        var new = write.body
        new["_id"] = .string(write.id)
        switch write.mode {
        case .edit(let parent?): new["_rev"] = .string(parent.description)
        case .replicated(let history): if let first = history.first { new["_rev"] = .string(first.description) }
        default: break
        }
        if write.deleted { new["_deleted"] = true }
        var old: JSON = .null
        if let current {
            var body = current.body
            body["_id"] = .string(write.id)
            body["_rev"] = .string(current.rev)
            old = .object(body)
        }
        return (.object(new), old)
    }

    /// ``arguments(_:current:)`` as JSON text, `newDoc,oldDoc`, written straight from the bodies (no copy of them
    /// with `_id` and `_rev` added). `bodyText`, when given, is the write's body already serialized
    /// (`JSON.object(write.body).serializedBytes`), used as it is.
    static func serializedArguments(_ write: RevisionWrite, bodyText: [UInt8]? = nil,
                                    current: (rev: String, body: JSONObject)?) -> [UInt8] {
        if let current, current.body.containsKey(where: isReserved) {
            // (Bodies as the store keeps them have none of these; should one, the added members must win.)
            let (new, old) = arguments(write, current: current)
            var out = new.serializedBytes
            out.append(UInt8(ascii: ","))
            old.serialize(into: &out)
            return out
        }
        var out: [UInt8] = []
        out.reserveCapacity((bodyText?.count ?? 256) + 256)
        appendNewDocument(write, bodyText: bodyText, to: &out)
        out.append(UInt8(ascii: ","))
        if let current {
            DocumentBytes.splice(id: write.id, rev: current.rev, deleted: false, body: JSON.object(current.body).serializedBytes,
                                 into: &out)
        } else {
            out.append(contentsOf: "null".utf8)
        }
        return out
    }

    /// The members the function's documents get from the write itself.
    private static func isReserved(_ key: String) -> Bool {
        key.utf8.first == UInt8(ascii: "_") && (key == "_id" || key == "_rev" || key == "_deleted")
    }

    /// The function's `newDoc` (``arguments(_:current:)``) as JSON text, appended to `out`; `bodyText` as in
    /// ``serializedArguments(_:bodyText:current:)``.
    static func appendNewDocument(_ write: RevisionWrite, bodyText: [UInt8]?, to out: inout [UInt8]) {
        if write.body.containsKey(where: isReserved) {
            // (Bodies of writes have none of these; should one, the added members must win.)
            arguments(write, current: nil).new.serialize(into: &out)
            return
        }
        var rev: String?
        switch write.mode {
        case .edit(let parent?): rev = parent.description
        case .replicated(let history): rev = history.first?.description
        default: break
        }
        DocumentBytes.splice(id: write.id, rev: rev, deleted: write.deleted,
                             body: bodyText ?? JSON.object(write.body).serializedBytes, into: &out)
    }

    /// Validates many writes (a `_bulk_docs` request) with one exchange per function: for each write, nil when
    /// every function accepts it, or the first refusal. `bodyTexts`, when given, are the writes' bodies already
    /// serialized, one per write.
    func validateBatch(_ writes: [RevisionWrite], bodyTexts: [[UInt8]]? = nil,
                       in collection: SetteeStore.Collection) throws -> [(any Error)?] {
        var results = [(any Error)?](repeating: nil, count: writes.count)
        let checked = writes.indices.filter { !writes[$0].id.hasPrefix("_design/") && !writes[$0].id.hasPrefix("_local/") }
        // The current revisions of the whole batch in one read transaction.
        let records = try collection.records(ids: checked.map { writes[$0].id })
        var pairs: [[UInt8]] = []
        pairs.reserveCapacity(checked.count)
        for (i, record) in zip(checked, records) {
            var current: (rev: String, body: JSONObject)?
            if let record, !record.deleted, case .object(let body) = try JSON.parse(record.body) {
                current = (record.revID.description, body)
            }
            pairs.append(Self.serializedArguments(writes[i], bodyText: bodyTexts?[i], current: current))
        }
        for v in validators {
            let verdicts = try JavaScriptEngine.shared.validateBatch(designDocumentID: v.id, revision: v.revision,
                                                                     designDocument: v.designDocument, documents: pairs,
                                                                     userContext: userContext, security: security)
            for (k, verdict) in zip(checked, verdicts) where results[k] == nil { results[k] = verdict }
        }
        return results
    }
}
