/* health.h: is the running daemon ready, and is it alive? A timer thread of
 * its own probes the store and the listeners, keeps the answer /readyz and
 * the metrics read (never blocking them), tells systemd why in STATUS=, and
 * feeds the systemd watchdog only while the writer and the listeners live. */
#ifndef IDEMHOOK_HEALTH_H
#define IDEMHOOK_HEALTH_H

#include <stddef.h>
#include <stdint.h>

struct http_server;
struct store;

#define HEALTH_LISTENERS_MAX 2
#define HEALTH_REASON_MAX 240 /* bytes of one "why not ready" line */

/* A listener to check: GET /healthz over plain HTTP; while it serves TLS
 * (the health thread speaks no TLS), whether its threads take a connection
 * (http_alive). */
struct health_listener {
	const char *hl_name; /* "public", "admin" (static) */
	char hl_host[64];    /* numeric address to connect to (loopback for a wildcard) */
	unsigned hl_port;
	struct http_server *hl_http; /* the listener itself */
};

struct health_options {
	struct store *ho_store;
	struct health_listener ho_listeners[HEALTH_LISTENERS_MAX];
	size_t ho_n_listeners;
	int64_t ho_watchdog_ms; /* send WATCHDOG=1 this often; 0 = none */
};

struct health;

/* Probes once (so the first answer is real), then starts the thread.
 * Returns NULL on failure (logged). */
struct health *health_start(const struct health_options *opt);

/* Stops the thread and frees. NULL is a no-op. */
void health_stop(struct health *h);

/* 1 when ready, else 0 with the reason in reason (may be NULL). Never
 * blocks for I/O; safe from any thread. NULL h: not ready ("starting"). */
int health_ready(struct health *h, char *reason, size_t reason_size);

/* From now on not ready ("draining"): the daemon is stopping. The
 * listeners are not asked any more: once this returns, they may be
 * destroyed. */
void health_set_draining(struct health *h);

/* Something else has just sent STATUS= (a reload): say ours again at the
 * next tick when it is not "serving". */
void health_status_touched(struct health *h);

/* Fills a listener for host as configured ("0.0.0.0", "::" or an address)
 * and the running listener srv. */
void health_listener_set(struct health_listener *hl, const char *name, const char *host,
                         struct http_server *srv);

#endif
