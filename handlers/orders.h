/* orders.h: the business handler: orders, refunds and the points ledger.
 *
 * Everything here runs inside the caller's unit of work (store_tx): no
 * network I/O. Status moves only through conditional updates, so a stale or
 * reordered event cannot move an order backwards. */
#ifndef IDEMHOOK_ORDERS_H
#define IDEMHOOK_ORDERS_H

#include <stdint.h>

#include "event.h"
#include "store.h"

#define ORDERS_ID_LEN 24 /* "ord_" + 20 base32 characters */

struct orders_conf {
	int64_t oc_points_num; /* points = floor(amount_minor * num / den) */
	int64_t oc_points_den;
};

struct orders_result {
	int or_refused;
	char or_reason[32]; /* "unknown_order", "amount_mismatch", "currency_mismatch" */
	char or_order_id[ORDERS_ID_LEN + 1];
	const char *or_effect; /* "paid", "refunded", "partially_refunded", "noop", "recorded" (static) */
};

/* Applies ev (from provider instance `provider`) to the orders it names.
 * Returns 0 with ret filled (applied, no-op or refused), or -1 on a store
 * error (the caller rolls back and answers 503). */
int orders_apply_event(struct store_tx *tx, const struct orders_conf *conf, const char *provider,
		       const struct event *ev, struct orders_result *ret);

/* Creates a pending order; writes its new id to ret_id. Returns 0 or -1. */
int orders_create(struct store_tx *tx, int64_t amount, const char *currency, const char *customer_ref,
		  char ret_id[ORDERS_ID_LEN + 1]);

/* Fills out with a fresh random order id. Returns 0 or -1. */
int orders_new_id(char out[ORDERS_ID_LEN + 1]);

#endif
