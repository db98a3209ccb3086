import Foundation
import Testing
import Settee

/// Mango `_find` over a real database: every operator against a reference evaluation written here from CouchDB's
/// documented semantics, over random documents, with and without json indexes; planning, paging and projection.
@Suite(.serialized) struct MangoFindTests {
    // MARK: Random documents

    /// Mixed case: CouchDB orders strings by ICU's collation ("apple" < "Apple" < "banana" < "Banana"), not by
    /// code point.
    static let words = ["apple", "Apple", "banana", "Banana", "cherry", "date", "elder", "Elder", "fig"]
    /// The reference's string order (one test at a time uses it: the suite is serialized).
    nonisolated(unsafe) static let collator = try! ViewCollator()

    static func randomDocuments(_ count: Int, seed: UInt64) -> [JSON] {
        var rng = SeededGenerator(seed: seed)
        func maybe(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
        return (0..<count).map { i in
            var doc: JSONObject = ["_id": .string(String(format: "d%03d", i))]
            // `a`: mostly small integers, sometimes a string, null, a double or missing.
            if maybe(0.9) {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0: doc["a"] = .string(words.randomElement(using: &rng)!)
                case 1: doc["a"] = .null
                case 2: doc["a"] = .double(Double(Int.random(in: 0..<10, using: &rng)) + 0.5)
                default: doc["a"] = .int(Int64.random(in: 0..<10, using: &rng))
                }
            }
            if maybe(0.85) { doc["b"] = .string(words.randomElement(using: &rng)!) }
            if maybe(0.8) {
                doc["tags"] = .array((0..<Int.random(in: 0..<4, using: &rng)).map { _ in .string(words.randomElement(using: &rng)!) })
            }
            if maybe(0.7) {
                var n: JSONObject = ["x": .int(Int64.random(in: 0..<5, using: &rng))]
                if maybe(0.5) { n["y"] = .string(words.randomElement(using: &rng)!) }
                doc["n"] = .object(n)
            }
            if maybe(0.3) { doc["dot.key"] = .int(Int64.random(in: 0..<3, using: &rng)) }
            if maybe(0.5) { doc["flag"] = .bool(maybe(0.5)) }
            return .object(doc)
        }
    }

    // MARK: Reference evaluation (CouchDB's documented semantics, written independently of MangoSelector)

    static func reference(_ selector: JSON, _ doc: JSON) -> Bool {
        guard case .object(let members) = selector else { return false }
        return members.allSatisfy { key, value in
            switch key {
            case "$and": return value.arrayValue!.allSatisfy { reference($0, doc) }
            case "$or": return value.arrayValue!.isEmpty || value.arrayValue!.contains { reference($0, doc) }
            case "$nor": return value.arrayValue!.allSatisfy { negated($0, doc) }
            case "$not": return negated(value, doc)
            default: return field(path(key), value, doc)
            }
        }
    }

    /// `$not` and `$nor` as CouchDB applies them: pushed down to the fields (De Morgan), where a missing field
    /// matches only a negated `$exists: true`.
    static func negated(_ selector: JSON, _ doc: JSON) -> Bool {
        guard case .object(let members) = selector else { return false }
        return members.contains { key, value in
            switch key {
            case "$and": return value.arrayValue!.contains { negated($0, doc) }
            case "$or": return value.arrayValue!.allSatisfy { negated($0, doc) }
            case "$nor": return value.arrayValue!.contains { reference($0, doc) }
            case "$not": return reference(value, doc)
            default:
                let path = path(key)
                if case .object(let ops) = value, ops.count == 1, ops[0].key == "$exists" {
                    return (lookup(path, doc) != nil) != (ops[0].value.boolValue ?? false)
                }
                guard lookup(path, doc) != nil else { return false }
                return !field(path, value, doc)
            }
        }
    }

    static func path(_ name: String) -> [String] {
        var parts: [String] = [], current = "", escaped = false
        for ch in name {
            if ch == "\\" { escaped = true; continue }
            if ch == "." && !escaped { parts.append(current); current = "" } else { current.append(ch) }
            escaped = false
        }
        parts.append(current)
        return parts
    }

    static func lookup(_ path: [String], _ value: JSON) -> JSON? {
        var current = value
        for step in path {
            switch current {
            case .object(let o): guard let next = o[step] else { return nil }; current = next
            case .array(let a): guard let i = Int(step), a.indices.contains(i) else { return nil }; current = a[i]
            default: return nil
            }
        }
        return current
    }

    /// A condition on a field: an object of operators, a nested field selector, or an implicit `$eq`.
    static func field(_ path: [String], _ condition: JSON, _ doc: JSON) -> Bool {
        guard case .object(let ops) = condition, let first = ops.first?.key, first.hasPrefix("$") || ops.isEmpty else {
            if case .object(let nested) = condition, !nested.isEmpty {
                // {"n": {"x": 1}} is {"n.x": 1}.
                return nested.allSatisfy { field(path + Self.path($0.key), $0.value, doc) }
            }
            guard let v = lookup(path, doc) else { return false }
            return compare(v, condition) == 0
        }
        return ops.allSatisfy { op, arg in
            let value = lookup(path, doc)
            if op == "$exists" { return (value != nil) == (arg.boolValue ?? false) }
            if op == "$not" {
                guard value != nil else { return false }
                return !field(path, arg, doc)
            }
            guard let v = value else { return false }
            switch op {
            case "$eq": return compare(v, arg) == 0
            case "$ne": return compare(v, arg) != 0
            case "$gt": return compare(v, arg) > 0
            case "$gte": return compare(v, arg) >= 0
            case "$lt": return compare(v, arg) < 0
            case "$lte": return compare(v, arg) <= 0
            case "$in":
                let args = arg.arrayValue!
                if case .array(let items) = v { return items.contains { i in args.contains { compare(i, $0) == 0 } } }
                return args.contains { compare(v, $0) == 0 }
            case "$nin":
                let args = arg.arrayValue!
                if case .array(let items) = v { return !items.contains { i in args.contains { compare(i, $0) == 0 } } }
                return !args.contains { compare(v, $0) == 0 }
            case "$type":
                let name: String
                switch v {
                case .null: name = "null"
                case .bool: name = "boolean"
                case .int, .double: name = "number"
                case .string: name = "string"
                case .array: name = "array"
                case .object: name = "object"
                }
                return name == arg.stringValue
            case "$size": if case .array(let items) = v { return items.count == Int(arg.intValue!) }; return false
            case "$mod":
                guard case .int(let n) = v, case .array(let dr) = arg else { return false }
                return n % dr[0].intValue! == dr[1].intValue!
            case "$regex":
                guard case .string(let s) = v else { return false }
                return s.range(of: arg.stringValue!, options: .regularExpression) != nil
            case "$beginsWith":
                guard case .string(let s) = v else { return false }
                return s.hasPrefix(arg.stringValue!)
            case "$all":
                guard case .array(let items) = v else { return false }
                let args = arg.arrayValue!
                return !args.isEmpty && args.allSatisfy { a in items.contains { compare($0, a) == 0 } }
            case "$elemMatch":
                guard case .array(let items) = v else { return false }
                return items.contains { element(arg, $0) }
            case "$allMatch":
                guard case .array(let items) = v, !items.isEmpty else { return false }
                return items.allSatisfy { element(arg, $0) }
            case "$keyMapMatch":
                guard case .object(let o) = v else { return false }
                return o.contains { element(arg, .string($0.key)) }
            default: return false
            }
        }
    }

    /// A sub-selector applied to an array element (or key) itself: operators, or fields inside it.
    static func element(_ selector: JSON, _ value: JSON) -> Bool {
        guard case .object(let o) = selector else { return compare(value, selector) == 0 }
        if o.allSatisfy({ $0.key.hasPrefix("$") && !["$and", "$or", "$nor", "$not"].contains($0.key) }) {
            return field([], selector, value)
        }
        return reference(selector, value)
    }

    /// CouchDB's collation: null < false < true < numbers < strings < arrays < objects.
    static func compare(_ a: JSON, _ b: JSON) -> Int {
        func rank(_ v: JSON) -> Int {
            switch v {
            case .null: return 0
            case .bool(let f): return f ? 2 : 1
            case .int, .double: return 3
            case .string: return 4
            case .array: return 5
            case .object: return 6
            }
        }
        if rank(a) != rank(b) { return rank(a) < rank(b) ? -1 : 1 }
        switch (a, b) {
        case (.string(let x), .string(let y)): return collator.compareStrings(x, y).signum()
        case (.array(let x), .array(let y)):
            for (l, r) in zip(x, y) { let c = compare(l, r); if c != 0 { return c } }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case (.object(let x), .object(let y)): return x == y ? 0 : (x.count < y.count ? -1 : 1)
        default:
            let x = a.doubleValue ?? 0, y = b.doubleValue ?? 0
            return x == y ? 0 : (x < y ? -1 : 1)
        }
    }

    // MARK: Fixtures

    static let selectors: [String] = [
        #"{"a": 3}"#, #"{"a": {"$eq": 3}}"#, #"{"a": {"$ne": 3}}"#, #"{"a": {"$gt": 4}}"#, #"{"a": {"$gte": 4, "$lt": 7}}"#,
        #"{"a": {"$lte": 2}}"#, #"{"a": {"$gt": "banana"}}"#, #"{"a": {"$gt": null}}"#, #"{"a": {"$exists": false}}"#,
        #"{"a": {"$exists": true}}"#, #"{"a": {"$type": "string"}}"#, #"{"a": {"$type": "null"}}"#,
        #"{"a": {"$in": [1, 2, "fig"]}}"#, #"{"a": {"$nin": [1, 2]}}"#, #"{"a": {"$mod": [3, 1]}}"#,
        #"{"b": {"$regex": "^[a-c]"}}"#, #"{"b": {"$beginsWith": "ch"}}"#, #"{"b": {"$gte": "c", "$lt": "e"}}"#, #"{"b": {"$gt": "apple", "$lt": "banana"}}"#,
        #"{"tags": {"$size": 2}}"#, #"{"tags": {"$all": ["apple"]}}"#, #"{"tags": {"$elemMatch": {"$eq": "fig"}}}"#,
        #"{"tags": {"$allMatch": {"$gt": "b"}}}"#, #"{"tags": {"$in": ["date"]}}"#, #"{"tags.0": "apple"}"#,
        #"{"n.x": {"$gt": 2}}"#, #"{"n": {"x": 1}}"#, #"{"n": {"$keyMapMatch": {"$eq": "y"}}}"#, #"{"n.y": {"$exists": true}}"#,
        #"{"dot\\.key": 1}"#, #"{"flag": true}"#, #"{"flag": {"$ne": true}}"#,
        #"{"$or": [{"a": 1}, {"b": "fig"}]}"#, #"{"$and": [{"a": {"$gt": 2}}, {"b": {"$lt": "d"}}]}"#,
        #"{"$nor": [{"a": 1}, {"a": 2}]}"#, #"{"a": {"$not": {"$gt": 5}}}"#, #"{"$not": {"b": "apple"}}"#,
        #"{"a": {"$gt": 1}, "b": "cherry"}"#, #"{"_id": {"$gt": "d050"}}"#, #"{"_id": {"$lt": "d010"}, "a": {"$exists": true}}"#,
    ]

    static func makeDatabase(_ dir: TempDir, indexes: [String]) throws -> Settee.Collection {
        let db = try dir.open()
        let c = try db.defaultCollection()
        let docs = randomDocuments(200, seed: 20261127)
        _ = try c.write(docs.map { doc in
            var body = doc.objectValue!
            let id = body.removeValue(forKey: "_id")!.stringValue!
            return RevisionWrite(id: id, body: body, mode: .edit(parent: nil))
        })
        for index in indexes {
            let creation = try MangoIndex.creation(try JSON.parse(index))
            let body = try MangoIndex.adding(creation, to: nil)!
            try c.write(RevisionWrite(id: creation.designDocumentID, body: body, mode: .edit(parent: nil)))
        }
        return c
    }

    static func ids(_ result: MangoResult) -> [String] {
        result.docs.compactMap { $0["_id"]?.stringValue }
    }

    // MARK: Tests

    @Test func everyOperatorMatchesTheReference() throws {
        let dir = TempDir()
        let c = try Self.makeDatabase(dir, indexes: [])
        let docs = Self.randomDocuments(200, seed: 20261127)
        for text in Self.selectors {
            let selector = try JSON.parse(text)
            let expected = docs.filter { Self.reference(selector, $0) }.compactMap { $0["_id"]?.stringValue }
            let query = try MangoQuery(["selector": selector, "limit": 1000])
            let result = try MangoExecutor.find(query, in: c)
            #expect(Self.ids(result) == expected, "\(text)")
            #expect(result.warnings.first == "No matching index found, create an index to optimize query time.")
        }
    }

    @Test func indexedQueriesMatchTheReference() throws {
        let dir = TempDir()
        let c = try Self.makeDatabase(dir, indexes: [#"{"index": {"fields": ["a"]}, "ddoc": "by-a", "name": "a"}"#,
                                                     #"{"index": {"fields": ["b", "a"]}, "ddoc": "by-b", "name": "ba"}"#,
                                                     #"{"index": {"fields": ["n.x"]}, "ddoc": "by-nx", "name": "nx"}"#])
        let docs = Self.randomDocuments(200, seed: 20261127)
        var used: Set<String> = []
        for text in Self.selectors {
            let selector = try JSON.parse(text)
            let expected = docs.filter { Self.reference(selector, $0) }.map { $0["_id"]!.stringValue! }
            let query = try MangoQuery(["selector": selector, "limit": 1000])
            let explain = try MangoExecutor.explain(query, in: c)
            used.insert(explain["index"]?["name"]?.stringValue ?? "")
            // Index order is key order: compare as sets, and the order against the index's key.
            let found = Self.ids(try MangoExecutor.find(query, in: c))
            #expect(Set(found) == Set(expected), "\(text)")
            #expect(found.count == expected.count, "\(text)")
        }
        #expect(used == ["_all_docs", "a", "ba", "nx"])
        // A sort the index gives, both directions, with paging by bookmark.
        let numeric = docs.filter { doc in
            switch doc["a"] {
            case .int(let v)?: return v > 2
            case .double(let v)?: return v > 2
            default: return false
            }
        }
        let ascending = numeric.sorted { (($0["a"]!.doubleValue!, $0["_id"]!.stringValue!) < ($1["a"]!.doubleValue!, $1["_id"]!.stringValue!)) }
            .map { $0["_id"]!.stringValue! }
        var pages: [String] = []
        var bookmark: JSON = .null
        repeat {
            let query = try MangoQuery(["selector": ["a": ["$gt": 2, "$type": "number"]], "sort": ["a"], "limit": 7,
                                        "bookmark": bookmark])
            let result = try MangoExecutor.find(query, in: c)
            pages += Self.ids(result)
            if result.docs.isEmpty { break }
            bookmark = .string(result.bookmark!)
        } while true
        #expect(pages == ascending)
        let descending = try MangoExecutor.find(try MangoQuery(["selector": ["a": ["$gt": 2, "$lt": 100]], "sort": [["a": "desc"]],
                                                                "limit": 5, "fields": ["_id", "a"]]), in: c)
        #expect(descending.docs.map { $0["a"]!.doubleValue! } == descending.docs.map { $0["a"]!.doubleValue! }.sorted(by: >))
        #expect(descending.docs.allSatisfy { $0.objectValue!.keys.sorted() == ["_id", "a"] })
    }

    @Test func planningFollowsCouchDB() throws {
        let dir = TempDir()
        let c = try Self.makeDatabase(dir, indexes: [#"{"index": {"fields": ["b", "a"]}, "ddoc": "ba", "name": "ba"}"#,
                                                     #"{"index": {"fields": ["b"]}, "ddoc": "b", "name": "b"}"#])
        func index(_ body: JSON) throws -> String? {
            try MangoExecutor.explain(try MangoQuery(body), in: c)["index"]?["name"]?.stringValue
        }
        // Fewest columns wins a tie; more overlap with the selector wins over fewer columns.
        #expect(try index(["selector": ["b": "fig"]]) == "b")
        #expect(try index(["selector": ["b": "fig", "a": ["$gt": 1]]]) == "ba")
        // A sort the index's order gives after a constant column; a sort no index gives is refused.
        #expect(try index(["selector": ["b": "fig", "a": ["$gt": 0]], "sort": ["a"]]) == "ba")
        #expect(throws: MangoError.self) { try MangoExecutor.find(try MangoQuery(["selector": ["a": ["$gt": 0]], "sort": ["a"]]), in: c) }
        // use_index picks an index; one that can't serve falls back with a warning, or fails without fallback.
        #expect(try index(["selector": ["b": "fig", "a": ["$gt": 1]], "use_index": "b"]) == "b")
        let fallback = try MangoExecutor.find(try MangoQuery(["selector": ["a": 1], "use_index": "b"]), in: c)
        #expect(fallback.warnings.contains("_design/b was not used because it does not contain a valid index for this query."))
        #expect(throws: MangoError.self) {
            try MangoExecutor.find(try MangoQuery(["selector": ["a": 1], "use_index": "b", "allow_fallback": false]), in: c)
        }
        // A contradictory range reads nothing.
        let empty = try MangoExecutor.find(try MangoQuery(["selector": ["a": ["$gt": 5, "$lt": 2]]]), in: c)
        #expect(empty.docs.isEmpty && empty.bookmark == nil)
        // Bad requests are CouchDB's errors.
        for (body, error) in [(#"{"selector": {"a": {"$foo": 1}}}"#, "invalid_operator"), (#"{"selector": 1}"#, "invalid_selector_json"),
                              (#"{"selector": {}, "limit": -1}"#, "invalid_non_neg_integer"), (#"{"selector": {}, "foo": 1}"#, "invalid_key"),
                              (#"{"selector": {}, "sort": [{"a": "asc"}, {"b": "desc"}]}"#, "unsupported_mixed_sort"),
                              (#"{"limit": 1}"#, "missing_required_key")] {
            #expect { try MangoQuery(try JSON.parse(body)) } throws: { ($0 as? MangoError)?.error == error }
        }
    }

    @Test func executionStatsAndCoveringIndexes() throws {
        let dir = TempDir()
        let c = try Self.makeDatabase(dir, indexes: [#"{"index": {"fields": ["b", "a"]}, "ddoc": "ba", "name": "ba"}"#])
        let stats = try MangoExecutor.find(try MangoQuery(["selector": ["b": "fig", "a": ["$gt": 3]], "execution_stats": true]), in: c)
        #expect(stats.executionStats?["results_returned"] == .int(Int64(stats.docs.count)))
        #expect(stats.executionStats?["total_docs_examined"]?.intValue ?? 0 >= Int64(stats.docs.count))
        // Fields the index holds are answered from its keys without reading documents.
        let covered = try MangoExecutor.find(try MangoQuery(["selector": ["b": "fig", "a": ["$gt": 3]], "fields": ["_id", "a"],
                                                             "execution_stats": true]), in: c)
        #expect(covered.executionStats?["total_docs_examined"] == 0)
        #expect(Set(Self.ids(covered)) == Set(Self.ids(stats)))
    }
}
