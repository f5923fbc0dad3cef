/* console_client.h: a browser's part in the console tests (test_console.c,
 * test_console_views.c): a daemon with the console on and two tokens, GET
 * and POST on its admin listener with a session's cookie, and the login
 * that gives one (its cookie and CSRF token). */
#ifndef IDEMHOOK_TEST_CONSOLE_CLIENT_H
#define IDEMHOOK_TEST_CONSOLE_CLIENT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

#define T_OP_TOKEN "console-operator-token-0123456789"
#define T_RO_TOKEN "console-readonly-token-0123456789"
#define T_CONSOLE                                                                                  \
	"\n[console]\nenabled = yes\ntoken = alice operator env:T_CONSOLE_OP\n"                    \
	"token = bob read-only env:T_CONSOLE_RO\n"

struct t_session {
	char ts_cookie[200]; /* "Cookie: idemhook_console=..." */
	char ts_csrf[100];
};

/* The Stripe daemon with T_CONSOLE and extra (more [console] keys) after it. */
static inline void t_start(struct daemon *d, const char *extra)
{
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	fx_daemon_start(d, "%s%s%s", FX_STRIPE_INI, T_CONSOLE, extra != NULL ? extra : "");
}

/* GET path on the admin listener, with s's cookie (NULL: none). */
static inline long t_get(struct daemon *d, const char *path, const struct t_session *s,
                         struct hres *r)
{
	const char *h[] = {s != NULL ? s->ts_cookie : NULL, NULL};
	size_t size = strlen(d->dm_admin_base) + strlen(path) + 1;
	char *url = malloc(size); /* a bulk dismiss's filters make long ones */

	assert_non_null(url);
	snprintf(url, size, "%s%s", d->dm_admin_base, path);
	assert_int_equal(hn_http("GET", url, s != NULL ? h : NULL, NULL, 0, r), 0);
	free(url);
	return r->hs_status;
}

/* POST form to path, with s's cookie (NULL: none). */
static inline long t_post(struct daemon *d, const char *path, const struct t_session *s,
                          const char *form, struct hres *r)
{
	const char *h[] = {"Content-Type: application/x-www-form-urlencoded",
	                   s != NULL ? s->ts_cookie : NULL, NULL};
	size_t size = strlen(d->dm_admin_base) + strlen(path) + 1;
	char *url = malloc(size);

	assert_non_null(url);
	snprintf(url, size, "%s%s", d->dm_admin_base, path);
	assert_int_equal(hn_http("POST", url, h, form, strlen(form), r), 0);
	free(url);
	return r->hs_status;
}

/* Logs in with token; asserts the cookie and reads the CSRF token. */
static inline void t_login(struct daemon *d, const char *token, struct t_session *s)
{
	char form[200];
	struct hres r;
	char *cookie;
	const char *p;
	size_t n;

	snprintf(form, sizeof(form), "token=%s", token);
	assert_int_equal(t_post(d, "/console/login", NULL, form, &r), 303);
	cookie = hres_header(&r, "Set-Cookie");
	assert_non_null(cookie);
	n = strcspn(cookie, ";");
	snprintf(s->ts_cookie, sizeof(s->ts_cookie), "Cookie: %.*s", (int)n, cookie);
	free(cookie);
	hres_finish(&r);
	assert_int_equal(t_get(d, "/console/", s, &r), 200);
	p = strstr(r.hs_body, "name=\"csrf\" value=\"");
	assert_non_null(p);
	p += strlen("name=\"csrf\" value=\"");
	n = strcspn(p, "\"");
	snprintf(s->ts_csrf, sizeof(s->ts_csrf), "%.*s", (int)n, p);
	hres_finish(&r);
}

#endif
