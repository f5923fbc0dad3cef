/* harness.h: integration-test helpers: a temporary directory, the real daemon
 * on an ephemeral loopback port, HTTP over libcurl, and database reads through
 * the store's own read-only API. */
#ifndef IDEMHOOK_HARNESS_H
#define IDEMHOOK_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct daemon {
	char dm_dir[512]; /* temporary directory: config, database, spool */
	char dm_config[600]; /* dm_dir/idemhook.ini */
	char dm_db[600]; /* the store as hn_db_* take it: dm_dir/idemhook.db, or
			  * "postgresql:CONNINFO" for a daemon on PostgreSQL */
	char dm_pg_db[64]; /* the PostgreSQL database's name, "" on SQLite */
	char dm_log[600]; /* dm_dir/daemon.log: the daemon's stderr */
	pid_t dm_pid; /* 0 when not running */
	unsigned dm_port; /* public listener */
	unsigned dm_admin_port; /* admin listener, 0 if none */
	char dm_base[64]; /* "http://127.0.0.1:PORT" ("https://" after daemon_use_tls) */
	char dm_admin_base[64];
	char dm_ca[600]; /* daemon_use_tls: the certificate a client must trust, else "" */
};

/* Creates a temporary directory and writes its config: [server] on
 * 127.0.0.1 port 0 with a port file, [store] path in the directory, [admin]
 * on port 0, then extra_ini (provider sections and anything else, may be
 * NULL). Returns 0 or -1. */
int daemon_init(struct daemon *d, const char *extra_ini);

/* The backend daemon_init gives a daemon: PostgreSQL when the environment
 * has IDEMHOOK_TEST_BACKEND=postgresql (the meson suite postgresql sets it
 * for the Stripe and order-API flows), else SQLite. */
int hn_backend_is_postgresql(void);

/* Makes a new directory "$TMPDIR/NAME-XXXXXX" (/tmp without TMPDIR), its
 * path in out. Returns 0, or -1 (logged). */
int hn_mkdtemp(char *out, size_t size, const char *name);

/* 1 when this process may give a child a mount namespace of its own
 * (unshare(CLONE_NEWNS) and a bind mount: root), else 0. */
int hn_can_mount_ns(void);

/* With dir, the CLI commands daemon_cli* run from now on run in a mount
 * namespace of their own with dir over /etc/ssl/certs: the system's CA
 * directory as a test wants it, the machine's untouched (root only:
 * hn_can_mount_ns). NULL: as the machine has it again. */
void hn_cli_system_certs(const char *dir);

/* daemon_init with [store] backend = postgresql on a fresh database (CREATE
 * DATABASE on the test program's throwaway server, tests/harness/pgserver.h),
 * whatever the environment says. Returns 0 or -1. */
int daemon_init_pg(struct daemon *d, const char *extra_ini);

/* daemon_init on PostgreSQL database db by conninfo (a server of the
 * test's own, or options of its own), with store_lines (more [store] keys,
 * "" for none). Returns 0 or -1. */
int daemon_init_pg_at(struct daemon *d, const char *db, const char *conninfo,
                      const char *store_lines, const char *extra_ini);

/* daemon_init for one more receiver on first's database (first must be on
 * PostgreSQL): its own directory, ports, log and config, the same [store].
 * Returns 0 or -1. */
int daemon_init_beside(struct daemon *d, const struct daemon *first, const char *extra_ini);

/* Makes the public listener serve native HTTPS with a fresh self-signed
 * certificate for 127.0.0.1 (openssl): the certificate, also the CA a client
 * must trust, is dm_ca. Call between daemon_init and daemon_start. Returns 0
 * or -1. */
int daemon_use_tls(struct daemon *d);

/* Starts $IDEMHOOK_BIN serve -c dm_config, waits (up to 20 s) for the port
 * files, fills dm_port/dm_base. Returns 0 or -1. */
int daemon_start(struct daemon *d);

/* cmocka setup/teardown helpers: a daemon started with extra_ini, stored in
 * *state (calloc'd); and its teardown (daemon_finish + free). */
int daemon_setup(void **state, const char *extra_ini);
int daemon_teardown(void **state);

/* Sends SIGKILL and reaps. */
void daemon_kill9(struct daemon *d);

/* Sends SIGTERM, waits up to timeout_s, returns the exit status (or -1, after
 * a SIGKILL, when it did not stop in time). */
int daemon_term(struct daemon *d, int timeout_s);

/* Sends a signal (SIGHUP for reload). */
int daemon_signal(struct daemon *d, int sig);

/* Stops the daemon if running and removes the directory (kept, and its path
 * printed, when the environment has IDEMHOOK_KEEP_TMP=1). */
void daemon_finish(struct daemon *d);

/* Writes path relative to dm_dir with content; returns 0 or -1. */
int daemon_write_file(struct daemon *d, const char *relpath, const char *content);
/* Appends text (sections and keys) to d's configuration; returns 0 or -1. */
int daemon_append_config(struct daemon *d, const char *text);

/* The whole file at path, malloc'd and NUL-terminated, or NULL. */
char *hn_read_file(const char *path);

/* Everything fd gives until end of file (or an error), malloc'd and
 * NUL-terminated; NULL only when memory ran out. */
char *hn_read_fd(int fd);

/* Waits up to timeout_ms for text to appear in the daemon's log (dm_log).
 * Returns 0 when it did, -1 when not. */
int daemon_log_wait(struct daemon *d, const char *text, int timeout_ms);

/* Runs $IDEMHOOK_BIN with args (NULL-terminated, without argv[0]) and -c
 * dm_config appended when with_config; captures stdout into *ret_out
 * (malloc'd, may be NULL). Returns the exit status, or -1. */
int daemon_cli(struct daemon *d, int with_config, const char *const *args, char **ret_out);

/* daemon_cli, and the command's stderr captured into *ret_err (malloc'd,
 * "" when it said nothing, NULL only when memory ran out) as well as
 * appended to dm_log as daemon_cli leaves it: for a test that checks
 * what a command said. ret_out may be NULL. */
int daemon_cli_err(struct daemon *d, int with_config, const char *const *args, char **ret_out,
                   char **ret_err);

struct hres {
	long hs_status; /* 0 when the transfer failed */
	char *hs_body;
	size_t hs_body_len;
	char *hs_headers; /* raw response header block */
	double hs_seconds;
};

/* One request over a new connection. headers: NULL-terminated "Name: value"
 * strings (or NULL). Returns 0 when an HTTP answer came back, -1 otherwise. */
int hn_http(const char *method, const char *url, const char *const *headers, const void *body, size_t body_len,
	    struct hres *ret);

/* The value of response header name (case-insensitive), malloc'd, or NULL. */
char *hres_header(const struct hres *r, const char *name);
void hres_finish(struct hres *r);

/* Sends n copies of the same request at once, each on its own connection and
 * thread, released together by a barrier. ret must hold n results. Returns 0
 * when every request got an HTTP answer. */
int hn_http_storm(size_t n, const char *method, const char *url, const char *const *headers, const void *body,
		  size_t body_len, struct hres *ret);

/* One request of hn_http_storm_each (borrowed pointers). */
struct hreq {
	const char *rq_method;
	const char *rq_url;
	const char *const *rq_headers; /* NULL-terminated, or NULL */
	const void *rq_body;
	size_t rq_body_len;
};

/* Sends n different requests at once (several receivers, several events),
 * each on its own connection and thread, released together by a barrier.
 * Returns 0 when every request got an HTTP answer. */
int hn_http_storm_each(size_t n, const struct hreq *reqs, struct hres *ret);

/* Database reads through the store's read-only API. db_path is a store
 * location (store_location_parse): a SQLite file, or "postgresql:CONNINFO"
 * as dm_db holds for a daemon on PostgreSQL. A text column that reads as an
 * integer (PostgreSQL's numeric sums) or a boolean (t/f) counts as one. */
/* The first column of the first row as an integer (-1 on error or no row). */
int64_t hn_db_int(const char *db_path, const char *sql);

/* Polls hn_db_int every 50 ms until it gives want or timeout_s passed;
 * returns the last value. */
int64_t hn_db_wait_int(const char *db_path, const char *sql, int64_t want, int timeout_s);
/* Every row, columns joined with '|' and rows with '\n' (malloc'd), for
 * before/after comparisons; NULL on error. */
char *hn_db_dump(const char *db_path, const char *sql);

/* Runs sql (one statement) in a unit of work of its own through the store's
 * write API, on either backend, beside a daemon that may be serving on
 * db_path (a location as hn_db_int takes it): for a test that moves rows
 * back in time, say. Returns 0 or -1. */
int hn_db_exec(const char *db_path, const char *sql);

/* Takes a claim through store_claim_begin on db_path (as hn_db_exec takes
 * it, beside a running daemon): a processing record of scope and key
 * claimed and last touched at now_ms with a lease of lease_ms, what a
 * handler waiting on something outside the database (or a daemon killed
 * mid-claim) leaves behind. Returns 0 when claimed, -1 when not. */
int hn_claim_begin(const char *db_path, const char *scope, const char *key, int64_t now_ms,
                   int64_t lease_ms);

/* A second process on the database: the sqlite3 shell, started on db_path
 * with sql (for example "BEGIN IMMEDIATE;" to hold the write lock), and
 * waited for until it has run it. */
struct hn_sqlite {
	pid_t hq_pid;
	void *hq_in;  /* FILE * */
	void *hq_out; /* FILE * */
};
int hn_sqlite_start(struct hn_sqlite *q, const char *db_path, const char *sql);
/* Sends sql (for example "ROLLBACK;"), ends the shell and waits for it.
 * Returns 0 when it exited 0. */
int hn_sqlite_finish(struct hn_sqlite *q, const char *sql);

/* Every row a request could change (idempotency records, events, orders,
 * points, refunds, outbox), as text for before/after comparison; NULL on
 * error. */
char *hn_db_snapshot(const char *db_path);

/* A Stripe-Signature header value for body at t with secret (v1 only). */
char *hn_stripe_signature(const char *secret, int64_t t, const char *body, size_t body_len);

/* A minimal live-mode Stripe event JSON (malloc'd). type e.g. "payment_intent.succeeded",
 * object_json the data.object text. */
char *hn_stripe_event(const char *event_id, const char *type, const char *object_json);

/* POSTs a Stripe-signed event to dm_base/hooks/<provider> now. */
int hn_post_stripe(struct daemon *d, const char *provider, const char *secret, const char *body, struct hres *ret);

/* Creates an order through the CLI (idemhook order create); writes its id. */
int hn_order_create(struct daemon *d, int64_t amount, const char *currency, char ret_id[64]);

struct buf;

/* Appends to sql, in order and each followed by ";", the migrations of dir
 * (migrations/ or migrations/postgresql/) that come before the one whose file
 * name contains name: the schema a database had before that migration.
 * Returns that schema's version (files are numbered from 1 without gaps), or
 * -1 when dir cannot be read or no file names name. */
int hn_migrations_before(const char *dir, const char *name, struct buf *sql);

/* Makes d's database (SQLite file or PostgreSQL database) at the schema it
 * had before the migration whose file name contains migration:
 * hn_migrations_before's files, the version recorded as the receiver
 * records it, then rows(sql, pg, arg) appends the test's rows (pg: 1 on
 * PostgreSQL, for the backend's literals), all in one transaction on SQLite.
 * Returns 0, 1 when there is no sqlite3 command to run it (the caller
 * skips), or -1. */
int hn_db_build_before(struct daemon *d, const char *migration,
                       void (*rows)(struct buf *sql, int pg, void *arg), void *arg);

/* Now in seconds / milliseconds. */
int64_t hn_now_s(void);
int64_t hn_now_ms(void);

#endif
