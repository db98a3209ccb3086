extension IVFIndex {
    // MARK: - Encoding

    /// The list and code a vector would be stored with, for persistence: under an untrained index the list is 0 and
    /// the code is the (normalized, under cosine) vector's raw float bytes in the platform's byte order (little
    /// endian on every supported platform); trained, the nearest list and the encoding's code.
    ///
    /// Throws ``VectorError/dimensionMismatch(expected:got:)`` for a vector of the wrong length.
    package func encode(_ vector: UnsafeBufferPointer<Float>) throws(VectorError) -> (list: Int, code: [UInt8]) {
        let prepared = try prepare(vector)
        return prepared.withUnsafeBufferPointer { encodePrepared($0.baseAddress!) }
    }

    /// ``encode(_:)`` for many vectors at once (row-major, `count × dimensions`), assigning lists with the blocked
    /// kernel in parallel chunks — the fast path for re-adding everything after training.
    ///
    /// Throws ``VectorError/dimensionMismatch(expected:got:)`` when `vectors.count` is not a multiple of
    /// `dimensions` (got: the remainder).
    package func encode(batch vectors: UnsafeBufferPointer<Float>, parallel: ParallelFor = ParallelLoop.serial)
        throws(VectorError) -> [(list: Int, code: [UInt8])] {
        let d = dimensions
        guard vectors.count % d == 0 else { throw .dimensionMismatch(expected: d, got: vectors.count % d) }
        let n = vectors.count / d
        guard n > 0 else { return [] }
        var prepared = Array(vectors)
        if metric == .cosine {
            prepared.withUnsafeMutableBufferPointer { buffer in
                for row in 0..<n { VectorDistance.normalize(buffer.baseAddress! + row * d, count: d) }
            }
        }
        return prepared.withUnsafeBufferPointer { buffer in
            let x = buffer.baseAddress!
            guard isTrained else { return (0..<n).map { encodePrepared(x + $0 * d) } }
            let lists = assignLists(x, count: n, parallel: parallel)
            let size = codeSize
            var codes = [UInt8](repeating: 0, count: n * size)
            codes.withUnsafeMutableBufferPointer { cb in
                let shared = Unchecked((index: self, x: x, codes: cb.baseAddress!))
                lists.withUnsafeBufferPointer { lb in
                    let listsP = Unchecked(lb.baseAddress!)
                    parallel(ParallelLoop.chunkCount(n, size: 256)) { chunk in
                        let v = shared.value
                        for row in chunk * 256..<min(n, chunk * 256 + 256) {
                            v.index.encodeCode(v.x + row * d, list: Int(listsP.value[row]), into: v.codes + row * size)
                        }
                    }
                }
            }
            return (0..<n).map { (list: Int(lists[$0]), code: Array(codes[$0 * size..<($0 + 1) * size])) }
        }
    }

    /// A copy of `vector`, normalized under cosine; throws on a length mismatch.
    func prepare(_ vector: UnsafeBufferPointer<Float>) throws(VectorError) -> [Float] {
        guard vector.count == dimensions else { throw .dimensionMismatch(expected: dimensions, got: vector.count) }
        var copy = Array(vector)
        if metric == .cosine { VectorDistance.normalize(&copy) }
        return copy
    }

    /// List and code for a prepared vector.
    func encodePrepared(_ x: UnsafePointer<Float>) -> (list: Int, code: [UInt8]) {
        let list = isTrained ? centroids.withUnsafeBufferPointer { cb in
            centroidNorms.withUnsafeBufferPointer { nb in
                CentroidScan.nearest(x, centroids: cb.baseAddress!, norms: nb.baseAddress!, k: centroidCount,
                                     d: dimensions)
            }
        } : 0
        var code = [UInt8](repeating: 0, count: codeSize)
        code.withUnsafeMutableBufferPointer { encodeCode(x, list: list, into: $0.baseAddress!) }
        return (list, code)
    }

    /// Writes the code of prepared vector `x` destined for `list`.
    func encodeCode(_ x: UnsafePointer<Float>, list: Int, into code: UnsafeMutablePointer<UInt8>) {
        let d = dimensions
        if let scalarQuantizer, isTrained {
            scalarQuantizer.encode(x, into: code)
        } else if let productQuantizer, isTrained {
            withUnsafeTemporaryAllocation(of: Float.self, capacity: d) { residual in
                centroids.withUnsafeBufferPointer { cb in
                    for t in 0..<d { residual[t] = x[t] - cb[list * d + t] }
                }
                productQuantizer.encode(residual.baseAddress!, into: code)
            }
        } else {
            UnsafeMutableRawPointer(code).copyMemory(from: x, byteCount: d * 4)
        }
    }

    // MARK: - Adding and removing

    /// Adds (or replaces) the vector for `id`.
    ///
    /// Throws ``VectorError/dimensionMismatch(expected:got:)`` for a vector of the wrong length.
    package func add(id: Int64, vector: UnsafeBufferPointer<Float>) throws(VectorError) {
        let (list, code) = try encode(vector)
        insert(id: id, list: list, code: code)
    }

    /// Adds (or replaces) many vectors (row-major, `ids.count × dimensions`); ids repeated in the batch keep the
    /// last vector. Assigns and encodes in parallel chunks (see ``encode(batch:parallel:)``).
    ///
    /// Throws ``VectorError/dimensionMismatch(expected:got:)`` when `vectors.count != ids.count × dimensions`
    /// (expected: `ids.count × dimensions`, got: `vectors.count`).
    package func add(ids: [Int64], vectors: UnsafeBufferPointer<Float>,
                    parallel: ParallelFor = ParallelLoop.serial) throws(VectorError) {
        guard vectors.count == ids.count * dimensions else {
            throw .dimensionMismatch(expected: ids.count * dimensions, got: vectors.count)
        }
        let entries = try encode(batch: vectors, parallel: parallel)
        for (id, entry) in zip(ids, entries) { insert(id: id, list: entry.list, code: entry.code) }
    }

    /// Restores a persisted entry (list and code as ``encode(_:)`` produced them) without recomputing anything.
    ///
    /// Throws ``VectorError/corruptParameters(_:)`` when the list is out of range (anything but 0 when untrained)
    /// or the code is not ``codeSize`` bytes.
    package func add(id: Int64, list: Int, code: [UInt8]) throws(VectorError) {
        let lists = isTrained ? centroidCount : 1
        guard list >= 0 && list < lists else {
            throw .corruptParameters("entry for id \(id) names list \(list) of \(lists)")
        }
        guard code.count == codeSize else {
            throw .corruptParameters("entry for id \(id) has a \(code.count)-byte code, expected \(codeSize)")
        }
        insert(id: id, list: list, code: code)
    }

    /// Appends an entry (after removing any previous one for `id`).
    func insert(id: Int64, list: Int, code: [UInt8]) {
        remove(id: id)
        let slot = lists[list].ids.count
        lists[list].ids.append(id)
        lists[list].codes.append(contentsOf: code)
        if let scalarQuantizer, isTrained, usesL2 {
            lists[list].terms.append(contentsOf: code.withUnsafeBufferPointer {
                scalarQuantizer.stageTerms($0.baseAddress!)
            })
        }
        locations[id] = Location(list: Int32(list), slot: Int32(slot))
    }

    /// Removes the vector for `id`; returns false when there was none. The list's last entry takes its slot.
    @discardableResult
    package func remove(id: Int64) -> Bool {
        guard let location = locations.removeValue(forKey: id) else { return false }
        let list = Int(location.list), slot = Int(location.slot), size = codeSize
        let last = lists[list].ids.count - 1
        let stages = lists[list].terms.isEmpty ? 0 : CodeScan.stageCount(dimensions)
        if slot != last {
            let moved = lists[list].ids[last]
            lists[list].ids[slot] = moved
            lists[list].codes.withUnsafeMutableBufferPointer { codes in
                let base = codes.baseAddress!
                (base + slot * size).update(from: base + last * size, count: size)
            }
            for s in 0..<stages { lists[list].terms[slot * stages + s] = lists[list].terms[last * stages + s] }
            locations[moved] = Location(list: location.list, slot: Int32(slot))
        }
        lists[list].ids.removeLast()
        lists[list].codes.removeLast(size)
        lists[list].terms.removeLast(stages)
        return true
    }

    /// True when the index holds a vector for `id`.
    package func contains(id: Int64) -> Bool { locations[id] != nil }

    /// How many entries each list holds (one list while untrained): shows how balanced training was.
    package var listSizes: [Int] { lists.map(\.ids.count) }
}
