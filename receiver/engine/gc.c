/* gc.c: cleanup of expired idempotency records, events, applied parked
 * events, finished outbox rows and old capture files, in small batches with pauses. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env.h"
#include "buf.h"
#include "capture.h"
#include "config.h"
#include "gc.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "store.h"

#define GC_SECTION "gc"
#define GC_INTERVAL_DEFAULT_S 3600 /* between passes of the worker; 0 turns it off */
#define GC_BATCH_DEFAULT 5000      /* rows per batch, each batch its own unit of work */
#define GC_BATCH_MAX 100000
#define GC_PAUSE_DEFAULT_MS 50 /* least pause between batches, so requests get the writer */
#define GC_PAUSE_MAX_MS 60000
#define GC_OUTBOX_RETENTION_DEFAULT_S (30 * 86400) /* finished outbox rows */
#define GC_SQL_MAX (64 * 1024)                     /* bytes of one generated statement */
/* Free pages are given back to the file system when they make up this
 * share of the file (1/4) and at least this much: smaller amounts are
 * simply reused by new rows. */
#define GC_RECLAIM_SHARE 4
#define GC_RECLAIM_MIN_BYTES (1024 * 1024)
#define GC_RECLAIM_PAGES 2048 /* pages per unit of work (2 MiB of 1 KiB pages, 8 MiB of 4 KiB) */

/* What one pass needs, copied out of the config so that no config reference
 * is held across a long pass (a reload waits for every reference). */
struct gc_scope {
	char *gs_name;
	int64_t gs_retention_ms;
};

struct gc_plan {
	unsigned gp_batch;
	int64_t gp_pause_ms;
	int64_t gp_default_retention_ms; /* [store] retention: api scopes and unknown ones */
	struct gc_scope *gp_scopes;      /* provider instances */
	size_t gp_n_scopes;
	int64_t gp_events_retention_ms; /* 0: per scope, as the records */
	int64_t gp_outbox_retention_ms;
	/* gc_run_progress: told after every batch, with the report so far */
	gc_progress_fn gp_progress;
	void *gp_progress_arg;
	const struct gc_report *gp_report;
};

struct gc_worker {
	const struct env *gw_env;
	pthread_t gw_thread;
	pthread_mutex_t gw_lock;
	pthread_cond_t gw_cond; /* CLOCK_MONOTONIC */
	/* under gw_lock */
	int gw_stop;
	int gw_kick;           /* the interval changed: look again */
	int64_t gw_interval_s; /* [gc] interval of the current config; 0 = off */
};

/* One table's batched delete: rows whose time column is below their scope's
 * cutoff, walked in time order through the time index. gt_last moves forward
 * (keyset) so rows kept by a longer retention are not scanned again by each
 * batch. */
struct gc_target {
	const char *gt_table;
	const char *gt_what;  /* what the progress line calls the rows */
	const char *gt_doing; /* gr_stopped_at while at them */
	const char *gt_time_col;
	int gt_per_scope;        /* cutoff by scope (CASE scope ...), else one cutoff */
	const char *gt_scope_col; /* the scope's column when not "scope" */
	int64_t gt_retention_ms; /* one cutoff for every row when > 0 */
	const char *gt_extra; /* more conditions ("AND ..."), no placeholders but gt_extra_param */
	int gt_has_extra_param;
	int64_t gt_extra_param;
	/* A second time column that must also be below its scope's record
	 * retention (the key of an event row: migration 0012), or NULL. */
	const char *gt_record_col;
};

static void gc_plan_finish(struct gc_plan *p)
{
	size_t i;

	for (i = 0; i < p->gp_n_scopes; i++) {
		free(p->gp_scopes[i].gs_name);
	}
	free(p->gp_scopes);
	memset(p, 0, sizeof(*p));
}

/* "50ms", or a duration as the config takes it ("1s", "2m"); "0" is none. */
static int gc_parse_pause(const char *s, int64_t *ret_ms)
{
	size_t len = strlen(s);
	char *end = NULL;
	int64_t secs;
	long long v;

	if (len > 2 && strcmp(s + len - 2, "ms") == 0) {
		errno = 0;
		v = strtoll(s, &end, 10);
		if (errno != 0 || end != s + len - 2 || v < 0 || s[0] == '-' || s[0] == '+') {
			return -1;
		}
		*ret_ms = v;
		return 0;
	}
	if (config_parse_duration(s, &secs) < 0 || secs < 0 || secs > GC_PAUSE_MAX_MS / 1000) {
		return -1;
	}
	*ret_ms = secs * 1000;
	return 0;
}

/* Reads [gc] into ret, every key checked whatever the others hold: each
 * problem is logged (file, line, key). Returns 0, or -1 when a key was
 * refused or memory ran out. */
static int gc_plan_load(const struct config *cf, struct gc_plan *ret)
{
	struct gc_plan p;
	const char *pause;
	int64_t events_s;
	int64_t outbox_s;
	size_t i;
	int rc = 0;

	memset(&p, 0, sizeof(p));
	if (config_get_uint(cf, GC_SECTION, "batch", GC_BATCH_DEFAULT, &p.gp_batch) < 0) {
		rc = -1;
	} else if (p.gp_batch == 0 || p.gp_batch > GC_BATCH_MAX) {
		rc = config_refuse(cf, GC_SECTION, "batch", "must be 1..%u", GC_BATCH_MAX);
	}
	p.gp_pause_ms = GC_PAUSE_DEFAULT_MS;
	pause = config_get(cf, GC_SECTION, "pause");
	if (pause != NULL &&
	    (gc_parse_pause(pause, &p.gp_pause_ms) < 0 || p.gp_pause_ms > GC_PAUSE_MAX_MS)) {
		rc = config_refuse(cf, GC_SECTION, "pause",
		                   "must be a duration such as 50ms or 1s, at most 60s");
	}
	if (config_get_duration(cf, GC_SECTION, "events_retention", 0, &events_s) < 0) {
		rc = -1;
	}
	if (config_get_duration(cf, GC_SECTION, "outbox_retention", GC_OUTBOX_RETENTION_DEFAULT_S,
	                        &outbox_s) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	p.gp_events_retention_ms = events_s * 1000;
	p.gp_outbox_retention_ms = outbox_s * 1000;
	p.gp_default_retention_ms = cf->cf_retention_s * 1000;
	if (cf->cf_n_providers > 0) {
		p.gp_scopes = calloc(cf->cf_n_providers, sizeof(*p.gp_scopes));
		if (p.gp_scopes == NULL) {
			log_err("gc: out of memory");
			goto fail;
		}
	}
	for (i = 0; i < cf->cf_n_providers; i++) {
		p.gp_scopes[i].gs_name = strdup(cf->cf_providers[i].pc_name);
		if (p.gp_scopes[i].gs_name == NULL) {
			log_err("gc: out of memory");
			goto fail;
		}
		p.gp_n_scopes++;
		p.gp_scopes[i].gs_retention_ms = cf->cf_providers[i].pc_retention_s * 1000;
	}
	*ret = p;
	return 0;
fail:
	gc_plan_finish(&p);
	return -1;
}

int gc_check_config(const struct config *cf)
{
	struct gc_plan p;
	int64_t interval;
	int rc = 0;

	if (config_get_duration(cf, GC_SECTION, "interval", GC_INTERVAL_DEFAULT_S, &interval) < 0) {
		rc = -1;
	}
	if (gc_plan_load(cf, &p) < 0) {
		return -1;
	}
	gc_plan_finish(&p);
	return rc;
}

static int64_t gc_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps ms, or until the worker is told to stop. Returns 1 when stopping. */
static int gc_sleep(struct gc_worker *w, int64_t ms)
{
	struct timespec ts;
	int stop;

	if (w == NULL) {
		ts.tv_sec = (time_t)(ms / 1000);
		ts.tv_nsec = (long)(ms % 1000) * 1000000L;
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
		}
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->gw_lock);
	while (!w->gw_stop && w->gw_interval_s != 0) {
		if (pthread_cond_timedwait(&w->gw_cond, &w->gw_lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	stop = w->gw_stop || w->gw_interval_s == 0;
	pthread_mutex_unlock(&w->gw_lock);
	return stop;
}

/* 1 when the worker must stop, or cleanup was turned off by a reload: a
 * pass then ends after its current batch. */
static int gc_stopping(struct gc_worker *w)
{
	int stop;

	if (w == NULL) {
		return 0;
	}
	pthread_mutex_lock(&w->gw_lock);
	stop = w->gw_stop || w->gw_interval_s == 0;
	pthread_mutex_unlock(&w->gw_lock);
	return stop;
}

/* The WHERE condition of target t and its parameters:
 *   time >= ?last AND time < ?max_cutoff AND time < CASE scope WHEN ? THEN ? ... ELSE ? END [extra]
 * The max-cutoff range lets the time index bound the walk. */
static int gc_condition(const struct gc_plan *p, const struct gc_target *t, int64_t now_ms,
                        int64_t last, struct buf *sql, struct store_value *params, size_t *n)
{
	int64_t dflt = p->gp_default_retention_ms;
	int64_t cutoff;
	int64_t max_cutoff;
	size_t i;

	*n = 0;
	if (t->gt_retention_ms > 0) {
		dflt = t->gt_retention_ms;
	}
	max_cutoff = now_ms - dflt;
	if (buf_printf(sql, "%s >= ? AND %s < ?", t->gt_time_col, t->gt_time_col) < 0) {
		return -1;
	}
	params[(*n)++] = store_int(last);
	params[(*n)++] = store_null(); /* max cutoff, filled below */
	if (t->gt_per_scope && t->gt_retention_ms == 0 && p->gp_n_scopes > 0) {
		if (buf_printf(sql, " AND %s < CASE %s", t->gt_time_col,
		               t->gt_scope_col != NULL ? t->gt_scope_col : "scope") < 0) {
			return -1;
		}
		for (i = 0; i < p->gp_n_scopes; i++) {
			cutoff = now_ms - p->gp_scopes[i].gs_retention_ms;
			if (cutoff > max_cutoff) {
				max_cutoff = cutoff;
			}
			if (buf_puts(sql, " WHEN ? THEN ?") < 0) {
				return -1;
			}
			params[(*n)++] = store_text(p->gp_scopes[i].gs_name);
			params[(*n)++] = store_int(cutoff);
		}
		if (buf_puts(sql, " ELSE ? END") < 0) {
			return -1;
		}
		params[(*n)++] = store_int(now_ms - dflt);
	}
	params[1] = store_int(max_cutoff);
	if (t->gt_extra != NULL && buf_printf(sql, " %s", t->gt_extra) < 0) {
		return -1;
	}
	if (t->gt_has_extra_param) {
		params[(*n)++] = store_int(t->gt_extra_param);
	}
	if (t->gt_record_col != NULL && p->gp_n_scopes == 0) {
		if (buf_printf(sql, " AND %s < ?", t->gt_record_col) < 0) {
			return -1;
		}
		params[(*n)++] = store_int(now_ms - p->gp_default_retention_ms);
	} else if (t->gt_record_col != NULL) {
		if (buf_printf(sql, " AND %s < CASE scope", t->gt_record_col) < 0) {
			return -1;
		}
		for (i = 0; i < p->gp_n_scopes; i++) {
			if (buf_puts(sql, " WHEN ? THEN ?") < 0) {
				return -1;
			}
			params[(*n)++] = store_text(p->gp_scopes[i].gs_name);
			params[(*n)++] = store_int(now_ms - p->gp_scopes[i].gs_retention_ms);
		}
		if (buf_puts(sql, " ELSE ? END") < 0) {
			return -1;
		}
		params[(*n)++] = store_int(now_ms - p->gp_default_retention_ms);
	}
	return 0;
}

struct gc_batch {
	const char *gb_max_sql; /* max(time) of the next batch */
	const char *gb_delete_sql;
	struct store_value *gb_params; /* condition params, then the LIMIT */
	size_t gb_n;
	int64_t gb_last;    /* out: time of the batch's newest row */
	int64_t gb_deleted; /* out */
	int gb_empty;       /* out: nothing left */
};

static int gc_batch_tx(struct store_tx *tx, void *arg)
{
	struct gc_batch *b = arg;
	struct store_row row;
	int rc;

	b->gb_deleted = 0;
	b->gb_empty = 0;
	rc = store_query(tx, b->gb_max_sql, b->gb_params, b->gb_n, &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 0 || store_row_is_null(&row, 0)) {
		if (rc == 1) {
			store_row_finish(&row);
		}
		b->gb_empty = 1;
		return 0;
	}
	b->gb_last = store_row_int(&row, 0);
	store_row_finish(&row);
	if (store_exec(tx, b->gb_delete_sql, b->gb_params, b->gb_n, &b->gb_deleted) < 0) {
		return -1;
	}
	return 0;
}

struct gc_count {
	const char *gcn_sql;
	const struct store_value *gcn_params;
	size_t gcn_n;
	int64_t gcn_count;
};

static int gc_count_tx(struct store_tx *tx, void *arg)
{
	struct gc_count *c = arg;
	struct store_row row;
	int rc;

	rc = store_query(tx, c->gcn_sql, c->gcn_params, c->gcn_n, &row);
	if (rc < 0) {
		return -1;
	}
	c->gcn_count = 0;
	if (rc == 1) {
		c->gcn_count = store_row_int(&row, 0);
		store_row_finish(&row);
	}
	return 0;
}

/* Notes in rep where a pass stopped and whether the store failed there
 * (store: it logged why) or gc itself did. Returns -1. */
static int gc_failed(struct gc_report *rep, const char *what, int store)
{
	rep->gr_stopped_at = what;
	rep->gr_store_failed = store;
	return -1;
}

/* Deletes (or counts) what t selects, batch after batch, each batch its own
 * unit of work, pausing between them. ret_rows is t's counter in rep. */
static int gc_target_run(struct store *st, const struct gc_plan *p, const struct gc_target *t,
                         int64_t now_ms, int dry_run, struct gc_worker *w, struct gc_report *rep,
                         int64_t *ret_rows)
{
	struct store_value *params = NULL;
	struct buf cond;
	struct buf max_sql;
	struct buf del_sql;
	struct gc_batch b;
	struct gc_count c;
	int64_t last = INT64_MIN;
	int64_t pause;
	int64_t t0;
	size_t n;
	int rc = -1;

	gc_failed(rep, t->gt_doing, 0); /* until it is done */
	buf_init(&cond, GC_SQL_MAX);
	buf_init(&max_sql, GC_SQL_MAX);
	buf_init(&del_sql, GC_SQL_MAX);
	params = calloc(4 * p->gp_n_scopes + 10, sizeof(*params));
	if (params == NULL) {
		log_err("gc: out of memory");
		goto fail;
	}
	for (;;) {
		/* The statements change with the keyset bound: built anew each batch. */
		buf_finish(&cond);
		buf_finish(&max_sql);
		buf_finish(&del_sql);
		buf_init(&cond, GC_SQL_MAX);
		buf_init(&max_sql, GC_SQL_MAX);
		buf_init(&del_sql, GC_SQL_MAX);
		if (gc_condition(p, t, now_ms, last, &cond, params, &n) < 0) {
			log_err("gc: statement too long");
			goto fail;
		}
		if (dry_run) {
			if (buf_printf(&max_sql, "SELECT count(*) FROM %s WHERE %s", t->gt_table,
			               cond.buf_data) < 0) {
				goto fail;
			}
			c.gcn_sql = max_sql.buf_data;
			c.gcn_params = params;
			c.gcn_n = n;
			if (store_read(st, now_ms, gc_count_tx, &c) < 0) {
				rep->gr_store_failed = 1;
				goto fail;
			}
			*ret_rows += c.gcn_count;
			rep->gr_batches += (c.gcn_count + p->gp_batch - 1) / p->gp_batch;
			if (p->gp_progress != NULL) {
				p->gp_progress(p->gp_progress_arg, t->gt_what, p->gp_report);
			}
			break;
		}
		if (buf_printf(&max_sql,
		               "SELECT max(%s) FROM (SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT "
		               "?) AS b",
		               t->gt_time_col, t->gt_time_col, t->gt_table, cond.buf_data,
		               t->gt_time_col) < 0 ||
		    buf_printf(&del_sql,
		               "DELETE FROM %s WHERE id IN (SELECT id FROM %s WHERE %s ORDER BY %s "
		               "LIMIT ?)",
		               t->gt_table, t->gt_table, cond.buf_data, t->gt_time_col) < 0) {
			log_err("gc: statement too long");
			goto fail;
		}
		params[n] = store_int(p->gp_batch);
		b.gb_max_sql = max_sql.buf_data;
		b.gb_delete_sql = del_sql.buf_data;
		b.gb_params = params;
		b.gb_n = n + 1;
		t0 = gc_monotonic_ms();
		if (store_write(st, now_ms, gc_batch_tx, &b) < 0) {
			rep->gr_store_failed = 1;
			goto fail;
		}
		/* At least as long a pause as the batch held the writer: cleanup
		 * never takes more than half of the writer's time, however slow
		 * the disk. */
		pause = gc_monotonic_ms() - t0;
		if (pause < p->gp_pause_ms) {
			pause = p->gp_pause_ms;
		}
		if (pause > GC_PAUSE_MAX_MS) {
			pause = GC_PAUSE_MAX_MS;
		}
		if (b.gb_empty) {
			break;
		}
		*ret_rows += b.gb_deleted;
		rep->gr_batches++;
		last = b.gb_last;
		if (p->gp_progress != NULL) {
			p->gp_progress(p->gp_progress_arg, t->gt_what, p->gp_report);
		}
		if (b.gb_deleted < (int64_t)p->gp_batch) {
			break;
		}
		if (gc_stopping(w) || (pause > 0 && gc_sleep(w, pause))) {
			break;
		}
	}
	gc_failed(rep, NULL, 0);
	rc = 0;
fail:
	free(params);
	buf_finish(&cond);
	buf_finish(&max_sql);
	buf_finish(&del_sql);
	return rc;
}

struct gc_has {
	int gh_found;
};

static int gc_has_outbox_tx(struct store_tx *tx, void *arg)
{
	struct gc_has *h = arg;
	int rc;

	/* The outbox arrives with its own migration; tolerate its absence. */
	rc = store_has_table(tx, "outbox");
	if (rc < 0) {
		return -1;
	}
	h->gh_found = rc;
	return 0;
}

static int gc_run_plan(struct store *st, const struct gc_plan *p, int64_t now_ms, int dry_run,
                       struct gc_worker *w, struct gc_report *rep)
{
	/* A key and its event are one row (migration 0012): a key without an
	 * event goes by its scope's retention; an event row stays until both
	 * events_retention and its scope's retention have passed, so a key is
	 * remembered at least as long as its event. */
	struct gc_target records = {
	        .gt_table = "idempotency_records",
	        .gt_what = "records",
	        .gt_doing = "deleting idempotency records",
	        .gt_time_col = "created_at",
	        .gt_per_scope = 1,
	        /* a live lease is never cut short, however old the record */
	        .gt_extra = "AND received_at IS NULL AND NOT (status = 'processing' AND "
	                    "lease_until IS NOT NULL AND lease_until > ?)",
	        .gt_has_extra_param = 1,
	        .gt_extra_param = now_ms,
	};
	/* An open failed event (acknowledged to the provider, refused by the
	 * business rules, neither dismissed nor applied by a reprocess) stays
	 * whatever its age: the provider will not send it again, and it is
	 * what idemhook_events_failed_open counts and `events reprocess`
	 * needs. So does a thin event still waiting for its full event
	 * (ingest.h, INGEST_EFFECT_TO_FETCH): acknowledged and never applied,
	 * it is a payment lost if its row goes, and the fetch worker asks for
	 * it until it applies or an operator dismisses it. Test-mode ones,
	 * which move no money, expire as usual. COALESCE: an effect NULL must
	 * not make the condition NULL, which would keep the row forever. */
	struct gc_target events = {
	        .gt_table = "idempotency_records",
	        .gt_what = "events",
	        .gt_doing = "deleting events",
	        .gt_time_col = "received_at",
	        .gt_per_scope = 1,
	        .gt_retention_ms = p->gp_events_retention_ms,
	        .gt_extra = "AND received_at IS NOT NULL AND NOT ((outcome = 'failed' OR "
	                    "(outcome = 'done' AND COALESCE(effect, '') = '" INGEST_EFFECT_TO_FETCH
	                    "')) AND dismissed_at IS NULL AND test_mode = 0)",
	        .gt_record_col = "created_at",
	};
	/* Finished rows only; a dead row stays until its compensation is done,
	 * and a row that a compensation row points at stays with it. */
	struct gc_target outbox = {
	        .gt_table = "outbox",
	        .gt_what = "outbox rows",
	        .gt_doing = "deleting outbox rows",
	        .gt_time_col = "updated_at",
	        .gt_retention_ms = p->gp_outbox_retention_ms,
	        .gt_extra =
	                "AND (status IN ('succeeded', 'cancelled') OR (status = 'dead' AND "
	                "comp_state = 'done'))"
	                " AND NOT EXISTS (SELECT 1 FROM outbox AS c WHERE c.parent_id = outbox.id)",
	};
	/* Parked refunds, disputes and reversals once applied (applied_at set),
	 * as long as the events they came with. One still waiting for its
	 * payment stays: it is money the provider moved, and deleting it would
	 * leave the order wrong when the payment arrives. */
	struct gc_target parked = {
	        .gt_table = "order_parked",
	        .gt_what = "parked events",
	        .gt_doing = "deleting parked events",
	        .gt_time_col = "applied_at",
	        .gt_per_scope = 1,
	        .gt_scope_col = "provider",
	        .gt_retention_ms = p->gp_events_retention_ms,
	};
	struct gc_has h;

	if (gc_target_run(st, p, &records, now_ms, dry_run, w, rep, &rep->gr_records) < 0) {
		return -1;
	}
	if (gc_stopping(w)) {
		return 0;
	}
	if (gc_target_run(st, p, &events, now_ms, dry_run, w, rep, &rep->gr_events) < 0) {
		return -1;
	}
	if (gc_stopping(w)) {
		return 0;
	}
	if (gc_target_run(st, p, &parked, now_ms, dry_run, w, rep, &rep->gr_parked) < 0) {
		return -1;
	}
	if (gc_stopping(w)) {
		return 0;
	}
	if (store_read(st, now_ms, gc_has_outbox_tx, &h) < 0) {
		return gc_failed(rep, outbox.gt_doing, 1);
	}
	if (h.gh_found) {
		if (gc_target_run(st, p, &outbox, now_ms, dry_run, w, rep, &rep->gr_outbox) < 0) {
			return -1;
		}
	}
	return 0;
}

/* Gives free pages back to the file system, a unit of work at a time with
 * the batch pause between units, then checkpoints so that the file shrinks
 * now rather than at some later checkpoint. Unless force, only when the free
 * pages are a large share of the file. */
static int gc_reclaim(struct store *st, int64_t pause_ms, int force, struct gc_worker *w,
                      struct gc_report *rep)
{
	struct store_file_stats before;
	struct store_file_stats after;
	int64_t pages = 0;

	if (store_file_stats(st, &before) < 0) {
		return gc_failed(rep, GC_STOPPED_FREE_PAGES, 1);
	}
	if (!force && (before.sf_free_bytes < GC_RECLAIM_MIN_BYTES ||
	               before.sf_free_bytes * GC_RECLAIM_SHARE < before.sf_db_bytes)) {
		return 0;
	}
	if (!before.sf_incremental) {
		log_notice("gc: %" PRId64 " MiB are free inside the database file; an older database "
		           "gives them back only after a one-time `idemhook gc --vacuum` "
		           "(docs/operations.md)",
		           before.sf_free_bytes / (1024 * 1024));
		return 0;
	}
	do {
		if (store_reclaim(st, GC_RECLAIM_PAGES, &pages) < 0) {
			return gc_failed(rep, GC_STOPPED_FREE_PAGES, 1);
		}
	} while (pages >= GC_RECLAIM_PAGES && !gc_stopping(w) &&
	         !(pause_ms > 0 && gc_sleep(w, pause_ms)));
	if (store_checkpoint(st) < 0 || store_file_stats(st, &after) < 0) {
		return gc_failed(rep, GC_STOPPED_FREE_PAGES, 1);
	}
	rep->gr_file_before = before.sf_db_bytes + before.sf_wal_bytes;
	rep->gr_file_after = after.sf_db_bytes + after.sf_wal_bytes;
	log_notice("gc: the database files went from %" PRId64 " to %" PRId64 " bytes",
	         rep->gr_file_before, rep->gr_file_after);
	return 0;
}

int gc_vacuum(struct store *st, const struct config *cf, struct gc_report *ret)
{
	struct store_file_stats before;
	struct store_file_stats after;
	struct gc_plan p;
	int rc;

	if (store_file_stats(st, &before) < 0) {
		return gc_failed(ret, GC_STOPPED_FREE_PAGES, 1);
	}
	if (before.sf_incremental) {
		if (gc_plan_load(cf, &p) < 0) {
			return gc_failed(ret, GC_STOPPED_FREE_PAGES, 0);
		}
		rc = gc_reclaim(st, p.gp_pause_ms, 1, NULL, ret);
		gc_plan_finish(&p);
		return rc;
	}
	log_notice("gc: rebuilding the database file once (VACUUM) to switch it to incremental "
	           "vacuum; writers wait until it is done");
	if (store_vacuum(st) < 0 || store_checkpoint(st) < 0 || store_file_stats(st, &after) < 0) {
		return gc_failed(ret, GC_STOPPED_FREE_PAGES, 1);
	}
	ret->gr_file_before = before.sf_db_bytes + before.sf_wal_bytes;
	ret->gr_file_after = after.sf_db_bytes + after.sf_wal_bytes;
	return 0;
}

int gc_run(struct store *st, const struct config *cf, int64_t now_ms, int dry_run,
           struct gc_report *ret)
{
	return gc_run_progress(st, cf, now_ms, dry_run, NULL, NULL, ret);
}

int gc_run_progress(struct store *st, const struct config *cf, int64_t now_ms, int dry_run,
                    gc_progress_fn progress, void *arg, struct gc_report *ret)
{
	struct gc_plan p;
	int rc = -1;

	memset(ret, 0, sizeof(*ret));
	if (gc_plan_load(cf, &p) < 0) {
		return -1;
	}
	p.gp_progress = progress;
	p.gp_progress_arg = arg;
	p.gp_report = ret;
	if (gc_run_plan(st, &p, now_ms, dry_run, NULL, ret) < 0) {
		goto fail;
	}
	if (!dry_run && gc_reclaim(st, p.gp_pause_ms, 0, NULL, ret) < 0) {
		goto fail;
	}
	if (capture_expire(cf, now_ms, dry_run, &ret->gr_captures) < 0) {
		gc_failed(ret, "deleting capture files", 0);
		goto fail;
	}
	rc = 0;
fail:
	gc_plan_finish(&p);
	return rc;
}

/* A pass that stopped: where, why, what went before it (each batch
 * commits on its own) and that the next pass (in interval_s) goes on from
 * there, in one line. */
static void gc_log_stopped(const struct gc_report *r, int64_t interval_s)
{
	const char *doing = r->gr_stopped_at != NULL ? r->gr_stopped_at : "deleting rows";
	const char *why = r->gr_store_failed ? " (the database is busy or failing)" : "";
	char next[64];

	if (interval_s > 0) {
		snprintf(next, sizeof(next), "the next pass, in %" PRId64 " s,", interval_s);
	} else {
		snprintf(next, sizeof(next), "a pass started again");
	}
	if (r->gr_records + r->gr_events + r->gr_parked + r->gr_outbox + r->gr_captures == 0) {
		log_warn("gc: pass stopped while %s%s, nothing deleted; %s goes on", doing, why,
		         next);
		return;
	}
	log_warn("gc: pass stopped while %s%s, after deleting %" PRId64 " records, %" PRId64
	         " events, %" PRId64 " parked events applied, %" PRId64 " outbox rows, %" PRId64
	         " capture files in %" PRId64 " batches (gone for good); %s goes on from there",
	         doing, why, r->gr_records, r->gr_events, r->gr_parked, r->gr_outbox,
	         r->gr_captures, r->gr_batches, next);
}

static void gc_log_report(const struct gc_report *r, int64_t ms)
{
	if (r->gr_records + r->gr_events + r->gr_parked + r->gr_outbox + r->gr_captures == 0) {
		log_debug("gc: nothing expired");
		return;
	}
	log_info("gc: deleted %" PRId64 " records, %" PRId64 " events, %" PRId64
	         " parked events applied, %" PRId64 " outbox rows, %" PRId64
	         " capture files in %" PRId64 " batches (%" PRId64 " ms)",
	         r->gr_records, r->gr_events, r->gr_parked, r->gr_outbox, r->gr_captures,
	         r->gr_batches, ms);
}

/* The worker's pass: the plan is copied under a short config reference, the
 * batches run without one. */
static void gc_worker_pass(struct gc_worker *w)
{
	const struct env *env = w->gw_env;
	struct metrics_gc_pass pass;
	struct gc_report rep;
	struct config *cf;
	struct gc_plan p;
	int64_t start = env_now_ms(env);
	int64_t t0 = gc_monotonic_ms();
	int64_t interval;
	int locked;
	int rc;

	memset(&rep, 0, sizeof(rep));
	memset(&pass, 0, sizeof(pass));
	cf = env_config_acquire(env);
	rc = gc_plan_load(cf, &p);
	env_config_release(env, cf);
	if (rc < 0) {
		pass.mg_ok = 0;
		metrics_gc_pass(&pass);
		return;
	}
	/* Receivers sharing a database clean it one at a time: the others
	 * skip this pass (the holder's covers theirs). */
	locked = store_try_lock(env->env_store, "gc");
	if (locked == 0) {
		gc_plan_finish(&p);
		log_debug("gc: another receiver is cleaning the database; this pass is skipped");
		return;
	}
	/* A server without advisory locks (-1): the pass runs anyway; its
	 * deletes are conditional, so several at once only repeat work. */
	rc = gc_run_plan(env->env_store, &p, start, 0, w, &rep);
	if (rc == 0 && !gc_stopping(w)) {
		rc = gc_reclaim(env->env_store, p.gp_pause_ms, 0, w, &rep);
	}
	if (locked > 0) {
		store_unlock(env->env_store, "gc");
	}
	gc_plan_finish(&p);
	if (!gc_stopping(w)) {
		cf = env_config_acquire(env);
		if (capture_expire(cf, start, 0, &rep.gr_captures) < 0 && rc == 0) {
			rc = gc_failed(&rep, "deleting capture files", 0);
		}
		env_config_release(env, cf);
	}
	if (rc < 0) {
		pthread_mutex_lock(&w->gw_lock);
		interval = w->gw_interval_s;
		pthread_mutex_unlock(&w->gw_lock);
		gc_log_stopped(&rep, interval);
	} else {
		gc_log_report(&rep, env_now_ms(env) - start);
	}
	pass.mg_ok = rc == 0;
	pass.mg_seconds = (double)(gc_monotonic_ms() - t0) / 1000.0;
	pass.mg_records = rep.gr_records;
	pass.mg_events = rep.gr_events;
	pass.mg_outbox = rep.gr_outbox;
	pass.mg_parked = rep.gr_parked;
	pass.mg_captures = rep.gr_captures;
	pass.mg_reclaimed_bytes =
	        rep.gr_file_before > rep.gr_file_after ? rep.gr_file_before - rep.gr_file_after : 0;
	metrics_gc_pass(&pass);
}

/* [gc] interval of cf; the default when it does not parse (checked at load). */
static int64_t gc_interval_of(const struct config *cf)
{
	int64_t s;

	if (config_get_duration(cf, GC_SECTION, "interval", GC_INTERVAL_DEFAULT_S, &s) < 0 || s < 0) {
		s = GC_INTERVAL_DEFAULT_S;
	}
	return s;
}

static void gc_log_interval(int64_t interval)
{
	if (interval == 0) {
		log_info("gc: periodic cleanup off ([gc] interval = 0)");
	} else {
		log_info("gc: periodic cleanup every %" PRId64 " s", interval);
	}
}

/* Waits until the monotonic time deadline_ms (< 0: no deadline), a stop or
 * a changed interval. Returns 1 when stopping. */
static int gc_wait(struct gc_worker *w, int64_t deadline_ms)
{
	struct timespec ts;
	int stop;

	ts.tv_sec = (time_t)(deadline_ms / 1000);
	ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
	pthread_mutex_lock(&w->gw_lock);
	while (!w->gw_stop && !w->gw_kick) {
		if (deadline_ms < 0) {
			pthread_cond_wait(&w->gw_cond, &w->gw_lock);
		} else if (pthread_cond_timedwait(&w->gw_cond, &w->gw_lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	w->gw_kick = 0;
	stop = w->gw_stop;
	pthread_mutex_unlock(&w->gw_lock);
	return stop;
}

static void *gc_worker_main(void *arg)
{
	struct gc_worker *w = arg;
	int64_t last = gc_monotonic_ms(); /* end of the last pass, or the start */
	int64_t interval;

	pthread_setname_np(pthread_self(), "gc"); /* top -H, perf */

	for (;;) {
		pthread_mutex_lock(&w->gw_lock);
		interval = w->gw_interval_s;
		pthread_mutex_unlock(&w->gw_lock);
		/* A changed interval counts from the last pass: one that is
		 * already due runs at once, never after the old sleep. */
		if (interval > 0 && gc_monotonic_ms() >= last + interval * 1000) {
			gc_worker_pass(w);
			last = gc_monotonic_ms();
			continue;
		}
		if (gc_wait(w, interval > 0 ? last + interval * 1000 : -1)) {
			break;
		}
	}
	return NULL;
}

struct gc_worker *gc_worker_start(const struct env *env)
{
	struct gc_worker *w = NULL;
	pthread_condattr_t ca;
	struct config *cf;
	int64_t interval = 0;
	int rc;

	cf = env_config_acquire(env);
	/* Check every [gc] key now, so a typo shows at start. */
	rc = gc_check_config(cf);
	interval = gc_interval_of(cf);
	env_config_release(env, cf);
	if (rc < 0) {
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		log_err("gc: out of memory");
		return NULL;
	}
	w->gw_env = env;
	w->gw_interval_s = interval;
	pthread_mutex_init(&w->gw_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->gw_cond, &ca);
	pthread_condattr_destroy(&ca);
	/* The thread exists even while cleanup is off, so that a reload can
	 * turn it on. */
	rc = pthread_create(&w->gw_thread, NULL, gc_worker_main, w);
	if (rc != 0) {
		log_err("gc: cannot start the worker thread: %s", strerror(rc));
		goto fail;
	}
	gc_log_interval(interval);
	return w;
fail:
	pthread_cond_destroy(&w->gw_cond);
	pthread_mutex_destroy(&w->gw_lock);
	free(w);
	return NULL;
}

void gc_worker_reload(struct gc_worker *w)
{
	struct config *cf;
	int64_t interval;
	int changed;

	if (w == NULL) {
		return;
	}
	cf = env_config_acquire(w->gw_env);
	interval = gc_interval_of(cf);
	env_config_release(w->gw_env, cf);
	pthread_mutex_lock(&w->gw_lock);
	changed = interval != w->gw_interval_s;
	w->gw_interval_s = interval;
	w->gw_kick = 1;
	pthread_cond_broadcast(&w->gw_cond);
	pthread_mutex_unlock(&w->gw_lock);
	if (changed) {
		gc_log_interval(interval);
	}
}

void gc_worker_stop(struct gc_worker *w)
{
	if (w == NULL) {
		return;
	}
	pthread_mutex_lock(&w->gw_lock);
	w->gw_stop = 1;
	pthread_cond_broadcast(&w->gw_cond);
	pthread_mutex_unlock(&w->gw_lock);
	pthread_join(w->gw_thread, NULL);
	pthread_cond_destroy(&w->gw_cond);
	pthread_mutex_destroy(&w->gw_lock);
	free(w);
}
