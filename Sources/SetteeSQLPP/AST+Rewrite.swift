extension SQLExpression {
    /// The expression with nodes replaced: `transform` is asked about each node top-down; a non-nil answer replaces
    /// that node (its children are not visited), nil keeps the node and rewrites its children.
    ///
    /// ```swift
    /// // Every parameter replaced by null:
    /// e.rewritten { if case .parameter = $0 { return .literal(.null) }; return nil }
    /// ```
    package func rewritten(_ transform: (SQLExpression) -> SQLExpression?) -> SQLExpression {
        if let replaced = transform(self) { return replaced }
        func r(_ x: SQLExpression) -> SQLExpression { x.rewritten(transform) }
        switch self {
        case .literal, .missing, .property, .meta, .parameter, .star: return self
        case .array(let items): return .array(items.map(r))
        case .object(let members): return .object(members.map { ObjectMember(key: $0.key, value: r($0.value)) })
        case .not(let x): return .not(r(x))
        case .negate(let x): return .negate(r(x))
        case .binary(let op, let a, let b): return .binary(op, r(a), r(b))
        case .check(let x, let k, let n): return .check(r(x), k, negated: n)
        case .between(let x, let lo, let hi, let n): return .between(r(x), low: r(lo), high: r(hi), negated: n)
        case .in(let x, let list, let n): return .in(r(x), list.map(r), negated: n)
        case .inArray(let x, let a, let n): return .inArray(r(x), r(a), negated: n)
        case .path(let x, let p): return .path(r(x), p)
        case .collate(let x, let c): return .collate(r(x), c)
        case .like(let x, let p, let n): return .like(r(x), pattern: r(p), negated: n)
        case .function(let f, let args, let d): return .function(f, args.map(r), distinct: d)
        case .quantified(let q, let v, let a, let c): return .quantified(q, variable: v, in: r(a), satisfies: r(c))
        case .caseWhen(let subject, let arms, let otherwise):
            return .caseWhen(subject: subject.map(r), arms: arms.map { CaseArm(when: r($0.when), then: r($0.then)) },
                             otherwise: otherwise.map(r))
        }
    }
}
