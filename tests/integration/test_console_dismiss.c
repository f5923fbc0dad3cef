/* test_console_dismiss.c: the console's events list over real HTTP on the
 * real daemon's admin listener: filters that cannot all hold are said to
 * conflict rather than shown as an empty list, and the bulk dismiss of the
 * list's filters needs the count it showed, a reason, the operator role and
 * the CSRF token, and is audited per event as the single dismiss is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "console_client.h"
#include "fixtures.h"
#include "harness.h"

static void t_stop(struct daemon *d)
{
	assert_int_equal(daemon_term(d, 30), 0);
	daemon_finish(d);
}

/* A payment for an order that does not exist: failed (unknown_order). */
static int64_t t_unknown(struct daemon *d, const char *key)
{
	assert_int_equal(fx_stripe_pay(d, key, "ord_bulk_nosuch00000000001", 500, "usd"), 200);
	return fx_db_int(d, "SELECT id FROM events WHERE idem_key = '%s'", key);
}

/* The same from Stripe's test mode ("livemode":false). */
static void t_unknown_test_mode(struct daemon *d, const char *key)
{
	char *body = fx_stripe_payment(key, "ord_bulk_sandbox0000000001", 500, "usd");
	char *live = strstr(body, "\"livemode\":true");

	assert_non_null(live);
	memmove(live + strlen("\"livemode\":false"), live + strlen("\"livemode\":true"),
	        strlen(live + strlen("\"livemode\":true")) + 1);
	memcpy(live, "\"livemode\":false", strlen("\"livemode\":false"));
	assert_int_equal(fx_stripe_send(d, body, NULL), 200);
	free(body);
}

/* The value of the hidden field name on page, &amp; undone, percent-encoded
 * for a form body into out. */
static void t_field(const char *page, const char *name, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	char want[100];
	const char *p;
	size_t o = 0;

	snprintf(want, sizeof(want), "name=\"%s\" value=\"", name);
	p = strstr(page, want);
	if (p == NULL) {
		fail_msg("no field %s on the page", name);
	}
	for (p += strlen(want); *p != '"' && o + 4 < size; p++) {
		unsigned char c = (unsigned char)*p;

		if (strncmp(p, "&amp;", 5) == 0) {
			c = '&';
			p += 4;
		}
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-') {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	assert_int_equal(*p, '"');
	out[o] = '\0';
}

static void test_the_events_list_says_when_its_filters_cannot_all_hold(void **state)
{
	static const char *const conflicting[] = {
	        "/console/events?open=1&test=1",
	        "/console/events?open=1&dismissed=1",
	        "/console/events?open=1&outcome=done",
	        "/console/events?since=2026-12-05&until=2026-12-04",
	        /* not understood: left out, they listed more than was asked */
	        "/console/events?since=yesterday",
	        "/console/events?test=yes",
	};
	struct daemon d;
	struct t_session s;
	struct hres r;
	size_t i;

	(void)state;
	t_start(&d, NULL);
	t_unknown(&d, "evt_conflict_live");
	t_unknown_test_mode(&d, "evt_conflict_sandbox");
	t_login(&d, T_OP_TOKEN, &s);
	for (i = 0; i < sizeof(conflicting) / sizeof(conflicting[0]); i++) {
		assert_int_equal(t_get(&d, conflicting[i], &s, &r), 200);
		if (strstr(r.hs_body, "id=\"filters-conflict\"") == NULL) {
			fail_msg("%s: no word of the filters' conflict", conflicting[i]);
		}
		assert_non_null(strstr(r.hs_body, "No event can match"));
		assert_non_null(strstr(r.hs_body, "no events: the filters above cannot match any"));
		assert_null(strstr(r.hs_body, "evt_conflict_"));
		assert_null(strstr(r.hs_body, "id=\"dismiss-all\""));
		hres_finish(&r);
	}
	assert_int_equal(t_get(&d, "/console/events?open=1&test=1", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "open failures are live events, and test mode = 1"));
	hres_finish(&r);
	/* the failed test-mode event is there, under filters that can hold */
	assert_int_equal(t_get(&d, "/console/events?outcome=failed&test=1", &s, &r), 200);
	assert_null(strstr(r.hs_body, "filters-conflict"));
	assert_non_null(strstr(r.hs_body, "evt_conflict_sandbox"));
	assert_null(strstr(r.hs_body, "evt_conflict_live"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/events?open=1", &s, &r), 200);
	assert_null(strstr(r.hs_body, "filters-conflict"));
	assert_non_null(strstr(r.hs_body, "evt_conflict_live"));
	hres_finish(&r);
	t_stop(&d);
}

static void test_bulk_dismiss_takes_the_lists_filters_and_needs_the_count_it_showed(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct hres post;
	char order[64];
	char list[300];
	char form[600];
	char *loc;
	int64_t a;
	int64_t b;

	(void)state;
	t_start(&d, NULL);
	fx_order(&d, 700, "usd", order);
	assert_int_equal(fx_stripe_pay(&d, "evt_bulk_applied", order, 700, "usd"), 200);
	a = t_unknown(&d, "evt_bulk_1");
	b = t_unknown(&d, "evt_bulk_2");
	t_unknown_test_mode(&d, "evt_bulk_sandbox");
	t_login(&d, T_OP_TOKEN, &s);

	/* the list of failed stripe events offers to dismiss the 2 live ones */
	assert_int_equal(t_get(&d, "/console/events?provider=stripe&outcome=failed", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "id=\"dismiss-all\">Dismiss 2 open failed event(s)"));
	assert_non_null(strstr(r.hs_body, "name=\"expect\" value=\"2\""));
	t_field(r.hs_body, "list", list, sizeof(list));
	assert_string_equal(list, "provider%3Dstripe%26outcome%3Dfailed");
	hres_finish(&r);

	/* a count that is not the count: nothing, and the page with the new one */
	snprintf(form, sizeof(form), "csrf=%s&list=%s&expect=3&reason=sandbox+orders", s.ts_csrf,
	         list);
	assert_int_equal(t_post(&d, "/console/events/dismiss", &s, form, &r), 409);
	assert_non_null(strstr(r.hs_body, "2 open failed event(s) match these filters now, not "
	                                  "the 3 you confirmed: nothing dismissed"));
	assert_non_null(strstr(r.hs_body, "name=\"expect\" value=\"2\""));
	hres_finish(&r);
	/* no reason: nothing */
	snprintf(form, sizeof(form), "csrf=%s&list=%s&expect=2&reason=", s.ts_csrf, list);
	assert_int_equal(t_post(&d, "/console/events/dismiss", &s, form, &r), 409);
	assert_non_null(strstr(r.hs_body, "A reason is required"));
	hres_finish(&r);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 0);
	fx_assert_audit(&d, 2,
	                "action = 'events.dismiss' AND actor = 'console:alice' AND target = "
	                "'events?provider=stripe&outcome=failed' AND result LIKE 'refused: %%'");
	/* each with why it was refused as its reason */
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND reason LIKE '2 open failed event(s) match"
	                " these filters now, not the 3 you confirmed%%'");
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND reason LIKE 'A reason is required%%'");

	/* the count confirmed: dismissed, then Post/Redirect/Get to the list */
	snprintf(form, sizeof(form), "csrf=%s&list=%s&expect=2&reason=sandbox+orders", s.ts_csrf,
	         list);
	assert_int_equal(t_post(&d, "/console/events/dismiss", &s, form, &post), 303);
	loc = hres_header(&post, "Location");
	assert_non_null(loc);
	assert_string_equal(loc, "/console/events?provider=stripe&outcome=failed");
	hres_finish(&post);
	assert_int_equal(t_get(&d, loc, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "2 event(s) dismissed."));
	/* nothing left to take: no form */
	assert_null(strstr(r.hs_body, "id=\"dismiss-all\""));
	hres_finish(&r);
	/* shown once: a reload neither shows it again nor sends anything */
	assert_int_equal(t_get(&d, loc, &s, &r), 200);
	assert_null(strstr(r.hs_body, "event(s) dismissed"));
	hres_finish(&r);
	free(loc);

	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL AND "
	                           "dismissed_by = 'console:alice' AND dismiss_reason = "
	                           "'sandbox orders' AND id IN (%lld, %lld)",
	                           (long long)a, (long long)b),
	                 2);
	/* the test-mode one and the applied one were not selected */
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 2);
	/* audited as the single dismiss is: one row per event, with the reason */
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:%lld' AND reason = "
	                "'sandbox orders' AND result = 'ok' AND actor = 'console:alice'",
	                (long long)a);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:%lld' AND reason = "
	                "'sandbox orders' AND result = 'ok'",
	                (long long)b);
	/* the same form once more: the count is now 0, nothing to dismiss */
	assert_int_equal(t_post(&d, "/console/events/dismiss", &s, form, &r), 409);
	assert_non_null(strstr(r.hs_body, "No open failed event(s) match these filters now"));
	hres_finish(&r);
	t_stop(&d);
}

/* A bulk dismiss whose filters make the list's URL longer than a page's
 * usual URL (a key prefix of colons, each %3A): the message still waits
 * for that URL, and is shown there once. */
/* The milliseconds GET url (the admin listener's /metrics, or a console
 * page as s) took; its answer in r. */
static int64_t t_timed_get(struct daemon *d, const char *path, const struct t_session *s,
                           struct hres *r)
{
	int64_t t0 = hn_now_ms();
	char url[256];

	if (s != NULL) {
		t_get(d, path, s, r);
	} else {
		snprintf(url, sizeof(url), "%s%s", d->dm_admin_base, path);
		assert_int_equal(hn_http("GET", url, NULL, NULL, 0, r), 0);
	}
	return hn_now_ms() - t0;
}

/* A bulk dismiss stuck on a database whose write lock another process
 * holds (a slow database, as a huge dismiss on a slow disk is) does not
 * take the pages' and the scrape's reads with it: the database still
 * answers reads, so the events list and /metrics still show its figures
 * while the write waits. */
static void test_a_stuck_bulk_dismiss_leaves_pages_and_metrics_their_database_figures(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct hn_sqlite lock;
	char form[600];
	int64_t ms;

	(void)state;
	t_start(&d, NULL);
	if (d.dm_pg_db[0] != '\0') {
		/* the lock held is SQLite's (a second process on the file);
		 * the store's threads are the same on PostgreSQL */
		t_stop(&d);
		skip();
	}
	t_unknown(&d, "evt_stuck_1");
	t_unknown(&d, "evt_stuck_2");
	t_login(&d, T_OP_TOKEN, &s);
	/* before: the scrape reads the database */
	t_timed_get(&d, "/metrics", NULL, &r);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "\nidemhook_store_readable 1\n"));
	hres_finish(&r);

	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	snprintf(form, sizeof(form),
	         "csrf=%s&list=outcome%%3Dfailed&expect=2&reason=stuck+behind+a+lock", s.ts_csrf);
	ms = hn_now_ms();
	assert_int_equal(t_post(&d, "/console/events/dismiss", &s, form, &r), 503);
	ms = hn_now_ms() - ms;
	print_message("the dismiss answered 503 in %lld ms\n", (long long)ms);
	hres_finish(&r);
	/* while it waits for the lock */
	ms = t_timed_get(&d, "/metrics", NULL, &r);
	print_message("/metrics: %lld ms, readable %s\n", (long long)ms,
	              strstr(r.hs_body, "\nidemhook_store_readable 1\n") != NULL ? "1" : "0");
	assert_non_null(strstr(r.hs_body, "\nidemhook_store_readable 1\n"));
	assert_non_null(strstr(r.hs_body, "\nidemhook_events_failed_open 2\n"));
	hres_finish(&r);
	ms = t_timed_get(&d, "/console/events?outcome=failed", &s, &r);
	print_message("/console/events: %lld ms, status %ld\n", (long long)ms, r.hs_status);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "evt_stuck_1"));
	hres_finish(&r);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	t_stop(&d);
}

/* A psql session on the daemon's PostgreSQL database (dm_db is
 * "postgresql:" and its conninfo), for holding a lock: t_psql_run waits
 * until the server has run the SQL. */
struct t_psql {
	pid_t tp_pid;
	FILE *tp_in;
	FILE *tp_out;
};

static void t_psql_start(struct t_psql *p, const struct daemon *d)
{
	int in[2];
	int out[2];

	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	p->tp_pid = fork();
	assert_true(p->tp_pid >= 0);
	if (p->tp_pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execlp("psql", "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d",
		       d->dm_db + strlen("postgresql:"), (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->tp_in = fdopen(in[1], "w");
	p->tp_out = fdopen(out[0], "r");
	assert_non_null(p->tp_in);
	assert_non_null(p->tp_out);
}

static void t_psql_run(struct t_psql *p, const char *sql)
{
	char line[256];

	fprintf(p->tp_in, "%s\n\\echo t_psql_done\n", sql);
	assert_int_equal(fflush(p->tp_in), 0);
	while (fgets(line, sizeof(line), p->tp_out) != NULL) {
		if (strcmp(line, "t_psql_done\n") == 0) {
			return;
		}
	}
	fail_msg("psql ended before running: %s", sql);
}

static void t_psql_finish(struct t_psql *p)
{
	int status;

	fclose(p->tp_in);
	fclose(p->tp_out);
	assert_int_equal(waitpid(p->tp_pid, &status, 0), p->tp_pid);
}

/* A console page whose read waits on a table another session has locked
 * (PostgreSQL) does not take /metrics with it: the scrape reads its
 * gauges (other tables) on a thread of its own, and shows them. */
static void test_a_console_read_stuck_on_a_lock_leaves_metrics_their_figures(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct t_psql lock;
	int64_t ms;

	(void)state;
	t_start(&d, NULL);
	if (d.dm_pg_db[0] == '\0') {
		/* SQLite's reads wait on no lock (WAL): nothing to hold them */
		t_stop(&d);
		skip();
	}
	t_unknown(&d, "evt_scrape_1");
	t_login(&d, T_OP_TOKEN, &s);
	t_psql_start(&lock, &d);
	t_psql_run(&lock, "BEGIN; LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE;");
	/* the audit log's page waits on the lock, and gives up */
	ms = t_timed_get(&d, "/console/audit", &s, &r);
	print_message("/console/audit: %lld ms, status %ld\n", (long long)ms, r.hs_status);
	assert_int_equal(r.hs_status, 503);
	hres_finish(&r);
	/* while its read still waits */
	ms = t_timed_get(&d, "/metrics", NULL, &r);
	print_message("/metrics: %lld ms, readable %s\n", (long long)ms,
	              strstr(r.hs_body, "\nidemhook_store_readable 1\n") != NULL ? "1" : "0");
	assert_non_null(strstr(r.hs_body, "\nidemhook_store_readable 1\n"));
	assert_non_null(strstr(r.hs_body, "\nidemhook_events_failed_open 1\n"));
	hres_finish(&r);
	t_psql_run(&lock, "ROLLBACK;");
	t_psql_finish(&lock);
	t_stop(&d);
}

static void test_bulk_dismiss_with_long_filters_still_says_what_it_did(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct hres post;
	char key[300];
	char url[1200];
	char list[3000];
	char form[3400];
	char *loc;
	size_t i;

	(void)state;
	t_start(&d, NULL);
	snprintf(key, sizeof(key), "evt_bulk_long_");
	for (i = strlen(key); i < 250; i++) {
		key[i] = ':';
	}
	key[i] = '\0';
	t_unknown(&d, key);
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(url, sizeof(url), "/console/events?open=1&key=evt_bulk_long_");
	for (i = strlen("evt_bulk_long_"); i < strlen(key); i++) {
		strcat(url, "%3A");
	}
	assert_true(strlen(url) > 700);
	assert_int_equal(t_get(&d, url, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "id=\"dismiss-all\">Dismiss 1 open failed event(s)"));
	t_field(r.hs_body, "list", list, sizeof(list));
	hres_finish(&r);
	snprintf(form, sizeof(form), "csrf=%s&list=%s&expect=1&reason=long+filters", s.ts_csrf,
	         list);
	assert_int_equal(t_post(&d, "/console/events/dismiss", &s, form, &post), 303);
	loc = hres_header(&post, "Location");
	hres_finish(&post);
	assert_non_null(loc);
	assert_true(strlen(loc) > 700);
	assert_int_equal(t_get(&d, loc, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "1 event(s) dismissed."));
	hres_finish(&r);
	/* once */
	assert_int_equal(t_get(&d, loc, &s, &r), 200);
	assert_null(strstr(r.hs_body, "event(s) dismissed"));
	hres_finish(&r);
	free(loc);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 1);
	t_stop(&d);
}

static void test_bulk_dismiss_needs_the_operator_role_and_the_csrf_token(void **state)
{
	struct daemon d;
	struct t_session op;
	struct t_session ro;
	struct hres r;
	char form[400];

	(void)state;
	t_start(&d, NULL);
	t_unknown(&d, "evt_bulk_ro_1");
	t_login(&d, T_OP_TOKEN, &op);
	t_login(&d, T_RO_TOKEN, &ro);
	/* a read-only session sees the list, not the form */
	assert_int_equal(t_get(&d, "/console/events?open=1", &ro, &r), 200);
	assert_non_null(strstr(r.hs_body, "evt_bulk_ro_1"));
	assert_null(strstr(r.hs_body, "id=\"dismiss-all\""));
	hres_finish(&r);
	snprintf(form, sizeof(form), "csrf=%s&list=open%%3D1&expect=1&reason=x", ro.ts_csrf);
	assert_int_equal(t_post(&d, "/console/events/dismiss", &ro, form, &r), 403);
	hres_finish(&r);
	/* an operator's form without its token, or with another session's */
	assert_int_equal(
	        t_post(&d, "/console/events/dismiss", &op, "list=open%3D1&expect=1&reason=x", &r),
	        403);
	hres_finish(&r);
	assert_int_equal(t_post(&d, "/console/events/dismiss", &op, form, &r), 403);
	hres_finish(&r);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 0);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND actor = 'console:bob' AND target = "
	                "'events?open=1' AND result = 'refused: this session is read-only'");
	fx_assert_audit(&d, 2,
	                "action = 'events.dismiss' AND actor = 'console:alice' AND result = "
	                "'refused: missing or wrong CSRF token' AND reason = 'missing or wrong CSRF"
	                " token'");
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND actor = 'console:bob' AND reason = 'this"
	                " session is read-only'");
	t_stop(&d);
}

/* A reason is counted in characters, not bytes (the form's maxlength and
 * console_db_reason_ok): 300 characters of Chinese, 900 bytes, are a valid
 * reason, and the dismissal, recorded in its own transaction, is recorded
 * once, as is the second one's refusal. */
static void test_a_dismissal_with_a_long_chinese_reason_is_audited_once(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[64];
	char *form;
	size_t n = 0;
	int64_t id;
	int i;

	(void)state;
	t_start(&d, NULL);
	id = t_unknown(&d, "evt_dismiss_chinese_reason");
	t_login(&d, T_OP_TOKEN, &s);
	form = malloc(4096);
	assert_non_null(form);
	n += (size_t)snprintf(form, 4096, "csrf=%s&reason=", s.ts_csrf);
	for (i = 0; i < 300; i++) {
		n += (size_t)snprintf(form + n, 4096 - n, "%%E4%%B8%%AD"); /* U+4E2D */
	}
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", (long long)id);
	assert_int_equal(t_post(&d, path, &s, form, &r), 303);
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM events WHERE id = %lld AND "
	                           "length(dismiss_reason) = 300",
	                           (long long)id),
	                 1);
	fx_assert_audit(&d, 1, "action = 'events.dismiss' AND target = 'event:%lld'",
	                (long long)id);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:%lld' AND result = 'ok' "
	                "AND length(reason) = 300",
	                (long long)id);
	/* the same form again: refused, and that recorded once too */
	assert_int_equal(t_post(&d, path, &s, form, &r), 409);
	hres_finish(&r);
	fx_assert_audit(&d, 2, "action = 'events.dismiss' AND target = 'event:%lld'",
	                (long long)id);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:%lld' AND result LIKE "
	                "'refused: event %lld was dismissed already%%'",
	                (long long)id, (long long)id);
	free(form);
	t_stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_the_events_list_says_when_its_filters_cannot_all_hold),
	        cmocka_unit_test(
	                test_a_stuck_bulk_dismiss_leaves_pages_and_metrics_their_database_figures),
	        cmocka_unit_test(test_a_console_read_stuck_on_a_lock_leaves_metrics_their_figures),
	        cmocka_unit_test(
	                test_bulk_dismiss_takes_the_lists_filters_and_needs_the_count_it_showed),
	        cmocka_unit_test(test_bulk_dismiss_with_long_filters_still_says_what_it_did),
	        cmocka_unit_test(test_bulk_dismiss_needs_the_operator_role_and_the_csrf_token),
	        cmocka_unit_test(test_a_dismissal_with_a_long_chinese_reason_is_audited_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
