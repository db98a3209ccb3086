import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Testing

/// Mango (`_index`, `_find`, `_explain`) and partitioned databases against a real `settee serve` process over real
/// sockets, the way `pouchdb-find` and CouchDB clients use them.
@Suite(.serialized) struct MangoRouteTests {
    static func send(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, JSON) {
        let (status, json) = try await LiveServerTests.send(client, method, uri, body)
        return (status, json ?? .null)
    }

    @Test func pouchDBFindStyleRequests() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/shop").0 == 201)
        let docs = (0..<60).map { i in
            #"{"_id":"p\#(String(format: "%02d", i))","city":"\#(["Paris", "Lyon", "Nice"][i % 3])","type":"\#(i % 2 == 0 ? "hotel" : "bar")","rank":\#(i % 7),"name":"n\#(i)"}"#
        }
        #expect(try await Self.send(client, .post, "/shop/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)

        // Without an index: _all_docs and CouchDB's warning.
        let scan = try await Self.send(client, .post, "/shop/_find", #"{"selector":{"city":"Paris","type":"hotel"},"fields":["_id"]}"#)
        #expect(scan.0 == 200)
        #expect(scan.1["docs"]?.arrayValue?.count == 10)
        #expect(scan.1["warning"]?.stringValue?.hasPrefix("No matching index found") == true)

        // pouchdb-find's createIndex: created, then exists; listed in CouchDB's shape; stored as a design document.
        let index = #"{"index":{"fields":["city","rank"]},"ddoc":"by-city","name":"city-rank","type":"json"}"#
        #expect(try await Self.send(client, .post, "/shop/_index", index).1 == ["result": "created", "id": "_design/by-city", "name": "city-rank"])
        #expect(try await Self.send(client, .post, "/shop/_index", index).1["result"] == "exists")
        let list = try await Self.send(client, .get, "/shop/_index")
        #expect(list.1["total_rows"] == 2)
        #expect(list.1["indexes"]?[0]?["name"] == "_all_docs")
        #expect(list.1["indexes"]?[1] == ["ddoc": "_design/by-city", "name": "city-rank", "type": "json", "partitioned": false,
                                          "def": ["fields": [["city": "asc"], ["rank": "asc"]]]])
        let ddoc = try await Self.send(client, .get, "/shop/_design/by-city")
        #expect(ddoc.1["language"] == "query")
        #expect(ddoc.1["views"]?["city-rank"]?["map"]?["fields"] == ["city": "asc", "rank": "asc"])

        // _find with sort, limit and bookmark paging; every page comes from the index, in its order.
        var seen: [JSON] = []
        var bookmark = ""
        for _ in 0..<10 {
            let body = #"{"selector":{"city":"Paris","rank":{"$gte":2}},"sort":[{"city":"desc"},{"rank":"desc"}],"limit":4,"fields":["_id","rank"]\#(bookmark.isEmpty ? "" : #","bookmark":"\#(bookmark)""#)}"#
            let page = try await Self.send(client, .post, "/shop/_find", body)
            #expect(page.0 == 200)
            #expect(page.1["warning"] == nil)
            let rows = page.1["docs"]?.arrayValue ?? []
            if rows.isEmpty { break }
            seen += rows
            bookmark = page.1["bookmark"]?.stringValue ?? ""
        }
        let ranks = seen.compactMap { $0["rank"]?.intValue }
        #expect(ranks.count == 14)
        #expect(ranks == ranks.sorted(by: >))
        #expect(Set(seen.compactMap { $0["_id"]?.stringValue }).count == 14)

        // _explain names the index and the range it reads.
        let explain = try await Self.send(client, .post, "/shop/_explain", #"{"selector":{"city":"Paris","rank":{"$gt":3}}}"#)
        #expect(explain.1["index"]?["name"] == "city-rank")
        #expect(explain.1["mrargs"]?["start_key"] == ["Paris", 3])
        #expect(explain.1["mrargs"]?["end_key"] == ["Paris", "<MAX>"])

        // CouchDB's errors.
        #expect(try await Self.send(client, .post, "/shop/_find", #"{"selector":{"rank":{"$gt":1}},"sort":["name"]}"#).1["error"] == "no_usable_index")
        #expect(try await Self.send(client, .post, "/shop/_find", #"{"selector":{"rank":{"$foo":1}}}"#).1["error"] == "invalid_operator")
        #expect(try await Self.send(client, .post, "/shop/_find", #"{"selector":{},"limit":"x"}"#).0 == 400)
        #expect(try await Self.send(client, .get, "/shop/_find").0 == 405)
        #expect(try await Self.send(client, .post, "/shop/_index", #"{"index":{"fields":["a"]},"type":"geo"}"#).1["error"] == "invalid_index")

        // Deleting the index removes its design document; queries fall back to _all_docs.
        #expect(try await Self.send(client, .delete, "/shop/_index/by-city/json/city-rank").1 == ["ok": true])
        #expect(try await Self.send(client, .get, "/shop/_design/by-city").0 == 404)
        #expect(try await Self.send(client, .delete, "/shop/_index/by-city/json/city-rank").0 == 404)
        #expect(try await Self.send(client, .get, "/shop/_index").1["total_rows"] == 1)
        // Settee's own indexes live at /{db}/_indexes and are not Mango's.
        #expect(try await Self.send(client, .put, "/shop/_indexes/byName", #"{"expressions":["name"]}"#).0 == 201)
        #expect(try await Self.send(client, .get, "/shop/_index").1["total_rows"] == 1)
    }

    /// CouchDB compares strings in selectors by ICU's collation ("apple" < "Apple" < "banana"), not by code point
    /// ("Apple" < "apple"): in `_find`, with and without an index, and in `_changes?filter=_selector`.
    @Test func selectorsCompareStringsAsCouchDB() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/fruit").0 == 201)
        let names = ["apple", "Apple", "banana", "Banana", "Cherry"]
        let docs = names.enumerated().map { #"{"_id":"f\#($0.offset)","name":"\#($0.element)"}"# }
        #expect(try await Self.send(client, .post, "/fruit/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)
        let selector = #"{"name":{"$gt":"apple","$lt":"banana"}}"#
        let scanned = try await Self.send(client, .post, "/fruit/_find", #"{"selector":\#(selector)}"#)
        #expect(scanned.1["docs"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Apple"])
        #expect(try await Self.send(client, .post, "/fruit/_index", #"{"index":{"fields":["name"]},"name":"name"}"#).0 == 200)
        let sorted = try await Self.send(client, .post, "/fruit/_find", #"{"selector":{"name":{"$gt":null}},"sort":["name"],"fields":["name"]}"#)
        #expect(sorted.1["docs"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["apple", "Apple", "banana", "Banana", "Cherry"])
        let indexed = try await Self.send(client, .post, "/fruit/_find", #"{"selector":\#(selector)}"#)
        #expect(indexed.1["docs"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Apple"])
        let changes = try await Self.send(client, .post, "/fruit/_changes?filter=_selector", #"{"selector":\#(selector)}"#)
        #expect(changes.1["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["f1"])
    }

    @Test func partitionedDatabases() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/orders?partitioned=yes").1["reason"] == "Invalid `partitioned` parameter")
        #expect(try await Self.send(client, .put, "/orders?partitioned=true").0 == 201)
        #expect(try await Self.send(client, .get, "/orders").1["props"] == ["partitioned": true])
        #expect(try await Self.send(client, .put, "/_replicator?partitioned=true").0 == 400)

        // Ids are partition:id.
        #expect(try await Self.send(client, .put, "/orders/plain", "{}").1 == ["error": "illegal_docid", "reason": "Doc id must be of form partition:id"])
        #expect(try await Self.send(client, .post, "/orders/_bulk_docs", #"{"docs":[{"_id":"ok:1"},{"_id":"nopartition"}]}"#).0 == 400)
        let docs = (0..<40).map { i in #"{"_id":"\#(i % 2 == 0 ? "alice" : "bob"):\#(String(format: "%02d", i))","total":\#(i),"kind":"\#(i % 4 < 2 ? "book" : "pen")"}"# }
        #expect(try await Self.send(client, .post, "/orders/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)

        // A partition's info and _all_docs.
        let info = try await Self.send(client, .get, "/orders/_partition/alice")
        #expect(info.1["doc_count"] == 20)
        #expect(info.1["partition"] == "alice")
        #expect((info.1["sizes"]?["external"]?.intValue ?? 0) > 0)
        let all = try await Self.send(client, .get, "/orders/_partition/bob/_all_docs?limit=3")
        #expect(all.1["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["bob:01", "bob:03", "bob:05"])
        #expect(try await Self.send(client, .get, "/orders/_partition/_bad/_all_docs").1["error"] == "illegal_partition")

        // A partitioned view answers per partition, and only so.
        #expect(try await Self.send(client, .put, "/orders/_design/totals",
                                    #"{"views":{"by_kind":{"map":"function(doc){ emit(doc.kind, doc.total); }","reduce":"_sum"}}}"#).0 == 201)
        let sums = try await Self.send(client, .get, "/orders/_partition/alice/_design/totals/_view/by_kind?group=true")
        #expect(sums.1["rows"] == [["key": "book", "value": 180], ["key": "pen", "value": 200]])
        let global = try await Self.send(client, .get, "/orders/_design/totals/_view/by_kind")
        #expect(global.1["reason"] == "`partition` parameter is mandatory for queries to this view.")

        // _find in a partition through a partitioned index.
        #expect(try await Self.send(client, .post, "/orders/_index", #"{"index":{"fields":["total"]},"name":"total"}"#).1["result"] == "created")
        let found = try await Self.send(client, .post, "/orders/_partition/bob/_find", #"{"selector":{"total":{"$gt":30}},"sort":["total"]}"#)
        #expect(found.1["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } == ["bob:31", "bob:33", "bob:35", "bob:37", "bob:39"])
        let explained = try await Self.send(client, .post, "/orders/_partition/bob/_explain", #"{"selector":{"total":{"$gt":30}}}"#)
        #expect(explained.1["index"]?["name"] == "total")
        #expect(explained.1["mrargs"]?["partition"] == "bob")
        // A global query can't use the partitioned index.
        let globalFind = try await Self.send(client, .post, "/orders/_find", #"{"selector":{"total":{"$gt":37}}}"#)
        #expect(globalFind.1["docs"]?.arrayValue?.count == 2)
        #expect(globalFind.1["warning"]?.stringValue?.hasPrefix("No matching index found") == true)

        // max_partition_size: a full partition refuses growth, with CouchDB's error; other partitions still write.
        let config = "/_node/_local/_config/couchdb/max_partition_size"
        #expect(try await Self.send(client, .put, config, #""100""#).0 == 200)
        let refused = try await Self.send(client, .put, "/orders/alice:new", #"{"total":1}"#)
        #expect(refused.0 == 403)
        #expect(refused.1 == ["error": "partition_overflow", "reason": "Partition limit exceeded due to update on 'alice:new'"])
        #expect(try await Self.send(client, .put, "/orders/carol:1", #"{"total":1}"#).0 == 201)
        #expect(try await Self.send(client, .delete, config).0 == 200)
        #expect(try await Self.send(client, .put, "/orders/alice:new", #"{"total":1}"#).0 == 201)

        // A replication that creates its target with `create_target_params` makes it partitioned too.
        let replicated = try await Self.send(client, .post, "/_replicate",
                                             #"{"source":"orders","target":"orders-copy","create_target":true,"create_target_params":{"partitioned":true}}"#)
        #expect(replicated.0 == 200)
        #expect(try await Self.send(client, .get, "/orders-copy").1["props"] == ["partitioned": true])
        #expect(try await Self.send(client, .get, "/orders-copy/_partition/alice").1["doc_count"] == 21)
        let copied = try await Self.send(client, .get, "/orders-copy/_partition/alice/_design/totals/_view/by_kind?group=true")
        #expect(copied.1["rows"] == [["key": .null, "value": 1], ["key": "book", "value": 180], ["key": "pen", "value": 200]])
    }
}
