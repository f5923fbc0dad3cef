/* test_migrate_newer_e2e.c: a receiver whose database was migrated by a
 * newer release (its schema version recorded one past this binary's, as
 * `idemhook migrate` of the next release leaves it) is not ready and writes
 * nothing: new callbacks get 503 with Retry-After, duplicates their stored
 * replies, and it says so once in its log. On PostgreSQL two receivers
 * share the database and both behave so. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "pgserver.h"

#define T_SECRET "whsec_migrate_newer_secret"
#define T_INI "[provider stripe]\ntype = stripe\nsecret = " T_SECRET "\n"
#define T_WAIT_MS 3000

/* /readyz's status, its body in body. */
static long t_readyz(const struct daemon *d, char *body, size_t size)
{
	char url[128];
	struct hres r;
	long status;

	snprintf(url, sizeof(url), "%s/readyz", d->dm_admin_base);
	if (hn_http("GET", url, NULL, NULL, 0, &r) != 0) {
		return 0;
	}
	status = r.hs_status;
	snprintf(body, size, "%s", r.hs_body != NULL ? r.hs_body : "");
	hres_finish(&r);
	return status;
}

/* Polls /readyz until it answers want with says in its body. */
static int t_readyz_until(const struct daemon *d, long want, const char *says)
{
	int64_t start = hn_now_ms();
	char body[512];

	for (;;) {
		if (t_readyz(d, body, sizeof(body)) == want &&
		    (says == NULL || strstr(body, says) != NULL)) {
			return 0;
		}
		if (hn_now_ms() - start > T_WAIT_MS) {
			fprintf(stderr, "readyz: still \"%s\"\n", body);
			return -1;
		}
		usleep(20 * 1000);
	}
}

static int t_log_count(const struct daemon *d, const char *text)
{
	char *log = hn_read_file(d->dm_log);
	const char *p = log;
	int n = 0;

	assert_non_null(log);
	while ((p = strstr(p, text)) != NULL) {
		n++;
		p += strlen(text);
	}
	free(log);
	return n;
}

/* Waits until the log holds text n times. */
static int t_log_wait_count(const struct daemon *d, const char *text, int n)
{
	int64_t start = hn_now_ms();

	while (t_log_count(d, text) < n) {
		if (hn_now_ms() - start > T_WAIT_MS) {
			return -1;
		}
		usleep(20 * 1000);
	}
	return 0;
}

/* POSTs the Stripe event evt_id; returns the status, the Retry-After and
 * Idempotent-Replayed headers' presence in *ret_retry / *ret_replayed. */
static long t_post(struct daemon *d, const char *evt_id, int *ret_retry, int *ret_replayed)
{
	char *evt = hn_stripe_event(evt_id, "customer.created",
	                            "{\"id\":\"cus_newer\",\"object\":\"customer\"}");
	struct hres r;
	char *h;
	long status;

	assert_non_null(evt);
	assert_int_equal(hn_post_stripe(d, "stripe", T_SECRET, evt, &r), 0);
	status = r.hs_status;
	h = hres_header(&r, "Retry-After");
	*ret_retry = h != NULL;
	free(h);
	h = hres_header(&r, "Idempotent-Replayed");
	*ret_replayed = h != NULL;
	free(h);
	hres_finish(&r);
	free(evt);
	return status;
}

/* The statements that record version as the schema's on PostgreSQL. */
static void t_pg_schema_sql(char *sql, size_t size, int64_t version)
{
	snprintf(sql, size,
	         "DELETE FROM idemhook_schema WHERE version > %" PRId64 "; "
	         "INSERT INTO idemhook_schema (version, name, applied_at) "
	         "SELECT %" PRId64 ", 'from_a_newer_release', 0 WHERE NOT EXISTS "
	         "(SELECT 1 FROM idemhook_schema WHERE version = %" PRId64 ");",
	         version, version, version);
}

/* Records the schema as version: what a newer release's migrate leaves
 * (or, given this binary's version, what undoes it). */
static void t_set_schema(const struct daemon *d, int64_t version)
{
	char sql[320];

	if (d->dm_pg_db[0] != '\0') {
		struct pgserver *pg = pgserver_shared(NULL);

		assert_non_null(pg);
		t_pg_schema_sql(sql, sizeof(sql), version);
		assert_int_equal(pgserver_psql(pg, d->dm_pg_db, sql, NULL), 0);
	} else {
		struct hn_sqlite l;

		snprintf(sql, sizeof(sql), "PRAGMA user_version = %" PRId64 ";", version);
		assert_int_equal(hn_sqlite_start(&l, d->dm_db, sql), 0);
		assert_int_equal(hn_sqlite_finish(&l, ""), 0);
	}
}

static int64_t t_schema(const struct daemon *d)
{
	return hn_db_int(d->dm_db, d->dm_pg_db[0] != '\0'
	                                   ? "SELECT max(version) FROM idemhook_schema"
	                                   : "PRAGMA user_version");
}

static int64_t t_records(const struct daemon *d)
{
	return hn_db_int(d->dm_db, "SELECT count(*) FROM idempotency_records");
}

static void test_receivers_facing_a_newer_schema_are_not_ready_and_store_nothing(void **state)
{
	struct daemon d[2];
	size_t n = 1;
	size_t i;
	int64_t version;
	int retry;
	int replayed;

	(void)state;
	assert_int_equal(daemon_init(&d[0], T_INI), 0);
	if (d[0].dm_pg_db[0] != '\0') {
		assert_int_equal(daemon_init_beside(&d[1], &d[0], T_INI), 0);
		n = 2;
	}
	for (i = 0; i < n; i++) {
		assert_int_equal(daemon_start(&d[i]), 0);
		assert_int_equal(t_readyz_until(&d[i], 200, NULL), 0);
	}
	/* one callback before the upgrade, stored */
	assert_int_equal(t_post(&d[0], "evt_before_upgrade", &retry, &replayed), 200);
	assert_int_equal(t_records(&d[0]), 1);
	version = t_schema(&d[0]);
	assert_true(version > 1);

	t_set_schema(&d[0], version + 1);
	for (i = 0; i < n; i++) {
		assert_int_equal(t_readyz_until(&d[i], 503, "newer than this idemhook"), 0);
		/* a new callback: 503 with Retry-After, nothing stored */
		assert_int_equal(t_post(&d[i], "evt_during_upgrade", &retry, &replayed), 503);
		assert_true(retry);
		assert_int_equal(t_post(&d[i], "evt_during_upgrade", &retry, &replayed), 503);
		/* a duplicate of a stored one: its stored reply */
		assert_int_equal(t_post(&d[i], "evt_before_upgrade", &retry, &replayed), 200);
		assert_true(replayed);
		/* still not ready: not ready and writing never go together */
		assert_int_equal(t_readyz_until(&d[i], 503, "newer than this idemhook"), 0);
	}
	for (i = 0; i < n; i++) {
		/* said once, however many callbacks met it */
		assert_int_equal(t_log_count(&d[i], "store: database schema "), 1);
	}

	/* the schema this binary knows again (as when the receiver runs the
	 * release that matches it): ready, and the provider's retry lands */
	t_set_schema(&d[0], version);
	/* (read back only now: the store's reads refuse a newer schema too)
	 * nothing was written while the schema was newer */
	assert_int_equal(t_records(&d[0]), 1);
	assert_int_equal(hn_db_int(d[0].dm_db, "SELECT count(*) FROM idempotency_records WHERE "
	                                       "idem_key = 'evt_during_upgrade'"),
	                 0);
	for (i = 0; i < n; i++) {
		assert_int_equal(t_readyz_until(&d[i], 200, NULL), 0);
		assert_int_equal(daemon_log_wait(&d[i], "writes resume", T_WAIT_MS), 0);
	}
	assert_int_equal(t_post(&d[n - 1], "evt_during_upgrade", &retry, &replayed), 200);
	assert_false(replayed);
	assert_int_equal(t_records(&d[0]), 2);
	for (i = n; i-- > 0;) {
		assert_int_equal(daemon_term(&d[i], 30), 0);
		daemon_finish(&d[i]);
	}
}

/* The probe reads the schema every 250 ms; a callback that comes right
 * after a newer release's migration committed, before the next probe, is
 * refused all the same: each write transaction reads the version itself
 * (on PostgreSQL in the round that carries its BEGIN). */
static void test_a_callback_right_after_a_newer_migration_stores_nothing(void **state)
{
	struct pgserver_session tp = {0};
	struct daemon d;
	char evt_id[64];
	char sql[320];
	int64_t version;
	int retry;
	int replayed;
	int round;
	int pg;

	(void)state;
	assert_int_equal(daemon_init(&d, T_INI), 0);
	pg = d.dm_pg_db[0] != '\0';
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(t_readyz_until(&d, 200, NULL), 0);
	assert_int_equal(t_post(&d, "evt_before_race", &retry, &replayed), 200);
	version = t_schema(&d);
	if (pg) {
		/* Kept open, so that the version commits a moment before the
		 * next request (a new psql takes long enough to start for the
		 * health probe to run in between). */
		assert_int_equal(pgserver_session_start(&tp, pgserver_shared(NULL), d.dm_pg_db), 0);
	}
	for (round = 0; round < 5; round++) {
		snprintf(evt_id, sizeof(evt_id), "evt_race_%d", round);
		if (pg) {
			t_pg_schema_sql(sql, sizeof(sql), version + 1);
			assert_int_equal(pgserver_session_run(&tp, sql), 0);
		} else {
			t_set_schema(&d, version + 1);
		}
		assert_int_equal(t_post(&d, evt_id, &retry, &replayed), 503);
		assert_true(retry);
		t_set_schema(&d, version);
		snprintf(sql, sizeof(sql),
		         "SELECT count(*) FROM idempotency_records WHERE idem_key = '%s'", evt_id);
		assert_int_equal(hn_db_int(d.dm_db, sql), 0);
		/* the next probe finds the schema this binary's again */
		assert_int_equal(t_log_wait_count(&d, "writes resume", round + 1), 0);
	}
	if (pg) {
		assert_int_equal(pgserver_session_finish(&tp), 0);
	}
	assert_int_equal(t_records(&d), 1);
	/* the provider's retry lands once the schema is this binary's */
	assert_int_equal(t_post(&d, "evt_race_0", &retry, &replayed), 200);
	assert_int_equal(t_records(&d), 2);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* Runs the command args (NULL-terminated), returns its exit status with
 * its stdout and stderr in *ret_out and *ret_err (the caller frees). */
static int t_cli(struct daemon *d, const char *const *args, char **ret_out, char **ret_err)
{
	int rc = daemon_cli_err(d, 1, args, ret_out, ret_err);

	assert_non_null(*ret_err);
	return rc;
}

/* Every migration so far keeps what an older release reads, so the
 * commands that only read may read a newer schema as their own (with a
 * notice); every command that writes still refuses it, changing nothing. */
static void test_read_only_commands_read_a_newer_schema_and_writers_refuse_it(void **state)
{
	static const char *const readers[][5] = {
	        {"events", "list", NULL}, {"events", "show", "EVENT", NULL},
	        {"order", "list", NULL},  {"order", "show", "ORDER", NULL},
	        {"stats", NULL},          {"audit", "list", NULL},
	        {"outbox", "list", NULL}, {"gc", "--dry-run", NULL},
	};
	static const char *const writers[][6] = {
	        {"order", "create", "--amount", "500", "--currency", "usd"},
	        {"events", "dismiss", "EVENT", "--reason", "t", NULL},
	        {"gc", NULL},
	        {"migrate", NULL},
	};
	struct daemon d;
	char notice[160];
	char refused[160];
	char event_id[32];
	char order_id[96];
	char *out = NULL;
	char *err = NULL;
	const char *args[8];
	int64_t version;
	int64_t records;
	int retry;
	int replayed;
	size_t i;
	size_t j;
	int rc;

	(void)state;
	assert_int_equal(daemon_init(&d, T_INI), 0);
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(t_readyz_until(&d, 200, NULL), 0);
	assert_int_equal(t_post(&d, "evt_read_newer", &retry, &replayed), 200);
	{
		const char *create[] = {"order",      "create", "--amount", "1999",
		                        "--currency", "usd",    NULL};

		assert_int_equal(t_cli(&d, create, &out, &err), 0);
		assert_non_null(out);
		assert_int_equal(sscanf(out, "%95s", order_id), 1);
		free(out);
		free(err);
	}
	assert_int_equal(daemon_term(&d, 30), 0);
	snprintf(event_id, sizeof(event_id), "%" PRId64,
	         hn_db_int(d.dm_db, "SELECT id FROM events WHERE idem_key = 'evt_read_newer'"));
	version = t_schema(&d);
	records = t_records(&d);
	t_set_schema(&d, version + 1);
	snprintf(notice, sizeof(notice),
	         "database schema %" PRId64 " is newer than this idemhook (%" PRId64
	         "): reading it as %" PRId64,
	         version + 1, version, version);
	snprintf(refused, sizeof(refused),
	         "database schema version %" PRId64 " is newer than this idemhook (%" PRId64
	         "); refusing to touch it",
	         version + 1, version);

	for (i = 0; i < sizeof(readers) / sizeof(readers[0]); i++) {
		for (j = 0; readers[i][j] != NULL; j++) {
			args[j] = strcmp(readers[i][j], "EVENT") == 0   ? event_id
			          : strcmp(readers[i][j], "ORDER") == 0 ? order_id
			                                                : readers[i][j];
		}
		args[j] = NULL;
		rc = t_cli(&d, args, &out, &err);
		if (rc != 0 || strstr(err, notice) == NULL) {
			fprintf(stderr, "%s %s: %d\n%s", args[0], args[1] != NULL ? args[1] : "",
			        rc, err);
		}
		assert_int_equal(rc, 0);
		assert_non_null(strstr(err, notice));
		if (strcmp(args[0], "events") == 0 || strcmp(args[0], "order") == 0) {
			/* what is stored, read */
			assert_non_null(out);
			assert_non_null(strstr(
			        out, strcmp(args[0], "events") == 0 ? "evt_read_newer" : order_id));
		}
		free(out);
		free(err);
	}
	for (i = 0; i < sizeof(writers) / sizeof(writers[0]); i++) {
		for (j = 0; j < 6 && writers[i][j] != NULL; j++) {
			args[j] = strcmp(writers[i][j], "EVENT") == 0 ? event_id : writers[i][j];
		}
		args[j] = NULL;
		rc = t_cli(&d, args, &out, &err);
		if (rc == 0 || strstr(err, refused) == NULL) {
			fprintf(stderr, "%s %s: %d\n%s", args[0], args[1] != NULL ? args[1] : "",
			        rc, err);
		}
		assert_int_not_equal(rc, 0);
		assert_non_null(strstr(err, refused));
		assert_null(strstr(err, "reading it as"));
		free(out);
		free(err);
	}
	/* nothing written: the schema and the rows as they were */
	assert_int_equal(t_schema(&d), version + 1);
	t_set_schema(&d, version);
	assert_int_equal(t_records(&d), records);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM orders"), 1);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT count(*) FROM events WHERE dismissed_at IS "
	                                    "NOT NULL"),
	                 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_receivers_facing_a_newer_schema_are_not_ready_and_store_nothing),
	        cmocka_unit_test(test_a_callback_right_after_a_newer_migration_stores_nothing),
	        cmocka_unit_test(test_read_only_commands_read_a_newer_schema_and_writers_refuse_it),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
