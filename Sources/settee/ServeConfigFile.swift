import ArgumentParser
import Foundation
import Logging
import Settee

/// `settee serve --config FILE` (or `$SETTEE_CONFIG`): a JSON object whose keys are `serve`'s long option names
/// without dashes (`{"data": "/var/lib/settee", "port": 5984, "peer": ["http://…"], "full-sync": true}`).
///
/// Precedence, highest first: command-line flags, environment variables (`SETTEE_DATA`, `SETTEE_HOST`,
/// `SETTEE_PORT`, `SETTEE_LOG_LEVEL`, `SETTEE_LOG_FORMAT`, `SETTEE_PEER_SCAN_INTERVAL`,
/// `SETTEE_ALLOW_INSECURE_CREDENTIALS=1`, `SETTEE_ADMIN`, `SETTEE_PEERS`, `SETTEE_TLS_*`, `SETTEE_CA_FILE`,
/// `SETTEE_JWT_*`), the configuration file, built-in defaults. List settings
/// (`peer`, `jwt-hmac-key`, `jwt-rsa-key`) from the file and the command line are combined.
enum ServeConfigFile {
    /// Settings whose environment variable, when set, wins over the file (the variable is read by `serve` itself).
    static let environmentOverrides: [String: String] = [
        "admin": "SETTEE_ADMIN", "peer": "SETTEE_PEERS", "tls-cert": "SETTEE_TLS_CERT", "tls-key": "SETTEE_TLS_KEY",
        "tls-client-ca": "SETTEE_TLS_CLIENT_CA",
        "ca-file": "SETTEE_CA_FILE", "jwt-hmac-key": "SETTEE_JWT_HMAC_KEY", "jwt-rsa-key": "SETTEE_JWT_RSA_KEY",
    ]
    /// Environment variables turned into flags (between the file's settings and the command line's).
    static let environmentFlags: [(variable: String, flag: String)] = [
        ("SETTEE_DATA", "data"), ("SETTEE_HOST", "host"), ("SETTEE_PORT", "port"), ("SETTEE_LOG_LEVEL", "log-level"),
        ("SETTEE_LOG_FORMAT", "log-format"), ("SETTEE_PEER_SCAN_INTERVAL", "peer-scan-interval"),
    ]

    /// The arguments `serve` is parsed from: the file's settings, then the environment's, then `arguments`.
    static func arguments(for arguments: [String], environment: [String: String]) throws -> [String] {
        guard arguments.first == "serve" else { return arguments }
        var rest = Array(arguments.dropFirst())
        var path = environment["SETTEE_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        if let i = rest.firstIndex(of: "--config") {
            guard i + 1 < rest.count else { throw ValidationError("--config needs a file") }
            path = rest[i + 1]
            rest.removeSubrange(i...(i + 1))
        } else if let i = rest.firstIndex(where: { $0.hasPrefix("--config=") }) {
            path = String(rest[i].dropFirst("--config=".count))
            rest.remove(at: i)
        }
        var injected: [String] = []
        if let path { injected += try flags(fromFile: path, environment: environment) }
        for (variable, flag) in environmentFlags {
            if let value = environment[variable], !value.isEmpty { injected += ["--" + flag, value] }
        }
        if ["1", "true", "yes"].contains(environment["SETTEE_ALLOW_INSECURE_CREDENTIALS"]?.lowercased() ?? ""),
           !rest.contains("--allow-insecure-credentials"), !injected.contains("--allow-insecure-credentials") {
            injected.append("--allow-insecure-credentials")
        }
        return ["serve"] + injected + rest
    }

    static func flags(fromFile path: String, environment: [String: String]) throws -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read the configuration file \(path)")
        }
        let json: JSON
        do { json = try JSON.parse(Array(data)) } catch {
            throw ValidationError("configuration file \(path) is not valid JSON: \(error)")
        }
        guard case .object(let settings) = json else {
            throw ValidationError("configuration file \(path) must hold a JSON object of settings")
        }
        var flags: [String] = []
        let help = Serve.helpMessage(columns: 10_000)
        for (key, value) in settings {
            if key == "databases" {
                // Sync Gateway's shape: {"databases": {"db": {"sync": "function (doc, oldDoc) {…}"}}}.
                guard case .object(let databases) = value else { throw ValidationError("\(path): databases must be an object") }
                for (db, settings) in databases {
                    guard case .object(let one) = settings else { throw ValidationError("\(path): databases.\(db) must be an object") }
                    for (setting, v) in one {
                        guard setting == "sync", let source = v.stringValue else {
                            throw ValidationError("\(path): databases.\(db).\(setting) is not a setting (sync: the sync function)")
                        }
                        flags += ["--sync-function", db + "=" + source]
                    }
                }
                continue
            }
            let name = key.replacingOccurrences(of: "_", with: "-")
            guard name != "config" else { throw ValidationError("\(path): a configuration file can't name another one") }
            guard help.contains("--\(name) ") || help.contains("--\(name)\n") || help.contains("--\(name) <") else {
                throw ValidationError("\(path): unknown setting \"\(key)\" (see `settee serve --help` for the names)")
            }
            if let variable = environmentOverrides[name], let v = environment[variable], !v.isEmpty { continue }
            switch value {
            case .string(let s): flags += ["--" + name, s]
            case .int(let n): flags += ["--" + name, String(n)]
            case .double(let d): flags += ["--" + name, String(d)]
            case .bool(true): flags.append("--" + name)
            case .bool(false), .null: break
            case .array(let items):
                for item in items {
                    guard let s = item.stringValue ?? item.intValue.map(String.init) else {
                        throw ValidationError("\(path): \(key) must be a list of strings")
                    }
                    flags += ["--" + name, s]
                }
            case .object:
                throw ValidationError("\(path): \(key) must be a string, number, boolean or list")
            }
        }
        return flags
    }
}

/// JSON-lines logs (`settee serve --log-format json`): one object per event with `ts`, `level`, `label`,
/// `message` and the event's metadata (route, status, ms, user, …), for log collectors.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logging.Logger.Level = .info
    var metadata: Logging.Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    static let timestamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    func log(event: LogEvent) {
        var fields: [(String, JSON)] = [("ts", .string(Self.timestamp.format(Date()))),
                                        ("level", .string(event.level.rawValue)), ("label", .string(label)),
                                        ("message", .string(event.message.description))]
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) where !["ts", "level", "label", "message"].contains(key) {
            fields.append((key, Self.json(value)))
        }
        var bytes = JSON.object(JSONObject(fields)).serializedBytes
        bytes.append(0x0a)
        // A line that can't be written is dropped and counted, never a trap (``LogWriter``).
        LogWriter.standardError.write(bytes: bytes)
    }

    static func json(_ value: Logging.Logger.Metadata.Value) -> JSON {
        switch value {
        case .string(let s): return Int64(s).map(JSON.int) ?? .string(s)
        case .stringConvertible(let c): return .string(c.description)
        case .array(let a): return .array(a.map(json))
        case .dictionary(let d): return .object(JSONObject(d.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) }))
        }
    }
}
