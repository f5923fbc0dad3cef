/* test_alipay.c: unit tests for the Alipay profile with RSA2 keys generated at
 * test time (no published vector exists): sorted-form signing, app/seller
 * checks, charset and percent-encoding edge cases, normalization, answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "buf.h"
#include "crypto.h"
#include "provider_test.h"

extern const struct provider provider_alipay;

#define APP_ID "2021001144680325"
#define SELLER_ID "2088031940831575"
#define NOW 1733130100

static EVP_PKEY *alipay_key;
static EVP_PKEY *other_key;
static char *alipay_pub_b64; /* base64 DER SubjectPublicKeyInfo, as Alipay's console shows it */

static int setup(void **state)
{
	unsigned char *der = NULL;
	int n;

	(void)state;
	alipay_key = EVP_RSA_gen(2048);
	other_key = EVP_RSA_gen(2048);
	n = i2d_PUBKEY(alipay_key, &der);
	if (n <= 0 || crypto_base64_encode(der, (size_t)n, &alipay_pub_b64, NULL) < 0) {
		return -1;
	}
	OPENSSL_free(der);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	EVP_PKEY_free(alipay_key);
	EVP_PKEY_free(other_key);
	free(alipay_pub_b64);
	return 0;
}

static void make_instance(struct pt_instance *pi, int with_seller)
{
	const char *kv[] = {"app_id",    APP_ID,    "public_key", alipay_pub_b64,
	                    "seller_id", SELLER_ID, NULL};

	if (!with_seller) {
		kv[4] = NULL;
	}
	assert_int_equal(pt_instance_create(pi, &provider_alipay, kv), 0);
}

struct field {
	const char *k;
	const char *v;
};

static int field_cmp(const void *a, const void *b)
{
	return strcmp(((const struct field *)a)->k, ((const struct field *)b)->k);
}

static char *rsa2_sign(EVP_PKEY *k, const char *content)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char sig[512];
	size_t n = sizeof(sig);
	char *b64 = NULL;

	assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k), 1);
	assert_int_equal(
	        EVP_DigestSign(ctx, sig, &n, (const unsigned char *)content, strlen(content)), 1);
	EVP_MD_CTX_free(ctx);
	assert_int_equal(crypto_base64_encode(sig, n, &b64, NULL), 0);
	return b64;
}

/* Percent-encodes everything but unreserved bytes; spaces as '+'. */
static void form_escape(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			buf_append(b, s, 1);
		} else if (c == ' ') {
			buf_puts(b, "+");
		} else {
			buf_printf(b, "%%%02X", c);
		}
	}
}

/* Signs fields (values as raw bytes) the way Alipay does and encodes the form. */
static char *make_form(const struct field *fields, size_t n, EVP_PKEY *k)
{
	struct field sorted[64];
	struct buf content;
	struct buf body;
	char *sign;
	size_t i;

	assert_true(n < 64);
	memcpy(sorted, fields, n * sizeof(*fields));
	qsort(sorted, n, sizeof(*sorted), field_cmp);
	buf_init(&content, 0);
	for (i = 0; i < n; i++) {
		if (strcmp(sorted[i].k, "sign_type") == 0 || sorted[i].v[0] == '\0') {
			continue;
		}
		if (content.buf_len > 0) {
			buf_puts(&content, "&");
		}
		buf_printf(&content, "%s=%s", sorted[i].k, sorted[i].v);
	}
	sign = rsa2_sign(k, content.buf_len > 0 ? content.buf_data : "");
	buf_init(&body, 0);
	for (i = 0; i < n; i++) {
		form_escape(&body, fields[i].k);
		buf_puts(&body, "=");
		form_escape(&body, fields[i].v);
		buf_puts(&body, "&");
	}
	buf_puts(&body, "sign=");
	form_escape(&body, sign);
	free(sign);
	buf_finish(&content);
	return buf_take(&body, NULL);
}

static int receive(struct pt_instance *pi, const char *body, struct event_batch *b,
                   struct provider_verdict *v)
{
	struct pt_request r;
	int rc;

	pt_request_init(&r, body, strlen(body));
	pt_request_header(&r, "Content-Type", "application/x-www-form-urlencoded; charset=utf-8");
	rc = pt_receive(pi, &r, NOW, b, v);
	pt_request_finish(&r);
	return rc;
}

#define BASE_FIELDS(status)                                                                        \
	{"gmt_create", "2024-12-02 10:59:32"}, {"charset", "utf-8"},                               \
	        {"gmt_payment", "2024-12-02 10:59:38"}, {"notify_time", "2024-12-02 10:59:38"},    \
	        {"subject", "Order 171"}, {"buyer_id", "2088002582656381"},                        \
	        {"invoice_amount", "0.10"}, {"version", "1.0"},                                    \
	        {"notify_id", "2024120200222105938056380529774436"},                               \
	        {"notify_type", "trade_status_sync"}, {"out_trade_no", "ord_ali_1"},               \
	        {"total_amount", "0.10"}, {"trade_status", status},                                \
	        {"trade_no", "2024120222001456380542497258"}, {"app_id", APP_ID},                  \
	        {"sign_type", "RSA2"}, {"seller_id", SELLER_ID},                                   \
	{                                                                                          \
		"fund_bill_list", "[{\"amount\":\"0.10\",\"fundChannel\":\"PCREDIT\"}]"            \
	}

static void test_alipay_accepts_a_signed_trade_success(void **state)
{
	const struct field f[] = {BASE_FIELDS("TRADE_SUCCESS")};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const struct event *ev;

	(void)state;
	make_instance(&pi, 1);
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	assert_int_equal(b.eb_n, 1);
	ev = &b.eb_events[0];
	assert_string_equal(ev->ev_key, "2024120200222105938056380529774436");
	assert_string_equal(ev->ev_type, "TRADE_SUCCESS");
	assert_int_equal(ev->ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(ev->ev_order_ref, "ord_ali_1");
	assert_string_equal(ev->ev_payment_ref, "2024120222001456380542497258");
	assert_int_equal(ev->ev_amount, 10);
	assert_string_equal(ev->ev_currency, "CNY");
	assert_non_null(strstr(ev->ev_payload, "\"out_trade_no\":\"ord_ali_1\""));
	assert_null(strstr(ev->ev_payload, "\"sign\""));
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void
test_alipay_maps_trade_finished_to_paid_and_trade_closed_unpaid_to_cancelled(void **state)
{
	const struct field finished[] = {BASE_FIELDS("TRADE_FINISHED")};
	const struct field closed[] = {BASE_FIELDS("TRADE_CLOSED")};
	char *b1 = make_form(finished, sizeof(finished) / sizeof(finished[0]), alipay_key);
	char *b2 = make_form(closed, sizeof(closed) / sizeof(closed[0]), alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 1);
	assert_int_equal(receive(&pi, b1, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	event_batch_finish(&b);
	assert_int_equal(receive(&pi, b2, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_PAYMENT_CANCELLED);
	assert_string_equal(b.eb_events[0].ev_type, "TRADE_CLOSED");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(b1);
	free(b2);
}

static void test_alipay_trade_closed_after_a_full_refund_is_that_refund(void **state)
{
	struct field f[] = {BASE_FIELDS("TRADE_CLOSED"),
	                    {"refund_fee", "0.10"},
	                    {"out_biz_no", "refund-all"},
	                    {"gmt_close", "2024-12-03 10:00:00"}};
	struct field waiting[] = {BASE_FIELDS("WAIT_BUYER_PAY")};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	char *body_waiting = make_form(waiting, sizeof(waiting) / sizeof(waiting[0]), alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 1);
	/* Not the cancellation of a paid order: the refund that closed it. */
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_REFUNDED);
	assert_int_equal(b.eb_events[0].ev_amount, 10);
	assert_string_equal(b.eb_events[0].ev_refund_ref, "refund-all");
	event_batch_finish(&b);
	assert_int_equal(receive(&pi, body_waiting, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_OTHER);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
	free(body_waiting);
}

static void test_alipay_maps_refund_fee_to_a_cumulative_refund(void **state)
{
	struct field f[] = {BASE_FIELDS("TRADE_SUCCESS"),
	                    {"refund_fee", "0.05"},
	                    {"out_biz_no", "refund-1"},
	                    {"gmt_refund", "2024-12-03 10:00:00.123"}};
	struct field zero[] = {BASE_FIELDS("TRADE_SUCCESS"), {"refund_fee", "0.00"}};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	char *body_zero = make_form(zero, sizeof(zero) / sizeof(zero[0]), alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const struct event *ev;

	(void)state;
	make_instance(&pi, 1);
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	ev = &b.eb_events[0];
	assert_int_equal(ev->ev_kind, EVENT_REFUNDED);
	assert_int_equal(ev->ev_refund_cumulative, 1);
	assert_int_equal(ev->ev_amount, 5);
	assert_string_equal(ev->ev_refund_ref, "refund-1");
	assert_string_equal(ev->ev_order_ref, "ord_ali_1");
	event_batch_finish(&b);
	/* refund_fee=0.00 on a payment notification is not a refund. */
	assert_int_equal(receive(&pi, body_zero, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
	free(body_zero);
}

/* Empty values are not signed: an added "out_biz_no=" must not replace the
 * signed notify_id as the refund id. */
static void test_alipay_reads_an_unsigned_empty_field_as_absent(void **state)
{
	struct field f[] = {BASE_FIELDS("TRADE_SUCCESS"), {"refund_fee", "0.05"},
	                    {"out_biz_no", ""}};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 1);
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_REFUNDED);
	assert_string_equal(b.eb_events[0].ev_refund_ref, "2024120200222105938056380529774436");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_alipay_rejects_a_form_changed_by_one_byte(void **state)
{
	const struct field f[] = {BASE_FIELDS("TRADE_SUCCESS")};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 1);
	strstr(body, "total_amount=0.10")[16] = '2';
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_alipay_rejects_a_signature_by_the_wrong_key(void **state)
{
	const struct field f[] = {BASE_FIELDS("TRADE_SUCCESS")};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), other_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 1);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_alipay_rejects_a_form_without_sign(void **state)
{
	const char *body =
	        "notify_id=1&app_id=" APP_ID "&trade_status=TRADE_SUCCESS&total_amount=1.00";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 1);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_signature");
	assert_int_equal(receive(&pi, "", &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	pt_instance_destroy(&pi);
}

static void test_alipay_rejects_another_app_or_seller(void **state)
{
	struct field f[] = {BASE_FIELDS("TRADE_SUCCESS")};
	size_t n = sizeof(f) / sizeof(f[0]);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char *body;
	size_t i;

	(void)state;
	make_instance(&pi, 1);
	for (i = 0; i < n; i++) {
		if (strcmp(f[i].k, "app_id") == 0) {
			f[i].v = "2021000000000000";
		}
	}
	body = make_form(f, n, alipay_key);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 403);
	assert_string_equal(v.pv_reason, "wrong_app");
	free(body);
	for (i = 0; i < n; i++) {
		if (strcmp(f[i].k, "app_id") == 0) {
			f[i].v = APP_ID;
		}
		if (strcmp(f[i].k, "seller_id") == 0) {
			f[i].v = "2088000000000000";
		}
	}
	body = make_form(f, n, alipay_key);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 403);
	assert_string_equal(v.pv_reason, "wrong_seller");
	pt_instance_destroy(&pi);
	/* Without seller_id configured, any seller of the app is accepted. */
	make_instance(&pi, 0);
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_alipay_rejects_a_signed_form_without_notify_id(void **state)
{
	const struct field f[] = {{"app_id", APP_ID},
	                          {"trade_status", "TRADE_SUCCESS"},
	                          {"total_amount", "1.00"},
	                          {"out_trade_no", "o"}};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 0);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_key");
	pt_instance_destroy(&pi);
	free(body);
}

static void test_alipay_decodes_plus_and_percent_escapes_before_verifying(void **state)
{
	/* '+' for space, %2B for '+', %25 for '%', lower-case hex, '=' and '&' escaped in values.
	 */
	const struct field f[] = {{"notify_id", "n-1"},
	                          {"app_id", APP_ID},
	                          {"trade_status", "TRADE_SUCCESS"},
	                          {"total_amount", "12.00"},
	                          {"out_trade_no", "ord+1"},
	                          {"subject", "50% off a=b&c d"},
	                          {"body", "caf\xc3\xa9"}};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	struct buf lower;
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char *p;

	(void)state;
	make_instance(&pi, 0);
	assert_non_null(strstr(body, "subject=50%25+off+a%3Db%26c+d"));
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_order_ref, "ord+1");
	assert_int_equal(b.eb_events[0].ev_amount, 1200);
	assert_non_null(strstr(b.eb_events[0].ev_payload, "\"subject\":\"50% off a=b&c d\""));
	event_batch_finish(&b);
	/* The same bytes with lower-case hex escapes and %20 for the spaces. */
	buf_init(&lower, 0);
	for (p = body; *p != '\0'; p++) {
		if (*p == '+') {
			buf_puts(&lower, "%20");
		} else if (p > body + 1 && p[-1] != '%' && p[-2] == '%' && *p >= 'A' && *p <= 'F') {
			char c = (char)(*p - 'A' + 'a');

			buf_append(&lower, &c, 1);
		} else {
			buf_append(&lower, p, 1);
		}
	}
	/* ord%2B1 stays a plus: the literal '+' in the value was escaped. */
	assert_int_equal(receive(&pi, lower.buf_data, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_order_ref, "ord+1");
	event_batch_finish(&b);
	buf_finish(&lower);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_alipay_rejects_malformed_percent_escapes(void **state)
{
	const char *bad[] = {"notify_id=%G1&sign=AA==",
	                     "notify_id=1%&sign=AA==",
	                     "notify_id=1%4&sign=AA==",
	                     "notify_id=1%00&sign=AA==",
	                     "=1&sign=AA==",
	                     "notify_id&sign=AA==",
	                     "notify_id=1&notify_id=2&sign=AA=="};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	make_instance(&pi, 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(receive(&pi, bad[i], &b, &v), -1);
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, "malformed_body");
	}
	pt_instance_destroy(&pi);
}

static void test_alipay_rejects_bytes_that_are_not_utf8_under_charset_utf8(void **state)
{
	const struct field invalid[] = {{"charset", "utf-8"},
	                                {"notify_id", "n"},
	                                {"app_id", APP_ID},
	                                {"subject", "\xff\xfe"}};
	const struct field overlong[] = {{"charset", "utf-8"},
	                                 {"notify_id", "n"},
	                                 {"app_id", APP_ID},
	                                 {"subject", "\xc0\xaf"}};
	const struct field surrogate[] = {{"charset", "UTF-8"},
	                                  {"notify_id", "n"},
	                                  {"app_id", APP_ID},
	                                  {"subject", "\xed\xa0\x80"}};
	const struct field *cases[] = {invalid, overlong, surrogate};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	make_instance(&pi, 0);
	for (i = 0; i < 3; i++) {
		char *body = make_form(cases[i], 4, alipay_key);

		assert_int_equal(receive(&pi, body, &b, &v), -1);
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, "malformed_body");
		free(body);
	}
	pt_instance_destroy(&pi);
}

static void test_alipay_honours_charset_gbk(void **state)
{
	/* "中文" in GBK is D6 D0 CE C4; Alipay signs the GBK bytes. */
	const struct field f[] = {{"charset", "gbk"},
	                          {"notify_id", "n-gbk"},
	                          {"app_id", APP_ID},
	                          {"trade_status", "TRADE_SUCCESS"},
	                          {"total_amount", "1"},
	                          {"out_trade_no", "o-gbk"},
	                          {"subject", "\xd6\xd0\xce\xc4"}};
	const struct field unknown[] = {
	        {"charset", "koi8-r"}, {"notify_id", "n"}, {"app_id", APP_ID}};
	char *body = make_form(f, sizeof(f) / sizeof(f[0]), alipay_key);
	char *body2 = make_form(unknown, 3, alipay_key);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, 0);
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_amount, 100);
	assert_non_null(
	        strstr(b.eb_events[0].ev_payload, "\"subject\":\"\xe4\xb8\xad\xe6\x96\x87\""));
	event_batch_finish(&b);
	assert_int_equal(receive(&pi, body2, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	pt_instance_destroy(&pi);
	free(body);
	free(body2);
}

static void test_alipay_rejects_malformed_amounts_and_legacy_sign_type(void **state)
{
	const struct field three_digits[] = {{"notify_id", "n"},
	                                     {"app_id", APP_ID},
	                                     {"trade_status", "TRADE_SUCCESS"},
	                                     {"total_amount", "1.234"}};
	const struct field negative[] = {{"notify_id", "n"},
	                                 {"app_id", APP_ID},
	                                 {"trade_status", "TRADE_SUCCESS"},
	                                 {"total_amount", "-1.00"}};
	const struct field rsa1[] = {{"notify_id", "n"}, {"app_id", APP_ID}, {"sign_type", "RSA"}};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char *body;

	(void)state;
	make_instance(&pi, 0);
	body = make_form(three_digits, 4, alipay_key);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	free(body);
	body = make_form(negative, 4, alipay_key);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	free(body);
	body = make_form(rsa1, 3, alipay_key);
	assert_int_equal(receive(&pi, body, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "unsupported_sign_type");
	free(body);
	pt_instance_destroy(&pi);
}

static void test_alipay_fingerprint_ignores_notify_time(void **state)
{
	struct field f[] = {BASE_FIELDS("TRADE_SUCCESS")};
	size_t n = sizeof(f) / sizeof(f[0]);
	unsigned char first[EVENT_FINGERPRINT_LEN];
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char *body;
	size_t i;

	(void)state;
	make_instance(&pi, 1);
	body = make_form(f, n, alipay_key);
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	memcpy(first, b.eb_events[0].ev_fingerprint, sizeof(first));
	event_batch_finish(&b);
	free(body);
	for (i = 0; i < n; i++) {
		if (strcmp(f[i].k, "notify_time") == 0) {
			f[i].v = "2024-12-02 11:30:00";
		}
	}
	body = make_form(f, n, alipay_key);
	assert_int_equal(receive(&pi, body, &b, &v), 0);
	assert_memory_equal(first, b.eb_events[0].ev_fingerprint, sizeof(first));
	event_batch_finish(&b);
	free(body);
	pt_instance_destroy(&pi);
}

static void test_alipay_answers_success_and_fail(void **state)
{
	struct event ev;
	struct event_outcome out = {0, NULL, "ord_1", "paid"};
	struct reply r;

	(void)state;
	memset(&ev, 0, sizeof(ev));
	reply_init(&r);
	assert_int_equal(provider_alipay.p_ack(NULL, &ev, &out, &r), 0);
	assert_int_equal(r.reply_status, 200);
	assert_string_equal(r.reply_content_type, "text/plain");
	assert_int_equal(r.reply_body_len, 7);
	assert_memory_equal(r.reply_body, "success", 7);
	reply_finish(&r);
	assert_int_equal(provider_alipay.p_error(NULL, 401, "bad_signature", NULL, &r), 0);
	assert_int_equal(r.reply_status, 401);
	assert_string_equal(r.reply_body, "fail");
	reply_finish(&r);
}

static void test_alipay_refuses_incomplete_configuration(void **state)
{
	const char *no_app[] = {"public_key", alipay_pub_b64, NULL};
	const char *no_key[] = {"app_id", APP_ID, NULL};
	const char *bad_key[] = {"app_id", APP_ID, "public_key", "bm90IGEga2V5", NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_alipay, no_app), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_alipay, no_key), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_alipay, bad_key), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_alipay_accepts_a_signed_trade_success),
	        cmocka_unit_test(
	                test_alipay_maps_trade_finished_to_paid_and_trade_closed_unpaid_to_cancelled),
	        cmocka_unit_test(test_alipay_maps_refund_fee_to_a_cumulative_refund),
	        cmocka_unit_test(test_alipay_trade_closed_after_a_full_refund_is_that_refund),
	        cmocka_unit_test(test_alipay_reads_an_unsigned_empty_field_as_absent),
	        cmocka_unit_test(test_alipay_rejects_a_form_changed_by_one_byte),
	        cmocka_unit_test(test_alipay_rejects_a_signature_by_the_wrong_key),
	        cmocka_unit_test(test_alipay_rejects_a_form_without_sign),
	        cmocka_unit_test(test_alipay_rejects_another_app_or_seller),
	        cmocka_unit_test(test_alipay_rejects_a_signed_form_without_notify_id),
	        cmocka_unit_test(test_alipay_decodes_plus_and_percent_escapes_before_verifying),
	        cmocka_unit_test(test_alipay_rejects_malformed_percent_escapes),
	        cmocka_unit_test(test_alipay_rejects_bytes_that_are_not_utf8_under_charset_utf8),
	        cmocka_unit_test(test_alipay_honours_charset_gbk),
	        cmocka_unit_test(test_alipay_rejects_malformed_amounts_and_legacy_sign_type),
	        cmocka_unit_test(test_alipay_fingerprint_ignores_notify_time),
	        cmocka_unit_test(test_alipay_answers_success_and_fail),
	        cmocka_unit_test(test_alipay_refuses_incomplete_configuration),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
