/* orders.h: the business handler: the payment lifecycle of orders, the
 * references they are known under, refunds, disputes and the points ledger.
 *
 * Everything here runs inside the caller's unit of work (store_tx): no
 * network I/O. Every change to an order is a compare-and-set on its revision,
 * and every effect is recorded once per provider reference (refund, dispute
 * step, award), so a repeated, stale or reordered event changes nothing it
 * should not. docs/orders.md describes the rules. */
#ifndef IDEMHOOK_ORDERS_H
#define IDEMHOOK_ORDERS_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "store.h"

#define ORDERS_ID_LEN 30 /* "ord_" + 10 base32 digits of time + 16 random */
#define ORDERS_REF_MAX 257 /* an order id or reference as callbacks carry them, NUL included */
#define ORDERS_EFFECTS_MAX 16 /* effects one unit reports (its event and parked ones) */

struct orders_conf {
	int64_t oc_points_num; /* points = floor(amount_minor * num / den) */
	int64_t oc_points_den;
};

struct orders_result {
	int or_refused;
	char or_reason[32]; /* "unknown_order", "amount_mismatch", "currency_mismatch", ... */
	char or_order_id[ORDERS_REF_MAX];
	/* What the event did to the order (static): "paid", "authorized",
	 * "refunded", "partially_refunded", "refund_failed", "disputed",
	 * "dispute_won", "dispute_lost", "capture_failed", "cancelled",
	 * "expired", "noop" (nothing left to change) or "recorded" (not a
	 * business event). */
	const char *or_effect;
	/* Every effect of the unit, in order: or_effect first, then those of
	 * events parked until this one made their payment known. */
	const char *or_effects[ORDERS_EFFECTS_MAX];
	size_t or_n_effects;
};

/* Every reason a business refusal of orders_apply_event carries
 * (or_reason), NULL-terminated: idemhook_events_unapplied_total exports
 * each at 0 from the start. */
extern const char *const orders_refusal_reasons[];

/* Applies ev (from provider instance `provider`) to the order it names, or
 * that one of its payment references belongs to. An event for a payment no
 * order is known under yet is parked and refused as unknown_order, then
 * applied when that payment's event arrives. Returns 0 with ret filled
 * (applied, no-op or refused), or -1 on a store error or a concurrent change
 * (the caller rolls back and answers 503). */
int orders_apply_event(struct store_tx *tx, const struct orders_conf *conf, const char *provider,
		       const struct event *ev, struct orders_result *ret);

/* Creates a pending order; writes its new id to ret_id. Returns 0 or -1. */
int orders_create(struct store_tx *tx, int64_t amount, const char *currency, const char *customer_ref,
		  char ret_id[ORDERS_ID_LEN + 1]);

/* orders_create for the order API client owner (NULL: none), who alone may
 * read the order back through the API unless configured otherwise. */
int orders_create_owned(struct store_tx *tx, const char *owner, int64_t amount, const char *currency,
			const char *customer_ref, char ret_id[ORDERS_ID_LEN + 1]);

/* Fills out with a fresh order id: "ord_", now_ms (ms since the epoch) in
 * ten base32 digits, then 80 random bits, with digits that sort as their
 * values do. Ids made later sort after earlier ones (within a millisecond,
 * at random), so the b-trees keyed by an order id (its primary key, the
 * points ledger's key, the events' order index) take new entries at their
 * right edge instead of at random leaves. Returns 0 or -1. */
int orders_new_id(int64_t now_ms, char out[ORDERS_ID_LEN + 1]);

#endif
