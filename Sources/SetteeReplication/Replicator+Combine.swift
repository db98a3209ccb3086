#if canImport(Combine)
import Combine
import Foundation
import SetteeStore

extension Replicator {
    /// A Combine publisher of this replicator's status changes, delivered on `queue` (Couchbase Lite's
    /// `changePublisher(on:)`). Cancelling the subscription removes the listener.
    public func changePublisher(on queue: DispatchQueue = .main) -> AnyPublisher<ReplicatorChange, Never> {
        let box = SubjectBox<ReplicatorChange, Never>()
        let token = addChangeListener(withQueue: queue) { change in box.subject.send(change) }
        return box.subject
            .receive(on: queue)
            .handleEvents(receiveCancel: { token.remove() })
            .eraseToAnyPublisher()
    }

    /// A Combine publisher of the documents this replicator pushes and pulls, delivered on `queue` (Couchbase Lite's
    /// `documentReplicationPublisher(on:)`). Cancelling the subscription removes the listener.
    public func documentReplicationPublisher(on queue: DispatchQueue = .main) -> AnyPublisher<DocumentReplication, Never> {
        let box = SubjectBox<DocumentReplication, Never>()
        let token = addDocumentReplicationListener(withQueue: queue) { replication in box.subject.send(replication) }
        return box.subject
            .receive(on: queue)
            .handleEvents(receiveCancel: { token.remove() })
            .eraseToAnyPublisher()
    }
}
#endif
