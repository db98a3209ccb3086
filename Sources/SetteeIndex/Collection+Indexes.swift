import SetteeCore
import SetteeSQLPP
import SetteeStore

extension Collection {
    /// Creates an index (Couchbase Lite's `createIndex(withName:config:)`) and builds it before returning.
    ///
    /// ```swift
    /// try collection.createIndex(withName: "TypeNameIndex", config: ValueIndexConfiguration(["type", "name"]))
    /// ```
    /// Creating an index that exists with the same definition does nothing; a different definition rebuilds it.
    /// - Throws: ``SetteeError`` `.queryParseError` when an expression does not parse.
    public func createIndex(withName name: String, config: any IndexConfiguration) throws {
        try IndexManager.shared(for: database).createIndex(name, spec: try config.indexSpec(), on: self)
    }

    /// Creates an index from ``IndexBuilder`` (Couchbase Lite's `createIndex(_:name:)`).
    public func createIndex(_ index: any IndexConfiguration, name: String) throws {
        try createIndex(withName: name, config: index)
    }

    /// Drops the index `name` (nothing happens when it does not exist).
    public func deleteIndex(forName name: String) throws {
        try IndexManager.shared(for: database).deleteIndex(name, on: self)
    }

    /// The names of this collection's indexes.
    public func indexes() throws -> [String] {
        try IndexManager.shared(for: database).indexes(of: self).map(\.name)
    }

    /// The index `name` (Couchbase Lite's `QueryIndex`), or nil when the collection has none of that name.
    ///
    /// ```swift
    /// let index = try collection.index(withName: "colors_index")
    /// while let updater = try index?.beginUpdate(limit: 50) { … }
    /// ```
    public func index(withName name: String) throws -> QueryIndex? {
        let manager = try IndexManager.shared(for: database)
        guard let info = manager.indexes(of: self).first(where: { $0.name == name }) else { return nil }
        return QueryIndex(info: info, collection: self, manager: manager)
    }
}
