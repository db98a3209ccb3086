import Foundation
import Logging
import SetteeCore
import SetteeIndex
import SetteeReplication
import SetteeStore
import Synchronization

/// A scheduled replication: its spec, its `Replication`, and its run state for the scheduler.
extension ReplicationManager {
    final class Job: Sendable {
        let id: String
        let docID: String?
        let spec: Spec
        let replication: Replication
        private struct State {
            var task: Task<Void, Never>?
            var onCancel: (@Sendable () -> Void)?
            var onEnd: (@Sendable (Result<ReplicationResult, ReplicationError>) async -> Void)?
            var cancelled = false
            var running = false
            var rotating = false
            var startedOn = Date()
        }
        private let state = Mutex(State())
        /// Where the scheduler started it last (a job waiting for a slot keeps its last start).
        var startedOn: Date { state.withLock { $0.startedOn } }
        /// Whether it runs now (started by the scheduler), rather than waiting for a slot.
        var isRunning: Bool { state.withLock { $0.running } }
        /// Runs when the job ends by itself (a `_replicator` document's state written back).
        var onEnd: (@Sendable (Result<ReplicationResult, ReplicationError>) async -> Void)? {
            get { state.withLock { $0.onEnd } }
            set { state.withLock { $0.onEnd = newValue } }
        }

        /// Marks it running (the scheduler started it).
        func markStarted() {
            state.withLock {
                $0.running = true
                $0.rotating = false
                $0.startedOn = Date()
            }
        }

        /// The scheduler stops it to give its slot to a waiting job; it waits for a slot again afterwards.
        /// Returns false if it was already stopping.
        func rotateOut() -> Bool {
            let task: Task<Void, Never>? = state.withLock { state in
                guard state.running, !state.rotating, !state.cancelled else { return nil }
                state.rotating = true
                return state.task
            }
            task?.cancel()
            return task != nil
        }

        /// Called as its run ends: whether the scheduler stopped it (to run again later) rather than it ending.
        func endRun() -> Bool {
            state.withLock { state in
                state.running = false
                defer { state.rotating = false }
                return state.rotating && !state.cancelled
            }
        }

        /// The background run of a continuous or `_replicator` job.
        var task: Task<Void, Never>? {
            get { state.withLock { $0.task } }
            set {
                let cancelNow = state.withLock { $0.task = newValue; return $0.cancelled }
                if cancelNow { newValue?.cancel() }
            }
        }

        /// Stops a one-shot `_replicate` that runs inside its request.
        var onCancel: (@Sendable () -> Void)? {
            get { state.withLock { $0.onCancel } }
            set {
                let cancelNow = state.withLock { $0.onCancel = newValue; return $0.cancelled }
                if cancelNow { newValue?() }
            }
        }

        /// Stops the job (also if its task is attached only afterwards).
        func cancel() {
            let (task, onCancel) = state.withLock { state in
                state.cancelled = true
                return (state.task, state.onCancel)
            }
            task?.cancel()
            onCancel?()
        }

        init(id: String, docID: String?, spec: Spec, replication: Replication) {
            self.id = id
            self.docID = docID
            self.spec = spec
            self.replication = replication
        }
    }
}
