/* bench_store.c: the store's writer alone, without HTTP: N Stripe payment
 * callbacks, verified and prepared beforehand (ingest_prepare), handed to
 * the store with up to K in flight (ingest_submit), as the daemon does with
 * K connections waiting. Prints claims/s, commits, the mean batch and the
 * writer thread's CPU per claim: the ceiling of the durable path on this
 * machine, and a steady figure to compare changes to the writer with. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"
#include "http.h"
#include "ingest.h"
#include "orders.h"
#include "provider.h"
#include "store.h"

#define BSTORE_SECRET "whsec_bench_store"

struct bstore_orders {
	size_t bo_n;
	char (*bo_ids)[ORDERS_ID_LEN + 1];
};

static int bstore_make_orders(struct store_tx *tx, void *arg)
{
	struct bstore_orders *bo = arg;
	size_t i;

	for (i = 0; i < bo->bo_n; i++) {
		if (orders_create(tx, 1000, "USD", NULL, bo->bo_ids[i]) < 0) {
			return -1;
		}
	}
	return 0;
}

static double bstore_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of this process's threads called name. */
static double bstore_thread_cpu(const char *name)
{
	long ticks = sysconf(_SC_CLK_TCK);
	char path[300];
	char buf[1024];
	double total = 0;
	struct dirent *de;
	DIR *dir = opendir("/proc/self/task");

	while (dir != NULL && (de = readdir(dir)) != NULL) {
		unsigned long ut = 0;
		unsigned long st = 0;
		char *open;
		char *close;
		FILE *f;

		if (de->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		f = fopen(path, "r");
		if (f == NULL) {
			continue;
		}
		if (fgets(buf, sizeof(buf), f) != NULL && (open = strchr(buf, '(')) != NULL &&
		    (close = strrchr(buf, ')')) != NULL && (size_t)(close - open - 1) == strlen(name) &&
		    strncmp(open + 1, name, strlen(name)) == 0 &&
		    sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2) {
			total += (double)(ut + st) / (double)ticks;
		}
		fclose(f);
	}
	if (dir != NULL) {
		closedir(dir);
	}
	return total;
}

struct bstore_run {
	pthread_mutex_t br_mutex;
	pthread_cond_t br_cond;
	size_t br_in_flight;
	size_t br_done;
};

static void bstore_done(void *arg)
{
	struct bstore_run *br = arg;

	pthread_mutex_lock(&br->br_mutex);
	br->br_in_flight--;
	br->br_done++;
	pthread_cond_signal(&br->br_cond);
	pthread_mutex_unlock(&br->br_mutex);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
	size_t k = argc > 2 ? strtoul(argv[2], NULL, 10) : 256;
	const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
	char dir[512];
	struct bstore_run br = {.br_mutex = PTHREAD_MUTEX_INITIALIZER, .br_cond = PTHREAD_COND_INITIALIZER};
	struct bstore_orders bo = {.bo_n = n};
	struct ingest_job **jobs;
	struct store_options so;
	struct store_stats s0;
	struct store_stats s1;
	struct config *cf;
	struct store *st;
	const struct provider_conf *pc;
	char ini[1024];
	char db[600];
	char path[600];
	double t0;
	double cpu0;
	double secs;
	double cpu;
	double prep_s;
	double dup_s;
	size_t i;
	int rc;
	FILE *f;

	/* On the disk the storage ceiling measures (bench_hooks runs both):
	 * a directory of its own under TMPDIR, made by mkdtemp. */
	if ((size_t)snprintf(dir, sizeof(dir), "%s/idemhook-bench-store-XXXXXX", tmp) >=
	    sizeof(dir)) {
		fprintf(stderr, "bench_store: TMPDIR is too long: %s\n", tmp);
		return 1;
	}
	if (mkdtemp(dir) == NULL) {
		perror("bench_store: mkdtemp under TMPDIR");
		return 1;
	}
	snprintf(db, sizeof(db), "%s/idemhook.db", dir);
	snprintf(path, sizeof(path), "%s/idemhook.ini", dir);
	snprintf(ini, sizeof(ini), "[store]\npath = %s\n\n[provider stripe]\ntype = stripe\nsecret = env:BSTORE_SECRET\n",
		 db);
	setenv("BSTORE_SECRET", BSTORE_SECRET, 1);
	f = fopen(path, "w");
	if (f == NULL || fputs(ini, f) < 0 || fclose(f) != 0) {
		return 1;
	}
	cf = provider_config_load(path);
	pc = cf != NULL ? config_provider(cf, "stripe") : NULL;
	memset(&so, 0, sizeof(so));
	so.so_path = db;
	so.so_writer_nice = cf != NULL ? cf->cf_writer_nice : 0; /* as serve runs it */
	st = pc != NULL ? store_create(&so) : NULL;
	bo.bo_ids = calloc(n, sizeof(*bo.bo_ids));
	jobs = calloc(n, sizeof(*jobs));
	if (st == NULL || bo.bo_ids == NULL || jobs == NULL || store_write(st, 0, bstore_make_orders, &bo) < 0) {
		fprintf(stderr, "bench_store: setup failed\n");
		return 1;
	}
	/* Everything before the transaction, for every callback, first. */
	t0 = bstore_now();
	prep_s = 0;
	for (i = 0; i < n; i++) {
		struct http_header hdr[2];
		struct http_request req;
		struct ingest_report rep;
		struct reply answer;
		char id[64];
		char obj[512];
		char *body;
		char *sig;

		snprintf(id, sizeof(id), "evt_%08zu%08x", i, (unsigned)rand());
		snprintf(obj, sizeof(obj),
			 "{\"id\":\"pi_%zu\",\"object\":\"payment_intent\",\"amount\":1000,\"amount_received\":1000,"
			 "\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}",
			 i, bo.bo_ids[i]);
		body = hn_stripe_event(id, "payment_intent.succeeded", obj);
		sig = hn_stripe_signature(BSTORE_SECRET, hn_now_s(), body, strlen(body));
		hdr[0] = (struct http_header){"Content-Type", "application/json"};
		hdr[1] = (struct http_header){"Stripe-Signature", sig};
		memset(&req, 0, sizeof(req));
		req.hr_method = "POST";
		req.hr_url = "/hooks/stripe";
		req.hr_path = "/hooks/stripe";
		req.hr_version = "HTTP/1.1";
		req.hr_headers = hdr;
		req.hr_n_headers = 2;
		req.hr_body = (const unsigned char *)body;
		req.hr_body_len = strlen(body);
		req.hr_peer = "127.0.0.1";
		req.hr_client = "127.0.0.1";
		reply_init(&answer);
		t0 = bstore_now();
		rc = ingest_prepare(st, cf, pc, &req, NULL, &jobs[i], &answer, &rep);
		prep_s += bstore_now() - t0;
		if (rc < 0 || jobs[i] == NULL) {
			fprintf(stderr, "bench_store: callback %zu was not prepared\n", i);
			return 1;
		}
		reply_finish(&answer);
		free(body);
		free(sig);
	}
	store_get_stats(st, &s0);
	cpu0 = bstore_thread_cpu("store-writer");
	t0 = bstore_now();
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&br.br_mutex);
		while (br.br_in_flight >= k) {
			pthread_cond_wait(&br.br_cond, &br.br_mutex);
		}
		br.br_in_flight++;
		pthread_mutex_unlock(&br.br_mutex);
		ingest_submit(st, jobs[i], bstore_done, &br);
	}
	pthread_mutex_lock(&br.br_mutex);
	while (br.br_done < n) {
		pthread_cond_wait(&br.br_cond, &br.br_mutex);
	}
	pthread_mutex_unlock(&br.br_mutex);
	secs = bstore_now() - t0;
	cpu = bstore_thread_cpu("store-writer") - cpu0;
	store_get_stats(st, &s1);
	/* Every key is done now: submitting again answers each from this
	 * thread's read connection, as a duplicate delivery is. */
	t0 = bstore_now();
	for (i = 0; i < n; i++) {
		br.br_in_flight++;
		ingest_submit(st, jobs[i], bstore_done, &br);
	}
	dup_s = bstore_now() - t0;
	printf("prepare (verify, normalise, claims) %.1f us/callback; a duplicate's claim %.1f us\n",
	       prep_s * 1e6 / (double)n, dup_s * 1e6 / (double)n);
	printf("%zu claims, %zu in flight: %.0f claims/s, %.0f commits/s, mean batch %.1f, writer CPU %.1f us/claim, "
	       "%.2f WAL pages/claim, COMMIT (WAL write + fsync) %.2f ms on average\n",
	       n, k, (double)n / secs, (double)(s1.ss_commits - s0.ss_commits) / secs,
	       (double)(s1.ss_units - s0.ss_units) / (double)(s1.ss_batches - s0.ss_batches), cpu * 1e6 / (double)n,
	       (double)(s1.ss_wal_frames - s0.ss_wal_frames) / (double)n,
	       (s1.ss_commit_seconds - s0.ss_commit_seconds) * 1000.0 / (double)(s1.ss_commits - s0.ss_commits));
	for (i = 0; i < n; i++) {
		ingest_job_destroy(jobs[i]);
	}
	free(jobs);
	free(bo.bo_ids);
	store_destroy(st);
	config_destroy(cf);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	return system(path) == 0 ? 0 : 1;
}
