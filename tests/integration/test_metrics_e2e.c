/* test_metrics_e2e.c: the admin listener's /metrics, /healthz and /readyz
 * over real HTTP: the text parses as Prometheus exposition format 0.0.4 and
 * the counters move as expected after a storm of duplicates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "integration/prom_text.h"

#define T_SECRET "whsec_metrics_test_secret"
#define T_INI "[provider stripe]\ntype = stripe\nsecret = " T_SECRET "\n"
#define T_STORM 50

static struct prom_text t_before;
static struct prom_text t_after;

static int setup(void **state)
{
	struct daemon *d = calloc(1, sizeof(*d));

	if (d == NULL || daemon_init(d, T_INI) < 0 || daemon_start(d) < 0) {
		free(d);
		return -1;
	}
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct daemon *d = *state;

	daemon_finish(d);
	free(d);
	return 0;
}

/* GETs path on the admin listener into *ret (body NUL-terminated). */
static void admin_get(struct daemon *d, const char *path, struct hres *ret)
{
	char url[256];

	assert_true(d->dm_admin_port != 0);
	snprintf(url, sizeof(url), "%s%s", d->dm_admin_base, path);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, ret), 0);
}

static void scrape(struct daemon *d, struct prom_text *p)
{
	struct hres r;
	char *ct;

	admin_get(d, "/metrics", &r);
	assert_int_equal(r.hs_status, 200);
	ct = hres_header(&r, "Content-Type");
	assert_non_null(ct);
	assert_non_null(strstr(ct, "text/plain"));
	assert_non_null(strstr(ct, "version=0.0.4"));
	free(ct);
	assert_non_null(r.hs_body);
	if (prom_parse(p, r.hs_body) < 0 || prom_check_histograms(p) < 0) {
		fail_msg("/metrics is not valid exposition text: %s\n%s", p->pt_error, r.hs_body);
	}
	hres_finish(&r);
}

static void test_healthz_and_readyz_answer_on_the_admin_listener_only(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char url[256];

	admin_get(d, "/healthz", &r);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	admin_get(d, "/readyz", &r);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	admin_get(d, "/nope", &r);
	assert_int_equal(r.hs_status, 404);
	hres_finish(&r);
	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("POST", url, NULL, "x", 1, &r), 0);
	assert_int_equal(r.hs_status, 405);
	hres_finish(&r);
	/* the public listener does not show metrics */
	snprintf(url, sizeof(url), "%s/metrics", d->dm_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_true(r.hs_status == 404 || r.hs_status == 405);
	hres_finish(&r);
}

static void test_metrics_text_declares_every_family_with_help_and_type(void **state)
{
	struct daemon *d = *state;

	scrape(d, &t_before);
	assert_string_equal(prom_type(&t_before, "idemhook_requests_total"), "counter");
	assert_string_equal(prom_type(&t_before, "idemhook_rejected_total"), "counter");
	assert_string_equal(prom_type(&t_before, "idemhook_duplicates_absorbed_total"), "counter");
	assert_string_equal(prom_type(&t_before, "idemhook_fingerprint_mismatches_total"),
	                    "counter");
	assert_string_equal(prom_type(&t_before, "idemhook_request_duration_seconds"), "histogram");
	assert_string_equal(prom_type(&t_before, "idemhook_capture_failures_total"), "counter");
	assert_string_equal(prom_type(&t_before, "idemhook_processing_stuck"), "gauge");
	assert_string_equal(prom_type(&t_before, "idemhook_store_batch_size"), "histogram");
	assert_string_equal(prom_type(&t_before, "idemhook_store_commits_total"), "counter");
	assert_int_equal(prom_sum(&t_before, "idemhook_processing_stuck", ""), 0);
}

static double delta(const char *name, const char *filter)
{
	return prom_sum(&t_after, name, filter) - prom_sum(&t_before, name, filter);
}

static void test_a_storm_of_duplicates_moves_new_once_and_replayed_for_the_rest(void **state)
{
	struct daemon *d = *state;
	struct hres res[T_STORM];
	char sig_header[512];
	const char *headers[3];
	char url[256];
	char *body;
	char *sig;
	size_t i;

	scrape(d, &t_before);
	body = hn_stripe_event("evt_metrics_storm", "customer.created",
	                       "{\"id\":\"cus_9\",\"object\":\"customer\"}");
	assert_non_null(body);
	sig = hn_stripe_signature(T_SECRET, hn_now_s(), body, strlen(body));
	assert_non_null(sig);
	snprintf(sig_header, sizeof(sig_header), "Stripe-Signature: %s", sig);
	headers[0] = sig_header;
	headers[1] = "Content-Type: application/json";
	headers[2] = NULL;
	snprintf(url, sizeof(url), "%s/hooks/stripe", d->dm_base);
	assert_int_equal(hn_http_storm(T_STORM, "POST", url, headers, body, strlen(body), res), 0);
	for (i = 0; i < T_STORM; i++) {
		assert_int_equal(res[i].hs_status, 200);
		hres_finish(&res[i]);
	}
	free(sig);
	free(body);

	/* and one forged signature */
	body = hn_stripe_event("evt_metrics_forged", "customer.created", "{\"id\":\"cus_9\"}");
	assert_int_equal(hn_post_stripe(d, "stripe", "whsec_wrong", body, &res[0]), 0);
	assert_int_equal(res[0].hs_status, 401);
	hres_finish(&res[0]);
	free(body);

	scrape(d, &t_after);
	assert_int_equal(delta("idemhook_requests_total", "provider=\"stripe\",outcome=\"new\""),
	                 1);
	assert_int_equal(delta("idemhook_requests_total", "provider=\"stripe\",outcome=\"new\"") +
	                         delta("idemhook_requests_total",
	                               "provider=\"stripe\",outcome=\"replayed\""),
	                 T_STORM);
	assert_int_equal(
	        delta("idemhook_duplicates_absorbed_total", "provider=\"stripe\""),
	        delta("idemhook_requests_total", "provider=\"stripe\",outcome=\"replayed\""));
	assert_int_equal(delta("idemhook_duplicates_absorbed_total", "provider=\"stripe\""),
	                 T_STORM - 1);
	assert_int_equal(
	        delta("idemhook_rejected_total", "provider=\"stripe\",reason=\"bad_signature\""),
	        1);
	assert_int_equal(
	        delta("idemhook_requests_total", "provider=\"stripe\",outcome=\"rejected\""), 1);
	assert_int_equal(delta("idemhook_fingerprint_mismatches_total", ""), 0);
	assert_int_equal(delta("idemhook_request_duration_seconds_count", "provider=\"stripe\""),
	                 T_STORM + 1);
	assert_int_equal(prom_sum(&t_after, "idemhook_request_duration_seconds_bucket",
	                          "provider=\"stripe\",le=\"+Inf\""),
	                 prom_sum(&t_after, "idemhook_request_duration_seconds_count",
	                          "provider=\"stripe\""));
	assert_true(delta("idemhook_store_commits_total", "") >= 1);
	assert_true(prom_sum(&t_after, "idemhook_store_batch_size_count", "") ==
	            prom_sum(&t_after, "idemhook_store_batch_size_bucket", "le=\"+Inf\""));
}

static void test_a_changed_payload_under_a_used_key_counts_as_a_fingerprint_mismatch(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char *first;
	char *second;

	first = hn_stripe_event("evt_metrics_fp", "customer.created",
	                        "{\"id\":\"cus_1\",\"object\":\"customer\"}");
	second = hn_stripe_event("evt_metrics_fp", "customer.created",
	                         "{\"id\":\"cus_2\",\"object\":\"customer\"}");
	assert_int_equal(hn_post_stripe(d, "stripe", T_SECRET, first, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	scrape(d, &t_before);
	assert_int_equal(hn_post_stripe(d, "stripe", T_SECRET, second, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	scrape(d, &t_after);
	assert_int_equal(delta("idemhook_fingerprint_mismatches_total", "provider=\"stripe\""), 1);
	free(first);
	free(second);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_healthz_and_readyz_answer_on_the_admin_listener_only),
	        cmocka_unit_test(test_metrics_text_declares_every_family_with_help_and_type),
	        cmocka_unit_test(
	                test_a_storm_of_duplicates_moves_new_once_and_replayed_for_the_rest),
	        cmocka_unit_test(
	                test_a_changed_payload_under_a_used_key_counts_as_a_fingerprint_mismatch),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
