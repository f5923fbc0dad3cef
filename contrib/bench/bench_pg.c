/* bench_pg.c: the webhook benchmark on PostgreSQL beside SQLite, in one run
 * on one machine: unique and duplicate Stripe callbacks per second with one
 * receiver on SQLite, one on PostgreSQL and three on one PostgreSQL
 * database (a local throwaway server, fsync and synchronous_commit on), and
 * where the time goes: statements (each a round trip) and transactions per
 * callback, counted by pg_stat_statements (track = top: the statements a
 * receiver sends, not those PostgreSQL runs for foreign keys). The same
 * pre-signed callbacks, the same load generator (loadgen.c) as bench_hooks. */
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
#define BENCH_PG_TOP 8 /* statements shown per phase */

static const char *bench_pg_bin;
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

/* n new orders in the database at location (migrated on the way), through
 * the store's own API so both backends get the same rows. */
static int bench_pg_orders_make(struct bench_pg_orders *bo, const char *location, size_t n)
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
		if (orders_new_id(bo->bo_ids[i]) < 0) {
			return -1;
		}
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
	double seconds = 0;
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
	if (db != NULL) {
		if (bench_pg_counts(db, &after) == 0 && br->br_n > 0) {
			br->br_statements =
			        (after.bc_statements - before.bc_statements) / (double)br->br_n;
			br->br_xacts = (after.bc_xacts - before.bc_xacts) / (double)br->br_n;
		}
	}
	printf("%-34s %9zu %7zu %9.0f %8.2f %8.2f %6zu", br->br_label, br->br_receivers, br->br_n,
	       br->br_rate, br->br_p50_ms, br->br_p99_ms, br->br_errors);
	if (br->br_statements >= 0) {
		printf(" %11.2f %10.3f", br->br_statements, br->br_xacts);
	}
	printf("\n");
	if (db != NULL) {
		bench_pg_top(db, br->br_n);
	}
	fflush(stdout);
	return 0;
}

static const char bench_pg_ini[] =
        "[provider stripe]\ntype = stripe\nsecret = " BENCH_PG_SECRET "\n";

/* One configuration: k receivers on SQLite (k = 1) or on one PostgreSQL
 * database; n unique callbacks, then the same n again as duplicates. */
static int bench_pg_config(const char *backend, size_t k, size_t n, double *ret_unique,
                           double *ret_dup)
{
	struct daemon r[BENCH_PG_RECEIVERS_MAX];
	struct lg_request *sets[BENCH_PG_RECEIVERS_MAX] = {NULL};
	size_t counts[BENCH_PG_RECEIVERS_MAX] = {0};
	struct bench_pg_orders bo = {0, NULL};
	struct bench_pg_row row;
	const char *db = NULL;
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
		db = r[0].dm_pg_db;
	} else if (daemon_init(&r[0], bench_pg_ini) < 0) {
		return -1;
	}
	snprintf(tag, sizeof(tag), "%c%zu", backend[0], k);
	if (bench_pg_orders_make(&bo, r[0].dm_db, n) < 0 ||
	    bench_pg_sign(&bo, tag, k, sets, counts) < 0) {
		fprintf(stderr, "bench: cannot make the orders and callbacks\n");
		goto out;
	}
	for (i = 0; i < k; i++) {
		if (bench_pg_start(&r[i]) < 0) {
			goto out;
		}
	}
	snprintf(label, sizeof(label), "%s, unique", backend);
	if (bench_pg_phase(&row, label, r, k, sets, counts, db) < 0) {
		goto out;
	}
	*ret_unique = row.br_rate;
	if (hn_db_int(r[0].dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'") !=
	            (int64_t)n ||
	    row.br_errors) {
		fprintf(stderr,
		        "bench: %s with %zu receivers: not every callback was applied once\n",
		        backend, k);
		goto out;
	}
	snprintf(label, sizeof(label), "%s, duplicates", backend);
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

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 5000;
	double unique[3] = {0, 0, 0};
	double dup[3] = {0, 0, 0};
	char *version = NULL;
	int missing;

	bench_pg_bin = getenv("IDEMHOOK_BIN");
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
	pgserver_psql(bench_pg_server, NULL, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
	              NULL);
	pgserver_psql(bench_pg_server, NULL, "SELECT version()", &version);
	printf("idemhook on PostgreSQL beside SQLite: Stripe callbacks, loopback, %d keep-alive "
	       "connections in all\n"
	       "from %d loopback addresses; %zu callbacks per phase. SQLite: synchronous=FULL, "
	       "WAL.\n"
	       "PostgreSQL: a local throwaway server, unix socket, fsync=on, "
	       "synchronous_commit=on\n%s\n",
	       BENCH_PG_CONNS, BENCH_PG_SOURCES, n, version != NULL ? version : "");
	free(version);
	printf("%-34s %9s %7s %9s %8s %8s %6s %11s %10s\n", "phase", "receivers", "reqs", "req/s",
	       "p50 ms", "p99 ms", "errors", "stmts/cb", "txns/cb");
	if (bench_pg_config("sqlite", 1, n, &unique[0], &dup[0]) < 0 ||
	    bench_pg_config("postgresql", 1, n, &unique[1], &dup[1]) < 0 ||
	    bench_pg_config("postgresql", 3, n, &unique[2], &dup[2]) < 0) {
		fprintf(stderr, "bench: a phase failed\n");
		return 1;
	}
	printf("\nunique callbacks/s:    SQLite %.0f | PostgreSQL, 1 receiver %.0f | 3 receivers "
	       "%.0f\n",
	       unique[0], unique[1], unique[2]);
	printf("duplicate callbacks/s: SQLite %.0f | PostgreSQL, 1 receiver %.0f | 3 receivers "
	       "%.0f\n",
	       dup[0], dup[1], dup[2]);
	return 0;
}
