import SetteeCore
@testable import SetteeReplication
import Testing

/// A peer's `_revisions` is input: a malformed one must not take the replicator down.
@Suite struct RevisionsInputTests {
    private func revision(_ text: String) throws -> ReplicatedRevision {
        guard case .object(let doc) = try JSON.parse(text) else { throw SetteeError(.badRequest, "not an object") }
        return try RemoteEndpoint.revision(from: doc)
    }

    @Test func wellFormedHistoryIsKept() throws {
        let r = try revision(#"{"_id":"d","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"x":1}"#)
        #expect(r.history.map(\.description) == ["3-c", "2-b", "1-a"])
        #expect(r.body == ["x": 1])
    }

    /// These trapped in RevID(generation:digest:) (generation 0, or an empty digest) before the replicator used
    /// RevID.history(fromRevisions:); now the history is just the revision.
    @Test func malformedHistoryIsIgnored() throws {
        let cases: [(rev: String, revisions: String)] = [
            ("1-a", #"{"start":1,"ids":["a","b"]}"#),   // trapped: generation 0
            ("2-a", #"{"start":2,"ids":["a",""]}"#),    // trapped: empty digest
            ("2-a", #"{"start":2,"ids":["a",1]}"#),     // a number was skipped, shifting the generations
            ("2-a", #"{"start":2,"ids":["x","a"]}"#),   // does not start with the revision itself
        ]
        for (rev, revisions) in cases {
            let r = try revision(#"{"_id":"d","_rev":"\#(rev)","_revisions":\#(revisions)}"#)
            #expect(r.history.map(\.description) == [rev], "\(revisions)")
        }
    }
}
