/* test_pg_conninfo.c: a PostgreSQL connection string holds the password,
 * so it is read as a secret and never written to the log: not when it
 * works, not when libpq cannot parse it (libpq's own message quotes the
 * text it stopped at, or the whole URI), on the receiver's configuration
 * and on `store copy`'s command line alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_common.h"

#define T_PASSWORD "Pw_never_logged_7"

/* Connection strings libpq refuses to parse, each with the password where
 * libpq's message quotes it. */
static const char *const t_malformed[] = {
        /* a space in an unquoted value: missing "=" after "never..." */
        "host=127.0.0.1 port=1 dbname=idemhook user=idemhook password=x " T_PASSWORD,
        /* a bad escape in a URI: the token is quoted */
        "postgresql://idemhook:" T_PASSWORD "%zz@127.0.0.1:1/idemhook",
        /* an unclosed IPv6 bracket: the whole URI is quoted */
        "postgresql://idemhook:" T_PASSWORD "@[::1:1/idemhook",
        /* a query parameter without "=": the URI is quoted */
        "postgresql://idemhook:" T_PASSWORD "@127.0.0.1:1/idemhook?sslmode",
};

/* Points d's [store] conninfo at file:PATH holding conninfo. */
static void t_conninfo_secret(struct daemon *d, const char *conninfo)
{
	char *text = hn_read_file(d->dm_config);
	char path[700];
	char *line;
	char *end;
	FILE *f;

	assert_non_null(text);
	assert_int_equal(daemon_write_file(d, "pg.conninfo", conninfo), 0);
	snprintf(path, sizeof(path), "%s/pg.conninfo", d->dm_dir);
	line = strstr(text, "\nconninfo = ");
	assert_non_null(line);
	end = strchr(line + 1, '\n');
	assert_non_null(end);
	f = fopen(d->dm_config, "w");
	assert_non_null(f);
	fprintf(f, "%.*s\nconninfo = file:%s%s", (int)(line - text), text, path, end);
	assert_int_equal(fclose(f), 0);
	free(text);
}

static void t_log_is_clean(struct daemon *d, const char *expect)
{
	char *log_text = hn_read_file(d->dm_log);

	assert_non_null(log_text);
	if (strstr(log_text, "never_logged") != NULL || strstr(log_text, expect) == NULL) {
		print_message("log:\n%s\n", log_text);
	}
	assert_null(strstr(log_text, "never_logged"));
	assert_non_null(strstr(log_text, expect));
	free(log_text);
}

/* Every command that opens the store (serve's way in: migrate; a reader:
 * stats) refuses a connection string libpq cannot parse, says what kind of
 * mistake it is, and leaves the password out of the log. */
static void
test_a_conninfo_libpq_cannot_parse_is_refused_without_its_password_in_the_log(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const stats[] = {"stats", NULL};
	struct daemon d;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t_malformed) / sizeof(t_malformed[0]); i++) {
		assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
		t_conninfo_secret(&d, t_malformed[i]);
		assert_int_not_equal(daemon_cli(&d, 1, migrate, NULL), 0);
		assert_int_not_equal(daemon_cli(&d, 1, stats, NULL), 0);
		t_log_is_clean(&d, "is not a libpq connection string or URI");
		daemon_finish(&d);
	}
}

/* A server out of reach is no fault of the database's: migrate exits 69
 * as every other command does (EX_UNAVAILABLE: run it again once the
 * server answers), not 65, which says the schema was refused. */
static void test_a_server_out_of_reach_is_69_for_migrate_as_for_the_others(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const stats[] = {"stats", NULL};
	struct daemon d;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	t_conninfo_secret(&d, "host=127.0.0.1 port=1 dbname=idemhook user=idemhook "
	                      "connect_timeout=2 password=" T_PASSWORD);
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 69);
	assert_int_equal(daemon_cli(&d, 1, stats, NULL), 69);
	t_log_is_clean(&d, "cannot connect to postgresql");
	daemon_finish(&d);
}

/* store copy names its stores on the command line: a target libpq cannot
 * parse is refused the same way, nothing copied, no password written. */
static void test_store_copy_refuses_a_malformed_target_without_its_password_in_the_log(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	struct daemon d;
	char from[700];
	char to[300];
	const char *args[] = {"store", "copy", "--from", from, "--to", to, NULL};
	size_t i;

	(void)state;
	/* the source: a SQLite receiver's database */
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	snprintf(from, sizeof(from), "sqlite:%s", d.dm_db);
	for (i = 0; i < sizeof(t_malformed) / sizeof(t_malformed[0]); i++) {
		snprintf(to, sizeof(to), "%s%s",
		         strncmp(t_malformed[i], "postgresql:", 11) == 0 ? "" : "postgresql:",
		         t_malformed[i]);
		assert_int_not_equal(daemon_cli(&d, 0, args, NULL), 0);
	}
	t_log_is_clean(&d, "is not a libpq connection string or URI");
	daemon_finish(&d);
}

/* A receiver serving on a conninfo with a password (file: secret) says
 * nothing of it while it serves, loses the database and reaches it again. */
static void test_a_working_conninfo_with_a_password_stays_out_of_the_log(void **state)
{
	struct pgserver *pg = pgserver_shared(NULL);
	struct daemon d;
	char conninfo[700];
	char sql[300];
	char id[64];
	char *out = NULL;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	/* the throwaway server trusts its socket: the password is carried,
	 * never checked */
	pgserver_conninfo(pg, d.dm_pg_db, conninfo, sizeof(conninfo));
	strncat(conninfo, " password=" T_PASSWORD, sizeof(conninfo) - strlen(conninfo) - 1);
	t_conninfo_secret(&d, conninfo);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1000, "eur", id);
	snprintf(sql, sizeof(sql),
	         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
	         "'%s' AND pid <> pg_backend_pid()",
	         d.dm_pg_db);
	assert_int_equal(pgserver_psql(pg, NULL, sql, &out), 0);
	assert_non_null(out);
	/* it had sessions, which the server closed */
	assert_true(atoi(out) > 0);
	free(out);
	assert_int_equal(fx_stripe_pay(&d, "evt_pg_conninfo", id, 1000, "eur"), 200);
	/* and it did reach the database again, with the password */
	assert_int_equal(daemon_log_wait(&d, "store: reconnected to postgresql", 1000), 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	t_log_is_clean(&d, "listening on");
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_a_server_out_of_reach_is_69_for_migrate_as_for_the_others),
	        cmocka_unit_test(
	                test_a_conninfo_libpq_cannot_parse_is_refused_without_its_password_in_the_log),
	        cmocka_unit_test(
	                test_store_copy_refuses_a_malformed_target_without_its_password_in_the_log),
	        cmocka_unit_test(test_a_working_conninfo_with_a_password_stays_out_of_the_log),
	};

	pgserver_require_or_skip("test_pg_conninfo");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
