/* pgserver.h: a throwaway PostgreSQL server for tests and benchmarks:
 * Debian's initdb and postgres in a fresh temporary directory, a unix
 * socket there and 127.0.0.1 on a free port, fsync and synchronous_commit
 * on; removed afterwards, even when the test program is killed. */
#ifndef IDEMHOOK_PGSERVER_H
#define IDEMHOOK_PGSERVER_H

#include <pthread.h>
#include <stdio.h>
#include <sys/types.h>

/* exit status meson counts as "skipped" */
#define PGSERVER_SKIP 77

struct pgserver {
	char pg_dir[512];    /* temporary directory: data/, the socket, the log */
	char pg_bindir[256]; /* where initdb, pg_ctl, postgres and psql are */
	unsigned pg_port;
	pid_t pg_watcher; /* stops the server when this process dies */
	int pg_watch_fd;  /* write end of the watcher's pipe */
	int pg_running;
	unsigned pg_next_db; /* pgserver_create_db numbering */
	/* pgserver_start_opts: more "name=value" settings (NULL-terminated,
	 * borrowed until the server stops) and TLS on 127.0.0.1 */
	const char *const *pg_settings;
	int pg_tls;
};

/* The directory holding Debian's PostgreSQL binaries ($IDEMHOOK_PG_BINDIR,
 * else the newest /usr/lib/postgresql/N/bin with initdb and postgres),
 * written into ret (size bytes). Returns 0, or -1 when there is none. */
int pgserver_find_bindir(char *ret, size_t size);

/* Whether a missing PostgreSQL must fail the test rather than skip it:
 * $IDEMHOOK_TEST_REQUIRE_PG=1 (contrib/test.sh and CI set it). */
int pgserver_required(void);

/* initdb in a fresh temporary directory and starts the server (as the
 * postgres user, or nobody, when running as root). A watcher process stops
 * it and removes the directory when this process exits or dies. Returns 0,
 * 1 when the binaries are missing (nothing started), -1 on failure (logged). */
int pgserver_start(struct pgserver *pg);

/* pgserver_start with more server settings (settings: "name=value"
 * strings ending with NULL, given to postgres as -c after the defaults,
 * so they win; kept by pointer until the server stops), and, with tls, a
 * TCP listener on 127.0.0.1 (port pg_port) with ssl = on: a fresh CA
 * (pg_dir/ca.pem) signs a server certificate for localhost and 127.0.0.1.
 * pgserver_conninfo stays on the unix socket (no TLS there). Returns as
 * pgserver_start. */
int pgserver_start_opts(struct pgserver *pg, const char *const *settings, int tls);

/* The CA certificate a client must trust for a pgserver_start_opts(tls)
 * server, written into ret. */
void pgserver_ca_path(const struct pgserver *pg, char *ret, size_t size);

/* Stops the server (fast shutdown, then SIGKILL) and removes its directory.
 * A zeroed or stopped pgserver is a no-op. */
void pgserver_stop(struct pgserver *pg);

/* The postmaster's process id (from its postmaster.pid), 0 when unknown. */
pid_t pgserver_postmaster_pid(const struct pgserver *pg);

/* Sends sig (SIGSTOP: a hung server, as behind a network black hole;
 * SIGCONT: it answers again) to the postmaster and every process it
 * forked (its backends, its helpers). Returns how many processes got the
 * signal, or -1 when the postmaster is unknown. */
int pgserver_signal_all(const struct pgserver *pg, int sig);

/* A libpq conninfo for database db on the server, written into ret. */
void pgserver_conninfo(const struct pgserver *pg, const char *db, char *ret, size_t size);

/* Runs sql through psql (-X -q -v ON_ERROR_STOP=1) on database db ("postgres"
 * when NULL); stdout, unaligned and tuples only, into *ret_out (malloc'd,
 * may be NULL). Returns 0 when psql exited 0, -1 otherwise. */
int pgserver_psql(const struct pgserver *pg, const char *db, const char *sql, char **ret_out);

/* ALTER DATABASE db setting (e.g. "ALLOW_CONNECTIONS false"), committed,
 * and only then every session on db closed (pg_terminate_backend), so
 * that a client reconnecting at once meets the new setting: two psql
 * calls, because psql runs one -c string as one transaction and would
 * close the sessions before the ALTER commits. Returns how many sessions
 * were closed, or -1. */
int pgserver_alter_db_and_close(const struct pgserver *pg, const char *db, const char *setting);

/* A psql session kept open on database db: a statement run in it commits
 * (or a transaction begun in it holds its locks) the moment
 * pgserver_session_run returns, with no psql start in between;
 * pgserver_session_finish quits it (rolling back what is open). */
struct pgserver_session {
	pid_t ps_pid;
	FILE *ps_in;
	FILE *ps_out;
};

/* Returns 0 or -1. */
int pgserver_session_start(struct pgserver_session *ps, const struct pgserver *pg, const char *db);

/* Runs sql in the session and waits until the server has run it. Returns
 * 0, or -1 when the session ended (a statement failed). */
int pgserver_session_run(struct pgserver_session *ps, const char *sql);

/* Quits the session; returns psql's exit status, or -1. */
int pgserver_session_finish(struct pgserver_session *ps);

/* CREATE DATABASE with a fresh name (prefix_N), written into ret_name
 * (64 bytes). Returns 0 or -1. */
int pgserver_create_db(struct pgserver *pg, const char *prefix, char ret_name[64]);

/* A TCP relay between clients and the server's 127.0.0.1 port, in a
 * thread of its own, that can stop taking what clients send (as a server
 * that reads nothing, or a network black hole, does) while it still
 * passes on what the server sends. Its sockets' buffers are small. */
#define PGSERVER_PROXY_PAIRS 32

struct pgserver_proxy {
	unsigned px_port;        /* where clients connect (127.0.0.1) */
	unsigned px_target_port; /* the server's */
	int px_listen;
	int px_stop;         /* atomic */
	long long px_budget; /* atomic: bytes clients may still send; -1: no limit */
	int px_client[PGSERVER_PROXY_PAIRS];
	int px_server[PGSERVER_PROXY_PAIRS];
	pthread_t px_thread;
	/* pgserver_proxy_late: for the pairs accepted while set (atomic) */
	int px_hold_ms;
	int px_deaf;
	/* per pair: when it was accepted (monotonic ms), its hold, and what
	 * it still takes of its client: -1 everything (within px_budget),
	 * -2 its startup packet (length not read yet), N bytes of it, 0
	 * nothing more */
	long long px_born_ms[PGSERVER_PROXY_PAIRS];
	int px_pair_hold_ms[PGSERVER_PROXY_PAIRS];
	long long px_pair_left[PGSERVER_PROXY_PAIRS];
};

/* Starts a relay to pg's TCP port. Returns 0 or -1. */
int pgserver_proxy_start(struct pgserver_proxy *px, const struct pgserver *pg);

/* From now, the relay takes at most bytes more from its clients (-1: no
 * limit again), then reads nothing of theirs until given more. */
void pgserver_proxy_budget(struct pgserver_proxy *px, long long bytes);

/* A server that answers connects late, then reads nothing: each
 * connection the relay accepts from now has what the server sends it held
 * back until it is hold_ms old (the connect's answer comes then), and,
 * with deaf, passes its client's startup packet and then nothing more of
 * what the client sends (its first query never reaches the server).
 * Connections accepted before keep working. hold_ms 0 and deaf 0: new
 * connections are relayed as before. The client must send its startup
 * packet first (sslmode=disable gssencmode=disable in its conninfo). */
void pgserver_proxy_late(struct pgserver_proxy *px, int hold_ms, int deaf);

/* Stops the relay and closes its connections. */
void pgserver_proxy_stop(struct pgserver_proxy *px);

/* The server the harness shares within one test program: started on first
 * use, stopped at exit (and by its watcher when the program is killed).
 * Returns NULL when it cannot be had: *ret_missing (may be NULL) is then 1
 * when the binaries are missing, 0 when starting failed. */
struct pgserver *pgserver_shared(int *ret_missing);

/* For main(): when the shared server cannot be had because PostgreSQL is
 * not installed, prints why and exits PGSERVER_SKIP, or exits 1 when
 * pgserver_required(); on other failures exits 1. Returns when it runs. */
void pgserver_require_or_skip(const char *program);

#endif
