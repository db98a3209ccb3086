import ArgumentParser
import Foundation
import Settee

// `settee dump` and `settee load`: a whole data directory (or chosen databases) as JSON lines, with every leaf
// revision (conflicts and tombstones included) and its history, attachments, named collections, `_security`,
// `revs_limit` and index definitions — a logical backup that a newer Settee can load.
//
// Line kinds (each a JSON object on one line):
//   {"settee_dump":1,"created":"…"}                                    header
//   {"db":"name","revs_limit":1000,"security":{…}|null}                a database (comes before its content)
//   {"db":"name","collection":"scope.name"}                            a named collection
//   {"db":"name","blob":"md5-…","data":"base64"}                        an attachment body, before the revisions using it
//   {"db":"name","collection":"s.c"?,"id":"…","rev":"3-…","deleted":false,"history":["3-…","2-…",…],"body":{…}}
//   {"db":"name","collection":"s.c"?,"index":"name","spec":{…}}        an index definition (after the documents)
// `collection` is omitted for the default collection. `_local` documents (replication checkpoints) are not dumped.

/// Writes lines to a file descriptor through a buffer.
final class LineWriter {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    func write(_ value: JSON) throws {
        value.serialize(into: &buffer)
        buffer.append(0x0a)
        if buffer.count >= 1 << 20 { try flush() }
    }

    func flush() throws {
        // A dump is data, not a log: a write that fails stops the dump with an error (never a short file and
        // success).
        let error = buffer.withUnsafeBytes { LogWriter.writeAll(fd, $0) }
        guard error == 0 else { throw SetteeError(.storage, "write failed: \(String(cString: strerror(error)))") }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Progress on stderr, at most twice a second, ending with a summary line.
final class Progress {
    private let verb: String
    private let started = Date()
    private var last = Date.distantPast
    private(set) var count = 0
    private let quiet: Bool

    init(verb: String, quiet: Bool) {
        self.verb = verb
        self.quiet = quiet
    }

    func add(_ n: Int, _ label: String) {
        count += n
        guard !quiet, Date().timeIntervalSince(last) >= 0.5 else { return }
        last = Date()
        let rate = Double(count) / max(Date().timeIntervalSince(started), 0.001)
        LogWriter.standardError.write("\r\(verb) \(count) revisions (\(Int(rate))/s) — \(label)        ")
    }

    func finish(_ summary: String) {
        let secs = Date().timeIntervalSince(started)
        LogWriter.standardError.write("\(quiet ? "" : "\r")\(summary) in \(String(format: "%.2f", secs)) s\u{1B}[K\n")
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write databases as JSON lines (every revision, attachments, collections, _security, indexes).",
        discussion: "A logical backup: `settee load` reads it back. Safe while a server runs on the same data directory (it reads a consistent snapshot per batch of documents). Progress goes to stderr.")
    @OptionGroup var options: DataOptions
    @Argument(help: "Databases to dump (default: all).") var databases: [String] = []
    @Option(name: .shortAndLong, help: "Output file (default: stdout).") var output: String?
    @Flag(help: "No progress on stderr.") var quiet = false

    func run() throws {
        do {
            let names = databases.isEmpty ? Database.names(inDirectory: options.data) : databases
            let fd: Int32
            if let output {
                fd = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                guard fd >= 0 else { throw SetteeError(.notFound, "cannot open \(output) for writing") }
            } else {
                fd = 1
            }
            defer { if fd != 1 { close(fd) } }
            let out = LineWriter(fd: fd)
            let progress = Progress(verb: "dumped", quiet: quiet)
            try out.write(["settee_dump": 1, "created": .string(ISO8601DateFormatter().string(from: Date()))])
            for name in names {
                let db = try options.open(name)
                defer { db.close() }
                try dump(db, to: out, progress: progress)
            }
            try out.flush()
            progress.finish("dumped \(progress.count) revisions from \(names.count) database(s)")
        } catch {
            throw fail(error)
        }
    }

    func dump(_ db: Database, to out: LineWriter, progress: Progress) throws {
        let name = JSON.string(db.name)
        try out.write(["db": name, "revs_limit": .int(Int64(db.revsLimit)), "security": try db.metadata("security") ?? .null])
        var blobsWritten: Set<String> = []
        let manager = try IndexManager.shared(for: db)
        var indexLines: [JSON] = []
        for collection in try db.allCollections() {
            let isDefault = collection.scopeName == "_default" && collection.name == "_default"
            let collectionName: JSON = .string(collection.scopeName + "." + collection.name)
            if !isDefault { try out.write(["db": name, "collection": collectionName]) }
            var ids: [String] = []
            try collection.forEachChange(Collection.ChangesOptions(since: 0)) { ids.append($0.id); return true }
            var start = 0
            while start < ids.count {
                let batch = Array(ids[start..<min(start + 500, ids.count)])
                start += batch.count
                for case let record? in try collection.records(ids: batch, withTree: true) {
                    guard let tree = record.tree else { continue }
                    for index in tree.leafIndices {
                        let leaf = tree.nodes[index]
                        guard let bytes = leaf.body ?? record.revision(leaf.rev)?.body,
                              case .object(let body) = try JSON.parse(bytes) else { continue }
                        for case .object(let meta) in (body["_attachments"]?.objectValue ?? [:]).map(\.value) {
                            guard let digest = meta["digest"]?.stringValue, !blobsWritten.contains(digest),
                                  let data = try db.blob(digest: digest) else { continue }
                            try out.write(["db": name, "blob": .string(digest), "data": .string(Base64.encode(data))])
                            blobsWritten.insert(digest)
                        }
                        var line: JSONObject = ["db": name]
                        if !isDefault { line["collection"] = collectionName }
                        line["id"] = .string(record.id)
                        line["rev"] = .string(leaf.rev.description)
                        line["deleted"] = .bool(leaf.deleted)
                        line["history"] = .array(tree.history(of: leaf.rev).map { .string($0.description) })
                        line["body"] = .object(body)
                        try out.write(.object(line))
                        progress.add(1, db.name)
                    }
                }
            }
            for info in manager.indexes(of: collection) {
                var line: JSONObject = ["db": name]
                if !isDefault { line["collection"] = collectionName }
                line["index"] = .string(info.name)
                line["spec"] = info.spec.json
                indexLines.append(.object(line))
            }
        }
        for line in indexLines { try out.write(line) }
    }
}

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load a `settee dump` (JSON lines) into a data directory.",
        discussion: "Databases and collections are created as needed; revisions are stored as replication stores them (same ids, histories, conflicts and tombstones), so loading into a database that already has some of them is safe. Index definitions are created after the documents. Progress goes to stderr.")
    @OptionGroup var options: DataOptions
    @Argument(help: "The dump file, or - for stdin.") var file: String = "-"
    @Option(help: "Revisions per transaction.") var batch: Int = 1000
    @Flag(help: "No progress on stderr.") var quiet = false

    func run() throws {
        do {
            guard let input = file == "-" ? fdopen(0, "r") : fopen(file, "r") else {
                throw SetteeError(.notFound, "Cannot open \(file)")
            }
            defer { if file != "-" { fclose(input) } }
            let progress = Progress(verb: "loaded", quiet: quiet)
            var open: [String: Database] = [:]
            defer { for db in open.values { db.close() } }
            var blobs: [String: [UInt8]] = [:]
            var pending: [String: (Collection, [RevisionWrite])] = [:]
            var indexes: [(Collection, String, IndexSpec)] = []
            var lineNo = 0
            var sawHeader = false

            func database(_ name: String) throws -> Database {
                if let db = open[name] { return db }
                try DocumentIDs.validateDatabaseName(name)
                let db = try options.open(name, create: !Database.exists(name: name, inDirectory: options.data))
                open[name] = db
                return db
            }
            func collection(_ db: Database, _ qualified: String?) throws -> Collection {
                guard let qualified, qualified != "_default._default" else { return try db.defaultCollection() }
                let parts = qualified.split(separator: ".", maxSplits: 1).map(String.init)
                guard parts.count == 2 else { throw SetteeError(.badRequest, "line \(lineNo): bad collection \(qualified)") }
                return try db.collection(name: parts[1], scope: parts[0]) ?? db.createCollection(name: parts[1], scope: parts[0])
            }
            func flush(_ key: String) throws {
                guard let (c, writes) = pending[key], !writes.isEmpty else { return }
                for (w, result) in zip(writes, try c.write(writes, as: .owner)) {
                    if case .failure(let e) = result {
                        LogWriter.standardError.write("\n\(c.database.name)/\(w.id): \(e.reason)\n")
                    }
                }
                progress.add(writes.count, c.database.name)
                pending[key] = (c, [])
            }

            try forEachLine(input) { number, raw in
                lineNo = number
                guard case .object(let line) = try JSON.parse(raw) else {
                    throw SetteeError(.badRequest, "line \(lineNo): not a JSON object")
                }
                if line["settee_dump"] != nil {
                    guard line["settee_dump"]?.intValue == 1 else {
                        throw SetteeError(.badRequest, "line \(lineNo): unsupported dump version \(line["settee_dump"]!.jsonString)")
                    }
                    sawHeader = true
                    return
                }
                guard sawHeader else { throw SetteeError(.badRequest, "not a settee dump (no header line)") }
                guard let dbName = line["db"]?.stringValue else { throw SetteeError(.badRequest, "line \(lineNo): no db") }
                let db = try database(dbName)
                if let digest = line["blob"]?.stringValue {
                    guard let data = line["data"]?.stringValue.flatMap(Base64.decode) else {
                        throw SetteeError(.badRequest, "line \(lineNo): bad attachment data")
                    }
                    blobs[dbName + "\u{0}" + digest] = data
                } else if let id = line["id"]?.stringValue {
                    let c = try collection(db, line["collection"]?.stringValue)
                    guard case .object(let body)? = line["body"], let history = line["history"]?.arrayValue,
                          let revs = Optional(history.compactMap { $0.stringValue.flatMap(RevID.init) }),
                          revs.count == history.count, !revs.isEmpty else {
                        throw SetteeError(.badRequest, "line \(lineNo): a revision needs body and history")
                    }
                    var used: [(digest: String, data: [UInt8])] = []
                    for case .object(let meta) in (body["_attachments"]?.objectValue ?? [:]).map(\.value) {
                        if let digest = meta["digest"]?.stringValue, let data = blobs[dbName + "\u{0}" + digest] {
                            used.append((digest, data))
                        }
                    }
                    let key = dbName + "\u{0}" + c.scopeName + "." + c.name
                    var entry = pending[key] ?? (c, [])
                    entry.1.append(RevisionWrite(id: id, body: body, deleted: line["deleted"]?.boolValue ?? false,
                                                 mode: .replicated(history: revs), blobs: used))
                    pending[key] = entry
                    if entry.1.count >= max(1, batch) { try flush(key) }
                } else if let index = line["index"]?.stringValue, let spec = line["spec"] {
                    indexes.append((try collection(db, line["collection"]?.stringValue), index, try IndexSpec(json: spec)))
                } else if line["collection"] != nil {
                    _ = try collection(db, line["collection"]?.stringValue)
                } else {
                    if let limit = line["revs_limit"]?.intValue, limit > 0 { try db.setRevsLimit(Int(limit)) }
                    if case .object = line["security"] { try db.setMetadata("security", line["security"]!) }
                }
            }
            for key in pending.keys { try flush(key) }
            for (c, name, spec) in indexes { try IndexManager.shared(for: c.database).createIndex(name, spec: spec, on: c) }
            progress.finish("loaded \(progress.count) revisions into \(open.count) database(s)")
        } catch {
            throw fail(error)
        }
    }
}
