/* store.h: the idempotency store and the only SQL seam of idemhook.
 *
 * One writer thread owns the only write connection. Callers hand it work:
 * idempotency claims (store_submit_async, or store_submit to wait) and plain
 * write functions (store_write). Work that is queued together commits in one
 * transaction and one fsync (group commit); each unit runs inside its own
 * SAVEPOINT, so one failure rolls back only itself. A checkpoint thread keeps
 * WAL checkpoints off the commit path. Reads run on per-thread read
 * connections.
 *
 * Handlers and modules talk SQL through store_exec/store_query/store_query_each
 * with '?' placeholders and the portable subset SQLite and PostgreSQL share
 * (INSERT ... ON CONFLICT DO NOTHING, RETURNING, conditional UPDATE). Two
 * engines implement this header (store_engine.h): SQLite (store_sqlite.c, the
 * only file that includes sqlite3.h; one receiver per file) and PostgreSQL
 * (store_pg.c, the only file that includes libpq-fe.h; any number of
 * receivers on one database). */
#ifndef IDEMHOOK_STORE_H
#define IDEMHOOK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "reply.h"

struct store;
struct store_tx; /* a unit of work inside the current transaction */

/* ---- values and rows ---- */

enum store_type {
	STORE_NULL = 0,
	STORE_INT,
	STORE_TEXT,
	STORE_BLOB,
};

/* A parameter (borrowed pointers) or a result column (owned copies). */
struct store_value {
	enum store_type sv_type;
	int64_t sv_int;
	const char *sv_text; /* TEXT/BLOB bytes; NUL-terminated in results */
	size_t sv_len; /* TEXT/BLOB length; for parameters 0 means strlen for TEXT */
};

static inline struct store_value store_int(int64_t v)
{
	struct store_value sv = {.sv_type = STORE_INT, .sv_int = v};
	return sv;
}

/* NULL text becomes SQL NULL. */
static inline struct store_value store_text(const char *s)
{
	struct store_value sv = {.sv_type = s != NULL ? STORE_TEXT : STORE_NULL, .sv_text = s};
	return sv;
}

static inline struct store_value store_blob(const void *p, size_t len)
{
	struct store_value sv = {.sv_type = STORE_BLOB, .sv_text = (const char *)p, .sv_len = len};
	return sv;
}

static inline struct store_value store_null(void)
{
	struct store_value sv = {.sv_type = STORE_NULL};
	return sv;
}

#define STORE_ROW_MAX 48 /* columns a query may return (idempotency_records has 36) */

struct store_row {
	size_t sr_n;
	struct store_value sr_cols[STORE_ROW_MAX]; /* sv_text owned by the row */
};

void store_row_finish(struct store_row *row);
/* Column accessors: 0 / NULL for SQL NULL or an index out of range. */
int64_t store_row_int(const struct store_row *row, size_t i);
const char *store_row_text(const struct store_row *row, size_t i);
int store_row_is_null(const struct store_row *row, size_t i);

/* ---- statements inside a unit of work ---- */

/* Runs one statement. ret_changes (may be NULL) gets the rows changed.
 * Returns 0, or -1 on error (logged here, once). */
int store_exec(struct store_tx *tx, const char *sql, const struct store_value *params, size_t n_params,
	       int64_t *ret_changes);

/* Runs a write whose result the caller uses only as "it changed exactly
 * one row" (ret_changes not NULL: *ret_changes gets the rows changed) or
 * not at all (ret_changes NULL). On SQLite, and outside a batch's lanes,
 * it is store_exec. On PostgreSQL, while a batch's claims run side by side
 * on lanes, it may be held back and sent ahead of the lane's next statement
 * (the same pipelined round, so the order on the connection is kept) or
 * with the batch's COMMIT: a round trip less. *ret_changes is then 1; if
 * the write fails or changes another number of rows the pass is doomed
 * (nothing of it is committed) and the batch runs again one unit at a
 * time, each in its savepoint, where this runs at once and reports the
 * real count. So a caller acts on a count other than 1 only inside its
 * unit (as after a savepoint), and reads no row back from the write.
 * Returns 0, or -1 on error (logged). */
int store_exec_held(struct store_tx *tx, const char *sql, const struct store_value *params,
		    size_t n_params, int64_t *ret_changes);

/* Runs a query and copies its first row into ret_row (finish it after).
 * Returns 1 when a row came back, 0 when none (ret_row untouched), -1 on error. */
int store_query(struct store_tx *tx, const char *sql, const struct store_value *params, size_t n_params,
		struct store_row *ret_row);

/* Calls fn for each row (borrowed for the call). fn returns 0 to go on,
 * 1 to stop early, -1 to fail. Returns 0, or -1 on error. */
int store_query_each(struct store_tx *tx, const char *sql, const struct store_value *params, size_t n_params,
		     int (*fn)(void *arg, const struct store_row *row), void *arg);

/* 1 when several receivers may write this database at once (PostgreSQL):
 * queries may then add row locks such as FOR UPDATE SKIP LOCKED, which
 * SQLite (one writer) neither has nor needs. */
int store_tx_shared(const struct store_tx *tx);

/* 1 when the database has a table of that name, 0 when not, -1 on error. */
int store_has_table(struct store_tx *tx, const char *name);

/* The database's own tables (not the engine's bookkeeping), by name: fn
 * gets each name (borrowed). Returns 0 or -1. */
int store_tables(struct store_tx *tx, int (*fn)(void *arg, const char *name), void *arg);

/* A table's columns in order: fn gets each name and whether it holds
 * binary data (declared BLOB / bytea). Returns 0 or -1. */
int store_columns(struct store_tx *tx, const char *table,
		  int (*fn)(void *arg, const char *name, int is_blob), void *arg);

/* The time of the unit of work in ms since the epoch (the caller's clock). */
int64_t store_tx_now(const struct store_tx *tx);

/* ---- opening ---- */

/* enum store_sync and enum store_backend are configuration: config.h. */

struct store_options {
	enum store_backend so_backend;
	const char *so_path; /* SQLite: database file; its directory is created if missing */
	const char *so_conninfo; /* PostgreSQL: libpq connection string or URI */
	unsigned so_pool_size; /* PostgreSQL: read connections, default 4 */
	/* PostgreSQL: writer threads, each with its connection and its own
	 * batches (transactions), default 2 (STORE_PG_WRITERS_DEFAULT); SQLite
	 * always has one. */
	unsigned so_pg_writers;
	unsigned so_statement_timeout_ms; /* PostgreSQL: per statement, default 5000 */
	/* PostgreSQL: the application_name of every connection, over the
	 * conninfo's; NULL: each names its role ("idemhook writer", ...) unless
	 * the conninfo sets one. `store copy` names its own so that it can
	 * tell receivers' sessions from its own in pg_stat_activity. */
	const char *so_pg_application_name;
	enum store_sync so_sync;
	unsigned so_batch_max; /* units per transaction, default 256; 1 = no group commit */
	unsigned so_busy_timeout_ms; /* default 5000 */
	/* SQLite: warn when the WAL has been held past its bound this long
	 * (a read transaction kept open); default 10,000 ms. */
	unsigned so_wal_held_warn_ms;
	/* The nice value of the writer threads, -20 to 0; 0 leaves them as
	 * the process is (store.c, store_writer_priority). */
	int so_writer_nice;
	int so_read_only; /* CLI readers: no writer thread, no migrations */
	int so_no_migrate; /* refuse to run when migrations are pending */
	/* SQLite: refuse a database file that does not exist rather than
	 * create it (a command that only reads or changes what is stored:
	 * gc). so_read_only and so_no_migrate imply it. Either way a missing
	 * file is refused before anything is made: no directory, no
	 * PATH.lock. PostgreSQL: ignored (the server's database must exist). */
	int so_must_exist;
	/* SQLite: one receiver per file. Takes a write lock on PATH.lock (an
	 * open-file-description fcntl lock) for the life of the store and
	 * refuses to open while another store holds it. `serve` and `store
	 * copy` set it; other commands do not, so they run beside `serve`.
	 * PostgreSQL: ignored (any number of receivers). */
	int so_exclusive;
	/* A filter of the keys the database may hold, kept in memory, so that
	 * a claim of a key never stored goes to the writer without first
	 * reading for a stored reply (SQLite; ignored where receivers share
	 * the database). `serve` sets it. so_key_filter_min: the keys the
	 * first filter has room for (0: about a million); it grows. */
	int so_key_filter;
	size_t so_key_filter_min;
};

/* Parses a store location into opt's backend and path/conninfo (pointers
 * into loc, which must outlive opt): "sqlite:PATH", "postgresql:CONNINFO"
 * (also "postgres:" and "postgresql://..." / "postgres://..." URIs) or a bare
 * PATH (SQLite). A bare path that starts as a scheme does ("word:", a
 * mistyped "postgresq:dbname=x") is refused, not taken for a file name: write
 * sqlite:PATH or ./PATH for a file whose name has a colon. Returns 0, or -1
 * for an empty location or an unknown scheme. Used by commands that name a
 * store on the command line (store copy, tests). */
int store_location_parse(const char *loc, struct store_options *opt);

/* After rows were inserted with explicit ids (store copy), in the same
 * write transaction: moves every id generator of the schema (every
 * identity column the catalogue lists) past the largest id in its table,
 * so new rows do not collide. A no-op where ids come from the rows
 * themselves (SQLite). Returns 0, or -1 (logged). */
int store_after_copy(struct store_tx *tx);

/* The backend a store was opened on. */
enum store_backend store_backend_of(const struct store *st);

/* Opens (creating) the database, applies pending migrations (unless
 * so_no_migrate or so_read_only) and starts the writer thread. A database
 * whose user_version is newer than this binary knows is refused untouched.
 * Returns NULL on failure (logged). */
struct store *store_create(const struct store_options *opt);

/* Why the last store_create or store_migrate_options of this thread
 * failed. STORE_OPEN_DENIED: the operating system's permissions refused
 * what the command needs (a SQLite file it may not read or write, a
 * directory it may not create a file in); the cause and its fix are
 * logged. STORE_OPEN_BUSY: another connection held the write lock past
 * the busy timeout (a migration could not start or commit): what was not
 * committed whole is unchanged, and a new try may pass.
 * STORE_OPEN_UNREACHABLE: the database server could not be reached
 * (PostgreSQL). The CLI exits 77 (EX_NOPERM), 75 (EX_TEMPFAIL) and 69 for
 * the rest; migrate 65 for a schema it refuses. */
enum store_open_error {
	STORE_OPEN_FAILED = 0,
	STORE_OPEN_DENIED,
	STORE_OPEN_BUSY,
	STORE_OPEN_UNREACHABLE,
};
enum store_open_error store_open_error(void);

/* How many statements of this process have failed because the disk had
 * no room (SQLite: SQLITE_FULL, or an I/O error with ENOSPC or EDQUOT;
 * PostgreSQL: SQLSTATE 53100 disk_full), on any store and any thread.
 * A command compares it before and after to tell a full disk from a busy
 * or failing database: running it again does not help until space is
 * freed. */
uint64_t store_full_count(void);

/* Finishes queued work, stops the writer, closes connections. NULL is a no-op. */
void store_destroy(struct store *st);

/* Applies pending migrations to the file at path and returns 0, or -1.
 * ret_from/ret_to (may be NULL) get the versions before and after. */
int store_migrate(const char *path, int *ret_from, int *ret_to);

/* store_migrate for any backend: opt names the database (so_read_only and
 * so_no_migrate are ignored). On PostgreSQL the migrations run under an
 * advisory lock, so receivers starting together migrate once. Each
 * migration commits whole or not at all: on failure ret_from/ret_to get
 * the version found and the one reached (-1 when not known). */
int store_migrate_options(const struct store_options *opt, int *ret_from, int *ret_to);

/* The schema version this binary brings. */
int store_schema_version(void);

/* ---- idempotency claims ---- */

enum store_outcome {
	STORE_NEW = 0, /* the handler ran and committed; its reply is stored */
	STORE_REPLAYED, /* done/failed record, same fingerprint: stored reply */
	STORE_MISMATCH, /* done/failed record, other fingerprint: stored reply (webhooks) or 422 (API) */
	STORE_IN_PROGRESS, /* processing with a live lease: 409, retry after sc_retry_after_s */
	STORE_TRANSIENT, /* rolled back; nothing kept: 503, retry after sc_retry_after_s */
	STORE_CLAIMED, /* store_claim_begin: processing row committed, token in sc_token */
};

enum store_status {
	STORE_STATUS_PROCESSING = 0,
	STORE_STATUS_DONE,
	STORE_STATUS_FAILED,
};

/* What the handler returns from sc_apply. */
enum store_apply_result {
	STORE_APPLY_TRANSIENT = -1, /* roll back this unit, store nothing, 503 */
	STORE_APPLY_DONE = 0,
	STORE_APPLY_FAILED = 1, /* permanent business refusal: reply stored, status failed */
};

struct store_claim {
	/* in */
	const char *sc_scope; /* provider instance name, or "api:<route>:<client>" */
	const char *sc_key;
	unsigned char sc_fingerprint[32];
	int64_t sc_now_ms;
	int64_t sc_retention_ms; /* older records are deleted and the key runs as new */
	int64_t sc_lease_ms; /* lease for store_claim_begin; default 60 s */
	/* Runs inside the unit's savepoint, only for a key that is new (or
	 * expired, or whose lease expired). Fills ret_reply. No network I/O. */
	int (*sc_apply)(struct store_tx *tx, void *arg, struct reply *ret_reply);
	void *sc_arg;
	/* More columns of the key's row (ingest.c: the event), set by sc_apply
	 * (reset before each run) and written in the same row write as the
	 * reply: one row per claimed key. Borrowed until the claim is decided.
	 * sc_cols is a table that never changes while the store is open (its
	 * SQL is built once per table). */
	const char *const *sc_cols;
	const struct store_value *sc_vals;
	size_t sc_n_cols;
	/* out */
	enum store_outcome sc_outcome;
	enum store_status sc_status; /* of the record, when one exists */
	struct reply sc_reply; /* the reply to send (owned; reply_finish it) */
	int64_t sc_retry_after_s;
	int64_t sc_token; /* fencing token of the record */
};

/* A completion: result is what the blocking call would return (for claims 0,
 * or -1 when the store refused the work). */
typedef void (*store_done_fn)(void *arg, int result);

/* Queues n claims for one transaction (each in its own savepoint) and
 * returns without waiting. done(arg, result) is called exactly once, after
 * COMMIT returned (or the transaction failed), when every claim has its
 * outcome: on the store's completion thread (which calls them in the order
 * their batches committed) with no lock of the store held, so it may
 * resume a connection or submit more, but must be quick and must not wait
 * for the store. A single claim whose key is already done/failed is answered
 * from this thread's read connection, and a refused submission (store
 * stopping, read-only) gets STORE_TRANSIENT outcomes: done then runs on this
 * thread before this returns. claims and arg must stay valid until done.
 * Returns 0, or -1 when refused. */
int store_submit_async(struct store *st, struct store_claim *claims, size_t n, store_done_fn done,
		       void *arg);

/* store_submit_async, waiting for done. Every claim gets an outcome, even on
 * failure (STORE_TRANSIENT). Returns 0, or -1 when the store is shutting down
 * (outcomes then STORE_TRANSIENT). Never call it from a completion. */
int store_submit(struct store *st, struct store_claim *claims, size_t n);

/* Two-phase claims, for work that must wait on something outside the database
 * between claim and completion. begin commits a processing row with a lease
 * (sc_lease_ms) and a fresh fencing token (outcome STORE_CLAIMED, sc_token);
 * an expired lease is taken over with a new token. Other outcomes as for
 * store_submit; sc_apply is not used. */
int store_claim_begin(struct store *st, struct store_claim *c);

/* Completes a begun claim: runs c->sc_apply and stores its reply, but only if
 * the record is still processing with token c->sc_token. Returns 0 with
 * outcome STORE_NEW, 1 when the token is stale (a late write refused, nothing
 * changed), -1 on failure (STORE_TRANSIENT). */
int store_claim_complete(struct store *st, struct store_claim *c);

void store_claim_finish(struct store_claim *c);

/* Read-only look at a record, for dry runs: 1 with ret_status and
 * ret_fingerprint (32 bytes) filled when a live (unexpired) record exists,
 * 0 when none, -1 on error. */
int store_peek(struct store *st, const char *scope, const char *key, int64_t now_ms, int64_t retention_ms,
	       enum store_status *ret_status, unsigned char *ret_fingerprint);

/* ---- plain units of work ---- */

/* Runs fn in the writer's transaction, inside its own savepoint, at time
 * now_ms. fn returns >= 0 to keep its changes (the value is passed back after
 * COMMIT) or -1 to roll back its savepoint. Returns fn's value, or -1. */
int store_write(struct store *st, int64_t now_ms, int (*fn)(struct store_tx *tx, void *arg), void *arg);

/* Runs fn in a read transaction on this thread's read connection. Returns
 * fn's value, or -1. */
int store_read(struct store *st, int64_t now_ms, int (*fn)(struct store_tx *tx, void *arg), void *arg);

/* Runs fn(st, arg) on a thread of the store's own and waits for it at most
 * wait_ms: for readers that must answer in time whatever the database does
 * (a /metrics scrape on a hung server). arg (arg_size bytes, at most 512)
 * is copied to that thread and back, so a call that outlives its wait never
 * writes into the caller's memory; it ends on its own, and meanwhile later
 * calls return -1 at once. Returns fn's value, or -1 when it did not end
 * in time. */
int store_call_within(struct store *st, unsigned wait_ms, int (*fn)(struct store *st, void *arg),
                      void *arg, size_t arg_size);

/* What store_call_owned returns when fn did not end in time. */
#define STORE_CALL_LATE (-2)    /* it began: it ends on its own, and frees the job */
#define STORE_CALL_NOT_RUN (-3) /* it never began (nor will): the job is the caller's */

/* store_call_within for work that owns memory of its own (copies of SQL,
 * parameters, rows collected, a write's arguments): job is handed to fn
 * on the store's thread, not copied. Returns fn's value (which is >= -1)
 * when fn ended within wait_ms: job is the caller's again.
 * STORE_CALL_NOT_RUN when it could not begin in time (an earlier call
 * still runs, or outlived its own wait): fn never runs, the job is the
 * caller's, and for a write nothing was changed. STORE_CALL_LATE when fn
 * began and did not end in time: it ends on its own (a write may still be
 * applied), then the store's thread calls job_free(job); the caller must
 * not touch job again. */
int store_call_owned(struct store *st, unsigned wait_ms, int (*fn)(struct store *st, void *job),
                     void *job, void (*job_free)(void *job));

/* store_call_owned for a job that writes: it runs on a thread of its own,
 * so a write stuck behind the write lock (a long transaction, a slow disk)
 * only keeps later writes from beginning (STORE_CALL_NOT_RUN at once),
 * never the reads of store_call_within and store_call_owned. */
int store_call_owned_write(struct store *st, unsigned wait_ms,
                           int (*fn)(struct store *st, void *job), void *job,
                           void (*job_free)(void *job));

/* ---- work one receiver does at a time ---- */

/* Takes the named lock for this store's database, shared by every receiver
 * on it (PostgreSQL: a session advisory lock on a connection of its own;
 * SQLite, one receiver per file: always granted). Returns 1 when taken, 0
 * when another receiver holds it, -1 on error (logged). Release it with
 * store_unlock from the same store. Periodic gc and reconcile use it. */
int store_try_lock(struct store *st, const char *name);
void store_unlock(struct store *st, const char *name);

/* ---- statistics the writer keeps (for metrics) ---- */

#define STORE_COMMIT_BUCKETS 9

struct store_stats {
	uint64_t ss_commits; /* transactions committed */
	uint64_t ss_batches; /* batches the writer took, committed or not */
	uint64_t ss_units; /* claims and writes in those batches: the histogram's sum */
	uint64_t ss_batch_hist[8]; /* batches by size: 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64-127, 128+ */
	uint64_t ss_conflicts; /* unique-key conflicts met by claims */
	uint64_t ss_transient; /* units rolled back as transient */
	uint64_t ss_catch_ups; /* checkpoints the writer ran itself to bound the WAL */
	double ss_catch_up_seconds; /* the writer's time in them: no commit meanwhile */
	uint64_t ss_wal_frames; /* pages written to the WAL by commits */
	uint64_t ss_round_trips; /* the writer's round trips to the server (PostgreSQL), 0 on SQLite */
	/* The key filter (so_key_filter): claims sent to the writer without a
	 * read because their key was never stored; whether a filter is in use
	 * yet, the keys it holds, those it has room for, its bytes. */
	uint64_t ss_reads_skipped;
	int ss_key_filter_ready;
	uint64_t ss_key_filter_keys;
	uint64_t ss_key_filter_capacity;
	uint64_t ss_key_filter_bytes;
	/* How long each COMMIT took (writing the WAL and its fsync), by upper
	 * bound: 0.5, 1, 2, 5, 10, 25, 50, 100 ms, +Inf; and their sum. */
	uint64_t ss_commit_hist[STORE_COMMIT_BUCKETS];
	double ss_commit_seconds;
	/* Where the units of work whose completion has run spent their time,
	 * summed: queued for the writer, in their batch (its statements and
	 * COMMIT, from the moment the writer took it), and from the COMMIT
	 * until their completion ran (handed to the completion thread, after
	 * the completions before theirs). */
	uint64_t ss_units_completed;
	double ss_unit_queued_seconds;
	double ss_unit_batch_seconds;
	double ss_unit_completion_seconds;
	/* SQLite's page caches, process-wide: truncations (each COMMIT makes
	 * one) passed to SQLite's cache, and those skipped because no page
	 * could be past the limit (store_pcache in store_sqlite.c). */
	uint64_t ss_cache_truncations;
	uint64_t ss_cache_truncations_skipped;
	/* SQLite: the pages in the WAL since it last started over, and how long
	 * the writer has failed to start it over past its bound because a read
	 * transaction still reads from it (0: it has not). */
	uint64_t ss_wal_pages;
	double ss_wal_held_seconds;
};

void store_get_stats(struct store *st, struct store_stats *ret);

/* ---- operations: health, file sizes, space, snapshots ----
 * Beside the writer, on connections of their own, never waiting longer than
 * a short busy timeout of their own. */

/* The storage engine's version ("3.40.1"), for build info. */
const char *store_library_version(void);

#define STORE_HEALTH_REASON_MAX 200

struct store_health {
	int sh_ok;           /* 1: the writer can commit now and the schema is this binary's */
	int sh_writer_alive; /* 0: the writer thread is gone, or stuck in one batch far past the busy timeout */
	char sh_reason[STORE_HEALTH_REASON_MAX]; /* why not ok, one line; "" when ok */
	int sh_schema; /* the schema version the probe read; -1 when it could not */
};

/* Checks whether the writer can commit now: its heartbeat (no batch waiting
 * for the lock over a second, no failed commit in the last seconds), the
 * schema version (no migration pending, none newer), and, while the writer
 * is idle, the write lock itself (BEGIN IMMEDIATE and ROLLBACK on a probe
 * connection, 100 ms busy timeout). Blocks at most about 100 ms. A schema
 * that is not this binary's (a newer release migrated it) also stops the
 * writers: every write is transient (503) until the schema is this binary's
 * again, while stored replies are still answered; that change, and only
 * it, is logged. Meant to be called periodically from one thread; readers of the
 * result should use the last one. Always fills ret and returns 0. */
int store_probe(struct store *st, struct store_health *ret);

struct store_file_stats {
	int64_t sf_db_bytes;   /* the database file */
	int64_t sf_wal_bytes;  /* its write-ahead log, 0 when none */
	int64_t sf_free_bytes; /* free pages inside the file: what reclaiming gives back */
	int sf_incremental;    /* 1: auto_vacuum is incremental, store_reclaim can shrink the file */
};

/* File sizes and free space, on this thread's read connection. Returns 0,
 * or -1 (logged by the store). */
int store_file_stats(struct store *st, struct store_file_stats *ret);

/* Gives up to max_pages free pages back to the file system, in one unit of
 * work on the writer; the file shrinks at the next checkpoint. A no-op
 * (0 pages) unless auto_vacuum is incremental, which new databases get and
 * store_vacuum sets. ret_pages gets the pages freed. Returns 0 or -1. */
int store_reclaim(struct store *st, int64_t max_pages, int64_t *ret_pages);

/* Checkpoints the write-ahead log into the file and truncates the log, on a
 * connection of its own (200 ms busy timeout). Returns 0 when done, 1 when
 * readers or a writer kept it from finishing (a later one finishes it), -1
 * on error. */
int store_checkpoint(struct store *st);

/* Rebuilds the whole file (VACUUM) with incremental auto_vacuum, on a
 * connection of its own: it holds the write lock for as long as it takes
 * and needs free disk space for a copy. Returns 0, or -1 (logged). */
int store_vacuum(struct store *st);

/* Copies a consistent snapshot of the database at path (read-only: one read
 * transaction, writers go on) into a new file of mode 0600 in dir (NULL:
 * $TMPDIR, else /tmp). ret_path gets its malloc'd path. Returns 0, or -1
 * (logged). */
int store_snapshot(const char *path, const char *dir, char **ret_path);
/* Removes a snapshot and its -wal/-shm files. NULL is a no-op. */
void store_snapshot_remove(const char *snapshot_path);

#endif
