import Foundation
import Testing

@testable import settee

/// `settee serve --config FILE`: file < environment < flags.
@Suite struct ServeConfigFileTests {
    func write(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "settee-config-\(UUID().uuidString).json"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func fileThenEnvironmentThenFlags() throws {
        let path = try write(#"{"port": 6001, "data": "/srv/a", "peer": ["http://p1"], "full-sync": true, "log_level": "debug", "admin": "a:b"}"#)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let args = try ServeConfigFile.arguments(for: ["serve", "--config", path, "--port", "6003"],
                                                 environment: ["SETTEE_PORT": "6002", "SETTEE_ADMIN": "env:pw"])
        let serve = try #require(try SetteeCommand.parseAsRoot(Array(args)) as? Serve)
        #expect(serve.port == 6003)  // the flag wins over the environment and the file
        #expect(serve.data == "/srv/a")
        #expect(serve.peers == ["http://p1"])
        #expect(serve.fullSync)
        #expect(serve.logLevel == "debug")
        #expect(serve.admin == nil)  // SETTEE_ADMIN is set: the file's admin is not used (serve reads the variable)
        let envOnly = try ServeConfigFile.arguments(for: ["serve", "--config", path], environment: ["SETTEE_PORT": "6002"])
        #expect((try SetteeCommand.parseAsRoot(envOnly) as? Serve)?.port == 6002)
        #expect(try ServeConfigFile.arguments(for: ["get", "db", "x"], environment: [:]) == ["get", "db", "x"])
    }

    @Test func databasesTakeSyncFunctionsInSyncGatewaysShape() throws {
        let path = try write(#"{"databases": {"app": {"sync": "function (doc) { channel(doc.owner); }"}}}"#)
        let bad = try write(#"{"databases": {"app": {"import_docs": true}}}"#)
        defer { for p in [path, bad] { try? FileManager.default.removeItem(atPath: p) } }
        let args = try ServeConfigFile.arguments(for: ["serve", "--config", path], environment: [:])
        let serve = try #require(try SetteeCommand.parseAsRoot(Array(args)) as? Serve)
        #expect(serve.syncFunctions == ["app=function (doc) { channel(doc.owner); }"])
        #expect(throws: (any Error).self) { try ServeConfigFile.arguments(for: ["serve", "--config", bad], environment: [:]) }
    }

    @Test func badFilesAreRefusedClearly() throws {
        let unknown = try write(#"{"bogus": 1}"#)
        let notJSON = try write("port = 5984")
        defer { for p in [unknown, notJSON] { try? FileManager.default.removeItem(atPath: p) } }
        #expect(throws: (any Error).self) { try ServeConfigFile.arguments(for: ["serve", "--config", unknown], environment: [:]) }
        #expect(throws: (any Error).self) { try ServeConfigFile.arguments(for: ["serve", "--config", notJSON], environment: [:]) }
        #expect(throws: (any Error).self) { try ServeConfigFile.arguments(for: ["serve", "--config", "/no/such/file"], environment: [:]) }
    }
}
