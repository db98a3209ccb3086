import SetteeCore

/// A stored document as the store keeps it: the winning revision's body and, when asked for, the whole
/// revision tree. The server builds CouchDB's responses (`_revisions`, `_conflicts`, `open_revs`) from it.
public struct DocumentRecord: Sendable {
    /// The document id.
    public let id: String
    /// The sequence of the document's latest change.
    public let sequence: UInt64
    /// The winning revision.
    public let revID: RevID
    /// Whether the winning revision is a tombstone.
    public let deleted: Bool
    /// Whether the document has more than one live leaf.
    public let conflicted: Bool
    /// The winning revision's body (serialized JSON object without `_id`/`_rev`).
    public let body: [UInt8]
    /// The revision tree with the winner's body filled in; nil when not loaded.
    public let tree: RevTree?

    /// The body and tombstone flag of a revision, if the store still has its body.
    public func revision(_ rev: RevID) -> (body: [UInt8], deleted: Bool)? {
        if rev == revID { return (body, deleted) }
        guard let node = tree?.node(rev), let body = node.body else { return nil }
        return (body, node.deleted)
    }

    /// The revisions CouchDB's `open_revs` names: `nil` = every leaf (winner first); with `latest`, a requested
    /// revision that is no longer a leaf stands for the leaves descending from it. `found` is false for a
    /// revision the tree lacks or whose body is gone. Needs the tree (`record(id:withTree: true)`).
    public func openRevisions(_ requested: [RevID]?, latest: Bool) -> [(rev: RevID, found: Bool)] {
        guard let tree else { return [] }
        guard let requested else { return tree.rankedLeaves.map { ($0.rev, true) } }
        var out: [(RevID, Bool)] = []
        var seen = Set<RevID>()
        for rev in requested {
            guard let index = tree.index(of: rev) else {
                out.append((rev, false))
                continue
            }
            if latest && !tree.isLeaf(index) {
                for leaf in tree.leafIndices where tree.history(of: tree.nodes[leaf].rev).contains(rev) {
                    let r = tree.nodes[leaf].rev
                    if seen.insert(r).inserted { out.append((r, true)) }
                }
            } else if seen.insert(rev).inserted {
                out.append((rev, revision(rev) != nil))
            }
        }
        return out
    }

    /// The winning body parsed as a JSON object.
    public func json() throws(SetteeError) -> JSONObject {
        try DocumentRecord.parseBody(body)
    }

    static func parseBody(_ bytes: [UInt8]) throws(SetteeError) -> JSONObject {
        do {
            guard case .object(let object) = try JSON.parse(bytes) else {
                throw SetteeError(.internalError, "Stored body is not an object")
            }
            return object
        } catch let error as JSONError {
            throw SetteeError(.internalError, "Stored body is not valid JSON: \(error)", underlying: error)
        } catch let error as SetteeError {
            throw error
        } catch {
            throw SetteeError(.internalError, "\(error)")
        }
    }
}
