import Foundation
import Synchronization
import SetteeCore
import SetteeIndex

/// The node's settings as CouchDB presents them: sections of string keys and string values, read and changed at run
/// time through `/_node/{node}/_config` and kept across restarts in `<data>/local.ini` (CouchDB's ini format).
///
/// One set of settings, in layers (a later layer wins):
/// 1. the start-up settings: built-in defaults, then `--config FILE`, then environment variables, then flags
///    (``ServerConfiguration``, shown here under CouchDB's section and key names);
/// 2. changes made through the config API and persisted in `<data>/local.ini` (read at start and by `_reload`);
/// 3. changes made with `X-Couch-Persist: false`, which last until the next restart or `_reload`.
///
/// Deleting a key removes it from layers 2 and 3; a start-up value then applies again. Every setting Settee has is
/// live: ``server`` is re-derived on each change and read per request. Keys Settee does not use are kept and shown
/// as they were set, as CouchDB does.
final class NodeConfig: Sendable {
    /// The effective settings at one moment, shared by the requests that read them.
    final class Snapshot: Sendable {
        /// Every section and key, as `GET /_node/_local/_config` shows them.
        let sections: [String: [String: String]]
        /// The typed settings the node runs with (start-up settings with the config's changes applied).
        let server: ServerConfiguration
        /// Server admins by name: the start-up admin (plain, kept in memory only) and `[admins]` entries (hashed).
        let admins: [String: AdminCredential]

        init(sections: [String: [String: String]], server: ServerConfiguration, admins: [String: AdminCredential]) {
            self.sections = sections
            self.server = server
            self.admins = admins
        }
    }

    /// How a server admin's password is known.
    enum AdminCredential: Sendable, Equatable {
        /// Given at start-up (`--admin`); compared in constant time, never written to disk.
        case startup(password: String)
        /// CouchDB's stored form `-pbkdf2:PRF-DERIVED,SALT,ITERATIONS` (or `-pbkdf2-…` for SHA-1).
        case pbkdf2(prf: String, derivedKey: String, salt: String, iterations: Int)

        /// Parses a stored `[admins]` value; nil for a plain password (which the API hashes before storing).
        init?(stored: String) {
            guard stored.hasPrefix("-pbkdf2") else { return nil }
            var rest = stored.dropFirst("-pbkdf2".count)
            var prf = "sha"
            if rest.hasPrefix(":") {
                guard let dash = rest.firstIndex(of: "-") else { return nil }
                prf = String(rest[rest.index(after: rest.startIndex)..<dash])
                rest = rest[dash...]
            }
            guard rest.hasPrefix("-") else { return nil }
            let parts = rest.dropFirst().split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 3, let iterations = Int(parts[2]), iterations > 0 else { return nil }
            self = .pbkdf2(prf: prf, derivedKey: String(parts[0]).lowercased(), salt: String(parts[1]), iterations: iterations)
        }

        /// The cookie-signing salt: changes when the password does.
        var salt: String {
            switch self {
            case .startup(let password): return "startup:" + password
            case .pbkdf2(_, let key, let salt, _): return salt + ":" + key
            }
        }
    }

    private struct State {
        var startup: ServerConfiguration
        var startupSections: [String: [String: String]]
        /// Persisted changes (`local.ini`): a nil value deletes a start-up key.
        var persisted: [String: [String: String?]]
        /// Changes made with `X-Couch-Persist: false`.
        var runtime: [String: [String: String?]]
        var snapshot: Snapshot
    }

    /// Sections the API may not change (CouchDB's blacklist: code and process settings).
    static let blacklisted: Set<String> = [
        "daemons", "external", "httpd_design_handlers", "httpd_db_handlers", "httpd_global_handlers",
        "native_query_servers", "os_daemons", "query_servers",
    ]

    let file: String
    private let state: Mutex<State>

    /// The start-up settings, with `<data>/local.ini`'s persisted changes applied.
    init(startup: ServerConfiguration, nodeName: String, uuid: String) throws {
        file = (startup.dataDirectory as NSString).appendingPathComponent("local.ini")
        let sections = NodeConfig.sections(of: startup, nodeName: nodeName, uuid: uuid)
        let persisted = try NodeConfig.readFile(file)
        let snapshot = NodeConfig.derive(startup: startup, startupSections: sections, layers: [persisted])
        state = Mutex(State(startup: startup, startupSections: sections, persisted: persisted, runtime: [:],
                            snapshot: snapshot))
        JavaScriptEngine.shared.configure(snapshot.server.javascript)
    }

    /// The current settings (cheap: one lock, one reference).
    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// Whether any server admin exists (otherwise the node is in admin party).
    var hasAdmins: Bool { !snapshot.admins.isEmpty || snapshot.server.passwordAuthenticator != nil }

    /// The value of one key, or nil.
    func value(_ section: String, _ key: String) -> String? { snapshot.sections[section]?[key] }

    /// Sets a key and returns its previous value ("" when it had none). `persist` also writes `local.ini`.
    @discardableResult
    func set(_ section: String, _ key: String, _ value: String, persist: Bool) throws -> String {
        try change(section, key, to: value, persist: persist) ?? ""
    }

    /// Deletes a key and returns its previous value; nil when it had none (the key is then left as it was).
    func delete(_ section: String, _ key: String, persist: Bool) throws -> String? {
        guard self.value(section, key) != nil else { return nil }
        return try change(section, key, to: nil, persist: persist)
    }

    private func change(_ section: String, _ key: String, to value: String?, persist: Bool) throws -> String? {
        try state.withLock { s in
            let old = s.snapshot.sections[section]?[key]
            var persisted = s.persisted
            var runtime = s.runtime
            if persist {
                persisted[section, default: [:]][key] = .some(value)
                runtime[section]?[key] = nil
                try NodeConfig.writeFile(file, NodeConfig.merged(s.startupSections, [persisted]), persisted: persisted)
            } else {
                runtime[section, default: [:]][key] = .some(value)
            }
            s.persisted = persisted
            s.runtime = runtime
            s.snapshot = NodeConfig.derive(startup: s.startup, startupSections: s.startupSections, layers: [persisted, runtime])
            JavaScriptEngine.shared.configure(s.snapshot.server.javascript)
            return old
        }
    }

    /// Re-reads `local.ini`, dropping changes that were not persisted (CouchDB's `POST …/_config/_reload`).
    func reload() throws {
        let persisted = try NodeConfig.readFile(file)
        state.withLock { s in
            s.persisted = persisted
            s.runtime = [:]
            s.snapshot = NodeConfig.derive(startup: s.startup, startupSections: s.startupSections, layers: [persisted])
            JavaScriptEngine.shared.configure(s.snapshot.server.javascript)
        }
    }

    // MARK: Layers

    private static func merged(_ base: [String: [String: String]], _ layers: [[String: [String: String?]]]) -> [String: [String: String]] {
        var sections = base
        for layer in layers {
            for (section, keys) in layer {
                for (key, value) in keys {
                    if let value { sections[section, default: [:]][key] = value } else { sections[section]?[key] = nil }
                }
            }
        }
        return sections.filter { !$0.value.isEmpty || base[$0.key] != nil }
    }

    private static func derive(startup: ServerConfiguration, startupSections: [String: [String: String]],
                               layers: [[String: [String: String?]]]) -> Snapshot {
        let sections = merged(startupSections, layers)
        var admins: [String: AdminCredential] = [:]
        for (name, stored) in sections["admins"] ?? [:] {
            if let credential = AdminCredential(stored: stored) { admins[name] = credential }
        }
        // The start-up admin stays usable by its plain password, unless the config changed or removed it.
        if let admin = startup.admin, sections["admins"]?[admin.username] == startupSections["admins"]?[admin.username],
           sections["admins"]?[admin.username] != nil {
            admins[admin.username] = .startup(password: admin.password)
        }
        return Snapshot(sections: sections, server: ServerSettings.apply(sections, to: startup), admins: admins)
    }

    /// The start-up settings under CouchDB's section and key names.
    static func sections(of c: ServerConfiguration, nodeName: String, uuid: String) -> [String: [String: String]] {
        var sections = ServerSettings.sections(of: c)
        sections["couchdb", default: [:]]["uuid"] = uuid
        sections["couchdb", default: [:]]["database_dir"] = c.dataDirectory
        sections["couchdb", default: [:]]["view_index_dir"] = c.dataDirectory
        sections["vm", default: [:]]["name"] = nodeName
        if let admin = c.admin {
            // Shown hashed as CouchDB shows admins; a cheap count since the plain password is what is checked.
            sections["admins", default: [:]][admin.username] = NodeConfig.startupAdminHash(admin.password)
        }
        return sections
    }

    /// The start-up admin's password as CouchDB's `[admins]` shows one (salted PBKDF2-SHA256). Only displayed:
    /// the start-up admin's password is checked against the flag's value held in memory.
    static func startupAdminHash(_ password: String) -> String {
        let salt = Hex.random(bytes: 16)
        let key = (try? Passwords.derive(password, salt: salt, iterations: 10, prf: "sha256")) ?? ""
        return "-pbkdf2:sha256-\(key),\(salt),10"
    }

    // MARK: local.ini

    /// Reads CouchDB's ini format: `[section]` lines, `key = value` lines, `;` comments. A key with an empty value
    /// records a deletion.
    static func readFile(_ path: String) throws -> [String: [String: String?]] {
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw SetteeError(.storage, "cannot read \(path): \(error.localizedDescription)")
        }
        return parseINI(text)
    }

    static func parseINI(_ text: String) -> [String: [String: String?]] {
        var result: [String: [String: String?]] = [:]
        var section: String?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix(";") || line.hasPrefix("#") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let section, let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty else { continue }
            result[section, default: [:]][key] = .some(value.isEmpty ? nil : unescape(value))
        }
        return result
    }

    /// Writes the persisted changes (atomically, mode 0600: it may hold admin password hashes).
    static func writeFile(_ path: String, _ effective: [String: [String: String]], persisted: [String: [String: String?]]) throws {
        var text = "; Settings changed through /_node/{node}/_config (settee serve); read at start and by _reload.\n"
        for section in persisted.keys.sorted() {
            guard let keys = persisted[section], !keys.isEmpty else { continue }
            text += "\n[\(section)]\n"
            for key in keys.keys.sorted() {
                text += "\(key) = \(keys[key].flatMap { $0 }.map(escape) ?? "")\n"
            }
        }
        let temp = path + ".tmp"
        guard FileManager.default.createFile(atPath: temp, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw SetteeError(.storage, "cannot write \(temp)")
        }
        guard rename(temp, path) == 0 else { throw SetteeError(.storage, "cannot replace \(path): errno \(errno)") }
    }

    /// Values are single lines: newlines and backslashes are escaped (CouchDB's values never hold newlines).
    private static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func unescape(_ value: String) -> String {
        guard value.contains("\\") else { return value }
        var out = "", escaped = false
        for ch in value {
            if escaped { out.append(ch == "n" ? "\n" : ch); escaped = false } else if ch == "\\" { escaped = true } else { out.append(ch) }
        }
        return out
    }

    // MARK: config_whitelist

    /// Whether the API may change `section`/`key` under `[chttpd] config_whitelist`: an Erlang list of
    /// `{Section, Key}` pairs (atoms, "strings" or <<"binaries">>). A value that isn't such a list, and elements
    /// that aren't 2-tuples, are ignored, as CouchDB ignores them.
    static func whitelistAllows(_ whitelist: String?, section: String, key: String) -> Bool {
        guard let whitelist, let pairs = ErlangTermList.pairs(whitelist) else { return true }
        return pairs.contains { $0.0 == section && $0.1 == key }
    }
}

/// A small reader of the Erlang term lists CouchDB's `config_whitelist` holds.
enum ErlangTermList {
    indirect enum Term { case text(String), tuple([Term]), list([Term]) }

    /// The 2-tuples of text of a list term; nil when the text is not one list term.
    static func pairs(_ text: String) -> [(String, String)]? {
        var chars = Array(text.unicodeScalars)[...]
        guard case .list(let items)? = parse(&chars) else { return nil }
        skipSpace(&chars)
        guard chars.isEmpty || (chars.first == "." && chars.dropFirst().allSatisfy { $0.properties.isWhitespace }) else { return nil }
        return items.compactMap {
            if case .tuple(let t) = $0, t.count == 2, case .text(let a) = t[0], case .text(let b) = t[1] { return (a, b) }
            return nil
        }
    }

    /// `[couch_httpd_auth] password_regexp` read as CouchDB reads it (`couch_users_db:validate_password/1`).
    static func passwordRequirements(_ text: String) -> PasswordRequirements {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed == "[]" { return .none }
        var chars = Array(text.unicodeScalars)[...]
        guard case .list(let items)? = parse(&chars) else { return .invalid }
        skipSpace(&chars)
        guard chars.isEmpty || (chars.first == "." && chars.dropFirst().allSatisfy { $0.properties.isWhitespace }) else {
            return .invalid
        }
        var rules: [PasswordRequirements.Rule] = []
        for item in items {
            switch item {
            case .text(let pattern):
                rules.append(.init(pattern: pattern))
            case .tuple(let t) where t.count == 1 || t.count == 2:
                guard case .text(let pattern) = t[0] else { return .invalid }
                var reason: String?
                if t.count == 2 {
                    guard case .text(let r) = t[1] else { return .invalid }
                    reason = r.isEmpty ? nil : r
                }
                rules.append(.init(pattern: pattern, reason: reason))
            default:
                return .invalid
            }
        }
        return .rules(rules)
    }

    private static func skipSpace(_ s: inout ArraySlice<Unicode.Scalar>) {
        while let c = s.first, c.properties.isWhitespace { s.removeFirst() }
    }

    private static func parse(_ s: inout ArraySlice<Unicode.Scalar>) -> Term? {
        skipSpace(&s)
        guard let c = s.first else { return nil }
        switch c {
        case "[", "{":
            s.removeFirst()
            let close: Unicode.Scalar = c == "[" ? "]" : "}"
            var items: [Term] = []
            skipSpace(&s)
            if s.first == close { s.removeFirst(); return c == "[" ? .list(items) : .tuple(items) }
            while true {
                guard let item = parse(&s) else { return nil }
                items.append(item)
                skipSpace(&s)
                guard let next = s.first else { return nil }
                s.removeFirst()
                if next == close { return c == "[" ? .list(items) : .tuple(items) }
                guard next == "," else { return nil }
            }
        case "\"":
            s.removeFirst()
            var out = ""
            while let ch = s.first, ch != "\"" {
                s.removeFirst()
                if ch == "\\", let escaped = s.first {
                    // Erlang string escapes: \\ \" and the control characters.
                    s.removeFirst()
                    switch escaped {
                    case "n": out.unicodeScalars.append("\n")
                    case "t": out.unicodeScalars.append("\t")
                    case "r": out.unicodeScalars.append("\r")
                    default: out.unicodeScalars.append(escaped)
                    }
                } else {
                    out.unicodeScalars.append(ch)
                }
            }
            guard !s.isEmpty else { return nil }
            s.removeFirst()
            return .text(out)
        case "<":
            guard s.starts(with: "<<\"".unicodeScalars) else { return nil }
            s.removeFirst(3)
            var out = ""
            while let ch = s.first, ch != "\"" { out.unicodeScalars.append(ch); s.removeFirst() }
            guard s.starts(with: "\">>".unicodeScalars) else { return nil }
            s.removeFirst(3)
            return .text(out)
        default:
            var out = ""
            while let ch = s.first, ch.properties.isAlphabetic || ch.properties.numericType != nil || ch == "_" || ch == "@" {
                out.unicodeScalars.append(ch)
                s.removeFirst()
            }
            return out.isEmpty ? nil : .text(out)
        }
    }
}
