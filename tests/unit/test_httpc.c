/* test_httpc.c: the one HTTP client (libcurl) against real loopback servers, plain and TLS. */
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "crypto.h"
#include "harness.h"
#include "http.h"
#include "httpc.h"

#define BIG_BODY 4096 /* bytes answered on /big */

/* /echo answers 201 with what it saw; /big answers BIG_BODY bytes. */
static void test_route(void *arg, const struct http_request *req, struct reply *ret)
{
	const char *x = http_header_get(req, "X-Test");
	struct buf b;
	char *s;
	size_t len;

	(void)arg;
	buf_init(&b, 0);
	if (strcmp(req->hr_path, "/big") == 0) {
		char *big = malloc(BIG_BODY);

		assert_non_null(big);
		memset(big, 'b', BIG_BODY);
		reply_set(ret, 200, "text/plain", big, BIG_BODY);
		free(big);
		return;
	}
	buf_printf(&b, "%s %s x=%s type=%s len=%zu\n", req->hr_method, req->hr_url,
	           x != NULL ? x : "-",
	           http_header_get(req, "Content-Type") != NULL
	                   ? http_header_get(req, "Content-Type")
	                   : "-",
	           req->hr_body_len);
	buf_append(&b, req->hr_body, req->hr_body_len);
	s = buf_take(&b, &len);
	reply_set_take(ret, 201, "text/plain", s, len);
	reply_add_header(ret, "X-Echo", "yes");
	buf_finish(&b);
}

static struct http_server *start_server(void)
{
	struct http_options ho;
	struct http_server *srv;

	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 2;
	ho.ho_conn_timeout_s = 10;
	ho.ho_body_max = 64 * 1024;
	ho.ho_name = "test";
	srv = http_create(&ho, test_route, NULL);
	assert_non_null(srv);
	return srv;
}

/* A loopback TCP socket bound to an ephemeral port; listening when asked. */
static int bound_socket(int listening, unsigned *ret_port)
{
	struct sockaddr_in sa;
	socklen_t slen = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (listening) {
		assert_int_equal(listen(fd, 4), 0);
	}
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &slen), 0);
	*ret_port = ntohs(sa.sin_port);
	return fd;
}

static char url_buf[8][256];
static int url_next;

/* "http://127.0.0.1:PORT/TARGET" in one of a few rotating buffers. */
static const char *url_of(const char *scheme, unsigned port, const char *target)
{
	char *u = url_buf[url_next++ % 8];

	snprintf(u, sizeof(url_buf[0]), "%s://127.0.0.1:%u%s", scheme, port, target);
	return u;
}

static void request_init(struct httpc_request *req, unsigned port, const char *target)
{
	memset(req, 0, sizeof(*req));
	req->hcq_method = "GET";
	req->hcq_url = url_of("http", port, target);
	req->hcq_response_max = 64 * 1024;
	req->hcq_timeout_ms = 5000;
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct buf b;
	char chunk[4096];
	size_t n;

	assert_non_null(f);
	buf_init(&b, 0);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		assert_int_equal(buf_append(&b, chunk, n), 0);
	}
	fclose(f);
	return buf_take(&b, NULL);
}

/* ---- a canned server: one connection, fixed bytes, optionally slowly ---- */

struct canned {
	int cn_fd; /* listening */
	const char *cn_answer;
	unsigned cn_gap_ms; /* between bytes; 0 sends all at once */
	pthread_t cn_thread;
};

static void *canned_main(void *arg)
{
	struct canned *c = arg;
	char in[4096];
	size_t len = strlen(c->cn_answer);
	size_t i;
	int fd = accept(c->cn_fd, NULL, NULL);

	if (fd < 0) {
		return NULL;
	}
	/* The request is small: one read holds its head. */
	if (recv(fd, in, sizeof(in), 0) <= 0) {
		goto out;
	}
	if (c->cn_gap_ms == 0) {
		send(fd, c->cn_answer, len, MSG_NOSIGNAL);
		goto out;
	}
	for (i = 0; i < len; i++) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)c->cn_gap_ms * 1000000L};

		if (send(fd, c->cn_answer + i, 1, MSG_NOSIGNAL) != 1) {
			break;
		}
		nanosleep(&ts, NULL);
	}
out:
	close(fd);
	return NULL;
}

static unsigned canned_start(struct canned *c, const char *answer, unsigned gap_ms)
{
	unsigned port;

	c->cn_fd = bound_socket(1, &port);
	c->cn_answer = answer;
	c->cn_gap_ms = gap_ms;
	assert_int_equal(pthread_create(&c->cn_thread, NULL, canned_main, c), 0);
	return port;
}

static void canned_stop(struct canned *c)
{
	pthread_join(c->cn_thread, NULL);
	close(c->cn_fd);
}

/* ---- cases ---- */

static void test_post_round_trip_carries_body_and_headers(void **state)
{
	struct http_server *srv = start_server();
	const char body[] = "{\"a\":1}\r\n\x01\xff";
	struct httpc_headers hdrs;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";

	(void)state;
	httpc_headers_init(&hdrs);
	httpc_headers_add(&hdrs, "X-Test", "hello there");
	httpc_headers_add(&hdrs, "Content-Type", "application/json");
	/* Framing is the client's own: a caller's Content-Length and Host are left out. */
	httpc_headers_add(&hdrs, "Content-Length", "999");
	httpc_headers_add(&hdrs, "Host", "shop.example.com");
	assert_int_equal(hdrs.hch_overflow, 0);
	request_init(&req, http_port(srv), "/echo?q=1");
	req.hcq_method = "POST";
	req.hcq_headers = &hdrs;
	req.hcq_body = body;
	req.hcq_body_len = sizeof(body) - 1;
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	assert_int_equal(resp.hcr_status, 201);
	assert_int_equal(resp.hcr_truncated, 0);
	assert_string_equal(httpc_response_header(&resp, "x-echo"), "yes");
	assert_null(httpc_response_header(&resp, "X-Missing"));
	assert_non_null(strstr(resp.hcr_body,
	                       "POST /echo?q=1 x=hello there type=application/json len=11\n"));
	assert_memory_equal(resp.hcr_body + resp.hcr_body_len - (sizeof(body) - 1), body,
	                    sizeof(body) - 1);
	httpc_response_finish(&resp);
	assert_null(resp.hcr_body);
	httpc_response_finish(&resp);
	httpc_headers_finish(&hdrs);
	http_destroy(srv);
}

static void test_a_body_without_content_type_gets_none_and_empty_values_are_sent(void **state)
{
	struct http_server *srv = start_server();
	struct httpc_headers hdrs;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";

	(void)state;
	httpc_headers_init(&hdrs);
	httpc_headers_add(&hdrs, "X-Test", "");
	request_init(&req, http_port(srv), "/echo");
	req.hcq_method = "PUT";
	req.hcq_headers = &hdrs;
	req.hcq_body = "x=1";
	req.hcq_body_len = 3;
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	/* No form Content-Type of libcurl's own; the empty field arrives empty. */
	assert_non_null(strstr(resp.hcr_body, "PUT /echo x= type=- len=3\n"));
	httpc_response_finish(&resp);
	httpc_headers_finish(&hdrs);
	http_destroy(srv);
}

static void test_answer_larger_than_the_cap_is_cut_and_marked(void **state)
{
	struct http_server *srv = start_server();
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";

	(void)state;
	request_init(&req, http_port(srv), "/big");
	req.hcq_response_max = BIG_BODY - 1;
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	assert_int_equal(resp.hcr_status, 200);
	assert_int_equal(resp.hcr_truncated, 1);
	assert_int_equal(resp.hcr_body_len, BIG_BODY - 1);
	httpc_response_finish(&resp);

	/* At the cap exactly, it is read whole. */
	req.hcq_response_max = BIG_BODY;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), 0);
	assert_int_equal(resp.hcr_status, 200);
	assert_int_equal(resp.hcr_truncated, 0);
	assert_int_equal(resp.hcr_body_len, BIG_BODY);
	httpc_response_finish(&resp);
	http_destroy(srv);
}

static void test_answer_without_length_over_the_cap_is_cut(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(&c,
	                             "HTTP/1.1 503 Busy\r\nConnection: close\r\n\r\n"
	                             "0123456789abcdefghijklmnopqrstuvwxyz",
	                             0);

	(void)state;
	request_init(&req, port, "/");
	req.hcq_response_max = 10;
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	assert_int_equal(resp.hcr_status, 503);
	assert_int_equal(resp.hcr_truncated, 1);
	assert_string_equal(resp.hcr_body, "0123456789");
	httpc_response_finish(&resp);
	canned_stop(&c);
}

static void test_chunked_answer_is_decoded(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(&c,
	                             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	                             "Idempotent-Replayed: true\r\n\r\n"
	                             "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n",
	                             0);

	(void)state;
	request_init(&req, port, "/");
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	assert_int_equal(resp.hcr_status, 200);
	assert_int_equal(resp.hcr_body_len, 12);
	assert_string_equal(resp.hcr_body, "hello, world");
	assert_string_equal(httpc_response_header(&resp, "idempotent-replayed"), "true");
	httpc_response_finish(&resp);
	canned_stop(&c);
}

static void test_only_the_final_answer_after_a_1xx_counts(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(&c,
	                             "HTTP/1.1 100 Continue\r\nX-Early: 1\r\n\r\n"
	                             "HTTP/1.1 429 Slow down\r\nRetry-After: 7\r\n"
	                             "Content-Length: 2\r\n\r\nno",
	                             0);

	(void)state;
	request_init(&req, port, "/");
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	assert_int_equal(resp.hcr_status, 429);
	assert_null(httpc_response_header(&resp, "X-Early"));
	assert_string_equal(httpc_response_header(&resp, "retry-after"), "7");
	assert_string_equal(resp.hcr_body, "no");
	httpc_response_finish(&resp);
	canned_stop(&c);
}

static void test_redirects_are_not_followed(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(&c,
	                             "HTTP/1.1 302 Found\r\nLocation: file:///etc/passwd\r\n"
	                             "Content-Length: 0\r\n\r\n",
	                             0);

	(void)state;
	request_init(&req, port, "/");
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), 0);
	assert_int_equal(resp.hcr_status, 302);
	assert_string_equal(httpc_response_header(&resp, "Location"), "file:///etc/passwd");
	httpc_response_finish(&resp);
	canned_stop(&c);
}

static void test_answer_that_is_not_http_is_refused(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(&c, "SSH-2.0-OpenSSH_9.2\r\n\r\n", 0);

	(void)state;
	request_init(&req, port, "/");
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	assert_int_equal(resp.hcr_status, 0);
	assert_null(resp.hcr_body);
	canned_stop(&c);
}

/* An https:// URL on a port that answers the ClientHello in plain HTTP
 * is told apart by the status line that came where a TLS record belongs,
 * not by the TLS library's wording: a port that answers with another
 * protocol's greeting (which OpenSSL words alike, "wrong version number")
 * is not taken for a plain HTTP port. */
static void test_an_https_url_on_a_plain_http_port_is_told_by_its_status_line(void **state)
{
	static const struct {
		const char *answer;
		enum httpc_failure failure;
	} cases[] = {
	        {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	         HTTPC_FAILURE_TLS_PLAIN},
	        {"HTTP/1.0 400 Bad request\r\n\r\n", HTTPC_FAILURE_TLS_PLAIN},
	        {"220 mail.example ESMTP ready\r\n", HTTPC_FAILURE_OTHER},
	        {"SSH-2.0-OpenSSH_9.2\r\n", HTTPC_FAILURE_OTHER},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct canned c;
		struct httpc_request req;
		struct httpc_response resp;
		char err[HTTPC_ERR_MAX] = "";
		unsigned port = canned_start(&c, cases[i].answer, 0);

		request_init(&req, port, "/");
		req.hcq_url = url_of("https", port, "/");
		assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
		assert_int_equal(resp.hcr_status, 0);
		if (resp.hcr_failure != cases[i].failure) {
			fail_msg("answer %zu: failure %d, not %d (%s)", i, (int)resp.hcr_failure,
			         (int)cases[i].failure, err);
		}
		canned_stop(&c);
	}
}

/* A server that takes the ClientHello and closes without a byte back (as
 * libmicrohttpd does on a plain port for some ClientHellos): no answer,
 * retried as any (a close says nothing for sure), but the error says what
 * it may mean for an https:// URL. */
static void test_a_close_during_the_tls_handshake_hints_at_a_plain_port(void **state)
{
	static const char hint[] = "the server closed the connection during the TLS handshake; "
	                           "if this port speaks plain HTTP, use http:// (";
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(&c, "", 0);

	(void)state;
	request_init(&req, port, "/");
	req.hcq_url = url_of("https", port, "/");
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_int_equal(resp.hcr_status, 0);
	assert_int_equal(resp.hcr_failure, HTTPC_FAILURE_OTHER);
	if (strncmp(err, hint, strlen(hint)) != 0) {
		fail_msg("error: %s", err);
	}
	canned_stop(&c);

	/* Over plain http:// the same close says nothing about TLS. */
	port = canned_start(&c, "", 0);
	request_init(&req, port, "/");
	err[0] = '\0';
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_int_equal(resp.hcr_failure, HTTPC_FAILURE_OTHER);
	assert_null(strstr(err, "TLS"));
	canned_stop(&c);
}

/* A CA file that is missing or holds no PEM certificate is its own
 * failure, whose error names the file: the peer is not what is wrong. */
static void test_an_unusable_ca_file_is_named_not_taken_for_an_untrusted_peer(void **state)
{
	char dir[64];
	char path[2][128];
	char want[320];
	FILE *f;
	size_t i;

	(void)state;
	assert_int_equal(hn_mkdtemp(dir, sizeof(dir), "idemhook-httpc"), 0);
	snprintf(path[0], sizeof(path[0]), "%s/missing.pem", dir);
	snprintf(path[1], sizeof(path[1]), "%s/not-pem.pem", dir);
	f = fopen(path[1], "w");
	assert_non_null(f);
	fputs("this is not a certificate\n", f);
	fclose(f);
	for (i = 0; i < 2; i++) {
		struct canned c;
		struct httpc_request req;
		struct httpc_response resp;
		char err[HTTPC_ERR_MAX] = "";
		unsigned port = canned_start(&c, "", 0);

		request_init(&req, port, "/");
		req.hcq_url = url_of("https", port, "/");
		req.hcq_ca_file = path[i];
		assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
		assert_int_equal(resp.hcr_status, 0);
		if (resp.hcr_failure != HTTPC_FAILURE_TLS_CA_FILE) {
			fail_msg("%s: failure %d (%s)", path[i], (int)resp.hcr_failure, err);
		}
		snprintf(want, sizeof(want), "the CA file %s cannot be used: ", path[i]);
		if (strncmp(err, want, strlen(want)) != 0) {
			fail_msg("error: %s", err);
		}
		/* the path once: libcurl's own words name it too */
		if (strstr(err + strlen(want), path[i]) != NULL) {
			fail_msg("the path said twice: %s", err);
		}
		canned_stop(&c);
	}
	unlink(path[1]);
	rmdir(dir);
}

/* 1 when s is well-formed UTF-8 to its end. */
static int t_utf8_whole(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;

	while (*u != '\0') {
		size_t n = *u < 0x80 ? 1 : *u >= 0xF0 ? 4 : *u >= 0xE0 ? 3 : *u >= 0xC0 ? 2 : 0;
		size_t i;

		if (n == 0) {
			return 0;
		}
		for (i = 1; i < n; i++) {
			if ((u[i] & 0xC0) != 0x80) {
				return 0;
			}
		}
		u += n;
	}
	return 1;
}

/* A CA file whose name (UTF-8) makes the message longer than its buffer:
 * cut whole, before the character the cut would split, never inside it. */
static void test_an_error_too_long_is_cut_between_characters(void **state)
{
	char dir[64];
	char path[400];
	size_t off;
	size_t i;
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port;

	(void)state;
	assert_int_equal(hn_mkdtemp(dir, sizeof(dir), "idemhook-httpc"), 0);
	/* "the CA file DIR/" then two-byte characters: the cut at 255 falls
	 * on the second byte of one */
	off = strlen("the CA file ") + strlen(dir) + 1;
	assert_true(off < HTTPC_ERR_MAX - 1);
	snprintf(path, sizeof(path), "%s/%s", dir, (HTTPC_ERR_MAX - 1 - off) % 2 == 0 ? "x" : "");
	for (i = 0; i < 120; i++) {
		strcat(path, "\xc3\xa9"); /* e acute */
	}
	strcat(path, ".pem");
	port = canned_start(&c, "", 0);
	request_init(&req, port, "/");
	req.hcq_url = url_of("https", port, "/");
	req.hcq_ca_file = path;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_int_equal(resp.hcr_failure, HTTPC_FAILURE_TLS_CA_FILE);
	assert_true(strlen(err) >= HTTPC_ERR_MAX - 4);
	assert_true(strlen(err) < HTTPC_ERR_MAX - 1);
	if (!t_utf8_whole(err)) {
		fail_msg("cut inside a character: %s", err);
	}
	canned_stop(&c);
	rmdir(dir);

	/* the cut itself */
	assert_int_equal(httpc_utf8_prefix("ab\xc3\xa9", 3), 2);
	assert_int_equal(httpc_utf8_prefix("ab\xc3\xa9", 4), 4);
	assert_int_equal(httpc_utf8_prefix("ab\xe2\x82\xac", 4), 2);
	assert_int_equal(httpc_utf8_prefix("ab\xf0\x9f\x98\x80"
	                                   "c",
	                                   5),
	                 2);
	assert_int_equal(httpc_utf8_prefix("abc", 2), 2);
	assert_int_equal(httpc_utf8_prefix("abc", 10), 3);
	assert_int_equal(httpc_utf8_prefix("a\x80\x80\x80\x80", 3), 3);
}

static void test_only_http_and_https_urls_are_taken(void **state)
{
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";

	(void)state;
	assert_int_equal(httpc_url_ok("http://127.0.0.1:8080/hooks/x"), 1);
	assert_int_equal(httpc_url_ok("HTTPS://example.test"), 1);
	assert_int_equal(httpc_url_ok("ftp://example.test/"), 0);
	assert_int_equal(httpc_url_ok("file:///etc/passwd"), 0);
	assert_int_equal(httpc_url_ok("127.0.0.1:8080"), 0);
	assert_int_equal(httpc_url_ok("http://"), 0);
	assert_int_equal(httpc_url_ok("http://a b/"), 0);
	request_init(&req, 1, "/");
	req.hcq_url = "file:///etc/passwd";
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "http"));
}

static void test_connect_to_a_closed_port_fails_cleanly(void **state)
{
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port;
	int fd = bound_socket(0, &port);

	(void)state;
	/* Bound, never listening: nothing accepts on this port. */
	request_init(&req, port, "/");
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "connect"));
	assert_null(resp.hcr_body);
	close(fd);
}

static void test_server_that_never_answers_hits_the_timeout(void **state)
{
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port;
	int fd = bound_socket(1, &port);

	(void)state;
	/* The kernel completes the handshake; nobody ever reads or writes. */
	request_init(&req, port, "/");
	req.hcq_timeout_ms = 300;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "timed out"));
	close(fd);
}

static void test_answer_trickling_in_still_hits_the_total_timeout(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(
	        &c, "HTTP/1.1 200 OK\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", 50);

	(void)state;
	/* Each byte comes well within the timeout; the whole answer does not. */
	request_init(&req, port, "/");
	req.hcq_timeout_ms = 400;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "timed out"));
	canned_stop(&c);
}

/* ---- HTTPS against a local TLS listener ---- */

struct tls_fixture {
	char tf_dir[64];
	char tf_cert[128];  /* the listener's self-signed certificate: the CA to trust */
	char tf_other[128]; /* another self-signed certificate: a CA that did not sign it */
	struct http_server *tf_srv;
};

static void tls_make_cert(const char *dir, const char *name)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/%s.key -out %s/%s.pem -days "
	         "1 "
	         "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
	         dir, name, dir, name);
	assert_int_equal(system(cmd), 0);
}

static void tls_start(struct tls_fixture *tf)
{
	struct http_options ho;
	char path[160];
	char *cert;
	char *key;

	assert_int_equal(hn_mkdtemp(tf->tf_dir, sizeof(tf->tf_dir), "idemhook-httpc"), 0);
	tls_make_cert(tf->tf_dir, "server");
	tls_make_cert(tf->tf_dir, "other");
	snprintf(tf->tf_cert, sizeof(tf->tf_cert), "%s/server.pem", tf->tf_dir);
	snprintf(tf->tf_other, sizeof(tf->tf_other), "%s/other.pem", tf->tf_dir);
	snprintf(path, sizeof(path), "%s/server.key", tf->tf_dir);
	cert = read_all(tf->tf_cert);
	key = read_all(path);
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 2;
	ho.ho_conn_timeout_s = 10;
	ho.ho_body_max = 64 * 1024;
	ho.ho_tls_cert_pem = cert;
	ho.ho_tls_key_pem = key;
	ho.ho_name = "tls";
	tf->tf_srv = http_create(&ho, test_route, NULL);
	assert_non_null(tf->tf_srv);
	free(cert);
	free(key);
}

static void tls_stop(struct tls_fixture *tf)
{
	char cmd[256];

	http_destroy(tf->tf_srv);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tf->tf_dir);
	assert_int_equal(system(cmd), 0);
}

static void test_https_is_verified_against_the_given_ca_file(void **state)
{
	struct tls_fixture tf;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";

	(void)state;
	tls_start(&tf);
	request_init(&req, http_port(tf.tf_srv), "/echo");
	req.hcq_url = url_of("https", http_port(tf.tf_srv), "/echo");
	/* Room for two RSA handshakes in one process under valgrind. */
	req.hcq_timeout_ms = 120000;
	req.hcq_method = "POST";
	req.hcq_body = "{}";
	req.hcq_body_len = 2;
	req.hcq_ca_file = tf.tf_cert;
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	assert_int_equal(resp.hcr_status, 201);
	assert_non_null(strstr(resp.hcr_body, "POST /echo"));
	httpc_response_finish(&resp);

	/* The system CAs did not sign it, nor did another CA: no answer. */
	req.hcq_ca_file = NULL;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "certificate"));
	req.hcq_ca_file = tf.tf_other;
	err[0] = '\0';
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "certificate"));

	/* Trusted, but for another name: the host is checked too. */
	req.hcq_ca_file = tf.tf_cert;
	snprintf(url_buf[0], sizeof(url_buf[0]), "https://localhost:%u/echo", http_port(tf.tf_srv));
	req.hcq_url = url_buf[0];
	err[0] = '\0';
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	tls_stop(&tf);
}

static void test_a_pinned_key_alone_authenticates_a_tls_peer(void **state)
{
	struct tls_fixture tf;
	struct httpc_request req;
	struct httpc_response resp;
	struct crypto_pubkey *key;
	char err[HTTPC_ERR_MAX] = "";
	char *pem;
	char *pin = NULL;
	char *other_pin = NULL;

	(void)state;
	tls_start(&tf);
	pem = read_all(tf.tf_cert);
	key = crypto_pubkey_load(pem, strlen(pem));
	assert_non_null(key);
	assert_int_equal(crypto_pubkey_pin(key, &pin), 0);
	assert_int_equal(strncmp(pin, "sha256//", 8), 0);
	crypto_pubkey_destroy(key);
	free(pem);
	pem = read_all(tf.tf_other);
	key = crypto_pubkey_load(pem, strlen(pem));
	assert_non_null(key);
	assert_int_equal(crypto_pubkey_pin(key, &other_pin), 0);
	crypto_pubkey_destroy(key);
	free(pem);

	/* No CA trusts it and the name is not the certificate's: the pin is
	 * what lets the answer in. */
	request_init(&req, http_port(tf.tf_srv), "/echo");
	snprintf(url_buf[0], sizeof(url_buf[0]), "https://localhost:%u/echo", http_port(tf.tf_srv));
	req.hcq_url = url_buf[0];
	req.hcq_timeout_ms = 120000;
	req.hcq_pinned_key = pin;
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fail_msg("exchange failed: %s", err);
	}
	assert_int_equal(resp.hcr_status, 201);
	httpc_response_finish(&resp);

	/* Another key's pin: no answer. */
	req.hcq_pinned_key = other_pin;
	err[0] = '\0';
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	if (strstr(err, "pinned") == NULL) {
		fail_msg("refused for another reason: %s", err);
	}
	free(pin);
	free(other_pin);
	tls_stop(&tf);
}

/* ---- concurrent transfers ---- */

static void test_multi_runs_transfers_at_once_and_hands_back_each_arg(void **state)
{
	struct http_server *srv = start_server();
	struct httpc_multi *m = httpc_multi_create();
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX];
	int args[4] = {0, 1, 2, 3};
	int seen[4] = {0, 0, 0, 0};
	long status[4] = {-1, -1, -1, -1};
	unsigned closed_port;
	int closed_fd = bound_socket(0, &closed_port);
	int done = 0;
	int i;

	(void)state;
	assert_non_null(m);
	for (i = 0; i < 3; i++) {
		char target[32];
		char body[16];

		snprintf(target, sizeof(target), "/echo?n=%d", i);
		snprintf(body, sizeof(body), "body-%d", i);
		request_init(&req, http_port(srv), target);
		req.hcq_method = "POST";
		/* Copied at once: the request's memory is reused for the next. */
		req.hcq_body = body;
		req.hcq_body_len = strlen(body);
		assert_int_equal(httpc_multi_add(m, &req, &args[i]), 0);
	}
	request_init(&req, closed_port, "/");
	assert_int_equal(httpc_multi_add(m, &req, &args[3]), 0);
	while (done < 4) {
		void *arg = NULL;

		assert_int_equal(httpc_multi_perform(m), 0);
		while (httpc_multi_done(m, &arg, &resp, err, sizeof(err)) == 1) {
			int n = *(int *)arg;
			char want[32];

			seen[n]++;
			status[n] = resp.hcr_status;
			if (n < 3) {
				snprintf(want, sizeof(want), "POST /echo?n=%d", n);
				assert_non_null(strstr(resp.hcr_body, want));
				snprintf(want, sizeof(want), "body-%d", n);
				assert_non_null(strstr(resp.hcr_body, want));
			} else {
				assert_non_null(strstr(err, "connect"));
			}
			httpc_response_finish(&resp);
			done++;
		}
		assert_int_equal(httpc_multi_poll(m, 100), 0);
	}
	for (i = 0; i < 4; i++) {
		assert_int_equal(seen[i], 1);
	}
	assert_int_equal(status[0], 201);
	assert_int_equal(status[1], 201);
	assert_int_equal(status[2], 201);
	assert_int_equal(status[3], 0);
	close(closed_fd);

	/* A set destroyed with a transfer still running lets it go. */
	request_init(&req, http_port(srv), "/echo");
	assert_int_equal(httpc_multi_add(m, &req, &args[0]), 0);
	httpc_multi_destroy(m);
	httpc_multi_destroy(NULL);
	http_destroy(srv);
}

static void test_header_list_refuses_line_breaks_and_finds_by_name(void **state)
{
	struct httpc_headers hdrs;

	(void)state;
	httpc_headers_init(&hdrs);
	httpc_headers_add(&hdrs, "Stripe-Signature", "t=1,v1=ab");
	assert_int_equal(hdrs.hch_overflow, 0);
	assert_string_equal(httpc_headers_get(&hdrs, "stripe-signature"), "t=1,v1=ab");
	assert_null(httpc_headers_get(&hdrs, "X-Other"));
	httpc_headers_add(&hdrs, "X-Evil", "a\r\nInjected: yes");
	assert_int_equal(hdrs.hch_overflow, 1);
	assert_int_equal(hdrs.hch_n, 1);
	httpc_headers_finish(&hdrs);
	assert_int_equal(hdrs.hch_n, 0);
	assert_int_equal(hdrs.hch_overflow, 0);
}

/* ---- configured URLs and joined targets (libcurl's URL API) ---- */

static void test_url_check_refuses_userinfo_and_plain_http_with_a_key_off_loopback(void **state)
{
	char err[HTTPC_ERR_MAX];

	(void)state;
	/* libcurl would connect to 203.0.113.9: "127.0.0.1" is a user name. */
	assert_int_equal(httpc_url_check("http://127.0.0.1:1@203.0.113.9", 1, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "user name or password"));
	assert_int_equal(httpc_url_check("https://u:p@api.example", 0, err, sizeof(err)), -1);
	assert_int_equal(httpc_url_check("https://;auth=x@api.example", 0, err, sizeof(err)), -1);
	assert_int_equal(httpc_url_check("http://203.0.113.9/", 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "loopback"));
	assert_int_equal(httpc_url_check("http://127.0.0.1.example.com/", 1, err, sizeof(err)), -1);
	assert_int_equal(httpc_url_check("ftp://127.0.0.1/", 0, err, sizeof(err)), -1);
	assert_int_equal(httpc_url_check("http:///path", 0, err, sizeof(err)), -1);
	assert_int_equal(httpc_url_check("http://a b/", 0, err, sizeof(err)), -1);
	/* Loopback in its spellings; https anywhere; plain http without a key. */
	assert_int_equal(httpc_url_check("http://127.0.0.1:8999/", 1, err, sizeof(err)), 0);
	assert_int_equal(httpc_url_check("HTTP://127.1:8999", 1, err, sizeof(err)), 0);
	assert_int_equal(httpc_url_check("http://[::1]:8999/x", 1, err, sizeof(err)), 0);
	assert_int_equal(httpc_url_check("http://localhost", 1, err, sizeof(err)), 0);
	assert_int_equal(httpc_url_check("https://api.stripe.com", 1, err, sizeof(err)), 0);
	assert_int_equal(httpc_url_check("http://192.0.2.1/hook?a=b@c", 0, err, sizeof(err)), 0);
}

static void test_url_join_keeps_the_base_host_and_takes_only_origin_form_paths(void **state)
{
	char err[HTTPC_ERR_MAX];
	char *url = NULL;

	(void)state;
	assert_int_equal(
	        httpc_url_join("http://127.0.0.1:8080", "/hooks/stripe", &url, err, sizeof(err)),
	        0);
	assert_string_equal(url, "http://127.0.0.1:8080/hooks/stripe");
	free(url);
	assert_int_equal(
	        httpc_url_join("https://h.example/prefix/", "/hooks/s?x=1", &url, err, sizeof(err)),
	        0);
	assert_string_equal(url, "https://h.example/prefix/hooks/s?x=1");
	free(url);
	/* Still a path under the base, whatever it looks like. */
	assert_int_equal(httpc_url_join("http://127.0.0.1:8080", "/@127.0.0.1:9/hooks", &url, err,
	                                sizeof(err)),
	                 0);
	assert_non_null(strstr(url, "http://127.0.0.1:8080/"));
	free(url);
	/* Not origin-form: never joined. */
	assert_int_equal(httpc_url_join("http://127.0.0.1:8080", "@127.0.0.1:9/hooks/stripe", &url,
	                                err, sizeof(err)),
	                 -1);
	assert_null(url);
	assert_non_null(strstr(err, "origin-form"));
	assert_int_equal(
	        httpc_url_join("http://127.0.0.1:8080", "//evil.example/x", &url, err, sizeof(err)),
	        -1);
	assert_int_equal(httpc_url_join("http://127.0.0.1:8080", "http://evil.example/x", &url, err,
	                                sizeof(err)),
	                 -1);
	assert_int_equal(httpc_url_join("http://127.0.0.1:8080", "/a#frag", &url, err, sizeof(err)),
	                 -1);
	assert_int_equal(httpc_url_join("http://127.0.0.1:8080", "/a b", &url, err, sizeof(err)),
	                 -1);
	assert_int_equal(httpc_url_join("http://u@127.0.0.1:8080", "/a", &url, err, sizeof(err)),
	                 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_post_round_trip_carries_body_and_headers),
	        cmocka_unit_test(
	                test_a_body_without_content_type_gets_none_and_empty_values_are_sent),
	        cmocka_unit_test(test_answer_larger_than_the_cap_is_cut_and_marked),
	        cmocka_unit_test(test_answer_without_length_over_the_cap_is_cut),
	        cmocka_unit_test(test_chunked_answer_is_decoded),
	        cmocka_unit_test(test_only_the_final_answer_after_a_1xx_counts),
	        cmocka_unit_test(test_redirects_are_not_followed),
	        cmocka_unit_test(test_answer_that_is_not_http_is_refused),
	        cmocka_unit_test(test_an_https_url_on_a_plain_http_port_is_told_by_its_status_line),
	        cmocka_unit_test(test_only_http_and_https_urls_are_taken),
	        cmocka_unit_test(
	                test_url_check_refuses_userinfo_and_plain_http_with_a_key_off_loopback),
	        cmocka_unit_test(
	                test_url_join_keeps_the_base_host_and_takes_only_origin_form_paths),
	        cmocka_unit_test(test_connect_to_a_closed_port_fails_cleanly),
	        cmocka_unit_test(test_server_that_never_answers_hits_the_timeout),
	        cmocka_unit_test(test_answer_trickling_in_still_hits_the_total_timeout),
	        cmocka_unit_test(test_header_list_refuses_line_breaks_and_finds_by_name),
	        cmocka_unit_test(test_https_is_verified_against_the_given_ca_file),
	        cmocka_unit_test(test_a_close_during_the_tls_handshake_hints_at_a_plain_port),
	        cmocka_unit_test(test_an_unusable_ca_file_is_named_not_taken_for_an_untrusted_peer),
	        cmocka_unit_test(test_an_error_too_long_is_cut_between_characters),
	        cmocka_unit_test(test_a_pinned_key_alone_authenticates_a_tls_peer),
	        cmocka_unit_test(test_multi_runs_transfers_at_once_and_hands_back_each_arg),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
