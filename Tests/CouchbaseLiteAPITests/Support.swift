import Foundation
import Settee
import SetteeTestSupport

/// A database in a temporary directory, as the snippets' `database` and `collection`.
struct SnippetDatabase {
    let dir = TempDir()
    let database: Database
    let collection: Settee.Collection

    init(_ name: String = "my-database") throws {
        database = try Database(name: name, config: DatabaseConfiguration(directory: dir.path))
        collection = try database.defaultCollection()
    }
}
