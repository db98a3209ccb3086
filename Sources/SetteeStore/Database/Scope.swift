import Foundation
import SetteeCore

/// A namespace of collections in a database (Couchbase Lite's `Scope`). A scope exists while it holds a
/// collection; the default scope always does.
///
/// ```swift
/// let app = try database.scope(name: "inventory")
/// for collection in try app?.collections() ?? [] { print(collection.name, collection.count) }
/// ```
public struct Scope: Sendable, Hashable, CustomStringConvertible {
    /// The default scope's name, `_default`.
    public static let defaultScopeName = "_default"
    /// The scope's name.
    public let name: String
    /// The database the scope is in.
    public let database: Database

    init(name: String, database: Database) {
        self.name = name
        self.database = database
    }

    /// The scope's collections, sorted by name.
    public func collections() throws -> [Collection] { try database.collections(scope: name) }

    /// The collection `name` of this scope, or nil.
    public func collection(name: String) throws -> Collection? { try database.collection(name: name, scope: self.name) }

    public static func == (a: Scope, b: Scope) -> Bool { a.name == b.name && a.database === b.database }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(ObjectIdentifier(database))
    }
    public var description: String { "Scope(\(database.name).\(name))" }
}
