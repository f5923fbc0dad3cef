/* app.c: the running daemon's shared state and the public route table. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "app.h"
#include "capture.h"
#include "checkout.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "outbound.h"
#include "provider.h"

#define APP_HOOKS_PREFIX "/hooks/"

int64_t app_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Seconds on the monotonic clock, for latencies. */
static double app_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int app_init(struct app *app, struct config *cf)
{
	pthread_rwlockattr_t attr;
	int rc;

	memset(app, 0, sizeof(*app));
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = pthread_rwlock_init(&app->app_cfg_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc != 0) {
		log_err("app: cannot create the config lock");
		return -1;
	}
	app->app_cfg = cf;
	app->app_started_ms = app_now_ms();
	return 0;
}

void app_finish(struct app *app)
{
	config_destroy(app->app_cfg);
	app->app_cfg = NULL;
	pthread_rwlock_destroy(&app->app_cfg_lock);
}

struct config *app_config_acquire(struct app *app)
{
	pthread_rwlock_rdlock(&app->app_cfg_lock);
	return app->app_cfg;
}

void app_config_release(struct app *app, struct config *cf)
{
	(void)cf;
	pthread_rwlock_unlock(&app->app_cfg_lock);
}

void app_config_swap(struct app *app, struct config *cf)
{
	struct config *old;

	pthread_rwlock_wrlock(&app->app_cfg_lock);
	old = app->app_cfg;
	app->app_cfg = cf;
	pthread_rwlock_unlock(&app->app_cfg_lock);
	config_destroy(old);
}

static void app_hook(struct app *app, const struct config *cf, const struct http_request *req, struct reply *ret)
{
	const char *name = req->hr_path + strlen(APP_HOOKS_PREFIX);
	const struct provider_conf *pc = config_provider(cf, name);
	struct ingest_options opt;
	struct ingest_report rep;
	char qkey[160];
	char qname[80];
	double t0 = app_mono_s();
	double elapsed;

	if (pc == NULL) {
		reply_problem(ret, 404, "unknown-provider", "No provider is configured at this path", NULL);
		return;
	}
	if (strcmp(req->hr_method, "POST") != 0) {
		reply_problem(ret, 405, "method-not-allowed", "Callbacks are POSTed", NULL);
		reply_add_header(ret, "Allow", "POST");
		return;
	}
	memset(&opt, 0, sizeof(opt));
	memset(&rep, 0, sizeof(rep));
	if (!config_provider_allows(pc, req->hr_client)) {
		metrics_rejected(pc->pc_name, "source_not_allowed");
		rep.ir_result = INGEST_REJECTED;
		rep.ir_reason = "source_not_allowed";
		pc->pc_provider->p_error(pc, 403, "source_not_allowed", "This address may not call this endpoint.",
					 ret);
	} else if (ingest_hook(app->app_store, cf, pc, req, &opt, ret, &rep) < 0) {
		reply_problem(ret, 503, "unavailable", "Temporarily unavailable", NULL);
		reply_add_header(ret, "Retry-After", "1");
		rep.ir_result = INGEST_TRANSIENT;
	}
	/* New rows may have been queued: no need to wait for the next poll. */
	if (rep.ir_n_new > 0 && app->app_outbound != NULL) {
		outbound_kick(app->app_outbound);
	}
	/* The capture is on disk before the reply leaves. */
	if (app->app_capture != NULL) {
		capture_request(app->app_capture, pc->pc_name, req, rep.ir_result == INGEST_REJECTED);
	}
	elapsed = app_mono_s() - t0;
	metrics_request(pc->pc_name, ingest_result_name(rep.ir_result), elapsed);
	log_info("hook provider=%s events=%zu outcome=%s%s%s status=%d client=%s latency_ms=%.1f",
		 log_quote(qname, sizeof(qname), pc->pc_name), rep.ir_n_events, ingest_result_name(rep.ir_result),
		 rep.ir_reason != NULL ? " reason=" : "", rep.ir_reason != NULL ? rep.ir_reason : "",
		 ret->reply_status, log_quote(qkey, sizeof(qkey), req->hr_client), elapsed * 1000.0);
}

void app_route_public(void *arg, const struct http_request *req, struct reply *ret)
{
	struct app *app = arg;
	struct config *cf = app_config_acquire(app);

	if (strncmp(req->hr_path, APP_HOOKS_PREFIX, strlen(APP_HOOKS_PREFIX)) == 0) {
		app_hook(app, cf, req, ret);
	} else if (strcmp(req->hr_path, "/healthz") == 0) {
		reply_set(ret, 200, "text/plain; charset=utf-8", "ok\n", 3);
	} else if (api_route(app, cf, req, ret) || checkout_route(app, cf, req, ret)) {
		/* answered */
	} else {
		reply_problem(ret, 404, "not-found", "Not found", NULL);
	}
	app_config_release(app, cf);
}
