/* test_stripe_thin_e2e.c: Stripe thin events (event destinations) end to end:
 * the real daemon, thin notifications signed as Stripe signs them, and a fake
 * Stripe v2 events API this test starts on loopback (tests/harness/peer.c)
 * that serves each thin event's full event, fails or rate-limits when told. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "console_client.h"
#include "fixtures.h"
#include "peer.h"
#include "provider_e2e.h"
#include "store.h"

#define T_KEY "rk_test_thin_e2e"
#define T_ORDERS_MAX 8

/* ---- the fake v2 events API: GET /v2/core/events/{id} ---- */

struct fake_payment {
	char fp_pi[80];    /* the PaymentIntent the event is about */
	char fp_order[64]; /* our order id, in its metadata */
	int64_t fp_amount;
	/* The connected account the event happened in: Stripe serves it
	 * only to a request in that context (Stripe-Context); "" for the
	 * platform's own events, served only without one. */
	char fp_context[96];
};

static struct {
	pthread_mutex_t fk_lock;
	struct fake_payment fk_pays[T_ORDERS_MAX];
	size_t fk_n;
	unsigned fk_fail;   /* answers of 500 still to give */
	unsigned fk_served; /* full events served (200) */
	/* What the full event about fk_says_pi says, when not what its thin
	 * event said: another type, another related object (NULL: as said). */
	const char *fk_says_pi;
	const char *fk_type;
	const char *fk_related;
} fake = {.fk_lock = PTHREAD_MUTEX_INITIALIZER};

static void fake_reset(void)
{
	pthread_mutex_lock(&fake.fk_lock);
	fake.fk_n = 0;
	fake.fk_fail = 0;
	fake.fk_served = 0;
	fake.fk_says_pi = NULL;
	fake.fk_type = NULL;
	fake.fk_related = NULL;
	pthread_mutex_unlock(&fake.fk_lock);
}

/* The full event about PaymentIntent pi (a string that outlives the
 * test) says type and related from now on (NULL: what its thin event
 * said). */
static void fake_says(const char *pi, const char *type, const char *related)
{
	pthread_mutex_lock(&fake.fk_lock);
	fake.fk_says_pi = pi;
	fake.fk_type = type;
	fake.fk_related = related;
	pthread_mutex_unlock(&fake.fk_lock);
}

/* The thin event related to pi (its id ends the URL after "evt_thin_")
 * gets the payment registered for pi, made in the account context ("":
 * the platform's own). */
static void fake_pays_in(const char *pi, const char *order, int64_t amount, const char *context)
{
	pthread_mutex_lock(&fake.fk_lock);
	snprintf(fake.fk_pays[fake.fk_n].fp_context, sizeof(fake.fk_pays[0].fp_context), "%.*s",
	         (int)sizeof(fake.fk_pays[0].fp_context) - 1, context);
	/* Bounded by the precision, so an optimising build sees no truncation. */
	snprintf(fake.fk_pays[fake.fk_n].fp_pi, sizeof(fake.fk_pays[0].fp_pi), "%.*s",
	         (int)sizeof(fake.fk_pays[0].fp_pi) - 1, pi);
	snprintf(fake.fk_pays[fake.fk_n].fp_order, sizeof(fake.fk_pays[0].fp_order), "%.*s",
	         (int)sizeof(fake.fk_pays[0].fp_order) - 1, order);
	fake.fk_pays[fake.fk_n].fp_amount = amount;
	fake.fk_n++;
	pthread_mutex_unlock(&fake.fk_lock);
}

static void fake_pays(const char *pi, const char *order, int64_t amount)
{
	fake_pays_in(pi, order, amount, "");
}

static void fake_done(void *arg, struct peer_behaviour *b)
{
	(void)arg;
	free((char *)b->pb_body);
}

static void fake_events(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	const char *id = req->pq_path + strlen("/v2/core/events/");
	const struct fake_payment *p = NULL;
	struct buf b;
	size_t i;
	int says;

	(void)arg;
	pthread_mutex_lock(&fake.fk_lock);
	if (req->pq_authorization == NULL || strcmp(req->pq_authorization, "Bearer " T_KEY) != 0) {
		pthread_mutex_unlock(&fake.fk_lock);
		ret->pb_status = 401;
		ret->pb_body = strdup("{\"error\":{\"message\":\"Invalid API Key provided\"}}");
		return;
	}
	if (fake.fk_fail > 0) {
		fake.fk_fail--;
		pthread_mutex_unlock(&fake.fk_lock);
		ret->pb_status = 500;
		ret->pb_body = strdup("{\"error\":{\"message\":\"An unknown error occurred\"}}");
		return;
	}
	/* evt_thin_<pi>: the payment whose PaymentIntent it names; evt_sim_
	 * (idemhook simulate's ids): the payment of a pi_sim_ PaymentIntent. */
	for (i = 0; i < fake.fk_n; i++) {
		if ((strncmp(id, "evt_thin_", 9) == 0 &&
		     strcmp(id + 9, fake.fk_pays[i].fp_pi) == 0) ||
		    (strncmp(id, "evt_sim_", 8) == 0 &&
		     strncmp(fake.fk_pays[i].fp_pi, "pi_sim_", 7) == 0)) {
			p = &fake.fk_pays[i];
		}
	}
	/* An event of another account than the request's context is not
	 * found, as Stripe answers it. */
	if (p == NULL ||
	    strcmp(p->fp_context, req->pq_stripe_context != NULL ? req->pq_stripe_context : "") !=
	            0) {
		pthread_mutex_unlock(&fake.fk_lock);
		ret->pb_status = 404;
		ret->pb_body = strdup("{\"error\":{\"message\":\"No such event\"}}");
		return;
	}
	says = fake.fk_says_pi != NULL && strcmp(fake.fk_says_pi, p->fp_pi) == 0;
	buf_init(&b, 0);
	buf_printf(&b, "{\"context\":");
	buf_printf(&b, p->fp_context[0] != '\0' ? "\"%s\"," : "null,", p->fp_context);
	buf_printf(&b,
	           "\"id\":\"%s\",\"object\":\"v2.core.event\",\"type\":\"%s\","
	           "\"created\":\"2026-12-04T08:00:00.000Z\",\"livemode\":false,"
	           "\"related_object\":{\"id\":\"%s\",\"type\":\"payment_intent\",\"url\":"
	           "\"/v1/payment_intents/%s\"},\"data\":{\"object\":{\"id\":\"%s\",\"object\":"
	           "\"payment_intent\",\"amount\":%" PRId64 ",\"amount_received\":%" PRId64
	           ",\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%"
	           "s\"}}}}",
	           id, says && fake.fk_type != NULL ? fake.fk_type : "v1.payment_intent.succeeded",
	           says && fake.fk_related != NULL ? fake.fk_related : p->fp_pi, p->fp_pi, p->fp_pi,
	           p->fp_amount, p->fp_amount, p->fp_order);
	fake.fk_served++;
	pthread_mutex_unlock(&fake.fk_lock);
	ret->pb_body = buf_take(&b, NULL);
}

static unsigned fake_served(void)
{
	unsigned n;

	pthread_mutex_lock(&fake.fk_lock);
	n = fake.fk_served;
	pthread_mutex_unlock(&fake.fk_lock);
	return n;
}

/* ---- the daemon ---- */

struct t_env {
	struct daemon te_d;
	struct peer *te_api;
	struct peer *te_notify;
};

/* The fake Stripe API and the notified shop started; the daemon's
 * configuration, extra appended, into ini. */
static void env_peers(struct t_env *e, const char *extra, struct buf *ini)
{
	fake_reset();
	e->te_api = peer_create();
	e->te_notify = peer_create();
	assert_non_null(e->te_api);
	assert_non_null(e->te_notify);
	assert_int_equal(peer_handler(e->te_api, "/v2/core/events/", fake_events, fake_done, NULL),
	                 0);
	buf_init(ini, 0);
	buf_printf(ini,
	           "[provider stripe]\ntype = stripe\nsecret = " FX_STRIPE_SECRET "\n"
	           "api_key = env:IDEMHOOK_E2E_THIN_KEY\napi_base_url = %s\n\n"
	           "[points]\nrate = 1/100\n\n"
	           "[outbound]\nnotify_url = %s/notify\n\n"
	           "[reconcile]\nretries = 2\nretry_base = 50ms\ntimeout = 1s\n\n%s",
	           peer_base(e->te_api), peer_base(e->te_notify), extra);
}

/* The daemon with a fake Stripe API, and extra appended to its configuration. */
static void env_start_with(struct t_env *e, const char *extra)
{
	struct buf ini;

	env_peers(e, extra, &ini);
	assert_int_equal(daemon_init(&e->te_d, ini.buf_data), 0);
	buf_finish(&ini);
	assert_int_equal(daemon_start(&e->te_d), 0);
}

static void env_start(struct t_env *e)
{
	env_start_with(e, "");
}

static void env_finish(struct t_env *e)
{
	daemon_finish(&e->te_d);
	peer_destroy(e->te_api);
	peer_destroy(e->te_notify);
}

/* A thin notification of type about PaymentIntent pi as an event
 * destination sends it: no data; live or in test mode; context is the
 * JSON value of its context ("null", or a quoted account id). */
static char *thin_body_in(const char *id, const char *pi, const char *type, int live,
                          const char *context)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"id\":\"%s\",\"object\":\"v2.core.event\",\"type\":\"%s\","
	           "\"created\":\"2026-12-04T08:00:00.000Z\",\"livemode\":%s,\"context\":%s,"
	           "\"related_object\":{\"id\":\"%s\",\"type\":\"payment_intent\",\"url\":"
	           "\"/v1/payment_intents/%s\"}}",
	           id, type, live ? "true" : "false", context, pi, pi);
	return buf_take(&b, NULL);
}

static char *thin_body_as(const char *id, const char *pi, const char *type, int live)
{
	return thin_body_in(id, pi, type, live, "null");
}

/* A thin payment in test mode. */
static char *thin_body(const char *id, const char *pi)
{
	return thin_body_as(id, pi, "v1.payment_intent.succeeded", 0);
}

#define db_int(e, fmt, arg) e2e_db_int(&(e)->te_d, fmt, arg)

/* Waits until the order is paid (or 10 s passed). */
static void wait_paid(struct t_env *e, const char *order)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
	         "SELECT COUNT(*) FROM orders WHERE id = '%s' AND status = 'paid'", order);
	assert_int_equal(hn_db_wait_int(e->te_d.dm_db, sql, 1, 10), 1);
}

static char *metrics(struct t_env *e)
{
	char url[128];
	struct hres r;
	char *body;

	snprintf(url, sizeof(url), "%s/metrics", e->te_d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	body = r.hs_body;
	r.hs_body = NULL;
	hres_finish(&r);
	return body;
}

/* Another thin payment, for an order of its own, that Stripe's API has:
 * the daemon looks for thin events to fetch at once rather than at its
 * next periodic pass. */
static void kick(struct t_env *e)
{
	char other[64];
	char pi[96];
	char id[128];
	char *body;
	struct hres r;

	fx_order(&e->te_d, 100, "usd", other);
	snprintf(pi, sizeof(pi), "pi_%s", other);
	snprintf(id, sizeof(id), "evt_thin_%s", pi);
	fake_pays(pi, other, 100);
	body = thin_body(id, pi);
	assert_int_equal(hn_post_stripe(&e->te_d, "stripe", FX_STRIPE_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	free(body);
	wait_paid(e, other);
}

/* ---- the store, the command line, the metrics ---- */

#define T_DAY_MS (86400LL * 1000)
#define T_PAY "v1.payment_intent.succeeded"

static int t_exec_unit(struct store_tx *tx, void *arg)
{
	return store_exec(tx, arg, NULL, 0, NULL);
}

/* Runs one statement on the daemon's database (SQLite or PostgreSQL),
 * beside the daemon. */
static void t_exec(struct t_env *e, const char *sql)
{
	struct store_options so;
	struct store *st;

	memset(&so, 0, sizeof(so));
	assert_int_equal(store_location_parse(e->te_d.dm_db, &so), 0);
	st = store_create(&so);
	assert_non_null(st);
	assert_true(store_write(st, 0, t_exec_unit, (void *)sql) >= 0);
	store_destroy(st);
}

/* Every row received, created and processed days earlier. */
static void t_age(struct t_env *e, int days)
{
	char sql[512];
	long long ms = days * T_DAY_MS;

	snprintf(sql, sizeof(sql),
	         "UPDATE idempotency_records SET created_at = created_at - %lld, "
	         "updated_at = updated_at - %lld, received_at = received_at - %lld, "
	         "processed_at = processed_at - %lld",
	         ms, ms, ms, ms);
	t_exec(e, sql);
}

/* A thin notification of type about pi, acknowledged 200. */
static void thin_send(struct t_env *e, const char *id, const char *pi, const char *type, int live)
{
	char *body = thin_body_as(id, pi, type, live);

	assert_int_equal(fx_stripe_send(&e->te_d, body, NULL), 200);
	free(body);
}

/* Waits for the fetch of key to fail with reason. */
static void wait_fetch_failed(struct t_env *e, const char *key, const char *reason)
{
	char want[256];

	snprintf(want, sizeof(want), "key=\"%s\" failed: %s", key, reason);
	if (daemon_log_wait(&e->te_d, want, 10000) != 0) {
		fail_msg("no \"%s\" in the log", want);
	}
}

/* Runs idemhook args with the daemon's configuration; returns its exit
 * status, its output in *ret_out (free it) unless ret_out is NULL. */
static int cli(struct t_env *e, const char *const *args, char **ret_out)
{
	char *out = NULL;
	int rc = daemon_cli(&e->te_d, 1, args, &out);

	if (ret_out != NULL) {
		*ret_out = out;
	} else {
		free(out);
	}
	return rc;
}

/* The value of the unlabelled gauge name on /metrics. */
static long long gauge(struct t_env *e, const char *name)
{
	char want[128];
	char *m = metrics(e);
	const char *at;
	long long v;

	snprintf(want, sizeof(want), "\n%s ", name);
	at = strstr(m, want);
	assert_non_null(at);
	v = strtoll(at + strlen(want), NULL, 10);
	free(m);
	return v;
}

/* ---- the scenarios ---- */

static void
test_thin_payment_is_acknowledged_before_its_fetch_paid_once_and_a_late_duplicate_replays(
        void **state)
{
	struct t_env e;
	char order[64];
	char pi[96];
	char id[128];
	char *body;
	char *ack;
	struct hres r;
	struct hres again;
	char *replayed;

	(void)state;
	env_start(&e);
	fx_order(&e.te_d, 1999, "usd", order);
	snprintf(pi, sizeof(pi), "pi_%s", order);
	snprintf(id, sizeof(id), "evt_thin_%s", pi);
	/* No full event yet: the ack must not wait for it. */
	body = thin_body(id, pi);
	assert_int_equal(hn_post_stripe(&e.te_d, "stripe", FX_STRIPE_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "\"outcome\":\"to_fetch\""));
	ack = strdup(r.hs_body);
	hres_finish(&r);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM orders WHERE id = '%s' AND status = 'pending'",
	               order),
	        1);
	assert_int_equal(
	        db_int(&e,
	               "SELECT COUNT(*) FROM events WHERE idem_key = '%s' AND outcome = 'done' "
	               "AND effect = 'to_fetch'",
	               id),
	        1);
	/* Stripe now has it; the next pass (a kick by any new callback, or
	 * the periodic one) fetches it. */
	fake_pays(pi, order, 1999);
	kick(&e);
	wait_paid(&e, order);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM events WHERE idem_key = '%s' AND effect = 'paid'",
	               id),
	        1);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", order), 1);
	assert_int_equal(db_int(&e, "SELECT COUNT(*) FROM outbox WHERE order_id = '%s'", order), 1);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = '%s'", id),
	        1);
	/* The late duplicate: the stored ack, byte for byte; nothing fetched again. */
	assert_int_equal(hn_post_stripe(&e.te_d, "stripe", FX_STRIPE_SECRET, body, &again), 0);
	assert_int_equal(again.hs_status, 200);
	assert_string_equal(again.hs_body, ack);
	replayed = hres_header(&again, "Idempotent-Replayed");
	assert_non_null(replayed);
	assert_string_equal(replayed, "true");
	free(replayed);
	hres_finish(&again);
	sleep(1);
	assert_int_equal(fake_served(), 2); /* this event's and kick()'s */
	assert_int_equal(db_int(&e, "SELECT COUNT(*) FROM outbox WHERE order_id = '%s'", order), 1);
	free(ack);
	free(body);
	env_finish(&e);
}

static void test_thin_and_snapshot_events_for_one_payment_change_the_order_once(void **state)
{
	struct peer_behaviour limited;
	struct t_env e;
	char order[64];
	char pi[96];
	char id[128];
	char *thin;
	char *snap;
	struct hres r;

	(void)state;
	env_start(&e);
	fx_order(&e.te_d, 2500, "usd", order);
	snprintf(pi, sizeof(pi), "pi_%s", order);
	snprintf(id, sizeof(id), "evt_thin_%s", pi);
	fake_pays(pi, order, 2500);
	/* Stripe's API rate-limits the first fetch: it waits as told, and asks again. */
	memset(&limited, 0, sizeof(limited));
	limited.pb_action = PEER_RETRY_AFTER;
	limited.pb_retry_after = "1";
	assert_int_equal(peer_script(e.te_api, NULL, &limited), 0);
	/* A shop migrating runs both destinations: the snapshot first... */
	snap = fx_stripe_payment("evt_snapshot_one", order, 2500, "usd");
	assert_int_equal(hn_post_stripe(&e.te_d, "stripe", FX_STRIPE_SECRET, snap, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	wait_paid(&e, order);
	/* ... then the thin event for the same change. */
	thin = thin_body(id, pi);
	assert_int_equal(hn_post_stripe(&e.te_d, "stripe", FX_STRIPE_SECRET, thin, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(
	        hn_db_wait_int(e.te_d.dm_db,
	                       "SELECT COUNT(*) FROM events WHERE idem_key LIKE 'evt_thin_%' "
	                       "AND effect = 'noop'",
	                       1, 10),
	        1);
	assert_int_equal(fake_served(), 1);
	assert_int_equal(peer_count(e.te_api), 2);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", order), 1);
	assert_int_equal(db_int(&e, "SELECT COUNT(*) FROM outbox WHERE order_id = '%s'", order), 1);
	free(thin);
	free(snap);
	env_finish(&e);
}

static void test_fetch_failures_are_retried_then_reported_with_nothing_applied(void **state)
{
	struct t_env e;
	char order[64];
	char pi[96];
	char id[128];
	char *thin;
	char *m;
	char *out = NULL;
	char shown[40];
	struct hres r;
	const char *list[] = {"events", "list", "--status", "fetching", NULL};

	(void)state;
	env_start(&e);
	fx_order(&e.te_d, 700, "usd", order);
	snprintf(pi, sizeof(pi), "pi_%s", order);
	snprintf(id, sizeof(id), "evt_thin_%s", pi);
	fake_pays(pi, order, 700);
	pthread_mutex_lock(&fake.fk_lock);
	fake.fk_fail = 3; /* the first attempt and both retries ([reconcile] retries = 2) */
	pthread_mutex_unlock(&fake.fk_lock);
	thin = thin_body(id, pi);
	assert_int_equal(hn_post_stripe(&e.te_d, "stripe", FX_STRIPE_SECRET, thin, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(
	        daemon_log_wait(&e.te_d, "fetch provider=\"stripe\" key=\"evt_thin_", 10000), 0);
	assert_int_equal(daemon_log_wait(&e.te_d, "gave up after 3 attempts: HTTP 500", 1000), 0);
	assert_int_equal(peer_count(e.te_api), 3);
	/* Nothing half-applied: the order, the event, the outbox as before. */
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM orders WHERE id = '%s' AND status = 'pending'",
	               order),
	        1);
	assert_int_equal(
	        db_int(&e,
	               "SELECT COUNT(*) FROM events WHERE idem_key = '%s' AND effect = 'to_fetch'",
	               id),
	        1);
	assert_int_equal(db_int(&e, "SELECT COUNT(*) FROM outbox WHERE order_id = '%s'", order), 0);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", order), 0);
	m = metrics(&e);
	assert_non_null(strstr(m, "idemhook_fetch_failures_total{provider=\"stripe\"} 1\n"));
	assert_non_null(strstr(m, "idemhook_events_fetch_waiting 1\n"));
	free(m);
	assert_int_equal(daemon_cli(&e.te_d, 1, list, &out), 0);
	snprintf(shown, sizeof(shown), "%.20s", id); /* within the KEY column, before any ellipsis */
	assert_non_null(strstr(out, shown));
	assert_non_null(strstr(out, "fetching"));
	free(out);
	/* Stripe answers again: the next pass applies it, once. */
	kick(&e);
	wait_paid(&e, order);
	assert_int_equal(db_int(&e, "SELECT COUNT(*) FROM outbox WHERE order_id = '%s'", order), 1);
	assert_int_equal(daemon_cli(&e.te_d, 1, list, &out), 0);
	assert_null(strstr(out, shown));
	free(out);
	free(thin);
	env_finish(&e);
}

/* More thin events than the worker lists at a time (100) that Stripe no
 * longer has (404: kept 30 days; a test-mode event for a live key): they
 * wait, and a good one received after them is fetched and applied all the
 * same, rather than behind them until they expire. */
static void test_thin_events_that_keep_failing_do_not_hold_back_those_after_them(void **state)
{
	struct t_env e;
	char order[64];
	char pi[96];
	char id[128];
	char *body;
	int i;

	(void)state;
	env_start(&e);
	for (i = 0; i < 101; i++) {
		snprintf(id, sizeof(id), "evt_gone_%03d", i);
		snprintf(pi, sizeof(pi), "pi_gone_%03d", i);
		body = thin_body(id, pi);
		assert_int_equal(fx_stripe_send(&e.te_d, body, NULL), 200);
		free(body);
	}
	fx_order(&e.te_d, 900, "usd", order);
	snprintf(pi, sizeof(pi), "pi_%s", order);
	snprintf(id, sizeof(id), "evt_thin_%s", pi);
	fake_pays(pi, order, 900);
	body = thin_body(id, pi);
	assert_int_equal(fx_stripe_send(&e.te_d, body, NULL), 200);
	free(body);
	wait_paid(&e, order);
	assert_int_equal(fake_served(), 1);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM events WHERE effect = 'to_fetch' AND idem_key %s",
	               "LIKE 'evt_gone_%'"),
	        101);
	/* Every one of them was asked about, the last one too. */
	assert_int_equal(daemon_log_wait(&e.te_d, "key=\"evt_gone_100\" failed: not_found", 5000),
	                 0);
	env_finish(&e);
}

static void test_simulated_thin_payment_is_signed_as_stripe_signs_and_fetched(void **state)
{
	struct t_env e;
	char order[64];
	char pi[96];
	char *out = NULL;
	const char *args[] = {"simulate", "stripe", "thin-payment", "--order", order, NULL};

	(void)state;
	env_start(&e);
	fx_order(&e.te_d, 1234, "usd", order);
	snprintf(pi, sizeof(pi), "pi_sim_%s", order);
	fake_pays(pi, order, 1234);
	assert_int_equal(daemon_cli(&e.te_d, 1, args, &out), 0);
	assert_non_null(strstr(out, "HTTP 200"));
	assert_non_null(strstr(out, "\"outcome\":\"to_fetch\""));
	free(out);
	wait_paid(&e, order);
	assert_int_equal(daemon_log_wait(&e.te_d, "fetch provider=\"stripe\" key=\"evt_sim_", 1000),
	                 0);
	assert_int_equal(fake_served(), 1);
	env_finish(&e);
}

/* simulate --context sends a connected account's thin payment, which is
 * fetched in that context and applied; a context the receiver would refuse
 * is refused by simulate (64, nothing sent), as is --context with another
 * event than thin-payment. */
static void
test_simulated_thin_payment_of_a_connected_account_is_fetched_in_its_context(void **state)
{
	static const char *const bad[] = {"acct_1Sim/", "acct 1Sim", "acct_1Sim:x", "", "/acct_1"};
	struct t_env e;
	char order[64];
	char pi[96];
	char ctx[64];
	char *out = NULL;
	const char *args[] = {"simulate", "stripe", "thin-payment", "--order", order, "--context",
	                      ctx,        NULL};
	const char *payment[] = {"simulate",
	                         "stripe",
	                         "payment",
	                         "--order",
	                         order,
	                         "--context",
	                         "acct_1SimConnected00",
	                         NULL};
	size_t i;

	(void)state;
	env_start(&e);
	fx_order(&e.te_d, 1234, "usd", order);
	snprintf(pi, sizeof(pi), "pi_sim_%s", order);
	fake_pays_in(pi, order, 1234, "acct_1SimPlatform0/acct_1SimConnected0");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(ctx, sizeof(ctx), "%s", bad[i]);
		assert_int_equal(daemon_cli(&e.te_d, 1, args, NULL), 64);
	}
	assert_int_equal(daemon_cli(&e.te_d, 1, payment, NULL), 64);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM events WHERE idem_key LIKE '%s'", "evt_sim_%"), 0);
	snprintf(ctx, sizeof(ctx), "%s", "acct_1SimPlatform0/acct_1SimConnected0");
	assert_int_equal(daemon_cli(&e.te_d, 1, args, &out), 0);
	assert_non_null(strstr(out, "HTTP 200"));
	free(out);
	wait_paid(&e, order);
	assert_int_equal(db_int(&e,
	                        "SELECT COUNT(*) FROM events WHERE idem_key LIKE 'evt_sim_%%' "
	                        "AND effect = 'paid' AND context = '%s'",
	                        "acct_1SimPlatform0/acct_1SimConnected0"),
	                 1);
	assert_int_equal(fake_served(), 1);
	env_finish(&e);
}

/* A live thin event acknowledged to Stripe whose full event never came is
 * a payment Stripe will not send again: gc keeps it past every retention,
 * still waiting and still listed. A test-mode one expires as usual. */
static void
test_gc_keeps_a_live_thin_event_waiting_for_its_full_event_past_every_retention(void **state)
{
	static const char *const gc[] = {"gc", NULL};
	static const char *const list[] = {"events", "list", "--status", "fetching", NULL};
	struct t_env e;
	char *out = NULL;

	(void)state;
	env_start_with(&e, "[gc]\ninterval = 0\nevents_retention = 10d\n");
	thin_send(&e, "evt_gc_waiting", "pi_gc_waiting", T_PAY, 1);
	thin_send(&e, "evt_gc_sandbox", "pi_gc_sandbox", T_PAY, 0);
	wait_fetch_failed(&e, "evt_gc_waiting", "not_found");
	wait_fetch_failed(&e, "evt_gc_sandbox", "not_found");
	/* Eleven days on: past the key's 7 days and the events' 10. */
	t_age(&e, 11);
	assert_int_equal(cli(&e, gc, NULL), 0);
	assert_int_equal(db_int(&e,
	                        "SELECT COUNT(*) FROM events WHERE idem_key = '%s' AND "
	                        "outcome = 'done' AND effect = 'to_fetch'",
	                        "evt_gc_waiting"),
	                 1);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM events WHERE idem_key = '%s'", "evt_gc_sandbox"),
	        0);
	assert_int_equal(cli(&e, list, &out), 0);
	assert_non_null(strstr(out, "evt_gc_waiting"));
	free(out);
	env_finish(&e);
}

/* A thin event Stripe no longer has (404) is closed by the operator with a
 * reason: audited, shown as dismissed, no longer asked about or counted as
 * waiting, and gc may then expire it. */
static void test_a_thin_event_stripe_no_longer_has_is_dismissed_and_no_longer_fetched(void **state)
{
	static const char *const gc[] = {"gc", NULL};
	static const char *const list[] = {"events", "list", "--status", "fetching", NULL};
	struct t_env e;
	char id[32];
	const char *dismiss[] = {"events", "dismiss", id, "--reason", "older than 30 days", NULL};
	const char *show[] = {"events", "show", id, NULL};
	char *out = NULL;
	size_t asked;

	(void)state;
	env_start_with(&e, "[gc]\ninterval = 0\nevents_retention = 10d\n");
	thin_send(&e, "evt_gone_for_good", "pi_gone_for_good", T_PAY, 1);
	wait_fetch_failed(&e, "evt_gone_for_good", "not_found");
	assert_int_equal(gauge(&e, "idemhook_events_fetch_waiting"), 1);
	snprintf(id, sizeof(id), "%lld",
	         (long long)db_int(&e, "SELECT id FROM events WHERE idem_key = '%s'",
	                           "evt_gone_for_good"));
	assert_int_equal(cli(&e, dismiss, &out), 0);
	assert_non_null(strstr(out, "dismissed"));
	free(out);
	/* Still unapplied (to_fetch), with who and why; audited. */
	assert_int_equal(db_int(&e,
	                        "SELECT COUNT(*) FROM events WHERE id = %s AND effect = 'to_fetch' "
	                        "AND dismissed_at > 0 AND dismissed_by LIKE 'cli:%%' AND "
	                        "dismiss_reason = 'older than 30 days'",
	                        id),
	                 1);
	fx_assert_audit(&e.te_d, 1,
	                "action = 'events.dismiss' AND target = 'event:%s' AND result = 'ok' AND "
	                "reason = 'older than 30 days'",
	                id);
	/* Once is enough: a second dismissal is refused, and audited. */
	assert_int_equal(cli(&e, dismiss, NULL), 65);
	fx_assert_audit(&e.te_d, 1, "target = 'event:%s' AND result LIKE 'refused:%%'", id);
	assert_int_equal(cli(&e, show, &out), 0);
	assert_non_null(strstr(out, "\ndismissed:       20"));
	assert_non_null(strstr(out, "\ndismiss reason:  older than 30 days\n"));
	free(out);
	assert_int_equal(cli(&e, list, &out), 0);
	assert_non_null(strstr(out, "(dismissed)"));
	free(out);
	/* A restarted daemon asks about every waiting event at once: not this
	 * one, and it no longer counts it as waiting. */
	assert_int_equal(daemon_term(&e.te_d, 30), 0);
	asked = peer_count(e.te_api);
	assert_int_equal(daemon_start(&e.te_d), 0);
	kick(&e);
	assert_int_equal(peer_count(e.te_api), asked + 1);
	assert_int_equal(gauge(&e, "idemhook_events_fetch_waiting"), 0);
	/* Closed, it expires with its retention. */
	t_age(&e, 11);
	assert_int_equal(cli(&e, gc, NULL), 0);
	assert_int_equal(db_int(&e, "SELECT COUNT(*) FROM events WHERE id = %s", id), 0);
	env_finish(&e);
}

/* Thin events Stripe no longer has are closed by filter as failed events
 * are: counted first, dismissed only once the count is confirmed, each
 * audited; live ones unless --test-mode, nothing but waiting thin events. */
static void test_thin_events_stripe_no_longer_has_are_dismissed_by_filter(void **state)
{
	static const char *const count[] = {
	        "events", "dismiss",  "--status",           "fetching", "--provider",
	        "stripe", "--reason", "older than 30 days", NULL};
	static const char *const wrong[] = {
	        "events",     "dismiss", "--status", "fetching",
	        "--provider", "stripe",  "--reason", "older than 30 days",
	        "--confirm",  "3",       NULL};
	static const char *const right[] = {
	        "events",     "dismiss", "--status", "fetching",
	        "--provider", "stripe",  "--reason", "older than 30 days",
	        "--confirm",  "2",       NULL};
	static const char *const sandbox[] = {"events",      "dismiss",  "--status",
	                                      "fetching",    "--reason", "older than 30 days",
	                                      "--test-mode", NULL};
	static const char *const by_reason[] = {
	        "events",    "dismiss",  "--status",           "fetching", "--failed-reason",
	        "not_found", "--reason", "older than 30 days", NULL};
	static const char *const done[] = {
	        "events", "dismiss", "--status", "done", "--reason", "older than 30 days", NULL};
	struct t_env e;
	char *out = NULL;

	(void)state;
	env_start(&e);
	thin_send(&e, "evt_gone_1", "pi_gone_1", T_PAY, 1);
	thin_send(&e, "evt_gone_2", "pi_gone_2", T_PAY, 1);
	thin_send(&e, "evt_gone_sandbox", "pi_gone_sandbox", T_PAY, 0);
	wait_fetch_failed(&e, "evt_gone_1", "not_found");
	wait_fetch_failed(&e, "evt_gone_2", "not_found");
	wait_fetch_failed(&e, "evt_gone_sandbox", "not_found");
	/* Neither a failed event nor a thin event applied is selected. */
	assert_int_equal(fx_stripe_pay(&e.te_d, "evt_snapshot_failed", "ord_thin_nosuch0000000001",
	                               500, "usd"),
	                 200);
	kick(&e);
	assert_int_equal(cli(&e, count, &out), 0);
	assert_non_null(strstr(out, "2 thin event(s) waiting for their full event match"));
	free(out);
	assert_int_equal(cli(&e, sandbox, &out), 0);
	assert_non_null(
	        strstr(out, "1 test-mode thin event(s) waiting for their full event match"));
	free(out);
	/* A thin event has no failure reason; a done one nothing to dismiss. */
	assert_int_equal(cli(&e, by_reason, NULL), 64);
	assert_int_equal(cli(&e, done, NULL), 64);
	/* The count changed since it was read: nothing happens. */
	assert_int_equal(cli(&e, wrong, NULL), 65);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM events WHERE dismissed_at IS NOT NULL%s", ""), 0);
	assert_int_equal(cli(&e, right, &out), 0);
	assert_non_null(strstr(out, "2 event(s) dismissed"));
	free(out);
	assert_int_equal(
	        db_int(&e,
	               "SELECT COUNT(*) FROM events WHERE idem_key LIKE 'evt_gone_%s' AND "
	               "effect = 'to_fetch' AND test_mode = 0 AND dismissed_at > 0 AND "
	               "dismissed_by LIKE 'cli:%%' AND dismiss_reason = 'older than 30 days'",
	               "%"),
	        2);
	fx_assert_audit(&e.te_d, 2,
	                "action = 'events.dismiss' AND result = 'ok' AND reason = 'older than 30 "
	                "days'");
	assert_int_equal(
	        db_int(&e,
	               "SELECT COUNT(*) FROM events WHERE dismissed_at IS NULL AND idem_key "
	               "IN ('evt_gone_sandbox', 'evt_snapshot_failed', '%s')",
	               "-"),
	        2);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM events WHERE dismissed_at IS NOT NULL%s", ""), 2);
	/* Dismissed ones are not counted again. */
	assert_int_equal(cli(&e, count, &out), 0);
	assert_non_null(strstr(
	        out, "no thin event(s) waiting for their full event match: nothing to dismiss"));
	free(out);
	env_finish(&e);
}

static char mine[96]; /* the PaymentIntent fake_says is about */

/* A fetched event that does not match its signed thin notification (its
 * type, or the object it is about) is a failed fetch: logged, counted,
 * nothing applied, asked again; once Stripe's answer matches it applies. */
static void
test_a_fetched_event_that_contradicts_its_thin_notification_is_never_applied(void **state)
{
	struct t_env e;
	char order[64];
	char pi[96];
	char id[128];
	const char *at;
	char *m;

	(void)state;
	env_start(&e);
	fx_order(&e.te_d, 4200, "usd", order);
	snprintf(pi, sizeof(pi), "pi_%s", order);
	snprintf(mine, sizeof(mine), "%s", pi);
	snprintf(id, sizeof(id), "evt_thin_%s", pi);
	fake_pays(pi, order, 4200);
	/* The notification says the payment failed; the answer, that it
	 * succeeded. */
	fake_says(mine, T_PAY, NULL);
	thin_send(&e, id, pi, "v1.payment_intent.payment_failed", 1);
	wait_fetch_failed(&e, id, "fetch_mismatch");
	/* The type as notified, but about another PaymentIntent. */
	fake_says(mine, "v1.payment_intent.payment_failed", "pi_someone_else");
	kick(&e);
	assert_int_equal(daemon_log_wait(&e.te_d, "related_object pi_someone_else", 10000), 0);
	assert_int_equal(
	        db_int(&e, "SELECT COUNT(*) FROM orders WHERE id = '%s' AND status = 'pending'",
	               order),
	        1);
	assert_int_equal(db_int(&e,
	                        "SELECT COUNT(*) FROM events WHERE idem_key = '%s' AND effect = "
	                        "'to_fetch'",
	                        id),
	                 1);
	m = metrics(&e);
	at = strstr(m, "idemhook_fetch_failures_total{provider=\"stripe\"} ");
	assert_non_null(at);
	assert_true(strtoll(strchr(at, '}') + 2, NULL, 10) >= 2);
	free(m);
	/* Stripe's answer agrees now: applied (a payment_failed changes
	 * nothing on a pending order but is recorded). */
	fake_says(mine, "v1.payment_intent.payment_failed", NULL);
	kick(&e);
	assert_int_equal(hn_db_wait_int(e.te_d.dm_db,
	                                "SELECT COUNT(*) FROM events WHERE idem_key LIKE "
	                                "'evt_thin_pi_%' AND effect = 'to_fetch'",
	                                0, 10),
	                 0);
	env_finish(&e);
}

/* The requests the fake Stripe API got for event id, and the
 * Stripe-Context of the last of them into ret (NULL: none; free it). */
static size_t fetches_of(struct t_env *e, const char *id, char **ret)
{
	char path[160];
	size_t n = 0;
	size_t i;

	snprintf(path, sizeof(path), "/v2/core/events/%s", id);
	*ret = NULL;
	for (i = 0; i < peer_count(e->te_api); i++) {
		struct peer_request r;

		assert_int_equal(peer_request(e->te_api, i, &r), 0);
		if (strcmp(r.pq_path, path) == 0) {
			n++;
			free(*ret);
			*ret = r.pq_stripe_context != NULL ? strdup(r.pq_stripe_context) : NULL;
		}
		peer_request_finish(&r);
	}
	return n;
}

/* A thin event from a connected account (Connect, or an account of an
 * organization: "acct_platform/acct_connected") carries its context.
 * Stripe serves its full event only to a request in that context: the
 * fetch sends Stripe-Context, and the payment is applied once. */
static void test_a_connected_accounts_thin_event_is_fetched_in_its_context_and_applied(void **state)
{
	static const char *const contexts[] = {"acct_1ConnectedShop00",
	                                       "acct_1Platform00/acct_1Connected01"};
	struct t_env e;
	char order[64];
	char pi[96];
	char id[128];
	char quoted[128];
	char *body;
	char *sent;
	size_t i;

	(void)state;
	env_start(&e);
	for (i = 0; i < 2; i++) {
		fx_order(&e.te_d, 1999, "usd", order);
		snprintf(pi, sizeof(pi), "pi_%s", order);
		snprintf(id, sizeof(id), "evt_thin_%s", pi);
		snprintf(quoted, sizeof(quoted), "\"%s\"", contexts[i]);
		fake_pays_in(pi, order, 1999, contexts[i]);
		body = thin_body_in(id, pi, T_PAY, 1, quoted);
		assert_int_equal(fx_stripe_send(&e.te_d, body, NULL), 200);
		free(body);
		wait_paid(&e, order);
		assert_int_equal(fetches_of(&e, id, &sent), 1);
		assert_non_null(sent);
		assert_string_equal(sent, contexts[i]);
		free(sent);
		assert_int_equal(db_int(&e,
		                        "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'",
		                        order),
		                 1);
	}
	/* The platform's own thin events are fetched without one. */
	kick(&e);
	env_finish(&e);
}

/* The context a thin event was received in is shown where its other
 * fetch details are: `events show` (text and JSON) and the console's event
 * page, for one waiting for its full event and for one fetched and
 * applied; an event of the platform's own account shows none. */
static void test_a_thin_events_context_is_shown_by_events_show_and_the_console(void **state)
{
	static const char *const keys[] = {"evt_thin_pi_ctx_waits", "evt_thin_pi_ctx_paid"};
	static const char *const contexts[] = {"acct_1Platform00/acct_1Connected02",
	                                       "acct_1ConnectedShop03"};
	struct t_env e;
	struct t_session s;
	struct hres r;
	char id[32];
	char want[160];
	char path[64];
	char order[64];
	char *body;
	char *out = NULL;
	const char *show[] = {"events", "show", id, NULL};
	const char *show_json[] = {"events", "show", "--json", id, NULL};
	size_t i;

	(void)state;
	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	env_start_with(&e, T_CONSOLE);
	/* One Stripe never has (it waits), one it has in its context (the
	 * fake API serves evt_thin_<pi>). */
	fx_order(&e.te_d, 1999, "usd", order);
	fake_pays_in("pi_ctx_paid", order, 1999, contexts[1]);
	for (i = 0; i < 2; i++) {
		snprintf(want, sizeof(want), "\"%s\"", contexts[i]);
		body = thin_body_in(keys[i], i == 0 ? "pi_ctx_waits" : "pi_ctx_paid", T_PAY, 1,
		                    want);
		assert_int_equal(fx_stripe_send(&e.te_d, body, NULL), 200);
		free(body);
	}
	thin_send(&e, "evt_thin_ctx_own", "pi_ctx_own", T_PAY, 1);
	wait_fetch_failed(&e, keys[0], "not_found");
	wait_paid(&e, order);
	t_login(&e.te_d, T_RO_TOKEN, &s);
	for (i = 0; i < 2; i++) {
		snprintf(id, sizeof(id), "%lld",
		         (long long)db_int(&e, "SELECT id FROM events WHERE idem_key = '%s'",
		                           keys[i]));
		assert_int_equal(cli(&e, show, &out), 0);
		snprintf(want, sizeof(want), "\ncontext:         %s\n", contexts[i]);
		assert_non_null(strstr(out, want));
		/* The one waiting is fetching, as events list and the console say. */
		assert_non_null(strstr(out, i == 0 ? "\noutcome:         fetching\n"
		                                   : "\noutcome:         done\n"));
		free(out);
		assert_int_equal(cli(&e, show_json, &out), 0);
		snprintf(want, sizeof(want), "\"context\": \"%s\"", contexts[i]);
		assert_non_null(strstr(out, want));
		assert_non_null(strstr(out, i == 0 ? "\"outcome\": \"fetching\""
		                                   : "\"outcome\": \"done\""));
		free(out);
		snprintf(path, sizeof(path), "/console/events/%s", id);
		assert_int_equal(t_get(&e.te_d, path, &s, &r), 200);
		snprintf(want, sizeof(want), "<dd id=\"context\">%s ", contexts[i]);
		assert_non_null(strstr(r.hs_body, want));
		hres_finish(&r);
	}
	snprintf(id, sizeof(id), "%lld",
	         (long long)db_int(&e, "SELECT id FROM events WHERE idem_key = '%s'",
	                           "evt_thin_ctx_own"));
	assert_int_equal(cli(&e, show_json, &out), 0);
	assert_non_null(strstr(out, "\"context\": null"));
	free(out);
	assert_int_equal(cli(&e, show, &out), 0);
	assert_null(strstr(out, "context:"));
	free(out);
	snprintf(path, sizeof(path), "/console/events/%s", id);
	assert_int_equal(t_get(&e.te_d, path, &s, &r), 200);
	assert_null(strstr(r.hs_body, "id=\"context\""));
	hres_finish(&r);
	env_finish(&e);
}

/* A context is an account id, or several joined by "/": letters, digits
 * and "_". Anything else (a line break that would add a header field to
 * the fetch, a space, a colon, an empty segment, another JSON type, more
 * than 255 bytes) is refused 400, nothing stored, no key consumed. */
static void test_a_thin_event_whose_context_is_not_an_account_id_is_refused(void **state)
{
	/* "acct_1xx...x": 280 bytes of a valid form, over the 255 allowed */
	char long_context[1 + 280 + 1 + 1];
	const char *const bad[] = {
	        "\"acct_1\\r\\nX-Injected: yes\"",
	        "\"acct_1\\nX-Injected: yes\"",
	        "\"acct_1 acct_2\"",
	        "\"acct_1:x\"",
	        "\"acct_1//acct_2\"",
	        "\"/acct_1\"",
	        "\"acct_1/\"",
	        "\"acct_\\u00e91\"",
	        "5",
	        "{\"id\":\"acct_1\"}",
	        long_context,
	};
	struct t_env e;
	char header[512];
	const char *headers[] = {header, "Content-Type: application/json", NULL};
	char *body;
	char *sig;
	size_t i;

	(void)state;
	memset(long_context, 'x', sizeof(long_context) - 1);
	memcpy(long_context, "\"acct_1", 7);
	long_context[sizeof(long_context) - 2] = '"';
	long_context[sizeof(long_context) - 1] = '\0';
	env_start(&e);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		body = thin_body_in("evt_thin_bad_context", "pi_bad_context", T_PAY, 1, bad[i]);
		sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));
		snprintf(header, sizeof(header), "Stripe-Signature: %s", sig);
		e2e_expect_unchanged(&e.te_d, "stripe", headers, body, 400);
		free(sig);
		free(body);
	}
	assert_int_equal(peer_count(e.te_api), 0);
	env_finish(&e);
}

#define T_MIGRATION_CONTEXT "_keep_thin_event_context.sql"

/* Rows of the schema before the migration: thin events waiting for their
 * full event, as the daemon recorded them (the notification as payload):
 * one from a connected account, one from the platform, one whose context
 * is no account id (recorded before contexts were checked). */
static void t_rows_context(struct buf *sql, int pg, void *arg)
{
	static const char *const rows[][3] = {
	        {"evt_thin_pi_migrated_conn", "pi_migrated_conn", "\"acct_1Migrated00\""},
	        {"evt_thin_pi_migrated_own", "pi_migrated_own", "null"},
	        {"evt_thin_pi_migrated_odd", "pi_migrated_odd", "\"acct 1\""},
	};
	long long now_ms = (long long)hn_now_s() * 1000;
	size_t i;

	(void)arg;
	for (i = 0; i < 3; i++) {
		char *body = thin_body_in(rows[i][0], rows[i][1], T_PAY, 1, rows[i][2]);

		buf_printf(sql,
		           "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
		           "fence_token, created_at, updated_at, type, kind, payment_ref, payload, "
		           "outcome, effect, received_at, processed_at) VALUES ('stripe', '%s', "
		           "'done', %s, 1, %lld, %lld, '" T_PAY "', 'other', '%s', %s('%s'%s), "
		           "'done', 'to_fetch', %lld, %lld);\n",
		           rows[i][0], pg ? "decode(repeat('ab', 32), 'hex')" : "randomblob(32)",
		           now_ms, now_ms, rows[i][1], pg ? "convert_to" : "CAST", body,
		           pg ? ", 'UTF8'" : " AS BLOB", now_ms, now_ms);
		free(body);
	}
}

/* A database of the schema before contexts were kept, with thin events
 * waiting: `idemhook migrate` keeps every one and takes each one's context
 * from the notification it recorded (an account id only), so the
 * connected account's event, stuck until then (Stripe answered "not
 * found"), is fetched in its context and applied. */
static void test_migrate_gives_waiting_thin_events_their_context_and_they_are_applied(void **state)
{
	struct t_env e;
	struct buf ini;
	char order[64];
	char *sent;

	(void)state;
	env_peers(&e, "", &ini);
	e2e_migrate_from(&e.te_d, ini.buf_data, T_MIGRATION_CONTEXT, t_rows_context, NULL);
	buf_finish(&ini);
	assert_int_equal(db_int(&e, "SELECT COUNT(*) FROM events WHERE effect = '%s'", "to_fetch"),
	                 3);
	assert_int_equal(db_int(&e,
	                        "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
	                        "'evt_thin_pi_migrated_conn' AND context = '%s'",
	                        "acct_1Migrated00"),
	                 1);
	assert_int_equal(db_int(&e,
	                        "SELECT COUNT(*) FROM idempotency_records WHERE idem_key LIKE "
	                        "'evt_thin_pi_migrated_%s' AND context IS NULL",
	                        "%"),
	                 2);
	assert_int_equal(daemon_start(&e.te_d), 0);
	fx_order(&e.te_d, 2500, "usd", order);
	fake_pays_in("pi_migrated_conn", order, 2500, "acct_1Migrated00");
	kick(&e);
	wait_paid(&e, order);
	assert_true(fetches_of(&e, "evt_thin_pi_migrated_conn", &sent) >= 1);
	assert_non_null(sent);
	assert_string_equal(sent, "acct_1Migrated00");
	free(sent);
	assert_int_equal(db_int(&e,
	                        "SELECT COUNT(*) FROM events WHERE idem_key = "
	                        "'evt_thin_pi_migrated_conn' AND effect = '%s'",
	                        "paid"),
	                 1);
	env_finish(&e);
}

static int group_setup(void **state)
{
	(void)state;
	setenv("IDEMHOOK_E2E_THIN_KEY", T_KEY, 1);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_thin_payment_is_acknowledged_before_its_fetch_paid_once_and_a_late_duplicate_replays),
	        cmocka_unit_test(
	                test_thin_and_snapshot_events_for_one_payment_change_the_order_once),
	        cmocka_unit_test(
	                test_fetch_failures_are_retried_then_reported_with_nothing_applied),
	        cmocka_unit_test(
	                test_thin_events_that_keep_failing_do_not_hold_back_those_after_them),
	        cmocka_unit_test(test_simulated_thin_payment_is_signed_as_stripe_signs_and_fetched),
	        cmocka_unit_test(
	                test_simulated_thin_payment_of_a_connected_account_is_fetched_in_its_context),
	        cmocka_unit_test(
	                test_gc_keeps_a_live_thin_event_waiting_for_its_full_event_past_every_retention),
	        cmocka_unit_test(
	                test_a_thin_event_stripe_no_longer_has_is_dismissed_and_no_longer_fetched),
	        cmocka_unit_test(test_thin_events_stripe_no_longer_has_are_dismissed_by_filter),
	        cmocka_unit_test(
	                test_a_fetched_event_that_contradicts_its_thin_notification_is_never_applied),
	        cmocka_unit_test(
	                test_a_connected_accounts_thin_event_is_fetched_in_its_context_and_applied),
	        cmocka_unit_test(
	                test_a_thin_events_context_is_shown_by_events_show_and_the_console),
	        cmocka_unit_test(test_a_thin_event_whose_context_is_not_an_account_id_is_refused),
	        cmocka_unit_test(
	                test_migrate_gives_waiting_thin_events_their_context_and_they_are_applied),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
