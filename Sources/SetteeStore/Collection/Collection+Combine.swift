#if canImport(Combine)
import Combine
import Foundation

/// Hands a Combine subject to `@Sendable` listener closures.
// @unchecked: Combine's subjects may be sent to from any thread (their `send` is serialized internally); the box
// only carries one across the listener's `@Sendable` boundary.
package final class SubjectBox<Output, Failure: Error>: @unchecked Sendable {
    package let subject = PassthroughSubject<Output, Failure>()
    package init() {}
}

extension Collection {
    /// A Combine publisher of this collection's changes, delivered on `queue` (Couchbase Lite's
    /// `changePublisher(on:)`). Cancelling the subscription removes the listener.
    public func changePublisher(on queue: DispatchQueue = .main) -> AnyPublisher<CollectionChange, Never> {
        let box = SubjectBox<CollectionChange, Never>()
        let token = addChangeListener(queue: queue) { change in box.subject.send(change) }
        return box.subject
            .receive(on: queue)
            .handleEvents(receiveCancel: { token.remove() })
            .eraseToAnyPublisher()
    }

    /// A Combine publisher of one document's changes, delivered on `queue` (Couchbase Lite's
    /// `documentChangePublisher(for:on:)`). Cancelling the subscription removes the listener.
    public func documentChangePublisher(for id: String,
                                        on queue: DispatchQueue = .main) -> AnyPublisher<DocumentChange, Never> {
        let box = SubjectBox<DocumentChange, Never>()
        let token = addDocumentChangeListener(id: id, queue: queue) { change in box.subject.send(change) }
        return box.subject
            .receive(on: queue)
            .handleEvents(receiveCancel: { token.remove() })
            .eraseToAnyPublisher()
    }
}
#endif
