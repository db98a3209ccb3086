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

/// Couchbase Lite's publishers over Settee's listeners: each event a listener hears is published on `queue`, and
/// cancelling the subscription removes the listener.
package enum ListenerPublisher {
    package static func make<Output>(on queue: DispatchQueue,
                                     _ addListener: (@escaping @Sendable (Output) -> Void) -> ListenerToken)
        -> AnyPublisher<Output, Never> {
        let box = SubjectBox<Output, Never>()
        let token = addListener { event in box.subject.send(event) }
        return box.subject
            .receive(on: queue)
            .handleEvents(receiveCancel: { token.remove() })
            .eraseToAnyPublisher()
    }
}

extension Collection {
    /// A Combine publisher of this collection's changes, delivered on `queue` (Couchbase Lite's
    /// `changePublisher(on:)`). Cancelling the subscription removes the listener.
    public func changePublisher(on queue: DispatchQueue = .main) -> AnyPublisher<CollectionChange, Never> {
        ListenerPublisher.make(on: queue) { addChangeListener(queue: queue, listener: $0) }
    }

    /// A Combine publisher of one document's changes, delivered on `queue` (Couchbase Lite's
    /// `documentChangePublisher(for:on:)`). Cancelling the subscription removes the listener.
    public func documentChangePublisher(for id: String,
                                        on queue: DispatchQueue = .main) -> AnyPublisher<DocumentChange, Never> {
        ListenerPublisher.make(on: queue) { addDocumentChangeListener(id: id, queue: queue, listener: $0) }
    }
}
#endif
