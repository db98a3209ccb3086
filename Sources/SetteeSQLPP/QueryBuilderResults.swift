import SetteeCore

// Couchbase Lite's `SelectResult`, `Ordering` and `ValueIndexItem`: what a QueryBuilder query returns, how it
// orders, and what a value index holds.

// MARK: - SelectResult

/// An item of a query's SELECT list (Couchbase Lite's `SelectResultProtocol`).
public protocol SelectResultProtocol: Sendable {}

/// What Settee's SELECT-list items are: the SQL++ item (Settee's own, not API).
package protocol SelectItemCarrying: SelectResultProtocol {
    var selectItem: SelectItem { get }
}

extension SelectResultProtocol {
    /// The SELECT-list item.
    package var item: SelectItem {
        builderConformance(of: self, as: (any SelectItemCarrying).self, "SelectResultProtocol", use: "SelectResult").selectItem
    }
}

/// A SELECT-list item that can be given a result key (Couchbase Lite's `SelectResultAs`).
public protocol SelectResultAs: SelectResultProtocol {
    /// The same item under the result key `alias`.
    func `as`(_ alias: String?) -> any SelectResultProtocol
}

/// The `*` SELECT-list item, which can be narrowed to one source (Couchbase Lite's `SelectResultFrom`).
public protocol SelectResultFrom: SelectResultProtocol {
    /// The whole document of the data source with the given alias (`alias.*`).
    func from(_ alias: String?) -> any SelectResultProtocol
}

/// A SELECT-list item (Couchbase Lite's `SelectResult`).
///
/// ```swift
/// SelectResult.all()                          // the whole document, under the source's name
/// SelectResult.property("name")               // key "name"
/// SelectResult.expression(Meta.id).as("metaId")
/// SelectResult.expression(Function.count(Expression.all())).as("mycount")
/// ```
///
/// Without ``as(_:)``, a property's result key is the last component of its path (`"geo.alt"` → `"alt"`),
/// and another expression's is `$1`, `$2`, … by position; the executor assigns these.
public struct SelectResult: SelectResultAs, SelectResultFrom, SelectItemCarrying {
    /// The SELECT-list item.
    package var item: SelectItem
    package var selectItem: SelectItem { item }

    /// Wraps a SELECT-list item.
    package init(_ item: SelectItem) { self.item = item }

    /// All properties of the document (`*`), as one dictionary under the data source's alias or collection name.
    public static func all() -> SelectResult {
        SelectResult(SelectItem(.all(source: nil)))
    }

    /// A property by path (see ``Expression/property(_:)``).
    public static func property(_ property: String) -> SelectResult {
        SelectResult(SelectItem(.expression(.property(source: nil, path: PathParser.components(property)))))
    }

    /// Any expression. `Expression.all()` is the same as ``all()``, and `Expression.all().from(alias)`
    /// the same as `all().from(alias)`.
    public static func expression(_ expression: any ExpressionProtocol) -> SelectResult {
        switch expression.sqlExpression {
        case .star: return SelectResult(SelectItem(.all(source: nil)))
        case .property(let source?, let path) where path.isEmpty: return SelectResult(SelectItem(.all(source: source)))
        case let e: return SelectResult(SelectItem(.expression(e)))
        }
    }

    /// The same item under the result key `alias` (`AS alias`).
    public func `as`(_ alias: String?) -> any SelectResultProtocol {
        var copy = self
        copy.item.alias = alias
        return copy
    }

    /// For ``all()``: all properties of the data source with the given alias only (`alias.*`).
    /// Other items are returned unchanged.
    public func from(_ alias: String?) -> any SelectResultProtocol {
        guard case .all = item.kind else { return self }
        var copy = self
        copy.item.kind = .all(source: alias)
        return copy
    }
}

// MARK: - Ordering

/// An ORDER BY item (Couchbase Lite's `OrderingProtocol`).
public protocol OrderingProtocol: Sendable {}

/// What Settee's ORDER BY items are: the SQL++ item (Settee's own, not API).
package protocol OrderItemCarrying: OrderingProtocol {
    var orderItem: OrderItem { get }
}

extension OrderingProtocol {
    /// The ORDER BY item.
    package var item: OrderItem {
        builderConformance(of: self, as: (any OrderItemCarrying).self, "OrderingProtocol", use: "Ordering").orderItem
    }
}

/// An ORDER BY item whose direction can be chosen (Couchbase Lite's `QuerySortOrder`).
public protocol QuerySortOrder: OrderingProtocol {
    /// Smallest first (the default).
    func ascending() -> any OrderingProtocol
    /// Largest first.
    func descending() -> any OrderingProtocol
}

/// An ORDER BY item (Couchbase Lite's `Ordering`); ascending unless ``descending()`` is called.
///
/// ```swift
/// .orderBy(Ordering.property("title").ascending(), Ordering.expression(Meta.sequence).descending())
/// ```
public struct Ordering: QuerySortOrder, OrderItemCarrying {
    /// The ORDER BY item.
    package var item: OrderItem
    package var orderItem: OrderItem { item }

    /// Wraps an ORDER BY item.
    package init(_ item: OrderItem) { self.item = item }

    /// Orders by a property path (see ``Expression/property(_:)``).
    public static func property(_ property: String) -> Ordering {
        Ordering(OrderItem(.property(source: nil, path: PathParser.components(property))))
    }

    /// Orders by an expression.
    public static func expression(_ expression: any ExpressionProtocol) -> Ordering {
        Ordering(OrderItem(expression.sqlExpression))
    }

    /// Smallest first.
    public func ascending() -> any OrderingProtocol {
        var copy = self
        copy.item.descending = false
        return copy
    }

    /// Largest first.
    public func descending() -> any OrderingProtocol {
        var copy = self
        copy.item.descending = true
        return copy
    }
}

// MARK: - ValueIndexItem

/// A key of a value index (Couchbase Lite's `ValueIndexItem`).
public struct ValueIndexItem: Sendable, Hashable {
    /// The indexed expression.
    package let expression: SQLExpression

    /// Wraps an indexed expression.
    package init(_ expression: SQLExpression) { self.expression = expression }

    /// Indexes a property path (see ``Expression/property(_:)``).
    public static func property(_ property: String) -> ValueIndexItem {
        ValueIndexItem(.property(source: nil, path: PathParser.components(property)))
    }

    /// Indexes an expression.
    public static func expression(_ expression: any ExpressionProtocol) -> ValueIndexItem {
        ValueIndexItem(expression.sqlExpression)
    }
}

/// An index named in a query function (Couchbase Lite's `IndexExpressionProtocol`).
public protocol IndexExpressionProtocol: Sendable {
    /// The index's name.
    var name: String { get }
}

/// A full-text index named in `MATCH` / `RANK` (Couchbase Lite's `FullTextIndexExpressionProtocol`).
public protocol FullTextIndexExpressionProtocol: IndexExpressionProtocol {
    /// The same index read through the data source `alias`.
    func from(_ alias: String) -> any IndexExpressionProtocol
}

/// A full-text index named in `MATCH` / `RANK` (what ``Expression/fullTextIndex(_:)`` returns).
public struct FullTextIndexExpression: FullTextIndexExpressionProtocol {
    public let name: String
    /// `alias.index` when the query joins several sources.
    public let source: String?
    /// The same index read through the data source `alias`.
    public func from(_ alias: String) -> any IndexExpressionProtocol { FullTextIndexExpression(name: name, source: alias) }
}

extension IndexExpressionProtocol {
    var argument: SQLExpression { .literal(.string(name)) }
}

extension Expression {
    /// Names a full-text index for `FullTextFunction.match` / `rank`.
    public static func fullTextIndex(_ name: String) -> FullTextIndexExpression {
        FullTextIndexExpression(name: name, source: nil)
    }
}

/// Full-text functions (Couchbase Lite's `FullTextFunction`): `MATCH(index, query)` and `RANK(index)`.
///
/// ```swift
/// .where(FullTextFunction.match(Expression.fullTextIndex("desc"), query: "pool NOT spa"))
/// .orderBy(Ordering.expression(FullTextFunction.rank(Expression.fullTextIndex("desc"))).descending())
/// ```
/// `RANK` is FTS5's bm25 score negated, so higher is more relevant: order by it descending for best first.
public enum FullTextFunction {
    /// True for documents the full-text index matches with `query` (FTS5 syntax: terms, "phrases", prefix*,
    /// AND/OR/NOT, NEAR, parentheses).
    public static func match(_ index: any IndexExpressionProtocol, query: String) -> any ExpressionProtocol {
        BuiltExpression( .function("MATCH", [index.argument, .literal(.string(query))], distinct: false))
    }
    /// `match` with the index given by name.
    public static func match(withIndex indexName: String, query: String) -> any ExpressionProtocol {
        match(Expression.fullTextIndex(indexName), query: query)
    }
    /// `match` with the query given as an expression (a parameter).
    public static func match(_ index: any IndexExpressionProtocol, query: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression( .function("MATCH", [index.argument, query.sqlExpression], distinct: false))
    }
    /// The relevance of the match (higher is better).
    public static func rank(_ index: any IndexExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression( .function("RANK", [index.argument], distinct: false))
    }
    /// `rank` with the index given by name.
    public static func rank(withIndex indexName: String) -> any ExpressionProtocol {
        rank(Expression.fullTextIndex(indexName))
    }
    /// Couchbase Lite's deprecated `rank(_:)` by index name.
    @available(*, deprecated, message: "Use FullTextFunction.rank(_ index: IndexExpressionProtocol)")
    public static func rank(_ indexName: String) -> any ExpressionProtocol {
        rank(Expression.fullTextIndex(indexName))
    }
    /// Couchbase Lite's deprecated `match(indexName:query:)`.
    @available(*, deprecated, message: "Use FullTextFunction.match(_ index: IndexExpressionProtocol, query:)")
    public static func match(indexName: String, query: String) -> any ExpressionProtocol {
        match(Expression.fullTextIndex(indexName), query: query)
    }
}

/// A full-text index waiting for its query (Couchbase Lite's deprecated `FullTextExpressionProtocol`).
public protocol FullTextExpressionProtocol {
    /// `MATCH(index, query)`.
    func match(_ query: String) -> any ExpressionProtocol
}

/// Couchbase Lite's deprecated full-text expression: `FullTextExpression.index("desc").match("pool")`.
public enum FullTextExpression {
    @available(*, deprecated, message: "Use FullTextFunction.match(_:query:)")
    public static func index(_ name: String) -> any FullTextExpressionProtocol { NamedFullTextIndex(name: name) }

    struct NamedFullTextIndex: FullTextExpressionProtocol {
        let name: String
        func match(_ query: String) -> any ExpressionProtocol {
            FullTextFunction.match(Expression.fullTextIndex(name), query: query)
        }
    }
}
