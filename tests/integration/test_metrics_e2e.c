/* test_metrics_e2e.c: the admin listener's /metrics, /healthz and /readyz
 * over real HTTP: the text parses strictly as Prometheus exposition format
 * 0.0.4 (also after rejects, a failed batch and a gc pass) and the counters
 * move as expected after a storm of duplicates. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "harness.h"
#include "integration/prom_text.h"
#include "rawhttp.h"

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

/* The sample name{canon} exists and is 0. */
static void t_zero(const struct prom_text *p, const char *name, const char *canon)
{
	const struct prom_sample *s = prom_find(p, name, canon);

	if (s == NULL || s->ps_value != 0) {
		fail_msg("%s{%s}: %s", name, canon, s == NULL ? "absent" : "not 0");
	}
}

/* Prometheus' guidance: the series whose labels are known are exported at
 * 0 from the start, so that increase() sees their first count. An
 * instance's outcomes, reject and unapplied reasons, its reconciliation
 * counters (and its thin events' fetch failures) when it can reconcile; a
 * reload adds a new instance's. */
static void test_known_series_are_exported_at_zero_from_the_start_and_a_reload(void **state)
{
	static const char *const outcomes[] = {"new",      "replayed",    "mismatch", "failed",
	                                       "rejected", "in_progress", "transient"};
	static struct prom_text p;
	struct daemon d;
	char canon[256];
	size_t i;

	(void)state;
	fx_daemon_start(&d, T_INI "\n[provider rec]\ntype = stripe\nsecret = " T_SECRET "\n"
	                          "api_key = rk_test_metrics\n");
	scrape(&d, &p);
	for (i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++) {
		snprintf(canon, sizeof(canon), "outcome=\"%s\",provider=\"stripe\"", outcomes[i]);
		t_zero(&p, "idemhook_requests_total", canon);
	}
	t_zero(&p, "idemhook_rejected_total", "provider=\"stripe\",reason=\"bad_signature\"");
	t_zero(&p, "idemhook_rejected_total", "provider=\"stripe\",reason=\"stale_timestamp\"");
	t_zero(&p, "idemhook_events_unapplied_total",
	       "provider=\"stripe\",reason=\"unknown_order\"");
	t_zero(&p, "idemhook_events_unapplied_total",
	       "provider=\"stripe\",reason=\"amount_mismatch\"");
	t_zero(&p, "idemhook_events_unapplied_total",
	       "provider=\"stripe\",reason=\"refused_by_provider_rules\"");
	t_zero(&p, "idemhook_duplicates_absorbed_total", "provider=\"stripe\"");
	t_zero(&p, "idemhook_fingerprint_mismatches_total", "provider=\"stripe\"");
	t_zero(&p, "idemhook_request_duration_seconds_count", "provider=\"stripe\"");
	/* rec has an api_key, so it can reconcile; stripe cannot. */
	t_zero(&p, "idemhook_reconcile_events_total", "provider=\"rec\",result=\"applied\"");
	t_zero(&p, "idemhook_reconcile_failures_total", "provider=\"rec\"");
	t_zero(&p, "idemhook_reconcile_orders_checked_total", "provider=\"rec\"");
	assert_null(prom_find(&p, "idemhook_reconcile_failures_total", "provider=\"stripe\""));
	/* rec's thin events are fetched with that client: their failures too */
	t_zero(&p, "idemhook_fetch_failures_total", "provider=\"rec\"");
	assert_null(prom_find(&p, "idemhook_fetch_failures_total", "provider=\"stripe\""));

	assert_int_equal(daemon_append_config(
	                         &d, "\n[provider late]\ntype = stripe\nsecret = " T_SECRET "\n"),
	                 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	scrape(&d, &p);
	t_zero(&p, "idemhook_requests_total", "outcome=\"new\",provider=\"late\"");
	t_zero(&p, "idemhook_events_unapplied_total", "provider=\"late\",reason=\"unknown_order\"");
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
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
	assert_string_equal(prom_type(&t_before, "idemhook_events_unapplied_total"), "counter");
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

/* Every family the daemon exports, with its type. */
static const char *const t_families[][2] = {
        {"idemhook_requests_total", "counter"},
        {"idemhook_rejected_total", "counter"},
        {"idemhook_duplicates_absorbed_total", "counter"},
        {"idemhook_fingerprint_mismatches_total", "counter"},
        {"idemhook_request_duration_seconds", "histogram"},
        {"idemhook_capture_failures_total", "counter"},
        {"idemhook_events_unapplied_total", "counter"},
        {"idemhook_http_connections_cut_total", "counter"},
        {"idemhook_http_thread_wakeups_total", "counter"},
        {"idemhook_http_refused_total", "counter"},
        {"idemhook_http_drains_total", "counter"},
        {"idemhook_http_lingering_closes_total", "counter"},
        {"idemhook_build_info", "gauge"},
        {"process_start_time_seconds", "gauge"},
        {"idemhook_ready", "gauge"},
        {"idemhook_config_reloads_total", "counter"},
        {"idemhook_config_generation", "gauge"},
        {"idemhook_config_last_reload_successful", "gauge"},
        {"idemhook_config_last_reload_success_timestamp_seconds", "gauge"},
        {"idemhook_gc_runs_total", "counter"},
        {"idemhook_gc_deleted_total", "counter"},
        {"idemhook_gc_reclaimed_bytes_total", "counter"},
        {"idemhook_gc_last_success_timestamp_seconds", "gauge"},
        {"idemhook_gc_duration_seconds", "histogram"},
        {"idemhook_store_batch_size", "histogram"},
        {"idemhook_store_commit_seconds", "histogram"},
        {"idemhook_store_commits_total", "counter"},
        {"idemhook_store_units_total", "counter"},
        {"idemhook_store_conflicts_total", "counter"},
        {"idemhook_store_transient_total", "counter"},
        {"idemhook_db_size_bytes", "gauge"},
        {"idemhook_db_wal_size_bytes", "gauge"},
        {"idemhook_db_free_bytes", "gauge"},
        {"idemhook_processing_stuck", "gauge"},
        {"idemhook_events_failed_open", "gauge"},
        {"idemhook_outbox_rows", "gauge"},
        {"idemhook_outbox_oldest_pending_age_seconds", "gauge"},
        {"idemhook_outbox_backlog", "gauge"},
        {"idemhook_outbox_dead", "gauge"},
};

static void t_post(struct daemon *d, const char *secret, const char *id, const char *customer,
                   long want)
{
	char obj[128];
	struct hres r;
	char *body;

	snprintf(obj, sizeof(obj), "{\"id\":\"%s\",\"object\":\"customer\"}", customer);
	body = hn_stripe_event(id, "customer.created", obj);
	assert_non_null(body);
	assert_int_equal(hn_post_stripe(d, "stripe", secret, body, &r), 0);
	assert_int_equal(r.hs_status, want);
	hres_finish(&r);
	free(body);
}

static void
test_the_whole_exposition_parses_strictly_after_rejects_a_failed_batch_and_a_gc_pass(void **state)
{
	static struct prom_text p;
	struct hn_sqlite lock;
	struct daemon d;
	char *unknown;
	struct hres r;
	size_t i;
	int tries;

	(void)state;
	assert_int_equal(daemon_init(&d, "[store]\nbusy_timeout_ms = 300\n\n[gc]\ninterval = 1s\n\n" T_INI
	                                  "\n[outbound]\nnotify_url = http://127.0.0.1:9/notify\n"),
	                 0);
	assert_int_equal(daemon_start(&d), 0);
	/* new callbacks, duplicates, a changed payload, a forged signature, and
	 * a payment the business rules refuse */
	t_post(&d, T_SECRET, "evt_strict_1", "cus_1", 200);
	t_post(&d, T_SECRET, "evt_strict_2", "cus_2", 200);
	t_post(&d, T_SECRET, "evt_strict_1", "cus_1", 200);
	t_post(&d, T_SECRET, "evt_strict_1", "cus_1", 200);
	t_post(&d, T_SECRET, "evt_strict_2", "cus_changed", 200);
	t_post(&d, "whsec_forged", "evt_strict_3", "cus_3", 401);
	unknown = hn_stripe_event("evt_strict_unknown", "payment_intent.succeeded",
	                          "{\"id\":\"pi_1\",\"object\":\"payment_intent\",\"amount\":500,"
	                          "\"amount_received\":500,\"currency\":\"usd\",\"status\":"
	                          "\"succeeded\",\"metadata\":{\"order_id\":\"ord_nosuchorder000000000\"}}");
	assert_int_equal(hn_post_stripe(&d, "stripe", T_SECRET, unknown, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	free(unknown);
	/* a batch that cannot commit: another process holds the write lock */
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	t_post(&d, T_SECRET, "evt_strict_locked", "cus_4", 503);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	/* and a gc pass */
	for (tries = 0; tries < 100; tries++) {
		scrape(&d, &p);
		if (prom_sum(&p, "idemhook_gc_runs_total", "result=\"success\"") >= 1) {
			break;
		}
		usleep(100 * 1000);
	}
	/* scrape() parsed the whole text strictly; now what it must hold */
	scrape(&d, &p);
	for (i = 0; i < sizeof(t_families) / sizeof(t_families[0]); i++) {
		const char *type = prom_type(&p, t_families[i][0]);

		if (type == NULL || strcmp(type, t_families[i][1]) != 0) {
			fail_msg("%s: TYPE %s, expected %s", t_families[i][0], type != NULL ? type : "missing",
			         t_families[i][1]);
		}
	}
	assert_true(prom_sum(&p, "idemhook_gc_runs_total", "result=\"success\"") >= 1);
	assert_true(prom_sum(&p, "idemhook_gc_duration_seconds_count", "") >= 1);
	assert_true(prom_sum(&p, "idemhook_store_transient_total", "") >= 1);
	assert_int_equal(prom_sum(&p, "idemhook_requests_total", "outcome=\"transient\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_requests_total", "outcome=\"failed\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_requests_total", "outcome=\"mismatch\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_requests_total", "outcome=\"rejected\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_events_failed_open", ""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_build_info", ""), 1);
	assert_true(prom_sum(&p, "process_start_time_seconds", "") > 1.7e9);
	assert_true(prom_sum(&p, "idemhook_db_size_bytes", "") > 0);
	assert_int_equal(prom_count(&p, "idemhook_outbox_rows"), 6);
	assert_int_equal(prom_sum(&p, "idemhook_config_generation", ""), 1);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_an_event_acknowledged_but_not_applied_counts_once_by_reason(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char *body;

	body = hn_stripe_event(
	        "evt_metrics_unknown", "payment_intent.succeeded",
	        "{\"id\":\"pi_unknown\",\"object\":\"payment_intent\",\"amount\":100,"
	        "\"amount_received\":100,\"currency\":\"usd\",\"metadata\":{"
	        "\"order_id\":\"ord_nosuchorder0000000000\"}}");
	scrape(d, &t_before);
	assert_int_equal(hn_post_stripe(d, "stripe", T_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "\"reason\":\"unknown_order\""));
	hres_finish(&r);
	/* The retry is answered from the stored reply and counts nothing more. */
	assert_int_equal(hn_post_stripe(d, "stripe", T_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	scrape(d, &t_after);
	assert_int_equal(delta("idemhook_events_unapplied_total",
	                       "provider=\"stripe\",reason=\"unknown_order\""),
	                 1);
	free(body);
}

/* A unit rolled back after its handler refused the event (here the key's
 * row, which carries the event, cannot be written: a trigger aborts it)
 * was not acknowledged: it is not counted as unapplied. Its retry, once
 * it commits, counts once. */
static void test_an_unapplied_event_rolled_back_is_not_counted_until_it_commits(void **state)
{
	struct daemon *d = *state;
	struct hn_sqlite q;
	struct hres r;
	char *body;

	body = hn_stripe_event(
	        "evt_metrics_rolled_back", "payment_intent.succeeded",
	        "{\"id\":\"pi_rolled_back\",\"object\":\"payment_intent\",\"amount\":100,"
	        "\"amount_received\":100,\"currency\":\"usd\",\"metadata\":{"
	        "\"order_id\":\"ord_nosuchorder0000000001\"}}");
	assert_int_equal(hn_sqlite_start(&q, d->dm_db,
	                                 "CREATE TRIGGER t_no_event BEFORE INSERT ON idempotency_records"
	                                 " WHEN NEW.idem_key = 'evt_metrics_rolled_back'"
	                                 " BEGIN SELECT RAISE(ABORT, 'test: no event row'); END;"),
	                 0);
	assert_int_equal(hn_sqlite_finish(&q, ""), 0);
	scrape(d, &t_before);
	assert_int_equal(hn_post_stripe(d, "stripe", T_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 503);
	hres_finish(&r);
	scrape(d, &t_after);
	assert_int_equal(delta("idemhook_events_unapplied_total",
	                       "provider=\"stripe\",reason=\"unknown_order\""),
	                 0);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT count(*) FROM events"
	                                     " WHERE idem_key = 'evt_metrics_rolled_back'"),
	                 0);

	assert_int_equal(hn_sqlite_start(&q, d->dm_db, "DROP TRIGGER t_no_event;"), 0);
	assert_int_equal(hn_sqlite_finish(&q, ""), 0);
	assert_int_equal(hn_post_stripe(d, "stripe", T_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "\"reason\":\"unknown_order\""));
	hres_finish(&r);
	scrape(d, &t_after);
	assert_int_equal(delta("idemhook_events_unapplied_total",
	                       "provider=\"stripe\",reason=\"unknown_order\""),
	                 1);
	free(body);
}

/* Sends req on a connection of its own and returns the answer's status. */
static int edge_status(unsigned port, const char *req, size_t len)
{
	struct rh_response r;
	int status;

	assert_int_equal(rh_exchange(port, req, len, 10000, &r), 1);
	status = r.rr_status;
	rh_response_finish(&r);
	return status;
}

#define T_EDGE_ROOM 28 /* trickling heads: with a limit of 32, some are cut for room */

/* Each thing the listener does before routing shows in /metrics: the
 * sweeper's cuts by reason, the edge's refusals by status, the lingering
 * close after a 413 with its body unread, and a reload's drain. */
static void test_the_listener_counts_cuts_refusals_lingering_closes_and_drains(void **state)
{
	static const char slow_body[] =
	        "POST /hooks/stripe HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n{\"id\":";
	static struct prom_text p;
	struct daemon d;
	struct buf req;
	int heads[T_EDGE_ROOM];
	int body_fd;
	int i;

	(void)state;
	assert_int_equal(daemon_init(&d, T_INI "[server]\nmax_connections = 32\nhead_timeout = 3s\n"
	                                       "body_min_rate = 1000\n"),
	                 0);
	assert_int_equal(daemon_start(&d), 0);

	/* the edge: one refusal of each status */
	buf_init(&req, 0);
	buf_puts(&req, "GET /hooks/stripe%00x HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(edge_status(d.dm_port, req.buf_data, req.buf_len), 400);
	buf_finish(&req);
	buf_init(&req, 0);
	buf_puts(&req, "POST /hooks/stripe HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n");
	buf_puts(&req, "{\"id\":\"evt_big\"");
	assert_int_equal(edge_status(d.dm_port, req.buf_data, req.buf_len), 413);
	buf_finish(&req);
	buf_init(&req, 0);
	buf_puts(&req, "GET /hooks/stripe?");
	for (i = 0; i < 5000; i++) {
		buf_puts(&req, "a");
	}
	buf_puts(&req, " HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(edge_status(d.dm_port, req.buf_data, req.buf_len), 414);
	buf_finish(&req);
	buf_init(&req, 0);
	buf_puts(&req, "GET /healthz HTTP/1.1\r\nHost: a\r\n");
	for (i = 0; i < 120; i++) {
		buf_printf(&req, "X-Field-%d: 1\r\n", i);
	}
	buf_puts(&req, "\r\n");
	assert_int_equal(edge_status(d.dm_port, req.buf_data, req.buf_len), 431);
	buf_finish(&req);
	buf_init(&req, 0);
	buf_puts(&req, "POST /hooks/stripe HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
	               "0\r\n\r\n");
	assert_int_equal(edge_status(d.dm_port, req.buf_data, req.buf_len), 501);
	buf_finish(&req);

	/* the sweeper: a body under its floor, heads past their deadline,
	 * and, at 32 connections with 4 kept free, heads cut to make room */
	body_fd = rh_connect(NULL, d.dm_port);
	assert_true(body_fd >= 0);
	assert_int_equal(rh_send(body_fd, slow_body, strlen(slow_body)), 0);
	for (i = 0; i < T_EDGE_ROOM; i++) {
		heads[i] = rh_connect(i % 2 == 0 ? "127.0.0.2" : "127.0.0.3", d.dm_port);
		assert_true(heads[i] >= 0);
		assert_int_equal(rh_send(heads[i], "POST /hooks/stripe HTTP/1.1\r\n", 29), 0);
	}
	/* The body has a 5 s grace, then 1000 bytes/s; the heads 3 s. */
	assert_int_equal(rh_wait_closed(body_fd, 15000), 1);
	for (i = 0; i < T_EDGE_ROOM; i++) {
		assert_int_equal(rh_wait_closed(heads[i], 10000), 1);
		close(heads[i]);
	}
	close(body_fd);

	/* a reload: the old generation drains */
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);

	scrape(&d, &p);
	assert_int_equal(prom_sum(&p, "idemhook_http_refused_total", "listener=\"public\",status=\"400\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_http_refused_total", "listener=\"public\",status=\"413\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_http_refused_total", "listener=\"public\",status=\"414\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_http_refused_total", "listener=\"public\",status=\"431\""), 1);
	assert_int_equal(prom_sum(&p, "idemhook_http_refused_total", "listener=\"public\",status=\"501\""), 1);
	/* the 413 and the 501: both announced a body that was not read */
	assert_int_equal(prom_sum(&p, "idemhook_http_lingering_closes_total", "listener=\"public\""), 2);
	assert_int_equal(prom_sum(&p, "idemhook_http_connections_cut_total",
	                          "listener=\"public\",reason=\"body_min_rate\""),
	                 1);
	assert_true(prom_sum(&p, "idemhook_http_connections_cut_total",
	                     "listener=\"public\",reason=\"make_room\"") >= 1);
	assert_true(prom_sum(&p, "idemhook_http_connections_cut_total",
	                     "listener=\"public\",reason=\"head_timeout\"") >= 1);
	assert_int_equal(prom_sum(&p, "idemhook_http_connections_cut_total",
	                          "listener=\"public\",reason=\"make_room\"") +
	                         prom_sum(&p, "idemhook_http_connections_cut_total",
	                                  "listener=\"public\",reason=\"head_timeout\""),
	                 T_EDGE_ROOM);
	assert_int_equal(prom_sum(&p, "idemhook_http_drains_total",
	                          "listener=\"public\",kind=\"reload\""),
	                 1);
	assert_int_equal(daemon_term(&d, 60), 0);
	daemon_finish(&d);
}

/* The same for the listeners (each one's cuts by reason, refusals by
 * status, drains by kind, wakeups, lingering closes, resumes) and for the
 * order API and the checkout page (requests by outcome, duplicates,
 * mismatches, latency): each at 0 before anything happened, so the first
 * 400 shows in increase() as 1, not as a series that appeared. */
static void test_listener_and_order_api_series_are_exported_at_zero_from_the_start(void **state)
{
	static const char *const listeners[] = {"public", "admin"};
	static const char *const cuts[] = {"head_timeout", "body_min_rate", "make_room", "drain"};
	static const char *const statuses[] = {"400", "413", "414", "431", "501", "503"};
	static const char *const drains[] = {"reload", "stop"};
	static const char *const outcomes[] = {"new", "replayed", "mismatch", "in_progress",
	                                       "transient"};
	static const char *const apis[] = {"api:orders", "api:checkout"};
	static struct prom_text p;
	struct daemon d;
	struct buf req;
	char canon[256];
	size_t i;
	size_t k;

	(void)state;
	fx_daemon_start(&d, T_INI);
	scrape(&d, &p);
	for (k = 0; k < 2; k++) {
		for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
			snprintf(canon, sizeof(canon), "listener=\"%s\",reason=\"%s\"",
			         listeners[k], cuts[i]);
			t_zero(&p, "idemhook_http_connections_cut_total", canon);
		}
		for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
			snprintf(canon, sizeof(canon), "listener=\"%s\",status=\"%s\"",
			         listeners[k], statuses[i]);
			t_zero(&p, "idemhook_http_refused_total", canon);
		}
		for (i = 0; i < sizeof(drains) / sizeof(drains[0]); i++) {
			snprintf(canon, sizeof(canon), "kind=\"%s\",listener=\"%s\"", drains[i],
			         listeners[k]);
			t_zero(&p, "idemhook_http_drains_total", canon);
		}
		snprintf(canon, sizeof(canon), "listener=\"%s\"", listeners[k]);
		t_zero(&p, "idemhook_http_thread_wakeups_total", canon);
		t_zero(&p, "idemhook_http_lingering_closes_total", canon);
		t_zero(&p, "idemhook_http_resumes_total", canon);
		t_zero(&p, "idemhook_http_resume_seconds_total", canon);
	}
	for (k = 0; k < 2; k++) {
		for (i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++) {
			snprintf(canon, sizeof(canon), "outcome=\"%s\",provider=\"%s\"",
			         outcomes[i], apis[k]);
			t_zero(&p, "idemhook_requests_total", canon);
		}
		snprintf(canon, sizeof(canon), "provider=\"%s\"", apis[k]);
		t_zero(&p, "idemhook_duplicates_absorbed_total", canon);
		t_zero(&p, "idemhook_fingerprint_mismatches_total", canon);
		t_zero(&p, "idemhook_request_duration_seconds_count", canon);
	}
	/* the first refusal moves the declared series from 0 to 1 */
	buf_init(&req, 0);
	buf_puts(&req, "GET /hooks/stripe%00x HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(edge_status(d.dm_port, req.buf_data, req.buf_len), 400);
	buf_finish(&req);
	scrape(&d, &p);
	assert_int_equal(
	        prom_sum(&p, "idemhook_http_refused_total", "listener=\"public\",status=\"400\""),
	        1);
	t_zero(&p, "idemhook_http_refused_total", "listener=\"admin\",status=\"400\"");
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_healthz_and_readyz_answer_on_the_admin_listener_only),
	        cmocka_unit_test(
	                test_known_series_are_exported_at_zero_from_the_start_and_a_reload),
	        cmocka_unit_test(
	                test_listener_and_order_api_series_are_exported_at_zero_from_the_start),
	        cmocka_unit_test(test_metrics_text_declares_every_family_with_help_and_type),
	        cmocka_unit_test(
	                test_a_storm_of_duplicates_moves_new_once_and_replayed_for_the_rest),
	        cmocka_unit_test(
	                test_a_changed_payload_under_a_used_key_counts_as_a_fingerprint_mismatch),
	        cmocka_unit_test(
	                test_the_whole_exposition_parses_strictly_after_rejects_a_failed_batch_and_a_gc_pass),
	        cmocka_unit_test(test_an_event_acknowledged_but_not_applied_counts_once_by_reason),
	        cmocka_unit_test(
	                test_an_unapplied_event_rolled_back_is_not_counted_until_it_commits),
	        cmocka_unit_test(
	                test_the_listener_counts_cuts_refusals_lingering_closes_and_drains),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
