/* outbox.h: outbound work written in the same transaction as the business
 * change (SQL through store.h only); the curl worker lives in outbound.c. */
#ifndef IDEMHOOK_OUTBOX_H
#define IDEMHOOK_OUTBOX_H

#include "config.h"
#include "store.h"

/* Called by the ingest path inside the event's unit of work after the
 * business handler changed order_id with `effect` ("paid", "refunded",
 * "partially_refunded"): queues the outbound calls configured for it.
 * Returns 0 (also when nothing is configured), or -1 (store error). */
int outbox_on_effect(struct store_tx *tx, const struct config *cf, const char *provider, const char *order_id,
		     const char *effect);

#endif
