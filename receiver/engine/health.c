/* health.c: readiness and liveness of the running daemon, kept by a timer
 * thread of its own; it also feeds the systemd watchdog. */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "health.h"
#include "http.h"
#include "httpc.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "store.h"

#define HEALTH_TICK_MS 250              /* store probe; readyz is this fresh */
#define HEALTH_LISTENER_PERIOD_MS 5000  /* a /healthz round trip per listener */
#define HEALTH_LISTENER_TIMEOUT_MS 1000 /* connect, send and answer, each */
#define HEALTH_LISTENER_MISSES 2        /* failed round trips in a row: not ready */
#define HEALTH_LISTENER_DEAD_MS 20000   /* no round trip for this long: no watchdog */
#define HEALTH_ANSWER_MAX 4096          /* bytes of a /healthz answer read */

struct health_probe {
	struct health_listener hp_conf;
	int64_t hp_next_ms;  /* monotonic */
	int64_t hp_ok_ms;    /* last answer */
	unsigned hp_misses;  /* failed round trips in a row */
	char hp_error[128];
};

struct health {
	struct store *hh_store;
	struct health_probe hh_probes[HEALTH_LISTENERS_MAX];
	size_t hh_n_probes;
	int64_t hh_watchdog_ms;
	int64_t hh_watchdog_last;
	pthread_t hh_thread;
	pthread_mutex_t hh_lock;
	pthread_cond_t hh_cond; /* CLOCK_MONOTONIC */
	pthread_mutex_t hh_probe_lock; /* held while the listeners are asked */
	/* under hh_lock */
	int hh_stop;
	int hh_draining;
	int hh_touched;
	int hh_ready;
	char hh_reason[HEALTH_REASON_MAX];
	/* the thread's own */
	int hh_told; /* STATUS= said at least once */
	int hh_told_ready;
	char hh_told_reason[HEALTH_REASON_MAX];
};

static int64_t health_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void health_listener_set(struct health_listener *hl, const char *name, const char *host,
                         struct http_server *srv)
{
	memset(hl, 0, sizeof(*hl));
	hl->hl_name = name;
	if (host == NULL || host[0] == '\0' || strcmp(host, "0.0.0.0") == 0) {
		host = "127.0.0.1";
	} else if (strcmp(host, "::") == 0) {
		host = "::1";
	}
	snprintf(hl->hl_host, sizeof(hl->hl_host), "%s", host);
	hl->hl_port = http_port(srv);
	hl->hl_http = srv;
}

/* One round trip: GET /healthz answered 200; for a TLS listener, one of
 * its threads took a connection. Returns 0 or -1 (err set). */
static int health_listener_probe(const struct health_listener *hl, char *err, size_t err_size)
{
	struct httpc_request req;
	struct httpc_response resp;
	char herr[HTTPC_ERR_MAX];
	char url[128];
	int rc;

	if (http_tls(hl->hl_http)) {
		return http_alive(hl->hl_http, HEALTH_LISTENER_TIMEOUT_MS, err, err_size) ? 0 : -1;
	}
	memset(&req, 0, sizeof(req));
	memset(&resp, 0, sizeof(resp));
	snprintf(url, sizeof(url),
		 strchr(hl->hl_host, ':') != NULL ? "http://[%s]:%u/healthz" : "http://%s:%u/healthz",
		 hl->hl_host, hl->hl_port);
	req.hcq_method = "GET";
	req.hcq_url = url;
	req.hcq_response_max = HEALTH_ANSWER_MAX;
	/* Connect, send and answer, each within the limit: three in all. */
	req.hcq_connect_timeout_ms = HEALTH_LISTENER_TIMEOUT_MS;
	req.hcq_timeout_ms = 3 * HEALTH_LISTENER_TIMEOUT_MS;
	if (httpc_exchange(&req, &resp, herr, sizeof(herr)) < 0) {
		snprintf(err, err_size, "%.100s", herr);
		return -1;
	}
	rc = resp.hcr_status == 200 ? 0 : -1;
	if (rc < 0) {
		snprintf(err, err_size, "/healthz answered %ld", resp.hcr_status);
	}
	httpc_response_finish(&resp);
	return rc;
}

/* 1 when reasons a and b differ at most in their figures ("the writer has
 * waited 1250 ms" and "... 1500 ms"): one reason, which the log says once
 * while STATUS= follows its figure. */
static int health_same_reason(const char *a, const char *b)
{
	for (;;) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			while (isdigit((unsigned char)*a)) {
				a++;
			}
			while (isdigit((unsigned char)*b)) {
				b++;
			}
			continue;
		}
		if (*a != *b) {
			return 0;
		}
		if (*a == '\0') {
			return 1;
		}
		a++;
		b++;
	}
}

/* Says a change of readiness once: the log, STATUS= and the metric. */
static void health_tell(struct health *h, int ready, const char *reason, int touched)
{
	char line[HEALTH_REASON_MAX + 16];

	if (h->hh_told && ready == h->hh_told_ready && strcmp(reason, h->hh_told_reason) == 0 &&
	    !(touched && !ready)) {
		return;
	}
	if (!ready) {
		snprintf(line, sizeof(line), "not ready: %s", reason);
		notify_status(line);
		if (!h->hh_told || h->hh_told_ready ||
		    !health_same_reason(reason, h->hh_told_reason)) {
			log_warn("health: not ready: %s", reason);
		}
	} else {
		notify_status("serving");
		if (h->hh_told) {
			log_notice("health: ready again");
		}
	}
	metrics_set_ready(ready);
	h->hh_told = 1;
	h->hh_told_ready = ready;
	snprintf(h->hh_told_reason, sizeof(h->hh_told_reason), "%s", reason);
}

/* One tick: probe, decide, tell, feed the watchdog. */
static void health_tick(struct health *h)
{
	struct store_health sh;
	char reason[HEALTH_REASON_MAX] = "";
	int64_t now;
	int listeners_alive = 1;
	int ready;
	int draining;
	int touched;
	size_t i;

	store_probe(h->hh_store, &sh);
	now = health_mono_ms();
	/* Draining, the listeners are on their way out: not asked. */
	pthread_mutex_lock(&h->hh_probe_lock);
	pthread_mutex_lock(&h->hh_lock);
	draining = h->hh_draining;
	pthread_mutex_unlock(&h->hh_lock);
	for (i = 0; i < h->hh_n_probes; i++) {
		struct health_probe *p = &h->hh_probes[i];

		if (!draining && now >= p->hp_next_ms) {
			if (health_listener_probe(&p->hp_conf, p->hp_error, sizeof(p->hp_error)) == 0) {
				p->hp_ok_ms = health_mono_ms();
				p->hp_misses = 0;
			} else {
				p->hp_misses++;
			}
			now = health_mono_ms();
			/* After a miss, look again soon rather than a period later. */
			p->hp_next_ms = now + (p->hp_misses > 0 ? HEALTH_TICK_MS : HEALTH_LISTENER_PERIOD_MS);
		}
		if (now - p->hp_ok_ms > HEALTH_LISTENER_DEAD_MS) {
			listeners_alive = 0;
		}
	}
	pthread_mutex_unlock(&h->hh_probe_lock);
	pthread_mutex_lock(&h->hh_lock);
	draining = h->hh_draining;
	touched = h->hh_touched;
	h->hh_touched = 0;
	pthread_mutex_unlock(&h->hh_lock);
	if (draining) {
		snprintf(reason, sizeof(reason), "draining: the daemon is stopping");
	} else if (!sh.sh_ok) {
		snprintf(reason, sizeof(reason), "%s", sh.sh_reason);
	}
	for (i = 0; i < h->hh_n_probes && reason[0] == '\0'; i++) {
		const struct health_probe *p = &h->hh_probes[i];

		if (p->hp_misses >= HEALTH_LISTENER_MISSES) {
			snprintf(reason, sizeof(reason), "the %s listener (%.64s port %u) does not answer: %.100s",
			         p->hp_conf.hl_name, p->hp_conf.hl_host, p->hp_conf.hl_port, p->hp_error);
		}
	}
	ready = reason[0] == '\0';
	pthread_mutex_lock(&h->hh_lock);
	h->hh_ready = ready;
	snprintf(h->hh_reason, sizeof(h->hh_reason), "%s", reason);
	pthread_mutex_unlock(&h->hh_lock);
	health_tell(h, ready, reason, touched);
	/* Alive, not ready: a locked database is no reason for systemd to
	 * kill us; a writer stuck in one transaction, or a listener that has
	 * not answered for long, is. Stopping listeners are no sign. */
	if (h->hh_watchdog_ms > 0 && now - h->hh_watchdog_last >= h->hh_watchdog_ms &&
	    sh.sh_writer_alive && (listeners_alive || draining)) {
		notify_watchdog();
		h->hh_watchdog_last = now;
	}
}

/* Sleeps ms, or until told to stop. Returns 1 when stopping. */
static int health_sleep(struct health *h, int64_t ms)
{
	struct timespec ts;
	int stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&h->hh_lock);
	while (!h->hh_stop) {
		if (pthread_cond_timedwait(&h->hh_cond, &h->hh_lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	stop = h->hh_stop;
	pthread_mutex_unlock(&h->hh_lock);
	return stop;
}

static void *health_main(void *arg)
{
	struct health *h = arg;
	int64_t tick = HEALTH_TICK_MS;

	pthread_setname_np(pthread_self(), "health"); /* top -H, perf */

	if (h->hh_watchdog_ms > 0 && h->hh_watchdog_ms < tick) {
		tick = h->hh_watchdog_ms;
	}
	while (!health_sleep(h, tick)) {
		health_tick(h);
	}
	return NULL;
}

struct health *health_start(const struct health_options *opt)
{
	pthread_condattr_t ca;
	struct health *h;
	size_t i;
	int rc;

	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		log_err("health: out of memory");
		return NULL;
	}
	h->hh_store = opt->ho_store;
	h->hh_watchdog_ms = opt->ho_watchdog_ms;
	for (i = 0; i < opt->ho_n_listeners && i < HEALTH_LISTENERS_MAX; i++) {
		h->hh_probes[i].hp_conf = opt->ho_listeners[i];
		h->hh_probes[i].hp_ok_ms = health_mono_ms();
	}
	h->hh_n_probes = i;
	pthread_mutex_init(&h->hh_lock, NULL);
	pthread_mutex_init(&h->hh_probe_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->hh_cond, &ca);
	pthread_condattr_destroy(&ca);
	health_tick(h);
	rc = pthread_create(&h->hh_thread, NULL, health_main, h);
	if (rc != 0) {
		log_err("health: cannot start the health thread: %s", strerror(rc));
		pthread_cond_destroy(&h->hh_cond);
		pthread_mutex_destroy(&h->hh_lock);
		pthread_mutex_destroy(&h->hh_probe_lock);
		free(h);
		return NULL;
	}
	return h;
}

void health_stop(struct health *h)
{
	if (h == NULL) {
		return;
	}
	pthread_mutex_lock(&h->hh_lock);
	h->hh_stop = 1;
	pthread_cond_broadcast(&h->hh_cond);
	pthread_mutex_unlock(&h->hh_lock);
	pthread_join(h->hh_thread, NULL);
	pthread_cond_destroy(&h->hh_cond);
	pthread_mutex_destroy(&h->hh_lock);
	pthread_mutex_destroy(&h->hh_probe_lock);
	free(h);
}

int health_ready(struct health *h, char *reason, size_t reason_size)
{
	int ready;

	if (h == NULL) {
		if (reason != NULL && reason_size > 0) {
			snprintf(reason, reason_size, "starting");
		}
		return 0;
	}
	pthread_mutex_lock(&h->hh_lock);
	ready = h->hh_ready;
	if (reason != NULL && reason_size > 0) {
		snprintf(reason, reason_size, "%s", h->hh_reason);
	}
	pthread_mutex_unlock(&h->hh_lock);
	return ready;
}

void health_set_draining(struct health *h)
{
	if (h == NULL) {
		return;
	}
	pthread_mutex_lock(&h->hh_lock);
	h->hh_draining = 1;
	h->hh_ready = 0;
	snprintf(h->hh_reason, sizeof(h->hh_reason), "draining: the daemon is stopping");
	pthread_mutex_unlock(&h->hh_lock);
	/* A look at the listeners under way ends before this returns. */
	pthread_mutex_lock(&h->hh_probe_lock);
	pthread_mutex_unlock(&h->hh_probe_lock);
}

void health_status_touched(struct health *h)
{
	if (h == NULL) {
		return;
	}
	pthread_mutex_lock(&h->hh_lock);
	h->hh_touched = 1;
	pthread_mutex_unlock(&h->hh_lock);
}
