/* metrics.h: process-wide counters and histograms, rendered as Prometheus text. */
#ifndef IDEMHOOK_METRICS_H
#define IDEMHOOK_METRICS_H

#include <stdint.h>

struct buf;

/* One finished provider request: outcome is ingest_result_name() of it. */
void metrics_request(const char *provider, const char *outcome, double seconds);
/* A request refused before any claim, by reason slug. */
void metrics_rejected(const char *provider, const char *reason);
/* A unique-key conflict absorbed (duplicate delivery). */
void metrics_duplicate(const char *provider);
/* A duplicate key whose payload fingerprint differs. */
void metrics_mismatch(const char *provider);
/* An event acknowledged but not applied to an order (the business handler
 * refused it: unknown_order, amount_mismatch, ...), by reason slug. */
void metrics_unapplied(const char *provider, const char *reason);
/* A provider instance's series exported at 0 from the start, or from the
 * reload that adds it: a counter that first appears at 1 is missed by
 * increase() and rate(). Its requests for each outcome, its rejects for
 * each reason given, its duplicates, mismatches and latency; with
 * metrics_declare_unapplied its unapplied events for each reason; with
 * metrics_declare_reconcile its reconciliation counters; with
 * metrics_declare_fetch its thin events' fetch failures. Lists are
 * NULL-terminated; a series that exists keeps its count. */
void metrics_declare_provider(const char *provider, const char *const *outcomes,
                              const char *const *rejected);
void metrics_declare_unapplied(const char *provider, const char *const *reasons);
void metrics_declare_reconcile(const char *provider);
void metrics_declare_fetch(const char *provider);
/* The series of the HTTP listener named listener exported at 0 from its
 * start (as metrics_declare_provider's): its cuts for each reason of cuts,
 * its refusals for each status of statuses (0-terminated), its drains for
 * each kind of drains, its wakeups, lingering closes and resumes. cuts and
 * drains are NULL-terminated; a series that exists keeps its count. */
void metrics_declare_http(const char *listener, const char *const *cuts, const int *statuses,
                          const char *const *drains);
/* The HTTP listener named listener ("public", "admin"): a connection the
 * sweeper closed (reason: head_timeout, body_min_rate, make_room, drain),
 * a request answered before routing (status), a drain begun (kind: reload
 * or stop), a refused connection kept open to drop its unread body. */
void metrics_http_cut(const char *listener, const char *reason);
/* The sweeper woke a server thread that had stopped handling ready requests. */
void metrics_http_wakeup(const char *listener);
void metrics_http_refused(const char *listener, int status);
void metrics_http_drain(const char *listener, const char *kind);
void metrics_http_linger(const char *listener);
/* n deferred requests resumed since the last call, and the seconds from
 * their resume until their server thread took the answer up. */
void metrics_http_resumed(const char *listener, uint64_t n, double seconds);
/* A capture file that could not be written. */
void metrics_capture_failure(void);

/* A capture not written because of a bound of the spool; reason is one of
 * rejected_size, rejected_client_rate, rejected_rate, quota, free_space. */
void metrics_capture_skipped(const char *reason);
/* Those series exported at 0 from the start of a daemon whose capture is
 * on (as metrics_declare_provider's), one per reason of reasons
 * (NULL-terminated); a series that exists keeps its count. */
void metrics_declare_capture_skipped(const char *const *reasons);

/* The store's library and version (static text), the sqlite label of
 * idemhook_build_info: store_library_version(), given at start. */
void metrics_set_store_library(const char *version);
/* The process started at ms since the epoch (process_start_time_seconds). */
void metrics_set_start_time(int64_t ms);
/* Readiness as /readyz answers it (idemhook_ready). */
void metrics_set_ready(int ready);
/* A configuration reload: result METRICS_RELOAD_TAKEN (the generation and
 * the success time move on), METRICS_RELOAD_REFUSED (the running
 * configuration kept: nothing moves but the failure count), or
 * METRICS_RELOAD_PARTIAL (taken except [outbound]: the process runs on a
 * new configuration, so the generation moves on, but the reload counts as
 * failed and the success time stays). */
#define METRICS_RELOAD_REFUSED 0
#define METRICS_RELOAD_TAKEN 1
#define METRICS_RELOAD_PARTIAL 2
void metrics_reload(int result);
/* The keys a taken reload changed that need a restart
 * (idemhook_config_restart_pending): cleared, then added one by one. */
void metrics_restart_pending_clear(void);
void metrics_restart_pending_add(const char *section, const char *key);

/* One pass of the cleanup worker. */
struct metrics_gc_pass {
	int mg_ok;
	double mg_seconds;
	int64_t mg_records;
	int64_t mg_events;
	int64_t mg_outbox;
	int64_t mg_captures;
	int64_t mg_parked; /* applied parked events (order_parked rows) */
	int64_t mg_reclaimed_bytes; /* file bytes given back to the file system */
};
void metrics_gc_pass(const struct metrics_gc_pass *pass);

/* What one reconciliation run did for one provider instance
 * (docs/reconcile.md). */
struct metrics_reconcile {
	int64_t mr_orders_checked;
	int64_t mr_applied; /* events that changed an order */
	int64_t mr_known;   /* events recorded before, or that changed nothing */
	int64_t mr_refused; /* events refused by the business rules */
	int64_t mr_failed;  /* questions (or their events) that failed */
};
void metrics_reconcile_instance(const char *provider, const struct metrics_reconcile *m);
/* A thin event's full event could not be fetched after its retries
 * (fetch.h). */
void metrics_fetch_failure(const char *provider);
/* Thin events acknowledged and waiting for their full event. */
void metrics_set_fetch_waiting(int64_t n);
/* Outbound calls answered whose outcome the store refused, kept by the
 * worker (outbound.c) to be written again (idemhook_outbox_outcomes_unrecorded). */
void metrics_set_outbox_unrecorded(int64_t n);
/* One whole run: ok when no question failed. */
void metrics_reconcile_run(int ok);

/* The operator console's overview: the last successful cleanup pass and
 * reconciliation run (seconds since the epoch, 0 when none yet) and how
 * many of each failed. */
struct metrics_ops {
	int64_t mo_gc_last_success_s;
	uint64_t mo_gc_ok, mo_gc_failed;
	int64_t mo_reconcile_last_success_s;
	uint64_t mo_reconcile_ok, mo_reconcile_failed;
};
void metrics_ops_get(struct metrics_ops *ret);

/* Appends the Prometheus text exposition (format 0.0.4) of every counter
 * and histogram kept here; the store's own figures and the gauges read from
 * it follow from stats_render_metrics (stats.h). Returns 0 or -1. */
int metrics_render(struct buf *out);

/* The exposition's pieces, for the renderers of other modules: a family's
 * HELP and TYPE lines; and those with one unlabelled sample. 0 or -1. */
int metrics_text_header(struct buf *out, const char *name, const char *type, const char *help);
int metrics_text_single(struct buf *out, const char *name, const char *type, const char *help,
                        const char *value_fmt, ...) __attribute__((format(printf, 5, 6)));

/* Forgets every counter (tests). */
void metrics_reset(void);

#endif
