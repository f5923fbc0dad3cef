/* console_db.h: the operator's reads and actions on the database: event
 * filters and lists, one event, one order's timeline, the outbox with its
 * attempts, the audit log; dismissing and reprocessing failed events. The
 * console's pages and the CLI (events dismiss, events reprocess, audit list)
 * use it. All of the operator side's SQL on events, idempotency_records,
 * orders and outbox is here, through store.h. */
#ifndef IDEMHOOK_CONSOLE_DB_H
#define IDEMHOOK_CONSOLE_DB_H

#include <stddef.h>
#include <stdint.h>

#include "orders.h"

struct config;
struct store;
struct store_row;
struct store_tx;

#define CONSOLE_DB_REASON_MAX 500 /* bytes of a dismiss reason */
#define CONSOLE_DB_ACTOR_MAX 100  /* bytes of an actor name */
#define CONSOLE_DB_MSG_MAX 256

/* Which events a list (or a dismiss by filter) selects; NULL / 0 / -1 mean
 * any. Every field is matched exactly, except ef_key_prefix. */
struct console_db_filter {
	const char *ef_provider;   /* events.scope */
	const char *ef_outcome;    /* done or failed */
	const char *ef_reason;     /* the failure reason, or the effect of a done event */
	const char *ef_source;     /* callback or reconcile */
	const char *ef_order;      /* order_ref */
	const char *ef_key_prefix; /* idem_key starts with it */
	int64_t ef_since_ms;       /* received_at >= (0: any) */
	int64_t ef_until_ms;       /* received_at < (0: any) */
	int ef_open;               /* 1: failed, live, not dismissed (the alert's set) */
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

/* ---- dismissing failed events ---- */

enum console_db_result {
	CONSOLE_DB_OK = 0,
	CONSOLE_DB_UNKNOWN, /* no such row */
	CONSOLE_DB_REFUSED, /* not allowed from the row's state: ret_msg says why */
};

/* Dismisses failed event id with reason (required, 1..CONSOLE_DB_REASON_MAX
 * bytes): it stays failed but no longer counts as open. Recorded in the
 * audit log with the result, in the same transaction. Returns an enum
 * console_db_result with ret_msg, or -1 on a store error (nothing changed). */
int console_db_dismiss(struct store *st, int64_t now_ms, const char *actor, int64_t id,
                       const char *reason, char *ret_msg, size_t msg_size);

/* Dismisses every open failed event f selects (f's other fields narrow it;
 * ef_open is implied), in one transaction, but only when exactly expect of
 * them match (the count the operator confirmed); expect < 0 only counts.
 * ret_count gets the events matching. Each one dismissed gets its audit
 * row. Returns 0 (dismissed, or counted), 1 when the count is not expect
 * (nothing changed), -1 on a store error. */
int console_db_dismiss_filter(struct store *st, int64_t now_ms, const char *actor,
                              const struct console_db_filter *f, const char *reason, int64_t expect,
                              int64_t *ret_count);

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

#endif
