import Foundation
import SetteeCore
import SetteeTestSupport
import Testing

/// A replication's memory doesn't grow with the data it moves: node B pulls a database from node A over HTTP (real
/// processes, real sockets), first a small one, then one four times its size, while B's heap (anonymous resident
/// memory: page cache and the memory-mapped databases excluded) is sampled. A replicator that held anything per
/// document for a whole run would grow with the documents; this one moves them in bounded batches.
///
/// Fast by default (10,000 and 40,000 documents); `SETTEE_LONG_TESTS=1` runs it at 250,000 and 1,000,000.
@Suite struct FlatMemoryTests {
    static let long = ProcessInfo.processInfo.environment["SETTEE_LONG_TESTS"] == "1"

    @Test func aReplicationsHeapDoesNotGrowWithTheDocumentsItMoves() async throws {
        try await offThePool {
            let (dirA, a, connA) = try HTTPConnectionTests.nodeWithDatabase()
            defer { a.stop(); _ = dirA }
            let dirB = TempDir()
            let b = try ServerProcess(dataDirectory: dirB.path, admin: nil)
            defer { b.stop() }
            let connB = try RawHTTPConnection(port: b.port)
            connA.setReceiveTimeout(seconds: 600)
            connB.setReceiveTimeout(seconds: 600)
            let small = Self.long ? 250_000 : 10_000, large = small * 4

            /// Loads `count` documents into `name` on A, then has B pull it; returns B's heap growth in KiB.
            func pull(_ name: String, count: Int) throws -> Int {
                try connA.send(HTTPConnectionTests.request("PUT", "/" + name))
                #expect(try connA.readResponse()?.status == 201)
                for start in stride(from: 0, to: count, by: 2_000) {
                    let docs = (start..<min(count, start + 2_000)).map {
                        #"{"_id":"d\#(String(format: "%08d", $0))","n":\#($0),"text":"a document the replicator moves and lets go of"}"#
                    }
                    try connA.send(HTTPConnectionTests.request("POST", "/\(name)/_bulk_docs", body: #"{"docs":[\#(docs.joined(separator: ","))]}"#))
                    #expect(try connA.readResponse()?.status == 201)
                }
                let spec = #"{"source":"http://127.0.0.1:\#(a.port)/\#(name)","target":"\#(name)","create_target":true}"#
                let (answer, growth) = try LargeAttachmentTests.heapGrowth(of: b.process.processIdentifier) {
                    try connB.send(HTTPConnectionTests.request("POST", "/_replicate", body: spec))
                    return try connB.readResponse()
                }
                #expect(answer?.status == 200)
                #expect((try? JSON.parse(answer?.body ?? []))?["history"]?[0]?["docs_written"]?.intValue == Int64(count))
                return growth
            }
            let smallGrowth = try pull("small", count: small)
            let largeGrowth = try pull("large", count: large)
            print("flat memory: B's heap grew \(smallGrowth) KiB pulling \(small) documents, \(largeGrowth) KiB pulling \(large)")
            // Four times the documents: held in any form (parsed, a set of ids, a list of revisions), they would add
            // tens of megabytes; moved in bounded batches, the growth stays within a few of the small run's
            // (allocator noise, batches in flight).
            #expect(largeGrowth < smallGrowth + 12 << 10,
                    "B's heap grew \(smallGrowth) KiB for \(small) documents but \(largeGrowth) KiB for \(large)")
        }
    }
}
