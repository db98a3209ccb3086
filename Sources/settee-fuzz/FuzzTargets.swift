import Foundation
import SetteeBLIP
import SetteeCore
import SetteeSQLPP

/// The fuzz targets. Each takes arbitrary bytes, runs them through one parser and checks the invariants that
/// are cheap to check. A thrown parse error is the expected answer to garbage; a trap (a crash, a failed
/// precondition, an out-of-bounds access, or a violated invariant below) is a finding.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// `JSON.parse`, then serialize / canonicalize and parse again; the revision id; partial member parsing.
    case json
    /// `SQLPPParser.parseSelect` / `parseExpression` / `parseExpressionList`; printed text parses back equal.
    case sqlpp
    /// `RevID(_:)`; description and `write(into:)` agree and parse back equal; the order is total.
    case revid
    /// The `_revisions` object (`{"start":N,"ids":[…]}`, given as JSON text) → a revision path.
    case revisions
    /// `Multipart.parse`: the first line of the input is the boundary, the rest is the body. Written back
    /// with `Multipart.write` and parsed again, the parts are the same.
    case multipart
    /// The changes feed's `since` parser, against the Foundation-based implementation it replaced.
    case since
    /// `RevTree(encoded:)` (the stored `tree` column); a decoded tree encodes back equal, and appending to a
    /// chain on the bytes agrees with decode + `addChild` + encode.
    case revtree
    /// A Mango selector (`MangoSelector(_:)`): matched against sample documents in both string orders, asked what
    /// a planner asks (required fields, ranges, indexable fields); its normalized form parses again.
    case mango
    /// BLIP frames (`BLIPConnection.receive`): the input is split into frames at each `0xFE 0xFE`; a frame is
    /// either refused with a `BLIPError` or accepted, never a trap, and a closed connection stays closed and mute.
    case blip

    func run(_ data: UnsafeRawBufferPointer) {
        switch self {
        case .json: FuzzTarget.json(data)
        case .sqlpp: FuzzTarget.sqlpp(data)
        case .revid: FuzzTarget.revid(data)
        case .revisions: FuzzTarget.revisions(data)
        case .multipart: FuzzTarget.multipart(data)
        case .since: FuzzTarget.since(data)
        case .revtree: FuzzTarget.revtree(data)
        case .mango: FuzzTarget.mango(data)
        case .blip: FuzzTarget.blip(data)
        }
    }
}

/// Traps with a message: an invariant does not hold for this input.
func violated(_ target: FuzzTarget, _ message: @autoclosure () -> String) -> Never {
    preconditionFailure("settee-fuzz \(target.rawValue): invariant violated: \(message())")
}

// MARK: - JSON

extension FuzzTarget {
    static func json(_ data: UnsafeRawBufferPointer) {
        guard let value = try? JSON.parse(data) else { return }
        // Serialized text parses back to the same value.
        var text: [UInt8] = []
        value.serialize(into: &text)
        guard let again = try? JSON.parse(text) else { violated(.json, "serialized text does not parse: \(show(text))") }
        guard again == value else { violated(.json, "serialize → parse changed the value: \(show(text))") }
        guard value.jsonString.utf8.elementsEqual(text) else { violated(.json, "jsonString differs from serialize(into:)") }
        // Canonical text parses back to the same value and is a fixed point.
        let canonical = value.canonicalBytes
        guard let fromCanonical = try? JSON.parse(canonical), fromCanonical == value else {
            violated(.json, "canonical text does not parse back equal: \(show(canonical))")
        }
        guard fromCanonical.canonicalBytes == canonical else { violated(.json, "canonical form is not a fixed point") }
        // CouchDB's revision id for it is computed without trapping, and is the same twice (unless an attachment stub
        // lacks an MD5, where CouchDB's id is random).
        if case .object(let object) = value {
            let rev = RevID.next(after: nil, deleted: false, body: object)
            guard rev.generation == 1 else { violated(.json, "first revision \(rev) is not generation 1") }
            if object["_attachments"] == nil && rev != RevID.next(after: nil, deleted: false, body: object) {
                violated(.json, "revision id is not deterministic: \(rev)")
            }
        }
        // Partial parsing of some members agrees with the full parse.
        if case .object(let object) = value {
            var keys: Set<String> = ["_id"]
            for (key, _) in object.prefix(2) { keys.insert(key) }
            if let last = object.reversed().first { keys.insert(last.key) }
            guard let partial = try? JSON.parseMembers(data, keys: keys) else {
                violated(.json, "parseMembers failed on valid JSON")
            }
            let expected = JSON.object(JSONObject(object.filter { keys.contains($0.key) }.map { ($0.key, $0.value) }))
            guard partial == expected else { violated(.json, "parseMembers(\(keys.sorted())) = \(partial), expected \(expected)") }
            // The same object as the store writes it (no repeated keys): members read from its bytes alone — by the
            // selector, and one at a time as a lazily read document and `settee_member` read them — agree too.
            text.withUnsafeBytes { stored in
                guard let fromStored = try? JSONMemberSelector(keys).parseStored(stored), fromStored == expected else {
                    violated(.json, "parseStored(\(keys.sorted())) disagrees with the full parse: \(show(text))")
                }
                for key in keys.union(["missing", "K", "caf\u{E9}"]) {
                    switch JSON.storedMember(stored, key: key) {
                    case .value(let found) where found == object[key]: break
                    case .missing where object[key] == nil: break
                    case .undecided: break
                    case let other: violated(.json, "storedMember(\(key)) = \(other), the object has \(String(describing: object[key])): \(show(text))")
                    }
                }
            }
        }
    }

    static func show(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes.prefix(300), as: UTF8.self)
        return bytes.count > 300 ? text + "…" : text
    }
}

// MARK: - SQL++

extension FuzzTarget {
    static func sqlpp(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        if let statement = try? SQLPPParser.parseSelect(text) {
            let printed = statement.description
            do {
                let again = try SQLPPParser.parseSelect(printed)
                guard again == statement else { violated(.sqlpp, "printed statement parses to a different AST: \(printed)") }
            } catch {
                if !isLimit(error) { violated(.sqlpp, "printed statement does not parse: \(printed): \(error)") }
            }
        }
        if let expression = try? SQLPPParser.parseExpression(text) {
            let printed = expression.description
            do {
                let again = try SQLPPParser.parseExpression(printed)
                guard again == expression else { violated(.sqlpp, "printed expression parses to a different AST: \(printed)") }
            } catch {
                if !isLimit(error) { violated(.sqlpp, "printed expression does not parse: \(printed): \(error)") }
            }
        }
        _ = try? SQLPPParser.parseExpressionList(text)
    }

    /// Printing adds parentheses, so a statement near the nesting or length limit may print past it.
    static func isLimit(_ error: SetteeError) -> Bool {
        error.reason.contains("deep") || error.reason.contains("nest") || error.reason.contains("longer than")
    }
}

// MARK: - Revision ids

extension FuzzTarget {
    static func revid(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        guard let rev = RevID(text) else { return }
        guard rev.generation >= 1, rev.generation <= RevID.maximumGeneration, !rev.digest.isEmpty else {
            violated(.revid, "parsed parts out of range: \(rev.generation) / \(rev.digest.debugDescription)")
        }
        let description = rev.description
        guard let again = RevID(description), again == rev else { violated(.revid, "description does not parse back: \(description)") }
        var written: [UInt8] = []
        rev.write(into: &written)
        guard written.elementsEqual(description.utf8) else { violated(.revid, "write(into:) differs from description") }
        guard !(rev < again), !(again < rev) else { violated(.revid, "ordering is not irreflexive") }
        // CouchDB's order is total against ids of every digest shape.
        for other in Self.revidShapes where [rev < other, other < rev, rev == other].filter({ $0 }).count != 1 {
            violated(.revid, "\(rev) and \(other) are not ordered exactly one way")
        }
    }

    /// Revision ids of the digest shapes CouchDB orders differently (hex as bytes, anything else as text).
    static let revidShapes: [RevID] = ["1-z", "1-ab", "1-61620000000000000000000000000000", "1-abcdefghijklmnop",
                                       "1-6162636465666768696a6b6c6d6e6f70", "1-FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
                                       "1-ffffffffffffffffffffffffffffffff", "2-0"].map { RevID($0)! }

    static func revtree(_ data: UnsafeRawBufferPointer) {
        guard let tree = try? RevTree(encoded: data) else {
            // Bytes the decoder rejects are never taken for a chain either.
            var out: [UInt8] = []
            if let first = RevID("1-a"), let child = RevID("2-b"),
               RevTree.appendChild(toChain: data, parent: first, child: child, deleted: false, limit: 1000, into: &out) {
                violated(.revtree, "appended to bytes that do not decode")
            }
            return
        }
        guard let again = try? RevTree(encoded: tree.encoded()), again == tree else {
            violated(.revtree, "encoding does not decode back equal")
        }
        guard let last = tree.nodes.last, last.rev.generation < Int.max else { return }
        let child = RevID(generation: last.rev.generation + 1, digest: "fuzz")
        for deleted in [false, true] {
            var fast: [UInt8] = []
            guard RevTree.appendChild(toChain: data, parent: last.rev, child: child, deleted: deleted, limit: 1000,
                                      into: &fast) else {
                guard fast.isEmpty else { violated(.revtree, "declined but wrote bytes") }
                continue
            }
            var general = tree
            do {
                try general.addChild(child, of: last.rev, deleted: deleted, body: nil)
            } catch {
                violated(.revtree, "appended to a chain where addChild refuses: \(error)")
            }
            guard let appended = try? RevTree(encoded: fast), appended == general else {
                violated(.revtree, "appending to the chain differs from decode + addChild + encode")
            }
            // Bytes in the encoder's own form (minimal varints) must come out exactly as the encoder writes them.
            if data.elementsEqual(tree.encoded()) && fast != general.encoded(omitBodyOf: child) {
                violated(.revtree, "appending to canonical bytes differs from the encoder's bytes")
            }
        }
    }

    static func revisions(_ data: UnsafeRawBufferPointer) {
        guard let value = try? JSON.parse(data), let history = try? RevID.history(fromRevisions: value) else { return }
        guard let ids = value["ids"]?.arrayValue, let start = value["start"]?.intValue else {
            violated(.revisions, "accepted without start/ids")
        }
        guard history.count == ids.count, !history.isEmpty else { violated(.revisions, "wrong number of revisions") }
        for (i, rev) in history.enumerated() {
            guard rev.generation == Int(start) - i, rev.generation >= 1 else {
                violated(.revisions, "generation \(rev.generation) at \(i) for start \(start)")
            }
            guard rev.digest == ids[i].stringValue else { violated(.revisions, "digest \(i) changed") }
            guard let again = RevID(rev.description), again == rev else {
                violated(.revisions, "revision \(rev) does not parse back from its description")
            }
        }
    }
}

// MARK: - Multipart

extension FuzzTarget {
    static func multipart(_ data: UnsafeRawBufferPointer) {
        let bytes = Array(data)
        let lineEnd = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
        var boundaryBytes = bytes[..<lineEnd]
        if boundaryBytes.last == UInt8(ascii: "\r") { boundaryBytes = boundaryBytes.dropLast() }
        let boundary = String(decoding: boundaryBytes, as: UTF8.self)
        let body = lineEnd < bytes.endIndex ? Array(bytes[(lineEnd + 1)...]) : []

        // The header helpers, on the first line read as a header value.
        _ = Multipart.boundary(fromContentType: boundary)
        _ = Multipart.filename(fromContentDisposition: boundary)

        guard let parts = try? Multipart.parse(body, boundary: boundary) else { return }
        for part in parts {
            _ = part.contentType
            _ = part.filename
        }
        // Written back and parsed again: the same parts, except that the writer turns CR/LF in header text into
        // spaces (and the parser then trims the value).
        let written = Multipart.write(parts, boundary: boundary)
        let reparsed: [MultipartPart]
        do { reparsed = try Multipart.parse(written, boundary: boundary) } catch {
            violated(.multipart, "written body does not parse: \(error)")
        }
        let expected = parts.map { part in
            MultipartPart(headers: part.headers.map { (name: normalizedHeader($0.name), value: normalizedHeader($0.value)) },
                          body: part.body)
        }
        guard reparsed == expected else {
            violated(.multipart, "write → parse changed the parts: \(reparsed.count) parts vs \(expected.count)")
        }
    }

    private static func normalizedHeader(_ text: String) -> String {
        var bytes = Array(text.utf8).map { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") ? UInt8(ascii: " ") : $0 }
        while let first = bytes.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { bytes.removeFirst() }
        while let last = bytes.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}

// MARK: - Changes feed `since`

extension FuzzTarget {
    static func since(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        let reference = referenceSince(text)
        do {
            let value = try ChangeSequence.parse(text)
            guard reference == value else { violated(.since, "parse = \(value), reference = \(String(describing: reference))") }
        } catch {
            guard error.code == .badRequest, error.reason == ChangeSequence.malformed.reason else {
                violated(.since, "unexpected error \(error)")
            }
            guard reference == nil else { violated(.since, "parse threw, reference = \(reference!)") }
        }
    }

    /// The implementation `ChangesRoutes.parseSequence` had before it moved to SetteeCore (nil: malformed).
    private static func referenceSince(_ text: String) -> UInt64? {
        let trimmed = text.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        if trimmed.isEmpty { return 0 }
        return UInt64(digits)
    }
}

// MARK: - Mango selectors

extension FuzzTarget {
    static let mangoDocuments: [JSON] = [
        ["_id": "a", "n": 3, "s": "Apple", "t": ["x", "y"], "o": ["k": 1, "l": ["m": true]], "z": .null],
        ["_id": "b", "n": 2.5, "s": "apple", "t": [], "o": [:], "a.b": 1],
        ["_id": "c"],
    ]

    static func mango(_ data: UnsafeRawBufferPointer) {
        guard let value = try? JSON.parse(data), let selector = try? MangoSelector(value) else { return }
        // Reverse code-point order: any total order must be usable.
        let reversed: (String, String) -> Int = { a, b in a == b ? 0 : (a < b ? 1 : -1) }
        for doc in mangoDocuments {
            _ = selector.matches(doc)
            _ = selector.matches(doc, strings: reversed)
        }
        for path in selector.fields + [["n"], ["o", "k"], ["_id"]] {
            _ = selector.requires(path)
            _ = selector.range(of: path)
            _ = selector.isConstant(path)
            _ = selector.isEmptyRange(path)
        }
        _ = selector.indexableFields
        // The normalized selector (as `_explain` shows it) is itself a selector that matches the same documents.
        let normalized = selector.normalizedJSON
        guard let again = try? MangoSelector(normalized) else {
            violated(.mango, "normalized selector does not parse: \(normalized.jsonString.prefix(300))")
        }
        for doc in mangoDocuments where again.matches(doc) != selector.matches(doc) {
            violated(.mango, "normalized selector \(normalized.jsonString.prefix(300)) matches \(doc.jsonString) differently")
        }
    }
}

// MARK: - BLIP

extension FuzzTarget {
    static func blip(_ data: UnsafeRawBufferPointer) {
        var connection = BLIPConnection()
        let bytes = Array(data)
        var frames: [[UInt8]] = [[]]
        var i = 0
        while i < bytes.count {
            if bytes[i] == 0xFE, i + 1 < bytes.count, bytes[i + 1] == 0xFE {
                frames.append([])
                i += 2
            } else {
                frames[frames.count - 1].append(bytes[i])
                i += 1
            }
        }
        for frame in frames {
            do {
                _ = try connection.receive(frame)
            } catch {
                if error.isFatal {
                    guard connection.isClosed else { violated(.blip, "a fatal \(error) left the connection open") }
                    guard connection.nextFrame() == nil else { violated(.blip, "a closed connection still sends") }
                }
            }
            while connection.nextFrame() != nil {}
        }
    }
}
