import Foundation
import Testing
import Settee

/// The examples of the QueryBuilder and indexing guides (../shared/seeds), through both SQL++ and QueryBuilder.
@Suite struct SeedQueryTests {
    static let hotels = [
        #"{"_id":"hotel123","type":"hotel","name":"Hotel Ghia","city":"Paris","title":"Avignon","public_likes":["Armani Langworth","Elfrieda Gutkowski","Maureen Ruecker"]}"#,
        #"{"_id":"hotel456","type":"hotel","name":"Hotel Deluxe","city":"London","title":"Aberdyfi","public_likes":["Maureen Ruecker"]}"#,
        #"{"_id":"hotel789","type":"hotel","name":"Ardèche Lodge","city":"Lyon","title":"Ardèche"}"#,
        #"{"_id":"landmark1","type":"landmark","name":"Royal Engineers Museum","country":"United Kingdom"}"#,
        #"{"_id":"landmark2","type":"landmark","name":"engine shed","country":"United Kingdom"}"#,
        #"{"_id":"landmark3","type":"landmark","name":"Engineer","country":"France"}"#,
        #"{"_id":"landmark4","type":"landmark","name":"Tower","country":"France"}"#,
        #"{"_id":"user1","first":"Armani","last":"Smith","username":"asmith"}"#,
        #"{"_id":"user2","first":"Bo","last":"Armani","username":"bo"}"#,
        #"{"_id":"user3","first":"Cy","last":"Dee","username":"cy"}"#,
    ]

    func database(_ dir: TempDir) throws -> (Database, Settee.Collection) {
        let db = try dir.open("travel-sample")
        let c = try db.defaultCollection()
        try load(c, Self.hotels)
        return (db, c)
    }

    @Test func selectAllNestsTheDocumentUnderTheSourceName() throws {
        let dir = TempDir()
        let (db, c) = try database(dir)
        let all = try QueryBuilder.select(SelectResult.all()).from(DataSource.collection(c))
            .where(Meta.id.equalTo(Expression.string("hotel456"))).execute().allResults()
        #expect(all.count == 1)
        // The default collection's rows are keyed by the database's name, as in the guide's Example 3.
        #expect(all[0].dictionary(forKey: "travel-sample")?.string(forKey: "name") == "Hotel Deluxe")
        #expect(all[0].dictionary(at: 0)?.string(forKey: "city") == "London")
        // SQL++ keys the document by the name written in FROM; the database name means the default collection.
        #expect(try rows(db, "SELECT * FROM `travel-sample` WHERE META().id = 'hotel456'")
                == [#"{"travel-sample":{"type":"hotel","name":"Hotel Deluxe","city":"London","title":"Aberdyfi","public_likes":["Maureen Ruecker"]}}"#])
        #expect(try rows(db, "SELECT * FROM _ AS h WHERE META(h).id = 'hotel456'").first?.hasPrefix(#"{"h":{"#) == true)
    }

    @Test func selectedPropertiesAreKeyedByPropertyNameAndAlias() throws {
        let dir = TempDir()
        let (_, c) = try database(dir)
        let query = QueryBuilder
            .select(SelectResult.expression(Meta.id), SelectResult.property("type"), SelectResult.property("name"))
            .from(DataSource.collection(c))
            .where(Expression.property("type").equalTo(Expression.string("hotel")))
            .orderBy(Ordering.expression(Meta.id))
        let results = try query.execute().allResults()
        #expect(results.map { $0.toJSON() } == [
            #"{"id":"hotel123","type":"hotel","name":"Hotel Ghia"}"#,
            #"{"id":"hotel456","type":"hotel","name":"Hotel Deluxe"}"#,
            #"{"id":"hotel789","type":"hotel","name":"Ardèche Lodge"}"#,
        ])
        let aliased = try QueryBuilder.select(SelectResult.expression(Meta.id).as("metaId"))
            .from(DataSource.collection(c)).where(Expression.property("type").equalTo(Expression.string("hotel")))
            .orderBy(Ordering.expression(Meta.id).descending()).execute().allResults()
        #expect(aliased.map { $0.string(forKey: "metaId") } == ["hotel789", "hotel456", "hotel123"])
    }

    @Test func whereContainsInLikeRegex() throws {
        let dir = TempDir()
        let (db, c) = try database(dir)
        let contains = try QueryBuilder
            .select(SelectResult.expression(Meta.id), SelectResult.property("name"), SelectResult.property("public_likes"))
            .from(DataSource.collection(c))
            .where(Expression.property("type").equalTo(Expression.string("hotel"))
                .and(ArrayFunction.contains(Expression.property("public_likes"), value: Expression.string("Armani Langworth"))))
            .execute().allResults()
        #expect(contains.map { $0.string(forKey: "id") } == ["hotel123"])
        #expect(contains.first?.array(forKey: "public_likes")?.toArray().count == 3)

        let values = [Expression.property("first"), Expression.property("last"), Expression.property("username")]
        let inQuery = try QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.collection(c))
            .where(Expression.string("Armani").in(values)).orderBy(Ordering.expression(Meta.id)).execute()
        #expect(inQuery.map { $0.string(forKey: "id") } == ["user1", "user2"])

        func landmarks(_ condition: ExpressionProtocol) throws -> [String] {
            try QueryBuilder.select(SelectResult.expression(Meta.id), SelectResult.property("country"), SelectResult.property("name"))
                .from(DataSource.collection(c))
                .where(Expression.property("type").equalTo(Expression.string("landmark")).and(condition))
                .orderBy(Ordering.expression(Meta.id))
                .limit(Expression.int(10))
                .execute().compactMap { $0.string(forKey: "name") }
        }
        #expect(try landmarks(Function.lower(Expression.property("name")).like(Expression.string("royal engineers museum")))
                == ["Royal Engineers Museum"])
        #expect(try landmarks(Function.lower(Expression.property("name")).like(Expression.string("eng%e%")))
                == ["engine shed", "Engineer"])
        // LIKE is case-sensitive: only the lower-case name matches "eng____r"? none; "Eng____r" matches Engineer.
        #expect(try landmarks(Expression.property("name").like(Expression.string("eng____r"))) == [])
        #expect(try landmarks(Expression.property("name").like(Expression.string("Eng____r"))) == ["Engineer"])
        #expect(try landmarks(Expression.property("name").regex(Expression.string("\\bEng.*r\\b"))) == ["Engineer"])
        #expect(try rows(db, "SELECT name FROM _ WHERE REGEXP_LIKE(name, '.*Museum') ORDER BY name") == [#"{"name":"Royal Engineers Museum"}"#])
    }

    @Test func deletedDocumentsOnlyWithMetaDeleted() throws {
        let dir = TempDir()
        let (db, c) = try database(dir)
        try c.delete(document: try #require(try c.document(id: "user3")))
        let deleted = try QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.collection(c))
            .where(Meta.isDeleted).execute()
        #expect(deleted.map { $0.string(forKey: "id") } == ["user3"])
        #expect(try rows(db, "SELECT COUNT(*) AS n FROM _") == [#"{"n":9}"#])
        #expect(try rows(db, "SELECT META().id FROM _ WHERE META().deleted") == [#"{"id":"user3"}"#])
    }

    @Test func joinAcrossCollections() throws {
        let dir = TempDir()
        let db = try dir.open()
        let airlines = try db.createCollection(name: "airlines")
        let routes = try db.createCollection(name: "routes")
        try load(airlines, [
            #"{"_id":"airline_10","type":"airline","name":"40-Mile Air","callsign":"MILE-AIR"}"#,
            #"{"_id":"airline_20","type":"airline","name":"Alaskan Airways","callsign":"ALASKAN-AIR"}"#,
        ])
        try load(routes, [
            #"{"_id":"r1","type":"route","airlineid":"airline_10","sourceairport":"RIX","destinationairport":"CDG","stops":0,"airline":"Q5"}"#,
            #"{"_id":"r2","type":"route","airlineid":"airline_20","sourceairport":"RIX","destinationairport":"LHR","stops":1,"airline":"AA"}"#,
            #"{"_id":"r3","type":"route","airlineid":"airline_20","sourceairport":"SFO","destinationairport":"LHR","stops":0,"airline":"AA"}"#,
            #"{"_id":"r4","type":"route","airlineid":"airline_99","sourceairport":"RIX","destinationairport":"OSL","stops":0,"airline":"ZZ"}"#,
        ])
        let query = QueryBuilder
            .select(
                SelectResult.expression(Expression.property("name").from("airline")),
                SelectResult.expression(Expression.property("callsign").from("airline")),
                SelectResult.expression(Expression.property("destinationairport").from("route")),
                SelectResult.expression(Expression.property("stops").from("route")),
                SelectResult.expression(Expression.property("airline").from("route")))
            .from(DataSource.collection(airlines).as("airline"))
            .join(Join.join(DataSource.collection(routes).as("route"))
                .on(Meta.id.from("airline").equalTo(Expression.property("airlineid").from("route"))))
            .where(Expression.property("type").from("route").equalTo(Expression.string("route"))
                .and(Expression.property("type").from("airline").equalTo(Expression.string("airline")))
                .and(Expression.property("sourceairport").from("route").equalTo(Expression.string("RIX"))))
            .orderBy(Ordering.expression(Expression.property("destinationairport").from("route")))
        #expect(try query.execute().map { $0.toJSON() } == [
            #"{"name":"40-Mile Air","callsign":"MILE-AIR","destinationairport":"CDG","stops":0,"airline":"Q5"}"#,
            #"{"name":"Alaskan Airways","callsign":"ALASKAN-AIR","destinationairport":"LHR","stops":1,"airline":"AA"}"#,
        ])
        // LEFT JOIN keeps routes without an airline; the same through SQL++.
        #expect(try rows(db, """
            SELECT route.destinationairport AS dest, airline.name AS name FROM routes AS route
            LEFT JOIN airlines AS airline ON META(airline).id = route.airlineid
            WHERE route.sourceairport = 'RIX' ORDER BY dest
            """) == [#"{"dest":"CDG","name":"40-Mile Air"}"#, #"{"dest":"LHR","name":"Alaskan Airways"}"#, #"{"dest":"OSL"}"#])
    }

    @Test func groupByCountsWithDollarNames() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        var docs: [String] = []
        for (i, (country, tz, alt)) in [("France", "Europe/Paris", 400), ("France", "Europe/Paris", 500),
                                        ("France", "Europe/Paris", 100), ("United States", "America/Denver", 5000),
                                        ("United States", "America/Chicago", 300)].enumerated() {
            docs.append(#"{"_id":"airport\#(i)","type":"airport","country":"\#(country)","tz":"\#(tz)","geo":{"alt":\#(alt)}}"#)
        }
        try load(c, docs)
        let query = QueryBuilder
            .select(SelectResult.expression(Function.count(Expression.all())), SelectResult.property("country"),
                    SelectResult.property("tz"))
            .from(DataSource.collection(c))
            .where(Expression.property("type").equalTo(Expression.string("airport"))
                .and(Expression.property("geo.alt").greaterThanOrEqualTo(Expression.int(300))))
            .groupBy(Expression.property("country"), Expression.property("tz"))
        let results = try query.execute().allResults()
        #expect(results.map { "\($0.int(forKey: "$1")) \($0.string(forKey: "tz")!) \($0.string(forKey: "country")!)" } == [
            "2 Europe/Paris France", "1 America/Chicago United States", "1 America/Denver United States",
        ])
        let counted = try QueryBuilder.select(SelectResult.expression(Function.count(Expression.all())).as("mycount"))
            .from(DataSource.collection(c)).groupBy(Expression.property("type")).execute().allResults()
        #expect(counted.map { $0.int(forKey: "mycount") } == [5])
        #expect(try rows(db, "SELECT country, AVG(geo.alt) AS avg, MIN(geo.alt) AS lo, MAX(geo.alt) AS hi, SUM(geo.alt) AS total FROM _ GROUP BY country HAVING COUNT(*) > 2")
                == [#"{"country":"France","avg":333.3333333333333,"lo":100,"hi":500,"total":1000}"#])
    }

    @Test func orderByLimitOffsetAndDates() throws {
        let dir = TempDir()
        let (db, c) = try database(dir)
        let titles = try QueryBuilder.select(SelectResult.expression(Meta.id), SelectResult.property("title"))
            .from(DataSource.collection(c)).where(Expression.property("type").equalTo(Expression.string("hotel")))
            .orderBy(Ordering.property("title").ascending()).limit(Expression.int(10)).execute()
        #expect(titles.compactMap { $0.string(forKey: "title") } == ["Aberdyfi", "Ardèche", "Avignon"])
        let page = try QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.collection(c))
            .orderBy(Ordering.expression(Meta.id)).limit(Expression.int(3), offset: Expression.int(2)).execute()
        #expect(page.compactMap { $0.string(forKey: "id") } == ["hotel789", "landmark1", "landmark2"])
        #expect(try rows(db, "SELECT STR_TO_MILLIS('2024-03-05T10:20:30Z') AS ms, MILLIS_TO_UTC(0) AS utc, STR_TO_UTC('2024-03-05T11:20:30+01:00') AS u FROM _ LIMIT 1")
                == [#"{"ms":1709634030000,"utc":"1970-01-01T00:00:00Z","u":"2024-03-05T10:20:30Z"}"#])
    }

    @Test func parametersAndMissingVersusNull() throws {
        let dir = TempDir()
        let db = try dir.open()
        try load(try db.defaultCollection(), [#"{"_id":"a","v":null}"#, #"{"_id":"b","v":1}"#, #"{"_id":"c"}"#])
        #expect(try rows(db, "SELECT META().id FROM _ WHERE v IS NULL") == [#"{"id":"a"}"#])
        #expect(try rows(db, "SELECT META().id FROM _ WHERE v IS MISSING") == [#"{"id":"c"}"#])
        #expect(try rows(db, "SELECT META().id FROM _ WHERE v IS NOT VALUED ORDER BY META().id") == [#"{"id":"a"}"#, #"{"id":"c"}"#])
        #expect(try rows(db, "SELECT META().id, v FROM _ ORDER BY META().id") == [#"{"id":"a","v":null}"#, #"{"id":"b","v":1}"#, #"{"id":"c"}"#])
        #expect(try rows(db, "SELECT META().id FROM _ WHERE v = $v", ["v": 1]) == [#"{"id":"b"}"#])
    }

    @Test func badQueriesNameThePosition() throws {
        let dir = TempDir()
        let db = try dir.open()
        for (sql, fragment) in [("SELECT name FORM _", "line 1, column 18"), ("SELECT FOO(name) FROM _", "unknown function FOO"),
                                ("SELECT name FROM nowhere", "No such collection"), ("SELECT 'abc FROM _", "unterminated string"),
                                ("SELECT name FROM _ WHERE COUNT(*) > 1", "not allowed in WHERE"),
                                ("SELECT LOWER() FROM _", "LOWER() takes 1 argument")] {
            do {
                _ = try db.createQuery(sql)
                Issue.record("\(sql) should not parse")
            } catch let error as SetteeError {
                #expect(error.code == .queryParseError)
                #expect(error.reason.contains(fragment), "\(error.reason)")
            }
        }
    }
}

/// The UNNEST examples of the indexing guide.
@Suite struct UnnestTests {
    static let sam = #"{"_id":"sam","Name":"Sam","contacts":[{"type":"primary","address":{"street":"1 St","city":"San Pedro","state":"CA"},"phones":[{"type":"home","number":"310-123-4567"},{"type":"mobile","number":"310-123-6789"}]},{"type":"secondary","address":{"street":"5 St","city":"Seattle","state":"WA"},"phones":[{"type":"home","number":"206-123-4567"},{"type":"mobile","number":"206-123-6789"}]}],"likes":["soccer","travel"]}"#

    @Test func singleAndNestedUnnest() throws {
        let dir = TempDir()
        let db = try dir.open()
        let profiles = try db.createCollection(name: "profiles")
        try load(profiles, [Self.sam, #"{"_id":"kim","Name":"Kim","likes":["chess"],"contacts":[]}"#])
        try load(try db.defaultCollection(), [Self.sam])
        #expect(try rows(db, #"SELECT Name, interest FROM _ UNNEST likes AS interest WHERE interest = "travel""#)
                == [#"{"Name":"Sam","interest":"travel"}"#])
        #expect(try rows(db, """
            SELECT Name, contact.type, phone.number FROM profiles UNNEST contacts AS contact UNNEST contact.phones AS phone
            WHERE phone.type = "mobile"
            """) == [#"{"Name":"Sam","type":"primary","number":"310-123-6789"}"#,
                     #"{"Name":"Sam","type":"secondary","number":"206-123-6789"}"#])
        #expect(try rows(db, "SELECT COUNT(*) AS n FROM profiles UNNEST likes AS l") == [#"{"n":3}"#])
        #expect(try rows(db, "SELECT META().id AS id, l FROM profiles AS p UNNEST p.likes AS l ORDER BY l") == [
            #"{"id":"kim","l":"chess"}"#, #"{"id":"sam","l":"soccer"}"#, #"{"id":"sam","l":"travel"}"#])
    }
}
