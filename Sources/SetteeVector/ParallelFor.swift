/// How the numerics spread independent work over threads: `parallel(n, body)` must call `body(i)` exactly once for
/// every `i` in `0..<n` and return when all calls have returned; the calls may run concurrently.
///
/// This target imports no threading library, so the caller supplies the loop — typically
/// `{ n, body in DispatchQueue.concurrentPerform(iterations: n, execute: body) }`. ``ParallelLoop/serial(_:_:)`` runs
/// the calls one after another. Work is always split into the same chunks whatever the loop does, and each chunk
/// writes only its own outputs, so results never depend on how (or whether) chunks run concurrently.
package typealias ParallelFor = (Int, @Sendable (Int) -> Void) -> Void

/// Ready-made ``ParallelFor`` loops.
package enum ParallelLoop {
    /// Calls `body(0)`, `body(1)`, … `body(count − 1)` in order on the calling thread.
    package static func serial(_ count: Int, _ body: @Sendable (Int) -> Void) {
        for i in 0..<max(count, 0) { body(i) }
    }

    /// How many chunks of `size` cover `count` items (chunk `c` covers `c·size ..< min(count, (c+1)·size)`).
    static func chunkCount(_ count: Int, size: Int) -> Int { (count + size - 1) / size }
}

/// An unsafe pointer (or other plain value) carried into a `@Sendable` chunk body.
///
/// Safety contract, checked by review rather than the compiler: the pointee outlives the parallel loop, chunks only
/// read shared data and write disjoint ranges, and nothing else mutates the memory meanwhile.
// @unchecked: the contract above; it exists only to carry pointers into `parallelFor`'s chunks.
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
