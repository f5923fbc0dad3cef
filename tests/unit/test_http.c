/* test_http.c: the HTTP listener over real loopback sockets. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <valgrind/valgrind.h>

#include "buf.h"
#include "cidr.h"
#include "crypto.h"
#include "harness.h"
#include "http.h"
#include "metrics.h"
#include "rawhttp.h"

static atomic_int routed; /* requests echo_route saw */

/* Echoes what the route saw: body length, body hash-free bytes, addresses. */
static void echo_route(void *arg, const struct http_request *req, struct reply *ret)
{
	struct buf b;
	char *s;
	size_t len;

	atomic_fetch_add(&routed, 1);
	buf_init(&b, 0);
	buf_printf(&b, "method=%s path=%s url=%s peer=%s client=%s len=%zu headers=%zu x=%s\n", req->hr_method,
		   req->hr_path, req->hr_url, req->hr_peer, req->hr_client, req->hr_body_len, req->hr_n_headers,
		   http_header_get(req, "X-Test") != NULL ? http_header_get(req, "X-Test") : "-");
	buf_append(&b, req->hr_body, req->hr_body_len);
	s = buf_take(&b, &len);
	reply_set_take(ret, 200, "text/plain", s, len);
	reply_add_header(ret, "X-Echo", "yes");
	buf_finish(&b);
}

static struct http_server *start(size_t body_max, const char *const *proxies, char url[128])
{
	struct http_options ho;
	struct http_server *srv;

	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 2;
	ho.ho_conn_timeout_s = 10;
	ho.ho_body_max = body_max;
	ho.ho_trusted_proxies = proxies;
	ho.ho_name = "test";
	srv = http_create(&ho, echo_route, NULL);
	assert_non_null(srv);
	snprintf(url, 128, "http://127.0.0.1:%u/hooks/x?a=1&b=two", http_port(srv));
	return srv;
}

static void test_route_sees_the_raw_body_and_target_exactly(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const unsigned char body[] = {'{', 0x00, 0xff, '\r', '\n', 'x', '}'};
	const char *headers[] = {"X-Test: hello", NULL};
	struct hres r;
	char *echo;

	assert_int_equal(hn_http("POST", url, headers, body, sizeof(body), &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "path=/hooks/x url=/hooks/x?a=1&b=two"));
	assert_non_null(strstr(r.hs_body, "len=7"));
	assert_non_null(strstr(r.hs_body, "x=hello"));
	assert_memory_equal(r.hs_body + r.hs_body_len - sizeof(body), body, sizeof(body));
	echo = hres_header(&r, "X-Echo");
	assert_string_equal(echo, "yes");
	free(echo);
	hres_finish(&r);
	http_destroy(srv);
}

static void test_announced_oversized_body_gets_413_before_it_is_read(void **state)
{
	char url[128];
	struct http_server *srv = start(100, NULL, url);
	char body[101];
	struct hres r;

	memset(body, 'a', sizeof(body));
	assert_int_equal(hn_http("POST", url, NULL, body, sizeof(body), &r), 0);
	assert_int_equal(r.hs_status, 413);
	assert_non_null(strstr(r.hs_headers, "application/problem+json"));
	hres_finish(&r);
	/* Exactly the cap is fine. */
	assert_int_equal(hn_http("POST", url, NULL, body, 100, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	http_destroy(srv);
}

static void test_chunked_body_over_the_cap_gets_413(void **state)
{
	char url[128];
	struct http_server *srv = start(1000, NULL, url);
	const char *headers[] = {"Transfer-Encoding: chunked", NULL};
	char *body = malloc(50000);
	struct hres r;

	memset(body, 'b', 50000);
	assert_int_equal(hn_http("POST", url, headers, body, 50000, &r), 0);
	assert_int_equal(r.hs_status, 413);
	hres_finish(&r);
	free(body);
	http_destroy(srv);
}

static void test_forwarded_for_is_trusted_only_from_a_configured_proxy(void **state)
{
	const char *trusted[] = {"127.0.0.0/8", NULL};
	const char *other[] = {"10.0.0.0/8", NULL};
	const char *headers[] = {"X-Forwarded-For: 198.51.100.7, 203.0.113.9", NULL};
	char url[128];
	struct http_server *srv = start(1024, trusted, url);
	struct hres r;

	assert_int_equal(hn_http("POST", url, headers, "x", 1, &r), 0);
	/* The rightmost address that is not a trusted proxy is the client. */
	assert_non_null(strstr(r.hs_body, "peer=127.0.0.1 client=203.0.113.9"));
	hres_finish(&r);
	http_destroy(srv);

	srv = start(1024, other, url);
	assert_int_equal(hn_http("POST", url, headers, "x", 1, &r), 0);
	assert_non_null(strstr(r.hs_body, "peer=127.0.0.1 client=127.0.0.1"));
	hres_finish(&r);
	http_destroy(srv);
}

static void test_cidr_matching_covers_both_families_and_bad_input(void **state)
{
	assert_int_equal(cidr_match("10.0.0.0/8", "10.200.3.4"), 1);
	assert_int_equal(cidr_match("10.0.0.0/8", "11.0.0.1"), 0);
	assert_int_equal(cidr_match("192.0.2.1", "192.0.2.1"), 1);
	assert_int_equal(cidr_match("192.0.2.0/31", "192.0.2.2"), 0);
	assert_int_equal(cidr_match("0.0.0.0/0", "8.8.8.8"), 1);
	assert_int_equal(cidr_match("::1/128", "::1"), 1);
	assert_int_equal(cidr_match("2001:db8::/32", "2001:db8:1::5"), 1);
	assert_int_equal(cidr_match("2001:db8::/32", "2001:db9::5"), 0);
	assert_int_equal(cidr_match("10.0.0.0/33", "10.0.0.1"), -1);
	assert_int_equal(cidr_match("nonsense", "10.0.0.1"), -1);
	assert_int_equal(cidr_match("10.0.0.0/8", "not-an-address"), -1);
}

static void test_too_many_header_fields_get_431(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char *headers[HTTP_HEADERS_MAX + 10];
	char names[HTTP_HEADERS_MAX + 10][32];
	struct hres r;
	int i;

	for (i = 0; i < HTTP_HEADERS_MAX + 5; i++) {
		snprintf(names[i], sizeof(names[i]), "X-H%d: v", i);
		headers[i] = names[i];
	}
	headers[HTTP_HEADERS_MAX + 5] = NULL;
	assert_int_equal(hn_http("POST", url, headers, "x", 1, &r), 0);
	assert_int_equal(r.hs_status, 431);
	hres_finish(&r);
	http_destroy(srv);
}

/* ---- deferred answers ---- */

#define DEFER_MAX 128

/* A route that defers every request; the test resumes them when it wants.
 * finish answers 200 with the path it sees, and counts. */
struct deferrer {
	pthread_mutex_t df_mutex;
	pthread_cond_t df_cond;
	struct http_deferred *df_pending[DEFER_MAX];
	size_t df_n_pending;
	int df_resume_at_once; /* resume inside the route, before it returns */
	int df_finished; /* finish calls with a request */
	int df_abandoned; /* finish calls without one (client gone) */
};

static void defer_finish(void *arg, const struct http_request *req, struct reply *ret)
{
	struct deferrer *df = arg;
	char body[256];

	pthread_mutex_lock(&df->df_mutex);
	if (req == NULL) {
		df->df_abandoned++;
	} else {
		df->df_finished++;
	}
	pthread_cond_broadcast(&df->df_cond);
	pthread_mutex_unlock(&df->df_mutex);
	if (req != NULL) {
		snprintf(body, sizeof(body), "deferred %s", req->hr_path);
		reply_set(ret, 200, "text/plain", body, strlen(body));
	}
}

static void defer_route(void *arg, const struct http_request *req, struct reply *ret)
{
	struct deferrer *df = arg;
	struct http_deferred *d = http_defer(req, defer_finish, df);

	assert_non_null(d);
	if (df->df_resume_at_once) {
		http_resume(d);
		return;
	}
	pthread_mutex_lock(&df->df_mutex);
	assert_true(df->df_n_pending < DEFER_MAX);
	df->df_pending[df->df_n_pending++] = d;
	pthread_cond_broadcast(&df->df_cond);
	pthread_mutex_unlock(&df->df_mutex);
}

static struct http_server *defer_start(struct deferrer *df, unsigned threads, char url[128])
{
	struct http_options ho;
	struct http_server *srv;

	memset(df, 0, sizeof(*df));
	pthread_mutex_init(&df->df_mutex, NULL);
	pthread_cond_init(&df->df_cond, NULL);
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = threads;
	ho.ho_conn_timeout_s = 10;
	ho.ho_name = "test";
	srv = http_create(&ho, defer_route, df);
	assert_non_null(srv);
	snprintf(url, 128, "http://127.0.0.1:%u/deferred", http_port(srv));
	return srv;
}

static void defer_wait_pending(struct deferrer *df, size_t n)
{
	pthread_mutex_lock(&df->df_mutex);
	while (df->df_n_pending < n) {
		pthread_cond_wait(&df->df_cond, &df->df_mutex);
	}
	pthread_mutex_unlock(&df->df_mutex);
}

/* Whether n requests are pending, waiting at most ms for it. */
static int defer_wait_pending_ms(struct deferrer *df, size_t n, int ms)
{
	struct timespec until;
	int ok;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&df->df_mutex);
	while (df->df_n_pending < n &&
	       pthread_cond_timedwait(&df->df_cond, &df->df_mutex, &until) == 0) {
	}
	ok = df->df_n_pending >= n;
	pthread_mutex_unlock(&df->df_mutex);
	return ok;
}

/* Whether the server wrote or closed fd: a request still waiting for its
 * answer has neither. */
static int fd_readable_now(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	return poll(&pfd, 1, 0) > 0;
}

/* Waits (at most 10 s) until n requests are pending or the server wrote to
 * or closed fd. Returns 1 when they are pending. */
static int defer_wait_pending_or_cut(struct deferrer *df, size_t n, int fd)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (defer_wait_pending_ms(df, n, 100)) {
			return 1;
		}
		if (fd_readable_now(fd)) {
			return defer_wait_pending_ms(df, n, 0);
		}
	}
	fail_msg("neither pending nor answered after 10 s");
	return 0;
}

/* Resumes every pending request from this (not a server) thread. */
static void defer_resume_all(struct deferrer *df)
{
	size_t i;

	pthread_mutex_lock(&df->df_mutex);
	for (i = 0; i < df->df_n_pending; i++) {
		http_resume(df->df_pending[i]);
	}
	df->df_n_pending = 0;
	pthread_mutex_unlock(&df->df_mutex);
}

struct storm_job {
	const char *sj_url;
	size_t sj_n;
	struct hres *sj_res;
	int sj_rc;
};

static void *storm_job_run(void *arg)
{
	struct storm_job *sj = arg;

	sj->sj_rc = hn_http_storm(sj->sj_n, "POST", sj->sj_url, NULL, "{}", 2, sj->sj_res);
	return NULL;
}

static void test_deferred_requests_wait_without_holding_a_thread(void **state)
{
	struct deferrer df;
	char url[128];
	/* Two server threads, 64 requests waiting at once. */
	struct http_server *srv = defer_start(&df, 2, url);
	struct hres res[64];
	struct storm_job sj = {.sj_url = url, .sj_n = 64, .sj_res = res};
	pthread_t t;
	size_t i;

	assert_int_equal(pthread_create(&t, NULL, storm_job_run, &sj), 0);
	defer_wait_pending(&df, 64);
	assert_int_equal(df.df_finished, 0);
	defer_resume_all(&df);
	pthread_join(t, NULL);
	assert_int_equal(sj.sj_rc, 0);
	for (i = 0; i < 64; i++) {
		assert_int_equal(res[i].hs_status, 200);
		assert_string_equal(res[i].hs_body, "deferred /deferred");
		hres_finish(&res[i]);
	}
	assert_int_equal(df.df_finished, 64);
	assert_int_equal(df.df_abandoned, 0);
	http_destroy(srv);
}

static void test_an_answer_ready_before_the_route_returns_goes_out_at_once(void **state)
{
	struct deferrer df;
	char url[128];
	struct http_server *srv = defer_start(&df, 2, url);
	struct hres r;
	int i;

	df.df_resume_at_once = 1;
	for (i = 0; i < 20; i++) {
		assert_int_equal(hn_http("POST", url, NULL, "{}", 2, &r), 0);
		assert_int_equal(r.hs_status, 200);
		assert_string_equal(r.hs_body, "deferred /deferred");
		hres_finish(&r);
	}
	assert_int_equal(df.df_finished, 20);
	http_destroy(srv);
}

/* Sends one POST on a raw socket and closes it without reading. */
static int connect_to(unsigned port);

static void post_and_hang_up(unsigned port)
{
	const char req[] = "POST /gone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	int fd = connect_to(port);

	assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	close(fd);
}

static void test_client_gone_while_suspended_is_finished_once_and_the_server_goes_on(void **state)
{
	struct deferrer df;
	char url[128];
	struct http_server *srv = defer_start(&df, 2, url);
	struct hres r;

	post_and_hang_up(http_port(srv));
	defer_wait_pending(&df, 1);
	/* The client is gone; its answer comes anyway, from another thread. */
	defer_resume_all(&df);
	pthread_mutex_lock(&df.df_mutex);
	while (df.df_finished + df.df_abandoned < 1) {
		pthread_cond_wait(&df.df_cond, &df.df_mutex);
	}
	pthread_mutex_unlock(&df.df_mutex);
	/* Whichever way libmicrohttpd notices, finish ran exactly once. */
	usleep(100 * 1000);
	assert_int_equal(df.df_finished + df.df_abandoned, 1);
	df.df_resume_at_once = 1;
	assert_int_equal(hn_http("POST", url, NULL, "{}", 2, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	http_destroy(srv);
	assert_int_equal(df.df_finished + df.df_abandoned, 2);
}

struct late_resumer {
	struct deferrer *lr_df;
	size_t lr_n;
	atomic_int lr_resumed;
};

static void *late_resume(void *arg)
{
	struct late_resumer *lr = arg;

	defer_wait_pending(lr->lr_df, lr->lr_n);
	usleep(300 * 1000); /* http_destroy is waiting by now */
	atomic_store(&lr->lr_resumed, 1);
	defer_resume_all(lr->lr_df);
	return NULL;
}

static void test_destroy_waits_for_suspended_requests_and_answers_them(void **state)
{
	struct deferrer df;
	char url[128];
	struct http_server *srv = defer_start(&df, 2, url);
	struct hres res[16];
	struct storm_job sj = {.sj_url = url, .sj_n = 16, .sj_res = res};
	struct late_resumer lr = {.lr_df = &df, .lr_n = 16};
	pthread_t clients;
	pthread_t resumer;
	size_t i;

	assert_int_equal(pthread_create(&clients, NULL, storm_job_run, &sj), 0);
	defer_wait_pending(&df, 16);
	assert_int_equal(pthread_create(&resumer, NULL, late_resume, &lr), 0);
	/* Returns only once every suspended request was answered. */
	http_destroy(srv);
	assert_int_equal(atomic_load(&lr.lr_resumed), 1);
	assert_int_equal(df.df_finished, 16);
	pthread_join(resumer, NULL);
	pthread_join(clients, NULL);
	assert_int_equal(sj.sj_rc, 0);
	for (i = 0; i < 16; i++) {
		assert_int_equal(res[i].hs_status, 200);
		hres_finish(&res[i]);
	}
}

static char *read_all(const char *path);

/* Sends stderr to a new file from path's template (mkstemp); returns the
 * saved stderr for stderr_capture_end, or -1 (nothing changed). */
static int stderr_capture_begin(char *path, int *ret_log_fd)
{
	int log_fd = mkstemp(path);
	int saved = log_fd >= 0 ? dup(STDERR_FILENO) : -1;

	if (saved < 0) {
		if (log_fd >= 0) {
			close(log_fd);
			unlink(path);
		}
		return -1;
	}
	fflush(stderr);
	dup2(log_fd, STDERR_FILENO);
	*ret_log_fd = log_fd;
	return saved;
}

/* Puts stderr back and returns what was written meanwhile (malloc'd, NULL
 * when unreadable); the file is removed. */
static char *stderr_capture_end(int saved, int log_fd, const char *path)
{
	char *text;

	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(log_fd);
	text = read_all(path);
	unlink(path);
	return text;
}

/* Opens a connection and keeps it (returns the socket). */
static int connect_to(unsigned port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void test_libmicrohttpd_speaks_through_the_log_with_a_priority_and_the_listener(void **state)
{
	char path[] = "/tmp/idemhook-http-log-XXXXXX";
	struct http_options ho;
	struct http_server *srv;
	char *text;
	char *line;
	char *next;
	int log_fd = -1;
	int saved = stderr_capture_begin(path, &log_fd);
	int a;
	int b;

	assert_true(saved >= 0);
	/* A pool of one thread (as the admin listener) and a limit of one
	 * connection per address, which the second connection hits. */
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 1;
	ho.ho_conn_timeout_s = 10;
	ho.ho_per_ip_limit = 1;
	ho.ho_name = "limited";
	srv = http_create(&ho, echo_route, NULL);
	assert_non_null(srv);
	a = connect_to(http_port(srv));
	b = connect_to(http_port(srv));
	usleep(200 * 1000);
	close(a);
	close(b);
	http_destroy(srv);
	text = stderr_capture_end(saved, log_fd, path);
	assert_non_null(text);
	assert_null(strstr(text, "Zero size"));
	assert_non_null(strstr(text, "<4>http limited: libmicrohttpd: Server reached connection limit"));
	/* Every line has a priority: nothing reached stderr unprefixed. */
	for (line = text; *line != '\0'; line = next != NULL ? next + 1 : line + strlen(line)) {
		next = strchr(line, '\n');
		assert_true(line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>');
	}
	free(text);
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	struct buf b;
	char chunk[4096];
	size_t n;
	char *s;

	if (f == NULL) {
		return NULL;
	}
	buf_init(&b, 0);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		buf_append(&b, chunk, n);
	}
	fclose(f);
	s = buf_take(&b, NULL);
	buf_finish(&b);
	return s;
}

static size_t discard(char *p, size_t s, size_t n, void *arg)
{
	return s * n;
}

/* GETs url over TLS trusting ca_path; the status, or -1. */
static long https_get_status(const char *url, const char *ca_path)
{
	CURL *c = curl_easy_init();
	long status = -1;

	assert_non_null(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca_path);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	}
	curl_easy_cleanup(c);
	return status;
}

/* The value of metric{listener="name"} in /metrics, 0 when absent. */
static double listener_metric(const char *metric, const char *name)
{
	char needle[160];
	struct buf m;
	const char *p;
	double v = 0;

	snprintf(needle, sizeof(needle), "%s{listener=\"%s\"} ", metric, name);
	buf_init(&m, 0);
	assert_int_equal(metrics_render(&m), 0);
	buf_append(&m, "", 1);
	p = strstr(m.buf_data, needle);
	if (p != NULL) {
		v = strtod(p + strlen(needle), NULL);
	}
	buf_finish(&m);
	return v;
}

/* idemhook_http_thread_wakeups_total of listener name, 0 when absent. */
static long long thread_wakeups(const char *name)
{
	return (long long)listener_metric("idemhook_http_thread_wakeups_total", name);
}

/* ---- the edge: answers made before routing ---- */

/* Sends data on a new connection: the answer is status, closes the
 * connection, and (slug non-NULL) is problem+json of that type; the route
 * never saw the request. */
static void expect_refusal(unsigned port, const char *data, size_t len, int status,
                           const char *slug)
{
	struct rh_response r;
	int before = atomic_load(&routed);
	char type[128];
	char *ct;

	assert_int_equal(rh_exchange(port, data, len, 10000, &r), 1);
	assert_int_equal(r.rr_status, status);
	assert_true(r.rr_close);
	if (slug != NULL) {
		ct = rh_header(&r, "Content-Type");
		assert_non_null(ct);
		assert_string_equal(ct, "application/problem+json");
		free(ct);
		snprintf(type, sizeof(type), "\"type\":\"urn:idemhook:problem:%s\"", slug);
		assert_non_null(strstr(r.rr_body, type));
	}
	rh_response_finish(&r);
	assert_int_equal(atomic_load(&routed), before);
}

/* Sends data on a new connection and expects the echo route's 200. */
static void expect_routed(unsigned port, const char *data, size_t len, const char *needle)
{
	struct rh_response r;

	assert_int_equal(rh_exchange(port, data, len, 10000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	if (needle != NULL) {
		assert_non_null(strstr(r.rr_body, needle));
	}
	rh_response_finish(&r);
}

static char *request_with_target(const char *target)
{
	struct buf b;
	char *s;

	buf_init(&b, 0);
	buf_printf(&b, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", target);
	s = buf_take(&b, NULL);
	buf_finish(&b);
	return s;
}

static void test_too_many_query_parameters_or_a_long_target_get_414(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	struct buf t;
	char *req;
	int i;

	/* 1000 parameters once got no answer until the connection timeout. */
	buf_init(&t, 0);
	buf_puts(&t, "/hooks/x?a");
	for (i = 1; i < 1000; i++) {
		buf_puts(&t, "&a");
	}
	req = request_with_target(t.buf_data);
	expect_refusal(http_port(srv), req, strlen(req), 414, "too_many_query_parameters");
	free(req);
	buf_finish(&t);
	/* As many as the limit are fine. */
	buf_init(&t, 0);
	buf_puts(&t, "/hooks/x?a=1");
	for (i = 1; i < HTTP_QUERY_PARAMS_MAX; i++) {
		buf_printf(&t, "&p%d=%d", i, i);
	}
	req = request_with_target(t.buf_data);
	expect_routed(http_port(srv), req, strlen(req), "path=/hooks/x url=/hooks/x?a=1&p1=1&p2=2");
	free(req);
	buf_finish(&t);
	/* A target over HTTP_URL_MAX. */
	buf_init(&t, 0);
	buf_puts(&t, "/hooks/x?v=");
	for (i = 0; i < HTTP_URL_MAX; i++) {
		buf_puts(&t, "v");
	}
	req = request_with_target(t.buf_data);
	expect_refusal(http_port(srv), req, strlen(req), 414, "target_too_long");
	free(req);
	buf_finish(&t);
	http_destroy(srv);
}

static void test_nul_in_the_path_raw_or_encoded_gets_400_and_is_not_routed(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char encoded[] =
	        "POST /hooks/stripe%00evil HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char raw[] =
	        "POST /hooks/stripe\0evil HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char raw_query[] =
	        "POST /hooks/stripe?a=\0b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char percent[] =
	        "POST /hooks/x%2500 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";

	expect_refusal(http_port(srv), encoded, sizeof(encoded) - 1, 400, "nul_in_target");
	expect_refusal(http_port(srv), raw, sizeof(raw) - 1, 400, "nul_in_target");
	expect_refusal(http_port(srv), raw_query, sizeof(raw_query) - 1, 400, "nul_in_target");
	/* An encoded '%' followed by "00" is no NUL. */
	expect_routed(http_port(srv), percent, sizeof(percent) - 1, "path=/hooks/x%00 ");
	http_destroy(srv);
}

/* A slash encoded in the path would decode into a separator the client
 * did not send as one: "/hooks%2Fstripe" is not /hooks/stripe. */
static void test_an_encoded_slash_in_the_path_gets_400_and_is_not_routed(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char upper[] =
	        "POST /hooks%2Fstripe HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char lower[] =
	        "POST /api/orders%2fx HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char query[] =
	        "POST /hooks/x?next=%2Fa HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char percent[] =
	        "POST /hooks/x%252F HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";

	expect_refusal(http_port(srv), upper, sizeof(upper) - 1, 400, "encoded_slash");
	expect_refusal(http_port(srv), lower, sizeof(lower) - 1, 400, "encoded_slash");
	/* In the query it is data, and "%25" followed by "2F" is no slash. */
	expect_routed(http_port(srv), query, sizeof(query) - 1,
	              "path=/hooks/x url=/hooks/x?next=%2Fa ");
	expect_routed(http_port(srv), percent, sizeof(percent) - 1, "path=/hooks/x%2F ");
	http_destroy(srv);
}

/* RFC 9112 5.2: an obs-fold line is refused, as libmicrohttpd 0.9.75 would
 * hand the route a field with a mangled name and lose the field. */
static void test_a_folded_header_line_gets_400_and_is_not_routed(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char space[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nX-Test: a\r\n b\r\n"
	                     "Content-Length: 2\r\n\r\n{}";
	const char tab[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nX-Test:\r\n\tb\r\n\tc\r\n"
	                   "Content-Length: 2\r\n\r\n{}";
	const char length[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n 2\r\n"
	                      "\r\n{}{}{}{}{}{}";
	const char padded[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nX-Test: \t  a  \r\nX-Empty:\r\n"
	                      "X-Bare:b\r\nContent-Length: 2\r\n\r\n{}";

	expect_refusal(http_port(srv), space, sizeof(space) - 1, 400, "obsolete_line_folding");
	expect_refusal(http_port(srv), tab, sizeof(tab) - 1, 400, "obsolete_line_folding");
	expect_refusal(http_port(srv), length, sizeof(length) - 1, 400, "obsolete_line_folding");
	/* Whitespace around a value, an empty value, none after the colon:
	 * one line each, routed. */
	expect_routed(http_port(srv), padded, sizeof(padded) - 1, "headers=5 x=a");
	http_destroy(srv);
}

/* RFC 9112 3.2: a request with two Host fields is refused. */
static void test_two_host_fields_get_400(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char two[] = "POST /hooks/x HTTP/1.1\r\nHost: a\r\nhost: b\r\n"
	                   "Content-Length: 2\r\n\r\n{}";

	expect_refusal(http_port(srv), two, sizeof(two) - 1, 400, "repeated_host");
	http_destroy(srv);
}

/* RFC 9112 3.2: an HTTP/1.1 request without Host is refused (so is any
 * later 1.x, which libmicrohttpd serves as 1.1); HTTP/1.0 may omit it. */
static void test_an_http_1_1_request_without_host_gets_400(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char none[] = "POST /hooks/x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
	const char later[] = "POST /hooks/x HTTP/1.2\r\nContent-Length: 2\r\n\r\n{}";
	const char get[] = "GET /healthz HTTP/1.1\r\nX-Test: a\r\n\r\n";
	const char old[] = "POST /hooks/x HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}";
	const char empty[] = "POST /hooks/x HTTP/1.1\r\nHost:\r\nContent-Length: 2\r\n\r\n{}";

	expect_refusal(http_port(srv), none, sizeof(none) - 1, 400, "missing_host");
	expect_refusal(http_port(srv), later, sizeof(later) - 1, 400, "missing_host");
	expect_refusal(http_port(srv), get, sizeof(get) - 1, 400, "missing_host");
	expect_routed(http_port(srv), old, sizeof(old) - 1, "path=/hooks/x ");
	/* An empty Host is a Host (RFC 9112 3.2: a target without authority). */
	expect_routed(http_port(srv), empty, sizeof(empty) - 1, "path=/hooks/x ");
	http_destroy(srv);
}

static char *request_with_header(const char *name, size_t value_len)
{
	struct buf b;
	char *s;
	size_t i;

	buf_init(&b, 0);
	buf_printf(&b, "POST /hooks/x HTTP/1.1\r\nHost: x\r\n%s: ", name);
	for (i = 0; i < value_len; i++) {
		buf_puts(&b, "h");
	}
	buf_puts(&b, "\r\nContent-Length: 2\r\n\r\n{}");
	s = buf_take(&b, NULL);
	buf_finish(&b);
	return s;
}

static void test_heads_over_the_limit_get_431(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	struct buf b;
	char *req;
	int i;

	/* Over HTTP_HEAD_MAX, within libmicrohttpd's pool: our problem. */
	req = request_with_header("X-Big", HTTP_HEAD_MAX);
	expect_refusal(http_port(srv), req, strlen(req), 431, "headers_too_large");
	free(req);
	/* Beyond what the 16 KiB pool holds: libmicrohttpd's own 431, an
	 * answer and a close, not a dropped connection. */
	req = request_with_header("X-Huge", 20000);
	expect_refusal(http_port(srv), req, strlen(req), 431, NULL);
	free(req);
	/* HTTP_HEADERS_MAX fields in HTTP_HEAD_MAX bytes fit. */
	buf_init(&b, 0);
	buf_puts(&b, "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n");
	for (i = 2; i < HTTP_HEADERS_MAX; i++) {
		buf_printf(&b, "X-H%02d: %060d\r\n", i, i);
	}
	buf_puts(&b, "\r\n{}");
	assert_true(b.buf_len < HTTP_HEAD_MAX);
	expect_routed(http_port(srv), b.buf_data, b.buf_len, "headers=100");
	buf_finish(&b);
	/* One more field is one too many. */
	buf_init(&b, 0);
	buf_puts(&b, "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n");
	for (i = 2; i <= HTTP_HEADERS_MAX; i++) {
		buf_printf(&b, "X-H%02d: %d\r\n", i, i);
	}
	buf_puts(&b, "\r\n{}");
	expect_refusal(http_port(srv), b.buf_data, b.buf_len, 431, "too_many_headers");
	buf_finish(&b);
	http_destroy(srv);
}

static void test_conflicting_content_lengths_get_400(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char differ[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: "
	                      "2\r\nContent-Length: 3\r\n\r\n{}x";
	const char bad[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: "
	                   "2\r\nContent-Length: +2\r\n\r\n{}";
	const char same[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: "
	                    "2\r\nContent-Length: 2\r\n\r\n{}";

	expect_refusal(http_port(srv), differ, sizeof(differ) - 1, 400,
	               "conflicting_content_length");
	expect_refusal(http_port(srv), bad, sizeof(bad) - 1, 400, "conflicting_content_length");
	/* The same length twice is one length (RFC 9112 6.3). */
	expect_routed(http_port(srv), same, sizeof(same) - 1, "len=2");
	http_destroy(srv);
}

static void test_transfer_encoding_is_chunked_alone_or_refused(void **state)
{
	char url[128];
	struct http_server *srv = start(1024, NULL, url);
	const char with_cl[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: "
	                       "7\r\nTransfer-Encoding: chunked\r\n\r\n"
	                       "2\r\n{}\r\n0\r\n\r\n";
	const char gzip[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
	                    "gzip\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
	const char gzip_chunked[] =
	        "POST /hooks/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
	        "2\r\n{}\r\n0\r\n\r\n";
	const char two[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	                   "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
	const char http10[] = "POST /hooks/x HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: "
	                      "chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
	const char chunked[] =
	        "POST /hooks/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	        "2\r\n{}\r\n0\r\n\r\n";

	expect_refusal(http_port(srv), with_cl, sizeof(with_cl) - 1, 400, "ambiguous_framing");
	expect_refusal(http_port(srv), http10, sizeof(http10) - 1, 400, "ambiguous_framing");
	/* A coding other than chunked last: the length cannot be known. */
	expect_refusal(http_port(srv), gzip, sizeof(gzip) - 1, 400, "bad_transfer_encoding");
	expect_refusal(http_port(srv), gzip_chunked, sizeof(gzip_chunked) - 1, 501,
	               "unsupported_transfer_encoding");
	expect_refusal(http_port(srv), two, sizeof(two) - 1, 501, "unsupported_transfer_encoding");
	expect_routed(http_port(srv), chunked, sizeof(chunked) - 1, "len=2");
	http_destroy(srv);
}

static void decorate(void *arg, const struct http_request *req, const struct http_refusal *why,
                     struct reply *ret)
{
	reply_add_header(ret, "X-Decorated", req->hr_path);
	reply_add_header(ret, "X-Refusal", why->hf_slug);
}

static void test_the_route_layer_decorates_answers_made_before_routing(void **state)
{
	struct http_options ho;
	struct http_server *srv;
	const char big[] =
	        "POST /api/orders HTTP/1.1\r\nHost: x\r\nOrigin: https://shop.example\r\n"
	        "Content-Length: 101\r\n\r\n";
	struct rh_response r;
	char *v;

	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 2;
	ho.ho_conn_timeout_s = 10;
	ho.ho_body_max = 100;
	ho.ho_name = "test";
	ho.ho_refused = decorate;
	srv = http_create(&ho, echo_route, NULL);
	assert_non_null(srv);
	assert_int_equal(rh_exchange(http_port(srv), big, sizeof(big) - 1, 10000, &r), 1);
	assert_int_equal(r.rr_status, 413);
	assert_non_null(strstr(r.rr_body, "urn:idemhook:problem:body_too_large"));
	v = rh_header(&r, "X-Decorated");
	assert_non_null(v);
	assert_string_equal(v, "/api/orders");
	free(v);
	v = rh_header(&r, "X-Refusal");
	assert_non_null(v);
	assert_string_equal(v, "body_too_large");
	free(v);
	rh_response_finish(&r);
	http_destroy(srv);
}

/* ---- slow clients ---- */

static struct http_server *start_limited(unsigned head_ms, size_t rate, unsigned max_conns,
                                         unsigned per_ip)
{
	struct http_options ho;
	struct http_server *srv;

	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 2;
	ho.ho_conn_timeout_s = 30;
	ho.ho_head_timeout_ms = head_ms;
	ho.ho_body_min_rate = rate;
	ho.ho_max_connections = max_conns;
	ho.ho_per_ip_limit = per_ip;
	ho.ho_body_max = 1024 * 1024;
	ho.ho_name = "test";
	srv = http_create(&ho, echo_route, NULL);
	assert_non_null(srv);
	return srv;
}

/* Sends one header line every step_ms on fd until the server closes it or
 * limit_ms passed. Returns what the server sent before closing (malloc'd),
 * or NULL if it never closed. */
static char *trickle_until_closed(int fd, int step_ms, int limit_ms)
{
	int64_t end = hn_now_ms() + limit_ms;
	struct buf got;
	char chunk[1024];
	char *s;

	buf_init(&got, 0);
	while (hn_now_ms() < end) {
		ssize_t n;

		if (rh_send(fd, "X-Slow: 1\r\n", 11) < 0) {
			break; /* closed */
		}
		usleep((useconds_t)step_ms * 1000);
		n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
		if (n > 0) {
			buf_append(&got, chunk, (size_t)n);
		}
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			break; /* closed */
		}
	}
	if (hn_now_ms() >= end) {
		buf_finish(&got);
		return NULL;
	}
	if (rh_wait_closed(fd, 2000)) {
		/* drained */
	}
	s = buf_take(&got, NULL);
	buf_finish(&got);
	return s;
}

/* The peer's address is formatted once per connection: every request of a
 * keep-alive connection sees its own connection's, whichever connection the
 * server thread served before. */
static void test_each_keep_alive_request_sees_its_own_connections_peer(void **state)
{
	const char *trusted[] = {"127.0.0.3/32", NULL};
	char url[128];
	struct http_server *srv = start(1024, trusted, url);
	const char req[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char fwd[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.7\r\n"
	                   "Content-Length: 2\r\n\r\n{}";
	const char *source[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
	const char *want[] = {"peer=127.0.0.2 client=127.0.0.2",
	                      "peer=127.0.0.3 client=198.51.100.7",
	                      "peer=127.0.0.4 client=127.0.0.4"};
	int fd[3];
	struct rh_response r;
	int round;
	int i;

	(void)state;
	for (i = 0; i < 3; i++) {
		fd[i] = rh_connect(source[i], http_port(srv));
		assert_true(fd[i] >= 0);
	}
	for (round = 0; round < 4; round++) {
		for (i = 0; i < 3; i++) {
			if (i == 1) {
				assert_int_equal(rh_send(fd[i], fwd, sizeof(fwd) - 1), 0);
			} else {
				assert_int_equal(rh_send(fd[i], req, sizeof(req) - 1), 0);
			}
			assert_int_equal(rh_read_response(fd[i], 5000, &r), 1);
			assert_int_equal(r.rr_status, 200);
			assert_false(r.rr_close);
			assert_non_null(strstr(r.rr_body, want[i]));
			rh_response_finish(&r);
		}
	}
	for (i = 0; i < 3; i++) {
		close(fd[i]);
	}
	http_destroy(srv);
}

static void test_a_trickling_head_is_cut_at_its_deadline_with_408(void **state)
{
	struct http_server *srv = start_limited(1000, 0, 0, 0);
	int before = atomic_load(&routed);
	int fd = rh_connect(NULL, http_port(srv));
	char *got;

	/* One header line every 100 ms resets any idle timeout; the head's
	 * deadline holds anyway. */
	assert_true(fd >= 0);
	assert_int_equal(rh_send(fd, "POST /hooks/x HTTP/1.1\r\nHost: x\r\n", 33), 0);
	got = trickle_until_closed(fd, 100, 15000);
	assert_non_null(got);
	assert_non_null(strstr(got, "HTTP/1.1 408 "));
	assert_non_null(strstr(got, "urn:idemhook:problem:request_timeout"));
	free(got);
	close(fd);
	assert_int_equal(atomic_load(&routed), before);
	http_destroy(srv);
}

static void
test_an_idle_keep_alive_connection_is_not_a_slow_head_but_its_trickled_next_head_is(void **state)
{
	struct http_server *srv = start_limited(1000, 0, 0, 0);
	const char req[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	int fd = rh_connect(NULL, http_port(srv));
	struct rh_response r;
	char *got;

	assert_true(fd >= 0);
	assert_int_equal(rh_send(fd, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(fd, 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	/* Idle for longer than the head deadline: still served. */
	usleep(2500 * 1000);
	assert_int_equal(rh_send(fd, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(fd, 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	/* The next head, trickled, is cut. */
	assert_int_equal(rh_send(fd, "POST /hooks/x HTTP/1.1\r\n", 24), 0);
	got = trickle_until_closed(fd, 100, 15000);
	assert_non_null(got);
	assert_non_null(strstr(got, "HTTP/1.1 408 "));
	free(got);
	close(fd);
	http_destroy(srv);
}

/* The next request's first bytes on a kept-alive connection, come with the
 * previous request in one write (pipelined) or just after its answer
 * (before the sweeper looked at the idle connection), and then nothing
 * more: that head gets its 408 at the head deadline, not the 30 s
 * connection timeout. */
static void test_a_next_head_begun_with_or_right_after_a_request_gets_its_deadline(void **state)
{
	struct http_server *srv = start_limited(1000, 0, 0, 0);
	const char req[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char next[] = "POST /hoo"; /* not even the request line */
	char both[sizeof(req) + sizeof(next)];
	struct rh_response r;
	int64_t t0;
	int fd[2];
	int i;

	(void)state;
	snprintf(both, sizeof(both), "%s%s", req, next);
	for (i = 0; i < 2; i++) {
		fd[i] = rh_connect(NULL, http_port(srv));
		assert_true(fd[i] >= 0);
	}
	/* one write: the request and the next head's first bytes */
	assert_int_equal(rh_send(fd[0], both, strlen(both)), 0);
	/* the request, its answer, at once the next head's first bytes */
	assert_int_equal(rh_send(fd[1], req, sizeof(req) - 1), 0);
	t0 = hn_now_ms();
	for (i = 0; i < 2; i++) {
		assert_int_equal(rh_read_response(fd[i], 5000, &r), 1);
		assert_int_equal(r.rr_status, 200);
		assert_false(r.rr_close);
		rh_response_finish(&r);
	}
	assert_int_equal(rh_send(fd[1], next, sizeof(next) - 1), 0);
	for (i = 0; i < 2; i++) {
		int rc = rh_read_response(fd[i], 8000, &r);

		if (rc != 1) {
			fail_msg("connection %d: no 408 %lld ms after the head began", i,
			         (long long)(hn_now_ms() - t0));
		}
		assert_int_equal(r.rr_status, 408);
		rh_response_finish(&r);
		close(fd[i]);
	}
	http_destroy(srv);
}

static void test_keep_alive_requests_at_any_pace_are_never_taken_for_slow_heads(void **state)
{
	struct http_server *srv = start_limited(1000, 0, 0, 0);
	const char req[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	int fd = rh_connect(NULL, http_port(srv));
	unsigned seed = 7;
	struct rh_response r;
	int64_t end = hn_now_ms() + 4000;
	int n = 0;

	/* Idle gaps around the sweeper's look at idle connections: a request
	 * that comes and goes between two looks is no head begun. */
	assert_true(fd >= 0);
	while (hn_now_ms() < end) {
		assert_int_equal(rh_send(fd, req, sizeof(req) - 1), 0);
		assert_int_equal(rh_read_response(fd, 5000, &r), 1);
		assert_int_equal(r.rr_status, 200);
		assert_false(r.rr_close);
		rh_response_finish(&r);
		n++;
		usleep((useconds_t)(rand_r(&seed) % 150) * 1000);
	}
	usleep(1500 * 1000);
	assert_false(rh_closed_now(fd));
	assert_int_equal(rh_send(fd, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(fd, 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	print_message("%d requests on one connection\n", n + 1);
	close(fd);
	http_destroy(srv);
}

static void test_a_body_slower_than_the_floor_is_cut_with_408(void **state)
{
	struct http_server *srv = start_limited(0, 1000, 0, 0);
	const char head[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n";
	int before = atomic_load(&routed);
	int fd = rh_connect(NULL, http_port(srv));
	int64_t end = hn_now_ms() + 30000;
	struct buf got;
	char chunk[1024];
	int closed = 0;
	int sending = 1;

	assert_true(fd >= 0);
	assert_int_equal(rh_send(fd, head, sizeof(head) - 1), 0);
	buf_init(&got, 0);
	/* 100 bytes a second against a floor of 1000. The answer is read as
	 * soon as it arrives, and nothing more is sent once it has begun (or a
	 * send failed): the server resets the connection if it is still
	 * receiving when its linger ends, and a reset can destroy an answer
	 * not yet read. Under valgrind this thread can lose the CPU for long. */
	while (!closed && hn_now_ms() < end) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (sending && rh_send(fd, "0123456789", 10) < 0) {
			sending = 0;
		}
		if (poll(&pfd, 1, 100) <= 0) {
			continue;
		}
		n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
		if (n > 0) {
			buf_append(&got, chunk, (size_t)n);
			sending = 0;
		}
		closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
	}
	assert_true(closed);
	assert_non_null(got.buf_data);
	assert_non_null(strstr(got.buf_data, "HTTP/1.1 408 "));
	buf_finish(&got);
	close(fd);
	assert_int_equal(atomic_load(&routed), before);
	http_destroy(srv);
}

static void test_more_connections_than_fd_setsize_and_a_request_is_still_answered(void **state)
{
	enum { N = 1100 };
	struct http_server *srv = start_limited(60000, 0, 0, 0);
	const char get[] = "GET /hooks/x HTTP/1.1\r\nHost: x\r\n\r\n";
	static int fds[N];
	struct rh_response r;
	int i;

	for (i = 0; i < N; i++) {
		fds[i] = rh_connect(NULL, http_port(srv));
		assert_true(fds[i] >= 0);
		assert_int_equal(rh_send(fds[i], "POST /hooks/x HTTP/1.1\r\n", 24), 0);
	}
	for (i = 0; i < N; i++) {
		assert_int_equal(rh_send(fds[i], "X-Slow: 1\r\n", 11), 0);
	}
	assert_int_equal(rh_exchange(http_port(srv), get, sizeof(get) - 1, 10000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	/* None of them was cut to make room: the limit is far away. */
	for (i = 0; i < N; i++) {
		assert_false(rh_closed_now(fds[i]));
		close(fds[i]);
	}
	http_destroy(srv);
}

static void test_near_the_connection_limit_the_oldest_incomplete_heads_make_room(void **state)
{
	enum { LIMIT = 40 };
	struct http_server *srv = start_limited(60000, 0, LIMIT, 0);
	const char get[] = "GET /hooks/x HTTP/1.1\r\nHost: x\r\n\r\n";
	int fds[LIMIT];
	struct rh_response r;
	int i;

	for (i = 0; i < LIMIT; i++) {
		fds[i] = rh_connect(NULL, http_port(srv));
		assert_true(fds[i] >= 0);
		assert_int_equal(rh_send(fds[i], "POST /hooks/x HTTP/1.1\r\n", 24), 0);
		usleep(5000); /* each one older than the next */
	}
	/* A request that arrives whole is answered long before any head
	 * deadline: room was kept for it. */
	assert_int_equal(rh_exchange(http_port(srv), get, sizeof(get) - 1, 10000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	/* The oldest went first, told why; the newest stay. */
	for (i = 0; i < LIMIT / 10; i++) {
		char got[512] = "";
		ssize_t n = recv(fds[i], got, sizeof(got) - 1, 0);

		assert_true(n > 0);
		assert_non_null(strstr(got, "HTTP/1.1 408 "));
		assert_true(rh_wait_closed(fds[i], 5000));
	}
	assert_false(rh_closed_now(fds[LIMIT - 1]));
	for (i = 0; i < LIMIT; i++) {
		close(fds[i]);
	}
	http_destroy(srv);
}

static void test_the_per_address_limit_still_holds(void **state)
{
	struct http_server *srv = start_limited(60000, 0, 0, 3);
	const char get[] = "GET /hooks/x HTTP/1.1\r\nHost: x\r\n\r\n";
	struct rh_response r;
	int fds[3];
	int extra;
	int other;
	int i;

	for (i = 0; i < 3; i++) {
		fds[i] = rh_connect("127.0.0.1", http_port(srv));
		assert_true(fds[i] >= 0);
	}
	usleep(100 * 1000);
	extra = rh_connect("127.0.0.1", http_port(srv));
	assert_true(extra >= 0);
	assert_true(rh_wait_closed(extra, 5000));
	close(extra);
	other = rh_connect("127.0.0.2", http_port(srv));
	assert_true(other >= 0);
	assert_int_equal(rh_send(other, get, sizeof(get) - 1), 0);
	assert_int_equal(rh_read_response(other, 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	close(other);
	for (i = 0; i < 3; i++) {
		close(fds[i]);
	}
	http_destroy(srv);
}

static void test_at_the_connection_limit_a_new_connection_waits_and_is_served_once_one_closes(
        void **state)
{
	enum { LIMIT = 8 };
	const char get[] = "GET /deferred HTTP/1.1\r\nHost: x\r\n\r\n";
	struct deferrer df;
	struct http_options ho;
	struct http_server *srv;
	struct rh_response r;
	int fds[LIMIT];
	int extra;
	int tries;
	int i;

	memset(&df, 0, sizeof(df));
	pthread_mutex_init(&df.df_mutex, NULL);
	pthread_cond_init(&df.df_cond, NULL);
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 2;
	ho.ho_conn_timeout_s = 30;
	ho.ho_max_connections = LIMIT;
	ho.ho_name = "test";
	srv = http_create(&ho, defer_route, &df);
	assert_non_null(srv);
	/* LIMIT requests waiting for their answer: busy, none to cut for room.
	 * One at a time: near the limit the sweeper keeps room by cutting
	 * incomplete heads, and a head no server thread has read yet (a slow
	 * machine, sanitizers) is one. A request cut so (a 408) goes again on
	 * a new connection. */
	for (i = 0; i < LIMIT; i++) {
		for (tries = 0;; tries++) {
			assert_true(tries < 20);
			fds[i] = rh_connect(NULL, http_port(srv));
			assert_true(fds[i] >= 0);
			assert_int_equal(rh_send(fds[i], get, sizeof(get) - 1), 0);
			if (defer_wait_pending_or_cut(&df, (size_t)i + 1, fds[i])) {
				break;
			}
			close(fds[i]);
		}
	}
	/* One more is left in the kernel's queue: neither served nor closed. */
	extra = rh_connect(NULL, http_port(srv));
	assert_true(extra >= 0);
	assert_int_equal(rh_send(extra, get, sizeof(get) - 1), 0);
	usleep(300 * 1000);
	assert_false(rh_closed_now(extra));
	pthread_mutex_lock(&df.df_mutex);
	assert_int_equal(df.df_n_pending, LIMIT);
	pthread_mutex_unlock(&df.df_mutex);
	/* Answered and closed, the first makes room: the waiting one is taken. */
	defer_resume_all(&df);
	assert_int_equal(rh_read_response(fds[0], 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	close(fds[0]);
	/* Taken once fds[0] closed: answered, or (its head not read yet when
	 * the sweeper looked, at the limit again) cut for room with a 408. */
	if (defer_wait_pending_or_cut(&df, 1, extra)) {
		defer_resume_all(&df);
	}
	assert_int_equal(rh_read_response(extra, 5000, &r), 1);
	assert_true(r.rr_status == 200 || r.rr_status == 408);
	rh_response_finish(&r);
	close(extra);
	for (i = 1; i < LIMIT; i++) {
		close(fds[i]);
	}
	http_destroy(srv);
}

static int64_t cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* Out of descriptors, the listening socket stays readable and every accept
 * fails: the accept thread says so and waits between tries (libmicrohttpd's
 * own loop busy-waits there, taking a core), and a connection left in the
 * queue meanwhile is served once a descriptor frees. Everything is put back
 * before the checks, so a failure leaves the other tests their descriptors. */
static void test_out_of_descriptors_accepting_backs_off_logs_and_resumes(void **state)
{
	char path[] = "/tmp/idemhook-http-emfile-XXXXXX";
	const char get[] = "GET /hooks/x HTTP/1.1\r\nHost: x\r\n\r\n";
	int log_fd = -1;
	int saved;
	struct http_server *srv;
	struct rh_response r;
	struct sockaddr_in sa;
	struct rlimit old;
	struct rlimit low;
	int64_t cpu;
	char *text;
	int waited;
	int rc;
	int client;
	int last;

	/* valgrind keeps the file limit itself: it closes a descriptor the
	 * kernel gave above it, so the connection would be lost, not queued. */
	if (RUNNING_ON_VALGRIND) {
		skip();
	}
	saved = stderr_capture_begin(path, &log_fd);
	assert_true(saved >= 0);
	srv = start_limited(60000, 0, 0, 0);
	client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)http_port(srv));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* The lowest free descriptor, taken: with the limit just above it, no
	 * descriptor is left, and the server's accept fails with EMFILE. */
	last = open("/dev/null", O_RDONLY | O_CLOEXEC);
	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = (rlim_t)last + 1;
	setrlimit(RLIMIT_NOFILE, &low);
	rc = connect(client, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	     rh_send(client, get, sizeof(get) - 1) == 0;
	cpu = cpu_ms();
	usleep(1000 * 1000);
	cpu = cpu_ms() - cpu;
	waited = !rh_closed_now(client);
	/* A descriptor frees: the connection waiting in the queue is served. */
	close(last);
	rc = rc ? rh_read_response(client, 5000, &r) : -1;
	setrlimit(RLIMIT_NOFILE, &old);
	close(client);
	http_destroy(srv);
	text = stderr_capture_end(saved, log_fd, path);
	assert_true(last >= 0 && low.rlim_cur > 0);
	/* A spin would take most of a core for the second. */
	print_message("cpu while out of descriptors: %lld ms in 1000 ms\n", (long long)cpu);
	assert_true(cpu < 300);
	assert_true(waited);
	assert_int_equal(rc, 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	assert_non_null(text);
	assert_non_null(strstr(text, "<4>http test: accept: Too many open files; taking connections "
	                             "again in 100 ms"));
	free(text);
}

/* ---- drains and liveness ---- */

struct blocker {
	pthread_mutex_t bl_mutex;
	pthread_cond_t bl_cond;
	int bl_inside;
	int bl_release;
};

/* Waits until a thread is held in block_route. */
static void blocker_wait_inside(struct blocker *bl)
{
	pthread_mutex_lock(&bl->bl_mutex);
	while (bl->bl_inside == 0) {
		pthread_cond_wait(&bl->bl_cond, &bl->bl_mutex);
	}
	pthread_mutex_unlock(&bl->bl_mutex);
}

/* Lets a thread held in block_route go. */
static void blocker_release(struct blocker *bl)
{
	pthread_mutex_lock(&bl->bl_mutex);
	bl->bl_release = 1;
	pthread_cond_broadcast(&bl->bl_cond);
	pthread_mutex_unlock(&bl->bl_mutex);
}

static void block_route(void *arg, const struct http_request *req, struct reply *ret)
{
	struct blocker *bl = arg;

	pthread_mutex_lock(&bl->bl_mutex);
	bl->bl_inside++;
	pthread_cond_broadcast(&bl->bl_cond);
	while (!bl->bl_release) {
		pthread_cond_wait(&bl->bl_cond, &bl->bl_mutex);
	}
	pthread_mutex_unlock(&bl->bl_mutex);
	reply_set(ret, 200, "text/plain", "done", 4);
}

/* A GET of or_path (NULL: /block) on a thread of its own. */
struct one_request {
	unsigned or_port;
	const char *or_path;
	struct rh_response or_resp;
	int or_rc;
};

static void *one_request_run(void *arg)
{
	struct one_request * or = arg;
	char get[256];
	int n = snprintf(get, sizeof(get), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n",
	                 or->or_path != NULL ? or->or_path : "/block");

	or->or_rc = rh_exchange(or->or_port, get, (size_t)n, 20000, & or->or_resp);
	return NULL;
}

static void test_alive_says_whether_the_listener_threads_take_connections(void **state)
{
	struct blocker bl = {.bl_mutex = PTHREAD_MUTEX_INITIALIZER,
	                     .bl_cond = PTHREAD_COND_INITIALIZER};
	struct one_request or ;
	struct http_options ho;
	struct http_server *srv;
	char err[128];
	int alive_held;
	pthread_t t;

	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 1;
	ho.ho_conn_timeout_s = 30;
	ho.ho_name = "test";
	srv = http_create(&ho, block_route, &bl);
	assert_non_null(srv);
	assert_int_equal(http_alive(srv, 2000, err, sizeof(err)), 1);
	/* Its only thread stuck in a route: nobody takes a connection. */
	memset(& or, 0, sizeof(or));
	or.or_port = http_port(srv);
	assert_int_equal(pthread_create(&t, NULL, one_request_run, & or), 0);
	blocker_wait_inside(&bl);
	alive_held = http_alive(srv, 300, err, sizeof(err));
	/* Let go before any assertion: a failed one must not leave the
	 * thread held and the server running into the next test. */
	blocker_release(&bl);
	pthread_join(t, NULL);
	assert_int_equal(alive_held, 0);
	assert_non_null(strstr(err, "no server thread"));
	assert_int_equal(or.or_rc, 1);
	assert_int_equal(or.or_resp.rr_status, 200);
	rh_response_finish(& or.or_resp);
	assert_int_equal(http_alive(srv, 2000, err, sizeof(err)), 1);
	http_destroy(srv);
}

/* /block as block_route, anything else as defer_route. */
struct defer_or_block {
	struct deferrer db_df;
	struct blocker db_bl;
};

static void defer_or_block_route(void *arg, const struct http_request *req, struct reply *ret)
{
	struct defer_or_block *db = arg;

	if (strcmp(req->hr_path, "/block") == 0) {
		block_route(&db->db_bl, req, ret);
	} else {
		defer_route(&db->db_df, req, ret);
	}
}

/* idemhook_http_resume_seconds_total: a request resumed while its only
 * server thread is held elsewhere counts the time until that thread takes
 * its answer up, and idemhook_http_resumes_total counts it once. */
static void test_a_resumed_request_counts_its_wait_for_the_server_thread(void **state)
{
	struct defer_or_block db;
	struct one_request or ;
	struct one_request deferred;
	struct http_options ho;
	struct http_server *srv;
	double resumes;
	double seconds;
	pthread_t tp;
	pthread_t tb;

	memset(&db, 0, sizeof(db));
	pthread_mutex_init(&db.db_df.df_mutex, NULL);
	pthread_cond_init(&db.db_df.df_cond, NULL);
	pthread_mutex_init(&db.db_bl.bl_mutex, NULL);
	pthread_cond_init(&db.db_bl.bl_cond, NULL);
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 1;
	ho.ho_conn_timeout_s = 30;
	ho.ho_name = "resume";
	resumes = listener_metric("idemhook_http_resumes_total", "resume");
	seconds = listener_metric("idemhook_http_resume_seconds_total", "resume");
	srv = http_create(&ho, defer_or_block_route, &db);
	assert_non_null(srv);
	memset(&deferred, 0, sizeof(deferred));
	deferred.or_port = http_port(srv);
	deferred.or_path = "/deferred";
	assert_int_equal(pthread_create(&tp, NULL, one_request_run, &deferred), 0);
	defer_wait_pending(&db.db_df, 1);
	/* The only thread holds /block: it suspended the deferred request
	 * before it took this one. */
	memset(& or, 0, sizeof(or));
	or.or_port = http_port(srv);
	assert_int_equal(pthread_create(&tb, NULL, one_request_run, & or), 0);
	blocker_wait_inside(&db.db_bl);
	defer_resume_all(&db.db_df);
	usleep(200 * 1000);
	blocker_release(&db.db_bl);
	pthread_join(tb, NULL);
	pthread_join(tp, NULL);
	/* The sweeper hands the counts over as it stops. */
	http_destroy(srv);
	assert_int_equal(deferred.or_rc, 1);
	assert_int_equal(deferred.or_resp.rr_status, 200);
	rh_response_finish(&deferred.or_resp);
	assert_int_equal(or.or_rc, 1);
	rh_response_finish(& or.or_resp);
	assert_int_equal(db.db_df.df_finished, 1);
	resumes = listener_metric("idemhook_http_resumes_total", "resume") - resumes;
	seconds = listener_metric("idemhook_http_resume_seconds_total", "resume") - seconds;
	print_message("resumed %.0f, waited %.3f s for the server thread\n", resumes, seconds);
	assert_true(resumes == 1);
	assert_true(seconds >= 0.19 && seconds < 5);
}

/* Blocks on /block (as block_route), answers anything else at once. */
static void block_some_route(void *arg, const struct http_request *req, struct reply *ret)
{
	if (strcmp(req->hr_path, "/block") == 0) {
		block_route(arg, req, ret);
		return;
	}
	reply_set(ret, 200, "text/plain", "ok", 2);
}

static const char stall_get[] = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";

/* A single-threaded server on block_some_route for the stall tests, named
 * name: the wake-up counter is per listener name, and a test that failed
 * leaves its server running (cmocka leaves the test at the assertion), its
 * thread woken every 500 ms. n kept-alive connections to it in fds, each
 * with one request answered. */
static struct http_server *stall_start(struct blocker *bl, const char *name, int *fds, int n)
{
	struct http_options ho;
	struct http_server *srv;
	struct rh_response r;
	int i;

	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 1;
	ho.ho_conn_timeout_s = 30;
	/* libmicrohttpd keys its per-address count on the wake-up's address too */
	ho.ho_per_ip_limit = 2 * n;
	ho.ho_name = name;
	srv = http_create(&ho, block_some_route, bl);
	assert_non_null(srv);
	for (i = 0; i < n; i++) {
		fds[i] = rh_connect(NULL, http_port(srv));
		assert_true(fds[i] >= 0);
		assert_int_equal(rh_send(fds[i], stall_get, sizeof(stall_get) - 1), 0);
		assert_int_equal(rh_read_response(fds[i], 5000, &r), 1);
		assert_int_equal(r.rr_status, 200);
		rh_response_finish(&r);
	}
	return srv;
}

/* Holds the server's only thread in /block (sent on block_fd), sends a
 * request on each of the n connections in fds meanwhile, and waits up to
 * 5 s for the sweeper of listener name to wake the thread. Returns the ms
 * from the requests to the wake-up, or -1. The thread stays in the route
 * until blocker_release. */
static int64_t stall_wake_ms(struct blocker *bl, const char *name, int block_fd, const int *fds,
                             int n)
{
	const char block[] = "GET /block HTTP/1.1\r\nHost: x\r\n\r\n";
	long long wakeups = thread_wakeups(name);
	int64_t t0;
	int i;

	assert_int_equal(rh_send(block_fd, block, sizeof(block) - 1), 0);
	blocker_wait_inside(bl);
	t0 = hn_now_ms();
	for (i = 0; i < n; i++) {
		assert_int_equal(rh_send(fds[i], stall_get, sizeof(stall_get) - 1), 0);
	}
	while (thread_wakeups(name) == wakeups && hn_now_ms() - t0 < 5000) {
		usleep(5 * 1000);
	}
	return thread_wakeups(name) > wakeups ? hn_now_ms() - t0 : -1;
}

/* libmicrohttpd (0.9.75 and later) reads at most 128 events per epoll_wait,
 * and when it gets exactly 128 it waits again, with the full timeout,
 * before it handles any of them: a server thread whose 128 connections all
 * became ready at once (it was busy meanwhile) then sits until another event
 * comes or the connection timeout closes them unanswered (the benchmark's
 * 256 connections on 2 threads, issue 24). The sweeper wakes such a thread:
 * one that holds this many connections as soon as it has left a request
 * unread for 40 ms (http.c, HTTP_STALL_READY_MS), well before the 500 ms
 * after which any thread with work is woken (HTTP_STALL_MS): here while it
 * is still busy, so the 128 never come alone. */
static void test_a_thread_with_128_requests_ready_at_once_answers_them_soon(void **state)
{
	enum { READY = 128 };
	struct blocker bl = {.bl_mutex = PTHREAD_MUTEX_INITIALIZER,
	                     .bl_cond = PTHREAD_COND_INITIALIZER};
	struct http_server *srv;
	struct rh_response r;
	int fds[READY + 1];
	int64_t t0;
	int64_t took;
	int64_t woken_ms;
	int64_t budget_ms;
	int answered = 0;
	int i;

	(void)state;
	srv = stall_start(&bl, "stall", fds, READY + 1);
	/* The only server thread busy in a route while 128 requests arrive. */
	woken_ms = stall_wake_ms(&bl, "stall", fds[READY], fds, READY);
	printf("# the busy thread with %d requests unread was woken after %lld ms\n", READY,
	       (long long)woken_ms);
	/* Checked once the thread is let go: a failed assertion ends the test
	 * with its server still running. */
	blocker_release(&bl);
	assert_int_equal(rh_read_response(fds[READY], 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	rh_response_finish(&r);
	/* Without the wake-up they wait for the connection timeout, 30 s. */
	budget_ms = RUNNING_ON_VALGRIND ? 20000 : 5000;
	t0 = hn_now_ms();
	for (i = 0; i < READY; i++) {
		int left = (int)(t0 + budget_ms - hn_now_ms());

		if (left > 0 && rh_read_response(fds[i], left, &r) == 1) {
			answered += r.rr_status == 200;
			rh_response_finish(&r);
		}
	}
	took = hn_now_ms() - t0;
	printf("# %d of %d requests ready at once answered in %lld ms (budget %lld ms)\n", answered,
	       READY, (long long)took, (long long)budget_ms);
	for (i = 0; i <= READY; i++) {
		close(fds[i]);
	}
	http_destroy(srv);
	assert_int_equal(answered, READY);
	assert_true(woken_ms >= 0);
	/* Under valgrind the sweeper itself may take that long. */
	if (!RUNNING_ON_VALGRIND) {
		assert_true(woken_ms < 250);
	}
}

/* The sooner wake-up wants a request left unread: a thread that holds 129
 * kept-alive connections with nothing on them and completes nothing is left
 * alone; and a thread with fewer connections than the 128-event stall
 * needs, busy while requests wait on 20 of them, is woken only after the
 * 500 ms of any thread with work, not after 40 ms. */
static void test_a_quiet_or_small_thread_is_not_woken_sooner(void **state)
{
	enum { CROWD = 129, FEW = 20 };
	struct blocker bl = {.bl_mutex = PTHREAD_MUTEX_INITIALIZER,
	                     .bl_cond = PTHREAD_COND_INITIALIZER};
	struct http_server *srv;
	struct rh_response r;
	long long wakeups;
	int fds[CROWD];
	int64_t woken_ms;
	int64_t done_ms;
	int64_t since_done_ms;
	int answered = 0;
	int i;

	(void)state;
	srv = stall_start(&bl, "quiet", fds, CROWD);
	wakeups = thread_wakeups("quiet");
	usleep(300 * 1000);
	assert_int_equal(thread_wakeups("quiet"), wakeups);
	/* Down to FEW + 1 connections; the thread busy while FEW requests wait,
	 * a request completed just before: the 500 ms count from there. */
	for (i = FEW + 1; i < CROWD; i++) {
		close(fds[i]);
	}
	assert_int_equal(rh_send(fds[0], stall_get, sizeof(stall_get) - 1), 0);
	assert_int_equal(rh_read_response(fds[0], 5000, &r), 1);
	rh_response_finish(&r);
	done_ms = hn_now_ms();
	woken_ms = stall_wake_ms(&bl, "quiet", fds[FEW], fds, FEW);
	/* Counted from the completion, not from the requests: on a loaded
	 * machine the test itself may take 500 ms to send them. */
	since_done_ms = hn_now_ms() - done_ms;
	printf("# the busy thread with %d connections was woken after %lld ms, %lld ms after the "
	       "last completion\n",
	       FEW + 1, (long long)woken_ms, (long long)since_done_ms);
	/* Checked once the thread is let go, as above. */
	blocker_release(&bl);
	for (i = 0; i <= FEW; i++) {
		if (rh_read_response(fds[i], 5000, &r) == 1) {
			answered += r.rr_status == 200;
			rh_response_finish(&r);
		}
		close(fds[i]);
	}
	http_destroy(srv);
	assert_int_equal(answered, FEW + 1);
	assert_true(woken_ms >= 0);
	/* No sooner than the 500 ms since that completion. */
	assert_true(since_done_ms >= 400);
}

/* A listener as quiet as the admin one (the health thread's probe every
 * 5 s) has always completed nothing for 500 ms: a request its thread has
 * been on for less than that is no stall, and the thread is not woken
 * while it takes it (the demo once logged "woke server threads"). Four
 * times a route held for 400 ms, after 700 ms with nothing to do: the
 * sweeper looks at a quiet thread every 500 to 600 ms, so it looks while
 * nearly every one of them is held. */
static void test_a_request_younger_than_the_stall_is_no_reason_to_wake_its_thread(void **state)
{
	enum { ROUNDS = 4 };
	const char block[] = "GET /block HTTP/1.1\r\nHost: x\r\n\r\n";
	struct blocker bl = {.bl_mutex = PTHREAD_MUTEX_INITIALIZER,
	                     .bl_cond = PTHREAD_COND_INITIALIZER};
	/* Under valgrind this thread may be late to let the route go. */
	int hold_ms = RUNNING_ON_VALGRIND ? 250 : 400;
	struct http_server *srv;
	struct rh_response r;
	long long wakeups;
	int answered = 0;
	int fd;
	int i;

	(void)state;
	srv = stall_start(&bl, "young", &fd, 1);
	wakeups = thread_wakeups("young");
	for (i = 0; i < ROUNDS; i++) {
		usleep(700 * 1000);
		pthread_mutex_lock(&bl.bl_mutex);
		bl.bl_inside = 0;
		bl.bl_release = 0;
		pthread_mutex_unlock(&bl.bl_mutex);
		assert_int_equal(rh_send(fd, block, sizeof(block) - 1), 0);
		blocker_wait_inside(&bl);
		usleep((useconds_t)hold_ms * 1000);
		blocker_release(&bl);
		if (rh_read_response(fd, 5000, &r) == 1) {
			answered += r.rr_status == 200;
			rh_response_finish(&r);
		}
	}
	wakeups = thread_wakeups("young") - wakeups;
	printf("# %d requests held %d ms on a quiet thread: woken %lld times\n", ROUNDS, hold_ms,
	       wakeups);
	close(fd);
	http_destroy(srv);
	assert_int_equal(answered, ROUNDS);
	assert_int_equal(wakeups, 0);
}

/* A GET over TLS on a thread of its own (https_get_status). */
struct https_held {
	char hh_url[128];
	const char *hh_ca;
	long hh_status;
};

static void *https_held_run(void *arg)
{
	struct https_held *hh = arg;

	hh->hh_status = https_get_status(hh->hh_url, hh->hh_ca);
	return NULL;
}

static void test_https_listener_serves_with_the_configured_certificate(void **state)
{
	char dir[] = "/tmp/idemhook-tls-XXXXXX";
	char cmd[1024];
	char key_path[128];
	char cert_path[128];
	char url[128];
	struct http_options ho;
	struct http_server *srv;
	char *key;
	char *cert;
	struct blocker bl = {.bl_mutex = PTHREAD_MUTEX_INITIALIZER,
	                     .bl_cond = PTHREAD_COND_INITIALIZER};
	struct https_held held;
	long long wakeups;
	pthread_t t;
	int woken;
	int i;

	assert_non_null(mkdtemp(dir));
	snprintf(key_path, sizeof(key_path), "%s/key.pem", dir);
	snprintf(cert_path, sizeof(cert_path), "%s/cert.pem", dir);
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 1 -subj "
	         "/CN=127.0.0.1 "
	         ">/dev/null 2>&1",
	         key_path, cert_path);
	assert_int_equal(system(cmd), 0);
	key = read_all(key_path);
	cert = read_all(cert_path);
	assert_non_null(key);
	assert_non_null(cert);
	/* The pair is checked before libmicrohttpd ever sees it. */
	assert_int_equal(crypto_tls_pair_check(cert, key), 0);
	assert_int_equal(crypto_tls_pair_check("-----BEGIN CERTIFICATE-----\nbroken\n", key), -1);
	assert_int_equal(crypto_tls_pair_check(cert, "not a key"), -1);
	{
		char other[1024];
		char *other_key;

		snprintf(other, sizeof(other),
		         "openssl genrsa -out %s/other.pem 2048 >/dev/null 2>&1", dir);
		assert_int_equal(system(other), 0);
		snprintf(other, sizeof(other), "%s/other.pem", dir);
		other_key = read_all(other);
		assert_non_null(other_key);
		assert_int_equal(crypto_tls_pair_check(cert, other_key), -1);
		free(other_key);
		unlink(other);
	}
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 1;
	ho.ho_conn_timeout_s = 10;
	ho.ho_body_max = 1024;
	ho.ho_tls_cert_pem = cert;
	ho.ho_tls_key_pem = key;
	srv = http_create(&ho, block_some_route, &bl);
	assert_non_null(srv);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/x", http_port(srv));
	assert_int_equal(https_get_status(url, cert_path), 200);
	/* A request its only thread has been on for HTTP_STALL_MS gets the
	 * thread woken: the closed connection it is handed goes through TLS
	 * too, and the listener serves on. */
	wakeups = thread_wakeups("http");
	snprintf(held.hh_url, sizeof(held.hh_url), "https://127.0.0.1:%u/block", http_port(srv));
	held.hh_ca = cert_path;
	assert_int_equal(pthread_create(&t, NULL, https_held_run, &held), 0);
	blocker_wait_inside(&bl);
	for (i = 0; i < 50 && thread_wakeups("http") == wakeups; i++) {
		usleep(100 * 1000);
	}
	woken = thread_wakeups("http") > wakeups;
	blocker_release(&bl);
	pthread_join(t, NULL);
	assert_true(woken);
	assert_int_equal(held.hh_status, 200);
	assert_int_equal(https_get_status(url, cert_path), 200);
	http_destroy(srv);
	free(key);
	free(cert);
	unlink(key_path);
	unlink(cert_path);
	rmdir(dir);
}

/* A connection whose client sends nothing, or stops inside its head or
 * its body, leaves its thread nothing to read: the thread is waiting, not
 * stalled, and is not woken however long that lasts (a browser's
 * preconnected socket made the demo log "woke server threads" every
 * 500 ms). Once the rest comes, each request is answered. */
static void test_a_client_that_sends_nothing_is_no_reason_to_wake_its_thread(void **state)
{
	const char head[] = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n";
	struct blocker bl = {.bl_mutex = PTHREAD_MUTEX_INITIALIZER,
	                     .bl_cond = PTHREAD_COND_INITIALIZER};
	struct http_server *srv;
	struct rh_response r;
	long long wakeups;
	int silent;
	int half_head;
	int half_body;
	int kept[4]; /* room under the per-address limit for three more */
	int answered = 0;
	int i;

	(void)state;
	srv = stall_start(&bl, "silent", kept, 4);
	wakeups = thread_wakeups("silent");
	silent = rh_connect(NULL, http_port(srv));
	half_head = rh_connect(NULL, http_port(srv));
	half_body = rh_connect(NULL, http_port(srv));
	assert_true(silent >= 0 && half_head >= 0 && half_body >= 0);
	assert_int_equal(rh_send(half_head, head, 10), 0);
	assert_int_equal(rh_send(half_body, head, sizeof(head) - 1), 0);
	assert_int_equal(rh_send(half_body, "{}", 2), 0);
	/* Three looks of the sweeper at a quiet thread, at the least. */
	usleep(1800 * 1000);
	wakeups = thread_wakeups("silent") - wakeups;
	printf("# three clients silent for 1.8 s on a quiet thread: woken %lld times\n", wakeups);
	assert_int_equal(rh_send(silent, stall_get, sizeof(stall_get) - 1), 0);
	assert_int_equal(rh_send(half_head, head + 10, sizeof(head) - 1 - 10), 0);
	assert_int_equal(rh_send(half_head, "{}{}", 4), 0);
	assert_int_equal(rh_send(half_body, "{}", 2), 0);
	if (rh_read_response(silent, 5000, &r) == 1) {
		answered += r.rr_status == 200;
		rh_response_finish(&r);
	}
	if (rh_read_response(half_head, 5000, &r) == 1) {
		answered += r.rr_status == 200;
		rh_response_finish(&r);
	}
	if (rh_read_response(half_body, 5000, &r) == 1) {
		answered += r.rr_status == 200;
		rh_response_finish(&r);
	}
	close(silent);
	close(half_head);
	close(half_body);
	for (i = 0; i < 4; i++) {
		close(kept[i]);
	}
	http_destroy(srv);
	assert_int_equal(answered, 3);
	assert_int_equal(wakeups, 0);
}

static void *destroy_run(void *arg)
{
	http_destroy(arg);
	return NULL;
}

/* 1 once a new connection to port is refused. */
static int refused_within(unsigned port, int ms)
{
	int64_t end = hn_now_ms() + ms;

	while (hn_now_ms() < end) {
		int fd = rh_connect(NULL, port);

		if (fd < 0 && errno == ECONNREFUSED) {
			return 1;
		}
		/* Connected, or reset while the socket was being closed. */
		if (fd >= 0) {
			close(fd);
		}
		usleep(10 * 1000);
	}
	return 0;
}

static void test_a_drain_refuses_new_connections_and_answers_every_started_request(void **state)
{
	struct http_server *srv = start_limited(60000, 0, 0, 0);
	const char req[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char head[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n{}";
	unsigned port = http_port(srv);
	int kept = rh_connect(NULL, port);
	int slow = rh_connect(NULL, port);
	struct rh_response r;
	pthread_t t;

	/* kept: a keep-alive connection between requests; slow: half its body
	 * sent. */
	assert_true(kept >= 0 && slow >= 0);
	assert_int_equal(rh_send(kept, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(kept, 5000, &r), 1);
	assert_false(r.rr_close);
	rh_response_finish(&r);
	assert_int_equal(rh_send(slow, head, sizeof(head) - 1), 0);
	usleep(100 * 1000);
	assert_int_equal(pthread_create(&t, NULL, destroy_run, srv), 0);
	/* New connections are refused at once, not left in a backlog. */
	assert_true(refused_within(port, 5000));
	/* The kept-alive connection's next request is answered, and closed. */
	assert_int_equal(rh_send(kept, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(kept, 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	assert_true(r.rr_close);
	rh_response_finish(&r);
	assert_true(rh_wait_closed(kept, 5000));
	/* The request under way is finished and answered, and closed. */
	assert_int_equal(rh_send(slow, "{}", 2), 0);
	assert_int_equal(rh_read_response(slow, 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	assert_non_null(strstr(r.rr_body, "len=4"));
	assert_true(r.rr_close);
	rh_response_finish(&r);
	pthread_join(t, NULL);
	close(kept);
	close(slow);
}

static void test_after_a_reload_old_connections_get_their_answer_and_close(void **state)
{
	struct http_options ho;
	struct http_server *srv = start_limited(60000, 0, 0, 0);
	const char req[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	int kept = rh_connect(NULL, http_port(srv));
	struct rh_response r;
	int fresh;

	assert_true(kept >= 0);
	assert_int_equal(rh_send(kept, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(kept, 5000, &r), 1);
	assert_false(r.rr_close);
	rh_response_finish(&r);
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 2;
	ho.ho_conn_timeout_s = 30;
	ho.ho_body_max = 1; /* the new settings show */
	ho.ho_name = "test";
	assert_int_equal(http_reload(srv, &ho), 0);
	/* The old generation answers the next request, with the old
	 * settings, and closes. */
	assert_int_equal(rh_send(kept, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(kept, 5000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	assert_true(r.rr_close);
	rh_response_finish(&r);
	assert_true(rh_wait_closed(kept, 5000));
	close(kept);
	fresh = rh_connect(NULL, http_port(srv));
	assert_true(fresh >= 0);
	assert_int_equal(rh_send(fresh, req, sizeof(req) - 1), 0);
	assert_int_equal(rh_read_response(fresh, 5000, &r), 1);
	assert_int_equal(r.rr_status, 413);
	rh_response_finish(&r);
	close(fresh);
	http_destroy(srv);
}

/* ---- reloads and a stop under load ---- */

#define STRESS_CLIENTS 12
#define STRESS_RELOADS 400

struct stress_client {
	unsigned sc_port;
	int sc_fresh; /* a new connection for every request */
	atomic_int *sc_stop;
	long sc_answered;
	long sc_closed; /* sent, and the connection ended cleanly without an answer */
	long sc_broken; /* a partial answer, an error or no answer in time */
	long sc_other;  /* answered, but not 200 */
	int sc_first_errno;  /* of the first broken one */
	int sc_first_status; /* of the first other one */
};

static void *stress_client_run(void *arg)
{
	struct stress_client *sc = arg;
	const char keep[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
	const char fresh[] = "POST /hooks/x HTTP/1.1\r\nHost: x\r\nConnection: "
	                     "close\r\nContent-Length: 2\r\n\r\n{}";
	int fd = -1;

	while (!atomic_load(sc->sc_stop)) {
		struct rh_response r;
		int rc;

		if (fd >= 0 && rh_closed_now(fd)) {
			close(fd);
			fd = -1;
		}
		if (fd < 0) {
			fd = rh_connect(NULL, sc->sc_port);
			if (fd < 0) {
				usleep(1000); /* refused: the server is stopping */
				continue;
			}
		}
		rc = sc->sc_fresh ? rh_send(fd, fresh, sizeof(fresh) - 1)
		                  : rh_send(fd, keep, sizeof(keep) - 1);
		rc = rc == 0 ? rh_read_response(fd, 30000, &r) : 0;
		if (rc == 1) {
			if (r.rr_status == 200) {
				sc->sc_answered++;
			} else if (sc->sc_other++ == 0) {
				sc->sc_first_status = r.rr_status;
			}
			if (!r.rr_close && !sc->sc_fresh) {
				rh_response_finish(&r);
				continue;
			}
			rh_response_finish(&r);
		} else if (rc == 0) {
			sc->sc_closed++;
		} else if (sc->sc_broken++ == 0) {
			sc->sc_first_errno = errno;
		}
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		close(fd);
	}
	return NULL;
}

/* Each reload begins the old generation's drain while its threads are busy
 * with new connections; then a stop drains the last one, clients still
 * sending. The process must survive every one of them. */
static void test_reloads_back_to_back_and_a_stop_under_load_keep_the_process_alive(void **state)
{
	struct stress_client sc[STRESS_CLIENTS];
	pthread_t th[STRESS_CLIENTS];
	struct http_options ho;
	struct http_server *srv;
	atomic_int stop;
	long answered = 0;
	int i;

	memset(&ho, 0, sizeof(ho));
	ho.ho_host = "127.0.0.1";
	ho.ho_threads = 16;
	ho.ho_conn_timeout_s = 30;
	ho.ho_name = "test";
	srv = http_create(&ho, echo_route, NULL);
	assert_non_null(srv);
	atomic_init(&stop, 0);
	for (i = 0; i < STRESS_CLIENTS; i++) {
		memset(&sc[i], 0, sizeof(sc[i]));
		sc[i].sc_port = http_port(srv);
		sc[i].sc_fresh = i % 2;
		sc[i].sc_stop = &stop;
		assert_int_equal(pthread_create(&th[i], NULL, stress_client_run, &sc[i]), 0);
	}
	usleep(100 * 1000);
	for (i = 0; i < STRESS_RELOADS; i++) {
		assert_int_equal(http_reload(srv, &ho), 0);
	}
	http_destroy(srv);
	atomic_store(&stop, 1);
	for (i = 0; i < STRESS_CLIENTS; i++) {
		pthread_join(th[i], NULL);
		print_message("client %d (%s): %ld answered, %ld other (first %d), %ld closed "
		              "unanswered, %ld broken (first: %s)\n",
		              i, sc[i].sc_fresh ? "new connections" : "keep-alive", sc[i].sc_answered,
		              sc[i].sc_other, sc[i].sc_first_status, sc[i].sc_closed, sc[i].sc_broken,
		              sc[i].sc_broken > 0 ? strerror(sc[i].sc_first_errno) : "-");
		answered += sc[i].sc_answered;
	}
	for (i = 0; i < STRESS_CLIENTS; i++) {
		assert_int_equal(sc[i].sc_broken, 0);
		assert_int_equal(sc[i].sc_other, 0);
		assert_true(sc[i].sc_answered > 0);
	}
	print_message("%ld answered through %d reloads and a stop\n", answered, STRESS_RELOADS);
}

/* A reply's header lines come back in order, name and value as added,
 * whether a line is split on the stack or, past 255 bytes, on the heap. */
struct reply_seen {
	struct buf rs_out;
};

static void reply_seen_header(void *arg, const char *name, const char *value)
{
	struct reply_seen *rs = arg;

	buf_printf(&rs->rs_out, "[%s|%s]", name, value);
}

static void test_reply_headers_come_back_as_added_short_and_long(void **state)
{
	char long_value[600];
	struct reply_seen rs;
	struct reply r;
	struct buf want;

	(void)state;
	memset(long_value, 'v', sizeof(long_value) - 1);
	long_value[sizeof(long_value) - 1] = '\0';
	reply_init(&r);
	assert_int_equal(reply_add_header(&r, "Idempotent-Replayed", "true"), 0);
	assert_int_equal(reply_add_header(&r, "X-Long", long_value), 0);
	assert_int_equal(reply_add_header(&r, "Retry-After", "1"), 0);
	assert_int_equal(reply_add_header(&r, "X-Empty", ""), 0);
	buf_init(&want, 0);
	buf_printf(&want, "Idempotent-Replayed: true\nX-Long: %s\nRetry-After: 1\nX-Empty: \n", long_value);
	assert_string_equal(r.reply_headers, want.buf_data);
	buf_finish(&want);
	buf_init(&rs.rs_out, 0);
	reply_each_header(&r, reply_seen_header, &rs);
	buf_init(&want, 0);
	buf_printf(&want, "[Idempotent-Replayed|true][X-Long|%s][Retry-After|1][X-Empty|]", long_value);
	assert_string_equal(rs.rs_out.buf_data, want.buf_data);
	buf_finish(&want);
	buf_finish(&rs.rs_out);
	reply_finish(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_reply_headers_come_back_as_added_short_and_long),
	        cmocka_unit_test(test_route_sees_the_raw_body_and_target_exactly),
	        cmocka_unit_test(test_announced_oversized_body_gets_413_before_it_is_read),
	        cmocka_unit_test(test_chunked_body_over_the_cap_gets_413),
	        cmocka_unit_test(test_forwarded_for_is_trusted_only_from_a_configured_proxy),
	        cmocka_unit_test(test_cidr_matching_covers_both_families_and_bad_input),
	        cmocka_unit_test(test_too_many_header_fields_get_431),
	        cmocka_unit_test(test_deferred_requests_wait_without_holding_a_thread),
	        cmocka_unit_test(test_a_resumed_request_counts_its_wait_for_the_server_thread),
	        cmocka_unit_test(test_an_answer_ready_before_the_route_returns_goes_out_at_once),
	        cmocka_unit_test(
	                test_client_gone_while_suspended_is_finished_once_and_the_server_goes_on),
	        cmocka_unit_test(test_destroy_waits_for_suspended_requests_and_answers_them),
	        cmocka_unit_test(
	                test_libmicrohttpd_speaks_through_the_log_with_a_priority_and_the_listener),
	        cmocka_unit_test(test_https_listener_serves_with_the_configured_certificate),
	        cmocka_unit_test(test_too_many_query_parameters_or_a_long_target_get_414),
	        cmocka_unit_test(test_nul_in_the_path_raw_or_encoded_gets_400_and_is_not_routed),
	        cmocka_unit_test(test_heads_over_the_limit_get_431),
	        cmocka_unit_test(test_conflicting_content_lengths_get_400),
	        cmocka_unit_test(test_an_encoded_slash_in_the_path_gets_400_and_is_not_routed),
	        cmocka_unit_test(test_a_folded_header_line_gets_400_and_is_not_routed),
	        cmocka_unit_test(test_two_host_fields_get_400),
	        cmocka_unit_test(test_an_http_1_1_request_without_host_gets_400),
	        cmocka_unit_test(test_transfer_encoding_is_chunked_alone_or_refused),
	        cmocka_unit_test(test_the_route_layer_decorates_answers_made_before_routing),
	        cmocka_unit_test(test_each_keep_alive_request_sees_its_own_connections_peer),
	        cmocka_unit_test(test_a_trickling_head_is_cut_at_its_deadline_with_408),
	        cmocka_unit_test(
	                test_an_idle_keep_alive_connection_is_not_a_slow_head_but_its_trickled_next_head_is),
	        cmocka_unit_test(
	                test_keep_alive_requests_at_any_pace_are_never_taken_for_slow_heads),
	        cmocka_unit_test(
	                test_a_next_head_begun_with_or_right_after_a_request_gets_its_deadline),
	        cmocka_unit_test(test_a_body_slower_than_the_floor_is_cut_with_408),
	        cmocka_unit_test(
	                test_more_connections_than_fd_setsize_and_a_request_is_still_answered),
	        cmocka_unit_test(
	                test_near_the_connection_limit_the_oldest_incomplete_heads_make_room),
	        cmocka_unit_test(test_the_per_address_limit_still_holds),
	        cmocka_unit_test(
	                test_at_the_connection_limit_a_new_connection_waits_and_is_served_once_one_closes),
	        cmocka_unit_test(test_out_of_descriptors_accepting_backs_off_logs_and_resumes),
	        cmocka_unit_test(test_alive_says_whether_the_listener_threads_take_connections),
	        cmocka_unit_test(test_a_thread_with_128_requests_ready_at_once_answers_them_soon),
	        cmocka_unit_test(test_a_quiet_or_small_thread_is_not_woken_sooner),
	        cmocka_unit_test(
	                test_a_request_younger_than_the_stall_is_no_reason_to_wake_its_thread),
	        cmocka_unit_test(test_a_client_that_sends_nothing_is_no_reason_to_wake_its_thread),
	        cmocka_unit_test(
	                test_a_drain_refuses_new_connections_and_answers_every_started_request),
	        cmocka_unit_test(test_after_a_reload_old_connections_get_their_answer_and_close),
	        cmocka_unit_test(
	                test_reloads_back_to_back_and_a_stop_under_load_keep_the_process_alive),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
