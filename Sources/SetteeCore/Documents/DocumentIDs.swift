/// Rules for document ids and database names, shared by the store, the server and the replicator.
package enum DocumentIDs {
    /// The kinds of document id.
    public enum Kind: Sendable, Equatable {
        /// An ordinary document.
        case regular
        /// A design document (`_design/…`): replicated like any other.
        case design
        /// A local document (`_local/…`): never replicated, never in the change feed.
        case local
    }

    /// Checks a document id as CouchDB does.
    ///
    /// - Returns: the id's kind.
    /// - Throws: ``SetteeError`` `.badDocID` for an empty id, one starting with `_` other than `_design/`
    ///   or `_local/`, one that is only the prefix, or one that is not valid UTF-8.
    public static func validate(_ id: String) throws(SetteeError) -> Kind {
        if id.isEmpty { throw SetteeError(.badDocID, "Document id must not be empty") }
        if id.utf8.first == UInt8(ascii: "_") {
            if id.hasPrefix("_design/") {
                guard id.utf8.count > 8 else { throw SetteeError(.badDocID, "Illegal document id `\(id)`") }
                return .design
            }
            if id.hasPrefix("_local/") {
                guard id.utf8.count > 7 else { throw SetteeError(.badDocID, "Illegal document id `\(id)`") }
                return .local
            }
            throw SetteeError(.badDocID, "Only reserved document ids may start with underscore.")
        }
        return .regular
    }

    /// Checks a document id for a partitioned database, as CouchDB's `couch_partition:validate_docid/1`: every
    /// regular id is `{partition}:{id}` (design and local documents have no partition).
    ///
    /// - Returns: the id's kind.
    /// - Throws: the errors of ``validate(_:)``; `.badDocID` `Doc id must be of form partition:id` without a colon
    ///   and for an invalid id after it; `.illegalPartition` for an invalid partition (see ``validatePartition(_:)``).
    @discardableResult
    public static func validatePartitioned(_ id: String) throws(SetteeError) -> Kind {
        let kind = try validate(id)
        guard kind == .regular else { return kind }
        try requirePartition(id)
        let (partition, rest) = split(id)!
        try validatePartition(partition)
        _ = try validate(rest)
        return kind
    }

    /// In a partitioned database, the check every read and write of a regular id makes first.
    /// - Throws: `.badDocID` `Doc id must be of form partition:id` for an id other than `_…` without a colon.
    public static func requirePartition(_ id: String) throws(SetteeError) {
        if id.utf8.first != UInt8(ascii: "_") && !id.utf8.contains(UInt8(ascii: ":")) {
            throw SetteeError(.badDocID, "Doc id must be of form partition:id")
        }
    }

    /// A partitioned id's partition and the id inside it: the text before and after the first colon.
    public static func split(_ id: String) -> (partition: String, id: String)? {
        guard let colon = id.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        return (String(id[..<colon]), String(id[id.utf8.index(after: colon)...]))
    }

    /// The partition of a partitioned id (nil for an id without one: design and local documents).
    public static func partition(of id: String) -> String? {
        if id.utf8.first == UInt8(ascii: "_") { return nil }
        return split(id)?.partition
    }

    /// Checks a partition name as CouchDB's `couch_partition:validate_partition/1`.
    /// - Throws: `.illegalPartition` for an empty partition, one starting with `_` or one containing a colon.
    public static func validatePartition(_ partition: String) throws(SetteeError) {
        if partition.isEmpty { throw SetteeError(.illegalPartition, "Partition must not be empty") }
        if partition.utf8.first == UInt8(ascii: "_") {
            throw SetteeError(.illegalPartition, "Partition must not start with an underscore")
        }
        if partition.utf8.contains(UInt8(ascii: ":")) {
            throw SetteeError(.illegalPartition, "Partition must not contain a colon")
        }
    }

    /// Checks a database name against CouchDB's rule `^[a-z][a-z0-9_$()+/-]*$`, at most 238 characters.
    ///
    /// - Throws: ``SetteeError`` `.illegalDatabaseName`.
    public static func validateDatabaseName(_ name: String) throws(SetteeError) {
        guard let first = name.utf8.first, first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z"),
              name.utf8.count <= 238, name.utf8.allSatisfy(isDatabaseNameByte)
        else {
            throw SetteeError(.illegalDatabaseName,
                              "Name: '\(name)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
        }
    }

    /// `[a-z0-9_$()+/-]`
    private static func isDatabaseNameByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        case UInt8(ascii: "_"), UInt8(ascii: "$"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "+"),
             UInt8(ascii: "/"), UInt8(ascii: "-"): return true
        default: return false
        }
    }

    /// Checks a scope or collection name (Couchbase Lite's rule: 1–251 of `A-Za-z0-9_-%`, not starting with `_` or `%`,
    /// except the reserved `_default`).
    public static func validateCollectionName(_ name: String) throws(SetteeError) {
        if name == "_default" { return }
        let allowed: Set<UInt8> = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%".utf8)
        let bytes = Array(name.utf8)
        guard let first = bytes.first, first != UInt8(ascii: "_"), first != UInt8(ascii: "%"),
              bytes.count <= 251, bytes.allSatisfy({ allowed.contains($0) })
        else {
            throw SetteeError(.badRequest, "Invalid scope or collection name '\(name)'")
        }
    }
}
