/* test_pgserver.c: the throwaway PostgreSQL server of the harness starts
 * durable, hands out fresh databases, and leaves nothing behind, not even
 * when its test program is killed. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pgserver.h"

#define PGSELF_GONE_WAIT_MS 30000

static void pgself_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Waits for the directory to be removed and the process to be gone. */
static int pgself_wait_gone(const char *dir, pid_t pid)
{
	int waited;

	for (waited = 0; waited < PGSELF_GONE_WAIT_MS; waited += 50) {
		if (access(dir, F_OK) != 0 && (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))) {
			return 0;
		}
		pgself_sleep_ms(50);
	}
	return -1;
}

static void test_a_throwaway_server_answers_with_fsync_and_synchronous_commit_on(void **state)
{
	struct pgserver pg;
	char dir[512];
	char *out = NULL;
	pid_t pid;

	assert_int_equal(pgserver_start(&pg), 0);
	snprintf(dir, sizeof(dir), "%s", pg.pg_dir);
	pid = pgserver_postmaster_pid(&pg);
	assert_true(pid > 0);
	assert_int_equal(pgserver_psql(&pg, NULL,
	                               "SELECT current_setting('fsync') || ' ' || "
	                               "current_setting('synchronous_commit') "
	                               "|| ' ' || current_setting('full_page_writes')",
	                               &out),
	                 0);
	assert_string_equal(out, "on on on\n");
	free(out);
	pgserver_stop(&pg);
	assert_int_equal(pgself_wait_gone(dir, pid), 0);
	/* Stopping twice is harmless. */
	pgserver_stop(&pg);
}

static void test_each_created_database_is_fresh_and_reachable_by_its_conninfo(void **state)
{
	struct pgserver pg;
	char a[64];
	char b[64];
	char *out = NULL;

	assert_int_equal(pgserver_start(&pg), 0);
	assert_int_equal(pgserver_create_db(&pg, "t", a), 0);
	assert_int_equal(pgserver_create_db(&pg, "t", b), 0);
	assert_string_not_equal(a, b);
	assert_int_equal(
	        pgserver_psql(&pg, a,
	                      "CREATE TABLE only_in_a (x int); INSERT INTO only_in_a VALUES (7)",
	                      NULL),
	        0);
	assert_int_equal(pgserver_psql(&pg, a, "SELECT x FROM only_in_a", &out), 0);
	assert_string_equal(out, "7\n");
	free(out);
	/* The other database does not have it. */
	assert_int_equal(pgserver_psql(&pg, b, "SELECT x FROM only_in_a", NULL), -1);
	assert_int_equal(pgserver_psql(&pg, b, "SELECT current_database()", &out), 0);
	assert_non_null(strstr(out, b));
	free(out);
	pgserver_stop(&pg);
}

/* The test program dies by SIGKILL (a runner's timeout, a crash): its
 * watcher still stops the server and removes the directory. */
static void test_a_killed_test_program_leaves_no_server_and_no_directory(void **state)
{
	char dir[512];
	long postmaster = 0;
	int fds[2];
	pid_t child;
	FILE *f;

	assert_int_equal(pipe(fds), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		struct pgserver pg;
		FILE *w;

		close(fds[0]);
		if (pgserver_start(&pg) != 0) {
			_exit(1);
		}
		w = fdopen(fds[1], "w");
		fprintf(w, "%s %ld\n", pg.pg_dir, (long)pgserver_postmaster_pid(&pg));
		fclose(w);
		for (;;) {
			pause();
		}
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%511s %ld", dir, &postmaster), 2);
	fclose(f);
	assert_true(postmaster > 0);
	assert_int_equal(kill((pid_t)postmaster, 0), 0);
	assert_int_equal(access(dir, F_OK), 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	assert_int_equal(pgself_wait_gone(dir, (pid_t)postmaster), 0);
}

static int pgself_exit_status(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Without the binaries a test is skipped (77), unless the run requires
 * PostgreSQL (CI, contrib/test.sh): then it fails. */
static void test_missing_binaries_skip_unless_postgresql_is_required(void **state)
{
	struct pgserver pg;
	char bindir[256];
	pid_t pid;

	setenv("IDEMHOOK_PG_BINDIR", "/nonexistent/postgresql/bin", 1);
	assert_int_equal(pgserver_find_bindir(bindir, sizeof(bindir)), -1);
	assert_int_equal(pgserver_start(&pg), 1);
	pid = fork();
	if (pid == 0) {
		unsetenv("IDEMHOOK_TEST_REQUIRE_PG");
		pgserver_require_or_skip("child");
		_exit(0);
	}
	assert_int_equal(pgself_exit_status(pid), PGSERVER_SKIP);
	pid = fork();
	if (pid == 0) {
		setenv("IDEMHOOK_TEST_REQUIRE_PG", "1", 1);
		pgserver_require_or_skip("child");
		_exit(0);
	}
	assert_int_equal(pgself_exit_status(pid), 1);
	unsetenv("IDEMHOOK_PG_BINDIR");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_throwaway_server_answers_with_fsync_and_synchronous_commit_on),
	        cmocka_unit_test(test_each_created_database_is_fresh_and_reachable_by_its_conninfo),
	        cmocka_unit_test(test_a_killed_test_program_leaves_no_server_and_no_directory),
	        cmocka_unit_test(test_missing_binaries_skip_unless_postgresql_is_required),
	};
	char bindir[256];

	if (pgserver_find_bindir(bindir, sizeof(bindir)) < 0) {
		fprintf(stderr, "test_pgserver: no PostgreSQL installed\n");
		return pgserver_required() ? 1 : PGSERVER_SKIP;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
