/* test_pg_storm.c: three receivers on one PostgreSQL database; every event
 * arrives many times at once on separate connections spread across them,
 * and changes the shop's state exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pg_common.h"

#define STORM_EVENTS 50
#define STORM_COPIES 30
#define STORM_AT_ONCE 5 /* events stormed together: 150 connections */

static void test_copies_spread_over_three_receivers_apply_each_event_exactly_once(void **state)
{
	struct daemon r[PG_RECEIVERS];
	struct pg_callback *cb = calloc(STORM_AT_ONCE * PG_RECEIVERS, sizeof(*cb));
	struct hreq *reqs = calloc(STORM_AT_ONCE * STORM_COPIES, sizeof(*reqs));
	struct hres *res = calloc(STORM_AT_ONCE * STORM_COPIES, sizeof(*res));
	char ids[STORM_EVENTS][64];
	char *bodies[STORM_AT_ONCE];
	size_t fresh_by_receiver[PG_RECEIVERS] = {0};
	int e0;
	int e;
	size_t i;

	assert_non_null(cb);
	assert_non_null(reqs);
	assert_non_null(res);
	assert_int_equal(pg_receivers_start(r, PG_RECEIVERS, FX_STRIPE_INI), 0);
	for (e = 0; e < STORM_EVENTS; e++) {
		assert_int_equal(hn_order_create(&r[e % PG_RECEIVERS], 1000 + e, "usd", ids[e]), 0);
	}
	for (e0 = 0; e0 < STORM_EVENTS; e0 += STORM_AT_ONCE) {
		for (e = 0; e < STORM_AT_ONCE; e++) {
			char event_id[64];
			size_t k;

			snprintf(event_id, sizeof(event_id), "evt_pg_storm_%d", e0 + e);
			bodies[e] = fx_stripe_payment(event_id, ids[e0 + e], 1000 + e0 + e, "usd");
			for (k = 0; k < PG_RECEIVERS; k++) {
				pg_callback_init(&cb[e * PG_RECEIVERS + k], &r[k], bodies[e]);
			}
			/* Copy i of event e goes to receiver (e + i) % 3. */
			for (i = 0; i < STORM_COPIES; i++) {
				reqs[e * STORM_COPIES + i] = pg_callback_req(
				        &cb[e * PG_RECEIVERS + (e + i) % PG_RECEIVERS]);
			}
		}
		assert_int_equal(hn_http_storm_each(STORM_AT_ONCE * STORM_COPIES, reqs, res), 0);
		for (e = 0; e < STORM_AT_ONCE; e++) {
			struct hres *er = &res[e * STORM_COPIES];
			size_t fresh = 0;
			size_t first = 0;

			for (i = 0; i < STORM_COPIES; i++) {
				char *replayed = hres_header(&er[i], "Idempotent-Replayed");

				/* Zero 5xx, and no 409: a duplicate waits for the
				 * first copy's commit and gets its reply. */
				if (er[i].hs_status != 200) {
					fail_msg("event %d copy %zu: status %ld: %s", e0 + e, i,
					         er[i].hs_status,
					         er[i].hs_body != NULL ? er[i].hs_body : "");
				}
				if (replayed == NULL) {
					fresh++;
					first = i;
				}
				free(replayed);
			}
			assert_int_equal(fresh, 1);
			fresh_by_receiver[(e + first) % PG_RECEIVERS]++;
			/* Every answer is the stored reply or its replay, byte for byte. */
			for (i = 0; i < STORM_COPIES; i++) {
				assert_int_equal(er[i].hs_body_len, er[first].hs_body_len);
				assert_memory_equal(er[i].hs_body, er[first].hs_body,
				                    er[first].hs_body_len);
			}
		}
		for (i = 0; i < STORM_AT_ONCE * STORM_COPIES; i++) {
			hres_finish(&res[i]);
		}
		for (e = 0; e < STORM_AT_ONCE; e++) {
			free(bodies[e]);
		}
	}
	print_message("first copies applied by receiver: %zu %zu %zu\n", fresh_by_receiver[0],
	              fresh_by_receiver[1], fresh_by_receiver[2]);
	/* Count rows: one transition, one ledger row, one event, one record per event. */
	assert_int_equal(hn_db_int(r[0].dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	                 STORM_EVENTS);
	assert_int_equal(hn_db_int(r[0].dm_db, "SELECT COUNT(*) FROM points_ledger"), STORM_EVENTS);
	assert_int_equal(hn_db_int(r[0].dm_db, "SELECT COUNT(*) FROM events"), STORM_EVENTS);
	assert_int_equal(
	        hn_db_int(r[0].dm_db,
	                  "SELECT COUNT(*) FROM idempotency_records WHERE status = 'done'"),
	        STORM_EVENTS);
	assert_int_equal(hn_db_int(r[0].dm_db, "SELECT COUNT(*) FROM idempotency_records"),
	                 STORM_EVENTS);
	for (e = 0; e < STORM_EVENTS; e++) {
		assert_int_equal(
		        fx_db_int(&r[0],
		                    "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'",
		                    ids[e]),
		        (1000 + e) / 100);
	}
	pg_receivers_finish(r, PG_RECEIVERS);
	free(cb);
	free(reqs);
	free(res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_copies_spread_over_three_receivers_apply_each_event_exactly_once),
	};

	pgserver_require_or_skip("test_pg_storm");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
