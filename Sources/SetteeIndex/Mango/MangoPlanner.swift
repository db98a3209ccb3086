import SetteeCore
import SetteeStore

/// Chooses the index that answers a Mango query, as CouchDB's `mango_cursor:create/3` and
/// `mango_idx:get_usable_indexes/3` do: the indexes in the query's scope (partitioned or global), those usable for
/// its selector and sort, `use_index` preferred, then the json index whose columns cover the most of the
/// selector's ranges, with fewest columns, by name; `_all_docs` when no json index is usable.
struct MangoPlan {
    /// What the plan is for, as CouchDB's cursor kind: a `_find` with no usable index is refused
    /// (`no_usable_index`), an `_explain` of it answers with no index and every candidate's reason
    /// (`mango_idx:get_usable_indexes/4`, `mango_cursor:create_cursor/4`'s dummy cursor).
    enum Purpose {
        case find, explain
    }

    /// Why an index was not chosen (`_explain`'s `index_candidates`).
    enum Reason: String {
        case lessOverlap = "less_overlap", tooManyFields = "too_many_fields"
        case alphabeticallyComesAfter = "alphabetically_comes_after", unfavoredType = "unfavored_type"
        case excludedByUser = "excluded_by_user", needsTextSearch = "needs_text_search"
        case fieldMismatch = "field_mismatch", sortOrderMismatch = "sort_order_mismatch"
        case scopeMismatch = "scope_mismatch", isPartial = "is_partial"
    }

    struct Candidate {
        let index: MangoIndex
        let usable: Bool
        let reason: Reason
        let ranking: Int
    }

    /// The index that answers the query; nil only when explaining a query no index can serve.
    let index: MangoIndex?
    var warnings: [String] = []
    /// The other indexes and why they lost.
    var candidates: [Candidate] = []

    init(query: MangoQuery, indexes: [MangoIndex], databasePartitioned: Bool, purpose: Purpose) throws {
        let selector = query.selector
        let sortPaths = query.sort.map(\.path)
        let useIndex = query.useIndex
        func named(_ index: MangoIndex) -> Bool {
            guard let ddoc = useIndex.first, let id = index.designDocumentID else { return false }
            let wanted = ddoc.hasPrefix("_design/") ? ddoc : "_design/" + ddoc
            return id == wanted && (useIndex.count < 2 || index.name == useIndex[1])
        }
        var excluded: [(MangoIndex, Reason)] = []
        var usable: [MangoIndex] = []
        var unusable: [(MangoIndex, Reason)] = []
        for index in indexes {
            if index.kind == .json && index.partialFilter != nil && !named(index) { excluded.append((index, .isPartial)); continue }
            if index.kind == .json && index.partitioned != (query.partition != nil) {
                excluded.append((index, .scopeMismatch))
                continue
            }
            if let reason = MangoPlan.unusableReason(index, selector: selector, sort: sortPaths) {
                unusable.append((index, reason))
            } else {
                usable.append(index)
            }
        }
        let jsonUsable = usable.filter { $0.kind == .json }
        let noneUsable = usable.isEmpty || (jsonUsable.isEmpty && !usable.contains { $0.kind == .special })
        if noneUsable && purpose == .find {
            throw Self.noUsableIndex(query, databasePartitioned: databasePartitioned)
        }
        var chosenFrom = usable
        var userExcluded: [MangoIndex] = []
        let matching = usable.filter(named)
        if !useIndex.isEmpty && !matching.isEmpty {
            chosenFrom = matching
            userExcluded = usable.filter { !named($0) }
        } else if query.allowFallback || (useIndex.isEmpty && usable.count > 1) {
            chosenFrom = usable
        } else {
            switch useIndex.count {
            case 0: throw MangoError.badRequest("invalid_index", "You must specify an index with the `use_index` parameter.")
            case 1: throw MangoError.badRequest("invalid_index", "_design/\(useIndex[0]) specified by `use_index` could not be found or it is not suitable.")
            default: throw MangoError.badRequest("invalid_index", "_design/\(useIndex[0]), \(useIndex[1]) specified by `use_index` could not be found or it is not suitable.")
            }
        }
        // json indexes before _all_docs; among them the best overlap with the selector's ranges, then fewest
        // columns, then by design document and name.
        let indexable = selector.indexableFields
        func prefixLength(_ index: MangoIndex) -> Int {
            var n = 0
            for path in index.paths {
                guard indexable.contains(path) else { break }
                n += 1
            }
            return n
        }
        let json = chosenFrom.filter { $0.kind == .json }.sorted { (a: MangoIndex, b: MangoIndex) -> Bool in
            let da = indexable.count - prefixLength(a), db = indexable.count - prefixLength(b)
            if da != db { return da < db }
            if a.columns.count != b.columns.count { return a.columns.count < b.columns.count }
            return (a.designDocumentID ?? "", a.name) < (b.designDocumentID ?? "", b.name)
        }
        let index = noneUsable ? nil : json.first ?? chosenFrom.first { $0.kind == .special } ?? MangoIndex.allDocs
        self.index = index

        if let ddoc = useIndex.first, !(index.map(named) ?? false) {
            warnings.append(useIndex.count == 1
                ? "_design/\(ddoc) was not used because it does not contain a valid index for this query."
                : "_design/\(ddoc), \(useIndex[1]) was not used because it is not a valid index for this query.")
        }
        if index?.kind == .special { warnings.append("No matching index found, create an index to optimize query time.") }

        // Candidates for _explain, in CouchDB's buckets.
        var rank = 0
        for (position, other) in json.enumerated() where position > 0 {
            let winner = json[0]
            let reason: Reason = prefixLength(other) < prefixLength(winner) ? .lessOverlap
                : other.columns.count > winner.columns.count ? .tooManyFields : .alphabeticallyComesAfter
            candidates.append(Candidate(index: other, usable: true, reason: reason, ranking: position))
        }
        rank = max(1, json.count)
        let unfavored = chosenFrom.filter { $0.kind == .special && index?.kind == .json }
        for other in unfavored { candidates.append(Candidate(index: other, usable: true, reason: .unfavoredType, ranking: rank)) }
        if !unfavored.isEmpty { rank += 1 }
        for other in userExcluded { candidates.append(Candidate(index: other, usable: true, reason: .excludedByUser, ranking: rank)) }
        if !userExcluded.isEmpty { rank += 1 }
        for (other, reason) in unusable { candidates.append(Candidate(index: other, usable: false, reason: reason, ranking: rank)) }
        if !unusable.isEmpty { rank += 1 }
        for (other, reason) in excluded { candidates.append(Candidate(index: other, usable: false, reason: reason, ranking: rank)) }
        candidates.sort { a, b in
            if a.index.kind != b.index.kind { return a.index.kind == .json }
            return (a.index.designDocumentID ?? "", a.index.name) > (b.index.designDocumentID ?? "", b.index.name)
        }
    }

    /// `_find`'s error when no index can serve the query (CouchDB's `mango_idx:mango_sort_error/2`).
    static func noUsableIndex(_ query: MangoQuery, databasePartitioned: Bool) -> MangoError {
        let reason = !databasePartitioned ? "No index exists for this sort, try indexing by the sort fields."
            : query.partition != nil ? "No partitioned index exists for this sort, try indexing by the sort fields."
            : "No global index exists for this sort, try indexing by the sort fields."
        return MangoError.badRequest("no_usable_index", reason)
    }

    /// Why `index` can't answer the query, or nil when it can (CouchDB's `is_usable/3`).
    static func unusableReason(_ index: MangoIndex, selector: MangoSelector,
                               sort: [MangoSelector.FieldPath]) -> Reason? {
        if index.kind == .special {
            if sort.isEmpty { return nil }
            return selector.indexableFields.contains(["_id"]) && sort == [["_id"]] ? nil : .sortOrderMismatch
        }
        let required = index.paths.filter { !sort.contains($0) && $0 != ["_id"] && $0 != ["_rev"] }
        if !required.allSatisfy(selector.requires) { return .fieldMismatch }
        if !canUseSort(index.paths, sort, selector) { return .sortOrderMismatch }
        return nil
    }

    /// The sort is the index's order: its fields are a prefix of the columns after those the selector fixes.
    static func canUseSort(_ columns: [MangoSelector.FieldPath], _ sort: [MangoSelector.FieldPath],
                           _ selector: MangoSelector) -> Bool {
        if sort.isEmpty { return true }
        var rest = columns[...]
        while let column = rest.first {
            if column == sort[0] { return rest.starts(with: sort) }
            guard selector.isConstant(column) else { return false }
            rest = rest.dropFirst()
        }
        return false
    }
}
