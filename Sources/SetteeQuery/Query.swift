public import Foundation
import SetteeCore
import SetteeIndex
public import SetteeSQLPP
public import SetteeStore
import Synchronization

/// A query over a database's collections, from SQL++ (``SetteeStore/Database/createQuery(_:)``) or the
/// QueryBuilder API.
///
/// ```swift
/// let query = try db.createQuery("SELECT META().id, name FROM _ WHERE type = $type ORDER BY name LIMIT 10")
/// query.parameters = Parameters().setString("hotel", forName: "type")
/// for result in try query.execute() {
///     print(result.string(forKey: "id")!, result.string(forKey: "name") ?? "")
/// }
/// print(try query.explain())   // shows which index serves the WHERE
/// ```
///
/// Executing never changes documents; it first brings the indexes it uses up to date with the change feed.
// @unchecked: not final (QueryBuilder's clause classes subclass it, as Couchbase Lite's do), so the compiler can't
// check it; its mutable state (the parameters, the live listeners) is in a Mutex, everything else is immutable.
public class Query: @unchecked Sendable {
    public let database: Database
    /// The statement this query runs.
    package let statement: SelectStatement
    /// Values for `$name` parameters.
    public var parameters: Parameters? {
        get { state.withLock { $0.parameters } }
        set { state.withLock { $0.parameters = newValue } }
    }
    private struct State {
        var parameters: Parameters?
        /// The live queries of the listeners added, kept until each is removed.
        var listeners: [LiveQuery] = []
    }
    private let state = Mutex(State())

    /// The SQL++ text, when the query was made from text (errors then name positions in it).
    let text: String?

    package init(database: Database, statement: SelectStatement, text: String?) {
        self.database = database
        self.statement = statement
        self.text = text
    }

    package convenience init(database: Database, statement: SelectStatement) {
        self.init(database: database, statement: statement, text: nil)
    }

    /// The column names of the result rows, in SELECT order.
    public func columnNames() throws -> [String] {
        try compile().columns.map(\.name)
    }

    /// Runs the query.
    /// - Throws: ``SetteeError`` `.queryParseError` for an unknown collection or a misplaced aggregate,
    ///   `.closed` / `.storage` from the store.
    public func execute() throws -> ResultSet {
        let compiled = try compile()
        var executor = try Executor(query: compiled, parameters: parameters?.values ?? [:])
        try executor.prepareFullText()
        try executor.prepareVectorSearch()
        return try executor.run()
    }

    /// How the query runs: the statement, the access path of each data source, and SQLite's
    /// `EXPLAIN QUERY PLAN` for it — the index named there is the one serving the WHERE.
    public func explain() throws -> String {
        let compiled = try compile()
        return try Executor(query: compiled, parameters: parameters?.values ?? [:]).explain()
    }

    /// Calls `listener` with fresh results now and whenever a commit changes one of the query's collections
    /// and the results differ (Couchbase Lite's live query).
    @discardableResult
    public func addChangeListener(queue: DispatchQueue? = nil,
                                  _ listener: @escaping @Sendable (QueryChange) -> Void) -> ListenerToken {
        let live = LiveQuery(query: self, queue: queue ?? DispatchQueue(label: "settee.live-query"), listener: listener)
        state.withLock { $0.listeners.append(live) }
        live.start()
        return ListenerToken { [weak self, weak live] in
            live?.stop()
            self?.state.withLock { $0.listeners.removeAll { $0 === live } }
        }
    }

    /// Couchbase Lite's spelling of ``addChangeListener(queue:_:)``.
    @discardableResult
    public func addChangeListener(withQueue queue: DispatchQueue?,
                                  _ listener: @escaping @Sendable (QueryChange) -> Void) -> ListenerToken {
        addChangeListener(queue: queue, listener)
    }

    /// Stops a live-query listener (the same as `token.remove()`).
    public func removeChangeListener(withToken token: ListenerToken) { token.remove() }

    private let cache = CompiledCache()

    /// The statement bound to the database; kept while its collections still exist (a deleted or re-created
    /// collection compiles again).
    func compile() throws -> CompiledQuery {
        if let cached = cache.get(), try cached.isCurrent() { return cached }
        let fresh = try CompiledQuery(database: database, statement: statement, text: text)
        cache.set(fresh)
        return fresh
    }
}

/// The last compilation of a query.
final class CompiledCache: Sendable {
    private let value = Mutex<CompiledQuery?>(nil)
    func get() -> CompiledQuery? { value.withLock { $0 } }
    func set(_ v: CompiledQuery) { value.withLock { $0 = v } }
}

/// Something SQL++ queries are made from (Couchbase Lite's `QueryFactory`): a ``Database``.
public protocol QueryFactory {
    func createQuery(_ query: String) throws -> Query
}

extension Query: CustomStringConvertible {
    /// The query as SQL++ text: as written, or printed from the QueryBuilder statement.
    public var description: String { "\(type(of: self))[\(text ?? statement.description)]" }
}

extension Database: QueryFactory {
    /// Parses a SQL++ query (Couchbase Lite's `createQuery(_:)`).
    ///
    /// - Throws: ``SetteeError`` `.queryParseError` naming the position for a syntax error, an unknown function
    ///   or an unknown collection.
    public func createQuery(_ sql: String) throws -> Query {
        let statement = try SQLPPParser.parseSelect(sql)
        let query = Query(database: self, statement: statement, text: sql)
        _ = try query.compile()
        return query
    }
}

/// What changed for a live query listener: the new results, or the error re-running it.
public struct QueryChange: Sendable {
    public let query: Query
    public let results: ResultSet?
    public let error: (any Error)?
}

/// Re-runs a query after commits touching its collections and reports when the rows changed.
final class LiveQuery: Sendable {
    private struct State {
        /// Held until the listener is removed, as Couchbase Lite's database keeps an active live query: an app
        /// need not keep its `Query` for the listener to go on.
        var query: Query?
        var tokens: [ListenerToken] = []
        /// The rows last reported.
        var last: [JSON]?
        var stopped = false
        /// A rerun is queued.
        var pending = false
    }
    private let state: Mutex<State>
    private var query: Query? { state.withLock { $0.query } }
    private let queue: DispatchQueue
    private let listener: @Sendable (QueryChange) -> Void

    init(query: Query, queue: DispatchQueue, listener: @escaping @Sendable (QueryChange) -> Void) {
        self.state = Mutex(State(query: query))
        self.queue = queue
        self.listener = listener
    }

    func start() {
        guard let query, let compiled = try? query.compile() else {
            queue.async { [self] in
                guard let query = self.query else { return }
                do { _ = try query.compile() } catch { listener(QueryChange(query: query, results: nil, error: error)) }
            }
            return
        }
        let added = compiled.collections.map { collection in
            collection.addChangeListener(queue: queue) { [weak self] _ in self?.schedule() }
        }
        // Stopped meanwhile (removed while the query compiled): the listeners just added go at once.
        let unwanted = state.withLock { state -> [ListenerToken] in
            if state.stopped { return added }
            state.tokens += added
            return []
        }
        guard unwanted.isEmpty else {
            unwanted.forEach { $0.remove() }
            return
        }
        schedule()
    }

    func stop() {
        let removed = state.withLock { state -> [ListenerToken] in
            state.stopped = true
            state.query = nil
            defer { state.tokens = [] }
            return state.tokens
        }
        removed.forEach { $0.remove() }
    }

    private func schedule() {
        let go = state.withLock { state -> Bool in
            if state.stopped || state.pending { return false }
            state.pending = true
            return true
        }
        guard go else { return }
        queue.async { [weak self] in self?.rerun() }
    }

    private func rerun() {
        let query = state.withLock { state -> Query? in
            state.pending = false
            return state.stopped ? nil : state.query
        }
        guard let query else { return }
        do {
            let results = try query.execute()
            let rows = results.rows.map { JSON.object($0.jsonObject) }
            let changed = state.withLock { state -> Bool in
                guard rows != state.last else { return false }
                state.last = rows
                return true
            }
            if changed { listener(QueryChange(query: query, results: results, error: nil)) }
        } catch {
            listener(QueryChange(query: query, results: nil, error: error))
        }
    }
}
