/* provider.h: what a payment provider profile is. One file per provider under
 * providers/, each exporting one const struct provider, listed in the
 * alphabetized table in providers.c. */
#ifndef IDEMHOOK_PROVIDER_H
#define IDEMHOOK_PROVIDER_H

#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "event.h"
#include "http.h"
#include "httpc.h"
#include "reply.h"

struct crypto_privkey;

/* A callback for `idemhook simulate` to build as the provider would send it. */
enum provider_sim_kind {
	PROVIDER_SIM_PAYMENT = 0,
	PROVIDER_SIM_REFUND,
	PROVIDER_SIM_THIN_PAYMENT, /* the payment as a thin notification (Stripe event destinations) */
};

/* Bytes in an account context: account ids ("acct_" and some 16
 * characters) joined by "/", a few levels deep at most. */
#define PROVIDER_CONTEXT_MAX 255

/* Whether s is an account context as Stripe writes one (event.h
 * ev_context): account ids, letters, digits and "_", joined by "/"; at most
 * PROVIDER_CONTEXT_MAX bytes. What a thin event may carry and what
 * `simulate --context` takes. 1 or 0. */
int provider_context_valid(const char *s);

struct provider_sim {
	enum provider_sim_kind ps_kind;
	const char *ps_id;         /* fresh for every callback (lower-case hex): ids derive from it */
	const char *ps_order_id;   /* our order id; stable provider references derive from it */
	int64_t ps_amount;         /* minor units: the payment, or this refund */
	int64_t ps_refunded_total; /* refunds: all refunded so far, this one included */
	int64_t ps_order_amount;   /* the order's whole amount */
	char ps_currency[4];       /* ISO 4217, upper case */
	const struct crypto_privkey *ps_key; /* the throwaway key pair, for schemes signed
						with the provider's own private key; or NULL */
	/* A thin payment's account context (provider_context_valid), or NULL
	 * for the instance's own account. */
	const char *ps_context;
};

/* Why a request was refused before any claim (nothing stored). */
struct provider_verdict {
	int pv_status; /* 400, 401 or 403 */
	const char *pv_reason; /* slug for metrics and logs: "missing_signature",
				  "malformed_signature", "bad_signature", "stale_timestamp",
				  "malformed_body", "missing_key", "wrong_app", ... (static) */
	const char *pv_detail; /* one human sentence (static), or NULL */
	/* stale_timestamp: how far the signed time was from ours (signed
	 * minus now, seconds) and the tolerance it broke, for the log. */
	int pv_has_skew;
	int64_t pv_skew_s;
	int64_t pv_tolerance_s;
};

/* ---- reconciliation: asking the provider (docs/reconcile.md) ---- */

/* How an instance can be asked what became of payments whose callbacks
 * never arrived. */
enum provider_reconcile_mode {
	PROVIDER_RECONCILE_NONE = 0, /* it cannot: the why says what to do instead */
	PROVIDER_RECONCILE_ORDERS,   /* order by order, by our order id */
	PROVIDER_RECONCILE_EVENTS,   /* its own list of recent events, page by page */
};

/* One question. */
struct provider_query {
	const char *pq_order_id; /* ORDERS: the order asked about */
	int64_t pq_since_s;      /* EVENTS: events created at or after ... */
	int64_t pq_until_s;      /* ... and at or before */
	const char *pq_cursor;   /* EVENTS: the page after this cursor; NULL for the first */
	/* One event by its id (a thin notification's full event), or NULL;
	 * asked whatever the instance's mode (docs/providers.md). */
	const char *pq_event_id;
	/* With pq_event_id: what the signed notification said of it, its type
	 * and the id of the object it is about (NULL: not known). An answer
	 * that says otherwise is FAILED (fetch_mismatch), never an event. */
	const char *pq_event_type;
	const char *pq_event_related;
	/* With pq_event_id: the account the event is in (event.h
	 * ev_context), which the request names; NULL for the instance's own. */
	const char *pq_event_context;
};

/* The request a profile builds for a query; the caller sends it (timeouts,
 * retries, rate limits). init/finish work on caller-owned memory. */
struct provider_request {
	const char *prq_method;          /* static: "GET" or "POST" */
	struct buf prq_url;              /* absolute http(s) URL */
	struct httpc_headers prq_headers;
	struct buf prq_body;             /* empty for GET */
};

void provider_request_init(struct provider_request *r);
void provider_request_finish(struct provider_request *r);

enum provider_answer_verdict {
	PROVIDER_ANSWER_OK = 0, /* authentic and understood: its events (maybe none) */
	PROVIDER_ANSWER_RETRY,  /* the provider asks to try again later (busy, rate limited) */
	PROVIDER_ANSWER_FAILED, /* refused (bad signature, malformed) or a permanent error */
};

#define PROVIDER_ANSWER_TEXT_MAX 256

/* What a profile made of the answer to a query. init/finish work on
 * caller-owned memory. */
struct provider_answer {
	enum provider_answer_verdict pa_verdict;
	const char *pa_reason; /* RETRY/FAILED: slug ("bad_signature", "provider_error", ...), static */
	char pa_detail[PROVIDER_ANSWER_TEXT_MAX]; /* RETRY/FAILED: one line for the operator, or "" */
	/* ORDERS: the provider's word for where the payment stands
	 * ("TRADE_SUCCESS", "NOTPAY", "TRADE_NOT_EXIST"), or "" */
	char pa_state[64];
	/* One sentence that needs the operator's attention even though the
	 * answer was understood (e.g. a refund the query cannot size), or "" */
	char pa_note[PROVIDER_ANSWER_TEXT_MAX];
	char *pa_cursor; /* EVENTS: the next page's cursor (malloc'd), NULL at the end */
	/* The events the answer carries, verified and normalised exactly as
	 * the same facts arriving by callback, with the callback's key where
	 * the provider has one (docs/reconcile.md). */
	struct event_batch pa_events;
};

void provider_answer_init(struct provider_answer *a);
void provider_answer_finish(struct provider_answer *a);

/* Fills a with verdict, reason and a printf-formatted detail; returns -1
 * for FAILED and RETRY, 0 for OK (so a profile can return it). */
int provider_answer_set(struct provider_answer *a, enum provider_answer_verdict verdict, const char *reason,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

struct provider {
	const char *p_name; /* type name used in config: type = stripe */
	int64_t p_retry_window_s; /* how long the provider keeps retrying */
	int p_capture; /* 1: authorisation and capture are separate events (capture = manual) */
	/* The profile's own keys in its [provider NAME] section, NULL-terminated,
	 * besides those every provider section takes (type, tolerance, ...,
	 * listed in config.c): any other key refuses the configuration. */
	const char *const *p_keys;
	/* Parses the instance's section (secrets from files) into *ret_state.
	 * Returns 0, or -1 with the problem logged (naming the key, never a secret). */
	int (*p_create)(const struct provider_conf *pc, void **ret_state);
	void (*p_destroy)(void *state);
	/* Authenticates req over its raw bytes at now_s and normalizes it into
	 * ret_batch (one event, or one per item for batches). On refusal returns
	 * -1 with ret_verdict set and the batch left empty. */
	int (*p_receive)(const struct provider_conf *pc, const struct http_request *req, int64_t now_s,
			 struct event_batch *ret_batch, struct provider_verdict *ret_verdict);
	/* The acknowledgement for one processed event: stored and replayed. For a
	 * batch every item's ack is the same and is the batch's answer. */
	int (*p_ack)(const struct provider_conf *pc, const struct event *ev, const struct event_outcome *out,
		     struct reply *ret);
	/* Optional: the answer for a refusal or transient failure (never
	 * stored) in the provider's own format. NULL for a provider without one:
	 * its refusals are problem+json (provider_error). */
	int (*p_error)(const struct provider_conf *pc, int status, const char *reason, const char *detail,
		       struct reply *ret);
	/* Optional: builds the authentication headers for body as the provider
	 * would send it at time now_s with the instance's first secret (demo
	 * payments, replay --to re-signing, benchmarks). Calls add_header for
	 * each header. Returns 0, or -1 with *ret_why (static: one clause for
	 * the operator) when this instance cannot sign this request: no secret
	 * of its own to sign with, no event_id where the scheme signs one, no
	 * memory. NULL for a scheme we never sign by design (the provider's own
	 * private key, or a signature inside the body: WeChat Pay, Alipay,
	 * Adyen): replay --to sends those requests as captured. */
	int (*p_sign)(const struct provider_conf *pc, const void *body, size_t body_len,
	              int64_t now_s, const char *event_id,
	              void (*add_header)(void *arg, const char *name, const char *value), void *arg,
	              const char **ret_why);
	/* Optional: the event_id p_sign takes to sign again req, a request
	 * this instance accepted (replay --to): the id it keys on when that
	 * comes in a signed header, borrowed from req; NULL when the id is
	 * in the body, or without this. */
	const char *(*p_sign_id)(const struct provider_conf *pc, const struct http_request *req);
	/* Optional: the Authorization value the instance requires of every
	 * request (HTTP Basic credentials), or NULL when it requires none.
	 * A capture never keeps that field's value; replay puts this back in
	 * a capture that was accepted when it came. */
	const char *(*p_required_authorization)(const struct provider_conf *pc);
	/* Optional (idemhook simulate): builds sim as the provider sends it at
	 * now_s, signed as the provider signs (shared secrets: the instance's
	 * first; private keys: sim->ps_key): the body into ret_body, and every
	 * header, Content-Type included, through add_header. Returns 0, or -1
	 * with the reason logged (a key that is missing or does not match). */
	int (*p_simulate)(const struct provider_conf *pc, const struct provider_sim *sim, int64_t now_s,
			  struct buf *ret_body,
			  void (*add_header)(void *arg, const char *name, const char *value), void *arg);
	/* 1 when the provider sends thin notifications whose full event the
	 * fetch worker asks for by id (Stripe's event destinations): their
	 * fetch failures are counted per instance. */
	int p_thin_events;
	/* Optional (reconciliation): how this instance can be asked; NULL is
	 * PROVIDER_RECONCILE_NONE. With NONE, *ret_why (static) says why and
	 * what to do instead; the other modes may set it too (NULL: none). */
	enum provider_reconcile_mode (*p_reconcile_mode)(const struct provider_conf *pc, const char **ret_why);
	/* Builds the request for q at now_s (signed where the provider wants
	 * it), into ret (initialised by the caller). Returns 0, or -1 (logged). */
	int (*p_reconcile_request)(const struct provider_conf *pc, const struct provider_query *q, int64_t now_s,
				   struct provider_request *ret);
	/* Verifies and reads the answer resp to q, at now_s, into ret
	 * (initialised by the caller): its verdict, and for OK its events. The
	 * caller has already retried 408, 429 and 5xx answers. Returns 0 for
	 * OK, -1 otherwise (ret says why); no network I/O. */
	int (*p_reconcile_answer)(const struct provider_conf *pc, const struct provider_query *q,
				  const struct httpc_response *resp, int64_t now_s, struct provider_answer *ret);
};

/* The profile called name, or NULL. */
const struct provider *provider_find(const char *name);

/* Loads and validates the configuration at path (NULL: the built-in demo)
 * with its [provider NAME] instances, each made by its profile: what the
 * daemon and every command load. NULL on any error (logged, as
 * config_load_with). */
struct config *provider_config_load(const char *path);

/* provider_config_load without reading any provider's secret (config.h,
 * CONFIG_LOAD_SECRETS): the shape, for commands that verify and sign
 * nothing; each instance's pc_state is NULL. */
struct config *provider_config_load_shape(const char *path);

/* provider_config_load with flags (CONFIG_LOAD_*, config.h): with
 * CONFIG_LOAD_PROBLEMS, what the daemon and the commands load, so that
 * confcheck_run shows the problems of the other sections in the same run
 * before they refuse the file (cf_problems). */
struct config *provider_config_load_opts(const char *path, unsigned flags);

/* NULL-terminated, alphabetized. */
extern const struct provider *const provider_table[];

/* The answer for a refusal or transient failure at pc's path (never
 * stored): through p_error where the provider has a format of its own, else
 * an RFC 9457 problem titled by its status. Returns 0, or -1 when out of
 * memory. */
int provider_error(const struct provider_conf *pc, int status, const char *reason,
                   const char *detail, struct reply *ret);

/* Whether pc's provider answers refusals in a format of its own (p_error):
 * 1, or 0 for problem+json. */
int provider_has_format(const struct provider_conf *pc);

/* Whether req is a callback pc's profile accepts at now_s (authentic,
 * fresh, well-formed): 1 or 0. Nothing is stored; for telling a genuine
 * callback refused before its profile (allow_from) from anyone else's. */
int provider_verifies(const struct provider_conf *pc, const struct http_request *req,
                      int64_t now_s);

/* The answer at pc's path for a refusal made outside its profile (the
 * listener's limits, a method other than POST, no memory): through p_error
 * where the provider has a format of its own (the detail, else the title,
 * as its message); else the problem with its own title, as on every other
 * path. Replaces ret's status, content type and body, not its headers.
 * Returns 0, or -1 when out of memory (ret unchanged). */
int provider_refusal(const struct provider_conf *pc, int status, const char *slug,
                     const char *title, const char *detail, struct reply *ret);

#endif
