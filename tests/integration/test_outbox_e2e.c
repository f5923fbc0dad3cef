/* test_outbox_e2e.c: the real daemon with an [outbound] section pointing at
 * a real HTTP peer: delivery after commit, the CLI, compensation by refund,
 * the CLI's transitions in the audit log, and kill -9 during deliveries. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "peer.h"
#include "fixtures.h"
#include "console_client.h"
#include "prom_text.h"
#include "rawhttp.h"

#define E2E_WAIT_S 30
#define CRASH_ORDERS 40
#define CRASH_SENDERS 4

/* The daemon's config: Stripe, points, and [outbound] on the peer. */
static void e2e_ini(char *out, size_t size, const struct peer *p, const char *extra)
{
	snprintf(out, size,
	         FX_STRIPE_INI
	         "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\nretry_cap = 300ms\n"
	         "poll = 50ms\ntimeout = 5s\nconnect_timeout = 2s\nconcurrency = 4\n%s",
	         peer_base(p), extra != NULL ? extra : "");
}

static int e2e_cli(struct daemon *d, const char *a, const char *b, const char *c, char **ret_out)
{
	const char *args[] = {a, b, c, NULL};

	return daemon_cli(d, 1, args, ret_out);
}

/* Waits for the one outbox row to be delivered (status succeeded). */
static void t_wait_one_succeeded(struct daemon *d)
{
	assert_int_equal(hn_db_wait_int(d->dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'succeeded'", 1,
	                                E2E_WAIT_S),
	                 1);
}

/* The configuration of the tests whose shop holds a call: before (sections
 * in front of the Stripe instance's, or ""), then after it (a section, or
 * ""), and [outbound] with one attempt, a quick poll and a long timeout. */
static void t_ini_one_attempt(char *out, size_t size, const char *before, const char *after,
                              const struct peer *p)
{
	snprintf(out, size,
	         "%s" FX_STRIPE_INI "%s\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 1\n"
	         "poll = 20ms\ntimeout = 50s\n",
	         before, after, peer_base(p));
}

/* The one row delivered by its first counted attempt, answered 200: the
 * attempt a stop or a crash cut before it was not counted. */
static void t_delivered_as_attempt_one(struct daemon *d)
{
	t_wait_one_succeeded(d);
	assert_int_equal(fx_db_int(d, "SELECT attempts FROM outbox"), 1);
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                              " AND http_status = 200"),
	                 1);
}

static void test_a_paid_callback_reaches_the_shop_once_with_an_idempotency_key(void **state)
{
	struct peer *p = peer_create();
	struct daemon d;
	char ini[2048];
	char id[64];
	char *body;
	char *keys;
	char *out = NULL;
	char cmd_id[32];
	struct hres r;
	struct peer_request q;

	(void)state;
	assert_non_null(p);
	e2e_ini(ini, sizeof(ini), p, NULL);
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 1999, "usd", id);
	body = fx_stripe_payment("evt_outbox_1", id, 1999, "usd");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	assert_int_equal(peer_wait(p, 1, E2E_WAIT_S * 1000), 1);
	assert_int_equal(peer_request(p, 0, &q), 0);
	assert_string_equal(q.pq_path, "/notify");
	assert_non_null(q.pq_idem_key);
	assert_non_null(strstr(q.pq_body, id));
	assert_non_null(strstr(q.pq_body, "\"effect\":\"paid\""));
	keys = hn_db_dump(d.dm_db, "SELECT idem_key FROM outbox");
	assert_non_null(keys);
	assert_non_null(strstr(keys, q.pq_idem_key));
	free(keys);
	peer_request_finish(&q);
	t_wait_one_succeeded(&d);

	/* The provider's retry is a duplicate: no second row, no second call. */
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);
	/* A callback for an order we do not know is refused: nothing queued. */
	body = fx_stripe_payment("evt_outbox_unknown", "ord_unknownunknownunkn", 500, "usd");
	assert_int_equal(hn_post_stripe(&d, "stripe", FX_STRIPE_SECRET, body, &r), 0);
	hres_finish(&r);
	free(body);
	usleep(500000);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM outbox"), 1);
	{
		char sql[256];

		snprintf(sql, sizeof(sql),
		         "SELECT fulfillment_status = 'notified' AND status = 'paid' FROM orders "
		         "WHERE id = '%s'",
		         id);
		assert_int_equal(hn_db_int(d.dm_db, sql), 1);
	}

	/* The CLI shows it, and refuses what it must. */
	assert_int_equal(e2e_cli(&d, "outbox", "list", NULL, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "succeeded"));
	assert_non_null(strstr(out, id));
	free(out);
	out = NULL;
	assert_int_equal(e2e_cli(&d, "outbox", "retry", "999999", &out), EX_NOINPUT);
	free(out);
	out = NULL;
	snprintf(cmd_id, sizeof(cmd_id), "%" PRId64, hn_db_int(d.dm_db, "SELECT id FROM outbox"));
	assert_int_equal(e2e_cli(&d, "outbox", "cancel", cmd_id, &out), EX_DATAERR);
	free(out);
	out = NULL;
	assert_int_equal(e2e_cli(&d, "outbox", "retry", "abc", &out), EX_USAGE);
	free(out);
	out = NULL;
	{
		const char *args[] = {"outbox", "list", "--status", "dead", NULL};

		fx_cli_says(&d, args, 0, "no outbox rows");
	}
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

static void test_a_dead_notify_is_compensated_by_a_refund_at_the_provider(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour e400 = peer_reply(400, "{\"error\":\"no such order\"}");
	struct peer_behaviour refund_ok =
	        peer_reply(200, "{\"id\":\"re_e2e_1\",\"object\":\"refund\",\"amount\":2500,"
	                        "\"status\":\"succeeded\"}");
	struct daemon d;
	char extra[1024];
	char ini[3072];
	char id[64];
	char sql[256];
	char *body;
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &e400);
	peer_default(p, "/v1/refunds", &refund_ok);
	/* the daemon (our child) reads the provider API key from its environment */
	assert_int_equal(setenv("IDEMHOOK_TEST_STRIPE_API_KEY", "sk_test_e2e", 1), 0);
	snprintf(extra, sizeof(extra),
	         "notify_compensation = refund\nrefund_base_url = %s\n"
	         "refund_key = env:IDEMHOOK_TEST_STRIPE_API_KEY\n",
	         peer_base(p));
	e2e_ini(ini, sizeof(ini), p, extra);
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 2500, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_refund", id, 2500, "usd"), 200);
	snprintf(sql, sizeof(sql), "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id);
	assert_int_equal(hn_db_wait_int(d.dm_db, sql, 1, E2E_WAIT_S), 1);
	assert_int_equal(peer_count(p), 2);
	{
		struct peer_request q;

		assert_int_equal(peer_request(p, 1, &q), 0);
		assert_string_equal(q.pq_path, "/v1/refunds");
		assert_string_equal(q.pq_authorization, "Bearer sk_test_e2e");
		assert_non_null(strstr(q.pq_body, "payment_intent=pi_"));
		peer_request_finish(&q);
	}
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM points_ledger WHERE order_id = '%s' AND reason = 'clawback'",
	         id);
	assert_int_equal(hn_db_int(d.dm_db, sql), 1);
	snprintf(sql, sizeof(sql), "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'",
	         id);
	assert_int_equal(hn_db_int(d.dm_db, sql), 0);
	/* Stripe's own charge.refunded for that refund later changes nothing. */
	body = fx_stripe_refund("evt_outbox_refund_cb", id, 2500, 2500, "re_e2e_1", "usd");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM points_ledger WHERE order_id = '%s' AND reason = 'clawback'",
	         id);
	assert_int_equal(hn_db_int(d.dm_db, sql), 1);
	assert_int_equal(e2e_cli(&d, "outbox", "list", NULL, &out), 0);
	assert_non_null(strstr(out, "refund:done"));
	assert_non_null(strstr(out, "compensates row"));
	free(out);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* The CLI's retry, cancel and compensate are in the audit log as the
 * console's are and as events dismiss is: who, what, on which row, with
 * the result (a refusal too); a row that does not exist leaves nothing. */
static void test_the_cli_transitions_are_in_the_audit_log(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour e400 = peer_reply(400, "{\"error\":\"no such order\"}");
	const char *audit[] = {"audit", "list", "--json", NULL};
	struct daemon d;
	char ini[2048];
	char id[64];
	char row[32];
	char sql[384];
	char *out = NULL;
	int64_t row_id;

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &e400);
	e2e_ini(ini, sizeof(ini), p, "max_attempts = 1\n");
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 1500, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_audit", id, 1500, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'dead'", 1,
	                                E2E_WAIT_S),
	                 1);
	row_id = hn_db_int(d.dm_db, "SELECT id FROM outbox");
	snprintf(row, sizeof(row), "%" PRId64, row_id);

	/* refused (a dead row is not cancelled), then taken */
	assert_int_equal(e2e_cli(&d, "outbox", "cancel", row, &out), EX_DATAERR);
	free(out);
	assert_int_equal(e2e_cli(&d, "outbox", "retry", row, &out), EX_OK);
	free(out);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'dead'", 1,
	                                E2E_WAIT_S),
	                 1);
	assert_int_equal(e2e_cli(&d, "outbox", "compensate", row, &out), EX_OK);
	free(out);
	assert_int_equal(e2e_cli(&d, "outbox", "retry", "999999", &out), EX_NOINPUT);
	free(out);

	fx_assert_audit(&d, 3,
	                "actor LIKE 'cli:%%' AND target = 'outbox:%" PRId64
	                "' AND ((action = 'outbox.cancel' AND result LIKE 'refused: %%')"
	                " OR (action = 'outbox.retry' AND result LIKE 'ok: %%')"
	                " OR (action = 'outbox.compensate' AND result LIKE 'ok: %%'))",
	                row_id);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM audit_log"), 3);
	assert_int_equal(daemon_cli(&d, 1, audit, &out), 0);
	assert_non_null(strstr(out, "\"outbox.compensate\""));
	assert_non_null(strstr(out, "\"outbox.cancel\""));
	snprintf(sql, sizeof(sql), "\"outbox:%" PRId64 "\"", row_id);
	assert_non_null(strstr(out, sql));
	free(out);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* A gate for the shop: refuses with 400 while closed to deliveries
 * (g_refuse), else holds each request to /notify until released (or
 * g_hold_ms passed), then answers 200. */
struct gate {
	atomic_int g_arrived; /* requests the shop began to answer */
	atomic_int g_refuse;
	atomic_int g_open;
	int g_hold_ms;
};

static void gate_answer(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	struct gate *g = arg;
	int waited = 0;

	atomic_fetch_add(&g->g_arrived, 1);
	if (atomic_load(&g->g_refuse)) {
		ret->pb_status = 400;
		ret->pb_body = "{\"error\":\"no such order\"}";
		return;
	}
	while (strcmp(req->pq_path, "/notify") == 0 && !atomic_load(&g->g_open) &&
	       waited < g->g_hold_ms) {
		usleep(10000);
		waited += 10;
	}
	ret->pb_status = 200;
	ret->pb_body = "{}";
}

/* Waits until the shop began to answer n requests (the peer records one
 * only once it is answered). Returns how many it began. */
static int gate_wait(struct gate *g, int n)
{
	int i;

	for (i = 0; i < E2E_WAIT_S * 100 && atomic_load(&g->g_arrived) < n; i++) {
		usleep(10000);
	}
	return atomic_load(&g->g_arrived);
}

/* A permanent redirect kills the row at once (redirects are not followed);
 * the operator sees where the peer pointed, without the user name,
 * password or query the Location carried, and with its control characters
 * escaped: in the row, its attempt, outbox show, the console and the log. */
static void test_a_row_killed_by_a_redirect_keeps_where_the_peer_pointed(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour moved = peer_reply(301, "moved");
	const char *show_args[] = {"outbox", "show", NULL, "--json", NULL};
	struct t_session s;
	struct daemon d;
	char ini[2048];
	char page[64];
	char row[32];
	char id[64];
	char *out = NULL;
	char *log;
	struct hres r;

	(void)state;
	assert_non_null(p);
	moved.pb_headers[0] =
	        "Location: https://alice:hunter2@new.example/ho\x1b[2Jks/v2?token=s3cr3t";
	peer_default(p, "/notify", &moved);
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	e2e_ini(ini, sizeof(ini), p, T_CONSOLE);
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 1700, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_moved", id, 1700, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'dead'", 1,
	                                E2E_WAIT_S),
	                 1);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(
	        hn_db_int(d.dm_db,
	                  "SELECT count(*) FROM outbox WHERE last_status = 301 AND last_error = "
	                  "'HTTP 301 (Location https://new.example/ho\\x1b[2Jks/v2?...): moved'"),
	        1);
	assert_int_equal(
	        hn_db_int(d.dm_db,
	                  "SELECT count(*) FROM outbox_attempts WHERE http_status = 301"
	                  " AND error = 'Location https://new.example/ho\\x1b[2Jks/v2?...'"),
	        1);

	snprintf(row, sizeof(row), "%" PRId64, hn_db_int(d.dm_db, "SELECT id FROM outbox"));
	assert_int_equal(e2e_cli(&d, "outbox", "show", row, &out), EX_OK);
	assert_non_null(strstr(out, "last error:    HTTP 301 (Location https://new.example/ho"));
	assert_null(strstr(out, "hunter2"));
	assert_null(strstr(out, "s3cr3t"));
	assert_null(strchr(out, '\x1b'));
	free(out);
	show_args[2] = row;
	fx_cli_says(&d, show_args, EX_OK, "Location https://new.example/ho\\\\x1b[2Jks/v2?...");

	t_login(&d, T_RO_TOKEN, &s);
	assert_int_equal(t_get(&d, "/console/outbox?status=dead", &s, &r), 200);
	assert_non_null(
	        strstr(r.hs_body, "HTTP 301 (Location https://new.example/ho\\x1b[2Jks/v2?...)"));
	hres_finish(&r);
	snprintf(page, sizeof(page), "/console/outbox/%s", row);
	assert_int_equal(t_get(&d, page, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "Location https://new.example/ho\\x1b[2Jks/v2?..."));
	assert_null(strstr(r.hs_body, "hunter2"));
	assert_null(strstr(r.hs_body, "s3cr3t"));
	hres_finish(&r);

	assert_int_equal(daemon_term(&d, 20), 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "Location https://new.example/ho\\x1b[2Jks/v2?..."));
	assert_null(strstr(log, "hunter2"));
	assert_null(strstr(log, "s3cr3t"));
	assert_null(strchr(log, '\x1b'));
	free(log);
	daemon_finish(&d);
	peer_destroy(p);
}

/* A row with more attempts than its history keeps (the newest 20): each
 * line's `#` is its attempt's own number, so the lines kept say 25 down to
 * 6, in the console and in `outbox show` (text and JSON), rather than
 * counting again from the oldest line kept. */
static void
test_the_history_numbers_stay_the_attempts_own_when_older_lines_are_trimmed(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour down = peer_reply(500, "down");
	const char *args[] = {"outbox", "show", "--json", NULL, NULL};
	struct t_session s;
	struct daemon d;
	struct hres r;
	char ini[2048];
	char page[64];
	char row[32];
	char id[64];
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &down);
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI "%s\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 25\n"
	                       "poll = 20ms\ntimeout = 5s\nretry_base = 1ms\nretry_cap = 5ms\n",
	         T_CONSOLE, peer_base(p));
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 2480, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_25", id, 2480, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'dead'", 1,
	                                E2E_WAIT_S),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 20);
	snprintf(row, sizeof(row), "%" PRId64, hn_db_int(d.dm_db, "SELECT id FROM outbox"));

	assert_int_equal(e2e_cli(&d, "outbox", "show", row, &out), EX_OK);
	assert_non_null(strstr(out, "count:         25\n"));
	assert_non_null(strstr(out, "\n  25   25                   "));
	assert_non_null(strstr(out, "\n  6    6                    "));
	assert_null(strstr(out, "\n  5    "));
	assert_null(strstr(out, "\n  1    "));
	free(out);
	out = NULL;
	args[3] = row;
	assert_int_equal(daemon_cli(&d, 1, args, &out), EX_OK);
	assert_non_null(strstr(out, "\"history\": [\n    {\"n\": \"25\", \"attempt\": 25,"));
	assert_non_null(strstr(out, "{\"n\": \"6\", \"attempt\": 6,"));
	assert_null(strstr(out, "{\"n\": \"5\","));
	free(out);

	t_login(&d, T_RO_TOKEN, &s);
	snprintf(page, sizeof(page), "/console/outbox/%s", row);
	assert_int_equal(t_get(&d, page, &s, &r), 200);
	assert_non_null(
	        strstr(r.hs_body, "<tr><td class=\"num\">25</td><td class=\"num\">25</td>"));
	assert_non_null(strstr(r.hs_body, "<tr><td class=\"num\">6</td><td class=\"num\">6</td>"));
	assert_null(strstr(r.hs_body, "<tr><td class=\"num\">1</td>"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* A dead row retried by an operator is a call queued again: the order's
 * fulfillment is pending while it is, and notified once it got through. */
static void test_a_retried_dead_row_puts_the_fulfillment_back_to_pending(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = E2E_WAIT_S * 1000};
	struct daemon d;
	char ini[2048];
	char id[64];
	char row[32];
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	atomic_store(&g.g_refuse, 1);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	e2e_ini(ini, sizeof(ini), p, "max_attempts = 1\n");
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 1800, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_retry_pending", id, 1800, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'dead'", 1,
	                                E2E_WAIT_S),
	                 1);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND "
	                           "fulfillment_status = 'failed' AND needs_operator = 1",
	                           id),
	                 1);

	atomic_store(&g.g_refuse, 0); /* the next attempt is held until g_open */
	snprintf(row, sizeof(row), "%" PRId64, hn_db_int(d.dm_db, "SELECT id FROM outbox"));
	assert_int_equal(e2e_cli(&d, "outbox", "retry", row, &out), EX_OK);
	free(out);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND "
	                           "fulfillment_status = 'pending'",
	                           id),
	                 1);
	assert_int_equal(gate_wait(&g, 2), 2);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND "
	                           "fulfillment_status = 'pending'",
	                           id),
	                 1);
	atomic_store(&g.g_open, 1);
	t_wait_one_succeeded(&d);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND "
	                           "fulfillment_status = 'notified' AND needs_operator = 0",
	                           id),
	                 1);

	/* The retry started the count again (max_attempts = 1 let it go
	 * out), but the history numbers each call once: #2 after #1. */
	assert_int_equal(fx_db_int(&d, "SELECT attempts FROM outbox"), 1);
	{
		const char *args[] = {"outbox", "show", row, "--json", NULL};

		assert_int_equal(daemon_cli(&d, 1, args, &out), EX_OK);
	}
	assert_non_null(out);
	assert_non_null(strstr(out, "\"n\": \"2\", \"attempt\": 2, \"counted\": true"));
	assert_non_null(strstr(out, "\"n\": \"1\", \"attempt\": 1, \"counted\": true"));
	free(out);
	out = NULL;
	assert_int_equal(fx_db_int(&d, "SELECT count(DISTINCT attempt) FROM outbox_attempts"), 2);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* A reload that changes [outbound] while a slow shop holds a delivery does
 * not wait for it and does not take it back: the transfer finishes under
 * the settings it began with and is recorded once, and the next row goes to
 * the new URL. */
static void test_a_reload_lets_a_slow_delivery_finish_and_moves_the_next_one(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 7000};
	struct daemon d;
	struct timespec t0;
	struct timespec t1;
	struct peer_request q;
	char ini[2048];
	char id1[64];
	char id2[64];
	char *conf;
	const char *at;
	double took;

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	/* e2e_ini's, with a timeout the held delivery does not reach */
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\n"
	                       "poll = 50ms\ntimeout = 20s\nconcurrency = 4\n",
	         peer_base(p));
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 1900, "usd", id1);
	fx_order(&d, 1901, "usd", id2);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_reload_1", id1, 1900, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);

	conf = hn_read_file(d.dm_config);
	assert_non_null(conf);
	at = strstr(conf, "/notify\n");
	assert_non_null(at);
	snprintf(ini, sizeof(ini), "%.*s/notify2\nmax_age = 2d\n%s", (int)(at - conf), conf,
	         at + strlen("/notify\n"));
	free(conf);
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", ini), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	print_message("reload took %.2f s while a delivery was in flight\n", took);
	assert_true(took < 2.0);

	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_reload_2", id2, 1901, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'succeeded'", 2,
	                                E2E_WAIT_S),
	                 2);
	assert_int_equal(peer_count(p), 2);
	/* The peer records a request once answered: the held one comes second. */
	assert_int_equal(peer_request(p, 0, &q), 0);
	assert_string_equal(q.pq_path, "/notify2");
	assert_non_null(strstr(q.pq_body, id2));
	peer_request_finish(&q);
	assert_int_equal(peer_request(p, 1, &q), 0);
	assert_string_equal(q.pq_path, "/notify");
	assert_non_null(strstr(q.pq_body, id1));
	peer_request_finish(&q);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT attempts FROM outbox WHERE order_id = '%s' AND"
	                           " url LIKE '%%/notify'",
	                           id1),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 2);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* A call still unanswered when the daemon stops is given back after the
 * grace time without counting, and its attempt history says so: the shop
 * that gets it a second time after the restart can be told why. */
static void test_a_call_released_at_shutdown_is_in_the_attempt_history(void **state)
{
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 60000};
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct peer *p = peer_create();
	struct daemon d;
	char ini[2048];
	char id[64];

	(void)state;
	assert_non_null(p);
	peer_script(p, "/notify", &hang);
	peer_default(p, "/notify", &ok);
	t_ini_one_attempt(ini, sizeof(ini), "", "", p);
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 2300, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_released", id, 2300, "usd"), 200);
	assert_int_equal(peer_wait(p, 1, E2E_WAIT_S * 1000), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	assert_int_equal(fx_db_int(&d, "SELECT attempts FROM outbox"), 0);
	assert_int_equal(fx_db_int(&d, "SELECT status = 'pending' FROM outbox"), 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status IS NULL AND latency_ms >= 4000"
	                               " AND error LIKE 'released at shutdown:%%'"),
	                 1);

	/* Not counted: max_attempts = 1 still lets the next start deliver it. */
	assert_int_equal(daemon_start(&d), 0);
	t_delivered_as_attempt_one(&d);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* `outbox show` of row (text and JSON) lists its two calls newest first,
 * each with its own ordinal: #1 the counted attempt 1 answered 200, #1.1
 * the call given back under the same number, not counted, whose error
 * begins with error. */
static void t_assert_history_of_one_cut_call(struct daemon *d, const char *row, const char *error)
{
	const char *args[] = {"outbox", "show", "--json", row, NULL};
	const char *first;
	const char *second;
	const char *end;
	char line[256];
	char *out = NULL;

	assert_int_equal(e2e_cli(d, "outbox", "show", row, &out), EX_OK);
	assert_non_null(strstr(out, "count:         1\n"));
	first = strstr(out, "\n  1    1                    ");
	second = strstr(out, "\n  1.1  1       not counted  ");
	assert_non_null(first);
	assert_non_null(second);
	assert_true(first < second);
	assert_non_null(strstr(first, " HTTP 200 "));
	/* No answer recorded; its error at the end of its line. */
	end = second + 1 + strcspn(second + 1, "\n");
	snprintf(line, sizeof(line), "Z -         ");
	assert_non_null(strstr(second, line));
	assert_true(strstr(second, line) < end);
	assert_non_null(strstr(second, error));
	assert_true(strstr(second, error) < end);
	free(out);
	out = NULL;
	assert_int_equal(daemon_cli(d, 1, args, &out), EX_OK);
	assert_non_null(strstr(
	        out, "\"history\": [\n    {\"n\": \"1\", \"attempt\": 1, \"counted\": true,"));
	assert_non_null(strstr(out, "\"http_status\": 200,"));
	assert_non_null(
	        strstr(out, "},\n    {\"n\": \"1.1\", \"attempt\": 1, \"counted\": false,"));
	assert_non_null(strstr(out, "\"http_status\": null, \"latency_ms\": "));
	free(out);
}

/* A call cut by a kill -9 while a slow shop holds it is given back at the
 * next start, not counted, and said so in the row's attempt history (the
 * console's outbox page) and last error (`outbox show`): the shop may have
 * it already, and gets it again with the same key. */
static void test_a_call_cut_by_a_kill_is_in_the_attempt_history_after_the_restart(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct t_session s;
	struct daemon d;
	struct hres r;
	char ini[2048];
	char page[64];
	char row[32];
	char id[64];
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	t_ini_one_attempt(ini, sizeof(ini), "", T_CONSOLE, p);
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 2400, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_killed", id, 2400, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);
	daemon_kill9(&d);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'delivering'"
	                               " AND attempts = 1"),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 0);

	/* The next start gives it back and sends it again: held by the shop. */
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(gate_wait(&g, 2), 2);
	assert_int_equal(daemon_log_wait(&d, "row(s) left delivering by the last run", 10000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status IS NULL AND error LIKE 'interrupted: %%"
	                               "without a clean shutdown%%may have received it"
	                               " (not counted)'"),
	                 1);
	snprintf(row, sizeof(row), "%" PRId64, hn_db_int(d.dm_db, "SELECT id FROM outbox"));
	assert_int_equal(e2e_cli(&d, "outbox", "show", row, &out), EX_OK);
	assert_non_null(strstr(out, "last error:    interrupted: "));
	assert_non_null(strstr(out, "count:         1\n"));
	free(out);
	t_login(&d, T_RO_TOKEN, &s);
	snprintf(page, sizeof(page), "/console/outbox/%s", row);
	assert_int_equal(t_get(&d, page, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "interrupted: the idemhook process delivering it stopped"
	                                  " without a clean shutdown"));
	/* Its answer and latency are not known: not "no answer", not "0 ms". */
	assert_non_null(strstr(r.hs_body, "<td class=\"num\"><span class=\"bad\">unknown</span>"
	                                  "</td><td class=\"num\"><span class=\"muted\">-</span>"));
	assert_null(strstr(r.hs_body, ">0 ms<"));
	hres_finish(&r);

	/* Not counted: max_attempts = 1 still lets this attempt deliver it. */
	atomic_store(&g.g_open, 1);
	t_delivered_as_attempt_one(&d);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 2);

	/* Both calls carry attempt number 1: each line has its own ordinal,
	 * and the one cut says it was not counted, on the console and in
	 * `outbox show`. */
	assert_int_equal(t_get(&d, page, &s, &r), 200);
	assert_non_null(
	        strstr(r.hs_body, "<th class=\"num\">#</th><th class=\"num\">attempt</th>"));
	assert_non_null(strstr(r.hs_body, "<tr><td class=\"num\">1</td><td class=\"num\">1</td>"
	                                  "<td>"));
	assert_non_null(strstr(r.hs_body, "<tr><td class=\"num\">1.1</td><td class=\"num\">1"
	                                  " <span class=\"muted\">not counted</span></td>"));
	hres_finish(&r);
	t_assert_history_of_one_cut_call(&d, row, "interrupted: ");
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* The shop answers while another process holds the database's write lock:
 * the outcome cannot be written. The worker keeps it and writes it again
 * once the lock is gone (also during a stop's grace time): the row is
 * recorded succeeded with the shop's answer, not sent again, and no later
 * start calls it interrupted. */
static void test_an_outcome_the_store_refused_is_recorded_once_it_takes_writes(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct hn_sqlite lock;
	struct daemon d;
	char ini[2048];
	char id[64];
	char id2[64];

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	t_ini_one_attempt(ini, sizeof(ini), "[store]\nbusy_timeout_ms = 300\n\n", "", p);
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 2470, "usd", id);
	fx_order(&d, 2471, "usd", id2);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_unrecorded_1", id, 2470, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	atomic_store(&g.g_open, 1);
	assert_int_equal(daemon_log_wait(&d, "could not be recorded; kept", 10000), 0);
	usleep(1500 * 1000); /* a few tries refused */
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	t_wait_one_succeeded(&d);
	assert_int_equal(daemon_log_wait(&d, "the outcome of attempt 1 recorded at try", 1000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status = 200"),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 1);
	assert_int_equal(peer_count(p), 1);

	/* Refused again, then the daemon is stopped: the lock goes during the
	 * stop's grace time, and the outcome is recorded before it ends. */
	atomic_store(&g.g_open, 0);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_unrecorded_2", id2, 2471, "usd"), 200);
	assert_int_equal(gate_wait(&g, 2), 2);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	atomic_store(&g.g_open, 1);
	assert_int_equal(
	        daemon_log_wait(&d, "row 2: the outcome of attempt 1 (HTTP 200) could not", 10000),
	        0);
	assert_int_equal(daemon_signal(&d, SIGTERM), 0);
	usleep(1000 * 1000);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'succeeded'"),
	                 2);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE error LIKE"
	                               " 'interrupted:%%'"),
	                 0);
	assert_int_equal(peer_count(p), 2);

	/* Refused through the whole stop: the answer is in the log, and the
	 * next start gives the row back saying it may be that. */
	atomic_store(&g.g_open, 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 2472, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_unrecorded_3", id, 2472, "usd"), 200);
	assert_int_equal(gate_wait(&g, 3), 3);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	atomic_store(&g.g_open, 1);
	assert_int_equal(
	        daemon_log_wait(&d, "row 3: the outcome of attempt 1 (HTTP 200) could not", 10000),
	        0);
	assert_int_equal(daemon_term(&d, 30), 0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(
	        daemon_log_wait(&d, "row 3: the outcome of attempt 1 (HTTP 200) is lost", 1000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'delivering'"),
	                 1);
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'succeeded'", 3,
	                                E2E_WAIT_S),
	                 3);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE outbox_id = 3"
	                               " AND http_status IS NULL AND error LIKE 'interrupted: %%"
	                               "or unable to record it (see its log)%%'"),
	                 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* The store refuses the outcome until the row's give-back is due (its
 * lease nearly out), and refuses the give-back too: the outcome is still
 * kept and tried again, not dropped (which left the row delivering until
 * its lease ran out, then sent it again). Once the lock goes, the next try
 * records the shop's answer: the row is succeeded, the call sent once. */
static void test_a_give_back_the_store_refuses_keeps_the_outcome_to_try_again(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct hn_sqlite lock;
	struct daemon d;
	char ini[2048];
	char id[64];

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	/* lease 7 s: the give-back is due 5 s before it runs out, 2 s in. */
	snprintf(ini, sizeof(ini),
	         "[store]\nbusy_timeout_ms = 300\n\n" FX_STRIPE_INI
	         "\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 1\n"
	         "poll = 20ms\ntimeout = 1s\nlease = 7s\n",
	         peer_base(p));
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 2490, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_give_back_refused", id, 2490, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	atomic_store(&g.g_open, 1);
	assert_int_equal(daemon_log_wait(&d, "could not be recorded; kept", 10000), 0);
	assert_int_equal(daemon_log_wait(&d,
	                                 "row 1: the outcome of attempt 1 (HTTP 200) could not be "
	                                 "given back either; kept, tried again in 500 ms",
	                                 10000),
	                 0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	/* Well before the lease runs out (5 s from now). */
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'succeeded'", 1,
	                                2),
	                 1);
	assert_int_equal(daemon_log_wait(&d, "is lost", 0), -1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status = 200"),
	                 1);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* How many times d's log holds text. */
static int t_log_count(struct daemon *d, const char *text)
{
	char *log = hn_read_file(d->dm_log);
	const char *at = log;
	int n = 0;

	assert_non_null(log);
	while ((at = strstr(at, text)) != NULL) {
		n++;
		at += strlen(text);
	}
	free(log);
	return n;
}

/* Records the database's schema as version, as a newer release's
 * `idemhook migrate` leaves it (or, given this binary's, as undoing it). */
static void t_set_schema(struct daemon *d, int64_t version)
{
	struct hn_sqlite l;
	char sql[64];

	snprintf(sql, sizeof(sql), "PRAGMA user_version = %" PRId64 ";", version);
	assert_int_equal(hn_sqlite_start(&l, d->dm_db, sql), 0);
	assert_int_equal(hn_sqlite_finish(&l, ""), 0);
}

/* Starts d with the shop's notify calls answered by gate g on peer p, one
 * at a time, polled every 20 ms, with lease ("4s": it runs out while a
 * test holds the schema newer). SQLite only (the schema is set as SQLite
 * records it): on PostgreSQL the test is skipped. */
static void t_gated_start(struct daemon *d, struct peer *p, struct gate *g, const char *lease)
{
	char ini[2048];

	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, g), 0);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nconcurrency = 1\n"
	                       "poll = 20ms\ntimeout = 2s\nlease = %s\n",
	         peer_base(p), lease);
	fx_daemon_start(d, "%s", ini);
	if (d->dm_pg_db[0] != '\0') {
		assert_int_equal(daemon_term(d, 20), 0);
		daemon_finish(d);
		peer_destroy(p);
		skip();
	}
}

/* A newer release migrates the database while the shop answers a call and
 * another row waits: the answer cannot be recorded, and the worker calls
 * nothing new (a call it could not record would be sent again later), not
 * even once the held row's lease has run out; it keeps the answer. When
 * the schema is its own again it records the answer (the held row is not
 * taken over and sent again) and delivers the waiting row: each call once. */
static void test_under_a_newer_schema_the_worker_calls_nothing_and_resumes_after(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct daemon d;
	char id[64];
	char id2[64];
	int64_t version;

	(void)state;
	t_gated_start(&d, p, &g, "4s");
	fx_order(&d, 2495, "usd", id);
	fx_order(&d, 2496, "usd", id2);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_newer_1", id, 2495, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);
	/* queued behind the call in flight (concurrency 1) */
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_newer_2", id2, 2496, "usd"), 200);
	version = fx_db_int(&d, "PRAGMA user_version");
	t_set_schema(&d, version + 1);
	atomic_store(&g.g_open, 1);
	assert_int_equal(daemon_log_wait(&d, "could not be recorded; kept", 10000), 0);
	assert_int_equal(daemon_log_wait(&d, "newer than this idemhook", 10000), 0);
	usleep(5000 * 1000); /* past the held row's lease; the other long due */
	assert_int_equal(atomic_load(&g.g_arrived), 1);
	assert_int_equal(peer_count(p), 1);
	/* Tried every 500 ms, past its give-back time: a warning the first
	 * time, then debug lines, not two warnings a try. */
	assert_int_equal(t_log_count(&d, "<4>outbound: row 1: the outcome of attempt 1 (HTTP 200)"
	                                 " still could not be recorded"),
	                 1);
	assert_int_equal(t_log_count(&d, "<4>outbound: row 1: the outcome of attempt 1 (HTTP 200)"
	                                 " could not be given back either; kept, tried again in "
	                                 "500 ms (the tries after this one are logged at debug"),
	                 1);
	assert_true(t_log_count(&d, "<7>outbound: row 1: the outcome of attempt 1 (HTTP 200)"
	                            " could not be given back either") >= 3);

	t_set_schema(&d, version);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'succeeded'", 2,
	                                E2E_WAIT_S),
	                 2);
	/* one notice when it is recorded at last, saying how long it took */
	assert_int_equal(daemon_log_wait(&d,
	                                 "<5>outbound: row 1: the outcome of attempt 1 "
	                                 "recorded at try ",
	                                 1000),
	                 0);
	assert_int_equal(t_log_count(&d, " ms after the store first refused it"), 1);
	assert_int_equal(atomic_load(&g.g_arrived), 2);
	assert_int_equal(peer_count(p), 2);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 2);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status = 200"),
	                 2);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* The value of counter or gauge name in d's /metrics (its series summed). */
static double t_prom_value(struct daemon *d, const char *name)
{
	struct prom_text *pt = calloc(1, sizeof(*pt));
	struct hres r;
	char url[256];
	double v;

	assert_non_null(pt);
	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	if (prom_parse(pt, r.hs_body) < 0) {
		fail_msg("/metrics: %s", pt->pt_error);
	}
	assert_int_equal(prom_count(pt, name), 1);
	v = prom_sum(pt, name, "");
	hres_finish(&r);
	free(pt);
	return v;
}

/* A paid order (cents) whose notify call is answered (200) while the
 * schema is newer: the answer cannot be recorded, and the worker keeps it.
 * Starts d as t_gated_start does, with lease. Returns the schema version
 * to set back. */
static int64_t t_kept_answer(struct daemon *d, struct peer *p, struct gate *g, const char *lease,
                             const char *event, int cents)
{
	char id[64];
	int64_t version;

	t_gated_start(d, p, g, lease);
	fx_order(d, cents, "usd", id);
	assert_int_equal(fx_stripe_pay(d, event, id, cents, "usd"), 200);
	assert_int_equal(gate_wait(g, 1), 1);
	version = fx_db_int(d, "PRAGMA user_version");
	t_set_schema(d, version + 1);
	atomic_store(&g->g_open, 1);
	assert_int_equal(daemon_log_wait(d, "could not be recorded; kept", 10000), 0);
	return version;
}

/* A lease (4 s) shorter than the give-back margin (5 s): the warning of
 * the kept outcome says the row is given back at the next try, not "in
 * 0 s". Under a newer schema the row's lease then runs out while the
 * worker keeps its answer: the row is the worker's still, not due, so the
 * poll (20 ms) does not try to lease it every time (units of work the
 * writer runs: only the kept outcome's tries, two every 500 ms). When the
 * schema is this idemhook's again, the kept answer is written: one call. */
static void test_a_kept_row_past_its_lease_is_not_polled_as_due(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct daemon d;
	int64_t version;
	double units;

	(void)state;
	version = t_kept_answer(&d, p, &g, "4s", "evt_outbox_kept_lease", 2498);
	assert_int_equal(daemon_log_wait(&d,
	                                 "if the database still refuses it at the next try, in "
	                                 "500 ms (its lease leaves no time to wait longer), or "
	                                 "when the daemon stops, the row is given back",
	                                 0),
	                 0);
	assert_int_equal(t_log_count(&d, " in 0 s "), 0);

	usleep(4500 * 1000); /* the row's lease has run out */
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'delivering'"),
	                 1);
	units = t_prom_value(&d, "idemhook_store_units_total");
	usleep(2000 * 1000);
	units = t_prom_value(&d, "idemhook_store_units_total") - units;
	print_message("units of work in 2 s with the kept row past its lease: %.0f\n", units);
	assert_true(units <= 12);
	assert_int_equal(t_log_count(&d, "<7>outbound: leasing up to"), 1);

	t_set_schema(&d, version);
	t_wait_one_succeeded(&d);
	assert_int_equal(
	        daemon_log_wait(&d, "row 1: the outcome of attempt 1 recorded at try ", 1000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status = 200"),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 1);
	assert_int_equal(atomic_load(&g.g_arrived), 1);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* While the worker keeps an answer the database would not take (a newer
 * schema), the row's lease moves on: another holder took it over (what a
 * second receiver's lease of an expired row, or an operator's retry,
 * does: a new lease token). When the database takes writes again the
 * kept answer is not written, and the log says why, not "recorded". */
static void test_a_kept_outcome_of_a_row_taken_over_says_so(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct daemon d;
	int64_t version;

	(void)state;
	version = t_kept_answer(&d, p, &g, "60s", "evt_outbox_overtaken", 2499);
	{
		struct hn_sqlite l;

		assert_int_equal(hn_sqlite_start(&l, d.dm_db,
		                                 "UPDATE outbox SET lease_token = lease_token + 1"
		                                 " WHERE status = 'delivering';"),
		                 0);
		assert_int_equal(hn_sqlite_finish(&l, ""), 0);
	}
	t_set_schema(&d, version);
	assert_int_equal(daemon_log_wait(&d,
	                                 "<4>outbound: row 1: the outcome of attempt 1 (HTTP 200) "
	                                 "was not recorded: the row's lease ran out and it was "
	                                 "taken over",
	                                 10000),
	                 0);
	assert_int_equal(t_log_count(&d, "recorded at try"), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* notify_url says https:// but its port is a plain HTTP one (a server that
 * answers every ClientHello with a status line): no answer can ever come.
 * Every attempt's error says what is wrong and what to do, the log warns
 * once (not at each retry), the row is retried with backoff, and once a
 * reload gives the shop's http:// URL it is delivered. */
static void test_an_https_notify_url_on_a_plain_port_says_use_http(void **state)
{
	struct rh_plain *plain = rh_plain_start();
	struct peer *p = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct daemon d;
	char ini[2048];
	char id[64];
	int64_t attempts;

	(void)state;
	assert_non_null(plain);
	assert_non_null(p);
	peer_default(p, "/notify", &ok);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = https://127.0.0.1:%u/notify\n"
	                       "retry_base = 50ms\nretry_cap = 200ms\npoll = 20ms\ntimeout = 5s\n"
	                       "max_attempts = 1000\n", /* alive until the reload */
	         rh_plain_port(plain));
	fx_daemon_start(&d, "%s", ini);
	fx_order(&d, 2497, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_not_tls", id, 2497, "usd"), 200);
	/* (at least 3: two retries may come within one look at the database) */
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) >= 3 FROM outbox_attempts WHERE error LIKE"
	                                " 'the server does not speak TLS: use http:// (%'",
	                                1, E2E_WAIT_S),
	                 1);
	/* Every attempt met the status line, none a silent close. */
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE error IS NULL OR"
	                               " error NOT LIKE 'the server does not speak TLS: use"
	                               " http:// (%%'"),
	                 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status IN"
	                               " ('retry_wait', 'delivering') AND (last_error IS NULL OR"
	                               " last_error LIKE 'the server does not speak TLS%%')"),
	                 1);
	assert_int_equal(t_log_count(&d, "<4>outbound: row 1 (notify): its https:// URL points "
	                                 "at a port that answers in plain HTTP"),
	                 1);
	attempts = fx_db_int(&d, "SELECT count(*) FROM outbox_attempts");
	assert_true(rh_plain_count(plain) >= (unsigned)attempts);
	assert_int_equal(peer_count(p), 0);

	/* the operator fixes the URL: the row goes out at its next attempt */
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\n"
	                       "retry_cap = 200ms\npoll = 20ms\ntimeout = 5s\n",
	         peer_base(p));
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", ini), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	t_wait_one_succeeded(&d);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
	rh_plain_stop(plain);
}

/* notify_url says https:// and its server takes the ClientHello and closes
 * without a byte (libmicrohttpd does so on a plain port for some
 * ClientHellos): nothing says for sure what is wrong, so no warning and the
 * row is retried as any call without an answer, but each attempt's error
 * says what it may mean. */
static void
test_an_https_notify_url_whose_server_closes_in_the_handshake_hints_at_http(void **state)
{
	struct rh_plain *silent = rh_silent_start();
	struct daemon d;
	char id[64];

	(void)state;
	assert_non_null(silent);
	fx_daemon_start(&d,
	                FX_STRIPE_INI "\n[outbound]\nnotify_url = https://127.0.0.1:%u/notify\n"
	                              "retry_base = 50ms\nretry_cap = 200ms\npoll = 20ms\n"
	                              "timeout = 5s\nmax_attempts = 1000\n",
	                rh_plain_port(silent));
	fx_order(&d, 2498, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_closed_in_tls", id, 2498, "usd"), 200);
	assert_int_equal(
	        hn_db_wait_int(d.dm_db,
	                       "SELECT count(*) >= 2 FROM outbox_attempts WHERE error LIKE"
	                       " 'the server closed the connection during the TLS handshake; if"
	                       " this port speaks plain HTTP, use http:// (%'",
	                       1, E2E_WAIT_S),
	        1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE error IS NULL OR"
	                               " error NOT LIKE 'the server closed the connection during"
	                               " the TLS handshake;%%'"),
	                 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status IN"
	                               " ('retry_wait', 'delivering')"),
	                 1);
	assert_true(rh_plain_count(silent) >= 2);
	assert_int_equal(t_log_count(&d, "<4>outbound: row 1 (notify): its https:// URL"), 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	rh_plain_stop(silent);
}

/* The shop serves HTTPS with a self-signed certificate no system CA
 * trusts (then, trusted, under a name it does not hold): no answer can
 * come until the configuration changes or the shop fixes it. The row's
 * error says so, and what to set; the log warns once; the row keeps its
 * retry schedule, and once a reload names the CA it is delivered at its
 * next attempt, without an operator's retry. */
static void test_a_shop_certificate_that_fails_verification_says_what_to_set(void **state)
{
	struct peer *p;
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct daemon d;
	char ini[4096];
	char id[64];
	char *base;
	unsigned port;

	(void)state;
	assert_int_equal(daemon_init(&d, NULL), 0);
	base = hn_read_file(d.dm_config); /* [server], [store], [admin] */
	assert_non_null(base);
	p = peer_create_tls(d.dm_dir);
	assert_non_null(p);
	peer_default(p, "/notify", &ok);
	assert_true(strncmp(peer_base(p), "https://127.0.0.1:", 18) == 0);
	port = (unsigned)strtoul(peer_base(p) + 18, NULL, 10);
	snprintf(ini, sizeof(ini),
	         "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\nretry_cap = 200ms\n"
	         "poll = 20ms\ntimeout = 5s\n",
	         peer_base(p));
	fx_append_config(&d, FX_STRIPE_INI "%s", ini);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 2499, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_untrusted", id, 2499, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) >= 3 FROM outbox_attempts WHERE error LIKE"
	                                " 'the peer''s certificate is not trusted: set [outbound]"
	                                " ca_file to the CA that issued it, or fix the peer (%'",
	                                1, E2E_WAIT_S),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status IN"
	                               " ('retry_wait', 'delivering', 'pending')"),
	                 1);
	assert_int_equal(t_log_count(&d, "<4>outbound: row 1 (notify): the peer's certificate is "
	                                 "not trusted ("),
	                 1);
	assert_int_equal(daemon_log_wait(&d, "set ca_file in [outbound] (or [client])", 0), 0);
	assert_int_equal(peer_count(p), 0);

	/* Its CA named, but the shop addressed by a name its certificate
	 * does not hold: the same advice, warned once more (a reload). */
	snprintf(ini, sizeof(ini),
	         "%s" FX_STRIPE_INI "\n[outbound]\nnotify_url = https://localhost:%u/notify\n"
	         "retry_base = 50ms\nretry_cap = 200ms\npoll = 20ms\ntimeout = 5s\nca_file = %s\n",
	         base, port, peer_ca(p));
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", ini), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) >= 1 FROM outbox_attempts WHERE error LIKE"
	                                " 'the peer''s certificate is not trusted: %localhost%'",
	                                1, E2E_WAIT_S),
	                 1);
	assert_int_equal(t_log_count(&d, "<4>outbound: row 1 (notify): the peer's certificate is "
	                                 "not trusted ("),
	                 2);
	assert_int_equal(peer_count(p), 0);

	/* Its CA named and its own name: delivered at the next attempt. */
	snprintf(ini, sizeof(ini),
	         "%s" FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\n"
	         "retry_cap = 200ms\npoll = 20ms\ntimeout = 5s\nca_file = %s\n",
	         base, peer_base(p), peer_ca(p));
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", ini), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	t_wait_one_succeeded(&d);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	peer_destroy(p);
	daemon_finish(&d);
	free(base);
}

/* The CA file the worker verifies the shop with stops being usable after
 * the start (overwritten by something that is not PEM): no answer can
 * come, and it is not the shop's certificate that is wrong. The row's
 * error and the one warning name the file; once the file is put back,
 * the row is delivered at its next attempt, without a reload. */
static void test_a_ca_file_that_cannot_be_used_is_named_not_the_peer(void **state)
{
	struct peer *p;
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct daemon d;
	char sql[1024];
	char ca[700];
	char id[64];
	char *pem;

	(void)state;
	assert_int_equal(daemon_init(&d, NULL), 0);
	p = peer_create_tls(d.dm_dir);
	assert_non_null(p);
	peer_default(p, "/notify", &ok);
	pem = hn_read_file(peer_ca(p));
	assert_non_null(pem);
	assert_int_equal(daemon_write_file(&d, "shop-ca.pem", pem), 0);
	snprintf(ca, sizeof(ca), "%s/shop-ca.pem", d.dm_dir);
	fx_append_config(&d,
	                 FX_STRIPE_INI
	                 "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\n"
	                 "retry_cap = 200ms\npoll = 20ms\ntimeout = 5s\nca_file = %s\n",
	                 peer_base(p), ca);
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(daemon_write_file(&d, "shop-ca.pem", "not a certificate\n"), 0);
	fx_order(&d, 2501, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_ca_file", id, 2501, "usd"), 200);
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) >= 2 FROM outbox_attempts WHERE error LIKE 'the CA file cannot"
	         " be used: fix it, or set [outbound] ca_file to a PEM file of CAs, and reload"
	         " (the CA file %s cannot be used: %%'",
	         ca);
	assert_int_equal(hn_db_wait_int(d.dm_db, sql, 1, E2E_WAIT_S), 1);
	/* the file named once, not again in libcurl's words */
	{
		char twice[1600];

		snprintf(twice, sizeof(twice),
		         "SELECT count(*) FROM outbox_attempts WHERE error LIKE '%%%s%%%s%%'", ca,
		         ca);
		assert_int_equal(hn_db_int(d.dm_db, twice), 0);
	}
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE error LIKE"
	                               " '%%certificate is not trusted%%'"),
	                 0);
	assert_int_equal(t_log_count(&d, "<4>outbound: row 1 (notify): the CA file to verify "
	                                 "peers with cannot be used (the CA file "),
	                 1);
	assert_int_equal(daemon_log_wait(&d,
	                                 "and not the peer's: the file is missing, unreadable"
	                                 " or holds no PEM certificate",
	                                 0),
	                 0);
	assert_int_equal(peer_count(p), 0);

	/* The file put back: delivered at the next attempt. */
	assert_int_equal(daemon_write_file(&d, "shop-ca.pem", pem), 0);
	t_wait_one_succeeded(&d);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	peer_destroy(p);
	daemon_finish(&d);
	free(pem);
}

/* The operator replaces the CA file the worker verifies the shop with,
 * under the same name (a CA rotated): the worker read the old one for a
 * call already, and libcurl keeps what it built from a file for a day by
 * default. The row, refused with the old CA, is delivered at its next
 * attempt with the new one, without a reload. */
static void test_a_replaced_ca_file_takes_effect_at_the_next_attempt(void **state)
{
	struct peer *shop;
	struct peer *other;
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct daemon d;
	char other_dir[600];
	char ca[700];
	char id[64];
	char *shop_pem;
	char *other_pem;

	(void)state;
	assert_int_equal(daemon_init(&d, NULL), 0);
	shop = peer_create_tls(d.dm_dir);
	assert_non_null(shop);
	peer_default(shop, "/notify", &ok);
	assert_int_equal(hn_mkdtemp(other_dir, sizeof(other_dir), "other-ca"), 0);
	other = peer_create_tls(other_dir); /* its CA is another one */
	assert_non_null(other);
	shop_pem = hn_read_file(peer_ca(shop));
	other_pem = hn_read_file(peer_ca(other));
	assert_non_null(shop_pem);
	assert_non_null(other_pem);
	assert_string_not_equal(shop_pem, other_pem);
	assert_int_equal(daemon_write_file(&d, "shop-ca.pem", other_pem), 0);
	snprintf(ca, sizeof(ca), "%s/shop-ca.pem", d.dm_dir);
	fx_append_config(&d,
	                 FX_STRIPE_INI
	                 "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\n"
	                 "retry_cap = 200ms\npoll = 20ms\ntimeout = 5s\nmax_attempts = 100\n"
	                 "ca_file = %s\n",
	                 peer_base(shop), ca);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 2503, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_ca_rotated", id, 2503, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) >= 2 FROM outbox_attempts WHERE error LIKE"
	                                " 'the peer''s certificate is not trusted: %'",
	                                1, E2E_WAIT_S),
	                 1);
	assert_int_equal(peer_count(shop), 0);

	/* The shop's own CA, under the same name: read at the next attempt. */
	assert_int_equal(daemon_write_file(&d, "shop-ca.pem", shop_pem), 0);
	t_wait_one_succeeded(&d);
	assert_int_equal(peer_count(shop), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	peer_destroy(shop);
	peer_destroy(other);
	daemon_finish(&d);
	free(shop_pem);
	free(other_pem);
}

/* d's configuration: base, Stripe, and "[section]\nca_file = path". */
static void t_write_ca_config(struct daemon *d, const char *base, const char *section,
                              const char *path)
{
	char ini[4096];

	snprintf(ini, sizeof(ini), "%s" FX_STRIPE_INI "\n[%s]\nca_file = %s\n", base, section,
	         path);
	assert_int_equal(daemon_write_file(d, "idemhook.ini", ini), 0);
}

/* A CA file that is not PEM, or missing, would fail every TLS call: serve
 * --check and the start refuse it, naming the key and the file, and so
 * does a reload ([client] or [outbound]), which keeps the running
 * configuration. */
static void test_a_ca_file_that_cannot_be_used_is_refused_by_check_start_and_reload(void **state)
{
	const char *check[] = {"serve", "--check", NULL};
	struct daemon d;
	char bad[700];
	char missing[700];
	char good[700];
	char want[1024];
	char *base;
	char *err = NULL;
	char id[64];
	char *pem;
	struct peer *p;

	(void)state;
	assert_int_equal(daemon_init(&d, NULL), 0);
	base = hn_read_file(d.dm_config); /* [server], [store], [admin] */
	assert_non_null(base);
	p = peer_create_tls(d.dm_dir); /* for a good CA file */
	assert_non_null(p);
	pem = hn_read_file(peer_ca(p));
	assert_non_null(pem);
	assert_int_equal(daemon_write_file(&d, "good.pem", pem), 0);
	assert_int_equal(daemon_write_file(&d, "bad.pem", "not a certificate\n"), 0);
	snprintf(good, sizeof(good), "%s/good.pem", d.dm_dir);
	snprintf(bad, sizeof(bad), "%s/bad.pem", d.dm_dir);
	snprintf(missing, sizeof(missing), "%s/missing.pem", d.dm_dir);
	snprintf(want, sizeof(want),
	         "[client] ca_file: the CA file %s cannot be used: it holds no PEM certificate",
	         bad);

	t_write_ca_config(&d, base, "client", bad);
	assert_int_equal(daemon_cli_err(&d, 1, check, NULL, &err), EX_CONFIG);
	assert_non_null(err);
	if (strstr(err, want) == NULL) {
		fail_msg("serve --check said: %s", err);
	}
	free(err);
	err = NULL;
	assert_int_equal(daemon_start(&d), -1);
	assert_int_equal(daemon_log_wait(&d, want, 0), 0);

	/* Good: it starts; then a reload with the bad file, or a missing
	 * one, is refused and the daemon keeps serving. */
	t_write_ca_config(&d, base, "client", good);
	assert_int_equal(daemon_cli(&d, 1, check, NULL), EX_OK);
	assert_int_equal(daemon_start(&d), 0);
	t_write_ca_config(&d, base, "client", bad);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "is not valid (above: file, line and key)", 10000), 0);
	assert_int_equal(t_log_count(&d, want), 3); /* --check, the start, the reload */
	t_write_ca_config(&d, base, "outbound", missing);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	snprintf(want, sizeof(want), "[outbound] ca_file: cannot read %s: No such file", missing);
	assert_int_equal(daemon_log_wait(&d, want, 10000), 0);
	assert_int_equal(t_log_count(&d, "is not valid (above: file, line and key)"), 2);
	fx_order(&d, 2502, "usd", id); /* still serving */
	assert_int_equal(daemon_term(&d, 20), 0);
	peer_destroy(p);
	daemon_finish(&d);
	free(pem);
	free(base);
}

/* While the worker keeps an outcome the store refused, the row still says
 * 'delivering' in the database; the console, in the same process, asks
 * the worker and marks the row (its page and the list) with the answer
 * kept. The marker goes once the outcome is written. */
static void test_the_console_marks_a_row_whose_outcome_the_worker_keeps(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct hn_sqlite lock;
	struct t_session s;
	struct daemon d;
	struct hres r;
	char ini[2048];
	char id[64];
	const char *marker = "<span class=\"bad\" id=\"kept-1\">outcome kept: attempt 1"
	                     " answered HTTP 200, not recorded yet";

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	t_ini_one_attempt(ini, sizeof(ini), "[store]\nbusy_timeout_ms = 300\n\n", T_CONSOLE, p);
	fx_daemon_start(&d, "%s", ini);
	t_login(&d, T_RO_TOKEN, &s);
	fx_order(&d, 2491, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_kept_marker", id, 2491, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);
	/* In flight: delivering, no marker. */
	assert_int_equal(t_get(&d, "/console/outbox/1", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<dt>status</dt><dd>delivering"));
	assert_null(strstr(r.hs_body, "outcome kept"));
	hres_finish(&r);

	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	atomic_store(&g.g_open, 1);
	assert_int_equal(daemon_log_wait(&d, "could not be recorded; kept", 10000), 0);
	/* The console reads the database, which the lock leaves readable. */
	assert_int_equal(t_get(&d, "/console/outbox/1", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<dt>status</dt><dd>delivering <span"));
	assert_non_null(strstr(r.hs_body, marker));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/outbox?status=delivering", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, marker));
	hres_finish(&r);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);

	t_wait_one_succeeded(&d);
	assert_int_equal(t_get(&d, "/console/outbox/1", &s, &r), 200);
	assert_null(strstr(r.hs_body, "outcome kept"));
	hres_finish(&r);
	assert_int_equal(peer_count(p), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* idemhook_outbox_outcomes_unrecorded as d's /metrics says it (-1 when
 * the series is missing). */
static double t_unrecorded_gauge(struct daemon *d)
{
	struct prom_text *pt = calloc(1, sizeof(*pt));
	struct hres r;
	char url[256];
	double v = -1;

	assert_non_null(pt);
	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	if (prom_parse(pt, r.hs_body) < 0) {
		fail_msg("/metrics: %s", pt->pt_error);
	}
	if (prom_count(pt, "idemhook_outbox_outcomes_unrecorded") == 1) {
		assert_string_equal(prom_type(pt, "idemhook_outbox_outcomes_unrecorded"), "gauge");
		v = prom_sum(pt, "idemhook_outbox_outcomes_unrecorded", "");
	}
	hres_finish(&r);
	free(pt);
	return v;
}

/* The shop answers while another process holds the write lock through the
 * whole stop: the outcome waits in memory (counted by /metrics, which an
 * operator reads while `outbox list` still says delivering) and, when the
 * stop's grace ends, the row is given back with an "outcome not recorded"
 * line, not counted. The next start sends the call once more with the same
 * key, and the row ends succeeded with one attempt counted. */
static void
test_an_outcome_refused_until_the_stop_ends_is_given_back_and_sent_once_more(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct peer_request q[2];
	struct hn_sqlite lock;
	struct daemon d;
	char ini[2048];
	char id[64];
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	/* Each write waits 2 s for the lock: the give-back's wait is when the
	 * lock goes. */
	t_ini_one_attempt(ini, sizeof(ini), "[store]\nbusy_timeout_ms = 2000\n\n", "", p);
	fx_daemon_start(&d, "%s", ini);
	assert_true(t_unrecorded_gauge(&d) == 0);
	fx_order(&d, 2480, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_given_back", id, 2480, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	atomic_store(&g.g_open, 1);
	assert_int_equal(daemon_log_wait(&d,
	                                 "row 1: the outcome of attempt 1 (HTTP 200) could not be "
	                                 "recorded; kept, written again every 500 ms (the row "
	                                 "shows delivering meanwhile",
	                                 10000),
	                 0);
	assert_true(t_unrecorded_gauge(&d) == 1);
	assert_int_equal(e2e_cli(&d, "outbox", "list", NULL, &out), EX_OK);
	assert_non_null(strstr(out, "delivering"));
	free(out);

	assert_int_equal(daemon_signal(&d, SIGTERM), 0);
	assert_int_equal(daemon_log_wait(&d,
	                                 "row 1: the outcome of attempt 1 (HTTP 200) still could "
	                                 "not be recorded before the stop",
	                                 30000),
	                 0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	assert_int_equal(daemon_log_wait(&d, "row 1: given back, its history says", 1000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'pending'"
	                               " AND attempts = 0 AND last_error LIKE 'outcome not%%'"),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 1);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                      " AND http_status IS NULL AND latency_ms >= 0 AND error ="
	                      " 'outcome not recorded: the peer answered HTTP 200, but the database"
	                      " refused to record it before the stop (see the log); sent again"
	                      " (not counted)'"),
	        1);
	assert_int_equal(peer_count(p), 1);

	/* Not counted: max_attempts = 1 lets the next start deliver it, once. */
	assert_int_equal(daemon_start(&d), 0);
	t_delivered_as_attempt_one(&d);
	usleep(500 * 1000); /* a second delivery would come in this time */
	assert_int_equal(peer_count(p), 2);
	assert_int_equal(peer_request(p, 0, &q[0]), 0);
	assert_int_equal(peer_request(p, 1, &q[1]), 0);
	assert_non_null(q[0].pq_idem_key);
	assert_non_null(q[1].pq_idem_key);
	assert_string_equal(q[0].pq_idem_key, q[1].pq_idem_key);
	peer_request_finish(&q[0]);
	peer_request_finish(&q[1]);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 2);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"
	                               " WHERE error LIKE 'interrupted:%%'"),
	                 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM orders WHERE"
	                               " fulfillment_status = 'notified'"),
	                 1);
	t_assert_history_of_one_cut_call(&d, "1", "outcome not recorded: ");
	assert_true(t_unrecorded_gauge(&d) == 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* The config without its [outbound] section (the harness writes it last),
 * into out. */
static void e2e_ini_without_outbound(const struct daemon *d, char *out, size_t size)
{
	char *conf = hn_read_file(d->dm_config);
	const char *at;

	assert_non_null(conf);
	at = strstr(conf, "\n[outbound]\n");
	assert_non_null(at);
	assert_true((size_t)(at - conf) + 2 < size);
	snprintf(out, size, "%.*s\n", (int)(at - conf), conf);
	free(conf);
}

static double e2e_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A call cut by a kill -9, then a start without [outbound]: no worker will
 * lease the row, so the start gives it back all the same (with its history
 * line), and `outbox list` no longer shows it delivering for ever. */
static void test_a_start_without_outbound_gives_back_a_row_a_crash_left_delivering(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 60000};
	struct daemon d;
	char with[2048];
	char without[2048];
	char id[64];
	char *full;

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	t_ini_one_attempt(with, sizeof(with), "", "", p);
	fx_daemon_start(&d, "%s", with);
	fx_order(&d, 2450, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_no_worker", id, 2450, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);
	daemon_kill9(&d);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'delivering'"),
	                 1);

	full = hn_read_file(d.dm_config);
	assert_non_null(full);
	e2e_ini_without_outbound(&d, without, sizeof(without));
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", without), 0);
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(daemon_log_wait(&d, "row(s) left delivering by the last run", 10000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'pending'"
	                               " AND attempts = 0 AND lease_until IS NULL"),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status IS NULL AND error LIKE 'interrupted: %%'"),
	                 1);
	{
		const char *args[] = {"outbox", "list", "--status", "delivering", NULL};

		fx_cli_says(&d, args, 0, "no outbox rows");
	}
	assert_int_equal(daemon_term(&d, 20), 0);

	/* The section back: the row is delivered, its cut call not counted. */
	atomic_store(&g.g_open, 1);
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", full), 0);
	free(full);
	assert_int_equal(daemon_start(&d), 0);
	t_delivered_as_attempt_one(&d);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* A reload that removes [outbound] while a slow shop holds a call does not
 * wait for it: the call finishes and is recorded once (no release, no
 * second copy), nothing else is leased, and a reload that brings the
 * section back delivers again. */
static void test_a_reload_that_removes_outbound_lets_the_call_in_flight_finish(void **state)
{
	struct peer *p = peer_create();
	struct gate g = {.g_hold_ms = 7000};
	struct timespec t0;
	struct daemon d;
	char with[2048];
	char without[2048];
	char id1[64];
	char id2[64];
	char id3[64];
	double took;

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_handler(p, "/notify", gate_answer, NULL, &g), 0);
	snprintf(with, sizeof(with),
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\n"
	                       "poll = 50ms\ntimeout = 20s\n",
	         peer_base(p));
	fx_daemon_start(&d, "%s", with);
	fx_order(&d, 2500, "usd", id1);
	fx_order(&d, 2501, "usd", id2);
	fx_order(&d, 2502, "usd", id3);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_unconf_1", id1, 2500, "usd"), 200);
	assert_int_equal(gate_wait(&g, 1), 1);

	e2e_ini_without_outbound(&d, without, sizeof(without));
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", without), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	took = e2e_since(&t0);
	print_message("reload without [outbound] took %.2f s while a call was in flight\n", took);
	assert_true(took < 2.0);
	assert_int_equal(daemon_log_wait(&d,
	                                 "SIGHUP: no outbound call configured any more: the "
	                                 "outbound worker starts no delivery; those in flight "
	                                 "finish and are recorded",
	                                 1000),
	                 0);

	/* The held call ends with the shop's answer, recorded as one attempt. */
	t_delivered_as_attempt_one(&d);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox_attempts"), 1);
	assert_int_equal(peer_count(p), 1);
	/* A payment now queues no call. */
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_unconf_2", id2, 2501, "usd"), 200);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox"), 1);

	/* The section back: the worker delivers again. */
	atomic_store(&g.g_open, 1);
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", with), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: the outbound worker takes the new", 10000),
	                 0);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_unconf_3", id3, 2502, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'succeeded'", 2,
	                                E2E_WAIT_S),
	                 2);
	assert_int_equal(peer_count(p), 2);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

/* A reload that adds [outbound] to a daemon started without one starts the
 * worker, and says so. */
static void test_a_reload_that_adds_outbound_starts_the_worker(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct daemon d;
	char ini[2048];
	char id[64];
	char *log;

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &ok);
	fx_daemon_start(&d, "%s", FX_STRIPE_INI);
	snprintf(ini, sizeof(ini), "\n[outbound]\nnotify_url = %s/notify\npoll = 50ms\n",
	         peer_base(p));
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	fx_order(&d, 2600, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_added", id, 2600, "usd"), 200);
	t_wait_one_succeeded(&d);
	assert_int_equal(daemon_term(&d, 20), 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(
	        strstr(log, "SIGHUP: outbound worker started with the new [outbound] settings"));
	assert_null(strstr(log, "restarted"));
	free(log);
	daemon_finish(&d);
	peer_destroy(p);
}

/* The admin listener's /metrics holds line within 5 s (a reload's metric
 * is set just after its log line). */
static int t_metric(struct daemon *d, const char *line)
{
	char url[128];
	struct hres r;
	int found = 0;
	int i;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	for (i = 0; i < 100 && !found; i++) {
		if (i > 0) {
			usleep(50 * 1000);
		}
		assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
		assert_int_equal(r.hs_status, 200);
		found = strstr(r.hs_body, line) != NULL;
		hres_finish(&r);
	}
	return found;
}

/* A reload that adds [outbound] while another process holds the database's
 * write lock: the worker cannot start (it gives back rows a crash left
 * delivering first, a write), the rest of the file is taken, and the reload
 * says so and counts as failed. Once the lock is gone, the next reload
 * starts the worker, and counts as taken. */
static void test_a_reload_whose_outbound_worker_cannot_start_counts_as_failed(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct hn_sqlite lock;
	struct daemon d;
	char ini[2048];
	char id[64];
	char *log;

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &ok);
	fx_daemon_start(&d, "%s\n[store]\nbusy_timeout_ms = 200\n", FX_STRIPE_INI);
	snprintf(ini, sizeof(ini), "\n[outbound]\nnotify_url = %s/notify\npoll = 50ms\n",
	         peer_base(p));
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "<3>SIGHUP: configuration and secrets reloaded from "));
	assert_non_null(strstr(log, " except [outbound] (above): outbound calls do not run on its "
	                            "settings; fix the cause and reload again, or restart "
	                            "idemhook (systemctl restart idemhook)\n"));
	assert_null(strstr(log, "<5>SIGHUP: configuration"));
	free(log);
	assert_true(t_metric(&d, "idemhook_config_last_reload_successful 0\n"));
	assert_true(t_metric(&d, "idemhook_config_reloads_total{result=\"failure\"} 1\n"));

	/* the cause gone, a reload starts the worker and counts as taken */
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d,
	                                 "SIGHUP: outbound worker started with the new [outbound]",
	                                 10000),
	                 0);
	assert_int_equal(daemon_log_wait(&d, "<5>SIGHUP: configuration", 10000), 0);
	assert_true(t_metric(&d, "idemhook_config_last_reload_successful 1\n"));
	fx_order(&d, 2600, "usd", id);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_late_start", id, 2600, "usd"), 200);
	t_wait_one_succeeded(&d);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

struct crash {
	struct daemon cr_daemon;
	char cr_ids[CRASH_ORDERS][64];
	char *cr_bodies[CRASH_ORDERS];
	int cr_acked[CRASH_ORDERS];
	atomic_int cr_next;
};

static void *crash_sender(void *arg)
{
	struct crash *c = arg;

	for (;;) {
		int i = atomic_fetch_add(&c->cr_next, 1);
		struct hres r;

		if (i >= CRASH_ORDERS) {
			break;
		}
		if (hn_post_stripe(&c->cr_daemon, "stripe", FX_STRIPE_SECRET, c->cr_bodies[i],
		                   &r) == 0 &&
		    r.hs_status == 200) {
			c->cr_acked[i] = 1;
		}
		hres_finish(&r);
	}
	return NULL;
}

static void test_kill_during_deliveries_delivers_every_committed_row_with_one_key(void **state)
{
	struct crash *c = calloc(1, sizeof(*c));
	struct peer *p = peer_create();
	/* slow answers keep transfers in flight when the daemon dies */
	struct peer_behaviour slow = {.pb_action = PEER_DRIP, .pb_ms = 100, .pb_size = 10};
	struct peer_behaviour fast = peer_reply(200, "{}");
	pthread_t senders[CRASH_SENDERS];
	char ini[2048];
	char *rows;
	char *line;
	size_t n_req;
	size_t i;

	(void)state;
	assert_non_null(c);
	assert_non_null(p);
	peer_default(p, "/notify", &slow);
	e2e_ini(ini, sizeof(ini), p, NULL);
	fx_daemon_start(&c->cr_daemon, "%s", ini);
	for (i = 0; i < CRASH_ORDERS; i++) {
		char event_id[64];

		assert_int_equal(
		        hn_order_create(&c->cr_daemon, 1000 + (int64_t)i, "usd", c->cr_ids[i]), 0);
		snprintf(event_id, sizeof(event_id), "evt_outbox_crash_%zu", i);
		c->cr_bodies[i] =
		        fx_stripe_payment(event_id, c->cr_ids[i], 1000 + (int64_t)i, "usd");
	}
	atomic_init(&c->cr_next, 0);
	for (i = 0; i < CRASH_SENDERS; i++) {
		assert_int_equal(pthread_create(&senders[i], NULL, crash_sender, c), 0);
	}
	/* Kill while deliveries are under way. */
	assert_true(peer_wait(p, 6, E2E_WAIT_S * 1000) >= 6);
	daemon_kill9(&c->cr_daemon);
	for (i = 0; i < CRASH_SENDERS; i++) {
		pthread_join(senders[i], NULL);
	}
	print_message("requests seen before the kill: %zu; rows committed: %" PRId64 "\n",
	              peer_count(p), hn_db_int(c->cr_daemon.dm_db, "SELECT count(*) FROM outbox"));
	assert_true(hn_db_int(c->cr_daemon.dm_db,
	                      "SELECT count(*) FROM outbox WHERE status <> 'succeeded'") > 0);

	peer_default(p, "/notify", &fast);
	assert_int_equal(daemon_start(&c->cr_daemon), 0);
	/* The provider retries what was not acknowledged. */
	for (i = 0; i < CRASH_ORDERS; i++) {
		struct hres r;

		if (c->cr_acked[i]) {
			continue;
		}
		assert_int_equal(hn_post_stripe(&c->cr_daemon, "stripe", FX_STRIPE_SECRET,
		                                c->cr_bodies[i], &r),
		                 0);
		assert_int_equal(r.hs_status, 200);
		hres_finish(&r);
	}
	assert_int_equal(hn_db_int(c->cr_daemon.dm_db, "SELECT count(*) FROM outbox"),
	                 CRASH_ORDERS);
	assert_int_equal(hn_db_wait_int(c->cr_daemon.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'succeeded'",
	                                CRASH_ORDERS, E2E_WAIT_S),
	                 CRASH_ORDERS);

	/* Every committed row reached the peer; every key the peer saw is a
	 * committed row's; each row kept one key and one body across attempts. */
	rows = hn_db_dump(c->cr_daemon.dm_db, "SELECT idem_key, order_id FROM outbox ORDER BY id");
	assert_non_null(rows);
	n_req = peer_count(p);
	print_message("requests seen in all: %zu for %d rows\n", n_req, CRASH_ORDERS);
	assert_true(n_req >= CRASH_ORDERS);
	for (line = rows; *line != '\0';) {
		char *eol = strchr(line, '\n');
		char *bar = strchr(line, '|');
		size_t seen = 0;

		assert_non_null(eol);
		assert_non_null(bar);
		*eol = '\0';
		*bar = '\0';
		for (i = 0; i < n_req; i++) {
			struct peer_request q;

			assert_int_equal(peer_request(p, i, &q), 0);
			if (q.pq_idem_key != NULL && strcmp(q.pq_idem_key, line) == 0) {
				seen++;
				assert_non_null(strstr(q.pq_body, bar + 1));
			} else {
				/* another row's key never carries this order */
				assert_null(strstr(q.pq_body, bar + 1));
			}
			peer_request_finish(&q);
		}
		assert_true(seen >= 1);
		line = eol + 1;
	}
	free(rows);
	rows = hn_db_dump(c->cr_daemon.dm_db, "SELECT idem_key FROM outbox ORDER BY id");
	assert_non_null(rows);
	for (i = 0; i < n_req; i++) {
		struct peer_request q;

		assert_int_equal(peer_request(p, i, &q), 0);
		assert_non_null(q.pq_idem_key);
		assert_non_null(strstr(rows, q.pq_idem_key));
		peer_request_finish(&q);
	}
	free(rows);
	assert_int_equal(
	        hn_db_int(c->cr_daemon.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	        CRASH_ORDERS);
	for (i = 0; i < CRASH_ORDERS; i++) {
		free(c->cr_bodies[i]);
	}
	assert_int_equal(daemon_term(&c->cr_daemon, 20), 0);
	daemon_finish(&c->cr_daemon);
	peer_destroy(p);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_paid_callback_reaches_the_shop_once_with_an_idempotency_key),
	        cmocka_unit_test(test_a_dead_notify_is_compensated_by_a_refund_at_the_provider),
	        cmocka_unit_test(test_the_cli_transitions_are_in_the_audit_log),
	        cmocka_unit_test(test_a_row_killed_by_a_redirect_keeps_where_the_peer_pointed),
	        cmocka_unit_test(test_a_retried_dead_row_puts_the_fulfillment_back_to_pending),
	        cmocka_unit_test(
	                test_the_history_numbers_stay_the_attempts_own_when_older_lines_are_trimmed),
	        cmocka_unit_test(test_a_reload_lets_a_slow_delivery_finish_and_moves_the_next_one),
	        cmocka_unit_test(test_a_call_released_at_shutdown_is_in_the_attempt_history),
	        cmocka_unit_test(
	                test_a_call_cut_by_a_kill_is_in_the_attempt_history_after_the_restart),
	        cmocka_unit_test(
	                test_a_reload_that_removes_outbound_lets_the_call_in_flight_finish),
	        cmocka_unit_test(test_a_reload_that_adds_outbound_starts_the_worker),
	        cmocka_unit_test(test_a_reload_whose_outbound_worker_cannot_start_counts_as_failed),
	        cmocka_unit_test(
	                test_an_outcome_the_store_refused_is_recorded_once_it_takes_writes),
	        cmocka_unit_test(
	                test_an_outcome_refused_until_the_stop_ends_is_given_back_and_sent_once_more),
	        cmocka_unit_test(test_a_give_back_the_store_refuses_keeps_the_outcome_to_try_again),
	        cmocka_unit_test(test_the_console_marks_a_row_whose_outcome_the_worker_keeps),
	        cmocka_unit_test(
	                test_under_a_newer_schema_the_worker_calls_nothing_and_resumes_after),
	        cmocka_unit_test(test_a_kept_row_past_its_lease_is_not_polled_as_due),
	        cmocka_unit_test(test_a_kept_outcome_of_a_row_taken_over_says_so),
	        cmocka_unit_test(test_an_https_notify_url_on_a_plain_port_says_use_http),
	        cmocka_unit_test(
	                test_an_https_notify_url_whose_server_closes_in_the_handshake_hints_at_http),
	        cmocka_unit_test(test_a_shop_certificate_that_fails_verification_says_what_to_set),
	        cmocka_unit_test(test_a_ca_file_that_cannot_be_used_is_named_not_the_peer),
	        cmocka_unit_test(test_a_replaced_ca_file_takes_effect_at_the_next_attempt),
	        cmocka_unit_test(
	                test_a_ca_file_that_cannot_be_used_is_refused_by_check_start_and_reload),
	        cmocka_unit_test(
	                test_a_start_without_outbound_gives_back_a_row_a_crash_left_delivering),
	        cmocka_unit_test(
	                test_kill_during_deliveries_delivers_every_committed_row_with_one_key),
	};

	/* IDEMHOOK_TEST_FILTER=test_a_* runs only the tests it matches. */
	if (getenv("IDEMHOOK_TEST_FILTER") != NULL) {
		cmocka_set_test_filter(getenv("IDEMHOOK_TEST_FILTER"));
	}
	return cmocka_run_group_tests_name("outbox_e2e", tests, NULL, NULL);
}
