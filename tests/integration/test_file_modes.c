/* test_file_modes.c: everything the daemon writes (database, WAL, captures,
 * port files, the directories it creates) is private to its user under the
 * usual umask 022: files 0600, directories 0700. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"

/* The one capture file of the one day directory under dir, into out. */
static void find_capture(const char *dir, char *day_out, size_t day_size, char *file_out,
                         size_t file_size)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	assert_non_null(d);
	day_out[0] = '\0';
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] != '.') {
			snprintf(day_out, day_size, "%s/%s", dir, e->d_name);
		}
	}
	closedir(d);
	assert_true(day_out[0] != '\0');
	d = opendir(day_out);
	assert_non_null(d);
	file_out[0] = '\0';
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] != '.') {
			snprintf(file_out, file_size, "%s/%s", day_out, e->d_name);
		}
	}
	closedir(d);
	assert_true(file_out[0] != '\0');
}

static void test_the_daemon_writes_files_0600_and_directories_0700_under_umask_022(void **state)
{
	struct daemon d;
	char path[800];
	char day[1024];
	char file[1400];
	char spool[700];
	char *config;
	char *cut;
	struct buf b;
	char *body;

	(void)state;
	umask(022);
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	/* The database and the spool in directories the daemon has to create. */
	config = hn_read_file(d.dm_config);
	assert_non_null(config);
	/* The harness's [store] path goes: a key given twice refuses the file. */
	cut = strstr(config, "\n[store]\npath = ");
	assert_non_null(cut);
	cut += strlen("\n[store]\n");
	memmove(cut, cut + strcspn(cut, "\n") + 1, strlen(cut + strcspn(cut, "\n") + 1) + 1);
	buf_init(&b, 0);
	buf_printf(&b, "%s\n[store]\npath = %s/state/db/idemhook.db\n\n[capture]\nmode = all\n"
	               "dir = %s/spool/captures\n",
	           config, d.dm_dir, d.dm_dir);
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", b.buf_data), 0);
	buf_finish(&b);
	free(config);
	snprintf(d.dm_db, sizeof(d.dm_db), "%s/state/db/idemhook.db", d.dm_dir);
	assert_int_equal(daemon_start(&d), 0);

	body = hn_stripe_event("evt_modes_1", "customer.created", "{\"id\":\"cus_modes\"}");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);

	fx_assert_mode(d.dm_db, 0600);
	snprintf(path, sizeof(path), "%s-wal", d.dm_db);
	fx_assert_mode(path, 0600);
	snprintf(path, sizeof(path), "%s-shm", d.dm_db);
	fx_assert_mode(path, 0600);
	snprintf(path, sizeof(path), "%s/state", d.dm_dir);
	fx_assert_mode(path, 0700);
	snprintf(path, sizeof(path), "%s/state/db", d.dm_dir);
	fx_assert_mode(path, 0700);
	snprintf(path, sizeof(path), "%s/spool", d.dm_dir);
	fx_assert_mode(path, 0700);
	snprintf(spool, sizeof(spool), "%s/spool/captures", d.dm_dir);
	fx_assert_mode(spool, 0700);
	find_capture(spool, day, sizeof(day), file, sizeof(file));
	fx_assert_mode(day, 0700);
	fx_assert_mode(file, 0600);
	snprintf(path, sizeof(path), "%s/port", d.dm_dir);
	fx_assert_mode(path, 0600);
	snprintf(path, sizeof(path), "%s/admin_port", d.dm_dir);
	fx_assert_mode(path, 0600);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_the_daemon_writes_files_0600_and_directories_0700_under_umask_022),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
