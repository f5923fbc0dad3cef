/* outbound.h: the outbox delivery worker, on the HTTP client's concurrent
 * transfers (httpc.h). */
#ifndef IDEMHOOK_OUTBOUND_H
#define IDEMHOOK_OUTBOUND_H

#include <stdint.h>

struct config;
struct env;
struct outbound;
struct outbox_conf;
struct orders_conf;
struct store;

/* Starts the worker thread from the [outbound] section; NULL when nothing is
 * configured or on failure (logged; *ret_err set to 1 then). Rows left
 * 'delivering' by a previous run are released first, also when nothing is
 * configured (no worker runs then: none of them is this process's). */
struct outbound *outbound_start(const struct env *env, int *ret_err);

/* 1 when the worker for cf's [outbound] section (its secrets read again)
 * and [points] would differ from ob (NULL: no worker runs; then 1 when cf
 * configures a call), so that a reload hands it over (outbound_reload) or
 * starts one; 0 when it would be the same; -1 on a bad section (logged). */
int outbound_conf_changed(struct outbound *ob, const struct config *cf);

/* Hands the running worker the [outbound] section (secrets read again) and
 * [points] of env's current configuration. It takes them between
 * transfers, without stopping: transfers in flight finish as they began
 * (URL, headers, timeouts) and are recorded under the new settings; every
 * later lease uses the new ones. A section with no call type left is
 * handed over too: the worker then leases nothing until a reload brings a
 * call back, and is stopped with the daemon. Does not wait for the worker.
 * Returns 0; 1 when the section configures no call any more; -1 on a bad
 * section (logged). */
int outbound_reload(struct outbound *ob, const struct env *env);

/* The worker's clock and randomness (backoff jitter); tests inject theirs. */
struct outbound_clock {
	int64_t (*ock_now_ms)(void *arg); /* ms since the epoch */
	uint64_t (*ock_random)(void *arg);
	void *ock_arg;
};

/* Starts a worker on st with the parsed conf, which it takes over (the
 * caller's copy is zeroed; outbound_stop finishes it). clock NULL means the
 * real clock and the CSPRNG. Releases rows left 'delivering' first. NULL on
 * failure (logged; conf finished). */
struct outbound *outbound_create(struct store *st, struct outbox_conf *conf,
                                 const struct orders_conf *orc, const struct outbound_clock *clock);

/* An outcome the worker keeps in memory because the store refused to
 * record it (its row still says 'delivering'). */
struct outbound_kept {
	int64_t okp_id;       /* the outbox row */
	unsigned okp_attempt; /* the attempt that got it */
	long okp_http_status; /* the peer's answer, 0 when none came */
};

/* 1 with *ret set when ob keeps an unrecorded outcome of row row_id, else
 * 0 (also for ob NULL). Any thread. */
int outbound_outcome_kept(struct outbound *ob, int64_t row_id, struct outbound_kept *ret);

/* Wakes the worker (new rows were committed). NULL is a no-op. */
void outbound_kick(struct outbound *ob);

/* Gives in-flight transfers up to grace_ms to finish, releases the rest for
 * the next start, stops the thread and frees. NULL is a no-op. */
void outbound_stop(struct outbound *ob, int grace_ms);

#endif
