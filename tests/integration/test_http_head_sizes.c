/* test_http_head_sizes.c: docs/operations.md "Request head size" walked
 * through with raw sockets: a request whose head carries one large header
 * field gets an answer at every size, never a silently closed connection:
 * its normal answer within the limit (8192 bytes of request line and
 * header fields), 431 beyond it, and nothing stored. Around 16,000 bytes,
 * the edge of libmicrohttpd's per-connection pool, it used to get no
 * answer at all (on a kept-alive connection until the listener sent the
 * refusal libmicrohttpd had no room for), or one without the order API's
 * CORS headers. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "buf.h"
#include "crypto.h"
#include "fixtures.h"
#include "harness.h"
#include "rawhttp.h"

#define HS_PROBLEM "Content-Type: application/problem+json"

/* 431s answered with the listener's problem: each counted in
 * idemhook_http_refused_total, libmicrohttpd's own not. */
static int64_t hs_problems;

static void hs_count(const struct rh_response *r)
{
	if (r->rr_status == 431 && strstr(r->rr_head, HS_PROBLEM) != NULL) {
		hs_problems++;
	}
}

/* path's request with a head of head_size bytes (request line and header
 * fields with their line ends, the blank line too): the fields given
 * ("Name: value"), then an X-Filler field long enough; body body. Its
 * answer into r. Asserts that an answer came. */
/* Into b (initialised here): path's request with a head of head_size
 * bytes (or the least the fields allow), as hs_exchange says, then body. */
static void hs_request(struct buf *b, const char *path, size_t head_size, const char *const *fields,
                       const char *body)
{
	char end[64];
	size_t fixed;
	size_t i;

	snprintf(end, sizeof(end), "\r\nContent-Length: %zu\r\n\r\n", strlen(body));
	buf_init(b, 0);
	buf_printf(b, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
	           path);
	for (i = 0; fields != NULL && fields[i] != NULL; i++) {
		buf_printf(b, "%s\r\n", fields[i]);
	}
	buf_puts(b, "X-Filler: ");
	fixed = b->buf_len + strlen(end);
	for (i = fixed; i < head_size; i++) {
		buf_puts(b, "f");
	}
	buf_puts(b, end);
	assert_int_equal(b->buf_len, head_size > fixed ? head_size : fixed);
	buf_puts(b, body);
	assert_false(b->buf_overflow);
}

static void hs_exchange(const struct daemon *d, const char *path, size_t head_size,
                        const char *const *fields, const char *body, struct rh_response *r)
{
	struct buf b;
	int rc;

	hs_request(&b, path, head_size, fields, body);
	rc = rh_exchange(d->dm_port, b.buf_data, b.buf_len, 5000, r);
	if (rc != 1) {
		print_message("%s with a head of %zu bytes: no answer (%d)\n", path, head_size, rc);
	}
	assert_int_equal(rc, 1);
	buf_finish(&b);
}

/* A signed Stripe payment of event_id with a head of head_size bytes: its
 * answer's status. 431 ones must be our problem when want_problem. */
static int hs_stripe(const struct daemon *d, const char *event_id, const char *order_id,
                     size_t head_size, int want_problem)
{
	char *body = fx_stripe_payment(event_id, order_id, 1500, "eur");
	char *sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));
	char sig_field[1400];
	const char *fields[] = {sig_field, NULL};
	struct rh_response r;
	int status;

	snprintf(sig_field, sizeof(sig_field), "Stripe-Signature: %s", sig);
	hs_exchange(d, "/hooks/stripe", head_size, fields, body, &r);
	status = r.rr_status;
	hs_count(&r);
	print_message("stripe, a head of %zu bytes: %d\n", head_size, status);
	if (status == 431 && want_problem) {
		assert_non_null(strstr(r.rr_head, HS_PROBLEM));
		assert_non_null(strstr(r.rr_body, "headers_too_large"));
	}
	rh_response_finish(&r);
	free(sig);
	free(body);
	return status;
}

/* An order from the order API with a head of head_size bytes: its status. */
static int hs_order(const struct daemon *d, const char *key, size_t head_size, int want_problem)
{
	char key_field[200];
	const char *fields[] = {key_field, NULL};
	struct rh_response r;
	int status;

	snprintf(key_field, sizeof(key_field), "Idempotency-Key: %s", key);
	hs_exchange(d, "/api/orders", head_size, fields,
	            "{\"amount\": 1999, \"currency\": \"eur\"}", &r);
	status = r.rr_status;
	hs_count(&r);
	print_message("api, a head of %zu bytes: %d\n", head_size, status);
	if (status == 431) {
		/* not a provider's route: a problem, wherever it was noticed */
		if (want_problem) {
			assert_non_null(strstr(r.rr_head, HS_PROBLEM));
		}
	}
	rh_response_finish(&r);
	return status;
}

static void test_every_head_size_gets_an_answer_and_large_ones_store_nothing(void **state)
{
	static const size_t sizes[] = {8000, 15000, 16000, 17000, 40000};
	struct daemon *d = *state;
	char order_id[64];
	char id[64];
	size_t i;
	size_t n;

	fx_order(d, 1500, "eur", order_id);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT count(*) FROM orders"), 1);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		/* Our own problem up to what the pool holds; beyond it
		 * libmicrohttpd's own 431 (docs/operations.md). */
		int ours = sizes[i] < 16384;

		snprintf(id, sizeof(id), "evt_head_%zu", sizes[i]);
		if (sizes[i] <= 8192) {
			assert_int_equal(hs_stripe(d, id, order_id, sizes[i], ours), 200);
		} else {
			assert_int_equal(hs_stripe(d, id, order_id, sizes[i], ours), 431);
		}
		snprintf(id, sizeof(id), "head-key-%zu", sizes[i]);
		if (sizes[i] <= 8192) {
			assert_int_equal(hs_order(d, id, sizes[i], ours), 201);
		} else {
			assert_int_equal(hs_order(d, id, sizes[i], ours), 431);
		}
	}
	/* Every size around the pool's edge, byte by byte (in steps): an
	 * answer each time. */
	for (n = 15600; n < 16600; n += 4) {
		snprintf(id, sizeof(id), "evt_edge_%zu", n);
		assert_int_equal(hs_stripe(d, id, order_id, n, 0), 431);
		snprintf(id, sizeof(id), "edge-key-%zu", n);
		assert_int_equal(hs_order(d, id, n, 0), 431);
	}
	/* Nothing stored but what came under the limit: the first payment
	 * and the first order. */
	assert_int_equal(hn_db_int(d->dm_db, "SELECT count(*) FROM events"), 1);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT count(*) FROM orders"), 2);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT count(*) FROM events WHERE idem_key = "
	                                     "'evt_head_8000'"),
	                 1);
	/* each of the listener's own 431s counted once */
	{
		const char *line =
		        "\nidemhook_http_refused_total{listener=\"public\",status=\"431\"} ";
		char url[160];
		struct hres m;
		const char *at;

		snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
		assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &m), 0);
		at = strstr(m.hs_body, line);
		assert_non_null(at);
		print_message("431 problems: %" PRId64 ", counted: %s", hs_problems,
		              at + strlen(line));
		assert_true(hs_problems > 0);
		assert_int_equal(strtoll(at + strlen(line), NULL, 10), hs_problems);
		hres_finish(&m);
	}
}

/* A request of head_size bytes to path on fd (kept alive), with the
 * fields given before the filler; its answer into r. rh_read_response's
 * result. */
static int hs_send_on(int fd, const char *path, size_t head_size, const char *const *fields,
                      const char *body, struct rh_response *r)
{
	struct buf b;
	int rc;

	hs_request(&b, path, head_size, fields, body);
	if (rh_send(fd, b.buf_data, b.buf_len) < 0) {
		buf_finish(&b);
		return -2;
	}
	rc = rh_read_response(fd, 5000, r);
	buf_finish(&b);
	return rc;
}

#define HS_ORIGIN "https://shop.example"

/* r is the order API's 431 for a head too large, readable by a page of
 * HS_ORIGIN: problem+json, its type, the Origin echoed; the connection
 * fd is then closed. what and size say which in a failure. */
static void hs_assert_api_431_of(int rc, struct rh_response *r, int fd, const char *what,
                                 size_t size, const char *slug)
{
	char *acao;

	if (rc != 1) {
		fail_msg("%s, size %zu: no answer (%d)", what, size, rc);
	}
	acao = rh_header(r, "Access-Control-Allow-Origin");
	if (r->rr_status != 431 || strstr(r->rr_head, HS_PROBLEM) == NULL ||
	    strstr(r->rr_body, slug) == NULL || acao == NULL || strcmp(acao, HS_ORIGIN) != 0) {
		fail_msg("%s, size %zu: %d, Access-Control-Allow-Origin %s:\n%s\n%s", what, size,
		         r->rr_status, acao != NULL ? acao : "missing", r->rr_head,
		         r->rr_body != NULL ? r->rr_body : "");
	}
	free(acao);
	assert_true(r->rr_close);
	rh_response_finish(r);
	/* closed, and cleanly: no reset to destroy the answer */
	assert_int_equal(rh_wait_end(fd, 5000), 1);
}

static void hs_assert_api_431(int rc, struct rh_response *r, int fd, const char *what, size_t size)
{
	hs_assert_api_431_of(rc, r, fd, what, size, "urn:idemhook:problem:headers_too_large");
}

/* Heads over the limit (9000 bytes, 12300, then every 4 bytes from 15600
 * up to where libmicrohttpd's pool ends), on /api from a page: the
 * order API's own 431, with the CORS headers that let the page read it,
 * whether the request is a connection's first or comes on a connection
 * kept alive; then the connection is closed cleanly (its unread body
 * drained, no reset) and nothing is stored. A
 * head whose answer libmicrohttpd had no room left to send used to get
 * no answer at all on a kept-alive connection, and the listener's bare
 * 431 (no CORS) on a first one. Past the pool, libmicrohttpd's own HTML
 * 431, as docs/operations.md says. */
static void test_a_head_at_the_pools_edge_gets_the_api_431_with_cors_on_any_request(void **state)
{
	struct daemon *d = *state;
	const char *fields[] = {"Origin: " HS_ORIGIN, NULL};
	const char *order = "{\"amount\": 1999, \"currency\": \"eur\"}";
	struct rh_response r;
	size_t kept = 0;
	size_t n;
	int fd;
	int rc;

	for (n = 9000; n < 16600; n += n < 15600 ? 3300 : 4) {
		char key[64];
		const char *first[] = {key, "Origin: " HS_ORIGIN, NULL};

		/* a connection's first request */
		fd = rh_connect(NULL, d->dm_port);
		assert_true(fd >= 0);
		rc = hs_send_on(fd, "/api/orders", n, fields, order, &r);
		if (rc == 1 && strstr(r.rr_head, HS_PROBLEM) == NULL) {
			/* past the pool: libmicrohttpd's own */
			assert_int_equal(r.rr_status, 431);
			assert_non_null(strstr(r.rr_body, "<title>Request too big</title>"));
			assert_null(strstr(r.rr_head, "Access-Control-Allow-Origin"));
			rh_response_finish(&r);
			close(fd);
			assert_true(n > 16000);
			break;
		}
		hs_assert_api_431(rc, &r, fd, "first request", n);
		close(fd);

		/* the second on a kept-alive connection */
		fd = rh_connect(NULL, d->dm_port);
		assert_true(fd >= 0);
		snprintf(key, sizeof(key), "Idempotency-Key: kept-%zu", n);
		assert_int_equal(hs_send_on(fd, "/api/orders", 300, first, order, &r), 1);
		assert_int_equal(r.rr_status, 201);
		assert_false(r.rr_close);
		rh_response_finish(&r);
		kept++;
		rc = hs_send_on(fd, "/api/orders", n, fields, order, &r);
		hs_assert_api_431(rc, &r, fd, "kept alive", n);
		close(fd);
	}
	print_message("api 431s with CORS up to a head of %zu bytes\n", n);
	assert_true(n > 16000 && n < 16600);
	/* only the kept-alive connections' first orders */
	assert_int_equal(hn_db_int(d->dm_db, "SELECT count(*) FROM orders"), (int64_t)kept);
}

/* A small head with too many fields (150 to 260 of them, 8 bytes each):
 * their records fill libmicrohttpd's pool as the bytes of a large head
 * do. Each gets the order API's 431 too_many_headers with its CORS
 * headers, first request or kept alive, until libmicrohttpd's own HTML
 * 431; never a silent close (around 195 fields it used to get none). */
static void test_too_many_fields_get_the_api_431_with_cors_on_any_request(void **state)
{
	struct daemon *d = *state;
	const char *order = "{\"amount\": 1999, \"currency\": \"eur\"}";
	struct rh_response r;
	size_t n;

	for (n = 150; n < 260; n++) {
		const char *fields[300];
		char names[300][32];
		char key[64];
		const char *first[] = {key, "Origin: " HS_ORIGIN, NULL};
		int kept;
		size_t i;

		fields[0] = "Origin: " HS_ORIGIN;
		for (i = 0; i < n; i++) {
			snprintf(names[i], sizeof(names[i]), "X-F%zu: vvvvvvvv", i);
			fields[i + 1] = names[i];
		}
		fields[n + 1] = NULL;
		for (kept = 0; kept < 2; kept++) {
			int fd = rh_connect(NULL, d->dm_port);
			int rc;

			assert_true(fd >= 0);
			if (kept) {
				snprintf(key, sizeof(key), "Idempotency-Key: fields-%zu", n);
				assert_int_equal(
				        hs_send_on(fd, "/api/orders", 300, first, order, &r), 1);
				assert_int_equal(r.rr_status, 201);
				rh_response_finish(&r);
			}
			rc = hs_send_on(fd, "/api/orders", 0, fields, order, &r);
			if (rc == 1 &&
			    strstr(r.rr_body, "<title>Request too big</title>") != NULL) {
				rh_response_finish(&r); /* past the pool: libmicrohttpd's own */
				close(fd);
				assert_true(n > 180);
				print_message("api 431s with CORS up to %zu fields\n", n - 1);
				return;
			}
			hs_assert_api_431_of(rc, &r, fd,
			                     kept ? "kept alive, fields" : "first request, fields",
			                     n, "urn:idemhook:problem:too_many_headers");
			close(fd);
		}
	}
	fail_msg("libmicrohttpd took %zu fields", n);
}

/* Heads at the pool's edge at Alipay's path: its own refusal (text/plain
 * "fail", the body Alipay reads as "not taken, send it again"), on a
 * connection's first request and on one kept alive, never the listener's
 * problem+json nor a silent close; nothing stored. */
static void test_a_head_at_the_pools_edge_gets_alipays_own_refusal_on_any_request(void **state)
{
	struct daemon *d = *state;
	const char *order = "{\"amount\": 1999, \"currency\": \"eur\"}";
	struct rh_response r;
	size_t answered = 0;
	size_t n;

	for (n = 15600; n < 16600; n += 4) {
		char key[64];
		const char *first[] = {key, NULL};
		int kept;

		for (kept = 0; kept < 2; kept++) {
			int fd = rh_connect(NULL, d->dm_port);
			char *type;
			int rc;

			assert_true(fd >= 0);
			if (kept) {
				snprintf(key, sizeof(key), "Idempotency-Key: ali-kept-%zu", n);
				assert_int_equal(
				        hs_send_on(fd, "/api/orders", 300, first, order, &r), 1);
				assert_int_equal(r.rr_status, 201);
				rh_response_finish(&r);
			}
			rc = hs_send_on(fd, "/hooks/alipay", n, NULL, "notify_id=x", &r);
			if (rc == 1 && r.rr_status == 431 && strstr(r.rr_body, "<html>") != NULL) {
				rh_response_finish(&r); /* past the pool: libmicrohttpd's own */
				close(fd);
				assert_true(n > 16000);
				goto done;
			}
			if (rc != 1) {
				fail_msg("%s, a head of %zu bytes: no answer (%d)",
				         kept ? "kept alive" : "first request", n, rc);
			}
			type = rh_header(&r, "Content-Type");
			if (r.rr_status != 431 || type == NULL ||
			    strncmp(type, "text/plain", 10) != 0 ||
			    strcmp(r.rr_body, "fail") != 0) {
				fail_msg("%s, a head of %zu bytes: %d %s:\n%s",
				         kept ? "kept alive" : "first", n, r.rr_status,
				         type != NULL ? type : "(no type)", r.rr_body);
			}
			free(type);
			rh_response_finish(&r);
			assert_int_equal(rh_wait_end(fd, 5000), 1);
			close(fd);
			answered++;
		}
	}
done:
	print_message("alipay 431s in its format: %zu, up to a head of %zu bytes\n", answered, n);
	assert_true(n > 16000 && n < 16600);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT count(*) FROM events"), 0);
}

static int hs_alipay_setup(void **state)
{
	EVP_PKEY *key = EVP_RSA_gen(2048);
	unsigned char *der = NULL;
	char *b64 = NULL;
	int n = key != NULL ? i2d_PUBKEY(key, &der) : -1;
	int rc;

	if (n <= 0 || crypto_base64_encode(der, (size_t)n, &b64, NULL) < 0) {
		EVP_PKEY_free(key);
		return -1;
	}
	OPENSSL_free(der);
	EVP_PKEY_free(key);
	setenv("IDEMHOOK_HS_ALIPAY_PUB", b64, 1);
	free(b64);
	rc = daemon_setup(state, "[provider alipay]\ntype = alipay\napp_id = 2021001144680325\n"
	                         "seller_id = 2088031940831575\n"
	                         "public_key = env:IDEMHOOK_HS_ALIPAY_PUB\n\n"
	                         "[api]\nrate = 10000\nburst = 10000\n");
	return rc;
}

static int hs_setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI);
}

static int hs_api_setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI "\n[api]\ncors_origins = " HS_ORIGIN
	                                         "\nrate = 10000\nburst = 10000\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(
	                test_every_head_size_gets_an_answer_and_large_ones_store_nothing, hs_setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_head_at_the_pools_edge_gets_the_api_431_with_cors_on_any_request,
	                hs_api_setup, daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_too_many_fields_get_the_api_431_with_cors_on_any_request, hs_api_setup,
	                daemon_teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_head_at_the_pools_edge_gets_alipays_own_refusal_on_any_request,
	                hs_alipay_setup, daemon_teardown),
	};

	if (getenv("IDEMHOOK_TEST_FILTER") != NULL) {
		cmocka_set_test_filter(getenv("IDEMHOOK_TEST_FILTER"));
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
