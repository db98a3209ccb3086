/// Everything a search precomputes for one query — the (normalized) query and, per encoding, the weights and
/// constants its kernels need — and the list scans themselves.
struct QueryScanner {
    /// Which kernel scores this index's entries.
    enum Kind {
        case rawL2, rawDot, sq8L2, sq8Dot, sqPacked, productQuantizer
    }

    let index: IVFIndex
    let query: [Float]
    let kind: Kind
    /// Cosine with a zero query: every distance is 1 by definition.
    let zeroCosine: Bool
    /// Scalar quantizer: the float weights and the constant and factor of the expanded distance; 8-bit codes also
    /// get integer weights and, under L2, ‖q − min‖² per stage.
    var weights: [Float] = []
    var weights8: SQ8Weights?
    var stageNorms: [Float] = []
    var constant: Float = 0
    var factor: Float = 0
    /// How far past the k-th best score a partial 8-bit score must be before the entry is abandoned: covers the
    /// float rounding of the expanded form.
    var margin: Float = 0
    /// Product quantizer under `dot`: the query's inner-product table (the same for every list).
    var table: [Float] = []

    /// Per-list state: the product quantizer's table (residual query under L2) and constant (q·c under dot).
    struct ListContext {
        var table: [Float] = []
        var constant: Float = 0
    }

    init(index: IVFIndex, query: [Float]) {
        self.index = index
        self.query = query
        zeroCosine = index.metric == .cosine && query.allSatisfy { $0 == 0 }
        let l2 = index.usesL2
        guard index.isTrained else {
            kind = l2 ? .rawL2 : .rawDot
            return
        }
        let d = index.dimensions
        if let sq = index.scalarQuantizer {
            kind = sq.bits == 8 ? (l2 ? .sq8L2 : .sq8Dot) : .sqPacked
            var w = [Float](repeating: 0, count: d)
            if l2 {
                stageNorms = [Float](repeating: 0, count: CodeScan.stageCount(d))
                for t in 0..<d {
                    let shifted = query[t] - sq.minimums[t]
                    w[t] = shifted * sq.steps[t]
                    stageNorms[t / CodeScan.stage] += shifted * shifted
                }
                constant = stageNorms.reduce(0, +)
                factor = -2
                margin = 1e-5 * constant
            } else {
                var qmin: Float = 0
                for t in 0..<d {
                    w[t] = query[t] * sq.steps[t]
                    qmin += query[t] * sq.minimums[t]
                }
                constant = -qmin
                factor = -1
            }
            weights = w
            if sq.bits == 8 { weights8 = SQ8Weights(w) }
        } else if let pq = index.productQuantizer {
            kind = .productQuantizer
            if !l2 { table = query.withUnsafeBufferPointer { pq.table($0.baseAddress!, innerProduct: true) } }
        } else {
            kind = l2 ? .rawL2 : .rawDot
        }
    }

    /// The per-list context (only the product quantizer needs one).
    func context(list: Int) -> ListContext {
        guard kind == .productQuantizer, let pq = index.productQuantizer else { return ListContext() }
        let d = index.dimensions
        return index.centroids.withUnsafeBufferPointer { cb in
            let centroid = cb.baseAddress! + list * d
            return query.withUnsafeBufferPointer { qb in
                if !index.usesL2 {
                    return ListContext(table: [], constant: VectorDistance.innerProduct(qb.baseAddress!, centroid, d))
                }
                var residual = [Float](repeating: 0, count: d)
                for t in 0..<d { residual[t] = qb[t] - centroid[t] }
                let table = residual.withUnsafeBufferPointer { pq.table($0.baseAddress!, innerProduct: false) }
                return ListContext(table: table)
            }
        }
    }

    /// Offers every entry of `list` to `top` (through `filter`). The staged kernels abandon an entry as soon as its
    /// partial distance passes the current k-th best; the others score blocks of entries, then offer them.
    func scan(list: Int, into top: inout TopK, filter: ((Int64) -> Bool)?) {
        let entries = index.lists[list]
        let count = entries.ids.count, d = index.dimensions, size = index.codeSize
        let staged = !zeroCosine && (kind == .rawL2 || kind == .sq8L2)
        entries.ids.withUnsafeBufferPointer { ids in
            if !staged {
                let context = context(list: list)
                withUnsafeTemporaryAllocation(of: Float.self, capacity: 1024) { buffer in
                    var from = 0
                    while from < count {
                        let n = min(1024, count - from)
                        score(list: list, from: from, count: n, context: context, into: buffer.baseAddress!)
                        for e in 0..<n { Self.offer(buffer[e], ids[from + e], to: &top, filter: filter) }
                        from += n
                    }
                }
                return
            }
            // The limit only changes when an entry is kept, so it is recomputed then rather than per entry.
            entries.codes.withUnsafeBytes { raw in
                let codes = raw.baseAddress!
                if kind == .rawL2 {
                    query.withUnsafeBytes { q in
                        var limit = top.worst
                        for e in 0..<count {
                            let score = CodeScan.rawL2(q.baseAddress!, codes + e * size, d: d, limit: limit)
                            if score > limit { continue }
                            if Self.offer(score, ids[e], to: &top, filter: filter) { limit = top.worst }
                        }
                    }
                    return
                }
                let stages = CodeScan.stageCount(d)
                weights8!.withPointers { w in
                    stageNorms.withUnsafeBufferPointer { norms in
                        entries.terms.withUnsafeBufferPointer { terms in
                            let t = terms.baseAddress!, qq = norms.baseAddress!
                            var limit = sq8Limit(top.worst)
                            var e = 0
                            // Four entries' first stages side by side; most are abandoned there together.
                            while d >= CodeScan.stage && e + 4 <= count {
                                let first = CodeScan.sq8FirstStage4(codes + e * size, stride: size, w,
                                                                    stageNorm: qq[0], terms: t + e * stages,
                                                                    stages: stages)
                                if any(first .<= SIMD4(repeating: limit)) {
                                    for lane in 0..<4 where first[lane] <= limit {
                                        let entry = e + lane
                                        let score = CodeScan.sq8L2(codes + entry * size, w, stageNorms: qq,
                                                                   terms: t + entry * stages, d: d, limit: limit,
                                                                   from: 1, total: first[lane])
                                        if score > limit { continue }
                                        if Self.offer(score, ids[entry], to: &top, filter: filter) {
                                            limit = sq8Limit(top.worst)
                                        }
                                    }
                                }
                                e += 4
                            }
                            while e < count {
                                let score = CodeScan.sq8L2(codes + e * size, w, stageNorms: qq, terms: t + e * stages,
                                                           d: d, limit: limit)
                                if score <= limit, Self.offer(score, ids[e], to: &top, filter: filter) {
                                    limit = sq8Limit(top.worst)
                                }
                                e += 1
                            }
                        }
                    }
                }
            }
        }
    }

    /// Keeps (`score`, `id`) in `top` if it ranks there and `filter` allows it (asked only then); true if kept.
    @inline(__always)
    @discardableResult
    static func offer(_ score: Float, _ id: Int64, to top: inout TopK, filter: ((Int64) -> Bool)?) -> Bool {
        guard top.mightAdmit(score), top.admits(score, id) else { return false }
        if let filter, !filter(id) { return false }
        top.insert(score, id)
        return true
    }

    /// The abandon limit for 8-bit scores: the k-th best plus the rounding margin.
    @inline(__always)
    func sq8Limit(_ worst: Float) -> Float { worst + margin + 1e-4 * abs(worst) }

    /// The full scores of entries `from..<from+count` of `list` into `scores` (smaller is nearer).
    func score(list: Int, from: Int, count: Int, context: ListContext, into scores: UnsafeMutablePointer<Float>) {
        if zeroCosine {
            scores.update(repeating: 2, count: count)
            return
        }
        let d = index.dimensions, size = index.codeSize, stages = CodeScan.stageCount(d)
        let entries = index.lists[list]
        entries.codes.withUnsafeBytes { raw in
            let codes = raw.baseAddress! + from * size
            switch kind {
            case .rawL2, .rawDot:
                query.withUnsafeBytes { q in
                    let x = q.baseAddress!
                    for e in 0..<count {
                        scores[e] = kind == .rawL2 ? CodeScan.rawL2(x, codes + e * size, d: d, limit: .infinity)
                            : CodeScan.rawNegativeDot(x, codes + e * size, d: d)
                    }
                }
            case .sq8L2, .sq8Dot:
                weights8!.withPointers { w in
                    stageNorms.withUnsafeBufferPointer { norms in
                        entries.terms.withUnsafeBufferPointer { terms in
                            for e in 0..<count {
                                let code = codes + e * size
                                scores[e] = kind == .sq8Dot ? constant - CodeScan.sq8Dot(code, w, d: d)
                                    : CodeScan.sq8L2(code, w, stageNorms: norms.baseAddress!,
                                                     terms: terms.baseAddress! + (from + e) * stages, d: d,
                                                     limit: .infinity)
                            }
                        }
                    }
                }
            case .sqPacked:
                scorePacked(entries, codes: codes.assumingMemoryBound(to: UInt8.self), from: from, count: count,
                            into: scores)
            case .productQuantizer:
                let pq = index.productQuantizer!, bytes = codes.assumingMemoryBound(to: UInt8.self)
                (index.usesL2 ? context.table : table).withUnsafeBufferPointer { tb in
                    for e in 0..<count {
                        let sum = pq.lookup(bytes + e * size, table: tb.baseAddress!)
                        scores[e] = index.usesL2 ? sum : -(context.constant + sum)
                    }
                }
            }
        }
    }

    /// 4- and 6-bit scalar-quantizer scores: levels unpacked to floats, then the expanded distance.
    private func scorePacked(_ entries: InvertedList, codes: UnsafePointer<UInt8>, from: Int, count: Int,
                             into scores: UnsafeMutablePointer<Float>) {
        let sq = index.scalarQuantizer!, d = index.dimensions, size = sq.codeSize, stages = CodeScan.stageCount(d)
        withUnsafeTemporaryAllocation(of: Float.self, capacity: d) { buffer in
            let levels = buffer.baseAddress!
            weights.withUnsafeBufferPointer { w in
                for e in 0..<count {
                    sq.levels(codes + e * size, into: levels)
                    var score = constant + factor * VectorDistance.innerProduct(levels, w.baseAddress!, d)
                    if index.usesL2 {
                        for s in 0..<stages { score += entries.terms[(from + e) * stages + s] }
                    }
                    scores[e] = score
                }
            }
        }
    }

    /// Converts a kernel score to the metric's distance.
    func distance(fromScore score: Float) -> Float {
        switch index.metric {
        case .euclideanSquared: return max(0, score)
        case .euclidean: return max(0, score).squareRoot()
        case .cosine: return min(max(score * 0.5, 0), 2)
        case .dot: return score
        }
    }
}
