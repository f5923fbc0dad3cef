/* console_pages.h: the console's pages as HTML (console.c routes to them
 * and checks the session first). Everything printed from the database or
 * the request is escaped here: payloads are attacker-controlled. */
#ifndef IDEMHOOK_CONSOLE_PAGES_H
#define IDEMHOOK_CONSOLE_PAGES_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct config;
struct http_request;
struct store;
struct env;

#define CONSOLE_PAGE_MAX (8 * 1024 * 1024) /* bytes of one page */
#define CONSOLE_LIST_LIMIT 50              /* rows per list page */

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
};

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

/* Appends the path (and query) of order id's page, percent-encoded, for an
 * href: /console/orders/ID, or /console/orders?id=ID when ID is "." or "..",
 * which a browser would resolve away as a path segment. */
void console_order_href(struct buf *b, const char *id);

/* A query parameter, percent-decoded (malloc'd), or NULL when absent,
 * empty or malformed. */
char *console_query(const struct http_request *req, const char *name);

#endif
