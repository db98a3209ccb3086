import Foundation
import Testing
import Settee

/// Couchbase Lite 3.2.3's Codable documents (Swift), run against Settee.
@Suite struct CodableSnippetTests {
    final class User: Codable {
        @DocumentID var id: String?
        var name: String
        var email: String
        var joined: Date
        var tags: [String]

        init(id: String? = nil, name: String, email: String, joined: Date, tags: [String] = []) {
            self.id = id
            self.name = name
            self.email = email
            self.joined = joined
            self.tags = tags
        }
    }

    struct Contact: Decodable {
        var name: String
        var email: String
    }

    @Test func saveReadUpdateDeleteModelObjects() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let joined = Date(timeIntervalSince1970: 1_700_000_000.5)
        let user = User(name: "Ada", email: "ada@example.com", joined: joined, tags: ["admin"])
        try collection.save(from: user)
        let id = try #require(user.id)

        // The id is the document's, not a property; dates are ISO-8601 text as Couchbase Lite stores them.
        let document = try #require(try collection.document(id: id))
        #expect(document.keys.sorted() == ["email", "joined", "name", "tags"])
        #expect(document.string(forKey: "joined") == "2023-11-14T22:13:20.500Z")

        let read = try #require(try collection.document(id: id, as: User.self))
        #expect(read.id == id && read.name == "Ada" && read.joined == joined && read.tags == ["admin"])

        // Concurrency control follows the revision the object was read at.
        read.name = "Ada Lovelace"
        #expect(try collection.save(from: read, concurrencyControl: .failOnConflict))
        user.email = "stale@example.com"
        #expect(try !collection.save(from: user, concurrencyControl: .failOnConflict))
        #expect(try collection.document(id: id, as: User.self)?.name == "Ada Lovelace")

        let named = User(id: "grace", name: "Grace", email: "grace@example.com", joined: joined)
        try collection.save(from: named)
        #expect(try collection.document(id: "grace")?.string(forKey: "name") == "Grace")

        // Query results decode too, the id from META().id AS id.
        let rows = try s.database.createQuery("SELECT META().id AS id, name, email, joined, tags FROM _ ORDER BY name").execute()
        let users = try rows.allResults().map { try $0.data(as: User.self) }
        #expect(users.map(\.name) == ["Ada Lovelace", "Grace"])
        #expect(users.map(\.id) == [id, "grace"])
        let contacts = try s.database.createQuery("SELECT * FROM `my-database` ORDER BY name").execute().allResults()
            .map { try $0.data(as: Contact.self, dataKey: "my-database") }
        #expect(contacts.map(\.email) == ["ada@example.com", "grace@example.com"])

        try collection.delete(for: read)
        #expect(try collection.document(id: id) == nil)
        try collection.purge(for: named)
        #expect(collection.count == 0)
        #expect(try collection.document(id: "grace", as: User.self) == nil)
        // A class without @DocumentID cannot be a document model.
        final class Loose: Codable { var name = "x" }
        #expect(throws: SetteeError.self) { try collection.save(from: Loose()) }
    }

    @Test func aConflictHandlerMergesModelObjects() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let joined = Date(timeIntervalSince1970: 1_700_000_000)
        let mine = User(name: "Ada", email: "ada@example.com", joined: joined, tags: ["admin"])
        try collection.save(from: mine)
        let id = try #require(mine.id)

        // Someone else changes the document after `mine` was saved.
        let theirs = try #require(try collection.document(id: id, as: User.self))
        theirs.tags.append("reviewer")
        try collection.save(from: theirs)

        // Saving `mine` now conflicts: the handler sees the current version and merges the tags into `mine`.
        mine.email = "ada@lovelace.org"
        var seen: [String]?
        let saved = try collection.save(from: mine) { object, existing in
            seen = existing?.tags
            object.tags = Array(Set(object.tags + (existing?.tags ?? []))).sorted()
            return true
        }
        #expect(saved && seen == ["admin", "reviewer"])
        let stored = try #require(try collection.document(id: id, as: User.self))
        #expect(stored.email == "ada@lovelace.org" && stored.tags == ["admin", "reviewer"])

        // A handler that gives up leaves the document as it is.
        let staleRead = try #require(try collection.document(id: id, as: User.self))
        staleRead.email = "x@example.com"
        let other = try #require(try collection.document(id: id, as: User.self))
        other.name = "Countess"
        try collection.save(from: other)
        #expect(try !collection.save(from: staleRead) { _, _ in false })
        #expect(try collection.document(id: id, as: User.self)?.email == "ada@lovelace.org")
    }
}
