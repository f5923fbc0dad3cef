/* bench_pg.c: the webhook benchmark on PostgreSQL beside SQLite, in one run
 * on one machine: unique and duplicate Stripe callbacks per second with one
 * receiver on SQLite, and one, two and three receivers on one PostgreSQL
 * database (a local throwaway server, fsync and synchronous_commit on),
 * also with 1 ms added each way between receivers and database (a delaying
 * proxy, delayproxy.c); and where the time goes: statements and
 * transactions per callback, counted by pg_stat_statements (track = top:
 * the statements a receiver sends, not those PostgreSQL runs for foreign
 * keys), and the writers' round trips per batch, counted by the receivers
 * (idemhook_store_round_trips_total). The same pre-signed callbacks, the
 * same load generator (loadgen.c) as bench_hooks. IDEMHOOK_BENCH_PG_AB=R runs
 * only the one-receiver phases of IDEMHOOK_BIN_BASE and of this tree in
 * turn, R times; IDEMHOOK_BENCH_PG_WRITERS=N gives this tree's receivers
 * [store] pg_writers = N. */
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "delayproxy.h"
#include "env.h"
#include "harness.h"
#include "loadgen.h"
#include "log.h"
#include "orders.h"
#include "pgserver.h"
#include "store.h"

#define BENCH_PG_SECRET "whsec_bench_secret"
#define BENCH_PG_SOURCES 8 /* loopback source addresses, as in bench_hooks */
#define BENCH_PG_CONNS 32  /* in all, spread over the receivers */
#define BENCH_PG_RECEIVERS_MAX 3
#define BENCH_PG_TOP 8         /* statements shown per phase */
#define BENCH_PG_DELAY_US 1000 /* added each way in the delayed phases */

static const char *bench_pg_bin;
static const char *bench_pg_which = "";  /* "before: " for IDEMHOOK_BIN_BASE's phases */
static struct pgserver *bench_pg_server; /* the harness's shared one */

/* ---- orders and callbacks ---- */

struct bench_pg_orders {
	size_t bo_n;
	char (*bo_ids)[ORDERS_ID_LEN + 1];
};

static int bench_pg_insert_orders(struct store_tx *tx, void *arg)
{
	const struct bench_pg_orders *bo = arg;
	size_t i;

	for (i = 0; i < bo->bo_n; i++) {
		struct store_value v[3] = {store_text(bo->bo_ids[i]), store_int(store_tx_now(tx)),
		                           store_int(store_tx_now(tx))};

		if (store_exec(tx,
		               "INSERT INTO orders (id, amount, currency, status, created_at, "
		               "updated_at) "
		               "VALUES (?, 1000, 'USD', 'pending', ?, ?)",
		               v, 3, NULL) < 0) {
			return -1;
		}
	}
	return 0;
}

/* Runs `bench_pg_bin -c config migrate`: 0 when it exited 0. */
static int bench_pg_migrate(const char *config)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		/* its "migrated from ..." line is not the benchmark's output */
		if (freopen("/dev/null", "w", stdout) == NULL) {
			_exit(127);
		}
		execl(bench_pg_bin, "idemhook", "-c", config, "migrate", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid) {
		return -1;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The orders of bo inserted into PostgreSQL database db with psql, 500 to
 * a statement (an argument of psql stays under the kernel's 128 KiB). */
static int bench_pg_orders_psql(const struct bench_pg_orders *bo, const char *db)
{
	int64_t now = hn_now_ms();
	size_t i = 0;

	while (i < bo->bo_n) {
		struct buf sql;
		size_t end = i + 500 < bo->bo_n ? i + 500 : bo->bo_n;
		char *text;
		int rc;

		buf_init(&sql, 0);
		buf_puts(&sql, "INSERT INTO orders (id, amount, currency, status, created_at, "
		               "updated_at) VALUES ");
		for (; i < end; i++) {
			buf_printf(&sql,
			           "%s('%s', 1000, 'USD', 'pending', %" PRId64 ", %" PRId64 ")",
			           i % 500 != 0 ? ", " : "", bo->bo_ids[i], now, now);
		}
		text = buf_take(&sql, NULL);
		rc = text != NULL ? pgserver_psql(bench_pg_server, db, text, NULL) : -1;
		free(text);
		if (rc < 0) {
			return -1;
		}
	}
	return 0;
}

/* n new orders in the database at location (migrated on the way), through
 * the store's own API so both backends get the same rows. For
 * IDEMHOOK_BIN_BASE's phases (config and db given: PostgreSQL), that
 * binary migrates the database to its own schema, which may be older than
 * this program's, and the rows go in with psql. */
static int bench_pg_orders_make(struct bench_pg_orders *bo, const char *location, size_t n,
                                const char *config, const char *db)
{
	struct store_options so;
	struct store *st;
	size_t i;
	int rc;

	bo->bo_n = n;
	bo->bo_ids = calloc(n, sizeof(*bo->bo_ids));
	if (bo->bo_ids == NULL) {
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (orders_new_id(env_clock_ms(), bo->bo_ids[i]) < 0) {
			return -1;
		}
	}
	if (config != NULL && db != NULL) {
		return bench_pg_migrate(config) < 0 ? -1 : bench_pg_orders_psql(bo, db);
	}
	memset(&so, 0, sizeof(so));
	if (store_location_parse(location, &so) < 0) {
		return -1;
	}
	st = store_create(&so);
	if (st == NULL) {
		return -1;
	}
	rc = store_write(st, hn_now_ms(), bench_pg_insert_orders, bo);
	store_destroy(st);
	return rc < 0 ? -1 : 0;
}

/* Signed requests paying the orders, dealt round robin into k sets. */
static int bench_pg_sign(const struct bench_pg_orders *bo, const char *tag, size_t k,
                         struct lg_request **ret_sets, size_t *ret_counts)
{
	int64_t now = hn_now_s();
	size_t i;

	for (i = 0; i < k; i++) {
		ret_sets[i] = calloc(bo->bo_n / k + 1, sizeof(**ret_sets));
		ret_counts[i] = 0;
		if (ret_sets[i] == NULL) {
			return -1;
		}
	}
	for (i = 0; i < bo->bo_n; i++) {
		struct lg_request *r = &ret_sets[i % k][ret_counts[i % k]++];
		char id[64];
		char obj[512];
		char *body;
		char *sig;
		struct buf b;

		snprintf(id, sizeof(id), "evt_%s_%08zu%08x", tag, i, (unsigned)rand());
		snprintf(obj, sizeof(obj),
		         "{\"id\":\"pi_%s_%zu\",\"object\":\"payment_intent\",\"amount\":1000,"
		         "\"amount_received\":1000,\"currency\":\"usd\",\"status\":\"succeeded\","
		         "\"metadata\":{\"order_id\":\"%s\"}}",
		         tag, i, bo->bo_ids[i]);
		body = hn_stripe_event(id, "payment_intent.succeeded", obj);
		sig = body != NULL ? hn_stripe_signature(BENCH_PG_SECRET, now, body, strlen(body))
		                   : NULL;
		if (sig == NULL) {
			free(body);
			return -1;
		}
		buf_init(&b, 0);
		buf_printf(&b,
		           "POST /hooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		           "Content-Type: application/json\r\nStripe-Signature: %s\r\n"
		           "Content-Length: %zu\r\n\r\n%s",
		           sig, strlen(body), body);
		r->lr_data = buf_take(&b, &r->lr_len);
		buf_finish(&b);
		free(sig);
		free(body);
		if (r->lr_data == NULL) {
			return -1;
		}
	}
	return 0;
}

/* ---- receivers ---- */

/* Starts idemhook serve as a user would (info-level log to a file). */
static int bench_pg_start(struct daemon *d)
{
	char path[700];
	FILE *f;
	int i;

	if (snprintf(path, sizeof(path), "%s/port", d->dm_dir) >= (int)sizeof(path)) {
		return -1;
	}
	unlink(path);
	d->dm_pid = fork();
	if (d->dm_pid < 0) {
		return -1;
	}
	if (d->dm_pid == 0) {
		if (freopen(d->dm_log, "a", stderr) == NULL) {
			_exit(127);
		}
		execl(bench_pg_bin, "idemhook", "-c", d->dm_config, "serve", (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 3000; i++) {
		f = fopen(path, "r");
		if (f != NULL) {
			unsigned port = 0;

			if (fscanf(f, "%u", &port) == 1 && port != 0) {
				d->dm_port = port;
			}
			fclose(f);
			if (d->dm_port != 0) {
				/* The admin listener is up before the public one. */
				f = snprintf(path, sizeof(path), "%s/admin_port", d->dm_dir) <
				                    (int)sizeof(path)
				            ? fopen(path, "r")
				            : NULL;
				if (f != NULL && fscanf(f, "%u", &port) == 1) {
					d->dm_admin_port = port;
					snprintf(d->dm_admin_base, sizeof(d->dm_admin_base),
					         "http://127.0.0.1:%u", port);
				}
				if (f != NULL) {
					fclose(f);
				}
				return 0;
			}
		}
		if (waitpid(d->dm_pid, NULL, WNOHANG) == d->dm_pid) {
			break;
		}
		usleep(10000);
	}
	fprintf(stderr, "bench: the receiver did not start; see %s\n", d->dm_log);
	return -1;
}

/* ---- CPU time ---- */

/* A process's CPU time (user + system, all its threads) in seconds, and
 * its parent's pid in *ret_ppid (may be NULL); 0 when it is gone. */
static double bench_pg_proc_cpu_s(pid_t pid, pid_t *ret_ppid)
{
	char path[64];
	char buf[1024];
	unsigned long ut = 0;
	unsigned long st = 0;
	int ppid = 0;
	char *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL) {
		return 0;
	}
	p = fgets(buf, sizeof(buf), f) != NULL ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* After ") ": state, ppid, then fields 5..13; utime is 14, stime 15. */
	if (p == NULL || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ppid,
	                        &ut, &st) != 3) {
		return 0;
	}
	if (ret_ppid != NULL) {
		*ret_ppid = ppid;
	}
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The PostgreSQL server's CPU time: the postmaster and its children
 * (backends, WAL writer, checkpointer), those alive now. */
static double bench_pg_server_cpu_s(void)
{
	pid_t pm = pgserver_postmaster_pid(bench_pg_server);
	double total = bench_pg_proc_cpu_s(pm, NULL);
	struct dirent *de;
	DIR *dir = opendir("/proc");

	while (dir != NULL && (de = readdir(dir)) != NULL) {
		pid_t ppid = 0;
		double s;

		if (de->d_name[0] < '1' || de->d_name[0] > '9') {
			continue;
		}
		s = bench_pg_proc_cpu_s((pid_t)strtol(de->d_name, NULL, 10), &ppid);
		if (ppid == pm) {
			total += s;
		}
	}
	if (dir != NULL) {
		closedir(dir);
	}
	return total;
}

/* ---- the receivers' own counts (/metrics) ---- */

struct bench_pg_store {
	double bs_round_trips; /* the writers' round trips to the server */
	double bs_batches;
	double bs_units;
};

static double bench_pg_metric(const char *text, const char *name)
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

/* The sums over k receivers. Returns 0 or -1. */
static int bench_pg_scrape(const struct daemon *r, size_t k, struct bench_pg_store *ret)
{
	char url[128];
	struct hres res;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	for (i = 0; i < k; i++) {
		snprintf(url, sizeof(url), "%s/metrics", r[i].dm_admin_base);
		if (hn_http("GET", url, NULL, NULL, 0, &res) < 0 || res.hs_status != 200) {
			hres_finish(&res);
			return -1;
		}
		ret->bs_round_trips +=
		        bench_pg_metric(res.hs_body, "idemhook_store_round_trips_total");
		ret->bs_batches += bench_pg_metric(res.hs_body, "idemhook_store_batch_size_count");
		ret->bs_units += bench_pg_metric(res.hs_body, "idemhook_store_batch_size_sum");
		hres_finish(&res);
	}
	return 0;
}

/* ---- PostgreSQL's own counts ---- */

/* From pg_stat_statements, which counts as each statement ends (the
 * cumulative statistics of pg_stat_database reach the view only when an
 * idle backend flushes them, seconds later). */
struct bench_pg_counts {
	double bc_statements; /* statements run, each one round trip */
	double bc_xacts;      /* transaction blocks opened (BEGIN ...): batches of the writer */
};

static int bench_pg_counts(const char *db, struct bench_pg_counts *ret)
{
	char sql[512];
	char *out = NULL;
	int rc;

	snprintf(sql, sizeof(sql),
	         "SELECT coalesce(sum(s.calls), 0) || ' ' || coalesce(sum(s.calls) FILTER (WHERE "
	         "s.query ILIKE "
	         "'begin%%'), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
	         "WHERE d.datname = "
	         "'%s'",
	         db);
	rc = pgserver_psql(bench_pg_server, NULL, sql, &out);
	if (rc < 0 || out == NULL ||
	    sscanf(out, "%lf %lf", &ret->bc_statements, &ret->bc_xacts) != 2) {
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

static void bench_pg_reset(void)
{
	/* The top list is this phase's alone. */
	pgserver_psql(bench_pg_server, NULL, "SELECT pg_stat_statements_reset()", NULL);
}

/* The statements of db that took the most time in this phase. */
static void bench_pg_top(const char *db, size_t callbacks)
{
	char sql[1024];
	char *out = NULL;
	char *line;

	snprintf(sql, sizeof(sql),
	         "SELECT round(s.calls::numeric / %zu, 2) || ' | ' || "
	         "round(s.mean_exec_time::numeric * 1000, 1) || "
	         "' | ' || round((100 * s.total_exec_time / nullif(sum(s.total_exec_time) OVER (), "
	         "0))::numeric, 1) "
	         "|| ' | ' || left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90) FROM "
	         "pg_stat_statements s JOIN "
	         "pg_database d ON d.oid = s.dbid WHERE d.datname = '%s' ORDER BY "
	         "s.total_exec_time DESC LIMIT %d",
	         callbacks, db, BENCH_PG_TOP);
	if (pgserver_psql(bench_pg_server, NULL, sql, &out) < 0 || out == NULL) {
		free(out);
		return;
	}
	printf("    calls per callback | mean us | %% of server time | statement\n");
	line = out;
	while (*line != '\0') {
		char *eol = strchr(line, '\n');

		if (eol != NULL) {
			*eol = '\0';
		}
		printf("    %s\n", line);
		if (eol == NULL) {
			break;
		}
		line = eol + 1;
	}
	free(out);
}

/* ---- phases ---- */

struct bench_pg_load {
	struct lg_options bl_opt;
	const struct lg_request *bl_reqs;
	size_t bl_n;
	struct lg_result bl_res;
	int bl_rc;
};

static void *bench_pg_load_thread(void *arg)
{
	struct bench_pg_load *bl = arg;

	bl->bl_rc = lg_run(&bl->bl_opt, bl->bl_reqs, bl->bl_n, &bl->bl_res);
	return NULL;
}

struct bench_pg_row {
	char br_label[48];
	size_t br_receivers;
	size_t br_n;
	size_t br_errors;
	double br_rate;
	double br_p50_ms;
	double br_p99_ms;
	double br_statements; /* per callback, -1 for SQLite */
	double br_xacts;
	double br_batch;       /* mean units per batch of the writers */
	double br_rt_batch;    /* the writers' round trips per batch */
	double br_rt_callback; /* and per callback */
	double br_rx_us;       /* the receivers' CPU per callback */
	double br_pg_us;       /* the server's CPU per callback */
	double br_lg_us;       /* this program's (load generator, proxy) per callback */
};

/* Sends every set to its receiver at once (the connections split between
 * them) and fills br. */
static int bench_pg_phase(struct bench_pg_row *br, const char *label, struct daemon *r, size_t k,
                          struct lg_request **sets, const size_t *counts, const char *db)
{
	struct bench_pg_load load[BENCH_PG_RECEIVERS_MAX];
	pthread_t threads[BENCH_PG_RECEIVERS_MAX];
	struct bench_pg_counts before = {0, 0};
	struct bench_pg_counts after = {0, 0};
	struct bench_pg_store s0;
	struct bench_pg_store s1;
	double seconds = 0;
	double rx0 = 0;
	double rx1 = 0;
	double pg0 = 0;
	double lg0;
	size_t i;

	memset(br, 0, sizeof(*br));
	snprintf(br->br_label, sizeof(br->br_label), "%s", label);
	br->br_receivers = k;
	if (db != NULL) {
		bench_pg_reset();
		if (bench_pg_counts(db, &before) < 0) {
			return -1;
		}
	}
	if (bench_pg_scrape(r, k, &s0) < 0) {
		return -1;
	}
	for (i = 0; i < k; i++) {
		rx0 += bench_pg_proc_cpu_s(r[i].dm_pid, NULL);
	}
	pg0 = db != NULL ? bench_pg_server_cpu_s() : 0;
	lg0 = bench_pg_proc_cpu_s(getpid(), NULL);
	for (i = 0; i < k; i++) {
		memset(&load[i], 0, sizeof(load[i]));
		load[i].bl_opt.lo_port = r[i].dm_port;
		load[i].bl_opt.lo_conns = BENCH_PG_CONNS / (unsigned)k;
		load[i].bl_opt.lo_sources = BENCH_PG_SOURCES;
		load[i].bl_reqs = sets[i];
		load[i].bl_n = counts[i];
		pthread_create(&threads[i], NULL, bench_pg_load_thread, &load[i]);
	}
	for (i = 0; i < k; i++) {
		pthread_join(threads[i], NULL);
		if (load[i].bl_rc < 0) {
			return -1;
		}
		br->br_n += load[i].bl_res.lg_n;
		br->br_errors += load[i].bl_res.lg_errors;
		if (load[i].bl_res.lg_seconds > seconds) {
			seconds = load[i].bl_res.lg_seconds;
		}
		/* the slowest receiver's percentiles: what a provider meets */
		if (load[i].bl_res.lg_p50_ms > br->br_p50_ms) {
			br->br_p50_ms = load[i].bl_res.lg_p50_ms;
		}
		if (load[i].bl_res.lg_p99_ms > br->br_p99_ms) {
			br->br_p99_ms = load[i].bl_res.lg_p99_ms;
		}
	}
	br->br_rate = seconds > 0 ? (double)br->br_n / seconds : 0;
	br->br_statements = -1;
	br->br_xacts = -1;
	for (i = 0; i < k; i++) {
		rx1 += bench_pg_proc_cpu_s(r[i].dm_pid, NULL);
	}
	if (br->br_n > 0) {
		br->br_rx_us = (rx1 - rx0) * 1e6 / (double)br->br_n;
		br->br_lg_us = (bench_pg_proc_cpu_s(getpid(), NULL) - lg0) * 1e6 / (double)br->br_n;
		br->br_pg_us =
		        db != NULL ? (bench_pg_server_cpu_s() - pg0) * 1e6 / (double)br->br_n : 0;
	}
	if (bench_pg_scrape(r, k, &s1) < 0) {
		return -1;
	}
	if (s1.bs_batches > s0.bs_batches) {
		br->br_batch = (s1.bs_units - s0.bs_units) / (s1.bs_batches - s0.bs_batches);
		br->br_rt_batch =
		        (s1.bs_round_trips - s0.bs_round_trips) / (s1.bs_batches - s0.bs_batches);
	}
	if (br->br_n > 0) {
		br->br_rt_callback = (s1.bs_round_trips - s0.bs_round_trips) / (double)br->br_n;
	}
	if (db != NULL) {
		if (bench_pg_counts(db, &after) == 0 && br->br_n > 0) {
			br->br_statements =
			        (after.bc_statements - before.bc_statements) / (double)br->br_n;
			br->br_xacts = (after.bc_xacts - before.bc_xacts) / (double)br->br_n;
		}
	}
	printf("%-34s %9zu %7zu %9.0f %8.2f %8.2f %6zu %6.1f %6.0f %6.0f", br->br_label,
	       br->br_receivers, br->br_n, br->br_rate, br->br_p50_ms, br->br_p99_ms, br->br_errors,
	       br->br_batch, br->br_rx_us, br->br_pg_us);
	if (br->br_statements >= 0) {
		printf(" %8.2f %8.2f %11.2f %10.3f", br->br_rt_batch, br->br_rt_callback,
		       br->br_statements, br->br_xacts);
	}
	printf("\n");
	if (db != NULL) {
		bench_pg_top(db, br->br_n);
	}
	fflush(stdout);
	return 0;
}

static const char bench_pg_ini_base[] =
        "[provider stripe]\ntype = stripe\nsecret = " BENCH_PG_SECRET "\n";

/* This tree's receivers: the base's, and with IDEMHOOK_BENCH_PG_WRITERS
 * set, [store] pg_writers (docs/configuration.md) for a run that compares
 * writer counts. */
static char bench_pg_ini_this[256];

#define bench_pg_ini (bench_pg_which[0] != '\0' ? bench_pg_ini_base : bench_pg_ini_this)

/* Points the receiver's conninfo at the delaying proxy on 127.0.0.1:port
 * (the proxy forwards to the server's unix socket). Returns 0 or -1. */
static int bench_pg_via_proxy(struct daemon *d, unsigned port)
{
	char *ini = hn_read_file(d->dm_config);
	char from[600];
	char to[64];
	char *at;
	struct buf b;
	int rc = -1;

	snprintf(from, sizeof(from), "host=%s port=%u ", bench_pg_server->pg_dir,
	         bench_pg_server->pg_port);
	snprintf(to, sizeof(to), "host=127.0.0.1 port=%u ", port);
	at = ini != NULL ? strstr(ini, from) : NULL;
	if (at != NULL) {
		FILE *f;

		buf_init(&b, 0);
		buf_printf(&b, "%.*s%s%s", (int)(at - ini), ini, to, at + strlen(from));
		f = fopen(d->dm_config, "w");
		if (f != NULL) {
			rc = fputs(b.buf_data, f) < 0 ? -1 : 0;
			rc = fclose(f) != 0 ? -1 : rc;
		}
		buf_finish(&b);
	}
	free(ini);
	return rc;
}

/* The paid orders in the database at location; for IDEMHOOK_BIN_BASE's
 * phases (PostgreSQL database db, maybe at an older schema than this
 * program's store opens) counted with psql. -1 on error. */
static int64_t bench_pg_paid(const char *location, const char *db)
{
	char *out = NULL;
	int64_t paid;

	if (bench_pg_which[0] == '\0' || db == NULL) {
		return hn_db_int(location, "SELECT COUNT(*) FROM orders WHERE status = 'paid'");
	}
	if (pgserver_psql(bench_pg_server, db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'",
	                  &out) < 0 ||
	    out == NULL) {
		free(out);
		return -1;
	}
	paid = strtoll(out, NULL, 10);
	free(out);
	return paid;
}

/* One configuration: k receivers on SQLite (k = 1) or on one PostgreSQL
 * database (through the delaying proxy on proxy_port unless 0); n unique
 * callbacks, then the same n again as duplicates; the unique phase's row
 * in *ret_unique, the duplicates' rate in *ret_dup. */
static int bench_pg_config(const char *backend, size_t k, size_t n, unsigned proxy_port,
                           struct bench_pg_row *ret_unique, double *ret_dup)
{
	struct daemon r[BENCH_PG_RECEIVERS_MAX];
	struct lg_request *sets[BENCH_PG_RECEIVERS_MAX] = {NULL};
	size_t counts[BENCH_PG_RECEIVERS_MAX] = {0};
	struct bench_pg_orders bo = {0, NULL};
	struct bench_pg_row row;
	const char *db = NULL;
	const char *via = proxy_port != 0 ? " +1ms each way" : "";
	char label[64];
	char tag[16];
	size_t i;
	size_t j;
	int rc = -1;
	int pg = strcmp(backend, "postgresql") == 0;

	memset(r, 0, sizeof(r));
	if (pg) {
		if (daemon_init_pg(&r[0], bench_pg_ini) < 0) {
			return -1;
		}
		for (i = 1; i < k; i++) {
			if (daemon_init_beside(&r[i], &r[0], bench_pg_ini) < 0) {
				goto out;
			}
		}
		for (i = 0; i < k && proxy_port != 0; i++) {
			if (bench_pg_via_proxy(&r[i], proxy_port) < 0) {
				fprintf(stderr, "bench: cannot point the receiver at the proxy\n");
				goto out;
			}
		}
		db = r[0].dm_pg_db;
	} else if (daemon_init(&r[0], bench_pg_ini) < 0) {
		return -1;
	}
	snprintf(tag, sizeof(tag), "%c%zu%c%c", backend[0], k, proxy_port != 0 ? 'd' : 'n',
	         bench_pg_which[0] != '\0' ? 'b' : 'a');
	if (bench_pg_orders_make(&bo, r[0].dm_db, n,
	                         bench_pg_which[0] != '\0' ? r[0].dm_config : NULL, db) < 0 ||
	    bench_pg_sign(&bo, tag, k, sets, counts) < 0) {
		fprintf(stderr, "bench: cannot make the orders and callbacks\n");
		goto out;
	}
	for (i = 0; i < k; i++) {
		if (bench_pg_start(&r[i]) < 0) {
			goto out;
		}
	}
	snprintf(label, sizeof(label), "%s%s%s, unique", bench_pg_which, backend, via);
	if (bench_pg_phase(&row, label, r, k, sets, counts, db) < 0) {
		goto out;
	}
	*ret_unique = row;
	if (bench_pg_paid(r[0].dm_db, db) != (int64_t)n || row.br_errors) {
		fprintf(stderr,
		        "bench: %s with %zu receivers: not every callback was applied once\n",
		        backend, k);
		goto out;
	}
	snprintf(label, sizeof(label), "%s%s%s, duplicates", bench_pg_which, backend, via);
	if (bench_pg_phase(&row, label, r, k, sets, counts, db) < 0) {
		goto out;
	}
	*ret_dup = row.br_rate;
	rc = 0;
out:
	for (i = 0; i < k; i++) {
		daemon_finish(&r[i]);
		for (j = 0; j < counts[i]; j++) {
			free(sets[i][j].lr_data);
		}
		free(sets[i]);
	}
	free(bo.bo_ids);
	return rc;
}

static void bench_pg_target(const char *what, double got, double want)
{
	printf("  %-58s %5.2f  (target >= %.2f: %s)\n", what, got, want,
	       got >= want ? "met" : "not met");
}

/* The configurations, in the order they run. */
enum {
	BENCH_PG_SQLITE = 0,
	BENCH_PG_ONE,
	BENCH_PG_TWO,
	BENCH_PG_THREE,
	BENCH_PG_ONE_DELAYED,
	BENCH_PG_THREE_DELAYED,
	BENCH_PG_CONFIGS,
};

/* CPU per callback, all of it: receivers, server, and this program. */
static double bench_pg_cpu_us(const struct bench_pg_row *br)
{
	return br->br_rx_us + br->br_pg_us + br->br_lg_us;
}

/* What the cores allow at the CPU a unique callback took in each phase
 * without delay (those with it wait on the network, not the CPU), and the
 * CPU per callback the two throughput targets would need here: a target
 * above what the cores allow cannot be met on this machine by waiting less,
 * only by spending less (docs/benchmarks.md, "Where the floor is"). */
static void bench_pg_cpu_bound(const struct bench_pg_row *urow)
{
	static const int phases[] = {BENCH_PG_SQLITE, BENCH_PG_ONE, BENCH_PG_TWO, BENCH_PG_THREE};
	double cores = (double)sysconf(_SC_NPROCESSORS_ONLN);
	double half_sqlite = 0.5 * urow[BENCH_PG_SQLITE].br_rate;
	const struct bench_pg_row *one = &urow[BENCH_PG_ONE];
	size_t i;

	printf("\nCPU per unique callback (user + system: receivers + PostgreSQL server + this "
	       "program) and what %.0f cores allow at it:\n",
	       cores);
	for (i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		const struct bench_pg_row *br = &urow[phases[i]];
		double us = bench_pg_cpu_us(br);

		printf("  %-24s %zu receiver%s %5.0f + %5.0f + %4.0f = %5.0f us", br->br_label,
		       br->br_receivers, br->br_receivers > 1 ? "s" : " ", br->br_rx_us,
		       br->br_pg_us, br->br_lg_us, us);
		printf(" -> at most %6.0f/s; got %6.0f/s\n", us > 0 ? cores * 1e6 / us : 0,
		       br->br_rate);
	}
	printf("  PostgreSQL 1 receiver at 0.50 x SQLite (%.0f/s) needs at most %.0f us per "
	       "callback in all; this run's: %.0f us\n",
	       half_sqlite, half_sqlite > 0 ? cores * 1e6 / half_sqlite : 0, bench_pg_cpu_us(one));
	printf("  PostgreSQL 3 receivers at 1.50 x 1 receiver (%.0f/s) need at most %.0f us per "
	       "callback in all; this run's: %.0f us\n",
	       1.5 * one->br_rate, one->br_rate > 0 ? cores * 1e6 / (1.5 * one->br_rate) : 0,
	       bench_pg_cpu_us(&urow[BENCH_PG_THREE]));
}

/* IDEMHOOK_BENCH_PG_AB=R: only the one-receiver phases, without and with
 * the delay, of IDEMHOOK_BIN_BASE and of this tree in turn, R times, so
 * that load from other work on the machine falls on both alike; then the
 * medians of the pairs' ratios. Returns main's exit status. */
static int bench_pg_ab(const char *base, size_t n, unsigned proxy, int rounds)
{
	const char *bin = bench_pg_bin;
	struct bench_pg_row row[2];
	double ratio[2][64];
	double u[2][2];
	double d;
	int r;
	int k;
	int i;
	int j;

	rounds = rounds < 1 ? 1 : rounds > 64 ? 64 : rounds;
	for (r = 0; r < rounds; r++) {
		for (k = 0; k < 2; k++) {
			bench_pg_bin = k == 0 ? base : bin;
			bench_pg_which = k == 0 ? "before: " : "";
			if (bench_pg_config("postgresql", 1, n, 0, &row[0], &d) < 0 ||
			    bench_pg_config("postgresql", 1, n, proxy, &row[1], &d) < 0) {
				fprintf(stderr, "bench: a phase failed\n");
				return 1;
			}
			u[k][0] = row[0].br_rate;
			u[k][1] = row[1].br_rate;
		}
		ratio[0][r] = u[1][0] / u[0][0];
		ratio[1][r] = u[1][1] / u[0][1];
		printf("round %d, unique callbacks/s, before -> after: no delay %.0f -> %.0f "
		       "(%.2f), "
		       "+1ms each way %.0f -> %.0f (%.2f)\n",
		       r + 1, u[0][0], u[1][0], ratio[0][r], u[0][1], u[1][1], ratio[1][r]);
		fflush(stdout);
	}
	for (k = 0; k < 2; k++) {
		for (i = 1; i < rounds; i++) {
			for (j = i; j > 0 && ratio[k][j - 1] > ratio[k][j]; j--) {
				d = ratio[k][j];
				ratio[k][j] = ratio[k][j - 1];
				ratio[k][j - 1] = d;
			}
		}
	}
	printf("median after / before over %d rounds: no delay %.2f, +1ms each way %.2f\n", rounds,
	       ratio[0][rounds / 2], ratio[1][rounds / 2]);
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 5000;
	struct bench_pg_row urow[BENCH_PG_CONFIGS];
	double dup[BENCH_PG_CONFIGS] = {0};
	/* Another build (the commit before a change) for a before/after in
	 * the same run: its one receiver, without and with the delay. */
	const char *base = getenv("IDEMHOOK_BIN_BASE");
	struct bench_pg_row base_row[2];
	double base_dup[2] = {0, 0};
	char *version = NULL;
	char sock[700];
	unsigned proxy = 0;
	int missing;

	bench_pg_bin = getenv("IDEMHOOK_BIN");
	if (getenv("IDEMHOOK_BENCH_PG_WRITERS") != NULL) {
		snprintf(bench_pg_ini_this, sizeof(bench_pg_ini_this),
		         "%s[store]\npg_writers = %s\n", bench_pg_ini_base,
		         getenv("IDEMHOOK_BENCH_PG_WRITERS"));
		printf("this tree's receivers: [store] pg_writers = %s\n",
		       getenv("IDEMHOOK_BENCH_PG_WRITERS"));
	} else {
		snprintf(bench_pg_ini_this, sizeof(bench_pg_ini_this), "%s", bench_pg_ini_base);
	}
	if (bench_pg_bin == NULL || n < 300) {
		fprintf(stderr, "usage: IDEMHOOK_BIN=... bench_pg [CALLBACKS >= 300]\n");
		return 64;
	}
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_LEVEL_WARNING); /* the migrations the order inserts apply */
	srand((unsigned)time(NULL));
	/* daemon_init gives SQLite, daemon_init_pg the harness's shared
	 * throwaway server, whatever the environment says. */
	setenv("IDEMHOOK_TEST_BACKEND", "sqlite", 1);
	bench_pg_server = pgserver_shared(&missing);
	if (bench_pg_server == NULL) {
		fprintf(stderr, "bench: %s\n",
		        missing ? "PostgreSQL is not installed (contrib/install-deps.sh installs "
		                  "it)"
		                : "the throwaway PostgreSQL server did not start");
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/.s.PGSQL.%u", bench_pg_server->pg_dir,
	         bench_pg_server->pg_port);
	if (delayproxy_start(sock, BENCH_PG_DELAY_US, &proxy) == NULL) {
		return 1;
	}
	pgserver_psql(bench_pg_server, NULL, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
	              NULL);
	pgserver_psql(bench_pg_server, NULL, "SELECT version()", &version);
	printf("idemhook on PostgreSQL beside SQLite: Stripe callbacks, loopback, %d keep-alive "
	       "connections in all\n"
	       "from %d loopback addresses; %zu callbacks per phase. SQLite: synchronous=FULL, "
	       "WAL.\n"
	       "PostgreSQL: a local throwaway server, unix socket, fsync=on, "
	       "synchronous_commit=on;\n"
	       "\"+1ms each way\": through a proxy on 127.0.0.1 that holds every byte %u us in "
	       "each direction\n%s\n",
	       BENCH_PG_CONNS, BENCH_PG_SOURCES, n, BENCH_PG_DELAY_US,
	       version != NULL ? version : "");
	free(version);
	printf("%-34s %9s %7s %9s %8s %8s %6s %6s %6s %6s %8s %8s %11s %10s\n", "phase",
	       "receivers", "reqs", "req/s", "p50 ms", "p99 ms", "errors", "batch", "rx us",
	       "pg us", "rt/batch", "rt/cb", "stmts/cb", "txns/cb");
	if (base != NULL && getenv("IDEMHOOK_BENCH_PG_AB") != NULL) {
		return bench_pg_ab(base, n, proxy, atoi(getenv("IDEMHOOK_BENCH_PG_AB")));
	}
	if (base != NULL) {
		const char *bin = bench_pg_bin;

		bench_pg_bin = base;
		bench_pg_which = "before: ";
		if (bench_pg_config("postgresql", 1, n, 0, &base_row[0], &base_dup[0]) < 0 ||
		    bench_pg_config("postgresql", 1, n, proxy, &base_row[1], &base_dup[1]) < 0) {
			fprintf(stderr, "bench: a phase of IDEMHOOK_BIN_BASE failed\n");
			return 1;
		}
		bench_pg_bin = bin;
		bench_pg_which = "";
	}
	if (bench_pg_config("sqlite", 1, n, 0, &urow[BENCH_PG_SQLITE], &dup[BENCH_PG_SQLITE]) < 0 ||
	    bench_pg_config("postgresql", 1, n, 0, &urow[BENCH_PG_ONE], &dup[BENCH_PG_ONE]) < 0 ||
	    bench_pg_config("postgresql", 2, n, 0, &urow[BENCH_PG_TWO], &dup[BENCH_PG_TWO]) < 0 ||
	    bench_pg_config("postgresql", 3, n, 0, &urow[BENCH_PG_THREE], &dup[BENCH_PG_THREE]) <
	            0 ||
	    bench_pg_config("postgresql", 1, n, proxy, &urow[BENCH_PG_ONE_DELAYED],
	                    &dup[BENCH_PG_ONE_DELAYED]) < 0 ||
	    bench_pg_config("postgresql", 3, n, proxy, &urow[BENCH_PG_THREE_DELAYED],
	                    &dup[BENCH_PG_THREE_DELAYED]) < 0) {
		fprintf(stderr, "bench: a phase failed\n");
		return 1;
	}
	printf("\nunique callbacks/s:    SQLite %.0f | PostgreSQL, 1 receiver %.0f | 2 %.0f | 3 "
	       "%.0f | +1ms each way: 1 receiver %.0f | 3 %.0f\n",
	       urow[BENCH_PG_SQLITE].br_rate, urow[BENCH_PG_ONE].br_rate,
	       urow[BENCH_PG_TWO].br_rate, urow[BENCH_PG_THREE].br_rate,
	       urow[BENCH_PG_ONE_DELAYED].br_rate, urow[BENCH_PG_THREE_DELAYED].br_rate);
	printf("duplicate callbacks/s: SQLite %.0f | PostgreSQL, 1 receiver %.0f | 2 %.0f | 3 "
	       "%.0f | +1ms each way: 1 receiver %.0f | 3 %.0f\n",
	       dup[BENCH_PG_SQLITE], dup[BENCH_PG_ONE], dup[BENCH_PG_TWO], dup[BENCH_PG_THREE],
	       dup[BENCH_PG_ONE_DELAYED], dup[BENCH_PG_THREE_DELAYED]);
	if (base != NULL) {
		printf("before (IDEMHOOK_BIN_BASE), unique callbacks/s: PostgreSQL, 1 receiver "
		       "%.0f "
		       "| +1ms each way %.0f\n",
		       base_row[0].br_rate, base_row[1].br_rate);
	}
	printf("\nratios (issue 25), this run:\n");
	bench_pg_target("PostgreSQL 1 receiver / SQLite 1 receiver, unique",
	                urow[BENCH_PG_ONE].br_rate / urow[BENCH_PG_SQLITE].br_rate, 0.5);
	bench_pg_target("PostgreSQL 2 receivers / 1 receiver, unique",
	                urow[BENCH_PG_TWO].br_rate / urow[BENCH_PG_ONE].br_rate, 1.0);
	bench_pg_target("PostgreSQL 3 receivers / 1 receiver, unique",
	                urow[BENCH_PG_THREE].br_rate / urow[BENCH_PG_ONE].br_rate, 1.5);
	bench_pg_target("PostgreSQL 1 receiver, +1ms each way / no delay, unique",
	                urow[BENCH_PG_ONE_DELAYED].br_rate / urow[BENCH_PG_ONE].br_rate, 0.25);
	bench_pg_cpu_bound(urow);
	if (base != NULL && base_row[0].br_rate > 0 && base_row[1].br_rate > 0) {
		printf("  %-58s %5.2f\n", "PostgreSQL 1 receiver, after / before, unique",
		       urow[BENCH_PG_ONE].br_rate / base_row[0].br_rate);
		printf("  %-58s %5.2f\n",
		       "PostgreSQL 1 receiver +1ms each way, after / before, unique",
		       urow[BENCH_PG_ONE_DELAYED].br_rate / base_row[1].br_rate);
	}
	return 0;
}
