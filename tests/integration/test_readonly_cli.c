/* test_readonly_cli.c: the commands that only read work for a user who may
 * read the database but not write it or its directory (a monitoring user
 * in its group): while idemhook serve runs on it and after it stopped
 * cleanly, printing what is stored and creating no file. Where SQLite
 * cannot let such a user read (its -wal and -shm missing), the command
 * says so and exits 77, as does migrate. Runs the real binary as nobody,
 * so only as root (skipped otherwise). */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "harness.h"

struct t_user {
	uid_t tu_uid;
	gid_t tu_gid;
};

/* The binary the user runs: $IDEMHOOK_BIN, or a copy of it in a directory
 * of its own under /tmp when the build lies where the user may not go (a
 * clone in root's home). */
static char t_bin[700];

/* 0 when the user may run path (X_OK) and, dir non-NULL, enter dir. */
static int t_user_may(const struct t_user *u, const char *path, const char *dir)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(u->tu_gid) < 0 || setuid(u->tu_uid) < 0) {
			_exit(2);
		}
		_exit(access(path, X_OK) == 0 && (dir == NULL || access(dir, R_OK | X_OK) == 0)
		              ? 0
		              : 1);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Sets t_bin; -1 when the user can run no copy of the binary. */
static int t_bin_for(const struct t_user *u)
{
	const char *bin = getenv("IDEMHOOK_BIN");
	char dir[] = "/tmp/idemhook-readonly-bin-XXXXXX";
	char cmd[1600];

	if (bin == NULL) {
		return -1;
	}
	snprintf(t_bin, sizeof(t_bin), "%s", bin);
	if (t_user_may(u, t_bin, NULL) == 0) {
		return 0;
	}
	if (mkdtemp(dir) == NULL || chmod(dir, 0755) < 0) {
		return -1;
	}
	snprintf(t_bin, sizeof(t_bin), "%s/idemhook", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 0755 '%s'", bin, t_bin, t_bin);
	if (system(cmd) != 0) {
		return -1;
	}
	return t_user_may(u, t_bin, NULL);
}

/* Removes the copy t_bin_for made, if any. */
static void t_bin_finish(void)
{
	const char *bin = getenv("IDEMHOOK_BIN");
	char *slash;

	if (bin == NULL || strcmp(bin, t_bin) == 0) {
		return;
	}
	unlink(t_bin);
	slash = strrchr(t_bin, '/');
	if (slash != NULL) {
		*slash = '\0';
		rmdir(t_bin);
	}
}

/* Runs t_bin -c config args as the user, without supplementary
 * groups; its output and error output into *ret_out and *ret_err
 * (malloc'd). Returns the exit status, or -1. */
static int t_run_as(const struct t_user *u, const char *config, const char *const *args,
                    char **ret_out, char **ret_err)
{
	const char *bin = t_bin;
	const char *argv[32];
	char path[700];
	int out[2];
	int n = 0;
	int status;
	int fd;
	pid_t pid;

	*ret_out = NULL;
	*ret_err = NULL;
	if (bin[0] == '\0' || pipe(out) < 0) {
		return -1;
	}
	argv[n++] = "idemhook";
	argv[n++] = "-c";
	argv[n++] = config;
	while (*args != NULL && n < 30) {
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	/* Error output through a file: no second pipe to drain. */
	snprintf(path, sizeof(path), "/tmp/idemhook-readonly-cli-err.%ld", (long)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		close(out[0]);
		close(out[1]);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(fd, 2);
		close(out[0]);
		if (setgroups(0, NULL) < 0 || setgid(u->tu_gid) < 0 || setuid(u->tu_uid) < 0) {
			_exit(126);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	*ret_out = hn_read_fd(out[0]);
	close(out[0]);
	waitpid(pid, &status, 0);
	close(fd);
	*ret_err = hn_read_file(path);
	unlink(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The names in dir, sorted, one a line (malloc'd). */
static char *t_listing(const char *dir)
{
	struct dirent **names = NULL;
	struct buf b;
	int n;
	int i;

	n = scandir(dir, &names, NULL, alphasort);
	assert_true(n >= 0);
	buf_init(&b, 0);
	for (i = 0; i < n; i++) {
		buf_printf(&b, "%s\n", names[i]->d_name);
		free(names[i]);
	}
	free(names);
	return buf_take(&b, NULL);
}

/* Every read-only command prints what is stored, exit 0, and the
 * database's directory holds the same files after them as before. */
static void t_reads_work(const struct t_user *u, struct daemon *d, const char *order,
                         const char *event_id, const char *id)
{
	const char *const order_show[] = {"order", "show", order, NULL};
	const char *const order_list[] = {"order", "list", NULL};
	const char *const events_list[] = {"events", "list", "--json", NULL};
	const char *const events_show[] = {"events", "show", id, NULL};
	const char *const stats[] = {"stats", NULL};
	const char *const outbox_list[] = {"outbox", "list", NULL};
	const char *const audit_list[] = {"audit", "list", NULL};
	const struct {
		const char *const *tc_args;
		const char *tc_want;
	} cases[] = {
	        {order_show, "paid"},    {order_list, order},  {events_list, event_id},
	        {events_show, event_id}, {stats, "callbacks"}, {outbox_list, NULL},
	        {audit_list, NULL},
	};
	char *before = t_listing(d->dm_dir);
	char *after;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = NULL;
		char *err = NULL;
		int rc = t_run_as(u, d->dm_config, cases[i].tc_args, &out, &err);

		if (rc != 0 || out == NULL ||
		    (cases[i].tc_want != NULL && strstr(out, cases[i].tc_want) == NULL)) {
			print_error("idemhook %s %s: exit %d\nout: %s\nerr: %s\n",
			            cases[i].tc_args[0],
			            cases[i].tc_args[1] != NULL ? cases[i].tc_args[1] : "", rc,
			            out != NULL ? out : "", err != NULL ? err : "");
			fail();
		}
		assert_true(err == NULL || strstr(err, "readonly") == NULL);
		free(out);
		free(err);
	}
	after = t_listing(d->dm_dir);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void test_read_only_commands_as_a_user_who_may_not_write_the_directory(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const events_list[] = {"events", "list", NULL};
	struct passwd *pw = getpwnam("nobody");
	struct t_user u;
	struct daemon d;
	char order[64];
	char id[32];
	char path[700];
	char *before;
	char *after;
	char *out = NULL;
	char *err = NULL;

	(void)state;
	if (geteuid() != 0 || pw == NULL) {
		skip(); /* needs root, to run the commands as another user */
	}
	u.tu_uid = pw->pw_uid;
	u.tu_gid = pw->pw_gid;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	assert_int_equal(t_bin_for(&u), 0);
	if (chmod(d.dm_dir, 0755) < 0 || t_user_may(&u, t_bin, d.dm_dir) < 0) {
		/* TMPDIR under a directory the user may not enter */
		print_message("# nobody cannot reach %s: skipped\n", d.dm_dir);
		daemon_finish(&d);
		t_bin_finish();
		skip();
	}
	/* What an operator does for a monitoring user: the directory and the
	 * files readable, nothing writable but by the daemon's user. The
	 * database is made first (migrate), as a package's post-install
	 * does, and its files (idemhook.db*) are given the mode. */
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	assert_int_equal(chmod(d.dm_dir, 0755), 0);
	assert_int_equal(chmod(d.dm_config, 0644), 0);
	assert_int_equal(chmod(d.dm_db, 0644), 0);
	snprintf(path, sizeof(path), "%s-wal", d.dm_db);
	(void)chmod(path, 0644);
	snprintf(path, sizeof(path), "%s-shm", d.dm_db);
	(void)chmod(path, 0644);
	assert_int_equal(daemon_start(&d), 0);
	fx_order(&d, 1999, "usd", order);
	assert_int_equal(fx_stripe_pay(&d, "evt_ro_paid", order, 1999, "usd"), 200);
	/* Read as root now: a read of root's would make the files that are
	 * missing (SQLite gives them the database's owner). */
	snprintf(id, sizeof(id), "%lld",
	         (long long)fx_db_int(&d, "SELECT id FROM events WHERE idem_key = 'evt_ro_paid'"));

	/* 1. With the daemon serving: what it committed is seen. */
	t_reads_work(&u, &d, order, "evt_ro_paid", id);

	/* 2. After a clean stop. */
	assert_int_equal(daemon_term(&d, 30), 0);
	t_reads_work(&u, &d, order, "evt_ro_paid", id);

	/* 3. Without -wal and -shm (left by an older idemhook, a restore)
	 * SQLite cannot let this user read: said so, 77, nothing made. */
	snprintf(path, sizeof(path), "%s-wal", d.dm_db);
	unlink(path);
	snprintf(path, sizeof(path), "%s-shm", d.dm_db);
	unlink(path);
	before = t_listing(d.dm_dir);
	assert_int_equal(t_run_as(&u, d.dm_config, events_list, &out, &err), 77);
	assert_non_null(err);
	assert_non_null(strstr(err, "-wal and -shm files are missing"));
	assert_non_null(strstr(err, "idemhook migrate"));
	assert_null(strstr(err, "readonly database"));
	free(out);
	free(err);
	/* migrate may not write here either: 77 and why, not 65. */
	assert_int_equal(t_run_as(&u, d.dm_config, migrate, &out, &err), 77);
	assert_non_null(err);
	assert_non_null(strstr(err, "cannot write the database"));
	free(out);
	free(err);
	after = t_listing(d.dm_dir);
	assert_string_equal(before, after);
	free(before);
	free(after);

	/* 4. The owner's migrate puts them back, and the user reads again. */
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	t_reads_work(&u, &d, order, "evt_ro_paid", id);
	daemon_finish(&d);
	t_bin_finish();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_read_only_commands_as_a_user_who_may_not_write_the_directory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
