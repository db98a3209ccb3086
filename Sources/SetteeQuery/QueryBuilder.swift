public import Foundation
import SetteeCore
public import SetteeSQLPP
public import SetteeStore

// The statement half of the QueryBuilder API, in the shape of Couchbase Lite's Swift API:
// `QueryBuilder.select(…).from(…).join(…).where(…).groupBy(…).having(…).orderBy(…).limit(…)`.
// Each step copies the ``SelectStatement`` built so far into a new ``Query`` subclass, so every step
// after `from` can be executed.

// MARK: - DataSource

/// The collection a query reads, in FROM or JOIN (Couchbase Lite's `DataSourceProtocol`).
public protocol DataSourceProtocol: Sendable {
    /// The database holding the collection.
    var database: Database { get }
}

/// What Settee's data sources are: the SQL++ collection reference (Settee's own, not API).
package protocol SourceRefCarrying: DataSourceProtocol {
    var collectionReference: SourceRef { get }
}

extension DataSourceProtocol {
    /// The collection reference, with its alias if one was given.
    package var sourceRef: SourceRef {
        builderConformance(of: self, as: (any SourceRefCarrying).self, "DataSourceProtocol", use: "DataSource").collectionReference
    }
}

/// A data source that can be given an alias (Couchbase Lite's `DataSourceAs`).
public protocol DataSourceAs: DataSourceProtocol {
    /// The same collection under `alias`, the name that ``Expression/property(_:)``'s `.from(alias)`,
    /// `Meta.id.from(alias)` and `SelectResult.all().from(alias)` refer to.
    func `as`(_ alias: String) -> any DataSourceProtocol
}

/// A query's data source: a collection (Couchbase Lite's `DataSource`).
///
/// ```swift
/// QueryBuilder.select(SelectResult.all()).from(DataSource.collection(hotels).as("hotel"))
/// ```
public struct DataSource: DataSourceAs, SourceRefCarrying {
    /// The collection reference, with its alias if one was given.
    package let sourceRef: SourceRef
    package var collectionReference: SourceRef { sourceRef }
    /// The database holding the collection.
    public let database: Database

    /// Reads the documents of `collection`. Rows of `SelectResult.all()` put each document under the
    /// collection's name — the database's name for the default collection, as Couchbase Lite's guide shows
    /// (`{"travel-sample": {…}}`) — unless an alias is given with ``as(_:)``.
    /// The database's default collection (Couchbase Lite's deprecated `DataSource.database(_:)`).
    @available(*, deprecated, message: "Use DataSource.collection(_:)")
    public static func database(_ database: Database) -> DataSource {
        DataSource(sourceRef: SourceRef(scope: nil, collection: database.name), database: database)
    }

    public static func collection(_ collection: SetteeStore.Collection) -> DataSource {
        let isDefault = collection.scopeName == "_default" && collection.name == "_default"
        return DataSource(sourceRef: SourceRef(scope: collection.scopeName == "_default" ? nil : collection.scopeName,
                                               collection: isDefault ? collection.database.name : collection.name),
                          database: collection.database)
    }

    /// The same collection under `alias`.
    public func `as`(_ alias: String) -> any DataSourceProtocol {
        var ref = sourceRef
        ref.alias = alias
        return DataSource(sourceRef: ref, database: database)
    }
}

// MARK: - Join

/// A JOIN clause (Couchbase Lite's `JoinProtocol`).
public protocol JoinProtocol: Sendable {}

/// What Settee's joins are: the SQL++ JOIN clause (Settee's own, not API).
package protocol JoinClauseCarrying: JoinProtocol {
    var clause: JoinClause { get }
}

extension JoinProtocol {
    /// The JOIN clause.
    package var joinClause: JoinClause {
        builderConformance(of: self, as: (any JoinClauseCarrying).self, "JoinProtocol", use: "Join").clause
    }
}

/// A join that still needs its ON condition (Couchbase Lite's `JoinOnProtocol`).
public protocol JoinOnProtocol: JoinProtocol {
    /// The join condition; it usually compares properties of both sources, qualified with `.from(alias)`.
    func on(_ expression: any ExpressionProtocol) -> any JoinProtocol
}

/// A finished JOIN clause.
struct BuiltJoin: JoinClauseCarrying {
    let clause: JoinClause
}

/// An inner or left outer join waiting for its ON condition.
public struct JoinOn: JoinOnProtocol, JoinClauseCarrying {
    let kind: JoinKind
    let source: SourceRef

    /// The join without a condition (every pair of rows, as a cross join).
    package var clause: JoinClause { JoinClause(kind: kind, source: source, on: nil) }

    /// The join condition.
    public func on(_ expression: any ExpressionProtocol) -> any JoinProtocol {
        BuiltJoin(clause: JoinClause(kind: kind, source: source, on: expression.sqlExpression))
    }
}

/// JOIN clauses (Couchbase Lite's `Join`).
///
/// ```swift
/// .from(DataSource.collection(airlines).as("airline"))
/// .join(Join.join(DataSource.collection(routes).as("route"))
///     .on(Meta.id.from("airline").equalTo(Expression.property("airlineid").from("route"))))
/// ```
///
/// The joined collection must belong to the same database as the FROM collection.
public enum Join {
    /// `JOIN source ON …` (inner join).
    public static func join(_ dataSource: any DataSourceProtocol) -> JoinOn {
        JoinOn(kind: .inner, source: dataSource.sourceRef)
    }

    /// `JOIN source ON …` (inner join; the same as ``join(_:)``).
    public static func innerJoin(_ dataSource: any DataSourceProtocol) -> JoinOn {
        JoinOn(kind: .inner, source: dataSource.sourceRef)
    }

    /// `LEFT OUTER JOIN source ON …`: rows of the left side without a match are kept, the right side missing.
    public static func leftJoin(_ dataSource: any DataSourceProtocol) -> JoinOn {
        JoinOn(kind: .leftOuter, source: dataSource.sourceRef)
    }

    /// `LEFT OUTER JOIN source ON …` (the same as ``leftJoin(_:)``).
    public static func leftOuterJoin(_ dataSource: any DataSourceProtocol) -> JoinOn {
        JoinOn(kind: .leftOuter, source: dataSource.sourceRef)
    }

    /// `CROSS JOIN source`: every combination of rows.
    public static func crossJoin(_ dataSource: any DataSourceProtocol) -> any JoinProtocol {
        BuiltJoin(clause: JoinClause(kind: .cross, source: dataSource.sourceRef, on: nil))
    }
}

// MARK: - QueryBuilder

/// Builds queries from Swift values instead of SQL++ text (Couchbase Lite's `QueryBuilder`).
///
/// ```swift
/// let query = QueryBuilder
///     .select(SelectResult.expression(Meta.id), SelectResult.property("name"))
///     .from(DataSource.collection(hotels))
///     .where(Expression.property("type").equalTo(Expression.string("hotel")))
///     .orderBy(Ordering.property("name").ascending())
///     .limit(Expression.int(10))
/// for result in try query.execute() { … }
/// ```
public enum QueryBuilder {
    /// `SELECT results`.
    public static func select(_ results: any SelectResultProtocol...) -> Select {
        select(results)
    }

    /// `SELECT results`.
    public static func select(_ results: [any SelectResultProtocol]) -> Select {
        Select(results: results, distinct: false)
    }

    /// `SELECT DISTINCT results`: equal rows are returned once.
    public static func selectDistinct(_ results: any SelectResultProtocol...) -> Select {
        selectDistinct(results)
    }

    /// `SELECT DISTINCT results`: equal rows are returned once.
    public static func selectDistinct(_ results: [any SelectResultProtocol]) -> Select {
        Select(results: results, distinct: true)
    }
}

/// The SELECT clause; add the data source with ``from(_:)`` to get a query (Couchbase Lite's `Select`).
public struct Select: Sendable {
    /// The statement so far (results only).
    package let statement: SelectStatement

    init(results: [any SelectResultProtocol], distinct: Bool) {
        var statement = SelectStatement()
        statement.distinct = distinct
        statement.results = results.map(\.item)
        self.statement = statement
    }

    /// `FROM dataSource`.
    public func from(_ dataSource: any DataSourceProtocol) -> From {
        var next = statement
        next.from = dataSource.sourceRef
        return From(database: dataSource.database, statement: next)
    }
}

// MARK: - Clause steps

extension Query {
    /// The next step of the builder: `make` with a changed copy of the statement, keeping the parameters.
    fileprivate func builderStep<Next: Query>(_ make: (Database, SelectStatement) -> Next,
                                              _ change: (inout SelectStatement) -> Void) -> Next {
        var next = statement
        change(&next)
        let query = make(database, next)
        query.parameters = parameters
        return query
    }

    fileprivate func builderJoin(_ joins: [any JoinProtocol]) -> Joins {
        builderStep(Joins.init(database:statement:)) { $0.joins += joins.map(\.joinClause) }
    }

    fileprivate func builderWhere(_ expression: any ExpressionProtocol) -> Where {
        builderStep(Where.init(database:statement:)) { $0.whereClause = expression.sqlExpression }
    }

    fileprivate func builderGroupBy(_ expressions: [any ExpressionProtocol]) -> GroupBy {
        builderStep(GroupBy.init(database:statement:)) { $0.groupBy = expressions.map(\.sqlExpression) }
    }

    fileprivate func builderHaving(_ expression: any ExpressionProtocol) -> Having {
        builderStep(Having.init(database:statement:)) { $0.having = expression.sqlExpression }
    }

    fileprivate func builderOrderBy(_ orderings: [any OrderingProtocol]) -> OrderBy {
        builderStep(OrderBy.init(database:statement:)) { $0.orderBy = orderings.map(\.item) }
    }

    fileprivate func builderLimit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)?) -> Limit {
        builderStep(Limit.init(database:statement:)) {
            $0.limit = limit.sqlExpression
            $0.offset = offset?.sqlExpression
        }
    }
}

// MARK: - Clause routers

/// Query steps that can add JOIN clauses (Couchbase Lite's `JoinRouter`).
public protocol JoinRouter: Query {}

extension JoinRouter {
    /// Adds JOIN clauses.
    public func join(_ joins: any JoinProtocol...) -> Joins { builderJoin(joins) }
    /// Adds JOIN clauses.
    public func join(_ joins: [any JoinProtocol]) -> Joins { builderJoin(joins) }
}

/// Query steps that can add a WHERE clause (Couchbase Lite's `WhereRouter`).
public protocol WhereRouter: Query {}

extension WhereRouter {
    /// `WHERE expression`: only rows for which the expression is true.
    public func `where`(_ expression: any ExpressionProtocol) -> Where { builderWhere(expression) }
}

/// Query steps that can add a GROUP BY clause (Couchbase Lite's `GroupByRouter`).
public protocol GroupByRouter: Query {}

extension GroupByRouter {
    /// `GROUP BY expressions`: one row per distinct combination of values.
    public func groupBy(_ expressions: any ExpressionProtocol...) -> GroupBy { builderGroupBy(expressions) }
    /// `GROUP BY expressions`: one row per distinct combination of values.
    public func groupBy(_ expressions: [any ExpressionProtocol]) -> GroupBy { builderGroupBy(expressions) }
}

/// Query steps that can add a HAVING clause (Couchbase Lite's `HavingRouter`).
public protocol HavingRouter: Query {}

extension HavingRouter {
    /// `HAVING expression`: only groups for which the expression is true.
    public func having(_ expression: any ExpressionProtocol) -> Having { builderHaving(expression) }
}

/// Query steps that can add an ORDER BY clause (Couchbase Lite's `OrderByRouter`).
public protocol OrderByRouter: Query {}

extension OrderByRouter {
    /// `ORDER BY orderings`.
    public func orderBy(_ orderings: any OrderingProtocol...) -> OrderBy { builderOrderBy(orderings) }
    /// `ORDER BY orderings`.
    public func orderBy(_ orderings: [any OrderingProtocol]) -> OrderBy { builderOrderBy(orderings) }
}

/// Query steps that can add a LIMIT clause (Couchbase Lite's `LimitRouter`).
public protocol LimitRouter: Query {}

extension LimitRouter {
    /// `LIMIT limit`: at most `limit` rows.
    public func limit(_ limit: any ExpressionProtocol) -> Limit { builderLimit(limit, offset: nil) }
    /// `LIMIT limit OFFSET offset`: at most `limit` rows, after skipping `offset` rows.
    public func limit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)?) -> Limit {
        builderLimit(limit, offset: offset)
    }
}

// MARK: - Clause steps
// Each step is a query (run it, or explain it) and offers the clauses that may follow, through its routers.

/// A query after its FROM clause (Couchbase Lite's `From`).
// @unchecked: as `Query`, its superclass; it adds no state.
public final class From: Query, JoinRouter, WhereRouter, GroupByRouter, OrderByRouter, LimitRouter, @unchecked Sendable {}

/// A query after its JOIN clauses (Couchbase Lite's `Joins`).
// @unchecked: as `Query`, its superclass; it adds no state.
public final class Joins: Query, WhereRouter, GroupByRouter, OrderByRouter, LimitRouter, @unchecked Sendable {}

/// A query after its WHERE clause (Couchbase Lite's `Where`).
// @unchecked: as `Query`, its superclass; it adds no state.
public final class Where: Query, GroupByRouter, OrderByRouter, LimitRouter, @unchecked Sendable {}

/// A query after its GROUP BY clause (Couchbase Lite's `GroupBy`).
// @unchecked: as `Query`, its superclass; it adds no state.
public final class GroupBy: Query, HavingRouter, OrderByRouter, LimitRouter, @unchecked Sendable {}

/// A query after its HAVING clause (Couchbase Lite's `Having`).
// @unchecked: as `Query`, its superclass; it adds no state.
public final class Having: Query, OrderByRouter, LimitRouter, @unchecked Sendable {}

/// A query after its ORDER BY clause (Couchbase Lite's `OrderBy`).
// @unchecked: as `Query`, its superclass; it adds no state.
public final class OrderBy: Query, LimitRouter, @unchecked Sendable {}

/// A query after its LIMIT clause (Couchbase Lite's `Limit`).
// @unchecked: as `Query`, its superclass; it adds no state.
public final class Limit: Query, @unchecked Sendable {}

extension SetteeSQLPP.Expression {
    /// A number constant from an `NSNumber` (Couchbase Lite's `Expression.number(_:)`): integers stay integers,
    /// a boolean `NSNumber` is a boolean; `nil` is `NULL`.
    public static func number(_ value: NSNumber?) -> any ExpressionProtocol {
        SetteeSQLPP.Expression.value(value.map { DocumentValue.number($0) } ?? JSON.null)
    }
}
