/* fetch.c: the fetch worker: thin notifications' full events, asked of the
 * provider and applied once. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env.h"
#include "fetch.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "reconcile.h"

#define FETCH_BATCH 100  /* events listed at a time; a pass lists until none is left */
#define FETCH_RETRY_S 30 /* while some wait: they are asked again this often */
/* A pass lists from the oldest event it left waiting, or else from this
 * long before it started: a thin notification received just before a pass
 * may commit just after it listed. */
#define FETCH_MARGIN_MS 60000
/* And this often from the start: a thin notification recorded with an old
 * received_at (an in-process replay of a capture) is found too. */
#define FETCH_FULL_PASS_MS (3600 * 1000)

struct fetch_worker {
	const struct env *fw_env;
	pthread_t fw_thread;
	pthread_mutex_t fw_lock;
	pthread_cond_t fw_cond;
	int fw_stop;
	int fw_kick;
	int64_t fw_since_ms;   /* the worker's thread only */
	int64_t fw_asked_ms;   /* every event received before this was asked by the last pass */
	int64_t fw_retry_at_ms; /* monotonic: those left waiting are asked again from then on */
	int64_t fw_full_at_ms; /* monotonic: the last pass from the start */
	size_t fw_waiting;     /* left waiting by the last pass */
};

struct fetch_pending {
	char *fp_scope;
	char *fp_key;
	int64_t fp_received_ms;
	char *fp_type;    /* what the signed thin notification said: its type */
	char *fp_related; /* and the id of its object, or NULL */
	char *fp_context; /* and the account it is in, or NULL */
};

struct fetch_list {
	struct fetch_pending fl_items[FETCH_BATCH];
	size_t fl_n;
};

static int64_t fetch_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until the monotonic deadline_ms, a stop or, with kickable, a kick.
 * Returns 1 when stopping. */
static int fetch_wait(struct fetch_worker *w, int64_t deadline_ms, int kickable)
{
	struct timespec ts;
	int stop;

	ts.tv_sec = (time_t)(deadline_ms / 1000);
	ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
	pthread_mutex_lock(&w->fw_lock);
	while (!w->fw_stop && !(kickable && w->fw_kick)) {
		if (pthread_cond_timedwait(&w->fw_cond, &w->fw_lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	if (kickable) {
		w->fw_kick = 0;
	}
	stop = w->fw_stop;
	pthread_mutex_unlock(&w->fw_lock);
	return stop;
}

/* Backoff between a fetch's attempts: cut short by a stop only. */
static int fetch_sleep(void *arg, int64_t ms)
{
	struct fetch_worker *w = arg;

	return fetch_wait(w, fetch_monotonic_ms() + ms, 0);
}

static int fetch_list_row(void *arg, const struct ingest_waiting *iw)
{
	struct fetch_list *l = arg;
	struct fetch_pending *p = &l->fl_items[l->fl_n];

	if (l->fl_n >= FETCH_BATCH) {
		return 1;
	}
	p->fp_scope = strdup(iw->iw_scope != NULL ? iw->iw_scope : "");
	p->fp_key = strdup(iw->iw_key != NULL ? iw->iw_key : "");
	p->fp_received_ms = iw->iw_received_ms;
	p->fp_type = strdup(iw->iw_type != NULL ? iw->iw_type : "");
	p->fp_related = iw->iw_related != NULL ? strdup(iw->iw_related) : NULL;
	p->fp_context = iw->iw_context != NULL ? strdup(iw->iw_context) : NULL;
	l->fl_n++;
	if (p->fp_scope == NULL || p->fp_key == NULL || p->fp_type == NULL ||
	    (iw->iw_related != NULL && p->fp_related == NULL) ||
	    (iw->iw_context != NULL && p->fp_context == NULL)) {
		return -1;
	}
	return 0;
}

static void fetch_list_finish(struct fetch_list *l)
{
	size_t i;

	for (i = 0; i < l->fl_n; i++) {
		free(l->fl_items[i].fp_scope);
		free(l->fl_items[i].fp_key);
		free(l->fl_items[i].fp_type);
		free(l->fl_items[i].fp_related);
		free(l->fl_items[i].fp_context);
	}
	l->fl_n = 0;
}

/* Reported as reconciliation reports a failed question: the log line, a
 * counter, and nothing applied. */
static void fetch_failed(const char *provider, const char *key, const char *reason,
                         const char *detail)
{
	char qname[80];
	char qkey[INGEST_KEY_LOG_MAX + 8];

	log_warn("fetch provider=\"%s\" key=\"%s\" failed: %s: %s; nothing applied, asked again "
	         "within %d s",
	         log_quote(qname, sizeof(qname), provider), log_quote(qkey, sizeof(qkey), key),
	         reason != NULL ? reason : "failed", detail != NULL ? detail : "", FETCH_RETRY_S);
	metrics_fetch_failure(provider);
}

/* Fetches and applies one thin notification. Returns 1 when it no longer
 * waits, 0 when it still does. */
static int fetch_one(struct fetch_worker *w, const struct config *cf, const struct fetch_pending *p)
{
	const struct provider_conf *pc = config_provider(cf, p->fp_scope);
	struct provider_answer ans;
	struct ingest_item it;
	const char *why = NULL;
	struct event *ev;
	char qname[80];
	char qkey[INGEST_KEY_LOG_MAX + 8];
	char qorder[80];
	int done = 0;

	if (pc == NULL) {
		fetch_failed(p->fp_scope, p->fp_key, "unknown_provider",
		             "the configuration has no such [provider] any more");
		return 0;
	}
	/* A key taken out of the configuration since the thin event came. */
	if (pc->pc_provider->p_reconcile_mode == NULL ||
	    pc->pc_provider->p_reconcile_mode(pc, &why) == PROVIDER_RECONCILE_NONE) {
		fetch_failed(pc->pc_name, p->fp_key, "fetch_unconfigured",
		             why != NULL ? why : "the instance cannot be asked");
		return 0;
	}
	/* The answer must be the event the signed notification announced:
	 * one that says otherwise is a failed fetch, never applied. It is
	 * asked in the account the notification named. */
	if (reconcile_fetch(cf, pc, p->fp_key, p->fp_type, p->fp_related, p->fp_context,
	                    fetch_sleep, w, &ans) < 0 ||
	    ans.pa_events.eb_n != 1) {
		fetch_failed(pc->pc_name, p->fp_key,
		             ans.pa_reason != NULL ? ans.pa_reason : "malformed_answer",
		             ans.pa_detail[0] != '\0' ? ans.pa_detail
		                                      : "the answer holds no event");
		provider_answer_finish(&ans);
		return 0;
	}
	ev = &ans.pa_events.eb_events[0];
	if (ingest_apply_fetched(w->fw_env->env_store, cf, pc, ev, &it) < 0 ||
	    it.ii_result == INGEST_TRANSIENT) {
		fetch_failed(pc->pc_name, p->fp_key, "store_unavailable",
		             "the store could not take it now");
	} else {
		done = 1;
		if (it.ii_result == INGEST_NEW || it.ii_result == INGEST_FAILED) {
			log_notice("fetch provider=\"%s\" key=\"%s\" order=\"%s\" kind=%s %s=%s "
			           "source=fetch",
			           log_quote(qname, sizeof(qname), pc->pc_name),
			           log_quote(qkey, sizeof(qkey), ev->ev_key),
			           log_quote(qorder, sizeof(qorder),
			                     ev->ev_order_ref != NULL ? ev->ev_order_ref : ""),
			           event_kind_name(ev->ev_kind),
			           it.ii_result == INGEST_FAILED ? "refused" : "effect",
			           it.ii_result == INGEST_FAILED && it.ii_reason != NULL
			                   ? it.ii_reason
			           : it.ii_effect != NULL ? it.ii_effect
			                                  : "recorded");
			env_outbox_kick(w->fw_env);
		}
	}
	provider_answer_finish(&ans);
	return done;
}

static int fetch_stopping(struct fetch_worker *w)
{
	int stop;

	pthread_mutex_lock(&w->fw_lock);
	stop = w->fw_stop;
	pthread_mutex_unlock(&w->fw_lock);
	return stop;
}

/* One pass: walks every event that waits from the mark on, a batch at a
 * time (so events that keep failing never hold back those after them),
 * fetches each, and moves the mark to the oldest still waiting. Before its
 * retry is due, a pass (woken by a new thin event) asks only about what
 * the last pass did not: an event Stripe cannot give is asked again every
 * FETCH_RETRY_S, not at every new callback. */
static void fetch_pass(struct fetch_worker *w)
{
	const struct env *env = w->fw_env;
	struct fetch_list l;
	struct config *cf;
	int64_t started = env_now_ms(env);
	int64_t skip_before = INT64_MIN;
	int64_t oldest = -1;
	int64_t after_ms;
	char *after_scope = NULL;
	char *after_key = NULL;
	size_t waiting = 0;
	size_t i;
	int stopped = 0;

	memset(&l, 0, sizeof(l));
	if (fetch_monotonic_ms() - w->fw_full_at_ms >= FETCH_FULL_PASS_MS) {
		w->fw_since_ms = 0;
		w->fw_full_at_ms = fetch_monotonic_ms();
		w->fw_retry_at_ms = 0;
	}
	if (fetch_monotonic_ms() < w->fw_retry_at_ms) {
		skip_before = w->fw_asked_ms;
	}
	after_ms = w->fw_since_ms;
	for (;;) {
		int full;

		if (ingest_fetch_pending(env->env_store, after_ms, after_scope, after_key,
		                         FETCH_BATCH, fetch_list_row, &l) < 0) {
			stopped = 1;
			break;
		}
		full = l.fl_n == FETCH_BATCH;
		/* The config is held for a batch: its providers' keys are in it. */
		cf = env_config_acquire(env);
		for (i = 0; i < l.fl_n; i++) {
			const struct fetch_pending *p = &l.fl_items[i];

			if (fetch_stopping(w)) {
				stopped = 1;
			} else if (p->fp_received_ms < skip_before || !fetch_one(w, cf, p)) {
				/* Not due yet, or still failing: it waits. */
			} else {
				continue;
			}
			waiting++;
			if (oldest < 0 || p->fp_received_ms < oldest) {
				oldest = p->fp_received_ms;
			}
		}
		env_config_release(env, cf);
		if (!full || stopped) {
			break;
		}
		/* The next batch starts after the last one listed. */
		free(after_scope);
		free(after_key);
		after_ms = l.fl_items[l.fl_n - 1].fp_received_ms;
		after_scope = l.fl_items[l.fl_n - 1].fp_scope;
		after_key = l.fl_items[l.fl_n - 1].fp_key;
		l.fl_items[l.fl_n - 1].fp_scope = NULL;
		l.fl_items[l.fl_n - 1].fp_key = NULL;
		fetch_list_finish(&l);
	}
	fetch_list_finish(&l);
	free(after_scope);
	free(after_key);
	if (stopped) {
		return; /* the marks stay: the next pass walks this one's events again */
	}
	w->fw_waiting = waiting;
	metrics_set_fetch_waiting((int64_t)waiting);
	w->fw_since_ms = oldest >= 0 ? oldest : started - FETCH_MARGIN_MS;
	/* A thin event received just before this pass may commit after it. */
	w->fw_asked_ms = started - FETCH_MARGIN_MS;
	if (skip_before == INT64_MIN) {
		w->fw_retry_at_ms = fetch_monotonic_ms() + (int64_t)FETCH_RETRY_S * 1000;
	}
}

static void *fetch_worker_main(void *arg)
{
	struct fetch_worker *w = arg;

	pthread_setname_np(pthread_self(), "fetch"); /* top -H, perf */

	for (;;) {
		int64_t next;

		fetch_pass(w);
		/* Until a thin event comes (a kick), the retry of those that wait
		 * is due, or the next pass from the start is. */
		next = w->fw_waiting > 0 ? w->fw_retry_at_ms
		                         : w->fw_full_at_ms + FETCH_FULL_PASS_MS;
		if (fetch_wait(w, next, 1)) {
			break;
		}
	}
	return NULL;
}

struct fetch_worker *fetch_worker_start(const struct env *env)
{
	struct fetch_worker *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	int rc;

	if (w == NULL) {
		log_err("fetch: out of memory");
		return NULL;
	}
	w->fw_env = env;
	w->fw_full_at_ms = fetch_monotonic_ms(); /* since_ms is 0: the first pass is one */
	pthread_mutex_init(&w->fw_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->fw_cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&w->fw_thread, NULL, fetch_worker_main, w);
	if (rc != 0) {
		log_err("fetch: cannot start the worker thread: %s", strerror(rc));
		pthread_cond_destroy(&w->fw_cond);
		pthread_mutex_destroy(&w->fw_lock);
		free(w);
		return NULL;
	}
	return w;
}

void fetch_worker_kick(struct fetch_worker *w)
{
	if (w == NULL) {
		return;
	}
	pthread_mutex_lock(&w->fw_lock);
	w->fw_kick = 1;
	pthread_cond_broadcast(&w->fw_cond);
	pthread_mutex_unlock(&w->fw_lock);
}

void fetch_worker_stop(struct fetch_worker *w)
{
	if (w == NULL) {
		return;
	}
	pthread_mutex_lock(&w->fw_lock);
	w->fw_stop = 1;
	pthread_cond_broadcast(&w->fw_cond);
	pthread_mutex_unlock(&w->fw_lock);
	pthread_join(w->fw_thread, NULL);
	pthread_cond_destroy(&w->fw_cond);
	pthread_mutex_destroy(&w->fw_lock);
	free(w);
}
