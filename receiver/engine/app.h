/* app.h: the running daemon: its configuration, store, listeners and workers,
 * and the public route table that sends each request to its module. */
#ifndef IDEMHOOK_APP_H
#define IDEMHOOK_APP_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "env.h"
#include "http.h"
#include "reply.h"

struct capture;
struct outbound;
struct fetch_worker;
struct app_cfg_ref;

struct app {
	/* What the modules the daemon runs are handed (env.h): the clock,
	 * these configs, the store (env_store), the public listener
	 * (env_http) and readiness (env_health, NULL until listening). Set up
	 * by app_init; env_store, env_http and env_health by the caller. */
	struct env app_env;
	struct capture *app_capture; /* NULL when capture is off */
	struct outbound *app_outbound;      /* NULL until an outbound call is configured
	                                     * (start or reload, app_outbound_swap); a
	                                     * reload that removes them leaves it idle */
	pthread_mutex_t app_outbound_mutex; /* kicks against that swap */
	struct fetch_worker *app_fetch;     /* thin events' full events (fetch.h), or NULL */
	struct http_server *app_admin;
	int64_t app_started_ms;
	/* Every config still held, newest (the current one) first, each with
	 * its count of holders; swapped on SIGHUP. A request holds its config
	 * for as long as it lives, across a suspension and on whatever thread
	 * it finishes; the last holder frees it. */
	pthread_mutex_t app_cfg_mutex;
	struct app_cfg_ref *app_cfgs;
};

/* init/finish work on caller-owned memory; finish frees the config. */
int app_init(struct app *app, struct config *cf);
void app_finish(struct app *app);

/* Takes a reference on the current config; release it when done, on any
 * thread. Never blocks on a reload. */
struct config *app_config_acquire(struct app *app);
/* Takes one more reference on cf, which the caller holds already (for work
 * that outlives the caller's own reference). Returns cf. */
struct config *app_config_retain(struct app *app, struct config *cf);
void app_config_release(struct app *app, struct config *cf);

/* Makes cf (already loaded and validated) the current config and drops the
 * daemon's reference on the old one, which is freed by its last holder:
 * now, or when the last request that holds it finishes. */
void app_config_swap(struct app *app, struct config *cf);

/* Makes ob (NULL: none) the outbound worker that kicks reach, and returns
 * the one that was (to be stopped by the caller). */
struct outbound *app_outbound_swap(struct app *app, struct outbound *ob);

/* The public listener's route function (arg = struct app *): /hooks/<name>,
 * /api/..., /checkout, /orders/..., /healthz. */
void app_route_public(void *arg, const struct http_request *req, struct reply *ret);

/* Decorates, for the public listener, the answers it makes before routing
 * (arg = struct app *): see api_refused; at a provider's path, answers in
 * the provider's own format (provider_refusal). */
void app_refused_public(void *arg, const struct http_request *req, const struct http_refusal *why,
                        struct reply *ret);

/* Adds, for the public listener, the order API's CORS headers to the 408
 * a request to /api/... would get for a body too slow (arg = struct app *;
 * http_options.ho_timeout_headers): see api_refused. Nothing else: the
 * request may well complete. */
void app_timeout_public(void *arg, const struct http_request *req, const struct http_refusal *why,
                        struct reply *ret);

/* The 408 a body too slow gets at each provider instance's path whose
 * refusals have a format of their own (http_options.ho_timeouts). */
struct app_timeouts {
	struct http_timeout_reply *at_items;
	struct reply *at_replies;
	char **at_paths;
	size_t at_n;
};

/* Fills t (zeroed by the caller) from cf: 0, or -1 out of memory with t
 * left for app_timeouts_finish. */
int app_timeouts_build(const struct config *cf, struct app_timeouts *t);
void app_timeouts_finish(struct app_timeouts *t);

#endif
