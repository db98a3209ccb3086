import Foundation
import SetteeCore
import SetteeStore

/// What a caller who is not a database admin may reach of a database with a sync function, and which channels it
/// reads (``Call/reader``). Admins (server admins, `_security` admins) see everything, as in Sync Gateway; so does
/// a user granted the `*` channel.
///
/// Reads follow channels: `_changes`, `_all_docs`, a document's `GET` (and its attachments), `_bulk_get`,
/// `_revs_diff`, `_blipsync`, view rows (map only) and `_find` show only documents in the reader's channels. What
/// can't be filtered by document — design documents, reduced views, show/list/update/rewrite functions, SQL++
/// (`_query`) and its indexes, partitions — is refused (403), so nothing outside the reader's channels is reachable
/// through it.
enum SyncGate {
    static func admit(_ call: inout Call, _ target: Keyspace) async throws {
        guard call.access < .admin, !call.isAdmin, call.segments.count >= 1,
              target.database != call.node.configuration.security.authenticationDB else { return }
        let (db, c) = try target.open(call.node)
        let index = ChannelIndex.of(db)
        guard try index.syncFunction() != nil else { return }
        let s = call.segments
        if s.count >= 2 {
            let designRead = s[1] == "_design" || s[1].hasPrefix("_design/")
            switch call.route {
            case .doc, .attachment:
                if designRead && (call.method == .get || call.method == .head) {
                    throw refused("Design documents")
                }
            case .allDocs where s[1] == "_design_docs" || s[1] == "_local_docs":
                throw refused(s[1])
            case .allDocs, .bulkDocs, .bulkGet, .revsDiff, .changes, .blipsync, .local, .ensureFullCommit:
                break
            case .view where s[1] == "_design", .find, .explain:
                break  // filtered by document (reduced views refused)
            case .view, .designInfo, .show, .list, .rewrite, .update:
                throw refused("Design functions")
            case .query, .index, .partition:
                throw refused("SQL++ queries, indexes and partitions")
            default:
                break
            }
        }
        let name = call.user, roles = call.userCtx.roles
        let reader = try await blocking { try index.reader(user: name, roles: roles, in: c) }
        call.reader = reader.all ? nil : reader
    }

    private static func refused(_ what: String) -> CouchError {
        CouchError(.forbidden, "forbidden",
                   "\(what) are open only to database admins on a database with a sync function: they are not filtered by channel.")
    }

    /// The answer to a reader asking for a revision outside its channels (Sync Gateway's: 403, so a missing
    /// document stays 404).
    static let hidden = CouchError(.forbidden, "forbidden", "You are not allowed to see this document.")

    /// Throws ``hidden`` unless the reader (nil: anyone) may see this revision of the document, by the revision's
    /// own routing (``ChannelIndex/visibleRevisions(_:in:to:)``).
    static func checkRevision(_ reader: ChannelIndex.Reader?, id: String, rev: RevID, in c: SetteeStore.Collection) throws {
        guard let reader, !id.hasPrefix("_local/") else { return }
        if try !ChannelIndex.of(c.database).isVisible(id, rev: rev, in: c, to: reader) { throw hidden }
    }
}
