/* test_pg_reconnect.c: a receiver whose PostgreSQL connections the server
 * closes (pg_terminate_backend, as a restart or a failover of the server
 * does). Readers reconnect and answer without a 503; the writer's
 * connection killed mid-batch under load loses no acknowledged callback and
 * applies none twice, the receiver reconnects, and /readyz tells what
 * happened meanwhile. A database out of reach for a while is logged once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_common.h"

#define RECONNECT_ORDERS 8
#define RECONNECT_ROUNDS 3
#define RECONNECT_EVENTS 1000
#define RECONNECT_SENDERS 6
#define RECONNECT_KILLS 6
#define RECONNECT_TRIES 400 /* per event: a provider's retries, bounded */
#define RECONNECT_RETRY_MS 20

static const char reconnect_ini[] = FX_STRIPE_INI "\n[api]\nrate = 1000\nburst = 1000\n";

/* Terminates the receiver's backends of one role ("idemhook reader",
 * "idemhook writer": every writer connection, "idemhook writer 2" too) on
 * d's database and, with wait, waits until they are
 * gone. Returns how many were terminated. */
static int reconnect_kill_q(const struct daemon *d, const char *role, int wait)
{
	struct pgserver *pg = pgserver_shared(NULL);
	char sql[512];
	char *out = NULL;
	int killed;
	int tries;

	snprintf(sql, sizeof(sql),
	         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
	         "'%s' AND application_name LIKE '%s%%'",
	         d->dm_pg_db, role);
	assert_non_null(pg);
	assert_int_equal(pgserver_psql(pg, d->dm_pg_db, sql, &out), 0);
	assert_non_null(out);
	killed = atoi(out);
	free(out);
	if (!wait) {
		return killed;
	}
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND application_name "
	         "LIKE '%s%%'",
	         d->dm_pg_db, role);
	for (tries = 0; tries < 100; tries++) {
		out = NULL;
		assert_int_equal(pgserver_psql(pg, d->dm_pg_db, sql, &out), 0);
		if (out != NULL && atoi(out) == 0) {
			free(out);
			break;
		}
		free(out);
		usleep(20 * 1000);
	}
	return killed;
}

static int reconnect_kill(const struct daemon *d, const char *role)
{
	return reconnect_kill_q(d, role, 1);
}

/* The database of d refuses connections from now, as a server being
 * restarted does, and the sessions it has are closed, in that order
 * (pgserver_alter_db_and_close: a receiver reconnecting in between would
 * be let in, and keep that session). Returns how many sessions were
 * terminated. */
static int reconnect_refuse(const struct daemon *d)
{
	struct pgserver *pg = pgserver_shared(NULL);
	int killed;

	assert_non_null(pg);
	killed = pgserver_alter_db_and_close(pg, d->dm_pg_db, "ALLOW_CONNECTIONS false");
	assert_true(killed >= 0);
	return killed;
}

static long reconnect_get_order(const struct daemon *d, const char *id)
{
	char url[256];
	struct hres r;
	long status;

	snprintf(url, sizeof(url), "%s/api/orders/%s", d->dm_base, id);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	status = r.hs_status;
	if (status == 200) {
		assert_non_null(strstr(r.hs_body, "\"status\":\"paid\""));
	}
	hres_finish(&r);
	return status;
}

/* /readyz: 1 when ready, 0 when not; the body into ret (size bytes). */
static int reconnect_readyz(const struct daemon *d, char *ret, size_t size)
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

/* Polls /readyz until its body holds text; 0 when it did within
 * timeout_ms, else -1 (the last body printed). */
static int reconnect_readyz_wait(const struct daemon *d, const char *text, int timeout_ms)
{
	char body[512] = "";
	int waited;

	for (waited = 0; waited < timeout_ms; waited += 25) {
		reconnect_readyz(d, body, sizeof(body));
		if (strstr(body, text) != NULL) {
			print_message("readyz: %s", body);
			return 0;
		}
		usleep(25 * 1000);
	}
	print_message("readyz never said \"%s\"; last: %s\n", text, body);
	return -1;
}

/* The server closes every read connection of the pool between rounds of
 * reads: each read (an order, a duplicate's stored reply) still answers,
 * on a new session, never 503. */
static void test_readers_answer_after_the_server_closed_their_connections(void **state)
{
	struct daemon d;
	char ids[RECONNECT_ORDERS][64];
	char event_id[64];
	char *bodies[RECONNECT_ORDERS];
	int round;
	int killed;
	int i;

	assert_int_equal(daemon_init_pg(&d, reconnect_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	for (i = 0; i < RECONNECT_ORDERS; i++) {
		fx_order(&d, 1000 + i, "eur", ids[i]);
		snprintf(event_id, sizeof(event_id), "evt_pg_readers_%d", i);
		bodies[i] = fx_stripe_payment(event_id, ids[i], 1000 + i, "eur");
		assert_int_equal(fx_stripe_send(&d, bodies[i], NULL), 200);
	}
	for (round = 0; round < RECONNECT_ROUNDS; round++) {
		/* The pool holds connections that served reads... */
		for (i = 0; i < RECONNECT_ORDERS; i++) {
			assert_int_equal(reconnect_get_order(&d, ids[i]), 200);
		}
		/* ...which the server closes, the writer's with them. */
		killed = reconnect_kill(&d, "idemhook reader");
		reconnect_kill(&d, "idemhook writer");
		print_message("round %d: %d read connections closed by the server\n", round,
		              killed);
		assert_true(killed > 0);
		for (i = 0; i < RECONNECT_ORDERS; i++) {
			struct hres r;
			char *replayed;

			assert_int_equal(reconnect_get_order(&d, ids[i]), 200);
			assert_int_equal(fx_stripe_send(&d, bodies[i], &r), 200);
			replayed = hres_header(&r, "Idempotent-Replayed");
			assert_non_null(replayed);
			free(replayed);
			hres_finish(&r);
		}
	}
	assert_int_equal(daemon_log_wait(&d, "reconnected to postgresql", 1000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	                 RECONNECT_ORDERS);
	for (i = 0; i < RECONNECT_ORDERS; i++) {
		free(bodies[i]);
	}
	daemon_finish(&d);
}

struct storm {
	struct daemon *sm_d;
	char *sm_bodies[RECONNECT_EVENTS];
	char *sm_ack[RECONNECT_EVENTS]; /* the body of the first 200 */
	size_t sm_ack_len[RECONNECT_EVENTS];
	atomic_int sm_next;
	atomic_int sm_acked;
	atomic_int sm_503;
};

/* A provider: sends each event until it is answered 200. */
static void *storm_sender(void *arg)
{
	struct storm *sm = arg;
	int e;

	while ((e = atomic_fetch_add(&sm->sm_next, 1)) < RECONNECT_EVENTS) {
		int t;

		for (t = 0; t < RECONNECT_TRIES; t++) {
			struct hres r;

			if (hn_post_stripe(sm->sm_d, "stripe", FX_STRIPE_SECRET, sm->sm_bodies[e],
			                   &r) == 0 &&
			    r.hs_status == 200) {
				sm->sm_ack[e] = r.hs_body;
				sm->sm_ack_len[e] = r.hs_body_len;
				r.hs_body = NULL;
				hres_finish(&r);
				atomic_fetch_add(&sm->sm_acked, 1);
				break;
			}
			if (r.hs_status == 503) {
				atomic_fetch_add(&sm->sm_503, 1);
			}
			hres_finish(&r);
			usleep(RECONNECT_RETRY_MS * 1000);
		}
	}
	return NULL;
}

/* The writer's backend is terminated again and again while callbacks
 * pour in: what was acknowledged is applied once, what was not is
 * answered 503 and applied once on the provider's retry. */
static void
test_the_writers_connection_killed_under_load_loses_nothing_and_applies_nothing_twice(void **state)
{
	struct storm *sm = calloc(1, sizeof(*sm));
	struct daemon d;
	pthread_t senders[RECONNECT_SENDERS];
	char event_id[64];
	char order_id[64];
	char sql[512];
	char body[512];
	int kills = 0;
	int e;
	size_t i;

	assert_non_null(sm);
	assert_int_equal(daemon_init_pg(&d, reconnect_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	sm->sm_d = &d;
	/* The orders in one statement: a thousand CLI runs take long. */
	snprintf(sql, sizeof(sql),
	         "INSERT INTO orders (id, amount, currency, status, created_at, updated_at) "
	         "SELECT 'ord_pg_writer_' || g, 3000 + g, 'EUR', 'pending', %" PRId64 ", %" PRId64
	         " FROM generate_series(0, %d) g",
	         hn_now_ms(), hn_now_ms(), RECONNECT_EVENTS - 1);
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), d.dm_pg_db, sql, NULL), 0);
	for (e = 0; e < RECONNECT_EVENTS; e++) {
		snprintf(order_id, sizeof(order_id), "ord_pg_writer_%d", e);
		snprintf(event_id, sizeof(event_id), "evt_pg_writer_%d", e);
		sm->sm_bodies[e] = fx_stripe_payment(event_id, order_id, 3000 + e, "eur");
	}
	for (i = 0; i < RECONNECT_SENDERS; i++) {
		assert_int_equal(pthread_create(&senders[i], NULL, storm_sender, sm), 0);
	}
	/* Whenever the writer has a connection: mid-batch, or between. */
	while (kills < RECONNECT_KILLS && atomic_load(&sm->sm_acked) < RECONNECT_EVENTS) {
		kills += reconnect_kill_q(&d, "idemhook writer", 0) > 0;
		usleep(20 * 1000);
	}
	for (i = 0; i < RECONNECT_SENDERS; i++) {
		pthread_join(senders[i], NULL);
	}
	print_message("writer killed %d times; %d acknowledged, %d answers 503 on the way\n", kills,
	              atomic_load(&sm->sm_acked), atomic_load(&sm->sm_503));
	assert_true(kills >= 2);
	assert_int_equal(atomic_load(&sm->sm_acked), RECONNECT_EVENTS);

	/* Every acknowledged callback applied exactly once, nothing left half. */
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	                 RECONNECT_EVENTS);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM points_ledger"), RECONNECT_EVENTS);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM events"), RECONNECT_EVENTS);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM idempotency_records"),
	                 RECONNECT_EVENTS);
	assert_int_equal(
	        fx_db_int(&d, "SELECT COUNT(*) FROM idempotency_records WHERE status <> 'done'"),
	        0);
	/* The stored replies are the ones acknowledged. */
	for (e = 0; e < RECONNECT_EVENTS; e++) {
		struct hres r;

		assert_int_equal(fx_stripe_send(&d, sm->sm_bodies[e], &r), 200);
		assert_int_equal(r.hs_body_len, sm->sm_ack_len[e]);
		assert_memory_equal(r.hs_body, sm->sm_ack[e], r.hs_body_len);
		hres_finish(&r);
	}
	assert_int_equal(daemon_log_wait(&d, "reconnected to postgresql", 1000), 0);
	assert_int_equal(reconnect_readyz_wait(&d, "ready\n", 5000), 0);
	assert_true(reconnect_readyz(&d, body, sizeof(body)));
	for (e = 0; e < RECONNECT_EVENTS; e++) {
		free(sm->sm_bodies[e]);
		free(sm->sm_ack[e]);
	}
	free(sm);
	daemon_finish(&d);
}

struct locker {
	const struct daemon *lk_d;
	const char *lk_order;
};

/* Holds the order's row locked for a while, from a session of its own. */
static void *locker_main(void *arg)
{
	struct locker *lk = arg;
	char sql[256];

	snprintf(sql, sizeof(sql),
	         "BEGIN; SELECT 1 FROM orders WHERE id = '%s' FOR UPDATE; SELECT pg_sleep(3); "
	         "COMMIT;",
	         lk->lk_order);
	pgserver_psql(pgserver_shared(NULL), lk->lk_d->dm_pg_db, sql, NULL);
	return NULL;
}

struct sender {
	struct daemon *sd_d;
	const char *sd_body;
	long sd_status;
};

static void *sender_main(void *arg)
{
	struct sender *sd = arg;

	sd->sd_status = fx_stripe_send(sd->sd_d, sd->sd_body, NULL);
	return NULL;
}

/* A batch waits on a row lock; /readyz says the writer waits; its
 * connection is terminated: the callback is answered 503, /readyz says the
 * connection was lost until a batch commits on a new one, and the
 * provider's retry is applied once. */
static void test_readyz_tells_of_a_writer_connection_lost_mid_batch(void **state)
{
	struct daemon d;
	struct locker lk;
	struct sender sd;
	pthread_t locker;
	pthread_t sender;
	char id[64];
	char *body;
	char text[512];

	assert_int_equal(daemon_init_pg(&d, reconnect_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 4200, "eur", id);
	body = fx_stripe_payment("evt_pg_readyz", id, 4200, "eur");
	assert_true(reconnect_readyz(&d, text, sizeof(text)));

	lk.lk_d = &d;
	lk.lk_order = id;
	assert_int_equal(pthread_create(&locker, NULL, locker_main, &lk), 0);
	usleep(500 * 1000); /* the lock is taken */
	sd.sd_d = &d;
	sd.sd_body = body;
	sd.sd_status = 0;
	assert_int_equal(pthread_create(&sender, NULL, sender_main, &sd), 0);
	/* Meanwhile: the writer waits on the lock, mid-batch. */
	assert_int_equal(reconnect_readyz_wait(&d, "the writer has waited", 2500), 0);
	/* Every writer connection ([store] pg_writers), the waiting one among them. */
	assert_true(reconnect_kill(&d, "idemhook writer") >= 1);
	pthread_join(sender, NULL);
	assert_int_equal(sd.sd_status, 503);
	assert_int_equal(reconnect_readyz_wait(&d, "the connection to postgresql is lost", 2000),
	                 0);
	assert_false(reconnect_readyz(&d, text, sizeof(text)));
	pthread_join(locker, NULL);

	/* The provider's retry: a new connection, applied once, ready again. */
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	assert_int_equal(reconnect_readyz_wait(&d, "ready\n", 2000), 0);
	assert_true(reconnect_readyz(&d, text, sizeof(text)));
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"), 1);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM points_ledger"), 1);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM events"), 1);
	free(body);
	daemon_finish(&d);
}

/* Lines of the daemon's log holding text; -1 when the log cannot be read. */
static int reconnect_log_count(const struct daemon *d, const char *text)
{
	char *log_text = hn_read_file(d->dm_log);
	const char *p;
	int n = 0;

	if (log_text == NULL) {
		return -1;
	}
	for (p = strstr(log_text, text); p != NULL; p = strstr(p + 1, text)) {
		n++;
	}
	free(log_text);
	return n;
}

/* Lines of the daemon's log without a level prefix ("<4>"): the rest of a
 * message split over several lines, which journald would keep as entries
 * of their own at the default level. */
static int reconnect_log_unprefixed(const struct daemon *d)
{
	char *log_text = hn_read_file(d->dm_log);
	const char *line;
	int n = 0;

	if (log_text == NULL) {
		return -1;
	}
	for (line = log_text; *line != '\0'; line = strchr(line, '\n') + 1) {
		/* A sanitizer's own lines ("==PID==WARNING: ASan ...") are not
		 * the daemon's. */
		if (line[0] != '<' && strncmp(line, "==", 2) != 0) {
			print_message("unprefixed log line: %.*s\n", (int)strcspn(line, "\n"),
			              line);
			n++;
		}
		if (strchr(line, '\n') == NULL) {
			break;
		}
	}
	free(log_text);
	return n;
}

/* Lines of the daemon's log holding text without context on the same
 * line, each printed: counted in one read of the log, as lines go on
 * being written (a deferred debug line comes up to a second later). */
static int reconnect_log_without(const struct daemon *d, const char *text, const char *context)
{
	char *log_text = hn_read_file(d->dm_log);
	const char *line;
	const char *end;
	int n = 0;

	if (log_text == NULL) {
		return -1;
	}
	for (line = log_text; *line != '\0'; line = end + 1) {
		char *one;

		end = strchr(line, '\n');
		if (end == NULL) {
			break; /* a line being written */
		}
		one = strndup(line, (size_t)(end - line));
		assert_non_null(one);
		if (strstr(one, text) != NULL && strstr(one, context) == NULL) {
			print_message("\"%s\" without \"%s\": %s\n", text, context, one);
			n++;
		}
		free(one);
	}
	free(log_text);
	return n;
}

#define RECONNECT_REFUSED "is not currently accepting connections"

/* Connects of d's that the database refused (ALLOW_CONNECTIONS false), as
 * the log says them: what shows that a test's outage was one. */
static int reconnect_refused(const struct daemon *d)
{
	return reconnect_log_count(d, RECONNECT_REFUSED) -
	       reconnect_log_without(d, RECONNECT_REFUSED, "connect to postgresql");
}

#define RECONNECT_OUTAGE_CALLBACKS 40
#define RECONNECT_WARNING "<4>store: cannot"

/* The database refuses every connection for a while (as a server being
 * restarted or failed over does): each callback meanwhile is answered 503
 * with Retry-After, the log says so once rather than once per callback,
 * each message on one line, and says when the server is reached again;
 * then callbacks are applied as before. */
static void test_a_database_out_of_reach_is_logged_once_not_per_callback(void **state)
{
	struct pgserver *pg = pgserver_shared(NULL);
	struct daemon d;
	char sql[256];
	char id[64];
	char event_id[64];
	char *body;
	int i;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, reconnect_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1000, "eur", id);
	body = fx_stripe_payment("evt_pg_outage_before", id, 1000, "eur");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);

	assert_true(reconnect_refuse(&d) > 0);
	for (i = 0; i < RECONNECT_OUTAGE_CALLBACKS; i++) {
		struct hres r;
		char *retry;

		snprintf(event_id, sizeof(event_id), "evt_pg_outage_%d", i);
		body = fx_stripe_payment(event_id, id, 1000, "eur");
		assert_int_equal(fx_stripe_send(&d, body, &r), 503);
		retry = hres_header(&r, "Retry-After");
		assert_non_null(retry);
		free(retry);
		hres_finish(&r);
		free(body);
	}
	/* the daemon runs with -v: the others are there at debug level (<7>) */
	print_message("%d callbacks while out of reach: %d warnings of a failed connect\n",
	              RECONNECT_OUTAGE_CALLBACKS, reconnect_log_count(&d, RECONNECT_WARNING));
	assert_int_equal(reconnect_log_count(&d, RECONNECT_WARNING), 1);
	/* the 503s came from connects the database refused, not from a
	 * session let in before the refusal committed */
	print_message("connects refused meanwhile: %d\n", reconnect_refused(&d));
	assert_true(reconnect_refused(&d) > 0);
	/* libpq's reason is said only where a connect failed, not again by
	 * each statement that found no connection */
	assert_int_equal(reconnect_log_without(&d, RECONNECT_REFUSED, "connect to postgresql"), 0);

	snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS true", d.dm_pg_db);
	assert_int_equal(pgserver_psql(pg, NULL, sql, NULL), 0);
	body = fx_stripe_payment("evt_pg_outage_after", id, 1000, "eur");
	for (i = 0; i < 100 && fx_stripe_send(&d, body, NULL) != 200; i++) {
		usleep(50 * 1000);
	}
	assert_true(i < 100);
	free(body);
	assert_int_equal(daemon_log_wait(&d, "postgresql reached again after", 1000), 0);
	assert_int_equal(reconnect_log_count(&d, RECONNECT_WARNING), 1);
	assert_int_equal(reconnect_log_unprefixed(&d), 0);
	assert_int_equal(reconnect_readyz_wait(&d, "ready\n", 3000), 0);
	assert_int_equal(fx_db_int(&d, "SELECT COUNT(*) FROM events"), 2);
	daemon_finish(&d);
}

#define BACKOFF_SENDERS 4
#define BACKOFF_REFUSED_MS 3000
/* Connects tried in BACKOFF_REFUSED_MS: the ones made at once before the
 * first failure was known (at most the two writers', the four readers',
 * the locks' connection: 7), then one after each delay of the back-off
 * (250 ms, 500 ms, 1 s, 2 s: four in 3 s), and room for a slow machine.
 * Without the back-off, each callback tries its own (about a thousand). */
#define BACKOFF_CONNECTS_MAX 16
#define BACKOFF_MAX_MS 5000 /* the back-off's longest delay */

struct backoff_sender {
	struct daemon *bs_d;
	const char *bs_order;
	int bs_no;
	int64_t bs_until_ms;
	int bs_sent;
	int bs_wrong; /* answered otherwise than 503 with Retry-After */
};

/* A provider's stream of new callbacks until bs_until_ms. */
static void *backoff_sender_main(void *arg)
{
	struct backoff_sender *bs = arg;
	char event_id[64];

	while (hn_now_ms() < bs->bs_until_ms) {
		char *body;
		char *retry;
		struct hres r;

		snprintf(event_id, sizeof(event_id), "evt_pg_backoff_%d_%d", bs->bs_no,
		         bs->bs_sent);
		body = fx_stripe_payment(event_id, bs->bs_order, 1000, "eur");
		if (fx_stripe_send(bs->bs_d, body, &r) != 503) {
			bs->bs_wrong++;
		}
		retry = hres_header(&r, "Retry-After");
		bs->bs_wrong += retry == NULL;
		free(retry);
		hres_finish(&r);
		free(body);
		bs->bs_sent++;
	}
	return NULL;
}

/* Connects that were tried and failed, as the log says them (the first
 * of an outage at warning, the others at debug: the daemon runs with -v). */
static int backoff_failed_connects(const struct daemon *d)
{
	return reconnect_log_count(d, "store: cannot connect to postgresql") +
	       reconnect_log_count(d, "store: cannot reconnect to postgresql");
}

/* The database refuses connections while callbacks stream in from
 * several senders: each is answered 503 with Retry-After, but the
 * receiver tries a connect only after each delay of its back-off, not one
 * per callback; once the database takes connections again, callbacks are
 * applied within the back-off's longest delay, and the log's "reached
 * again after N failed connection attempts" counts the connects that were
 * tried and failed, each of them logged once. */
static void test_connects_back_off_while_the_database_refuses_them(void **state)
{
	struct pgserver *pg = pgserver_shared(NULL);
	struct backoff_sender bs[BACKOFF_SENDERS];
	pthread_t th[BACKOFF_SENDERS];
	struct daemon d;
	char sql[256];
	char id[64];
	char *body;
	char *log_text;
	const char *line;
	int sent = 0;
	int before;
	int tried;
	unsigned n_said = 0;
	double s_said = -1;
	int64_t t0;
	int64_t ms;
	int i;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, reconnect_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1000, "eur", id);
	body = fx_stripe_payment("evt_pg_backoff_before", id, 1000, "eur");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);
	before = backoff_failed_connects(&d);

	assert_true(reconnect_refuse(&d) > 0);
	t0 = hn_now_ms();
	for (i = 0; i < BACKOFF_SENDERS; i++) {
		bs[i] = (struct backoff_sender){.bs_d = &d,
		                                .bs_order = id,
		                                .bs_no = i,
		                                .bs_until_ms = t0 + BACKOFF_REFUSED_MS};
		assert_int_equal(pthread_create(&th[i], NULL, backoff_sender_main, &bs[i]), 0);
	}
	for (i = 0; i < BACKOFF_SENDERS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(bs[i].bs_wrong, 0);
		sent += bs[i].bs_sent;
	}
	usleep(1000 * 1000); /* the debug lines of the last ones */
	tried = backoff_failed_connects(&d) - before;
	print_message("%d callbacks in %d ms while refused: %d connects tried\n", sent,
	              BACKOFF_REFUSED_MS, tried);
	assert_true(tried >= 1);
	assert_true(tried <= BACKOFF_CONNECTS_MAX);
	/* each of them refused by the database, none failing otherwise */
	print_message("of them refused by the database: %d\n", reconnect_refused(&d));
	assert_int_equal(reconnect_refused(&d), tried);
	assert_true(sent > 4 * BACKOFF_CONNECTS_MAX);

	snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS true", d.dm_pg_db);
	assert_int_equal(pgserver_psql(pg, NULL, sql, NULL), 0);
	t0 = hn_now_ms();
	body = fx_stripe_payment("evt_pg_backoff_after", id, 1000, "eur");
	while (fx_stripe_send(&d, body, NULL) != 200 && hn_now_ms() - t0 < 3 * BACKOFF_MAX_MS) {
		usleep(50 * 1000);
	}
	ms = hn_now_ms() - t0;
	free(body);
	print_message("applied %" PRId64 " ms after the database took connections again\n", ms);
	assert_true(ms < BACKOFF_MAX_MS + 1000);

	/* the line's figure: the connects tried and failed, each logged */
	assert_int_equal(daemon_log_wait(&d, "postgresql reached again after", 1000), 0);
	usleep(1000 * 1000);
	tried = backoff_failed_connects(&d) - before;
	log_text = hn_read_file(d.dm_log);
	assert_non_null(log_text);
	line = strstr(log_text, "postgresql reached again after ");
	assert_non_null(line);
	line = line != NULL ? line : ""; /* (GCC -O2 with ASan cannot tell the assertion stops) */
	print_message("%.*s\n", (int)strcspn(line, "\n"), line);
	assert_int_equal(
	        sscanf(line, "postgresql reached again after %u failed connection", &n_said), 1);
	line = strstr(line, " in ");
	assert_non_null(line);
	assert_int_equal(sscanf(line, " in %lf s", &s_said), 1);
	free(log_text);
	assert_int_equal((int)n_said, tried);
	assert_true(s_said >= 0 && s_said * 1000 < BACKOFF_REFUSED_MS + 3 * BACKOFF_MAX_MS);
	assert_int_equal(reconnect_log_unprefixed(&d), 0);
	daemon_finish(&d);
}

#define COUNT_SENDERS 16
#define COUNT_CYCLES 5
#define COUNT_REFUSED_MS 1200
#define COUNT_ACCEPTED_MS 300
/* the back-off's longest delay (5 s), a check of the probe, and room */
#define COUNT_REACHED_MS 8000

struct count_sender {
	struct daemon *cs_d;
	const char *cs_order;
	int cs_no;
	atomic_int *cs_stop;
	int cs_sent;
};

/* A provider's stream of new callbacks until told to stop, whatever the
 * answers. */
static void *count_sender_main(void *arg)
{
	struct count_sender *cs = arg;
	char event_id[64];

	while (!atomic_load(cs->cs_stop)) {
		char *body;

		snprintf(event_id, sizeof(event_id), "evt_pg_count_%d_%d", cs->cs_no, cs->cs_sent);
		body = fx_stripe_payment(event_id, cs->cs_order, 1000, "eur");
		fx_stripe_send(cs->cs_d, body, NULL);
		free(body);
		cs->cs_sent++;
	}
	return NULL;
}

/* Whether the log line from line to end holds text. */
static int count_in_line(const char *line, const char *end, const char *text)
{
	const char *p = strstr(line, text);

	return p != NULL && p < end;
}

/* Walks d's log in order: each "reached again after N failed connection
 * attempts" must count the failed connects logged since the one before
 * (none missed, none counted in the next outage), and every failed
 * connect must be followed by one. Returns how many outages it said. */
static int count_outages_checked(const struct daemon *d)
{
	char *log_text = hn_read_file(d->dm_log);
	const char *line;
	const char *end;
	int pending = 0;
	int outages = 0;

	assert_non_null(log_text);
	for (line = log_text; line != NULL && *line != '\0'; line = end + 1) {
		const char *said;
		unsigned n = 0;

		end = strchr(line, '\n');
		if (end == NULL) {
			break;
		}
		if (count_in_line(line, end, "store: cannot connect to postgresql") ||
		    count_in_line(line, end, "store: cannot reconnect to postgresql")) {
			pending++;
			continue;
		}
		said = strstr(line, "postgresql reached again after ");
		if (count_in_line(line, end, "postgresql reached again after ")) {
			assert_int_equal(
			        sscanf(said, "postgresql reached again after %u failed", &n), 1);
			print_message("%.*s (%d failed connects logged since the last)\n",
			              (int)(end - line), line, pending);
			assert_int_equal((int)n, pending);
			pending = 0;
			outages++;
		}
	}
	free(log_text);
	assert_int_equal(pending, 0);
	return outages;
}

/* Many callbacks at once through several refuse-then-accept transitions of
 * the database: connects fail and succeed on several threads together, and
 * each outage's "reached again after N failed connection attempts" counts
 * exactly the failed connects logged in it: a failure that ends as the
 * success does is counted once, in its outage, not in a phantom next one. */
static void test_each_failed_connect_is_counted_once_in_the_outage_it_ended_in(void **state)
{
	struct pgserver *pg = pgserver_shared(NULL);
	struct count_sender cs[COUNT_SENDERS];
	pthread_t th[COUNT_SENDERS];
	atomic_int stop = 0;
	struct daemon d;
	char sql[256];
	char id[64];
	int sent = 0;
	int outages;
	int said;
	int64_t t0;
	int i;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, reconnect_ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1000, "eur", id);
	for (i = 0; i < COUNT_SENDERS; i++) {
		cs[i] = (struct count_sender){
		        .cs_d = &d, .cs_order = id, .cs_no = i, .cs_stop = &stop};
		assert_int_equal(pthread_create(&th[i], NULL, count_sender_main, &cs[i]), 0);
	}
	for (i = 0; i < COUNT_CYCLES; i++) {
		reconnect_refuse(&d);
		usleep(COUNT_REFUSED_MS * 1000);
		snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS true", d.dm_pg_db);
		assert_int_equal(pgserver_psql(pg, NULL, sql, NULL), 0);
		/* each outage is said once it is over, before the next */
		t0 = hn_now_ms();
		while (reconnect_log_count(&d, "postgresql reached again after") < i + 1 &&
		       hn_now_ms() - t0 < COUNT_REACHED_MS) {
			usleep(50 * 1000);
		}
		said = reconnect_log_count(&d, "postgresql reached again after");
		if (said != i + 1) {
			print_message("transition %d: %d outages said\n", i + 1, said);
			break;
		}
		usleep(COUNT_ACCEPTED_MS * 1000);
	}
	atomic_store(&stop, 1);
	for (i = 0; i < COUNT_SENDERS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		sent += cs[i].cs_sent;
	}
	assert_int_equal(reconnect_readyz_wait(&d, "ready\n", 6000), 0);
	usleep(500 * 1000);
	outages = count_outages_checked(&d);
	print_message("%d callbacks through %d transitions: %d outages said\n", sent, COUNT_CYCLES,
	              outages);
	assert_int_equal(outages, COUNT_CYCLES);
	/* each transition's connects were refused, at least one in each */
	print_message("connects refused: %d\n", reconnect_refused(&d));
	assert_true(reconnect_refused(&d) >= COUNT_CYCLES);
	assert_int_equal(reconnect_log_unprefixed(&d), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_readers_answer_after_the_server_closed_their_connections),
	        cmocka_unit_test(
	                test_the_writers_connection_killed_under_load_loses_nothing_and_applies_nothing_twice),
	        cmocka_unit_test(test_readyz_tells_of_a_writer_connection_lost_mid_batch),
	        cmocka_unit_test(test_a_database_out_of_reach_is_logged_once_not_per_callback),
	        cmocka_unit_test(test_connects_back_off_while_the_database_refuses_them),
	        cmocka_unit_test(
	                test_each_failed_connect_is_counted_once_in_the_outage_it_ended_in),
	};

	pgserver_require_or_skip("test_pg_reconnect");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
