/* test_console_hang_pg.c: docs/console.md "When the database does not
 * answer" walked through as an operator would, on a PostgreSQL server of its
 * own whose processes are stopped (SIGSTOP: connections stay open, nothing
 * answers): every console page answers within two seconds, the overview
 * with the figures it keeps in memory and the database's shown as
 * unavailable, the pages that need the database with a plain 503; and all
 * is as before once the server answers again. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../integration/console_client.h"
#include "pg_common.h"

#define HANG_LATE "the database did not answer within 1.5 s"
#define HANG_NOT_ANSWERING                                                                         \
	"not answering: the database did not answer this page within 1.5 s; /readyz will "         \
	"follow at the next probe"
#define HANG_PROMPT_MS 2500 /* a page's answer, at most, while the server hangs */

/* A receiver with the console on database db of server pg (not the shared
 * one), over its unix socket: daemon_init's SQLite [store] turned into
 * backend = postgresql. */
static void hang_daemon_start(struct daemon *d, struct pgserver *pg, const char *db)
{
	char conninfo[700];

	setenv("T_CONSOLE_OP", T_OP_TOKEN, 1);
	setenv("T_CONSOLE_RO", T_RO_TOKEN, 1);
	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
	assert_int_equal(daemon_init_pg_at(d, db, conninfo, "", FX_STRIPE_INI T_CONSOLE), 0);
	assert_int_equal(daemon_start(d), 0);
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
	assert_true(strstr(r.hs_body, ">" HANG_NOT_ANSWERING "</div><div "
	                              "class=\"label\">readiness") != NULL ||
	            strstr(r.hs_body, ">not ready: ") != NULL);
	/* the rest of the page, from memory */
	assert_non_null(strstr(r.hs_body, "rejected callbacks, last hour"));
	assert_non_null(strstr(r.hs_body, "<table id=\"traffic\">"));
	assert_non_null(strstr(r.hs_body, "name=\"csrf\""));
	assert_non_null(strstr(r.hs_body, "</html>"));
	hres_finish(&r);
}

/* A page that needs the database, while the server hangs: a prompt 503
 * that says why, with the navigation. */
static void hang_expect_503(struct daemon *d, const char *path, const struct t_session *s)
{
	struct hres r;
	int64_t ms;

	assert_int_equal(hang_get(d, path, s, &r, &ms), 503);
	assert_true(ms < HANG_PROMPT_MS);
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
	assert_non_null(strstr(r.hs_body, ">" HANG_NOT_ANSWERING "</div>"));
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
	daemon_finish(&d);
	pgserver_stop(&pg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_console_pages_answer_promptly_while_the_server_hangs),
	};

	pgserver_require_or_skip("test_console_hang_pg");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
