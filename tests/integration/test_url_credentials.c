/* test_url_credentials.c: every configured URL is read as libcurl reads it:
 * a user name or password in one is refused, and a URL whose requests carry
 * a key (a provider's api_base_url, [outbound] refund_base_url) takes plain
 * http:// only to a loopback host, however its text is dressed up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"

#define T_STRIPE                                                                                   \
	"[provider stripe]\ntype = stripe\nsecret = " FX_STRIPE_SECRET "\n"                        \
	"api_key = env:IDEMHOOK_T_URL_KEY\n"

/* Starts the daemon on extra; asserts it refused to start and said want. */
static void t_refused(const char *extra, const char *want)
{
	struct daemon d;
	char *log;

	assert_int_equal(daemon_init(&d, extra), 0);
	assert_int_equal(daemon_start(&d), -1);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	if (strstr(log, want) == NULL) {
		fail_msg("expected \"%s\" in the log:\n%s", want, log);
	}
	/* The password of a refused URL is not written to the log. */
	assert_null(strstr(log, "s3cr3t"));
	free(log);
	daemon_finish(&d);
}

static void test_an_api_base_url_whose_host_hides_behind_a_user_name_is_refused(void **state)
{
	(void)state;
	/* libcurl connects to 203.0.113.9 and sends the API key in clear;
	 * "127.0.0.1" is only a user name. */
	t_refused(T_STRIPE "api_base_url = http://127.0.0.1:1@203.0.113.9\n",
	          "api_base_url: a URL with a user name or password");
	t_refused(T_STRIPE "api_base_url = https://user:s3cr3t@api.stripe.com\n",
	          "api_base_url: a URL with a user name or password");
}

static void test_refund_base_url_carries_the_refund_key_so_plain_http_is_loopback_only(void **state)
{
	(void)state;
	t_refused(FX_STRIPE_INI "[outbound]\nrefund_base_url = http://203.0.113.9\n",
	          "refund_base_url: http:// only to a loopback address");
	t_refused(FX_STRIPE_INI "[outbound]\nrefund_base_url = http://127.0.0.1:1@203.0.113.9\n",
	          "refund_base_url: a URL with a user name or password");
	t_refused(FX_STRIPE_INI "[outbound]\nrefund_base_url = ftp://127.0.0.1/\n",
	          "refund_base_url: not an http:// or https:// URL");
}

static void test_a_notify_url_with_a_password_is_refused_without_logging_it(void **state)
{
	(void)state;
	t_refused(FX_STRIPE_INI "[outbound]\nnotify_url = http://shop:s3cr3t@127.0.0.1:9/paid\n",
	          "notify_url: a URL with a user name or password");
}

static void test_loopback_in_every_spelling_and_https_anywhere_are_accepted(void **state)
{
	struct daemon d;

	(void)state;
	setenv("IDEMHOOK_T_URL_KEY", "rk_test_url_credentials", 1);
	/* A notify URL carries no key: plain http to another host is the
	 * operator's choice. */
	fx_daemon_start(&d, T_STRIPE "api_base_url = http://[::1]:9/\n\n"
	                             "[outbound]\nrefund_base_url = http://localhost:9\n"
	                             "notify_url = http://192.0.2.1/hooks/paid?shop=1\n");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	fx_daemon_start(&d, T_STRIPE "api_base_url = http://127.0.0.2:9\n\n"
	                             "[outbound]\nrefund_base_url = https://api.stripe.com\n");
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_an_api_base_url_whose_host_hides_behind_a_user_name_is_refused),
	        cmocka_unit_test(
	                test_refund_base_url_carries_the_refund_key_so_plain_http_is_loopback_only),
	        cmocka_unit_test(test_a_notify_url_with_a_password_is_refused_without_logging_it),
	        cmocka_unit_test(test_loopback_in_every_spelling_and_https_anywhere_are_accepted),
	};

	setenv("IDEMHOOK_T_URL_KEY", "rk_test_url_credentials", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
