/* loadgen.h: an HTTP/1.1 load generator for the benchmarks: keep-alive
 * connections on one epoll thread, each sending pre-built requests and
 * timing their answers, closed loop (as fast as answers come) or open loop
 * (at a fixed rate, latency counted from when each request was due). */
#ifndef IDEMHOOK_LOADGEN_H
#define IDEMHOOK_LOADGEN_H

#include <stddef.h>
#include <stdint.h>

/* One request exactly as sent (request line, headers, body). */
struct lg_request {
	char *lr_data;
	size_t lr_len;
};

struct lg_options {
	unsigned lo_port; /* on 127.0.0.1 */
	unsigned lo_conns; /* concurrent connections */
	/* Connections are spread over this many loopback source addresses
	 * (127.0.0.1, 127.0.0.2, ...), as a provider sends from several
	 * machines; 1 = all from 127.0.0.1. */
	unsigned lo_sources;
	double lo_rate; /* requests per second; 0 = closed loop */
};

struct lg_result {
	size_t lg_n; /* requests answered */
	size_t lg_errors; /* transport errors and answers other than 2xx */
	size_t lg_dropped;          /* of them: the connection closed or failed before the answer */
	int lg_bad_status;          /* the first status other than 2xx answered, 0 if none */
	double lg_dropped_after_ms; /* the longest a dropped request had waited */
	double lg_seconds; /* first send to last answer */
	double lg_p50_ms;
	double lg_p99_ms;
	double lg_max_ms;
};

/* Sends every request of reqs once, in order, over opt->lo_conns
 * connections, and fills ret. Returns 0, or -1 when no connection could be
 * made (said on stderr). */
int lg_run(const struct lg_options *opt, const struct lg_request *reqs, size_t n, struct lg_result *ret);

/* qsort's comparison of two doubles, ascending (latencies, medians). */
int lg_cmp_double(const void *a, const void *b);

#endif
