/* test_console.c: the operator console over real HTTP on the real daemon's
 * admin listener: no page without a session, the login and its cookie, the
 * failed-login limit, roles, CSRF, the security headers, hostile payloads
 * shown as text, and each action checked in the database and the audit log. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "console_client.h"
#include "fixtures.h"
#include "harness.h"
#include "peer.h"

/* The pages a session may GET. */
static const char *const t_pages[] = {
        "/console/",
        "/console/events",
        "/console/events?outcome=failed",
        "/console/outbox",
        "/console/outbox?status=dead",
        "/console/rejected",
        "/console/audit",
        "/console/orders/ord_none",
};

/* An action carried out answers 303 to the page it concerns (Post/Redirect/
 * Get): asserts it in post (finished here) and GETs that page into r. */
static long t_follow(struct daemon *d, struct hres *post, const char *location,
                     const struct t_session *s, struct hres *r)
{
	char *loc;

	assert_int_equal(post->hs_status, 303);
	loc = hres_header(post, "Location");
	assert_non_null(loc);
	assert_string_equal(loc, location);
	hres_finish(post);
	assert_int_equal(t_get(d, loc, s, r), 200);
	free(loc);
	return r->hs_status;
}

/* POSTs form to path as s, an action that is carried out: t_follow to
 * location, whose page lands in r. */
static long t_act(struct daemon *d, const char *path, const struct t_session *s, const char *form,
                  const char *location, struct hres *r)
{
	struct hres post;

	assert_int_equal(t_post(d, path, s, form, &post), 303);
	return t_follow(d, &post, location, s, r);
}

static int64_t t_unknown_event(struct daemon *d, const char *key)
{
	assert_int_equal(fx_stripe_pay(d, key, "ord_console_nosuch0000001", 900, "usd"), 200);
	return fx_db_int(d, "SELECT id FROM events WHERE idem_key = '%s'", key);
}

/* Starts d with a Stripe instance "rec" whose API is api (the key in the
 * environment, as an operator would give it), and rec_ini (a [reconcile]
 * section, or NULL for its defaults). */
static void t_start_rec(struct daemon *d, const struct peer *api, const char *rec_ini)
{
	struct buf extra;

	setenv("T_CONSOLE_REC_KEY", "rk_test_console_rec", 1);
	buf_init(&extra, 0);
	buf_printf(&extra,
	           "\n[provider rec]\ntype = stripe\nsecret = " FX_STRIPE_SECRET
	           "\napi_key = env:T_CONSOLE_REC_KEY\napi_base_url = %s\n%s",
	           peer_base(api), rec_ini != NULL ? rec_ini : "");
	t_start(d, extra.buf_data);
	buf_finish(&extra);
}

static void test_without_a_session_pages_redirect_to_login_and_actions_get_401(void **state)
{
	struct daemon d;
	struct hres r;
	char *loc;
	size_t i;

	(void)state;
	t_start(&d, NULL);
	for (i = 0; i < sizeof(t_pages) / sizeof(t_pages[0]); i++) {
		assert_int_equal(t_get(&d, t_pages[i], NULL, &r), 303);
		loc = hres_header(&r, "Location");
		assert_non_null(loc);
		assert_string_equal(loc, "/console/login");
		free(loc);
		hres_finish(&r);
	}
	assert_int_equal(t_post(&d, "/console/events/1/dismiss", NULL, "reason=x&csrf=x", &r), 401);
	hres_finish(&r);
	assert_int_equal(t_post(&d, "/console/outbox/1/retry", NULL, "csrf=x", &r), 401);
	hres_finish(&r);
	/* a made-up session id is no session */
	{
		struct t_session fake = {.ts_cookie = "Cookie: idemhook_console="
		                                      "00000000000000000000000000000000000000000000"
		                                      "00000000000000000000"};

		assert_int_equal(t_get(&d, "/console/events", &fake, &r), 303);
		hres_finish(&r);
	}
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_login_cookie_is_strict_and_every_page_has_the_security_headers(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char form[100];
	char *v;
	size_t i;

	(void)state;
	t_start(&d, NULL);
	snprintf(form, sizeof(form), "token=%s", T_OP_TOKEN);
	assert_int_equal(t_post(&d, "/console/login", NULL, form, &r), 303);
	v = hres_header(&r, "Set-Cookie");
	assert_non_null(v);
	assert_non_null(strstr(v, "idemhook_console="));
	assert_non_null(strstr(v, "; HttpOnly"));
	assert_non_null(strstr(v, "; SameSite=Strict"));
	assert_non_null(strstr(v, "; Path=/console"));
	assert_non_null(strstr(v, "; Max-Age=28800"));
	assert_null(strstr(v, "Secure")); /* plain HTTP on loopback */
	free(v);
	hres_finish(&r);
	t_login(&d, T_OP_TOKEN, &s);
	for (i = 0; i < sizeof(t_pages) / sizeof(t_pages[0]); i++) {
		assert_int_equal(t_get(&d, t_pages[i], &s, &r), 200);
		v = hres_header(&r, "Content-Security-Policy");
		assert_non_null(v);
		assert_non_null(strstr(v, "default-src 'none'"));
		assert_non_null(strstr(v, "frame-ancestors 'none'"));
		assert_null(strstr(v, "unsafe-inline"));
		free(v);
		v = hres_header(&r, "X-Frame-Options");
		assert_non_null(v);
		assert_string_equal(v, "DENY");
		free(v);
		hres_finish(&r);
	}
	/* the login form and the assets carry them too */
	assert_int_equal(t_get(&d, "/console/login", NULL, &r), 200);
	v = hres_header(&r, "Content-Security-Policy");
	assert_non_null(v);
	free(v);
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/console.css", NULL, &r), 200);
	hres_finish(&r);
	/* the assets are GET and HEAD only (hn_http cannot send a HEAD) */
	{
		static const char *const methods[] = {"PUT", "DELETE", "TRACE", "OPTIONS", "POST"};
		static const char *const assets[] = {"/console/console.css", "/console/console.js"};
		char url[256];
		size_t m;
		size_t k;

		for (k = 0; k < 2; k++) {
			snprintf(url, sizeof(url), "%s%s", d.dm_admin_base, assets[k]);
			for (m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
				assert_int_equal(hn_http(methods[m], url, NULL, NULL, 0, &r), 0);
				assert_int_equal(r.hs_status, 405);
				v = hres_header(&r, "Allow");
				assert_non_null(v);
				assert_string_equal(v, "GET, HEAD");
				free(v);
				hres_finish(&r);
			}
		}
	}
	fx_assert_audit(&d, 2, "action = 'console.login' AND actor = 'console:alice'");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_failed_logins_are_limited_per_address_even_for_the_right_token(void **state)
{
	struct daemon d;
	struct hres r;
	char form[100];
	int i;

	(void)state;
	t_start(&d, "login_failures = 3\n");
	for (i = 0; i < 3; i++) {
		assert_int_equal(t_post(&d, "/console/login", NULL, "token=wrong-token-guess", &r),
		                 401);
		assert_null(hres_header(&r, "Set-Cookie"));
		hres_finish(&r);
	}
	snprintf(form, sizeof(form), "token=%s", T_OP_TOKEN);
	assert_int_equal(t_post(&d, "/console/login", NULL, form, &r), 429);
	assert_null(hres_header(&r, "Set-Cookie"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* POSTs a login with the operator's token and extra headers (NULL-ended). */
static long t_login_from(struct daemon *d, const char *h1, const char *h2, struct hres *r)
{
	const char *h[] = {"Content-Type: application/x-www-form-urlencoded", h1, h2, NULL};
	const char form[] = "token=" T_OP_TOKEN;
	char url[512];

	snprintf(url, sizeof(url), "%s/console/login", d->dm_admin_base);
	assert_int_equal(hn_http("POST", url, h, form, strlen(form), r), 0);
	return r->hs_status;
}

/* Another site's page can neither log a browser in (into the attacker's
 * own session) nor lock the login with failed attempts: a login the
 * browser marks cross-site is refused (403) before the token is looked at,
 * and does not count as a failed login. */
static void test_a_login_sent_from_another_site_is_refused_and_not_counted(void **state)
{
	static const char *const foreign[][2] = {
	        {"Sec-Fetch-Site: cross-site", NULL},
	        {"Sec-Fetch-Site: same-site", NULL},
	        {"Origin: https://evil.example", NULL},
	        {"Origin: null", NULL},
	        {"Origin: http://127.0.0.1:1", NULL},
	        {"Origin: https://ops.example.com", "Host: ops.example.com.evil.example"},
	};
	const char *h[] = {"Content-Type: application/x-www-form-urlencoded",
	                   "Sec-Fetch-Site: cross-site", NULL};
	struct daemon d;
	struct hres r;
	char origin[200];
	char url[512];
	size_t i;
	int k;

	(void)state;
	t_start(&d, "login_failures = 2\n");
	for (i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
		assert_int_equal(t_login_from(&d, foreign[i][0], foreign[i][1], &r), 403);
		assert_null(hres_header(&r, "Set-Cookie"));
		assert_non_null(strstr(r.hs_body, "not sent from the console"));
		hres_finish(&r);
	}
	/* five wrong tokens from another site's page lock nothing */
	snprintf(url, sizeof(url), "%s/console/login", d.dm_admin_base);
	for (k = 0; k < 5; k++) {
		assert_int_equal(hn_http("POST", url, h, "token=wrong", 11, &r), 0);
		assert_int_equal(r.hs_status, 403);
		hres_finish(&r);
	}
	/* the console's own form: same-origin, or its Origin is the Host */
	assert_int_equal(t_login_from(&d, "Sec-Fetch-Site: same-origin", NULL, &r), 303);
	hres_finish(&r);
	snprintf(origin, sizeof(origin), "Origin: %s", d.dm_admin_base);
	assert_int_equal(t_login_from(&d, origin, NULL, &r), 303);
	hres_finish(&r);
	/* behind a TLS proxy that passes the browser's Host on */
	assert_int_equal(
	        t_login_from(&d, "Origin: https://ops.example.com", "Host: ops.example.com", &r),
	        303);
	hres_finish(&r);
	assert_int_equal(t_login_from(&d, "Origin: https://ops.example.com",
	                              "Host: ops.example.com:443", &r),
	                 303);
	hres_finish(&r);
	/* a browser's same-origin verdict holds even when the proxy rewrote Host */
	assert_int_equal(t_login_from(&d, "Sec-Fetch-Site: same-origin",
	                              "Origin: https://ops.example.com:8443", &r),
	                 303);
	hres_finish(&r);
	/* none of the refusals counted: two failures still lock the form */
	for (k = 0; k < 2; k++) {
		assert_int_equal(t_post(&d, "/console/login", NULL, "token=wrong-token-guess", &r),
		                 401);
		hres_finish(&r);
	}
	assert_int_equal(t_login_from(&d, "Sec-Fetch-Site: same-origin", NULL, &r), 429);
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_a_session_ends_at_its_expiry(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[200];
	char form[200];
	long long id;

	(void)state;
	t_start(&d, "session_ttl = 2s\n");
	id = (long long)t_unknown_event(&d, "evt_console_expired_session");
	t_login(&d, T_OP_TOKEN, &s);
	assert_int_equal(t_get(&d, "/console/events", &s, &r), 200);
	hres_finish(&r);
	sleep(3);
	assert_int_equal(t_get(&d, "/console/events", &s, &r), 303);
	hres_finish(&r);
	/* A form sent after the session ended (filled in too slowly) is
	 * refused and changes nothing; the operator is told so and what to
	 * do, and the log (no one to record in the audit log) says it. */
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", id);
	snprintf(form, sizeof(form), "csrf=%s&reason=sandbox", s.ts_csrf);
	assert_int_equal(t_post(&d, path, &s, form, &r), 401);
	assert_non_null(strstr(r.hs_body, "no live session"));
	assert_non_null(strstr(r.hs_body, "nothing was done: log in again at /console/login"));
	hres_finish(&r);
	snprintf(path, sizeof(path),
	         "console: POST \"/console/events/%lld/dismiss\" from 127.0.0.1 refused: no live "
	         "session",
	         id);
	assert_int_equal(daemon_log_wait(&d, path, 5000), 0);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 0);
	fx_assert_audit(&d, 0, "action = 'events.dismiss'");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* Writes carol's token file (0600) in d's directory. */
static void t_carol_token(struct daemon *d, const char *secret)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/carol.token", d->dm_dir);
	assert_int_equal(daemon_write_file(d, "carol.token", secret), 0);
	assert_int_equal(chmod(path, 0600), 0);
}

/* A leaked token is locked out by changing its secret and reloading: the
 * sessions opened with the old secret end with it, others stay. */
static void test_a_changed_secret_ends_the_sessions_opened_with_the_old_one(void **state)
{
	struct daemon d;
	struct t_session carol;
	struct t_session alice;
	struct hres r;

	(void)state;
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI T_CONSOLE), 0);
	t_carol_token(&d, "carol-first-secret-0123456789");
	fx_append_config(&d, "token = carol operator file:%s/carol.token\n", d.dm_dir);
	assert_int_equal(daemon_start(&d), 0);
	t_login(&d, "carol-first-secret-0123456789", &carol);
	t_login(&d, T_OP_TOKEN, &alice);
	assert_int_equal(t_get(&d, "/console/events", &carol, &r), 200);
	hres_finish(&r);

	t_carol_token(&d, "carol-second-secret-0123456789");
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	/* the old secret's session is gone; a POST with it is refused too */
	assert_int_equal(t_get(&d, "/console/events", &carol, &r), 303);
	hres_finish(&r);
	assert_int_equal(t_post(&d, "/console/outbox/1/retry", &carol, "csrf=x", &r), 401);
	hres_finish(&r);
	/* another token's session stays */
	assert_int_equal(t_get(&d, "/console/events", &alice, &r), 200);
	hres_finish(&r);
	/* the old secret no longer logs in; the new one does */
	assert_int_equal(
	        t_post(&d, "/console/login", NULL, "token=carol-first-secret-0123456789", &r), 401);
	hres_finish(&r);
	t_login(&d, "carol-second-secret-0123456789", &carol);
	assert_int_equal(t_get(&d, "/console/events", &carol, &r), 200);
	hres_finish(&r);
	/* a reload that changes nothing keeps the sessions */
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	usleep(500 * 1000);
	assert_int_equal(t_get(&d, "/console/events", &carol, &r), 200);
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_read_only_sessions_get_403_on_every_action_and_nothing_changes(void **state)
{
	static const char *const actions[] = {"/dismiss",
	                                      "/reprocess",
	                                      "/console/outbox/1/retry",
	                                      "/console/outbox/1/cancel",
	                                      "/console/outbox/1/compensate",
	                                      "/console/outbox/retry-all",
	                                      "/console/reconcile"};
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[128];
	char form[200];
	long long id;
	size_t i;

	(void)state;
	t_start(&d, NULL);
	id = (long long)t_unknown_event(&d, "evt_console_ro");
	t_login(&d, T_RO_TOKEN, &s);
	/* the pages show no action forms */
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_null(strstr(r.hs_body, "/dismiss\""));
	hres_finish(&r);
	for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
		if (actions[i][1] == 'c') {
			snprintf(path, sizeof(path), "%s", actions[i]);
		} else {
			snprintf(path, sizeof(path), "/console/events/%lld%s", id, actions[i]);
		}
		snprintf(form, sizeof(form), "csrf=%s&reason=test&status=dead&expect=0&order=x",
		         s.ts_csrf);
		assert_int_equal(t_post(&d, path, &s, form, &r), 403);
		hres_finish(&r);
	}
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"
	                               " OR reprocessed > 0"),
	                 0);
	/* each refusal is in the audit log, as bob's, with the action and target */
	fx_assert_audit(&d, 7, "action <> 'console.login'");
	fx_assert_audit(&d, 7,
	                "actor = 'console:bob' AND result = 'refused: this session is read-only'");
	/* and why it was refused is its reason */
	fx_assert_audit(&d, 7, "actor = 'console:bob' AND reason = 'this session is read-only'");
	fx_assert_audit(&d, 1, "action = 'events.dismiss' AND target = 'event:%lld'", id);
	fx_assert_audit(&d, 1, "action = 'outbox.compensate' AND target = 'outbox:1'");
	fx_assert_audit(&d, 1, "action = 'outbox.retry_all' AND target = 'outbox?status=dead'");
	fx_assert_audit(&d, 1, "action = 'order.reconcile' AND target = 'order:x'");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_an_action_without_or_with_a_wrong_csrf_token_changes_nothing(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[128];
	char form[200];
	long long id;

	(void)state;
	t_start(&d, NULL);
	id = (long long)t_unknown_event(&d, "evt_console_csrf");
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", id);
	assert_int_equal(t_post(&d, path, &s, "reason=no+token", &r), 403);
	hres_finish(&r);
	assert_int_equal(t_post(&d, path, &s,
	                        "reason=wrong+token&csrf=0123456789abcdef0123456789abcdef0123456789"
	                        "abcdef0123456789abcdef",
	                        &r),
	                 403);
	hres_finish(&r);
	/* logging out needs it too */
	assert_int_equal(t_post(&d, "/console/logout", &s, "", &r), 403);
	hres_finish(&r);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 0);
	/* both refusals are recorded, why as their reason; the logout is no action */
	fx_assert_audit(&d, 2, "action <> 'console.login'");
	fx_assert_audit(&d, 2,
	                "action = 'events.dismiss' AND target = 'event:%lld' AND result = "
	                "'refused: missing or wrong CSRF token' AND reason = 'missing or wrong CSRF"
	                " token'",
	                id);
	/* refusals found further on too: an unknown event, an unknown outbox row */
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	assert_int_equal(t_post(&d, "/console/events/999999/reprocess", &s, form, &r), 404);
	hres_finish(&r);
	assert_int_equal(t_post(&d, "/console/outbox/999999/retry", &s, form, &r), 404);
	hres_finish(&r);
	fx_assert_audit(&d, 1,
	                "action = 'events.reprocess' AND target = 'event:999999' AND reason = "
	                "'no such event'");
	fx_assert_audit(&d, 1,
	                "action = 'outbox.retry' AND target = 'outbox:999999' AND result LIKE "
	                "'refused: %%' AND 'refused: ' || reason = result");
	fx_assert_audit(&d, 0, "result LIKE 'refused: %%' AND reason IS NULL");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_dismiss_and_reprocess_from_the_console_are_applied_and_audited(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres post;
	struct hres r;
	char path[128];
	char form[200];
	long long id;
	long long other;

	(void)state;
	t_start(&d, NULL);
	id = (long long)t_unknown_event(&d, "evt_console_dismiss");
	other = (long long)t_unknown_event(&d, "evt_console_reprocess");
	t_login(&d, T_OP_TOKEN, &s);
	/* the reason is required */
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", id);
	snprintf(form, sizeof(form), "csrf=%s&reason=", s.ts_csrf);
	assert_int_equal(t_post(&d, path, &s, form, &r), 409);
	hres_finish(&r);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL"), 0);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:%lld' AND result LIKE "
	                "'refused: a reason%%'",
	                id);
	/* an event nobody has: 404, recorded */
	snprintf(form, sizeof(form), "csrf=%s&reason=gone", s.ts_csrf);
	assert_int_equal(t_post(&d, "/console/events/999999/dismiss", &s, form, &r), 404);
	hres_finish(&r);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:999999' AND result LIKE "
	                "'refused:%%'");
	snprintf(form, sizeof(form), "csrf=%s&reason=paid+at+the+till", s.ts_csrf);
	assert_int_equal(t_post(&d, path, &s, form, &post), 303);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	t_follow(&d, &post, path, &s, &r);
	assert_non_null(strstr(r.hs_body, "class=\"flash\" role=\"status\">event"));
	assert_non_null(strstr(r.hs_body, "dismissed"));
	hres_finish(&r);
	/* the message is shown once: reloading the page shows the page alone */
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_null(strstr(r.hs_body, "class=\"flash"));
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM events WHERE id = %lld AND "
	                           "dismissed_by = 'console:alice' AND dismiss_reason = "
	                           "'paid at the till'",
	                           id),
	                 1);
	fx_assert_audit(&d, 1,
	                "actor = 'console:alice' AND action = 'events.dismiss' AND target = "
	                "'event:%lld' AND result = 'ok'",
	                id);
	/* reprocess: the order still does not exist, so it stays failed */
	snprintf(path, sizeof(path), "/console/events/%lld/reprocess", other);
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	assert_int_equal(t_post(&d, path, &s, form, &post), 303);
	snprintf(path, sizeof(path), "/console/events/%lld", other);
	t_follow(&d, &post, path, &s, &r);
	assert_non_null(strstr(r.hs_body, "still failed (unknown_order)"));
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d, "SELECT reprocessed FROM events WHERE id = %lld", other), 1);
	fx_assert_audit(&d, 1,
	                "actor = 'console:alice' AND action = 'events.reprocess' AND target = "
	                "'event:%lld' AND result LIKE 'ok: still failed%%'",
	                other);
	/* the list filters by key prefix and by outcome */
	assert_int_equal(t_get(&d, "/console/events?key=evt_console_dis&outcome=failed", &s, &r),
	                 200);
	assert_non_null(strstr(r.hs_body, ">evt_console_dismiss<"));
	assert_null(strstr(r.hs_body, ">evt_console_reprocess<"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/events?provider=stripe&dismissed=1", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, ">evt_console_dismiss<"));
	assert_null(strstr(r.hs_body, ">evt_console_reprocess<"));
	hres_finish(&r);
	/* both are on the audit page and in `idemhook audit list` */
	assert_int_equal(t_get(&d, "/console/audit", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "paid at the till"));
	assert_non_null(strstr(r.hs_body, "events.reprocess"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_a_hostile_payload_is_shown_as_text(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[128];
	char *body;
	long long id;

	(void)state;
	t_start(&d, NULL);
	body = hn_stripe_event(
	        "evt_console_hostile", "payment_intent.succeeded",
	        "{\"id\":\"pi_x\",\"object\":\"payment_intent\",\"amount\":100,"
	        "\"amount_received\":100,\"currency\":\"usd\",\"status\":\"succeeded\","
	        "\"description\":\"<script>alert(1)</script>\\\"><img src=x "
	        "onerror=alert(2)>\",\"metadata\":{\"order_id\":"
	        "\"<script>alert(3)</script>\"}}");
	assert_int_equal(fx_stripe_send(&d, body, &r), 200);
	hres_finish(&r);
	free(body);
	id = (long long)fx_db_int(&d,
	                          "SELECT id FROM events WHERE idem_key = 'evt_console_hostile'");
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_null(strstr(r.hs_body, "<script>alert"));
	assert_null(strstr(r.hs_body, "<img src=x"));
	assert_non_null(strstr(r.hs_body, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_non_null(strstr(r.hs_body, "&lt;img src=x onerror=alert(2)&gt;"));
	hres_finish(&r);
	/* in the list and the order page (the order id is the hostile text) */
	assert_int_equal(t_get(&d, "/console/events", &s, &r), 200);
	assert_null(strstr(r.hs_body, "<script>alert"));
	assert_non_null(strstr(r.hs_body, "&lt;script&gt;alert(3)&lt;/script&gt;"));
	/* an id with a slash is linked in the query form: %2F in a path is
	 * refused by the listener */
	assert_non_null(
	        strstr(r.hs_body, "/console/orders?id=%3Cscript%3Ealert%283%29%3C%2Fscript%3E"));
	hres_finish(&r);
	assert_int_equal(
	        t_get(&d, "/console/orders?id=%3Cscript%3Ealert(3)%3C%2Fscript%3E", &s, &r), 200);
	assert_null(strstr(r.hs_body, "<script>alert"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/orders/%3Cscript%3Ealert(3)%3C%2Fscript%3E", &s, &r),
	                 400);
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* A Stripe thin event acknowledged and waiting for its full event (the
 * provider's API does not answer here) is listed, filtered and shown as
 * fetching, not as done; an operator can dismiss it with a reason. */
static void test_a_thin_event_waiting_for_its_fetch_shows_as_fetching(void **state)
{
	static const char thin[] =
	        "{\"id\":\"evt_console_thin\",\"object\":\"v2.core.event\",\"type\":"
	        "\"v1.payment_intent.succeeded\",\"created\":\"2026-12-04T08:00:00.000Z\","
	        "\"livemode\":true,\"context\":null,\"related_object\":{\"id\":"
	        "\"pi_console_thin\",\"type\":\"payment_intent\",\"url\":"
	        "\"/v1/payment_intents/pi_console_thin\"}}";
	struct daemon d;
	struct t_session s;
	struct t_session op;
	struct hres post;
	struct hres r;
	char path[128];
	char action[128];
	char form[200];
	long long id;

	(void)state;
	setenv("T_CONSOLE_THIN_KEY", "rk_test_console_thin", 1);
	/* Nothing listens on port 1: every fetch fails and is retried later. */
	t_start(&d, "\n[provider thin]\ntype = stripe\nsecret = " FX_STRIPE_SECRET
	            "\napi_key = env:T_CONSOLE_THIN_KEY\napi_base_url = http://127.0.0.1:1\n");
	assert_int_equal(hn_post_stripe(&d, "thin", FX_STRIPE_SECRET, thin, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	id = (long long)fx_db_int(&d, "SELECT id FROM events WHERE idem_key = 'evt_console_thin'"
	                              " AND outcome = 'done' AND effect = 'to_fetch'");
	t_login(&d, T_RO_TOKEN, &s);
	assert_int_equal(t_get(&d, "/console/events?outcome=fetching", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "evt_console_thin"));
	assert_non_null(strstr(r.hs_body, "class=\"warn\">fetching<"));
	assert_non_null(strstr(r.hs_body, "<option selected>fetching</option>"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/events?outcome=done", &s, &r), 200);
	assert_null(strstr(r.hs_body, "evt_console_thin"));
	hres_finish(&r);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "fetching (a thin event"));
	/* a read-only session has no actions */
	assert_null(strstr(r.hs_body, "id=\"dismiss\""));
	hres_finish(&r);

	/* An operator closes it (its provider no longer has it): no reprocess,
	 * a dismiss with a reason, audited; it stays unapplied and shows as a
	 * fetching event dismissed. */
	t_login(&d, T_OP_TOKEN, &op);
	assert_int_equal(t_get(&d, path, &op, &r), 200);
	assert_non_null(strstr(r.hs_body, "id=\"dismiss\""));
	assert_null(strstr(r.hs_body, "id=\"reprocess\""));
	hres_finish(&r);
	snprintf(action, sizeof(action), "/console/events/%lld/dismiss", id);
	snprintf(form, sizeof(form), "csrf=%s&reason=older+than+30+days", op.ts_csrf);
	assert_int_equal(t_post(&d, action, &op, form, &post), 303);
	t_follow(&d, &post, path, &op, &r);
	assert_non_null(strstr(r.hs_body, "class=\"flash\" role=\"status\">event"));
	assert_non_null(strstr(r.hs_body, "dismissed, so no longer asked for"));
	assert_non_null(strstr(r.hs_body, "older than 30 days"));
	assert_null(strstr(r.hs_body, "id=\"dismiss\""));
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM events WHERE id = %lld AND outcome = "
	                           "'done' AND effect = 'to_fetch' AND dismissed_by = "
	                           "'console:alice' AND dismiss_reason = 'older than 30 days'",
	                           id),
	                 1);
	fx_assert_audit(&d, 1,
	                "actor = 'console:alice' AND action = 'events.dismiss' AND target = "
	                "'event:%lld' AND result = 'ok'",
	                id);
	assert_int_equal(t_get(&d, "/console/events?outcome=fetching&dismissed=1", &op, &r), 200);
	assert_non_null(strstr(r.hs_body, "evt_console_thin"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* "Reconcile now" on an order page asks the order's provider (here a
 * Stripe instance whose event listing holds a payment for this order and
 * one for another order): this order's payment is applied, the other
 * order's event is left alone, and the action is in the audit log. */
static void
test_reconcile_now_applies_the_provider_answer_for_one_order_and_is_audited(void **state)
{
	struct peer *api = peer_create();
	struct peer_behaviour pb;
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct buf list;
	char mine[64];
	char other[64];
	char obj[512];
	char path[128];
	char form[300];
	char *ev_mine;
	char *ev_other;

	(void)state;
	assert_non_null(api);
	t_start_rec(&d, api, NULL);
	fx_order(&d, 1500, "usd", mine);
	fx_order(&d, 2500, "usd", other);
	snprintf(obj, sizeof(obj),
	         "{\"id\":\"pi_rec_mine\",\"object\":\"payment_intent\",\"amount\":1500,"
	         "\"amount_received\":1500,\"currency\":\"usd\",\"status\":\"succeeded\","
	         "\"metadata\":{\"order_id\":\"%s\"}}",
	         mine);
	ev_mine = hn_stripe_event("evt_rec_mine", "payment_intent.succeeded", obj);
	snprintf(obj, sizeof(obj),
	         "{\"id\":\"pi_rec_other\",\"object\":\"payment_intent\",\"amount\":2500,"
	         "\"amount_received\":2500,\"currency\":\"usd\",\"status\":\"succeeded\","
	         "\"metadata\":{\"order_id\":\"%s\"}}",
	         other);
	ev_other = hn_stripe_event("evt_rec_other", "payment_intent.succeeded", obj);
	buf_init(&list, 0);
	buf_printf(&list,
	           "{\"object\":\"list\",\"url\":\"/v1/events\",\"data\":[%s,%s],"
	           "\"has_more\":false}",
	           ev_other, ev_mine);
	pb = peer_reply(200, list.buf_data);
	assert_int_equal(peer_default(api, "/v1/events", &pb), 0);
	buf_finish(&list);
	free(ev_mine);
	free(ev_other);

	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/orders/%s", mine);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "action=\"/console/reconcile\""));
	hres_finish(&r);
	snprintf(form, sizeof(form), "csrf=%s&order=%s", s.ts_csrf, mine);
	t_act(&d, "/console/reconcile", &s, form, path, &r);
	assert_non_null(strstr(r.hs_body, "1 applied"));
	hres_finish(&r);
	assert_true(peer_count(api) >= 1);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND status = "
	                           "'paid'",
	                           mine),
	                 1);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND status = "
	                           "'pending'",
	                           other),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM events WHERE idem_key = "
	                               "'evt_rec_mine' AND source = 'reconcile'"),
	                 1);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM events WHERE idem_key = 'evt_rec_other'"), 0);
	fx_assert_audit(
	        &d, 1,
	        "action = 'order.reconcile' AND target = 'order:%s' AND actor = 'console:alice' "
	        "AND result LIKE 'ok: Reconciled: 1 event(s) found, 1 applied%%'",
	        mine);
	/* The CLI's reconcile --order runs the same for one order: asked
	 * again, the payment is known, the other order's event still left. */
	{
		const char *args[] = {"reconcile", "--order", mine, "--json", NULL};
		char *out = NULL;
		cJSON *j;
		cJSON *total;

		assert_int_equal(daemon_cli(&d, 1, args, &out), 0);
		assert_non_null(out);
		j = cJSON_Parse(out);
		total = cJSON_GetObjectItem(j, "total");
		assert_non_null(total);
		assert_int_equal(cJSON_GetObjectItem(total, "already_known")->valueint, 1);
		assert_int_equal(cJSON_GetObjectItem(total, "applied")->valueint, 0);
		cJSON_Delete(j);
		free(out);
		assert_int_equal(
		        fx_db_int(&d,
		                  "SELECT count(*) FROM events WHERE idem_key = 'evt_rec_other'"),
		        0);
	}
	/* An order nobody has: 404, nothing asked, the refusal recorded. */
	snprintf(form, sizeof(form), "csrf=%s&order=ord_console_nosuch0000009", s.ts_csrf);
	assert_int_equal(t_post(&d, "/console/reconcile", &s, form, &r), 404);
	hres_finish(&r);
	fx_assert_audit(&d, 2, "action = 'order.reconcile'");
	fx_assert_audit(&d, 1,
	                "action = 'order.reconcile' AND target = 'order:ord_console_nosuch0000009' "
	                "AND result = 'refused: no such order'");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	peer_destroy(api);
}

/* "Reconcile now" on a provider that hangs: the operator is answered
 * within the console's bound (1.5 s, and some slack for a loaded
 * machine), sent to the order page, which says the run goes on; a second
 * click meanwhile starts nothing (409, the provider asked once); when the
 * provider's retry answers, the outcome is in the audit log exactly once
 * and on the order page (the session's message and its operator
 * history). */
static void
test_reconcile_now_on_a_hanging_provider_answers_in_time_and_shows_the_outcome_later(void **state)
{
	struct peer *api = peer_create();
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 0};
	struct peer_behaviour pb;
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct buf list;
	char mine[64];
	char obj[512];
	char path[128];
	char form[300];
	char *ev;
	int64_t t0;
	int64_t took;
	int i;

	(void)state;
	assert_non_null(api);
	/* the first question hangs past the 3 s timeout; its retry answers */
	t_start_rec(&d, api, "\n[reconcile]\ntimeout = 3s\nretries = 1\nretry_base = 100ms\n");
	fx_order(&d, 1500, "usd", mine);
	snprintf(obj, sizeof(obj),
	         "{\"id\":\"pi_rec_hang\",\"object\":\"payment_intent\",\"amount\":1500,"
	         "\"amount_received\":1500,\"currency\":\"usd\",\"status\":\"succeeded\","
	         "\"metadata\":{\"order_id\":\"%s\"}}",
	         mine);
	ev = hn_stripe_event("evt_rec_hang", "payment_intent.succeeded", obj);
	buf_init(&list, 0);
	buf_printf(&list,
	           "{\"object\":\"list\",\"url\":\"/v1/events\",\"data\":[%s],\"has_more\":false}",
	           ev);
	free(ev);
	assert_int_equal(peer_script(api, "/v1/events", &hang), 0);
	pb = peer_reply(200, list.buf_data);
	assert_int_equal(peer_default(api, "/v1/events", &pb), 0);
	buf_finish(&list);

	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/orders/%s", mine);
	snprintf(form, sizeof(form), "csrf=%s&order=%s", s.ts_csrf, mine);
	t0 = hn_now_ms();
	t_act(&d, "/console/reconcile", &s, form, path, &r);
	took = hn_now_ms() - t0;
	assert_true(took < 2500);
	assert_non_null(strstr(r.hs_body, "the reconcile run goes on"));
	assert_non_null(strstr(r.hs_body, "id=\"reconcile-running\""));
	assert_non_null(strstr(r.hs_body, "data-refresh="));
	/* and without JavaScript, the browser reloads it */
	assert_non_null(strstr(r.hs_body, "<noscript><meta http-equiv=\"refresh\" content=\"5\">"
	                                  "</noscript>"));
	hres_finish(&r);
	assert_int_equal(peer_wait(api, 1, 5000), 1);
	/* a second click while the first run waits: nothing more is asked */
	assert_int_equal(t_post(&d, "/console/reconcile", &s, form, &r), 409);
	assert_non_null(strstr(r.hs_body, "already under way"));
	hres_finish(&r);
	assert_int_equal(peer_count(api), 1);
	fx_assert_audit(&d, 0, "action = 'order.reconcile' AND result LIKE 'ok:%%'");
	fx_assert_audit(&d, 1,
	                "action = 'order.reconcile' AND target = 'order:%s' AND result = "
	                "'refused: a reconcile run of this order is already under way'",
	                mine);
	/* the retry answers: the run ends by itself and records its outcome */
	for (i = 0; i < 150; i++) {
		if (fx_db_int(&d, "SELECT count(*) FROM audit_log WHERE action = "
		                  "'order.reconcile' AND result LIKE 'ok:%%'") > 0) {
			break;
		}
		usleep(100 * 1000);
	}
	fx_assert_audit(&d, 1,
	                "action = 'order.reconcile' AND target = 'order:%s' AND actor = "
	                "'console:alice' AND result LIKE 'ok: Reconciled: 1 event(s) found, 1 "
	                "applied%%'",
	                mine);
	assert_int_equal(peer_count(api), 2);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND status = "
	                           "'paid'",
	                           mine),
	                 1);
	/* the order page says it: once as the session's message, always in
	 * its operator history; the run is no longer under way */
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<p class=\"flash\" role=\"status\">Reconciled: 1 "
	                                  "event(s) found, 1 applied"));
	assert_non_null(strstr(r.hs_body, "id=\"history\""));
	assert_non_null(strstr(r.hs_body, "ok: Reconciled: 1 event(s) found, 1 applied"));
	assert_null(strstr(r.hs_body, "id=\"reconcile-running\""));
	assert_null(strstr(r.hs_body, "http-equiv=\"refresh\""));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	/* one outcome recorded, however the run ended */
	fx_assert_audit(&d, 2, "action = 'order.reconcile'");
	daemon_finish(&d);
	peer_destroy(api);
}

/* A receiver stopped while a "reconcile now" run waits for a provider
 * that never answers: the stop is not held past the run's current request
 * (its retries are given up), and the run's outcome is recorded once. */
static void test_a_receiver_stopped_during_reconcile_now_records_its_outcome_once(void **state)
{
	struct peer *api = peer_create();
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 0};
	struct daemon d;
	struct t_session s;
	struct hres r;
	char mine[64];
	char path[128];
	char form[300];
	int64_t t0;

	(void)state;
	assert_non_null(api);
	/* every question hangs past the 2 s timeout; 3 retries 5 s apart
	 * would take 20 s and more */
	t_start_rec(&d, api, "\n[reconcile]\ntimeout = 2s\nretries = 3\nretry_base = 5s\n");
	assert_int_equal(peer_default(api, "/v1/events", &hang), 0);
	fx_order(&d, 1500, "usd", mine);
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/orders/%s", mine);
	snprintf(form, sizeof(form), "csrf=%s&order=%s", s.ts_csrf, mine);
	t_act(&d, "/console/reconcile", &s, form, path, &r);
	assert_non_null(strstr(r.hs_body, "the reconcile run goes on"));
	hres_finish(&r);
	assert_int_equal(peer_wait(api, 1, 5000), 1);
	t0 = hn_now_ms();
	assert_int_equal(daemon_term(&d, 30), 0);
	assert_true(hn_now_ms() - t0 < 8000);
	fx_assert_audit(&d, 1,
	                "action = 'order.reconcile' AND target = 'order:%s' AND actor = "
	                "'console:alice' AND result LIKE 'failed: Reconciled: %%1 failed.'",
	                mine);
	fx_assert_audit(&d, 1, "action = 'order.reconcile'");
	daemon_finish(&d);
	peer_destroy(api);
}

/* "Reconcile now" runs that wait for a provider are bounded in number: 8
 * at once, over all orders; a ninth is refused (503, Retry-After), asks
 * nothing, and is recorded as refused. */
static void test_reconcile_now_keeps_at_most_eight_runs_under_way(void **state)
{
	struct peer *api = peer_create();
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 0};
	struct daemon d;
	struct t_session s;
	struct hres r;
	char orders[9][64];
	char path[128];
	char form[300];
	char *retry;
	int i;

	(void)state;
	assert_non_null(api);
	t_start_rec(&d, api, "\n[reconcile]\ntimeout = 60s\nretries = 0\n");
	assert_int_equal(peer_default(api, "/v1/events", &hang), 0);
	t_login(&d, T_OP_TOKEN, &s);
	for (i = 0; i < 9; i++) {
		fx_order(&d, 1000 + i, "usd", orders[i]);
	}
	for (i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "/console/orders/%.63s", orders[i]);
		snprintf(form, sizeof(form), "csrf=%s&order=%.63s", s.ts_csrf, orders[i]);
		t_act(&d, "/console/reconcile", &s, form, path, &r);
		assert_non_null(strstr(r.hs_body, "the reconcile run goes on"));
		hres_finish(&r);
	}
	assert_int_equal(peer_wait(api, 8, 10000), 8);
	snprintf(form, sizeof(form), "csrf=%s&order=%.63s", s.ts_csrf, orders[8]);
	assert_int_equal(t_post(&d, "/console/reconcile", &s, form, &r), 503);
	assert_non_null(strstr(r.hs_body, "No reconcile run could start now (too many under way)"));
	retry = hres_header(&r, "Retry-After");
	assert_non_null(retry);
	free(retry);
	hres_finish(&r);
	assert_int_equal(peer_count(api), 8);
	fx_assert_audit(&d, 1,
	                "action = 'order.reconcile' AND target = 'order:%s' AND result = 'error: "
	                "no reconcile run could start; nothing changed'",
	                orders[8]);
	/* the provider goes away: the runs end, each recorded once */
	peer_destroy(api);
	assert_int_equal(daemon_term(&d, 30), 0);
	fx_assert_audit(&d, 9, "action = 'order.reconcile'");
	fx_assert_audit(&d, 8, "action = 'order.reconcile' AND result LIKE 'failed: %%'");
	daemon_finish(&d);
}

/* A "reconcile now" run that ends while another write waits on the
 * database (here: a dismissal stuck behind SQLite's write lock, which a
 * second process holds) still records its outcome, once the database
 * takes writes again, and once only. */
static void test_a_reconcile_run_ending_on_a_busy_database_is_still_recorded_once(void **state)
{
	struct peer *api = peer_create();
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 0};
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct hn_sqlite lock;
	char mine[64];
	char path[128];
	char form[300];
	int64_t event;
	int i;

	(void)state;
	assert_non_null(api);
	/* the provider never answers: the run fails after 4 s, writing
	 * nothing but its audit row */
	t_start_rec(&d, api, "\n[reconcile]\ntimeout = 4s\nretries = 0\n");
	if (d.dm_pg_db[0] != '\0') {
		/* the lock held is SQLite's (a second process on the file) */
		assert_int_equal(daemon_term(&d, 30), 0);
		daemon_finish(&d);
		peer_destroy(api);
		skip();
	}
	assert_int_equal(peer_default(api, "/v1/events", &hang), 0);
	fx_order(&d, 1500, "usd", mine);
	event = t_unknown_event(&d, "evt_console_busy_end");
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/orders/%s", mine);
	snprintf(form, sizeof(form), "csrf=%s&order=%s", s.ts_csrf, mine);
	t_act(&d, "/console/reconcile", &s, form, path, &r);
	assert_non_null(strstr(r.hs_body, "the reconcile run goes on"));
	hres_finish(&r);
	/* a dismissal stuck on the write lock while the run ends */
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", (long long)event);
	snprintf(form, sizeof(form), "csrf=%s&reason=paid+at+the+till", s.ts_csrf);
	assert_int_equal(t_post(&d, path, &s, form, &r), 503);
	hres_finish(&r);
	sleep(4); /* the run's 4 s are over: it ended, its audit row waits */
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	for (i = 0; i < 100; i++) {
		if (fx_db_int(&d, "SELECT count(*) FROM audit_log WHERE action = "
		                  "'order.reconcile' AND result LIKE 'failed:%%'") > 0) {
			break;
		}
		usleep(100 * 1000);
	}
	fx_assert_audit(&d, 1,
	                "action = 'order.reconcile' AND target = 'order:%s' AND result LIKE "
	                "'failed: Reconciled: %%1 failed.'",
	                mine);
	peer_destroy(api);
	assert_int_equal(daemon_term(&d, 30), 0);
	fx_assert_audit(&d, 1, "action = 'order.reconcile'");
	daemon_finish(&d);
}

/* The event page counts the duplicates this receiver answered for it. */
static void test_the_event_page_counts_the_duplicates_answered(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[128];
	char order[64];
	long long id;

	(void)state;
	t_start(&d, NULL);
	fx_order(&d, 700, "usd", order);
	assert_int_equal(fx_stripe_pay(&d, "evt_console_dups", order, 700, "usd"), 200);
	id = (long long)fx_db_int(&d, "SELECT id FROM events WHERE idem_key = 'evt_console_dups'");
	t_login(&d, T_RO_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<dd id=\"duplicates\">none by this receiver"));
	hres_finish(&r);
	assert_int_equal(fx_stripe_pay(&d, "evt_console_dups", order, 700, "usd"), 200);
	assert_int_equal(fx_stripe_pay(&d, "evt_console_dups", order, 700, "usd"), 200);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<dd id=\"duplicates\">2 by this receiver since it"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* idemhook_store_wal_held_seconds as /metrics says it; -1 if absent. */
static double t_wal_held(struct daemon *d)
{
	char url[128];
	struct hres r;
	const char *p;
	double v = -1;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	p = strstr(r.hs_body, "\nidemhook_store_wal_held_seconds ");
	if (p != NULL) {
		v = strtod(p + strlen("\nidemhook_store_wal_held_seconds "), NULL);
	}
	hres_finish(&r);
	return v;
}

/* A payment for no order with a 30 KB description: ~30 pages of the WAL. */
static void t_large_callback(struct daemon *d, int i)
{
	static char desc[30001];
	char key[64];
	char *obj;
	char *body;
	size_t n = sizeof(desc) + 400;

	memset(desc, 'x', sizeof(desc) - 1);
	desc[sizeof(desc) - 1] = '\0';
	obj = malloc(n);
	assert_non_null(obj);
	snprintf(key, sizeof(key), "evt_console_wal_%06d", i);
	snprintf(
	        obj, n,
	        "{\"id\":\"pi_wal_%06d\",\"object\":\"payment_intent\",\"amount\":900,"
	        "\"amount_received\":900,\"currency\":\"usd\",\"status\":\"succeeded\","
	        "\"description\":\"%s\",\"metadata\":{\"order_id\":\"ord_console_nosuch0000001\"}}",
	        i, desc);
	body = hn_stripe_event(key, "payment_intent.succeeded", obj);
	assert_int_equal(fx_stripe_send(d, body, NULL), 200);
	free(body);
	free(obj);
}

/* A sqlite3 shell left inside BEGIN holds the WAL: past its bound the
 * overview shows a card for it, and the card goes when the shell does. */
static void test_the_overview_shows_a_wal_held_by_a_read_transaction(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char out[700];
	char cmd[1500];
	char buf[256];
	FILE *shell;
	FILE *f;
	int i;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* SQLite's WAL; PostgreSQL's checkpoints are the server's */
	}
	t_start(&d, NULL);
	t_large_callback(&d, 0); /* pages in the WAL for the shell's snapshot */
	snprintf(out, sizeof(out), "%s/shell.out", d.dm_dir);
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' > '%s' 2>&1", d.dm_db, out);
	shell = popen(cmd, "w");
	assert_non_null(shell);
	fputs("BEGIN;\nSELECT 'held', count(*) FROM idempotency_records;\n", shell);
	fflush(shell);
	buf[0] = '\0';
	for (i = 0; i < 500 && strstr(buf, "held") == NULL; i++) {
		usleep(10 * 1000);
		f = fopen(out, "r");
		if (f != NULL) {
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);

			buf[n] = '\0';
			fclose(f);
		}
	}
	if (strstr(buf, "held|1") == NULL) {
		pclose(shell);
		daemon_finish(&d);
		/* no sqlite3 command: contrib/install-deps.sh installs it */
		assert_null(strstr(buf, "held"));
		skip();
	}
	t_login(&d, T_RO_TOKEN, &s);
	assert_int_equal(t_get(&d, "/console/", &s, &r), 200);
	assert_null(strstr(r.hs_body, "WAL held past its bound"));
	hres_finish(&r);

	/* 32,000 pages and a little more. */
	for (i = 1; i < 3000; i++) {
		t_large_callback(&d, i);
		if (i % 20 == 0 && t_wal_held(&d) > 0) {
			break;
		}
	}
	assert_true(t_wal_held(&d) > 0);
	assert_int_equal(t_get(&d, "/console/", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "WAL held past its bound"));
	assert_non_null(strstr(r.hs_body, "by a read transaction kept open ("));
	hres_finish(&r);

	pclose(shell); /* its transaction ends with it */
	for (i = 3000; i < 3500 && t_wal_held(&d) != 0; i++) {
		t_large_callback(&d, i);
		usleep(20 * 1000);
	}
	assert_true(t_wal_held(&d) == 0);
	assert_int_equal(t_get(&d, "/console/", &s, &r), 200);
	assert_null(strstr(r.hs_body, "WAL held past its bound"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* The event page shows the request's headers where a capture file holds
 * the request: escaped, a credential header redacted; and says so when
 * none does. */
static void test_the_event_page_shows_the_captured_request_headers(void **state)
{
	char spool[512];
	char extra[700];
	char url[256];
	char path[128];
	char rm[600];
	char *body;
	char *sig;
	char sig_header[300];
	const char *headers[5];
	struct daemon d;
	struct t_session s;
	struct hres r;
	long long id;

	(void)state;
	snprintf(spool, sizeof(spool), "%s/console-spool-XXXXXX",
	         getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(spool));
	snprintf(extra, sizeof(extra), "\n[capture]\nmode = all\ndir = %s\n", spool);
	t_start(&d, extra);
	body = hn_stripe_event("evt_console_headers", "customer.created",
	                       "{\"id\":\"cus_h\",\"object\":\"customer\"}");
	sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));
	assert_non_null(sig);
	snprintf(sig_header, sizeof(sig_header), "Stripe-Signature: %s", sig);
	headers[0] = sig_header;
	headers[1] = "Content-Type: application/json";
	headers[2] = "X-Console-Probe: <b>bold</b>";
	headers[3] = "Authorization: Bearer sk_console_never_shown";
	headers[4] = NULL;
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	free(sig);
	free(body);
	id = (long long)fx_db_int(&d,
	                          "SELECT id FROM events WHERE idem_key = 'evt_console_headers'");
	t_login(&d, T_RO_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<table id=\"request-headers\">"));
	assert_non_null(strstr(r.hs_body, "POST /hooks/stripe"));
	assert_non_null(strstr(r.hs_body, "Stripe-Signature</td><td>t="));
	assert_non_null(strstr(r.hs_body, "X-Console-Probe</td><td>&lt;b&gt;bold&lt;/b&gt;</td>"));
	assert_null(strstr(r.hs_body, "<b>bold</b>"));
	assert_null(strstr(r.hs_body, "sk_console_never_shown"));
	assert_non_null(strstr(r.hs_body, "(redacted)"));
	hres_finish(&r);
	/* The capture gone (expired, deleted): the page says none holds it. */
	snprintf(rm, sizeof(rm), "rm -rf '%s'", spool);
	assert_int_equal(system(rm), 0);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "id=\"request-headers\">No capture holds this request"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_rejected_callbacks_are_listed_with_their_reason(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char *body = fx_stripe_payment("evt_console_forged", "ord_x", 100, "usd");

	(void)state;
	t_start(&d, NULL);
	assert_int_equal(hn_post_stripe(&d, "stripe", "whsec_wrong_secret_rotated", body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
	free(body);
	t_login(&d, T_OP_TOKEN, &s);
	/* the overview counts it for its provider, this hour */
	assert_int_equal(t_get(&d, "/console/", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<table id=\"traffic\">"));
	assert_non_null(strstr(r.hs_body, "/console/events?provider=stripe\">stripe</a></td>"
	                                  "<td class=\"num\">0</td><td class=\"num\">0</td>"
	                                  "<td class=\"num\">0</td><td class=\"num\">1</td>"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/rejected", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "bad_signature"));
	assert_non_null(strstr(r.hs_body, "127.0.0.1"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* An [outbound] call that can never get through: the row dies at once. */
#define T_DEAD_OUTBOUND                                                                            \
	"\n[outbound]\nnotify_url = http://127.0.0.1:9/notify\nmax_attempts = 1\npoll = 50ms\n"    \
	"connect_timeout = 1s\n"

static void t_dead_row(struct daemon *d, int64_t *ret_id)
{
	char order[64];

	fx_order(d, 1500, "usd", order);
	assert_int_equal(fx_stripe_pay(d, "evt_console_outbox", order, 1500, "usd"), 200);
	assert_int_equal(hn_db_wait_int(d->dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'dead'", 1, 20),
	                 1);
	*ret_id = fx_db_int(d, "SELECT id FROM outbox WHERE status = 'dead'");
}

/* A dead row waits for no attempt: its page and the outbox list show no
 * next attempt, as `idemhook outbox show` says none ("next": null), not
 * the time its last attempt was due. */
static void test_a_dead_row_shows_no_next_attempt_as_the_cli_does(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[128];
	char id_text[32];
	const char *row;
	char *out = NULL;
	int64_t id;

	(void)state;
	t_start(&d, T_DEAD_OUTBOUND);
	t_dead_row(&d, &id);
	assert_true(fx_db_int(&d, "SELECT next_attempt_at FROM outbox WHERE id = %lld",
	                      (long long)id) > 0);
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/outbox/%lld", (long long)id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<dt>status</dt><dd>dead</dd>"));
	assert_non_null(strstr(r.hs_body, "<dt>next attempt (UTC)</dt><dd><span "
	                                  "class=\"muted\">-</span></dd>"));
	hres_finish(&r);
	/* its line in the list: the column after attempts */
	assert_int_equal(t_get(&d, "/console/outbox?status=dead", &s, &r), 200);
	snprintf(path, sizeof(path), "\">%lld</a></td>", (long long)id);
	row = strstr(r.hs_body, path);
	assert_non_null(row);
	assert_non_null(strstr(row, "<td class=\"num\">1</td><td><span class=\"muted\">-</span>"));
	hres_finish(&r);
	{
		const char *args[] = {"outbox", "show", id_text, "--json", NULL};

		snprintf(id_text, sizeof(id_text), "%lld", (long long)id);
		assert_int_equal(daemon_cli(&d, 1, args, &out), 0);
		assert_non_null(out);
		assert_non_null(strstr(out, "\"next\": null"));
		free(out);
	}
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_two_operators_retrying_one_row_at_once_end_with_one_retry(void **state)
{
	struct daemon d;
	struct t_session a;
	struct t_session b;
	struct hreq rq[2];
	struct hres rs[2];
	char url[256];
	char form_a[200];
	char form_b[200];
	const char *ha[] = {"Content-Type: application/x-www-form-urlencoded", a.ts_cookie, NULL};
	const char *hb[] = {"Content-Type: application/x-www-form-urlencoded", b.ts_cookie, NULL};
	int64_t id;
	char *page;

	struct peer *peer = peer_create();
	struct peer_behaviour e503 = peer_reply(503, "{\"error\":\"down\"}");
	struct peer_behaviour hang = {.pb_action = PEER_HANG, .pb_ms = 0};
	char ini[512];

	(void)state;
	/* The first delivery is answered 503 (dead at once: one attempt);
	 * the one a retry starts hangs, so the row stays delivering while
	 * the second retry arrives. */
	assert_non_null(peer);
	peer_script(peer, "/notify", &e503);
	peer_default(peer, "/notify", &hang);
	snprintf(ini, sizeof(ini),
	         "\n[outbound]\nnotify_url = %s/notify\nmax_attempts = 1\npoll = 50ms\n"
	         "timeout = 60s\n",
	         peer_base(peer));
	t_start(&d, ini);
	t_dead_row(&d, &id);
	t_login(&d, T_OP_TOKEN, &a);
	t_login(&d, T_OP_TOKEN, &b);
	/* the row's page shows its attempt */
	snprintf(url, sizeof(url), "/console/outbox/%lld", (long long)id);
	{
		struct hres r;

		assert_int_equal(t_get(&d, url, &a, &r), 200);
		page = strstr(r.hs_body, "class=\"attempts\"");
		assert_non_null(page);
		assert_non_null(strstr(page, "<td class=\"num\">503</td>"));
		assert_non_null(strstr(page, "{&quot;error&quot;:&quot;down&quot;}"));
		hres_finish(&r);
	}
	snprintf(url, sizeof(url), "%s/console/outbox/%lld/retry", d.dm_admin_base, (long long)id);
	snprintf(form_a, sizeof(form_a), "csrf=%s", a.ts_csrf);
	snprintf(form_b, sizeof(form_b), "csrf=%s", b.ts_csrf);
	rq[0] = (struct hreq){"POST", url, ha, form_a, strlen(form_a)};
	rq[1] = (struct hreq){"POST", url, hb, form_b, strlen(form_b)};
	assert_int_equal(hn_http_storm_each(2, rq, rs), 0);
	/* one retried it; the other found it no longer dead */
	assert_true((rs[0].hs_status == 303 && rs[1].hs_status == 409) ||
	            (rs[0].hs_status == 409 && rs[1].hs_status == 303));
	hres_finish(&rs[0]);
	hres_finish(&rs[1]);
	fx_assert_audit(
	        &d, 1, "action = 'outbox.retry' AND target = 'outbox:%lld' AND result LIKE 'ok:%%'",
	        (long long)id);
	fx_assert_audit(
	        &d, 1,
	        "action = 'outbox.retry' AND target = 'outbox:%lld' AND result LIKE 'refused:%%'",
	        (long long)id);
	/* one more delivery started, not two */
	assert_int_equal(peer_wait(peer, 2, 10000), 2);
	usleep(300 * 1000);
	assert_int_equal(peer_count(peer), 2);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM outbox WHERE id = %lld AND status = "
	                           "'delivering'",
	                           (long long)id),
	                 1);
	peer_destroy(peer);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* Post/Redirect/Get: an action answers 303 to the page it concerns, which
 * shows its outcome once; reloading that page (a GET) does nothing again. */
static void test_an_action_redirects_so_that_a_reload_does_not_repeat_it(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres post;
	struct hres r;
	char path[128];
	char page[128];
	char form[200];
	int64_t id;

	(void)state;
	t_start(&d, T_DEAD_OUTBOUND);
	t_dead_row(&d, &id);
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/outbox/%lld/retry", (long long)id);
	snprintf(page, sizeof(page), "/console/outbox/%lld", (long long)id);
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	assert_int_equal(t_post(&d, path, &s, form, &post), 303);
	assert_null(strstr(post.hs_body, "<html"));
	t_follow(&d, &post, page, &s, &r);
	assert_non_null(strstr(r.hs_body, "<p class=\"flash\" role=\"status\">"));
	hres_finish(&r);
	/* the browser's reload is a GET of that page: nothing is retried again */
	assert_int_equal(t_get(&d, page, &s, &r), 200);
	assert_null(strstr(r.hs_body, "class=\"flash"));
	hres_finish(&r);
	fx_assert_audit(&d, 1, "action = 'outbox.retry' AND target = 'outbox:%lld'", (long long)id);
	/* the message is the session's own: another session's page shows none */
	{
		struct t_session other;

		t_login(&d, T_OP_TOKEN, &other);
		assert_int_equal(hn_db_wait_int(d.dm_db,
		                                "SELECT count(*) FROM outbox WHERE status = 'dead'",
		                                1, 20),
		                 1);
		assert_int_equal(t_post(&d, path, &s, form, &post), 303);
		hres_finish(&post);
		assert_int_equal(t_get(&d, page, &other, &r), 200);
		assert_null(strstr(r.hs_body, "class=\"flash"));
		hres_finish(&r);
	}
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_bulk_retry_needs_the_count_it_showed_confirmed(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char form[200];
	int64_t id;

	(void)state;
	t_start(&d, T_DEAD_OUTBOUND);
	t_dead_row(&d, &id);
	t_login(&d, T_OP_TOKEN, &s);
	assert_int_equal(t_get(&d, "/console/outbox?status=dead", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "name=\"expect\" value=\"1\""));
	hres_finish(&r);
	snprintf(form, sizeof(form), "csrf=%s&status=dead&expect=2", s.ts_csrf);
	assert_int_equal(t_post(&d, "/console/outbox/retry-all", &s, form, &r), 409);
	/* the answer is the status's page, whose form offers the new count */
	assert_non_null(strstr(r.hs_body, "1 dead rows now, not the 2 you confirmed"));
	assert_non_null(strstr(r.hs_body, "name=\"status\" value=\"dead\""));
	assert_non_null(strstr(r.hs_body, "name=\"expect\" value=\"1\""));
	assert_non_null(strstr(r.hs_body, "id=\"retry-all\""));
	hres_finish(&r);
	fx_assert_audit(&d, 0, "action = 'outbox.retry'");
	fx_assert_audit(&d, 1,
	                "action = 'outbox.retry_all' AND target = 'outbox?status=dead' AND result "
	                "LIKE 'refused: 1 dead rows now, not the 2%%'");
	/* a row nobody has: 404, recorded */
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	assert_int_equal(t_post(&d, "/console/outbox/999999/retry", &s, form, &r), 404);
	hres_finish(&r);
	fx_assert_audit(&d, 1,
	                "action = 'outbox.retry' AND target = 'outbox:999999' AND result LIKE "
	                "'refused:%%'");
	snprintf(form, sizeof(form), "csrf=%s&status=dead&expect=1", s.ts_csrf);
	t_act(&d, "/console/outbox/retry-all", &s, form, "/console/outbox?status=dead", &r);
	assert_non_null(strstr(r.hs_body, "1 of 1 rows queued again"));
	hres_finish(&r);
	fx_assert_audit(
	        &d, 1, "action = 'outbox.retry' AND target = 'outbox:%lld' AND result LIKE 'ok:%%'",
	        (long long)id);
	/* a status without rows: nothing to retry, said so (as events dismiss
	 * says nothing to dismiss), not "0 of 0 rows queued again" */
	snprintf(form, sizeof(form), "csrf=%s&status=cancelled&expect=0", s.ts_csrf);
	t_act(&d, "/console/outbox/retry-all", &s, form, "/console/outbox?status=cancelled", &r);
	assert_non_null(strstr(r.hs_body, "<p class=\"flash\" role=\"status\">No cancelled rows: "
	                                  "nothing to retry.</p>"));
	assert_null(strstr(r.hs_body, "queued again"));
	hres_finish(&r);
	fx_assert_audit(&d, 1,
	                "action = 'outbox.retry_all' AND target = 'outbox?status=cancelled' AND "
	                "result = 'ok: No cancelled rows: nothing to retry.'");
	/* and rows confirmed that are gone: refused, with the count now */
	snprintf(form, sizeof(form), "csrf=%s&status=cancelled&expect=2", s.ts_csrf);
	assert_int_equal(t_post(&d, "/console/outbox/retry-all", &s, form, &r), 409);
	assert_non_null(strstr(
	        r.hs_body, "No cancelled rows now, not the 2 you confirmed: nothing to retry."));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* A bulk retry takes every row of the status, however many: here 1001
 * cancelled rows (cloned from a real one by the sqlite3 shell), more than
 * one read's worth of any fixed bound. The count it refuses is true. */
static void test_bulk_retry_takes_every_row_of_a_status_however_many(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char form[200];
	char cmd[2048];
	int64_t id;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* the rows are cloned with the sqlite3 shell */
	}
	t_start(&d, T_DEAD_OUTBOUND);
	t_dead_row(&d, &id);
	snprintf(cmd, sizeof(cmd),
	         "sqlite3 -cmd '.timeout 10000' '%s' \"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL"
	         " SELECT i + 1 FROM n WHERE i < 1001) INSERT INTO outbox (order_id, call_type,"
	         " effect, provider, url, content_type, body, idem_key, window_start,"
	         " next_attempt_at, created_at, updated_at, status, attempts) SELECT o.order_id,"
	         " o.call_type, o.effect, o.provider, o.url, o.content_type, o.body, o.idem_key ||"
	         " '-clone-' || n.i, o.window_start, o.next_attempt_at, o.created_at,"
	         " o.updated_at, 'cancelled', o.attempts FROM outbox AS o, n WHERE o.id = %lld\""
	         " >/dev/null",
	         d.dm_db, (long long)id);
	if (system(cmd) != 0) {
		daemon_finish(&d);
		skip(); /* no sqlite3 command: contrib/install-deps.sh installs it */
	}
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'cancelled'"),
	                 1001);
	t_login(&d, T_OP_TOKEN, &s);
	assert_int_equal(t_get(&d, "/console/outbox?status=cancelled", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "name=\"expect\" value=\"1001\""));
	hres_finish(&r);
	/* a count short by one retries nothing, and says the real count */
	snprintf(form, sizeof(form), "csrf=%s&status=cancelled&expect=1000", s.ts_csrf);
	assert_int_equal(t_post(&d, "/console/outbox/retry-all", &s, form, &r), 409);
	assert_non_null(strstr(r.hs_body, "1001 cancelled rows now, not the 1000 you confirmed"));
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'cancelled'"),
	                 1001);
	/* the count the page showed retries them all */
	snprintf(form, sizeof(form), "csrf=%s&status=cancelled&expect=1001", s.ts_csrf);
	t_act(&d, "/console/outbox/retry-all", &s, form, "/console/outbox?status=cancelled", &r);
	assert_non_null(strstr(r.hs_body, "1001 of 1001 rows queued again"));
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d, "SELECT count(*) FROM outbox WHERE status = 'cancelled'"),
	                 0);
	fx_assert_audit(
	        &d, 1001,
	        "action = 'outbox.retry' AND reason = 'bulk retry' AND result LIKE 'ok:%%'");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_the_console_is_off_by_default_and_never_on_the_public_listener(void **state)
{
	struct daemon d;
	struct hres r;
	char url[256];

	(void)state;
	fx_daemon_start(&d, "%s", FX_STRIPE_INI);
	snprintf(url, sizeof(url), "%s/console/login", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 404);
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);

	t_start(&d, NULL);
	snprintf(url, sizeof(url), "%s/console/login", d.dm_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 404);
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_serve_refuses_the_console_on_a_non_loopback_admin_address(void **state)
{
	struct daemon d;
	char *log;

	(void)state;
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI T_CONSOLE), 0);
	/* The harness's [admin] listen moved off loopback (one listen line). */
	{
		static const char from[] = "[admin]\nlisten = 127.0.0.1:0\n";
		char *ini = hn_read_file(d.dm_config);
		char *at = ini != NULL ? strstr(ini, from) : NULL;
		struct buf b;

		assert_non_null(at);
		buf_init(&b, 0);
		buf_printf(&b, "%.*s[admin]\nlisten = 0.0.0.0:0\n%s", (int)(at - ini), ini,
		           at + strlen(from));
		assert_int_equal(daemon_write_file(&d, "idemhook.ini", b.buf_data), 0);
		buf_finish(&b);
		free(ini);
	}
	assert_int_not_equal(daemon_start(&d), 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "allow_insecure"));
	free(log);
	daemon_finish(&d);
}

/* Behind a TLS proxy the admin listener stays on loopback, where the cookie
 * gets no Secure by itself: secure_cookie = yes sets it; a value other than
 * auto or yes is refused with its line. */
static void test_secure_cookie_yes_marks_the_cookie_secure_on_loopback(void **state)
{
	struct daemon d;
	struct hres r;
	char form[100];
	char *log;
	char *v;

	(void)state;
	t_start(&d, "secure_cookie = yes\n");
	snprintf(form, sizeof(form), "token=%s", T_OP_TOKEN);
	assert_int_equal(t_post(&d, "/console/login", NULL, form, &r), 303);
	v = hres_header(&r, "Set-Cookie");
	assert_non_null(v);
	assert_non_null(strstr(v, "; Secure"));
	free(v);
	hres_finish(&r);
	daemon_finish(&d);

	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI T_CONSOLE "secure_cookie = no\n"), 0);
	assert_int_not_equal(daemon_start(&d), 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "[console] secure_cookie: \"no\": auto or yes"));
	free(log);
	daemon_finish(&d);
}

/* PostgreSQL: an action taken on one receiver's console is what another's
 * shows (the state is the shared database's; sessions are each receiver's). */
static void test_an_action_on_one_receiver_is_seen_on_another(void **state)
{
	struct daemon a;
	struct daemon b;
	struct t_session sa;
	struct t_session sb;
	struct hres r;
	char path[128];
	char form[200];
	long long id;

	(void)state;
	if (!hn_backend_is_postgresql()) {
		skip();
	}
	t_start(&a, NULL);
	assert_int_equal(daemon_init_beside(&b, &a, FX_STRIPE_INI T_CONSOLE), 0);
	assert_int_equal(daemon_start(&b), 0);
	id = (long long)t_unknown_event(&a, "evt_console_shared");
	t_login(&a, T_OP_TOKEN, &sa);
	t_login(&b, T_RO_TOKEN, &sb);
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", id);
	snprintf(form, sizeof(form), "csrf=%s&reason=seen+from+b", sa.ts_csrf);
	assert_int_equal(t_post(&a, path, &sa, form, &r), 303);
	hres_finish(&r);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&b, path, &sb, &r), 200);
	assert_non_null(strstr(r.hs_body, "seen from b"));
	assert_non_null(strstr(r.hs_body, "console:alice"));
	hres_finish(&r);
	assert_int_equal(t_get(&b, "/console/audit", &sb, &r), 200);
	assert_non_null(strstr(r.hs_body, "seen from b"));
	hres_finish(&r);
	/* b's session is b's own: a does not know it */
	assert_int_equal(t_get(&a, "/console/events", &sb, &r), 303);
	hres_finish(&r);
	assert_int_equal(daemon_term(&b, 30), 0);
	daemon_finish(&b);
	assert_int_equal(daemon_term(&a, 30), 0);
	daemon_finish(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_without_a_session_pages_redirect_to_login_and_actions_get_401),
	        cmocka_unit_test(
	                test_login_cookie_is_strict_and_every_page_has_the_security_headers),
	        cmocka_unit_test(
	                test_failed_logins_are_limited_per_address_even_for_the_right_token),
	        cmocka_unit_test(test_a_login_sent_from_another_site_is_refused_and_not_counted),
	        cmocka_unit_test(test_a_session_ends_at_its_expiry),
	        cmocka_unit_test(test_a_changed_secret_ends_the_sessions_opened_with_the_old_one),
	        cmocka_unit_test(
	                test_read_only_sessions_get_403_on_every_action_and_nothing_changes),
	        cmocka_unit_test(test_an_action_without_or_with_a_wrong_csrf_token_changes_nothing),
	        cmocka_unit_test(
	                test_dismiss_and_reprocess_from_the_console_are_applied_and_audited),
	        cmocka_unit_test(test_a_hostile_payload_is_shown_as_text),
	        cmocka_unit_test(test_a_thin_event_waiting_for_its_fetch_shows_as_fetching),
	        cmocka_unit_test(
	                test_reconcile_now_applies_the_provider_answer_for_one_order_and_is_audited),
	        cmocka_unit_test(
	                test_reconcile_now_on_a_hanging_provider_answers_in_time_and_shows_the_outcome_later),
	        cmocka_unit_test(
	                test_a_receiver_stopped_during_reconcile_now_records_its_outcome_once),
	        cmocka_unit_test(test_reconcile_now_keeps_at_most_eight_runs_under_way),
	        cmocka_unit_test(
	                test_a_reconcile_run_ending_on_a_busy_database_is_still_recorded_once),
	        cmocka_unit_test(test_the_event_page_counts_the_duplicates_answered),
	        cmocka_unit_test(test_the_overview_shows_a_wal_held_by_a_read_transaction),
	        cmocka_unit_test(test_the_event_page_shows_the_captured_request_headers),
	        cmocka_unit_test(test_rejected_callbacks_are_listed_with_their_reason),
	        cmocka_unit_test(test_two_operators_retrying_one_row_at_once_end_with_one_retry),
	        cmocka_unit_test(test_a_dead_row_shows_no_next_attempt_as_the_cli_does),
	        cmocka_unit_test(test_an_action_redirects_so_that_a_reload_does_not_repeat_it),
	        cmocka_unit_test(test_bulk_retry_needs_the_count_it_showed_confirmed),
	        cmocka_unit_test(test_bulk_retry_takes_every_row_of_a_status_however_many),
	        cmocka_unit_test(
	                test_the_console_is_off_by_default_and_never_on_the_public_listener),
	        cmocka_unit_test(test_serve_refuses_the_console_on_a_non_loopback_admin_address),
	        cmocka_unit_test(test_secure_cookie_yes_marks_the_cookie_secure_on_loopback),
	        cmocka_unit_test(test_an_action_on_one_receiver_is_seen_on_another),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
