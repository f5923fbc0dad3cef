/* test_events_dismiss.c: a failed event that can never apply is dismissed
 * with a reason (by ID, or by filter after confirming the count), leaves the
 * open-failures gauge, and is in the audit log; test-mode events are
 * counted apart from live ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "fixtures.h"
#include "harness.h"

/* The value of one unlabelled gauge on /metrics. */
static int64_t t_gauge(struct daemon *d, const char *name)
{
	char url[128];
	char want[128];
	struct hres r;
	const char *p;
	int64_t v;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	snprintf(want, sizeof(want), "\n%s ", name);
	p = strstr(r.hs_body, want);
	assert_non_null(p);
	v = strtoll(p + strlen(want), NULL, 10);
	hres_finish(&r);
	return v;
}

/* A payment for an order that does not exist: stored failed (unknown_order). */
static void t_unknown(struct daemon *d, const char *key)
{
	assert_int_equal(fx_stripe_pay(d, key, "ord_dismiss_nosuch000000001", 500, "usd"), 200);
}

/* The same from Stripe's test mode ("livemode":false): failed, test mode. */
static void t_unknown_test_mode(struct daemon *d, const char *key)
{
	char *body = fx_stripe_payment(key, "ord_dismiss_sandbox00000001", 500, "usd");
	char *live = strstr(body, "\"livemode\":true");
	struct hres r;

	assert_non_null(live);
	memmove(live + strlen("\"livemode\":false"), live + strlen("\"livemode\":true"),
	        strlen(live + strlen("\"livemode\":true")) + 1);
	memcpy(live, "\"livemode\":false", strlen("\"livemode\":false"));
	assert_int_equal(fx_stripe_send(d, body, &r), 200);
	hres_finish(&r);
	free(body);
	assert_int_equal(fx_db_int(d,
	                           "SELECT test_mode FROM events WHERE idem_key = '%s' AND "
	                           "outcome = 'failed'",
	                           key),
	                 1);
}

static int64_t t_event_id(struct daemon *d, const char *key)
{
	return fx_db_int(d, "SELECT id FROM events WHERE idem_key = '%s'", key);
}

static void test_dismissing_a_failed_event_clears_the_gauge_and_is_audited(void **state)
{
	struct daemon *d = *state;
	char id[32];
	const char *dismiss[] = {"events", "dismiss", id, "--reason", "payment made at the till",
	                         NULL};
	static const char *const audit[] = {"audit", "list", NULL};
	char *out = NULL;

	t_unknown(d, "evt_dismiss_one");
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 1);
	snprintf(id, sizeof(id), "%lld", (long long)t_event_id(d, "evt_dismiss_one"));
	fx_cli_says(d, dismiss, 0, "dismissed");
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 0);
	/* still failed, with who and why */
	assert_int_equal(fx_db_int(d,
	                           "SELECT count(*) FROM events WHERE id = %s AND outcome = "
	                           "'failed' AND dismissed_at > 0 AND dismiss_reason = "
	                           "'payment made at the till' AND dismissed_by LIKE 'cli:%%'",
	                           id),
	                 1);
	fx_assert_audit(d, 1,
	                "action = 'events.dismiss' AND target = 'event:%s' AND result = 'ok' AND "
	                "reason = 'payment made at the till'",
	                id);
	/* a second time: refused, and the refusal is audited too */
	assert_int_equal(daemon_cli(d, 1, dismiss, &out), 65);
	free(out);
	out = NULL;
	fx_assert_audit(d, 1, "target = 'event:%s' AND result LIKE 'refused:%%'", id);
	assert_int_equal(daemon_cli(d, 1, audit, &out), 0);
	assert_non_null(strstr(out, "events.dismiss"));
	assert_non_null(strstr(out, "payment made at the till"));
	free(out);
}

/* events show says whether an event came from the provider's test mode,
 * as the console's event page does, in text and in JSON. */
static void test_events_show_says_test_mode_as_the_console_does(void **state)
{
	struct daemon *d = *state;
	char live[32];
	char test[32];
	const char *show_live[] = {"events", "show", live, NULL};
	const char *show_test[] = {"events", "show", test, NULL};
	const char *json_live[] = {"events", "show", live, "--json", NULL};
	const char *json_test[] = {"events", "show", test, "--json", NULL};

	t_unknown(d, "evt_show_live_mode");
	t_unknown_test_mode(d, "evt_show_test_mode");
	snprintf(live, sizeof(live), "%lld", (long long)t_event_id(d, "evt_show_live_mode"));
	snprintf(test, sizeof(test), "%lld", (long long)t_event_id(d, "evt_show_test_mode"));
	fx_cli_says(d, show_test, 0, "\ntest mode:       yes (never alerts)\n");
	fx_cli_says(d, show_live, 0, "\ntest mode:       no\n");
	fx_cli_says(d, json_test, 0, "\"test_mode\": true");
	fx_cli_says(d, json_live, 0, "\"test_mode\": false");
}

static void test_events_show_and_list_say_who_dismissed_an_event_and_why(void **state)
{
	struct daemon *d = *state;
	char id[32];
	const char *dismiss[] = {"events", "dismiss", id, "--reason", "paid at the till", NULL};
	const char *show[] = {"events", "show", id, NULL};
	const char *show_json[] = {"events", "show", id, "--json", NULL};
	static const char *const list[] = {"events", "list", NULL};
	static const char *const list_json[] = {"events", "list", "--json", NULL};
	const cJSON *e;
	cJSON *j;
	char *out = NULL;

	t_unknown(d, "evt_dismiss_shown");
	snprintf(id, sizeof(id), "%lld", (long long)t_event_id(d, "evt_dismiss_shown"));
	fx_cli_says(d, show, 0, "\ndismissed:       no\n");
	assert_int_equal(daemon_cli(d, 1, dismiss, &out), 0);
	free(out);
	out = NULL;
	assert_int_equal(daemon_cli(d, 1, show, &out), 0);
	assert_non_null(strstr(out, "\ndismissed:       20"));
	assert_non_null(strstr(out, " by cli:"));
	assert_non_null(strstr(out, "\ndismiss reason:  paid at the till\n"));
	free(out);
	out = NULL;
	assert_int_equal(daemon_cli(d, 1, show_json, &out), 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "dismissed")));
	assert_non_null(strstr(cJSON_GetObjectItem(j, "dismissed_by")->valuestring, "cli:"));
	assert_string_equal(cJSON_GetObjectItem(j, "dismiss_reason")->valuestring,
	                    "paid at the till");
	/* what was there stays */
	assert_string_equal(cJSON_GetObjectItem(j, "outcome")->valuestring, "failed");
	cJSON_Delete(j);
	free(out);
	out = NULL;
	fx_cli_says(d, list, 0, "unknown_order (dismissed)\n");
	assert_int_equal(daemon_cli(d, 1, list_json, &out), 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	e = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "events"), 0);
	assert_non_null(e);
	assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "dismissed")));
	assert_string_equal(cJSON_GetObjectItem(e, "dismiss_reason")->valuestring,
	                    "paid at the till");
	cJSON_Delete(j);
	free(out);
}

static void test_dismiss_without_a_reason_is_refused_and_changes_nothing(void **state)
{
	struct daemon *d = *state;
	char id[32];
	const char *no_reason[] = {"events", "dismiss", id, NULL};
	const char *empty[] = {"events", "dismiss", id, "--reason", "", NULL};
	char *out = NULL;

	t_unknown(d, "evt_dismiss_noreason");
	snprintf(id, sizeof(id), "%lld", (long long)t_event_id(d, "evt_dismiss_noreason"));
	assert_int_equal(daemon_cli(d, 1, no_reason, &out), 64);
	free(out);
	out = NULL;
	assert_int_equal(daemon_cli(d, 1, empty, &out), 64);
	free(out);
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"),
	                 0);
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM audit_log"), 0);
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 1);
}

static void test_dismiss_by_filter_counts_first_and_needs_the_count_confirmed(void **state)
{
	struct daemon *d = *state;
	static const char *const count[] = {
	        "events",         "dismiss", "--failed-reason", "unknown_order", "--reason",
	        "sandbox orders", NULL};
	static const char *const wrong[] = {"events",        "dismiss",  "--failed-reason",
	                                    "unknown_order", "--reason", "sandbox orders",
	                                    "--confirm",     "3",        NULL};
	static const char *const right[] = {"events",        "dismiss",  "--failed-reason",
	                                    "unknown_order", "--reason", "sandbox orders",
	                                    "--confirm",     "2",        NULL};
	char order[64];
	char *out = NULL;

	fx_order(d, 700, "usd", order);
	assert_int_equal(fx_stripe_pay(d, "evt_filter_applied", order, 700, "usd"), 200);
	t_unknown(d, "evt_filter_1");
	t_unknown(d, "evt_filter_2");
	fx_cli_says(d, count, 0, "2 open failed event(s) match");
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 2);
	/* the count changed since it was read: nothing happens */
	assert_int_equal(daemon_cli(d, 1, wrong, &out), 65);
	free(out);
	out = NULL;
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"),
	                 0);
	fx_cli_says(d, right, 0, "2 event(s) dismissed");
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 0);
	fx_assert_audit(d, 2, "action = 'events.dismiss' AND result = 'ok'");
	/* the applied event was never selected */
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM events WHERE idem_key = "
	                              "'evt_filter_applied' AND dismissed_at IS NULL"),
	                 1);
}

static void test_a_key_prefix_that_is_not_ascii_selects_by_its_bytes(void **state)
{
	struct daemon *d = *state;
	/* "é" is two bytes: a prefix compared by characters took one too many
	 * of the key's and matched nothing */
	static const char *const accented[] = {
	        "events", "dismiss", "--key-prefix", "evt_\xc3\xa9", "--reason", "sandbox", NULL};
	/* the bytes, not the characters: half of "é" is a prefix too */
	static const char *const half[] = {
	        "events", "dismiss", "--key-prefix", "evt_\xc3", "--reason", "sandbox", NULL};
	static const char *const confirm[] = {"events",       "dismiss",  "--key-prefix",
	                                      "evt_\xc3\xa9", "--reason", "sandbox",
	                                      "--confirm",    "2",        NULL};

	t_unknown(d, "evt_\xc3\xa9_1");
	t_unknown(d, "evt_\xc3\xa9_2");
	t_unknown(d, "evt_e_3");
	fx_cli_says(d, accented, 0, "2 open failed event(s) match");
	fx_cli_says(d, half, 0, "2 open failed event(s) match");
	fx_cli_says(d, confirm, 0, "2 event(s) dismissed");
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"
	                              " AND idem_key LIKE 'evt_\xc3\xa9_%%'"),
	                 2);
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 1);
}

static void test_test_mode_failures_are_counted_apart_from_live_ones(void **state)
{
	struct daemon *d = *state;

	t_unknown_test_mode(d, "evt_sandbox_1");
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 0);
	assert_int_equal(t_gauge(d, "idemhook_events_failed_test_mode"), 1);
	t_unknown(d, "evt_live_1");
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 1);
	assert_int_equal(t_gauge(d, "idemhook_events_failed_test_mode"), 1);
}

/* --test-mode selects the failed test-mode events (never open, never
 * alerting) and dismisses those; --live, or neither, the live ones. It used
 * to add test_mode <> 0 to the open set's test_mode = 0 and match none. */
static void test_dismiss_by_filter_with_test_mode_selects_the_test_mode_failures(void **state)
{
	struct daemon *d = *state;
	static const char *const count[] = {"events",   "dismiss", "--test-mode",
	                                    "--reason", "sandbox", NULL};
	static const char *const confirm[] = {"events",  "dismiss",   "--test-mode", "--reason",
	                                      "sandbox", "--confirm", "2",           NULL};
	static const char *const live[] = {"events",   "dismiss", "--live",
	                                   "--reason", "sandbox", NULL};
	static const char *const neither[] = {"events",   "dismiss", "--provider", "stripe",
	                                      "--reason", "sandbox", NULL};

	t_unknown_test_mode(d, "evt_sandbox_f1");
	t_unknown_test_mode(d, "evt_sandbox_f2");
	t_unknown(d, "evt_live_f1");
	fx_cli_says(d, count, 0, "2 failed test-mode event(s) match");
	fx_cli_says(d, live, 0, "1 open failed event(s) match");
	fx_cli_says(d, neither, 0, "1 open failed event(s) match");
	fx_cli_says(d, confirm, 0, "2 event(s) dismissed");
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"
	                              " AND test_mode <> 0 AND dismiss_reason = 'sandbox'"),
	                 2);
	fx_assert_audit(d, 2, "action = 'events.dismiss' AND result = 'ok'");
	assert_int_equal(t_gauge(d, "idemhook_events_failed_test_mode"), 0);
	/* the live one was never selected */
	assert_int_equal(t_gauge(d, "idemhook_events_failed_open"), 1);
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM events WHERE idem_key = "
	                              "'evt_live_f1' AND dismissed_at IS NULL"),
	                 1);
	/* dismissed ones are not counted again */
	fx_cli_says(d, count, 0, "no failed test-mode event(s) match: nothing to dismiss");
}

/* Nothing matching is nothing to do: said so, exit 0, and no "--confirm 0"
 * offered as a step to take (nor taken: confirming 0 says the same). */
static void
test_dismiss_by_filter_with_nothing_matching_says_there_is_nothing_to_dismiss(void **state)
{
	struct daemon *d = *state;
	static const char *const count[] = {
	        "events",  "dismiss", "--failed-reason", "amount_mismatch", "--reason",
	        "sandbox", NULL};
	static const char *const zero[] = {"events",          "dismiss",  "--failed-reason",
	                                   "amount_mismatch", "--reason", "sandbox",
	                                   "--confirm",       "0",        NULL};
	char *out = NULL;

	t_unknown(d, "evt_nothing_1"); /* unknown_order: not what is asked for */
	assert_int_equal(daemon_cli(d, 1, count, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "no open failed event(s) match: nothing to dismiss"));
	assert_null(strstr(out, "--confirm"));
	free(out);
	out = NULL;
	assert_int_equal(daemon_cli(d, 1, zero, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "nothing to dismiss"));
	assert_null(strstr(out, "dismissed"));
	free(out);
	assert_int_equal(fx_db_int(d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"),
	                 0);
	fx_assert_audit(d, 0, "action = 'events.dismiss'");
}

static int setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(
	                test_dismissing_a_failed_event_clears_the_gauge_and_is_audited, setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_events_show_and_list_say_who_dismissed_an_event_and_why, setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(test_events_show_says_test_mode_as_the_console_does,
	                                        setup, daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dismiss_without_a_reason_is_refused_and_changes_nothing, setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dismiss_by_filter_counts_first_and_needs_the_count_confirmed, setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_key_prefix_that_is_not_ascii_selects_by_its_bytes, setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_test_mode_failures_are_counted_apart_from_live_ones, setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dismiss_by_filter_with_test_mode_selects_the_test_mode_failures, setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dismiss_by_filter_with_nothing_matching_says_there_is_nothing_to_dismiss,
	                setup, daemon_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
