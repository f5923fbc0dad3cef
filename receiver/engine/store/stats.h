/* stats.h: operator figures read from the database: the gauges /metrics shows
 * (stuck processing records, outbox backlog and dead rows) and the daily
 * report of `idemhook stats`. SQL through store.h only. */
#ifndef IDEMHOOK_STATS_H
#define IDEMHOOK_STATS_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct store;

#define STATS_STUCK_MS 60000  /* a processing record untouched this long is stuck */
#define STATS_GROUPS_MAX 4096 /* (provider, outcome, detail) rows in one report */
/* A /metrics scrape waits this long for the database's figures. */
#define STATS_SCRAPE_WAIT_MS 1500

/* Outbox row statuses, in the order of sg_outbox_rows. */
#define STATS_OUTBOX_STATUSES 6
extern const char *const stats_outbox_statuses[STATS_OUTBOX_STATUSES];

struct stats_gauges {
	int64_t sg_processing_stuck; /* status processing, updated_at older than STATS_STUCK_MS */
	int64_t sg_events_failed_open; /* events acknowledged but refused (outcome failed), any age,
	                                  live and not dismissed */
	int64_t sg_events_failed_test_mode; /* the same, marked test mode by the provider */
	int sg_has_outbox;           /* 0 while the outbox table does not exist */
	int64_t sg_outbox_backlog;   /* pending, delivering, retry_wait */
	int64_t sg_outbox_dead;
	int64_t sg_outbox_rows[STATS_OUTBOX_STATUSES]; /* by stats_outbox_statuses */
	int64_t sg_outbox_oldest_pending_ms; /* age of the oldest backlog row; 0 when none */
};

/* Reads the gauges at now_ms on this thread's read connection. Returns 0 or
 * -1 (store error, logged by the store). */
int stats_gauges(struct store *st, int64_t now_ms, struct stats_gauges *ret);

/* Appends the store's part of the Prometheus exposition: the writer's
 * batch and commit histograms and counters, the file sizes, and the gauges
 * above (processing > 60 s, failed events, outbox rows by status), after
 * metrics_render's part. A failed read, or one not done within
 * STATS_SCRAPE_WAIT_MS, leaves those figures out. Returns 0 or -1. */
int stats_render_metrics(struct buf *out, struct store *st);

/* Events of one provider instance with one outcome and detail. */
struct stats_group {
	char *sgr_provider; /* events.scope */
	char *sgr_outcome;  /* "done" or "failed" */
	char *sgr_detail;   /* the effect for done ("paid", "noop", ...), the reason for failed */
	int64_t sgr_count;
};

struct stats_report {
	int64_t sr_since_ms; /* window start (events received since) */
	int64_t sr_now_ms;
	struct stats_group *sr_groups; /* by provider, outcome, detail */
	size_t sr_n_groups;
	int64_t sr_events;             /* all events in the window */
	int64_t sr_events_failed;      /* failed events in the window */
	int64_t sr_events_reprocessed; /* events in the window reprocessed at least once */
	int64_t sr_failed_open;        /* failed events of any age, still failed, live, not dismissed */
	int64_t sr_orders_paid;        /* paid_at in the window */
	int64_t sr_orders_refunded;    /* refunded_at in the window (fully or partially) */
	struct stats_gauges sr_gauges;
};

/* Fills ret from the database for events received in [since_ms, now_ms].
 * Returns 0, or -1 (ret then holds nothing to free). */
int stats_collect(struct store *st, int64_t now_ms, int64_t since_ms, struct stats_report *ret);
void stats_report_finish(struct stats_report *r);

/* Appends the report as an aligned human table, or as one JSON object. */
int stats_format_text(const struct stats_report *r, struct buf *out);
int stats_format_json(const struct stats_report *r, struct buf *out);

#endif
