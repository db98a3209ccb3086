import Foundation
import Testing
import Settee
import SetteeListener

/// Couchbase Lite entries checked one by one against its 3.2 Swift API: protocols apps write generic code
/// against, configuration copies and defaults, read-only listeners, header-carried credentials, retry limits,
/// conflict defaults and the QueryBuilder's smaller forms.
@Suite struct APIShapeSnippetTests {
    // Generic code over Couchbase Lite's protocols compiles and works on Settee's types.
    func describe(_ fragment: some FragmentProtocol) -> String { fragment.exists ? (fragment.string ?? "?") : "-" }
    func indexNames(_ indexable: some Indexable) throws -> [String] { try indexable.indexes() }
    func query(_ factory: some QueryFactory, _ sql: String) throws -> Query { try factory.createQuery(sql) }
    func firstCity(_ array: some MutableArrayProtocol) -> MutableDictionaryObject? { array.dictionary(at: 0) }

    @Test func protocolsAppsProgramAgainst() throws {
        let s = try SnippetDatabase()
        let doc = MutableDocument(id: "hotel-1")
            .setString("Hotel Ted", forKey: "name")
            .setArray(MutableArrayObject(data: [["city": "Paris"]]), forKey: "addresses")
        try s.collection.save(document: doc)
        let saved = try #require(try s.collection.document(id: "hotel-1"))
        #expect(describe(saved["name"]) == "Hotel Ted")
        #expect(describe(saved["nothing"]) == "-")

        // A mutable array's containers come back mutable through the protocol, and edits land in place.
        let edit = saved.toMutable()
        let addresses = try #require(edit.array(forKey: "addresses"))
        firstCity(addresses)?.setString("Lyon", forKey: "city")
        try s.collection.save(document: edit)
        #expect(try s.collection.document(id: "hotel-1")?["addresses"][0]["city"].string == "Lyon")

        try s.collection.createIndex(IndexBuilder.valueIndex(items: [ValueIndexItem.property("name")]), name: "byName")
        try s.collection.createIndex(IndexBuilder.fullTextIndex(items: [FullTextIndexItem.property("name")]), name: "nameFTS")
        #expect(try Set(indexNames(s.collection)) == ["byName", "nameFTS"])
        let q = try query(s.database, "SELECT name FROM _ WHERE name = 'Hotel Ted'")
        #expect(try q.execute().allResults().map { $0.string(forKey: "name") } == ["Hotel Ted"])
        #expect(q.description.contains("SELECT name FROM _"))

        let token = s.collection.addChangeListener { _ in }
        s.collection.removeChangeListener(withToken: token)
        #expect(ConcurrencyControl(rawValue: 1) == .failOnConflict)
        #expect(FullTextIndexConfiguration(["name"], ignoreAccents: nil).ignoreAccents == FullTextIndexConfiguration.defaultIgnoreAccents)
    }

    @Test func databaseConfigurationCopiesAndMapsOrNot() throws {
        let scratch = try SnippetDatabase("scratch")
        let dir = scratch.dir
        var config = DatabaseConfiguration(directory: dir.path)
        #expect(config.mmapEnabled == DatabaseConfiguration.defaultMmapEnabled && config.fullSync == DatabaseConfiguration.defaultFullSync)
        config.mmapEnabled = false
        let copy = DatabaseConfiguration(config: config)
        #expect(copy.directory == dir.path && !copy.mmapEnabled)
        #expect(DatabaseConfiguration(config: nil).mmapEnabled)
        // A database without the memory map reads and queries as any other.
        let db = try Database(name: "unmapped", config: copy)
        defer { db.close() }
        let c = try db.defaultCollection()
        for i in 0..<200 { try c.save(document: MutableDocument(id: "d\(i)").setInt(i, forKey: "n")) }
        #expect(try c.document(id: "d199")?.int(forKey: "n") == 199)
        let count = try db.createQuery("SELECT COUNT(*) AS n FROM _").execute().allResults().first?.int(forKey: "n")
        #expect(count == 200)
    }

    @Test func queryBuilderSmallerForms() throws {
        let s = try SnippetDatabase()
        for (id, stars) in [("a", 3), ("b", 5), ("c", 5)] {
            try s.collection.save(document: MutableDocument(id: id).setInt(stars, forKey: "stars").setBoolean(true, forKey: "open"))
        }
        let counted = try QueryBuilder.select(SelectResult.expression(Function.count()).as("n"))
            .from(DataSource.collection(s.collection))
            .where(Expression.property("stars").equalTo(Expression.number(NSNumber(value: 5))))
            .execute().allResults()
        #expect(counted.first?.int(forKey: "n") == 2)
        let open = try QueryBuilder.select(SelectResult.expression(Meta.id))
            .from(DataSource.collection(s.collection))
            .where(Expression.property("open").equalTo(Expression.number(NSNumber(value: true))))
            .execute().allResults()
        #expect(open.count == 3)
        let order: any QuerySortOrder = Ordering.property("stars")
        let ordered = try QueryBuilder.select(SelectResult.expression(Meta.id))
            .from(DataSource.collection(s.collection).as("h"))
            .orderBy(order.descending(), Ordering.expression(Meta.id))
            .execute().allResults().compactMap { $0.string(at: 0) }
        #expect(ordered == ["b", "c", "a"])
        // `from(nil)` is the unqualified property.
        let unqualified = try QueryBuilder.select(SelectResult.expression(Expression.property("stars").from(nil)))
            .from(DataSource.collection(s.collection))
            .where(Meta.id.equalTo(Expression.string("a")))
            .execute().allResults()
        #expect(unqualified.first?.int(at: 0) == 3)

        // Parameters take nil for every kind of value, as Couchbase Lite's setters do.
        let parameters = Parameters()
        parameters.setValue(nil, forName: "v")
        parameters.setArray(nil, forName: "a")
        parameters.setDictionary(nil, forName: "d")
        parameters.setString(nil, forName: "s")
        let q = try s.database.createQuery("SELECT COUNT(*) AS n FROM _ WHERE $v IS NULL AND $a IS NULL AND $s IS NULL")
        q.parameters = parameters
        #expect(try q.execute().allResults().first?.int(forKey: "n") == 3)
    }

    @Test func replicatorConfigurationAsCouchbaseLiteHasIt() async throws {
        let s = try SnippetDatabase()
        var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "http://127.0.0.1:9/nothing")!))
        let returned = config.addCollection(s.collection)
        #expect(returned.collections == [s.collection])
        #expect(config.maxAttempts == ReplicatorConfiguration.defaultMaxAttemptsSingleShot)
        config.continuous = true
        #expect(config.maxAttempts == ReplicatorConfiguration.defaultMaxAttemptsContinuous)
        config.maxAttempts = 2
        config.continuous = false
        #expect(config.maxAttempts == 2)
        let copy = ReplicatorConfiguration(config: config)
        #expect(copy.collections == [s.collection] && copy.maxAttempts == 2)
        #expect(ReplicatorConfiguration.defaultType == .pushAndPull && !ReplicatorConfiguration.defaultContinuous)

        // An explicit limit holds for a continuous replicator too: it stops after its attempts.
        var continuous = config
        continuous.continuous = true
        continuous.maxAttempts = 2
        continuous.maxAttemptWaitTime = 0.05
        let replicator = Replicator(config: continuous)
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.activity == ReplicatorActivityLevel.stopped && status.error?.kind == .unreachable)
    }

    @Test func couchbaseLitesDefaultResolverLetsADeletionWin() async throws {
        let local = try SnippetDatabase("local"), remote = try SnippetDatabase("remote")
        try local.collection.save(document: MutableDocument(id: "doc").setString("v0", forKey: "v"))
        var pushOnce = ReplicatorConfiguration(target: DatabaseEndpoint(database: remote.database))
        pushOnce.addCollection(local.collection)
        pushOnce.replicatorType = ReplicatorType.push
        let first = Replicator(config: pushOnce)
        first.start()
        #expect(await first.waitUntilStopped().error == nil)
        // The local side edits twice (a longer history); the remote side deletes.
        for v in ["v1", "v2"] {
            let edit = try #require(try local.collection.document(id: "doc")).toMutable()
            try local.collection.save(document: edit.setString(v, forKey: "v"))
        }
        try remote.collection.delete(document: try #require(try remote.collection.document(id: "doc")))

        var pull = ReplicatorConfiguration(target: DatabaseEndpoint(database: remote.database))
        pull.addCollection(local.collection, config: {
            var c = CollectionConfiguration()
            c.conflictResolver = ConflictResolver.custom { conflict in ConflictResolver.default.resolve(conflict: conflict) }
            return c
        }())
        pull.replicatorType = ReplicatorType.pull
        let replicator = Replicator(config: pull)
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        #expect(try local.collection.document(id: "doc") == nil, "the deletion wins, as in Couchbase Lite")
    }

    @Test func aReadOnlyListenerServesPullsAndRefusesPushes() async throws {
        let passive = try SnippetDatabase("passive"), active = try SnippetDatabase("active")
        try passive.collection.save(document: MutableDocument(id: "served").setString("p", forKey: "side"))
        var listenerConfig = URLEndpointListenerConfiguration(collections: [passive.collection])
        listenerConfig.networkInterface = "127.0.0.1"
        listenerConfig.disableTLS = true
        listenerConfig.readOnly = true
        listenerConfig.authenticator = ListenerPasswordAuthenticator(authenticator: { user, password in
            user == "peer" && password == "secret"
        })
        let copy = URLEndpointListenerConfiguration(config: listenerConfig)
        #expect(copy.readOnly && URLEndpointListenerConfiguration.defaultReadOnly == false)
        let listener = URLEndpointListener(config: copy)
        try listener.start()
        defer { listener.stop() }
        #expect(listener.status.connectionCount == 0 && listener.status.activeConnectionCount == 0)
        let url = try #require(listener.urls?.first)

        // Pulling works, checkpoints included; the credentials ride in a header the app sets.
        let credentials = Data("peer:secret".utf8).base64EncodedString()
        var pull = ReplicatorConfiguration(target: URLEndpoint(url: url))
        pull.addCollection(active.collection)
        pull.replicatorType = ReplicatorType.pull
        pull.headers = ["Authorization": "Basic \(credentials)"]
        let puller = Replicator(config: pull)
        puller.start()
        let pulled = await puller.waitUntilStopped()
        #expect(pulled.error == nil, "\(String(describing: pulled.error))")
        #expect(try active.collection.document(id: "served")?.string(forKey: "side") == "p")

        // A continuous pull holds a connection open and active while it waits for changes.
        var live = pull
        live.continuous = true
        let follower = Replicator(config: live)
        follower.start()
        defer { follower.stop() }
        var status = listener.status
        for _ in 0..<100 where status.activeConnectionCount == 0 {
            try await Task.sleep(for: .milliseconds(50))
            status = listener.status
        }
        #expect(status.connectionCount >= 1 && status.activeConnectionCount >= 1)
        follower.stop()

        // Pushing is refused, and nothing reaches the served database.
        try active.collection.save(document: MutableDocument(id: "pushed"))
        var push = pull
        push.continuous = false
        push.replicatorType = ReplicatorType.push
        let pusher = Replicator(config: push)
        pusher.start()
        let pushed = await pusher.waitUntilStopped()
        #expect(pushed.error?.kind == .forbidden)
        #expect(try passive.collection.document(id: "pushed") == nil)
    }

    final class AggregateModel: PredictiveModel {
        func predict(input: DictionaryObject) -> DictionaryObject? {
            guard let numbers = input.array(forKey: "numbers")?.toArray() as? [NSNumber] else { return nil }
            let sum = numbers.reduce(0) { $0 + $1.intValue }
            return MutableDictionaryObject().setInt(sum, forKey: "sum").setDouble(Double(sum) / Double(numbers.count), forKey: "avg")
        }
    }

    @Test func predictiveIndexesAndVectorDistances() throws {
        let s = try SnippetDatabase()
        try Extension.enableVectorSearch()
        for (i, numbers) in [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]].enumerated() {
            try s.collection.save(document: MutableDocument(id: "n\(i)").setValue(numbers, forKey: "numbers")
                .setValue([0, 0], forKey: "v1").setValue(i == 0 ? [3, 4] : [0, 2], forKey: "v2"))
        }
        Database.prediction.registerModel(AggregateModel(), withName: "AggregateModel-shape")
        defer { Database.prediction.unregisterModel(withName: "AggregateModel-shape") }

        // Couchbase Lite's PredictiveQueryTest: an index on the prediction's `sum` serves the query.
        let input = Expression.value(["numbers": Expression.property("numbers")])
        let prediction = Function.prediction(model: "AggregateModel-shape", input: input)
        try s.collection.createIndex(IndexBuilder.predictiveIndex(model: "AggregateModel-shape", input: input,
                                                                  properties: ["sum"]), name: "SumIndex")
        let q = QueryBuilder
            .select(SelectResult.property("numbers"), SelectResult.expression(prediction.property("sum")).as("sum"))
            .from(DataSource.collection(s.collection))
            .where(prediction.property("sum").equalTo(Expression.value(15)))
        #expect(try q.explain().contains("SumIndex"))
        #expect(try q.execute().allResults().map { $0.int(forKey: "sum") } == [15])

        // Distances between two vectors of a document.
        let v1 = Expression.property("v1"), v2 = Expression.property("v2")
        let rows = try QueryBuilder
            .select(SelectResult.expression(Function.euclideanDistance(between: v1, and: v2)).as("e"),
                    SelectResult.expression(Function.squaredEuclideanDistance(between: v1, and: v2)).as("s"),
                    SelectResult.expression(Function.cosineDistance(between: v2, and: Expression.value([0, 1]))).as("c"))
            .from(DataSource.collection(s.collection))
            .orderBy(Ordering.expression(Meta.id))
            .execute().allResults()
        #expect(rows.map { $0.double(forKey: "e") } == [5, 2])
        #expect(rows.map { $0.double(forKey: "s") } == [25, 4])
        #expect(abs(rows[0].double(forKey: "c") - 0.2) < 1e-9 && rows[1].double(forKey: "c") == 0)
        // Anything but two vectors of one length is null.
        let bad = try s.database.createQuery("SELECT EUCLIDEAN_DISTANCE([1, 2], [1]) AS a, COSINE_DISTANCE([0, 0], [1, 1]) AS b FROM _ LIMIT 1")
            .execute().allResults()
        #expect(bad.first?.value(forKey: "a") == nil && bad.first?.value(forKey: "b") == nil)
        #expect(DatabaseEndpoint(database: s.database).database === s.database)
    }
}
