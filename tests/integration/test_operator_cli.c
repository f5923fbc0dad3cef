/* test_operator_cli.c: what the operator's commands write is stamped like
 * what the daemon writes; commands on a database that is not there say so
 * and create nothing; store copy refuses a location it does not know. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"


/* --failed lists what --status failed lists: the events acknowledged but
 * not applied, and not the applied ones. */
static void test_events_list_failed_is_the_failed_status_filter(void **state)
{
	static const char *const failed[] = {"events", "list", "--failed", NULL};
	static const char *const status[] = {"events", "list", "--status", "failed", NULL};
	static const char *const both[] = {"events", "list", "--failed", "--status", "failed", NULL};
	static const char *const conflict[] = {"events", "list", "--failed", "--status", "done",
	                                       NULL};
	static const char *const conflict2[] = {"events", "list", "--status", "done", "--failed",
	                                        NULL};
	struct daemon *d = *state;
	char order[64];
	char *out_failed = NULL;
	char *out_status = NULL;
	char *out = NULL;

	fx_order(d, 1999, "usd", order);
	assert_int_equal(fx_stripe_pay(d, "evt_cli_applied", order, 1999, "usd"), 200);
	assert_int_equal(fx_stripe_pay(d, "evt_cli_unapplied", "ord_cli_no_such_order0001", 1999, "usd"), 200);
	assert_int_equal(daemon_cli(d, 1, failed, &out_failed), 0);
	assert_non_null(out_failed);
	assert_non_null(strstr(out_failed, "evt_cli_unapplied"));
	assert_non_null(strstr(out_failed, "unknown_order"));
	assert_null(strstr(out_failed, "evt_cli_applied"));
	assert_int_equal(daemon_cli(d, 1, status, &out_status), 0);
	assert_string_equal(out_failed, out_status);
	assert_int_equal(daemon_cli(d, 1, both, &out), 0);
	assert_string_equal(out_failed, out);
	free(out);
	out = NULL;
	/* two different statuses: a usage error (EX_USAGE), nothing listed */
	assert_int_equal(daemon_cli(d, 1, conflict, &out), 64);
	assert_true(out == NULL || strstr(out, "evt_cli") == NULL);
	free(out);
	out = NULL;
	assert_int_equal(daemon_cli(d, 1, conflict2, &out), 64);
	assert_true(out == NULL || strstr(out, "evt_cli") == NULL);
	free(out);
	free(out_failed);
	free(out_status);
}

static void test_order_create_stamps_created_and_updated_at_with_the_current_time(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char sql[256];
	int64_t before = hn_now_ms();
	int64_t after;

	fx_order(d, 1999, "usd", id);
	after = hn_now_ms();
	snprintf(sql, sizeof(sql), "SELECT created_at FROM orders WHERE id = '%s'", id);
	assert_in_range(hn_db_int(d->dm_db, sql), before, after);
	snprintf(sql, sizeof(sql), "SELECT updated_at FROM orders WHERE id = '%s'", id);
	assert_in_range(hn_db_int(d->dm_db, sql), before, after);
}

/* d's log (the commands' stderr) holds text. */
static int t_log_has(struct daemon *d, const char *text)
{
	char *log = hn_read_file(d->dm_log);
	int found = log != NULL && strstr(log, text) != NULL;

	free(log);
	return found;
}

static int t_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* [store] path in a directory that is not there: a reader, gc and the
 * commands that change stored rows say the database does not exist (69),
 * serve --no-migrate says to migrate first, and none of them creates the
 * directory, the database or its lock; order create (like serve and
 * migrate) makes the database. */
static void test_commands_on_a_missing_database_create_nothing(void **state)
{
	static const char *const cases[][6] = {
	        {"stats", NULL},
	        {"events", "list", NULL},
	        {"outbox", "list", NULL},
	        {"audit", "list", NULL},
	        {"gc", NULL},
	        {"gc", "--dry-run", NULL},
	        {"gc", "--vacuum", NULL},
	        {"events", "dismiss", "1", "--reason", "never applies", NULL},
	        {"events", "reprocess", "1", NULL},
	        {"outbox", "retry", "1", NULL},
	        {"outbox", "compensate", "1", NULL},
	        {"reconcile", NULL},
	};
	const char *no_migrate[] = {"serve", "--no-migrate", NULL};
	const char *order[] = {"order", "create", "--amount", "100", "--currency", "usd", NULL};
	struct daemon d;
	char sub[700];
	char db[800];
	char lock[820];
	char *text;
	char *at;
	char *out = NULL;
	size_t i;
	int rc;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* a SQLite file */
	}
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	snprintf(sub, sizeof(sub), "%s/sub", d.dm_dir);
	snprintf(db, sizeof(db), "%s/idemhook.db", sub);
	snprintf(lock, sizeof(lock), "%s.lock", db);
	text = hn_read_file(d.dm_config);
	assert_non_null(text);
	at = strstr(text, d.dm_db);
	assert_non_null(at);
	{
		char *next = NULL;

		assert_true(asprintf(&next, "%.*s%s%s", (int)(at - text), text, db,
		                     at + strlen(d.dm_db)) > 0);
		assert_int_equal(daemon_write_file(&d, "idemhook.ini", next), 0);
		free(next);
	}
	free(text);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rc = daemon_cli(&d, 1, cases[i], &out);
		free(out);
		out = NULL;
		if (rc != 69 || t_exists(sub)) {
			fail_msg("%s %s: exit %d, not 69, or %s was created", cases[i][0],
			         cases[i][1] != NULL ? cases[i][1] : "", rc, sub);
		}
	}
	assert_true(t_log_has(&d, "store: the database \""));
	assert_true(t_log_has(&d, "/sub/idemhook.db\" does not exist"));
	assert_false(t_log_has(&d, "unable to open database file"));

	assert_int_equal(daemon_cli(&d, 1, no_migrate, &out), 69);
	free(out);
	out = NULL;
	assert_true(t_log_has(&d, "serve --no-migrate creates none: run idemhook migrate first"));
	assert_false(t_exists(sub));
	assert_false(t_exists(lock));

	/* An order may be the first thing a new receiver's database holds. */
	assert_int_equal(daemon_cli(&d, 1, order, &out), 0);
	assert_non_null(out);
	assert_int_equal(strncmp(out, "ord_", 4), 0);
	free(out);
	assert_true(t_exists(db));
	daemon_finish(&d);
}

/* store copy: a location whose scheme it does not know is a usage error
 * (not a SQLite file of that name), and a missing source leaves no trace. */
static void test_store_copy_refuses_an_unknown_scheme_and_a_missing_source(void **state)
{
	struct daemon d;
	char from[1024];
	char to[1024];
	char missing[800];
	char typo[128];
	const char *copy[] = {"store", "copy", "--from", from, "--to", to, NULL};
	char order[64];
	char *out = NULL;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* a SQLite source */
	}
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	assert_int_equal(hn_order_create(&d, 1999, "usd", order), 0);
	snprintf(from, sizeof(from), "sqlite:%s", d.dm_db);
	/* A mistyped postgresql: (relative: where it would land, here). */
	snprintf(typo, sizeof(typo), "postgresq:dbname=idemhook_%d", (int)getpid());
	snprintf(to, sizeof(to), "%s", typo);
	assert_int_equal(daemon_cli(&d, 0, copy, &out), 64);
	free(out);
	out = NULL;
	if (t_exists(typo)) {
		unlink(typo);
		fail_msg("store copy made a file named %s", typo);
	}
	assert_true(t_log_has(&d, "--to postgresq:...: not a store location; expected "
	                          "sqlite:PATH, postgresql:CONNINFO or a postgresql:// URI"));
	/* the rest of it (a password, maybe) is not repeated */
	assert_false(t_log_has(&d, "dbname=idemhook_"));

	/* A source that is not there. */
	snprintf(missing, sizeof(missing), "%s/gone/idemhook.db", d.dm_dir);
	snprintf(from, sizeof(from), "sqlite:%s", missing);
	snprintf(to, sizeof(to), "sqlite:%s/copy.db", d.dm_dir);
	assert_int_equal(daemon_cli(&d, 0, copy, &out), 69);
	free(out);
	assert_true(t_log_has(&d, "/gone/idemhook.db\" does not exist"));
	snprintf(missing, sizeof(missing), "%s/gone", d.dm_dir);
	assert_false(t_exists(missing));
	snprintf(missing, sizeof(missing), "%s/copy.db", d.dm_dir);
	assert_false(t_exists(missing));
	daemon_finish(&d);
}

static int setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_order_create_stamps_created_and_updated_at_with_the_current_time),
	        cmocka_unit_test(test_events_list_failed_is_the_failed_status_filter),
	        cmocka_unit_test(test_commands_on_a_missing_database_create_nothing),
	        cmocka_unit_test(test_store_copy_refuses_an_unknown_scheme_and_a_missing_source),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
