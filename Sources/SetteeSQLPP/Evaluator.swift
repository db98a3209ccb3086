package import SetteeCore

/// A document as a query row sees it: its metadata and its (winning revision's) body.
package struct SourceDocument: Sendable {
    package var id: String
    package var sequence: UInt64
    package var revisionID: String
    package var deleted: Bool
    package var body: JSON
    /// The document's row in its collection table (what full-text matches are keyed by); 0 when unknown.
    package var rowid: Int64 = 0
    /// The document's expiration time, milliseconds since 1970 (`META().expiration`); nil when it has none.
    package var expiration: Int64?

    package init(id: String, sequence: UInt64 = 0, revisionID: String = "", deleted: Bool = false, body: JSON,
                rowid: Int64 = 0) {
        self.rowid = rowid
        self.id = id
        self.sequence = sequence
        self.revisionID = revisionID
        self.deleted = deleted
        self.body = body
    }

    /// `META().field` of this document.
    package func meta(_ field: MetaField) -> JSON? {
        switch field {
        case .id: return .string(id)
        case .sequence: return .int(Int64(clamping: sequence))
        case .revisionID: return .string(revisionID)
        case .deleted: return .bool(deleted)
        case .expiration: return expiration.map { .int($0) }
        }
    }
}

/// One row being evaluated: the documents of its data sources, bound variables, and (after GROUP BY) the
/// rows of its group for aggregates.
package struct Row: Sendable {
    /// The FROM source's name (alias or collection name) and document.
    package var primaryName: String
    package var primary: SourceDocument?
    /// Joined and unnested sources: name → document (nil after an unmatched LEFT JOIN). Unnest elements are
    /// stored as documents whose `body` is the element.
    package var others: [(name: String, document: SourceDocument?)] = []
    /// `ANY x IN … SATISFIES` variables.
    package var variables: [(name: String, value: JSON?)] = []
    /// The rows of this row's group, for aggregates (set by GROUP BY, or by an aggregate query without GROUP BY).
    package var group: [Row]?

    package init(primaryName: String, primary: SourceDocument?) {
        self.primaryName = primaryName
        self.primary = primary
    }

    /// The document bound to `name`, and whether `name` names a source at all.
    @inlinable
    package func source(named name: String) -> (found: Bool, document: SourceDocument?) {
        if name == primaryName { return (true, primary) }
        for other in others where other.name == name { return (true, other.document) }
        return (false, nil)
    }
}

/// Evaluates ``SQLExpression``s over JSON with SQL++ semantics (MISSING distinct from NULL, collation across types).
///
/// The evaluator is the reference semantics: the index manager computes index keys with it, partial indexes filter
/// with it, and the executor applies it to every candidate row the SQLite access path returns.
package struct Evaluator: Sendable {
    /// Values for `$name` parameters.
    package var parameters: [String: JSON]
    /// The documents each `MATCH(index, query)` of the statement matched, with their rank (computed by the executor
    /// from the full-text index before rows are evaluated).
    package var fullTextMatches: [FullTextSearch.Key: [Int64: Double]] = [:]
    /// Reads snippets and match ranges for `FTS_SNIPPET` / `FTS_MATCHES`.
    package var fullTextDetails: FullTextSearch.DetailProvider?
    /// The distances of `APPROX_VECTOR_DISTANCE` calls (set by the executor, which can read the vector index).
    package var vectorDistance: VectorSearch.DistanceProvider?
    /// Runs `PREDICTION(model, input)` (set by the executor and the index manager from the model registry).
    package var predictor: PredictionFunction.Predictor?
    /// Compares strings for `COLLATE` (set by the query executor to ICU's collation); without one, `COLLATE`
    /// compares code points, folding ASCII case for `NOCASE`.
    package var stringCollator: StringCollator?

    package init(parameters: [String: JSON] = [:]) {
        self.parameters = parameters
    }

    /// Evaluates `expression` against one document (index keys, partial-index conditions).
    package func evaluate(_ expression: SQLExpression, document: SourceDocument, sourceName: String = "_") throws(SetteeError) -> JSON? {
        try evaluate(expression, in: Row(primaryName: sourceName, primary: document))
    }

    /// Whether `expression` is true for the row (WHERE, ON, HAVING).
    @inlinable
    package func isTrue(_ expression: SQLExpression, in row: Row) throws(SetteeError) -> Bool {
        try Evaluator.truth(evaluate(expression, in: row)) == true
    }

    /// Three-valued truth: true, false, or nil for MISSING/null.
    @inlinable
    static func truth(_ value: JSON?) -> Bool? {
        guard let value, !value.isNull else { return nil }
        return ValueCollation.isTruthy(value)
    }

    package func evaluate(_ expression: SQLExpression, in row: Row) throws(SetteeError) -> JSON? {
        switch expression {
        case .literal(let v): return v
        case .missing: return nil
        case .array(let items):
            var out: [JSON] = []
            out.reserveCapacity(items.count)
            for item in items { out.append(try evaluate(item, in: row) ?? .null) }
            return .array(out)
        case .object(let members):
            var pairs: [(String, JSON)] = []
            for m in members { if let v = try evaluate(m.value, in: row) { pairs.append((m.key, v)) } }
            return .object(JSONObject(pairs))
        case .property(let source, let path):
            return resolve(source: source, path: path, in: row)
        case .meta(let source, let field):
            if let source {
                let (found, doc) = row.source(named: source)
                guard found else { return nil }
                return doc?.meta(field)
            }
            return row.primary?.meta(field)
        case .parameter(let name):
            return parameters[name]
        case .not(let x):
            guard let v = try evaluate(x, in: row) else { return nil }
            if v.isNull { return .null }
            return .bool(!ValueCollation.isTruthy(v))
        case .negate(let x):
            guard let v = try evaluate(x, in: row) else { return nil }
            switch v {
            case .int(let i) where i != .min: return .int(-i)
            case .int, .double: return ValueCollation.number(-(v.doubleValue ?? 0))
            default: return .null
            }
        case .binary(let op, let a, let b):
            return try binary(op, a, b, in: row)
        case .collate(let x, _):
            return try evaluate(x, in: row)
        case .check(let x, let kind, let negated):
            let v = try evaluate(x, in: row)
            switch kind {
            case .missing:
                return .bool((v == nil) != negated)
            case .null:
                guard let v else { return nil }
                return .bool(v.isNull != negated)
            case .valued:
                let valued = v != nil && !(v!.isNull)
                return .bool(valued != negated)
            }
        case .between(let x, let low, let high, let negated):
            let v = try evaluate(x, in: row)
            let lo = try evaluate(low, in: row), hi = try evaluate(high, in: row)
            if let collation = Evaluator.collation(of: x), case .string(let s)? = v, case .string(let l)? = lo,
               case .string(let h)? = hi {
                let r = collation.compare(s, l, collator: stringCollator) >= 0 && collation.compare(s, h, collator: stringCollator) <= 0
                return .bool(r != negated)
            }
            let r = Evaluator.and(Evaluator.compare(.greaterOrEqual, v, lo), Evaluator.compare(.lessOrEqual, v, hi))
            return negated ? Evaluator.not(r) : r
        case .in(let x, let list, let negated):
            guard let v = try evaluate(x, in: row) else { return nil }
            if v.isNull { return .null }
            var found = false
            for item in list {
                if let candidate = try evaluate(item, in: row), ValueCollation.equal(v, candidate) { found = true; break }
            }
            return .bool(found != negated)
        case .inArray(let x, let arrayExpression, let negated):
            guard let v = try evaluate(x, in: row), let a = try evaluate(arrayExpression, in: row) else { return nil }
            if v.isNull { return .null }
            guard case .array(let items) = a else { return .null }
            let found = items.contains { ValueCollation.equal(v, $0) }
            return .bool(found != negated)
        case .path(let base, let path):
            return Evaluator.walk(try evaluate(base, in: row), path[...])
        case .like(let x, let pattern, let negated):
            guard let v = try evaluate(x, in: row), let p = try evaluate(pattern, in: row) else { return nil }
            guard case .string(let s) = v, case .string(let pat) = p else { return .null }
            return .bool(Like.matches(s, pattern: pat) != negated)
        case .function("MATCH", let args, _):
            let key = try FullTextSearch.key(args, evaluator: self, in: row)
            guard let matches = fullTextMatches[key] else {
                throw SetteeError(.queryParseError, "MATCH(\(key.index), …) is only allowed in WHERE")
            }
            return .bool(matches[row.primary?.rowid ?? -1] != nil)
        case .function(let name, let args, _) where name == "FTS_SNIPPET" || name == "FTS_MATCHES":
            let index = try FullTextSearch.indexName(args[0])
            guard let key = fullTextMatches.keys.first(where: { $0.index == index }), let provider = fullTextDetails else {
                throw SetteeError(.queryParseError, "\(name)(\(index)) needs MATCH(\(index), …) in the WHERE clause")
            }
            guard let rowid = row.primary?.rowid, fullTextMatches[key]?[rowid] != nil else { return nil }
            let detail: FullTextSearch.Detail
            if name == "FTS_MATCHES" {
                detail = .matches
            } else {
                var strings: [String] = []
                for a in args.dropFirst().prefix(2) {
                    guard case .string(let s)? = try evaluate(a, in: row) else {
                        throw SetteeError(.queryParseError, "FTS_SNIPPET markers must be strings")
                    }
                    strings.append(s)
                }
                var tokens = 15
                if args.count == 4 {
                    guard let n = try evaluate(args[3], in: row)?.intValue, n > 0, n <= 64 else {
                        throw SetteeError(.queryParseError, "FTS_SNIPPET's token count must be 1…64")
                    }
                    tokens = Int(n)
                }
                detail = .snippet(start: strings.first ?? "[", end: strings.count > 1 ? strings[1] : "]", tokens: tokens)
            }
            do {
                return try provider(key, rowid, detail)
            } catch let error as SetteeError {
                throw error
            } catch {
                throw SetteeError(.storage, "\(name): \(error)")
            }
        case .function(VectorSearch.functionName, let args, _):
            guard let provider = vectorDistance else {
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE needs a vector index on its expression")
            }
            guard let rowid = row.primary?.rowid else { return nil }
            do {
                return try provider(args, rowid).map { ValueCollation.number($0) }
            } catch let error as SetteeError {
                throw error
            } catch {
                throw SetteeError(.storage, "APPROX_VECTOR_DISTANCE: \(error)")
            }
        case .function(PredictionFunction.functionName, let args, _):
            let model = try PredictionFunction.modelName(args[0])
            guard let input = try evaluate(args[1], in: row) else { return nil }
            guard case .object = input else {
                throw SetteeError(.queryParseError, "PREDICTION(\(model), input): the input must be an object, got \(input.typeName)")
            }
            guard let predictor else {
                throw SetteeError(.queryParseError, "PREDICTION(\(model), …): no predictive model named \(model) is registered")
            }
            let output = try predictor(model, input)
            if args.count == 3 {
                guard case .string(let property)? = try evaluate(args[2], in: row) else {
                    throw SetteeError(.queryParseError, "PREDICTION's third argument must be a property path string")
                }
                return Evaluator.walk(output, PathParser.components(property)[...])
            }
            return output
        case .function("RANK", let args, _):
            let index = try FullTextSearch.indexName(args[0])
            guard let matches = fullTextMatches.first(where: { $0.key.index == index })?.value else {
                throw SetteeError(.queryParseError, "RANK(\(index)) needs MATCH(\(index), …) in the WHERE clause")
            }
            return matches[row.primary?.rowid ?? -1].map { ValueCollation.number($0) }
        case .function(let name, let args, let distinct):
            if FunctionLibrary.aggregates.contains(name) {
                return try aggregate(name, args.first ?? .star, distinct: distinct, in: row)
            }
            var values: [JSON?] = []
            values.reserveCapacity(args.count)
            for a in args { values.append(try evaluate(a, in: row)) }
            return try FunctionLibrary.call(name, values)
        case .star:
            throw SetteeError(.queryParseError, "* is only allowed in COUNT(*) and SELECT *")
        case .quantified(let q, let variable, let arrayExpression, let condition):
            guard let a = try evaluate(arrayExpression, in: row) else { return nil }
            guard case .array(let items) = a else { return a.isNull ? .null : .bool(false) }
            var scoped = row
            scoped.variables.append((variable, nil))
            let slot = scoped.variables.count - 1
            var any = false, every = true
            for item in items {
                scoped.variables[slot].value = item
                let ok = try isTrue(condition, in: scoped)
                if ok { any = true } else { every = false }
                if q == .any && any { break }
                if q != .any && !every { break }
            }
            switch q {
            case .any: return .bool(any)
            case .every: return .bool(every)
            case .anyAndEvery: return .bool(!items.isEmpty && every)
            }
        case .caseWhen(let subject, let arms, let otherwise):
            if let subject {
                let s = try evaluate(subject, in: row)
                for arm in arms {
                    let w = try evaluate(arm.when, in: row)
                    if let s, let w, !s.isNull, !w.isNull, ValueCollation.equal(s, w) { return try evaluate(arm.then, in: row) }
                }
            } else {
                for arm in arms where try isTrue(arm.when, in: row) { return try evaluate(arm.then, in: row) }
            }
            return try otherwise.map { e throws(SetteeError) in try evaluate(e, in: row) } ?? .null
        }
    }

    // MARK: Properties

    @inlinable
    func resolve(source: String?, path: [PathComponent], in row: Row) -> JSON? {
        if let source {
            let (found, doc) = row.source(named: source)
            if found { return Evaluator.walk(doc?.body, path[...]) }
            for v in row.variables.reversed() where v.name == source { return Evaluator.walk(v.value, path[...]) }
            return nil
        }
        if case .key(let first)? = path.first {
            for v in row.variables.reversed() where v.name == first { return Evaluator.walk(v.value, path.dropFirst()) }
            if !row.others.isEmpty || first == row.primaryName {
                let (found, doc) = row.source(named: first)
                if found { return Evaluator.walk(doc?.body, path.dropFirst()) }
            }
        }
        return Evaluator.walk(row.primary?.body, path[...])
    }

    /// Follows a property path into a value; nil (MISSING) where a step does not exist.
    @inlinable
    package static func walk(_ value: JSON?, _ path: ArraySlice<PathComponent>) -> JSON? {
        var current = value
        for component in path {
            guard let c = current else { return nil }
            switch component {
            case .key(let k):
                guard case .object(let o) = c else { return nil }
                current = o[k]
            case .index(let i):
                guard case .array(let a) = c else { return nil }
                let index = i >= 0 ? i : a.count + i
                guard index >= 0 && index < a.count else { return nil }
                current = a[index]
            }
        }
        return current
    }

    // MARK: Operators

    private func binary(_ op: BinaryOperator, _ a: SQLExpression, _ b: SQLExpression, in row: Row) throws(SetteeError) -> JSON? {
        switch op {
        case .and:
            let x = try evaluate(a, in: row)
            if let x, !x.isNull, !ValueCollation.isTruthy(x) { return .bool(false) }  // short-circuit
            return Evaluator.and(x, try evaluate(b, in: row))
        case .or:
            let x = try evaluate(a, in: row)
            if let x, !x.isNull, ValueCollation.isTruthy(x) { return .bool(true) }
            return Evaluator.or(x, try evaluate(b, in: row))
        default:
            break
        }
        let x = try evaluate(a, in: row), y = try evaluate(b, in: row)
        switch op {
        case .equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual:
            if let collation = Evaluator.collation(of: a) ?? Evaluator.collation(of: b),
               case .string(let s)? = x, case .string(let t)? = y {
                let c = collation.compare(s, t, collator: stringCollator)
                return .bool(Evaluator.holds(op, c))
            }
            return Evaluator.compare(op, x, y)
        case .is: return .bool(x == nil ? y == nil : (y != nil && ValueCollation.equal(x!, y!)))
        case .isNot: return .bool(!(x == nil ? y == nil : (y != nil && ValueCollation.equal(x!, y!))))
        case .concat:
            guard let x, let y else { return nil }
            guard case .string(let s) = x, case .string(let t) = y else { return .null }
            return .string(s + t)
        case .add, .subtract, .multiply, .divide, .modulo:
            return Evaluator.arithmetic(op, x, y)
        case .and, .or: return nil  // handled above
        }
    }

    /// The collation a comparison operand asks for (`e COLLATE …`).
    static func collation(of e: SQLExpression) -> StringCollation? {
        if case .collate(_, let collation) = e { return collation }
        return nil
    }

    /// Whether a three-way comparison result satisfies `op`.
    static func holds(_ op: BinaryOperator, _ c: Int) -> Bool {
        switch op {
        case .equal: c == 0
        case .notEqual: c != 0
        case .less: c < 0
        case .lessOrEqual: c <= 0
        case .greater: c > 0
        default: c >= 0
        }
    }

    /// Orders two ORDER BY keys: by `collation` when both are strings and the key has one, else by SQL++'s value
    /// order.
    package func compareKeys(_ x: JSON?, _ y: JSON?, collation: StringCollation?) -> Int {
        if let collation, case .string(let s)? = x, case .string(let t)? = y {
            return collation.compare(s, t, collator: stringCollator)
        }
        return ValueCollation.compare(x, y)
    }

    /// A comparison with SQL++'s MISSING/NULL propagation.
    @inlinable
    package static func compare(_ op: BinaryOperator, _ x: JSON?, _ y: JSON?) -> JSON? {
        guard let x, let y else { return nil }
        if x.isNull || y.isNull { return .null }
        switch op {
        case .equal: return .bool(ValueCollation.equal(x, y))
        case .notEqual: return .bool(!ValueCollation.equal(x, y))
        default:
            let c = ValueCollation.compare(x, y)
            switch op {
            case .less: return .bool(c < 0)
            case .lessOrEqual: return .bool(c <= 0)
            case .greater: return .bool(c > 0)
            default: return .bool(c >= 0)
            }
        }
    }

    @inlinable
    static func and(_ x: JSON?, _ y: JSON?) -> JSON? {
        let tx = x.map { $0.isNull ? nil : ValueCollation.isTruthy($0) }, ty = y.map { $0.isNull ? nil : ValueCollation.isTruthy($0) }
        if tx == .some(false) || ty == .some(false) { return .bool(false) }
        if x == nil || y == nil { return nil }
        if tx == .some(nil) || ty == .some(nil) { return .null }
        return .bool(true)
    }

    @inlinable
    static func or(_ x: JSON?, _ y: JSON?) -> JSON? {
        let tx = x.map { $0.isNull ? nil : ValueCollation.isTruthy($0) }, ty = y.map { $0.isNull ? nil : ValueCollation.isTruthy($0) }
        if tx == .some(true) || ty == .some(true) { return .bool(true) }
        if tx == .some(nil) || ty == .some(nil) { return .null }
        if x == nil || y == nil { return nil }
        return .bool(false)
    }

    @inlinable
    static func not(_ x: JSON?) -> JSON? {
        guard let x else { return nil }
        if x.isNull { return .null }
        return .bool(!ValueCollation.isTruthy(x))
    }

    static func arithmetic(_ op: BinaryOperator, _ x: JSON?, _ y: JSON?) -> JSON? {
        guard let x, let y else { return nil }
        if case .int(let a) = x, case .int(let b) = y {
            switch op {
            case .add:
                let (r, o) = a.addingReportingOverflow(b)
                if !o { return .int(r) }
            case .subtract:
                let (r, o) = a.subtractingReportingOverflow(b)
                if !o { return .int(r) }
            case .multiply:
                let (r, o) = a.multipliedReportingOverflow(by: b)
                if !o { return .int(r) }
            case .modulo:
                if b == 0 { return .null }
                if b == -1 { return .int(0) }
                return .int(a % b)
            default: break
            }
        }
        guard let a = x.doubleValue, let b = y.doubleValue else { return .null }
        let r: Double
        switch op {
        case .add: r = a + b
        case .subtract: r = a - b
        case .multiply: r = a * b
        case .divide:
            if b == 0 { return .null }
            r = a / b
        case .modulo:
            if b == 0 { return .null }
            r = a.truncatingRemainder(dividingBy: b)
        default: return .null
        }
        return r.isFinite ? ValueCollation.number(r) : .null
    }

    // MARK: Aggregates

    private func aggregate(_ name: String, _ argument: SQLExpression, distinct: Bool, in row: Row) throws(SetteeError) -> JSON? {
        guard let group = row.group else {
            throw SetteeError(.queryParseError, "\(name)() is an aggregate: it is allowed in SELECT, HAVING and ORDER BY, not in WHERE or ON")
        }
        if name == "COUNT", argument == .star { return .int(Int64(group.count)) }
        var values: [JSON] = []
        values.reserveCapacity(group.count)
        for member in group {
            if let v = try evaluate(argument, in: member), !v.isNull { values.append(v) }
        }
        if distinct {
            var unique: [JSON] = []
            for v in values where !unique.contains(where: { ValueCollation.equal($0, v) }) { unique.append(v) }
            values = unique
        }
        switch name {
        case "COUNT": return .int(Int64(values.count))
        case "SUM", "AVG":
            var intSum: Int64 = 0, allInt = true, sum = 0.0, n = 0
            for v in values {
                switch v {
                case .int(let i):
                    let (r, o) = intSum.addingReportingOverflow(i)
                    if o { allInt = false } else { intSum = r }
                    sum += Double(i)
                case .double(let d):
                    allInt = false
                    sum += d
                default: continue
                }
                n += 1
            }
            if name == "SUM" { return allInt ? .int(intSum) : ValueCollation.number(sum) }
            return n == 0 ? .null : ValueCollation.number(sum / Double(n))
        case "MIN":
            return values.min(by: { ValueCollation.compare($0, $1) < 0 }) ?? .null
        case "MAX":
            return values.max(by: { ValueCollation.compare($0, $1) < 0 }) ?? .null
        default:
            throw SetteeError(.queryParseError, "unknown aggregate \(name)")
        }
    }

    /// Whether `expression` contains an aggregate function call (outside any nested query).
    package static func containsAggregate(_ expression: SQLExpression) -> Bool {
        var found = false
        expression.visit { e in
            if case .function(let name, _, _) = e, FunctionLibrary.aggregates.contains(name) { found = true }
        }
        return found
    }
}

extension SQLExpression {
    /// Calls `body` on this expression and every sub-expression, parents first.
    package func visit(_ body: (SQLExpression) -> Void) {
        body(self)
        switch self {
        case .literal, .missing, .property, .meta, .parameter, .star: break
        case .array(let items): items.forEach { $0.visit(body) }
        case .object(let members): members.forEach { $0.value.visit(body) }
        case .not(let x), .negate(let x): x.visit(body)
        case .binary(_, let a, let b): a.visit(body); b.visit(body)
        case .check(let x, _, _): x.visit(body)
        case .between(let x, let lo, let hi, _): x.visit(body); lo.visit(body); hi.visit(body)
        case .in(let x, let list, _): x.visit(body); list.forEach { $0.visit(body) }
        case .inArray(let x, let a, _): x.visit(body); a.visit(body)
        case .path(let x, _), .collate(let x, _): x.visit(body)
        case .like(let x, let p, _): x.visit(body); p.visit(body)
        case .function(_, let args, _): args.forEach { $0.visit(body) }
        case .quantified(_, _, let a, let c): a.visit(body); c.visit(body)
        case .caseWhen(let s, let arms, let e):
            s?.visit(body)
            arms.forEach { $0.when.visit(body); $0.then.visit(body) }
            e?.visit(body)
        }
    }
}

/// SQL `LIKE` matching: case-sensitive, `%` any run of characters, `_` one character, `\` escapes the next.
enum Like {
    static func matches(_ s: String, pattern: String) -> Bool {
        let text = Array(s.unicodeScalars), pat = Array(pattern.unicodeScalars)
        return match(text[...], pat[...])
    }

    private static func match(_ text: ArraySlice<Unicode.Scalar>, _ pat: ArraySlice<Unicode.Scalar>) -> Bool {
        var t = text.startIndex, p = pat.startIndex
        var starP = -1, starT = -1
        while t < text.endIndex {
            if p < pat.endIndex {
                let c = pat[p]
                if c == "%" {
                    starP = p
                    starT = t
                    p += 1
                    continue
                }
                if c == "\\" && p + 1 < pat.endIndex {
                    if pat[p + 1] == text[t] { p += 2; t += 1; continue }
                } else if c == "_" || c == text[t] {
                    p += 1
                    t += 1
                    continue
                }
            }
            if starP >= 0 {
                starT += 1
                t = starT
                p = starP + 1
                continue
            }
            return false
        }
        while p < pat.endIndex && pat[p] == "%" { p += 1 }
        return p == pat.endIndex
    }
}
