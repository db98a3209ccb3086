import Foundation
import SetteeCore
import Synchronization
import SetteeStore

/// A view's registered functions (not persistent: apps register them at startup).
struct ViewDefinition: Sendable {
    let map: MapBlock
    /// Maps many documents in one call (a JavaScript view: one exchange with a query server per piece of a batch
    /// instead of one per document): for each document — given as its serialized JSON object, spliced from the
    /// stored body without parsing it — its emitted key/value rows. nil: ``map`` per document.
    var batchMap: (@Sendable ([[UInt8]]) throws -> [[(key: JSON, value: JSON?)]])?
    let reduce: Reducer?
    let version: String
    /// Whether design documents (`_design/…`) are mapped too. They are not by default, as in CouchDB and
    /// Couchbase Lite; a design view opts in with `"options": {"include_design": true}`.
    var includeDesign = false
    /// Keys collate in raw (Erlang term) order: the view's `options.collation` is `"raw"`.
    var rawCollation = false
    /// Map functions see `_local_seq` (the document's sequence): the design document's `options.local_seq`.
    var localSeq = false
    /// The only top-level members the map function reads (a Mango index's fields): documents are parsed for those
    /// alone. Nil: the whole document.
    var members: JSONMemberSelector?
    /// A partitioned view (`options.partitioned` in a partitioned database): rows are kept per partition and queried
    /// one partition at a time (``ViewQuery/partition``).
    var partitioned = false

    /// What the stored partial reductions were computed with: they are recomputed when it changes.
    var reduceIdentity: String {
        switch reduce {
        case nil: return ""
        case .builtIn(let b)?: return b.rawValue
        case .custom?, .javascript?: return "custom:" + version
        }
    }
}

/// The process's registered map/reduce functions of one database, by collection and view name.
final class ViewDefinitions: Sendable {
    private let definitions = Mutex<[Int64: [String: ViewDefinition]]>([:])

    static func of(_ database: Database) -> ViewDefinitions {
        database.extensionObject("settee.view-definitions") { ViewDefinitions() }
    }

    func set(_ definition: ViewDefinition?, view: String, collection: Int64) {
        definitions.withLock { $0[collection, default: [:]][view] = definition }
    }

    func get(view: String, collection: Int64) -> ViewDefinition? {
        definitions.withLock { $0[collection]?[view] }
    }
}

extension ViewManager {
    static func register(_ definition: ViewDefinition, view: String, collection: Collection) {
        ViewDefinitions.of(collection.database).set(definition, view: view, collection: collection.id)
    }

    static func unregister(view: String, collection: Collection) {
        ViewDefinitions.of(collection.database).set(nil, view: view, collection: collection.id)
    }

    static func definition(view: String, collection: Collection) -> ViewDefinition? {
        ViewDefinitions.of(collection.database).get(view: view, collection: collection.id)
    }
}
