/* test_plfs.c: the power-loss file system itself: what a cut takes back
 * (unsynced writes, truncations, names no directory fsync made durable),
 * what it keeps (fsynced data, durable names), torn pages, the armed cut,
 * and SQLite in WAL mode (its -shm mmapped) keeping every commit across
 * cuts. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "plmount.h"

#define PAGE 4096
#define TORN_PAGES 16 /* pages of the file the torn-write test overwrites */

static uint64_t test_seed;

/* Writes content to rel (created or truncated) and fsyncs it when sync. */
static void put(struct plmount *pm, const char *rel, const char *content, int sync)
{
	int fd = open(plmount_path(pm, rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t len = strlen(content);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	if (sync) {
		assert_int_equal(fsync(fd), 0);
	}
	assert_int_equal(close(fd), 0);
}

static void sync_dir(struct plmount *pm, const char *rel)
{
	int fd = open(plmount_path(pm, rel), O_RDONLY | O_DIRECTORY);

	assert_true(fd >= 0);
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

/* The file's content after the cut, or NULL when it does not exist. */
static char *get(struct plmount *pm, const char *rel)
{
	int fd = open(plmount_path(pm, rel), O_RDONLY);
	char *out;
	struct stat st;

	if (fd < 0) {
		return NULL;
	}
	assert_int_equal(fstat(fd, &st), 0);
	out = calloc(1, (size_t)st.st_size + 1);
	assert_non_null(out);
	assert_int_equal(read(fd, out, (size_t)st.st_size), (ssize_t)st.st_size);
	close(fd);
	return out;
}

static void assert_file(struct plmount *pm, const char *rel, const char *want)
{
	char *got = get(pm, rel);

	if (want == NULL) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void mount_fresh(struct plmount *pm, const char *policy)
{
	assert_int_equal(plmount_init(pm), 0);
	assert_int_equal(plmount_up(pm, test_seed), 0);
	assert_int_equal(plmount_command(pm, "policy %s", policy), 0);
}

/* Cuts the power, unmounts and mounts again over what is left. */
static void cut_and_remount(struct plmount *pm)
{
	assert_int_equal(plmount_command(pm, "cut"), 0);
	assert_int_equal(plmount_down(pm), 0);
	assert_int_equal(plmount_up(pm, test_seed), 0);
}

static void test_a_file_written_and_not_fsynced_is_empty_after_a_cut(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	put(&pm, "volatile", "", 1);
	sync_dir(&pm, ".");
	put(&pm, "volatile", "written, never fsynced", 0);
	cut_and_remount(&pm);
	assert_file(&pm, "volatile", "");
	plmount_finish(&pm);
}

static void test_a_fsynced_file_stays_and_its_later_writes_go(void **state)
{
	struct plmount pm;
	int fd;

	(void)state;
	mount_fresh(&pm, "drop");
	put(&pm, "kept", "fsynced", 1);
	sync_dir(&pm, ".");
	fd = open(plmount_path(&pm, "kept"), O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, " and more", 9), 9);
	close(fd);
	assert_file(&pm, "kept", "fsynced and more");
	cut_and_remount(&pm);
	assert_file(&pm, "kept", "fsynced");
	plmount_finish(&pm);
}

static void test_a_new_file_whose_directory_was_not_fsynced_is_gone(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	put(&pm, "orphan", "data fsynced, name never", 1);
	cut_and_remount(&pm);
	assert_file(&pm, "orphan", NULL);
	plmount_finish(&pm);
}

static void test_a_rename_not_made_durable_by_a_directory_fsync_reverts(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	put(&pm, "target", "old", 1);
	put(&pm, "tmp", "new", 1);
	sync_dir(&pm, ".");
	assert_int_equal(rename(plmount_path(&pm, "tmp"), plmount_path(&pm, "target")), 0);
	assert_file(&pm, "target", "new");
	cut_and_remount(&pm);
	assert_file(&pm, "target", "old");
	assert_file(&pm, "tmp", "new");
	plmount_finish(&pm);
}

static void test_a_rename_made_durable_by_a_directory_fsync_stays(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	assert_int_equal(mkdir(plmount_path(&pm, "d"), 0700), 0);
	put(&pm, "d/target", "old", 1);
	put(&pm, "d/tmp", "new", 1);
	sync_dir(&pm, ".");
	sync_dir(&pm, "d");
	assert_int_equal(rename(plmount_path(&pm, "d/tmp"), plmount_path(&pm, "d/target")), 0);
	sync_dir(&pm, "d");
	cut_and_remount(&pm);
	assert_file(&pm, "d/target", "new");
	assert_file(&pm, "d/tmp", NULL);
	plmount_finish(&pm);
}

static void test_a_directory_fsync_makes_only_its_own_names_durable(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	assert_int_equal(mkdir(plmount_path(&pm, "a"), 0700), 0);
	assert_int_equal(mkdir(plmount_path(&pm, "b"), 0700), 0);
	sync_dir(&pm, ".");
	put(&pm, "a/kept", "a", 1);
	put(&pm, "b/lost", "b", 1);
	sync_dir(&pm, "a");
	cut_and_remount(&pm);
	assert_file(&pm, "a/kept", "a");
	assert_file(&pm, "b/lost", NULL);
	plmount_finish(&pm);
}

static void
test_a_new_directory_not_made_durable_in_its_parent_vanishes_with_its_content(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	assert_int_equal(mkdir(plmount_path(&pm, "spool"), 0700), 0);
	put(&pm, "spool/x", "fsynced, in a fsynced directory", 1);
	sync_dir(&pm, "spool");
	cut_and_remount(&pm);
	assert_file(&pm, "spool/x", NULL);
	{
		struct stat st;

		assert_int_equal(stat(plmount_path(&pm, "spool"), &st), -1);
	}
	plmount_finish(&pm);
}

static void test_an_unlink_not_made_durable_reverts_with_the_content(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	put(&pm, "gone", "still here", 1);
	sync_dir(&pm, ".");
	assert_int_equal(unlink(plmount_path(&pm, "gone")), 0);
	assert_file(&pm, "gone", NULL);
	cut_and_remount(&pm);
	assert_file(&pm, "gone", "still here");
	plmount_finish(&pm);
}

static void test_a_truncation_not_fsynced_reverts(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "drop");
	put(&pm, "long", "0123456789", 1);
	sync_dir(&pm, ".");
	assert_int_equal(truncate(plmount_path(&pm, "long"), 3), 0);
	assert_file(&pm, "long", "012");
	cut_and_remount(&pm);
	assert_file(&pm, "long", "0123456789");
	plmount_finish(&pm);
}

static void test_policy_keep_loses_nothing(void **state)
{
	struct plmount pm;

	(void)state;
	mount_fresh(&pm, "keep");
	put(&pm, "all", "never fsynced", 0);
	cut_and_remount(&pm);
	assert_file(&pm, "all", "never fsynced");
	plmount_finish(&pm);
}

static void test_an_armed_cut_fails_the_nth_write_and_every_call_after_it(void **state)
{
	struct plmount pm;
	int fd;

	(void)state;
	mount_fresh(&pm, "drop");
	put(&pm, "f.log", "", 1);
	sync_dir(&pm, ".");
	assert_int_equal(plmount_command(&pm, "arm .log 3"), 0);
	fd = open(plmount_path(&pm, "f.log"), O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "a", 1), 1);
	assert_int_equal(fsync(fd), 0);
	assert_int_equal(plmount_counter(&pm, "dead"), 0);
	assert_int_equal(write(fd, "b", 1), -1);
	assert_int_equal(errno, EIO);
	assert_int_equal(plmount_counter(&pm, "dead"), 1);
	assert_int_equal(fsync(fd), -1);
	assert_true(open(plmount_path(&pm, "other"), O_WRONLY | O_CREAT, 0644) < 0);
	close(fd);
	assert_int_equal(plmount_down(&pm), 0);
	assert_int_equal(plmount_up(&pm, test_seed), 0);
	assert_file(&pm, "f.log", "a");
	plmount_finish(&pm);
}

/* Every page of the file is either its fsynced version or the rewritten
 * one, never anything else; over a few seeds some file is torn (some pages
 * new, some old). */
static void test_a_random_cut_leaves_each_page_old_or_new_and_can_tear_a_write(void **state)
{
	static char page_a[PAGE];
	static char page_b[PAGE];
	static char all_b[TORN_PAGES * PAGE];
	int torn_seen = 0;
	uint64_t s;

	(void)state;
	memset(page_a, 'A', sizeof(page_a));
	memset(page_b, 'B', sizeof(page_b));
	memset(all_b, 'B', sizeof(all_b));
	/* A cut tears the file with a chance of about 1 in 3 (plfs draws keep,
	 * drop or tear, then each page): twelve cuts at least, and more until
	 * one tore, so no seed makes this fail by chance ((2/3)^64). */
	for (s = 0; s < 64 && (s < 12 || torn_seen == 0); s++) {
		struct plmount pm;
		int n_new = 0;
		int fd;
		int i;

		assert_int_equal(plmount_init(&pm), 0);
		assert_int_equal(plmount_up(&pm, test_seed + s), 0);
		fd = open(plmount_path(&pm, "pages"), O_RDWR | O_CREAT, 0644);
		assert_true(fd >= 0);
		for (i = 0; i < TORN_PAGES; i++) {
			assert_int_equal(write(fd, page_a, PAGE), PAGE);
		}
		assert_int_equal(fsync(fd), 0);
		sync_dir(&pm, ".");
		/* one write over every page */
		assert_int_equal(pwrite(fd, all_b, sizeof(all_b), 0), (ssize_t)sizeof(all_b));
		close(fd);
		cut_and_remount(&pm);
		fd = open(plmount_path(&pm, "pages"), O_RDONLY);
		assert_true(fd >= 0);
		for (i = 0; i < TORN_PAGES; i++) {
			char got[PAGE];

			assert_int_equal(pread(fd, got, PAGE, (off_t)i * PAGE), PAGE);
			if (memcmp(got, page_b, PAGE) == 0) {
				n_new++;
			} else {
				assert_memory_equal(got, page_a, PAGE);
			}
		}
		close(fd);
		if (n_new > 0 && n_new < TORN_PAGES) {
			torn_seen++;
		}
		plmount_finish(&pm);
	}
	print_message("torn in %d of %d cuts\n", torn_seen, (int)s);
	assert_true(torn_seen > 0);
}

/* Runs the sqlite3 shell on db with script; returns its exit status and
 * its stdout in *ret_out (malloc'd). */
static int sqlite_shell(struct plmount *pm, const char *db, const char *script, char **ret_out)
{
	char script_path[400];
	char out_path[400];
	char cmd[1400];
	FILE *f;
	int rc;
	struct stat st;

	snprintf(script_path, sizeof(script_path), "%s/script.sql", pm->pm_root);
	snprintf(out_path, sizeof(out_path), "%s/out.txt", pm->pm_root);
	f = fopen(script_path, "w");
	assert_non_null(f);
	fputs(script, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "sqlite3 -bail '%s' < '%s' > '%s' 2>>'%s'", plmount_path(pm, db),
	         script_path, out_path, pm->pm_log);
	rc = system(cmd);
	f = fopen(out_path, "r");
	assert_non_null(f);
	assert_int_equal(fstat(fileno(f), &st), 0);
	*ret_out = calloc(1, (size_t)st.st_size + 1);
	assert_non_null(*ret_out);
	assert_int_equal(fread(*ret_out, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	return rc;
}

/* SQLite in WAL mode works on the mount (its -shm is mmapped, so plfs must
 * not use direct_io), and every transaction the shell reported committed
 * (synchronous=FULL) is there after a cut at a random write of the WAL. */
static void test_sqlite_wal_keeps_every_commit_across_cuts(void **state)
{
	struct plmount pm;
	char *out = NULL;
	int cut;
	int next_row = 1;

	(void)state;
	mount_fresh(&pm, "random");
	assert_int_equal(sqlite_shell(&pm, "t.db",
	                              "PRAGMA journal_mode=WAL;\n"
	                              "CREATE TABLE t(n INTEGER PRIMARY KEY, pad BLOB);\n",
	                              &out),
	                 0);
	assert_string_equal(out, "wal\n");
	free(out);
	for (cut = 0; cut < 6; cut++) {
		char script[40000];
		size_t len = 0;
		int committed[200];
		int n_committed = 0;
		char *line;
		char *check;
		int i;

		len += (size_t)snprintf(
		        script + len, sizeof(script) - len,
		        "PRAGMA synchronous=FULL;\nPRAGMA wal_autocheckpoint=20;\n");
		for (i = 0; i < 150; i++) {
			len += (size_t)snprintf(script + len, sizeof(script) - len,
			                        "INSERT INTO t VALUES(%d, randomblob(%d));\nSELECT "
			                        "'committed ' || %d;\n",
			                        next_row + i, 500 + (i * 977) % 6000, next_row + i);
		}
		assert_int_equal(
		        plmount_command(&pm, "arm -wal %d",
		                        20 + (int)((test_seed + (uint64_t)cut * 7919) % 300)),
		        0);
		sqlite_shell(&pm, "t.db", script, &out);
		for (line = strstr(out, "committed "); line != NULL;
		     line = strstr(line, "committed ")) {
			line += strlen("committed ");
			committed[n_committed++] = (int)strtol(line, NULL, 10);
		}
		free(out);
		next_row += 150;
		print_message("cut %d: %d transactions committed before the cut, dead=%" PRId64
		              "\n",
		              cut, n_committed, plmount_counter(&pm, "dead"));
		if (plmount_counter(&pm, "dead") != 1) {
			assert_int_equal(plmount_command(&pm, "cut"), 0);
		}
		assert_int_equal(plmount_down(&pm), 0);
		assert_int_equal(plmount_up(&pm, test_seed + (uint64_t)cut + 1), 0);
		assert_int_equal(sqlite_shell(&pm, "t.db", "PRAGMA integrity_check;\n", &check), 0);
		assert_string_equal(check, "ok\n");
		free(check);
		for (i = 0; i < n_committed; i++) {
			char q[100];

			snprintf(q, sizeof(q), "SELECT count(*) FROM t WHERE n = %d;\n",
			         committed[i]);
			assert_int_equal(sqlite_shell(&pm, "t.db", q, &check), 0);
			assert_string_equal(check, "1\n");
			free(check);
		}
	}
	plmount_finish(&pm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_a_file_written_and_not_fsynced_is_empty_after_a_cut),
	        cmocka_unit_test(test_a_fsynced_file_stays_and_its_later_writes_go),
	        cmocka_unit_test(test_a_new_file_whose_directory_was_not_fsynced_is_gone),
	        cmocka_unit_test(test_a_rename_not_made_durable_by_a_directory_fsync_reverts),
	        cmocka_unit_test(test_a_rename_made_durable_by_a_directory_fsync_stays),
	        cmocka_unit_test(test_a_directory_fsync_makes_only_its_own_names_durable),
	        cmocka_unit_test(
	                test_a_new_directory_not_made_durable_in_its_parent_vanishes_with_its_content),
	        cmocka_unit_test(test_an_unlink_not_made_durable_reverts_with_the_content),
	        cmocka_unit_test(test_a_truncation_not_fsynced_reverts),
	        cmocka_unit_test(test_policy_keep_loses_nothing),
	        cmocka_unit_test(test_an_armed_cut_fails_the_nth_write_and_every_call_after_it),
	        cmocka_unit_test(
	                test_a_random_cut_leaves_each_page_old_or_new_and_can_tear_a_write),
	        cmocka_unit_test(test_sqlite_wal_keeps_every_commit_across_cuts),
	};

	plmount_require_or_skip("plfs");
	test_seed = plmount_seed("plfs");
	return cmocka_run_group_tests_name("plfs", tests, NULL, NULL);
}
