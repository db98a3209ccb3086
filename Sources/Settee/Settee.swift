// The umbrella module for embedders: `import Settee` brings in the whole public API.
@_exported import SetteeCore
@_exported import SetteeStore
@_exported import SetteeReplication
@_exported import SetteeSQLPP
@_exported import SetteeVector
@_exported import SetteeIndex
@_exported import SetteeQuery

/// A query result row, under Couchbase Lite's name. Files that `import Settee` see it in place of
/// `Swift.Result` (write `Swift.Result` for the standard library's), as in Couchbase Lite.
public typealias Result = QueryResult

/// An app's own log sink, under Couchbase Lite's name (`Database.log.custom`). Files that `import Settee` and
/// swift-log's `Logging` write `Logging.Logger` for swift-log's.
public typealias Logger = CustomLogger
