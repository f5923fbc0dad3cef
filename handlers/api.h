/* api.h: the order API with Idempotency-Key (POST/GET /api/orders). */
#ifndef IDEMHOOK_API_H
#define IDEMHOOK_API_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "env.h"
#include "http.h"
#include "orders.h"
#include "reply.h"
#include "store.h"

#define API_KEY_MAX 255  /* Idempotency-Key length, characters */
#define API_TEXT_MAX 128 /* customer_ref, line item sku/name, bytes */

/* Handles /api/... requests (including CORS preflight). Returns 1 when the
 * path belongs to the API (ret filled), 0 otherwise. */
int api_route(const struct env *env, const struct config *cf, const struct http_request *req,
	      struct reply *ret);

/* Checks cf's [api] section as the order API will read it (rate, burst,
 * body_max, order_reads, tokens, origins), the tokens' secrets too when
 * read_secrets. Returns 0, or -1 with each problem logged (file, line,
 * key). */
int api_config_check(const struct config *cf, int read_secrets);

/* Decorates an answer the listener made itself before routing (413 over
 * [server] body_max, 414, 431, 400): for a request to /api/... from an
 * allowed origin it adds the CORS headers, so that the browser shows the
 * problem instead of a network error. Other paths: ret unchanged. */
void api_refused(const struct config *cf, const struct http_request *req, struct reply *ret);

/* The 408 the listener sends at /api and below to a request it cannot
 * read (a head too slow, or a body too slow from a request without an
 * Origin), which no route sees: fills ret (reply_init'd) with the problem
 * and the CORS headers cf's [api] cors_origins gives a request without an
 * Origin (Access-Control-Allow-Origin: * under "*", Vary: Origin with
 * origins listed). Returns 1, 0 when cors_origins is empty or the section
 * unusable (ret untouched: the listener's plain 408 will do), -1 out of
 * memory. */
int api_timeout_reply(const struct config *cf, struct reply *ret);

/* Parses an Idempotency-Key field value (IETF draft "The Idempotency-Key
 * HTTP Header Field"): a quoted sf-string or a bare token, 1..API_KEY_MAX
 * printable ASCII characters. Writes the key (unquoted, unescaped) to ret_key
 * and returns 0, or returns -1 (ret_key untouched). */
int api_idempotency_key_parse(const char *value, char ret_key[API_KEY_MAX + 1]);

/* How much req's Accept fields (RFC 9110 12.5.1) want the media type type
 * ("text/html"): the weight, 0 to 1000 (q=0.5 is 500), of the most specific
 * range that matches it (the type itself, then its major type with any
 * subtype, then any type), with that rank (3, 2, 1; 0 when none matched:
 * weight 0) in *ret_rank; of equally specific ones, the highest weight.
 * Parameters other than q are not read; an element that does not parse
 * counts for nothing. Without Accept: 1000, rank 0 (any type will do). */
int api_accept_quality(const struct http_request *req, const char *type, int *ret_rank);

/* Canonical form of a JSON text: object keys sorted, no whitespace, numbers
 * and strings in one spelling, so that key order and layout do not matter
 * and values do. Duplicate keys and nesting past 16 levels are refused.
 * Returns 0 with *ret malloc'd (NUL-terminated), or -1. */
int api_canonical_json(const void *json, size_t len, char **ret, size_t *ret_len);

/* SHA-256 of api_canonical_json(json): the request fingerprint. 0 or -1. */
int api_fingerprint(const void *json, size_t len, unsigned char ret[32]);

/* An order body as POST /api/orders accepts it. */
struct api_order_body {
	int64_t ob_amount;
	char ob_currency[4];
	char ob_customer_ref[API_TEXT_MAX + 1]; /* "" when none */
	int ob_has_customer_ref;
	unsigned char ob_fingerprint[32]; /* SHA-256 of the canonical JSON */
};

#define API_DETAIL_MAX 256 /* a refusal's detail, bytes with its NUL */

/* Reads body through the strict JSON reader (json.h) and validates it as an
 * order. Returns 0 with ret filled, or -1 with *ret_slug ("malformed_json"
 * or "invalid_order") and ret_detail (a sentence for the client: the
 * reader's reason, the field at fault, an unknown field's name) saying
 * why; ret is then untouched. */
int api_order_body_parse(const void *body, size_t len, struct api_order_body *ret,
                         const char **ret_slug, char ret_detail[API_DETAIL_MAX]);

/* The rules an order's own fields meet, on every way in (POST /api/orders,
 * `idemhook order create`): amount 1..MONEY_MAX_MINOR minor units,
 * currency an ISO 4217 code of any case (written upper case to
 * ret_currency), customer_ref NULL (none) or text_field_ok with
 * API_TEXT_MAX. Returns 0, or -1 with *ret_detail (a static sentence
 * naming the field) and ret_currency untouched. */
int api_order_fields_check(int64_t amount, const char *currency, const char *customer_ref,
                           char ret_currency[4], const char **ret_detail);

/* One order as GET shows it (the checkout page shares it). */
struct api_order {
	char ao_id[ORDERS_ID_LEN + 1];
	char ao_status[24];
	int64_t ao_amount;
	char ao_currency[4];
	int64_t ao_refunded;
	char ao_customer_ref[API_TEXT_MAX + 1]; /* "" when none */
	char ao_fulfillment[16];
	int64_t ao_points; /* SUM of the points ledger */
	int64_t ao_created_ms;
	int64_t ao_paid_ms;     /* 0 when not paid */
	int64_t ao_refunded_ms; /* 0 when not refunded */
};

/* 1 if id has the shape of an order id, else 0. */
int api_order_id_valid(const char *id);

/* Reads order id through a read connection at now_ms: 1 with ret filled, 0
 * when there is no such order, -1 on a store error. */
int api_order_load(struct store *st, int64_t now_ms, const char *id, struct api_order *ret);

/* Token bucket per client address ([api] rate, burst). 1 when the request
 * may go on; 0 when over the limit, with ret_retry_after_s set. */
int api_rate_allow(const struct config *cf, const char *client, int64_t now_ms,
		   int64_t *ret_retry_after_s);

/* Counts (metrics, label e.g. "api:orders") and logs one finished claim of
 * the order API or the checkout page; t0_ms is when the request began,
 * now_ms when it ended. */
void api_claim_account(const char *label, const char *client, const char *key,
		       enum store_outcome outcome, int status, int64_t t0_ms, int64_t now_ms);

/* Exports the series api_claim_account counts at 0, for both labels
 * (api:orders, api:checkout) and each outcome it gives: the order API and
 * the checkout page are always routed, so their series are known from the
 * start (metrics.h). */
void api_metrics_declare(void);

/* Makes ret a 405 problem+json whose Allow header and detail name allow
 * ("GET, HEAD"): the order API's and the checkout page's. */
void api_method_not_allowed(struct reply *ret, const char *allow);

/* "2026-12-02T10:20:12.345Z" for ms since the epoch (out: 32 bytes). */
void api_format_time(int64_t ms, char out[32]);

#endif
