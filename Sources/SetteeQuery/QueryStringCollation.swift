import Foundation
import SetteeSQLPP
import Synchronization

/// The string comparisons `COLLATE` asks for, as Couchbase Lite makes them. `NOUNICODE` (its ASCII collation)
/// compares code points, folding only `A`–`Z` for `NOCASE`. `UNICODE` is ICU's collation (through Foundation) for the
/// locale given or the root locale, with case and accents ignored on request (`NODIAC` applies to Unicode only).
enum QueryStringCollation {
    /// ICU's root locale (the Unicode Collation Algorithm's default order), and the locales asked for so far.
    private static let root = Locale(identifier: "")
    private static let locales = Mutex<[String: Locale]>([:])

    private static func locale(_ identifier: String?) -> Locale {
        guard let identifier, !identifier.isEmpty else { return root }
        return locales.withLock { cache in
            if let known = cache[identifier] { return known }
            let locale = Locale(identifier: identifier)
            if cache.count < 64 { cache[identifier] = locale }
            return locale
        }
    }

    static let compare: StringCollator = { collation, a, b in
        guard collation.unicode else {
            guard collation.ignoreCase else { return ValueCollation.compareStrings(a, b) }
            return ValueCollation.compareStrings(StringCollation.asciiLowercased(a), StringCollation.asciiLowercased(b))
        }
        var options: String.CompareOptions = []
        if collation.ignoreCase { options.insert(.caseInsensitive) }
        if collation.ignoreAccents { options.insert(.diacriticInsensitive) }
        switch a.compare(b, options: options, range: nil, locale: locale(collation.locale)) {
        case .orderedAscending: return -1
        case .orderedSame: return 0
        case .orderedDescending: return 1
        }
    }
}
