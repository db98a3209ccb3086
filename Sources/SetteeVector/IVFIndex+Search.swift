extension IVFIndex {
    /// The `k` nearest ids with their distances in the metric's units (as ``VectorDistance/distance(_:_:_:)``
    /// defines them), ascending, ties by id.
    ///
    /// Trained, only the `nprobes` lists whose centroids are nearest the query are scanned (`nprobes` clamped to
    /// `1...centroidCount`); untrained, the search is exact. Distances come from the codes (asymmetric: the query
    /// is exact, each stored vector as decoded). `filter`, when given, decides which ids may be returned; it is
    /// only asked about ids that would otherwise make the result. Throws
    /// ``VectorError/dimensionMismatch(expected:got:)`` for a query of the wrong length.
    package func search(_ query: UnsafeBufferPointer<Float>, k: Int, nprobes: Int,
                       filter: ((Int64) -> Bool)? = nil) throws(VectorError) -> [VectorMatch] {
        let prepared = try prepare(query)
        guard k > 0, count > 0 else { return [] }
        let scanner = QueryScanner(index: self, query: prepared)
        var top = TopK(capacity: min(k, count))
        for list in isTrained ? nearestLists(prepared, count: nprobes) : [0] where !lists[list].ids.isEmpty {
            scanner.scan(list: list, into: &top, filter: filter)
        }
        var matches = top.sorted().map { VectorMatch(id: $0.id, distance: scanner.distance(fromScore: $0.score)) }
        matches.sort(by: VectorMatch.ranksBefore)
        return matches
    }

    /// The code-based distance from `query` to the stored vector of `id` (nil when absent), exactly as
    /// ``search(_:k:nprobes:filter:)`` would report it — for scoring a filtered set directly.
    ///
    /// Throws ``VectorError/dimensionMismatch(expected:got:)`` for a query of the wrong length.
    package func distance(_ query: UnsafeBufferPointer<Float>, to id: Int64) throws(VectorError) -> Float? {
        try distances(query, to: [id])[0]
    }

    /// ``distance(_:to:)`` for many ids, preparing the query once; `nil` for absent ids.
    package func distances(_ query: UnsafeBufferPointer<Float>, to ids: [Int64]) throws(VectorError) -> [Float?] {
        let prepared = try prepare(query)
        let scanner = QueryScanner(index: self, query: prepared)
        var contexts: [Int: QueryScanner.ListContext] = [:]
        return ids.map { id in
            guard let location = locations[id] else { return nil }
            let list = Int(location.list)
            let context = contexts[list] ?? scanner.context(list: list)
            contexts[list] = context
            var score: Float = 0
            scanner.score(list: list, from: Int(location.slot), count: 1, context: context, into: &score)
            return scanner.distance(fromScore: score)
        }
    }

    /// The `count` lists (clamped to 1…centroids) whose centroids score best for a prepared query, best first,
    /// ties by list index.
    func nearestLists(_ query: [Float], count: Int) -> [Int] {
        let wanted = min(max(count, 1), centroidCount)
        return withUnsafeTemporaryAllocation(of: Float.self, capacity: centroidCount) { buffer in
            let scores = buffer.baseAddress!
            query.withUnsafeBufferPointer { qb in
                centroids.withUnsafeBufferPointer { cb in
                    centroidNorms.withUnsafeBufferPointer { nb in
                        CentroidScan.scores(qb.baseAddress!, centroids: cb.baseAddress!, norms: nb.baseAddress!,
                                            k: centroidCount, d: dimensions, into: scores)
                    }
                }
            }
            var top = TopK(capacity: wanted)
            for j in 0..<centroidCount where top.admits(scores[j], Int64(j)) { top.insert(scores[j], Int64(j)) }
            if top.count < wanted {
                // Non-finite scores (a non-finite query): fall back to the lowest-numbered lists.
                return Array(0..<wanted)
            }
            return top.sorted().map { Int($0.id) }
        }
    }
}
