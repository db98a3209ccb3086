import SetteeCore

/// A SQL++ token with the byte offset it starts at.
struct Token: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case identifier(String)       // bare (case kept) — keywords are identifiers matched case-insensitively
        case quotedIdentifier(String) // `name`
        case string(String)
        case integer(Int64)
        case number(Double)
        case parameter(String)        // $name
        case symbol(String)           // operators and punctuation
        case end
    }
    let kind: Kind
    let offset: Int
}

/// Splits SQL++ text into tokens. Errors name the byte offset, line and column.
struct Lexer {
    let bytes: [UInt8]
    let text: String

    init(_ text: String) {
        self.text = text
        self.bytes = Array(text.utf8)
    }

    static let twoCharSymbols: Set<String> = ["==", "!=", "<>", "<=", ">=", "||"]
    static let oneCharSymbols: Set<UInt8> = Set("(),.*+-/%=<>[]{}:;".utf8)

    func tokenize() throws(SetteeError) -> [Token] {
        var out: [Token] = []
        var i = 0
        let n = bytes.count
        while i < n {
            let c = bytes[i]
            if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { i += 1; continue }
            // -- comment to end of line, /* block */
            if c == UInt8(ascii: "-") && i + 1 < n && bytes[i + 1] == UInt8(ascii: "-") {
                while i < n && bytes[i] != 0x0A { i += 1 }
                continue
            }
            if c == UInt8(ascii: "/") && i + 1 < n && bytes[i + 1] == UInt8(ascii: "*") {
                let start = i
                i += 2
                while i + 1 < n && !(bytes[i] == UInt8(ascii: "*") && bytes[i + 1] == UInt8(ascii: "/")) { i += 1 }
                guard i + 1 < n else { throw error("unterminated comment", at: start) }
                i += 2
                continue
            }
            let start = i
            if isIdentStart(c) {
                while i < n && isIdentPart(bytes[i]) { i += 1 }
                out.append(Token(kind: .identifier(string(start, i)), offset: start))
                continue
            }
            if c == UInt8(ascii: "$") {
                i += 1
                while i < n && isIdentPart(bytes[i]) { i += 1 }
                guard i > start + 1 else { throw error("expected a parameter name after '$'", at: start) }
                out.append(Token(kind: .parameter(string(start + 1, i)), offset: start))
                continue
            }
            if c == UInt8(ascii: "`") {
                i += 1
                var name: [UInt8] = []
                while true {
                    guard i < n else { throw error("unterminated `identifier`", at: start) }
                    if bytes[i] == UInt8(ascii: "`") {
                        if i + 1 < n && bytes[i + 1] == UInt8(ascii: "`") { name.append(bytes[i]); i += 2; continue }
                        i += 1
                        break
                    }
                    name.append(bytes[i])
                    i += 1
                }
                out.append(Token(kind: .quotedIdentifier(String(decoding: name, as: UTF8.self)), offset: start))
                continue
            }
            if c == UInt8(ascii: "'") || c == UInt8(ascii: "\"") {
                out.append(Token(kind: .string(try readString(&i, quote: c)), offset: start))
                continue
            }
            if isDigit(c) || (c == UInt8(ascii: ".") && i + 1 < n && isDigit(bytes[i + 1])) {
                out.append(try readNumber(&i))
                continue
            }
            if i + 1 < n {
                let two = string(i, i + 2)
                if Lexer.twoCharSymbols.contains(two) {
                    out.append(Token(kind: .symbol(two), offset: start))
                    i += 2
                    continue
                }
            }
            if Lexer.oneCharSymbols.contains(c) {
                out.append(Token(kind: .symbol(String(UnicodeScalar(c))), offset: start))
                i += 1
                continue
            }
            throw error("unexpected character '\(character(at: i))'", at: i)
        }
        out.append(Token(kind: .end, offset: n))
        return out
    }

    private func readString(_ i: inout Int, quote: UInt8) throws(SetteeError) -> String {
        let start = i
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw error("unterminated string", at: start) }
            let c = bytes[i]
            if c == quote {
                if i + 1 < bytes.count && bytes[i + 1] == quote { out.append(quote); i += 2; continue }
                i += 1
                return String(decoding: out, as: UTF8.self)
            }
            if c == UInt8(ascii: "\\") && i + 1 < bytes.count {
                let e = bytes[i + 1]
                i += 2
                switch e {
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"):
                    guard i + 4 <= bytes.count, let v = UInt32(string(i, i + 4), radix: 16),
                          let scalar = Unicode.Scalar(v) else { throw error("bad \\u escape", at: i - 2) }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    i += 4
                default: out.append(e)  // \" \' \\ \/ and anything else: the character itself
                }
                continue
            }
            out.append(c)
            i += 1
        }
    }

    private func readNumber(_ i: inout Int) throws(SetteeError) -> Token {
        let start = i
        var isFloat = false
        while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") && !(i + 1 < bytes.count && isIdentStart(bytes[i + 1])) {
            isFloat = true
            i += 1
            while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            var j = i + 1
            if j < bytes.count && (bytes[j] == UInt8(ascii: "+") || bytes[j] == UInt8(ascii: "-")) { j += 1 }
            if j < bytes.count && isDigit(bytes[j]) {
                isFloat = true
                i = j
                while i < bytes.count && isDigit(bytes[i]) { i += 1 }
            }
        }
        if i < bytes.count && isIdentStart(bytes[i]) { throw error("malformed number", at: start) }
        let s = string(start, i)
        if !isFloat, let v = Int64(s) { return Token(kind: .integer(v), offset: start) }
        guard let d = Double(s) else { throw error("malformed number", at: start) }
        // `1e400` reads as infinity, which no JSON value can hold (it printed as `null`); the JSON parser refuses it too.
        guard d.isFinite else { throw error("number out of range", at: start) }
        return Token(kind: .number(d), offset: start)
    }

    private func isIdentStart(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == UInt8(ascii: "_") || c >= 0x80
    }
    private func isIdentPart(_ c: UInt8) -> Bool { isIdentStart(c) || isDigit(c) }
    private func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    private func string(_ a: Int, _ b: Int) -> String { String(decoding: bytes[a..<min(b, bytes.count)], as: UTF8.self) }
    private func character(at i: Int) -> String {
        var j = i + 1
        while j < bytes.count && bytes[j] & 0xC0 == 0x80 { j += 1 }
        return string(i, j)
    }

    func error(_ message: String, at offset: Int) -> SetteeError {
        SQLPPError.at(offset, in: bytes, message)
    }
}

/// Builds query errors that name the position as line, column and byte offset.
enum SQLPPError {
    static func at(_ offset: Int, in bytes: [UInt8], _ message: String) -> SetteeError {
        var line = 1, column = 1
        for b in bytes.prefix(offset) {
            if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return SetteeError(.queryParseError, "\(message) at line \(line), column \(column) (offset \(offset))")
    }
}
