/* metrics.h: process-wide counters and histograms, rendered as Prometheus text. */
#ifndef IDEMHOOK_METRICS_H
#define IDEMHOOK_METRICS_H

struct buf;
struct store;

/* One finished provider request: outcome is ingest_result_name() of it. */
void metrics_request(const char *provider, const char *outcome, double seconds);
/* A request refused before any claim, by reason slug. */
void metrics_rejected(const char *provider, const char *reason);
/* A unique-key conflict absorbed (duplicate delivery). */
void metrics_duplicate(const char *provider);
/* A duplicate key whose payload fingerprint differs. */
void metrics_mismatch(const char *provider);
/* A capture file that could not be written. */
void metrics_capture_failure(void);

/* Appends the Prometheus text exposition (format 0.0.4) of every metric,
 * including gauges read from the store (processing > 60 s, outbox backlog,
 * dead rows) when st is not NULL. Returns 0 or -1. */
int metrics_render(struct buf *out, struct store *st);

/* Forgets every counter (tests). */
void metrics_reset(void);

#endif
