import SetteeCore
import SetteeSQLPP
public import SetteeStore

/// Something that holds indexes (Couchbase Lite's `Indexable`): a ``Collection``.
public protocol Indexable {
    func indexes() throws -> [String]
    func createIndex(withName name: String, config: any IndexConfiguration) throws
    func createIndex(_ index: any Index, name: String) throws
    func deleteIndex(forName name: String) throws
    func index(withName name: String) throws -> QueryIndex?
}

extension Collection: Indexable {
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
    public func createIndex(_ index: any Index, name: String) throws {
        try createIndex(withName: name, config: index)
    }

    /// Creates an index from a configuration, named last.
    @_disfavoredOverload
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

extension Database {
    /// The default collection's index names (Couchbase Lite's deprecated `Database.indexes`; use
    /// ``Collection/indexes()``).
    @available(*, deprecated, message: "Use collection.indexes()")
    public var indexes: [String] { (try? defaultCollection().indexes()) ?? [] }

    /// Creates an index on the default collection (Couchbase Lite's deprecated `createIndex(_:withName:)`).
    @available(*, deprecated, message: "Use collection.createIndex(_:name:)")
    public func createIndex(_ index: any Index, withName name: String) throws {
        try defaultCollection().createIndex(withName: name, config: index)
    }

    /// Creates an index on the default collection (Couchbase Lite's deprecated `createIndex(_:name:)`).
    @available(*, deprecated, message: "Use collection.createIndex(withName:config:)")
    public func createIndex(_ config: any IndexConfiguration, name: String) throws {
        try defaultCollection().createIndex(withName: name, config: config)
    }

    /// Drops an index of the default collection (Couchbase Lite's deprecated `deleteIndex(forName:)`).
    @available(*, deprecated, message: "Use collection.deleteIndex(forName:)")
    public func deleteIndex(forName name: String) throws {
        try defaultCollection().deleteIndex(forName: name)
    }
}
