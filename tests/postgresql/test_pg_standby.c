/* test_pg_standby.c: a receiver whose server takes no writes (a standby,
 * the old primary come back as one after a failover): it does not start
 * on it, and while its server turns read-only under it, /readyz says not
 * ready, so the balancer takes it out instead of sending it callbacks it
 * can only answer 503. A server that takes no writes is had here as a
 * standby looks to a client: default_transaction_read_only on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_common.h"

/* Sets d's database read-only (on) or writable (off) and then closes
 * its sessions, which reconnect as after a failover, with the new setting
 * (pgserver_alter_db_and_close). Returns how many sessions were closed. */
static int standby_set(const struct daemon *d, const char *on)
{
	struct pgserver *pg = pgserver_shared(NULL);
	char setting[64];
	int killed;

	assert_non_null(pg);
	snprintf(setting, sizeof(setting), "SET default_transaction_read_only = %s", on);
	killed = pgserver_alter_db_and_close(pg, d->dm_pg_db, setting);
	assert_true(killed >= 0);
	return killed;
}

/* /readyz: 1 when ready, 0 when not; the body into ret (size bytes). */
static int standby_readyz(const struct daemon *d, char *ret, size_t size)
{
	char url[128];
	struct hres r;
	int ready;

	snprintf(url, sizeof(url), "%s/readyz", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	snprintf(ret, size, "%s", r.hs_body != NULL ? r.hs_body : "");
	ready = r.hs_status == 200;
	hres_finish(&r);
	return ready;
}

/* Polls /readyz until it answers ready (1) or not (0) as wanted, with
 * said in its body (NULL: any); 0 when it did within timeout_ms, else -1
 * (the last body printed). */
static int standby_readyz_says(const struct daemon *d, int want, const char *said, int timeout_ms)
{
	char body[512] = "";
	int waited;

	for (waited = 0; waited < timeout_ms; waited += 50) {
		if (standby_readyz(d, body, sizeof(body)) == want &&
		    (said == NULL || strstr(body, said) != NULL)) {
			print_message("readyz: %s", body);
			return 0;
		}
		usleep(50 * 1000);
	}
	print_message("readyz never answered %s%s%s; last: %s\n", want ? "ready" : "not ready",
	              said != NULL ? " saying " : "", said != NULL ? said : "", body);
	return -1;
}

static int standby_readyz_wait(const struct daemon *d, int want, int timeout_ms)
{
	return standby_readyz_says(d, want, NULL, timeout_ms);
}

static void test_a_receiver_does_not_start_on_a_server_that_takes_no_writes(void **state)
{
	struct daemon d;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(daemon_term(&d, 10), 0);
	standby_set(&d, "on");
	assert_int_not_equal(daemon_start(&d), 0);
	assert_int_equal(daemon_log_wait(&d, "session is read-only", 1000), 0);
	daemon_finish(&d);
}

static void
test_a_receiver_whose_server_turns_read_only_is_not_ready_and_stores_nothing(void **state)
{
	struct daemon d;
	struct hres r;
	char id[64];
	char *body;
	char *retry;
	int i;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1000, "eur", id);
	assert_int_equal(standby_readyz_wait(&d, 1, 3000), 0);

	/* the receiver's sessions were open, and are closed */
	assert_true(standby_set(&d, "on") > 0);
	body = fx_stripe_payment("evt_pg_standby", id, 1000, "eur");
	assert_int_equal(fx_stripe_send(&d, body, &r), 503);
	retry = hres_header(&r, "Retry-After");
	assert_non_null(retry);
	free(retry);
	hres_finish(&r);
	/* Not "cannot be reached" or "connection lost": the server answers,
	 * and refuses writes. */
	assert_int_equal(standby_readyz_says(&d, 0,
	                                     "postgresql takes no writes: the server is read-only",
	                                     5000),
	                 0);
	assert_int_equal(daemon_log_wait(&d, "session is read-only", 5000), 0);

	standby_set(&d, "off");
	for (i = 0; i < 100 && fx_stripe_send(&d, body, NULL) != 200; i++) {
		usleep(50 * 1000);
	}
	assert_true(i < 100);
	free(body);
	assert_int_equal(standby_readyz_wait(&d, 1, 5000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), 1);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM events"), 1);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_a_receiver_does_not_start_on_a_server_that_takes_no_writes),
	        cmocka_unit_test(
	                test_a_receiver_whose_server_turns_read_only_is_not_ready_and_stores_nothing),
	};

	pgserver_require_or_skip("test_pg_standby");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
