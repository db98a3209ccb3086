import SetteeBLIP
import SetteeCore
import SetteeReplication
import SetteeStore
import Synchronization

/// Group commit for the revisions a client pushes (`rev`). Each `rev` is a request of its own, answered once its
/// revision is stored, and Couchbase Lite sends a batch of them at once; a transaction (and a hop to the blocking
/// executor) per document would make a push several times slower than the same documents through `_bulk_docs`.
///
/// Here the revisions that arrive while a write is running queue up, and the next write takes all of them: one hop
/// to the store's executor, each revision prepared there (its checks, its `RevisionWrite`), then one
/// `Collection.write(_:as:)` — one transaction, the write rules run once for the batch — with each revision's own
/// outcome handed back to its request. A revision refused (by its checks or by the rules) fails alone. The batch's
/// answers go out together (``BLIPSession/send(contentsOf:)``: one lock and one flush for them all).
final class BLIPRevisionWriter: Sendable {
    /// Makes a revision's write, on the store's executor; throwing refuses that revision alone.
    typealias Prepare = @Sendable (SetteeStore.Collection) throws -> RevisionWrite

    /// Where a revision's outcome goes; it returns the answer to send, if any.
    typealias Completion = @Sendable (Result<RevID, any Error>) -> BLIPMessage?

    private struct Pending: Sendable {
        var prepare: Prepare
        var completion: Completion
    }

    private struct State {
        var queue: [Pending] = []
        var writing = false
    }

    private let collection: SetteeStore.Collection
    private let writer: WriteContext
    private let session: BLIPSession
    private let state = Mutex(State())

    init(collection: SetteeStore.Collection, writer: WriteContext, session: BLIPSession) {
        self.collection = collection
        self.writer = writer
        self.session = session
    }

    /// Queues the revision `prepare` makes; `completion` gets its outcome once its batch is written (on a task: it
    /// must not block) and returns the answer to send with the batch's others.
    func submit(_ prepare: @escaping Prepare, completion: @escaping Completion) {
        let starts = state.withLock { state in
            state.queue.append(Pending(prepare: prepare, completion: completion))
            guard !state.writing else { return false }
            state.writing = true
            return true
        }
        if starts { Task { await self.drain() } }
    }

    /// Writes batches until the queue is empty.
    private func drain() async {
        while true {
            let batch = state.withLock { state in
                defer { state.queue.removeAll(keepingCapacity: true) }
                if state.queue.isEmpty { state.writing = false }
                return state.queue
            }
            guard !batch.isEmpty else { return }
            let c = collection, writer = self.writer, prepares = batch.map(\.prepare)
            let outcomes: [Result<RevID, any Error>]
            do {
                outcomes = try await blocking { () -> [Result<RevID, any Error>] in
                    var results = [Result<RevID, any Error>?](repeating: nil, count: prepares.count)
                    var writes: [RevisionWrite] = []
                    var positions: [Int] = []
                    for (i, prepare) in prepares.enumerated() {
                        do {
                            writes.append(try prepare(c))
                            positions.append(i)
                        } catch {
                            results[i] = .failure(error)
                        }
                    }
                    if !writes.isEmpty {
                        for (k, outcome) in try c.write(writes, as: writer).enumerated() {
                            results[positions[k]] = outcome.mapError { $0 }
                        }
                    }
                    return results.map { $0 ?? .failure(SetteeError(.internalError, "no outcome for a pushed revision")) }
                }
            } catch {
                outcomes = Array(repeating: .failure(error), count: batch.count)
            }
            session.send(contentsOf: zip(batch, outcomes).compactMap { pending, outcome in pending.completion(outcome) })
        }
    }
}
