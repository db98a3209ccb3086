import SetteeCore
import SetteeSQLPP

/// What an index is: its kind and its expressions, as stored in the `indexes` registry and as the HTTP API
/// (`PUT /{db}/_index/{name}`) takes it.
///
/// The JSON form: `{"type": "value", "expressions": ["type", "name"], "where": "type = 'hotel'"}`.
public struct IndexSpec: Sendable, Hashable {
    /// The index kinds.
    public enum Kind: String, Sendable, Hashable {
        case value
    }
    public var kind: Kind
    /// The indexed expressions, parsed.
    public var expressions: [SQLExpression]
    /// A partial index's condition; nil indexes every document.
    public var whereClause: SQLExpression?

    public init(kind: Kind, expressions: [SQLExpression], whereClause: SQLExpression? = nil) throws(SetteeError) {
        guard !expressions.isEmpty else { throw SetteeError(.badRequest, "An index needs at least one expression") }
        for e in expressions + (whereClause.map { [$0] } ?? []) {
            var problem: String?
            e.visit { node in
                switch node {
                case .parameter(let name): problem = "an index cannot use the parameter $\(name)"
                case .function(let name, _, _) where FunctionLibrary.aggregates.contains(name):
                    problem = "an index cannot use the aggregate \(name)()"
                case .meta(_, .sequence), .meta(_, .revisionID), .meta(_, .deleted), .meta(_, .expiration):
                    problem = "an index can use META().id only"
                case .star: problem = "an index cannot use *"
                default: break
                }
            }
            if let problem { throw SetteeError(.queryParseError, "Invalid index expression \(e): \(problem)") }
        }
        self.kind = kind
        self.expressions = expressions
        self.whereClause = whereClause
    }

    /// The JSON form, with expressions as SQL++ text.
    public var json: JSON {
        var pairs: [(String, JSON)] = [("type", .string(kind.rawValue)),
                                       ("expressions", .array(expressions.map { .string($0.description) }))]
        if let whereClause { pairs.append(("where", .string(whereClause.description))) }
        return .object(JSONObject(pairs))
    }

    /// Reads the JSON form; expressions are SQL++ text (a string with commas, or an array of strings).
    public init(json: JSON) throws(SetteeError) {
        guard case .object(let o) = json else { throw SetteeError(.badRequest, "An index definition must be a JSON object") }
        let type = o["type"]?.stringValue ?? "value"
        guard let kind = Kind(rawValue: type) else {
            throw SetteeError(.badRequest, "Unknown index type '\(type)' (supported: value)")
        }
        var expressions: [SQLExpression] = []
        switch o["expressions"] {
        case .string(let text)?: expressions = try SQLPPParser.parseExpressionList(text)
        case .array(let items)?:
            for item in items {
                guard case .string(let text) = item else {
                    throw SetteeError(.badRequest, "Index expressions must be SQL++ strings")
                }
                expressions.append(try SQLPPParser.parseExpression(text))
            }
        default: throw SetteeError(.badRequest, "An index definition needs \"expressions\": [\"…\"]")
        }
        var whereClause: SQLExpression?
        switch o["where"] {
        case .string(let text)? where !text.isEmpty: whereClause = try SQLPPParser.parseExpression(text)
        case nil, .null?: break
        case .string?: break
        default: throw SetteeError(.badRequest, "\"where\" must be a SQL++ string")
        }
        try self.init(kind: kind, expressions: expressions, whereClause: whereClause)
    }
}

/// Something that can be turned into an index definition: ``ValueIndexConfiguration`` or an
/// ``IndexBuilder`` index.
public protocol IndexConfiguration: Sendable {
    /// The definition this configuration describes; throws for expressions that do not parse.
    func indexSpec() throws(SetteeError) -> IndexSpec
}

/// A value index over one or more SQL++ expressions, optionally partial (Couchbase Lite's `ValueIndexConfiguration`).
///
/// ```swift
/// try collection.createIndex(withName: "TypeNameIndex", config: ValueIndexConfiguration(["type", "name"]))
/// try collection.createIndex(withName: "HotelCityIndex",
///                            config: ValueIndexConfiguration(["city"], where: "type = \"hotel\""))
/// ```
public struct ValueIndexConfiguration: IndexConfiguration {
    /// The indexed expressions, as SQL++ text.
    public let expressions: [String]
    /// The partial index condition, as SQL++ text.
    public let `where`: String?

    public init(_ expressions: [String], where: String? = nil) {
        self.expressions = expressions
        self.where = `where`
    }

    public func indexSpec() throws(SetteeError) -> IndexSpec {
        var parsed: [SQLExpression] = []
        for e in expressions { parsed.append(try SQLPPParser.parseExpression(e)) }
        let condition = try `where`.flatMap { text throws(SetteeError) -> SQLExpression? in
            text.isEmpty ? nil : try SQLPPParser.parseExpression(text)
        }
        return try IndexSpec(kind: .value, expressions: parsed, whereClause: condition)
    }
}

/// An index built from QueryBuilder items (Couchbase Lite's `IndexBuilder.valueIndex(items:)`).
public struct ValueIndex: IndexConfiguration {
    public let items: [ValueIndexItem]
    public let whereExpression: SQLExpression?

    public func indexSpec() throws(SetteeError) -> IndexSpec {
        try IndexSpec(kind: .value, expressions: items.map(\.expression), whereClause: whereExpression)
    }
}

/// Builds indexes from QueryBuilder expressions.
public enum IndexBuilder {
    /// A value index on the given items.
    public static func valueIndex(items: ValueIndexItem...) -> ValueIndex {
        ValueIndex(items: items, whereExpression: nil)
    }
    /// A value index on the given items.
    public static func valueIndex(items: [ValueIndexItem]) -> ValueIndex {
        ValueIndex(items: items, whereExpression: nil)
    }
}
