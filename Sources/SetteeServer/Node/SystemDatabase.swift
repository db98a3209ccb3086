/// The databases CouchDB names for itself: user accounts, replication documents, and `_global_changes` (which
/// CouchDB 3 still lets a client create). Their names are legal though they start with `_`, and the server routes
/// them as databases rather than as server endpoints.
enum SystemDatabase: String, CaseIterable, Sendable {
    case users = "_users"
    case replicator = "_replicator"
    case globalChanges = "_global_changes"

    /// Whether `name` is one of them.
    static func isNamed(_ name: some StringProtocol) -> Bool {
        allCases.contains { $0.rawValue == name }
    }
}
