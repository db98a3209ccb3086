package import SetteeCore

/// On whose behalf a write is made: a user's name and roles, as CouchDB's `userCtx` gives them to a database's
/// rules. A database's ``WriteAdmission`` judges every write by it.
///
/// ```swift
/// let alice = WriteContext(name: "alice", roles: ["editors"])
/// let outcomes = try collection.write(writes, as: alice)
/// ```
package struct WriteContext: Sendable, Equatable, Hashable {
    /// The user's name; nil for the node or the application itself.
    public var name: String?
    /// The user's roles (`_admin` for a server administrator).
    public var roles: [String]
    /// Whether this is the database's owner itself (``owner``) rather than a user of it.
    public let isOwner: Bool

    /// A user: `name` and `roles` as CouchDB's `userCtx` holds them.
    public init(name: String?, roles: [String]) {
        self.name = name
        self.roles = roles
        isOwner = false
    }

    private init(owner name: String?, roles: [String]) {
        self.name = name
        self.roles = roles
        isOwner = true
    }

    /// The database's owner: the application that opened it (writes through Couchbase Lite's API: `save`,
    /// `delete`, `inBatch`), or the node itself (its own bookkeeping documents), or whoever runs a command on the
    /// data directory. A server administrator (no name, `_admin`) to design functions; limits meant for what
    /// arrives from others (document size) don't apply to it.
    public static let owner = WriteContext(owner: nil, roles: ["_admin"])

    /// A server administrator without a name (CouchDB's admin context), not the owner: a node's replications
    /// write as this unless a user is named.
    public static let serverAdmin = WriteContext(name: nil, roles: ["_admin"])

    /// Whether the context has the server administrator's role.
    public var isServerAdmin: Bool { roles.contains("_admin") }

    /// `{"name": …, "roles": […]}`, as design functions receive a `userCtx`.
    public var json: JSON {
        ["name": name.map(JSON.string) ?? .null, "roles": .array(roles.map(JSON.string))]
    }
}

/// The rules a database applies to every write before it is stored, whatever carried the write: a save
/// through the Swift API, an HTTP request, a replicated revision, the command line.
///
/// A node installs one on every database it opens (``DatabaseConfiguration/admission``): CouchDB's
/// `validate_doc_update` functions, the `_users` rules (password hashing, who may change roles), design-document
/// rights and document size limits. ``Collection/write(_:as:)`` — the store's one write entry point, which every
/// save, delete and replicated revision goes through — runs it before the write transaction, so a new way of
/// writing can't bypass it.
///
/// Threading: called on the writing thread, outside the write transaction (it may read the collection and
/// run design functions). It must not write to the database itself.
package protocol WriteAdmission: Sendable {
    /// Judges a batch of writes to `collection` made on behalf of `context`: for each write, in order, the write
    /// to store (possibly changed, e.g. a password hashed) or the error that refuses it (`forbidden`,
    /// `unauthorized`, `too_large`, …; any other error a rule raised is the ``SetteeError/underlying`` error).
    ///
    /// - Throws: when the batch can't be judged at all (a design function's process failed): nothing is written.
    func admit(_ writes: [RevisionWrite], to collection: Collection,
               as context: WriteContext) throws -> [Result<RevisionWrite, SetteeError>]
}
