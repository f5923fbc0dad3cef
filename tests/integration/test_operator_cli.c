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
#include "store.h"

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

/* order create takes what POST /api/orders takes, by the same rules: an
 * order the API would refuse is a usage error (64) that says why, and
 * nothing is stored. */
static void test_order_create_refuses_what_the_order_api_refuses(void **state)
{
	/* The last one's --customer is 5000 bytes (big, below); \302\205 is
	 * U+0085 NEL. */
	static const struct {
		const char *ro_amount;
		const char *ro_customer; /* NULL: no --customer */
	} refused[] = {
	        {"0", NULL},         {"1000000000000001", NULL},
	        {"5", ""},           {"5", "x\n\x1b[31mRED"},
	        {"5", "a\302\205b"}, {"5", "a\xff"},
	        {"5", NULL},
	};
	struct daemon *d = *state;
	char big[5001];
	char *out = NULL;
	char *log;
	int64_t before = fx_db_int(d, "SELECT count(*) FROM orders");
	size_t i;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		const char *customer = i == sizeof(refused) / sizeof(refused[0]) - 1
		                               ? big
		                               : refused[i].ro_customer;
		const char *args[] = {"order",
		                      "create",
		                      "--amount",
		                      refused[i].ro_amount,
		                      "--currency",
		                      "eur",
		                      customer != NULL ? "--customer" : NULL,
		                      customer,
		                      NULL};

		if (daemon_cli(d, 1, args, &out) != 64) {
			fail_msg("order create #%zu: want exit 64", i);
		}
		assert_true(out == NULL || out[0] == '\0');
		free(out);
		out = NULL;
	}
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM orders"), before);
	log = hn_read_file(d->dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "idemhook order create: amount must be a positive whole "
	                            "number of minor units"));
	assert_non_null(strstr(log, "idemhook order create: customer_ref must be a string of 1 "
	                            "to 128 bytes of UTF-8 without control characters."));
	free(log);
	/* Text in any script is a reference. */
	{
		const char *args[] = {
		        "order",      "create", "--amount",   "5",
		        "--currency", "eur",    "--customer", "Zo\xc3\xab \xe4\xb8\xad",
		        NULL};

		assert_int_equal(daemon_cli(d, 1, args, &out), 0);
		assert_non_null(out);
		assert_true(strncmp(out, "ord_", 4) == 0);
		free(out);
	}
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM orders WHERE customer_ref = "
	                              "'Zo\xc3\xab \xe4\xb8\xad'"),
	                 1);
}

struct t_set_ref {
	const char *sr_id;
	const char *sr_ref;
};

static int t_set_ref_unit(struct store_tx *tx, void *arg)
{
	const struct t_set_ref *sr = arg;
	struct store_value p[] = {store_text(sr->sr_ref), store_text(sr->sr_id)};

	return store_exec(tx, "UPDATE orders SET customer_ref = ? WHERE id = ?", p, 2, NULL);
}

/* A reference an older version stored with control characters in it is
 * shown escaped: it cannot colour the terminal, move the cursor or forge
 * a line of the output. */
static void test_order_show_and_list_escape_control_characters_already_stored(void **state)
{
	static const char *const list[] = {"order", "list", "--limit", "1", NULL};
	struct daemon *d = *state;
	struct store_options so;
	struct t_set_ref sr;
	struct store *st;
	char id[64];
	char *out = NULL;
	const char *show[] = {"order", "show", id, NULL};

	fx_order(d, 1999, "usd", id);
	memset(&so, 0, sizeof(so));
	assert_int_equal(store_location_parse(d->dm_db, &so), 0);
	st = store_create(&so);
	assert_non_null(st);
	sr.sr_id = id;
	sr.sr_ref = "x\n\x1b[31mRED\xc2\x9b\xff\\";
	assert_int_equal(store_write(st, hn_now_ms(), t_set_ref_unit, &sr), 0);
	store_destroy(st);

	assert_int_equal(daemon_cli(d, 1, show, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "customer ref:       x\\n\\x1b[31mRED\\u009b\\xff\\\\\n"));
	assert_null(strchr(out, '\x1b'));
	assert_null(strstr(out, "\xc2\x9b"));
	free(out);
	assert_int_equal(daemon_cli(d, 1, list, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, " x\\n\\x1b[31mRED\\u009b\\xff\\\\\n"));
	assert_null(strchr(out, '\x1b'));
	free(out);
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
 * a wrong command line to them is still a usage error (64),
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
	static const char *const usage[][6] = {
	        {"events", "list", "--status", "faild", NULL},
	        {"events", "list", "--bogus", NULL},
	        {"events", "dismiss", "x7", "--reason", "never applies", NULL},
	        {"events", "dismiss", "1", NULL},
	        {"events", "dismiss", "--provider", "stripe", "--frob", NULL},
	        {"outbox", "list", "--bogus", NULL},
	        {"outbox", "list", "--status", "failed", NULL},
	        {"audit", "list", "--action", "events.dismis", NULL},
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
	/* A wrong command line is a usage error (64) before the database is
	 * looked at: not "the database does not exist" for a typo. */
	for (i = 0; i < sizeof(usage) / sizeof(usage[0]); i++) {
		rc = daemon_cli(&d, 1, usage[i], &out);
		free(out);
		out = NULL;
		if (rc != 64 || t_exists(sub)) {
			fail_msg("%s %s %s: exit %d, not 64, or %s was created", usage[i][0],
			         usage[i][1], usage[i][2], rc, sub);
		}
	}
	assert_true(
	        t_log_has(&d, "idemhook events: --status is done, failed, fetching or processing"));
	assert_true(t_log_has(&d, "idemhook events dismiss: \"x7\" is not an event ID"));
	assert_true(t_log_has(&d, "idemhook events dismiss: --reason TEXT is required"));

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

/* -c (or --config) as the last word, without its file, is said as such,
 * before or after the command, not taken for an unknown option. */
static void test_config_flag_without_a_file_says_it_needs_one(void **state)
{
	static const char *const cases[][4] = {
	        {"-c", NULL},
	        {"--config", NULL},
	        {"events", "list", "-c", NULL},
	};
	struct daemon d;
	char *out = NULL;
	char *log;
	size_t i;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(daemon_cli(&d, 0, cases[i], &out), 64);
		free(out);
		out = NULL;
	}
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "idemhook: -c needs a file name"));
	assert_non_null(strstr(log, "idemhook: --config needs a file name"));
	assert_null(strstr(log, "unknown option"));
	free(log);
	daemon_finish(&d);
}

/* With the database write-locked by another process, every command that
 * writes exits 75 and ends with one line: what is unchanged, and that the
 * same command can be run again; and it is unchanged, and the same
 * command run again once the lock is gone does it. */
static void test_a_write_command_on_a_locked_database_says_what_is_unchanged(void **state)
{
	struct daemon d;
	struct hn_sqlite lock;
	char id_text[32];
	char *out = NULL;
	char *log;
	int64_t id;
	const char *create[] = {"order", "create", "--amount", "100", "--currency", "usd", NULL};
	const char *dismiss_ids[] = {"events",   "dismiss", id_text, id_text,
	                             "--reason", "test",    NULL};
	const char *dismiss_filter[] = {"events", "dismiss",   "--provider", "stripe", "--reason",
	                                "test",   "--confirm", "1",          NULL};
	const char *reprocess[] = {"events", "reprocess", id_text, NULL};
	const char *cancel[] = {"outbox", "cancel", "1", NULL};
	const char *const *cmds[] = {create, dismiss_ids, dismiss_filter, reprocess, cancel};
	char said[5][300];
	size_t i;

	(void)state;
	fx_daemon_start(&d, "%s[store]\nbusy_timeout_ms = 200\n", FX_STRIPE_INI);
	assert_int_equal(
	        fx_stripe_pay(&d, "evt_cli_locked", "ord_cli_no_such_order0002", 500, "usd"), 200);
	id = fx_db_int(&d, "SELECT id FROM events WHERE idem_key = 'evt_cli_locked'");
	snprintf(id_text, sizeof(id_text), "%lld", (long long)id);
	snprintf(said[0], sizeof(said[0]),
	         "idemhook order create: the database is busy or failing; no order was created. "
	         "Run the same command again.\n");
	snprintf(said[1], sizeof(said[1]),
	         "idemhook events dismiss: the database is busy or failing; event %s and the ones "
	         "after it are unchanged. Run the same command again.\n",
	         id_text);
	snprintf(said[2], sizeof(said[2]),
	         "idemhook events dismiss: the database is busy or failing; nothing was dismissed. "
	         "Run the same command again.\n");
	snprintf(said[3], sizeof(said[3]),
	         "idemhook events reprocess: the database is busy or failing; event %s is "
	         "unchanged. Run the same command again.\n",
	         id_text);
	snprintf(said[4], sizeof(said[4]),
	         "idemhook outbox cancel: the database is busy or failing; row 1 is unchanged. "
	         "Run the same command again.\n");
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM orders"), 0);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		assert_int_equal(daemon_cli(&d, 1, cmds[i], &out), 75);
		free(out);
		out = NULL;
		log = hn_read_file(d.dm_log);
		assert_non_null(log);
		if (strstr(log, said[i]) == NULL) {
			print_error("%s %s: no \"%s\" in:\n%s\n", cmds[i][0], cmds[i][1], said[i],
			            log);
		}
		assert_non_null(strstr(log, said[i]));
		free(log);
	}
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	/* unchanged, as said; and run again, it is done */
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM orders"), 0);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 0);
	assert_int_equal(daemon_cli(&d, 1, create, &out), 0);
	free(out);
	out = NULL;
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM orders"), 1);
	assert_int_equal(daemon_cli(&d, 1, dismiss_filter, &out), 0);
	free(out);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 1);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* audit list says a bad value with the whole command's name and the value;
 * a misspelt action is refused with the actions there are, and a filter
 * that matches nothing is named, not read as an empty log. */
static void test_audit_list_says_a_bad_value_and_names_a_filter_that_matches_nothing(void **state)
{
	static const char *const bad[][6] = {
	        {"audit", "list", "--before", "abc", NULL},
	        {"audit", "list", "--before", "-3", NULL},
	        {"audit", "list", "--limit", "0", NULL},
	        {"audit", "lst", NULL},
	};
	static const char *const said[] = {
	        "idemhook audit list: --before \"abc\" is not an audit row ID (the ID column gives "
	        "one)\n",
	        "idemhook audit list: --before \"-3\" is not an audit row ID (the ID column gives "
	        "one)\n",
	        "idemhook audit list: --limit wants 1..100000\n",
	        "idemhook audit: \"lst\" is no subcommand (list is the one)\n",
	};
	static const char *const misspelt[] = {"audit", "list", "--action", "events.dismis", NULL};
	static const char *const nothing_yet[] = {"audit", "list", "--action", "outbox.retry_all",
	                                          NULL};
	struct daemon d;
	char *err = NULL;
	char *out = NULL;
	char *log;
	size_t i;

	(void)state;
	fx_daemon_start(&d, "%s", FX_STRIPE_INI);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(daemon_cli(&d, 1, bad[i], &out), 64);
		assert_true(out == NULL || out[0] == '\0');
		free(out);
		out = NULL;
	}
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	for (i = 0; i < sizeof(said) / sizeof(said[0]); i++) {
		if (strstr(log, said[i]) == NULL) {
			print_error("no \"%s\" in:\n%s\n", said[i], log);
		}
		assert_non_null(strstr(log, said[i]));
	}
	free(log);
	assert_int_equal(daemon_cli_err(&d, 1, misspelt, &out, &err), 64);
	assert_true(out == NULL || out[0] == '\0');
	assert_non_null(err);
	assert_string_equal(err, "idemhook audit list: --action \"events.dismis\" is no action; "
	                         "the actions: console.login events.dismiss events.reprocess "
	                         "order.reconcile outbox.cancel outbox.compensate outbox.retry "
	                         "outbox.retry_all\n");
	free(out);
	free(err);
	assert_int_equal(daemon_cli(&d, 1, nothing_yet, &out), 0);
	assert_non_null(out);
	assert_string_equal(out, "no audit entries with action \"outbox.retry_all\"\n");
	free(out);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* serve started while another process holds the write lock past the busy
 * timeout, with [outbound] configured: the worker cannot give back the
 * calls a previous run left delivering (a write), and serve says so and
 * exits 75, which systemd restarts; never 78, a bad file, which it does
 * not (RestartPreventExitStatus=78). */
static void test_serve_under_a_held_write_lock_with_outbound_exits_75_not_78(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const serve[] = {"serve", NULL};
	struct hn_sqlite lock;
	struct daemon d;
	char *out = NULL;
	char *err = NULL;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* SQLite's write lock */
	}
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI "\n[store]\nbusy_timeout_ms = 200\n"
	                                               "\n[outbound]\nnotify_url = "
	                                               "http://127.0.0.1:9/notify\n"),
	                 0);
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(daemon_cli_err(&d, 1, serve, &out, &err), 75);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_non_null(err);
	if (strstr(err, "<3>serve: the outbound worker could not start") == NULL) {
		print_error("%s", err);
	}
	assert_non_null(strstr(err, "database is locked"));
	assert_non_null(strstr(err, "<3>serve: the outbound worker could not start (the line "
	                            "above says why); idemhook did not start and nothing was "
	                            "delivered"));
	free(out);
	free(err);
	daemon_finish(&d);
}

/* Without [outbound] the start still queues again the calls a previous
 * run left delivering; under a held write lock that write fails, the
 * daemon starts all the same and says what stays as it was. */
static void test_serve_under_a_held_write_lock_without_outbound_says_what_stays(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	struct hn_sqlite lock;
	struct daemon d;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* SQLite's write lock */
	}
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI "\n[store]\nbusy_timeout_ms = 200\n"), 0);
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(daemon_log_wait(&d,
	                                 "<5>outbound: calls a previous run left delivering stay "
	                                 "so for now (the line above says why)",
	                                 10000),
	                 0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(daemon_term(&d, 10), 0);
	daemon_finish(&d);
}

/* An option a command does not know is said with the whole command's
 * name, a subcommand's too, never with the subcommand's word alone. */
static void test_an_unknown_option_names_the_whole_command(void **state)
{
	static const char *const cases[][4] = {
	        {"events", "dismiss", "--bogus", NULL},
	        {"events", "list", "--bogus", NULL},
	        {"audit", "list", "--bogus", NULL},
	        {"order", "create", "--bogus", NULL},
	        {"stats", "--bogus", NULL},
	        {"gc", "--bogus", NULL},
	        {"outbox", "list", "--bogus", NULL},
	        {"replay", "--bogus", NULL},
	        {"store", "copy", "--bogus", NULL},
	};
	static const char *const said[] = {
	        "idemhook events dismiss: unrecognized option '--bogus'\n",
	        "idemhook events list: unrecognized option '--bogus'\n",
	        "idemhook audit list: unrecognized option '--bogus'\n",
	        "idemhook order create: unrecognized option '--bogus'\n",
	        "idemhook stats: unrecognized option '--bogus'\n",
	        "idemhook gc: unrecognized option '--bogus'\n",
	        "idemhook outbox list: unrecognized option '--bogus'\n",
	        "idemhook replay: unrecognized option '--bogus'\n",
	        "idemhook store copy: unrecognized option '--bogus'\n",
	};
	static const char *const stats_since[] = {"stats", "--since", NULL};
	struct daemon d;
	char *out = NULL;
	char *err = NULL;
	size_t i;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(daemon_cli_err(&d, 1, cases[i], &out, &err), 64);
		assert_non_null(err);
		if (strncmp(err, said[i], strlen(said[i])) != 0) {
			print_error("not \"%s\" first in:\n%s\n", said[i], err);
		}
		assert_int_equal(strncmp(err, said[i], strlen(said[i])), 0);
		free(out);
		free(err);
		out = NULL;
	}
	assert_int_equal(daemon_cli_err(&d, 1, stats_since, &out, &err), 64);
	assert_non_null(err);
	assert_non_null(strstr(err, "idemhook stats: option '--since' requires an argument\n"));
	free(out);
	free(err);
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
	        cmocka_unit_test(test_order_create_refuses_what_the_order_api_refuses),
	        cmocka_unit_test(test_order_show_and_list_escape_control_characters_already_stored),
	        cmocka_unit_test(test_commands_on_a_missing_database_create_nothing),
	        cmocka_unit_test(test_store_copy_refuses_an_unknown_scheme_and_a_missing_source),
	        cmocka_unit_test(test_config_flag_without_a_file_says_it_needs_one),
	        cmocka_unit_test(test_a_write_command_on_a_locked_database_says_what_is_unchanged),
	        cmocka_unit_test(test_an_unknown_option_names_the_whole_command),
	        cmocka_unit_test(test_serve_under_a_held_write_lock_with_outbound_exits_75_not_78),
	        cmocka_unit_test(
	                test_serve_under_a_held_write_lock_without_outbound_says_what_stays),
	        cmocka_unit_test(
	                test_audit_list_says_a_bad_value_and_names_a_filter_that_matches_nothing),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
