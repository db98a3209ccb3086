package import SetteeCore

/// The full-text query language of Couchbase Lite's guide, translated to SQLite FTS5's syntax.
///
/// - words (implicit AND between them), `"phrases"`, `prefix*`
/// - `AND`, `OR`, `NOT` (binary: `a NOT b`), parentheses
/// - `a NEAR b` and `a NEAR/5 b` (FTS4's infix form, which FTS5 spells `NEAR(a b, 5)`); a NEAR over an OR group
///   distributes: `Couchbase NEAR (Lite OR mobile)` is `NEAR(Couchbase Lite) OR NEAR(Couchbase mobile)`
///
/// Operators are upper-case, as in SQLite. Malformed queries are a ``SetteeError`` `.queryParseError` naming the
/// position.
package enum FullTextQuery {
    indirect enum Node {
        case phrase([String], prefix: Bool)
        case and(Node, Node)
        case or(Node, Node)
        case not(Node, Node)
        case near([Node], distance: Int?)
    }

    enum Token: Equatable {
        case word(String, prefix: Bool)
        case phrase([String], prefix: Bool)
        case op(String)
        case open, close
    }

    /// The FTS5 form of `query`.
    package static func translate(_ query: String) throws(SetteeError) -> String {
        let tokens = try tokenize(query)
        guard !tokens.isEmpty else { throw error("empty query", at: 0, query) }
        var parser = Parser(tokens: tokens, query: query)
        let node = try parser.orExpression()
        if parser.position < tokens.count {
            throw error("unexpected \(describe(tokens[parser.position].0))", at: tokens[parser.position].1, query)
        }
        return try emit(node, query)
    }

    /// The query's terms, numbered left to right from 0 as Couchbase Lite numbers them (terms under NOT are left
    /// out), each in FTS5 syntax so it can be matched on its own.
    package static func terms(_ query: String) throws(SetteeError) -> [String] {
        let tokens = try tokenize(query)
        var parser = Parser(tokens: tokens, query: query)
        let node = try parser.orExpression()
        var out: [String] = []
        func collect(_ n: Node) throws(SetteeError) {
            switch n {
            case .phrase: out.append(try emit(n, query))
            case .and(let a, let b), .or(let a, let b): try collect(a); try collect(b)
            case .not(let a, _): try collect(a)
            case .near(let operands, _): for o in operands { try collect(o) }
            }
        }
        try collect(node)
        return out
    }

    static func error(_ message: String, at offset: Int, _ query: String) -> SetteeError {
        SetteeError(.queryParseError, "Invalid full-text query \"\(query)\": \(message) at offset \(offset)")
    }

    static func describe(_ t: Token) -> String {
        switch t {
        case .word(let w, _): return "'\(w)'"
        case .phrase(let words, _): return "\"\(words.joined(separator: " "))\""
        case .op(let o): return o
        case .open: return "'('"
        case .close: return "')'"
        }
    }

    static func tokenize(_ query: String) throws(SetteeError) -> [(Token, Int)] {
        let scalars = Array(query.unicodeScalars)
        var offsets: [Int] = []  // UTF-8 offset of each scalar
        var o = 0
        for s in scalars { offsets.append(o); o += String(s).utf8.count }
        offsets.append(o)
        var out: [(Token, Int)] = []
        var i = 0
        func isWordChar(_ s: Unicode.Scalar) -> Bool {
            s.properties.isAlphabetic || s.properties.numericType != nil || s == "_" || s == "'" || s == "-"
                || s.properties.generalCategory == .nonspacingMark
        }
        while i < scalars.count {
            let s = scalars[i]
            if s.properties.isWhitespace { i += 1; continue }
            if s == "(" { out.append((.open, offsets[i])); i += 1; continue }
            if s == ")" { out.append((.close, offsets[i])); i += 1; continue }
            if s == "\"" {
                let start = i
                i += 1
                var text = ""
                while i < scalars.count && scalars[i] != "\"" { text.unicodeScalars.append(scalars[i]); i += 1 }
                guard i < scalars.count else { throw error("unterminated phrase", at: offsets[start], query) }
                i += 1
                var prefix = false
                if i < scalars.count && scalars[i] == "*" { prefix = true; i += 1 }
                let words = words(of: text)
                guard !words.isEmpty else { throw error("empty phrase", at: offsets[start], query) }
                out.append((.phrase(words, prefix: prefix), offsets[start]))
                continue
            }
            if isWordChar(s) {
                let start = i
                var text = ""
                while i < scalars.count && isWordChar(scalars[i]) { text.unicodeScalars.append(scalars[i]); i += 1 }
                var prefix = false
                if i < scalars.count && scalars[i] == "*" { prefix = true; i += 1 }
                if !prefix && ["AND", "OR", "NOT", "NEAR"].contains(text) {
                    var op = text
                    if text == "NEAR" && i < scalars.count && scalars[i] == "/" {
                        i += 1
                        var digits = ""
                        while i < scalars.count && scalars[i].properties.numericType != nil { digits.unicodeScalars.append(scalars[i]); i += 1 }
                        guard Int(digits) != nil else { throw error("expected a distance after NEAR/", at: offsets[i], query) }
                        op += "/" + digits
                    }
                    out.append((.op(op), offsets[start]))
                } else {
                    out.append((.word(text, prefix: prefix), offsets[start]))
                }
                continue
            }
            // Punctuation separates words (as FTS5's tokenizer does); a stray '*' is an error.
            if s == "*" { throw error("'*' must follow a word", at: offsets[i], query) }
            i += 1
        }
        return out
    }

    static func words(of text: String) -> [String] {
        var out: [String] = []
        var current = ""
        for s in text.unicodeScalars {
            if s.properties.isAlphabetic || s.properties.numericType != nil || s == "_" || s.properties.generalCategory == .nonspacingMark {
                current.unicodeScalars.append(s)
            } else if !current.isEmpty {
                out.append(current)
                current = ""
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    struct Parser {
        let tokens: [(Token, Int)]
        let query: String
        var position = 0

        mutating func orExpression() throws(SetteeError) -> Node {
            var left = try andExpression()
            while position < tokens.count, tokens[position].0 == .op("OR") {
                position += 1
                left = .or(left, try andExpression())
            }
            return left
        }

        mutating func andExpression() throws(SetteeError) -> Node {
            var left = try nearExpression()
            while position < tokens.count {
                switch tokens[position].0 {
                case .op("AND"):
                    position += 1
                    left = .and(left, try nearExpression())
                case .op("NOT"):
                    position += 1
                    left = .not(left, try nearExpression())
                case .word, .phrase, .open:
                    left = .and(left, try nearExpression())
                default:
                    return left
                }
            }
            return left
        }

        mutating func nearExpression() throws(SetteeError) -> Node {
            var operands = [try primary()]
            var distance: Int?
            while position < tokens.count, case .op(let op) = tokens[position].0, op.hasPrefix("NEAR") {
                position += 1
                if let slash = op.firstIndex(of: "/") { distance = Int(op[op.index(after: slash)...]) }
                operands.append(try primary())
            }
            return operands.count == 1 ? operands[0] : .near(operands, distance: distance)
        }

        mutating func primary() throws(SetteeError) -> Node {
            guard position < tokens.count else {
                throw FullTextQuery.error("expected a word, a phrase or '('", at: query.utf8.count, query)
            }
            let (token, offset) = tokens[position]
            position += 1
            switch token {
            case .word(let w, let prefix): return .phrase([w], prefix: prefix)
            case .phrase(let words, let prefix): return .phrase(words, prefix: prefix)
            case .open:
                let inner = try orExpression()
                guard position < tokens.count, tokens[position].0 == .close else {
                    throw FullTextQuery.error("expected ')'", at: position < tokens.count ? tokens[position].1 : query.utf8.count, query)
                }
                position += 1
                return inner
            default:
                throw FullTextQuery.error("expected a word, a phrase or '(' but found \(FullTextQuery.describe(token))", at: offset, query)
            }
        }
    }

    static func emit(_ node: Node, _ query: String) throws(SetteeError) -> String {
        switch node {
        case .phrase(let words, let prefix):
            return "\"" + words.joined(separator: " ").replacingAll("\"", with: "\"\"") + "\"" + (prefix ? "*" : "")
        case .and(let a, let b): return "(\(try emit(a, query)) AND \(try emit(b, query)))"
        case .or(let a, let b): return "(\(try emit(a, query)) OR \(try emit(b, query)))"
        case .not(let a, let b): return "(\(try emit(a, query)) NOT \(try emit(b, query)))"
        case .near(let operands, let distance):
            // NEAR takes phrases; an OR group distributes over it.
            var alternatives: [[Node]] = [[]]
            for operand in operands {
                let choices = try phrases(operand, query)
                alternatives = alternatives.flatMap { prefix in choices.map { prefix + [$0] } }
            }
            let nears = try alternatives.map { group throws(SetteeError) -> String in
                var parts: [String] = []
                for p in group { parts.append(try emit(p, query)) }
                return "NEAR(" + parts.joined(separator: " ") + (distance.map { ", \($0)" } ?? "") + ")"
            }
            return nears.count == 1 ? nears[0] : "(" + nears.joined(separator: " OR ") + ")"
        }
    }

    /// The phrases an operand of NEAR stands for: itself, or each alternative of an OR group.
    static func phrases(_ node: Node, _ query: String) throws(SetteeError) -> [Node] {
        switch node {
        case .phrase: return [node]
        case .or(let a, let b): return try phrases(a, query) + phrases(b, query)
        default:
            throw error("NEAR takes words, phrases or OR groups of them", at: 0, query)
        }
    }
}
