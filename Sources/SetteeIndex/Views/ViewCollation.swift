import Foundation
import CICU
package import SetteeCore
import SetteeSQLPP

/// CouchDB's view collation as an order-preserving binary key, so SQLite compares view keys with `memcmp`.
///
/// Types order null < false < true < numbers < strings < arrays < objects. Numbers compare numerically (`1` and `1.0`
/// are equal). Strings compare by the Unicode Collation Algorithm as CouchDB does (ICU's root collator, tertiary
/// strength: case-insensitive first, lowercase before uppercase on a tie, `"a" < "A" < "aa" < "b"`, symbols before
/// letters). Arrays compare element by element, a prefix first. Objects compare member by member in the order they
/// were written (key, then value), fewer members first — CouchDB's rule.
///
/// The encoding is a type tag, then: nothing (null, booleans); 8 bytes of sign-flipped IEEE double (numbers); ICU's
/// sort key, which ends with its only 0 byte (strings); the members' encodings and a 0 byte (arrays, objects). Every
/// encoding is prefix-free, so arrays of them compare element-wise, and `key ‖ docid` orders by key then id.
///
/// Sort keys are one-way: the row keeps its key's JSON beside the encoding.
package final class ViewCollator {
    private let collator: OpaquePointer
    private var scratch: [UInt8] = Array(repeating: 0, count: 256)
    /// Sort keys of short strings met recently: a view's keys repeat (types, cities, tags) and an ICU sort key costs
    /// far more than a lookup. Emptied when it reaches ``sortKeyCacheLimit`` entries.
    /// (Keyed by UTF-8 bytes: Swift's `String` equality is canonical equivalence, and ICU's keys of two canonically
    /// equivalent strings may differ.)
    private var sortKeys: [[UInt8]: [UInt8]] = [:]
    static let sortKeyCacheLimit = 4_096
    private var cachingSortKeys = true
    private var sortKeyHits = 0
    private var sortKeyMisses = 0
    /// Strings longer than this (in UTF-8 bytes) are not cached: long keys seldom repeat.
    static let sortKeyCacheMaxLength = 64

    static let null: UInt8 = 0x01, falseTag: UInt8 = 0x02, trueTag: UInt8 = 0x03, number: UInt8 = 0x04
    static let string: UInt8 = 0x05, array: UInt8 = 0x06, object: UInt8 = 0x07
    /// `options.collation: "raw"` (Erlang's term order): numbers, then `false`, `null`, `true`, objects, arrays,
    /// and strings by their bytes. Its tags are other bytes, so one encoded key never passes for the other kind.
    static let rawNumber: UInt8 = 0x11, rawFalse: UInt8 = 0x12, rawNull: UInt8 = 0x13, rawTrue: UInt8 = 0x14
    static let rawObject: UInt8 = 0x15, rawArray: UInt8 = 0x16, rawString: UInt8 = 0x17

    /// Whether keys encode in raw order rather than CouchDB's default (ICU) collation.
    public var raw = false

    /// Runs `body` with a collator from a process-wide pool (opening an ICU collator costs more than matching a
    /// document): for the places that compare strings as CouchDB does outside a view — Mango selectors in
    /// `_changes` and replication filters, partial index filters.
    /// - Throws: ``SetteeError`` `.internalError` when ICU's collator can't be opened.
    public static func withPooled<T>(_ body: (ViewCollator) throws -> T) throws -> T {
        let collator = try pool.withLock { $0.popLast() } ?? ViewCollator()
        collator.raw = false
        defer { pool.withLock { if $0.count < 16 { $0.append(collator) } } }
        return try body(collator)
    }

    /// Collators not in use. (A collator is used by one thread at a time; the pool hands each out once.)
    private static let pool = PoolStorage()

    /// An NSLock-guarded stack of collators.
    // @unchecked: `items` is only touched under `lock`. Not a Mutex: a collator (a non-Sendable ICU handle) popped
    // out of it would have to be `sending`, which region checking can't prove of an element of the guarded array;
    // the pool hands each collator to one thread at a time.
    final class PoolStorage: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [ViewCollator] = []
        func withLock<T>(_ body: (inout [ViewCollator]) -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body(&items)
        }
    }

    /// Whether `selector` matches `document`, strings compared by ICU's collation as CouchDB compares them (by
    /// Unicode scalar if ICU can't be opened).
    public static func matches(_ selector: MangoSelector, _ document: JSON) -> Bool {
        (try? withPooled { selector.matches(document, strings: $0.compareStrings) }) ?? selector.matches(document)
    }

    /// Opens an ICU root collator. One instance is used by one thread at a time.
    public init() throws(SetteeError) {
        guard let c = settee_collator_open() else {
            throw SetteeError(.internalError, "ICU's root collator could not be opened (is libicu installed?)")
        }
        collator = c
    }

    deinit { settee_collator_close(collator) }

    /// The collation data's version (CouchDB's `collator_versions` in a design document's `_info`).
    public var version: String {
        var buffer = [CChar](repeating: 0, count: 64)
        let n = settee_collator_version(collator, &buffer, 64)
        guard n >= 0 else { return "" }
        return String(decoding: buffer.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The collatable encoding of `key`.
    public func encode(_ key: JSON) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        append(key, to: &out)
        return out
    }

    /// Compares two keys by CouchDB's collation: negative, zero or positive.
    public func compare(_ a: JSON, _ b: JSON) -> Int {
        let x = encode(a), y = encode(b)
        return x.lexicographicallyPrecedes(y) ? -1 : (x == y ? 0 : 1)
    }

    /// Compares two strings by the Unicode Collation Algorithm (ICU root, tertiary).
    public func compareStrings(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { pa in
            b.withUTF8 { pb in
                Int(settee_collator_compare(collator, pa.baseAddress, Int32(pa.count), pb.baseAddress, Int32(pb.count)))
            }
        }
    }

    /// Appends the encoding of `value`.
    public func append(_ value: JSON, to out: inout [UInt8]) {
        if raw { appendRaw(value, to: &out); return }
        switch value {
        case .null: out.append(Self.null)
        case .bool(let b): out.append(b ? Self.trueTag : Self.falseTag)
        case .int(let i): Self.appendNumber(Double(i), to: &out)
        case .double(let d): Self.appendNumber(d, to: &out)
        case .string(let s):
            out.append(Self.string)
            appendSortKey(s, to: &out)
        case .array(let items):
            out.append(Self.array)
            for item in items { append(item, to: &out) }
            out.append(0)
        case .object(let members):
            out.append(Self.object)
            for (k, v) in members {
                out.append(Self.string)
                appendSortKey(k, to: &out)
                append(v, to: &out)
            }
            out.append(0)
        }
    }

    private func appendRaw(_ value: JSON, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(Self.rawNull)
        case .bool(let b): out.append(b ? Self.rawTrue : Self.rawFalse)
        case .int(let i):
            out.append(Self.rawNumber)
            Self.appendNumber(Double(i), to: &out)
        case .double(let d):
            out.append(Self.rawNumber)
            Self.appendNumber(d, to: &out)
        case .string(let s):
            out.append(Self.rawString)
            Self.appendRawBytes(s, to: &out)
        case .array(let items):
            out.append(Self.rawArray)
            for item in items { appendRaw(item, to: &out) }
            out.append(0)
        case .object(let members):
            out.append(Self.rawObject)
            for (k, v) in members {
                out.append(Self.rawString)
                Self.appendRawBytes(k, to: &out)
                appendRaw(v, to: &out)
            }
            out.append(0)
        }
    }

    /// A string's UTF-8 bytes in byte order, ended by 0 (0 and 1 escaped as 1 1 and 1 2, so nothing else is 0).
    static func appendRawBytes(_ s: String, to out: inout [UInt8]) {
        for b in s.utf8 {
            if b <= 1 { out.append(1); out.append(b + 1) } else { out.append(b) }
        }
        out.append(0)
    }

    private func appendSortKey(_ s: String, to out: inout [UInt8]) {
        guard cachingSortKeys, s.utf8.count <= Self.sortKeyCacheMaxLength else { return appendComputedSortKey(s, to: &out) }
        let bytes = Array(s.utf8)
        if let known = sortKeys[bytes] {
            sortKeyHits += 1
            out.append(contentsOf: known)
            return
        }
        sortKeyMisses += 1
        let start = out.count
        appendComputedSortKey(s, to: &out)
        // Keys that don't repeat (ids, timestamps) would only fill the cache: it stops after a poor start.
        if sortKeyMisses == 128 && sortKeyHits < sortKeyMisses {
            cachingSortKeys = false
            sortKeys = [:]
            return
        }
        if sortKeys.count >= Self.sortKeyCacheLimit { sortKeys.removeAll(keepingCapacity: true) }
        sortKeys[bytes] = Array(out[start...])
    }

    private func appendComputedSortKey(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { utf8 in
            while true {
                let capacity = Int32(scratch.count)
                let n = scratch.withUnsafeMutableBufferPointer { buffer in
                    settee_collator_sort_key(collator, utf8.baseAddress, Int32(utf8.count), buffer.baseAddress, capacity)
                }
                if n < 0 {
                    // Not valid UTF-8 (Swift strings always are): order by bytes after every valid string.
                    out.append(0xFF)
                    out.append(0)
                    return
                }
                if n <= capacity {
                    out.append(contentsOf: scratch[0..<Int(n)])
                    return
                }
                scratch = Array(repeating: 0, count: Int(n))
            }
        }
    }

    /// Numbers encode as the value indexes use (sign-flipped IEEE doubles; `1` and `1.0` the same).
    static func appendNumber(_ d: Double, to out: inout [UInt8]) {
        KeyEncoding.appendNumber(d, to: &out)
    }

    /// The encoding of the first `n` elements of an encoded array key (the key itself when it isn't an array):
    /// `group_level` grouping, computed on the encoding without decoding it.
    public static func prefix(of encoded: [UInt8], elements n: Int) -> [UInt8] {
        guard encoded.first == array || encoded.first == rawArray else { return encoded }
        var i = 1
        for _ in 0..<n {
            guard i < encoded.count, encoded[i] != 0 else { return encoded }
            i = skip(encoded, at: i)
        }
        guard i < encoded.count, encoded[i] != 0 else { return encoded }
        return Array(encoded[0..<i]) + [0]
    }

    /// The position after the encoded value starting at `i`.
    static func skip(_ e: [UInt8], at start: Int) -> Int {
        var i = start
        guard i < e.count else { return i }
        switch e[i] {
        case number: return i + 9
        case rawNumber: return i + 10
        case string, rawString:
            i += 1
            while i < e.count && e[i] != 0 { i += 1 }
            return i + 1
        case array, rawArray:
            i += 1
            while i < e.count && e[i] != 0 { i = skip(e, at: i) }
            return i + 1
        case object, rawObject:
            i += 1
            while i < e.count && e[i] != 0 {
                i = skip(e, at: i)  // the member's key
                i = skip(e, at: i)  // its value
            }
            return i + 1
        default: return i + 1  // null, false, true
        }
    }
}
