/* test_lifecycle.c: the daemon as a service: SIGTERM under load loses no
 * acknowledged callback, SIGHUP rotates secrets while callbacks arrive, and
 * a broken config is refused while the old one keeps working. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"
#include "store.h"

#define T_SECRET_A "whsec_lifecycle_secret_a"
#define T_SECRET_B "whsec_lifecycle_secret_b"
#define T_INI_A "[provider stripe]\ntype = stripe\nsecret = " T_SECRET_A "\n"
#define T_INI_AB                                                                                   \
	"[provider stripe]\ntype = stripe\nsecret = " T_SECRET_A "\nsecret = " T_SECRET_B "\n"
#define T_INI_B "[provider stripe]\ntype = stripe\nsecret = " T_SECRET_B "\n"
#define T_LOADERS 4
#define T_PER_LOADER 20000 /* upper bound of events one loader may send */

static char *t_event(const char *id)
{
	char *body = hn_stripe_event(id, "customer.created",
	                             "{\"id\":\"cus_life\",\"object\":\"customer\"}");

	assert_non_null(body);
	return body;
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

/* Rewrites the config: what daemon_init wrote with old_extra replaced by
 * new_extra (listeners and [store] stay as they were). */
static void t_rewrite_config(struct daemon *d, const char *old_extra, const char *new_extra)
{
	char *text = t_slurp(d->dm_config);
	char *at;
	FILE *f;

	assert_non_null(text);
	at = strstr(text, old_extra);
	assert_non_null(at);
	f = fopen(d->dm_config, "w");
	assert_non_null(f);
	fwrite(text, 1, (size_t)(at - text), f);
	fputs(new_extra, f);
	fputs(at + strlen(old_extra), f);
	assert_int_equal(fclose(f), 0);
	free(text);
}

/* ---- SIGTERM under load ---- */

struct t_loader {
	struct daemon *tl_d;
	int tl_index;
	volatile int *tl_stop;
	long tl_status[T_PER_LOADER]; /* answer per event, 0 = no HTTP answer */
	int tl_n;
};

static void *t_loader_main(void *arg)
{
	struct t_loader *l = arg;
	char id[64];

	while (!__atomic_load_n(l->tl_stop, __ATOMIC_ACQUIRE) && l->tl_n < T_PER_LOADER) {
		struct hres r;
		char *body;

		snprintf(id, sizeof(id), "evt_term_%d_%05d", l->tl_index, l->tl_n);
		body = t_event(id);
		memset(&r, 0, sizeof(r));
		if (hn_post_stripe(l->tl_d, "stripe", T_SECRET_A, body, &r) < 0) {
			r.hs_status = 0;
		}
		l->tl_status[l->tl_n++] = r.hs_status;
		hres_finish(&r);
		free(body);
	}
	return NULL;
}

static void
test_sigterm_under_load_keeps_every_acknowledged_callback_and_a_restart_answers_the_rest(
        void **state)
{
	static struct t_loader loaders[T_LOADERS];
	pthread_t th[T_LOADERS];
	volatile int stop = 0;
	struct daemon d;
	char sql[256];
	char id[64];
	int acked = 0;
	int unanswered = 0;
	int other = 0;
	int i;
	int j;

	(void)state;
	fx_daemon_start(&d, T_INI_A);
	for (i = 0; i < T_LOADERS; i++) {
		memset(&loaders[i], 0, sizeof(loaders[i]));
		loaders[i].tl_d = &d;
		loaders[i].tl_index = i;
		loaders[i].tl_stop = &stop;
		assert_int_equal(pthread_create(&th[i], NULL, t_loader_main, &loaders[i]), 0);
	}
	usleep(1500 * 1000);
	/* exit 0 within a bounded time, in the middle of the load */
	assert_int_equal(daemon_term(&d, 30), 0);
	usleep(200 * 1000);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < T_LOADERS; i++) {
		pthread_join(th[i], NULL);
	}

	/* every 2xx is committed */
	for (i = 0; i < T_LOADERS; i++) {
		for (j = 0; j < loaders[i].tl_n; j++) {
			long s = loaders[i].tl_status[j];

			if (s >= 200 && s < 300) {
				acked++;
				snprintf(sql, sizeof(sql),
				         "SELECT count(*) FROM idempotency_records WHERE scope = "
				         "'stripe' AND"
				         " idem_key = 'evt_term_%d_%05d' AND status = 'done'",
				         i, j);
				assert_int_equal(hn_db_int(d.dm_db, sql), 1);
			} else if (s == 0) {
				unanswered++;
			} else {
				other++;
			}
		}
	}
	fprintf(stderr, "sigterm: %d acknowledged, %d without an answer, %d other\n", acked,
	        unanswered, other);
	assert_true(acked > 0);
	assert_true(unanswered > 0); /* the load really outlived the daemon */
	/* a request in flight was finished or refused (503), never anything else */
	for (i = 0; i < T_LOADERS; i++) {
		for (j = 0; j < loaders[i].tl_n; j++) {
			long s = loaders[i].tl_status[j];

			assert_true(s == 0 || s == 200 || s == 503);
		}
	}
	assert_int_equal(
	        hn_db_int(d.dm_db,
	                  "SELECT count(*) FROM idempotency_records WHERE status <> 'done'"),
	        0);

	/* the restarted daemon replays what was acknowledged and applies the rest */
	assert_int_equal(daemon_start(&d), 0);
	for (i = 0; i < T_LOADERS; i++) {
		for (j = 0; j < loaders[i].tl_n; j++) {
			struct hres r;
			char *replayed;
			char *body;

			snprintf(id, sizeof(id), "evt_term_%d_%05d", i, j);
			body = t_event(id);
			assert_int_equal(hn_post_stripe(&d, "stripe", T_SECRET_A, body, &r), 0);
			assert_int_equal(r.hs_status, 200);
			replayed = hres_header(&r, "Idempotent-Replayed");
			if (loaders[i].tl_status[j] == 200) {
				assert_non_null(replayed);
			}
			free(replayed);
			hres_finish(&r);
			free(body);
		}
	}
	{
		int total = 0;

		for (i = 0; i < T_LOADERS; i++) {
			total += loaders[i].tl_n;
		}
		assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM idempotency_records"),
		                 total);
		assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM events"), total);
		/* the daily check sees the same callbacks, none failed or stuck */
		{
			static const char *const args[] = {"stats", "--json", NULL};
			char expect[64];
			char *out = NULL;

			assert_int_equal(daemon_cli(&d, 1, args, &out), 0);
			assert_non_null(out);
			snprintf(expect, sizeof(expect), "\"events\":%d,", total);
			assert_non_null(strstr(out, expect));
			assert_non_null(strstr(out, "\"events_failed\":0,"));
			assert_non_null(strstr(out, "\"processing_stuck\":0"));
			free(out);
		}
	}
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* ---- SIGHUP ---- */

struct t_rotator {
	struct daemon *tr_d;
	pthread_mutex_t tr_lock;
	const char *tr_secret; /* the secret the sender signs with now */
	int tr_stop;
	int tr_sent;
	int tr_bad; /* anything but 200 */
};

static void *t_rotator_main(void *arg)
{
	struct t_rotator *t = arg;
	char id[64];
	int i;

	for (i = 0;; i++) {
		const char *secret;
		struct hres r;
		char *body;
		int stop;

		pthread_mutex_lock(&t->tr_lock);
		stop = t->tr_stop;
		secret = t->tr_secret;
		pthread_mutex_unlock(&t->tr_lock);
		if (stop) {
			break;
		}
		snprintf(id, sizeof(id), "evt_rot_%06d", i);
		body = t_event(id);
		memset(&r, 0, sizeof(r));
		hn_post_stripe(t->tr_d, "stripe", secret, body, &r);
		pthread_mutex_lock(&t->tr_lock);
		t->tr_sent++;
		if (r.hs_status != 200) {
			t->tr_bad++;
			fprintf(stderr, "rotation: %s signed with %s answered %ld\n", id,
			        strcmp(secret, T_SECRET_A) == 0 ? "A" : "B", r.hs_status);
		}
		pthread_mutex_unlock(&t->tr_lock);
		hres_finish(&r);
		free(body);
	}
	return NULL;
}

/* Posts a fresh event signed with secret until it gets want (up to 10 s). */
static long t_probe_until(struct daemon *d, const char *secret, long want, const char *tag)
{
	static int n;
	long got = 0;
	int i;

	for (i = 0; i < 100; i++) {
		struct hres r;
		char id[64];
		char *body;

		snprintf(id, sizeof(id), "evt_probe_%s_%04d", tag, n++);
		body = t_event(id);
		memset(&r, 0, sizeof(r));
		hn_post_stripe(d, "stripe", secret, body, &r);
		got = r.hs_status;
		hres_finish(&r);
		free(body);
		if (got == want) {
			break;
		}
		usleep(100 * 1000);
	}
	return got;
}

static void test_sighup_rotates_the_secret_while_callbacks_keep_arriving(void **state)
{
	struct t_rotator t;
	struct daemon d;
	pthread_t th;

	(void)state;
	fx_daemon_start(&d, T_INI_A);
	memset(&t, 0, sizeof(t));
	t.tr_d = &d;
	t.tr_secret = T_SECRET_A;
	pthread_mutex_init(&t.tr_lock, NULL);
	assert_int_equal(pthread_create(&th, NULL, t_rotator_main, &t), 0);
	usleep(300 * 1000);

	/* B is not known yet */
	assert_int_equal(t_probe_until(&d, T_SECRET_B, 401, "b0"), 401);
	/* step 1: A and B both active */
	t_rewrite_config(&d, T_INI_A, T_INI_AB);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(t_probe_until(&d, T_SECRET_B, 200, "b1"), 200);
	pthread_mutex_lock(&t.tr_lock);
	t.tr_secret = T_SECRET_B;
	pthread_mutex_unlock(&t.tr_lock);
	usleep(300 * 1000);
	/* step 2: A retired */
	t_rewrite_config(&d, T_INI_AB, T_INI_B);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(t_probe_until(&d, T_SECRET_A, 401, "a2"), 401);
	usleep(300 * 1000);

	pthread_mutex_lock(&t.tr_lock);
	t.tr_stop = 1;
	pthread_mutex_unlock(&t.tr_lock);
	pthread_join(th, NULL);
	fprintf(stderr, "rotation: %d callbacks sent across two reloads, %d not answered 200\n",
	        t.tr_sent, t.tr_bad);
	assert_true(t.tr_sent > 0);
	assert_int_equal(t.tr_bad, 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_a_broken_config_on_sighup_is_refused_and_the_old_one_keeps_serving(void **state)
{
	struct daemon d;
	struct hres r;
	char url[256];
	char *log_text;
	int i;

	(void)state;
	fx_daemon_start(&d, T_INI_A);
	/* an unknown provider type, then plain garbage */
	t_rewrite_config(&d, T_INI_A, "[provider stripe]\ntype = no-such-provider\n");
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	for (i = 0; i < 100; i++) {
		log_text = t_slurp(d.dm_log);
		if (log_text != NULL &&
		    strstr(log_text, "keeping the running configuration") != NULL) {
			free(log_text);
			break;
		}
		free(log_text);
		usleep(100 * 1000);
	}
	assert_true(i < 100);
	assert_int_equal(kill(d.dm_pid, 0), 0);
	assert_int_equal(t_probe_until(&d, T_SECRET_A, 200, "broken"), 200);

	assert_int_equal(daemon_write_file(&d, "idemhook.ini", "[server\nthis is = not [an ini\n"),
	                 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	usleep(500 * 1000);
	assert_int_equal(kill(d.dm_pid, 0), 0);
	assert_int_equal(t_probe_until(&d, T_SECRET_A, 200, "garbage"), 200);
	snprintf(url, sizeof(url), "%s/readyz", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* A misspelt allow_from would open an endpoint to everyone: the key is
 * refused at start, and on SIGHUP the running config (address limit and
 * all) keeps serving. */
static void test_a_misspelt_key_refuses_start_and_reload_and_the_old_config_keeps_serving(
        void **state)
{
	struct daemon d;
	struct hres r;
	char url[256];

	(void)state;
	assert_int_equal(daemon_init(&d, T_INI_A "allow_frm = 192.0.2.0/24\n"), 0);
	assert_int_equal(daemon_start(&d), -1);
	/* File and line (the harness writes the section after its own). */
	assert_int_equal(daemon_log_wait(&d, "idemhook.ini:18: [provider stripe] unknown key "
	                                     "\"allow_frm\"; did you mean \"allow_from\"?",
	                                 0),
	                 0);
	daemon_finish(&d);

	fx_daemon_start(&d, T_INI_A "allow_from = 192.0.2.0/24\n");
	assert_int_equal(t_probe_until(&d, T_SECRET_A, 403, "limited"), 403);
	t_rewrite_config(&d, "allow_from = 192.0.2.0/24\n", "allow_frm = 192.0.2.0/24\n");
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "keeping the running configuration", 10000), 0);
	assert_int_equal(daemon_log_wait(&d, "did you mean \"allow_from\"?", 0), 0);
	assert_int_equal(kill(d.dm_pid, 0), 0);
	assert_int_equal(t_probe_until(&d, T_SECRET_A, 403, "still-limited"), 403);
	snprintf(url, sizeof(url), "%s/readyz", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* ---- sd_notify ---- */

/* A stand-in for systemd's notify socket: a datagram socket the daemon finds
 * in $NOTIFY_SOCKET. Messages are appended to one text, '|' between them. */
struct t_notify {
	char tn_dir[64];
	char tn_path[128];
	int tn_fd;
	char tn_log[16384];
	size_t tn_len;
};

static void t_notify_open(struct t_notify *n)
{
	struct sockaddr_un sa;
	struct timeval tv = {.tv_sec = 0, .tv_usec = 50 * 1000};

	memset(n, 0, sizeof(*n));
	snprintf(n->tn_dir, sizeof(n->tn_dir), "/tmp/idemhook-notify.XXXXXX");
	assert_non_null(mkdtemp(n->tn_dir));
	snprintf(n->tn_path, sizeof(n->tn_path), "%s/notify", n->tn_dir);
	n->tn_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(n->tn_fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, n->tn_path, strlen(n->tn_path) + 1);
	assert_int_equal(bind(n->tn_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(setsockopt(n->tn_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

static void t_notify_close(struct t_notify *n)
{
	close(n->tn_fd);
	unlink(n->tn_path);
	rmdir(n->tn_dir);
}

/* Reads messages until want appears after offset from (up to timeout_ms).
 * Returns the offset just past it, or -1. */
static long t_notify_wait(struct t_notify *n, size_t from, const char *want, int timeout_ms)
{
	int64_t deadline = hn_now_ms() + timeout_ms;
	char msg[1024];

	for (;;) {
		const char *hit;
		ssize_t got;

		n->tn_log[n->tn_len] = '\0';
		hit = from <= n->tn_len ? strstr(n->tn_log + from, want) : NULL;
		if (hit != NULL) {
			return (long)(hit - n->tn_log) + (long)strlen(want);
		}
		if (hn_now_ms() > deadline) {
			fprintf(stderr, "notify: no %s; got: %s\n", want, n->tn_log);
			return -1;
		}
		got = recv(n->tn_fd, msg, sizeof(msg) - 1, 0);
		if (got > 0 && n->tn_len + (size_t)got + 2 < sizeof(n->tn_log)) {
			memcpy(n->tn_log + n->tn_len, msg, (size_t)got);
			n->tn_len += (size_t)got;
			n->tn_log[n->tn_len++] = '|';
		}
	}
}

static void test_systemd_hears_ready_watchdog_reloading_and_stopping_in_order(void **state)
{
	struct t_notify n;
	struct daemon d;
	struct hres r;
	char url[256];
	long at;
	long wd;

	(void)state;
	t_notify_open(&n);
	assert_int_equal(daemon_init(&d, T_INI_A), 0);
	setenv("NOTIFY_SOCKET", n.tn_path, 1);
	setenv("WATCHDOG_USEC", "400000", 1); /* WATCHDOG=1 every 200 ms */
	assert_int_equal(daemon_start(&d), 0);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");

	/* READY=1 once, after the status lines of the start */
	at = t_notify_wait(&n, 0, "READY=1", 10000);
	assert_true(at > 0);
	assert_non_null(strstr(n.tn_log, "STATUS="));
	snprintf(url, sizeof(url), "%s/readyz", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	/* the serving loop keeps the watchdog fed */
	wd = t_notify_wait(&n, (size_t)at, "WATCHDOG=1", 2000);
	assert_true(wd > 0);
	assert_true(t_notify_wait(&n, (size_t)wd, "WATCHDOG=1", 2000) > 0);
	/* a reload is bracketed by RELOADING=1 and READY=1 */
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	at = t_notify_wait(&n, (size_t)at, "RELOADING=1", 5000);
	assert_true(at > 0);
	assert_non_null(strstr(n.tn_log + at, "MONOTONIC_USEC="));
	at = t_notify_wait(&n, (size_t)at, "READY=1", 5000);
	assert_true(at > 0);
	/* SIGTERM: STOPPING=1, then exit 0 */
	assert_int_equal(daemon_signal(&d, SIGTERM), 0);
	assert_true(t_notify_wait(&n, (size_t)at, "STOPPING=1", 5000) > 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	t_notify_close(&n);
}

/* ---- a failed event, reprocessed by the operator ---- */

static int t_insert_order(struct store_tx *tx, void *arg)
{
	struct store_value p[2] = {store_text(arg), store_int(store_tx_now(tx))};

	return store_exec(tx,
	                  "INSERT INTO orders (id, amount, currency, created_at, updated_at)"
	                  " VALUES (?, 1999, 'USD', ?2, ?2)",
	                  p, 2, NULL);
}

static void
test_a_failed_event_reprocessed_once_its_order_exists_pays_once_and_replays_the_new_reply(
        void **state)
{
	static const char *const list[] = {"events", "list", "--status", "failed", NULL};
	static const char *const again[] = {"events", "reprocess", "1", NULL};
	static const char *const show[] = {"events", "show", "1", NULL};
	const char *order = "ord_rpcycle0000000000001"; /* ORDERS_ID_LEN */
	struct store_options so;
	struct store *st;
	struct hres r;
	char *replayed;
	char *out = NULL;
	char *body;
	char obj[512];
	struct daemon d;

	(void)state;
	fx_daemon_start(&d, T_INI_A);
	snprintf(
	        obj, sizeof(obj),
	        "{\"id\":\"pi_rp\",\"object\":\"payment_intent\",\"amount\":1999,\"amount_"
	        "received\":1999,"
	        "\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}",
	        order);
	body = hn_stripe_event("evt_reprocess_1", "payment_intent.succeeded", obj);
	assert_non_null(body);
	/* no such order yet: acknowledged, recorded as failed */
	assert_int_equal(hn_post_stripe(&d, "stripe", T_SECRET_A, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(daemon_cli(&d, 1, list, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "evt_reprocess_1"));
	assert_non_null(strstr(out, "unknown_order"));
	free(out);
	out = NULL;
	/* still no order: it ran, and the event is still failed (1, not 65) */
	assert_int_equal(daemon_cli(&d, 1, again, &out), 1);
	free(out);
	out = NULL;

	/* the order appears (created by the shop meanwhile) */
	memset(&so, 0, sizeof(so));
	so.so_path = d.dm_db;
	st = store_create(&so);
	assert_non_null(st);
	assert_int_equal(store_write(st, hn_now_ms(), t_insert_order, (void *)order), 0);
	store_destroy(st);

	assert_int_equal(daemon_cli(&d, 1, again, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "paid"));
	free(out);
	out = NULL;
	assert_int_equal(daemon_cli(&d, 1, again, &out), 65); /* done now: refused */
	free(out);
	out = NULL;
	fx_cli_says(&d, show, 0, "outcome:         done");

	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM orders WHERE status = 'paid'"),
	                 1);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM points_ledger"), 1);
	assert_int_equal(
	        hn_db_int(d.dm_db,
	                  "SELECT count(*) FROM idempotency_records WHERE status = 'done'"),
	        1);
	/* a redelivery replays the new reply and changes nothing */
	assert_int_equal(hn_post_stripe(&d, "stripe", T_SECRET_A, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	replayed = hres_header(&r, "Idempotent-Replayed");
	assert_non_null(replayed);
	free(replayed);
	assert_non_null(strstr(r.hs_body, order));
	hres_finish(&r);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM points_ledger"), 1);
	free(body);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_sigterm_under_load_keeps_every_acknowledged_callback_and_a_restart_answers_the_rest),
	        cmocka_unit_test(test_sighup_rotates_the_secret_while_callbacks_keep_arriving),
	        cmocka_unit_test(
	                test_a_broken_config_on_sighup_is_refused_and_the_old_one_keeps_serving),
	        cmocka_unit_test(
	                test_a_misspelt_key_refuses_start_and_reload_and_the_old_config_keeps_serving),
	        cmocka_unit_test(test_systemd_hears_ready_watchdog_reloading_and_stopping_in_order),
	        cmocka_unit_test(
	                test_a_failed_event_reprocessed_once_its_order_exists_pays_once_and_replays_the_new_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
