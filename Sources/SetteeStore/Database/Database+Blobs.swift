import SetteeCore

/// Attachment bodies, stored once per digest, and other per-database metadata.
extension Database {
    /// The digest attachments are addressed by: `md5-` + base64 of the MD5 of the bytes (CouchDB's form).
    public static func attachmentDigest(_ data: [UInt8]) -> String {
        "md5-" + Base64.encode(MD5.hash(data))
    }

    /// The bytes of an attachment body, or nil if no revision stored it.
    public func blob(digest: String) throws -> [UInt8]? {
        try read { db in
            let stmt = try db.prepare("SELECT data FROM blobs WHERE digest = ?")
            defer { stmt.reset() }
            stmt.bind(digest, at: 1)
            return try stmt.step() ? (stmt.blob(0) ?? []) : nil
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
