/* console_pages.c: the console's pages, server-rendered HTML (console_pages.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cJSON.h>

#include "buf.h"
#include "capture.h"
#include "config.h"
#include "console_db.h"
#include "console_pages.h"
#include "dupcount.h"
#include "env.h"
#include "health.h"
#include "http.h"
#include "metrics.h"
#include "outbound.h"
#include "outbox.h"
#include "rejects.h"
#include "stats.h"
#include "store.h"
#include "text.h"
#include "traffic.h"

#define CONSOLE_RAW_SHOWN (256 * 1024)   /* bytes of a payload or body shown raw */
#define CONSOLE_PRETTY_MAX (1024 * 1024) /* payloads pretty-printed up to this size */
#define CONSOLE_ORDER_OUTBOX_MAX 100     /* outbox rows of one order shown with their attempts */
/* the order page reloads itself this often while a reconcile run of it
 * is under way */
#define CONSOLE_RUN_REFRESH_S 5
/* The statuses the outbox backlog counts (stats.h: sg_outbox_backlog), as
 * the outbox page's ?status= takes a list. */
#define CONSOLE_OUTBOX_BACKLOG "pending,delivering,retry_wait"

/* ---- escaping ---- */

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t console_utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	size_t i;
	uint32_t cp;

	if (s[0] < 0x80) {
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len) {
		return 0;
	}
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			return 0;
		}
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and past U+10FFFF */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff)) {
		return 0;
	}
	return len;
}

int console_escn(struct buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned char c = p[i];
		size_t n;

		if (c == '&') {
			buf_puts(b, "&amp;");
		} else if (c == '<') {
			buf_puts(b, "&lt;");
		} else if (c == '>') {
			buf_puts(b, "&gt;");
		} else if (c == '"') {
			buf_puts(b, "&quot;");
		} else if (c == '\'') {
			buf_puts(b, "&#39;");
		} else if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
			buf_append(b, s + i, 1);
		} else if (c >= 0x80 && (n = console_utf8_len(p + i, len - i)) > 0) {
			buf_append(b, s + i, n);
			i += n;
			continue;
		} else {
			buf_printf(b, "\\x%02x", c);
		}
		i++;
		if (b->buf_overflow) {
			return -1;
		}
	}
	return b->buf_overflow ? -1 : 0;
}

int console_esc(struct buf *b, const char *s)
{
	return s != NULL ? console_escn(b, s, strlen(s)) : 0;
}

/* s escaped, or a dash. */
static void console_esc_or_dash(struct buf *b, const char *s)
{
	if (s == NULL || s[0] == '\0') {
		buf_puts(b, "<span class=\"muted\">-</span>");
	} else {
		console_esc(b, s);
	}
}

/* Closes a table cell and writes the next one's text, escaped. */
static void console_td(struct buf *b, const char *s)
{
	buf_puts(b, "</td><td>");
	console_esc(b, s);
}

/* console_td, or a dash for no text. */
static void console_td_or_dash(struct buf *b, const char *s)
{
	buf_puts(b, "</td><td>");
	console_esc_or_dash(b, s);
}

/* Appends s percent-encoded for a query string. */
static void console_urlenc(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; s != NULL && *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			buf_append(b, s, 1);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};

			buf_append(b, e, 3);
		}
	}
}

static void console_time(struct buf *b, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char text[48];

	if (ms <= 0 || gmtime_r(&t, &tm) == NULL) {
		buf_puts(b, "<span class=\"muted\">-</span>");
		return;
	}
	/* a <time>, so that a phone's narrow cell does not break it at its
	 * hyphens (console.css) */
	strftime(text, sizeof(text), "<time>%Y-%m-%d %H:%M:%S</time>", &tm);
	buf_puts(b, text);
}

/* A column's bytes escaped (TEXT or BLOB), cut at max with a note. */
static void console_esc_col(struct buf *b, const struct store_row *row, size_t i, size_t max)
{
	const struct store_value *v = &row->sr_cols[i];

	if (i >= row->sr_n || (v->sv_type != STORE_TEXT && v->sv_type != STORE_BLOB)) {
		buf_puts(b, "<span class=\"muted\">(none)</span>");
		return;
	}
	console_escn(b, v->sv_text, v->sv_len < max ? v->sv_len : max);
	if (v->sv_len > max) {
		buf_printf(b, "\n<span class=\"muted\">(cut: %zu of %zu bytes shown)</span>", max,
		           v->sv_len);
	}
}

char *console_query(const struct http_request *req, const char *name)
{
	char *raw = http_query_get(req, name);
	char *v = NULL;

	if (raw != NULL && raw[0] != '\0') {
		v = text_form_decode(raw, strlen(raw));
	}
	free(raw);
	if (v != NULL && v[0] == '\0') {
		free(v);
		v = NULL;
	}
	return v;
}

/* ---- the frame ---- */

static const char *const console_nav[][2] = {
        {"overview", "/console/"},     {"events", "/console/events"},
        {"outbox", "/console/outbox"}, {"rejected", "/console/rejected"},
        {"audit", "/console/audit"},
};

int console_page_begin(struct buf *b, const struct console_ctx *cx, const char *title,
                       const char *here, int refresh_s)
{
	size_t i;

	buf_puts(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
	            "<title>");
	console_esc(b, title);
	buf_puts(b, " · idemhook console</title>"
	            "<link rel=\"stylesheet\" href=\"/console/console.css\">"
	            "<script src=\"/console/console.js\" defer></script>");
	/* console.js reloads a page that waits for something (data-refresh
	 * below) and stops once it ended; without JavaScript the browser
	 * reloads it itself, until the page comes without the wait */
	if (refresh_s > 0) {
		buf_printf(b, "<noscript><meta http-equiv=\"refresh\" content=\"%d\"></noscript>",
		           refresh_s);
	}
	buf_puts(b, "</head>\n<body><header><span class=\"brand\">idemhook</span>");
	for (i = 0; i < sizeof(console_nav) / sizeof(console_nav[0]); i++) {
		buf_printf(b, "<a href=\"%s\"%s>%s</a>", console_nav[i][1],
		           here != NULL && strcmp(here, console_nav[i][0]) == 0 ? " class=\"here\""
		                                                                : "",
		           console_nav[i][0]);
	}
	if (cx != NULL && cx->cx_who != NULL) {
		buf_puts(b, "<span class=\"who\">");
		console_esc(b, cx->cx_who->cw_name);
		buf_printf(b, " (%s)</span>", cx->cx_who->cw_operator ? "operator" : "read-only");
		buf_puts(b, "<form method=\"post\" action=\"/console/logout\">"
		            "<input type=\"hidden\" name=\"csrf\" value=\"");
		console_esc(b, cx->cx_who->cw_csrf);
		buf_puts(b, "\"><button class=\"plain\" type=\"submit\">Log out</button></form>");
	}
	buf_puts(b, "</header>\n<main");
	if (refresh_s > 0) {
		buf_printf(b, " data-refresh=\"%d\"", refresh_s);
	}
	buf_puts(b, ">\n");
	if (cx != NULL && cx->cx_flash != NULL) {
		buf_printf(b, "<p class=\"flash%s\" role=\"status\">",
		           cx->cx_flash_error ? " error" : "");
		console_esc(b, cx->cx_flash);
		buf_puts(b, "</p>\n");
	}
	buf_puts(b, "<h1>");
	console_esc(b, title);
	buf_puts(b, "</h1>\n");
	return b->buf_overflow ? -1 : 0;
}

int console_page_end(struct buf *b)
{
	buf_puts(b, "</main></body></html>\n");
	return b->buf_overflow ? -1 : 0;
}

int console_page_login(struct buf *b, const char *error)
{
	buf_puts(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
	            "<title>Log in · idemhook console</title>"
	            "<link rel=\"stylesheet\" href=\"/console/console.css\"></head>\n<body>"
	            "<main><form class=\"login\" method=\"post\" action=\"/console/login\">"
	            "<h1>idemhook console</h1>");
	if (error != NULL) {
		buf_puts(b, "<p class=\"flash error\" role=\"alert\">");
		console_esc(b, error);
		buf_puts(b, "</p>");
	}
	buf_puts(b, "<label for=\"token\">Operator token</label>"
	            "<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" "
	            "required autofocus><button type=\"submit\">Log in</button></form></main>"
	            "</body></html>\n");
	return b->buf_overflow ? -1 : 0;
}

/* A hidden CSRF field, for a form of the page. */
static void console_csrf_field(struct buf *b, const struct console_ctx *cx)
{
	buf_puts(b, "<input type=\"hidden\" name=\"csrf\" value=\"");
	console_esc(b, cx->cx_who->cw_csrf);
	buf_puts(b, "\">");
}

static int console_operator(const struct console_ctx *cx)
{
	return cx->cx_who != NULL && cx->cx_who->cw_operator;
}

/* ---- overview ---- */

static const char *const console_kinds[TRAFFIC_KINDS] = {"accepted", "duplicate", "failed",
                                                         "rejected", "other"};

/* One provider's last 24 hours as stacked bars, oldest on the left. */
static void console_chart_svg(struct buf *b, const struct traffic_view *tv, size_t p)
{
	const int w = 12;
	const int h = 80;
	uint64_t max = 1;
	size_t i;
	size_t k;

	for (i = 0; i < TRAFFIC_HOURS; i++) {
		uint64_t t = 0;

		for (k = 0; k < TRAFFIC_KINDS; k++) {
			t += tv->tv_counts[p][i][k];
		}
		if (t > max) {
			max = t;
		}
	}
	buf_printf(b,
	           "<svg class=\"chart\" role=\"img\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
	           "%d\"><title>",
	           TRAFFIC_HOURS * w + 20, h + 20, TRAFFIC_HOURS * w + 20, h + 20);
	console_esc(b, tv->tv_name[p]);
	buf_puts(b, ": callbacks per hour, last 24 hours</title>");
	for (i = 0; i < TRAFFIC_HOURS; i++) {
		int x = 10 + (int)(TRAFFIC_HOURS - 1 - i) * w;
		int y = 10 + h;

		for (k = 0; k < TRAFFIC_KINDS; k++) {
			uint64_t n = tv->tv_counts[p][i][k];
			int bh = (int)(n * (uint64_t)h / max);

			if (n == 0) {
				continue;
			}
			if (bh == 0) {
				bh = 1;
			}
			y -= bh;
			buf_printf(
			        b,
			        "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\">"
			        "<title>%" PRIu64 " %s</title></rect>",
			        console_kinds[k], x, y, w - 2, bh, n, console_kinds[k]);
		}
	}
	buf_printf(b,
	           "<text x=\"10\" y=\"%d\">-24h</text><text x=\"%d\" y=\"%d\">now</text>"
	           "<text x=\"%d\" y=\"10\">max %" PRIu64 "/h</text></svg>",
	           h + 19, TRAFFIC_HOURS * w - 10, h + 19, TRAFFIC_HOURS * w - 60, max);
}

static void console_card(struct buf *b, const char *href, const char *label, const char *figure,
                         const char *cls)
{
	buf_printf(b, "<a class=\"card\" href=\"%s\"><div class=\"figure%s%s\">", href,
	           cls != NULL ? " " : "", cls != NULL ? cls : "");
	console_esc(b, figure);
	buf_puts(b, "</div><div class=\"label\">");
	console_esc(b, label);
	buf_puts(b, "</div></a>");
}

static void console_card_int(struct buf *b, const char *href, const char *label, int64_t v,
                             int bad_when_positive)
{
	char text[32];

	snprintf(text, sizeof(text), "%" PRId64, v);
	console_card(b, href, label, text, bad_when_positive && v > 0 ? "bad" : NULL);
}

static void console_ago(char *out, size_t size, int64_t now_ms, int64_t then_ms)
{
	int64_t s = (now_ms - then_ms) / 1000;

	if (then_ms <= 0) {
		snprintf(out, size, "never");
	} else if (s < 120) {
		snprintf(out, size, "%" PRId64 " s ago", s);
	} else if (s < 7200) {
		snprintf(out, size, "%" PRId64 " min ago", s / 60);
	} else {
		snprintf(out, size, "%" PRId64 " h ago", s / 3600);
	}
}

int64_t console_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

unsigned console_wait(const struct console_ctx *cx)
{
	int64_t left;

	if (cx->cx_deadline_ms == 0) {
		return CONSOLE_DB_WAIT_MS;
	}
	left = cx->cx_deadline_ms - console_mono_ms();
	return left > 0 ? (unsigned)left : CONSOLE_DB_WAIT_SPENT;
}

/* The figures the overview and the outbox list read from the database,
 * read on the store's own thread and waited for at most CONSOLE_DB_WAIT_MS
 * (as /metrics reads its gauges): everything here is copied, so a read
 * that outlives its wait writes into nothing of the page's. */
struct console_figures {
	int64_t cf_now_ms;
	int cf_gauges_ok;
	int cf_overview_ok;
	int cf_files_ok;
	struct stats_gauges cf_gauges;
	struct console_db_overview cf_overview;
	struct store_file_stats cf_files;
};

static int console_figures_read(struct store *st, void *arg)
{
	struct console_figures *f = arg;

	f->cf_gauges_ok = stats_gauges(st, f->cf_now_ms, &f->cf_gauges) == 0;
	f->cf_overview_ok = console_db_overview(st, f->cf_now_ms, &f->cf_overview) == 0;
	f->cf_files_ok = store_file_stats(st, &f->cf_files) == 0;
	return 0;
}

/* Fills ret; its _ok flags say what was read. Returns 0, or
 * CONSOLE_DB_LATE when the database did not answer in time (nothing read).
 * The read is a job of its own (store_call_owned), on the thread of the
 * console's reads: /metrics reads its gauges on another. */
static int console_figures_get(const struct console_ctx *cx, struct console_figures *ret)
{
	unsigned wait_ms = console_wait(cx);
	struct console_figures *job;
	int rc;

	memset(ret, 0, sizeof(*ret));
	if (wait_ms == CONSOLE_DB_WAIT_SPENT) {
		return CONSOLE_DB_LATE;
	}
	job = calloc(1, sizeof(*job));
	if (job == NULL) {
		return CONSOLE_DB_LATE;
	}
	job->cf_now_ms = cx->cx_now_ms;
	rc = store_call_owned(cx->cx_store, wait_ms, console_figures_read, job, free);
	if (rc == STORE_CALL_LATE) {
		return CONSOLE_DB_LATE; /* the store's thread frees it */
	}
	if (rc < 0) {
		free(job);
		return CONSOLE_DB_LATE;
	}
	*ret = *job;
	free(job);
	return 0;
}

/* Why figures are missing, as a sentence. */
static const char *console_db_why(int rc)
{
	return rc == CONSOLE_DB_LATE ? "the database did not answer within " CONSOLE_DB_WAIT_TEXT
	                             : "the database could not be read (see the log)";
}

/* A page whose read failed (rc: -1, or CONSOLE_DB_LATE): 503, said
 * plainly, with the navigation; what b held so far is dropped. */
static int console_page_db_failed(struct buf *b, const struct console_ctx *cx, const char *here,
                                  int rc)
{
	buf_finish(b);
	buf_init(b, CONSOLE_PAGE_MAX);
	console_page_begin(b, cx, "Database unavailable", here, 0);
	buf_puts(b, "<p class=\"flash error\" role=\"alert\" id=\"db-unavailable\">"
	            "This page cannot be shown now: ");
	buf_puts(b, console_db_why(rc));
	/* In answer to an action, the message on top says what it changed. */
	buf_puts(b, cx->cx_flash == NULL
	                    ? ". Nothing was changed. Reload the page in a moment; the "
	                    : ". Reload the page in a moment; the ");
	buf_puts(b, "<a href=\"/console/\">overview</a> shows what this receiver knows "
	            "without the database.</p>\n");
	return console_page_end(b) < 0 ? -1 : 503;
}

/* The readiness card while the database does not answer this page but the
 * health probe has not noticed yet. */
#define CONSOLE_NOT_ANSWERING                                                                      \
	"readiness: the database did not answer this page within " CONSOLE_DB_WAIT_TEXT            \
	"; /readyz will follow at the next probe"

/* A card for a figure the database did not give. */
static void console_card_missing(struct buf *b, const char *href, const char *label)
{
	console_card(b, href, label, "unavailable", "warn");
}

int console_page_overview(struct buf *b, const struct console_ctx *cx)
{
	struct traffic_view *tv = calloc(1, sizeof(*tv));
	struct console_figures fig;
	const struct stats_gauges *g = &fig.cf_gauges;
	struct store_stats ss;
	struct metrics_ops mo;
	struct health *health = env_health(cx->cx_env);
	char reason[HEALTH_REASON_MAX];
	char text[HEALTH_REASON_MAX + 32];
	size_t i;
	int late;
	int rc;

	if (tv == NULL) {
		return -1;
	}
	/* The charts come from this receiver's counts in memory: reading a
	 * day of events would cost a scan of them at every refresh. */
	traffic_get(cx->cx_now_ms, tv);
	/* What the database does not give in time is shown as unavailable;
	 * the rest, kept in memory, is shown as ever. */
	late = console_figures_get(cx, &fig);
	metrics_ops_get(&mo);
	console_page_begin(b, cx, "Overview", "overview", 30);
	if (!fig.cf_gauges_ok || !fig.cf_overview_ok || !fig.cf_files_ok) {
		buf_puts(b, "<p class=\"flash error\" role=\"alert\" id=\"db-unavailable\">"
		            "Some figures are unavailable: ");
		buf_puts(b, console_db_why(late < 0 ? late : -1));
		buf_puts(b, ".</p>\n");
	}
	buf_puts(b, "<div class=\"cards\">");
	if (fig.cf_gauges_ok) {
		console_card_int(b, "/console/events?open=1", "open failed events (alerting)",
		                 g->sg_events_failed_open, 1);
		console_card_int(b, "/console/events?outcome=failed&amp;test=1&amp;dismissed=0",
		                 "failed test-mode events (not alerting)",
		                 g->sg_events_failed_test_mode, 0);
	} else {
		console_card_missing(b, "/console/events?open=1", "open failed events (alerting)");
		console_card_missing(b, "/console/events?outcome=failed&amp;test=1&amp;dismissed=0",
		                     "failed test-mode events (not alerting)");
	}
	/* Each card links to the list of exactly what it counts. */
	if (fig.cf_overview_ok) {
		console_card_int(b, "/console/events?parked=1", "parked, waiting for their payment",
		                 fig.cf_overview.ov_parked, 0);
	} else {
		console_card_missing(b, "/console/events?parked=1",
		                     "parked, waiting for their payment");
	}
	if (fig.cf_gauges_ok) {
		console_card_int(b, "/console/outbox?status=dead", "dead letters (outbox)",
		                 g->sg_outbox_dead, 1);
		console_card_int(b, "/console/outbox?status=" CONSOLE_OUTBOX_BACKLOG,
		                 "outbox backlog (pending, delivering, retrying)",
		                 g->sg_outbox_backlog, 0);
	} else {
		console_card_missing(b, "/console/outbox?status=dead", "dead letters (outbox)");
		console_card_missing(b, "/console/outbox?status=" CONSOLE_OUTBOX_BACKLOG,
		                     "outbox backlog (pending, delivering, retrying)");
	}
	snprintf(text, sizeof(text), "%zu", rejects_count_since(cx->cx_now_ms - 3600000LL, NULL));
	console_card(b, "/console/rejected", "rejected callbacks, last hour", text, NULL);
	/* Readiness is the health probe's verdict, which follows a database
	 * that stopped answering only at its next probe: meanwhile this page,
	 * whose own reads went unanswered, says so rather than "ready" next
	 * to cards that say the database did not answer. /readyz is not
	 * changed by it. */
	if (health == NULL) {
		console_card(b, "/console/", "readiness", "starting", "warn");
	} else if (!health_ready(health, reason, sizeof(reason))) {
		/* The figure short, the why in its label, as every card. */
		snprintf(text, sizeof(text), "readiness: %s", reason);
		console_card(b, "/console/", text, "not ready", "bad");
	} else if (late == CONSOLE_DB_LATE) {
		console_card(b, "/console/", CONSOLE_NOT_ANSWERING, "not answering", "bad");
	} else {
		console_card(b, "/console/", "readiness", "ready", "ok");
	}
	if (fig.cf_files_ok) {
		snprintf(text, sizeof(text), "%.1f MB",
		         (double)(fig.cf_files.sf_db_bytes + fig.cf_files.sf_wal_bytes) / 1e6);
		console_card(b, "/console/", "database size (with WAL)", text, NULL);
	} else {
		console_card_missing(b, "/console/", "database size (with WAL)");
	}
	/* A read transaction kept open keeps the WAL from starting over
	 * (docs/operations.md): only while it does. */
	store_get_stats(cx->cx_store, &ss);
	if (ss.ss_wal_held_seconds > 0) {
		char label[128];

		snprintf(text, sizeof(text), "%.0f s", ss.ss_wal_held_seconds);
		snprintf(label, sizeof(label),
		         "WAL held past its bound by a read transaction kept open (%" PRIu64
		         " pages)",
		         ss.ss_wal_pages);
		console_card(b, "/console/", label, text,
		             ss.ss_wal_held_seconds >= 60 ? "bad" : "warn");
	}
	console_ago(text, sizeof(text), cx->cx_now_ms, mo.mo_gc_last_success_s * 1000);
	console_card(b, "/console/", mo.mo_gc_failed > 0 ? "last gc (some failed)" : "last gc",
	             text, mo.mo_gc_failed > 0 ? "warn" : NULL);
	console_ago(text, sizeof(text), cx->cx_now_ms, mo.mo_reconcile_last_success_s * 1000);
	console_card(b, "/console/",
	             mo.mo_reconcile_failed > 0 ? "last reconcile run (some failed)"
	                                        : "last reconcile run",
	             text, mo.mo_reconcile_failed > 0 ? "warn" : NULL);
	if (fig.cf_overview_ok) {
		console_ago(text, sizeof(text), cx->cx_now_ms, fig.cf_overview.ov_audit_last_at);
		console_card(b, "/console/audit", "last operator action", text, NULL);
	} else {
		console_card_missing(b, "/console/audit", "last operator action");
	}
	buf_puts(b, "</div>\n<h2>Outbox by status</h2><table><tr>");
	for (i = 0; i < STATS_OUTBOX_STATUSES; i++) {
		buf_printf(b, "<th class=\"num\"><a href=\"/console/outbox?status=%s\">%s</a></th>",
		           stats_outbox_statuses[i], stats_outbox_statuses[i]);
	}
	buf_puts(b, "</tr><tr>");
	for (i = 0; i < STATS_OUTBOX_STATUSES; i++) {
		if (fig.cf_gauges_ok) {
			buf_printf(b, "<td class=\"num\">%" PRId64 "</td>", g->sg_outbox_rows[i]);
		} else {
			buf_puts(b, "<td class=\"num muted\">unavailable</td>");
		}
	}
	buf_puts(b,
	         "</tr></table>\n<h2>Callbacks by provider (this receiver, since it started)</h2>");
	buf_puts(b, "<table id=\"traffic\"><tr><th>provider</th>");
	for (i = 0; i < TRAFFIC_KINDS - 1; i++) {
		buf_printf(b, "<th class=\"num\">%s, last hour</th>", console_kinds[i]);
	}
	for (i = 0; i < TRAFFIC_KINDS - 1; i++) {
		buf_printf(b, "<th class=\"num\">%s, 24 h</th>", console_kinds[i]);
	}
	buf_puts(b, "</tr>");
	for (i = 0; i < tv->tv_n; i++) {
		uint64_t day[TRAFFIC_KINDS] = {0};
		size_t h;
		size_t k;

		for (h = 0; h < TRAFFIC_HOURS; h++) {
			for (k = 0; k < TRAFFIC_KINDS; k++) {
				day[k] += tv->tv_counts[i][h][k];
			}
		}
		buf_puts(b, "<tr><td><a href=\"/console/events?provider=");
		console_urlenc(b, tv->tv_name[i]);
		buf_puts(b, "\">");
		console_esc(b, tv->tv_name[i]);
		buf_puts(b, "</a></td>");
		for (k = 0; k < TRAFFIC_KINDS - 1; k++) {
			buf_printf(b, "<td class=\"num\">%" PRIu64 "</td>", tv->tv_counts[i][0][k]);
		}
		for (k = 0; k < TRAFFIC_KINDS - 1; k++) {
			buf_printf(b, "<td class=\"num\">%" PRIu64 "</td>", day[k]);
		}
		buf_puts(b, "</tr>");
	}
	if (tv->tv_n == 0) {
		buf_puts(b,
		         "<tr><td colspan=\"9\" class=\"muted\">no callbacks since this receiver "
		         "started</td></tr>");
	}
	buf_puts(b, "</table>\n<div class=\"charts\">");
	for (i = 0; i < tv->tv_n; i++) {
		buf_puts(b, "<figure><figcaption>");
		console_esc(b, tv->tv_name[i]);
		buf_puts(b, "</figcaption>");
		console_chart_svg(b, tv, i);
		buf_puts(b, "</figure>");
	}
	buf_puts(b, "</div>\n");
	rc = console_page_end(b) < 0 ? -1 : 200;
	free(tv);
	return rc;
}

/* ---- events ---- */

struct console_list {
	struct buf *cl_b;
	int64_t cl_n;
	int64_t cl_last_id;
};

/* The cell's class for an outcome: failed is bad, fetching (a thin event
 * acknowledged, its full event not fetched yet) is pending, done is ok. */
static const char *console_outcome_class(const char *outcome)
{
	if (outcome != NULL && strcmp(outcome, "failed") == 0) {
		return "bad";
	}
	if (outcome != NULL && strcmp(outcome, "fetching") == 0) {
		return "warn";
	}
	return "ok";
}

void console_order_href(struct buf *b, const char *order)
{
	/* "." and ".." as a path segment are dot segments: a browser drops or
	 * climbs them when it resolves the link (/console/orders/.. opens
	 * /console/), and percent-encoding does not help, as URL parsers take
	 * %2E for a dot there too. A slash would be %2F in the path, which the
	 * listener refuses (http.c, encoded_slash). The query form is left as
	 * it is. */
	if (strcmp(order, ".") == 0 || strcmp(order, "..") == 0 || strchr(order, '/') != NULL) {
		buf_puts(b, "/console/orders?id=");
	} else {
		buf_puts(b, "/console/orders/");
	}
	console_urlenc(b, order);
}

/* An order id as a link to its page, or a dash. */
static void console_order_link(struct buf *b, const char *order)
{
	if (order == NULL) {
		console_esc_or_dash(b, NULL);
		return;
	}
	buf_puts(b, "<a href=\"");
	console_order_href(b, order);
	buf_puts(b, "\">");
	console_esc(b, order);
	buf_puts(b, "</a>");
}

static int console_events_row(void *arg, const struct store_row *row)
{
	struct console_list *l = arg;
	struct buf *b = l->cl_b;
	const char *outcome = store_row_text(row, 6);

	l->cl_n++;
	l->cl_last_id = store_row_int(row, 0);
	buf_printf(b,
	           "<tr><td class=\"num\"><a href=\"/console/events/%" PRId64 "\">%" PRId64
	           "</a></td><td>",
	           l->cl_last_id, l->cl_last_id);
	console_time(b, store_row_int(row, 1));
	console_td(b, store_row_text(row, 2));
	buf_puts(b, "</td><td class=\"key\">");
	console_esc(b, store_row_text(row, 3));
	console_td(b, store_row_text(row, 4));
	buf_puts(b, "</td><td>");
	console_order_link(b, store_row_text(row, 5));
	buf_printf(b, "</td><td class=\"%s\">", console_outcome_class(outcome));
	console_esc(b, outcome);
	console_td_or_dash(b, store_row_text(row, 7));
	console_td(b, store_row_text(row, 8));
	if (store_row_int(row, 9) != 0) {
		buf_puts(b, " <span class=\"tag\">test mode</span>");
	}
	if (!store_row_is_null(row, 10)) {
		buf_puts(b, " <span class=\"tag\">dismissed</span>");
	}
	if (store_row_int(row, 11) > 0) {
		buf_puts(b, " <span class=\"tag\">reprocessed</span>");
	}
	buf_puts(b, "</td></tr>\n");
	return b->buf_overflow ? -1 : 0;
}

/* "2026-12-04" or "2026-12-04T10:30" (UTC) as ms, or 0. */
static int64_t console_parse_date(const char *s)
{
	struct tm tm;
	const char *end;

	if (s == NULL) {
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M", &tm);
	if (end == NULL || *end != '\0') {
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, "%Y-%m-%d", &tm);
		if (end == NULL || *end != '\0') {
			return 0;
		}
	}
	return (int64_t)timegm(&tm) * 1000;
}

/* A list's ?before= (the id its Older link gives) into *ret (absent: 0,
 * the newest); -1 with why said when it is no id, which would otherwise
 * be read as no cursor and show the newest rows as if they were older. */
static int console_before(const char *text, int64_t *ret, char *why, size_t size)
{
	char *end = NULL;
	long long v;

	*ret = 0;
	if (text == NULL) {
		return 0;
	}
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v <= 0 || text[0] < '0' || text[0] > '9') {
		snprintf(why, size,
		         "before \"%.60s\" is not a row id (the Older link at the foot of a "
		         "list gives one).",
		         text);
		return -1;
	}
	*ret = v;
	return 0;
}

/* The events list's outcomes and sources: any other value would match no
 * event, and is said. */
static const char *const console_event_outcomes[] = {"done", "failed", "fetching"};
static const char *const console_event_sources[] = {"callback", "reconcile"};

static int console_one_of(const char *v, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(v, list[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

/* An instance that is neither configured nor in the events table is a
 * typo, said as such (as idemhook events --provider refuses it); one
 * removed from the file still has its history. A failed read says
 * nothing here: the list's own read fails the page. */
static void console_provider_check(const struct console_ctx *cx, const char *name, char *why,
                                   size_t size)
{
	const struct config *cf = cx->cx_cf;
	struct buf names;
	size_t i;

	if (cf == NULL || config_provider(cf, name) != NULL ||
	    console_db_scope_known(cx->cx_store, cx->cx_now_ms, console_wait(cx), name) != 0) {
		return;
	}
	buf_init(&names, 200);
	for (i = 0; i < cf->cf_n_providers; i++) {
		buf_printf(&names, "%s%s", i > 0 ? ", " : "", cf->cf_providers[i].pc_name);
	}
	snprintf(why, size,
	         "provider \"%.60s\" is not one configured (%.200s) and no event stored has it.",
	         name, names.buf_data != NULL && names.buf_len > 0 ? names.buf_data : "none");
	buf_finish(&names);
}

static const char *const console_event_params[CONSOLE_EVENT_PARAMS] = {
        "provider", "outcome", "reason", "source", "order",     "key",
        "since",    "until",   "open",   "test",   "dismissed", "parked",
};

/* A 0/1 flag of the list (absent: def) into *ret; -1 when it is neither. */
static int console_flag(const char *v, int def, int *ret)
{
	if (v == NULL) {
		*ret = def;
	} else if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0) {
		*ret = v[0] == '1';
	} else {
		return -1;
	}
	return 0;
}

void console_events_query_load(struct console_events_query *q, const struct console_ctx *cx,
                               const struct http_request *req)
{
	struct console_db_filter *f = &q->eq_f;
	char *const *v = q->eq_v;
	static const size_t flags[] = {8, 9, 10, 11}; /* open, test, dismissed, parked */
	static const int defaults[] = {0, -1, -1, 0};
	int *const flag_of[] = {&f->ef_open, &f->ef_test_mode, &f->ef_dismissed, &f->ef_parked};
	size_t bad = 0;
	size_t i;

	memset(q, 0, sizeof(*q));
	for (i = 0; i < CONSOLE_EVENT_PARAMS; i++) {
		q->eq_v[i] = console_query(req, console_event_params[i]);
	}
	console_db_filter_init(f);
	f->ef_provider = v[0];
	f->ef_outcome = v[1];
	f->ef_reason = v[2];
	f->ef_source = v[3];
	f->ef_order = v[4];
	f->ef_key_prefix = v[5];
	f->ef_since_ms = console_parse_date(v[6]);
	f->ef_until_ms = console_parse_date(v[7]);
	for (i = 0; i < sizeof(flags) / sizeof(flags[0]) && bad == 0; i++) {
		if (console_flag(v[flags[i]], defaults[i], flag_of[i]) < 0) {
			bad = flags[i];
		}
	}
	/* A value not understood would be left out, and the list show more
	 * than was asked for, or match nothing and read as "no events":
	 * said, and nothing listed. */
	if (f->ef_outcome != NULL && !console_one_of(f->ef_outcome, console_event_outcomes, 3)) {
		snprintf(q->eq_why, sizeof(q->eq_why),
		         "outcome \"%.60s\" is not an outcome (done, failed, fetching).",
		         f->ef_outcome);
	} else if (f->ef_source != NULL &&
	           !console_one_of(f->ef_source, console_event_sources, 2)) {
		snprintf(q->eq_why, sizeof(q->eq_why),
		         "source \"%.60s\" is not a source (callback, reconcile).", f->ef_source);
	} else if (bad != 0) {
		snprintf(q->eq_why, sizeof(q->eq_why), "%s is 0 or 1, not \"%.60s\".",
		         console_event_params[bad], v[bad]);
	} else if ((v[6] != NULL && f->ef_since_ms == 0) || (v[7] != NULL && f->ef_until_ms == 0)) {
		int since = v[6] != NULL && f->ef_since_ms == 0;

		snprintf(q->eq_why, sizeof(q->eq_why),
		         "%s \"%.60s\" is not a UTC date or time (2026-12-04 or 2026-12-04T10:30).",
		         since ? "since" : "until", since ? v[6] : v[7]);
	} else if (f->ef_open && f->ef_test_mode == 1) {
		snprintf(q->eq_why, sizeof(q->eq_why),
		         "These filters cannot both hold: open failures are live events, and test "
		         "mode = 1 selects test-mode ones. Failed test-mode events are listed with "
		         "outcome = failed and test mode = 1.");
	} else if (f->ef_open && f->ef_dismissed == 1) {
		snprintf(q->eq_why, sizeof(q->eq_why),
		         "These filters cannot both hold: open failures are not dismissed, and "
		         "dismissed = 1 selects dismissed ones.");
	} else if (f->ef_open && f->ef_outcome != NULL && strcmp(f->ef_outcome, "failed") != 0) {
		snprintf(q->eq_why, sizeof(q->eq_why),
		         "These filters cannot both hold: open failures are failed events, and "
		         "outcome = %.20s selects others.",
		         f->ef_outcome);
	} else if (f->ef_since_ms > 0 && f->ef_until_ms > 0 && f->ef_since_ms >= f->ef_until_ms) {
		snprintf(q->eq_why, sizeof(q->eq_why),
		         "These filters cannot both hold: since is not before until.");
	} else if (f->ef_provider != NULL) {
		console_provider_check(cx, f->ef_provider, q->eq_why, sizeof(q->eq_why));
	}
}

void console_events_query_finish(struct console_events_query *q)
{
	size_t i;

	for (i = 0; i < CONSOLE_EVENT_PARAMS; i++) {
		free(q->eq_v[i]);
		q->eq_v[i] = NULL;
	}
}

size_t console_events_query_string(struct buf *b, const struct console_events_query *q,
                                   const char *sep)
{
	size_t n = 0;
	size_t i;

	for (i = 0; i < CONSOLE_EVENT_PARAMS; i++) {
		if (q->eq_v[i] != NULL) {
			buf_printf(b, "%s%s=", n > 0 ? sep : "", console_event_params[i]);
			console_urlenc(b, q->eq_v[i]);
			n++;
		}
	}
	return n;
}

size_t console_events_href(struct buf *b, const struct console_events_query *q, const char *sep)
{
	size_t i;

	buf_puts(b, "/console/events");
	for (i = 0; i < CONSOLE_EVENT_PARAMS && q->eq_v[i] == NULL; i++) {
	}
	if (i == CONSOLE_EVENT_PARAMS) {
		return 0;
	}
	buf_puts(b, "?");
	return console_events_query_string(b, q, sep);
}

const char *console_events_dismiss_what(const struct console_events_query *q)
{
	const struct console_db_filter *f = &q->eq_f;
	int fetching = f->ef_outcome != NULL && strcmp(f->ef_outcome, "fetching") == 0;

	if (q->eq_why[0] != '\0' || f->ef_dismissed == 1 ||
	    (f->ef_outcome != NULL && !fetching && strcmp(f->ef_outcome, "failed") != 0)) {
		return NULL;
	}
	if (fetching) {
		return f->ef_test_mode == 1 ? "test-mode thin event(s) waiting for their full event"
		                            : "thin event(s) waiting for their full event";
	}
	return f->ef_test_mode == 1 ? "failed test-mode event(s)" : "open failed event(s)";
}

static void console_select(struct buf *b, const char *name, const char *value,
                           const char *const *options, size_t n)
{
	size_t i;

	buf_printf(b, "<select name=\"%s\" id=\"f-%s\"><option value=\"\">any</option>", name,
	           name);
	for (i = 0; i < n; i++) {
		buf_printf(b, "<option%s>%s</option>",
		           value != NULL && strcmp(value, options[i]) == 0 ? " selected" : "",
		           options[i]);
	}
	buf_puts(b, "</select>");
}

static void console_text_input(struct buf *b, const char *name, const char *value, const char *type)
{
	buf_printf(b, "<input name=\"%s\" id=\"f-%s\" type=\"%s\" value=\"", name, name, type);
	console_esc(b, value);
	buf_puts(b, "\">");
}

/* The bulk dismiss form for the list's filters: the count of what it
 * would take, shown and sent back as the confirmation (console.c's
 * console_dismiss_all refuses when it changed). Operators only; nothing
 * when nothing matches. Returns 0, -1 (a store failure) or CONSOLE_DB_LATE. */
static int console_dismiss_all_form(struct buf *b, const struct console_ctx *cx,
                                    const struct console_events_query *q)
{
	const char *what = console_events_dismiss_what(q);
	int64_t count = 0;
	struct buf list;
	int rc;

	if (!console_operator(cx) || what == NULL) {
		return 0;
	}
	rc = console_db_dismiss_count_within(cx->cx_store, cx->cx_now_ms, console_wait(cx),
	                                     &q->eq_f, &count);
	if (rc < 0) {
		return rc;
	}
	if (count == 0) {
		return 0;
	}
	/* the filters as the list's query, which the action reads back */
	buf_init(&list, CONSOLE_PAGE_MAX);
	console_events_query_string(&list, q, "&");
	buf_printf(
	        b,
	        "<div class=\"actions\"><form method=\"post\" action=\"/console/events/dismiss\" "
	        "data-confirm=\"Dismiss %" PRId64 " %s?\"><input type=\"hidden\" name=\"list\" "
	        "value=\"",
	        count, what);
	console_esc(b, list.buf_data != NULL ? list.buf_data : "");
	buf_finish(&list);
	buf_printf(b,
	           "\"><input type=\"hidden\" name=\"expect\" value=\"%" PRId64 "\">"
	           "<label>reason (required, up to %d characters)<br>"
	           "<input name=\"reason\" id=\"dismiss-all-reason\" required maxlength=\"%d\" "
	           "size=\"40\"></label>",
	           count, CONSOLE_DB_REASON_MAX, CONSOLE_DB_REASON_MAX);
	console_csrf_field(b, cx);
	buf_printf(b,
	           "<button type=\"submit\" class=\"danger\" id=\"dismiss-all\">Dismiss %" PRId64
	           " %s</button></form><p class=\"muted\">The events of these filters that a "
	           "dismissal takes: %s, not dismissed yet, %s. Each is dismissed and audited as "
	           "from its own page; none is unless %" PRId64 " still match.</p></div>\n",
	           count, what,
	           q->eq_f.ef_outcome != NULL && strcmp(q->eq_f.ef_outcome, "fetching") == 0
	                   ? "waiting for their full event"
	                   : "failed",
	           q->eq_f.ef_test_mode == 1 ? "test-mode ones"
	                                     : "live ones (test mode = 1: the test-mode ones)",
	           count);
	return b->buf_overflow ? -1 : 0;
}

int console_page_events(struct buf *b, const struct console_ctx *cx, const struct http_request *req)
{
	static const char *const tri[] = {"0", "1"};
	struct console_events_query q;
	char *const *v = q.eq_v;
	const struct console_db_filter *f = &q.eq_f;
	struct console_list l = {b, 0, 0};
	char *before_text = console_query(req, "before");
	int64_t before = 0;
	int bad_before = 0;
	size_t i;
	int rc = -1;

	console_events_query_load(&q, cx, req);
	if (q.eq_why[0] == '\0' &&
	    console_before(before_text, &before, q.eq_why, sizeof(q.eq_why)) < 0) {
		bad_before = 1;
	}
	console_page_begin(b, cx, "Events", "events", 0);
	buf_puts(b, "<form class=\"filters\" method=\"get\" action=\"/console/events\">"
	            "<label>provider<select name=\"provider\" id=\"f-provider\">"
	            "<option value=\"\">any</option>");
	for (i = 0; cx->cx_cf != NULL && i < cx->cx_cf->cf_n_providers; i++) {
		const char *name = cx->cx_cf->cf_providers[i].pc_name;

		buf_printf(b, "<option%s>",
		           v[0] != NULL && strcmp(v[0], name) == 0 ? " selected" : "");
		console_esc(b, name);
		buf_puts(b, "</option>");
	}
	buf_puts(b, "</select></label><label>outcome");
	console_select(b, "outcome", v[1], console_event_outcomes, 3);
	buf_puts(b, "</label><label>reason or effect");
	console_text_input(b, "reason", v[2], "text");
	buf_puts(b, "</label><label>source");
	console_select(b, "source", v[3], console_event_sources, 2);
	buf_puts(b, "</label><label>order");
	console_text_input(b, "order", v[4], "text");
	buf_puts(b, "</label><label>key prefix");
	console_text_input(b, "key", v[5], "text");
	buf_puts(b, "</label><label>since (UTC)");
	console_text_input(b, "since", v[6], "datetime-local");
	buf_puts(b, "</label><label>until (UTC)");
	console_text_input(b, "until", v[7], "datetime-local");
	buf_puts(b, "</label><label>test mode (1 = only)");
	console_select(b, "test", v[9], tri, 2);
	buf_puts(b, "</label><label>dismissed (1 = only)");
	console_select(b, "dismissed", v[10], tri, 2);
	buf_printf(b,
	           "</label><label>open failures only<input type=\"checkbox\" name=\"open\" "
	           "value=\"1\"%s></label><label>parked, waiting for their payment<input "
	           "type=\"checkbox\" name=\"parked\" value=\"1\"%s></label>"
	           "<button type=\"submit\">Filter</button></form>\n",
	           f->ef_open ? " checked" : "", f->ef_parked ? " checked" : "");
	/* Filters that cannot all hold list nothing: said, not shown as an
	 * empty list that reads as "no such events"; a cursor that is no row
	 * id is no filter to change, the newest events are where to start. */
	if (q.eq_why[0] != '\0') {
		buf_puts(b, "<p class=\"flash error\" role=\"alert\" id=\"filters-conflict\">");
		console_esc(b, q.eq_why);
		if (bad_before) {
			buf_puts(b, " Nothing listed; <a href=\"");
			console_events_href(b, &q, "&amp;");
			buf_puts(b, "\">Newest</a> starts from the newest events these filters "
			            "match.</p>\n");
		} else {
			buf_puts(b, " No event can match; change the filters.</p>\n");
		}
	} else if ((rc = console_dismiss_all_form(b, cx, &q)) < 0) {
		rc = console_page_db_failed(b, cx, "events", rc);
		goto out;
	}
	buf_puts(b, "<table id=\"events\"><tr><th class=\"num\">id</th><th>received (UTC)</th>"
	            "<th>provider</th><th>key</th><th>kind</th><th>order</th><th>outcome</th>"
	            "<th>reason / effect</th><th>source</th></tr>\n");
	if (q.eq_why[0] == '\0' &&
	    (rc = console_db_events(cx->cx_store, cx->cx_now_ms, console_wait(cx), f, before,
	                            CONSOLE_LIST_LIMIT, console_events_row, &l)) < 0) {
		rc = console_page_db_failed(b, cx, "events", rc);
		goto out;
	}
	if (l.cl_n == 0) {
		buf_printf(b, "<tr><td colspan=\"9\" class=\"muted\">%s</td></tr>",
		           bad_before            ? "no events: the before above is no row id"
		           : q.eq_why[0] != '\0' ? "no events: the filters above cannot match any"
		                                 : "no events");
	}
	buf_puts(b, "</table>\n<p class=\"pager\">");
	if (before > 0) {
		buf_puts(b, "<a href=\"");
		console_events_href(b, &q, "&amp;");
		buf_puts(b, "\">Newest</a> ");
	}
	if (l.cl_n == CONSOLE_LIST_LIMIT) {
		size_t n;

		buf_puts(b, "<a rel=\"next\" href=\"");
		n = console_events_href(b, &q, "&amp;");
		buf_printf(b, "%sbefore=%" PRId64 "\">Older</a>", n > 0 ? "&amp;" : "?",
		           l.cl_last_id);
	}
	buf_puts(b, "</p>\n");
	rc = console_page_end(b) < 0 ? -1 : 200;
out:
	console_events_query_finish(&q);
	free(before_text);
	return rc;
}

/* ---- one event ---- */

struct console_event_page {
	const struct console_ctx *ep_cx;
	struct buf *ep_b;
	int ep_found;
	/* what finds the request's capture, after the row's read */
	char *ep_scope;
	char *ep_key;
	int64_t ep_received_ms;
};

static void console_field(struct buf *b, const char *name, const char *value)
{
	buf_printf(b, "<dt>%s</dt><dd>", name);
	console_esc_or_dash(b, value);
	buf_puts(b, "</dd>");
}

static void console_field_time(struct buf *b, const char *name, int64_t ms)
{
	buf_printf(b, "<dt>%s</dt><dd>", name);
	console_time(b, ms);
	buf_puts(b, "</dd>");
}

static int console_history_row(void *arg, const struct console_db_audit_row *r)
{
	struct buf *b = arg;

	buf_puts(b, "<tr><td>");
	console_time(b, r->ar_at);
	console_td(b, r->ar_actor);
	console_td(b, r->ar_action);
	console_td_or_dash(b, r->ar_reason);
	console_td(b, r->ar_result);
	buf_puts(b, "</td></tr>\n");
	return 0;
}

/* The payload as indented JSON when it parses as JSON, else a note; cut
 * at CONSOLE_RAW_SHOWN bytes of the indented text, as the raw view is. */
static void console_pretty(struct buf *b, const struct store_row *row, size_t i)
{
	const struct store_value *v = &row->sr_cols[i];
	cJSON *root;
	char *text;
	size_t len;
	size_t shown;

	if ((v->sv_type != STORE_TEXT && v->sv_type != STORE_BLOB) ||
	    v->sv_len > CONSOLE_PRETTY_MAX) {
		buf_puts(b, "<p class=\"muted\">(not shown pretty-printed)</p>");
		return;
	}
	root = cJSON_ParseWithLength(v->sv_text, v->sv_len);
	if (root == NULL) {
		buf_puts(b, "<p class=\"muted\">(not JSON: see the raw payload)</p>");
		return;
	}
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (text == NULL) {
		return;
	}
	len = strlen(text);
	shown = len;
	if (len > CONSOLE_RAW_SHOWN) {
		/* At a character's start, so the cut shows no broken bytes. */
		shown = CONSOLE_RAW_SHOWN;
		while (shown > 0 && ((unsigned char)text[shown] & 0xc0) == 0x80) {
			shown--;
		}
	}
	buf_puts(b, "<pre id=\"payload-pretty\">");
	console_escn(b, text, shown);
	if (shown < len) {
		buf_printf(b,
		           "\n<span class=\"muted\">(cut: %zu of %zu bytes of the pretty-printed "
		           "payload shown)</span>",
		           shown, len);
	}
	buf_puts(b, "</pre>");
	free(text);
}

static int console_event_row(void *arg, const struct store_row *row)
{
	struct console_event_page *ep = arg;
	const struct console_ctx *cx = ep->ep_cx;
	struct buf *b = ep->ep_b;
	int64_t id = store_row_int(row, 0);
	const char *outcome = store_row_text(row, 12);
	int failed = outcome != NULL && strcmp(outcome, "failed") == 0;
	int fetching = outcome != NULL && strcmp(outcome, "fetching") == 0;
	int dismissed = !store_row_is_null(row, 20);
	char title[64];

	ep->ep_found = 1;
	ep->ep_scope = store_row_text(row, 1) != NULL ? strdup(store_row_text(row, 1)) : NULL;
	ep->ep_key = store_row_text(row, 2) != NULL ? strdup(store_row_text(row, 2)) : NULL;
	ep->ep_received_ms = store_row_int(row, 15);
	snprintf(title, sizeof(title), "Event %" PRId64, id);
	console_page_begin(b, cx, title, "events", 0);
	buf_puts(b, "<dl class=\"fields\">");
	console_field(b, "provider", store_row_text(row, 1));
	console_field(b, "key", store_row_text(row, 2));
	console_field(b, "type", store_row_text(row, 3));
	console_field(b, "kind", store_row_text(row, 4));
	buf_puts(b, "<dt>order</dt><dd>");
	console_order_link(b, store_row_text(row, 5));
	buf_puts(b, "</dd>");
	console_field(b, "payment ref", store_row_text(row, 6));
	console_field(b, "refund ref", store_row_text(row, 7));
	buf_puts(b, "<dt>amount</dt><dd>");
	if (store_row_is_null(row, 8)) {
		console_esc_or_dash(b, NULL);
	} else {
		buf_printf(b, "%" PRId64 " ", store_row_int(row, 8));
		console_esc(b, store_row_text(row, 9));
		if (store_row_int(row, 10)) {
			buf_puts(b, " (refunded total so far)");
		}
	}
	buf_printf(b, "</dd><dt>outcome</dt><dd class=\"%s\">", console_outcome_class(outcome));
	console_esc(b, outcome);
	if (fetching && dismissed) {
		buf_puts(b, " (a thin event: acknowledged, its full event never fetched; "
		            "dismissed, so no longer asked for)");
	} else if (fetching) {
		buf_puts(b, " (a thin event: acknowledged, its full event not fetched from the "
		            "provider yet)");
	}
	buf_puts(b, "</dd>");
	console_field(b, "effect", store_row_text(row, 13));
	/* A thin event's account, which its fetch names (Stripe-Context). */
	if (store_row_text(row, 29) != NULL) {
		buf_puts(b, "<dt>context</dt><dd id=\"context\">");
		console_esc(b, store_row_text(row, 29));
		buf_puts(b, " <span class=\"muted\">(the account the event happened in; its "
		            "fetch names it in Stripe-Context)</span></dd>");
	}
	console_field(b, "reason", store_row_text(row, 14));
	console_field(b, "source", store_row_text(row, 18));
	console_field(b, "test mode", store_row_int(row, 19) ? "yes (never alerts)" : "no");
	console_field_time(b, "received (UTC)", store_row_int(row, 15));
	console_field_time(b, "processed (UTC)", store_row_int(row, 16));
	buf_printf(b, "<dt>reprocessed</dt><dd>%" PRId64 " time(s)</dd>", store_row_int(row, 17));
	if (dismissed) {
		console_field_time(b, "dismissed (UTC)", store_row_int(row, 20));
		console_field(b, "dismissed by", store_row_text(row, 21));
		console_field(b, "dismiss reason", store_row_text(row, 22));
	}
	{
		uint32_t dups = 0;
		int64_t last_ms = 0;

		/* Counted in this receiver's memory since it started (dupcount.h). */
		buf_puts(b, "<dt>duplicates answered</dt><dd id=\"duplicates\">");
		if (dupcount_get(store_row_text(row, 1), store_row_text(row, 2), &dups, &last_ms)) {
			buf_printf(b, "%" PRIu32 " by this receiver since it started, the last at ",
			           dups);
			console_time(b, last_ms);
			buf_puts(b, " UTC");
		} else {
			buf_puts(b, "none by this receiver since it started");
		}
		buf_puts(b, " <span class=\"muted\">(counted in memory per receiver; "
		            "idemhook_duplicates_absorbed_total counts every one per provider)"
		            "</span></dd>");
	}
	buf_puts(b, "</dl>\n");
	/* A failed event may be reprocessed; it and a thin event still
	 * waiting for its full event (Stripe no longer has it) may be closed. */
	if ((failed || (fetching && !dismissed)) && console_operator(cx)) {
		buf_puts(b, "<div class=\"actions\">");
		if (failed) {
			buf_printf(b,
			           "<form method=\"post\" action=\"/console/events/%" PRId64
			           "/reprocess\" "
			           "data-confirm=\"Run this event through the business rules "
			           "again?\">",
			           id);
			console_csrf_field(b, cx);
			buf_puts(b, "<button type=\"submit\" id=\"reprocess\">Reprocess</button>"
			            "</form>");
		}
		if (!dismissed) {
			buf_printf(b,
			           "<form method=\"post\" action=\"/console/events/%" PRId64
			           "/dismiss\"><label>reason (required, up to %d characters)<br>"
			           "<input name=\"reason\" id=\"dismiss-reason\" required "
			           "maxlength=\"%d\" size=\"40\"></label>",
			           id, CONSOLE_DB_REASON_MAX, CONSOLE_DB_REASON_MAX);
			console_csrf_field(b, cx);
			buf_puts(b,
			         "<button type=\"submit\" class=\"danger\" id=\"dismiss\">Dismiss"
			         "</button></form>");
		}
		buf_puts(b, "</div>\n");
	}
	buf_puts(b, "<h2>Payload</h2>");
	console_pretty(b, row, 11);
	buf_puts(b, "<h3>Raw</h3><pre id=\"payload-raw\">");
	console_esc_col(b, row, 11, CONSOLE_RAW_SHOWN);
	buf_puts(b, "</pre>\n<h2>Stored reply (replayed to duplicates)</h2><dl class=\"fields\">");
	if (store_row_is_null(row, 23)) {
		buf_puts(b, "<dt>record</dt><dd class=\"muted\">gone (expired and "
		            "collected)</dd></dl>");
	} else {
		console_field(b, "record status", store_row_text(row, 23));
		buf_printf(b, "<dt>status</dt><dd>%" PRId64 "</dd>", store_row_int(row, 24));
		console_field(b, "content type", store_row_text(row, 25));
		console_field(b, "headers", store_row_text(row, 26));
		console_field_time(b, "updated (UTC)", store_row_int(row, 28));
		buf_puts(b, "</dl><pre id=\"reply-body\">");
		console_esc_col(b, row, 27, CONSOLE_RAW_SHOWN);
		buf_puts(b, "</pre>");
	}
	return 1;
}

static int console_not_found(struct buf *b, const struct console_ctx *cx, const char *here,
                             const char *what)
{
	console_page_begin(b, cx, "Not found", here, 0);
	buf_puts(b, "<p>");
	console_esc(b, what);
	buf_puts(b, "</p>");
	return console_page_end(b) < 0 ? -1 : 404;
}

/* Header values shown as "(redacted)": they may carry a credential. */
static int console_header_secret(const char *name)
{
	return strcasecmp(name, "Authorization") == 0 ||
	       strcasecmp(name, "Proxy-Authorization") == 0 || strcasecmp(name, "Cookie") == 0;
}

/* The request's headers, where a capture file holds the request (capture.h). */
static void console_request_headers(struct buf *b, const struct console_ctx *cx,
                                    const struct console_event_page *ep)
{
	struct capture_record rec;
	char name[CAPTURE_PROVIDER_MAX + 64];
	char err[200];
	size_t i;
	int rc;

	buf_puts(b, "<h2>Request headers</h2>");
	memset(&rec, 0, sizeof(rec));
	rc = capture_find(cx->cx_cf, ep->ep_scope, ep->ep_received_ms, ep->ep_key, &rec, name,
	                  sizeof(name), err, sizeof(err));
	if (rc < 0) {
		buf_puts(b, "<p class=\"bad\" id=\"request-headers\">The capture directory cannot "
		            "be read: ");
		console_esc(b, err);
		buf_puts(b, "</p>\n");
		return;
	}
	if (rc == 0) {
		buf_puts(b,
		         "<p class=\"muted\" id=\"request-headers\">No capture holds this request "
		         "([capture] mode is off or rejected, the request was not captured, or its "
		         "file expired).</p>\n");
		return;
	}
	buf_puts(b, "<p class=\"muted\">From the capture <code>");
	console_esc(b, name);
	buf_puts(b, "</code>; <code>idemhook replay</code> feeds it back.</p>"
	            "<table id=\"request-headers\"><tr><th>name</th><th>value</th></tr>\n<tr><td>"
	            "(request line)</td><td>");
	console_esc(b, rec.cr_req.hr_method);
	buf_puts(b, " ");
	console_esc(b, rec.cr_req.hr_url != NULL ? rec.cr_req.hr_url : rec.cr_req.hr_path);
	buf_puts(b, "</td></tr>\n");
	for (i = 0; i < rec.cr_req.hr_n_headers; i++) {
		const struct http_header *h = &rec.cr_req.hr_headers[i];

		buf_puts(b, "<tr><td>");
		console_esc(b, h->hh_name);
		buf_puts(b, "</td><td>");
		if (console_header_secret(h->hh_name)) {
			buf_puts(b, "<span class=\"muted\">(redacted)</span>");
		} else {
			console_esc(b, h->hh_value);
		}
		buf_puts(b, "</td></tr>\n");
	}
	buf_puts(b, "</table>\n");
	capture_record_finish(&rec);
}

int console_page_event(struct buf *b, const struct console_ctx *cx, int64_t id)
{
	struct console_event_page ep = {cx, b, 0, NULL, NULL, 0};
	char target[40];

	int rc;

	rc = console_db_event(cx->cx_store, cx->cx_now_ms, console_wait(cx), id, console_event_row,
	                      &ep);
	if (rc < 0) {
		free(ep.ep_scope);
		free(ep.ep_key);
		return console_page_db_failed(b, cx, "events", rc);
	}
	if (!ep.ep_found) {
		return console_not_found(b, cx, "events", "No such event.");
	}
	/* Files, after the row's read transaction has ended. */
	console_request_headers(b, cx, &ep);
	free(ep.ep_scope);
	free(ep.ep_key);
	/* After the event's own read: one read transaction at a time. */
	buf_puts(b, "\n<h2>Operator history</h2><table id=\"history\"><tr><th>at (UTC)</th>"
	            "<th>who</th><th>action</th><th>reason</th><th>result</th></tr>");
	snprintf(target, sizeof(target), "event:%" PRId64, id);
	rc = console_db_audit_for(cx->cx_store, cx->cx_now_ms, console_wait(cx), target, 100,
	                          console_history_row, b);
	if (rc < 0) {
		return console_page_db_failed(b, cx, "events", rc);
	}
	buf_puts(b, "</table>\n");
	return console_page_end(b) < 0 ? -1 : 200;
}

/* ---- one order ---- */

struct console_order_page {
	const struct console_ctx *op_cx;
	struct buf *op_b;
	int op_found;
	int op_running; /* a reconcile run of it is under way: the page reloads itself */
};

static int console_order_row(void *arg, const struct store_row *row)
{
	struct console_order_page *op = arg;
	struct buf *b = op->op_b;
	char title[300];
	char n[64];

	op->op_found = 1;
	snprintf(title, sizeof(title), "Order %s", store_row_text(row, 0));
	console_page_begin(b, op->op_cx, title, NULL, op->op_running ? CONSOLE_RUN_REFRESH_S : 0);
	buf_puts(b, "<dl class=\"fields\">");
	snprintf(n, sizeof(n), "%" PRId64 " ", store_row_int(row, 1));
	buf_puts(b, "<dt>amount</dt><dd>");
	console_esc(b, n);
	console_esc(b, store_row_text(row, 2));
	buf_puts(b, "</dd>");
	console_field(b, "status", store_row_text(row, 3));
	snprintf(n, sizeof(n), "%" PRId64, store_row_int(row, 4));
	console_field(b, "refunded", n);
	snprintf(n, sizeof(n), "%" PRId64, store_row_int(row, 14));
	console_field(b, "disputed", n);
	snprintf(n, sizeof(n), "%" PRId64, store_row_int(row, 15));
	console_field(b, "charged back", n);
	snprintf(n, sizeof(n), "%" PRId64, store_row_int(row, 17));
	console_field(b, "points", n);
	console_field(b, "customer", store_row_text(row, 5));
	console_field(b, "provider", store_row_text(row, 6));
	console_field(b, "payment ref", store_row_text(row, 7));
	console_field(b, "fulfillment", store_row_text(row, 8));
	console_field(b, "needs operator", store_row_int(row, 9) ? "yes" : "no");
	console_field(b, "API client", store_row_text(row, 16));
	console_field_time(b, "created (UTC)", store_row_int(row, 10));
	console_field_time(b, "paid (UTC)", store_row_int(row, 11));
	console_field_time(b, "refunded (UTC)", store_row_int(row, 12));
	console_field_time(b, "updated (UTC)", store_row_int(row, 13));
	buf_puts(b, "</dl>\n");
	return 1;
}

static int console_timeline_row(void *arg, const struct store_row *row)
{
	struct buf *b = arg;
	const char *what = store_row_text(row, 1);

	buf_puts(b, "<tr><td>");
	console_time(b, store_row_int(row, 0));
	console_td(b, what);
	buf_puts(b, "</td><td>");
	if (what != NULL && (strcmp(what, "event") == 0 || strcmp(what, "outbox") == 0)) {
		buf_printf(b, "<a href=\"/console/%s/%" PRId64 "\">",
		           strcmp(what, "event") == 0 ? "events" : "outbox", store_row_int(row, 2));
		console_esc(b, store_row_text(row, 3));
		buf_puts(b, "</a>");
	} else {
		console_esc(b, store_row_text(row, 3));
	}
	console_td_or_dash(b, store_row_text(row, 4));
	buf_puts(b, "</td></tr>\n");
	return b->buf_overflow ? -1 : 0;
}

/* The next attempt of an outbox row of status: only a row that waits for
 * one (pending, retry_wait) has it. A dead, cancelled or succeeded row
 * keeps the time its last attempt was due, which is no next attempt, and
 * a row delivering is being attempted now: "-", as `idemhook outbox`
 * shows them. */
static void console_next_attempt(struct buf *b, const char *status, int64_t ms)
{
	int waiting = status != NULL &&
	              (strcmp(status, "pending") == 0 || strcmp(status, "retry_wait") == 0);

	console_time(b, waiting ? ms : 0);
}

struct console_outbox_rows {
	const struct console_ctx *or_cx;
	struct buf *or_b;
	int64_t or_n;
	int64_t or_last_id;
	int or_attempts; /* collect the ids, for their attempts after (the order page) */
	int64_t or_ids[CONSOLE_ORDER_OUTBOX_MAX];
	size_t or_n_ids;
};

static int console_attempt_row(void *arg, const struct store_row *row)
{
	struct buf *b = arg;
	int counted =
	        outbox_attempt_counted(store_row_is_null(row, 3) ? 0 : (long)store_row_int(row, 3),
	                               store_row_text(row, 4));
	char label[OUTBOX_LABEL_MAX];

	/* A call given back is not counted: the next one repeats its number,
	 * so its ordinal (N.K) tells the two apart. */
	outbox_attempt_label(label, sizeof(label), store_row_int(row, 1), store_row_int(row, 7),
	                     counted);
	buf_printf(b, "<tr><td class=\"num\">%s</td><td class=\"num\">%" PRId64, label,
	           store_row_int(row, 1));
	if (!counted) {
		buf_puts(b, " <span class=\"muted\">not counted</span>");
	}
	buf_puts(b, "</td><td>");
	console_time(b, store_row_int(row, 2));
	buf_puts(b, "</td><td class=\"num\">");
	/* No latency: a call a stop without a clean shutdown cut, whose end
	 * (and answer, if any) is not known. */
	if (store_row_is_null(row, 3) && store_row_is_null(row, 5)) {
		buf_puts(b, "<span class=\"bad\">unknown</span>");
	} else if (store_row_is_null(row, 3)) {
		buf_puts(b, "<span class=\"bad\">no answer</span>");
	} else {
		buf_printf(b, "%" PRId64, store_row_int(row, 3));
	}
	buf_puts(b, "</td><td class=\"num\">");
	if (store_row_is_null(row, 5)) {
		console_esc_or_dash(b, NULL);
	} else {
		buf_printf(b, "%" PRId64 " ms", store_row_int(row, 5));
	}
	buf_puts(b, "</td><td>");
	console_esc_or_dash(b, store_row_text(row, 4));
	buf_puts(b, "</td><td class=\"key\">");
	console_esc_or_dash(b, store_row_text(row, 6));
	buf_puts(b, "</td></tr>\n");
	return b->buf_overflow ? -1 : 0;
}

static const char console_attempts_head[] =
        "<table class=\"attempts\"><tr><th class=\"num\">#</th><th class=\"num\">attempt</th>"
        "<th>at (UTC)</th>"
        "<th class=\"num\">HTTP</th><th class=\"num\">latency</th><th>error</th>"
        "<th>response</th></tr>\n";

/* The marker of a 'delivering' row whose call has ended but whose outcome
 * the store refused to record: this process's worker keeps it and writes
 * it again (idemhook_outbox_outcomes_unrecorded). The database cannot say
 * so; the worker in this process can. */
static void console_kept_marker(struct buf *b, const struct console_ctx *cx, int64_t id,
                                const char *status)
{
	struct outbound_kept k;

	if (status == NULL || strcmp(status, "delivering") != 0 ||
	    !env_outbox_kept(cx->cx_env, id, &k)) {
		return;
	}
	buf_printf(b, " <span class=\"bad\" id=\"kept-%" PRId64 "\">outcome kept: attempt %u ", id,
	           k.okp_attempt);
	if (k.okp_http_status != 0) {
		buf_printf(b, "answered HTTP %ld", k.okp_http_status);
	} else {
		buf_puts(b, "got no answer");
	}
	buf_puts(b, ", not recorded yet (the database refuses it); written again every 500 ms"
	            "</span>");
}

static int console_outbox_list_row(void *arg, const struct store_row *row)
{
	struct console_outbox_rows *o = arg;
	struct buf *b = o->or_b;
	const char *status = store_row_text(row, 4);

	o->or_n++;
	o->or_last_id = store_row_int(row, 0);
	buf_printf(b,
	           "<tr><td class=\"num\"><a href=\"/console/outbox/%" PRId64 "\">%" PRId64
	           "</a></td><td>",
	           o->or_last_id, o->or_last_id);
	console_order_link(b, store_row_text(row, 1));
	console_td(b, store_row_text(row, 2));
	console_td(b, store_row_text(row, 3));
	buf_printf(b, "</td><td class=\"%s\">",
	           status != NULL && strcmp(status, "dead") == 0 ? "bad" : "");
	console_esc(b, status);
	console_kept_marker(b, o->or_cx, o->or_last_id, status);
	buf_printf(b, "</td><td class=\"num\">%" PRId64 "</td><td>", store_row_int(row, 5));
	console_next_attempt(b, status, store_row_int(row, 6));
	console_td_or_dash(b, store_row_text(row, 8));
	console_td(b, store_row_text(row, 9));
	buf_puts(b, "</td></tr>\n");
	if (o->or_attempts && o->or_n_ids < CONSOLE_ORDER_OUTBOX_MAX) {
		o->or_ids[o->or_n_ids++] = o->or_last_id;
	}
	return b->buf_overflow ? -1 : 0;
}

static const char console_outbox_head[] =
        "<table id=\"outbox\"><tr><th class=\"num\">id</th><th>order</th><th>call</th>"
        "<th>effect</th><th>status</th><th class=\"num\">attempts</th><th>next attempt (UTC)"
        "</th><th>last error</th><th>compensation</th></tr>\n";

int console_page_order(struct buf *b, const struct console_ctx *cx, const char *id)
{
	struct console_order_page op = {cx, b, 0, 0};
	char running[600];
	char target[220];
	struct console_outbox_rows o = {.or_cx = cx, .or_b = b, .or_attempts = 1};
	size_t i;
	int late = 0;
	int rc;

	op.op_running =
	        cx->cx_order_run != NULL &&
	        cx->cx_order_run(cx->cx_order_run_arg, id, cx->cx_now_ms, running, sizeof(running));
	rc = console_db_order(cx->cx_store, cx->cx_now_ms, console_wait(cx), id, console_order_row,
	                      &op);
	if (rc < 0) {
		return console_page_db_failed(b, cx, NULL, rc);
	}
	if (!op.op_found) {
		/* Events may name an order idemhook never had: show them anyway. */
		char title[300];

		snprintf(title, sizeof(title), "Order %s (not in the orders table)", id);
		console_page_begin(b, cx, title, NULL, 0);
	} else if (console_operator(cx)) {
		/* Ask its provider now, as `idemhook reconcile` asks for every
		 * waiting order (docs/console.md). */
		buf_puts(b, "<div class=\"actions\"><form method=\"post\" "
		            "action=\"/console/reconcile\" "
		            "data-confirm=\"Ask the provider about this order now?\">"
		            "<input type=\"hidden\" name=\"order\" value=\"");
		console_esc(b, id);
		buf_puts(b, "\">");
		console_csrf_field(b, cx);
		buf_puts(b, "<button type=\"submit\" id=\"reconcile\">Reconcile now</button></form>"
		            "</div>\n");
	}
	if (op.op_running) {
		buf_puts(b, "<p class=\"flash\" role=\"status\" id=\"reconcile-running\">");
		console_esc(b, running);
		buf_puts(b, "</p>\n");
	}
	buf_puts(b, "<h2>Timeline</h2><table id=\"timeline\"><tr><th>at (UTC)</th><th>what</th>"
	            "<th>which</th><th>detail</th></tr>\n");
	rc = console_db_order_timeline(cx->cx_store, cx->cx_now_ms, console_wait(cx), id,
	                               console_timeline_row, b);
	if (rc < 0) {
		return console_page_db_failed(b, cx, NULL, rc);
	}
	/* the operator's actions on it ("reconcile now"), as the event page's */
	buf_puts(b, "</table>\n<h2>Operator history</h2><table id=\"history\"><tr><th>at (UTC)"
	            "</th><th>who</th><th>action</th><th>reason</th><th>result</th></tr>");
	snprintf(target, sizeof(target), "order:%.200s", id);
	rc = console_db_audit_for(cx->cx_store, cx->cx_now_ms, console_wait(cx), target, 100,
	                          console_history_row, b);
	if (rc < 0) {
		return console_page_db_failed(b, cx, NULL, rc);
	}
	buf_puts(b, "</table>\n<h2>Outbox rows and their attempts</h2>");
	buf_puts(b, console_outbox_head);
	rc = console_db_outbox_of_order(cx->cx_store, cx->cx_now_ms, console_wait(cx), id,
	                                console_outbox_list_row, &o);
	if (rc < 0) {
		return console_page_db_failed(b, cx, NULL, rc);
	}
	buf_puts(b, "</table>\n");
	/* The attempts come last: what the page's deadline leaves no time
	 * for is marked unavailable, the rest of the page is shown. */
	for (i = 0; i < o.or_n_ids; i++) {
		buf_printf(b,
		           "<h3>Attempts of <a href=\"/console/outbox/%" PRId64 "\">row %" PRId64
		           "</a></h3>",
		           o.or_ids[i], o.or_ids[i]);
		if (late == 0) {
			buf_puts(b, console_attempts_head);
			late = console_db_outbox_attempts_within(cx->cx_store, cx->cx_now_ms,
			                                         console_wait(cx), o.or_ids[i],
			                                         console_attempt_row, b);
			buf_puts(b, "</table>\n");
			if (late >= 0) {
				late = 0;
				continue;
			}
			buf_puts(b, "<p class=\"flash error\" role=\"alert\" id=\"db-unavailable\">"
			            "The attempts below are unavailable: ");
			buf_puts(b, console_db_why(late));
			buf_puts(b, ". Reload the page in a moment.</p>\n");
		}
		buf_puts(b, "<p class=\"muted\">unavailable</p>\n");
	}
	return console_page_end(b) < 0 ? -1 : 200;
}

int console_page_order_query(struct buf *b, const struct console_ctx *cx,
                             const struct http_request *req)
{
	char *id = console_query(req, "id");
	int rc;

	if (id == NULL) {
		return console_not_found(b, cx, NULL, "No order id given (?id=).");
	}
	rc = console_page_order(b, cx, id);
	free(id);
	return rc;
}

/* ---- outbox ---- */

/* Whether ?status= names outbox statuses only (one, or several separated
 * by commas, each once): "" when it does, else why not into why. A status
 * not understood (a typo, "failed" for dead) would list nothing and read
 * as "no such rows". */
static void console_outbox_status_check(const char *status, char *why, size_t size)
{
	const char *s = status;
	unsigned seen = 0;
	size_t i;

	why[0] = '\0';
	while (s != NULL) {
		const char *comma = strchr(s, ',');
		size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);

		for (i = 0; i < STATS_OUTBOX_STATUSES; i++) {
			if (strlen(stats_outbox_statuses[i]) == n &&
			    strncmp(s, stats_outbox_statuses[i], n) == 0) {
				break;
			}
		}
		if (i == STATS_OUTBOX_STATUSES) {
			snprintf(why, size,
			         "status \"%.*s\" is not an outbox status (pending, delivering, "
			         "retry_wait, succeeded, dead, cancelled, or several of them "
			         "separated by commas).",
			         n > 60 ? 60 : (int)n, s);
			return;
		}
		if (seen & (1u << i)) {
			snprintf(why, size, "status names %s twice.", stats_outbox_statuses[i]);
			return;
		}
		seen |= 1u << i;
		s = comma != NULL ? comma + 1 : NULL;
	}
}

int console_page_outbox(struct buf *b, const struct console_ctx *cx, const struct http_request *req)
{
	struct console_outbox_rows o = {.or_cx = cx, .or_b = b};
	char *status = console_query(req, "status");
	char *before_text = console_query(req, "before");
	int64_t before = 0;
	struct console_figures fig;
	const struct stats_gauges *g = &fig.cf_gauges;
	int64_t count = -1;
	char why[200] = "";
	int bad_before = 0;
	size_t i;
	int rc = -1;

	/* The counts of the status links: the list's read says the rest. */
	rc = console_figures_get(cx, &fig);
	if (rc < 0 || !fig.cf_gauges_ok) {
		rc = console_page_db_failed(b, cx, "outbox", rc < 0 ? rc : -1);
		goto out;
	}
	rc = -1;
	if (status != NULL) {
		console_outbox_status_check(status, why, sizeof(why));
	}
	if (why[0] == '\0' && console_before(before_text, &before, why, sizeof(why)) < 0) {
		bad_before = 1;
	}
	console_page_begin(b, cx,
	                   status == NULL                ? "Outbox"
	                   : strchr(status, ',') != NULL ? "Outbox: several statuses"
	                                                 : "Outbox: one status",
	                   "outbox", 0);
	buf_puts(b, "<p>");
	buf_printf(b, "<a href=\"/console/outbox\"%s>all</a>",
	           status == NULL ? " class=\"here\"" : "");
	buf_printf(b,
	           " · <a href=\"/console/outbox?status=" CONSOLE_OUTBOX_BACKLOG
	           "\"%s>backlog: pending, delivering, retry_wait (%" PRId64 ")</a>",
	           status != NULL && strcmp(status, CONSOLE_OUTBOX_BACKLOG) == 0 ? " class=\"here\""
	                                                                         : "",
	           g->sg_outbox_backlog);
	for (i = 0; i < STATS_OUTBOX_STATUSES; i++) {
		int here = status != NULL && strcmp(status, stats_outbox_statuses[i]) == 0;

		if (here) {
			count = g->sg_outbox_rows[i];
		}
		buf_printf(b, " · <a href=\"/console/outbox?status=%s\"%s>%s (%" PRId64 ")</a>",
		           stats_outbox_statuses[i], here ? " class=\"here\"" : "",
		           stats_outbox_statuses[i], g->sg_outbox_rows[i]);
	}
	buf_puts(b, "</p>\n");
	if (status != NULL && count > 0 && console_operator(cx) &&
	    (strcmp(status, "dead") == 0 || strcmp(status, "retry_wait") == 0 ||
	     strcmp(status, "cancelled") == 0)) {
		buf_printf(b,
		           "<div class=\"actions\"><form method=\"post\" "
		           "action=\"/console/outbox/retry-all\" data-confirm=\"Retry all %" PRId64
		           " rows?\"><input type=\"hidden\" name=\"status\" value=\"%s\">"
		           "<input type=\"hidden\" name=\"expect\" value=\"%" PRId64 "\">",
		           count, status, count);
		console_csrf_field(b, cx);
		buf_printf(b,
		           "<button type=\"submit\" id=\"retry-all\">Retry all %" PRId64
		           " %s rows</button></form></div>\n",
		           count, status);
	}
	/* A status not understood lists nothing: said, as the events list
	 * says filters that cannot match. */
	if (why[0] != '\0') {
		buf_puts(b, "<p class=\"flash error\" role=\"alert\" id=\"filters-conflict\">");
		console_esc(b, why);
		buf_puts(b, bad_before ? " Nothing listed; start from the newest rows above.</p>\n"
		                       : " No row can match; pick a status above.</p>\n");
	}
	buf_puts(b, console_outbox_head);
	if (why[0] == '\0' &&
	    (rc = console_db_outbox(cx->cx_store, cx->cx_now_ms, console_wait(cx), status, before,
	                            CONSOLE_LIST_LIMIT, console_outbox_list_row, &o)) < 0) {
		rc = console_page_db_failed(b, cx, "outbox", rc);
		goto out;
	}
	if (o.or_n == 0) {
		buf_printf(b, "<tr><td colspan=\"9\" class=\"muted\">%s</td></tr>",
		           bad_before       ? "no rows: the before above is no row id"
		           : why[0] != '\0' ? "no rows: the status above matches none"
		                            : "no rows");
	}
	buf_puts(b, "</table>\n<p class=\"pager\">");
	if (o.or_n == CONSOLE_LIST_LIMIT) {
		buf_puts(b, "<a rel=\"next\" href=\"/console/outbox?");
		if (status != NULL) {
			buf_puts(b, "status=");
			console_urlenc(b, status);
			buf_puts(b, "&amp;");
		}
		buf_printf(b, "before=%" PRId64 "\">Older</a>", o.or_last_id);
	}
	buf_puts(b, "</p>\n");
	rc = console_page_end(b) < 0 ? -1 : 200;
out:
	free(status);
	free(before_text);
	return rc;
}

struct console_outbox_page {
	const struct console_ctx *xp_cx;
	struct buf *xp_b;
	int xp_found;
};

static int console_outbox_detail_row(void *arg, const struct store_row *row)
{
	struct console_outbox_page *xp = arg;
	const struct console_ctx *cx = xp->xp_cx;
	struct buf *b = xp->xp_b;
	int64_t id = store_row_int(row, 0);
	const char *status = store_row_text(row, 12);
	char title[64];
	char n[32];

	xp->xp_found = 1;
	snprintf(title, sizeof(title), "Outbox row %" PRId64, id);
	console_page_begin(b, cx, title, "outbox", 0);
	buf_puts(b, "<dl class=\"fields\"><dt>order</dt><dd>");
	console_order_link(b, store_row_text(row, 1));
	buf_puts(b, "</dd>");
	console_field(b, "call", store_row_text(row, 2));
	console_field(b, "effect", store_row_text(row, 3));
	console_field(b, "provider", store_row_text(row, 4));
	console_field(b, "url", store_row_text(row, 5));
	console_field(b, "content type", store_row_text(row, 6));
	console_field(b, "Idempotency-Key", store_row_text(row, 8));
	console_field(b, "compensation", store_row_text(row, 9));
	console_field(b, "compensation state", store_row_text(row, 10));
	if (store_row_int(row, 11) > 0) {
		buf_printf(b,
		           "<dt>compensates</dt><dd><a href=\"/console/outbox/%" PRId64
		           "\">row %" PRId64 "</a></dd>",
		           store_row_int(row, 11), store_row_int(row, 11));
	}
	buf_puts(b, "<dt>status</dt><dd>");
	console_esc_or_dash(b, status);
	console_kept_marker(b, cx, id, status);
	buf_puts(b, "</dd>");
	snprintf(n, sizeof(n), "%" PRId64, store_row_int(row, 13));
	console_field(b, "attempts", n);
	console_field_time(b, "window start (UTC)", store_row_int(row, 14));
	buf_puts(b, "<dt>next attempt (UTC)</dt><dd>");
	console_next_attempt(b, status, store_row_int(row, 15));
	buf_puts(b, "</dd>");
	console_field(b, "last error", store_row_text(row, 17));
	console_field_time(b, "created (UTC)", store_row_int(row, 18));
	console_field_time(b, "updated (UTC)", store_row_int(row, 19));
	console_field_time(b, "delivered (UTC)", store_row_int(row, 20));
	buf_puts(b, "</dl>\n");
	if (console_operator(cx)) {
		static const char *const ops[][2] = {
		        {"retry", "Retry"}, {"cancel", "Cancel"}, {"compensate", "Compensate"}};
		size_t i;

		buf_puts(b, "<div class=\"actions\">");
		for (i = 0; i < 3; i++) {
			buf_printf(b,
			           "<form method=\"post\" action=\"/console/outbox/%" PRId64
			           "/%s\" "
			           "data-confirm=\"%s row %" PRId64 "?\">",
			           id, ops[i][0], ops[i][1], id);
			console_csrf_field(b, cx);
			buf_printf(b, "<button type=\"submit\" id=\"%s\"%s>%s</button></form>",
			           ops[i][0], i > 0 ? " class=\"danger\"" : "", ops[i][1]);
		}
		buf_puts(b, "</div>\n");
	}
	buf_puts(b, "<h2>Body</h2><pre id=\"outbox-body\">");
	console_esc_col(b, row, 7, CONSOLE_RAW_SHOWN);
	buf_puts(b, "</pre>\n");
	return 1;
}

int console_page_outbox_row(struct buf *b, const struct console_ctx *cx, int64_t id)
{
	struct console_outbox_page xp = {cx, b, 0};

	int rc;

	rc = console_db_outbox_row(cx->cx_store, cx->cx_now_ms, console_wait(cx), id,
	                           console_outbox_detail_row, &xp);
	if (rc < 0) {
		return console_page_db_failed(b, cx, "outbox", rc);
	}
	if (!xp.xp_found) {
		return console_not_found(b, cx, "outbox", "No such outbox row.");
	}
	buf_puts(b, "<h2>Attempts (newest first)</h2>");
	buf_puts(b, console_attempts_head);
	rc = console_db_outbox_attempts_within(cx->cx_store, cx->cx_now_ms, console_wait(cx), id,
	                                       console_attempt_row, b);
	buf_puts(b, "</table>\n");
	if (rc < 0) {
		/* the row was read in time: shown, its attempts marked */
		buf_puts(b, "<p class=\"flash error\" role=\"alert\" id=\"db-unavailable\">"
		            "The attempts are unavailable: ");
		buf_puts(b, console_db_why(rc));
		buf_puts(b, ". Reload the page in a moment.</p>\n");
	}
	return console_page_end(b) < 0 ? -1 : 200;
}

/* ---- rejected requests ---- */

int console_page_rejected(struct buf *b, const struct console_ctx *cx)
{
	struct rejects_entry *e = calloc(REJECTS_RING, sizeof(*e));
	uint64_t total = 0;
	size_t n;
	size_t i;

	if (e == NULL) {
		return -1;
	}
	n = rejects_snapshot(e, REJECTS_RING, &total);
	console_page_begin(b, cx, "Rejected requests", "rejected", 30);
	buf_printf(b,
	           "<p>Callbacks refused before any claim (nothing was stored), newest first: the "
	           "last %d kept in this receiver's memory; %" PRIu64 " since it started.</p>\n",
	           REJECTS_RING, total);
	buf_puts(b, "<table id=\"rejected\"><tr><th>at (UTC)</th><th>provider</th><th>reason</th>"
	            "<th class=\"num\">status</th><th>client</th></tr>\n");
	for (i = 0; i < n; i++) {
		buf_puts(b, "<tr><td>");
		console_time(b, e[i].re_at_ms);
		console_td(b, e[i].re_provider);
		buf_puts(b, "</td><td class=\"bad\">");
		console_esc(b, e[i].re_reason);
		buf_printf(b, "</td><td class=\"num\">%d</td><td>", e[i].re_status);
		console_esc(b, e[i].re_client);
		buf_puts(b, "</td></tr>\n");
	}
	if (n == 0) {
		buf_puts(b, "<tr><td colspan=\"5\" class=\"muted\">none</td></tr>");
	}
	buf_puts(b, "</table>\n");
	free(e);
	return console_page_end(b) < 0 ? -1 : 200;
}

/* ---- the audit log ---- */

struct console_audit_page {
	struct buf *ap_b;
	int64_t ap_n;
	int64_t ap_last;
};

static int console_audit_page_row(void *arg, const struct console_db_audit_row *r)
{
	struct console_audit_page *ap = arg;
	struct buf *b = ap->ap_b;
	const char *colon = r->ar_target != NULL ? strchr(r->ar_target, ':') : NULL;

	ap->ap_n++;
	ap->ap_last = r->ar_id;
	buf_printf(b, "<tr><td class=\"num\">%" PRId64 "</td><td>", r->ar_id);
	console_time(b, r->ar_at);
	console_td(b, r->ar_actor);
	console_td(b, r->ar_action);
	buf_puts(b, "</td><td>");
	if (colon != NULL && strncmp(r->ar_target, "event:", 6) == 0) {
		buf_printf(b, "<a href=\"/console/events/%" PRId64 "\">",
		           (int64_t)strtoll(colon + 1, NULL, 10));
		console_esc(b, r->ar_target);
		buf_puts(b, "</a>");
	} else if (colon != NULL && strncmp(r->ar_target, "outbox:", 7) == 0) {
		buf_printf(b, "<a href=\"/console/outbox/%" PRId64 "\">",
		           (int64_t)strtoll(colon + 1, NULL, 10));
		console_esc(b, r->ar_target);
		buf_puts(b, "</a>");
	} else {
		console_esc(b, r->ar_target);
	}
	console_td_or_dash(b, r->ar_reason);
	console_td(b, r->ar_result);
	buf_puts(b, "</td></tr>\n");
	return b->buf_overflow ? -1 : 0;
}

int console_page_audit(struct buf *b, const struct console_ctx *cx, const struct http_request *req)
{
	struct console_audit_page ap = {b, 0, 0};
	char *before_text = console_query(req, "before");
	int64_t before = 0;
	char why[200] = "";
	int bad_before;
	int rc;

	/* A cursor that is no row id, read as none, would show the newest
	 * actions as if they were older ones: said, as the events and outbox
	 * lists say it, and nothing listed. */
	bad_before = console_before(before_text, &before, why, sizeof(why)) < 0;
	free(before_text);
	console_page_begin(b, cx, "Audit log", "audit", 0);
	if (bad_before) {
		buf_puts(b, "<p class=\"flash error\" role=\"alert\" id=\"filters-conflict\">");
		console_esc(b, why);
		buf_puts(b,
		         " Nothing listed; <a href=\"/console/audit\">Newest</a> starts from the "
		         "newest actions.</p>\n");
	}
	buf_puts(b, "<table id=\"audit\"><tr><th class=\"num\">id</th><th>at (UTC)</th><th>who</th>"
	            "<th>action</th><th>target</th><th>reason</th><th>result</th></tr>\n");
	if (!bad_before && (rc = console_db_audit_list_within(
	                            cx->cx_store, cx->cx_now_ms, console_wait(cx), NULL, NULL,
	                            before, CONSOLE_LIST_LIMIT, console_audit_page_row, &ap)) < 0) {
		return console_page_db_failed(b, cx, "audit", rc);
	}
	if (ap.ap_n == 0) {
		buf_printf(b, "<tr><td colspan=\"7\" class=\"muted\">%s</td></tr>",
		           bad_before   ? "no actions: the before above is no row id"
		           : before > 0 ? "no older operator actions"
		                        : "no operator actions yet");
	}
	buf_puts(b, "</table>\n<p class=\"pager\">");
	if (before > 0) {
		buf_puts(b, "<a href=\"/console/audit\">Newest</a> ");
	}
	if (ap.ap_n == CONSOLE_LIST_LIMIT) {
		buf_printf(b,
		           "<a rel=\"next\" href=\"/console/audit?before=%" PRId64 "\">Older</a>",
		           ap.ap_last);
	}
	buf_puts(b, "</p>\n");
	return console_page_end(b) < 0 ? -1 : 200;
}
