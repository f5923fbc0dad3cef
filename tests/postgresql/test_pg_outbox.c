/* test_pg_outbox.c: three receivers on one PostgreSQL database share one
 * outbox: a shop that counts what it gets sees each row's key once per
 * attempt, and never one row delivered by two receivers at the same time. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "peer.h"
#include "pg_common.h"

#define OUTBOX_EVENTS 60
#define OUTBOX_HOLD_MS 20 /* each delivery stays in flight this long */
#define OUTBOX_WAIT_S 60

/* The shop: per key, deliveries seen and how many were in flight at once. */
struct shop_key {
	char sk_key[128];
	int sk_seen;
	int sk_in_flight;
};

struct shop {
	pthread_mutex_t sh_lock;
	struct shop_key sh_keys[OUTBOX_EVENTS * 2];
	size_t sh_n;
	int sh_overlaps; /* a delivery that began while another of its key was in flight */
	int sh_refused;
	unsigned sh_requests;
};

static struct shop_key *shop_key_find(struct shop *s, const char *key)
{
	size_t i;

	for (i = 0; i < s->sh_n; i++) {
		if (strcmp(s->sh_keys[i].sk_key, key) == 0) {
			return &s->sh_keys[i];
		}
	}
	if (s->sh_n == sizeof(s->sh_keys) / sizeof(s->sh_keys[0])) {
		return NULL;
	}
	snprintf(s->sh_keys[s->sh_n].sk_key, sizeof(s->sh_keys[0].sk_key), "%s", key);
	return &s->sh_keys[s->sh_n++];
}

/* Every other row's first attempt is refused with a 503, so retries are
 * claimed again, perhaps by another receiver. */
static void shop_answer(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	struct shop *s = arg;
	struct timespec hold = {0, OUTBOX_HOLD_MS * 1000000L};
	struct shop_key *k;
	int refuse;

	pthread_mutex_lock(&s->sh_lock);
	k = shop_key_find(s, req->pq_idem_key != NULL ? req->pq_idem_key : "(none)");
	if (k == NULL) {
		pthread_mutex_unlock(&s->sh_lock);
		ret->pb_status = 500;
		return;
	}
	k->sk_seen++;
	k->sk_in_flight++;
	if (k->sk_in_flight > 1) {
		s->sh_overlaps++;
	}
	refuse = k->sk_seen == 1 && s->sh_requests++ % 2 == 0;
	if (refuse) {
		s->sh_refused++;
	}
	pthread_mutex_unlock(&s->sh_lock);
	nanosleep(&hold, NULL);
	pthread_mutex_lock(&s->sh_lock);
	k->sk_in_flight--;
	pthread_mutex_unlock(&s->sh_lock);
	ret->pb_status = refuse ? 503 : 200;
	ret->pb_body = "{}";
}

static void test_three_receivers_deliver_each_row_once_per_attempt_never_twice_at_once(void **state)
{
	struct daemon r[PG_RECEIVERS];
	struct shop *s = calloc(1, sizeof(*s));
	struct peer *p = peer_create();
	char ini[2048];
	char *rows;
	char *line;
	int64_t done = -1;
	int e;
	int i;

	assert_non_null(s);
	assert_non_null(p);
	pthread_mutex_init(&s->sh_lock, NULL);
	assert_int_equal(peer_handler(p, "/notify", shop_answer, NULL, s), 0);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI
	         "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\nretry_cap = 200ms\n"
	         "poll = 20ms\ntimeout = 5s\nconnect_timeout = 2s\nconcurrency = 4\n",
	         peer_base(p));
	assert_int_equal(pg_receivers_start(r, PG_RECEIVERS, ini), 0);
	for (e = 0; e < OUTBOX_EVENTS; e++) {
		struct pg_callback cb;
		struct hres res;
		char event_id[64];
		char id[64];
		char *body;

		assert_int_equal(hn_order_create(&r[e % PG_RECEIVERS], 3000 + e, "usd", id), 0);
		snprintf(event_id, sizeof(event_id), "evt_pg_outbox_%d", e);
		body = fx_stripe_payment(event_id, id, 3000 + e, "usd");
		pg_callback_init(&cb, &r[e % PG_RECEIVERS], body);
		assert_int_equal(pg_callback_send(&cb, &res), 0);
		assert_int_equal(res.hs_status, 200);
		hres_finish(&res);
		free(body);
	}
	assert_int_equal(hn_db_int(r[0].dm_db, "SELECT COUNT(*) FROM outbox"), OUTBOX_EVENTS);
	for (i = 0; i < OUTBOX_WAIT_S * 20; i++) {
		done = hn_db_int(r[0].dm_db,
		                 "SELECT COUNT(*) FROM outbox WHERE status = 'succeeded'");
		if (done == OUTBOX_EVENTS) {
			break;
		}
		usleep(50000);
	}
	assert_int_equal(done, OUTBOX_EVENTS);

	pthread_mutex_lock(&s->sh_lock);
	print_message("deliveries: %u, refused first attempts: %d, overlaps: %d\n", s->sh_requests,
	              s->sh_refused, s->sh_overlaps);
	assert_int_equal(s->sh_overlaps, 0);
	assert_true(s->sh_refused > 0);
	assert_int_equal(s->sh_n, OUTBOX_EVENTS);
	/* The shop saw each row's key exactly as often as the row was attempted. */
	rows = hn_db_dump(r[0].dm_db, "SELECT idem_key, attempts FROM outbox ORDER BY id");
	assert_non_null(rows);
	for (line = rows; *line != '\0';) {
		char *eol = strchr(line, '\n');
		char *bar = strchr(line, '|');
		struct shop_key *k;

		assert_non_null(eol);
		assert_non_null(bar);
		*eol = '\0';
		*bar = '\0';
		k = shop_key_find(s, line);
		assert_non_null(k);
		if (k->sk_seen != strtol(bar + 1, NULL, 10)) {
			fail_msg("row %s: attempted %s times, the shop saw it %d times", line,
			         bar + 1, k->sk_seen);
		}
		line = eol + 1;
	}
	assert_int_equal(s->sh_n, OUTBOX_EVENTS); /* no key the outbox does not hold */
	pthread_mutex_unlock(&s->sh_lock);
	free(rows);
	pg_receivers_finish(r, PG_RECEIVERS);
	peer_destroy(p);
	pthread_mutex_destroy(&s->sh_lock);
	free(s);
}

/* As on SQLite (test_outbox_e2e): a dead call retried by an operator puts
 * the order's fulfillment back to pending until it gets through. */
static void test_a_retried_dead_row_puts_the_fulfillment_back_to_pending_on_postgresql(void **state)
{
	struct peer_behaviour e400 = peer_reply(400, "{\"error\":\"no such order\"}");
	struct peer_behaviour hold = {.pb_action = PEER_HANG, .pb_ms = 60000};
	const char *retry[] = {"outbox", "retry", NULL, NULL};
	struct peer *p = peer_create();
	struct daemon d;
	char ini[2048];
	char sql[256];
	char row[32];
	char id[64];
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	peer_script(p, "/notify", &e400);
	peer_default(p, "/notify", &hold); /* the retried attempt waits */
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 1\n"
	                       "poll = 20ms\ntimeout = 50s\n",
	         peer_base(p));
	assert_int_equal(pg_receivers_start(&d, 1, ini), 0);
	assert_int_equal(hn_order_create(&d, 2100, "usd", id), 0);
	assert_int_equal(fx_stripe_pay(&d, "evt_pg_outbox_retry", id, 2100, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT COUNT(*) FROM outbox WHERE status = 'dead'", 1,
	                                OUTBOX_WAIT_S),
	                 1);
	snprintf(sql, sizeof(sql), "SELECT fulfillment_status FROM orders WHERE id = '%s'", id);
	out = hn_db_dump(d.dm_db, sql);
	assert_non_null(out);
	assert_string_equal(out, "failed\n");
	free(out);
	snprintf(row, sizeof(row), "%lld", (long long)hn_db_int(d.dm_db, "SELECT id FROM outbox"));
	retry[2] = row;
	assert_int_equal(daemon_cli(&d, 1, retry, &out), 0);
	free(out);
	out = hn_db_dump(d.dm_db, sql);
	assert_non_null(out);
	assert_string_equal(out, "pending\n");
	free(out);
	pg_receivers_finish(&d, 1);
	peer_destroy(p);
}

/* A call unanswered at shutdown is given back, uncounted, with a line in
 * its attempt history (as on SQLite, test_outbox_e2e). */
static void test_a_call_released_at_shutdown_is_in_the_attempt_history_on_postgresql(void **state)
{
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 60000};
	struct peer *p = peer_create();
	struct daemon d;
	char ini[2048];
	char id[64];

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &hang);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 1\n"
	                       "poll = 20ms\ntimeout = 50s\n",
	         peer_base(p));
	assert_int_equal(pg_receivers_start(&d, 1, ini), 0);
	assert_int_equal(hn_order_create(&d, 2300, "usd", id), 0);
	assert_int_equal(fx_stripe_pay(&d, "evt_pg_outbox_released", id, 2300, "usd"), 200);
	assert_int_equal(peer_wait(p, 1, OUTBOX_WAIT_S * 1000), 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT attempts FROM outbox"), 0);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM outbox WHERE status = 'pending'"),
	                 1);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM outbox_attempts WHERE attempt = 1"
	                                    " AND http_status IS NULL AND latency_ms >= 4000"
	                                    " AND error LIKE 'released at shutdown:%'"),
	                 1);
	pg_receivers_finish(&d, 1);
	peer_destroy(p);
}

/* One receiver with [outbound] (one attempt, the timeout and lease given
 * as "timeout = ..\nlease = ..\n") into ini, a payment of amount for a new
 * order under event evt whose call the shop p holds, and the receiver
 * killed (kill -9) mid-call, its row left delivering under its lease. */
static void pg_killed_mid_call(struct daemon *d, struct peer *p, const char *timing, char *ini,
                               size_t ini_size, const char *evt, int amount)
{
	char id[64];

	snprintf(ini, ini_size,
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 1\n"
	                       "poll = 20ms\n%s",
	         peer_base(p), timing);
	assert_int_equal(pg_receivers_start(d, 1, ini), 0);
	assert_int_equal(hn_order_create(d, amount, "usd", id), 0);
	assert_int_equal(fx_stripe_pay(d, evt, id, amount, "usd"), 200);
	assert_int_equal(peer_wait(p, 1, OUTBOX_WAIT_S * 1000), 1);
	daemon_kill9(d);
}

/* The row a kill cut is delivered by its first counted attempt (200), and
 * the cut call is in its history beside it, uncounted, as cut_like says. */
static void pg_delivered_after_the_cut(const char *db, const char *cut_like)
{
	char sql[256];

	assert_int_equal(hn_db_wait_int(db,
	                                "SELECT COUNT(*) FROM outbox WHERE status = 'succeeded'", 1,
	                                OUTBOX_WAIT_S),
	                 1);
	assert_int_equal(hn_db_int(db, "SELECT attempts FROM outbox"), 1);
	assert_int_equal(hn_db_int(db, "SELECT COUNT(*) FROM outbox_attempts"), 2);
	snprintf(sql, sizeof(sql),
	         "SELECT COUNT(*) FROM outbox_attempts WHERE attempt = 1 AND http_status IS NULL"
	         " AND error LIKE '%s'",
	         cut_like);
	assert_int_equal(hn_db_int(db, sql), 1);
	assert_int_equal(hn_db_int(db, "SELECT COUNT(*) FROM outbox_attempts WHERE attempt = 1"
	                               " AND http_status = 200"),
	                 1);
}

/* A call cut by a kill -9 is given back, once its lease ran out, by the
 * next start, uncounted, with a line in its attempt history (as on SQLite,
 * test_outbox_e2e). */
static void test_a_call_cut_by_a_kill_is_in_the_attempt_history_on_postgresql(void **state)
{
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 60000};
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct peer *p = peer_create();
	struct daemon d;
	char ini[2048];

	(void)state;
	assert_non_null(p);
	peer_script(p, "/notify", &hang);
	peer_default(p, "/notify", &ok);
	pg_killed_mid_call(&d, p, "timeout = 2s\nlease = 3s\n", ini, sizeof(ini),
	                   "evt_pg_outbox_killed", 2400);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM outbox WHERE status ="
	                                    " 'delivering' AND attempts = 1"),
	                 1);
	sleep(4); /* the lease runs out: only then is the row given back */
	assert_int_equal(daemon_start(&d), 0);
	pg_delivered_after_the_cut(d.dm_db, "interrupted: %without a clean shutdown%(not counted)");
	assert_int_equal(hn_db_int(d.dm_db,
	                           "SELECT COUNT(*) FROM outbox_attempts WHERE attempt = 1"
	                           " AND latency_ms IS NULL AND error LIKE 'interrupted: %'"),
	                 1);
	assert_int_equal(daemon_term(&d, 20), 0);
	pg_receivers_finish(&d, 1);
	peer_destroy(p);
}

/* A receiver killed mid-call on a database it shares: another receiver
 * takes the row over once its lease ran out, sends it again uncounted, and
 * the cut call is in the history as a lease that expired. */
static void test_a_row_taken_over_from_a_killed_receiver_keeps_the_cut_call(void **state)
{
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 60000};
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct peer *p = peer_create();
	struct daemon d[2];
	char ini[2048];

	(void)state;
	assert_non_null(p);
	peer_script(p, "/notify", &hang);
	peer_default(p, "/notify", &ok);
	pg_killed_mid_call(&d[0], p, "timeout = 2s\nlease = 3s\n", ini, sizeof(ini),
	                   "evt_pg_outbox_taken", 2500);
	/* started while the lease holds: its start gives nothing back */
	assert_int_equal(daemon_init_beside(&d[1], &d[0], ini), 0);
	assert_int_equal(daemon_start(&d[1]), 0);
	pg_delivered_after_the_cut(d[1].dm_db, "lease expired: %(not counted)");
	assert_int_equal(daemon_term(&d[1], 20), 0);
	pg_receivers_finish(d, 2);
	peer_destroy(p);
}

/* A receiver killed mid-call, then receivers started without [outbound]
 * on the same database: one started while the lease holds gives nothing
 * back (the row may be another live receiver's), one started after it ran
 * out gives the row back with its history line, though no worker runs. */
static void test_a_start_without_outbound_gives_back_an_expired_lease_only(void **state)
{
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 60000};
	struct peer *p = peer_create();
	struct daemon d[3];
	char ini[2048];

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &hang);
	pg_killed_mid_call(&d[0], p, "timeout = 3s\nlease = 4s\n", ini, sizeof(ini),
	                   "evt_pg_outbox_no_worker", 2600);

	assert_int_equal(daemon_init_beside(&d[1], &d[0], FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&d[1]), 0);
	assert_int_equal(hn_db_int(d[1].dm_db, "SELECT COUNT(*) FROM outbox WHERE status ="
	                                       " 'delivering' AND attempts = 1"),
	                 1);
	assert_int_equal(daemon_term(&d[1], 20), 0);

	sleep(5); /* the lease runs out */
	assert_int_equal(daemon_init_beside(&d[2], &d[0], FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&d[2]), 0);
	assert_int_equal(daemon_log_wait(&d[2], "row(s) left delivering by the last run", 10000),
	                 0);
	assert_int_equal(hn_db_int(d[2].dm_db, "SELECT COUNT(*) FROM outbox WHERE status ="
	                                       " 'pending' AND attempts = 0"),
	                 1);
	assert_int_equal(hn_db_int(d[2].dm_db, "SELECT COUNT(*) FROM outbox_attempts WHERE"
	                                       " attempt = 1 AND http_status IS NULL AND error"
	                                       " LIKE 'interrupted: %(not counted)'"),
	                 1);
	assert_int_equal(daemon_term(&d[2], 20), 0);
	pg_receivers_finish(d, 3);
	peer_destroy(p);
}

/* Receiver r (stopped or not) runs `outbox retry row` as an operator. */
static void pg_operator_retry(struct daemon *r, const char *row)
{
	const char *retry[] = {"outbox", "retry", row, NULL};
	char *out = NULL;

	assert_int_equal(daemon_cli(r, 1, retry, &out), 0);
	free(out);
}

/* Waits until the one row is dead with its attempt history n lines long. */
static void pg_wait_dead_after(const struct daemon *r, int lines)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
	         "SELECT COUNT(*) FROM outbox WHERE status = 'dead' AND"
	         " (SELECT COUNT(*) FROM outbox_attempts) = %d",
	         lines);
	assert_int_equal(hn_db_wait_int(r->dm_db, sql, 1, OUTBOX_WAIT_S), 1);
}

/* The first of two receivers sharing the outbox, started with ini (made
 * here, notify_url on p, max_attempts = 1, the [outbound] timeout given),
 * and a payment whose outbox row went dead after one call: its id in row. */
static void numbered_start(struct peer *p, struct daemon *d, char *ini, size_t ini_size,
                           const char *timeout, int64_t amount, const char *evt, char *row,
                           size_t row_size)
{
	char id[64];

	snprintf(ini, ini_size,
	         FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 1\n"
	                       "poll = 20ms\ntimeout = %s\n",
	         peer_base(p), timeout);
	assert_int_equal(pg_receivers_start(d, 1, ini), 0);
	assert_int_equal(hn_order_create(&d[0], amount, "usd", id), 0);
	assert_int_equal(fx_stripe_pay(&d[0], evt, id, amount, "usd"), 200);
	pg_wait_dead_after(&d[0], 1);
	snprintf(row, row_size, "%lld", (long long)hn_db_int(d[0].dm_db, "SELECT id FROM outbox"));
}

/* Two receivers share the outbox: a row that went dead on one, retried by
 * the operator and taken by the other (and back again), numbers each
 * counted call once across the rounds and the receivers (#1, #2, #3), as
 * on SQLite, though each round's count starts again at 1. */
static void test_a_row_retried_and_taken_by_another_receiver_numbers_its_calls_on(void **state)
{
	struct peer_behaviour e400 = peer_reply(400, "{\"error\":\"no such order\"}");
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct peer *p = peer_create();
	struct daemon d[2];
	char ini[2048];
	char row[32];
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	peer_script(p, "/notify", &e400);
	peer_script(p, "/notify", &e400);
	peer_default(p, "/notify", &ok);
	numbered_start(p, d, ini, sizeof(ini), "5s", 2700, "evt_pg_outbox_numbered", row,
	               sizeof(row));

	/* The first receiver stops; the other one takes the retried row. */
	assert_int_equal(daemon_term(&d[0], 20), 0);
	assert_int_equal(daemon_init_beside(&d[1], &d[0], ini), 0);
	assert_int_equal(daemon_start(&d[1]), 0);
	pg_operator_retry(&d[0], row);
	pg_wait_dead_after(&d[1], 2);

	/* And back: the first receiver takes the next retry, delivered. */
	assert_int_equal(daemon_term(&d[1], 20), 0);
	assert_int_equal(daemon_start(&d[0]), 0);
	pg_operator_retry(&d[1], row);
	assert_int_equal(hn_db_wait_int(d[0].dm_db,
	                                "SELECT COUNT(*) FROM outbox WHERE status = 'succeeded'", 1,
	                                OUTBOX_WAIT_S),
	                 1);
	assert_int_equal(peer_count(p), 3);
	assert_int_equal(hn_db_int(d[0].dm_db, "SELECT attempts FROM outbox"), 1);
	out = hn_db_dump(d[0].dm_db, "SELECT attempt, http_status FROM outbox_attempts"
	                             " ORDER BY id");
	assert_non_null(out);
	assert_string_equal(out, "1|400\n2|400\n3|200\n");
	free(out);
	{
		const char *show[] = {"outbox", "show", row, "--json", NULL};

		assert_int_equal(daemon_cli(&d[0], 1, show, &out), 0);
	}
	assert_non_null(out);
	assert_non_null(strstr(out, "\"n\": \"3\", \"attempt\": 3, \"counted\": true"));
	assert_non_null(strstr(out, "\"n\": \"2\", \"attempt\": 2, \"counted\": true"));
	assert_non_null(strstr(out, "\"n\": \"1\", \"attempt\": 1, \"counted\": true"));
	free(out);
	assert_int_equal(daemon_term(&d[0], 20), 0);
	pg_receivers_finish(d, 2);
	peer_destroy(p);
}

/* A retried row's call given back at one receiver's shutdown is repeated
 * by the other under the same number: the history reads #1 (the dead
 * call), #2 given back (not counted), #2 delivered. */
static void test_a_retried_call_given_back_at_shutdown_keeps_its_number_at_the_other(void **state)
{
	struct peer_behaviour e400 = peer_reply(400, "{\"error\":\"no such order\"}");
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 60000};
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct peer *p = peer_create();
	struct daemon d[2];
	char ini[2048];
	char row[32];
	char *out = NULL;

	(void)state;
	assert_non_null(p);
	peer_script(p, "/notify", &e400);
	peer_script(p, "/notify", &hang);
	peer_default(p, "/notify", &ok);
	numbered_start(p, d, ini, sizeof(ini), "50s", 2800, "evt_pg_outbox_given_back", row,
	               sizeof(row));
	pg_operator_retry(&d[0], row);
	assert_int_equal(peer_wait(p, 2, OUTBOX_WAIT_S * 1000), 2); /* the retried call hangs */
	assert_int_equal(daemon_term(&d[0], 20), 0);
	assert_int_equal(daemon_init_beside(&d[1], &d[0], ini), 0);
	assert_int_equal(daemon_start(&d[1]), 0);
	assert_int_equal(hn_db_wait_int(d[1].dm_db,
	                                "SELECT COUNT(*) FROM outbox WHERE status = 'succeeded'", 1,
	                                OUTBOX_WAIT_S),
	                 1);
	out = hn_db_dump(d[1].dm_db, "SELECT attempt, COALESCE(http_status, 0),"
	                             " error LIKE 'released at shutdown:%' FROM outbox_attempts"
	                             " ORDER BY id");
	assert_non_null(out);
	if (strcmp(out, "1|400|NULL\n2|0|1\n2|200|NULL\n") != 0) {
		fail_msg("history:\n%s", out);
	}
	free(out);
	assert_int_equal(daemon_term(&d[1], 20), 0);
	pg_receivers_finish(d, 2);
	peer_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_retried_dead_row_puts_the_fulfillment_back_to_pending_on_postgresql),
	        cmocka_unit_test(
	                test_three_receivers_deliver_each_row_once_per_attempt_never_twice_at_once),
	        cmocka_unit_test(
	                test_a_call_released_at_shutdown_is_in_the_attempt_history_on_postgresql),
	        cmocka_unit_test(test_a_call_cut_by_a_kill_is_in_the_attempt_history_on_postgresql),
	        cmocka_unit_test(test_a_row_taken_over_from_a_killed_receiver_keeps_the_cut_call),
	        cmocka_unit_test(test_a_start_without_outbound_gives_back_an_expired_lease_only),
	        cmocka_unit_test(
	                test_a_row_retried_and_taken_by_another_receiver_numbers_its_calls_on),
	        cmocka_unit_test(
	                test_a_retried_call_given_back_at_shutdown_keeps_its_number_at_the_other),
	};

	pgserver_require_or_skip("test_pg_outbox");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
