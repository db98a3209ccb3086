/// One search hit: a vector's id and its distance from the query, in the metric's units.
package struct VectorMatch: Sendable, Hashable {
    /// The id the vector was added under.
    public var id: Int64
    /// The distance from the query as ``VectorDistance/distance(_:_:_:)`` defines it for the index's metric
    /// (computed from the stored code, so approximate under a quantizer).
    public var distance: Float

    /// A hit for `id` at `distance`.
    public init(id: Int64, distance: Float) {
        self.id = id
        self.distance = distance
    }

    /// Ascending by distance, ties by id: the order every search returns.
    @inlinable
    public static func ranksBefore(_ a: VectorMatch, _ b: VectorMatch) -> Bool {
        a.distance < b.distance || (a.distance == b.distance && a.id < b.id)
    }
}

/// The `k` smallest (score, id) pairs seen so far: a bounded max-heap whose root is the worst kept pair.
///
/// Ties break by id (smaller id ranks first), so the kept set never depends on the order candidates arrive in.
/// NaN scores are never kept.
struct TopK {
    let capacity: Int
    private(set) var scores: [Float] = []
    private(set) var ids: [Int64] = []

    init(capacity: Int) {
        self.capacity = max(capacity, 0)
        scores.reserveCapacity(min(self.capacity, 4096))
        ids.reserveCapacity(min(self.capacity, 4096))
    }

    var count: Int { scores.count }
    var isFull: Bool { scores.count >= capacity }
    /// The score a candidate must not exceed to be kept: the worst kept score once full, +∞ before.
    var worst: Float { capacity > 0 && scores.count >= capacity ? scores[0] : .infinity }

    /// True when (`score`, `id`) would be kept: the heap has room, or it ranks before the current worst.
    @inline(__always)
    func admits(_ score: Float, _ id: Int64) -> Bool {
        guard !score.isNaN else { return false }
        if scores.count < capacity { return true }
        guard capacity > 0 else { return false }
        let worst = scores[0]
        return score < worst || (score == worst && id < ids[0])
    }

    /// A cheap pre-check before calling a filter: false when no id could make `score` admissible.
    @inline(__always)
    func mightAdmit(_ score: Float) -> Bool {
        if scores.count < capacity { return !score.isNaN }
        return capacity > 0 && score <= scores[0]
    }

    /// Keeps (`score`, `id`) if it ranks among the best `capacity`, evicting the worst.
    mutating func insert(_ score: Float, _ id: Int64) {
        guard admits(score, id) else { return }
        if scores.count < capacity {
            scores.append(score)
            ids.append(id)
            siftUp(scores.count - 1)
        } else {
            scores[0] = score
            ids[0] = id
            siftDown(0)
        }
    }

    /// The kept pairs, best first.
    func sorted() -> [(score: Float, id: Int64)] {
        var pairs = Array(zip(scores, ids)).map { (score: $0.0, id: $0.1) }
        pairs.sort { $0.score < $1.score || ($0.score == $1.score && $0.id < $1.id) }
        return pairs
    }

    /// True when the pair at `i` ranks after the pair at `j` (is "larger" in the max-heap).
    @inline(__always)
    private func worse(_ i: Int, _ j: Int) -> Bool {
        scores[i] > scores[j] || (scores[i] == scores[j] && ids[i] > ids[j])
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard worse(child, parent) else { return }
            scores.swapAt(child, parent)
            ids.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let n = scores.count
        while true {
            let left = 2 * parent + 1
            guard left < n else { return }
            var largest = left
            if left + 1 < n, worse(left + 1, left) { largest = left + 1 }
            guard worse(largest, parent) else { return }
            scores.swapAt(largest, parent)
            ids.swapAt(largest, parent)
            parent = largest
        }
    }
}
