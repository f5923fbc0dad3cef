/* test_crash.c: kill -9 the daemon during a load of unique callbacks, restart,
 * resend everything: each order paid exactly once, nothing acknowledged lost. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fixtures.h"

#define CRASH_ORDERS 240
#define CRASH_SENDERS 8

struct crash {
	struct daemon cr_daemon;
	char cr_ids[CRASH_ORDERS][64];
	char *cr_bodies[CRASH_ORDERS];
	int cr_acked[CRASH_ORDERS]; /* got a 2xx before the kill */
	atomic_int cr_next;
	atomic_int cr_acks;
};

static void *crash_sender(void *p)
{
	struct crash *c = p;

	for (;;) {
		int i = atomic_fetch_add(&c->cr_next, 1);
		struct hres r;

		if (i >= CRASH_ORDERS) {
			break;
		}
		if (hn_post_stripe(&c->cr_daemon, "stripe", FX_STRIPE_SECRET, c->cr_bodies[i], &r) == 0 &&
		    r.hs_status >= 200 && r.hs_status < 300) {
			c->cr_acked[i] = 1;
			atomic_fetch_add(&c->cr_acks, 1);
		}
		hres_finish(&r);
	}
	return NULL;
}

static void test_kill_during_load_loses_no_acknowledged_callback_and_pays_once(void **state)
{
	struct crash *c = calloc(1, sizeof(*c));
	pthread_t senders[CRASH_SENDERS];
	struct timespec pause = {0, 2 * 1000 * 1000};
	int acked_before = 0;
	int i;

	assert_non_null(c);
	fx_daemon_start(&c->cr_daemon, FX_STRIPE_INI);
	for (i = 0; i < CRASH_ORDERS; i++) {
		char event_id[64];

		fx_order(&c->cr_daemon, 100 + i, "usd", c->cr_ids[i]);
		snprintf(event_id, sizeof(event_id), "evt_crash_%d", i);
		c->cr_bodies[i] = fx_stripe_payment(event_id, c->cr_ids[i], 100 + i, "usd");
	}
	atomic_init(&c->cr_next, 0);
	atomic_init(&c->cr_acks, 0);
	for (i = 0; i < CRASH_SENDERS; i++) {
		assert_int_equal(pthread_create(&senders[i], NULL, crash_sender, c), 0);
	}
	/* Kill in the middle of the load, not before or after it. */
	while (atomic_load(&c->cr_acks) < CRASH_ORDERS / 3) {
		nanosleep(&pause, NULL);
	}
	daemon_kill9(&c->cr_daemon);
	for (i = 0; i < CRASH_SENDERS; i++) {
		pthread_join(senders[i], NULL);
	}
	for (i = 0; i < CRASH_ORDERS; i++) {
		acked_before += c->cr_acked[i];
	}
	print_message("acknowledged before the kill: %d of %d\n", acked_before, CRASH_ORDERS);
	assert_true(acked_before < CRASH_ORDERS);

	assert_int_equal(daemon_start(&c->cr_daemon), 0);
	/* Nothing that was acknowledged is lost. */
	for (i = 0; i < CRASH_ORDERS; i++) {
		if (c->cr_acked[i]) {
			assert_int_equal(fx_db_int(&c->cr_daemon,
						     "SELECT status = 'paid' FROM orders WHERE id = '%s'", c->cr_ids[i]),
					 1);
		}
	}
	/* The provider retries everything; each applies once. */
	for (i = 0; i < CRASH_ORDERS; i++) {
		struct hres r;

		assert_int_equal(hn_post_stripe(&c->cr_daemon, "stripe", FX_STRIPE_SECRET, c->cr_bodies[i], &r), 0);
		assert_int_equal(r.hs_status, 200);
		hres_finish(&r);
	}
	assert_int_equal(hn_db_int(c->cr_daemon.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
			 CRASH_ORDERS);
	assert_int_equal(hn_db_int(c->cr_daemon.dm_db, "SELECT COUNT(*) FROM points_ledger"), CRASH_ORDERS);
	assert_int_equal(hn_db_int(c->cr_daemon.dm_db, "SELECT COUNT(*) FROM idempotency_records WHERE status = 'done'"),
			 CRASH_ORDERS);
	assert_int_equal(hn_db_int(c->cr_daemon.dm_db,
				   "SELECT COUNT(*) FROM idempotency_records WHERE status = 'processing'"),
			 0);
	/* The ledger agrees with the orders: points = floor(amount / 100). */
	assert_int_equal(hn_db_int(c->cr_daemon.dm_db,
				   "SELECT COUNT(*) FROM orders o JOIN points_ledger l ON l.order_id = o.id "
				   "WHERE l.points != o.amount / 100"),
			 0);
	{
		char *check = hn_db_dump(c->cr_daemon.dm_db, "PRAGMA integrity_check");

		assert_non_null(check);
		assert_string_equal(check, "ok\n");
		free(check);
	}
	for (i = 0; i < CRASH_ORDERS; i++) {
		free(c->cr_bodies[i]);
	}
	daemon_finish(&c->cr_daemon);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_during_load_loses_no_acknowledged_callback_and_pays_once),
	};

	return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
