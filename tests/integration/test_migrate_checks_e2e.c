/* test_migrate_checks_e2e.c: migration compare_checks_in_place rewrites
 * the SQLite CHECK constraints that listed three or more values with IN
 * (SQLite builds a temporary b-tree for such a list every time a statement
 * checks it) as comparisons joined by OR: `idemhook migrate` carries a
 * database of the schema before it, with rows in it, forward with every row
 * kept, no such list left, each rewritten check still refusing a value
 * outside its list and taking the last value of it, and the daemon paying
 * an order on the migrated database; a new database gets the same checks.
 * On PostgreSQL (suite postgresql) the migration changes nothing and the
 * rows and the payment are checked alike. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "provider_e2e.h"
#include "store.h"

#define T_MIGRATION "_compare_checks_in_place.sql"

/* Rows of the schema before the migration, one in each table whose check
 * it rewrites: a paid order with its points, its callback's record, an open
 * dispute with its step and an outbox row, and a pending order. */
static void t_rows(struct buf *sql, int pg, void *arg)
{
	const char *blob = pg ? "decode(repeat('ab', 32), 'hex')" : "randomblob(32)";

	(void)arg;
	buf_printf(
	        sql,
	        "INSERT INTO orders (id, amount, currency, status, provider, payment_ref, "
	        "created_at, paid_at, updated_at) VALUES ('ord_checks_paid', 2000, 'USD', "
	        "'paid', 'stripe', 'pi_checks_paid', 1, 2, 2), ('ord_checks_pend', 500, 'EUR', "
	        "'pending', NULL, NULL, 1, NULL, 1);\n"
	        "INSERT INTO order_refs (provider, ref, order_id, kind, created_at) VALUES"
	        " ('stripe', 'pi_checks_paid', 'ord_checks_paid', 'payment', 2);\n"
	        "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) VALUES"
	        " ('ord_checks_paid', 'award', 'ord_checks_paid', 20, 2);\n"
	        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	        "reply_status, reply_content_type, reply_body, fence_token, created_at, "
	        "updated_at, type, kind, order_ref, payment_ref, amount, currency, outcome, "
	        "effect, received_at, processed_at) VALUES ('stripe', 'evt_checks_paid', 'done', "
	        "%s, 200, 'application/json', NULL, 1, 2, 2, 'payment_intent.succeeded', "
	        "'payment_succeeded', 'ord_checks_paid', 'pi_checks_paid', 2000, 'USD', 'done', "
	        "'paid', 2, 2);\n"
	        "INSERT INTO disputes (order_id, provider, dispute_ref, amount, status, "
	        "created_at, updated_at) VALUES ('ord_checks_paid', 'stripe', 'dp_checks', 2000, "
	        "'open', 3, 3);\n"
	        "INSERT INTO dispute_steps (provider, dispute_ref, step_key, outcome, created_at)"
	        " VALUES ('stripe', 'dp_checks', 'evt_checks_dispute', 'opened', 3);\n"
	        "INSERT INTO outbox (order_id, call_type, effect, provider, url, content_type, "
	        "body, idem_key, window_start, next_attempt_at, created_at, updated_at) VALUES "
	        "('ord_checks_paid', 'notify', 'paid', 'stripe', 'http://127.0.0.1:9/n', "
	        "'application/json', '{}', 'ob_checks', 2, 2, 2, 2);\n",
	        blob);
}

/* How many IN lists of three or more values the tables' definitions hold
 * (SQLite), or -1. */
static int t_long_in_lists(struct daemon *d)
{
	char *sql = hn_db_dump(d->dm_db, "SELECT sql FROM sqlite_master WHERE type = 'table'");
	const char *p;
	int n = 0;

	if (sql == NULL) {
		return -1;
	}
	for (p = strstr(sql, " IN ("); p != NULL; p = strstr(p + 1, " IN (")) {
		const char *end = strchr(p, ')');
		const char *q;
		int commas = 0;

		for (q = p; end != NULL && q < end; q++) {
			commas += *q == ',';
		}
		n += commas >= 2;
	}
	free(sql);
	return n;
}

static int t_exec_unit(struct store_tx *tx, void *arg)
{
	return store_exec(tx, arg, NULL, 0, NULL);
}

/* Runs one statement on d's database with the daemon stopped. Returns 0, or
 * -1 when the database refused it. */
static int t_exec(struct daemon *d, const char *sql)
{
	struct store_options so;
	struct store *st;
	int rc;

	memset(&so, 0, sizeof(so));
	assert_int_equal(store_location_parse(d->dm_db, &so), 0);
	st = store_create(&so);
	assert_non_null(st);
	rc = store_write(st, 0, t_exec_unit, (void *)sql);
	store_destroy(st);
	return rc < 0 ? -1 : 0;
}

/* Each rewritten check: an update it refuses, and one to the last value of
 * its list, which it takes. */
static const struct {
	const char *tc_refused;
	const char *tc_taken;
} t_checks[] = {
        {"UPDATE idempotency_records SET status = 'finished'",
         "UPDATE idempotency_records SET status = 'failed'"},
        {"UPDATE orders SET status = 'shipped' WHERE id = 'ord_checks_pend'",
         "UPDATE orders SET status = 'expired' WHERE id = 'ord_checks_pend'"},
        {"UPDATE orders SET fulfillment_status = 'lost'",
         "UPDATE orders SET fulfillment_status = 'compensated'"},
        {"UPDATE points_ledger SET reason = 'bonus'",
         "UPDATE points_ledger SET reason = 'restore'"},
        {"UPDATE disputes SET status = 'closed'", "UPDATE disputes SET status = 'lost'"},
        {"UPDATE dispute_steps SET outcome = 'closed'",
         "UPDATE dispute_steps SET outcome = 'lost'"},
        {"UPDATE outbox SET compensation = 'retry'", "UPDATE outbox SET compensation = 'manual'"},
        {"UPDATE outbox SET comp_state = 'open'", "UPDATE outbox SET comp_state = 'done'"},
        {"UPDATE outbox SET status = 'lost'", "UPDATE outbox SET status = 'cancelled'"},
};

/* A Stripe payment of the pending order, under the event id key. */
static char *t_pend_payment(const char *key)
{
	return hn_stripe_event(key, "payment_intent.succeeded",
	                       "{\"id\":\"pi_checks_pend\",\"object\":\"payment_intent\","
	                       "\"amount\":500,\"amount_received\":500,\"currency\":\"eur\","
	                       "\"metadata\":{\"order_id\":\"ord_checks_pend\"}}");
}

/* `idemhook migrate` on a database of the schema before the migration:
 * the rows are kept, no long IN list is left (SQLite), the checks hold,
 * and the daemon pays the pending order and awards its points. */
static void test_migrate_compares_checks_in_place(void **state)
{
	struct daemon d;
	struct hres r;
	char *body;
	size_t i;
	int pg;

	(void)state;
	pg = e2e_migrate_from(&d, FX_STRIPE_INI, T_MIGRATION, t_rows, NULL);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders"), 2);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE id = 'ord_checks_paid'"
	                                " AND status = 'paid' AND amount = 2000"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT SUM(points) FROM points_ledger"), 20);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events WHERE idem_key = "
	                                "'evt_checks_paid' AND effect = 'paid'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM disputes WHERE status = 'open'"), 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM dispute_steps"), 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM outbox WHERE status = 'pending'"), 1);

	/* The daemon on the migrated database: the payment is applied, its
	 * points awarded, and the callback stored before is a duplicate. */
	assert_int_equal(daemon_start(&d), 0);
	body = t_pend_payment("evt_checks_pend");
	assert_int_equal(hn_post_stripe(&d, "stripe", FX_STRIPE_SECRET, body, &r), 0);
	free(body);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "\"outcome\":\"paid\""));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE id = 'ord_checks_pend'"
	                                " AND status = 'paid'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = "
	                                "'ord_checks_pend' AND reason = 'award'"),
	                 1);
	assert_int_equal(daemon_term(&d, 10), 0);
	if (pg) {
		daemon_finish(&d);
		return;
	}

	assert_int_equal(t_long_in_lists(&d), 0);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM pragma_integrity_check WHERE "
	                                "integrity_check = 'ok'"),
	                 1);
	for (i = 0; i < sizeof(t_checks) / sizeof(t_checks[0]); i++) {
		if (t_exec(&d, t_checks[i].tc_refused) != -1) {
			fail_msg("taken: %s", t_checks[i].tc_refused);
		}
		if (t_exec(&d, t_checks[i].tc_taken) != 0) {
			fail_msg("refused: %s", t_checks[i].tc_taken);
		}
	}
	daemon_finish(&d);
}

/* A new database is made with the checks compared in place too. */
static void test_new_database_compares_checks_in_place(void **state)
{
	static const char *const args[] = {"migrate", NULL};
	struct daemon d;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	if (d.dm_pg_db[0] != '\0') {
		daemon_finish(&d);
		skip(); /* PostgreSQL's checks are unchanged */
	}
	assert_int_equal(daemon_cli(&d, 1, args, NULL), 0);
	assert_int_equal(t_long_in_lists(&d), 0);
	assert_int_equal(t_exec(&d, "INSERT INTO orders (id, amount, currency, status, "
	                            "created_at, updated_at) VALUES ('ord_checks_new', 1, 'USD', "
	                            "'open', 1, 1)"),
	                 -1);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_migrate_compares_checks_in_place),
	        cmocka_unit_test(test_new_database_compares_checks_in_place),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
