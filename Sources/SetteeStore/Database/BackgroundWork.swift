import NIOPosix

/// Threads for blocking work that other blocking work hands off and waits for: a view's map pieces and the read of
/// its next batch, started by a view update running on ``Database/offload(_:)``'s threads. A pool of its own:
///
/// - not Swift's cooperative pool, nor libdispatch's global queues, which on Linux are the same threads (a map
///   function waiting for its query server there starved every task of the process until libdispatch noticed and
///   added threads, seconds later);
/// - not the offload pool either, whose calls wait for this work (sharing it could deadlock once every offload
///   thread waited).
///
/// Work submitted here must never wait for other work submitted here.
package enum BackgroundWork {
    /// How many pieces of work run at once.
    package static let width = 16

    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: width)
        pool.start()
        return pool
    }()

    /// Runs `work` on one of the pool's threads (the pool is never shut down: it always runs).
    package static func run(_ work: @escaping @Sendable () -> Void) {
        pool.submit { _ in work() }
    }
}
