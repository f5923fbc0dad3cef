/* test_busy_store.c: gc, migrate and serve on a SQLite database whose write
 * lock another process holds (the sqlite3 shell in BEGIN IMMEDIATE): each
 * says what went and what is unchanged, exits 75 (run it again), and run
 * again once the lock is gone, goes on from there. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"

#define T_BUSY_INI "[store]\nbusy_timeout_ms = 200\n"
#define T_EXPIRED 3

/* The daemon's log (its stderr and every command's) holds text. */
static void t_log_says(struct daemon *d, const char *text)
{
	char *log = hn_read_file(d->dm_log);

	assert_non_null(log);
	if (strstr(log, text) == NULL) {
		print_error("no \"%s\" in:\n%s\n", text, log);
	}
	assert_non_null(strstr(log, text));
	free(log);
}

/* n idempotency records of the stripe scope, long expired. */
static void t_expired_records(struct daemon *d, int n)
{
	char sql[300];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(sql, sizeof(sql),
		         "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
		         "reply_status, created_at, updated_at) VALUES ('stripe', "
		         "'evt_busy_old_%d', "
		         "'done', x'00', 200, %d, %d)",
		         i, 1000 + i, 1000 + i);
		assert_int_equal(hn_db_exec(d->dm_db, sql), 0);
	}
}

static int64_t t_records(struct daemon *d)
{
	return fx_db_int(d, "SELECT count(*) FROM idempotency_records");
}

struct t_cli {
	struct daemon *tc_d;
	const char *const *tc_args;
	int tc_rc;
};

static void *t_cli_main(void *arg)
{
	struct t_cli *c = arg;

	c->tc_rc = daemon_cli(c->tc_d, 1, c->tc_args, NULL);
	return NULL;
}

/* gc meets the lock before its first batch, and in the pause after it: 75
 * with what went (the first batch, committed on its own) and that a new
 * run goes on; the dry run only reads, and answers. */
static void test_gc_on_a_locked_database_says_how_far_it_got_and_a_new_run_goes_on(void **state)
{
	static const char *const gc[] = {"gc", NULL};
	static const char *const dry[] = {"gc", "--dry-run", NULL};
	static const char *const vacuum[] = {"gc", "--vacuum", NULL};
	struct daemon d;
	struct hn_sqlite lock;
	struct t_cli c;
	pthread_t th;
	char *out = NULL;

	(void)state;
	/* gc's own pass off; the command's batches one row each, 2 s apart */
	fx_daemon_start(&d, "%s" T_BUSY_INI "\n[gc]\ninterval = 0\nbatch = 1\npause = 2s\n",
	                FX_STRIPE_INI);
	t_expired_records(&d, T_EXPIRED);
	assert_int_equal(t_records(&d), T_EXPIRED);

	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(daemon_cli(&d, 1, gc, &out), 75);
	assert_true(out == NULL || out[0] == '\0');
	free(out);
	out = NULL;
	t_log_says(&d, "idemhook gc: the database is busy or failing; nothing was deleted. Run the "
	               "same command again.\n");
	assert_int_equal(daemon_cli(&d, 1, vacuum, NULL), 75);
	assert_int_equal(daemon_cli(&d, 1, dry, &out), 0);
	assert_non_null(out);
	assert_non_null(
	        strstr(out, "would delete (dry run):\nidempotency records             3\n"));
	free(out);
	out = NULL;
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(t_records(&d), T_EXPIRED);

	/* the lock taken after the first batch, in the pause */
	c.tc_d = &d;
	c.tc_args = gc;
	c.tc_rc = -1;
	assert_int_equal(pthread_create(&th, NULL, t_cli_main, &c), 0);
	assert_int_equal(hn_db_wait_int(d.dm_db, "SELECT count(*) FROM idempotency_records",
	                                T_EXPIRED - 1, 20),
	                 T_EXPIRED - 1);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(c.tc_rc, 75);
	t_log_says(&d,
	           "idemhook gc: the database is busy or failing; it stopped while deleting "
	           "idempotency records, after 1 batch(es), which stay deleted: 1 idempotency "
	           "records, 0 events, 0 parked events applied and 0 outbox rows; the rest is "
	           "unchanged, and a new run goes on from there. Run the same command again.\n");
	assert_int_equal(t_records(&d), T_EXPIRED - 1);

	/* run again, it goes on to the end */
	assert_int_equal(daemon_cli(&d, 1, gc, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "deleted:\nidempotency records             2\n"));
	free(out);
	assert_int_equal(t_records(&d), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* The daemon's own pass that meets the lock says where it stopped, that it
 * deleted nothing, and when the next one goes on; the next one does. */
static void test_a_scheduled_gc_pass_that_meets_a_lock_says_so_and_the_next_goes_on(void **state)
{
	struct daemon d;
	struct hn_sqlite lock;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI T_BUSY_INI
	                             "\n[gc]\ninterval = 1s\nbatch = 1\npause = 0\n"),
	                 0);
	assert_int_equal(daemon_start(&d), 0);
	t_expired_records(&d, 1);
	assert_int_equal(hn_db_wait_int(d.dm_db, "SELECT count(*) FROM idempotency_records", 0, 20),
	                 0);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(
	        daemon_log_wait(&d,
	                        "gc: pass stopped while deleting idempotency records (the database "
	                        "is busy or failing), nothing deleted; the next pass, in 1 s, goes "
	                        "on\n",
	                        10000),
	        0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	/* and the next pass does */
	t_expired_records(&d, 2);
	assert_int_equal(hn_db_wait_int(d.dm_db, "SELECT count(*) FROM idempotency_records", 0, 20),
	                 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* The schema version of d's database, read by the sqlite3 command (the
 * harness's readers refuse an older schema). */
static int t_user_version(struct daemon *d)
{
	char cmd[800];
	FILE *p;
	int v = -1;

	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'PRAGMA user_version'", d->dm_db);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (fscanf(p, "%d", &v) != 1) {
		v = -1;
	}
	pclose(p);
	return v;
}

/* d's database at schema 4 (migrations 0001-0004 with the sqlite3
 * command), in WAL mode as a daemon leaves it. */
static void t_schema4(struct daemon *d)
{
	static const char *const files[] = {"0001_create_idempotency_records.sql",
	                                    "0002_create_orders.sql", "0003_create_events.sql",
	                                    "0004_create_outbox.sql"};
	const char *root = getenv("IDEMHOOK_SOURCE_ROOT");
	char cmd[4096];
	size_t n;
	size_t i;

	assert_non_null(root);
	n = (size_t)snprintf(cmd, sizeof(cmd), "( echo 'PRAGMA journal_mode = WAL; BEGIN;'; cat");
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, " '%s/migrations/%s'", root,
		                      files[i]);
	}
	snprintf(cmd + n, sizeof(cmd) - n,
	         "; echo 'PRAGMA user_version = 4; COMMIT;' ) | sqlite3 '%s' >/dev/null", d->dm_db);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(t_user_version(d), 4);
}

/* migrate and serve's start-up migration on a locked database: 75, the
 * schema untouched and said so; once the lock is gone, migrate does it. */
static void test_migrate_and_serve_on_a_locked_database_say_the_schema_is_unchanged(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const serve[] = {"serve", NULL};
	struct daemon d;
	struct hn_sqlite lock;
	char *out = NULL;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI T_BUSY_INI), 0);
	t_schema4(&d);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(daemon_cli(&d, 1, migrate, &out), 75);
	assert_true(out == NULL || out[0] == '\0');
	free(out);
	out = NULL;
	t_log_says(&d, "idemhook migrate: the database is busy or failing; schema version 4 is "
	               "unchanged (each migration is applied whole in its own transaction, or not "
	               "at all). Run the same command again.\n");
	assert_int_equal(daemon_cli(&d, 1, serve, NULL), 75);
	t_log_says(&d, "idemhook serve: the database is busy or failing; it did not start, and no "
	               "migration is half applied (each is applied whole in its own transaction, "
	               "or not at all). Run the same command again.\n");
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(t_user_version(&d), 4);

	assert_int_equal(daemon_cli(&d, 1, migrate, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, ": migrated from schema version 4 to "));
	free(out);
	assert_true(t_user_version(&d) > 4);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_gc_on_a_locked_database_says_how_far_it_got_and_a_new_run_goes_on),
	        cmocka_unit_test(
	                test_a_scheduled_gc_pass_that_meets_a_lock_says_so_and_the_next_goes_on),
	        cmocka_unit_test(
	                test_migrate_and_serve_on_a_locked_database_say_the_schema_is_unchanged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
