import Foundation
import Testing

/// DESIGN.md's layering, checked against the manifest and the sources:
/// - the library targets' dependencies (ours and outside products) are exactly the ones the design allows, so an
///   upward edge or a new owner of an outside library is a reviewed change of this table;
/// - every target imports only what the manifest declares for it (SwiftPM lets a module see products another
///   target declared; this does not);
/// - every library or executable target imports each dependency it declares (no unused dependencies);
/// - the pure targets do no I/O.
/// The manifest is read with `swift package dump-package`.
@Suite struct LayeringTests {
    /// What each library target may depend on: our targets below it and the outside products it owns.
    static let allowed: [String: Set<String>] = [
        "SetteeCore": [],
        "SetteeVector": [],
        // NIOPosix for one thing: NIOThreadPool, the store's bounded executor for blocking work (`Database.offload`).
        "SetteeStore": ["SetteeCore", "CSQLite", "CZlib", "NIOPosix"],
        "SetteeSQLPP": ["SetteeCore"],
        // BLIP's frames, deflate streams and checksums (zlib), tested without sockets.
        "SetteeBLIP": ["SetteeCore", "CZlib"],
        "SetteeIndex": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "CICU", "Logging"],
        "SetteeQuery": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex"],
        // BLIP and NIO's WebSocket client for `ws://` endpoints (Couchbase Lite's protocol); the session over a
        // WebSocket (BLIPSession) lives here and the server's `_blipsync` route uses it too.
        "SetteeReplication": ["SetteeCore", "SetteeStore", "SetteeBLIP", "AsyncHTTPClient", "NIOCore", "NIOPosix", "NIOHTTP1",
                              "NIOWebSocket", "NIOSSL", "Crypto", "Logging", "Metrics"],
        "SetteeServer": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeIndex", "SetteeQuery", "SetteeReplication",
                         "SetteeBLIP", "NIOWebSocket", "Hummingbird", "HummingbirdCore", "HummingbirdTLS", "HummingbirdHTTP2", "NIOHTTP2", "NIOCore", "NIOHTTP1",
                         "NIOHTTPTypes", "NIOHTTPTypesHTTP1", "NIOSSL", "HTTPTypes", "ServiceLifecycle", "Logging",
                         "Metrics", "Prometheus", "Crypto", "CryptoExtras", "JWTKit", "Mustache"],
        "Settee": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex", "SetteeQuery",
                   "SetteeReplication"],
        // The in-process listener: the embedder's API plus the server (the umbrella stays free of the server).
        "SetteeListener": ["Settee", "SetteeCore", "SetteeServer", "Logging", "ServiceLifecycle", "Crypto", "X509", "SwiftASN1"],
    ]
    /// Modules of the toolchain and the platform, which need no declaration.
    static let system: Set<String> = [
        "Swift", "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch", "Glibc", "Musl", "Darwin",
        "Synchronization", "_Concurrency", "Observation", "Combine", "CoreFoundation", "os", "Testing", "XCTest",
    ]
    /// Products whose modules are named otherwise (swift-metrics' `Metrics` product holds `CoreMetrics`).
    static let productModules: [String: Set<String>] = ["Metrics": ["Metrics", "CoreMetrics"]]

    /// The modules a declared dependency makes importable.
    static func modules(of dependency: String) -> Set<String> { productModules[dependency] ?? [dependency] }

    /// Targets that sit on top and may declare dependencies they only link (test targets spawn the `settee`
    /// executable they depend on).
    static let linkOnly: Set<String> = ["test"]

    static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    struct Target {
        let name: String
        let type: String
        let directory: URL
        /// Declared dependencies by module name (a product's module is named as the product).
        let dependencies: Set<String>
    }

    /// The manifest's targets, from `swift package dump-package` (with a scratch path of its own, so it doesn't wait
    /// for the `.build` lock the running `swift test` holds).
    static func manifestTargets() throws -> [Target] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("settee-layering-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        process.arguments = ["swift", "package", "--package-path", root.path, "--scratch-path", scratch.path, "dump-package"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
              let manifest = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let targets = manifest["targets"] as? [[String: Any]] else {
            throw ManifestError(message: "swift package dump-package failed (status \(process.terminationStatus))")
        }
        return targets.compactMap { t in
            guard let name = t["name"] as? String, let type = t["type"] as? String, type != "system" else { return nil }
            let path = (t["path"] as? String) ?? (type == "test" ? "Tests/\(name)" : "Sources/\(name)")
            var dependencies = Set<String>()
            for dependency in t["dependencies"] as? [[String: Any]] ?? [] {
                for value in dependency.values {
                    if let parts = value as? [Any], let module = parts.first as? String { dependencies.insert(module) }
                }
            }
            return Target(name: name, type: type, directory: root.appendingPathComponent(path), dependencies: dependencies)
        }
    }

    struct ManifestError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// Every module a target's Swift files import.
    static func imports(of directory: URL) throws -> Set<String> {
        var found = Set<String>()
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
        let pattern = try NSRegularExpression(
            pattern: #"^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate)\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)"#,
            options: [.anchorsMatchLines])
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            let range = NSRange(text.startIndex..., in: text)
            for match in pattern.matches(in: text, range: range) {
                if let r = Range(match.range(at: 1), in: text) { found.insert(String(text[r])) }
            }
        }
        return found
    }

    @Test func libraryTargetsDependOnWhatTheDesignAllows() throws {
        let targets = try Self.manifestTargets()
        #expect(targets.contains { $0.name == "SetteeCore" }, "the manifest was not read")
        for (name, allowed) in Self.allowed {
            guard let target = targets.first(where: { $0.name == name }) else {
                Issue.record("\(name) is in the layering table but not in the manifest")
                continue
            }
            let extra = target.dependencies.subtracting(allowed), missing = allowed.subtracting(target.dependencies)
            #expect(extra.isEmpty, "\(name) depends on \(extra.sorted()), which the layering does not allow")
            #expect(missing.isEmpty, "\(name) no longer depends on \(missing.sorted()): update the layering table")
        }
        let libraries = targets.filter { $0.type == "regular" && $0.name.hasPrefix("Settee") && !$0.directory.path.contains("/Tests/") }
        for library in libraries {
            #expect(Self.allowed[library.name] != nil, "\(library.name) is a library target missing from the layering table")
        }
    }

    @Test func everyTargetImportsOnlyWhatItDeclares() throws {
        var violations: [String] = []
        for target in try Self.manifestTargets() {
            guard FileManager.default.fileExists(atPath: target.directory.path) else { continue }
            for module in try Self.imports(of: target.directory)
            where module != target.name && !Self.system.contains(module)
                && !target.dependencies.contains(where: { Self.modules(of: $0).contains(module) }) {
                violations.append("\(target.name) imports \(module) without declaring it")
            }
        }
        #expect(violations.isEmpty, "undeclared imports: \(violations)")
    }

    @Test func noTargetDeclaresADependencyItDoesNotImport() throws {
        var unused: [String] = []
        for target in try Self.manifestTargets() where !Self.linkOnly.contains(target.type) {
            guard FileManager.default.fileExists(atPath: target.directory.path) else { continue }
            let imports = try Self.imports(of: target.directory)
            let hasSwift = FileManager.default.enumerator(atPath: target.directory.path)?
                .contains { ($0 as? String)?.hasSuffix(".swift") == true } ?? false
            guard hasSwift else { continue }
            for dependency in target.dependencies.sorted() where Self.modules(of: dependency).isDisjoint(with: imports) {
                unused.append("\(target.name) declares \(dependency) but never imports it")
            }
        }
        #expect(unused.isEmpty, "unused dependencies: \(unused)")
    }

    /// DESIGN.md: "only RemoteEndpoint imports AsyncHTTPClient" — within the replicator too, one file talks HTTP.
    @Test func onlyRemoteEndpointImportsTheHTTPClient() throws {
        let dir = Self.root.appendingPathComponent("Sources/SetteeReplication")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".swift") }
        #expect(files.contains("RemoteEndpoint.swift"))
        // The remote endpoint is RemoteEndpoint.swift and its extensions (RemoteEndpoint+HTTP.swift, …).
        for file in files where file != "RemoteEndpoint.swift" && !file.hasPrefix("RemoteEndpoint+") {
            let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
            #expect(!text.contains("import AsyncHTTPClient"), "\(file) imports AsyncHTTPClient")
        }
    }

    /// DESIGN.md's one door for writes: the store's write entry point runs the database's admission, and the node
    /// installs its rules on every database it opens (`Node.databaseConfiguration`, `Node.serve`, and the command
    /// line's `DataOptions.open`). What a caller can still get wrong is *who* writes: every store write in the
    /// server, the replicator and the command line names its writer (`write(_:as:)`), so none is made as the
    /// database's owner by default. And nothing else opens a database with a configuration of its own.
    @Test func everyStoreWriteNamesItsWriter() throws {
        let call = try NSRegularExpression(pattern: #"\.write\("#)
        // Writes that are not the store's: streams, channels, files, endpoints, protocol enums.
        let others = ["writer.write(", "out.write(", "body.write(", ".write(toFile", "FileHandle.", "context.write(",
                      "handler.write(", "case .write(", "return .write(", "DocumentInput.write(", "registry.write(",
                      "console.write(", "file.write(", "base.write(", "target.write(", "blip.write(", "Foundation.write(",
                      "handle?.write(", "(.write)", "uuid.write(", "LogWriter.", "Glibc.write(", "Musl.write(",
                      "Darwin.write("]
        let opening = try NSRegularExpression(pattern: #"Database\(name:[^)]*config:\s*DatabaseConfiguration\("#)
        var unnamed: [String] = []
        for target in ["SetteeServer", "SetteeReplication", "settee"] {
            let dir = Self.root.appendingPathComponent("Sources/\(target)")
            let files = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let line = String(line)
                    let range = NSRange(line.startIndex..., in: line)
                    if call.firstMatch(in: line, range: range) != nil, !line.contains("as:"),
                       !line.trimmingCharacters(in: .whitespaces).hasPrefix("//"),
                       !others.contains(where: { line.contains($0) }) {
                        unnamed.append("\(target)/\(file):\(n + 1): \(line.trimmingCharacters(in: .whitespaces))")
                    }
                    if opening.firstMatch(in: line, range: range) != nil {
                        unnamed.append("\(target)/\(file):\(n + 1) opens a database without the node's write rules")
                    }
                }
            }
        }
        #expect(unnamed.isEmpty, "store writes that don't name their writer: \(unnamed)")
    }

    /// The store's tables (documents, revisions, local documents, purges, blobs, expiry, collections, meta) are
    /// read and written by SQL in SetteeStore only: followers (indexes, views, queries, the server) go through its
    /// API — the change feed (`ChangeFeed`), `DocumentTable`'s column lists, `Connection.metaValue` — or the table
    /// names the store hands them (`Collection.docsTable`), never their own spelling of the schema.
    @Test func onlyTheStoreSpellsItsTables() throws {
        let sql = try NSRegularExpression(pattern:
            #"\b(FROM|INTO|UPDATE|JOIN|TABLE)\s+"?(docs_\d|revs_\d|local_\d|purges\b|blobs\b|expiry\b|collections\b|meta\b)"#,
            options: [.caseInsensitive])
        var found: [String] = []
        let sources = Self.root.appendingPathComponent("Sources")
        let targets = (try FileManager.default.contentsOfDirectory(atPath: sources.path)).filter { $0 != "SetteeStore" }
        for target in targets {
            let dir = sources.appendingPathComponent(target)
            let files = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where sql.firstMatch(in: String(line), range: NSRange(line.startIndex..., in: line)) != nil {
                    found.append("\(target)/\(file):\(n + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "SQL on the store's tables outside SetteeStore: \(found)")
    }

    /// Other targets' SQL names the document table and its columns through `DocumentTable` (the table aliased, its
    /// columns, the join from an index row, the clean-up subqueries), never by spelling them: a column the store
    /// renames or adds is changed in one place.
    @Test func theDocumentTableIsNamedThroughItsHelper() throws {
        let spelled = try NSRegularExpression(pattern: #"\bdocsTable\b|"[^"]*\bd\.(rowid|id|seq|rev|flags|body|tree)\b[^"]*""#)
        var found: [String] = []
        let sources = Self.root.appendingPathComponent("Sources")
        for target in try FileManager.default.contentsOfDirectory(atPath: sources.path) where target != "SetteeStore" {
            let dir = sources.appendingPathComponent(target)
            let files = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//")
                    && spelled.firstMatch(in: String(line), range: NSRange(line.startIndex..., in: line)) != nil {
                    found.append("\(target)/\(file):\(n + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "the document table spelled outside SetteeStore: \(found)")
    }

    @Test func pureTargetsDoNoIO() throws {
        for target in ["SetteeCore", "SetteeSQLPP", "SetteeVector", "SetteeBLIP"] {
            let imports = try Self.imports(of: Self.root.appendingPathComponent("Sources/\(target)"))
            for banned in ["CSQLite", "Glibc", "Darwin", "Dispatch", "NIO", "NIOCore"] {
                #expect(!imports.contains(banned), "\(target) is pure but imports \(banned)")
            }
        }
        // SetteeCore, SetteeVector and SetteeBLIP don't import Foundation at all.
        for target in ["SetteeCore", "SetteeVector", "SetteeBLIP"] {
            let imports = try Self.imports(of: Self.root.appendingPathComponent("Sources/\(target)"))
            #expect(!imports.contains("Foundation"), "\(target) is pure but imports Foundation")
        }
    }
}
