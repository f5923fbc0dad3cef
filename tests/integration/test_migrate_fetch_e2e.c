/* test_migrate_fetch_e2e.c: migration index_thin_events_waiting gives the
 * thin events waiting for their full event an index of their own, so that
 * the fetch worker's list of them (ingest_fetch_pending) reads those rows
 * and not every event stored: a list from the beginning held a read
 * transaction open for a minute on 10,000,000 stored callbacks, and no
 * checkpoint could copy the WAL meanwhile (docs/benchmarks.md). `idemhook
 * migrate` carries a database of the schema before it, with events in it,
 * forward: every row kept, the index made, the list's statement planned on
 * it (SQLite), and the list finding the waiting events and only those, from
 * the beginning and from a mark. On PostgreSQL (suite postgresql) the same,
 * but the plan, which depends on the table's statistics. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "ingest.h"
#include "provider_e2e.h"
#include "store.h"

#define T_MIGRATION "_index_thin_events_waiting.sql"
#define T_DONE 200 /* events applied, not waiting */

/* Rows of the schema before the migration: T_DONE applied events, received
 * at 1000 to 1000 + T_DONE - 1, and two thin events waiting for their full
 * event, received at 1050 and 2000. */
static void t_rows(struct buf *sql, int pg, void *arg)
{
	const char *blob = pg ? "decode(repeat('ab', 32), 'hex')" : "randomblob(32)";
	int i;

	(void)arg;
	for (i = 0; i < T_DONE; i++) {
		buf_printf(sql,
		           "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
		           "fence_token, created_at, updated_at, type, kind, outcome, effect, "
		           "received_at, processed_at) VALUES ('stripe', 'evt_done_%d', 'done', "
		           "%s, 1, "
		           "%d, %d, 'customer.created', 'ignored', 'done', 'ignored', %d, %d);\n",
		           i, blob, 1000 + i, 1000 + i, 1000 + i, 1000 + i);
	}
	buf_printf(sql,
	           "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	           "fence_token, created_at, updated_at, type, kind, outcome, effect, received_at, "
	           "processed_at) VALUES ('stripe', 'evt_thin_early', 'done', %s, 1, 1050, 1050, "
	           "'v1.payment_intent.succeeded', 'thin', 'done', 'to_fetch', 1050, 1050), "
	           "('stripe', 'evt_thin_late', 'done', %s, 1, 2000, 2000, "
	           "'v1.payment_intent.succeeded', 'thin', 'done', 'to_fetch', 2000, 2000);\n",
	           blob, blob);
}

struct t_list {
	char tl_keys[4][64];
	int64_t tl_received[4];
	size_t tl_n;
};

static int t_list_row(void *arg, const struct ingest_waiting *w)
{
	struct t_list *l = arg;

	assert_string_equal(w->iw_scope, "stripe");
	if (l->tl_n >= sizeof(l->tl_keys) / sizeof(l->tl_keys[0])) {
		return -1;
	}
	snprintf(l->tl_keys[l->tl_n], sizeof(l->tl_keys[0]), "%s", w->iw_key);
	l->tl_received[l->tl_n++] = w->iw_received_ms;
	return 0;
}

/* A store on d's database (the daemon stopped). */
static struct store *t_store(struct daemon *d)
{
	struct store_options so;
	struct store *st;

	memset(&so, 0, sizeof(so));
	assert_int_equal(store_location_parse(d->dm_db, &so), 0);
	st = store_create(&so);
	assert_non_null(st);
	return st;
}

static int t_exec_unit(struct store_tx *tx, void *arg)
{
	return store_exec(tx, arg, NULL, 0, NULL);
}

/* Runs one statement on d's database (the daemon stopped). */
static void t_exec(struct daemon *d, const char *sql)
{
	struct store *st = t_store(d);

	assert_true(store_write(st, 0, t_exec_unit, (void *)sql) >= 0);
	store_destroy(st);
}

static int t_plan_row(void *arg, const struct store_row *row)
{
	const char *detail = store_row_text(row, 3);

	return buf_printf(arg, "%s\n", detail != NULL ? detail : "") < 0 ? -1 : 0;
}

static int t_plan_read(struct store_tx *tx, void *arg)
{
	struct store_value p[] = {store_int(0),   store_int(0),   store_text(""),
	                          store_text(""), store_text(""), store_int(100)};

	return store_query_each(tx, "EXPLAIN QUERY PLAN " INGEST_SQL_FETCH_PENDING, p, 6,
	                        t_plan_row, arg);
}

/* SQLite's plan of the fetch worker's list on d's database, one line per
 * step (the daemon stopped). */
static char *t_plan(struct daemon *d)
{
	struct store *st = t_store(d);
	struct buf b;

	buf_init(&b, 0);
	assert_int_equal(store_read(st, 0, t_plan_read, &b), 0);
	store_destroy(st);
	return buf_take(&b, NULL);
}

/* The fetch worker's list on d's database (the daemon stopped), from
 * since_ms. */
static void t_list(struct daemon *d, int64_t since_ms, struct t_list *ret)
{
	struct store *st = t_store(d);

	memset(ret, 0, sizeof(*ret));
	assert_int_equal(ingest_fetch_pending(st, since_ms, NULL, NULL, 100, t_list_row, ret), 0);
	store_destroy(st);
}

static void test_migrate_indexes_the_waiting_thin_events(void **state)
{
	struct t_list l;
	struct daemon d;
	char *plan;
	int pg;

	(void)state;
	pg = e2e_migrate_from(&d, FX_STRIPE_INI, T_MIGRATION, t_rows, NULL);

	/* Every row kept. */
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events"), T_DONE + 2);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events WHERE effect = 'to_fetch'"),
	                 2);
	/* The index, partial on the waiting rows. */
	assert_int_equal(
	        e2e_db_int(&d, pg ? "SELECT COUNT(*) FROM pg_indexes WHERE indexname = "
	                            "'events_to_fetch' AND indexdef LIKE '%%to_fetch%%'"
	                          : "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' "
	                            "AND name = 'events_to_fetch' AND sql LIKE '%%to_fetch%%'"),
	        1);
	if (!pg) {
		/* The list's own statement reads that index, not the index of
		 * every event's time. */
		plan = t_plan(&d);
		assert_non_null(plan);
		if (strstr(plan, "USING INDEX events_to_fetch") == NULL) {
			fail_msg("the list of waiting thin events is planned as: %s", plan);
		}
		free(plan);
	}

	/* From the beginning: both waiting events, oldest first, and no
	 * other; from a mark: the later one. */
	t_list(&d, 0, &l);
	assert_int_equal(l.tl_n, 2);
	assert_string_equal(l.tl_keys[0], "evt_thin_early");
	assert_int_equal(l.tl_received[0], 1050);
	assert_string_equal(l.tl_keys[1], "evt_thin_late");
	assert_int_equal(l.tl_received[1], 2000);
	t_list(&d, 1051, &l);
	assert_int_equal(l.tl_n, 1);
	assert_string_equal(l.tl_keys[0], "evt_thin_late");

	/* A waiting event that is no longer waiting leaves the list. */
	t_exec(&d, "UPDATE idempotency_records SET effect = 'paid' WHERE idem_key = "
	           "'evt_thin_early'");
	t_list(&d, 0, &l);
	assert_int_equal(l.tl_n, 1);
	assert_string_equal(l.tl_keys[0], "evt_thin_late");
	daemon_finish(&d);
}

/* A new database has the index too. */
static void test_new_database_indexes_the_waiting_thin_events(void **state)
{
	static const char *const args[] = {"migrate", NULL};
	struct daemon d;
	int pg;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	pg = d.dm_pg_db[0] != '\0';
	assert_int_equal(daemon_cli(&d, 1, args, NULL), 0);
	assert_int_equal(e2e_db_int(&d, pg ? "SELECT COUNT(*) FROM pg_indexes WHERE indexname = "
	                                     "'events_to_fetch'"
	                                   : "SELECT COUNT(*) FROM sqlite_master WHERE type = "
	                                     "'index' AND name = 'events_to_fetch'"),
	                 1);
	daemon_finish(&d);
}

#define T_MIGRATION_0017 "_index_undismissed_thin_events.sql"
#define T_WAITING 30 /* thin events waiting in t_rows_0017 */

/* Rows of the schema before migration index_undismissed_thin_events:
 * T_DONE applied events, T_WAITING live thin events waiting for their full
 * event (evt_wait_0 received at 3000, ...), and a failed event dismissed. */
static void t_rows_0017(struct buf *sql, int pg, void *arg)
{
	const char *blob = pg ? "decode(repeat('ab', 32), 'hex')" : "randomblob(32)";
	int i;

	t_rows(sql, pg, arg);
	for (i = 0; i < T_WAITING; i++) {
		buf_printf(sql,
		           "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
		           "fence_token, created_at, updated_at, type, kind, payment_ref, outcome, "
		           "effect, received_at, processed_at) VALUES ('stripe', 'evt_wait_%d', "
		           "'done', %s, 1, %d, %d, 'v1.payment_intent.succeeded', 'other', "
		           "'pi_wait_%d', 'done', 'to_fetch', %d, %d);\n",
		           i, blob, 3000 + i, 3000 + i, i, 3000 + i, 3000 + i);
	}
	buf_printf(sql,
	           "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
	           "fence_token, created_at, updated_at, type, kind, outcome, reason, received_at, "
	           "processed_at, dismissed_at, dismissed_by, dismiss_reason) VALUES ('stripe', "
	           "'evt_failed_closed', 'failed', %s, 1, 2500, 2500, 'payment_intent.succeeded', "
	           "'payment_succeeded', 'failed', 'unknown_order', 2500, 2500, 2600, 'cli:ops', "
	           "'paid at the till');\n",
	           blob);
}

/* Dismisses the thin event key through `idemhook events dismiss` (the
 * daemon stopped). */
static void t_dismiss(struct daemon *d, const char *key)
{
	char id[32];
	const char *args[] = {"events", "dismiss", id, "--reason", "Stripe no longer has it", NULL};

	snprintf(id, sizeof(id), "%lld",
	         (long long)e2e_db_int(d, "SELECT id FROM events WHERE idem_key = '%s'", key));
	assert_int_equal(daemon_cli(d, 1, args, NULL), 0);
}

/* Migration 0017 gives events_to_fetch the condition the list now has
 * (dismissed_at IS NULL), so a thin event an operator dismissed leaves the
 * index as an applied one does: the list finds only those still waiting,
 * through the index, and the index holds those alone (SQLite's ANALYZE
 * counts its entries). */
static void test_migrate_leaves_dismissed_thin_events_out_of_the_index(void **state)
{
	struct t_list l;
	struct daemon d;
	char key[32];
	char *plan;
	int pg;
	int i;

	(void)state;
	pg = e2e_migrate_from(&d, FX_STRIPE_INI, T_MIGRATION_0017, t_rows_0017, NULL);

	/* Every row kept; the index remade on the new condition. */
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events"), T_DONE + 2 + T_WAITING + 1);
	assert_int_equal(
	        e2e_db_int(&d, pg ? "SELECT COUNT(*) FROM pg_indexes WHERE indexname = "
	                            "'events_to_fetch' AND indexdef LIKE '%%to_fetch%%' AND "
	                            "indexdef LIKE '%%dismissed_at IS NULL%%'"
	                          : "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' "
	                            "AND name = 'events_to_fetch' AND sql LIKE '%%to_fetch%%' "
	                            "AND sql LIKE '%%dismissed_at IS NULL%%'"),
	        1);
	/* All but the first two waiting thin events dismissed, the way an
	 * operator does it; and one early thin event too. */
	for (i = 2; i < T_WAITING; i++) {
		snprintf(key, sizeof(key), "evt_wait_%d", i);
		t_dismiss(&d, key);
	}
	t_dismiss(&d, "evt_thin_early");
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM events WHERE effect = 'to_fetch' "
	                                "AND dismissed_at IS NOT NULL"),
	                 T_WAITING - 2 + 1);
	if (!pg) {
		plan = t_plan(&d);
		assert_non_null(plan);
		if (strstr(plan, "USING INDEX events_to_fetch") == NULL) {
			fail_msg("the list of waiting thin events is planned as: %s", plan);
		}
		free(plan);
		/* The index's entries: the three still waiting, no dismissed one. */
		t_exec(&d, "ANALYZE");
		assert_int_equal(e2e_db_int(&d, "SELECT CAST(stat AS INTEGER) FROM sqlite_stat1 "
		                                "WHERE idx = 'events_to_fetch'"),
		                 3);
	}
	/* The list: those still waiting, oldest first, from the beginning. */
	t_list(&d, 0, &l);
	assert_int_equal(l.tl_n, 3);
	assert_string_equal(l.tl_keys[0], "evt_thin_late");
	assert_string_equal(l.tl_keys[1], "evt_wait_0");
	assert_string_equal(l.tl_keys[2], "evt_wait_1");
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_migrate_indexes_the_waiting_thin_events),
	        cmocka_unit_test(test_new_database_indexes_the_waiting_thin_events),
	        cmocka_unit_test(test_migrate_leaves_dismissed_thin_events_out_of_the_index),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
