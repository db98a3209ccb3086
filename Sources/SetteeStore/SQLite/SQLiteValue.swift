/// A value SQLite stores: one of its five storage classes.
///
/// ```swift
/// try statement.run([.text("doc1"), .integer(1), .null])
/// ```
package enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}
