/* test_migrate_pages_e2e.c: `idemhook migrate` carries a database of the
 * schema before migration fewer_pages_per_callback, with rows in it, forward
 * on SQLite and (suite postgresql) on PostgreSQL: every order reference is
 * kept, the table takes its new form (SQLite: WITHOUT ROWID), the index no
 * query reads is gone, and a refund that names only the payment still finds
 * its order through the migrated table; and a new SQLite database is made
 * with the page size the benchmark chose. The same through migration
 * narrow_order_refs_key (order_refs a rowid table again, its key a unique
 * index), and through checks_as_domains (on PostgreSQL the single-column
 * CHECK constraints of the tables a callback writes become domains): the
 * rows kept, every rule still refusing what it refused. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "pgserver.h"
#include "provider_e2e.h"

#define T_MIGRATION "_fewer_pages_per_callback.sql"

/* Rows of the schema before the migration: a paid order known under its
 * payment and its charge, its points, and the callback that paid it (its
 * idempotency record and event). blob is the backend's literal of a
 * 32-byte fingerprint. */
/* hn_db_build_before's rows, with the backend's literal of a 32-byte
 * fingerprint. */
static void t_rows(struct buf *sql, int pg, void *arg)
{
	const char *blob = pg ? "decode(repeat('ab', 32), 'hex')" : "randomblob(32)";

	(void)arg;
	buf_printf(
	        sql,
	        "INSERT INTO orders (id, amount, currency, status, provider, payment_ref, "
	        "created_at,"
	        " paid_at, updated_at) VALUES ('ord_pages_paid', 2000, 'USD', 'paid', 'stripe',"
	        " 'pi_pages_paid', 1, 2, 2), ('ord_pages_pend', 500, 'EUR', 'pending', NULL, NULL, "
	        "1,"
	        " NULL, 1);\n"
	        "INSERT INTO order_refs (provider, ref, order_id, kind, created_at) VALUES"
	        " ('stripe', 'pi_pages_paid', 'ord_pages_paid', 'payment', 2),"
	        " ('stripe', 'ch_pages_paid', 'ord_pages_paid', 'charge', 2);\n"
	        "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) VALUES"
	        " ('ord_pages_paid', 'award', 'ord_pages_paid', 20, 2);\n"
	        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	        "reply_status,"
	        " reply_content_type, reply_body, fence_token, created_at, updated_at) VALUES"
	        " ('stripe', 'evt_pages_paid', 'done', %s, 200, 'application/json', NULL, 1, 2, "
	        "2);\n"
	        "INSERT INTO events (scope, idem_key, type, kind, order_ref, payment_ref, amount,"
	        " currency, outcome, effect, received_at, processed_at) VALUES ('stripe',"
	        " 'evt_pages_paid', 'payment_intent.succeeded', 'payment', 'ord_pages_paid',"
	        " 'pi_pages_paid', 2000, 'USD', 'done', 'paid', 2, 2);\n",
	        blob);
}

/* Makes d's database at the schema before migration with rows, runs
 * `idemhook migrate` and returns order_refs afterwards, one line per row
 * (the caller frees it); skips the test when there is no sqlite3 command.
 * *ret_pg: 1 on PostgreSQL. */
static char *t_migrate_refs(struct daemon *d, const char *migration,
                            void (*rows)(struct buf *sql, int pg, void *arg), int *ret_pg)
{
	char *after;

	*ret_pg = e2e_migrate_from(d, FX_STRIPE_INI, migration, rows, NULL);
	after = hn_db_dump(d->dm_db, "SELECT provider, ref, order_id, kind, created_at FROM "
	                             "order_refs ORDER BY ref");
	assert_non_null(after);
	return after;
}

/* Posts the signed Stripe event body (freed here) and checks the answer is
 * a 200 whose body holds want (when not NULL). */
static void t_post(struct daemon *d, char *body, const char *want)
{
	struct hres r;

	assert_int_equal(hn_post_stripe(d, "stripe", FX_STRIPE_SECRET, body, &r), 0);
	free(body);
	assert_int_equal(r.hs_status, 200);
	if (want != NULL) {
		assert_non_null(strstr(r.hs_body, want));
	}
	hres_finish(&r);
}

/* A full refund of the charge ch of payment pi, naming no order. */
static char *t_refund(const char *key, const char *ch, const char *pi)
{
	char obj[512];

	snprintf(obj, sizeof(obj),
	         "{\"id\":\"%s\",\"object\":\"charge\",\"amount\":2000,"
	         "\"amount_refunded\":2000,\"currency\":\"usd\",\"payment_intent\":"
	         "\"%s\",\"metadata\":{}}",
	         ch, pi);
	return hn_stripe_event(key, "charge.refunded", obj);
}

static void test_migrate_keeps_order_refs_in_their_new_form(void **state)
{
	char *after;
	struct daemon d;
	int pg;

	(void)state;
	after = t_migrate_refs(&d, T_MIGRATION, t_rows, &pg);
	assert_string_equal(after, "stripe|ch_pages_paid|ord_pages_paid|charge|2\n"
	                           "stripe|pi_pages_paid|ord_pages_paid|payment|2\n");
	assert_int_equal(
	        e2e_db_int(&d, "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_pages_paid'"), 1);
	assert_int_equal(
	        e2e_db_int(&d, "SELECT COUNT(*) FROM idempotency_records WHERE status = 'done'"),
	        1);
	if (pg) {
		assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM pg_indexes WHERE indexname = "
		                                "'order_refs_order'"),
		                 0);
	} else {
		assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM sqlite_master WHERE name = "
		                                "'order_refs_order'"),
		                 0);
		/* its form since narrow_order_refs_key: a rowid table whose key
		 * is a unique index (test_migrate_narrows_the_order_refs_key) */
		assert_int_equal(e2e_db_int(&d,
		                            "SELECT COUNT(*) FROM pragma_index_list('order_refs')"
		                            " WHERE name = 'order_refs_ref' AND \"unique\" = 1"),
		                 1);
	}

	/* The daemon on the migrated database: a refund naming only the charge
	 * finds its order through order_refs, and the callback stored before
	 * the upgrade is still a duplicate. */
	assert_int_equal(daemon_start(&d), 0);
	t_post(&d, t_refund("evt_pages_refund", "ch_pages_paid", "pi_pages_paid"),
	       "\"outcome\":\"refunded\"");
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE id = 'ord_pages_paid'"
	                                " AND status = 'refunded'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM order_refs"), 2);
	free(after);
	daemon_finish(&d);
}

/* A new SQLite database is made with 1 KiB pages; one made before keeps
 * its page size through the migration (SQLite cannot change it in WAL). */
static void test_new_database_has_small_pages(void **state)
{
	static const char *const args[] = {"migrate", NULL};
	struct daemon d;
	int rc;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	if (d.dm_pg_db[0] != '\0') {
		daemon_finish(&d);
		skip(); /* PostgreSQL's pages are the server's */
	}
	assert_int_equal(daemon_cli(&d, 1, args, NULL), 0);
	assert_int_equal(e2e_db_int(&d, "SELECT page_size FROM pragma_page_size"), 1024);
	daemon_finish(&d);

	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	rc = hn_db_build_before(&d, T_MIGRATION, t_rows, NULL);
	if (rc == 1) {
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(daemon_cli(&d, 1, args, NULL), 0);
	assert_int_equal(e2e_db_int(&d, "SELECT page_size FROM pragma_page_size"), 4096);
	daemon_finish(&d);
}

#define T_NARROW "_narrow_order_refs_key.sql"

/* Rows of the schema before narrow_order_refs_key (one row per key since
 * merge_events_into_records): a paid order known under its payment and
 * its charge, its points and the callback that paid it, and a pending
 * order. */
static void t_rows_narrow(struct buf *sql, int pg, void *arg)
{
	const char *blob = pg ? "decode(repeat('ab', 32), 'hex')" : "randomblob(32)";

	(void)arg;
	buf_printf(
	        sql,
	        "INSERT INTO orders (id, amount, currency, status, provider, payment_ref, "
	        "created_at, paid_at, updated_at) VALUES ('ord_narrow_paid', 2000, 'USD', "
	        "'paid', 'stripe', 'pi_narrow_paid', 1, 2, 2), ('ord_narrow_pend', 500, 'EUR', "
	        "'pending', NULL, NULL, 1, NULL, 1);\n"
	        "INSERT INTO order_refs (provider, ref, order_id, kind, created_at) VALUES"
	        " ('stripe', 'pi_narrow_paid', 'ord_narrow_paid', 'payment', 3),"
	        " ('stripe', 'ch_narrow_paid', 'ord_narrow_paid', 'charge', 2);\n"
	        "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) VALUES"
	        " ('ord_narrow_paid', 'award', 'ord_narrow_paid', 20, 2);\n"
	        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	        "reply_status, reply_content_type, reply_body, fence_token, created_at, "
	        "updated_at, type, kind, order_ref, payment_ref, amount, currency, outcome, "
	        "effect, received_at, processed_at) VALUES ('stripe', 'evt_narrow_paid', 'done', "
	        "%s, 200, 'application/json', NULL, 1, 2, 2, 'payment_intent.succeeded', "
	        "'payment_succeeded', 'ord_narrow_paid', 'pi_narrow_paid', 2000, 'USD', 'done', "
	        "'paid', 2, 2);\n",
	        blob);
}

/* A Stripe payment of the pending order, under the event id key. */
static char *t_pend_payment(const char *key)
{
	return hn_stripe_event(key, "payment_intent.succeeded",
	                       "{\"id\":\"pi_narrow_pend\",\"object\":\"payment_intent\","
	                       "\"amount\":500,\"amount_received\":500,\"currency\":\"eur\","
	                       "\"metadata\":{\"order_id\":\"ord_narrow_pend\"}}");
}

/* `idemhook migrate` carries order_refs through narrow_order_refs_key: every
 * reference kept, the key a unique index (SQLite: no longer WITHOUT ROWID);
 * then a refund naming only the charge finds its order, a payment binds its
 * reference (the ON CONFLICT target is the new index) and a second event of
 * the same payment binds nothing more. */
static void test_migrate_narrows_the_order_refs_key(void **state)
{
	char *after;
	struct daemon d;
	int pg;

	(void)state;
	after = t_migrate_refs(&d, T_NARROW, t_rows_narrow, &pg);
	assert_string_equal(after, "stripe|ch_narrow_paid|ord_narrow_paid|charge|2\n"
	                           "stripe|pi_narrow_paid|ord_narrow_paid|payment|3\n");
	free(after);
	if (!pg) {
		assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM sqlite_master WHERE name = "
		                                "'order_refs' AND sql LIKE '%%WITHOUT ROWID'"),
		                 0);
		assert_int_equal(e2e_db_int(&d,
		                            "SELECT COUNT(*) FROM pragma_index_list('order_refs')"
		                            " WHERE name = 'order_refs_ref' AND \"unique\" = 1"),
		                 1);
		after = hn_db_dump(d.dm_db, "SELECT name FROM pragma_index_info('order_refs_ref') "
		                            "ORDER BY seqno");
		assert_non_null(after);
		assert_string_equal(after, "provider\nref\n");
		free(after);
	}

	assert_int_equal(daemon_start(&d), 0);
	t_post(&d, t_refund("evt_narrow_refund", "ch_narrow_paid", "pi_narrow_paid"),
	       "\"outcome\":\"refunded\"");
	t_post(&d, t_pend_payment("evt_narrow_pend_1"), "\"outcome\":\"paid\"");
	t_post(&d, t_pend_payment("evt_narrow_pend_2"), NULL);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE id = 'ord_narrow_paid'"
	                                " AND status = 'refunded'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE id = 'ord_narrow_pend'"
	                                " AND status = 'paid'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM order_refs WHERE provider = 'stripe'"
	                                " AND ref = 'pi_narrow_pend' AND order_id = "
	                                "'ord_narrow_pend'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM order_refs"), 3);
	daemon_finish(&d);
}

#define T_DOMAINS "_checks_as_domains.sql"

/* 1 when d's database refuses sql (a statement of its own, through psql or
 * the sqlite3 shell), 0 when it took it. */
static int t_refused(struct daemon *d, const char *sql)
{
	char cmd[2048];
	int rc;

	if (d->dm_pg_db[0] != '\0') {
		return pgserver_psql(pgserver_shared(NULL), d->dm_pg_db, sql, NULL) != 0;
	}
	snprintf(cmd, sizeof(cmd), "sqlite3 -bail '%s' \"%s\" > /dev/null 2>&1", d->dm_db, sql);
	rc = system(cmd);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) != 127);
	return WEXITSTATUS(rc) != 0;
}

/* `idemhook migrate` carries a database with rows through
 * checks_as_domains: on PostgreSQL the columns take their domains and the
 * tables keep only the CHECK that joins several columns; on both backends
 * every rule still refuses what it refused (a status, outcome, source,
 * reason or kind outside its list, a negative amount, an event row without
 * its processing time) and takes what it took; then a refund and a payment
 * run on the migrated database. */
static void test_migrate_keeps_every_check_as_a_domain(void **state)
{
	static const char *const refused[] = {
	        "UPDATE orders SET status = 'shipped' WHERE id = 'ord_narrow_pend'",
	        "UPDATE orders SET amount = -1 WHERE id = 'ord_narrow_pend'",
	        "UPDATE orders SET refunded_amount = -5 WHERE id = 'ord_narrow_paid'",
	        "UPDATE orders SET disputed_amount = -5 WHERE id = 'ord_narrow_paid'",
	        "UPDATE orders SET chargeback_amount = -5 WHERE id = 'ord_narrow_paid'",
	        "UPDATE orders SET fulfillment_status = 'lost' WHERE id = 'ord_narrow_paid'",
	        "INSERT INTO orders (id, amount, currency, status, created_at, updated_at) VALUES "
	        "('ord_narrow_bad', 100, 'USD', 'unknown', 1, 1)",
	        "UPDATE idempotency_records SET status = 'gone' WHERE idem_key = 'evt_narrow_paid'",
	        "UPDATE idempotency_records SET outcome = 'maybe' WHERE idem_key = "
	        "'evt_narrow_paid'",
	        "UPDATE idempotency_records SET source = 'guess' WHERE idem_key = "
	        "'evt_narrow_paid'",
	        "UPDATE idempotency_records SET processed_at = NULL WHERE idem_key = "
	        "'evt_narrow_paid'",
	        "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) VALUES "
	        "('ord_narrow_paid', 'bonus', 'x', 1, 1)",
	        "INSERT INTO order_refs (provider, ref, order_id, kind, created_at) VALUES "
	        "('stripe', 'in_narrow', 'ord_narrow_paid', 'invoice', 1)",
	};
	char *after;
	struct daemon d;
	size_t i;
	int pg;

	(void)state;
	after = t_migrate_refs(&d, T_DOMAINS, t_rows_narrow, &pg);
	assert_string_equal(after, "stripe|ch_narrow_paid|ord_narrow_paid|charge|2\n"
	                           "stripe|pi_narrow_paid|ord_narrow_paid|payment|3\n");
	free(after);
	after = hn_db_dump(d.dm_db, "SELECT id, amount, status, refunded_amount, "
	                            "fulfillment_status FROM orders ORDER BY id");
	assert_non_null(after);
	assert_string_equal(after, "ord_narrow_paid|2000|paid|0|pending\n"
	                           "ord_narrow_pend|500|pending|0|pending\n");
	free(after);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events WHERE outcome = 'done'"
	                                " AND source = 'callback'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT SUM(points) FROM points_ledger WHERE reason = "
	                                "'award'"),
	                 20);
	if (pg) {
		assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM information_schema.columns"
		                                " WHERE table_schema = current_schema() AND"
		                                " table_name IN ('orders', 'idempotency_records',"
		                                " 'points_ledger', 'order_refs') AND domain_name IS"
		                                " NOT NULL"),
		                 11);
		assert_int_equal(e2e_db_int(&d,
		                            "SELECT COUNT(*) FROM pg_constraint WHERE contype ="
		                            " 'c' AND conrelid IN ('orders'::regclass,"
		                            " 'idempotency_records'::regclass,"
		                            " 'points_ledger'::regclass, 'order_refs'::regclass)"),
		                 1);
	}
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		if (!t_refused(&d, refused[i])) {
			fail_msg("taken after the migration: %s", refused[i]);
		}
	}
	assert_int_equal(t_refused(&d, "UPDATE orders SET status = 'pending', amount = 500,"
	                               " fulfillment_status = 'pending' WHERE id ="
	                               " 'ord_narrow_pend'"),
	                 0);

	assert_int_equal(daemon_start(&d), 0);
	t_post(&d, t_refund("evt_domains_refund", "ch_narrow_paid", "pi_narrow_paid"),
	       "\"outcome\":\"refunded\"");
	t_post(&d, t_pend_payment("evt_domains_pend"), "\"outcome\":\"paid\"");
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'refunded'"
	                                " AND refunded_amount = 2000"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE id = 'ord_narrow_pend'"
	                                " AND status = 'paid'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events WHERE idem_key LIKE"
	                                " 'evt_domains_%%' AND outcome = 'done'"),
	                 2);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_migrate_keeps_order_refs_in_their_new_form),
	        cmocka_unit_test(test_new_database_has_small_pages),
	        cmocka_unit_test(test_migrate_narrows_the_order_refs_key),
	        cmocka_unit_test(test_migrate_keeps_every_check_as_a_domain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
