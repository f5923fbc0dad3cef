/* test_pg_failover.c: three receivers on one PostgreSQL database behind a
 * provider that retries; one is killed with SIGKILL mid-load and started
 * again. Every acknowledged callback is applied exactly once, no key is
 * left processing, and every outbox row reaches the shop with its key. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "peer.h"
#include "pg_common.h"

#define FAILOVER_EVENTS 60
#define FAILOVER_SENDERS 6
#define FAILOVER_TRIES 400 /* per event: a provider's retries, bounded */
#define FAILOVER_RETRY_MS 25
#define FAILOVER_WAIT_S 60
#define FAILOVER_VICTIM 1

struct failover {
	struct daemon fo_r[PG_RECEIVERS];
	char fo_ids[FAILOVER_EVENTS][64];
	char *fo_bodies[FAILOVER_EVENTS];
	char *fo_ack[FAILOVER_EVENTS]; /* the body of the first 200 */
	size_t fo_ack_len[FAILOVER_EVENTS];
	atomic_int fo_next;
	atomic_int fo_acked;
	atomic_int fo_failed_tries; /* refused, reset, or answered other than 200 */
};

/* A provider (or a load balancer in front of the receivers): sends an event
 * to one receiver and, when that fails, retries on the next one. */
static void *failover_sender(void *arg)
{
	struct failover *f = arg;
	int e;

	while ((e = atomic_fetch_add(&f->fo_next, 1)) < FAILOVER_EVENTS) {
		int t;

		for (t = 0; t < FAILOVER_TRIES; t++) {
			struct pg_callback cb;
			struct hres r;

			/* The receivers' ports stay put across the restart: read
			 * the base each try. */
			pg_callback_init(&cb, &f->fo_r[(e + t) % PG_RECEIVERS], f->fo_bodies[e]);
			if (pg_callback_send(&cb, &r) == 0 && r.hs_status == 200) {
				f->fo_ack[e] = r.hs_body;
				f->fo_ack_len[e] = r.hs_body_len;
				r.hs_body = NULL;
				hres_finish(&r);
				atomic_fetch_add(&f->fo_acked, 1);
				break;
			}
			hres_finish(&r);
			atomic_fetch_add(&f->fo_failed_tries, 1);
			usleep(FAILOVER_RETRY_MS * 1000);
		}
	}
	return NULL;
}

static void test_a_receiver_killed_mid_load_loses_nothing_and_applies_nothing_twice(void **state)
{
	struct failover *f = calloc(1, sizeof(*f));
	struct peer *p = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	pthread_t senders[FAILOVER_SENDERS];
	struct daemon *victim;
	int64_t killed_ms;
	int64_t restart_ms;
	size_t again = 0;
	char ini[2048];
	char *rows;
	char *line;
	size_t n_req;
	size_t i;
	int e;

	assert_non_null(f);
	assert_non_null(p);
	victim = &f->fo_r[FAILOVER_VICTIM];
	peer_default(p, "/notify", &ok);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI
	         "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\nretry_cap = 300ms\n"
	         "poll = 50ms\ntimeout = 2s\nconnect_timeout = 1s\nconcurrency = 4\n"
	         /* the killed receiver's rows are due again after this */
	         "lease = 3s\n",
	         peer_base(p));
	assert_int_equal(pg_receivers_start(f->fo_r, PG_RECEIVERS, ini), 0);
	for (e = 0; e < FAILOVER_EVENTS; e++) {
		char event_id[64];

		assert_int_equal(hn_order_create(&f->fo_r[0], 2000 + e, "eur", f->fo_ids[e]), 0);
		snprintf(event_id, sizeof(event_id), "evt_pg_failover_%d", e);
		f->fo_bodies[e] = fx_stripe_payment(event_id, f->fo_ids[e], 2000 + e, "eur");
	}
	atomic_init(&f->fo_next, 0);
	atomic_init(&f->fo_acked, 0);
	atomic_init(&f->fo_failed_tries, 0);
	for (i = 0; i < FAILOVER_SENDERS; i++) {
		assert_int_equal(pthread_create(&senders[i], NULL, failover_sender, f), 0);
	}
	/* Kill one receiver once the load is under way; the senders go on to
	 * the other two. */
	while (atomic_load(&f->fo_acked) < FAILOVER_EVENTS / 4) {
		usleep(2000);
	}
	daemon_kill9(victim);
	killed_ms = hn_now_ms();
	print_message("killed receiver %d after %d acknowledgements\n", FAILOVER_VICTIM,
	              atomic_load(&f->fo_acked));
	/* Start it again while the others still take the load (or once
	 * every sender has taken its last event). */
	while (atomic_load(&f->fo_acked) < FAILOVER_EVENTS * 3 / 4 &&
	       atomic_load(&f->fo_next) < FAILOVER_EVENTS + FAILOVER_SENDERS) {
		usleep(2000);
	}
	restart_ms = hn_now_ms();
	assert_int_equal(daemon_start(victim), 0);
	for (i = 0; i < FAILOVER_SENDERS; i++) {
		pthread_join(senders[i], NULL);
	}
	print_message("acknowledged %d of %d; failed tries (refused, reset, 5xx) %d\n",
	              atomic_load(&f->fo_acked), FAILOVER_EVENTS, atomic_load(&f->fo_failed_tries));
	assert_int_equal(atomic_load(&f->fo_acked), FAILOVER_EVENTS);

	/* Every acknowledged callback applied exactly once. */
	assert_int_equal(
	        hn_db_int(victim->dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	        FAILOVER_EVENTS);
	assert_int_equal(hn_db_int(victim->dm_db, "SELECT COUNT(*) FROM points_ledger"),
	                 FAILOVER_EVENTS);
	assert_int_equal(hn_db_int(victim->dm_db, "SELECT COUNT(*) FROM events"), FAILOVER_EVENTS);
	/* The killed receiver's open transaction died with its connection: no
	 * key is left processing, none is failed. */
	assert_int_equal(
	        hn_db_int(victim->dm_db,
	                  "SELECT COUNT(*) FROM idempotency_records WHERE status <> 'done'"),
	        0);
	assert_int_equal(hn_db_int(victim->dm_db, "SELECT COUNT(*) FROM idempotency_records"),
	                 FAILOVER_EVENTS);

	/* The restarted receiver answers every event with the stored reply. */
	for (e = 0; e < FAILOVER_EVENTS; e++) {
		struct pg_callback cb;
		struct hres r;
		char *replayed;

		pg_callback_init(&cb, victim, f->fo_bodies[e]);
		assert_int_equal(pg_callback_send(&cb, &r), 0);
		assert_int_equal(r.hs_status, 200);
		replayed = hres_header(&r, "Idempotent-Replayed");
		assert_non_null(replayed);
		free(replayed);
		assert_int_equal(r.hs_body_len, f->fo_ack_len[e]);
		assert_memory_equal(r.hs_body, f->fo_ack[e], r.hs_body_len);
		hres_finish(&r);
	}

	/* Every outbox row delivered, each with its own key on every attempt. */
	assert_int_equal(hn_db_int(victim->dm_db, "SELECT COUNT(*) FROM outbox"), FAILOVER_EVENTS);
	assert_int_equal(hn_db_wait_int(victim->dm_db,
	                                "SELECT COUNT(*) FROM outbox WHERE status = 'succeeded'",
	                                FAILOVER_EVENTS, FAILOVER_WAIT_S),
	                 FAILOVER_EVENTS);
	rows = hn_db_dump(victim->dm_db, "SELECT idem_key, order_id FROM outbox ORDER BY id");
	assert_non_null(rows);
	n_req = peer_count(p);
	print_message("deliveries seen: %zu for %d rows\n", n_req, FAILOVER_EVENTS);
	for (line = rows; *line != '\0';) {
		char *eol = strchr(line, '\n');
		char *bar = strchr(line, '|');
		size_t seen = 0;
		int64_t first_ms = INT64_MAX;

		assert_non_null(eol);
		assert_non_null(bar);
		*eol = '\0';
		*bar = '\0';
		for (i = 0; i < n_req; i++) {
			struct peer_request q;

			assert_int_equal(peer_request(p, i, &q), 0);
			if (q.pq_idem_key != NULL && strcmp(q.pq_idem_key, line) == 0) {
				seen++;
				assert_non_null(strstr(q.pq_body, bar + 1));
				if (q.pq_at_ms < first_ms) {
					first_ms = q.pq_at_ms;
				}
			} else {
				assert_null(strstr(q.pq_body, bar + 1));
			}
			peer_request_finish(&q);
		}
		/* Once; again only when the killed receiver had delivered it
		 * and died before recording that (at least once, one key): the
		 * first delivery came before the restart. A receiver that
		 * starts takes back only expired leases, never rows the others
		 * are delivering. */
		assert_true(seen >= 1);
		if (seen > 1) {
			print_message("row %s: %zu deliveries, the first %+" PRId64
			              " ms from the kill\n",
			              line, seen, first_ms - killed_ms);
			if (first_ms >= restart_ms) {
				fail_msg("row %s was delivered %zu times, the first after the "
				         "restart",
				         line, seen);
			}
			again += seen - 1;
		}
		line = eol + 1;
	}
	free(rows);
	print_message("delivered again after the kill: %zu\n", again);
	assert_int_equal(n_req, FAILOVER_EVENTS + again);

	for (e = 0; e < FAILOVER_EVENTS; e++) {
		free(f->fo_bodies[e]);
		free(f->fo_ack[e]);
	}
	pg_receivers_finish(f->fo_r, PG_RECEIVERS);
	peer_destroy(p);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_receiver_killed_mid_load_loses_nothing_and_applies_nothing_twice),
	};

	pgserver_require_or_skip("test_pg_failover");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
