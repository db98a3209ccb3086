import Foundation
import Synchronization
import SetteeCore
import SetteeStore

/// Fails closed on `validate_doc_update` functions this node cannot run yet (JavaScript): while a database has a
/// design document with one, writes to it are refused with 403 instead of being stored unchecked, since CouchDB
/// would have run the function and perhaps refused them. Server and database admins may still write design
/// documents (to fix or remove the function). `_users` is exempt: its rules are enforced natively
/// (``UserDirectory``), and its `_design/_auth` states the same rules.
///
/// Which databases have such a function is cached per database and recomputed after a design document is written
/// through the HTTP API.
final class ValidationGuard: Sendable {
    /// What a database's design documents ask of writes.
    struct Rules: Sendable {
        /// Design documents with a `validate_doc_update` this node can't run.
        var validators: [String] = []
        /// A `_design/_auth` holding the authentication database's rules (``UserDirectory/authDesignDocument``),
        /// which Settee enforces natively wherever it is (e.g. a replica of `_users`).
        var userRules = false
    }

    private let cache = Mutex<[String: Rules]>([:])

    /// Forget what is known of a database (a design document of it was written, or it was deleted).
    func invalidate(_ database: String) {
        _ = cache.withLock { $0.removeValue(forKey: database) }
    }

    /// The rules of the database's default collection's design documents.
    func rules(_ db: Database) throws -> Rules {
        if let known = cache.withLock({ $0[db.name] }) { return known }
        let c = try db.defaultCollection()
        var options = SetteeStore.Collection.AllDocsOptions()
        options.startKey = "_design/"
        options.endKey = "_design0"
        options.inclusiveEnd = false
        options.includeDocs = true
        var found = Rules()
        let native = UserDirectory.authDesignDocument["validate_doc_update"]
        for row in try c.allDocs(options).rows {
            guard let body = row.body, case .object(let doc)? = try? JSON.parse(body) else { continue }
            guard let f = doc["validate_doc_update"], !f.isNull else { continue }
            if row.id == "_design/_auth" && f == native { found.userRules = true } else { found.validators.append(row.id) }
        }
        cache.withLock { $0[db.name] = found }
        return found
    }

    /// Throws 403 when writing `ids` needs a validation function this node cannot run.
    func check(_ db: Database, ids: [String], isAdmin: Bool, authenticationDB: String) throws {
        guard db.name != UserDirectory.database, db.name != authenticationDB else { return }
        guard let first = try rules(db).validators.first else { return }
        if isAdmin && ids.allSatisfy({ $0.hasPrefix("_design/") }) { return }
        throw CouchError(.forbidden, "forbidden",
                         "\(first) has a validate_doc_update function, and this node does not run JavaScript design functions yet: writes to this database are refused rather than stored unchecked. Remove the function or write from a node that runs it.")
    }
}
