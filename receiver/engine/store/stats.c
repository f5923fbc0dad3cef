/* stats.c: operator figures read from the database (gauges and daily report). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "metrics.h"
#include "stats.h"
#include "store.h"

const char *const stats_outbox_statuses[STATS_OUTBOX_STATUSES] = {
        "pending", "delivering", "retry_wait", "succeeded", "dead", "cancelled",
};

/* The outbox table arrives with its own migration; until then (or on a
 * database migrated by an older binary) its figures are simply absent. */
static int stats_has_table(struct store_tx *tx, const char *name)
{
	return store_has_table(tx, name);
}

/* Runs a query returning one integer into *ret (0 when no row). */
static int stats_int(struct store_tx *tx, const char *sql, const struct store_value *p, size_t n,
                     int64_t *ret)
{
	struct store_row row;
	int rc;

	rc = store_query(tx, sql, p, n, &row);
	if (rc < 0) {
		return -1;
	}
	*ret = 0;
	if (rc == 1) {
		*ret = store_row_int(&row, 0);
		store_row_finish(&row);
	}
	return 0;
}

static int stats_outbox_row(void *arg, const struct store_row *row)
{
	struct stats_gauges *g = arg;
	const char *status = store_row_text(row, 0);
	size_t i;

	for (i = 0; status != NULL && i < STATS_OUTBOX_STATUSES; i++) {
		if (strcmp(status, stats_outbox_statuses[i]) == 0) {
			g->sg_outbox_rows[i] = store_row_int(row, 1);
		}
	}
	return 0;
}

static int stats_gauges_tx(struct store_tx *tx, void *arg)
{
	struct stats_gauges *g = arg;
	struct store_value p[1] = {store_int(store_tx_now(tx) - STATS_STUCK_MS)};
	int has;

	memset(g, 0, sizeof(*g));
	if (stats_int(tx,
	              "SELECT count(*) FROM idempotency_records WHERE status = 'processing' AND "
	              "updated_at < ?",
	              p, 1, &g->sg_processing_stuck) < 0) {
		return -1;
	}
	/* Dismissed ones are closed by an operator; test-mode ones are counted
	 * apart, so a sandbox never pages anyone. */
	if (stats_int(tx,
	              "SELECT count(*) FROM events WHERE outcome = 'failed' AND dismissed_at IS NULL"
	              " AND test_mode = 0",
	              NULL, 0, &g->sg_events_failed_open) < 0 ||
	    stats_int(tx,
	              "SELECT count(*) FROM events WHERE outcome = 'failed' AND dismissed_at IS NULL"
	              " AND test_mode <> 0",
	              NULL, 0, &g->sg_events_failed_test_mode) < 0) {
		return -1;
	}
	has = stats_has_table(tx, "outbox");
	if (has < 0) {
		return -1;
	}
	if (has == 0) {
		return 0;
	}
	g->sg_has_outbox = 1;
	if (stats_int(tx,
	              "SELECT count(*) FROM outbox WHERE status IN ('pending', 'delivering', "
	              "'retry_wait')",
	              NULL, 0, &g->sg_outbox_backlog) < 0) {
		return -1;
	}
	if (stats_int(tx, "SELECT count(*) FROM outbox WHERE status = 'dead'", NULL, 0,
	              &g->sg_outbox_dead) < 0) {
		return -1;
	}
	if (store_query_each(tx, "SELECT status, count(*) FROM outbox GROUP BY status", NULL, 0,
	                     stats_outbox_row, g) < 0) {
		return -1;
	}
	{
		struct store_value now[1] = {store_int(store_tx_now(tx))};

		if (stats_int(tx,
		              "SELECT COALESCE(? - min(created_at), 0) FROM outbox WHERE status IN "
		              "('pending', 'delivering', 'retry_wait')",
		              now, 1, &g->sg_outbox_oldest_pending_ms) < 0) {
			return -1;
		}
	}
	return 0;
}

int stats_gauges(struct store *st, int64_t now_ms, struct stats_gauges *ret)
{
	struct stats_gauges g;

	if (store_read(st, now_ms, stats_gauges_tx, &g) < 0) {
		return -1;
	}
	*ret = g;
	return 0;
}

static char *stats_strdup(const char *s)
{
	return strdup(s != NULL ? s : "");
}

static int stats_group_row(void *arg, const struct store_row *row)
{
	struct stats_report *r = arg;
	struct stats_group *g;
	struct stats_group *grown;

	if (r->sr_n_groups >= STATS_GROUPS_MAX) {
		return 1;
	}
	grown = realloc(r->sr_groups, (r->sr_n_groups + 1) * sizeof(*grown));
	if (grown == NULL) {
		return -1;
	}
	r->sr_groups = grown;
	g = &r->sr_groups[r->sr_n_groups];
	memset(g, 0, sizeof(*g));
	r->sr_n_groups++;
	g->sgr_provider = stats_strdup(store_row_text(row, 0));
	g->sgr_outcome = stats_strdup(store_row_text(row, 1));
	g->sgr_detail = stats_strdup(store_row_text(row, 2));
	g->sgr_count = store_row_int(row, 3);
	if (g->sgr_provider == NULL || g->sgr_outcome == NULL || g->sgr_detail == NULL) {
		return -1;
	}
	return 0;
}

static int stats_collect_tx(struct store_tx *tx, void *arg)
{
	struct stats_report *r = arg;
	struct store_value since[1] = {store_int(r->sr_since_ms)};

	if (store_query_each(tx,
	                     "SELECT scope, outcome, COALESCE(CASE outcome WHEN 'done' THEN effect "
	                     "ELSE reason END, ''),"
	                     " count(*) FROM events WHERE received_at >= ?"
	                     " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
	                     since, 1, stats_group_row, r) < 0) {
		return -1;
	}
	if (stats_int(tx, "SELECT count(*) FROM events WHERE received_at >= ?", since, 1,
	              &r->sr_events) < 0 ||
	    stats_int(tx,
	              "SELECT count(*) FROM events WHERE received_at >= ? AND outcome = 'failed'",
	              since, 1, &r->sr_events_failed) < 0 ||
	    stats_int(tx, "SELECT count(*) FROM events WHERE received_at >= ? AND reprocessed > 0",
	              since, 1, &r->sr_events_reprocessed) < 0 ||
	    stats_int(tx,
	              "SELECT count(*) FROM events WHERE outcome = 'failed' AND dismissed_at IS NULL"
	              " AND test_mode = 0",
	              NULL, 0, &r->sr_failed_open) < 0 ||
	    stats_int(tx, "SELECT count(*) FROM orders WHERE paid_at >= ?", since, 1,
	              &r->sr_orders_paid) < 0 ||
	    stats_int(tx, "SELECT count(*) FROM orders WHERE refunded_at >= ?", since, 1,
	              &r->sr_orders_refunded) < 0) {
		return -1;
	}
	return stats_gauges_tx(tx, &r->sr_gauges);
}

int stats_collect(struct store *st, int64_t now_ms, int64_t since_ms, struct stats_report *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->sr_since_ms = since_ms;
	ret->sr_now_ms = now_ms;
	if (store_read(st, now_ms, stats_collect_tx, ret) < 0) {
		goto fail;
	}
	return 0;
fail:
	stats_report_finish(ret);
	return -1;
}

void stats_report_finish(struct stats_report *r)
{
	size_t i;

	for (i = 0; i < r->sr_n_groups; i++) {
		free(r->sr_groups[i].sgr_provider);
		free(r->sr_groups[i].sgr_outcome);
		free(r->sr_groups[i].sgr_detail);
	}
	free(r->sr_groups);
	memset(r, 0, sizeof(*r));
}

static void stats_time(int64_t ms, char out[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
		out[0] = '\0';
	}
}

static int stats_width(const struct stats_report *r, size_t col, int min)
{
	size_t i;
	size_t w = (size_t)min;
	const char *s;

	for (i = 0; i < r->sr_n_groups; i++) {
		s = col == 0
		            ? r->sr_groups[i].sgr_provider
		            : (col == 1 ? r->sr_groups[i].sgr_outcome : r->sr_groups[i].sgr_detail);
		if (strlen(s) > w) {
			w = strlen(s);
		}
	}
	return w > 64 ? 64 : (int)w;
}

int stats_format_text(const struct stats_report *r, struct buf *out)
{
	char since[32];
	char now[32];
	int wp = stats_width(r, 0, 8);
	int wo = stats_width(r, 1, 7);
	int wd = stats_width(r, 2, 6);
	const struct stats_group *g;
	size_t i;

	stats_time(r->sr_since_ms, since);
	stats_time(r->sr_now_ms, now);
	if (buf_printf(out, "idemhook stats: %s .. %s\n\n", since, now) < 0) {
		return -1;
	}
	if (buf_printf(out, "%-*s  %-*s  %-*s  %10s\n", wp, "PROVIDER", wo, "OUTCOME", wd, "DETAIL",
	               "CALLBACKS") < 0) {
		return -1;
	}
	for (i = 0; i < r->sr_n_groups; i++) {
		g = &r->sr_groups[i];
		if (buf_printf(out, "%-*.*s  %-*.*s  %-*.*s  %10" PRId64 "\n", wp, wp,
		               g->sgr_provider, wo, wo, g->sgr_outcome, wd, wd,
		               g->sgr_detail[0] != '\0' ? g->sgr_detail : "-", g->sgr_count) < 0) {
			return -1;
		}
	}
	if (r->sr_n_groups == 0 && buf_puts(out, "(no callbacks in this window)\n") < 0) {
		return -1;
	}
	if (buf_printf(out,
	               "\n"
	               "%-38s %10" PRId64 "\n"
	               "%-38s %10" PRId64 "\n"
	               "%-38s %10" PRId64 "\n"
	               "%-38s %10" PRId64 "\n"
	               "%-38s %10" PRId64 "\n"
	               "%-38s %10" PRId64 "\n"
	               "%-38s %10" PRId64 "\n",
	               "callbacks (unique events)", r->sr_events, "failed events",
	               r->sr_events_failed, "reprocessed events", r->sr_events_reprocessed,
	               "failed events still open (any age)", r->sr_failed_open, "orders paid",
	               r->sr_orders_paid, "orders refunded (fully or partly)",
	               r->sr_orders_refunded, "records stuck in processing > 60 s",
	               r->sr_gauges.sg_processing_stuck) < 0) {
		return -1;
	}
	if (r->sr_gauges.sg_has_outbox) {
		if (buf_printf(out, "%-38s %10" PRId64 "\n%-38s %10" PRId64 "\n",
		               "outbound backlog", r->sr_gauges.sg_outbox_backlog,
		               "outbound dead rows", r->sr_gauges.sg_outbox_dead) < 0) {
			return -1;
		}
	} else if (buf_printf(out, "%-38s %10s\n", "outbound dead rows", "n/a") < 0) {
		return -1;
	}
	return 0;
}

int stats_format_json(const struct stats_report *r, struct buf *out)
{
	char since[32];
	char now[32];
	const struct stats_group *g;
	size_t i;

	stats_time(r->sr_since_ms, since);
	stats_time(r->sr_now_ms, now);
	if (buf_puts(out, "{\"since\":") < 0 || buf_json_string(out, since) < 0 ||
	    buf_puts(out, ",\"until\":") < 0 || buf_json_string(out, now) < 0 ||
	    buf_puts(out, ",\"callbacks\":[") < 0) {
		return -1;
	}
	for (i = 0; i < r->sr_n_groups; i++) {
		g = &r->sr_groups[i];
		if (buf_puts(out, i > 0 ? ",{\"provider\":" : "{\"provider\":") < 0 ||
		    buf_json_string(out, g->sgr_provider) < 0 ||
		    buf_puts(out, ",\"outcome\":") < 0 ||
		    buf_json_string(out, g->sgr_outcome) < 0 || buf_puts(out, ",\"detail\":") < 0 ||
		    buf_json_string(out, g->sgr_detail) < 0 ||
		    buf_printf(out, ",\"count\":%" PRId64 "}", g->sgr_count) < 0) {
			return -1;
		}
	}
	if (buf_printf(out,
	               "],\"events\":%" PRId64 ",\"events_failed\":%" PRId64
	               ",\"events_reprocessed\":%" PRId64 ",\"failed_open\":%" PRId64
	               ",\"orders_paid\":%" PRId64 ",\"orders_refunded\":%" PRId64
	               ",\"processing_stuck\":%" PRId64,
	               r->sr_events, r->sr_events_failed, r->sr_events_reprocessed,
	               r->sr_failed_open, r->sr_orders_paid, r->sr_orders_refunded,
	               r->sr_gauges.sg_processing_stuck) < 0) {
		return -1;
	}
	if (r->sr_gauges.sg_has_outbox) {
		if (buf_printf(out,
		               ",\"outbox_backlog\":%" PRId64 ",\"outbox_dead\":%" PRId64 "}\n",
		               r->sr_gauges.sg_outbox_backlog, r->sr_gauges.sg_outbox_dead) < 0) {
			return -1;
		}
	} else if (buf_puts(out, ",\"outbox_backlog\":null,\"outbox_dead\":null}\n") < 0) {
		return -1;
	}
	return 0;
}

/* ---- the store's part of /metrics ---- */

/* Upper bounds of store_stats.ss_batch_hist buckets (the last is +Inf). */
static const char *const stats_batch_le_text[] = {"1", "3", "7", "15", "31", "63", "127", "+Inf"};
/* Upper bounds of store_stats.ss_commit_hist buckets, seconds. */
static const char *const stats_commit_le_text[STORE_COMMIT_BUCKETS] = {
        "0.0005", "0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1", "+Inf"};

/* What one scrape reads from the database, on the store's own thread. */
struct stats_scrape {
	int64_t ssc_now_ms;
	int ssc_files_ok;
	int ssc_gauges_ok;
	struct store_file_stats ssc_files;
	struct stats_gauges ssc_gauges;
};

static int stats_scrape_read(struct store *st, void *arg)
{
	struct stats_scrape *sc = arg;

	sc->ssc_files_ok = store_file_stats(st, &sc->ssc_files) == 0;
	sc->ssc_gauges_ok = stats_gauges(st, sc->ssc_now_ms, &sc->ssc_gauges) == 0;
	return 0;
}

int stats_render_metrics(struct buf *out, struct store *st)
{
	struct stats_scrape sc;
	const struct store_file_stats *fs = &sc.ssc_files;
	const struct stats_gauges *g = &sc.ssc_gauges;
	struct store_stats ss;
	struct timespec ts;
	uint64_t cum = 0;
	size_t i;

	store_get_stats(st, &ss);
	if (metrics_text_header(out, "idemhook_store_batch_size", "histogram",
	                   "Units of work per group-commit transaction.") < 0) {
		return -1;
	}
	/* Buckets, +Inf and _count all count batches (committed or not), as
	 * _sum sums their units: a failed batch must not make +Inf smaller
	 * than a bucket below it. */
	for (i = 0; i < 8; i++) {
		cum += ss.ss_batch_hist[i];
		if (buf_printf(out, "idemhook_store_batch_size_bucket{le=\"%s\"} %" PRIu64 "\n",
		               stats_batch_le_text[i], cum) < 0) {
			return -1;
		}
	}
	if (buf_printf(out,
	               "idemhook_store_batch_size_sum %" PRIu64
	               "\nidemhook_store_batch_size_count %" PRIu64 "\n",
	               ss.ss_units, cum) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_store_commit_seconds", "histogram",
	                   "Time one COMMIT took: writing the batch to the WAL and its fsync.") < 0) {
		return -1;
	}
	cum = 0;
	for (i = 0; i < STORE_COMMIT_BUCKETS; i++) {
		cum += ss.ss_commit_hist[i];
		if (buf_printf(out, "idemhook_store_commit_seconds_bucket{le=\"%s\"} %" PRIu64 "\n",
		               stats_commit_le_text[i], cum) < 0) {
			return -1;
		}
	}
	if (buf_printf(out,
	               "idemhook_store_commit_seconds_sum %.6f\nidemhook_store_commit_seconds_count %" PRIu64
	               "\n",
	               ss.ss_commit_seconds, cum) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_store_unit_seconds_total", "counter",
	                        "Time the units of work (claims and writes) whose completion has "
	                        "run spent, summed by stage: queued for the writer, in their "
	                        "batch (its statements and COMMIT), and from the COMMIT until "
	                        "their completion ran. Divided by "
	                        "idemhook_store_units_completed_total: the mean.") < 0 ||
	    buf_printf(out,
	               "idemhook_store_unit_seconds_total{stage=\"queued\"} %.6f\n"
	               "idemhook_store_unit_seconds_total{stage=\"batch\"} %.6f\n"
	               "idemhook_store_unit_seconds_total{stage=\"completion\"} %.6f\n",
	               ss.ss_unit_queued_seconds, ss.ss_unit_batch_seconds,
	               ss.ss_unit_completion_seconds) < 0 ||
	    metrics_text_header(out, "idemhook_store_units_completed_total", "counter",
	                        "Units of work whose completion has run.") < 0 ||
	    buf_printf(out, "idemhook_store_units_completed_total %" PRIu64 "\n",
	               ss.ss_units_completed) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_store_commits_total", "counter",
	                   "Write transactions committed by the store's writer.") < 0 ||
	    buf_printf(out, "idemhook_store_commits_total %" PRIu64 "\n", ss.ss_commits) < 0) {
		return -1;
	}
	if (metrics_text_header(
	            out, "idemhook_store_units_total", "counter",
	            "Units of work (claims and writes) committed or rolled back by the writer.") <
	            0 ||
	    buf_printf(out, "idemhook_store_units_total %" PRIu64 "\n", ss.ss_units) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_store_conflicts_total", "counter",
	                   "Unique-key conflicts met by idempotency claims.") < 0 ||
	    buf_printf(out, "idemhook_store_conflicts_total %" PRIu64 "\n", ss.ss_conflicts) < 0) {
		return -1;
	}
	if (metrics_text_header(
	            out, "idemhook_store_round_trips_total", "counter",
	            "Round trips of the writer to the database server (PostgreSQL; 0 on "
	            "SQLite).") < 0 ||
	    buf_printf(out, "idemhook_store_round_trips_total %" PRIu64 "\n", ss.ss_round_trips) <
	            0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_store_wal_restarts_total", "counter",
	                        "Checkpoints the writer ran between two batches to start the "
	                        "WAL over (SQLite).") < 0 ||
	    buf_printf(out, "idemhook_store_wal_restarts_total %" PRIu64 "\n", ss.ss_catch_ups) <
	            0 ||
	    metrics_text_header(out, "idemhook_store_wal_restart_seconds_total", "counter",
	                        "Time the writer spent in those checkpoints, committing "
	                        "nothing.") < 0 ||
	    buf_printf(out, "idemhook_store_wal_restart_seconds_total %.6f\n",
	               ss.ss_catch_up_seconds) < 0) {
		return -1;
	}
	if (metrics_text_single(out, "idemhook_store_wal_pages", "gauge",
	                        "Pages in the WAL since it last started over (SQLite; the writer "
	                        "starts it over past 12,000 and holds it under 32,000 unless a "
	                        "read transaction stays open).",
	                        "%" PRIu64, ss.ss_wal_pages) < 0 ||
	    metrics_text_single(out, "idemhook_store_wal_held_seconds", "gauge",
	                        "How long the WAL has been held past its bound by a read "
	                        "transaction kept open; 0 when it is not.",
	                        "%.3f", ss.ss_wal_held_seconds) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_store_reads_skipped_total", "counter",
	                        "Claims sent to the writer without a read for a stored reply: "
	                        "the key filter had never seen their key.") < 0 ||
	    buf_printf(out, "idemhook_store_reads_skipped_total %" PRIu64 "\n",
	               ss.ss_reads_skipped) < 0) {
		return -1;
	}
	/* The filter's gauges only once one is in use. */
	if (ss.ss_key_filter_ready &&
	    (metrics_text_single(out, "idemhook_store_key_filter_keys", "gauge",
	                         "Keys in the key filter: stored keys read at start and claimed "
	                         "since.",
	                         "%" PRIu64, ss.ss_key_filter_keys) < 0 ||
	     metrics_text_single(out, "idemhook_store_key_filter_capacity", "gauge",
	                         "Keys the key filter was made for; past it, a larger one is "
	                         "filled.",
	                         "%" PRIu64, ss.ss_key_filter_capacity) < 0 ||
	     metrics_text_single(out, "idemhook_store_key_filter_bytes", "gauge",
	                         "Memory of the key filter.", "%" PRIu64,
	                         ss.ss_key_filter_bytes) < 0)) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_store_transient_total", "counter",
	                   "Units rolled back as transient failures (answered 503).") < 0 ||
	    buf_printf(out, "idemhook_store_transient_total %" PRIu64 "\n", ss.ss_transient) < 0) {
		return -1;
	}

	/* The database's figures are read aside and waited for a bounded time:
	 * a scrape must answer whatever the database does (a hung server
	 * would hold it for good). */
	memset(&sc, 0, sizeof(sc));
	clock_gettime(CLOCK_REALTIME, &ts);
	sc.ssc_now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (store_call_within(st, STATS_SCRAPE_WAIT_MS, stats_scrape_read, &sc, sizeof(sc)) < 0) {
		sc.ssc_files_ok = 0;
		sc.ssc_gauges_ok = 0;
	}
	/* A failed read leaves the gauges out rather than showing a false zero. */
	if (sc.ssc_files_ok &&
	    (metrics_text_single(out, "idemhook_db_size_bytes", "gauge",
	                         "Size of the database file.", "%" PRId64, fs->sf_db_bytes) < 0 ||
	     metrics_text_single(out, "idemhook_db_wal_size_bytes", "gauge",
	                         "Size of the database's write-ahead log.", "%" PRId64,
	                         fs->sf_wal_bytes) < 0 ||
	     metrics_text_single(
	             out, "idemhook_db_free_bytes", "gauge",
	             "Free pages inside the database file: what a vacuum would give back.",
	             "%" PRId64, fs->sf_free_bytes) < 0)) {
		return -1;
	}
	/* A failed read (the database out of reach, a statement timed out,
	 * no answer in time) leaves the db gauges out, and says so: a scrape
	 * must tell "the database could not be read" from "the figures are
	 * gone". */
	if (!sc.ssc_gauges_ok) {
		return metrics_text_single(out, "idemhook_store_readable", "gauge",
		                           "1 when this scrape read the db gauges from the "
		                           "database, 0 when it could not (they are left out).",
		                           "%d", 0);
	}
	if (metrics_text_single(out, "idemhook_store_readable", "gauge",
	                        "1 when this scrape read the db gauges from the database, 0 "
	                        "when it could not (they are left out).",
	                        "%d", 1) < 0) {
		return -1;
	}
	if (metrics_text_header(
	            out, "idemhook_processing_stuck", "gauge",
	            "Idempotency records in processing, untouched for more than 60 s.") < 0 ||
	    buf_printf(out, "idemhook_processing_stuck %" PRId64 "\n", g->sg_processing_stuck) <
	            0) {
		return -1;
	}
	if (metrics_text_single(
	            out, "idemhook_events_failed_open", "gauge",
	            "Events acknowledged to the provider but refused by the business rules "
	            "(outcome failed), live (not test mode), neither reprocessed nor "
	            "dismissed since.",
	            "%" PRId64, g->sg_events_failed_open) < 0 ||
	    metrics_text_single(out, "idemhook_events_failed_test_mode", "gauge",
	                        "Failed events the provider marked as test mode or sandbox (Stripe "
	                        "livemode false, Adyen live false), not dismissed: never an alert.",
	                        "%" PRId64, g->sg_events_failed_test_mode) < 0) {
		return -1;
	}
	if (!g->sg_has_outbox) {
		return 0;
	}
	if (metrics_text_header(out, "idemhook_outbox_rows", "gauge", "Outbound rows by status.") < 0) {
		return -1;
	}
	for (i = 0; i < STATS_OUTBOX_STATUSES; i++) {
		if (buf_printf(out, "idemhook_outbox_rows{status=\"%s\"} %" PRId64 "\n",
		               stats_outbox_statuses[i], g->sg_outbox_rows[i]) < 0) {
			return -1;
		}
	}
	if (metrics_text_single(
	            out, "idemhook_outbox_oldest_pending_age_seconds", "gauge",
	            "Age of the oldest outbound row not yet delivered (pending, delivering, "
	            "retry_wait); 0 when none.",
	            "%.3f", (double)g->sg_outbox_oldest_pending_ms / 1000.0) < 0) {
		return -1;
	}
	if (metrics_text_header(
	            out, "idemhook_outbox_backlog", "gauge",
	            "Outbound rows waiting for delivery (pending, delivering, retry_wait).") < 0 ||
	    buf_printf(out, "idemhook_outbox_backlog %" PRId64 "\n", g->sg_outbox_backlog) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_outbox_dead", "gauge",
	                        "Outbound rows dead-lettered.") < 0 ||
	    buf_printf(out, "idemhook_outbox_dead %" PRId64 "\n", g->sg_outbox_dead) < 0) {
		return -1;
	}
	return 0;
}
