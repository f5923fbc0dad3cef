/* test_console_views.c: what the console's pages show, over real HTTP on the
 * real daemon's admin listener: links that reach what they name, figures
 * whose links list what they count, payloads cut as documented, and a
 * dismiss reason the form accepts accepted by the server. */
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

#define T_OP_TOKEN "console-operator-token-0123456789"
#define T_CONSOLE "\n[console]\nenabled = yes\ntoken = alice operator env:T_CONSOLE_OP\n"

struct t_session {
	char ts_cookie[200]; /* "Cookie: idemhook_console=..." */
	char ts_csrf[100];
};

static void t_start(struct daemon *d, const char *extra)
{
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	fx_daemon_start(d, "%s%s%s", FX_STRIPE_INI, T_CONSOLE, extra != NULL ? extra : "");
}

static void t_stop(struct daemon *d)
{
	assert_int_equal(daemon_term(d, 30), 0);
	daemon_finish(d);
}

static long t_get(struct daemon *d, const char *path, const struct t_session *s, struct hres *r)
{
	const char *h[] = {s->ts_cookie, NULL};
	char url[512];

	snprintf(url, sizeof(url), "%s%s", d->dm_admin_base, path);
	assert_int_equal(hn_http("GET", url, h, NULL, 0, r), 0);
	return r->hs_status;
}

/* Logs in as the operator; reads the cookie and the CSRF token. */
static void t_login(struct daemon *d, struct t_session *s)
{
	const char *h[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
	char form[200];
	char url[512];
	struct hres r;
	char *cookie;
	const char *p;
	size_t n;

	snprintf(form, sizeof(form), "token=%s", T_OP_TOKEN);
	snprintf(url, sizeof(url), "%s/console/login", d->dm_admin_base);
	assert_int_equal(hn_http("POST", url, h, form, strlen(form), &r), 0);
	assert_int_equal(r.hs_status, 303);
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

static void test_an_order_whose_id_is_a_dot_segment_is_linked_by_query(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;

	(void)state;
	t_start(&d, NULL);
	assert_int_equal(fx_stripe_pay(&d, "evt_views_dots", "..", 900, "usd"), 200);
	t_login(&d, &s);
	/* /console/orders/.. (or %2E%2E) would open /console/ in a browser */
	assert_int_equal(t_get(&d, "/console/events", &s, &r), 200);
	assert_null(strstr(r.hs_body, "href=\"/console/orders/..\""));
	assert_non_null(strstr(r.hs_body, "href=\"/console/orders?id=..\""));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/orders?id=..", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<h1>Order .. (not in the orders table)</h1>"));
	assert_non_null(strstr(r.hs_body, "evt_views_dots"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/orders", &s, &r), 404);
	hres_finish(&r);
	t_stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_an_order_whose_id_is_a_dot_segment_is_linked_by_query),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
