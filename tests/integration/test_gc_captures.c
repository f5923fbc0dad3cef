/* test_gc_captures.c: gc deletes the capture files of a spool directory
 * whose day is past [capture] retention, and counts them; the temporary
 * file a capture interrupted mid-write leaves is deleted with its day but
 * is not counted as a capture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "harness.h"

#define T_DAY "2026-01-05"
#define T_CAPTURE "captures/" T_DAY "/20260105T101500.123Z-stripe-00000001.cap"
#define T_LEFTOVER "captures/" T_DAY "/.20260105T101501.456Z-stripe-00000002.cap.tmp"

static int t_exists(const struct daemon *d, const char *rel)
{
	char path[800];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", d->dm_dir, rel);
	return stat(path, &st) == 0;
}

static void test_gc_counts_a_leftover_temporary_file_as_no_capture(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const dry[] = {"gc", "--dry-run", NULL};
	static const char *const gc[] = {"gc", NULL};
	struct daemon d;
	char ini[800];
	char *out = NULL;

	(void)state;
	assert_int_equal(daemon_init(&d, NULL), 0);
	snprintf(ini, sizeof(ini), "\n[capture]\nmode = off\ndir = %s/captures\nretention = 2d\n",
	         d.dm_dir);
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	/* one capture written whole, one interrupted before its rename */
	snprintf(ini, sizeof(ini), "%s/captures", d.dm_dir);
	assert_int_equal(mkdir(ini, 0700), 0);
	snprintf(ini, sizeof(ini), "%s/captures/" T_DAY, d.dm_dir);
	assert_int_equal(mkdir(ini, 0700), 0);
	assert_int_equal(daemon_write_file(&d, T_CAPTURE,
	                                   "POST /hooks/stripe HTTP/1.1\r\nHost: x\r\n\r\n{}"),
	                 0);
	assert_int_equal(daemon_write_file(&d, T_LEFTOVER, "POST /hooks/stripe HTTP/1.1\r\n"), 0);

	assert_int_equal(daemon_cli(&d, 1, dry, &out), 0);
	assert_non_null(out);
	if (strstr(out, "capture files                   1\n") == NULL) {
		print_error("%s", out);
	}
	assert_non_null(strstr(out, "capture files                   1\n"));
	free(out);
	assert_true(t_exists(&d, T_CAPTURE));
	assert_true(t_exists(&d, T_LEFTOVER));

	assert_int_equal(daemon_cli(&d, 1, gc, &out), 0);
	assert_non_null(out);
	assert_non_null(strstr(out, "capture files                   1\n"));
	free(out);
	/* both gone, and the day with them */
	assert_false(t_exists(&d, T_CAPTURE));
	assert_false(t_exists(&d, T_LEFTOVER));
	assert_false(t_exists(&d, "captures/" T_DAY));
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_gc_counts_a_leftover_temporary_file_as_no_capture),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
