/* test_capture.c: the capture file format, the atomic spool writer and the reader's errors. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "buf.h"
#include "capture.h"
#include "config.h"
#include "provider.h"

/* 2026-12-02T10:20:12.345Z */
#define T_MS 1796206812345LL

static const unsigned char binary_body[] = {'{', 0x00, 0x01, '\r', '\n', '\r', '\n', 0xff, 0xfe, '}', 0x80, '\n'};

static const struct http_header sample_headers[] = {
	{"Host", "127.0.0.1:8080"},
	{"Content-Type", "application/json; charset=utf-8"},
	{"Stripe-Signature", "t=1796206812,v1=abc"},
	{"X-Empty", ""},
};

static struct http_request sample_request(const void *body, size_t len)
{
	struct http_request r;

	memset(&r, 0, sizeof(r));
	r.hr_method = "POST";
	r.hr_url = "/hooks/stripe%2Dus?x=1";
	r.hr_path = "/hooks/stripe-us";
	r.hr_version = "HTTP/1.1";
	r.hr_headers = sample_headers;
	r.hr_n_headers = sizeof(sample_headers) / sizeof(sample_headers[0]);
	r.hr_body = body;
	r.hr_body_len = len;
	r.hr_peer = "192.0.2.7";
	r.hr_client = "198.51.100.9";
	r.hr_received_ms = T_MS;
	return r;
}

static char *format_sample(const void *body, size_t len, size_t *ret_len)
{
	struct http_request r = sample_request(body, len);
	struct buf b;
	char *text;

	buf_init(&b, 0);
	assert_int_equal(capture_format(&b, "stripe-us", &r, 0), 0);
	text = buf_take(&b, ret_len);
	assert_non_null(text);
	return text;
}

/* Parses text and expects failure with err containing want. */
static void expect_parse_error(const void *text, size_t len, const char *want)
{
	struct capture_record rec;
	char err[256] = "";

	memset(&rec, 0, sizeof(rec));
	assert_int_equal(capture_parse(text, len, &rec, err, sizeof(err)), -1);
	if (strstr(err, want) == NULL) {
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
	}
	assert_null(rec.cr_data);
}

static void test_capture_round_trip_keeps_every_byte_of_a_binary_body(void **state)
{
	struct capture_record rec;
	char err[256] = "";
	size_t len;
	char *text = format_sample(binary_body, sizeof(binary_body), &len);
	size_t i;

	assert_int_equal(capture_parse(text, len, &rec, err, sizeof(err)), 0);
	assert_string_equal(rec.cr_provider, "stripe-us");
	assert_int_equal(rec.cr_received_ms, T_MS);
	assert_int_equal(rec.cr_rejected, 0);
	assert_string_equal(rec.cr_req.hr_method, "POST");
	assert_string_equal(rec.cr_req.hr_url, "/hooks/stripe%2Dus?x=1");
	assert_string_equal(rec.cr_req.hr_path, "/hooks/stripe-us");
	assert_string_equal(rec.cr_req.hr_version, "HTTP/1.1");
	assert_string_equal(rec.cr_req.hr_peer, "192.0.2.7");
	assert_string_equal(rec.cr_req.hr_client, "198.51.100.9");
	assert_int_equal(rec.cr_req.hr_received_ms, T_MS);
	assert_int_equal(rec.cr_req.hr_n_headers, sizeof(sample_headers) / sizeof(sample_headers[0]));
	for (i = 0; i < rec.cr_req.hr_n_headers; i++) {
		assert_string_equal(rec.cr_req.hr_headers[i].hh_name, sample_headers[i].hh_name);
		assert_string_equal(rec.cr_req.hr_headers[i].hh_value, sample_headers[i].hh_value);
	}
	assert_int_equal(rec.cr_req.hr_body_len, sizeof(binary_body));
	assert_memory_equal(rec.cr_req.hr_body, binary_body, sizeof(binary_body));
	assert_int_equal(rec.cr_req.hr_body[rec.cr_req.hr_body_len], '\0');
	capture_record_finish(&rec);
	free(text);
}

static void test_capture_format_is_readable_text_with_a_metadata_block(void **state)
{
	size_t len;
	char *text = format_sample("{}", 2, &len);

	assert_non_null(strstr(text, "idemhook-capture 1\n"));
	assert_non_null(strstr(text, "received-at: 2026-12-02T10:20:12.345Z\n"));
	assert_non_null(strstr(text, "received-ms: 1796206812345\n"));
	assert_non_null(strstr(text, "provider: stripe-us\n"));
	assert_non_null(strstr(text, "body-length: 2\n"));
	assert_non_null(strstr(text, "\n\nPOST /hooks/stripe%2Dus?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
	assert_int_equal(len - (size_t)(strstr(text, "\r\n\r\n") - text), 6);
	free(text);
}

static void test_capture_round_trip_of_an_empty_body(void **state)
{
	struct capture_record rec;
	char err[256] = "";
	size_t len;
	char *text = format_sample(NULL, 0, &len);

	assert_int_equal(capture_parse(text, len, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.cr_req.hr_body_len, 0);
	capture_record_finish(&rec);
	free(text);
}

static void test_capture_format_refuses_a_header_with_a_line_break(void **state)
{
	static const struct http_header bad[] = {{"X-Bad", "a\r\nInjected: 1"}};
	struct http_request r = sample_request("{}", 2);
	struct buf b;

	r.hr_headers = bad;
	r.hr_n_headers = 1;
	buf_init(&b, 0);
	assert_int_equal(capture_format(&b, "stripe", &r, 0), -1);
	buf_finish(&b);
}

static void test_capture_reader_accepts_a_hand_written_file(void **state)
{
	/* LF line endings, received-at only, no checksum, one trailing newline. */
	static const char text[] = "idemhook-capture 1\n"
				   "received-at: 2026-12-02T11:20:12+01:00\n"
				   "provider: stripe\n"
				   "body-length: 11\n"
				   "x-future-key: ignored\n"
				   "\n"
				   "POST /hooks/stripe HTTP/1.1\n"
				   "Content-Type:application/json  \n"
				   "\n"
				   "{\"id\":\"x\"}\n"
				   "\n";
	struct capture_record rec;
	char err[256] = "";

	assert_int_equal(capture_parse(text, sizeof(text) - 1, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.cr_received_ms, 1796206812000LL);
	assert_string_equal(rec.cr_req.hr_headers[0].hh_value, "application/json");
	assert_int_equal(rec.cr_req.hr_body_len, 11);
	assert_memory_equal(rec.cr_req.hr_body, "{\"id\":\"x\"}\n", 11);
	assert_string_equal(rec.cr_req.hr_peer, "-");
	assert_int_equal(rec.cr_rejected, -1);
	capture_record_finish(&rec);
}

static void test_capture_reader_rejects_an_empty_file(void **state)
{
	expect_parse_error("", 0, "empty file");
}

static void test_capture_reader_rejects_a_file_that_is_not_a_capture(void **state)
{
	static const char text[] = "POST /hooks/stripe HTTP/1.1\r\n\r\n{}";

	expect_parse_error(text, sizeof(text) - 1, "not an idemhook capture");
}

static void test_capture_reader_rejects_a_newer_format_version(void **state)
{
	static const char text[] = "idemhook-capture 2\nprovider: x\n\n";

	expect_parse_error(text, sizeof(text) - 1, "unsupported capture format version");
}

static void test_capture_reader_rejects_truncation_at_every_point(void **state)
{
	size_t len;
	char *text = format_sample(binary_body, sizeof(binary_body), &len);
	size_t cut;

	/* Every proper prefix fails, with "truncated" or "empty", never a crash. */
	for (cut = 0; cut < len; cut++) {
		struct capture_record rec;
		char err[256] = "";
		int rc = capture_parse(text, cut, &rec, err, sizeof(err));

		if (rc == 0) {
			fail_msg("a capture cut at %zu of %zu bytes was accepted", cut, len);
		}
		if (strstr(err, "truncated") == NULL && strstr(err, "empty") == NULL) {
			fail_msg("cut at %zu: error \"%s\" does not say truncated", cut, err);
		}
	}
	expect_parse_error(text, len - 3, "the body has 9 of the 12 bytes");
	free(text);
}

static void test_capture_reader_rejects_a_body_that_does_not_match_its_checksum(void **state)
{
	size_t len;
	char *text = format_sample("{\"amount\":1999}", 15, &len);

	text[len - 3] = '8';
	expect_parse_error(text, len, "does not match body-sha256");
	free(text);
}

static void test_capture_reader_rejects_bytes_after_the_body(void **state)
{
	size_t len;
	char *text = format_sample("{}", 2, &len);
	char *longer = malloc(len + 5);

	assert_non_null(longer);
	memcpy(longer, text, len);
	memcpy(longer + len, "extra", 5);
	expect_parse_error(longer, len + 5, "5 bytes follow");
	free(longer);
	free(text);
}

static void test_capture_reader_rejects_corrupted_metadata(void **state)
{
	static const char no_length[] = "idemhook-capture 1\nreceived-ms: 1\nprovider: s\n\nPOST / HTTP/1.1\r\n\r\n";
	static const char bad_length[] =
		"idemhook-capture 1\nreceived-ms: 1\nprovider: s\nbody-length: 1x\n\nPOST / HTTP/1.1\r\n\r\nx";
	static const char no_time[] = "idemhook-capture 1\nprovider: s\nbody-length: 0\n\nPOST / HTTP/1.1\r\n\r\n";
	static const char no_provider[] = "idemhook-capture 1\nreceived-ms: 1\nbody-length: 0\n\nPOST / HTTP/1.1\r\n\r\n";
	static const char bad_line[] = "idemhook-capture 1\nreceived-ms 1\n\n";
	static const char bad_request[] =
		"idemhook-capture 1\nreceived-ms: 1\nprovider: s\nbody-length: 0\n\nPOST /\r\n\r\n";
	static const char bad_header[] =
		"idemhook-capture 1\nreceived-ms: 1\nprovider: s\nbody-length: 0\n\nPOST / HTTP/1.1\r\nNoColon\r\n\r\n";
	static const char huge[] =
		"idemhook-capture 1\nreceived-ms: 1\nprovider: s\nbody-length: 99999999999\n\nPOST / HTTP/1.1\r\n\r\n";
	static const char far[] = "idemhook-capture 1\nreceived-ms: 179620560012600120\nprovider: s\n"
				  "body-length: 0\n\nPOST / HTTP/1.1\r\n\r\n";
	static const char old[] = "idemhook-capture 1\nreceived-at: 1013-12-02T10:00:00.120Z\nprovider: s\n"
				  "body-length: 0\n\nPOST / HTTP/1.1\r\n\r\n";

	expect_parse_error(no_length, sizeof(no_length) - 1, "body-length is missing");
	expect_parse_error(bad_length, sizeof(bad_length) - 1, "body-length is not a number");
	expect_parse_error(no_time, sizeof(no_time) - 1, "neither received-ms nor received-at");
	expect_parse_error(no_provider, sizeof(no_provider) - 1, "provider is missing");
	expect_parse_error(bad_line, sizeof(bad_line) - 1, "no \"key: value\"");
	expect_parse_error(bad_request, sizeof(bad_request) - 1, "request line");
	expect_parse_error(bad_header, sizeof(bad_header) - 1, "header line 1");
	expect_parse_error(huge, sizeof(huge) - 1, "over the limit");
	/* Found by fuzzing: times that could be read but not written again. */
	expect_parse_error(far, sizeof(far) - 1, "received-ms");
	expect_parse_error(old, sizeof(old) - 1, "received-at");
}

static void test_capture_parse_time_reads_rfc3339_and_dates(void **state)
{
	int64_t ms = 0;

	assert_int_equal(capture_parse_time("2026-12-02T10:20:12.345Z", &ms), 0);
	assert_int_equal(ms, T_MS);
	assert_int_equal(capture_parse_time("2026-12-02T10:20:12.3456Z", &ms), 0);
	assert_int_equal(ms, T_MS);
	assert_int_equal(capture_parse_time("2026-12-02T05:20:12.345-05:00", &ms), 0);
	assert_int_equal(ms, T_MS);
	assert_int_equal(capture_parse_time("2026-12-02", &ms), 0);
	assert_int_equal(ms, 1796169600000LL);
	assert_int_equal(capture_parse_time("2026-12-02T10:20", &ms), -1);
	assert_int_equal(capture_parse_time("yesterday", &ms), -1);
	assert_int_equal(capture_parse_time("2026-13-02", &ms), -1);
	assert_int_equal(capture_parse_time("2026-12-02T10:20:12Zjunk", &ms), -1);
	/* received-ms is never negative: a capture read back must write again. */
	assert_int_equal(capture_parse_time("1013-12-02T10:00:00.120Z", &ms), -1);
	assert_int_equal(capture_parse_time("1970-01-01T00:30:00+01:00", &ms), -1);
	assert_int_equal(capture_parse_time("1970-01-01T00:00:00Z", &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(capture_parse_time("9999-12-31T23:59:59.999Z", &ms), 0);
	assert_int_equal(ms, CAPTURE_TIME_MAX_MS);
	assert_int_equal(capture_parse_time("9999-12-31T23:59:59-00:01", &ms), -1);
}

static void test_capture_rfc3339_prints_milliseconds_in_utc(void **state)
{
	char out[32];

	capture_rfc3339(T_MS, out);
	assert_string_equal(out, "2026-12-02T10:20:12.345Z");
	capture_rfc3339(0, out);
	assert_string_equal(out, "1970-01-01T00:00:00.000Z");
}

/* ---- the spool on disk ---- */

struct spool {
	char sp_dir[PATH_MAX];
	char sp_ini[PATH_MAX];
	struct config *sp_cf;
};

static void spool_setup(struct spool *sp, const char *mode, const char *retention)
{
	char tmpl[] = "/tmp/idemhook-test-capture-XXXXXX";
	char *dir = mkdtemp(tmpl);
	FILE *f;

	assert_non_null(dir);
	snprintf(sp->sp_dir, sizeof(sp->sp_dir), "%s", dir);
	snprintf(sp->sp_ini, sizeof(sp->sp_ini), "%s/idemhook.ini", dir);
	f = fopen(sp->sp_ini, "w");
	assert_non_null(f);
	fprintf(f, "[store]\npath = %s/idemhook.db\n\n[capture]\nmode = %s\ndir = %s/spool\nretention = %s\n", dir,
		mode, dir, retention);
	fclose(f);
	sp->sp_cf = provider_config_load(sp->sp_ini);
	assert_non_null(sp->sp_cf);
}

static void remove_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;

	if (d == NULL) {
		unlink(path);
		return;
	}
	for (de = readdir(d); de != NULL; de = readdir(d)) {
		char child[PATH_MAX];

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
			continue;
		}
		snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
		remove_tree(child);
	}
	closedir(d);
	rmdir(path);
}

static void spool_teardown(struct spool *sp)
{
	config_destroy(sp->sp_cf);
	remove_tree(sp->sp_dir);
}

/* Lists the day directory's entries: counts files, remembers the last name. */
static size_t list_day(const char *day, char *ret_name, size_t name_size, size_t *ret_hidden)
{
	DIR *d = opendir(day);
	struct dirent *de;
	size_t n = 0;

	*ret_hidden = 0;
	if (d == NULL) {
		return 0;
	}
	for (de = readdir(d); de != NULL; de = readdir(d)) {
		if (de->d_name[0] == '.') {
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
				(*ret_hidden)++;
			}
			continue;
		}
		snprintf(ret_name, name_size, "%s", de->d_name);
		n++;
	}
	closedir(d);
	return n;
}

static void test_capture_writes_one_0600_file_per_request_in_a_day_directory(void **state)
{
	struct spool sp;
	struct capture *cap;
	struct http_request r = sample_request(binary_body, sizeof(binary_body));
	struct capture_record rec;
	struct capture_meta meta;
	struct stat st;
	char day[PATH_MAX + 32];
	char name[256] = "";
	char path[2 * PATH_MAX];
	char err[256] = "";
	size_t hidden;
	int off = -1;

	spool_setup(&sp, "all", "30d");
	cap = capture_create(sp.sp_cf, &off);
	assert_non_null(cap);
	assert_int_equal(off, 0);
	assert_int_equal(capture_request(cap, "stripe-us", &r, 0), 0);
	assert_int_equal(capture_request(cap, "stripe-us", &r, 1), 0);

	snprintf(day, sizeof(day), "%s/spool/2026-12-02", sp.sp_dir);
	assert_int_equal(list_day(day, name, sizeof(name), &hidden), 2);
	assert_int_equal(hidden, 0); /* no temporary file left behind */
	snprintf(path, sizeof(path), "%s/%s", day, name);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_non_null(strstr(name, CAPTURE_SUFFIX));

	assert_int_equal(capture_read(path, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.cr_req.hr_body_len, sizeof(binary_body));
	assert_memory_equal(rec.cr_req.hr_body, binary_body, sizeof(binary_body));
	assert_string_equal(rec.cr_provider, "stripe-us");
	capture_record_finish(&rec);

	assert_int_equal(capture_read_meta(path, &meta, err, sizeof(err)), 0);
	assert_string_equal(meta.cm_provider, "stripe-us");
	assert_int_equal(meta.cm_received_ms, T_MS);

	capture_destroy(cap);
	spool_teardown(&sp);
}

static void test_capture_in_rejected_mode_keeps_only_rejected_requests(void **state)
{
	struct spool sp;
	struct capture *cap;
	struct http_request r = sample_request("{}", 2);
	char day[PATH_MAX + 32];
	char name[256] = "";
	size_t hidden;
	int off = -1;

	spool_setup(&sp, "rejected", "30d");
	cap = capture_create(sp.sp_cf, &off);
	assert_non_null(cap);
	assert_int_equal(capture_request(cap, "stripe", &r, 0), 0);
	assert_int_equal(capture_request(cap, "stripe", &r, 1), 0);
	snprintf(day, sizeof(day), "%s/spool/2026-12-02", sp.sp_dir);
	assert_int_equal(list_day(day, name, sizeof(name), &hidden), 1);
	capture_destroy(cap);
	spool_teardown(&sp);
}

static void test_capture_off_creates_nothing(void **state)
{
	struct spool sp;
	int off = 0;

	spool_setup(&sp, "off", "30d");
	assert_null(capture_create(sp.sp_cf, &off));
	assert_int_equal(off, 1);
	spool_teardown(&sp);
}

static void test_capture_refuses_an_unknown_mode(void **state)
{
	struct spool sp;
	int off = 1;

	spool_setup(&sp, "sometimes", "30d");
	assert_null(capture_create(sp.sp_cf, &off));
	assert_int_equal(off, 0);
	spool_teardown(&sp);
}

static void test_capture_failure_to_write_is_reported_not_fatal(void **state)
{
	struct spool sp;
	struct capture *cap;
	struct http_request r = sample_request("{}", 2);
	char spool[PATH_MAX + 16];
	int off = -1;

	spool_setup(&sp, "all", "30d");
	cap = capture_create(sp.sp_cf, &off);
	assert_non_null(cap);
	snprintf(spool, sizeof(spool), "%s/spool", sp.sp_dir);
	/* A plain file where the spool directory was makes the write fail. */
	remove_tree(spool);
	assert_int_equal(close(open(spool, O_WRONLY | O_CREAT, 0600)), 0);
	assert_int_equal(capture_request(cap, "stripe", &r, 0), -1);
	capture_destroy(cap);
	spool_teardown(&sp);
}

static void test_capture_expire_deletes_whole_days_older_than_retention(void **state)
{
	struct spool sp;
	struct capture *cap;
	struct http_request r = sample_request("{}", 2);
	char day[PATH_MAX + 32];
	struct stat st;
	int64_t n = -1;
	int off = -1;

	spool_setup(&sp, "all", "2d");
	cap = capture_create(sp.sp_cf, &off);
	assert_non_null(cap);
	assert_int_equal(capture_request(cap, "stripe", &r, 0), 0);
	r.hr_received_ms = T_MS + 3 * 86400000LL;
	assert_int_equal(capture_request(cap, "stripe", &r, 0), 0);

	/* Two days after the end of 2026-12-02: not yet. */
	assert_int_equal(capture_expire(sp.sp_cf, 1796169600000LL + 3 * 86400000LL - 1, 0, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(capture_expire(sp.sp_cf, 1796169600000LL + 3 * 86400000LL + 1, 1, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(capture_expire(sp.sp_cf, 1796169600000LL + 3 * 86400000LL + 1, 0, &n), 0);
	assert_int_equal(n, 1);
	snprintf(day, sizeof(day), "%s/spool/2026-12-02", sp.sp_dir);
	assert_int_equal(stat(day, &st), -1);
	snprintf(day, sizeof(day), "%s/spool/2026-12-05", sp.sp_dir);
	assert_int_equal(stat(day, &st), 0);
	capture_destroy(cap);
	spool_teardown(&sp);
}

static void test_capture_read_file_refuses_a_file_over_its_cap(void **state)
{
	char path[] = "/tmp/idemhook-test-capture-file-XXXXXX";
	char err[256] = "";
	char *data = NULL;
	size_t len = 0;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789", 10), 10);
	close(fd);
	assert_int_equal(capture_read_file(path, 10, &data, &len, err, sizeof(err)), 0);
	assert_int_equal(len, 10);
	assert_string_equal(data, "0123456789");
	free(data);
	assert_int_equal(capture_read_file(path, 9, &data, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "larger than 9 bytes"));
	unlink(path);
}

static void test_capture_samples_shipped_in_contrib_parse(void **state)
{
	static const char *const names[] = {
		"100000.120-stripe-demo-000001.cap",
		"100031.200-stripe-demo-000002.cap",
		"100100.250-stripe-demo-000003.cap",
	};
	const char *root = getenv("IDEMHOOK_SOURCE_ROOT");
	size_t i;

	if (root == NULL) {
		skip();
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct capture_record rec;
		char path[PATH_MAX];
		char err[256] = "";

		snprintf(path, sizeof(path), "%s/contrib/captures/2026-12-02/%s", root, names[i]);
		if (capture_read(path, &rec, err, sizeof(err)) < 0) {
			fail_msg("%s: %s", path, err);
		}
		assert_string_equal(rec.cr_provider, "stripe");
		assert_non_null(http_header_get(&rec.cr_req, "Stripe-Signature"));
		capture_record_finish(&rec);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_round_trip_keeps_every_byte_of_a_binary_body),
		cmocka_unit_test(test_capture_format_is_readable_text_with_a_metadata_block),
		cmocka_unit_test(test_capture_round_trip_of_an_empty_body),
		cmocka_unit_test(test_capture_format_refuses_a_header_with_a_line_break),
		cmocka_unit_test(test_capture_reader_accepts_a_hand_written_file),
		cmocka_unit_test(test_capture_reader_rejects_an_empty_file),
		cmocka_unit_test(test_capture_reader_rejects_a_file_that_is_not_a_capture),
		cmocka_unit_test(test_capture_reader_rejects_a_newer_format_version),
		cmocka_unit_test(test_capture_reader_rejects_truncation_at_every_point),
		cmocka_unit_test(test_capture_reader_rejects_a_body_that_does_not_match_its_checksum),
		cmocka_unit_test(test_capture_reader_rejects_bytes_after_the_body),
		cmocka_unit_test(test_capture_reader_rejects_corrupted_metadata),
		cmocka_unit_test(test_capture_parse_time_reads_rfc3339_and_dates),
		cmocka_unit_test(test_capture_rfc3339_prints_milliseconds_in_utc),
		cmocka_unit_test(test_capture_writes_one_0600_file_per_request_in_a_day_directory),
		cmocka_unit_test(test_capture_in_rejected_mode_keeps_only_rejected_requests),
		cmocka_unit_test(test_capture_off_creates_nothing),
		cmocka_unit_test(test_capture_refuses_an_unknown_mode),
		cmocka_unit_test(test_capture_failure_to_write_is_reported_not_fatal),
		cmocka_unit_test(test_capture_expire_deletes_whole_days_older_than_retention),
		cmocka_unit_test(test_capture_read_file_refuses_a_file_over_its_cap),
		cmocka_unit_test(test_capture_samples_shipped_in_contrib_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
