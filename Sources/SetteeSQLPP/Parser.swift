package import SetteeCore

/// The SQL++ for Mobile parser: text → ``SelectStatement`` / ``SQLExpression``.
///
/// ```swift
/// let statement = try SQLPPParser.parseSelect("SELECT name FROM hotels WHERE city = $city ORDER BY name LIMIT 10")
/// let expression = try SQLPPParser.parseExpression("type = 'hotel' AND geo.alt >= 300")
/// ```
///
/// Errors are ``SetteeError`` `.queryParseError` naming the problem and its line, column and byte offset.
/// Unknown functions are rejected here, so a bad query never reaches storage.
package struct SQLPPParser {
    private let tokens: [Token]
    private let bytes: [UInt8]
    private var position = 0

    /// Statements longer than this are rejected (a query is code, not data).
    package static let maximumLength = 1 << 20
    /// Nesting deeper than this is rejected instead of exhausting the stack.
    package static let maximumDepth = 200
    private var depth = 0

    private init(_ text: String) throws(SetteeError) {
        guard text.utf8.count <= SQLPPParser.maximumLength else {
            throw SetteeError(.queryParseError, "Query is longer than \(SQLPPParser.maximumLength) bytes")
        }
        let lexer = Lexer(text)
        tokens = try lexer.tokenize()
        bytes = lexer.bytes
    }

    /// Parses a whole `SELECT` statement.
    package static func parseSelect(_ text: String) throws(SetteeError) -> SelectStatement {
        var parser = try SQLPPParser(text)
        let statement = try parser.selectStatement()
        if parser.peekSymbol(";") { parser.position += 1 }
        try parser.expectEnd()
        return statement
    }

    /// Parses one expression (index definitions, partial-index `WHERE`).
    package static func parseExpression(_ text: String) throws(SetteeError) -> SQLExpression {
        var parser = try SQLPPParser(text)
        let expression = try parser.expression()
        try parser.expectEnd()
        return expression
    }

    /// Parses a comma-separated list of expressions (`"type, name"`).
    package static func parseExpressionList(_ text: String) throws(SetteeError) -> [SQLExpression] {
        var parser = try SQLPPParser(text)
        var list = [try parser.expression()]
        while parser.acceptSymbol(",") { list.append(try parser.expression()) }
        try parser.expectEnd()
        return list
    }

    // MARK: Statement

    private static let clauseKeywords: Set<String> = [
        "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "JOIN", "LEFT", "INNER", "CROSS", "ON",
        "UNNEST", "AS", "SELECT", "UNION", "AND", "OR", "NOT", "ASC", "DESC", "BY", "OUTER", "IS", "IN", "LIKE",
        "BETWEEN", "SATISFIES", "END", "THEN", "ELSE", "WHEN", "DISTINCT", "ALL", "COLLATE", "NULLS",
    ]

    private mutating func selectStatement() throws(SetteeError) -> SelectStatement {
        var s = SelectStatement()
        try expectKeyword("SELECT")
        if acceptKeyword("DISTINCT") { s.distinct = true } else { _ = acceptKeyword("ALL") }
        repeat { s.results.append(try selectItem()) } while acceptSymbol(",")
        if acceptKeyword("FROM") {
            s.from = try sourceRef()
            while true {
                if acceptKeyword("UNNEST") {
                    let e = try expression()
                    _ = acceptKeyword("AS")
                    s.unnests.append(UnnestClause(expression: e, alias: try identifier("an alias after UNNEST")))
                    continue
                }
                var kind: JoinKind?
                if acceptKeyword("JOIN") { kind = .inner }
                else if peekKeyword("INNER") { position += 1; try expectKeyword("JOIN"); kind = .inner }
                else if peekKeyword("LEFT") {
                    position += 1
                    _ = acceptKeyword("OUTER")
                    try expectKeyword("JOIN")
                    kind = .leftOuter
                } else if peekKeyword("CROSS") { position += 1; try expectKeyword("JOIN"); kind = .cross }
                guard let kind else { break }
                let source = try sourceRef()
                var on: SQLExpression?
                if kind != .cross {
                    try expectKeyword("ON")
                    on = try expression()
                }
                s.joins.append(JoinClause(kind: kind, source: source, on: on))
            }
        }
        if acceptKeyword("WHERE") { s.whereClause = try expression() }
        if acceptKeyword("GROUP") {
            try expectKeyword("BY")
            repeat { s.groupBy.append(try expression()) } while acceptSymbol(",")
            if acceptKeyword("HAVING") { s.having = try expression() }
        }
        if acceptKeyword("ORDER") {
            try expectKeyword("BY")
            repeat {
                let e = try expression()
                var descending = false
                if acceptKeyword("DESC") { descending = true } else { _ = acceptKeyword("ASC") }
                s.orderBy.append(OrderItem(e, descending: descending))
            } while acceptSymbol(",")
        }
        if acceptKeyword("LIMIT") {
            s.limit = try expression()
            if acceptKeyword("OFFSET") { s.offset = try expression() }
        } else if acceptKeyword("OFFSET") {
            s.offset = try expression()
            if acceptKeyword("LIMIT") { s.limit = try expression() }
        }
        return s
    }

    private mutating func selectItem() throws(SetteeError) -> SelectItem {
        if acceptSymbol("*") { return SelectItem(.all(source: nil)) }
        // alias.*
        if case .identifier(let name)? = peek(0)?.kind, peekSymbol(".", at: 1), peekSymbol("*", at: 2),
           !SQLPPParser.isKeyword(name) {
            position += 3
            return SelectItem(.all(source: name))
        }
        if case .quotedIdentifier(let name)? = peek(0)?.kind, peekSymbol(".", at: 1), peekSymbol("*", at: 2) {
            position += 3
            return SelectItem(.all(source: name))
        }
        let e = try expression()
        var alias: String?
        if acceptKeyword("AS") {
            alias = try identifier("an alias after AS")
        } else if let name = peekAliasIdentifier() {
            position += 1
            alias = name
        }
        return SelectItem(.expression(e), alias: alias)
    }

    private mutating func sourceRef() throws(SetteeError) -> SourceRef {
        let first = try identifier("a collection name")
        var ref = SourceRef(collection: first)
        if acceptSymbol(".") {
            ref = SourceRef(scope: first, collection: try identifier("a collection name after '\(first).'"))
        }
        if acceptKeyword("AS") {
            ref.alias = try identifier("an alias after AS")
        } else if let name = peekAliasIdentifier() {
            position += 1
            ref.alias = name
        }
        return ref
    }

    /// An identifier that can be an implicit alias (not a keyword).
    private func peekAliasIdentifier() -> String? {
        switch peek(0)?.kind {
        case .identifier(let name)? where !SQLPPParser.isKeyword(name): return name
        case .quotedIdentifier(let name)?: return name
        default: return nil
        }
    }

    static func isKeyword(_ name: String) -> Bool { clauseKeywords.contains(name.uppercased()) }

    // MARK: Expressions (lowest precedence first)

    mutating func expression() throws(SetteeError) -> SQLExpression {
        depth += 1
        defer { depth -= 1 }
        guard depth <= SQLPPParser.maximumDepth else { throw error("expression nested too deeply") }
        return try orExpression()
    }

    private mutating func orExpression() throws(SetteeError) -> SQLExpression {
        var left = try andExpression()
        while acceptKeyword("OR") { left = .binary(.or, left, try andExpression()) }
        return left
    }

    private mutating func andExpression() throws(SetteeError) -> SQLExpression {
        var left = try notExpression()
        while acceptKeyword("AND") { left = .binary(.and, left, try notExpression()) }
        return left
    }

    private mutating func notExpression() throws(SetteeError) -> SQLExpression {
        if acceptKeyword("NOT") {
            depth += 1
            defer { depth -= 1 }
            guard depth <= SQLPPParser.maximumDepth else { throw error("expression nested too deeply") }
            return .not(try notExpression())
        }
        return try comparison()
    }

    private mutating func comparison() throws(SetteeError) -> SQLExpression {
        let left = try concatenation()
        if case .symbol(let s)? = peek(0)?.kind {
            let op: BinaryOperator? = switch s {
            case "=", "==": .equal
            case "!=", "<>": .notEqual
            case "<": .less
            case "<=": .lessOrEqual
            case ">": .greater
            case ">=": .greaterOrEqual
            default: nil
            }
            if let op {
                position += 1
                return .binary(op, left, try concatenation())
            }
        }
        if acceptKeyword("IS") {
            let negated = acceptKeyword("NOT")
            if acceptKeyword("NULL") { return .check(left, .null, negated: negated) }
            if acceptKeyword("MISSING") { return .check(left, .missing, negated: negated) }
            if acceptKeyword("VALUED") { return .check(left, .valued, negated: negated) }
            return .binary(negated ? .isNot : .is, left, try concatenation())
        }
        let negated = peekKeyword("NOT") && (peekKeyword("IN", at: 1) || peekKeyword("LIKE", at: 1)
                                             || peekKeyword("BETWEEN", at: 1))
        if negated { position += 1 }
        if acceptKeyword("IN") {
            if peekSymbol("(") {
                // IN (a, b, c) — a parenthesized list
                position += 1
                var list: [SQLExpression] = []
                if !peekSymbol(")") {
                    repeat { list.append(try expression()) } while acceptSymbol(",")
                }
                try expectSymbol(")")
                return .in(left, list, negated: negated)
            }
            // IN [a, b] or IN arrayExpression: one element that is itself the array
            let arrayExpression = try concatenation()
            if case .array(let items) = arrayExpression { return .in(left, items, negated: negated) }
            return .inArray(left, arrayExpression, negated: negated)
        }
        if acceptKeyword("LIKE") {
            return .like(left, pattern: try concatenation(), negated: negated)
        }
        if acceptKeyword("BETWEEN") {
            let low = try concatenation()
            try expectKeyword("AND")
            let high = try concatenation()
            return .between(left, low: low, high: high, negated: negated)
        }
        if negated { throw error("expected IN, LIKE or BETWEEN after NOT") }
        return left
    }

    private mutating func concatenation() throws(SetteeError) -> SQLExpression {
        var left = try additive()
        while acceptSymbol("||") { left = .binary(.concat, left, try additive()) }
        return left
    }

    private mutating func additive() throws(SetteeError) -> SQLExpression {
        var left = try multiplicative()
        while true {
            if acceptSymbol("+") { left = .binary(.add, left, try multiplicative()) }
            else if acceptSymbol("-") { left = .binary(.subtract, left, try multiplicative()) }
            else { return left }
        }
    }

    private mutating func multiplicative() throws(SetteeError) -> SQLExpression {
        var left = try unary()
        while true {
            if acceptSymbol("*") { left = .binary(.multiply, left, try unary()) }
            else if acceptSymbol("/") { left = .binary(.divide, left, try unary()) }
            else if acceptSymbol("%") { left = .binary(.modulo, left, try unary()) }
            else { return left }
        }
    }

    private mutating func unary() throws(SetteeError) -> SQLExpression {
        if acceptSymbol("-") {
            depth += 1
            defer { depth -= 1 }
            guard depth <= SQLPPParser.maximumDepth else { throw error("expression nested too deeply") }
            let operand = try unary()
            switch operand {
            case .literal(.int(let v)) where v != Int64.min: return .literal(.int(-v))
            case .literal(.double(let v)): return .literal(.double(-v))
            default: return .negate(operand)
            }
        }
        if acceptSymbol("+") { return try unary() }
        return try postfix(try primary())
    }

    /// `.name` and `[index]` after a primary.
    private mutating func postfix(_ base: SQLExpression) throws(SetteeError) -> SQLExpression {
        var e = base
        while true {
            if peekSymbol(".") && !peekSymbol("*", at: 1) {
                position += 1
                let name = try identifier("a property name after '.'")
                e = try appendPath(e, .key(name))
            } else if peekSymbol("[") {
                let at = position
                position += 1
                guard case .integer(let i)? = peek(0)?.kind else {
                    position = at
                    throw error("expected an integer array index")
                }
                position += 1
                try expectSymbol("]")
                e = try appendPath(e, .index(Int(i)))
            } else if acceptKeyword("COLLATE") {
                e = .collate(e, try collation())
            } else {
                return e
            }
        }
    }

    /// After `COLLATE`: one option or a parenthesized list of them (`UNICODE`, `NOUNICODE`, `CASE`, `NOCASE`,
    /// `DIAC`, `NODIAC`).
    private mutating func collation() throws(SetteeError) -> StringCollation {
        var spec = StringCollation()
        let listed = acceptSymbol("(")
        repeat {
            guard case .identifier(let word)? = peek(0)?.kind else {
                throw error("expected a collation (UNICODE, NOUNICODE, CASE, NOCASE, DIAC or NODIAC)")
            }
            position += 1
            switch word.uppercased() {
            case "UNICODE": spec.unicode = true
            case "NOUNICODE": spec.unicode = false
            case "CASE": spec.ignoreCase = false
            case "NOCASE": spec.ignoreCase = true
            case "DIAC": spec.ignoreAccents = false
            case "NODIAC": spec.ignoreAccents = true
            default: throw error("unknown collation \(word): expected UNICODE, NOUNICODE, CASE, NOCASE, DIAC or NODIAC")
            }
        } while listed && !peekSymbol(")")
        if listed { try expectSymbol(")") }
        return spec
    }

    private func appendPath(_ e: SQLExpression, _ component: PathComponent) throws(SetteeError) -> SQLExpression {
        switch e {
        case .property(let source, let path): return .property(source: source, path: path + [component])
        case .path(let base, let path): return .path(base, path + [component])
        default: return .path(e, [component])
        }
    }

    private mutating func primary() throws(SetteeError) -> SQLExpression {
        guard let token = peek(0) else { throw error("unexpected end of query") }
        switch token.kind {
        case .integer(let v): position += 1; return .literal(.int(v))
        case .number(let v): position += 1; return .literal(.double(v))
        case .string(let s): position += 1; return .literal(.string(s))
        case .parameter(let name): position += 1; return .parameter(name)
        case .quotedIdentifier(let name): position += 1; return .property(source: nil, path: [.key(name)])
        case .symbol("("):
            position += 1
            let e = try expression()
            try expectSymbol(")")
            return e
        case .symbol("["):
            position += 1
            var items: [SQLExpression] = []
            if !peekSymbol("]") { repeat { items.append(try expression()) } while acceptSymbol(",") }
            try expectSymbol("]")
            return .array(items)
        case .symbol("{"):
            position += 1
            var members: [ObjectMember] = []
            if !peekSymbol("}") {
                repeat {
                    let key: String
                    switch peek(0)?.kind {
                    case .string(let s)?: key = s
                    case .identifier(let s)?, .quotedIdentifier(let s)?: key = s
                    default: throw error("expected an object key")
                    }
                    position += 1
                    try expectSymbol(":")
                    members.append(ObjectMember(key: key, value: try expression()))
                } while acceptSymbol(",")
            }
            try expectSymbol("}")
            return .object(members)
        case .identifier(let name):
            let upper = name.uppercased()
            switch upper {
            case "TRUE": position += 1; return .literal(.bool(true))
            case "FALSE": position += 1; return .literal(.bool(false))
            case "NULL": position += 1; return .literal(.null)
            case "MISSING": position += 1; return .missing
            case "META" where peekSymbol("(", at: 1): return try meta()
            case "CASE": position += 1; return try caseExpression()
            case "ANY", "EVERY", "SOME":
                if case .identifier? = peek(1)?.kind { return try quantified() }
                if case .quotedIdentifier? = peek(1)?.kind { return try quantified() }
            default: break
            }
            if peekSymbol("(", at: 1) { return try functionCall(name: upper, at: token.offset) }
            // A keyword right before ',' or ')' can only be a name (an index called `desc` in MATCH(desc, …)).
            if SQLPPParser.isKeyword(name) && !(peekSymbol(",", at: 1) || peekSymbol(")", at: 1)) {
                throw error("unexpected keyword \(upper)")
            }
            position += 1
            return .property(source: nil, path: [.key(name)])
        case .end: throw error("unexpected end of query")
        default: throw error("unexpected \(describe(token))")
        }
    }

    private mutating func meta() throws(SetteeError) -> SQLExpression {
        position += 2  // META (
        var source: String?
        if !peekSymbol(")") { source = try identifier("a data source alias in META()") }
        try expectSymbol(")")
        guard acceptSymbol(".") else { throw error("expected '.' and a field after META()") }
        let at = position
        let field = try identifier("a META() field")
        let lower = field.lowercased()
        let match: MetaField? = switch lower {
        case "id": .id
        case "sequence": .sequence
        case "revisionid": .revisionID
        case "deleted", "isdeleted": .deleted
        case "expiration": .expiration
        default: nil
        }
        guard let match else {
            position = at
            throw error("unknown META() field '\(field)' (expected id, sequence, revisionID, deleted or expiration)")
        }
        return .meta(source: source, field: match)
    }

    private mutating func caseExpression() throws(SetteeError) -> SQLExpression {
        var subject: SQLExpression?
        if !peekKeyword("WHEN") { subject = try expression() }
        var arms: [CaseArm] = []
        while acceptKeyword("WHEN") {
            let when = try expression()
            try expectKeyword("THEN")
            arms.append(CaseArm(when: when, then: try expression()))
        }
        guard !arms.isEmpty else { throw error("expected WHEN in CASE") }
        var otherwise: SQLExpression?
        if acceptKeyword("ELSE") { otherwise = try expression() }
        try expectKeyword("END")
        return .caseWhen(subject: subject, arms: arms, otherwise: otherwise)
    }

    private mutating func quantified() throws(SetteeError) -> SQLExpression {
        var quantifier: Quantifier = .any
        if acceptKeyword("EVERY") { quantifier = .every }
        else {
            position += 1  // ANY / SOME
            if peekKeyword("AND") && peekKeyword("EVERY", at: 1) { position += 2; quantifier = .anyAndEvery }
        }
        let variable = try identifier("a variable name")
        try expectKeyword("IN")
        let array = try expression()
        try expectKeyword("SATISFIES")
        let condition = try expression()
        try expectKeyword("END")
        return .quantified(quantifier, variable: variable, in: array, satisfies: condition)
    }

    private mutating func functionCall(name: String, at offset: Int) throws(SetteeError) -> SQLExpression {
        position += 2  // name (
        var distinct = false
        var args: [SQLExpression] = []
        if !peekSymbol(")") {
            if acceptKeyword("DISTINCT") { distinct = true }
            if peekSymbol("*") && peekSymbol(")", at: 1) {
                position += 1
                args = [.star]
            } else {
                repeat { args.append(try expression()) } while acceptSymbol(",")
            }
        }
        try expectSymbol(")")
        guard let arity = FunctionLibrary.arity(of: name) ?? FullTextSearch.arity[name] ?? VectorSearch.arity[name]
                ?? PredictionFunction.arity[name] else {
            throw SQLPPError.at(offset, in: bytes, "unknown function \(name)()")
        }
        guard arity.contains(args.count) else {
            let expected = arity.lowerBound == arity.upperBound ? "\(arity.lowerBound)" :
                (arity.upperBound >= 1000 ? "at least \(arity.lowerBound)" : "\(arity.lowerBound) to \(arity.upperBound)")
            throw SQLPPError.at(offset, in: bytes, "\(name)() takes \(expected) argument(s), got \(args.count)")
        }
        if args == [.star] && name != "COUNT" {
            throw SQLPPError.at(offset, in: bytes, "only COUNT accepts *")
        }
        if distinct && !FunctionLibrary.aggregates.contains(name) {
            throw SQLPPError.at(offset, in: bytes, "DISTINCT is only allowed in aggregate functions")
        }
        return .function(name, args, distinct: distinct)
    }

    // MARK: Tokens

    private func peek(_ ahead: Int) -> Token? {
        position + ahead < tokens.count ? tokens[position + ahead] : nil
    }

    private func peekSymbol(_ s: String, at ahead: Int = 0) -> Bool {
        if case .symbol(let t)? = peek(ahead)?.kind { return t == s }
        return false
    }

    private func peekKeyword(_ k: String, at ahead: Int = 0) -> Bool {
        if case .identifier(let t)? = peek(ahead)?.kind { return t.uppercased() == k }
        return false
    }

    private mutating func acceptSymbol(_ s: String) -> Bool {
        if peekSymbol(s) { position += 1; return true }
        return false
    }

    private mutating func acceptKeyword(_ k: String) -> Bool {
        if peekKeyword(k) { position += 1; return true }
        return false
    }

    private mutating func expectSymbol(_ s: String) throws(SetteeError) {
        guard acceptSymbol(s) else { throw error("expected '\(s)'") }
    }

    private mutating func expectKeyword(_ k: String) throws(SetteeError) {
        guard acceptKeyword(k) else { throw error("expected \(k)") }
    }

    private mutating func identifier(_ what: String) throws(SetteeError) -> String {
        switch peek(0)?.kind {
        case .identifier(let name)? where !SQLPPParser.isKeyword(name) || name == "_":
            position += 1
            return name
        case .quotedIdentifier(let name)?:
            position += 1
            return name
        default:
            throw error("expected \(what)")
        }
    }

    private func expectEnd() throws(SetteeError) {
        guard case .end? = peek(0)?.kind else { throw error("unexpected \(describe(tokens[position]))") }
    }

    private func describe(_ token: Token) -> String {
        switch token.kind {
        case .identifier(let s): return "'\(s)'"
        case .quotedIdentifier(let s): return "`\(s)`"
        case .string(let s): return "string \"\(s.prefix(40))\""
        case .integer(let v): return "number \(v)"
        case .number(let v): return "number \(v)"
        case .parameter(let s): return "$\(s)"
        case .symbol(let s): return "'\(s)'"
        case .end: return "end of query"
        }
    }

    private func error(_ message: String) -> SetteeError {
        let token = position < tokens.count ? tokens[position] : tokens[tokens.count - 1]
        var text = message
        if case .end = token.kind {} else if !message.hasPrefix("unexpected") { text += ", found \(describe(token))" }
        return SQLPPError.at(token.offset, in: bytes, text)
    }
}
