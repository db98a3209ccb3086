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
    /// what the parsed body gives, before and after it is parsed, escaped keys and nulls included.
    @Test func propertiesReadFromStoredBytesMatchTheParsedBody() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let body: JSONObject = ["name": "Grand \"Hôtel\"", "stars": 4, "price": 99.5, "open": false, "none": .null,
                                "tab\tkey": "escaped key", "address": ["city": "Lyon", "zip": "69001"],
                                "amenities": ["pool", "spa"], "big": .int(1 << 60)]
        try c.save(document: MutableDocument(id: "h", data: body))
        let keys = ["name", "stars", "price", "open", "none", "tab\tkey", "address", "amenities", "big", "missing"]
        func check(_ read: Document, _ label: String) {
            for key in keys {
                #expect(read.json(forKey: key) == body[key], "\(label): \(key)")
                #expect(read.contains(key: key) == (body[key] != nil), "\(label): contains \(key)")
                #expect(read.string(forKey: key) == body[key]?.stringValue, "\(label): string \(key)")
                #expect(read.int64(forKey: key) == DocumentValue.int64(body[key]), "\(label): int64 \(key)")
                #expect(read.boolean(forKey: key) == DocumentValue.boolean(body[key]), "\(label): boolean \(key)")
            }
            #expect(read.dictionary(forKey: "address")?.string(forKey: "city") == "Lyon", "\(label)")
            #expect(read["address"]["zip"].string == "69001", "\(label)")
        }
        let lazy = try #require(try c.document(id: "h"))
        check(lazy, "from the bytes")
        #expect(lazy.keys == Array(body.keys))  // parses the body
        check(lazy, "parsed")
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
