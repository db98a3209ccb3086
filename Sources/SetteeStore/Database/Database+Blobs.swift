import SetteeCore

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
    public struct StoredBlob: Sendable {
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
    public func storedBlob(digest: String) throws -> StoredBlob? {
        try read { db in
            let stmt = try db.prepare("SELECT data, encoding FROM blobs WHERE digest = ?")
            defer { stmt.reset() }
            stmt.bind(digest, at: 1)
            return try stmt.step() ? StoredBlob(data: stmt.blob(0) ?? [], encoding: stmt.string(1)) : nil
        }
    }

    /// Which of these digests the database has bodies for.
    public func existingBlobs(_ digests: [String]) throws -> Set<String> {
        guard !digests.isEmpty else { return [] }
        return try read { db in
            let stmt = try db.prepare("SELECT 1 FROM blobs WHERE digest = ?")
            var found = Set<String>()
            for d in digests {
                stmt.bind(d, at: 1)
                if try stmt.step() { found.insert(d) }
                stmt.reset()
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
