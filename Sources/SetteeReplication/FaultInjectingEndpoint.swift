import Foundation
package import SetteeCore
import Synchronization

/// Wraps an endpoint and makes some of its calls fail the way networks and servers fail: dropped connections,
/// delays, 5xx answers and truncated bodies. Tests drive the replicator's error paths with it; it is also
/// handy for trying a deployment's retry settings.
///
/// Faults are decided per call by a seeded generator, so a run is repeatable.
package final class FaultInjectingEndpoint: Endpoint, Sendable {
    /// A kind of failure.
    public enum Fault: Sendable, Equatable {
        /// The connection drops before an answer (an `.unreachable` error).
        case drop
        /// The call succeeds after a delay.
        case delay(Duration)
        /// The server answers 500.
        case serverError
        /// The answer is cut short (an unparseable body, a transient error).
        case truncated
        /// The store under a local endpoint fails (a full disk): a ``SetteeError`` `.storage`, not a replication
        /// error.
        case storageError
    }

    /// Which calls a fault applies to.
    public enum Operation: String, Sendable, CaseIterable {
        case databaseInfo, createDatabase, changes, revsDiff, fetch, write, localDocument, putLocalDocument,
             ensureFullCommit
    }

    public let base: any Endpoint
    private struct State {
        var rng: SeededGenerator
        var rules: [(operations: Set<Operation>, fault: Fault, probability: Double, remaining: Int?)] = []
        var injected: [Operation: Int] = [:]
        var offline = false
    }
    private let state: Mutex<State>
    /// When set, every call fails as if the peer were unreachable (a partition), until cleared.
    public var offline: Bool {
        get { state.withLock { $0.offline } }
        set { state.withLock { $0.offline = newValue } }
    }

    public init(_ base: any Endpoint, seed: UInt64 = 42) {
        self.base = base
        self.state = Mutex(State(rng: SeededGenerator(seed: seed)))
    }

    /// Adds a rule: calls of `operations` fail with `fault` with `probability`, at most `count` times (nil: always).
    public func inject(_ fault: Fault, on operations: Set<Operation> = Set(Operation.allCases), probability: Double = 1,
                       count: Int? = nil) {
        state.withLock { $0.rules.append((operations, fault, probability, count)) }
    }

    /// Removes every rule.
    public func clearFaults() {
        state.withLock { $0.rules.removeAll() }
    }

    /// How many faults were injected, per operation.
    public var injected: [Operation: Int] { state.withLock { $0.injected } }

    public var identity: String { base.identity }
    public var displayName: String { base.displayName }

    /// Decides this call's fault (if any), before the call.
    private func fault(for op: Operation) -> Fault? {
        state.withLock { state in
            if state.offline {
                state.injected[op, default: 0] += 1
                return .drop
            }
            for i in state.rules.indices where state.rules[i].operations.contains(op) {
                if let r = state.rules[i].remaining, r <= 0 { continue }
                guard Double(state.rng.next() % 1_000_000) / 1_000_000 < state.rules[i].probability else { continue }
                if let r = state.rules[i].remaining { state.rules[i].remaining = r - 1 }
                state.injected[op, default: 0] += 1
                return state.rules[i].fault
            }
            return nil
        }
    }

    private func call<T: Sendable>(_ op: Operation, _ body: () async throws -> T) async throws(ReplicationError) -> T {
        try await ReplicationError.mapping { try await injecting(op, body) }
    }

    /// The call with this operation's fault, if one is due. (A storage fault is the store's error, as a local
    /// endpoint's store would throw it; ``call(_:_:)`` turns it into the replication error that endpoint would.)
    private func injecting<T: Sendable>(_ op: Operation, _ body: () async throws -> T) async throws -> T {
        switch fault(for: op) {
        case nil:
            return try await body()
        case .drop:
            throw ReplicationError(.unreachable, "injected: connection dropped (\(op.rawValue))")
        case .delay(let d):
            try await Task.sleep(for: d)
            return try await body()
        case .serverError:
            throw ReplicationError(.transient, "injected: 500 internal server error (\(op.rawValue))", status: 500)
        case .storageError:
            throw SetteeError(.storage, "injected: database or disk is full (\(op.rawValue))")
        case .truncated:
            // The work may have happened on the peer before the answer was cut: do it, then lose the answer.
            _ = try await body()
            throw ReplicationError(.transient, "injected: truncated response (\(op.rawValue))")
        }
    }

    public func databaseInfo() async throws(ReplicationError) -> EndpointDatabaseInfo { try await call(.databaseInfo) { try await base.databaseInfo() } }
    public func createDatabase() async throws(ReplicationError) { try await call(.createDatabase) { try await base.createDatabase() } }
    public func changes(_ request: ChangesRequest) async throws(ReplicationError) -> ChangesBatch {
        try await call(.changes) { try await base.changes(request) }
    }
    public func revsDiff(_ revisions: [(id: String, revs: [RevID])]) async throws(ReplicationError) -> [String: RevTree.RevsDiff] {
        try await call(.revsDiff) { try await base.revsDiff(revisions) }
    }
    public func fetch(_ requests: [FetchRequest]) async throws(ReplicationError) -> [ReplicatedRevision] {
        try await call(.fetch) { try await base.fetch(requests) }
    }
    public func write(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [DocumentFailure] {
        try await call(.write) { try await base.write(revisions) }
    }
    public func localDocument(id: String) async throws(ReplicationError) -> JSONObject? {
        try await call(.localDocument) { try await base.localDocument(id: id) }
    }
    public func putLocalDocument(id: String, body: JSONObject) async throws(ReplicationError) -> String {
        try await call(.putLocalDocument) { try await base.putLocalDocument(id: id, body: body) }
    }
    public func ensureFullCommit() async throws(ReplicationError) { try await call(.ensureFullCommit) { try await base.ensureFullCommit() } }
}
