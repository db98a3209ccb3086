/// Purging: removing revisions for good (CouchDB's `_purge`).
extension RevTree {
    /// Removes the given leaves and every ancestor that no other remaining leaf descends from.
    ///
    /// Revisions that are not leaves are ignored (CouchDB purges leaves only).
    /// - Returns: the leaves actually purged.
    @discardableResult
    public mutating func purge(leaves revs: [RevID]) -> [RevID] {
        var remove = [Bool](repeating: false, count: nodes.count)
        var purged: [RevID] = []
        var childCount = [Int](repeating: 0, count: nodes.count)
        for node in nodes where node.parent >= 0 { childCount[node.parent] += 1 }
        for rev in revs {
            guard let leaf = index(of: rev), childCount[leaf] == 0, !remove[leaf] else { continue }
            purged.append(rev)
            var i = leaf
            while true {
                remove[i] = true
                let p = nodes[i].parent
                guard p >= 0 else { break }
                childCount[p] -= 1
                if childCount[p] > 0 { break }
                i = p
            }
        }
        guard !purged.isEmpty else { return [] }
        var newIndex = [Int](repeating: -1, count: nodes.count)
        var kept: [Node] = []
        for i in nodes.indices where !remove[i] {
            newIndex[i] = kept.count
            var node = nodes[i]
            node.parent = node.parent >= 0 ? newIndex[node.parent] : -1
            kept.append(node)
        }
        nodes = kept
        return purged
    }
}
