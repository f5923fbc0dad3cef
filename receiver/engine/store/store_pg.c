/* store_pg.c: the PostgreSQL engine of the store: writer connections (so_pg_writers), a
 * pool of read connections, statements prepared once per connection with
 * '?' rewritten to $n and every parameter's type sent, migrations versioned
 * in idemhook_schema under an advisory lock, and named advisory locks for
 * work one receiver does at a time. The only file that includes libpq-fe.h. */
/* The lanes switch stacks with _longjmp. With _FORTIFY_SOURCE (Debian's
 * packaging flags set it) glibc makes that __longjmp_chk, which takes a
 * jump to another stack for a corrupt one and aborts ("longjmp causes
 * uninitialized stack frame"). The check cannot apply to lanes: off here. */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define STORE_PG_ASAN 1 /* the lanes announce their stack switches */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STORE_PG_ASAN 1
#endif
#endif
#if defined(STORE_PG_ASAN)
#include <sanitizer/common_interface_defs.h>
#else
/* A lane is started with swapcontext and switched to and from with
 * _setjmp/_longjmp afterwards: swapcontext saves and sets the signal mask,
 * a system call on every switch (two per statement of every claim), which
 * was most of the writer's CPU. Under ASan every switch stays swapcontext,
 * which it follows. */
#define STORE_PG_LANE_JMP 1
#endif

#include <libpq-fe.h>

#include "log.h"
#include "migrations.h"
#include "store_engine.h"
#include "text.h"

#define STORE_PG_POOL_DEFAULT 4
#define STORE_PG_WRITERS_MAX 15 /* writer connections besides the first (en_writer_add) */
#define STORE_PG_STATEMENT_TIMEOUT_MS_DEFAULT 5000
/* A connect that has not finished in this many seconds gives up (libpq's
 * connect_timeout, per host) unless the conninfo or PGCONNECT_TIMEOUT says
 * otherwise: a server that accepts and never answers must not hold a
 * thread for good. */
#define STORE_PG_CONNECT_TIMEOUT_S "5"
/* The health probe's bounds: its connect, and its query's reply. A server
 * silent for longer "does not answer": not ready. */
#define STORE_PG_PROBE_CONNECT_S "2"
#define STORE_PG_PROBE_WAIT_MS 2000
/* Every reply of the server on a connection with a statement_timeout is
 * waited for at most that long and this much more: the server enforces
 * statement_timeout itself, which a stopped server (or one behind a
 * network black hole) never does. Past it the connection is given up. */
#define STORE_PG_ANSWER_MARGIN_MS 2000
/* The migrating connection has no statement_timeout (an index build on a
 * large table is long, and as silent as a hung server). After this much
 * silence on it, a second connection asks the server for a reply (its
 * connect and its query bounded as the health probe's): a server that
 * answers it is working (or waiting for a lock) and the migration waits
 * on; one that does not is hung, and the migration is given up. */
#define STORE_PG_MIGRATE_SILENCE_MS 2000
/* A migration's lock waits (unless the operator sets a lock_timeout): a
 * lock request queued behind another session's long transaction holds up
 * every callback that needs the same table, on every receiver, so it is
 * given up after this long, rolled back whole, and tried again after a
 * pause (what queued behind it runs meanwhile), this many times. */
#define STORE_PG_MIGRATE_LOCK_TIMEOUT_MS 1000
#define STORE_PG_MIGRATE_LOCK_PAUSE_MS 1000
#define STORE_PG_MIGRATE_LOCK_TRIES 5
/* A wait on an open connection after a connect found the server silent
 * for most of STORE_PG_ANSWER_MARGIN_MS and statement_timeout gets at
 * least this long. */
#define STORE_PG_SILENT_FLOOR_MS 250
/* A connect that failed after this long got no answer (a refusal comes at
 * once; libpq's connect_timeout is 2 s at least). */
#define STORE_PG_CONNECT_SILENT_MS 1500
/* After a connect that failed (or a server that stopped answering), the
 * next connect waits this long, doubled after each failure up to the
 * maximum; until then a connect fails at once. */
#define STORE_PG_BACKOFF_MIN_MS 250
#define STORE_PG_BACKOFF_MAX_MS 5000
/* A batch waits out its statement_timeout on a lock once: after that, each
 * lock wait of the batch gets this fraction of it (lock_timeout). */
#define STORE_PG_LOCK_CUT_DIVISOR 20
#define STORE_PG_STMT_BUCKETS 64
#define STORE_PG_STMT_CACHE_MAX 512 /* prepared statements per connection */
#define STORE_PG_PARAMS_MAX 1000    /* '?' in one statement */
#define STORE_PG_MSG_MAX 512        /* bytes of a libpq message in one log line */
/* The advisory lock every migrating receiver takes: "idemhook" in ASCII. */
#define STORE_PG_MIGRATE_LOCK INT64_C(0x6964656d686f6f6b)

/* Type OIDs of the parameters we send (pg_type.h, stable). */
#define STORE_PG_OID_BYTEA 17
#define STORE_PG_OID_INT8 20
#define STORE_PG_OID_TEXT 25
#define STORE_PG_OID_INT2 21
#define STORE_PG_OID_INT4 23
#define STORE_PG_OID_OID 26
#define STORE_PG_OID_BOOL 16
#define STORE_PG_OID_FLOAT4 700
#define STORE_PG_OID_FLOAT8 701
#define STORE_PG_OID_NUMERIC 1700

struct store_pg_stmt {
	char *ps_key; /* the statement's SQL, then a NUL, then its parameter types */
	size_t ps_key_len;
	char ps_name[24];
	struct store_pg_stmt *ps_next;
};

struct store_pg_lane;
struct store_pg_lanes;

/* The connects of one store after a failure: one at a time, each after a
 * delay (STORE_PG_BACKOFF_*), so that an outage costs a connect attempt
 * per delay rather than one per request. Under bo_mutex. */
struct store_pg_backoff {
	pthread_mutex_t bo_mutex;
	int64_t bo_next_ms;   /* monotonic: no connect before */
	unsigned bo_delay_ms; /* the last delay; 0 while nothing failed */
	int bo_trying;        /* the one connect let through is under way */
	/* Connects tried and failed since one last succeeded (the probe's
	 * not counted: it fails quietly), and when the first of them ended:
	 * only the first of an outage is logged as a warning. */
	unsigned bo_fails;
	int64_t bo_fails_since_ms;
	unsigned bo_under_way; /* counted connects let through and not ended */
	/* A connect succeeded after bo_fails failed (at bo_reached_ms): said
	 * once the connects under way then have ended, and counted. */
	int bo_reached;
	int64_t bo_reached_ms;
	/* Atomic, not under bo_mutex: when a connection of the store last
	 * heard from the server, and, when a connect got no answer since,
	 * when that connect began (else 0). The server has been silent
	 * since then on every connection: a wait on an open one counts that
	 * silence as its own, so a callback that first met it on a connect
	 * does not wait it out again in full. */
	int64_t bo_heard_ms;
	int64_t bo_silent_since_ms;
};

/* A write held back (en_exec_one on a lane): its prepared statement's name
 * and copies of its parameters as libpq takes them, sent at the head of
 * the writer's next round. */
struct store_pg_defer {
	char *df_sql; /* for the log: the statement as the store wrote it */
	int df_one;   /* it must change one row (else its result is not read) */
	char df_name[24];
	int df_n;
	char **df_values;
	int *df_lengths;
	int *df_formats;
	struct store_pg_defer *df_next;
};

struct store_conn {
	PGconn *cn_pg;
	struct store_pg_stmt *cn_stmts[STORE_PG_STMT_BUCKETS];
	size_t cn_n_stmts;
	unsigned cn_next_id;
	int cn_retry;               /* a deadlock or serialization failure since BEGIN */
	int cn_timed_out; /* its last statement failed on statement_timeout or lock_timeout */
	int cn_begin_pending;       /* writer: BEGIN not sent yet, goes with the next statement */
	char cn_sqlstate[6];        /* of the last failure */
	int cn_depth;               /* reader: nested gets on its thread */
	int cn_reader;              /* a pooled read connection */
	const char *cn_conninfo;    /* borrowed from its store_db, for reconnecting */
	int *cn_read_only;          /* its store_db's db_read_only */
	const char *cn_role;        /* its fallback application_name */
	const char *cn_app_name;    /* borrowed from its store_db: its application_name, or NULL */
	const char *cn_session_attrs; /* borrowed: its target_session_attrs, or NULL */
	/* borrowed: its connect_timeout, or NULL (the conninfo's) */
	const char *cn_connect_timeout;
	unsigned cn_timeout_ms;     /* its statement_timeout, set again after a reconnect */
	uint64_t cn_round_trips;    /* to the server, counted on the connection's own thread */
	struct store_conn *cn_next; /* reader: in the free list */
	struct store_pg_lanes *cn_lanes; /* writer: its lanes, made on first use */
	struct store_pg_lane *cn_lane;   /* a lane's connection: the lane (cn_pg is the writer's) */
	struct store_pg_defer *cn_defer; /* writer: writes held back, in order */
	struct store_pg_defer **cn_defer_tail;
	int cn_defer_failed; /* writer: one of them failed: the transaction cannot commit */
	int cn_lost;         /* writer: its transaction went with a broken round */
	int cn_lock_cut;     /* writer: its batch met a lock once: lock waits cut short */
	char cn_lock_cut_sql[48];
	const int *cn_no_advisory; /* borrowed from its store_db: db_no_advisory */
	int cn_schema_check;       /* writer: its transaction's first round checks the version */
	int cn_schema_found;       /* writer: the foreign version that check found, or -1 */
	char cn_schema_lock_sql[64];
	char cn_schema_guard_sql[96];
	struct store_pg_backoff *cn_backoff; /* borrowed from its store_db */
	int cn_hung; /* the server left it without a reply: given up (store_pg_hung) */
	/* migrating (no statement_timeout): its store, and the connection
	 * that checks the server answers while this one is silent */
	struct store_db *cn_watch_db;
	struct store_conn *cn_watch;
};

struct store_db {
	char *db_conninfo;
	char *db_app_name; /* so_pg_application_name, or NULL */
	/* "read-write" when the store writes and the conninfo names no
	 * target_session_attrs of its own, else NULL (libpq's default). */
	const char *db_session_attrs;
	/* STORE_PG_CONNECT_TIMEOUT_S when neither the conninfo nor
	 * PGCONNECT_TIMEOUT sets connect_timeout, else NULL. */
	const char *db_connect_timeout;
	unsigned db_timeout_ms;
	struct store_conn *db_writer;                     /* NULL when read-only */
	struct store_conn *db_more[STORE_PG_WRITERS_MAX]; /* en_writer_add's, each its thread's */
	unsigned db_n_more;
	char db_more_role[STORE_PG_WRITERS_MAX][24]; /* their application_name */
	pthread_mutex_t db_mutex;
	pthread_cond_t db_cond;
	struct store_conn *db_free; /* idle read connections, under db_mutex */
	unsigned db_pool_size;
	unsigned db_pool_open;      /* read connections made, under db_mutex */
	struct store_conn **db_all; /* every read connection, for closing */
	pthread_key_t db_key;       /* the read connection this thread holds */
	int db_key_made;
	struct store_conn *db_lock_conn; /* advisory locks (session), under db_lock_mutex */
	pthread_mutex_t db_lock_mutex;
	struct store_conn *db_probe;
	/* The server takes no writes (atomic): the last connect was refused
	 * as read-only (libpq's check of target_session_attrs). Readiness and
	 * a failed commit's reason say so. */
	int db_read_only;
	/* The server has no advisory locks (CockroachDB): writers do not
	 * check the schema version in their transactions; the probe does. */
	int db_no_advisory;
	struct store_pg_backoff db_backoff;
};

static const struct store_engine *const en = &store_engine_pg;

/* ---- connections ---- */

static int64_t store_pg_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void store_pg_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message; /* NOTICEs (IF NOT EXISTS ... skipping) are not news */
}

static void store_pg_stmts_clear(struct store_conn *cn)
{
	size_t i;

	for (i = 0; i < STORE_PG_STMT_BUCKETS; i++) {
		struct store_pg_stmt *ps = cn->cn_stmts[i];

		while (ps != NULL) {
			struct store_pg_stmt *next = ps->ps_next;

			free(ps->ps_key);
			free(ps);
			ps = next;
		}
		cn->cn_stmts[i] = NULL;
	}
	cn->cn_n_stmts = 0;
}

static void store_pg_lanes_free(struct store_pg_lanes *ls);

static void store_pg_defer_free(struct store_pg_defer *df)
{
	int i;

	if (df == NULL) {
		return;
	}
	for (i = 0; df->df_values != NULL && i < df->df_n; i++) {
		free(df->df_values[i]);
	}
	free(df->df_values);
	free(df->df_lengths);
	free(df->df_formats);
	free(df->df_sql);
	free(df);
}

/* Forgets the writes held back (their transaction ends without them). */
static void store_pg_defer_clear(struct store_conn *cn)
{
	struct store_pg_defer *df = cn->cn_defer;

	while (df != NULL) {
		struct store_pg_defer *next = df->df_next;

		store_pg_defer_free(df);
		df = next;
	}
	cn->cn_defer = NULL;
	cn->cn_defer_tail = &cn->cn_defer;
}

/* A new transaction on the writer: nothing of the last one's is left. */
static void store_pg_defer_reset(struct store_conn *cn)
{
	store_pg_defer_clear(cn);
	cn->cn_defer_failed = 0;
	cn->cn_lost = 0;
}

static void store_pg_conn_close(struct store_conn *cn)
{
	if (cn == NULL) {
		return;
	}
	store_pg_defer_clear(cn);
	store_pg_lanes_free(cn->cn_lanes);
	store_pg_stmts_clear(cn);
	store_pg_conn_close(cn->cn_watch);
	if (cn->cn_pg != NULL) {
		PQfinish(cn->cn_pg);
	}
	free(cn);
}

static void store_pg_one_line(const char *msg, char *out, size_t size);
static PGresult *store_pg_exec_sql(struct store_conn *cn, const char *sql);
static void store_pg_heard(struct store_conn *cn);

/* Session settings every connection gets (again after a reconnect). */
static int store_pg_conn_setup(struct store_conn *cn, unsigned timeout_ms)
{
	char sql[96];
	PGresult *res;
	int ok;

	PQsetNoticeProcessor(cn->cn_pg, store_pg_notice, NULL);
	snprintf(sql, sizeof(sql), "SET statement_timeout = %u; SET client_min_messages = warning",
	         timeout_ms);
	cn->cn_timeout_ms = timeout_ms;
	res = store_pg_exec_sql(cn, sql);
	cn->cn_round_trips++;
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (ok) {
		/* the session's first reply: the server is heard from (a
		 * connect's answer alone is not: store_pg_connect_noted) */
		store_pg_heard(cn);
	} else if (!cn->cn_hung) { /* else store_pg_hung said why: libpq's "closed" is ours */
		char msg[STORE_PG_MSG_MAX];

		store_pg_one_line(PQerrorMessage(cn->cn_pg), msg, sizeof(msg));
		log_err("store: postgresql: %s", msg);
	}
	PQclear(res);
	return ok ? 0 : -1;
}

/* libpq's message on one line, without its trailing newline (a log line
 * per message, which journald keeps as one entry at its level). */
static void store_pg_one_line(const char *msg, char *out, size_t size)
{
	size_t o = 0;

	for (; *msg != '\0' && o + 1 < size; msg++) {
		if (*msg == '\n' || *msg == '\t') {
			while (msg[1] == '\n' || msg[1] == '\t' || msg[1] == ' ') {
				msg++;
			}
			if (msg[1] != '\0' && o > 0) {
				out[o++] = ' ';
			}
			continue;
		}
		out[o++] = *msg;
	}
	out[o] = '\0';
}

/* cn's last libpq message on one line, in buf (for a log line). */
static const char *store_pg_conn_message(const struct store_conn *cn, char *buf, size_t size)
{
	store_pg_one_line(PQerrorMessage(cn->cn_pg), buf, size);
	return buf;
}

/* Sends what libpq still holds for cn (its connections are nonblocking:
 * a send to a server that reads nothing does not block) and waits until
 * cn's next result can be read without blocking (libpq's blocking calls
 * would wait for a hung server for good), reading what comes meanwhile:
 * at most wait_ms or, when silence, as long as the server reads or sends
 * something at least every wait_ms (a large result on a slow link is not
 * a hung server). Returns 0, -1 when the connection broke (libpq has its
 * message), -2 when the server did not answer in time. */
static int store_pg_wait_first(struct store_conn *cn, unsigned first_ms, unsigned wait_ms,
                               int silence);

static int store_pg_wait(struct store_conn *cn, unsigned wait_ms, int silence)
{
	return store_pg_wait_first(cn, wait_ms, wait_ms, silence);
}

/* The server was heard from on a connection of cn's store: it is not
 * silent. */
static void store_pg_heard(struct store_conn *cn)
{
	if (cn->cn_backoff == NULL) {
		return;
	}
	__atomic_store_n(&cn->cn_backoff->bo_heard_ms, store_pg_mono_ms(), __ATOMIC_RELAXED);
	if (__atomic_load_n(&cn->cn_backoff->bo_silent_since_ms, __ATOMIC_RELAXED) != 0) {
		__atomic_store_n(&cn->cn_backoff->bo_silent_since_ms, 0, __ATOMIC_RELAXED);
	}
}

/* store_pg_wait, the first silence bounded at first_ms, the later ones
 * (after the server sent something) at wait_ms. */
static int store_pg_wait_first(struct store_conn *cn, unsigned first_ms, unsigned wait_ms,
                               int silence)
{
	int64_t deadline = store_pg_mono_ms() + first_ms;

	for (;;) {
		int unsent = PQflush(cn->cn_pg);
		struct pollfd pfd = {.fd = PQsocket(cn->cn_pg), .events = POLLIN};
		int64_t left = deadline - store_pg_mono_ms();
		int n;

		if (unsent < 0) {
			return -1;
		}
		if (unsent == 0 && !PQisBusy(cn->cn_pg)) {
			return 0;
		}
		if (pfd.fd < 0) {
			return -1;
		}
		if (left <= 0) {
			return -2;
		}
		pfd.events |= unsent > 0 ? POLLOUT : 0;
		n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno != EINTR) {
			return -1;
		}
		if (n > 0 && (pfd.revents & (POLLIN | POLLERR | POLLHUP)) != 0 &&
		    PQconsumeInput(cn->cn_pg) != 1) {
			return -1;
		}
		if (n > 0 && (pfd.revents & POLLIN) != 0) {
			store_pg_heard(cn);
		}
		if (n > 0 && silence) {
			deadline = store_pg_mono_ms() + wait_ms;
		}
	}
}

static void store_pg_backoff_failed(struct store_pg_backoff *bo);

/* The server left cn without a reply for wait_ms: the connection is given
 * up as a lost one. Its socket is shut down under libpq, which then finds
 * it closed: what was pending fails as on a connection the server closed
 * (a transaction on it is rolled back by the server, or, for a COMMIT
 * sent, its outcome is unknown), and PQstatus says CONNECTION_BAD. A
 * cancel request would meet the same silence. The store's next connects
 * back off, as after a failed one. */
static void store_pg_hung(struct store_conn *cn, unsigned wait_ms)
{
	int fd = PQsocket(cn->cn_pg);

	if (wait_ms > 0) { /* else the caller said it */
		log_warn("store: postgresql did not answer within %u ms; the connection (%s) is "
		         "given up",
		         wait_ms, cn->cn_app_name != NULL ? cn->cn_app_name : cn->cn_role);
	}
	cn->cn_hung = 1;
	if (fd >= 0) {
		shutdown(fd, SHUT_RDWR);
		PQconsumeInput(cn->cn_pg);
	}
	if (cn->cn_backoff != NULL) {
		store_pg_backoff_failed(cn->cn_backoff);
	}
}

static struct store_conn *store_pg_conn_open_t(struct store_db *db, const char *role,
                                               unsigned timeout_ms, int quiet, enum log_level level,
                                               const char *connect_timeout);

/* Whether the server answers a query on cn within wait_ms: 0 when it
 * does (with a result or an error), -1 when the connection broke, -2 when
 * no reply came in time (cn is then mid-query: the caller closes it). */
static int store_pg_ping(struct store_conn *cn, unsigned wait_ms)
{
	int64_t deadline = store_pg_mono_ms() + wait_ms;
	PGresult *res;

	if (PQsendQuery(cn->cn_pg, "SELECT 1") != 1) {
		return -1;
	}
	for (;;) {
		int64_t left = deadline - store_pg_mono_ms();
		int w = store_pg_wait(cn, left > 0 ? (unsigned)left : 0, 0);

		if (w < 0) {
			return w;
		}
		res = PQgetResult(cn->cn_pg); /* not busy: does not wait */
		if (res == NULL) {
			return 0;
		}
		PQclear(res);
	}
}

/* Whether the server of cn (migrating, silent for a while) still answers,
 * asked on a connection of its own (made on first use, kept): 0 when it
 * does, or when it refuses that connection (it answered), -1 when the
 * connect or the query got no reply in time. */
static int store_pg_watch_check(struct store_conn *cn)
{
	int64_t t0 = store_pg_mono_ms();
	int rc;

	if (cn->cn_watch != NULL && PQstatus(cn->cn_watch->cn_pg) != CONNECTION_OK) {
		store_pg_conn_close(cn->cn_watch);
		cn->cn_watch = NULL;
	}
	if (cn->cn_watch == NULL) {
		cn->cn_watch = store_pg_conn_open_t(cn->cn_watch_db, "idemhook migration check",
		                                    STORE_PG_PROBE_WAIT_MS, 1, LOG_LEVEL_DEBUG,
		                                    STORE_PG_PROBE_CONNECT_S);
		if (cn->cn_watch == NULL) {
			/* A refusal (max_connections, say) comes at once and is
			 * an answer; connect_timeout's end is silence, and so is
			 * a connect answered and then left without the reply to
			 * its settings (the server is still marked silent: a
			 * wait cut short by that mark ends soon, and is no
			 * refusal). */
			int64_t waited = store_pg_mono_ms() - t0;
			int64_t silent_since = __atomic_load_n(&cn->cn_backoff->bo_silent_since_ms,
			                                       __ATOMIC_RELAXED);

			if (waited >= 1000 * strtol(STORE_PG_PROBE_CONNECT_S, NULL, 10) ||
			    silent_since != 0) {
				return -1;
			}
			return 0;
		}
	}
	rc = store_pg_ping(cn->cn_watch, STORE_PG_PROBE_WAIT_MS);
	if (rc == -2) {
		store_pg_conn_close(cn->cn_watch);
		cn->cn_watch = NULL;
		return -1;
	}
	return 0;
}

/* cn's next result (PQgetResult), waited for while the server is silent
 * for at most its statement_timeout and STORE_PG_ANSWER_MARGIN_MS, from
 * this call or the last bytes it sent: every reply of the store's goes
 * through here. Without a statement_timeout (migrating), silence is
 * waited out for as long as the server answers another connection. */
static PGresult *store_pg_result(struct store_conn *cn)
{
	unsigned wait_ms = cn->cn_timeout_ms + STORE_PG_ANSWER_MARGIN_MS;
	unsigned first_ms = wait_ms;

	if (cn->cn_timeout_ms > 0 && cn->cn_backoff != NULL) {
		/* A connect found the server silent before this wait began:
		 * the silence counts from there (at least a moment is left
		 * for a server that has just come back). */
		int64_t since =
		        __atomic_load_n(&cn->cn_backoff->bo_silent_since_ms, __ATOMIC_RELAXED);
		int64_t left = since + wait_ms - store_pg_mono_ms();

		if (since != 0 && left < (int64_t)wait_ms) {
			first_ms = left > STORE_PG_SILENT_FLOOR_MS ? (unsigned)left
			                                           : STORE_PG_SILENT_FLOOR_MS;
		}
	}
	if (cn->cn_timeout_ms > 0 && store_pg_wait_first(cn, first_ms, wait_ms, 1) == -2) {
		if (first_ms < wait_ms) {
			const char *name = cn->cn_app_name != NULL ? cn->cn_app_name : cn->cn_role;

			log_warn("store: postgresql did not answer within %u ms; the connection "
			         "(%s) "
			         "is given up (a connect found it silent %u ms before this wait "
			         "began)",
			         wait_ms, name, wait_ms - first_ms);
		}
		store_pg_hung(cn, first_ms < wait_ms ? 0 : wait_ms);
	}
	while (cn->cn_timeout_ms == 0 && cn->cn_watch_db != NULL &&
	       store_pg_wait(cn, STORE_PG_MIGRATE_SILENCE_MS, 1) == -2) {
		int64_t t0 = store_pg_mono_ms();

		if (store_pg_watch_check(cn) < 0) {
			log_err("store: postgresql does not answer: the migration's connection was "
			        "silent for %u ms, and a second connection got no reply within "
			        "%" PRId64 " ms; the migration is given up (the server rolls back "
			        "what it did not commit)",
			        STORE_PG_MIGRATE_SILENCE_MS, store_pg_mono_ms() - t0);
			store_pg_hung(cn, 0);
			break;
		}
	}
	return PQgetResult(cn->cn_pg);
}

/* What PQexec returns after a send (sent 0: it failed), its replies each
 * waited for by store_pg_result: the last result, or NULL. */
static PGresult *store_pg_last_result(struct store_conn *cn, int sent)
{
	PGresult *last = NULL;
	PGresult *res;

	if (!sent) {
		return NULL;
	}
	while ((res = store_pg_result(cn)) != NULL) {
		PQclear(last);
		last = res;
		if (PQstatus(cn->cn_pg) != CONNECTION_OK) {
			break;
		}
	}
	return last;
}

/* PQexec (statements by the simple protocol), bounded. Like PQexec, not
 * in pipeline mode. */
static PGresult *store_pg_exec_sql(struct store_conn *cn, const char *sql)
{
	return store_pg_last_result(cn, PQpipelineStatus(cn->cn_pg) == PQ_PIPELINE_OFF &&
	                                        PQsendQuery(cn->cn_pg, sql) == 1);
}

/* Whether libpq reads conninfo as a connection string or URI rather than a
 * database name (its rule: a URI prefix, or an '='). */
static int store_pg_is_conninfo(const char *conninfo)
{
	return strncmp(conninfo, "postgresql://", 13) == 0 ||
	       strncmp(conninfo, "postgres://", 11) == 0 || strchr(conninfo, '=') != NULL;
}

/* Whether the parsed conninfo sets target_session_attrs itself. */
static int store_pg_sets_option(const PQconninfoOption *opts, const char *keyword)
{
	for (; opts->keyword != NULL; opts++) {
		if (strcmp(opts->keyword, keyword) == 0) {
			return opts->val != NULL && opts->val[0] != '\0';
		}
	}
	return 0;
}

/* Checks conninfo's syntax before the first connection. libpq's parse
 * errors quote the text they stopped at (the token after a bad '=', the
 * whole URI), which may be the password: the message is logged with every
 * quoted part left out. Sets *ret_attrs to 1 when the conninfo sets
 * target_session_attrs, else 0, and *ret_connect_timeout likewise for
 * connect_timeout. Returns 0, or -1 (logged). */
static int store_pg_conninfo_check(const char *conninfo, int *ret_attrs, int *ret_connect_timeout)
{
	PQconninfoOption *opts;
	char *err = NULL;
	char msg[STORE_PG_MSG_MAX];
	size_t o = 0;
	const char *p;

	*ret_attrs = 0;
	*ret_connect_timeout = 0;
	if (!store_pg_is_conninfo(conninfo)) {
		return 0; /* a database name */
	}
	opts = PQconninfoParse(conninfo, &err);
	if (opts != NULL) {
		*ret_attrs = store_pg_sets_option(opts, "target_session_attrs");
		*ret_connect_timeout = store_pg_sets_option(opts, "connect_timeout");
		PQconninfoFree(opts);
		return 0;
	}
	if (err == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	for (p = err; *p != '\0' && *p != '\n' && o + 6 < sizeof(msg); p++) {
		if (*p != '"') {
			msg[o++] = *p;
			continue;
		}
		if (p[1] != '\0' && p[2] == '"' && strchr("=:/]@?&", p[1]) != NULL) {
			/* the character libpq expected ("=", "]"): no secret */
			memcpy(msg + o, p, 3);
			o += 3;
			p += 2;
			continue;
		}
		memcpy(msg + o, "\"...\"", 5);
		o += 5;
		p = strchr(p + 1, '"');
		if (p == NULL) {
			break;
		}
	}
	msg[o] = '\0';
	PQfreemem(err);
	log_err("store: the postgresql conninfo is not a libpq connection string or URI: %s "
	        "(what libpq quoted is left out: it may be the password)",
	        msg);
	return -1;
}

/* Arms bo's next delay, from now: the first, or the last doubled, at most
 * the maximum. Under bo_mutex. */
static void store_pg_backoff_arm(struct store_pg_backoff *bo)
{
	unsigned d = bo->bo_delay_ms == 0 ? STORE_PG_BACKOFF_MIN_MS : bo->bo_delay_ms * 2;

	bo->bo_delay_ms = d < STORE_PG_BACKOFF_MAX_MS ? d : STORE_PG_BACKOFF_MAX_MS;
	bo->bo_next_ms = store_pg_mono_ms() + bo->bo_delay_ms;
}

/* Whether a connect may be tried now: always while none has failed; after
 * a failure, once its delay has passed, by one caller at a time (*ret_gated
 * set: that caller's store_pg_connect_ended lets the next one through).
 * Returns 1 (the connect is under way until store_pg_connect_ended), or 0
 * when the connect is to fail at once. */
static int store_pg_backoff_enter(struct store_pg_backoff *bo, int *ret_gated)
{
	int64_t now = store_pg_mono_ms();
	int ok = 1;

	*ret_gated = 0;
	pthread_mutex_lock(&bo->bo_mutex);
	if (bo->bo_delay_ms > 0) {
		ok = !bo->bo_trying && now >= bo->bo_next_ms;
		bo->bo_trying = bo->bo_trying || ok;
		*ret_gated = ok;
	}
	bo->bo_under_way += ok;
	pthread_mutex_unlock(&bo->bo_mutex);
	if (!ok) {
		log_debug("store: not connecting to postgresql yet (backing off after a failure)");
	}
	return ok;
}

/* Says, once no counted connect is under way, that an outage a success
 * ended is over, with how many connects failed in it and for how long.
 * Under bo_mutex (the log line too: in the order of the counts). */
static void store_pg_reached_say(struct store_pg_backoff *bo)
{
	unsigned n = bo->bo_fails;

	if (!bo->bo_reached || bo->bo_under_way > 0) {
		return;
	}
	log_notice("store: postgresql reached again after %u failed connection attempt%s in %.1f s",
	           n, n == 1 ? "" : "s",
	           (double)(bo->bo_reached_ms - bo->bo_fails_since_ms) / 1000);
	bo->bo_fails = 0;
	bo->bo_reached = 0;
}

/* A connect of bo's store ended (pg: its connection, NULL when none could
 * be made; counted: let through by store_pg_backoff_enter, gated as it
 * said; else the probe's, which ends an outage but is not counted in
 * one). A success ends the back-off, a failure arms the next delay. The
 * failure is counted, and logged (the first of an outage at level, the
 * others at debug level: under load every request would otherwise log
 * its own), in the same critical section as the gate is released and a
 * success reads and resets the count: two connects ending together are
 * each counted once, in the outage they ended in. The outage's end is
 * said when the last connect begun in it has ended. */
static void store_pg_connect_ended(struct store_pg_backoff *bo, int counted, int gated,
                                   const PGconn *pg, enum log_level level, const char *what)
{
	int ok = pg != NULL && PQstatus(pg) == CONNECTION_OK;
	char msg[STORE_PG_MSG_MAX] = "";

	if (!ok) {
		store_pg_one_line(pg != NULL ? PQerrorMessage(pg) : "out of memory", msg,
		                  sizeof(msg));
	}
	pthread_mutex_lock(&bo->bo_mutex);
	if (gated) {
		bo->bo_trying = 0;
	}
	if (ok) {
		bo->bo_delay_ms = 0;
		bo->bo_next_ms = 0;
	} else if (gated || bo->bo_delay_ms == 0) {
		store_pg_backoff_arm(bo);
	}
	if (counted) {
		bo->bo_under_way--;
	}
	if (!ok && counted) {
		unsigned n = bo->bo_fails++;

		if (n == 0) {
			bo->bo_fails_since_ms = store_pg_mono_ms();
		}
		log_msg(n > 0 ? LOG_LEVEL_DEBUG : level, "store: %s postgresql: %s", what, msg);
	}
	if (ok && bo->bo_fails > 0 && !bo->bo_reached) {
		bo->bo_reached = 1;
		bo->bo_reached_ms = store_pg_mono_ms();
	}
	store_pg_reached_say(bo);
	pthread_mutex_unlock(&bo->bo_mutex);
}

/* The server stopped answering an open connection: connects back off as
 * after a failed one, from now (the batch or read that met the silence
 * does not reconnect at once to meet it again), unless one is under way. */
static void store_pg_backoff_failed(struct store_pg_backoff *bo)
{
	pthread_mutex_lock(&bo->bo_mutex);
	if (!bo->bo_trying && store_pg_mono_ms() >= bo->bo_next_ms) {
		store_pg_backoff_arm(bo);
	}
	pthread_mutex_unlock(&bo->bo_mutex);
}

/* After a connect or reconnect of cn's (pg): whether the server refused
 * it for taking no writes (libpq's check of target_session_attrs), or took
 * it, which ends that. */
static void store_pg_read_only_note(const struct store_conn *cn, const PGconn *pg)
{
	int ro = pg != NULL && PQstatus(pg) != CONNECTION_OK &&
	         strstr(PQerrorMessage(pg), "session is read-only") != NULL;

	if (ro || (pg != NULL && PQstatus(pg) == CONNECTION_OK && cn->cn_session_attrs != NULL)) {
		__atomic_store_n(cn->cn_read_only, ro, __ATOMIC_RELAXED);
	}
}

static PGconn *store_pg_connect(const struct store_conn *cn)
{
	/* Later keys win over the conninfo's (expanded from dbname); libpq
	 * skips a NULL value, so without cn_app_name the conninfo's
	 * application_name, or else the role, names the session. Likewise
	 * target_session_attrs: a store that writes asks libpq for a server
	 * that takes writes, so a standby (or the old primary come back as
	 * one) is refused at connect, and of a conninfo listing several
	 * hosts the primary is chosen, again on every reconnect. And
	 * connect_timeout, which bounds a connect to a server that accepts
	 * and never answers. */
	const char *const keys[] = {"dbname",           "fallback_application_name",
	                            "application_name", "target_session_attrs",
	                            "connect_timeout",  NULL};
	const char *const values[] = {cn->cn_conninfo,        cn->cn_role,
	                              cn->cn_app_name,        cn->cn_session_attrs,
	                              cn->cn_connect_timeout, NULL};

	return PQconnectdbParams(keys, values, 1);
}

/* Marks cn's server silent since t0 (when a connect began), unless it
 * has been so since earlier or another connection heard from it since. */
static void store_pg_silent_since(struct store_conn *cn, int64_t t0)
{
	struct store_pg_backoff *bo = cn->cn_backoff;
	int64_t since;

	if (__atomic_load_n(&bo->bo_heard_ms, __ATOMIC_RELAXED) > t0) {
		return;
	}
	since = __atomic_load_n(&bo->bo_silent_since_ms, __ATOMIC_RELAXED);
	while ((since == 0 || since > t0) &&
	       !__atomic_compare_exchange_n(&bo->bo_silent_since_ms, &since, t0, 0,
	                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
	}
}

/* store_pg_connect, noting what it learned of the server. A connect that
 * got no answer (a failure after STORE_PG_CONNECT_SILENT_MS or more:
 * libpq's connect_timeout is 2 s at least, a refusal comes at once) found
 * the server silent since it began. So did one answered late: the
 * connect's answer is not counted as the server heard from, or a server
 * that answers a connect at the end of connect_timeout and then reads
 * nothing would give the callback that connected connect_timeout and the
 * reply's whole bound; the server is heard from with the first reply on
 * the new session (its settings), which ends the silence. */
static PGconn *store_pg_connect_noted(struct store_conn *cn)
{
	int64_t t0 = store_pg_mono_ms();
	PGconn *pg = store_pg_connect(cn);
	int answered = pg != NULL && PQstatus(pg) == CONNECTION_OK;

	if (answered || store_pg_mono_ms() - t0 >= STORE_PG_CONNECT_SILENT_MS) {
		store_pg_silent_since(cn, t0);
	}
	return pg;
}

/* role names the connection in pg_stat_activity (application_name, unless
 * the conninfo sets one): "idemhook writer", "idemhook reader", ... A
 * failure is logged at level (the first of an outage: store_pg_connect_ended),
 * or not at all when quiet. connect_timeout (seconds, as text) overrides
 * the store's when not NULL. */
static struct store_conn *store_pg_conn_open_t(struct store_db *db, const char *role,
                                               unsigned timeout_ms, int quiet, enum log_level level,
                                               const char *connect_timeout)
{
	struct store_conn *cn;
	int gated = 0;

	/* The probe (quiet) keeps its own schedule: it is what finds the
	 * server back, and its success ends the back-off. */
	if (!quiet && !store_pg_backoff_enter(&db->db_backoff, &gated)) {
		return NULL;
	}
	cn = calloc(1, sizeof(*cn));
	if (cn == NULL) {
		log_err("store: out of memory");
		if (!quiet) {
			store_pg_connect_ended(&db->db_backoff, 1, gated, NULL, LOG_LEVEL_DEBUG,
			                       "cannot connect to");
		}
		return NULL;
	}
	cn->cn_backoff = &db->db_backoff;
	cn->cn_conninfo = db->db_conninfo;
	cn->cn_app_name = db->db_app_name;
	cn->cn_session_attrs = db->db_session_attrs;
	cn->cn_connect_timeout = connect_timeout != NULL ? connect_timeout : db->db_connect_timeout;
	cn->cn_read_only = &db->db_read_only;
	cn->cn_no_advisory = &db->db_no_advisory;
	cn->cn_schema_found = -1;
	cn->cn_role = role;
	cn->cn_defer_tail = &cn->cn_defer;
	cn->cn_pg = store_pg_connect_noted(cn);
	store_pg_read_only_note(cn, cn->cn_pg);
	/* The conninfo's syntax was checked at open (store_pg_conninfo_check):
	 * libpq's message now names host and port, never the password. */
	if (!quiet || PQstatus(cn->cn_pg) == CONNECTION_OK) {
		store_pg_connect_ended(&db->db_backoff, !quiet, gated, cn->cn_pg, level,
		                       "cannot connect to");
	}
	if (cn->cn_pg == NULL || PQstatus(cn->cn_pg) != CONNECTION_OK) {
		goto fail;
	}
	/* Without a statement_timeout (migrating), every reply is waited for
	 * as long as the server answers a second connection, the session's
	 * settings too: a server that answers the connect and then nothing
	 * must not hold the migration for good. */
	if (timeout_ms == 0) {
		cn->cn_watch_db = db;
	}
	if (PQsetnonblocking(cn->cn_pg, 1) != 0 || store_pg_conn_setup(cn, timeout_ms) < 0) {
		goto fail;
	}
	return cn;
fail:
	store_pg_conn_close(cn);
	return NULL;
}

static struct store_conn *store_pg_conn_open_q(struct store_db *db, const char *role,
                                               unsigned timeout_ms, int quiet, enum log_level level)
{
	return store_pg_conn_open_t(db, role, timeout_ms, quiet, level, NULL);
}

/* A connection made while the receiver runs: an outage is a warning. */
static struct store_conn *store_pg_conn_open(struct store_db *db, const char *role,
                                             unsigned timeout_ms)
{
	return store_pg_conn_open_q(db, role, timeout_ms, 0, LOG_LEVEL_WARNING);
}

/* Reconnects a connection the server or the network dropped. Its prepared
 * statements went with the old session. Returns 0 or -1 (logged; not when
 * the back-off refused the connect: the outage was logged already). */
static int store_pg_conn_revive(struct store_conn *cn, unsigned timeout_ms)
{
	int gated;
	int ok;

	if (PQstatus(cn->cn_pg) == CONNECTION_OK &&
	    PQpipelineStatus(cn->cn_pg) == PQ_PIPELINE_OFF) {
		return 0;
	}
	if (!store_pg_backoff_enter(cn->cn_backoff, &gated)) {
		return -1;
	}
	store_pg_stmts_clear(cn);
	store_pg_defer_clear(cn);
	cn->cn_hung = 0;
	/* A new session, with nothing of the old one's state (a pipeline
	 * it died in). */
	PQfinish(cn->cn_pg);
	cn->cn_pg = store_pg_connect_noted(cn);
	store_pg_read_only_note(cn, cn->cn_pg);
	ok = PQstatus(cn->cn_pg) == CONNECTION_OK;
	store_pg_connect_ended(cn->cn_backoff, 1, gated, cn->cn_pg, LOG_LEVEL_WARNING,
	                       "cannot reconnect to");
	if (!ok) {
		return -1;
	}
	log_info("store: reconnected to postgresql");
	if (PQsetnonblocking(cn->cn_pg, 1) != 0) {
		return -1;
	}
	return store_pg_conn_setup(cn, timeout_ms);
}

/* ---- statements ---- */

static int store_pg_in_tx(struct store_conn *cn);
static struct store_conn *store_pg_home(struct store_conn *cn);

static int store_pg_sqlstate_retry(const char *state)
{
	/* serialization_failure, deadlock_detected */
	return strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0;
}

static int store_pg_sqlstate_timeout(const char *state)
{
	/* query_canceled (statement_timeout), lock_not_available (lock_timeout) */
	return strcmp(state, "57014") == 0 || strcmp(state, "55P03") == 0;
}

/* A write that must change one row, as one statement that fails otherwise:
 * the row it returned as a scalar subquery (more than one row is an error)
 * cast to an integer, or, for none, a sentence that fails the cast. No
 * aggregate: count(*) cost the server about 10 us more per claim (the
 * aggregate's set-up on every execution). */
#define STORE_PG_ONE_HEAD "WITH one AS ("
#define STORE_PG_ONE_TAIL                                                                          \
	" RETURNING '1') SELECT CAST(COALESCE((SELECT * FROM one), 'a held write changed no "      \
	"row') AS integer)"

/* 1 when a statement made by store_pg_exec_one failed as it does when its
 * write changed no row (22P02: the sentence did not cast) or more than one
 * (21000): expected now and then (two claims of one batch on one order),
 * the batch then runs again one unit at a time. */
static int store_pg_one_missed(const char *state, const char *sql)
{
	return state != NULL && (strcmp(state, "22P02") == 0 || strcmp(state, "21000") == 0) &&
	       strncmp(sql, STORE_PG_ONE_HEAD, strlen(STORE_PG_ONE_HEAD)) == 0;
}

/* The warning of a write that must change one row and did not. */
static void store_pg_one_warn(const char *sql)
{
	log_warn("store: %.100s: a write held back changed another number of rows than one; the "
	         "batch runs again one unit at a time",
	         sql);
}

/* Remembers and logs (once, here) a failed result. The statement's own
 * connection (a lane's, for a lane) learns whether it timed out; the
 * writer's the rest. */
static void store_pg_fail(struct store_conn *self, const PGresult *res, const char *what)
{
	struct store_conn *cn = store_pg_home(self);
	const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	char msg[STORE_PG_MSG_MAX];

	self->cn_timed_out = state != NULL && store_pg_sqlstate_timeout(state);
	if (cn->cn_hung) {
		/* libpq's word is "server closed the connection": we did */
		snprintf(msg, sizeof(msg),
		         "no answer from postgresql (the connection was given up)");
	} else {
		store_pg_one_line(res != NULL ? PQresultErrorMessage(res)
		                              : PQerrorMessage(cn->cn_pg),
		                  msg, sizeof(msg));
	}
	snprintf(cn->cn_sqlstate, sizeof(cn->cn_sqlstate), "%s", state != NULL ? state : "08000");
	if (strcmp(cn->cn_sqlstate, "53100") == 0) { /* disk_full */
		store_note_full();
	}
	if (store_pg_sqlstate_retry(cn->cn_sqlstate)) {
		cn->cn_retry = 1;
		log_warn("store: %.100s: %s", what, msg);
	} else if (store_pg_one_missed(state, what)) {
		/* A lane's first use of the statement, run at once. */
		store_pg_one_warn(what + strlen(STORE_PG_ONE_HEAD));
	} else if (PQstatus(cn->cn_pg) != CONNECTION_OK || self->cn_timed_out) {
		log_warn("store: %.100s: %s", what, msg);
	} else {
		log_err("store: %.100s: %s", what, msg);
	}
}

/* Rewrites '?' placeholders to $1..$n outside string literals, quoted
 * identifiers and comments. Returns the new text (malloc'd) with *ret_n the
 * number of placeholders, or NULL (logged). */
static char *store_pg_rewrite(const char *sql, size_t *ret_n)
{
	size_t len = strlen(sql);
	size_t cap = len + 1;
	size_t n = 0;
	size_t o = 0;
	const char *p;
	char *out;

	for (p = sql; *p != '\0'; p++) {
		cap += *p == '?' ? 5 : 0;
	}
	out = malloc(cap);
	if (out == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	for (p = sql; *p != '\0'; p++) {
		if (*p == '\'' || *p == '"') {
			char q = *p;

			out[o++] = *p++;
			while (*p != '\0' && *p != q) {
				out[o++] = *p++;
			}
			if (*p == '\0') {
				break;
			}
			out[o++] = *p; /* the closing quote; '' is two literals in a row */
			continue;
		}
		if (p[0] == '-' && p[1] == '-') {
			while (*p != '\0' && *p != '\n') {
				out[o++] = *p++;
			}
			if (*p == '\0') {
				break;
			}
			out[o++] = *p;
			continue;
		}
		if (*p != '?') {
			out[o++] = *p;
			continue;
		}
		if (++n > STORE_PG_PARAMS_MAX) {
			log_err("store: %.100s: too many parameters", sql);
			free(out);
			return NULL;
		}
		o += (size_t)snprintf(out + o, cap - o, "$%zu", n);
	}
	out[o] = '\0';
	*ret_n = n;
	return out;
}

/* The type each parameter is sent with: int8, text, bytea; a NULL none
 * (see store_pg_prepare_typed). */
static Oid store_pg_type(const struct store_value *v)
{
	switch (v->sv_type) {
	case STORE_INT:
		return STORE_PG_OID_INT8;
	case STORE_TEXT:
		return v->sv_text != NULL ? STORE_PG_OID_TEXT : 0;
	case STORE_BLOB:
		return STORE_PG_OID_BYTEA;
	default:
		return 0;
	}
}

/* The parameter number in "could not determine data type of parameter $N",
 * or 0. */
static size_t store_pg_untyped_param(const PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *dollar;

	if (state == NULL || strcmp(state, "42P18") != 0 || msg == NULL) {
		return 0;
	}
	dollar = strrchr(msg, '$');
	return dollar != NULL ? (size_t)strtoul(dollar + 1, NULL, 10) : 0;
}

/* Prepares pg_sql. A NULL parameter goes untyped (0) and the server infers
 * its type from where it stands; where nothing tells (`? IS NULL OR col =
 * ?`), it is given text and the statement prepared again. Inside a
 * transaction each try runs in a savepoint, as a failed PREPARE would abort
 * the transaction. Only the first use of a statement on a connection pays
 * for this. Returns the last result (the caller clears it). */
static PGresult *store_pg_prepare_typed(struct store_conn *cn, const char *name, const char *pg_sql,
                                        Oid *types, size_t n)
{
	int in_tx = store_pg_in_tx(cn);
	PGresult *res = NULL;
	PGresult *sp;
	size_t tries;
	size_t k;

	for (tries = 0; tries <= n; tries++) {
		if (in_tx) {
			sp = store_pg_exec_sql(cn, "SAVEPOINT idemhook_prepare");
			PQclear(sp);
			cn->cn_round_trips++;
		}
		PQclear(res);
		res = store_pg_last_result(
		        cn, PQpipelineStatus(cn->cn_pg) == PQ_PIPELINE_OFF &&
		                    PQsendPrepare(cn->cn_pg, name, pg_sql, (int)n, types) == 1);
		cn->cn_round_trips++;
		if (in_tx) {
			sp = store_pg_exec_sql(cn, PQresultStatus(res) == PGRES_COMMAND_OK
			                                   ? "RELEASE idemhook_prepare"
			                                   : "ROLLBACK TO idemhook_prepare");
			PQclear(sp);
			cn->cn_round_trips++;
		}
		if (PQresultStatus(res) == PGRES_COMMAND_OK) {
			break;
		}
		k = store_pg_untyped_param(res);
		if (k == 0 || k > n || types[k - 1] != 0) {
			break;
		}
		types[k - 1] = STORE_PG_OID_TEXT;
	}
	return res;
}

static unsigned store_pg_hash(const char *s, size_t len)
{
	unsigned h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++) {
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	}
	return h;
}

/* The cache key of sql with these parameter types: the SQL, a NUL, the
 * types (malloc'd, *ret_len its length), or NULL (logged). */
static char *store_pg_stmt_key(const char *sql, const Oid *types, size_t n, size_t *ret_len)
{
	size_t sql_len = strlen(sql);
	size_t key_len = sql_len + 1 + n * sizeof(Oid);
	char *key;

	key = malloc(key_len);
	if (key == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	memcpy(key, sql, sql_len + 1);
	if (n > 0) {
		memcpy(key + sql_len + 1, types, n * sizeof(Oid));
	}
	*ret_len = key_len;
	return key;
}

static struct store_pg_stmt *store_pg_stmt_find(const struct store_conn *cn, const char *key,
                                                size_t key_len)
{
	struct store_pg_stmt *ps;

	for (ps = cn->cn_stmts[store_pg_hash(key, key_len) % STORE_PG_STMT_BUCKETS]; ps != NULL;
	     ps = ps->ps_next) {
		if (ps->ps_key_len == key_len && memcmp(ps->ps_key, key, key_len) == 0) {
			return ps;
		}
	}
	return NULL;
}

/* A new cache entry for key (taken) with the connection's next name, not
 * yet in the cache; NULL (logged, key freed). */
static struct store_pg_stmt *store_pg_stmt_new(struct store_conn *cn, char *key, size_t key_len)
{
	struct store_pg_stmt *ps = calloc(1, sizeof(*ps));

	if (ps == NULL) {
		log_err("store: out of memory");
		free(key);
		return NULL;
	}
	ps->ps_key = key;
	ps->ps_key_len = key_len;
	snprintf(ps->ps_name, sizeof(ps->ps_name), "idemhook_%u", cn->cn_next_id++);
	return ps;
}

/* Puts a statement the server has prepared into the cache. */
static void store_pg_stmt_add(struct store_conn *cn, struct store_pg_stmt *ps)
{
	unsigned b = store_pg_hash(ps->ps_key, ps->ps_key_len) % STORE_PG_STMT_BUCKETS;

	ps->ps_next = cn->cn_stmts[b];
	cn->cn_stmts[b] = ps;
	cn->cn_n_stmts++;
}

/* Returns the name of the statement prepared on cn for sql with these
 * types, preparing it on first use; NULL on failure (logged). */
static const char *store_pg_prepare(struct store_conn *cn, const char *sql, const char *pg_sql,
                                    Oid *types, size_t n)
{
	struct store_pg_stmt *ps;
	PGresult *res;
	size_t key_len;
	char *key;

	key = store_pg_stmt_key(sql, types, n, &key_len);
	if (key == NULL) {
		return NULL;
	}
	ps = store_pg_stmt_find(cn, key, key_len);
	if (ps != NULL) {
		free(key);
		return ps->ps_name;
	}
	if (cn->cn_n_stmts >= STORE_PG_STMT_CACHE_MAX) {
		/* A full cache: the unnamed statement, prepared for this run only. */
		free(key);
		res = store_pg_prepare_typed(cn, "", pg_sql, types, n);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			store_pg_fail(cn, res, sql);
			PQclear(res);
			return NULL;
		}
		PQclear(res);
		return "";
	}
	ps = store_pg_stmt_new(cn, key, key_len);
	if (ps == NULL) {
		return NULL;
	}
	res = store_pg_prepare_typed(cn, ps->ps_name, pg_sql, types, n);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		store_pg_fail(cn, res, sql);
		PQclear(res);
		free(ps->ps_key);
		free(ps);
		return NULL;
	}
	PQclear(res);
	store_pg_stmt_add(cn, ps);
	return ps->ps_name;
}

/* One result value (text format) as a store value. */
static int store_pg_value(const PGresult *res, int r, int c, struct store_value *v)
{
	const char *s = PQgetvalue(res, r, c);
	size_t len = (size_t)PQgetlength(res, r, c);
	char *copy;
	size_t i;

	memset(v, 0, sizeof(*v));
	if (PQgetisnull(res, r, c)) {
		v->sv_type = STORE_NULL;
		return 0;
	}
	switch (PQftype(res, c)) {
	case STORE_PG_OID_INT2:
	case STORE_PG_OID_INT4:
	case STORE_PG_OID_INT8:
	case STORE_PG_OID_OID:
		v->sv_type = STORE_INT;
		v->sv_int = strtoll(s, NULL, 10);
		return 0;
	case STORE_PG_OID_NUMERIC:
	case STORE_PG_OID_FLOAT4:
	case STORE_PG_OID_FLOAT8:
		/* sum() of bigint is numeric; SQLite hands such values over as
		 * integers: the integer part, saturated. */
		v->sv_type = STORE_INT;
		v->sv_int = strtoll(s, NULL, 10);
		return 0;
	case STORE_PG_OID_BOOL:
		v->sv_type = STORE_INT;
		v->sv_int = s[0] == 't';
		return 0;
	case STORE_PG_OID_BYTEA:
		if (len < 2 || s[0] != '\\' || s[1] != 'x') {
			return store_value_copy(v, STORE_BLOB, s, len); /* not hex: as is */
		}
		copy = malloc((len - 2) / 2 + 1);
		if (copy == NULL) {
			log_err("store: out of memory");
			return -1;
		}
		for (i = 0; 2 + 2 * i + 1 < len; i++) {
			copy[i] = (char)(text_hex_value(s[2 + 2 * i]) << 4 |
			                 text_hex_value(s[2 + 2 * i + 1]));
		}
		copy[i] = '\0';
		v->sv_type = STORE_BLOB;
		v->sv_text = copy;
		v->sv_len = i;
		return 0;
	default:
		return store_value_copy(v, STORE_TEXT, s, len);
	}
}

static int store_pg_row_fill(const PGresult *res, int r, struct store_row *row)
{
	int n = PQnfields(res);
	int c;

	memset(row, 0, sizeof(*row));
	if (n > STORE_ROW_MAX) {
		log_err("store: more than %d result columns", STORE_ROW_MAX);
		return -1;
	}
	for (c = 0; c < n; c++) {
		if (store_pg_value(res, r, c, &row->sr_cols[c]) < 0) {
			store_row_finish(row);
			return -1;
		}
		row->sr_n = (size_t)c + 1;
	}
	return 0;
}

/* The arrays libpq takes for n parameters, in one allocation. */
struct store_pg_params {
	Oid *pp_types;
	const char **pp_values;
	int *pp_lengths;
	int *pp_formats;
	char (*pp_ints)[24];
};

/* Fills pp for params: text values, their types. */
static void store_pg_params_fill(const struct store_value *params, size_t n,
                                 struct store_pg_params *pp)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct store_value *v = &params[i];

		pp->pp_types[i] = store_pg_type(v);
		pp->pp_formats[i] = 0;
		pp->pp_lengths[i] = 0;
		switch (v->sv_type) {
		case STORE_INT:
			snprintf(pp->pp_ints[i], sizeof(pp->pp_ints[i]), "%" PRId64, v->sv_int);
			pp->pp_values[i] = pp->pp_ints[i];
			break;
		case STORE_TEXT:
			pp->pp_values[i] = v->sv_text;
			break;
		case STORE_BLOB:
			pp->pp_values[i] = v->sv_text != NULL ? v->sv_text : "";
			pp->pp_lengths[i] = (int)v->sv_len;
			pp->pp_formats[i] = 1;
			break;
		default:
			pp->pp_values[i] = NULL;
			break;
		}
	}
}

/* Sends one statement: prepared once per connection and types. */
static PGresult *store_pg_exec(struct store_conn *cn, const char *sql, const char *pg_sql,
                               const struct store_value *params, size_t n,
                               struct store_pg_params *pp)
{
	const char *name;

	store_pg_params_fill(params, n, pp);
	name = store_pg_prepare(cn, sql, pg_sql, pp->pp_types, n);
	if (name == NULL) {
		return NULL;
	}
	cn->cn_round_trips++;
	return store_pg_last_result(cn, PQpipelineStatus(cn->cn_pg) == PQ_PIPELINE_OFF &&
	                                        PQsendQueryPrepared(cn->cn_pg, name, (int)n,
	                                                            pp->pp_values, pp->pp_lengths,
	                                                            pp->pp_formats, 0) == 1);
}

/* Everything one statement needs beside its SQL, in one allocation: the
 * parameters as libpq takes them, and copies of TEXT parameters whose
 * explicit length is not their C string's (libpq reads text to its NUL). */
struct store_pg_call {
	struct store_pg_params pc_pp;
	struct store_value *pc_fixed;
	char **pc_copies;
	size_t pc_n;
};

static void store_pg_call_finish(struct store_pg_call *pc)
{
	size_t i;

	for (i = 0; pc->pc_copies != NULL && i < pc->pc_n; i++) {
		free(pc->pc_copies[i]);
	}
	free(pc->pc_pp.pp_types);
	free(pc->pc_pp.pp_values);
	free(pc->pc_pp.pp_lengths);
	free(pc->pc_pp.pp_formats);
	free(pc->pc_pp.pp_ints);
	free(pc->pc_fixed);
	free(pc->pc_copies);
}

static int store_pg_call_init(struct store_pg_call *pc, const struct store_value *params, size_t n)
{
	size_t m = n > 0 ? n : 1;
	size_t i;

	memset(pc, 0, sizeof(*pc));
	pc->pc_n = n;
	pc->pc_pp.pp_types = calloc(m, sizeof(Oid));
	pc->pc_pp.pp_values = calloc(m, sizeof(char *));
	pc->pc_pp.pp_lengths = calloc(m, sizeof(int));
	pc->pc_pp.pp_formats = calloc(m, sizeof(int));
	pc->pc_pp.pp_ints = calloc(m, sizeof(*pc->pc_pp.pp_ints));
	pc->pc_fixed = calloc(m, sizeof(*pc->pc_fixed));
	pc->pc_copies = calloc(m, sizeof(char *));
	if (pc->pc_pp.pp_types == NULL || pc->pc_pp.pp_values == NULL ||
	    pc->pc_pp.pp_lengths == NULL || pc->pc_pp.pp_formats == NULL ||
	    pc->pc_pp.pp_ints == NULL || pc->pc_fixed == NULL || pc->pc_copies == NULL) {
		goto fail;
	}
	for (i = 0; i < n; i++) {
		pc->pc_fixed[i] = params[i];
		if (params[i].sv_type == STORE_TEXT && params[i].sv_text != NULL &&
		    params[i].sv_len > 0 && strlen(params[i].sv_text) != params[i].sv_len) {
			pc->pc_copies[i] = strndup(params[i].sv_text, params[i].sv_len);
			if (pc->pc_copies[i] == NULL) {
				goto fail;
			}
			pc->pc_fixed[i].sv_text = pc->pc_copies[i];
		}
	}
	return 0;
fail:
	log_err("store: out of memory");
	store_pg_call_finish(pc);
	memset(pc, 0, sizeof(*pc));
	return -1;
}

static PGresult *store_pg_lane_wait(struct store_conn *cn, const char *sql, const char *pg_sql,
                                    struct store_pg_call *pc);
static int store_pg_begin_flush(struct store_conn *cn);
static PGresult *store_pg_lane_result(struct store_conn *w);

/* Checks a held-back write's result. Returns 0 when it succeeded, -1
 * (logged once per pass: logged set) when it failed or, for one that must
 * change one row, changed another number (the check's cast or scalar
 * subquery failed): the pass, or the transaction, cannot go on. */
static int store_pg_defer_check(struct store_conn *w, const struct store_pg_defer *df,
                                const PGresult *res, int *logged)
{
	const char *state;

	if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK) {
		return 0;
	}
	if (*logged) {
		return -1;
	}
	*logged = 1;
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (df->df_one && state != NULL &&
	    (strcmp(state, "22P02") == 0 || strcmp(state, "21000") == 0)) {
		/* Expected now and then (store_pg_one_missed). */
		snprintf(w->cn_sqlstate, sizeof(w->cn_sqlstate), "%s", state);
		store_pg_one_warn(df->df_sql);
		return -1;
	}
	store_pg_fail(w, res, df->df_sql);
	return -1;
}

/* Sends the writes held back and then sql, in one pipelined round, and
 * reads their results. A held-back write that failed (one that did not
 * change exactly one row fails: store_pg_exec_one) is logged and fails sql
 * too, which the server then skipped: the transaction is aborted and cannot
 * commit. Returns sql's result, or NULL (logged). */
static PGresult *store_pg_defer_exec(struct store_conn *cn, const char *sql, const char *pg_sql,
                                     const struct store_value *params, size_t n,
                                     struct store_pg_params *pp)
{
	struct store_pg_defer *df;
	PGresult *res = NULL;
	PGresult *r;
	const char *name;
	int failed = 0;
	int ok;

	store_pg_params_fill(params, n, pp);
	name = store_pg_prepare(cn, sql, pg_sql, pp->pp_types, n);
	if (name == NULL) {
		return NULL;
	}
	ok = PQenterPipelineMode(cn->cn_pg) == 1;
	for (df = cn->cn_defer; df != NULL && ok; df = df->df_next) {
		ok = PQsendQueryPrepared(cn->cn_pg, df->df_name, df->df_n,
		                         (const char *const *)df->df_values, df->df_lengths,
		                         df->df_formats, 0) == 1;
	}
	ok = ok && PQsendQueryPrepared(cn->cn_pg, name, (int)n, pp->pp_values, pp->pp_lengths,
	                               pp->pp_formats, 0) == 1;
	ok = ok && PQpipelineSync(cn->cn_pg) == 1;
	cn->cn_round_trips++;
	for (df = cn->cn_defer; df != NULL && ok; df = df->df_next) {
		r = store_pg_lane_result(cn);
		ok = r != NULL;
		if (ok && store_pg_defer_check(cn, df, r, &failed) < 0) {
			cn->cn_defer_failed = 1;
		}
		PQclear(r);
	}
	if (ok) {
		res = store_pg_lane_result(cn);
		r = store_pg_result(cn);
		ok = res != NULL && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
		PQclear(r);
	}
	store_pg_defer_clear(cn);
	if (!ok || PQexitPipelineMode(cn->cn_pg) != 1) {
		char msg[STORE_PG_MSG_MAX];

		PQclear(res);
		/* Whether sql (a COMMIT) took effect is not known. */
		cn->cn_lost = 1;
		if (PQstatus(cn->cn_pg) == CONNECTION_OK) {
			/* A protocol state nobody can trust: a new session (the
			 * transaction is lost with the old one). */
			log_warn("store: a pipelined round failed (%s); reconnecting",
			         store_pg_conn_message(cn, msg, sizeof(msg)));
			store_pg_conn_revive(cn, cn->cn_timeout_ms);
		} else {
			log_warn("store: %.100s: %s", sql,
			         store_pg_conn_message(cn, msg, sizeof(msg)));
		}
		return NULL;
	}
	if (failed) {
		PQclear(res);
		return NULL;
	}
	return res;
}

/* 1 when a statement that failed on cn may be sent again on a new
 * session: cn is a read connection that was outside any transaction (so
 * nothing of one is lost) and the server closed it. */
static int store_pg_may_resend(const struct store_conn *cn, int was_idle)
{
	return cn->cn_reader && was_idle && PQstatus(cn->cn_pg) != CONNECTION_OK;
}

static int store_pg_run(struct store_conn *cn, const char *sql, const struct store_value *params,
                        size_t n_params, store_row_fn fn, void *arg, int64_t *ret_changes)
{
	struct store_pg_call pc;
	struct store_row row;
	PGresult *res = NULL;
	char *pg_sql;
	size_t n = 0;
	int stopped = 0;
	int rows;
	int i;
	int r;
	int rc = -1;

	memset(&pc, 0, sizeof(pc));
	cn->cn_timed_out = 0;
	pg_sql = store_pg_rewrite(sql, &n);
	if (pg_sql == NULL) {
		return -1;
	}
	if (n != n_params) {
		log_err("store: %.100s: %zu parameters expected, %zu given", sql, n, n_params);
		goto out;
	}
	if (store_pg_call_init(&pc, params, n_params) < 0) {
		goto out;
	}
	if (cn->cn_lane != NULL) {
		/* NULL: the pass is doomed and the lane unwinds, quietly. */
		res = store_pg_lane_wait(cn, sql, pg_sql, &pc);
		if (res == NULL) {
			goto out;
		}
	} else {
		int was_idle;

		if (strcmp(sql, "ROLLBACK") == 0) {
			store_pg_defer_reset(cn);
		}
		if (cn->cn_begin_pending &&
		    (cn->cn_defer == NULL || strcmp(sql, "ROLLBACK") == 0) &&
		    (strcmp(sql, "COMMIT") == 0 || strcmp(sql, "ROLLBACK") == 0)) {
			/* Nothing was sent: nothing to end. */
			cn->cn_begin_pending = 0;
			rc = 0;
			goto out;
		}
		if (store_pg_begin_flush(cn) < 0) {
			goto out;
		}
		if (cn->cn_defer != NULL) {
			res = store_pg_defer_exec(cn, sql, pg_sql, pc.pc_fixed, n_params,
			                          &pc.pc_pp);
			if (res == NULL) {
				goto out;
			}
			goto done;
		}
		was_idle = PQtransactionStatus(cn->cn_pg) == PQTRANS_IDLE;
		res = store_pg_exec(cn, sql, pg_sql, pc.pc_fixed, n_params, &pc.pc_pp);
		if ((res == NULL || PQresultStatus(res) == PGRES_FATAL_ERROR) &&
		    store_pg_may_resend(cn, was_idle) &&
		    store_pg_conn_revive(cn, cn->cn_timeout_ms) == 0) {
			/* The server closed this read connection while it was
			 * idle in the pool (a restart, pg_terminate_backend):
			 * the read runs again once on a new session. */
			PQclear(res);
			res = store_pg_exec(cn, sql, pg_sql, pc.pc_fixed, n_params, &pc.pc_pp);
		}
		if (res == NULL) {
			goto out;
		}
	}
done:
	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
		store_pg_fail(cn, res, sql);
		goto out;
	}
	if (strcmp(sql, "COMMIT") == 0 && strcmp(PQcmdStatus(res), "ROLLBACK") == 0) {
		/* The server ends a failed transaction so: nothing committed. */
		log_err("store: COMMIT rolled back a failed transaction");
		goto out;
	}
	rows = PQntuples(res);
	for (i = 0; i < rows && fn != NULL; i++) {
		if (store_pg_row_fill(res, i, &row) < 0) {
			goto out;
		}
		r = fn(arg, &row);
		store_row_finish(&row);
		if (r < 0) {
			goto out;
		}
		if (r > 0) {
			stopped = 1;
			break;
		}
	}
	if (ret_changes != NULL) {
		const char *t = PQcmdTuples(res);

		*ret_changes = t[0] != '\0' ? strtoll(t, NULL, 10) : 0;
	}
	rc = stopped;
out:
	PQclear(res);
	store_pg_call_finish(&pc);
	free(pg_sql);
	return rc;
}

/* A statement without parameters, by the simple protocol (several
 * statements allowed: migrations). Returns 0 or -1 (logged). */
static int store_pg_simple(struct store_conn *cn, const char *sql, const char *what)
{
	PGresult *res;
	int ok;

	if (store_pg_begin_flush(cn) < 0) {
		return -1;
	}
	res = store_pg_exec_sql(cn, sql);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
	cn->cn_round_trips++;
	if (!ok) {
		store_pg_fail(cn, res, what != NULL ? what : sql);
	}
	PQclear(res);
	return ok ? 0 : -1;
}

/* ---- transactions ---- */

#define STORE_PG_BEGIN_WRITE "BEGIN ISOLATION LEVEL READ COMMITTED"

/* Readiness while the server takes no writes. */
#define STORE_PG_READ_ONLY                                                                         \
	"postgresql takes no writes: the server is read-only (a standby, or "                      \
	"default_transaction_read_only is on)"

/* A writer's check of the schema version, in the statements after its
 * BEGIN: the migration lock shared (idemhook migrate holds it exclusively
 * for its whole run, so no migration commits before this transaction
 * ends, and one running is waited for, up to the statement bound), then
 * the version, read by a statement of its own (READ COMMITTED takes its
 * snapshot when a statement starts: after the lock), then the same read
 * failing on a foreign version, so that the server itself aborts the
 * transaction and skips the statements pipelined after it. */
#define STORE_PG_SCHEMA_READ "SELECT COALESCE(max(version), 0) FROM idemhook_schema"
#define STORE_PG_SCHEMA_STMTS 3

/* The check's statements, in order, into sql (buffers of cn's). */
static void store_pg_schema_sql(struct store_conn *cn, const char *sql[STORE_PG_SCHEMA_STMTS])
{
	snprintf(cn->cn_schema_lock_sql, sizeof(cn->cn_schema_lock_sql),
	         "SELECT pg_advisory_xact_lock_shared(%" PRId64 ")", STORE_PG_MIGRATE_LOCK);
	snprintf(cn->cn_schema_guard_sql, sizeof(cn->cn_schema_guard_sql),
	         "SELECT 1 / (COALESCE(max(version), 0) = %d)::int FROM idemhook_schema",
	         store_schema_version());
	sql[0] = cn->cn_schema_lock_sql;
	sql[1] = STORE_PG_SCHEMA_READ;
	sql[2] = cn->cn_schema_guard_sql;
}

/* Reads the check's results (one per statement, in order: res[i] NULL for
 * those not come). Returns 0 when the schema is this binary's; -1 when it is
 * not (cn_schema_found set, nothing logged: the store notes it) or the check
 * failed (logged, as a failed BEGIN). */
static int store_pg_schema_results(struct store_conn *cn,
                                   PGresult *const res[STORE_PG_SCHEMA_STMTS])
{
	const char *sql[STORE_PG_SCHEMA_STMTS];
	int version;
	int i;

	store_pg_schema_sql(cn, sql);
	if (res[1] != NULL && PQresultStatus(res[1]) == PGRES_TUPLES_OK && PQntuples(res[1]) == 1) {
		version = (int)strtol(PQgetvalue(res[1], 0, 0), NULL, 10);
		if (version != store_schema_version()) {
			cn->cn_schema_found = version;
			return -1;
		}
	}
	for (i = 0; i < STORE_PG_SCHEMA_STMTS; i++) {
		if (res[i] == NULL || (PQresultStatus(res[i]) != PGRES_TUPLES_OK &&
		                       PQresultStatus(res[i]) != PGRES_PIPELINE_ABORTED)) {
			store_pg_fail(cn, res[i], sql[i]);
			return -1;
		}
		if (PQresultStatus(res[i]) == PGRES_PIPELINE_ABORTED) {
			return -1; /* an earlier statement failed, logged there */
		}
	}
	return 0;
}

/* SET LOCAL lock_timeout for a batch that met a lock once (cn_lock_cut):
 * a fraction of the statement bound, in a buffer of cn's. */
static const char *store_pg_lock_cut_sql(struct store_conn *cn)
{
	unsigned ms = cn->cn_timeout_ms / STORE_PG_LOCK_CUT_DIVISOR;

	/* 0 would turn lock_timeout off */
	snprintf(cn->cn_lock_cut_sql, sizeof(cn->cn_lock_cut_sql), "SET LOCAL lock_timeout = %u",
	         ms > 0 ? ms : 1);
	return cn->cn_lock_cut_sql;
}

/* Sends BEGIN by itself. A connection the server closed while it was idle
 * is made again and BEGIN sent once more: nothing was begun on it. */
static int store_pg_begin_now(struct store_conn *cn, const char *sql)
{
	PGresult *res;
	int ok;

	res = store_pg_exec_sql(cn, sql);
	cn->cn_round_trips++;
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok && PQstatus(cn->cn_pg) != CONNECTION_OK) {
		PQclear(res);
		res = NULL;
		if (store_pg_conn_revive(cn, cn->cn_timeout_ms) == 0) {
			res = store_pg_exec_sql(cn, sql);
			cn->cn_round_trips++;
			ok = PQresultStatus(res) == PGRES_COMMAND_OK;
		}
	}
	if (!ok) {
		store_pg_fail(cn, res, sql);
	}
	PQclear(res);
	return ok ? 0 : -1;
}

/* Sends sql (begin statements: BEGIN, SET LOCAL, then the schema check's)
 * by the simple protocol and reads each result into check (the check's) or
 * *ret_failed (the first begin statement that failed, NULL when none did).
 * Returns 0, or -1 when sql could not be sent. */
static int store_pg_begin_send(struct store_conn *cn, const char *sql, int begin,
                               PGresult *check[STORE_PG_SCHEMA_STMTS], PGresult **ret_failed)
{
	PGresult *res;
	int i = 0;

	*ret_failed = NULL;
	cn->cn_round_trips++;
	if (PQsendQuery(cn->cn_pg, sql) != 1) {
		return -1;
	}
	while ((res = store_pg_result(cn)) != NULL) {
		if (i < begin && PQresultStatus(res) != PGRES_COMMAND_OK && *ret_failed == NULL) {
			*ret_failed = res;
		} else if (i >= begin && i - begin < STORE_PG_SCHEMA_STMTS) {
			check[i - begin] = res;
		} else {
			PQclear(res);
		}
		i++;
	}
	return 0;
}

static void store_pg_results_clear(PGresult *res[STORE_PG_SCHEMA_STMTS])
{
	int i;

	for (i = 0; i < STORE_PG_SCHEMA_STMTS; i++) {
		PQclear(res[i]);
		res[i] = NULL;
	}
}

/* Sends sql, begin statements (BEGIN, SET LOCAL) and then the schema
 * check's, and reads each result: on a foreign version (cn_schema_found)
 * or a failure (logged) the transaction is rolled back and -1 returned. A
 * connection the server closed while it was idle (the send fails, or the
 * server's FATAL comes as BEGIN's result) is made again and sql sent once
 * more, as store_pg_begin_now does. */
static int store_pg_begin_checked(struct store_conn *cn, const char *sql, int begin)
{
	PGresult *check[STORE_PG_SCHEMA_STMTS] = {NULL};
	PGresult *failed = NULL;
	PGresult *res;
	int sent;
	int rc = -1;

	sent = store_pg_begin_send(cn, sql, begin, check, &failed);
	if ((sent < 0 || failed != NULL) && PQstatus(cn->cn_pg) != CONNECTION_OK) {
		PQclear(failed);
		store_pg_results_clear(check);
		sent = store_pg_conn_revive(cn, cn->cn_timeout_ms) < 0
		               ? -1
		               : store_pg_begin_send(cn, sql, begin, check, &failed);
	}
	if (sent < 0 || failed != NULL) {
		store_pg_fail(cn, failed, STORE_PG_BEGIN_WRITE);
		PQclear(failed);
	} else {
		rc = store_pg_schema_results(cn, check);
	}
	store_pg_results_clear(check);
	if (rc < 0 && PQstatus(cn->cn_pg) == CONNECTION_OK &&
	    PQtransactionStatus(cn->cn_pg) != PQTRANS_IDLE) {
		res = store_pg_exec_sql(cn, "ROLLBACK");
		cn->cn_round_trips++;
		PQclear(res);
	}
	return rc;
}

/* The writer's BEGIN is held back and sent with the transaction's first
 * statement (in the first pipelined round of the lanes: a round trip less
 * per batch); a reader's goes at once. */
static int store_pg_begin(struct store_conn *cn, int write)
{
	cn->cn_retry = 0;
	cn->cn_timed_out = 0;
	cn->cn_sqlstate[0] = '\0';
	if (write) {
		store_pg_defer_reset(cn);
		/* READ COMMITTED: a claim that meets another receiver's
		 * uncommitted insert of its key waits for it and then sees
		 * the winner. */
		cn->cn_begin_pending = 1;
		return 0;
	}
	/* A read is one snapshot, as SQLite's read transactions are (a
	 * read-only repeatable read never fails to serialize). */
	return store_pg_begin_now(cn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
}

/* Before a statement outside the lanes: the BEGIN held back goes first.
 * Returns 0 or -1 (logged). */
static int store_pg_begin_flush(struct store_conn *cn)
{
	const char *check[STORE_PG_SCHEMA_STMTS];
	char sql[384];
	int n;

	if (!cn->cn_begin_pending) {
		return 0;
	}
	cn->cn_begin_pending = 0;
	/* One round trip still: the simple protocol takes them all. */
	n = snprintf(sql, sizeof(sql), "%s", STORE_PG_BEGIN_WRITE);
	if (cn->cn_lock_cut) {
		n += snprintf(sql + n, sizeof(sql) - (size_t)n, "; %s", store_pg_lock_cut_sql(cn));
	}
	if (!cn->cn_schema_check) {
		return store_pg_begin_now(cn, sql);
	}
	cn->cn_schema_check = 0;
	store_pg_schema_sql(cn, check);
	snprintf(sql + n, sizeof(sql) - (size_t)n, "; %s; %s; %s", check[0], check[1], check[2]);
	return store_pg_begin_checked(cn, sql, cn->cn_lock_cut ? 2 : 1);
}

/* Arms the check of the schema version in the transaction just begun:
 * its statements go with BEGIN (store_pg_begin_flush, or the lanes' first
 * round), so it costs no round trip of its own. Without advisory locks on
 * the server (CockroachDB) there is no check: the probe's read stands. */
static int store_pg_schema_held(struct store_conn *cn, int *ret_version)
{
	(void)ret_version;
	cn->cn_schema_found = -1;
	cn->cn_schema_check = !*cn->cn_no_advisory;
	return 1;
}

static int store_pg_schema_found(struct store_conn *cn)
{
	int version = cn->cn_schema_found;

	cn->cn_schema_found = -1;
	return version;
}

static int store_pg_in_tx(struct store_conn *cn)
{
	PGTransactionStatusType ts;

	if (store_pg_home(cn)->cn_begin_pending) {
		return 1;
	}
	ts = PQtransactionStatus(cn->cn_pg);

	return ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR || ts == PQTRANS_ACTIVE;
}

static enum store_tx_state store_pg_tx_state(struct store_conn *cn)
{
	if (PQstatus(cn->cn_pg) != CONNECTION_OK || cn->cn_lost) {
		return STORE_TXS_LOST;
	}
	if (cn->cn_retry) {
		return STORE_TXS_RETRY;
	}
	if (cn->cn_defer_failed) {
		/* A claim's held-back write failed: the batch runs again,
		 * each claim in its savepoint. */
		return STORE_TXS_ENDED;
	}
	return store_pg_in_tx(cn) ? STORE_TXS_OPEN : STORE_TXS_ENDED;
}

static int store_pg_last_error(struct store_conn *cn)
{
	/* read_only_sql_transaction, or a reconnect refused so */
	if (cn != NULL && (strcmp(cn->cn_sqlstate, "25006") == 0 ||
	                   (PQstatus(cn->cn_pg) != CONNECTION_OK &&
	                    __atomic_load_n(cn->cn_read_only, __ATOMIC_RELAXED)))) {
		return 4;
	}
	if (cn == NULL || PQstatus(cn->cn_pg) != CONNECTION_OK) {
		return 1;
	}
	return cn->cn_retry ? 2 : 3;
}

/* Its last statement waited out the bound: the server's (statement_timeout,
 * lock_timeout), or ours on a server that did not answer (store_pg_hung),
 * which another connection's statement would wait out again. */
static int store_pg_timed_out(struct store_conn *cn)
{
	return cn->cn_timed_out || cn->cn_hung;
}

/* The batch met a lock once (on) or is over. A transaction not begun yet
 * gets the cut with its BEGIN; an open one now, with SET LOCAL, which ends
 * with it (so off has nothing to undo on the server). */
static int store_pg_lock_wait_cut(struct store_conn *cn, int on)
{
	cn->cn_lock_cut = on;
	if (!on || cn->cn_begin_pending || PQtransactionStatus(cn->cn_pg) != PQTRANS_INTRANS) {
		return 0;
	}
	return store_pg_simple(cn, store_pg_lock_cut_sql(cn), NULL);
}

static const char *store_pg_error_reason(int code)
{
	switch (code) {
	case 1:
		return "the connection to postgresql is lost";
	case 2:
		return NULL; /* a deadlock passes */
	case 4:
		return STORE_PG_READ_ONLY;
	default:
		return "a statement failed";
	}
}

/* ---- lanes: a batch's claims side by side, their statements pipelined ----
 *
 * Each claim of a batch runs on a lane: a context of its own (ucontext) on
 * the writer's thread, one lane running at a time. A lane's statement does
 * not go out at once: the lane waits, and when every lane waits for one,
 * the writer sends them all in pipeline mode (each new statement prepared
 * in the same pipeline), with one sync, and reads the results back in
 * order: one round trip for as many statements as there are lanes. */

#define STORE_PG_LANES_MAX 64 /* claims in flight in one pass */
#if defined(STORE_PG_ASAN)
#define STORE_PG_LANE_STACK ((size_t)1024 * 1024) /* ASan's redzones take room */
#else
#define STORE_PG_LANE_STACK ((size_t)256 * 1024)
#endif
#define STORE_PG_LANE_GUARD ((size_t)4096) /* PROT_NONE below each stack */

enum store_pg_lane_state {
	STORE_PG_LANE_START = 0, /* made, not yet run */
	STORE_PG_LANE_READY,     /* its result came back: runs next */
	STORE_PG_LANE_WAITING,   /* holds a statement for the next round */
	STORE_PG_LANE_DONE,      /* no step left */
};

struct store_pg_lane {
	struct store_conn ln_conn; /* what its steps run on: cn_lane is this lane */
	struct store_pg_lanes *ln_lanes;
	ucontext_t ln_ctx;
	jmp_buf ln_jmp; /* where it waits, once started */
	void *ln_fake;  /* ASan: its fake stack while the writer's runs */
	char *ln_map;   /* guard page and stack */
	enum store_pg_lane_state ln_state;
	int ln_unwinding; /* a statement of it failed with the pass, not by itself */
	int ln_sent;      /* its statement is in this round's pipeline */
	int ln_in_round;  /* it waits on this round */
	/* The statement it waits on (borrowed from its store_pg_run). */
	const char *ln_sql;
	const char *ln_pg_sql;
	struct store_pg_call *ln_call;
	struct store_pg_stmt *ln_prepared; /* a statement prepared in this round */
	PGresult *ln_res;
};

struct store_pg_lanes {
	struct store_conn *ls_writer;
	struct store_pg_lane ls_lane[STORE_PG_LANES_MAX];
	size_t ls_made; /* lanes with a stack */
	ucontext_t ls_main;
	jmp_buf ls_main_jmp; /* where the writer waits while a lane runs */
	/* ASan: the writer thread's own stack, learnt from a lane's first
	 * entry, and its fake stack while a lane runs. */
	const void *ls_main_bottom;
	size_t ls_main_size;
	void *ls_main_fake;
	/* The pass. */
	size_t ls_n;
	size_t ls_next;
	int (*ls_step)(void *arg, size_t i, struct store_conn *lane);
	void *ls_arg;
	int ls_doomed; /* a step failed: every statement from now on fails */
	int ls_broken; /* a round was not read to its end: the connection is reset */
};

/* makecontext passes only ints: a lane's first run finds itself here (the
 * writer's thread's own). */
static _Thread_local struct store_pg_lane *store_pg_lane_starting;

/* Under ASan every switch between stacks is announced (start before
 * swapcontext, finish after it, on the stack switched to), or ASan takes
 * one stack's frames for the other's and reports, or misses, errors there. */
#if defined(STORE_PG_ASAN)
#define store_pg_fiber_start(save, bottom, size)                                                   \
	__sanitizer_start_switch_fiber((save), (bottom), (size))
#define store_pg_fiber_finish(save, bottom_old, size_old)                                          \
	__sanitizer_finish_switch_fiber((save), (bottom_old), (size_old))
#else
#define store_pg_fiber_start(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define store_pg_fiber_finish(save, bottom_old, size_old)                                          \
	((void)(save), (void)(bottom_old), (void)(size_old))
#endif

/* From the writer's stack to the lane's; back when a lane switches back. */
static void store_pg_lane_enter(struct store_pg_lanes *ls, struct store_pg_lane *ln)
{
#if defined(STORE_PG_LANE_JMP)
	const int first = ln->ln_state == STORE_PG_LANE_START;

	if (_setjmp(ls->ls_main_jmp) == 0) {
		if (first) {
			swapcontext(&ls->ls_main, &ln->ln_ctx);
		} else {
			_longjmp(ln->ln_jmp, 1);
		}
	}
#else
	store_pg_fiber_start(&ls->ls_main_fake, ln->ln_map + STORE_PG_LANE_GUARD,
	                     STORE_PG_LANE_STACK);
	swapcontext(&ls->ls_main, &ln->ln_ctx);
	store_pg_fiber_finish(ls->ls_main_fake, NULL, NULL);
#endif
}

/* From a lane's stack to the writer's (done: the lane is not resumed, its
 * fake stack goes); back when the writer enters the lane again. */
static void store_pg_lane_leave(struct store_pg_lanes *ls, struct store_pg_lane *ln, int done)
{
#if defined(STORE_PG_LANE_JMP)
	if (done || _setjmp(ln->ln_jmp) == 0) {
		_longjmp(ls->ls_main_jmp, 1);
	}
#else
	store_pg_fiber_start(done ? NULL : &ln->ln_fake, ls->ls_main_bottom, ls->ls_main_size);
	swapcontext(&ln->ln_ctx, &ls->ls_main);
	store_pg_fiber_finish(ln->ln_fake, NULL, NULL);
#endif
}

static struct store_conn *store_pg_home(struct store_conn *cn)
{
	return cn->cn_lane != NULL ? cn->cn_lane->ln_lanes->ls_writer : cn;
}

static void store_pg_lanes_free(struct store_pg_lanes *ls)
{
	size_t i;

	if (ls == NULL) {
		return;
	}
	for (i = 0; i < ls->ls_made; i++) {
		munmap(ls->ls_lane[i].ln_map, STORE_PG_LANE_GUARD + STORE_PG_LANE_STACK);
	}
	free(ls);
}

/* Makes lanes up to n (their stacks are kept for later passes). Returns the
 * number of lanes there are, 0 when none could be made (logged). */
static size_t store_pg_lanes_make(struct store_pg_lanes *ls, size_t n)
{
	while (ls->ls_made < n && ls->ls_made < STORE_PG_LANES_MAX) {
		struct store_pg_lane *ln = &ls->ls_lane[ls->ls_made];
		char *map = mmap(NULL, STORE_PG_LANE_GUARD + STORE_PG_LANE_STACK,
		                 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
		                 -1, 0);

		if (map == MAP_FAILED) {
			log_warn("store: cannot map a lane's stack: %s", strerror(errno));
			break;
		}
		if (mprotect(map, STORE_PG_LANE_GUARD, PROT_NONE) < 0) {
			log_warn("store: cannot protect a lane's stack: %s", strerror(errno));
			munmap(map, STORE_PG_LANE_GUARD + STORE_PG_LANE_STACK);
			break;
		}
		memset(ln, 0, sizeof(*ln));
		ln->ln_map = map;
		ln->ln_lanes = ls;
		ln->ln_conn.cn_lane = ln;
		ls->ls_made++;
	}
	return ls->ls_made;
}

/* A lane's life in one pass: takes the next step until none is left. */
static void store_pg_lane_main(void)
{
	struct store_pg_lanes *ls = NULL;
	struct store_pg_lane *ln;
	size_t i;
	int r;

	ln = store_pg_lane_starting;
	ls = ln->ln_lanes;
	ln->ln_fake = NULL;
	store_pg_fiber_finish(NULL, &ls->ls_main_bottom, &ls->ls_main_size);
	while (ls->ls_next < ls->ls_n) {
		i = ls->ls_next++;
		r = ls->ls_step(ls->ls_arg, i, &ln->ln_conn);
		if (r < 0) {
			ls->ls_doomed = 1;
		}
	}
	ln->ln_state = STORE_PG_LANE_DONE;
	store_pg_lane_leave(ls, ln, 1);
	/* Not resumed: the next pass makes its context again. */
}

/* A lane's context for a new pass: store_pg_lane_main on its own stack,
 * back to the writer's when it ends. */
static void store_pg_lane_context(struct store_pg_lanes *const ls, struct store_pg_lane *const ln)
{
	getcontext(&ln->ln_ctx);
	ln->ln_ctx.uc_stack.ss_sp = ln->ln_map + STORE_PG_LANE_GUARD;
	ln->ln_ctx.uc_stack.ss_size = STORE_PG_LANE_STACK;
	ln->ln_ctx.uc_link = &ls->ls_main;
	makecontext(&ln->ln_ctx, store_pg_lane_main, 0);
}

/* In a lane: hands the statement to the writer and waits for its result.
 * NULL when the pass is doomed (the lane is to unwind, nothing logged). */
static PGresult *store_pg_lane_wait(struct store_conn *cn, const char *sql, const char *pg_sql,
                                    struct store_pg_call *pc)
{
	struct store_pg_lane *ln = cn->cn_lane;
	struct store_pg_lanes *ls = ln->ln_lanes;
	PGresult *res;

	if (ls->ls_doomed) {
		ln->ln_unwinding = 1;
		return NULL;
	}
	store_pg_params_fill(pc->pc_fixed, pc->pc_n, &pc->pc_pp);
	ln->ln_sql = sql;
	ln->ln_pg_sql = pg_sql;
	ln->ln_call = pc;
	ln->ln_state = STORE_PG_LANE_WAITING;
	store_pg_lane_leave(ls, ln, 0);
	res = ln->ln_res;
	ln->ln_res = NULL;
	if (res == NULL || PQresultStatus(res) == PGRES_PIPELINE_ABORTED) {
		ln->ln_unwinding = 1;
		PQclear(res);
		return NULL;
	}
	return res;
}

/* Queues the waiting lane's statement, prepared in the same pipeline the
 * first time it is used on the connection. Returns 0, or -1 when it cannot
 * be pipelined (the pass is then doomed). */
static int store_pg_lane_send(struct store_pg_lanes *ls, struct store_pg_lane *ln)
{
	struct store_conn *w = ls->ls_writer;
	struct store_pg_params *pp = &ln->ln_call->pc_pp;
	size_t n = ln->ln_call->pc_n;
	struct store_pg_stmt *ps;
	size_t key_len;
	size_t k;
	char *key;

	ln->ln_prepared = NULL;
	key = store_pg_stmt_key(ln->ln_sql, pp->pp_types, n, &key_len);
	if (key == NULL) {
		return -1;
	}
	ps = store_pg_stmt_find(w, key, key_len);
	/* Another lane of this round may be preparing it already. */
	for (k = 0; ps == NULL && k < ls->ls_made; k++) {
		struct store_pg_stmt *q = ls->ls_lane[k].ln_prepared;

		if (&ls->ls_lane[k] != ln && q != NULL && q->ps_key_len == key_len &&
		    memcmp(q->ps_key, key, key_len) == 0) {
			ps = q;
		}
	}
	if (ps != NULL) {
		free(key);
	} else {
		/* A full cache (its unnamed statement) or a NULL the server
		 * cannot type (42P18) are the one-by-one path's to handle. */
		if (w->cn_n_stmts >= STORE_PG_STMT_CACHE_MAX) {
			free(key);
			return -1;
		}
		ps = store_pg_stmt_new(w, key, key_len);
		if (ps == NULL) {
			return -1;
		}
		if (!PQsendPrepare(w->cn_pg, ps->ps_name, ln->ln_pg_sql, (int)n, pp->pp_types)) {
			free(ps->ps_key);
			free(ps);
			return -1;
		}
		ln->ln_prepared = ps;
	}
	if (!PQsendQueryPrepared(w->cn_pg, ps->ps_name, (int)n, pp->pp_values, pp->pp_lengths,
	                         pp->pp_formats, 0)) {
		return -1;
	}
	return 0;
}

/* The next result of w's pipeline and the NULL that ends it. */
static PGresult *store_pg_lane_result(struct store_conn *w)
{
	PGresult *res = store_pg_result(w);
	PGresult *end;

	if (res != NULL && PQresultStatus(res) != PGRES_PIPELINE_SYNC) {
		end = store_pg_result(w);
		PQclear(end);
	}
	return res;
}

/* One round: the transaction's BEGIN when begin (its first round), every
 * waiting lane's statement, one sync, the results back to their lanes. A
 * statement that failed, or a round that could not be sent or read, dooms
 * the pass. Returns BEGIN's result when it failed (the caller clears it). */
static PGresult *store_pg_lanes_round_once(struct store_pg_lanes *ls, int begin)
{
	struct store_pg_defer *df;
	PGresult *begin_res = NULL;
	struct store_conn *w = ls->ls_writer;
	PGresult *res;
	int logged;
	int ok = 1;
	size_t k;

	const char *check_sql[STORE_PG_SCHEMA_STMTS];
	PGresult *check[STORE_PG_SCHEMA_STMTS] = {NULL};
	int checking = begin && w->cn_schema_check;

	if (begin) {
		ok = PQsendQueryParams(w->cn_pg, STORE_PG_BEGIN_WRITE, 0, NULL, NULL, NULL, NULL,
		                       0) == 1;
		ok = ok &&
		     (!w->cn_lock_cut || PQsendQueryParams(w->cn_pg, store_pg_lock_cut_sql(w), 0,
		                                           NULL, NULL, NULL, NULL, 0) == 1);
	}
	if (checking) {
		store_pg_schema_sql(w, check_sql);
		for (k = 0; k < STORE_PG_SCHEMA_STMTS && ok; k++) {
			ok = PQsendQueryParams(w->cn_pg, check_sql[k], 0, NULL, NULL, NULL, NULL,
			                       0) == 1;
		}
	}
	for (df = w->cn_defer; df != NULL && ok; df = df->df_next) {
		ok = PQsendQueryPrepared(w->cn_pg, df->df_name, df->df_n,
		                         (const char *const *)df->df_values, df->df_lengths,
		                         df->df_formats, 0) == 1;
	}
	for (k = 0; k < ls->ls_made && ok; k++) {
		struct store_pg_lane *ln = &ls->ls_lane[k];

		if (ln->ln_state == STORE_PG_LANE_WAITING) {
			ok = store_pg_lane_send(ls, ln) == 0;
			ln->ln_sent = ok;
		}
	}
	ok = ok && PQpipelineSync(w->cn_pg) == 1;
	w->cn_round_trips++;
	for (k = 0; ok && begin && k < (w->cn_lock_cut ? 2u : 1u); k++) {
		res = store_pg_lane_result(w);
		if (PQresultStatus(res) != PGRES_COMMAND_OK && begin_res == NULL) {
			ls->ls_doomed = 1;
			begin_res = res;
		} else {
			PQclear(res);
		}
	}
	for (k = 0; ok && checking && k < STORE_PG_SCHEMA_STMTS; k++) {
		check[k] = store_pg_lane_result(w);
		ok = check[k] != NULL;
	}
	if (ok && checking) {
		/* Checked once per transaction: not again if the round goes
		 * again on a new session (store_pg_lanes_round re-arms it). */
		if (begin_res == NULL && store_pg_schema_results(w, check) < 0) {
			/* The server skips the rest: the pass is undone. */
			ls->ls_doomed = 1;
		}
	}
	for (k = 0; k < STORE_PG_SCHEMA_STMTS; k++) {
		PQclear(check[k]);
	}
	/* The writes held back, before the lanes' statements of this round. */
	logged = ls->ls_doomed;
	for (df = w->cn_defer; df != NULL && ok; df = df->df_next) {
		res = store_pg_lane_result(w);
		ok = res != NULL;
		if (ok && store_pg_defer_check(w, df, res, &logged) < 0) {
			ls->ls_doomed = 1;
		}
		PQclear(res);
	}
	store_pg_defer_clear(w);
	for (k = 0; k < ls->ls_made; k++) {
		struct store_pg_lane *ln = &ls->ls_lane[k];
		struct store_pg_stmt *ps = ln->ln_prepared;

		if (ln->ln_state != STORE_PG_LANE_WAITING) {
			continue;
		}
		ln->ln_state = STORE_PG_LANE_READY;
		ln->ln_prepared = NULL;
		if (!ok || !ln->ln_sent) {
			/* Nothing of this round is read: the pass fails, and
			 * the writer's connection is reset. */
			if (ps != NULL) {
				free(ps->ps_key);
				free(ps);
			}
			continue;
		}
		ln->ln_sent = 0;
		if (ps != NULL) {
			res = store_pg_lane_result(w);
			if (PQresultStatus(res) == PGRES_COMMAND_OK) {
				store_pg_stmt_add(w, ps);
			} else {
				free(ps->ps_key);
				free(ps);
				ls->ls_doomed = 1;
			}
			PQclear(res);
		}
		res = store_pg_lane_result(w);
		if (res == NULL || (PQresultStatus(res) != PGRES_COMMAND_OK &&
		                    PQresultStatus(res) != PGRES_TUPLES_OK)) {
			ls->ls_doomed = 1;
		}
		ln->ln_res = res;
	}
	if (!ok) {
		ls->ls_doomed = 1;
		ls->ls_broken = 1;
		return begin_res;
	}
	res = store_pg_result(w);
	if (PQresultStatus(res) != PGRES_PIPELINE_SYNC) {
		ls->ls_doomed = 1;
		ls->ls_broken = 1;
	}
	PQclear(res);
	return begin_res;
}

/* A round of the lanes. The transaction's first round carries its BEGIN;
 * when the server had closed the connection while it was idle (a restart,
 * pg_terminate_backend), nothing of the transaction was on it and no lane
 * has seen a result yet, so the round goes again once on a new session. */
static void store_pg_lanes_round(struct store_pg_lanes *ls)
{
	struct store_conn *w = ls->ls_writer;
	int begin = w->cn_begin_pending;
	int check = begin && w->cn_schema_check;
	PGresult *begin_res;
	size_t k;
	int ok;

	w->cn_begin_pending = 0;
	for (k = 0; k < ls->ls_made; k++) {
		ls->ls_lane[k].ln_in_round = ls->ls_lane[k].ln_state == STORE_PG_LANE_WAITING;
	}
	begin_res = store_pg_lanes_round_once(ls, begin);
	w->cn_schema_check = 0;
	if (!begin || PQstatus(w->cn_pg) == CONNECTION_OK) {
		if (begin_res != NULL) {
			store_pg_fail(w, begin_res, STORE_PG_BEGIN_WRITE);
			PQclear(begin_res);
		}
		return;
	}
	PQclear(begin_res);
	for (k = 0; k < ls->ls_made; k++) {
		struct store_pg_lane *ln = &ls->ls_lane[k];

		if (ln->ln_in_round) {
			PQclear(ln->ln_res);
			ln->ln_res = NULL;
			ln->ln_state = STORE_PG_LANE_WAITING;
		}
	}
	ls->ls_doomed = 0;
	ls->ls_broken = 0;
	ok = store_pg_conn_revive(w, w->cn_timeout_ms) == 0 && PQenterPipelineMode(w->cn_pg) == 1;
	for (k = 0; k < ls->ls_made; k++) {
		struct store_pg_lane *ln = &ls->ls_lane[k];

		ln->ln_conn.cn_pg = w->cn_pg;
		if (!ok && ln->ln_in_round) {
			ln->ln_state = STORE_PG_LANE_READY;
		}
	}
	if (!ok) {
		ls->ls_doomed = 1;
		ls->ls_broken = 1;
		return;
	}
	w->cn_schema_check = check;
	begin_res = store_pg_lanes_round_once(ls, 1);
	w->cn_schema_check = 0;
	if (begin_res != NULL) {
		store_pg_fail(w, begin_res, STORE_PG_BEGIN_WRITE);
		PQclear(begin_res);
	}
}

static enum store_tx_state
store_pg_lanes_run(struct store_conn *cn, size_t n, int hold,
                   int (*step)(void *arg, size_t i, struct store_conn *lane), void *arg)
{
	struct store_pg_lanes *ls = cn->cn_lanes;
	size_t lanes;
	size_t waiting;
	size_t k;

	if (ls == NULL) {
		ls = calloc(1, sizeof(*ls));
		if (ls == NULL) {
			log_err("store: out of memory");
			return STORE_TXS_ENDED;
		}
		ls->ls_writer = cn;
		cn->cn_lanes = ls;
	}
	lanes = store_pg_lanes_make(ls, n);
	if (lanes == 0 || PQenterPipelineMode(cn->cn_pg) != 1) {
		return STORE_TXS_ENDED;
	}
	lanes = lanes < n ? lanes : n;
	ls->ls_n = n;
	ls->ls_next = 0;
	ls->ls_step = step;
	ls->ls_arg = arg;
	ls->ls_doomed = 0;
	ls->ls_broken = 0;
	for (k = 0; k < ls->ls_made; k++) {
		struct store_pg_lane *ln = &ls->ls_lane[k];

		ln->ln_conn.cn_pg = cn->cn_pg;
		ln->ln_unwinding = 0;
		ln->ln_state = k < lanes ? STORE_PG_LANE_START : STORE_PG_LANE_DONE;
		if (k < lanes) {
			store_pg_lane_context(ls, ln);
		}
	}
	for (;;) {
		waiting = 0;
		for (k = 0; k < lanes; k++) {
			struct store_pg_lane *ln = &ls->ls_lane[k];

			if (ln->ln_state == STORE_PG_LANE_START) {
				store_pg_lane_starting = ln;
				store_pg_lane_enter(ls, ln);
			} else if (ln->ln_state == STORE_PG_LANE_READY) {
				store_pg_lane_enter(ls, ln);
			}
			waiting += ln->ln_state == STORE_PG_LANE_WAITING;
		}
		if (waiting == 0) {
			break;
		}
		if (ls->ls_doomed) {
			/* No round trip: each waiting lane learns its statement
			 * failed, and unwinds. */
			for (k = 0; k < lanes; k++) {
				if (ls->ls_lane[k].ln_state == STORE_PG_LANE_WAITING) {
					ls->ls_lane[k].ln_state = STORE_PG_LANE_READY;
				}
			}
			continue;
		}
		store_pg_lanes_round(ls);
	}
	if (!hold && !ls->ls_doomed && cn->cn_defer != NULL) {
		/* What follows the lanes (a plain write in its savepoint) must
		 * not meet a held write's failure: they go now, in a round of
		 * their own, and doom the pass if one fails. */
		store_pg_lanes_round(ls);
	}
	if (PQstatus(cn->cn_pg) != CONNECTION_OK) {
		return STORE_TXS_LOST;
	}
	if (ls->ls_broken || PQexitPipelineMode(cn->cn_pg) != 1) {
		char msg[STORE_PG_MSG_MAX];

		/* A protocol state nobody can trust: a new session. */
		log_warn("store: a pipelined round failed (%s); reconnecting",
		         store_pg_conn_message(cn, msg, sizeof(msg)));
		store_pg_conn_revive(cn, cn->cn_timeout_ms);
		return STORE_TXS_LOST;
	}
	if (cn->cn_retry) {
		return STORE_TXS_RETRY;
	}
	return ls->ls_doomed ? STORE_TXS_ENDED : STORE_TXS_OPEN;
}

/* A copy of what libpq sends for the n parameters of pp. Returns 0 or -1. */
static int store_pg_defer_fill(struct store_pg_defer *df, const struct store_pg_params *pp,
                               size_t n)
{
	size_t i;

	df->df_values = calloc(n > 0 ? n : 1, sizeof(*df->df_values));
	df->df_lengths = calloc(n > 0 ? n : 1, sizeof(*df->df_lengths));
	df->df_formats = calloc(n > 0 ? n : 1, sizeof(*df->df_formats));
	if (df->df_values == NULL || df->df_lengths == NULL || df->df_formats == NULL) {
		return -1;
	}
	df->df_n = (int)n;
	for (i = 0; i < n; i++) {
		const char *v = pp->pp_values[i];
		size_t len = pp->pp_formats[i] ? (size_t)pp->pp_lengths[i]
		             : v != NULL       ? strlen(v) + 1
		                               : 0;

		df->df_lengths[i] = pp->pp_lengths[i];
		df->df_formats[i] = pp->pp_formats[i];
		if (v == NULL) {
			continue;
		}
		df->df_values[i] = malloc(len > 0 ? len : 1);
		if (df->df_values[i] == NULL) {
			return -1;
		}
		memcpy(df->df_values[i], v, len);
	}
	return 0;
}

/* en_exec_one: with ret_changes, sql as one statement that fails unless
 * it changed one row; without, sql itself (its result is not read). On a
 * lane, once that statement is prepared on the writer's connection, it is
 * held back (the lane goes on without waiting) and sent at the head of the
 * lanes' next round, ahead of the lane's next statement, or with the
 * writer's next statement after the lanes, the batch's COMMIT, in the same
 * round: a handler's writes and the claim's final write cost no round trip
 * of their own. Outside the lanes, and a lane's first use of it, it runs
 * at once. */
static int store_pg_exec_one(struct store_conn *cn, const char *sql,
                             const struct store_value *params, size_t n_params,
                             int64_t *ret_changes)
{
	struct store_conn *w = store_pg_home(cn);
	struct store_pg_defer *df = NULL;
	const struct store_pg_stmt *ps;
	struct store_pg_call pc;
	char *one_sql = NULL;
	char *pg_sql = NULL;
	char *key = NULL;
	size_t key_len = 0;
	size_t n = 0;
	size_t len;
	int rc = -1;

	memset(&pc, 0, sizeof(pc));
	if (cn->cn_lane == NULL) {
		return store_pg_run(cn, sql, params, n_params, NULL, NULL, ret_changes);
	}
	len = strlen(STORE_PG_ONE_HEAD) + strlen(sql) + strlen(STORE_PG_ONE_TAIL) + 1;
	one_sql = malloc(len);
	if (one_sql == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	if (ret_changes != NULL) {
		snprintf(one_sql, len, "%s%s%s", STORE_PG_ONE_HEAD, sql, STORE_PG_ONE_TAIL);
	} else {
		snprintf(one_sql, len, "%s", sql);
	}
	pg_sql = store_pg_rewrite(one_sql, &n);
	if (pg_sql == NULL || n != n_params || store_pg_call_init(&pc, params, n_params) < 0) {
		if (pg_sql != NULL && n != n_params) {
			log_err("store: %.100s: %zu parameters expected, %zu given", sql, n,
			        n_params);
		}
		goto out;
	}
	store_pg_params_fill(pc.pc_fixed, n, &pc.pc_pp);
	key = store_pg_stmt_key(one_sql, pc.pc_pp.pp_types, n, &key_len);
	if (key == NULL) {
		goto out;
	}
	ps = cn->cn_lane->ln_lanes->ls_doomed ? NULL : store_pg_stmt_find(w, key, key_len);
	if (ps == NULL) {
		/* Prepared in the lanes' next round, and waited for. */
		rc = store_pg_run(cn, one_sql, params, n_params, NULL, NULL, ret_changes);
		goto out;
	}
	df = calloc(1, sizeof(*df));
	if (df == NULL || (df->df_sql = strdup(sql)) == NULL ||
	    store_pg_defer_fill(df, &pc.pc_pp, n) < 0) {
		log_err("store: out of memory");
		goto out;
	}
	snprintf(df->df_name, sizeof(df->df_name), "%s", ps->ps_name);
	df->df_one = ret_changes != NULL;
	*w->cn_defer_tail = df;
	w->cn_defer_tail = &df->df_next;
	df = NULL;
	if (ret_changes != NULL) {
		*ret_changes = 1;
	}
	rc = 0;
out:
	store_pg_defer_free(df);
	free(key);
	store_pg_call_finish(&pc);
	free(pg_sql);
	free(one_sql);
	return rc;
}

/* ---- migrations ---- */

/* The schema version recorded in idemhook_schema (0 without the table).
 * Returns 0 or -1 (logged unless quiet: the health probe's). */
static int store_pg_version_q(struct store_conn *cn, int *ret, int quiet)
{
	PGresult *res;
	const char *state;

	res = store_pg_exec_sql(cn, "SELECT COALESCE(max(version), 0) FROM idemhook_schema");
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		*ret = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		return 0;
	}
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (state != NULL && strcmp(state, "42P01") == 0) {
		PQclear(res);
		*ret = 0;
		return 0;
	}
	if (!quiet) {
		store_pg_fail(cn, res, "read the schema version");
	}
	PQclear(res);
	return -1;
}

static int store_pg_version(struct store_conn *cn, int *ret)
{
	return store_pg_version_q(cn, ret, 0);
}

/* Whether the failure just met on cn may pass on a new try: the connection
 * lost (SQLSTATE class 08, or a server shutting down or starting: 57P01 to
 * 57P03), a lock or statement timeout, a serialization failure or a
 * deadlock. What it did not commit is rolled back whole. */
static int store_pg_failed_for_now(const struct store_conn *cn)
{
	const char *state = cn->cn_sqlstate;

	return PQstatus(cn->cn_pg) != CONNECTION_OK || cn->cn_timed_out ||
	       store_pg_sqlstate_retry(state) || strncmp(state, "08", 2) == 0 ||
	       strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 ||
	       strcmp(state, "57P03") == 0;
}

/* Applies one migration in its own transaction with its version row. The
 * version is the primary key: a second receiver migrating at the same time
 * (no advisory locks on CockroachDB) fails to commit and finds it done. */
static int store_pg_migrate_one(struct store_conn *cn, const struct migration *mg, int *ret_applied)
{
	char sql[160];
	int version;

	*ret_applied = 0;
	if (store_pg_simple(cn, "BEGIN", NULL) < 0) {
		return -1;
	}
	if (store_pg_version(cn, &version) < 0) {
		goto fail;
	}
	if (version >= mg->mg_version) {
		return store_pg_simple(cn, "COMMIT", NULL);
	}
	if (store_pg_simple(cn, mg->mg_sql, mg->mg_name) < 0) {
		goto fail;
	}
	snprintf(sql, sizeof(sql),
	         "INSERT INTO idemhook_schema (version, name, applied_at) VALUES (%d, '%s', "
	         "(extract(epoch from now()) * 1000)::bigint)",
	         mg->mg_version, mg->mg_name);
	if (store_pg_simple(cn, sql, mg->mg_name) < 0 || store_pg_simple(cn, "COMMIT", NULL) < 0) {
		goto fail;
	}
	*ret_applied = 1;
	return 0;
fail:
	if (PQtransactionStatus(cn->cn_pg) != PQTRANS_IDLE) {
		PGresult *res = store_pg_exec_sql(cn, "ROLLBACK");

		PQclear(res);
	}
	return -1;
}

/* Whether the migration's session has no lock_timeout of the operator's
 * (PGOPTIONS, options= in the conninfo, ALTER ROLE or DATABASE ... SET,
 * postgresql.conf): then it gets STORE_PG_MIGRATE_LOCK_TIMEOUT_MS, and
 * returns 1; 0 when it keeps the operator's (or the server cannot say). */
static int store_pg_migrate_lock_timeout(struct store_conn *cn)
{
	char sql[64];
	PGresult *res;
	int ours;

	res = store_pg_exec_sql(cn, "SELECT source FROM pg_settings WHERE name = 'lock_timeout'");
	ours = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	       strcmp(PQgetvalue(res, 0, 0), "default") == 0;
	PQclear(res);
	if (!ours) {
		return 0;
	}
	snprintf(sql, sizeof(sql), "SET lock_timeout = %u", STORE_PG_MIGRATE_LOCK_TIMEOUT_MS);
	return store_pg_simple(cn, sql, "set the migration's lock_timeout") == 0;
}

/* Applies one migration, again after a pause when it met the lock_timeout
 * the store set (own_timeout): it is rolled back whole, and what queued
 * behind its lock request (callbacks of the other receivers) runs
 * meanwhile. */
static int store_pg_migrate_tries(struct store_conn *cn, const struct migration *mg,
                                  int own_timeout, int *ret_applied)
{
	const struct timespec pause = {.tv_sec = STORE_PG_MIGRATE_LOCK_PAUSE_MS / 1000,
	                               .tv_nsec = STORE_PG_MIGRATE_LOCK_PAUSE_MS % 1000 * 1000000L};
	int try;

	for (try = 1;; try++) {
		if (store_pg_migrate_one(cn, mg, ret_applied) == 0) {
			return 0;
		}
		if (!own_timeout || !cn->cn_timed_out || PQstatus(cn->cn_pg) != CONNECTION_OK ||
		    try >= STORE_PG_MIGRATE_LOCK_TRIES) {
			if (own_timeout && cn->cn_timed_out) {
				log_err("store: %s: another session held a lock it needs through "
				        "%d "
				        "tries of %u ms each (the lock_timeout idemhook sets on a "
				        "migration); end that session's transaction, or set a "
				        "lock_timeout of your own (PGOPTIONS='-c lock_timeout=0' "
				        "waits "
				        "for good)",
				        mg->mg_name, try, STORE_PG_MIGRATE_LOCK_TIMEOUT_MS);
			}
			return -1;
		}
		log_warn("store: %s: another session holds a lock it needs; trying again in %u ms "
		         "(try %d of %d)",
		         mg->mg_name, STORE_PG_MIGRATE_LOCK_PAUSE_MS, try + 1,
		         STORE_PG_MIGRATE_LOCK_TRIES);
		nanosleep(&pause, NULL);
	}
}

/* Applies the pending migrations under the migration lock; *ret_from is
 * the version found once the lock was taken (a receiver that waited for
 * another's migration finds it done), *ret_version the version after. */
static int store_pg_migrate(struct store_conn *cn, int *ret_from, int *ret_version)
{
	char sql[96];
	int applied;
	int locked = 0;
	int own_timeout = 0;
	int lock_wait_free;
	size_t i;
	int rc = -1;

	if (migrations_pg_count != migrations_count ||
	    migrations_pg[migrations_pg_count - 1].mg_version != store_schema_version()) {
		log_err("store: this build's postgresql migrations do not match its sqlite ones");
		return -1;
	}
	/* Receivers starting together migrate once: the others wait here,
	 * for as long as that migration takes (its own bounds end it), and
	 * not for a lock_timeout of the operator's (PGOPTIONS, ALTER ROLE
	 * ... SET), which is for other sessions' transactions: the wait
	 * holds up nothing but the receivers that wait with it. RESET
	 * gives the session its own setting back. */
	lock_wait_free = store_pg_simple(cn, "SET lock_timeout = 0", NULL) == 0;
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%" PRId64 ")", STORE_PG_MIGRATE_LOCK);
	rc = store_pg_simple(cn, sql, "take the migration lock");
	if (lock_wait_free && PQstatus(cn->cn_pg) == CONNECTION_OK &&
	    PQtransactionStatus(cn->cn_pg) == PQTRANS_IDLE) {
		store_pg_simple(cn, "RESET lock_timeout", NULL);
	}
	if (rc < 0) {
		/* The connection went (or another migration held it past a
		 * lock_timeout that could not be set aside): not a server
		 * without advisory locks. */
		if (store_pg_failed_for_now(cn)) {
			goto out;
		}
		log_warn("store: no advisory locks on this server; migrating under the version key "
		         "only");
	} else {
		locked = 1;
	}
	rc = -1;
	/* Only now: waiting for another receiver's migration (the lock
	 * above) is no lock to give up on. */
	own_timeout = store_pg_migrate_lock_timeout(cn);
	if (store_pg_simple(
	            cn,
	            "CREATE TABLE IF NOT EXISTS idemhook_schema (version BIGINT PRIMARY KEY, "
	            "name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
	            "create idemhook_schema") < 0 ||
	    store_pg_version(cn, ret_from) < 0) {
		goto out;
	}
	for (i = 0; i < migrations_pg_count; i++) {
		const struct migration *mg = &migrations_pg[i];
		int version;

		if (store_pg_migrate_tries(cn, mg, own_timeout, &applied) < 0) {
			/* Another receiver may have applied it meanwhile. */
			if (PQstatus(cn->cn_pg) != CONNECTION_OK ||
			    store_pg_version(cn, &version) < 0 || version < mg->mg_version) {
				log_err("store: migration %s failed", mg->mg_name);
				goto out;
			}
			continue;
		}
		if (applied) {
			log_info("store: applied migration %s (postgresql)", mg->mg_name);
		}
	}
	rc = store_pg_version(cn, ret_version);
out:
	if (rc < 0 && store_pg_failed_for_now(cn)) {
		/* Each migration commits whole or not at all: the version the
		 * server holds now is the one reached, read again on a new
		 * session when this one is gone (-1 when none can be had). */
		store_open_busy();
		*ret_version = -1;
		if (PQstatus(cn->cn_pg) != CONNECTION_OK) {
			locked = 0; /* went with the session */
		}
		if (store_pg_conn_revive(cn, cn->cn_timeout_ms) < 0 ||
		    store_pg_version_q(cn, ret_version, 1) < 0) {
			*ret_version = -1;
		}
	}
	if (own_timeout && PQstatus(cn->cn_pg) == CONNECTION_OK) {
		/* the connection goes on as the writer's */
		store_pg_simple(cn, "RESET lock_timeout", NULL);
	}
	if (locked) {
		snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%" PRId64 ")",
		         STORE_PG_MIGRATE_LOCK);
		store_pg_simple(cn, sql, "release the migration lock");
	}
	return rc;
}

/* ---- readers ---- */

static struct store_conn *store_pg_reader_get(struct store_db *db, int wait)
{
	struct store_conn *cn = pthread_getspecific(db->db_key);

	if (cn != NULL) {
		cn->cn_depth++;
		return cn;
	}
	pthread_mutex_lock(&db->db_mutex);
	while (db->db_free == NULL && db->db_pool_open >= db->db_pool_size) {
		if (!wait) {
			pthread_mutex_unlock(&db->db_mutex);
			return NULL;
		}
		pthread_cond_wait(&db->db_cond, &db->db_mutex);
	}
	if (db->db_free != NULL) {
		cn = db->db_free;
		db->db_free = cn->cn_next;
		pthread_mutex_unlock(&db->db_mutex);
		if (store_pg_conn_revive(cn, db->db_timeout_ms) < 0) {
			pthread_mutex_lock(&db->db_mutex);
			cn->cn_next = db->db_free;
			db->db_free = cn;
			pthread_cond_signal(&db->db_cond);
			pthread_mutex_unlock(&db->db_mutex);
			return NULL;
		}
	} else {
		unsigned slot = db->db_pool_open++;

		pthread_mutex_unlock(&db->db_mutex);
		cn = store_pg_conn_open(db, "idemhook reader", db->db_timeout_ms);
		pthread_mutex_lock(&db->db_mutex);
		if (cn == NULL) {
			db->db_pool_open--;
			pthread_cond_signal(&db->db_cond);
			pthread_mutex_unlock(&db->db_mutex);
			return NULL;
		}
		cn->cn_reader = 1;
		db->db_all[slot] = cn;
		pthread_mutex_unlock(&db->db_mutex);
	}
	cn->cn_next = NULL;
	cn->cn_depth = 1;
	pthread_setspecific(db->db_key, cn);
	return cn;
}

static void store_pg_reader_put(struct store_db *db, struct store_conn *cn)
{
	if (cn == NULL || --cn->cn_depth > 0) {
		return;
	}
	pthread_setspecific(db->db_key, NULL);
	if (store_pg_in_tx(cn)) {
		store_pg_simple(cn, "ROLLBACK", NULL);
	}
	pthread_mutex_lock(&db->db_mutex);
	cn->cn_next = db->db_free;
	db->db_free = cn;
	pthread_cond_signal(&db->db_cond);
	pthread_mutex_unlock(&db->db_mutex);
}

/* ---- the engine ---- */

static struct store_conn *store_pg_writer(struct store_db *db)
{
	return db->db_writer;
}

static int store_pg_writer_ready(struct store_db *db)
{
	if (db->db_writer == NULL) {
		return -1;
	}
	return store_pg_conn_revive(db->db_writer, db->db_timeout_ms);
}

/* One more writer connection, "idemhook writer 2" and on in
 * pg_stat_activity (the first is "idemhook writer"). */
static struct store_conn *store_pg_writer_add(struct store_db *db)
{
	char *role;
	struct store_conn *cn;

	if (db->db_n_more >= STORE_PG_WRITERS_MAX) {
		log_err("store: too many postgresql writer connections");
		return NULL;
	}
	role = db->db_more_role[db->db_n_more];
	snprintf(role, sizeof(db->db_more_role[0]), "idemhook writer %u", db->db_n_more + 2);
	cn = store_pg_conn_open(db, role, db->db_timeout_ms);
	if (cn == NULL) {
		return NULL;
	}
	db->db_more[db->db_n_more++] = cn;
	return cn;
}

static int store_pg_writer_conn_ready(struct store_db *db, struct store_conn *cn)
{
	return cn != NULL ? store_pg_conn_revive(cn, db->db_timeout_ms) : -1;
}

static uint64_t store_pg_round_trips(struct store_conn *cn)
{
	return cn->cn_round_trips;
}

static int store_pg_after_batch(struct store_db *db)
{
	(void)db;
	return 0;
}

static uint64_t store_pg_wal_written(struct store_db *db)
{
	(void)db;
	return 0;
}

/* The schema version read on the probe's connection, waiting at most
 * wait_ms for the server's reply: libpq's blocking calls would wait for
 * a hung server (stopped, or behind a network black hole) for good.
 * Returns 0, -1 when the server answered with an error or the connection
 * broke, -2 when no reply came in time (the connection is then mid-query:
 * the caller closes it). */
static int store_pg_probe_version(struct store_conn *cn, unsigned wait_ms, int *ret)
{
	int64_t deadline = store_pg_mono_ms() + wait_ms;
	PGresult *res;
	int rc = -1;
	int got = 0;

	if (PQsendQuery(cn->cn_pg, STORE_PG_SCHEMA_READ) != 1) {
		return -1;
	}
	cn->cn_round_trips++;
	for (;;) {
		int64_t left = deadline - store_pg_mono_ms();
		int w = store_pg_wait(cn, left > 0 ? (unsigned)left : 0, 0);

		if (w < 0) {
			return w;
		}
		/* Not busy: PQgetResult does not wait. */
		res = PQgetResult(cn->cn_pg);
		if (res == NULL) {
			return got ? rc : -1;
		}
		if (!got) {
			const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

			got = 1;
			if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
				*ret = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
				rc = 0;
			} else if (state != NULL && strcmp(state, "42P01") == 0) {
				*ret = 0; /* no idemhook_schema yet */
				rc = 0;
			}
		}
		PQclear(res);
	}
}

static void store_pg_probe(struct store_db *db, const int64_t *busy_since, const int64_t *ok_at,
                           struct store_health *h)
{
	int newest = store_schema_version();
	int version = 0;
	int rc;

	(void)busy_since;
	(void)ok_at;
	if (db->db_probe != NULL && PQstatus(db->db_probe->cn_pg) != CONNECTION_OK) {
		store_pg_conn_close(db->db_probe);
		db->db_probe = NULL;
	}
	if (db->db_probe == NULL) {
		/* Quiet too: a probe that cannot connect says so in its verdict.
		 * A connect of its own bound, whatever the conninfo says: the
		 * verdict must come within seconds. */
		db->db_probe = store_pg_conn_open_t(db, "idemhook probe", 1000, 1, LOG_LEVEL_DEBUG,
		                                    STORE_PG_PROBE_CONNECT_S);
	}
	if (db->db_probe == NULL) {
		store_health_fail(h, __atomic_load_n(&db->db_read_only, __ATOMIC_RELAXED)
		                             ? STORE_PG_READ_ONLY
		                             : "postgresql cannot be reached");
		return;
	}

	rc = store_pg_probe_version(db->db_probe, STORE_PG_PROBE_WAIT_MS, &version);
	if (rc == -2) {
		/* A cancel request to a hung server would hang too: the
		 * connection goes, and the next probe makes a new one. */
		store_pg_conn_close(db->db_probe);
		db->db_probe = NULL;
		store_health_fail(h, "postgresql does not answer (no reply within %u ms)",
		                  STORE_PG_PROBE_WAIT_MS);
		return;
	}
	if (rc < 0) {
		store_health_fail(h, "the schema version cannot be read");
		return;
	}
	h->sh_schema = version;
	if (version < newest) {
		store_health_fail(h,
		                  "migrations pending: database schema %d, this idemhook needs %d",
		                  version, newest);
	} else if (version > newest) {
		store_health_fail(h, "database schema %d is newer than this idemhook (%d)", version,
		                  newest);
	}
}

static int store_pg_size_tx(struct store_tx *tx, void *arg)
{
	struct store_row row;
	int r;

	r = store_query(tx, "SELECT pg_database_size(current_database())", NULL, 0, &row);
	if (r <= 0) {
		return -1;
	}
	*(int64_t *)arg = store_row_int(&row, 0);
	store_row_finish(&row);
	return 0;
}

/* The database's size; no WAL or free pages of ours to speak of. */
static int store_pg_file_stats(struct store *st, struct store_db *db, struct store_file_stats *ret)
{
	int64_t size = 0;

	(void)db;
	if (store_read(st, 0, store_pg_size_tx, &size) < 0) {
		return -1;
	}
	memset(ret, 0, sizeof(*ret));
	ret->sf_db_bytes = size;
	return 0;
}

/* The server's autovacuum gives space back; nothing to do here. */
static int store_pg_reclaim(struct store *st, int64_t max_pages, int64_t *ret_pages)
{
	(void)st;
	(void)max_pages;
	*ret_pages = 0;
	return 0;
}

static int store_pg_checkpoint(struct store_db *db)
{
	(void)db;
	return 0;
}

static int store_pg_vacuum(struct store_db *db)
{
	(void)db;
	return 0;
}

#define STORE_PG_IDENTITIES_MAX 64 /* identity columns store_pg_after_copy moves */
#define STORE_PG_IDENT_MAX 64      /* bytes of a table or column name, NUL included */

/* The identity columns of the schema, as the catalogue lists them. */
struct store_pg_identities {
	char pi_table[STORE_PG_IDENTITIES_MAX][STORE_PG_IDENT_MAX];
	char pi_column[STORE_PG_IDENTITIES_MAX][STORE_PG_IDENT_MAX];
	size_t pi_n;
};

static int store_pg_identity_row(void *arg, const struct store_row *row)
{
	struct store_pg_identities *pi = arg;
	const char *table = store_row_text(row, 0);
	const char *column = store_row_text(row, 1);

	if (table == NULL || column == NULL || pi->pi_n >= STORE_PG_IDENTITIES_MAX ||
	    strlen(table) >= STORE_PG_IDENT_MAX || strlen(column) >= STORE_PG_IDENT_MAX ||
	    strchr(table, '"') != NULL || strchr(column, '"') != NULL) {
		log_err("store: store copy cannot move the identity column %s.%s",
		        table != NULL ? table : "?", column != NULL ? column : "?");
		return -1;
	}
	snprintf(pi->pi_table[pi->pi_n], STORE_PG_IDENT_MAX, "%s", table);
	snprintf(pi->pi_column[pi->pi_n], STORE_PG_IDENT_MAX, "%s", column);
	pi->pi_n++;
	return 0;
}

/* Every identity column of the schema (the catalogue's list, so a table a
 * later migration adds is not forgotten), moved past the largest value
 * its table holds, and never back: after --replace, the ids the target
 * gave out before (quoted in the console's URLs, audit rows, an
 * operator's notes) are not given to other rows. Runs in the copy's own
 * transaction. */
static int store_pg_after_copy(struct store_tx *tx)
{
	struct store_pg_identities *pi;
	char sql[1024];
	size_t i;
	int rc = -1;

	pi = calloc(1, sizeof(*pi));
	if (pi == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	if (store_query_each(tx,
	                     "SELECT table_name, column_name FROM information_schema.columns "
	                     "WHERE table_schema = current_schema() AND is_identity = 'YES' "
	                     "ORDER BY table_name",
	                     NULL, 0, store_pg_identity_row, pi) < 0) {
		goto out;
	}
	for (i = 0; i < pi->pi_n; i++) {
		/* pg_sequence_last_value: NULL before the first nextval. */
		snprintf(sql, sizeof(sql),
		         "SELECT setval(s, GREATEST(COALESCE((SELECT max(\"%s\") FROM \"%s\"), 0) "
		         "+ 1, "
		         "COALESCE(pg_sequence_last_value(CAST(s AS regclass)) + 1, 1)), false) "
		         "FROM (SELECT pg_get_serial_sequence('\"%s\"', '%s') AS s) AS q",
		         pi->pi_column[i], pi->pi_table[i], pi->pi_table[i], pi->pi_column[i]);
		if (store_exec(tx, sql, NULL, 0, NULL) < 0) {
			goto out;
		}
	}
	rc = 0;
out:
	free(pi);
	return rc;
}

/* A lock name as a 64-bit advisory lock key (FNV-1a), in a space of its own. */
static int64_t store_pg_lock_key(const char *name)
{
	uint64_t h = UINT64_C(14695981039346656037);
	const char *p;

	for (p = "idemhook:"; *p != '\0'; p++) {
		h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
	}
	for (p = name; *p != '\0'; p++) {
		h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
	}
	return (int64_t)h;
}

static int store_pg_try_lock(struct store_db *db, const char *name)
{
	struct store_value p = store_int(store_pg_lock_key(name));
	struct store_tx tx = {.tx_engine = en};
	struct store_row row;
	int r = -1;

	pthread_mutex_lock(&db->db_lock_mutex);
	if (db->db_lock_conn == NULL) {
		db->db_lock_conn = store_pg_conn_open(db, "idemhook locks", db->db_timeout_ms);
	} else if (store_pg_conn_revive(db->db_lock_conn, db->db_timeout_ms) < 0) {
		goto out;
	}
	if (db->db_lock_conn == NULL) {
		goto out;
	}
	tx.tx_conn = db->db_lock_conn;
	/* A session lock: held until unlocked, or until this connection dies
	 * with its receiver, when another receiver may take it. */
	r = store_query(&tx, "SELECT pg_try_advisory_lock(?)", &p, 1, &row);
	if (r > 0) {
		r = store_row_int(&row, 0) != 0;
		store_row_finish(&row);
	} else {
		r = -1;
	}
out:
	pthread_mutex_unlock(&db->db_lock_mutex);
	return r;
}

static void store_pg_unlock(struct store_db *db, const char *name)
{
	struct store_value p = store_int(store_pg_lock_key(name));
	struct store_tx tx = {.tx_engine = en};

	pthread_mutex_lock(&db->db_lock_mutex);
	if (db->db_lock_conn != NULL && PQstatus(db->db_lock_conn->cn_pg) == CONNECTION_OK) {
		tx.tx_conn = db->db_lock_conn;
		store_exec(&tx, "SELECT pg_advisory_unlock(?)", &p, 1, NULL);
	}
	pthread_mutex_unlock(&db->db_lock_mutex);
}

static void store_pg_close(struct store_db *db)
{
	unsigned i;

	if (db == NULL) {
		return;
	}
	for (i = 0; db->db_all != NULL && i < db->db_pool_size; i++) {
		store_pg_conn_close(db->db_all[i]);
	}
	free(db->db_all);
	store_pg_conn_close(db->db_writer);
	for (i = 0; i < db->db_n_more; i++) {
		store_pg_conn_close(db->db_more[i]);
	}
	store_pg_conn_close(db->db_lock_conn);
	store_pg_conn_close(db->db_probe);
	if (db->db_key_made) {
		pthread_key_delete(db->db_key);
	}
	pthread_mutex_destroy(&db->db_mutex);
	pthread_cond_destroy(&db->db_cond);
	pthread_mutex_destroy(&db->db_lock_mutex);
	pthread_mutex_destroy(&db->db_backoff.bo_mutex);
	free(db->db_conninfo);
	free(db->db_app_name);
	free(db);
}

/* A provider is acknowledged after COMMIT returned: with synchronous_commit
 * off (or only local, with a standby to fail over to) that COMMIT may be
 * lost with the server, and the payment with it. Says so, once. */
static void store_pg_check_durability(struct store_conn *cn)
{
	PGresult *res = store_pg_exec_sql(cn, "SHOW synchronous_commit");

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		const char *v = PQgetvalue(res, 0, 0);

		if (strcmp(v, "off") == 0 || strcmp(v, "local") == 0) {
			log_warn("store: postgresql synchronous_commit = %s: a callback "
			         "acknowledged "
			         "just before a server crash (or failover) may be lost",
			         v);
		}
	}
	PQclear(res);
}

/* Whether the server has advisory locks (CockroachDB has none): tried
 * without waiting, outside any transaction (a transaction-level lock taken
 * so ends with its statement). Sets db_no_advisory. */
static void store_pg_check_advisory(struct store_db *db, struct store_conn *cn)
{
	char sql[96];
	PGresult *res;

	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_xact_lock_shared(%" PRId64 ")",
	         STORE_PG_MIGRATE_LOCK);
	res = store_pg_exec_sql(cn, sql);
	db->db_no_advisory = PQresultStatus(res) != PGRES_TUPLES_OK;
	PQclear(res);
	if (db->db_no_advisory) {
		log_warn("store: no advisory locks on this server: writes check the schema "
		         "version every 250 ms, not in each transaction");
	}
}

static struct store_db *store_pg_open(const struct store_options *opt, int *ret_from, int *ret_to)
{
	struct store_conn *cn = NULL;
	struct store_db *db;
	int version = 0;
	int sets_attrs = 0;
	int sets_connect_timeout = 0;

	if (opt->so_conninfo == NULL || opt->so_conninfo[0] == '\0') {
		log_err("store: backend = postgresql needs [store] conninfo");
		return NULL;
	}
	db = calloc(1, sizeof(*db));
	if (db == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	db->db_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	db->db_cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	db->db_lock_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	db->db_backoff.bo_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	db->db_pool_size = opt->so_pool_size > 0 ? opt->so_pool_size : STORE_PG_POOL_DEFAULT;
	db->db_timeout_ms = opt->so_statement_timeout_ms > 0
	                            ? opt->so_statement_timeout_ms
	                            : STORE_PG_STATEMENT_TIMEOUT_MS_DEFAULT;
	db->db_conninfo = strdup(opt->so_conninfo);
	if (opt->so_pg_application_name != NULL) {
		db->db_app_name = strdup(opt->so_pg_application_name);
	}
	db->db_all = calloc(db->db_pool_size, sizeof(*db->db_all));
	if (db->db_conninfo == NULL || db->db_all == NULL ||
	    (opt->so_pg_application_name != NULL && db->db_app_name == NULL)) {
		log_err("store: out of memory");
		goto fail;
	}
	if (pthread_key_create(&db->db_key, NULL) != 0) {
		log_err("store: cannot create a thread key");
		goto fail;
	}
	db->db_key_made = 1;
	if (store_pg_conninfo_check(db->db_conninfo, &sets_attrs, &sets_connect_timeout) < 0) {
		goto fail;
	}
	if (!sets_connect_timeout && getenv("PGCONNECT_TIMEOUT") == NULL) {
		db->db_connect_timeout = STORE_PG_CONNECT_TIMEOUT_S;
	}
	if (!opt->so_read_only && !sets_attrs && getenv("PGTARGETSESSIONATTRS") == NULL) {
		db->db_session_attrs = "read-write";
	}
	/* Migrations may take longer than one statement's timeout. A server
	 * out of reach at start is an error: the receiver does not start. */
	cn = store_pg_conn_open_q(db, "idemhook writer", opt->so_read_only ? db->db_timeout_ms : 0,
	                          0, LOG_LEVEL_ERR);
	if (cn == NULL) {
		store_open_unreachable();
		goto fail;
	}
	if (!opt->so_read_only) {
		cn->cn_watch_db = db; /* no statement_timeout: silence is checked */
	}
	if (store_pg_version(cn, &version) < 0) {
		goto fail;
	}
	if (ret_from != NULL) {
		*ret_from = version;
	}
	if ((opt->so_read_only ? store_version_check_read(version)
	                       : store_version_check(version, !opt->so_no_migrate)) < 0) {
		goto fail;
	}
	if (!opt->so_read_only && !opt->so_no_migrate) {
		int from = version;

		if (store_pg_migrate(cn, &from, &version) < 0) {
			if (ret_from != NULL) {
				*ret_from = from;
			}
			if (ret_to != NULL) {
				*ret_to = version;
			}
			goto fail;
		}
		if (ret_from != NULL) {
			*ret_from = from;
		}
	}
	if (ret_to != NULL) {
		*ret_to = version;
	}
	if (opt->so_read_only) {
		store_pg_conn_close(cn);
		return db;
	}
	store_pg_conn_close(cn->cn_watch);
	cn->cn_watch = NULL;
	cn->cn_watch_db = NULL;
	if (store_pg_conn_setup(cn, db->db_timeout_ms) < 0) {
		goto fail;
	}
	store_pg_check_durability(cn);
	store_pg_check_advisory(db, cn);
	db->db_writer = cn;
	return db;
fail:
	store_pg_conn_close(cn);
	store_pg_close(db);
	return NULL;
}

const struct store_engine store_engine_pg = {
        .en_name = "PostgreSQL",
        .en_shared = 1,
        .en_sql_has_table = "SELECT count(*) FROM information_schema.tables WHERE table_name = ? "
                            "AND table_schema = current_schema()",
        .en_sql_tables = "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                         "current_schema() AND table_type = 'BASE TABLE' AND table_name <> "
                         "'idemhook_schema' ORDER BY table_name",
        .en_sql_columns = "SELECT column_name, data_type FROM information_schema.columns WHERE "
                          "table_name = ? AND table_schema = current_schema() ORDER BY "
                          "ordinal_position",
        .en_open = store_pg_open,
        .en_close = store_pg_close,
        .en_writer = store_pg_writer,
        .en_writer_ready = store_pg_writer_ready,
        .en_writer_add = store_pg_writer_add,
        .en_writer_conn_ready = store_pg_writer_conn_ready,
        .en_reader_get = store_pg_reader_get,
        .en_reader_put = store_pg_reader_put,
        .en_run = store_pg_run,
        .en_begin = store_pg_begin,
        .en_schema_held = store_pg_schema_held,
        .en_schema_found = store_pg_schema_found,
        .en_in_tx = store_pg_in_tx,
        .en_tx_state = store_pg_tx_state,
        .en_lanes = store_pg_lanes_run,
        .en_exec_one = store_pg_exec_one,
        .en_round_trips = store_pg_round_trips,
        .en_last_error = store_pg_last_error,
        .en_error_reason = store_pg_error_reason,
        .en_timed_out = store_pg_timed_out,
        .en_lock_wait_cut = store_pg_lock_wait_cut,
        .en_after_batch = store_pg_after_batch,
        .en_wal_written = store_pg_wal_written,
        .en_probe = store_pg_probe,
        .en_file_stats = store_pg_file_stats,
        .en_reclaim = store_pg_reclaim,
        .en_checkpoint = store_pg_checkpoint,
        .en_vacuum = store_pg_vacuum,
        .en_after_copy = store_pg_after_copy,
        .en_try_lock = store_pg_try_lock,
        .en_unlock = store_pg_unlock,
};
