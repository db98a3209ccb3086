import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

/// `/db` with a (seq 1), b (seq 2), c (seq 3); returns revs by id.
private func seedChanges(_ c: Couch) async throws -> [String: String] {
    try await c.createDB("db")
    var revs: [String: String] = [:]
    for (i, id) in ["a", "b", "c"].enumerated() {
        revs[id] = try await c.putDoc("/db/\(id)", #"{"n":\#(i),"type":"\#(i % 2 == 0 ? "even" : "odd")"}"#)
    }
    return revs
}

private func results(_ r: HTTPResult) -> [JSON] { r["results"]?.arrayValue ?? [] }

@Suite("_changes normal feed")
struct ChangesNormalTests {
    @Test func listsEveryChangeWithSeqAndLastSeq() async throws {
        try await withServer { c in
            let revs = try await seedChanges(c)
            let r = try await c.get("/db/_changes")
            #expect(r.status == .ok)
            let rows = results(r)
            #expect(rows.map { $0["id"]?.stringValue } == ["a", "b", "c"])
            #expect(rows.map { seqNumber($0["seq"]) } == [1, 2, 3])
            #expect(rows[0]["changes"] == [["rev": .string(revs["a"] ?? "")]])
            #expect(rows[0]["deleted"] == nil)
            #expect(seqNumber(r["last_seq"]) == 3)
            #expect(r["pending"] == 0)
        }
    }

    @Test func emptyDatabaseHasNoResults() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let r = try await c.get("/db/_changes")
            #expect(results(r).isEmpty)
            #expect(seqNumber(r["last_seq"]) == 0)
        }
    }

    @Test func updatedDocumentAppearsOnceAtItsLatestSeq() async throws {
        try await withServer { c in
            let revs = try await seedChanges(c)
            let del = try await c.delete("/db/a?rev=\(revs["a"] ?? "")")
            let r = try await c.get("/db/_changes")
            let rows = results(r)
            #expect(rows.map { $0["id"]?.stringValue } == ["b", "c", "a"])
            #expect(seqNumber(rows.last?["seq"]) == 4)
            #expect(rows.last?["deleted"] == true)
            #expect(rows.last?["changes"] == [["rev": del["rev"] ?? .null]])
        }
    }

    @Test func sinceSkipsEarlierChanges() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.get("/db/_changes?since=1")
            #expect(rowIDs(r.json, "results") == ["b", "c"])
            #expect(seqNumber(r["last_seq"]) == 3)
            // The last_seq handed out is accepted back.
            let last = try #require(r["last_seq"])
            let tail = try await c.get("/db/_changes?since=\(q(last.stringValue ?? last.jsonString))")
            #expect(results(tail).isEmpty)
            #expect(seqNumber(tail["last_seq"]) == 3)
            let now = try await c.get("/db/_changes?since=now")
            #expect(now.status == .ok)
        }
    }

    @Test func limitReportsPendingChanges() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.get("/db/_changes?limit=1")
            #expect(rowIDs(r.json, "results") == ["a"])
            #expect(seqNumber(r["last_seq"]) == 1)
            #expect(r["pending"] == 2)
            let next = try await c.get("/db/_changes?limit=1&since=1")
            #expect(rowIDs(next.json, "results") == ["b"])
            #expect(next["pending"] == 1)
        }
    }

    @Test func descendingStartsFromNewest() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.get("/db/_changes?descending=true")
            #expect(rowIDs(r.json, "results") == ["c", "b", "a"])
            // CouchDB's last_seq is the last row's sequence: a descending feed's oldest.
            #expect(seqNumber(r["last_seq"]) == 1)
            let one = try await c.get("/db/_changes?descending=true&limit=1")
            #expect(rowIDs(one.json, "results") == ["c"])
            #expect(seqNumber(one["last_seq"]) == 3)
        }
    }

    @Test func styleAllDocsListsEveryLeaf() async throws {
        try await withServer { c in
            try await c.createDB("db")
            for ch in ["a", "b"] {
                _ = try await c.put("/db/doc?new_edits=false", #"{"_rev":"1-\#(digest(Character(ch)))"}"#)
            }
            let main = try await c.get("/db/_changes")
            #expect(results(main).first?["changes"] == [["rev": .string("1-\(digest("b"))")]])
            let all = try await c.get("/db/_changes?style=all_docs")
            let revs = results(all).first?["changes"]?.arrayValue?.compactMap { $0["rev"]?.stringValue } ?? []
            #expect(Set(revs) == ["1-\(digest("a"))", "1-\(digest("b"))"])
            expectError(try await c.get("/db/_changes?style=bogus"), .badRequest, "bad_request")
        }
    }

    @Test func includeDocsEmbedsDocumentsAndConflicts() async throws {
        try await withServer { c in
            let revs = try await seedChanges(c)
            let r = try await c.get("/db/_changes?include_docs=true")
            #expect(results(r).first?["doc"] == ["_id": "a", "_rev": .string(revs["a"] ?? ""), "n": 0, "type": "even"])
            #expect(try await c.get("/db/_changes").json["results"]?[0]?["doc"] == nil)

            _ = try await c.put("/db/a?new_edits=false", #"{"_rev":"1-\#(digest("0"))","n":"loser"}"#)
            let withConflicts = try await c.get("/db/_changes?include_docs=true&conflicts=true&since=3")
            let doc = results(withConflicts).first?["doc"]
            #expect(doc?["_id"] == "a")
            #expect(doc?["_conflicts"] == [.string("1-\(digest("0"))")])
        }
    }

    @Test func docIDsFilterViaPostBody() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.post("/db/_changes?filter=_doc_ids", #"{"doc_ids":["c","a","zz"]}"#)
            #expect(r.status == .ok)
            #expect(rowIDs(r.json, "results") == ["a", "c"])
        }
    }

    @Test func docIDsFilterViaQueryString() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.get("/db/_changes?filter=_doc_ids&doc_ids=\(q(#"["b"]"#))")
            #expect(rowIDs(r.json, "results") == ["b"])
            expectError(try await c.get("/db/_changes?filter=_doc_ids"), .badRequest, "bad_request")
        }
    }

    @Test func selectorFilterMatchesDocumentContent() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.post("/db/_changes?filter=_selector", #"{"selector":{"type":"even"}}"#)
            #expect(r.status == .ok)
            #expect(rowIDs(r.json, "results") == ["a", "c"])
            #expect(results(r).first?["doc"] == nil, "docs only with include_docs")
            let gt = try await c.post("/db/_changes?filter=_selector", #"{"selector":{"n":{"$gt":0}}}"#)
            #expect(rowIDs(gt.json, "results") == ["b", "c"])
            expectError(try await c.get("/db/_changes?filter=_selector"), .badRequest, "bad_request")
        }
    }

    @Test func unknownFilterIs404AndBadOptionsAre400() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            expectError(try await c.get("/db/_changes?filter=app/byType"), .notFound, "not_found")
            expectError(try await c.get("/db/_changes?feed=carrier-pigeon"), .badRequest, "bad_request")
            expectError(try await c.get("/db/_changes?limit=abc"), .badRequest, "bad_request")
            expectError(try await c.get("/db/_changes?since=xyz"), .badRequest, "bad_request")
            expectError(try await c.request(.put, "/db/_changes"), .methodNotAllowed, "method_not_allowed")
            #expect(try await c.get("/db/_changes?unknown_option=1").status == .ok)
        }
    }
}

/// Regressions: `since=now` on the normal feed, and `pending` under a selector filter.
@Suite("_changes since=now and filtered pending")
struct ChangesSinceNowAndPendingTests {
    @Test func normalFeedSinceNowReturnsNoResultsAndCurrentSeq() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.get("/db/_changes?since=now")
            #expect(results(r).isEmpty)
            #expect(seqNumber(r["last_seq"]) == 3)
        }
    }

    @Test func selectorFeedPendingCountsOnlyMatchingChanges() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.post("/db/_changes?filter=_selector&limit=1", #"{"selector":{"type":"even"}}"#)
            #expect(rowIDs(r.json, "results") == ["a"])
            #expect(r["pending"] == 1)
        }
    }
}

@Suite("_changes longpoll feed")
struct ChangesLongpollTests {
    @Test func returnsImmediatelyWhenChangesExist() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let started = ContinuousClock.now
            let r = try await c.get("/db/_changes?feed=longpoll&since=1&timeout=20000")
            #expect(ContinuousClock.now - started < .seconds(10))
            #expect(r.status == .ok)
            #expect(rowIDs(r.json, "results") == ["b", "c"])
            #expect(seqNumber(r["last_seq"]) == 3)
        }
    }

    @Test func sinceNowWaitsForAWriteFromAnotherTask() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let writer = Task {
                try await Task.sleep(for: .milliseconds(300))
                return try await c.put("/db/late", #"{"late":true}"#)
            }
            let started = ContinuousClock.now
            let r = try await c.get("/db/_changes?feed=longpoll&since=now&timeout=20000")
            let elapsed = ContinuousClock.now - started
            let written = try await writer.value
            #expect(written.status == .created)
            #expect(elapsed >= .milliseconds(250))
            #expect(elapsed < .seconds(15))
            #expect(rowIDs(r.json, "results") == ["late"])
            #expect(seqNumber(r["last_seq"]) == 4)
            #expect(results(r).first?["changes"] == [["rev": written["rev"] ?? .null]])
        }
    }

    @Test func timesOutWithEmptyResults() async throws {
        try await withServer { c in
            _ = try await seedChanges(c)
            let r = try await c.get("/db/_changes?feed=longpoll&since=now&timeout=200")
            #expect(r.status == .ok)
            #expect(results(r).isEmpty)
            #expect(seqNumber(r["last_seq"]) == 3)
        }
    }
}
