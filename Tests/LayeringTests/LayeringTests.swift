import Foundation
import Testing

/// DESIGN.md's layering: each target imports only targets below it, and each outside library has one owner.
/// SwiftPM does not enforce this; this test does, by reading every `import` in Sources/.
@Suite struct LayeringTests {
    static let allowed: [String: Set<String>] = [
        "SetteeCore": [],
        "SetteeVector": ["SetteeCore"],
        "SetteeStore": ["SetteeCore", "CSQLite", "CZlib"],
        "SetteeSQLPP": ["SetteeCore"],
        "SetteeIndex": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "CICU"],
        "SetteeQuery": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex"],
        "SetteeReplication": ["SetteeCore", "SetteeStore", "AsyncHTTPClient"],
        "SetteeServer": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex", "SetteeQuery",
                         "SetteeReplication", "Hummingbird", "Mustache"],
        "Settee": ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex", "SetteeQuery",
                   "SetteeReplication"],
        // The in-process listener: the embedder's API plus the server (the umbrella stays free of the server).
        "SetteeListener": ["Settee", "SetteeCore", "SetteeStore", "SetteeServer"],
    ]
    /// Modules only their owner (and the CLI / benchmarks, which sit on top) may import.
    static let owned: Set<String> = ["CSQLite", "CZlib", "CICU", "Hummingbird", "AsyncHTTPClient", "ArgumentParser", "Mustache"]

    static var sourcesDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
    }

    static func imports(of target: URL) throws -> Set<String> {
        var found = Set<String>()
        let files = FileManager.default.enumerator(at: target, includingPropertiesForKeys: nil)
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

    @Test func everyTargetImportsOnlyLayersBelowIt() throws {
        let targets = try FileManager.default.contentsOfDirectory(atPath: Self.sourcesDirectory.path)
        #expect(targets.contains("SetteeCore"), "Sources/ not found at \(Self.sourcesDirectory.path)")
        var violations: [String] = []
        for target in targets.sorted() {
            guard let allowed = Self.allowed[target] else { continue }  // CLI, benchmarks: anything
            for module in try Self.imports(of: Self.sourcesDirectory.appendingPathComponent(target)) {
                let isOurs = module.hasPrefix("Settee") || Self.owned.contains(module)
                if isOurs && module != target && !allowed.contains(module) {
                    violations.append("\(target) imports \(module)")
                }
            }
        }
        #expect(violations.isEmpty, "layering violations: \(violations)")
    }

    /// DESIGN.md: "only RemoteEndpoint imports AsyncHTTPClient" — within the replicator too, one file talks HTTP.
    @Test func onlyRemoteEndpointImportsTheHTTPClient() throws {
        let dir = Self.sourcesDirectory.appendingPathComponent("SetteeReplication")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".swift") }
        #expect(files.contains("RemoteEndpoint.swift"))
        for file in files where file != "RemoteEndpoint.swift" {
            let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
            #expect(!text.contains("import AsyncHTTPClient"), "\(file) imports AsyncHTTPClient")
        }
    }

    @Test func pureTargetsDoNoIO() throws {
        for target in ["SetteeCore", "SetteeSQLPP", "SetteeVector"] {
            let dir = Self.sourcesDirectory.appendingPathComponent(target)
            guard FileManager.default.fileExists(atPath: dir.path) else { continue }
            let imports = try Self.imports(of: dir)
            for banned in ["CSQLite", "Glibc", "Darwin", "Dispatch", "NIO", "NIOCore"] {
                #expect(!imports.contains(banned), "\(target) is pure but imports \(banned)")
            }
        }
    }
}
