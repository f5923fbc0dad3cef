/* test_group_commit.c: group commit at a small thread pool. Hundreds of
 * unique callbacks wait for their COMMIT at once on a daemon with two
 * server threads; the batch-size histogram of /metrics shows that commits
 * held more than one of them, and the database shows that each was applied
 * exactly once. No timing is asserted. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "integration/prom_text.h"
#include "orders.h"
#include "store.h"

#define T_SECRET "whsec_group_commit_test_secret"
#define T_CALLBACKS 256 /* in flight at once, each on its own connection */
/* Two server threads; the harness lifts the per-address limit (every
 * connection here comes from 127.0.0.1). */
#define T_INI "[server]\nthreads = 2\n\n[provider stripe]\ntype = stripe\nsecret = " T_SECRET "\n"

struct t_orders {
	char to_ids[T_CALLBACKS][ORDERS_ID_LEN + 1];
};

static int t_make_orders(struct store_tx *tx, void *arg)
{
	struct t_orders *to = arg;
	size_t i;

	for (i = 0; i < T_CALLBACKS; i++) {
		if (orders_create(tx, 2500, "EUR", NULL, to->to_ids[i]) < 0) {
			return -1;
		}
	}
	return 0;
}

struct t_sender {
	pthread_barrier_t *ts_barrier;
	const char *ts_url;
	char *ts_body;
	char ts_sig[160];
	struct hres ts_res;
	int ts_rc;
};

static void *t_send(void *arg)
{
	struct t_sender *ts = arg;
	const char *headers[] = {"Content-Type: application/json", ts->ts_sig, NULL};

	pthread_barrier_wait(ts->ts_barrier);
	ts->ts_rc = hn_http("POST", ts->ts_url, headers, ts->ts_body, strlen(ts->ts_body), &ts->ts_res);
	return NULL;
}

static void t_scrape(struct daemon *d, struct prom_text *p)
{
	char url[128];
	struct hres r;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	if (prom_parse(p, r.hs_body) < 0 || prom_check_histograms(p) < 0) {
		fail_msg("/metrics is not valid exposition text: %s", p->pt_error);
	}
	hres_finish(&r);
}

static void test_callbacks_waiting_together_share_commits_and_each_applies_once(void **state)
{
	static struct prom_text before;
	static struct prom_text after;
	static struct t_sender senders[T_CALLBACKS];
	static struct t_orders orders;
	pthread_t threads[T_CALLBACKS];
	pthread_barrier_t barrier;
	struct store_options so;
	struct daemon d;
	struct store *st;
	char url[128];
	double batches;
	double singles;
	double units;
	size_t i;

	assert_int_equal(daemon_init(&d, T_INI), 0);
	memset(&so, 0, sizeof(so));
	so.so_path = d.dm_db;
	st = store_create(&so);
	assert_non_null(st);
	assert_int_equal(store_write(st, hn_now_ms(), t_make_orders, &orders), 0);
	store_destroy(st);
	assert_int_equal(daemon_start(&d), 0);
	t_scrape(&d, &before);

	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	assert_int_equal(pthread_barrier_init(&barrier, NULL, T_CALLBACKS), 0);
	for (i = 0; i < T_CALLBACKS; i++) {
		struct t_sender *ts = &senders[i];
		char id[48];
		char obj[256];
		char *sig;

		snprintf(id, sizeof(id), "evt_group_%03zu", i);
		snprintf(obj, sizeof(obj),
			 "{\"id\":\"pi_group_%zu\",\"object\":\"payment_intent\",\"amount\":2500,"
			 "\"amount_received\":2500,\"currency\":\"eur\",\"metadata\":{\"order_id\":\"%s\"}}",
			 i, orders.to_ids[i]);
		ts->ts_barrier = &barrier;
		ts->ts_url = url;
		ts->ts_body = hn_stripe_event(id, "payment_intent.succeeded", obj);
		assert_non_null(ts->ts_body);
		sig = hn_stripe_signature(T_SECRET, hn_now_s(), ts->ts_body, strlen(ts->ts_body));
		snprintf(ts->ts_sig, sizeof(ts->ts_sig), "Stripe-Signature: %s", sig);
		free(sig);
	}
	for (i = 0; i < T_CALLBACKS; i++) {
		assert_int_equal(pthread_create(&threads[i], NULL, t_send, &senders[i]), 0);
	}
	for (i = 0; i < T_CALLBACKS; i++) {
		pthread_join(threads[i], NULL);
		assert_int_equal(senders[i].ts_rc, 0);
		assert_int_equal(senders[i].ts_res.hs_status, 200);
		hres_finish(&senders[i].ts_res);
		free(senders[i].ts_body);
	}
	pthread_barrier_destroy(&barrier);

	/* Every answer came after its COMMIT, and the writer counts a batch
	 * before it answers any of it: the histogram is complete by now. */
	t_scrape(&d, &after);
	batches = prom_sum(&after, "idemhook_store_batch_size_count", "") -
		  prom_sum(&before, "idemhook_store_batch_size_count", "");
	singles = prom_sum(&after, "idemhook_store_batch_size_bucket", "le=\"1\"") -
		  prom_sum(&before, "idemhook_store_batch_size_bucket", "le=\"1\"");
	units = prom_sum(&after, "idemhook_store_batch_size_sum", "") -
		prom_sum(&before, "idemhook_store_batch_size_sum", "");
	assert_true(units >= T_CALLBACKS);
	assert_true(batches - singles >= 1); /* a commit held more than one callback */
	assert_true(batches < units);

	/* Each applied exactly once. */
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM orders WHERE status = 'paid'"), T_CALLBACKS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM events WHERE scope = 'stripe'"), T_CALLBACKS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM idempotency_records WHERE status = 'done'"),
			 T_CALLBACKS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM points_ledger"), T_CALLBACKS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(DISTINCT order_id) FROM points_ledger"), T_CALLBACKS);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_callbacks_waiting_together_share_commits_and_each_applies_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
