import Foundation
import Synchronization

/// What one commit changed in one collection (Couchbase Lite's `CollectionChange`).
public struct CollectionChange: Sendable {
    /// The collection.
    public let collection: Collection
    /// Ids of the documents the commit wrote (created, updated, deleted, purged), in write order.
    public let documentIDs: [String]
    /// The database's sequence after the commit.
    public let sequence: UInt64
    /// The collection's full name, `scope.collection`.
    public var collectionName: String { collection.fullName }
}

/// A commit that changed one document (Couchbase Lite's `DocumentChange`).
public struct DocumentChange: Sendable {
    /// The collection holding the document.
    public let collection: Collection
    /// The document's id.
    public let documentID: String
    /// The database's sequence after the commit.
    public let sequence: UInt64
    /// The database (Couchbase Lite keeps it for code written before collections).
    public var database: Database { collection.database }
}

/// A registration returned by `addChangeListener`; call ``remove()`` to stop receiving changes.
public final class ListenerToken: Sendable {
    private let onRemove: @Sendable () -> Void
    private let removed = Atomic<Bool>(false)

    /// A token that calls `onRemove` once, on the first ``remove()``.
    public init(onRemove: @escaping @Sendable () -> Void) { self.onRemove = onRemove }

    /// Unregisters the listener. Safe to call more than once, from any thread.
    public func remove() {
        if removed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged { onRemove() }
    }
}

/// Publishes commits to in-process observers: async sequences of the database sequence (for feeds and
/// index updaters) and callback listeners per collection (the Couchbase Lite-style API).
///
/// Thread-safe. Notifications never block the writer: async streams keep only the newest sequence,
/// callbacks are dispatched on the listener's queue.
final class ChangeNotifier: Sendable {
    private struct Listener {
        let collection: Collection
        let documentID: String?
        let queue: DispatchQueue
        let callback: @Sendable (CollectionChange) -> Void
    }

    private struct State {
        var streams: [UUID: AsyncStream<UInt64>.Continuation] = [:]
        var listeners: [UUID: Listener] = [:]
    }
    private let state = Mutex(State())

    /// An async sequence that yields the database's sequence after each commit (newest only if the consumer lags).
    func sequences() -> AsyncStream<UInt64> {
        let (stream, continuation) = AsyncStream<UInt64>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let key = UUID()
        state.withLock { $0.streams[key] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.streams.removeValue(forKey: key) }
        }
        return stream
    }

    func addListener(collection: Collection, documentID: String?, queue: DispatchQueue,
                     _ callback: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken {
        let key = UUID()
        let listener = Listener(collection: collection, documentID: documentID, queue: queue, callback: callback)
        state.withLock { $0.listeners[key] = listener }
        return ListenerToken { [weak self] in
            self?.state.withLock { _ = $0.listeners.removeValue(forKey: key) }
        }
    }

    /// Called by the writer after a commit.
    func publish(sequence: UInt64, changes: [String: [String]]) {
        let (conts, ls) = state.withLock { (Array($0.streams.values), Array($0.listeners.values)) }
        for c in conts { c.yield(sequence) }
        guard !ls.isEmpty else { return }
        for l in ls {
            guard let ids = changes[l.collection.fullName], !ids.isEmpty else { continue }
            if let docID = l.documentID {
                guard ids.contains(docID) else { continue }
                let change = CollectionChange(collection: l.collection, documentIDs: [docID], sequence: sequence)
                l.queue.async { l.callback(change) }
            } else {
                let change = CollectionChange(collection: l.collection, documentIDs: ids, sequence: sequence)
                l.queue.async { l.callback(change) }
            }
        }
    }

    /// Ends every async sequence (the database closed).
    func finish() {
        let conts = state.withLock { state in
            let conts = Array(state.streams.values)
            state.streams.removeAll()
            state.listeners.removeAll()
            return conts
        }
        for c in conts { c.finish() }
    }
}
