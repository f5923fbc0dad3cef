/* test_alipay_e2e.c: Alipay notifications over real HTTP against the real
 * daemon, signed RSA2 with a key generated at test time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "buf.h"
#include "crypto.h"
#include "fixtures.h"
#include "provider_e2e.h"
#include "rawhttp.h"

#define ALI_APP_ID "2021001144680325"
#define ALI_SELLER "2088031940831575"

static EVP_PKEY *ali_key;
static const char *const ali_headers[] = {
        "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL};

struct field {
	const char *k;
	const char *v;
};

static int field_cmp(const void *a, const void *b)
{
	return strcmp(((const struct field *)a)->k, ((const struct field *)b)->k);
}

static void form_escape(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.') {
			buf_append(b, s, 1);
		} else if (c == ' ') {
			buf_puts(b, "+");
		} else {
			buf_printf(b, "%%%02X", c);
		}
	}
}

/* Signs the fields as Alipay does (sorted, without sign_type and empty values). */
static char *ali_form(const struct field *fields, size_t n)
{
	struct field sorted[32];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char sig[512];
	size_t sig_len = sizeof(sig);
	char *b64 = NULL;
	struct buf content;
	struct buf body;
	size_t i;

	memcpy(sorted, fields, n * sizeof(*fields));
	qsort(sorted, n, sizeof(*sorted), field_cmp);
	buf_init(&content, 0);
	for (i = 0; i < n; i++) {
		if (strcmp(sorted[i].k, "sign_type") == 0 || sorted[i].v[0] == '\0') {
			continue;
		}
		buf_printf(&content, "%s%s=%s", content.buf_len > 0 ? "&" : "", sorted[i].k,
		           sorted[i].v);
	}
	assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, ali_key), 1);
	assert_int_equal(EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)content.buf_data,
	                                content.buf_len),
	                 1);
	EVP_MD_CTX_free(ctx);
	assert_int_equal(crypto_base64_encode(sig, sig_len, &b64, NULL), 0);
	buf_init(&body, 0);
	for (i = 0; i < n; i++) {
		form_escape(&body, fields[i].k);
		buf_puts(&body, "=");
		form_escape(&body, fields[i].v);
		buf_puts(&body, "&");
	}
	buf_puts(&body, "sign=");
	form_escape(&body, b64);
	free(b64);
	buf_finish(&content);
	return buf_take(&body, NULL);
}

/* A trade notification; refund_fee NULL for a payment. */
static char *ali_trade(const char *notify_id, const char *order, const char *total,
                       const char *status, const char *refund_fee, const char *out_biz_no)
{
	struct field f[20];
	size_t n = 0;

	f[n++] = (struct field){"notify_id", notify_id};
	f[n++] = (struct field){"notify_type", "trade_status_sync"};
	f[n++] = (struct field){"notify_time", "2024-12-02 10:59:38"};
	f[n++] = (struct field){"charset", "utf-8"};
	f[n++] = (struct field){"version", "1.0"};
	f[n++] = (struct field){"sign_type", "RSA2"};
	f[n++] = (struct field){"app_id", ALI_APP_ID};
	f[n++] = (struct field){"seller_id", ALI_SELLER};
	f[n++] = (struct field){"out_trade_no", order};
	f[n++] = (struct field){"trade_no", "2024120222001456380542497258"};
	f[n++] = (struct field){"trade_status", status};
	f[n++] = (struct field){"total_amount", total};
	f[n++] = (struct field){"subject", "Order at the shop"};
	if (refund_fee != NULL) {
		f[n++] = (struct field){"refund_fee", refund_fee};
		f[n++] = (struct field){"out_biz_no", out_biz_no};
	}
	return ali_form(f, n);
}

static int setup(void **state)
{
	struct daemon *d = calloc(1, sizeof(*d));
	unsigned char *der = NULL;
	char *b64 = NULL;
	struct buf ini;
	int n;
	int rc = -1;

	ali_key = EVP_RSA_gen(2048);
	n = ali_key != NULL ? i2d_PUBKEY(ali_key, &der) : -1;
	if (d == NULL || n <= 0 || crypto_base64_encode(der, (size_t)n, &b64, NULL) < 0) {
		return -1;
	}
	OPENSSL_free(der);
	/* The console's one-line key is longer than a config line may be: env:. */
	setenv("IDEMHOOK_E2E_ALIPAY_PUB", b64, 1);
	buf_init(&ini, 0);
	buf_printf(&ini,
	           "[provider alipay]\ntype = alipay\napp_id = %s\nseller_id = %s\n"
	           "public_key = env:IDEMHOOK_E2E_ALIPAY_PUB\n\n[points]\nrate = 1/100\n",
	           ALI_APP_ID, ALI_SELLER);
	if (daemon_init(d, ini.buf_data) == 0 && daemon_start(d) == 0) {
		rc = 0;
	}
	buf_finish(&ini);
	free(b64);
	*state = d;
	return rc;
}

static int teardown(void **state)
{
	struct daemon *d = *state;

	daemon_finish(d);
	free(d);
	EVP_PKEY_free(ali_key);
	return 0;
}

static void test_alipay_payment_pays_once_and_answers_success(void **state)
{
	struct daemon *d = *state;
	struct hres first;
	struct hres again;
	int classes[3];
	char id[64];
	char *body;
	char *finished;

	fx_order(d, 1999, "cny", id);
	body = ali_trade("notify-e2e-1", id, "19.99", "TRADE_SUCCESS", NULL, NULL);
	assert_int_equal(e2e_post(d, "alipay", ali_headers, body, &first), 0);
	assert_int_equal(first.hs_status, 200);
	assert_int_equal(first.hs_body_len, 7);
	assert_memory_equal(first.hs_body, "success", 7);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id),
	        19);

	assert_int_equal(e2e_post(d, "alipay", ali_headers, body, &again), 0);
	assert_int_equal(again.hs_status, 200);
	assert_memory_equal(again.hs_body, "success", 7);
	assert_true(e2e_replayed(&again));
	assert_int_equal(e2e_storm_classes(d, "alipay", ali_headers, body, classes), 0);
	assert_int_equal(classes[0], E2E_STORM);

	/* TRADE_FINISHED comes later with its own notify_id and changes nothing. */
	finished = ali_trade("notify-e2e-1-finished", id, "19.99", "TRADE_FINISHED", NULL, NULL);
	hres_finish(&again);
	assert_int_equal(e2e_post(d, "alipay", ali_headers, finished, &again), 0);
	assert_int_equal(again.hs_status, 200);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	hres_finish(&first);
	hres_finish(&again);
	free(body);
	free(finished);
}

static void test_alipay_refund_applies_once(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *pay;
	char *refund;

	fx_order(d, 1000, "cny", id);
	pay = ali_trade("notify-e2e-2", id, "10.00", "TRADE_SUCCESS", NULL, NULL);
	refund = ali_trade("notify-e2e-2-refund", id, "10.00", "TRADE_CLOSED", "10.00", "refund-2");
	assert_int_equal(e2e_post(d, "alipay", ali_headers, pay, &r), 0);
	hres_finish(&r);
	assert_int_equal(e2e_post(d, "alipay", ali_headers, refund, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id),
	        0);
	assert_int_equal(e2e_post(d, "alipay", ali_headers, refund, &r), 0);
	assert_true(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 2);
	free(pay);
	free(refund);
}

static void test_alipay_forged_notification_answers_fail_and_stores_nothing(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *body;
	char *amount;

	fx_order(d, 100, "cny", id);
	body = ali_trade("notify-e2e-forged", id, "1.00", "TRADE_SUCCESS", NULL, NULL);
	amount = strstr(body, "total_amount=1.00");
	assert_non_null(amount);
	amount[13] = '2';
	assert_int_equal(e2e_post(d, "alipay", ali_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	assert_int_equal(r.hs_body_len, 4);
	assert_memory_equal(r.hs_body, "fail", 4);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
	                               "'notify-e2e-forged'"),
	                 0);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);
	free(body);
}

/* What the listener and the route refuse at its path is Alipay's "fail"
 * too: Alipay reads any other body as an answer it does not know. */
static void test_alipay_listener_and_method_refusals_answer_fail(void **state)
{
	struct daemon *d = *state;
	struct e2e_refusals r;

	e2e_refusals(d, "alipay", &r);
	e2e_expect_answer(&r.er_too_large, 413, "text/plain", "fail", NULL);
	e2e_expect_answer(&r.er_head, 431, "text/plain", "fail", NULL);
	e2e_expect_answer(&r.er_get, 405, "text/plain", "fail", "Allow: POST");
	e2e_refusals_finish(&r);
	assert_int_equal(daemon_log_wait(d,
	                                 "hook path=\"/hooks/alipay\" outcome=rejected "
	                                 "reason=body_too_large status=413",
	                                 10000),
	                 0);
}

/* A head that stops after its request line (which names the path) is cut
 * at [server] head_timeout with Alipay's "fail" in a 408. */
static void test_alipay_a_head_too_slow_gets_its_408_as_fail(void **state)
{
	static const char line[] = "POST /hooks/alipay HTTP/1.1\r\nHost: x\r\n";
	struct daemon d;
	struct rh_response r;
	char *ct;
	int fd;

	(void)state;
	fx_daemon_start(&d,
	                "[provider alipay]\ntype = alipay\napp_id = %s\nseller_id = %s\n"
	                "public_key = env:IDEMHOOK_E2E_ALIPAY_PUB\n\n[server]\nhead_timeout = 1s\n",
	                ALI_APP_ID, ALI_SELLER);
	fd = rh_connect(NULL, d.dm_port);
	assert_true(fd >= 0);
	assert_int_equal(rh_send(fd, line, sizeof(line) - 1), 0);
	assert_int_equal(rh_read_response(fd, 10000, &r), 1);
	assert_int_equal(r.rr_status, 408);
	ct = rh_header(&r, "Content-Type");
	assert_non_null(ct);
	assert_string_equal(ct, "text/plain");
	free(ct);
	assert_string_equal(r.rr_body, "fail");
	rh_response_finish(&r);
	close(fd);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

/* ---- the lifecycle: TRADE_CLOSED, in order and in reverse ---- */

/* Posts body twice; both answered "success", the second replayed. */
static void ali_deliver_twice(struct daemon *d, const char *body)
{
	int round;

	for (round = 0; round < 2; round++) {
		struct hres r;

		assert_int_equal(e2e_post(d, "alipay", ali_headers, body, &r), 0);
		assert_int_equal(r.hs_status, 200);
		assert_memory_equal(r.hs_body, "success", 7);
		assert_int_equal(e2e_replayed(&r), round == 1);
		hres_finish(&r);
	}
}

static void test_alipay_trade_closed_unpaid_cancels_the_order(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char notify[96];
	char *closed;

	fx_order(d, 1000, "cny", id);
	snprintf(notify, sizeof(notify), "notify-closed-%s", id);
	/* Closed on timeout: the buyer never paid. */
	closed = ali_trade(notify, id, "10.00", "TRADE_CLOSED", NULL, NULL);
	ali_deliver_twice(d, closed);
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = 'cancelled' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 0);
	free(closed);
}

static void test_alipay_trade_closed_after_a_full_refund_is_that_refund(void **state)
{
	struct daemon *d = *state;
	const char *ids[2];
	char a[64];
	char b[64];
	size_t k;

	fx_order(d, 1000, "cny", a);
	fx_order(d, 1000, "cny", b);
	ids[0] = a;
	ids[1] = b;
	for (k = 0; k < 2; k++) {
		char n1[96];
		char n2[96];
		char *paid;
		char *closed;

		snprintf(n1, sizeof(n1), "notify-paid-%s", ids[k]);
		snprintf(n2, sizeof(n2), "notify-refund-close-%s", ids[k]);
		paid = ali_trade(n1, ids[k], "10.00", "TRADE_SUCCESS", NULL, NULL);
		closed = ali_trade(n2, ids[k], "10.00", "TRADE_CLOSED", "10.00", "refund-all");
		/* a in order, b in reverse. */
		ali_deliver_twice(d, k == 0 ? paid : closed);
		ali_deliver_twice(d, k == 0 ? closed : paid);
		assert_int_equal(
		        e2e_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'",
		                   ids[k]),
		        1);
		assert_int_equal(
		        e2e_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", ids[k]),
		        1000);
		assert_int_equal(
		        e2e_db_int(d,
		                   "SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE "
		                   "order_id = '%s'",
		                   ids[k]),
		        0);
		free(paid);
		free(closed);
	}
}

/* The form counterparts of the JSON cases, each on a correctly signed form:
 * a NUL escape (the signature covers the value cut at it) and a repeated
 * field, signed or empty and unsigned. Refused before any claim. */
static void test_alipay_forms_parsers_disagree_on_consume_no_key(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *good;
	char *bad[3];
	size_t i;

	fx_order(d, 880, "cny", id);
	good = ali_trade("notify-strict", id, "8.80", "TRADE_SUCCESS", NULL, NULL);
	bad[0] = e2e_replace(good, "notify_id=notify-strict", "notify_id=notify-strict%00x");
	bad[1] = e2e_replace(good, "&sign=", "&total_amount=0.01&sign=");
	bad[2] = e2e_replace(good, "&sign=", "&notify_id=&sign=");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e2e_expect_unchanged(d, "alipay", ali_headers, bad[i], 400);
		free(bad[i]);
	}
	assert_int_equal(e2e_post(d, "alipay", ali_headers, good, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_false(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	free(good);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_alipay_payment_pays_once_and_answers_success),
	        cmocka_unit_test(test_alipay_refund_applies_once),
	        cmocka_unit_test(test_alipay_forged_notification_answers_fail_and_stores_nothing),
	        cmocka_unit_test(test_alipay_listener_and_method_refusals_answer_fail),
	        cmocka_unit_test(test_alipay_a_head_too_slow_gets_its_408_as_fail),
	        cmocka_unit_test(test_alipay_trade_closed_unpaid_cancels_the_order),
	        cmocka_unit_test(test_alipay_trade_closed_after_a_full_refund_is_that_refund),
	        cmocka_unit_test(test_alipay_forms_parsers_disagree_on_consume_no_key),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
