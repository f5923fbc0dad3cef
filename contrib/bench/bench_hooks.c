/* bench_hooks.c: the webhook benchmark of issue 10, in one run on one
 * machine: idemhook at its default configuration (unique callbacks and
 * duplicates, 32 and 256 connections, and unique ones at half the peak rate),
 * idemhook with batch_max = 1, the storage ceiling (sqlite_ceiling), the
 * HTTP ceiling (http_ceiling), batch sizes and commits from /metrics, peak
 * RSS, in-process replay of captures, the bytes the daemon hands to
 * write/pwrite and writes to the disk per request (/proc/PID/io), and the
 * unique phases again on a database already holding a million callbacks
 * (bench_fill.c, issue 24). Every figure comes from the same
 * pre-signed Stripe callbacks sent by the same load generator (loadgen.c).
 * Phases that a ratio compares run next to each other (bench_all). Beside
 * each storage ceiling, the store alone (bench_store: this tree's store,
 * no HTTP) shows what the durable path allows with as many callbacks in
 * flight; the summary ends with what each target not met would need of
 * the writer and of the cores, against what the run took (issue 24's
 * floor).
 * --duplicates: the duplicate path alone, against an older binary and
 * under perf (bench_duplicates); --unique: the same for unique callbacks
 * (bench_unique). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "env.h"
#include "harness.h"
#include "loadgen.h"
#include "orders.h"
#include "store.h"

#include <sqlite3.h>

#define BENCH_SECRET "whsec_bench_secret"
#define BENCH_SOURCES 8 /* loopback source addresses: a provider's senders */
#define BENCH_HIST 8 /* buckets of idemhook_store_batch_size */
#define BENCH_CEILING_S 3.0 /* seconds of the storage ceiling */
#define BENCH_REPLAY_N 10000 /* captures of the replay figure */
#define BENCH_REPLAY_JOBS 64 /* --jobs of the replay figure */
#define BENCH_ROUNDS_MAX 9   /* rounds of the whole benchmark in one run */

/* a / b, or 0 when b is not positive (a phase that measured nothing). */
static double bench_ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static const char *bench_bin;
static const char *bench_dir; /* where the helper programs are */

/* ---- requests ---- */

struct bench_set {
	struct lg_request *bs_reqs;
	size_t bs_n;
};

static void bench_set_finish(struct bench_set *bs)
{
	size_t i;

	for (i = 0; i < bs->bs_n; i++) {
		free(bs->bs_reqs[i].lr_data);
	}
	free(bs->bs_reqs);
	memset(bs, 0, sizeof(*bs));
}

/* One raw request: POST /hooks/stripe with a signed body. */
static int bench_request(struct lg_request *r, const char *body, int64_t t)
{
	char *sig = hn_stripe_signature(BENCH_SECRET, t, body, strlen(body));
	struct buf b;

	buf_init(&b, 0);
	if (sig == NULL || buf_printf(&b,
				      "POST /hooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				      "Content-Type: application/json\r\nStripe-Signature: %s\r\n"
				      "Content-Length: %zu\r\n\r\n%s",
				      sig, strlen(body), body) < 0) {
		free(sig);
		buf_finish(&b);
		return -1;
	}
	free(sig);
	r->lr_data = buf_take(&b, &r->lr_len);
	return r->lr_data != NULL ? 0 : -1;
}

/* A set of callbacks: n new orders in the database at db now (before its
 * daemon starts), and n payment_intent.succeeded callbacks paying them,
 * signed later by bench_set_sign (Stripe's tolerance is 300 s, so a set is
 * signed just before it is sent). tag keeps the event ids of sets apart. */
struct bench_plan {
	size_t bp_n;
	char bp_tag[16];
	char (*bp_orders)[ORDERS_ID_LEN + 1];
};

/* Payments in the order their orders were made, as a shop's checkout makes
 * them a moment apart, unless BENCH_PAY_WINDOW=W: then shuffled within each
 * run of W orders (a payment comes up to W orders early or late; W at least
 * a phase's size: at random). Order ids sort by creation time
 * (orders_new_id), so W says how far apart in the b-trees keyed by order id
 * one commit's payments land. */
static void bench_plan_shuffle(struct bench_plan *bp)
{
	const char *w = getenv("BENCH_PAY_WINDOW");
	size_t win = w != NULL ? (size_t)strtoull(w, NULL, 10) : 0;
	size_t start;

	for (start = 0; win > 1 && start < bp->bp_n; start += win) {
		size_t len = bp->bp_n - start < win ? bp->bp_n - start : win;
		size_t i;

		for (i = len - 1; i > 0; i--) {
			size_t j = (size_t)rand() % (i + 1);
			char t[ORDERS_ID_LEN + 1];

			memcpy(t, bp->bp_orders[start + i], sizeof(t));
			memcpy(bp->bp_orders[start + i], bp->bp_orders[start + j], sizeof(t));
			memcpy(bp->bp_orders[start + j], t, sizeof(t));
		}
	}
}

/* The orders go in with plain SQL into a database that the binary under
 * test has migrated itself, so the benchmark runs against other versions of
 * idemhook as well (the one before a change, for a comparison). */
static int bench_plan_make(struct bench_plan *bp, const struct daemon *d, const char *tag, size_t n)
{
	char cmd[2048];
	sqlite3_stmt *ins = NULL;
	sqlite3 *db = NULL;
	int64_t now = hn_now_ms();
	size_t i;
	int rc = -1;

	memset(bp, 0, sizeof(*bp));
	bp->bp_n = n;
	snprintf(bp->bp_tag, sizeof(bp->bp_tag), "%s", tag);
	bp->bp_orders = calloc(n, sizeof(*bp->bp_orders));
	snprintf(cmd, sizeof(cmd), "'%s' -q -c '%s' migrate >/dev/null", bench_bin, d->dm_config);
	if (bp->bp_orders == NULL || system(cmd) != 0 || sqlite3_open(d->dm_db, &db) != SQLITE_OK ||
	    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "INSERT INTO orders (id, amount, currency, status, created_at, updated_at) "
			       "VALUES (?, 1000, 'USD', 'pending', ?, ?)",
			       -1, &ins, NULL) != SQLITE_OK) {
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (orders_new_id(env_clock_ms(), bp->bp_orders[i]) < 0) {
			goto out;
		}
		sqlite3_bind_text(ins, 1, bp->bp_orders[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(ins, 2, now);
		sqlite3_bind_int64(ins, 3, now);
		if (sqlite3_step(ins) != SQLITE_DONE) {
			goto out;
		}
		sqlite3_reset(ins);
	}
	rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
	bench_plan_shuffle(bp);
out:
	if (rc < 0) {
		fprintf(stderr, "bench: cannot create orders%s%s\n", db != NULL ? ": " : "",
			db != NULL ? sqlite3_errmsg(db) : "");
	}
	sqlite3_finalize(ins);
	sqlite3_close(db);
	return rc;
}

/* Orders paid in d's database (plain SQL, whatever the schema version). */
static int64_t bench_paid(const struct daemon *d)
{
	sqlite3_stmt *q = NULL;
	sqlite3 *db = NULL;
	int64_t n = -1;

	if (sqlite3_open_v2(d->dm_db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM orders WHERE status = 'paid'", -1, &q, NULL) == SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW) {
		n = sqlite3_column_int64(q, 0);
	}
	sqlite3_finalize(q);
	sqlite3_close(db);
	return n;
}

static void bench_plan_finish(struct bench_plan *bp)
{
	free(bp->bp_orders);
	memset(bp, 0, sizeof(*bp));
}

static int bench_set_sign(struct bench_set *bs, const struct bench_plan *bp)
{
	int64_t now = hn_now_s();
	size_t i;

	memset(bs, 0, sizeof(*bs));
	bs->bs_reqs = calloc(bp->bp_n, sizeof(*bs->bs_reqs));
	if (bs->bs_reqs == NULL) {
		return -1;
	}
	for (i = 0; i < bp->bp_n; i++) {
		char id[64];
		char obj[512];
		char *body;

		/* Random ids, as a provider's are: each callback's keys land at
		 * random places of the indexes, not at their end. */
		snprintf(id, sizeof(id), "evt_%08x%08x_%s_%zu", (unsigned)rand(), (unsigned)rand(), bp->bp_tag, i);
		snprintf(obj, sizeof(obj),
			 "{\"id\":\"pi_%08x%08x_%s_%zu\",\"object\":\"payment_intent\",\"amount\":1000,"
			 "\"amount_received\":1000,\"currency\":\"usd\",\"status\":\"succeeded\","
			 "\"metadata\":{\"order_id\":\"%s\"}}",
			 (unsigned)rand(), (unsigned)rand(), bp->bp_tag, i, bp->bp_orders[i]);
		body = hn_stripe_event(id, "payment_intent.succeeded", obj);
		if (body == NULL || bench_request(&bs->bs_reqs[i], body, now) < 0) {
			free(body);
			return -1;
		}
		bs->bs_n++;
		free(body);
	}
	return 0;
}

/* ---- the daemon ---- */

/* Writes dir/idemhook.ini: the provider, the listeners on ephemeral ports
 * (port files), the database, plus extra; nothing else, so every other
 * setting is the default a new user gets. */
/* Writes d's configuration, its store at d->dm_db. */
static int bench_daemon_write_ini(struct daemon *d, const char *extra)
{
	char ini[2048];

	snprintf(ini, sizeof(ini),
	         "[server]\nlisten = 127.0.0.1:0\nport_file = %s/port\n\n[store]\npath = %s\n%s\n"
	         "[admin]\nlisten = 127.0.0.1:0\nport_file = %s/admin_port\n\n"
	         "[provider stripe]\ntype = stripe\nsecret = env:BENCH_STRIPE_SECRET\n",
	         d->dm_dir, d->dm_db, extra, d->dm_dir);
	return daemon_write_file(d, "idemhook.ini", ini);
}

static int bench_daemon_init(struct daemon *d, const char *extra)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dm_dir, sizeof(d->dm_dir), "%s/idemhook-bench-XXXXXX",
		 getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(d->dm_dir) == NULL) {
		return -1;
	}
	snprintf(d->dm_config, sizeof(d->dm_config), "%s/idemhook.ini", d->dm_dir);
	snprintf(d->dm_db, sizeof(d->dm_db), "%s/idemhook.db", d->dm_dir);
	snprintf(d->dm_log, sizeof(d->dm_log), "%s/daemon.log", d->dm_dir);
	return bench_daemon_write_ini(d, extra);
}

static unsigned bench_read_port(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned port = 0;

	if (f != NULL) {
		if (fscanf(f, "%u", &port) != 1) {
			port = 0;
		}
		fclose(f);
	}
	return port;
}

/* Starts idemhook serve as a user would (info-level log to a file). */
static int bench_daemon_start(struct daemon *d)
{
	char path[700];
	int i;

	snprintf(path, sizeof(path), "%s/port", d->dm_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/admin_port", d->dm_dir);
	unlink(path);
	d->dm_pid = fork();
	if (d->dm_pid < 0) {
		return -1;
	}
	if (d->dm_pid == 0) {
		if (freopen(d->dm_log, "a", stderr) == NULL) {
			_exit(127);
		}
		execl(bench_bin, "idemhook", "-c", d->dm_config, "serve", (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 2000; i++) {
		snprintf(path, sizeof(path), "%s/port", d->dm_dir);
		d->dm_port = bench_read_port(path);
		snprintf(path, sizeof(path), "%s/admin_port", d->dm_dir);
		d->dm_admin_port = bench_read_port(path);
		if (d->dm_port != 0 && d->dm_admin_port != 0) {
			snprintf(d->dm_base, sizeof(d->dm_base), "http://127.0.0.1:%u", d->dm_port);
			snprintf(d->dm_admin_base, sizeof(d->dm_admin_base), "http://127.0.0.1:%u",
				 d->dm_admin_port);
			return 0;
		}
		usleep(10000);
	}
	fprintf(stderr, "bench: the daemon did not start; see %s\n", d->dm_log);
	return -1;
}

/* The daemon's peak resident set (VmHWM), in MiB. */
static double bench_peak_rss_mib(pid_t pid)
{
	char path[64];
	char line[256];
	double kib = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL) {
		return 0;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "VmHWM:", 6) == 0) {
			kib = strtod(line + 6, NULL);
		}
	}
	fclose(f);
	return kib / 1024.0;
}

/* A daemon's thread times, in seconds, read in one pass over its threads. */
struct bench_times {
	double bt_cpu_s;         /* CPU (user + system) of every thread */
	double bt_writer_s;      /* of which the store's writer thread */
	double bt_writer_wait_s; /* the writer's time ready to run, waiting for a core */
};

/* Fills bt from each thread's stat (CPU) and, for the writer, its schedstat
 * (whose second field is the time it waited for a core; 0 where the kernel
 * keeps none). */
static void bench_times_read(pid_t pid, struct bench_times *bt)
{
	long ticks = sysconf(_SC_CLK_TCK);
	char path[300];
	char buf[1024];
	struct dirent *de;
	DIR *dir;

	memset(bt, 0, sizeof(*bt));
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (dir == NULL) {
		return;
	}
	while ((de = readdir(dir)) != NULL) {
		unsigned long ut = 0;
		unsigned long stime = 0;
		unsigned long long run_ns = 0;
		unsigned long long wait_ns = 0;
		char *open;
		char *p;
		double cpu;
		FILE *f;

		if (de->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (f == NULL) {
			continue;
		}
		p = fgets(buf, sizeof(buf), f) != NULL ? strrchr(buf, ')') : NULL;
		fclose(f);
		open = p != NULL ? strchr(buf, '(') : NULL;
		/* After ") ": state, then fields 4..13, utime is 14, stime 15. */
		if (open == NULL || p < open ||
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stime) != 2) {
			continue;
		}
		cpu = (double)(ut + stime) / (double)ticks;
		bt->bt_cpu_s += cpu;
		*p = '\0';
		if (strcmp(open + 1, "store-writer") != 0) {
			continue;
		}
		bt->bt_writer_s += cpu;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (f != NULL && fscanf(f, "%llu %llu", &run_ns, &wait_ns) == 2) {
			bt->bt_writer_wait_s += (double)wait_ns / 1e9;
		}
		if (f != NULL) {
			fclose(f);
		}
	}
	closedir(dir);
}

/* CPU time (user + system) in seconds of the whole daemon. */
static double bench_cpu_s(pid_t pid)
{
	struct bench_times bt;

	bench_times_read(pid, &bt);
	return bt.bt_cpu_s;
}

/* This process's CPU time (the load generator's), in seconds. */
static double bench_self_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

/* Bytes the daemon handed to write(2)/pwrite(2) (wchar) and bytes it
 * caused to be written to the disk (write_bytes), from /proc/PID/io. */
struct bench_io {
	double bi_wchar;
	double bi_disk;
};

static int bench_io_read(pid_t pid, struct bench_io *ret)
{
	char path[64];
	char line[128];
	FILE *f;

	memset(ret, 0, sizeof(*ret));
	snprintf(path, sizeof(path), "/proc/%d/io", (int)pid);
	f = fopen(path, "r");
	if (f == NULL) {
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "wchar:", 6) == 0) {
			ret->bi_wchar = strtod(line + 6, NULL);
		} else if (strncmp(line, "write_bytes:", 12) == 0) {
			ret->bi_disk = strtod(line + 12, NULL);
		}
	}
	fclose(f);
	return 0;
}

/* ---- /metrics ---- */

struct bench_metrics {
	double bm_commits;
	double bm_batches;
	double bm_units;
	double bm_hist[BENCH_HIST]; /* cumulative, as exposed */
	double bm_commit_s; /* idemhook_store_commit_seconds_sum */
	double bm_commit_n;
	double bm_restart_s; /* idemhook_store_wal_restart_seconds_total */
	/* where the units' time went (idemhook_store_unit_seconds_total by
	 * stage, idemhook_store_units_completed_total), and the public
	 * listener's resumes (idemhook_http_resume*) */
	double bm_queued_s;
	double bm_batch_s;
	double bm_completion_s;
	double bm_completed;
	double bm_resume_s;
	double bm_resumes;
};

static double bench_metric(const char *text, const char *name)
{
	const char *p = text;
	size_t len = strlen(name);

	while ((p = strstr(p, name)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[len] == ' ') {
			return strtod(p + len + 1, NULL);
		}
		p += len;
	}
	return 0;
}

static int bench_scrape(const struct daemon *d, struct bench_metrics *ret)
{
	static const char *const le[BENCH_HIST] = {"1", "3", "7", "15", "31", "63", "127", "+Inf"};
	char url[128];
	char name[96];
	struct hres r;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	if (hn_http("GET", url, NULL, NULL, 0, &r) < 0 || r.hs_status != 200) {
		hres_finish(&r);
		return -1;
	}
	ret->bm_commits = bench_metric(r.hs_body, "idemhook_store_commits_total");
	ret->bm_batches = bench_metric(r.hs_body, "idemhook_store_batch_size_count");
	ret->bm_units = bench_metric(r.hs_body, "idemhook_store_batch_size_sum");
	ret->bm_commit_s = bench_metric(r.hs_body, "idemhook_store_commit_seconds_sum");
	ret->bm_commit_n = bench_metric(r.hs_body, "idemhook_store_commit_seconds_count");
	ret->bm_restart_s = bench_metric(r.hs_body, "idemhook_store_wal_restart_seconds_total");
	ret->bm_queued_s =
	        bench_metric(r.hs_body, "idemhook_store_unit_seconds_total{stage=\"queued\"}");
	ret->bm_batch_s =
	        bench_metric(r.hs_body, "idemhook_store_unit_seconds_total{stage=\"batch\"}");
	ret->bm_completion_s =
	        bench_metric(r.hs_body, "idemhook_store_unit_seconds_total{stage=\"completion\"}");
	ret->bm_completed = bench_metric(r.hs_body, "idemhook_store_units_completed_total");
	ret->bm_resume_s =
	        bench_metric(r.hs_body, "idemhook_http_resume_seconds_total{listener=\"public\"}");
	ret->bm_resumes =
	        bench_metric(r.hs_body, "idemhook_http_resumes_total{listener=\"public\"}");
	for (i = 0; i < BENCH_HIST; i++) {
		snprintf(name, sizeof(name), "idemhook_store_batch_size_bucket{le=\"%s\"}", le[i]);
		ret->bm_hist[i] = bench_metric(r.hs_body, name);
	}
	hres_finish(&r);
	return 0;
}

/* ---- phases ---- */

struct bench_row {
	char br_label[64];
	unsigned br_conns;
	struct lg_result br_res;
	double br_rate; /* requests per second */
	int br_has_store; /* the store columns below are set */
	double br_commits_s;
	double br_mean_batch;
	double br_hist[BENCH_HIST]; /* per bucket, this phase only */
	double br_cpu_us; /* daemon CPU per request */
	double br_writer_us; /* of which the store's writer thread */
	double br_writer_wait_us; /* the writer's wait for a core, per request */
	double br_lg_us; /* the load generator's CPU per request */
	double br_commit_ms; /* mean time of one COMMIT (WAL write and fsync) */
	double br_restart_pct; /* share of the phase the writer spent starting the WAL over */
	double br_wchar; /* bytes handed to write/pwrite per request */
	double br_disk; /* bytes written to the disk per request */
	/* Where a callback's time went in the daemon, mean ms per unit of work
	 * (0 when no unit completed, or the daemon predates the metrics):
	 * queued for the writer, in its batch, from its COMMIT to its
	 * completion, and from the resume to its server thread (per resume). */
	double br_queued_ms;
	double br_batch_ms;
	double br_completion_ms;
	double br_resume_ms;
};

static void bench_print_header(void)
{
	printf("%-36s %5s %7s %9s %8s %8s %6s %6s %9s %6s %6s %5s %7s %7s %7s %7s %7s  %s\n",
	       "phase", "conns", "reqs", "req/s", "p50 ms", "p99 ms", "errors", "lg us",
	       "commits/s", "batch", "fsync", "rst %", "cpu us", "wrt us", "wait us", "wchar/r",
	       "disk/r", "batch sizes 1|2-3|4-7|8-15|16-31|32-63|64-127|128+");
}

static void bench_print_row(const struct bench_row *br)
{
	size_t i;

	printf("%-36s %5u %7zu %9.0f %8.2f %8.2f %6zu %6.1f", br->br_label, br->br_conns, br->br_res.lg_n,
	       br->br_rate, br->br_res.lg_p50_ms, br->br_res.lg_p99_ms, br->br_res.lg_errors, br->br_lg_us);
	if (br->br_has_store) {
		printf(" %9.0f %6.1f %6.2f %5.1f %7.1f %7.1f %7.1f %7.0f %7.0f  ", br->br_commits_s,
		       br->br_mean_batch, br->br_commit_ms, br->br_restart_pct, br->br_cpu_us,
		       br->br_writer_us, br->br_writer_wait_us, br->br_wchar, br->br_disk);
		for (i = 0; i < BENCH_HIST; i++) {
			printf("%s%.0f", i > 0 ? "|" : "", br->br_hist[i]);
		}
	}
	printf("\n");
	if (br->br_batch_ms > 0) {
		printf("%-36s in the daemon, ms per callback: queued %.2f, "
		       "batch %.2f (its COMMIT %.2f), to its completion %.2f, "
		       "to its server thread %.2f\n",
		       "", br->br_queued_ms, br->br_batch_ms, br->br_commit_ms,
		       br->br_completion_ms, br->br_resume_ms);
	}
	if (br->br_res.lg_errors > 0) {
		/* What kind of errors: a stall shows as requests dropped after
		 * the connection timeout, an overload as 503s. */
		printf("%-36s errors: %zu closed or failed without an answer (the longest "
		       "after %.0f ms), %zu answered other than 2xx (first: %d)\n",
		       "", br->br_res.lg_dropped, br->br_res.lg_dropped_after_ms,
		       br->br_res.lg_errors - br->br_res.lg_dropped, br->br_res.lg_bad_status);
	}
	fflush(stdout);
}

/* The means of the stages of a callback in the daemon over a phase. The
 * sweeper hands the resumes to the metrics every 100 ms: the mean is of
 * those handed over by the end of the phase. */
static void bench_stages(struct bench_row *br, const struct bench_metrics *b,
                         const struct bench_metrics *a)
{
	double n = a->bm_completed - b->bm_completed;
	double r = a->bm_resumes - b->bm_resumes;

	if (n <= 0) {
		return;
	}
	br->br_queued_ms = (a->bm_queued_s - b->bm_queued_s) * 1000.0 / n;
	br->br_batch_ms = (a->bm_batch_s - b->bm_batch_s) * 1000.0 / n;
	br->br_completion_ms = (a->bm_completion_s - b->bm_completion_s) * 1000.0 / n;
	br->br_resume_ms = r > 0 ? (a->bm_resume_s - b->bm_resume_s) * 1000.0 / r : 0;
}

/* Sends set over conns connections (at rate, 0 = closed loop) and, when d
 * is given, reads the store's figures for the phase from /metrics. */
static int bench_phase(struct bench_row *br, const char *label, const struct daemon *d, unsigned port,
		       const struct bench_set *set, unsigned conns, double rate)
{
	struct lg_options lo = {.lo_port = port, .lo_conns = conns, .lo_sources = BENCH_SOURCES, .lo_rate = rate};
	struct bench_metrics before;
	struct bench_metrics after;
	struct bench_io io0 = {0};
	struct bench_io io1 = {0};
	struct bench_times t0 = {0};
	struct bench_times t1;
	double lg0;
	size_t i;

	memset(br, 0, sizeof(*br));
	snprintf(br->br_label, sizeof(br->br_label), "%s", label);
	br->br_conns = conns;
	if (d != NULL && bench_scrape(d, &before) < 0) {
		return -1;
	}
	if (d != NULL) {
		bench_times_read(d->dm_pid, &t0);
		bench_io_read(d->dm_pid, &io0);
	}
	lg0 = bench_self_cpu_s();
	if (lg_run(&lo, set->bs_reqs, set->bs_n, &br->br_res) < 0) {
		return -1;
	}
	br->br_lg_us = (bench_self_cpu_s() - lg0) * 1e6 / (double)(br->br_res.lg_n > 0 ? br->br_res.lg_n : 1);
	br->br_rate = bench_ratio((double)br->br_res.lg_n, br->br_res.lg_seconds);
	if (d != NULL && bench_scrape(d, &after) == 0) {
		double batches = after.bm_batches - before.bm_batches;

		br->br_has_store = 1;
		bench_io_read(d->dm_pid, &io1);
		br->br_wchar = (io1.bi_wchar - io0.bi_wchar) / (double)br->br_res.lg_n;
		br->br_disk = (io1.bi_disk - io0.bi_disk) / (double)br->br_res.lg_n;
		bench_times_read(d->dm_pid, &t1);
		br->br_cpu_us = (t1.bt_cpu_s - t0.bt_cpu_s) * 1e6 / (double)br->br_res.lg_n;
		br->br_writer_us = (t1.bt_writer_s - t0.bt_writer_s) * 1e6 / (double)br->br_res.lg_n;
		br->br_writer_wait_us = (t1.bt_writer_wait_s - t0.bt_writer_wait_s) * 1e6 / (double)br->br_res.lg_n;
		br->br_commits_s = (after.bm_commits - before.bm_commits) / br->br_res.lg_seconds;
		br->br_mean_batch = bench_ratio(after.bm_units - before.bm_units, batches);
		br->br_commit_ms = after.bm_commit_n > before.bm_commit_n
		                           ? (after.bm_commit_s - before.bm_commit_s) * 1000.0 /
		                                     (after.bm_commit_n - before.bm_commit_n)
		                           : 0;
		br->br_restart_pct = br->br_res.lg_seconds > 0
		                             ? (after.bm_restart_s - before.bm_restart_s) * 100.0 /
		                                       br->br_res.lg_seconds
		                             : 0;
		bench_stages(br, &before, &after);
		for (i = 0; i < BENCH_HIST; i++) {
			double prev = i > 0 ? after.bm_hist[i - 1] - before.bm_hist[i - 1] : 0;

			br->br_hist[i] = after.bm_hist[i] - before.bm_hist[i] - prev;
		}
	}
	bench_print_row(br);
	return 0;
}

/* ---- helpers as separate programs ---- */

static double bench_storage_ceiling(const char *dir)
{
	char cmd[2048];
	double v = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s/sqlite_ceiling' '%s' %.1f", bench_dir, dir, BENCH_CEILING_S);
	p = popen(cmd, "r");
	if (p == NULL || fscanf(p, "%lf", &v) != 1) {
		v = 0;
	}
	if (p != NULL) {
		pclose(p);
	}
	return v;
}

struct bench_ceiling {
	pid_t bc_pid;
	int bc_in; /* its stdin: closing it stops it */
	unsigned bc_port;
};

static int bench_ceiling_start(struct bench_ceiling *bc)
{
	char path[2048];
	int to_child[2];
	int from_child[2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/http_ceiling", bench_dir);
	if (pipe(to_child) < 0 || pipe(from_child) < 0) {
		return -1;
	}
	bc->bc_pid = fork();
	if (bc->bc_pid == 0) {
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		close(to_child[1]);
		close(from_child[0]);
		execl(path, "http_ceiling", (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	bc->bc_in = to_child[1];
	f = fdopen(from_child[0], "r");
	if (f == NULL || fscanf(f, "%u", &bc->bc_port) != 1) {
		return -1;
	}
	fclose(f);
	return 0;
}

static void bench_ceiling_stop(struct bench_ceiling *bc)
{
	close(bc->bc_in);
	waitpid(bc->bc_pid, NULL, 0);
}

/* Times the HTTP ceiling's phase runs before it counts as not measured. */
#define BENCH_CEILING_TRIES 3

/* The HTTP ceiling's phase: as bench_phase, with br_cpu_us the ceiling
 * server's CPU per answer (its row prints no store columns). A bare
 * libmicrohttpd server meets the 128-event stall that the daemon's sweeper
 * ends (docs/benchmarks.md, "A stalled server thread"): 128 requests of a
 * 256-connection phase then wait out the 30 s connection timeout, and the
 * ceiling comes out at a few hundred requests a second, which made a ratio
 * over it "met" at 54.81. A phase with errors runs again. */
static int bench_ceiling_phase(struct bench_row *br, const struct bench_ceiling *bc,
                               const struct bench_set *set, unsigned conns)
{
	unsigned tries;

	for (tries = 1;; tries++) {
		double c0 = bench_cpu_s(bc->bc_pid);

		if (bench_phase(br, "HTTP ceiling (MHD, 200, no work)", NULL, bc->bc_port, set,
		                conns, 0) < 0) {
			return -1;
		}
		br->br_cpu_us =
		        bench_ratio((bench_cpu_s(bc->bc_pid) - c0) * 1e6, (double)br->br_res.lg_n);
		if (br->br_res.lg_errors == 0 || tries == BENCH_CEILING_TRIES) {
			return 0;
		}
		printf("%-36s a ceiling with errors measures nothing: run again (%u of %u)\n", "",
		       tries + 1, BENCH_CEILING_TRIES);
	}
}

/* The store alone (bench_store, this tree's store, no HTTP): n prepared
 * payments handed to the store with k in flight, on the disk of the
 * storage ceiling. Fills br's rate, writer CPU, batch and COMMIT, and
 * prints its row. What the durable path allows with k callbacks waiting:
 * a daemon with k connections cannot answer faster than its store commits. */
static int bench_store_alone(struct bench_row *br, size_t n, unsigned k)
{
	char cmd[2048];
	char line[1024];
	int found = 0;
	FILE *p;

	memset(br, 0, sizeof(*br));
	snprintf(br->br_label, sizeof(br->br_label), "store alone (bench_store, no HTTP)");
	br->br_conns = k;
	br->br_res.lg_n = n;
	snprintf(cmd, sizeof(cmd), "'%s/bench_store' %zu %u 2>/dev/null", bench_dir, n, k);
	p = popen(cmd, "r");
	while (p != NULL && fgets(line, sizeof(line), p) != NULL) {
		size_t got_n = 0;
		unsigned got_k = 0;

		if (sscanf(line,
		           "%zu claims, %u in flight: %lf claims/s, %lf commits/s, mean batch %lf, "
		           "writer CPU %lf "
		           "us/claim, %*f WAL pages/claim, COMMIT (WAL write + fsync) %lf ms",
		           &got_n, &got_k, &br->br_rate, &br->br_commits_s, &br->br_mean_batch,
		           &br->br_writer_us, &br->br_commit_ms) == 7) {
			found = 1;
		}
	}
	if (p == NULL || pclose(p) != 0 || !found) {
		fprintf(stderr, "bench: %s failed\n", cmd);
		return -1;
	}
	printf("%-36s %5u %7zu %9.0f %8s %8s %6s %6s %9.0f %6.1f %6.2f %5s %7s %7.1f\n",
	       br->br_label, k, n, br->br_rate, "", "", "", "", br->br_commits_s, br->br_mean_batch,
	       br->br_commit_ms, "", "", br->br_writer_us);
	fflush(stdout);
	return 0;
}

/* ---- replay ---- */

/* Writes n capture files under dir/spool as replay_bench.sh does: payments
 * of the first orders (each sent twice, as Stripe retries), then events
 * without business effect. Returns 0 or -1. */
static int bench_captures(const char *dir, char (*orders)[ORDERS_ID_LEN + 1], size_t n_orders, size_t n)
{
	char path[1024];
	int64_t t0 = hn_now_s() - 86400;
	size_t i;

	snprintf(path, sizeof(path), "%s/spool", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		return -1;
	}
	for (i = 0; i < n; i++) {
		int64_t ms = t0 * 1000 + (int64_t)i * 7;
		int64_t t = ms / 1000;
		char obj[512];
		char id[64];
		char *body;
		char *sig;
		struct buf b;
		FILE *f;

		if (i < 2 * n_orders) {
			const char *o = orders[i % n_orders];

			snprintf(id, sizeof(id), "evt_pay_%s", o);
			snprintf(obj, sizeof(obj),
				 "{\"id\":\"pi_%s\",\"object\":\"payment_intent\",\"amount\":1000,"
				 "\"amount_received\":1000,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"%s\"}}",
				 o, o);
			body = hn_stripe_event(id, "payment_intent.succeeded", obj);
		} else {
			snprintf(id, sizeof(id), "evt_other_%zu", i);
			snprintf(obj, sizeof(obj),
				 "{\"id\":\"cus_%zu\",\"object\":\"customer\",\"email\":\"customer%zu@example.com\"}", i,
				 i);
			body = hn_stripe_event(id, "customer.updated", obj);
		}
		sig = body != NULL ? hn_stripe_signature(BENCH_SECRET, t, body, strlen(body)) : NULL;
		if (sig == NULL) {
			free(body);
			return -1;
		}
		buf_init(&b, 0);
		buf_printf(&b,
			   "idemhook-capture 1\nreceived-at: 2026-01-01T00:00:00.000Z\nreceived-ms: %lld\n"
			   "provider: stripe\npeer: 127.0.0.1\nbody-length: %zu\n\nPOST /hooks/stripe HTTP/1.1\r\n"
			   "Content-Type: application/json\r\nStripe-Signature: %s\r\n\r\n%s",
			   (long long)ms, strlen(body), sig, body);
		snprintf(path, sizeof(path), "%s/spool/%06zu.cap", dir, i);
		f = fopen(path, "w");
		if (f == NULL || fwrite(b.buf_data, 1, b.buf_len, f) != b.buf_len) {
			if (f != NULL) {
				fclose(f);
			}
			buf_finish(&b);
			free(body);
			free(sig);
			return -1;
		}
		fclose(f);
		buf_finish(&b);
		free(body);
		free(sig);
	}
	return 0;
}

/* Replays dir/spool into a fresh copy of dir/base.db with --jobs jobs;
 * returns captures per second (0 on failure). */
static double bench_replay_once(const char *dir, unsigned jobs, size_t n, char *ret_detail, size_t detail_size)
{
	char cmd[4096];
	char line[512] = "";
	struct timespec t0;
	struct timespec t1;
	double secs;
	FILE *p;
	int rc;

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && rm -f replay.db replay.db-wal replay.db-shm && cp base.db replay.db && "
		 "printf '[store]\\npath = %s/replay.db\\n\\n[provider stripe]\\ntype = stripe\\n"
		 "secret = env:BENCH_STRIPE_SECRET\\n' > replay.ini",
		 dir, dir);
	if (system(cmd) != 0) {
		return 0;
	}
	snprintf(cmd, sizeof(cmd), "'%s' -q -c '%s/replay.ini' replay -q --json --jobs %u '%s/spool'", bench_bin, dir,
		 jobs, dir);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	p = popen(cmd, "r");
	if (p == NULL) {
		return 0;
	}
	if (fgets(line, sizeof(line), p) == NULL) {
		line[0] = '\0';
	}
	rc = pclose(p);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	line[strcspn(line, "\n")] = '\0';
	snprintf(ret_detail, detail_size, "%s", line);
	if (rc != 0 || strstr(line, "\"failed\":0") == NULL) {
		return 0;
	}
	return (double)n / secs;
}

/* ---- main ---- */

struct bench_figures {
	double bf_storage[3]; /* tx/s: before the 32-connection pair, between, after the 256 one */
	struct bench_row bf_h32, bf_h256; /* the HTTP ceiling, right before the duplicates */
	struct bench_row bf_u32, bf_d32, bf_u256, bf_d256, bf_half, bf_one32, bf_one256;
	struct bench_row bf_l32, bf_l256; /* unique, on the database holding bf_stored callbacks */
	struct bench_row bf_s32, bf_s256; /* the store alone, 32 and 256 in flight (bench_store) */
	size_t bf_stored;
	double bf_fill_s;
	double bf_rss;
	double bf_replay1, bf_replay_jobs;
};

/* Signs plan and sends it. */
static int bench_send(struct bench_row *br, const char *label, const struct daemon *d, unsigned port,
		      const struct bench_plan *plan, unsigned conns, double rate, struct bench_set *keep)
{
	struct bench_set set;
	int rc;

	if (bench_set_sign(&set, plan) < 0) {
		return -1;
	}
	rc = bench_phase(br, label, d, port, &set, conns, rate);
	if (keep != NULL) {
		*keep = set;
	} else {
		bench_set_finish(&set);
	}
	return rc;
}

/* The callbacks stored in the database at path, or -1. Its WAL, which a
 * daemon stopped in the middle of a phase may have left long, is copied
 * into it first: a daemon that opened it would read the whole WAL before
 * it listens. */
static long long bench_stored(const char *path)
{
	sqlite3_stmt *st = NULL;
	sqlite3 *db = NULL;
	long long n = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM idempotency_records", -1, &st, NULL) ==
	            SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		n = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* A daemon on a database that already holds stored callbacks: 100 real
 * ones sent through HTTP, then copied by bench_fill (SQL) until there are
 * stored of them; the daemon is started again on it. With BENCH_LARGE_DB
 * set, the filled database is moved there (the same filesystem as TMPDIR)
 * and a later run uses it as it is instead of filling again: 10,000,000
 * callbacks take minutes to fill. Each run's unique phases stay in it.
 * *ret_have is the callbacks the database holds. */
static int bench_large_make(struct daemon *d, size_t stored, double *ret_fill_s,
                            long long *ret_have)
{
	const char *keep = getenv("BENCH_LARGE_DB");
	struct bench_plan tpl = {0};
	struct bench_row br;
	char cmd[2048];
	long long have = 0;
	FILE *p;
	int rc = -1;

	*ret_fill_s = 0;
	*ret_have = 0;
	if (bench_daemon_init(d, "") < 0) {
		goto out;
	}
	if (keep != NULL && access(keep, F_OK) == 0) {
		snprintf(d->dm_db, sizeof(d->dm_db), "%s", keep);
		if (bench_daemon_write_ini(d, "") < 0 || (have = bench_stored(keep)) < 0) {
			goto out;
		}
		printf("%-36s %lld stored callbacks in %s (BENCH_LARGE_DB, not filled again)\n",
		       "fill", have, keep);
		fflush(stdout);
		*ret_have = have;
		rc = 0;
		goto out;
	}
	if (bench_plan_make(&tpl, d, "tpl", 100) < 0 || bench_daemon_start(d) < 0) {
		goto out;
	}
	if (bench_send(&br, "(100 template callbacks)", NULL, d->dm_port, &tpl, 8, 0, NULL) < 0 ||
	    daemon_term(d, 30) < 0) {
		goto out;
	}
	snprintf(cmd, sizeof(cmd), "'%s/bench_fill' '%s' %zu", bench_dir, d->dm_db, stored);
	p = popen(cmd, "r");
	if (p == NULL || fscanf(p, "%lf %lld", ret_fill_s, &have) != 2) {
		if (p != NULL) {
			pclose(p);
		}
		goto out;
	}
	if (pclose(p) != 0 || have < (long long)stored) {
		goto out;
	}
	printf("%-36s %lld stored callbacks in %.1f s (bench_fill, SQL)\n", "fill", have, *ret_fill_s);
	fflush(stdout);
	if (keep != NULL) {
		if (rename(d->dm_db, keep) != 0) {
			fprintf(stderr, "bench: cannot move the filled database to %s: %s\n", keep,
			        strerror(errno));
			goto out;
		}
		snprintf(d->dm_db, sizeof(d->dm_db), "%s", keep);
		if (bench_daemon_write_ini(d, "") < 0) {
			goto out;
		}
	}
	*ret_have = have;
	rc = 0;
out:
	bench_plan_finish(&tpl);
	return rc;
}

static int bench_storage_row(double *ret, const char *dir)
{
	*ret = bench_storage_ceiling(dir);
	printf("%-36s %5s %7s %9.0f tx/s (one INSERT per transaction, WAL, synchronous=FULL)\n",
	       "storage ceiling (sqlite_ceiling)", "", "", *ret);
	fflush(stdout);
	return *ret > 0 ? 0 : -1;
}

/* The phases that are compared run next to each other in time, so that a
 * neighbour's load on a shared machine falls on both sides of a ratio:
 * the storage ceiling before and after each unique phase, the HTTP ceiling
 * right before the duplicates, batch_max = 1 right after the default. Both
 * daemons and the HTTP ceiling run the whole time (idle when not measured). */
static int bench_all(struct bench_figures *bf, size_t n)
{
	struct bench_ceiling bc = {0};
	struct bench_plan pu32 = {0}, pu256 = {0}, phalf = {0}, po32 = {0}, po256 = {0}, pl32 = {0}, pl256 = {0};
	struct bench_set dup32 = {0}, dup256 = {0};
	struct daemon d = {0};
	struct daemon one = {0};
	struct daemon large = {0};
	char label[64];
	char tmp[512];
	int64_t large0 = 0;
	long long have = 0;
	double peak;
	int rc = -1;

	snprintf(tmp, sizeof(tmp), "%s", getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
	if (bench_large_make(&large, bf->bf_stored, &bf->bf_fill_s, &have) < 0) {
		fprintf(stderr, "bench: cannot make the large database\n");
		goto out;
	}
	snprintf(label, sizeof(label), "%lld stored, unique", have);
	if (bench_plan_make(&pl32, &large, "l32", n) < 0 ||
	    bench_plan_make(&pl256, &large, "l256", n) < 0 || bench_daemon_start(&large) < 0) {
		fprintf(stderr, "bench: cannot make the large database\n");
		goto out;
	}
	if (bench_daemon_init(&d, "") < 0 || bench_daemon_init(&one, "batch_max = 1\n") < 0 ||
	    bench_plan_make(&pu32, &d, "u32", n) < 0 || bench_plan_make(&pu256, &d, "u256", n) < 0 ||
	    bench_plan_make(&phalf, &d, "half", n / 2) < 0 || bench_plan_make(&po32, &one, "o32", n / 5) < 0 ||
	    bench_plan_make(&po256, &one, "o256", n / 5) < 0 || bench_daemon_start(&d) < 0 ||
	    bench_daemon_start(&one) < 0 || bench_ceiling_start(&bc) < 0) {
		goto out;
	}
	large0 = bench_paid(&large);
	if (bench_storage_row(&bf->bf_storage[0], tmp) < 0 ||
	    bench_send(&bf->bf_u32, "default config, unique", &d, d.dm_port, &pu32, 32, 0, &dup32) <
	            0 ||
	    bench_send(&bf->bf_l32, label, &large, large.dm_port, &pl32, 32, 0, NULL) < 0 ||
	    bench_send(&bf->bf_one32, "batch_max = 1, unique", &one, one.dm_port, &po32, 32, 0,
	               NULL) < 0 ||
	    bench_ceiling_phase(&bf->bf_h32, &bc, &dup32, 32) < 0 ||
	    bench_phase(&bf->bf_d32, "default config, duplicates", &d, d.dm_port, &dup32, 32, 0) <
	            0 ||
	    bench_store_alone(&bf->bf_s32, n, 32) < 0 ||
	    bench_storage_row(&bf->bf_storage[1], tmp) < 0 ||
	    bench_send(&bf->bf_u256, "default config, unique", &d, d.dm_port, &pu256, 256, 0,
	               &dup256) < 0 ||
	    bench_send(&bf->bf_l256, label, &large, large.dm_port, &pl256, 256, 0, NULL) < 0 ||
	    bench_send(&bf->bf_one256, "batch_max = 1, unique", &one, one.dm_port, &po256, 256, 0,
	               NULL) < 0 ||
	    bench_ceiling_phase(&bf->bf_h256, &bc, &dup256, 256) < 0 ||
	    bench_phase(&bf->bf_d256, "default config, duplicates", &d, d.dm_port, &dup256, 256,
	                0) < 0 ||
	    bench_store_alone(&bf->bf_s256, n, 256) < 0 ||
	    bench_storage_row(&bf->bf_storage[2], tmp) < 0) {
		goto out;
	}
	/* Half of the best unique rate, open loop over 256 connections. */
	peak = bf->bf_u32.br_rate > bf->bf_u256.br_rate ? bf->bf_u32.br_rate : bf->bf_u256.br_rate;
	if (bench_send(&bf->bf_half, "default config, unique at half peak", &d, d.dm_port, &phalf, 256, peak / 2,
		       NULL) < 0) {
		goto out;
	}
	bf->bf_rss = bench_peak_rss_mib(d.dm_pid);
	if (bench_paid(&d) != (int64_t)(pu32.bp_n + pu256.bp_n + phalf.bp_n) ||
	    bench_paid(&one) != (int64_t)(po32.bp_n + po256.bp_n) ||
	    bench_paid(&large) - large0 != (int64_t)(pl32.bp_n + pl256.bp_n)) {
		fprintf(stderr, "bench: not every order was paid exactly once\n");
		goto out;
	}
	rc = 0;
out:
	if (bc.bc_pid > 0) {
		bench_ceiling_stop(&bc);
	}
	daemon_finish(&d);
	daemon_finish(&one);
	daemon_finish(&large);
	bench_plan_finish(&pl32);
	bench_plan_finish(&pl256);
	bench_set_finish(&dup32);
	bench_set_finish(&dup256);
	bench_plan_finish(&pu32);
	bench_plan_finish(&pu256);
	bench_plan_finish(&phalf);
	bench_plan_finish(&po32);
	bench_plan_finish(&po256);
	return rc;
}

static int bench_replay(struct bench_figures *bf)
{
	struct bench_plan plan = {0};
	struct daemon base;
	char dir[] = "/tmp/idemhook-bench-replay-XXXXXX";
	char cmd[128];
	char detail[1024];
	int rc = -1;

	if (mkdtemp(dir) == NULL) {
		return -1;
	}
	/* base.db: migrated by the binary under test, with 100 orders. */
	memset(&base, 0, sizeof(base));
	snprintf(base.dm_dir, sizeof(base.dm_dir), "%s", dir);
	snprintf(base.dm_config, sizeof(base.dm_config), "%s/base.ini", dir);
	snprintf(base.dm_db, sizeof(base.dm_db), "%s/base.db", dir);
	snprintf(detail, sizeof(detail), "[store]\npath = %s\n", base.dm_db);
	if (daemon_write_file(&base, "base.ini", detail) < 0 || bench_plan_make(&plan, &base, "replay", 100) < 0 ||
	    bench_captures(dir, plan.bp_orders, plan.bp_n, BENCH_REPLAY_N) < 0) {
		goto out;
	}
	bf->bf_replay1 = bench_replay_once(dir, 1, BENCH_REPLAY_N, detail, sizeof(detail));
	printf("%-36s %7d %9.0f captures/s  %s\n", "replay --jobs 1, fresh db", BENCH_REPLAY_N, bf->bf_replay1, detail);
	bf->bf_replay_jobs = bench_replay_once(dir, BENCH_REPLAY_JOBS, BENCH_REPLAY_N, detail, sizeof(detail));
	printf("replay --jobs %-22d %7d %9.0f captures/s  %s\n", BENCH_REPLAY_JOBS, BENCH_REPLAY_N, bf->bf_replay_jobs,
	       detail);
	rc = bf->bf_replay1 > 0 && bf->bf_replay_jobs > 0 ? 0 : -1;
out:
	bench_plan_finish(&plan);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0) {
		rc = -1;
	}
	return rc;
}

/* The targets of issues 10 and 24, each a figure of one round against a
 * bound; bench_goal_value computes goal i's figure from a round. */
struct bench_goal {
	const char *bg_what;
	const char *bg_op; /* ">=", "<=" or "<" */
	double bg_want;
};

static const struct bench_goal bench_goals[] = {
        {"unique/s (32 conns) / storage ceiling around it", ">=", 3},
        {"unique/s (256 conns) / storage ceiling around it", ">=", 3},
        {"unique/s (32 conns) / batch_max = 1 (32 conns)", ">=", 4},
        {"unique/s (256 conns) / batch_max = 1 (256 conns)", ">=", 4},
        {"KB handed to pwrite per unique callback, empty (32)", "<=", 12},
        {"KB handed to pwrite per unique callback, empty (256)", "<=", 12},
        {"KB handed to pwrite per unique callback, large (32)", "<=", 16},
        {"KB handed to pwrite per unique callback, large (256)", "<=", 16},
        {"unique/s large / empty (32 conns)", ">=", 0.85},
        {"unique/s large / empty (256 conns)", ">=", 0.85},
        {"p99 large / empty (32 conns)", "<=", 3},
        {"p99 large / empty (256 conns)", "<=", 3},
        {"duplicates/s (32 conns) / HTTP ceiling (32 conns)", ">=", 0.5},
        {"duplicates/s (256 conns) / HTTP ceiling (256 conns)", ">=", 0.5},
        {"p99 ms of unique callbacks at half the peak rate", "<", 5},
        {"peak RSS MiB of the daemon (256 conns)", "<", 32},
        {"replay captures/s (--jobs 64) / 842 (issue's before)", ">=", 10},
};

#define BENCH_GOALS (sizeof(bench_goals) / sizeof(bench_goals[0]))
#define BENCH_GOAL_REPLAY (BENCH_GOALS - 1) /* measured once, not in every round */

/* Goal i's figure in one round, and the phases it comes from. */
struct bench_goal_fig {
	double gf_value;
	const struct bench_row *gf_rows[2]; /* NULL: none */
};

/* Goal i's figure in round bf. *measured is 0 when a phase it comes from
 * had errors: that phase measured a stall or a failure, not a rate, and the
 * figure is shown but neither met nor counted. */
static double bench_goal_value(const struct bench_figures *bf, size_t i, int *measured)
{
	double s32 = (bf->bf_storage[0] + bf->bf_storage[1]) / 2;
	double s256 = (bf->bf_storage[1] + bf->bf_storage[2]) / 2;
	const struct bench_goal_fig f[BENCH_GOALS] = {
	        {bench_ratio(bf->bf_u32.br_rate, s32), {&bf->bf_u32, NULL}},
	        {bench_ratio(bf->bf_u256.br_rate, s256), {&bf->bf_u256, NULL}},
	        {bench_ratio(bf->bf_u32.br_rate, bf->bf_one32.br_rate),
	         {&bf->bf_u32, &bf->bf_one32}},
	        {bench_ratio(bf->bf_u256.br_rate, bf->bf_one256.br_rate),
	         {&bf->bf_u256, &bf->bf_one256}},
	        {bf->bf_u32.br_wchar / 1024, {&bf->bf_u32, NULL}},
	        {bf->bf_u256.br_wchar / 1024, {&bf->bf_u256, NULL}},
	        {bf->bf_l32.br_wchar / 1024, {&bf->bf_l32, NULL}},
	        {bf->bf_l256.br_wchar / 1024, {&bf->bf_l256, NULL}},
	        {bench_ratio(bf->bf_l32.br_rate, bf->bf_u32.br_rate), {&bf->bf_l32, &bf->bf_u32}},
	        {bench_ratio(bf->bf_l256.br_rate, bf->bf_u256.br_rate),
	         {&bf->bf_l256, &bf->bf_u256}},
	        {bench_ratio(bf->bf_l32.br_res.lg_p99_ms, bf->bf_u32.br_res.lg_p99_ms),
	         {&bf->bf_l32, &bf->bf_u32}},
	        {bench_ratio(bf->bf_l256.br_res.lg_p99_ms, bf->bf_u256.br_res.lg_p99_ms),
	         {&bf->bf_l256, &bf->bf_u256}},
	        {bench_ratio(bf->bf_d32.br_rate, bf->bf_h32.br_rate), {&bf->bf_d32, &bf->bf_h32}},
	        {bench_ratio(bf->bf_d256.br_rate, bf->bf_h256.br_rate),
	         {&bf->bf_d256, &bf->bf_h256}},
	        {bf->bf_half.br_res.lg_p99_ms, {&bf->bf_half, NULL}},
	        {bf->bf_rss, {NULL, NULL}},
	        {bf->bf_replay_jobs / 842.0, {NULL, NULL}},
	};
	size_t k;

	*measured = 1;
	for (k = 0; k < 2; k++) {
		if (f[i].gf_rows[k] != NULL && f[i].gf_rows[k]->br_res.lg_errors > 0) {
			*measured = 0;
		}
	}
	return f[i].gf_value;
}

static int bench_goal_met(size_t i, double got)
{
	const struct bench_goal *g = &bench_goals[i];

	return strcmp(g->bg_op, ">=") == 0   ? got >= g->bg_want
	       : strcmp(g->bg_op, "<=") == 0 ? got <= g->bg_want
	                                     : got < g->bg_want;
}

/* What the cores can do at the CPU one request took: the ceiling no
 * scheduling can beat on this machine. */
static void bench_cpu_bound(const char *what, const struct bench_row *br)
{
	double us = br->br_cpu_us + br->br_lg_us;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	printf("  %-24s %6.1f us daemon (writer %5.1f) + %5.1f us load generator -> at most "
	       "%6.0f/s; got %6.0f/s\n",
	       what, br->br_cpu_us, br->br_writer_us, br->br_lg_us,
	       bench_ratio((double)cores * 1e6, us), br->br_rate);
}

/* Where the one writer's time per unique callback went (every unique
 * callback waits for its batch, so 1 / rate is its cycle), and what three
 * times the storage ceiling would leave it (issue 24). The COMMIT's time
 * (the WAL write and the sync) is shared by its batch; its write is CPU,
 * counted in both. */
static void bench_writer_cycle(const char *what, const struct bench_row *br, double ceiling)
{
	double cycle = bench_ratio(1e6, br->br_rate);
	double commit = bench_ratio(br->br_commit_ms * 1000.0, br->br_mean_batch);
	double blocked = cycle - br->br_writer_us - br->br_writer_wait_us;

	printf("  %-18s %5.1f us = CPU %5.1f + waiting for a core %4.1f + blocked %5.1f "
	       "(COMMIT %4.2f ms / batch %5.1f = %4.1f us)\n",
	       what, cycle, br->br_writer_us, br->br_writer_wait_us, blocked > 0 ? blocked : 0,
	       br->br_commit_ms, br->br_mean_batch, commit);
	printf("  %-18s 3 x the ceiling (%.0f/s) leaves %4.1f us; the writer's CPU and COMMIT took "
	       "%5.1f\n",
	       "", 3 * ceiling, bench_ratio(1e6, 3 * ceiling), br->br_writer_us + commit);
}

/* The store alone (bench_store_alone) against the storage ceiling around
 * it: with k callbacks in flight a daemon answers no faster than this. */
static void bench_store_floor(const struct bench_row *br, double ceiling)
{
	printf("  the store alone, %3u in flight: %6.0f/s = %4.2f x the ceiling around it "
	       "(writer %4.1f us a claim, batch %5.1f, COMMIT %4.2f ms)\n",
	       br->br_conns, br->br_rate, bench_ratio(br->br_rate, ceiling), br->br_writer_us,
	       br->br_mean_batch, br->br_commit_ms);
}

/* The CPU a rate leaves each request on this machine's cores, against what
 * br's requests took (the daemon's, or the ceiling server's, and the load
 * generator's). */
static void bench_cpu_needed(const char *what, double rate, const struct bench_row *br)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	printf("  %-31s %6.0f/s leaves %5.1f us of %ld cores a request; this run's took %5.1f "
	       "(%5.1f + %4.1f)\n",
	       what, rate, bench_ratio((double)cores * 1e6, rate), cores,
	       br->br_cpu_us + br->br_lg_us, br->br_cpu_us, br->br_lg_us);
}

static void bench_summary(const struct bench_figures *bf)
{
	double s32 = (bf->bf_storage[0] + bf->bf_storage[1]) / 2;
	double s256 = (bf->bf_storage[1] + bf->bf_storage[2]) / 2;
	double best_unique = bf->bf_u32.br_rate > bf->bf_u256.br_rate ? bf->bf_u32.br_rate : bf->bf_u256.br_rate;
	size_t i;

	printf("\nratios, each between phases run next to each other in this run:\n");
	for (i = 0; i < BENCH_GOALS; i++) {
		int measured;
		double got = bench_goal_value(bf, i, &measured);

		printf("  %-58s %9.2f  (target %s %g)  %s\n", bench_goals[i].bg_what, got,
		       bench_goals[i].bg_op, bench_goals[i].bg_want,
		       !measured                ? "not measured: a phase had errors"
		       : bench_goal_met(i, got) ? "met"
		                                : "NOT MET");
	}
	printf("\nCPU per request in this run (daemon + load generator) and the rate %ld cores allow at that cost:\n",
	       sysconf(_SC_NPROCESSORS_ONLN));
	bench_cpu_bound("unique, 32 conns", &bf->bf_u32);
	bench_cpu_bound("unique, 256 conns", &bf->bf_u256);
	bench_cpu_bound("duplicates, 32 conns", &bf->bf_d32);
	bench_cpu_bound("duplicates, 256 conns", &bf->bf_d256);
	printf("  (storage ceiling %.0f, %.0f, %.0f tx/s; best unique rate %.0f/s, half of it "
	       "offered: %.0f/s;\n"
	       "   replay --jobs 1 in this run %.0f/s, so --jobs %d is %.1fx of it)\n",
	       bf->bf_storage[0], bf->bf_storage[1], bf->bf_storage[2], best_unique,
	       best_unique / 2, bf->bf_replay1, BENCH_REPLAY_JOBS,
	       bench_ratio(bf->bf_replay_jobs, bf->bf_replay1));
	printf("\nThe writer's time per unique callback (1 s / rate; each waits for its batch):\n");
	bench_writer_cycle("unique, 32 conns", &bf->bf_u32, s32);
	bench_writer_cycle("unique, 256 conns", &bf->bf_u256, s256);
	printf("\nWhere the floor is (issue 24): what the targets above need of the writer\n"
	       "and of the cores, against this run:\n");
	bench_store_floor(&bf->bf_s32, s32);
	bench_store_floor(&bf->bf_s256, s256);
	bench_cpu_needed("unique at 3 x, 32 conns", 3 * s32, &bf->bf_u32);
	bench_cpu_needed("unique at 3 x, 256 conns", 3 * s256, &bf->bf_u256);
	bench_cpu_needed("unique at 4 x batch_max=1, 32", 4 * bf->bf_one32.br_rate, &bf->bf_u32);
	bench_cpu_needed("unique at 4 x batch_max=1, 256", 4 * bf->bf_one256.br_rate, &bf->bf_u256);
	bench_cpu_needed("duplicates at 0.5 x, 32 conns", bf->bf_h32.br_rate / 2, &bf->bf_d32);
	bench_cpu_needed("duplicates at 0.5 x, 256 conns", bf->bf_h256.br_rate / 2, &bf->bf_d256);
	bench_cpu_needed("(the HTTP ceiling, 32 conns)", bf->bf_h32.br_rate, &bf->bf_h32);
	bench_cpu_needed("(the HTTP ceiling, 256 conns)", bf->bf_h256.br_rate, &bf->bf_h256);
}

/* A line of each round's k-th lowest storage ceiling (of its three). */
static void bench_rounds_storage(const struct bench_figures *bf, unsigned rounds, const char *what,
                                 size_t k)
{
	double v[3];
	unsigned r;

	printf("  %-52s", what);
	for (r = 0; r < rounds; r++) {
		memcpy(v, bf[r].bf_storage, sizeof(v));
		qsort(v, 3, sizeof(v[0]), lg_cmp_double);
		printf(" %8.0f", v[k]);
	}
	printf("\n");
}

/* The targets over several rounds of the same run: each round's figure,
 * then their median, on which a target is judged (the storage and HTTP
 * ceilings under the ratios move by up to twice within an hour on a shared
 * VM, issue 24), and the rounds in which it was met. */
static void bench_rounds_summary(const struct bench_figures *bf, unsigned rounds)
{
	double v[BENCH_ROUNDS_MAX];
	int starred = 0;
	size_t i;
	unsigned r;

	printf("\nthe targets in each of the %u rounds, and their median (each target is judged on "
	       "it):\n",
	       rounds);
	printf("  %-52s", "");
	for (r = 0; r < rounds; r++) {
		printf(" round %-2u", r + 1);
	}
	printf("   median\n");
	for (i = 0; i < BENCH_GOALS; i++) {
		unsigned met = 0;
		unsigned m = 0; /* rounds that measured it */
		double median;

		if (i == BENCH_GOAL_REPLAY) {
			continue;
		}
		printf("  %-52.52s", bench_goals[i].bg_what);
		for (r = 0; r < rounds; r++) {
			int measured;
			double got = bench_goal_value(&bf[r], i, &measured);

			if (!measured) {
				printf(" %7.2f*", got);
				starred = 1;
				continue;
			}
			printf(" %8.2f", got);
			v[m++] = got;
			met += (unsigned)bench_goal_met(i, got);
		}
		if (m == 0) {
			printf(" %8s  (target %s %g)  not measured: a phase had errors\n", "-",
			       bench_goals[i].bg_op, bench_goals[i].bg_want);
			continue;
		}
		qsort(v, m, sizeof(v[0]), lg_cmp_double);
		median = m % 2 == 1 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
		printf(" %8.2f  (target %s %g; met in %u of %u)  %s\n", median,
		       bench_goals[i].bg_op, bench_goals[i].bg_want, met, m,
		       bench_goal_met(i, median) ? "met" : "NOT MET");
	}
	if (starred) {
		printf("  (* a phase of that round had errors: not in the median)\n");
	}
	bench_rounds_storage(bf, rounds, "storage ceiling tx/s, lowest of the round", 0);
	bench_rounds_storage(bf, rounds, "storage ceiling tx/s, highest of the round", 2);
	printf("  %-52s", "HTTP ceiling req/s, 32 conns");
	for (r = 0; r < rounds; r++) {
		printf(" %8.0f", bf[r].bf_h32.br_rate);
	}
	printf("\n");
}

/* ---- duplicates alone ---- */

/* Starts `perf record` on pid into path, call graphs as BENCH_PERF_CALLGRAPH
 * says (perf's --call-graph: fp, the default, or dwarf); returns its pid, or 0. */
static pid_t bench_perf_start(pid_t pid, const char *path)
{
	const char *cg = getenv("BENCH_PERF_CALLGRAPH");
	char p[32];
	pid_t child = fork();

	if (child == 0) {
		snprintf(p, sizeof(p), "%d", (int)pid);
		if (freopen("/dev/null", "w", stderr) == NULL) {
			_exit(127);
		}
		execlp("perf", "perf", "record", "-q", "--call-graph", cg != NULL ? cg : "fp", "-p",
		       p, "-o", path, (char *)NULL);
		_exit(127);
	}
	usleep(300000); /* perf attaches before the first phase */
	return child > 0 ? child : 0;
}

/* bench_hooks --duplicates N [ROUNDS]: the duplicate path alone, for
 * profiling and for a before/after in one run. The daemon under test
 * (IDEMHOOK_BIN) and, if IDEMHOOK_BIN_BEFORE names one, an older binary each
 * store N unique callbacks; then, ROUNDS times at 32 and at 256 connections,
 * the HTTP ceiling, the older daemon's duplicates and the daemon's, next to
 * each other. BENCH_PERF=FILE records the daemon under test over the rounds
 * (`perf report -i FILE`; BENCH_PERF_CALLGRAPH=dwarf for a release build). */
static int bench_duplicates(size_t n, unsigned rounds)
{
	static const unsigned conns[2] = {32, 256};
	const char *before_bin = getenv("IDEMHOOK_BIN_BEFORE");
	const char *perf_path = getenv("BENCH_PERF");
	const char *after_bin = bench_bin;
	struct bench_ceiling bc = {0};
	struct bench_plan pa = {0}, pb = {0};
	struct bench_set sa = {0}, sb = {0};
	struct daemon a = {0}, b = {0};
	struct bench_row br;
	double sum[2][3] = {{0}};
	double cpu[2][3] = {{0}}; /* CPU us per request: the ceiling, before, after */
	pid_t perf = 0;
	unsigned r;
	int i;
	int rc = -1;

	if (bench_daemon_init(&a, "") < 0 || bench_plan_make(&pa, &a, "da", n) < 0 ||
	    bench_daemon_start(&a) < 0) {
		goto out;
	}
	if (before_bin != NULL) {
		bench_bin = before_bin;
		rc = bench_daemon_init(&b, "") < 0 || bench_plan_make(&pb, &b, "db", n) < 0 ||
		                     bench_daemon_start(&b) < 0
		             ? -1
		             : 0;
		bench_bin = after_bin;
		if (rc < 0 ||
		    bench_send(&br, "before: unique", &b, b.dm_port, &pb, 256, 0, &sb) < 0) {
			rc = -1;
			goto out;
		}
		rc = -1;
	}
	/* Started after the daemons, which would otherwise hold its stdin open. */
	if (bench_ceiling_start(&bc) < 0 || bench_send(&br, "after: unique", &a, a.dm_port, &pa, 256, 0, &sa) < 0) {
		goto out;
	}
	if (perf_path != NULL) {
		perf = bench_perf_start(a.dm_pid, perf_path);
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 2; i++) {
			if (bench_ceiling_phase(&br, &bc, &sa, conns[i]) < 0) {
				goto out;
			}
			sum[i][0] += br.br_rate;
			cpu[i][0] += br.br_cpu_us;
			if (before_bin != NULL) {
				if (bench_phase(&br, "before: duplicates", &b, b.dm_port, &sb,
				                conns[i], 0) < 0) {
					goto out;
				}
				sum[i][1] += br.br_rate;
				cpu[i][1] += br.br_cpu_us;
			}
			if (bench_phase(&br, "after: duplicates", &a, a.dm_port, &sa, conns[i], 0) <
			    0) {
				goto out;
			}
			sum[i][2] += br.br_rate;
			cpu[i][2] += br.br_cpu_us;
		}
	}
	printf("\nmeans over %u rounds, duplicates/s over the HTTP ceiling of the same rounds:\n",
	       rounds);
	for (i = 0; i < 2; i++) {
		if (before_bin != NULL) {
			printf("  %3u conns: before %.2f, after %.2f (target >= 0.5); after / "
			       "before %.2f\n",
			       conns[i], sum[i][1] / sum[i][0], sum[i][2] / sum[i][0],
			       sum[i][2] / sum[i][1]);
		} else {
			printf("  %3u conns: %.2f (target >= 0.5)\n", conns[i],
			       sum[i][2] / sum[i][0]);
		}
	}
	printf("means of the server's CPU per request (us; the ceiling's answer, then each "
	       "daemon's duplicate):\n");
	for (i = 0; i < 2; i++) {
		if (before_bin != NULL) {
			printf("  %3u conns: ceiling %.1f, before %.1f, after %.1f\n", conns[i],
			       cpu[i][0] / rounds, cpu[i][1] / rounds, cpu[i][2] / rounds);
		} else {
			printf("  %3u conns: ceiling %.1f, duplicate %.1f\n", conns[i],
			       cpu[i][0] / rounds, cpu[i][2] / rounds);
		}
	}
	rc = 0;
out:
	if (perf > 0) {
		kill(perf, SIGINT);
		waitpid(perf, NULL, 0);
	}
	if (bc.bc_pid > 0) {
		bench_ceiling_stop(&bc);
	}
	daemon_finish(&a);
	daemon_finish(&b);
	bench_set_finish(&sa);
	bench_set_finish(&sb);
	bench_plan_finish(&pa);
	bench_plan_finish(&pb);
	return rc;
}

/* bench_hooks --unique N [ROUNDS]: the unique path alone, for profiling the
 * writer and for a before/after in one run. Each round makes N new orders in
 * the daemon under test (IDEMHOOK_BIN) and, if IDEMHOOK_BIN_BEFORE names one,
 * in an older binary, then sends each daemon its N unique callbacks at 32 and
 * at 256 connections, the older daemon first, with the storage ceiling before
 * each pair; the means of the rates and of the writer thread's CPU per
 * callback follow. BENCH_PERF=FILE records the daemon under test. */
static int bench_unique(size_t n, unsigned rounds)
{
	static const unsigned conns[2] = {32, 256};
	const char *before_bin = getenv("IDEMHOOK_BIN_BEFORE");
	const char *perf_path = getenv("BENCH_PERF");
	const char *after_bin = bench_bin;
	struct bench_plan pl[2] = {{0}}, view;
	struct daemon d[2];
	struct bench_row br;
	double sum[2][2][2] = {{{0}}}; /* [conns][before, after][rate, writer us] */
	double ceil_sum = 0, ceil;
	pid_t perf = 0;
	unsigned r;
	int i, k;
	int rc = -1;

	memset(d, 0, sizeof(d));
	/* The orders of every round go in before the daemons start. */
	for (k = before_bin != NULL ? 0 : 1; k < 2; k++) {
		bench_bin = k == 0 ? before_bin : after_bin;
		rc = bench_daemon_init(&d[k], "") < 0 ||
		                     bench_plan_make(&pl[k], &d[k], k == 0 ? "ub" : "ua",
		                                     n * 2 * rounds) < 0 ||
		                     bench_daemon_start(&d[k]) < 0
		             ? -1
		             : 0;
		bench_bin = after_bin;
		if (rc < 0) {
			goto out;
		}
	}
	rc = -1;
	if (perf_path != NULL) {
		perf = bench_perf_start(d[1].dm_pid, perf_path);
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 2; i++) {
			if (bench_storage_row(&ceil, d[1].dm_dir) < 0) {
				goto out;
			}
			ceil_sum += ceil;
			for (k = before_bin != NULL ? 0 : 1; k < 2; k++) {
				view = pl[k];
				view.bp_n = n;
				view.bp_orders += (r * 2 + (unsigned)i) * n;
				snprintf(view.bp_tag, sizeof(view.bp_tag), "u%d%u%d", k, r, i);
				if (bench_send(&br, k == 0 ? "before: unique" : "after: unique",
				               &d[k], d[k].dm_port, &view, conns[i], 0, NULL) < 0) {
					goto out;
				}
				sum[i][k][0] += br.br_rate;
				sum[i][k][1] += br.br_writer_us;
			}
		}
	}
	printf("\nmeans over %u rounds (storage ceiling %.0f tx/s):\n", rounds,
	       ceil_sum / (2.0 * rounds));
	for (i = 0; i < 2; i++) {
		printf("  %3u conns: after %.0f/s, writer %.1f us/callback", conns[i],
		       sum[i][1][0] / rounds, sum[i][1][1] / rounds);
		if (before_bin != NULL) {
			printf("; before %.0f/s, writer %.1f us; after / before %.2f",
			       sum[i][0][0] / rounds, sum[i][0][1] / rounds,
			       sum[i][1][0] / sum[i][0][0]);
		}
		printf("\n");
	}
	rc = 0;
out:
	if (perf > 0) {
		kill(perf, SIGINT);
		waitpid(perf, NULL, 0);
	}
	daemon_finish(&d[0]);
	daemon_finish(&d[1]);
	bench_plan_finish(&pl[0]);
	bench_plan_finish(&pl[1]);
	return rc;
}

/* The whole benchmark, rounds times: each round as one run (its own
 * daemons, its own large database filled unless BENCH_LARGE_DB keeps one)
 * prints its phases and ratios; with more than one round, every target's
 * figure in each round and their median follow. */
static int bench_whole(size_t n, size_t stored, unsigned rounds)
{
	struct bench_figures bf[BENCH_ROUNDS_MAX];
	unsigned r;

	printf("idemhook webhook benchmark: Stripe callbacks, synchronous=FULL, loopback, "
	       "keep-alive connections\n"
	       "from %d loopback addresses; %zu callbacks per unique phase (%zu with batch_max = "
	       "1);\n"
	       "a large database holding %zu stored callbacks beside the empty one; %u round%s\n\n",
	       BENCH_SOURCES, n, n / 5, stored, rounds, rounds == 1 ? "" : "s");
	for (r = 0; r < rounds; r++) {
		memset(&bf[r], 0, sizeof(bf[r]));
		bf[r].bf_stored = stored;
		if (rounds > 1) {
			printf("%sround %u of %u\n", r > 0 ? "\n" : "", r + 1, rounds);
		}
		bench_print_header();
		if (bench_all(&bf[r], n) < 0) {
			fprintf(stderr, "bench: a phase failed\n");
			return -1;
		}
		printf("%-36s peak RSS %.1f MiB\n\n", "default config daemon", bf[r].bf_rss);
		if (r == 0 && bench_replay(&bf[r]) < 0) {
			/* An idemhook from before --jobs: the rest of the figures stand. */
			fprintf(stderr, "bench: the replay failed\n");
		}
		bf[r].bf_replay1 = bf[0].bf_replay1;
		bf[r].bf_replay_jobs = bf[0].bf_replay_jobs;
		bench_summary(&bf[r]);
	}
	if (rounds > 1) {
		bench_rounds_summary(bf, rounds);
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
	size_t stored = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000000;
	unsigned long rounds = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
	char *slash;
	char self[1024];
	ssize_t len;
	int dups = argc > 1 && strcmp(argv[1], "--duplicates") == 0;
	int uniq = argc > 1 && strcmp(argv[1], "--unique") == 0;

	if (uniq) {
		dups = 1; /* the same arguments */
	}
	if (dups) {
		n = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000;
		stored = argc > 3 ? strtoul(argv[3], NULL, 10) : 3; /* rounds */
	}
	bench_bin = getenv("IDEMHOOK_BIN");
	if (bench_bin == NULL || n < 1000 ||
	    (!dups && (stored < 1000 || rounds < 1 || rounds > BENCH_ROUNDS_MAX)) ||
	    (dups && (stored < 1 || stored > 100))) {
		fprintf(stderr,
		        "usage: IDEMHOOK_BIN=... bench_hooks [CALLBACKS >= 1000 [STORED >= 1000 "
		        "[ROUNDS 1-%d]]]\n"
		        "       IDEMHOOK_BIN=... [IDEMHOOK_BIN_BEFORE=...] [BENCH_PERF=FILE] "
		        "bench_hooks "
		        "--duplicates|--unique [CALLBACKS [ROUNDS]]\n",
		        BENCH_ROUNDS_MAX);
		return 64;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0) {
		return 1;
	}
	self[len] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	bench_dir = self;
	setenv("BENCH_STRIPE_SECRET", BENCH_SECRET, 1);
	signal(SIGPIPE, SIG_IGN);
	srand((unsigned)time(NULL));
	if (uniq) {
		printf("idemhook unique callbacks: Stripe callbacks, synchronous=FULL, loopback, "
		       "keep-alive connections from %d addresses;\n"
		       "%zu unique callbacks per phase, %zu rounds; orders paid %s%s\n\n",
		       BENCH_SOURCES, n, stored,
		       getenv("BENCH_PAY_WINDOW") != NULL ? "shuffled within runs of "
		                                          : "in the order they were made",
		       getenv("BENCH_PAY_WINDOW") != NULL ? getenv("BENCH_PAY_WINDOW") : "");
		bench_print_header();
		return bench_unique(n, (unsigned)stored) < 0 ? 1 : 0;
	}
	if (dups) {
		printf("idemhook duplicates: Stripe callbacks, loopback, keep-alive connections "
		       "from %d addresses;\n"
		       "%zu duplicates per phase, %zu rounds\n\n",
		       BENCH_SOURCES, n, stored);
		bench_print_header();
		return bench_duplicates(n, (unsigned)stored) < 0 ? 1 : 0;
	}
	return bench_whole(n, stored, (unsigned)rounds) < 0 ? 1 : 0;
}
