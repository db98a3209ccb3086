import Foundation
import Testing
import Settee
import SetteeTestSupport

/// Couchbase Lite's document expiration (Swift), run against Settee.
@Suite struct ExpirationSnippetTests {
    @Test func setQueryAndResetExpiration() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        for id in ["doc123", "doc1", "soon", "never"] { try collection.save(document: MutableDocument(id: id)) }

        // Purge the document one day from now
        let ttl = Calendar.current.date(byAdding: .day, value: 1, to: Date())
        try collection.setDocumentExpiration(id: "doc123", expiration: ttl)
        try collection.setDocumentExpiration(id: "doc1", expiration: ttl)
        try collection.setDocumentExpiration(id: "soon", expiration: Date(timeIntervalSinceNow: 120))
        // Reset expiration
        try collection.setDocumentExpiration(id: "doc1", expiration: nil)

        // Query documents that will expire in less than five minutes
        let fiveMinutesFromNow = Date(timeIntervalSinceNow: 60 * 5).timeIntervalSince1970
        let query = QueryBuilder
            .select(SelectResult.expression(Meta.id))
            .from(DataSource.collection(collection))
            .where(Meta.expiration.lessThan(Expression.double(fiveMinutesFromNow * 1000)))
        #expect(try query.execute().allResults().map { $0.string(forKey: "id") } == ["soon"])

        let expires = try #require(try collection.getDocumentExpiration(id: "doc123"))
        #expect(abs(expires.timeIntervalSince(ttl!)) < 0.002)
        #expect(try collection.getDocumentExpiration(id: "doc1") == nil)
        let rows = try s.database.createQuery("SELECT META().id, META().expiration AS e FROM _ ORDER BY META().id").execute().allResults()
        #expect(rows.map { $0.contains(key: "e") } == [false, true, false, true])
        #expect(throws: SetteeError.self) { try collection.setDocumentExpiration(id: "absent", expiration: ttl) }
    }

    @Test func expiredDocumentsArePurgedInTheBackground() async throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        for id in ["a", "b", "c"] { try collection.save(document: MutableDocument(id: id)) }
        try collection.setDocumentExpiration(id: "a", expiration: Date(timeIntervalSinceNow: 0.3))
        try collection.setDocumentExpiration(id: "b", expiration: Date(timeIntervalSinceNow: -10))
        try collection.setDocumentExpiration(id: "c", expiration: Date(timeIntervalSinceNow: 3600))
        var waited = 0.0
        while try collection.document(id: "a") != nil || collection.document(id: "b") != nil, waited < 10 {
            try await Task.sleep(for: .milliseconds(50))
            waited += 0.05
        }
        #expect(try collection.document(id: "a") == nil && collection.document(id: "b") == nil)
        #expect(try collection.document(id: "c") != nil)
        #expect(try collection.getDocumentExpiration(id: "a") == nil)
        #expect(collection.count == 1)
    }

    @Test func anExpirationSetBeforeACloseIsKeptAfterTheNextOpen() async throws {
        let dir = TempDir()
        let config = DatabaseConfiguration(directory: dir.path)
        do {
            let db = try Database(name: "ttl", config: config)
            let c = try db.defaultCollection()
            try c.save(document: MutableDocument(id: "temp"))
            try c.setDocumentExpiration(id: "temp", expiration: Date(timeIntervalSinceNow: 0.5))
            db.close()
        }
        let db = try Database(name: "ttl", config: config)
        defer { db.close() }
        let c = try db.defaultCollection()
        var waited = 0.0
        while try c.document(id: "temp") != nil, waited < 10 {
            try await Task.sleep(for: .milliseconds(50))
            waited += 0.05
        }
        #expect(try c.document(id: "temp") == nil)
    }
}
