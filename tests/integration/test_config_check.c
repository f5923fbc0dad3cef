/* test_config_check.c: one whole-file check at start and on reload, through
 * the real binary: serve refuses a bad file (exit 78, file, line and key)
 * before it opens the database; a reload refuses what the start refuses and
 * keeps the running configuration; a reload names the keys that need a
 * restart and applies an [outbound] section it adds; commands that verify
 * nothing run without the provider secrets; bind errors name their key; a
 * reload refuses a capture spool or database directory the start cannot make. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
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
#include "crypto.h"
#include "fixtures.h"
#include "peer.h"

#define CC_SECRET_INI "[provider stripe]\ntype = stripe\nsecret = credential:stripe-secret\n"
#define CC_RUN_LIMIT_S 20 /* a command that should stop at once but serves */

/* Runs $IDEMHOOK_BIN with args (NULL-terminated) in cwd (NULL: here), its
 * environment this process's with CREDENTIALS_DIRECTORY set to cred_dir
 * (NULL: unset) and IDEMHOOK_CONFIG unset; stdout and stderr together into
 * *ret_out. A child still running after limit_s seconds gets SIGALRM.
 * Returns the exit status, or 128 + the signal. */
static int cc_run(const char *cwd, const char *cred_dir, unsigned limit_s, const char *const *args,
                  char **ret_out)
{
	const char *argv[32];
	int pipefd[2];
	int status;
	int n = 0;
	pid_t pid;

	argv[n++] = "idemhook";
	while (*args != NULL && n < 31) {
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		if (cwd != NULL && chdir(cwd) < 0) {
			_exit(126);
		}
		unsetenv("IDEMHOOK_CONFIG");
		if (cred_dir != NULL) {
			setenv("CREDENTIALS_DIRECTORY", cred_dir, 1);
		} else {
			unsetenv("CREDENTIALS_DIRECTORY");
		}
		alarm(limit_s);
		execv(getenv("IDEMHOOK_BIN"), (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	*ret_out = hn_read_fd(pipefd[0]);
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status)) {
		return 128 + WTERMSIG(status);
	}
	return WEXITSTATUS(status);
}

/* serve -c d's config, which must be refused at once: asserts exit 78,
 * that the output holds want, and that no database was created; and that
 * serve --check refuses it alike, with the very same lines. */
static void cc_serve_refused(struct daemon *d, const char *want)
{
	const char *args[] = {"serve", "-c", d->dm_config, NULL};
	const char *check[] = {"serve", "--check", "-c", d->dm_config, NULL};
	struct stat st;
	char *out = NULL;
	char *checked = NULL;
	int rc;

	rc = cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out);
	if (rc != 78 || strstr(out, want) == NULL) {
		print_error("serve exited %d, wanted 78 with \"%s\":\n%s\n", rc, want, out);
	}
	assert_int_equal(rc, 78);
	assert_non_null(strstr(out, want));
	assert_int_equal(stat(d->dm_db, &st), -1);
	rc = cc_run(NULL, NULL, CC_RUN_LIMIT_S, check, &checked);
	if (rc != 78 || strcmp(checked, out) != 0) {
		print_error("serve --check exited %d, wanted 78 with serve's lines:\n%s\n"
		            "serve said:\n%s\n",
		            rc, checked, out);
	}
	assert_int_equal(rc, 78);
	assert_string_equal(checked, out);
	assert_int_equal(stat(d->dm_db, &st), -1);
	free(checked);
	free(out);
}

/* A daemon directory with the harness config plus extra, not started. */
static void cc_refused_at_start(const char *extra, const char *want)
{
	struct daemon d;

	assert_int_equal(daemon_init(&d, extra), 0);
	cc_serve_refused(&d, want);
	daemon_finish(&d);
}

static void test_serve_refuses_a_bad_section_before_opening_the_database(void **state)
{
	(void)state;
	/* Each names file, line and key (the harness writes 14 lines first). */
	cc_refused_at_start(FX_STRIPE_INI "[api]\nrate = fast\n",
	                    "idemhook.ini:22: [api] rate = \"fast\"");
	cc_refused_at_start(FX_STRIPE_INI "[api]\ntoken = shop-backend file:/nonexistent/token\n",
	                    "[api] token: shop-backend cannot be read");
	cc_refused_at_start(FX_STRIPE_INI "[gc]\ninterval = soon\n", "[gc] interval = \"soon\"");
	cc_refused_at_start(FX_STRIPE_INI "[capture]\nmode = sometimes\n",
	                    "[capture] mode: \"sometimes\"");
	cc_refused_at_start(FX_STRIPE_INI "[capture]\nretention = forever\n",
	                    "[capture] retention");
	cc_refused_at_start(FX_STRIPE_INI "[outbound]\nnotify_url = ftp://shop.example/notify\n",
	                    "[outbound] notify_url: not an http:// or https:// URL");
	cc_refused_at_start(FX_STRIPE_INI "[outbound]\nnotify_url = http://127.0.0.1:9/n\n"
	                                  "notify_compensation = refnud\n",
	                    "[outbound] notify_compensation: \"refnud\"");
	cc_refused_at_start(FX_STRIPE_INI
	                    "[outbound]\nnotify_url = http://127.0.0.1:9/n\nnotify_on = payd\n",
	                    "[outbound] notify_on: \"payd\"");
	cc_refused_at_start(FX_STRIPE_INI
	                    "[outbound]\n"
	                    "a_url = http://127.0.0.1:9/a\nb_url = http://127.0.0.1:9/b\n"
	                    "c_url = http://127.0.0.1:9/c\nd_url = http://127.0.0.1:9/d\n"
	                    "e_url = http://127.0.0.1:9/e\nf_url = http://127.0.0.1:9/f\n"
	                    "g_url = http://127.0.0.1:9/g\nh_url = http://127.0.0.1:9/h\n"
	                    "i_url = http://127.0.0.1:9/i\n",
	                    "idemhook.ini:30: [outbound] i_url: too many call types: at most 8 "
	                    "NAME_url keys");
	cc_refused_at_start(FX_STRIPE_INI "[reconcile]\nretries = 99\n",
	                    "[reconcile] retries: at most");
	cc_refused_at_start(FX_STRIPE_INI "[server]\ntls_cert = file:/nonexistent/cert.pem\n",
	                    "idemhook.ini:22: [server] tls_cert: tls_cert and tls_key go together");
	cc_refused_at_start("[points]\nrate = 1/100\n", "no [provider NAME] section");
	cc_refused_at_start(FX_STRIPE_INI "[provider stripe]\nsecret = whsec_second\n",
	                    "a second section of the same name as line");
	cc_refused_at_start(FX_STRIPE_INI "[points]\nrate = 1/50\n",
	                    "[points] rate is given again");
	cc_refused_at_start(FX_STRIPE_INI "[server]\nallow_no_providers = maybe\n",
	                    "[server] allow_no_providers = \"maybe\"");
	cc_refused_at_start(FX_STRIPE_INI "[console]\nsession_ttl = forever\n",
	                    "[console] session_ttl");
	cc_refused_at_start(FX_STRIPE_INI "[console]\nenabled = yes\n"
	                                  "token = alice operator file:/nonexistent/console-token\n",
	                    "/nonexistent/console-token");
}

/* A browser's Origin is scheme://host[:port], lower case, nothing after:
 * an origin written otherwise in [api] cors_origins would match no
 * request, and CORS would fail in every browser without a word. */
static void test_a_cors_origin_no_browser_sends_is_refused(void **state)
{
	static const char *const bad[] = {"https://shop.example.com/",
	                                  "shop.example.com",
	                                  "https://Shop.example.com",
	                                  "https://shop.example.com/app",
	                                  "https://",
	                                  "https://shop.example.com:",
	                                  "null"};
	const char *args[] = {"serve", "-c", NULL, NULL};
	struct daemon d;
	struct buf ini;
	char want[128];
	char *out = NULL;
	size_t i;

	(void)state;
	/* All on one line with a good one: each is named, in one run. */
	buf_init(&ini, 0);
	buf_printf(&ini, FX_STRIPE_INI "[api]\ncors_origins = http://127.0.0.1:3000");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		buf_printf(&ini, " %s", bad[i]);
	}
	buf_printf(&ini, "\n");
	buf_append(&ini, "", 1);
	assert_int_equal(daemon_init(&d, ini.buf_data), 0);
	args[2] = d.dm_config;
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out), 78);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(want, sizeof(want),
		         "idemhook.ini:22: [api] cors_origins: \"%s\" is no origin", bad[i]);
		if (strstr(out, want) == NULL) {
			print_error("wanted \"%s\" in:\n%s\n", want, out);
		}
		assert_non_null(strstr(out, want));
	}
	free(out);
	buf_finish(&ini);
	daemon_finish(&d);
}

/* A browser leaves out the default port and writes scheme and host in
 * lower case: an origin written with them would match no request, so it
 * is refused with the origin to write instead; as are a port no page can
 * have and "*" beside other origins. */
static void
test_a_cors_origin_a_browser_writes_otherwise_is_refused_with_what_to_write(void **state)
{
	static const char *const bad[][2] = {
	        {"https://shop.example:443", "write \"https://shop.example\""},
	        {"http://shop.example:80", "write \"http://shop.example\""},
	        {"https://shop.example:0443", "write \"https://shop.example\""},
	        {"HTTPS://Shop.Example:8443", "write \"https://shop.example:8443\""},
	        {"https://shop.example/?q=1", "write \"https://shop.example\""},
	        {"https://shop.example:65536", "a port is a number from 1 to 65535"},
	        {"https://user@shop.example", "no user name or password"},
	};
	const char *args[] = {"serve", "-c", NULL, NULL};
	struct daemon d;
	struct buf ini;
	char want[256];
	char *out = NULL;
	size_t i;

	(void)state;
	buf_init(&ini, 0);
	/* One a line (a line holds at most 199 bytes), from line 23. */
	buf_printf(&ini, FX_STRIPE_INI "[api]\ncors_origins = https://shop.example:8443\n");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		buf_printf(&ini, "cors_origins = %s\n", bad[i][0]);
	}
	buf_append(&ini, "", 1);
	assert_int_equal(daemon_init(&d, ini.buf_data), 0);
	args[2] = d.dm_config;
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out), 78);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(want, sizeof(want),
		         "idemhook.ini:%zu: [api] cors_origins: \"%s\" is no origin to list: ",
		         23 + i, bad[i][0]);
		if (strstr(out, want) == NULL || strstr(strstr(out, want), bad[i][1]) == NULL) {
			print_error("wanted \"%s...%s\" in:\n%s\n", want, bad[i][1], out);
		}
		assert_non_null(strstr(out, want));
		assert_non_null(strstr(strstr(out, want), bad[i][1]));
	}
	/* The origin with a port of its own is taken as written. */
	assert_null(strstr(out, "\"https://shop.example:8443\" is no origin"));
	free(out);
	buf_finish(&ini);
	daemon_finish(&d);
	/* "*" answers every origin alike: beside others, on any line. */
	cc_refused_at_start(FX_STRIPE_INI "[api]\ncors_origins = https://shop.example\n"
	                                  "cors_origins = *\n",
	                    "idemhook.ini:23: [api] cors_origins: * allows every origin and is "
	                    "not listed with others");
	cc_refused_at_start(FX_STRIPE_INI "[api]\ncors_origins = *, https://shop.example\n",
	                    "idemhook.ini:22: [api] cors_origins: * allows every origin and is "
	                    "not listed with others");
}

static void test_a_second_serve_on_a_running_database_gets_the_config_error(void **state)
{
	struct daemon d;
	char second[700];
	char *text;
	char *out = NULL;
	struct buf b;
	const char *args[] = {"serve", "-c", second, NULL};

	(void)state;
	fx_daemon_start(&d, FX_STRIPE_INI);
	text = hn_read_file(d.dm_config);
	assert_non_null(text);
	buf_init(&b, 0);
	buf_printf(&b, "%s\n[gc]\ninterval = soon\n", text);
	snprintf(second, sizeof(second), "%s/second.ini", d.dm_dir);
	assert_int_equal(daemon_write_file(&d, "second.ini", b.buf_data), 0);
	buf_finish(&b);
	free(text);
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out), 78);
	/* the file's error, once, and nothing about the database's lock */
	assert_non_null(strstr(out, "second.ini:24: [gc] interval = \"soon\""));
	assert_null(strstr(strstr(out, "[gc] interval") + 1, "[gc] interval"));
	assert_null(strstr(out, "lock"));
	free(out);
	daemon_finish(&d);
}

/* text with the line "key = ..." of [section] replaced by line (the
 * harness writes [server] listen and port_file, [admin] listen and
 * port_file: a second line of them would be refused as given twice).
 * Returns it malloc'd. */
static char *cc_replace_key(const char *text, const char *section, const char *key,
                            const char *line)
{
	char header[32];
	char want[64];
	const char *at;
	struct buf b;

	snprintf(header, sizeof(header), "[%s]\n", section);
	snprintf(want, sizeof(want), "\n%s = ", key);
	at = strstr(text, header);
	assert_non_null(at);
	at = strstr(at + strlen(header) - 1, want);
	assert_non_null(at);
	at++;
	buf_init(&b, 0);
	buf_printf(&b, "%.*s%s%s", (int)(at - text), text, line, at + strcspn(at, "\n"));
	return buf_take(&b, NULL);
}

static void cc_write_key(struct daemon *d, const char *section, const char *key, const char *line)
{
	char *text = hn_read_file(d->dm_config);
	char *next;

	assert_non_null(text);
	next = cc_replace_key(text, section, key, line);
	assert_int_equal(daemon_write_file(d, "idemhook.ini", next), 0);
	free(next);
	free(text);
}

static void cc_write_listen(struct daemon *d, const char *section, const char *line)
{
	cc_write_key(d, section, "listen", line);
}

static void test_port_files_must_be_writable_where_they_are_named(void **state)
{
	struct daemon d;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	cc_write_key(&d, "server", "port_file", "port_file = /nonexistent/dir/port");
	cc_serve_refused(&d, "idemhook.ini:3: [server] port_file: the directory /nonexistent/dir "
	                     "does not exist");
	daemon_finish(&d);
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	cc_write_key(&d, "admin", "port_file", "port_file = /");
	cc_serve_refused(&d, "[admin] port_file: / is a directory");
	daemon_finish(&d);
}

static void test_listen_must_be_a_numeric_address_with_file_line_and_key(void **state)
{
	struct daemon d;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	cc_write_listen(&d, "server", "listen = localhost:28080");
	cc_serve_refused(&d, "idemhook.ini:2: [server] listen = \"localhost:28080\": expected a "
	                     "numeric address");
	cc_write_listen(&d, "server", "listen = 127.0.0.1:0");
	cc_write_listen(&d, "admin", "listen = nonsense");
	cc_serve_refused(&d, "[admin] listen = \"nonsense\"");
	daemon_finish(&d);
}

/* The text of section's listen line, for a port another daemon holds. */
static void test_a_bind_error_names_the_listen_key(void **state)
{
	struct daemon first;
	struct daemon d;
	const char *args[] = {"serve", "-c", d.dm_config, NULL};
	char line[64];
	char *out = NULL;

	(void)state;
	fx_daemon_start(&first, FX_STRIPE_INI);
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	snprintf(line, sizeof(line), "listen = 127.0.0.1:%u", first.dm_admin_port);
	cc_write_listen(&d, "admin", line);
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out), 69);
	assert_non_null(strstr(out, "[admin] listen: cannot listen on 127.0.0.1:"));
	free(out);
	daemon_finish(&d);

	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	snprintf(line, sizeof(line), "listen = 127.0.0.1:%u", first.dm_port);
	cc_write_listen(&d, "server", line);
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out), 69);
	assert_non_null(strstr(out, "[server] listen: cannot listen on 127.0.0.1:"));
	free(out);
	daemon_finish(&d);
	daemon_finish(&first);
}

static int cc_log_count(struct daemon *d, const char *needle)
{
	char *text = hn_read_file(d->dm_log);
	const char *p = text;
	int n = 0;

	while (p != NULL && (p = strstr(p, needle)) != NULL) {
		n++;
		p += strlen(needle);
	}
	free(text);
	return n;
}

static void cc_wait_log(struct daemon *d, const char *needle, int count)
{
	int i;

	for (i = 0; i < 500 && cc_log_count(d, needle) < count; i++) {
		usleep(20 * 1000);
	}
	if (cc_log_count(d, needle) < count) {
		char *text = hn_read_file(d->dm_log);

		print_error("wanted %d x \"%s\" in the log:\n%s\n", count, needle, text);
		free(text);
	}
	assert_true(cc_log_count(d, needle) >= count);
}

/* /metrics holds line (a whole sample line). */
static int cc_metric(struct daemon *d, const char *line)
{
	char url[128];
	struct hres r;
	int found;

	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	found = strstr(r.hs_body, line) != NULL;
	hres_finish(&r);
	return found;
}

static void cc_still_serves(struct daemon *d, const char *event_id)
{
	char *body = hn_stripe_event(event_id, "customer.created",
	                             "{\"id\":\"cus_1\",\"object\":\"customer\"}");

	assert_int_equal(fx_stripe_send(d, body, NULL), 200);
	free(body);
}

static void test_a_reload_refuses_what_the_start_refuses_and_keeps_the_running_config(void **state)
{
	static const char *const bad[] = {
	        FX_STRIPE_INI
	        "[outbound]\nnotify_url = http://127.0.0.1:9/n\nnotify_compensation = refnud\n",
	        FX_STRIPE_INI "[outbound]\nnotify_url = ftp://shop.example/notify\n",
	        FX_STRIPE_INI "[outbound]\nnotify_url = http://127.0.0.1:9/n\nnotify_on = payd\n",
	        FX_STRIPE_INI "[capture]\nmode = sometimes\n",
	        FX_STRIPE_INI "[capture]\nretention = forever\n",
	        FX_STRIPE_INI "[api]\nrate = fast\n",
	        FX_STRIPE_INI "[api]\ntoken = shop-backend file:/nonexistent/token\n",
	        FX_STRIPE_INI "[gc]\ninterval = soon\n",
	        FX_STRIPE_INI "[console]\nsession_ttl = forever\n",
	        FX_STRIPE_INI "[console]\nenabled = yes\ntoken = alice operator file:/nonexistent/t\n",
	        FX_STRIPE_INI "[provider stripe]\nsecret = whsec_second\n",
	        FX_STRIPE_INI "[points]\nrate = 1/50\n",
	        "[points]\nrate = 1/100\n",
	};
	struct daemon d;
	char *good;
	char id[32];
	size_t head_len;
	size_t i;
	int refused = 0;

	(void)state;
	fx_daemon_start(&d, FX_STRIPE_INI);
	good = hn_read_file(d.dm_config);
	assert_non_null(good);
	/* The harness's head (listeners, store, admin), then each bad extra. */
	head_len = (size_t)(strstr(good, "admin_port\n\n") - good) + strlen("admin_port\n\n");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct buf b;

		buf_init(&b, 0);
		buf_printf(&b, "%.*s%s", (int)head_len, good, bad[i]);
		assert_int_equal(daemon_write_file(&d, "idemhook.ini", b.buf_data), 0);
		buf_finish(&b);
		assert_int_equal(daemon_signal(&d, SIGHUP), 0);
		cc_wait_log(&d, "is not valid (above: file, line and key); keeping", ++refused);
		assert_true(cc_metric(&d, "idemhook_config_last_reload_successful 0\n"));
		assert_true(cc_metric(&d, "idemhook_config_generation 1\n"));
		snprintf(id, sizeof(id), "evt_cc_bad_%zu", i);
		cc_still_serves(&d, id);
	}

	/* A port file where none can be written. */
	{
		char *text = cc_replace_key(good, "server", "port_file",
		                            "port_file = /nonexistent/dir/port");

		assert_int_equal(daemon_write_file(&d, "idemhook.ini", text), 0);
		free(text);
	}
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "is not valid (above: file, line and key); keeping", ++refused);
	assert_true(
	        cc_log_count(&d,
	                     "[server] port_file: the directory /nonexistent/dir does not exist") >=
	        1);

	/* Not a configuration at all: empty, a NUL byte, a directory. */
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", ""), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "is not valid (above: file, line and key); keeping", ++refused);
	assert_true(cc_log_count(&d, "idemhook.ini: the file is empty") >= 1);
	{
		int fd = open(d.dm_config, O_WRONLY | O_TRUNC);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, "\0", 1), 1);
		assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
		close(fd);
	}
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "is not valid (above: file, line and key); keeping", ++refused);
	assert_true(cc_log_count(&d, "idemhook.ini:1: a NUL byte") >= 1);
	assert_int_equal(unlink(d.dm_config), 0);
	assert_int_equal(mkdir(d.dm_config, 0700), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "is not valid (above: file, line and key); keeping", ++refused);
	assert_true(cc_log_count(&d, "idemhook.ini: is a directory") >= 1);
	assert_int_equal(rmdir(d.dm_config), 0);
	cc_still_serves(&d, "evt_cc_after_dir");
	assert_true(cc_metric(&d, "idemhook_config_last_reload_successful 0\n"));

	/* The good file again: taken, without a claim about TLS. */
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", good), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "SIGHUP: configuration and secrets reloaded from", 1);
	assert_int_equal(cc_log_count(&d, "TLS certificate"), 0);
	assert_true(cc_metric(&d, "idemhook_config_last_reload_successful 1\n"));
	assert_true(cc_metric(&d, "idemhook_config_generation 2\n"));
	/* The literal secret of FX_STRIPE_INI is warned about. */
	assert_true(cc_log_count(&d, "<4>provider stripe: secret is written literally") >= 1);
	free(good);
	daemon_finish(&d);
}

/* Problems in several sections (lines 21-36, after the harness's 14 and
 * FX_STRIPE_INI's 6): the core's, the store's, an engine section's
 * ([gc]), two provider sections (a secret the profile refuses, a common
 * key) and [console], which serve checks. */
#define CC_MULTI_INI                                                                               \
	"[server]\nhead_timeout = 0\n[store]\nsynchronous = bogus\n[gc]\nbatch = 0\n"              \
	"[provider adyen]\ntype = adyen\nhmac_key = zz\n"                                          \
	"[provider broken]\ntype = stripe\nsecret = whsec_b\ntolerance = abc\n"                    \
	"[console]\nsession_ttl = forever\n"

/* What CC_MULTI_INI's problems log; the last three only where the secrets
 * are read and [console] checked (serve, a reload). */
static const char *const cc_multi_want[] = {
        "idemhook.ini:22: [server] head_timeout = \"0\": expected 1s to 1h",
        "idemhook.ini:24: [store] synchronous = \"bogus\": expected full, normal or off",
        "idemhook.ini:26: [gc] batch: must be 1..",
        "idemhook.ini:33: [provider broken] tolerance = \"abc\": expected a duration",
        "idemhook.ini:27: [provider adyen]: provider configuration refused",
        "provider adyen: line 29: hmac_key is not the hex key",
        "[console] session_ttl",
};
#define CC_MULTI_WANT_SHAPE 4 /* what a command that reads no secret logs */

/* What one run must name: want[0..n) (a command that reads no secret:
 * want[0..n_shape)), and none of unwanted. */
struct cc_named {
	const char *const *cn_want;
	size_t cn_n;
	size_t cn_n_shape;
	const char *const *cn_unwanted;
	size_t cn_n_unwanted;
};

static void cc_assert_named(const char *out, const struct cc_named *cn, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strstr(out, cn->cn_want[i]) == NULL) {
			print_error("wanted \"%s\" in:\n%s\n", cn->cn_want[i], out);
		}
		assert_non_null(strstr(out, cn->cn_want[i]));
	}
	for (i = 0; i < cn->cn_n_unwanted; i++) {
		if (strstr(out, cn->cn_unwanted[i]) != NULL) {
			print_error("did not want \"%s\" in:\n%s\n", cn->cn_unwanted[i], out);
		}
		assert_null(strstr(out, cn->cn_unwanted[i]));
	}
}

/* The file of FX_STRIPE_INI and extra: serve refuses it (78, no
 * database) and a command that reads no secret (stats) too, each naming
 * what cn says in one run (without problems of the shape, cn_n_shape 0:
 * serve --check instead of stats); a daemon started on FX_STRIPE_INI alone and
 * reloaded with it logs them all, keeps its configuration and still
 * serves (a payment of key evt). */
static void cc_named_in_one_run(const char *extra, const struct cc_named *cn, const char *evt)
{
	struct daemon d;
	const char *stats[] = {"-c", d.dm_config, "stats", NULL};
	const char *serve[] = {"-c", d.dm_config, "serve", NULL};
	const char *check[] = {"-c", d.dm_config, "serve", "--check", NULL};
	struct stat st;
	char *good;
	char *out = NULL;
	char *text;
	struct buf b;
	size_t head_len;

	assert_int_equal(daemon_init(&d, extra), 0);
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, serve, &out), 78);
	cc_assert_named(out, cn, cn->cn_n);
	assert_int_equal(stat(d.dm_db, &st), -1);
	free(out);
	if (cn->cn_n_shape > 0) {
		assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, stats, &out), 78);
		cc_assert_named(out, cn, cn->cn_n_shape);
	} else {
		/* Problems only the secrets show: serve --check names them. */
		assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, check, &out), 78);
		cc_assert_named(out, cn, cn->cn_n);
	}
	free(out);
	daemon_finish(&d);

	/* A reload: all of them logged, the running configuration kept. */
	fx_daemon_start(&d, FX_STRIPE_INI);
	good = hn_read_file(d.dm_config);
	assert_non_null(good);
	head_len = (size_t)(strstr(good, "admin_port\n\n") - good) + strlen("admin_port\n\n");
	buf_init(&b, 0);
	buf_printf(&b, "%.*s%s", (int)head_len, good, extra);
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", b.buf_data), 0);
	buf_finish(&b);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "is not valid (above: file, line and key); keeping", 1);
	text = hn_read_file(d.dm_log);
	assert_non_null(text);
	cc_assert_named(text, cn, cn->cn_n);
	free(text);
	assert_true(cc_metric(&d, "idemhook_config_last_reload_successful 0\n"));
	assert_true(cc_metric(&d, "idemhook_config_generation 1\n"));
	cc_still_serves(&d, evt);
	free(good);
	daemon_finish(&d);
}

/* Every problem of the file in one run, from serve, a command and a
 * reload: fixing one never just reveals the next. */
static void test_every_problem_of_a_file_is_named_in_one_run(void **state)
{
	static const char *const unwanted[] = {"no [provider NAME] section"};
	const struct cc_named cn = {cc_multi_want, sizeof(cc_multi_want) / sizeof(cc_multi_want[0]),
	                            CC_MULTI_WANT_SHAPE, unwanted,
	                            sizeof(unwanted) / sizeof(unwanted[0])};

	(void)state;
	cc_named_in_one_run(FX_STRIPE_INI CC_MULTI_INI, &cn, "evt_cc_multi");
}

/* Two problems in each of several sections (lines 21-88, after the
 * harness's 14 and FX_STRIPE_INI's 6), and lists with two bad entries
 * each: a section's check goes on past its first bad key, a list past its
 * first bad entry. The wechatpay and alipay sections hold a good key
 * ($CC_PUB_ENV) among bad lines and keys, and a key that names a refused
 * one (merchant_serial without a readable merchant_key). */
#define CC_PUB_ENV "IDEMHOOK_CC_PUB"
#define CC_SECTIONS_INI                                                                            \
	"[server]\ntrusted_proxies = 10.0.0.0/8 bogus-a, bogus-b\n"                                \
	"tls_cert = file:/nonexistent/cert.pem\ntls_key = file:/nonexistent/key.pem\n"             \
	"[gc]\nbatch = 0\npause = forever\n"                                                       \
	"[capture]\nmode = sometimes\nretention = forever\n"                                       \
	"[outbound]\nnotify_url = ftp://shop.example/notify\nnotify_on = paid payd refundd\n"      \
	"retry_base = soon\nconcurrency = 0\n"                                                     \
	"[reconcile]\nretries = 99\nmax_pages = 0\n"                                               \
	"[api]\nrate = fast\nburst = lots\ntoken = shop-a file:/nonexistent/a\n"                   \
	"token = shop-b file:/nonexistent/b\n"                                                     \
	"[provider other]\ntype = stripe\nsecret = whsec_other\n"                                  \
	"allow_from = bogus-c 10.0.0.0/8 bogus-d\n"                                                \
	"[console]\nsession_ttl = forever\nlogin_failures = many\n"                                \
	"[provider keys]\ntype = adyen\nhmac_key = file:/nonexistent/hk\nhmac_key = yy\n"          \
	"basic_user = a:b\n"                                                                       \
	"[provider rotated]\ntype = stripe\nsecret = file:/nonexistent/s1\n"                       \
	"secret = file:/nonexistent/s2\n"                                                          \
	"[provider sw]\ntype = standard-webhooks\nsecret = file:/nonexistent/sw\n"                 \
	"secret = whsec_??\n"                                                                      \
	"[provider signed]\ntype = hmac\nsecret = abc\nalgorithm = md5\nencoding = octal\n"        \
	"[provider wx]\ntype = wechatpay\nplatform_key = S0 env:" CC_PUB_ENV "\n"                  \
	"platform_key = S1 file:/nonexistent/wx1.pem\nplatform_key = S2\n"                         \
	"apiv3_key = file:/nonexistent/apiv3\napiv3_key = short\nmchid = 1900000001\n"             \
	"merchant_key = file:/nonexistent/merchant.pem\n"                                          \
	"merchant_serial = 5157F09EFDC096DE15EBE81A47057A72\n"                                     \
	"api_base_url = http://api.mch.example\n"                                                  \
	"[provider ali]\ntype = alipay\napp_id = 2021000000000000\n"                               \
	"public_key = env:" CC_PUB_ENV "\npublic_key = file:/nonexistent/ali.pem\n"                \
	"public_key = not-a-key\ncurrency = yuan\napp_private_key = file:/nonexistent/app.pem\n"   \
	"gateway_url = https://openapi.alipay.example/gateway.do?x=1\n"

/* What CC_SECTIONS_INI's problems log; those from CC_SECTIONS_WANT_SHAPE
 * on only where the secrets are read and [console] checked (serve, a
 * reload). */
static const char *const cc_sections_want[] = {
        "idemhook.ini:22: [server] trusted_proxies = \"bogus-a\": expected CIDRs",
        "idemhook.ini:22: [server] trusted_proxies = \"bogus-b\": expected CIDRs",
        "idemhook.ini:26: [gc] batch: must be 1..",
        "idemhook.ini:27: [gc] pause: must be a duration",
        "idemhook.ini:29: [capture] mode: \"sometimes\"",
        "idemhook.ini:30: [capture] retention = \"forever\"",
        "idemhook.ini:32: [outbound] notify_url: not an http:// or https:// URL",
        "idemhook.ini:33: [outbound] notify_on: \"payd\": not an effect",
        "idemhook.ini:33: [outbound] notify_on: \"refundd\": not an effect",
        "idemhook.ini:34: [outbound] retry_base: \"soon\"",
        "idemhook.ini:35: [outbound] concurrency: must be 1 to 1024",
        "idemhook.ini:37: [reconcile] retries: at most",
        "idemhook.ini:38: [reconcile] max_pages: 1 to",
        "idemhook.ini:40: [api] rate = \"fast\"",
        "idemhook.ini:41: [api] burst = \"lots\"",
        "idemhook.ini:47: [provider other] allow_from = \"bogus-c\": expected CIDRs",
        "idemhook.ini:47: [provider other] allow_from = \"bogus-d\": expected CIDRs",
        "idemhook.ini:23: [server] tls_cert: cannot be read",
        "idemhook.ini:24: [server] tls_key: cannot be read",
        "idemhook.ini:42: [api] token: shop-a cannot be read",
        "idemhook.ini:43: [api] token: shop-b cannot be read",
        "idemhook.ini:49: [console] session_ttl = \"forever\"",
        "idemhook.ini:50: [console] login_failures = \"many\"",
        "idemhook.ini:53: [provider keys] hmac_key cannot be read: ",
        "provider keys: line 54: hmac_key is not the hex key",
        "provider keys: basic_user (without ':') and basic_password go together",
        "idemhook.ini:58: [provider rotated] secret cannot be read: ",
        "idemhook.ini:59: [provider rotated] secret cannot be read: ",
        "idemhook.ini:62: [provider sw] secret cannot be read: ",
        "provider sw: line 63: secret is not whsec_ followed by base64",
        "provider signed: algorithm: expected sha256 or sha512",
        "provider signed: encoding: expected hex or base64",
        "idemhook.ini:72: [provider wx] platform_key cannot be read: ",
        "provider wx: line 73: platform_key needs \"SERIAL file:/path/to/key.pem\"",
        "idemhook.ini:74: [provider wx] apiv3_key cannot be read: ",
        "provider wx: line 75: apiv3_key is not 32 bytes",
        "[provider wx] merchant_key cannot be read: file:/nonexistent/merchant.pem: cannot ",
        "provider wx: api_base_url: ",
        "idemhook.ini:84: [provider ali] public_key cannot be read: ",
        "provider ali: line 85: public_key is not an Alipay public key",
        "provider ali: currency: expected a three-letter ISO 4217 code",
        "[provider ali] app_private_key cannot be read: file:/nonexistent/app.pem: cannot ",
        "provider ali: gateway_url: expected an https:// URL",
};

/* What CC_SECTIONS_INI must not log: a check of a key against a refused
 * one, or a refused list's line taken for a missing key. */
static const char *const cc_sections_unwanted[] = {
        "provider wx: merchant_key and merchant_serial",
        "provider wx: platform_key (SERIAL and key file) and apiv3_key are needed",
        "provider ali: app_id and public_key",
};
#define CC_SECTIONS_WANT_SHAPE 17 /* what a command that reads no secret logs */

/* Every problem of every section in one run, from serve, a command and a
 * reload: a checker never stops at its section's first bad key, nor a list
 * at its first bad entry. */
static void test_every_bad_key_and_list_entry_of_a_section_is_named_in_one_run(void **state)
{
	const struct cc_named cn = {cc_sections_want,
	                            sizeof(cc_sections_want) / sizeof(cc_sections_want[0]),
	                            CC_SECTIONS_WANT_SHAPE, cc_sections_unwanted,
	                            sizeof(cc_sections_unwanted) / sizeof(cc_sections_unwanted[0])};
	char *priv_pem = NULL;
	char *pub_pem = NULL;

	(void)state;
	/* The good platform_key and public_key lines: a public key that
	 * serve and the reloaded daemon read from their environment. */
	assert_int_equal(crypto_rsa_generate(1024, &priv_pem, &pub_pem), 0);
	assert_int_equal(setenv(CC_PUB_ENV, pub_pem, 1), 0);
	free(priv_pem);
	free(pub_pem);
	cc_named_in_one_run(FX_STRIPE_INI CC_SECTIONS_INI, &cn, "evt_cc_sections");
	unsetenv(CC_PUB_ENV);
}

/* WeChat Pay serials are compared without regard to case, so two
 * platform_key lines whose serials differ only in case name one key
 * twice: refused by serve and a reload, both lines named. Lines from 21,
 * after the harness's 14 and FX_STRIPE_INI's 6. */
static void test_platform_keys_whose_serials_differ_only_in_case_are_refused(void **state)
{
	static const char *const want[] = {
	        "provider wxcase: line 26: platform_key serial "
	        "\"5157f09efdc096de15ebe81a47057a7232f1b8e1\" is line 25's "
	        "(\"5157F09EFDC096DE15EBE81A47057A7232F1B8E1\"",
	};
	const struct cc_named cn = {want, 1, 0, NULL, 0};
	char *priv_pem = NULL;
	char *pub_pem = NULL;

	(void)state;
	assert_int_equal(crypto_rsa_generate(1024, &priv_pem, &pub_pem), 0);
	assert_int_equal(setenv(CC_PUB_ENV, pub_pem, 1), 0);
	free(priv_pem);
	free(pub_pem);
	cc_named_in_one_run(
	        FX_STRIPE_INI
	        "[provider wxcase]\ntype = wechatpay\n"
	        "apiv3_key = 0123456789abcdef0123456789abcdef\nmchid = 1900000001\n"
	        "platform_key = 5157F09EFDC096DE15EBE81A47057A7232F1B8E1 env:" CC_PUB_ENV
	        "\nplatform_key = 5157f09efdc096de15ebe81a47057a7232f1b8e1 env:" CC_PUB_ENV "\n",
	        &cn, "evt_cc_serial_case");
	unsetenv(CC_PUB_ENV);
}

/* A list past its maximum count says so once, and its lines after that
 * are checked all the same: a bad one among them is named in the same
 * run. Lines from 21, after the harness's 14 and FX_STRIPE_INI's 6. */
static void test_the_lines_of_a_list_past_its_maximum_are_still_checked(void **state)
{
	static const char *const unwanted[] = {"are needed"};
	char want[8][160];
	const char *wants[8];
	const struct cc_named cn = {wants, 8, 2, unwanted, 1};
	char *priv_pem = NULL;
	char *pub_pem = NULL;
	struct buf b;
	int line = 21;
	int i;

	(void)state;
	assert_int_equal(crypto_rsa_generate(1024, &priv_pem, &pub_pem), 0);
	assert_int_equal(setenv(CC_PUB_ENV, pub_pem, 1), 0);
	assert_int_equal(setenv("IDEMHOOK_CC_TOK", "tok-0123456789abcdef", 1), 0);
	free(priv_pem);
	free(pub_pem);
	buf_init(&b, 0);
	/* 33 origins, 8 a line (32 at most), then one no browser sends. */
	buf_puts(&b, FX_STRIPE_INI "[api]\n");
	line++;
	for (i = 1; i <= 33; i++) {
		buf_printf(&b, "%s https://o%d.example%s", i % 8 == 1 ? "cors_origins =" : "", i,
		           i % 8 == 0 ? "\n" : "");
		if (i % 8 == 0) {
			line++;
		}
	}
	buf_puts(&b, " HTTPS://Upper.example\n");
	snprintf(want[0], sizeof(want[0]), "idemhook.ini:%d: [api] cors_origins: at most 32", line);
	snprintf(want[1], sizeof(want[1]),
	         "idemhook.ini:%d: [api] cors_origins: \"HTTPS://Upper.example\" is no origin",
	         line);
	line++;
	/* 65 tokens (64 at most), then a line with a bad name. */
	for (i = 1; i <= 65; i++) {
		buf_printf(&b, "token = c%d env:IDEMHOOK_CC_TOK\n", i);
		line++;
	}
	buf_puts(&b, "token = bad/name env:IDEMHOOK_CC_TOK\n");
	snprintf(want[2], sizeof(want[2]), "idemhook.ini:%d: [api] token: expected [NAME]", line);
	line++;
	/* 9 secrets (8 at most), then one that cannot be read. */
	buf_puts(&b, "[provider many]\ntype = stripe\n");
	line += 2;
	for (i = 1; i <= 9; i++) {
		buf_printf(&b, "secret = whsec_many_%d\n", i);
		line++;
	}
	buf_puts(&b, "secret = file:/nonexistent/many\n");
	snprintf(want[3], sizeof(want[3]),
	         "idemhook.ini:%d: [provider many] secret cannot be read: file:/nonexistent/many: "
	         "cannot open",
	         line);
	line++;
	/* 9 platform keys (8 at most), then one that cannot be read. */
	buf_puts(&b, "[provider wxmany]\ntype = wechatpay\napiv3_key = "
	             "0123456789abcdef0123456789abcdef\nmchid = 1900000001\n");
	line += 4;
	for (i = 1; i <= 9; i++) {
		buf_printf(&b, "platform_key = S%d env:" CC_PUB_ENV "\n", i);
		line++;
	}
	buf_puts(&b, "platform_key = S10 file:/nonexistent/wx.pem\n");
	snprintf(want[4], sizeof(want[4]),
	         "idemhook.ini:%d: [provider wxmany] platform_key cannot be read: "
	         "file:/nonexistent/wx.pem",
	         line);
	snprintf(want[5], sizeof(want[5]), "provider wxmany: line %d: more than 8 platform_key",
	         line - 1);
	line++;
	/* 17 console tokens (16 at most), then one with a role that is none. */
	buf_puts(&b, "[console]\nenabled = yes\n");
	line += 2;
	for (i = 1; i <= 17; i++) {
		buf_printf(&b, "token = op%d operator env:IDEMHOOK_CC_TOK\n", i);
		line++;
	}
	buf_puts(&b, "token = late admin env:IDEMHOOK_CC_TOK\n");
	snprintf(want[6], sizeof(want[6]), "idemhook.ini:%d: [console] token: more than 16 tokens",
	         line - 1);
	snprintf(want[7], sizeof(want[7]), "idemhook.ini:%d: [console] token: expected NAME", line);
	for (i = 0; i < 8; i++) {
		wants[i] = want[i];
	}
	cc_named_in_one_run(b.buf_data, &cn, "evt_cc_over");
	buf_finish(&b);
	unsetenv(CC_PUB_ENV);
	unsetenv("IDEMHOOK_CC_TOK");
}

/* The lines of out that hold needle. */
static int cc_lines_with(const char *out, const char *needle)
{
	const char *p = out;
	int n = 0;

	while ((p = strstr(p, needle)) != NULL) {
		n++;
		p = strchr(p, '\n');
		if (p == NULL) {
			break;
		}
	}
	return n;
}

/* One unreadable secret is one line that says where (file:line), which key,
 * from where (the reference as written) and why, not three partial ones. */
static void test_an_unreadable_secret_is_one_line_with_file_line_key_source_and_cause(void **state)
{
	static const char *const want[][2] = {
	        {"/nonexistent/ps", "idemhook.ini:23: [provider ps] secret cannot be read: "
	                            "file:/nonexistent/ps: cannot open: No such file or directory"},
	        {"/nonexistent/tok",
	         "idemhook.ini:25: [api] token: shop cannot be read: "
	         "file:/nonexistent/tok: cannot open: No such file or directory"},
	        {"/nonexistent/ctok",
	         "idemhook.ini:28: [console] token alice: cannot be read: "
	         "file:/nonexistent/ctok: cannot open: No such file or directory"},
	        {"/nonexistent/sign", "idemhook.ini:30: [outbound] signing_secret: cannot be read: "
	                              "file:/nonexistent/sign: cannot open: No such file or "
	                              "directory"},
	};
	struct daemon d;
	const char *args[] = {"serve", "-c", d.dm_config, NULL};
	char *out = NULL;
	size_t i;

	(void)state;
	/* Lines from 21, after the harness's 14 and FX_STRIPE_INI's 6. */
	assert_int_equal(daemon_init(&d,
	                             FX_STRIPE_INI "[provider ps]\ntype = stripe\n"
	                                           "secret = file:/nonexistent/ps\n"
	                                           "[api]\ntoken = shop file:/nonexistent/tok\n"
	                                           "[console]\nenabled = yes\n"
	                                           "token = alice operator file:/nonexistent/ctok\n"
	                                           "[outbound]\n"
	                                           "signing_secret = file:/nonexistent/sign\n"),
	                 0);
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out), 78);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (strstr(out, want[i][1]) == NULL || cc_lines_with(out, want[i][0]) != 1) {
			print_error("wanted \"%s\" on the one line naming %s:\n%s\n", want[i][1],
			            want[i][0], out);
		}
		assert_non_null(strstr(out, want[i][1]));
		assert_int_equal(cc_lines_with(out, want[i][0]), 1);
	}
	assert_null(strstr(out, "cannot read the value"));
	assert_null(strstr(out, "secret file "));
	free(out);
	daemon_finish(&d);
}

/* A public key written in the file is no secret: no warning about it,
 * while a secret written there is still warned about. */
static void test_a_public_key_written_in_the_file_is_not_warned_about(void **state)
{
	struct daemon d;

	(void)state;
	fx_daemon_start(&d, FX_STRIPE_INI
	                "[provider sw]\ntype = standard-webhooks\n"
	                "public_key = whpk_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=\n");
	assert_true(cc_log_count(&d, "<4>provider stripe: secret is written literally") >= 1);
	assert_int_equal(cc_log_count(&d, "public_key is written literally"), 0);
	daemon_finish(&d);
}

/* Files in the capture spool dir (its day directories one level down). */
static int cc_spool_files(const char *dir)
{
	char day[1024];
	struct dirent *e;
	struct dirent *f;
	DIR *top = opendir(dir);
	DIR *sub;
	int n = 0;

	while (top != NULL && (e = readdir(top)) != NULL) {
		if (e->d_name[0] == '.') {
			continue;
		}
		snprintf(day, sizeof(day), "%s/%s", dir, e->d_name);
		sub = opendir(day);
		while (sub != NULL && (f = readdir(sub)) != NULL) {
			n += f->d_name[0] != '.';
		}
		if (sub != NULL) {
			closedir(sub);
		}
	}
	if (top != NULL) {
		closedir(top);
	}
	return n;
}

/* A spool or a database directory that cannot be made is refused by the
 * start (78, the unit's RestartPreventExitStatus), so a reload refuses it
 * too: else the reload says "reloaded" and the next restart leaves the
 * service down. The refused reload keeps the running spool. */
static void test_a_reload_refuses_a_spool_or_database_directory_the_start_cannot_make(void **state)
{
	const char *args[] = {"serve", "-c", NULL, NULL};
	struct {
		const char *section;
		const char *key;
		const char *line;
		const char *want;
	} bad[] = {
	        {"capture", "dir", "dir = /proc/idemhook-captures",
	         "[capture] dir: cannot create /proc/idemhook-captures"},
	        {"capture", "dir", NULL, "[capture] dir: cannot use "},
	        {"store", "path", "path = /proc/idemhook-db/idemhook.db",
	         "[store] path: cannot create /proc/idemhook-db"},
	};
	struct daemon d;
	char spool[700];
	char in_file[800];
	char *good;
	char *text;
	char *out = NULL;
	struct buf b;
	size_t i;
	int captured;
	int refused = 0;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", d.dm_dir);
	text = hn_read_file(d.dm_config);
	assert_non_null(text);
	buf_init(&b, 0);
	buf_printf(&b, "%s\n[capture]\nmode = all\ndir = %s\n", text, spool);
	free(text);
	good = buf_take(&b, NULL);
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", good), 0);
	assert_int_equal(daemon_start(&d), 0);
	cc_still_serves(&d, "evt_cc_spool_0");
	captured = cc_spool_files(spool);
	assert_int_equal(captured, 1);
	/* A regular file where a directory of the spool's path should be. */
	assert_int_equal(daemon_write_file(&d, "a-file", "x\n"), 0);
	snprintf(in_file, sizeof(in_file), "dir = %s/a-file/captures", d.dm_dir);
	bad[1].line = in_file;
	args[2] = d.dm_config;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char id[32];

		if (strcmp(bad[i].section, "store") == 0 && d.dm_pg_db[0] != '\0') {
			continue; /* no directory to make on PostgreSQL */
		}
		text = cc_replace_key(good, bad[i].section, bad[i].key, bad[i].line);
		assert_int_equal(daemon_write_file(&d, "idemhook.ini", text), 0);
		free(text);
		assert_int_equal(daemon_signal(&d, SIGHUP), 0);
		cc_wait_log(&d, "is not valid (above: file, line and key); keeping", ++refused);
		assert_true(cc_log_count(&d, bad[i].want) >= 1);
		assert_true(cc_metric(&d, "idemhook_config_last_reload_successful 0\n"));
		assert_true(cc_metric(&d, "idemhook_config_generation 1\n"));
		/* The running configuration and spool stay. */
		snprintf(id, sizeof(id), "evt_cc_spool_%zu", i + 1);
		cc_still_serves(&d, id);
		assert_int_equal(cc_spool_files(spool), ++captured);
		/* The start refuses the very same file, before the database. */
		assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, args, &out), 78);
		if (strstr(out, bad[i].want) == NULL) {
			print_error("serve did not say \"%s\":\n%s\n", bad[i].want, out);
		}
		assert_non_null(strstr(out, bad[i].want));
		assert_null(strstr(out, "lock"));
		free(out);
	}
	/* Nothing was made by the checks. */
	assert_true(access("/proc/idemhook-captures", F_OK) < 0);
	assert_true(access("/proc/idemhook-db", F_OK) < 0);

	/* The good file again: taken. */
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", good), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "SIGHUP: configuration and secrets reloaded from", 1);
	assert_true(cc_metric(&d, "idemhook_config_last_reload_successful 1\n"));
	free(good);
	daemon_finish(&d);
}

static void test_a_reload_names_keys_that_need_a_restart_and_applies_outbound(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct daemon d;
	char order[64];
	char *good;
	struct buf b;

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_default(p, NULL, &ok), 0);
	fx_daemon_start(&d, FX_STRIPE_INI);
	good = hn_read_file(d.dm_config);
	assert_non_null(good);

	/* [outbound] added by a reload, and two keys that need a restart. */
	buf_init(&b, 0);
	buf_printf(&b,
	           "%s\n[outbound]\nnotify_url = %s/notify\nretry_base = 100ms\npoll = 100ms\n\n"
	           "[store]\nbusy_timeout_ms = 1234\n\n[capture]\nmode = off\n",
	           good, peer_base(p));
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", b.buf_data), 0);
	buf_finish(&b);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d, "; not in effect until a restart: [store] busy_timeout_ms, [capture] mode",
	            1);
	cc_wait_log(&d, "SIGHUP: outbound worker started with the new [outbound] settings", 1);
	/* plain http:// and no signing_secret: warned about, taken */
	assert_true(cc_log_count(&d, "[outbound] notify_url: plain http:// and unsigned") >= 1);
	assert_true(cc_metric(
	        &d,
	        "idemhook_config_restart_pending{section=\"store\",key=\"busy_timeout_ms\"} 1\n"));
	assert_true(cc_metric(
	        &d, "idemhook_config_restart_pending{section=\"capture\",key=\"mode\"} 1\n"));
	assert_true(cc_metric(&d, "idemhook_config_last_reload_successful 1\n"));

	/* The worker the reload started delivers the notification. */
	fx_order(&d, 1999, "usd", order);
	assert_int_equal(fx_stripe_pay(&d, "evt_cc_paid", order, 1999, "usd"), 200);
	assert_int_equal(peer_wait(p, 1, 15000), 1);
	assert_int_equal(hn_db_wait_int(d.dm_db,
	                                "SELECT COUNT(*) FROM outbox WHERE status = 'succeeded'", 1,
	                                15),
	                 1);

	/* Back to the start's values: nothing pending any more. */
	assert_int_equal(daemon_write_file(&d, "idemhook.ini", good), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	cc_wait_log(&d,
	            "SIGHUP: no outbound call configured any more: the outbound worker starts no "
	            "delivery",
	            1);
	assert_false(cc_metric(&d, "idemhook_config_restart_pending{"));
	free(good);
	daemon_finish(&d);
	peer_destroy(p);
}

static void test_commands_that_verify_nothing_run_without_the_provider_secrets(void **state)
{
	struct daemon d;
	char creds[700];
	char *out = NULL;
	const char *migrate[] = {"-c", d.dm_config, "migrate", NULL};
	const char *stats[] = {"-c", d.dm_config, "stats", NULL};
	const char *events[] = {"-c", d.dm_config, "events", "list", "--failed", NULL};
	const char *outbox[] = {"-c", d.dm_config, "outbox", "list", "--status", "dead", NULL};
	const char *gc_dry[] = {"-c", d.dm_config, "gc", "--dry-run", NULL};
	const char *gc_vacuum[] = {"-c", d.dm_config, "gc", "--vacuum", NULL};
	const char *reconcile[] = {"-c", d.dm_config, "reconcile", NULL};
	const char *serve[] = {"-c", d.dm_config, "serve", "--no-migrate", NULL};
	const char *const *cmds[] = {migrate, stats, events, outbox, gc_dry, gc_vacuum};
	size_t i;
	int rc;

	(void)state;
	assert_int_equal(daemon_init(&d, CC_SECRET_INI), 0);
	/* As run by hand outside the service: no $CREDENTIALS_DIRECTORY. */
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		rc = cc_run(NULL, NULL, CC_RUN_LIMIT_S, cmds[i], &out);
		if (rc != 0) {
			print_error("%s %s exited %d:\n%s\n", cmds[i][2],
			            cmds[i][3] ? cmds[i][3] : "", rc, out);
		}
		assert_int_equal(rc, 0);
		assert_null(strstr(out, "secret"));
		free(out);
	}
	/* A command that signs needs the secret, and says where it looked. */
	if (access("/run/credentials/idemhook.service/stripe-secret", F_OK) < 0) {
		assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, reconcile, &out), 78);
		assert_non_null(strstr(
		        out, "$CREDENTIALS_DIRECTORY is not set, and "
		             "/run/credentials/idemhook.service/stripe-secret cannot be read"));
		free(out);
	}
	/* serve --no-migrate after migrate, with the secret as systemd gives it. */
	snprintf(creds, sizeof(creds), "%s/creds", d.dm_dir);
	assert_int_equal(mkdir(creds, 0700), 0);
	assert_int_equal(daemon_write_file(&d, "creds/stripe-secret", FX_STRIPE_SECRET "\n"), 0);
	rc = cc_run(NULL, creds, 3, serve, &out);
	assert_int_equal(rc, 128 + SIGALRM);
	assert_non_null(strstr(out, "listening on 127.0.0.1:"));
	assert_null(strstr(out, "<3>"));
	free(out);
	daemon_finish(&d);
}

static void test_a_secret_reference_without_a_name_is_refused_by_every_command(void **state)
{
	struct daemon d;
	const char *stats[] = {"-c", d.dm_config, "stats", NULL};
	char *out = NULL;

	(void)state;
	assert_int_equal(
	        daemon_init(&d, "[provider stripe]\ntype = stripe\nsecret = credential:\n"), 0);
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, stats, &out), 78);
	assert_non_null(strstr(
	        out,
	        "idemhook.ini:17: [provider stripe] secret = \"credential:\": credential: needs"));
	free(out);
	daemon_finish(&d);
}

/* serve --check takes what serve takes, says so, and opens nothing: no
 * database made, no listener, nothing written. */
static void test_serve_check_takes_a_good_file_and_opens_nothing(void **state)
{
	struct daemon d;
	const char *check[] = {"-c", d.dm_config, "serve", "--check", NULL};
	struct stat st;
	char *out = NULL;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	assert_int_equal(cc_run(NULL, NULL, CC_RUN_LIMIT_S, check, &out), 0);
	assert_non_null(strstr(out, "idemhook.ini: good: serve would start with it"));
	assert_null(strstr(out, "listening"));
	assert_int_equal(stat(d.dm_db, &st), -1);
	free(out);
	daemon_finish(&d);
}

/* A [console] section serve refuses is refused by every command, with the
 * same line, before any database is looked at: an operator finds it with
 * whatever command runs first, not at the next start or reload. */
static void test_a_console_section_serve_refuses_is_refused_by_every_command(void **state)
{
	static const char *const bad[][2] = {
	        {"[console]\nsession_ttl = forever\n", "[console] session_ttl"},
	        {"[console]\nenabled = yes\n", "[console] enabled = yes needs at least one token"},
	        {"[admin]\nlisten = off\n[console]\nenabled = yes\n"
	         "token = alice operator env:T_NOT_READ\n",
	         "[console] enabled = yes needs the admin listener"},
	};
	struct daemon d;
	const char *stats[] = {"-c", d.dm_config, "stats", NULL};
	const char *events[] = {"-c", d.dm_config, "events", "list", NULL};
	const char *serve[] = {"-c", d.dm_config, "serve", NULL};
	const char *const *cmds[] = {stats, events, serve};
	char ini[512];
	char *out = NULL;
	size_t i;
	size_t c;
	int rc;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(ini, sizeof(ini), "%s%s", FX_STRIPE_INI, bad[i][0]);
		assert_int_equal(daemon_init(&d, ini), 0);
		for (c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
			rc = cc_run(NULL, NULL, CC_RUN_LIMIT_S, cmds[c], &out);
			if (rc != 78 || strstr(out, bad[i][1]) == NULL) {
				print_error("%s exited %d, wanted 78 with \"%s\":\n%s\n",
				            cmds[c][2], rc, bad[i][1], out);
			}
			assert_int_equal(rc, 78);
			assert_non_null(strstr(out, bad[i][1]));
			free(out);
		}
		daemon_finish(&d);
	}
}

static void test_without_any_configuration_a_command_says_so(void **state)
{
	struct daemon d;
	const char *stats[] = {"stats", NULL};
	char *out = NULL;

	(void)state;
	if (access("/etc/idemhook/idemhook.ini", F_OK) == 0 ||
	    access("/usr/local/etc/idemhook/idemhook.ini", F_OK) == 0) {
		skip();
	}
	assert_int_equal(daemon_init(&d, NULL), 0);
	assert_int_equal(cc_run(d.dm_dir, NULL, CC_RUN_LIMIT_S, stats, &out), 78);
	assert_non_null(strstr(out, "no configuration given"));
	assert_null(strstr(out, "sqlite"));
	free(out);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_serve_refuses_a_bad_section_before_opening_the_database),
	        cmocka_unit_test(test_a_cors_origin_no_browser_sends_is_refused),
	        cmocka_unit_test(
	                test_a_cors_origin_a_browser_writes_otherwise_is_refused_with_what_to_write),
	        cmocka_unit_test(test_a_public_key_written_in_the_file_is_not_warned_about),
	        cmocka_unit_test(test_a_second_serve_on_a_running_database_gets_the_config_error),
	        cmocka_unit_test(test_listen_must_be_a_numeric_address_with_file_line_and_key),
	        cmocka_unit_test(test_port_files_must_be_writable_where_they_are_named),
	        cmocka_unit_test(test_a_bind_error_names_the_listen_key),
	        cmocka_unit_test(
	                test_a_reload_refuses_what_the_start_refuses_and_keeps_the_running_config),
	        cmocka_unit_test(test_every_problem_of_a_file_is_named_in_one_run),
	        cmocka_unit_test(
	                test_every_bad_key_and_list_entry_of_a_section_is_named_in_one_run),
	        cmocka_unit_test(test_the_lines_of_a_list_past_its_maximum_are_still_checked),
	        cmocka_unit_test(test_platform_keys_whose_serials_differ_only_in_case_are_refused),
	        cmocka_unit_test(
	                test_an_unreadable_secret_is_one_line_with_file_line_key_source_and_cause),
	        cmocka_unit_test(
	                test_a_reload_refuses_a_spool_or_database_directory_the_start_cannot_make),
	        cmocka_unit_test(test_a_reload_names_keys_that_need_a_restart_and_applies_outbound),
	        cmocka_unit_test(
	                test_commands_that_verify_nothing_run_without_the_provider_secrets),
	        cmocka_unit_test(
	                test_a_secret_reference_without_a_name_is_refused_by_every_command),
	        cmocka_unit_test(test_serve_check_takes_a_good_file_and_opens_nothing),
	        cmocka_unit_test(test_a_console_section_serve_refuses_is_refused_by_every_command),
	        cmocka_unit_test(test_without_any_configuration_a_command_says_so),
	};

	return cmocka_run_group_tests_name("configuration check", tests, NULL, NULL);
}
