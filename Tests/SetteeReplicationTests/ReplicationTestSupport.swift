import Foundation
@_exported import SetteeTestSupport
import SetteeCore
import SetteeStore
@testable import SetteeReplication
import Testing

extension TempDir {
    func open(_ name: String) throws -> Database {
        try Database(name: name, config: DatabaseConfiguration(directory: path))
    }
}

func obj(_ json: String) -> JSONObject {
    guard case .object(let o) = try! JSON.parse(json) else { fatalError("not an object: \(json)") }
    return o
}

extension SetteeStore.Collection {
    /// Creates or updates a document through the CouchDB-style write path; returns the new revision.
    @discardableResult
    func put(_ id: String, _ json: String, parent: RevID? = nil) throws -> RevID {
        try write(RevisionWrite(id: id, body: obj(json), mode: .edit(parent: parent)))
    }

    @discardableResult
    func remove(_ id: String, parent: RevID) throws -> RevID {
        try write(RevisionWrite(id: id, body: [:], deleted: true, mode: .edit(parent: parent)))
    }

    func winner(_ id: String) throws -> RevID? { try record(id: id)?.revID }

    /// Every document id, live or deleted.
    func allIDs() throws -> [String] {
        var ids: [String] = []
        try forEachChange(ChangesOptions(since: 0)) { ids.append($0.id); return true }
        return ids.sorted()
    }
}

/// The two collections hold the same documents with identical revision trees (ids, structure, leaf bodies).
func expectSameTrees(_ a: SetteeStore.Collection, _ b: SetteeStore.Collection,
                     sourceLocation: SourceLocation = #_sourceLocation) throws {
    let ids = try a.allIDs()
    #expect(ids == (try b.allIDs()), "different document sets", sourceLocation: sourceLocation)
    for id in ids {
        let ra = try #require(try a.record(id: id, withTree: true))
        let rb = try #require(try b.record(id: id, withTree: true))
        #expect(ra.revID == rb.revID, "winner of \(id)", sourceLocation: sourceLocation)
        #expect(ra.deleted == rb.deleted, "deleted flag of \(id)", sourceLocation: sourceLocation)
        #expect(ra.tree?.conflicts == rb.tree?.conflicts, "conflicts of \(id)", sourceLocation: sourceLocation)
        #expect(ra.tree?.nodes.map(\.rev) == rb.tree?.nodes.map(\.rev), "tree of \(id)", sourceLocation: sourceLocation)
        #expect(ra.body == rb.body, "winning body of \(id)", sourceLocation: sourceLocation)
    }
}

/// Polls `condition` until it holds or `timeout` passes. The default is generous: the whole suite runs in parallel
/// on two cores, and CPU-bound tests beside these can hold the cooperative pool for many seconds; a condition that
/// holds returns at once.
func eventually(timeout: Duration = .seconds(120), _ condition: () throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try await Task.sleep(for: .milliseconds(50))
    }
    return try condition()
}

func fastRetries(_ o: inout ReplicationOptions) {
    o.retryDelay = .milliseconds(10)
    o.maxRetryDelay = .milliseconds(100)
    o.maxAttempts = 1000
}
