/// Change-feed sequence values as clients send them (`since`, `Last-Event-ID`).
package enum ChangeSequence {
    /// The error for a `since` value that is not a sequence (CouchDB's wording).
    package static let malformed = SetteeError(.badRequest, "Malformed sequence supplied in 'since' parameter.")

    /// Parses a sequence a client sent back. Sequences are opaque to clients, so this accepts `N`, `"N"` and
    /// CouchDB-style `"N-…"` (the digits before the first non-digit), with surrounding quotes and spaces
    /// stripped; an empty value is 0.
    ///
    /// - Throws: ``SetteeError`` `.badRequest` (``malformed``) when no number can be read, or it overflows `UInt64`.
    package static func parse(_ text: String) throws(SetteeError) -> UInt64 {
        // Strip `"` and ` ` from both ends, scalar by scalar (what Foundation's `trimmingCharacters(in:)` did).
        let scalars = text.unicodeScalars
        var lower = scalars.startIndex
        var upper = scalars.endIndex
        func isTrimmed(_ s: Unicode.Scalar) -> Bool { s == "\"" || s == " " }
        while lower < upper, isTrimmed(scalars[lower]) { lower = scalars.index(after: lower) }
        while upper > lower, isTrimmed(scalars[scalars.index(before: upper)]) { upper = scalars.index(before: upper) }
        if lower == upper { return 0 }
        let trimmed = String(String.UnicodeScalarView(scalars[lower..<upper]))
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        guard let n = UInt64(digits) else { throw malformed }
        return n
    }
}
