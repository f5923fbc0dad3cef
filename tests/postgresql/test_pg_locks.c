/* test_pg_locks.c: a callback that meets a lock another session holds (a
 * long transaction of another program on the order's row, or on the
 * idempotency table itself) is answered 503 after one statement_timeout,
 * not after several; it leaves nothing behind, and the provider's retry is
 * applied once the lock is gone. A batch with two such callbacks waits the
 * bound once, not once for each. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "integration/prom_text.h"
#include "pg_common.h"

#define LOCKS_TIMEOUT_MS 1000 /* [store] statement_timeout below */
#define LOCKS_HOLD_S 60       /* the holder's sleep: it is terminated long before */

static const char locks_ini[] = FX_STRIPE_INI "\n[store]\nstatement_timeout = 1s\n";

/* One writer, so that callbacks queued together are one batch; a bound
 * long enough for them to queue while the writer waits on a lock. */
#define LOCKS_BATCH_TIMEOUT_MS 2000
static const char locks_batch_ini[] =
        FX_STRIPE_INI "\n[store]\nstatement_timeout = 2s\npg_writers = 1\n";

struct holder {
	const struct daemon *hd_d;
	char hd_tag[32]; /* tells this holder's session from the others' */
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

static int64_t holder_sessions(const struct holder *hd, const char *what)
{
	const struct daemon *d = hd->hd_d;
	char sql[512];
	char *out = NULL;
	int64_t n;

	snprintf(sql, sizeof(sql),
	         "SELECT %s FROM pg_stat_activity WHERE datname = '%s' AND query LIKE "
	         "'%%pg_sleep(%d) AS %s%%' AND pid <> pg_backend_pid() AND wait_event = "
	         "'PgSleep'",
	         what, d->dm_pg_db, LOCKS_HOLD_S, hd->hd_tag);
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
	static unsigned made;
	int tries;

	hd->hd_d = d;
	snprintf(hd->hd_tag, sizeof(hd->hd_tag), "holder_%u", ++made);
	snprintf(hd->hd_sql, sizeof(hd->hd_sql), "BEGIN; %s; SELECT pg_sleep(%d) AS %s; COMMIT;",
	         lock_sql, LOCKS_HOLD_S, hd->hd_tag);
	assert_int_equal(pthread_create(&hd->hd_thread, NULL, holder_main, hd), 0);
	for (tries = 0; tries < 500 && holder_sessions(hd, "count(*)") != 1; tries++) {
		usleep(20 * 1000);
	}
	assert_int_equal(holder_sessions(hd, "count(*)"), 1);
}

/* Another session holding the row of order id. */
static void holder_start_row(struct holder *hd, const struct daemon *d, const char *id)
{
	char lock_sql[256];

	snprintf(lock_sql, sizeof(lock_sql), "SELECT 1 FROM orders WHERE id = '%s' FOR UPDATE", id);
	holder_start(hd, d, lock_sql);
}

/* Ends the holder's session: its transaction rolls back, the lock goes. */
static void holder_release(struct holder *hd)
{
	assert_int_equal(holder_sessions(hd, "count(pg_terminate_backend(pid))"), 1);
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
		holder_start_row(&hd, &d, id);
	} else {
		snprintf(lock_sql, sizeof(lock_sql),
		         "LOCK TABLE idempotency_records IN ACCESS EXCLUSIVE MODE");
		holder_start(&hd, &d, lock_sql);
	}

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

/* ---- two locks in one batch ---- */

#define LOCKS_BATCH_N 4 /* callbacks of the batch: two meet a lock, two do not */

struct locks_sender {
	struct pg_callback ls_cb;
	struct hres ls_res;
	int ls_rc;
	int64_t ls_done_ms;
	pthread_t ls_thread;
};

static void *locks_sender_main(void *arg)
{
	struct locks_sender *ls = arg;

	ls->ls_rc = pg_callback_send(&ls->ls_cb, &ls->ls_res);
	ls->ls_done_ms = hn_now_ms();
	return NULL;
}

static void locks_sender_start(struct locks_sender *ls, const struct daemon *d, const char *body)
{
	memset(ls, 0, sizeof(*ls));
	pg_callback_init(&ls->ls_cb, d, body);
	assert_int_equal(pthread_create(&ls->ls_thread, NULL, locks_sender_main, ls), 0);
}

static long locks_sender_join(struct locks_sender *ls)
{
	long status;

	pthread_join(ls->ls_thread, NULL);
	assert_int_equal(ls->ls_rc, 0);
	status = ls->ls_res.hs_status;
	hres_finish(&ls->ls_res);
	return status;
}

/* Sessions of the receiver's writer that wait for a lock. */
static int64_t locks_writer_waiting(const struct daemon *d)
{
	char sql[512];
	char *out = NULL;
	int64_t n;

	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND "
	         "application_name = 'idemhook writer' AND wait_event_type = 'Lock'",
	         d->dm_pg_db);
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), d->dm_pg_db, sql, &out), 0);
	assert_non_null(out);
	n = strtoll(out, NULL, 10);
	free(out);
	return n;
}

/* Batches of more than three units the receiver ran so far. */
static double locks_big_batches(struct daemon *d)
{
	static struct prom_text p;
	char url[128];
	struct hres r;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	if (prom_parse(&p, r.hs_body) < 0) {
		fail_msg("/metrics is not valid exposition text: %s", p.pt_error);
	}
	hres_finish(&r);
	return prom_sum(&p, "idemhook_store_batch_size_count", "") -
	       prom_sum(&p, "idemhook_store_batch_size_bucket", "le=\"3\"");
}

/* Two callbacks of one batch meet two row locks of two other sessions:
 * the batch waits the bound once (the first), the second is cut short;
 * both are answered 503 with nothing stored, the other callbacks of the
 * batch are applied and answered 200 as soon. To have them in one batch,
 * the one writer is first kept waiting on a third lock (the plug) while
 * they queue, and that lock is let go. */
static void test_two_callbacks_meeting_two_locks_in_one_batch_wait_one_timeout(void **state)
{
	static const char *const events[LOCKS_BATCH_N] = {"evt_pg_batch_a", "evt_pg_batch_b",
	                                                  "evt_pg_batch_c", "evt_pg_batch_d"};
	struct locks_sender plug;
	struct locks_sender senders[LOCKS_BATCH_N];
	struct holder hd_plug;
	struct holder hd[2];
	char plug_id[64];
	char ids[LOCKS_BATCH_N][64];
	char *bodies[LOCKS_BATCH_N];
	char *plug_body;
	struct daemon d;
	int64_t released;
	int64_t ms;
	size_t i;
	int tries;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, locks_batch_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 4200, "eur", plug_id);
	for (i = 0; i < LOCKS_BATCH_N; i++) {
		fx_order(&d, 4200, "eur", ids[i]);
		bodies[i] = fx_stripe_payment(events[i], ids[i], 4200, "eur");
	}
	plug_body = fx_stripe_payment("evt_pg_batch_plug", plug_id, 4200, "eur");

	/* The plug: the writer waits on its order's row. */
	holder_start_row(&hd_plug, &d, plug_id);
	holder_start_row(&hd[0], &d, ids[0]);
	holder_start_row(&hd[1], &d, ids[1]);
	locks_sender_start(&plug, &d, plug_body);
	for (tries = 0; tries < 500 && locks_writer_waiting(&d) != 1; tries++) {
		usleep(10 * 1000);
	}
	assert_int_equal(locks_writer_waiting(&d), 1);

	/* The batch queues behind it: a and b meet the other two locks. */
	for (i = 0; i < LOCKS_BATCH_N; i++) {
		locks_sender_start(&senders[i], &d, bodies[i]);
	}
	usleep(400 * 1000);
	released = hn_now_ms();
	holder_release(&hd_plug);
	assert_int_equal(locks_sender_join(&plug), 200);

	for (i = 0; i < LOCKS_BATCH_N; i++) {
		long status = locks_sender_join(&senders[i]);

		ms = senders[i].ls_done_ms - released;
		print_message("%s: answered %ld after %lld ms (statement_timeout %d ms)\n",
		              events[i], status, (long long)ms, LOCKS_BATCH_TIMEOUT_MS);
		assert_int_equal(status, i < 2 ? 503 : 200);
		/* One bound for the batch, not one per lock it meets. */
		assert_true(ms < LOCKS_BATCH_TIMEOUT_MS * 3 / 2);
		if (i < 2) {
			assert_true(ms >= LOCKS_BATCH_TIMEOUT_MS - 100);
		}
	}
	/* They were one batch (else this test proves nothing). */
	assert_true(locks_big_batches(&d) >= 1);
	holder_release(&hd[0]);
	holder_release(&hd[1]);

	/* Nothing of a and b was kept; c and d and the plug were applied. */
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM idempotency_records"), 3);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), 3);

	/* The providers' retries, the locks gone: applied, once each. */
	for (i = 0; i < 2; i++) {
		assert_int_equal(locks_send(&d, bodies[i], &ms), 200);
	}
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), 5);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM points_ledger"), 5);
	for (i = 0; i < LOCKS_BATCH_N; i++) {
		free(bodies[i]);
	}
	free(plug_body);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_callback_meeting_a_row_lock_is_answered_503_after_one_timeout),
	        cmocka_unit_test(
	                test_a_callback_meeting_a_table_lock_is_answered_503_after_one_timeout),
	        cmocka_unit_test(
	                test_two_callbacks_meeting_two_locks_in_one_batch_wait_one_timeout),
	};

	pgserver_require_or_skip("test_pg_locks");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
