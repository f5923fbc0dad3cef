/* test_replay.c: replay's --to URL parsing, its summary output and its
 * progress bar. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "buf.h"
#include "config.h"
#include "replay.h"

static void expect_url(const char *url, const char *base)
{
	char b[256];

	if (replay_parse_url(url, b, sizeof(b)) < 0) {
		fail_msg("\"%s\" was refused", url);
	}
	assert_string_equal(b, base);
}

static void expect_bad_url(const char *url)
{
	char b[256];

	if (replay_parse_url(url, b, sizeof(b)) == 0) {
		fail_msg("\"%s\" was accepted", url);
	}
}

static void test_replay_url_takes_http_and_https_with_port_and_prefix(void **state)
{
	expect_url("http://127.0.0.1:8080", "http://127.0.0.1:8080");
	expect_url("http://127.0.0.1:8080/", "http://127.0.0.1:8080");
	expect_url("HTTP://localhost", "HTTP://localhost");
	expect_url("http://[::1]:9000/idemhook", "http://[::1]:9000/idemhook");
	expect_url("http://example.test/a/b", "http://example.test/a/b");
	expect_url("https://127.0.0.1:8443", "https://127.0.0.1:8443");
	expect_url("https://staging.example.test/idemhook/", "https://staging.example.test/idemhook");
}

static void test_replay_url_refuses_malformed_urls(void **state)
{
	expect_bad_url("ftp://127.0.0.1:8443");
	expect_bad_url("127.0.0.1:8080");
	expect_bad_url("http://");
	expect_bad_url("https://");
	expect_bad_url("http://:8080");
	expect_bad_url("http://host:0");
	expect_bad_url("http://host:65536");
	expect_bad_url("http://host:80x");
	expect_bad_url("http://user@host");
	expect_bad_url("https://user:pw@host/");
	expect_bad_url("http://host/a?b=1");
	expect_bad_url("http://[::1:8080");
}

static void test_replay_summary_json_counts_and_reasons(void **state)
{
	struct replay_summary s;
	struct buf b;
	cJSON *j;

	memset(&s, 0, sizeof(s));
	s.rs_total = 5;
	s.rs_new = 2;
	s.rs_duplicate = 1;
	s.rs_rejected = 1;
	s.rs_failed = 1;
	snprintf(s.rs_rejected_reasons[0].rr_slug, sizeof(s.rs_rejected_reasons[0].rr_slug), "bad_signature");
	s.rs_rejected_reasons[0].rr_n = 1;
	s.rs_n_rejected_reasons = 1;
	snprintf(s.rs_failed_reasons[0].rr_slug, sizeof(s.rs_failed_reasons[0].rr_slug), "truncated");
	s.rs_failed_reasons[0].rr_n = 1;
	s.rs_n_failed_reasons = 1;
	buf_init(&b, 0);
	assert_int_equal(replay_summary_json(&s, 1, &b), 0);
	j = cJSON_Parse(b.buf_data);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "dry_run")));
	assert_int_equal(cJSON_GetObjectItem(j, "new")->valueint, 2);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "rejected_reasons"), "bad_signature")->valueint,
			 1);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "failed_reasons"), "truncated")->valueint, 1);
	cJSON_Delete(j);
	buf_finish(&b);
	assert_true(replay_summary_bad(&s));
}

static void test_replay_summary_text_names_each_reason(void **state)
{
	struct replay_summary s;
	struct buf b;

	memset(&s, 0, sizeof(s));
	s.rs_total = 3;
	s.rs_new = 3;
	buf_init(&b, 0);
	assert_int_equal(replay_summary_text(&s, 0, &b), 0);
	assert_non_null(strstr(b.buf_data, "new        3\n"));
	assert_non_null(strstr(b.buf_data, "rejected   0\n"));
	assert_false(replay_summary_bad(&s));
	buf_finish(&b);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void test_progress_total_counts_files_that_fail_while_listed(void **state)
{
	char dir[] = "/tmp/test_replay.XXXXXX";
	char path[128];
	char err_path[128];
	char text[4096];
	const char *paths[1];
	struct replay_options ro;
	struct replay_summary sum;
	struct config cf;
	const char *last;
	size_t n;
	FILE *f;
	int saved;
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/empty.cap", dir);
	write_text(path, "");
	snprintf(path, sizeof(path), "%s/garbage.cap", dir);
	write_text(path, "hello, world\n");
	snprintf(err_path, sizeof(err_path), "%s/stderr", dir);
	memset(&ro, 0, sizeof(ro));
	ro.ro_since_ms = INT64_MIN;
	ro.ro_until_ms = INT64_MAX;
	ro.ro_progress = REPLAY_PROGRESS_BAR;
	memset(&cf, 0, sizeof(cf));
	paths[0] = dir;

	/* the bar goes to stderr: catch it in a file */
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
	assert_int_equal(replay_run(NULL, &cf, &ro, paths, 1, &sum), 0);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);

	assert_int_equal(sum.rs_failed, 2);
	f = fopen(err_path, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	last = strrchr(text, '\r');
	assert_non_null(last);
	if (strstr(last, " 2/2 ") == NULL) {
		fail_msg("the last bar is \"%s\"", last + 1);
	}
	unlink(err_path);
	snprintf(path, sizeof(path), "%s/empty.cap", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/garbage.cap", dir);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replay_url_takes_http_and_https_with_port_and_prefix),
		cmocka_unit_test(test_replay_url_refuses_malformed_urls),
		cmocka_unit_test(test_replay_summary_json_counts_and_reasons),
		cmocka_unit_test(test_replay_summary_text_names_each_reason),
		cmocka_unit_test(test_progress_total_counts_files_that_fail_while_listed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
