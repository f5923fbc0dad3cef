/* test_pg_limits.c: docs/postgresql.md and docs/operations.md "Connections
 * to PostgreSQL" walked through as an operator would, each against a server
 * of its own: max_connections reached while serving, /metrics and /readyz
 * while the server is down and while it hangs, a duplicate's read meeting a
 * lock, callbacks, duplicates and reads on open connections to a hung
 * server or one that reads nothing more, and sslmode=verify-full. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "pg_common.h"

static const char limits_ini[] = FX_STRIPE_INI "\n[api]\nrate = 1000\nburst = 1000\n";

/* A receiver on database db with conninfo and more [store] lines
 * (store_lines, "" for none). */
static void limits_daemon_init_st(struct daemon *d, const char *db, const char *conninfo,
                                  const char *store_lines, const char *extra_ini)
{
	assert_int_equal(daemon_init_pg_at(d, db, conninfo, store_lines, extra_ini), 0);
}

/* A receiver d on a server pg of the test's own (to be stopped), with
 * statement_timeout = 2s, connects bounded at 2 s and more [store] lines
 * (store_lines): started. */
static void limits_hang_start(struct pgserver *pg, struct daemon *d, const char *store_lines)
{
	char conninfo[700];
	char lines[256];
	char db[64];

	assert_int_equal(pgserver_start_opts(pg, NULL, 0), 0);
	assert_int_equal(pgserver_create_db(pg, "limits", db), 0);
	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
	strncat(conninfo, " connect_timeout=2", sizeof(conninfo) - strlen(conninfo) - 1);
	snprintf(lines, sizeof(lines), "statement_timeout = 2s\n%s", store_lines);
	limits_daemon_init_st(d, db, conninfo, lines, limits_ini);
	assert_int_equal(daemon_start(d), 0);
}

static void limits_daemon_init_ci(struct daemon *d, const char *db, const char *conninfo,
                                  const char *extra_ini)
{
	limits_daemon_init_st(d, db, conninfo, "", extra_ini);
}

/* A receiver on database db of server pg (not the shared one), over its
 * unix socket. */
static void limits_daemon_init(struct daemon *d, struct pgserver *pg, const char *db,
                               const char *extra_ini)
{
	char conninfo[700];

	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
	limits_daemon_init_ci(d, db, conninfo, extra_ini);
}

/* GET path on the admin listener: the status, the body into *ret_body
 * (malloc'd, may be NULL), the time it took into *ret_ms. */
static long limits_admin_get(const struct daemon *d, const char *path, char **ret_body,
                             int64_t *ret_ms)
{
	char url[160];
	struct hres r;
	int64_t t0 = hn_now_ms();
	long status;

	snprintf(url, sizeof(url), "%s%s", d->dm_admin_base, path);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	*ret_ms = hn_now_ms() - t0;
	status = r.hs_status;
	if (ret_body != NULL) {
		*ret_body = r.hs_body;
		r.hs_body = NULL;
	}
	hres_finish(&r);
	return status;
}

static int64_t limits_psql_int(struct pgserver *pg, const char *db, const char *sql)
{
	char *out = NULL;
	int64_t v;

	assert_int_equal(pgserver_psql(pg, db, sql, &out), 0);
	assert_non_null(out);
	v = strtoll(out, NULL, 10);
	free(out);
	return v;
}

/* The server stops while a receiver runs: /metrics and /readyz answer at
 * once, every scrape, and /metrics says the store cannot be read rather
 * than leaving its gauges out without a word. */
static void test_metrics_and_readyz_answer_promptly_while_the_server_is_down(void **state)
{
	struct pgserver pg;
	struct daemon d;
	char db[64];
	char order_id[64];
	char *body = NULL;
	int64_t ms;
	int i;

	assert_int_equal(pgserver_start_opts(&pg, NULL, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "limits", db), 0);
	limits_daemon_init(&d, &pg, db, limits_ini);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1500, "eur", order_id);
	assert_int_equal(fx_stripe_pay(&d, "evt_limits_outage", order_id, 1500, "eur"), 200);
	assert_int_equal(limits_admin_get(&d, "/metrics", &body, &ms), 200);
	print_message("metrics while up: %" PRId64 " ms\n", ms);
	assert_non_null(strstr(body, "\nidemhook_processing_stuck 0\n"));
	assert_non_null(strstr(body, "\nidemhook_store_readable 1\n"));
	free(body);

	pgserver_stop(&pg);
	assert_int_equal(daemon_log_wait(&d, "not ready", 5000), 0);
	for (i = 0; i < 10; i++) {
		long status;

		status = limits_admin_get(&d, "/metrics", &body, &ms);
		print_message("metrics during the outage: %ld in %" PRId64 " ms\n", status, ms);
		assert_int_equal(status, 200);
		assert_true(ms < 1000);
		assert_non_null(body);
		/* no stale or made-up figures, and a gauge that says why */
		assert_null(strstr(body, "\nidemhook_processing_stuck "));
		assert_non_null(strstr(body, "\nidemhook_store_readable 0\n"));
		assert_non_null(strstr(body, "\nidemhook_ready 0\n"));
		free(body);
		body = NULL;
		status = limits_admin_get(&d, "/readyz", &body, &ms);
		print_message("readyz during the outage: %ld in %" PRId64 " ms: %s\n", status, ms,
		              body != NULL ? body : "");
		assert_int_equal(status, 503);
		assert_true(ms < 1000);
		free(body);
		body = NULL;
	}
	daemon_finish(&d);
}

/* GET path on the admin listener until it answers want (each 250 ms, for
 * at most max_ms): the time it took, or -1 when it never did. */
static int64_t limits_admin_wait(const struct daemon *d, const char *path, long want,
                                 int64_t max_ms)
{
	int64_t t0 = hn_now_ms();
	int64_t ms;

	while (hn_now_ms() - t0 < max_ms) {
		if (limits_admin_get(d, path, NULL, &ms) == want) {
			return hn_now_ms() - t0;
		}
		usleep(250 * 1000);
	}
	return -1;
}

/* Runs `idemhook stats` on d in a child, waiting at most max_ms for it:
 * its exit status, or -1 when it had not ended by then (it is left to end
 * once the server answers again). */
static int limits_stats_within(struct daemon *d, int64_t max_ms, int64_t *ret_ms)
{
	static const char *const stats[] = {"stats", NULL};
	int64_t t0 = hn_now_ms();
	pid_t pid;
	int status;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		_exit(daemon_cli(d, 1, stats, NULL) & 0xff);
	}
	while (hn_now_ms() - t0 < max_ms) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			*ret_ms = hn_now_ms() - t0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		usleep(100 * 1000);
	}
	*ret_ms = hn_now_ms() - t0;
	return -1;
}

/* The server hangs (its processes stopped, as behind a network black hole:
 * connections stay open, nothing answers): /readyz turns not ready within
 * a few seconds, /metrics answers within two seconds every scrape, without
 * the database's gauges and with idemhook_store_readable 0, a command
 * gives up connecting after connect_timeout's default (5 s), and all is
 * well again by itself once the server answers. */
static void test_a_hung_server_makes_readyz_not_ready_and_metrics_stay_prompt(void **state)
{
	struct pgserver pg;
	struct daemon d;
	char db[64];
	char order_id[64];
	char *body = NULL;
	int64_t ms;
	int rc;
	int i;

	assert_int_equal(pgserver_start_opts(&pg, NULL, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "limits", db), 0);
	limits_daemon_init(&d, &pg, db, limits_ini);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1500, "eur", order_id);
	assert_int_equal(limits_admin_get(&d, "/metrics", &body, &ms), 200);
	assert_non_null(strstr(body, "\nidemhook_store_readable 1\n"));
	free(body);
	body = NULL;

	assert_true(pgserver_signal_all(&pg, SIGSTOP) > 1);
	ms = limits_admin_wait(&d, "/readyz", 503, 10000);
	print_message("readyz not ready %" PRId64 " ms after the server hung\n", ms);
	assert_true(ms >= 0 && ms < 5000);
	assert_int_equal(limits_admin_get(&d, "/readyz", &body, &ms), 503);
	print_message("readyz: %s\n", body);
	assert_non_null(strstr(body, "postgresql"));
	free(body);
	body = NULL;
	for (i = 0; i < 4; i++) {
		assert_int_equal(limits_admin_get(&d, "/metrics", &body, &ms), 200);
		print_message("metrics while the server hangs: %" PRId64 " ms\n", ms);
		assert_true(ms < 2000);
		assert_null(strstr(body, "\nidemhook_processing_stuck "));
		assert_non_null(strstr(body, "\nidemhook_store_readable 0\n"));
		assert_non_null(strstr(body, "\nidemhook_ready 0\n"));
		free(body);
		body = NULL;
	}
	rc = limits_stats_within(&d, 15000, &ms);
	print_message("stats while the server hangs: exit %d after %" PRId64 " ms\n", rc, ms);
	assert_int_equal(rc, 69);
	assert_true(ms >= 4000);

	assert_true(pgserver_signal_all(&pg, SIGCONT) > 1);
	ms = limits_admin_wait(&d, "/readyz", 200, 15000);
	print_message("readyz ready %" PRId64 " ms after the server answered again\n", ms);
	assert_true(ms >= 0);
	/* The scrape whose read outlived its wait may still be finishing. */
	for (i = 0; i < 20; i++) {
		assert_int_equal(limits_admin_get(&d, "/metrics", &body, &ms), 200);
		if (strstr(body, "\nidemhook_store_readable 1\n") != NULL) {
			break;
		}
		free(body);
		body = NULL;
		usleep(250 * 1000);
	}
	assert_non_null(body);
	assert_non_null(strstr(body, "\nidemhook_store_readable 1\n"));
	assert_non_null(strstr(body, "\nidemhook_processing_stuck 0\n"));
	free(body);
	assert_int_equal(fx_stripe_pay(&d, "evt_limits_hang", order_id, 1500, "eur"), 200);
	daemon_finish(&d);
	pgserver_stop(&pg);
}

/* Requests sent at once from a thread of their own, so that the test can
 * wake a hung server even when they are not answered. */
#define LIMITS_HANG_REQS 3

struct limits_sender {
	struct hreq ls_reqs[LIMITS_HANG_REQS];
	struct hres ls_res[LIMITS_HANG_REQS];
	size_t ls_n;
	int ls_done; /* atomic */
};

static void *limits_sender_main(void *arg)
{
	struct limits_sender *snd = arg;

	hn_http_storm_each(snd->ls_n, snd->ls_reqs, snd->ls_res);
	__atomic_store_n(&snd->ls_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A request meets at most a connect (connect_timeout=2 in the conninfo:
 * a lookup whose read connection must be made again) and a statement on
 * an open connection (statement_timeout 2 s and the client's margin of 2 s
 * over it), with room for a loaded machine. */
#define LIMITS_HANG_BOUND_MS 7500
#define LIMITS_HANG_WAIT_MS 20000 /* then the server is woken up, and the test fails */

/* Starts sending snd's requests (to a receiver of a hung server) from a
 * thread of its own. */
static void limits_send_start(struct limits_sender *snd, pthread_t *ret_th)
{
	snd->ls_done = 0;
	assert_int_equal(pthread_create(ret_th, NULL, limits_sender_main, snd), 0);
}

/* Waits for snd's requests, started t0, and checks that each was answered
 * 503 with Retry-After within LIMITS_HANG_BOUND_MS. The server pg is woken
 * up (SIGCONT; the relay px, when not NULL, takes everything again) first
 * when they are not all answered within LIMITS_HANG_WAIT_MS, which fails
 * the test. */
static void limits_send_finish_px(struct limits_sender *snd, pthread_t th, int64_t t0,
                                  struct pgserver *pg, struct pgserver_proxy *px)
{
	size_t i;
	int done;

	while (!__atomic_load_n(&snd->ls_done, __ATOMIC_ACQUIRE) &&
	       hn_now_ms() - t0 < LIMITS_HANG_WAIT_MS) {
		usleep(50 * 1000);
	}
	done = __atomic_load_n(&snd->ls_done, __ATOMIC_ACQUIRE);
	print_message("answered %s after %" PRId64 " ms of a hung server\n",
	              done ? "all" : "not all", hn_now_ms() - t0);
	if (!done) {
		pgserver_signal_all(pg, SIGCONT);
		if (px != NULL) {
			pgserver_proxy_budget(px, -1);
		}
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	for (i = 0; i < snd->ls_n; i++) {
		struct hres *r = &snd->ls_res[i];
		char *retry = hres_header(r, "Retry-After");

		print_message("%s %s: %ld after %.0f ms, Retry-After %s: %.200s\n",
		              snd->ls_reqs[i].rq_method, snd->ls_reqs[i].rq_url, r->hs_status,
		              r->hs_seconds * 1000, retry != NULL ? retry : "none",
		              r->hs_body != NULL ? r->hs_body : "");
		assert_int_equal(r->hs_status, 503);
		assert_non_null(retry);
		assert_true(r->hs_seconds * 1000 < LIMITS_HANG_BOUND_MS);
		free(retry);
		hres_finish(r);
	}
}

static void limits_send_finish(struct limits_sender *snd, pthread_t th, int64_t t0,
                               struct pgserver *pg)
{
	limits_send_finish_px(snd, th, t0, pg, NULL);
}

static void limits_send_hung(struct limits_sender *snd, struct pgserver *pg)
{
	int64_t t0 = hn_now_ms();
	pthread_t th;

	limits_send_start(snd, &th);
	limits_send_finish(snd, th, t0, pg);
}

/* How many lines of d's log hold text. */
static int limits_log_count(const struct daemon *d, const char *text)
{
	char *log_text = hn_read_file(d->dm_log);
	const char *p = log_text;
	int n = 0;

	assert_non_null(log_text);
	while ((p = strstr(p, text)) != NULL) {
		n++;
		p += strlen(text);
	}
	free(log_text);
	return n;
}

#define LIMITS_HUNG_LINE "postgresql did not answer within 4000 ms"

/* The server hangs under connections the receiver has open (its
 * processes stopped, as behind a network black hole): a new callback, a
 * duplicate and an order read at once, each on a read connection, are
 * answered 503 with Retry-After within statement_timeout and the client's
 * margin; so is the new callback sent again, now on the writer's
 * connection (the read connections are given up). Nothing is
 * acknowledged; once the server answers again the provider's retry is
 * applied, once, and the duplicate replayed. */
static void test_a_hung_server_gets_callbacks_answered_503_within_the_statement_bound(void **state)
{
	struct limits_sender snd;
	struct pg_callback fresh_cb;
	struct pg_callback dup_cb;
	struct pgserver pg;
	struct daemon d;
	struct hres r;
	char paid[64];
	char fresh[64];
	char url[256];
	char *dup_body;
	char *fresh_body;
	int64_t ms;
	int hung;
	size_t i;

	(void)state;
	limits_hang_start(&pg, &d, "");
	fx_order(&d, 1500, "eur", paid);
	fx_order(&d, 1600, "eur", fresh);
	dup_body = fx_stripe_payment("evt_limits_hang_dup", paid, 1500, "eur");
	fresh_body = fx_stripe_payment("evt_limits_hang_new", fresh, 1600, "eur");
	assert_int_equal(fx_stripe_send(&d, dup_body, NULL), 200);
	/* duplicates at once, and a read: read connections are open */
	pg_callback_init(&dup_cb, &d, dup_body);
	{
		struct hres storm[LIMITS_HANG_REQS];

		assert_int_equal(hn_http_storm(LIMITS_HANG_REQS, "POST", dup_cb.pc_url,
		                               dup_cb.pc_headers, dup_body, strlen(dup_body),
		                               storm),
		                 0);
		for (i = 0; i < LIMITS_HANG_REQS; i++) {
			assert_int_equal(storm[i].hs_status, 200);
			hres_finish(&storm[i]);
		}
	}
	snprintf(url, sizeof(url), "%s/api/orders/%s", d.dm_base, fresh);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);

	pg_callback_init(&fresh_cb, &d, fresh_body);
	memset(&snd, 0, sizeof(snd));
	snd.ls_reqs[0] = pg_callback_req(&fresh_cb);
	snd.ls_reqs[1] = pg_callback_req(&dup_cb);
	snd.ls_reqs[2].rq_method = "GET";
	snd.ls_reqs[2].rq_url = url;
	snd.ls_n = 3;
	assert_true(pgserver_signal_all(&pg, SIGSTOP) > 1);
	limits_send_hung(&snd, &pg);
	hung = limits_log_count(&d, LIMITS_HUNG_LINE);
	print_message("connections given up: %d\n", hung);
	assert_true(hung > 0);
	/* the provider's retry while the server still hangs: on the writer's
	 * connection, unless a lookup that found no read connection took the
	 * writer's already (its connects then back off: a 503 at once) */
	snd.ls_n = 1;
	limits_send_hung(&snd, &pg);
	assert_int_equal(
	        daemon_log_wait(&d, LIMITS_HUNG_LINE "; the connection (idemhook writer", 1000), 0);
	assert_true(pgserver_signal_all(&pg, SIGCONT) > 1);

	/* the server answers again: the provider's retries land once */
	ms = limits_admin_wait(&d, "/readyz", 200, 15000);
	print_message("ready %" PRId64 " ms after the server answered again\n", ms);
	assert_true(ms >= 0);
	for (i = 0; i < 100 && fx_stripe_send(&d, fresh_body, NULL) != 200; i++) {
		usleep(100 * 1000);
	}
	assert_true(i < 100);
	assert_int_equal(fx_stripe_send(&d, fresh_body, &r), 200);
	{
		char *replayed = hres_header(&r, "Idempotent-Replayed");

		assert_non_null(replayed);
		free(replayed);
	}
	hres_finish(&r);
	assert_int_equal(fx_stripe_send(&d, dup_body, NULL), 200);
	assert_int_equal(limits_psql_int(&pg, d.dm_pg_db, "SELECT count(*) FROM events"), 2);
	assert_int_equal(limits_psql_int(&pg, d.dm_pg_db,
	                                 "SELECT count(*) FROM orders WHERE status = 'paid'"),
	                 2);
	free(dup_body);
	free(fresh_body);
	daemon_finish(&d);
	pgserver_stop(&pg);
}

/* A callback that goes to the writer while the server hangs (the one read
 * connection, pool_size = 1, is held by an order read meanwhile): answered
 * 503 with Retry-After within the bound, and applied once the server
 * answers again. */
static void
test_a_callback_on_the_writers_connection_to_a_hung_server_gets_503_in_time(void **state)
{
	struct limits_sender get_snd;
	struct limits_sender cb_snd;
	struct pg_callback cb;
	struct pgserver pg;
	struct daemon d;
	struct hres r;
	pthread_t get_th;
	pthread_t cb_th;
	char order_id[64];
	char url[256];
	char *body;
	int64_t t0;
	int i;

	(void)state;
	limits_hang_start(&pg, &d, "pool_size = 1\n");
	fx_order(&d, 1700, "eur", order_id);
	body = fx_stripe_payment("evt_limits_hang_writer", order_id, 1700, "eur");
	snprintf(url, sizeof(url), "%s/api/orders/%s", d.dm_base, order_id);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);

	memset(&get_snd, 0, sizeof(get_snd));
	get_snd.ls_reqs[0].rq_method = "GET";
	get_snd.ls_reqs[0].rq_url = url;
	get_snd.ls_n = 1;
	pg_callback_init(&cb, &d, body);
	memset(&cb_snd, 0, sizeof(cb_snd));
	cb_snd.ls_reqs[0] = pg_callback_req(&cb);
	cb_snd.ls_n = 1;
	assert_true(pgserver_signal_all(&pg, SIGSTOP) > 1);
	t0 = hn_now_ms();
	limits_send_start(&get_snd, &get_th);
	usleep(500 * 1000); /* the read holds the one read connection */
	limits_send_start(&cb_snd, &cb_th);
	limits_send_finish(&get_snd, get_th, t0, &pg);
	limits_send_finish(&cb_snd, cb_th, t0, &pg);
	/* pg_writers: "idemhook writer", "idemhook writer 2", ... */
	assert_int_equal(
	        daemon_log_wait(&d, LIMITS_HUNG_LINE "; the connection (idemhook writer", 1000), 0);
	assert_true(pgserver_signal_all(&pg, SIGCONT) > 1);

	assert_true(limits_admin_wait(&d, "/readyz", 200, 15000) >= 0);
	for (i = 0; i < 100 && fx_stripe_send(&d, body, NULL) != 200; i++) {
		usleep(100 * 1000);
	}
	assert_true(i < 100);
	assert_int_equal(limits_psql_int(&pg, d.dm_pg_db,
	                                 "SELECT count(*) FROM orders WHERE status = 'paid'"),
	                 1);
	assert_int_equal(limits_psql_int(&pg, d.dm_pg_db, "SELECT count(*) FROM events"), 1);
	free(body);
	daemon_finish(&d);
	pgserver_stop(&pg);
}

/* One bound for all of a callback's waits on a hung server:
 * statement_timeout (2 s) and the margin (2 s), and room for a loaded
 * machine, but less than the connect's 2 s more. */
#define LIMITS_ONE_BOUND_MS 5000

/* r, a callback's answer (finished here), is a 503 with Retry-After that
 * came within LIMITS_ONE_BOUND_MS; what says which in the output. */
static void limits_assert_503_in_one_bound(struct hres *r, const char *what)
{
	char *retry = hres_header(r, "Retry-After");

	print_message("%s: %ld after %.0f ms, Retry-After %s\n", what, r->hs_status,
	              r->hs_seconds * 1000, retry != NULL ? retry : "none");
	assert_int_equal(r->hs_status, 503);
	assert_non_null(retry);
	assert_true(r->hs_seconds * 1000 < LIMITS_ONE_BOUND_MS);
	free(retry);
	hres_finish(r);
}

/* The worst a new callback can meet on a hung server: no read connection
 * open (the server closed them), so its lookup must make one, which the
 * hung server lets run out connect_timeout (2 s); then the writer's open
 * connection meets the same silence. The callback has one deadline for all its waits: the
 * silence the connect found counts on the writer's wait too, so the
 * callback is answered 503 with Retry-After within statement_timeout and
 * the margin of its arrival (4 s), not 2 s later; and it is applied once
 * when the server answers again. */
static void test_a_callback_that_must_connect_first_gets_503_within_one_bound(void **state)
{
	struct limits_sender snd;
	struct pg_callback cb;
	struct pgserver pg;
	struct daemon d;
	struct hres *r = &snd.ls_res[0];
	pthread_t th;
	char *body;
	int64_t t0;
	int i;

	(void)state;
	limits_hang_start(&pg, &d, "");
	/* the read connections open go (as in a restart of the server, which
	 * the receiver learns of only when it uses them) */
	assert_true(limits_psql_int(&pg, d.dm_pg_db,
	                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
	                            "WHERE application_name = 'idemhook reader'") > 0);
	for (i = 0; i < 100 && limits_psql_int(&pg, d.dm_pg_db,
	                                       "SELECT count(*) FROM pg_stat_activity WHERE "
	                                       "application_name = 'idemhook reader'") > 0;
	     i++) {
		usleep(20 * 1000);
	}
	body = fx_stripe_payment("evt_limits_connect_first", "ord_limits_missing", 1700, "eur");
	pg_callback_init(&cb, &d, body);
	memset(&snd, 0, sizeof(snd));
	snd.ls_reqs[0] = pg_callback_req(&cb);
	snd.ls_n = 1;
	assert_true(pgserver_signal_all(&pg, SIGSTOP) > 1);
	t0 = hn_now_ms();
	limits_send_start(&snd, &th);
	while (!__atomic_load_n(&snd.ls_done, __ATOMIC_ACQUIRE) && hn_now_ms() - t0 < 20000) {
		usleep(50 * 1000);
	}
	if (!__atomic_load_n(&snd.ls_done, __ATOMIC_ACQUIRE)) {
		pgserver_signal_all(&pg, SIGCONT);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	limits_assert_503_in_one_bound(r, "a callback that had to connect first");
	/* it did connect first, and the writer met the silence */
	assert_int_equal(daemon_log_wait(&d, "store: cannot reconnect to postgresql", 1000), 0);
	assert_int_equal(daemon_log_wait(&d, "a connect found it silent", 1000), 0);
	assert_int_equal(daemon_log_wait(&d, "; the connection (idemhook writer", 1000), 0);
	assert_true(pgserver_signal_all(&pg, SIGCONT) > 1);

	assert_true(limits_admin_wait(&d, "/readyz", 200, 15000) >= 0);
	for (i = 0; i < 100 && fx_stripe_send(&d, body, NULL) == 503; i++) {
		usleep(100 * 1000);
	}
	assert_true(i < 100);
	assert_int_equal(limits_psql_int(&pg, d.dm_pg_db,
	                                 "SELECT count(*) FROM events WHERE idem_key = "
	                                 "'evt_limits_connect_first'"),
	                 1);
	free(body);
	daemon_finish(&d);
	pgserver_stop(&pg);
}

/* How long the relay holds a new connection's answer: most of
 * connect_timeout (2 s), so the connect succeeds at its last moment. */
#define LIMITS_LATE_CONNECT_MS 1900

/* The worst a connect can cost a callback: the server answers it at the
 * last moment of connect_timeout and then reads nothing (a relay holds the
 * answer of every new connection 1.9 s, then takes nothing more of it
 * after its startup packet); every session the receiver had was closed, so
 * the callback's lookup must connect first. The connect's answer is no
 * sign that the server still reads: the callback's one deadline counts
 * from when its connect began, and it is answered 503 with Retry-After
 * within statement_timeout and the margin of its arrival (4 s), not the
 * connect's 1.9 s more; and it is applied once when the server is reached
 * as before. */
static void test_a_connect_answered_late_then_a_hang_gets_503_within_one_bound(void **state)
{
	static const char *const settings[] = {"listen_addresses=127.0.0.1", NULL};
	struct limits_sender snd;
	struct pgserver_proxy px;
	struct pg_callback cb;
	struct pgserver pg;
	struct daemon d;
	struct hres *r = &snd.ls_res[0];
	pthread_t th;
	char db[64];
	char sql[256];
	char order_id[64];
	char conninfo[700];
	char *body;
	char *cut = NULL;
	int64_t t0;
	int i;

	(void)state;
	assert_int_equal(pgserver_start_opts(&pg, settings, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "limits", db), 0);
	assert_int_equal(pgserver_proxy_start(&px, &pg), 0);
	snprintf(conninfo, sizeof(conninfo),
	         "host=127.0.0.1 port=%u user=postgres dbname=%s connect_timeout=2 sslmode=disable "
	         "gssencmode=disable",
	         px.px_port, db);
	limits_daemon_init_st(&d, db, conninfo, "statement_timeout = 2s\n", limits_ini);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1900, "eur", order_id);
	body = fx_stripe_payment("evt_limits_late_connect", order_id, 1900, "eur");
	pg_callback_init(&cb, &d, body);
	memset(&snd, 0, sizeof(snd));
	snd.ls_reqs[0] = pg_callback_req(&cb);
	snd.ls_n = 1;

	/* from now the server answers connects late and then reads nothing;
	 * the receiver's sessions go (over the unix socket, not the relay) */
	pgserver_proxy_late(&px, LIMITS_LATE_CONNECT_MS, 1);
	assert_int_equal(pgserver_psql(&pg, NULL, "SELECT now()", &cut), 0);
	assert_non_null(cut);
	cut[strcspn(cut, "\n")] = '\0';
	snprintf(sql, sizeof(sql),
	         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
	         "'%s' AND backend_start < '%s'",
	         db, cut);
	assert_true(limits_psql_int(&pg, NULL, sql) > 0);
	/* until those sessions are gone (one the receiver makes meanwhile is
	 * held by the relay, and newer) */
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND backend_start < "
	         "'%s'",
	         db, cut);
	free(cut);
	for (i = 0; i < 100 && limits_psql_int(&pg, NULL, sql) > 0; i++) {
		usleep(20 * 1000);
	}
	assert_true(i < 100);
	/* The health probe has found its session closed (the server's
	 * message of it is heard from the server, which would end the
	 * silence during the callback's connect): from now the receiver
	 * hears nothing more. */
	assert_int_equal(daemon_log_wait(&d, "the schema version cannot be read", 5000), 0);
	t0 = hn_now_ms();
	limits_send_start(&snd, &th);
	while (!__atomic_load_n(&snd.ls_done, __ATOMIC_ACQUIRE) && hn_now_ms() - t0 < 20000) {
		usleep(50 * 1000);
	}
	pgserver_proxy_late(&px, 0, 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	limits_assert_503_in_one_bound(r, "a callback whose connect was answered late, then met a "
	                                  "server reading nothing");
	/* it did connect (late: nothing said of a failed connect), and its
	 * wait counted the connect's time */
	assert_int_equal(daemon_log_wait(&d, "store: reconnected to postgresql", 1000), 0);
	assert_int_equal(daemon_log_wait(&d, "a connect found it silent", 1000), 0);
	assert_int_equal(limits_log_count(&d, "cannot reconnect to postgresql"), 0);

	assert_true(limits_admin_wait(&d, "/readyz", 200, 15000) >= 0);
	for (i = 0; i < 100 && fx_stripe_send(&d, body, NULL) == 503; i++) {
		usleep(100 * 1000);
	}
	assert_true(i < 100);
	assert_int_equal(limits_psql_int(&pg, db,
	                                 "SELECT count(*) FROM events WHERE idem_key = "
	                                 "'evt_limits_late_connect'"),
	                 1);
	free(body);
	daemon_finish(&d);
	pgserver_proxy_stop(&px);
	pgserver_stop(&pg);
}

#define LIMITS_HUGE_NOTE ((size_t)6 * 1024 * 1024) /* more than TCP's buffers take */

/* A server that reads nothing more (a relay between it and the receiver
 * stops taking what the receiver sends, as a black hole does) while the
 * writer sends a callback of 6 MB, more than the sockets' buffers hold:
 * the writer is not left blocked in the send, and the callback is answered
 * 503 with Retry-After within the bound; once the relay passes everything
 * again, the provider's retry is applied once. */
static void
test_a_callback_bigger_than_the_socket_buffers_to_a_deaf_server_gets_503_in_time(void **state)
{
	static const char *const settings[] = {"listen_addresses=127.0.0.1", NULL};
	struct limits_sender snd;
	struct pgserver_proxy px;
	struct pg_callback cb;
	struct pgserver pg;
	struct daemon d;
	pthread_t th;
	char db[64];
	char order_id[64];
	char conninfo[700];
	char *obj;
	char *body;
	int64_t t0;
	size_t i;

	(void)state;
	assert_int_equal(pgserver_start_opts(&pg, settings, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "limits", db), 0);
	assert_int_equal(pgserver_proxy_start(&px, &pg), 0);
	snprintf(conninfo, sizeof(conninfo),
	         "host=127.0.0.1 port=%u user=postgres dbname=%s connect_timeout=2 sslmode=disable",
	         px.px_port, db);
	limits_daemon_init_st(&d, db, conninfo, "statement_timeout = 2s\n",
	                      FX_STRIPE_INI "\n[api]\nrate = 1000\nburst = 1000\n"
	                                    "\n[server]\nbody_max = 8M\n");
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1800, "eur", order_id);
	obj = malloc(LIMITS_HUGE_NOTE + 512);
	assert_non_null(obj);
	i = (size_t)snprintf(obj, 512,
	                     "{\"id\":\"pi_%s\",\"object\":\"payment_intent\",\"amount\":1800,"
	                     "\"amount_received\":1800,\"currency\":\"eur\",\"status\":"
	                     "\"succeeded\",\"metadata\":{\"order_id\":\"%s\",\"note\":\"",
	                     order_id, order_id);
	memset(obj + i, 'x', LIMITS_HUGE_NOTE);
	snprintf(obj + i + LIMITS_HUGE_NOTE, 16, "\"}}");
	body = hn_stripe_event("evt_limits_deaf_big", "payment_intent.succeeded", obj);
	free(obj);
	assert_non_null(body);

	pg_callback_init(&cb, &d, body);
	memset(&snd, 0, sizeof(snd));
	snd.ls_reqs[0] = pg_callback_req(&cb);
	snd.ls_n = 1;
	pgserver_proxy_budget(&px, 256 * 1024);
	t0 = hn_now_ms();
	limits_send_start(&snd, &th);
	limits_send_finish_px(&snd, th, t0, &pg, &px);
	assert_int_equal(
	        daemon_log_wait(&d, LIMITS_HUNG_LINE "; the connection (idemhook writer", 1000), 0);
	pgserver_proxy_budget(&px, -1);

	for (i = 0; i < 100 && fx_stripe_send(&d, body, NULL) != 200; i++) {
		usleep(100 * 1000);
	}
	assert_true(i < 100);
	assert_int_equal(
	        limits_psql_int(&pg, db, "SELECT count(*) FROM orders WHERE status = 'paid'"), 1);
	assert_int_equal(limits_psql_int(&pg, db, "SELECT count(*) FROM events"), 1);
	free(body);
	daemon_finish(&d);
	pgserver_proxy_stop(&px);
	pgserver_stop(&pg);
}

/* serve with conninfo on db, expected to refuse to start: its exit status,
 * its stderr into *ret_err (malloc'd). */
static int limits_serve_refused(const char *db, const char *conninfo, char **ret_err)
{
	const char *const args[] = {"serve", NULL};
	struct daemon d;
	int rc;

	limits_daemon_init_ci(&d, db, conninfo, limits_ini);
	rc = daemon_cli_err(&d, 1, args, NULL, ret_err);
	daemon_finish(&d);
	return rc;
}

/* sslmode=verify-full as docs/postgresql.md shows it: with the server's
 * CA and its name the receiver serves over TLS; a wrong host name or a
 * wrong CA is refused at start, exit 69, with libpq's reason and without
 * the password. */
static void test_verify_full_serves_and_refuses_a_wrong_name_or_ca(void **state)
{
	struct pgserver pg;
	struct daemon d;
	char db[64];
	char ca[600];
	char other_ca[700];
	char conninfo[1400];
	char cmd[1600];
	char order_id[64];
	char *err = NULL;
	int rc;

	assert_int_equal(pgserver_start_opts(&pg, NULL, 1), 0);
	assert_int_equal(pgserver_create_db(&pg, "limits", db), 0);
	pgserver_ca_path(&pg, ca, sizeof(ca));

	snprintf(conninfo, sizeof(conninfo),
	         "host=localhost port=%u dbname=%s user=postgres password=s3cret-pw "
	         "sslmode=verify-full sslrootcert=%s",
	         pg.pg_port, db, ca);
	limits_daemon_init_ci(&d, db, conninfo, limits_ini);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1700, "eur", order_id);
	assert_int_equal(fx_stripe_pay(&d, "evt_limits_tls", order_id, 1700, "eur"), 200);
	/* every connection of the receiver is encrypted */
	snprintf(cmd, sizeof(cmd),
	         "SELECT count(*) FILTER (WHERE s.ssl) || ' ' || count(*) FROM pg_stat_activity a "
	         "JOIN pg_stat_ssl s USING (pid) WHERE a.datname = '%s' AND a.application_name "
	         "LIKE 'idemhook%%'",
	         db);
	{
		char *out = NULL;
		int with_ssl = 0;
		int all = -1;

		assert_int_equal(pgserver_psql(&pg, db, cmd, &out), 0);
		assert_non_null(out);
		assert_int_equal(sscanf(out, "%d %d", &with_ssl, &all), 2);
		print_message("connections with TLS: %d of %d\n", with_ssl, all);
		assert_true(all > 0);
		assert_int_equal(with_ssl, all);
		free(out);
	}
	daemon_finish(&d);

	/* the right server under a name its certificate does not have */
	snprintf(conninfo, sizeof(conninfo),
	         "host=db.wrong.example hostaddr=127.0.0.1 port=%u dbname=%s user=postgres "
	         "password=s3cret-pw sslmode=verify-full sslrootcert=%s",
	         pg.pg_port, db, ca);
	rc = limits_serve_refused(db, conninfo, &err);
	print_message("wrong name: exit %d: %s", rc, err != NULL ? err : "");
	assert_int_equal(rc, 69);
	assert_non_null(err);
	assert_non_null(strstr(err, "store: cannot connect to postgresql: "));
	assert_non_null(strstr(err, "does not match host name \"db.wrong.example\""));
	assert_null(strstr(err, "s3cret-pw"));
	free(err);
	err = NULL;

	/* a CA that did not sign the server's certificate */
	snprintf(other_ca, sizeof(other_ca), "%s/other-ca.pem", pg.pg_dir);
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s.key' -out '%s' -days 1 "
	         "-subj /CN=other-ca >/dev/null 2>&1",
	         other_ca, other_ca);
	assert_int_equal(system(cmd), 0);
	snprintf(conninfo, sizeof(conninfo),
	         "host=localhost port=%u dbname=%s user=postgres password=s3cret-pw "
	         "sslmode=verify-full sslrootcert=%s",
	         pg.pg_port, db, other_ca);
	rc = limits_serve_refused(db, conninfo, &err);
	print_message("wrong CA: exit %d: %s", rc, err != NULL ? err : "");
	assert_int_equal(rc, 69);
	assert_non_null(err);
	assert_non_null(strstr(err, "store: cannot connect to postgresql: "));
	assert_non_null(strstr(err, "certificate verify failed"));
	assert_null(strstr(err, "s3cret-pw"));
	free(err);
	pgserver_stop(&pg);
}

#define LIMITS_MAX_CONNECTIONS 14
#define LIMITS_HOLDERS_MAX 20
#define LIMITS_STORM 16

/* A client of the server holding one of its connections: psql sleeping. */
static pid_t limits_holder(const struct pgserver *pg, const char *db)
{
	char psql[300];
	char conninfo[700];
	pid_t pid;

	snprintf(psql, sizeof(psql), "%s/psql", pg->pg_bindir);
	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(psql, "psql", "-X", "-q", "-d", conninfo, "-c", "SELECT pg_sleep(600)",
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The receiver's sessions on the server, as "name count" lines. */
static void limits_print_sessions(struct pgserver *pg, const char *db)
{
	char sql[300];
	char *out = NULL;

	snprintf(sql, sizeof(sql),
	         "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = '%s' "
	         "AND application_name LIKE 'idemhook%%' GROUP BY 1 ORDER BY 1",
	         db);
	if (pgserver_psql(pg, db, sql, &out) == 0 && out != NULL) {
		print_message("sessions:\n%s", out);
	}
	free(out);
}

/* max_connections reached while the receiver serves, before its read pool
 * opened: duplicates get their stored replies and new callbacks are
 * applied (on the writer's connection), reads that need a connection of
 * their own are answered 503 with Retry-After, and the log names the
 * reason. */
static void test_max_connections_reached_while_serving(void **state)
{
	static const char *const settings[] = {"max_connections=14",
	                                       "superuser_reserved_connections=0",
	                                       "client_connection_check_interval=100ms", NULL};
	struct pgserver pg;
	struct daemon d;
	pid_t holders[LIMITS_HOLDERS_MAX];
	size_t n_holders = 0;
	char db[64];
	char paid[64];
	char fresh[64];
	char sql[300];
	char url[256];
	char *body;
	struct hres r;
	struct hres storm[LIMITS_STORM];
	struct pg_callback dup;
	int refused = 0;
	int64_t used;
	size_t i;

	assert_int_equal(pgserver_start_opts(&pg, settings, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "limits", db), 0);
	limits_daemon_init(&d, &pg, db, limits_ini);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1100, "eur", paid);
	fx_order(&d, 1200, "eur", fresh);
	body = fx_stripe_payment("evt_limits_full_1", paid, 1100, "eur");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	limits_print_sessions(&pg, db);
	used = limits_psql_int(&pg, db,
	                       "SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
	                       "'client backend'");
	print_message("%" PRId64 " of %d connections in use\n", used, LIMITS_MAX_CONNECTIONS);
	/* other clients take every slot left: until psql itself is refused */
	for (i = 0; n_holders < LIMITS_HOLDERS_MAX; i++) {
		holders[n_holders++] = limits_holder(&pg, db);
		usleep(200 * 1000);
		if (pgserver_psql(&pg, db, "SELECT 1", NULL) < 0) {
			break;
		}
	}
	print_message("%zu other clients hold the rest\n", n_holders);
	i = n_holders < LIMITS_HOLDERS_MAX ? 0 : 200;
	assert_true(i < 200); /* full: psql itself is refused */

	/* duplicates at once, more than the one read connection open: each
	 * its stored reply (a read that gets no connection goes to the writer) */
	pg_callback_init(&dup, &d, body);
	assert_int_equal(hn_http_storm(LIMITS_STORM, "POST", dup.pc_url, dup.pc_headers, body,
	                               strlen(body), storm),
	                 0);
	for (i = 0; i < LIMITS_STORM; i++) {
		char *replayed = hres_header(&storm[i], "Idempotent-Replayed");

		assert_int_equal(storm[i].hs_status, 200);
		assert_non_null(replayed);
		free(replayed);
		hres_finish(&storm[i]);
	}
	free(body);
	/* a new callback: applied */
	assert_int_equal(fx_stripe_pay(&d, "evt_limits_full_2", fresh, 1200, "eur"), 200);
	/* order reads at once need read connections of their own: each is
	 * the order as it is, or 503 with Retry-After, never a wrong answer */
	snprintf(url, sizeof(url), "%s/api/orders/%s", d.dm_base, fresh);
	assert_int_equal(hn_http_storm(LIMITS_STORM, "GET", url, NULL, NULL, 0, storm), 0);
	for (i = 0; i < LIMITS_STORM; i++) {
		if (storm[i].hs_status == 200) {
			assert_non_null(strstr(storm[i].hs_body, "\"status\":\"paid\""));
		} else {
			char *retry = hres_header(&storm[i], "Retry-After");

			print_message("GET order while full: %ld %s\n", storm[i].hs_status,
			              storm[i].hs_body != NULL ? storm[i].hs_body : "");
			assert_int_equal(storm[i].hs_status, 503);
			assert_non_null(retry);
			free(retry);
			refused++;
		}
		hres_finish(&storm[i]);
	}
	print_message("%d of %d order reads answered 503\n", refused, LIMITS_STORM);
	/* the reason, in the log (once: the first failed connection) */
	if (refused > 0) {
		assert_int_equal(daemon_log_wait(&d,
		                                 "<4>store: cannot connect to postgresql: "
		                                 "connection to server on socket",
		                                 2000),
		                 0);
		assert_int_equal(daemon_log_wait(&d, "too many clients already", 2000), 0);
	}

	for (i = 0; i < n_holders; i++) {
		kill(holders[i], SIGTERM);
		waitpid(holders[i], NULL, 0);
	}
	/* the slots free again (each holder's backend notices its client
	 * gone within client_connection_check_interval): the order reads,
	 * paid once */
	for (i = 0; i < 100 && pgserver_psql(&pg, db, "SELECT 1", NULL) < 0; i++) {
		usleep(50 * 1000);
	}
	for (i = 0; i < 100; i++) {
		assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
		if (r.hs_status == 200) {
			break;
		}
		hres_finish(&r);
		usleep(50 * 1000);
	}
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "\"status\":\"paid\""));
	hres_finish(&r);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM orders WHERE status = 'paid'");
	assert_int_equal(limits_psql_int(&pg, db, sql), 2);
	limits_print_sessions(&pg, db);
	daemon_finish(&d);
	pgserver_stop(&pg);
}

/* A duplicate whose lookup meets a lock of the whole table (another
 * session's LOCK TABLE ... IN ACCESS EXCLUSIVE MODE): answered 503 with
 * Retry-After after one statement_timeout, not after two, and its stored
 * reply once the lock is gone. */
static void test_a_duplicates_lookup_meeting_a_table_lock(void **state)
{
	struct daemon d;
	struct pgserver *pg = pgserver_shared(NULL);
	char order_id[64];
	char psql[300];
	char conninfo[700];
	char *body;
	struct hres r;
	int64_t t0;
	int64_t ms;
	char *retry;
	pid_t locker;
	int i;

	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI "\n[api]\nrate = 1000\nburst = 1000\n"),
	                 0);
	{
		/* statement_timeout 2s: [store] is daemon_init_pg's */
		char *cfg = hn_read_file(d.dm_config);
		struct buf b;
		char *at;

		assert_non_null(cfg);
		at = strstr(cfg, "backend = postgresql\n");
		assert_non_null(at);
		buf_init(&b, 0);
		buf_printf(&b, "%.*sstatement_timeout = 2s\n%s", (int)(at - cfg), cfg, at);
		assert_int_equal(daemon_write_file(&d, "idemhook.ini", b.buf_data), 0);
		buf_finish(&b);
		free(cfg);
	}
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1300, "eur", order_id);
	body = fx_stripe_payment("evt_limits_lock", order_id, 1300, "eur");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);

	snprintf(psql, sizeof(psql), "%s/psql", pg->pg_bindir);
	pgserver_conninfo(pg, d.dm_pg_db, conninfo, sizeof(conninfo));
	locker = fork();
	assert_true(locker >= 0);
	if (locker == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd >= 0) {
			dup2(fd, 1);
		}
		execl(psql, "psql", "-X", "-q", "-d", conninfo, "-c",
		      "BEGIN; LOCK TABLE idempotency_records IN ACCESS EXCLUSIVE MODE; SELECT "
		      "pg_sleep(6); COMMIT",
		      (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 100; i++) {
		if (limits_psql_int(
		            pg, d.dm_pg_db,
		            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = "
		            "l.relation WHERE c.relname = 'idempotency_records' AND l.mode = "
		            "'AccessExclusiveLock' AND l.granted") > 0) {
			break;
		}
		usleep(20 * 1000);
	}
	assert_true(i < 100);
	t0 = hn_now_ms();
	assert_int_equal(fx_stripe_send(&d, body, &r), 503);
	ms = hn_now_ms() - t0;
	print_message("duplicate under the lock: %ld after %" PRId64 " ms: %s\n", r.hs_status, ms,
	              r.hs_body != NULL ? r.hs_body : "");
	retry = hres_header(&r, "Retry-After");
	assert_non_null(retry);
	free(retry);
	hres_finish(&r);
	/* one statement_timeout (2 s), not two */
	assert_true(ms >= 1900);
	assert_true(ms < 3500);
	assert_int_equal(daemon_log_wait(&d, "canceling statement due to statement timeout", 2000),
	                 0);
	waitpid(locker, NULL, 0);
	assert_int_equal(fx_stripe_send(&d, body, &r), 200);
	retry = hres_header(&r, "Idempotent-Replayed");
	assert_non_null(retry);
	free(retry);
	hres_finish(&r);
	free(body);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_metrics_and_readyz_answer_promptly_while_the_server_is_down),
	        cmocka_unit_test(test_a_hung_server_makes_readyz_not_ready_and_metrics_stay_prompt),
	        cmocka_unit_test(
	                test_a_hung_server_gets_callbacks_answered_503_within_the_statement_bound),
	        cmocka_unit_test(
	                test_a_callback_on_the_writers_connection_to_a_hung_server_gets_503_in_time),
	        cmocka_unit_test(
	                test_a_callback_bigger_than_the_socket_buffers_to_a_deaf_server_gets_503_in_time),
	        cmocka_unit_test(test_a_callback_that_must_connect_first_gets_503_within_one_bound),
	        cmocka_unit_test(
	                test_a_connect_answered_late_then_a_hang_gets_503_within_one_bound),
	        cmocka_unit_test(test_verify_full_serves_and_refuses_a_wrong_name_or_ca),
	        cmocka_unit_test(test_max_connections_reached_while_serving),
	        cmocka_unit_test(test_a_duplicates_lookup_meeting_a_table_lock),
	};

	cmocka_set_test_filter(getenv("IDEMHOOK_TEST_FILTER"));
	pgserver_require_or_skip("test_pg_limits");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
