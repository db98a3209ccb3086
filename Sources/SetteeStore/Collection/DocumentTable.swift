/// The bits of a document row's `flags` column (`docs_<collection id>.flags`).
package struct DocFlags: OptionSet, Sendable, Hashable {
    package let rawValue: Int64
    package init(rawValue: Int64) { self.rawValue = rawValue }

    /// The winning revision is a deletion (the document is a tombstone).
    package static let deleted = DocFlags(rawValue: 1)
    /// More than one leaf is live: the document is in conflict.
    package static let conflicted = DocFlags(rawValue: 2)
    /// The winning revision's body has `_attachments`.
    package static let hasAttachments = DocFlags(rawValue: 4)

    /// The flags of a document row whose winning revision is `deleted`, with `liveLeaves` live leaves and
    /// attachments or not.
    package init(deleted: Bool, liveLeaves: Int = 1, hasAttachments: Bool) {
        var flags: DocFlags = deleted ? .deleted : []
        if liveLeaves > 1 { flags.insert(.conflicted) }
        if hasAttachments { flags.insert(.hasAttachments) }
        self = flags
    }
}

/// A collection's document table, `docs_<collection id>`, as code outside the store reads it in its own SQL (the
/// query planner and executor, the view and Mango scans): the columns of a document row and the conditions on its
/// flags. The store owns the table and its encoding; nothing else spells a flag bit.
///
/// ```swift
/// let sql = "SELECT \(DocumentTable.rowColumns("d")) FROM \(collection.docsTable) AS d WHERE \(DocumentTable.live("d"))"
/// ```
package enum DocumentTable {
    /// The columns of a document row, in the order ``DocumentRowColumn`` numbers them, for the table aliased `alias`;
    /// `body` in place of the row's body when given (a covering index's value).
    package static func rowColumns(_ alias: String, body: String? = nil) -> String {
        "\(alias).rowid, \(alias).id, \(alias).seq, \(alias).rev, \(alias).flags, \(body ?? "\(alias).body")"
    }

    /// True for a row whose winning revision is live (not a tombstone).
    package static func live(_ alias: String? = nil) -> String { lacks(.deleted, alias) }

    /// True for a row that has every flag of `flags`.
    package static func has(_ flags: DocFlags, _ alias: String? = nil) -> String {
        "(\(column(alias)) & \(flags.rawValue)) = \(flags.rawValue)"
    }

    /// True for a row that has none of `flags`.
    package static func lacks(_ flags: DocFlags, _ alias: String? = nil) -> String {
        "(\(column(alias)) & \(flags.rawValue)) = 0"
    }

    /// 1 for a tombstone, 0 for a live row (to count tombstones with `sum`).
    package static func deletedBit(_ alias: String? = nil) -> String { "(\(column(alias)) & \(DocFlags.deleted.rawValue))" }

    /// The condition of the partial index of tombstones, `docs_<cid>_deleted`: a query that names the index
    /// (`INDEXED BY`) must use exactly this text for SQLite to accept it.
    package static let tombstoneIndexCondition = "flags & \(DocFlags.deleted.rawValue)"

    /// `flags` after an update that keeps the row's attachment bit and sets the others from a bound parameter.
    package static let flagsKeepingAttachments = "(flags & \(DocFlags.hasAttachments.rawValue)) | ?"

    private static func column(_ alias: String?) -> String { alias.map { "\($0).flags" } ?? "flags" }

    // MARK: The table and its columns, for other targets' SQL

    /// A column of the document table (the row's `rowid`, the document id, its last sequence, winning revision,
    /// flags, winning body, revision tree).
    package enum Column: String, Sendable {
        case rowid, id, seq, rev, flags, body, tree
    }

    /// `collection`'s document table aliased `alias` (for a `FROM`): `docs_3 AS d`.
    package static func table(_ collection: Collection, as alias: String) -> String {
        "\(collection.docsTable) AS \(alias)"
    }

    /// `column` of the document table aliased `alias`: `d.rowid`.
    package static func column(_ column: Column, _ alias: String) -> String { "\(alias).\(column.rawValue)" }

    /// The document rows that `reference` (another table's column holding a document row's `rowid`) points at:
    /// `CROSS JOIN docs_3 AS d ON d.rowid = i.doc`. `readingOtherFirst` (the default) makes it a cross join, which
    /// keeps SQLite reading the other table first (an index's order is the answer's); false leaves the order to
    /// SQLite's planner (a plain `JOIN`: a condition on the document's id then reads the document first).
    package static func join(_ collection: Collection, as alias: String, onRowID reference: String,
                             readingOtherFirst: Bool = true) -> String {
        "\(readingOtherFirst ? "CROSS JOIN" : "JOIN") \(table(collection, as: alias)) ON \(column(.rowid, alias)) = \(reference)"
    }

    /// Every document row's `rowid`, as a subquery (`… WHERE doc NOT IN (<this>)` removes what points at purged
    /// documents).
    package static func allRowIDs(_ collection: Collection) -> String { "SELECT rowid FROM \(collection.docsTable)" }

    /// The collection's last sequence (0 when empty), as one statement.
    package static func lastSequence(_ collection: Collection) -> String {
        "SELECT coalesce(max(seq), 0) FROM \(collection.docsTable)"
    }

    /// A document's revision tree by its row, as one statement bound with the `rowid`.
    package static func treeByRowID(_ collection: Collection) -> String {
        "SELECT tree FROM \(collection.docsTable) WHERE rowid = ?"
    }
}

/// The positions of ``DocumentTable/rowColumns(_:)`` in a result row.
package enum DocumentRowColumn {
    package static let rowid: Int32 = 0
    package static let id: Int32 = 1
    package static let seq: Int32 = 2
    package static let rev: Int32 = 3
    package static let flags: Int32 = 4
    package static let body: Int32 = 5
}
