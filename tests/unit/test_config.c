/* test_config.c: the INI configuration, typed readers and secrets. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "confcheck.h"
#include "config.h"
#include "provider.h"
#include "store.h"

static char tmpdir[64];

static int setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/idemhook-config-XXXXXX");
	return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *write_file(const char *name, const char *content)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
	return path;
}

static void test_lists_split_on_spaces_tabs_and_commas(void **state)
{
	const char *cursor = " a,b\t, c ,,";
	const char *item;
	size_t len;

	item = config_list_next(&cursor, &len);
	assert_int_equal(len, 1);
	assert_memory_equal(item, "a", 1);
	item = config_list_next(&cursor, &len);
	assert_memory_equal(item, "b", 1);
	item = config_list_next(&cursor, &len);
	assert_memory_equal(item, "c", 1);
	assert_null(config_list_next(&cursor, &len));
	cursor = "";
	assert_null(config_list_next(&cursor, &len));
}

static void test_no_file_gives_the_demo_on_loopback_with_a_stripe_instance(void **state)
{
	struct config *cf = provider_config_load(NULL);

	assert_non_null(cf);
	assert_true(cf->cf_demo);
	assert_string_equal(cf->cf_listen_host, "127.0.0.1");
	assert_int_equal(cf->cf_listen_port, 8080);
	assert_string_equal(cf->cf_db_path, "./var/idemhook.db");
	assert_int_equal(cf->cf_sync, STORE_SYNC_FULL);
	assert_int_equal(cf->cf_writer_nice, -10);
	assert_int_equal(cf->cf_retention_s, 7 * 86400);
	assert_int_equal(cf->cf_body_max, 1024 * 1024);
	assert_non_null(config_provider(cf, "stripe"));
	assert_null(config_provider(cf, "adyen"));
	config_destroy(cf);
}

static void test_durations_sizes_and_booleans_parse_exactly(void **state)
{
	int64_t d;
	size_t s;
	int b;

	assert_int_equal(config_parse_duration("90", &d), 0);
	assert_int_equal(d, 90);
	assert_int_equal(config_parse_duration("15m", &d), 0);
	assert_int_equal(d, 900);
	assert_int_equal(config_parse_duration("25h", &d), 0);
	assert_int_equal(d, 90000);
	assert_int_equal(config_parse_duration("7d", &d), 0);
	assert_int_equal(d, 604800);
	assert_int_equal(config_parse_duration("7 d", &d), -1);
	assert_int_equal(config_parse_duration("-1", &d), -1);
	assert_int_equal(config_parse_duration("1w", &d), -1);
	assert_int_equal(config_parse_duration("99999999999999999999", &d), -1);
	assert_int_equal(config_parse_size("512k", &s), 0);
	assert_int_equal(s, 512 * 1024);
	assert_int_equal(config_parse_size("1M", &s), 0);
	assert_int_equal(s, 1024 * 1024);
	assert_int_equal(config_parse_size("1.5M", &s), -1);
	assert_int_equal(config_parse_bool("Yes", &b), 0);
	assert_true(b);
	assert_int_equal(config_parse_bool("off", &b), 0);
	assert_false(b);
	assert_int_equal(config_parse_bool("maybe", &b), -1);
}

static void test_full_file_sets_core_keys_and_provider_instances(void **state)
{
	char ini[2048];
	const char *secret_path = write_file("stripe.secret", "whsec_from_file\n");
	const char *path;
	const struct provider_conf *eu;
	const struct provider_conf *us;
	struct config *cf;

	snprintf(ini, sizeof(ini),
		 "[server]\nlisten = [::1]:9443\nthreads = 3\nbody_max = 64k\n"
		 "trusted_proxies = 10.0.0.0/8,192.0.2.1  ::1/128\n\n"
		 "[store]\npath = %s/x.db\nsynchronous = normal\nbatch_max = 16\nretention = 10d\n"
		 "writer_nice = -3\n\n"
		 "[points]\nrate = 0.05\n\n"
		 "[provider stripe-eu]\ntype = stripe\nsecret = file:%s\ntolerance = 120\n"
		 "allow_from = 192.0.2.0/24, 2001:db8::/32\n\n"
		 "[provider stripe-us]\ntype = stripe\nsecret = whsec_literal\nretention = 2d\n",
		 tmpdir, secret_path);
	path = write_file("full.ini", ini);
	cf = provider_config_load(path);
	assert_non_null(cf);
	assert_false(cf->cf_demo);
	assert_string_equal(cf->cf_listen_host, "::1");
	assert_int_equal(cf->cf_listen_port, 9443);
	assert_int_equal(cf->cf_threads, 3);
	assert_int_equal(cf->cf_body_max, 65536);
	assert_non_null(cf->cf_trusted_proxies);
	assert_string_equal(cf->cf_trusted_proxies[0], "10.0.0.0/8");
	assert_string_equal(cf->cf_trusted_proxies[1], "192.0.2.1");
	assert_string_equal(cf->cf_trusted_proxies[2], "::1/128");
	assert_null(cf->cf_trusted_proxies[3]);
	assert_int_equal(cf->cf_sync, STORE_SYNC_NORMAL);
	assert_int_equal(cf->cf_batch_max, 16);
	assert_int_equal(cf->cf_writer_nice, -3);
	assert_int_equal(cf->cf_points_num, 5);
	assert_int_equal(cf->cf_points_den, 100);
	eu = config_provider(cf, "stripe-eu");
	us = config_provider(cf, "stripe-us");
	assert_non_null(eu);
	assert_non_null(us);
	assert_int_equal(eu->pc_tolerance_s, 120);
	assert_int_equal(eu->pc_retention_s, 10 * 86400);
	assert_int_equal(us->pc_retention_s, 2 * 86400);
	assert_true(config_provider_allows(eu, "192.0.2.44"));
	assert_true(config_provider_allows(eu, "2001:db8::1"));
	assert_false(config_provider_allows(eu, "198.51.100.1"));
	assert_true(config_provider_allows(us, "198.51.100.1"));
	config_destroy(cf);
}

static void test_server_connection_limits_have_defaults_and_refuse_zero_timeouts(void **state)
{
	struct config *cf;

	cf = provider_config_load(write_file("l0.ini", "[server]\nlisten = 127.0.0.1:0\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_max_connections, 0); /* the file limit decides */
	assert_int_equal(cf->cf_head_timeout_s, 10);
	assert_int_equal(cf->cf_body_min_rate, 1024);
	assert_int_equal(cf->cf_drain_timeout_s, 45);
	config_destroy(cf);
	cf = provider_config_load(write_file("l1.ini", "[server]\nmax_connections = 5000\nhead_timeout = 5s\n"
					      "body_min_rate = 4k\ndrain_timeout = 2m\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_max_connections, 5000);
	assert_int_equal(cf->cf_head_timeout_s, 5);
	assert_int_equal(cf->cf_body_min_rate, 4096);
	assert_int_equal(cf->cf_drain_timeout_s, 120);
	config_destroy(cf);
	assert_null(provider_config_load(write_file("l2.ini", "[server]\nhead_timeout = 0\n")));
	assert_null(provider_config_load(write_file("l3.ini", "[server]\ndrain_timeout = 0\n")));
	assert_null(provider_config_load(write_file("l4.ini", "[server]\nbody_min_rate = 0\n")));
	assert_null(provider_config_load(write_file("l5.ini", "[server]\nmax_connections = many\n")));
}

static void test_points_rate_accepts_fractions_and_refuses_floats_in_disguise(void **state)
{
	struct config *cf;

	cf = provider_config_load(write_file("r1.ini", "[points]\nrate = 1/3\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_points_num, 1);
	assert_int_equal(cf->cf_points_den, 3);
	config_destroy(cf);
	assert_null(provider_config_load(write_file("r2.ini", "[points]\nrate = 1e-2\n")));
	assert_null(provider_config_load(write_file("r3.ini", "[points]\nrate = 1/0\n")));
	assert_null(provider_config_load(write_file("r4.ini", "[points]\nrate = 0.\n")));
}

static void test_bad_files_are_refused_whole(void **state)
{
	assert_null(provider_config_load(write_file("b1.ini", "[provider x]\ntype = nosuchprovider\n")));
	assert_null(provider_config_load(write_file("b2.ini", "[server]\nlisten = localhost\n")));
	assert_null(provider_config_load(write_file("b3.ini", "[server]\nlisten = 127.0.0.1:70000\n")));
	assert_null(provider_config_load(write_file("b4.ini", "[store]\nsynchronous = sometimes\n")));
	assert_null(provider_config_load(write_file("b5.ini", "[provider a/b]\ntype = stripe\nsecret = whsec_x\n")));
	assert_null(provider_config_load(write_file("b6.ini", "this is not ini\n")));
	assert_null(provider_config_load(write_file("b7.ini", "[provider s]\ntype = stripe\nsecret = whsec_x\n"
						     "allow_from = 10.0.0.0/99\n")));
	assert_null(provider_config_load(write_file("b8.ini", "[server]\ntrusted_proxies = 10.0.0.0/8 proxy.example\n")));
	assert_null(provider_config_load("/nonexistent/idemhook.ini"));
}

/* A nice value from -20 to 0: the writer is only ever put ahead of the
 * server threads, never behind them. */
static void test_writer_nice_takes_minus_twenty_to_zero(void **state)
{
	struct config *cf;

	cf = provider_config_load(write_file("n1.ini", "[store]\nwriter_nice = 0\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_writer_nice, 0);
	config_destroy(cf);
	cf = provider_config_load(write_file("n2.ini", "[store]\nwriter_nice = -20\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_writer_nice, -20);
	config_destroy(cf);
	assert_null(provider_config_load(write_file("n3.ini", "[store]\nwriter_nice = 5\n")));
	assert_null(provider_config_load(write_file("n4.ini", "[store]\nwriter_nice = -21\n")));
	assert_null(provider_config_load(write_file("n5.ini", "[store]\nwriter_nice = high\n")));
	assert_null(provider_config_load(write_file("n6.ini", "[store]\nwriter_nice = -\n")));
	assert_null(provider_config_load(write_file("n7.ini", "[store]\nwriter_nice = --1\n")));
}

static void test_capture_is_manual_only_where_authorisation_and_capture_are_separate(void **state)
{
	const char *adyen = "[provider adyen]\ntype = adyen\nhmac_key = "
	                    "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF\n";
	char ini[512];
	struct config *cf;

	snprintf(ini, sizeof(ini), "%scapture = manual\n", adyen);
	cf = provider_config_load(write_file("c1.ini", ini));
	assert_non_null(cf);
	assert_int_equal(config_provider(cf, "adyen")->pc_capture_manual, 1);
	config_destroy(cf);
	snprintf(ini, sizeof(ini), "%scapture = automatic\n", adyen);
	cf = provider_config_load(write_file("c2.ini", ini));
	assert_non_null(cf);
	assert_int_equal(config_provider(cf, "adyen")->pc_capture_manual, 0);
	config_destroy(cf);
	cf = provider_config_load(write_file("c3.ini", adyen));
	assert_non_null(cf);
	assert_int_equal(config_provider(cf, "adyen")->pc_capture_manual, 0);
	config_destroy(cf);
	snprintf(ini, sizeof(ini), "%scapture = later\n", adyen);
	assert_null(provider_config_load(write_file("c4.ini", ini)));
	/* Stripe's events say themselves whether funds were only authorised. */
	assert_null(provider_config_load(write_file("c5.ini", "[provider s]\ntype = stripe\nsecret = whsec_x\n"
	                                             "capture = manual\n")));
}

static void test_secrets_come_from_files_credentials_and_environment(void **state)
{
	char *s = NULL;
	size_t len = 0;
	char spec[256];
	char err[CONFIG_SECRET_ERR_MAX];

	write_file("cred", "s3cret\r\n");
	snprintf(spec, sizeof(spec), "file:%s/cred", tmpdir);
	assert_int_equal(config_read_secret(spec, &s, &len, err, sizeof(err)), 0);
	assert_string_equal(s, "s3cret");
	assert_int_equal(len, 6);
	free(s);
	setenv("CREDENTIALS_DIRECTORY", tmpdir, 1);
	assert_int_equal(config_read_secret("credential:cred", &s, &len, err, sizeof(err)), 0);
	assert_string_equal(s, "s3cret");
	free(s);
	assert_int_equal(config_read_secret("credential:../etc/passwd", &s, &len, err, sizeof(err)),
	                 -1);
	unsetenv("CREDENTIALS_DIRECTORY");
	assert_int_equal(config_read_secret("credential:cred", &s, &len, err, sizeof(err)), -1);
	setenv("IDEMHOOK_TEST_SECRET", "from-env", 1);
	assert_int_equal(config_read_secret("env:IDEMHOOK_TEST_SECRET", &s, &len, err, sizeof(err)),
	                 0);
	assert_string_equal(s, "from-env");
	free(s);
	assert_int_equal(config_read_secret("file:/nonexistent/secret", &s, &len, err, sizeof(err)),
	                 -1);
	/* The source and the cause in one sentence, for the caller's one line. */
	assert_string_equal(err,
	                    "file:/nonexistent/secret: cannot open: No such file or directory");
	/* A FIFO would keep a reload waiting for a writer; a device may never end. */
	snprintf(spec, sizeof(spec), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(spec, 0600), 0);
	assert_int_equal(config_read_secret(spec, &s, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "fifo: is not a regular file"));
	assert_int_equal(config_read_secret("file:/dev/zero", &s, &len, err, sizeof(err)), -1);
}

/* stderr caught from here to log_catch_end: returns what log_catch_end needs. */
static int log_catch_begin(void)
{
	char log_path[128];
	int saved;
	int fd;

	snprintf(log_path, sizeof(log_path), "%s/stderr.log", tmpdir);
	fflush(stderr);
	saved = dup(2);
	fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	return saved;
}

/* stderr back (saved: from log_catch_begin); returns what was logged meanwhile (free it). */
static char *log_catch_end(int saved)
{
	char log_path[128];
	char *text;
	FILE *f;
	long n;

	snprintf(log_path, sizeof(log_path), "%s/stderr.log", tmpdir);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fopen(log_path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return text;
}

/* provider_config_load(path) with stderr caught: *ret_log gets what was logged. */
static struct config *load_logged(const char *path, char **ret_log)
{
	int saved = log_catch_begin();
	struct config *cf = provider_config_load(path);

	*ret_log = log_catch_end(saved);
	return cf;
}

static void assert_logged(const char *log_text, const char *part)
{
	const char *text = log_text != NULL ? log_text : "";

	if (strstr(text, part) == NULL) {
		fail_msg("\"%s\" not in the log:\n%s", part, text);
	}
}

/* A file with a problem in each of several sections: the core's, the
 * store's, [points], two provider sections (a common key, and a secret
 * its profile refuses), a section of the engine's ([gc]) and an unknown
 * key; one provider section is good. */
#define MULTI_INI                                                                                  \
	"[server]\nhead_timeout = 0\nthreads = many\n"                          /* lines 1-3 */    \
	"[store]\nsynchronous = bogus\nwriter_nice = 5\npathh = x.db\n"         /* 4-7 */          \
	"[points]\nrate = 1e-2\n"                                               /* 8-9 */          \
	"[gc]\nbatch = 0\n"                                                     /* 10-11 */        \
	"[provider stripe]\ntype = stripe\nsecret = whsec_x\ntolerance = abc\n" /* 12-15 */        \
	"[provider adyen]\ntype = adyen\nhmac_key = zz\n"                       /* 16-18 */        \
	"[provider good]\ntype = stripe\nsecret = whsec_y\n"                    /* 19-21 */

/* What MULTI_INI's load logs: one line for each of its problems. */
static void assert_every_load_problem_logged(const char *log_text, const char *path)
{
	static const char *const want[] = {
	        ":2: [server] head_timeout = \"0\": expected 1s to 1h",
	        ":3: [server] threads = \"many\": expected a whole number",
	        ":5: [store] synchronous = \"bogus\": expected full, normal or off",
	        ":6: [store] writer_nice = \"5\": expected a nice value from -20 to 0",
	        ":7: [store] unknown key \"pathh\"; did you mean \"path\"?",
	        ":9: [points] rate = \"1e-2\"",
	        ":15: [provider stripe] tolerance = \"abc\": expected a duration",
	        "provider adyen: line 18: hmac_key is not the hex key",
	        ":16: [provider adyen]: provider configuration refused",
	};
	char expect[512];
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(expect, sizeof(expect), "%s%s", want[i][0] == ':' ? path : "", want[i]);
		assert_logged(log_text, expect);
	}
}

/* One load names every problem of the file, whatever section it is in:
 * fixing one never just reveals the next. */
static void test_a_load_names_every_problem_of_the_file(void **state)
{
	const char *path = write_file("multi.ini", MULTI_INI);
	char *log_text = NULL;

	assert_null(load_logged(path, &log_text));
	assert_every_load_problem_logged(log_text, path);
	free(log_text);
}

/* With CONFIG_LOAD_PROBLEMS the load hands the file over all the same,
 * marked, so that confcheck_run names the problems of the other sections
 * in the same run; the provider sections with a problem have no instance. */
static void test_a_file_with_problems_is_checked_whole_before_it_is_refused(void **state)
{
	const char *path = write_file("multi.ini", MULTI_INI);
	struct config *cf;
	char *log_text;
	int saved;

	saved = log_catch_begin();
	cf = provider_config_load_opts(path, CONFIG_LOAD_SECRETS | CONFIG_LOAD_PROBLEMS);
	assert_non_null(cf);
	assert_int_equal(confcheck_run(cf, CONFCHECK_DAEMON), -1);
	log_text = log_catch_end(saved);
	assert_true(cf->cf_problems > 0);
	assert_every_load_problem_logged(log_text, path);
	assert_logged(log_text, ":11: [gc] batch: must be 1..");
	/* Its provider sections are there, though two have no instance. */
	if (strstr(log_text, "no [provider NAME] section") != NULL) {
		fail_msg("%s", log_text);
	}
	assert_int_equal(cf->cf_n_providers, 1);
	assert_non_null(config_provider(cf, "good"));
	/* A key with a problem holds its default. */
	assert_int_equal(cf->cf_head_timeout_s, 10);
	assert_int_equal(cf->cf_sync, STORE_SYNC_FULL);
	assert_int_equal(cf->cf_points_den, 100);
	config_destroy(cf);
	free(log_text);

	/* A good file: no problem. */
	cf = provider_config_load_opts(write_file("good.ini", "[provider s]\ntype = stripe\n"
	                                                      "secret = whsec_x\n"),
	                               CONFIG_LOAD_SECRETS | CONFIG_LOAD_PROBLEMS);
	assert_non_null(cf);
	assert_int_equal(cf->cf_problems, 0);
	config_destroy(cf);
	/* What is no configuration at all is still refused at once. */
	assert_null(provider_config_load_opts(write_file("empty.ini", ""), CONFIG_LOAD_PROBLEMS));
}

/* A misspelt allow_from would leave the endpoint open to everyone. */
static void test_a_misspelt_key_is_refused_with_its_line_and_the_closest_key(void **state)
{
	const char *path = write_file("typo.ini", "[store]\npath = /tmp/x.db\n\n"
						  "[provider stripe]\ntype = stripe\nsecret = whsec_x\n"
						  "allow_frm = 192.0.2.0/24\n");
	char expect[1024];
	char *log_text = NULL;

	assert_null(load_logged(path, &log_text));
	snprintf(expect, sizeof(expect),
		 "%s:7: [provider stripe] unknown key \"allow_frm\"; did you mean \"allow_from\"?",
		 path);
	assert_logged(log_text, expect);
	free(log_text);
}

static void test_every_unknown_key_and_section_is_named(void **state)
{
	const char *path = write_file("unknown.ini",
				      "[server]\nlisten = 127.0.0.1:0\nretention = 7d\n"
				      "[stor]\npath = /tmp/x.db\n"
				      "[providers stripe]\nsecret = whsec_x\n"
				      "[provider s]\ntype = stripe\nsecret = whsec_x\nTolerance = 60\n"
				      "apiv3_key = x\n"
				      "[outbound]\nnotify_url = http://127.0.0.1:9/\n"
				      "notify_compensaton = none\n*_onx = paid\n");
	char *log_text = NULL;

	assert_null(load_logged(path, &log_text));
	assert_logged(log_text, ":3: [server] unknown key \"retention\"; it belongs in [capture], "
				"[provider NAME], [store]");
	assert_logged(log_text, ":4: unknown section [stor]; did you mean [store]?");
	assert_logged(log_text, ":6: unknown section [providers stripe]; did you mean [provider "
				"stripe]?");
	assert_logged(log_text, ":11: [provider s] unknown key \"Tolerance\"; did you mean "
				"\"tolerance\"?");
	/* Another profile's key is not this one's. */
	assert_logged(log_text, ":12: [provider s] unknown key \"apiv3_key\"");
	assert_logged(log_text, ":15: [outbound] unknown key \"notify_compensaton\"; did you mean "
				"\"notify_compensation\"?");
	/* Found by fuzzing: a key that is itself a pattern ran the suggestion
	 * into endless recursion. */
	assert_logged(log_text, ":16: [outbound] unknown key \"*_onx\"");
	free(log_text);
}

static void test_profile_keys_and_call_type_keys_are_known(void **state)
{
	const char *path = write_file("known.ini",
				      "[provider billing]\ntype = standard-webhooks\n"
				      "secret = whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"
				      "paid_types = invoice.paid\nrefund_cumulative = yes\n"
				      "[outbound]\nnotify_url = http://127.0.0.1:9/\n"
				      "notify_on = paid\nnotify_compensation = none\n");
	struct config *cf = provider_config_load(path);

	assert_non_null(cf);
	config_destroy(cf);
}

static void test_a_line_over_the_limit_is_refused_with_its_number(void **state)
{
	char name[301];
	char ini[600];
	char *log_text = NULL;
	const char *path;

	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(ini, sizeof(ini), "[server]\n\nport_file = /tmp/%s\n", name);
	path = write_file("long.ini", ini);
	assert_null(load_logged(path, &log_text));
	assert_logged(log_text, ":3: the line is longer than");
	free(log_text);
}

/* contrib/idemhook.example.ini, every commented-out key switched on, uses
 * only keys the table knows (its secrets do not exist here, so its
 * providers are refused). */
static void test_the_example_configuration_uses_only_known_keys(void **state)
{
	const char *root = getenv("IDEMHOOK_SOURCE_ROOT");
	char src[512];
	char line[512];
	FILE *in;
	FILE *out;
	char *log_text = NULL;
	const char *path = write_file("example.ini", "");
	struct config *cf;

	assert_non_null(root);
	snprintf(src, sizeof(src), "%s/contrib/idemhook.example.ini", root);
	in = fopen(src, "r");
	out = fopen(path, "w");
	assert_true(in != NULL && out != NULL);
	while (fgets(line, sizeof(line), in) != NULL) {
		int on = line[0] == ';' && (line[1] == '[' || (line[1] >= 'a' && line[1] <= 'z' &&
							       strstr(line, " = ") != NULL &&
							       strchr(line, ' ') == strstr(line, " = ")));

		fputs(on ? line + 1 : line, out);
	}
	fclose(in);
	fclose(out);
	cf = load_logged(path, &log_text);
	config_destroy(cf);
	if (strstr(log_text, "unknown") != NULL || strstr(log_text, "cannot parse") != NULL) {
		fail_msg("%s", log_text);
	}
	assert_logged(log_text, "provider");
	free(log_text);
}

/* [store] backend = postgresql: conninfo is needed, read like any secret
 * (here from the environment), and never needed by SQLite; bad values of
 * the other keys (pool_size, pg_writers) are refused with the values
 * allowed. */
static void test_a_postgresql_store_reads_its_conninfo_as_a_secret(void **state)
{
	char *log_text = NULL;
	struct config *cf;

	(void)state;
	setenv("IDEMHOOK_TEST_CONNINFO", "host=db dbname=idemhook password=s3cret\n", 1);
	cf = config_load(write_file("pg.ini", "[store]\nbackend = postgresql\n"
	                                      "conninfo = env:IDEMHOOK_TEST_CONNINFO\n"
	                                      "pool_size = 8\nstatement_timeout = 2s\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_backend, STORE_BACKEND_POSTGRESQL);
	assert_string_equal(cf->cf_conninfo, "host=db dbname=idemhook password=s3cret");
	assert_int_equal(cf->cf_pool_size, 8);
	assert_int_equal(cf->cf_statement_timeout_ms, 2000);
	config_destroy(cf);

	cf = config_load(write_file("pg2.ini", "[store]\nbackend = postgresql\n"));
	assert_null(cf);
	cf = load_logged(write_file("pg3.ini", "[store]\nbackend = mysql\n"), &log_text);
	assert_null(cf);
	assert_logged(log_text, "sqlite or postgresql");
	free(log_text);
	cf = config_load(write_file("pg4.ini", "[store]\nbackend = postgresql\nconninfo = host=db\n"
	                                       "pool_size = 0\n"));
	assert_null(cf);
	/* [store] pg_writers: 1 to 16, default 2. */
	cf = config_load(write_file("pg6.ini", "[store]\nbackend = postgresql\nconninfo = host=db\n"
	                                       "pg_writers = 3\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_pg_writers, 3);
	config_destroy(cf);
	cf = load_logged(write_file("pg7.ini", "[store]\nbackend = postgresql\nconninfo = host=db\n"
	                                       "pg_writers = 0\n"),
	                 &log_text);
	assert_null(cf);
	assert_logged(log_text, "1 to 16");
	free(log_text);
	log_text = NULL;
	cf = config_load(write_file("pg8.ini", "[store]\nbackend = postgresql\nconninfo = host=db\n"
	                                       "pg_writers = 17\n"));
	assert_null(cf);

	/* SQLite (the default) reads no conninfo, even one whose secret is absent. */
	cf = config_load(write_file("pg5.ini", "[store]\nconninfo = credential:absent\n"));
	assert_non_null(cf);
	assert_int_equal(cf->cf_backend, STORE_BACKEND_SQLITE);
	assert_int_equal(cf->cf_pool_size, 4);
	assert_int_equal(cf->cf_pg_writers, 2);
	assert_int_equal(cf->cf_statement_timeout_ms, 5000);
	config_destroy(cf);
	unsetenv("IDEMHOOK_TEST_CONNINFO");
}

/* An [api] order_reads nobody reads as own or all is refused at load,
 * with its line and the values allowed; own and all load. */
static void test_an_invalid_order_reads_is_refused_with_its_line_and_the_values(void **state)
{
	static const char *const bad[] = {"everyone", "Own", "", "own all"};
	char text[256];
	char expect[1024];
	char *log_text = NULL;
	struct config *cf;
	const char *path;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
		         "[store]\npath = /tmp/x.db\n\n[api]\nrate = 5\norder_reads = %s\n", bad[i]);
		path = write_file("reads.ini", text);
		assert_null(load_logged(path, &log_text));
		snprintf(expect, sizeof(expect), "%s:6: [api] order_reads = \"%s\": expected own (",
		         path, bad[i]);
		assert_logged(log_text, expect);
		assert_logged(log_text, ") or all (");
		free(log_text);
	}
	for (i = 0; i < 2; i++) {
		snprintf(text, sizeof(text), "[store]\npath = /tmp/x.db\n[api]\norder_reads = %s\n",
		         i == 0 ? "own" : "all");
		path = write_file("reads.ini", text);
		cf = load_logged(path, &log_text);
		assert_non_null(cf);
		config_destroy(cf);
		free(log_text);
	}
}

/* allow_from = provider:NAME: the shipped list, then the one `ips update`
 * wrote beside the database; a provider without a list is refused. */
static void test_allow_from_provider_preset_expands_to_the_published_list(void **state)
{
	char ini[1024];
	char dir[512];
	const struct provider_conf *pc;
	struct config *cf;
	size_t n;

	(void)state;
	snprintf(ini, sizeof(ini),
		 "[store]\npath = %s/presets.db\n\n"
		 "[provider stripe]\ntype = stripe\nsecret = whsec_literal\n"
		 "allow_from = 192.0.2.0/24 provider:stripe\n",
		 tmpdir);
	cf = provider_config_load(write_file("preset.ini", ini));
	assert_non_null(cf);
	pc = config_provider(cf, "stripe");
	assert_string_equal(pc->pc_allow_from[0], "192.0.2.0/24");
	for (n = 0; pc->pc_allow_from[n] != NULL; n++) {
	}
	assert_true(n > 10);
	assert_true(config_provider_allows(pc, "3.18.12.63"));
	assert_false(config_provider_allows(pc, "198.51.100.7"));
	config_destroy(cf);
	/* An updated list replaces the shipped one. */
	snprintf(dir, sizeof(dir), "%s/sender-ips", tmpdir);
	assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
	write_file("sender-ips/stripe.txt", "# date: 2026-12-04\n198.51.100.0/24\n");
	cf = provider_config_load(write_file("preset.ini", ini));
	assert_non_null(cf);
	pc = config_provider(cf, "stripe");
	assert_true(config_provider_allows(pc, "198.51.100.7"));
	assert_false(config_provider_allows(pc, "3.18.12.63"));
	config_destroy(cf);
	/* A malformed updated list refuses the configuration. */
	write_file("sender-ips/stripe.txt", "198.51.100.0/24\nnot an address\n");
	assert_null(provider_config_load(write_file("preset.ini", ini)));
	snprintf(ini, sizeof(ini),
		 "[store]\npath = %s/presets.db\n\n"
		 "[provider adyen]\ntype = adyen\nhmac_key = "
		 "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056\n"
		 "allow_from = provider:adyen\n",
		 tmpdir);
	assert_null(provider_config_load(write_file("preset-adyen.ini", ini)));
}

static void test_the_shape_of_a_configuration_loads_without_its_secrets(void **state)
{
	const char *path = write_file("shape.ini", "[provider stripe]\ntype = stripe\n"
	                                           "secret = credential:nowhere-to-be-found\n");
	struct config *cf;

	unsetenv("CREDENTIALS_DIRECTORY");
	/* With secrets: refused, the credential is nowhere. */
	assert_null(provider_config_load(path));
	/* The shape: the instance and its profile, no state, no secret read. */
	cf = provider_config_load_shape(path);
	assert_non_null(cf);
	assert_int_equal(cf->cf_secrets, 0);
	assert_int_equal(cf->cf_n_providers, 1);
	assert_string_equal(cf->cf_providers[0].pc_provider->p_name, "stripe");
	assert_null(cf->cf_providers[0].pc_state);
	config_destroy(cf);
	/* A reference without a name is refused either way. */
	path = write_file("shape2.ini", "[provider stripe]\ntype = stripe\nsecret = credential:\n");
	assert_null(provider_config_load_shape(path));
	path = write_file("shape3.ini", "[provider stripe]\ntype = stripe\nsecret = env:NO-SUCH\n");
	assert_null(provider_config_load_shape(path));
}

static void test_a_single_valued_key_given_twice_is_refused_and_rotation_is_not(void **state)
{
	struct config *cf;

	assert_null(provider_config_load_shape(
	        write_file("twice.ini", "[server]\nlisten = 127.0.0.1:1\n[store]\npath = x.db\n"
	                                "[server]\nlisten = 127.0.0.1:2\n")));
	assert_null(provider_config_load_shape(write_file(
	        "twoproviders.ini", "[provider stripe]\nsecret = whsec_a\n\n[provider stripe]\nsecret = whsec_b\n")));
	cf = provider_config_load(write_file("rotation.ini", "[provider stripe]\nsecret = whsec_a\nsecret = whsec_b\n"
	                                                     "[api]\ncors_origins = https://a.example\n"
	                                                     "cors_origins = https://b.example\n"));
	assert_non_null(cf);
	config_destroy(cf);
}

static void test_a_file_that_is_no_configuration_is_refused(void **state)
{
	char dir[300];
	FILE *f;
	const char *path;

	assert_null(config_load(write_file("empty.ini", "")));
	assert_null(config_load(write_file("blank.ini", "\n  \n; only a comment\n")));
	snprintf(dir, sizeof(dir), "%s/adir.ini", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_null(config_load(dir));
	path = write_file("nul.ini", "");
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite("\0[server]\nthreads = 2\n", 1, 23, f), 23);
	fclose(f);
	assert_null(config_load(path));
}

static int collect_restart(void *arg, const char *section, const char *key)
{
	char *out = arg;

	strcat(out, "[");
	strcat(out, section);
	strcat(out, "] ");
	strcat(out, key);
	strcat(out, ";");
	return 0;
}

static void test_a_reload_names_each_changed_key_that_needs_a_restart_once(void **state)
{
	struct config *was = config_load(write_file(
	        "was.ini", "[server]\nlisten = 127.0.0.1:1\nthreads = 2\n[store]\npath = a.db\nretention = 7d\n"
	                   "[capture]\nmode = all\n"));
	struct config *now = config_load(write_file(
	        "now.ini", "[server]\nlisten = 127.0.0.1:2\nthreads = 4\n[store]\npath = a.db\nretention = 9d\n"
	                   "[admin]\nlisten = off\n"));
	char out[512] = "";

	assert_non_null(was);
	assert_non_null(now);
	assert_int_equal(config_key_reloads("server", "threads"), 1);
	assert_int_equal(config_key_reloads("server", "listen"), 0);
	assert_int_equal(config_key_reloads("provider stripe", "secret"), 1);
	assert_int_equal(config_key_reloads("outbound", "notify_url"), 1);
	assert_int_equal(config_each_restart_change(was, now, collect_restart, out), 0);
	assert_string_equal(out, "[server] listen;[capture] mode;[admin] listen;");
	config_destroy(was);
	config_destroy(now);
}

static void test_the_admin_listener_defaults_away_from_prometheus(void **state)
{
	struct config *cf = config_load(write_file("admin.ini", "[server]\nthreads = 2\n"));
	char *host = NULL;
	unsigned port = 0;

	assert_non_null(cf);
	assert_int_equal(confcheck_admin_listen(cf, &host, &port), 1);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 8491);
	free(host);
	config_destroy(cf);
	cf = config_load(write_file("admin2.ini", "[admin]\nlisten = localhost:8491\n"));
	assert_non_null(cf);
	assert_int_equal(confcheck_admin_listen(cf, &host, &port), -1);
	config_destroy(cf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_lists_split_on_spaces_tabs_and_commas),
	        cmocka_unit_test(test_no_file_gives_the_demo_on_loopback_with_a_stripe_instance),
	        cmocka_unit_test(test_durations_sizes_and_booleans_parse_exactly),
	        cmocka_unit_test(test_full_file_sets_core_keys_and_provider_instances),
	        cmocka_unit_test(
	                test_server_connection_limits_have_defaults_and_refuse_zero_timeouts),
	        cmocka_unit_test(test_points_rate_accepts_fractions_and_refuses_floats_in_disguise),
	        cmocka_unit_test(test_bad_files_are_refused_whole),
	        cmocka_unit_test(test_writer_nice_takes_minus_twenty_to_zero),
	        cmocka_unit_test(
	                test_capture_is_manual_only_where_authorisation_and_capture_are_separate),
	        cmocka_unit_test(test_secrets_come_from_files_credentials_and_environment),
	        cmocka_unit_test(test_a_load_names_every_problem_of_the_file),
	        cmocka_unit_test(test_a_file_with_problems_is_checked_whole_before_it_is_refused),
	        cmocka_unit_test(test_a_misspelt_key_is_refused_with_its_line_and_the_closest_key),
	        cmocka_unit_test(test_every_unknown_key_and_section_is_named),
	        cmocka_unit_test(
	                test_an_invalid_order_reads_is_refused_with_its_line_and_the_values),
	        cmocka_unit_test(test_profile_keys_and_call_type_keys_are_known),
	        cmocka_unit_test(test_a_line_over_the_limit_is_refused_with_its_number),
	        cmocka_unit_test(test_the_example_configuration_uses_only_known_keys),
	        cmocka_unit_test(test_a_postgresql_store_reads_its_conninfo_as_a_secret),
	        cmocka_unit_test(test_allow_from_provider_preset_expands_to_the_published_list),
	        cmocka_unit_test(test_the_shape_of_a_configuration_loads_without_its_secrets),
	        cmocka_unit_test(
	                test_a_single_valued_key_given_twice_is_refused_and_rotation_is_not),
	        cmocka_unit_test(test_a_file_that_is_no_configuration_is_refused),
	        cmocka_unit_test(test_a_reload_names_each_changed_key_that_needs_a_restart_once),
	        cmocka_unit_test(test_the_admin_listener_defaults_away_from_prometheus),
	};

	return cmocka_run_group_tests_name("config", tests, setup, teardown);
}
