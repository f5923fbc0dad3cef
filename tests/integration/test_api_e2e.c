/* test_api_e2e.c: the order API and the checkout page against the real
 * daemon over real HTTP: every status of the Idempotency-Key contract, CORS,
 * bearer tokens, rate limits, Post/Redirect/Get and the demo payment. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api.h"
#include "fixtures.h"
#include "harness.h"
#include "rawhttp.h"
#include "store.h"

#define E2E_ORIGIN "https://shop.example"
#define E2E_STRIPE_SECRET "whsec_api_e2e_test_secret"
/* A receiver that serves only the order API says so. */
#define API_ONLY_INI "[server]\nallow_no_providers = yes\n\n"

static struct daemon e2e_main;

static const char e2e_main_ini[] =
	"[demo]\nenabled = yes\n\n"
	"[provider stripe]\ntype = stripe\nsecret = " E2E_STRIPE_SECRET "\n\n"
	"[api]\ncors_origins = " E2E_ORIGIN " https://other.example\n"
	"body_max = 4k\nrate = 1000\nburst = 1000\n";

static int e2e_setup(void **state)
{
	if (daemon_init(&e2e_main, e2e_main_ini) < 0 || daemon_start(&e2e_main) < 0) {
		return -1;
	}
	return 0;
}

static int e2e_teardown(void **state)
{
	daemon_finish(&e2e_main);
	return 0;
}

static char *e2e_url(const struct daemon *d, const char *path)
{
	size_t n = strlen(d->dm_base) + strlen(path) + 1;
	char *u = malloc(n);

	assert_non_null(u);
	snprintf(u, n, "%s%s", d->dm_base, path);
	return u;
}

/* POST /api/orders with the given header lines (NULL-terminated, may be NULL)
 * plus Content-Type: application/json. */
static void e2e_post(const struct daemon *d, const char *const *extra, const char *body,
		     struct hres *ret)
{
	const char *headers[16];
	char *url = e2e_url(d, "/api/orders");
	size_t n = 0;

	headers[n++] = "Content-Type: application/json";
	while (extra != NULL && *extra != NULL && n < 15) {
		headers[n++] = *extra++;
	}
	headers[n] = NULL;
	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), ret), 0);
	free(url);
}

static void e2e_post_key(const struct daemon *d, const char *key_line, const char *body,
			 struct hres *ret)
{
	const char *extra[] = {key_line, NULL};

	e2e_post(d, extra, body, ret);
}

static void assert_header(const struct hres *r, const char *name, const char *want)
{
	char *v = hres_header(r, name);

	if (v == NULL || strcmp(v, want) != 0) {
		fail_msg("header %s: want \"%s\", got \"%s\"", name, want,
			 v != NULL ? v : "(none)");
	}
	free(v);
}

static void assert_header_contains(const struct hres *r, const char *name, const char *part)
{
	char *v = hres_header(r, name);

	if (v == NULL || strstr(v, part) == NULL) {
		fail_msg("header %s: want it to contain \"%s\", got \"%s\"", name, part,
			 v != NULL ? v : "(none)");
	}
	free(v);
}

static void assert_no_header(const struct hres *r, const char *name)
{
	char *v = hres_header(r, name);

	if (v != NULL) {
		fail_msg("header %s: want none, got \"%s\"", name, v);
	}
}

static void assert_problem(const struct hres *r, long status, const char *slug)
{
	char type[128];

	if (r->hs_status != status) {
		fail_msg("status: want %ld, got %ld: %s", status, r->hs_status,
			 r->hs_body != NULL ? r->hs_body : "");
	}
	assert_header(r, "Content-Type", "application/problem+json");
	snprintf(type, sizeof(type), "urn:idemhook:problem:%s", slug);
	if (r->hs_body == NULL || strstr(r->hs_body, type) == NULL) {
		fail_msg("problem type %s not in body: %s", type,
			 r->hs_body != NULL ? r->hs_body : "");
	}
	/* Every refusal says what to do about it (RFC 9457's detail), not
	 * only what it is. */
	if (strstr(r->hs_body, "\"title\":\"") == NULL ||
	    strstr(r->hs_body, "\"detail\":\"") == NULL ||
	    strstr(r->hs_body, "\"detail\":\"\"") != NULL) {
		fail_msg("problem without a title or a detail: %s", r->hs_body);
	}
	snprintf(type, sizeof(type), "\"status\":%ld", status);
	if (strstr(r->hs_body, type) == NULL) {
		fail_msg("problem without \"status\":%ld: %s", status, r->hs_body);
	}
	/* It ends its line, for people reading it in a terminal. */
	assert_true(r->hs_body_len > 0 && r->hs_body[r->hs_body_len - 1] == '\n');
}

/* The order id in a 201 body {"id":"ord_...","status":"created"}. */
static void e2e_order_id(const struct hres *r, char out[64])
{
	const char *p = r->hs_body != NULL ? strstr(r->hs_body, "\"id\":\"") : NULL;
	size_t n;

	assert_non_null(p);
	p += 6;
	n = strcspn(p, "\"");
	assert_true(n > 0 && n < 64);
	memcpy(out, p, n);
	out[n] = '\0';
}

static int64_t e2e_count(const struct daemon *d, const char *sql)
{
	return hn_db_int(d->dm_db, sql);
}

/* ---- the Idempotency-Key contract ---- */

static void test_post_without_idempotency_key_is_400(void **state)
{
	struct hres r;

	e2e_post(&e2e_main, NULL, "{\"amount\":1999,\"currency\":\"eur\"}", &r);
	assert_problem(&r, 400, "missing_idempotency_key");
	hres_finish(&r);
}

static void test_post_with_malformed_idempotency_key_is_400(void **state)
{
	static const char *const bad[] = {
		"Idempotency-Key: \"unterminated",
		"Idempotency-Key: \"a\", \"b\"",
		"Idempotency-Key: has space",
		"Idempotency-Key: \"\"",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hres r;

		e2e_post_key(&e2e_main, bad[i], "{\"amount\":1999,\"currency\":\"eur\"}", &r);
		assert_problem(&r, 400, "malformed_idempotency_key");
		hres_finish(&r);
	}
}

static void test_post_with_a_key_over_255_characters_is_400(void **state)
{
	char line[400];
	struct hres r;

	memcpy(line, "Idempotency-Key: ", 17);
	memset(line + 17, 'k', 256);
	line[17 + 256] = '\0';
	e2e_post_key(&e2e_main, line, "{\"amount\":1999,\"currency\":\"eur\"}", &r);
	assert_problem(&r, 400, "malformed_idempotency_key");
	hres_finish(&r);
}

static void test_post_with_several_idempotency_keys_is_400(void **state)
{
	const char *extra[] = {"Idempotency-Key: \"k-one\"", "Idempotency-Key: \"k-two\"", NULL};
	struct hres r;

	e2e_post(&e2e_main, extra, "{\"amount\":1999,\"currency\":\"eur\"}", &r);
	assert_problem(&r, 400, "several_idempotency_keys");
	hres_finish(&r);
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM idempotency_records WHERE idem_key LIKE 'k-%'"),
		0);
}

/* A field that may come once (RFC 9110 5.3) on two lines, the same or not:
 * 400, no line taken over the other, and the key is not consumed. */
static void test_a_repeated_single_field_is_400_and_consumes_no_key(void **state)
{
	static const char *const twice[][4] = {
	        {"Idempotency-Key: rep-1", "Content-Type: text/plain", NULL, NULL},
	        {"Idempotency-Key: rep-1", "Content-Type: application/json", NULL, NULL},
	        {"Idempotency-Key: rep-1", "X-Client-Id: shop-a", "X-Client-Id: shop-b", NULL},
	        {"Idempotency-Key: rep-1", "X-Client-Id: shop-a", "X-Client-Id: shop-a", NULL},
	        {"Idempotency-Key: rep-1", "Origin: " E2E_ORIGIN, "Origin: https://evil.example",
	         NULL},
	};
	const char *body = "{\"amount\":1999,\"currency\":\"eur\"}";
	const char *once[] = {"Idempotency-Key: rep-1", "X-Client-Id: shop-a", NULL};
	const char *keys_same[] = {"Idempotency-Key: rep-1", "Idempotency-Key: rep-1", NULL};
	const char *origins[] = {"Origin: " E2E_ORIGIN, "Origin: https://evil.example", NULL};
	char *url;
	size_t i;
	struct hres r;

	for (i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) {
		e2e_post(&e2e_main, twice[i], body, &r);
		assert_problem(&r, 400, "repeated_header");
		/* Which origin asked is unknown: no CORS answer for either. */
		assert_no_header(&r, "Access-Control-Allow-Origin");
		hres_finish(&r);
	}
	e2e_post(&e2e_main, keys_same, body, &r);
	assert_problem(&r, 400, "several_idempotency_keys");
	hres_finish(&r);
	assert_int_equal(e2e_count(&e2e_main, "SELECT count(*) FROM idempotency_records WHERE "
	                                      "idem_key = 'rep-1'"),
	                 0);
	/* A read with two origins is refused the same way. */
	url = e2e_url(&e2e_main, "/api/orders/ord_none");
	assert_int_equal(hn_http("GET", url, origins, NULL, 0, &r), 0);
	assert_problem(&r, 400, "repeated_header");
	assert_no_header(&r, "Access-Control-Allow-Origin");
	hres_finish(&r);
	free(url);
	/* The key is still fresh. */
	e2e_post(&e2e_main, once, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_no_header(&r, "Idempotent-Replayed");
	hres_finish(&r);
}

static void test_first_post_creates_the_order_and_answers_201_with_location(void **state)
{
	char id[64];
	char loc[128];
	char *url;
	struct hres r;
	struct hres g;

	e2e_post_key(&e2e_main, "Idempotency-Key: \"first-post-1\"",
		     "{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"cust-first\","
		     "\"line_items\":[{\"sku\":\"beans\",\"quantity\":1,\"unit_amount\":1999}]}",
		     &r);
	assert_int_equal(r.hs_status, 201);
	assert_header(&r, "Content-Type", "application/json");
	assert_no_header(&r, "Idempotent-Replayed");
	e2e_order_id(&r, id);
	assert_string_equal(strstr(r.hs_body, "\"status\":"), "\"status\":\"created\"}\n");
	snprintf(loc, sizeof(loc), "/api/orders/%s", id);
	assert_header(&r, "Location", loc);
	/* The reply is "accepted + id", never the order's state. */
	assert_null(strstr(r.hs_body, "amount"));

	url = e2e_url(&e2e_main, loc);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &g), 0);
	assert_int_equal(g.hs_status, 200);
	assert_non_null(strstr(g.hs_body, "\"status\":\"pending\""));
	assert_non_null(strstr(g.hs_body, "\"amount\":1999"));
	assert_non_null(strstr(g.hs_body, "\"currency\":\"EUR\""));
	assert_non_null(strstr(g.hs_body, "\"refunded_amount\":0"));
	assert_non_null(strstr(g.hs_body, "\"points\":0"));
	assert_non_null(strstr(g.hs_body, "\"fulfillment_status\":\"pending\""));
	assert_non_null(strstr(g.hs_body, "\"customer_ref\":\"cust-first\""));
	assert_non_null(strstr(g.hs_body, "\"paid_at\":null"));
	hres_finish(&g);
	hres_finish(&r);
	free(url);
}

static void test_retry_with_same_key_replays_the_201_byte_for_byte(void **state)
{
	const char *body = "{\"amount\":2500,\"currency\":\"usd\",\"customer_ref\":\"cust-retry\"}";
	char *loc1;
	char *loc2;
	struct hres a;
	struct hres b;

	e2e_post_key(&e2e_main, "Idempotency-Key: retry-1", body, &a);
	e2e_post_key(&e2e_main, "Idempotency-Key: \"retry-1\"", body, &b);
	assert_int_equal(a.hs_status, 201);
	assert_int_equal(b.hs_status, 201);
	assert_int_equal(a.hs_body_len, b.hs_body_len);
	assert_memory_equal(a.hs_body, b.hs_body, a.hs_body_len);
	loc1 = hres_header(&a, "Location");
	loc2 = hres_header(&b, "Location");
	assert_non_null(loc1);
	assert_non_null(loc2);
	assert_string_equal(loc1, loc2);
	assert_header(&b, "Idempotent-Replayed", "true");
	assert_int_equal(e2e_count(&e2e_main,
				   "SELECT count(*) FROM orders WHERE customer_ref = 'cust-retry'"),
			 1);
	free(loc1);
	free(loc2);
	hres_finish(&a);
	hres_finish(&b);
}

static void test_reordered_json_with_other_whitespace_is_a_replay_not_422(void **state)
{
	struct hres a;
	struct hres b;

	e2e_post_key(&e2e_main, "Idempotency-Key: reorder-1",
		     "{\"amount\":700,\"currency\":\"eur\",\"customer_ref\":\"cust-reorder\"}", &a);
	e2e_post_key(&e2e_main, "Idempotency-Key: reorder-1",
		     "{\n  \"customer_ref\" : \"cust-reorder\",\n  \"currency\": \"eur\",\n  "
		     "\"amount\": 700.0\n}\n",
		     &b);
	assert_int_equal(a.hs_status, 201);
	assert_int_equal(b.hs_status, 201);
	assert_header(&b, "Idempotent-Replayed", "true");
	assert_string_equal(a.hs_body, b.hs_body);
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM orders WHERE customer_ref = 'cust-reorder'"),
		1);
	hres_finish(&a);
	hres_finish(&b);
}

static void test_same_key_with_a_changed_amount_is_422(void **state)
{
	struct hres a;
	struct hres b;

	e2e_post_key(&e2e_main, "Idempotency-Key: changed-1",
		     "{\"amount\":1000,\"currency\":\"eur\",\"customer_ref\":\"cust-changed\"}",
		     &a);
	e2e_post_key(&e2e_main, "Idempotency-Key: changed-1",
		     "{\"amount\":1001,\"currency\":\"eur\",\"customer_ref\":\"cust-changed\"}",
		     &b);
	assert_int_equal(a.hs_status, 201);
	assert_problem(&b, 422, "idempotency_key_reused");
	assert_no_header(&b, "Location");
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM orders WHERE customer_ref = 'cust-changed'"),
		1);
	hres_finish(&a);
	hres_finish(&b);
}

static void test_concurrent_identical_posts_create_one_order(void **state)
{
	const char *body = "{\"amount\":4200,\"currency\":\"eur\",\"customer_ref\":\"cust-storm\"}";
	const char *headers[] = {"Content-Type: application/json", "Idempotency-Key: \"storm-1\"",
				 NULL};
	struct hres r[32];
	char first[64];
	char *url = e2e_url(&e2e_main, "/api/orders");
	size_t n_replayed = 0;
	size_t i;

	assert_int_equal(hn_http_storm(32, "POST", url, headers, body, strlen(body), r), 0);
	e2e_order_id(&r[0], first);
	for (i = 0; i < 32; i++) {
		char id[64];
		char *rep = hres_header(&r[i], "Idempotent-Replayed");

		assert_int_equal(r[i].hs_status, 201);
		e2e_order_id(&r[i], id);
		assert_string_equal(id, first);
		n_replayed += rep != NULL;
		free(rep);
		hres_finish(&r[i]);
	}
	assert_int_equal(n_replayed, 31);
	assert_int_equal(e2e_count(&e2e_main,
				   "SELECT count(*) FROM orders WHERE customer_ref = 'cust-storm'"),
			 1);
	free(url);
}

static void test_two_clients_with_the_same_key_get_two_orders(void **state)
{
	const char *a_h[] = {"Idempotency-Key: shared-key", "X-Client-Id: shop-a", NULL};
	const char *b_h[] = {"Idempotency-Key: shared-key", "X-Client-Id: shop-b", NULL};
	const char *body =
		"{\"amount\":300,\"currency\":\"eur\",\"customer_ref\":\"cust-two-clients\"}";
	char ida[64];
	char idb[64];
	struct hres a;
	struct hres b;

	e2e_post(&e2e_main, a_h, body, &a);
	e2e_post(&e2e_main, b_h, body, &b);
	assert_int_equal(a.hs_status, 201);
	assert_int_equal(b.hs_status, 201);
	assert_no_header(&b, "Idempotent-Replayed");
	e2e_order_id(&a, ida);
	e2e_order_id(&b, idb);
	assert_string_not_equal(ida, idb);
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM orders WHERE customer_ref = 'cust-two-clients'"),
		2);
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM idempotency_records WHERE idem_key = "
			  "'shared-key' AND scope IN ('api:orders:shop-a', 'api:orders:shop-b')"),
		2);
	hres_finish(&a);
	hres_finish(&b);
}

/* A request in flight: the test opens the same database and commits a
 * processing record with a live lease through store_claim_begin, exactly what
 * a handler waiting on something outside the database leaves behind. */
static void e2e_begin_claim(const char *db, const char *key, const char *body, int64_t lease_ms)
{
	struct store_options so;
	struct store_claim c;
	struct store *st;

	memset(&so, 0, sizeof(so));
	/* a file, or the daemon's PostgreSQL database in the suite postgresql */
	assert_int_equal(store_location_parse(db, &so), 0);
	st = store_create(&so);
	assert_non_null(st);
	memset(&c, 0, sizeof(c));
	c.sc_scope = "api:orders:anonymous";
	c.sc_key = key;
	assert_int_equal(api_fingerprint(body, strlen(body), c.sc_fingerprint), 0);
	c.sc_now_ms = hn_now_ms();
	c.sc_retention_ms = 7LL * 24 * 3600 * 1000;
	c.sc_lease_ms = lease_ms;
	store_claim_begin(st, &c);
	assert_int_equal(c.sc_outcome, STORE_CLAIMED);
	store_claim_finish(&c);
	store_destroy(st);
}

static void test_same_key_while_the_first_is_in_flight_is_409_with_retry_after(void **state)
{
	const char *body =
		"{\"amount\":900,\"currency\":\"eur\",\"customer_ref\":\"cust-inflight\"}";
	char *ra;
	struct hres r;

	e2e_begin_claim(e2e_main.dm_db, "inflight-1", body, 60000);
	e2e_post_key(&e2e_main, "Idempotency-Key: inflight-1", body, &r);
	assert_problem(&r, 409, "request_in_progress");
	ra = hres_header(&r, "Retry-After");
	assert_non_null(ra);
	assert_true(strtol(ra, NULL, 10) >= 1 && strtol(ra, NULL, 10) <= 60);
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM orders WHERE customer_ref = 'cust-inflight'"),
		0);
	free(ra);
	hres_finish(&r);
}

static void test_a_crashed_request_is_taken_over_once_its_lease_expires(void **state)
{
	const char *body =
		"{\"amount\":901,\"currency\":\"eur\",\"customer_ref\":\"cust-crashed\"}";
	struct hres r;
	struct hres again;

	e2e_begin_claim(e2e_main.dm_db, "crashed-1", body, 300);
	usleep(600 * 1000);
	e2e_post_key(&e2e_main, "Idempotency-Key: crashed-1", body, &r);
	assert_int_equal(r.hs_status, 201);
	e2e_post_key(&e2e_main, "Idempotency-Key: crashed-1", body, &again);
	assert_int_equal(again.hs_status, 201);
	assert_header(&again, "Idempotent-Replayed", "true");
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM orders WHERE customer_ref = 'cust-crashed'"),
		1);
	hres_finish(&r);
	hres_finish(&again);
}

/* ---- validation ---- */

static void test_invalid_orders_are_400_and_consume_no_key(void **state)
{
	static const char *const bodies[] = {
	        "{\"amount\":0,\"currency\":\"eur\"}",
	        "{\"amount\":19.99,\"currency\":\"eur\"}",
	        "{\"amount\":\"1999\",\"currency\":\"eur\"}",
	        "{\"amount\":1999,\"currency\":\"euro\"}",
	        "{\"amount\":1999}",
	        "{\"amount\":1999,\"currency\":\"eur\",\"surprise\":1}",
	        ("{\"amount\":1999,\"currency\":\"eur\",\"line_items\":[{\"sku\":\"a\","
	         "\"quantity\":"
	         "1,\"unit_amount\":1}]}"),
	        "[1999, \"eur\"]",
	        /* Control characters, C1 ones (U+0085 NEL, U+009B CSI) too. */
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"a\\u0085b\"}",
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"a\\u009b31m\"}",
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"x\\n\\u001b[31mRED\"}",
	};
	size_t i;

	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct hres r;

		e2e_post_key(&e2e_main, "Idempotency-Key: invalid-1", bodies[i], &r);
		assert_problem(&r, 400, "invalid_order");
		hres_finish(&r);
	}
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM idempotency_records WHERE idem_key = 'invalid-1'"),
		0);
}

static void test_currencies_iso_4217_does_not_list_are_400_and_create_nothing(void **state)
{
	static const char *const currencies[] = {"QQQ", "abc", "XAU", "HRK"};
	int64_t before = e2e_count(&e2e_main, "SELECT count(*) FROM orders");
	size_t i;

	for (i = 0; i < sizeof(currencies) / sizeof(currencies[0]); i++) {
		char body[96];
		struct hres r;

		snprintf(body, sizeof(body), "{\"amount\":1999,\"currency\":\"%s\"}", currencies[i]);
		e2e_post_key(&e2e_main, "Idempotency-Key: currency-1", body, &r);
		assert_problem(&r, 400, "invalid_order");
		assert_non_null(strstr(r.hs_body, "ISO 4217"));
		hres_finish(&r);
	}
	assert_int_equal(e2e_count(&e2e_main, "SELECT count(*) FROM orders"), before);
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM idempotency_records WHERE idem_key = 'currency-1'"),
		0);
}

/* Bodies JSON parsers disagree on are refused whole: nothing is created and
 * the key stays free for the real order. */
static void test_malformed_json_duplicate_keys_nul_and_trailing_bytes_are_400(void **state)
{
	static const char *const bodies[] = {
		"{\"amount\":1999,",
		"{\"amount\":1999,\"amount\":1,\"currency\":\"eur\"}",
		"{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"strict-ref\\u0000x\"}",
		"{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\\u0000x\":\"strict-ref\"}",
		/* two objects back to back: one string */
		("{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"strict-ref\"}"
		 "{\"amount\":1,\"currency\":\"eur\"}"),
		"{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"strict-ref\"} x",
		"{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"strict-\xc0\xae\"}",
	};
	struct hres r;
	size_t i;

	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		e2e_post_key(&e2e_main, "Idempotency-Key: badjson-1", bodies[i], &r);
		assert_problem(&r, 400, "malformed_json");
		hres_finish(&r);
	}
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM idempotency_records WHERE idem_key = 'badjson-1'"),
		0);
	assert_int_equal(
		e2e_count(&e2e_main, "SELECT count(*) FROM orders WHERE customer_ref LIKE 'strict-%'"),
		0);
	e2e_post_key(&e2e_main, "Idempotency-Key: badjson-1",
		     "{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"strict-ref\"}", &r);
	assert_int_equal(r.hs_status, 201);
	assert_no_header(&r, "Idempotent-Replayed");
	hres_finish(&r);
}

/* A refused body is told what is wrong with it, in the detail: the
 * reader's reason (a number no double holds is well-formed JSON, but not
 * JSON this API reads) or the unknown field by name; the key stays
 * unspent. */
static void test_refusals_name_what_is_wrong_with_the_body(void **state)
{
	struct hres r;

	e2e_post_key(&e2e_main, "Idempotency-Key: say-why-1",
	             "{\"amount\":1e400,\"currency\":\"eur\"}", &r);
	assert_problem(&r, 400, "malformed_json");
	assert_non_null(strstr(r.hs_body, "number out of range"));
	hres_finish(&r);
	e2e_post_key(&e2e_main, "Idempotency-Key: say-why-1",
	             "{\"amount\":1999,\"currency\":\"eur\",\"coupon\":\"X\"}", &r);
	assert_problem(&r, 400, "invalid_order");
	assert_non_null(strstr(r.hs_body, "Unknown field \\\"coupon\\\""));
	hres_finish(&r);
	e2e_post_key(&e2e_main, "Idempotency-Key: say-why-1",
	             "{\"amount\":1999,\"currency\":\"eur\"}", &r);
	assert_int_equal(r.hs_status, 201);
	assert_no_header(&r, "Idempotent-Replayed");
	hres_finish(&r);
}

static void test_wrong_content_type_is_415(void **state)
{
	const char *headers[] = {"Content-Type: text/plain", "Idempotency-Key: ct-1", NULL};
	const char *body = "{\"amount\":1999,\"currency\":\"eur\"}";
	char *url = e2e_url(&e2e_main, "/api/orders");
	struct hres r;

	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), &r), 0);
	assert_problem(&r, 415, "unsupported_media_type");
	assert_non_null(strstr(r.hs_body, "\"detail\":\"Send the order as a JSON object"));
	hres_finish(&r);
	free(url);
}

static void test_a_body_over_the_api_limit_is_413(void **state)
{
	char *body = malloc(6000);
	struct hres r;

	const char *prefix = "{\"amount\":1,\"currency\":\"eur\",\"customer_ref\":\"";
	size_t n = strlen(prefix);

	assert_non_null(body);
	memcpy(body, prefix, n);
	memset(body + n, 'x', 5900);
	memcpy(body + n + 5900, "\"}", 3);
	e2e_post_key(&e2e_main, "Idempotency-Key: big-1", body, &r);
	assert_problem(&r, 413, "body_too_large");
	hres_finish(&r);
	free(body);
}

static void test_a_body_over_the_server_limit_is_413_with_cors_for_an_allowed_origin(void **state)
{
	const char *allowed[] = {"Origin: " E2E_ORIGIN, "Idempotency-Key: huge-1", NULL};
	const char *evil[] = {"Origin: https://evil.example", "Idempotency-Key: huge-2", NULL};
	size_t len = 1024 * 1024 + 1; /* over [server] body_max: refused before routing */
	char *body = malloc(len + 1);
	struct hres r;

	assert_non_null(body);
	memset(body, ' ', len);
	body[len] = '\0';
	/* A browser on an allowed origin sees the problem, not a network error. */
	e2e_post(&e2e_main, allowed, body, &r);
	assert_problem(&r, 413, "body_too_large");
	assert_header(&r, "Access-Control-Allow-Origin", E2E_ORIGIN);
	assert_header_contains(&r, "Access-Control-Expose-Headers", "Retry-After");
	hres_finish(&r);
	e2e_post(&e2e_main, evil, body, &r);
	assert_problem(&r, 413, "body_too_large");
	assert_no_header(&r, "Access-Control-Allow-Origin");
	hres_finish(&r);
	free(body);
}

static void test_unknown_orders_and_paths_are_404_problems(void **state)
{
	char *u1 = e2e_url(&e2e_main, "/api/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	char *u2 = e2e_url(&e2e_main, "/api/nothing");
	struct hres r;

	/* Whether an order is there depends on who asks: no cache keeps
	 * the answer for the next one. */
	assert_int_equal(hn_http("GET", u1, NULL, NULL, 0, &r), 0);
	assert_problem(&r, 404, "not_found");
	assert_header(&r, "Cache-Control", "no-store");
	hres_finish(&r);
	assert_int_equal(hn_http("GET", u2, NULL, NULL, 0, &r), 0);
	assert_problem(&r, 404, "not_found");
	assert_header(&r, "Cache-Control", "no-store");
	hres_finish(&r);
	assert_int_equal(hn_http("DELETE", u1, NULL, NULL, 0, &r), 0);
	assert_problem(&r, 405, "method_not_allowed");
	hres_finish(&r);
	free(u1);
	free(u2);
	/* The checkout's order pages, as a script asks for them. */
	u1 = e2e_url(&e2e_main, "/orders/ord_aaaaaaaaaaaaaaaaaaaa/receipt");
	u2 = e2e_url(&e2e_main, "/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	assert_int_equal(hn_http("GET", u1, NULL, NULL, 0, &r), 0);
	assert_problem(&r, 404, "not_found");
	hres_finish(&r);
	{
		const char *json[] = {"Accept: application/json", NULL};

		assert_int_equal(hn_http("GET", u2, json, NULL, 0, &r), 0);
		assert_problem(&r, 404, "not_found");
		hres_finish(&r);
	}
	free(u1);
	free(u2);
}

/* ---- CORS ---- */

static void test_preflight_from_a_configured_origin_is_answered(void **state)
{
	const char *headers[] = {"Origin: " E2E_ORIGIN, "Access-Control-Request-Method: POST",
				 "Access-Control-Request-Headers: idempotency-key, content-type",
				 NULL};
	char *url = e2e_url(&e2e_main, "/api/orders");
	struct hres r;

	assert_int_equal(hn_http("OPTIONS", url, headers, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_header(&r, "Access-Control-Allow-Origin", E2E_ORIGIN);
	assert_header_contains(&r, "Access-Control-Allow-Headers", "Idempotency-Key");
	assert_header_contains(&r, "Access-Control-Allow-Headers", "Content-Type");
	assert_header_contains(&r, "Access-Control-Allow-Headers", "Authorization");
	assert_header_contains(&r, "Access-Control-Allow-Methods", "POST");
	assert_header_contains(&r, "Vary", "Origin");
	hres_finish(&r);
	free(url);
}

static void test_preflight_from_another_origin_is_refused(void **state)
{
	const char *headers[] = {"Origin: https://evil.example",
				 "Access-Control-Request-Method: POST", NULL};
	char *url = e2e_url(&e2e_main, "/api/orders");
	struct hres r;

	assert_int_equal(hn_http("OPTIONS", url, headers, NULL, 0, &r), 0);
	assert_problem(&r, 403, "cors_origin_not_allowed");
	assert_no_header(&r, "Access-Control-Allow-Origin");
	hres_finish(&r);
	free(url);
}

static void test_cross_origin_replies_expose_location_retry_after_and_replayed(void **state)
{
	const char *extra[] = {"Origin: " E2E_ORIGIN, "Idempotency-Key: cors-1", NULL};
	const char *evil[] = {"Origin: https://evil.example", "Idempotency-Key: cors-2", NULL};
	const char *body = "{\"amount\":111,\"currency\":\"eur\"}";
	struct hres r;

	e2e_post(&e2e_main, extra, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_header(&r, "Access-Control-Allow-Origin", E2E_ORIGIN);
	assert_header_contains(&r, "Access-Control-Expose-Headers", "Location");
	assert_header_contains(&r, "Access-Control-Expose-Headers", "Retry-After");
	assert_header_contains(&r, "Access-Control-Expose-Headers", "Idempotent-Replayed");
	hres_finish(&r);
	/* The CORS headers belong to this answer, not to the stored reply. */
	e2e_post(&e2e_main, evil, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_no_header(&r, "Access-Control-Allow-Origin");
	hres_finish(&r);
}

/* Every answer depends on the request's Origin while origins are listed,
 * so each says Vary: Origin, allowed origin or not, Origin or none: a
 * shared cache that kept the answer without CORS headers (a 404, say)
 * would otherwise hand it to the allowed page, which then sees a network
 * error. */
static void test_answers_vary_on_origin_whatever_the_origin(void **state)
{
	const char *evil_preflight[] = {"Origin: https://evil.example",
	                                "Access-Control-Request-Method: POST", NULL};
	const char *evil[] = {"Origin: https://evil.example", "Idempotency-Key: vary-1", NULL};
	const char *allowed[] = {"Origin: " E2E_ORIGIN, NULL};
	const char *body = "{\"amount\":112,\"currency\":\"eur\"}";
	char *order = e2e_url(&e2e_main, "/api/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	char *list = e2e_url(&e2e_main, "/api/orders");
	char *nothing = e2e_url(&e2e_main, "/api/nothing");
	struct hres r;

	assert_int_equal(hn_http("GET", order, NULL, NULL, 0, &r), 0);
	assert_problem(&r, 404, "not_found");
	assert_header(&r, "Vary", "Origin");
	hres_finish(&r);
	e2e_post(&e2e_main, evil, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_header(&r, "Vary", "Origin");
	assert_no_header(&r, "Access-Control-Allow-Origin");
	hres_finish(&r);
	/* The replay too: Vary is added to the answer, never stored. */
	e2e_post_key(&e2e_main, "Idempotency-Key: vary-1", body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_header(&r, "Idempotent-Replayed", "true");
	assert_header(&r, "Vary", "Origin");
	hres_finish(&r);
	assert_int_equal(hn_http("OPTIONS", list, evil_preflight, NULL, 0, &r), 0);
	assert_problem(&r, 403, "cors_origin_not_allowed");
	assert_header(&r, "Vary", "Origin");
	hres_finish(&r);
	/* An allowed page reads the 404 of a path the API does not have. */
	assert_int_equal(hn_http("GET", nothing, allowed, NULL, 0, &r), 0);
	assert_problem(&r, 404, "not_found");
	assert_header(&r, "Access-Control-Allow-Origin", E2E_ORIGIN);
	assert_header(&r, "Vary", "Origin");
	hres_finish(&r);
	free(order);
	free(list);
	free(nothing);
}

/* Under cors_origins = * every page may read the answers, and no
 * credentials are ever allowed: the Fetch standard's literal "*" says
 * exactly that. It is the same on every answer, Origin or none, so no
 * Vary: Origin; and "null" (a sandboxed frame, a file:// page) is never
 * echoed back as if it were an origin that was allowed. */
static void test_under_a_star_every_answer_says_star_and_never_echoes_null(void **state)
{
	const char *null_preflight[] = {"Origin: null", "Access-Control-Request-Method: POST",
	                                "Access-Control-Request-Headers: idempotency-key", NULL};
	const char *null_origin[] = {"Origin: null", NULL};
	const char *page[] = {"Origin: https://any.example", "Idempotency-Key: star-1", NULL};
	const char *body = "{\"amount\":113,\"currency\":\"eur\"}";
	const char *const *asks[] = {null_origin, NULL};
	struct daemon d;
	char *list;
	char *order;
	struct hres r;
	size_t i;

	(void)state;
	assert_int_equal(daemon_init(&d, API_ONLY_INI "[api]\ncors_origins = *\n"), 0);
	assert_int_equal(daemon_start(&d), 0);
	list = e2e_url(&d, "/api/orders");
	order = e2e_url(&d, "/api/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	assert_int_equal(hn_http("OPTIONS", list, null_preflight, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_header(&r, "Access-Control-Allow-Origin", "*");
	assert_header_contains(&r, "Access-Control-Allow-Headers", "Idempotency-Key");
	assert_no_header(&r, "Access-Control-Allow-Credentials");
	assert_no_header(&r, "Vary");
	hres_finish(&r);
	e2e_post(&d, page, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_header(&r, "Access-Control-Allow-Origin", "*");
	assert_header_contains(&r, "Access-Control-Expose-Headers", "Location");
	assert_no_header(&r, "Access-Control-Allow-Credentials");
	assert_no_header(&r, "Vary");
	hres_finish(&r);
	/* With Origin: null and without an Origin, the same headers. */
	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		assert_int_equal(hn_http("GET", order, asks[i], NULL, 0, &r), 0);
		assert_problem(&r, 404, "not_found");
		assert_header(&r, "Access-Control-Allow-Origin", "*");
		assert_header_contains(&r, "Access-Control-Expose-Headers", "Retry-After");
		assert_no_header(&r, "Vary");
		hres_finish(&r);
	}
	free(list);
	free(order);
	daemon_finish(&d);
}

/* The answers the listener makes itself on /api, before (or without) the
 * API's route, each read from a raw socket: under "*" every one says
 * Access-Control-Allow-Origin: *, a request without an Origin too. */
struct star_case {
	const char *sc_what;
	int sc_status;
	char *sc_request; /* malloc'd */
	size_t sc_len;
};

static void star_case_add(struct star_case *sc, size_t *n, const char *what, int status,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void star_case_add(struct star_case *sc, size_t *n, const char *what, int status,
                          const char *fmt, ...)
{
	va_list ap;
	char *s = malloc(16384);
	int len;

	assert_non_null(s);
	va_start(ap, fmt);
	len = vsnprintf(s, 16384, fmt, ap);
	va_end(ap);
	assert_true(len > 0 && len < 16384);
	sc[*n].sc_what = what;
	sc[*n].sc_status = status;
	sc[*n].sc_request = s;
	sc[*n].sc_len = (size_t)len;
	(*n)++;
}

static void assert_star_cors(const struct rh_response *r, const char *what)
{
	char *v = rh_header(r, "Access-Control-Allow-Origin");

	if (v == NULL || strcmp(v, "*") != 0) {
		fail_msg("%s: answered %d without Access-Control-Allow-Origin: * (%s)", what,
		         r->rr_status, v != NULL ? v : "none");
	}
	free(v);
	v = rh_header(r, "Access-Control-Expose-Headers");
	if (v == NULL || strstr(v, "Retry-After") == NULL) {
		fail_msg("%s: answered %d without Access-Control-Expose-Headers", what,
		         r->rr_status);
	}
	free(v);
}

static void test_under_a_star_every_answer_the_listener_makes_on_api_says_star(void **state)
{
	static const char slow_body[] = "POST /api/orders HTTP/1.1\r\nHost: shop\r\n"
	                                "Content-Type: application/json\r\n"
	                                "Idempotency-Key: star-slow\r\n"
	                                "Content-Length: 100\r\n\r\n{\"amount\":";
	static const char slow_head[] = "GET /api/orders/ord_aaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n"
	                                "Host: shop\r\n";
	struct star_case sc[16];
	size_t n = 0;
	char *big = malloc(12000);
	char *many = malloc(4096);
	struct rh_response r;
	struct daemon d;
	int fd[2];
	size_t i;

	(void)state;
	assert_non_null(big);
	assert_non_null(many);
	memset(big, 'a', 11999);
	big[11999] = '\0';
	many[0] = '\0';
	for (i = 0; i < 101; i++) {
		snprintf(many + strlen(many), 4096 - strlen(many), "X-F%zu: 1\r\n", i);
	}
	assert_int_equal(daemon_init(&d, API_ONLY_INI "[server]\nhead_timeout = 2s\nbody_max = 1k\n"
	                                              "[api]\ncors_origins = *\n"),
	                 0);
	assert_int_equal(daemon_start(&d), 0);
	/* The two slow ones first, so that they wait together. */
	fd[0] = rh_connect(NULL, d.dm_port);
	fd[1] = rh_connect(NULL, d.dm_port);
	assert_true(fd[0] >= 0 && fd[1] >= 0);
	assert_int_equal(rh_send(fd[0], slow_head, sizeof(slow_head) - 1), 0);
	assert_int_equal(rh_send(fd[1], slow_body, sizeof(slow_body) - 1), 0);
	star_case_add(sc, &n, "body over [server] body_max", 413,
	              "POST /api/orders HTTP/1.1\r\nHost: shop\r\nContent-Length: 5000\r\n\r\n");
	star_case_add(sc, &n, "target over 4096 bytes", 414,
	              "GET /api/orders/%.5000s HTTP/1.1\r\nHost: shop\r\n\r\n", big);
	star_case_add(sc, &n, "101 header fields", 431,
	              "GET /api/orders HTTP/1.1\r\nHost: shop\r\n%s\r\n", many);
	star_case_add(sc, &n, "head over 8192 bytes", 431,
	              "GET /api/orders HTTP/1.1\r\nHost: shop\r\nX-Big: %.9000s\r\n\r\n", big);
	star_case_add(sc, &n, "encoded NUL in the path", 400,
	              "GET /api/orders%%00 HTTP/1.1\r\nHost: shop\r\n\r\n");
	star_case_add(sc, &n, "no Host", 400, "GET /api/orders HTTP/1.1\r\n\r\n");
	star_case_add(sc, &n, "a transfer coding other than chunked", 501,
	              "POST /api/orders HTTP/1.1\r\nHost: shop\r\n"
	              "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n");
	star_case_add(sc, &n, "a method the path does not take", 405,
	              "DELETE /api/orders HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n");
	for (i = 0; i < n; i++) {
		assert_int_equal(rh_exchange(d.dm_port, sc[i].sc_request, sc[i].sc_len, 10000, &r),
		                 1);
		if (r.rr_status != sc[i].sc_status) {
			fail_msg("%s: answered %d, not %d", sc[i].sc_what, r.rr_status,
			         sc[i].sc_status);
		}
		assert_star_cors(&r, sc[i].sc_what);
		rh_response_finish(&r);
		free(sc[i].sc_request);
	}
	for (i = 0; i < 2; i++) {
		const char *what = i == 0 ? "a head too slow" : "a body too slow";

		assert_int_equal(rh_read_response(fd[i], 30000, &r), 1);
		assert_int_equal(r.rr_status, 408);
		assert_non_null(strstr(r.rr_body, "urn:idemhook:problem:request_timeout"));
		assert_star_cors(&r, what);
		rh_response_finish(&r);
		close(fd[i]);
	}
	free(big);
	free(many);
	daemon_finish(&d);
}

/* With origins listed, a 408 at /api to a request without an Origin (a
 * head too slow: its fields are not in) still says Vary: Origin, as every
 * other answer of the API does, and allows no origin. */
static void test_with_origins_listed_a_slow_head_on_api_is_408_with_vary_origin(void **state)
{
	static const char slow_head[] = "GET /api/orders/ord_aaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n"
	                                "Host: shop\r\nOrigin: " E2E_ORIGIN "\r\n";
	struct rh_response r;
	struct daemon d;
	char *v;
	int fd;

	(void)state;
	assert_int_equal(daemon_init(&d, API_ONLY_INI "[server]\nhead_timeout = 1s\n"
	                                              "[api]\ncors_origins = " E2E_ORIGIN "\n"),
	                 0);
	assert_int_equal(daemon_start(&d), 0);
	fd = rh_connect(NULL, d.dm_port);
	assert_true(fd >= 0);
	assert_int_equal(rh_send(fd, slow_head, sizeof(slow_head) - 1), 0);
	assert_int_equal(rh_read_response(fd, 30000, &r), 1);
	assert_int_equal(r.rr_status, 408);
	v = rh_header(&r, "Vary");
	assert_non_null(v);
	assert_string_equal(v, "Origin");
	free(v);
	v = rh_header(&r, "Access-Control-Allow-Origin");
	assert_null(v);
	rh_response_finish(&r);
	close(fd);
	daemon_finish(&d);
}

/* With origins listed, "null" is none of them: no preflight, no answer
 * to read. */
static void test_with_origins_listed_null_is_refused(void **state)
{
	const char *null_preflight[] = {"Origin: null", "Access-Control-Request-Method: POST",
	                                NULL};
	const char *null_origin[] = {"Origin: null", NULL};
	char *list = e2e_url(&e2e_main, "/api/orders");
	char *order = e2e_url(&e2e_main, "/api/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	struct hres r;

	(void)state;
	assert_int_equal(hn_http("OPTIONS", list, null_preflight, NULL, 0, &r), 0);
	assert_problem(&r, 403, "cors_origin_not_allowed");
	assert_no_header(&r, "Access-Control-Allow-Origin");
	hres_finish(&r);
	assert_int_equal(hn_http("GET", order, null_origin, NULL, 0, &r), 0);
	assert_problem(&r, 404, "not_found");
	assert_no_header(&r, "Access-Control-Allow-Origin");
	assert_header(&r, "Vary", "Origin");
	hres_finish(&r);
	free(list);
	free(order);
}

/* A page's POST whose body comes too slowly is cut with a 408 by the
 * listener, before the API sees it: for an allowed origin with the CORS
 * headers the API would add, so that the page's script reads the 408 (and
 * retries with the same key) instead of meeting a network error. Another
 * origin gets the 408 without them. The two are slow together: one wait
 * of the listener's 5 s grace. */
static void test_a_body_too_slow_is_408_with_cors_for_an_allowed_origin(void **state)
{
	static const char head[] = "POST /api/orders HTTP/1.1\r\nHost: shop\r\nOrigin: %s\r\n"
	                           "Content-Type: application/json\r\nIdempotency-Key: slow-%d\r\n"
	                           "Content-Length: 100\r\n\r\n{\"amount\":";
	const char *origins[] = {E2E_ORIGIN, "https://evil.example"};
	struct rh_response r[2];
	char req[512];
	int fd[2];
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		int n = snprintf(req, sizeof(req), head, origins[i], i);

		fd[i] = rh_connect(NULL, e2e_main.dm_port);
		assert_true(fd[i] >= 0);
		assert_int_equal(rh_send(fd[i], req, (size_t)n), 0);
	}
	for (i = 0; i < 2; i++) {
		char *v;

		assert_int_equal(rh_read_response(fd[i], 30000, &r[i]), 1);
		assert_int_equal(r[i].rr_status, 408);
		assert_non_null(strstr(r[i].rr_body, "urn:idemhook:problem:request_timeout"));
		v = rh_header(&r[i], "Vary");
		assert_non_null(v);
		assert_string_equal(v, "Origin");
		free(v);
		v = rh_header(&r[i], "Access-Control-Allow-Origin");
		if (i == 0) {
			assert_non_null(v);
			assert_string_equal(v, E2E_ORIGIN);
			free(v);
			v = rh_header(&r[i], "Access-Control-Expose-Headers");
			assert_non_null(v);
			assert_non_null(strstr(v, "Retry-After"));
		}
		if (i == 1 && v != NULL) {
			fail_msg("a 408 for another origin says Access-Control-Allow-Origin: %s",
			         v);
		}
		free(v);
		rh_response_finish(&r[i]);
		close(fd[i]);
	}
	/* The key was never claimed: the page's retry makes the order. */
	assert_int_equal(e2e_count(&e2e_main, "SELECT count(*) FROM idempotency_records WHERE "
	                                      "idem_key IN ('slow-0', 'slow-1')"),
	                 0);
}

/* method on url is answered 405 problem+json with Allow: allow. */
static void assert_405(const char *method, const char *url, const char *allow)
{
	struct hres r;

	assert_int_equal(hn_http(method, url, NULL, "x", strcmp(method, "PUT") == 0 ? 1 : 0, &r),
	                 0);
	assert_problem(&r, 405, "method_not_allowed");
	assert_header(&r, "Allow", allow);
	hres_finish(&r);
}

/* OPTIONS without Origin and Access-Control-Request-Method is no preflight:
 * it asks what the resource allows, and gets it (RFC 9110, 9.3.7). Allow
 * names HEAD, which every GET path answers. */
static void test_options_that_is_no_preflight_answers_allow(void **state)
{
	const char *preflight[] = {"Origin: " E2E_ORIGIN, "Access-Control-Request-Method: GET",
	                           NULL};
	char *list = e2e_url(&e2e_main, "/api/orders");
	char *order = e2e_url(&e2e_main, "/api/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	struct hres r;

	assert_int_equal(hn_http("OPTIONS", list, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_header(&r, "Allow", "GET, HEAD, POST, OPTIONS");
	assert_no_header(&r, "Access-Control-Allow-Origin");
	hres_finish(&r);
	assert_int_equal(hn_http("OPTIONS", order, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_header(&r, "Allow", "GET, HEAD, OPTIONS");
	hres_finish(&r);
	/* A preflight for an order offers what the order allows. */
	assert_int_equal(hn_http("OPTIONS", order, preflight, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_header(&r, "Access-Control-Allow-Origin", E2E_ORIGIN);
	assert_header(&r, "Access-Control-Allow-Methods", "GET, OPTIONS");
	hres_finish(&r);
	assert_405("PUT", list, "GET, HEAD, POST, OPTIONS");
	assert_405("DELETE", order, "GET, HEAD, OPTIONS");
	free(list);
	free(order);
}

/* RFC 9110's media type allows SP or HTAB before the parameters; what
 * follows the type must be parameters, not more words. */
static void test_content_type_takes_tabs_before_parameters_and_nothing_else(void **state)
{
	const char *tab[] = {"Content-Type: application/json\t; charset=utf-8",
	                     "Idempotency-Key: ct-tab-1", NULL};
	const char *words[] = {"Content-Type: application/json text/plain",
	                       "Idempotency-Key: ct-words-1", NULL};
	const char *body = "{\"amount\":113,\"currency\":\"eur\"}";
	char *url = e2e_url(&e2e_main, "/api/orders");
	struct hres r;

	assert_int_equal(hn_http("POST", url, tab, body, strlen(body), &r), 0);
	assert_int_equal(r.hs_status, 201);
	hres_finish(&r);
	assert_int_equal(hn_http("POST", url, words, body, strlen(body), &r), 0);
	assert_problem(&r, 415, "unsupported_media_type");
	hres_finish(&r);
	free(url);
}

/* ---- the checkout page ---- */

/* The hidden key of a rendered checkout form. */
static void e2e_form_key(const char *html, char out[64])
{
	const char *p = strstr(html, "name=\"idempotency_key\" value=\"");
	size_t n;

	assert_non_null(p);
	p += strlen("name=\"idempotency_key\" value=\"");
	n = strcspn(p, "\"");
	assert_int_equal(n, 36);
	memcpy(out, p, n);
	out[n] = '\0';
}

static void e2e_form_post(const char *form, struct hres *ret)
{
	const char *headers[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
	char *url = e2e_url(&e2e_main, "/checkout");

	assert_int_equal(hn_http("POST", url, headers, form, strlen(form), ret), 0);
	free(url);
}

static void test_checkout_renders_a_form_with_a_fresh_server_made_key(void **state)
{
	char *url = e2e_url(&e2e_main, "/checkout");
	char k1[64];
	char k2[64];
	struct hres a;
	struct hres b;

	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &a), 0);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &b), 0);
	assert_int_equal(a.hs_status, 200);
	assert_header(&a, "Content-Type", "text/html; charset=utf-8");
	assert_header_contains(&a, "Content-Security-Policy", "script-src 'self'");
	e2e_form_key(a.hs_body, k1);
	e2e_form_key(b.hs_body, k2);
	assert_string_not_equal(k1, k2);
	assert_int_equal(k1[14], '4'); /* UUID version 4 */
	hres_finish(&a);
	hres_finish(&b);
	free(url);
}

static void test_checkout_post_redirects_303_and_a_resubmit_reaches_the_same_order(void **state)
{
	char form[256];
	char *loc1;
	char *loc2;
	char *page_url;
	struct hres a;
	struct hres b;
	struct hres p1;
	struct hres p2;

	snprintf(form, sizeof(form), "idempotency_key=%s&product=mug&quantity=2&customer_ref=%s",
		 "0b7c1a8e-6f0e-4c52-9d4f-4f1d2b3c4d5e", "prg%20%3Cb%3Etest%3C%2Fb%3E");
	e2e_form_post(form, &a);
	assert_int_equal(a.hs_status, 303);
	loc1 = hres_header(&a, "Location");
	assert_non_null(loc1);
	assert_true(strncmp(loc1, "/orders/ord_", 12) == 0);
	assert_non_null(strstr(loc1, "?flash="));

	/* Back + resubmit: the same form, the same key. */
	e2e_form_post(form, &b);
	assert_int_equal(b.hs_status, 303);
	loc2 = hres_header(&b, "Location");
	assert_string_equal(loc1, loc2);
	assert_header(&b, "Idempotent-Replayed", "true");
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM orders WHERE customer_ref = 'prg <b>test</b>'"),
		1);

	/* The flash shows once, and user text is escaped. */
	page_url = e2e_url(&e2e_main, loc1);
	assert_int_equal(hn_http("GET", page_url, NULL, NULL, 0, &p1), 0);
	assert_int_equal(p1.hs_status, 200);
	assert_non_null(strstr(p1.hs_body, "Order created."));
	assert_non_null(strstr(p1.hs_body, "prg &lt;b&gt;test&lt;/b&gt;"));
	assert_null(strstr(p1.hs_body, "<b>test"));
	assert_non_null(strstr(p1.hs_body, "24.00 EUR"));
	assert_int_equal(hn_http("GET", page_url, NULL, NULL, 0, &p2), 0);
	assert_int_equal(p2.hs_status, 200);
	assert_null(strstr(p2.hs_body, "Order created."));
	free(loc1);
	free(loc2);
	free(page_url);
	hres_finish(&a);
	hres_finish(&b);
	hres_finish(&p1);
	hres_finish(&p2);
}

static void test_checkout_resubmit_with_changed_details_is_422(void **state)
{
	struct hres a;
	struct hres b;

	e2e_form_post(
		"idempotency_key=5d0c2e52-1b7a-4f55-8f3d-0a9e8e7f6a51&product=beans&quantity=1",
		&a);
	e2e_form_post(
		"idempotency_key=5d0c2e52-1b7a-4f55-8f3d-0a9e8e7f6a51&product=beans&quantity=3",
		&b);
	assert_int_equal(a.hs_status, 303);
	assert_int_equal(b.hs_status, 422);
	assert_header(&b, "Content-Type", "text/html; charset=utf-8");
	assert_non_null(strstr(b.hs_body, "Start a new order"));
	hres_finish(&a);
	hres_finish(&b);
}

/* A HEAD of the result page (a link checker, a prefetch) shows nothing,
 * so it leaves the one-time message for the GET that shows the page. */
static void test_checkout_head_of_the_result_page_leaves_the_flash(void **state)
{
	struct hres a;
	struct hres h;
	struct hres g;
	char *loc;
	char *url;

	e2e_form_post("idempotency_key=3f2a9d4c-7e1b-4c8a-9b6d-1e2f3a4b5c6d&product=mug&quantity=1",
	              &a);
	assert_int_equal(a.hs_status, 303);
	loc = hres_header(&a, "Location");
	assert_non_null(loc);
	url = e2e_url(&e2e_main, loc);
	assert_int_equal(hn_http("HEAD", url, NULL, NULL, 0, &h), 0);
	assert_int_equal(h.hs_status, 200);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &g), 0);
	assert_int_equal(g.hs_status, 200);
	assert_non_null(strstr(g.hs_body, "Order created."));
	free(loc);
	free(url);
	hres_finish(&a);
	hres_finish(&h);
	hres_finish(&g);
}

/* The checkout's pages answer HEAD as they answer GET, and a 405 says so
 * in Allow. */
static void test_checkout_405s_allow_head_where_get_is_allowed(void **state)
{
	char *form = e2e_url(&e2e_main, "/checkout");
	char *page = e2e_url(&e2e_main, "/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	struct hres r;

	assert_int_equal(hn_http("HEAD", form, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_405("PUT", form, "GET, HEAD, POST");
	assert_405("DELETE", page, "GET, HEAD");
	free(form);
	free(page);
}

/* The source file handlers/checkout/NAME, read whole (NUL-terminated). */
static char *e2e_asset(const char *name)
{
	const char *root = getenv("IDEMHOOK_SOURCE_ROOT");
	char path[4096];
	char *text;

	assert_non_null(root);
	snprintf(path, sizeof(path), "%s/handlers/checkout/%s", root, name);
	text = hn_read_file(path);
	assert_non_null(text);
	return text;
}

static void test_checkout_serves_its_script_and_stylesheet_as_the_files_in_the_tree(void **state)
{
	char *js = e2e_asset("checkout.js");
	char *css = e2e_asset("checkout.css");
	char *page = e2e_asset("page.html");
	char *url = e2e_url(&e2e_main, "/checkout.js");
	char *style;
	size_t i;
	size_t n = 0;
	struct hres r;

	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_header(&r, "Content-Type", "text/javascript; charset=utf-8");
	assert_int_equal(r.hs_body_len, strlen(js));
	assert_memory_equal(r.hs_body, js, strlen(js));
	hres_finish(&r);
	free(url);

	/* The stylesheet, one rule per line in the tree, is inlined as one line. */
	for (i = 0; css[i] != '\0'; i++) {
		if (css[i] != '\n') {
			css[n++] = css[i];
		}
	}
	css[n] = '\0';
	assert_int_equal(asprintf(&style, "<style>%s</style>", css) > 0, 1);
	url = e2e_url(&e2e_main, "/checkout");
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, style));
	/* The page is the template around the form. */
	assert_memory_equal(r.hs_body, page, strcspn(page, "{"));
	assert_non_null(strstr(r.hs_body, "<title>Checkout \xc2\xb7 idemhook demo shop</title>"));
	assert_non_null(strstr(r.hs_body, "<script src=\"/checkout.js\" defer></script>\n</main></body></html>\n"));
	hres_finish(&r);
	free(url);
	free(style);
	free(js);
	free(css);
	free(page);
}

static void test_checkout_without_key_or_with_bad_fields_is_400(void **state)
{
	struct hres r;

	e2e_form_post("product=beans&quantity=1", &r);
	assert_int_equal(r.hs_status, 400);
	hres_finish(&r);
	e2e_form_post(
		"idempotency_key=7f0c2e52-1b7a-4f55-8f3d-0a9e8e7f6a51&product=caviar&quantity=1",
		&r);
	assert_int_equal(r.hs_status, 400);
	hres_finish(&r);
	e2e_form_post(
		"idempotency_key=7f0c2e52-1b7a-4f55-8f3d-0a9e8e7f6a51&product=beans&quantity=99",
		&r);
	assert_int_equal(r.hs_status, 400);
	hres_finish(&r);
}

/* POST /checkout?place as a browser (Accept: text/html) or a script
 * (Accept: application/json) sends it. */
static void e2e_form_post_accept(const char *form, const char *accept, struct hres *ret)
{
	const char *headers[] = {"Content-Type: application/x-www-form-urlencoded", accept, NULL};
	char *url = e2e_url(&e2e_main, "/checkout?place");

	assert_int_equal(hn_http("POST", url, headers, form, strlen(form), ret), 0);
	free(url);
}

/* The checkout answers in the type the client prefers (RFC 9110
 * 12.5.1): by weight, then JSON named over HTML reached by a wildcard;
 * when the client prefers neither, the page. Each Accept as browsers,
 * fetch() and the usual libraries send it, at a refused form post (400)
 * and a missing order page (404). */
static void test_checkout_answers_in_the_type_the_accept_field_prefers(void **state)
{
	static const struct {
		const char *accept;
		int json;
	} cases[] = {
	        /* Chrome and Firefox loading a page, and fetch()'s default. */
	        {"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
	         "image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
	         0},
	        {"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", 0},
	        {"Accept: */*", 0},
	        /* The page's own script, axios, jQuery's getJSON. */
	        {"Accept: application/json", 1},
	        {"Accept: application/json, text/plain, */*", 1},
	        {"Accept: application/json, text/javascript, */*; q=0.01", 1},
	        {"Accept: application/problem+json", 1},
	        /* The weights decide, not the order or the mere mention. */
	        {"Accept: application/json;q=0, text/html", 0},
	        {"Accept: text/html;q=0.5, application/json", 1},
	        {"Accept: text/html;q=0, application/json;q=0.1", 1},
	        {"Accept: application/json;q=0", 0},
	        {"Accept: application/json, text/html", 0},
	};
	const char *form = "idempotency_key=8c1d3f63-2b8e-4c66-9e4e-1b0f9f8e7b62&product=caviar"
	                   "&quantity=1";
	char *page = e2e_url(&e2e_main, "/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	struct hres r;
	size_t i;
	int k;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (k = 0; k < 2; k++) {
			const char *headers[] = {cases[i].accept, NULL};
			long want = k == 0 ? 400 : 404;
			char *ct;

			if (k == 0) {
				e2e_form_post_accept(form, cases[i].accept, &r);
			} else {
				assert_int_equal(hn_http("GET", page, headers, NULL, 0, &r), 0);
			}
			ct = hres_header(&r, "Content-Type");
			if (r.hs_status != want || ct == NULL ||
			    (strcmp(ct, "application/problem+json") == 0) != cases[i].json) {
				fail_msg("%s %s: got %ld %s, wanted %ld %s",
				         k == 0 ? "POST" : "GET", cases[i].accept, r.hs_status,
				         ct != NULL ? ct : "(none)", want,
				         cases[i].json ? "problem+json" : "the page");
			}
			if (!cases[i].json) {
				assert_header(&r, "Content-Type", "text/html; charset=utf-8");
			}
			free(ct);
			hres_finish(&r);
		}
	}
	free(page);
}

/* The checkout's answers that come as HTML or JSON by Accept say
 * Vary: Accept, each of them (created, replayed, reused, refused, the
 * order's page found or not, a demo payment's): a cache in front must not
 * give the page to the script or the JSON to the browser. */
static void test_checkout_answers_chosen_by_accept_say_vary_accept(void **state)
{
	const char *json = "Accept: application/json";
	const char *key = "idempotency_key=0b6f3c9e-5a1d-4e2f-8c7b-9d0e1f2a3b4c";
	char form[256];
	char *page;
	char *url;
	char *loc = NULL;
	struct hres r;
	int k;

	(void)state;
	for (k = 0; k < 3; k++) {
		/* created (303), replayed (303), reused with other details (422) */
		snprintf(form, sizeof(form), "%s&product=mug&quantity=%d", key, k < 2 ? 1 : 2);
		e2e_form_post_accept(form, json, &r);
		assert_int_equal(r.hs_status, k < 2 ? 303 : 422);
		assert_header_contains(&r, "Vary", "Accept");
		if (k == 0) {
			loc = hres_header(&r, "Location");
			assert_non_null(loc);
		}
		hres_finish(&r);
	}
	e2e_form_post_accept("product=mug&quantity=1", json, &r);
	assert_int_equal(r.hs_status, 400);
	assert_header_contains(&r, "Vary", "Accept");
	hres_finish(&r);
	url = e2e_url(&e2e_main, loc);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_header_contains(&r, "Vary", "Accept");
	hres_finish(&r);
	page = e2e_url(&e2e_main, "/orders/ord_aaaaaaaaaaaaaaaaaaaa");
	assert_int_equal(hn_http("GET", page, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 404);
	assert_header_contains(&r, "Vary", "Accept");
	hres_finish(&r);
	free(page);
	page = e2e_url(&e2e_main, "/orders/ord_aaaaaaaaaaaaaaaaaaaa/pay");
	assert_int_equal(hn_http("POST", page, NULL, "", 0, &r), 0);
	assert_int_equal(r.hs_status, 404);
	assert_header_contains(&r, "Vary", "Accept");
	hres_finish(&r);
	free(page);
	free(url);
	free(loc);
	/* The form itself is the same for every Accept. */
	page = e2e_url(&e2e_main, "/checkout");
	assert_int_equal(hn_http("GET", page, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_no_header(&r, "Vary");
	hres_finish(&r);
	free(page);
}

/* A reference that is not UTF-8 or holds a control character is the
 * customer's mistake, answered as the other form refusals are (400, the
 * page or problem+json), never a 500; the key stays free for the form
 * sent again. */
static void test_checkout_reference_not_utf8_or_with_controls_is_400(void **state)
{
	static const char *const refs[] = {"%FF", "a%C2%85b", "%C2%9B31m", "x%0A%1B%5B31mRED",
	                                   "a%C0%AF"};
	const char *key = "3c1d9a2e-7b4f-4e6a-9c8d-2f1e0a3b4c5d";
	char form[256];
	size_t i;

	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		struct hres r;

		snprintf(form, sizeof(form),
		         "idempotency_key=%s&product=mug&quantity=1&customer_ref=%s", key, refs[i]);
		e2e_form_post_accept(form, "Accept: text/html,application/xhtml+xml,*/*;q=0.8", &r);
		if (r.hs_status != 400) {
			fail_msg("customer_ref=%s: want 400, got %ld: %s", refs[i], r.hs_status,
			         r.hs_body != NULL ? r.hs_body : "");
		}
		assert_header(&r, "Content-Type", "text/html; charset=utf-8");
		assert_non_null(strstr(r.hs_body, "Please check the form"));
		hres_finish(&r);
		e2e_form_post_accept(form, "Accept: application/json", &r);
		assert_problem(&r, 400, "invalid_order");
		hres_finish(&r);
	}
	assert_int_equal(e2e_count(&e2e_main, "SELECT count(*) FROM idempotency_records WHERE "
	                                      "idem_key = '3c1d9a2e-7b4f-4e6a-9c8d-2f1e0a3b4c5d'"),
	                 0);
	/* Text in any script is fine, and the same key now places the order. */
	snprintf(form, sizeof(form), "idempotency_key=%s&product=mug&quantity=1&customer_ref=%s",
	         key, "Zo%C3%AB%C2%A0%E4%B8%AD");
	{
		struct hres r;

		e2e_form_post_accept(form, "Accept: text/html", &r);
		assert_int_equal(r.hs_status, 303);
		hres_finish(&r);
	}
	assert_int_equal(e2e_count(&e2e_main, "SELECT count(*) FROM orders WHERE customer_ref = "
	                                      "'Zo\xc3\xab\xc2\xa0\xe4\xb8\xad'"),
	                 1);
}

static void test_demo_payment_sends_a_signed_callback_twice_and_pays_once(void **state)
{
	char form[128];
	char pay_path[96];
	char *loc;
	char *loc2;
	char *url;
	struct hres a;
	struct hres p;
	struct hres page;
	char id[64];
	size_t n;

	snprintf(form, sizeof(form),
		 "idempotency_key=%s&product=grinder&quantity=1&customer_ref=demo-pay",
		 "9a1d2c3b-4e5f-4a6b-8c7d-1e2f3a4b5c6d");
	e2e_form_post(form, &a);
	assert_int_equal(a.hs_status, 303);
	loc = hres_header(&a, "Location");
	assert_non_null(loc);
	n = strcspn(loc + 8, "?");
	memcpy(id, loc + 8, n);
	id[n] = '\0';
	snprintf(pay_path, sizeof(pay_path), "/orders/%s/pay", id);
	url = e2e_url(&e2e_main, pay_path);
	assert_int_equal(hn_http("POST", url, NULL, "", 0, &p), 0);
	assert_int_equal(p.hs_status, 303);
	loc2 = hres_header(&p, "Location");
	assert_non_null(loc2);
	free(url);

	url = e2e_url(&e2e_main, loc2);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &page), 0);
	assert_int_equal(page.hs_status, 200);
	assert_non_null(strstr(page.hs_body, "Idempotent-Replayed: true"));
	assert_non_null(strstr(page.hs_body, "<td>paid</td>"));
	/* 69.00 EUR at the default rate of 1 point per 100 minor units. */
	assert_non_null(strstr(page.hs_body, "<th>Points</th><td>69</td>"));
	assert_int_equal(e2e_count(&e2e_main,
				   "SELECT count(*) FROM points_ledger WHERE order_id IN "
				   "(SELECT id FROM orders WHERE customer_ref = 'demo-pay')"),
			 1);
	assert_int_equal(
		e2e_count(&e2e_main,
			  "SELECT count(*) FROM idempotency_records WHERE scope = 'stripe' "
			  "AND idem_key LIKE 'evt_demo_%'"),
		1);
	free(url);
	/* The demo names its checkout page in the log. */
	{
		char want[128];
		char line[4096];
		FILE *f = fopen(e2e_main.dm_log, "r");
		int found = 0;

		assert_non_null(f);
		snprintf(want, sizeof(want), "checkout page is http://127.0.0.1:%u/checkout", e2e_main.dm_port);
		while (fgets(line, sizeof(line), f) != NULL) {
			found |= strstr(line, want) != NULL;
		}
		fclose(f);
		assert_true(found);
	}
	free(loc);
	free(loc2);
	hres_finish(&a);
	hres_finish(&p);
	hres_finish(&page);
}

static void test_demo_payment_with_a_one_thread_listener_goes_over_http_too(void **state)
{
	const char *form = "idempotency_key=one-thread-1&product=mug&quantity=1";
	struct daemon d;
	char *url;
	char *loc;
	char *loc2;
	char pay_path[96];
	char id[64];
	struct hres r;
	size_t n;

	assert_int_equal(daemon_init(&d,
				     "[server]\nthreads = 1\n\n[demo]\nenabled = yes\n\n"
				     "[provider stripe]\ntype = stripe\nsecret = " E2E_STRIPE_SECRET
				     "\n"),
			 0);
	assert_int_equal(daemon_start(&d), 0);
	url = e2e_url(&d, "/checkout");
	assert_int_equal(hn_http("POST", url, NULL, form, strlen(form), &r), 0);
	free(url);
	assert_int_equal(r.hs_status, 303);
	loc = hres_header(&r, "Location");
	assert_non_null(loc);
	hres_finish(&r);
	n = strcspn(loc + 8, "?");
	memcpy(id, loc + 8, n);
	id[n] = '\0';
	snprintf(pay_path, sizeof(pay_path), "/orders/%s/pay", id);
	url = e2e_url(&d, pay_path);
	assert_int_equal(hn_http("POST", url, NULL, "", 0, &r), 0);
	free(url);
	assert_int_equal(r.hs_status, 303);
	assert_true(r.hs_seconds < 5.0);
	loc2 = hres_header(&r, "Location");
	hres_finish(&r);
	url = e2e_url(&d, loc2);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	/* The callbacks went over HTTP while the page waited, suspended. */
	assert_null(strstr(r.hs_body, "in-process"));
	assert_non_null(strstr(r.hs_body, "First answer: 200 (processed)"));
	assert_non_null(strstr(r.hs_body, "Idempotent-Replayed: true"));
	assert_non_null(strstr(r.hs_body, "<td>paid</td>"));
	hres_finish(&r);
	free(url);
	free(loc);
	free(loc2);
	daemon_finish(&d);
}

/* ---- bearer tokens and rate limits (daemons of their own) ---- */

static void test_bearer_tokens_authenticate_and_scope_keys_per_client(void **state)
{
	struct daemon d;
	const char *body = "{\"amount\":500,\"currency\":\"eur\",\"customer_ref\":\"cust-auth\"}";
	const char *none[] = {"Idempotency-Key: auth-1", NULL};
	const char *wrong[] = {"Idempotency-Key: auth-1",
			       "Authorization: Bearer not-a-token-of-ours", NULL};
	const char *shop_a[] = {"Idempotency-Key: auth-1",
				"Authorization: Bearer tok-a-0123456789abcdef", NULL};
	const char *shop_b[] = {"Idempotency-Key: auth-1",
				"Authorization: Bearer tok-b-0123456789abcdef", NULL};
	const char *shop_c[] = {"Idempotency-Key: auth-1",
				"Authorization: bearer tok-c-0123456789abcdef", NULL};
	const char *two_tokens[] = {"Idempotency-Key: auth-1",
	                            "Authorization: Bearer tok-a-0123456789abcdef",
	                            "Authorization: Bearer not-a-token-of-ours", NULL};
	char *url;
	char ida[64];
	char idb[64];
	struct hres r;

	assert_int_equal(daemon_init(&d, API_ONLY_INI), 0);
	assert_int_equal(daemon_write_file(&d, "token-a", "tok-a-0123456789abcdef\n"), 0);
	assert_int_equal(daemon_write_file(&d, "token-b", "tok-b-0123456789abcdef\n"), 0);
	assert_int_equal(daemon_write_file(&d, "shop-c.token", "tok-c-0123456789abcdef\n"), 0);
	/* Named tokens, and one named after its file. */
	fx_append_config(
	        &d,
	        "[api]\ntoken = shop-a file:%s/token-a\ntoken = shop-b file:%s/token-b\ntoken = "
	        "file:%s/shop-c.token\n",
	        d.dm_dir, d.dm_dir, d.dm_dir);
	assert_int_equal(daemon_start(&d), 0);

	e2e_post(&d, none, body, &r);
	assert_problem(&r, 401, "unauthorized");
	assert_header_contains(&r, "WWW-Authenticate", "Bearer");
	hres_finish(&r);
	e2e_post(&d, wrong, body, &r);
	assert_problem(&r, 401, "unauthorized");
	hres_finish(&r);
	/* Two credentials: which one the client meant is unknown. */
	e2e_post(&d, two_tokens, body, &r);
	assert_problem(&r, 400, "repeated_header");
	hres_finish(&r);

	e2e_post(&d, shop_a, body, &r);
	assert_int_equal(r.hs_status, 201);
	e2e_order_id(&r, ida);
	hres_finish(&r);
	e2e_post(&d, shop_b, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_no_header(&r, "Idempotent-Replayed");
	e2e_order_id(&r, idb);
	hres_finish(&r);
	assert_string_not_equal(ida, idb);
	e2e_post(&d, shop_a, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_header(&r, "Idempotent-Replayed", "true");
	hres_finish(&r);
	assert_int_equal(e2e_count(&d, "SELECT count(*) FROM orders"), 2);
	e2e_post(&d, shop_c, body, &r);
	assert_int_equal(r.hs_status, 201);
	assert_no_header(&r, "Idempotent-Replayed");
	hres_finish(&r);
	assert_int_equal(e2e_count(&d, "SELECT count(*) FROM idempotency_records WHERE scope = "
				       "'api:orders:shop-c.token'"),
			 1);

	/* The checkout page stays public. */
	url = e2e_url(&d, "/checkout");
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	free(url);
	daemon_finish(&d);
}

/* GET with the given header lines; status and body into ret. */
static void e2e_get(const struct daemon *d, const char *path, const char *const *headers,
		    struct hres *ret)
{
	char *url = e2e_url(d, path);

	assert_int_equal(hn_http("GET", url, headers, NULL, 0, ret), 0);
	free(url);
}

/* A token reads the orders it created; another valid token gets the same
 * 404 as for an order that does not exist, so ids do not leak existence. */
static void test_order_reads_are_scoped_to_the_token_that_created_them(void **state)
{
	struct daemon d;
	const char *body = "{\"amount\":700,\"currency\":\"eur\"}";
	const char *post_a[] = {"Idempotency-Key: scope-1",
				"Authorization: Bearer tok-a-0123456789abcdef", NULL};
	const char *post_b[] = {"Idempotency-Key: scope-1",
				"Authorization: Bearer tok-b-0123456789abcdef", NULL};
	const char *read_a[] = {"Authorization: Bearer tok-a-0123456789abcdef", NULL};
	const char *read_b[] = {"Authorization: Bearer tok-b-0123456789abcdef", NULL};
	char path[96];
	char cli_id[64];
	char ida[64];
	char idb[64];
	struct hres r;
	struct hres missing;
	int i;

	assert_int_equal(daemon_init(&d, API_ONLY_INI), 0);
	assert_int_equal(daemon_write_file(&d, "token-a", "tok-a-0123456789abcdef\n"), 0);
	assert_int_equal(daemon_write_file(&d, "token-b", "tok-b-0123456789abcdef\n"), 0);
	fx_append_config(&d,
	                 "[api]\ntoken = shop-a file:%s/token-a\ntoken = shop-b file:%s/token-b\n",
	                 d.dm_dir, d.dm_dir);
	assert_int_equal(daemon_start(&d), 0);
	e2e_post(&d, post_a, body, &r);
	assert_int_equal(r.hs_status, 201);
	e2e_order_id(&r, ida);
	hres_finish(&r);
	e2e_post(&d, post_b, body, &r);
	assert_int_equal(r.hs_status, 201);
	e2e_order_id(&r, idb);
	hres_finish(&r);
	fx_order(&d, 300, "eur", cli_id);

	snprintf(path, sizeof(path), "/api/orders/%s", ida);
	e2e_get(&d, path, read_a, &r);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, ida));
	hres_finish(&r);
	e2e_get(&d, path, read_b, &r);
	assert_problem(&r, 404, "not_found");
	e2e_get(&d, "/api/orders/ord_aaaaaaaaaaaaaaaaaaaa", read_b, &missing);
	assert_problem(&missing, 404, "not_found");
	assert_int_equal(r.hs_body_len, missing.hs_body_len);
	assert_memory_equal(r.hs_body, missing.hs_body, r.hs_body_len);
	hres_finish(&r);
	hres_finish(&missing);
	e2e_get(&d, path, NULL, &r);
	assert_problem(&r, 401, "unauthorized");
	hres_finish(&r);
	/* An order no token created (here by the CLI) is no token's. */
	snprintf(path, sizeof(path), "/api/orders/%s", cli_id);
	e2e_get(&d, path, read_a, &r);
	assert_problem(&r, 404, "not_found");
	hres_finish(&r);
	/* The list shows a token its own orders only. */
	e2e_get(&d, "/api/orders", read_b, &r);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, idb));
	assert_null(strstr(r.hs_body, ida));
	assert_null(strstr(r.hs_body, cli_id));
	hres_finish(&r);

	/* order_reads = all restores reads of every order by any token. */
	assert_int_equal(daemon_append_config(&d, "order_reads = all\n"), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	snprintf(path, sizeof(path), "/api/orders/%s", ida);
	for (i = 0; i < 100; i++) {
		e2e_get(&d, path, read_b, &r);
		if (r.hs_status == 200) {
			break;
		}
		hres_finish(&r);
		usleep(100 * 1000);
	}
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	daemon_finish(&d);
}

/* Without tokens the client is what it names itself (X-Client-Id): not a
 * credential, but its orders stay apart as its keys do. Orders no API
 * client created stay readable by id (the checkout page links them). */
static void test_without_tokens_reads_are_scoped_to_the_client_id(void **state)
{
	const char *body = "{\"amount\":640,\"currency\":\"eur\"}";
	const char *post_x[] = {"Idempotency-Key: scope-2", "X-Client-Id: shop-x", NULL};
	const char *read_x[] = {"X-Client-Id: shop-x", NULL};
	const char *read_y[] = {"X-Client-Id: shop-y", NULL};
	char path[96];
	char cli_id[64];
	char id[64];
	struct hres r;

	e2e_post(&e2e_main, post_x, body, &r);
	assert_int_equal(r.hs_status, 201);
	e2e_order_id(&r, id);
	hres_finish(&r);
	snprintf(path, sizeof(path), "/api/orders/%s", id);
	e2e_get(&e2e_main, path, read_x, &r);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	e2e_get(&e2e_main, path, read_y, &r);
	assert_problem(&r, 404, "not_found");
	hres_finish(&r);
	e2e_get(&e2e_main, path, NULL, &r);
	assert_problem(&r, 404, "not_found");
	hres_finish(&r);
	fx_order(&e2e_main, 300, "eur", cli_id);
	snprintf(path, sizeof(path), "/api/orders/%s", cli_id);
	e2e_get(&e2e_main, path, read_y, &r);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
}

static void test_requests_over_the_rate_limit_get_429_with_retry_after(void **state)
{
	struct daemon d;
	const char *h[] = {"Idempotency-Key: rate-1", NULL};
	const char *body = "{\"amount\":100,\"currency\":\"eur\"}";
	size_t n_429 = 0;
	size_t i;

	fx_daemon_start(&d, API_ONLY_INI "[api]\nrate = 1\nburst = 3\n");
	for (i = 0; i < 6; i++) {
		struct hres r;

		e2e_post(&d, h, body, &r);
		if (r.hs_status == 429) {
			char *ra = hres_header(&r, "Retry-After");

			assert_problem(&r, 429, "rate_limited");
			assert_non_null(ra);
			free(ra);
			n_429++;
		} else {
			assert_int_equal(r.hs_status, 201);
		}
		hres_finish(&r);
	}
	assert_true(n_429 >= 2);
	assert_int_equal(e2e_count(&d, "SELECT count(*) FROM orders"), 1);
	daemon_finish(&d);
}

/* The reference field's maxlength, as the form page renders it. */
static long e2e_ref_maxlength(void)
{
	char *url = e2e_url(&e2e_main, "/checkout");
	const char *p;
	struct hres r;
	long n;

	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	p = strstr(r.hs_body, "name=\"customer_ref\"");
	assert_non_null(p);
	p = strstr(p, "maxlength=\"");
	assert_non_null(p);
	n = strtol(p + strlen("maxlength=\""), NULL, 10);
	hres_finish(&r);
	free(url);
	return n;
}

/* A browser counts maxlength in UTF-16 code units, not bytes: a customer
 * who fills the reference field to its limit, in any script, places the
 * order. The field is filled here with 3-byte characters (one unit each)
 * and with 4-byte ones (two units each), the most bytes per unit. */
static void test_checkout_takes_the_longest_reference_its_form_lets_a_customer_type(void **state)
{
	static const struct {
		const char *ch_form; /* one character, form-encoded */
		const char *ch_raw;
		long ch_units;
	} chars[] = {
	        {"%E4%B8%AD", "\xe4\xb8\xad", 1},
	        {"%F0%9F%98%80", "\xf0\x9f\x98\x80", 2},
	};
	long max = e2e_ref_maxlength();
	size_t i;

	assert_true(max > 0);
	for (i = 0; i < sizeof(chars) / sizeof(chars[0]); i++) {
		char form[2048];
		char raw[1024];
		char sql[1200];
		char key[40];
		size_t n = 0;
		size_t m = 0;
		long k;
		struct hres r;

		snprintf(key, sizeof(key), "5b1e7c3a-2d4f-4a6b-8c9d-0e1f2a3b4c5%zu", i);
		n = (size_t)snprintf(
		        form, sizeof(form),
		        "idempotency_key=%s&product=mug&quantity=1&customer_ref=", key);
		for (k = 0; k + chars[i].ch_units <= max; k += chars[i].ch_units) {
			n += (size_t)snprintf(form + n, sizeof(form) - n, "%s", chars[i].ch_form);
			m += (size_t)snprintf(raw + m, sizeof(raw) - m, "%s", chars[i].ch_raw);
			assert_true(n < sizeof(form) && m < sizeof(raw));
		}
		e2e_form_post_accept(form, "Accept: text/html", &r);
		if (r.hs_status != 303) {
			fail_msg("a full reference field (%ld units of %s): want 303, got %ld: %s",
			         max, chars[i].ch_form, r.hs_status,
			         r.hs_body != NULL ? r.hs_body : "");
		}
		hres_finish(&r);
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM orders WHERE customer_ref = '%s'",
		         raw);
		assert_int_equal(e2e_count(&e2e_main, sql), 1);
	}
}

/* A refused form comes back to be corrected, not thrown away: the same
 * key (not spent), the product, quantity and reference as sent; a
 * reference that is no text (a tab) comes back empty. */
static void test_checkout_refusal_gives_the_form_back_with_its_key(void **state)
{
	const char *key = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";
	char form[256];
	char field[128];
	struct hres r;

	snprintf(form, sizeof(form),
	         "idempotency_key=%s&product=grinder&quantity=25&customer_ref=Keep+me", key);
	e2e_form_post_accept(form, "Accept: text/html", &r);
	assert_int_equal(r.hs_status, 400);
	assert_non_null(strstr(r.hs_body, "<form id=\"checkout\""));
	snprintf(field, sizeof(field), "name=\"idempotency_key\" value=\"%s\"", key);
	assert_non_null(strstr(r.hs_body, field));
	assert_non_null(strstr(r.hs_body, "<option value=\"grinder\" selected>"));
	assert_non_null(strstr(r.hs_body, "name=\"quantity\" value=\"25\""));
	assert_non_null(strstr(r.hs_body, "name=\"customer_ref\" value=\"Keep me\""));
	hres_finish(&r);
	snprintf(form, sizeof(form),
	         "idempotency_key=%s&product=grinder&quantity=2&customer_ref=a%%09b", key);
	e2e_form_post_accept(form, "Accept: text/html", &r);
	assert_int_equal(r.hs_status, 400);
	assert_non_null(strstr(r.hs_body, field));
	assert_non_null(strstr(r.hs_body, "name=\"customer_ref\" value=\"\""));
	hres_finish(&r);
	assert_int_equal(e2e_count(&e2e_main, "SELECT count(*) FROM idempotency_records WHERE "
	                                      "idem_key = '9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d'"),
	                 0);
	/* Corrected, the same key places the order. */
	snprintf(form, sizeof(form),
	         "idempotency_key=%s&product=grinder&quantity=2&customer_ref=Keep+me", key);
	e2e_form_post_accept(form, "Accept: text/html", &r);
	assert_int_equal(r.hs_status, 303);
	hres_finish(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_post_without_idempotency_key_is_400),
	        cmocka_unit_test(test_post_with_malformed_idempotency_key_is_400),
	        cmocka_unit_test(test_post_with_a_key_over_255_characters_is_400),
	        cmocka_unit_test(test_post_with_several_idempotency_keys_is_400),
	        cmocka_unit_test(test_a_repeated_single_field_is_400_and_consumes_no_key),
	        cmocka_unit_test(test_first_post_creates_the_order_and_answers_201_with_location),
	        cmocka_unit_test(test_retry_with_same_key_replays_the_201_byte_for_byte),
	        cmocka_unit_test(test_reordered_json_with_other_whitespace_is_a_replay_not_422),
	        cmocka_unit_test(test_same_key_with_a_changed_amount_is_422),
	        cmocka_unit_test(test_concurrent_identical_posts_create_one_order),
	        cmocka_unit_test(test_two_clients_with_the_same_key_get_two_orders),
	        cmocka_unit_test(
	                test_same_key_while_the_first_is_in_flight_is_409_with_retry_after),
	        cmocka_unit_test(test_a_crashed_request_is_taken_over_once_its_lease_expires),
	        cmocka_unit_test(test_invalid_orders_are_400_and_consume_no_key),
	        cmocka_unit_test(test_currencies_iso_4217_does_not_list_are_400_and_create_nothing),
	        cmocka_unit_test(test_malformed_json_duplicate_keys_nul_and_trailing_bytes_are_400),
	        cmocka_unit_test(test_refusals_name_what_is_wrong_with_the_body),
	        cmocka_unit_test(test_wrong_content_type_is_415),
	        cmocka_unit_test(
	                test_a_body_over_the_server_limit_is_413_with_cors_for_an_allowed_origin),
	        cmocka_unit_test(test_a_body_over_the_api_limit_is_413),
	        cmocka_unit_test(test_unknown_orders_and_paths_are_404_problems),
	        cmocka_unit_test(test_preflight_from_a_configured_origin_is_answered),
	        cmocka_unit_test(test_preflight_from_another_origin_is_refused),
	        cmocka_unit_test(
	                test_cross_origin_replies_expose_location_retry_after_and_replayed),
	        cmocka_unit_test(test_answers_vary_on_origin_whatever_the_origin),
	        cmocka_unit_test(test_under_a_star_every_answer_says_star_and_never_echoes_null),
	        cmocka_unit_test(
	                test_under_a_star_every_answer_the_listener_makes_on_api_says_star),
	        cmocka_unit_test(
	                test_with_origins_listed_a_slow_head_on_api_is_408_with_vary_origin),
	        cmocka_unit_test(test_with_origins_listed_null_is_refused),
	        cmocka_unit_test(test_a_body_too_slow_is_408_with_cors_for_an_allowed_origin),
	        cmocka_unit_test(test_options_that_is_no_preflight_answers_allow),
	        cmocka_unit_test(test_content_type_takes_tabs_before_parameters_and_nothing_else),
	        cmocka_unit_test(test_checkout_renders_a_form_with_a_fresh_server_made_key),
	        cmocka_unit_test(
	                test_checkout_post_redirects_303_and_a_resubmit_reaches_the_same_order),
	        cmocka_unit_test(test_checkout_resubmit_with_changed_details_is_422),
	        cmocka_unit_test(test_checkout_head_of_the_result_page_leaves_the_flash),
	        cmocka_unit_test(test_checkout_405s_allow_head_where_get_is_allowed),
	        cmocka_unit_test(test_checkout_without_key_or_with_bad_fields_is_400),
	        cmocka_unit_test(test_checkout_reference_not_utf8_or_with_controls_is_400),
	        cmocka_unit_test(test_checkout_answers_in_the_type_the_accept_field_prefers),
	        cmocka_unit_test(test_checkout_answers_chosen_by_accept_say_vary_accept),
	        cmocka_unit_test(
	                test_checkout_takes_the_longest_reference_its_form_lets_a_customer_type),
	        cmocka_unit_test(test_checkout_refusal_gives_the_form_back_with_its_key),
	        cmocka_unit_test(
	                test_checkout_serves_its_script_and_stylesheet_as_the_files_in_the_tree),
	        cmocka_unit_test(test_demo_payment_sends_a_signed_callback_twice_and_pays_once),
	        cmocka_unit_test(test_demo_payment_with_a_one_thread_listener_goes_over_http_too),
	        cmocka_unit_test(test_bearer_tokens_authenticate_and_scope_keys_per_client),
	        cmocka_unit_test(test_order_reads_are_scoped_to_the_token_that_created_them),
	        cmocka_unit_test(test_without_tokens_reads_are_scoped_to_the_client_id),
	        cmocka_unit_test(test_requests_over_the_rate_limit_get_429_with_retry_after),
	};

	return cmocka_run_group_tests(tests, e2e_setup, e2e_teardown);
}
