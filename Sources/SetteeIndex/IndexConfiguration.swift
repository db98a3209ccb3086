import Foundation
package import SetteeCore
public import SetteeSQLPP
import SetteeVector

/// What an index is: its kind and its expressions, as stored in the `indexes` registry and as the HTTP API
/// (`PUT /{db}/_indexes/{name}`) takes it.
///
/// The JSON form: `{"type": "value", "expressions": ["type", "name"], "where": "type = 'hotel'"}`.
package struct IndexSpec: Sendable, Hashable {
    /// The index kinds.
    public enum Kind: String, Sendable, Hashable {
        case value
        case fullText = "fulltext"
        case array
        case vector
    }
    public var kind: Kind
    /// The indexed expressions, parsed (for an array index: evaluated on each element; empty indexes the element).
    public var expressions: [SQLExpression]
    /// A partial index's condition; nil indexes every document.
    public var whereClause: SQLExpression?
    /// Full-text: fold accents (`é` matches `e`).
    public var ignoreAccents = false
    /// Full-text: the stemming language (`en`), or nil for none.
    public var language: String?
    /// Array: the path to the array, `[]` after each array level before the last (`contacts[].phones`).
    public var arrayPath: String?
    /// Vector: dimensions, centroids, metric, encoding, probes, training sizes, laziness.
    public var vector: VectorIndexOptions?

    /// The languages full-text indexes can stem: English through FTS5's Porter stemmer.
    public static let stemmingLanguages: Set<String> = ["en", "english"]

    /// The array path split into its levels (`contacts[].phones` → `[contacts], [phones]`).
    public private(set) var arrayLevels: [[PathComponent]] = []

    public init(kind: Kind, expressions: [SQLExpression], whereClause: SQLExpression? = nil, ignoreAccents: Bool = false,
                language: String? = nil, arrayPath: String? = nil,
                vector: VectorIndexOptions? = nil) throws(SetteeError) {
        self.ignoreAccents = ignoreAccents
        self.language = language.flatMap { $0.isEmpty ? nil : $0.lowercased() }
        self.arrayPath = arrayPath
        self.arrayLevels = arrayPath.map { IndexSpec.levels($0).filter { !$0.isEmpty } } ?? []
        if kind == .fullText, let lang = self.language, !IndexSpec.stemmingLanguages.contains(lang) {
            throw SetteeError(.badRequest, "Unsupported full-text language '\(lang)': Settee stems English (\"en\") with FTS5's Porter stemmer; use no language for other languages (words are matched without stemming)")
        }
        if kind == .array && whereClause != nil {
            throw SetteeError(.badRequest, "Array indexes take no \"where\" (Couchbase Lite's ArrayIndexConfiguration has none)")
        }
        if kind == .array {
            guard let path = arrayPath, !path.isEmpty, !path.hasPrefix("[]"), !path.contains("[][]"),
                  !IndexSpec.levels(path).contains(where: \.isEmpty),
                  IndexSpec.levels(path).allSatisfy({ $0.allSatisfy { if case .key = $0 { return true }; return false } }) else {
                let path = arrayPath ?? ""
                var offset = 0
                if let r = path.range(of: "[][]") { offset = path.utf8.distance(from: path.startIndex, to: r.lowerBound) }
                else if let r = path.range(of: "..") { offset = path.utf8.distance(from: path.startIndex, to: r.lowerBound) }
                else if let r = path.range(of: "[].", options: .backwards), r.upperBound == path.endIndex { offset = path.utf8.distance(from: path.startIndex, to: r.lowerBound) }
                throw SetteeError(.queryParseError, "Invalid array index path '\(path)' at offset \(offset): expected property names with [] after each nested array level, e.g. contacts[].phones")
            }
        } else {
            guard !expressions.isEmpty else { throw SetteeError(.badRequest, "An index needs at least one expression") }
        }
        if kind == .vector {
            guard let vector else { throw SetteeError(.badRequest, "A vector index needs dimensions and centroids") }
            guard expressions.count == 1 else {
                throw SetteeError(.badRequest, "A vector index has exactly one expression (the vector), got \(expressions.count)")
            }
            try vector.validate()
            self.vector = vector
        }
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

    private static func levels(_ path: String) -> [[PathComponent]] {
        var trimmed = path
        if trimmed.hasSuffix("[]") { trimmed.removeLast(2) }
        return trimmed.components(separatedBy: "[]").map { level in
            PathParser.components(level.hasPrefix(".") ? String(level.dropFirst()) : level)
        }
    }

    /// The JSON form, with expressions as SQL++ text.
    public var json: JSON {
        var pairs: [(String, JSON)] = [("type", .string(kind.rawValue))]
        if let arrayPath { pairs.append(("path", .string(arrayPath))) }
        pairs.append(("expressions", .array(expressions.map { .string($0.description) })))
        if let whereClause { pairs.append(("where", .string(whereClause.description))) }
        if kind == .fullText {
            pairs.append(("ignoreAccents", .bool(ignoreAccents)))
            pairs.append(("language", language.map(JSON.string) ?? .null))
        }
        if let vector { pairs += vector.jsonPairs }
        return .object(JSONObject(pairs))
    }

    /// Reads the JSON form; expressions are SQL++ text (a string with commas, or an array of strings).
    public init(json: JSON) throws(SetteeError) {
        guard case .object(let o) = json else { throw SetteeError(.badRequest, "An index definition must be a JSON object") }
        let type = o["type"]?.stringValue ?? "value"
        let kinds: [String: Kind] = ["value": .value, "fulltext": .fullText, "full-text": .fullText, "fts": .fullText,
                                     "array": .array, "vector": .vector]
        guard let kind = kinds[type.lowercased()] else {
            throw SetteeError(.badRequest, "Unknown index type '\(type)' (supported: value, fulltext, array, vector)")
        }
        var expressions: [SQLExpression] = []
        switch o["expressions"] ?? o["expression"] {
        case nil where kind == .array, .null? where kind == .array: break
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
        if let v = o["ignoreAccents"], v.boolValue == nil, !v.isNull { throw SetteeError(.badRequest, "\"ignoreAccents\" must be a boolean") }
        if let v = o["language"], v.stringValue == nil, !v.isNull { throw SetteeError(.badRequest, "\"language\" must be a string") }
        if let v = o["path"], v.stringValue == nil, !v.isNull { throw SetteeError(.badRequest, "\"path\" must be a string") }
        try self.init(kind: kind, expressions: expressions, whereClause: whereClause,
                      ignoreAccents: o["ignoreAccents"]?.boolValue ?? false, language: o["language"]?.stringValue,
                      arrayPath: o["path"]?.stringValue,
                      vector: kind == .vector ? try VectorIndexOptions(json: o) : nil)
    }
}

/// Something that can be turned into an index definition: ``ValueIndexConfiguration`` or an
/// ``IndexBuilder`` index.
///
/// Only Settee's configurations conform (as in Couchbase Lite, an app uses them rather than making its own): each
/// describes its definition through ``IndexSpecifying``, which is Settee's own.
public protocol IndexConfiguration: Sendable {}

/// A configuration's index definition, for the index manager: what every ``IndexConfiguration`` of Settee's is.
package protocol IndexSpecifying: IndexConfiguration {
    /// The definition this configuration describes; throws for expressions that do not parse.
    func makeIndexSpec() throws(SetteeError) -> IndexSpec
}

extension IndexConfiguration {
    /// The definition this configuration describes; throws for expressions that do not parse, and for a
    /// configuration of an app's own type (it describes no index).
    package func indexSpec() throws(SetteeError) -> IndexSpec {
        guard let specifying = self as? any IndexSpecifying else {
            throw SetteeError(.badRequest, "\(type(of: self)) is not an index configuration of Settee's (use ValueIndexConfiguration, FullTextIndexConfiguration, ArrayIndexConfiguration, VectorIndexConfiguration or IndexBuilder)")
        }
        return try specifying.makeIndexSpec()
    }
}

/// An index built with ``IndexBuilder`` (Couchbase Lite's `Index`): ``ValueIndex`` or ``FullTextIndex``.
public protocol Index: IndexConfiguration {}

/// A value index over one or more SQL++ expressions, optionally partial (Couchbase Lite's `ValueIndexConfiguration`).
///
/// ```swift
/// try collection.createIndex(withName: "TypeNameIndex", config: ValueIndexConfiguration(["type", "name"]))
/// try collection.createIndex(withName: "HotelCityIndex",
///                            config: ValueIndexConfiguration(["city"], where: "type = \"hotel\""))
/// ```
public struct ValueIndexConfiguration: IndexConfiguration, IndexSpecifying {
    /// The indexed expressions, as SQL++ text.
    public let expressions: [String]
    /// The partial index condition, as SQL++ text.
    public let `where`: String?

    public init(_ expressions: [String], where: String? = nil) {
        self.expressions = expressions
        self.where = `where`
    }

    package func makeIndexSpec() throws(SetteeError) -> IndexSpec {
        var parsed: [SQLExpression] = []
        for e in expressions { parsed.append(try SQLPPParser.parseExpression(e)) }
        let condition = try `where`.flatMap { text throws(SetteeError) -> SQLExpression? in
            text.isEmpty ? nil : try SQLPPParser.parseExpression(text)
        }
        return try IndexSpec(kind: .value, expressions: parsed, whereClause: condition)
    }
}

/// An index built from QueryBuilder items (Couchbase Lite's `IndexBuilder.valueIndex(items:)`).
public struct ValueIndex: Index, IndexSpecifying {
    public let items: [ValueIndexItem]
    package let whereExpression: SQLExpression?

    package func makeIndexSpec() throws(SetteeError) -> IndexSpec {
        try IndexSpec(kind: .value, expressions: items.map(\.expression), whereClause: whereExpression)
    }
}

/// A full-text index over one or more string expressions, optionally partial (Couchbase Lite's
/// `FullTextIndexConfiguration`), queried with `MATCH(indexName, "terms")` and ranked with `RANK(indexName)`.
///
/// ```swift
/// try collection.createIndex(withName: "HotelDescIndex",
///     config: FullTextIndexConfiguration(["description"], where: "type = \"hotel\"", ignoreAccents: false, language: "en"))
/// ```
/// `language: "en"` stems English words (`running` matches `run`); nil matches words as they are. Other language
/// codes are rejected. `ignoreAccents: true` folds diacritics.
public struct FullTextIndexConfiguration: IndexConfiguration, IndexSpecifying {
    public let expressions: [String]
    public let `where`: String?
    public let ignoreAccents: Bool
    public let language: String?

    /// - Parameter ignoreAccents: nil for ``defaultIgnoreAccents``.
    public init(_ expressions: [String], where: String? = nil,
                ignoreAccents: Bool? = FullTextIndexConfiguration.defaultIgnoreAccents, language: String? = nil) {
        self.expressions = expressions
        self.where = `where`
        self.ignoreAccents = ignoreAccents ?? FullTextIndexConfiguration.defaultIgnoreAccents
        self.language = language
    }

    /// Couchbase Lite's default: accents are not folded.
    public static let defaultIgnoreAccents = false

    package func makeIndexSpec() throws(SetteeError) -> IndexSpec {
        var parsed: [SQLExpression] = []
        for e in expressions { parsed.append(try SQLPPParser.parseExpression(e)) }
        let condition = try `where`.flatMap { text throws(SetteeError) -> SQLExpression? in
            text.isEmpty ? nil : try SQLPPParser.parseExpression(text)
        }
        return try IndexSpec(kind: .fullText, expressions: parsed, whereClause: condition, ignoreAccents: ignoreAccents,
                             language: language)
    }
}

/// An index of the elements of an array (Couchbase Lite's `ArrayIndexConfiguration`): one entry per element, for
/// `UNNEST` queries.
///
/// ```swift
/// try collection.createIndex(withName: "nestedArray",
///     config: ArrayIndexConfiguration(path: "contacts[].phones", expressions: ["type"]))
/// ```
/// `path` names the array, with `[]` after each array level it goes through; `expressions` (nil for arrays of
/// scalars) are evaluated on each element.
public struct ArrayIndexConfiguration: IndexConfiguration, IndexSpecifying {
    public let path: String
    public let expressions: [String]?

    public init(path: String, expressions: [String]? = nil) {
        self.path = path
        self.expressions = expressions
    }

    package func makeIndexSpec() throws(SetteeError) -> IndexSpec {
        var parsed: [SQLExpression] = []
        for e in expressions ?? [] { parsed.append(try SQLPPParser.parseExpression(e)) }
        return try IndexSpec(kind: .array, expressions: parsed, arrayPath: path)
    }
}

/// A full-text index built from QueryBuilder items (`IndexBuilder.fullTextIndex(items:)`).
public struct FullTextIndex: Index, IndexSpecifying {
    public let items: [FullTextIndexItem]
    public var isIgnoringAccents = false
    public var languageCode: String?

    /// Folds accents when `true`.
    public func ignoreAccents(_ ignore: Bool) -> FullTextIndex {
        var copy = self
        copy.isIgnoringAccents = ignore
        return copy
    }

    /// The stemming language (`"en"`), or nil for none.
    public func language(_ code: String?) -> FullTextIndex {
        var copy = self
        copy.languageCode = code
        return copy
    }

    package func makeIndexSpec() throws(SetteeError) -> IndexSpec {
        try IndexSpec(kind: .fullText, expressions: items.map(\.expression), ignoreAccents: isIgnoringAccents,
                      language: languageCode)
    }
}

/// An index of a predictive model's output (Couchbase Lite's `PredictiveIndex`): a value index on
/// `PREDICTION(model, input).property` for each property named, so queries comparing those properties read the index
/// instead of running the model on every document; without properties, on the whole output.
public struct PredictiveIndex: Index, IndexSpecifying {
    public let model: String
    package let input: SQLExpression
    public let properties: [String]?

    package func makeIndexSpec() throws(SetteeError) -> IndexSpec {
        let prediction = Function.prediction(model: model, input: BuiltInput(tree: input)).sqlExpression
        let expressions: [SQLExpression] = properties.map { names in
            names.map { .path(prediction, PathParser.components($0)) }
        } ?? [prediction]
        guard !expressions.isEmpty else { throw SetteeError(.badRequest, "A predictive index needs a property (or nil for the whole output)") }
        return try IndexSpec(kind: .value, expressions: expressions)
    }

    /// The stored input, handed back to the QueryBuilder function that builds the PREDICTION call.
    private struct BuiltInput: SQLTreeExpression {
        let tree: SQLExpression
    }
}

/// A full-text index item (Couchbase Lite's `FullTextIndexItem`).
public struct FullTextIndexItem: Sendable {
    package let expression: SQLExpression
    /// The property at `path` (`"description"`, `"info.text"`).
    public static func property(_ path: String) -> FullTextIndexItem {
        FullTextIndexItem(expression: .property(path))
    }
}

/// Builds indexes from QueryBuilder expressions.
public enum IndexBuilder {
    /// A full-text index on the given items.
    public static func fullTextIndex(items: FullTextIndexItem...) -> FullTextIndex { FullTextIndex(items: items) }
    /// A full-text index on the given items.
    public static func fullTextIndex(items: [FullTextIndexItem]) -> FullTextIndex { FullTextIndex(items: items) }
    /// A value index on the given items.
    public static func valueIndex(items: ValueIndexItem...) -> ValueIndex {
        ValueIndex(items: items, whereExpression: nil)
    }
    /// A value index on the given items.
    public static func valueIndex(items: [ValueIndexItem]) -> ValueIndex {
        ValueIndex(items: items, whereExpression: nil)
    }
    /// An index of a predictive model's output properties (all of it for nil), as `Function.prediction(model:input:)`
    /// computes it.
    public static func predictiveIndex(model: String, input: any ExpressionProtocol,
                                       properties: [String]? = nil) -> PredictiveIndex {
        PredictiveIndex(model: model, input: input.sqlExpression, properties: properties)
    }
}
