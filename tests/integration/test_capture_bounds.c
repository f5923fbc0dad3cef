/* test_capture_bounds.c: anonymous requests cannot fill the disk through
 * the capture spool. Rejected requests are captured only up to a body size
 * and a rate (per client and in all), the spool has a quota of which they
 * get half, and a free-space floor below which they stop first and then
 * everything; what is not captured is counted and logged, and the genuine
 * callbacks that follow are acknowledged and captured. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"

#define T_BIG (1000 * 1024) /* bytes of an anonymous body: under [server] body_max */

static int64_t t_du_sum;
static int64_t t_du_files;

static int t_du_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	size_t len = strlen(path);

	(void)ftw;
	if (type == FTW_F && len > 4 && strcmp(path + len - 4, ".cap") == 0) {
		t_du_sum += (int64_t)sb->st_size;
		t_du_files++;
	}
	return 0;
}

/* Bytes of the capture files under dir; *ret_files gets their count. */
static int64_t t_du(const char *dir, int64_t *ret_files)
{
	t_du_sum = 0;
	t_du_files = 0;
	nftw(dir, t_du_one, 8, FTW_PHYS);
	*ret_files = t_du_files;
	return t_du_sum;
}

/* A daemon capturing into DIR/spool with the [capture] keys in keys. */
static void t_start(struct daemon *d, char spool[600], const char *keys)
{
	assert_int_equal(daemon_init(d, FX_STRIPE_INI), 0);
	snprintf(spool, 600, "%s/spool", d->dm_dir);
	fx_append_config(d, "\n[capture]\ndir = %s\n%s", spool, keys);
	assert_int_equal(daemon_start(d), 0);
}

/* The value of idemhook_capture_skipped_total{reason}, or -1 when /metrics
 * does not export that series. */
static int64_t t_series(struct daemon *d, const char *reason)
{
	struct hres r;
	char url[256];
	char series[128];
	const char *at;
	int64_t n = -1;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	snprintf(series, sizeof(series), "idemhook_capture_skipped_total{reason=\"%s\"} ", reason);
	at = strstr(r.hs_body, series);
	if (at != NULL) {
		n = strtoll(at + strlen(series), NULL, 10);
	}
	hres_finish(&r);
	return n;
}

/* The count of a series that may not be exported yet (0 then). */
static int64_t t_skipped(struct daemon *d, const char *reason)
{
	int64_t n = t_series(d, reason);

	return n < 0 ? 0 : n;
}

/* A request signed with the wrong secret: 401, rejected before any claim. */
static void t_forged(struct daemon *d, const char *body)
{
	struct hres r;

	assert_int_equal(hn_post_stripe(d, "stripe", "whsec_not_the_secret", body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
}

static void t_genuine(struct daemon *d, const char *id)
{
	char *body = hn_stripe_event(id, "customer.created",
	                             "{\"id\":\"cus_bounds\",\"object\":\"customer\"}");

	assert_int_equal(fx_stripe_send(d, body, NULL), 200);
	free(body);
}

static void test_big_anonymous_requests_are_not_captured_and_genuine_callbacks_go_on(void **state)
{
	struct daemon d;
	char spool[600];
	char id[64];
	char *big = malloc(T_BIG + 1);
	int64_t files;
	int64_t bytes;
	int i;

	(void)state;
	assert_non_null(big);
	memset(big, 'a', T_BIG);
	big[T_BIG] = '\0';
	/* The defaults, as the attack met them. */
	t_start(&d, spool, "mode = all\n");
	for (i = 0; i < 80; i++) {
		t_forged(&d, big);
	}
	bytes = t_du(spool, &files);
	assert_int_equal(files, 0);
	assert_int_equal(bytes, 0);
	assert_int_equal(t_skipped(&d, "rejected_size"), 80);
	assert_int_equal(daemon_log_wait(&d, "not capturing a rejected request for \"stripe\"", 0),
	                 0);
	assert_int_equal(daemon_log_wait(&d, "over [capture] rejected_body_max", 0), 0);
	for (i = 0; i < 20; i++) {
		snprintf(id, sizeof(id), "evt_bounds_genuine_%d", i);
		t_genuine(&d, id);
	}
	bytes = t_du(spool, &files);
	assert_int_equal(files, 20);
	assert_true(bytes < 20 * 4096);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	free(big);
}

/* A forged request as relayed by the trusted proxy for client. */
static void t_forged_from(struct daemon *d, const char *client, const char *id)
{
	char *body = hn_stripe_event(id, "customer.created", "{\"id\":\"cus_x\"}");
	char *sig = hn_stripe_signature("whsec_not_the_secret", hn_now_s(), body, strlen(body));
	char h_sig[512];
	char h_xff[128];
	const char *headers[] = {"Content-Type: application/json", h_sig, h_xff, NULL};
	char url[256];
	struct hres r;

	snprintf(h_sig, sizeof(h_sig), "Stripe-Signature: %s", sig);
	snprintf(h_xff, sizeof(h_xff), "X-Forwarded-For: %s", client);
	snprintf(url, sizeof(url), "%s/hooks/stripe", d->dm_base);
	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
	free(sig);
	free(body);
}

static void test_rejected_captures_are_limited_per_client_and_in_all(void **state)
{
	struct daemon d;
	char spool[600];
	char id[64];
	int64_t files;
	int64_t skipped;
	int i;

	(void)state;
	t_start(&d, spool, "mode = rejected\nrejected_client_rate = 5\nrejected_rate = 7\n");
	/* One client: its own limit binds. */
	for (i = 0; i < 12; i++) {
		char *body;

		snprintf(id, sizeof(id), "evt_bounds_one_%d", i);
		body = hn_stripe_event(id, "customer.created", "{\"id\":\"cus_x\"}");
		t_forged(&d, body);
		free(body);
	}
	t_du(spool, &files);
	skipped = t_skipped(&d, "rejected_client_rate");
	/* (A minute that turns in between lets up to twice through.) */
	assert_true(files >= 5 && files <= 10);
	assert_int_equal(skipped + files, 12);
	assert_int_equal(daemon_log_wait(&d, "over [capture] rejected_client_rate", 0), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_rejected_captures_from_many_clients_are_limited_in_all(void **state)
{
	struct daemon d;
	char spool[600];
	char id[64];
	char client[64];
	int64_t files;
	int i;

	(void)state;
	assert_int_equal(daemon_init(&d, NULL), 0);
	snprintf(spool, sizeof(spool), "%s/spool", d.dm_dir);
	fx_append_config(&d,
	                 "\n[capture]\ndir = %s\nmode = rejected\nrejected_client_rate = 5\n"
	                 "rejected_rate = 7\n\n[server]\ntrusted_proxies = "
	                 "127.0.0.1/32\n\n" FX_STRIPE_INI,
	                 spool);
	assert_int_equal(daemon_start(&d), 0);
	for (i = 0; i < 12; i++) {
		snprintf(id, sizeof(id), "evt_bounds_many_%d", i);
		snprintf(client, sizeof(client), "198.51.100.%d", i + 1);
		t_forged_from(&d, client, id);
	}
	t_du(spool, &files);
	assert_true(files >= 7 && files <= 12);
	assert_int_equal(t_skipped(&d, "rejected_rate") + files, 12);
	assert_int_equal(t_skipped(&d, "rejected_client_rate"), 0);
	assert_int_equal(daemon_log_wait(&d, "over [capture] rejected_rate", 0), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_the_quota_keeps_half_for_authenticated_captures_and_bounds_the_spool(void **state)
{
	struct daemon d;
	char spool[600];
	char id[64];
	char *small;
	int64_t files;
	int64_t bytes;
	int64_t before;
	int i;

	(void)state;
	t_start(&d, spool, "mode = all\nmax_bytes = 24k\n");
	/* Genuine callbacks past half the quota. */
	for (i = 0; t_du(spool, &files) <= 12 * 1024; i++) {
		snprintf(id, sizeof(id), "evt_bounds_quota_%d", i);
		t_genuine(&d, id);
		assert_true(i < 100);
	}
	assert_int_equal(t_skipped(&d, "quota"), 0);
	/* A rejected request has no room left in its half. */
	small = hn_stripe_event("evt_bounds_quota_forged", "customer.created",
	                        "{\"id\":\"cus_q\"}");
	before = t_du(spool, &files);
	t_forged(&d, small);
	free(small);
	assert_int_equal(t_du(spool, &files), before);
	assert_int_equal(t_skipped(&d, "quota"), 1);
	/* Genuine ones still have theirs, up to the quota and never past it. */
	snprintf(id, sizeof(id), "evt_bounds_quota_more");
	t_genuine(&d, id);
	assert_true(t_du(spool, &files) > before);
	for (i = 0; i < 40; i++) {
		snprintf(id, sizeof(id), "evt_bounds_quota_fill_%d", i);
		t_genuine(&d, id);
	}
	bytes = t_du(spool, &files);
	assert_true(bytes <= 24 * 1024);
	assert_true(t_skipped(&d, "quota") > 1);
	assert_int_equal(daemon_log_wait(&d, "the spool is at [capture] max_bytes", 0), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_below_the_free_space_floor_rejects_stop_first_then_everything(void **state)
{
	struct daemon d;
	struct statvfs vfs;
	char spool[600];
	char keys[256];
	char *forged;
	int64_t files;
	uint64_t avail_k;

	(void)state;
	assert_int_equal(daemon_init(&d, NULL), 0);
	assert_int_equal(statvfs(d.dm_dir, &vfs), 0);
	daemon_finish(&d);
	avail_k = (uint64_t)vfs.f_bavail * vfs.f_frsize / 1024;
	forged = hn_stripe_event("evt_bounds_floor_forged", "customer.created",
	                         "{\"id\":\"cus_f\"}");

	/* Free space between the floor and twice it: rejects are not captured,
	 * genuine callbacks are. */
	snprintf(keys, sizeof(keys), "mode = all\nmin_free = %" PRIu64 "k\n", avail_k * 2 / 3);
	t_start(&d, spool, keys);
	t_forged(&d, forged);
	t_genuine(&d, "evt_bounds_floor_1");
	t_du(spool, &files);
	assert_int_equal(files, 1);
	assert_int_equal(t_skipped(&d, "free_space"), 1);
	assert_int_equal(daemon_log_wait(&d, "under [capture] min_free", 0), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);

	/* Under the floor: nothing is captured, every callback still answered. */
	snprintf(keys, sizeof(keys), "mode = all\nmin_free = %" PRIu64 "k\n", avail_k * 2);
	t_start(&d, spool, keys);
	t_forged(&d, forged);
	t_genuine(&d, "evt_bounds_floor_2");
	t_du(spool, &files);
	assert_int_equal(files, 0);
	assert_int_equal(t_skipped(&d, "free_space"), 2);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM idempotency_records"), 1);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	free(forged);
}

/* A counter that first appears at 1 is missed by increase(): with capture
 * on, every reason is exported at 0 from the start. */
static void
test_the_skip_counters_are_exported_at_zero_from_the_start_when_capture_is_on(void **state)
{
	static const char *const reasons[] = {"rejected_size", "rejected_client_rate",
	                                      "rejected_rate", "quota", "free_space"};
	struct daemon d;
	char spool[600];
	char *big = malloc(T_BIG + 1);
	size_t i;

	(void)state;
	assert_non_null(big);
	memset(big, 'a', T_BIG);
	big[T_BIG] = '\0';
	t_start(&d, spool, "mode = rejected\n");
	for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		if (t_series(&d, reasons[i]) != 0) {
			fail_msg("the skip reason %s is not exported at 0 before its first skip",
			         reasons[i]);
		}
	}
	/* The first skip moves the series from 0 to 1; the others stay. */
	t_forged(&d, big);
	assert_int_equal(t_series(&d, "rejected_size"), 1);
	assert_int_equal(t_series(&d, "quota"), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);

	/* Capture off: nothing is skipped, nothing exported. A reload
	 * cannot turn capture on ([capture] mode needs a restart). */
	fx_daemon_start(&d, FX_STRIPE_INI);
	assert_int_equal(t_series(&d, "rejected_size"), -1);
	fx_append_config(&d, "\n[capture]\nmode = all\ndir = %s/spool\n", d.dm_dir);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "not in effect until a restart", 10000), 0);
	assert_int_equal(t_series(&d, "rejected_size"), -1);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_big_anonymous_requests_are_not_captured_and_genuine_callbacks_go_on),
	        cmocka_unit_test(test_rejected_captures_are_limited_per_client_and_in_all),
	        cmocka_unit_test(test_rejected_captures_from_many_clients_are_limited_in_all),
	        cmocka_unit_test(
	                test_the_quota_keeps_half_for_authenticated_captures_and_bounds_the_spool),
	        cmocka_unit_test(
	                test_below_the_free_space_floor_rejects_stop_first_then_everything),
	        cmocka_unit_test(
	                test_the_skip_counters_are_exported_at_zero_from_the_start_when_capture_is_on),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
