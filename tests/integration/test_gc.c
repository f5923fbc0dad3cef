/* test_gc.c: cleanup deletes expired records in batches, honours each scope's
 * retention to the second, and never stalls the callbacks arriving meanwhile.
 * The suite postgresql runs it again on PostgreSQL (IDEMHOOK_TEST_BACKEND):
 * every store it opens is then a fresh database of the throwaway server;
 * what only a SQLite file has (its size, VACUUM) is skipped there. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "gc.h"
#include "log.h"
#include "provider.h"
#include "store.h"
#include "harness.h"
#include "pgserver.h"

#define TEST_STRIPE_SECRET "whsec_gc_test_secret"
#define TEST_STRIPE_INI "[provider stripe]\ntype = stripe\nsecret = " TEST_STRIPE_SECRET "\n"

#define T_DAY_MS (86400LL * 1000)
#define T_SEC_MS 1000LL
#define T_EXPIRED_ROWS 100000
#define T_INSERT_UNITS 4 /* big units of work for the bulk insert */

/* ---- direct: gc_run on a store at a fixed clock ---- */

struct t_direct {
	char td_dir[64];
	char td_ini[128];
	char td_db[800]; /* a location as hn_db_int takes it */
	struct config *td_cf;
	struct store *td_st;
	int64_t td_now;
};

static int t_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		return -1;
	}
	fputs(text, f);
	return fclose(f);
}

/* A store on loc (a SQLite file or "postgresql:CONNINFO"), migrated, for
 * writing rows beside the daemon; NULL on failure. */
static struct store *t_store_open(const char *loc)
{
	struct store_options so;

	memset(&so, 0, sizeof(so));
	if (store_location_parse(loc, &so) < 0) {
		return NULL;
	}
	so.so_sync = STORE_SYNC_OFF;
	return store_create(&so);
}

static int t_direct_open(struct t_direct *t, const char *extra)
{
	char store_ini[900];
	char conninfo[700];
	char ini[4096];

	memset(t, 0, sizeof(*t));
	snprintf(t->td_dir, sizeof(t->td_dir), "/tmp/test_gc.XXXXXX");
	if (mkdtemp(t->td_dir) == NULL) {
		return -1;
	}
	snprintf(t->td_ini, sizeof(t->td_ini), "%s/gc.ini", t->td_dir);
	if (hn_backend_is_postgresql()) {
		struct pgserver *pg;
		char db[64];

		pgserver_require_or_skip("test_gc");
		pg = pgserver_shared(NULL);
		if (pg == NULL || pgserver_create_db(pg, "gc", db) < 0) {
			return -1;
		}
		pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
		snprintf(t->td_db, sizeof(t->td_db), "postgresql:%s", conninfo);
		snprintf(store_ini, sizeof(store_ini), "backend = postgresql\nconninfo = %s\n",
		         conninfo);
	} else {
		snprintf(t->td_db, sizeof(t->td_db), "%s/gc.db", t->td_dir);
		snprintf(store_ini, sizeof(store_ini), "path = %s\n", t->td_db);
	}
	snprintf(ini, sizeof(ini),
	         "[store]\n%sretention = 7d\n\n"
	         "[provider stripe]\ntype = stripe\nsecret = whsec_gc\nretention = 4d\n\n"
	         "[provider legacy]\ntype = stripe\nsecret = whsec_gc\n\n"
	         "[capture]\nmode = off\ndir = %s/captures\n\n"
	         "[gc]\nbatch = 3\npause = 0\n%s",
	         store_ini, t->td_dir, extra != NULL ? extra : "");
	if (t_write(t->td_ini, ini) < 0) {
		return -1;
	}
	t->td_cf = provider_config_load(t->td_ini);
	if (t->td_cf == NULL) {
		return -1;
	}
	t->td_st = t_store_open(t->td_db);
	if (t->td_st == NULL) {
		return -1;
	}
	t->td_now = 1796200000000LL;
	return 0;
}

static void t_direct_close(struct t_direct *t)
{
	char cmd[256];

	store_destroy(t->td_st);
	config_destroy(t->td_cf);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->td_dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "could not remove %s\n", t->td_dir);
	}
}

struct t_rec {
	const char *tr_scope;
	const char *tr_key;
	const char *tr_status;
	int64_t tr_created;
	int64_t tr_lease;
	int64_t tr_received;
};

/* A key's row; a provider's finished key also carries its event (one row
 * per key, migration 0012), received tr_received_age before now. */
static int t_insert_rec(struct store_tx *tx, void *arg)
{
	const struct t_rec *r = arg;
	int event = strcmp(r->tr_status, "processing") != 0 && strncmp(r->tr_scope, "api:", 4) != 0;
	/* plain '?' only: the store's portable SQL (store.h) */
	struct store_value p[9] = {
	        store_text(r->tr_scope),
	        store_text(r->tr_key),
	        store_text(r->tr_status),
	        store_blob("fp", 2),
	        r->tr_lease != 0 ? store_int(r->tr_lease) : store_null(),
	        store_int(r->tr_created),
	        store_int(r->tr_created),
	        store_int(r->tr_received),
	        store_int(r->tr_received),
	};

	if (event) {
		return store_exec(
		        tx,
		        "INSERT INTO idempotency_records (scope, idem_key, status, "
		        "fingerprint, reply_status, lease_until, created_at, updated_at, "
		        "kind, outcome, received_at, processed_at) VALUES (?, ?, ?, ?, 200, "
		        "?, ?, ?, 'other', 'done', ?, ?)",
		        p, 9, NULL);
	}
	return store_exec(tx,
	                  "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	                  "reply_status, lease_until, created_at, updated_at) VALUES (?, ?, ?, ?, "
	                  "200, ?, ?, ?)",
	                  p, 7, NULL);
}

static void t_rec(struct t_direct *t, const char *scope, const char *key, const char *status,
                  int64_t age_ms, int64_t lease_ms)
{
	struct t_rec r = {scope, key, status, t->td_now - age_ms,
	                  lease_ms != 0 ? t->td_now + lease_ms : 0, t->td_now - age_ms};

	assert_int_equal(store_write(t->td_st, t->td_now, t_insert_rec, &r), 0);
}

static int64_t t_count(struct t_direct *t, const char *sql)
{
	return hn_db_int(t->td_db, sql);
}

static void
test_retention_boundary_is_kept_one_second_inside_and_deleted_one_second_outside(void **state)
{
	struct t_direct t;
	struct gc_report rep;

	(void)state;
	assert_int_equal(t_direct_open(&t, NULL), 0);
	/* stripe: its own 4 d; legacy, api and unknown scopes: [store] 7 d */
	t_rec(&t, "stripe", "s_out", "done", 4 * T_DAY_MS + T_SEC_MS, 0);
	t_rec(&t, "stripe", "s_in", "done", 4 * T_DAY_MS - T_SEC_MS, 0);
	t_rec(&t, "legacy", "l_5d", "done", 5 * T_DAY_MS, 0);
	t_rec(&t, "legacy", "l_out", "failed", 7 * T_DAY_MS + T_SEC_MS, 0);
	t_rec(&t, "api:orders:client", "a_out", "done", 7 * T_DAY_MS + T_SEC_MS, 0);
	t_rec(&t, "api:orders:client", "a_in", "done", 7 * T_DAY_MS - T_SEC_MS, 0);
	t_rec(&t, "removed-provider", "r_out", "done", 8 * T_DAY_MS, 0);
	/* an old record whose lease is still live is never cut short */
	t_rec(&t, "stripe", "s_leased", "processing", 9 * T_DAY_MS, 60 * T_SEC_MS);
	t_rec(&t, "stripe", "s_lease_over", "processing", 9 * T_DAY_MS, -T_SEC_MS);

	/* keys without an event (the order API's, the processing ones) count
	 * as records; a provider's finished key is one row with its event and
	 * counts as an event */
	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 1, &rep), 0);
	assert_int_equal(rep.gr_records, 2);
	assert_int_equal(rep.gr_events, 3);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM idempotency_records"), 9);

	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 0, &rep), 0);
	assert_int_equal(rep.gr_records, 2);
	assert_int_equal(rep.gr_events, 3);
	assert_true(rep.gr_batches >= 2); /* [gc] batch = 3 */
	assert_int_equal(t_count(&t, "SELECT count(*) FROM idempotency_records WHERE idem_key IN"
	                             " ('s_in', 'l_5d', 'a_in', 's_leased')"),
	                 4);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM idempotency_records"), 4);
	/* events follow their scope's retention too */
	assert_int_equal(t_count(&t, "SELECT count(*) FROM events"), 2);

	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 0, &rep), 0);
	assert_int_equal(rep.gr_records + rep.gr_events, 0);
	t_direct_close(&t);
}

/* A key and its event are one row: it goes when both its scope's retention
 * and events_retention have passed, whichever is longer. */
static void test_an_event_row_stays_until_both_retentions_have_passed(void **state)
{
	struct t_direct t;
	struct gc_report rep;
	struct t_rec r;

	(void)state;
	/* stripe keeps keys 4 d, events 10 d; legacy keeps keys 7 d */
	assert_int_equal(t_direct_open(&t, "events_retention = 10d\n"), 0);
	t_rec(&t, "stripe", "s_5d", "done", 5 * T_DAY_MS, 0);
	t_rec(&t, "stripe", "s_11d", "done", 11 * T_DAY_MS, 0);
	/* received long ago, but its key claimed again 5 d ago (an expired key run again) */
	r = (struct t_rec){"legacy", "l_key_5d", "done", t.td_now - 5 * T_DAY_MS, 0,
	                   t.td_now - 12 * T_DAY_MS};
	assert_int_equal(store_write(t.td_st, t.td_now, t_insert_rec, &r), 0);
	r = (struct t_rec){"legacy", "l_key_8d", "done", t.td_now - 8 * T_DAY_MS, 0,
	                   t.td_now - 12 * T_DAY_MS};
	assert_int_equal(store_write(t.td_st, t.td_now, t_insert_rec, &r), 0);
	t_rec(&t, "api:orders:client", "a_8d", "done", 8 * T_DAY_MS, 0);

	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 0, &rep), 0);
	assert_int_equal(rep.gr_records, 1);
	assert_int_equal(rep.gr_events, 2);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM idempotency_records WHERE idem_key IN"
	                             " ('s_5d', 'l_key_5d')"),
	                 2);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM idempotency_records"), 2);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM events"), 2);
	t_direct_close(&t);
}

static int t_insert_outbox(struct store_tx *tx, void *arg)
{
	int64_t now = store_tx_now(tx);
	static const char *const rows[][3] = {
	        {"succeeded", "none", "31"}, {"cancelled", "none", "31"},
	        {"succeeded", "none", "29"}, {"dead", "none", "31"},
	        {"dead", "done", "31"},      {"pending", "none", "31"},
	};
	size_t i;

	(void)arg;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char key[32];
		int64_t at = now - strtoll(rows[i][2], NULL, 10) * T_DAY_MS;
		struct store_value p[7] = {store_text(key),        store_text(rows[i][0]),
		                           store_text(rows[i][1]), store_int(at),
		                           store_int(at),          store_int(at),
		                           store_int(at)};

		snprintf(key, sizeof(key), "obx_%zu", i);
		if (store_exec(tx,
		               "INSERT INTO outbox (call_type, effect, url, content_type, body, "
		               "idem_key, status,"
		               " comp_state, window_start, next_attempt_at, created_at, updated_at)"
		               " VALUES ('notify', 'paid', 'http://127.0.0.1:1/', "
		               "'application/json', '{}', ?, ?, ?,"
		               " ?, ?, ?, ?)",
		               p, 7, NULL) < 0) {
			return -1;
		}
	}
	return 0;
}

static void test_finished_outbox_rows_go_after_their_retention_and_open_ones_stay(void **state)
{
	struct t_direct t;
	struct gc_report rep;

	(void)state;
	assert_int_equal(t_direct_open(&t, "outbox_retention = 30d\n"), 0);
	assert_int_equal(store_write(t.td_st, t.td_now, t_insert_outbox, NULL), 0);
	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 0, &rep), 0);
	assert_int_equal(rep.gr_outbox, 3);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM outbox"), 3);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM outbox WHERE status = 'pending'"), 1);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM outbox WHERE status = 'dead'"), 1);
	t_direct_close(&t);
}

struct t_parked {
	const char *tp_provider;
	const char *tp_key;
	int64_t tp_created;
	int64_t tp_applied; /* 0: still waiting for its payment */
};

static int t_insert_parked(struct store_tx *tx, void *arg)
{
	const struct t_parked *r = arg;
	struct store_value p[5] = {
	        store_text(r->tp_provider),
	        store_text(r->tp_key),
	        store_text(r->tp_key),
	        store_int(r->tp_created),
	        r->tp_applied != 0 ? store_int(r->tp_applied) : store_null(),
	};

	return store_exec(
	        tx,
	        "INSERT INTO order_parked (provider, ref, idem_key, kind, refund_ref, amount,"
	        " currency, created_at, applied_at)"
	        " VALUES (?, 'pi_parked', ?, 'refund', 're_' || ?, 500, 'USD', ?, ?)",
	        p, 5, NULL);
}

static void t_parked(struct t_direct *t, const char *provider, const char *key,
                     int64_t created_age_ms, int64_t applied_age_ms)
{
	struct t_parked r = {provider, key, t->td_now - created_age_ms,
	                     applied_age_ms >= 0 ? t->td_now - applied_age_ms : 0};

	assert_int_equal(store_write(t->td_st, t->td_now, t_insert_parked, &r), 0);
}

/* A parked refund applied longer ago than its provider's retention goes;
 * one applied more recently stays, and one still waiting for its payment
 * stays however old it is. */
static void test_applied_parked_events_go_after_their_retention_and_waiting_ones_stay(
        void **state)
{
	struct t_direct t;
	struct gc_report rep;

	(void)state;
	assert_int_equal(t_direct_open(&t, NULL), 0);
	/* stripe: 4 d; legacy: [store] 7 d */
	t_parked(&t, "stripe", "p_out", 10 * T_DAY_MS, 4 * T_DAY_MS + T_SEC_MS);
	t_parked(&t, "stripe", "p_in", 10 * T_DAY_MS, 4 * T_DAY_MS - T_SEC_MS);
	t_parked(&t, "stripe", "p_waiting", 90 * T_DAY_MS, -1);
	t_parked(&t, "legacy", "l_5d", 10 * T_DAY_MS, 5 * T_DAY_MS);
	t_parked(&t, "legacy", "l_out", 10 * T_DAY_MS, 7 * T_DAY_MS + T_SEC_MS);
	t_parked(&t, "legacy", "l_waiting", 90 * T_DAY_MS, -1);

	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 1, &rep), 0);
	assert_int_equal(rep.gr_parked, 2);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM order_parked"), 6);

	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 0, &rep), 0);
	assert_int_equal(rep.gr_parked, 2);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM order_parked WHERE idem_key IN"
	                             " ('p_in', 'p_waiting', 'l_5d', 'l_waiting')"),
	                 4);
	assert_int_equal(t_count(&t, "SELECT count(*) FROM order_parked"), 4);

	assert_int_equal(gc_run(t.td_st, t.td_cf, t.td_now, 0, &rep), 0);
	assert_int_equal(rep.gr_parked, 0);
	t_direct_close(&t);
}

/* ---- the daemon: 100,000 expired records while callbacks keep coming ---- */

struct t_bulk {
	int64_t tb_now;
	int tb_from;
	int tb_to;
};

static int t_bulk_insert(struct store_tx *tx, void *arg)
{
	const struct t_bulk *b = arg;
	char key[32];
	struct store_value p[4] = {store_text(key), store_blob("fp", 2), store_int(0),
	                           store_int(0)};
	int i;

	for (i = b->tb_from; i < b->tb_to; i++) {
		snprintf(key, sizeof(key), "evt_old_%06d", i);
		/* 8 to 9 days old: past the 7-day retention */
		p[2] = store_int(b->tb_now - 8 * T_DAY_MS - (int64_t)i * 500);
		p[3] = p[2];
		if (store_exec(
		            tx,
		            "INSERT INTO idempotency_records (scope, idem_key, status, "
		            "fingerprint, reply_status,"
		            " created_at, updated_at) VALUES ('stripe', ?, 'done', ?, 200, ?, ?)",
		            p, 4, NULL) < 0) {
			return -1;
		}
	}
	return 0;
}

struct t_load {
	struct daemon *tl_d;
	pthread_mutex_t tl_lock;
	int tl_stop;
	int tl_sent;
	int tl_ok;
	int tl_bad;
	int tl_during_gc; /* answered while expired rows were still there */
};

static int t_load_stopping(struct t_load *l)
{
	int stop;

	pthread_mutex_lock(&l->tl_lock);
	stop = l->tl_stop;
	pthread_mutex_unlock(&l->tl_lock);
	return stop;
}

static void *t_load_main(void *arg)
{
	struct t_load *l = arg;
	char id[64];
	int i;

	for (i = 0; !t_load_stopping(l); i++) {
		struct hres r;
		char *body;

		snprintf(id, sizeof(id), "evt_live_%06d", i);
		body = hn_stripe_event(id, "customer.created",
		                       "{\"id\":\"cus_1\",\"object\":\"customer\"}");
		assert_non_null(body);
		memset(&r, 0, sizeof(r));
		hn_post_stripe(l->tl_d, "stripe", TEST_STRIPE_SECRET, body, &r);
		pthread_mutex_lock(&l->tl_lock);
		l->tl_sent++;
		if (r.hs_status == 200) {
			l->tl_ok++;
		} else {
			l->tl_bad++;
			fprintf(stderr, "load: %s answered %ld\n", id, r.hs_status);
		}
		pthread_mutex_unlock(&l->tl_lock);
		hres_finish(&r);
		free(body);
	}
	return NULL;
}

static char *t_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *data;
	long n;

	if (f == NULL) {
		return NULL;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	data = calloc(1, (size_t)n + 1);
	if (data != NULL && fread(data, 1, (size_t)n, f) != (size_t)n) {
		free(data);
		data = NULL;
	}
	fclose(f);
	return data;
}

static void
test_daemon_deletes_100000_expired_records_in_batches_while_callbacks_keep_getting_answers(
        void **state)
{
	struct daemon d;
	struct store *st;
	struct t_bulk b;
	struct t_load l;
	pthread_t th;
	int64_t left = -1;
	int64_t deadline;
	char *log_text;
	const char *hit;
	int i;

	(void)state;
	assert_int_equal(daemon_init(&d, TEST_STRIPE_INI
	                             "\n[gc]\ninterval = 2s\nbatch = 5000\npause = 50ms\n"),
	                 0);
	st = t_store_open(d.dm_db);
	assert_non_null(st);
	b.tb_now = hn_now_ms();
	for (i = 0; i < T_INSERT_UNITS; i++) {
		b.tb_from = i * (T_EXPIRED_ROWS / T_INSERT_UNITS);
		b.tb_to = (i + 1) * (T_EXPIRED_ROWS / T_INSERT_UNITS);
		assert_int_equal(store_write(st, b.tb_now, t_bulk_insert, &b), 0);
	}
	store_destroy(st);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM idempotency_records"),
	                 T_EXPIRED_ROWS);
	{
		static const char *const args[] = {"gc", "--dry-run", NULL};
		char *out = NULL;

		/* the command line counts the same rows and deletes nothing */
		assert_int_equal(daemon_cli(&d, 1, args, &out), 0);
		assert_non_null(out);
		assert_non_null(strstr(out, "would delete"));
		assert_non_null(strstr(out, "100000"));
		free(out);
		assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM idempotency_records"),
		                 T_EXPIRED_ROWS);
	}

	assert_int_equal(daemon_start(&d), 0);
	memset(&l, 0, sizeof(l));
	l.tl_d = &d;
	pthread_mutex_init(&l.tl_lock, NULL);
	assert_int_equal(pthread_create(&th, NULL, t_load_main, &l), 0);
	deadline = hn_now_ms() + 240 * 1000;
	while (hn_now_ms() < deadline) {
		left = hn_db_int(
		        d.dm_db,
		        "SELECT count(*) FROM idempotency_records WHERE idem_key LIKE 'evt_old_%'");
		pthread_mutex_lock(&l.tl_lock);
		if (left > 0) {
			l.tl_during_gc = l.tl_ok;
		}
		pthread_mutex_unlock(&l.tl_lock);
		if (left == 0) {
			break;
		}
		usleep(100 * 1000);
	}
	/* keep the load on a little past the end of the pass */
	usleep(300 * 1000);
	pthread_mutex_lock(&l.tl_lock);
	l.tl_stop = 1;
	pthread_mutex_unlock(&l.tl_lock);
	pthread_join(th, NULL);
	fprintf(stderr,
	        "load: %d sent, %d answered 200 (%d while expired rows were left), %d other\n",
	        l.tl_sent, l.tl_ok, l.tl_during_gc, l.tl_bad);

	assert_int_equal(left, 0);
	assert_int_equal(l.tl_bad, 0);
	assert_true(l.tl_during_gc > 0);
	/* every live callback is still there: gc touched only the expired */
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM idempotency_records WHERE "
	                                    "idem_key LIKE 'evt_live_%'"),
	                 l.tl_ok);
	assert_int_equal(daemon_term(&d, 30), 0);

	/* the pass was cut into batches of [gc] batch rows */
	log_text = t_slurp(d.dm_log);
	assert_non_null(log_text);
	hit = strstr(log_text, "gc: deleted 100000 records");
	if (hit == NULL) {
		fprintf(stderr, "%s\n", log_text);
	}
	assert_non_null(hit);
	assert_non_null(strstr(hit, " batches"));
	{
		const char *in = strstr(hit, " in ");
		long batches = in != NULL ? strtol(in + 4, NULL, 10) : 0;

		assert_true(batches >= T_EXPIRED_ROWS / 5000);
	}
	free(log_text);
	daemon_finish(&d);
}

/* ---- the file gives space back; the interval follows reloads ---- */

#define T_BIG_ROWS 20000
#define T_BIG_BODY 1000 /* bytes of stored reply per row */

struct t_fill {
	int64_t tf_now;
	const char *tf_prefix;
	int tf_n;
	size_t tf_body;
};

/* Expired records (8 days old) with a stored reply of tf_body bytes. */
static int t_fill_tx(struct store_tx *tx, void *arg)
{
	const struct t_fill *f = arg;
	char key[64];
	char *body = malloc(f->tf_body + 1);
	struct store_value p[5];
	int rc = 0;
	int i;

	if (body == NULL) {
		return -1;
	}
	memset(body, 'x', f->tf_body);
	body[f->tf_body] = '\0';
	for (i = 0; i < f->tf_n && rc == 0; i++) {
		snprintf(key, sizeof(key), "%s_%06d", f->tf_prefix, i);
		p[0] = store_text(key);
		p[1] = store_blob("fp", 2);
		p[2] = store_blob(body, f->tf_body > 0 ? f->tf_body : 1);
		p[3] = store_int(f->tf_now - 8 * T_DAY_MS - i);
		p[4] = p[3];
		rc = store_exec(
		        tx,
		        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
		        "reply_status, reply_body, created_at, updated_at)"
		        " VALUES ('stripe', ?, 'done', ?, 200, ?, ?, ?)",
		        p, 5, NULL);
	}
	free(body);
	return rc;
}

/* Adds n expired records called prefix_NNNNNN to the database at path
 * (the daemon may be running on it). */
static void t_fill(const char *path, const char *prefix, int n, size_t body)
{
	struct store *st;
	struct t_fill f = {hn_now_ms(), prefix, n, body};

	st = t_store_open(path);
	assert_non_null(st);
	assert_int_equal(store_write(st, f.tf_now, t_fill_tx, &f), 0);
	store_destroy(st);
}

/* The database file and its WAL, in bytes. */
static int64_t t_file_bytes(const char *db)
{
	char wal[700];
	struct stat sb;
	int64_t n = 0;

	if (stat(db, &sb) == 0) {
		n += (int64_t)sb.st_size;
	}
	snprintf(wal, sizeof(wal), "%s-wal", db);
	if (stat(wal, &sb) == 0) {
		n += (int64_t)sb.st_size;
	}
	return n;
}

static int64_t t_left(struct daemon *d, const char *prefix)
{
	char sql[200];

	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM idempotency_records WHERE idem_key LIKE '%s_%%'", prefix);
	return hn_db_int(d->dm_db, sql);
}

/* Waits up to ms for the rows called prefix_... to be gone. */
static int t_gone_within(struct daemon *d, const char *prefix, int ms)
{
	int64_t until = hn_now_ms() + ms;

	while (hn_now_ms() < until) {
		if (t_left(d, prefix) == 0) {
			return 1;
		}
		usleep(100 * 1000);
	}
	return 0;
}

/* Rewrites "interval = OLD" in the daemon's config and sends SIGHUP; waits
 * for the log to say the reload was taken. */
static void t_set_interval(struct daemon *d, const char *interval)
{
	char *text = t_slurp(d->dm_config);
	char *at;
	char *log_text;
	size_t before = 0;
	FILE *f;
	int i;

	assert_non_null(text);
	at = strstr(text, "interval = ");
	assert_non_null(at);
	log_text = t_slurp(d->dm_log);
	for (const char *p = log_text; p != NULL && (p = strstr(p, "SIGHUP: configuration")) != NULL;
	     p++) {
		before++;
	}
	free(log_text);
	f = fopen(d->dm_config, "w");
	assert_non_null(f);
	fwrite(text, 1, (size_t)(at - text), f);
	fprintf(f, "interval = %s\n", interval);
	fputs(strchr(at, '\n') + 1, f);
	assert_int_equal(fclose(f), 0);
	free(text);
	assert_int_equal(daemon_signal(d, SIGHUP), 0);
	for (i = 0; i < 100; i++) {
		size_t now = 0;

		log_text = t_slurp(d->dm_log);
		for (const char *p = log_text; p != NULL && (p = strstr(p, "SIGHUP: configuration")) != NULL;
		     p++) {
			now++;
		}
		free(log_text);
		if (now > before) {
			return;
		}
		usleep(50 * 1000);
	}
	fail_msg("the reload to interval = %s was not taken", interval);
}

static double t_metric(struct daemon *d, const char *sample)
{
	struct hres r;
	char url[256];
	const char *at;
	double v;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	/* a sample line, not the HELP line that names it too */
	for (at = strstr(r.hs_body, sample); at != NULL && at != r.hs_body && at[-1] != '\n';
	     at = strstr(at + 1, sample)) {
	}
	if (at == NULL) {
		fail_msg("no %s in /metrics", sample);
	}
	v = strtod(at + strlen(sample), NULL);
	hres_finish(&r);
	return v;
}

/* Waits up to 10 s for sample to reach want (a pass is counted when it
 * ends, a little after its effect shows); returns the last value. */
static double t_metric_reaches(struct daemon *d, const char *sample, double want)
{
	int64_t until = hn_now_ms() + 10000;
	double v;

	for (;;) {
		v = t_metric(d, sample);
		if (v >= want || hn_now_ms() > until) {
			return v;
		}
		usleep(100 * 1000);
	}
}

static void test_gc_interval_changed_by_sighup_takes_effect_at_once(void **state)
{
	struct daemon d;

	(void)state;
	assert_int_equal(daemon_init(&d, TEST_STRIPE_INI "\n[gc]\ninterval = 0\npause = 0\n"), 0);
	t_fill(d.dm_db, "off", 50, 10);
	assert_int_equal(daemon_start(&d), 0);
	usleep(1500 * 1000);
	assert_int_equal(t_left(&d, "off"), 50); /* cleanup off */

	/* from 0: a worker runs */
	t_set_interval(&d, "1s");
	assert_true(t_gone_within(&d, "off", 10000));

	/* to 0: it stops */
	t_set_interval(&d, "0");
	t_fill(d.dm_db, "paused", 50, 10);
	usleep(2500 * 1000);
	assert_int_equal(t_left(&d, "paused"), 50);

	/* a long interval, then a short one: the short one applies at once,
	 * not after the long sleep */
	t_set_interval(&d, "1h");
	usleep(1500 * 1000);
	assert_int_equal(t_left(&d, "paused"), 50);
	t_set_interval(&d, "2s");
	assert_true(t_gone_within(&d, "paused", 10000));

	assert_true(t_metric_reaches(&d, "idemhook_gc_runs_total{result=\"success\"} ", 2) >= 2);
	assert_true(t_metric_reaches(&d, "idemhook_gc_deleted_total{kind=\"records\"} ", 100) == 100);
	assert_true(t_metric(&d, "idemhook_config_reloads_total{result=\"success\"} ") == 4);
	assert_true(t_metric(&d, "idemhook_config_generation ") == 5);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_a_pass_that_frees_much_gives_the_space_back_to_the_file_system(void **state)
{
	struct daemon d;
	int64_t before;
	int64_t after = 0;
	int64_t until;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* a SQLite file's size; PostgreSQL's space is the server's VACUUM */
	}
	assert_int_equal(daemon_init(&d, TEST_STRIPE_INI "\n[gc]\ninterval = 1s\n"), 0);
	t_fill(d.dm_db, "big", T_BIG_ROWS, T_BIG_BODY);
	before = t_file_bytes(d.dm_db);
	assert_true(before > T_BIG_ROWS * T_BIG_BODY);
	assert_int_equal(daemon_start(&d), 0);
	assert_true(t_gone_within(&d, "big", 60000));
	until = hn_now_ms() + 30000;
	while (hn_now_ms() < until) {
		after = t_file_bytes(d.dm_db);
		if (after < before / 4) {
			break;
		}
		usleep(100 * 1000);
	}
	fprintf(stderr, "gc: %d records of %d bytes deleted; database files %lld -> %lld bytes\n",
	        T_BIG_ROWS, T_BIG_BODY, (long long)before, (long long)after);
	assert_true(after < before / 4);
	assert_true(t_metric_reaches(&d, "idemhook_gc_reclaimed_bytes_total ", 1) > 0);
	assert_int_equal(hn_db_int(d.dm_db, "PRAGMA auto_vacuum"), 2);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_gc_vacuum_shrinks_an_older_database_once_and_switches_it_to_incremental(
        void **state)
{
	static const char *const gc[] = {"gc", NULL};
	static const char *const vacuum[] = {"gc", "--vacuum", NULL};
	static const char *const both[] = {"gc", "--vacuum", "--dry-run", NULL};
	struct daemon d;
	char cmd[1024];
	char *out = NULL;
	int64_t before;
	int64_t mid;
	int64_t after;

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* gc --vacuum is SQLite's incremental vacuum */
	}
	assert_int_equal(daemon_init(&d, TEST_STRIPE_INI "\n[gc]\npause = 0\n"), 0);
	t_fill(d.dm_db, "old", 0, 1);
	/* as a database made before idemhook set incremental vacuum */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'PRAGMA auto_vacuum = NONE; VACUUM;'", d.dm_db);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(hn_db_int(d.dm_db, "PRAGMA auto_vacuum"), 0);
	t_fill(d.dm_db, "old", T_BIG_ROWS, T_BIG_BODY);
	before = t_file_bytes(d.dm_db);

	/* a plain pass deletes, but the file keeps its size */
	assert_int_equal(daemon_cli(&d, 1, gc, &out), 0);
	assert_non_null(strstr(out, "20000"));
	free(out);
	out = NULL;
	assert_int_equal(t_left(&d, "old"), 0);
	mid = t_file_bytes(d.dm_db);
	assert_true(mid > before / 2);

	assert_int_equal(daemon_cli(&d, 1, both, NULL), 64);
	assert_int_equal(daemon_cli(&d, 1, vacuum, &out), 0);
	assert_non_null(strstr(out, "database files"));
	free(out);
	after = t_file_bytes(d.dm_db);
	fprintf(stderr, "gc --vacuum: database files %lld -> %lld (after gc) -> %lld bytes\n",
	        (long long)before, (long long)mid, (long long)after);
	assert_true(after < before / 4);
	assert_int_equal(hn_db_int(d.dm_db, "PRAGMA auto_vacuum"), 2);
	daemon_finish(&d);
}

/* A Stripe payment for an order that does not exist: acknowledged 200,
 * stored as a failed event. test_mode 1 sends it as Stripe's test mode. */
static void t_post_unknown_order(struct daemon *d, const char *id, int test_mode)
{
	char object[256];
	struct hres r;
	char *body;
	char *at;
	size_t len;

	snprintf(object, sizeof(object),
	         "{\"id\":\"pi_%s\",\"object\":\"payment_intent\",\"amount\":100,"
	         "\"amount_received\":100,\"currency\":\"usd\",\"metadata\":{"
	         "\"order_id\":\"ord_nosuchorder_%s\"}}",
	         id, id);
	body = hn_stripe_event(id, "payment_intent.succeeded", object);
	assert_non_null(body);
	at = strstr(body, "\"livemode\":true");
	assert_non_null(at);
	if (test_mode) {
		/* true -> false: one byte longer, the rest moved along */
		len = strlen(body);
		body = realloc(body, len + 2);
		assert_non_null(body);
		at = strstr(body, "\"livemode\":true") + strlen("\"livemode\":");
		memmove(at + 5, at + 4, strlen(at + 4) + 1);
		memcpy(at, "false", 5);
	}
	assert_int_equal(hn_post_stripe(d, "stripe", TEST_STRIPE_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "unknown_order"));
	hres_finish(&r);
	free(body);
}

/* A failed event that nobody has dealt with is a payment the provider was
 * told arrived and will not send again: gc keeps it, however old, until it
 * is reprocessed into done or dismissed. Dismissed ones, test-mode ones and
 * done ones expire as before. The pass runs by hand while the daemon
 * serves. */
static void test_gc_keeps_an_open_failed_event_past_every_retention(void **state)
{
	static const char *const gc[] = {"gc", NULL};
	static const char *const dismiss[] = {
	        "events", "dismiss", "0", "--reason", "paid outside the shop", NULL};
	const char *dismiss_args[6];
	char order[64];
	char id[32];
	char sql[512];
	struct daemon d;
	struct hres r;
	char *body;
	char *out = NULL;

	(void)state;
	assert_int_equal(daemon_init(&d, TEST_STRIPE_INI "retention = 4d\n"
	                                                 "\n[gc]\ninterval = 0\n"
	                                                 "events_retention = 10d\n"),
	                 0);
	assert_int_equal(daemon_start(&d), 0);
	t_post_unknown_order(&d, "evt_gc_open", 0);
	t_post_unknown_order(&d, "evt_gc_dismissed", 0);
	t_post_unknown_order(&d, "evt_gc_sandbox", 1);
	assert_int_equal(hn_order_create(&d, 100, "usd", order), 0);
	snprintf(sql, sizeof(sql),
	         "{\"id\":\"pi_gc_done\",\"object\":\"payment_intent\",\"amount\":100,"
	         "\"amount_received\":100,\"currency\":\"usd\",\"metadata\":{"
	         "\"order_id\":\"%s\"}}",
	         order);
	body = hn_stripe_event("evt_gc_done", "payment_intent.succeeded", sql);
	assert_int_equal(hn_post_stripe(&d, "stripe", TEST_STRIPE_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	free(body);

	snprintf(id, sizeof(id), "%lld",
	         (long long)hn_db_int(d.dm_db, "SELECT id FROM events WHERE idem_key = "
	                                       "'evt_gc_dismissed'"));
	memcpy(dismiss_args, dismiss, sizeof(dismiss_args));
	dismiss_args[2] = id;
	assert_int_equal(daemon_cli(&d, 1, dismiss_args, NULL), 0);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM events WHERE outcome = 'failed'"),
	                 3);

	/* Eleven days on: past the key's 4 days and the events' 10. */
	snprintf(sql, sizeof(sql),
	         "UPDATE idempotency_records SET created_at = created_at - %lld, "
	         "updated_at = updated_at - %lld, received_at = received_at - %lld, "
	         "processed_at = processed_at - %lld",
	         11 * T_DAY_MS, 11 * T_DAY_MS, 11 * T_DAY_MS, 11 * T_DAY_MS);
	assert_int_equal(hn_db_exec(d.dm_db, sql), 0);

	assert_int_equal(daemon_cli(&d, 1, gc, &out), 0);
	free(out);
	out = NULL;
	assert_int_equal(
	        hn_db_int(d.dm_db, "SELECT count(*) FROM events WHERE idem_key = 'evt_gc_open'"),
	        1);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM events WHERE "
	                                    "idem_key <> 'evt_gc_open'"),
	                 0);
	/* still listed, still counted, still alerting */
	{
		static const char *const list[] = {"events", "list", "--failed", NULL};

		assert_int_equal(daemon_cli(&d, 1, list, &out), 0);
		assert_non_null(out);
		assert_non_null(strstr(out, "evt_gc_open"));
		free(out);
		out = NULL;
	}
	assert_true(t_metric(&d, "idemhook_events_failed_open ") == 1);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_retention_boundary_is_kept_one_second_inside_and_deleted_one_second_outside),
	        cmocka_unit_test(test_an_event_row_stays_until_both_retentions_have_passed),
	        cmocka_unit_test(
	                test_finished_outbox_rows_go_after_their_retention_and_open_ones_stay),
	        cmocka_unit_test(test_gc_keeps_an_open_failed_event_past_every_retention),
	        cmocka_unit_test(
	                test_daemon_deletes_100000_expired_records_in_batches_while_callbacks_keep_getting_answers),
	        cmocka_unit_test(
	                test_applied_parked_events_go_after_their_retention_and_waiting_ones_stay),
	        cmocka_unit_test(test_gc_interval_changed_by_sighup_takes_effect_at_once),
	        cmocka_unit_test(
	                test_a_pass_that_frees_much_gives_the_space_back_to_the_file_system),
	        cmocka_unit_test(
	                test_gc_vacuum_shrinks_an_older_database_once_and_switches_it_to_incremental),
	};

	log_set_level(LOG_LEVEL_WARNING);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
