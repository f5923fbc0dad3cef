/* gc.h: cleanup of expired idempotency records, events, finished outbox rows
 * and old capture files, in small batches with pauses, never one long
 * transaction. */
#ifndef IDEMHOOK_GC_H
#define IDEMHOOK_GC_H

#include <stdint.h>

struct env;
struct config;
struct store;

struct gc_report {
	int64_t gr_records; /* idempotency records deleted (or that would be) */
	int64_t gr_events;
	int64_t gr_parked; /* parked events applied long enough ago (order_parked) */
	int64_t gr_outbox;
	int64_t gr_captures;
	int64_t gr_batches;
	/* bytes of the database and its WAL before and after free pages were
	 * given back; both 0 when nothing was given back */
	int64_t gr_file_before;
	int64_t gr_file_after;
	/* When a pass failed: what it was doing ("deleting events", "giving
	 * free pages back to the file system", ...; NULL before any), and whether the store failed
	 * there (1: busy, locked, a connection lost, a disk full, which the store logged and a new
	 * run may get past; 0: a failure of gc's own, logged by gc). */
	const char *gr_stopped_at;
	int gr_store_failed;
};

/* gr_stopped_at once every expired row is gone: the free pages that were
 * not given back yet stay in the file, where new rows reuse them. */
#define GC_STOPPED_FREE_PAGES "giving free pages back to the file system"

/* Checks the [gc] section's values (config_load refuses unknown keys),
 * logging each problem.
 * Returns 0 or -1. */
int gc_check_config(const struct config *cf);

/* One full pass at now_ms until nothing expired is left, then, when the free
 * pages make up a quarter of the file (and at least 1 MiB) and the database
 * has incremental vacuum, gives them back to the file system. dry_run
 * counts only. Returns 0, or -1 with *ret filled all the same: each batch
 * commits on its own, so what it counts went for good, and a new pass
 * goes on from there (gr_stopped_at, gr_store_failed say where and why). */
int gc_run(struct store *st, const struct config *cf, int64_t now_ms, int dry_run, struct gc_report *ret);

/* gc_run, telling progress(arg, what, so_far) after every batch (the
 * rows being deleted: "records", "events", ...; the report so far), on the calling thread. */
typedef void (*gc_progress_fn)(void *arg, const char *what, const struct gc_report *so_far);
int gc_run_progress(struct store *st, const struct config *cf, int64_t now_ms, int dry_run,
                    gc_progress_fn progress, void *arg, struct gc_report *ret);

/* Gives every free page back to the file system (gr_file_before/after):
 * in small units of work when the database has incremental vacuum, else by
 * rebuilding the file once (VACUUM, which also switches it to incremental
 * vacuum; writers wait meanwhile). Returns 0, or -1 with gr_stopped_at
 * ("free pages") and gr_store_failed set in *ret. */
int gc_vacuum(struct store *st, const struct config *cf, struct gc_report *ret);

struct gc_worker;

/* Starts the periodic cleanup thread ([gc] interval; it idles while the
 * interval is 0). NULL on a bad [gc] section or failure (logged). */
struct gc_worker *gc_worker_start(const struct env *env);
/* Takes [gc] interval from the app's current config at once: from 0 passes
 * start, to 0 they stop (a pass in progress ends after its batch), and a new
 * interval counts from the last pass, so one already due runs now. NULL is
 * a no-op. */
void gc_worker_reload(struct gc_worker *w);
/* Stops it, waiting for the current batch. NULL is a no-op. */
void gc_worker_stop(struct gc_worker *w);

#endif
