/* bench_hooks.c: callbacks/s and latency of the real daemon over loopback,
 * unique callbacks and duplicates, group commit on and off, same run. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "buf.h"
#include "harness.h"
#include "orders.h"
#include "store.h"

#define BENCH_SECRET "whsec_bench_secret"

struct bench_req {
	char *br_body;
	char *br_sig_header;
};

struct bench_run {
	const char *bn_url;
	struct bench_req *bn_reqs;
	size_t bn_n;
	atomic_size_t bn_next;
	double *bn_lat_ms;
	atomic_int bn_errors;
};

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t bench_discard(char *p, size_t s, size_t n, void *arg)
{
	return s * n;
}

static void *bench_client(void *p)
{
	struct bench_run *run = p;
	CURL *c = curl_easy_init();

	curl_easy_setopt(c, CURLOPT_URL, run->bn_url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_discard);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	for (;;) {
		size_t i = atomic_fetch_add(&run->bn_next, 1);
		struct curl_slist *h = NULL;
		double t0;
		long status = 0;

		if (i >= run->bn_n) {
			break;
		}
		h = curl_slist_append(h, run->bn_reqs[i].br_sig_header);
		h = curl_slist_append(h, "Content-Type: application/json");
		h = curl_slist_append(h, "Expect:");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, run->bn_reqs[i].br_body);
		t0 = bench_now();
		if (curl_easy_perform(c) != CURLE_OK) {
			atomic_fetch_add(&run->bn_errors, 1);
		}
		run->bn_lat_ms[i] = (bench_now() - t0) * 1000.0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (status != 200) {
			atomic_fetch_add(&run->bn_errors, 1);
		}
		curl_slist_free_all(h);
	}
	curl_easy_cleanup(c);
	return NULL;
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void bench_phase(const char *label, const char *url, struct bench_req *reqs, size_t n, int clients)
{
	struct bench_run run;
	pthread_t *th = calloc((size_t)clients, sizeof(*th));
	double t0;
	double secs;
	int i;

	memset(&run, 0, sizeof(run));
	run.bn_url = url;
	run.bn_reqs = reqs;
	run.bn_n = n;
	run.bn_lat_ms = calloc(n, sizeof(double));
	atomic_init(&run.bn_next, 0);
	atomic_init(&run.bn_errors, 0);
	t0 = bench_now();
	for (i = 0; i < clients; i++) {
		pthread_create(&th[i], NULL, bench_client, &run);
	}
	for (i = 0; i < clients; i++) {
		pthread_join(th[i], NULL);
	}
	secs = bench_now() - t0;
	qsort(run.bn_lat_ms, n, sizeof(double), bench_cmp);
	printf("%-34s %8zu %10.0f %9.2f %9.2f %7d\n", label, n, (double)n / secs, run.bn_lat_ms[n / 2],
	       run.bn_lat_ms[(size_t)((double)n * 0.99)], atomic_load(&run.bn_errors));
	fflush(stdout);
	free(run.bn_lat_ms);
	free(th);
}

struct bench_orders {
	size_t bo_n;
	char (*bo_ids)[ORDERS_ID_LEN + 1];
};

static int bench_make_orders(struct store_tx *tx, void *arg)
{
	struct bench_orders *bo = arg;
	size_t i;

	for (i = 0; i < bo->bo_n; i++) {
		if (orders_create(tx, 1000, "USD", NULL, bo->bo_ids[i]) < 0) {
			return -1;
		}
	}
	return 0;
}

static int bench_config(const char *label, unsigned batch_max, size_t n, int clients)
{
	struct daemon d;
	struct bench_orders bo;
	struct bench_req *reqs = calloc(n, sizeof(*reqs));
	struct store_options so;
	struct store *st;
	char extra[512];
	char url[256];
	char name[128];
	size_t i;

	snprintf(extra, sizeof(extra),
		 "[provider stripe]\ntype = stripe\nsecret = %s\n\n[store]\nbatch_max = %u\nsynchronous = full\n",
		 BENCH_SECRET, batch_max);
	/* [store] appears twice: the later keys win, path stays from the first. */
	if (daemon_init(&d, extra) < 0) {
		return -1;
	}
	bo.bo_n = n;
	bo.bo_ids = calloc(n, sizeof(*bo.bo_ids));
	memset(&so, 0, sizeof(so));
	so.so_path = d.dm_db;
	st = store_create(&so);
	if (st == NULL || store_write(st, 0, bench_make_orders, &bo) < 0) {
		fprintf(stderr, "bench: cannot create orders\n");
		return -1;
	}
	store_destroy(st);
	/* Pre-sign every callback so that signing is not measured. */
	for (i = 0; i < n; i++) {
		char id[64];
		char obj[512];
		char *sig;

		snprintf(id, sizeof(id), "evt_bench_%zu", i);
		snprintf(obj, sizeof(obj),
			 "{\"id\":\"pi_%zu\",\"object\":\"payment_intent\",\"amount\":1000,\"amount_received\":1000,"
			 "\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}",
			 i, bo.bo_ids[i]);
		reqs[i].br_body = hn_stripe_event(id, "payment_intent.succeeded", obj);
		sig = hn_stripe_signature(BENCH_SECRET, hn_now_s(), reqs[i].br_body, strlen(reqs[i].br_body));
		reqs[i].br_sig_header = malloc(strlen(sig) + 32);
		snprintf(reqs[i].br_sig_header, strlen(sig) + 32, "Stripe-Signature: %s", sig);
		free(sig);
	}
	if (daemon_start(&d) < 0) {
		return -1;
	}
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	snprintf(name, sizeof(name), "%s, unique", label);
	bench_phase(name, url, reqs, n, clients);
	snprintf(name, sizeof(name), "%s, duplicates", label);
	bench_phase(name, url, reqs, n, clients);
	if (hn_db_int(d.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'") != (int64_t)n) {
		fprintf(stderr, "bench: not every order was paid exactly once\n");
		return -1;
	}
	daemon_finish(&d);
	for (i = 0; i < n; i++) {
		free(reqs[i].br_body);
		free(reqs[i].br_sig_header);
	}
	free(reqs);
	free(bo.bo_ids);
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 4000;
	int clients = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 32;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	printf("idemhook webhook benchmark: %zu Stripe callbacks, %d concurrent keep-alive clients, "
	       "synchronous=FULL, loopback\n\n",
	       n, clients);
	printf("%-34s %8s %10s %9s %9s %7s\n", "phase", "requests", "req/s", "p50 ms", "p99 ms", "errors");
	if (bench_config("group commit (batch_max=256)", 256, n, clients) < 0 ||
	    bench_config("no group commit (batch_max=1)", 1, n, clients) < 0) {
		return 1;
	}
	curl_global_cleanup();
	return 0;
}
