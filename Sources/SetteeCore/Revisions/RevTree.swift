/// A document's revision tree: every revision Settee knows of, how they descend from each other, which
/// leaves are tombstones, and the bodies of the leaves.
///
/// ## How it works
/// Nodes are kept sorted by generation, then digest text — ``RevTree/storedBefore(_:_:)`` — so a
/// parent always precedes its children and two trees holding the same revisions are equal no matter the order
/// the revisions arrived in. Each node points at its parent by index; a node whose parent was stemmed away is a
/// root. That storage order is not the winner's ranking, which is CouchDB's (``RevID``'s `<`, comparing a hex
/// digest's bytes): keeping the text order keeps every stored tree's bytes valid as they are.
///
/// Example: a document edited once on two replicas that then replicated to each other:
///
/// ```
/// 1-a ── 2-b            (leaf, live)
///    └── 2-c            (leaf, live)     winner: 2-c (same generation, "c" > "b"); conflicts: [2-b]
/// ```
/// Deleting `2-c` adds `3-d` (a tombstone) under it; the live leaf `2-b` then wins even though its
/// generation is lower, because a live leaf always beats a deleted one (CouchDB's rule).
///
/// Stemming to `revs_limit` keeps, for every leaf, only the newest `revs_limit` revisions on its path;
/// the older ones disappear and their children become roots.
///
/// Bodies: only leaves keep a body; when a revision gains a child its body is dropped.
/// Value type; not tied to any storage. The store encodes it with ``encoded()``.
public struct RevTree: Sendable, Hashable {
    /// One revision in the tree.
    public struct Node: Sendable, Hashable {
        /// The revision's id.
        public var rev: RevID
        /// Index of the parent node in ``RevTree/nodes``, or -1 for a root.
        public var parent: Int
        /// Whether this revision is a tombstone.
        public var deleted: Bool
        /// The revision's JSON body (serialized), kept for leaves only; nil when unknown or dropped.
        public var body: [UInt8]?

        public init(rev: RevID, parent: Int, deleted: Bool, body: [UInt8]?) {
            self.rev = rev
            self.parent = parent
            self.deleted = deleted
            self.body = body
        }
    }

    /// Nodes sorted by ``storedBefore(_:_:)``; parents precede children.
    public internal(set) var nodes: [Node]

    /// An empty tree (a document that does not exist yet).
    public init() { nodes = [] }

    /// A tree holding one first revision without a body (what a new document's stored tree is).
    public init(singleRoot rev: RevID, deleted: Bool) {
        nodes = [Node(rev: rev, parent: -1, deleted: deleted, body: nil)]
    }

    /// A tree from already-sorted nodes (as decoded from storage). Use the mutating API otherwise.
    init(sortedNodes: [Node]) { nodes = sortedNodes }

    public var isEmpty: Bool { nodes.isEmpty }
    public var count: Int { nodes.count }

    /// The order nodes are kept and stored in: generation, then the digest's text (`String` order, which for the
    /// printable ASCII of digests is byte order). Not CouchDB's order of revisions, which ranks leaves: see
    /// ``ranksBefore(_:_:)``.
    public static func storedBefore(_ a: RevID, _ b: RevID) -> Bool {
        if a.generation != b.generation { return a.generation < b.generation }
        return a.digest < b.digest
    }

    /// Index of the node with this revision id, or nil.
    public func index(of rev: RevID) -> Int? {
        // Binary search over the sorted nodes.
        var lo = 0, hi = nodes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if RevTree.storedBefore(nodes[mid].rev, rev) { lo = mid + 1 } else { hi = mid }
        }
        return lo < nodes.count && nodes[lo].rev == rev ? lo : nil
    }

    /// Whether the tree holds this revision.
    public func contains(_ rev: RevID) -> Bool { index(of: rev) != nil }

    /// The node for a revision, if present.
    public func node(_ rev: RevID) -> Node? { index(of: rev).map { nodes[$0] } }

    /// For each node, whether some node names it as parent.
    private func hasChildFlags() -> [Bool] {
        var flags = [Bool](repeating: false, count: nodes.count)
        for node in nodes where node.parent >= 0 { flags[node.parent] = true }
        return flags
    }

    /// Indices of the leaves (revisions without children), in tree order.
    public var leafIndices: [Int] {
        let flags = hasChildFlags()
        return nodes.indices.filter { !flags[$0] }
    }

    /// Whether the revision is a leaf of this tree.
    public func isLeaf(_ index: Int) -> Bool {
        !nodes.contains { $0.parent == index }
    }

    /// The leaves sorted the way CouchDB ranks them: live before deleted, then higher generation,
    /// then greater digest. The first one is the winner.
    public var rankedLeaves: [Node] {
        leafIndices.map { nodes[$0] }.sorted(by: RevTree.ranksBefore)
    }

    /// CouchDB's ordering of leaves: `{not deleted, {generation, digest}}` descending, the digests compared as
    /// CouchDB holds them (``RevID``'s `<`).
    public static func ranksBefore(_ a: Node, _ b: Node) -> Bool {
        if a.deleted != b.deleted { return !a.deleted }
        return b.rev < a.rev
    }

    /// The winning revision (nil for an empty tree).
    public var winner: Node? {
        var best: Node?
        let flags = hasChildFlags()
        for i in nodes.indices where !flags[i] {
            if let current = best {
                if RevTree.ranksBefore(nodes[i], current) { best = nodes[i] }
            } else {
                best = nodes[i]
            }
        }
        return best
    }

    /// Live leaves other than the winner, ranked (CouchDB's `_conflicts`).
    public var conflicts: [RevID] {
        let ranked = rankedLeaves
        return ranked.dropFirst().filter { !$0.deleted }.map(\.rev)
    }

    /// Deleted leaves other than the winner, ranked (CouchDB's `_deleted_conflicts`).
    public var deletedConflicts: [RevID] {
        let ranked = rankedLeaves
        return ranked.dropFirst().filter { $0.deleted }.map(\.rev)
    }

    /// The path from `rev` back to its oldest known ancestor, newest first.
    public func history(of rev: RevID) -> [RevID] {
        guard var i = index(of: rev) else { return [] }
        var path = [nodes[i].rev]
        while nodes[i].parent >= 0 {
            i = nodes[i].parent
            path.append(nodes[i].rev)
        }
        return path
    }

    /// The path as node indices, newest first.
    func historyIndices(of index: Int) -> [Int] {
        var i = index
        var path = [i]
        while nodes[i].parent >= 0 {
            i = nodes[i].parent
            path.append(i)
        }
        return path
    }
}
