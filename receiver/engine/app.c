/* app.c: the running daemon's shared state and the public route table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "app.h"
#include "capture.h"
#include "checkout.h"
#include "env.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "fetch.h"
#include "orders.h"
#include "outbound.h"
#include "provider.h"
#include "rejects.h"
#include "traffic.h"

#define APP_HOOKS_PREFIX "/hooks/"

/* Seconds on the monotonic clock, for latencies. */
static double app_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A config and the number of its holders: the daemon while it is current,
 * and every request or worker that acquired it. */
struct app_cfg_ref {
	struct config *acr_cfg;
	unsigned acr_refs; /* under app_cfg_mutex */
	struct app_cfg_ref *acr_next;
};

/* The env hooks (arg = struct app *). */
static struct config *app_env_acquire(void *arg)
{
	return app_config_acquire(arg);
}

static struct config *app_env_retain(void *arg, struct config *cf)
{
	return app_config_retain(arg, cf);
}

static void app_env_release(void *arg, struct config *cf)
{
	app_config_release(arg, cf);
}

static void app_env_outbox_kick(void *arg)
{
	struct app *app = arg;

	pthread_mutex_lock(&app->app_outbound_mutex);
	outbound_kick(app->app_outbound);
	pthread_mutex_unlock(&app->app_outbound_mutex);
}

static int app_env_outbox_kept(void *arg, int64_t row_id, struct outbound_kept *ret)
{
	struct app *app = arg;
	int found;

	pthread_mutex_lock(&app->app_outbound_mutex);
	found = outbound_outcome_kept(app->app_outbound, row_id, ret);
	pthread_mutex_unlock(&app->app_outbound_mutex);
	return found;
}

struct outbound *app_outbound_swap(struct app *app, struct outbound *ob)
{
	struct outbound *was;

	pthread_mutex_lock(&app->app_outbound_mutex);
	was = app->app_outbound;
	app->app_outbound = ob;
	pthread_mutex_unlock(&app->app_outbound_mutex);
	return was;
}

/* Exports every provider instance's series at 0 (metrics.h), and the order
 * API's and checkout page's: the labels known from the configuration, at
 * start and at each reload taken (each listener declares its own when it
 * starts, http.c). The
 * reject reasons are those every profile can give (docs/operations.md);
 * a profile's own (probe_signature, ...) appear with their first count. */
static void app_metrics_declare(const struct config *cf)
{
	static const char *const rejected[] = {
	        "bad_signature",  "stale_timestamp",    "malformed_signature", "missing_signature",
	        "malformed_body", "source_not_allowed", "batch_too_large",     NULL,
	};
	static const char *const by_provider[] = {INGEST_REASON_PROVIDER_RULES, NULL};
	const char *outcomes[INGEST_TRANSIENT + 2];
	size_t i;

	for (i = 0; i <= INGEST_TRANSIENT; i++) {
		outcomes[i] = ingest_result_name((enum ingest_result)i);
	}
	outcomes[i] = NULL;
	api_metrics_declare();
	for (i = 0; i < cf->cf_n_providers; i++) {
		const struct provider_conf *pc = &cf->cf_providers[i];
		const struct provider *p = pc->pc_provider;
		const char *why = NULL;

		metrics_declare_provider(pc->pc_name, outcomes, rejected);
		metrics_declare_unapplied(pc->pc_name, orders_refusal_reasons);
		metrics_declare_unapplied(pc->pc_name, by_provider);
		if (p != NULL && p->p_reconcile_mode != NULL &&
		    p->p_reconcile_mode(pc, &why) != PROVIDER_RECONCILE_NONE) {
			metrics_declare_reconcile(pc->pc_name);
			/* thin events are fetched with reconciliation's client */
			if (p->p_thin_events) {
				metrics_declare_fetch(pc->pc_name);
			}
		}
	}
}

int app_init(struct app *app, struct config *cf)
{
	memset(app, 0, sizeof(*app));
	if (pthread_mutex_init(&app->app_cfg_mutex, NULL) != 0) {
		log_err("app: cannot create the config mutex");
		return -1;
	}
	if (pthread_mutex_init(&app->app_outbound_mutex, NULL) != 0) {
		log_err("app: cannot create the outbound mutex");
		pthread_mutex_destroy(&app->app_cfg_mutex);
		return -1;
	}
	app->app_cfgs = calloc(1, sizeof(*app->app_cfgs));
	if (app->app_cfgs == NULL) {
		log_err("app: out of memory");
		pthread_mutex_destroy(&app->app_outbound_mutex);
		pthread_mutex_destroy(&app->app_cfg_mutex);
		return -1;
	}
	app->app_cfgs->acr_cfg = cf;
	app->app_cfgs->acr_refs = 1;
	app->app_env.env_clock = env_clock_ms;
	app->app_env.env_cfg_acquire = app_env_acquire;
	app->app_env.env_cfg_retain = app_env_retain;
	app->app_env.env_cfg_release = app_env_release;
	app->app_env.env_outbox_kick = app_env_outbox_kick;
	app->app_env.env_outbox_kept = app_env_outbox_kept;
	app->app_env.env_cfg_arg = app;
	app->app_started_ms = env_clock_ms();
	app_metrics_declare(cf);
	return 0;
}

void app_finish(struct app *app)
{
	struct app_cfg_ref *r;
	int held = 0;

	/* Every request and worker is gone by now: what is left is the
	 * current config with the daemon's reference, and nothing else. */
	while (app->app_cfgs != NULL) {
		r = app->app_cfgs;
		app->app_cfgs = r->acr_next;
		held += r->acr_refs > 1 || app->app_cfgs != NULL;
		config_destroy(r->acr_cfg);
		free(r);
	}
	if (held > 0) {
		log_warn("app: a configuration was still held at exit");
	}
	pthread_mutex_destroy(&app->app_outbound_mutex);
	pthread_mutex_destroy(&app->app_cfg_mutex);
}

/* A mutex, held for a few instructions, rather than a lone atomic count:
 * taking a reference must read the current pointer and count it as one
 * step against a swap, and release must find cf's count without a field
 * in struct config. */
struct config *app_config_acquire(struct app *app)
{
	struct config *cf;

	pthread_mutex_lock(&app->app_cfg_mutex);
	app->app_cfgs->acr_refs++;
	cf = app->app_cfgs->acr_cfg;
	pthread_mutex_unlock(&app->app_cfg_mutex);
	return cf;
}

struct config *app_config_retain(struct app *app, struct config *cf)
{
	struct app_cfg_ref *r;

	pthread_mutex_lock(&app->app_cfg_mutex);
	for (r = app->app_cfgs; r != NULL && r->acr_cfg != cf; r = r->acr_next) {
	}
	if (r != NULL) {
		r->acr_refs++;
	}
	pthread_mutex_unlock(&app->app_cfg_mutex);
	return cf;
}

/* Drops one reference under the mutex; returns the entry to free (after
 * the mutex) when it was the last, else NULL. */
static struct app_cfg_ref *app_config_unref(struct app *app, struct config *cf)
{
	struct app_cfg_ref **pr;
	struct app_cfg_ref *r;

	for (pr = &app->app_cfgs; *pr != NULL && (*pr)->acr_cfg != cf; pr = &(*pr)->acr_next) {
	}
	r = *pr;
	if (r == NULL) {
		log_err("app: a configuration released that nobody holds");
		return NULL;
	}
	r->acr_refs--;
	if (r->acr_refs > 0) {
		return NULL;
	}
	*pr = r->acr_next;
	return r;
}

void app_config_release(struct app *app, struct config *cf)
{
	struct app_cfg_ref *last;

	pthread_mutex_lock(&app->app_cfg_mutex);
	last = app_config_unref(app, cf);
	pthread_mutex_unlock(&app->app_cfg_mutex);
	if (last != NULL) {
		config_destroy(last->acr_cfg);
		free(last);
	}
}

void app_config_swap(struct app *app, struct config *cf)
{
	struct app_cfg_ref *r = calloc(1, sizeof(*r));
	struct app_cfg_ref *last;
	struct config *old;

	if (r == NULL) {
		log_err("app: out of memory; keeping the running configuration");
		config_destroy(cf);
		return;
	}
	r->acr_cfg = cf;
	r->acr_refs = 1; /* the daemon's */
	app_metrics_declare(cf);
	pthread_mutex_lock(&app->app_cfg_mutex);
	old = app->app_cfgs->acr_cfg;
	r->acr_next = app->app_cfgs;
	app->app_cfgs = r;
	last = app_config_unref(app, old);
	pthread_mutex_unlock(&app->app_cfg_mutex);
	if (last != NULL) {
		config_destroy(last->acr_cfg);
		free(last);
	}
}

/* One provider callback between its route and its answer. */
struct app_hook_job {
	struct app *hj_app;
	struct config *hj_cf; /* a reference of its own, released at the end */
	const struct provider_conf *hj_pc;
	struct ingest_job *hj_job;
	struct http_deferred *hj_defer;
	double hj_t0;
};

/* What an operator needs beyond the slug of a refused callback: the clock
 * skew of a stale timestamp, the limit a 413 broke. "" when nothing. */
static void app_hook_detail(const struct ingest_report *rep, char *out, size_t out_size)
{
	out[0] = '\0';
	if (rep->ir_has_skew) {
		snprintf(out, out_size, " skew_s=%lld tolerance_s=%lld (%s)", (long long)rep->ir_skew_s,
			 (long long)rep->ir_tolerance_s,
			 rep->ir_skew_s < 0 ? "signed in the past: a late retry or the sender's clock"
					    : "signed in the future: check this host's clock (NTP)");
	} else if (rep->ir_reason != NULL && strcmp(rep->ir_reason, "batch_too_large") == 0) {
		snprintf(out, out_size, " items=%zu limit=%d", rep->ir_n_events, INGEST_BATCH_MAX);
	}
}

/* Counts and logs one finished callback (client NULL: it went away). A
 * refused one (rejected before its claim, or failed by business rules) is
 * a warning, with its own reason and what the operator needs to act. */
static void app_hook_account(struct app *app, const struct provider_conf *pc, const struct ingest_report *rep,
			     int status, const char *client, double t0)
{
	double elapsed = app_mono_s() - t0;
	long long tenths = (long long)(elapsed * 10000.0 + 0.5); /* of a millisecond */
	char qname[80];
	char qkey[INGEST_KEY_LOG_MAX + 8];
	char qclient[160];
	char events[32] = "";
	char detail[160];
	char line[LOG_LINE_MAX];
	size_t n = 0;
	const char *reason = rep->ir_reason;
	enum log_level level = LOG_LEVEL_INFO;

	/* New rows may have been queued: no need to wait for the next poll. */
	if (rep->ir_n_new > 0 && app->app_outbound != NULL) {
		outbound_kick(app->app_outbound);
	}
	/* ... nor for a thin event's full event. */
	if (rep->ir_n_fetch > 0) {
		fetch_worker_kick(app->app_fetch);
	}
	metrics_request(pc->pc_name, ingest_result_name(rep->ir_result), elapsed);
	traffic_add(env_now_ms(&app->app_env), pc->pc_name,
	            traffic_kind_of(ingest_result_name(rep->ir_result)));
	if (rep->ir_result == INGEST_REJECTED) {
		rejects_add(env_now_ms(&app->app_env), pc->pc_name, rep->ir_reason, status, client);
	}
	if (rep->ir_n_events > 1) {
		snprintf(events, sizeof(events), " events=%zu", rep->ir_n_events);
	}
	if (rep->ir_result == INGEST_FAILED && rep->ir_failure[0] != '\0') {
		reason = rep->ir_failure;
	}
	if (rep->ir_result == INGEST_REJECTED || rep->ir_result == INGEST_FAILED) {
		level = LOG_LEVEL_WARNING;
	}
	app_hook_detail(rep, detail, sizeof(detail));
	/* The line of every callback, built without printf (issue 24): the
	 * bytes of "hook provider=\"%s\"%s %s=\"%s\" outcome=%s%s%s%s
	 * status=%d client=%s%s%s latency_ms=%lld.%lld" with the values below
	 * (test_log.c's test_a_line_built_without_printf_is_the_printf_line,
	 * whole lines in test_operator_output.c). */
	n = log_cat(line, sizeof(line), n, "hook provider=\"");
	n = log_cat(line, sizeof(line), n, log_quote(qname, sizeof(qname), pc->pc_name));
	n = log_cat(line, sizeof(line), n, "\"");
	n = log_cat(line, sizeof(line), n, events);
	n = log_cat(line, sizeof(line), n, rep->ir_n_events > 1 ? " first_key=\"" : " key=\"");
	n = log_cat(line, sizeof(line), n, log_quote(qkey, sizeof(qkey), rep->ir_first_key));
	n = log_cat(line, sizeof(line), n, "\" outcome=");
	n = log_cat(line, sizeof(line), n, ingest_result_name(rep->ir_result));
	if (reason != NULL) {
		n = log_cat(line, sizeof(line), n, " reason=");
		n = log_cat(line, sizeof(line), n, reason);
	}
	n = log_cat(line, sizeof(line), n, detail);
	n = log_cat(line, sizeof(line), n, " status=");
	n = log_cat_int(line, sizeof(line), n, status);
	if (client != NULL) {
		n = log_cat(line, sizeof(line), n, " client=\"");
		n = log_cat(line, sizeof(line), n, log_quote(qclient, sizeof(qclient), client));
		n = log_cat(line, sizeof(line), n, "\"");
	} else {
		n = log_cat(line, sizeof(line), n, " client=gone");
	}
	n = log_cat(line, sizeof(line), n, " latency_ms=");
	n = log_cat_int(line, sizeof(line), n, tenths / 10);
	n = log_cat(line, sizeof(line), n, ".");
	n = log_cat_int(line, sizeof(line), n, tenths % 10);
	log_text(level, line, n);
}

/* An answer the route makes itself at pc's path, in the provider's own
 * format where it has one (its callbacks take no other): the problem when
 * even that finds no memory. */
static void app_hook_refuse(const struct provider_conf *pc, int status, const char *slug,
                            const char *title, struct reply *ret)
{
	if (provider_refusal(pc, status, slug, title, NULL, ret) < 0) {
		reply_problem(ret, status, slug, title, NULL);
	}
}

/* A callback refused by allow_from that verifies comes from the provider
 * (or replays one of its callbacks within the tolerance): the address list
 * is likely out of date, and the provider goes on retrying into 403s until
 * its retry window closes. Said at warning, apart from the refusals of
 * anyone else, which cannot produce a valid signature. */
static void app_hook_sender_check(const struct provider_conf *pc, const struct http_request *req)
{
	char qname[80];
	char qclient[80];

	if (!provider_verifies(pc, req, (int64_t)time(NULL))) {
		return;
	}
	log_warn("hook provider=\"%s\" client=\"%s\": a correctly signed callback comes from an "
	         "address allow_from does not admit; it is refused (403), and the provider "
	         "retries it: if the provider sends from there now, update its list "
	         "(idemhook ips update, then reload) or add the address to allow_from",
	         log_quote(qname, sizeof(qname), pc->pc_name),
	         log_quote(qclient, sizeof(qclient), req->hr_client != NULL ? req->hr_client : ""));
}

/* The store's completion (its completion thread): only wakes the connection. */
static void app_hook_committed(void *arg)
{
	struct app_hook_job *hj = arg;

	http_resume(hj->hj_defer);
}

/* The deferred answer, on a server thread (req NULL: the client is gone). */
static void app_hook_finish(void *arg, const struct http_request *req, struct reply *ret)
{
	struct app_hook_job *hj = arg;
	struct ingest_report rep;
	struct reply scratch;

	reply_init(&scratch);
	if (ingest_finish(hj->hj_job, ret != NULL ? ret : &scratch, &rep) < 0 && ret != NULL) {
		reply_finish(ret);
		app_hook_refuse(hj->hj_pc, 503, "unavailable", "Temporarily unavailable", ret);
		reply_add_header(ret, "Retry-After", "1");
	}
	reply_finish(&scratch);
	app_hook_account(hj->hj_app, hj->hj_pc, &rep, ret != NULL ? ret->reply_status : 0,
			 req != NULL ? req->hr_client : NULL, hj->hj_t0);
	ingest_job_destroy(hj->hj_job);
	app_config_release(hj->hj_app, hj->hj_cf);
	free(hj);
}

/* Returns 1 when the deferred answer took over the caller's reference to
 * cf (released when it is sent), else 0: the caller still holds it. */
static int app_hook(struct app *app, struct config *cf, const struct http_request *req,
                    struct reply *ret)
{
	const char *name = req->hr_path + strlen(APP_HOOKS_PREFIX);
	const struct provider_conf *pc = config_provider(cf, name);
	struct ingest_job *job = NULL;
	struct app_hook_job *hj;
	struct ingest_report rep;
	double t0 = app_mono_s();

	if (pc == NULL) {
		reply_problem(ret, 404, "unknown_provider",
		              "No provider is configured at this path", NULL);
		return 0;
	}
	if (strcmp(req->hr_method, "POST") != 0) {
		app_hook_refuse(pc, 405, "method_not_allowed", "Callbacks are POSTed", ret);
		reply_add_header(ret, "Allow", "POST");
		return 0;
	}
	memset(&rep, 0, sizeof(rep));
	if (!config_provider_allows(pc, req->hr_client)) {
		app_hook_sender_check(pc, req);
		metrics_rejected(pc->pc_name, "source_not_allowed");
		rep.ir_result = INGEST_REJECTED;
		rep.ir_reason = "source_not_allowed";
		provider_error(pc, 403, "source_not_allowed",
		               "This address may not call this endpoint.", ret);
	} else if (ingest_prepare(app->app_env.env_store, cf, pc, req, NULL, &job, ret, &rep) < 0) {
		reply_finish(ret); /* what part of a refusal was made */
		app_hook_refuse(pc, 503, "unavailable", "Temporarily unavailable", ret);
		reply_add_header(ret, "Retry-After", "1");
		rep.ir_result = INGEST_TRANSIENT;
	}
	/* The capture is on disk before the reply leaves; taken while the
	 * claims wait for their COMMIT. */
	if (app->app_capture != NULL) {
		capture_request(app->app_capture, pc->pc_name, req, job == NULL && rep.ir_result == INGEST_REJECTED);
	}
	if (job == NULL) {
		app_hook_account(app, pc, &rep, ret->reply_status, req->hr_client, t0);
		return 0;
	}
	hj = calloc(1, sizeof(*hj));
	if (hj == NULL) {
		ingest_job_destroy(job);
		app_hook_refuse(pc, 503, "unavailable", "Temporarily unavailable", ret);
		reply_add_header(ret, "Retry-After", "1");
		rep.ir_result = INGEST_TRANSIENT;
		app_hook_account(app, pc, &rep, ret->reply_status, req->hr_client, t0);
		return 0;
	}
	hj->hj_app = app;
	/* The route's reference, handed over rather than counted again: two
	 * fewer turns of the mutex the server threads share (issue 24). */
	hj->hj_cf = cf;
	hj->hj_pc = pc;
	hj->hj_job = job;
	hj->hj_t0 = t0;
	/* No thread waits for the disk: the connection is suspended until the
	 * writer's completion resumes it, and a duplicate answered from a read
	 * connection goes out at once. */
	hj->hj_defer = http_defer(req, app_hook_finish, hj);
	ingest_submit(app->app_env.env_store, job, app_hook_committed, hj);
	return 1;
}

void app_route_public(void *arg, const struct http_request *req, struct reply *ret)
{
	struct app *app = arg;
	struct config *cf = app_config_acquire(app);

	if (strncmp(req->hr_path, APP_HOOKS_PREFIX, strlen(APP_HOOKS_PREFIX)) == 0) {
		if (app_hook(app, cf, req, ret)) {
			return; /* the deferred answer holds cf now */
		}
	} else if (strcmp(req->hr_path, "/healthz") == 0) {
		reply_set(ret, 200, "text/plain; charset=utf-8", "ok\n", 3);
	} else if (api_route(&app->app_env, cf, req, ret) || checkout_route(&app->app_env, cf, req, ret)) {
		/* answered */
	} else {
		reply_problem(ret, 404, "not_found", "Not found", NULL);
	}
	app_config_release(app, cf);
}

int app_timeouts_build(const struct config *cf, struct app_timeouts *t)
{
	size_t n = cf->cf_n_providers + 1; /* and /api */
	size_t i;
	int api;

	t->at_items = calloc(n, sizeof(*t->at_items));
	t->at_replies = calloc(n, sizeof(*t->at_replies));
	t->at_paths = calloc(n, sizeof(*t->at_paths));
	if (t->at_items == NULL || t->at_replies == NULL || t->at_paths == NULL) {
		return -1;
	}
	for (i = 0; i < cf->cf_n_providers; i++) {
		const struct provider_conf *pc = &cf->cf_providers[i];
		size_t len = strlen(APP_HOOKS_PREFIX) + strlen(pc->pc_name) + 1;
		struct reply *r = &t->at_replies[t->at_n];

		if (!provider_has_format(pc)) {
			continue;
		}
		reply_init(r);
		t->at_paths[t->at_n] = malloc(len);
		if (t->at_paths[t->at_n] == NULL) {
			return -1;
		}
		snprintf(t->at_paths[t->at_n], len, "%s%s", APP_HOOKS_PREFIX, pc->pc_name);
		t->at_items[t->at_n].htr_path = t->at_paths[t->at_n];
		t->at_items[t->at_n].htr_reply = r;
		t->at_n++;
		if (provider_refusal(pc, 408, "request_timeout", HTTP_TIMEOUT_TITLE,
		                     HTTP_TIMEOUT_DETAIL, r) < 0) {
			return -1;
		}
	}
	/* The order API's CORS headers on every 408 at /api and below, a slow
	 * head's too: the browser's script then reads the 408. */
	reply_init(&t->at_replies[t->at_n]);
	api = api_timeout_reply(cf, &t->at_replies[t->at_n]);
	if (api < 0) {
		reply_finish(&t->at_replies[t->at_n]);
		return -1;
	}
	if (api > 0) {
		t->at_paths[t->at_n] = strdup("/api");
		if (t->at_paths[t->at_n] == NULL) {
			reply_finish(&t->at_replies[t->at_n]);
			return -1;
		}
		t->at_items[t->at_n].htr_path = t->at_paths[t->at_n];
		t->at_items[t->at_n].htr_under = 1;
		t->at_items[t->at_n].htr_reply = &t->at_replies[t->at_n];
		t->at_n++;
	}
	return 0;
}

void app_timeouts_finish(struct app_timeouts *t)
{
	size_t i;

	for (i = 0; i < t->at_n; i++) {
		reply_finish(&t->at_replies[i]);
		free(t->at_paths[i]);
	}
	free(t->at_items);
	free(t->at_replies);
	free(t->at_paths);
	memset(t, 0, sizeof(*t));
}

void app_timeout_public(void *arg, const struct http_request *req, const struct http_refusal *why,
                        struct reply *ret)
{
	struct app *app = arg;
	struct config *cf = app_config_acquire(app);

	(void)why;
	api_refused(cf, req, ret);
	app_config_release(app, cf);
}

void app_refused_public(void *arg, const struct http_request *req, const struct http_refusal *why,
                        struct reply *ret)
{
	struct app *app = arg;
	struct config *cf = app_config_acquire(app);
	int hook = strncmp(req->hr_path, APP_HOOKS_PREFIX, strlen(APP_HOOKS_PREFIX)) == 0;
	const struct provider_conf *pc =
	        hook ? config_provider(cf, req->hr_path + strlen(APP_HOOKS_PREFIX)) : NULL;
	char qpath[160];
	char qlen[40];
	char qclient[160];

	/* A callback the listener refused before reading its body is logged
	 * like one its profile refused, with the limit it broke. */
	if (hook && why->hf_status == 413) {
		const char *len = http_header_get(req, "Content-Length");

		log_warn("hook path=\"%s\" outcome=rejected reason=body_too_large status=413 "
			 "content_length=%s limit_bytes=%zu ([server] body_max) client=\"%s\"",
			 log_quote(qpath, sizeof(qpath), req->hr_path),
			 len != NULL ? log_quote(qlen, sizeof(qlen), len) : "-", cf->cf_body_max,
			 log_quote(qclient, sizeof(qclient), req->hr_client));
	}
	api_refused(cf, req, ret);
	/* A provider's callbacks take its own format, whoever refuses them;
	 * without one, or without memory for it, the listener's problem stays. */
	if (pc != NULL && provider_has_format(pc)) {
		provider_refusal(pc, why->hf_status, why->hf_slug, why->hf_title, why->hf_detail,
		                 ret);
	}
	/* Refused by the listener before the route saw it (413, 431, ...). */
	if (hook) {
		traffic_add(env_now_ms(&app->app_env), req->hr_path + strlen(APP_HOOKS_PREFIX),
		            TRAFFIC_REJECTED);
		rejects_add(env_now_ms(&app->app_env), req->hr_path + strlen(APP_HOOKS_PREFIX),
		            ret->reply_status == 413 ? "body_too_large" : "refused_by_listener",
		            ret->reply_status, req->hr_client);
	}
	app_config_release(app, cf);
}
