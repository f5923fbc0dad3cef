/* bench_slow_clients.c: signed callbacks while thousands of slow clients
 * hold connections open (issue 12): the same callbacks, at the same rate,
 * from 127.0.0.1, first with no other connection, then with N connections
 * from 100 other loopback addresses (under the per-address limit) each
 * sending its request head one line a second and opening a new connection
 * whenever one is closed. Prints latency (open loop: counted from when each
 * callback was due), errors, how many slow connections were open, and how
 * many the daemon closed. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "harness.h"
#include "loadgen.h"
#include "rawhttp.h"

#define SLOW_SECRET "whsec_bench_slow_clients"
#define SLOW_SOURCES 100 /* 127.0.1.1 .. 127.0.1.100 */
#define SLOW_RATE 100.0 /* callbacks per second */
#define SLOW_SECONDS 30 /* of callbacks per phase */
#define SLOW_LG_CONNS 8

struct slow {
	unsigned sl_port;
	size_t sl_n;
	int *sl_fds;
	atomic_int sl_stop;
	atomic_long sl_open; /* after the last round */
	atomic_long sl_closed; /* by the daemon */
	atomic_long sl_min_open; /* the fewest open at the end of a round, while measuring */
	atomic_int sl_measuring;
};

static int slow_open(struct slow *sl, size_t i)
{
	char source[32];

	snprintf(source, sizeof(source), "127.0.1.%zu", 1 + i % SLOW_SOURCES);
	sl->sl_fds[i] = rh_connect(source, sl->sl_port);
	if (sl->sl_fds[i] < 0) {
		return -1;
	}
	if (send(sl->sl_fds[i], "POST /hooks/stripe HTTP/1.1\r\n", 29, MSG_DONTWAIT | MSG_NOSIGNAL) != 29) {
		close(sl->sl_fds[i]);
		sl->sl_fds[i] = -1;
		return -1;
	}
	return 0;
}

/* Every second: a header line on each connection; a closed one is
 * replaced. */
static void *slow_run(void *arg)
{
	struct slow *sl = arg;

	while (!atomic_load(&sl->sl_stop)) {
		long open = 0;
		size_t i;

		for (i = 0; i < sl->sl_n && !atomic_load(&sl->sl_stop); i++) {
			char sink[512];
			ssize_t n;

			if (sl->sl_fds[i] >= 0) {
				n = recv(sl->sl_fds[i], sink, sizeof(sink), MSG_DONTWAIT);
				if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
				    send(sl->sl_fds[i], "X-Slow: 1\r\n", 11, MSG_DONTWAIT | MSG_NOSIGNAL) != 11) {
					close(sl->sl_fds[i]);
					sl->sl_fds[i] = -1;
					atomic_fetch_add(&sl->sl_closed, 1);
				}
			}
			if (sl->sl_fds[i] < 0) {
				slow_open(sl, i);
			}
			open += sl->sl_fds[i] >= 0;
		}
		atomic_store(&sl->sl_open, open);
		if (atomic_load(&sl->sl_measuring) && open < atomic_load(&sl->sl_min_open)) {
			atomic_store(&sl->sl_min_open, open);
		}
		for (i = 0; i < 10 && !atomic_load(&sl->sl_stop); i++) {
			usleep(100 * 1000);
		}
	}
	return NULL;
}

/* n signed customer.created callbacks with ids tag-0 .. tag-(n-1). */
static struct lg_request *slow_callbacks(const char *tag, size_t n)
{
	struct lg_request *reqs = calloc(n, sizeof(*reqs));
	size_t i;

	for (i = 0; reqs != NULL && i < n; i++) {
		char id[64];
		char *body;
		char *sig;
		struct buf b;

		snprintf(id, sizeof(id), "evt_%s_%zu", tag, i);
		body = hn_stripe_event(id, "customer.created", "{\"id\":\"cus_1\",\"object\":\"customer\"}");
		sig = hn_stripe_signature(SLOW_SECRET, hn_now_s(), body, strlen(body));
		buf_init(&b, 0);
		buf_printf(&b,
			   "POST /hooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			   "Content-Type: application/json\r\nStripe-Signature: %s\r\n"
			   "Content-Length: %zu\r\n\r\n%s",
			   sig, strlen(body), body);
		reqs[i].lr_data = buf_take(&b, &reqs[i].lr_len);
		buf_finish(&b);
		free(body);
		free(sig);
	}
	return reqs;
}

static void slow_callbacks_free(struct lg_request *reqs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(reqs[i].lr_data);
	}
	free(reqs);
}

static int slow_phase(const char *label, unsigned port, const char *tag, struct slow *sl)
{
	size_t n = (size_t)(SLOW_RATE * SLOW_SECONDS);
	struct lg_request *reqs = slow_callbacks(tag, n);
	struct lg_options lo = {.lo_port = port, .lo_conns = SLOW_LG_CONNS, .lo_sources = 1, .lo_rate = SLOW_RATE};
	struct lg_result res;
	long closed0 = sl != NULL ? atomic_load(&sl->sl_closed) : 0;

	if (reqs == NULL) {
		return -1;
	}
	if (sl != NULL) {
		atomic_store(&sl->sl_min_open, atomic_load(&sl->sl_open));
		atomic_store(&sl->sl_measuring, 1);
	}
	if (lg_run(&lo, reqs, n, &res) < 0) {
		slow_callbacks_free(reqs, n);
		return -1;
	}
	if (sl != NULL) {
		atomic_store(&sl->sl_measuring, 0);
	}
	printf("| %s | %zu | %zu | %.0f | %.1f | %.1f | %.1f |", label, res.lg_n, res.lg_errors, SLOW_RATE,
	       res.lg_p50_ms, res.lg_p99_ms, res.lg_max_ms);
	if (sl != NULL) {
		printf(" %ld to %ld open; %ld closed by the daemon |\n", atomic_load(&sl->sl_min_open),
		       atomic_load(&sl->sl_open), atomic_load(&sl->sl_closed) - closed0);
	} else {
		printf(" none |\n");
	}
	fflush(stdout);
	slow_callbacks_free(reqs, n);
	return res.lg_errors == 0 ? 0 : -1;
}

/* The daemon's last word on the slow clients it closed, and its peak
 * resident set. */
static void slow_report(const struct daemon *d)
{
	char line[1024];
	char last[1024] = "";
	char path[64];
	FILE *f = fopen(d->dm_log, "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "slow connections in") != NULL) {
			snprintf(last, sizeof(last), "%s", line);
		}
	}
	if (f != NULL) {
		fclose(f);
	}
	printf("\ndaemon: %s", last[0] != '\0' ? last : "(closed no slow connection)\n");
	snprintf(path, sizeof(path), "/proc/%d/status", (int)d->dm_pid);
	f = fopen(path, "r");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "VmHWM:", 6) == 0) {
			printf("daemon peak RSS: %s", line + 6 + strspn(line + 6, " \t"));
		}
	}
	if (f != NULL) {
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	size_t n_slow = argc > 1 ? strtoul(argv[1], NULL, 10) : 5000;
	struct daemon d;
	struct slow sl;
	struct rlimit rl;
	pthread_t t;
	char ini[256];
	size_t i;
	int rc = 0;

	signal(SIGPIPE, SIG_IGN);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < n_slow + 256) {
		fprintf(stderr, "bench: the file limit (%llu) is too low for %zu connections\n",
			(unsigned long long)rl.rlim_cur, n_slow);
		return 1;
	}
	/* The defaults, where the test harness sets others. */
	snprintf(ini, sizeof(ini),
		 "[server]\nthreads = 0\nper_ip_connections = 64\n\n"
		 "[provider stripe]\ntype = stripe\nsecret = %s\n",
		 SLOW_SECRET);
	if (daemon_init(&d, ini) < 0 || daemon_start(&d) < 0) {
		fprintf(stderr, "bench: the daemon did not start\n");
		return 1;
	}
	printf("%zu slow connections from %d addresses (a header line a second each, a new connection "
	       "for each closed one); signed Stripe callbacks from 127.0.0.1, open loop, %d keep-alive "
	       "connections; default [server] settings\n\n",
	       n_slow, SLOW_SOURCES, SLOW_LG_CONNS);
	printf("| phase | callbacks | errors | offered/s | p50 ms | p99 ms | max ms | slow connections |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	if (slow_phase("no slow clients", d.dm_port, "quiet", NULL) < 0) {
		rc = 1;
	}
	memset(&sl, 0, sizeof(sl));
	sl.sl_port = d.dm_port;
	sl.sl_n = n_slow;
	sl.sl_fds = malloc(n_slow * sizeof(int));
	if (sl.sl_fds == NULL) {
		return 1;
	}
	memset(sl.sl_fds, 0xff, n_slow * sizeof(int));
	atomic_init(&sl.sl_stop, 0);
	if (pthread_create(&t, NULL, slow_run, &sl) != 0) {
		return 1;
	}
	/* Until they are all open and have trickled for a while. */
	while (atomic_load(&sl.sl_open) < (long)n_slow * 95 / 100) {
		usleep(200 * 1000);
	}
	sleep(5);
	if (slow_phase("with slow clients", d.dm_port, "slow", &sl) < 0) {
		rc = 1;
	}
	atomic_store(&sl.sl_stop, 1);
	pthread_join(t, NULL);
	for (i = 0; i < n_slow; i++) {
		if (sl.sl_fds[i] >= 0) {
			close(sl.sl_fds[i]);
		}
	}
	free(sl.sl_fds);
	slow_report(&d);
	daemon_term(&d, 120);
	daemon_finish(&d);
	return rc;
}
