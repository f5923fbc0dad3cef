/* test_wal_lost.c: the write-ahead log deleted under the running daemon.
 * The health thread sees that the log it holds open is no longer the file
 * at its path: callbacks are answered 503 from then on, /readyz says why,
 * and what the open log holds is checkpointed into the database file, so
 * that after a kill -9 and a restart every callback acknowledged before,
 * during and after the deletion is there. */
#include <pthread.h>
#include <setjmp.h>
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

#define T_ORDERS 40
#define T_BEFORE 10 /* paid before the log is deleted */
#define T_LOADERS 2

static struct daemon t_d;
static char t_ids[T_ORDERS][64];
static long t_status[T_ORDERS];

static void t_pay(size_t i)
{
	char evt[64];

	snprintf(evt, sizeof(evt), "evt_wal_%zu", i);
	t_status[i] = fx_stripe_pay(&t_d, evt, t_ids[i], 1000 + (int64_t)i, "usd");
}

/* Pays its share of the orders after T_BEFORE, one after the other. */
static void *t_loader(void *arg)
{
	size_t k = (size_t)(uintptr_t)arg;
	size_t i;

	for (i = T_BEFORE + k; i < T_ORDERS; i += T_LOADERS) {
		t_pay(i);
		usleep(30 * 1000);
	}
	return NULL;
}

static long t_readyz(char *body, size_t size)
{
	struct hres r;
	char url[256];
	long status;

	snprintf(url, sizeof(url), "%s/readyz", t_d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	status = r.hs_status;
	snprintf(body, size, "%s", r.hs_body != NULL ? r.hs_body : "");
	hres_finish(&r);
	return status;
}

static void test_a_deleted_wal_stops_acknowledging_and_loses_no_acknowledged_callback(void **state)
{
	pthread_t loaders[T_LOADERS];
	char wal[700];
	char body[1024] = "";
	int64_t start;
	size_t acked = 0;
	size_t i;

	(void)state;
	fx_daemon_start(&t_d, FX_STRIPE_INI);
	for (i = 0; i < T_ORDERS; i++) {
		fx_order(&t_d, 1000 + (int64_t)i, "usd", t_ids[i]);
	}
	for (i = 0; i < T_BEFORE; i++) {
		t_pay(i);
		assert_int_equal(t_status[i], 200);
	}
	for (i = 0; i < T_LOADERS; i++) {
		assert_int_equal(pthread_create(&loaders[i], NULL, t_loader, (void *)(uintptr_t)i),
		                 0);
	}
	usleep(80 * 1000);
	snprintf(wal, sizeof(wal), "%s-wal", t_d.dm_db);
	assert_int_equal(unlink(wal), 0);
	for (i = 0; i < T_LOADERS; i++) {
		pthread_join(loaders[i], NULL);
	}

	/* /readyz says what happened, the log says it once. */
	start = hn_now_ms();
	while (!(t_readyz(body, sizeof(body)) == 503 &&
	         strstr(body, "idemhook.db-wal was deleted or replaced") != NULL &&
	         strstr(body, "checkpointed into the database") != NULL)) {
		if (hn_now_ms() - start > 10000) {
			fail_msg("/readyz did not report the deleted log: \"%s\"", body);
		}
		usleep(50 * 1000);
	}
	assert_int_equal(daemon_log_wait(&t_d,
	                                 "-wal\" was deleted or replaced while the daemon held "
	                                 "it open",
	                                 0),
	                 0);
	assert_int_equal(
	        daemon_log_wait(&t_d, "a restart now keeps every acknowledged callback", 0), 0);
	/* No callback is acknowledged now: neither a new one nor a duplicate. */
	{
		char *late = fx_stripe_payment("evt_wal_late", t_ids[T_ORDERS - 1],
		                               1000 + T_ORDERS - 1, "usd");
		char *again = fx_stripe_payment("evt_wal_0", t_ids[0], 1000, "usd");

		assert_int_equal(fx_stripe_send(&t_d, late, NULL), 503);
		assert_int_equal(fx_stripe_send(&t_d, again, NULL), 503);
		free(late);
		free(again);
	}

	daemon_kill9(&t_d);
	assert_int_equal(daemon_start(&t_d), 0);
	for (i = 0; i < T_ORDERS; i++) {
		int64_t paid = fx_db_int(&t_d, "SELECT status = 'paid' FROM orders WHERE id = '%s'",
		                         t_ids[i]);

		if (t_status[i] == 200) {
			acked++;
			if (paid != 1) {
				fail_msg("order %zu was acknowledged (200) and is lost after the "
				         "restart",
				         i);
			}
		} else {
			assert_int_equal(t_status[i], 503);
			assert_int_equal(paid, 0);
		}
	}
	print_message("acknowledged %zu of %d; all of them kept\n", acked, T_ORDERS);
	assert_true(acked >= T_BEFORE);
	assert_int_equal(fx_db_int(&t_d, "SELECT COUNT(*) FROM orders"), T_ORDERS);
	assert_int_equal(fx_db_int(&t_d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	                 (int64_t)acked);
	/* And it serves again. */
	assert_int_equal(t_readyz(body, sizeof(body)), 200);
	assert_int_equal(daemon_term(&t_d, 30), 0);
	daemon_finish(&t_d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_deleted_wal_stops_acknowledging_and_loses_no_acknowledged_callback),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
