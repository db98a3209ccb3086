import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore

extension Executor {
    /// How a joined source is read for each left row.
    enum JoinStrategy {
        /// `ON right.META().id = expr`: one document by id.
        case idLookup(SQLExpression)
        /// `ON right.x = expr` with a value index whose first key is `x`: the documents under that key.
        case indexLookup(IndexInfo, SQLExpression)
        /// Any other ON: every live document of the source, read once.
        case scan

        /// The SQL that reads the candidates (bound with the looked-up value): what the join runs and EXPLAIN shows.
        func sql(_ join: CompiledQuery.Join) -> String {
            let collection = join.source.collection
            switch self {
            case .idLookup:
                return "SELECT \(Planner.documentColumns) FROM \(DocumentTable.table(collection, as: "d"))"
                    + " WHERE \(DocumentTable.column(.id, "d")) = ? AND \(DocumentTable.live("d"))"
            case .indexLookup(let index, _):
                return "SELECT \(Planner.documentColumns) FROM \(index.table) AS i \(DocumentTable.join(collection, as: "d", onRowID: "i.doc"))"
                    + " WHERE i.k0 = ? AND \(DocumentTable.live("d"))"
            case .scan:
                return "SELECT \(Planner.documentColumns) FROM \(DocumentTable.table(collection, as: "d")) WHERE \(DocumentTable.live("d"))"
            }
        }

        /// EXPLAIN's one-line description.
        var summary: String {
            switch self {
            case .idLookup(let e): return "document id lookup by \(e)"
            case .indexLookup(let index, let e): return "value index \(index.name) by \(e)"
            case .scan: return "scan (read once)"
            }
        }
    }

    /// The cheapest way to read `join`'s source for each left row: an equality in the ON clause between the
    /// source's document id, or the first key of one of its value indexes, and an expression of the rows before it.
    func joinStrategy(_ join: CompiledQuery.Join) throws -> JoinStrategy {
        guard let primary = query.primary, let on = join.clause.on, join.clause.kind != .cross else { return .scan }
        let name = join.source.name
        let indexes = query.indexes.indexes(of: join.source.collection)
        for term in Planner.conjuncts(on) {
            guard case .binary(.equal, let a, let b) = term else { continue }
            for (mine, other) in [(a, b), (b, a)] {
                guard let rel = Planner.relative(mine, to: name, primary: primary.name, aliases: query.aliases),
                      !Planner.sources(of: other, primary: primary.name, aliases: query.aliases).contains(name)
                else { continue }
                if rel == .meta(source: nil, field: .id) { return .idLookup(other) }
                if let index = indexes.first(where: { $0.spec.whereClause == nil && $0.spec.expressions.first == rel }) {
                    return .indexLookup(index, other)
                }
            }
        }
        return .scan
    }
}
