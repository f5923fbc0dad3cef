/* test_http.c: the HTTP listener over real loopback sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
		cmocka_unit_test(test_https_listener_serves_with_the_configured_certificate),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
