import Foundation
import SetteeCore

/// Query-string options, decoded, with CouchDB's rules: unknown options are ignored, invalid values are 400s.
struct QueryOptions: Sendable {
    private(set) var values: [String: String] = [:]

    init(_ query: String?) {
        guard let query, !query.isEmpty else { return }
        for (key, value) in QueryOptions.pairs(query) { values[key] = value }
    }

    /// The decoded `name=value` pairs of a query string or form body, in order. As CouchDB's HTTP layer (mochiweb's
    /// `parse_qs`) reads them, `;` separates pairs as `&` does; a name without `=` has the value "".
    static func pairs(_ text: String) -> [(name: String, value: String)] {
        text.split(omittingEmptySubsequences: true) { $0 == "&" || $0 == ";" }.map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    static func decode(_ s: Substring) -> String {
        let plusFixed = s.replacingOccurrences(of: "+", with: " ")
        return plusFixed.removingPercentEncoding ?? plusFixed
    }

    subscript(_ name: String) -> String? { values[name] }

    /// These options with `extra` added (an option in both takes `extra`'s value).
    func merging(_ extra: [String: String]) -> QueryOptions {
        var copy = self
        copy.values.merge(extra) { $1 }
        return copy
    }

    func has(_ name: String) -> Bool { values[name] != nil }

    /// Sets one option (a rewrite's query).
    mutating func set(_ name: String, _ value: String) { values[name] = value }

    /// The options as a query string, percent-encoded, in name order.
    var encoded: String {
        values.sorted { $0.key < $1.key }.map { k, v in
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
            return (k.addingPercentEncoding(withAllowedCharacters: allowed) ?? k) + "="
                + (v.addingPercentEncoding(withAllowedCharacters: allowed) ?? v)
        }.joined(separator: "&")
    }

    /// `true`/`false`; absent → default; anything else → 400.
    func bool(_ name: String, default def: Bool = false) throws -> Bool {
        guard let v = values[name] else { return def }
        switch v.lowercased() {
        case "true", "": return true
        case "false": return false
        default: throw CouchError.badRequest("Invalid boolean parameter: \(name)=\(v)")
        }
    }

    /// A non-negative integer; absent → nil; invalid → 400.
    func int(_ name: String) throws -> Int? {
        guard let v = values[name] else { return nil }
        guard let n = Int(v), n >= 0 else {
            throw CouchError.badRequest("Invalid value for \(name): \"\(v)\", expected a non-negative integer")
        }
        return n
    }

    /// A JSON value (CouchDB's `startkey="abc"`, `keys=[…]`, `open_revs=[…]`); invalid → 400.
    func json(_ name: String) throws -> JSON? {
        guard let v = values[name] else { return nil }
        do {
            return try JSON.parse(v)
        } catch {
            throw CouchError.badRequest("Invalid JSON for \(name): \(error)")
        }
    }

    /// A JSON string option, also accepting a bare unquoted string.
    func jsonString(_ name: String) throws -> String? {
        guard let v = values[name] else { return nil }
        // CouchDB takes document ids here as they are (`startkey_docid=0` is the id "0"); a JSON string is
        // accepted too, unquoted.
        if case .string(let s)? = try? JSON.parse(v) { return s }
        return v
    }
}
