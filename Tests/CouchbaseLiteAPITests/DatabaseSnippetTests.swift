import Foundation
import Testing
import Settee

/// Couchbase Lite's database, scope, batch and listener APIs (Swift), run against Settee.
@Suite struct DatabaseSnippetTests {
    @Test func batchOperations() throws {
        let s = try SnippetDatabase()
        let database = s.database, collection = s.collection
        try database.inBatch {
            for i in 0...10 {
                let doc = MutableDocument()
                doc.setValue("user", forKey: "type")
                doc.setValue("user \(i)", forKey: "name")
                doc.setBoolean(false, forKey: "admin")
                try collection.save(document: doc)
                print("saved user document \(doc.string(forKey: "name")!)")
            }
        }
        #expect(collection.count == 11)
    }

    @Test func aRefusedSaveInsideABatchLeavesTheRestOfTheBatch() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let stale = MutableDocument(id: "x").setInt(1, forKey: "v")
        try collection.save(document: stale)
        let current = try #require(try collection.document(id: "x")).toMutable()
        try collection.save(document: current.setInt(2, forKey: "v"))
        try s.database.inBatch {
            try collection.save(document: MutableDocument(id: "before").setString("b", forKey: "k"))
            // Saved without a savepoint of its own: refused before it changes anything, and the batch goes on.
            #expect(try !collection.save(document: stale.setInt(3, forKey: "v"), concurrencyControl: .failOnConflict))
            try collection.save(document: MutableDocument(id: "after").setBoolean(true, forKey: "k"))
            // A last-write-wins save of a new document object whose id exists replaces it (the one-statement insert
            // finds the id taken and falls back).
            try collection.save(document: MutableDocument(id: "before").setString("replaced", forKey: "k"))
        }
        #expect(try collection.document(id: "x")?.int(forKey: "v") == 2)
        #expect(try collection.document(id: "after")?.boolean(forKey: "k") == true)
        let before = try #require(try collection.document(id: "before"))
        #expect(before.string(forKey: "k") == "replaced")
        #expect(before.revisionID?.hasPrefix("2-") == true)
        #expect(collection.count == 3)
    }

    @Test func aBatchThatThrowsLeavesNothing() throws {
        struct Stop: Error {}
        let s = try SnippetDatabase()
        let collection = s.collection
        try collection.save(document: MutableDocument(id: "kept"))
        #expect(throws: Stop.self) {
            try s.database.inBatch {
                try collection.save(document: MutableDocument(id: "a"))
                // Reads inside the batch see its writes.
                #expect(try collection.document(id: "a") != nil)
                try collection.delete(document: try #require(try collection.document(id: "kept")))
                throw Stop()
            }
        }
        #expect(try collection.document(id: "a") == nil)
        #expect(try collection.document(id: "kept") != nil)
        #expect(collection.count == 1)

        // A document saved in a batch that rolled back is as it was before: saving it again works.
        let doc = try #require(try collection.document(id: "kept")).toMutable()
        let before = doc.revisionID
        #expect(throws: Stop.self) {
            try s.database.inBatch {
                try collection.save(document: doc.setInt(1, forKey: "v"), concurrencyControl: .failOnConflict)
                throw Stop()
            }
        }
        #expect(doc.revisionID == before)
        #expect(try collection.save(document: doc, concurrencyControl: .failOnConflict))
        #expect(try collection.document(id: "kept")?.int(forKey: "v") == 1)
    }

    @Test func scopesAndCollections() throws {
        let s = try SnippetDatabase()
        let database = s.database
        let collection = try database.createCollection(name: "myCollectionName", scope: "myScopeName")
        #expect(collection.scope.name == "myScopeName")
        let scope = try #require(try database.scope(name: "myScopeName"))
        #expect(try scope.collections().map(\.name) == ["myCollectionName"])
        #expect(try scope.collection(name: "myCollectionName") == collection)
        #expect(try database.defaultScope().name == Scope.defaultScopeName)
        #expect(try database.scopes().map(\.name) == ["_default", "myScopeName"])
        #expect(try database.defaultCollection().name == Database.defaultCollectionName)
        #expect(try database.scope(name: "nothing") == nil)
    }

    @Test func documentChangeListener() async throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let token = collection.addDocumentChangeListener(id: "user.john") { (change) in
            if let document = try? collection.document(id: change.documentID) {
                print("Status: \(document.string(forKey: "verified_account")!)")
                continuation.yield(change.documentID + ":" + document.string(forKey: "verified_account")!)
            }
        }
        let all = collection.addChangeListener { change in
            continuation.yield("collection:" + change.collection.name + ":" + change.documentIDs.joined(separator: ","))
        }
        try collection.save(document: MutableDocument(id: "user.john").setString("yes", forKey: "verified_account"))
        var heard: [String] = []
        for await line in stream {
            heard.append(line)
            if heard.count == 2 { break }
        }
        #expect(heard.sorted() == ["collection:_default:user.john", "user.john:yes"])
        token.remove()
        collection.removeChangeListener(withToken: all)
    }

    @Test func subscriptsAndLiveQueries() async throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        try collection.save(document: MutableDocument(id: "hotel::1").setValue(["city": "Paris"], forKey: "address"))
        #expect(collection["hotel::1"].exists)
        #expect(collection["hotel::1"]["address"]["city"].string == "Paris")
        #expect(!collection["nothing"].exists && collection["nothing"]["x"].string == nil)

        let query = try s.database.createQuery("SELECT META().id FROM _ WHERE address.city = 'Lyon'")
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let token = query.addChangeListener(withQueue: DispatchQueue(label: "live")) { change in
            continuation.yield(change.results?.allResults().count ?? -1)
        }
        var counts: [Int] = []
        for await count in stream {
            counts.append(count)
            if counts.count == 1 {
                try collection.save(document: MutableDocument(id: "hotel::2").setValue(["city": "Lyon"], forKey: "address"))
            } else {
                break
            }
        }
        query.removeChangeListener(withToken: token)
        #expect(counts == [0, 1])
    }

    @Test func copyExistsDeleteAndMaintenance() throws {
        let s = try SnippetDatabase("prebuilt")
        try s.collection.save(document: MutableDocument(id: "seed").setString("v", forKey: "k"))
        let uuid = s.database.uuid
        let path = try #require(s.database.path)
        s.database.close()
        #expect(s.database.path == nil)
        let config = DatabaseConfiguration(directory: s.dir.path + "/app")
        try Database.copy(fromPath: path, toDatabase: "travel", withConfig: config)
        #expect(Database.exists(withName: "travel", inDirectory: config.directory))
        let copy = try Database(name: "travel", config: config)
        #expect(copy.uuid != uuid)
        #expect(try copy.defaultCollection().document(id: "seed")?.string(forKey: "k") == "v")
        for type in [MaintenanceType.compact, .reindex, .integrityCheck, .optimize, .fullOptimize] {
            try copy.performMaintenance(type: type)
        }
        #expect(throws: SetteeError.self) { try Database.copy(fromPath: path, toDatabase: "travel", withConfig: config) }
        copy.close()
        try Database.delete(withName: "travel", inDirectory: config.directory)
        #expect(!Database.exists(withName: "travel", inDirectory: config.directory))
    }
}
