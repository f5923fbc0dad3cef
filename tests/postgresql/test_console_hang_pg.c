/* test_console_hang_pg.c: docs/console.md "When the database does not
 * answer" walked through as an operator would, on a PostgreSQL server of its
 * own whose processes are stopped (SIGSTOP: connections stay open, nothing
 * answers): every console page answers within two seconds, the overview
 * with the figures it keeps in memory and the database's shown as
 * unavailable, the pages that need the database with a plain 503; and all
 * is as before once the server answers again. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../integration/console_client.h"
#include "pg_common.h"

#define HANG_LATE "the database did not answer within 1.5 s"
#define HANG_NOT_ANSWERING                                                                         \
	"not answering</div><div class=\"label\">readiness: the database did not answer this "      \
	"page within 1.5 s; /readyz will follow at the next probe</div>"
#define HANG_PROMPT_MS 2500 /* a page's answer, at most, while the server hangs */

/* A receiver with the console on database db of server pg (not the shared
 * one), over its unix socket: daemon_init's SQLite [store] turned into
 * backend = postgresql. */
static void hang_daemon_start_with(struct daemon *d, struct pgserver *pg, const char *db,
                                   const char *extra)
{
	char conninfo[700];
	char ini[4096];

	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
	snprintf(ini, sizeof(ini), "%s%s%s", FX_STRIPE_INI, T_CONSOLE, extra);
	assert_int_equal(daemon_init_pg_at(d, db, conninfo, "", ini), 0);
	assert_int_equal(daemon_start(d), 0);
}

static void hang_daemon_start(struct daemon *d, struct pgserver *pg, const char *db)
{
	hang_daemon_start_with(d, pg, db, "");
}

/* GET path with s's cookie: its status, its body into r, the time it took. */
static long hang_get(struct daemon *d, const char *path, const struct t_session *s, struct hres *r,
                     int64_t *ret_ms)
{
	int64_t t0 = hn_now_ms();
	long status = t_get(d, path, s, r);

	*ret_ms = hn_now_ms() - t0;
	print_message("GET %s: %ld in %" PRId64 " ms\n", path, status, *ret_ms);
	return status;
}

/* The overview while the server hangs: prompt, the figures kept in memory
 * shown, the database's marked unavailable with the reason. */
static void hang_expect_overview(struct daemon *d, const struct t_session *s)
{
	struct hres r;
	int64_t ms;

	assert_int_equal(hang_get(d, "/console/", s, &r, &ms), 200);
	assert_true(ms < HANG_PROMPT_MS);
	assert_non_null(strstr(r.hs_body, HANG_LATE));
	assert_non_null(
	        strstr(r.hs_body, "unavailable</div><div class=\"label\">open failed events"));
	assert_non_null(strstr(r.hs_body, "unavailable</div><div class=\"label\">dead letters"));
	/* every card the database gives, the size too */
	assert_non_null(strstr(r.hs_body,
	                       "unavailable</div><div class=\"label\">database size (with WAL)"));
	/* and the page does not call the receiver ready next to them: it
	 * says why, or the health probe's own verdict once it has noticed */
	assert_null(strstr(r.hs_body, ">ready</div><div class=\"label\">readiness"));
	assert_true(strstr(r.hs_body, ">" HANG_NOT_ANSWERING) != NULL ||
	            strstr(r.hs_body, ">not ready</div><div class=\"label\">readiness: ") != NULL);
	/* the rest of the page, from memory */
	assert_non_null(strstr(r.hs_body, "rejected callbacks, last hour"));
	assert_non_null(strstr(r.hs_body, "<table id=\"traffic\">"));
	assert_non_null(strstr(r.hs_body, "name=\"csrf\""));
	assert_non_null(strstr(r.hs_body, "</html>"));
	hres_finish(&r);
}

/* A page that needs the database, while the server hangs: a prompt 503
 * with Retry-After that says why, with the navigation. */
static void hang_expect_503(struct daemon *d, const char *path, const struct t_session *s)
{
	struct hres r;
	char *retry;
	int64_t ms;

	assert_int_equal(hang_get(d, path, s, &r, &ms), 503);
	assert_true(ms < HANG_PROMPT_MS);
	retry = hres_header(&r, "Retry-After");
	assert_non_null(retry);
	assert_string_equal(retry, "5");
	free(retry);
	assert_non_null(strstr(r.hs_body, HANG_LATE));
	assert_non_null(strstr(r.hs_body, "Nothing was changed."));
	assert_non_null(strstr(r.hs_body, "href=\"/console/events\""));
	assert_non_null(strstr(r.hs_body, "</html>"));
	hres_finish(&r);
}

static void test_console_pages_answer_promptly_while_the_server_hangs(void **state)
{
	struct pgserver pg;
	struct daemon d;
	struct t_session s;
	struct hres r;
	char db[64];
	char order_id[64];
	char path[128];
	int64_t ms;
	int i;

	(void)state;
	assert_int_equal(pgserver_start_opts(&pg, NULL, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "console_hang", db), 0);
	hang_daemon_start(&d, &pg, db);
	fx_order(&d, 1500, "eur", order_id);
	assert_int_equal(fx_stripe_pay(&d, "evt_console_hang", order_id, 1500, "eur"), 200);
	t_login(&d, T_OP_TOKEN, &s);
	assert_int_equal(hang_get(&d, "/console/", &s, &r, &ms), 200);
	assert_null(strstr(r.hs_body, HANG_LATE));
	assert_null(strstr(r.hs_body, "unavailable"));
	hres_finish(&r);

	assert_true(pgserver_signal_all(&pg, SIGSTOP) > 1);
	/* The overview at once, before the health probe can have noticed
	 * (readiness still "ready"): the page says the database is not
	 * answering it, not "ready". */
	assert_int_equal(hang_get(&d, "/console/", &s, &r, &ms), 200);
	assert_non_null(strstr(r.hs_body, ">" HANG_NOT_ANSWERING));
	assert_null(strstr(r.hs_body, ">ready</div>"));
	hres_finish(&r);
	hang_expect_overview(&d, &s);
	/* A list's read first: it outlives its wait, and ends on its own. */
	hang_expect_503(&d, "/console/events", &s);
	/* Again and again: a read still waiting on the server does not make
	 * the next page wait for it. */
	for (i = 0; i < 3; i++) {
		hang_expect_overview(&d, &s);
	}
	hang_expect_503(&d, "/console/events?provider=stripe&open=1", &s);
	hang_expect_503(&d, "/console/events/1", &s);
	snprintf(path, sizeof(path), "/console/orders/%s", order_id);
	hang_expect_503(&d, path, &s);
	hang_expect_503(&d, "/console/outbox", &s);
	hang_expect_503(&d, "/console/outbox?status=dead", &s);
	hang_expect_503(&d, "/console/outbox/1", &s);
	hang_expect_503(&d, "/console/audit", &s);
	/* what is kept in memory needs no database */
	assert_int_equal(hang_get(&d, "/console/rejected", &s, &r, &ms), 200);
	assert_true(ms < HANG_PROMPT_MS);
	hres_finish(&r);

	assert_true(pgserver_signal_all(&pg, SIGCONT) > 1);
	/* The read that outlived its wait ends once the server answers; the
	 * pages are whole again by themselves. */
	for (i = 0; i < 60; i++) {
		assert_int_equal(hang_get(&d, "/console/", &s, &r, &ms), 200);
		if (strstr(r.hs_body, "unavailable") == NULL) {
			break;
		}
		hres_finish(&r);
		usleep(250 * 1000);
	}
	assert_true(i < 60);
	assert_null(strstr(r.hs_body, HANG_LATE));
	hres_finish(&r);
	assert_int_equal(hang_get(&d, "/console/events", &s, &r, &ms), 200);
	assert_non_null(strstr(r.hs_body, "evt_console_hang"));
	hres_finish(&r);
	snprintf(path, sizeof(path), "/console/orders/%s", order_id);
	assert_int_equal(hang_get(&d, path, &s, &r, &ms), 200);
	assert_non_null(strstr(r.hs_body, "evt_console_hang"));
	hres_finish(&r);
	assert_int_equal(hang_get(&d, "/console/audit", &s, &r, &ms), 200);
	assert_non_null(strstr(r.hs_body, "console.login"));
	hres_finish(&r);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	pgserver_stop(&pg);
}

/* A server stopped for good would hold a receiver that waits for it, and
 * this program with it: the server answers again after HANG_RESCUE_S
 * whatever happens, so a wait that is not bounded fails the test on its
 * time instead of hanging it. */
#define HANG_RESCUE_S 8

struct hang_rescue {
	struct pgserver *hr_pg;
	pthread_mutex_t hr_lock;
	pthread_cond_t hr_cond;
	int hr_done;
	pthread_t hr_thread;
};

static void *hang_rescue_main(void *arg)
{
	struct hang_rescue *h = arg;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HANG_RESCUE_S;
	pthread_mutex_lock(&h->hr_lock);
	while (!h->hr_done) {
		if (pthread_cond_timedwait(&h->hr_cond, &h->hr_lock, &until) != 0) {
			break;
		}
	}
	if (!h->hr_done) {
		print_message("the server stopped for %d s: answering again\n", HANG_RESCUE_S);
		pgserver_signal_all(h->hr_pg, SIGCONT);
	}
	pthread_mutex_unlock(&h->hr_lock);
	return NULL;
}

/* SIGSTOP, with the rescue armed. */
static void hang_stop(struct hang_rescue *h, struct pgserver *pg)
{
	memset(h, 0, sizeof(*h));
	h->hr_pg = pg;
	pthread_mutex_init(&h->hr_lock, NULL);
	pthread_cond_init(&h->hr_cond, NULL);
	assert_true(pgserver_signal_all(pg, SIGSTOP) > 1);
	assert_int_equal(pthread_create(&h->hr_thread, NULL, hang_rescue_main, h), 0);
}

/* SIGCONT, the rescue disarmed. */
static void hang_cont(struct hang_rescue *h)
{
	pthread_mutex_lock(&h->hr_lock);
	h->hr_done = 1;
	pthread_cond_signal(&h->hr_cond);
	pthread_mutex_unlock(&h->hr_lock);
	pthread_join(h->hr_thread, NULL);
	pthread_mutex_destroy(&h->hr_lock);
	pthread_cond_destroy(&h->hr_cond);
	assert_true(pgserver_signal_all(h->hr_pg, SIGCONT) > 1);
}

/* Waits until a read the console gave up on has ended (its overview has
 * no figure unavailable): the server answers again. */
static void hang_wait_whole(struct daemon *d, const struct t_session *s)
{
	struct hres r;
	int64_t ms;
	int i;

	for (i = 0; i < 80; i++) {
		assert_int_equal(hang_get(d, "/console/", s, &r, &ms), 200);
		if (strstr(r.hs_body, "unavailable") == NULL) {
			hres_finish(&r);
			return;
		}
		hres_finish(&r);
		usleep(250 * 1000);
	}
	fail_msg("the console's reads did not come back");
}

/* POST form to path as s while the server hangs: a prompt 503 with
 * Retry-After, its body into r. */
static void hang_post_503(struct daemon *d, const char *path, const struct t_session *s,
                          const char *form, struct hres *r)
{
	int64_t t0 = hn_now_ms();
	int64_t ms;
	char *retry;

	assert_int_equal(t_post(d, path, s, form, r), 503);
	ms = hn_now_ms() - t0;
	print_message("POST %s: 503 in %" PRId64 " ms\n", path, ms);
	assert_true(ms < HANG_PROMPT_MS);
	retry = hres_header(r, "Retry-After");
	assert_non_null(retry);
	assert_string_equal(retry, "5");
	free(retry);
	assert_non_null(strstr(r->hs_body, "</html>"));
}

#define HANG_T_DEAD_OUTBOUND                                                                       \
	"\n[outbound]\nnotify_url = http://127.0.0.1:9/notify\nmax_attempts = 1\npoll = 50ms\n"    \
	"connect_timeout = 1s\n"
#define HANG_UNKNOWN_MSG "the outcome of this action is unknown"
#define HANG_NOT_RUN_MSG                                                                           \
	"The database is not answering (an earlier request still waits for it); nothing was "      \
	"changed."

/* path posted with form while the server hangs: a 503 saying the outcome
 * is unknown; then the server goes on, and every page is whole again. */
static void hang_post_unknown(struct hang_rescue *h, struct pgserver *pg, struct daemon *d,
                              const struct t_session *s, const char *path, const char *form)
{
	struct hres r;

	hang_stop(h, pg);
	hang_post_503(d, path, s, form, &r);
	assert_non_null(strstr(r.hs_body, HANG_UNKNOWN_MSG));
	hres_finish(&r);
	hang_cont(h);
	hang_wait_whole(d, s);
}

/* docs/console.md "When the database does not answer", actions: a write
 * the database does not answer in time answers 503 saying its outcome is
 * unknown (it is applied once the server answers, and recorded once); one
 * sent while that one still waits is not begun at all, and says nothing
 * was changed (nothing is); a login is refused with 503 and no session;
 * an action applied late and sent again is refused by the row's state. */
static void test_console_actions_and_login_answer_promptly_while_the_server_hangs(void **state)
{
	struct pgserver pg;
	struct hang_rescue h;
	struct daemon d;
	struct t_session s;
	struct hres r;
	char db[64];
	char order[64];
	char path[128];
	char form[300];
	char *cookie;
	int64_t event;
	int64_t row;

	(void)state;
	assert_int_equal(pgserver_start_opts(&pg, NULL, 0), 0);
	assert_int_equal(pgserver_create_db(&pg, "console_hang_act", db), 0);
	hang_daemon_start_with(&d, &pg, db, HANG_T_DEAD_OUTBOUND);
	/* a failed event (its order does not exist) and a dead outbox row */
	assert_int_equal(
	        fx_stripe_pay(&d, "evt_hang_unknown", "ord_hang_nosuch000000001", 900, "usd"), 200);
	event = fx_db_int(&d, "SELECT id FROM events WHERE idem_key = 'evt_hang_unknown'");
	assert_true(event > 0);
	/* two more, for the bulk dismissal */
	assert_int_equal(
	        fx_stripe_pay(&d, "evt_hang_bulk_1", "ord_hang_nosuch000000002", 900, "usd"), 200);
	assert_int_equal(
	        fx_stripe_pay(&d, "evt_hang_bulk_2", "ord_hang_nosuch000000003", 900, "usd"), 200);
	fx_order(&d, 1500, "usd", order);
	assert_int_equal(fx_stripe_pay(&d, "evt_hang_outbox", order, 1500, "usd"), 200);
	assert_int_equal(
	        hn_db_wait_int(d.dm_db, "SELECT count(*) FROM outbox WHERE status = 'dead'", 1, 20),
	        1);
	row = fx_db_int(&d, "SELECT id FROM outbox WHERE status = 'dead'");
	t_login(&d, T_OP_TOKEN, &s);

	hang_stop(&h, &pg);
	/* The dismissal begins and gets no answer: unknown, said so. */
	snprintf(path, sizeof(path), "/console/events/%" PRId64 "/dismiss", event);
	snprintf(form, sizeof(form), "csrf=%s&reason=paid+at+the+till", s.ts_csrf);
	hang_post_503(&d, path, &s, form, &r);
	assert_non_null(strstr(r.hs_body, HANG_UNKNOWN_MSG));
	assert_null(strstr(r.hs_body, "othing was changed"));
	assert_null(strstr(r.hs_body, "othing changed"));
	hres_finish(&r);
	/* Sent again while it waits: not begun, nothing changed. */
	hang_post_503(&d, path, &s, form, &r);
	assert_non_null(strstr(r.hs_body, HANG_NOT_RUN_MSG));
	hres_finish(&r);
	snprintf(path, sizeof(path), "/console/outbox/%" PRId64 "/retry", row);
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	hang_post_503(&d, path, &s, form, &r);
	assert_non_null(strstr(r.hs_body, HANG_NOT_RUN_MSG));
	hres_finish(&r);
	/* A login is recorded before it is let in: 503, no session. */
	snprintf(form, sizeof(form), "token=%s", T_OP_TOKEN);
	hang_post_503(&d, "/console/login", NULL, form, &r);
	assert_non_null(strstr(r.hs_body, "The database is not answering"));
	assert_non_null(strstr(r.hs_body, "you are not logged in"));
	cookie = hres_header(&r, "Set-Cookie");
	assert_null(cookie);
	hres_finish(&r);
	hang_cont(&h);
	hang_wait_whole(&d, &s);

	/* The dismissal is applied once the server answers, recorded once. */
	assert_int_equal(
	        hn_db_wait_int(d.dm_db,
	                       "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL", 1, 20),
	        1);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM events WHERE id = %" PRId64
	                           " AND dismissed_by = 'console:alice'",
	                           event),
	                 1);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:%" PRId64
	                "' AND result = 'ok'",
	                event);
	/* what was not begun changed nothing */
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM outbox WHERE id = %" PRId64
	                           " AND status = 'dead' AND attempts = 1",
	                           row),
	                 1);
	fx_assert_audit(&d, 0, "action = 'outbox.retry' AND result LIKE 'ok%%'");
	fx_assert_audit(&d, 1, "action = 'console.login'");
	/* Sent again now: refused by the event's state, not applied twice. */
	snprintf(path, sizeof(path), "/console/events/%" PRId64 "/dismiss", event);
	snprintf(form, sizeof(form), "csrf=%s&reason=paid+at+the+till", s.ts_csrf);
	assert_int_equal(t_post(&d, path, &s, form, &r), 409);
	hres_finish(&r);
	fx_assert_audit(&d, 1,
	                "action = 'events.dismiss' AND target = 'event:%" PRId64
	                "' AND result = 'ok'",
	                event);

	/* The outbox retry the same way: unknown while the server hangs,
	 * applied and recorded once when it answers. */
	snprintf(path, sizeof(path), "/console/outbox/%" PRId64 "/retry", row);
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	hang_post_unknown(&h, &pg, &d, &s, path, form);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM audit_log WHERE action = "
	                                "'outbox.retry' AND result LIKE 'ok%'",
	                                1, 20),
	                 1);
	/* A bulk dismissal the same way: one job, applied once, each event
	 * recorded in the transaction that dismissed it. */
	snprintf(form, sizeof(form), "csrf=%s&list=open%%3D1&expect=2&reason=sandbox+orders",
	         s.ts_csrf);
	hang_post_unknown(&h, &pg, &d, &s, "/console/events/dismiss", form);
	assert_int_equal(
	        hn_db_wait_int(d.dm_db,
	                       "SELECT count(*) FROM events WHERE dismissed_at IS NOT NULL", 3, 20),
	        3);
	fx_assert_audit(&d, 2, "action = 'events.dismiss' AND reason = 'sandbox orders'");
	/* A bulk retry reads its rows first: a read the database does not
	 * answer in time changes nothing, and says so. */
	assert_int_equal(
	        hn_db_wait_int(d.dm_db, "SELECT count(*) FROM outbox WHERE status = 'dead'", 1, 20),
	        1);
	hang_stop(&h, &pg);
	snprintf(form, sizeof(form), "csrf=%s&status=dead&expect=1", s.ts_csrf);
	hang_post_503(&d, "/console/outbox/retry-all", &s, form, &r);
	assert_non_null(strstr(r.hs_body, "The database did not answer within 1.5 s (reading the "
	                                  "rows to retry); nothing was changed."));
	assert_non_null(strstr(r.hs_body, "</html>"));
	hres_finish(&r);
	hang_cont(&h);
	hang_wait_whole(&d, &s);
	fx_assert_audit(&d, 1, "action = 'outbox.retry' AND result LIKE 'ok%%'");
	fx_assert_audit(&d, 0, "action = 'outbox.retry_all'");
	/* Compensate: unknown while the server hangs, applied once when it
	 * answers; sent again, refused by the row's state, not run twice. */
	snprintf(path, sizeof(path), "/console/outbox/%" PRId64 "/compensate", row);
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	hang_post_unknown(&h, &pg, &d, &s, path, form);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM audit_log WHERE action = "
	                                "'outbox.compensate' AND result LIKE 'ok%'",
	                                1, 20),
	                 1);
	assert_int_equal(t_post(&d, path, &s, form, &r), 409);
	assert_non_null(strstr(r.hs_body, "already compensated"));
	hres_finish(&r);
	fx_assert_audit(&d, 1, "action = 'outbox.compensate' AND result LIKE 'ok%%'");
	fx_assert_audit(&d, 1, "action = 'outbox.compensate' AND result LIKE 'refused%%'");
	/* Reprocess: its job holds a configuration of its own, let go by the
	 * store's thread once the unit ends; applied once. */
	assert_int_equal(fx_stripe_pay(&d, "evt_hang_reprocess", "ord_hang_nosuch000000004", 900,
	                               "usd"),
	                 200);
	event = fx_db_int(&d, "SELECT id FROM events WHERE idem_key = 'evt_hang_reprocess'");
	assert_true(event > 0);
	snprintf(path, sizeof(path), "/console/events/%" PRId64 "/reprocess", event);
	snprintf(form, sizeof(form), "csrf=%s", s.ts_csrf);
	hang_post_unknown(&h, &pg, &d, &s, path, form);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM audit_log WHERE action = "
	                                "'events.reprocess'",
	                                1, 20),
	                 1);
	assert_int_equal(fx_db_int(&d, "SELECT reprocessed FROM events WHERE id = %" PRId64, event),
	                 1);
	fx_assert_audit(&d, 1,
	                "action = 'events.reprocess' AND target = 'event:%" PRId64
	                "' AND result LIKE 'ok: still failed%%'",
	                event);
	/* Reconcile now reads the order first: on a database that does not
	 * answer, the run is not begun. */
	hang_stop(&h, &pg);
	snprintf(form, sizeof(form), "csrf=%s&order=%s", s.ts_csrf, order);
	hang_post_503(&d, "/console/reconcile", &s, form, &r);
	assert_non_null(strstr(r.hs_body, "The database did not answer within 1.5 s (reading the "
	                                  "order); nothing was changed."));
	hres_finish(&r);
	hang_cont(&h);
	hang_wait_whole(&d, &s);
	/* and a login is let in again */
	t_login(&d, T_OP_TOKEN, &s);
	fx_assert_audit(&d, 2, "action = 'console.login'");
	/* A clean stop: the jobs given up on were freed by the store's
	 * thread (an ASan build's leak check says so at exit). */
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
	pgserver_stop(&pg);
}

/* A slow database, not a hung one: a session of its own takes the tables
 * an order's page reads in turn, for SLOW_HOLD_S at a time, so each of the
 * page's reads waits about that long (less than the 1.5 s a read may wait)
 * and together they would wait several times as long. */
#define SLOW_SQL                                                                                   \
	"BEGIN; LOCK TABLE orders, outbox, outbox_attempts IN ACCESS EXCLUSIVE MODE; "             \
	"SELECT pg_sleep(1.2); COMMIT;"

struct slow_locker {
	struct pgserver_session sl_ps;
	int sl_stop; /* atomic */
	int sl_cycles;
	pthread_t sl_thread;
};

static void *slow_locker_main(void *arg)
{
	struct slow_locker *l = arg;

	while (!__atomic_load_n(&l->sl_stop, __ATOMIC_ACQUIRE)) {
		if (pgserver_session_run(&l->sl_ps, SLOW_SQL) < 0) {
			break;
		}
		l->sl_cycles++;
	}
	return NULL;
}

/* A receiver on a database of its own with an order whose outbox row is
 * dead (an outbox row and its attempt), an operator logged in, and the
 * order page's path. */
struct hang_order {
	struct pgserver ho_pg;
	struct daemon ho_d;
	struct t_session ho_s;
	char ho_db[64];
	char ho_order[64];
	char ho_path[128];
};

static void hang_order_start(struct hang_order *h, const char *dbname, const char *evt)
{
	assert_int_equal(pgserver_start_opts(&h->ho_pg, NULL, 0), 0);
	assert_int_equal(pgserver_create_db(&h->ho_pg, dbname, h->ho_db), 0);
	hang_daemon_start_with(&h->ho_d, &h->ho_pg, h->ho_db, HANG_T_DEAD_OUTBOUND);
	fx_order(&h->ho_d, 1500, "usd", h->ho_order);
	assert_int_equal(fx_stripe_pay(&h->ho_d, evt, h->ho_order, 1500, "usd"), 200);
	assert_int_equal(hn_db_wait_int(h->ho_d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'dead'", 1, 20),
	                 1);
	t_login(&h->ho_d, T_OP_TOKEN, &h->ho_s);
	snprintf(h->ho_path, sizeof(h->ho_path), "/console/orders/%s", h->ho_order);
}

static void hang_order_stop(struct hang_order *h)
{
	assert_int_equal(daemon_term(&h->ho_d, 20), 0);
	daemon_finish(&h->ho_d);
	pgserver_stop(&h->ho_pg);
}

/* docs/console.md "When the database does not answer": a page's reads
 * share one deadline of 1.5 s, so a page of many reads on a slow database
 * answers within it too (a 503 when they did not all end in time), not
 * after several times 1.5 s. */
static void test_console_page_reads_share_one_deadline_on_a_slow_database(void **state)
{
	struct hang_order h;
	struct slow_locker l;
	struct hres r;
	int64_t ms;
	long status;
	int i;

	(void)state;
	/* an order with an outbox row and its attempt: four reads */
	hang_order_start(&h, "console_slow", "evt_slow_outbox");
	assert_int_equal(hang_get(&h.ho_d, h.ho_path, &h.ho_s, &r, &ms), 200);
	assert_non_null(strstr(r.hs_body, "evt_slow_outbox"));
	hres_finish(&r);

	memset(&l, 0, sizeof(l));
	assert_int_equal(pgserver_session_start(&l.sl_ps, &h.ho_pg, h.ho_db), 0);
	assert_int_equal(pthread_create(&l.sl_thread, NULL, slow_locker_main, &l), 0);
	usleep(300 * 1000);
	for (i = 0; i < 3; i++) {
		status = hang_get(&h.ho_d, h.ho_path, &h.ho_s, &r, &ms);
		assert_true(status == 200 || status == 503);
		if (status == 503) {
			assert_non_null(strstr(r.hs_body, HANG_LATE));
		}
		assert_true(ms < HANG_PROMPT_MS);
		hres_finish(&r);
	}
	__atomic_store_n(&l.sl_stop, 1, __ATOMIC_RELEASE);
	pthread_join(l.sl_thread, NULL);
	print_message("%d lock cycles\n", l.sl_cycles);
	pgserver_session_finish(&l.sl_ps);
	/* whole again once the database is quick */
	for (i = 0; i < 40; i++) {
		if (hang_get(&h.ho_d, h.ho_path, &h.ho_s, &r, &ms) == 200) {
			break;
		}
		hres_finish(&r);
		usleep(250 * 1000);
	}
	assert_true(i < 40);
	assert_non_null(strstr(r.hs_body, "evt_slow_outbox"));
	hres_finish(&r);
	hang_order_stop(&h);
}

/* docs/console.md "When the database does not answer": an order's page
 * whose deadline runs out while it reads the outbox rows' attempts (a
 * lock held on their table) shows the order, its timeline and its rows,
 * and marks the attempts unavailable. */
static void test_an_order_page_shows_what_it_read_in_time(void **state)
{
	struct hang_order h;
	struct pgserver_session ps;
	struct hres r;
	int64_t ms;
	int i;

	(void)state;
	hang_order_start(&h, "console_part", "evt_part_outbox");

	assert_int_equal(pgserver_session_start(&ps, &h.ho_pg, h.ho_db), 0);
	assert_int_equal(pgserver_session_run(&ps, "BEGIN; LOCK TABLE outbox_attempts IN ACCESS "
	                                           "EXCLUSIVE MODE;"),
	                 0);
	assert_int_equal(hang_get(&h.ho_d, h.ho_path, &h.ho_s, &r, &ms), 200);
	assert_true(ms < HANG_PROMPT_MS);
	assert_non_null(strstr(r.hs_body, "evt_part_outbox"));         /* the timeline */
	assert_non_null(strstr(r.hs_body, "<h3>Attempts of <a href")); /* the rows */
	assert_non_null(strstr(r.hs_body, "The attempts below are unavailable: " HANG_LATE));
	assert_non_null(strstr(r.hs_body, "</html>"));
	hres_finish(&r);
	assert_int_equal(pgserver_session_finish(&ps), 0);
	/* whole again once the lock is gone (and the read given up on ended) */
	for (i = 0; i < 40; i++) {
		if (hang_get(&h.ho_d, h.ho_path, &h.ho_s, &r, &ms) == 200 &&
		    strstr(r.hs_body, "unavailable") == NULL) {
			break;
		}
		hres_finish(&r);
		usleep(250 * 1000);
	}
	assert_true(i < 40);
	hres_finish(&r);
	/* the row's own page the same way: the row, its attempts marked */
	assert_int_equal(pgserver_session_start(&ps, &h.ho_pg, h.ho_db), 0);
	assert_int_equal(pgserver_session_run(&ps, "BEGIN; LOCK TABLE outbox_attempts IN ACCESS "
	                                           "EXCLUSIVE MODE;"),
	                 0);
	assert_int_equal(hang_get(&h.ho_d, "/console/outbox/1", &h.ho_s, &r, &ms), 200);
	assert_true(ms < HANG_PROMPT_MS);
	assert_non_null(strstr(r.hs_body, "notify"));
	assert_non_null(strstr(r.hs_body, "The attempts are unavailable: " HANG_LATE));
	assert_non_null(strstr(r.hs_body, "</html>"));
	hres_finish(&r);
	assert_int_equal(pgserver_session_finish(&ps), 0);
	hang_order_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_console_pages_answer_promptly_while_the_server_hangs),
	        cmocka_unit_test(
	                test_console_actions_and_login_answer_promptly_while_the_server_hangs),
	        cmocka_unit_test(test_console_page_reads_share_one_deadline_on_a_slow_database),
	        cmocka_unit_test(test_an_order_page_shows_what_it_read_in_time),
	};

	pgserver_require_or_skip("test_console_hang_pg");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
