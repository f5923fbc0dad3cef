/* test_store.c: unit tests of the idempotency store against real SQLite files. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "keyset.h"
#include "outbox.h"
#include "pg_fixture.h"
#include "reply.h"
#include "store.h"

#define T0 ((int64_t)1700000000000) /* the tests' clock starts here, in ms */
#define RETENTION_MS ((int64_t)7 * 24 * 3600 * 1000)
#define LEASE_MS ((int64_t)30 * 1000)
#define STORM_THREADS 32

static const char reply_body_bytes[] = "{\"ok\":true}\0tail\xff";
#define REPLY_BODY_LEN (sizeof(reply_body_bytes) - 1)

struct fixture {
	char fx_dir[64];
	char fx_sub[96];
	char fx_path[128];
	struct store *fx_st;
	int fx_pg;           /* on PostgreSQL: fx_conninfo, not fx_path */
	unsigned fx_writers; /* PostgreSQL: so_pg_writers (0: the default) */
	char fx_conninfo[PG_FIXTURE_CONNINFO_MAX];
};

#define PG_SCHEMA "idemhook_test_store"

/* What the test apply callbacks do and count. */
struct applier {
	atomic_int ap_runs;
	atomic_int ap_inside; /* apply_note_backend: handlers running now */
	atomic_int ap_met;    /* two of them have run at once (or the wait gave up) */
	int ap_result;      /* STORE_APPLY_* */
	size_t ap_fill;     /* bytes of a scratch blob to insert */
	const char *ap_tag; /* stored in the scratch row */
	int ap_orphan;      /* also insert a child row without parent */
	/* when set, the key's row also records an event with this effect */
	const char *ap_event_effect;
	struct store_claim *ap_claim;
	struct store_value ap_event_vals[5];
};

static int fixture_open(struct fixture *fx, unsigned batch_max)
{
	struct store_options so = {
	        .so_path = fx->fx_path,
	        .so_sync = STORE_SYNC_NORMAL,
	        .so_batch_max = batch_max,
	        .so_pg_writers = fx->fx_writers,
	};

	if (fx->fx_pg) {
		so.so_backend = STORE_BACKEND_POSTGRESQL;
		so.so_conninfo = fx->fx_conninfo;
	}
	fx->fx_st = store_create(&so);
	return fx->fx_st != NULL ? 0 : -1;
}

static int unit_create_scratch(struct store_tx *tx, void *arg)
{
	const struct fixture *fx = arg;

	if (store_exec(tx,
	               fx->fx_pg ? "CREATE TABLE IF NOT EXISTS scratch (tag TEXT, data BYTEA)"
	                         : "CREATE TABLE IF NOT EXISTS scratch (tag TEXT, data BLOB)",
	               NULL, 0, NULL) < 0) {
		return -1;
	}
	if (store_exec(tx, "CREATE TABLE IF NOT EXISTS parent (id INTEGER PRIMARY KEY)", NULL, 0,
	               NULL) < 0) {
		return -1;
	}
	/* Checked only at COMMIT: a way to make COMMIT itself fail. */
	return store_exec(
	        tx,
	        "CREATE TABLE IF NOT EXISTS child (parent_id INTEGER REFERENCES parent (id) "
	        "DEFERRABLE INITIALLY DEFERRED)",
	        NULL, 0, NULL);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (fx == NULL) {
		return -1;
	}
	snprintf(fx->fx_dir, sizeof(fx->fx_dir), "/tmp/test_store.XXXXXX");
	if (mkdtemp(fx->fx_dir) == NULL) {
		free(fx);
		return -1;
	}
	/* The store creates the missing sub directory itself. */
	snprintf(fx->fx_sub, sizeof(fx->fx_sub), "%s/var", fx->fx_dir);
	snprintf(fx->fx_path, sizeof(fx->fx_path), "%s/idemhook.db", fx->fx_sub);
	if (fixture_open(fx, 0) < 0 || store_write(fx->fx_st, T0, unit_create_scratch, fx) < 0) {
		store_destroy(fx->fx_st);
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

/* The same fixture on PostgreSQL: a fresh schema of this program's. */
static int setup_pg_writers(void **state, unsigned writers)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (fx == NULL) {
		return -1;
	}
	fx->fx_pg = 1;
	fx->fx_writers = writers;
	if (pg_fixture_conninfo(PG_SCHEMA, fx->fx_conninfo, sizeof(fx->fx_conninfo)) < 0 ||
	    pg_fixture_reset(PG_SCHEMA) < 0 || fixture_open(fx, 0) < 0 ||
	    store_write(fx->fx_st, T0, unit_create_scratch, fx) < 0) {
		store_destroy(fx->fx_st);
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static int setup_pg(void **state)
{
	return setup_pg_writers(state, 0);
}

/* One writer connection: for the tests that count one writer's round
 * trips per batch or terminate its backend, and for those that hold the
 * writer in a plain write (a gate) to queue claims behind it: with a
 * second writer the claims do not wait, and which of two claims of one key
 * in flight wins is a race (a fresh-clone CI run failed on it once, and a
 * loop under CPU load once in 50 runs). */
static int setup_pg_one_writer(void **state)
{
	return setup_pg_writers(state, 1);
}

/* Three writer connections. */
static int setup_pg_three_writers(void **state)
{
	return setup_pg_writers(state, 3);
}

static int teardown_pg(void **state)
{
	struct fixture *fx = *state;

	store_destroy(fx->fx_st);
	free(fx);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
	char path[160];
	size_t i;

	store_destroy(fx->fx_st);
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", fx->fx_path, suffixes[i]);
		unlink(path);
	}
	rmdir(fx->fx_sub);
	rmdir(fx->fx_dir);
	free(fx);
	return 0;
}

/* ---- helpers ---- */

static int apply_test(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct applier *ap = arg;
	void *fill = NULL;
	int r;

	atomic_fetch_add(&ap->ap_runs, 1);
	if (ap->ap_fill > 0) {
		fill = calloc(1, ap->ap_fill);
		assert_non_null(fill);
	}
	{
		struct store_value p[] = {
		        store_text(ap->ap_tag != NULL ? ap->ap_tag : "row"),
		        fill != NULL ? store_blob(fill, ap->ap_fill) : store_null(),
		};

		r = store_exec(tx, "INSERT INTO scratch (tag, data) VALUES (?, ?)", p, 2, NULL);
	}
	free(fill);
	if (r == 0 && ap->ap_orphan) {
		r = store_exec(tx, "INSERT INTO child (parent_id) VALUES (42)", NULL, 0, NULL);
	}
	if (r < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	if (ap->ap_event_effect != NULL) {
		static const char *const cols[] = {"kind", "outcome", "effect", "received_at",
		                                   "processed_at"};

		ap->ap_event_vals[0] = store_text("payment_succeeded");
		ap->ap_event_vals[1] = store_text("done");
		ap->ap_event_vals[2] = store_text(ap->ap_event_effect);
		ap->ap_event_vals[3] = store_int(store_tx_now(tx));
		ap->ap_event_vals[4] = store_int(store_tx_now(tx));
		ap->ap_claim->sc_cols = cols;
		ap->ap_claim->sc_vals = ap->ap_event_vals;
		ap->ap_claim->sc_n_cols = 5;
	}
	if (ap->ap_result == STORE_APPLY_FAILED) {
		assert_int_equal(reply_problem(ret_reply, 422, "refused", "Refused", NULL), 0);
		return STORE_APPLY_FAILED;
	}
	assert_int_equal(
	        reply_set(ret_reply, 200, "application/json", reply_body_bytes, REPLY_BODY_LEN), 0);
	assert_int_equal(reply_add_header(ret_reply, "X-Order-Id", "ord_1"), 0);
	return ap->ap_result;
}

static void claim_init(struct store_claim *c, const char *key, unsigned char fp, int64_t now,
                       struct applier *ap)
{
	memset(c, 0, sizeof(*c));
	c->sc_scope = "stripe";
	c->sc_key = key;
	memset(c->sc_fingerprint, fp, sizeof(c->sc_fingerprint));
	c->sc_now_ms = now;
	c->sc_retention_ms = RETENTION_MS;
	c->sc_lease_ms = LEASE_MS;
	c->sc_apply = apply_test;
	c->sc_arg = ap;
}

struct count_query {
	const char *cq_sql;
	int64_t cq_value;
};

static int unit_count(struct store_tx *tx, void *arg)
{
	struct count_query *cq = arg;
	struct store_row row;
	int r;

	r = store_query(tx, cq->cq_sql, NULL, 0, &row);
	if (r < 0) {
		return -1;
	}
	cq->cq_value = r > 0 ? store_row_int(&row, 0) : -1;
	if (r > 0) {
		store_row_finish(&row);
	}
	return 0;
}

static int64_t count_of(struct store *st, const char *sql)
{
	struct count_query cq = {.cq_sql = sql, .cq_value = -1};

	assert_int_equal(store_read(st, T0, unit_count, &cq), 0);
	return cq.cq_value;
}

static void assert_reply_is_the_original(const struct reply *r)
{
	assert_int_equal(r->reply_status, 200);
	assert_string_equal(r->reply_content_type, "application/json");
	assert_string_equal(r->reply_headers, "X-Order-Id: ord_1\n");
	assert_int_equal(r->reply_body_len, REPLY_BODY_LEN);
	assert_memory_equal(r->reply_body, reply_body_bytes, REPLY_BODY_LEN);
}

static long long file_size(const char *path);

static int submit_one(struct store *st, struct store_claim *c)
{
	return store_submit(st, c, 1);
}

/* ---- the key filter (so_key_filter) ---- */

/* Every key added is found; keys never added are "maybe" about 1 % of the
 * time at the filter's capacity. */
static void test_a_key_filter_finds_every_key_added_and_few_others(void **state)
{
	enum { N = 100000 };
	struct keyset *ks = keyset_new(N);
	char key[32];
	size_t wrong = 0;
	size_t added = 0;
	size_t i;

	(void)state;
	assert_non_null(ks);
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "evt_%zu", i);
		added += (size_t)keyset_add(ks, keyset_hash("stripe", key));
	}
	assert_int_equal(keyset_count(ks), added);
	assert_true(added > N - N / 50); /* a "maybe" on add is a false positive too */
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "evt_%zu", i);
		assert_true(keyset_maybe(ks, keyset_hash("stripe", key)));
	}
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "evt_%zu", i + N);
		wrong += (size_t)keyset_maybe(ks, keyset_hash("stripe", key));
	}
	assert_true(wrong < N / 50);
	/* The scope is part of the key. */
	assert_false(keyset_maybe(ks, keyset_hash("adyen", "evt_1")) &&
	             keyset_maybe(ks, keyset_hash("paypal", "evt_1")) &&
	             keyset_maybe(ks, keyset_hash("wechatpay", "evt_1")));
	keyset_free(ks);
}

/* Reopens the fixture's store with a key filter made for min keys at
 * least, and waits until one is in use with room for capacity keys and
 * holding keys keys. */
static void reopen_with_key_filter(struct fixture *fx, size_t min)
{
	struct store_options so = {
	        .so_path = fx->fx_path,
	        .so_sync = STORE_SYNC_NORMAL,
	        .so_key_filter = 1,
	        .so_key_filter_min = min,
	};

	store_destroy(fx->fx_st);
	fx->fx_st = store_create(&so);
	assert_non_null(fx->fx_st);
}

static void wait_for_key_filter(struct store *st, uint64_t capacity, uint64_t keys)
{
	struct timespec pause = {0, 10 * 1000 * 1000};
	struct store_stats ss;
	int i;

	for (i = 0; i < 1000; i++) {
		store_get_stats(st, &ss);
		if (ss.ss_key_filter_ready && ss.ss_key_filter_capacity >= capacity &&
		    ss.ss_key_filter_keys >= keys) {
			return;
		}
		nanosleep(&pause, NULL);
	}
	fail_msg("no key filter with room for %llu keys holding %llu after 10 s (ready %d, "
	         "room %llu, keys %llu)",
	         (unsigned long long)capacity, (unsigned long long)keys, ss.ss_key_filter_ready,
	         (unsigned long long)ss.ss_key_filter_capacity,
	         (unsigned long long)ss.ss_key_filter_keys);
}

static void claim_expect(struct store *st, const char *key, int64_t now, struct applier *ap,
                         enum store_outcome outcome)
{
	struct store_claim c;

	claim_init(&c, key, 1, now, ap);
	assert_int_equal(submit_one(st, &c), 0);
	assert_int_equal(c.sc_outcome, outcome);
	assert_reply_is_the_original(&c.sc_reply);
	store_claim_finish(&c);
}

/* The filter is filled from the keys stored before the store opened: a
 * duplicate of one is answered by a read, without the writer; a new key
 * goes to the writer unread, and its own duplicate is read again. */
static void test_the_key_filter_sends_only_keys_never_stored_to_the_writer_unread(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_stats before;
	struct store_stats after;

	claim_expect(fx->fx_st, "evt_k1", T0, &ap, STORE_NEW);
	claim_expect(fx->fx_st, "evt_k2", T0, &ap, STORE_NEW);
	claim_expect(fx->fx_st, "evt_k3", T0, &ap, STORE_NEW);
	reopen_with_key_filter(fx, 16);
	wait_for_key_filter(fx->fx_st, 16, 3);

	store_get_stats(fx->fx_st, &before);
	claim_expect(fx->fx_st, "evt_k2", T0 + 1000, &ap, STORE_REPLAYED);
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(after.ss_batches, before.ss_batches);
	assert_int_equal(after.ss_reads_skipped, before.ss_reads_skipped);

	claim_expect(fx->fx_st, "evt_k4", T0 + 1000, &ap, STORE_NEW);
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(after.ss_batches, before.ss_batches + 1);
	assert_int_equal(after.ss_reads_skipped, before.ss_reads_skipped + 1);
	assert_int_equal(after.ss_key_filter_keys, 4);

	claim_expect(fx->fx_st, "evt_k4", T0 + 2000, &ap, STORE_REPLAYED);
	store_get_stats(fx->fx_st, &before);
	assert_int_equal(before.ss_batches, after.ss_batches);
	assert_int_equal(before.ss_reads_skipped, after.ss_reads_skipped);
	assert_int_equal(atomic_load(&ap.ap_runs), 4);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 4);
}

/* A key the filter has not seen may still be stored (a command beside
 * serve wrote it): its duplicate goes to the writer, whose unique index
 * finds it, and gets the stored reply; the claim is applied once. */
static void test_a_key_stored_beside_the_filter_is_still_replayed_by_the_writer(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_options so = {.so_path = fx->fx_path, .so_sync = STORE_SYNC_NORMAL};
	struct store_stats before;
	struct store_stats after;
	struct store *beside;

	reopen_with_key_filter(fx, 16);
	wait_for_key_filter(fx->fx_st, 16, 0);
	beside = store_create(&so);
	assert_non_null(beside);
	claim_expect(beside, "evt_beside", T0, &ap, STORE_NEW);
	store_destroy(beside);

	store_get_stats(fx->fx_st, &before);
	claim_expect(fx->fx_st, "evt_beside", T0 + 1000, &ap, STORE_REPLAYED);
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(after.ss_reads_skipped, before.ss_reads_skipped + 1);
	assert_int_equal(after.ss_batches, before.ss_batches + 1);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 1);
}

static int unit_insert_keys(struct store_tx *tx, void *arg)
{
	const int *n = arg;
	char key[32];
	struct store_value p[] = {store_text(key), store_int(T0)};
	int i;

	for (i = 0; i < *n; i++) {
		snprintf(key, sizeof(key), "evt_page_%06d", i);
		if (store_exec(tx,
		               "INSERT INTO idempotency_records (scope, idem_key, status, "
		               "fingerprint, "
		               "reply_status, created_at, updated_at) VALUES ('stripe', ?, 'done', "
		               "x'01', 200, ?2, ?2)",
		               p, 2, NULL) < 0) {
			return -1;
		}
	}
	return 0;
}

/* More keys stored than one page of the fill reads (10,000): every page
 * follows the last key of the one before, and every key is in the filter. */
static void test_a_key_filter_is_filled_from_several_pages_of_keys(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_stats ss;
	struct store_stats after;
	char key[32];
	int n = 25000;
	int i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_insert_keys, &n), 0);
	reopen_with_key_filter(fx, 16);
	wait_for_key_filter(fx->fx_st, (uint64_t)n, (uint64_t)(n - n / 50));
	store_get_stats(fx->fx_st, &ss);
	assert_true(ss.ss_key_filter_keys <= (uint64_t)n);
	/* Keys from every page are in it: their claims are read first. */
	for (i = 0; i < n; i += 499) {
		struct store_claim c;

		snprintf(key, sizeof(key), "evt_page_%06d", i);
		claim_init(&c, key, 1, T0 + 1000, &ap);
		assert_int_equal(submit_one(fx->fx_st, &c), 0);
		assert_true(c.sc_outcome == STORE_REPLAYED || c.sc_outcome == STORE_MISMATCH);
		store_claim_finish(&c);
	}
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(after.ss_reads_skipped, ss.ss_reads_skipped);
	assert_int_equal(atomic_load(&ap.ap_runs), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), n);
}

/* Claims past the filter's capacity have a larger one filled: every key
 * is then in it, and each duplicate is answered by a read. */
static void test_a_key_filter_past_its_capacity_is_filled_again_larger(void **state)
{
	enum { N = 200 };
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_stats before;
	struct store_stats after;
	char key[32];
	int i;

	reopen_with_key_filter(fx, 16);
	wait_for_key_filter(fx->fx_st, 16, 0);
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "evt_grow_%d", i);
		claim_expect(fx->fx_st, key, T0, &ap, STORE_NEW);
	}
	wait_for_key_filter(fx->fx_st, N, N - N / 50);
	store_get_stats(fx->fx_st, &before);
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "evt_grow_%d", i);
		claim_expect(fx->fx_st, key, T0 + 1000, &ap, STORE_REPLAYED);
	}
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(after.ss_batches, before.ss_batches);
	assert_int_equal(after.ss_reads_skipped, before.ss_reads_skipped);
	assert_int_equal(atomic_load(&ap.ap_runs), N);
}

/* ---- opening and migrations ---- */

static int unit_read_pragmas(struct store_tx *tx, void *arg)
{
	int64_t *ret = arg;
	struct store_row row;

	assert_int_equal(store_query(tx, "PRAGMA user_version", NULL, 0, &row), 1);
	ret[0] = store_row_int(&row, 0);
	store_row_finish(&row);
	assert_int_equal(store_query(tx, "PRAGMA journal_mode", NULL, 0, &row), 1);
	ret[1] = strcmp(store_row_text(&row, 0), "wal") == 0;
	store_row_finish(&row);
	return 0;
}

static void test_create_makes_the_directory_applies_migrations_and_uses_wal(void **state)
{
	struct fixture *fx = *state;
	int64_t got[2] = {0, 0};

	assert_true(store_schema_version() >= 1);
	assert_int_equal(store_read(fx->fx_st, T0, unit_read_pragmas, got), 0);
	assert_int_equal(got[0], store_schema_version());
	assert_int_equal(got[1], 1);
}

static int unit_cache_size(struct store_tx *tx, void *arg)
{
	int64_t *ret = arg;
	struct store_row row;

	assert_int_equal(store_query(tx, "PRAGMA cache_size", NULL, 0, &row), 1);
	*ret = store_row_int(&row, 0);
	store_row_finish(&row);
	return 0;
}

/* The writer keeps 4 MiB of pages (a unique callback's index leaves are read
 * again less often); the read connections keep SQLite's default. */
static void test_writer_caches_four_mebibytes_of_pages(void **state)
{
	struct fixture *fx = *state;
	int64_t writer = 0;
	int64_t reader = 0;

	assert_int_equal(store_write(fx->fx_st, T0, unit_cache_size, &writer), 0);
	assert_int_equal(store_read(fx->fx_st, T0, unit_cache_size, &reader), 0);
	assert_int_equal(writer, -4096);
	assert_int_equal(reader, -2000);
}

/* The nice value of the thread that runs a write: the writer's. */
static int unit_thread_nice(struct store_tx *tx, void *arg)
{
	(void)tx;
	errno = 0;
	*(int *)arg = getpriority(PRIO_PROCESS, (id_t)gettid());
	return errno == 0 ? 0 : -1;
}

/* Whether this process may set a nice value this low: CAP_SYS_NICE in its
 * effective set, or an RLIMIT_NICE (20 - value) that allows it. */
static int may_lower_nice_to(int nice)
{
	unsigned long long caps = 0;
	char line[256];
	struct rlimit rl;
	FILE *f = fopen("/proc/self/status", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			break;
		}
	}
	if (f != NULL) {
		fclose(f);
	}
	return (caps & (1ULL << 23)) != 0 /* CAP_SYS_NICE */ ||
	       (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur >= (rlim_t)(20 - nice));
}

/* so_writer_nice puts the writer thread, and only it, at that nice value;
 * 0 leaves it as the process is. Lowering a nice value takes CAP_SYS_NICE
 * or an RLIMIT_NICE that allows it: without either, the store still opens
 * and its writer keeps the process's value. */
static void test_the_writer_runs_at_its_nice_value_and_nothing_else_does(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {
	        .so_path = fx->fx_path, .so_sync = STORE_SYNC_NORMAL, .so_writer_nice = -4};
	int mine = getpriority(PRIO_PROCESS, (id_t)gettid());
	int plain = 99;
	int ahead = 99;
	struct store *st;

	st = store_create(&so);
	assert_non_null(st);
	assert_int_equal(store_write(st, T0, unit_thread_nice, &ahead), 0);
	assert_int_equal(store_write(fx->fx_st, T0, unit_thread_nice, &plain), 0);
	store_destroy(st);
	assert_int_equal(plain, mine);
	assert_int_equal(getpriority(PRIO_PROCESS, (id_t)gettid()), mine);
	if (!may_lower_nice_to(-4)) {
		assert_int_equal(ahead, mine);
		skip(); /* not allowed here: the writer kept the process's value, as it should */
	}
	assert_int_equal(ahead, -4);
}

static void test_migrate_reports_versions_and_is_idempotent(void **state)
{
	struct fixture *fx = *state;
	char path[160];
	int from = -1;
	int to = -1;

	snprintf(path, sizeof(path), "%s/other.db", fx->fx_sub);
	assert_int_equal(store_migrate(path, &from, &to), 0);
	assert_int_equal(from, 0);
	assert_int_equal(to, store_schema_version());
	assert_int_equal(store_migrate(path, &from, &to), 0);
	assert_int_equal(from, store_schema_version());
	assert_int_equal(to, store_schema_version());
	unlink(path);
}

static int unit_set_user_version(struct store_tx *tx, void *arg)
{
	return store_exec(tx, (const char *)arg, NULL, 0, NULL);
}

static unsigned char *read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *data;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len > 0);
	rewind(f);
	data = malloc((size_t)len);
	assert_non_null(data);
	assert_int_equal(fread(data, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*ret_len = (size_t)len;
	return data;
}

/* A newer schema is refused by every store that may write; a read-only
 * one (the CLI's readers) reads it as its own, every migration so far
 * keeping what older releases read; none changes the file. */
static void test_newer_schema_is_refused_and_the_file_left_untouched(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {.so_path = fx->fx_path};
	struct store *reader;
	unsigned char *before;
	unsigned char *after;
	size_t before_len;
	size_t after_len;

	assert_int_equal(
	        store_write(fx->fx_st, T0, unit_set_user_version, "PRAGMA user_version = 999"), 0);
	store_destroy(fx->fx_st);
	fx->fx_st = NULL;
	before = read_file(fx->fx_path, &before_len);

	assert_null(store_create(&so));
	so.so_read_only = 1;
	reader = store_create(&so);
	assert_non_null(reader);
	store_destroy(reader);
	assert_int_equal(store_migrate(fx->fx_path, NULL, NULL), -1);

	after = read_file(fx->fx_path, &after_len);
	assert_int_equal(after_len, before_len);
	assert_memory_equal(after, before, before_len);
	free(before);
	free(after);
}

static void test_older_schema_is_refused_read_only_and_without_migrations(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {.so_path = fx->fx_path, .so_read_only = 1};

	assert_int_equal(
	        store_write(fx->fx_st, T0, unit_set_user_version, "PRAGMA user_version = 1"), 0);
	store_destroy(fx->fx_st);
	fx->fx_st = NULL;

	assert_null(store_create(&so));
	so.so_read_only = 0;
	so.so_no_migrate = 1;
	assert_null(store_create(&so));
}

/* ---- the state table ---- */

static void test_claim_on_a_new_key_runs_apply_and_stores_done(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;

	claim_init(&c, "evt_new", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	assert_int_equal(c.sc_status, STORE_STATUS_DONE);
	assert_int_equal(c.sc_token, 1);
	assert_reply_is_the_original(&c.sc_reply);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	assert_int_equal(count_of(fx->fx_st,
	                          "SELECT count(*) FROM idempotency_records WHERE status = 'done'"),
	                 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 1);
	store_claim_finish(&c);
}

static void test_claim_replays_done_record_byte_for_byte(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;
	struct store_claim group[2];

	claim_init(&c, "evt_replay", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	store_claim_finish(&c);

	/* A single claim is answered on the read connection... */
	claim_init(&c, "evt_replay", 1, T0 + 1000, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_REPLAYED);
	assert_int_equal(c.sc_status, STORE_STATUS_DONE);
	assert_reply_is_the_original(&c.sc_reply);
	store_claim_finish(&c);

	/* ...and a group by the writer, with the same answer. */
	claim_init(&group[0], "evt_replay", 1, T0 + 2000, &ap);
	claim_init(&group[1], "evt_other", 1, T0 + 2000, &ap);
	assert_int_equal(store_submit(fx->fx_st, group, 2), 0);
	assert_int_equal(group[0].sc_outcome, STORE_REPLAYED);
	assert_reply_is_the_original(&group[0].sc_reply);
	assert_int_equal(group[1].sc_outcome, STORE_NEW);
	store_claim_finish(&group[0]);
	store_claim_finish(&group[1]);

	assert_int_equal(atomic_load(&ap.ap_runs), 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 2);
}

/* A duplicate that arrives right after its original's commit, on a thread
 * that keeps a read snapshot from before that commit (its lookups for the
 * two claims before): answered with the stored reply, and applied once. A
 * kept snapshot is not used past a commit (the async test below: answered
 * on this thread); a lookup that misses goes to the writer's claim. */
static void test_a_duplicate_right_after_the_commit_is_replayed_with_a_kept_snapshot(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;

	claim_init(&c, "evt_first", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	store_claim_finish(&c);
	claim_init(&c, "evt_fresh", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	store_claim_finish(&c);

	claim_init(&c, "evt_fresh", 1, T0 + 1, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_REPLAYED);
	assert_int_equal(c.sc_status, STORE_STATUS_DONE);
	assert_reply_is_the_original(&c.sc_reply);
	store_claim_finish(&c);
	assert_int_equal(atomic_load(&ap.ap_runs), 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 2);
}

/* A snapshot kept for the next lookups is ended when its thread goes idle:
 * afterwards nothing reads from the WAL, and a TRUNCATE checkpoint (gc's)
 * finishes and empties it. */
static void test_a_kept_read_snapshot_is_ended_when_its_thread_is_idle(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;
	char wal[160];

	claim_init(&c, "evt_idle", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	store_claim_finish(&c);
	claim_init(&c, "evt_idle", 1, T0 + 1, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_REPLAYED);
	store_claim_finish(&c);
	usleep(200 * 1000);
	assert_int_equal(store_checkpoint(fx->fx_st), 0);
	snprintf(wal, sizeof(wal), "%s-wal", fx->fx_path);
	assert_int_equal(file_size(wal), 0);
}

static void test_claim_replays_failed_record_with_its_stored_reply(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_FAILED};
	struct store_claim c;
	char *body;

	claim_init(&c, "evt_failed", 3, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	assert_int_equal(c.sc_status, STORE_STATUS_FAILED);
	body = strdup(c.sc_reply.reply_body);
	assert_non_null(body);
	store_claim_finish(&c);

	claim_init(&c, "evt_failed", 3, T0 + 5000, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_REPLAYED);
	assert_int_equal(c.sc_status, STORE_STATUS_FAILED);
	assert_int_equal(c.sc_reply.reply_status, 422);
	assert_string_equal(c.sc_reply.reply_content_type, "application/problem+json");
	assert_null(c.sc_reply.reply_headers);
	assert_string_equal(c.sc_reply.reply_body, body);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	free(body);
	store_claim_finish(&c);
}

static void test_claim_with_other_fingerprint_gets_mismatch_and_the_stored_reply(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;
	struct store_stats stats;

	claim_init(&c, "evt_mismatch", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	store_claim_finish(&c);

	claim_init(&c, "evt_mismatch", 2, T0 + 1000, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_MISMATCH);
	assert_reply_is_the_original(&c.sc_reply);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	store_claim_finish(&c);

	store_get_stats(fx->fx_st, &stats);
	assert_int_equal(stats.ss_conflicts, 1);
}

static void test_record_one_second_inside_retention_replays(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;

	claim_init(&c, "evt_ttl", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	store_claim_finish(&c);

	claim_init(&c, "evt_ttl", 1, T0 + RETENTION_MS - 1000, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_REPLAYED);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	store_claim_finish(&c);
}

static void test_record_one_second_past_retention_is_deleted_and_runs_as_new(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;

	claim_init(&c, "evt_ttl", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	store_claim_finish(&c);

	claim_init(&c, "evt_ttl", 1, T0 + RETENTION_MS + 1000, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	assert_true(c.sc_token > 1);
	assert_int_equal(atomic_load(&ap.ap_runs), 2);
	store_claim_finish(&c);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT created_at FROM idempotency_records"),
	                 T0 + RETENTION_MS + 1000);
}

/* A claim's event columns (ingest.c) go into the key's one row with its
 * reply: in a one-phase claim, in a completion after a begin, and again
 * when an expired key runs as new. */
static void test_a_claim_writes_its_event_into_the_keys_one_row(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE, .ap_event_effect = "paid"};
	struct store_claim c;

	claim_init(&c, "evt_row", 1, T0, &ap);
	ap.ap_claim = &c;
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	store_claim_finish(&c);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "idem_key = 'evt_row' AND status = 'done' AND "
	                                     "reply_status = 200 AND effect = 'paid'"),
	                 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT received_at FROM events"), T0);

	/* begun, then completed with its event */
	claim_init(&c, "evt_row_2", 1, T0 + 10, &ap);
	ap.ap_claim = &c;
	ap.ap_event_effect = "refunded";
	assert_int_equal(store_claim_begin(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_CLAIMED);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM events"), 1);
	c.sc_now_ms = T0 + 20;
	assert_int_equal(store_claim_complete(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	store_claim_finish(&c);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM events WHERE idem_key = "
	                                     "'evt_row_2' AND effect = 'refunded'"),
	                 1);

	/* the first key past its retention: its row (and event) is replaced */
	claim_init(&c, "evt_row", 1, T0 + RETENTION_MS + 1000, &ap);
	ap.ap_claim = &c;
	ap.ap_event_effect = "again";
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	assert_true(c.sc_token > 1);
	store_claim_finish(&c);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT received_at FROM events WHERE idem_key = "
	                                     "'evt_row' AND effect = 'again'"),
	                 T0 + RETENTION_MS + 1000);

	/* a claim whose handler sets no event leaves the row without one */
	claim_init(&c, "api_key", 1, T0 + 30, &ap);
	ap.ap_event_effect = NULL;
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	store_claim_finish(&c);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 3);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM events"), 2);
}

static void test_live_lease_answers_in_progress_with_seconds_left(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;

	claim_init(&c, "evt_lease", 1, T0, &ap);
	assert_int_equal(store_claim_begin(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_CLAIMED);
	assert_int_equal(c.sc_token, 1);
	store_claim_finish(&c);

	/* 30 s lease, 10.5 s later: 19.5 s left, rounded up. */
	claim_init(&c, "evt_lease", 1, T0 + 10500, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_IN_PROGRESS);
	assert_int_equal(c.sc_status, STORE_STATUS_PROCESSING);
	assert_int_equal(c.sc_retry_after_s, 20);
	store_claim_finish(&c);

	claim_init(&c, "evt_lease", 1, T0 + LEASE_MS - 1, &ap);
	assert_int_equal(store_claim_begin(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_IN_PROGRESS);
	assert_int_equal(c.sc_retry_after_s, 1);
	store_claim_finish(&c);
	assert_int_equal(atomic_load(&ap.ap_runs), 0);
}

static void test_expired_lease_is_taken_over_with_a_new_token(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;

	claim_init(&c, "evt_takeover", 1, T0, &ap);
	assert_int_equal(store_claim_begin(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_token, 1);
	store_claim_finish(&c);

	claim_init(&c, "evt_takeover", 1, T0 + LEASE_MS + 1, &ap);
	assert_int_equal(store_claim_begin(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_CLAIMED);
	assert_int_equal(c.sc_token, 2);
	store_claim_finish(&c);

	/* A one-phase claim takes over too, and runs the handler. */
	claim_init(&c, "evt_takeover", 1, T0 + 2 * LEASE_MS + 2, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	assert_int_equal(c.sc_token, 3);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	store_claim_finish(&c);
}

static void test_late_complete_with_stale_token_is_refused_and_changes_nothing(void **state)
{
	struct fixture *fx = *state;
	struct applier late = {.ap_result = STORE_APPLY_DONE, .ap_tag = "late"};
	struct applier winner = {.ap_result = STORE_APPLY_DONE, .ap_tag = "winner"};
	struct store_claim first;
	struct store_claim second;

	claim_init(&first, "evt_fence", 1, T0, &late);
	assert_int_equal(store_claim_begin(fx->fx_st, &first), 0);
	assert_int_equal(first.sc_token, 1);

	claim_init(&second, "evt_fence", 1, T0 + LEASE_MS + 1000, &winner);
	assert_int_equal(store_claim_begin(fx->fx_st, &second), 0);
	assert_int_equal(second.sc_outcome, STORE_CLAIMED);
	assert_int_equal(second.sc_token, 2);

	/* The first owner wakes up after losing its lease. */
	first.sc_now_ms = T0 + LEASE_MS + 2000;
	assert_int_equal(store_claim_complete(fx->fx_st, &first), 1);
	assert_int_equal(atomic_load(&late.ap_runs), 0);
	assert_int_equal(
	        count_of(fx->fx_st,
	                 "SELECT count(*) FROM idempotency_records WHERE status = 'processing' "
	                 "AND fence_token = 2 AND reply_status IS NULL"),
	        1);

	second.sc_now_ms = T0 + LEASE_MS + 3000;
	assert_int_equal(store_claim_complete(fx->fx_st, &second), 0);
	assert_int_equal(second.sc_outcome, STORE_NEW);
	assert_int_equal(second.sc_status, STORE_STATUS_DONE);

	/* Stale again, now that the record is done. */
	assert_int_equal(store_claim_complete(fx->fx_st, &first), 1);
	assert_int_equal(atomic_load(&late.ap_runs), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'winner'"),
	                 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'late'"), 0);
	assert_int_equal(count_of(fx->fx_st,
	                          "SELECT count(*) FROM idempotency_records WHERE status = 'done'"),
	                 1);
	store_claim_finish(&first);
	store_claim_finish(&second);
}

static void test_transient_complete_keeps_the_claim_processing(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_TRANSIENT};
	struct store_claim c;

	claim_init(&c, "evt_retry_complete", 1, T0, &ap);
	assert_int_equal(store_claim_begin(fx->fx_st, &c), 0);
	assert_int_equal(store_claim_complete(fx->fx_st, &c), -1);
	assert_int_equal(c.sc_outcome, STORE_TRANSIENT);
	assert_true(c.sc_retry_after_s >= 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 0);

	ap.ap_result = STORE_APPLY_DONE;
	assert_int_equal(store_claim_complete(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 1);
	store_claim_finish(&c);
}

/* ---- group commit ---- */

static void test_group_commit_keeps_other_claims_when_one_is_transient(void **state)
{
	struct fixture *fx = *state;
	struct applier ok = {.ap_result = STORE_APPLY_DONE};
	struct applier bad = {.ap_result = STORE_APPLY_TRANSIENT, .ap_tag = "rolled back"};
	struct store_claim group[3];
	struct store_stats stats;
	size_t i;

	claim_init(&group[0], "evt_g1", 1, T0, &ok);
	claim_init(&group[1], "evt_g2", 1, T0, &bad);
	claim_init(&group[2], "evt_g3", 1, T0, &ok);
	assert_int_equal(store_submit(fx->fx_st, group, 3), 0);
	assert_int_equal(group[0].sc_outcome, STORE_NEW);
	assert_int_equal(group[1].sc_outcome, STORE_TRANSIENT);
	assert_true(group[1].sc_retry_after_s >= 1);
	assert_int_equal(group[2].sc_outcome, STORE_NEW);
	for (i = 0; i < 3; i++) {
		store_claim_finish(&group[i]);
	}
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 2);
	assert_int_equal(
	        count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'rolled back'"), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 2);

	store_get_stats(fx->fx_st, &stats);
	/* The scratch table from setup, then this group: one transaction. */
	assert_int_equal(stats.ss_commits, 2);
	assert_int_equal(stats.ss_units, 4);
	assert_int_equal(stats.ss_transient, 1);
	assert_int_equal(stats.ss_batch_hist[1], 1);

	/* The rolled-back key was not consumed: its retry runs. */
	bad.ap_result = STORE_APPLY_DONE;
	claim_init(&group[1], "evt_g2", 1, T0 + 1000, &bad);
	assert_int_equal(submit_one(fx->fx_st, &group[1]), 0);
	assert_int_equal(group[1].sc_outcome, STORE_NEW);
	store_claim_finish(&group[1]);
}

static void test_failed_commit_makes_every_claim_of_the_batch_transient(void **state)
{
	struct fixture *fx = *state;
	struct applier ok = {.ap_result = STORE_APPLY_DONE};
	struct applier orphan = {.ap_result = STORE_APPLY_DONE, .ap_orphan = 1};
	struct store_claim group[2];
	struct store_stats stats;
	size_t i;

	claim_init(&group[0], "evt_c1", 1, T0, &ok);
	claim_init(&group[1], "evt_c2", 1, T0, &orphan);
	assert_int_equal(store_submit(fx->fx_st, group, 2), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(group[i].sc_outcome, STORE_TRANSIENT);
		assert_true(group[i].sc_retry_after_s >= 1);
		assert_int_equal(group[i].sc_reply.reply_status, 0);
		store_claim_finish(&group[i]);
	}
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 0);
	store_get_stats(fx->fx_st, &stats);
	assert_int_equal(stats.ss_transient, 2);

	/* The writer keeps serving. */
	claim_init(&group[0], "evt_c1", 1, T0 + 1000, &ok);
	assert_int_equal(submit_one(fx->fx_st, &group[0]), 0);
	assert_int_equal(group[0].sc_outcome, STORE_NEW);
	store_claim_finish(&group[0]);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 1);
}

struct storm {
	struct store *sm_st;
	pthread_barrier_t *sm_barrier;
	struct applier *sm_applier;
	const char *sm_key;
	enum store_outcome sm_outcome;
	int sm_reply_ok;
};

static void *storm_thread(void *arg)
{
	struct storm *s = arg;
	struct store_claim c;

	claim_init(&c, s->sm_key, 7, T0, s->sm_applier);
	pthread_barrier_wait(s->sm_barrier);
	if (store_submit(s->sm_st, &c, 1) == 0) {
		s->sm_outcome = c.sc_outcome;
		s->sm_reply_ok =
		        c.sc_reply.reply_status == 200 &&
		        c.sc_reply.reply_body_len == REPLY_BODY_LEN &&
		        memcmp(c.sc_reply.reply_body, reply_body_bytes, REPLY_BODY_LEN) == 0;
	}
	store_claim_finish(&c);
	return NULL;
}

static void test_identical_claims_from_many_threads_run_apply_once(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct storm storms[STORM_THREADS];
	pthread_t threads[STORM_THREADS];
	pthread_barrier_t barrier;
	int news = 0;
	int replays = 0;
	size_t i;

	assert_int_equal(pthread_barrier_init(&barrier, NULL, STORM_THREADS), 0);
	for (i = 0; i < STORM_THREADS; i++) {
		storms[i] = (struct storm){
		        .sm_st = fx->fx_st,
		        .sm_barrier = &barrier,
		        .sm_applier = &ap,
		        .sm_key = "evt_storm",
		        .sm_outcome = STORE_TRANSIENT,
		};
		assert_int_equal(pthread_create(&threads[i], NULL, storm_thread, &storms[i]), 0);
	}
	for (i = 0; i < STORM_THREADS; i++) {
		pthread_join(threads[i], NULL);
		news += storms[i].sm_outcome == STORE_NEW;
		replays += storms[i].sm_outcome == STORE_REPLAYED;
		assert_true(storms[i].sm_reply_ok);
	}
	pthread_barrier_destroy(&barrier);
	assert_int_equal(news, 1);
	assert_int_equal(replays, STORM_THREADS - 1);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 1);
}

static void *distinct_thread(void *arg)
{
	struct storm *s = arg;
	struct store_claim c;

	claim_init(&c, s->sm_key, 1, T0, s->sm_applier);
	store_submit(s->sm_st, &c, 1);
	s->sm_outcome = c.sc_outcome;
	store_claim_finish(&c);
	return NULL;
}

/* Holds the writer inside one unit until opened, so that others queue up. */
struct gate {
	struct store *gt_st;
	atomic_int gt_entered;
	atomic_int gt_open;
};

static int unit_gate(struct store_tx *tx, void *arg)
{
	struct gate *g = arg;

	atomic_store(&g->gt_entered, 1);
	while (!atomic_load(&g->gt_open)) {
		usleep(1000);
	}
	return 0;
}

static void *gate_thread(void *arg)
{
	struct gate *g = arg;

	store_write(g->gt_st, T0, unit_gate, g);
	return NULL;
}

static void test_claims_queued_together_commit_as_one_batch_except_the_transient_one(void **state)
{
	struct fixture *fx = *state;
	struct applier ok = {.ap_result = STORE_APPLY_DONE};
	struct applier bad = {.ap_result = STORE_APPLY_TRANSIENT};
	struct storm storms[STORM_THREADS];
	pthread_t threads[STORM_THREADS];
	char keys[STORM_THREADS][16];
	struct gate gate = {.gt_st = fx->fx_st};
	pthread_t gater;
	struct store_stats stats;
	uint64_t batched = 0;
	size_t i;

	assert_int_equal(pthread_create(&gater, NULL, gate_thread, &gate), 0);
	while (!atomic_load(&gate.gt_entered)) {
		usleep(1000);
	}
	for (i = 0; i < STORM_THREADS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "evt_d%zu", i);
		storms[i] = (struct storm){
		        .sm_st = fx->fx_st,
		        .sm_applier = i == 5 ? &bad : &ok,
		        .sm_key = keys[i],
		};
		assert_int_equal(pthread_create(&threads[i], NULL, distinct_thread, &storms[i]), 0);
	}
	usleep(300 * 1000);
	atomic_store(&gate.gt_open, 1);
	pthread_join(gater, NULL);
	for (i = 0; i < STORM_THREADS; i++) {
		pthread_join(threads[i], NULL);
		assert_int_equal(storms[i].sm_outcome, i == 5 ? STORE_TRANSIENT : STORE_NEW);
	}
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), STORM_THREADS - 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"),
	                 STORM_THREADS - 1);

	store_get_stats(fx->fx_st, &stats);
	assert_int_equal(stats.ss_units, STORM_THREADS + 2);
	assert_int_equal(stats.ss_transient, 1);
	for (i = 2; i < 8; i++) {
		batched += stats.ss_batch_hist[i];
	}
	assert_true(batched >= 1);
	assert_true(stats.ss_commits < stats.ss_units / 2);
}

static void test_batch_size_one_commits_each_unit_alone(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;
	struct store_stats stats;
	int i;

	store_destroy(fx->fx_st);
	assert_int_equal(fixture_open(fx, 1), 0);
	for (i = 0; i < 3; i++) {
		char key[16];

		snprintf(key, sizeof(key), "evt_b%d", i);
		claim_init(&c, key, 1, T0, &ap);
		assert_int_equal(submit_one(fx->fx_st, &c), 0);
		assert_int_equal(c.sc_outcome, STORE_NEW);
		store_claim_finish(&c);
	}
	store_get_stats(fx->fx_st, &stats);
	assert_int_equal(stats.ss_commits, 3);
	assert_int_equal(stats.ss_batch_hist[0], 3);
}

/* ---- asynchronous submission ---- */

/* Counts completions of async submissions; each slot must hear once. */
struct async_wait {
	pthread_mutex_t aw_mutex;
	pthread_cond_t aw_cond;
	int aw_calls[64];
	int aw_results[64];
	int aw_total;
	pthread_t aw_thread[64];
};

struct async_slot {
	struct async_wait *as_w;
	int as_i;
};

static void async_done(void *arg, int result)
{
	struct async_slot *sl = arg;
	struct async_wait *w = sl->as_w;

	pthread_mutex_lock(&w->aw_mutex);
	w->aw_calls[sl->as_i]++;
	w->aw_results[sl->as_i] = result;
	w->aw_thread[sl->as_i] = pthread_self();
	w->aw_total++;
	pthread_cond_broadcast(&w->aw_cond);
	pthread_mutex_unlock(&w->aw_mutex);
}

static void async_wait_for(struct async_wait *w, int total)
{
	pthread_mutex_lock(&w->aw_mutex);
	while (w->aw_total < total) {
		pthread_cond_wait(&w->aw_cond, &w->aw_mutex);
	}
	pthread_mutex_unlock(&w->aw_mutex);
}

static void test_async_completion_runs_once_per_submission_after_commit(void **state)
{
	struct fixture *fx = *state;
	struct async_wait w = {.aw_mutex = PTHREAD_MUTEX_INITIALIZER,
	                       .aw_cond = PTHREAD_COND_INITIALIZER};
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c[40];
	struct async_slot slots[40];
	char keys[40][16];
	struct gate gate = {.gt_st = fx->fx_st};
	pthread_t gater;
	size_t i;

	/* The writer is held, so every submission is queued and none can
	 * complete before all are in: they commit together. */
	assert_int_equal(pthread_create(&gater, NULL, gate_thread, &gate), 0);
	while (!atomic_load(&gate.gt_entered)) {
		usleep(1000);
	}
	for (i = 0; i < 40; i++) {
		/* Every fourth key repeats the one before: a duplicate in flight. */
		snprintf(keys[i], sizeof(keys[i]), "evt_a%zu", i % 4 == 3 ? i - 1 : i);
		claim_init(&c[i], keys[i], 3, T0, &ap);
		slots[i] = (struct async_slot){.as_w = &w, .as_i = (int)i};
		assert_int_equal(store_submit_async(fx->fx_st, &c[i], 1, async_done, &slots[i]), 0);
	}
	pthread_mutex_lock(&w.aw_mutex);
	assert_int_equal(w.aw_total, 0);
	pthread_mutex_unlock(&w.aw_mutex);
	atomic_store(&gate.gt_open, 1);
	pthread_join(gater, NULL);
	async_wait_for(&w, 40);
	for (i = 0; i < 40; i++) {
		assert_int_equal(w.aw_calls[i], 1);
		assert_int_equal(w.aw_results[i], 0);
		assert_false(pthread_equal(w.aw_thread[i], pthread_self()));
		assert_int_equal(c[i].sc_outcome, i % 4 == 3 ? STORE_REPLAYED : STORE_NEW);
		assert_reply_is_the_original(&c[i].sc_reply);
		store_claim_finish(&c[i]);
	}
	assert_int_equal(atomic_load(&ap.ap_runs), 30);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 30);
	/* Nothing is counted twice, however long the wait. */
	usleep(50 * 1000);
	assert_int_equal(w.aw_total, 40);
}

/* A completion that holds on until told to go. */
struct held_done {
	atomic_int hd_entered;
	atomic_int hd_release;
	atomic_int hd_left;
};

static void held_done_fn(void *arg, int result)
{
	struct held_done *hd = arg;

	(void)result;
	atomic_store(&hd->hd_entered, 1);
	while (!atomic_load(&hd->hd_release)) {
		usleep(1000);
	}
	atomic_store(&hd->hd_left, 1);
}

/* The order of completions, and what the first had done when the second
 * ran. */
struct order_slot {
	struct async_slot os_slot;
	struct held_done *os_before;
	int os_before_left;
};

static void order_done(void *arg, int result)
{
	struct order_slot *os = arg;

	os->os_before_left = atomic_load(&os->os_before->hd_left);
	async_done(&os->os_slot, result);
}

/* The writer hands a committed batch's completions over and goes on: a
 * batch commits while the completion of the batch before it still runs,
 * and the completions still run in the order their batches committed. */
static void test_a_batch_commits_while_the_completion_of_the_batch_before_runs(void **state)
{
	struct fixture *fx = *state;
	struct async_wait w = {.aw_mutex = PTHREAD_MUTEX_INITIALIZER,
	                       .aw_cond = PTHREAD_COND_INITIALIZER};
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct held_done hd = {.hd_entered = 0};
	struct order_slot os = {.os_slot = {.as_w = &w, .as_i = 0}, .os_before = &hd};
	struct store_claim a;
	struct store_claim b;
	int64_t n = 0;
	int i;

	claim_init(&a, "evt_held_done", 3, T0, &ap);
	claim_init(&b, "evt_after_held", 3, T0, &ap);
	assert_int_equal(store_submit_async(fx->fx_st, &a, 1, held_done_fn, &hd), 0);
	while (!atomic_load(&hd.hd_entered)) {
		usleep(1000);
	}
	assert_int_equal(store_submit_async(fx->fx_st, &b, 1, order_done, &os), 0);
	/* b commits with a's completion still running (at most 10 s). */
	for (i = 0; i < 10000 && (n = count_of(fx->fx_st, "SELECT count(*) FROM "
	                                                  "idempotency_records WHERE idem_key = "
	                                                  "'evt_after_held'")) == 0;
	     i++) {
		usleep(1000);
	}
	if (n != 1) {
		atomic_store(&hd.hd_release, 1); /* or the store could not stop */
	}
	assert_int_equal(n, 1);
	assert_int_equal(atomic_load(&hd.hd_left), 0);
	assert_int_equal(w.aw_total, 0);
	atomic_store(&hd.hd_release, 1);
	async_wait_for(&w, 1);
	assert_int_equal(os.os_before_left, 1);
	assert_int_equal(w.aw_results[0], 0);
	assert_int_equal(a.sc_outcome, STORE_NEW);
	assert_int_equal(b.sc_outcome, STORE_NEW);
	assert_int_equal(atomic_load(&ap.ap_runs), 2);
	store_claim_finish(&a);
	store_claim_finish(&b);
}

/* A plain write that holds the writer for sw_ms (store_write, run on a
 * thread of its own). */
struct slow_write {
	struct store *sw_st;
	int sw_ms;
	atomic_int sw_inside;
	int sw_rc;
};

static int slow_write_fn(struct store_tx *tx, void *arg)
{
	struct slow_write *sw = arg;

	(void)tx;
	atomic_store(&sw->sw_inside, 1);
	usleep((useconds_t)sw->sw_ms * 1000);
	return 0;
}

static void *slow_write_run(void *arg)
{
	struct slow_write *sw = arg;

	sw->sw_rc = store_write(sw->sw_st, T0, slow_write_fn, sw);
	return NULL;
}

/* idemhook_store_unit_seconds_total: a claim queued behind a write that
 * holds the writer 200 ms counts that as queued, the write's own batch as
 * batch, and a claim whose completion waits 200 ms behind another's as
 * completion; each unit once in idemhook_store_units_completed_total. */
static void test_each_unit_counts_its_time_queued_in_its_batch_and_to_its_completion(void **state)
{
	struct fixture *fx = *state;
	struct async_wait w = {.aw_mutex = PTHREAD_MUTEX_INITIALIZER,
	                       .aw_cond = PTHREAD_COND_INITIALIZER};
	struct async_slot slot = {.as_w = &w, .as_i = 0};
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct held_done hd = {.hd_entered = 0};
	struct slow_write sw = {.sw_st = fx->fx_st, .sw_ms = 200};
	struct store_stats before;
	struct store_stats after;
	struct store_claim a;
	struct store_claim b;
	pthread_t t;
	int i;

	store_get_stats(fx->fx_st, &before);
	claim_init(&a, "evt_stage_a", 3, T0, &ap);
	claim_init(&b, "evt_stage_b", 3, T0, &ap);
	assert_int_equal(pthread_create(&t, NULL, slow_write_run, &sw), 0);
	while (!atomic_load(&sw.sw_inside)) {
		usleep(1000);
	}
	/* a waits for the writer, then its completion holds the completion
	 * thread while b commits. */
	assert_int_equal(store_submit_async(fx->fx_st, &a, 1, held_done_fn, &hd), 0);
	while (!atomic_load(&hd.hd_entered)) {
		usleep(1000);
	}
	assert_int_equal(store_submit_async(fx->fx_st, &b, 1, async_done, &slot), 0);
	for (i = 0; i < 10000 && count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records "
	                                             "WHERE idem_key = 'evt_stage_b'") == 0;
	     i++) {
		usleep(1000);
	}
	usleep(200 * 1000);
	atomic_store(&hd.hd_release, 1);
	async_wait_for(&w, 1);
	pthread_join(t, NULL);
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(sw.sw_rc, 0);
	assert_int_equal(a.sc_outcome, STORE_NEW);
	assert_int_equal(b.sc_outcome, STORE_NEW);
	print_message("queued %.3f s, batch %.3f s, completion %.3f s\n",
	              after.ss_unit_queued_seconds - before.ss_unit_queued_seconds,
	              after.ss_unit_batch_seconds - before.ss_unit_batch_seconds,
	              after.ss_unit_completion_seconds - before.ss_unit_completion_seconds);
	assert_int_equal(after.ss_units_completed, before.ss_units_completed + 3);
	assert_true(after.ss_unit_queued_seconds - before.ss_unit_queued_seconds >= 0.15);
	assert_true(after.ss_unit_batch_seconds - before.ss_unit_batch_seconds >= 0.2);
	assert_true(after.ss_unit_completion_seconds - before.ss_unit_completion_seconds >= 0.2);
	assert_true(after.ss_unit_queued_seconds - before.ss_unit_queued_seconds < 10);
	assert_true(after.ss_unit_batch_seconds - before.ss_unit_batch_seconds < 10);
	assert_true(after.ss_unit_completion_seconds - before.ss_unit_completion_seconds < 10);
	store_claim_finish(&a);
	store_claim_finish(&b);
}

static void test_async_duplicate_of_a_done_key_completes_before_submit_returns(void **state)
{
	struct fixture *fx = *state;
	struct async_wait w = {.aw_mutex = PTHREAD_MUTEX_INITIALIZER,
	                       .aw_cond = PTHREAD_COND_INITIALIZER};
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct async_slot slot = {.as_w = &w, .as_i = 0};
	struct store_claim c;

	claim_init(&c, "evt_fast", 4, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	store_claim_finish(&c);

	claim_init(&c, "evt_fast", 4, T0 + 1000, &ap);
	assert_int_equal(store_submit_async(fx->fx_st, &c, 1, async_done, &slot), 0);
	/* Answered from this thread's read connection: no writer involved. */
	assert_int_equal(w.aw_total, 1);
	assert_true(pthread_equal(w.aw_thread[0], pthread_self()));
	assert_int_equal(c.sc_outcome, STORE_REPLAYED);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	store_claim_finish(&c);
}

struct destroyer {
	struct store *ds_st;
	struct gate *ds_gate;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *ds = arg;

	store_destroy(ds->ds_st);
	return NULL;
}

static void test_destroy_finishes_queued_work_and_calls_every_completion(void **state)
{
	struct fixture *fx = *state;
	struct async_wait w = {.aw_mutex = PTHREAD_MUTEX_INITIALIZER,
	                       .aw_cond = PTHREAD_COND_INITIALIZER};
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c[20];
	struct async_slot slots[20];
	char keys[20][16];
	struct gate gate = {.gt_st = fx->fx_st};
	struct destroyer ds = {.ds_st = fx->fx_st, .ds_gate = &gate};
	pthread_t gater;
	pthread_t destroyer;
	size_t i;

	assert_int_equal(pthread_create(&gater, NULL, gate_thread, &gate), 0);
	while (!atomic_load(&gate.gt_entered)) {
		usleep(1000);
	}
	for (i = 0; i < 20; i++) {
		snprintf(keys[i], sizeof(keys[i]), "evt_q%zu", i);
		claim_init(&c[i], keys[i], 5, T0, &ap);
		slots[i] = (struct async_slot){.as_w = &w, .as_i = (int)i};
		assert_int_equal(store_submit_async(fx->fx_st, &c[i], 1, async_done, &slots[i]), 0);
	}
	/* Shutting down with work queued: destroy waits for it. */
	assert_int_equal(pthread_create(&destroyer, NULL, destroy_thread, &ds), 0);
	usleep(100 * 1000);
	atomic_store(&gate.gt_open, 1);
	pthread_join(destroyer, NULL);
	pthread_join(gater, NULL);
	assert_int_equal(w.aw_total, 20);
	for (i = 0; i < 20; i++) {
		assert_int_equal(w.aw_calls[i], 1);
		assert_int_equal(c[i].sc_outcome, STORE_NEW);
		store_claim_finish(&c[i]);
	}
	/* What was acknowledged is on disk. */
	assert_int_equal(fixture_open(fx, 0), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 20);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 20);
}

static void test_read_only_store_refuses_async_work_and_still_completes_it(void **state)
{
	struct fixture *fx = *state;
	struct async_wait w = {.aw_mutex = PTHREAD_MUTEX_INITIALIZER,
	                       .aw_cond = PTHREAD_COND_INITIALIZER};
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct async_slot slot = {.as_w = &w, .as_i = 0};
	struct store_options so = {.so_path = fx->fx_path, .so_read_only = 1};
	struct store_claim c;
	struct store *ro = store_create(&so);

	assert_non_null(ro);
	claim_init(&c, "evt_ro", 1, T0, &ap);
	assert_int_equal(store_submit_async(ro, &c, 1, async_done, &slot), -1);
	assert_int_equal(w.aw_total, 1);
	assert_int_equal(w.aw_results[0], -1);
	assert_int_equal(c.sc_outcome, STORE_TRANSIENT);
	assert_true(c.sc_retry_after_s >= 1);
	store_claim_finish(&c);
	store_destroy(ro);
}

static void test_batch_histogram_counts_batches_whether_or_not_they_commit(void **state)
{
	struct fixture *fx = *state;
	struct applier ok = {.ap_result = STORE_APPLY_DONE};
	struct applier orphan = {.ap_result = STORE_APPLY_DONE, .ap_orphan = 1};
	struct store_claim group[2];
	struct store_stats before;
	struct store_stats after;
	uint64_t buckets = 0;
	size_t i;

	store_get_stats(fx->fx_st, &before);
	claim_init(&group[0], "evt_h1", 1, T0, &ok);
	claim_init(&group[1], "evt_h2", 1, T0, &orphan);
	/* COMMIT fails on the deferred foreign key: a batch without a commit. */
	assert_int_equal(store_submit(fx->fx_st, group, 2), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(group[i].sc_outcome, STORE_TRANSIENT);
		store_claim_finish(&group[i]);
	}
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(after.ss_commits, before.ss_commits);
	assert_int_equal(after.ss_batches, before.ss_batches + 1);
	assert_int_equal(after.ss_units, before.ss_units + 2);
	for (i = 0; i < 8; i++) {
		buckets += after.ss_batch_hist[i];
	}
	/* Buckets, _sum and _count of idemhook_store_batch_size agree. */
	assert_int_equal(buckets, after.ss_batches);
	assert_int_equal(after.ss_batch_hist[1], before.ss_batch_hist[1] + 1);
}

/* ---- transient failures ---- */

struct page_limit {
	int64_t pl_pages; /* 0: set to the current size */
};

static int unit_limit_pages(struct store_tx *tx, void *arg)
{
	struct page_limit *pl = arg;
	struct store_row row;
	char sql[64];
	int64_t pages = pl->pl_pages;

	if (pages == 0) {
		if (store_query(tx, "PRAGMA page_count", NULL, 0, &row) != 1) {
			return -1;
		}
		pages = store_row_int(&row, 0);
		store_row_finish(&row);
	}
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld", (long long)pages);
	return store_exec(tx, sql, NULL, 0, NULL);
}

static void test_disk_full_is_transient_and_the_store_keeps_serving(void **state)
{
	struct fixture *fx = *state;
	struct applier big = {.ap_result = STORE_APPLY_DONE, .ap_fill = 256 * 1024};
	struct page_limit tight = {0};
	struct page_limit roomy = {.pl_pages = 1000000};
	struct store_claim c;
	struct store_stats stats;
	enum store_status status;
	unsigned char fp[32];

	assert_int_equal(store_write(fx->fx_st, T0, unit_limit_pages, &tight), 0);

	claim_init(&c, "evt_full", 1, T0, &big);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_TRANSIENT);
	assert_true(c.sc_retry_after_s >= 1);
	store_claim_finish(&c);
	assert_int_equal(store_peek(fx->fx_st, "stripe", "evt_full", T0, RETENTION_MS, &status, fp),
	                 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 0);
	store_get_stats(fx->fx_st, &stats);
	assert_int_equal(stats.ss_transient, 1);

	assert_int_equal(store_write(fx->fx_st, T0, unit_limit_pages, &roomy), 0);
	claim_init(&c, "evt_full", 1, T0 + 1000, &big);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	store_claim_finish(&c);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 1);
}

static void test_disk_full_in_one_claim_of_a_group_leaves_the_others_committed(void **state)
{
	struct fixture *fx = *state;
	struct applier ok = {.ap_result = STORE_APPLY_DONE};
	struct applier big = {
	        .ap_result = STORE_APPLY_DONE, .ap_fill = 256 * 1024, .ap_tag = "big"};
	struct page_limit tight = {0};
	struct page_limit room = {0};
	struct store_claim group[3];
	size_t i;

	/* Room for small rows, none for the big blob. */
	assert_int_equal(store_write(fx->fx_st, T0, unit_limit_pages, &tight), 0);
	room.pl_pages = count_of(fx->fx_st, "PRAGMA page_count") + 8;
	assert_int_equal(store_write(fx->fx_st, T0, unit_limit_pages, &room), 0);

	claim_init(&group[0], "evt_f1", 1, T0, &ok);
	claim_init(&group[1], "evt_f2", 1, T0, &big);
	claim_init(&group[2], "evt_f3", 1, T0, &ok);
	assert_int_equal(store_submit(fx->fx_st, group, 3), 0);
	assert_int_equal(group[0].sc_outcome, STORE_NEW);
	assert_int_equal(group[1].sc_outcome, STORE_TRANSIENT);
	assert_true(group[1].sc_retry_after_s >= 1);
	assert_int_equal(group[2].sc_outcome, STORE_NEW);
	assert_reply_is_the_original(&group[0].sc_reply);
	for (i = 0; i < 3; i++) {
		store_claim_finish(&group[i]);
	}
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'big'"), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 2);
}

static int unit_fail(struct store_tx *tx, void *arg)
{
	assert_int_equal(
	        store_exec(tx, "INSERT INTO scratch (tag) VALUES ('undone')", NULL, 0, NULL), 0);
	return -1;
}

static int unit_returns_seven(struct store_tx *tx, void *arg)
{
	assert_int_equal(store_tx_now(tx), T0 + 7);
	return store_exec(tx, "INSERT INTO scratch (tag) VALUES ('kept')", NULL, 0, NULL) < 0 ? -1
	                                                                                      : 7;
}

static void test_write_returns_fn_value_and_rolls_back_on_failure(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(store_write(fx->fx_st, T0, unit_fail, NULL), -1);
	assert_int_equal(store_write(fx->fx_st, T0 + 7, unit_returns_seven, NULL), 7);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'undone'"),
	                 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'kept'"), 1);
}

/* ---- the writer's WAL at synchronous = FULL ---- */

#define WAL_ROWS 200

static int unit_fill_pages(struct store_tx *tx, void *arg)
{
	static unsigned char blob[1000];
	struct store_value p[] = {store_text("page"), store_blob(blob, sizeof(blob))};
	int i;

	(void)arg;
	for (i = 0; i < WAL_ROWS; i++) {
		blob[0] = (unsigned char)i;
		if (store_exec(tx, "INSERT INTO scratch (tag, data) VALUES (?, ?)", p, 2, NULL) <
		    0) {
			return -1;
		}
	}
	return 0;
}

/* One figure of this process's /proc/self/io ("syscw", "wchar"), -1 if
 * unreadable. */
static long long proc_io(const char *field)
{
	char line[128];
	size_t n = strlen(field);
	long long v = -1;
	FILE *f = fopen("/proc/self/io", "r");

	if (f == NULL) {
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, field, n) == 0 && line[n] == ':' &&
		    sscanf(line + n + 1, "%lld", &v) == 1) {
			break;
		}
	}
	fclose(f);
	return v;
}

/* A commit of 200 rows of 1,000 bytes writes more than 200 WAL frames, each
 * of which SQLite hands over as two writes (header, page); the writer's WAL
 * gathers them into a few, and what it wrote is committed and durable: a
 * reader sees every row, and so does the store opened again. */
static void test_full_sync_commit_writes_its_wal_frames_in_a_few_calls(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {.so_path = fx->fx_path, .so_sync = STORE_SYNC_FULL};
	long long before;
	long long after;

	store_destroy(fx->fx_st);
	fx->fx_st = store_create(&so);
	assert_non_null(fx->fx_st);
	before = proc_io("syscw");
	assert_true(before >= 0);
	assert_int_equal(store_write(fx->fx_st, T0, unit_fill_pages, NULL), 0);
	after = proc_io("syscw");
	assert_true(after - before < WAL_ROWS / 4);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'page'"),
	                 WAL_ROWS);
	store_destroy(fx->fx_st);
	fx->fx_st = store_create(&so);
	assert_non_null(fx->fx_st);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'page' AND "
	                                     "length(data) = 1000"),
	                 WAL_ROWS);
}

#define SUBJ_ROWS 600 /* of 300 bytes: three to a 1 KiB page */
#define SUBJ_ROWS_SQL "600"

static int unit_fill_small_rows(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx,
	                  "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i "
	                  "< " SUBJ_ROWS_SQL ") "
	                  "INSERT INTO scratch (tag, data) SELECT 'small', randomblob(300) FROM c",
	                  NULL, 0, NULL);
}

static int unit_rewrite_small_rows(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx, "UPDATE scratch SET data = zeroblob(300) WHERE tag = 'small'", NULL,
	                  0, NULL);
}

/* A unit's savepoint keeps the old contents of the pages it changes (the
 * sub-journal). Past 64 KiB SQLite moved it into a temporary file, so a
 * batch of many claims wrote every page a third time (13 KB per callback
 * at 256 connections, issue 24); it now stays in memory up to 4 MiB, and a
 * unit that changes 200 existing pages writes its WAL frames and little
 * else. */
static void test_a_units_savepoint_journal_is_not_written_to_a_file(void **state)
{
	struct fixture *fx = *state;
	long long before;
	long long after;

	assert_int_equal(store_write(fx->fx_st, T0, unit_fill_small_rows, NULL), 0);
	before = proc_io("wchar");
	assert_true(before >= 0);
	assert_int_equal(store_write(fx->fx_st, T0, unit_rewrite_small_rows, NULL), 0);
	after = proc_io("wchar");
	/* The WAL: a frame (a 24-byte header and a 1 KiB page) per three
	 * rows; the sub-journal in a file would add as much again. */
	assert_true(after - before >= (long long)SUBJ_ROWS / 3 * 1024);
	assert_true(after - before < (long long)SUBJ_ROWS / 3 * (1024 + 24) * 3 / 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'small' AND "
	                                     "data = zeroblob(300)"),
	                 SUBJ_ROWS);
}

static int unit_rewrite_many_rows(struct store_tx *tx, void *arg)
{
	(void)arg;
	if (store_exec(tx,
	               "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < "
	               "18000) "
	               "INSERT INTO scratch (tag, data) SELECT 'many', randomblob(300) FROM c",
	               NULL, 0, NULL) < 0) {
		return -1;
	}
	return 0;
}

static int unit_update_many_rows(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx, "UPDATE scratch SET data = zeroblob(300) WHERE tag = 'many'", NULL, 0,
	                  NULL);
}

/* A unit whose sub-journal outgrows memory (6,000 pages: more than
 * STORE_SUBJOURNAL_SPILL) moves it into a file, whose first write is the
 * whole of it: it must not fail as a full disk, on the writer (at NORMAL
 * here) as on every other connection. */
static void test_a_unit_larger_than_the_sub_journal_in_memory_commits(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(store_write(fx->fx_st, T0, unit_rewrite_many_rows, NULL), 0);
	assert_int_equal(store_write(fx->fx_st, T0, unit_update_many_rows, NULL), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'many' AND "
	                                     "data = zeroblob(300)"),
	                 18000);
}

/* ---- the page cache's truncations (store_pcache) ---- */

#define PC_COMMITS 60
#define PC_ROWS 20 /* per commit, each with a random 60-byte key */

static int unit_create_keyed(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx, "CREATE TABLE IF NOT EXISTS keyed (k TEXT PRIMARY KEY, v BLOB)", NULL,
	                  0, NULL);
}

/* PC_ROWS rows at random places in keyed's key index: leaves split all
 * over it, as the random keys of unique callbacks make them split. */
static int unit_insert_keyed(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(
	        tx,
	        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i "
	        "< 20) INSERT INTO keyed (k, v) SELECT hex(randomblob(30)), randomblob(40) "
	        "FROM c",
	        NULL, 0, NULL);
}

/* The same, and then fails: the transaction is rolled back, and the pages
 * it added past the end of the database must leave the cache. */
static int unit_insert_keyed_then_fail(struct store_tx *tx, void *arg)
{
	if (store_exec(
	            tx,
	            "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i "
	            "< 3000) INSERT INTO keyed (k, v) SELECT 'gone' || i, randomblob(200) FROM c",
	            NULL, 0, NULL) < 0) {
		return -1;
	}
	return unit_insert_keyed(tx, arg) < 0 ? -1 : -1;
}

/* A b-tree split that puts its new pages in order swaps two page numbers
 * through the lock-byte page's, and SQLite's cache then walked its whole
 * hash table at every COMMIT (3 to 7 % of the writer's CPU, issue 24). The
 * wrapper skips a truncation that has nothing to drop: every COMMIT of
 * these splits skips its own. */
static void test_a_commit_after_page_splits_does_not_walk_the_page_cache(void **state)
{
	struct fixture *fx = *state;
	struct store_stats before;
	struct store_stats after;
	int i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_create_keyed, NULL), 0);
	for (i = 0; i < 20; i++) { /* a few thousand pages in the writer's cache */
		assert_int_equal(store_write(fx->fx_st, T0, unit_insert_keyed, NULL), 0);
	}
	store_get_stats(fx->fx_st, &before);
	for (i = 0; i < PC_COMMITS; i++) {
		assert_int_equal(store_write(fx->fx_st, T0, unit_insert_keyed, NULL), 0);
	}
	store_get_stats(fx->fx_st, &after);
	assert_true(after.ss_cache_truncations_skipped - before.ss_cache_truncations_skipped >=
	            PC_COMMITS);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM keyed"), (80) * PC_ROWS);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM pragma_integrity_check "
	                                     "WHERE integrity_check <> 'ok'"),
	                 0);
}

/* A rolled-back transaction that grew the database: its pages past the
 * end are dropped (the truncation is passed on), and the commits that
 * reuse those page numbers afterwards read none of them back. */
static void test_pages_past_the_end_of_a_rolled_back_transaction_leave_the_cache(void **state)
{
	struct fixture *fx = *state;
	struct store_stats before;
	struct store_stats after;
	int i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_create_keyed, NULL), 0);
	for (i = 0; i < 10; i++) {
		assert_int_equal(store_write(fx->fx_st, T0, unit_insert_keyed, NULL), 0);
	}
	store_get_stats(fx->fx_st, &before);
	for (i = 0; i < 5; i++) {
		assert_true(store_write(fx->fx_st, T0, unit_insert_keyed_then_fail, NULL) < 0);
		assert_int_equal(store_write(fx->fx_st, T0, unit_insert_keyed, NULL), 0);
		assert_int_equal(store_write(fx->fx_st, T0, unit_insert_keyed, NULL), 0);
	}
	store_get_stats(fx->fx_st, &after);
	assert_true(after.ss_cache_truncations - before.ss_cache_truncations >= 5);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM keyed"), 20 * PC_ROWS);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM keyed WHERE k LIKE 'gone%'"), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM pragma_integrity_check "
	                                     "WHERE integrity_check <> 'ok'"),
	                 0);
	/* Once more from the file, by a store that has read nothing yet. */
	store_destroy(fx->fx_st);
	fx->fx_st = store_create(&(struct store_options){.so_path = fx->fx_path});
	assert_non_null(fx->fx_st);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM keyed"), 20 * PC_ROWS);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM pragma_integrity_check "
	                                     "WHERE integrity_check <> 'ok'"),
	                 0);
}

/* Readers that keep reading while the writer commits: each read holds a
 * snapshot of the WAL for a moment, and there is always one. */
struct wal_readers {
	struct store *wr_st;
	atomic_int wr_stop;
	atomic_long wr_reads;
};

static void *wal_reader_main(void *arg)
{
	struct wal_readers *wr = arg;

	while (!atomic_load(&wr->wr_stop)) {
		if (count_of(wr->wr_st, "SELECT count(*) FROM scratch WHERE rowid = 1") >= 0) {
			atomic_fetch_add(&wr->wr_reads, 1);
		}
	}
	return NULL;
}

static long long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

#define WAL_READERS 4
#define WAL_WRITES 400       /* of WAL_ROWS pages each: 80,000 pages */
#define WAL_WRITES_SLOW 200  /* under valgrind: 40,000 pages, still past the cap */
#define WAL_CAP_FRAMES 36000 /* store_sqlite.c's hard cap of 32,000, and a few commits of slack */

/* Under sustained writes with readers always busy, the WAL file stays below
 * the hard cap: the writer checkpoints and restarts it itself (waiting for
 * the readers' snapshots, which are short) rather than letting it grow. */
static void test_the_wal_stays_bounded_under_sustained_writes_and_reads(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {.so_path = fx->fx_path, .so_sync = STORE_SYNC_FULL};
	struct wal_readers wr = {.wr_reads = 0};
	struct store_stats ss;
	pthread_t readers[WAL_READERS];
	char wal[160];
	long long max_size = 0;
	long long size;
	/* valgrind runs one thread at a time: with four readers always busy
	 * the writer gets a sliver of it, and 80,000 pages took most of an hour */
	int writes = getenv("IDEMHOOK_UNDER_VALGRIND") != NULL ? WAL_WRITES_SLOW : WAL_WRITES;
	int i;

	store_destroy(fx->fx_st);
	fx->fx_st = store_create(&so);
	assert_non_null(fx->fx_st);
	wr.wr_st = fx->fx_st;
	snprintf(wal, sizeof(wal), "%s-wal", fx->fx_path);
	for (i = 0; i < WAL_READERS; i++) {
		assert_int_equal(pthread_create(&readers[i], NULL, wal_reader_main, &wr), 0);
	}
	for (i = 0; i < writes; i++) {
		assert_int_equal(store_write(fx->fx_st, T0, unit_fill_pages, NULL), 0);
		size = file_size(wal);
		if (size > max_size) {
			max_size = size;
		}
	}
	atomic_store(&wr.wr_stop, 1);
	for (i = 0; i < WAL_READERS; i++) {
		pthread_join(readers[i], NULL);
	}
	assert_true(atomic_load(&wr.wr_reads) > 0);
	/* A frame is a 24-byte header and a 1 KiB page. */
	assert_true(max_size > 0);
	assert_true(max_size <= (long long)WAL_CAP_FRAMES * (1024 + 24));
	/* The writer started the WAL over, and counted the time it took. */
	store_get_stats(fx->fx_st, &ss);
	assert_true(ss.ss_catch_ups > 0);
	assert_true(ss.ss_catch_up_seconds > 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'page'"),
	                 (int64_t)writes * WAL_ROWS);
}

/* A read transaction that stays open until released: the snapshot it
 * takes at its first read holds the WAL. */
struct wal_hold {
	struct store *wh_st;
	pthread_mutex_t wh_mutex;
	pthread_cond_t wh_cond;
	int wh_holding;
	int wh_release;
};

static int unit_hold_wal(struct store_tx *tx, void *arg)
{
	struct wal_hold *wh = arg;
	struct count_query cq = {.cq_sql = "SELECT count(*) FROM scratch", .cq_value = -1};

	if (unit_count(tx, &cq) < 0) {
		return -1;
	}
	pthread_mutex_lock(&wh->wh_mutex);
	wh->wh_holding = 1;
	pthread_cond_broadcast(&wh->wh_cond);
	while (!wh->wh_release) {
		pthread_cond_wait(&wh->wh_cond, &wh->wh_mutex);
	}
	pthread_mutex_unlock(&wh->wh_mutex);
	return 0;
}

static void *wal_holder_main(void *arg)
{
	struct wal_hold *wh = arg;

	assert_int_equal(store_read(wh->wh_st, T0, unit_hold_wal, wh), 0);
	return NULL;
}

#define WAL_HELD_WRITES_MAX 1000 /* of WAL_ROWS pages each, until the warning */
#define WAL_HELD_SMALL 50        /* writes of one row each, once it has warned */

static int unit_fill_one_row(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx, "INSERT INTO scratch (tag, data) VALUES ('one', x'00')", NULL, 0,
	                  NULL);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A read transaction kept open keeps the writer from starting the WAL over
 * past its bound: the gauges say how large and for how long, a warning
 * says why once it has lasted so_wal_held_warn_ms, after which the writer
 * tries again only every 100 ms instead of waiting 20 ms for readers after
 * every batch, and a notice says when the WAL starts over again. */
static void test_a_wal_held_past_its_bound_by_a_reader_is_reported(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {
	        .so_path = fx->fx_path, .so_sync = STORE_SYNC_NORMAL, .so_wal_held_warn_ms = 200};
	struct wal_hold wh = {.wh_mutex = PTHREAD_MUTEX_INITIALIZER,
	                      .wh_cond = PTHREAD_COND_INITIALIZER};
	char log_path[160];
	char log[8192];
	struct store_stats ss;
	uint64_t tries;
	double t0;
	double elapsed;
	int writes = 0;
	pthread_t holder;
	int saved_stderr;
	int log_fd;
	ssize_t n;
	int i;

	store_destroy(fx->fx_st);
	fx->fx_st = store_create(&so);
	assert_non_null(fx->fx_st);
	wh.wh_st = fx->fx_st;
	/* Pages in the WAL for the reader's snapshot to hold. */
	assert_int_equal(store_write(fx->fx_st, T0, unit_fill_pages, NULL), 0);
	assert_int_equal(pthread_create(&holder, NULL, wal_holder_main, &wh), 0);
	pthread_mutex_lock(&wh.wh_mutex);
	while (!wh.wh_holding) {
		pthread_cond_wait(&wh.wh_cond, &wh.wh_mutex);
	}
	pthread_mutex_unlock(&wh.wh_mutex);

	/* The store's log lines, in a file of the fixture's directory that
	 * only this descriptor still names. */
	snprintf(log_path, sizeof(log_path), "%s/store.log", fx->fx_dir);
	log_fd = open(log_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(log_fd >= 0);
	unlink(log_path);
	saved_stderr = dup(STDERR_FILENO);
	assert_true(saved_stderr >= 0);
	assert_true(dup2(log_fd, STDERR_FILENO) >= 0);
	/* Past the bound, and held for longer than the warning's 200 ms. */
	do {
		assert_true(writes < WAL_HELD_WRITES_MAX);
		assert_int_equal(store_write(fx->fx_st, T0, unit_fill_pages, NULL), 0);
		writes++;
		store_get_stats(fx->fx_st, &ss);
	} while (ss.ss_wal_held_seconds < 0.3);
	assert_int_equal(store_write(fx->fx_st, T0, unit_fill_pages, NULL), 0); /* warns */
	writes++;
	store_get_stats(fx->fx_st, &ss);
	assert_true(ss.ss_wal_pages > 32000);
	/* Now a try every 100 ms at most, not one per batch. */
	tries = ss.ss_catch_ups;
	t0 = mono_s();
	for (i = 0; i < WAL_HELD_SMALL; i++) {
		assert_int_equal(store_write(fx->fx_st, T0, unit_fill_one_row, NULL), 0);
	}
	elapsed = mono_s() - t0;
	store_get_stats(fx->fx_st, &ss);
	assert_true((double)(ss.ss_catch_ups - tries) <= elapsed / 0.1 + 2);

	pthread_mutex_lock(&wh.wh_mutex);
	wh.wh_release = 1;
	pthread_cond_broadcast(&wh.wh_cond);
	pthread_mutex_unlock(&wh.wh_mutex);
	pthread_join(holder, NULL);
	usleep(150 * 1000); /* the next try */
	assert_int_equal(store_write(fx->fx_st, T0, unit_fill_pages, NULL), 0);
	/* The writer tries between two batches, after the last one's answers. */
	for (i = 0; i < 300; i++) {
		store_get_stats(fx->fx_st, &ss);
		if (ss.ss_wal_held_seconds == 0) {
			break;
		}
		usleep(10 * 1000);
	}
	assert_true(ss.ss_wal_pages < 32000);
	assert_true(ss.ss_wal_held_seconds == 0);

	assert_true(dup2(saved_stderr, STDERR_FILENO) >= 0);
	close(saved_stderr);
	n = pread(log_fd, log, sizeof(log) - 1, 0);
	close(log_fd);
	assert_true(n > 0);
	log[n] = '\0';
	assert_non_null(strstr(log, "past its bound of 32000"));
	assert_non_null(strstr(log, "a read transaction kept open"));
	assert_non_null(strstr(log, "the WAL starts over, after"));
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'page'"),
	                 (int64_t)(writes + 2) * WAL_ROWS);
}

/* ---- statements ---- */

static int unit_fill_values(struct store_tx *tx, void *arg)
{
	static const unsigned char blob[] = {0, 1, 2, 0xff};
	struct store_value p[] = {store_text("a"), store_blob(blob, sizeof(blob))};
	struct store_value q[] = {store_text(NULL), store_blob("", 0)};
	struct store_value r[] = {store_text("b"), store_null()};
	int64_t changes = -1;

	assert_int_equal(
	        store_exec(tx, "INSERT INTO scratch (tag, data) VALUES (?, ?)", p, 2, &changes), 0);
	assert_int_equal(changes, 1);
	assert_int_equal(
	        store_exec(tx, "INSERT INTO scratch (tag, data) VALUES (?, ?)", q, 2, NULL), 0);
	assert_int_equal(
	        store_exec(tx, "INSERT INTO scratch (tag, data) VALUES (?, ?)", r, 2, NULL), 0);
	assert_int_equal(store_exec(tx, "UPDATE scratch SET tag = tag WHERE tag IS NOT NULL", NULL,
	                            0, &changes),
	                 0);
	assert_int_equal(changes, 2);
	assert_int_equal(store_exec(tx, "SELECT 1", NULL, 0, &changes), 0);
	assert_int_equal(changes, 0);
	/* Wrong parameter counts and bad SQL fail without harm. */
	assert_int_equal(store_exec(tx, "INSERT INTO scratch (tag) VALUES (?)", NULL, 0, NULL), -1);
	assert_int_equal(store_exec(tx, "NOT SQL", NULL, 0, NULL), -1);
	return 0;
}

struct collected {
	int cl_rows;
	int cl_blob_ok;
	int cl_empty_blob_ok;
	int cl_null_ok;
};

static int collect_row(void *arg, const struct store_row *row)
{
	struct collected *cl = arg;
	const char *tag = store_row_text(row, 0);

	cl->cl_rows++;
	assert_int_equal(row->sr_n, 2);
	if (tag != NULL && strcmp(tag, "a") == 0) {
		cl->cl_blob_ok = row->sr_cols[1].sv_type == STORE_BLOB &&
		                 row->sr_cols[1].sv_len == 4 &&
		                 memcmp(row->sr_cols[1].sv_text, "\0\1\2\xff", 4) == 0;
	} else if (tag == NULL) {
		cl->cl_empty_blob_ok =
		        store_row_is_null(row, 0) && row->sr_cols[1].sv_type == STORE_BLOB &&
		        row->sr_cols[1].sv_len == 0 && store_row_text(row, 1) != NULL;
	} else {
		cl->cl_null_ok = store_row_is_null(row, 1) && store_row_text(row, 1) == NULL &&
		                 store_row_int(row, 1) == 0 && store_row_is_null(row, 99);
	}
	return 0;
}

static int stop_after_one(void *arg, const struct store_row *row)
{
	int *n = arg;

	(*n)++;
	return 1;
}

static int unit_read_values(struct store_tx *tx, void *arg)
{
	struct collected *cl = arg;
	struct store_value none[] = {store_text("nope")};
	struct store_row row;
	int n = 0;

	assert_int_equal(store_query_each(tx, "SELECT tag, data FROM scratch ORDER BY rowid", NULL,
	                                  0, collect_row, cl),
	                 0);
	assert_int_equal(
	        store_query_each(tx, "SELECT tag FROM scratch", NULL, 0, stop_after_one, &n), 0);
	assert_int_equal(n, 1);
	memset(&row, 0x5a, sizeof(row));
	assert_int_equal(store_query(tx, "SELECT tag FROM scratch WHERE tag = ?", none, 1, &row),
	                 0);
	assert_int_equal(row.sr_n, (size_t)0x5a5a5a5a5a5a5a5aULL);
	/* Writing on a read connection is refused. */
	assert_int_equal(store_exec(tx, "DELETE FROM scratch", NULL, 0, NULL), -1);
	return 5;
}

static void test_statements_bind_parameters_and_copy_columns(void **state)
{
	struct fixture *fx = *state;
	struct collected cl = {0};

	assert_int_equal(store_write(fx->fx_st, T0, unit_fill_values, NULL), 0);
	assert_int_equal(store_read(fx->fx_st, T0, unit_read_values, &cl), 5);
	assert_int_equal(cl.cl_rows, 3);
	assert_true(cl.cl_blob_ok);
	assert_true(cl.cl_empty_blob_ok);
	assert_true(cl.cl_null_ok);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 3);
}

/* ---- read-only stores and peeking ---- */

/* A reader opened with so beside fx's running writer, as the CLI opens one:
 * it counts, answers a peek and refuses a claim and a write. */
static void check_read_only_beside_writer(struct fixture *fx, const struct store_options *so)
{
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;
	struct store *ro;
	enum store_status status;
	unsigned char fp[32];

	claim_init(&c, "evt_ro", 4, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	store_claim_finish(&c);

	ro = store_create(so);
	assert_non_null(ro);
	assert_int_equal(count_of(ro, "SELECT count(*) FROM idempotency_records"), 1);
	assert_int_equal(store_peek(ro, "stripe", "evt_ro", T0, RETENTION_MS, &status, fp), 1);
	assert_int_equal(status, STORE_STATUS_DONE);

	claim_init(&c, "evt_ro2", 4, T0, &ap);
	assert_int_equal(store_submit(ro, &c, 1), -1);
	assert_int_equal(c.sc_outcome, STORE_TRANSIENT);
	store_claim_finish(&c);
	assert_int_equal(store_write(ro, T0, unit_returns_seven, NULL), -1);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	store_destroy(ro);
}

static void test_read_only_store_reads_and_refuses_writes(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {.so_path = fx->fx_path, .so_read_only = 1};
	struct store *ro;

	/* A reader beside the running writer, as the CLI does. */
	check_read_only_beside_writer(fx, &so);

	/* And alone, once the writer has gone. */
	store_destroy(fx->fx_st);
	fx->fx_st = NULL;
	ro = store_create(&so);
	assert_non_null(ro);
	assert_int_equal(count_of(ro, "SELECT count(*) FROM idempotency_records"), 1);
	store_destroy(ro);
}

static void test_peek_reports_live_records_only(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store_claim c;
	enum store_status status = STORE_STATUS_FAILED;
	unsigned char fp[32];
	unsigned char want[32];

	assert_int_equal(store_peek(fx->fx_st, "stripe", "evt_peek", T0, RETENTION_MS, &status, fp),
	                 0);

	claim_init(&c, "evt_peek", 9, T0, &ap);
	assert_int_equal(store_claim_begin(fx->fx_st, &c), 0);
	assert_int_equal(store_peek(fx->fx_st, "stripe", "evt_peek", T0, RETENTION_MS, &status, fp),
	                 1);
	assert_int_equal(status, STORE_STATUS_PROCESSING);
	assert_int_equal(store_claim_complete(fx->fx_st, &c), 0);
	store_claim_finish(&c);

	memset(want, 9, sizeof(want));
	assert_int_equal(
	        store_peek(fx->fx_st, "stripe", "evt_peek", T0 + 1, RETENTION_MS, &status, fp), 1);
	assert_int_equal(status, STORE_STATUS_DONE);
	assert_memory_equal(fp, want, sizeof(want));
	assert_int_equal(store_peek(fx->fx_st, "stripe", "evt_peek", T0 + RETENTION_MS + 1,
	                            RETENTION_MS, &status, fp),
	                 0);
	assert_int_equal(store_peek(fx->fx_st, "other", "evt_peek", T0, RETENTION_MS, &status, fp),
	                 0);
}

static void test_destroy_of_null_is_a_no_op(void **state)
{
	store_destroy(NULL);
}

/* Every case gets a fresh database in its own temporary directory. */
/* ---- several receivers on one PostgreSQL database ---- */

/* A second receiver: another store on the fixture's database. */
static struct store *second_receiver(struct fixture *fx)
{
	struct store_options so = {
	        .so_backend = STORE_BACKEND_POSTGRESQL,
	        .so_conninfo = fx->fx_conninfo,
	};
	struct store *st = store_create(&so);

	assert_non_null(st);
	return st;
}

struct two_storm {
	struct store *ts_st;
	pthread_barrier_t *ts_barrier;
	struct applier *ts_applier;
	const char *ts_keys[8];
	size_t ts_n;
	enum store_outcome ts_outcomes[8];
};

static void *two_storm_thread(void *arg)
{
	struct two_storm *ts = arg;
	struct store_claim c[8];
	size_t i;

	for (i = 0; i < ts->ts_n; i++) {
		claim_init(&c[i], ts->ts_keys[i], 7, T0, ts->ts_applier);
	}
	pthread_barrier_wait(ts->ts_barrier);
	if (store_submit(ts->ts_st, c, ts->ts_n) == 0) {
		for (i = 0; i < ts->ts_n; i++) {
			ts->ts_outcomes[i] = c[i].sc_outcome;
		}
	}
	for (i = 0; i < ts->ts_n; i++) {
		store_claim_finish(&c[i]);
	}
	return NULL;
}

/* Two receivers claim the same keys at once, in opposite orders (a batch's
 * claims are sorted by key, so they do not deadlock): each key's handler
 * runs once, and the other receiver gets the stored reply. */
static void test_pg_two_receivers_claiming_the_same_keys_apply_each_once(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store *other = second_receiver(fx);
	pthread_barrier_t barrier;
	struct two_storm ts[2];
	pthread_t th[2];
	size_t i;
	size_t k;
	int new_count = 0;

	assert_int_equal(pthread_barrier_init(&barrier, NULL, 2), 0);
	memset(ts, 0, sizeof(ts));
	for (i = 0; i < 2; i++) {
		static const char *const keys[] = {"evt_k1", "evt_k2", "evt_k3", "evt_k4"};

		ts[i].ts_st = i == 0 ? fx->fx_st : other;
		ts[i].ts_barrier = &barrier;
		ts[i].ts_applier = &ap;
		ts[i].ts_n = 4;
		for (k = 0; k < 4; k++) {
			ts[i].ts_keys[k] = keys[i == 0 ? k : 3 - k];
		}
		assert_int_equal(pthread_create(&th[i], NULL, two_storm_thread, &ts[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		for (k = 0; k < 4; k++) {
			assert_true(ts[i].ts_outcomes[k] == STORE_NEW ||
			            ts[i].ts_outcomes[k] == STORE_REPLAYED);
			new_count += ts[i].ts_outcomes[k] == STORE_NEW;
		}
	}
	pthread_barrier_destroy(&barrier);
	assert_int_equal(new_count, 4);
	assert_int_equal(atomic_load(&ap.ap_runs), 4);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 4);
	store_destroy(other);
}

/* A receiver claims a key and dies; once its lease has expired another
 * receiver takes the key over with a new fencing token, and the dead one's
 * late completion (a process that was only paused) is refused. */
static void
test_pg_a_dead_receivers_expired_lease_is_taken_over_and_its_late_write_refused(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store *dying = second_receiver(fx);
	struct store_claim first;
	struct store_claim again;

	claim_init(&first, "evt_lease", 1, T0, &ap);
	assert_int_equal(store_claim_begin(dying, &first), 0);
	assert_int_equal(first.sc_outcome, STORE_CLAIMED);
	store_destroy(dying);

	/* Still inside the lease: another receiver is told to come back. */
	claim_init(&again, "evt_lease", 1, T0 + LEASE_MS - 1000, &ap);
	assert_int_equal(submit_one(fx->fx_st, &again), 0);
	assert_int_equal(again.sc_outcome, STORE_IN_PROGRESS);
	store_claim_finish(&again);

	claim_init(&again, "evt_lease", 1, T0 + LEASE_MS + 1, &ap);
	assert_int_equal(submit_one(fx->fx_st, &again), 0);
	assert_int_equal(again.sc_outcome, STORE_NEW);
	assert_int_equal(again.sc_token, first.sc_token + 1);
	store_claim_finish(&again);

	/* The first holder's completion carries the old token. */
	dying = second_receiver(fx);
	first.sc_now_ms = T0 + LEASE_MS + 2;
	assert_int_equal(store_claim_complete(dying, &first), 1);
	store_claim_finish(&first);
	store_destroy(dying);
	assert_int_equal(atomic_load(&ap.ap_runs), 1);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 1);
}

static void test_pg_a_named_lock_is_held_by_one_receiver_at_a_time(void **state)
{
	struct fixture *fx = *state;
	struct store *other = second_receiver(fx);
	int tries;

	assert_int_equal(store_try_lock(fx->fx_st, "gc"), 1);
	assert_int_equal(store_try_lock(other, "gc"), 0);
	assert_int_equal(store_try_lock(other, "reconcile"), 1);
	store_unlock(fx->fx_st, "gc");
	assert_int_equal(store_try_lock(other, "gc"), 1);
	assert_int_equal(store_try_lock(fx->fx_st, "gc"), 0);
	/* A receiver that dies lets go of its locks (once the server has
	 * seen its connection end). */
	store_destroy(other);
	for (tries = 0; tries < 50 && store_try_lock(fx->fx_st, "gc") == 0; tries++) {
		usleep(100 * 1000);
	}
	assert_true(tries < 50);
	assert_int_equal(store_try_lock(fx->fx_st, "reconcile"), 1);
	store_unlock(fx->fx_st, "gc");
	store_unlock(fx->fx_st, "reconcile");
}

static void *open_thread(void *arg)
{
	struct fixture *fx = arg;
	struct store_options so = {
	        .so_backend = STORE_BACKEND_POSTGRESQL,
	        .so_conninfo = fx->fx_conninfo,
	};

	return store_create(&so);
}

/* Two receivers starting together on an empty database: both come up, the
 * migrations ran once each (one version row apiece), and migrating again
 * changes nothing. */
static void test_pg_two_receivers_starting_together_migrate_once(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {
	        .so_backend = STORE_BACKEND_POSTGRESQL,
	        .so_conninfo = fx->fx_conninfo,
	};
	struct store *st[2];
	pthread_t th[2];
	size_t i;
	int from = -1;
	int to = -1;

	store_destroy(fx->fx_st);
	fx->fx_st = NULL;
	assert_int_equal(pg_fixture_reset(PG_SCHEMA), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, open_thread, fx), 0);
	}
	for (i = 0; i < 2; i++) {
		void *r = NULL;

		pthread_join(th[i], &r);
		st[i] = r;
		assert_non_null(st[i]);
	}
	assert_int_equal(count_of(st[0], "SELECT count(*) FROM idemhook_schema"),
	                 store_schema_version());
	assert_int_equal(count_of(st[1], "SELECT max(version) FROM idemhook_schema"),
	                 store_schema_version());
	assert_int_equal(store_migrate_options(&so, &from, &to), 0);
	assert_int_equal(from, store_schema_version());
	assert_int_equal(to, store_schema_version());
	store_destroy(st[1]);
	fx->fx_st = st[0];
}

struct outbox_seed {
	int os_n;
};

static int unit_seed_outbox(struct store_tx *tx, void *arg)
{
	const struct outbox_seed *os = arg;
	char key[32];
	int i;

	for (i = 0; i < os->os_n; i++) {
		struct store_value p[] = {store_text(key), store_int(T0), store_int(T0),
		                          store_int(T0), store_int(T0)};

		snprintf(key, sizeof(key), "obx_%d", i);
		if (store_exec(tx,
		               "INSERT INTO outbox (call_type, effect, url, content_type, body, "
		               "idem_key, window_start, next_attempt_at, created_at, updated_at) "
		               "VALUES "
		               "('notify', 'paid', 'http://127.0.0.1:9/', 'application/json', "
		               "'{}', ?, "
		               "?, ?, ?, ?)",
		               p, 5, NULL) < 0) {
			return -1;
		}
	}
	return 0;
}

static int count_info(void *arg, const struct outbox_info *info)
{
	(void)info;
	(*(int *)arg)++;
	return 0;
}

/* Due outbox rows go to one receiver at a time; a receiver that died with
 * rows leased has them delivered by another once the lease has passed. The
 * listing with optional filters (untyped NULL parameters) works too. */
static void test_pg_outbox_rows_are_leased_by_one_receiver_at_a_time(void **state)
{
	struct fixture *fx = *state;
	struct outbox_seed os = {.os_n = 5};
	struct store *other = second_receiver(fx);
	struct outbox_row rows[8];
	size_t n = 0;
	size_t m = 0;
	size_t i;
	int listed = 0;

	assert_int_equal(store_write(fx->fx_st, T0, unit_seed_outbox, &os), 0);
	assert_int_equal(outbox_list(fx->fx_st, NULL, NULL, count_info, &listed), 0);
	assert_int_equal(listed, 5);
	listed = 0;
	assert_int_equal(outbox_list(fx->fx_st, "pending", NULL, count_info, &listed), 0);
	assert_int_equal(listed, 5);

	assert_int_equal(outbox_lease(other, T0 + 1, 30000, 3, rows, &n), 0);
	assert_int_equal(n, 3);
	for (i = 0; i < n; i++) {
		outbox_row_finish(&rows[i]);
	}
	/* The other receiver gets only what is left. */
	assert_int_equal(outbox_lease(fx->fx_st, T0 + 2, 30000, 8, rows, &m), 0);
	assert_int_equal(m, 2);
	for (i = 0; i < m; i++) {
		outbox_row_finish(&rows[i]);
	}
	assert_int_equal(outbox_lease(fx->fx_st, T0 + 3, 30000, 8, rows, &m), 0);
	assert_int_equal(m, 0);
	store_destroy(other);
	/* The dead receiver's rows (and ours) are due again after their lease. */
	assert_int_equal(outbox_lease(fx->fx_st, T0 + 30000 + 10, 30000, 8, rows, &m), 0);
	assert_int_equal(m, 5);
	for (i = 0; i < m; i++) {
		outbox_row_finish(&rows[i]);
	}
}

struct row_holder {
	pthread_mutex_t rh_mutex;
	pthread_cond_t rh_cond;
	int rh_locked;  /* the row is locked: the other receiver may go */
	int rh_release; /* the other receiver is done: let go */
};

/* One receiver's worker in the middle of taking row 1: holds its row lock
 * until told to let go. */
static int unit_hold_row_one(struct store_tx *tx, void *arg)
{
	struct row_holder *rh = arg;
	struct store_row row;

	assert_int_equal(
	        store_query(tx, "SELECT id FROM outbox WHERE id = 1 FOR UPDATE", NULL, 0, &row), 1);
	store_row_finish(&row);
	pthread_mutex_lock(&rh->rh_mutex);
	rh->rh_locked = 1;
	pthread_cond_broadcast(&rh->rh_cond);
	while (!rh->rh_release) {
		pthread_cond_wait(&rh->rh_cond, &rh->rh_mutex);
	}
	pthread_mutex_unlock(&rh->rh_mutex);
	return 0;
}

struct hold_job {
	struct store *hj_st;
	struct row_holder *hj_rh;
};

static void *hold_thread(void *arg)
{
	struct hold_job *hj = arg;

	store_write(hj->hj_st, T0, unit_hold_row_one, hj->hj_rh);
	return NULL;
}

/* While one receiver has a due row locked, another's worker takes the
 * other due rows at once (SKIP LOCKED) instead of waiting for it. */
static void test_pg_outbox_workers_skip_the_rows_another_receiver_holds(void **state)
{
	struct fixture *fx = *state;
	struct outbox_seed os = {.os_n = 3};
	struct store *other = second_receiver(fx);
	struct row_holder rh = {.rh_mutex = PTHREAD_MUTEX_INITIALIZER,
	                        .rh_cond = PTHREAD_COND_INITIALIZER};
	struct hold_job hj = {.hj_st = fx->fx_st, .hj_rh = &rh};
	struct outbox_row rows[8];
	pthread_t th;
	size_t n = 0;
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_seed_outbox, &os), 0);
	assert_int_equal(pthread_create(&th, NULL, hold_thread, &hj), 0);
	pthread_mutex_lock(&rh.rh_mutex);
	while (!rh.rh_locked) {
		pthread_cond_wait(&rh.rh_cond, &rh.rh_mutex);
	}
	pthread_mutex_unlock(&rh.rh_mutex);

	assert_int_equal(outbox_lease(other, T0 + 1, 30000, 8, rows, &n), 0);
	assert_int_equal(n, 2);
	for (i = 0; i < n; i++) {
		assert_true(rows[i].or_id != 1);
		outbox_row_finish(&rows[i]);
	}

	pthread_mutex_lock(&rh.rh_mutex);
	rh.rh_release = 1;
	pthread_cond_broadcast(&rh.rh_cond);
	pthread_mutex_unlock(&rh.rh_mutex);
	pthread_join(th, NULL);
	/* Let go of, row 1 is the other's to take. */
	assert_int_equal(outbox_lease(other, T0 + 2, 30000, 8, rows, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].or_id, 1);
	outbox_row_finish(&rows[0]);
	store_destroy(other);
}

/* A handler that changes two rows, waiting between them (on its first run)
 * for the other receiver's handler to have changed the other row first. */
struct crossing {
	pthread_barrier_t *cr_barrier;
	const char *cr_first;
	const char *cr_second;
	atomic_int cr_runs;
};

static int apply_crossing(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct crossing *cr = arg;
	struct store_value first[] = {store_text(cr->cr_first)};
	struct store_value second[] = {store_text(cr->cr_second)};

	if (store_exec(tx, "UPDATE scratch SET data = NULL WHERE tag = ?", first, 1, NULL) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	if (atomic_fetch_add(&cr->cr_runs, 1) == 0) {
		pthread_barrier_wait(cr->cr_barrier);
	}
	if (store_exec(tx, "UPDATE scratch SET data = NULL WHERE tag = ?", second, 1, NULL) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	assert_int_equal(reply_set(ret_reply, 200, "text/plain", "ok", 2), 0);
	return STORE_APPLY_DONE;
}

static int unit_two_rows(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx, "INSERT INTO scratch (tag) VALUES ('x'), ('y')", NULL, 0, NULL);
}

struct crossing_job {
	struct store *cj_st;
	struct store_claim cj_claim;
};

static void *crossing_thread(void *arg)
{
	struct crossing_job *cj = arg;

	store_submit(cj->cj_st, &cj->cj_claim, 1);
	return NULL;
}

/* Two receivers' handlers change the same two rows in opposite orders: the
 * server breaks the deadlock by aborting one, whose batch runs again, and
 * both callbacks are applied; nobody sees a 503. */
static void test_pg_a_deadlock_between_receivers_runs_the_losing_batch_again(void **state)
{
	struct fixture *fx = *state;
	struct store *other = second_receiver(fx);
	pthread_barrier_t barrier;
	struct crossing cr[2];
	struct crossing_job cj[2];
	pthread_t th[2];
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_two_rows, NULL), 0);
	assert_int_equal(pthread_barrier_init(&barrier, NULL, 2), 0);
	memset(cr, 0, sizeof(cr));
	memset(cj, 0, sizeof(cj));
	for (i = 0; i < 2; i++) {
		cr[i].cr_barrier = &barrier;
		cr[i].cr_first = i == 0 ? "x" : "y";
		cr[i].cr_second = i == 0 ? "y" : "x";
		cj[i].cj_st = i == 0 ? fx->fx_st : other;
		claim_init(&cj[i].cj_claim, i == 0 ? "evt_cross_a" : "evt_cross_b", 1, T0, NULL);
		cj[i].cj_claim.sc_apply = apply_crossing;
		cj[i].cj_claim.sc_arg = &cr[i];
		assert_int_equal(pthread_create(&th[i], NULL, crossing_thread, &cj[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(cj[i].cj_claim.sc_outcome, STORE_NEW);
		store_claim_finish(&cj[i].cj_claim);
	}
	pthread_barrier_destroy(&barrier);
	/* The deadlock's loser ran again (the server may, rarely, break the
	 * cycle on both sides: then both did). */
	assert_true(atomic_load(&cr[0].cr_runs) + atomic_load(&cr[1].cr_runs) >= 3);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 2);
	store_destroy(other);
}

/* Runs sql through psql on conninfo, beside the store: a store on a
 * foreign schema writes nothing, not even the repair. Returns 0 or -1. */
static int pg_psql(const char *conninfo, const char *sql)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		execlp("psql", "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", conninfo, "-c",
		       sql, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid) {
		return -1;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* A reader beside the receivers, as the CLI opens one: it reads, answers a
 * peek, and refuses work; a newer schema is refused by writers and read
 * as its own by readers, and an older one refused by a store that may not
 * migrate. */
static void test_pg_read_only_stores_and_schema_versions_are_checked_as_on_sqlite(void **state)
{
	struct fixture *fx = *state;
	struct store_options so = {
	        .so_backend = STORE_BACKEND_POSTGRESQL,
	        .so_conninfo = fx->fx_conninfo,
	        .so_read_only = 1,
	};
	struct store *reader;

	check_read_only_beside_writer(fx, &so);

	assert_int_equal(store_write(fx->fx_st, T0, unit_set_user_version,
	                             "INSERT INTO idemhook_schema (version, name, applied_at) "
	                             "VALUES (999, 'future', 0)"),
	                 0);
	reader = store_create(&so);
	assert_non_null(reader);
	store_destroy(reader);
	so.so_read_only = 0;
	assert_null(store_create(&so));
	assert_int_equal(store_migrate_options(&so, NULL, NULL), -1);
	/* the store refuses to write on the foreign schema it found */
	assert_int_not_equal(store_write(fx->fx_st, T0, unit_set_user_version,
	                                 "DELETE FROM idemhook_schema WHERE version >= 2"),
	                     0);
	assert_int_equal(pg_psql(fx->fx_conninfo, "DELETE FROM idemhook_schema WHERE version >= 2"),
	                 0);
	so.so_no_migrate = 1;
	assert_null(store_create(&so));
	so.so_read_only = 1;
	assert_null(store_create(&so));
}

static int unit_backend_pid(struct store_tx *tx, void *arg)
{
	struct store_row row;

	assert_int_equal(store_query(tx, "SELECT pg_backend_pid()", NULL, 0, &row), 1);
	*(int64_t *)arg = store_row_int(&row, 0);
	store_row_finish(&row);
	return 0;
}

static int unit_terminate(struct store_tx *tx, void *arg)
{
	struct store_value p[] = {store_int(*(int64_t *)arg)};

	return store_exec(tx, "SELECT pg_terminate_backend(CAST(? AS integer))", p, 1, NULL);
}

/* The writer's connection is cut while it is idle (a failover, a restart
 * of the server, pg_terminate_backend): nothing of a transaction was on it,
 * so the next batch's BEGIN goes again on a new connection and the batch
 * commits. */
static void
test_pg_a_writer_connection_lost_while_idle_is_made_again_for_the_next_batch(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct store *other = second_receiver(fx);
	struct store_claim c;
	int64_t pid = 0;
	int64_t pid_after = 0;

	assert_int_equal(store_write(fx->fx_st, T0, unit_backend_pid, &pid), 0);
	assert_true(pid > 0);
	assert_int_equal(store_write(other, T0, unit_terminate, &pid), 0);
	store_destroy(other);

	claim_init(&c, "evt_lost", 1, T0, &ap);
	assert_int_equal(submit_one(fx->fx_st, &c), 0);
	assert_int_equal(c.sc_outcome, STORE_NEW);
	store_claim_finish(&c);
	assert_int_equal(store_write(fx->fx_st, T0, unit_backend_pid, &pid_after), 0);
	assert_true(pid_after > 0 && pid_after != pid);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 1);
}

struct killer {
	struct store *k_other; /* a second receiver, which terminates the writer's backend */
	int64_t k_pid;
	int k_kills; /* terminations still to do */
};

static int unit_backend_gone(struct store_tx *tx, void *arg)
{
	struct store_value p[] = {store_int(*(int64_t *)arg)};
	struct store_row row;
	int r;

	r = store_query(tx, "SELECT count(*) FROM pg_stat_activity WHERE pid = CAST(? AS integer)",
	                p, 1, &row);
	if (r <= 0) {
		return -1;
	}
	r = store_row_int(&row, 0) == 0 ? 1 : 0;
	store_row_finish(&row);
	return r;
}

/* A handler that writes a row, then has the writer's backend terminated
 * under it (and waits until it is gone) before its reply is stored. */
static int apply_killed(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct killer *k = arg;
	struct store_value p[] = {store_text("killed"), store_null()};
	int tries;

	if (store_exec(tx, "INSERT INTO scratch (tag, data) VALUES (?, ?)", p, 2, NULL) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	if (k->k_kills > 0) {
		k->k_kills--;
		assert_int_equal(store_write(k->k_other, T0, unit_terminate, &k->k_pid), 0);
		for (tries = 0; tries < 100; tries++) {
			if (store_read(k->k_other, T0, unit_backend_gone, &k->k_pid) == 1) {
				break;
			}
			usleep(20 * 1000);
		}
	}
	assert_int_equal(reply_set(ret_reply, 200, "text/plain", "ok", 2), 0);
	return STORE_APPLY_DONE;
}

/* The writer's connection is cut in the middle of a batch: the batch's
 * claims are all transient (nothing acknowledged, nothing kept), and the
 * next batch runs on a new connection and applies each once. */
static void
test_pg_a_writer_connection_lost_mid_batch_fails_the_batch_and_is_made_again(void **state)
{
	struct fixture *fx = *state;
	struct killer k = {.k_other = second_receiver(fx), .k_kills = 1};
	struct store_claim c[3];
	const char *keys[3] = {"evt_mid_a", "evt_mid_b", "evt_mid_c"};
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_backend_pid, &k.k_pid), 0);
	for (i = 0; i < 3; i++) {
		claim_init(&c[i], keys[i], 1, T0, NULL);
		c[i].sc_apply = apply_killed;
		c[i].sc_arg = &k;
	}
	assert_int_equal(store_submit(fx->fx_st, c, 3), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(c[i].sc_outcome, STORE_TRANSIENT);
		store_claim_finish(&c[i]);
	}
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 0);
	assert_int_equal(store_submit(fx->fx_st, c, 3), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(c[i].sc_outcome, STORE_NEW);
		store_claim_finish(&c[i]);
	}
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 3);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 3);
	store_destroy(k.k_other);
}

/* A handler that notes which writer backend ran it and when its
 * transaction began and its statement ended (pg_sleep keeps each batch's
 * transaction open a while), and counts its runs per key. */
#define WRITERS_MEET_MS 10000 /* the first handler's wait for a second one */

static int apply_note_backend(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct applier *ap = arg;
	int waited_ms;
	int r;

	atomic_fetch_add(&ap->ap_runs, 1);
	/* Until two handlers have run at once, a handler waits for another
	 * to come in, so that two writers' transactions overlap whatever the
	 * machine's load (a handler holds its writer's thread: the other one
	 * must be another writer's). Once only: a store that ran one batch at
	 * a time never lets the second in, and the wait gives up. */
	if (atomic_fetch_add(&ap->ap_inside, 1) >= 1) {
		atomic_store(&ap->ap_met, 1);
	}
	for (waited_ms = 0; !atomic_load(&ap->ap_met) && waited_ms < WRITERS_MEET_MS;
	     waited_ms += 5) {
		usleep(5 * 1000);
	}
	atomic_store(&ap->ap_met, 1);
	r = store_exec(tx,
	               "INSERT INTO writers_seen (pid, began, ended) SELECT pg_backend_pid(), "
	               "now(), clock_timestamp() FROM pg_sleep(0.01)",
	               NULL, 0, NULL);
	atomic_fetch_sub(&ap->ap_inside, 1);
	if (r < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	assert_int_equal(reply_set(ret_reply, 200, "text/plain", "ok", 2), 0);
	return STORE_APPLY_DONE;
}

#define WRITERS_THREADS 12
#define WRITERS_KEYS 6 /* per thread; two threads share each key */

struct writers_storm {
	struct store *ws_st;
	struct applier *ws_applier;
	pthread_barrier_t *ws_barrier;
	size_t ws_base; /* its keys: evt_w_<ws_base + k> */
	int ws_news;
	int ws_replays;
	int ws_other;
};

static void *writers_thread(void *arg)
{
	struct writers_storm *ws = arg;
	struct store_claim c;
	char key[32];
	size_t k;

	pthread_barrier_wait(ws->ws_barrier);
	for (k = 0; k < WRITERS_KEYS; k++) {
		snprintf(key, sizeof(key), "evt_w_%zu", ws->ws_base + k);
		claim_init(&c, key, 1, T0, ws->ws_applier);
		c.sc_apply = apply_note_backend;
		if (store_submit(ws->ws_st, &c, 1) == 0) {
			ws->ws_news += c.sc_outcome == STORE_NEW;
			ws->ws_replays += c.sc_outcome == STORE_REPLAYED;
			ws->ws_other += c.sc_outcome != STORE_NEW && c.sc_outcome != STORE_REPLAYED;
		}
		store_claim_finish(&c);
	}
	return NULL;
}

static int unit_create_writers_seen(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx,
	                  "CREATE TABLE IF NOT EXISTS writers_seen (pid BIGINT, began TIMESTAMPTZ, "
	                  "ended TIMESTAMPTZ)",
	                  NULL, 0, NULL) < 0
	               ? -1
	               : 0;
}

/* With [store] pg_writers = 3 the store runs batches on three writer
 * connections at once, each in its own transaction: claims from many
 * threads, each key sent by two threads (a duplicate storm across the
 * writers), are each applied exactly once (one NEW, one REPLAYED per key,
 * one handler run and one row per key), more than one writer backend ran
 * handlers, and two of them had transactions open at the same time. One
 * claim per batch, and the first handler waits for a second (above): which
 * writer takes which claims, and when, is then no race the machine's load
 * can decide (one writer taking every queued claim at once, round after
 * round, left no overlap). */
static void test_pg_writers_run_batches_side_by_side_and_apply_each_key_once(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct writers_storm ws[WRITERS_THREADS];
	pthread_t threads[WRITERS_THREADS];
	pthread_barrier_t barrier;
	int news = 0;
	int replays = 0;
	int other = 0;
	int64_t overlaps;
	size_t i;

	store_destroy(fx->fx_st);
	assert_int_equal(fixture_open(fx, 1), 0);
	assert_int_equal(store_write(fx->fx_st, T0, unit_create_writers_seen, NULL), 0);
	assert_int_equal(pthread_barrier_init(&barrier, NULL, WRITERS_THREADS), 0);
	for (i = 0; i < WRITERS_THREADS; i++) {
		ws[i] = (struct writers_storm){.ws_st = fx->fx_st,
		                               .ws_applier = &ap,
		                               .ws_barrier = &barrier,
		                               .ws_base =
		                                       (i % (WRITERS_THREADS / 2)) * WRITERS_KEYS};
		assert_int_equal(pthread_create(&threads[i], NULL, writers_thread, &ws[i]), 0);
	}
	for (i = 0; i < WRITERS_THREADS; i++) {
		pthread_join(threads[i], NULL);
		news += ws[i].ws_news;
		replays += ws[i].ws_replays;
		other += ws[i].ws_other;
	}
	pthread_barrier_destroy(&barrier);
	print_message(
	        "writer backends that ran handlers: %lld\n",
	        (long long)count_of(fx->fx_st, "SELECT count(DISTINCT pid) FROM writers_seen"));
	assert_int_equal(other, 0);
	assert_int_equal(news, WRITERS_THREADS / 2 * WRITERS_KEYS);
	assert_int_equal(replays, WRITERS_THREADS / 2 * WRITERS_KEYS);
	assert_int_equal(atomic_load(&ap.ap_runs), WRITERS_THREADS / 2 * WRITERS_KEYS);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM writers_seen"),
	                 WRITERS_THREADS / 2 * WRITERS_KEYS);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "status = 'done'"),
	                 WRITERS_THREADS / 2 * WRITERS_KEYS);
	/* The handlers ran on the store's writer connections, several. */
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM pg_stat_activity WHERE "
	                                     "application_name LIKE 'idemhook writer%' AND pid IN "
	                                     "(SELECT pid FROM writers_seen)"),
	                 count_of(fx->fx_st, "SELECT count(DISTINCT pid) FROM writers_seen"));
	assert_true(count_of(fx->fx_st, "SELECT count(DISTINCT pid) FROM writers_seen") >= 2);
	/* Two backends' transactions open at once: a handler of one ran
	 * between the start of the other's transaction and its handler's end. */
	overlaps = count_of(fx->fx_st, "SELECT count(*) FROM writers_seen a JOIN writers_seen b ON "
	                               "a.pid < b.pid AND a.began < b.ended AND b.began < a.ended");
	print_message("handler pairs on two writers with transactions open at once: %lld\n",
	              (long long)overlaps);
	assert_true(overlaps > 0);
}

#define LOCKED_TIMEOUT_MS 500 /* the claiming store's statement_timeout */
#define LOCKED_HOLD_S 4       /* the holder's transaction: past two timeouts and more */

struct lock_holder {
	struct store *lh_st; /* the fixture's: its statement_timeout (5 s) outlasts the sleep */
	atomic_int lh_holding;
	int lh_rc;
};

/* Another session's long transaction on parent row 7. */
static int unit_hold_parent_row(struct store_tx *tx, void *arg)
{
	struct lock_holder *lh = arg;
	char sql[64];

	if (store_exec(tx, "SELECT id FROM parent WHERE id = 7 FOR UPDATE", NULL, 0, NULL) < 0) {
		return -1;
	}
	atomic_store(&lh->lh_holding, 1);
	snprintf(sql, sizeof(sql), "SELECT pg_sleep(%d)", LOCKED_HOLD_S);
	return store_exec(tx, sql, NULL, 0, NULL);
}

static void *lock_holder_main(void *arg)
{
	struct lock_holder *lh = arg;

	lh->lh_rc = store_write(lh->lh_st, T0, unit_hold_parent_row, lh);
	return NULL;
}

static int unit_insert_parent_seven(struct store_tx *tx, void *arg)
{
	(void)arg;
	return store_exec(tx, "INSERT INTO parent (id) VALUES (7)", NULL, 0, NULL);
}

/* A handler that waits on parent row 7, then stores as apply_test does. */
static int apply_touch_parent(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	if (store_exec(tx, "UPDATE parent SET id = id WHERE id = 7", NULL, 0, NULL) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	return apply_test(tx, arg, ret_reply);
}

/* A batch of three claims, the middle one's handler waiting on a row
 * another session holds: that claim is transient after one
 * statement_timeout (its lane's), not run again one by one to wait a
 * second time; the other two are applied and committed in the batch, and
 * the held key is free for the provider's retry. */
static void test_pg_a_claim_that_waits_out_the_timeout_on_a_lock_is_transient_at_once(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	struct lock_holder lh = {.lh_st = fx->fx_st};
	struct store_options so = {
	        .so_backend = STORE_BACKEND_POSTGRESQL,
	        .so_conninfo = fx->fx_conninfo,
	        .so_statement_timeout_ms = LOCKED_TIMEOUT_MS,
	        .so_pg_writers = 1,
	};
	struct store_stats before;
	struct store_stats after;
	struct store_claim c[3];
	struct store *st;
	pthread_t thread;
	double t0;
	double waited_ms;
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_insert_parent_seven, NULL), 0);
	st = store_create(&so);
	assert_non_null(st);
	atomic_init(&lh.lh_holding, 0);
	assert_int_equal(pthread_create(&thread, NULL, lock_holder_main, &lh), 0);
	while (!atomic_load(&lh.lh_holding)) {
		usleep(10 * 1000);
	}
	claim_init(&c[0], "evt_lock_a", 1, T0, &ap);
	claim_init(&c[1], "evt_lock_b", 1, T0, &ap);
	claim_init(&c[2], "evt_lock_c", 1, T0, &ap);
	c[1].sc_apply = apply_touch_parent;
	store_get_stats(st, &before);
	t0 = mono_s();
	assert_int_equal(store_submit(st, c, 3), 0);
	waited_ms = (mono_s() - t0) * 1000;
	store_get_stats(st, &after);
	print_message("the batch ended after %.0f ms (statement_timeout %d ms)\n", waited_ms,
	              LOCKED_TIMEOUT_MS);
	assert_int_equal(c[0].sc_outcome, STORE_NEW);
	assert_int_equal(c[1].sc_outcome, STORE_TRANSIENT);
	assert_int_equal(c[2].sc_outcome, STORE_NEW);
	assert_int_equal(after.ss_batches - before.ss_batches, 1);
	assert_int_equal(after.ss_commits - before.ss_commits, 1);
	/* One wait, not two; generous against a loaded machine. */
	assert_true(waited_ms >= LOCKED_TIMEOUT_MS - 50);
	assert_true(waited_ms < 2 * LOCKED_TIMEOUT_MS);
	/* The holder still holds the row: the claims did not outwait it. */
	assert_true(waited_ms < LOCKED_HOLD_S * 1000);
	for (i = 0; i < 3; i++) {
		store_claim_finish(&c[i]);
	}
	pthread_join(thread, NULL);
	assert_int_equal(lh.lh_rc, 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "idem_key IN ('evt_lock_a', 'evt_lock_c') AND "
	                                     "status = 'done'"),
	                 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "idem_key = 'evt_lock_b'"),
	                 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 2);

	/* The lock gone, the provider's retry of the held key is applied. */
	claim_init(&c[1], "evt_lock_b", 1, T0, &ap);
	c[1].sc_apply = apply_touch_parent;
	assert_int_equal(store_submit(st, &c[1], 1), 0);
	assert_int_equal(c[1].sc_outcome, STORE_NEW);
	store_claim_finish(&c[1]);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 3);
	store_destroy(st);
}

/* Submits eight claims keyed prefix_0 to prefix_7 in one batch, each of
 * which must be new, and returns the round trips the batch took. */
static unsigned long long submit_eight_new(struct fixture *fx, const char *prefix,
                                           struct applier *ap)
{
	struct store_claim c[8];
	struct store_stats before;
	struct store_stats after;
	char keys[8][32];
	size_t i;

	for (i = 0; i < 8; i++) {
		snprintf(keys[i], sizeof(keys[i]), "%s_%zu", prefix, i);
		claim_init(&c[i], keys[i], 1, T0, ap);
	}
	store_get_stats(fx->fx_st, &before);
	assert_int_equal(store_submit(fx->fx_st, c, 8), 0);
	store_get_stats(fx->fx_st, &after);
	for (i = 0; i < 8; i++) {
		assert_int_equal(c[i].sc_outcome, STORE_NEW);
		store_claim_finish(&c[i]);
	}
	assert_int_equal(after.ss_batches - before.ss_batches, 1);
	return (unsigned long long)(after.ss_round_trips - before.ss_round_trips);
}

/* On PostgreSQL a batch's claims run side by side and their statements
 * go to the server pipelined: a batch of eight claims of three statements
 * each costs a round trip per statement of one claim (BEGIN goes with the
 * first, then COMMIT), not one per statement of every claim (with a
 * savepoint each, 42). */
static void test_pg_a_batch_of_claims_costs_round_trips_per_statement_not_per_claim(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	unsigned long long rt = submit_eight_new(fx, "evt_rt", &ap);

	print_message("round trips for 8 claims in one batch: %llu\n", rt);
	assert_true(rt <= 4);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 8);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records"), 8);
}

/* A handler that changes its own key's record under the store (its fence
 * token), so the claim's final write finds no record to finish. */
static int apply_bump_token(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct applier *ap = arg;
	struct store_value p[] = {store_text(ap->ap_claim->sc_key)};

	if (store_exec(tx,
	               "UPDATE idempotency_records SET fence_token = fence_token + 1 WHERE "
	               "idem_key = ?",
	               p, 1, NULL) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	return apply_test(tx, arg, ret_reply);
}

/* On PostgreSQL a claim's final write (its record's reply) is held back and
 * goes to the server in the round of the batch's COMMIT, checked there: a
 * batch of eight claims of three statements each costs three round trips
 * (BEGIN and the inserts, the handlers' statements, the final writes and
 * COMMIT) once the check's statement is prepared. */
static void test_pg_a_claims_final_write_goes_with_the_commit(void **state)
{
	struct fixture *fx = *state;
	struct applier ap = {.ap_result = STORE_APPLY_DONE};
	unsigned long long rt = 0;
	char prefix[32];
	int round;

	for (round = 0; round < 2; round++) {
		snprintf(prefix, sizeof(prefix), "evt_hold_%d", round);
		rt = submit_eight_new(fx, prefix, &ap);
		print_message("round trips for 8 claims in one batch (%s): %llu\n",
		              round == 0 ? "first" : "prepared", rt);
	}
	assert_true(rt <= 3);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 16);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "status = 'done' AND reply_status = 200"),
	                 16);
}

/* The held-back write of one claim finds its record changed (its handler
 * bumped the token): the COMMIT fails, nothing of the batch is kept, and the
 * batch runs again one claim at a time, so only that claim is transient. */
static void test_pg_a_held_back_write_that_fails_fails_only_its_claim(void **state)
{
	struct fixture *fx = *state;
	struct applier ok = {.ap_result = STORE_APPLY_DONE};
	struct applier bad = {.ap_result = STORE_APPLY_DONE, .ap_tag = "rolled back"};
	struct store_claim c[3];
	size_t i;

	/* Prepares the check's statement on the writer's connection. */
	claim_init(&c[0], "evt_warm", 1, T0, &ok);
	assert_int_equal(submit_one(fx->fx_st, &c[0]), 0);
	assert_int_equal(c[0].sc_outcome, STORE_NEW);
	store_claim_finish(&c[0]);

	claim_init(&c[0], "evt_hb_1", 1, T0, &ok);
	claim_init(&c[1], "evt_hb_2", 1, T0, &bad);
	claim_init(&c[2], "evt_hb_3", 1, T0, &ok);
	c[1].sc_apply = apply_bump_token;
	bad.ap_claim = &c[1];
	assert_int_equal(store_submit(fx->fx_st, c, 3), 0);
	assert_int_equal(c[0].sc_outcome, STORE_NEW);
	assert_int_equal(c[1].sc_outcome, STORE_TRANSIENT);
	assert_int_equal(c[2].sc_outcome, STORE_NEW);
	for (i = 0; i < 3; i++) {
		store_claim_finish(&c[i]);
	}
	assert_int_equal(
	        count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'rolled back'"), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 3);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "idem_key = 'evt_hb_2'"),
	                 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "status = 'done'"),
	                 3);

	/* Its key was not consumed: run by a sound handler, it is new. */
	claim_init(&c[1], "evt_hb_2", 1, T0 + 1000, &ok);
	assert_int_equal(submit_one(fx->fx_st, &c[1]), 0);
	assert_int_equal(c[1].sc_outcome, STORE_NEW);
	store_claim_finish(&c[1]);
}

/* ---- held writes on lanes (store_exec_held) ---- */

/* Rows the held-write tests' handlers change: a revision and a count of
 * the runs that stuck, per id. */
static int unit_create_held_rows(struct store_tx *tx, void *arg)
{
	const char *const *ids = arg;
	size_t i;

	if (store_exec(tx,
	               "CREATE TABLE IF NOT EXISTS held_rows (id TEXT PRIMARY KEY, revision "
	               "BIGINT NOT NULL, runs BIGINT NOT NULL)",
	               NULL, 0, NULL) < 0) {
		return -1;
	}
	for (i = 0; ids[i] != NULL; i++) {
		struct store_value p[] = {store_text(ids[i])};

		if (store_exec(tx, "INSERT INTO held_rows (id, revision, runs) VALUES (?, 0, 0)", p,
		               1, NULL) < 0) {
			return -1;
		}
	}
	return 0;
}

static int64_t held_runs(struct fixture *fx, const char *id)
{
	char sql[128];

	snprintf(sql, sizeof(sql), "SELECT runs FROM held_rows WHERE id = '%s'", id);
	return count_of(fx->fx_st, sql);
}

/* A handler whose one write is held: the run count of its row (ap_tag)
 * goes up by one, and must change that row, then apply_test (a statement
 * after it, so the held write goes at the head of the lane's next round,
 * and the reply; it counts the runs that get there). A count other than 1
 * is its unit's transient failure, as in orders_save. */
static int apply_held(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct applier *ap = arg;
	struct store_value p[] = {store_text(ap->ap_tag)};
	int64_t changes = -1;

	if (store_exec_held(tx, "UPDATE held_rows SET runs = runs + 1 WHERE id = ?", p, 1,
	                    &changes) < 0 ||
	    changes != 1) {
		return STORE_APPLY_TRANSIENT;
	}
	return apply_test(tx, arg, ret_reply);
}

/* A handler whose held write's result is not read: a row under its tag,
 * which fails (a duplicate primary key) when the row is there. */
static int apply_held_blind(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct applier *ap = arg;
	struct store_value p[] = {store_text(ap->ap_tag)};

	if (store_exec_held(tx, "INSERT INTO held_rows (id, revision, runs) VALUES (?, 0, 1)", p, 1,
	                    NULL) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	return apply_test(tx, arg, ret_reply);
}

/* A handler that reads its row's revision and then moves it, guarded by
 * what it read (orders_save's shape): two claims of one batch on one row
 * read the same revision, and the second write changes no row. */
static int apply_held_revision(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct applier *ap = arg;
	struct store_value p[] = {store_text(ap->ap_tag)};
	struct store_row row;
	int64_t changes = -1;
	int64_t revision;

	if (store_query(tx, "SELECT revision FROM held_rows WHERE id = ?", p, 1, &row) != 1) {
		return STORE_APPLY_TRANSIENT;
	}
	revision = store_row_int(&row, 0);
	store_row_finish(&row);
	{
		struct store_value q[] = {store_text(ap->ap_tag), store_int(revision)};

		if (store_exec_held(tx,
		                    "UPDATE held_rows SET revision = revision + 1, runs = runs + 1 "
		                    "WHERE id = ? AND revision = ?",
		                    q, 2, &changes) < 0 ||
		    changes != 1) {
			return STORE_APPLY_TRANSIENT;
		}
	}
	return apply_test(tx, arg, ret_reply);
}

/* A handler's write held on its lane goes ahead of the lane's next
 * statement in the same round: eight claims of [held update, insert] cost
 * three round trips (BEGIN and the claims' inserts; the held updates and
 * the inserts; the final writes and COMMIT) once its statement is
 * prepared, not four. */
static void test_pg_a_handlers_held_write_costs_no_round_trip_of_its_own(void **state)
{
	struct fixture *fx = *state;
	static const char *const ids[] = {"hr_0", "hr_1", "hr_2", "hr_3", "hr_4",
	                                  "hr_5", "hr_6", "hr_7", NULL};
	struct applier ap[8];
	struct store_claim c[8];
	struct store_stats before;
	struct store_stats after;
	char keys[8][32];
	unsigned long long rt = 0;
	int round;
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_create_held_rows, (void *)ids), 0);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < 8; i++) {
			memset(&ap[i], 0, sizeof(ap[i]));
			ap[i].ap_result = STORE_APPLY_DONE;
			ap[i].ap_tag = ids[i];
			snprintf(keys[i], sizeof(keys[i]), "evt_held_%d_%zu", round, i);
			claim_init(&c[i], keys[i], 1, T0, &ap[i]);
			c[i].sc_apply = apply_held;
		}
		store_get_stats(fx->fx_st, &before);
		assert_int_equal(store_submit(fx->fx_st, c, 8), 0);
		store_get_stats(fx->fx_st, &after);
		for (i = 0; i < 8; i++) {
			assert_int_equal(c[i].sc_outcome, STORE_NEW);
			assert_int_equal(atomic_load(&ap[i].ap_runs), 1);
			store_claim_finish(&c[i]);
		}
		assert_int_equal(after.ss_batches - before.ss_batches, 1);
		rt = (unsigned long long)(after.ss_round_trips - before.ss_round_trips);
		print_message("round trips for 8 claims with a held write (%s): %llu\n",
		              round == 0 ? "first" : "prepared", rt);
	}
	assert_true(rt <= 3);
	for (i = 0; i < 8; i++) {
		assert_int_equal(held_runs(fx, ids[i]), 2);
	}
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch"), 16);
}

/* Held writes that fail on their lanes: one changes no row (its row is not
 * there), one fails (a duplicate key). Each dooms the pass; the batch runs
 * again one unit at a time, each in its savepoint: those two units are
 * transient with nothing of theirs kept, the others are applied exactly
 * once, and the failed keys were not consumed. */
static void test_pg_a_held_write_that_fails_on_its_lane_fails_only_its_unit(void **state)
{
	struct fixture *fx = *state;
	static const char *const ids[] = {"hf_a", "hf_c", "hf_dup", NULL};
	struct applier ap[4];
	struct store_claim c[4];
	const char *tags[4] = {"hf_a", "hf_missing", "hf_dup", "hf_c"};
	const char *keys[4] = {"evt_hf_1", "evt_hf_2", "evt_hf_3", "evt_hf_4"};
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_create_held_rows, (void *)ids), 0);
	/* Prepares the held statements on the writer's connection. */
	memset(&ap[0], 0, sizeof(ap[0]));
	ap[0].ap_result = STORE_APPLY_DONE;
	ap[0].ap_tag = "hf_warm";
	claim_init(&c[0], "evt_hf_warm_1", 1, T0, &ap[0]);
	c[0].sc_apply = apply_held;
	assert_int_equal(submit_one(fx->fx_st, &c[0]), 0);
	assert_int_equal(c[0].sc_outcome, STORE_TRANSIENT); /* no row hf_warm */
	store_claim_finish(&c[0]);
	claim_init(&c[0], "evt_hf_warm_2", 1, T0, &ap[0]);
	c[0].sc_apply = apply_held_blind;
	assert_int_equal(submit_one(fx->fx_st, &c[0]), 0);
	assert_int_equal(c[0].sc_outcome, STORE_NEW);
	store_claim_finish(&c[0]);

	for (i = 0; i < 4; i++) {
		memset(&ap[i], 0, sizeof(ap[i]));
		ap[i].ap_result = STORE_APPLY_DONE;
		ap[i].ap_tag = tags[i];
		claim_init(&c[i], keys[i], 1, T0, &ap[i]);
		c[i].sc_apply = i == 2 ? apply_held_blind : apply_held;
	}
	assert_int_equal(store_submit(fx->fx_st, c, 4), 0);
	assert_int_equal(c[0].sc_outcome, STORE_NEW);
	assert_int_equal(c[1].sc_outcome, STORE_TRANSIENT);
	assert_int_equal(c[2].sc_outcome, STORE_TRANSIENT);
	assert_int_equal(c[3].sc_outcome, STORE_NEW);
	/* On the lanes every handler went on past its held write (taken as
	 * done) to its next statement; the rerun one unit at a time saw the
	 * real outcomes, and only the sound units got past them. */
	for (i = 0; i < 4; i++) {
		assert_int_equal(atomic_load(&ap[i].ap_runs), i == 1 || i == 2 ? 1 : 2);
		store_claim_finish(&c[i]);
	}
	assert_int_equal(held_runs(fx, "hf_a"), 1);
	assert_int_equal(held_runs(fx, "hf_c"), 1);
	assert_int_equal(held_runs(fx, "hf_dup"), 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag IN ('hf_a', "
	                                     "'hf_missing', 'hf_dup', 'hf_c')"),
	                 2);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "idem_key IN ('evt_hf_2', 'evt_hf_3')"),
	                 0);

	/* Their keys were not consumed: with their rows as they need them,
	 * they are new. */
	{
		static const char *const more[] = {"hf_missing", NULL};

		assert_int_equal(store_write(fx->fx_st, T0, unit_create_held_rows, (void *)more),
		                 0);
	}
	memset(&ap[1], 0, sizeof(ap[1]));
	ap[1].ap_result = STORE_APPLY_DONE;
	ap[1].ap_tag = "hf_missing";
	claim_init(&c[1], "evt_hf_2", 1, T0 + 1000, &ap[1]);
	c[1].sc_apply = apply_held;
	memset(&ap[2], 0, sizeof(ap[2]));
	ap[2].ap_result = STORE_APPLY_DONE;
	ap[2].ap_tag = "hf_new";
	claim_init(&c[2], "evt_hf_3", 1, T0 + 1000, &ap[2]);
	c[2].sc_apply = apply_held_blind;
	assert_int_equal(store_submit(fx->fx_st, &c[1], 2), 0);
	assert_int_equal(c[1].sc_outcome, STORE_NEW);
	assert_int_equal(c[2].sc_outcome, STORE_NEW);
	store_claim_finish(&c[1]);
	store_claim_finish(&c[2]);
	assert_int_equal(held_runs(fx, "hf_missing"), 1);
	assert_int_equal(held_runs(fx, "hf_new"), 1);
}

/* Two claims of one batch (two keys) move one row's revision, each guarded
 * by the revision it read: on the lanes both read the same one, the second
 * held write changes no row and dooms the pass, and the rerun one unit at
 * a time applies both, each once, as savepoints in sequence would. */
static void test_pg_two_claims_of_a_batch_on_one_row_are_each_applied_once(void **state)
{
	struct fixture *fx = *state;
	static const char *const ids[] = {"hv_shared", "hv_solo", NULL};
	struct applier ap[3];
	struct store_claim c[3];
	const char *tags[3] = {"hv_shared", "hv_shared", "hv_solo"};
	const char *keys[3] = {"evt_hv_1", "evt_hv_2", "evt_hv_3"};
	int round;
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_create_held_rows, (void *)ids), 0);
	for (round = 0; round < 2; round++) {
		char k[3][32];

		for (i = 0; i < 3; i++) {
			memset(&ap[i], 0, sizeof(ap[i]));
			ap[i].ap_result = STORE_APPLY_DONE;
			ap[i].ap_tag = tags[i];
			snprintf(k[i], sizeof(k[i]), "%s_%d", keys[i], round);
			claim_init(&c[i], k[i], 1, T0, &ap[i]);
			c[i].sc_apply = apply_held_revision;
		}
		assert_int_equal(store_submit(fx->fx_st, c, 3), 0);
		for (i = 0; i < 3; i++) {
			assert_int_equal(c[i].sc_outcome, STORE_NEW);
			store_claim_finish(&c[i]);
		}
		if (round == 1) {
			/* Statements prepared: the lanes held both writes and
			 * the pass was undone and run again. */
			assert_true(atomic_load(&ap[1].ap_runs) >= 2);
		}
	}
	assert_int_equal(held_runs(fx, "hv_shared"), 4);
	assert_int_equal(held_runs(fx, "hv_solo"), 2);
	assert_int_equal(
	        count_of(fx->fx_st, "SELECT revision FROM held_rows WHERE id = 'hv_shared'"), 4);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag LIKE 'hv_%'"),
	                 6);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM idempotency_records WHERE "
	                                     "idem_key LIKE 'evt_hv_%' AND status = 'done'"),
	                 6);
}

struct held_job {
	struct store *hj_st;
	struct store_claim *hj_claims;
	size_t hj_n;
	int hj_rc;
};

static void *held_claims_thread(void *arg)
{
	struct held_job *hj = arg;

	hj->hj_rc = store_submit(hj->hj_st, hj->hj_claims, hj->hj_n);
	return NULL;
}

static int unit_plain_mark(struct store_tx *tx, void *arg)
{
	struct store_value p[] = {store_text("hp_plain")};

	(void)arg;
	return store_exec(tx, "INSERT INTO scratch (tag) VALUES (?)", p, 1, NULL);
}

static void *held_plain_thread(void *arg)
{
	struct held_job *hj = arg;

	hj->hj_rc = store_write(hj->hj_st, T0, unit_plain_mark, NULL);
	return NULL;
}

/* A plain write queued in one batch with claims whose held writes fail on
 * their lanes (one changes no row): the pass is doomed before the plain
 * write runs, the rerun one unit at a time fails only the claim whose
 * write failed, and the plain write, run after the claims in its
 * savepoint, is applied once and reported done, not charged with the
 * held write's failure. */
static void test_pg_held_writes_go_before_a_plain_write_of_their_batch(void **state)
{
	struct fixture *fx = *state;
	static const char *const ids[] = {"hp_a", "hp_c", NULL};
	struct gate gate = {.gt_st = fx->fx_st};
	struct held_job claims = {.hj_st = fx->fx_st};
	struct held_job plain = {.hj_st = fx->fx_st};
	struct store_stats before;
	struct store_stats after;
	struct applier ap[3];
	struct store_claim c[3];
	const char *tags[3] = {"hp_a", "hp_missing", "hp_c"};
	const char *keys[3] = {"evt_hp_1", "evt_hp_2", "evt_hp_3"};
	pthread_t gater;
	pthread_t t_claims;
	pthread_t t_plain;
	size_t i;

	assert_int_equal(store_write(fx->fx_st, T0, unit_create_held_rows, (void *)ids), 0);
	/* Prepares the held statement on the writer's connection. */
	memset(&ap[0], 0, sizeof(ap[0]));
	ap[0].ap_result = STORE_APPLY_DONE;
	ap[0].ap_tag = "hp_a";
	claim_init(&c[0], "evt_hp_warm", 1, T0, &ap[0]);
	c[0].sc_apply = apply_held;
	assert_int_equal(submit_one(fx->fx_st, &c[0]), 0);
	assert_int_equal(c[0].sc_outcome, STORE_NEW);
	store_claim_finish(&c[0]);

	for (i = 0; i < 3; i++) {
		memset(&ap[i], 0, sizeof(ap[i]));
		ap[i].ap_result = STORE_APPLY_DONE;
		ap[i].ap_tag = tags[i];
		claim_init(&c[i], keys[i], 1, T0, &ap[i]);
		c[i].sc_apply = apply_held;
	}
	claims.hj_claims = c;
	claims.hj_n = 3;
	store_get_stats(fx->fx_st, &before);
	assert_int_equal(pthread_create(&gater, NULL, gate_thread, &gate), 0);
	while (!atomic_load(&gate.gt_entered)) {
		usleep(1000);
	}
	assert_int_equal(pthread_create(&t_claims, NULL, held_claims_thread, &claims), 0);
	usleep(200 * 1000);
	assert_int_equal(pthread_create(&t_plain, NULL, held_plain_thread, &plain), 0);
	usleep(200 * 1000);
	atomic_store(&gate.gt_open, 1);
	pthread_join(gater, NULL);
	pthread_join(t_claims, NULL);
	pthread_join(t_plain, NULL);
	store_get_stats(fx->fx_st, &after);

	/* The gate's batch, then one with the claims and the plain write. */
	assert_int_equal(after.ss_batches - before.ss_batches, 2);
	assert_int_equal(claims.hj_rc, 0);
	assert_int_equal(c[0].sc_outcome, STORE_NEW);
	assert_int_equal(c[1].sc_outcome, STORE_TRANSIENT);
	assert_int_equal(c[2].sc_outcome, STORE_NEW);
	for (i = 0; i < 3; i++) {
		store_claim_finish(&c[i]);
	}
	assert_int_equal(plain.hj_rc, 0);
	assert_int_equal(count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'hp_plain'"),
	                 1);
	assert_int_equal(held_runs(fx, "hp_a"), 2);
	assert_int_equal(held_runs(fx, "hp_c"), 1);
	assert_int_equal(
	        count_of(fx->fx_st, "SELECT count(*) FROM scratch WHERE tag = 'hp_missing'"), 0);
}

#define STORE_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define PG_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup_pg, teardown_pg)
#define PG_TEST_ONE_WRITER(fn) cmocka_unit_test_setup_teardown(fn, setup_pg_one_writer, teardown_pg)
#define PG_TEST_THREE_WRITERS(fn)                                                                  \
	cmocka_unit_test_setup_teardown(fn, setup_pg_three_writers, teardown_pg)

int main(void)
{
	const struct CMUnitTest tests[] = {
	        STORE_TEST(test_create_makes_the_directory_applies_migrations_and_uses_wal),
	        STORE_TEST(test_writer_caches_four_mebibytes_of_pages),
	        STORE_TEST(test_the_writer_runs_at_its_nice_value_and_nothing_else_does),
	        STORE_TEST(test_migrate_reports_versions_and_is_idempotent),
	        STORE_TEST(test_newer_schema_is_refused_and_the_file_left_untouched),
	        STORE_TEST(test_older_schema_is_refused_read_only_and_without_migrations),
	        STORE_TEST(test_claim_on_a_new_key_runs_apply_and_stores_done),
	        STORE_TEST(test_claim_replays_done_record_byte_for_byte),
	        cmocka_unit_test(test_a_key_filter_finds_every_key_added_and_few_others),
	        STORE_TEST(test_the_key_filter_sends_only_keys_never_stored_to_the_writer_unread),
	        STORE_TEST(test_a_key_stored_beside_the_filter_is_still_replayed_by_the_writer),
	        STORE_TEST(test_a_key_filter_past_its_capacity_is_filled_again_larger),
	        STORE_TEST(test_a_key_filter_is_filled_from_several_pages_of_keys),
	        STORE_TEST(
	                test_a_duplicate_right_after_the_commit_is_replayed_with_a_kept_snapshot),
	        STORE_TEST(test_a_kept_read_snapshot_is_ended_when_its_thread_is_idle),
	        STORE_TEST(test_claim_replays_failed_record_with_its_stored_reply),
	        STORE_TEST(test_claim_with_other_fingerprint_gets_mismatch_and_the_stored_reply),
	        STORE_TEST(test_record_one_second_inside_retention_replays),
	        STORE_TEST(test_record_one_second_past_retention_is_deleted_and_runs_as_new),
	        STORE_TEST(test_a_claim_writes_its_event_into_the_keys_one_row),
	        STORE_TEST(test_live_lease_answers_in_progress_with_seconds_left),
	        STORE_TEST(test_expired_lease_is_taken_over_with_a_new_token),
	        STORE_TEST(test_late_complete_with_stale_token_is_refused_and_changes_nothing),
	        STORE_TEST(test_transient_complete_keeps_the_claim_processing),
	        STORE_TEST(test_group_commit_keeps_other_claims_when_one_is_transient),
	        STORE_TEST(test_failed_commit_makes_every_claim_of_the_batch_transient),
	        STORE_TEST(test_identical_claims_from_many_threads_run_apply_once),
	        STORE_TEST(
	                test_claims_queued_together_commit_as_one_batch_except_the_transient_one),
	        STORE_TEST(test_batch_size_one_commits_each_unit_alone),
	        STORE_TEST(test_async_completion_runs_once_per_submission_after_commit),
	        STORE_TEST(test_a_batch_commits_while_the_completion_of_the_batch_before_runs),
	        STORE_TEST(
	                test_each_unit_counts_its_time_queued_in_its_batch_and_to_its_completion),
	        STORE_TEST(test_async_duplicate_of_a_done_key_completes_before_submit_returns),
	        STORE_TEST(test_destroy_finishes_queued_work_and_calls_every_completion),
	        STORE_TEST(test_read_only_store_refuses_async_work_and_still_completes_it),
	        STORE_TEST(test_batch_histogram_counts_batches_whether_or_not_they_commit),
	        STORE_TEST(test_disk_full_is_transient_and_the_store_keeps_serving),
	        STORE_TEST(test_disk_full_in_one_claim_of_a_group_leaves_the_others_committed),
	        STORE_TEST(test_write_returns_fn_value_and_rolls_back_on_failure),
	        STORE_TEST(test_full_sync_commit_writes_its_wal_frames_in_a_few_calls),
	        STORE_TEST(test_the_wal_stays_bounded_under_sustained_writes_and_reads),
	        STORE_TEST(test_a_wal_held_past_its_bound_by_a_reader_is_reported),
	        STORE_TEST(test_a_units_savepoint_journal_is_not_written_to_a_file),
	        STORE_TEST(test_a_unit_larger_than_the_sub_journal_in_memory_commits),
	        STORE_TEST(test_a_commit_after_page_splits_does_not_walk_the_page_cache),
	        STORE_TEST(test_pages_past_the_end_of_a_rolled_back_transaction_leave_the_cache),
	        STORE_TEST(test_statements_bind_parameters_and_copy_columns),
	        STORE_TEST(test_read_only_store_reads_and_refuses_writes),
	        STORE_TEST(test_peek_reports_live_records_only),
	        cmocka_unit_test(test_destroy_of_null_is_a_no_op),
	};

	/* The same scenarios on PostgreSQL, when a database is given. */
	const struct CMUnitTest pg_tests[] = {
	        PG_TEST(test_claim_on_a_new_key_runs_apply_and_stores_done),
	        PG_TEST(test_claim_replays_done_record_byte_for_byte),
	        PG_TEST(test_claim_replays_failed_record_with_its_stored_reply),
	        PG_TEST(test_claim_with_other_fingerprint_gets_mismatch_and_the_stored_reply),
	        PG_TEST(test_record_one_second_inside_retention_replays),
	        PG_TEST(test_record_one_second_past_retention_is_deleted_and_runs_as_new),
	        PG_TEST(test_a_claim_writes_its_event_into_the_keys_one_row),
	        PG_TEST(test_live_lease_answers_in_progress_with_seconds_left),
	        PG_TEST(test_expired_lease_is_taken_over_with_a_new_token),
	        PG_TEST(test_late_complete_with_stale_token_is_refused_and_changes_nothing),
	        PG_TEST(test_transient_complete_keeps_the_claim_processing),
	        PG_TEST(test_group_commit_keeps_other_claims_when_one_is_transient),
	        PG_TEST(test_failed_commit_makes_every_claim_of_the_batch_transient),
	        PG_TEST(test_identical_claims_from_many_threads_run_apply_once),
	        PG_TEST_ONE_WRITER(
	                test_claims_queued_together_commit_as_one_batch_except_the_transient_one),
	        PG_TEST(test_batch_size_one_commits_each_unit_alone),
	        PG_TEST_ONE_WRITER(test_async_completion_runs_once_per_submission_after_commit),
	        PG_TEST(test_async_duplicate_of_a_done_key_completes_before_submit_returns),
	        PG_TEST_ONE_WRITER(test_destroy_finishes_queued_work_and_calls_every_completion),
	        PG_TEST(test_batch_histogram_counts_batches_whether_or_not_they_commit),
	        PG_TEST(test_write_returns_fn_value_and_rolls_back_on_failure),
	        PG_TEST(test_peek_reports_live_records_only),
	        PG_TEST(test_pg_two_receivers_claiming_the_same_keys_apply_each_once),
	        PG_TEST(test_pg_a_dead_receivers_expired_lease_is_taken_over_and_its_late_write_refused),
	        PG_TEST(test_pg_a_named_lock_is_held_by_one_receiver_at_a_time),
	        PG_TEST(test_pg_two_receivers_starting_together_migrate_once),
	        PG_TEST(test_pg_outbox_rows_are_leased_by_one_receiver_at_a_time),
	        PG_TEST(test_pg_a_writer_connection_lost_while_idle_is_made_again_for_the_next_batch),
	        PG_TEST_ONE_WRITER(
	                test_pg_a_writer_connection_lost_mid_batch_fails_the_batch_and_is_made_again),
	        PG_TEST_ONE_WRITER(
	                test_pg_a_batch_of_claims_costs_round_trips_per_statement_not_per_claim),
	        PG_TEST_ONE_WRITER(test_pg_a_claims_final_write_goes_with_the_commit),
	        PG_TEST_THREE_WRITERS(
	                test_pg_writers_run_batches_side_by_side_and_apply_each_key_once),
	        PG_TEST(test_pg_a_claim_that_waits_out_the_timeout_on_a_lock_is_transient_at_once),
	        PG_TEST(test_pg_a_held_back_write_that_fails_fails_only_its_claim),
	        PG_TEST_ONE_WRITER(test_pg_a_handlers_held_write_costs_no_round_trip_of_its_own),
	        PG_TEST_ONE_WRITER(test_pg_a_held_write_that_fails_on_its_lane_fails_only_its_unit),
	        PG_TEST_ONE_WRITER(test_pg_two_claims_of_a_batch_on_one_row_are_each_applied_once),
	        PG_TEST_ONE_WRITER(test_pg_held_writes_go_before_a_plain_write_of_their_batch),
	        PG_TEST(test_pg_outbox_workers_skip_the_rows_another_receiver_holds),
	        PG_TEST(test_pg_a_deadlock_between_receivers_runs_the_losing_batch_again),
	        PG_TEST(test_pg_read_only_stores_and_schema_versions_are_checked_as_on_sqlite),
	};
	int failed;

	failed = cmocka_run_group_tests(tests, NULL, NULL);
	if (pg_fixture_base() == NULL) {
		return failed;
	}
	return failed + cmocka_run_group_tests_name("postgresql", pg_tests, NULL, NULL);
}
