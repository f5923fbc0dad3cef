/* metrics.c: process-wide counters and histograms, rendered as Prometheus text. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "build_config.h"
#include "buf.h"
#include "metrics.h"

/* Label values come from the config (provider names) and static slugs, but a
 * caller could pass something a client chose: past this many series per
 * family, new label sets are folded into one "other" series. */
#define METRICS_SERIES_MAX 512
#define METRICS_LABEL_MAX 64 /* bytes kept of one label value */
#define METRICS_OVERFLOW_LABEL "other"

/* Request latency buckets, seconds. */
static const double metrics_latency_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1,     2.5,  5,     10};
static const char *const metrics_latency_le_text[] = {"0.001", "0.0025", "0.005", "0.01", "0.025",
                                                      "0.05",  "0.1",    "0.25",  "0.5",  "1",
                                                      "2.5",   "5",      "10"};
#define METRICS_LATENCY_N (sizeof(metrics_latency_le) / sizeof(metrics_latency_le[0]))

/* Cleanup pass duration buckets, seconds. */
static const double metrics_gc_le[] = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900};
static const char *const metrics_gc_le_text[] = {"0.1", "0.5", "1", "5", "10", "30", "60", "300", "900"};
#define METRICS_GC_LE_N (sizeof(metrics_gc_le) / sizeof(metrics_gc_le[0]))

/* What a cleanup pass deletes, in the order of metrics_gc.mgc_deleted. */
static const char *const metrics_gc_kinds[] = {"records", "events", "outbox", "captures",
                                               "parked"};
#define METRICS_GC_KINDS 5

struct metrics_series {
	char ms_a[METRICS_LABEL_MAX]; /* first label value */
	char ms_b[METRICS_LABEL_MAX]; /* second label value, "" when the family has one label */
	uint64_t ms_count;
	/* histogram families only */
	uint64_t ms_buckets[METRICS_LATENCY_N];
	double ms_sum;
};

struct metrics_family {
	struct metrics_series *mf_series;
	size_t mf_n;
	size_t mf_cap;
};

static pthread_mutex_t metrics_lock = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_family metrics_requests;   /* provider, outcome */
static struct metrics_family metrics_rejects;    /* provider, reason */
static struct metrics_family metrics_duplicates; /* provider */
static struct metrics_family metrics_mismatches; /* provider */
static struct metrics_family metrics_latency;    /* provider (histogram) */
static struct metrics_family metrics_unapplieds; /* provider, reason */
static struct metrics_family metrics_rec_checked;  /* provider */
static struct metrics_family metrics_rec_events;   /* provider, result */
static struct metrics_family metrics_rec_failures; /* provider */
static struct metrics_family metrics_fetch_failures; /* provider */
static int64_t metrics_fetch_waiting_now;
static int64_t metrics_outbox_unrecorded_now;
static struct metrics_family metrics_http_cuts;     /* listener, reason */
static struct metrics_family metrics_http_wakeups;  /* listener */
static struct metrics_family metrics_http_refusals; /* listener, status */
static struct metrics_family metrics_http_drains;   /* listener, kind */
static struct metrics_family metrics_http_lingers;  /* listener */
static struct metrics_family metrics_http_resumes;  /* listener: count and seconds */
static struct metrics_family metrics_capture_skips; /* reason */
static uint64_t metrics_capture_failures;
static int64_t metrics_start_ms;
/* The store's library and its version, for idemhook_build_info (static). */
static const char *metrics_store_library = "";
static int metrics_ready_now;

/* Configuration reloads. The generation counts the configurations the
 * process has run on, starting at 1 with the process: a reload taken except
 * [outbound] moves it too. */
static struct {
	uint64_t mr_ok;
	uint64_t mr_failed;
	uint64_t mr_generation;
	int mr_last_ok;            /* the last reload was taken (1 before any) */
	int64_t mr_last_success_s; /* the last configuration taken (the start) */
} metrics_reloads = {0, 0, 1, 1, 0};

/* Keys a reload changed that take effect only at the next start:
 * idemhook_config_restart_pending{section,key}. */
#define METRICS_RESTART_KEYS_MAX 64
static struct {
	char mrk_section[METRICS_LABEL_MAX];
	char mrk_key[METRICS_LABEL_MAX];
} metrics_restart_keys[METRICS_RESTART_KEYS_MAX];
static size_t metrics_n_restart_keys;

/* Reconciliation runs (idemhook reconcile, the daemon's worker). */
static struct {
	uint64_t mrc_ok;
	uint64_t mrc_failed;
	int64_t mrc_last_success_s; /* 0: none yet */
} metrics_rec;

/* Cleanup passes of the daemon's worker. */
static struct {
	uint64_t mgc_ok;
	uint64_t mgc_failed;
	uint64_t mgc_deleted[METRICS_GC_KINDS];
	uint64_t mgc_reclaimed;
	uint64_t mgc_buckets[METRICS_GC_LE_N];
	uint64_t mgc_count;
	double mgc_sum;
	int64_t mgc_last_success_s; /* 0: none yet */
} metrics_gc;

static void metrics_label_copy(char out[METRICS_LABEL_MAX], const char *s)
{
	size_t n;

	if (s == NULL) {
		s = "";
	}
	n = strnlen(s, METRICS_LABEL_MAX - 1);
	memcpy(out, s, n);
	out[n] = '\0';
}

static int metrics_series_is(const struct metrics_series *s, const char *a, const char *b)
{
	return strncmp(s->ms_a, a, METRICS_LABEL_MAX - 1) == 0 &&
	       strncmp(s->ms_b, b, METRICS_LABEL_MAX - 1) == 0;
}

/* The series for (a, b), created on first use; NULL when out of memory.
 * Called with metrics_lock held. */
static struct metrics_series *metrics_series_get(struct metrics_family *f, const char *a,
                                                 const char *b)
{
	struct metrics_series *grown;
	struct metrics_series *s;
	size_t cap;
	size_t i;

	a = a != NULL ? a : "";
	b = b != NULL ? b : "";
	for (i = 0; i < f->mf_n; i++) {
		if (metrics_series_is(&f->mf_series[i], a, b)) {
			return &f->mf_series[i];
		}
	}
	if (f->mf_n >= METRICS_SERIES_MAX) {
		a = METRICS_OVERFLOW_LABEL;
		b = b[0] != '\0' ? METRICS_OVERFLOW_LABEL : "";
		for (i = 0; i < f->mf_n; i++) {
			if (metrics_series_is(&f->mf_series[i], a, b)) {
				return &f->mf_series[i];
			}
		}
	}
	if (f->mf_n == f->mf_cap) {
		cap = f->mf_cap != 0 ? f->mf_cap * 2 : 8;
		grown = realloc(f->mf_series, cap * sizeof(*grown));
		if (grown == NULL) {
			return NULL;
		}
		f->mf_series = grown;
		f->mf_cap = cap;
	}
	s = &f->mf_series[f->mf_n++];
	memset(s, 0, sizeof(*s));
	metrics_label_copy(s->ms_a, a);
	metrics_label_copy(s->ms_b, b);
	return s;
}

/* Adds n to the series (a, b); called with metrics_lock held. */
static void metrics_add_locked(struct metrics_family *f, const char *a, const char *b, uint64_t n)
{
	struct metrics_series *s = metrics_series_get(f, a, b);

	if (s != NULL) {
		s->ms_count += n;
	}
}

static void metrics_count(struct metrics_family *f, const char *a, const char *b)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_add_locked(f, a, b, 1);
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_request(const char *provider, const char *outcome, double seconds)
{
	struct metrics_series *s;
	size_t i;

	pthread_mutex_lock(&metrics_lock);
	s = metrics_series_get(&metrics_requests, provider, outcome);
	if (s != NULL) {
		s->ms_count++;
	}
	s = metrics_series_get(&metrics_latency, provider, "");
	if (s != NULL) {
		if (!(seconds >= 0)) {
			seconds = 0;
		}
		s->ms_count++;
		s->ms_sum += seconds;
		for (i = 0; i < METRICS_LATENCY_N; i++) {
			if (seconds <= metrics_latency_le[i]) {
				s->ms_buckets[i]++;
			}
		}
	}
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_rejected(const char *provider, const char *reason)
{
	metrics_count(&metrics_rejects, provider, reason);
}

void metrics_duplicate(const char *provider)
{
	metrics_count(&metrics_duplicates, provider, "");
}

void metrics_mismatch(const char *provider)
{
	metrics_count(&metrics_mismatches, provider, "");
}

void metrics_unapplied(const char *provider, const char *reason)
{
	metrics_count(&metrics_unapplieds, provider, reason);
}

void metrics_declare_provider(const char *provider, const char *const *outcomes,
                              const char *const *rejected)
{
	size_t i;

	pthread_mutex_lock(&metrics_lock);
	for (i = 0; outcomes != NULL && outcomes[i] != NULL; i++) {
		(void)metrics_series_get(&metrics_requests, provider, outcomes[i]);
	}
	for (i = 0; rejected != NULL && rejected[i] != NULL; i++) {
		(void)metrics_series_get(&metrics_rejects, provider, rejected[i]);
	}
	(void)metrics_series_get(&metrics_duplicates, provider, "");
	(void)metrics_series_get(&metrics_mismatches, provider, "");
	(void)metrics_series_get(&metrics_latency, provider, "");
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_declare_unapplied(const char *provider, const char *const *reasons)
{
	size_t i;

	pthread_mutex_lock(&metrics_lock);
	for (i = 0; reasons != NULL && reasons[i] != NULL; i++) {
		(void)metrics_series_get(&metrics_unapplieds, provider, reasons[i]);
	}
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_declare_reconcile(const char *provider)
{
	static const struct metrics_reconcile none;

	/* The series a run adds to, each at 0. */
	metrics_reconcile_instance(provider, &none);
}

void metrics_declare_fetch(const char *provider)
{
	pthread_mutex_lock(&metrics_lock);
	(void)metrics_series_get(&metrics_fetch_failures, provider, "");
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_declare_http(const char *listener, const char *const *cuts, const int *statuses,
                          const char *const *drains)
{
	char text[16];
	size_t i;

	pthread_mutex_lock(&metrics_lock);
	for (i = 0; cuts != NULL && cuts[i] != NULL; i++) {
		(void)metrics_series_get(&metrics_http_cuts, listener, cuts[i]);
	}
	for (i = 0; statuses != NULL && statuses[i] != 0; i++) {
		snprintf(text, sizeof(text), "%d", statuses[i]);
		(void)metrics_series_get(&metrics_http_refusals, listener, text);
	}
	for (i = 0; drains != NULL && drains[i] != NULL; i++) {
		(void)metrics_series_get(&metrics_http_drains, listener, drains[i]);
	}
	(void)metrics_series_get(&metrics_http_wakeups, listener, "");
	(void)metrics_series_get(&metrics_http_lingers, listener, "");
	(void)metrics_series_get(&metrics_http_resumes, listener, "");
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_http_cut(const char *listener, const char *reason)
{
	metrics_count(&metrics_http_cuts, listener, reason);
}

void metrics_http_wakeup(const char *listener)
{
	metrics_count(&metrics_http_wakeups, listener, "");
}

void metrics_http_refused(const char *listener, int status)
{
	char text[16];

	snprintf(text, sizeof(text), "%d", status);
	metrics_count(&metrics_http_refusals, listener, text);
}

void metrics_http_drain(const char *listener, const char *kind)
{
	metrics_count(&metrics_http_drains, listener, kind);
}

void metrics_http_linger(const char *listener)
{
	metrics_count(&metrics_http_lingers, listener, "");
}

void metrics_http_resumed(const char *listener, uint64_t n, double seconds)
{
	struct metrics_series *s;

	pthread_mutex_lock(&metrics_lock);
	s = metrics_series_get(&metrics_http_resumes, listener, "");
	if (s != NULL) {
		s->ms_count += n;
		s->ms_sum += seconds;
	}
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_declare_capture_skipped(const char *const *reasons)
{
	size_t i;

	pthread_mutex_lock(&metrics_lock);
	for (i = 0; reasons != NULL && reasons[i] != NULL; i++) {
		(void)metrics_series_get(&metrics_capture_skips, reasons[i], "");
	}
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_capture_skipped(const char *reason)
{
	metrics_count(&metrics_capture_skips, reason, "");
}

void metrics_capture_failure(void)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_capture_failures++;
	pthread_mutex_unlock(&metrics_lock);
}

static int64_t metrics_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

void metrics_set_store_library(const char *version)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_store_library = version != NULL ? version : "";
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_set_start_time(int64_t ms)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_start_ms = ms;
	metrics_reloads.mr_last_success_s = ms / 1000;
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_set_ready(int ready)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_ready_now = ready != 0;
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_reload(int result)
{
	int ok = result == METRICS_RELOAD_TAKEN;

	pthread_mutex_lock(&metrics_lock);
	if (ok) {
		metrics_reloads.mr_ok++;
		metrics_reloads.mr_last_success_s = metrics_now_s();
	} else {
		metrics_reloads.mr_failed++;
	}
	if (result != METRICS_RELOAD_REFUSED) {
		metrics_reloads.mr_generation++;
	}
	metrics_reloads.mr_last_ok = ok;
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_restart_pending_clear(void)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_n_restart_keys = 0;
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_restart_pending_add(const char *section, const char *key)
{
	pthread_mutex_lock(&metrics_lock);
	if (metrics_n_restart_keys < METRICS_RESTART_KEYS_MAX) {
		metrics_label_copy(metrics_restart_keys[metrics_n_restart_keys].mrk_section,
		                   section);
		metrics_label_copy(metrics_restart_keys[metrics_n_restart_keys].mrk_key, key);
		metrics_n_restart_keys++;
	}
	pthread_mutex_unlock(&metrics_lock);
}

static uint64_t metrics_nonneg(int64_t v)
{
	return v > 0 ? (uint64_t)v : 0;
}

void metrics_gc_pass(const struct metrics_gc_pass *pass)
{
	double seconds = pass->mg_seconds >= 0 ? pass->mg_seconds : 0;
	size_t i;

	pthread_mutex_lock(&metrics_lock);
	if (pass->mg_ok) {
		metrics_gc.mgc_ok++;
		metrics_gc.mgc_last_success_s = metrics_now_s();
	} else {
		metrics_gc.mgc_failed++;
	}
	metrics_gc.mgc_deleted[0] += metrics_nonneg(pass->mg_records);
	metrics_gc.mgc_deleted[1] += metrics_nonneg(pass->mg_events);
	metrics_gc.mgc_deleted[2] += metrics_nonneg(pass->mg_outbox);
	metrics_gc.mgc_deleted[3] += metrics_nonneg(pass->mg_captures);
	metrics_gc.mgc_deleted[4] += metrics_nonneg(pass->mg_parked);
	metrics_gc.mgc_reclaimed += metrics_nonneg(pass->mg_reclaimed_bytes);
	metrics_gc.mgc_count++;
	metrics_gc.mgc_sum += seconds;
	for (i = 0; i < METRICS_GC_LE_N; i++) {
		if (seconds <= metrics_gc_le[i]) {
			metrics_gc.mgc_buckets[i]++;
		}
	}
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_reconcile_instance(const char *provider, const struct metrics_reconcile *m)
{
	pthread_mutex_lock(&metrics_lock);
	/* Every series exists once the instance has run, zero or not. */
	metrics_add_locked(&metrics_rec_checked, provider, "", metrics_nonneg(m->mr_orders_checked));
	metrics_add_locked(&metrics_rec_events, provider, "applied", metrics_nonneg(m->mr_applied));
	metrics_add_locked(&metrics_rec_events, provider, "already_known", metrics_nonneg(m->mr_known));
	metrics_add_locked(&metrics_rec_events, provider, "refused", metrics_nonneg(m->mr_refused));
	metrics_add_locked(&metrics_rec_failures, provider, "", metrics_nonneg(m->mr_failed));
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_fetch_failure(const char *provider)
{
	metrics_count(&metrics_fetch_failures, provider, "");
}

void metrics_set_fetch_waiting(int64_t n)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_fetch_waiting_now = n;
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_set_outbox_unrecorded(int64_t n)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_outbox_unrecorded_now = n;
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_reconcile_run(int ok)
{
	pthread_mutex_lock(&metrics_lock);
	if (ok) {
		metrics_rec.mrc_ok++;
		metrics_rec.mrc_last_success_s = metrics_now_s();
	} else {
		metrics_rec.mrc_failed++;
	}
	pthread_mutex_unlock(&metrics_lock);
}

void metrics_ops_get(struct metrics_ops *ret)
{
	pthread_mutex_lock(&metrics_lock);
	ret->mo_gc_last_success_s = metrics_gc.mgc_last_success_s;
	ret->mo_gc_ok = metrics_gc.mgc_ok;
	ret->mo_gc_failed = metrics_gc.mgc_failed;
	ret->mo_reconcile_last_success_s = metrics_rec.mrc_last_success_s;
	ret->mo_reconcile_ok = metrics_rec.mrc_ok;
	ret->mo_reconcile_failed = metrics_rec.mrc_failed;
	pthread_mutex_unlock(&metrics_lock);
}

static void metrics_family_reset(struct metrics_family *f)
{
	free(f->mf_series);
	memset(f, 0, sizeof(*f));
}

void metrics_reset(void)
{
	pthread_mutex_lock(&metrics_lock);
	metrics_family_reset(&metrics_requests);
	metrics_family_reset(&metrics_rejects);
	metrics_family_reset(&metrics_duplicates);
	metrics_family_reset(&metrics_mismatches);
	metrics_family_reset(&metrics_latency);
	metrics_family_reset(&metrics_unapplieds);
	metrics_family_reset(&metrics_rec_checked);
	metrics_family_reset(&metrics_rec_events);
	metrics_family_reset(&metrics_rec_failures);
	metrics_family_reset(&metrics_fetch_failures);
	metrics_fetch_waiting_now = 0;
	metrics_outbox_unrecorded_now = 0;
	metrics_family_reset(&metrics_http_cuts);
	metrics_family_reset(&metrics_http_wakeups);
	metrics_family_reset(&metrics_http_refusals);
	metrics_family_reset(&metrics_http_drains);
	metrics_family_reset(&metrics_http_lingers);
	metrics_family_reset(&metrics_http_resumes);
	metrics_family_reset(&metrics_capture_skips);
	memset(&metrics_rec, 0, sizeof(metrics_rec));
	metrics_capture_failures = 0;
	metrics_ready_now = 0;
	memset(&metrics_reloads, 0, sizeof(metrics_reloads));
	metrics_reloads.mr_generation = 1;
	metrics_reloads.mr_last_ok = 1;
	metrics_reloads.mr_last_success_s = metrics_start_ms / 1000;
	memset(&metrics_gc, 0, sizeof(metrics_gc));
	pthread_mutex_unlock(&metrics_lock);
}

/* A label value with \, " and newline escaped as the text format asks. */
static int metrics_label_value(struct buf *out, const char *s)
{
	const char *p;
	int rc;

	if (buf_puts(out, "\"") < 0) {
		return -1;
	}
	for (p = s; *p != '\0'; p++) {
		if (*p == '\\') {
			rc = buf_puts(out, "\\\\");
		} else if (*p == '"') {
			rc = buf_puts(out, "\\\"");
		} else if (*p == '\n') {
			rc = buf_puts(out, "\\n");
		} else {
			rc = buf_append(out, p, 1);
		}
		if (rc < 0) {
			return -1;
		}
	}
	return buf_puts(out, "\"");
}

int metrics_text_header(struct buf *out, const char *name, const char *type, const char *help)
{
	return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int metrics_render_series(struct buf *out, const struct metrics_family *f, const char *name,
                                 const char *help, const char *la, const char *lb, int sums);

/* name{la="a",lb="b"} count, for each series of a counter family. */
static int metrics_render_counter(struct buf *out, const struct metrics_family *f, const char *name,
                                  const char *help, const char *la, const char *lb)
{
	return metrics_render_series(out, f, name, help, la, lb, 0);
}

/* The same with each series' sum (seconds) instead of its count. */
static int metrics_render_sum(struct buf *out, const struct metrics_family *f, const char *name,
                              const char *help, const char *la)
{
	return metrics_render_series(out, f, name, help, la, NULL, 1);
}

static int metrics_render_series(struct buf *out, const struct metrics_family *f, const char *name,
                                 const char *help, const char *la, const char *lb, int sums)
{
	const struct metrics_series *s;
	size_t i;

	if (metrics_text_header(out, name, "counter", help) < 0) {
		return -1;
	}
	for (i = 0; i < f->mf_n; i++) {
		s = &f->mf_series[i];
		if (buf_printf(out, "%s{%s=", name, la) < 0 ||
		    metrics_label_value(out, s->ms_a) < 0) {
			return -1;
		}
		if (lb != NULL &&
		    (buf_printf(out, ",%s=", lb) < 0 || metrics_label_value(out, s->ms_b) < 0)) {
			return -1;
		}
		if ((sums ? buf_printf(out, "} %.6f\n", s->ms_sum)
		          : buf_printf(out, "} %" PRIu64 "\n", s->ms_count)) < 0) {
			return -1;
		}
	}
	return 0;
}

/* What the listeners did before routing: connections the sweeper closed,
 * requests refused at the edge, drains, lingering closes. */
static int metrics_render_http(struct buf *out)
{
	if (metrics_render_counter(
	            out, &metrics_http_cuts, "idemhook_http_connections_cut_total",
	            "Connections the listener closed before their request was complete: "
	            "head_timeout, body_min_rate, make_room (at the connection limit), drain.",
	            "listener", "reason") < 0 ||
	    metrics_render_counter(
	            out, &metrics_http_wakeups, "idemhook_http_thread_wakeups_total",
	            "Times the sweeper woke a server thread that had completed nothing for 500 ms "
	            "while a request of its was under way that long or lay unread, or held 120 "
	            "connections and had left a request unread for 40 ms (libmicrohttpd waits on "
	            "after exactly 128 events).",
	            "listener", NULL) < 0 ||
	    metrics_render_counter(
	            out, &metrics_http_refusals, "idemhook_http_refused_total",
	            "Requests the listener answered itself before routing (400, 413, 414, 431, "
	            "501), by status.",
	            "listener", "status") < 0 ||
	    metrics_render_counter(out, &metrics_http_drains, "idemhook_http_drains_total",
	                           "Listener drains begun: reload (a new generation took over) "
	                           "or stop.",
	                           "listener", "kind") < 0 ||
	    metrics_render_counter(
	            out, &metrics_http_lingers, "idemhook_http_lingering_closes_total",
	            "Refused connections kept open after the answer to read and drop the rest "
	            "of their body, so the client reads the answer rather than a reset.",
	            "listener", NULL) < 0 ||
	    metrics_render_counter(out, &metrics_http_resumes, "idemhook_http_resumes_total",
	                           "Requests that waited for their commit (suspended) and were "
	                           "resumed once it was made.",
	                           "listener", NULL) < 0 ||
	    metrics_render_sum(out, &metrics_http_resumes, "idemhook_http_resume_seconds_total",
	                       "Time from each resume until its server thread took the answer "
	                       "up (the thread's wake-up and its other connections' work), "
	                       "summed; counted by the sweeper every 100 ms.",
	                       "listener") < 0) {
		return -1;
	}
	return 0;
}

static int metrics_render_latency(struct buf *out)
{
	const char *name = "idemhook_request_duration_seconds";
	const struct metrics_series *s;
	size_t i;
	size_t j;

	if (metrics_text_header(out, name, "histogram",
	                   "Time from request head to answer built, per provider instance.") < 0) {
		return -1;
	}
	for (i = 0; i < metrics_latency.mf_n; i++) {
		s = &metrics_latency.mf_series[i];
		for (j = 0; j < METRICS_LATENCY_N; j++) {
			if (buf_printf(out, "%s_bucket{provider=", name) < 0 ||
			    metrics_label_value(out, s->ms_a) < 0 ||
			    buf_printf(out, ",le=\"%s\"} %" PRIu64 "\n", metrics_latency_le_text[j],
			               s->ms_buckets[j]) < 0) {
				return -1;
			}
		}
		if (buf_printf(out, "%s_bucket{provider=", name) < 0 ||
		    metrics_label_value(out, s->ms_a) < 0 ||
		    buf_printf(out, ",le=\"+Inf\"} %" PRIu64 "\n", s->ms_count) < 0) {
			return -1;
		}
		if (buf_printf(out, "%s_sum{provider=", name) < 0 ||
		    metrics_label_value(out, s->ms_a) < 0 ||
		    buf_printf(out, "} %.9f\n", s->ms_sum) < 0) {
			return -1;
		}
		if (buf_printf(out, "%s_count{provider=", name) < 0 ||
		    metrics_label_value(out, s->ms_a) < 0 ||
		    buf_printf(out, "} %" PRIu64 "\n", s->ms_count) < 0) {
			return -1;
		}
	}
	return 0;
}

/* One sample without labels, after its HELP and TYPE lines. */
int metrics_text_single(struct buf *out, const char *name, const char *type, const char *help,
                        const char *value_fmt, ...)
{
	char value[64];
	va_list ap;

	va_start(ap, value_fmt);
	vsnprintf(value, sizeof(value), value_fmt, ap);
	va_end(ap);
	return metrics_text_header(out, name, type, help) < 0 ? -1
	                                                 : buf_printf(out, "%s %s\n", name, value);
}

/* Build, start, readiness, configuration reloads. */
static int metrics_render_process(struct buf *out)
{
	size_t i;

	if (metrics_text_header(out, "idemhook_build_info", "gauge",
	                   "Always 1; the labels say which idemhook and SQLite run.") < 0 ||
	    buf_puts(out, "idemhook_build_info{version=") < 0 ||
	    metrics_label_value(out, IDEMHOOK_VERSION) < 0 || buf_puts(out, ",sqlite=") < 0 ||
	    metrics_label_value(out, metrics_store_library) < 0 || buf_puts(out, "} 1\n") < 0) {
		return -1;
	}
	if (metrics_text_single(out, "process_start_time_seconds", "gauge",
	                   "Start time of the process since the epoch, in seconds.", "%" PRId64,
	                   metrics_start_ms / 1000) < 0 ||
	    metrics_text_single(out, "idemhook_ready", "gauge",
	                   "1 while /readyz answers 200 (the writer can commit, no migration "
	                   "pending, listeners answer, not draining).",
	                   "%d", metrics_ready_now) < 0) {
		return -1;
	}
	if (metrics_text_header(
	            out, "idemhook_config_restart_pending", "gauge",
	            "Keys the running configuration file changes that take effect only at "
	            "the next start (1 each).") < 0) {
		return -1;
	}
	for (i = 0; i < metrics_n_restart_keys; i++) {
		if (buf_puts(out, "idemhook_config_restart_pending{section=") < 0 ||
		    metrics_label_value(out, metrics_restart_keys[i].mrk_section) < 0 ||
		    buf_puts(out, ",key=") < 0 ||
		    metrics_label_value(out, metrics_restart_keys[i].mrk_key) < 0 ||
		    buf_puts(out, "} 1\n") < 0) {
			return -1;
		}
	}
	if (metrics_text_header(out, "idemhook_config_reloads_total", "counter",
	                   "Configuration reloads (SIGHUP), taken (success) or refused (failure).") <
	            0 ||
	    buf_printf(out,
	               "idemhook_config_reloads_total{result=\"success\"} %" PRIu64 "\n"
	               "idemhook_config_reloads_total{result=\"failure\"} %" PRIu64 "\n",
	               metrics_reloads.mr_ok, metrics_reloads.mr_failed) < 0) {
		return -1;
	}
	return metrics_text_single(out, "idemhook_config_generation", "gauge",
	                      "Configurations taken since the start: 1 at start, +1 per reload taken.",
	                      "%" PRIu64, metrics_reloads.mr_generation) < 0 ||
	                       metrics_text_single(out, "idemhook_config_last_reload_successful", "gauge",
	                                      "1 when the last reload was taken (or none was tried), 0 "
	                                      "when it was refused.",
	                                      "%d", metrics_reloads.mr_last_ok) < 0 ||
	                       metrics_text_single(out, "idemhook_config_last_reload_success_timestamp_seconds",
	                                      "gauge",
	                                      "When the running configuration was taken, in seconds "
	                                      "since the epoch.",
	                                      "%" PRId64, metrics_reloads.mr_last_success_s) < 0
	               ? -1
	               : 0;
}

/* The cleanup worker's passes. */
static int metrics_render_gc(struct buf *out)
{
	const char *name = "idemhook_gc_duration_seconds";
	size_t i;

	if (metrics_text_header(out, "idemhook_gc_runs_total", "counter",
	                   "Cleanup passes of the daemon's worker, by result.") < 0 ||
	    buf_printf(out,
	               "idemhook_gc_runs_total{result=\"success\"} %" PRIu64 "\n"
	               "idemhook_gc_runs_total{result=\"failure\"} %" PRIu64 "\n",
	               metrics_gc.mgc_ok, metrics_gc.mgc_failed) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_gc_deleted_total", "counter",
	                   "Rows (and capture files) deleted by cleanup passes, by kind.") < 0) {
		return -1;
	}
	for (i = 0; i < METRICS_GC_KINDS; i++) {
		if (buf_printf(out, "idemhook_gc_deleted_total{kind=\"%s\"} %" PRIu64 "\n",
		               metrics_gc_kinds[i], metrics_gc.mgc_deleted[i]) < 0) {
			return -1;
		}
	}
	if (metrics_text_single(out, "idemhook_gc_reclaimed_bytes_total", "counter",
	                   "Database file bytes cleanup gave back to the file system.",
	                   "%" PRIu64, metrics_gc.mgc_reclaimed) < 0 ||
	    metrics_text_single(out, "idemhook_gc_last_success_timestamp_seconds", "gauge",
	                   "When the last cleanup pass succeeded, in seconds since the epoch; 0 "
	                   "before the first.",
	                   "%" PRId64, metrics_gc.mgc_last_success_s) < 0) {
		return -1;
	}
	if (metrics_text_header(out, name, "histogram", "Duration of the cleanup passes.") < 0) {
		return -1;
	}
	for (i = 0; i < METRICS_GC_LE_N; i++) {
		if (buf_printf(out, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name, metrics_gc_le_text[i],
		               metrics_gc.mgc_buckets[i]) < 0) {
			return -1;
		}
	}
	return buf_printf(out,
	                  "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.6f\n%s_count %" PRIu64 "\n",
	                  name, metrics_gc.mgc_count, name, metrics_gc.mgc_sum, name,
	                  metrics_gc.mgc_count);
}

/* Reconciliation runs and what they found. */
static int metrics_render_reconcile(struct buf *out)
{
	if (metrics_text_header(out, "idemhook_reconcile_runs_total", "counter",
	                   "Reconciliation runs, by result (failure: a question to a provider "
	                   "failed after its retries).") < 0 ||
	    buf_printf(out,
	               "idemhook_reconcile_runs_total{result=\"success\"} %" PRIu64 "\n"
	               "idemhook_reconcile_runs_total{result=\"failure\"} %" PRIu64 "\n",
	               metrics_rec.mrc_ok, metrics_rec.mrc_failed) < 0 ||
	    metrics_text_single(out, "idemhook_reconcile_last_success_timestamp_seconds", "gauge",
	                   "When the last reconciliation run without a failed question ended, in "
	                   "seconds since the epoch; 0 before the first.",
	                   "%" PRId64, metrics_rec.mrc_last_success_s) < 0) {
		return -1;
	}
	if (metrics_render_counter(out, &metrics_rec_checked, "idemhook_reconcile_orders_checked_total",
	                           "Waiting orders reconciliation asked a provider about.", "provider",
	                           NULL) < 0 ||
	    metrics_render_counter(out, &metrics_rec_events, "idemhook_reconcile_events_total",
	                           "Events reconciliation found, by what became of them: applied "
	                           "(the callback had not arrived), already_known, refused.",
	                           "provider", "result") < 0 ||
	    metrics_render_counter(out, &metrics_rec_failures, "idemhook_reconcile_failures_total",
	                           "Questions to a provider that failed after their retries, and "
	                           "events the store could not take; nothing of them was applied.",
	                           "provider", NULL) < 0) {
		return -1;
	}
	return 0;
}

/* Everything kept in memory, under the lock. */
static int metrics_render_memory(struct buf *out)
{
	if (metrics_render_counter(out, &metrics_requests, "idemhook_requests_total",
	                           "Provider callbacks answered, by provider instance and outcome.",
	                           "provider", "outcome") < 0) {
		return -1;
	}
	if (metrics_render_counter(
	            out, &metrics_rejects, "idemhook_rejected_total",
	            "Callbacks refused before any claim (nothing stored), by reason.", "provider",
	            "reason") < 0) {
		return -1;
	}
	if (metrics_render_counter(out, &metrics_duplicates, "idemhook_duplicates_absorbed_total",
	                           "Duplicate deliveries absorbed (the key was already claimed).",
	                           "provider", NULL) < 0) {
		return -1;
	}
	if (metrics_render_counter(
	            out, &metrics_mismatches, "idemhook_fingerprint_mismatches_total",
	            "Duplicate keys whose payload fingerprint differed from the stored one.",
	            "provider", NULL) < 0) {
		return -1;
	}
	if (metrics_render_counter(
	            out, &metrics_unapplieds, "idemhook_events_unapplied_total",
	            "Events acknowledged but not applied to an order (idemhook events list "
	            "--status failed), by reason.",
	            "provider", "reason") < 0) {
		return -1;
	}
	if (metrics_render_latency(out) < 0 || metrics_render_http(out) < 0) {
		return -1;
	}
	if (metrics_text_header(out, "idemhook_capture_failures_total", "counter",
	                   "Requests that could not be written to the capture spool.") < 0 ||
	    buf_printf(out, "idemhook_capture_failures_total %" PRIu64 "\n",
	               metrics_capture_failures) < 0 ||
	    metrics_render_counter(out, &metrics_capture_skips, "idemhook_capture_skipped_total",
	                           "Requests not captured because of a bound of the spool, by "
	                           "reason.",
	                           "reason", NULL) < 0) {
		return -1;
	}
	if (metrics_render_counter(out, &metrics_fetch_failures, "idemhook_fetch_failures_total",
	                           "Thin events whose full event could not be fetched after "
	                           "their retries; nothing of them was applied.",
	                           "provider", NULL) < 0 ||
	    metrics_text_single(out, "idemhook_events_fetch_waiting", "gauge",
	                        "Thin events acknowledged and waiting for their full event "
	                        "(idemhook events list --status fetching).",
	                        "%" PRId64, metrics_fetch_waiting_now) < 0) {
		return -1;
	}
	if (metrics_text_single(out, "idemhook_outbox_outcomes_unrecorded", "gauge",
	                        "Outbound calls answered whose outcome the database refused to "
	                        "record, kept in memory and written again every 500 ms (their "
	                        "rows show delivering meanwhile).",
	                        "%" PRId64, metrics_outbox_unrecorded_now) < 0) {
		return -1;
	}
	return metrics_render_process(out) < 0 || metrics_render_gc(out) < 0 ||
	                       metrics_render_reconcile(out) < 0
	               ? -1
	               : 0;
}

int metrics_render(struct buf *out)
{
	int rc;

	pthread_mutex_lock(&metrics_lock);
	rc = metrics_render_memory(out);
	pthread_mutex_unlock(&metrics_lock);
	return rc;
}
