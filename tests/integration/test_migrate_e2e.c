/* test_migrate_e2e.c: `idemhook migrate` brings a database of the previous
 * schema (migrations 0001-0004, built with the sqlite3 command) to the
 * current one with every row kept, foreign keys intact and each order's
 * payment reference known, so the first refund after the upgrade that names
 * only the payment finds its order. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "provider_e2e.h"
#include "fixtures.h"

#define T_PREVIOUS_SCHEMA 4

/* Appends the file at path to f. Returns 0 or -1. */
static int append_file(FILE *f, const char *path)
{
	char chunk[4096];
	FILE *in = fopen(path, "rb");
	size_t n;

	if (in == NULL) {
		return -1;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), in)) > 0) {
		fwrite(chunk, 1, n, f);
	}
	fclose(in);
	return 0;
}

/* Builds d's database at schema 4 with a paid, a partially refunded and a
 * pending order, their ledger, refund and outbox rows. */
static void build_previous_schema(struct daemon *d)
{
	static const char *const files[] = {"0001_create_idempotency_records.sql",
	                                    "0002_create_orders.sql", "0003_create_events.sql",
	                                    "0004_create_outbox.sql"};
	const char *root = getenv("IDEMHOOK_SOURCE_ROOT");
	char sql_path[700];
	char path[1024];
	char cmd[2048];
	FILE *f;
	size_t i;
	int rc;

	assert_non_null(root);
	snprintf(sql_path, sizeof(sql_path), "%s/schema4.sql", d->dm_dir);
	f = fopen(sql_path, "w");
	assert_non_null(f);
	fputs("PRAGMA foreign_keys = ON;\nBEGIN;\n", f);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/migrations/%s", root, files[i]);
		assert_int_equal(append_file(f, path), 0);
	}
	fprintf(f, "PRAGMA user_version = %d;\n", T_PREVIOUS_SCHEMA);
	fputs("INSERT INTO orders (id, amount, currency, status, refunded_amount, provider,"
	      " payment_ref, created_at, paid_at, refunded_at, updated_at) VALUES"
	      " ('ord_migrate_paid', 2000, 'USD', 'paid', 0, 'stripe', 'pi_migrate_paid', 1, 2,"
	      " NULL, 2),"
	      " ('ord_migrate_part', 1000, 'USD', 'partially_refunded', 300, 'stripe',"
	      " 'pi_migrate_part', 1, 2, 3, 3),"
	      " ('ord_migrate_pend', 500, 'EUR', 'pending', 0, NULL, NULL, 1, NULL, NULL, 1);\n"
	      "INSERT INTO refunds (order_id, provider, refund_ref, amount, created_at) VALUES"
	      " ('ord_migrate_part', 'stripe', 're_migrate_1', 300, 3);\n"
	      "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) VALUES"
	      " ('ord_migrate_paid', 'award', 'ord_migrate_paid', 20, 2),"
	      " ('ord_migrate_part', 'award', 'ord_migrate_part', 10, 2),"
	      " ('ord_migrate_part', 'clawback', 're_migrate_1', -3, 3);\n"
	      "INSERT INTO outbox (order_id, call_type, effect, url, content_type, body, idem_key,"
	      " window_start, next_attempt_at, created_at, updated_at) VALUES"
	      " ('ord_migrate_paid', 'notify', 'paid', 'http://127.0.0.1:9/x', 'application/json',"
	      " '{}', 'obx_migrate_1', 2, 2, 2, 2);\n"
	      "COMMIT;\n",
	      f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "sqlite3 -bail '%s' < '%s' > /dev/null 2>&1", d->dm_db,
	         sql_path);
	rc = system(cmd);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) == 127) {
		skip(); /* no sqlite3 command: contrib/install-deps.sh installs it */
	}
	assert_int_equal(WEXITSTATUS(rc), 0);
}

/* Rows that break a foreign key, counted by the sqlite3 command. */
static int foreign_key_violations(struct daemon *d)
{
	char cmd[1024];
	char line[256];
	FILE *p;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'PRAGMA foreign_key_check;'", d->dm_db);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p) != NULL) {
		n++;
	}
	assert_int_equal(pclose(p), 0);
	return n;
}

static void test_migrate_keeps_every_row_and_learns_each_payment_reference(void **state)
{
	static const char *const args[] = {"migrate", NULL};
	struct daemon d;
	struct hres r;
	char *body;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	build_previous_schema(&d);
	assert_int_equal(daemon_cli(&d, 1, args, NULL), 0);

	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM orders"), 3);
	assert_int_equal(e2e_db_int(&d,
	                            "SELECT COUNT(*) FROM orders WHERE (id, status, amount,"
	                            " refunded_amount) IN (VALUES ('ord_migrate_paid', 'paid',"
	                            " 2000, 0), ('ord_migrate_part', 'partially_refunded', 1000,"
	                            " 300), ('ord_migrate_pend', 'pending', 500, 0))"),
	                 3);
	assert_int_equal(e2e_db_int(&d, "SELECT SUM(points) FROM points_ledger"), 27);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM refunds WHERE status = 'applied'"),
	                 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM outbox"), 1);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM order_refs"), 2);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM order_refs WHERE provider = 'stripe'"
	                                " AND ref = 'pi_migrate_part' AND order_id ="
	                                " 'ord_migrate_part'"),
	                 1);
	assert_int_equal(foreign_key_violations(&d), 0);

	/* The daemon on the migrated file: a Checkout refund with no order id
	 * finds its order by the payment reference recorded before. */
	assert_int_equal(daemon_start(&d), 0);
	body = hn_stripe_event("evt_migrate_refund", "charge.refunded",
	                       "{\"id\":\"ch_migrate\",\"object\":\"charge\",\"amount\":1000,"
	                       "\"amount_refunded\":1000,\"currency\":\"usd\",\"payment_intent\":"
	                       "\"pi_migrate_part\",\"metadata\":{}}");
	assert_int_equal(hn_post_stripe(&d, "stripe", FX_STRIPE_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "\"outcome\":\"refunded\""));
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(&d,
	                   "SELECT status = 'refunded' FROM orders WHERE id = 'ord_migrate_part'"),
	        1);
	assert_int_equal(e2e_db_int(&d, "SELECT SUM(points) FROM points_ledger WHERE order_id ="
	                                " 'ord_migrate_part'"),
	                 0);
	free(body);
	daemon_finish(&d);
}

/* No rows: the schema alone. */
static void no_rows(struct buf *sql, int pg, void *arg)
{
	(void)sql;
	(void)pg;
	(void)arg;
}

/* A new binary on an older schema with --no-migrate, and the read
 * commands, which never migrate: each refuses with a line naming
 * `idemhook migrate`, exits 69, and leaves the schema as it was. */
static void test_an_older_schema_is_refused_until_it_is_migrated(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const serve[] = {"serve", "--no-migrate", NULL};
	static const char *const list[] = {"events", "list", NULL};
	static const char *const stats[] = {"stats", NULL};
	const char *const *refused[] = {serve, list, stats};
	struct daemon d;
	char text[96];
	char *out = NULL;
	char *log;
	int64_t version;
	size_t i;
	int rc;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	/* as the previous release left it */
	rc = hn_db_build_before(&d, "0019_", no_rows, NULL);
	if (rc == 1) {
		daemon_finish(&d);
		skip();
	}
	assert_int_equal(rc, 0);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_int_equal(daemon_cli(&d, 1, refused[i], NULL), 69);
	}
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "database schema version 18 is older than this idemhook"));
	assert_non_null(strstr(log, "run idemhook migrate"));
	free(log);

	/* none of them migrated it; migrate does, and then they work */
	assert_int_equal(daemon_cli(&d, 1, migrate, &out), 0);
	assert_non_null(out);
	version = e2e_db_int(&d, "PRAGMA user_version");
	snprintf(text, sizeof(text), "migrated from schema version 18 to %" PRId64, version);
	assert_non_null(strstr(out, text));
	free(out);
	assert_int_equal(daemon_cli(&d, 1, stats, NULL), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_migrate_keeps_every_row_and_learns_each_payment_reference),
	        cmocka_unit_test(test_an_older_schema_is_refused_until_it_is_migrated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
