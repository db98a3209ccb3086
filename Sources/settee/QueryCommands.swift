import ArgumentParser
import Foundation
import Settee

struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Run a SQL++ query and print one JSON object per row.",
        discussion: """
            Without --db the database is the one named in FROM, e.g. `settee query --data DIR "SELECT name FROM hotels \
            WHERE city = 'Paris'"` reads the default collection of the database `hotels`. With --db, FROM names \
            collections of that database (`_` is its default collection).
            """)
    @OptionGroup var options: DataOptions
    @Option(help: "The database (default: the name in FROM).") var db: String?
    @Option(name: .customLong("param"), help: "A parameter as name=JSON, e.g. --param 'city=\"Paris\"' (repeatable).")
    var params: [String] = []
    @Flag(help: "Print the plan (which index serves the query) instead of the rows.") var explain = false
    @Argument(help: "The SQL++ SELECT statement.") var sql: String

    func run() throws {
        do {
            let statement = try SQLPPParser.parseSelect(sql)
            guard let name = db ?? statement.from?.collection else {
                throw SetteeError(.badRequest, "Name the database with --db or in FROM")
            }
            let database = try options.open(name)
            defer { database.close() }
            var values: [String: JSON] = [:]
            for p in params {
                guard let eq = p.firstIndex(of: "=") else { throw SetteeError(.badRequest, "--param needs name=JSON: \(p)") }
                let key = String(p[..<eq]).trimmingCharacters(in: CharacterSet(charactersIn: "$"))
                let text = String(p[p.index(after: eq)...])
                values[key] = (try? JSON.parse(text)) ?? .string(text)
            }
            let query = try database.createQuery(sql)
            query.parameters = Parameters(values)
            if explain {
                LogWriter.standardOutput.write(try query.explain() + "\n")
                return
            }
            for row in try query.execute() { emit(.object(row.jsonObject)) }
        } catch {
            throw fail(error)
        }
    }
}

struct IndexCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "List, create or delete value indexes.",
        subcommands: [List.self, Create.self, Remove.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print each index as a JSON line.")
        @OptionGroup var options: DataOptions
        @Argument(help: "Database name.") var db: String

        func run() throws {
            do {
                let database = try options.open(db)
                defer { database.close() }
                let manager = try IndexManager.shared(for: database)
                for collection in try database.allCollections() {
                    for info in manager.indexes(of: collection) {
                        var o: JSONObject = ["name": .string(info.name), "collection": .string(info.collectionName)]
                        if case .object(let spec) = info.spec.json { for (k, v) in spec { o[k] = v } }
                        emit(.object(o))
                    }
                }
            } catch {
                throw fail(error)
            }
        }
    }

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create (and build) an index: a value index from expressions, or any kind from --spec.",
            discussion: """
                Examples:
                  settee index create --data DIR hotels TypeName type name --where "type = 'hotel'"
                  settee index create --data DIR colors colors_index --spec '{"type":"vector","expressions":["vector"],"dimensions":3,"centroids":100}'
                The --spec JSON is the same as PUT /{db}/_indexes/{name} takes (value, fulltext, array or vector).
                """)
        @OptionGroup var options: DataOptions
        @Option(help: "A partial index condition (SQL++).") var `where`: String?
        @Option(help: "scope.collection (default: the default collection).") var collection: String?
        @Option(help: "The index definition as JSON (instead of expressions).") var spec: String?
        @Argument(help: "Database name.") var db: String
        @Argument(help: "Index name.") var name: String
        @Argument(help: "SQL++ expressions to index (value index).") var expressions: [String] = []

        func validate() throws {
            if spec == nil && expressions.isEmpty { throw ValidationError("Give SQL++ expressions to index, or --spec JSON") }
            if spec != nil && !expressions.isEmpty { throw ValidationError("Give either expressions or --spec, not both") }
        }

        func run() throws {
            do {
                let database = try options.open(db)
                defer { database.close() }
                let target = try collectionNamed(collection, in: database)
                let started = Date()
                if let spec {
                    try IndexManager.shared(for: database).createIndex(name, spec: try IndexSpec(json: try JSON.parse(spec)), on: target)
                } else {
                    try target.createIndex(withName: name, config: ValueIndexConfiguration(expressions, where: `where`))
                }
                emit(["ok": true, "name": .string(name),
                      "seconds": .double((Date().timeIntervalSince(started) * 1000).rounded() / 1000)])
            } catch {
                throw fail(error)
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Drop an index.")
        @OptionGroup var options: DataOptions
        @Option(help: "scope.collection (default: the default collection).") var collection: String?
        @Argument(help: "Database name.") var db: String
        @Argument(help: "Index name.") var name: String

        func run() throws {
            do {
                let database = try options.open(db)
                defer { database.close() }
                let target = try collectionNamed(collection, in: database)
                guard try target.indexes().contains(name) else { throw SetteeError(.notFound, "No index named \(name)") }
                try target.deleteIndex(forName: name)
                emit(["ok": true])
            } catch {
                throw fail(error)
            }
        }
    }
}

func collectionNamed(_ name: String?, in database: Database) throws -> Settee.Collection {
    guard let name else { return try database.defaultCollection() }
    let parts = name.split(separator: ".", maxSplits: 1).map(String.init)
    let (scope, collection) = parts.count == 2 ? (parts[0], parts[1]) : ("_default", parts[0])
    guard let c = try database.collection(name: collection, scope: scope) else {
        throw SetteeError(.notFound, "No collection \(name)")
    }
    return c
}
