import Foundation
import Testing
import Settee

/// The seed's color model: a hex color string → its RGB vector in 0…1.
struct ColorModel: PredictiveModel {
    static func vector(_ hex: String) -> [Float]? {
        guard hex.count == 6, let v = UInt32(hex, radix: 16) else { return nil }
        return [Float((v >> 16) & 0xFF) / 255, Float((v >> 8) & 0xFF) / 255, Float(v & 0xFF) / 255]
    }
    func predict(input: DictionaryObject) -> DictionaryObject? {
        guard let color = input.string(forKey: "colorInput"), let v = ColorModel.vector(color) else { return nil }
        return MutableDictionaryObject().setValue(v.map(Double.init), forKey: "vector")
    }
}

@Suite(.serialized) struct VectorSearchTests {
    static let palette: [(String, String, String)] = [
        ("FF00AA", "vibrant pink", "a vibrant hot pink"), ("FF0000", "red", "a vibrant red"), ("00FF00", "green", "a vibrant green"),
        ("0000FF", "blue", "a deep blue"), ("FFFF00", "yellow", "a vibrant sunny yellow"), ("00FFFF", "cyan", "a cool cyan"),
        ("FF00FF", "magenta", "a vibrant magenta"), ("808080", "grey", "a dull grey"), ("C0C0C0", "silver", "a pale silver"),
        ("800000", "maroon", "a dark maroon"), ("808000", "olive", "a muted olive"), ("008000", "dark green", "a dark green"),
        ("800080", "purple", "a vibrant purple"), ("008080", "teal", "a muted teal"), ("000080", "navy", "a dark navy"),
        ("FFA500", "orange", "a vibrant orange"), ("FFC0CB", "light pink", "a soft pink"), ("E6E6FA", "lavender", "a pale lavender"),
        ("F5F5DC", "beige", "a dull beige"), ("A52A2A", "brown", "an earthy brown"), ("FF1493", "deep pink", "a vibrant deep pink"),
        ("DC143C", "crimson", "a vibrant crimson"), ("4B0082", "indigo", "a deep indigo"), ("FFD700", "gold", "a shiny gold"),
    ]

    /// The colors collection of the seed: `vector`, `color`, `saturation`, `color_desc`; one document has no vector.
    static func colors(_ db: Database) throws -> Settee.Collection {
        let c = try db.createCollection(name: "colors")
        var docs: [String] = []
        for (i, (hex, name, desc)) in palette.enumerated() {
            let v = ColorModel.vector(hex)!
            let saturation = (v.max()! - v.min()!) / max(v.max()!, 0.001)
            docs.append(#"{"_id":"c\#(i)","color":"\#(hex)","name":"\#(name)","saturation":\#(saturation),"color_desc":"\#(desc)","vector":[\#(v.map { "\($0)" }.joined(separator: ","))]}"#)
        }
        docs.append(#"{"_id":"novector","color":"zzz","name":"none","saturation":1,"color_desc":"vibrant nothing"}"#)
        docs.append(#"{"_id":"shortvector","color":"zzz","name":"short","saturation":1,"color_desc":"vibrant short","vector":[1,2]}"#)
        try load(c, docs)
        return c
    }

    static func ids(_ db: Database, _ sql: String, _ params: [String: JSON]) throws -> [String] {
        let q = try db.createQuery(sql)
        q.parameters = Parameters(params)
        return try q.execute().compactMap { $0.string(forKey: "id") }
    }

    static func json(_ v: [Float]) -> JSON { .array(v.map { .double(Double($0)) }) }

    /// The ids of the k nearest palette colors by exact distance among those `keep` accepts.
    static func exact(_ target: [Float], k: Int, metric: DistanceMetric = .euclideanSquared,
                      keep: (Int) -> Bool = { _ in true }) -> [String] {
        palette.indices.filter(keep).map { i in (i, VectorDistance.distance(metric, ColorModel.vector(palette[i].0)!, target)) }
            .sorted { $0.1 != $1.1 ? $0.1 < $1.1 : "c\($0.0)" < "c\($1.0)" }.prefix(k).map { "c\($0.0)" }
    }

    @Test func seedExamplesRunAndMatchExactSearch() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.colors(db)
        try c.createIndex(withName: "colors_index", config: VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 2))
        try c.createIndex(withName: "color_desc_index", config: FullTextIndexConfiguration(["color_desc"]))
        let target = ColorModel.vector("FF00AA")!
        // Pure vector search: the 8 nearest (exact before training).
        let nearest = try Self.ids(db, "SELECT meta().id, color FROM _default.colors ORDER BY approx_vector_distance(vector, $vector) LIMIT 8",
                                   ["vector": Self.json(target)])
        #expect(nearest == Self.exact(target, k: 8))
        // Hybrid with MATCH: the nearest among the documents whose description says "vibrant".
        let vibrant = try Self.ids(db, "SELECT meta().id, color FROM _default.colors WHERE MATCH(color_desc_index, $text) ORDER BY approx_vector_distance(vector, $vector) LIMIT 8",
                                   ["vector": Self.json(target), "text": "vibrant"])
        #expect(vibrant == Self.exact(target, k: 8) { Self.palette[$0].2.contains("vibrant") })
        // Hybrid with a value condition, no LIMIT needed.
        let saturated = try Self.ids(db, "SELECT meta().id, color FROM _default.colors WHERE saturation > 0.5 ORDER BY approx_vector_distance(vector, $vector)",
                                     ["vector": Self.json(target)])
        let expected = Self.exact(target, k: 100) { i in
            let v = ColorModel.vector(Self.palette[i].0)!
            return (v.max()! - v.min()!) / max(v.max()!, 0.001) > 0.5
        }
        #expect(saturated == expected)
        // Distance in WHERE: among the LIMIT nearest, those closer than 0.5.
        let close = try db.createQuery("SELECT meta().id, approx_vector_distance(vector, $vector) AS d FROM _default.colors WHERE approx_vector_distance(vector, $vector) < 0.5 LIMIT 8")
        close.parameters = Parameters(["vector": Self.json(target)])
        let rows = try close.execute().allResults()
        #expect(!rows.isEmpty)
        for row in rows { #expect(row.double(forKey: "d") < 0.5) }
        #expect(Set(rows.compactMap { $0.string(forKey: "id") }).isSubset(of: Set(Self.exact(target, k: 8))))
        // The distance itself is the metric's value.
        let first = try db.createQuery("SELECT approx_vector_distance(vector, $vector) AS d FROM colors ORDER BY approx_vector_distance(vector, $vector) LIMIT 1")
        first.parameters = Parameters(["vector": Self.json(ColorModel.vector("FF0000")!)])
        #expect(try first.execute().allResults().first?.double(forKey: "d") == 0)
        // Explain names the vector index.
        let explained = try db.createQuery("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v) LIMIT 3").explain()
        #expect(explained.contains("vector index colors_index"))
    }

    @Test func predictionComputesVectorsAtIndexingTime() throws {
        Database.prediction.registerModel(ColorModel(), withName: "ColorModel")
        defer { Database.prediction.unregisterModel(withName: "ColorModel") }
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.colors(db)
        let expression = #"prediction(ColorModel, {"colorInput": color}).vector"#
        try c.createIndex(withName: "colors_index", config: VectorIndexConfiguration(expression: expression, dimensions: 3, centroids: 2))
        let target = ColorModel.vector("FF00AA")!
        let nearest = try Self.ids(db, "SELECT meta().id, color FROM _default.colors ORDER BY approx_vector_distance(\(expression), $vector) LIMIT 8",
                                   ["vector": Self.json(target)])
        #expect(nearest == Self.exact(target, k: 8))
        let hybrid = try Self.ids(db, "SELECT meta().id, color FROM _default.colors WHERE saturation > 0.5 ORDER BY approx_vector_distance(\(expression), $vector) LIMIT 8",
                                  ["vector": Self.json(target)])
        #expect(hybrid.count == 8)
        // PREDICTION in a query and through the QueryBuilder.
        let label = try rows(db, #"SELECT PREDICTION(ColorModel, {"colorInput": color}).vector AS v FROM colors WHERE META().id = 'c1'"#)
        #expect(label == [#"{"v":[1.0,0.0,0.0]}"#])
        let prediction = Function.prediction(model: "ColorModel", input: Expression.dictionary(["colorInput": Expression.property("color")]))
        let built = try QueryBuilder.select(SelectResult.expression(prediction.property("vector")).as("v"))
            .from(DataSource.collection(c)).where(Meta.id.equalTo(Expression.string("c2"))).execute().allResults()
        #expect(built.first?.toJSON() == #"{"v":[0.0,1.0,0.0]}"#)
        let byBuilder = QueryBuilder.select(SelectResult.expression(Meta.id))
            .from(DataSource.collection(c))
            .orderBy(Ordering.expression(VectorFunction.approxVectorDistance(prediction.property("vector"), Expression.parameter("vector"))))
            .limit(Expression.int(3))
        byBuilder.parameters = Parameters(["vector": Self.json(target)])
        #expect(try byBuilder.execute().compactMap { $0.string(forKey: "id") } == Self.exact(target, k: 3))
    }

    @Test func badVectorQueriesFailWithTheReason() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.colors(db)
        var config = VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 2)
        config.metric = .cosine
        try c.createIndex(withName: "colors_index", config: config)
        let v = Self.json([1, 0, 0])
        for (sql, params, fragment) in [
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v) LIMIT 3", ["v": JSON.array([1, 0])], "has 2 dimensions"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v, 'MANHATTAN') LIMIT 3", ["v": v], "unknown metric"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v, 'L2') LIMIT 3", ["v": v], "does not match the metric"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(color, $v) LIMIT 3", ["v": v], "no vector index on the expression color"),
            ("SELECT meta().id FROM colors WHERE saturation > 0.5 OR approx_vector_distance(vector, $v) < 0.2 LIMIT 3", ["v": v], "inside OR"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v)", ["v": v], "needs a LIMIT"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v, 'COSINE', 4, true) LIMIT 3", ["v": v], "accurate = true is not supported"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v, 'COSINE', 0) LIMIT 3", ["v": v], "nprobes must be a positive integer"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v) LIMIT 3", ["v": JSON.string("red")], "must be an array of numbers"),
            ("SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector) LIMIT 3", ["v": v], "takes 2 to 5 argument"),
        ] as [(String, [String: JSON], String)] {
            do {
                let q = try db.createQuery(sql)
                q.parameters = Parameters(params)
                _ = try q.execute()
                Issue.record("\(sql) should fail")
            } catch let error as SetteeError {
                #expect(error.code == .queryParseError, "\(sql)")
                #expect(error.reason.contains(fragment), "\(sql): \(error.reason)")
            }
        }
        // The metric named explicitly, in any accepted spelling, and nprobes given: fine.
        let ok = try Self.ids(db, "SELECT meta().id FROM colors ORDER BY approx_vector_distance(vector, $v, 'cosine', 2, false) LIMIT 2", ["v": v])
        #expect(ok.count == 2)
        // Invalid configurations.
        for bad in [VectorIndexConfiguration(expression: "vector", dimensions: 1, centroids: 2),
                    VectorIndexConfiguration(expression: "vector", dimensions: 4097, centroids: 2),
                    VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 0),
                    VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 64001)] {
            #expect(throws: SetteeError.self) { try c.createIndex(withName: "bad", config: bad) }
        }
        var pq = VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 2)
        pq.encoding = .productQuantizer(subquantizers: 2, bits: 8)
        #expect(throws: SetteeError.self) { try c.createIndex(withName: "bad", config: pq) }  // 2 does not divide 3
    }

    /// Gaussian clusters in `d` dimensions; document i has `vector`, `group` (i % 4) and id `v<i>`.
    static func clustered(_ n: Int, d: Int, clusters: Int, seed: UInt64) -> [[Float]] {
        var rng = SeededGenerator(seed: seed)
        let centers = (0..<clusters).map { _ in (0..<d).map { _ in Float.random(in: -10...10, using: &rng) } }
        return (0..<n).map { i in centers[i % clusters].map { $0 + Float.random(in: -1...1, using: &rng) } }
    }

    static func loadVectors(_ c: Settee.Collection, _ vectors: [[Float]], from start: Int = 0) throws {
        try load(c, vectors.enumerated().map { i, v in
            #"{"_id":"v\#(start + i)","group":\#((start + i) % 4),"vector":[\#(v.map { "\($0)" }.joined(separator: ","))]}"#
        })
    }

    static func bruteForce(_ vectors: [Int: [Float]], _ q: [Float], k: Int) -> [String] {
        vectors.map { ($0.key, VectorDistance.distance(.euclideanSquared, $0.value, q)) }
            .sorted { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }.prefix(k).map { "v\($0.0)" }
    }

    @Test func trainedIndexRecallAndMaintenance() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let d = 16
        var vectors = Dictionary(uniqueKeysWithValues: Self.clustered(2_000, d: d, clusters: 20, seed: 7).enumerated().map { ($0, $1) })
        try Self.loadVectors(c, (0..<2_000).map { vectors[$0]! })
        var config = VectorIndexConfiguration(expression: "vector", dimensions: UInt32(d), centroids: 20)
        config.encoding = .none
        try c.createIndex(withName: "vec", config: config)
        let manager = try IndexManager.shared(for: db)
        let info = try #require(try c.index(withName: "vec")).info
        #expect(try manager.isVectorIndexTrained(info))  // 2,000 ≥ 25 × 20
        let queries = Self.clustered(20, d: d, clusters: 20, seed: 99)
        func search(_ q: [Float], probes: Int, k: Int = 10) throws -> [String] {
            try Self.ids(db, "SELECT META().id FROM _ ORDER BY APPROX_VECTOR_DISTANCE(vector, $q, 'L2_SQUARED', \(probes)) LIMIT \(k)", ["q": Self.json(q)])
        }
        // Probing every list of an unencoded index is exact.
        for q in queries { #expect(try search(q, probes: 20) == Self.bruteForce(vectors, q, k: 10)) }
        var hits = 0
        for q in queries { hits += Set(try search(q, probes: 3)).intersection(Self.bruteForce(vectors, q, k: 10)).count }
        #expect(Double(hits) / Double(queries.count * 10) >= 0.9)

        // Updates, deletes and documents that stop being vectors.
        let q = queries[0]
        let top = try search(q, probes: 20, k: 1)[0]
        try c.delete(document: try #require(try c.document(id: top)))
        vectors[Int(top.dropFirst())!] = nil
        #expect(try search(q, probes: 20) == Self.bruteForce(vectors, q, k: 10))
        let moved = "v1999"
        try load(c, [#"{"_id":"v1999","group":3,"vector":[\#(q.map { "\($0)" }.joined(separator: ","))]}"#])
        vectors[1999] = q
        #expect(try search(q, probes: 20, k: 1) == [moved])
        try load(c, [#"{"_id":"v1999","group":3,"vector":"not a vector"}"#])
        vectors[1999] = nil
        #expect(try search(q, probes: 20) == Self.bruteForce(vectors, q, k: 10))

        // Hybrid results equal exact search over the filtered documents.
        for q in queries.prefix(5) {
            let hybrid = try Self.ids(db, "SELECT META().id FROM _ WHERE `group` = 2 ORDER BY APPROX_VECTOR_DISTANCE(vector, $q) LIMIT 10", ["q": Self.json(q)])
            #expect(hybrid == Self.bruteForce(vectors.filter { $0.key % 4 == 2 }, q, k: 10))
        }

        // Doubling the index retrains it; results stay exact at full probes.
        let more = Self.clustered(2_200, d: d, clusters: 20, seed: 8)
        try Self.loadVectors(c, more, from: 2_000)
        for (i, v) in more.enumerated() { vectors[2_000 + i] = v }
        #expect(try search(q, probes: 20) == Self.bruteForce(vectors, q, k: 10))
        let trainedCount = try db.read { db -> Int64 in
            let stmt = try db.prepare("SELECT value FROM \(info.table)_meta WHERE key = 'trained_count'")
            defer { stmt.reset() }
            return try stmt.step() ? stmt.int64(0) : 0
        }
        #expect(trainedCount >= 4_000)

        // Reopening loads centroids and lists from SQLite.
        db.close()
        let reopened = try dir.open()
        for q in queries.prefix(3) {
            #expect(try Self.ids(reopened, "SELECT META().id FROM _ ORDER BY APPROX_VECTOR_DISTANCE(vector, $q, 'L2_SQUARED', 20) LIMIT 10",
                                 ["q": Self.json(q)]) == Self.bruteForce(vectors, q, k: 10))
        }
    }

    @Test func quantizedIndexesFindTheNeighbours() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let d = 16
        let data = Self.clustered(1_500, d: d, clusters: 10, seed: 3)
        try Self.loadVectors(c, data)
        let vectors = Dictionary(uniqueKeysWithValues: data.enumerated().map { ($0, $1) })
        let encodings: [(String, VectorEncoding)] = [("sq8", .scalarQuantizer(type: .SQ8)), ("sq6", .scalarQuantizer(type: .SQ6)),
                                                     ("sq4", .scalarQuantizer(type: .SQ4)), ("pq", .productQuantizer(subquantizers: 4, bits: 6))]
        for (name, encoding) in encodings {
            var config = VectorIndexConfiguration(expression: "vector", dimensions: UInt32(d), centroids: 10)
            config.encoding = encoding
            config.minTrainingSize = 500
            config.metric = .euclidean
            try c.createIndex(withName: name, config: config)
            var hits = 0
            let queries = Self.clustered(10, d: d, clusters: 10, seed: 11)
            for q in queries {
                let found = try Self.ids(db, "SELECT META().id FROM _ ORDER BY APPROX_VECTOR_DISTANCE(vector, $q, 'EUCLIDEAN', 10) LIMIT 10", ["q": Self.json(q)])
                hits += Set(found).intersection(Self.bruteForce(vectors, q, k: 10)).count
            }
            let recall = Double(hits) / 100
            // SQ4 has 16 levels across each dimension's whole range (here ±11, four times the spread inside a
            // cluster), so it tells apart clusters, not close neighbours: its floor is lower.
            let floor = name == "sq4" ? 0.4 : (name == "pq" ? 0.5 : 0.8)
            #expect(recall >= floor, "\(name) recall \(recall)")
            try c.deleteIndex(forName: name)
        }
    }

    @Test func lazyIndexIsFilledByTheApp() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try Self.colors(db)
        var config = VectorIndexConfiguration(expression: "color", dimensions: 3, centroids: 2)
        config.isLazy = true
        try c.createIndex(withName: "colors_index", config: config)
        let index = try #require(try c.index(withName: "colors_index"))
        // Nothing is searchable until the app sets vectors.
        let target = ColorModel.vector("FF00AA")!
        let sql = "SELECT meta().id FROM colors ORDER BY approx_vector_distance(color, $v) LIMIT 3"
        #expect(try Self.ids(db, sql, ["v": Self.json(target)]).isEmpty)

        // An unfinished batch is an error and writes nothing.
        let first = try #require(try index.beginUpdate(limit: 10))
        #expect(first.count == 10)
        try first.setVector(ColorModel.vector(first.string(at: 0)!), at: 0)
        #expect(throws: SetteeError.self) { try first.finish() }
        #expect(throws: SetteeError.self) { try first.setVector([1, 2], at: 1) }

        // Fill everything; "zzz" (no model output) is skipped once, then set to nil (not indexed).
        var skippedOnce = false
        var rounds = 0
        while let updater = try index.beginUpdate(limit: 10) {
            rounds += 1
            #expect(rounds < 10)
            for i in 0..<updater.count {
                let color = try #require(updater.string(at: i))
                if let v = ColorModel.vector(color) {
                    try updater.setVector(v, at: i)
                } else if !skippedOnce {
                    updater.skipVector(at: i)
                } else {
                    try updater.setVector(nil, at: i)
                }
            }
            if updater.count > 0 && (0..<updater.count).contains(where: { ColorModel.vector(updater.string(at: $0)!) == nil }) {
                skippedOnce = true
            }
            try updater.finish()
        }
        #expect(try Self.ids(db, sql, ["v": Self.json(target)]) == Self.exact(target, k: 3))

        // A document changed after its vector was set is handed out again.
        try load(c, [#"{"_id":"c0","color":"00FF00","saturation":1,"color_desc":"now green"}"#])
        let again = try #require(try index.beginUpdate(limit: 10))
        #expect(again.count == 1)
        #expect(again.string(at: 0) == "00FF00")
        try again.setVector(ColorModel.vector("00FF00"), at: 0)
        try again.finish()
        #expect(try index.beginUpdate(limit: 10) == nil)
        #expect(!(try Self.ids(db, sql, ["v": Self.json(target)]).contains("c0")))
        // A non-lazy index has no updater.
        try c.createIndex(withName: "eager", config: VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 2))
        #expect(throws: SetteeError.self) { try c.index(withName: "eager")?.beginUpdate(limit: 1) }
    }

    @Test func vectorIndexDefinitionRoundTripsThroughJSON() throws {
        var config = VectorIndexConfiguration(expression: "vector", dimensions: 128, centroids: 316)
        config.encoding = .productQuantizer(subquantizers: 16, bits: 8)
        config.metric = .dot
        config.numProbes = 12
        config.isLazy = true
        let spec = try config.indexSpec()
        #expect(try IndexSpec(json: spec.json) == spec)
        #expect(spec.vector?.effectiveMinTrainingSize == 25 * 316)
        #expect(spec.vector?.effectiveMaxTrainingSize == 256 * 316)
        let plain = try VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 100).indexSpec()
        #expect(plain.vector?.encoding == .scalarQuantizer(bits: 8))
        #expect(plain.vector?.metric == .euclideanSquared)
        #expect(plain.vector?.effectiveProbes == 8)
        #expect(throws: SetteeError.self) { try IndexSpec(json: try JSON.parse(#"{"type":"vector","expressions":["v"],"dimensions":3}"#)) }
        #expect(throws: SetteeError.self) { try IndexSpec(json: try JSON.parse(#"{"type":"vector","expressions":["v"],"dimensions":3,"centroids":4,"metric":"manhattan"}"#)) }
        #expect(throws: SetteeError.self) { try IndexSpec(json: try JSON.parse(#"{"type":"vector","expressions":["v"],"dimensions":3,"centroids":4,"encoding":"SQ7"}"#)) }
    }
}
