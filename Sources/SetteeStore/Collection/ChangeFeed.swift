package import SetteeCore

/// A collection's change feed as indexes and views follow it (the store's one reader of its document and purge
/// tables for them: followers never spell the store's tables): the documents changed after a sequence, in sequence
/// order, a batch at a time inside the caller's transaction. The value, array, full-text and vector indexes and
/// the views all read it through ``read(_:after:limit:db:_:)``, so each says only what it does with a change.
package enum ChangeFeed {
    /// How far a batch got.
    package struct Progress {
        /// The changes read.
        package let count: Int
        /// The highest sequence read (the starting sequence when none was).
        package let lastSeq: Int64
        /// Fewer changes than the batch allowed: the follower has absorbed every change.
        package let isComplete: Bool

        package init(count: Int, lastSeq: Int64, isComplete: Bool) {
            self.count = count
            self.lastSeq = lastSeq
            self.isComplete = isComplete
        }
    }

    /// The feed's current row: one changed document. Valid only inside the callback that receives it.
    package struct Change {
        fileprivate let row: Statement

        /// The document's row in the collection's table (what index entries point at).
        package var rowid: Int64 { row.int64(DocumentRowColumn.rowid) }
        package var docID: String { row.string(DocumentRowColumn.id) ?? "" }
        package var seq: Int64 { row.int64(DocumentRowColumn.seq) }
        package var revisionID: String { row.string(DocumentRowColumn.rev) ?? "" }
        package var flags: DocFlags { DocFlags(rawValue: row.int64(DocumentRowColumn.flags)) }
        package var isDeleted: Bool { flags.contains(.deleted) }

        /// The winning revision's body: its UTF-8 bytes, borrowed for the call.
        package func withBody<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
            try row.withTextBytes(DocumentRowColumn.body, body)
        }

        /// The body parsed, reading only `members` of it (nil: all of it).
        package func body(members: JSONMemberSelector?) throws -> JSON {
            try withBody { bytes in
                if let members { return try members.parseStored(bytes) }
                return try JSON.parse(bytes)
            }
        }

    }

    /// Calls `each` for up to `limit` documents changed after `sequence`, in sequence order.
    @discardableResult
    package static func read(_ collection: Collection, after sequence: Int64, limit: Int, db: Connection,
                             _ each: (Change) throws -> Void) throws -> Progress {
        try db.withStatement("SELECT \(DocumentTable.rowColumns("d")) FROM \(collection.docsTable) AS d WHERE d.seq > ? ORDER BY d.seq LIMIT ?",
                             [.integer(sequence), .integer(Int64(limit))]) { row in
            var count = 0
            var last = sequence
            while try row.step() {
                count += 1
                let change = Change(row: row)
                last = max(last, change.seq)
                try each(change)
            }
            return Progress(count: count, lastSeq: last, isComplete: count < limit)
        }
    }

    /// Calls `each` for up to `limit` live documents whose row follows `rowid` (up to row `last`), in table order (a
    /// first build reads the table front to back rather than through the sequence index); returns how many were
    /// read and the last row's id, or nil when there are no more.
    package static func readTable(_ collection: Collection, afterRowid rowid: Int64, through last: Int64, limit: Int,
                          db: Connection, _ each: (Change) throws -> Void) throws -> (count: Int, lastRowid: Int64)? {
        try db.withStatement("SELECT \(DocumentTable.rowColumns("d")) FROM \(collection.docsTable) AS d WHERE d.rowid > ? AND d.rowid <= ? ORDER BY d.rowid LIMIT ?",
                             [.integer(rowid), .integer(last), .integer(Int64(limit))]) { row in
            var count = 0
            var last = rowid
            while try row.step() {
                count += 1
                let change = Change(row: row)
                last = change.rowid
                if !change.isDeleted { try each(change) }
            }
            return count == 0 ? nil : (count, last)
        }
    }

    /// The highest sequence and the highest row id of `collection`'s documents (0 when it has none).
    package static func lastSequenceAndRow(_ collection: Collection, db: Connection) throws -> (seq: Int64, rowid: Int64) {
        // (Two statements: SQLite answers a lone max() from the index or the table's end, but both in one
        // statement by scanning the table.)
        (try db.int64("SELECT max(seq) FROM \(collection.docsTable)") ?? 0,
         try db.int64("SELECT max(rowid) FROM \(collection.docsTable)") ?? 0)
    }

    /// Whether documents of `collection` were purged after `sequence`: purges leave no change row, so a follower
    /// finds its orphaned entries by this.
    package static func anyPurged(_ collection: Collection, since sequence: Int64, db: Connection) throws -> Bool {
        try db.withStatement("SELECT 1 FROM purges WHERE collection = ? AND seq > ? LIMIT 1",
                             [.integer(collection.id), .integer(sequence)]) { try $0.step() }
    }
}
