/* reconcile.h: reconciliation: asking the providers what became of payments
 * whose callbacks never arrived, and feeding each answer through the
 * callback's own pipeline (profile normalisation, idempotency store,
 * handlers, outbox). `idemhook reconcile` runs it once; the daemon's worker
 * every [reconcile] interval. docs/reconcile.md has the rules. */
#ifndef IDEMHOOK_RECONCILE_H
#define IDEMHOOK_RECONCILE_H

#include <stddef.h>
#include <stdint.h>

#include "provider.h"

struct env;
struct buf;
struct config;
struct store;

#define RECONCILE_SECTION "reconcile"

/* The [reconcile] section, parsed. */
struct reconcile_conf {
	int64_t rc_interval_s;    /* the daemon's worker, 0 = off (default) */
	int64_t rc_older_than_s;  /* orders and events younger than this are left to their
	                             callbacks (default 15m) */
	int64_t rc_lookback_s;    /* how far back orders and events are looked at (default 3d) */
	int64_t rc_timeout_ms;    /* one request, whole (default 10 s) */
	unsigned rc_retries;      /* attempts after the first for transient failures (default 3) */
	int64_t rc_retry_base_ms; /* first backoff window, doubling (default 1 s) */
	unsigned rc_max_orders;   /* orders asked about per instance and run (default 500) */
	unsigned rc_max_pages;    /* pages of one listing per instance and run (default 1000) */
	size_t rc_max_bytes;      /* bytes of a listing's answers per instance and run (256M) */
};

/* Parses [reconcile] of cf into ret. Returns 0, or -1 with the key named. */
int reconcile_conf_load(const struct config *cf, struct reconcile_conf *ret);

/* Where an event listing got to, per provider instance (the worker keeps
 * them so that each pass lists only what the last one did not). */
#define RECONCILE_MARKS_MAX 32

struct reconcile_marks {
	struct {
		char rm_name[64];
		int64_t rm_through_s; /* events created up to here were all seen */
	} rm_items[RECONCILE_MARKS_MAX];
	size_t rm_n;
};

struct reconcile_options {
	const char *ro_provider; /* only this instance, or NULL: every one */
	int64_t ro_older_than_s; /* < 0: [reconcile] older_than */
	int64_t ro_since_ms;     /* orders and events created at or after; 0: now - lookback */
	int ro_dry_run;          /* ask, and report what would change; change nothing */
	/* Waits ms between attempts; returns 1 to give up (the daemon is
	 * stopping). NULL: a plain sleep. */
	int (*ro_sleep)(void *arg, int64_t ms);
	void *ro_sleep_arg;
	struct reconcile_marks *ro_marks; /* or NULL: list the whole window */
	/* One order only (the console's "reconcile now", reconcile --order),
	 * or NULL: ORDERS instances ask about this order whatever its status
	 * and age; EVENTS instances list the window and take only the events
	 * that name this order or its payment. Read from the order unless set:
	 * the instance (its provider, when a payment named one that is
	 * configured), the window (from a minute before it was created, up to
	 * now: ro_older_than_s < 0 means 0 here). */
	const char *ro_order;
	const char *ro_payment_ref; /* set by reconcile_run from the order */
};

enum reconcile_result {
	RECONCILE_APPLIED = 0, /* the event changed an order */
	RECONCILE_KNOWN,       /* recorded before (same key), or it changed nothing */
	RECONCILE_REFUSED,     /* recorded, refused by the business rules (unknown_order, ...) */
	RECONCILE_WOULD_APPLY, /* dry run: not recorded yet */
	RECONCILE_FAILED,      /* the question, its answer or the store failed: nothing applied */
	RECONCILE_NOTE,        /* understood, but it needs a look (the detail says why) */
};

const char *reconcile_result_name(enum reconcile_result r);

/* One line of the report: an event found, a question that failed, a note. */
struct reconcile_item {
	enum reconcile_result ri_result;
	char *ri_order;        /* our order id, or NULL */
	char *ri_key;          /* the event's idempotency key, or NULL */
	char *ri_type;         /* the provider's event type or state word, or NULL */
	const char *ri_kind;   /* event kind name, or NULL */
	const char *ri_effect; /* applied: what the handler did ("paid", ...) */
	char *ri_detail;       /* failed, refused, note: why; or NULL */
};

#define RECONCILE_ITEMS_MAX 1000 /* lines kept per instance; the counts go on */

struct reconcile_instance {
	char *rn_name;       /* the instance ([provider NAME]) */
	const char *rn_type; /* its profile */
	enum provider_reconcile_mode rn_mode;
	const char *rn_why; /* NONE: why not and what to do instead (static) */
	int64_t rn_orders_checked;
	int64_t rn_events_found;
	int64_t rn_applied;
	int64_t rn_known;
	int64_t rn_refused;
	int64_t rn_would_apply;
	int64_t rn_failed;
	int64_t rn_requests; /* HTTP exchanges, retries included */
	int64_t rn_pages;    /* EVENTS: pages read */
	int64_t rn_bytes;    /* EVENTS: bytes of the answers taken (pages), not of errors */
	int64_t rn_held_max; /* EVENTS: most events held at once (one page's) */
	struct reconcile_item *rn_items;
	size_t rn_n_items;
	size_t rn_items_dropped; /* past RECONCILE_ITEMS_MAX */
};

struct reconcile_report {
	int rr_dry_run;
	int64_t rr_since_ms; /* the window asked about */
	int64_t rr_until_ms;
	struct reconcile_instance *rr_instances;
	size_t rr_n;
	/* the sums over the instances */
	int64_t rr_orders_checked, rr_events_found, rr_applied, rr_known, rr_refused,
	        rr_would_apply, rr_failed;
	int rr_order_unknown; /* ro_order names no order (reconcile_run returned -1) */
	/* ro_since_ms is not before the window's end, now minus the older-than
	 * age (reconcile_run returned -1, rr_since_ms and rr_until_ms set) */
	int rr_window_empty;
};

/* One run over cf's provider instances (or ro_provider alone): every
 * instance that can be asked is asked, each answer goes through the
 * pipeline (dry run: only looked up), and ret gets what happened (finish
 * it). A failed question is reported and the run goes on. Returns 0, or -1
 * when no run was possible (bad [reconcile], unknown ro_provider: logged). */
int reconcile_run(struct store *st, const struct config *cf, const struct reconcile_options *opt,
                  struct reconcile_report *ret);

/* Frees what the report owns; a zeroed report is a no-op. */
void reconcile_report_finish(struct reconcile_report *r);

/* The report for people, and as JSON (docs/reconcile.md). Return 0 or -1. */
int reconcile_format_text(const struct reconcile_report *r, struct buf *out);
int reconcile_format_json(const struct reconcile_report *r, struct buf *out);

/* Asks pc for the one event event_id (a thin notification's full event,
 * fetch.h) as reconciliation asks: the same HTTP client, timeouts, retries
 * with backoff and Retry-After ([reconcile] timeout, retries, retry_base)
 * and the instance's key. type and related (NULL: not checked) are what
 * the signed notification said (provider_query pq_event_type,
 * pq_event_related): an answer about another is refused. context (NULL:
 * the instance's own account) is the account the event is in, which the
 * question names (pq_event_context, Stripe-Context). sleep_fn waits
 * between attempts (returns 1 to give up; NULL: a plain sleep). ret
 * (initialised here; finish it) gets the answer: 0 with the event in
 * pa_events, or -1 with the verdict FAILED and its reason and detail. */
int reconcile_fetch(const struct config *cf, const struct provider_conf *pc, const char *event_id,
                    const char *type, const char *related, const char *context,
                    int (*sleep_fn)(void *arg, int64_t ms), void *sleep_arg,
                    struct provider_answer *ret);

/* ---- the daemon's worker ---- */

struct reconcile_worker;

/* Starts the periodic worker ([reconcile] interval; it idles while the
 * interval is 0, the default). NULL on a bad [reconcile] section or
 * failure (logged). */
struct reconcile_worker *reconcile_worker_start(const struct env *env);
/* Takes [reconcile] interval from the app's current config at once, as the
 * cleanup worker does (gc.h). NULL is a no-op. */
void reconcile_worker_reload(struct reconcile_worker *w);
/* Stops it; a run in progress ends after its current request. NULL is a
 * no-op. */
void reconcile_worker_stop(struct reconcile_worker *w);

#endif
