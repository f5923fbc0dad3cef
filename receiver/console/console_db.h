/* console_db.h: the operator's reads and actions on the database: event
 * filters and lists, one event, one order's timeline, the outbox with its
 * attempts, the audit log; dismissing and reprocessing failed events. The
 * console's pages and the CLI (events dismiss, events reprocess, audit list)
 * use it. All of the operator side's SQL on events, idempotency_records,
 * orders and outbox is here, through store.h. */
#ifndef IDEMHOOK_CONSOLE_DB_H
#define IDEMHOOK_CONSOLE_DB_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "orders.h"

struct config;
struct outbox_conf;
struct store;
struct store_row;
struct store_tx;

#define CONSOLE_DB_REASON_MAX 500 /* characters of a dismiss reason (the form's maxlength) */
#define CONSOLE_DB_ACTOR_MAX 100  /* bytes of an actor name */
#define CONSOLE_DB_MSG_MAX 256
#define CONSOLE_DB_STATUSES_MAX 8 /* outbox statuses of one list */
/* The console's pages wait this long for their reads, all of a page's
 * together (as /metrics waits for its gauges): a hung or slow database
 * answers 503, not never. */
#define CONSOLE_DB_WAIT_MS 1500
#define CONSOLE_DB_WAIT_TEXT "1.5 s" /* CONSOLE_DB_WAIT_MS, as the pages say it */
/* What a read waited for (wait_ms > 0) returns when the database did not
 * answer in time; the read ends later on its own, in the background. */
#define CONSOLE_DB_LATE (-2)
/* A wait_ms that says the caller's time is spent: CONSOLE_DB_LATE at once,
 * nothing read. */
#define CONSOLE_DB_WAIT_SPENT UINT_MAX
#define CONSOLE_DB_ROWS_MAX (64 * 1024 * 1024) /* bytes of one waited-for read's rows */

/* Which events a list (or a dismiss by filter) selects; NULL / 0 / -1 mean
 * any. Every field is matched exactly, except ef_key_prefix. */
struct console_db_filter {
	const char *ef_provider;   /* events.scope */
	const char *ef_outcome;    /* done, failed or fetching (a thin event) */
	const char *ef_reason;     /* the failure reason, or the effect of a done event */
	const char *ef_source;     /* callback or reconcile */
	const char *ef_order;      /* order_ref */
	const char *ef_key_prefix; /* idem_key starts with its bytes */
	int64_t ef_since_ms;       /* received_at >= (0: any) */
	int64_t ef_until_ms;       /* received_at < (0: any) */
	int ef_open;               /* 1: failed, live, not dismissed (the alert's set) */
	int ef_parked;             /* 1: parked, still waiting for their payment */
	int ef_dismissed;          /* -1 any, 0 not dismissed, 1 dismissed */
	int ef_test_mode;          /* -1 any, 0 live, 1 test mode */
};

void console_db_filter_init(struct console_db_filter *f);

/* ---- the audit log ---- */

/* Appends one row to the audit log inside tx: actor (cli:USER,
 * console:TOKEN), action (events.dismiss, ...), target (event:ID, ...),
 * reason (or NULL), result (ok, refused: ..., error). Returns 0 or -1. */
int console_db_audit_tx(struct store_tx *tx, const char *actor, const char *action,
                        const char *target, const char *reason, const char *result);

/* console_db_audit_tx in a unit of its own at now_ms. */
int console_db_audit(struct store *st, int64_t now_ms, const char *actor, const char *action,
                     const char *target, const char *reason, const char *result);

/* One audit row (borrowed for the callback). */
struct console_db_audit_row {
	int64_t ar_id;
	int64_t ar_at;
	const char *ar_actor;
	const char *ar_action;
	const char *ar_target;
	const char *ar_reason; /* or NULL */
	const char *ar_result;
};

/* Calls fn for up to limit audit rows with id < before_id (0: newest),
 * newest first; actor or action (NULL: any) filter exactly. Returns 0 or -1. */
int console_db_audit_list(struct store *st, int64_t now_ms, const char *actor, const char *action,
                          int64_t before_id, int64_t limit,
                          int (*fn)(void *arg, const struct console_db_audit_row *row), void *arg);
/* The same, waited for at most wait_ms (see "the console's reads"). */
int console_db_audit_list_within(struct store *st, int64_t now_ms, unsigned wait_ms,
                                 const char *actor, const char *action, int64_t before_id,
                                 int64_t limit,
                                 int (*fn)(void *arg, const struct console_db_audit_row *row),
                                 void *arg);

/* ---- outbox transitions ---- */

/* Runs the operator's transition op ("retry", "cancel", or "compensate",
 * which needs oc) on outbox row id at now_ms (outbox.h's outbox_admin_*),
 * then records it in the audit log as actor's, as the console and the CLI
 * both do: action outbox.OP, target outbox:ID, reason (or NULL), result
 * "ok: MSG", "refused: MSG" or "error"; nothing for a row that does not
 * exist. An audit row that cannot be written is logged. Returns as
 * outbox_admin_*: an enum outbox_admin with ret_msg, or -1 on a store
 * error (or an op it does not know). */
int console_db_outbox_admin(struct store *st, const struct outbox_conf *oc, int64_t now_ms,
                            const char *actor, const char *op, int64_t id, const char *reason,
                            char *ret_msg, size_t msg_size);

/* ---- dismissing failed events (and thin events waiting) ---- */

enum console_db_result {
	CONSOLE_DB_OK = 0,
	CONSOLE_DB_UNKNOWN, /* no such row */
	CONSOLE_DB_REFUSED, /* not allowed from the row's state: ret_msg says why */
};

/* 1 when reason is 1 to CONSOLE_DB_REASON_MAX characters, else 0. A UTF-8
 * sequence counts as one character, any other byte as one too; a browser's
 * maxlength counts UTF-16 units, never fewer, so what the console's form
 * lets through is accepted. */
int console_db_reason_ok(const char *reason);

/* Dismisses event id with reason (required, console_db_reason_ok): a
 * failed one stays failed but no longer counts as open; a thin event
 * waiting for its full event (fetching) stays unapplied but is no longer
 * fetched, counted as waiting or kept by gc past its retention. Recorded in
 * the audit log with the result, in the same transaction. Returns an enum
 * console_db_result with ret_msg, or -1 on a store error (nothing changed). */
int console_db_dismiss(struct store *st, int64_t now_ms, const char *actor, int64_t id,
                       const char *reason, char *ret_msg, size_t msg_size);

/* Dismisses every event f selects that a dismissal by id would accept and
 * nobody dismissed yet: failed ones (ef_outcome NULL or "failed") or thin
 * events waiting for their full event ("fetching"; any other ef_outcome is
 * logged and gives -1); live ones unless ef_test_mode says 1 (ef_open is
 * not needed, and ignored). f's other fields narrow it. In one
 * transaction, and only when exactly expect of them match (the count the
 * operator confirmed); expect < 0 only counts. ret_count gets the events
 * matching. Each one dismissed gets its audit row. Returns 0 (dismissed,
 * or counted), 1 when the count is not expect (nothing changed), -1 on a
 * store error. */
int console_db_dismiss_filter(struct store *st, int64_t now_ms, const char *actor,
                              const struct console_db_filter *f, const char *reason, int64_t expect,
                              int64_t *ret_count);

/* How many events a dismissal by f would take now (the count
 * console_db_dismiss_filter confirms), read as the console's reads are:
 * waited for at most wait_ms. Returns 0 with ret_count, -1, or
 * CONSOLE_DB_LATE. */
int console_db_dismiss_count_within(struct store *st, int64_t now_ms, unsigned wait_ms,
                                    const struct console_db_filter *f, int64_t *ret_count);

/* ---- reprocessing a failed event ---- */

enum console_db_rp_state {
	CONSOLE_DB_RP_DONE = 0,
	CONSOLE_DB_RP_UNKNOWN,
	CONSOLE_DB_RP_NOT_FAILED,
	CONSOLE_DB_RP_PROVIDER_REFUSED,
};

struct console_db_reprocess {
	enum console_db_rp_state rp_state;
	struct orders_result rp_res; /* DONE: what the handler made of it */
	int rp_reply_updated;        /* the stored reply follows the new outcome */
};

/* Runs failed event id through the business handler again, in one unit of
 * work: the order still moves only through conditional updates, the event
 * row and the idempotency record get the new outcome and reply, and the
 * attempt goes into the audit log as actor's. Returns 0 with ret filled, or
 * -1 on a store error (nothing changed). */
int console_db_reprocess(struct store *st, const struct config *cf, int64_t now_ms,
                         const char *actor, int64_t id, struct console_db_reprocess *ret);

/* ---- the console's reads ----
 * Each calls fn for each row (borrowed for the call; fn returns 0 to go on,
 * 1 to stop) in one read transaction at now_ms, and returns 0 or -1. The
 * columns of each are listed in order. wait_ms 0 waits as long as the
 * database takes (the CLI); otherwise the read runs on the store's own
 * thread (store_call_owned) and is waited for at most wait_ms (what is
 * left of the page's CONSOLE_DB_WAIT_MS: console_wait): CONSOLE_DB_LATE
 * when it did not end in time, at once while an earlier one still has
 * not, and at once for CONSOLE_DB_WAIT_SPENT (fn is then never called). */
typedef int (*console_db_row_fn)(void *arg, const struct store_row *row);

/* Events f selects with id < before_id (0: newest), newest first, at most
 * limit (keyset pagination: no OFFSET). Columns: id, received_at, scope,
 * idem_key, kind, order_ref, outcome, detail (reason when failed, else the
 * effect), source, test_mode, dismissed_at, reprocessed. */
int console_db_events(struct store *st, int64_t now_ms, unsigned wait_ms,
                      const struct console_db_filter *f, int64_t before_id, int64_t limit,
                      console_db_row_fn fn, void *arg);

/* 1 when the events table holds a row of scope (a provider instance since
 * removed from the file keeps its history), 0 when none, -1 on failure. */
int console_db_scope_known(struct store *st, int64_t now_ms, unsigned wait_ms, const char *scope);

/* One event with its idempotency record. Columns 0..18: id, scope, idem_key,
 * type, kind, order_ref, payment_ref, refund_ref, amount, currency,
 * refund_cumulative, payload, outcome, effect, reason, received_at,
 * processed_at, reprocessed, source; then 19 test_mode, 20 dismissed_at,
 * 21 dismissed_by, 22 dismiss_reason, 23 the record's status, 24
 * reply_status, 25 reply_content_type, 26 reply_headers, 27 reply_body,
 * 28 the record's updated_at, 29 context (a thin event's account, or NULL). */
int console_db_event(struct store *st, int64_t now_ms, unsigned wait_ms, int64_t id,
                     console_db_row_fn fn, void *arg);

/* Audit rows about target ("event:12"), newest first, at most limit. */
int console_db_audit_for(struct store *st, int64_t now_ms, unsigned wait_ms, const char *target,
                         int64_t limit,
                         int (*fn)(void *arg, const struct console_db_audit_row *row), void *arg);

/* One order. Columns: id, amount, currency, status, refunded_amount,
 * customer_ref, provider, payment_ref, fulfillment_status, needs_operator,
 * created_at, paid_at, refunded_at, updated_at, disputed_amount,
 * chargeback_amount, owner, points (the ledger's total: awards less
 * clawbacks, as idemhook order show prints it). */
int console_db_order(struct store *st, int64_t now_ms, unsigned wait_ms, const char *id,
                     console_db_row_fn fn, void *arg);

/* An order's whole timeline, oldest first, as one list of rows of five
 * columns: at (ms), what ("event", "refund", "dispute", "points",
 * "parked", "outbox"), the row's id (or 0), a one-line title, detail. */
int console_db_order_timeline(struct store *st, int64_t now_ms, unsigned wait_ms, const char *id,
                              console_db_row_fn fn, void *arg);

/* Outbox rows with status (NULL: any; or several, separated by commas, up
 * to CONSOLE_DB_STATUSES_MAX) and id < before_id (0: newest), newest first,
 * at most limit. Columns: id, order_id, call_type, effect,
 * status, attempts, next_attempt_at, last_status, last_error, comp_state,
 * created_at, updated_at. */
int console_db_outbox(struct store *st, int64_t now_ms, unsigned wait_ms, const char *status,
                      int64_t before_id, int64_t limit, console_db_row_fn fn, void *arg);

/* Outbox rows of one order, oldest first (columns as console_db_outbox). */
int console_db_outbox_of_order(struct store *st, int64_t now_ms, unsigned wait_ms,
                               const char *order_id, console_db_row_fn fn, void *arg);

/* One outbox row. Columns: id, order_id, call_type, effect, provider, url,
 * content_type, body, idem_key, compensation, comp_state, parent_id,
 * status, attempts, window_start, next_attempt_at, last_status,
 * last_error, created_at, updated_at, delivered_at. */
int console_db_outbox_row(struct store *st, int64_t now_ms, unsigned wait_ms, int64_t id,
                          console_db_row_fn fn, void *arg);

/* Its attempts, newest first. Columns: id, attempt, at, http_status, error,
 * latency_ms, excerpt, and, for a call given back, its place among the
 * row's calls given back under the same attempt number (1: the oldest),
 * for outbox_attempt_label. */
int console_db_outbox_attempts(struct store *st, int64_t now_ms, int64_t id, console_db_row_fn fn,
                               void *arg);
int console_db_outbox_attempts_within(struct store *st, int64_t now_ms, unsigned wait_ms,
                                      int64_t id, console_db_row_fn fn, void *arg);

/* Ids of the outbox rows with status (dead, retry_wait, cancelled), oldest
 * first, at most limit: what a bulk retry selects. */
int console_db_outbox_ids(struct store *st, int64_t now_ms, unsigned wait_ms, const char *status,
                          int64_t limit, console_db_row_fn fn, void *arg);

/* The overview's figures. */
struct console_db_overview {
	int64_t ov_parked;        /* events ef_parked selects */
	int64_t ov_audit_last_at; /* ms, 0 when none */
};
int console_db_overview(struct store *st, int64_t now_ms, struct console_db_overview *ret);

#endif
