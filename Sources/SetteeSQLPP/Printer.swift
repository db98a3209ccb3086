import SetteeCore

extension SQLExpression: CustomStringConvertible {
    /// SQL++ text for this expression; parsing it gives the same expression back.
    public var description: String {
        var out = ""
        SQLPrinter.print(self, into: &out)
        return out
    }
}

extension SelectStatement: CustomStringConvertible {
    /// SQL++ text for this statement; parsing it gives the same statement back.
    public var description: String {
        var out = "SELECT "
        if distinct { out += "DISTINCT " }
        out += results.map { item -> String in
            var s: String
            switch item.kind {
            case .all(let source): s = source.map { SQLPrinter.identifier($0) + ".*" } ?? "*"
            case .expression(let e): s = e.description
            }
            if let alias = item.alias { s += " AS " + SQLPrinter.identifier(alias) }
            return s
        }.joined(separator: ", ")
        if let from {
            out += " FROM " + SQLPrinter.source(from)
            for join in joins {
                out += " \(join.kind.rawValue) " + SQLPrinter.source(join.source)
                if let on = join.on { out += " ON \(on)" }
            }
            for unnest in unnests { out += " UNNEST \(unnest.expression) AS \(SQLPrinter.identifier(unnest.alias))" }
        }
        if let whereClause { out += " WHERE \(whereClause)" }
        if !groupBy.isEmpty { out += " GROUP BY " + groupBy.map(\.description).joined(separator: ", ") }
        if let having { out += " HAVING \(having)" }
        if !orderBy.isEmpty {
            out += " ORDER BY " + orderBy.map { $0.expression.description + ($0.descending ? " DESC" : "") }
                .joined(separator: ", ")
        }
        if let limit { out += " LIMIT \(limit)" }
        if let offset { out += " OFFSET \(offset)" }
        return out
    }
}

enum SQLPrinter {
    static func source(_ s: SourceRef) -> String {
        var out = s.scope.map { identifier($0) + "." } ?? ""
        out += identifier(s.collection)
        if let alias = s.alias { out += " AS " + identifier(alias) }
        return out
    }

    static func identifier(_ name: String) -> String {
        let simple = !name.isEmpty && name.utf8.allSatisfy { c in
            (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == 0x5F || (c >= 0x30 && c <= 0x39)
        } && !(name.utf8.first.map { $0 >= 0x30 && $0 <= 0x39 } ?? false)
        if simple && !SQLPPParser.isKeyword(name) && !reserved.contains(name.uppercased()) { return name }
        return "`" + name.replacingAll("`", with: "``") + "`"
    }

    /// Whether printed text begins with the word NULL, MISSING or VALUED (what `IS [NOT]` takes as a check).
    static func startsWithCheckKeyword(_ text: String) -> Bool {
        let word = text.utf8.prefix { c in (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == 0x5F || (c >= 0x30 && c <= 0x39) }
        guard let name = String(word) else { return false }
        return ["NULL", "MISSING", "VALUED"].contains(name.uppercased())
    }

    static let reserved: Set<String> = ["TRUE", "FALSE", "NULL", "MISSING", "META", "CASE", "ANY", "EVERY", "SOME",
                                        "VALUED"]

    static func path(_ path: [PathComponent], into out: inout String, first: Bool) {
        var first = first
        for c in path {
            switch c {
            case .key(let k):
                if !first { out += "." }
                out += identifier(k)
            case .index(let i):
                out += "[\(i)]"
            }
            first = false
        }
    }

    static func print(_ e: SQLExpression, into out: inout String) {
        switch e {
        case .literal(let v):
            if case .string(let s) = v { out += "\"" + escape(s) + "\"" } else { out += v.jsonString }
        case .missing: out += "MISSING"
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += ", " }
                print(item, into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, m) in members.enumerated() {
                if i > 0 { out += ", " }
                out += "\"" + escape(m.key) + "\": "
                print(m.value, into: &out)
            }
            out += "}"
        case .property(let source, let p):
            if let source { out += identifier(source) }
            path(p, into: &out, first: source == nil)
        case .meta(let source, let field):
            out += "META(" + (source.map(identifier) ?? "") + ")." + field.rawValue
        case .parameter(let name): out += "$" + name
        case .not(let x):
            out += "(NOT "
            print(x, into: &out)
            out += ")"
        case .negate(let x):
            out += "(-"
            print(x, into: &out)
            out += ")"
        case .binary(let op, let a, let b):
            out += "("
            print(a, into: &out)
            out += " \(op.rawValue) "
            if op == .is || op == .isNot {
                // `IS [NOT]` followed by the word NULL, MISSING or VALUED reads back as that check, not as the binary
                // operator with a NULL or MISSING operand (`x IS NOT +MISSING`): parenthesize such an operand.
                var operand = ""
                print(b, into: &operand)
                out += Self.startsWithCheckKeyword(operand) ? "(" + operand + ")" : operand
            } else {
                print(b, into: &out)
            }
            out += ")"
        case .collate(let x, let c):
            out += "("
            print(x, into: &out)
            out += " COLLATE (" + (c.unicode ? "UNICODE" : "NOUNICODE") + (c.ignoreCase ? " NOCASE" : " CASE")
                + (c.ignoreAccents ? " NODIAC" : " DIAC") + "))"
        case .check(let x, let kind, let negated):
            out += "("
            print(x, into: &out)
            out += negated ? " IS NOT " : " IS "
            out += kind.rawValue + ")"
        case .between(let x, let low, let high, let negated):
            out += "("
            print(x, into: &out)
            out += negated ? " NOT BETWEEN " : " BETWEEN "
            print(low, into: &out)
            out += " AND "
            print(high, into: &out)
            out += ")"
        case .in(let x, let list, let negated):
            out += "("
            print(x, into: &out)
            out += negated ? " NOT IN (" : " IN ("
            for (i, item) in list.enumerated() {
                if i > 0 { out += ", " }
                print(item, into: &out)
            }
            out += "))"
        case .inArray(let x, let array, let negated):
            out += "("
            print(x, into: &out)
            out += negated ? " NOT IN " : " IN "
            // `IN (` starts a parenthesized list, so an operand printed with a leading parenthesis (`(-t)`, `(a || b)`,
            // `(f).x`) would read back as a one-element list: prefix it with the no-op unary plus.
            var operand = ""
            print(array, into: &operand)
            if operand.hasPrefix("(") { out += "+" }
            out += operand
            out += ")"
        case .path(let base, let p):
            out += "("
            print(base, into: &out)
            out += ")"
            for c in p {
                switch c {
                case .key(let k): out += "." + identifier(k)
                case .index(let i): out += "[\(i)]"
                }
            }
        case .like(let x, let pattern, let negated):
            out += "("
            print(x, into: &out)
            out += negated ? " NOT LIKE " : " LIKE "
            print(pattern, into: &out)
            out += ")"
        case .function(let name, let args, let distinct):
            out += name + "(" + (distinct ? "DISTINCT " : "")
            for (i, a) in args.enumerated() {
                if i > 0 { out += ", " }
                print(a, into: &out)
            }
            out += ")"
        case .star: out += "*"
        case .quantified(let q, let variable, let array, let condition):
            out += "(\(q.rawValue) \(identifier(variable)) IN "
            print(array, into: &out)
            out += " SATISFIES "
            print(condition, into: &out)
            out += " END)"
        case .caseWhen(let subject, let arms, let otherwise):
            out += "CASE"
            if let subject {
                out += " "
                print(subject, into: &out)
            }
            for arm in arms {
                out += " WHEN "
                print(arm.when, into: &out)
                out += " THEN "
                print(arm.then, into: &out)
            }
            if let otherwise {
                out += " ELSE "
                print(otherwise, into: &out)
            }
            out += " END"
        }
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for ch in s.unicodeScalars {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }
}

extension String {
    /// Replaces every occurrence of `target`, matching UTF-8 bytes (so at Unicode scalar boundaries).
    ///
    /// Not `firstRange(of:)`, which matches whole Characters: a backtick followed by a combining mark is one
    /// Character, so "`\u{5B5}" was not doubled and a quoted identifier printed by the SQL++ printer could not be
    /// read back (a fuzzing finding).
    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        let pattern = Array(target.utf8)
        let bytes = Array(utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == pattern[0], bytes.count - i >= pattern.count, bytes[i..<(i + pattern.count)].elementsEqual(pattern) {
                out.append(contentsOf: replacement.utf8)
                i += pattern.count
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
