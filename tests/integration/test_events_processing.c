/* test_events_processing.c: events list --status processing lists the
 * claims taken and never completed (what idemhook_processing_stuck counts),
 * on SQLite and, as events_processing_pg, on PostgreSQL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"

/* events list --status processing lists the claims taken and not
 * completed, on either backend: --older-than 60s is what
 * idemhook_processing_stuck counts, a live claim is listed without it,
 * and an order-API claim is listed as well as a callback's. */
static void test_events_list_processing_lists_the_claims_stuck_in_processing(void **state)
{
	static const char *const stuck[] = {"events",       "list", "--status", "processing",
	                                    "--older-than", "60s",  NULL};
	static const char *const stuck_json[] = {"events",       "list", "--status", "processing",
	                                         "--older-than", "1m",   "--json",   NULL};
	static const char *const all[] = {"events", "list", "--status", "processing", NULL};
	static const char *const one_provider[] = {"events",     "list",         "--status",
	                                           "processing", "--older-than", "60s",
	                                           "--provider", "stripe",       NULL};
	static const char *const failed[] = {"events", "list", "--failed", NULL};
	static const char *const stats[] = {"stats", "--json", NULL};
	static const char *const bad[][8] = {
	        {"events", "list", "--older-than", "60s", NULL},
	        {"events", "list", "--status", "failed", "--older-than", "60s", NULL},
	        {"events", "list", "--status", "processing", "--order", "ord_x", NULL},
	        {"events", "list", "--status", "processing", "--older-than", "soon", NULL},
	};
	struct daemon *d = *state;
	int64_t now = hn_now_ms();
	char *out = NULL;
	char *err = NULL;
	size_t i;

	assert_int_equal(hn_claim_begin(d->dm_db, "stripe", "evt_cli_stuck", now - 600000, 60000),
	                 0);
	assert_int_equal(hn_claim_begin(d->dm_db, "api:orders:anonymous", "key-cli-stuck",
	                                now - 300000, 60000),
	                 0);
	assert_int_equal(hn_claim_begin(d->dm_db, "stripe", "evt_cli_in_flight", now, 600000), 0);

	assert_int_equal(daemon_cli(d, 1, stuck, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "LEASE UNTIL"));
	assert_non_null(strstr(out, "evt_cli_stuck"));
	assert_non_null(strstr(out, "key-cli-stuck"));
	assert_non_null(strstr(out, "api:orders:anonymous"));
	assert_non_null(strstr(out, " expired "));
	assert_null(strstr(out, "evt_cli_in_flight"));
	/* oldest first: the one stuck longest leads */
	assert_true(strstr(out, "evt_cli_stuck") < strstr(out, "key-cli-stuck"));
	free(out);
	/* the same two the metric and stats count */
	assert_int_equal(daemon_cli(d, 1, stats, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "\"processing_stuck\":2"));
	free(out);

	assert_int_equal(daemon_cli(d, 1, stuck_json, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "{\"events\": ["));
	assert_non_null(strstr(out, "\"provider\": \"stripe\", \"key\": \"evt_cli_stuck\""));
	assert_non_null(strstr(out, "\"lease_expired\": true"));
	assert_non_null(strstr(out, "\"outcome\": \"processing\""));
	assert_null(strstr(out, "evt_cli_in_flight"));
	free(out);

	assert_int_equal(daemon_cli(d, 1, all, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "evt_cli_stuck"));
	assert_non_null(strstr(out, "evt_cli_in_flight"));
	free(out);

	assert_int_equal(daemon_cli(d, 1, one_provider, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "evt_cli_stuck"));
	assert_null(strstr(out, "key-cli-stuck"));
	free(out);

	/* a claim is no processed event */
	assert_int_equal(daemon_cli(d, 1, failed, &out), 0);
	assert_true(out == NULL || strstr(out, "evt_cli_stuck") == NULL);
	free(out);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(daemon_cli_err(d, 1, bad[i], &out, &err), 64);
		assert_true(out == NULL || out[0] == '\0');
		assert_non_null(err);
		assert_non_null(strstr(err, "idemhook events list: "));
		free(out);
		free(err);
		out = NULL;
	}
}

static int setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_events_list_processing_lists_the_claims_stuck_in_processing),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
