/* app.h: the running daemon: its configuration, store, listeners and workers,
 * and the public route table that sends each request to its module. */
#ifndef IDEMHOOK_APP_H
#define IDEMHOOK_APP_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "http.h"
#include "reply.h"

struct store;
struct capture;
struct health;
struct outbound;

struct app {
	struct store *app_store;
	struct capture *app_capture; /* NULL when capture is off */
	struct outbound *app_outbound; /* NULL when no outbound call is configured */
	struct http_server *app_http;
	struct http_server *app_admin;
	int64_t app_started_ms;
	/* Readiness and the watchdog (/readyz); set once listening, read with
	 * an atomic load. NULL until then: not ready. */
	struct health *app_health;
	/* The current config; swapped whole on SIGHUP. Readers hold the read
	 * lock for the length of a request; the lock prefers the writer so a
	 * reload is never starved by load. */
	pthread_rwlock_t app_cfg_lock;
	struct config *app_cfg;
};

/* init/finish work on caller-owned memory; finish frees the config. */
int app_init(struct app *app, struct config *cf);
void app_finish(struct app *app);

/* Takes a reference on the current config; release it after the request.
 * Never acquire twice on one thread. */
struct config *app_config_acquire(struct app *app);
void app_config_release(struct app *app, struct config *cf);

/* Replaces the config with cf (already loaded and validated), waiting for
 * requests that hold the old one, and frees the old one. */
void app_config_swap(struct app *app, struct config *cf);

/* The public listener's route function (arg = struct app *): /hooks/<name>,
 * /api/..., /checkout, /orders/..., /healthz. */
void app_route_public(void *arg, const struct http_request *req, struct reply *ret);

/* The current time in ms since the epoch. */
int64_t app_now_ms(void);

#endif
