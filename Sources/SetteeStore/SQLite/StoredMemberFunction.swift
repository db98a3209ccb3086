import CSQLite
import SetteeCore

/// `settee_member(body, path)`: a member of a stored body, for the SQL a query runs over the document table.
///
/// A query's scan asks SQLite to test its numeric and boolean comparisons before a body reaches Swift (the
/// planner's prefilter). `json_extract` parses every body in full for that; this function finds the member the way
/// the store reads its own bodies (``JSON/locateStoredMember(_:path:)``: no key repeats, so the scan stops at the
/// key, building nothing), and answers as `json_extract` does for those comparisons: an integer as an integer, any
/// other number as a real, `true`/`false` as 1/0, `null` or nothing as NULL, and a string, array or object as
/// text — which SQLite orders after every number. `path` is `$.key` or `$.key.key…` (plain keys, as the planner
/// writes them). A body the scan can't follow is parsed in full.
///
/// Registered on every connection (``Connection/init(path:readOnly:)``), deterministic and innocuous (no side
/// effects), so SQLite may use it in any statement.
enum StoredMemberFunction {
    static let name = "settee_member"

    static func register(on db: OpaquePointer) {
        sqlite3_create_function_v2(db, name, 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nil,
                                   { context, count, arguments in
                                       guard let context, count == 2, let arguments else { return }
                                       StoredMemberFunction.call(context, body: arguments[0], path: arguments[1])
                                   }, nil, nil, nil)
    }

    private static func call(_ context: OpaquePointer, body: OpaquePointer?, path: OpaquePointer?) {
        guard let body, let path, sqlite3_value_type(body) != SQLITE_NULL,
              let pathText = sqlite3_value_text(path) else {
            sqlite3_result_null(context)
            return
        }
        // (`sqlite3_value_blob` before `sqlite3_value_bytes`, as SQLite documents.)
        let bodyBytes = sqlite3_value_blob(body)
        let bodyCount = Int(sqlite3_value_bytes(body))
        guard bodyCount > 0, let bodyBytes else {
            sqlite3_result_null(context)
            return
        }
        let pathBytes = UnsafeRawBufferPointer(start: pathText, count: Int(sqlite3_value_bytes(path)))
        // `$.a.b` → ["a", "b"]
        guard pathBytes.count > 2, pathBytes[0] == UInt8(ascii: "$"), pathBytes[1] == UInt8(ascii: ".") else {
            sqlite3_result_null(context)
            return
        }
        // The path's keys walked in place (no array of them per row).
        let bytes = UnsafeRawBufferPointer(start: bodyBytes, count: bodyCount)
        var found = StoredMember.value(0..<bodyCount)
        var start = 2
        for i in 2...pathBytes.count where i == pathBytes.count || pathBytes[i] == UInt8(ascii: ".") {
            guard case .value(let range) = found else { break }
            found = JSON.locateStoredMember(bytes, in: range, key: UnsafeRawBufferPointer(rebasing: pathBytes[start..<i]))
            start = i + 1
        }
        switch found {
        case .missing:
            sqlite3_result_null(context)
        case .value(let range):
            result(context, UnsafeRawBufferPointer(rebasing: bytes[range]))
        case .undecided:
            // Not a body the store wrote (or an escaped key on the way): the full parser decides.
            guard case .object(let object)? = try? JSON.parse(bytes) else {
                sqlite3_result_null(context)
                return
            }
            var value: JSON? = .object(object)
            for key in pathBytes[2...].split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
                guard case .object(let o)? = value else { value = nil; break }
                value = o[String(decoding: key, as: UTF8.self)]
            }
            guard let value else {
                sqlite3_result_null(context)
                return
            }
            value.serializedBytes.withUnsafeBytes { result(context, $0) }
        }
    }

    /// A JSON value's bytes as `json_extract` would answer them.
    private static func result(_ context: OpaquePointer, _ value: UnsafeRawBufferPointer) {
        guard let first = value.first else {
            sqlite3_result_null(context)
            return
        }
        switch first {
        case UInt8(ascii: "t"): sqlite3_result_int64(context, 1)
        case UInt8(ascii: "f"): sqlite3_result_int64(context, 0)
        case UInt8(ascii: "n"): sqlite3_result_null(context)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            if let integer = Self.integer(value) {
                sqlite3_result_int64(context, integer)
            } else if let number = Double(String(decoding: value, as: UTF8.self)) {
                sqlite3_result_double(context, number)
            } else {
                sqlite3_result_null(context)
            }
        default:
            // A string, array or object: text, which orders after every number.
            sqlite3_result_text(context, value.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(value.count),
                                csqlite_transient())
        }
    }

    /// An integer literal (`-?[0-9]+`) that fits 64 bits, else nil.
    private static func integer(_ value: UnsafeRawBufferPointer) -> Int64? {
        var i = 0
        let negative = value[0] == UInt8(ascii: "-")
        if negative { i = 1 }
        guard i < value.count, value.count - i <= 18 else { return nil }
        var n: Int64 = 0
        while i < value.count {
            let c = value[i]
            guard c >= 0x30 && c <= 0x39 else { return nil }
            n = n * 10 + Int64(c - 0x30)
            i += 1
        }
        return negative ? -n : n
    }
}
