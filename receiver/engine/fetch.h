/* fetch.h: the fetch worker: the full event of each thin notification
 * (Stripe event destinations), asked of the provider as reconciliation asks
 * and applied through the callback's pipeline exactly once
 * (docs/providers.md, "Thin events"). */
#ifndef IDEMHOOK_FETCH_H
#define IDEMHOOK_FETCH_H

struct env;
struct fetch_worker;

/* Starts the worker: a pass at once (thin events left from before a
 * restart), then one per kick, every 30 s while some wait, and hourly.
 * NULL on failure (logged). */
struct fetch_worker *fetch_worker_start(const struct env *env);

/* A thin notification was committed: a pass soon. NULL is a no-op. */
void fetch_worker_kick(struct fetch_worker *w);

/* Stops it; a fetch in progress ends after its current request. NULL is a
 * no-op. */
void fetch_worker_stop(struct fetch_worker *w);

#endif
