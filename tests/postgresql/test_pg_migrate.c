/* test_pg_migrate.c: receivers (or `idemhook migrate` runs) starting
 * together on a new PostgreSQL database migrate it once, under an advisory
 * lock, and each reports what it did itself: one "migrated from schema
 * version 0", the others "up to date", as they found the schema once the
 * lock was theirs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_common.h"

#define T_RUNS 4

static void test_migrate_runs_at_once_report_the_migration_once(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	struct daemon d;
	pid_t pids[T_RUNS];
	int migrated = 0;
	int up_to_date = 0;
	size_t i;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	for (i = 0; i < T_RUNS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			char *out = NULL;
			char name[32];
			int rc = daemon_cli(&d, 1, migrate, &out);

			snprintf(name, sizeof(name), "migrate-%zu.out", i);
			if (daemon_write_file(&d, name, out != NULL ? out : "") < 0) {
				rc = 99;
			}
			_exit(rc == 0 ? 0 : 1);
		}
	}
	for (i = 0; i < T_RUNS; i++) {
		int status = 0;
		char path[700];
		char *out;

		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		snprintf(path, sizeof(path), "%s/migrate-%zu.out", d.dm_dir, i);
		out = hn_read_file(path);
		assert_non_null(out);
		print_message("migrate %zu: %s", i, out);
		migrated += strstr(out, "migrated from schema version 0 to ") != NULL;
		up_to_date += strstr(out, "up to date") != NULL;
		free(out);
	}
	assert_int_equal(migrated, 1);
	assert_int_equal(up_to_date, T_RUNS - 1);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_migrate_runs_at_once_report_the_migration_once),
	};

	pgserver_require_or_skip("test_pg_migrate");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
