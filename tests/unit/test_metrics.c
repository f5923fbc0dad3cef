/* test_metrics.c: unit tests for the metrics registry and its Prometheus text. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "integration/prom_text.h"
#include "metrics.h"
#include "stats.h"
#include "store.h"

#define T_THREADS 8
#define T_PER_THREAD 5000

static struct prom_text t_prom;

/* Renders (with st, may be NULL) and parses; fails the test on bad text. */
static struct prom_text *render(struct store *st)
{
	struct buf b;

	buf_init(&b, 0);
	assert_int_equal(metrics_render(&b), 0);
	if (st != NULL) {
		assert_int_equal(stats_render_metrics(&b, st), 0);
	}
	assert_non_null(b.buf_data);
	if (prom_parse(&t_prom, b.buf_data) < 0 || prom_check_histograms(&t_prom) < 0) {
		fail_msg("exposition text rejected: %s\n%s", t_prom.pt_error, b.buf_data);
	}
	buf_finish(&b);
	return &t_prom;
}

static int reset(void **state)
{
	(void)state;
	metrics_reset();
	return 0;
}

static void test_every_family_has_help_and_type_even_before_any_request(void **state)
{
	struct prom_text *p = render(NULL);

	(void)state;
	assert_string_equal(prom_type(p, "idemhook_requests_total"), "counter");
	assert_string_equal(prom_type(p, "idemhook_rejected_total"), "counter");
	assert_string_equal(prom_type(p, "idemhook_duplicates_absorbed_total"), "counter");
	assert_string_equal(prom_type(p, "idemhook_fingerprint_mismatches_total"), "counter");
	assert_string_equal(prom_type(p, "idemhook_request_duration_seconds"), "histogram");
	assert_string_equal(prom_type(p, "idemhook_capture_failures_total"), "counter");
	assert_string_equal(prom_type(p, "idemhook_events_unapplied_total"), "counter");
	assert_int_equal(prom_sum(p, "idemhook_capture_failures_total", ""), 0);
}

static void test_counters_count_by_provider_and_outcome(void **state)
{
	struct prom_text *p;

	(void)state;
	metrics_request("stripe", "new", 0.002);
	metrics_request("stripe", "replayed", 0.001);
	metrics_request("stripe", "replayed", 0.001);
	metrics_request("adyen", "new", 0.004);
	metrics_rejected("stripe", "bad_signature");
	metrics_duplicate("stripe");
	metrics_duplicate("stripe");
	metrics_mismatch("adyen");
	metrics_capture_failure();
	p = render(NULL);
	assert_int_equal(
	        prom_sum(p, "idemhook_requests_total", "provider=\"stripe\",outcome=\"new\""), 1);
	assert_int_equal(
	        prom_sum(p, "idemhook_requests_total", "provider=\"stripe\",outcome=\"replayed\""),
	        2);
	assert_int_equal(prom_sum(p, "idemhook_requests_total", "provider=\"adyen\""), 1);
	assert_int_equal(prom_sum(p, "idemhook_rejected_total", "reason=\"bad_signature\""), 1);
	assert_int_equal(prom_sum(p, "idemhook_duplicates_absorbed_total", "provider=\"stripe\""),
	                 2);
	assert_int_equal(prom_sum(p, "idemhook_fingerprint_mismatches_total", "provider=\"adyen\""),
	                 1);
	assert_int_equal(prom_sum(p, "idemhook_capture_failures_total", ""), 1);
}

static void test_latency_histogram_is_cumulative_and_counts_every_request(void **state)
{
	struct prom_text *p;

	(void)state;
	metrics_request("stripe", "new", 0.0005);
	metrics_request("stripe", "new", 0.003);
	metrics_request("stripe", "new", 0.2);
	metrics_request("stripe", "new", 30);
	p = render(NULL);
	assert_int_equal(prom_sum(p, "idemhook_request_duration_seconds_bucket", "le=\"0.001\""),
	                 1);
	assert_int_equal(prom_sum(p, "idemhook_request_duration_seconds_bucket", "le=\"0.005\""),
	                 2);
	assert_int_equal(prom_sum(p, "idemhook_request_duration_seconds_bucket", "le=\"0.25\""), 3);
	assert_int_equal(prom_sum(p, "idemhook_request_duration_seconds_bucket", "le=\"10\""), 3);
	assert_int_equal(prom_sum(p, "idemhook_request_duration_seconds_bucket", "le=\"+Inf\""), 4);
	assert_int_equal(
	        prom_sum(p, "idemhook_request_duration_seconds_count", "provider=\"stripe\""), 4);
	assert_true(prom_sum(p, "idemhook_request_duration_seconds_sum", "") > 30.2);
}

static void test_label_values_are_escaped_as_the_format_asks(void **state)
{
	struct buf b;

	(void)state;
	metrics_rejected("we\"ird\\name\nx", "bad_signature");
	buf_init(&b, 0);
	assert_int_equal(metrics_render(&b), 0);
	assert_non_null(strstr(b.buf_data, "provider=\"we\\\"ird\\\\name\\nx\""));
	assert_int_equal(prom_parse(&t_prom, b.buf_data), 0);
	buf_finish(&b);
}

static void test_series_past_the_cap_are_folded_into_other(void **state)
{
	struct prom_text *p;
	char name[32];
	int i;

	(void)state;
	for (i = 0; i < 700; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		metrics_duplicate(name);
	}
	p = render(NULL);
	assert_true(prom_count(p, "idemhook_duplicates_absorbed_total") <= 513);
	assert_int_equal(prom_sum(p, "idemhook_duplicates_absorbed_total", ""), 700);
	assert_true(prom_sum(p, "idemhook_duplicates_absorbed_total", "provider=\"other\"") >= 188);
}

static void *hammer(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < T_PER_THREAD; i++) {
		metrics_request("stripe", "replayed", 0.001);
		metrics_duplicate("stripe");
	}
	return NULL;
}

static void test_concurrent_increments_are_never_lost(void **state)
{
	pthread_t th[T_THREADS];
	struct prom_text *p;
	int i;

	(void)state;
	for (i = 0; i < T_THREADS; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, hammer, NULL), 0);
	}
	for (i = 0; i < T_THREADS; i++) {
		pthread_join(th[i], NULL);
	}
	p = render(NULL);
	assert_int_equal(prom_sum(p, "idemhook_requests_total", "outcome=\"replayed\""),
	                 T_THREADS * T_PER_THREAD);
	assert_int_equal(prom_sum(p, "idemhook_duplicates_absorbed_total", ""),
	                 T_THREADS * T_PER_THREAD);
	assert_int_equal(prom_sum(p, "idemhook_request_duration_seconds_count", ""),
	                 T_THREADS * T_PER_THREAD);
}

static int insert_stuck(struct store_tx *tx, void *arg)
{
	int64_t now = store_tx_now(tx);
	struct store_value p[4] = {store_text("stripe"), store_blob("fp", 2),
	                           store_int(now - 120000), store_int(now + 600000)};

	(void)arg;
	if (store_exec(tx,
	               "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	               "lease_until, created_at,"
	               " updated_at) VALUES (?, 'evt_stuck', 'processing', ?, ?, ?3, ?3)",
	               p, 3, NULL) < 0) {
		return -1;
	}
	p[2] = store_int(now - 1000);
	return store_exec(tx,
	                  "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	                  "lease_until, created_at,"
	                  " updated_at) VALUES (?, 'evt_fresh', 'processing', ?, ?, ?3, ?3)",
	                  p, 3, NULL);
}

static void test_store_gauges_show_stuck_processing_and_batch_sizes(void **state)
{
	char dir[64];
	struct prom_text *p;
	struct store *st;
	struct timespec ts;
	int64_t now;

	(void)state;
	st = fx_store_create(dir);
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	assert_int_equal(store_write(st, now, insert_stuck, NULL), 0);
	p = render(st);
	assert_int_equal(prom_sum(p, "idemhook_processing_stuck", ""), 1);
	assert_string_equal(prom_type(p, "idemhook_store_batch_size"), "histogram");
	assert_true(prom_sum(p, "idemhook_store_commits_total", "") >= 1);
	assert_true(prom_sum(p, "idemhook_store_batch_size_count", "") >= 1);
	assert_true(prom_sum(p, "idemhook_store_batch_size_bucket", "le=\"+Inf\"") ==
	            prom_sum(p, "idemhook_store_batch_size_count", ""));
	/* The outbox arrives with its own migration; its gauges follow it. */
	if (prom_type(p, "idemhook_outbox_backlog") != NULL) {
		assert_int_equal(prom_sum(p, "idemhook_outbox_backlog", ""), 0);
		assert_int_equal(prom_sum(p, "idemhook_outbox_dead", ""), 0);
	}
	fx_store_destroy(st, dir);
}

/* The reader the integration tests trust must refuse each kind of broken
 * text, or a passing test would prove nothing. */
static void expect_refused(const char *text, const char *why)
{
	static struct prom_text p;

	if (prom_parse(&p, text) == 0 && prom_check_histograms(&p) == 0) {
		fail_msg("accepted (%s):\n%s", why, text);
	}
}

#define T_HIST_HEAD "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"

static void test_the_strict_reader_refuses_each_kind_of_broken_exposition(void **state)
{
	static struct prom_text p;
	static const char good[] =
	        "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"a,b\\\"c\"} 3\n"
	        T_HIST_HEAD "h_seconds_bucket{le=\"1\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n"
	        "h_seconds_sum 3.5\nh_seconds_count 2\n";

	(void)state;
	assert_int_equal(prom_parse(&p, good), 0);
	assert_int_equal(prom_check_histograms(&p), 0);
	expect_refused("# TYPE a_total counter\na_total 1\n", "no HELP");
	expect_refused("# HELP a_total A.\na_total 1\n", "no TYPE");
	expect_refused("# HELP a A.\n# TYPE a counter\na 1\n", "a counter without _total");
	expect_refused("# HELP a_total A.\n# TYPE a_total counter\na_total -1\n", "negative");
	expect_refused("# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"2\"} 1\n"
	               "a_total{y=\"2\",x=\"1\"} 1\n",
	               "the same series twice, labels reordered");
	expect_refused("# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",x=\"2\"} 1\n",
	               "a label twice");
	expect_refused("# HELP a_total A.\n# TYPE a_total counter\na_total{1x=\"1\"} 1\n",
	               "a bad label name");
	expect_refused("# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"\\q\"} 1\n",
	               "a bad escape");
	expect_refused(T_HIST_HEAD "h_seconds_bucket{le=\"1\"} 3\nh_seconds_bucket{le=\"+Inf\"} 2\n"
	                           "h_seconds_sum 1\nh_seconds_count 2\n",
	               "buckets not cumulative");
	expect_refused(T_HIST_HEAD "h_seconds_bucket{le=\"1\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n"
	                           "h_seconds_sum 1\nh_seconds_count 3\n",
	               "+Inf is not _count");
	expect_refused(T_HIST_HEAD "h_seconds_bucket{le=\"1\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n"
	                           "h_seconds_count 2\n",
	               "no _sum");
	expect_refused(T_HIST_HEAD "h_seconds_bucket{le=\"1\"} 1\nh_seconds_bucket{le=\"2\"} 2\n"
	                           "h_seconds_sum 1\nh_seconds_count 2\n",
	               "no +Inf bucket");
	expect_refused(T_HIST_HEAD "h_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_bucket{le=\"1\"} 1\n"
	                           "h_seconds_sum 1\nh_seconds_count 2\n",
	               "le out of order");
	expect_refused(T_HIST_HEAD "h_seconds_sum 1\nh_seconds_count 2\n", "no buckets");
	expect_refused("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"
	               "# HELP b B.\n# TYPE b gauge\nb 1\na_total{x=\"1\"} 1\n",
	               "a family split in two");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup(test_every_family_has_help_and_type_even_before_any_request,
	                               reset),
	        cmocka_unit_test_setup(test_counters_count_by_provider_and_outcome, reset),
	        cmocka_unit_test_setup(
	                test_latency_histogram_is_cumulative_and_counts_every_request, reset),
	        cmocka_unit_test_setup(test_label_values_are_escaped_as_the_format_asks, reset),
	        cmocka_unit_test_setup(test_series_past_the_cap_are_folded_into_other, reset),
	        cmocka_unit_test_setup(test_concurrent_increments_are_never_lost, reset),
	        cmocka_unit_test_setup(test_store_gauges_show_stuck_processing_and_batch_sizes,
	                               reset),
	        cmocka_unit_test(test_the_strict_reader_refuses_each_kind_of_broken_exposition),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
