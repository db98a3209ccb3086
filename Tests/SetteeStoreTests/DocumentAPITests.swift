import Testing
import SetteeCore
@testable import SetteeStore

@Suite struct DocumentAPITests {
    @Test func saveReadAndTypedGetters() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let doc = MutableDocument(id: "hotel1")
        doc.setString("Grand", forKey: "name")
        doc.setInt(4, forKey: "stars")
        doc.setDouble(99.5, forKey: "price")
        doc.setBoolean(true, forKey: "open")
        doc.setValue(["pool", "spa"], forKey: "amenities")
        try c.save(document: doc)
        #expect(doc.revisionID?.hasPrefix("1-") == true)
        let read = try #require(try c.document(id: "hotel1"))
        #expect(read.string(forKey: "name") == "Grand")
        #expect(read.int(forKey: "stars") == 4)
        #expect(read.double(forKey: "price") == 99.5)
        #expect(read.boolean(forKey: "open"))
        #expect(read.array(forKey: "amenities")?.toArray() as? [String] == ["pool", "spa"])
        #expect(read.string(forKey: "missing") == nil)
        #expect(read.keys == ["name", "stars", "price", "open", "amenities"])
    }

    /// A document read by id answers from its stored bytes until something needs every member: each getter gives
    /// what the parsed body gives, before and after it is parsed, escaped and non-ASCII keys and nulls included.
    @Test func propertiesReadFromStoredBytesMatchTheParsedBody() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let body: JSONObject = ["name": "Grand \"Hôtel\"", "stars": 4, "price": 99.5, "open": false, "none": .null,
                                "address": ["city": "Lyon", "zip": "69001"], "amenities": ["pool", "spa"],
                                "big": .int(1 << 60), "cafe\u{301}": "decomposed", "Kelvin": "K"]
        try c.save(document: MutableDocument(id: "h", data: body))
        // Read from the bytes, nothing parsed: plain keys, and an absent one (no ASCII key but one with `K`, `;` or
        // `` ` `` can equal a non-ASCII key).
        let direct = ["name", "stars", "price", "open", "none", "address", "amenities", "big", "missing", "Kelvin"]
        // A key that may equal the decomposed one as strings compare: the parser answers.
        let parsedFor = ["café"]
        // What each getter answers, gathered outside #expect (which describes a document it is given, by reading
        // its keys: that would parse the body).
        struct Answers: Equatable {
            var json: JSON?, contains: Bool, string: String?, int64: Int64, boolean: Bool
        }
        func answers(_ read: Document, _ keys: [String]) -> [Answers] {
            keys.map { key in
                Answers(json: read.json(forKey: key), contains: read.contains(key: key), string: read.string(forKey: key),
                        int64: read.int64(forKey: key), boolean: read.boolean(forKey: key))
            }
        }
        func expected(_ keys: [String]) -> [Answers] {
            keys.map { key in
                let value = key == "café" ? body["cafe\u{301}"] : body[key]
                return Answers(json: value, contains: value != nil, string: value?.stringValue,
                               int64: DocumentValue.int64(value), boolean: DocumentValue.boolean(value))
            }
        }
        guard let lazy = try c.document(id: "h") else {  // (not #require, which would describe it)
            Issue.record("h was not read back")
            return
        }
        let fromBytes = answers(lazy, direct)
        let city = lazy.dictionary(forKey: "address")?.string(forKey: "city")
        let zip = lazy["address"]["zip"].string
        let amenities = lazy.array(forKey: "amenities")?.count
        let parsedByGetters = lazy.content.isParsed
        #expect(!parsedByGetters, "a getter parsed the whole body")
        #expect(fromBytes == expected(direct))
        #expect(city == "Lyon" && zip == "69001" && amenities == 2)
        let pastTheDecomposedKey = answers(lazy, parsedFor)
        let parsedPastTheDecomposedKey = lazy.content.isParsed
        #expect(parsedPastTheDecomposedKey)
        #expect(pastTheDecomposedKey == expected(parsedFor))
        #expect(answers(lazy, direct + parsedFor) == expected(direct + parsedFor))
        // A body with an escaped key is parsed when read (its members can't all be followed as bytes): the same
        // answers.
        var escaped = body
        escaped["tab\tkey"] = "escaped key"
        try c.save(document: MutableDocument(id: "e", data: escaped))
        let e = try #require(try c.document(id: "e"))
        #expect(answers(e, direct + ["tab\tkey"]) == expected(direct) + [Answers(json: "escaped key", contains: true,
                                                                               string: "escaped key", int64: 0, boolean: true)])
        #expect(lazy.keys == Array(body.keys))
        let other = try #require(try c.document(id: "h"))
        #expect(other == lazy)
        let edited = try #require(try c.document(id: "h")).toMutable().setInt(5, forKey: "stars")
        #expect(edited.string(forKey: "name") == "Grand \"Hôtel\"" && edited.int(forKey: "stars") == 5)
        try c.save(document: edited)
        #expect(try c.document(id: "h")?.int(forKey: "stars") == 5)
    }

    @Test func failOnConflictReturnsFalseLastWriteWinsOverwrites() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let doc = MutableDocument(id: "d", data: ["v": 1])
        try c.save(document: doc)
        let first = try #require(try c.document(id: "d")).toMutable()
        let second = try #require(try c.document(id: "d")).toMutable()
        first.setInt(2, forKey: "v")
        #expect(try c.save(document: first, concurrencyControl: .failOnConflict))
        second.setInt(3, forKey: "v")
        #expect(try !c.save(document: second, concurrencyControl: .failOnConflict))
        #expect(try c.document(id: "d")?.int(forKey: "v") == 2)
        try c.save(document: second)
        #expect(try c.document(id: "d")?.int(forKey: "v") == 3)
    }

    @Test func conflictHandlerMergesWithTheCurrentRevision() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try c.save(document: MutableDocument(id: "d", data: ["a": 1]))
        let stale = try #require(try c.document(id: "d")).toMutable()
        let other = try #require(try c.document(id: "d")).toMutable()
        other.setInt(2, forKey: "b")
        try c.save(document: other)
        stale.setInt(3, forKey: "c")
        let saved = try c.save(document: stale) { mine, current in
            if let b = current?.value(forKey: "b") { mine.setValue(b, forKey: "b") }
            return true
        }
        #expect(saved)
        let merged = try #require(try c.document(id: "d"))
        #expect(merged.int(forKey: "b") == 2 && merged.int(forKey: "c") == 3)
    }

    @Test func deleteAndPurge() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let doc = MutableDocument(id: "d")
        try c.save(document: doc)
        try c.delete(document: doc)
        #expect(try c.document(id: "d") == nil)
        #expect(try c.record(id: "d")?.deleted == true)
        try c.purge(document: doc)
        #expect(try c.record(id: "d") == nil)
        #expect(c.count == 0)
    }

    @Test func badInputIsAClearErrorAndLeavesTheStoreUnchanged() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        #expect { try c.save(document: MutableDocument(id: "")) } throws: { ($0 as? SetteeError)?.code == .badDocID }
        #expect { try c.save(document: MutableDocument(id: "_secret")) } throws: { ($0 as? SetteeError)?.code == .badDocID }
        #expect { try MutableDocument(id: "x", json: "{\"a\": ") } throws: { ($0 as? SetteeError)?.code == .invalidJSON }
        #expect { try MutableDocument(id: "x", json: "[1,2]") } throws: { ($0 as? SetteeError)?.code == .badRequest }
        let reserved = MutableDocument(id: "r")
        reserved.setString("x", forKey: "_rev")
        #expect { try c.save(document: reserved) } throws: { ($0 as? SetteeError)?.code == .badRequest }
        #expect(db.lastSequence == 0)
        #expect(c.count == 0)
    }
}

@Suite struct DocumentMetadataTests {
    @Test func savedDocumentKnowsItsSequenceAndCollection() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try c.save(document: MutableDocument(id: "first"))
        let doc = MutableDocument(id: "second")
        try c.save(document: doc)
        #expect(doc.sequence == 2)
        #expect(doc.collection == c)
        let read = try #require(try c.document(id: "second"))
        #expect(read.sequence == 2)
        #expect(read.collection?.fullName == "_default._default")
    }
}
