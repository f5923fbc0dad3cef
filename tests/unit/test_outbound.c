/* test_outbound.c: the outbox policy with an injected clock, and the worker
 * against a real HTTP peer on the real store. */
#include <dirent.h>
#include <dlfcn.h>
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "event.h"
#include "fixtures.h"
#include "log.h"
#include "orders.h"
#include "outbound.h"
#include "outbox.h"
#include "peer.h"
#include "provider.h"
#include "store.h"

#define T_WAIT_MS 15000 /* longest wait for a row to settle */

static const struct orders_conf t_orders = {.oc_points_num = 1, .oc_points_den = 100};

/* ---- the pure policy ---- */

static const struct outbox_policy t_policy = {
        .op_base_ms = 1000,
        .op_cap_ms = 60000,
        .op_max_attempts = 8,
        .op_max_age_ms = 3600 * 1000,
};

static void test_2xx_succeeds_and_only_listed_statuses_are_transient(void **state)
{
	(void)state;
	assert_int_equal(outbox_classify(200), OUTBOX_SUCCESS);
	assert_int_equal(outbox_classify(204), OUTBOX_SUCCESS);
	assert_int_equal(outbox_classify(299), OUTBOX_SUCCESS);
	assert_int_equal(outbox_classify(0), OUTBOX_TRANSIENT);
	assert_int_equal(outbox_classify(408), OUTBOX_TRANSIENT);
	assert_int_equal(outbox_classify(425), OUTBOX_TRANSIENT);
	assert_int_equal(outbox_classify(429), OUTBOX_TRANSIENT);
	assert_int_equal(outbox_classify(500), OUTBOX_TRANSIENT);
	assert_int_equal(outbox_classify(503), OUTBOX_TRANSIENT);
	assert_int_equal(outbox_classify(599), OUTBOX_TRANSIENT);
	assert_int_equal(outbox_classify(400), OUTBOX_PERMANENT);
	assert_int_equal(outbox_classify(401), OUTBOX_PERMANENT);
	assert_int_equal(outbox_classify(404), OUTBOX_PERMANENT);
	assert_int_equal(outbox_classify(409), OUTBOX_PERMANENT);
	assert_int_equal(outbox_classify(422), OUTBOX_PERMANENT);
	assert_int_equal(outbox_classify(301), OUTBOX_PERMANENT);
}

static void test_backoff_window_doubles_up_to_the_cap_with_full_jitter(void **state)
{
	(void)state;
	/* rnd 0 is the bottom of the window: full jitter may retry at once. */
	assert_int_equal(outbox_backoff_ms(&t_policy, 1, 0), 0);
	/* rnd = window is the top of [0, window]. */
	assert_int_equal(outbox_backoff_ms(&t_policy, 1, 1000), 1000);
	assert_int_equal(outbox_backoff_ms(&t_policy, 2, 2000), 2000);
	assert_int_equal(outbox_backoff_ms(&t_policy, 3, 4000), 4000);
	assert_int_equal(outbox_backoff_ms(&t_policy, 4, 8000), 8000);
	/* past the cap the window stays at the cap */
	assert_int_equal(outbox_backoff_ms(&t_policy, 7, 60000), 60000);
	assert_int_equal(outbox_backoff_ms(&t_policy, 40, 60000), 60000);
	assert_int_equal(outbox_backoff_ms(&t_policy, 1000, UINT64_MAX % 60001),
	                 UINT64_MAX % 60001);
	/* never above the window, whatever the random number */
	for (uint64_t r = 0; r < 100000; r += 997) {
		assert_true(outbox_backoff_ms(&t_policy, 1, r * 7919) <= 1000);
		assert_true(outbox_backoff_ms(&t_policy, 3, r * 7919) <= 4000);
		assert_true(outbox_backoff_ms(&t_policy, 30, r * 7919) <= 60000);
	}
}

static void test_retry_after_parses_seconds_and_http_dates(void **state)
{
	int64_t now = 1445412480000LL; /* Wed, 21 Oct 2015 07:28:00 GMT */
	int64_t ms = -1;

	(void)state;
	assert_int_equal(outbox_retry_after_ms("120", now, &ms), 0);
	assert_int_equal(ms, 120000);
	assert_int_equal(outbox_retry_after_ms(" 0 ", now, &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(outbox_retry_after_ms("Wed, 21 Oct 2015 07:28:30 GMT", now, &ms), 0);
	assert_int_equal(ms, 30000);
	/* a date in the past means now */
	assert_int_equal(outbox_retry_after_ms("Wed, 21 Oct 2015 07:00:00 GMT", now, &ms), 0);
	assert_int_equal(ms, 0);
	/* absurdly long values are clamped, not overflowed */
	assert_int_equal(outbox_retry_after_ms("99999999999999999999999", now, &ms), 0);
	assert_true(ms > 0 && ms <= 31LL * 24 * 3600 * 1000);
	assert_int_equal(outbox_retry_after_ms("-5", now, &ms), -1);
	assert_int_equal(outbox_retry_after_ms("soon", now, &ms), -1);
	assert_int_equal(outbox_retry_after_ms("12abc", now, &ms), -1);
	assert_int_equal(outbox_retry_after_ms("", now, &ms), -1);
}

static void test_next_attempt_honours_retry_after_over_a_shorter_backoff(void **state)
{
	int64_t now = 5000000;

	(void)state;
	/* backoff would say 0 ms; the server asked for 30 s */
	assert_int_equal(outbox_next_attempt_ms(&t_policy, 1, now, now, 30000, 0), now + 30000);
	/* a longer backoff wins over a short Retry-After */
	assert_int_equal(outbox_next_attempt_ms(&t_policy, 4, now, now, 10, 8000), now + 8000);
	/* no Retry-After: the jittered backoff */
	assert_int_equal(outbox_next_attempt_ms(&t_policy, 2, now, now, -1, 1500), now + 1500);
}

static void test_next_attempt_gives_up_after_max_attempts_or_max_age(void **state)
{
	int64_t start = 5000000;
	int64_t hour = 3600 * 1000;

	(void)state;
	assert_true(outbox_next_attempt_ms(&t_policy, 7, start, start, -1, 0) >= 0);
	assert_int_equal(outbox_next_attempt_ms(&t_policy, 8, start, start, -1, 0), -1);
	/* past the age limit */
	assert_int_equal(outbox_next_attempt_ms(&t_policy, 1, start, start + hour + 1, -1, 0), -1);
	/* a Retry-After beyond the age limit is not overruled: the row dies */
	assert_int_equal(outbox_next_attempt_ms(&t_policy, 1, start, start + hour - 1000, 5000, 0),
	                 -1);
	/* jitter landing past the limit is pulled back to it */
	assert_int_equal(outbox_next_attempt_ms(&t_policy, 6, start, start + hour - 10, -1, 30000),
	                 start + hour);
}

static void test_signature_matches_the_published_standard_webhooks_vector(void **state)
{
	/* standard-webhooks test "sign function works" (see shared reference). */
	const char *secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
	const char *body = "{\"test\": 2432232314}";
	unsigned char *key = NULL;
	size_t key_len = 0;
	char *sig = NULL;

	(void)state;
	assert_int_equal(outbox_signing_key(secret, strlen(secret), &key, &key_len), 0);
	assert_int_equal(outbox_sign(key, key_len, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body,
	                             strlen(body), &sig),
	                 0);
	assert_string_equal(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
	free(sig);
	free(key);
	assert_int_equal(outbox_signing_key("whsec_", 6, &key, &key_len), -1);
	assert_int_equal(outbox_signing_key("whsec_!!!", 9, &key, &key_len), -1);
}

static void test_durations_take_milliseconds_or_config_units(void **state)
{
	int64_t ms = 0;

	(void)state;
	assert_int_equal(outbox_parse_ms("250ms", &ms), 0);
	assert_int_equal(ms, 250);
	assert_int_equal(outbox_parse_ms("5s", &ms), 0);
	assert_int_equal(ms, 5000);
	assert_int_equal(outbox_parse_ms("2m", &ms), 0);
	assert_int_equal(ms, 120000);
	assert_int_equal(outbox_parse_ms("ms", &ms), -1);
	assert_int_equal(outbox_parse_ms("1.5s", &ms), -1);
	assert_int_equal(outbox_parse_ms("x5ms", &ms), -1);
}

/* ---- fixtures: a temporary store, a peer and an in-memory config ---- */

#define T_KV_MAX 40

struct fixture {
	char fx_dir[64];
	char fx_path[128];
	struct store *fx_st;
	struct peer *fx_peer;
	struct outbound *fx_ob;
	struct config fx_cf;
	struct config_section fx_cs;
	struct config_kv fx_kv[T_KV_MAX];
	struct outbox_conf fx_oc; /* parsed without secrets, for queueing */
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct store_options opt;

	if (fx == NULL) {
		return -1;
	}
	snprintf(fx->fx_dir, sizeof(fx->fx_dir), "/tmp/test_outbound.XXXXXX");
	if (mkdtemp(fx->fx_dir) == NULL) {
		free(fx);
		return -1;
	}
	snprintf(fx->fx_path, sizeof(fx->fx_path), "%s/idemhook.db", fx->fx_dir);
	memset(&opt, 0, sizeof(opt));
	opt.so_path = fx->fx_path;
	opt.so_sync = STORE_SYNC_OFF;
	fx->fx_st = store_create(&opt);
	fx->fx_peer = peer_create();
	if (fx->fx_st == NULL || fx->fx_peer == NULL) {
		return -1;
	}
	fx->fx_cs.cs_name = (char *)OUTBOX_SECTION;
	fx->fx_cs.cs_kv = fx->fx_kv;
	fx->fx_cf.cf_sections = &fx->fx_cs;
	fx->fx_cf.cf_n_sections = 1;
	fx->fx_cf.cf_points_num = t_orders.oc_points_num;
	fx->fx_cf.cf_points_den = t_orders.oc_points_den;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	struct dirent *de;
	DIR *d;
	size_t i;

	outbound_stop(fx->fx_ob, 0);
	peer_destroy(fx->fx_peer);
	store_destroy(fx->fx_st);
	outbox_conf_finish(&fx->fx_oc);
	for (i = 0; i < fx->fx_cs.cs_n; i++) {
		free(fx->fx_kv[i].kv_key);
		free(fx->fx_kv[i].kv_value);
	}
	d = opendir(fx->fx_dir);
	if (d != NULL) {
		for (;;) {
			char p[400];

			de = readdir(d);
			if (de == NULL) {
				break;
			}
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
				continue;
			}
			snprintf(p, sizeof(p), "%s/%s", fx->fx_dir, de->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(fx->fx_dir);
	free(fx);
	return 0;
}

static void set_key(struct fixture *fx, const char *key, const char *value)
{
	struct config_kv *kv;

	assert_true(fx->fx_cs.cs_n < T_KV_MAX);
	kv = &fx->fx_kv[fx->fx_cs.cs_n++];
	kv->kv_key = strdup(key);
	kv->kv_value = strdup(value);
	kv->kv_line = (int)fx->fx_cs.cs_n;
}

static void set_url(struct fixture *fx, const char *key, const char *path)
{
	char url[128];

	snprintf(url, sizeof(url), "%s%s", peer_base(fx->fx_peer), path);
	set_key(fx, key, url);
}

/* The quick policy the worker tests use, plus notify_url on the peer. */
static void quick_conf(struct fixture *fx)
{
	set_url(fx, "notify_url", "/notify");
	set_key(fx, "retry_base", "50ms");
	set_key(fx, "retry_cap", "200ms");
	set_key(fx, "max_attempts", "5");
	set_key(fx, "poll", "50ms");
	set_key(fx, "timeout", "1s");
	set_key(fx, "connect_timeout", "1s");
	set_key(fx, "response_max", "4k");
	set_key(fx, "concurrency", "4");
}

static void load_conf(struct fixture *fx)
{
	assert_int_equal(outbox_conf_load(&fx->fx_cf, 0, &fx->fx_oc), 1);
}

static void start_worker(struct fixture *fx)
{
	struct outbox_conf oc;

	assert_int_equal(outbox_conf_load(&fx->fx_cf, 1, &oc), 1);
	fx->fx_ob = outbound_create(fx->fx_st, &oc, &t_orders, NULL);
	assert_non_null(fx->fx_ob);
}

struct paid_job {
	struct fixture *pj_fx;
	int64_t pj_amount;
	const char *pj_payment_ref;
	int pj_fail_after_queue; /* the handler fails after queueing */
	char pj_id[ORDERS_ID_LEN + 1];
};

static int paid_fn(struct store_tx *tx, void *arg)
{
	struct paid_job *pj = arg;
	struct orders_result res;
	struct event ev;
	char key[64];

	if (orders_create(tx, pj->pj_amount, "usd", "cust_1", pj->pj_id) < 0) {
		return -1;
	}
	snprintf(key, sizeof(key), "evt_%s", pj->pj_id);
	fx_event_payment(&ev, key, pj->pj_id, pj->pj_payment_ref, pj->pj_amount, "usd");
	memset(&res, 0, sizeof(res));
	if (orders_apply_event(tx, &t_orders, "stripe", &ev, &res) < 0 || res.or_refused) {
		return -1;
	}
	if (outbox_queue_effect(tx, &pj->pj_fx->fx_oc, "stripe", pj->pj_id, res.or_effect) < 0) {
		return -1;
	}
	return pj->pj_fail_after_queue ? -1 : 0;
}

/* Creates an order, pays it and queues its calls in one unit of work. */
static void order_paid(struct fixture *fx, int64_t amount, char ret_id[ORDERS_ID_LEN + 1])
{
	struct paid_job pj;

	memset(&pj, 0, sizeof(pj));
	pj.pj_fx = fx;
	pj.pj_amount = amount;
	pj.pj_payment_ref = "pi_test_123";
	assert_int_equal(store_write(fx->fx_st, time(NULL) * 1000LL, paid_fn, &pj), 0);
	memcpy(ret_id, pj.pj_id, sizeof(pj.pj_id));
}

struct q_job {
	const char *qj_sql;
	const char *qj_arg;
	int64_t qj_int;
	char qj_text[256];
	int qj_found;
};

static int q_fn(struct store_tx *tx, void *arg)
{
	struct q_job *q = arg;
	struct store_value p[] = {store_text(q->qj_arg)};
	struct store_row row;
	int rc;

	rc = store_query(tx, q->qj_sql, p, q->qj_arg != NULL ? 1 : 0, &row);
	if (rc < 0) {
		return -1;
	}
	q->qj_found = rc;
	if (rc == 1) {
		q->qj_int = store_row_int(&row, 0);
		snprintf(q->qj_text, sizeof(q->qj_text), "%s",
		         store_row_text(&row, 0) != NULL ? store_row_text(&row, 0) : "");
		store_row_finish(&row);
	}
	return 0;
}

static int64_t db_int(struct fixture *fx, const char *sql, const char *arg)
{
	struct q_job q = {.qj_sql = sql, .qj_arg = arg};

	assert_int_equal(store_read(fx->fx_st, time(NULL) * 1000LL, q_fn, &q), 0);
	return q.qj_found ? q.qj_int : -1;
}

static void db_text(struct fixture *fx, const char *sql, const char *arg, char *out, size_t size)
{
	struct q_job q = {.qj_sql = sql, .qj_arg = arg};
	const char *text;

	assert_int_equal(store_read(fx->fx_st, time(NULL) * 1000LL, q_fn, &q), 0);
	/* All of it, or the test fails: a value cut short would compare wrong. */
	text = q.qj_found ? q.qj_text : "";
	assert_true(strlen(text) < size);
	memcpy(out, text, strlen(text) + 1);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until the first row of the order (by call type) has status. */
static void wait_row(struct fixture *fx, const char *order_id, const char *call, const char *status)
{
	char sql[256];
	char got[64] = "";
	int64_t until = now_ms() + T_WAIT_MS;

	snprintf(sql, sizeof(sql),
	         "SELECT status FROM outbox WHERE order_id = ? AND call_type = '%s' ORDER BY id "
	         "LIMIT 1",
	         call);
	while (now_ms() < until) {
		db_text(fx, sql, order_id, got, sizeof(got));
		if (strcmp(got, status) == 0) {
			return;
		}
		usleep(20000);
	}
	fail_msg("row %s of order %s is \"%s\", expected \"%s\"", call, order_id, got, status);
}

static void request(struct fixture *fx, size_t i, struct peer_request *r)
{
	assert_int_equal(peer_request(fx->fx_peer, i, r), 0);
}

/* ---- a DNS server that does not answer ---- */

#define T_SLOW_DNS_SUFFIX ".slowdns.test"
#define T_SLOW_DNS_MS 6000 /* how long such a name takes to fail */

/* libc's getaddrinfo, interposed for this program (libcurl's resolver
 * thread calls it): a name under .slowdns.test fails after T_SLOW_DNS_MS,
 * as when the shop's DNS server does not answer; every other name goes to
 * libc. */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
	int (*next)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	size_t n = node != NULL ? strlen(node) : 0;
	size_t m = strlen(T_SLOW_DNS_SUFFIX);

	if (n > m && strcmp(node + n - m, T_SLOW_DNS_SUFFIX) == 0) {
		usleep(T_SLOW_DNS_MS * 1000);
		return EAI_AGAIN;
	}
	*(void **)&next = dlsym(RTLD_NEXT, "getaddrinfo");
	if (next == NULL) {
		return EAI_SYSTEM;
	}
	return next(node, service, hints, res);
}

/* ---- the worker against the peer ---- */

static void test_500_then_200_retries_with_the_same_idempotency_key(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e500 = peer_reply(500, "{\"error\":\"busy\"}");
	char id[ORDERS_ID_LEN + 1];
	char key[64];
	struct peer_request a;
	struct peer_request b;

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &e500);
	order_paid(fx, 1999, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 2);
	request(fx, 0, &a);
	request(fx, 1, &b);
	db_text(fx, "SELECT idem_key FROM outbox WHERE order_id = ?", id, key, sizeof(key));
	assert_non_null(a.pq_idem_key);
	assert_string_equal(a.pq_idem_key, key);
	assert_string_equal(b.pq_idem_key, key);
	assert_string_equal(a.pq_method, "POST");
	assert_string_equal(a.pq_content_type, "application/json");
	assert_string_equal(a.pq_body, b.pq_body);
	assert_non_null(strstr(a.pq_body, id));
	assert_non_null(strstr(a.pq_body, "\"amount\":1999"));
	assert_non_null(strstr(a.pq_body, "\"provider_transaction\":\"pi_test_123\""));
	assert_non_null(strstr(a.pq_body, "\"points\":19"));
	assert_non_null(strstr(a.pq_body, "\"effect\":\"paid\""));
	assert_null(a.pq_webhook_signature); /* no signing secret configured */
	assert_int_equal(db_int(fx, "SELECT attempts FROM outbox WHERE order_id = ?", id), 2);
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, key, sizeof(key));
	assert_string_equal(key, "notified");
	db_text(fx, "SELECT status FROM orders WHERE id = ?", id, key, sizeof(key));
	assert_string_equal(key, "paid"); /* the order's own status is untouched */
	peer_request_finish(&a);
	peer_request_finish(&b);
}

static void test_429_retry_after_is_honoured(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour ra = {.pb_action = PEER_RETRY_AFTER, .pb_retry_after = "2"};
	char id[ORDERS_ID_LEN + 1];
	struct peer_request a;
	struct peer_request b;

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &ra);
	order_paid(fx, 500, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	request(fx, 0, &a);
	request(fx, 1, &b);
	/* the backoff alone would be at most retry_cap (200 ms) */
	assert_true(b.pq_at_ms - a.pq_at_ms >= 1900);
	assert_string_equal(a.pq_idem_key, b.pq_idem_key);
	peer_request_finish(&a);
	peer_request_finish(&b);
}

static void test_permanent_4xx_goes_dead_at_once_and_flags_an_operator(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e422 = peer_reply(422, "{\"error\":\"unknown order\"}");
	char id[ORDERS_ID_LEN + 1];
	char text[256];

	quick_conf(fx);
	load_conf(fx);
	peer_default(fx->fx_peer, "/notify", &e422);
	order_paid(fx, 700, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "dead");
	usleep(400000); /* several retry windows: nothing more may come */
	assert_int_equal(peer_count(fx->fx_peer), 1);
	assert_int_equal(db_int(fx, "SELECT attempts FROM outbox WHERE order_id = ?", id), 1);
	assert_int_equal(db_int(fx, "SELECT last_status FROM outbox WHERE order_id = ?", id), 422);
	db_text(fx, "SELECT last_error FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_non_null(strstr(text, "HTTP 422"));
	/* default compensation: manual */
	db_text(fx, "SELECT comp_state FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "flagged");
	assert_int_equal(db_int(fx, "SELECT needs_operator FROM orders WHERE id = ?", id), 1);
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "failed");
	db_text(fx, "SELECT status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "paid");
}

static void test_transient_failures_die_after_max_attempts(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e503 = peer_reply(503, "{}");
	char id[ORDERS_ID_LEN + 1];

	quick_conf(fx);
	load_conf(fx);
	peer_default(fx->fx_peer, "/notify", &e503);
	order_paid(fx, 700, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "dead");
	assert_int_equal(peer_count(fx->fx_peer), 5);
	assert_int_equal(db_int(fx, "SELECT attempts FROM outbox WHERE order_id = ?", id), 5);
}

static void test_a_hanging_peer_times_out_and_the_row_is_retried(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 5000};
	char id[ORDERS_ID_LEN + 1];
	struct peer_request a;
	struct peer_request b;

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &hang);
	order_paid(fx, 1000, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	request(fx, 0, &a);
	request(fx, 1, &b);
	assert_int_equal(a.pq_action, PEER_HANG);
	/* the second attempt followed the 1 s timeout, not the 5 s hang */
	assert_true(b.pq_at_ms - a.pq_at_ms >= 900);
	assert_true(b.pq_at_ms - a.pq_at_ms < 4000);
	assert_string_equal(a.pq_idem_key, b.pq_idem_key);
	peer_request_finish(&a);
	peer_request_finish(&b);
}

static void test_a_dripping_peer_times_out_and_the_row_is_retried(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour drip = {.pb_action = PEER_DRIP, .pb_ms = 300, .pb_size = 40};
	char id[ORDERS_ID_LEN + 1];
	char text[256];

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &drip);
	order_paid(fx, 1000, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 2);
	assert_int_equal(db_int(fx, "SELECT attempts FROM outbox WHERE order_id = ?", id), 2);
	db_text(fx, "SELECT status FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "succeeded");
}

static void test_a_closed_connection_is_transient(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour close_it = {.pb_action = PEER_CLOSE};
	char id[ORDERS_ID_LEN + 1];

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &close_it);
	peer_script(fx->fx_peer, "/notify", &close_it);
	order_paid(fx, 1000, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 3);
}

static void test_an_oversized_response_is_cut_at_the_cap(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour huge500 = {
	        .pb_action = PEER_HUGE, .pb_status = 500, .pb_size = 64 * 1024 * 1024};
	struct peer_behaviour huge200 = {
	        .pb_action = PEER_HUGE, .pb_status = 200, .pb_size = 64 * 1024 * 1024};
	char id[ORDERS_ID_LEN + 1];
	int64_t t0;

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &huge500);
	peer_script(fx->fx_peer, "/notify", &huge200);
	order_paid(fx, 1000, id);
	t0 = now_ms();
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	/* 64 MiB twice would not be read this fast on a cap of 4 KiB */
	assert_true(now_ms() - t0 < 5000);
	assert_int_equal(peer_count(fx->fx_peer), 2);
	assert_int_equal(db_int(fx, "SELECT last_status FROM outbox WHERE order_id = ?", id), 200);
}

static void test_dead_row_compensates_with_a_refund_that_claws_points_back_once(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e400 = peer_reply(400, "{\"error\":\"rejected\"}");
	struct peer_behaviour close_it = {.pb_action = PEER_CLOSE};
	struct peer_behaviour refund_ok =
	        peer_reply(200, "{\"id\":\"re_test_1\",\"object\":\"refund\",\"amount\":2500,"
	                        "\"status\":\"succeeded\"}");
	char id[ORDERS_ID_LEN + 1];
	char keyfile[200];
	char spec[220];
	char text[256];
	char notify_key[64];
	struct peer_request r1;
	struct peer_request r2;
	FILE *f;

	snprintf(keyfile, sizeof(keyfile), "%s/stripe.key", fx->fx_dir);
	f = fopen(keyfile, "w");
	assert_non_null(f);
	fputs("sk_test_outbound\n", f);
	fclose(f);
	snprintf(spec, sizeof(spec), "file:%s", keyfile);
	quick_conf(fx);
	set_key(fx, "notify_compensation", "refund");
	set_url(fx, "refund_base_url", "");
	set_key(fx, "refund_key", spec);
	load_conf(fx);
	peer_default(fx->fx_peer, "/notify", &e400);
	/* the first refund answer is lost on the way: the retry carries the same key */
	peer_script(fx->fx_peer, "/v1/refunds", &close_it);
	peer_default(fx->fx_peer, "/v1/refunds", &refund_ok);
	order_paid(fx, 2500, id);
	assert_int_equal(db_int(fx, "SELECT SUM(points) FROM points_ledger WHERE order_id = ?", id),
	                 25);
	start_worker(fx);
	wait_row(fx, id, "refund", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 3);
	request(fx, 1, &r1);
	request(fx, 2, &r2);
	assert_string_equal(r1.pq_path, "/v1/refunds");
	assert_string_equal(r1.pq_authorization, "Bearer sk_test_outbound");
	assert_string_equal(r1.pq_content_type, "application/x-www-form-urlencoded");
	assert_non_null(strstr(r1.pq_body, "payment_intent=pi_test_123"));
	assert_string_equal(r1.pq_idem_key, r2.pq_idem_key);
	db_text(fx, "SELECT idem_key FROM outbox WHERE order_id = ? AND call_type = 'notify'", id,
	        notify_key, sizeof(notify_key));
	assert_string_not_equal(r1.pq_idem_key, notify_key);
	/* the order is refunded and its points clawed back once */
	db_text(fx, "SELECT status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "refunded");
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "compensated");
	db_text(fx, "SELECT comp_state FROM outbox WHERE order_id = ? AND call_type = 'notify'", id,
	        text, sizeof(text));
	assert_string_equal(text, "done");
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM points_ledger WHERE order_id = ? AND reason "
	                        "= 'clawback'",
	                        id),
	                 1);
	assert_int_equal(db_int(fx, "SELECT SUM(points) FROM points_ledger WHERE order_id = ?", id),
	                 0);
	/* the money went back: the dead call may not be sent again */
	{
		char msg[200];
		int64_t row = db_int(
		        fx, "SELECT id FROM outbox WHERE order_id = ? AND call_type = 'notify'", id);

		assert_int_equal(outbox_admin_retry(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
		                 OUTBOX_ADMIN_ILLEGAL);
		assert_non_null(strstr(msg, "refund"));
	}
	peer_request_finish(&r1);
	peer_request_finish(&r2);
}

struct refund_event_job {
	const char *rj_order;
	struct orders_result rj_res;
};

static int refund_event_fn(struct store_tx *tx, void *arg)
{
	struct refund_event_job *rj = arg;
	struct event ev;

	memset(&ev, 0, sizeof(ev));
	ev.ev_key = (char *)"evt_refund_webhook";
	ev.ev_type = (char *)"charge.refunded";
	ev.ev_kind = EVENT_REFUNDED;
	ev.ev_order_ref = (char *)rj->rj_order;
	ev.ev_payment_ref = (char *)"pi_test_123";
	ev.ev_refund_ref = (char *)"re_test_1";
	ev.ev_amount = 2500;
	snprintf(ev.ev_currency, sizeof(ev.ev_currency), "USD");
	return orders_apply_event(tx, &t_orders, "stripe", &ev, &rj->rj_res);
}

static void test_the_providers_own_refund_callback_after_compensation_changes_nothing(void **state)
{
	struct fixture *fx = *state;
	struct refund_event_job rj;

	test_dead_row_compensates_with_a_refund_that_claws_points_back_once(state);
	memset(&rj, 0, sizeof(rj));
	{
		char id[ORDERS_ID_LEN + 1];

		db_text(fx, "SELECT order_id FROM outbox WHERE call_type = 'refund'", NULL, id,
		        sizeof(id));
		rj.rj_order = id;
		assert_int_equal(store_write(fx->fx_st, now_ms(), refund_event_fn, &rj), 0);
		assert_string_equal(rj.rj_res.or_effect, "noop");
		assert_int_equal(db_int(fx,
		                        "SELECT count(*) FROM points_ledger WHERE order_id = ? AND "
		                        "reason = 'clawback'",
		                        id),
		                 1);
		assert_int_equal(db_int(fx, "SELECT count(*) FROM refunds WHERE order_id = ?", id),
		                 1);
	}
}

static void test_a_handler_that_queues_and_rolls_back_sends_nothing(void **state)
{
	struct fixture *fx = *state;
	struct paid_job pj;

	quick_conf(fx);
	load_conf(fx);
	start_worker(fx);
	memset(&pj, 0, sizeof(pj));
	pj.pj_fx = fx;
	pj.pj_amount = 1200;
	pj.pj_payment_ref = "pi_test_rollback";
	pj.pj_fail_after_queue = 1;
	assert_int_equal(store_write(fx->fx_st, now_ms(), paid_fn, &pj), -1);
	outbound_kick(fx->fx_ob);
	assert_int_equal(peer_wait(fx->fx_peer, 1, 1000), 0);
	assert_int_equal(db_int(fx, "SELECT count(*) FROM outbox", NULL), 0);
	assert_int_equal(db_int(fx, "SELECT count(*) FROM orders", NULL), 0);
}

static void test_each_call_type_gets_its_own_row_and_key(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct peer_request a;
	struct peer_request b;

	quick_conf(fx);
	set_url(fx, "receipt_url", "/receipt");
	set_key(fx, "receipt_on", "paid");
	load_conf(fx);
	order_paid(fx, 1000, id);
	assert_int_equal(db_int(fx, "SELECT count(*) FROM outbox WHERE order_id = ?", id), 2);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	wait_row(fx, id, "receipt", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 2);
	request(fx, 0, &a);
	request(fx, 1, &b);
	assert_string_not_equal(a.pq_idem_key, b.pq_idem_key);
	assert_string_not_equal(a.pq_path, b.pq_path);
	peer_request_finish(&a);
	peer_request_finish(&b);
}

struct effects_job {
	struct fixture *ej_fx;
	char ej_id[ORDERS_ID_LEN + 1];
};

static int effects_fn(struct store_tx *tx, void *arg)
{
	static const char *const effects[] = {"disputed",      "cancelled", "authorized",
	                                      "refund_failed", "noop",      "recorded"};
	struct effects_job *ej = arg;
	size_t i;

	if (orders_create(tx, 1000, "usd", "cust_1", ej->ej_id) < 0) {
		return -1;
	}
	for (i = 0; i < sizeof(effects) / sizeof(effects[0]); i++) {
		if (outbox_queue_effect(tx, &ej->ej_fx->fx_oc, "stripe", ej->ej_id, effects[i]) <
		    0) {
			return -1;
		}
	}
	return 0;
}

static void test_call_types_queue_on_lifecycle_effects_all_of_them_by_default(void **state)
{
	struct fixture *fx = *state;
	struct effects_job ej;

	quick_conf(fx);
	set_url(fx, "receipt_url", "/receipt");
	set_key(fx, "receipt_on", "disputed, cancelled");
	load_conf(fx);
	memset(&ej, 0, sizeof(ej));
	ej.ej_fx = fx;
	assert_int_equal(store_write(fx->fx_st, now_ms(), effects_fn, &ej), 0);
	/* notify has no notify_on: every effect but noop and recorded. */
	assert_int_equal(
	        db_int(fx,
	               "SELECT count(*) FROM outbox WHERE call_type = 'notify' AND order_id = ?",
	               ej.ej_id),
	        4);
	assert_int_equal(
	        db_int(fx,
	               "SELECT count(*) FROM outbox WHERE call_type = 'receipt' AND order_id = ?"
	               " AND effect IN ('disputed', 'cancelled')",
	               ej.ej_id),
	        2);
	assert_int_equal(db_int(fx, "SELECT count(*) FROM outbox WHERE effect = 'noop'", NULL), 0);
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM outbox"
	                        " WHERE CAST(body AS TEXT) LIKE '%\"order.disputed\"%'",
	                        NULL),
	                 2);
}

static void test_an_unknown_effect_in_a_call_list_is_refused(void **state)
{
	struct fixture *fx = *state;
	struct outbox_conf oc;

	quick_conf(fx);
	set_key(fx, "notify_on", "paid chargeback");
	assert_int_equal(outbox_conf_load(&fx->fx_cf, 0, &oc), -1);
}

static void test_signed_bodies_verify_and_keep_their_id_across_attempts(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e500 = peer_reply(500, "{}");
	const char *secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
	char path[200];
	char spec[220];
	char id[ORDERS_ID_LEN + 1];
	unsigned char *key = NULL;
	size_t key_len = 0;
	size_t i;
	FILE *f;

	snprintf(path, sizeof(path), "%s/whsec", fx->fx_dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(secret, f);
	fclose(f);
	snprintf(spec, sizeof(spec), "file:%s", path);
	quick_conf(fx);
	set_key(fx, "signing_secret", spec);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &e500);
	order_paid(fx, 1000, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(outbox_signing_key(secret, strlen(secret), &key, &key_len), 0);
	for (i = 0; i < 2; i++) {
		struct peer_request r;
		char *sig = NULL;

		request(fx, i, &r);
		assert_non_null(r.pq_webhook_id);
		assert_string_equal(r.pq_webhook_id, r.pq_idem_key);
		assert_non_null(r.pq_webhook_timestamp);
		assert_int_equal(outbox_sign(key, key_len, r.pq_webhook_id,
		                             strtoll(r.pq_webhook_timestamp, NULL, 10), r.pq_body,
		                             r.pq_body_len, &sig),
		                 0);
		assert_string_equal(r.pq_webhook_signature, sig);
		free(sig);
		peer_request_finish(&r);
	}
	free(key);
}

/* A row a dead run left leased is given back at the next start, without
 * counting the call it was making, and the call is in the row's history
 * and its last error: the peer may have it already. */
static void test_rows_left_delivering_by_a_crash_are_delivered_after_restart(void **state)
{
	struct fixture *fx = *state;
	struct outbox_row rows[4];
	char id[ORDERS_ID_LEN + 1];
	char text[200];
	int64_t released = 0;
	size_t n = 0;

	quick_conf(fx);
	load_conf(fx);
	order_paid(fx, 1000, id);
	/* a previous run leased the row and died with it */
	assert_int_equal(outbox_lease(fx->fx_st, now_ms(), 3600 * 1000, 4, rows, &n), 0);
	assert_int_equal(n, 1);
	outbox_row_finish(&rows[0]);
	assert_int_equal(
	        db_int(fx, "SELECT count(*) FROM outbox WHERE status = 'delivering'", NULL), 1);
	assert_int_equal(outbox_release_all(fx->fx_st, now_ms(), &released), 0);
	assert_int_equal(released, 1);
	db_text(fx, "SELECT status FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "pending");
	assert_int_equal(db_int(fx, "SELECT attempts FROM outbox WHERE order_id = ?", id), 0);
	db_text(fx, "SELECT last_error FROM outbox WHERE order_id = ? AND last_status IS NULL", id,
	        text, sizeof(text));
	assert_non_null(strstr(text, "without a clean shutdown"));
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM outbox_attempts WHERE outbox_id = (SELECT id"
	                        " FROM outbox WHERE order_id = ?) AND attempt = 1 AND"
	                        " http_status IS NULL AND latency_ms IS NULL AND error LIKE"
	                        " 'interrupted: %without a clean shutdown%may have received it"
	                        " (not counted)'",
	                        id),
	                 1);
	/* a second start finds nothing left to give back */
	assert_int_equal(outbox_release_all(fx->fx_st, now_ms(), &released), 0);
	assert_int_equal(released, 0);

	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 1);
	assert_int_equal(db_int(fx, "SELECT attempts FROM outbox WHERE order_id = ?", id), 1);
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM outbox_attempts WHERE outbox_id = (SELECT id"
	                        " FROM outbox WHERE order_id = ?)",
	                        id),
	                 2);
}

/* A resolve that outlasts the timeout fails the attempt at the timeout;
 * the worker does not wait for the resolver to give up: other rows are
 * delivered meanwhile, and a stop keeps to its grace time. */
static void test_a_resolver_that_hangs_holds_up_neither_other_rows_nor_the_stop(void **state)
{
	struct fixture *fx = *state;
	char first[ORDERS_ID_LEN + 1];
	char second[ORDERS_ID_LEN + 1];
	char text[200];
	int64_t t0;

	set_key(fx, "notify_url", "http://shop" T_SLOW_DNS_SUFFIX "/notify");
	set_url(fx, "receipt_url", "/receipt");
	set_key(fx, "retry_base", "10s");
	set_key(fx, "retry_cap", "10s");
	set_key(fx, "poll", "50ms");
	set_key(fx, "timeout", "500ms");
	set_key(fx, "connect_timeout", "500ms");
	load_conf(fx);
	order_paid(fx, 1000, first);
	start_worker(fx);
	wait_row(fx, first, "receipt", "succeeded");
	t0 = now_ms();
	wait_row(fx, first, "notify", "retry_wait");
	assert_true(now_ms() - t0 < 2500);
	db_text(fx, "SELECT last_error FROM outbox WHERE order_id = ? AND call_type = 'notify'",
	        first, text, sizeof(text));
	assert_non_null(strstr(text, "timed out"));

	/* the first resolver thread still waits; a new order's calls go out */
	t0 = now_ms();
	order_paid(fx, 2000, second);
	outbound_kick(fx->fx_ob);
	wait_row(fx, second, "receipt", "succeeded");
	assert_true(now_ms() - t0 < 2500);
	assert_int_equal(peer_count(fx->fx_peer), 2);

	/* the second order's notify is resolving while the worker stops */
	t0 = now_ms();
	outbound_stop(fx->fx_ob, 200);
	fx->fx_ob = NULL;
	assert_true(now_ms() - t0 < 2500);
	assert_int_equal(
	        db_int(fx, "SELECT count(*) FROM outbox WHERE status = 'delivering'", NULL), 0);
}

static void test_an_expired_lease_is_taken_over_and_the_late_outcome_refused(void **state)
{
	struct fixture *fx = *state;
	struct outbox_row first[1];
	struct outbox_row second[1];
	struct outbox_result ok = {.ors_http_status = 200, .ors_retry_after_ms = -1};
	char id[ORDERS_ID_LEN + 1];
	char text[200];
	int64_t t = now_ms();
	size_t n = 0;

	quick_conf(fx);
	load_conf(fx);
	order_paid(fx, 1000, id);
	assert_int_equal(outbox_lease(fx->fx_st, t, 1000, 1, first, &n), 0);
	assert_int_equal(n, 1);
	/* the lease is live: nobody else gets the row */
	assert_int_equal(outbox_lease(fx->fx_st, t + 500, 1000, 1, second, &n), 0);
	assert_int_equal(n, 0);
	/* expired: taken over with a new token, same key */
	assert_int_equal(outbox_lease(fx->fx_st, t + 1001, 1000, 1, second, &n), 0);
	assert_int_equal(n, 1);
	assert_true(second[0].or_lease_token > first[0].or_lease_token);
	assert_string_equal(second[0].or_idem_key, first[0].or_idem_key);
	/* the call under the expired lease is in the history, not counted */
	assert_int_equal(second[0].or_attempts, 1);
	assert_int_equal(
	        db_int(fx,
	               "SELECT count(*) FROM outbox_attempts WHERE attempt = 1 AND"
	               " http_status IS NULL AND error LIKE 'lease expired: %(not counted)'"
	               " AND outbox_id = (SELECT id FROM outbox WHERE order_id = ?)",
	               id),
	        1);
	db_text(fx, "SELECT last_error FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_non_null(strstr(text, "lease expired"));
	/* the first holder's late answer changes nothing */
	assert_int_equal(
	        outbox_complete(fx->fx_st, &fx->fx_oc, &t_orders, &first[0], &ok, t + 1100, 0), 1);
	db_text(fx, "SELECT status FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "delivering");
	assert_int_equal(
	        outbox_complete(fx->fx_st, &fx->fx_oc, &t_orders, &second[0], &ok, t + 1200, 0), 0);
	db_text(fx, "SELECT status FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "succeeded");
	outbox_row_finish(&first[0]);
	outbox_row_finish(&second[0]);
}

/* Every attempt is kept with its answer, only the newest
 * OUTBOX_ATTEMPTS_KEPT of a row, and they go when the row goes (gc). */
static int t_delete_outbox_fn(struct store_tx *tx, void *arg)
{
	struct store_value p[] = {store_text(arg)};

	return store_exec(tx, "DELETE FROM outbox WHERE order_id = ?", p, 1, NULL);
}

static void test_attempts_are_kept_per_row_bounded_and_deleted_with_it(void **state)
{
	struct fixture *fx = *state;
	struct outbox_result e503 = {.ors_http_status = 503,
	                             .ors_body = "{\"error\":\"busy\"}",
	                             .ors_body_len = 16,
	                             .ors_retry_after_ms = -1,
	                             .ors_latency_ms = 42};
	struct outbox_result down = {.ors_error = "Connection refused", .ors_retry_after_ms = -1};
	struct outbox_row row[1];
	char id[ORDERS_ID_LEN + 1];
	char text[64];
	char msg[200];
	int64_t t = now_ms();
	int64_t rowid;
	size_t n = 0;
	int i;

	quick_conf(fx);
	load_conf(fx);
	order_paid(fx, 1000, id);
	rowid = db_int(fx, "SELECT id FROM outbox WHERE order_id = ?", id);
	for (i = 0; i < OUTBOX_ATTEMPTS_KEPT + 5; i++) {
		t += 3600 * 1000;
		assert_true(outbox_admin_retry(fx->fx_st, rowid, t, msg, sizeof(msg)) >= 0);
		assert_int_equal(outbox_lease(fx->fx_st, t, 1000, 1, row, &n), 0);
		assert_int_equal(n, 1);
		assert_int_equal(outbox_complete(fx->fx_st, &fx->fx_oc, &t_orders, &row[0],
		                                 i == 0 ? &down : &e503, t + 10, 0),
		                 0);
		outbox_row_finish(&row[0]);
	}
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM outbox_attempts WHERE outbox_id = (SELECT id"
	                        " FROM outbox WHERE order_id = ?)",
	                        id),
	                 OUTBOX_ATTEMPTS_KEPT);
	/* the first (a refused connection) was dropped; the newest is kept whole */
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM outbox_attempts WHERE error IS NOT NULL AND"
	                        " outbox_id = (SELECT id FROM outbox WHERE order_id = ?)",
	                        id),
	                 0);
	db_text(fx,
	        "SELECT excerpt FROM outbox_attempts WHERE outbox_id = (SELECT id FROM outbox"
	        " WHERE order_id = ?) ORDER BY id DESC LIMIT 1",
	        id, text, sizeof(text));
	assert_string_equal(text, "{\"error\":\"busy\"}");
	assert_int_equal(db_int(fx,
	                        "SELECT http_status * 1000 + latency_ms FROM outbox_attempts WHERE"
	                        " outbox_id = (SELECT id FROM outbox WHERE order_id = ?) ORDER BY id"
	                        " DESC LIMIT 1",
	                        id),
	                 503042);
	assert_int_equal(store_write(fx->fx_st, t, t_delete_outbox_fn, id), 0);
	assert_int_equal(db_int(fx, "SELECT count(*) FROM outbox_attempts WHERE ? IS NOT NULL", id),
	                 0);
}

/* The URL is the call type's as the worker's configuration has it, not as
 * it was when the row was queued: an operator who moves notify_url (the
 * shop's endpoint moved) and reloads sends what is queued, waiting or
 * retried by hand to the new place. `outbox show` says where it went. */
static void test_queued_rows_go_to_the_url_the_worker_is_configured_with(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour gone = peer_reply(404, "{}");
	char id[ORDERS_ID_LEN + 1];
	char url[256];
	char text[256];
	struct peer_request q;
	size_t i;

	quick_conf(fx);
	load_conf(fx);
	peer_default(fx->fx_peer, "/notify", &gone);
	order_paid(fx, 1000, id);
	/* the reload: notify_url now names /moved */
	for (i = 0; i < fx->fx_cs.cs_n; i++) {
		if (strcmp(fx->fx_kv[i].kv_key, "notify_url") == 0) {
			free(fx->fx_kv[i].kv_value);
			snprintf(url, sizeof(url), "%s/moved", peer_base(fx->fx_peer));
			fx->fx_kv[i].kv_value = strdup(url);
		}
	}
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 1);
	request(fx, 0, &q);
	assert_string_equal(q.pq_path, "/moved");
	peer_request_finish(&q);
	db_text(fx, "SELECT url FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, url);
}

static void test_shutdown_releases_in_flight_rows_after_the_grace_time(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 0};
	char id[ORDERS_ID_LEN + 1];
	char text[64];
	int64_t t0;

	set_url(fx, "notify_url", "/notify");
	set_key(fx, "timeout", "30s");
	set_key(fx, "poll", "50ms");
	load_conf(fx);
	peer_default(fx->fx_peer, "/notify", &hang);
	order_paid(fx, 1000, id);
	start_worker(fx);
	assert_int_equal(peer_wait(fx->fx_peer, 1, 5000), 1);
	t0 = now_ms();
	outbound_stop(fx->fx_ob, 300);
	fx->fx_ob = NULL;
	assert_true(now_ms() - t0 >= 250);
	assert_true(now_ms() - t0 < 3000);
	db_text(fx, "SELECT status FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "pending");
	assert_int_equal(db_int(fx, "SELECT attempts FROM outbox WHERE order_id = ?", id), 0);
	/* Not counted, but the call went out: the history says what became of it. */
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM outbox_attempts WHERE outbox_id = (SELECT id"
	                        " FROM outbox WHERE order_id = ?) AND attempt = 1 AND"
	                        " http_status IS NULL AND error LIKE 'released at shutdown:%'",
	                        id),
	                 1);
	/* ... and so does the row's last error (`outbox show`) */
	assert_int_equal(db_int(fx,
	                        "SELECT count(*) FROM outbox WHERE order_id = ? AND last_status IS"
	                        " NULL AND last_error LIKE 'released at shutdown:%'",
	                        id),
	                 1);
}

static void test_operator_transitions_check_the_rows_status(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e410 = peer_reply(410, "{}");
	char id[ORDERS_ID_LEN + 1];
	char msg[200];
	char text[64];
	int64_t row;

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &e410);
	order_paid(fx, 1000, id);
	row = db_int(fx, "SELECT id FROM outbox WHERE order_id = ?", id);
	assert_int_equal(outbox_admin_retry(fx->fx_st, 999999, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_UNKNOWN);
	assert_non_null(strstr(msg, "no outbox row 999999"));
	/* pending: cannot be retried or compensated */
	assert_int_equal(outbox_admin_retry(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_ILLEGAL);
	assert_int_equal(
	        outbox_admin_compensate(fx->fx_st, &fx->fx_oc, row, now_ms(), msg, sizeof(msg)),
	        OUTBOX_ADMIN_ILLEGAL);
	start_worker(fx);
	wait_row(fx, id, "notify", "dead");
	assert_int_equal(outbox_admin_cancel(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_ILLEGAL);
	assert_non_null(strstr(msg, "dead"));
	/* retry the dead row: delivered now (the peer's default is 200) */
	assert_int_equal(outbox_admin_retry(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_OK);
	outbound_kick(fx->fx_ob);
	wait_row(fx, id, "notify", "succeeded");
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "notified");
	assert_int_equal(outbox_admin_retry(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_ILLEGAL);
	assert_int_equal(outbox_admin_cancel(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_ILLEGAL);
}

/* A call the operator cancels no longer holds the order's fulfillment:
 * once the others got through, the order is notified, whichever came
 * first (a delivery after the cancel already made it so). */
static void test_cancelling_the_last_waiting_call_leaves_the_order_notified(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e503 = peer_reply(503, "{}");
	char id[ORDERS_ID_LEN + 1];
	char msg[200];
	char text[64];
	int64_t row;

	set_url(fx, "notify_url", "/notify");
	set_url(fx, "receipt_url", "/receipt");
	set_key(fx, "receipt_on", "paid");
	/* the receipt's retry waits long after its first failure */
	set_key(fx, "retry_base", "1h");
	set_key(fx, "retry_cap", "1h");
	set_key(fx, "poll", "50ms");
	set_key(fx, "timeout", "1s");
	load_conf(fx);
	peer_default(fx->fx_peer, "/receipt", &e503);
	order_paid(fx, 1000, id);
	start_worker(fx);
	wait_row(fx, id, "notify", "succeeded");
	wait_row(fx, id, "receipt", "retry_wait");
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "pending");
	row = db_int(fx, "SELECT id FROM outbox WHERE order_id = ? AND call_type = 'receipt'", id);
	assert_int_equal(outbox_admin_cancel(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_OK);
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "notified");
}

static void test_operator_compensation_resolves_a_flagged_order(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e404 = peer_reply(404, "{}");
	char id[ORDERS_ID_LEN + 1];
	char msg[200];
	char text[64];
	int64_t row;

	quick_conf(fx);
	load_conf(fx);
	peer_default(fx->fx_peer, "/notify", &e404);
	order_paid(fx, 1000, id);
	row = db_int(fx, "SELECT id FROM outbox WHERE order_id = ?", id);
	/* a pending row can be cancelled; then compensated by hand */
	assert_int_equal(outbox_admin_cancel(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_OK);
	assert_int_equal(outbox_admin_cancel(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_ILLEGAL);
	assert_int_equal(
	        outbox_admin_compensate(fx->fx_st, &fx->fx_oc, row, now_ms(), msg, sizeof(msg)),
	        OUTBOX_ADMIN_OK);
	assert_int_equal(db_int(fx, "SELECT needs_operator FROM orders WHERE id = ?", id), 1);
	/* the operator reports it handled */
	assert_int_equal(
	        outbox_admin_compensate(fx->fx_st, &fx->fx_oc, row, now_ms(), msg, sizeof(msg)),
	        OUTBOX_ADMIN_OK);
	assert_int_equal(db_int(fx, "SELECT needs_operator FROM orders WHERE id = ?", id), 0);
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "compensated");
	assert_int_equal(
	        outbox_admin_compensate(fx->fx_st, &fx->fx_oc, row, now_ms(), msg, sizeof(msg)),
	        OUTBOX_ADMIN_ILLEGAL);
	assert_int_equal(peer_count(fx->fx_peer), 0);
}

static void test_a_row_compensated_by_hand_can_be_retried_and_clears_the_operator_flag(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e404 = peer_reply(404, "{}");
	char id[ORDERS_ID_LEN + 1];
	char msg[200];
	char text[64];
	int64_t row;

	quick_conf(fx);
	load_conf(fx);
	/* the first attempt is refused for good; the peer answers 200 after */
	peer_script(fx->fx_peer, "/notify", &e404);
	order_paid(fx, 1000, id);
	row = db_int(fx, "SELECT id FROM outbox WHERE order_id = ?", id);
	start_worker(fx);
	wait_row(fx, id, "notify", "dead");
	assert_int_equal(db_int(fx, "SELECT needs_operator FROM orders WHERE id = ?", id), 1);
	/* the operator records a manual fix, then asks for the call again */
	assert_int_equal(
	        outbox_admin_compensate(fx->fx_st, &fx->fx_oc, row, now_ms(), msg, sizeof(msg)),
	        OUTBOX_ADMIN_OK);
	assert_int_equal(outbox_admin_retry(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_OK);
	outbound_kick(fx->fx_ob);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(peer_count(fx->fx_peer), 2);
	assert_int_equal(db_int(fx, "SELECT needs_operator FROM orders WHERE id = ?", id), 0);
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "notified");
	db_text(fx, "SELECT comp_state FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "none");
}

static void test_a_flagged_row_retried_and_delivered_clears_needs_operator(void **state)
{
	struct fixture *fx = *state;
	struct peer_behaviour e422 = peer_reply(422, "{}");
	char id[ORDERS_ID_LEN + 1];
	char msg[200];
	char text[64];
	int64_t row;

	quick_conf(fx);
	load_conf(fx);
	peer_script(fx->fx_peer, "/notify", &e422);
	order_paid(fx, 1200, id);
	row = db_int(fx, "SELECT id FROM outbox WHERE order_id = ?", id);
	start_worker(fx);
	wait_row(fx, id, "notify", "dead");
	db_text(fx, "SELECT comp_state FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "flagged");
	assert_int_equal(db_int(fx, "SELECT needs_operator FROM orders WHERE id = ?", id), 1);
	assert_int_equal(outbox_admin_retry(fx->fx_st, row, now_ms(), msg, sizeof(msg)),
	                 OUTBOX_ADMIN_OK);
	outbound_kick(fx->fx_ob);
	wait_row(fx, id, "notify", "succeeded");
	assert_int_equal(db_int(fx, "SELECT needs_operator FROM orders WHERE id = ?", id), 0);
	db_text(fx, "SELECT comp_state FROM outbox WHERE order_id = ?", id, text, sizeof(text));
	assert_string_equal(text, "none");
	db_text(fx, "SELECT fulfillment_status FROM orders WHERE id = ?", id, text, sizeof(text));
	assert_string_equal(text, "notified");
}

static void test_config_rejects_unknown_keys_and_bad_values(void **state)
{
	struct fixture *fx = *state;
	struct outbox_conf oc;

	set_key(fx, "notify_url", "ftp://example.com/x");
	assert_int_equal(outbox_conf_load(&fx->fx_cf, 0, &oc), -1);
	free(fx->fx_kv[0].kv_value);
	fx->fx_kv[0].kv_value = strdup("https://shop.example/hooks/idemhook");
	assert_int_equal(outbox_conf_load(&fx->fx_cf, 0, &oc), 1);
	assert_int_equal(oc.oc_n_calls, 1);
	assert_string_equal(oc.oc_calls[0].occ_name, "notify");
	assert_int_equal(oc.oc_calls[0].occ_compensation, OUTBOX_COMP_MANUAL);
	assert_int_equal(oc.oc_policy.op_max_attempts, 12);
	outbox_conf_finish(&oc);
	set_key(fx, "notify_compensation", "refund");
	/* refund needs a key when secrets are loaded */
	assert_int_equal(outbox_conf_load(&fx->fx_cf, 1, &oc), -1);
	assert_int_equal(outbox_conf_load(&fx->fx_cf, 0, &oc), 1);
	outbox_conf_finish(&oc);
	set_key(fx, "notfiy_on", "paid");
	assert_int_equal(outbox_conf_load(&fx->fx_cf, 0, &oc), -1);
}

/* ---- outbox_on_effect follows the config it is given ---- */

struct effect_job {
	const struct config *ej_cf;
	char ej_id[ORDERS_ID_LEN + 1];
};

static int effect_fn(struct store_tx *tx, void *arg)
{
	struct effect_job *ej = arg;

	if (orders_create(tx, 1999, "usd", "cust_1", ej->ej_id) < 0) {
		return -1;
	}
	return outbox_on_effect(tx, ej->ej_cf, "stripe", ej->ej_id, "paid");
}

/* Loads a config whose notify_url ends in path (a file in the fixture's
 * directory). */
static struct config *effect_conf(struct fixture *fx, const char *path)
{
	char file[256];
	struct config *cf;
	FILE *f;

	snprintf(file, sizeof(file), "%s/outbound-%s.ini", fx->fx_dir, path + 1);
	f = fopen(file, "w");
	assert_non_null(f);
	fprintf(f, "[store]\npath = %s\n\n[outbound]\nnotify_url = http://127.0.0.1:1%s\n",
	        fx->fx_path, path);
	assert_int_equal(fclose(f), 0);
	cf = provider_config_load(file);
	assert_non_null(cf);
	unlink(file);
	return cf;
}

/* The URL of the row outbox_on_effect queues for a new order under cf. */
static void effect_url(struct fixture *fx, const struct config *cf, char *out, size_t size)
{
	struct effect_job ej;

	memset(&ej, 0, sizeof(ej));
	ej.ej_cf = cf;
	assert_int_equal(store_write(fx->fx_st, time(NULL) * 1000LL, effect_fn, &ej), 0);
	db_text(fx, "SELECT url FROM outbox WHERE order_id = ?", ej.ej_id, out, size);
}

/* [outbound] is parsed once per loaded config, not per callback: each call
 * still queues from the config it was given, configs alive together
 * (requests that began before a reload) each get their own, and a config
 * loaded where a freed one was (the same address) is not mistaken for it. */
static void test_queued_calls_follow_each_config_across_reloads(void **state)
{
	struct fixture *fx = *state;
	struct config *a = effect_conf(fx, "/a");
	struct config *b = effect_conf(fx, "/b");
	struct config *c;
	char url[256];
	int i;

	for (i = 0; i < 3; i++) {
		effect_url(fx, a, url, sizeof(url));
		assert_string_equal(url, "http://127.0.0.1:1/a");
		effect_url(fx, b, url, sizeof(url));
		assert_string_equal(url, "http://127.0.0.1:1/b");
	}
	effect_url(fx, a, url, sizeof(url));
	config_destroy(a);
	for (i = 0; i < 20; i++) {
		c = effect_conf(fx, "/c");
		effect_url(fx, c, url, sizeof(url));
		assert_string_equal(url, "http://127.0.0.1:1/c");
		config_destroy(c);
		a = effect_conf(fx, "/a");
		effect_url(fx, a, url, sizeof(url));
		assert_string_equal(url, "http://127.0.0.1:1/a");
		config_destroy(a);
	}
	effect_url(fx, b, url, sizeof(url));
	assert_string_equal(url, "http://127.0.0.1:1/b");
	config_destroy(b);
}

/* A redirect's Location as the operator reads it: no credentials, no
 * query, control bytes escaped, bounded. */
static void test_a_location_loses_credentials_and_query_and_is_bounded(void **state)
{
	char out[OUTBOX_LOCATION_MAX + 1];
	char small[12];
	char longer[400];

	(void)state;
	outbox_location_text("https://u:p@h.example:8443/a?k=secret#f", out, sizeof(out));
	assert_string_equal(out, "https://h.example:8443/a?...");
	outbox_location_text("https://h.example/x@y/z#frag", out, sizeof(out));
	assert_string_equal(out, "https://h.example/x@y/z#...");
	outbox_location_text("/v2/hooks\r\n\\x", out, sizeof(out));
	assert_string_equal(out, "/v2/hooks\\x0d\\x0a\\x5cx");
	outbox_location_text("https://only-user@", out, sizeof(out));
	assert_string_equal(out, "https://");
	outbox_location_text("https://h.example/abcdefgh", small, sizeof(small));
	assert_string_equal(small, "https://...");
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	outbox_location_text(longer, out, sizeof(out));
	assert_int_equal(strlen(out), OUTBOX_LOCATION_MAX);
	assert_string_equal(out + OUTBOX_LOCATION_MAX - 3, "...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_a_location_loses_credentials_and_query_and_is_bounded),
	        cmocka_unit_test(test_2xx_succeeds_and_only_listed_statuses_are_transient),
	        cmocka_unit_test(test_backoff_window_doubles_up_to_the_cap_with_full_jitter),
	        cmocka_unit_test(test_retry_after_parses_seconds_and_http_dates),
	        cmocka_unit_test(test_next_attempt_honours_retry_after_over_a_shorter_backoff),
	        cmocka_unit_test(test_next_attempt_gives_up_after_max_attempts_or_max_age),
	        cmocka_unit_test(test_signature_matches_the_published_standard_webhooks_vector),
	        cmocka_unit_test(test_durations_take_milliseconds_or_config_units),
	        cmocka_unit_test_setup_teardown(test_config_rejects_unknown_keys_and_bad_values,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_row_compensated_by_hand_can_be_retried_and_clears_the_operator_flag,
	                setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_flagged_row_retried_and_delivered_clears_needs_operator, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_call_types_queue_on_lifecycle_effects_all_of_them_by_default, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_an_unknown_effect_in_a_call_list_is_refused,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_500_then_200_retries_with_the_same_idempotency_key, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_429_retry_after_is_honoured, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_permanent_4xx_goes_dead_at_once_and_flags_an_operator, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_transient_failures_die_after_max_attempts,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_hanging_peer_times_out_and_the_row_is_retried, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_dripping_peer_times_out_and_the_row_is_retried, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_a_closed_connection_is_transient, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_an_oversized_response_is_cut_at_the_cap, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dead_row_compensates_with_a_refund_that_claws_points_back_once, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_the_providers_own_refund_callback_after_compensation_changes_nothing,
	                setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_handler_that_queues_and_rolls_back_sends_nothing, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_each_call_type_gets_its_own_row_and_key, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(
	                test_signed_bodies_verify_and_keep_their_id_across_attempts, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_rows_left_delivering_by_a_crash_are_delivered_after_restart, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_resolver_that_hangs_holds_up_neither_other_rows_nor_the_stop, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_an_expired_lease_is_taken_over_and_the_late_outcome_refused, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_attempts_are_kept_per_row_bounded_and_deleted_with_it, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_queued_rows_go_to_the_url_the_worker_is_configured_with, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_shutdown_releases_in_flight_rows_after_the_grace_time, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_operator_transitions_check_the_rows_status,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_cancelling_the_last_waiting_call_leaves_the_order_notified, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_operator_compensation_resolves_a_flagged_order,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_queued_calls_follow_each_config_across_reloads,
	                                        setup, teardown),
	};

	log_set_level(getenv("IDEMHOOK_TEST_VERBOSE") != NULL ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
