import Foundation
import Synchronization
import Testing
import Settee
import SetteeStore
@testable import SetteeIndex

/// A collator with nothing cached.
enum ViewCollatorFresh {
    static func encode(_ s: String) -> [UInt8] { (try? ViewCollator())?.encode(.string(s)) ?? [] }
}

@Suite(.serialized) struct ViewTests {
    // MARK: Collation

    /// CouchDB's collation specification (docs: "Views Collation"), plus Unicode cases: each key sorts before the next.
    static let collationTable: [String] = [
        "null", "false", "true",
        "-1e300", "-2", "-1.5", "0", "1", "2", "3.0", "4", "1e300",
        #""""#, #""~""#, #""$""#, #""0""#, #""9""#,
        #""a""#, #""A""#, #""á""#, #""Á""#, #""aa""#, #""b""#, #""B""#, #""ba""#, #""bb""#,
        #""e""#, #""é""#, #""f""#, #""z""#, #""Z""#, #""ζ""#,
        "[]", #"["a"]"#, #"["b"]"#, #"["b","c"]"#, #"["b","c","a"]"#, #"["b","d"]"#, #"["b","d","e"]"#, "[[]]", "[{}]",
        "{}", #"{"a":1}"#, #"{"a":2}"#, #"{"b":1}"#, #"{"b":2}"#, #"{"b":2,"a":1}"#, #"{"b":2,"c":2}"#,
    ]

    @Test func keysCollateAsCouchDB() throws {
        let collator = try ViewCollator()
        let keys = try Self.collationTable.map { try JSON.parse($0) }
        for i in keys.indices {
            for j in keys.indices {
                let expected = i < j ? -1 : (i == j ? 0 : 1)
                #expect(collator.compare(keys[i], keys[j]) == expected, "\(Self.collationTable[i]) vs \(Self.collationTable[j])")
            }
        }
        // Numbers compare by value across int/float; strings case-insensitively first.
        #expect(collator.compare(.int(3), .double(3.0)) == 0)
        #expect(collator.compare("apple", "Banana") < 0)
        #expect(collator.compareStrings("a", "B") < 0)
        // A shuffled table sorts back into order through the encoding (what SQLite compares).
        var rng = SeededGenerator(seed: 7)
        let sorted = keys.shuffled(using: &rng).map { (collator.encode($0), $0) }
            .sorted { $0.0.lexicographicallyPrecedes($1.0) }.map(\.1)
        #expect(sorted == keys)
    }

    // MARK: Map

    static func people(_ db: Database) throws -> Settee.Collection {
        let c = try db.defaultCollection()
        try load(c, [
            #"{"_id":"p1","type":"person","name":"Ann","phones":["555-1","555-2"]}"#,
            #"{"_id":"p2","type":"person","name":"bob","phones":["555-3"]}"#,
            #"{"_id":"p3","type":"person","name":"Carl","phones":[]}"#,
            #"{"_id":"like1","type":"like","creator":"bob","date":"2026-01-02","likedPostID":"post1"}"#,
            #"{"_id":"post1","type":"post","title":"Hello"}"#,
        ])
        return c
    }

    @Test func seedPhonesView() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.people(db)
        let view = c.view(named: "phones")
        view.setMapBlock({ doc, emit in
            for phone in doc["phones"]?.arrayValue ?? [] { emit(phone, doc["name"]) }
        }, version: "2")
        let rows = try view.createQuery().run()
        #expect(rows.map(\.key) == ["555-1", "555-2", "555-3"])
        #expect(rows.map(\.value) == ["Ann", "Ann", "bob"])
        #expect(rows.map(\.sourceDocumentID) == ["p1", "p1", "p2"])
        #expect(rows.totalRows == 3)
        // Design documents are not mapped.
        try load(c, [#"{"_id":"_design/x","phones":["000"]}"#])
        #expect(try view.createQuery().run().count == 3)

        var q = view.createQuery()
        q.startKey = "555-2"
        q.limit = 1
        let one = try q.run()
        #expect(one.map(\.key) == ["555-2"])
        #expect(one.offset == 1)

        q = view.createQuery()
        q.descending = true
        q.includeDocs = true
        let desc = try q.run()
        #expect(desc.map(\.key) == ["555-3", "555-2", "555-1"])
        #expect(desc[0].document?["name"] == "bob")
        #expect(desc[0].document?["_id"] == "p2")
    }

    /// Stored keys are ICU sort keys: a database whose views were built with another collator version (an ICU
    /// upgrade; databases from before the version was recorded) drops them when opened, and they are rebuilt.
    /// The index and view registries are versioned (in `meta`): a database made before a build that adds a column
    /// to them is migrated by that build, and its views and indexes answer; a build that knows fewer versions still
    /// opens it (followers' migrations only add) and leaves the recorded version where it was.
    @Test func registriesMigrateAndTheirViewsAndIndexesAnswer() throws {
        let dir = TempDir()
        let map: MapBlock = { doc, emit in
            for phone in doc["phones"]?.arrayValue ?? [] { emit(phone, doc["name"]) }
        }
        do {
            let db = try dir.open()
            let c = try Self.people(db)
            c.view(named: "phones").setMapBlock(map, version: "1")
            #expect(try c.view(named: "phones").createQuery().run().count == 3)
            try c.createIndex(withName: "byType", config: ValueIndexConfiguration(["type"]))
            #expect(try db.read { try Migrator.recordedVersion($0, metaKey: ViewManager.registryMetaKey) } == 1)
            #expect(try db.read { try Migrator.recordedVersion($0, metaKey: IndexManager.registryMetaKey) } == 1)
            // A newer build's migrations: a column each, with defaults (followers' migrations only add).
            try db.write { conn in
                var views = Migrator(metaKey: ViewManager.registryMetaKey, migrations: ViewManager.registryMigrations)
                views.register(2) { try $0.execute("ALTER TABLE views ADD COLUMN note TEXT NOT NULL DEFAULT ''") }
                try views.migrate(inTransaction: conn)
                var indexes = Migrator(metaKey: IndexManager.registryMetaKey, migrations: IndexManager.registryMigrations)
                indexes.register(2) { try $0.execute("ALTER TABLE indexes ADD COLUMN note TEXT NOT NULL DEFAULT ''") }
                try indexes.migrate(inTransaction: conn)
            }
            #expect(try db.read { try Migrator.recordedVersion($0, metaKey: ViewManager.registryMetaKey) } == 2)
            db.close()
        }
        // Opened again (this build knows version 1 only): the registries load and answer.
        let db = try dir.open()
        let c = try db.defaultCollection()
        let view = c.view(named: "phones")
        view.setMapBlock(map, version: "1")
        #expect(try view.createQuery().run().map(\.key) == ["555-1", "555-2", "555-3"])
        let query = try db.createQuery("SELECT META().id FROM _ WHERE type = 'person' ORDER BY META().id")
        #expect(try query.explain().contains("byType"))
        #expect(try query.execute().compactMap { $0.string(forKey: "id") } == ["p1", "p2", "p3"])
        #expect(try db.read { try Migrator.recordedVersion($0, metaKey: ViewManager.registryMetaKey) } == 2)
        #expect(try db.read { try Migrator.recordedVersion($0, metaKey: IndexManager.registryMetaKey) } == 2)
        db.close()
    }

    @Test func viewsBuiltWithAnotherCollatorAreRebuilt() throws {
        let dir = TempDir()
        let map: MapBlock = { doc, emit in
            for phone in doc["phones"]?.arrayValue ?? [] { emit(phone, doc["name"]) }
        }
        var before: Int64 = 0
        do {
            let db = try dir.open()
            let c = try Self.people(db)
            c.view(named: "phones").setMapBlock(map, version: "1")
            #expect(try c.view(named: "phones").createQuery().run().count == 3)
            before = try db.read { try $0.int64("SELECT max(id) FROM views") ?? 0 }
            let current = try db.read { conn -> String? in
                let stmt = try conn.prepare("SELECT value FROM meta WHERE key = 'views-collator'")
                defer { stmt.reset() }
                return try stmt.step() ? stmt.string(0) : nil
            }
            #expect(current == (try ViewCollator().version), "the collator version is recorded")
            try db.write { try $0.execute("UPDATE meta SET value = '0.0.0.0' WHERE key = 'views-collator'") }
            db.close()
        }
        let db = try dir.open()
        let c = try db.defaultCollection()
        let view = c.view(named: "phones")
        view.setMapBlock(map, version: "1")
        let rows = try view.createQuery().run()
        #expect(rows.map(\.key) == ["555-1", "555-2", "555-3"])
        let after = try db.read { try $0.int64("SELECT max(id) FROM views") ?? 0 }
        #expect(after > before, "the view was dropped and built again")
        db.close()
    }

    @Test func redirectedRowsPointAtAnotherDocument() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.people(db)
        let likes = c.view(named: "likes")
        likes.setMapBlock({ doc, emit in
            guard doc["type"] == "like", let post = doc["likedPostID"] else { return }
            emit([doc["creator"] ?? .null, doc["date"] ?? .null], ["_id": post])
        }, version: "1")
        var q = likes.createQuery()
        q.includeDocs = true
        let rows = try q.run()
        #expect(rows.count == 1)
        #expect(rows[0].documentID == "post1")
        #expect(rows[0].sourceDocumentID == "like1")
        #expect(rows[0].document?["title"] == "Hello")
        #expect(rows[0].key == ["bob", "2026-01-02"])
    }

    /// A row whose value names a `_rev` includes that revision of the document — an older one too, while
    /// compaction hasn't dropped it — as CouchDB's include_docs does; one the document doesn't have is null.
    @Test func emittedRevisionChoosesTheIncludedRevision() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let doc = MutableDocument(id: "d")
        doc["v"].value = 1
        try c.save(document: doc)
        let first = try #require(try c.document(id: "d")?.revisionID)
        let edit = try #require(try c.document(id: "d")).toMutable()
        edit["v"].value = 2
        edit["prev"].string = first
        try c.save(document: edit)
        let view = c.view(named: "previous")
        view.setMapBlock({ doc, emit in
            emit(doc["_id"] ?? .null, ["_rev": doc["prev"] ?? doc["_rev"] ?? .null])
            emit("bogus", ["_rev": "9-00000000000000000000000000000000"])
        }, version: "1")
        var q = view.createQuery()
        q.includeDocs = true
        let rows = try q.run()
        let previous = try #require(rows.first { $0.key == "d" })
        #expect(previous.document?["_rev"] == .string(first))
        #expect(previous.document?["v"] == 1)
        #expect(previous.document?["prev"] == nil)
        #expect(rows.first { $0.key == "bogus" }?.document == .null)
        try db.compact()
        #expect(try view.createQuery().run().isEmpty == false)
        var after = view.createQuery()
        after.includeDocs = true
        #expect(try after.run().first { $0.key == "d" }?.document == .null, "compaction dropped the old body")
    }

    @Test func keyRangesKeysAndDocIDs() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        // Every doc emits its number's parity and the number.
        try load(c, (0..<40).map { #"{"_id":"d\#(String(format: "%02d", $0))","n":\#($0)}"# })
        let view = c.view(named: "n")
        view.setMapBlock({ doc, emit in emit([.string(doc["n"]!.intValue! % 2 == 0 ? "even" : "odd"), doc["n"]!]) }, version: "1")
        var q = view.createQuery()
        q.startKey = ["even"]
        q.endKey = ["even", [:]]   // {} sorts after every number: the whole "even" prefix
        #expect(try q.run().count == 20)
        q.inclusiveEnd = false
        q.endKey = ["even", 10]
        #expect(try q.run().map { $0.key[1]!.intValue! } == [0, 2, 4, 6, 8])
        q = view.createQuery()
        q.keys = [["odd", 3], ["even", 2], ["none"]]
        #expect(try q.run().map(\.sourceDocumentID) == ["d03", "d02"])
        q = view.createQuery()
        q.key = ["odd", 39]
        #expect(try q.run().map(\.sourceDocumentID) == ["d39"])
        q = view.createQuery()
        q.skip = 38
        #expect(try q.run().map(\.sourceDocumentID) == ["d37", "d39"])

        // Same key from several documents: ties by document id, and startKeyDocID/endKeyDocID cut inside them.
        let constant = c.view(named: "constant")
        constant.setMapBlock({ doc, emit in emit("same", doc["n"]) }, version: "1")
        q = constant.createQuery()
        q.startKey = "same"
        q.startKeyDocID = "d10"
        q.endKey = "same"
        q.endKeyDocID = "d12"
        #expect(try q.run().map(\.sourceDocumentID) == ["d10", "d11", "d12"])
        q.inclusiveEnd = false
        #expect(try q.run().map(\.sourceDocumentID) == ["d10", "d11"])
        q = constant.createQuery()
        q.descending = true
        q.startKey = "same"
        q.startKeyDocID = "d12"
        q.endKey = "same"
        q.endKeyDocID = "d10"
        #expect(try q.run().map(\.sourceDocumentID) == ["d12", "d11", "d10"])
    }

    @Test func badQueriesAreClearErrors() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.people(db)
        let view = c.view(named: "names")
        view.setMapBlock({ doc, emit in if let n = doc["name"] { emit(n, nil) } }, version: "1")
        var q = view.createQuery()
        q.startKey = "z"
        q.endKey = "a"
        #expect(throws: SetteeError.self) { try q.run() }
        q = view.createQuery()
        q.group = true
        #expect(throws: SetteeError.self) { try q.run() }  // grouping a map-only view
        q = view.createQuery()
        q.limit = -1
        #expect(throws: SetteeError.self) { try q.run() }
        #expect(throws: SetteeError.self) { try c.view(named: "unregistered").createQuery().run() }
    }

    @Test func throwingMapSkipsTheDocumentOnly() throws {
        struct Boom: Error {}
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.people(db)
        let view = c.view(named: "fragile")
        view.setMapBlock({ doc, emit in
            if doc["_id"] == "p2" { throw Boom() }
            if let n = doc["name"] { emit(n, nil) }
        }, version: "1")
        #expect(try view.createQuery().run().map(\.key) == ["Ann", "Carl"])
        #expect(try view.info().mapErrors == 1)
    }

    /// Several first queries of a new view at once: one builds it, all see the same rows, none fails.
    @Test func concurrentFirstQueries() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, (0..<2000).map { #"{"_id":"d\#($0)","n":\#($0 % 10)}"# })
        let view = c.view(named: "n")
        view.setMapReduce({ doc, emit in emit(doc["n"] ?? .null, nil) }, .count, version: "1")
        let counts = Mutex<[JSON?]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let value = try? view.createQuery().run().first?.value
            counts.withLock { $0.append(value) }
        }
        #expect(counts.withLock { $0 } == Array(repeating: JSON.int(2000), count: 8))
    }

    // MARK: Maintenance

    @Test func incrementalUpdatesDeletesAndConflicts() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let view = c.view(named: "v")
        view.setMapBlock({ doc, emit in if let v = doc["v"] { emit(v, doc["_rev"]) } }, version: "1")
        try load(c, [#"{"_id":"a","v":"one"}"#, #"{"_id":"b","v":"two"}"#])
        #expect(try view.createQuery().run().map(\.key) == ["one", "two"])
        try load(c, [#"{"_id":"a","v":"three"}"#])
        _ = try c.write([RevisionWrite(id: "b", body: [:], deleted: true, mode: .overwrite)])
        #expect(try view.createQuery().run().map(\.key) == ["three"])

        // A conflict: the winning revision (higher rev id) is the one indexed; deleting it promotes the other.
        let ra = RevID("1-aaaa")!, rb = RevID("1-bbbb")!
        for r in try c.write([
            RevisionWrite(id: "x", body: ["v": "loser"], mode: .replicated(history: [ra])),
            RevisionWrite(id: "x", body: ["v": "winner"], mode: .replicated(history: [rb])),
        ]) { _ = try r.get() }
        #expect(try view.createQuery().run().map(\.key) == ["three", "winner"])
        for r in try c.write([RevisionWrite(id: "x", body: [:], deleted: true, mode: .edit(parent: rb))]) { _ = try r.get() }
        #expect(try view.createQuery().run().map(\.key) == ["loser", "three"])

        // update=never reads the index as it was; the next default query catches up.
        try load(c, [#"{"_id":"c","v":"four"}"#])
        var stale = view.createQuery()
        stale.indexUpdateMode = .never
        #expect(try stale.run().count == 2)
        #expect(try view.createQuery().run().count == 3)

        // A new version rebuilds the index with the new function.
        view.setMapBlock({ doc, emit in if let v = doc["v"]?.stringValue { emit(.string(v.uppercased()), nil) } }, version: "2")
        #expect(try view.createQuery().run().map(\.key) == ["FOUR", "LOSER", "THREE"])
    }

    /// A view's map function runs with no lock held: documents are written (updated, deleted, purged, added) while
    /// a slow map builds the view, those writes don't wait for the mapping, and the view ends up with exactly the
    /// current documents' rows — whatever the batches read before the writes.
    @Test func writesGoOnWhileAViewMapsAndEndUpIndexed() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let initial = 2000
        try load(c, (0..<initial).map { #"{"_id":"d\#(String(format: "%04d", $0))","n":\#($0)}"# })
        let mapped = Atomic<Int>(0)
        let view = c.view(named: "slow")
        view.setMapReduce({ doc, emit in
            mapped.add(1, ordering: .relaxed)
            usleep(2_000)  // 2 ms a document: the first build maps for about two seconds on two cores
            emit(doc["n"] ?? .null, nil)
        }, .count, version: "1")
        let built = DispatchSemaphore(value: 0)
        let buildError = Mutex<(any Error)?>(nil)
        DispatchQueue.global().async {
            do { try view.updateIndex() } catch { buildError.withLock { $0 = error } }
            built.signal()
        }
        while mapped.load(ordering: .relaxed) < 100 { usleep(1_000) }
        var slowest = 0.0
        func timed(_ body: () throws -> Void) rethrows {
            let start = Date()
            try body()
            slowest = max(slowest, Date().timeIntervalSince(start))
        }
        for i in 0..<50 {
            try timed { try load(c, [#"{"_id":"d\#(String(format: "%04d", i))","n":\#(100_000 + i)}"#]) }
            try timed { _ = try c.write([RevisionWrite(id: String(format: "d%04d", 100 + i), body: [:], deleted: true, mode: .overwrite)]) }
            try timed { try c.purge(id: String(format: "d%04d", 200 + i)) }
            try timed { try load(c, [#"{"_id":"e\#(i)","n":\#(200_000 + i)}"#]) }
        }
        let mappedWhenWritten = mapped.load(ordering: .relaxed)
        built.wait()
        #expect(buildError.withLock { $0 } == nil)
        // The writes were done while the first build was still mapping (a map inside the write transaction held
        // every one of them until its whole batch was mapped).
        #expect(mappedWhenWritten < initial, "the writes waited for the mapping: \(mappedWhenWritten) documents mapped")
        #expect(slowest < 1.0, "a write took \(slowest) s")

        var expected: [Int64] = (0..<initial).compactMap { i in
            if i < 50 { return Int64(100_000 + i) }
            if (100..<150).contains(i) || (200..<250).contains(i) { return nil }
            return Int64(i)
        }
        expected += (0..<50).map { Int64(200_000 + $0) }
        var rows = view.createQuery()
        rows.mapOnly = true
        #expect(try rows.run().map { $0.key.intValue ?? -1 } == expected.sorted())
        #expect(try view.createQuery().run().first?.value == .int(Int64(expected.count)))
    }

    /// Two canonically equivalent strings (equal as Swift strings, different bytes and ICU sort keys) emitted as keys
    /// keep their own encodings: the collator's sort-key cache is keyed by bytes, not by `String` equality.
    @Test func canonicallyEquivalentKeysKeepTheirOwnEncoding() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let first = "a\u{301}\u{323}", second = "a\u{323}\u{301}"
        #expect(first == second && Array(first.utf8) != Array(second.utf8))
        try load(c, [#"{"_id":"one","k":"\#(first)"}"#, #"{"_id":"two","k":"\#(second)"}"#])
        let view = c.view(named: "k")
        view.setMapBlock({ doc, emit in emit(doc["k"] ?? .null, nil) }, version: "1")
        let (firstKey, secondKey) = (ViewCollatorFresh.encode(first), ViewCollatorFresh.encode(second))
        #expect(firstKey != secondKey, "ICU gives the two forms different sort keys")
        var q = view.createQuery()
        q.key = .string(first)
        #expect(try q.run().compactMap(\.sourceDocumentID) == ["one"])
        // The same in a fresh collator's order as in the view: the rows' order by key is the encodings' order.
        var all = view.createQuery()
        all.mapOnly = true
        let ids = try all.run().compactMap(\.sourceDocumentID)
        let byEncoding = [("one", firstKey), ("two", secondKey)]
            .sorted { $0.1.lexicographicallyPrecedes($1.1) || ($0.1 == $1.1 && $0.0 < $1.0) }.map(\.0)
        #expect(ids == byEncoding)
    }

    /// A build over several batches whose keys come in no order (staged, then moved into the view in key order)
    /// and one whose keys come in the feed's order (appended): both equal a brute-force map, reduce included, and
    /// stay so through edits after the build.
    @Test func buildsOfManyBatchesEqualBruteForce() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let count = 12_000  // over two catch-up batches
        var rng = SeededGenerator(seed: 5)
        var values = (0..<count).map { _ in Int.random(in: 0..<1_000_000, using: &rng) }
        try load(c, (0..<count).map { #"{"_id":"d\#(String(format: "%05d", $0))","n":\#(values[$0])}"# })
        let shuffled = c.view(named: "shuffled"), ordered = c.view(named: "ordered")
        shuffled.setMapReduce({ doc, emit in emit(doc["n"] ?? .null, doc["n"]) }, .sum, version: "1")
        ordered.setMapReduce({ doc, emit in emit(doc["_id"] ?? .null, doc["n"]) }, .sum, version: "1")
        func check() throws {
            var rows = shuffled.createQuery()
            rows.mapOnly = true
            let got = try rows.run().map { ($0.key.intValue ?? -1, $0.sourceDocumentID ?? "") }
            let want = values.enumerated().map { (Int64($0.element), String(format: "d%05d", $0.offset)) }
                .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            #expect(got.map(\.0) == want.map(\.0))
            #expect(got.map(\.1) == want.map(\.1))
            var byID = ordered.createQuery()
            byID.mapOnly = true
            #expect(try byID.run().map { $0.sourceDocumentID ?? "" } == (0..<count).map { String(format: "d%05d", $0) })
            let total = Double(values.reduce(0, +))
            #expect(try shuffled.createQuery().run().first?.value?.doubleValue == total)
            #expect(try ordered.createQuery().run().first?.value?.doubleValue == total)
        }
        try check()
        for i in stride(from: 0, to: count, by: 97) {
            values[i] = Int.random(in: 0..<1_000_000, using: &rng)
            try load(c, [#"{"_id":"d\#(String(format: "%05d", i))","n":\#(values[i])}"#])
        }
        try check()
    }

    /// Random edits over many chunks: the incrementally maintained index equals one built from scratch, and every
    /// reduce (ranges, groups) equals a brute-force reduce of the map rows.
    @Test func incrementalIndexEqualsRebuildAndReduceEqualsBruteForce() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        var rng = SeededGenerator(seed: 42)
        func doc(_ i: Int) -> String {
            let g = Int.random(in: 0..<5, using: &rng), n = Int.random(in: 0..<50, using: &rng)
            return #"{"_id":"d\#(i)","g":\#(g),"n":\#(n),"s":"\#(["x", "Y", "z", "ä"][n % 4])"}"#
        }
        try load(c, (0..<1500).map(doc))
        let rereduces = Atomic<Int>(0)
        let map: MapBlock = { doc, emit in
            emit([doc["g"]!, doc["s"]!, doc["n"]!], doc["n"])
            if doc["n"]!.intValue! % 7 == 0 { emit([doc["g"]!, "seven"], 1) }
        }
        let reduce: ReduceBlock = { _, values, rereduce in
            if rereduce { rereduces.add(1, ordering: .relaxed) }
            return .double(View.totalValues(values))
        }
        let view = c.view(named: "sums")
        view.setMapReduce(map, reduce, version: "1")
        _ = try view.createQuery().run()
        // Edits: updates, deletes, new documents.
        for round in 0..<5 {
            try load(c, (0..<200).map { _ in doc(Int.random(in: 0..<1800, using: &rng)) })
            let victims = (0..<40).map { _ in "d\(Int.random(in: 0..<1500, using: &rng))" }
            _ = try c.write(Set(victims).map { RevisionWrite(id: $0, body: [:], deleted: true, mode: .overwrite) })
            _ = round
        }
        var mapOnly = view.createQuery()
        mapOnly.mapOnly = true
        let incremental = try mapOnly.run()
        let fresh = c.view(named: "sums-fresh")
        fresh.setMapReduce(map, reduce, version: "1")
        mapOnly = fresh.createQuery()
        mapOnly.mapOnly = true
        let rebuilt = try mapOnly.run()
        #expect(incremental.map(\.key) == rebuilt.map(\.key))
        #expect(incremental.map(\.sourceDocumentID) == rebuilt.map(\.sourceDocumentID))
        #expect(incremental.totalRows == rebuilt.totalRows)

        let collator = try ViewCollator()
        let all = incremental.rows
        func brute(_ rows: ArraySlice<ViewQueryRow>, level: Int?) -> [(JSON, Double)] {
            var out: [(JSON, Double)] = []
            for row in rows {
                let key: JSON = level.map { l in .array(Array(row.key.arrayValue!.prefix(l))) } ?? .null
                if let last = out.last, collator.compare(last.0, key) == 0 {
                    out[out.count - 1].1 += row.value!.doubleValue!
                } else {
                    out.append((key, row.value!.doubleValue!))
                }
            }
            return out
        }
        rereduces.store(0, ordering: .relaxed)
        // Whole view.
        let whole = try view.createQuery().run()
        #expect(whole.count == 1 && whole[0].value?.doubleValue == brute(all[...], level: nil)[0].1)
        #expect(rereduces.load(ordering: .relaxed) > 0, "a reduce over many chunks must rereduce")
        // Ranges and group levels.
        for _ in 0..<20 {
            let a = Int.random(in: 0..<all.count, using: &rng), b = Int.random(in: 0..<all.count, using: &rng)
            let (lo, hi) = (min(a, b), max(a, b))
            var q = view.createQuery()
            q.startKey = all[lo].key
            q.startKeyDocID = all[lo].sourceDocumentID
            q.endKey = all[hi].key
            q.endKeyDocID = all[hi].sourceDocumentID
            // Rows between the two (key, docid) positions, inclusive, as the map-only query sees them.
            var m = q
            m.mapOnly = true
            let mapped = try m.run()
            let slice = mapped.rows[...]
            // offset: rows before the first one, counted through the chunk directory.
            #expect(mapped.offset == lo)
            var back = view.createQuery()
            back.mapOnly = true
            back.descending = true
            back.startKey = all[hi].key
            back.startKeyDocID = all[hi].sourceDocumentID
            back.limit = 3
            let backwards = try back.run()
            #expect(backwards.offset == all.count - 1 - hi)
            #expect(backwards.first?.sourceDocumentID == all[hi].sourceDocumentID)
            for level in [nil, 1, 2] as [Int?] {
                q.groupLevel = level ?? 0
                let got = try q.run().map { ($0.key, $0.value!.doubleValue!) }
                let expected = brute(slice, level: level)
                #expect(got.count == expected.count)
                for (g, e) in zip(got, expected) {
                    #expect(collator.compare(g.0, e.0) == 0 && abs(g.1 - e.1) < 1e-6, "level \(String(describing: level)): \(g) vs \(e)")
                }
            }
        }
        // group=true: one row per distinct key.
        var exact = view.createQuery()
        exact.group = true
        let groups = try exact.run()
        #expect(groups.count == Set(all.map { collator.encode($0.key) }).count)
    }

    @Test func builtInReduces() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, (1...700).map { #"{"_id":"d\#($0)","k":\#($0 % 3),"n":\#($0)}"# })
        let map: MapBlock = { doc, emit in emit(doc["k"]!, doc["n"]) }
        let count = c.view(named: "count"), sum = c.view(named: "sum"), stats = c.view(named: "stats")
        count.setMapReduce(map, .count, version: "1")
        sum.setMapReduce(map, .sum, version: "1")
        stats.setMapReduce(map, .stats, version: "1")
        #expect(try count.createQuery().run()[0].value == 700)
        #expect(try sum.createQuery().run()[0].value == .int(700 * 701 / 2))
        let s = try stats.createQuery().run()[0].value
        #expect(s?["count"] == 700 && s?["min"] == 1 && s?["max"] == 700 && s?["sum"] == .int(700 * 701 / 2))
        var grouped = count.createQuery()
        grouped.group = true
        #expect(try grouped.run().map(\.value) == [233, 234, 233])
        #expect(try grouped.run().map(\.key) == [0, 1, 2])
        grouped.descending = true
        #expect(try grouped.run().map(\.key) == [2, 1, 0])
        var keyed = count.createQuery()
        keyed.keys = [2, 0]
        keyed.group = true
        #expect(try keyed.run().map(\.value) == [233, 233])
        keyed.group = false
        #expect(throws: SetteeError.self) { try keyed.run() }
        var ranged = sum.createQuery()
        ranged.startKey = 1
        ranged.endKey = 1
        #expect(try ranged.run()[0].value == .int((0..<234).reduce(0) { $0 + Int64($1 * 3 + 1) }))
    }

    // MARK: Full text

    @Test func fullTextViews() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, [
            #"{"_id":"b1","type":"blog","title":"Mobile","body":"Couchbase Lite runs on mobile devices"}"#,
            #"{"_id":"b2","type":"blog","title":"Server","body":"Couchbase Server runs in the data center"}"#,
            #"{"_id":"b3","type":"blog","title":"Searching","body":"Searches find searching words; Couchbase searches Lite things"}"#,
            #"{"_id":"n1","type":"note","body":"Couchbase Lite"}"#,
        ])
        let view = c.view(named: "blogText")
        view.setMapBlock({ doc, emit in
            guard doc["type"] == "blog", let body = doc["body"]?.stringValue else { return }
            emit(TextKey(body), doc["title"])
        }, version: "1")
        var q = view.createQuery()
        q.fullTextQuery = "Couchbase NEAR (Lite OR mobile)"
        q.fullTextSnippets = true
        let rows = try q.run()
        #expect(Set(rows.compactMap(\.sourceDocumentID)) == ["b1", "b3"])
        let b1 = rows.first { $0.sourceDocumentID == "b1" }!
        #expect(b1.value == "Mobile")
        #expect(b1.fullText == "Couchbase Lite runs on mobile devices")
        #expect(b1.matchCount == 3)
        let text = Array(b1.fullText!.utf8)
        #expect(String(decoding: text[b1.textRange(ofMatch: 0)], as: UTF8.self) == "Couchbase")
        #expect(b1.termIndex(ofMatch: 0) == 0)
        #expect(b1.snippet(wordStart: "[", wordEnd: "]")?.contains("[Couchbase]") == true)
        // Stemming: "search" finds "searches" and "searching".
        q = view.createQuery()
        q.fullTextQuery = "search"
        #expect(try q.run().map(\.sourceDocumentID) == ["b3"])
        // Maintenance: an edited or deleted document's text leaves the index.
        try load(c, [#"{"_id":"b3","type":"blog","title":"Edited","body":"nothing to find here"}"#])
        _ = try c.write([RevisionWrite(id: "b1", body: [:], deleted: true, mode: .overwrite)])
        var again = view.createQuery()
        again.fullTextQuery = "Couchbase"
        #expect(try again.run().map(\.sourceDocumentID) == ["b2"])
        again.fullTextQuery = "find"
        #expect(try again.run().map(\.value) == ["Edited"])
        // Restrictions: no key ranges, no reduce.
        q.startKey = "a"
        #expect(throws: SetteeError.self) { try q.run() }
        q = view.createQuery()
        q.fullTextQuery = "\"unterminated"
        #expect(throws: SetteeError.self) { try q.run() }
        let reduced = c.view(named: "textCount")
        reduced.setMapReduce({ doc, emit in if let b = doc["body"]?.stringValue { emit(TextKey(b), nil) } }, .count, version: "1")
        #expect(throws: SetteeError.self) { try reduced.createQuery().run() }
    }

    /// A view gets a full-text table with its first full-text row, not before: one that emits only keys has none
    /// (five b-trees less); one with no rows yet answers a full-text query with none; purging a document takes
    /// its text out of the table.
    @Test func aFullTextTableComesWithTheFirstText() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        func fullTextTables() throws -> Int64 {
            try db.read { try $0.int64("SELECT count(*) FROM sqlite_master WHERE name LIKE 'view^_%^_fts' ESCAPE '^'") } ?? 0
        }
        try load(c, [#"{"_id":"a","body":"plain words"}"#, #"{"_id":"b","body":"more words","text":true}"#])
        let plain = c.view(named: "plain")
        plain.setMapBlock({ doc, emit in emit(doc["body"] ?? .null, nil) }, version: "1")
        #expect(try plain.createQuery().run().count == 2)
        #expect(try fullTextTables() == 0)
        var search = plain.createQuery()
        search.fullTextQuery = "words"
        #expect(throws: SetteeError.self) { try search.run() }  // (rows, and no text: not a full-text view)

        // Text emitted only by a document written later: the table comes with it.
        let later = c.view(named: "later")
        later.setMapBlock({ doc, emit in
            if doc["late"] != nil, let body = doc["body"]?.stringValue { emit(TextKey(body), nil) }
        }, version: "1")
        var query = later.createQuery()
        query.fullTextQuery = "words"
        #expect(try query.run().isEmpty)
        #expect(try fullTextTables() == 0)
        try load(c, [#"{"_id":"c","body":"late words","late":true}"#])
        #expect(try query.run().map(\.sourceDocumentID) == ["c"])
        #expect(try fullTextTables() == 1)
        try load(c, [#"{"_id":"d","body":"later words still","late":true}"#])
        #expect(Set(try query.run().compactMap(\.sourceDocumentID)) == ["c", "d"])
        try c.purge(id: "c")
        #expect(try query.run().map(\.sourceDocumentID) == ["d"])
        #expect(try plain.createQuery().run().count == 3)

        // A view made before tables came lazily has an empty one and no flag: its first text row uses that table.
        let legacy = c.view(named: "legacy")
        legacy.setMapBlock({ doc, emit in
            if doc["old"] != nil, let body = doc["body"]?.stringValue { emit(TextKey(body), nil) }
        }, version: "1")
        var old = legacy.createQuery()
        old.fullTextQuery = "words"
        #expect(try old.run().isEmpty)
        try db.write { conn in
            let id = try #require(try conn.int64("SELECT id FROM views WHERE name = 'legacy'"))
            try conn.execute("CREATE VIRTUAL TABLE view_\(id)_fts USING fts5(text, docid UNINDEXED, k UNINDEXED, v UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2')")
        }
        #expect(try fullTextTables() == 2)
        try load(c, [#"{"_id":"e","body":"old words","old":true}"#])
        #expect(try old.run().map(\.sourceDocumentID) == ["e"])
        #expect(try fullTextTables() == 2)
        try load(c, [#"{"_id":"e","body":"new text","old":true}"#])
        #expect(try old.run().isEmpty)
    }
}
