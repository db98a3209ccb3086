/// Which document members expressions can read — so a query or an index reads only those from storage.
package enum PropertyUsage {
    /// The top-level members of the documents of source `name` that `expressions` may read, resolved the way the
    /// evaluator resolves paths (a first component naming a source alias reads that source); nil when they may read
    /// the whole document (`SELECT *`, an alias on its own). Names that turn out to be `ANY` variables are included
    /// harmlessly.
    package static func topLevelKeys(of expressions: [SQLExpression], source name: String, primary: String,
                                    aliases: Set<String>) -> Set<String>? {
        var keys = Set<String>()
        var whole = false
        for e in expressions {
            e.visit { node in
                guard case .property(let source, let path) = node else { return }
                var target = primary
                var rest = path[...]
                if let source {
                    target = source
                } else if case .key(let first)? = path.first, aliases.contains(first),
                          aliases.count > 1 || first == primary {
                    target = first
                    rest = path.dropFirst()
                }
                guard target == name else { return }
                switch rest.first {
                case .key(let k)?: keys.insert(k)
                default: whole = true
                }
            }
        }
        return whole ? nil : keys
    }
}
