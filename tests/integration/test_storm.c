/* test_storm.c: many identical callbacks at the same moment on separate
 * connections change the shop's state exactly once. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"

#define STORM_EVENTS 20
#define STORM_COPIES 60

static void test_duplicate_storm_applies_each_event_exactly_once(void **state)
{
	struct daemon d;
	struct hres *res = calloc(STORM_COPIES, sizeof(*res));
	char ids[STORM_EVENTS][64];
	char sql[2048];
	char url[256];
	int e;
	size_t i;

	assert_non_null(res);
	fx_daemon_start(&d, FX_STRIPE_INI);
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	for (e = 0; e < STORM_EVENTS; e++) {
		fx_order(&d, 1000 + e, "usd", ids[e]);
	}
	for (e = 0; e < STORM_EVENTS; e++) {
		char event_id[64];
		char *body;
		char *sig;
		char hdr[1400];
		const char *headers[3];
		size_t fresh = 0;
		size_t first = STORM_COPIES;

		snprintf(event_id, sizeof(event_id), "evt_storm_%d", e);
		body = fx_stripe_payment(event_id, ids[e], 1000 + e, "usd");
		sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));
		snprintf(hdr, sizeof(hdr), "Stripe-Signature: %s", sig);
		headers[0] = hdr;
		headers[1] = "Content-Type: application/json";
		headers[2] = NULL;
		assert_int_equal(hn_http_storm(STORM_COPIES, "POST", url, headers, body, strlen(body), res), 0);
		for (i = 0; i < STORM_COPIES; i++) {
			char *replayed = hres_header(&res[i], "Idempotent-Replayed");

			/* Zero 5xx, zero 409: one transaction per batch, no lease window. */
			assert_int_equal(res[i].hs_status, 200);
			if (replayed == NULL) {
				fresh++;
				first = i;
			}
			free(replayed);
		}
		assert_int_equal(fresh, 1);
		/* Every answer is the original reply or its replay, byte for byte. */
		for (i = 0; i < STORM_COPIES; i++) {
			assert_int_equal(res[i].hs_body_len, res[first].hs_body_len);
			assert_memory_equal(res[i].hs_body, res[first].hs_body, res[first].hs_body_len);
		}
		for (i = 0; i < STORM_COPIES; i++) {
			hres_finish(&res[i]);
		}
		free(sig);
		free(body);
	}
	/* Count rows: one transition and one ledger row per event. */
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), STORM_EVENTS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM points_ledger"), STORM_EVENTS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM idempotency_records WHERE status = 'done'"),
			 STORM_EVENTS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM events"), STORM_EVENTS);
	for (e = 0; e < STORM_EVENTS; e++) {
		snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s' AND points = %d",
			 ids[e], (1000 + e) / 100);
		assert_int_equal(hn_db_int(d.dm_db, sql), 1);
	}
	daemon_finish(&d);
	free(res);
}

#define MIX_EVENTS 4
#define MIX_COPIES 40

struct storm_job {
	const char *sj_url;
	const char *sj_headers[3];
	char sj_sig_header[256];
	char *sj_body;
	struct hres *sj_res;
	int sj_rc;
};

static void *storm_job_run(void *p)
{
	struct storm_job *j = p;

	j->sj_rc = hn_http_storm(MIX_COPIES, "POST", j->sj_url, j->sj_headers, j->sj_body, strlen(j->sj_body),
				 j->sj_res);
	return NULL;
}

static void test_overlapping_storms_of_different_events_each_apply_once(void **state)
{
	/* Four storms at once: group commit mixes new keys and duplicates of
	 * several events in one transaction. */
	struct daemon d;
	struct hres *res = calloc(MIX_EVENTS * MIX_COPIES, sizeof(*res));
	struct storm_job jobs[MIX_EVENTS];
	pthread_t threads[MIX_EVENTS];
	char url[256];
	int e;
	size_t i;

	assert_non_null(res);
	memset(jobs, 0, sizeof(jobs));
	fx_daemon_start(&d, FX_STRIPE_INI);
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	for (e = 0; e < MIX_EVENTS; e++) {
		char event_id[64];
		char id[64];
		char *sig;

		fx_order(&d, 500, "usd", id);
		snprintf(event_id, sizeof(event_id), "evt_mix_%d", e);
		jobs[e].sj_body = fx_stripe_payment(event_id, id, 500, "usd");
		sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), jobs[e].sj_body, strlen(jobs[e].sj_body));
		snprintf(jobs[e].sj_sig_header, sizeof(jobs[e].sj_sig_header), "Stripe-Signature: %s", sig);
		free(sig);
		jobs[e].sj_url = url;
		jobs[e].sj_headers[0] = jobs[e].sj_sig_header;
		jobs[e].sj_headers[1] = "Content-Type: application/json";
		jobs[e].sj_headers[2] = NULL;
		jobs[e].sj_res = &res[e * MIX_COPIES];
	}
	for (e = 0; e < MIX_EVENTS; e++) {
		assert_int_equal(pthread_create(&threads[e], NULL, storm_job_run, &jobs[e]), 0);
	}
	for (e = 0; e < MIX_EVENTS; e++) {
		pthread_join(threads[e], NULL);
		assert_int_equal(jobs[e].sj_rc, 0);
	}
	for (i = 0; i < MIX_EVENTS * MIX_COPIES; i++) {
		assert_int_equal(res[i].hs_status, 200);
		hres_finish(&res[i]);
	}
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), MIX_EVENTS);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM points_ledger"), MIX_EVENTS);
	for (e = 0; e < MIX_EVENTS; e++) {
		free(jobs[e].sj_body);
	}
	daemon_finish(&d);
	free(res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duplicate_storm_applies_each_event_exactly_once),
		cmocka_unit_test(test_overlapping_storms_of_different_events_each_apply_once),
	};

	return cmocka_run_group_tests_name("duplicate storms", tests, NULL, NULL);
}
