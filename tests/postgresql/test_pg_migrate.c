/* test_pg_migrate.c: receivers (or `idemhook migrate` runs) starting
 * together on a new PostgreSQL database migrate it once, under an advisory
 * lock, and each reports what it did itself: one "migrated from schema
 * version 0", the others "up to date", as they found the schema once the
 * lock was theirs. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"

#include "pg_common.h"

#define T_RUNS 4

static void test_migrate_runs_at_once_report_the_migration_once(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	struct daemon d;
	pid_t pids[T_RUNS];
	int migrated = 0;
	int up_to_date = 0;
	size_t i;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	for (i = 0; i < T_RUNS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			char *out = NULL;
			char name[32];
			int rc = daemon_cli(&d, 1, migrate, &out);

			snprintf(name, sizeof(name), "migrate-%zu.out", i);
			if (daemon_write_file(&d, name, out != NULL ? out : "") < 0) {
				rc = 99;
			}
			_exit(rc == 0 ? 0 : 1);
		}
	}
	for (i = 0; i < T_RUNS; i++) {
		int status = 0;
		char path[700];
		char *out;

		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		snprintf(path, sizeof(path), "%s/migrate-%zu.out", d.dm_dir, i);
		out = hn_read_file(path);
		assert_non_null(out);
		print_message("migrate %zu: %s", i, out);
		migrated += strstr(out, "migrated from schema version 0 to ") != NULL;
		up_to_date += strstr(out, "up to date") != NULL;
		free(out);
	}
	assert_int_equal(migrated, 1);
	assert_int_equal(up_to_date, T_RUNS - 1);
	daemon_finish(&d);
}

static void t_no_rows(struct buf *sql, int pg, void *arg)
{
	(void)sql;
	(void)pg;
	(void)arg;
}

/* The schema version d's database records, read by psql (the store
 * refuses to read an older schema). */
static int64_t t_schema(const struct daemon *d)
{
	char *out = NULL;
	int64_t version;

	assert_int_equal(pgserver_psql(pgserver_shared(NULL), d->dm_pg_db,
	                               "SELECT max(version) FROM idemhook_schema", &out),
	                 0);
	assert_non_null(out);
	version = strtoll(out, NULL, 10);
	free(out);
	return version;
}

/* d's database as the release before migration 0019 left it, with a psql
 * session holding the lock 0019's ALTER TABLE needs. Returns the version
 * found, or 0 when the harness cannot build an older schema here. */
static int64_t t_older_schema_locked(struct daemon *d, struct pgserver_session *ps)
{
	int rc;

	assert_int_equal(daemon_init_pg(d, FX_STRIPE_INI), 0);
	rc = hn_db_build_before(d, "0019_", t_no_rows, NULL);
	if (rc == 1) {
		return 0;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(pg_session_start(ps, d), 0);
	assert_int_equal(pgserver_session_run(ps, "BEGIN; LOCK TABLE idempotency_records IN ACCESS "
	                                          "EXCLUSIVE MODE;"),
	                 0);
	return t_schema(d);
}

/* Once the lock is released, migrate finishes what the first run left. */
static void t_migrate_after(struct daemon *d, struct pgserver_session *ps, int64_t from)
{
	static const char *const migrate[] = {"migrate", NULL};
	char text[96];
	char *out = NULL;

	assert_int_equal(pgserver_session_run(ps, "ROLLBACK;"), 0);
	assert_int_equal(pgserver_session_finish(ps), 0);
	assert_int_equal(daemon_cli(d, 1, migrate, &out), 0);
	assert_non_null(out);
	snprintf(text, sizeof(text), "migrated from schema version %" PRId64 " to ", from);
	assert_non_null(strstr(out, text));
	free(out);
}

/* migrate run by run (on d's database, whose lock ps holds) with a
 * lock_timeout of the operator's: one try of that bound, not idemhook's
 * five; exit 75 (temporary), the schema unchanged at from and said so;
 * then, the lock released, d migrates. */
static void t_migrate_one_lock_try(struct daemon *run, struct daemon *d,
                                   struct pgserver_session *ps, int64_t from)
{
	static const char *const migrate[] = {"migrate", NULL};
	char text[128];
	char *err = NULL;
	int rc;

	rc = daemon_cli_err(run, 1, migrate, NULL, &err);
	assert_non_null(err);
	print_message("%s", err);
	assert_int_equal(rc, 75);
	assert_non_null(strstr(err, "canceling statement due to lock timeout"));
	snprintf(text, sizeof(text), "schema version %" PRId64 " is unchanged", from);
	assert_non_null(strstr(err, text));
	assert_non_null(strstr(err, "Run the same command again."));
	assert_null(strstr(err, "trying again"));
	free(err);
	assert_int_equal(t_schema(d), from);
	t_migrate_after(d, ps, from);
}

/* A lock the migration needs, held past lock_timeout (set by the operator
 * through PGOPTIONS, or options= in the conninfo): the migration's
 * transaction is rolled back, and migrate says the schema is unchanged and
 * exits 75 (temporary), not 65 (refused). */
static void test_a_migration_stopped_by_a_lock_timeout_exits_75_schema_unchanged(void **state)
{
	struct pgserver_session ps;
	struct daemon d;
	int64_t from;

	(void)state;
	from = t_older_schema_locked(&d, &ps);
	if (from == 0) {
		daemon_finish(&d);
		skip();
	}
	assert_int_equal(setenv("PGOPTIONS", "-c lock_timeout=300", 1), 0);
	t_migrate_one_lock_try(&d, &d, &ps, from);
	unsetenv("PGOPTIONS");
	daemon_finish(&d);
}

/* One integer sql reads from d's database, by psql. */
static int64_t t_psql_int(const struct daemon *d, const char *sql)
{
	char *out = NULL;
	int64_t v;

	assert_int_equal(pgserver_psql(pgserver_shared(NULL), d->dm_pg_db, sql, &out), 0);
	assert_non_null(out);
	v = strtoll(out, NULL, 10);
	free(out);
	return v;
}

/* The advisory lock every migrating receiver takes ("idemhook" in ASCII). */
#define T_MIGRATE_LOCK "7594306392231473003"

/* A lock_timeout of the operator's (PGOPTIONS) bounds the migration's
 * waits for the locks of other sessions' transactions, not its wait for
 * another receiver's migration (the advisory lock, held here by a psql
 * session as a receiver migrating would): migrate waits past that
 * lock_timeout, and migrates once the lock is released. */
static void test_an_operators_lock_timeout_does_not_cut_the_wait_for_another_migration(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	struct pgserver_session ps;
	struct daemon d;
	char sql[256];
	int status = 0;
	pid_t pid;
	int i;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	assert_int_equal(pg_session_start(&ps, &d), 0);
	assert_int_equal(pgserver_session_run(&ps, "SELECT pg_advisory_lock(" T_MIGRATE_LOCK ");"),
	                 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("PGOPTIONS", "-c lock_timeout=300", 1);
		_exit(daemon_cli(&d, 1, migrate, NULL));
	}
	/* it waits for the advisory lock, past its lock_timeout */
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND wait_event_type = "
	         "'Lock' AND wait_event = 'advisory'",
	         d.dm_pg_db);
	for (i = 0; i < 100 && t_psql_int(&d, sql) == 0; i++) {
		usleep(20 * 1000);
	}
	usleep(1500 * 1000); /* five times its lock_timeout */
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
	assert_int_equal(t_psql_int(&d, sql), 1);

	assert_int_equal(
	        pgserver_session_run(&ps, "SELECT pg_advisory_unlock(" T_MIGRATE_LOCK ");"), 0);
	assert_int_equal(pgserver_session_finish(&ps), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(t_schema(&d) > 0);
	daemon_finish(&d);
}

/* The same lock_timeout set on the server's side for the database (ALTER
 * DATABASE ... SET, as ALTER ROLE ... SET or postgresql.conf would): it
 * is the operator's too, and replaces idemhook's tries. */
static void test_a_lock_timeout_set_for_the_database_replaces_the_tries(void **state)
{
	struct pgserver_session ps;
	struct daemon d;
	char sql[160];
	int64_t from;

	(void)state;
	from = t_older_schema_locked(&d, &ps);
	if (from == 0) {
		daemon_finish(&d);
		skip();
	}
	snprintf(sql, sizeof(sql), "ALTER DATABASE %s SET lock_timeout = 300", d.dm_pg_db);
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), NULL, sql, NULL), 0);
	t_migrate_one_lock_try(&d, &d, &ps, from);
	daemon_finish(&d);
}

/* And in the conninfo (options=, as docs/postgresql.md shows it): a
 * receiver configured so migrates with one try of that bound. */
static void test_a_lock_timeout_in_the_conninfo_replaces_the_tries(void **state)
{
	struct pgserver_session ps;
	struct daemon d;
	struct daemon opts;
	char conninfo[800];
	int64_t from;

	(void)state;
	from = t_older_schema_locked(&d, &ps);
	if (from == 0) {
		daemon_finish(&d);
		skip();
	}
	pgserver_conninfo(pgserver_shared(NULL), d.dm_pg_db, conninfo, sizeof(conninfo));
	strncat(conninfo, " options='-c lock_timeout=300'",
	        sizeof(conninfo) - strlen(conninfo) - 1);
	assert_int_equal(daemon_init_pg_at(&opts, d.dm_pg_db, conninfo, "", FX_STRIPE_INI), 0);
	t_migrate_one_lock_try(&opts, &d, &ps, from);
	daemon_finish(&opts);
	daemon_finish(&d);
}

/* The migration's connection lost while it waits inside its transaction
 * (its backend terminated, as a server restart or a failover does): rolled
 * back whole; migrate reads the version on a new connection, says it is
 * unchanged and exits 75. */
static void test_a_migration_whose_connection_is_lost_exits_75_schema_unchanged(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	struct pgserver *pg = pgserver_shared(NULL);
	struct pgserver_session ps;
	struct daemon d;
	char text[128];
	char *log;
	char *out = NULL;
	int64_t from;
	int64_t start;
	int status = 0;
	pid_t pid;

	(void)state;
	assert_non_null(pg);
	from = t_older_schema_locked(&d, &ps);
	if (from == 0) {
		daemon_finish(&d);
		skip();
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		_exit(daemon_cli(&d, 1, migrate, NULL));
	}
	/* the migration waits for the lock, inside its transaction */
	start = hn_now_ms();
	for (;;) {
		assert_int_equal(
		        pgserver_psql(pg, d.dm_pg_db,
		                      "SELECT pg_terminate_backend(pid) FROM "
		                      "pg_stat_activity WHERE datname = current_database() "
		                      "AND wait_event_type = 'Lock' AND state = 'active'",
		                      &out),
		        0);
		if (out != NULL && strstr(out, "t") != NULL) {
			free(out);
			break;
		}
		free(out);
		out = NULL;
		assert_true(hn_now_ms() - start < 10000);
		usleep(50 * 1000);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	print_message("%s", log);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 75);
	snprintf(text, sizeof(text), "schema version %" PRId64 " is unchanged", from);
	assert_non_null(strstr(log, text));
	free(log);
	assert_int_equal(t_schema(&d), from);
	t_migrate_after(&d, &ps, from);
	daemon_finish(&d);
}

/* How many columns named column idempotency_records of d's database has. */
static int t_has_column(const struct daemon *d, const char *column)
{
	char sql[256];
	char *out = NULL;
	int n;

	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM information_schema.columns WHERE table_name = "
	         "'idempotency_records' AND column_name = '%s'",
	         column);
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), d->dm_pg_db, sql, &out), 0);
	assert_non_null(out);
	n = atoi(out);
	free(out);
	return n;
}

/* Whether a statement of d's database waits for a lock. */
static int t_lock_waiter(const struct daemon *d)
{
	char *out = NULL;
	int n;

	assert_int_equal(pgserver_psql(pgserver_shared(NULL), d->dm_pg_db,
	                               "SELECT count(*) FROM pg_stat_activity WHERE datname = "
	                               "current_database() AND wait_event_type = 'Lock' AND "
	                               "state = 'active'",
	                               &out),
	                 0);
	assert_non_null(out);
	n = atoi(out);
	free(out);
	return n;
}

/* A lock the migration needs, held by another session's long transaction
 * (a report, a pg_dump), and no lock_timeout of the operator's: each try
 * of the migration gives the lock up after 1 s, rolled back whole (what
 * queued behind its lock request runs), and after 5 tries migrate names
 * the cause and exits 75, the schema unchanged, rather than wait for good.
 * A lock released between two tries lets the next one apply it. */
static void test_a_migration_gives_up_a_lock_held_elsewhere_after_its_tries(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	struct pgserver_session ps;
	struct daemon d;
	char text[128];
	char *err = NULL;
	char *log;
	int64_t from;
	int64_t t0;
	int64_t ms;
	int status = 0;
	pid_t pid;
	int rc;

	(void)state;
	from = t_older_schema_locked(&d, &ps);
	if (from == 0) {
		daemon_finish(&d);
		skip();
	}
	t0 = hn_now_ms();
	rc = daemon_cli_err(&d, 1, migrate, NULL, &err);
	ms = hn_now_ms() - t0;
	assert_non_null(err);
	print_message("migrate after %" PRId64 " ms, exit %d:\n%s", ms, rc, err);
	assert_int_equal(rc, 75);
	assert_true(ms >= 4000 && ms < 20000);
	assert_non_null(strstr(err, "another session held a lock it needs through 5 tries"));
	snprintf(text, sizeof(text), "schema version %" PRId64 " is unchanged", from);
	assert_non_null(strstr(err, text));
	free(err);
	assert_int_equal(t_schema(&d), from);
	assert_int_equal(t_has_column(&d, "context"), 0);

	/* the lock released while migrate tries: applied */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		_exit(daemon_cli(&d, 1, migrate, NULL));
	}
	usleep(2500 * 1000);
	assert_int_equal(pgserver_session_run(&ps, "ROLLBACK;"), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_non_null(strstr(log, "another session holds a lock it needs; trying again"));
	free(log);
	assert_true(t_schema(&d) > from);
	assert_int_equal(t_has_column(&d, "context"), 1);
	assert_int_equal(pgserver_session_finish(&ps), 0);
	daemon_finish(&d);
}

/* The server hangs (its processes stopped, as a swapping server or a
 * network black hole) halfway through a migration (by args: migrate, or
 * serve's start): 0019's ALTER TABLE done
 * in its transaction, its CREATE OR REPLACE VIEW waiting for a lock a psql
 * session holds. While the server answers, that silent wait goes on (a
 * long index build is silent too); once it hangs, migrate gives up within
 * seconds, says why and exits 75, and once the server runs again nothing
 * of the migration is there (the column its ALTER TABLE added neither):
 * the same command then applies it. Runs last: it stops the shared
 * server. */
static void t_hang_during(const char *const *args)
{
	struct pgserver *pg = pgserver_shared(NULL);
	struct pgserver_session ps;
	struct daemon d;
	char *log;
	int64_t from;
	int64_t start;
	int64_t ms;
	int status = 0;
	pid_t pid;
	pid_t done = 0;
	int rc;

	assert_non_null(pg);
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	rc = hn_db_build_before(&d, "0019_", t_no_rows, NULL);
	if (rc == 1) {
		daemon_finish(&d);
		skip();
	}
	assert_int_equal(rc, 0);
	from = t_schema(&d);
	assert_int_equal(t_has_column(&d, "context"), 0);
	assert_int_equal(pg_session_start(&ps, &d), 0);
	assert_int_equal(pgserver_session_run(&ps, "BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE "
	                                           "MODE;"),
	                 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* the operator's choice: wait for the lock as long as it is held */
		setenv("PGOPTIONS", "-c lock_timeout=0", 1);
		_exit(daemon_cli(&d, 1, args, NULL));
	}
	start = hn_now_ms();
	while (t_lock_waiter(&d) == 0) {
		assert_true(hn_now_ms() - start < 10000);
		usleep(50 * 1000);
	}
	/* silent, on a server that answers: a wait, not a hang */
	usleep(5000 * 1000);
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);

	assert_true(pgserver_signal_all(pg, SIGSTOP) > 1);
	start = hn_now_ms();
	while (done == 0 && hn_now_ms() - start < 30000) {
		done = waitpid(pid, &status, WNOHANG);
		usleep(20 * 1000);
	}
	ms = hn_now_ms() - start;
	assert_true(pgserver_signal_all(pg, SIGCONT) > 1);
	if (done == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	print_message("%s on a hung server ended after %" PRId64 " ms\n", args[0], ms);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	print_message("%s", log);
	assert_int_equal(done, pid);
	assert_true(ms < 8000);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 75);
	assert_non_null(strstr(log, "store: postgresql does not answer"));
	assert_non_null(strstr(log, "the migration is given up"));
	free(log);

	/* the server rolls the half-done migration back */
	assert_int_equal(t_schema(&d), from);
	assert_int_equal(t_has_column(&d, "context"), 0);
	t_migrate_after(&d, &ps, from);
	assert_int_equal(t_has_column(&d, "context"), 1);
	daemon_finish(&d);
}

static void test_a_migration_on_a_server_that_hangs_ends_within_seconds_undone(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};

	(void)state;
	t_hang_during(migrate);
}

/* The same at serve's start, which migrates before it listens: it exits
 * (75, as migrate) rather than wait for good without listening. */
static void test_a_start_whose_migration_meets_a_hung_server_exits_within_seconds(void **state)
{
	static const char *const serve[] = {"serve", NULL};

	(void)state;
	t_hang_during(serve);
}

/* A server that answers the migration's connect and then reads nothing
 * (a relay passes the connect and nothing after it): the migration's
 * first statement, its session's settings, is silent like any other of
 * its statements, so migrate (or serve's start) ends within seconds,
 * never waits for good. */
static void t_silent_after_connect(const char *const *args)
{
	static const char *const settings[] = {"listen_addresses=127.0.0.1", NULL};
	struct pgserver_proxy px;
	struct pgserver pg;
	struct daemon d;
	char conninfo[700];
	char db[64];
	char *log;
	int64_t start;
	int64_t ms;
	int status = 0;
	pid_t done = 0;
	pid_t pid;

	assert_int_equal(pgserver_start_opts(&pg, settings, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "migrate", db), 0);
	assert_int_equal(pgserver_proxy_start(&px, &pg), 0);
	snprintf(conninfo, sizeof(conninfo),
	         "host=127.0.0.1 port=%u user=postgres dbname=%s connect_timeout=2 sslmode=disable "
	         "gssencmode=disable",
	         px.px_port, db);
	assert_int_equal(daemon_init_pg_at(&d, db, conninfo, "", FX_STRIPE_INI), 0);
	pgserver_proxy_late(&px, 0, 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		_exit(daemon_cli(&d, 1, args, NULL));
	}
	start = hn_now_ms();
	while (done == 0 && hn_now_ms() - start < 20000) {
		done = waitpid(pid, &status, WNOHANG);
		usleep(20 * 1000);
	}
	ms = hn_now_ms() - start;
	if (done == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	print_message("%s on a server silent after the connect ended after %" PRId64 " ms\n",
	              args[0], ms);
	assert_int_equal(done, pid);
	assert_true(WIFEXITED(status));
	print_message("exit status %d\n", WEXITSTATUS(status));
	assert_int_not_equal(WEXITSTATUS(status), 0);
	/* 2 s of silence, then the check's connection: its settings' reply
	 * (2 s and the margin of 2 s), and room */
	assert_true(ms < 9000);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	print_message("%s", log);
	free(log);
	assert_int_equal(daemon_log_wait(&d, "postgresql does not answer", 1000), 0);
	daemon_finish(&d);
	pgserver_proxy_stop(&px);
	pgserver_stop(&pg);
}

static void
test_a_migration_whose_server_is_silent_after_the_connect_ends_within_seconds(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};

	(void)state;
	t_silent_after_connect(migrate);
}

static void test_a_start_whose_server_is_silent_after_the_connect_exits_within_seconds(void **state)
{
	static const char *const serve[] = {"serve", NULL};

	(void)state;
	t_silent_after_connect(serve);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_migrate_runs_at_once_report_the_migration_once),
	        cmocka_unit_test(
	                test_a_migration_stopped_by_a_lock_timeout_exits_75_schema_unchanged),
	        cmocka_unit_test(test_a_lock_timeout_set_for_the_database_replaces_the_tries),
	        cmocka_unit_test(test_a_lock_timeout_in_the_conninfo_replaces_the_tries),
	        cmocka_unit_test(
	                test_a_migration_whose_connection_is_lost_exits_75_schema_unchanged),
	        cmocka_unit_test(test_a_migration_gives_up_a_lock_held_elsewhere_after_its_tries),
	        cmocka_unit_test(
	                test_an_operators_lock_timeout_does_not_cut_the_wait_for_another_migration),
	        cmocka_unit_test(
	                test_a_migration_on_a_server_that_hangs_ends_within_seconds_undone),
	        cmocka_unit_test(
	                test_a_start_whose_migration_meets_a_hung_server_exits_within_seconds),
	        cmocka_unit_test(
	                test_a_migration_whose_server_is_silent_after_the_connect_ends_within_seconds),
	        cmocka_unit_test(
	                test_a_start_whose_server_is_silent_after_the_connect_exits_within_seconds),
	};

	cmocka_set_test_filter(getenv("IDEMHOOK_TEST_FILTER"));
	pgserver_require_or_skip("test_pg_migrate");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
