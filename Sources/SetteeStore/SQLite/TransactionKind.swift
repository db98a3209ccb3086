/// How `BEGIN` acquires locks (`BEGIN DEFERRED` / `IMMEDIATE` / `EXCLUSIVE`).
///
/// ```swift
/// try connection.transaction(.deferred) { /* read-then-maybe-write */ }
/// ```
package enum TransactionKind: Sendable {
    /// Takes no lock until the first read or write.
    case deferred
    /// Takes the write lock at `BEGIN` (the default: avoids `SQLITE_BUSY` upgrades mid-transaction).
    case immediate
    /// Like immediate; in WAL mode the same as immediate.
    case exclusive

    var beginSQL: String {
        switch self {
        case .deferred: "BEGIN DEFERRED"
        case .immediate: "BEGIN IMMEDIATE"
        case .exclusive: "BEGIN EXCLUSIVE"
        }
    }
}
