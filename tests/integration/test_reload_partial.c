/* test_reload_partial.c: a SIGHUP reload taken except [outbound] (the
 * outbound worker could not start) runs the rest of the new file: the
 * configuration generation moves on, while the reload counts as failed and
 * the success time stays; the next reload taken whole moves both. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"
#include "peer.h"

/* The value of the unlabelled metric name on /metrics, read after the
 * reload's log line (the metric is set just after it): polled up to 5 s
 * until it is not before. */
static int64_t t_metric_after(struct daemon *d, const char *name, int64_t before)
{
	char url[128];
	char line[128];
	int64_t v = -1;
	struct hres r;
	const char *at;
	int i;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	snprintf(line, sizeof(line), "\n%s ", name);
	for (i = 0; i < 100; i++) {
		if (i > 0) {
			usleep(50 * 1000);
		}
		assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
		assert_int_equal(r.hs_status, 200);
		at = strstr(r.hs_body, line);
		assert_non_null(at);
		v = strtoll(at + strlen(line), NULL, 10);
		hres_finish(&r);
		if (v != before) {
			break;
		}
	}
	return v;
}

static int64_t t_metric(struct daemon *d, const char *name)
{
	return t_metric_after(d, name, INT64_MIN);
}

static void
test_a_reload_taken_except_outbound_moves_the_generation_but_not_the_success(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct hn_sqlite lock;
	struct daemon d;
	char ini[2048];
	int64_t success_s;

	(void)state;
	assert_non_null(p);
	peer_default(p, "/notify", &ok);
	fx_daemon_start(&d, "%s\n[store]\nbusy_timeout_ms = 200\n", FX_STRIPE_INI);
	assert_int_equal(t_metric(&d, "idemhook_config_generation"), 1);
	success_s = t_metric(&d, "idemhook_config_last_reload_success_timestamp_seconds");
	assert_true(success_s > 0);

	/* [outbound] added while another process holds the write lock: the
	 * worker cannot start, the rest of the file is taken */
	snprintf(ini, sizeof(ini), "\n[outbound]\nnotify_url = %s/notify\npoll = 50ms\n",
	         peer_base(p));
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(hn_sqlite_start(&lock, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	sleep(1); /* a success time that moved would show */
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, " except [outbound] (above)", 10000), 0);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	assert_int_equal(t_metric_after(&d, "idemhook_config_generation", 1), 2);
	assert_int_equal(t_metric(&d, "idemhook_config_last_reload_successful"), 0);
	assert_int_equal(t_metric(&d, "idemhook_config_last_reload_success_timestamp_seconds"),
	                 success_s);

	/* the cause gone, the next reload is taken whole */
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "<5>SIGHUP: configuration", 10000), 0);
	assert_int_equal(t_metric_after(&d, "idemhook_config_generation", 2), 3);
	assert_int_equal(t_metric_after(&d, "idemhook_config_last_reload_successful", 0), 1);
	assert_true(t_metric(&d, "idemhook_config_last_reload_success_timestamp_seconds") >
	            success_s);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	peer_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_reload_taken_except_outbound_moves_the_generation_but_not_the_success),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
