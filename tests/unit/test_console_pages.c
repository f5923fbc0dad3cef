/* test_console_pages.c: the console's escaping of attacker-controlled text and
 * the checks of its [console] section. */
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
#include "config.h"
#include "console.h"
#include "console_pages.h"
#include "traffic.h"

static char *t_esc(const char *s, size_t len)
{
	struct buf b;

	buf_init(&b, 0);
	assert_int_equal(console_escn(&b, s, len), 0);
	return buf_take(&b, NULL);
}

static void test_markup_is_escaped_as_entities(void **state)
{
	static const char in[] = "<script>alert('x')</script>\"><img src=x onerror=y>&amp;";
	char *out = t_esc(in, sizeof(in) - 1);

	(void)state;
	assert_string_equal(out, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot;&gt;"
	                         "&lt;img src=x onerror=y&gt;&amp;amp;");
	free(out);
}

static void test_utf8_passes_and_invalid_bytes_and_controls_show_as_hex(void **state)
{
	/* é, € and 😀 whole; a lone continuation byte, an overlong '/', a
	 * surrogate, a cut sequence, NUL and ESC shown as \xNN */
	static const char in[] = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\x80|\xc0\xaf|\xed\xa0\x80|"
	                         "\x00|\x1b|\xe2\x82";
	char *out = t_esc(in, sizeof(in) - 1);

	(void)state;
	assert_string_equal(out, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\x80|\\xc0\\xaf|"
	                         "\\xed\\xa0\\x80|\\x00|\\x1b|\\xe2\\x82");
	free(out);
}

static void test_a_page_that_outgrows_its_cap_fails_instead_of_being_cut(void **state)
{
	struct buf b;
	char big[4096];

	(void)state;
	memset(big, '<', sizeof(big));
	buf_init(&b, 1024);
	assert_int_equal(console_escn(&b, big, sizeof(big)), -1);
	buf_finish(&b);
}

static char *t_order_href(const char *id)
{
	struct buf b;

	buf_init(&b, 0);
	console_order_href(&b, id);
	assert_false(b.buf_overflow);
	return buf_take(&b, NULL);
}

/* 1 when seg (up to end) is a dot segment as a URL parser resolves it:
 * ".", "..", with either dot written %2e or %2E. */
static int t_dot_segment(const char *seg, const char *end)
{
	size_t dots = 0;

	while (seg < end) {
		if (*seg == '.') {
			seg++;
		} else if (end - seg >= 3 && seg[0] == '%' && seg[1] == '2' &&
		           (seg[2] == 'e' || seg[2] == 'E')) {
			seg += 3;
		} else {
			return 0;
		}
		dots++;
	}
	return dots == 1 || dots == 2;
}

/* An order's link never ends in a dot segment, nor holds a slash, which
 * would be %2F in the path (refused by the listener): both take the query
 * form. */
static void test_order_links_never_end_in_a_dot_segment(void **state)
{
	static const char *const cases[][2] = {
	        {"..", "/console/orders?id=.."},
	        {".", "/console/orders?id=."},
	        {"...", "/console/orders/..."},
	        {"ord.1", "/console/orders/ord.1"},
	        {"a/../b", "/console/orders?id=a%2F..%2Fb"},
	        {"%2e%2E", "/console/orders/%252e%252E"},
	        {"ord_1", "/console/orders/ord_1"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *href = t_order_href(cases[i][0]);
		const char *path_end = strchr(href, '?');
		const char *seg;

		assert_string_equal(href, cases[i][1]);
		/* the path's last segment (the id's, or "orders") is never one a
		 * browser would climb or drop */
		path_end = path_end != NULL ? path_end : href + strlen(href);
		seg = path_end;
		while (seg > href && seg[-1] != '/') {
			seg--;
		}
		assert_false(t_dot_segment(seg, path_end));
		free(href);
	}
}

static void test_traffic_counts_per_provider_and_hour_for_a_day(void **state)
{
	static struct traffic_view tv;
	const int64_t hour = 3600000;
	const int64_t t0 = 1796000000000 - 1796000000000 % hour;

	(void)state;
	traffic_reset();
	traffic_add(t0 + 10, "stripe", traffic_kind_of("new"));
	traffic_add(t0 + 20, "stripe", traffic_kind_of("replayed"));
	traffic_add(t0 + 30, "stripe", traffic_kind_of("mismatch"));
	traffic_add(t0 + hour + 5, "stripe", traffic_kind_of("rejected"));
	traffic_add(t0 + hour + 6, "adyen", traffic_kind_of("failed"));
	traffic_get(t0 + hour + 100, &tv);
	assert_int_equal(tv.tv_n, 2);
	assert_string_equal(tv.tv_name[0], "stripe");
	assert_int_equal(tv.tv_counts[0][0][TRAFFIC_REJECTED], 1); /* the hour now running */
	assert_int_equal(tv.tv_counts[0][1][TRAFFIC_ACCEPTED], 1); /* the hour before */
	assert_int_equal(tv.tv_counts[0][1][TRAFFIC_DUPLICATE], 2);
	assert_int_equal(tv.tv_counts[1][0][TRAFFIC_FAILED], 1);
	/* a day later the old hours are gone, and a slot reused starts at zero */
	traffic_add(t0 + 24 * hour + 1, "stripe", TRAFFIC_ACCEPTED);
	traffic_get(t0 + 24 * hour + 2, &tv);
	assert_int_equal(tv.tv_counts[0][0][TRAFFIC_ACCEPTED], 1);
	assert_int_equal(tv.tv_counts[0][0][TRAFFIC_DUPLICATE], 0);
	assert_int_equal(tv.tv_counts[0][23][TRAFFIC_REJECTED], 1);
	assert_int_equal(tv.tv_counts[1][23][TRAFFIC_FAILED], 1);
	traffic_get(t0 + 26 * hour, &tv);
	assert_int_equal(tv.tv_counts[0][23][TRAFFIC_REJECTED], 0);
}

static char t_dir[256];

static struct config *t_config(const char *ini)
{
	char path[320];
	FILE *f;

	snprintf(path, sizeof(path), "%s/c.ini", t_dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(ini, f);
	fclose(f);
	return config_load(path);
}

static int t_check(const char *ini, struct console_conf *ret)
{
	struct config *cf = t_config(ini);
	int rc;

	assert_non_null(cf);
	rc = console_conf_load(cf, 1, ret);
	config_destroy(cf);
	return rc;
}

static void test_console_section_is_checked_whole(void **state)
{
	struct console_conf c;

	(void)state;
	setenv("T_TOKEN", "a-console-token-of-32-bytes-0000", 1);
	setenv("T_SHORT", "short", 1);
	/* off by default, on with a token */
	assert_int_equal(t_check("[server]\nlisten = 127.0.0.1:0\n", &c), 0);
	assert_int_equal(c.cc_enabled, 0);
	assert_int_equal(t_check("[console]\nenabled = yes\ntoken = a operator env:T_TOKEN\n", &c),
	                 0);
	assert_int_equal(c.cc_enabled, 1);
	assert_int_equal(c.cc_n_tokens, 1);
	assert_int_equal(c.cc_tokens[0].ct_role, CONSOLE_ROLE_OPERATOR);
	assert_int_equal(c.cc_session_ttl_s, 8 * 3600);
	assert_int_equal(c.cc_cookie_secure, 0);
	console_conf_finish(&c);
	/* each of these is refused */
	assert_int_equal(t_check("[console]\nenabled = yes\n", &c), -1);
	assert_int_equal(t_check("[console]\nenabled = yes\ntoken = a admin env:T_TOKEN\n", &c),
	                 -1);
	assert_int_equal(t_check("[console]\nenabled = yes\ntoken = a operator T_TOKEN\n", &c), -1);
	assert_int_equal(t_check("[console]\nenabled = yes\ntoken = a operator env:T_SHORT\n", &c),
	                 -1);
	assert_int_equal(t_check("[console]\nenabled = yes\ntoken = a operator env:T_TOKEN\n"
	                         "token = a read-only env:T_TOKEN\n",
	                         &c),
	                 -1);
	assert_int_equal(t_check("[console]\nenabled = yes\ntoken = a operator env:T_TOKEN\n"
	                         "session_ttl = 30d\n",
	                         &c),
	                 -1);
	assert_int_equal(t_check("[admin]\nlisten = off\n[console]\nenabled = yes\n"
	                         "token = a operator env:T_TOKEN\n",
	                         &c),
	                 -1);
	/* a non-loopback admin address only when said explicitly; Secure then */
	assert_int_equal(t_check("[admin]\nlisten = 0.0.0.0:9090\n[console]\nenabled = yes\n"
	                         "token = a operator env:T_TOKEN\n",
	                         &c),
	                 -1);
	assert_int_equal(t_check("[admin]\nlisten = 10.0.0.5:9090\n[console]\nenabled = yes\n"
	                         "token = a operator env:T_TOKEN\nallow_insecure = yes\n",
	                         &c),
	                 0);
	assert_int_equal(c.cc_cookie_secure, 1);
	console_conf_finish(&c);
	assert_int_equal(t_check("[admin]\nlisten = [::1]:9090\n[console]\nenabled = yes\n"
	                         "token = a read-only env:T_TOKEN\n",
	                         &c),
	                 0);
	assert_int_equal(c.cc_tokens[0].ct_role, CONSOLE_ROLE_READ_ONLY);
	console_conf_finish(&c);
}

static int setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	(void)state;
	/* TMPDIR as the rest of the suite honours it (tests/harness). */
	snprintf(t_dir, sizeof(t_dir), "%s/idemhook-console-XXXXXX",
	         tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	return mkdtemp(t_dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	char path[320];

	(void)state;
	snprintf(path, sizeof(path), "%s/c.ini", t_dir);
	unlink(path);
	return rmdir(t_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_markup_is_escaped_as_entities),
	        cmocka_unit_test(test_utf8_passes_and_invalid_bytes_and_controls_show_as_hex),
	        cmocka_unit_test(test_a_page_that_outgrows_its_cap_fails_instead_of_being_cut),
	        cmocka_unit_test(test_order_links_never_end_in_a_dot_segment),
	        cmocka_unit_test(test_console_section_is_checked_whole),
	        cmocka_unit_test(test_traffic_counts_per_provider_and_hour_for_a_day),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
