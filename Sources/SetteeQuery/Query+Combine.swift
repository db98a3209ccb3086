#if canImport(Combine)
import Combine
import Foundation
import SetteeStore

extension Query {
    /// A Combine publisher of this query's results, first the current ones and then each change, delivered on
    /// `queue` (Couchbase Lite's `changePublisher(on:)`). Cancelling the subscription removes the listener.
    public func changePublisher(on queue: DispatchQueue = .main) -> AnyPublisher<QueryChange, Never> {
        let box = SubjectBox<QueryChange, Never>()
        let token = addChangeListener(queue: queue) { change in box.subject.send(change) }
        return box.subject
            .receive(on: queue)
            .handleEvents(receiveCancel: { token.remove() })
            .eraseToAnyPublisher()
    }
}
#endif
