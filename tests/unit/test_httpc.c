/* test_httpc.c: the small HTTP/1.1 client against real loopback servers. */
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

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void request_init(struct httpc_request *req, unsigned port, const char *target)
{
	memset(req, 0, sizeof(*req));
	req->hcq_method = "GET";
	req->hcq_host = "127.0.0.1";
	req->hcq_port = port;
	req->hcq_target = target;
	req->hcq_answer_max = 64 * 1024;
	req->hcq_timeout_ms = 5000;
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
	/* Framing is the client's own: a caller's Content-Length is left out. */
	httpc_headers_add(&hdrs, "Content-Length", "999");
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
	assert_string_equal(httpc_response_header(&resp, "x-echo"), "yes");
	assert_null(httpc_response_header(&resp, "X-Missing"));
	assert_non_null(strstr(resp.hcr_body,
	                       "POST /echo?q=1 x=hello there type=application/json len=11\n"));
	assert_memory_equal(resp.hcr_body + resp.hcr_body_len - (sizeof(body) - 1), body,
	                    sizeof(body) - 1);
	httpc_response_finish(&resp);
	assert_null(resp.hcr_raw);
	httpc_response_finish(&resp);
	httpc_headers_finish(&hdrs);
	http_destroy(srv);
}

static void test_answer_larger_than_the_cap_is_refused(void **state)
{
	struct http_server *srv = start_server();
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";

	(void)state;
	memset(&resp, 0, sizeof(resp));
	request_init(&req, http_port(srv), "/big");
	req.hcq_answer_max = BIG_BODY - 1;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "over"));
	assert_null(resp.hcr_raw);
	assert_null(resp.hcr_headers);

	/* At the cap exactly, it is read whole. */
	req.hcq_answer_max = BIG_BODY;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), 0);
	assert_int_equal(resp.hcr_status, 200);
	assert_int_equal(resp.hcr_body_len, BIG_BODY);
	httpc_response_finish(&resp);
	http_destroy(srv);
}

static void test_answer_without_length_over_the_cap_is_refused(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port = canned_start(&c,
	                             "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
	                             "0123456789abcdefghijklmnopqrstuvwxyz",
	                             0);

	(void)state;
	request_init(&req, port, "/");
	req.hcq_answer_max = 10;
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "over 10 bytes"));
	canned_stop(&c);
}

static void test_chunked_answer_is_decoded(void **state)
{
	struct canned c;
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port =
	        canned_start(&c,
	                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	                     "Idempotent-Replayed: true\r\n\r\n"
	                     "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n",
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
	assert_non_null(strstr(err, "malformed"));
	canned_stop(&c);
}

static void test_connect_to_a_closed_port_fails_cleanly(void **state)
{
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port;
	int fd = bound_socket(0, &port);
	int64_t t0;

	(void)state;
	/* Bound, never listening: nothing accepts on this port. */
	request_init(&req, port, "/");
	memset(&resp, 0, sizeof(resp));
	t0 = mono_ms();
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	assert_true(mono_ms() - t0 < 2000);
	assert_non_null(strstr(err, "cannot connect"));
	assert_null(resp.hcr_raw);
	close(fd);
}

static void test_server_that_never_answers_hits_the_timeout(void **state)
{
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX] = "";
	unsigned port;
	int fd = bound_socket(1, &port);
	int64_t t0;
	int64_t took;

	(void)state;
	/* The kernel completes the handshake; nobody ever reads or writes. */
	request_init(&req, port, "/");
	req.hcq_timeout_ms = 300;
	t0 = mono_ms();
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	took = mono_ms() - t0;
	assert_true(took >= 250);
	assert_true(took < 3000);
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
	int64_t t0;
	int64_t took;

	(void)state;
	/* Each byte comes well within the timeout; the whole answer does not. */
	request_init(&req, port, "/");
	req.hcq_timeout_ms = 400;
	t0 = mono_ms();
	assert_int_equal(httpc_exchange(&req, &resp, err, sizeof(err)), -1);
	took = mono_ms() - t0;
	assert_true(took >= 350);
	assert_true(took < 2000);
	assert_non_null(strstr(err, "timed out"));
	canned_stop(&c);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_post_round_trip_carries_body_and_headers),
	        cmocka_unit_test(test_answer_larger_than_the_cap_is_refused),
	        cmocka_unit_test(test_answer_without_length_over_the_cap_is_refused),
	        cmocka_unit_test(test_chunked_answer_is_decoded),
	        cmocka_unit_test(test_answer_that_is_not_http_is_refused),
	        cmocka_unit_test(test_connect_to_a_closed_port_fails_cleanly),
	        cmocka_unit_test(test_server_that_never_answers_hits_the_timeout),
	        cmocka_unit_test(test_answer_trickling_in_still_hits_the_total_timeout),
	        cmocka_unit_test(test_header_list_refuses_line_breaks_and_finds_by_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
