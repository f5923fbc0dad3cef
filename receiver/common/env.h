/* env.h: what the daemon hands the modules it runs (the order API, the
 * checkout page, the workers) instead of their reaching back into it: the
 * clock, the configuration in force, the store, the public listener. */
#ifndef IDEMHOOK_ENV_H
#define IDEMHOOK_ENV_H

#include <stdint.h>

struct config;
struct health;
struct http_server;
struct outbound_kept;
struct store;

struct env {
	/* The wall clock: ms since the epoch (env_clock_ms, or a test's). */
	int64_t (*env_clock)(void);
	/* The configuration in force, with counted references (env_cfg_arg
	 * comes back as arg): acquire takes one on the current config and never
	 * blocks on a reload; retain takes one more on a config the caller
	 * holds and returns it; release drops one, on any thread. */
	struct config *(*env_cfg_acquire)(void *arg);
	struct config *(*env_cfg_retain)(void *arg, struct config *cf);
	void (*env_cfg_release)(void *arg, struct config *cf);
	/* Optional: new outbox rows were committed (wakes the worker). */
	void (*env_outbox_kick)(void *arg);
	/* Optional: 1 with *ret set when the outbound worker keeps an outcome
	 * of outbox row row_id that the store refused to record, else 0. */
	int (*env_outbox_kept)(void *arg, int64_t row_id, struct outbound_kept *ret);
	void *env_cfg_arg;
	struct store *env_store;
	/* The public listener once it serves, else NULL (read with an atomic
	 * load: set after the workers start). */
	struct http_server *env_http;
	/* Readiness and the watchdog, once listening, else NULL (atomic load). */
	struct health *env_health;
};

/* The real wall clock: ms since the epoch (CLOCK_REALTIME). */
int64_t env_clock_ms(void);

/* env->env_clock(). */
int64_t env_now_ms(const struct env *env);

/* The hooks above, called on env's own argument. */
struct config *env_config_acquire(const struct env *env);
struct config *env_config_retain(const struct env *env, struct config *cf);
void env_config_release(const struct env *env, struct config *cf);
void env_outbox_kick(const struct env *env);
int env_outbox_kept(const struct env *env, int64_t row_id, struct outbound_kept *ret);

/* The public listener, or NULL while it does not serve yet. */
struct http_server *env_http(const struct env *env);

/* The health thread, or NULL while the daemon is not listening yet. */
struct health *env_health(const struct env *env);

#endif
