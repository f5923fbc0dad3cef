/* outbox.h: outbound work written in the same transaction as the business
 * change (SQL through store.h only); the curl worker lives in outbound.c.
 *
 * A row moves pending -> delivering (leased) -> succeeded, or -> retry_wait
 * -> ... -> dead; an operator may cancel or retry it. Its status is its own:
 * the order only carries fulfillment_status (pending / notified / failed /
 * compensated) and needs_operator. Every attempt of a row sends the row's
 * idem_key as Idempotency-Key. */
#ifndef IDEMHOOK_OUTBOX_H
#define IDEMHOOK_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

struct orders_conf;

#define OUTBOX_SECTION "outbound"
#define OUTBOX_CALLS_MAX 8 /* call types in [outbound] */
#define OUTBOX_KEY_LEN 40  /* "obx_" + UUID v4 */
#define OUTBOX_RESPONSE_MAX_DEFAULT                                                                \
	(64 * 1024)                 /* bytes of a response read, then the transfer ends */
#define OUTBOX_ERROR_MAX 200        /* bytes of last_error kept per row */
#define OUTBOX_ATTEMPTS_KEPT 20     /* newest attempts kept per row in outbox_attempts */
#define OUTBOX_REFUND_CALL "refund" /* call type of compensation refund rows */

/* Effects a call type may be queued on (bit set); docs/outbound.md. */
#define OUTBOX_ON_PAID 0x1u
#define OUTBOX_ON_REFUNDED 0x2u
#define OUTBOX_ON_PARTIALLY_REFUNDED 0x4u
#define OUTBOX_ON_AUTHORIZED 0x8u
#define OUTBOX_ON_REFUND_FAILED 0x10u
#define OUTBOX_ON_DISPUTED 0x20u
#define OUTBOX_ON_DISPUTE_WON 0x40u
#define OUTBOX_ON_DISPUTE_LOST 0x80u
#define OUTBOX_ON_CAPTURE_FAILED 0x100u
#define OUTBOX_ON_CANCELLED 0x200u
#define OUTBOX_ON_EXPIRED 0x400u
#define OUTBOX_ON_ALL 0x7ffu

enum outbox_compensation {
	OUTBOX_COMP_NONE = 0,
	OUTBOX_COMP_REFUND,
	OUTBOX_COMP_MANUAL,
};

struct outbox_call_conf {
	char *occ_name; /* "notify" for notify_url, ... */
	char *occ_url;
	unsigned occ_on; /* OUTBOX_ON_* */
	enum outbox_compensation occ_compensation;
};

/* Backoff after a transient failure: full jitter over an exponential window. */
struct outbox_policy {
	int64_t op_base_ms;       /* window of the first retry */
	int64_t op_cap_ms;        /* largest window */
	unsigned op_max_attempts; /* attempts before the row dies */
	int64_t op_max_age_ms;    /* no attempt starts later than window_start + this */
};

/* The [outbound] section, parsed. */
struct outbox_conf {
	struct outbox_call_conf oc_calls[OUTBOX_CALLS_MAX];
	size_t oc_n_calls;
	struct outbox_policy oc_policy;
	unsigned oc_concurrency; /* transfers at once */
	int64_t oc_connect_timeout_ms;
	int64_t oc_timeout_ms; /* whole transfer */
	int64_t oc_lease_ms;   /* a delivering row's lease */
	int64_t oc_poll_ms;    /* idle worker looks for due rows this often */
	size_t oc_response_max;
	char *oc_ca_file;         /* extra CA bundle for private CAs, or NULL */
	char *oc_refund_base_url; /* Stripe API base, default https://api.stripe.com */
	/* Secrets, loaded only when asked for (outbox_conf_load with_secrets). */
	unsigned char *oc_signing_key; /* Standard Webhooks key (whsec_ decoded), or NULL */
	size_t oc_signing_key_len;
	char *oc_refund_key; /* Stripe secret key for the refunds API, or NULL */
};

/* Parses [outbound] from cf into ret (zeroed first). Secrets are read only
 * when with_secrets. Returns 1 when at least one call type is configured, 0
 * when none (ret holds defaults), -1 on a bad key (logged with the key; ret
 * then finished). */
int outbox_conf_load(const struct config *cf, int with_secrets, struct outbox_conf *ret);
/* 1 when a and b (both loaded) would deliver alike: the same calls,
 * policy, limits, URLs and secrets; else 0. */
int outbox_conf_equal(const struct outbox_conf *a, const struct outbox_conf *b);
/* Frees what the conf owns; safe on a zeroed or half-loaded conf. */
void outbox_conf_finish(struct outbox_conf *oc);

/* Parses a duration with an optional "ms" suffix ("250ms"), else as
 * config_parse_duration ("5", "5s", "2m", ...). Returns 0 or -1. */
int outbox_parse_ms(const char *s, int64_t *ret_ms);

/* ---- pure delivery policy (no clock of its own: callers pass now and a
 * random number, so tests drive it) ---- */

enum outbox_class {
	OUTBOX_SUCCESS = 0, /* 2xx */
	OUTBOX_TRANSIENT,   /* 408, 425, 429, 5xx, timeouts, connection errors */
	OUTBOX_PERMANENT,   /* any other answer: the row dies at once */
};

/* Classifies an attempt by its HTTP status; 0 means no HTTP answer came back
 * (connection refused or closed, timeout, TLS failure). */
enum outbox_class outbox_classify(long http_status);

/* The full-jitter delay before retry number `attempts` (1 = after the first
 * failure): uniform in [0, min(cap, base * 2^(attempts-1))], picked by rnd. */
int64_t outbox_backoff_ms(const struct outbox_policy *p, unsigned attempts, uint64_t rnd);

/* Parses a Retry-After value (delta-seconds or an IMF-fixdate HTTP-date)
 * into ms from now_ms (never negative). Returns 0, or -1 when malformed. */
int outbox_retry_after_ms(const char *value, int64_t now_ms, int64_t *ret_ms);

/* When to try again after `attempts` attempts of a row whose window started
 * at window_start_ms, the last one failing transiently at now_ms:
 * now + max(backoff, retry_after_ms) (retry_after_ms < 0: none). Returns
 * the time, or -1 when the row must die (attempts used up, or the time would
 * pass window_start + max age). */
int64_t outbox_next_attempt_ms(const struct outbox_policy *p, unsigned attempts,
                               int64_t window_start_ms, int64_t now_ms, int64_t retry_after_ms,
                               uint64_t rnd);

/* The Standard Webhooks v1 signature "v1,<base64 HMAC-SHA256>" over
 * "<msg_id>.<ts>.<body>" with key (already base64-decoded). Writes a
 * malloc'd string to ret. Returns 0 or -1. */
int outbox_sign(const unsigned char *key, size_t key_len, const char *msg_id, int64_t ts,
                const void *body, size_t body_len, char **ret);

/* Decodes a "whsec_<base64>" secret (the prefix is optional). Returns 0 with
 * a malloc'd key, or -1. */
int outbox_signing_key(const char *secret, size_t len, unsigned char **ret, size_t *ret_len);

/* ---- writing rows (inside the caller's unit of work) ---- */

/* Called by the ingest path inside the event's unit of work after the
 * business handler changed order_id with `effect` ("paid", "refunded",
 * "disputed", ... as orders.h lists them): queues the outbound calls
 * configured for it; "noop" and "recorded" queue nothing.
 * Returns 0 (also when nothing is configured), or -1 (store error). */
int outbox_on_effect(struct store_tx *tx, const struct config *cf, const char *provider,
                     const char *order_id, const char *effect);

/* Like outbox_on_effect with an already parsed conf. */
int outbox_queue_effect(struct store_tx *tx, const struct outbox_conf *oc, const char *provider,
                        const char *order_id, const char *effect);

struct outbox_new {
	const char *on_order_id; /* may be NULL */
	const char *on_call_type;
	const char *on_effect;
	const char *on_provider; /* may be NULL */
	const char *on_url;
	const char *on_content_type;
	const void *on_body;
	size_t on_body_len;
	enum outbox_compensation on_compensation;
	int64_t on_parent_id; /* 0 when none */
};

/* Inserts a pending row due now with a fresh idempotency key. ret_id may be
 * NULL. Returns 0 or -1. */
int outbox_enqueue(struct store_tx *tx, const struct outbox_new *n, int64_t *ret_id);

/* ---- the worker's side (each call is its own unit of work) ---- */

/* A leased row: what one delivery needs (owned copies). */
struct outbox_row {
	int64_t or_id;
	char *or_order_id;
	char *or_call_type;
	char *or_url;
	char *or_content_type;
	char *or_body;
	size_t or_body_len;
	char *or_idem_key;
	unsigned or_attempts; /* including the leased one */
	int64_t or_window_start_ms;
	int64_t or_lease_token;
};

void outbox_row_finish(struct outbox_row *row);

/* Puts every row left 'delivering' (by a crash or an unfinished shutdown;
 * on a shared database only those whose lease ran out) back in the queue,
 * due now, without counting the call that was cut, which is kept in the
 * row's attempt history and last error. ret_n (may be NULL) gets how many.
 * 0 or -1. */
int outbox_release_all(struct store *st, int64_t now_ms, int64_t *ret_n);

/* The earliest time a row is due (pending/retry_wait next_attempt_at, or an
 * expired 'delivering' lease), leaving out the n_held rows in held (the
 * caller's: never leased again while it holds them). Returns 1 with
 * ret_ms, 0 when none, -1. */
int outbox_next_due(struct store *st, int64_t now_ms, const int64_t *held, size_t n_held,
                    int64_t *ret_ms);

/* Leases up to max due rows (status delivering, lease_until now+lease_ms,
 * attempts + 1, new lease token) into rows[]. A row whose lease expired is
 * taken over without counting again: the cut call goes to its attempt
 * history and last error. ret_n gets how many. 0 or -1. */
int outbox_lease(struct store *st, int64_t now_ms, int64_t lease_ms, size_t max,
                 struct outbox_row *rows, size_t *ret_n);

/* outbox_lease with oc's lease time, each row pointed (in the row too) at
 * the URL its call type has in oc (refund rows: oc's refund_base_url), so
 * a URL changed by a reload applies to rows already queued. A call type oc
 * does not name keeps the URL it was queued with. The n_held rows in held
 * (the caller's, in flight or with an outcome not recorded yet) are never
 * taken over, even once their lease ran out. 0 or -1. */
int outbox_lease_current(struct store *st, const struct outbox_conf *oc, int64_t now_ms, size_t max,
                         const int64_t *held, size_t n_held, struct outbox_row *rows,
                         size_t *ret_n);

/* What one attempt came to. */
struct outbox_result {
	long ors_http_status;  /* 0 when no HTTP answer */
	const char *ors_error; /* transport error text, or NULL */
	const char *ors_location; /* a 3xx answer's Location as sent (untrusted), or NULL */
	const char *ors_body;  /* response body (capped), may be NULL */
	size_t ors_body_len;
	int64_t ors_retry_after_ms; /* -1 when none */
	int64_t ors_latency_ms; /* from the start of the transfer to its end; 0 when unknown */
};

#define OUTBOX_LOCATION_MAX 120 /* bytes of a redirect's Location kept, "..." included */

/* Writes the part of a redirect's Location (untrusted) an operator may
 * read into out: no user name or password, the query and fragment cut to
 * "?..." / "#...", bytes other than printable ASCII (and the backslash)
 * as \xNN, at most OUTBOX_LOCATION_MAX bytes (then ending in "..."). */
void outbox_location_text(const char *loc, char *out, size_t size);

/* Records an attempt's outcome for a leased row, if the lease token still
 * holds: succeeded, retry_wait (next attempt from outbox_next_attempt_ms with
 * rnd), or dead with the call type's compensation in the same unit of work.
 * A succeeded refund row applies the refund to the order (orders_apply_event,
 * so points are clawed back once). Returns 0, 1 when the lease was lost
 * (nothing changed), -1 on a store error. */
int outbox_complete(struct store *st, const struct outbox_conf *oc, const struct orders_conf *orc,
                    const struct outbox_row *row, const struct outbox_result *res, int64_t now_ms,
                    uint64_t rnd);

/* One finished attempt, for outbox_complete_many. */
struct outbox_attempt {
	const struct outbox_row *oa_row;
	struct outbox_result oa_res;
	uint64_t oa_rnd;   /* jitter for this row's backoff */
	int oa_unrecorded; /* set by outbox_complete_many: the store refused it */
	/* set by outbox_complete_many: nothing written, the row's lease had
	 * moved on (its lease ran out and it was taken over, by another
	 * receiver or an operator's retry): the history shows the call as
	 * interrupted, and the row's new holder calls again with its key */
	int oa_overtaken;
};

/* Records n outcomes in one unit of work (one commit for a burst of finished
 * transfers); when that unit fails, each is recorded in its own. Returns 0,
 * or -1 when something could not be recorded: each such attempt has
 * oa_unrecorded set (its row keeps its lease: the caller may record it
 * again, or release it). */
int outbox_complete_many(struct store *st, const struct outbox_conf *oc,
                         const struct orders_conf *orc, struct outbox_attempt *attempts, size_t n,
                         int64_t now_ms);

/* The end of the error of an attempt-history line that max_attempts does
 * not count: a call given back (released at a stop, cut by a crash, its
 * lease taken over, its outcome not recorded). Such a line has no HTTP
 * status, and the next call carries the same attempt number. */
#define OUTBOX_UNCOUNTED_MARK "(not counted)"

/* 1 when a history line (its HTTP status, 0 when none, and its error, or
 * NULL) is a counted attempt, 0 when it is a call given back. */
int outbox_attempt_counted(long http_status, const char *error);

/* The size that holds any outbox_attempt_label. */
#define OUTBOX_LABEL_MAX 48

/* Writes the ordinal (`#`) of a history line to out: "N" for the counted
 * call of attempt N, "N.K" for the K-th call given back under attempt N
 * (group: its place, 1 the oldest, among the row's calls given back under
 * that attempt number). Kept with the line, it does not change as older lines
 * are trimmed. */
void outbox_attempt_label(char *out, size_t size, int64_t attempt, int64_t group, int counted);

/* Gives a leased row back, due now, without counting the attempt
 * (shutdown). res, when the call went out, is kept in the row's attempt
 * history and last error (NULL: it was never sent). Returns 0, 1 when its
 * lease had moved on (taken over: nothing written), or -1. */
int outbox_release(struct store *st, const struct outbox_row *row, const struct outbox_result *res,
                   int64_t now_ms);

/* ---- operator transitions (CLI) ---- */

enum outbox_admin {
	OUTBOX_ADMIN_OK = 0,
	OUTBOX_ADMIN_UNKNOWN, /* no row with that id */
	OUTBOX_ADMIN_ILLEGAL, /* not allowed from the row's status */
};

/* retry: dead, cancelled or retry_wait -> pending, due now, attempts and
 * max-age window reset (refused once a refund compensation ran for it).
 * cancel: pending or retry_wait -> cancelled, no compensation.
 * compensate: dead or cancelled -> runs the call type's compensation (manual
 * when it has none); on a row whose operator flag is set it records the
 * operator's fix (needs_operator cleared, fulfillment compensated).
 * Each runs as one unit of work at now_ms. Returns an enum outbox_admin with
 * ret_msg (msg_size bytes) saying why, or -1 on a store error. */
int outbox_admin_retry(struct store *st, int64_t id, int64_t now_ms, char *ret_msg,
                       size_t msg_size);
int outbox_admin_cancel(struct store *st, int64_t id, int64_t now_ms, char *ret_msg,
                        size_t msg_size);
int outbox_admin_compensate(struct store *st, const struct outbox_conf *oc, int64_t id,
                            int64_t now_ms, char *ret_msg, size_t msg_size);

/* One row as `outbox list` shows it (borrowed for the callback). */
struct outbox_info {
	int64_t oi_id;
	const char *oi_order_id;
	const char *oi_call_type;
	const char *oi_effect;
	const char *oi_status;
	const char *oi_compensation;
	const char *oi_comp_state;
	int64_t oi_parent_id;
	int64_t oi_attempts;
	int64_t oi_next_attempt_at;
	int64_t oi_last_status; /* 0 when none */
	const char *oi_last_error;
	const char *oi_idem_key;
	const char *oi_fulfillment; /* the order's fulfillment_status, or NULL */
	int oi_needs_operator;
	int64_t oi_created_at;
};

/* Calls fn for each row, oldest first, optionally filtered by status and/or
 * order id (NULL: any). fn returns 0 to go on. Returns 0 or -1. */
int outbox_list(struct store *st, const char *status, const char *order_id,
                int (*fn)(void *arg, const struct outbox_info *info), void *arg);

/* 1 when s names a row status. */
int outbox_status_valid(const char *s);

#endif
