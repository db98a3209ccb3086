#if canImport(Combine)
import Combine
import Foundation
import SetteeStore

extension Replicator {
    /// A Combine publisher of this replicator's status changes, delivered on `queue` (Couchbase Lite's
    /// `changePublisher(on:)`). Cancelling the subscription removes the listener.
    public func changePublisher(on queue: DispatchQueue = .main) -> AnyPublisher<ReplicatorChange, Never> {
        ListenerPublisher.make(on: queue) { addChangeListener(withQueue: queue, $0) }
    }

    /// A Combine publisher of the documents this replicator pushes and pulls, delivered on `queue` (Couchbase Lite's
    /// `documentReplicationPublisher(on:)`). Cancelling the subscription removes the listener.
    public func documentReplicationPublisher(on queue: DispatchQueue = .main) -> AnyPublisher<DocumentReplication, Never> {
        ListenerPublisher.make(on: queue) { addDocumentReplicationListener(withQueue: queue, $0) }
    }
}
#endif
