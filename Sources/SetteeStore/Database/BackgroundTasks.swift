import Dispatch
import Synchronization

/// The one way Settee runs background work: each piece a Swift task owned by a scope — a database's (its index
/// catch-ups, view updates after stale queries) or a node's (compactions, `_db_updates` watchers, scheduled
/// installs) — that ends with its owner. Blocking parts go to the store's bounded threads
/// go to ``blockingWidth`` serial dispatch queues, never the cooperative pool: libdispatch's worker threads, which
/// every process has anyway, so an app that embeds the store gets no threads of Settee's for its index catch-ups
/// (a thread pool of their own cost an app 6–9 MB of RSS in new malloc arenas; the server's 64 offload threads
/// more). At most ``blockingWidth`` such pieces block at once. Work there may wait for ``BackgroundWork`` (a view
/// update waits for its map pieces), never for other work of these queues.
///
/// Ending the scope cancels every task in it: ``close()`` (async) also waits for them, so nothing outlives a
/// node's shutdown; ``cancelAll()`` is for a synchronous close (a database's), whose tasks see the database closed
/// and end. A task started after the end does not run.
package final class BackgroundTasks: Sendable {
    private struct State {
        var ended = false
        var next = 0
        var running: [Int: Task<Void, Never>] = [:]
    }
    private let state = Mutex(State())

    package init() {}

    /// Starts `work` as a task of this scope. Returns false, running nothing, once the scope has ended.
    @discardableResult
    package func run(_ work: @escaping @Sendable () async -> Void) -> Bool {
        state.withLock { s in
            guard !s.ended else { return false }
            s.next += 1
            let id = s.next
            // (The task removes itself under the same lock, so never before it was added.)
            s.running[id] = Task.detached { [weak self] in
                await work()
                self?.finished(id)
            }
            return true
        }
    }

    /// Starts, after `delay`, blocking `work` on the background threads, unless the scope ends first. Returns
    /// false, running nothing, once the scope has ended.
    @discardableResult
    package func runBlocking(after delay: Duration = .zero, _ work: @escaping @Sendable () -> Void) -> Bool {
        run {
            if delay > .zero { try? await Task.sleep(for: delay) }
            guard !Task.isCancelled else { return }
            let queue = Self.queues[Self.nextQueue.wrappingAdd(1, ordering: .relaxed).oldValue % Self.blockingWidth]
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                queue.async {
                    work()
                    continuation.resume()
                }
            }
        }
    }

    /// How many pieces of blocking background work run at once, process-wide (a catch-up or view update more
    /// waits for one to end; queries catch up by themselves meanwhile).
    package static let blockingWidth = 4

    /// The queues of blocking background work, taken in turn.
    private static let queues = (0..<blockingWidth).map { DispatchQueue(label: "settee.background.\($0)", qos: .utility) }
    private static let nextQueue = Atomic<Int>(0)

    /// How many tasks are running now.
    package var count: Int { state.withLock { $0.running.count } }

    /// Ends the scope: cancels every task and waits until all have ended.
    package func close() async {
        let tasks = end()
        for task in tasks { await task.value }
    }

    /// Ends the scope and cancels every task, without waiting for them.
    package func cancelAll() {
        _ = end()
    }

    private func end() -> [Task<Void, Never>] {
        let tasks = state.withLock { s in
            s.ended = true
            return Array(s.running.values)
        }
        for task in tasks { task.cancel() }
        return tasks
    }

    private func finished(_ id: Int) {
        _ = state.withLock { $0.running.removeValue(forKey: id) }
    }
}
