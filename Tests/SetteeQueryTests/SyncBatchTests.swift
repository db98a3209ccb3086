import Foundation
import Testing
import SetteeCore
import SetteeIndex

/// `sync_batch` through a real settee-js: the writes' arguments written straight into the command's lines, and the
/// answers read without building them (outcomes cut out of the line), checked against what a full parse says.
@Suite struct SyncBatchTests {
    static let function = """
        function (doc, oldDoc) {
          if (doc.refuse) throw({forbidden: "no " + doc.refuse});
          if (doc.fail) throw new TypeError(doc.fail);
          channel(doc.channels);
          if (doc.grant) access(doc.grant, doc.channels);
          if (doc.role) role(doc.grant, "role:" + doc.role);
          if (doc.expiry !== undefined) expiry(doc.expiry);
        }
        """

    static func run(_ docs: [JSON], engine: JavaScriptEngine, source: String = function) throws -> [Result<SyncOutcome, JavaScriptError>] {
        let texts = docs.map(\.serializedBytes)
        let user: JSON = ["name": .null, "roles": [], "channels": [], "admin": true]
        return try engine.syncBatch(source: source, userContext: user, count: texts.count) { k, out in
            out.append(contentsOf: texts[k])
            out.append(contentsOf: ",null".utf8)
        }
    }

    @Test func outcomesAreCutOutOfTheAnswerExactlyAsTheyWereWritten() throws {
        let engine = JavaScriptEngine(configuration: .init(maxProcesses: 1))
        defer { engine.shutdown() }
        // Channel names that look like the answer's own punctuation, escapes, non-ASCII, a grant to a user named
        // "expiry" (the outcome is then parsed to tell), refusals and failures between accepted writes.
        let docs: [JSON] = [
            ["_id": "a", "channels": ["plain"]],
            ["_id": "b", "channels": ["],[true,{\"channels\":[\"x\"]}],[", "back\\slash\"", "é☃𝄞", "{", "}"]],
            ["_id": "c", "refuse": "way"],
            ["_id": "d", "channels": ["c"], "grant": "expiry"],
            ["_id": "e", "channels": ["e"], "expiry": 3600],
            ["_id": "f", "fail": "broken \"on purpose\""],
            ["_id": "g", "channels": [], "grant": "bob", "role": "editor"],
            ["_id": "h", "channels": "single", "expiry": "2030-01-01T00:00:00Z"],
        ]
        let outcomes = try Self.run(docs, engine: engine)
        #expect(outcomes.count == docs.count)
        func channels(_ k: Int) -> [String]? {
            guard case .success(let o) = outcomes[k], case .object(let obj) = try? JSON.parse(o.routing) else { return nil }
            return obj["channels"]?.arrayValue?.compactMap(\.stringValue)
        }
        #expect(channels(0) == ["plain"])
        #expect(channels(1) == ["],[true,{\"channels\":[\"x\"]}],[", "back\\slash\"", "é☃𝄞", "{", "}"])
        guard case .failure(.forbidden(let reason)) = outcomes[2] else { Issue.record("\(outcomes[2])"); return }
        #expect(reason == "no way")
        guard case .success(let d) = outcomes[3], case .object(let dObj) = try JSON.parse(d.routing) else {
            Issue.record("\(outcomes[3])")
            return
        }
        #expect(dObj["access"] == ["expiry": ["c"]])
        #expect(d.expiry == nil)
        guard case .success(let e) = outcomes[4] else { Issue.record("\(outcomes[4])"); return }
        #expect(e.expiry == .int(3600))
        guard case .failure(.thrown(let name, let message)) = outcomes[5] else { Issue.record("\(outcomes[5])"); return }
        #expect(name == "TypeError")
        #expect(message.contains("broken \"on purpose\""))
        guard case .success(let g) = outcomes[6], case .object(let gObj) = try JSON.parse(g.routing) else {
            Issue.record("\(outcomes[6])")
            return
        }
        #expect(gObj["roles"] == ["bob": ["editor"]])
        #expect(channels(7) == ["single"])
        if case .success(let h) = outcomes[7] { #expect(h.expiry == .string("2030-01-01T00:00:00Z")) }
        // Every routing is the JSON text settee-js wrote: parsing and writing it again gives the same bytes.
        for case .success(let o) in outcomes { #expect(try JSON.parse(o.routing).serializedBytes == o.routing) }
    }

    @Test func manyWritesSpanManyLinesAndOneLargeWriteHasItsOwn() throws {
        let engine = JavaScriptEngine(configuration: .init(maxProcesses: 1))
        defer { engine.shutdown() }
        var docs: [JSON] = (0..<250).map { i in ["_id": .string("d\(i)"), "channels": [.string("ch\(i)")]] }
        // Past a line's megabyte: the large one goes alone, the ones after it continue on the next line.
        docs.insert(["_id": "big", "channels": ["big"], "pad": .string(String(repeating: "x", count: 1_500_000))], at: 120)
        let outcomes = try Self.run(docs, engine: engine)
        #expect(outcomes.count == docs.count)
        for (doc, outcome) in zip(docs, outcomes) {
            guard case .success(let o) = outcome, case .object(let obj) = try JSON.parse(o.routing) else {
                Issue.record("\(doc["_id"] ?? .null): \(outcome)")
                continue
            }
            #expect(obj["channels"] == doc["channels"])
        }
    }

    static func channels(_ outcome: Result<SyncOutcome, JavaScriptError>) -> [String]? {
        guard case .success(let o) = outcome, case .object(let obj) = try? JSON.parse(o.routing) else { return nil }
        return obj["channels"]?.arrayValue?.compactMap(\.stringValue)
    }

    /// An outcome Settee's parser refuses (a channel name cut in the middle of a surrogate pair) refuses that write
    /// alone, as the function's failure; the writes around it are routed.
    @Test func anOutcomeSetteeCannotReadRefusesThatWriteAlone() throws {
        let engine = JavaScriptEngine(configuration: .init(maxProcesses: 1))
        defer { engine.shutdown() }
        let source = "function (doc) { channel(doc.channels); if (doc.lone) channel(doc.lone.slice(0, 1)); }"
        let outcomes = try Self.run([["channels": ["a"]], ["lone": "𝄞x"], ["channels": ["c"]]], engine: engine, source: source)
        #expect(Self.channels(outcomes[0]) == ["a"])
        guard case .failure(.thrown(let name, _)) = outcomes[1] else { Issue.record("\(outcomes[1])"); return }
        #expect(name == "render_error")
        #expect(Self.channels(outcomes[2]) == ["c"])
    }

    /// The function's sandbox is its own to break, not the outcome's format: a planted `Array.prototype.toJSON`
    /// doesn't reach the channels written, and promise jobs a refusal's `toJSON` queues can't add channels to the
    /// next write.
    @Test func theFunctionsOwnCodeCantBendTheOutcomesOfOtherWrites() throws {
        let engine = JavaScriptEngine(configuration: .init(maxProcesses: 1))
        defer { engine.shutdown() }
        let source = """
            function (doc) {
              if (doc.plant) Array.prototype.toJSON = function () { return undefined; };
              if (doc.trick) throw {forbidden: "no", toJSON: function () {
                Promise.resolve().then(function () { channel("stolen"); });
                return {forbidden: "no"};
              }};
              channel(doc.channels);
            }
            """
        let docs: [JSON] = [["plant": true, "channels": ["a"]], ["channels": ["b"]], ["trick": true], ["channels": ["d"]]]
        let outcomes = try Self.run(docs, engine: engine, source: source)
        #expect(Self.channels(outcomes[0]) == ["a"])
        #expect(Self.channels(outcomes[1]) == ["b"])
        guard case .failure(.forbidden(let reason)) = outcomes[2] else { Issue.record("\(outcomes[2])"); return }
        #expect(reason == "no")
        #expect(Self.channels(outcomes[3]) == ["d"])
    }

    /// Lines hold at most 100 writes and about a megabyte; a write that would take a line past it starts the next.
    @Test func batchLinesSplitByCountAndSize() {
        var batch = BatchLines(prefix: Array("[".utf8), capacity: 0)
        for _ in 0..<250 { batch.add { $0.append(contentsOf: "1".utf8) } }
        #expect(batch.finish().counts == [100, 100, 50])
        var sized = BatchLines(prefix: Array("[".utf8), capacity: 0)
        let big = [UInt8](repeating: UInt8(ascii: "2"), count: 600_000)
        for _ in 0..<3 { sized.add { $0.append(contentsOf: big) } }
        sized.add { $0.append(contentsOf: "3".utf8) }
        let (lines, counts) = sized.finish()
        #expect(counts == [1, 1, 2])
        // Every line is the prefix, its writes comma-separated, and the suffix.
        let text = String(decoding: lines, as: UTF8.self).split(separator: "\n")
        #expect(text.count == 3)
        #expect(text.allSatisfy { $0.hasPrefix("[2") && $0.hasSuffix("]]]") })
        #expect(text[2].hasSuffix(",3]]]"))
    }

    @Test func rawArrayElementsFollowStringsAndBrackets() {
        let text = Array(#" [ true , [ "a,b" , {"k":"]\"}"} , [1,[2]] ] , null ] "#.utf8)
        let elements = text.withUnsafeBufferPointer { b in RawJSONArray.elements(b, 0..<b.count) }
        #expect(elements?.count == 3)
        let inner = text.withUnsafeBufferPointer { b in elements.flatMap { RawJSONArray.elements(b, $0[1]) } }
        #expect(inner.map { $0.map { String(decoding: text[$0], as: UTF8.self) } } == [#""a,b""#, #"{"k":"]\"}"}"#, "[1,[2]]"])
        for bad in [#"[1,2"#, #"[1,]"#, #"["unterminated]"#, #"[1]]"#, "{}", ""] {
            let bytes = Array(bad.utf8)
            #expect(bytes.withUnsafeBufferPointer { RawJSONArray.elements($0, 0..<$0.count) } == nil, "\(bad)")
        }
        #expect(Array("[]".utf8).withUnsafeBufferPointer { RawJSONArray.elements($0, 0..<$0.count) } == [])
    }
}
