package import SetteeCore
package import SetteeStore

/// What another query language (SQL++, QueryBuilder) may read a Mango json index through.
///
/// A json index holds one row per document that has every one of its fields, keyed by the fields' values in
/// CouchDB's collation (ICU for strings). SQL++ compares strings by code point, so an index range over strings is
/// not a range of SQL++'s order; what does hold in both orders is *equality* (two values SQL++ finds equal have one
/// collation key) and the order of numbers. So another language reads a json index only as a superset of its
/// answer: rows whose leading columns equal the query's constants, then optionally a numeric range on the next
/// column, and evaluates its whole WHERE on each document read.
extension MangoIndex {
    /// The index's field paths, in column order (each a list of member names).
    public var fieldPaths: [[String]] { paths }

    /// Whether a query written in another language may read this index: a json index with no partial filter
    /// (which would leave out documents the query wants) and not partitioned (whose keys begin with a partition).
    public var isReadableByOtherQueries: Bool { kind == .json && partialFilter == nil && !partitioned && design != nil }

    /// The view table holding the index's rows, `(key BLOB, docid, id, doc, k, v)` with `doc` the document's rowid
    /// in the collection's table: created (empty) if the index was never built. Nil for `_all_docs`.
    public func rowTable(in collection: Collection) throws -> String? {
        try preparedView(in: collection)?.stored.table
    }

    /// Brings the index's rows up to date with the change feed (what `_find` does unless it says `update: false`).
    public func catchUp(in collection: Collection) throws {
        guard let view = try preparedView(in: collection) else { return }
        try view.manager.update(view.stored, definition: view.definition, collection: collection)
    }

    /// The index's view, registered on the collection (once per definition: a query that finds it registered
    /// doesn't build it again) and its stored index created as needed. Nil for `_all_docs`.
    func preparedView(in collection: Collection) throws
        -> (manager: ViewManager, stored: StoredView, definition: ViewDefinition)? {
        guard let design else { return nil }
        if ViewManager.definition(view: design.viewName, collection: collection)?.version != design.version(in: collection.database) {
            _ = design.register(on: collection)
        }
        let manager = try ViewManager.shared(for: collection.database)
        let (stored, definition) = try manager.prepare(view: design.viewName, collection: collection)
        return (manager, stored, definition)
    }

    /// Bounds on the row table's `key` column (inclusive both ends) holding every row whose leading columns equal
    /// `equal`, and whose next column, when given, lies between the numbers `lower` and `upper` (a bound that is not
    /// a number is left open: only numbers keep their order across the two collations).
    public static func keyBounds(equal: [JSON], lower: JSON? = nil, upper: JSON? = nil) throws -> (lower: [UInt8], upper: [UInt8]) {
        try ViewCollator.withPooled { collator in
            var prefix: [UInt8] = [ViewCollator.array]
            for value in equal { collator.append(value, to: &prefix) }
            var low = prefix, high = prefix
            if let lower, lower.doubleValue != nil { collator.append(lower, to: &low) }
            if let upper, upper.doubleValue != nil { collator.append(upper, to: &high) }
            high.append(0xFF)
            return (low, high)
        }
    }
}
