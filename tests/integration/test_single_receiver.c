/* test_single_receiver.c: SQLite takes one receiver per database file. A
 * second `idemhook serve` on the file of a running one is refused at start
 * with a message that says why and what to do, and leaves the first one
 * serving; the operator's commands still run beside it; once the first
 * has stopped, a new one starts. `store copy` locks a SQLite file as serve
 * does, and copies every row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"


/* Runs `idemhook -c CONFIG serve` to its end (a refused one ends at
 * once), with its stderr in *ret_err. Returns its exit status, or -1. */
static int t_serve_again(struct daemon *d, char **ret_err)
{
	const char *bin = getenv("IDEMHOOK_BIN");
	char cmd[2048];
	char path[700];
	int rc;

	assert_non_null(bin);
	snprintf(path, sizeof(path), "%s/second.log", d->dm_dir);
	/* timeout: a second serve that was not refused would run forever. */
	snprintf(cmd, sizeof(cmd), "timeout 20 '%s' -c '%s' serve > /dev/null 2> '%s'", bin,
	         d->dm_config, path);
	rc = system(cmd);
	*ret_err = hn_read_file(path);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void
test_a_second_serve_on_the_same_file_is_refused_and_the_first_keeps_serving(void **state)
{
	static const char *const stats[] = {"stats", NULL};
	struct daemon *d = *state;
	char order[64];
	char *err = NULL;
	char *out = NULL;
	int rc;

	rc = t_serve_again(d, &err);
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rc, 124); /* refused, not left running until the timeout */
	assert_non_null(err);
	assert_non_null(strstr(err, "another idemhook serve"));
	assert_non_null(strstr(err, "one receiver per database file"));
	free(err);

	/* The first one still answers, and a reader runs beside it. */
	assert_int_equal(hn_order_create(d, 1999, "usd", order), 0);
	assert_int_equal(daemon_cli(d, 1, stats, &out), 0);
	assert_non_null(out);
	free(out);
}

static void test_after_the_first_stops_a_new_serve_starts(void **state)
{
	struct daemon *d = *state;
	char order[64];

	assert_int_equal(daemon_term(d, 30), 0);
	assert_int_equal(daemon_start(d), 0);
	assert_int_equal(hn_order_create(d, 1999, "usd", order), 0);
}

static void test_a_killed_serve_leaves_no_lock_behind(void **state)
{
	struct daemon *d = *state;
	char order[64];

	daemon_kill9(d);
	assert_int_equal(daemon_start(d), 0);
	assert_int_equal(hn_order_create(d, 1999, "usd", order), 0);
}

static void test_store_copy_is_refused_beside_serve_and_copies_every_row_after(void **state)
{
	struct daemon *d = *state;
	char from[1024];
	char to[1024];
	char copy_db[640];
	const char *copy[] = {"store", "copy", "--from", from, "--to", to, NULL};
	const char *replace[] = {"store", "copy", "--from", from, "--to", to, "--replace", NULL};
	char order[64];
	char *out = NULL;

	snprintf(from, sizeof(from), "sqlite:%s", d->dm_db);
	snprintf(copy_db, sizeof(copy_db), "%s/copy.db", d->dm_dir);
	snprintf(to, sizeof(to), "sqlite:%s", copy_db);
	assert_int_equal(hn_order_create(d, 1999, "usd", order), 0);
	assert_int_equal(fx_stripe_pay(d, "evt_copy_1", order, 1999, "usd"), 200);
	assert_int_equal(hn_order_create(d, 500, "eur", order), 0);

	assert_int_not_equal(daemon_cli(d, 0, copy, &out), 0);
	free(out);
	assert_int_equal(daemon_log_wait(d, "another idemhook serve", 5000), 0);

	assert_int_equal(daemon_term(d, 30), 0);
	assert_int_equal(daemon_cli(d, 0, copy, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "copied"));
	free(out);
	assert_int_equal(hn_db_int(copy_db, "SELECT count(*) FROM orders"), 2);
	assert_int_equal(hn_db_int(copy_db, "SELECT count(*) FROM idempotency_records"),
	                 hn_db_int(d->dm_db, "SELECT count(*) FROM idempotency_records"));
	assert_int_equal(hn_db_int(copy_db, "SELECT count(*) FROM events"), 1);
	assert_int_equal(hn_db_int(copy_db, "SELECT COALESCE(SUM(points), 0) FROM points_ledger"),
	                 hn_db_int(d->dm_db, "SELECT COALESCE(SUM(points), 0) FROM points_ledger"));

	/* A target that holds rows is refused, unless --replace. */
	assert_int_equal(daemon_cli(d, 0, copy, &out), 65);
	free(out);
	assert_int_equal(daemon_cli(d, 0, replace, &out), 0);
	free(out);
	assert_int_equal(hn_db_int(copy_db, "SELECT count(*) FROM orders"), 2);
}

static int setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(
	                test_a_second_serve_on_the_same_file_is_refused_and_the_first_keeps_serving,
	                setup, daemon_teardown),
	        cmocka_unit_test_setup_teardown(test_after_the_first_stops_a_new_serve_starts,
	                                        setup, daemon_teardown),
	        cmocka_unit_test_setup_teardown(test_a_killed_serve_leaves_no_lock_behind, setup,
	                                        daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_store_copy_is_refused_beside_serve_and_copies_every_row_after, setup,
	                daemon_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
