import SetteeCore

/// The on-disk schema and its versioned migrations.
///
/// ```
/// meta(key TEXT PRIMARY KEY, value)          uuid, revs_limit, last_seq, created
/// collections(id, scope, name)               _default._default is id 1
/// docs_<cid>(rowid, id UNIQUE, seq UNIQUE, rev, flags, body, tree, arch)   arch: newest revs_<cid> row of the doc;
///                                            docs_<cid>_deleted: partial index of tombstones (DocumentTable.tombstoneIndexCondition)
/// revs_<cid>(id, doc, rev, body, prev)       bodies of replaced revisions, kept until compaction (doc = docs rowid;
///                                            prev = the document's archived revision before, a chain per document)
/// local_<cid>(id PRIMARY KEY, rev, body)     _local documents
/// blobs(digest PRIMARY KEY, length, data, encoding, sha1)   attachment bodies, stored once by digest; encoding
///                                            NULL (identity) or 'gzip' (data compressed, digest of those bytes);
///                                            sha1: Couchbase Lite's name for the body (`sha1-` of its own bytes),
///                                            recorded once a `_blipsync` exchange needed it (blobs_sha1 indexes it)
/// purges(seq, collection, id)                purged documents, so feed followers (indexes) can drop them
/// expiry(collection, id, expires)            documents' expiration times (ms since 1970), purged when reached
/// routes(collection, id, rev, data)          what a sync function made of each revision (channels, grants; JSON)
/// ```
extension Database {
    static func migrator(revsLimit: Int) -> Migrator {
        var migrator = Migrator()
        migrator.register(1) { db in
            try db.execute("""
                CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
                CREATE TABLE collections(id INTEGER PRIMARY KEY, scope TEXT NOT NULL, name TEXT NOT NULL,
                                         UNIQUE(scope, name));
                CREATE TABLE blobs(digest TEXT PRIMARY KEY, length INTEGER NOT NULL, data BLOB NOT NULL);
                CREATE TABLE purges(seq INTEGER PRIMARY KEY, collection INTEGER NOT NULL, id TEXT NOT NULL);
                """)
            let uuid = Hex.random(bytes: 16)
            try db.prepare("INSERT INTO meta(key, value) VALUES (?, ?)").run([.text("uuid"), .text(uuid)])
            try db.prepare("INSERT INTO meta(key, value) VALUES (?, ?)").run([.text("revs_limit"), .integer(Int64(revsLimit))])
            try db.prepare("INSERT INTO meta(key, value) VALUES (?, ?)").run([.text("last_seq"), .integer(0)])
            try createCollectionTables(db, scope: "_default", name: "_default")
        }
        migrator.register(2) { db in
            // Attachments of compressible types are stored gzip-encoded, as CouchDB stores them.
            try db.execute("ALTER TABLE blobs ADD COLUMN encoding TEXT")
        }
        migrator.register(3) { db in
            // Replaced revisions keep their bodies until compaction, as CouchDB's do.
            // (A database created at this version already has both: migration 1 makes tables as they are now.)
            for cid in try collectionIDs(db) {
                if try !hasColumn(db, table: "docs_\(cid)", column: "arch") {
                    try db.execute("ALTER TABLE docs_\(cid) ADD COLUMN arch INTEGER")
                }
                try db.execute(archiveTableSQL(cid))
            }
        }
        migrator.register(4) { db in
            // Deleted documents counted from an index of their own (database info read the whole table).
            for cid in try collectionIDs(db) { try db.execute(deletedIndexSQL(cid)) }
        }
        migrator.register(5) { db in
            // Couchbase Lite's document expiration: a time per document, purged in the background once reached.
            try db.execute("""
                CREATE TABLE IF NOT EXISTS expiry(collection INTEGER NOT NULL, id TEXT NOT NULL, expires INTEGER NOT NULL,
                                    PRIMARY KEY(collection, id)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS expiry_time ON expiry(expires);
                """)
        }
        migrator.register(6) { db in
            // Couchbase Lite names attachment bodies by the SHA-1 of their bytes; `_blipsync` records that name
            // beside CouchDB's digest the first time it needs it, and looks bodies up by it.
            if try !hasColumn(db, table: "blobs", column: "sha1") {
                try db.execute("ALTER TABLE blobs ADD COLUMN sha1 TEXT")
            }
            try db.execute("CREATE INDEX IF NOT EXISTS blobs_sha1 ON blobs(sha1) WHERE sha1 IS NOT NULL")
        }
        migrator.register(7) { db in
            // A sync function's outcome for each revision (Sync Gateway's channels and grants), written with it.
            try db.execute("""
                CREATE TABLE IF NOT EXISTS routes(collection INTEGER NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL,
                                                  data BLOB NOT NULL, PRIMARY KEY(collection, id, rev)) WITHOUT ROWID;
                """)
        }
        return migrator
    }

    /// Creates the rows and tables of a collection; returns its id.
    @discardableResult
    static func createCollectionTables(_ db: Connection, scope: String, name: String) throws -> Int64 {
        try db.prepare("INSERT INTO collections(scope, name) VALUES (?, ?)").run([.text(scope), .text(name)])
        let cid = db.lastInsertRowID
        try db.execute("""
            CREATE TABLE docs_\(cid)(rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, seq INTEGER NOT NULL UNIQUE,
                                     rev TEXT NOT NULL, flags INTEGER NOT NULL, body BLOB, tree BLOB NOT NULL,
                                     arch INTEGER);
            CREATE TABLE local_\(cid)(id TEXT PRIMARY KEY, rev TEXT NOT NULL, body BLOB NOT NULL) WITHOUT ROWID;
            \(archiveTableSQL(cid))
            \(deletedIndexSQL(cid))
            """)
        return cid
    }

    /// A partial index of the tombstones: `doc_count`/`doc_del_count` are a count of the (small) id index and one
    /// of this, not a read of every row's flags — 0.33 s → 10 ms for a million documents.
    static func deletedIndexSQL(_ cid: Int64) -> String {
        "CREATE INDEX IF NOT EXISTS docs_\(cid)_deleted ON docs_\(cid)(seq) WHERE \(DocumentTable.tombstoneIndexCondition);"
    }

    /// The archive of a collection: the body of every revision a write replaced (a leaf that got a child),
    /// with the document's rowid, until compaction empties it.
    ///
    /// Rows are appended in write order (`id` is always the next rowid), so an update adds its old body at the end
    /// of the table; a table clustered on (doc, rev) would put it beside the document's other revisions, on a page
    /// of its own for each document a batch touches (measured with SQLite alone, 100,000 rows updated in random
    /// order: about 2.5× the time of updates without an archive). There is no index either: each document's row
    /// points at its newest archived revision (`docs_<cid>.arch`) and each archived revision at the one before it
    /// (`prev`), so an update costs one append and a read walks the document's own chain. Every row names its
    /// document, and readers check it, so a chain is never followed into another document's rows.
    static func archiveTableSQL(_ cid: Int64) -> String {
        "CREATE TABLE IF NOT EXISTS revs_\(cid)(id INTEGER PRIMARY KEY, doc INTEGER NOT NULL, rev TEXT NOT NULL, body BLOB, prev INTEGER);"
    }

    /// Whether a table has a column (`PRAGMA table_info`).
    static func hasColumn(_ db: Connection, table: String, column: String) throws -> Bool {
        let info = try db.prepareUncached("PRAGMA table_info(\(table))")
        defer { info.reset() }
        while try info.step() {
            if info.string(1) == column { return true }
        }
        return false
    }
}
