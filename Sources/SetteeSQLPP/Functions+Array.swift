import SetteeCore

/// The array functions (ARRAY_*).
extension FunctionLibrary {
    // MARK: - Array functions

    static func arrayAvg(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            var sum = 0.0
            var count = 0
            for element in a {
                if let d = element.doubleValue { sum += d; count += 1 }
            }
            return count == 0 ? .null : number(sum / Double(count))
        }
    }

    static func arraySum(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            var intSum: Int64 = 0
            var doubleSum = 0.0
            var exact = true
            for element in a {
                switch element {
                case .int(let i):
                    if exact {
                        let (r, overflow) = intSum.addingReportingOverflow(i)
                        if overflow {
                            exact = false
                            doubleSum = Double(intSum) + Double(i)
                        } else {
                            intSum = r
                        }
                    } else {
                        doubleSum += Double(i)
                    }
                case .double(let d):
                    if exact { exact = false; doubleSum = Double(intSum) }
                    doubleSum += d
                default: break
                }
            }
            return exact ? .int(intSum) : number(doubleSum)
        }
    }

    static func arrayContains(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .bool(a.contains { ValueCollation.equal($0, v[1]) })
        }
    }

    static func arrayCount(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .int(Int64(a.count(where: { !$0.isNull })))
        }
    }

    static func arrayIfNull(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return a.first { !$0.isNull } ?? .null
        }
    }

    static func arrayLength(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .int(Int64(a.count))
        }
    }

    static func arrayExtreme(_ args: [JSON?], wantMax: Bool) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            var best: JSON?
            for element in a where !element.isNull {
                guard let current = best else { best = element; continue }
                let c = ValueCollation.compare(element, current)
                if (wantMax ? c > 0 : c < 0) { best = element }
            }
            return best ?? .null
        }
    }

    static func arrayDistinct(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            guard a.count > 1 else { return .array(a) }
            // Sort positions by collation (stable), keep the first position of each run of equal values,
            // then emit the kept elements in their original order.
            let order = a.indices.sorted { i, j in
                let c = ValueCollation.compare(a[i], a[j])
                return c != 0 ? c < 0 : i < j
            }
            var keep = [Bool](repeating: false, count: a.count)
            var runStart = order[0]
            keep[runStart] = true
            for position in order.dropFirst() where !ValueCollation.equal(a[position], a[runStart]) {
                runStart = position
                keep[position] = true
            }
            return .array(a.indices.filter { keep[$0] }.map { a[$0] })
        }
    }

    static func arrayReverse(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .array(a.reversed())
        }
    }

    static func arraySort(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            let order = a.indices.sorted { i, j in
                let c = ValueCollation.compare(a[i], a[j])
                return c != 0 ? c < 0 : i < j
            }
            return .array(order.map { a[$0] })
        }
    }

    static func arrayPosition(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .int(Int64(a.firstIndex { ValueCollation.equal($0, v[1]) } ?? -1))
        }
    }

    /// MISSING if any argument is MISSING; the values may be null (they are added as is).
    static func arrayAppend(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(var a)? = args[0] else { return .null }
        a.append(contentsOf: args.dropFirst().compactMap { $0 })
        return .array(a)
    }

    /// `ARRAY_PREPEND(value1, …, array)`: the array is the last argument.
    static func arrayPrepend(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(let a)? = args[args.count - 1] else { return .null }
        return .array(args.dropLast().compactMap { $0 } + a)
    }

    static func arrayConcat(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            var out: [JSON] = []
            for value in v {
                guard case .array(let a) = value else { return .null }
                out.append(contentsOf: a)
            }
            return .array(out)
        }
    }

    /// `ARRAY_FLATTEN(array, depth)`: a negative depth flattens every level.
    static func arrayFlatten(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0], let depth = v[1].intValue else { return .null }
            func flatten(_ items: [JSON], _ depth: Int64, into out: inout [JSON]) {
                for item in items {
                    if case .array(let inner) = item, depth != 0 {
                        flatten(inner, depth &- 1, into: &out)
                    } else {
                        out.append(item)
                    }
                }
            }
            var out: [JSON] = []
            flatten(a, depth, into: &out)
            return .array(out)
        }
    }

    /// `ARRAY_RANGE(start, end[, step])`: end is exclusive; a zero step or one pointing away from `end` gives [].
    static func arrayRange(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let start = v[0].doubleValue, let end = v[1].doubleValue else { return .null }
            var step = 1.0
            if v.count > 2 {
                guard let s = v[2].doubleValue else { return .null }
                step = s
            }
            guard start.isFinite, end.isFinite, step.isFinite else { return .null }
            if step == 0 || (step > 0 && start >= end) || (step < 0 && start <= end) { return .array([]) }
            let count = ((end - start) / step).rounded(.up)
            guard count.isFinite, count <= Double(maxRangeCount) else { return .null }
            let total = Int(count)
            var out: [JSON] = []
            out.reserveCapacity(total)
            for i in 0..<total {
                let value = start + Double(i) * step
                if step > 0 ? value >= end : value <= end { break }
                out.append(number(value))
            }
            return .array(out)
        }
    }

    static func arrayRemove(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(let a)? = args[0] else { return .null }
        let remove = args.dropFirst().compactMap { $0 }
        return .array(a.filter { element in !remove.contains { ValueCollation.equal(element, $0) } })
    }

    /// `ARRAY_INSERT(array, position, value1, …)`: a negative position counts from the end; out of range → null.
    static func arrayInsert(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(var a)? = args[0], let positionValue = args[1], let raw = integer(positionValue),
              positionValue.intValue != nil
        else { return .null }
        let position = raw < 0 ? a.count + raw : raw
        guard position >= 0, position <= a.count else { return .null }
        a.insert(contentsOf: args.dropFirst(2).compactMap { $0 }, at: position)
        return .array(a)
    }
}
