import ArgumentParser
import Foundation
import Settee

struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or update a document.",
        discussion: "The body is a JSON object given as an argument or on stdin. Include `_rev` to update.")
    @OptionGroup var options: DataOptions
    @Argument(help: "Database name (created if missing).") var db: String
    @Argument(help: "Document id.") var id: String
    @Argument(help: "JSON object body; read from stdin when omitted.") var json: String?

    func run() throws {
        do {
            try DocumentIDs.validateDatabaseName(db)
            let text = try json ?? String(decoding: FileHandle.standardInput.readToEnd() ?? Data(), as: UTF8.self)
            let parsed: JSON
            do { parsed = try JSON.parse(text) } catch { throw SetteeError(.invalidJSON, "\(error)") }
            guard case .object(var body) = parsed else { throw SetteeError(.badRequest, "Document must be a JSON object") }
            let rev = body.removeValue(forKey: "_rev")?.stringValue
            let deleted = body.removeValue(forKey: "_deleted")?.boolValue ?? false
            body.removeValue(forKey: "_id")
            var parent: RevID?
            if let rev {
                guard let r = RevID(rev) else { throw SetteeError(.badRequest, "Invalid rev format") }
                parent = r
            }
            let database = try options.open(db, create: true)
            defer { database.close() }
            let newRev = try database.defaultCollection()
                .write([RevisionWrite(id: id, body: body, deleted: deleted, mode: .edit(parent: parent))], as: .owner)[0].get()
            emit(["ok": true, "id": .string(id), "rev": .string(newRev.description)])
        } catch {
            throw fail(error)
        }
    }
}

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a document.")
    @OptionGroup var options: DataOptions
    @Argument var db: String
    @Argument var id: String
    @Option(help: "A specific revision.") var rev: String?
    @Flag(help: "Include _revisions (the revision history).") var revs = false
    @Flag(help: "Include _conflicts.") var conflicts = false

    func run() throws {
        do {
            let database = try options.open(db)
            defer { database.close() }
            let c = try database.defaultCollection()
            let requested = try rev.map { r -> RevID in
                guard let parsed = RevID(r) else { throw SetteeError(.badRequest, "Invalid rev format") }
                return parsed
            }
            // An older revision's body is kept until compaction.
            guard let record = try c.record(id: id, withTree: true, archived: requested.map { .revisions([$0]) }) else {
                throw SetteeError.missing
            }
            let target = requested ?? record.revID
            if rev == nil && record.deleted { throw SetteeError(.notFound, "deleted") }
            guard let revision = record.revision(target) else { throw SetteeError.missing }
            var doc = try documentJSON(id: id, rev: target, deleted: revision.deleted, body: revision.body)
            if case .object(var o) = doc {
                if revs, let tree = record.tree {
                    let history = tree.history(of: target)
                    o["_revisions"] = ["start": .int(Int64(target.generation)),
                                       "ids": .array(history.map { .string($0.digest) })]
                }
                if conflicts, let tree = record.tree, !tree.conflicts.isEmpty {
                    o["_conflicts"] = .array(tree.conflicts.map { .string($0.description) })
                }
                doc = .object(o)
            }
            emit(doc)
        } catch {
            throw fail(error)
        }
    }
}

struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a document (writes a tombstone revision).")
    @OptionGroup var options: DataOptions
    @Argument var db: String
    @Argument var id: String
    @Option(help: "The current revision.") var rev: String

    func run() throws {
        do {
            guard let parent = RevID(rev) else { throw SetteeError(.badRequest, "Invalid rev format") }
            let database = try options.open(db)
            defer { database.close() }
            let newRev = try database.defaultCollection()
                .write([RevisionWrite(id: id, body: [:], deleted: true, mode: .edit(parent: parent))], as: .owner)[0].get()
            emit(["ok": true, "id": .string(id), "rev": .string(newRev.description)])
        } catch {
            throw fail(error)
        }
    }
}

struct Changes: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the change feed, one JSON line per document.")
    @OptionGroup var options: DataOptions
    @Argument var db: String
    @Option(help: "Only changes after this sequence.") var since: UInt64 = 0
    @Option(help: "At most this many rows.") var limit: Int?
    @Flag(name: .customLong("include-docs"), help: "Include each document's body.") var includeDocs = false

    func run() throws {
        do {
            let database = try options.open(db)
            defer { database.close() }
            var opts = Collection.ChangesOptions(since: since)
            opts.limit = limit
            opts.includeDocs = includeDocs
            var last = since
            try database.defaultCollection().forEachChange(opts) { row in
                var line: JSONObject = ["seq": .int(Int64(row.sequence)), "id": .string(row.id),
                                        "changes": [["rev": .string(row.rev.description)]]]
                if row.deleted { line["deleted"] = true }
                if let body = row.body {
                    line["doc"] = try documentJSON(id: row.id, rev: row.rev, deleted: row.deleted, body: body)
                }
                emit(.object(line))
                last = row.sequence
                return true
            }
            emit(["last_seq": .int(Int64(last))])
        } catch {
            throw fail(error)
        }
    }
}

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print database info, or list databases when no name is given.")
    @OptionGroup var options: DataOptions
    @Argument var db: String?

    func run() throws {
        do {
            guard let db else {
                emit(.array(Database.names(inDirectory: options.data).map(JSON.string)))
                return
            }
            let database = try options.open(db)
            defer { database.close() }
            let counts = try database.defaultCollection().documentCounts()
            let sizes = try database.sizes()
            emit(["db_name": .string(db), "doc_count": .int(Int64(counts.live)),
                  "doc_del_count": .int(Int64(counts.deleted)), "update_seq": .int(Int64(database.lastSequence)),
                  "uuid": .string(database.uuid), "revs_limit": .int(Int64(database.revsLimit)),
                  "sizes": ["file": .int(Int64(sizes.file)), "active": .int(Int64(sizes.active))]])
        } catch {
            throw fail(error)
        }
    }
}

struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Compact a database (drop unreferenced attachments, VACUUM).")
    @OptionGroup var options: DataOptions
    @Argument var db: String

    func run() throws {
        do {
            let database = try options.open(db)
            defer { database.close() }
            let before = try database.sizes().file
            try database.compact()
            emit(["ok": true, "size_before": .int(Int64(before)), "size_after": .int(Int64(try database.sizes().file))])
        } catch {
            throw fail(error)
        }
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import JSON lines (one document per line) into a database.",
        discussion: "Each line is a JSON object; `_id` is used when present. After each committed batch the command prints one `{\"id\",\"rev\"}` line per saved document, so a line on stdout means the document is durable.")
    @OptionGroup var options: DataOptions
    @Argument(help: "Database name (created if missing).") var db: String
    @Argument(help: "File of JSON lines, or - for stdin.") var file: String = "-"
    @Option(help: "Documents per transaction.") var batch: Int = 1000
    @Flag(help: "Print nothing per document, only a summary.") var quiet = false

    func run() throws {
        do {
            try DocumentIDs.validateDatabaseName(db)
            let database = try options.open(db, create: true)
            defer { database.close() }
            let collection = try database.defaultCollection()
            guard let input = file == "-" ? fdopen(0, "r") : fopen(file, "r") else {
                throw SetteeError(.notFound, "Cannot open \(file)")
            }
            var pending: [RevisionWrite] = []
            var saved = 0, failed = 0, lineNo = 0
            let started = Date()
            func flush() throws {
                guard !pending.isEmpty else { return }
                let results = try collection.write(pending, as: .owner)
                for (w, r) in zip(pending, results) {
                    switch r {
                    case .success(let rev):
                        saved += 1
                        if !quiet { emit(["id": .string(w.id), "rev": .string(rev.description)]) }
                    case .failure(let e):
                        failed += 1
                        LogWriter.standardError.write("\(w.id): \(e.reason)\n")
                    }
                }
                pending.removeAll(keepingCapacity: true)
            }
            try forEachLine(input) { number, raw in
                lineNo = number
                guard case .object(var body) = try? JSON.parse(raw) else {
                    failed += 1
                    LogWriter.standardError.write("line \(lineNo): not a JSON object\n")
                    return
                }
                let id = body.removeValue(forKey: "_id")?.stringValue ?? MutableDocument(id: nil).id
                body.removeValue(forKey: "_rev")
                pending.append(RevisionWrite(id: id, body: body, mode: .overwrite))
                if pending.count >= max(1, batch) { try flush() }
            }
            try flush()
            let secs = Date().timeIntervalSince(started)
            LogWriter.standardError.write("imported \(saved) documents (\(failed) failed) in \(String(format: "%.2f", secs))s\n")
        } catch {
            throw fail(error)
        }
    }
}
