/* test_log.c: deferred log lines (log_set_deferred): gathered, whole and in
 * order, written at once by a more urgent line, by log_flush and by exit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

/* Points stderr at a fresh temporary file; returns its descriptor for
 * log_read (the file is already unlinked). */
static int log_capture(void)
{
	char path[] = "/tmp/idemhook-test-log-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	return fd;
}

/* What the file holds so far, NUL-terminated, in out. */
static void log_read(int fd, char *out, size_t size)
{
	ssize_t n = pread(fd, out, size - 1, 0);

	assert_true(n >= 0);
	out[n] = '\0';
}

static void test_info_lines_wait_and_a_notice_writes_them_first_in_order(void **state)
{
	char got[4096];
	int fd = log_capture();

	/* A minute: the flusher does not write during this test. */
	assert_int_equal(log_set_deferred(60000), 0);
	log_info("first %d", 1);
	log_info("second");
	log_read(fd, got, sizeof(got));
	assert_string_equal(got, "");
	log_notice("urgent");
	log_read(fd, got, sizeof(got));
	assert_string_equal(got, "<6>first 1\n<6>second\n<5>urgent\n");
	log_warn("warned");
	log_read(fd, got, sizeof(got));
	assert_string_equal(got, "<6>first 1\n<6>second\n<5>urgent\n<4>warned\n");
	log_info("third");
	log_flush();
	log_read(fd, got, sizeof(got));
	assert_string_equal(got, "<6>first 1\n<6>second\n<5>urgent\n<4>warned\n<6>third\n");
	/* Back to a write per line. */
	assert_int_equal(log_set_deferred(0), 0);
	log_info("fourth");
	log_read(fd, got, sizeof(got));
	assert_string_equal(got,
	                    "<6>first 1\n<6>second\n<5>urgent\n<4>warned\n<6>third\n<6>fourth\n");
	close(fd);
}

static void test_many_lines_stay_whole_when_the_buffer_fills(void **state)
{
	static char got[200000];
	char want[64];
	char *p;
	int fd = log_capture();
	int i;

	assert_int_equal(log_set_deferred(60000), 0);
	for (i = 0; i < 3000; i++) {
		log_info("line %04d of a run that fills the buffer more than once", i);
	}
	log_flush();
	log_read(fd, got, sizeof(got));
	p = got;
	for (i = 0; i < 3000; i++) {
		size_t len = (size_t)snprintf(
		        want, sizeof(want),
		        "<6>line %04d of a run that fills the buffer more than once\n", i);

		assert_memory_equal(p, want, len);
		p += len;
	}
	assert_int_equal(*p, '\0');
	assert_int_equal(log_set_deferred(0), 0);
	close(fd);
}

static void test_the_flusher_writes_gathered_lines_without_another_line(void **state)
{
	char got[4096];
	int fd = log_capture();
	int i;

	assert_int_equal(log_set_deferred(10), 0);
	log_info("alone");
	/* Within 10 s, however busy the machine; no other line comes. */
	for (i = 0; i < 1000; i++) {
		log_read(fd, got, sizeof(got));
		if (strcmp(got, "<6>alone\n") == 0) {
			break;
		}
		usleep(10000);
	}
	assert_string_equal(got, "<6>alone\n");
	assert_int_equal(log_set_deferred(0), 0);
	close(fd);
}

static void test_exit_writes_gathered_lines(void **state)
{
	char got[4096];
	int fd = log_capture();
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if (log_set_deferred(60000) < 0) {
			_exit(2);
		}
		log_info("before exit");
		exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	log_read(fd, got, sizeof(got));
	assert_string_equal(got, "<6>before exit\n");
	close(fd);
}

/* The real stderr again after each test, for cmocka's messages. */
static int log_saved_stderr = -1;

static int log_restore(void **state)
{
	(void)state;
	dup2(log_saved_stderr, STDERR_FILENO);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        /* First: its child forks before any flusher thread exists. */
	        cmocka_unit_test_teardown(test_exit_writes_gathered_lines, log_restore),
	        cmocka_unit_test_teardown(
	                test_info_lines_wait_and_a_notice_writes_them_first_in_order, log_restore),
	        cmocka_unit_test_teardown(test_many_lines_stay_whole_when_the_buffer_fills,
	                                  log_restore),
	        cmocka_unit_test_teardown(
	                test_the_flusher_writes_gathered_lines_without_another_line, log_restore),
	};

	log_saved_stderr = dup(STDERR_FILENO);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
