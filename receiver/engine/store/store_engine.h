/* store_engine.h: what the backend-neutral store (store.c) asks of a storage
 * engine: store_sqlite.c (the only file that includes sqlite3.h) and
 * store_pg.c (the only file that includes libpq-fe.h). Internal to the
 * store; nothing outside receiver/store*.c includes it. */
#ifndef IDEMHOOK_STORE_ENGINE_H
#define IDEMHOOK_STORE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct store_conn; /* one database connection, defined by its engine */
struct store_db;   /* an engine's state for one struct store */
struct store_engine;

/* The files the store holds open (SQLite: the database, -wal, -shm) as
 * first seen at their paths, kept by store.c for en_files_check. */
#define STORE_FILES_MAX 3
struct store_files {
	int sfs_known[STORE_FILES_MAX];
	uint64_t sfs_dev[STORE_FILES_MAX];
	uint64_t sfs_ino[STORE_FILES_MAX];
	int sfs_lost;    /* one of them is gone from its path: for good, until a restart */
	int sfs_gone;    /* which one (index) */
	int sfs_rescued; /* the WAL has been checkpointed whole since */
};

/* An engine that refuses to open for want of permission says so here
 * (store_open_error); store_create and store_migrate_options clear it
 * first. */
void store_open_denied(void);
/* ... and one that met a lock held past its busy timeout, here. */
void store_open_busy(void);
/* The server could not be reached (logged): store_open_error says
 * STORE_OPEN_UNREACHABLE. */
void store_open_unreachable(void);
/* An engine that received "no room on the disk" (SQLite's SQLITE_FULL,
 * PostgreSQL's disk_full) for any statement says so here, where it logs
 * it (store_full_count). */
void store_note_full(void);

struct store_tx {
	struct store *tx_store; /* NULL while the engine opens the database */
	const struct store_engine *tx_engine;
	struct store_conn *tx_conn;
	int64_t tx_now;
	/* 1 on a lane whose batch has nothing but its COMMIT after the lanes:
	 * a claim's final write may go with it (en_exec_one). */
	int tx_hold;
	/* Set when the unit's step failed on a statement the server cancelled
	 * on its bound (en_timed_out), seen before its savepoint was undone. */
	int tx_timed_out;
};

/* What became of the writer's transaction after a unit failed. */
enum store_tx_state {
	STORE_TXS_OPEN = 0, /* still open: the unit's savepoint was rolled back */
	STORE_TXS_ENDED, /* the engine ended it (SQLite FULL/IOERR/NOMEM): the unit is at fault */
	STORE_TXS_RETRY, /* serialization failure or deadlock: run the whole batch again */
	STORE_TXS_LOST,  /* the connection is gone: every unit transient, reconnect */
};

/* Called for each result row; may take the row's contents and leave it
 * empty. Returns 0 to go on, 1 to stop, -1 to fail. */
typedef int (*store_row_fn)(void *arg, struct store_row *row);

struct store_engine {
	const char *en_name;
	/* 1: several receivers write the same database: a claim inserts its
	 * key first and reads the winner, a batch's claims run sorted by key. */
	int en_shared;
	/* A query with one parameter, a table name: count(*) of such tables. */
	const char *en_sql_has_table;
	/* The application's tables (name), and a table's columns (name, declared
	 * type) in order, with one parameter, the table name. */
	const char *en_sql_tables;
	const char *en_sql_columns;

	/* Opens the database for st's options: a writer connection with the
	 * schema checked and migrated (unless so_no_migrate), or for
	 * so_read_only only the schema check. ret_from/ret_to (may be NULL)
	 * get the schema versions before and after. NULL on failure (logged). */
	struct store_db *(*en_open)(const struct store_options *opt, int *ret_from, int *ret_to);
	void (*en_close)(struct store_db *db);

	/* The writer connection; NULL when the database is open read-only. */
	struct store_conn *(*en_writer)(struct store_db *db);
	/* Before each batch: 0 when the writer connection is usable (PostgreSQL
	 * reconnects a lost one here), -1 otherwise. */
	int (*en_writer_ready)(struct store_db *db);
	/* Optional (NULL: one writer, en_writer's). Opens one more writer
	 * connection, owned by db (en_close closes it), for a writer thread of
	 * its own; NULL on failure (logged). */
	struct store_conn *(*en_writer_add)(struct store_db *db);
	/* With en_writer_add: en_writer_ready's contract for any writer
	 * connection, cn. */
	int (*en_writer_conn_ready)(struct store_db *db, struct store_conn *cn);
	/* A read connection for this thread, held until en_reader_put; nested
	 * gets on one thread return the same connection. With wait 0, NULL
	 * rather than waiting for a pooled one to come free. NULL on failure. */
	struct store_conn *(*en_reader_get)(struct store_db *db, int wait);
	void (*en_reader_put)(struct store_db *db, struct store_conn *cn);

	/* Runs one statement with '?' placeholders (store_run's contract). */
	int (*en_run)(struct store_conn *cn, const char *sql, const struct store_value *params,
	              size_t n_params, store_row_fn fn, void *arg, int64_t *ret_changes);
	/* BEGIN for the writer (write = 1) or a reader. Returns 0 or -1. */
	int (*en_begin)(struct store_conn *cn, int write);
	/* Optional: right after en_begin(cn, 1), the schema version, read so
	 * that no migration can commit between this read and the end of cn's
	 * transaction (SQLite: BEGIN IMMEDIATE holds the write lock that a
	 * migration needs). One statement. Returns 0 or -1 (logged); or 1,
	 * *ret_version untouched, when the engine reads it itself with the
	 * transaction's first statements (PostgreSQL: in the round that
	 * carries BEGIN, no round trip of its own) and fails the transaction
	 * on a version not this binary's: en_schema_found then says which. */
	int (*en_schema_held)(struct store_conn *cn, int *ret_version);
	/* With an en_schema_held that answers 1: after cn's transaction
	 * failed, the version its check found when that failed it (the check
	 * is forgotten: a second call answers -1), else -1. */
	int (*en_schema_found)(struct store_conn *cn);
	/* 1 while cn is inside a transaction. */
	int (*en_in_tx)(struct store_conn *cn);
	/* After a failure on the writer: what became of its transaction. */
	enum store_tx_state (*en_tx_state)(struct store_conn *cn);
	/* The last error code on cn (for the health probe), and what it means
	 * for readiness: NULL when it is no failure once it passed (a lock
	 * that was busy), else a short description. */
	int (*en_last_error)(struct store_conn *cn);
	const char *(*en_error_reason)(int code);
	/* Optional: 1 when the statement that just failed on cn (a lane's
	 * own, not one that unwound with its pass) was cancelled by the
	 * server's bound on a statement (PostgreSQL's statement_timeout or
	 * lock_timeout): the unit waited out that bound on a lock held
	 * elsewhere, and is transient at once rather than made to wait again. */
	int (*en_timed_out)(struct store_conn *cn);
	/* Optional: one bound per batch. on = 1 after a unit of the batch on
	 * the writer cn waited out that bound (en_timed_out): every later lock
	 * wait of the batch, in this transaction and the passes after it, is
	 * cut short, so a second lock held elsewhere costs the batch little
	 * more instead of the bound again. on = 0 when the batch is over.
	 * Returns 0, or -1 when the open transaction could not take it (logged). */
	int (*en_lock_wait_cut)(struct store_conn *cn, int on);

	/* Optional (NULL: the writer runs a batch's units one after another,
	 * each in its savepoint). Runs steps 0..n-1 together inside cn's open
	 * transaction: each step(arg, i, lane) on a lane of its own, a
	 * connection whose statements are held until every lane waits for one
	 * and then go to the server together, in one round trip. Lanes have no
	 * savepoints: when a step fails (returns < 0, or a statement of it
	 * failed) the pass is doomed, the other lanes see their statements
	 * fail and unwind. Returns OPEN when every step returned >= 0 (the
	 * transaction is open and holds their work); ENDED when a step failed
	 * or the engine could not pipeline: roll back and run the batch again
	 * one unit at a time, each in its savepoint, which gives every unit
	 * the outcome a savepoint of its own gives it (a claim step settled
	 * while failing, after en_timed_out, is not run again); RETRY; LOST. hold: the
	 * writes the lanes held back (en_exec_one) may wait for the writer's
	 * next statement after the lanes (the batch's COMMIT); 0: they are sent
	 * and checked before en_lanes returns. */
	enum store_tx_state (*en_lanes)(struct store_conn *cn, size_t n, int hold,
	                                int (*step)(void *arg, size_t i, struct store_conn *lane),
	                                void *arg);
	/* Optional (NULL: en_run and the caller checks the count). Runs a
	 * write whose result is only "it changed exactly one row" (ret_changes
	 * not NULL) or not read at all (ret_changes NULL), for the transaction
	 * to commit (en_run's contract, without rows; store_exec_held). On a
	 * lane the engine may hold it back and send it ahead of the lanes' next
	 * round, or with the writer's next statement outside the lanes (the
	 * batch's COMMIT): a round trip less; *ret_changes is then 1, and if it
	 * changes another number of rows, or fails, the pass is doomed (en_lanes
	 * returns ENDED) or that statement fails and the transaction cannot
	 * commit. Outside the lanes it runs at once and reports the count. */
	int (*en_exec_one)(struct store_conn *cn, const char *sql, const struct store_value *params,
	                   size_t n_params, int64_t *ret_changes);
	/* Optional: round trips to the server made on the writer connection
	 * cn so far (read on cn's own thread). */
	uint64_t (*en_round_trips)(struct store_conn *cn);

	/* Between batches, with nothing of the store locked. Returns 1 when it
	 * ran a checkpoint catch-up (counted), 0 otherwise. */
	int (*en_after_batch)(struct store_db *db);
	/* Pages appended to the WAL so far (SQLite), 0 elsewhere. */
	uint64_t (*en_wal_written)(struct store_db *db);
	/* Optional: the page caches' truncations so far, process-wide: those
	 * passed to the library's cache and those skipped (SQLite). */
	void (*en_cache_truncations)(uint64_t *ret_passed, uint64_t *ret_skipped);
	/* Optional: the pages in the WAL since it last started over, and how
	 * long it has been held past its bound, in seconds (0: not). */
	void (*en_wal_state)(struct store_db *db, uint64_t *ret_pages, double *ret_held_s);

	/* Operations: see store.h. */
	/* busy_since: the writer's heartbeat (read atomically; 0 when idle);
	 * ok_at: when it last committed (read atomically, monotonic ms). */
	void (*en_probe)(struct store_db *db, const int64_t *busy_since, const int64_t *ok_at,
	                 struct store_health *h);
	int (*en_file_stats)(struct store *st, struct store_db *db, struct store_file_stats *ret);
	int (*en_reclaim)(struct store *st, int64_t max_pages, int64_t *ret_pages);
	int (*en_checkpoint)(struct store_db *db);
	/* May be NULL. Whether the files the store holds open are still the
	 * ones at their paths (f: the state of the last calls). Once one is
	 * not, returns 1 every time, with reason set, after copying into the
	 * database file whatever the log it holds open has (the store then
	 * refuses work); else 0. On the probe's thread. */
	int (*en_files_check)(struct store_db *db, struct store_files *f, char *reason,
	                      size_t reason_size);
	int (*en_vacuum)(struct store_db *db);
	/* In the copy's transaction, after its rows: id generators past them. */
	int (*en_after_copy)(struct store_tx *tx);
	/* Named cluster-wide locks: 1 when taken, 0 when another holds it, -1. */
	int (*en_try_lock)(struct store_db *db, const char *name);
	void (*en_unlock)(struct store_db *db, const char *name);
};

extern const struct store_engine store_engine_sqlite;
extern const struct store_engine store_engine_pg;

/* Shared by the engines (store.c). */
void store_health_fail(struct store_health *h, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* Refuses a schema newer than this binary, and an older one unless it is
 * about to be migrated. Returns 0 or -1 (logged). */
int store_version_check(int version, int may_migrate);
/* store_version_check for a store that only reads: a newer schema is read
 * as this binary's, with a notice. Every migration so far keeps each table,
 * view and column an older release reads (a table rebuilt keeps its
 * columns; `events` became a view of the same columns, 0012): a migration
 * that drops or renames one must end this (docs/operations.md, "Upgrading
 * idemhook"). Returns 0 or -1 (logged). */
int store_version_check_read(int version);
/* The engine's statement runner on a connection outside any store. */
int store_conn_exec(const struct store_engine *en, struct store_conn *cn, const char *sql);
/* Copies a row value (NUL-terminated copy for TEXT/BLOB). Returns 0 or -1. */
int store_value_copy(struct store_value *dst, enum store_type type, const void *p, size_t len);

#endif
