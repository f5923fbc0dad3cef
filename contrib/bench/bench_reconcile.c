/* bench_reconcile.c: the peak memory of `idemhook reconcile` over a long
 * Stripe listing. A fake Stripe API (the test peer) serves PAGES pages of
 * 100 events of about 3.4 KB, newest first, made up as they are asked for;
 * the command runs as a child and its peak RSS (wait4's ru_maxrss) is
 * printed with the pages and bytes read: the figure stays near one page's
 * worth whatever PAGES is, where a listing held whole grows with it.
 * Usage: bench_reconcile [PAGES] [IDEMHOOK_BIN] */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "harness.h"
#include "peer.h"

#define BREC_PER_PAGE 100
#define BREC_KEY "rk_test_bench_reconcile"
#define BREC_PAD 3000 /* bytes of description: an event of about 3.4 KB */

static size_t brec_events; /* in all: event i is evt_brec_<i>, 0 the newest */
static char brec_pad[BREC_PAD + 1];

/* The page after starting_after (evt_brec_N), or the first. */
static void brec_stripe(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	const char *after = strstr(req->pq_query, "starting_after=evt_brec_");
	int64_t now = hn_now_s();
	size_t first = 0;
	size_t i;
	struct buf b;

	(void)arg;
	if (after != NULL) {
		first = (size_t)strtoull(after + strlen("starting_after=evt_brec_"), NULL, 10) + 1;
	}
	buf_init(&b, 0);
	buf_puts(&b, "{\"object\":\"list\",\"url\":\"/v1/events\",\"data\":[");
	for (i = first; i < brec_events && i < first + BREC_PER_PAGE; i++) {
		buf_printf(&b,
		           "%s{\"id\":\"evt_brec_%zu\",\"object\":\"event\",\"api_version\":\"2024-"
		           "06-20\","
		           "\"created\":%" PRId64 ",\"livemode\":false,\"pending_webhooks\":0,"
		           "\"type\":\"payment_intent.succeeded\",\"data\":{\"object\":{\"id\":"
		           "\"pi_brec_%zu\","
		           "\"object\":\"payment_intent\",\"amount\":1000,\"amount_received\":1000,"
		           "\"currency\":\"usd\",\"status\":\"succeeded\",\"description\":\"%s\","
		           "\"metadata\":{\"order_id\":\"ord_brec%014zu\"}}}}",
		           i > first ? "," : "", i, now - 3600 - (int64_t)i, i, brec_pad, i);
	}
	buf_printf(&b, "],\"has_more\":%s}", i < brec_events ? "true" : "false");
	ret->pb_body = buf_take(&b, NULL);
}

static void brec_done(void *arg, struct peer_behaviour *b)
{
	(void)arg;
	free((char *)b->pb_body);
}

int main(int argc, char **argv)
{
	size_t pages = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 200;
	const char *bin = argc > 2 ? argv[2] : getenv("IDEMHOOK_BIN");
	struct rusage ru;
	struct daemon d;
	struct peer *p;
	char ini[1024];
	char log[700];
	struct timespec t0;
	struct timespec t1;
	int status;
	pid_t pid;

	if (bin == NULL || pages == 0) {
		fprintf(stderr, "usage: bench_reconcile [PAGES] [IDEMHOOK_BIN]\n");
		return 64;
	}
	memset(brec_pad, 'x', BREC_PAD);
	brec_events = pages * BREC_PER_PAGE;
	p = peer_create();
	if (p == NULL || peer_handler(p, "/v1/events", brec_stripe, brec_done, NULL) < 0) {
		return 1;
	}
	/* The default bounds hold 1000 pages and 256 MiB; raised only past
	 * them, so that a binary without the keys runs the smaller ones. */
	snprintf(ini, sizeof(ini),
	         "[provider stripe]\ntype = stripe\nsecret = whsec_bench_reconcile\n"
	         "api_key = env:BREC_KEY\napi_base_url = %s\n\n",
	         peer_base(p));
	if (pages >= 700) {
		size_t n = strlen(ini);

		snprintf(ini + n, sizeof(ini) - n, "[reconcile]\nmax_pages = %zu\nmax_bytes = 4G\n",
		         pages + 1);
	}
	if (daemon_init(&d, ini) < 0) {
		return 1;
	}
	setenv("BREC_KEY", BREC_KEY, 1);
	setenv("IDEMHOOK_BIN", bin, 1);
	/* The schema first, so that the figure is the listing's alone. */
	{
		const char *const args[] = {"migrate", NULL};

		if (daemon_cli(&d, 1, args, NULL) != 0) {
			fprintf(stderr, "migrate failed\n");
			return 1;
		}
	}
	snprintf(log, sizeof(log), "%s/reconcile.out", d.dm_dir);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid == 0) {
		FILE *out = freopen(log, "w", stdout);

		if (out == NULL || freopen("/dev/null", "w", stderr) == NULL) {
			_exit(127);
		}
		execl(bin, "idemhook", "-c", d.dm_config, "-q", "reconcile", "--provider", "stripe",
		      "--older-than", "0", "--json", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) {
		fprintf(stderr, "wait4: %s\n", strerror(errno));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("pages %zu, events %zu, listing %.1f MiB: exit %d, %.1f s, peak RSS %.1f MiB\n",
	       pages, brec_events, (double)brec_events * 3.4 / 1024.0,
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (double)ru.ru_maxrss / 1024.0);
	{
		char *out = hn_read_file(log);
		const char *held = out != NULL ? strstr(out, "\"events_held_max\":") : NULL;

		if (held != NULL) {
			printf("events held at once: %" PRId64 "\n",
			       (int64_t)strtoll(held + strlen("\"events_held_max\":"), NULL, 10));
		}
		free(out);
	}
	daemon_finish(&d);
	peer_destroy(p);
	return 0;
}
