#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro Swift cannot import; expose it as a function.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }
static inline sqlite3_destructor_type csqlite_static(void) { return SQLITE_STATIC; }

// Turns off SQLite's memory-usage statistics, which take a process-wide mutex on every allocation and
// free. sqlite3_config is variadic (Swift cannot call it) and only works before SQLite initializes, so
// this must run before the first connection opens; afterwards it returns SQLITE_MISUSE and changes nothing.
static inline int csqlite_disable_memory_statistics(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

// Closing the last connection to a WAL database normally checkpoints the WAL into the database file (and syncs it).
// A pool that closes its connections only to free files (hibernating, `max_dbs_open`) skips that: the WAL stays,
// durable as it was, and the next open uses it. (sqlite3_db_config is variadic, which Swift cannot call.)
static inline int csqlite_skip_checkpoint_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
