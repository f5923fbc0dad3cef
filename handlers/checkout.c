/* checkout.c: the demo shop's checkout page: a form with a server-made
 * idempotency key, Post/Redirect/Get to the order page, a one-time flash
 * message, and (demo mode) a signed payment callback sent to ourselves. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "buf.h"
#include "checkout.h"
#include "checkout_assets.h"
#include "crypto.h"
#include "env.h"
#include "httpc.h"
#include "log.h"
#include "money.h"
#include "orders.h"
#include "provider.h"
#include "store.h"
#include "text.h"

#define CHECKOUT_BODY_MAX (16 * 1024) /* bytes of a form post */
#define CHECKOUT_FIELD_MAX 256        /* bytes of one decoded form value */
#define CHECKOUT_REF_MAX API_TEXT_MAX /* bytes of the customer's reference: the API's rule */
/* The reference field's maxlength. A browser counts it in UTF-16 code
 * units, and one unit is at most 3 bytes of UTF-8 (4 bytes take 2 units),
 * so whatever the field lets a customer type fits CHECKOUT_REF_MAX. */
#define CHECKOUT_REF_INPUT_MAX (CHECKOUT_REF_MAX / 3)
#define CHECKOUT_QTY_MAX 20
#define CHECKOUT_CURRENCY "EUR"
#define CHECKOUT_SCOPE "api:checkout"
#define CHECKOUT_FLASH_TTL_MS (15 * 60 * 1000)
#define CHECKOUT_FLASH_TOKEN_LEN 32 /* hex characters */
#define CHECKOUT_FLASH_MSG_MAX 320
#define CHECKOUT_SELF_TIMEOUT_S 10 /* demo payment: our own listener's answer */
#define CHECKOUT_SELF_REPLY_MAX (16 * 1024)
#define CHECKOUT_SELF_URL_MAX (16 + 2 * 128 + 16 + 128) /* scheme, [host], :port, path */

#define CHECKOUT_HTML "text/html; charset=utf-8"
#define CHECKOUT_INVALID_DETAIL                                                                    \
	"Choose a product, a quantity from 1 to 20, and a reference of at most 128 bytes of "      \
	"text without control characters (such as a tab)."
#define CHECKOUT_CSP                                                                               \
	"default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; "   \
	"form-action 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'"

struct checkout_product {
	const char *cp_id;
	const char *cp_name;
	int64_t cp_price; /* minor units of CHECKOUT_CURRENCY */
};

static const struct checkout_product checkout_products[] = {
	{"beans", "Coffee beans, 1 kg", 2490},
	{"grinder", "Hand grinder", 6900},
	{"mug", "Enamel mug", 1200},
};

#define CHECKOUT_N_PRODUCTS (sizeof(checkout_products) / sizeof(checkout_products[0]))

/* ---- one-time flash messages ---- */

static int checkout_flash_token(char out[CHECKOUT_FLASH_TOKEN_LEN + 1])
{
	unsigned char raw[CHECKOUT_FLASH_TOKEN_LEN / 2];

	if (crypto_random(raw, sizeof(raw)) < 0) {
		return -1;
	}
	crypto_hex_encode(raw, sizeof(raw), out);
	return 0;
}

static void checkout_copy(char *dst, size_t dst_size, const char *src)
{
	size_t n = strlen(src);

	if (n >= dst_size) {
		n = dst_size - 1;
	}
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Remembers a message for the first display of order's page with token,
 * in the transaction that creates the order: the page may be asked of any
 * receiver sharing the database. Returns 0 or -1. */
static int checkout_flash_put(struct store_tx *tx, const char *token, const char *order,
			      const char *msg)
{
	struct store_value p[] = {store_text(token), store_text(order), store_text(msg),
				  store_int(store_tx_now(tx) + CHECKOUT_FLASH_TTL_MS)};

	return store_exec(tx,
			  "INSERT INTO checkout_flash (token, order_id, message, expires_at) "
			  "VALUES (?, ?, ?, ?)",
			  p, 4, NULL);
}

struct checkout_flash_job {
	const char *fj_token;
	const char *fj_order;
	const char *fj_msg;
};

static int checkout_flash_put_tx(struct store_tx *tx, void *arg)
{
	const struct checkout_flash_job *fj = arg;

	return checkout_flash_put(tx, fj->fj_token, fj->fj_order, fj->fj_msg);
}

/* checkout_flash_put in a write of its own. Returns 0 or -1. */
static int checkout_flash_put_now(struct store *st, const char *token, const char *order,
				  const char *msg, int64_t now_ms)
{
	struct checkout_flash_job fj = {.fj_token = token, .fj_order = order, .fj_msg = msg};

	return store_write(st, now_ms, checkout_flash_put_tx, &fj) < 0 ? -1 : 0;
}

struct checkout_flash_take {
	const char *ft_token;
	const char *ft_order;
	char ft_msg[CHECKOUT_FLASH_MSG_MAX];
	int ft_found;
};

static int checkout_flash_take_tx(struct store_tx *tx, void *arg)
{
	struct checkout_flash_take *ft = arg;
	int64_t now = store_tx_now(tx);
	struct store_value p[] = {store_text(ft->ft_token), store_text(ft->ft_order), store_int(now)};
	struct store_value gone[] = {store_int(now)};
	struct store_row row;
	int r;

	/* A token is spent by its first look, whatever it names. */
	r = store_query(tx,
			"DELETE FROM checkout_flash WHERE token = ? RETURNING order_id, message, "
			"expires_at",
			p, 1, &row);
	if (r < 0) {
		return -1;
	}
	if (r > 0) {
		ft->ft_found = store_row_text(&row, 0) != NULL && store_row_text(&row, 1) != NULL &&
			       strcmp(store_row_text(&row, 0), ft->ft_order) == 0 &&
			       store_row_int(&row, 2) >= now;
		if (ft->ft_found) {
			checkout_copy(ft->ft_msg, sizeof(ft->ft_msg), store_row_text(&row, 1));
		}
		store_row_finish(&row);
	}
	/* Messages nobody came for. */
	return store_exec(tx, "DELETE FROM checkout_flash WHERE expires_at < ?", gone, 1, NULL);
}

/* Takes (and forgets) the message for token on order: 1 with ret_msg, else 0. */
static int checkout_flash_take(struct store *st, const char *token, const char *order,
			       int64_t now_ms, char ret_msg[CHECKOUT_FLASH_MSG_MAX])
{
	struct checkout_flash_take ft;

	memset(&ft, 0, sizeof(ft));
	ft.ft_token = token;
	ft.ft_order = order;
	if (store_write(st, now_ms, checkout_flash_take_tx, &ft) < 0 || !ft.ft_found) {
		return 0;
	}
	memcpy(ret_msg, ft.ft_msg, sizeof(ft.ft_msg));
	return 1;
}

/* ---- HTML ---- */

static int checkout_esc(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		int rc;

		switch (*s) {
		case '&':
			rc = buf_puts(b, "&amp;");
			break;
		case '<':
			rc = buf_puts(b, "&lt;");
			break;
		case '>':
			rc = buf_puts(b, "&gt;");
			break;
		case '"':
			rc = buf_puts(b, "&quot;");
			break;
		case '\'':
			rc = buf_puts(b, "&#39;");
			break;
		default:
			rc = buf_append(b, s, 1);
			break;
		}
		if (rc < 0) {
			return -1;
		}
	}
	return 0;
}

/* The page template (handlers/checkout/page.html) from from to to: its
 * {{title}} filled with title (escaped), its {{css}} with the stylesheet. */
static int checkout_template_put(struct buf *b, const char *from, const char *to, const char *title)
{
	static const char title_mark[] = "{{title}}";
	static const char css_mark[] = "{{css}}";

	while (from < to) {
		const char *mark = memchr(from, '{', (size_t)(to - from));
		size_t n = mark != NULL ? (size_t)(mark - from) : (size_t)(to - from);

		if (buf_append(b, from, n) < 0) {
			return -1;
		}
		from += n;
		if (mark == NULL) {
			break;
		}
		if ((size_t)(to - mark) >= sizeof(title_mark) - 1 &&
		    memcmp(mark, title_mark, sizeof(title_mark) - 1) == 0) {
			if (checkout_esc(b, title) < 0) {
				return -1;
			}
			from += sizeof(title_mark) - 1;
		} else if ((size_t)(to - mark) >= sizeof(css_mark) - 1 &&
			   memcmp(mark, css_mark, sizeof(css_mark) - 1) == 0) {
			if (buf_append(b, checkout_css, checkout_css_len) < 0) {
				return -1;
			}
			from += sizeof(css_mark) - 1;
		} else {
			if (buf_append(b, "{", 1) < 0) {
				return -1;
			}
			from++;
		}
	}
	return 0;
}

/* Where the template's {{main}} is: the page's own content goes there. */
static const char *checkout_template_main(void)
{
	static const char main_mark[] = "{{main}}";
	const char *m = memmem(checkout_page_html, checkout_page_html_len, main_mark, sizeof(main_mark) - 1);

	return m != NULL ? m : checkout_page_html + checkout_page_html_len;
}

static int checkout_page_begin(struct buf *b, const char *title)
{
	return checkout_template_put(b, checkout_page_html, checkout_template_main(), title);
}

static int checkout_page_end(struct buf *b, int with_script)
{
	const char *m = checkout_template_main();
	const char *end = checkout_page_html + checkout_page_html_len;

	if (with_script && buf_puts(b, "<script src=\"/checkout.js\" defer></script>\n") < 0) {
		return -1;
	}
	if (m < end) {
		m += strlen("{{main}}");
	}
	return checkout_template_put(b, m, end, "");
}

static void checkout_headers(struct reply *ret, const char *cache)
{
	reply_add_header(ret, "Content-Security-Policy", CHECKOUT_CSP);
	reply_add_header(ret, "X-Content-Type-Options", "nosniff");
	reply_add_header(ret, "Referrer-Policy", "same-origin");
	reply_add_header(ret, "Cache-Control", cache);
}

static int checkout_reply_html(struct reply *ret, int status, struct buf *b)
{
	size_t len = 0;
	char *body;

	if (b->buf_overflow) {
		return -1;
	}
	body = buf_take(b, &len);
	if (body == NULL || reply_set_take(ret, status, CHECKOUT_HTML, body, len) < 0) {
		free(body);
		return -1;
	}
	return 0;
}

/* 1 when the client prefers JSON (the script's problem+json, or the
 * order's id) to the HTML page: a higher weight in Accept, or, at equal
 * weights, JSON named and HTML only reached by a wildcard (axios's
 * "application/json, text/plain, * / *"). Otherwise, with no Accept, or
 * equal in both: the page, as the form works without a script. */
static int checkout_wants_json(const struct http_request *req)
{
	int json_rank;
	int problem_rank;
	int html_rank;
	int json = api_accept_quality(req, "application/json", &json_rank);
	int problem = api_accept_quality(req, "application/problem+json", &problem_rank);
	int html = api_accept_quality(req, "text/html", &html_rank);

	if (problem > json || (problem == json && problem_rank > json_rank)) {
		json = problem;
		json_rank = problem_rank;
	}
	if (json != html) {
		return json > html;
	}
	return json > 0 && json_rank > html_rank;
}

/* Marks an answer of a resource whose answers come as HTML or as JSON by
 * the request's Accept (checkout_wants_json): POST /checkout, an order's
 * page and its demo payment. All of them, not only those built from
 * Accept, so a cache in front never hands one client's type to another
 * (RFC 9110 12.5.5), no-store ones too. */
static void checkout_vary_accept(struct reply *ret)
{
	reply_add_header(ret, "Vary", "Accept");
}

/* 500, and a log line saying what failed: the client learns nothing more,
 * so the operator must. */
static void checkout_internal(struct reply *ret, const char *what)
{
	log_err("checkout: %s; answered 500", what);
	reply_problem(ret, 500, "internal", "Internal error",
	              "The shop could not answer this request; its log says why. Sending the "
	              "form again is safe: it cannot place a second order.");
}

/* ---- the form ---- */

struct checkout_form {
	char cf_key[API_KEY_MAX + 1];
	char cf_product[CHECKOUT_FIELD_MAX + 1];
	char cf_quantity[CHECKOUT_FIELD_MAX + 1];
	char cf_ref[CHECKOUT_FIELD_MAX + 1];
};

/* Decodes one application/x-www-form-urlencoded component of len bytes into
 * out (out_size room). Returns 0, or -1 when malformed or too long. */
static int checkout_unescape(const char *s, size_t len, char *out, size_t out_size)
{
	char *dec = text_form_decode(s, len);
	size_t n;

	if (dec == NULL) {
		return -1;
	}
	n = strlen(dec);
	if (n + 1 > out_size) {
		free(dec);
		return -1;
	}
	memcpy(out, dec, n + 1);
	free(dec);
	return 0;
}

/* Fills f from a form body. Unknown fields are ignored; a repeated known
 * field is refused. Returns 0 or -1. */
static int checkout_form_parse(const char *body, size_t len, struct checkout_form *f)
{
	int seen[4] = {0, 0, 0, 0};
	size_t pos = 0;

	memset(f, 0, sizeof(*f));
	while (pos < len) {
		const char *pair = body + pos;
		const char *amp = memchr(pair, '&', len - pos);
		size_t pair_len = amp != NULL ? (size_t)(amp - pair) : len - pos;
		const char *eq = memchr(pair, '=', pair_len);
		char name[32];
		char *out = NULL;
		size_t out_size = 0;
		int idx = -1;

		pos += pair_len + 1;
		if (pair_len == 0) {
			continue;
		}
		if (eq == NULL ||
		    checkout_unescape(pair, (size_t)(eq - pair), name, sizeof(name)) < 0) {
			continue; /* a field we do not know cannot matter */
		}
		if (strcmp(name, "idempotency_key") == 0) {
			idx = 0;
			out = f->cf_key;
			out_size = sizeof(f->cf_key);
		} else if (strcmp(name, "product") == 0) {
			idx = 1;
			out = f->cf_product;
			out_size = sizeof(f->cf_product);
		} else if (strcmp(name, "quantity") == 0) {
			idx = 2;
			out = f->cf_quantity;
			out_size = sizeof(f->cf_quantity);
		} else if (strcmp(name, "customer_ref") == 0) {
			idx = 3;
			out = f->cf_ref;
			out_size = sizeof(f->cf_ref);
		}
		if (idx < 0) {
			continue;
		}
		if (seen[idx]++ > 0) {
			return -1;
		}
		if (checkout_unescape(eq + 1, pair_len - (size_t)(eq + 1 - pair), out, out_size) <
		    0) {
			return -1;
		}
	}
	return 0;
}

static const struct checkout_product *checkout_product_find(const char *id)
{
	size_t i;

	for (i = 0; i < CHECKOUT_N_PRODUCTS; i++) {
		if (strcmp(checkout_products[i].cp_id, id) == 0) {
			return &checkout_products[i];
		}
	}
	return NULL;
}

static int checkout_quantity(const char *s, int64_t *ret)
{
	int64_t q = 0;
	size_t i;

	if (s[0] == '\0' || strlen(s) > 2) {
		return -1;
	}
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return -1;
		}
		q = q * 10 + (s[i] - '0');
	}
	if (q < 1 || q > CHECKOUT_QTY_MAX) {
		return -1;
	}
	*ret = q;
	return 0;
}

/* The reference is optional on the form (empty: none); given, it meets
 * the order API's rule (text_field_ok), shorter. */
static int checkout_ref_ok(const char *s)
{
	return s[0] == '\0' || text_field_ok(s, CHECKOUT_REF_MAX);
}

static int checkout_form_html(struct buf *b, const char *key, const struct checkout_form *prev)
{
	size_t i;

	/* The action differs from this page's URL by its query only: a POST
	 * makes caches drop the entry of the URL it was sent to, and Back
	 * needs this page's cached copy (see checkout_get). */
	if (buf_puts(b, "<form id=\"checkout\" method=\"post\" action=\"/checkout?place\">\n"
			"<input type=\"hidden\" name=\"idempotency_key\" value=\"") < 0 ||
	    checkout_esc(b, key) < 0 ||
	    buf_puts(b, "\">\n"
			"<label>Product <select name=\"product\">") < 0) {
		return -1;
	}
	for (i = 0; i < CHECKOUT_N_PRODUCTS; i++) {
		const struct checkout_product *p = &checkout_products[i];
		char price[32];
		int sel = prev != NULL && strcmp(prev->cf_product, p->cp_id) == 0;

		money_format(p->cp_price, CHECKOUT_CURRENCY, price);
		if (buf_printf(b, "<option value=\"%s\"%s>", p->cp_id, sel ? " selected" : "") <
			    0 ||
		    checkout_esc(b, p->cp_name) < 0 ||
		    buf_printf(b, " \xe2\x80\x94 %s %s</option>", price, CHECKOUT_CURRENCY) < 0) {
			return -1;
		}
	}
	if (buf_puts(b, "</select></label>\n<label>Quantity <input type=\"number\" "
	                "name=\"quantity\" value=\"") < 0 ||
	    checkout_esc(b, prev != NULL ? prev->cf_quantity : "1") < 0 ||
	    buf_printf(b, "\" min=\"1\" max=\"%d\" required></label>\n", CHECKOUT_QTY_MAX) < 0 ||
	    buf_puts(b, "<label>Your reference (optional) <input type=\"text\" "
	                "name=\"customer_ref\" value=\"") < 0 ||
	    checkout_esc(b, prev != NULL ? prev->cf_ref : "") < 0 ||
	    buf_printf(b, "\" maxlength=\"%d\"></label>\n", CHECKOUT_REF_INPUT_MAX) < 0 ||
	    buf_puts(b,
	             "<button type=\"submit\" id=\"submit\">Place order</button>\n"
	             "<p id=\"status\" role=\"status\" aria-live=\"polite\"></p>\n</form>\n") < 0) {
		return -1;
	}
	return 0;
}

/* The developer's explanations, each behind a "How this works" disclosure:
 * the customer's own text says what happened, never how. */
enum checkout_how {
	CHECKOUT_HOW_FORM,   /* the form and its key */
	CHECKOUT_HOW_REUSED, /* a form sent again with other details: 422 */
	CHECKOUT_HOW_DEMO,   /* the demo payment's two callbacks */
};

static int checkout_how_it_works(struct buf *b, enum checkout_how what)
{
	static const char *const texts[] = {
		/* CHECKOUT_HOW_FORM */
		"This form carries one idempotency key, a UUID the server drew when it rendered the "
		"page. The order is created once per key: a double click, a reload of the result, "
		"Back and submit, or a retry after a lost answer all send the same key and get the "
		"stored answer (a redirect to the same order, marked <code>Idempotent-Replayed: "
		"true</code>) instead of a second order. With JavaScript the form is sent by a script "
		"that retries a lost answer with the same key.",
		/* CHECKOUT_HOW_REUSED */
		"The form was sent again with its idempotency key but with other details (product, "
		"quantity or reference). The server keeps the first request's fingerprint with the "
		"key and refuses a different request under the same key with "
		"<code>422 idempotency_key_reused</code>, rather than changing or duplicating the order "
		"already placed. A new order needs a new form, which carries a new key.",
		/* CHECKOUT_HOW_DEMO */
		"Demo mode: idemhook sent itself a Stripe-signed "
		"<code>payment_intent.succeeded</code> callback for this order over HTTP, twice, as "
		"Stripe retries. The first paid the order and awarded the points; the second had the "
		"same event id, so it was answered from the store with <code>Idempotent-Replayed: "
		"true</code> and changed nothing.",
	};

	if (buf_puts(b, "<details class=\"how\"><summary>How this works</summary><p>") < 0 ||
	    buf_puts(b, texts[what]) < 0) {
		return -1;
	}
	return buf_puts(b, "</p></details>\n");
}

/* The order a stored checkout answer redirects to (its Location), into
 * ret_id; -1 when it names none. */
static int checkout_reply_order(const struct reply *r, char ret_id[ORDERS_ID_LEN + 1])
{
	static const char mark[] = "Location: /orders/";
	const char *h = r->reply_headers != NULL ? strstr(r->reply_headers, mark) : NULL;
	size_t n;

	if (h == NULL) {
		return -1;
	}
	h += sizeof(mark) - 1;
	n = strcspn(h, "?/\r\n");
	if (n == 0 || n > ORDERS_ID_LEN) {
		return -1;
	}
	memcpy(ret_id, h, n);
	ret_id[n] = '\0';
	return api_order_id_valid(ret_id) ? 0 : -1;
}

/* A form sent again, after it placed an order, with other details: 422 as
 * docs/order-api.md says, with the way to the order already placed. For
 * the script, problem+json with the order's page in order_url. */
static void checkout_reused(const struct http_request *req, struct reply *ret, const char *order_id)
{
	static const char title[] = "This order was already placed";
	static const char detail[] = "This form already placed an order, with the details you first "
				     "sent; it was not changed. To buy something else, start a new "
				     "order.";
	struct buf b;

	buf_init(&b, 0);
	if (checkout_wants_json(req)) {
		size_t len = 0;
		char *body;

		if (buf_puts(&b, "{\"type\":\"urn:idemhook:problem:idempotency_key_reused\","
				 "\"title\":") < 0 ||
		    buf_json_string(&b, title) < 0 || buf_puts(&b, ",\"status\":422,\"detail\":") < 0 ||
		    buf_json_string(&b, detail) < 0) {
			goto fail;
		}
		if (order_id != NULL && (buf_puts(&b, ",\"order\":") < 0 || buf_json_string(&b, order_id) < 0 ||
					 buf_printf(&b, ",\"order_url\":\"/orders/%s\"", order_id) < 0)) {
			goto fail;
		}
		if (buf_puts(&b, "}\n") < 0 || b.buf_overflow) {
			goto fail;
		}
		body = buf_take(&b, &len);
		if (body == NULL || reply_set_take(ret, 422, "application/problem+json", body, len) < 0) {
			free(body);
			goto fail;
		}
		reply_add_header(ret, "Cache-Control", "no-store");
		return;
	}
	if (checkout_page_begin(&b, title) < 0 || buf_printf(&b, "<h1>%s</h1>\n", title) < 0 ||
	    buf_printf(&b, "<p class=\"error\" id=\"reused\">%s</p>\n", detail) < 0) {
		goto fail;
	}
	if (order_id != NULL && buf_printf(&b,
					   "<p><a id=\"placed\" href=\"/orders/%s\">See the order you "
					   "placed</a></p>\n",
					   order_id) < 0) {
		goto fail;
	}
	if (buf_puts(&b, "<p><a href=\"/checkout\">Start a new order</a></p>\n") < 0 ||
	    checkout_how_it_works(&b, CHECKOUT_HOW_REUSED) < 0 || checkout_page_end(&b, 0) < 0 ||
	    checkout_reply_html(ret, 422, &b) < 0) {
		goto fail;
	}
	checkout_headers(ret, "no-store");
	return;
fail:
	buf_finish(&b);
	checkout_internal(ret, "cannot build the key-reused page (out of memory)");
}

static void checkout_get(struct reply *ret)
{
	char key[37];
	struct buf b;

	if (crypto_uuid4(key) < 0) {
		checkout_internal(ret, "cannot make a form key");
		return;
	}
	buf_init(&b, 0);
	if (checkout_page_begin(&b, "Checkout") < 0 || buf_puts(&b, "<h1>Checkout</h1>\n") < 0 ||
	    checkout_form_html(&b, key, NULL) < 0 ||
	    buf_puts(&b, "<p class=\"note\">Pressing the button twice, reloading, or going Back "
			 "and sending this form again places one order, never two.</p>\n") < 0 ||
	    checkout_how_it_works(&b, CHECKOUT_HOW_FORM) < 0 ||
	    checkout_page_end(&b, 1) < 0 || checkout_reply_html(ret, 200, &b) < 0) {
		buf_finish(&b);
		checkout_internal(ret, "cannot build the checkout form (out of memory)");
		return;
	}
	/* Stale at once, so a new visit renders a new key; but not no-store
	 * or no-cache: Back takes a stale page from the cache without asking,
	 * so a resubmit after Back carries the key this form was sent with. */
	checkout_headers(ret, "private, max-age=0");
}

/* The demo's front door (GET / in demo mode): someone who opens the
 * listener's address in a browser finds the shop, not a JSON 404. */
static void checkout_demo_index(struct reply *ret)
{
	struct buf b;

	buf_init(&b, 0);
	if (checkout_page_begin(&b, "Welcome") < 0 ||
	    buf_puts(&b, "<h1>idemhook demo shop</h1>\n"
			 "<p>This receiver runs in demo mode.</p>\n"
			 "<p><a id=\"to-checkout\" href=\"/checkout\">Go to the checkout page</a> "
			 "to place an order and pay it with a simulated payment.</p>\n") < 0 ||
	    checkout_page_end(&b, 0) < 0 || checkout_reply_html(ret, 200, &b) < 0) {
		buf_finish(&b);
		checkout_internal(ret, "cannot build the demo index page (out of memory)");
		return;
	}
	checkout_headers(ret, "no-cache");
}

/* An answer to a form post that did not create the order: HTML with the
 * message (and, when retry_form, the same form to send again), or
 * problem+json for the script. */
static void checkout_post_error(const struct http_request *req, struct reply *ret, int status,
				const char *slug, const char *title, const char *detail,
				const struct checkout_form *retry_form)
{
	struct buf b;

	if (checkout_wants_json(req)) {
		reply_problem(ret, status, slug, title, detail);
		return;
	}
	buf_init(&b, 0);
	if (checkout_page_begin(&b, title) < 0 || buf_puts(&b, "<h1>") < 0 ||
	    checkout_esc(&b, title) < 0 || buf_puts(&b, "</h1>\n<p class=\"error\">") < 0 ||
	    checkout_esc(&b, detail) < 0 || buf_puts(&b, "</p>\n") < 0) {
		goto fail;
	}
	if (retry_form != NULL) {
		if (buf_puts(&b, "<p>Sending it again is safe: it cannot place a second "
				 "order.</p>\n") < 0 ||
		    checkout_form_html(&b, retry_form->cf_key, retry_form) < 0 ||
		    checkout_how_it_works(&b, CHECKOUT_HOW_FORM) < 0) {
			goto fail;
		}
	}
	if (buf_puts(&b, "<p><a href=\"/checkout\">Start a new order</a></p>\n") < 0 ||
	    checkout_page_end(&b, retry_form != NULL) < 0 ||
	    checkout_reply_html(ret, status, &b) < 0) {
		goto fail;
	}
	checkout_headers(ret, "no-store");
	return;
fail:
	buf_finish(&b);
	checkout_internal(ret, "cannot build the refusal page (out of memory)");
}

/* 503 when the order could not be read (the store is busy): the page or
 * problem+json, retried after Retry-After. */
static void checkout_unreadable(const struct http_request *req, struct reply *ret)
{
	checkout_post_error(req, ret, 503, "temporarily_unavailable", "Please try again",
	                    "The order could not be read just now; please reload in a moment.",
	                    NULL);
	reply_add_header(ret, "Retry-After", "1");
}

/* The order id names into o: 1, or 0 when answered (404 for an id that is
 * malformed or names no order, 503 when the store could not read it). */
static int checkout_order_load(const struct env *env, const struct http_request *req,
                               struct reply *ret, const char *id, struct api_order *o)
{
	int rc =
	        api_order_id_valid(id) ? api_order_load(env->env_store, env_now_ms(env), id, o) : 0;

	if (rc < 0) {
		checkout_unreadable(req, ret);
		return 0;
	}
	if (rc == 0) {
		checkout_post_error(req, ret, 404, "not_found", "No such order",
		                    "There is no order with this id.", NULL);
		return 0;
	}
	return 1;
}

struct checkout_create {
	int64_t cc_amount;
	const char *cc_ref; /* NULL when none */
	char cc_flash[CHECKOUT_FLASH_TOKEN_LEN + 1];
	char cc_id[ORDERS_ID_LEN + 1]; /* out */
};

static int checkout_create_apply(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct checkout_create *cc = arg;
	char location[64 + ORDERS_ID_LEN];
	struct buf b;

	if (orders_create(tx, cc->cc_amount, CHECKOUT_CURRENCY, cc->cc_ref, cc->cc_id) < 0 ||
	    checkout_flash_put(tx, cc->cc_flash, cc->cc_id, "Order created.") < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	/* The stored answer is the redirect itself, so Back + resubmit (a
	 * replay) lands on the same order; its flash token is spent by then. */
	snprintf(location, sizeof(location), "/orders/%s?flash=%s", cc->cc_id, cc->cc_flash);
	buf_init(&b, 0);
	if (buf_printf(&b,
		       "<!doctype html>\n<title>See Other</title><p>Order created: <a "
		       "href=\"%s\">%s</a></p>\n",
		       location, cc->cc_id) < 0 ||
	    checkout_reply_html(ret_reply, 303, &b) < 0 ||
	    reply_add_header(ret_reply, "Location", location) < 0) {
		buf_finish(&b);
		return STORE_APPLY_TRANSIENT;
	}
	return STORE_APPLY_DONE;
}

/* A checkout form whose claim is with the store: what its answer needs. */
struct checkout_post_job {
	struct store_claim cp_claim;
	struct checkout_create cp_create;
	struct checkout_form cp_form;
	char cp_key[API_KEY_MAX + 1];
	const struct env *cp_env;
	struct http_deferred *cp_defer;
};

static void checkout_post_committed(void *arg, int result)
{
	struct checkout_post_job *cp = arg;

	(void)result; /* the claim has its outcome, transient when refused */
	http_resume(cp->cp_defer);
}

/* The answer to a form post once its claim committed, on a server thread
 * (req and ret NULL: the client went away). */
static void checkout_post_finish(void *arg, const struct http_request *req, struct reply *ret)
{
	struct checkout_post_job *cp = arg;
	struct store_claim *c = &cp->cp_claim;
	int64_t now_ms = env_now_ms(cp->cp_env);

	if (req == NULL) {
		api_claim_account("api:checkout", "gone", cp->cp_key, c->sc_outcome, 0, now_ms, now_ms);
		goto done;
	}
	switch (c->sc_outcome) {
	case STORE_NEW:
		if (reply_copy(ret, &c->sc_reply) < 0) {
			checkout_internal(ret, "cannot copy the stored answer (out of memory)");
		}
		break;
	case STORE_REPLAYED:
		if (reply_copy(ret, &c->sc_reply) < 0 ||
		    reply_add_header(ret, "Idempotent-Replayed", "true") < 0) {
			checkout_internal(ret, "cannot copy the stored answer (out of memory)");
		}
		break;
	case STORE_MISMATCH: {
		char placed[ORDERS_ID_LEN + 1];

		checkout_reused(req, ret,
				checkout_reply_order(&c->sc_reply, placed) == 0 ? placed : NULL);
		break;
	}
	case STORE_IN_PROGRESS:
	case STORE_TRANSIENT:
	default: {
		char v[24];
		int in_progress = c->sc_outcome == STORE_IN_PROGRESS;

		checkout_post_error(
			req, ret, in_progress ? 409 : 503,
			in_progress ? "request_in_progress" : "temporarily_unavailable",
			in_progress ? "Your order is still being placed" : "Please try again",
			in_progress
				? "An earlier submission of this form is still being processed."
				: "The shop could not save the order just now; nothing was kept.",
			&cp->cp_form);
		snprintf(v, sizeof(v), "%lld",
			 (long long)(c->sc_retry_after_s < 1 ? 1 : c->sc_retry_after_s));
		reply_add_header(ret, "Retry-After", v);
		break;
	}
	}
	checkout_vary_accept(ret);
	api_claim_account("api:checkout", req->hr_client, cp->cp_key, c->sc_outcome, ret->reply_status,
			  req->hr_received_ms, now_ms);
done:
	store_claim_finish(c);
	free(cp);
}

static void checkout_post(const struct env *env, const struct config *cf, const struct http_request *req,
			  struct reply *ret)
{
	const struct checkout_product *prod;
	const char *hkey = http_header_get(req, "Idempotency-Key");
	char header_key[API_KEY_MAX + 1];
	struct checkout_post_job *cp = NULL;
	struct checkout_form *f;
	struct store_claim *c;
	struct buf fp;
	int64_t qty = 0;
	int64_t retry_after = 1;
	char *canon = NULL;
	size_t canon_len = 0;

	buf_init(&fp, 0);
	if (api_rate_allow(cf, req->hr_client, env_now_ms(env), &retry_after) == 0) {
		char v[24];

		checkout_post_error(req, ret, 429, "rate_limited", "Too many requests",
				    "Please wait a moment and try again.", NULL);
		snprintf(v, sizeof(v), "%lld", (long long)retry_after);
		reply_add_header(ret, "Retry-After", v);
		return;
	}
	if (req->hr_body_len > CHECKOUT_BODY_MAX) {
		checkout_post_error(req, ret, 413, "body_too_large", "Form too large",
				    "The form is too large.", NULL);
		return;
	}
	cp = calloc(1, sizeof(*cp));
	if (cp == NULL) {
		checkout_internal(ret, "out of memory reading a form post");
		return;
	}
	f = &cp->cp_form;
	c = &cp->cp_claim;
	if (checkout_form_parse((const char *)req->hr_body, req->hr_body_len, f) < 0) {
		checkout_post_error(req, ret, 400, "malformed_form", "Malformed form",
				    "The form could not be read. Please reload the checkout page.",
				    NULL);
		goto done;
	}
	if (api_idempotency_key_parse(f->cf_key, cp->cp_key) < 0 ||
	    http_header_count(req, "Idempotency-Key") > 1 ||
	    (hkey != NULL &&
	     (api_idempotency_key_parse(hkey, header_key) < 0 || strcmp(header_key, cp->cp_key) != 0))) {
		checkout_post_error(req, ret, 400, "malformed_idempotency_key",
				    "This form has no valid key",
				    "Please reload the checkout page and submit it again.", NULL);
		goto done;
	}
	prod = checkout_product_find(f->cf_product);
	if (prod == NULL || checkout_quantity(f->cf_quantity, &qty) < 0 ||
	    !checkout_ref_ok(f->cf_ref)) {
		/* The key is not spent: the form comes back as sent, to be
		 * corrected and sent again; a reference that is no text at all
		 * (not UTF-8, control characters) comes back empty. */
		if (!text_field_ok(f->cf_ref, sizeof(f->cf_ref) - 1)) {
			f->cf_ref[0] = '\0';
		}
		checkout_post_error(req, ret, 400, "invalid_order", "Please check the form",
		                    CHECKOUT_INVALID_DETAIL, f);
		goto done;
	}
	/* The fingerprint covers what the order is, never the key itself. */
	if (buf_puts(&fp, "{\"product\":") < 0 || buf_json_string(&fp, prod->cp_id) < 0 ||
	    buf_printf(&fp, ",\"quantity\":%lld,\"customer_ref\":", (long long)qty) < 0 ||
	    buf_json_string(&fp, f->cf_ref) < 0 || buf_puts(&fp, "}") < 0 ||
	    api_canonical_json(fp.buf_data, fp.buf_len, &canon, &canon_len) < 0 ||
	    checkout_flash_token(cp->cp_create.cc_flash) < 0) {
		checkout_internal(ret, "cannot fingerprint the order or make a flash token");
		goto done;
	}
	crypto_sha256(canon, canon_len, c->sc_fingerprint);
	cp->cp_create.cc_amount = prod->cp_price * qty;
	cp->cp_create.cc_ref = f->cf_ref[0] != '\0' ? f->cf_ref : NULL;
	c->sc_scope = CHECKOUT_SCOPE;
	c->sc_key = cp->cp_key;
	c->sc_now_ms = env_now_ms(env);
	c->sc_retention_ms = cf->cf_retention_s * 1000;
	c->sc_lease_ms = cf->cf_lease_s * 1000;
	c->sc_apply = checkout_create_apply;
	c->sc_arg = &cp->cp_create;
	/* No server thread waits for the COMMIT: checkout_post_finish answers. */
	cp->cp_env = env;
	cp->cp_defer = http_defer(req, checkout_post_finish, cp);
	store_submit_async(env->env_store, c, 1, checkout_post_committed, cp);
	cp = NULL;
done:
	free(cp);
	free(canon);
	buf_finish(&fp);
}

/* ---- the order page ---- */

static int checkout_row(struct buf *b, const char *name, const char *value)
{
	if (buf_printf(b, "<tr><th>%s</th><td>", name) < 0 || checkout_esc(b, value) < 0) {
		return -1;
	}
	return buf_puts(b, "</td></tr>\n");
}

static int checkout_money_row(struct buf *b, const char *name, int64_t minor, const char *currency)
{
	char amount[32];
	char text[48];

	money_format(minor, currency, amount);
	snprintf(text, sizeof(text), "%s %s", amount, currency);
	return checkout_row(b, name, text);
}

static int checkout_time_row(struct buf *b, const char *name, int64_t ms)
{
	char t[32];

	if (ms == 0) {
		return checkout_row(b, name, "\xe2\x80\x94");
	}
	api_format_time(ms, t);
	return checkout_row(b, name, t);
}

static const struct provider_conf *checkout_stripe(const struct config *cf)
{
	size_t i;

	for (i = 0; i < cf->cf_n_providers; i++) {
		const struct provider_conf *pc = &cf->cf_providers[i];

		if (pc->pc_provider != NULL && strcmp(pc->pc_provider->p_name, "stripe") == 0 &&
		    pc->pc_provider->p_sign != NULL) {
			return pc;
		}
	}
	return NULL;
}

/* A flash message: its first line is the customer's; a second line, when
 * there is one, is the developer's detail, behind the disclosure. */
static int checkout_flash_html(struct buf *b, char *msg)
{
	char *nl = strchr(msg, '\n');

	if (nl != NULL) {
		*nl = '\0';
	}
	if (buf_puts(b, "<div class=\"flash\" id=\"flash\" role=\"status\"><p>") < 0 ||
	    checkout_esc(b, msg) < 0 || buf_puts(b, "</p>") < 0) {
		return -1;
	}
	if (nl != NULL && (buf_puts(b, "<details class=\"how\" id=\"flash-how\"><summary>How this "
				       "works</summary><p>") < 0 ||
			   checkout_esc(b, nl + 1) < 0 || buf_puts(b, "</p></details>") < 0)) {
		return -1;
	}
	return buf_puts(b, "</div>\n");
}

static void checkout_order_page(const struct env *env, const struct config *cf,
				const struct http_request *req, const char *id, struct reply *ret)
{
	const struct provider_conf *stripe = cf->cf_demo ? checkout_stripe(cf) : NULL;
	char msg[CHECKOUT_FLASH_MSG_MAX];
	char points[32];
	struct api_order o;
	struct buf b;
	char *flash = NULL;
	int has_flash = 0;

	if (!checkout_order_load(env, req, ret, id, &o)) {
		return;
	}
	buf_init(&b, 0);
	if (checkout_wants_json(req)) {
		/* The script follows the redirect here only to learn where to
		 * go; the flash stays for the page it then opens. */
		if (buf_puts(&b, "{\"id\":") < 0 || buf_json_string(&b, o.ao_id) < 0 ||
		    buf_puts(&b, ",\"status\":") < 0 || buf_json_string(&b, o.ao_status) < 0 ||
		    buf_puts(&b, "}\n") < 0) {
			goto fail;
		}
		if (b.buf_overflow ||
		    reply_set(ret, 200, "application/json", b.buf_data, b.buf_len) < 0) {
			goto fail;
		}
		buf_finish(&b);
		reply_add_header(ret, "Cache-Control", "no-store");
		return;
	}
	/* A HEAD shows no page, so it spends no flash: the GET after it (a
	 * link checker's, a prefetch's) still shows the message. */
	flash = strcmp(req->hr_method, "HEAD") != 0 ? http_query_get(req, "flash") : NULL;
	if (flash != NULL && strlen(flash) == CHECKOUT_FLASH_TOKEN_LEN) {
		has_flash = checkout_flash_take(env->env_store, flash, o.ao_id, env_now_ms(env), msg);
	}
	snprintf(points, sizeof(points), "%lld", (long long)o.ao_points);
	if (checkout_page_begin(&b, "Your order") < 0 ||
	    buf_puts(&b, "<h1>Your order</h1>\n") < 0) {
		goto fail;
	}
	if (has_flash && checkout_flash_html(&b, msg) < 0) {
		goto fail;
	}
	if (buf_puts(&b, "<table id=\"order\">\n") < 0 || checkout_row(&b, "Order", o.ao_id) < 0 ||
	    checkout_row(&b, "Status", o.ao_status) < 0 ||
	    checkout_money_row(&b, "Amount", o.ao_amount, o.ao_currency) < 0 ||
	    checkout_money_row(&b, "Refunded", o.ao_refunded, o.ao_currency) < 0 ||
	    checkout_row(&b, "Points", points) < 0 ||
	    checkout_row(&b, "Fulfillment", o.ao_fulfillment) < 0 ||
	    checkout_row(&b, "Your reference",
			 o.ao_customer_ref[0] != '\0' ? o.ao_customer_ref : "\xe2\x80\x94") < 0 ||
	    checkout_time_row(&b, "Created", o.ao_created_ms) < 0 ||
	    checkout_time_row(&b, "Paid", o.ao_paid_ms) < 0 ||
	    checkout_time_row(&b, "Refunded at", o.ao_refunded_ms) < 0 ||
	    buf_puts(&b, "</table>\n") < 0) {
		goto fail;
	}
	if (stripe != NULL && strcmp(o.ao_status, "pending") == 0) {
		if (buf_printf(
			    &b,
			    "<form method=\"post\" action=\"/orders/%s/pay\">"
			    "<button type=\"submit\" id=\"pay\">Simulate payment</button></form>\n"
			    "<details class=\"how\"><summary>How this works</summary><p>Demo mode: "
			    "idemhook sends itself a Stripe-signed "
			    "<code>payment_intent.succeeded</code> callback for this order through "
			    "<code>/hooks/",
			    o.ao_id) < 0 ||
		    checkout_esc(&b, stripe->pc_name) < 0 ||
		    buf_puts(&b, "</code>, twice: the first pays the order and awards points, the "
				 "second is a duplicate and is absorbed.</p></details>\n") < 0) {
			goto fail;
		}
	}
	if (buf_printf(&b,
		       "<p><a href=\"/checkout\">Place another order</a> \xc2\xb7 "
		       "<a href=\"/api/orders/%s\">This order as JSON</a></p>\n",
		       o.ao_id) < 0 ||
	    checkout_page_end(&b, 0) < 0 || checkout_reply_html(ret, 200, &b) < 0) {
		goto fail;
	}
	checkout_headers(ret, "no-store");
	free(flash);
	return;
fail:
	free(flash);
	buf_finish(&b);
	checkout_internal(ret, "cannot build the order page");
}

/* ---- demo: a signed payment callback to ourselves ---- */

/* A demo payment between its route and its answer. The two deliveries go
 * out over HTTP to our own listener, like any provider's callback, from a
 * thread of their own: the request's connection is suspended meanwhile,
 * so even a listener with one thread is free to answer them. */
struct checkout_pay_job {
	const struct env *pj_env;
	struct config *pj_cf; /* a reference of its own, released at the end */
	const struct provider_conf *pj_pc;
	char pj_order_id[ORDERS_ID_LEN + 1];
	char pj_evt[16 + ORDERS_ID_LEN];
	char pj_path[16 + 128];
	char pj_url[CHECKOUT_SELF_URL_MAX];
	char *pj_pin; /* our certificate's key pin over TLS, else NULL */
	struct buf pj_body;
	int pj_status[2];
	int pj_replayed[2];
	int pj_sent;
	struct http_deferred *pj_defer;
};

static void checkout_pay_job_destroy(struct checkout_pay_job *pj)
{
	if (pj == NULL) {
		return;
	}
	if (pj->pj_cf != NULL) {
		env_config_release(pj->pj_env, pj->pj_cf);
	}
	free(pj->pj_pin);
	buf_finish(&pj->pj_body);
	free(pj);
}

/* POSTs the job's body, signed now, to our own listener and reads the
 * status and whether the answer was a replay. Returns 0 or -1 (logged). */
static int checkout_self_post(struct checkout_pay_job *pj, int *ret_status, int *ret_replayed)
{
	const struct provider_conf *pc = pj->pj_pc;
	struct httpc_headers hdrs;
	struct httpc_request hreq;
	struct httpc_response resp;
	const char *replayed;
	const char *why = "the signature headers could not be added";
	char err[HTTPC_ERR_MAX];

	httpc_headers_init(&hdrs);
	memset(&hreq, 0, sizeof(hreq));
	httpc_headers_add(&hdrs, "User-Agent", "idemhook-demo");
	httpc_headers_add(&hdrs, "Content-Type", "application/json");
	if (pc->pc_provider->p_sign(pc, pj->pj_body.buf_data, pj->pj_body.buf_len,
	                            env_now_ms(pj->pj_env) / 1000, pj->pj_evt, httpc_headers_add,
	                            &hdrs, &why) < 0 ||
	    hdrs.hch_n <= 2 || hdrs.hch_overflow) {
		log_err("checkout: demo payment: cannot sign the callback: %s", why);
		goto fail;
	}
	hreq.hcq_method = "POST";
	hreq.hcq_url = pj->pj_url;
	hreq.hcq_headers = &hdrs;
	hreq.hcq_body = pj->pj_body.buf_data;
	hreq.hcq_body_len = pj->pj_body.buf_len;
	hreq.hcq_response_max = CHECKOUT_SELF_REPLY_MAX;
	hreq.hcq_timeout_ms = CHECKOUT_SELF_TIMEOUT_S * 1000;
	hreq.hcq_pinned_key = pj->pj_pin;
	if (httpc_exchange(&hreq, &resp, err, sizeof(err)) < 0) {
		log_err("checkout: demo payment: our own listener %s: %s", pj->pj_url, err);
		goto fail;
	}
	replayed = httpc_response_header(&resp, "Idempotent-Replayed");
	*ret_status = (int)resp.hcr_status;
	*ret_replayed = replayed != NULL && strcasecmp(replayed, "true") == 0;
	httpc_response_finish(&resp);
	httpc_headers_finish(&hdrs);
	return 0;
fail:
	httpc_headers_finish(&hdrs);
	return -1;
}

/* The deliveries, on the job's own thread; then the answer is due. */
static void *checkout_pay_thread(void *arg)
{
	struct checkout_pay_job *pj = arg;
	int i;

	for (i = 0; i < 2; i++) {
		if (checkout_self_post(pj, &pj->pj_status[i], &pj->pj_replayed[i]) < 0) {
			break;
		}
		pj->pj_sent++;
	}
	/* pj belongs to the answer from here on. */
	http_resume(pj->pj_defer);
	return NULL;
}

/* The answer to a demo payment, on a server thread (req and ret NULL: the
 * client went away). */
static void checkout_pay_finish(void *arg, const struct http_request *req, struct reply *ret)
{
	struct checkout_pay_job *pj = arg;
	char token[CHECKOUT_FLASH_TOKEN_LEN + 1];
	char location[64 + ORDERS_ID_LEN];
	struct buf msg;
	int rc;

	buf_init(&msg, 0);
	if (req == NULL) {
		goto done;
	}
	if (pj->pj_sent == 2) {
		rc = buf_printf(
			&msg,
			"%s\nSent a signed Stripe callback (%s) to %s twice. First answer: %d%s. "
			"Second answer: %d%s.",
			pj->pj_status[0] / 100 == 2 ? "Payment received." : "The payment was not accepted.",
			pj->pj_evt, pj->pj_path, pj->pj_status[0],
			pj->pj_replayed[0] ? " (replayed)" : " (processed)", pj->pj_status[1],
			pj->pj_replayed[1] ? " with Idempotent-Replayed: true, the duplicate was absorbed"
					   : "");
	} else {
		rc = buf_printf(
			&msg,
			"Could not deliver the demo callback to our own listener (%d of 2 sent); "
			"see the daemon's log.",
			pj->pj_sent);
	}
	if (rc < 0 || checkout_flash_token(token) < 0 ||
	    checkout_flash_put_now(pj->pj_env->env_store, token, pj->pj_order_id, msg.buf_data,
				   env_now_ms(pj->pj_env)) < 0) {
		goto internal;
	}
	snprintf(location, sizeof(location), "/orders/%s?flash=%s", pj->pj_order_id, token);
	if (reply_set(ret, 303, NULL, NULL, 0) < 0 ||
	    reply_add_header(ret, "Location", location) < 0) {
		goto internal;
	}
	reply_add_header(ret, "Cache-Control", "no-store");
	checkout_vary_accept(ret);
	goto done;
internal:
	checkout_internal(ret, "demo payment: cannot keep the flash message or build the redirect");
	checkout_vary_accept(ret);
done:
	buf_finish(&msg);
	checkout_pay_job_destroy(pj);
}

static const char *checkout_self_host(const char *listen)
{
	if (listen == NULL || listen[0] == '\0' || strcmp(listen, "0.0.0.0") == 0) {
		return "127.0.0.1";
	}
	if (strcmp(listen, "::") == 0) {
		return "::1";
	}
	return listen;
}

/* Where our own listener answers (pj_url), and over TLS the pin of the
 * certificate it serves (pj_pin): a loopback connection cannot check the
 * public host name the certificate names, and needs no CA to trust the
 * key it holds itself. Returns 0 or -1 (logged). */
static int checkout_self_target(struct checkout_pay_job *pj, struct http_server *srv)
{
	const struct config *cf = pj->pj_cf;
	const char *host = checkout_self_host(cf->cf_listen_host);
	const char *cert_spec = config_get(cf, "server", "tls_cert");
	int tls = http_tls(srv);
	struct crypto_pubkey *key;
	char *pem = NULL;
	size_t pem_len = 0;
	char err[CONFIG_SECRET_ERR_MAX];
	int n;

	n = snprintf(pj->pj_url, sizeof(pj->pj_url),
		     strchr(host, ':') != NULL ? "%s://[%s]:%u%s" : "%s://%s:%u%s", tls ? "https" : "http",
		     host, http_port(srv), pj->pj_path);
	if (n < 0 || (size_t)n >= sizeof(pj->pj_url)) {
		log_err("checkout: demo payment: our own address is too long");
		return -1;
	}
	if (!tls) {
		return 0;
	}
	if (cert_spec == NULL) {
		log_err("checkout: demo payment: no [server] tls_cert to reach our own listener");
		return -1;
	}
	if (config_read_secret(cert_spec, &pem, &pem_len, err, sizeof(err)) < 0) {
		log_err("checkout: demo payment: [server] tls_cert, to reach our own listener, "
		        "cannot be read: %s",
		        err);
		return -1;
	}
	key = crypto_pubkey_load(pem, pem_len);
	free(pem);
	if (key == NULL || crypto_pubkey_pin(key, &pj->pj_pin) < 0) {
		crypto_pubkey_destroy(key);
		return -1;
	}
	crypto_pubkey_destroy(key);
	return 0;
}

static void checkout_pay(const struct env *env, struct config *cf, const struct http_request *req,
			 const char *id, struct reply *ret)
{
	const struct provider_conf *pc = checkout_stripe(cf);
	struct checkout_pay_job *pj = NULL;
	struct http_server *srv = env_http(env);
	struct api_order o;
	pthread_attr_t attr;
	pthread_t th;
	int64_t retry_after = 1;
	char cur[4];
	int rc;
	int i;

	if (api_rate_allow(cf, req->hr_client, env_now_ms(env), &retry_after) == 0) {
		char v[24];

		checkout_post_error(req, ret, 429, "rate_limited", "Too many requests",
		                    "Please wait a moment and try again.", NULL);
		snprintf(v, sizeof(v), "%lld", (long long)retry_after);
		reply_add_header(ret, "Retry-After", v);
		return;
	}
	if (pc == NULL) {
		checkout_post_error(
			req, ret, 409, "no_stripe_instance", "No Stripe instance",
			"Demo payments need a [provider NAME] section with type = stripe.", NULL);
		return;
	}
	if (!checkout_order_load(env, req, ret, id, &o)) {
		return;
	}
	pj = calloc(1, sizeof(*pj));
	if (pj == NULL) {
		goto internal;
	}
	buf_init(&pj->pj_body, 0);
	pj->pj_env = env;
	pj->pj_cf = env_config_retain(env, cf);
	pj->pj_pc = pc;
	snprintf(pj->pj_order_id, sizeof(pj->pj_order_id), "%s", o.ao_id);
	snprintf(pj->pj_evt, sizeof(pj->pj_evt), "evt_demo_%s", o.ao_id);
	snprintf(pj->pj_path, sizeof(pj->pj_path), "/hooks/%s", pc->pc_name);
	for (i = 0; i < 3; i++) {
		char ch = o.ao_currency[i];

		cur[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
	}
	cur[3] = '\0';
	/* One event id per order: pressing the button again is a duplicate too. */
	if (buf_printf(&pj->pj_body,
		       "{\"id\":\"evt_demo_%s\",\"object\":\"event\",\"type\":\"payment_intent."
		       "succeeded\","
		       "\"created\":%lld,\"livemode\":false,\"data\":{\"object\":{\"id\":\"pi_demo_"
		       "%s\","
		       "\"object\":\"payment_intent\",\"amount\":%lld,\"amount_received\":%lld,"
		       "\"currency\":\"%s\","
		       "\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}}}",
		       o.ao_id, (long long)(env_now_ms(env) / 1000), o.ao_id, (long long)o.ao_amount,
		       (long long)o.ao_amount, cur, o.ao_id) < 0) {
		goto internal;
	}
	/* No listener yet (a request ahead of its own start): nothing is sent,
	 * and the page says so. */
	pj->pj_defer = http_defer(req, checkout_pay_finish, pj);
	if (srv == NULL || checkout_self_target(pj, srv) < 0) {
		http_resume(pj->pj_defer);
		return;
	}
	rc = pthread_attr_init(&attr);
	if (rc == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&th, &attr, checkout_pay_thread, pj);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		log_err("checkout: demo payment: pthread_create: %s", strerror(rc));
		http_resume(pj->pj_defer);
	}
	return;
internal:
	checkout_pay_job_destroy(pj);
	checkout_internal(ret, "demo payment: cannot build the callback (out of memory)");
}

/* ---- routing ---- */

static void checkout_method_not_allowed(struct reply *ret, const char *allow)
{
	api_method_not_allowed(ret, allow);
}

int checkout_route(const struct env *env, struct config *cf, const struct http_request *req,
		   struct reply *ret)
{
	const char *path = req->hr_path;
	const char *method = req->hr_method;
	int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	char id[ORDERS_ID_LEN + 1];
	const char *rest;
	size_t n;

	if (strcmp(path, "/") == 0 && cf->cf_demo) {
		if (get) {
			checkout_demo_index(ret);
		} else {
			checkout_method_not_allowed(ret, "GET, HEAD");
		}
		return 1;
	}
	if (strcmp(path, "/checkout") == 0 || strcmp(path, "/checkout/") == 0) {
		if (get) {
			checkout_get(ret);
		} else if (strcmp(method, "POST") == 0) {
			checkout_post(env, cf, req, ret);
			if (ret->reply_status != 0) { /* else deferred: checkout_post_finish */
				checkout_vary_accept(ret);
			}
		} else {
			checkout_method_not_allowed(ret, "GET, HEAD, POST");
		}
		return 1;
	}
	if (strcmp(path, "/checkout.js") == 0) {
		if (!get) {
			checkout_method_not_allowed(ret, "GET, HEAD");
			return 1;
		}
		if (reply_set(ret, 200, "text/javascript; charset=utf-8", checkout_js,
			      checkout_js_len) < 0) {
			checkout_internal(ret, "cannot serve checkout.js (out of memory)");
			return 1;
		}
		reply_add_header(ret, "X-Content-Type-Options", "nosniff");
		reply_add_header(ret, "Cache-Control", "public, max-age=300");
		return 1;
	}
	if (strncmp(path, "/orders/", 8) != 0) {
		return 0;
	}
	rest = path + 8;
	n = strcspn(rest, "/");
	if (n == 0 || n > ORDERS_ID_LEN) {
		reply_problem(ret, 404, "not_found", "No such order",
		              "There is no order with this id.");
		return 1;
	}
	memcpy(id, rest, n);
	id[n] = '\0';
	rest += n;
	if (rest[0] == '\0') {
		if (get) {
			checkout_order_page(env, cf, req, id, ret);
			checkout_vary_accept(ret);
		} else {
			checkout_method_not_allowed(ret, "GET, HEAD");
		}
		return 1;
	}
	if (strcmp(rest, "/pay") == 0 && cf->cf_demo) {
		if (strcmp(method, "POST") == 0) {
			checkout_pay(env, cf, req, id, ret);
			if (ret->reply_status != 0) { /* else deferred: checkout_pay_finish */
				checkout_vary_accept(ret);
			}
		} else {
			checkout_method_not_allowed(ret, "POST");
		}
		return 1;
	}
	reply_problem(ret, 404, "not_found", "Not found",
	              "An order's page is /orders/{id}; there is nothing below it.");
	return 1;
}
