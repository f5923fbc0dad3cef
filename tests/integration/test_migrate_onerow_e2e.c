/* test_migrate_onerow_e2e.c: `idemhook migrate` carries a database of the
 * schema before migration merge_events_into_records (an event and its
 * idempotency record in two tables), with rows in it, forward on SQLite and
 * (suite postgresql) on PostgreSQL: every event keeps its id and its
 * columns in the view `events`, every record its reply, a record without
 * an event (the order API's) its key, and an event whose record gc had
 * removed becomes a key that runs again as new; then the daemon on the
 * migrated database answers duplicates of the carried keys with their
 * stored replies, byte for byte. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "pgserver.h"
#include "provider_e2e.h"

#define T_MIGRATION "_merge_events_into_records.sql"
#define T_REPLY_PAID "{\"received\":true,\"carried\":\"evt_onerow_paid\"}"
#define T_REPLY_REFUSED "{\"received\":true,\"carried\":\"evt_onerow_refused\"}"
#define T_REPLY_API "{\"id\":\"ord_onerow_api\",\"status\":\"pending\"}"

/* Rows of the schema before the migration, at times around now_ms: two
 * callbacks with their records and events (one paid, one refused and
 * dismissed), an event whose record gc removed, an order API key without an
 * event, and the orders they name. Events get ids 7, 9 and 12, records
 * 1 to 3, so the test sees which ids survive. blob is the backend's literal
 * of a 32-byte fingerprint; text_blob(s) the backend's blob of a string. */
static void t_rows(struct buf *sql, const char *blob, const char *blob_open, const char *blob_close,
                   int64_t now_ms)
{
	buf_printf(sql,
	           "INSERT INTO orders (id, amount, currency, status, provider, payment_ref, "
	           "created_at, paid_at, updated_at) VALUES"
	           " ('ord_onerow_paid', 2000, 'USD', 'paid', 'stripe', 'pi_onerow_paid', 1, 2, 2),"
	           " ('ord_onerow_gone', 2000, 'USD', 'pending', NULL, NULL, 1, NULL, 1),"
	           " ('ord_onerow_api', 700, 'EUR', 'pending', NULL, NULL, 1, NULL, 1);\n");
	buf_printf(sql,
	           "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	           "reply_status, reply_content_type, reply_headers, reply_body, fence_token, "
	           "created_at, updated_at) VALUES"
	           " ('stripe', 'evt_onerow_paid', 'done', %s, 200, 'application/json', NULL, "
	           "%s'" T_REPLY_PAID "'%s, 1, %" PRId64 ", %" PRId64 "),"
	           " ('stripe', 'evt_onerow_refused', 'failed', %s, 200, 'application/json', NULL, "
	           "%s'" T_REPLY_REFUSED "'%s, 2, %" PRId64 ", %" PRId64 "),"
	           " ('api:orders:anonymous', 'k_onerow_api', 'done', %s, 201, "
	           "'application/json', 'Location: /api/orders/ord_onerow_api', %s'" T_REPLY_API
	           "'%s, 1, %" PRId64 ", %" PRId64 ");\n",
	           blob, blob_open, blob_close, now_ms - 3000, now_ms - 3000, blob, blob_open,
	           blob_close, now_ms - 2000, now_ms - 2000, blob, blob_open, blob_close,
	           now_ms - 1000, now_ms - 1000);
	buf_printf(sql,
	           "INSERT INTO events (id, scope, idem_key, type, kind, order_ref, payment_ref, "
	           "amount, currency, payload, outcome, effect, reason, received_at, processed_at, "
	           "reprocessed, source, test_mode, dismissed_at, dismissed_by, dismiss_reason) "
	           "VALUES"
	           " (7, 'stripe', 'evt_onerow_paid', 'payment_intent.succeeded', "
	           "'payment_succeeded', 'ord_onerow_paid', 'pi_onerow_paid', 2000, 'USD', NULL, "
	           "'done', 'paid', NULL, %" PRId64 ", %" PRId64 ", 0, 'callback', 0, NULL, NULL, "
	           "NULL),"
	           " (9, 'stripe', 'evt_onerow_refused', 'payment_intent.succeeded', "
	           "'payment_succeeded', 'ord_onerow_none', 'pi_onerow_none', 100, 'USD', NULL, "
	           "'failed', NULL, 'unknown_order', %" PRId64 ", %" PRId64 ", 1, 'reconcile', 1, "
	           "%" PRId64 ", 'cli:ops', 'a test payment'),"
	           " (12, 'stripe', 'evt_onerow_gone', 'payment_intent.succeeded', "
	           "'payment_succeeded', 'ord_onerow_gone', 'pi_onerow_gone', 2000, 'USD', NULL, "
	           "'failed', NULL, 'unknown_order', 5, 6, 0, 'callback', 0, NULL, NULL, NULL);\n",
	           now_ms - 3000, now_ms - 3000, now_ms - 2000, now_ms - 2000, now_ms - 500);
	buf_printf(sql,
	           "INSERT INTO audit_log (at, actor, action, target, reason, result) VALUES"
	           " (%" PRId64 ", 'cli:ops', 'events.dismiss', 'event:9', 'a test payment', "
	           "'ok');\n",
	           now_ms - 500);
}

/* hn_db_build_before's rows: t_rows with the backend's literals; arg
 * points at now_ms. */
static void t_rows_of(struct buf *sql, int pg, void *arg)
{
	int64_t now_ms = *(const int64_t *)arg;

	if (!pg) {
		t_rows(sql, "randomblob(32)", "CAST(", " AS BLOB)", now_ms);
		return;
	}
	t_rows(sql, "decode(repeat('ab', 32), 'hex')", "convert_to(", ", 'UTF8')", now_ms);
	/* the identity sequence of events after the explicit ids, as the
	 * receiver's inserts would have left it */
	buf_printf(sql, "SELECT setval(pg_get_serial_sequence('events', 'id'), 12);\n");
}

static int64_t t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void t_expect_dump(struct daemon *d, const char *sql, const char *want)
{
	char *got = hn_db_dump(d->dm_db, sql);

	assert_non_null(got);
	if (strcmp(got, want) != 0) {
		fail_msg("%s:\ngot:\n%swant:\n%s", sql, got, want);
	}
	free(got);
}

/* A Stripe payment for order with the event id key. */
static char *t_payment(const char *key, const char *order)
{
	char obj[512];

	snprintf(
	        obj, sizeof(obj),
	        "{\"id\":\"pi_%s\",\"object\":\"payment_intent\",\"amount\":2000,"
	        "\"amount_received\":2000,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"%s\"}}",
	        order, order);
	return hn_stripe_event(key, "payment_intent.succeeded", obj);
}

/* Posts a signed Stripe payment for order with the event id key; r holds
 * the answer, which must be a 200. */
static void t_post_payment(struct daemon *d, const char *key, const char *order,
                           struct hres *r)
{
	char *body = t_payment(key, order);

	assert_int_equal(hn_post_stripe(d, "stripe", FX_STRIPE_SECRET, body, r), 0);
	free(body);
	assert_int_equal(r->hs_status, 200);
}

static void test_migrate_makes_one_row_per_key_and_keeps_ids_replies_and_keys(void **state)
{
	int64_t now_ms = t_now_ms();
	char want[2048];
	struct daemon d;
	struct hres r;
	int pg;

	(void)state;
	pg = e2e_migrate_from(&d, FX_STRIPE_INI "\n[api]\nrate = 1000\nburst = 1000\n", T_MIGRATION,
	                      t_rows_of, &now_ms);

	/* every event, with its id and columns, in the view */
	snprintf(want, sizeof(want),
	         "7|stripe|evt_onerow_paid|payment_intent.succeeded|payment_succeeded|"
	         "ord_onerow_paid|pi_onerow_paid|2000|USD|done|paid|NULL|%" PRId64 "|%" PRId64
	         "|0|callback|0|NULL|NULL|NULL\n"
	         "9|stripe|evt_onerow_refused|payment_intent.succeeded|payment_succeeded|"
	         "ord_onerow_none|pi_onerow_none|100|USD|failed|NULL|unknown_order|%" PRId64
	         "|%" PRId64 "|1|reconcile|1|%" PRId64 "|cli:ops|a test payment\n"
	         "12|stripe|evt_onerow_gone|payment_intent.succeeded|payment_succeeded|"
	         "ord_onerow_gone|pi_onerow_gone|2000|USD|failed|NULL|unknown_order|5|6|0|callback|"
	         "0|NULL|NULL|NULL"
	         "\n",
	         now_ms - 3000, now_ms - 3000, now_ms - 2000, now_ms - 2000, now_ms - 500);
	t_expect_dump(&d,
	              "SELECT id, scope, idem_key, type, kind, order_ref, payment_ref, amount, "
	              "currency, outcome, effect, reason, received_at, processed_at, reprocessed, "
	              "source, test_mode, dismissed_at, dismissed_by, dismiss_reason FROM events "
	              "ORDER BY id",
	              want);
	/* every key in one row: an event's record under the event's id, the
	 * record-less event expired (created_at 0), the API key after them */
	snprintf(want, sizeof(want),
	         "7|stripe|evt_onerow_paid|done|32|200|application/json|NULL|%d|1|%" PRId64 "\n"
	         "9|stripe|evt_onerow_refused|failed|32|200|application/json|NULL|%d|2|%" PRId64
	         "\n"
	         "12|stripe|evt_onerow_gone|failed|0|NULL|NULL|NULL|NULL|1|0\n"
	         "13|api:orders:anonymous|k_onerow_api|done|32|201|application/json|Location: "
	         "/api/orders/ord_onerow_api|%d|1|%" PRId64 "\n",
	         (int)strlen(T_REPLY_PAID), now_ms - 3000, (int)strlen(T_REPLY_REFUSED),
	         now_ms - 2000, (int)strlen(T_REPLY_API), now_ms - 1000);
	t_expect_dump(&d,
	              "SELECT id, scope, idem_key, status, length(fingerprint), reply_status, "
	              "reply_content_type, reply_headers, length(reply_body), fence_token, "
	              "created_at FROM idempotency_records ORDER BY id",
	              want);
	/* one table and one (scope, idem_key) index: events is a view */
	if (pg) {
		assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM information_schema.views "
		                                "WHERE table_name = 'events'"),
		                 1);
		assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM pg_indexes WHERE tablename = "
		                                "'events'"),
		                 0);
	} else {
		assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM sqlite_master WHERE name = "
		                                "'events' AND type = 'view'"),
		                 1);
		assert_int_equal(e2e_db_int(&d,
		                            "SELECT COUNT(*) FROM sqlite_master WHERE tbl_name = "
		                            "'events' AND type = 'index'"),
		                 0);
	}

	/* The daemon on the migrated database: duplicates of the carried keys
	 * get their stored replies, byte for byte (these payloads differ from
	 * the first deliveries': a webhook's mismatch still gets the stored
	 * reply); the key whose record was gone runs again as new. */
	assert_int_equal(daemon_start(&d), 0);
	t_post_payment(&d, "evt_onerow_paid", "ord_onerow_paid", &r);
	assert_string_equal(r.hs_body, T_REPLY_PAID);
	hres_finish(&r);
	t_post_payment(&d, "evt_onerow_refused", "ord_onerow_none", &r);
	assert_string_equal(r.hs_body, T_REPLY_REFUSED);
	hres_finish(&r);
	t_post_payment(&d, "evt_onerow_gone", "ord_onerow_gone", &r);
	assert_non_null(strstr(r.hs_body, "\"outcome\":\"paid\""));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders WHERE id = 'ord_onerow_gone'"
	                                " AND status = 'paid'"),
	                 1);
	assert_int_equal(e2e_db_int(&d,
	                            "SELECT COUNT(*) FROM events WHERE idem_key = "
	                            "'evt_onerow_gone' AND outcome = 'done' AND effect = 'paid'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
	                                "'evt_onerow_gone' AND status = 'done' AND created_at > 0"),
	                 1);
	/* the order API's key is still known: another body under it is 422 */
	{
		const char *h[] = {"Content-Type: application/json",
		                   "Idempotency-Key: k_onerow_api", NULL};
		char url[256];
		const char *order = "{\"amount\":999,\"currency\":\"eur\"}";

		snprintf(url, sizeof(url), "%s/api/orders", d.dm_base);
		assert_int_equal(hn_http("POST", url, h, order, strlen(order), &r), 0);
		assert_int_equal(r.hs_status, 422);
		hres_finish(&r);
	}
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders"), 3);
	/* a new callback is one row: its key and its event */
	t_post_payment(&d, "evt_onerow_new", "ord_onerow_api", &r);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
	                                "'evt_onerow_new' AND received_at IS NOT NULL AND id > 13"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events"), 4);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_migrate_makes_one_row_per_key_and_keeps_ids_replies_and_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
