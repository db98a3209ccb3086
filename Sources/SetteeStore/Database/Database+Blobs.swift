import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The C library's file calls, named apart from `Database`'s own `read` and `close`.
private func systemOpen(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
public import SetteeCore

/// Attachment bodies, stored once per digest, and other per-database metadata.
extension Database {
    /// The digest attachments are addressed by: `md5-` + base64 of the MD5 of the bytes (CouchDB's form).
    public static func attachmentDigest(_ data: [UInt8]) -> String {
        "md5-" + Base64.encode(MD5.hash(data))
    }

    /// The bytes of an attachment body (decoded when stored gzip-encoded), or nil if no revision stored it.
    public func blob(digest: String) throws -> [UInt8]? {
        guard let stored = try storedBlob(digest: digest) else { return nil }
        return try stored.identity()
    }

    /// An attachment body as stored: its bytes and their encoding.
    package struct StoredBlob: Sendable {
        /// The stored bytes (compressed when ``encoding`` is set).
        public var data: [UInt8]
        /// `gzip`, or nil for identity.
        public var encoding: String?

        /// The attachment's own bytes.
        public func identity() throws -> [UInt8] {
            guard encoding == "gzip" else { return data }
            return try Gzip.decompress(data, limit: Int.max)
        }
    }

    /// An attachment body as stored (compressed ones stay compressed), or nil if no revision stored it.
    package func storedBlob(digest: String) throws -> StoredBlob? {
        try read { db in
            let stmt = try db.prepare("SELECT data, encoding FROM blobs WHERE digest = ?")
            defer { stmt.reset() }
            stmt.bind(digest, at: 1)
            return try stmt.step() ? StoredBlob(data: stmt.blob(0) ?? [], encoding: stmt.string(1)) : nil
        }
    }

    /// The size and encoding of an attachment body as stored, without reading it; nil if no revision stored it.
    public func blobInfo(digest: String) throws -> (length: Int, encoding: String?)? {
        try read { db in
            let stmt = try db.prepare("SELECT length, encoding FROM blobs WHERE digest = ?")
            defer { stmt.reset() }
            stmt.bind(digest, at: 1)
            return try stmt.step() ? (stmt.int(0), stmt.string(1)) : nil
        }
    }

    /// Up to `count` bytes of an attachment body as stored, from `offset` (SQLite's incremental blob I/O: only
    /// the pages holding them are read). Nil if the body is gone (compacted away since it was looked up).
    public func readBlob(digest: String, offset: Int, count: Int) throws -> [UInt8]? {
        try read { db in
            let find = try db.prepare("SELECT rowid, length FROM blobs WHERE digest = ?")
            defer { find.reset() }
            find.bind(digest, at: 1)
            guard try find.step() else { return nil }
            let rowid = Int64(find.int(0)), length = find.int(1)
            let n = max(0, min(count, length - offset))
            guard n > 0 else { return [] }
            var blob: OpaquePointer?
            let rc = sqlite3_blob_open(db.handle, "main", "blobs", "data", rowid, 0, &blob)
            defer { sqlite3_blob_close(blob) }
            guard rc == SQLITE_OK else { throw SQLiteError(resultCode: rc, db: db.handle) }
            var out = [UInt8](repeating: 0, count: n)
            let read = out.withUnsafeMutableBytes { sqlite3_blob_read(blob, $0.baseAddress, Int32(n), Int32(offset)) }
            guard read == SQLITE_OK else { throw SQLiteError(resultCode: read, db: db.handle) }
            return out
        }
    }

    // MARK: Couchbase Lite's names

    /// The digest of a stored body whose own bytes have this SHA-1 (`sha1-` + base64, Couchbase Lite's name for a
    /// blob), if the database holds one and has recorded that name (``recordSHA1(_:)``); an identity-encoded body
    /// is preferred to a compressed one.
    public func blobDigest(sha1: String) throws -> String? {
        try read { db in
            let stmt = try db.prepare("SELECT digest FROM blobs WHERE sha1 = ? ORDER BY encoding IS NOT NULL LIMIT 1")
            defer { stmt.reset() }
            stmt.bind(sha1, at: 1)
            return try stmt.step() ? stmt.string(0) : nil
        }
    }

    /// The SHA-1 name recorded for a stored body (see ``blobDigest(sha1:)``), or nil when none was recorded or
    /// the body is not stored.
    public func blobSHA1(digest: String) throws -> String? {
        try read { db in
            let stmt = try db.prepare("SELECT sha1 FROM blobs WHERE digest = ?")
            defer { stmt.reset() }
            stmt.bind(digest, at: 1)
            return try stmt.step() ? stmt.string(0) : nil
        }
    }

    /// Records the SHA-1 names of stored bodies, by digest (bodies not stored are skipped). The caller computes
    /// them from the bodies' own bytes; the store keeps no hash of its own but CouchDB's.
    public func recordSHA1(_ names: [String: String]) throws {
        guard !names.isEmpty else { return }
        try write { db in try db.recordSHA1(names) }
    }

    /// Which of these digests the database has bodies for.
    public func existingBlobs(_ digests: [String]) throws -> Set<String> {
        guard !digests.isEmpty else { return [] }
        return try read { db in
            var found = Set<String>()
            for d in digests where try db.int64("SELECT 1 FROM blobs WHERE digest = ?", [.text(d)]) != nil {
                found.insert(d)
            }
            return found
        }
    }

    /// A value kept in the database's `meta` table (e.g. the `_security` object), or nil.
    public func metadata(_ key: String) throws -> JSON? {
        try read { db in
            let stmt = try db.prepare("SELECT value FROM meta WHERE key = ?")
            defer { stmt.reset() }
            stmt.bind("x-" + key, at: 1)
            guard try stmt.step(), let text = stmt.string(0) else { return nil }
            return try? JSON.parse(text)
        }
    }

    /// Stores a JSON value in the database's `meta` table.
    public func setMetadata(_ key: String, _ value: JSON) throws {
        let text = value.jsonString
        try write { db in
            try db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)").run([.text("x-" + key), .text(text)])
        }
    }
}

extension Connection {
    /// Records SHA-1 names of stored bodies, by digest, inside the caller's transaction.
    func recordSHA1(_ names: [String: String]) throws {
        try withStatement("UPDATE blobs SET sha1 = ? WHERE digest = ? AND sha1 IS NULL") { update in
            for (digest, sha1) in names {
                update.bind(sha1, at: 1)
                update.bind(digest, at: 2)
                _ = try update.step()
                update.reset()
            }
        }
    }

    /// Stores a staged attachment body (unless one with its digest is stored): a row of the file's length, then
    /// the file copied into it a megabyte at a time (SQLite's incremental blob I/O), so the body is never whole in
    /// memory. Runs inside the caller's transaction.
    /// - Throws: ``SetteeError`` `.internalError` if the file can't be read or isn't the length staged.
    func insertStagedBlob(_ staged: StagedBlob) throws {
        try withStatement("INSERT OR IGNORE INTO blobs(digest, length, data, encoding) VALUES (?, ?, zeroblob(?), ?)") { insert in
            insert.bind(staged.digest, at: 1)
            insert.bind(staged.length, at: 2)
            insert.bind(staged.length, at: 3)
            insert.bind(staged.encoding, at: 4)
            _ = try insert.step()
        }
        guard changes == 1 else { return }  // stored already: bodies are addressed by their digest
        let rowid = lastInsertRowID
        let fd = systemOpen(staged.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SetteeError(.internalError, "staged attachment \(staged.path) can't be read") }
        defer { _ = systemClose(fd) }
        var blob: OpaquePointer?
        let rc = sqlite3_blob_open(handle, "main", "blobs", "data", rowid, 1, &blob)
        defer { sqlite3_blob_close(blob) }
        guard rc == SQLITE_OK else { throw SQLiteError(resultCode: rc, db: handle) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        while offset < staged.length {
            let got = buffer.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, min($0.count, staged.length - offset)) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { throw SetteeError(.internalError, "staged attachment \(staged.path) is shorter than staged") }
            let wrote = buffer.withUnsafeBytes { sqlite3_blob_write(blob, $0.baseAddress, Int32(got), Int32(offset)) }
            guard wrote == SQLITE_OK else { throw SQLiteError(resultCode: wrote, db: handle) }
            offset += got
        }
    }
}

extension Connection {
    /// A value of the database's `meta` table inside the caller's transaction, or nil. Keys of the store's own
    /// (`uuid`, `last_seq`, …) and of its followers (the index and view managers) share the table: followers name
    /// theirs so that they cannot meet the store's.
    package func metaValue(_ key: String) throws -> String? {
        try withStatement("SELECT value FROM meta WHERE key = ?", [.text(key)]) { try $0.step() ? $0.string(0) : nil }
    }

    /// Sets (or, with nil, removes) a value of the `meta` table inside the caller's transaction.
    package func setMetaValue(_ key: String, _ value: String?) throws {
        if let value {
            try withStatement("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [.text(key), .text(value)]) { _ = try $0.step() }
        } else {
            try withStatement("DELETE FROM meta WHERE key = ?", [.text(key)]) { _ = try $0.step() }
        }
    }
}
