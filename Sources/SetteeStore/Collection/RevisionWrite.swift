package import SetteeCore

/// One revision to store, the way CouchDB's `_bulk_docs` expresses a write.
///
/// The body holds the document's properties (including `_attachments` stubs) but none of the other
/// underscore fields: `_id`, `_rev`, `_deleted` and `_revisions` are carried by the other members.
package struct RevisionWrite: Sendable {
    /// How the new revision relates to what the store already has.
    public enum Mode: Sendable, Equatable {
        /// A local edit of `parent` (nil: a new document, or a re-creation over a tombstone).
        /// A stale or missing parent is a conflict (CouchDB's `new_edits=true`).
        case edit(parent: RevID?)
        /// A local edit of whatever revision currently wins (Couchbase Lite's last-write-wins save).
        case overwrite
        /// A revision produced elsewhere, with its ancestry newest first (CouchDB's `new_edits=false`):
        /// stored as given, creating a conflict branch when it does not extend a leaf.
        case replicated(history: [RevID])
    }

    public var id: String
    public var body: JSONObject
    public var deleted: Bool
    public var mode: Mode
    /// Attachment bodies to store with the revision, keyed by digest (`md5-<base64>`). Stored once per digest,
    /// in the same transaction as the revision.
    public var blobs: [(digest: String, data: [UInt8])]
    /// The encoding of blobs stored encoded (`gzip`), by digest; the others are identity.
    public var blobEncodings: [String: String] = [:]
    /// Attachment bodies staged in files (large uploads, written to disk as they arrived): copied into the
    /// database a piece at a time in the revision's transaction, never held whole in memory.
    package var stagedBlobs: [StagedBlob] = []
    /// Couchbase Lite's names (`sha1-<base64>` of the bytes) of attachment bodies, by digest: recorded with the
    /// bodies in the revision's transaction (``Database/blobDigest(sha1:)`` finds them by it).
    public var blobSHA1: [String: String] = [:]
    /// What the database's sync function made of this revision (its channels and grants, as JSON text), stored
    /// with the revision in its transaction (``Collection/routing(id:revisions:)`` reads it back). Nil when the
    /// database has no sync function: nothing is stored.
    package var routing: [UInt8]?
    /// When the document is to be purged (ms since 1970; the sync function's `expiry()`), set with the revision in
    /// its transaction (``Collection/setDocumentExpiration(id:expiration:)``'s table). Nil: unchanged.
    package var expiresAtMillis: Int64?

    public init(id: String, body: JSONObject, deleted: Bool = false, mode: Mode,
                blobs: [(digest: String, data: [UInt8])] = []) {
        self.id = id
        self.body = body
        self.deleted = deleted
        self.mode = mode
        self.blobs = blobs
    }
}

/// An attachment body waiting in a file to be stored: its digest (of the bytes as stored), how many bytes the
/// file holds and their encoding (`gzip`, or nil). The file is the caller's; a write only reads it.
package struct StagedBlob: Sendable {
    public var digest: String
    public var path: String
    public var length: Int
    public var encoding: String?

    public init(digest: String, path: String, length: Int, encoding: String?) {
        self.digest = digest
        self.path = path
        self.length = length
        self.encoding = encoding
    }
}

