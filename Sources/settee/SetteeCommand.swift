import ArgumentParser
import Foundation
import Settee
import SetteeServer

@main
struct SetteeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settee",
        abstract: "A replicating JSON document database with a CouchDB-compatible HTTP API.",
        subcommands: [Serve.self, Put.self, Get.self, Delete.self, Changes.self, Info.self, Compact.self, Import.self,
                      Replicate.self, QueryCommand.self, IndexCommand.self, Dump.self, Load.self, Healthcheck.self])

    /// Parses the command line — for `serve`, after its configuration file's and environment's settings
    /// (``ServeConfigFile``) — and runs the command.
    static func main() async {
        do {
            let arguments = try ServeConfigFile.arguments(for: Array(CommandLine.arguments.dropFirst()),
                                                          environment: ProcessInfo.processInfo.environment)
            await main(arguments)
        } catch {
            exit(withError: error)
        }
    }
}

/// Options every data command shares.
struct DataOptions: ParsableArguments {
    @Option(name: .long, help: "The data directory (one SQLite file per database).")
    var data: String = "./settee-data"

    /// Opens a database of the data directory with the node's write rules (`validate_doc_update`, `_users` rules,
    /// size limits), as a running node would.
    func open(_ name: String, create: Bool = false) throws -> Database {
        try Database(name: name, config: Node.databaseConfiguration(directory: data), create: create)
    }
}

/// Writes one JSON value as a line on stdout (a write that fails is dropped and counted: ``LogWriter``).
func emit(_ value: JSON) {
    var bytes = value.serializedBytes
    bytes.append(0x0a)
    LogWriter.standardOutput.write(bytes: bytes)
}

/// A document as CouchDB returns it: `_id`, `_rev`, then the body.
func documentJSON(id: String, rev: RevID, deleted: Bool, body: [UInt8]) throws -> JSON {
    var out: JSONObject = ["_id": .string(id), "_rev": .string(rev.description)]
    if deleted { out["_deleted"] = true }
    if case .object(let props) = try JSON.parse(body) {
        for (k, v) in props { out[k] = v }
    }
    return .object(out)
}

/// Maps a store error to a clean message and exit code.
func fail(_ error: any Error) -> ExitCode {
    if let e = error as? SetteeError {
        LogWriter.standardError.write("error: \(e.code.rawValue): \(e.reason)\n")
    } else {
        LogWriter.standardError.write("error: \(error)\n")
    }
    return ExitCode(1)
}

/// Calls `body` with each line of `input` (1-based number, bytes including the newline), skipping blank lines.
func forEachLine(_ input: UnsafeMutablePointer<FILE>, _ body: (Int, UnsafeRawBufferPointer) throws -> Void) throws {
    var linePtr: UnsafeMutablePointer<CChar>?
    var cap = 0
    defer { free(linePtr) }
    var lineNo = 0
    while true {
        let n = getline(&linePtr, &cap, input)
        if n < 0 { break }
        lineNo += 1
        let raw = UnsafeRawBufferPointer(start: linePtr, count: n)
        guard raw.contains(where: { $0 > 0x20 }) else { continue }
        try body(lineNo, raw)
    }
}
