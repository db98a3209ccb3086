#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro Swift cannot import; expose it as a function.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }
static inline sqlite3_destructor_type csqlite_static(void) { return SQLITE_STATIC; }

// Turns off SQLite's memory-usage statistics, which take a process-wide mutex on every allocation and
// free. sqlite3_config is variadic (Swift cannot call it) and only works before SQLite initializes, so
// this must run before the first connection opens; afterwards it returns SQLITE_MISUSE and changes nothing.
static inline int csqlite_disable_memory_statistics(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

// No up-front page cache allocation per connection: by default each connection's cache allocates 20 pages at its first
// read (160 KB at Settee's 8 KB pages) before it needs them. A node with hundreds of databases open, each with a
// writer and readers, held that for every connection. (SQLITE_CONFIG_PAGECACHE with no buffer and N = 0.)
static inline int csqlite_no_initial_page_cache(void) { return sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0); }

// Closing the last connection to a WAL database normally checkpoints the WAL into the database file (and syncs it).
// A pool that closes its connections only to free files (hibernating, `max_dbs_open`) skips that: the WAL stays,
// durable as it was, and the next open uses it. (sqlite3_db_config is variadic, which Swift cannot call.)
static inline int csqlite_skip_checkpoint_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
