#if canImport(Combine)
import Combine
import Foundation
import SetteeStore

extension Query {
    /// A Combine publisher of this query's results, first the current ones and then each change, delivered on
    /// `queue` (Couchbase Lite's `changePublisher(on:)`). Cancelling the subscription removes the listener.
    public func changePublisher(on queue: DispatchQueue = .main) -> AnyPublisher<QueryChange, Never> {
        ListenerPublisher.make(on: queue) { addChangeListener(queue: queue, $0) }
    }
}
#endif
