package import SetteeCore

/// What a sync function made of one write it accepted (``JavaScriptEngine/syncBatch(source:userContext:count:arguments:)``).
package struct SyncOutcome: Sendable, Equatable {
    /// The outcome as JSON text, as settee-js wrote it: `{"channels":[…]}`, with `"access":{user:[…]}`,
    /// `"roles":{user:[…]}` and `"expiry"` when the function granted or set them. Stored with the revision as it is.
    package var routing: [UInt8]
    /// What the function passed to `expiry()`, if it called it.
    package var expiry: JSON?
}

extension JavaScriptEngine {
    /// Runs a sync function (Sync Gateway's `function (doc, oldDoc, meta)`, with its helpers `channel`, `access`,
    /// `role`, `expiry`, `requireUser`, `requireRole`, `requireAccess`, `requireAdmin`) on `count` writes: for each,
    /// the outcome or the refusal (``JavaScriptError/forbidden(_:)``, ``JavaScriptError/unauthorized(_:)``, what
    /// else it threw as ``JavaScriptError/thrown(name:reason:)``). A failure of the engine (time limit, memory, a
    /// crash, a source that does not compile) is thrown and judges none of them.
    ///
    /// `arguments(k, &buffer)` appends write `k`'s `doc,oldDoc` as JSON text to the command being built (no copy
    /// of the bodies per write); `userContext` is `{name, roles, channels, admin}`. The answers are read without
    /// building them: an accepted write's outcome is kept as the bytes settee-js wrote.
    package func syncBatch(source: String, userContext: JSON, count: Int, capacity: Int = 0,
                           arguments: (Int, inout [UInt8]) -> Void) throws(JavaScriptError) -> [Result<SyncOutcome, JavaScriptError>] {
        if count == 0 { return [] }
        var prefix: [UInt8] = Array(#"["sync_batch","#.utf8)
        JSON.string(source).serialize(into: &prefix)
        prefix.append(contentsOf: ",[".utf8)
        userContext.serialize(into: &prefix)
        prefix.append(contentsOf: ",[".utf8)
        var batch = BatchLines(prefix: prefix, capacity: capacity > 0 ? capacity : count * 512)
        for k in 0..<count { batch.add { arguments(k, &$0) } }
        let (lines, counts) = batch.finish()
        return try withProcess(owner: Self.owner([source]), prefer: { _ in true }) { p, config throws(JavaScriptError) in
            let answers = try p.callPipelinedRaw(serialized: lines, count: counts.count,
                                                 timeout: config.timeout * (counts.max() ?? 1), log: log)
            var outcomes: [Result<SyncOutcome, JavaScriptError>] = []
            outcomes.reserveCapacity(count)
            for (line, expected) in zip(answers, counts) {
                do throws(JavaScriptError) {
                    try Self.readSyncAnswer(line, count: expected, into: &outcomes)
                } catch {
                    if case .protocolError = error { p.kill() }
                    throw error
                }
            }
            return outcomes
        }
    }

    /// One `sync_batch` line's answer, `[true,[[true,{outcome}],[false,refusal],…]]`: each write's item is cut out
    /// of the line by brackets and strings and read alone, so an item Settee can't read (an outcome that is not
    /// JSON to Settee's parser: a lone surrogate, a `toJSON` the function planted) refuses that write only. An
    /// accepted outcome is kept as the bytes settee-js wrote, once they parse. An answer of any other shape (an
    /// error of the command) is parsed in full.
    static func readSyncAnswer(_ line: [UInt8], count: Int,
                               into outcomes: inout [Result<SyncOutcome, JavaScriptError>]) throws(JavaScriptError) {
        let items: [Range<Int>]? = line.withUnsafeBufferPointer { b in
            guard let outer = RawJSONArray.elements(b, 0..<b.count), outer.count == 2, RawJSONArray.equals(b, outer[0], "true"),
                  let items = RawJSONArray.elements(b, outer[1]), items.count == count else { return nil }
            return items
        }
        if let items {
            let accepted = Array(#"[true,{"#.utf8)
            for item in items {
                // `[true,{…}]` as settee-js writes it: the outcome is the object, kept as it is once it parses.
                if item.count > accepted.count + 1, line[item.upperBound - 1] == UInt8(ascii: "]"),
                   line[item].starts(with: accepted) {
                    let routing = Array(line[(item.lowerBound + accepted.count - 1)..<(item.upperBound - 1)])
                    if case .object(let o)? = try? JSON.parse(routing) {
                        outcomes.append(.success(SyncOutcome(routing: routing, expiry: o["expiry"])))
                        continue
                    }
                }
                guard let parsed = try? JSON.parse(Array(line[item]), limits: .unlimitedForQueryServer) else {
                    outcomes.append(.failure(unreadable(line[item])))
                    continue
                }
                outcomes.append(try readSyncItem(parsed))
            }
            return
        }
        let answer: JSON
        do { answer = try JSON.parse(line, limits: .unlimitedForQueryServer) } catch {
            throw .protocolError("the query server answered something that is not JSON: \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
        guard case .array(let items) = answer, items.count == 2, items[0] == .bool(true),
              case .array(let each) = items[1], each.count == count else {
            if let error = JavaScriptError.from(answer: answer) { throw error }
            throw .protocolError("sync_batch answered \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
        }
        for item in each { outcomes.append(try readSyncItem(item)) }
    }

    /// A write whose answer Settee can't read: refused as the function's failure.
    private static func unreadable(_ bytes: ArraySlice<UInt8>) -> JavaScriptError {
        .thrown(name: "render_error", reason: "the sync function's outcome is not JSON Settee can read: "
                + String(decoding: bytes.prefix(200), as: UTF8.self))
    }

    /// One write's item of a `sync_batch` answer: `[true, outcome]` or `[false, what the function threw]`.
    private static func readSyncItem(_ item: JSON) throws(JavaScriptError) -> Result<SyncOutcome, JavaScriptError> {
        guard case .array(let pair) = item, pair.count == 2, case .bool(let accepted) = pair[0] else {
            throw .protocolError("sync_batch answered \(String(decoding: item.serializedBytes.prefix(200), as: UTF8.self))")
        }
        if accepted {
            guard case .object(let o) = pair[1] else { return .failure(unreadable(item.serializedBytes[...])) }
            return .success(SyncOutcome(routing: pair[1].serializedBytes, expiry: o["expiry"]))
        }
        let refusal = pair[1]
        if let error = JavaScriptError.from(answer: refusal) {
            switch error {
            case .forbidden, .unauthorized, .thrown: return .failure(error)
            case .notFound(let reason): return .failure(.thrown(name: "not_found", reason: reason))
            default: throw error
            }
        }
        if case .string(let message) = refusal { return .failure(.forbidden(message)) }
        return .failure(.thrown(name: "unknown_error", reason: String(decoding: refusal.serializedBytes.prefix(500), as: UTF8.self)))
    }
}

/// Cuts a JSON array's elements out of its text by brackets and strings alone, building nothing: for answers of
/// our own query server, whose shape is known (anything unexpected sends the caller to the full parser).
package enum RawJSONArray {
    /// The ranges of the elements of the array at `range` (spaces around it and its elements trimmed); nil when the
    /// bytes there are not one balanced array.
    package static func elements(_ b: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> [Range<Int>]? {
        var lower = range.lowerBound, upper = range.upperBound
        while lower < upper, isSpace(b[lower]) { lower += 1 }
        while upper > lower, isSpace(b[upper - 1]) { upper -= 1 }
        guard upper - lower >= 2, b[lower] == UInt8(ascii: "["), b[upper - 1] == UInt8(ascii: "]") else { return nil }
        var out: [Range<Int>] = []
        var depth = 0
        var start = lower + 1
        var i = lower + 1
        func element(_ end: Int) -> Range<Int>? {
            var s = start, e = end
            while s < e, isSpace(b[s]) { s += 1 }
            while e > s, isSpace(b[e - 1]) { e -= 1 }
            return s < e ? s..<e : nil
        }
        while i < upper - 1 {
            switch b[i] {
            case UInt8(ascii: "\""):
                i += 1
                while i < upper - 1, b[i] != UInt8(ascii: "\"") { i += b[i] == UInt8(ascii: "\\") ? 2 : 1 }
                guard i < upper - 1 else { return nil }
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
                guard depth >= 0 else { return nil }
            case UInt8(ascii: ",") where depth == 0:
                guard let e = element(i) else { return nil }
                out.append(e)
                start = i + 1
            default:
                break
            }
            i += 1
        }
        guard depth == 0 else { return nil }
        if let e = element(upper - 1) {
            out.append(e)
        } else if !out.isEmpty {
            return nil  // a trailing comma
        }
        return out
    }

    /// Whether the bytes at `range` are exactly `text`.
    static func equals(_ b: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ text: StaticString) -> Bool {
        guard range.count == text.utf8CodeUnitCount else { return false }
        let t = text.utf8Start
        for k in 0..<range.count where b[range.lowerBound + k] != t[k] { return false }
        return true
    }

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09 }
}
