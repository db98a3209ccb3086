import Foundation
import Testing
import Settee

/// Couchbase Lite's result sets (Swift): `Result`, `ResultSet.next()`/`allResults()`, typed getters.
@Suite struct ResultSnippetTests {
    @Test func resultsReadLikeCouchbaseLite() throws {
        let s = try SnippetDatabase("travel-sample")
        let collection = s.collection
        try collection.save(document: MutableDocument(id: "hotel123", data: [
            "type": "hotel", "name": "Hotel Ghia", "opened": "2020-05-01T00:00:00.000Z", "rooms": 12,
            "geo": ["lat": 48.8, "lon": 2.3], "tags": ["pool", "spa"]]))
        try collection.save(document: MutableDocument(id: "hotel456").setString("hotel", forKey: "type").setString("Hotel Deluxe", forKey: "name")
            .setBlob(Blob(contentType: "text/plain", data: Data("brochure".utf8)), forKey: "brochure"))

        let query = QueryBuilder
            .select(SelectResult.all())
            .from(DataSource.collection(collection))
            .where(Expression.property("type").equalTo(Expression.string("hotel")))
            .limit(Expression.int(10))
        var names: [String] = []
        for result in try query.execute() {
            if let dict = result.dictionary(forKey: "travel-sample") {
                print("document name :: \(dict.string(forKey: "name")!)")
                names.append(dict.string(forKey: "name")!)
            }
        }
        #expect(names.sorted() == ["Hotel Deluxe", "Hotel Ghia"])

        let typed = try s.database.createQuery(
            "SELECT name, opened, rooms, geo, tags, brochure FROM _ WHERE META().id = 'hotel123' OR META().id = 'hotel456' ORDER BY META().id")
        let rs = try typed.execute()
        let first: Result = try #require(rs.next())
        #expect(first.string(forKey: "name") == "Hotel Ghia")
        #expect(first.date(forKey: "opened") == ISO8601DateFormatter().date(from: "2020-05-01T00:00:00Z"))
        #expect(first.int(forKey: "rooms") == 12 && first.int(at: 2) == 12)
        #expect(first.dictionary(forKey: "geo")?.double(forKey: "lat") == 48.8)
        #expect(first["geo"]["lon"].double == 2.3)
        #expect(first.array(forKey: "tags")?.string(at: 1) == "spa")
        #expect(first.keys == ["name", "opened", "rooms", "geo", "tags", "brochure"])
        #expect(first.contains(key: "name") && !first.contains(key: "brochure"))
        let rest = rs.allResults()
        #expect(rest.count == 1)
        #expect(rest[0].blob(forKey: "brochure")?.content == Data("brochure".utf8))
        #expect(rs.next() == nil && rs.allResults().isEmpty)  // a result set is read once

        let parameters = Parameters()
            .setDate(ISO8601DateFormatter().date(from: "2020-05-01T00:00:00Z"), forName: "opened")
            .setNumber(NSNumber(value: 12), forName: "rooms")
            .setValue(["pool", "spa"], forName: "tags")
        let byParameters = try s.database.createQuery("SELECT META().id FROM _ WHERE opened = $opened AND rooms = $rooms AND tags = $tags")
        byParameters.parameters = parameters
        #expect(try byParameters.execute().allResults().map { $0.string(forKey: "id") } == ["hotel123"])
    }
}
