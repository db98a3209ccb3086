import Foundation
import SetteeCore
import SetteeStore

/// A range of view rows in `(key, docid)` order: the encoded keys compare as bytes, document ids as UTF-8 bytes
/// (SQLite's BINARY collation, CouchDB's tie rule).
struct ViewRange {
    struct Bound {
        var key: [UInt8]
        /// With a document id the bound is on `(key, docid)`; without, on the key alone (every id of that key).
        var docID: String?
        var inclusive: Bool
    }
    var lower: Bound?
    var upper: Bound?

    static let all = ViewRange(lower: nil, upper: nil)

    /// The rows whose key equals `key`.
    static func exactly(_ key: [UInt8]) -> ViewRange {
        ViewRange(lower: Bound(key: key, docID: nil, inclusive: true), upper: Bound(key: key, docID: nil, inclusive: true))
    }

    /// Compares `(key, doc)` with a bound: the sign of row − bound (a bound without an id is compared on keys only).
    static func compare(_ key: [UInt8], _ doc: String, _ bound: Bound) -> Int {
        let c = compareBytes(key, bound.key)
        if c != 0 { return c }
        guard let id = bound.docID else { return 0 }
        var a = doc, b = id
        return a.withUTF8 { x in b.withUTF8 { y in compareBytes(UnsafeRawBufferPointer(x), UnsafeRawBufferPointer(y)) } }
    }

    /// memcmp order, shorter first on a common prefix.
    @inline(__always)
    static func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in compareBytes(x, y) } }
    }

    static func compareBytes(_ x: UnsafeRawBufferPointer, _ y: UnsafeRawBufferPointer) -> Int {
        let n = min(x.count, y.count)
        if n > 0, let px = x.baseAddress, let py = y.baseAddress {
            let c = memcmp(px, py, n)
            if c != 0 { return c < 0 ? -1 : 1 }
        }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    }

    func contains(_ key: [UInt8], _ doc: String) -> Bool {
        if let lower {
            let c = ViewRange.compare(key, doc, lower)
            if c < 0 || (c == 0 && !lower.inclusive) { return false }
        }
        if let upper {
            let c = ViewRange.compare(key, doc, upper)
            if c > 0 || (c == 0 && !upper.inclusive) { return false }
        }
        return true
    }

    /// SQL conditions over columns `key`, `docid` (of the table aliased `table`, if given), with their bindings
    /// appended to `values`.
    func sql(_ values: inout [SQLiteValue], table: String? = nil) -> String {
        let key = table.map { $0 + ".key" } ?? "key", docid = table.map { $0 + ".docid" } ?? "docid"
        var terms: [String] = []
        for (bound, isLower) in [(lower, true), (upper, false)] {
            guard let bound else { continue }
            let op = isLower ? (bound.inclusive ? ">=" : ">") : (bound.inclusive ? "<=" : "<")
            if let id = bound.docID {
                terms.append("(\(key), \(docid)) \(op) (?, ?)")
                values.append(.blob(bound.key))
                values.append(.text(id))
            } else {
                terms.append("\(key) \(op) ?")
                values.append(.blob(bound.key))
            }
        }
        return terms.isEmpty ? "1" : terms.joined(separator: " AND ")
    }
}
