import Foundation
import Synchronization
import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore

/// The last access path chosen for a compiled query, with the index generations it was chosen under.
final class PlanCache: Sendable {
    /// What a plan was made from: the value indexes' and the Mango indexes' generations.
    struct Generation: Equatable, Sendable {
        var indexes: Int
        var mango: Int
    }
    private let entry = Mutex<(generation: Generation, path: AccessPath?)?>(nil)

    func get(_ generation: Generation) -> AccessPath?? {
        entry.withLock { e in e.flatMap { $0.generation == generation ? .some($0.path) : nil } }
    }

    func set(_ generation: Generation, _ path: AccessPath?) { entry.withLock { $0 = (generation, path) } }
}

/// A statement bound to a database: collections resolved, result columns named, the WHERE split for the planner.
final class CompiledQuery: Sendable {
    struct Column {
        enum Kind {
            case all(source: String)
            case expression(SQLExpression)
        }
        let name: String
        let kind: Kind
    }

    struct Join {
        let clause: JoinClause
        let source: BoundSource
    }

    let database: Database
    let statement: SelectStatement
    /// The access path of the FROM source, kept until an index is created or dropped.
    let planCache = PlanCache()
    /// The database's index manager.
    let indexes: IndexManager
    let primary: BoundSource?
    let joins: [Join]
    /// How many UNNEST clauses follow the joins (statement.unnests).
    let unnestCount: Int
    let aliases: Set<String>
    let columns: [Column]
    /// GROUP BY, or an aggregate anywhere in SELECT / HAVING / ORDER BY.
    let isAggregate: Bool
    /// The query asks about `META().deleted`, so tombstones are candidates too.
    let includeDeleted: Bool
    /// WHERE conjuncts that read only the primary source (applied before joins), and the rest.
    let primaryTerms: [SQLExpression]
    let otherTerms: [SQLExpression]
    /// Whether an expression other than the UNNEST ones reads the FROM document's body.
    let readsPrimaryBodyBesidesUnnest: Bool
    /// Whether anything reads `META().revisionID` (else it is not read from storage).
    let readsRevision: Bool
    /// Whether anything reads `META().expiration` (else expiration times are not looked up).
    let readsExpiration: Bool
    /// Per source name: the top-level members the query reads (nil: the whole document).
    let bodyKeys: [String: JSONMemberSelector?]
    /// What the query reads of the primary document besides its WHERE conjuncts on the primary source: the rest
    /// of the expressions (vector searches rewritten as for ``bodyKeys``), or nil when it reads the whole document.
    private let primaryReadsBesidesItsTerms: [SQLExpression]?
    private let sourceNames: [String]
    /// ORDER BY items with references to result aliases resolved to column positions.
    let ordering: [(expression: SQLExpression?, column: Int?, descending: Bool)]

    /// The top-level members of the primary document the query reads when only `terms` of its ``primaryTerms`` are
    /// evaluated on the document (an index decided the others exactly); nil: the whole document. A value index
    /// that answers `address.city = $c AND age = $a` leaves only the projection to read from each body.
    func primaryBodyKeys(evaluating terms: [SQLExpression]) -> JSONMemberSelector? {
        guard let primary = sourceNames.first, let besides = primaryReadsBesidesItsTerms else { return nil }
        let rewritten = terms.map { e in
            e.rewritten { node in
                guard case .function(VectorSearch.functionName, let args, let d) = node else { return nil }
                return .function(VectorSearch.functionName, [.missing] + args.dropFirst(), distinct: d)
            }
        }
        return PropertyUsage.topLevelKeys(of: besides + rewritten, source: primary, primary: primary,
                                          aliases: Set(sourceNames)).map(JSONMemberSelector.init)
    }

    /// Whether every collection it read is still the one of that name (not deleted, not re-created).
    func isCurrent() throws -> Bool {
        collections.allSatisfy { database.isCurrent($0) }
    }

    /// The collections the query reads (FROM, then each JOIN).
    let collections: [Collection]
    /// Whether the WHERE clause has a MATCH (full-text work before reading rows).
    let usesFullText: Bool
    /// The APPROX_VECTOR_DISTANCE calls and how they run, when the query has any.
    let vectorPlan: VectorPlan?

    init(database: Database, statement: SelectStatement, text: String? = nil) throws {
        self.database = database
        self.statement = statement
        self.indexes = try IndexManager.shared(for: database)
        guard !statement.results.isEmpty else { throw SetteeError(.queryParseError, "SELECT needs at least one result") }
        var names: [String] = []
        var primary: BoundSource?
        if let from = statement.from {
            let source = BoundSource(name: from.name, collection: try CompiledQuery.resolve(from, in: database))
            primary = source
            names.append(source.name)
        }
        var joins: [Join] = []
        for clause in statement.joins {
            let source = BoundSource(name: clause.source.name, collection: try CompiledQuery.resolve(clause.source, in: database))
            guard !names.contains(source.name) else {
                throw SetteeError(.queryParseError, "Duplicate data source name '\(source.name)': give each source its own alias")
            }
            names.append(source.name)
            joins.append(Join(clause: clause, source: source))
        }
        for unnest in statement.unnests {
            guard primary != nil else { throw SetteeError(.queryParseError, "UNNEST needs a FROM clause") }
            guard !names.contains(unnest.alias) else {
                throw SetteeError(.queryParseError, "Duplicate data source name '\(unnest.alias)' in UNNEST")
            }
            names.append(unnest.alias)
        }
        unnestCount = statement.unnests.count
        self.primary = primary
        self.joins = joins
        collections = (primary.map { [$0.collection] } ?? []) + joins.map(\.source.collection)
        usesFullText = !FullTextSearch.matchCalls(in: statement.whereClause).isEmpty
        aliases = Set(names)

        // Result columns: alias, else the property's last name / META() field / source name, else $N.
        var columns: [Column] = []
        for (position, item) in statement.results.enumerated() {
            switch item.kind {
            case .all(let source):
                if let source {
                    guard names.contains(source) else {
                        throw SetteeError(.queryParseError, "Unknown data source '\(source)' in \(source).*")
                    }
                    columns.append(Column(name: item.alias ?? source, kind: .all(source: source)))
                } else {
                    guard !names.isEmpty else { throw SetteeError(.queryParseError, "SELECT * needs a FROM clause") }
                    if names.count == 1 {
                        columns.append(Column(name: item.alias ?? names[0], kind: .all(source: names[0])))
                    } else {
                        for n in names { columns.append(Column(name: n, kind: .all(source: n))) }
                    }
                }
            case .expression(let e):
                let name = item.alias ?? CompiledQuery.columnName(e, aliases: Set(names)) ?? "$\(position + 1)"
                columns.append(Column(name: name, kind: .expression(e)))
            }
        }
        self.columns = columns

        let usesAggregate = statement.results.contains { item in
            if case .expression(let e) = item.kind { return Evaluator.containsAggregate(e) }
            return false
        } || statement.having.map(Evaluator.containsAggregate) == true
            || statement.orderBy.contains { Evaluator.containsAggregate($0.expression) }
        isAggregate = !statement.groupBy.isEmpty || usesAggregate
        if let w = statement.whereClause, Evaluator.containsAggregate(w) {
            throw SetteeError(.queryParseError, "Aggregate functions are not allowed in WHERE (use HAVING)")
        }
        for j in joins {
            if let on = j.clause.on, Evaluator.containsAggregate(on) {
                throw SetteeError(.queryParseError, "Aggregate functions are not allowed in ON")
            }
        }
        if statement.having != nil && statement.groupBy.isEmpty && !usesAggregate {
            throw SetteeError(.queryParseError, "HAVING needs GROUP BY or an aggregate")
        }
        var deleted = false
        let everything: [SQLExpression] = [statement.whereClause].compactMap { $0 } + statement.results.compactMap {
            if case .expression(let e) = $0.kind { return e }
            return nil
        }
        for e in everything { e.visit { if case .meta(_, .deleted) = $0 { deleted = true } } }
        includeDeleted = deleted

        vectorPlan = try VectorPlan.make(statement: statement, primary: primary, aliases: Set(names), indexes: indexes)
        var terms = Planner.conjuncts(statement.whereClause)
        if let vectorPlan {
            // A document the vector index holds no vector for is not a result of a vector search.
            terms.append(.check(.function(VectorSearch.functionName, vectorPlan.driver, distinct: false), .missing, negated: true))
        }
        if let primary {
            let set = Set(names)
            primaryTerms = terms.filter { Planner.sources(of: $0, primary: primary.name, aliases: set).isSubset(of: [primary.name]) }
            otherTerms = terms.filter { !Planner.sources(of: $0, primary: primary.name, aliases: set).isSubset(of: [primary.name]) }
        } else {
            primaryTerms = terms
            otherTerms = []
        }

        // ORDER BY a result alias reads the result, not the document.
        let resultAliases = Set(statement.results.compactMap(\.alias))
        let orderExpressions = statement.orderBy.map(\.expression).filter { e in
            if case .property(nil, let path) = e, path.count == 1, case .key(let k) = path[0], resultAliases.contains(k) { return false }
            return true
        }
        var all: [SQLExpression] = statement.whereClause.map { [$0] } ?? []
        all += statement.groupBy + (statement.having.map { [$0] } ?? []) + orderExpressions
        all += joins.compactMap(\.clause.on)
        let unnestExpressions = statement.unnests.map(\.expression)
        var wholeSources = Set<String>()
        for c in columns {
            switch c.kind {
            case .all(let source): wholeSources.insert(source)
            case .expression(let e): all.append(e)
            }
        }
        // The vector of APPROX_VECTOR_DISTANCE comes from the index, not from the document.
        all = all.map { e in
            e.rewritten { node in
                guard case .function(VectorSearch.functionName, let args, let d) = node else { return nil }
                return .function(VectorSearch.functionName, [.missing] + args.dropFirst(), distinct: d)
            }
        }
        // The same without the WHERE clause (first in `all`), with the conjuncts that read other sources.
        primaryReadsBesidesItsTerms = wholeSources.contains(names.first ?? "") ? nil
            : Array(all.dropFirst(statement.whereClause == nil ? 0 : 1)) + otherTerms + unnestExpressions
        sourceNames = names
        var bodyKeys: [String: JSONMemberSelector?] = [:]
        for n in names {
            bodyKeys[n] = wholeSources.contains(n) ? nil
                : PropertyUsage.topLevelKeys(of: all + unnestExpressions, source: n, primary: names[0],
                                             aliases: Set(names)).map(JSONMemberSelector.init)
        }
        self.bodyKeys = bodyKeys
        // Whether anything but the UNNEST expressions reads the FROM document's body.
        readsPrimaryBodyBesidesUnnest = wholeSources.contains(names.first ?? "")
            || PropertyUsage.topLevelKeys(of: all, source: names.first ?? "", primary: names.first ?? "",
                                          aliases: Set(names)).map { !$0.isEmpty } ?? true
        var revision = false, expiration = false
        for e in all {
            e.visit {
                if case .meta(_, .revisionID) = $0 { revision = true }
                if case .meta(_, .expiration) = $0 { expiration = true }
            }
        }
        readsRevision = revision
        readsExpiration = expiration

        try CompiledQuery.checkFullText(statement, primary: primary, indexes: indexes, text: text)

        ordering = statement.orderBy.map { item in
            if case .property(nil, let path) = item.expression, path.count == 1, case .key(let k) = path[0],
               let i = statement.results.firstIndex(where: { $0.alias == k }) {
                // ORDER BY a result alias: position among columns (aliases never expand).
                let column = columns.firstIndex { $0.name == k } ?? i
                return (nil, column, item.descending)
            }
            return (item.expression, nil, item.descending)
        }
    }

    /// MATCH only in WHERE and on a full-text index of the FROM collection; RANK / FTS_SNIPPET / FTS_MATCHES only
    /// with a MATCH on the same index. Errors name the call's position in the query text when there is one.
    static func checkFullText(_ statement: SelectStatement, primary: BoundSource?, indexes: IndexManager, text: String?) throws {
        func fail(_ function: String, _ index: String, _ message: String) -> SetteeError {
            var position = ""
            if let text, let offset = CompiledQuery.offset(of: function, index, in: text) {
                var line = 1, column = 1
                for b in text.utf8.prefix(offset) { if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 } }
                position = " at line \(line), column \(column) (offset \(offset))"
            }
            return SetteeError(.queryParseError, "\(function)(\(index), …): \(message)\(position)")
        }
        var matched = Set<String>()
        for args in FullTextSearch.matchCalls(in: statement.whereClause) {
            let name = try FullTextSearch.indexName(args[0])
            guard let primary else { throw fail("MATCH", name, "needs a FROM clause") }
            guard let index = indexes.indexes(of: primary.collection).first(where: { $0.name == name }) else {
                throw fail("MATCH", name, "\(primary.collection.fullName) has no index named \(name)")
            }
            guard index.spec.kind == .fullText else {
                throw fail("MATCH", name, "\(name) is a \(index.spec.kind.rawValue) index, not a full-text index")
            }
            matched.insert(name)
        }
        var elsewhere: [SQLExpression] = statement.results.compactMap {
            if case .expression(let e) = $0.kind { return e }
            return nil
        }
        elsewhere += statement.orderBy.map(\.expression) + statement.groupBy + (statement.having.map { [$0] } ?? [])
        elsewhere += statement.joins.compactMap(\.on)
        var problem: SetteeError?
        for e in elsewhere + (statement.whereClause.map { [$0] } ?? []) {
            e.visit { node in
                guard problem == nil, case .function(let f, let args, _) = node,
                      ["RANK", "FTS_SNIPPET", "FTS_MATCHES"].contains(f), let name = try? FullTextSearch.indexName(args[0]),
                      !matched.contains(name) else { return }
                problem = fail(f, name, "\(f)(\(name)) needs MATCH(\(name), …) in the WHERE clause")
            }
        }
        for e in elsewhere {
            e.visit { node in
                guard problem == nil, case .function("MATCH", let args, _) = node else { return }
                problem = fail("MATCH", (try? FullTextSearch.indexName(args[0])) ?? "?", "MATCH is only allowed in WHERE")
            }
        }
        if let problem { throw problem }
    }

    /// The byte offset of `FUNCTION(index` in the query text (case-insensitive, spaces allowed).
    static func offset(of function: String, _ index: String, in text: String) -> Int? {
        let bytes = Array(text.utf8), upper = Array(text.uppercased().utf8)
        guard upper.count == bytes.count else { return nil }
        let f = Array(function.utf8), name = Array(index.utf8)
        var i = 0
        while i + f.count < upper.count {
            if Array(upper[i..<(i + f.count)]) == f {
                var j = i + f.count
                while j < bytes.count && bytes[j] == 0x20 { j += 1 }
                if j < bytes.count && bytes[j] == UInt8(ascii: "(") {
                    j += 1
                    while j < bytes.count && (bytes[j] == 0x20 || bytes[j] == UInt8(ascii: "'") || bytes[j] == UInt8(ascii: "\"") || bytes[j] == UInt8(ascii: "`")) { j += 1 }
                    if j + name.count <= bytes.count && Array(bytes[j..<(j + name.count)]) == name { return i }
                }
            }
            i += 1
        }
        return nil
    }

    /// The collection a FROM/JOIN names: `_`, `_default` and the database's own name mean the default collection.
    static func resolve(_ ref: SourceRef, in database: Database) throws -> Collection {
        let scope = ref.scope ?? "_default"
        var name = ref.collection
        if ref.scope == nil && (name == "_" || name == database.name) { name = "_default" }
        if ref.scope != nil && name == "_" { name = "_default" }
        guard let collection = try database.collection(name: name, scope: scope) else {
            let full = ref.scope.map { "\($0).\(ref.collection)" } ?? ref.collection
            throw SetteeError(.queryParseError, "No such collection: \(full)")
        }
        return collection
    }

    /// The default result name of an expression: a property's last name, a META() field's name.
    static func columnName(_ e: SQLExpression, aliases: Set<String>) -> String? {
        switch e {
        case .property(_, let path):
            for c in path.reversed() { if case .key(let k) = c { return k } }
            return nil
        case .meta(_, let field):
            return field == .deleted ? "deleted" : field.rawValue
        default:
            return nil
        }
    }
}
