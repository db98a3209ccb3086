/// `_revs_diff` and `revs_info`: what a replicator needs to know about a document's revisions.
extension RevTree {
    /// The answer to `_revs_diff` for one document.
    public struct RevsDiff: Sendable, Equatable {
        /// Revisions the caller listed that this tree does not have, in the caller's order.
        public var missing: [RevID]
        /// Leaves of this tree whose generation is lower than some missing revision's (CouchDB's rule).
        public var possibleAncestors: [RevID]

        public init(missing: [RevID], possibleAncestors: [RevID]) {
            self.missing = missing
            self.possibleAncestors = possibleAncestors
        }
    }

    /// Which of `revs` this tree lacks, and which of its leaves could be their ancestors.
    public func revsDiff(_ revs: [RevID]) -> RevsDiff {
        var seen = Set<RevID>()
        let missing = revs.filter { !contains($0) && seen.insert($0).inserted }
        guard let maxMissing = missing.map(\.generation).max() else {
            return RevsDiff(missing: [], possibleAncestors: [])
        }
        let ancestors = rankedLeaves.map(\.rev).filter { $0.generation < maxMissing }
        return RevsDiff(missing: missing, possibleAncestors: ancestors)
    }

    /// The status of one revision in `revs_info`.
    public enum RevStatus: String, Sendable {
        case available, missing, deleted
    }

    /// `revs_info` for a revision: its path to the root, newest first, with each one's status.
    /// A revision whose body the store no longer has is `missing`.
    public func revsInfo(of rev: RevID, bodyAvailable: (Node) -> Bool) -> [(rev: RevID, status: RevStatus)] {
        guard let i = index(of: rev) else { return [] }
        return historyIndices(of: i).map { j in
            let node = nodes[j]
            if node.deleted { return (node.rev, .deleted) }
            return (node.rev, bodyAvailable(node) ? .available : .missing)
        }
    }
}
