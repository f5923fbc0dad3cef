/* gc.h: cleanup of expired idempotency records, events, finished outbox rows
 * and old capture files, in small batches with pauses, never one long
 * transaction. */
#ifndef IDEMHOOK_GC_H
#define IDEMHOOK_GC_H

#include <stdint.h>

struct app;
struct config;
struct store;

struct gc_report {
	int64_t gr_records; /* idempotency records deleted (or that would be) */
	int64_t gr_events;
	int64_t gr_outbox;
	int64_t gr_captures;
	int64_t gr_batches;
};

/* Checks the [gc] section (unknown keys, bad values), logging each problem.
 * Returns 0 or -1. */
int gc_check_config(const struct config *cf);

/* One full pass at now_ms until nothing expired is left. dry_run counts only.
 * Returns 0 or -1. */
int gc_run(struct store *st, const struct config *cf, int64_t now_ms, int dry_run, struct gc_report *ret);

struct gc_worker;

/* Starts the periodic cleanup thread ([gc] interval). NULL when disabled or
 * on failure (logged). */
struct gc_worker *gc_worker_start(struct app *app);
/* Stops it, waiting for the current batch. NULL is a no-op. */
void gc_worker_stop(struct gc_worker *w);

#endif
