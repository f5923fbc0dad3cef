/* test_http.c: the HTTP listener over real loopback sockets. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "buf.h"
#include "crypto.h"
#include "harness.h"
#include "http.h"

/* Echoes what the route saw: body length, body hash-free bytes, addresses. */
static void echo_route(void *arg, const struct http_request *req, struct reply *ret)
{
	struct buf b;
	char *s;
	size_t len;

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
	assert_int_equal(http_cidr_match("10.0.0.0/8", "10.200.3.4"), 1);
	assert_int_equal(http_cidr_match("10.0.0.0/8", "11.0.0.1"), 0);
	assert_int_equal(http_cidr_match("192.0.2.1", "192.0.2.1"), 1);
	assert_int_equal(http_cidr_match("192.0.2.0/31", "192.0.2.2"), 0);
	assert_int_equal(http_cidr_match("0.0.0.0/0", "8.8.8.8"), 1);
	assert_int_equal(http_cidr_match("::1/128", "::1"), 1);
	assert_int_equal(http_cidr_match("2001:db8::/32", "2001:db8:1::5"), 1);
	assert_int_equal(http_cidr_match("2001:db8::/32", "2001:db9::5"), 0);
	assert_int_equal(http_cidr_match("10.0.0.0/33", "10.0.0.1"), -1);
	assert_int_equal(http_cidr_match("nonsense", "10.0.0.1"), -1);
	assert_int_equal(http_cidr_match("10.0.0.0/8", "not-an-address"), -1);
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
	int log_fd = mkstemp(path);
	int saved = dup(STDERR_FILENO);
	int a;
	int b;

	assert_true(log_fd >= 0 && saved >= 0);
	fflush(stderr);
	dup2(log_fd, STDERR_FILENO);
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
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(log_fd);
	text = read_all(path);
	unlink(path);
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
	CURL *c;
	long status = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(key_path, sizeof(key_path), "%s/key.pem", dir);
	snprintf(cert_path, sizeof(cert_path), "%s/cert.pem", dir);
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 1 -subj /CN=127.0.0.1 "
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

		snprintf(other, sizeof(other), "openssl genrsa -out %s/other.pem 2048 >/dev/null 2>&1", dir);
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
	srv = http_create(&ho, echo_route, NULL);
	assert_non_null(srv);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/x", http_port(srv));
	c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, cert_path);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	assert_int_equal(status, 200);
	curl_easy_cleanup(c);
	http_destroy(srv);
	free(key);
	free(cert);
	unlink(key_path);
	unlink(cert_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_route_sees_the_raw_body_and_target_exactly),
		cmocka_unit_test(test_announced_oversized_body_gets_413_before_it_is_read),
		cmocka_unit_test(test_chunked_body_over_the_cap_gets_413),
		cmocka_unit_test(test_forwarded_for_is_trusted_only_from_a_configured_proxy),
		cmocka_unit_test(test_cidr_matching_covers_both_families_and_bad_input),
		cmocka_unit_test(test_too_many_header_fields_get_431),
		cmocka_unit_test(test_deferred_requests_wait_without_holding_a_thread),
		cmocka_unit_test(test_an_answer_ready_before_the_route_returns_goes_out_at_once),
		cmocka_unit_test(test_client_gone_while_suspended_is_finished_once_and_the_server_goes_on),
		cmocka_unit_test(test_destroy_waits_for_suspended_requests_and_answers_them),
		cmocka_unit_test(test_libmicrohttpd_speaks_through_the_log_with_a_priority_and_the_listener),
		cmocka_unit_test(test_https_listener_serves_with_the_configured_certificate),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
