/// A value SQLite stores: one of its five storage classes.
///
/// ```swift
/// try statement.run([.text("doc1"), .integer(1), .null])
/// ```
package enum SQLiteValue: Sendable, Equatable {
    /// SQL NULL.
    case null
    /// A 64-bit signed integer.
    case integer(Int64)
    /// An IEEE 754 double.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Raw bytes (an empty array is an empty blob, not NULL).
    case blob([UInt8])
}
