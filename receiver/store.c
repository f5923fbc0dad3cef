/* store.c: the SQLite idempotency store: a writer thread with group commit,
 * per-thread read connections, migrations, and the statement API of store.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "migrations.h"
#include "store.h"

#define STORE_BATCH_MAX_DEFAULT 256 /* units per transaction */
#define STORE_BUSY_TIMEOUT_MS_DEFAULT 5000
#define STORE_LEASE_MS_DEFAULT ((int64_t)60 * 1000)
#define STORE_RETENTION_MS_DEFAULT ((int64_t)7 * 24 * 3600 * 1000)
#define STORE_RETRY_AFTER_S 1 /* Retry-After for transient failures */
#define STORE_STMT_BUCKETS 64
#define STORE_STMT_CACHE_MAX 512 /* cached statements per connection */
#define STORE_DIR_MODE 0700  /* directories the store creates */
#define STORE_FILE_MODE 0600 /* the database; SQLite gives -wal and -shm its mode */
#define STORE_FINGERPRINT_LEN 32 /* SHA-256, as in struct store_claim */
#define STORE_HIST_BUCKETS 8 /* as in struct store_stats */
/* WAL frames (pages) after which the checkpointer copies them into the
 * database file, and after which the writer itself completes a checkpoint
 * so the WAL can start over (about 4 MB and 16 MB at 4 KiB pages). */
#define STORE_CKPT_FRAMES 1000
#define STORE_CKPT_FRAMES_MAX 4000

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

struct store_stmt {
	char *sm_sql;
	sqlite3_stmt *sm_stmt;
	int sm_busy; /* in use: a nested use of the same SQL prepares a temporary one */
	struct store_stmt *sm_next;
};

struct store_conn {
	sqlite3 *cn_db;
	struct store_stmt *cn_stmts[STORE_STMT_BUCKETS];
	size_t cn_n_stmts;
	struct store_conn *cn_next; /* in st_readers */
};

struct store_tx {
	struct store *tx_store; /* NULL while opening */
	struct store_conn *tx_conn;
	int64_t tx_now;
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
	unsigned char su_skip[]; /* per claim: settled, not run again */
};

/* The checkpointer: copies WAL frames into the database file on its own
 * connection and thread, so the writer's commits never wait for it. */
struct store_ckpt {
	struct store_conn *ck_conn;
	pthread_t ck_thread;
	int ck_running;
	pthread_mutex_t ck_mutex;
	pthread_cond_t ck_cond;
	int ck_wanted; /* under ck_mutex */
	int ck_stopping; /* under ck_mutex */
};

struct store {
	char *st_path;
	int st_read_only;
	unsigned st_batch_max;
	unsigned st_busy_timeout_ms;
	struct store_conn *st_writer; /* used only by the writer thread once it runs */
	pthread_t st_thread;
	int st_thread_running;
	pthread_mutex_t st_mutex;
	pthread_cond_t st_work;
	int st_sync_made;
	struct store_unit *st_head; /* queue, under st_mutex */
	struct store_unit *st_tail;
	int st_stopping;
	pthread_key_t st_key; /* this thread's read connection */
	int st_key_made;
	struct store_conn *st_readers; /* every read connection, under st_mutex */
	pthread_mutex_t st_stats_mutex;
	struct store_stats st_stats; /* under st_stats_mutex */
	int st_wal_frames; /* frames in the WAL after the last commit (writer thread) */
	int st_ckpt_asked; /* st_wal_frames when the checkpointer was last woken (writer thread) */
	uint64_t st_wal_written; /* frames appended to the WAL (writer thread) */
	struct store_ckpt st_ckpt;
	/* Health (see "operations" below): the writer's heartbeat, written by
	 * the writer thread and read with atomics by store_probe. */
	int64_t st_hb_busy_since; /* monotonic ms the current batch began; 0 when idle */
	int64_t st_hb_ok;         /* monotonic ms of the last batch that committed */
	int64_t st_hb_fail;       /* monotonic ms of the last batch that committed nothing */
	int st_hb_fail_rc;        /* its SQLite error code */
	struct store_conn *st_probe; /* store_probe's own connection */
	int64_t st_probe_locked_at;  /* monotonic ms the probe last found the lock held; 0 */
	int st_probe_locked_rc;
	pthread_mutex_t st_probe_lock;
	int st_probe_lock_made;
};

static void store_heartbeat_begin(struct store *st);
static void store_heartbeat_end(struct store *st, uint64_t commits);

static double store_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- errors ---- */

static int store_rc_transient(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_FULL:
	case SQLITE_IOERR:
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_NOMEM:
		return 1;
	default:
		return 0;
	}
}

static void store_log_rc(sqlite3 *db, int rc, const char *what)
{
	const char *msg = db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc);

	if (store_rc_transient(rc)) {
		log_warn("store: %.100s: %s", what, msg);
	} else {
		log_err("store: %.100s: %s", what, msg);
	}
}

/* ---- connections and the statement cache ---- */

/* The statement cache's key: FNV-1a over the length and the first and
 * last STORE_HASH_EDGE bytes. Statements run for every unit of work and
 * some are long; the whole text is compared on a hit anyway. */
#define STORE_HASH_EDGE 32

static unsigned store_hash(const char *s)
{
	size_t len = strlen(s);
	size_t head = len < 2 * STORE_HASH_EDGE ? len : STORE_HASH_EDGE;
	unsigned h = 2166136261u ^ (unsigned)len;
	size_t i;

	for (i = 0; i < head; i++) {
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	}
	for (i = len - (len - head < STORE_HASH_EDGE ? len - head : STORE_HASH_EDGE); i < len; i++) {
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	}
	return h;
}

static void store_conn_close(struct store_conn *cn)
{
	size_t i;
	int rc;

	if (cn == NULL) {
		return;
	}
	for (i = 0; i < STORE_STMT_BUCKETS; i++) {
		struct store_stmt *sm = cn->cn_stmts[i];

		while (sm != NULL) {
			struct store_stmt *next = sm->sm_next;

			sqlite3_finalize(sm->sm_stmt);
			free(sm->sm_sql);
			free(sm);
			sm = next;
		}
	}
	if (cn->cn_db != NULL) {
		rc = sqlite3_close(cn->cn_db);
		if (rc != SQLITE_OK) {
			store_log_rc(cn->cn_db, rc, "close");
		}
	}
	free(cn);
}

static struct store_conn *store_conn_open(const char *path, int flags, unsigned busy_timeout_ms)
{
	struct store_conn *cn;
	char quoted[256];
	int rc;

	cn = calloc(1, sizeof(*cn));
	if (cn == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	rc = sqlite3_open_v2(path, &cn->cn_db, flags | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_err("store: cannot open \"%s\": %s", log_quote(quoted, sizeof(quoted), path),
		        cn->cn_db != NULL ? sqlite3_errmsg(cn->cn_db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(cn->cn_db, (int)busy_timeout_ms);
	return cn;
fail:
	store_conn_close(cn);
	return NULL;
}

static int store_sql_is_blank(const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != ';') {
			return 0;
		}
	}
	return 1;
}

static sqlite3_stmt *store_prepare(struct store_conn *cn, const char *sql, unsigned flags)
{
	sqlite3_stmt *stmt = NULL;
	const char *tail = NULL;
	int rc;

	rc = sqlite3_prepare_v3(cn->cn_db, sql, -1, flags, &stmt, &tail);
	if (rc != SQLITE_OK) {
		store_log_rc(cn->cn_db, rc, sql);
		return NULL;
	}
	if (stmt == NULL || (tail != NULL && !store_sql_is_blank(tail))) {
		log_err("store: %.100s: exactly one statement expected", sql);
		sqlite3_finalize(stmt);
		return NULL;
	}
	return stmt;
}

/* Returns the cached statement for sql (marked busy, *ret_entry set), or a
 * temporary one (*ret_entry NULL) when the cached one is in use or the cache
 * is full. NULL on error (logged). */
static sqlite3_stmt *store_stmt_get(struct store_conn *cn, const char *sql,
                                    struct store_stmt **ret_entry)
{
	unsigned b = store_hash(sql) % STORE_STMT_BUCKETS;
	struct store_stmt *sm;

	*ret_entry = NULL;
	for (sm = cn->cn_stmts[b]; sm != NULL; sm = sm->sm_next) {
		if (strcmp(sm->sm_sql, sql) == 0) {
			break;
		}
	}
	if (sm != NULL && !sm->sm_busy) {
		sm->sm_busy = 1;
		*ret_entry = sm;
		return sm->sm_stmt;
	}
	if (sm != NULL || cn->cn_n_stmts >= STORE_STMT_CACHE_MAX) {
		return store_prepare(cn, sql, 0);
	}
	sm = calloc(1, sizeof(*sm));
	if (sm == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	sm->sm_sql = strdup(sql);
	if (sm->sm_sql == NULL) {
		log_err("store: out of memory");
		goto fail;
	}
	sm->sm_stmt = store_prepare(cn, sql, SQLITE_PREPARE_PERSISTENT);
	if (sm->sm_stmt == NULL) {
		goto fail;
	}
	sm->sm_busy = 1;
	sm->sm_next = cn->cn_stmts[b];
	cn->cn_stmts[b] = sm;
	cn->cn_n_stmts++;
	*ret_entry = sm;
	return sm->sm_stmt;
fail:
	free(sm->sm_sql);
	free(sm);
	return NULL;
}

/* Resets a statement so it holds no lock and no borrowed parameter. */
static void store_stmt_put(struct store_stmt *entry, sqlite3_stmt *stmt)
{
	if (entry == NULL) {
		sqlite3_finalize(stmt);
		return;
	}
	sqlite3_reset(stmt);
	sqlite3_clear_bindings(stmt);
	entry->sm_busy = 0;
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

static int store_row_fill(sqlite3_stmt *stmt, struct store_row *row)
{
	int n = sqlite3_column_count(stmt);
	int i;

	memset(row, 0, sizeof(*row));
	if (n > STORE_ROW_MAX) {
		log_err("store: %.100s: more than %d result columns", sqlite3_sql(stmt),
		        STORE_ROW_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct store_value *v = &row->sr_cols[i];
		int type = sqlite3_column_type(stmt, i);
		const void *p;
		size_t len;
		char *copy;

		row->sr_n = (size_t)i + 1;
		if (type == SQLITE_NULL) {
			v->sv_type = STORE_NULL;
			continue;
		}
		if (type == SQLITE_INTEGER || type == SQLITE_FLOAT) {
			v->sv_type = STORE_INT;
			v->sv_int = sqlite3_column_int64(stmt, i);
			continue;
		}
		if (type == SQLITE_TEXT) {
			p = sqlite3_column_text(stmt, i);
		} else {
			p = sqlite3_column_blob(stmt, i);
		}
		len = (size_t)sqlite3_column_bytes(stmt, i);
		copy = malloc(len + 1);
		if (copy == NULL) {
			log_err("store: out of memory");
			store_row_finish(row);
			return -1;
		}
		if (len > 0) {
			memcpy(copy, p, len);
		}
		copy[len] = '\0';
		v->sv_type = type == SQLITE_TEXT ? STORE_TEXT : STORE_BLOB;
		v->sv_text = copy;
		v->sv_len = len;
	}
	return 0;
}

static int store_bind(sqlite3 *db, sqlite3_stmt *stmt, const struct store_value *params,
                      size_t n_params)
{
	size_t i;
	int rc;

	if ((size_t)sqlite3_bind_parameter_count(stmt) != n_params) {
		log_err("store: %.100s: %d parameters expected, %zu given", sqlite3_sql(stmt),
		        sqlite3_bind_parameter_count(stmt), n_params);
		return -1;
	}
	for (i = 0; i < n_params; i++) {
		const struct store_value *p = &params[i];
		int idx = (int)i + 1;

		switch (p->sv_type) {
		case STORE_INT:
			rc = sqlite3_bind_int64(stmt, idx, p->sv_int);
			break;
		case STORE_TEXT:
			if (p->sv_text == NULL) {
				rc = sqlite3_bind_null(stmt, idx);
			} else {
				rc = sqlite3_bind_text64(stmt, idx, p->sv_text,
				                         p->sv_len > 0 ? p->sv_len
				                                       : strlen(p->sv_text),
				                         SQLITE_STATIC, SQLITE_UTF8);
			}
			break;
		case STORE_BLOB:
			/* A NULL pointer would bind SQL NULL; an empty blob stays a blob. */
			if (p->sv_text == NULL || p->sv_len == 0) {
				rc = sqlite3_bind_zeroblob(stmt, idx, 0);
			} else {
				rc = sqlite3_bind_blob64(stmt, idx, p->sv_text, p->sv_len,
				                         SQLITE_STATIC);
			}
			break;
		default:
			rc = sqlite3_bind_null(stmt, idx);
			break;
		}
		if (rc != SQLITE_OK) {
			store_log_rc(db, rc, sqlite3_sql(stmt));
			return -1;
		}
	}
	return 0;
}

/* Runs sql on tx's connection, calling fn for each row (fn may take the
 * row's contents and leave it empty) until fn returns 1 or -1. Statements
 * that write are always stepped to the end. Returns 1 when fn stopped, 0 at
 * the end of the rows, -1 on error (logged). */
static int store_run(struct store_tx *tx, const char *sql, const struct store_value *params,
                     size_t n_params, int (*fn)(void *arg, struct store_row *row), void *arg,
                     int64_t *ret_changes)
{
	sqlite3 *db = tx->tx_conn->cn_db;
	struct store_stmt *entry;
	struct store_row row;
	sqlite3_stmt *stmt;
	int64_t before;
	int stopped = 0;
	int rc;
	int r;

	stmt = store_stmt_get(tx->tx_conn, sql, &entry);
	if (stmt == NULL) {
		return -1;
	}
	if (store_bind(db, stmt, params, n_params) < 0) {
		goto fail;
	}
	before = sqlite3_total_changes(db);
	for (;;) {
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_DONE) {
			break;
		}
		if (rc != SQLITE_ROW) {
			store_log_rc(db, rc, sql);
			goto fail;
		}
		if (stopped || fn == NULL) {
			continue;
		}
		if (store_row_fill(stmt, &row) < 0) {
			goto fail;
		}
		r = fn(arg, &row);
		store_row_finish(&row);
		if (r < 0) {
			goto fail;
		}
		if (r > 0) {
			stopped = 1;
			if (sqlite3_stmt_readonly(stmt)) {
				break;
			}
		}
	}
	if (ret_changes != NULL) {
		*ret_changes = sqlite3_total_changes(db) != before ? sqlite3_changes(db) : 0;
	}
	store_stmt_put(entry, stmt);
	return stopped;
fail:
	store_stmt_put(entry, stmt);
	return -1;
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

int64_t store_tx_now(const struct store_tx *tx)
{
	return tx->tx_now;
}

static int store_conn_exec(struct store_conn *cn, const char *sql)
{
	struct store_tx tx = {.tx_conn = cn};

	return store_exec(&tx, sql, NULL, 0, NULL);
}

/* ---- opening and migrations ---- */

int store_schema_version(void)
{
	if (migrations_count == 0) {
		return 0;
	}
	return migrations[migrations_count - 1].mg_version;
}

static int store_user_version(struct store_conn *cn, int *ret)
{
	struct store_tx tx = {.tx_conn = cn};
	struct store_row row;
	int r;

	r = store_query(&tx, "PRAGMA user_version", NULL, 0, &row);
	if (r < 0) {
		return -1;
	}
	*ret = r > 0 ? (int)store_row_int(&row, 0) : 0;
	if (r > 0) {
		store_row_finish(&row);
	}
	return 0;
}

static int store_mkdir_parent(const char *path)
{
	char quoted[256];
	char *dir;
	char *p;

	dir = strdup(path);
	if (dir == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	p = strrchr(dir, '/');
	if (p == NULL || p == dir) {
		free(dir);
		return 0;
	}
	*p = '\0';
	for (p = dir + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0') {
			continue;
		}
		*p = '\0';
		if (mkdir(dir, STORE_DIR_MODE) == 0) {
			/* Exactly 0700, whatever the umask. */
			if (chmod(dir, STORE_DIR_MODE) < 0) {
				log_err("store: cannot chmod directory \"%s\": %s",
				        log_quote(quoted, sizeof(quoted), dir), strerror(errno));
				goto fail;
			}
		} else if (errno != EEXIST) {
			log_err("store: cannot create directory \"%s\": %s",
			        log_quote(quoted, sizeof(quoted), dir), strerror(errno));
			goto fail;
		}
		*p = c;
		if (c == '\0') {
			break;
		}
	}
	free(dir);
	return 0;
fail:
	free(dir);
	return -1;
}

static int store_migrate_conn(struct store_conn *cn)
{
	sqlite3 *db = cn->cn_db;
	char sql[64];
	char *err = NULL;
	size_t i;
	int version;
	int rc;

	for (i = 0; i < migrations_count; i++) {
		const struct migration *mg = &migrations[i];
		int applied = 0;

		if (store_conn_exec(cn, "BEGIN IMMEDIATE") < 0) {
			return -1;
		}
		/* Read again under the write lock: another process may have migrated. */
		if (store_user_version(cn, &version) < 0) {
			goto fail;
		}
		if (version < mg->mg_version) {
			rc = sqlite3_exec(db, mg->mg_sql, NULL, NULL, &err);
			if (rc != SQLITE_OK) {
				log_err("store: migration %s failed: %s", mg->mg_name,
				        err != NULL ? err : sqlite3_errstr(rc));
				goto fail;
			}
			snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", mg->mg_version);
			rc = sqlite3_exec(db, sql, NULL, NULL, &err);
			if (rc != SQLITE_OK) {
				log_err("store: migration %s: %s", mg->mg_name,
				        err != NULL ? err : sqlite3_errstr(rc));
				goto fail;
			}
			applied = 1;
		}
		if (store_conn_exec(cn, "COMMIT") < 0) {
			goto fail;
		}
		if (applied) {
			log_info("store: applied migration %s", mg->mg_name);
		}
	}
	return 0;
fail:
	sqlite3_free(err);
	if (!sqlite3_get_autocommit(db)) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	}
	return -1;
}

static const char *store_sync_pragma(enum store_sync sync)
{
	switch (sync) {
	case STORE_SYNC_NORMAL:
		return "PRAGMA synchronous = NORMAL";
	case STORE_SYNC_OFF:
		return "PRAGMA synchronous = OFF";
	default:
		return "PRAGMA synchronous = FULL";
	}
}

/* Refuses a schema newer than this binary, and an older one unless it is
 * about to be migrated. */
static int store_version_check(int version, int may_migrate)
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

/* Creates the database file empty with mode 0600 when it does not exist
 * yet: SQLite would create it 0644 less the umask, and gives the -wal and
 * -shm files the database's mode. An existing file keeps its mode. Returns
 * 0 or -1 (logged). */
static int store_create_private(const char *path)
{
	char quoted[256];
	int fd;

	if (path[0] == '\0' || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
		return 0;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, STORE_FILE_MODE);
	if (fd < 0 && errno == EEXIST) {
		return 0;
	}
	if (fd < 0 || fchmod(fd, STORE_FILE_MODE) < 0) {
		log_err("store: cannot create \"%s\" with mode 0600: %s",
		        log_quote(quoted, sizeof(quoted), path), strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	close(fd);
	return 0;
}

/* Opens the write connection: refuses a newer schema before changing
 * anything, then WAL, synchronous, foreign keys and (unless no_migrate)
 * pending migrations. */
static struct store_conn *store_open_writer(const char *path, enum store_sync sync,
                                            unsigned busy_timeout_ms, int no_migrate, int *ret_from,
                                            int *ret_to)
{
	struct store_tx tx = {0};
	struct store_row row;
	struct store_conn *cn;
	int newest = store_schema_version();
	int version;
	int wal;
	int r;

	if (store_mkdir_parent(path) < 0 || (!no_migrate && store_create_private(path) < 0)) {
		return NULL;
	}
	/* A store that may not migrate has no use for a new, empty file. */
	cn = store_conn_open(path, SQLITE_OPEN_READWRITE | (no_migrate ? 0 : SQLITE_OPEN_CREATE),
	                     busy_timeout_ms);
	if (cn == NULL) {
		return NULL;
	}
	tx.tx_conn = cn;
	if (store_user_version(cn, &version) < 0) {
		goto fail;
	}
	if (store_version_check(version, !no_migrate) < 0) {
		goto fail;
	}
	/* Only a file without tables takes this (a no-op otherwise): gc can
	 * then give freed pages back while serving (store_reclaim). */
	if (version == 0 && store_conn_exec(cn, "PRAGMA auto_vacuum = INCREMENTAL") < 0) {
		goto fail;
	}
	r = store_query(&tx, "PRAGMA journal_mode = WAL", NULL, 0, &row);
	if (r < 0) {
		goto fail;
	}
	wal = r > 0 && store_row_text(&row, 0) != NULL &&
	      strcasecmp(store_row_text(&row, 0), "wal") == 0;
	if (r > 0) {
		store_row_finish(&row);
	}
	if (!wal) {
		log_err("store: the database cannot switch to WAL mode");
		goto fail;
	}
	if (store_conn_exec(cn, store_sync_pragma(sync)) < 0 ||
	    store_conn_exec(cn, "PRAGMA foreign_keys = ON") < 0) {
		goto fail;
	}
	if (ret_from != NULL) {
		*ret_from = version;
	}
	if (!no_migrate && version < newest && store_migrate_conn(cn) < 0) {
		goto fail;
	}
	if (store_user_version(cn, &version) < 0) {
		goto fail;
	}
	if (ret_to != NULL) {
		*ret_to = version;
	}
	return cn;
fail:
	store_conn_close(cn);
	return NULL;
}

int store_migrate(const char *path, int *ret_from, int *ret_to)
{
	struct store_conn *cn;
	int from = 0;
	int to = 0;

	cn = store_open_writer(path, STORE_SYNC_FULL, STORE_BUSY_TIMEOUT_MS_DEFAULT, 0, &from, &to);
	if (cn == NULL) {
		return -1;
	}
	store_conn_close(cn);
	if (ret_from != NULL) {
		*ret_from = from;
	}
	if (ret_to != NULL) {
		*ret_to = to;
	}
	return 0;
}

static int store_check_read_only(const struct store *st)
{
	struct store_conn *cn;
	int version;

	cn = store_conn_open(st->st_path, SQLITE_OPEN_READONLY, st->st_busy_timeout_ms);
	if (cn == NULL) {
		return -1;
	}
	if (store_user_version(cn, &version) < 0) {
		goto fail;
	}
	if (store_version_check(version, 0) < 0) {
		goto fail;
	}
	store_conn_close(cn);
	return 0;
fail:
	store_conn_close(cn);
	return -1;
}

/* This thread's read connection, opened on first use. Read connections live
 * until store_destroy. */
static struct store_conn *store_reader(struct store *st)
{
	struct store_conn *cn = pthread_getspecific(st->st_key);

	if (cn != NULL) {
		return cn;
	}
	cn = store_conn_open(st->st_path, SQLITE_OPEN_READONLY, st->st_busy_timeout_ms);
	if (cn == NULL) {
		return NULL;
	}
	pthread_mutex_lock(&st->st_mutex);
	cn->cn_next = st->st_readers;
	st->st_readers = cn;
	pthread_mutex_unlock(&st->st_mutex);
	if (pthread_setspecific(st->st_key, cn) != 0) {
		log_warn("store: cannot remember this thread's read connection");
	}
	return cn;
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
static int store_claim_answer(struct store_claim *c, const struct store_row *rec,
                              enum store_status status)
{
	struct reply r;
	const char *headers = store_row_text(rec, STORE_REC_HEADERS);
	const char *body = store_row_text(rec, STORE_REC_BODY);

	reply_init(&r);
	if (reply_set(&r, (int)store_row_int(rec, STORE_REC_REPLY_STATUS),
	              store_row_text(rec, STORE_REC_CONTENT_TYPE), body,
	              store_row_len(rec, STORE_REC_BODY)) < 0) {
		goto fail;
	}
	if (headers != NULL) {
		r.reply_headers = strdup(headers);
		if (r.reply_headers == NULL) {
			goto fail;
		}
	}
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

/* Runs sc_apply. Returns 0 with the status the record takes, or -1 (outcome
 * TRANSIENT; a reply the handler set for its transient failure is kept). */
static int store_claim_run_apply(struct store_tx *tx, struct store_claim *c,
                                 enum store_status *ret_status)
{
	int r;

	reply_finish(&c->sc_reply);
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
 * Returns 0 (outcome NEW), or -1 to roll the unit back (outcome TRANSIENT;
 * a reply the handler set for its transient failure is kept). */
static int store_claim_apply(struct store_tx *tx, struct store_claim *c)
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
		        store_text(c->sc_scope),
		        store_text(c->sc_key),
		        store_int(c->sc_token),
		};

		if (store_exec(
		            tx,
		            "UPDATE idempotency_records SET status = ?, reply_status = ?, "
		            "reply_content_type = ?, "
		            "reply_headers = ?, reply_body = ?, lease_until = NULL, updated_at = ? "
		            "WHERE scope = ? AND idem_key = ? AND fence_token = ? AND status = "
		            "'processing'",
		            p, sizeof(p) / sizeof(p[0]), &changes) < 0) {
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

		if (store_exec(tx,
		               "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
		               "reply_status, reply_content_type, reply_headers, reply_body, "
		               "fence_token, created_at, updated_at) "
		               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		               p, sizeof(p) / sizeof(p[0]), NULL) < 0) {
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
	found = store_query(tx, STORE_SQL_RECORD, key, 2, &rec);
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

			if (store_exec(tx,
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

			if (store_exec(tx,
			               "UPDATE idempotency_records SET fingerprint = ?, "
			               "lease_until = ?, "
			               "fence_token = fence_token + 1, updated_at = ? "
			               "WHERE id = ? AND fence_token = ? AND status = 'processing'",
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
			return store_claim_apply(tx, c);
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

/* Undoes the unit's savepoint, unless SQLite already ended the transaction. */
static void store_savepoint_rollback(struct store_conn *cn)
{
	if (sqlite3_get_autocommit(cn->cn_db)) {
		return;
	}
	if (store_conn_exec(cn, "ROLLBACK TO unit") == 0) {
		store_conn_exec(cn, "RELEASE unit");
	}
}

/* Runs one unit inside its savepoint. step returns 0 to keep, -1 to roll
 * back. Returns step's value, or -1. */
static int store_savepoint_run(struct store_tx *tx, int (*step)(struct store_tx *tx, void *arg),
                               void *arg)
{
	int r;

	if (store_conn_exec(tx->tx_conn, "SAVEPOINT unit") < 0) {
		return -1;
	}
	r = step(tx, arg);
	if (r < 0) {
		store_savepoint_rollback(tx->tx_conn);
		return -1;
	}
	if (store_conn_exec(tx->tx_conn, "RELEASE unit") < 0) {
		store_savepoint_rollback(tx->tx_conn);
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
	return store_claim_apply(tx, c);
}

/* Runs the unit's claims that are not settled yet, each in its savepoint.
 * Returns 1 when SQLite ended the transaction (the claim that failed is then
 * settled as transient), 0 otherwise. */
static int store_unit_run_claims(struct store *st, struct store_tx *tx, struct store_unit *u)
{
	struct store_claim_step cs;
	size_t i;
	size_t left = 0;
	int r = 0;

	for (i = 0; i < u->su_n; i++) {
		struct store_claim *c = &u->su_claims[i];

		if (u->su_skip[i]) {
			continue;
		}
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
		if (sqlite3_get_autocommit(st->st_writer->cn_db)) {
			store_claim_transient(c, 0);
			u->su_skip[i] = 1;
			break;
		}
	}
	if (i == u->su_n) {
		return 0;
	}
	for (i = 0; i < u->su_n; i++) {
		left += !u->su_skip[i];
	}
	if (left == 0) {
		u->su_result = -1;
		u->su_settled = 1;
	}
	return 1;
}

/* Runs one unit. Returns 1 when SQLite ended the transaction during it. */
static int store_unit_run(struct store *st, struct store_unit *u)
{
	struct store_tx tx = {.tx_store = st, .tx_conn = st->st_writer, .tx_now = u->su_now};

	if (u->su_kind != STORE_UNIT_WRITE) {
		return store_unit_run_claims(st, &tx, u);
	}
	u->su_result = store_savepoint_run(&tx, u->su_fn, u->su_arg);
	if (sqlite3_get_autocommit(st->st_writer->cn_db)) {
		u->su_result = -1;
		u->su_settled = 1;
		return 1;
	}
	return 0;
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

/* Runs a batch in one transaction. SQLite may end the transaction by itself
 * when a statement fails with FULL, IOERR or NOMEM and has no statement
 * journal to undo just itself; then the unit that failed is transient, the
 * claims before it run again in a new transaction (a claim is re-runnable by
 * contract), and plain writes before it are reported failed (their functions
 * may have acted on their arguments). */
static void store_batch_run(struct store *st, struct store_unit *batch, uint64_t *ret_commits,
                            double *ret_commit_s)
{
	sqlite3 *db = st->st_writer->cn_db;
	struct store_unit *lost;
	struct store_unit *u;
	double t0;

	*ret_commits = 0;
	*ret_commit_s = 0;
	while (store_batch_pending(batch)) {
		if (store_conn_exec(st->st_writer, "BEGIN IMMEDIATE") < 0) {
			store_units_fail_unsettled(batch);
			break;
		}
		lost = NULL;
		for (u = batch; u != NULL && lost == NULL; u = u->su_next) {
			if (!u->su_settled && store_unit_run(st, u) == 1) {
				lost = u;
			}
		}
		if (lost != NULL) {
			log_warn("store: SQLite rolled the transaction back; the failed unit is "
			         "transient, the others run again");
			for (u = batch; u != lost; u = u->su_next) {
				if (!u->su_settled && u->su_kind == STORE_UNIT_WRITE) {
					store_unit_fail(u);
				}
			}
			continue;
		}
		t0 = store_mono_s();
		if (store_conn_exec(st->st_writer, "COMMIT") < 0) {
			if (!sqlite3_get_autocommit(db)) {
				store_conn_exec(st->st_writer, "ROLLBACK");
			}
			store_units_fail_unsettled(batch);
		} else {
			(*ret_commits)++;
			*ret_commit_s = store_mono_s() - t0;
		}
		break;
	}
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

/* Takes whole units from the queue, up to st_batch_max claims and writes
 * (a group of claims is never split; the first is taken whatever its size). */
static struct store_unit *store_queue_take(struct store *st, uint64_t *ret_weight)
{
	struct store_unit *batch = NULL;
	struct store_unit *tail = NULL;
	uint64_t weight = 0;

	while (st->st_head != NULL) {
		struct store_unit *u = st->st_head;
		uint64_t w = store_unit_weight(u);

		if (weight > 0 && weight + w > st->st_batch_max) {
			break;
		}
		st->st_head = u->su_next;
		if (st->st_head == NULL) {
			st->st_tail = NULL;
		}
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
static void store_count_batch(struct store *st, const struct store_unit *batch, uint64_t weight,
                              uint64_t commits, double commit_s)
{
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
	st->st_stats.ss_wal_frames = st->st_wal_written;
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

/* ---- the checkpointer ---- */

/* After each commit: SQLite reports the frames now in the WAL. The writer
 * connection runs no checkpoint of its own (this hook replaces the
 * auto-checkpoint); past STORE_CKPT_FRAMES the checkpointer is woken. */
static int store_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct store *st = arg;

	(void)db;
	(void)name;
	if (frames < st->st_wal_frames) {
		st->st_ckpt_asked = 0; /* the WAL started over */
		st->st_wal_written += frames;
	} else {
		st->st_wal_written += frames - st->st_wal_frames;
	}
	st->st_wal_frames = frames;
	/* Once per STORE_CKPT_FRAMES new frames, not after every commit: a
	 * checkpoint costs two fsyncs, and the WAL keeps its length until the
	 * writer rewinds it. */
	if (frames - st->st_ckpt_asked >= STORE_CKPT_FRAMES && st->st_ckpt.ck_running) {
		st->st_ckpt_asked = frames;
		pthread_mutex_lock(&st->st_ckpt.ck_mutex);
		if (!st->st_ckpt.ck_wanted) {
			st->st_ckpt.ck_wanted = 1;
			pthread_cond_signal(&st->st_ckpt.ck_cond);
		}
		pthread_mutex_unlock(&st->st_ckpt.ck_mutex);
	}
	return SQLITE_OK;
}

static void *store_ckpt_main(void *arg)
{
	struct store *st = arg;
	struct store_ckpt *ck = &st->st_ckpt;
	int log_frames;
	int done_frames;
	int rc;

	pthread_setname_np(pthread_self(), "store-ckpt");
	pthread_mutex_lock(&ck->ck_mutex);
	for (;;) {
		while (!ck->ck_wanted && !ck->ck_stopping) {
			pthread_cond_wait(&ck->ck_cond, &ck->ck_mutex);
		}
		if (ck->ck_stopping) {
			break;
		}
		ck->ck_wanted = 0;
		pthread_mutex_unlock(&ck->ck_mutex);
		/* PASSIVE: copies what no reader still needs and never blocks the
		 * writer, which goes on appending meanwhile. */
		rc = sqlite3_wal_checkpoint_v2(ck->ck_conn->cn_db, NULL, SQLITE_CHECKPOINT_PASSIVE,
		                               &log_frames, &done_frames);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
			store_log_rc(ck->ck_conn->cn_db, rc, "checkpoint");
		}
		pthread_mutex_lock(&ck->ck_mutex);
	}
	pthread_mutex_unlock(&ck->ck_mutex);
	return NULL;
}

/* A PASSIVE checkpoint that runs while commits keep appending never catches
 * up with the end of the WAL, and SQLite restarts the WAL from its start only
 * once every frame is in the database. So past STORE_CKPT_FRAMES_MAX the
 * writer finishes the job between two batches: the checkpointer has already
 * copied most frames, this copies the rest, and the next transaction
 * rewinds the WAL. This bounds the WAL file. */
static void store_ckpt_catch_up(struct store *st)
{
	int log_frames = 0;
	int done_frames = 0;
	int rc;

	if (st->st_wal_frames < STORE_CKPT_FRAMES_MAX) {
		return;
	}
	rc = sqlite3_wal_checkpoint_v2(st->st_writer->cn_db, NULL, SQLITE_CHECKPOINT_PASSIVE,
	                               &log_frames, &done_frames);
	if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
		store_log_rc(st->st_writer->cn_db, rc, "checkpoint");
	}
	pthread_mutex_lock(&st->st_stats_mutex);
	st->st_stats.ss_catch_ups++;
	pthread_mutex_unlock(&st->st_stats_mutex);
}

static int store_ckpt_start(struct store *st, enum store_sync sync)
{
	struct store_ckpt *ck = &st->st_ckpt;

	ck->ck_conn = store_conn_open(st->st_path, SQLITE_OPEN_READWRITE, st->st_busy_timeout_ms);
	if (ck->ck_conn == NULL) {
		return -1;
	}
	/* The checkpoint's fsyncs follow the store's durability setting. */
	if (store_conn_exec(ck->ck_conn, store_sync_pragma(sync)) < 0) {
		return -1;
	}
	if (pthread_create(&ck->ck_thread, NULL, store_ckpt_main, st) != 0) {
		log_err("store: cannot start the checkpoint thread");
		return -1;
	}
	ck->ck_running = 1;
	return 0;
}

static void store_ckpt_stop(struct store *st)
{
	struct store_ckpt *ck = &st->st_ckpt;

	if (ck->ck_running) {
		pthread_mutex_lock(&ck->ck_mutex);
		ck->ck_stopping = 1;
		pthread_cond_signal(&ck->ck_cond);
		pthread_mutex_unlock(&ck->ck_mutex);
		pthread_join(ck->ck_thread, NULL);
		ck->ck_running = 0;
	}
	store_conn_close(ck->ck_conn);
	ck->ck_conn = NULL;
}

/* ---- the writer's loop ---- */

static void *store_writer_main(void *arg)
{
	struct store *st = arg;
	struct store_unit *batch;
	struct store_unit *u;
	struct store_unit *next;
	uint64_t weight;
	uint64_t commits;
	double commit_s;

	/* Named, so that top -H and perf tell the writer apart. */
	pthread_setname_np(pthread_self(), "store-writer");
	for (;;) {
		pthread_mutex_lock(&st->st_mutex);
		while (st->st_head == NULL && !st->st_stopping) {
			pthread_cond_wait(&st->st_work, &st->st_mutex);
		}
		if (st->st_head == NULL) {
			pthread_mutex_unlock(&st->st_mutex);
			break;
		}
		/* Whatever queued up while the last batch ran goes in this one;
		 * a lone unit goes at once. */
		batch = store_queue_take(st, &weight);
		pthread_mutex_unlock(&st->st_mutex);

		store_heartbeat_begin(st);
		store_batch_run(st, batch, &commits, &commit_s);
		store_heartbeat_end(st, commits);
		/* Counted before anyone hears back, so a reader of the metrics
		 * who has every answer also sees every batch. */
		store_count_batch(st, batch, weight, commits, commit_s);
		/* No lock is held here: a completion may take locks of its own
		 * (resuming a connection) or queue more work. */
		for (u = batch; u != NULL; u = next) {
			next = u->su_next;
			u->su_done(u->su_done_arg, store_unit_result(u));
			free(u);
		}
		store_ckpt_catch_up(st);
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
	pthread_cond_signal(&st->st_work);
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
	if (st->st_thread_running && pthread_equal(pthread_self(), st->st_thread)) {
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

static pthread_once_t store_config_once = PTHREAD_ONCE_INIT;

/* Process-wide SQLite settings, before SQLite is first used. Memory
 * statistics take a global mutex around every allocation SQLite makes;
 * nothing here reads them. */
static void store_config(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

struct store *store_create(const struct store_options *opt)
{
	struct store *st;

	if (opt->so_backend != STORE_BACKEND_SQLITE) {
		log_err("store: backend = postgresql is not available in this build yet");
		return NULL;
	}
	if (sqlite3_threadsafe() == 0) {
		log_err("store: this SQLite library is built without thread support");
		return NULL;
	}
	pthread_once(&store_config_once, store_config);
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
	if (pthread_cond_init(&st->st_work, NULL) != 0) {
		log_err("store: cannot create a condition variable");
		pthread_mutex_destroy(&st->st_mutex);
		free(st);
		return NULL;
	}
	/* Static initializers: these never fail and need no destroy. */
	st->st_stats_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	st->st_ckpt.ck_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	st->st_ckpt.ck_cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	st->st_sync_made = 1;
	if (pthread_mutex_init(&st->st_probe_lock, NULL) != 0) {
		log_err("store: cannot create a mutex");
		goto fail;
	}
	st->st_probe_lock_made = 1;
	st->st_read_only = opt->so_read_only;
	st->st_batch_max = opt->so_batch_max > 0 ? opt->so_batch_max : STORE_BATCH_MAX_DEFAULT;
	st->st_busy_timeout_ms = opt->so_busy_timeout_ms > 0 ? opt->so_busy_timeout_ms
	                                                     : STORE_BUSY_TIMEOUT_MS_DEFAULT;
	st->st_path = strdup(opt->so_path != NULL ? opt->so_path : "");
	if (st->st_path == NULL) {
		log_err("store: out of memory");
		goto fail;
	}
	if (st->st_path[0] == '\0') {
		log_err("store: no database path");
		goto fail;
	}
	if (pthread_key_create(&st->st_key, NULL) != 0) {
		log_err("store: cannot create a thread key");
		goto fail;
	}
	st->st_key_made = 1;
	if (st->st_read_only) {
		if (store_check_read_only(st) < 0) {
			goto fail;
		}
		return st;
	}
	st->st_writer = store_open_writer(st->st_path, opt->so_sync, st->st_busy_timeout_ms,
	                                  opt->so_no_migrate, NULL, NULL);
	if (st->st_writer == NULL) {
		goto fail;
	}
	if (store_ckpt_start(st, opt->so_sync) < 0) {
		goto fail;
	}
	sqlite3_wal_hook(st->st_writer->cn_db, store_wal_hook, st);
	if (pthread_create(&st->st_thread, NULL, store_writer_main, st) != 0) {
		log_err("store: cannot start the writer thread");
		goto fail;
	}
	st->st_thread_running = 1;
	return st;
fail:
	store_destroy(st);
	return NULL;
}

void store_destroy(struct store *st)
{
	struct store_conn *cn;

	if (st == NULL) {
		return;
	}
	if (st->st_thread_running) {
		/* The writer finishes what is queued (each completion called)
		 * and stops; later submissions are refused. */
		pthread_mutex_lock(&st->st_mutex);
		st->st_stopping = 1;
		pthread_cond_signal(&st->st_work);
		pthread_mutex_unlock(&st->st_mutex);
		pthread_join(st->st_thread, NULL);
		st->st_thread_running = 0;
	}
	store_ckpt_stop(st);
	while (st->st_readers != NULL) {
		cn = st->st_readers;
		st->st_readers = cn->cn_next;
		store_conn_close(cn);
	}
	/* The last connection to close checkpoints the WAL into the file. */
	store_conn_close(st->st_writer);
	store_conn_close(st->st_probe);
	if (st->st_probe_lock_made) {
		pthread_mutex_destroy(&st->st_probe_lock);
	}
	if (st->st_key_made) {
		pthread_key_delete(st->st_key);
	}
	if (st->st_sync_made) {
		pthread_cond_destroy(&st->st_work);
		pthread_mutex_destroy(&st->st_mutex);
	}
	free(st->st_path);
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
 * thread's read connection. Returns 1 when answered, 0 otherwise. */
static int store_claim_fast(struct store *st, struct store_claim *c)
{
	struct store_value key[] = {store_text(c->sc_scope), store_text(c->sc_key)};
	struct store_tx tx = {.tx_store = st, .tx_now = c->sc_now_ms};
	enum store_status status;
	struct store_row rec;
	int answered = 0;

	tx.tx_conn = store_reader(st);
	if (tx.tx_conn == NULL) {
		return 0;
	}
	if (store_query(&tx, STORE_SQL_RECORD, key, 2, &rec) <= 0) {
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
	if (!st->st_read_only && n == 1 && store_claim_fast(st, &claims[0])) {
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
	struct store_tx tx = {.tx_store = st, .tx_now = now_ms};
	enum store_status status;
	struct store_row rec;
	int64_t cutoff = now_ms - (retention_ms > 0 ? retention_ms : STORE_RETENTION_MS_DEFAULT);
	int found;

	tx.tx_conn = store_reader(st);
	if (tx.tx_conn == NULL) {
		return -1;
	}
	found = store_query(&tx, STORE_SQL_RECORD, p, 2, &rec);
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
	struct store_tx tx = {.tx_store = st, .tx_now = now_ms};
	int nested;
	int r;

	tx.tx_conn = store_reader(st);
	if (tx.tx_conn == NULL) {
		return -1;
	}
	/* A read nested in another read shares its snapshot. */
	nested = !sqlite3_get_autocommit(tx.tx_conn->cn_db);
	if (!nested && store_conn_exec(tx.tx_conn, "BEGIN") < 0) {
		return -1;
	}
	r = fn(&tx, arg);
	if (nested) {
		return r;
	}
	if (r >= 0 && store_conn_exec(tx.tx_conn, "COMMIT") == 0) {
		return r;
	}
	if (!sqlite3_get_autocommit(tx.tx_conn->cn_db)) {
		store_conn_exec(tx.tx_conn, "ROLLBACK");
	}
	return -1;
}

void store_get_stats(struct store *st, struct store_stats *ret)
{
	pthread_mutex_lock(&st->st_stats_mutex);
	*ret = st->st_stats;
	pthread_mutex_unlock(&st->st_stats_mutex);
}

/* ---- operations: health, file sizes, space, snapshots ----
 * Everything here works beside the writer, on connections of its own with a
 * short busy timeout, and reports rather than logs what it meets on the way
 * (a probe that fails every 250 ms would flood the journal). */

#define STORE_PROBE_BUSY_MS 100       /* the probe's wait for the write lock */
#define STORE_STALL_MS 1000           /* a batch older than this means no commit now */
#define STORE_FAIL_HOLD_MS 5000       /* a failed commit keeps readiness off this long */
#define STORE_WRITER_HANG_MS 30000    /* past the busy timeout: the writer is stuck */
#define STORE_CHECKPOINT_BUSY_MS 200  /* a TRUNCATE checkpoint briefly holds writers back */

const char *store_library_version(void)
{
	return sqlite3_libversion();
}

static int64_t store_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The writer's heartbeat: the writer thread calls begin before a batch and
 * end after it, nothing more; store_probe reads it. */
static void store_heartbeat_begin(struct store *st)
{
	__atomic_store_n(&st->st_hb_busy_since, store_mono_ms(), __ATOMIC_RELEASE);
}

static void store_heartbeat_end(struct store *st, uint64_t commits)
{
	int64_t now = store_mono_ms();

	if (commits > 0) {
		__atomic_store_n(&st->st_hb_ok, now, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&st->st_hb_fail_rc, sqlite3_extended_errcode(st->st_writer->cn_db),
		                 __ATOMIC_RELEASE);
		__atomic_store_n(&st->st_hb_fail, now, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&st->st_hb_busy_since, 0, __ATOMIC_RELEASE);
}

/* One integer from a PRAGMA on cn, without logging. Returns 0 or an SQLite
 * error code. */
static int store_pragma_int(struct store_conn *cn, const char *sql, int64_t *ret)
{
	sqlite3_stmt *stmt = NULL;
	int rc;

	rc = sqlite3_prepare_v2(cn->cn_db, sql, -1, &stmt, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_ROW) {
			*ret = sqlite3_column_int64(stmt, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(stmt);
	return rc;
}

static void store_health_fail(struct store_health *h, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void store_health_fail(struct store_health *h, const char *fmt, ...)
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

/* Tries the write lock on the probe connection and lets go at once.
 * Returns SQLITE_OK, or the error code (SQLITE_BUSY when held elsewhere). */
static int store_probe_lock(struct store_conn *cn)
{
	int rc;

	rc = sqlite3_exec(cn->cn_db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_exec(cn->cn_db, "ROLLBACK", NULL, NULL, NULL);
	}
	if (!sqlite3_get_autocommit(cn->cn_db)) {
		sqlite3_exec(cn->cn_db, "ROLLBACK", NULL, NULL, NULL);
	}
	return rc;
}

int store_probe(struct store *st, struct store_health *ret)
{
	struct store_health h = {.sh_ok = 1, .sh_writer_alive = 1};
	int64_t now = store_mono_ms();
	int64_t busy;
	int64_t ok_at;
	int64_t fail_at;
	int64_t version = 0;
	int newest = store_schema_version();
	int fail_rc;
	int rc;

	if (st->st_read_only || !st->st_thread_running) {
		h.sh_writer_alive = 0;
		store_health_fail(&h, "the store has no writer");
		goto out;
	}
	busy = __atomic_load_n(&st->st_hb_busy_since, __ATOMIC_ACQUIRE);
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
	    (fail_rc & 0xff) != SQLITE_BUSY && (fail_rc & 0xff) != SQLITE_LOCKED) {
		store_health_fail(&h, "the last commit failed: %s", sqlite3_errstr(fail_rc));
	}
	pthread_mutex_lock(&st->st_probe_lock);
	if (st->st_probe == NULL) {
		st->st_probe = store_conn_open(st->st_path, SQLITE_OPEN_READWRITE, STORE_PROBE_BUSY_MS);
	}
	if (st->st_probe == NULL) {
		store_health_fail(&h, "the database cannot be opened");
		goto unlock;
	}
	rc = store_pragma_int(st->st_probe, "PRAGMA user_version", &version);
	if (rc != SQLITE_OK) {
		store_health_fail(&h, "the schema version cannot be read: %s", sqlite3_errstr(rc));
	} else if (version < newest) {
		store_health_fail(&h, "migrations pending: database schema %" PRId64 ", this idemhook needs %d",
		                  version, newest);
	} else if (version > newest) {
		store_health_fail(&h, "database schema %" PRId64 " is newer than this idemhook (%d)", version,
		                  newest);
	}
	/* While our own writer is inside a young batch it holds the lock (or
	 * waits for it): a probe would only compete with it. The last probe's
	 * verdict stands until the writer commits after it. */
	if (busy == 0) {
		rc = store_probe_lock(st->st_probe);
		if (rc == SQLITE_OK) {
			st->st_probe_locked_at = 0;
		} else if (__atomic_load_n(&st->st_hb_busy_since, __ATOMIC_ACQUIRE) == 0) {
			st->st_probe_locked_at = store_mono_ms();
			st->st_probe_locked_rc = rc;
		}
	}
	if (st->st_probe_locked_at != 0 && st->st_probe_locked_at > ok_at) {
		store_health_fail(&h, "the database is write-locked by another connection (%s)",
		                  sqlite3_errstr(st->st_probe_locked_rc));
	}
unlock:
	pthread_mutex_unlock(&st->st_probe_lock);
out:
	*ret = h;
	return 0;
}

struct store_file_query {
	int64_t fq_free_pages;
	int64_t fq_page_size;
	int64_t fq_auto_vacuum;
};

static int store_file_query_tx(struct store_tx *tx, void *arg)
{
	struct store_file_query *q = arg;

	if (store_pragma_int(tx->tx_conn, "PRAGMA freelist_count", &q->fq_free_pages) != SQLITE_OK ||
	    store_pragma_int(tx->tx_conn, "PRAGMA page_size", &q->fq_page_size) != SQLITE_OK ||
	    store_pragma_int(tx->tx_conn, "PRAGMA auto_vacuum", &q->fq_auto_vacuum) != SQLITE_OK) {
		return -1;
	}
	return 0;
}

static int64_t store_file_size(const char *path, const char *suffix)
{
	char name[4096];
	struct stat sb;

	if (snprintf(name, sizeof(name), "%s%s", path, suffix) >= (int)sizeof(name) ||
	    stat(name, &sb) < 0) {
		return 0;
	}
	return (int64_t)sb.st_size;
}

int store_file_stats(struct store *st, struct store_file_stats *ret)
{
	struct store_file_query q = {0};
	struct store_file_stats fs;

	memset(&fs, 0, sizeof(fs));
	fs.sf_db_bytes = store_file_size(st->st_path, "");
	fs.sf_wal_bytes = store_file_size(st->st_path, "-wal");
	if (store_read(st, 0, store_file_query_tx, &q) < 0) {
		return -1;
	}
	fs.sf_free_bytes = q.fq_free_pages * q.fq_page_size;
	fs.sf_incremental = q.fq_auto_vacuum == 2;
	*ret = fs;
	return 0;
}

struct store_reclaim_job {
	char rj_sql[64];
	int64_t rj_freed;
};

static int store_reclaim_tx(struct store_tx *tx, void *arg)
{
	struct store_reclaim_job *j = arg;
	int64_t before = 0;
	int64_t after = 0;

	if (store_pragma_int(tx->tx_conn, "PRAGMA freelist_count", &before) != SQLITE_OK ||
	    store_exec(tx, j->rj_sql, NULL, 0, NULL) < 0 ||
	    store_pragma_int(tx->tx_conn, "PRAGMA freelist_count", &after) != SQLITE_OK) {
		return -1;
	}
	j->rj_freed = before - after;
	return 0;
}

int store_reclaim(struct store *st, int64_t max_pages, int64_t *ret_pages)
{
	struct store_reclaim_job j;

	memset(&j, 0, sizeof(j));
	snprintf(j.rj_sql, sizeof(j.rj_sql), "PRAGMA incremental_vacuum(%" PRId64 ")",
	         max_pages > 0 ? max_pages : 1);
	if (store_write(st, 0, store_reclaim_tx, &j) < 0) {
		return -1;
	}
	*ret_pages = j.rj_freed;
	return 0;
}

int store_checkpoint(struct store *st)
{
	struct store_conn *cn;
	sqlite3_stmt *stmt = NULL;
	int busy = 1;
	int rc;

	cn = store_conn_open(st->st_path, SQLITE_OPEN_READWRITE, STORE_CHECKPOINT_BUSY_MS);
	if (cn == NULL) {
		return -1;
	}
	rc = sqlite3_prepare_v2(cn->cn_db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &stmt, NULL);
	if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
		busy = sqlite3_column_int(stmt, 0);
	}
	sqlite3_finalize(stmt);
	store_conn_close(cn);
	return busy ? 1 : 0;
}

int store_vacuum(struct store *st)
{
	struct store_conn *cn;
	char *err = NULL;
	int rc;

	cn = store_conn_open(st->st_path, SQLITE_OPEN_READWRITE, st->st_busy_timeout_ms);
	if (cn == NULL) {
		return -1;
	}
	rc = sqlite3_exec(cn->cn_db, "PRAGMA auto_vacuum = INCREMENTAL; VACUUM", NULL, NULL, &err);
	if (rc != SQLITE_OK) {
		log_err("store: VACUUM failed: %s", err != NULL ? err : sqlite3_errstr(rc));
		sqlite3_free(err);
		store_conn_close(cn);
		return -1;
	}
	store_conn_close(cn);
	return 0;
}

int store_snapshot(const char *path, const char *dir, char **ret_path)
{
	struct store_conn *cn = NULL;
	sqlite3_stmt *stmt = NULL;
	char quoted[256];
	char *name = NULL;
	size_t len;
	int fd;
	int rc;

	if (access(path, R_OK) < 0) {
		log_err("store: cannot read the database \"%s\": %s",
		        log_quote(quoted, sizeof(quoted), path), strerror(errno));
		return -1;
	}
	if (dir == NULL || dir[0] == '\0') {
		dir = getenv("TMPDIR") != NULL && getenv("TMPDIR")[0] != '\0' ? getenv("TMPDIR") : "/tmp";
	}
	len = strlen(dir) + sizeof("/idemhook-snapshot.XXXXXX.db");
	name = malloc(len);
	if (name == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	snprintf(name, len, "%s/idemhook-snapshot.XXXXXX.db", dir);
	/* A new private file: VACUUM INTO takes an empty one. */
	fd = mkstemps(name, 3);
	if (fd < 0) {
		log_err("store: cannot create a snapshot file in \"%s\": %s",
		        log_quote(quoted, sizeof(quoted), dir), strerror(errno));
		free(name);
		return -1;
	}
	close(fd);
	cn = store_conn_open(path, SQLITE_OPEN_READONLY, STORE_BUSY_TIMEOUT_MS_DEFAULT);
	if (cn == NULL) {
		goto fail;
	}
	/* One read transaction: a consistent copy that never blocks writers. */
	rc = sqlite3_prepare_v2(cn->cn_db, "VACUUM INTO ?", -1, &stmt, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	}
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(stmt);
	}
	if (rc != SQLITE_DONE) {
		log_err("store: cannot copy the database into \"%s\": %s",
		        log_quote(quoted, sizeof(quoted), name), sqlite3_errmsg(cn->cn_db));
		goto fail;
	}
	sqlite3_finalize(stmt);
	store_conn_close(cn);
	*ret_path = name;
	return 0;
fail:
	sqlite3_finalize(stmt);
	store_conn_close(cn);
	store_snapshot_remove(name);
	free(name);
	return -1;
}

void store_snapshot_remove(const char *snapshot_path)
{
	static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
	char name[4096];
	size_t i;

	if (snapshot_path == NULL) {
		return;
	}
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if (snprintf(name, sizeof(name), "%s%s", snapshot_path, suffixes[i]) < (int)sizeof(name)) {
			unlink(name);
		}
	}
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
	opt->so_backend = STORE_BACKEND_SQLITE;
	opt->so_path = strncmp(loc, "sqlite:", 7) == 0 ? loc + 7 : loc;
	return opt->so_path[0] != '\0' ? 0 : -1;
}

int store_after_copy(struct store *st)
{
	(void)st; /* SQLite: INTEGER PRIMARY KEY takes max(id) + 1 by itself */
	return 0;
}
