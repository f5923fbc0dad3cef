/* test_log.c: deferred log lines (log_set_deferred): gathered, whole and in
 * order, written at once by a more urgent line, by log_flush and by exit. */
#include <limits.h>
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

/* A line built with log_cat and log_cat_int and written with log_text is
 * the line log_msg prints: numbers as "%lld", a line too long for
 * LOG_LINE_MAX cut at the same byte, with and without deferral. */
static void test_a_line_built_without_printf_is_the_printf_line(void **state)
{
	static const long long values[] = {0,         7,       -7,     10,        99,
	                                   -100,      200,     401,    123456789, LLONG_MAX,
	                                   LLONG_MIN, INT_MAX, INT_MIN};
	static char got[3 * LOG_LINE_MAX + 4096];
	static char want[3 * LOG_LINE_MAX + 4096];
	char line[LOG_LINE_MAX];
	char text[32];
	char long_text[3000];
	size_t n;
	size_t i;
	int fd;

	(void)state;
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		snprintf(text, sizeof(text), "%lld", values[i]);
		n = log_cat(line, sizeof(line), 0, "v=");
		n = log_cat_int(line, sizeof(line), n, values[i]);
		assert_int_equal(n, 2 + strlen(text));
		assert_memory_equal(line + 2, text, strlen(text));
	}
	/* appends stop where the room ends */
	assert_int_equal(log_cat(line, 4, 0, "abcdef"), 4);
	assert_memory_equal(line, "abcd", 4);
	assert_int_equal(log_cat(line, 4, 4, "x"), 4);
	assert_int_equal(log_cat_int(line, 6, 4, 12345), 6);
	assert_memory_equal(line, "abcd12", 6);

	memset(long_text, 'y', sizeof(long_text) - 1);
	long_text[sizeof(long_text) - 1] = '\0';
	for (i = 0; i < 2; i++) {
		assert_int_equal(log_set_deferred(i == 0 ? 0 : 60000), 0);
		fd = log_capture();
		n = log_cat(line, sizeof(line), 0, "hook provider=\"stripe\" status=");
		n = log_cat_int(line, sizeof(line), n, 200);
		n = log_cat(line, sizeof(line), n, " latency_ms=");
		n = log_cat_int(line, sizeof(line), n, 12);
		n = log_cat(line, sizeof(line), n, ".");
		n = log_cat_int(line, sizeof(line), n, 3);
		log_text(LOG_LEVEL_INFO, line, n);
		log_text(LOG_LEVEL_WARNING, line, n);
		n = log_cat(line, sizeof(line), 0, long_text);
		assert_int_equal(n, sizeof(line));
		log_text(LOG_LEVEL_INFO, line, n);
		log_text(LOG_LEVEL_DEBUG, line, n); /* under the threshold: dropped */
		log_flush();
		log_read(fd, got, sizeof(got));
		close(fd);

		fd = log_capture();
		log_msg(LOG_LEVEL_INFO, "hook provider=\"stripe\" status=%d latency_ms=%lld.%lld",
		        200, 123LL / 10, 123LL % 10);
		log_msg(LOG_LEVEL_WARNING,
		        "hook provider=\"stripe\" status=%d latency_ms=%lld.%lld", 200, 123LL / 10,
		        123LL % 10);
		log_msg(LOG_LEVEL_INFO, "%s", long_text);
		log_msg(LOG_LEVEL_DEBUG, "%s", long_text);
		log_flush();
		log_read(fd, want, sizeof(want));
		close(fd);
		assert_string_equal(got, want);
		assert_non_null(
		        strstr(got, "<4>hook provider=\"stripe\" status=200 latency_ms=12.3\n"));
	}
	assert_int_equal(log_set_deferred(0), 0);
	/* each level's prefix, written by hand, is printf's "<%d>" */
	fd = log_capture();
	log_err("e");
	log_warn("w");
	log_notice("n");
	log_info("i");
	log_text(LOG_LEVEL_ERR, "t", 1);
	log_read(fd, got, sizeof(got));
	close(fd);
	assert_string_equal(got, "<3>e\n<4>w\n<5>n\n<6>i\n<3>t\n");
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
	        cmocka_unit_test_teardown(test_a_line_built_without_printf_is_the_printf_line,
	                                  log_restore),
	};

	log_saved_stderr = dup(STDERR_FILENO);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
