import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore

/// A data source of a query bound to its collection.
struct BoundSource {
    let name: String
    let collection: Collection
}

/// A constraint on one expression of one source that an index (or the id column) can serve.
struct Constraint {
    enum Kind {
        case equal(SQLExpression)
        case inList([SQLExpression])
        case lower(SQLExpression, inclusive: Bool)
        case upper(SQLExpression, inclusive: Bool)
        case prefix(SQLExpression)  // LIKE 'abc%'
        case present                // IS VALUED / IS NOT NULL / comparisons: some non-null value
        case notMissing             // IS NOT MISSING: any value, null included
        case isNull
    }
    /// The constrained expression, relative to its source (unqualified).
    let expression: SQLExpression
    let kind: Kind
    /// The position of the WHERE conjunct it came from.
    var term = 0
}

/// How the executor reads a source's candidate documents.
struct AccessPath: Sendable {
    /// The kinds of access path.
    enum Kind: Sendable {
        /// Every document of the collection.
        case scan
        /// One document (or a few) by id.
        case idLookup
        case valueIndex
        case arrayIndex
        /// An array index whose rows are the UNNEST rows themselves.
        case coveringArrayIndex
        case fullTextIndex
        case vectorIndex
        /// A Mango json index read as a superset.
        case mangoIndex
    }

    /// SQL returning `rowid, id, seq, rev, flags, body` of candidate documents (a superset of the matches).
    let sql: String
    /// Values for the SQL's parameters, computed from literals and `$parameters` at execution.
    let bindings: [SQLExpression]
    /// How each binding is turned into a SQLite value.
    let bindingKinds: [BindingKind]
    /// The value index used, if any.
    let index: IndexInfo?
    /// What reads the candidates (what the executor decides on; ``summary`` is for people).
    let kind: Kind
    /// A one-line description for explain.
    let summary: String
    /// WHERE conjuncts (positions) the SQL decides exactly when every bound value is present and not null: the
    /// executor need not evaluate them again.
    var servedTerms: Set<Int> = []
    /// The SQL can return a document more than once (array indexes): keep the first.
    var distinctDocuments = false
    /// Each SQL row is one UNNEST row: its body column is the element, the document's body is not read.
    var coveringUnnest = false
    /// How much of the WHERE the path narrows by (4 per equality column, 3 per IN list, 2 for a range; 0 for a
    /// scan; id lookups above any index): the planner keeps the highest.
    var score = 0
    /// A Mango json index read as a superset (its two parameters are the key bounds computed from these).
    var mango: MangoRead?

    /// A Mango json index's rows whose leading columns equal `equal` and whose next column lies in the numeric
    /// range `lower`…`upper` (see ``MangoIndex/keyBounds(equal:lower:upper:)``).
    struct MangoRead: Sendable {
        let index: MangoIndex
        let equal: [SQLExpression]
        let lower: SQLExpression?
        let upper: SQLExpression?
    }

    enum BindingKind: Sendable {
        case key          // KeyEncoding of the value
        case keyPrefixLower, keyPrefixUpper
        case documentID   // the value as text (META().id lookups)
        case text         // a string as is (full-text queries)
    }
}

/// Turns a statement's WHERE into an access path over the document and index tables.
enum Planner {
    static let documentColumns = DocumentTable.rowColumns("d")

    /// The conjuncts of a condition (`a AND b AND c` → [a, b, c]).
    static func conjuncts(_ e: SQLExpression?) -> [SQLExpression] {
        guard let e else { return [] }
        if case .binary(.and, let a, let b) = e { return conjuncts(a) + conjuncts(b) }
        return [e]
    }

    /// The disjuncts of a condition (`a OR b` → [a, b]).
    static func disjuncts(_ e: SQLExpression?) -> [SQLExpression] {
        guard let e else { return [] }
        if case .binary(.or, let a, let b) = e { return disjuncts(a) + disjuncts(b) }
        return [e]
    }

    /// Whether `e` is a constant for the duration of one execution (literals, parameters and operations on them).
    static func isConstant(_ e: SQLExpression) -> Bool {
        var constant = true
        e.visit { node in
            switch node {
            case .property, .meta, .star, .quantified: constant = false
            case .function(let name, _, _) where FunctionLibrary.aggregates.contains(name): constant = false
            default: break
            }
        }
        return constant
    }

    /// The names of the sources an expression reads (the primary for unqualified properties).
    static func sources(of e: SQLExpression, primary: String, aliases: Set<String>, bound: Set<String> = []) -> Set<String> {
        var out = Set<String>()
        collectSources(e, primary: primary, aliases: aliases, bound: bound, into: &out)
        return out
    }

    private static func collectSources(_ e: SQLExpression, primary: String, aliases: Set<String>, bound: Set<String>,
                                       into out: inout Set<String>) {
        switch e {
        case .property(let source, let path):
            if let source { if !bound.contains(source) { out.insert(source) }; return }
            if case .key(let first)? = path.first {
                if bound.contains(first) { return }
                if aliases.contains(first) { out.insert(first); return }
            }
            out.insert(primary)
        case .meta(let source, _):
            out.insert(source ?? primary)
        case .quantified(_, let variable, let array, let condition):
            collectSources(array, primary: primary, aliases: aliases, bound: bound, into: &out)
            collectSources(condition, primary: primary, aliases: aliases, bound: bound.union([variable]), into: &out)
        default:
            forEachChild(e) { collectSources($0, primary: primary, aliases: aliases, bound: bound, into: &out) }
        }
    }

    static func forEachChild(_ e: SQLExpression, _ body: (SQLExpression) -> Void) {
        switch e {
        case .literal, .missing, .property, .meta, .parameter, .star: break
        case .array(let items): items.forEach(body)
        case .object(let members): members.forEach { body($0.value) }
        case .not(let x), .negate(let x), .check(let x, _, _), .path(let x, _), .collate(let x, _): body(x)
        case .binary(_, let a, let b), .inArray(let a, let b, _), .like(let a, let b, _): body(a); body(b)
        case .between(let x, let lo, let hi, _): body(x); body(lo); body(hi)
        case .in(let x, let list, _): body(x); list.forEach(body)
        case .function(_, let args, _): args.forEach(body)
        case .quantified(_, _, let a, let c): body(a); body(c)
        case .caseWhen(let s, let arms, let o):
            s.map(body)
            arms.forEach { body($0.when); body($0.then) }
            o.map(body)
        }
    }

    /// `e` rewritten relative to the source `name` (its qualifiers stripped), or nil when it reads another source.
    static func relative(_ e: SQLExpression, to name: String, primary: String, aliases: Set<String>) -> SQLExpression? {
        guard sources(of: e, primary: primary, aliases: aliases) == [name] else { return nil }
        return strip(e, name: name, primary: primary, aliases: aliases)
    }

    private static func strip(_ e: SQLExpression, name: String, primary: String, aliases: Set<String>) -> SQLExpression {
        e.rewritten { node in
            switch node {
            case .property(let source, let path):
                if source == name { return .property(source: nil, path: path) }
                if source == nil, case .key(let first)? = path.first, first == name, aliases.contains(first) || name == primary {
                    // `alias.x` → `x`; an UNNEST alias on its own is the element itself (the empty path).
                    if path.count > 1 { return .property(source: nil, path: Array(path.dropFirst())) }
                    if name != primary { return .property(source: nil, path: []) }
                }
                return node
            case .meta(let source, let field) where source == name: return .meta(source: nil, field: field)
            default: return nil
            }
        }
    }

    /// The index-servable constraints among the conjuncts, for the source `name`.
    static func constraints(_ terms: [SQLExpression], source name: String, primary: String,
                            aliases: Set<String>) -> [Constraint] {
        var out: [Constraint] = []
        func rel(_ e: SQLExpression) -> SQLExpression? { relative(e, to: name, primary: primary, aliases: aliases) }
        func flip(_ op: BinaryOperator) -> BinaryOperator {
            switch op {
            case .less: return .greater
            case .lessOrEqual: return .greaterOrEqual
            case .greater: return .less
            case .greaterOrEqual: return .lessOrEqual
            default: return op
            }
        }
        for (position, term) in terms.enumerated() {
            let before = out.count
            defer { for i in before..<out.count { out[i].term = position } }
            switch term {
            case .binary(let op, let a, let b) where [.equal, .less, .lessOrEqual, .greater, .greaterOrEqual, .notEqual].contains(op):
                var subject: SQLExpression?, value: SQLExpression?, o = op
                if isConstant(b), let r = rel(a) { subject = r; value = b }
                else if isConstant(a), let r = rel(b) { subject = r; value = a; o = flip(op) }
                guard let subject, let value else { continue }
                switch o {
                case .equal: out.append(Constraint(expression: subject, kind: .equal(value)))
                case .less: out.append(Constraint(expression: subject, kind: .upper(value, inclusive: false)))
                case .lessOrEqual: out.append(Constraint(expression: subject, kind: .upper(value, inclusive: true)))
                case .greater: out.append(Constraint(expression: subject, kind: .lower(value, inclusive: false)))
                case .greaterOrEqual: out.append(Constraint(expression: subject, kind: .lower(value, inclusive: true)))
                default: out.append(Constraint(expression: subject, kind: .present))
                }
            case .between(let x, let lo, let hi, false) where isConstant(lo) && isConstant(hi):
                guard let r = rel(x) else { continue }
                out.append(Constraint(expression: r, kind: .lower(lo, inclusive: true)))
                out.append(Constraint(expression: r, kind: .upper(hi, inclusive: true)))
            case .in(let x, let list, false) where list.allSatisfy(isConstant) && !list.isEmpty:
                guard let r = rel(x) else { continue }
                out.append(Constraint(expression: r, kind: .inList(list)))
            case .like(let x, let pattern, false) where isConstant(pattern):
                guard let r = rel(x) else { continue }
                if case .literal(.string(let p)) = pattern, let prefix = likePrefix(p), !prefix.isEmpty {
                    out.append(Constraint(expression: r, kind: .prefix(.literal(.string(prefix)))))
                } else {
                    out.append(Constraint(expression: r, kind: .present))
                }
            case .check(let x, .missing, true):
                guard let r = rel(x) else { continue }
                out.append(Constraint(expression: r, kind: .notMissing))
            case .check(let x, .valued, false), .check(let x, .null, true):
                guard let r = rel(x) else { continue }
                out.append(Constraint(expression: r, kind: .present))
            case .check(let x, .null, false):
                guard let r = rel(x) else { continue }
                out.append(Constraint(expression: r, kind: .isNull))
            default:
                continue
            }
        }
        return out
    }

    /// The literal prefix of a LIKE pattern before its first wildcard (nil if it has none but escapes).
    static func likePrefix(_ pattern: String) -> String? {
        var prefix = ""
        var escaped = false
        for ch in pattern {
            if escaped { prefix.append(ch); escaped = false; continue }
            if ch == "\\" { escaped = true; continue }
            if ch == "%" || ch == "_" { return prefix }
            prefix.append(ch)
        }
        return prefix
    }

    /// Whether a partial index with condition `x` may serve a query whose WHERE has the conjuncts `w`
    /// (the two rules of Couchbase Lite's indexing guide).
    static func partialIndexUsable(_ x: SQLExpression?, queryTerms w: [SQLExpression]) -> Bool {
        guard let x else { return true }
        let xTerms = disjuncts(x)
        // Rule 1: a term of W appears as a term of X.
        for term in w where xTerms.contains(term) { return true }
        // Rule 2: X has "z IS NOT MISSING" and W compares z with an operator other than IS.
        for xt in xTerms {
            guard case .check(let z, .missing, true) = xt else { continue }
            for wt in w where comparesWithoutIS(wt, z) { return true }
        }
        return false
    }

    private static func comparesWithoutIS(_ term: SQLExpression, _ z: SQLExpression) -> Bool {
        switch term {
        case .binary(let op, let a, let b):
            guard [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual].contains(op) else { return false }
            return a == z || b == z
        case .in(let a, _, false), .inArray(let a, _, false), .like(let a, _, false), .between(let a, _, _, false):
            return a == z
        default: return false
        }
    }

    /// SQL conditions on an index's key columns `i.k0, i.k1, …` serving `constraints`: equality (or IN) on leading
    /// columns, then one range; nil when the index serves none of them.
    static func keyClauses(_ expressions: [SQLExpression], _ constraints: [Constraint])
        -> (clauses: [String], bindings: [SQLExpression], kinds: [AccessPath.BindingKind], exact: [Constraint], score: Int)? {
        var clauses: [String] = []
        var bindings: [SQLExpression] = []
        var kinds: [AccessPath.BindingKind] = []
        var score = 0
        var exact: [Constraint] = []
        columns: for (i, expression) in expressions.enumerated() {
            let mine = constraints.filter { $0.expression == expression }
            let column = "i.k\(i)"
            if let eq = mine.first(where: { if case .equal = $0.kind { return true }; return false }),
               case .equal(let v) = eq.kind {
                clauses.append("\(column) = ?")
                bindings.append(v)
                kinds.append(.key)
                exact.append(eq)
                score += 4
                continue columns
            }
            if let inc = mine.first(where: { if case .inList = $0.kind { return true }; return false }),
               case .inList(let list) = inc.kind {
                clauses.append("\(column) IN (\(Array(repeating: "?", count: list.count).joined(separator: ", ")))")
                bindings.append(contentsOf: list)
                kinds.append(contentsOf: Array(repeating: .key, count: list.count))
                exact.append(inc)
                score += 3
                continue columns
            }
            var ranged = false
            for c in mine {
                switch c.kind {
                case .lower(let v, let inclusive):
                    clauses.append("\(column) \(inclusive ? ">=" : ">") ?")
                    bindings.append(v)
                    kinds.append(.key)
                    exact.append(c)
                    ranged = true
                case .upper(let v, let inclusive):
                    // Above null: `x < 5` is never true for null.
                    clauses.append("\(column) > x'01' AND \(column) \(inclusive ? "<=" : "<") ?")
                    bindings.append(v)
                    kinds.append(.key)
                    exact.append(c)
                    ranged = true
                case .prefix(let v):
                    clauses.append("\(column) >= ? AND \(column) < ?")
                    bindings.append(contentsOf: [v, v])
                    kinds.append(contentsOf: [.keyPrefixLower, .keyPrefixUpper])
                    ranged = true
                case .present:
                    if !ranged { clauses.append("\(column) > x'01'") }
                    ranged = true
                case .notMissing:
                    if !ranged { clauses.append("\(column) IS NOT NULL") }
                    ranged = true
                case .isNull:
                    clauses.append("\(column) = x'01'")
                    exact.append(c)
                    ranged = true
                default: break
                }
            }
            if ranged { score += 2 }
            break columns
        }
        return score > 0 ? (clauses, bindings, kinds, exact, score) : nil
    }

    /// An array index serving an UNNEST chain: the index's path must be the chain's path and the constraints are on
    /// the innermost alias's element (relative to it). Documents, not elements, come out (each once): the executor
    /// unnests and filters exactly.
    static func arrayAccessPath(for source: BoundSource, unnests: [UnnestClause], terms: [SQLExpression],
                                aliases: Set<String>, indexes: [IndexInfo], coverable: Bool = false) -> AccessPath? {
        guard let last = unnests.last else { return nil }
        // The chain's path: the first UNNEST reads the document, each next one reads the previous alias.
        var levels: [[PathComponent]] = []
        var previous: String?
        for u in unnests {
            guard case .property(nil, let path) = u.expression, !path.isEmpty else { return nil }
            if let previous {
                guard case .key(previous)? = path.first, path.count > 1 else { return nil }
                levels.append(Array(path.dropFirst()))
            } else {
                if case .key(let first)? = path.first, first == source.name, path.count > 1 {
                    levels.append(Array(path.dropFirst()))
                } else {
                    levels.append(path)
                }
            }
            previous = u.alias
        }
        let constraints = Planner.constraints(terms, source: last.alias, primary: source.name, aliases: aliases)
        var best: (score: Int, path: AccessPath)?
        for index in indexes where index.spec.kind == .array && index.spec.arrayLevels == levels {
            let expressions = index.spec.expressions.isEmpty ? [SQLExpression.property(source: nil, path: [])]
                : index.spec.expressions
            guard let keys = keyClauses(expressions, constraints) else { continue }
            // One row per matching element; the executor skips a document's repeats.
            let docs = DocumentTable.join(source.collection, as: "d", onRowID: "i.doc")
            let sql = "SELECT \(documentColumns) FROM \(index.table) AS i \(docs)"
                + " WHERE " + keys.clauses.joined(separator: " AND ") + " AND \(DocumentTable.live("d"))"
            var path = AccessPath(sql: sql, bindings: keys.bindings, bindingKinds: keys.kinds, index: index,
                                  kind: .arrayIndex, summary: "array index \(index.name)", servedTerms: served(keys.exact, constraints))
            path.distinctDocuments = true
            // Covering: one UNNEST over scalars, every WHERE term decided by the index, nothing else read from the
            // document: rows come straight from the index (the element from its `v` column), one per element.
            if coverable, unnests.count == 1, index.spec.expressions.isEmpty, path.servedTerms.count == terms.count {
                path = AccessPath(sql: "SELECT \(DocumentTable.rowColumns("d", body: "i.v")) FROM \(index.table) AS i \(docs)"
                                    + " WHERE " + keys.clauses.joined(separator: " AND ") + " AND \(DocumentTable.live("d"))",
                                  bindings: keys.bindings, bindingKinds: keys.kinds, index: index,
                                  kind: .coveringArrayIndex, summary: "array index \(index.name) (covering)", servedTerms: path.servedTerms)
                path.coveringUnnest = true
            }
            if best == nil || keys.score > best!.score { best = (keys.score, path) }
        }
        return best?.path
    }

    /// A full-text index serving a top-level `MATCH(index, query)` conjunct: the documents it matches.
    static func fullTextAccessPath(for source: BoundSource, terms: [SQLExpression], indexes: [IndexInfo],
                                   includeDeleted: Bool) throws -> AccessPath? {
        for (position, term) in terms.enumerated() {
            guard case .function("MATCH", let args, _) = term else { continue }
            let name = try FullTextSearch.indexName(args[0])
            guard let index = indexes.first(where: { $0.name == name && $0.spec.kind == .fullText }) else { continue }
            // What runs: the MATCH once (ranks kept for RANK), then each matched document by row.
            let sql = "SELECT rowid, bm25(\(index.table)) FROM \(index.table) WHERE \(index.table) MATCH ?"
            return AccessPath(sql: sql, bindings: [args[1]], bindingKinds: [.text], index: index,
                              kind: .fullTextIndex, summary: "full-text index \(index.name), then each matched document by rowid",
                              servedTerms: [position])
        }
        return nil
    }

    /// The conjuncts all of whose constraints are among `used` (so the SQL decides them exactly).
    static func served(_ used: [Constraint], _ all: [Constraint]) -> Set<Int> {
        var out = Set<Int>()
        for term in Set(used.map(\.term)) {
            let total = all.filter { $0.term == term }.count
            let covered = used.filter { $0.term == term }.count
            if total == covered { out.insert(term) }
        }
        return out
    }

    /// Chooses the access path for a source: the `id` column for `META().id` lookups, else the value index
    /// serving the most constraints, else a scan of the collection.
    static func accessPath(for source: BoundSource, constraints: [Constraint], queryTerms: [SQLExpression],
                           indexes: [IndexInfo], includeDeleted: Bool) -> AccessPath {
        let table = DocumentTable.table(source.collection, as: "d"), id = DocumentTable.column(.id, "d")
        let liveOnly = includeDeleted ? "" : " AND \(DocumentTable.live("d"))"
        // META().id = c / IN (…): the primary key.
        for c in constraints where c.expression == .meta(source: nil, field: .id) {
            switch c.kind {
            case .equal(let v):
                return AccessPath(sql: "SELECT \(documentColumns) FROM \(table) WHERE \(id) = ?\(liveOnly)",
                                  bindings: [v], bindingKinds: [.documentID], index: nil,
                                  kind: .idLookup, summary: "document id lookup", servedTerms: served([c], constraints),
                                  score: .max)
            case .inList(let list):
                let marks = Array(repeating: "?", count: list.count).joined(separator: ", ")
                return AccessPath(sql: "SELECT \(documentColumns) FROM \(table) WHERE \(id) IN (\(marks))\(liveOnly)",
                                  bindings: list, bindingKinds: Array(repeating: .documentID, count: list.count),
                                  index: nil, kind: .idLookup, summary: "document id lookup", servedTerms: served([c], constraints),
                                  score: .max)
            default: continue
            }
        }
        var best: (score: Int, path: AccessPath)?
        if !includeDeleted {
            for index in indexes where index.spec.kind == .value
                && partialIndexUsable(index.spec.whereClause, queryTerms: queryTerms) {
                guard let keys = keyClauses(index.spec.expressions, constraints) else { continue }
                let sql = "SELECT \(documentColumns) FROM \(index.table) AS i \(DocumentTable.join(source.collection, as: "d", onRowID: "i.doc"))"
                    + " WHERE " + keys.clauses.joined(separator: " AND ") + liveOnly
                let path = AccessPath(sql: sql, bindings: keys.bindings, bindingKinds: keys.kinds, index: index,
                                      kind: .valueIndex, summary: "value index \(index.name)", servedTerms: served(keys.exact, constraints),
                                      score: keys.score)
                if best == nil || keys.score > best!.score { best = (keys.score, path) }
            }
        }
        if let best { return best.path }
        let conditions = (includeDeleted ? [] : [DocumentTable.live("d")]) + scanPrefilter(constraints)
        let whereClause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        return AccessPath(sql: "SELECT \(documentColumns) FROM \(table)\(whereClause)", bindings: [],
                          bindingKinds: [], index: nil, kind: .scan, summary: "scan of \(source.collection.fullName)")
    }

    /// Conditions SQLite checks on a scanned document's stored body before the evaluator sees it: the constraints
    /// comparing a member to a number or a boolean literal, through `settee_member` (the store's SQL function: the
    /// member as `json_extract` answers it, found without parsing the whole body). They keep a superset of what
    /// the WHERE keeps — the evaluator still decides every row — so only documents that may match are parsed:
    /// - numbers only where SQLite and SQL++ order them alike: integral literals within ±2⁵³, bounds inclusive;
    /// - SQLite reads `true`/`false` as 1/0 and SQL++ ranks booleans below every number, so `x = true` is `= 1`
    ///   and an upper bound below 1 is left out (it would drop booleans that SQL++ finds smaller);
    /// - strings are left to the evaluator (its equality is Unicode canonical equivalence, SQLite's is bytes);
    /// - only plain member paths (`a`, `a.b`, keys of letters, digits and `_`).
    static func scanPrefilter(_ constraints: [Constraint]) -> [String] {
        var out: [String] = []
        // A member bounded on both sides is one BETWEEN, which SQLite evaluates the member for once.
        var ranges: [(member: String, lower: Int64?, upper: Int64?)] = []
        func bound(_ member: String, lower: Int64? = nil, upper: Int64? = nil) {
            if let i = ranges.firstIndex(where: { $0.member == member }) {
                if let lower { ranges[i].lower = max(ranges[i].lower ?? lower, lower) }
                if let upper { ranges[i].upper = min(ranges[i].upper ?? upper, upper) }
            } else {
                ranges.append((member, lower, upper))
            }
        }
        for c in constraints {
            guard case .property(nil, let path) = c.expression, let jsonPath = simpleJSONPath(path) else { continue }
            let member = "settee_member(\(DocumentTable.column(.body, "d")), '\(jsonPath)')"
            switch c.kind {
            case .equal(.literal(.bool(let b))):
                out.append("\(member) = \(b ? 1 : 0)")
            case .equal(.literal(let v)):
                if let n = exactInteger(v) { out.append("\(member) = \(n)") }
            case .lower(.literal(let v), _):
                if let n = exactInteger(v) { bound(member, lower: n) }
            case .upper(.literal(let v), _):
                if let n = exactInteger(v), n >= 1 { bound(member, upper: n) }
            default:
                continue
            }
        }
        for range in ranges {
            switch (range.lower, range.upper) {
            case let (lower?, upper?): out.insert("\(range.member) BETWEEN \(lower) AND \(upper)", at: 0)
            case let (lower?, nil): out.insert("\(range.member) >= \(lower)", at: 0)
            case let (nil, upper?): out.insert("\(range.member) <= \(upper)", at: 0)
            case (nil, nil): break
            }
        }
        return out
    }

    /// A JSON number literal that is an integer within ±2⁵³ (where a double and an integer compare exactly).
    private static func exactInteger(_ v: JSON) -> Int64? {
        let limit: Int64 = 1 << 53
        switch v {
        case .int(let i): return abs(i) <= limit ? i : nil
        case .double(let d): return d.isFinite && d.rounded() == d && abs(d) <= Double(limit) ? Int64(d) : nil
        default: return nil
        }
    }

    /// `$.a.b` for a path of plain keys (letters, digits, `_`; not starting with a digit), else nil.
    private static func simpleJSONPath(_ path: [PathComponent]) -> String? {
        guard !path.isEmpty else { return nil }
        var out = "$"
        for component in path {
            guard case .key(let key) = component, let first = key.utf8.first, !(0x30...0x39).contains(first),
                  key.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A)
                                        || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }) else { return nil }
            out += "." + key
        }
        return out
    }

    /// A Mango json index serving the constraints as a superset (see ``MangoIndex/isReadableByOtherQueries``):
    /// every column of the index constrained (so no document the query wants lacks one of its fields), equality on
    /// leading columns, then a range whose bounds are evaluated at execution; the WHERE is evaluated in full on each
    /// document read. Design documents, which no json index holds, are read beside the index's rows.
    static func mangoAccessPath(for source: BoundSource, constraints: [Constraint], indexes: [MangoIndex],
                                includeDeleted: Bool) throws -> AccessPath? {
        guard !includeDeleted else { return nil }
        var best: (score: Int, index: MangoIndex, equal: [SQLExpression], lower: SQLExpression?, upper: SQLExpression?)?
        for index in indexes where index.isReadableByOtherQueries {
            let expressions = index.fieldPaths.map { path in
                SQLExpression.property(source: nil, path: path.map { PathComponent.key($0) })
            }
            guard expressions.allSatisfy({ e in constraints.contains { $0.expression == e } }) else { continue }
            var equal: [SQLExpression] = []
            var lower: SQLExpression?, upper: SQLExpression?
            var score = 0
            for expression in expressions {
                let mine = constraints.filter { $0.expression == expression }
                if let value = mine.lazy.compactMap({ c -> SQLExpression? in
                    if case .equal(let v) = c.kind { return v }; return nil
                }).first {
                    equal.append(value)
                    score += 4
                    continue
                }
                for c in mine {
                    switch c.kind {
                    case .lower(let v, _): lower = v
                    case .upper(let v, _): upper = v
                    default: break
                    }
                }
                if lower != nil || upper != nil { score += 2 }
                break
            }
            if score > 0, best == nil || score > best!.score { best = (score, index, equal, lower, upper) }
        }
        guard let best, let table = try best.index.rowTable(in: source.collection) else { return nil }
        let id = DocumentTable.column(.id, "d")
        let sql = "SELECT \(documentColumns) FROM \(table) AS v \(DocumentTable.join(source.collection, as: "d", onRowID: "v.doc"))"
            + " WHERE v.key >= ? AND v.key <= ? AND \(DocumentTable.live("d"))"
            + " UNION ALL SELECT \(documentColumns) FROM \(DocumentTable.table(source.collection, as: "d"))"
            + " WHERE \(id) >= '_design/' AND \(id) < '_design0' AND \(DocumentTable.live("d"))"
        var path = AccessPath(sql: sql, bindings: [], bindingKinds: [], index: nil,
                              kind: .mangoIndex, summary: "Mango json index \(best.index.name) of \(best.index.designDocumentID ?? ""), each document then checked by the whole WHERE",
                              score: best.score)
        path.mango = AccessPath.MangoRead(index: best.index, equal: best.equal, lower: best.lower, upper: best.upper)
        return path
    }
}
