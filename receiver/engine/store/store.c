/* store.c: the idempotency store, backend-neutral: the writer thread with
 * group commit, the claim/lease/fencing state machine of DESIGN.md, async
 * submission, and the statement API of store.h. The SQL itself runs on an
 * engine (store_engine.h): store_sqlite.c or store_pg.c. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <sys/resource.h>

#include "buf.h"
#include "keyset.h"
#include "log.h"
#include "migrations.h"
#include "store.h"
#include "store_engine.h"

#define STORE_BATCH_MAX_DEFAULT 256 /* units per transaction */
#define STORE_BUSY_TIMEOUT_MS_DEFAULT 5000
#define STORE_LEASE_MS_DEFAULT ((int64_t)60 * 1000)
#define STORE_RETENTION_MS_DEFAULT ((int64_t)7 * 24 * 3600 * 1000)
#define STORE_RETRY_AFTER_S 1      /* Retry-After for transient failures */
#define STORE_FINGERPRINT_LEN 32   /* SHA-256, as in struct store_claim */
#define STORE_HIST_BUCKETS 8       /* as in struct store_stats */
#define STORE_BATCH_RETRIES 3      /* a batch run again after a deadlock or serialization failure */
#define STORE_CLAIM_COLS_MAX 32    /* sc_n_cols */
#define STORE_CLAIM_SQL_MAX 2048   /* a claim's row write with its sc_cols */
#define STORE_CLAIM_SQL_CACHED 4   /* row writes whose SQL is built once (sw_claim_sql) */
#define STORE_PG_WRITERS_DEFAULT 2 /* so_pg_writers */
#define STORE_WRITERS_MAX 16
#define STORE_KEYS_MIN ((size_t)1 << 20) /* keys a filter is made for, at least */
#define STORE_KEYS_PAGE 10000            /* keys read per read transaction while a filter fills */
#define STORE_ASIDE_ARG_MAX 512          /* bytes of a store_call_within argument */
#define STORE_KEYS_OLD_MAX 48 /* filters replaced: each twice the last, so never this many */

#define STORE_SQL_RECORD                                                                           \
	"SELECT id, status, fingerprint, reply_status, reply_content_type, reply_headers, "        \
	"reply_body, lease_until, fence_token, created_at FROM idempotency_records "               \
	"WHERE scope = ? AND idem_key = ?"

/* Columns of STORE_SQL_RECORD. */
enum store_rec_col {
	STORE_REC_ID = 0,
	STORE_REC_STATUS,
	STORE_REC_FINGERPRINT,
	STORE_REC_REPLY_STATUS,
	STORE_REC_CONTENT_TYPE,
	STORE_REC_HEADERS,
	STORE_REC_BODY,
	STORE_REC_LEASE_UNTIL,
	STORE_REC_TOKEN,
	STORE_REC_CREATED_AT,
};

enum store_unit_kind {
	STORE_UNIT_CLAIMS = 0,
	STORE_UNIT_BEGIN,
	STORE_UNIT_COMPLETE,
	STORE_UNIT_WRITE,
};

/* A unit of work queued for the writer: allocated by the submitter, freed by
 * the writer once su_done has run. */
struct store_unit {
	enum store_unit_kind su_kind;
	struct store_claim *su_claims;
	size_t su_n;
	int (*su_fn)(struct store_tx *tx, void *arg);
	void *su_arg;
	int64_t su_now;
	int su_result;
	int su_settled; /* failed for good: not run again in this batch */
	store_done_fn su_done;
	void *su_done_arg;
	struct store_unit *su_next;
	/* Monotonic ns it was queued, its batch was taken, and that batch's
	 * COMMIT returned (or the batch gave up): the stages of
	 * store_stats.ss_unit_*_seconds, counted as its completion runs. */
	int64_t su_queued_ns;
	int64_t su_taken_ns;
	int64_t su_committed_ns;
	unsigned char su_skip[]; /* per claim: settled, not run again */
};

/* A writer thread: its connection, its batches (one transaction each), its
 * heartbeat. SQLite has one; PostgreSQL so_pg_writers, which take claims
 * from one queue and run them side by side as several receivers do. */
struct store_writer {
	struct store *sw_st;
	unsigned sw_index; /* 0 also takes plain writes (store_write), in queue order */
	struct store_conn *sw_conn;
	pthread_t sw_thread;
	int sw_running;
	int64_t sw_hb_busy_since; /* monotonic ms its current batch began; 0 when idle */
	uint64_t sw_round_trips;  /* en_round_trips last counted */
	/* The SQL of a claim's row write (store_claim_write_row) per form and
	 * column table, built once: ~19 columns formatted into 600 bytes was
	 * 2-3% of the writer's CPU per unique callback (issue 24). This
	 * writer's thread only; an entry, once made, is never changed until
	 * store_destroy (a lane may still run its statement). */
	struct store_claim_sql {
		const char *cq_head; /* the form: head, mid and tail are literals */
		const char *cq_mid;
		const char *cq_tail;
		const char *const *cq_cols; /* sc_cols, a table that never changes */
		size_t cq_n_cols;
		int cq_update;
		char *cq_sql;
	} sw_claim_sql[STORE_CLAIM_SQL_CACHED];
};

/* A thread of bounded calls, made on first use; all under sa_mutex but
 * sa_arg, which is the thread's while a call is busy. */
struct store_aside {
	struct store *sa_store;
	pthread_mutex_t sa_mutex;
	pthread_cond_t sa_cond; /* CLOCK_MONOTONIC */
	int sa_made;
	pthread_t sa_thread;
	int sa_running;
	int sa_stop;
	int sa_busy;         /* a call is queued or running, or its caller copies it out */
	int sa_abandoned;    /* its caller gave up waiting: the thread ends the call */
	uint64_t sa_asked;   /* calls handed over */
	uint64_t sa_done;    /* calls finished */
	uint64_t sa_started; /* calls the thread began (or dropped, cancelled) */
	int sa_cancelled;    /* the call handed over is dropped before it began */
	int (*sa_fn)(struct store *st, void *arg);
	void *sa_job;                   /* what fn is given: sa_arg or a caller's */
	void (*sa_job_free)(void *job); /* an abandoned job's, or NULL */
	int sa_rc;
	_Alignas(max_align_t) unsigned char sa_arg[STORE_ASIDE_ARG_MAX];
};

enum store_aside_lane {
	STORE_ASIDE_READ = 0, /* store_call_owned: the console's reads */
	STORE_ASIDE_WRITE,    /* store_call_owned_write */
	STORE_ASIDE_SCRAPE,   /* store_call_within: a /metrics scrape's gauges */
	STORE_ASIDE_LANES,
};

struct store {
	const struct store_engine *st_engine;
	struct store_db *st_db;
	int st_read_only;
	unsigned st_batch_max;
	unsigned st_busy_timeout_ms;
	int st_writer_nice;
	struct store_writer st_writers[STORE_WRITERS_MAX];
	unsigned st_n_writers; /* threads started */
	int st_thread_running; /* st_writers[0] runs */
	pthread_mutex_t st_mutex;
	pthread_cond_t st_work;
	int st_sync_made;
	struct store_unit *st_head; /* queue, under st_mutex */
	struct store_unit *st_tail;
	size_t st_queued_units;  /* units in the queue, under st_mutex */
	size_t st_queued_writes; /* plain writes among them */
	int st_stopping;
	pthread_mutex_t st_stats_mutex;
	struct store_stats st_stats; /* under st_stats_mutex */
	/* Health (see "operations" below): the writer's heartbeat, written by
	 * the writer thread and read with atomics by store_probe. */
	int64_t st_hb_ok;   /* monotonic ms of the last batch that committed */
	int64_t st_hb_fail; /* monotonic ms of the last batch that committed nothing */
	int st_hb_fail_rc;  /* its engine error code */
	pthread_mutex_t st_probe_lock;
	int st_probe_lock_made;
	/* The threads of bounded calls: one for reads (store_call_owned), one
	 * for writes (store_call_owned_write), one for the scrape's gauges
	 * (store_call_within), so that a write stuck behind the write lock
	 * never keeps a page or a scrape from reading, nor a page's read stuck
	 * on a locked table a scrape. */
	struct store_aside st_aside[STORE_ASIDE_LANES];
	struct store_files st_files; /* under st_probe_lock */
	int st_files_lost;           /* atomic: a file held open is gone; no more work is taken */
	/* Atomic: the schema version the probe last read when it is not this
	 * binary's (0 when it is): no write is taken, as this binary does not
	 * know what the newer (or older) schema expects of its writers. */
	int st_schema_foreign;
	/* The key filter (so_key_filter, keyset.h): the keys this database
	 * may hold. st_keys is NULL until the first fill ends (every claim
	 * reads first meanwhile); st_keys_next is the filter being filled,
	 * which claims add their keys to as well. Both atomic pointers. A
	 * replaced filter goes on st_keys_old (a server thread may still
	 * look at it) and is freed by store_destroy. */
	int st_keys_on;
	size_t st_keys_min;
	struct keyset *st_keys;
	struct keyset *st_keys_next;
	struct keyset *st_keys_old[STORE_KEYS_OLD_MAX]; /* under st_mutex */
	size_t st_n_keys_old;
	int st_keys_grow; /* atomic: a claim found st_keys past its capacity */
	int st_keys_running;
	pthread_t st_keys_thread;
	pthread_cond_t st_keys_cond; /* with st_mutex: st_keys_grow or st_stopping */
	uint64_t st_reads_skipped;   /* atomic: claims sent to the writer unread */
	uint64_t st_batches_taken;   /* atomic: batches the writers took, and ran */
	uint64_t st_batches_done;
	/* The completions: a writer hands each batch's units over once it is
	 * committed and goes on with the next batch, and this thread calls
	 * their su_done in the order the batches were committed. Resuming the
	 * connections of a batch (a mutex and an eventfd write each) took 5 to
	 * 7% of the writer's time, which is every callback's time (issue 24,
	 * eighth round). Under st_done_mutex. */
	pthread_mutex_t st_done_mutex;
	pthread_cond_t st_done_cond;
	struct store_unit *st_done_head;
	struct store_unit *st_done_tail;
	int st_done_waiting; /* the thread waits on st_done_cond */
	int st_done_stopping;
	int st_done_running;
	pthread_t st_done_thread;
};

static void store_heartbeat_begin(struct store_writer *sw);
static void store_heartbeat_end(struct store_writer *sw, uint64_t commits);
static void store_schema_note(struct store *st, int version);

/* The writer whose thread this is: set by the thread itself. */
static _Thread_local struct store_writer *store_this_writer;

/* st's writer whose thread this is, or NULL. */
static struct store_writer *store_self_writer(const struct store *st)
{
	struct store_writer *sw = store_this_writer;

	return sw != NULL && st != NULL && sw->sw_st == st ? sw : NULL;
}

static int64_t store_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Stamps every unit of batch as taken by the writer, or as committed. */
static void store_units_stamp(struct store_unit *batch, int committed)
{
	int64_t t = store_mono_ns();
	struct store_unit *u;

	for (u = batch; u != NULL; u = u->su_next) {
		if (committed) {
			u->su_committed_ns = t;
		} else {
			u->su_taken_ns = t;
		}
	}
}

static double store_mono_s(void)
{
	return (double)store_mono_ns() / 1e9;
}

/* ---- rows and statements ---- */

void store_row_finish(struct store_row *row)
{
	size_t i;

	if (row == NULL) {
		return;
	}
	for (i = 0; i < row->sr_n && i < STORE_ROW_MAX; i++) {
		if (row->sr_cols[i].sv_type == STORE_TEXT ||
		    row->sr_cols[i].sv_type == STORE_BLOB) {
			free((char *)row->sr_cols[i].sv_text);
		}
	}
	memset(row, 0, sizeof(*row));
}

int64_t store_row_int(const struct store_row *row, size_t i)
{
	if (row == NULL || i >= row->sr_n || row->sr_cols[i].sv_type != STORE_INT) {
		return 0;
	}
	return row->sr_cols[i].sv_int;
}

const char *store_row_text(const struct store_row *row, size_t i)
{
	if (row == NULL || i >= row->sr_n) {
		return NULL;
	}
	if (row->sr_cols[i].sv_type != STORE_TEXT && row->sr_cols[i].sv_type != STORE_BLOB) {
		return NULL;
	}
	return row->sr_cols[i].sv_text;
}

int store_row_is_null(const struct store_row *row, size_t i)
{
	return row == NULL || i >= row->sr_n || row->sr_cols[i].sv_type == STORE_NULL;
}

static size_t store_row_len(const struct store_row *row, size_t i)
{
	if (store_row_text(row, i) == NULL) {
		return 0;
	}
	return row->sr_cols[i].sv_len;
}

/* Takes column i's bytes out of row (left as NULL): the caller owns them.
 * NULL when the column holds no text or blob. */
static char *store_row_take(struct store_row *row, size_t i)
{
	char *text = (char *)store_row_text(row, i);

	if (text != NULL) {
		row->sr_cols[i].sv_type = STORE_NULL;
		row->sr_cols[i].sv_text = NULL;
		row->sr_cols[i].sv_len = 0;
	}
	return text;
}

static int store_run(struct store_tx *tx, const char *sql, const struct store_value *params,
                     size_t n_params, store_row_fn fn, void *arg, int64_t *ret_changes)
{
	return tx->tx_engine->en_run(tx->tx_conn, sql, params, n_params, fn, arg, ret_changes);
}

int store_exec(struct store_tx *tx, const char *sql, const struct store_value *params,
               size_t n_params, int64_t *ret_changes)
{
	int64_t changes = 0;

	if (store_run(tx, sql, params, n_params, NULL, NULL, &changes) < 0) {
		return -1;
	}
	if (ret_changes != NULL) {
		*ret_changes = changes;
	}
	return 0;
}

int store_exec_held(struct store_tx *tx, const char *sql, const struct store_value *params,
                    size_t n_params, int64_t *ret_changes)
{
	int64_t changes = 0;

	if (tx->tx_engine->en_exec_one == NULL) {
		return store_exec(tx, sql, params, n_params, ret_changes);
	}
	if (tx->tx_engine->en_exec_one(tx->tx_conn, sql, params, n_params,
	                               ret_changes != NULL ? &changes : NULL) < 0) {
		return -1;
	}
	if (ret_changes != NULL) {
		*ret_changes = changes;
	}
	return 0;
}

static int store_take_first(void *arg, struct store_row *row)
{
	struct store_row *dst = arg;

	*dst = *row;
	memset(row, 0, sizeof(*row));
	return 1;
}

int store_query(struct store_tx *tx, const char *sql, const struct store_value *params,
                size_t n_params, struct store_row *ret_row)
{
	struct store_row row;
	int r;

	memset(&row, 0, sizeof(row));
	r = store_run(tx, sql, params, n_params, store_take_first, &row, NULL);
	if (r <= 0) {
		return r;
	}
	*ret_row = row;
	return 1;
}

struct store_each {
	int (*se_fn)(void *arg, const struct store_row *row);
	void *se_arg;
};

static int store_each_row(void *arg, struct store_row *row)
{
	struct store_each *se = arg;

	return se->se_fn(se->se_arg, row);
}

int store_query_each(struct store_tx *tx, const char *sql, const struct store_value *params,
                     size_t n_params, int (*fn)(void *arg, const struct store_row *row), void *arg)
{
	struct store_each se = {.se_fn = fn, .se_arg = arg};

	return store_run(tx, sql, params, n_params, store_each_row, &se, NULL) < 0 ? -1 : 0;
}

int store_tx_shared(const struct store_tx *tx)
{
	return tx->tx_engine->en_shared;
}

int store_has_table(struct store_tx *tx, const char *name)
{
	struct store_value p[1] = {store_text(name)};
	struct store_row row;
	int rc;

	rc = store_query(tx, tx->tx_engine->en_sql_has_table, p, 1, &row);
	if (rc <= 0) {
		return rc;
	}
	rc = store_row_int(&row, 0) > 0 ? 1 : 0;
	store_row_finish(&row);
	return rc;
}

struct store_names {
	int (*sn_table)(void *arg, const char *name);
	int (*sn_column)(void *arg, const char *name, int is_blob);
	void *sn_arg;
};

static int store_names_row(void *arg, const struct store_row *row)
{
	const struct store_names *sn = arg;
	const char *name = store_row_text(row, 0);
	const char *type = store_row_text(row, 1);

	if (name == NULL) {
		return 0;
	}
	if (sn->sn_table != NULL) {
		return sn->sn_table(sn->sn_arg, name) < 0 ? -1 : 0;
	}
	return sn->sn_column(sn->sn_arg, name,
			     type != NULL && (strcasecmp(type, "blob") == 0 || strcasecmp(type, "bytea") == 0)) < 0
		       ? -1
		       : 0;
}

int store_tables(struct store_tx *tx, int (*fn)(void *arg, const char *name), void *arg)
{
	struct store_names sn = {.sn_table = fn, .sn_arg = arg};

	return store_query_each(tx, tx->tx_engine->en_sql_tables, NULL, 0, store_names_row, &sn);
}

int store_columns(struct store_tx *tx, const char *table,
		  int (*fn)(void *arg, const char *name, int is_blob), void *arg)
{
	struct store_names sn = {.sn_column = fn, .sn_arg = arg};
	struct store_value p[1] = {store_text(table)};

	return store_query_each(tx, tx->tx_engine->en_sql_columns, p, 1, store_names_row, &sn);
}

int64_t store_tx_now(const struct store_tx *tx)
{
	return tx->tx_now;
}

int store_conn_exec(const struct store_engine *en, struct store_conn *cn, const char *sql)
{
	return en->en_run(cn, sql, NULL, 0, NULL, NULL, NULL);
}

int store_value_copy(struct store_value *dst, enum store_type type, const void *p, size_t len)
{
	char *copy;

	memset(dst, 0, sizeof(*dst));
	copy = malloc(len + 1);
	if (copy == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	if (len > 0) {
		memcpy(copy, p, len);
	}
	copy[len] = '\0';
	dst->sv_type = type;
	dst->sv_text = copy;
	dst->sv_len = len;
	return 0;
}

/* ---- opening and migrations ---- */

int store_schema_version(void)
{
	if (migrations_count == 0) {
		return 0;
	}
	return migrations[migrations_count - 1].mg_version;
}

int store_version_check(int version, int may_migrate)
{
	int newest = store_schema_version();

	if (version > newest) {
		log_err("store: database schema version %d is newer than this idemhook (%d); "
		        "refusing to touch it",
		        version, newest);
		return -1;
	}
	if (!may_migrate && version < newest) {
		log_err("store: database schema version %d is older than this idemhook (%d); "
		        "run idemhook migrate",
		        version, newest);
		return -1;
	}
	return 0;
}

int store_version_check_read(int version)
{
	int newest = store_schema_version();

	if (version > newest) {
		log_notice("store: database schema %d is newer than this idemhook (%d): reading it "
		           "as %d",
		           version, newest, newest);
		return 0;
	}
	return store_version_check(version, 0);
}

static _Thread_local enum store_open_error store_open_err;

enum store_open_error store_open_error(void)
{
	return store_open_err;
}

void store_open_denied(void)
{
	store_open_err = STORE_OPEN_DENIED;
}

void store_open_busy(void)
{
	store_open_err = STORE_OPEN_BUSY;
}

void store_open_unreachable(void)
{
	store_open_err = STORE_OPEN_UNREACHABLE;
}

/* Process-wide: a full disk is a fact about the machine, not about one
 * store, and the writer thread that meets it is not the caller's. */
static uint64_t store_full_n;

void store_note_full(void)
{
	__atomic_add_fetch(&store_full_n, 1, __ATOMIC_RELAXED);
}

uint64_t store_full_count(void)
{
	return __atomic_load_n(&store_full_n, __ATOMIC_RELAXED);
}

static const struct store_engine *store_engine_of(const struct store_options *opt)
{
	return opt->so_backend == STORE_BACKEND_POSTGRESQL ? &store_engine_pg : &store_engine_sqlite;
}

int store_migrate_options(const struct store_options *opt, int *ret_from, int *ret_to)
{
	const struct store_engine *en = store_engine_of(opt);
	struct store_options o = *opt;
	struct store_db *db;
	int from = -1;
	int to = -1;

	o.so_read_only = 0;
	o.so_no_migrate = 0;
	o.so_must_exist = 0;
	store_open_err = STORE_OPEN_FAILED;
	db = en->en_open(&o, &from, &to);
	if (db != NULL) {
		en->en_close(db);
	}
	if (ret_from != NULL) {
		*ret_from = from;
	}
	if (ret_to != NULL) {
		*ret_to = to;
	}
	return db != NULL ? 0 : -1;
}

int store_migrate(const char *path, int *ret_from, int *ret_to)
{
	struct store_options o;

	memset(&o, 0, sizeof(o));
	o.so_backend = STORE_BACKEND_SQLITE;
	o.so_path = path;
	return store_migrate_options(&o, ret_from, ret_to);
}

/* ---- claims ---- */

static int64_t store_retention_ms(const struct store_claim *c)
{
	return c->sc_retention_ms > 0 ? c->sc_retention_ms : STORE_RETENTION_MS_DEFAULT;
}

static int store_status_parse(const char *s, enum store_status *ret)
{
	if (s == NULL) {
		return -1;
	}
	if (strcmp(s, "processing") == 0) {
		*ret = STORE_STATUS_PROCESSING;
	} else if (strcmp(s, "done") == 0) {
		*ret = STORE_STATUS_DONE;
	} else if (strcmp(s, "failed") == 0) {
		*ret = STORE_STATUS_FAILED;
	} else {
		log_err("store: unknown record status");
		return -1;
	}
	return 0;
}

static void store_count_conflict(struct store *st)
{
	pthread_mutex_lock(&st->st_stats_mutex);
	st->st_stats.ss_conflicts++;
	pthread_mutex_unlock(&st->st_stats_mutex);
}

static void store_claim_transient(struct store_claim *c, int keep_reply)
{
	if (!keep_reply) {
		reply_finish(&c->sc_reply);
	}
	c->sc_outcome = STORE_TRANSIENT;
	c->sc_retry_after_s = STORE_RETRY_AFTER_S;
}

/* Answers c from a done/failed record: its stored reply, REPLAYED when the
 * fingerprints match, MISMATCH otherwise. */
static int store_claim_answer(struct store_claim *c, struct store_row *rec, enum store_status status)
{
	struct reply r;
	size_t body_len = store_row_len(rec, STORE_REC_BODY);
	char *body = store_row_take(rec, STORE_REC_BODY);

	/* The stored body and headers are the row's own copies: taken over,
	 * not copied again (rec keeps the other columns). */
	reply_init(&r);
	if (reply_set_take(&r, (int)store_row_int(rec, STORE_REC_REPLY_STATUS),
	                   store_row_text(rec, STORE_REC_CONTENT_TYPE), body, body_len) < 0) {
		free(body);
		goto fail;
	}
	r.reply_headers = store_row_take(rec, STORE_REC_HEADERS);
	reply_finish(&c->sc_reply);
	c->sc_reply = r;
	c->sc_status = status;
	c->sc_token = store_row_int(rec, STORE_REC_TOKEN);
	if (store_row_len(rec, STORE_REC_FINGERPRINT) == sizeof(c->sc_fingerprint) &&
	    memcmp(store_row_text(rec, STORE_REC_FINGERPRINT), c->sc_fingerprint,
	           sizeof(c->sc_fingerprint)) == 0) {
		c->sc_outcome = STORE_REPLAYED;
	} else {
		c->sc_outcome = STORE_MISMATCH;
	}
	return 0;
fail:
	log_err("store: out of memory");
	reply_finish(&r);
	return -1;
}

static int store_claim_insert(struct store_tx *tx, const struct store_claim *c, int64_t token,
                              int64_t *ret_changes)
{
	int64_t lease_ms = c->sc_lease_ms > 0 ? c->sc_lease_ms : STORE_LEASE_MS_DEFAULT;
	struct store_value p[] = {
	        store_text(c->sc_scope),
	        store_text(c->sc_key),
	        store_blob(c->sc_fingerprint, sizeof(c->sc_fingerprint)),
	        store_int(c->sc_now_ms + lease_ms),
	        store_int(token),
	        store_int(c->sc_now_ms),
	        store_int(c->sc_now_ms),
	};

	return store_exec(
	        tx,
	        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	        "lease_until, "
	        "fence_token, created_at, updated_at) VALUES (?, ?, 'processing', ?, ?, ?, ?, ?) "
	        "ON CONFLICT (scope, idem_key) DO NOTHING",
	        p, sizeof(p) / sizeof(p[0]), ret_changes);
}

/* The SQL of a claim's row write: head, c's sc_cols, mid, tail (see
 * store_claim_write_row), from this writer's sw_claim_sql when it was built
 * before, else built into sql and kept there while a slot is free. Returns
 * the text (valid while sql is and the store is open), or NULL (logged). */
static const char *store_claim_sql(struct store_tx *tx, const struct store_claim *c, int update,
                                   const char *head, const char *mid, const char *tail,
                                   struct buf *sql)
{
	/* The slots are each writer thread's own: elsewhere the text is built. */
	struct store_writer *sw = store_self_writer(tx->tx_store);
	struct store_claim_sql *cq = NULL;
	size_t i;

	for (i = 0; sw != NULL && i < STORE_CLAIM_SQL_CACHED; i++) {
		struct store_claim_sql *e = &sw->sw_claim_sql[i];

		if (e->cq_sql == NULL) {
			cq = e; /* slots fill in order: no match past a free one */
			break;
		}
		if (e->cq_head == head && e->cq_mid == mid && e->cq_tail == tail &&
		    e->cq_cols == c->sc_cols && e->cq_n_cols == c->sc_n_cols &&
		    e->cq_update == update) {
			return e->cq_sql;
		}
	}
	if (buf_puts(sql, head) < 0) {
		goto too_long;
	}
	for (i = 0; i < c->sc_n_cols; i++) {
		if (buf_printf(sql, update ? ", %s = ?" : ", %s", c->sc_cols[i]) < 0) {
			goto too_long;
		}
	}
	if (buf_puts(sql, mid) < 0) {
		goto too_long;
	}
	for (i = 0; !update && i < c->sc_n_cols; i++) {
		if (buf_puts(sql, ", ?") < 0) {
			goto too_long;
		}
	}
	if (buf_puts(sql, tail) < 0) {
		goto too_long;
	}
	if (cq == NULL) {
		return sql->buf_data;
	}
	cq->cq_sql = buf_take(sql, NULL);
	if (cq->cq_sql == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	cq->cq_head = head;
	cq->cq_mid = mid;
	cq->cq_tail = tail;
	cq->cq_cols = c->sc_cols;
	cq->cq_n_cols = c->sc_n_cols;
	cq->cq_update = update;
	return cq->cq_sql;
too_long:
	log_err("store: a claim's row write is too long");
	return NULL;
}

/* Writes the claim's row: head, c's sc_cols, mid, tail, with the parameters
 * p_head, c's sc_vals, p_tail. An INSERT (update 0) adds ", col" to head and
 * ", ?" to mid per column; an UPDATE adds ", col = ?" to head. With no
 * sc_cols the statement is head mid tail. Returns 0 or -1. */
static int store_claim_write_row(struct store_tx *tx, const struct store_claim *c, int update,
                                 const char *head, const char *mid, const char *tail,
                                 const struct store_value *p_head, size_t n_head,
                                 const struct store_value *p_tail, size_t n_tail,
                                 int64_t *ret_changes, int one)
{
	struct store_value p[16 + STORE_CLAIM_COLS_MAX];
	struct buf sql;
	const char *text;
	size_t n = 0;
	size_t i;
	int rc = -1;

	buf_init(&sql, STORE_CLAIM_SQL_MAX);
	if (c->sc_n_cols > STORE_CLAIM_COLS_MAX || n_head + n_tail > 16) {
		log_err("store: a claim's row has too many columns");
		goto fail;
	}
	text = store_claim_sql(tx, c, update, head, mid, tail, &sql);
	if (text == NULL) {
		goto fail;
	}
	for (i = 0; i < n_head; i++) {
		p[n++] = p_head[i];
	}
	for (i = 0; i < c->sc_n_cols; i++) {
		p[n++] = c->sc_vals[i];
	}
	for (i = 0; i < n_tail; i++) {
		p[n++] = p_tail[i];
	}
	if (one && tx->tx_engine->en_exec_one != NULL) {
		rc = tx->tx_engine->en_exec_one(tx->tx_conn, text, p, n, ret_changes);
	} else {
		rc = store_exec(tx, text, p, n, ret_changes);
	}
fail:
	buf_finish(&sql);
	return rc;
}

/* Runs sc_apply. Returns 0 with the status the record takes, or -1 (outcome
 * TRANSIENT; a reply the handler set for its transient failure is kept). */
static int store_claim_run_apply(struct store_tx *tx, struct store_claim *c,
                                 enum store_status *ret_status)
{
	int r;

	reply_finish(&c->sc_reply);
	c->sc_n_cols = 0;
	if (c->sc_apply == NULL) {
		log_err("store: a claim without sc_apply");
		store_claim_transient(c, 0);
		return -1;
	}
	r = c->sc_apply(tx, c->sc_arg, &c->sc_reply);
	if (r == STORE_APPLY_DONE) {
		*ret_status = STORE_STATUS_DONE;
	} else if (r == STORE_APPLY_FAILED) {
		*ret_status = STORE_STATUS_FAILED;
	} else {
		store_claim_transient(c, 1);
		return -1;
	}
	return 0;
}

/* Runs sc_apply and stores its reply on the record holding c->sc_token.
 * one: the record is this transaction's (inserted or locked by it), so the
 * engine may check the write changed it when the transaction commits
 * (en_exec_one). Returns 0 (outcome NEW), or -1 to roll the unit back
 * (outcome TRANSIENT; a reply the handler set for its transient failure is
 * kept). */
static int store_claim_apply(struct store_tx *tx, struct store_claim *c, int one)
{
	enum store_status status;
	int64_t changes = 0;

	if (store_claim_run_apply(tx, c, &status) < 0) {
		return -1;
	}
	{
		const struct reply *rp = &c->sc_reply;
		struct store_value p[] = {
		        store_text(status == STORE_STATUS_DONE ? "done" : "failed"),
		        store_int(rp->reply_status),
		        store_text(rp->reply_content_type),
		        store_text(rp->reply_headers),
		        rp->reply_body != NULL ? store_blob(rp->reply_body, rp->reply_body_len)
		                               : store_null(),
		        store_int(c->sc_now_ms),
		};
		struct store_value w[] = {
		        store_text(c->sc_scope),
		        store_text(c->sc_key),
		        store_int(c->sc_token),
		};

		if (store_claim_write_row(
		            tx, c, 1,
		            "UPDATE idempotency_records SET status = ?, reply_status = ?, "
		            "reply_content_type = ?, "
		            "reply_headers = ?, reply_body = ?, lease_until = NULL, updated_at = ?",
		            "",
		            " WHERE scope = ? AND idem_key = ? AND fence_token = ? AND status = "
		            "'processing'",
		            p, sizeof(p) / sizeof(p[0]), w, sizeof(w) / sizeof(w[0]), &changes,
		            one) < 0) {
			goto fail;
		}
	}
	if (changes != 1) {
		log_err("store: the claimed record changed under its unit");
		goto fail;
	}
	c->sc_outcome = STORE_NEW;
	c->sc_status = status;
	return 0;
fail:
	store_claim_transient(c, 0);
	return -1;
}

/* A one-phase claim on a free key: runs sc_apply first and then writes the
 * finished record in one INSERT. The writer is the only writer and the key
 * was looked up in this transaction, so nothing can take the key in between;
 * one row write instead of an INSERT of a processing row and an UPDATE of it.
 * Returns 0 (outcome NEW), or -1 (outcome TRANSIENT). */
static int store_claim_apply_new(struct store_tx *tx, struct store_claim *c, int64_t token)
{
	enum store_status status;

	if (store_claim_run_apply(tx, c, &status) < 0) {
		return -1;
	}
	{
		const struct reply *rp = &c->sc_reply;
		struct store_value p[] = {
		        store_text(c->sc_scope),
		        store_text(c->sc_key),
		        store_text(status == STORE_STATUS_DONE ? "done" : "failed"),
		        store_blob(c->sc_fingerprint, sizeof(c->sc_fingerprint)),
		        store_int(rp->reply_status),
		        store_text(rp->reply_content_type),
		        store_text(rp->reply_headers),
		        rp->reply_body != NULL ? store_blob(rp->reply_body, rp->reply_body_len)
		                               : store_null(),
		        store_int(token),
		        store_int(c->sc_now_ms),
		        store_int(c->sc_now_ms),
		};

		if (store_claim_write_row(tx, c, 0,
		                          "INSERT INTO idempotency_records (scope, idem_key, status, "
		                          "fingerprint, reply_status, reply_content_type, reply_headers, "
		                          "reply_body, fence_token, created_at, updated_at",
		                          ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?", ")", p,
		                          sizeof(p) / sizeof(p[0]), NULL, 0, NULL, 0) < 0) {
			store_claim_transient(c, 0);
			return -1;
		}
	}
	c->sc_outcome = STORE_NEW;
	c->sc_status = status;
	return 0;
}

/* The state table of DESIGN.md, inside the unit's savepoint. Returns 0 to
 * keep the unit's changes, -1 to roll them back (outcome TRANSIENT). */
static int store_claim_decide(struct store *st, struct store_tx *tx, struct store_claim *c,
                              int two_phase)
{
	int64_t lease_ms = c->sc_lease_ms > 0 ? c->sc_lease_ms : STORE_LEASE_MS_DEFAULT;
	int64_t cutoff = c->sc_now_ms - store_retention_ms(c);
	struct store_value key[] = {store_text(c->sc_scope), store_text(c->sc_key)};
	enum store_status status;
	struct store_row rec;
	int64_t token = 1;
	int64_t changes = 0;
	int64_t lease_until;
	int found;

	memset(&rec, 0, sizeof(rec));
	reply_finish(&c->sc_reply);
	if (st->st_engine->en_shared) {
		/* Several receivers: the unique index decides. The insert waits
		 * for another receiver's uncommitted claim of the key; whoever
		 * inserted owns the key, the others read the winner's record,
		 * locked so a takeover or expiry below is theirs alone. */
		if (store_claim_insert(tx, c, token, &changes) < 0) {
			goto fail;
		}
		if (changes == 1) {
			c->sc_token = token;
			c->sc_status = STORE_STATUS_PROCESSING;
			if (two_phase) {
				c->sc_outcome = STORE_CLAIMED;
				return 0;
			}
			return store_claim_apply(tx, c, tx->tx_hold);
		}
		found = store_query(tx, STORE_SQL_RECORD " FOR UPDATE", key, 2, &rec);
	} else {
		found = store_query(tx, STORE_SQL_RECORD, key, 2, &rec);
	}
	if (found < 0) {
		goto fail;
	}
	if (found > 0) {
		store_count_conflict(st);
		if (store_status_parse(store_row_text(&rec, STORE_REC_STATUS), &status) < 0) {
			goto fail;
		}
		token = store_row_int(&rec, STORE_REC_TOKEN);
		lease_until = store_row_int(&rec, STORE_REC_LEASE_UNTIL);
		if (store_row_int(&rec, STORE_REC_CREATED_AT) < cutoff) {
			struct store_value del[] = {store_text(c->sc_scope), store_text(c->sc_key),
			                            store_int(cutoff)};

			/* The record is locked by this transaction (FOR UPDATE on a
			 * shared database, the only writer otherwise): held on a
			 * lane, checked before COMMIT. */
			if (store_exec_held(tx,
			                    "DELETE FROM idempotency_records WHERE scope = ? AND "
			                    "idem_key = ? AND created_at < ?",
			                    del, 3, &changes) < 0 ||
			    changes != 1) {
				goto fail;
			}
			/* The new record's token continues the old one's, so a late
			 * completion from before the expiry stays stale. */
			token++;
		} else if (status != STORE_STATUS_PROCESSING) {
			if (store_claim_answer(c, &rec, status) < 0) {
				goto fail;
			}
			store_row_finish(&rec);
			return 0;
		} else if (lease_until > c->sc_now_ms) {
			c->sc_outcome = STORE_IN_PROGRESS;
			c->sc_status = STORE_STATUS_PROCESSING;
			c->sc_token = token;
			c->sc_retry_after_s = (lease_until - c->sc_now_ms + 999) / 1000;
			if (c->sc_retry_after_s < 1) {
				c->sc_retry_after_s = 1;
			}
			store_row_finish(&rec);
			return 0;
		} else {
			struct store_value upd[] = {
			        store_blob(c->sc_fingerprint, sizeof(c->sc_fingerprint)),
			        store_int(c->sc_now_ms + lease_ms),
			        store_int(c->sc_now_ms),
			        store_int(store_row_int(&rec, STORE_REC_ID)),
			        store_int(token),
			};

			if (store_exec_held(tx,
			                    "UPDATE idempotency_records SET fingerprint = ?, "
			                    "lease_until = ?, "
			                    "fence_token = fence_token + 1, updated_at = ? "
			                    "WHERE id = ? AND fence_token = ? AND status = "
			                    "'processing'",
			                    upd, 5, &changes) < 0) {
				goto fail;
			}
			if (changes != 1) {
				log_err("store: takeover of an expired lease changed nothing");
				goto fail;
			}
			store_row_finish(&rec);
			c->sc_token = token + 1;
			c->sc_status = STORE_STATUS_PROCESSING;
			if (two_phase) {
				c->sc_outcome = STORE_CLAIMED;
				return 0;
			}
			return store_claim_apply(tx, c, tx->tx_hold);
		}
		store_row_finish(&rec);
	}
	/* The key is free (never used, or its record expired just now). */
	c->sc_token = token;
	c->sc_status = STORE_STATUS_PROCESSING;
	if (!two_phase) {
		return store_claim_apply_new(tx, c, token);
	}
	if (store_claim_insert(tx, c, token, &changes) < 0 || changes != 1) {
		goto fail;
	}
	c->sc_outcome = STORE_CLAIMED;
	return 0;
fail:
	store_row_finish(&rec);
	store_claim_transient(c, 0);
	return -1;
}

/* ---- the writer ---- */

/* Undoes the unit's savepoint, unless the engine already ended the
 * transaction. */
static void store_savepoint_rollback(struct store_tx *tx)
{
	if (!tx->tx_engine->en_in_tx(tx->tx_conn)) {
		return;
	}
	if (store_conn_exec(tx->tx_engine, tx->tx_conn, "ROLLBACK TO unit") == 0) {
		store_conn_exec(tx->tx_engine, tx->tx_conn, "RELEASE unit");
	}
}

/* Runs one unit inside its savepoint. step returns 0 to keep, -1 to roll
 * back. Returns step's value, or -1. */
static int store_savepoint_run(struct store_tx *tx, int (*step)(struct store_tx *tx, void *arg),
                               void *arg)
{
	int r;

	if (store_conn_exec(tx->tx_engine, tx->tx_conn, "SAVEPOINT unit") < 0) {
		return -1;
	}
	r = step(tx, arg);
	if (r < 0) {
		/* Before the rollback, whose statements would answer for it. */
		tx->tx_timed_out = tx->tx_engine->en_timed_out != NULL &&
		                   tx->tx_engine->en_timed_out(tx->tx_conn);
		store_savepoint_rollback(tx);
		return -1;
	}
	if (store_conn_exec(tx->tx_engine, tx->tx_conn, "RELEASE unit") < 0) {
		store_savepoint_rollback(tx);
		return -1;
	}
	return r;
}

struct store_claim_step {
	struct store_claim *cs_claim;
	int cs_two_phase;
};

static int store_claim_step_run(struct store_tx *tx, void *arg)
{
	struct store_claim_step *cs = arg;

	return store_claim_decide(tx->tx_store, tx, cs->cs_claim, cs->cs_two_phase);
}

static int store_complete_step_run(struct store_tx *tx, void *arg)
{
	struct store_claim *c = arg;
	struct store_value key[] = {store_text(c->sc_scope), store_text(c->sc_key)};
	struct store_row rec;
	int stale;
	int found;

	found = store_query(tx,
	                    "SELECT status, fence_token FROM idempotency_records WHERE scope = ? "
	                    "AND idem_key = ?",
	                    key, 2, &rec);
	if (found < 0) {
		store_claim_transient(c, 0);
		return -1;
	}
	stale = found == 0 || store_row_text(&rec, 0) == NULL ||
	        strcmp(store_row_text(&rec, 0), "processing") != 0 ||
	        store_row_int(&rec, 1) != c->sc_token;
	if (found > 0) {
		store_row_finish(&rec);
	}
	if (stale) {
		return 1;
	}
	return store_claim_apply(tx, c, 0);
}

/* One step of a batch: a claim of a unit (sp_claim its index), or a plain
 * write (sp_claim SIZE_MAX). */
struct store_step {
	struct store_unit *sp_unit;
	size_t sp_claim;
};

#define STORE_STEP_WRITE SIZE_MAX

/* Settles claim i of u as transient outside its savepoint (the engine
 * ended the transaction, or the claim waited out the statement bound on a
 * lane): it is not run again in this batch; u is settled when none of its
 * claims is left. */
static void store_unit_claim_settle(struct store_unit *u, size_t i)
{
	size_t left = 0;
	size_t j;

	store_claim_transient(&u->su_claims[i], 0);
	u->su_skip[i] = 1;
	for (j = 0; j < u->su_n; j++) {
		left += !u->su_skip[j];
	}
	if (left == 0) {
		u->su_result = -1;
		u->su_settled = 1;
	}
}

/* Runs one claim of u in its savepoint (tx->tx_timed_out tells whether it
 * waited out the statement bound). */
static enum store_tx_state store_step_run_claim(struct store *st, struct store_tx *tx,
                                                struct store_unit *u, size_t i)
{
	const struct store_engine *en = st->st_engine;
	struct store_claim *c = &u->su_claims[i];
	struct store_claim_step cs;
	enum store_tx_state state;
	int r;

	tx->tx_now = c->sc_now_ms;
	if (u->su_kind == STORE_UNIT_COMPLETE) {
		r = store_savepoint_run(tx, store_complete_step_run, c);
	} else {
		cs.cs_claim = c;
		cs.cs_two_phase = u->su_kind == STORE_UNIT_BEGIN;
		r = store_savepoint_run(tx, store_claim_step_run, &cs);
		r = r < 0 ? -1 : 0;
	}
	if (r < 0 && c->sc_outcome != STORE_TRANSIENT) {
		store_claim_transient(c, 0);
	}
	u->su_result = u->su_kind == STORE_UNIT_COMPLETE ? r : 0;
	state = en->en_in_tx(tx->tx_conn) && r >= 0 ? STORE_TXS_OPEN : en->en_tx_state(tx->tx_conn);
	if (state != STORE_TXS_ENDED) {
		return state;
	}
	/* The engine ended the transaction: this claim is settled as transient. */
	store_unit_claim_settle(u, i);
	return state;
}

/* Runs one step on the writer connection wc. Returns what became of the
 * transaction; *ret_timed_out is 1 when the step waited out the statement
 * bound on a lock held elsewhere. */
static enum store_tx_state store_step_run(struct store *st, struct store_conn *wc,
                                          const struct store_step *sp, int *ret_timed_out)
{
	const struct store_engine *en = st->st_engine;
	struct store_unit *u = sp->sp_unit;
	struct store_tx tx = {.tx_store = st, .tx_engine = en, .tx_conn = wc, .tx_now = u->su_now};
	enum store_tx_state state;

	if (sp->sp_claim != STORE_STEP_WRITE) {
		state = store_step_run_claim(st, &tx, u, sp->sp_claim);
		*ret_timed_out = tx.tx_timed_out;
		return state;
	}
	u->su_result = store_savepoint_run(&tx, u->su_fn, u->su_arg);
	*ret_timed_out = tx.tx_timed_out;
	state = en->en_in_tx(tx.tx_conn) && u->su_result >= 0 ? STORE_TXS_OPEN
	                                                      : en->en_tx_state(tx.tx_conn);
	if (state == STORE_TXS_ENDED) {
		u->su_result = -1;
		u->su_settled = 1;
	}
	return state;
}

/* Marks a unit as rolled back for good: nothing of it was kept. */
static void store_unit_fail(struct store_unit *u)
{
	size_t i;

	for (i = 0; u->su_kind != STORE_UNIT_WRITE && i < u->su_n; i++) {
		store_claim_transient(&u->su_claims[i], 0);
	}
	u->su_result = -1;
	u->su_settled = 1;
}

static void store_units_fail_unsettled(struct store_unit *batch)
{
	struct store_unit *u;

	for (u = batch; u != NULL; u = u->su_next) {
		if (!u->su_settled) {
			store_unit_fail(u);
		}
	}
}

static int store_batch_pending(const struct store_unit *batch)
{
	const struct store_unit *u;

	for (u = batch; u != NULL; u = u->su_next) {
		if (!u->su_settled) {
			return 1;
		}
	}
	return 0;
}

static uint64_t store_unit_weight(const struct store_unit *u)
{
	return u->su_kind == STORE_UNIT_CLAIMS ? u->su_n : 1;
}

static int store_step_cmp(const void *a, const void *b)
{
	const struct store_step *x = a;
	const struct store_step *y = b;
	const struct store_claim *cx;
	const struct store_claim *cy;
	int r;

	/* Writes after claims, in queue order. */
	if (x->sp_claim == STORE_STEP_WRITE || y->sp_claim == STORE_STEP_WRITE) {
		if (x->sp_claim != STORE_STEP_WRITE) {
			return -1;
		}
		if (y->sp_claim != STORE_STEP_WRITE) {
			return 1;
		}
		return x < y ? -1 : x > y;
	}
	cx = &x->sp_unit->su_claims[x->sp_claim];
	cy = &y->sp_unit->su_claims[y->sp_claim];
	r = strcmp(cx->sc_scope != NULL ? cx->sc_scope : "", cy->sc_scope != NULL ? cy->sc_scope : "");
	if (r == 0) {
		r = strcmp(cx->sc_key != NULL ? cx->sc_key : "", cy->sc_key != NULL ? cy->sc_key : "");
	}
	return r;
}

/* The batch's steps in the order they run: queue order, or for an engine
 * shared by several receivers every claim sorted by (scope, key) so two
 * writers lock keys in one order and do not deadlock. NULL on failure. */
static struct store_step *store_batch_steps(struct store *st, struct store_unit *batch,
                                            size_t *ret_n)
{
	struct store_step *steps;
	struct store_unit *u;
	size_t n = 0;
	size_t i;

	for (u = batch; u != NULL; u = u->su_next) {
		n += u->su_kind == STORE_UNIT_WRITE ? 1 : u->su_n;
	}
	steps = calloc(n > 0 ? n : 1, sizeof(*steps));
	if (steps == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	n = 0;
	for (u = batch; u != NULL; u = u->su_next) {
		if (u->su_kind == STORE_UNIT_WRITE) {
			steps[n].sp_unit = u;
			steps[n++].sp_claim = STORE_STEP_WRITE;
			continue;
		}
		for (i = 0; i < u->su_n; i++) {
			steps[n].sp_unit = u;
			steps[n++].sp_claim = i;
		}
	}
	if (st->st_engine->en_shared && n > 1) {
		/* qsort is not stable; writes compare by address, which is queue order. */
		qsort(steps, n, sizeof(*steps), store_step_cmp);
	}
	*ret_n = n;
	return steps;
}

static int store_step_pending(const struct store_step *sp)
{
	return !sp->sp_unit->su_settled &&
	       (sp->sp_claim == STORE_STEP_WRITE || !sp->sp_unit->su_skip[sp->sp_claim]);
}

/* After a failed pass: the writes that ran are reported failed (their
 * functions may have acted on their arguments), claims run again in a new
 * transaction (a claim is re-runnable by contract). */
static void store_steps_fail_writes(struct store_step *steps, size_t upto)
{
	size_t i;

	for (i = 0; i < upto; i++) {
		struct store_unit *u = steps[i].sp_unit;

		if (!u->su_settled && steps[i].sp_claim == STORE_STEP_WRITE) {
			store_unit_fail(u);
		}
	}
}

/* ---- lanes: claims side by side, for an engine that pipelines ---- */

struct store_lanes {
	struct store *sl_st;
	struct store_step *sl_steps;
	size_t *sl_first; /* per lane step: its first step; claims of one key run in one */
	size_t sl_end;    /* the first step that is no claim */
	int sl_hold;      /* no step after the claims: tx_hold */
	int sl_timed_out; /* a claim waited out the statement bound: settled */
};

static int store_step_same_key(const struct store_step *a, const struct store_step *b)
{
	const struct store_claim *x = &a->sp_unit->su_claims[a->sp_claim];
	const struct store_claim *y = &b->sp_unit->su_claims[b->sp_claim];

	return strcmp(x->sc_scope != NULL ? x->sc_scope : "",
	              y->sc_scope != NULL ? y->sc_scope : "") == 0 &&
	       strcmp(x->sc_key != NULL ? x->sc_key : "", y->sc_key != NULL ? y->sc_key : "") == 0;
}

/* One lane step: the claims of one key, in order, without savepoints
 * (a failure fails the whole pass, which then runs one unit at a time). */
static int store_lane_step(void *arg, size_t g, struct store_conn *lane)
{
	struct store_lanes *sl = arg;
	const struct store_engine *en = sl->sl_st->st_engine;
	size_t j;
	int r;

	for (j = sl->sl_first[g]; j < sl->sl_end; j++) {
		struct store_step *sp = &sl->sl_steps[j];
		struct store_unit *u = sp->sp_unit;
		struct store_claim *c = &u->su_claims[sp->sp_claim];
		struct store_tx tx = {.tx_store = sl->sl_st,
		                      .tx_engine = en,
		                      .tx_conn = lane,
		                      .tx_now = c->sc_now_ms,
		                      .tx_hold = sl->sl_hold};

		if (j > sl->sl_first[g] &&
		    !store_step_same_key(&sl->sl_steps[sl->sl_first[g]], sp)) {
			break;
		}
		if (!store_step_pending(sp)) {
			continue;
		}
		if (u->su_kind == STORE_UNIT_COMPLETE) {
			r = store_complete_step_run(&tx, c);
			u->su_result = r;
		} else {
			r = store_claim_decide(sl->sl_st, &tx, c, u->su_kind == STORE_UNIT_BEGIN);
			u->su_result = 0;
		}
		if (r < 0) {
			if (en->en_timed_out != NULL && en->en_timed_out(lane)) {
				/* It waited out the statement bound on a lock held
				 * elsewhere: transient now (503, the provider
				 * retries), not run again one by one to wait once
				 * more; the others of the pass run again. */
				store_unit_claim_settle(u, sp->sp_claim);
				sl->sl_timed_out = 1;
			}
			return -1;
		}
	}
	return 0;
}

/* Runs the batch's pending claims (the steps before the first write) on
 * the engine's lanes of the writer connection wc. *ret_next gets the first
 * step left to run one by one; *ret_timed_out is 1 when a claim waited out
 * the statement bound (and was settled). Returns what became of the
 * transaction (en_lanes). */
static enum store_tx_state store_batch_lanes(struct store *st, struct store_conn *wc,
                                             struct store_step *steps, size_t n, size_t *ret_next,
                                             int *ret_timed_out)
{
	struct store_lanes sl = {.sl_st = st, .sl_steps = steps};
	enum store_tx_state state;
	size_t groups = 0;
	size_t end;
	size_t j;

	for (end = 0; end < n && steps[end].sp_claim != STORE_STEP_WRITE; end++) {
	}
	*ret_next = end;
	*ret_timed_out = 0;
	sl.sl_end = end;
	sl.sl_hold = end == n;
	sl.sl_first = calloc(end + 1, sizeof(*sl.sl_first));
	if (sl.sl_first == NULL) {
		log_err("store: out of memory");
		*ret_next = 0;
		return STORE_TXS_OPEN; /* one by one, as without lanes */
	}
	for (j = 0; j < end; j++) {
		if (store_step_pending(&steps[j]) &&
		    (groups == 0 ||
		     !store_step_same_key(&steps[sl.sl_first[groups - 1]], &steps[j]))) {
			sl.sl_first[groups++] = j;
		}
	}
	state = groups > 0 ? st->st_engine->en_lanes(wc, groups, sl.sl_hold, store_lane_step, &sl)
	                   : STORE_TXS_OPEN;
	free(sl.sl_first);
	*ret_timed_out = sl.sl_timed_out;
	return state;
}

/* A unit of the batch on wc waited out the statement bound on a lock held
 * elsewhere: the engine cuts the batch's later lock waits short, once
 * (*cut). Returns en_lock_wait_cut's value. */
static int store_batch_lock_cut(const struct store_engine *en, struct store_conn *wc, int *cut)
{
	if (*cut || en->en_lock_wait_cut == NULL) {
		return 0;
	}
	*cut = 1;
	return en->en_lock_wait_cut(wc, 1);
}

/* 1 when the writer's own last statement (a write the lanes held back for
 * the round or the COMMIT) was cancelled on the bound: no claim was
 * settled for it, but the batch has waited it out. */
static int store_batch_timed_out(const struct store_engine *en, struct store_conn *wc)
{
	return en->en_timed_out != NULL && en->en_timed_out(wc);
}

/* In the writer's transaction, just begun: 0 when the schema is this
 * binary's, -1 when it is not (noted: the writers stop, as after the
 * probe's read) or cannot be read. The probe alone would leave a window of
 * up to its interval after a newer release's migration committed in which
 * this binary still wrote; the engine's read here leaves none. */
static int store_batch_schema_held(struct store *st, struct store_conn *wc)
{
	const struct store_engine *en = st->st_engine;
	int version;
	int r;

	if (en->en_schema_held == NULL) {
		return 0;
	}
	r = en->en_schema_held(wc, &version);
	if (r != 0) {
		/* 1: the engine checks it with the first statements */
		return r > 0 ? 0 : -1;
	}
	store_schema_note(st, version);
	return version == store_schema_version() ? 0 : -1;
}

/* After a pass on wc failed: 1 when the engine's own check of the schema
 * version (en_schema_held answered 1) was what failed it, the version it
 * found noted (the writers stop), else 0. */
static int store_batch_schema_found(struct store *st, struct store_conn *wc)
{
	const struct store_engine *en = st->st_engine;
	int version;

	if (en->en_schema_found == NULL) {
		return 0;
	}
	version = en->en_schema_found(wc);
	if (version < 0) {
		return 0;
	}
	store_schema_note(st, version);
	return 1;
}

/* Runs a batch in one transaction. SQLite may end the transaction by itself
 * when a statement fails with FULL, IOERR or NOMEM and has no statement
 * journal to undo just itself; then the unit that failed is transient and
 * the others run again. PostgreSQL may abort the batch on a deadlock or
 * serialization failure between receivers: the whole batch runs again, up
 * to STORE_BATCH_RETRIES times. A lost connection fails every unit
 * (transient: 503, nothing acknowledged before a COMMIT returned); the
 * writer reconnects before its next batch. A claim whose statement the
 * server cancelled on a lane (statement_timeout: a lock held elsewhere) is
 * settled transient there and is not run again with the others. The batch
 * waits out that bound once: after a unit did, the engine cuts every later
 * lock wait of the batch short (en_lock_wait_cut), so a second claim that
 * meets another lock does not hold the whole batch for the bound again. */
static void store_batch_run(struct store_writer *sw, struct store_unit *batch,
                            uint64_t *ret_commits, double *ret_commit_s)
{
	struct store *st = sw->sw_st;
	struct store_conn *wc = sw->sw_conn;
	const struct store_engine *en = st->st_engine;
	enum store_tx_state state;
	struct store_step *steps;
	unsigned retries = 0;
	int one_by_one = en->en_lanes == NULL;
	int timed_out = 0;
	int cut = 0;
	size_t n = 0;
	size_t i;
	double t0;

	*ret_commits = 0;
	*ret_commit_s = 0;
	steps = store_batch_steps(st, batch, &n);
	if (steps == NULL) {
		store_units_fail_unsettled(batch);
		return;
	}
	while (store_batch_pending(batch)) {
		/* The pass before failed on the engine's schema check: noted,
		 * and refused below as after the probe's verdict. */
		store_batch_schema_found(st, wc);
		/* Its commit would go to a log no restart reads: transient. */
		if (__atomic_load_n(&st->st_files_lost, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&st->st_schema_foreign, __ATOMIC_ACQUIRE) != 0 ||
		    (en->en_writer_conn_ready != NULL ? en->en_writer_conn_ready(st->st_db, wc)
		                                      : en->en_writer_ready(st->st_db)) < 0 ||
		    en->en_begin(wc, 1) < 0) {
			store_units_fail_unsettled(batch);
			break;
		}
		if (store_batch_schema_held(st, wc) < 0) {
			store_conn_exec(en, wc, "ROLLBACK");
			store_units_fail_unsettled(batch);
			break;
		}
		state = STORE_TXS_OPEN;
		i = 0;
		if (!one_by_one) {
			state = store_batch_lanes(st, wc, steps, n, &i, &timed_out);
			if (state == STORE_TXS_ENDED) {
				/* A claim failed on its lane: the pass is undone and
				 * every claim runs again in a savepoint of its own. */
				timed_out = timed_out || store_batch_timed_out(en, wc);
				store_conn_exec(en, wc, "ROLLBACK");
				if (timed_out) {
					store_batch_lock_cut(en, wc,
					                     &cut); /* with the next BEGIN */
				}
				one_by_one = 1;
				continue;
			}
		}
		for (; i < n && state == STORE_TXS_OPEN; i++) {
			if (store_step_pending(&steps[i])) {
				state = store_step_run(st, wc, &steps[i], &timed_out);
				if (timed_out && state == STORE_TXS_OPEN &&
				    store_batch_lock_cut(en, wc, &cut) < 0) {
					state = en->en_tx_state(wc);
				}
			}
		}
		if (state == STORE_TXS_OPEN &&
		    (__atomic_load_n(&st->st_files_lost, __ATOMIC_ACQUIRE) ||
		     __atomic_load_n(&st->st_schema_foreign, __ATOMIC_ACQUIRE) != 0)) {
			/* Seen while the batch ran: no COMMIT starts after it. */
			store_conn_exec(en, wc, "ROLLBACK");
			store_units_fail_unsettled(batch);
			break;
		}
		if (state == STORE_TXS_OPEN) {
			t0 = store_mono_s();
			if (store_conn_exec(en, wc, "COMMIT") == 0) {
				(*ret_commits)++;
				*ret_commit_s = store_mono_s() - t0;
				break;
			}
			state = en->en_tx_state(wc);
			if (state == STORE_TXS_ENDED && !one_by_one) {
				/* Nothing committed (a claim's write the engine held
				 * for the COMMIT failed): every claim runs again in a
				 * savepoint of its own, as after a failed lane. */
				if (store_batch_timed_out(en, wc)) {
					store_batch_lock_cut(en, wc, &cut);
				}
				if (en->en_in_tx(wc)) {
					store_conn_exec(en, wc, "ROLLBACK");
				}
				store_steps_fail_writes(steps, n);
				one_by_one = 1;
				continue;
			}
			if (state == STORE_TXS_OPEN || state == STORE_TXS_ENDED) {
				if (en->en_in_tx(wc)) {
					store_conn_exec(en, wc, "ROLLBACK");
				}
				store_units_fail_unsettled(batch);
				break;
			}
			i = n;
		}
		if (state == STORE_TXS_ENDED) {
			if (store_batch_schema_found(st, wc)) {
				store_units_fail_unsettled(batch);
				break;
			}
			log_warn("store: %s rolled the transaction back; the failed unit is "
			         "transient, the others run again",
			         en->en_name);
			store_steps_fail_writes(steps, i - 1);
			continue;
		}
		if (en->en_in_tx(wc)) {
			store_conn_exec(en, wc, "ROLLBACK");
		}
		if (state == STORE_TXS_RETRY && ++retries <= STORE_BATCH_RETRIES) {
			log_warn("store: the batch met a deadlock or serialization failure; "
			         "running it again");
			store_steps_fail_writes(steps, i);
			continue;
		}
		store_units_fail_unsettled(batch);
		break;
	}
	/* A pass that failed on the engine's schema check and ended the
	 * batch (a lost connection after it) is noted all the same. */
	store_batch_schema_found(st, wc);
	if (cut) {
		en->en_lock_wait_cut(wc, 0);
	}
	free(steps);
}

static unsigned store_hist_bucket(uint64_t n)
{
	unsigned b = 0;

	while (n > 1 && b < STORE_HIST_BUCKETS - 1) {
		n >>= 1;
		b++;
	}
	return b;
}

/* 1 when the queue holds work for a writer that takes plain writes
 * (writes 1) or only claims (writes 0). Under st_mutex. */
static int store_queue_has(const struct store *st, int writes)
{
	return writes ? st->st_head != NULL : st->st_queued_units > st->st_queued_writes;
}

/* Takes whole units from the queue, up to st_batch_max claims and writes
 * (a group of claims is never split; the first is taken whatever its size).
 * Without writes the plain writes are left in the queue, in their order,
 * for the first writer. Under st_mutex. */
static struct store_unit *store_queue_take(struct store *st, int writes, uint64_t *ret_weight)
{
	struct store_unit *batch = NULL;
	struct store_unit *tail = NULL;
	struct store_unit **pp = &st->st_head;
	struct store_unit *kept = NULL; /* the last unit left in the queue */
	uint64_t weight = 0;

	while (*pp != NULL) {
		struct store_unit *u = *pp;
		uint64_t w = store_unit_weight(u);

		if (!writes && u->su_kind == STORE_UNIT_WRITE) {
			kept = u;
			pp = &u->su_next;
			continue;
		}
		if (weight > 0 && weight + w > st->st_batch_max) {
			break;
		}
		*pp = u->su_next;
		if (st->st_tail == u) {
			st->st_tail = kept;
		}
		st->st_queued_units--;
		st->st_queued_writes -= u->su_kind == STORE_UNIT_WRITE;
		u->su_next = NULL;
		if (tail == NULL) {
			batch = u;
		} else {
			tail->su_next = u;
		}
		tail = u;
		weight += w;
	}
	*ret_weight = weight;
	return batch;
}

/* Upper bounds of ss_commit_hist, seconds (the last bucket is +Inf). */
static const double store_commit_le[STORE_COMMIT_BUCKETS - 1] = {0.0005, 0.001, 0.002, 0.005,
                                                                 0.01,   0.025, 0.05,  0.1};

/* Counts one batch: one observation of the batch-size histogram whatever
 * became of it, so its buckets, _sum and _count always agree; and the time
 * its COMMIT took (the fsync), when it committed. */
static void store_count_batch(struct store_writer *sw, const struct store_unit *batch,
                              uint64_t weight, uint64_t commits, double commit_s)
{
	struct store *st = sw->sw_st;
	const struct store_unit *u;
	uint64_t transient = 0;
	size_t i;

	for (u = batch; u != NULL; u = u->su_next) {
		if (u->su_kind == STORE_UNIT_WRITE) {
			transient += u->su_result < 0;
			continue;
		}
		for (i = 0; i < u->su_n; i++) {
			transient += u->su_claims[i].sc_outcome == STORE_TRANSIENT;
		}
	}
	pthread_mutex_lock(&st->st_stats_mutex);
	st->st_stats.ss_wal_frames = st->st_engine->en_wal_written(st->st_db);
	if (st->st_engine->en_round_trips != NULL) {
		/* Each writer adds its own connection's. */
		uint64_t rt = st->st_engine->en_round_trips(sw->sw_conn);

		st->st_stats.ss_round_trips += rt - sw->sw_round_trips;
		sw->sw_round_trips = rt;
	}
	st->st_stats.ss_commits += commits;
	st->st_stats.ss_units += weight;
	st->st_stats.ss_batches++;
	st->st_stats.ss_batch_hist[store_hist_bucket(weight)]++;
	st->st_stats.ss_transient += transient;
	if (commits > 0) {
		for (i = 0; i < STORE_COMMIT_BUCKETS - 1 && commit_s > store_commit_le[i]; i++) {
		}
		st->st_stats.ss_commit_hist[i]++;
		st->st_stats.ss_commit_seconds += commit_s;
	}
	pthread_mutex_unlock(&st->st_stats_mutex);
}

/* What a completion reports: claims were run (each has its outcome), a
 * completion of a two-phase claim says whether it applied, a write passes
 * back its function's value. */
static int store_unit_result(const struct store_unit *u)
{
	switch (u->su_kind) {
	case STORE_UNIT_CLAIMS:
	case STORE_UNIT_BEGIN:
		return 0;
	default:
		return u->su_result;
	}
}

/* ---- the writer's loop ---- */

/* ---- the key filter (keyset.h) ----
 * A claim's key that the filter has never seen is not in the database
 * (unless another process wrote it, see below): the claim goes to the
 * writer without the read that looks for a stored reply. The filter is an
 * optimisation only: the writer's unique index decides every claim, so a
 * wrong "maybe" costs a read, a wrong "absent" (a key written by another
 * process beside this one, such as a command run beside serve) costs the
 * duplicate a place in a batch instead of a read. A thread fills it from
 * the database at start, a page of keys per read transaction (a long one
 * would hold back the checkpoint), while claims add their keys to it; a
 * filter past its capacity is filled again at twice the size. */

/* Claims' keys read in one page, in key order after (scope, key). */
#define STORE_SQL_KEYS_FIRST                                                                       \
	"SELECT scope, idem_key FROM idempotency_records ORDER BY scope, idem_key LIMIT ?"
#define STORE_SQL_KEYS_NEXT                                                                        \
	"SELECT scope, idem_key FROM idempotency_records WHERE (scope, idem_key) > (?, ?) "        \
	"ORDER BY scope, idem_key LIMIT ?"

struct store_keys_page {
	struct keyset *kp_ks;
	char *kp_scope; /* the last key read */
	char *kp_key;
	size_t kp_n;
};

static int store_keys_row(void *arg, const struct store_row *row)
{
	struct store_keys_page *kp = arg;
	const char *scope = store_row_text(row, 0);
	const char *key = store_row_text(row, 1);

	if (scope == NULL || key == NULL) {
		return 0;
	}
	keyset_add(kp->kp_ks, keyset_hash(scope, key));
	free(kp->kp_scope);
	free(kp->kp_key);
	kp->kp_scope = strdup(scope);
	kp->kp_key = strdup(key);
	kp->kp_n++;
	return kp->kp_scope != NULL && kp->kp_key != NULL ? 0 : -1;
}

static int store_keys_read_page(struct store_tx *tx, void *arg)
{
	struct store_keys_page *kp = arg;
	char *scope;
	char *key;
	int rc;

	if (kp->kp_scope == NULL) {
		struct store_value n = store_int(STORE_KEYS_PAGE);

		return store_query_each(tx, STORE_SQL_KEYS_FIRST, &n, 1, store_keys_row, kp);
	}
	/* The bound key is read while the rows replace kp's: bind copies. */
	scope = strdup(kp->kp_scope);
	key = strdup(kp->kp_key);
	rc = -1;
	if (scope != NULL && key != NULL) {
		struct store_value p[] = {store_text(scope), store_text(key),
		                          store_int(STORE_KEYS_PAGE)};

		rc = store_query_each(tx, STORE_SQL_KEYS_NEXT, p, 3, store_keys_row, kp);
	}
	free(scope);
	free(key);
	return rc;
}

static int store_keys_stopping(struct store *st)
{
	int stopping;

	pthread_mutex_lock(&st->st_mutex);
	stopping = st->st_stopping;
	pthread_mutex_unlock(&st->st_mutex);
	return stopping;
}

/* Waits until every batch the writers took before now has ended: its keys
 * are committed (or never will be) before the fill's first read, and
 * every later batch adds its keys to the filter being filled. */
static void store_keys_settle(struct store *st)
{
	uint64_t taken = __atomic_load_n(&st->st_batches_taken, __ATOMIC_SEQ_CST);
	struct timespec pause = {0, 1000 * 1000};

	while (__atomic_load_n(&st->st_batches_done, __ATOMIC_ACQUIRE) < taken &&
	       !store_keys_stopping(st)) {
		nanosleep(&pause, NULL);
	}
}

/* Reads every stored key into ks. Returns the keys read, or -1 (stopping,
 * or a read failed: logged). */
static int64_t store_keys_fill(struct store *st, struct keyset *ks)
{
	struct store_keys_page kp = {.kp_ks = ks};
	int64_t total = 0;

	for (;;) {
		kp.kp_n = 0;
		if (store_keys_stopping(st) || store_read(st, 0, store_keys_read_page, &kp) < 0) {
			total = -1;
			break;
		}
		total += (int64_t)kp.kp_n;
		if (kp.kp_n < STORE_KEYS_PAGE) {
			break;
		}
	}
	free(kp.kp_scope);
	free(kp.kp_key);
	return total;
}

/* Moves ks (may be NULL) to the filters replaced: a claim may still look
 * at it. Returns 0, or -1 when no more fit (the filter stops growing). */
static int store_keys_retire(struct store *st, struct keyset *ks)
{
	int rc = 0;

	if (ks == NULL) {
		return 0;
	}
	pthread_mutex_lock(&st->st_mutex);
	st->st_keys_old[st->st_n_keys_old++] = ks;
	rc = st->st_n_keys_old < STORE_KEYS_OLD_MAX ? 0 : -1;
	pthread_mutex_unlock(&st->st_mutex);
	return rc;
}

static int store_keys_count_row(void *arg, const struct store_row *row)
{
	*(int64_t *)arg = store_row_int(row, 0);
	return 1;
}

static int store_keys_count(struct store_tx *tx, void *arg)
{
	return store_query_each(tx, "SELECT count(*) FROM idempotency_records", NULL, 0,
	                        store_keys_count_row, arg);
}

/* The filter thread: fills a filter sized for twice the keys stored, puts
 * it in use, and waits until claims have added more keys than it was made
 * for, to fill one again. */
static void *store_keys_main(void *arg)
{
	struct store *st = arg;
	size_t capacity = st->st_keys_min;

	pthread_setname_np(pthread_self(), "store-keys");
	for (;;) {
		double t0 = store_mono_s();
		int64_t stored = 0;
		struct keyset *ks;
		int64_t n;

		if (store_read(st, 0, store_keys_count, &stored) < 0) {
			break;
		}
		if ((size_t)stored > capacity / 2) {
			capacity = (size_t)stored * 2;
		}
		ks = keyset_new(capacity);
		if (ks == NULL) {
			log_warn("store: no memory for a key filter of %zu keys; every claim reads "
			         "first",
			         capacity);
			break;
		}
		__atomic_store_n(&st->st_keys_next, ks, __ATOMIC_SEQ_CST);
		store_keys_settle(st);
		n = store_keys_fill(st, ks);
		if (n < 0) {
			__atomic_store_n(&st->st_keys_next, NULL, __ATOMIC_RELEASE);
			store_keys_retire(st, ks);
			break;
		}
		log_info("store: key filter ready: %" PRId64 " keys read in %.2f s, room for %zu "
		         "(%zu KiB)",
		         n, store_mono_s() - t0, capacity, keyset_bytes(ks) / 1024);
		ks = __atomic_exchange_n(&st->st_keys, ks, __ATOMIC_ACQ_REL);
		__atomic_store_n(&st->st_keys_next, NULL, __ATOMIC_RELEASE);
		if (store_keys_retire(st, ks) < 0) {
			break;
		}
		/* A claim that added to the filter just replaced may have asked
		 * for this one: only the filter in use past its room counts. */
		pthread_mutex_lock(&st->st_mutex);
		for (;;) {
			ks = __atomic_load_n(&st->st_keys, __ATOMIC_ACQUIRE);
			if (st->st_stopping || keyset_count(ks) > keyset_capacity(ks)) {
				break;
			}
			__atomic_store_n(&st->st_keys_grow, 0, __ATOMIC_RELEASE);
			pthread_cond_wait(&st->st_keys_cond, &st->st_mutex);
		}
		pthread_mutex_unlock(&st->st_mutex);
		if (st->st_stopping) {
			break;
		}
		capacity *= 2;
	}
	return NULL;
}

/* 1 when claim c's key is certainly not stored (by this process: see
 * above), 0 when it may be (read it first) or no filter is in use yet. */
static int store_keys_absent(struct store *st, const struct store_claim *c)
{
	struct keyset *ks;

	if (!st->st_keys_on) {
		return 0;
	}
	ks = __atomic_load_n(&st->st_keys, __ATOMIC_ACQUIRE);
	if (ks == NULL || keyset_maybe(ks, keyset_hash(c->sc_scope, c->sc_key))) {
		return 0;
	}
	__atomic_add_fetch(&st->st_reads_skipped, 1, __ATOMIC_RELAXED);
	return 1;
}

/* On the writer's thread, before it runs batch: adds its claims' keys to
 * the filter in use and to the one being filled, and asks for a larger
 * one when the filter in use is past its room. st_batches_taken was
 * counted before: a fill waits for every batch taken before it began. */
static void store_keys_add_batch(struct store *st, const struct store_unit *batch)
{
	struct keyset *ks;
	struct keyset *next;
	const struct store_unit *u;
	size_t i;

	if (!st->st_keys_on) {
		return;
	}
	ks = __atomic_load_n(&st->st_keys, __ATOMIC_SEQ_CST);
	next = __atomic_load_n(&st->st_keys_next, __ATOMIC_SEQ_CST);
	if (ks == NULL && next == NULL) {
		return;
	}
	for (u = batch; u != NULL; u = u->su_next) {
		for (i = 0; i < u->su_n; i++) {
			uint64_t h = keyset_hash(u->su_claims[i].sc_scope, u->su_claims[i].sc_key);

			if (ks != NULL) {
				keyset_add(ks, h);
			}
			if (next != NULL && next != ks) {
				keyset_add(next, h);
			}
		}
	}
	if (ks != NULL && keyset_count(ks) > keyset_capacity(ks) &&
	    !__atomic_exchange_n(&st->st_keys_grow, 1, __ATOMIC_ACQ_REL)) {
		pthread_mutex_lock(&st->st_mutex);
		pthread_cond_broadcast(&st->st_keys_cond);
		pthread_mutex_unlock(&st->st_mutex);
	}
}

/* Calls each unit's completion and frees it, having counted the time it
 * spent in each stage (store_stats.ss_unit_*_seconds) first, so that
 * whoever hears back sees it counted. No lock is held while a completion
 * runs: it may take locks of its own (resuming a connection) or queue
 * more work. */
static void store_units_done(struct store *st, struct store_unit *list)
{
	struct store_unit *u;
	struct store_unit *next;
	int64_t t;

	for (u = list; u != NULL; u = next) {
		next = u->su_next;
		t = store_mono_ns();
		pthread_mutex_lock(&st->st_stats_mutex);
		st->st_stats.ss_units_completed++;
		st->st_stats.ss_unit_queued_seconds +=
		        (double)(u->su_taken_ns - u->su_queued_ns) / 1e9;
		st->st_stats.ss_unit_batch_seconds +=
		        (double)(u->su_committed_ns - u->su_taken_ns) / 1e9;
		st->st_stats.ss_unit_completion_seconds += (double)(t - u->su_committed_ns) / 1e9;
		pthread_mutex_unlock(&st->st_stats_mutex);
		u->su_done(u->su_done_arg, store_unit_result(u));
		free(u);
	}
}

static void *store_done_main(void *arg)
{
	struct store *st = arg;
	struct store_unit *list;

	pthread_setname_np(pthread_self(), "store-done");
	pthread_mutex_lock(&st->st_done_mutex);
	for (;;) {
		while (st->st_done_head == NULL && !st->st_done_stopping) {
			st->st_done_waiting = 1;
			pthread_cond_wait(&st->st_done_cond, &st->st_done_mutex);
			st->st_done_waiting = 0;
		}
		if (st->st_done_head == NULL) {
			break;
		}
		list = st->st_done_head;
		st->st_done_head = NULL;
		st->st_done_tail = NULL;
		pthread_mutex_unlock(&st->st_done_mutex);
		store_units_done(st, list);
		pthread_mutex_lock(&st->st_done_mutex);
	}
	pthread_mutex_unlock(&st->st_done_mutex);
	return NULL;
}

/* Hands a finished batch to the completion thread (on the writer's own
 * thread when there is none). */
static void store_complete(struct store *st, struct store_unit *batch)
{
	struct store_unit *last = batch;

	if (!st->st_done_running) {
		store_units_done(st, batch);
		return;
	}
	while (last->su_next != NULL) {
		last = last->su_next;
	}
	pthread_mutex_lock(&st->st_done_mutex);
	if (st->st_done_tail != NULL) {
		st->st_done_tail->su_next = batch;
	} else {
		st->st_done_head = batch;
	}
	st->st_done_tail = last;
	if (st->st_done_waiting) {
		pthread_cond_signal(&st->st_done_cond);
	}
	pthread_mutex_unlock(&st->st_done_mutex);
}

/* Gives the calling writer thread st_writer_nice. Every unique callback
 * waits for the writer's batch, and on a machine whose cores the server
 * threads (and whatever else runs there) keep busy, a writer woken by its
 * COMMIT's fsync or by new claims waits for a core: 8 to 22 us per unique
 * callback beside 43 to 78 us of its CPU on two cores, about a third to a
 * half of that at nice -10, for 0 to 15 % more unique callbacks/s in a run
 * (issue 24, docs/benchmarks.md). On Linux the nice value of a thread is its own
 * (setpriority(2) on the thread id). Lowering it takes CAP_SYS_NICE or an
 * RLIMIT_NICE that allows it (systemd: LimitNICE=); without either, the
 * writer runs at the process's nice value and the first writer says so. */
static void store_writer_priority(const struct store_writer *sw)
{
	int nice = sw->sw_st->st_writer_nice;

	if (nice == 0) {
		return;
	}
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), nice) != 0 && sw->sw_index == 0) {
		log_notice("store: the writer keeps the process's priority (nice %d: %s); "
		           "allow it with LimitNICE=%d in the systemd unit or CAP_SYS_NICE, "
		           "or set [store] writer_nice = 0",
		           nice, strerror(errno), 20 - nice);
	}
}

static void *store_writer_main(void *arg)
{
	struct store_writer *sw = arg;
	struct store *st = sw->sw_st;
	int writes = sw->sw_index == 0;
	struct store_unit *batch;
	uint64_t weight;
	uint64_t commits;
	double commit_s;
	double t0;

	/* Named, so that top -H and perf tell the writer apart. */
	pthread_setname_np(pthread_self(), "store-writer");
	store_writer_priority(sw);
	store_this_writer = sw;
	for (;;) {
		pthread_mutex_lock(&st->st_mutex);
		while (!store_queue_has(st, writes) && !st->st_stopping) {
			pthread_cond_wait(&st->st_work, &st->st_mutex);
		}
		if (!store_queue_has(st, writes)) {
			pthread_mutex_unlock(&st->st_mutex);
			break;
		}
		/* Whatever queued up while the last batch ran goes in this one;
		 * a lone unit goes at once. */
		batch = store_queue_take(st, writes, &weight);
		__atomic_add_fetch(&st->st_batches_taken, 1, __ATOMIC_SEQ_CST);
		pthread_mutex_unlock(&st->st_mutex);
		store_units_stamp(batch, 0);

		store_keys_add_batch(st, batch);
		store_heartbeat_begin(sw);
		store_batch_run(sw, batch, &commits, &commit_s);
		store_units_stamp(batch, 1);
		store_heartbeat_end(sw, commits);
		__atomic_add_fetch(&st->st_batches_done, 1, __ATOMIC_RELEASE);
		/* Counted before anyone hears back, so a reader of the metrics
		 * who has every answer also sees every batch. */
		store_count_batch(sw, batch, weight, commits, commit_s);
		store_complete(st, batch);
		t0 = store_mono_s();
		/* The WAL restart holds the write lock too (SQLite): the probe
		 * is not to take it for another connection's. */
		__atomic_store_n(&sw->sw_hb_busy_since, (int64_t)(t0 * 1000.0), __ATOMIC_RELEASE);
		if (st->st_engine->en_after_batch(st->st_db) > 0) {
			pthread_mutex_lock(&st->st_stats_mutex);
			st->st_stats.ss_catch_ups++;
			st->st_stats.ss_catch_up_seconds += store_mono_s() - t0;
			pthread_mutex_unlock(&st->st_stats_mutex);
		}
		__atomic_store_n(&sw->sw_hb_busy_since, 0, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* A unit for n claims (n = 0 for a plain write), or NULL (logged). */
static struct store_unit *store_unit_new(enum store_unit_kind kind, size_t n)
{
	struct store_unit *u = calloc(1, sizeof(*u) + n);

	if (u == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	u->su_kind = kind;
	u->su_n = n;
	u->su_result = -1;
	return u;
}

/* Queues u for the writer, which calls u->su_done after COMMIT and frees u.
 * Returns 0, or -1 when the store takes no writes (u untouched, not freed). */
static int store_enqueue(struct store *st, struct store_unit *u)
{
	if (st->st_read_only || !st->st_thread_running) {
		log_err("store: the database is open read-only; writes are refused");
		return -1;
	}
	u->su_settled = 0;
	u->su_next = NULL;
	u->su_queued_ns = store_mono_ns();
	pthread_mutex_lock(&st->st_mutex);
	if (st->st_stopping) {
		pthread_mutex_unlock(&st->st_mutex);
		return -1;
	}
	if (st->st_tail == NULL) {
		st->st_head = u;
	} else {
		st->st_tail->su_next = u;
	}
	st->st_tail = u;
	st->st_queued_units++;
	st->st_queued_writes += u->su_kind == STORE_UNIT_WRITE;
	/* Several writers: the one woken must be one that takes u. */
	if (st->st_n_writers > 1) {
		pthread_cond_broadcast(&st->st_work);
	} else {
		pthread_cond_signal(&st->st_work);
	}
	pthread_mutex_unlock(&st->st_mutex);
	return 0;
}

/* ---- waiting for a completion (the blocking calls) ---- */

struct store_wait {
	pthread_mutex_t sw_mutex;
	pthread_cond_t sw_cond;
	int sw_done;
	int sw_result;
};

static int store_wait_init(struct store *st, struct store_wait *sw)
{
	if (store_self_writer(st) != NULL) {
		log_err("store: a unit of work cannot queue another one and wait for it");
		return -1;
	}
	sw->sw_done = 0;
	sw->sw_result = -1;
	if (pthread_mutex_init(&sw->sw_mutex, NULL) != 0) {
		log_err("store: cannot create a mutex");
		return -1;
	}
	if (pthread_cond_init(&sw->sw_cond, NULL) != 0) {
		log_err("store: cannot create a condition variable");
		pthread_mutex_destroy(&sw->sw_mutex);
		return -1;
	}
	return 0;
}

static void store_wait_done(void *arg, int result)
{
	struct store_wait *sw = arg;

	/* Signalled under the mutex: the waiter cannot return and free sw
	 * before this thread has let go of it. */
	pthread_mutex_lock(&sw->sw_mutex);
	sw->sw_result = result;
	sw->sw_done = 1;
	pthread_cond_signal(&sw->sw_cond);
	pthread_mutex_unlock(&sw->sw_mutex);
}

/* Waits for store_wait_done, frees the wait and returns its result. */
static int store_wait_finish(struct store_wait *sw)
{
	int result;

	pthread_mutex_lock(&sw->sw_mutex);
	while (!sw->sw_done) {
		pthread_cond_wait(&sw->sw_cond, &sw->sw_mutex);
	}
	result = sw->sw_result;
	pthread_mutex_unlock(&sw->sw_mutex);
	pthread_cond_destroy(&sw->sw_cond);
	pthread_mutex_destroy(&sw->sw_mutex);
	return result;
}

/* ---- public entry points ---- */

struct store *store_create(const struct store_options *opt)
{
	struct store *st;
	unsigned n;
	unsigned i;

	store_open_err = STORE_OPEN_FAILED;
	st = calloc(1, sizeof(*st));
	if (st == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	if (pthread_mutex_init(&st->st_mutex, NULL) != 0) {
		log_err("store: cannot create a mutex");
		free(st);
		return NULL;
	}
	if (pthread_cond_init(&st->st_work, NULL) != 0 ||
	    pthread_cond_init(&st->st_keys_cond, NULL) != 0) {
		log_err("store: cannot create a condition variable");
		pthread_mutex_destroy(&st->st_mutex);
		free(st);
		return NULL;
	}
	/* Static initializers: these never fail and need no destroy. */
	st->st_stats_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	st->st_done_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	st->st_done_cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	st->st_sync_made = 1;
	if (pthread_mutex_init(&st->st_probe_lock, NULL) != 0) {
		log_err("store: cannot create a mutex");
		goto fail;
	}
	st->st_probe_lock_made = 1;
	for (i = 0; i < STORE_ASIDE_LANES; i++) {
		struct store_aside *sa = &st->st_aside[i];
		pthread_condattr_t ca;

		sa->sa_store = st;
		pthread_mutex_init(&sa->sa_mutex, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&sa->sa_cond, &ca);
		pthread_condattr_destroy(&ca);
		sa->sa_made = 1;
	}
	st->st_read_only = opt->so_read_only;
	st->st_batch_max = opt->so_batch_max > 0 ? opt->so_batch_max : STORE_BATCH_MAX_DEFAULT;
	st->st_writer_nice = opt->so_writer_nice;
	st->st_busy_timeout_ms = opt->so_busy_timeout_ms > 0 ? opt->so_busy_timeout_ms
	                                                     : STORE_BUSY_TIMEOUT_MS_DEFAULT;
	st->st_engine = store_engine_of(opt);
	st->st_db = st->st_engine->en_open(opt, NULL, NULL);
	if (st->st_db == NULL) {
		goto fail;
	}
	if (st->st_read_only) {
		return st;
	}
	/* One writer on SQLite; on PostgreSQL so_pg_writers, each with its
	 * own connection. */
	n = 1;
	if (st->st_engine->en_writer_add != NULL) {
		n = opt->so_pg_writers > 0 ? opt->so_pg_writers : STORE_PG_WRITERS_DEFAULT;
		n = n < STORE_WRITERS_MAX ? n : STORE_WRITERS_MAX;
	}
	for (i = 0; i < n; i++) {
		struct store_writer *sw = &st->st_writers[i];

		sw->sw_st = st;
		sw->sw_index = i;
		sw->sw_conn = i == 0 ? st->st_engine->en_writer(st->st_db)
		                     : st->st_engine->en_writer_add(st->st_db);
		if (sw->sw_conn == NULL) {
			goto fail;
		}
	}
	/* Before the writers: none of them hands a batch over while it starts. */
	st->st_done_running = pthread_create(&st->st_done_thread, NULL, store_done_main, st) == 0;
	if (!st->st_done_running) {
		log_warn("store: cannot start the completion thread; the writer completes its "
		         "batches itself");
	}
	for (i = 0; i < n; i++) {
		struct store_writer *sw = &st->st_writers[i];

		pthread_mutex_lock(&st->st_mutex);
		sw->sw_running = pthread_create(&sw->sw_thread, NULL, store_writer_main, sw) == 0;
		st->st_n_writers += sw->sw_running;
		st->st_thread_running = st->st_n_writers > 0;
		pthread_mutex_unlock(&st->st_mutex);
		if (!sw->sw_running) {
			log_err("store: cannot start the writer thread");
			goto fail;
		}
	}
	/* The key filter is this receiver's own knowledge: where several
	 * receivers share the database, keys stored by the others would be
	 * missed, and their duplicates belong to the read pool. */
	if (opt->so_key_filter && !st->st_engine->en_shared) {
		st->st_keys_on = 1;
		st->st_keys_min =
		        opt->so_key_filter_min > 0 ? opt->so_key_filter_min : STORE_KEYS_MIN;
		st->st_keys_running =
		        pthread_create(&st->st_keys_thread, NULL, store_keys_main, st) == 0;
		if (!st->st_keys_running) {
			log_warn("store: cannot start the key filter's thread; every claim reads "
			         "first");
		}
	}
	return st;
fail:
	store_destroy(st);
	return NULL;
}

void store_destroy(struct store *st)
{
	size_t i;
	size_t j;

	if (st == NULL) {
		return;
	}
	for (i = 0; i < STORE_ASIDE_LANES; i++) {
		struct store_aside *sa = &st->st_aside[i];

		if (!sa->sa_running) {
			continue;
		}
		/* A call still waiting on the database is waited for: it uses
		 * connections closed below. */
		pthread_mutex_lock(&sa->sa_mutex);
		sa->sa_stop = 1;
		pthread_cond_broadcast(&sa->sa_cond);
		pthread_mutex_unlock(&sa->sa_mutex);
		pthread_join(sa->sa_thread, NULL);
		sa->sa_running = 0;
	}
	if (st->st_thread_running) {
		/* The writers finish what is queued (each completion called)
		 * and stop; later submissions are refused. */
		pthread_mutex_lock(&st->st_mutex);
		st->st_stopping = 1;
		pthread_cond_broadcast(&st->st_work);
		pthread_cond_broadcast(&st->st_keys_cond);
		pthread_mutex_unlock(&st->st_mutex);
		for (i = 0; i < STORE_WRITERS_MAX; i++) {
			if (st->st_writers[i].sw_running) {
				pthread_join(st->st_writers[i].sw_thread, NULL);
			}
		}
		st->st_thread_running = 0;
	}
	if (st->st_done_running) {
		/* After the writers: it calls every completion they handed
		 * over, then stops. */
		pthread_mutex_lock(&st->st_done_mutex);
		st->st_done_stopping = 1;
		pthread_cond_signal(&st->st_done_cond);
		pthread_mutex_unlock(&st->st_done_mutex);
		pthread_join(st->st_done_thread, NULL);
		st->st_done_running = 0;
	}
	if (st->st_keys_running) {
		pthread_join(st->st_keys_thread, NULL);
		st->st_keys_running = 0;
	}
	keyset_free(st->st_keys);
	for (i = 0; i < st->st_n_keys_old; i++) {
		keyset_free(st->st_keys_old[i]);
	}
	if (st->st_db != NULL) {
		st->st_engine->en_close(st->st_db);
	}
	if (st->st_probe_lock_made) {
		pthread_mutex_destroy(&st->st_probe_lock);
	}
	for (i = 0; i < STORE_ASIDE_LANES; i++) {
		if (st->st_aside[i].sa_made) {
			pthread_cond_destroy(&st->st_aside[i].sa_cond);
			pthread_mutex_destroy(&st->st_aside[i].sa_mutex);
		}
	}
	if (st->st_sync_made) {
		pthread_cond_destroy(&st->st_work);
		pthread_cond_destroy(&st->st_keys_cond);
		pthread_mutex_destroy(&st->st_mutex);
	}
	for (i = 0; i < STORE_WRITERS_MAX; i++) {
		for (j = 0; j < STORE_CLAIM_SQL_CACHED; j++) {
			free(st->st_writers[i].sw_claim_sql[j].cq_sql);
		}
	}
	free(st);
}

static void store_claim_reset(struct store_claim *c)
{
	reply_finish(&c->sc_reply);
	c->sc_outcome = STORE_TRANSIENT;
	c->sc_status = STORE_STATUS_PROCESSING;
	c->sc_retry_after_s = 0;
	c->sc_token = 0;
}

/* A single claim whose key is already done/failed, answered on this
 * thread's read connection; or transient when the read waited out the
 * statement bound. Returns 1 when answered, 0 otherwise. */
static int store_claim_fast(struct store *st, struct store_claim *c)
{
	struct store_value key[] = {store_text(c->sc_scope), store_text(c->sc_key)};
	struct store_tx tx = {.tx_store = st, .tx_engine = st->st_engine, .tx_now = c->sc_now_ms};
	enum store_status status;
	struct store_row rec;
	int answered = 0;
	int timed_out;
	int found;

	/* The fast path is an optimization: a busy pool sends the claim to
	 * the writer rather than holding this (server) thread. */
	if (__atomic_load_n(&st->st_files_lost, __ATOMIC_ACQUIRE)) {
		return 0;
	}
	tx.tx_conn = st->st_engine->en_reader_get(st->st_db, 0);
	if (tx.tx_conn == NULL) {
		return 0;
	}
	found = store_query(&tx, STORE_SQL_RECORD, key, 2, &rec);
	timed_out = found < 0 && st->st_engine->en_timed_out != NULL &&
	            st->st_engine->en_timed_out(tx.tx_conn);
	st->st_engine->en_reader_put(st->st_db, tx.tx_conn);
	if (timed_out) {
		/* The read waited out the statement bound on a lock of the
		 * whole table (DDL of another session), which the writer's
		 * claim would wait on again: transient now. */
		store_claim_transient(c, 0);
		pthread_mutex_lock(&st->st_stats_mutex);
		st->st_stats.ss_transient++;
		pthread_mutex_unlock(&st->st_stats_mutex);
		return 1;
	}
	if (found <= 0) {
		return 0;
	}
	if (store_status_parse(store_row_text(&rec, STORE_REC_STATUS), &status) == 0 &&
	    status != STORE_STATUS_PROCESSING &&
	    store_row_int(&rec, STORE_REC_CREATED_AT) >= c->sc_now_ms - store_retention_ms(c) &&
	    store_claim_answer(c, &rec, status) == 0) {
		store_count_conflict(st);
		answered = 1;
	}
	store_row_finish(&rec);
	return answered;
}

/* Queues a claims unit of kind for the writer. On refusal every claim is
 * transient and done runs here, with -1. */
static int store_submit_unit(struct store *st, enum store_unit_kind kind,
                             struct store_claim *claims, size_t n, store_done_fn done, void *arg)
{
	struct store_unit *u;
	size_t i;

	u = store_unit_new(kind, n);
	if (u != NULL) {
		u->su_claims = claims;
		u->su_done = done;
		u->su_done_arg = arg;
		if (store_enqueue(st, u) == 0) {
			return 0;
		}
		free(u);
	}
	for (i = 0; i < n; i++) {
		store_claim_transient(&claims[i], 0);
	}
	done(arg, -1);
	return -1;
}

int store_submit_async(struct store *st, struct store_claim *claims, size_t n,
                       store_done_fn done, void *arg)
{
	size_t i;

	for (i = 0; i < n; i++) {
		store_claim_reset(&claims[i]);
	}
	if (n == 0) {
		done(arg, 0);
		return 0;
	}
	if (!st->st_read_only && n == 1 && !store_keys_absent(st, &claims[0]) &&
	    store_claim_fast(st, &claims[0])) {
		done(arg, 0);
		return 0;
	}
	return store_submit_unit(st, STORE_UNIT_CLAIMS, claims, n, done, arg);
}

int store_submit(struct store *st, struct store_claim *claims, size_t n)
{
	struct store_wait sw;
	size_t i;

	if (store_wait_init(st, &sw) < 0) {
		for (i = 0; i < n; i++) {
			store_claim_reset(&claims[i]);
			store_claim_transient(&claims[i], 0);
		}
		return -1;
	}
	store_submit_async(st, claims, n, store_wait_done, &sw);
	return store_wait_finish(&sw) < 0 ? -1 : 0;
}

int store_claim_begin(struct store *st, struct store_claim *c)
{
	struct store_wait sw;

	store_claim_reset(c);
	if (store_wait_init(st, &sw) < 0) {
		store_claim_transient(c, 0);
		return -1;
	}
	store_submit_unit(st, STORE_UNIT_BEGIN, c, 1, store_wait_done, &sw);
	return store_wait_finish(&sw) < 0 ? -1 : 0;
}

int store_claim_complete(struct store *st, struct store_claim *c)
{
	struct store_wait sw;

	reply_finish(&c->sc_reply);
	c->sc_retry_after_s = 0;
	if (store_wait_init(st, &sw) < 0) {
		store_claim_transient(c, 0);
		return -1;
	}
	store_submit_unit(st, STORE_UNIT_COMPLETE, c, 1, store_wait_done, &sw);
	return store_wait_finish(&sw);
}

void store_claim_finish(struct store_claim *c)
{
	if (c == NULL) {
		return;
	}
	reply_finish(&c->sc_reply);
}

int store_peek(struct store *st, const char *scope, const char *key, int64_t now_ms,
               int64_t retention_ms, enum store_status *ret_status, unsigned char *ret_fingerprint)
{
	struct store_value p[] = {store_text(scope), store_text(key)};
	struct store_tx tx = {.tx_store = st, .tx_engine = st->st_engine, .tx_now = now_ms};
	enum store_status status;
	struct store_row rec;
	int64_t cutoff = now_ms - (retention_ms > 0 ? retention_ms : STORE_RETENTION_MS_DEFAULT);
	int found;

	tx.tx_conn = st->st_engine->en_reader_get(st->st_db, 1);
	if (tx.tx_conn == NULL) {
		return -1;
	}
	found = store_query(&tx, STORE_SQL_RECORD, p, 2, &rec);
	st->st_engine->en_reader_put(st->st_db, tx.tx_conn);
	if (found <= 0) {
		return found;
	}
	if (store_status_parse(store_row_text(&rec, STORE_REC_STATUS), &status) < 0) {
		goto fail;
	}
	if (store_row_int(&rec, STORE_REC_CREATED_AT) < cutoff) {
		store_row_finish(&rec);
		return 0;
	}
	if (ret_status != NULL) {
		*ret_status = status;
	}
	if (ret_fingerprint != NULL) {
		memset(ret_fingerprint, 0, STORE_FINGERPRINT_LEN);
		if (store_row_len(&rec, STORE_REC_FINGERPRINT) == STORE_FINGERPRINT_LEN) {
			memcpy(ret_fingerprint, store_row_text(&rec, STORE_REC_FINGERPRINT),
			       STORE_FINGERPRINT_LEN);
		}
	}
	store_row_finish(&rec);
	return 1;
fail:
	store_row_finish(&rec);
	return -1;
}

int store_write(struct store *st, int64_t now_ms, int (*fn)(struct store_tx *tx, void *arg),
                void *arg)
{
	struct store_unit *u;
	struct store_wait sw;

	if (store_wait_init(st, &sw) < 0) {
		return -1;
	}
	u = store_unit_new(STORE_UNIT_WRITE, 0);
	if (u != NULL) {
		u->su_fn = fn;
		u->su_arg = arg;
		u->su_now = now_ms;
		u->su_done = store_wait_done;
		u->su_done_arg = &sw;
		if (store_enqueue(st, u) < 0) {
			free(u);
			u = NULL;
		}
	}
	if (u == NULL) {
		store_wait_done(&sw, -1);
	}
	return store_wait_finish(&sw);
}

int store_read(struct store *st, int64_t now_ms, int (*fn)(struct store_tx *tx, void *arg),
               void *arg)
{
	const struct store_engine *en = st->st_engine;
	struct store_tx tx = {.tx_store = st, .tx_engine = en, .tx_now = now_ms};
	int nested;
	int r = -1;

	tx.tx_conn = en->en_reader_get(st->st_db, 1);
	if (tx.tx_conn == NULL) {
		return -1;
	}
	/* A read nested in another read shares its snapshot. */
	nested = en->en_in_tx(tx.tx_conn);
	if (!nested && en->en_begin(tx.tx_conn, 0) < 0) {
		goto out;
	}
	r = fn(&tx, arg);
	if (nested) {
		goto out;
	}
	if (r >= 0 && store_conn_exec(en, tx.tx_conn, "COMMIT") == 0) {
		goto out;
	}
	if (en->en_in_tx(tx.tx_conn)) {
		store_conn_exec(en, tx.tx_conn, "ROLLBACK");
	}
	r = -1;
out:
	en->en_reader_put(st->st_db, tx.tx_conn);
	return r;
}

void store_get_stats(struct store *st, struct store_stats *ret)
{
	struct keyset *ks = __atomic_load_n(&st->st_keys, __ATOMIC_ACQUIRE);

	pthread_mutex_lock(&st->st_stats_mutex);
	*ret = st->st_stats;
	pthread_mutex_unlock(&st->st_stats_mutex);
	ret->ss_reads_skipped = __atomic_load_n(&st->st_reads_skipped, __ATOMIC_RELAXED);
	ret->ss_key_filter_ready = ks != NULL;
	if (st->st_engine->en_wal_state != NULL && st->st_db != NULL) {
		st->st_engine->en_wal_state(st->st_db, &ret->ss_wal_pages,
		                            &ret->ss_wal_held_seconds);
	}
	if (st->st_engine->en_cache_truncations != NULL) {
		st->st_engine->en_cache_truncations(&ret->ss_cache_truncations,
		                                    &ret->ss_cache_truncations_skipped);
	}
	if (ks != NULL) {
		ret->ss_key_filter_keys = keyset_count(ks);
		ret->ss_key_filter_capacity = keyset_capacity(ks);
		ret->ss_key_filter_bytes = keyset_bytes(ks);
	}
}

/* ---- operations: health, file sizes, space, snapshots ----
 * Everything here works beside the writer, on connections of its own with a
 * short busy timeout, and reports rather than logs what it meets on the way
 * (a probe that fails every 250 ms would flood the journal). */

#define STORE_STALL_MS 1000           /* a batch older than this means no commit now */
#define STORE_FAIL_HOLD_MS 5000       /* a failed commit keeps readiness off this long */
#define STORE_WRITER_HANG_MS 30000    /* past the busy timeout: the writer is stuck */

static int64_t store_mono_ms(void)
{
	return store_mono_ns() / 1000000;
}

/* The writer's heartbeat: the writer thread calls begin before a batch and
 * end after it, nothing more; store_probe reads it. */
static void store_heartbeat_begin(struct store_writer *sw)
{
	__atomic_store_n(&sw->sw_hb_busy_since, store_mono_ms(), __ATOMIC_RELEASE);
}

static void store_heartbeat_end(struct store_writer *sw, uint64_t commits)
{
	struct store *st = sw->sw_st;
	int64_t now = store_mono_ms();

	if (commits > 0) {
		__atomic_store_n(&st->st_hb_ok, now, __ATOMIC_RELEASE);
	} else if (__atomic_load_n(&st->st_schema_foreign, __ATOMIC_ACQUIRE) == 0) {
		/* (A batch refused for a foreign schema is no failed commit:
		 * the probe says why, and stops saying it once it is over.) */
		__atomic_store_n(&st->st_hb_fail_rc, st->st_engine->en_last_error(sw->sw_conn),
		                 __ATOMIC_RELEASE);
		__atomic_store_n(&st->st_hb_fail, now, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&sw->sw_hb_busy_since, 0, __ATOMIC_RELEASE);
}

void store_health_fail(struct store_health *h, const char *fmt, ...)
{
	va_list ap;

	if (!h->sh_ok) {
		return; /* the first reason found is the one told */
	}
	h->sh_ok = 0;
	va_start(ap, fmt);
	vsnprintf(h->sh_reason, sizeof(h->sh_reason), fmt, ap);
	va_end(ap);
}

/* Notes the schema version a probe read (-1: none): a version that is not
 * this binary's stops the writers until it is again. Logs the change once. */
static void store_schema_note(struct store *st, int version)
{
	int newest = store_schema_version();
	int foreign;
	int was;

	if (version < 0) {
		return; /* unknown: the verdict of the last read stands */
	}
	foreign = version != newest ? version : 0;
	was = __atomic_exchange_n(&st->st_schema_foreign, foreign, __ATOMIC_ACQ_REL);
	if (foreign == was) {
		return;
	}
	if (version > newest) {
		log_warn(
		        "store: database schema %d is newer than this idemhook (%d): new callbacks "
		        "and other writes are answered 503 until this receiver runs the new "
		        "release; duplicates still get their stored replies",
		        version, newest);
	} else if (foreign != 0) {
		log_warn(
		        "store: database schema %d is older than this idemhook (%d): new callbacks "
		        "and other writes are answered 503 until it is migrated",
		        version, newest);
	} else {
		log_notice("store: database schema %d is this idemhook's again; writes resume",
		           version);
	}
}

static void *store_aside_main(void *arg)
{
	struct store_aside *sa = arg;
	struct store *st = sa->sa_store;
	uint64_t seq;
	void *job;
	int rc;

	pthread_setname_np(pthread_self(), "store-aside"); /* top -H, perf */
	pthread_mutex_lock(&sa->sa_mutex);
	for (;;) {
		while (!sa->sa_stop && sa->sa_done == sa->sa_asked) {
			pthread_cond_wait(&sa->sa_cond, &sa->sa_mutex);
		}
		if (sa->sa_stop) {
			break;
		}
		seq = sa->sa_asked;
		sa->sa_started = seq;
		if (sa->sa_cancelled) {
			/* its caller gave up before it began, and keeps its job */
			sa->sa_cancelled = 0;
			sa->sa_done = seq;
			sa->sa_busy = 0;
			sa->sa_abandoned = 0;
			pthread_cond_broadcast(&sa->sa_cond);
			continue;
		}
		job = sa->sa_job;
		pthread_mutex_unlock(&sa->sa_mutex);
		rc = sa->sa_fn(st, job);
		pthread_mutex_lock(&sa->sa_mutex);
		sa->sa_rc = rc;
		sa->sa_done = seq;
		if (sa->sa_abandoned) {
			void (*job_free)(void *job) = sa->sa_job_free;

			sa->sa_busy = 0;
			sa->sa_abandoned = 0;
			if (job_free != NULL) {
				/* its caller gave up: the job is the store's */
				pthread_mutex_unlock(&sa->sa_mutex);
				job_free(job);
				pthread_mutex_lock(&sa->sa_mutex);
			}
		}
		pthread_cond_broadcast(&sa->sa_cond);
	}
	pthread_mutex_unlock(&sa->sa_mutex);
	return NULL;
}

/* Waits on sa_cond until deadline (CLOCK_MONOTONIC). Returns 1 when the
 * deadline passed. Under sa_mutex. */
static int store_aside_wait(struct store_aside *sa, const struct timespec *deadline)
{
	return pthread_cond_timedwait(&sa->sa_cond, &sa->sa_mutex, deadline) == ETIMEDOUT;
}

/* Hands fn(st, job) to the store's thread of lane and waits for it at
 * most wait_ms. Returns as store_call_owned. With copy (copy_size bytes),
 * job is sa_arg: copy is copied into it, and back once fn ended in time;
 * a call abandoned leaves it to the thread (job_free NULL). */
static int store_aside_call(struct store *st, enum store_aside_lane lane, unsigned wait_ms,
                            int (*fn)(struct store *st, void *job), void *job,
                            void (*job_free)(void *job), void *copy, size_t copy_size)
{
	struct store_aside *sa = &st->st_aside[lane];
	struct timespec deadline;
	uint64_t seq;
	int rc = STORE_CALL_NOT_RUN;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += (time_t)(wait_ms / 1000);
	deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	if (lane == STORE_ASIDE_WRITE) {
		/* A read still waiting past its own wait: the database answers
		 * nothing, so no write is begun. (Not the other way round: a
		 * write stuck behind the write lock leaves reads their turn.) */
		struct store_aside *reads = &st->st_aside[STORE_ASIDE_READ];
		int stuck;

		pthread_mutex_lock(&reads->sa_mutex);
		stuck = reads->sa_busy && reads->sa_abandoned;
		pthread_mutex_unlock(&reads->sa_mutex);
		if (stuck) {
			return STORE_CALL_NOT_RUN;
		}
	}
	pthread_mutex_lock(&sa->sa_mutex);
	/* Another caller's call: waited for, unless it already outlived
	 * its own wait (the database does not answer: no use asking twice). */
	while (sa->sa_busy) {
		if (sa->sa_abandoned || store_aside_wait(sa, &deadline)) {
			goto out;
		}
	}
	if (!sa->sa_running) {
		int err = pthread_create(&sa->sa_thread, NULL, store_aside_main, sa);

		if (err != 0) {
			log_err("store: cannot start a thread: %s", strerror(err));
			goto out;
		}
		sa->sa_running = 1;
	}
	if (copy != NULL) {
		memcpy(sa->sa_arg, copy, copy_size);
	}
	sa->sa_fn = fn;
	sa->sa_job = job;
	sa->sa_job_free = job_free;
	sa->sa_busy = 1;
	seq = ++sa->sa_asked;
	pthread_cond_broadcast(&sa->sa_cond);
	while (sa->sa_done < seq) {
		if (store_aside_wait(sa, &deadline) && sa->sa_done < seq) {
			/* Given up: later calls do not wait for it. Not begun
			 * yet, it is dropped and the job stays the caller's;
			 * begun, it ends on its own and the thread frees it. */
			sa->sa_abandoned = 1;
			if (sa->sa_started < seq) {
				sa->sa_cancelled = 1;
				goto out;
			}
			rc = STORE_CALL_LATE;
			goto out;
		}
	}
	if (copy != NULL) {
		memcpy(copy, sa->sa_arg, copy_size);
	}
	rc = sa->sa_rc;
	sa->sa_busy = 0;
	pthread_cond_broadcast(&sa->sa_cond);
out:
	pthread_mutex_unlock(&sa->sa_mutex);
	return rc;
}

int store_call_within(struct store *st, unsigned wait_ms, int (*fn)(struct store *st, void *arg),
                      void *arg, size_t arg_size)
{
	int rc;

	if (arg_size > STORE_ASIDE_ARG_MAX) {
		log_err("store: an argument of %zu bytes for a bounded call (at most %d)", arg_size,
		        STORE_ASIDE_ARG_MAX);
		return -1;
	}
	rc = store_aside_call(st, STORE_ASIDE_SCRAPE, wait_ms, fn,
	                      st->st_aside[STORE_ASIDE_SCRAPE].sa_arg, NULL, arg, arg_size);
	return rc < -1 ? -1 : rc;
}

int store_call_owned(struct store *st, unsigned wait_ms, int (*fn)(struct store *st, void *job),
                     void *job, void (*job_free)(void *job))
{
	return store_aside_call(st, STORE_ASIDE_READ, wait_ms, fn, job, job_free, NULL, 0);
}

int store_call_owned_write(struct store *st, unsigned wait_ms,
                           int (*fn)(struct store *st, void *job), void *job,
                           void (*job_free)(void *job))
{
	return store_aside_call(st, STORE_ASIDE_WRITE, wait_ms, fn, job, job_free, NULL, 0);
}

int store_probe(struct store *st, struct store_health *ret)
{
	struct store_health h = {.sh_ok = 1, .sh_writer_alive = 1, .sh_schema = -1};
	int64_t now = store_mono_ms();
	int64_t busy = 0;
	int64_t ok_at;
	int64_t fail_at;
	int fail_rc;
	unsigned i;

	if (st->st_read_only || !st->st_thread_running) {
		h.sh_writer_alive = 0;
		store_health_fail(&h, "the store has no writer");
		goto out;
	}
	/* The writer whose batch began first tells. */
	for (i = 0; i < st->st_n_writers; i++) {
		int64_t b = __atomic_load_n(&st->st_writers[i].sw_hb_busy_since, __ATOMIC_ACQUIRE);

		busy = b != 0 && (busy == 0 || b < busy) ? b : busy;
	}
	ok_at = __atomic_load_n(&st->st_hb_ok, __ATOMIC_ACQUIRE);
	fail_at = __atomic_load_n(&st->st_hb_fail, __ATOMIC_ACQUIRE);
	if (busy != 0 && now - busy > (int64_t)st->st_busy_timeout_ms + STORE_WRITER_HANG_MS) {
		h.sh_writer_alive = 0;
	}
	if (busy != 0 && now - busy > STORE_STALL_MS) {
		store_health_fail(&h, "the writer has waited %" PRId64 " ms for one commit (database locked?)",
		                  now - busy);
	}
	fail_rc = __atomic_load_n(&st->st_hb_fail_rc, __ATOMIC_ACQUIRE);
	/* A lock that was busy and is free now is no failure any more; any
	 * other (disk full, I/O) is believed for a while, as a probe that
	 * writes nothing cannot see it. */
	if (fail_at > ok_at && now - fail_at < STORE_FAIL_HOLD_MS &&
	    st->st_engine->en_error_reason(fail_rc) != NULL) {
		store_health_fail(&h, "the last commit failed: %s", st->st_engine->en_error_reason(fail_rc));
	}
	pthread_mutex_lock(&st->st_probe_lock);
	st->st_engine->en_probe(st->st_db, &st->st_writers[0].sw_hb_busy_since, &st->st_hb_ok, &h);
	store_schema_note(st, h.sh_schema);
	if (st->st_engine->en_files_check != NULL) {
		char reason[STORE_HEALTH_REASON_MAX];

		if (st->st_engine->en_files_check(st->st_db, &st->st_files, reason, sizeof(reason)) ==
		    1) {
			__atomic_store_n(&st->st_files_lost, 1, __ATOMIC_RELEASE);
			h.sh_ok = 1; /* the loss is the reason that matters */
			store_health_fail(&h, "%s", reason);
		}
	}
	pthread_mutex_unlock(&st->st_probe_lock);
out:
	*ret = h;
	return 0;
}

/* The length of loc's URI scheme with its colon (RFC 3986: a letter, then
 * letters, digits, "+", "-", "."), or 0 when it does not start with one. */
static size_t store_location_scheme_len(const char *loc)
{
	size_t i;

	if (!isalpha((unsigned char)loc[0])) {
		return 0;
	}
	for (i = 1;
	     isalnum((unsigned char)loc[i]) || loc[i] == '+' || loc[i] == '-' || loc[i] == '.';
	     i++) {
	}
	return loc[i] == ':' ? i + 1 : 0;
}

int store_location_parse(const char *loc, struct store_options *opt)
{
	if (loc == NULL || loc[0] == '\0') {
		return -1;
	}
	if (strncmp(loc, "postgresql://", 13) == 0 || strncmp(loc, "postgres://", 11) == 0) {
		opt->so_backend = STORE_BACKEND_POSTGRESQL;
		opt->so_conninfo = loc;
		return 0;
	}
	if (strncmp(loc, "postgresql:", 11) == 0 || strncmp(loc, "postgres:", 9) == 0) {
		opt->so_backend = STORE_BACKEND_POSTGRESQL;
		opt->so_conninfo = strchr(loc, ':') + 1;
		return opt->so_conninfo[0] != '\0' ? 0 : -1;
	}
	if (strncmp(loc, "sqlite:", 7) != 0 && store_location_scheme_len(loc) > 0) {
		return -1;
	}
	opt->so_backend = STORE_BACKEND_SQLITE;
	opt->so_path = strncmp(loc, "sqlite:", 7) == 0 ? loc + 7 : loc;
	return opt->so_path[0] != '\0' ? 0 : -1;
}

int store_after_copy(struct store_tx *tx)
{
	return tx->tx_engine->en_after_copy(tx);
}

int store_file_stats(struct store *st, struct store_file_stats *ret)
{
	return st->st_engine->en_file_stats(st, st->st_db, ret);
}

int store_reclaim(struct store *st, int64_t max_pages, int64_t *ret_pages)
{
	return st->st_engine->en_reclaim(st, max_pages, ret_pages);
}

int store_checkpoint(struct store *st)
{
	return st->st_engine->en_checkpoint(st->st_db);
}

int store_vacuum(struct store *st)
{
	return st->st_engine->en_vacuum(st->st_db);
}

enum store_backend store_backend_of(const struct store *st)
{
	return st->st_engine == &store_engine_pg ? STORE_BACKEND_POSTGRESQL : STORE_BACKEND_SQLITE;
}

int store_try_lock(struct store *st, const char *name)
{
	if (st->st_read_only) {
		return 1;
	}
	return st->st_engine->en_try_lock(st->st_db, name);
}

void store_unlock(struct store *st, const char *name)
{
	if (!st->st_read_only) {
		st->st_engine->en_unlock(st->st_db, name);
	}
}
