/* console_pages.h: the console's pages as HTML (console.c routes to them
 * and checks the session first). Everything printed from the database or
 * the request is escaped here: payloads are attacker-controlled. */
#ifndef IDEMHOOK_CONSOLE_PAGES_H
#define IDEMHOOK_CONSOLE_PAGES_H

#include <stddef.h>
#include <stdint.h>

#include "console_db.h"

struct buf;
struct config;
struct http_request;
struct store;
struct env;

#define CONSOLE_PAGE_MAX (8 * 1024 * 1024) /* bytes of one page */
#define CONSOLE_LIST_LIMIT 50              /* rows per list page */
#define CONSOLE_EVENT_PARAMS 12            /* the events list's filters */
#define CONSOLE_EVENTS_WHY_MAX 400         /* bytes of why no event can match */

/* Who is looking: the session's token name, role and CSRF token. */
struct console_who {
	const char *cw_name;
	int cw_operator; /* 1: the operator role (actions), 0: read-only */
	const char *cw_csrf;
};

/* What a page needs besides the request. */
struct console_ctx {
	const struct env *cx_env;
	struct store *cx_store;
	const struct config *cx_cf;
	int64_t cx_now_ms;
	const struct console_who *cx_who;
	const char *cx_flash; /* a message to show at the top, or NULL */
	int cx_flash_error;   /* it is an error */
	/* When the page's reads must have ended (CLOCK_MONOTONIC ms; 0: each
	 * waits CONSOLE_DB_WAIT_MS): one deadline shared by all of them. */
	int64_t cx_deadline_ms;
	/* Whether a "reconcile now" run of order is under way, said into out
	 * (who asked it, when): 1, or 0 when none. NULL: none ever is. */
	int (*cx_order_run)(void *arg, const char *order, int64_t now_ms, char *out, size_t size);
	void *cx_order_run_arg;
};

/* Monotonic milliseconds, for cx_deadline_ms. */
int64_t console_mono_ms(void);

/* What the page's next read may wait: the time left before cx's deadline,
 * CONSOLE_DB_WAIT_SPENT when none is left (the read answers
 * CONSOLE_DB_LATE at once), CONSOLE_DB_WAIT_MS without a deadline. */
unsigned console_wait(const struct console_ctx *cx);

/* Appends s escaped for HTML text and attribute values: & < > " ' as
 * entities, control bytes and bytes that are not UTF-8 as visible \xNN.
 * len bytes (escn), or up to the NUL (esc; NULL prints nothing). */
int console_escn(struct buf *b, const char *s, size_t len);
int console_esc(struct buf *b, const char *s);

/* The page around the content: head with the stylesheet and script,
 * navigation (here: the current section), who is logged in and the logout
 * form; and its end. */
int console_page_begin(struct buf *b, const struct console_ctx *cx, const char *title,
                       const char *here, int refresh_s);
int console_page_end(struct buf *b);

/* The login form (no session), with an error line or NULL. */
int console_page_login(struct buf *b, const char *error);

/* The pages. Each appends a whole page to b and returns the HTTP status
 * (200, 404 for an unknown row), or -1 on failure. id is the path's last
 * part where the page has one. */
int console_page_overview(struct buf *b, const struct console_ctx *cx);
int console_page_events(struct buf *b, const struct console_ctx *cx,
                        const struct http_request *req);
int console_page_event(struct buf *b, const struct console_ctx *cx, int64_t id);
int console_page_order(struct buf *b, const struct console_ctx *cx, const char *id);
/* The same page for /console/orders?id=ID, the form links take for an id
 * that is a dot segment (console_order_href). */
int console_page_order_query(struct buf *b, const struct console_ctx *cx,
                             const struct http_request *req);
int console_page_outbox(struct buf *b, const struct console_ctx *cx,
                        const struct http_request *req);
int console_page_outbox_row(struct buf *b, const struct console_ctx *cx, int64_t id);
int console_page_rejected(struct buf *b, const struct console_ctx *cx);
int console_page_audit(struct buf *b, const struct console_ctx *cx, const struct http_request *req);

/* The events list's filters as its URL's query gives them: each parameter
 * decoded (or NULL), the filter they make (pointing into eq_v), and why no
 * event can match them, or "": filters that cannot all hold (open=1 with
 * test=1, dismissed=1 or another outcome than failed; since not before
 * until), or a value not understood (a date, a 0/1 flag), which would
 * otherwise be left out and list more than was asked for. */
struct console_events_query {
	char *eq_v[CONSOLE_EVENT_PARAMS];
	struct console_db_filter eq_f;
	char eq_why[CONSOLE_EVENTS_WHY_MAX];
};

/* Loads q from req's query (q is overwritten); finish it after. */
void console_events_query_load(struct console_events_query *q, const struct console_ctx *cx,
                               const struct http_request *req);
void console_events_query_finish(struct console_events_query *q);

/* Appends q's filters as a query string, NAME=VALUE (values
 * percent-encoded) separated by sep ("&" for a URL, "&amp;" in HTML), and
 * returns how many; console_events_href the list's URL with them,
 * /console/events?..., or /console/events without any. */
size_t console_events_query_string(struct buf *b, const struct console_events_query *q,
                                   const char *sep);
size_t console_events_href(struct buf *b, const struct console_events_query *q, const char *sep);

/* What a dismissal by q's filters takes (console_db_dismiss_filter), named
 * as the operator knows it ("open failed event(s)", ...), or NULL when the
 * list holds nothing it could take: filters that cannot hold, done events
 * only, dismissed ones only. */
const char *console_events_dismiss_what(const struct console_events_query *q);

/* Appends the path (and query) of order id's page, percent-encoded, for an
 * href: /console/orders/ID, or /console/orders?id=ID when ID is "." or "..",
 * which a browser would resolve away as a path segment. */
void console_order_href(struct buf *b, const char *id);

/* A query parameter, percent-decoded (malloc'd), or NULL when absent,
 * empty or malformed. */
char *console_query(const struct http_request *req, const char *name);

#endif
