/* test_pg_locks.c: a callback that meets a lock another session holds (a
 * long transaction of another program on the order's row, or on the
 * idempotency table itself) is answered 503 after one statement_timeout,
 * not after several; it leaves nothing behind, and the provider's retry is
 * applied once the lock is gone. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_common.h"

#define LOCKS_TIMEOUT_MS 1000 /* [store] statement_timeout below */
#define LOCKS_HOLD_S 60       /* the holder's sleep: it is terminated long before */

static const char locks_ini[] = FX_STRIPE_INI "\n[store]\nstatement_timeout = 1s\n";

struct holder {
	const struct daemon *hd_d;
	char hd_sql[512];
	pthread_t hd_thread;
};

/* The holder's session: its lock, then a sleep in the same transaction. */
static void *holder_main(void *arg)
{
	struct holder *hd = arg;

	/* Fails when terminated: that is how the lock is released. */
	pgserver_psql(pgserver_shared(NULL), hd->hd_d->dm_pg_db, hd->hd_sql, NULL);
	return NULL;
}

static int64_t holder_sessions(const struct daemon *d, const char *what)
{
	char sql[512];
	char *out = NULL;
	int64_t n;

	snprintf(sql, sizeof(sql),
	         "SELECT %s FROM pg_stat_activity WHERE datname = '%s' AND query LIKE "
	         "'%%pg_sleep(%d)%%' AND pid <> pg_backend_pid() AND wait_event = 'PgSleep'",
	         what, d->dm_pg_db, LOCKS_HOLD_S);
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), d->dm_pg_db, sql, &out), 0);
	assert_non_null(out);
	n = strtoll(out, NULL, 10);
	free(out);
	return n;
}

/* Takes the lock lock_sql takes in a session of its own and returns once
 * that session holds it (it sleeps in its transaction). */
static void holder_start(struct holder *hd, const struct daemon *d, const char *lock_sql)
{
	int tries;

	hd->hd_d = d;
	snprintf(hd->hd_sql, sizeof(hd->hd_sql), "BEGIN; %s; SELECT pg_sleep(%d); COMMIT;",
	         lock_sql, LOCKS_HOLD_S);
	assert_int_equal(pthread_create(&hd->hd_thread, NULL, holder_main, hd), 0);
	for (tries = 0; tries < 500 && holder_sessions(d, "count(*)") != 1; tries++) {
		usleep(20 * 1000);
	}
	assert_int_equal(holder_sessions(d, "count(*)"), 1);
}

/* Ends the holder's session: its transaction rolls back, the lock goes. */
static void holder_release(struct holder *hd)
{
	assert_int_equal(holder_sessions(hd->hd_d, "count(pg_terminate_backend(pid))"), 1);
	pthread_join(hd->hd_thread, NULL);
}

/* Sends the callback and returns its status; *ret_ms gets how long the
 * answer took. */
static long locks_send(struct daemon *d, const char *body, int64_t *ret_ms)
{
	int64_t t0 = hn_now_ms();
	long status = fx_stripe_send(d, body, NULL);

	*ret_ms = hn_now_ms() - t0;
	return status;
}

/* Another session holds the order's row (row_lock) or the idempotency
 * table; the callback is answered 503 after about one statement_timeout,
 * with nothing stored; after the release the same callback is applied
 * once. */
static void locks_scenario(const char *event_id, int row_lock)
{
	struct daemon d;
	struct holder hd;
	char lock_sql[256];
	char id[64];
	char *body;
	int64_t ms;

	assert_int_equal(daemon_init_pg(&d, locks_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 4200, "eur", id);
	body = fx_stripe_payment(event_id, id, 4200, "eur");
	if (row_lock) {
		snprintf(lock_sql, sizeof(lock_sql),
		         "SELECT 1 FROM orders WHERE id = '%s' FOR UPDATE", id);
	} else {
		snprintf(lock_sql, sizeof(lock_sql),
		         "LOCK TABLE idempotency_records IN ACCESS EXCLUSIVE MODE");
	}

	holder_start(&hd, &d, lock_sql);
	assert_int_equal(locks_send(&d, body, &ms), 503);
	print_message("%s: answered 503 after %lld ms (statement_timeout %d ms)\n", event_id,
	              (long long)ms, LOCKS_TIMEOUT_MS);
	/* One wait, not one per place the claim met the lock; generous
	 * against a loaded machine, and at least the bound itself. */
	assert_true(ms >= LOCKS_TIMEOUT_MS - 100);
	assert_true(ms < 2 * LOCKS_TIMEOUT_MS);
	holder_release(&hd);

	/* Nothing of the callback was kept: its key is free. */
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM idempotency_records"), 0);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), 0);

	/* The provider's retry, the lock gone: applied, once. */
	assert_int_equal(locks_send(&d, body, &ms), 200);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM idempotency_records"), 1);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), 1);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM points_ledger"), 1);
	free(body);
	daemon_finish(&d);
}

/* Another program holds the order's row (SELECT ... FOR UPDATE in a long
 * transaction): the claim's handler waits on it in its batch. */
static void test_a_callback_meeting_a_row_lock_is_answered_503_after_one_timeout(void **state)
{
	(void)state;
	locks_scenario("evt_pg_lock_row", 1);
}

/* Another program holds the idempotency table (a LOCK TABLE, an ALTER
 * TABLE in a long transaction): the read that looks for a stored reply
 * waits on it first. */
static void test_a_callback_meeting_a_table_lock_is_answered_503_after_one_timeout(void **state)
{
	(void)state;
	locks_scenario("evt_pg_lock_table", 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_callback_meeting_a_row_lock_is_answered_503_after_one_timeout),
	        cmocka_unit_test(
	                test_a_callback_meeting_a_table_lock_is_answered_503_after_one_timeout),
	};

	pgserver_require_or_skip("test_pg_locks");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
