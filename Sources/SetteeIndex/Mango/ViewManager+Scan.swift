import SetteeCore
import SetteeStore

/// A view row with its document, as a Mango query reads a json index.
struct ScannedRow {
    /// The row's key as JSON text (parsed only where needed: a bookmark's last row, a covering index).
    let keyBytes: [UInt8]
    let documentID: String
    let revision: String
    let body: [UInt8]
    /// The document's revision tree when it has live conflicting leaves (nil otherwise).
    let conflictedTree: [UInt8]?
}

extension ViewManager {
    /// Rows of `view` in `range`, in key order (or reverse), each with its document's winning revision, handed to
    /// `body` one at a time in one read transaction until it returns false. Documents deleted since the view was
    /// last updated are skipped. (`CROSS JOIN` keeps SQLite from reading the documents first and sorting: the
    /// view's key order is the answer's order, and a page stops early.)
    func scan(_ view: StoredView, collection: Collection, range: ViewRange, descending: Bool,
              _ body: (ScannedRow) throws -> Bool) throws {
        try database.read { db in
            let order = descending ? "DESC" : "ASC"
            var values: [SQLiteValue] = []
            let condition = range.sql(&values, table: "v")
            let stmt = try db.prepare("""
                SELECT NULL, v.k, v.docid, \([.rev, .body, .flags, .tree].map { DocumentTable.column($0, "d") }.joined(separator: ", "))
                FROM \(view.table) AS v \(DocumentTable.join(collection, as: "d", onRowID: "v.doc"))
                WHERE \(condition) ORDER BY v.key \(order), v.docid \(order), v.id \(order)
                """)
            defer { stmt.reset() }
            stmt.bind(values)
            while try stmt.step() {
                let flags = DocFlags(rawValue: stmt.int64(5))
                if flags.contains(.deleted) { continue }
                let row = ScannedRow(keyBytes: stmt.withTextBytes(1) { Array($0) },
                                     documentID: stmt.string(2) ?? "", revision: stmt.string(3) ?? "",
                                     body: stmt.blob(4) ?? [],
                                     conflictedTree: flags.contains(.conflicted) ? stmt.blob(6) : nil)
                if try !body(row) { return }
            }
        }
    }
}
