/* test_console_views.c: what the console's pages show, over real HTTP on the
 * real daemon's admin listener: links that reach what they name, figures
 * whose links list what they count, payloads cut as documented, and a
 * dismiss reason the form accepts accepted by the server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "console_client.h"
#include "fixtures.h"
#include "harness.h"

static void t_stop(struct daemon *d)
{
	assert_int_equal(daemon_term(d, 30), 0);
	daemon_finish(d);
}

/* The card labelled label on the overview page: its link (&amp; undone)
 * into href, and its figure as a number. */
static int64_t t_card(const char *page, const char *label, char *href, size_t size)
{
	char want[200];
	const char *p = page;

	snprintf(want, sizeof(want), "<div class=\"label\">%s</div></a>", label);
	while ((p = strstr(p, "<a class=\"card\" href=\"")) != NULL) {
		const char *end = strstr(p, "</a>");
		const char *h = p + strlen("<a class=\"card\" href=\"");
		const char *fig;
		size_t o = 0;

		assert_non_null(end);
		if (strncmp(strstr(p, "<div class=\"label\">"), want, strlen(want)) != 0) {
			p = end;
			continue;
		}
		while (*h != '"' && o + 1 < size) {
			if (strncmp(h, "&amp;", 5) == 0) {
				href[o++] = '&';
				h += 5;
			} else {
				href[o++] = *h++;
			}
		}
		assert_int_equal(*h, '"');
		href[o] = '\0';
		fig = strstr(h, "<div class=\"figure");
		assert_non_null(fig);
		fig = strchr(fig, '>');
		assert_non_null(fig);
		return strtoll(fig + 1, NULL, 10);
	}
	fail_msg("no card \"%s\"", label);
	return -1;
}

/* How many times needle occurs in s. */
static int64_t t_count(const char *s, const char *needle)
{
	int64_t n = 0;

	while ((s = strstr(s, needle)) != NULL) {
		n++;
		s += strlen(needle);
	}
	return n;
}

static void test_an_order_whose_id_is_a_dot_segment_is_linked_by_query(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;

	(void)state;
	t_start(&d, NULL);
	assert_int_equal(fx_stripe_pay(&d, "evt_views_dots", "..", 900, "usd"), 200);
	t_login(&d, T_OP_TOKEN, &s);
	/* /console/orders/.. (or %2E%2E) would open /console/ in a browser */
	assert_int_equal(t_get(&d, "/console/events", &s, &r), 200);
	assert_null(strstr(r.hs_body, "href=\"/console/orders/..\""));
	assert_non_null(strstr(r.hs_body, "href=\"/console/orders?id=..\""));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/orders?id=..", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<h1>Order .. (not in the orders table)</h1>"));
	assert_non_null(strstr(r.hs_body, "evt_views_dots"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/orders", &s, &r), 404);
	hres_finish(&r);
	t_stop(&d);
}

/* Payments fail to be announced (nothing listens on port 9) and wait to be
 * tried again in up to an hour: the outbox backlog, in retry_wait. */
#define T_BACKLOG_OUTBOUND                                                                         \
	"\n[outbound]\nnotify_url = http://127.0.0.1:9/notify\npoll = 50ms\nretry_base = 1h\n"     \
	"connect_timeout = 1s\n"

static void test_each_overview_card_links_to_the_rows_it_counts(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	struct hres list;
	char href[256];
	char order[64];
	char *body;
	int64_t n;
	int i;

	(void)state;
	t_start(&d, T_BACKLOG_OUTBOUND);
	/* two paid orders whose announcements wait for another attempt */
	for (i = 0; i < 2; i++) {
		char key[32];

		fx_order(&d, 1200, "usd", order);
		snprintf(key, sizeof(key), "evt_views_paid_%d", i);
		assert_int_equal(fx_stripe_pay(&d, key, order, 1200, "usd"), 200);
	}
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT count(*) FROM outbox WHERE status = 'retry_wait'",
	                                2, 20),
	                 2);
	/* a refund of a payment no order is known under waits for it (parked);
	 * a payment for an order that does not exist fails, unknown_order too,
	 * but waits for nothing */
	body = fx_stripe_refund("evt_views_refund", "ord_views_nosuch_000000001", 800, 800,
	                        "re_views_1", "usd");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);
	assert_int_equal(
	        fx_stripe_pay(&d, "evt_views_unknown", "ord_views_nosuch_000000002", 800, "usd"),
	        200);
	assert_int_equal(
	        fx_db_int(&d, "SELECT count(*) FROM order_parked WHERE applied_at IS NULL"), 1);
	t_login(&d, T_OP_TOKEN, &s);
	assert_int_equal(t_get(&d, "/console/", &s, &r), 200);
	n = t_card(r.hs_body, "parked, waiting for their payment", href, sizeof(href));
	assert_int_equal(n, 1);
	assert_int_equal(t_get(&d, href, &s, &list), 200);
	assert_int_equal(t_count(list.hs_body, "<tr><td class=\"num\"><a href=\"/console/events/"),
	                 n);
	assert_non_null(strstr(list.hs_body, "evt_views_refund"));
	hres_finish(&list);
	n = t_card(r.hs_body, "outbox backlog (pending, delivering, retrying)", href, sizeof(href));
	assert_int_equal(n, 2);
	assert_int_equal(t_get(&d, href, &s, &list), 200);
	assert_int_equal(t_count(list.hs_body, "<tr><td class=\"num\"><a href=\"/console/outbox/"),
	                 n);
	hres_finish(&list);
	hres_finish(&r);
	t_stop(&d);
}

/* A payload over the 256 KB shown: raw and pretty-printed, each view is cut
 * with a note, and the page is not the whole payload twice over. */
static void test_a_payload_over_256_kb_is_cut_in_both_views(void **state)
{
	const size_t big = 300 * 1024;
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[64];
	char *object = malloc(big + 512);
	char *body;
	const char *pretty;
	const char *raw;
	const char *end;
	const char *note;
	size_t len;
	long long id;

	(void)state;
	assert_non_null(object);
	snprintf(object, big + 512,
	         "{\"id\":\"pi_views_big\",\"object\":\"payment_intent\",\"amount\":100,"
	         "\"amount_received\":100,\"currency\":\"usd\",\"status\":\"succeeded\","
	         "\"metadata\":{\"order_id\":\"ord_views_big\"},\"description\":\"");
	len = strlen(object);
	memset(object + len, 'x', big);
	memcpy(object + len + big, "\"}", 3);
	body = hn_stripe_event("evt_views_big", "payment_intent.succeeded", object);
	free(object);
	t_start(&d, NULL);
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);
	id = (long long)fx_db_int(&d, "SELECT id FROM events WHERE idem_key = 'evt_views_big'");
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	pretty = strstr(r.hs_body, "<pre id=\"payload-pretty\">");
	raw = strstr(r.hs_body, "<pre id=\"payload-raw\">");
	assert_non_null(pretty);
	assert_non_null(raw);
	/* each: 256 KB, a few quotes escaped as entities, the note */
	end = strstr(pretty, "</pre>");
	assert_non_null(end);
	assert_true((size_t)(end - pretty) < 256 * 1024 + 1024);
	note = strstr(pretty, "(cut: 262144 of ");
	assert_true(note != NULL && note < end);
	end = strstr(raw, "</pre>");
	assert_non_null(end);
	assert_true((size_t)(end - raw) < 256 * 1024 + 1024);
	note = strstr(raw, "(cut: 262144 of ");
	assert_true(note != NULL && note < end);
	hres_finish(&r);
	t_stop(&d);
}

/* A payment for an order that does not exist: a failed event; its id. */
static long long t_failed_event(struct daemon *d, const char *key)
{
	assert_int_equal(fx_stripe_pay(d, key, "ord_views_nosuch_000000003", 700, "usd"), 200);
	return (long long)fx_db_int(d, "SELECT id FROM events WHERE idem_key = '%s'", key);
}

/* The form's maxlength counts characters (UTF-16 units, never fewer): the
 * server counts characters too, not bytes. */
static void test_a_dismiss_reason_of_500_characters_of_3_bytes_each_is_accepted(void **state)
{
	static const char han[] = "%E4%B8%AD"; /* U+4E2D, three bytes */
	struct daemon d;
	struct t_session s;
	struct hres r;
	char path[64];
	char form[6000];
	long long id;
	size_t o;
	int i;

	(void)state;
	t_start(&d, NULL);
	id = t_failed_event(&d, "evt_views_reason_500");
	t_login(&d, T_OP_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/events/%lld", id);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "id=\"dismiss-reason\" required maxlength=\"500\""));
	hres_finish(&r);
	o = (size_t)snprintf(form, sizeof(form), "csrf=%s&reason=", s.ts_csrf);
	for (i = 0; i < 500; i++) {
		memcpy(form + o, han, strlen(han));
		o += strlen(han);
	}
	form[o] = '\0';
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", id);
	/* carried out: a redirect to the event (Post/Redirect/Get) */
	assert_int_equal(t_post(&d, path, &s, form, &r), 303);
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM events WHERE id = %lld AND"
	                           " dismissed_at IS NOT NULL AND length(dismiss_reason) = 500",
	                           id),
	                 1);
	/* one more is refused, and says the limit in characters */
	id = t_failed_event(&d, "evt_views_reason_501");
	memcpy(form + o, han, strlen(han) + 1);
	snprintf(path, sizeof(path), "/console/events/%lld/dismiss", id);
	assert_int_equal(t_post(&d, path, &s, form, &r), 409);
	assert_non_null(strstr(r.hs_body, "a reason of 1 to 500 characters is required"));
	hres_finish(&r);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT count(*) FROM events WHERE id = %lld AND"
	                           " dismissed_at IS NULL",
	                           id),
	                 1);
	t_stop(&d);
}

/* An outbox status the page does not know (a typo, "failed" for dead)
 * lists nothing and says why, rather than an empty list that reads as "no
 * such rows"; a status named twice likewise, not a page that fails. */
static void test_the_outbox_list_says_when_its_status_is_not_one(void **state)
{
	static const char *const bad[] = {
	        "/console/outbox?status=failed",
	        "/console/outbox?status=dead,retry",
	        "/console/outbox?status=dead,dead,dead,dead,dead,dead,dead,dead,dead",
	};
	struct daemon d;
	struct t_session s;
	struct hres r;
	size_t i;

	(void)state;
	t_start(&d, NULL);
	t_login(&d, T_RO_TOKEN, &s);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(t_get(&d, bad[i], &s, &r), 200);
		assert_non_null(strstr(r.hs_body, "id=\"filters-conflict\""));
		assert_non_null(strstr(r.hs_body, "no rows: the status above matches none"));
		hres_finish(&r);
	}
	assert_int_equal(t_get(&d, "/console/outbox?status=failed", &s, &r), 200);
	assert_non_null(
	        strstr(r.hs_body, "status &quot;failed&quot; is not an outbox status (pending,"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/outbox?status=dead,dead", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "status names dead twice."));
	hres_finish(&r);
	/* the statuses it knows, one or several, list as before */
	assert_int_equal(t_get(&d, "/console/outbox?status=pending,delivering,retry_wait", &s, &r),
	                 200);
	assert_null(strstr(r.hs_body, "filters-conflict"));
	assert_non_null(strstr(r.hs_body, ">no rows<"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/outbox?status=dead", &s, &r), 200);
	assert_null(strstr(r.hs_body, "filters-conflict"));
	hres_finish(&r);
	t_stop(&d);
}

/* An events filter value the list does not know (an outcome, a source, a
 * provider neither configured nor stored) and a ?before= that is no row
 * id, on the events and the outbox lists, are said, never an empty list
 * that reads as "no such events", nor the newest rows read as older. */
static void test_the_lists_say_a_filter_or_cursor_they_do_not_understand(void **state)
{
	static const char *const bad[][2] = {
	        {"/console/events?outcome=bogus",
	         "outcome &quot;bogus&quot; is not an outcome (done, failed, fetching)."},
	        {"/console/events?source=bogus",
	         "source &quot;bogus&quot; is not a source (callback, reconcile)."},
	        {"/console/events?provider=strpe",
	         "provider &quot;strpe&quot; is not one configured (stripe) and no event stored "
	         "has it."},
	        {"/console/events?before=abc", "before &quot;abc&quot; is not a row id"},
	        {"/console/events?outcome=failed&before=-4",
	         "before &quot;-4&quot; is not a row id"},
	        {"/console/outbox?before=abc", "before &quot;abc&quot; is not a row id"},
	        {"/console/outbox?status=dead&before=12x",
	         "before &quot;12x&quot; is not a row id"},
	};
	static const char *const good[] = {
	        "/console/events?outcome=failed&source=callback&provider=stripe",
	        "/console/events?outcome=fetching&source=reconcile",
	        "/console/events?before=999999",
	        "/console/outbox?status=dead&before=999999",
	};
	struct daemon d;
	struct t_session s;
	struct hres r;
	size_t i;

	(void)state;
	t_start(&d, NULL);
	t_failed_event(&d, "evt_views_filters_1");
	t_login(&d, T_OP_TOKEN, &s);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(t_get(&d, bad[i][0], &s, &r), 200);
		if (strstr(r.hs_body, bad[i][1]) == NULL) {
			print_error("%s does not say \"%s\"\n", bad[i][0], bad[i][1]);
		}
		assert_non_null(strstr(r.hs_body, "id=\"filters-conflict\""));
		assert_non_null(strstr(r.hs_body, bad[i][1]));
		/* nothing listed, and no bulk form offered on what was not understood */
		assert_null(strstr(r.hs_body, "evt_views_filters_1"));
		assert_null(strstr(r.hs_body, "id=\"dismiss-all\""));
		hres_finish(&r);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(t_get(&d, good[i], &s, &r), 200);
		assert_null(strstr(r.hs_body, "filters-conflict"));
		hres_finish(&r);
	}
	/* the failed event is listed by the filters it has */
	assert_int_equal(t_get(&d, "/console/events?provider=stripe&outcome=failed", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "evt_views_filters_1"));
	hres_finish(&r);
	t_stop(&d);
}

/* The audit list's ?before= that is no row id is said as the events and
 * outbox lists say it, nothing listed, never the newest actions read as
 * older ones; and a bad cursor on any list says where to start again, not
 * to change filters it does not have. */
static void test_a_cursor_that_is_no_row_id_is_said_on_every_list_as_a_cursor(void **state)
{
	static const char *const bad[] = {"/console/audit?before=abc", "/console/audit?before=-4",
	                                  "/console/audit?before=12x", "/console/audit?before=0"};
	static const char *const cursors[] = {"/console/events?before=abc",
	                                      "/console/outbox?before=abc",
	                                      "/console/audit?before=abc"};
	const char *dismiss[] = {"events", "dismiss", NULL, "--reason", "views cursor test", NULL};
	struct daemon d;
	struct t_session s;
	struct hres r;
	char id[32];
	char path[64];
	size_t i;

	(void)state;
	t_start(&d, NULL);
	snprintf(id, sizeof(id), "%lld", t_failed_event(&d, "evt_views_cursor_1"));
	dismiss[2] = id;
	assert_int_equal(daemon_cli(&d, 1, dismiss, NULL), 0);
	t_login(&d, T_OP_TOKEN, &s);
	/* the action is listed from the top and before a later id */
	assert_int_equal(t_get(&d, "/console/audit", &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "events.dismiss"));
	assert_null(strstr(r.hs_body, "filters-conflict"));
	hres_finish(&r);
	snprintf(path, sizeof(path), "/console/audit?before=%lld",
	         (long long)fx_db_int(&d, "SELECT max(id) + 1 FROM audit_log"));
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "events.dismiss"));
	assert_null(strstr(r.hs_body, "filters-conflict"));
	hres_finish(&r);
	assert_int_equal(t_get(&d, "/console/audit?before=1", &s, &r), 200);
	assert_null(strstr(r.hs_body, "events.dismiss"));
	assert_non_null(strstr(r.hs_body, "no older operator actions"));
	hres_finish(&r);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(t_get(&d, bad[i], &s, &r), 200);
		if (strstr(r.hs_body, "is not a row id") == NULL ||
		    strstr(r.hs_body, "events.dismiss") != NULL) {
			print_error("%s: the bad cursor is not said, or rows are listed\n", bad[i]);
		}
		assert_non_null(strstr(r.hs_body, "id=\"filters-conflict\""));
		assert_non_null(strstr(r.hs_body, "is not a row id"));
		assert_null(strstr(r.hs_body, "events.dismiss"));
		assert_non_null(strstr(r.hs_body, "no actions: the before above is no row id"));
		hres_finish(&r);
	}
	for (i = 0; i < sizeof(cursors) / sizeof(cursors[0]); i++) {
		assert_int_equal(t_get(&d, cursors[i], &s, &r), 200);
		assert_non_null(strstr(r.hs_body, "before &quot;abc&quot; is not a row id"));
		assert_non_null(strstr(r.hs_body, " Nothing listed; "));
		assert_null(strstr(r.hs_body, "change the filters"));
		assert_null(strstr(r.hs_body, "cannot match"));
		hres_finish(&r);
	}
	/* the events list's way back keeps its filters and drops the cursor */
	assert_int_equal(t_get(&d, "/console/events?outcome=failed&before=abc", &s, &r), 200);
	assert_non_null(strstr(r.hs_body,
	                       " Nothing listed; <a href=\"/console/events?outcome=failed\">"
	                       "Newest</a> starts from the newest events these filters "
	                       "match."));
	assert_non_null(strstr(r.hs_body, "no events: the before above is no row id"));
	hres_finish(&r);
	t_stop(&d);
}

/* The order page shows the points total that idemhook order show prints:
 * the same figure, from the ledger. */
static void test_the_order_page_shows_the_points_order_show_prints(void **state)
{
	struct daemon d;
	struct t_session s;
	struct hres r;
	char order[64];
	char path[128];
	const char *show[] = {"order", "show", order, NULL};

	(void)state;
	t_start(&d, NULL);
	fx_order(&d, 1999, "usd", order);
	assert_int_equal(fx_stripe_pay(&d, "evt_views_points", order, 1999, "usd"), 200);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT COALESCE(SUM(points), 0) FROM points_ledger"
	                           " WHERE order_id = '%s'",
	                           order),
	                 19);
	fx_cli_says(&d, show, 0, "\npoints:             19\n");
	t_login(&d, T_RO_TOKEN, &s);
	snprintf(path, sizeof(path), "/console/orders/%s", order);
	assert_int_equal(t_get(&d, path, &s, &r), 200);
	assert_non_null(strstr(r.hs_body, "<dt>points</dt><dd>19</dd>"));
	hres_finish(&r);
	t_stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_an_order_whose_id_is_a_dot_segment_is_linked_by_query),
	        cmocka_unit_test(test_each_overview_card_links_to_the_rows_it_counts),
	        cmocka_unit_test(test_the_outbox_list_says_when_its_status_is_not_one),
	        cmocka_unit_test(test_the_lists_say_a_filter_or_cursor_they_do_not_understand),
	        cmocka_unit_test(test_a_cursor_that_is_no_row_id_is_said_on_every_list_as_a_cursor),
	        cmocka_unit_test(test_the_order_page_shows_the_points_order_show_prints),
	        cmocka_unit_test(test_a_payload_over_256_kb_is_cut_in_both_views),
	        cmocka_unit_test(
	                test_a_dismiss_reason_of_500_characters_of_3_bytes_each_is_accepted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
