/* test_wechatpay.c: unit tests for the WeChat Pay API v3 profile with RSA keys
 * generated at test time (no published vector exists): signature by serial,
 * probes, tolerance, AES-256-GCM resource, normalization, answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "buf.h"
#include "crypto.h"
#include "provider_test.h"
#include "wechatpay_fixture.h"

extern const struct provider provider_wechatpay;

#define NOW 1733130100
#define APIV3_KEY "abcdefghijklmnopqrstuvwxyz012345"
#define SERIAL_A "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
#define SERIAL_B "PUB_KEY_ID_0114232134912410000000000000"

static EVP_PKEY *key_a;
static EVP_PKEY *key_b;
static EVP_PKEY *key_other;

static char *pem_of(EVP_PKEY *k)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *p = NULL;
	char *out;
	long n;

	assert_int_equal(PEM_write_bio_PUBKEY(bio, k), 1);
	n = BIO_get_mem_data(bio, &p);
	out = malloc((size_t)n + 1);
	memcpy(out, p, (size_t)n);
	out[n] = '\0';
	BIO_free(bio);
	return out;
}

static int setup(void **state)
{
	char *pem;

	(void)state;
	key_a = EVP_RSA_gen(2048);
	key_b = EVP_RSA_gen(2048);
	key_other = EVP_RSA_gen(2048);
	pem = pem_of(key_a);
	setenv("IDEMHOOK_TEST_WXP_KEY_A", pem, 1);
	free(pem);
	pem = pem_of(key_b);
	setenv("IDEMHOOK_TEST_WXP_KEY_B", pem, 1);
	free(pem);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	EVP_PKEY_free(key_a);
	EVP_PKEY_free(key_b);
	EVP_PKEY_free(key_other);
	return 0;
}

static void make_instance(struct pt_instance *pi)
{
	const char *kv[] = {"platform_key",
	                    SERIAL_A " env:IDEMHOOK_TEST_WXP_KEY_A",
	                    "platform_key",
	                    SERIAL_B " env:IDEMHOOK_TEST_WXP_KEY_B",
	                    "apiv3_key",
	                    "env:IDEMHOOK_TEST_WXP_APIV3",
	                    "mchid",
	                    "1900000001",
	                    NULL};

	setenv("IDEMHOOK_TEST_WXP_APIV3", APIV3_KEY, 1);
	assert_int_equal(pt_instance_create(pi, &provider_wechatpay, kv), 0);
}

struct wx_req {
	const char *ts;
	const char *nonce;
	const char *serial;
	EVP_PKEY *key;
	const char *sig_override; /* used instead of a real signature */
	const char *omit;         /* header left out */
};

static int receive(struct pt_instance *pi, const struct wx_req *w, const char *body, int64_t now,
                   struct event_batch *b, struct provider_verdict *v)
{
	struct pt_request r;
	char *sig = wx_fixture_sign(w->key, w->ts, w->nonce, body);
	int rc;

	pt_request_init(&r, body, strlen(body));
	if (w->omit == NULL || strcmp(w->omit, "Wechatpay-Timestamp") != 0) {
		pt_request_header(&r, "Wechatpay-Timestamp", w->ts);
	}
	if (w->omit == NULL || strcmp(w->omit, "Wechatpay-Nonce") != 0) {
		pt_request_header(&r, "Wechatpay-Nonce", w->nonce);
	}
	if (w->omit == NULL || strcmp(w->omit, "Wechatpay-Signature") != 0) {
		pt_request_header(&r, "Wechatpay-Signature",
		                  w->sig_override != NULL ? w->sig_override : sig);
	}
	if (w->omit == NULL || strcmp(w->omit, "Wechatpay-Serial") != 0) {
		pt_request_header(&r, "Wechatpay-Serial", w->serial);
	}
	pt_request_header(&r, "Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048");
	rc = pt_receive(pi, &r, now, b, v);
	pt_request_finish(&r);
	free(sig);
	return rc;
}

static const char *paid_plain =
        "{\"mchid\":\"1900000001\",\"appid\":\"wxd678efh567hg6787\","
        "\"out_trade_no\":\"ord_wx_1\",\"transaction_id\":\"4200000001202412020000000001\","
        "\"trade_type\":\"JSAPI\",\"trade_state\":\"SUCCESS\",\"trade_state_desc\":\"ok\","
        "\"success_time\":\"2024-12-02T10:00:00+08:00\",\"payer\":{\"openid\":\"o1\"},"
        "\"amount\":{\"total\":1999,\"payer_total\":1999,\"currency\":\"CNY\","
        "\"payer_currency\":\"CNY\"}}";

static void test_wechatpay_accepts_a_signed_transaction_success(void **state)
{
	struct wx_req w = {"1733130100", "nonce-abc", SERIAL_A, key_a, NULL, NULL};
	char *body = wx_fixture_body("EV-2018022511223320873", "TRANSACTION.SUCCESS", paid_plain,
	                       APIV3_KEY, "fdasflkja484");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const struct event *ev;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), 0);
	assert_int_equal(b.eb_n, 1);
	ev = &b.eb_events[0];
	assert_string_equal(ev->ev_key, "EV-2018022511223320873");
	assert_string_equal(ev->ev_type, "TRANSACTION.SUCCESS");
	assert_int_equal(ev->ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(ev->ev_order_ref, "ord_wx_1");
	assert_string_equal(ev->ev_payment_ref, "4200000001202412020000000001");
	assert_int_equal(ev->ev_amount, 1999);
	assert_string_equal(ev->ev_currency, "CNY");
	assert_non_null(strstr(ev->ev_payload, "\"out_trade_no\":\"ord_wx_1\""));
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_accepts_the_second_platform_key_by_its_serial(void **state)
{
	struct wx_req w = {"1733130100", "nonce-abc", SERIAL_B, key_b, NULL, NULL};
	char *body =
	        wx_fixture_body("EV-2", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "fdasflkja484");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), 0);
	event_batch_finish(&b);
	/* Key B's signature presented under key A's serial. */
	w.serial = SERIAL_A;
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_maps_refund_success_to_a_refund(void **state)
{
	const char *plain =
	        "{\"mchid\":\"1900000001\",\"out_trade_no\":\"ord_wx_1\","
	        "\"transaction_id\":\"4200000001202412020000000001\",\"out_refund_no\":\"r1\","
	        "\"refund_id\":\"50000000382019052709732678859\",\"refund_status\":\"SUCCESS\","
	        "\"amount\":{\"total\":1999,\"refund\":500,\"payer_total\":1999,\"payer_refund\":"
	        "500}}";
	struct wx_req w = {"1733130100", "n2", SERIAL_A, key_a, NULL, NULL};
	char *body = wx_fixture_body("EV-R1", "REFUND.SUCCESS", plain, APIV3_KEY, "000000000001");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const struct event *ev;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), 0);
	ev = &b.eb_events[0];
	assert_int_equal(ev->ev_kind, EVENT_REFUNDED);
	assert_int_equal(ev->ev_refund_cumulative, 0);
	assert_string_equal(ev->ev_refund_ref, "50000000382019052709732678859");
	assert_string_equal(ev->ev_order_ref, "ord_wx_1");
	assert_int_equal(ev->ev_amount, 500);
	assert_string_equal(ev->ev_currency, "CNY");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_records_a_transaction_that_is_not_successful(void **state)
{
	const char *plain =
	        "{\"mchid\":\"1900000001\",\"out_trade_no\":\"o2\",\"trade_state\":\"CLOSED\","
	        "\"amount\":{\"total\":100,\"currency\":\"CNY\"}}";
	struct wx_req w = {"1733130100", "n3", SERIAL_A, key_a, NULL, NULL};
	char *body = wx_fixture_body("EV-C", "TRANSACTION.SUCCESS", plain, APIV3_KEY, "000000000002");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_OTHER);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_rejects_signtest_probes(void **state)
{
	struct wx_req w = {
	        "1733130100", "n", SERIAL_A, key_a, "WECHATPAY/SIGNTEST/9U3hMQoNxhp3gR5A", NULL};
	char *body =
	        wx_fixture_body("EV-P", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "000000000003");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "probe_signature");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_rejects_an_unknown_serial(void **state)
{
	struct wx_req w = {"1733130100", "n",  "0000000000000000000000000000000000000000",
	                   key_a,        NULL, NULL};
	char *body =
	        wx_fixture_body("EV-S", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "000000000004");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "unknown_serial");
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_rejects_a_signature_by_the_wrong_key(void **state)
{
	struct wx_req w = {"1733130100", "n", SERIAL_A, key_other, NULL, NULL};
	char *body =
	        wx_fixture_body("EV-W", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "000000000005");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_rejects_a_body_changed_by_one_byte(void **state)
{
	struct wx_req w = {"1733130100", "n", SERIAL_A, key_a, NULL, NULL};
	char *body =
	        wx_fixture_body("EV-B", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "000000000006");
	char *sig = wx_fixture_sign(key_a, "1733130100", "n", body);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	w.sig_override = sig;
	strstr(body, "EV-B")[3] = 'C';
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	pt_instance_destroy(&pi);
	free(body);
	free(sig);
}

static void test_wechatpay_rejects_missing_headers_with_400(void **state)
{
	const char *names[] = {"Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Signature",
	                       "Wechatpay-Serial"};
	char *body =
	        wx_fixture_body("EV-M", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "000000000007");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	make_instance(&pi);
	for (i = 0; i < 4; i++) {
		struct wx_req w = {"1733130100", "n", SERIAL_A, key_a, NULL, names[i]};

		assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, "missing_signature");
	}
	pt_instance_destroy(&pi);
	free(body);
}

/* Each Wechatpay-* header the signature needs may come once (RFC 9110
 * 5.3): a second line, the same or not, is refused. */
static void test_wechatpay_refuses_a_repeated_signature_header_with_400(void **state)
{
	char *body = wx_fixture_body("EV-R", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY,
	                             "000000000008");
	char *sig = wx_fixture_sign(key_a, "1733130100", "n", body);
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	pt_request_init(&r, body, strlen(body));
	pt_request_header(&r, "Wechatpay-Timestamp", "1733130100");
	pt_request_header(&r, "Wechatpay-Nonce", "n");
	pt_request_header(&r, "Wechatpay-Signature", sig);
	pt_request_header(&r, "Wechatpay-Serial", SERIAL_A);
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), 0);
	event_batch_finish(&b);
	assert_int_equal(pt_repeats_not_refused(&pi, &r, NOW), 0);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
	free(sig);
	free(body);
}

static void test_wechatpay_rejects_stale_and_future_timestamps(void **state)
{
	struct wx_req old = {"1733129799", "n", SERIAL_A, key_a, NULL, NULL};
	struct wx_req future = {"1733130401", "n", SERIAL_A, key_a, NULL, NULL};
	struct wx_req bad = {"17331x0100", "n", SERIAL_A, key_a, NULL, NULL};
	char *body =
	        wx_fixture_body("EV-T", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "000000000008");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &old, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(receive(&pi, &future, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(receive(&pi, &bad, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_rejects_a_resource_encrypted_with_another_key(void **state)
{
	struct wx_req w = {"1733130100", "n", SERIAL_A, key_a, NULL, NULL};
	char *body = wx_fixture_body("EV-K", "TRANSACTION.SUCCESS", paid_plain,
	                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "000000000009");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "decrypt_failed");
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_rejects_another_merchants_notification(void **state)
{
	const char *plain =
	        "{\"mchid\":\"1900000002\",\"out_trade_no\":\"o\",\"trade_state\":\"SUCCESS\","
	        "\"amount\":{\"total\":1,\"currency\":\"CNY\"}}";
	struct wx_req w = {"1733130100", "n", SERIAL_A, key_a, NULL, NULL};
	char *body = wx_fixture_body("EV-X", "TRANSACTION.SUCCESS", plain, APIV3_KEY, "000000000010");
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, body, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 403);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_wechatpay_fingerprint_covers_the_plaintext_not_the_ciphertext(void **state)
{
	const char *other_plain = "{\"mchid\":\"1900000001\",\"out_trade_no\":\"ord_wx_1\",\"trade_"
	                          "state\":\"SUCCESS\","
	                          "\"amount\":{\"total\":2000,\"currency\":\"CNY\"}}";
	struct wx_req w = {"1733130100", "n", SERIAL_A, key_a, NULL, NULL};
	char *one = wx_fixture_body("EV-F", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "aaaaaaaaaaaa");
	char *two = wx_fixture_body("EV-F", "TRANSACTION.SUCCESS", paid_plain, APIV3_KEY, "bbbbbbbbbbbb");
	char *three =
	        wx_fixture_body("EV-F", "TRANSACTION.SUCCESS", other_plain, APIV3_KEY, "aaaaaaaaaaaa");
	unsigned char f1[EVENT_FINGERPRINT_LEN];
	unsigned char f2[EVENT_FINGERPRINT_LEN];
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive(&pi, &w, one, NOW, &b, &v), 0);
	memcpy(f1, b.eb_events[0].ev_fingerprint, sizeof(f1));
	event_batch_finish(&b);
	assert_int_equal(receive(&pi, &w, two, NOW, &b, &v), 0);
	assert_memory_equal(f1, b.eb_events[0].ev_fingerprint, sizeof(f1));
	event_batch_finish(&b);
	assert_int_equal(receive(&pi, &w, three, NOW, &b, &v), 0);
	memcpy(f2, b.eb_events[0].ev_fingerprint, sizeof(f2));
	assert_memory_not_equal(f1, f2, sizeof(f1));
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(one);
	free(two);
	free(three);
}

static void test_wechatpay_answers_204_and_fail_json(void **state)
{
	struct event ev;
	struct event_outcome out = {0, NULL, "ord_1", "paid"};
	struct reply r;

	(void)state;
	memset(&ev, 0, sizeof(ev));
	reply_init(&r);
	assert_int_equal(provider_wechatpay.p_ack(NULL, &ev, &out, &r), 0);
	assert_int_equal(r.reply_status, 204);
	assert_null(r.reply_body);
	assert_int_equal(r.reply_body_len, 0);
	reply_finish(&r);
	assert_int_equal(provider_wechatpay.p_error(NULL, 401, "bad_signature",
	                                            "The signature does not verify.", &r),
	                 0);
	assert_int_equal(r.reply_status, 401);
	assert_string_equal(r.reply_content_type, "application/json");
	assert_string_equal(r.reply_body,
	                    "{\"code\":\"FAIL\",\"message\":\"The signature does not verify.\"}");
	reply_finish(&r);
	/* Signed with WeChat Pay's private key: never by us (provider.h). */
	assert_null(provider_wechatpay.p_sign);
}

static void test_wechatpay_refuses_incomplete_configuration(void **state)
{
	const char *no_apiv3[] = {"platform_key", SERIAL_A " env:IDEMHOOK_TEST_WXP_KEY_A", NULL};
	const char *short_apiv3[] = {"platform_key", SERIAL_A " env:IDEMHOOK_TEST_WXP_KEY_A",
	                             "apiv3_key", "short", NULL};
	const char *no_spec[] = {"platform_key", SERIAL_A, "apiv3_key", APIV3_KEY, NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_wechatpay, no_apiv3), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_wechatpay, short_apiv3), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_wechatpay, no_spec), -1);
}

/* ---- the lifecycle: failed refunds, partner (service provider) mode ---- */

static void make_partner_instance(struct pt_instance *pi, const char *sub)
{
	const char *kv[] = {"platform_key", SERIAL_A " env:IDEMHOOK_TEST_WXP_KEY_A",
	                    "apiv3_key",    "env:IDEMHOOK_TEST_WXP_APIV3",
	                    "sp_mchid",     "1900000100",
	                    sub != NULL ? "sub_mchid" : NULL, sub, NULL};

	setenv("IDEMHOOK_TEST_WXP_APIV3", APIV3_KEY, 1);
	assert_int_equal(pt_instance_create(pi, &provider_wechatpay, kv), 0);
}

/* Receives plain as event_type, signed with key A; 0 or -1 with v set. */
static int receive_plain(struct pt_instance *pi, const char *event_type, const char *plain,
                         struct event_batch *b, struct provider_verdict *v)
{
	struct wx_req w = {"1733130100", "n-life", SERIAL_A, key_a, NULL, NULL};
	char *body = wx_fixture_body("EV-LIFE", event_type, plain, APIV3_KEY, "000000000077");
	int rc = receive(pi, &w, body, NOW, b, v);

	free(body);
	return rc;
}

static void test_wechatpay_maps_refund_abnormal_and_closed_to_a_failed_refund(void **state)
{
	static const char *const types[] = {"REFUND.ABNORMAL", "REFUND.CLOSED"};
	static const char *const statuses[] = {"ABNORMAL", "CLOSED"};
	struct pt_instance pi;
	size_t i;

	(void)state;
	make_instance(&pi);
	for (i = 0; i < 2; i++) {
		char plain[512];
		struct event_batch b;
		struct provider_verdict v;
		const struct event *ev;

		snprintf(plain, sizeof(plain),
		         "{\"mchid\":\"1900000001\",\"out_trade_no\":\"ord_wx_1\","
		         "\"transaction_id\":\"4200000001202412020000000001\",\"out_refund_no\":"
		         "\"r1\",\"refund_id\":\"50000000382019052709732678859\",\"refund_status\":"
		         "\"%s\",\"amount\":{\"total\":1999,\"refund\":500,\"payer_total\":1999,"
		         "\"payer_refund\":500}}",
		         statuses[i]);
		assert_int_equal(receive_plain(&pi, types[i], plain, &b, &v), 0);
		ev = &b.eb_events[0];
		assert_int_equal(ev->ev_kind, EVENT_REFUND_FAILED);
		assert_string_equal(ev->ev_refund_ref, "50000000382019052709732678859");
		assert_string_equal(ev->ev_payment_ref, "4200000001202412020000000001");
		assert_string_equal(ev->ev_order_ref, "ord_wx_1");
		assert_int_equal(ev->ev_amount, 500);
		event_batch_finish(&b);
	}
	pt_instance_destroy(&pi);
}

static const char *partner_paid =
        "{\"sp_appid\":\"wx8888888888888888\",\"sp_mchid\":\"1900000100\","
        "\"sub_appid\":\"wxd678efh567hg6999\",\"sub_mchid\":\"1900000109\","
        "\"out_trade_no\":\"ord_wx_p\",\"transaction_id\":\"4200000001202412020000000009\","
        "\"trade_type\":\"JSAPI\",\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":880,"
        "\"payer_total\":880,\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}";

static void test_wechatpay_partner_mode_takes_sp_mchid_and_sub_mchid(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	/* Any sub-merchant of the service provider. */
	make_partner_instance(&pi, NULL);
	assert_int_equal(receive_plain(&pi, "TRANSACTION.SUCCESS", partner_paid, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(b.eb_events[0].ev_order_ref, "ord_wx_p");
	assert_int_equal(b.eb_events[0].ev_amount, 880);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	/* Only the listed sub-merchants. */
	make_partner_instance(&pi, "1900000108, 1900000109");
	assert_int_equal(receive_plain(&pi, "TRANSACTION.SUCCESS", partner_paid, &b, &v), 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	make_partner_instance(&pi, "1900000108");
	assert_int_equal(receive_plain(&pi, "TRANSACTION.SUCCESS", partner_paid, &b, &v), -1);
	assert_int_equal(v.pv_status, 403);
	assert_string_equal(v.pv_reason, "wrong_merchant");
	pt_instance_destroy(&pi);
	/* A direct merchant's instance refuses a partner notification, and a
	 * partner instance a direct one. */
	make_instance(&pi);
	assert_int_equal(receive_plain(&pi, "TRANSACTION.SUCCESS", partner_paid, &b, &v), -1);
	assert_string_equal(v.pv_reason, "wrong_merchant");
	pt_instance_destroy(&pi);
	make_partner_instance(&pi, NULL);
	assert_int_equal(receive_plain(&pi, "TRANSACTION.SUCCESS", paid_plain, &b, &v), -1);
	assert_string_equal(v.pv_reason, "wrong_merchant");
	pt_instance_destroy(&pi);
}

static void test_wechatpay_refuses_mixing_direct_and_partner_merchant_ids(void **state)
{
	const char *both[] = {"platform_key", SERIAL_A " env:IDEMHOOK_TEST_WXP_KEY_A",
	                      "apiv3_key",    "env:IDEMHOOK_TEST_WXP_APIV3",
	                      "mchid",        "1900000001",
	                      "sp_mchid",     "1900000100",
	                      NULL};
	const char *sub_alone[] = {"platform_key", SERIAL_A " env:IDEMHOOK_TEST_WXP_KEY_A",
	                           "apiv3_key",    "env:IDEMHOOK_TEST_WXP_APIV3",
	                           "sub_mchid",    "1900000109",
	                           NULL};
	struct pt_instance pi;

	(void)state;
	setenv("IDEMHOOK_TEST_WXP_APIV3", APIV3_KEY, 1);
	assert_int_equal(pt_instance_create(&pi, &provider_wechatpay, both), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_wechatpay, sub_alone), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_wechatpay_accepts_a_signed_transaction_success),
	        cmocka_unit_test(test_wechatpay_accepts_the_second_platform_key_by_its_serial),
	        cmocka_unit_test(test_wechatpay_maps_refund_success_to_a_refund),
	        cmocka_unit_test(test_wechatpay_records_a_transaction_that_is_not_successful),
	        cmocka_unit_test(test_wechatpay_rejects_signtest_probes),
	        cmocka_unit_test(test_wechatpay_rejects_an_unknown_serial),
	        cmocka_unit_test(test_wechatpay_rejects_a_signature_by_the_wrong_key),
	        cmocka_unit_test(test_wechatpay_rejects_a_body_changed_by_one_byte),
	        cmocka_unit_test(test_wechatpay_rejects_missing_headers_with_400),
	        cmocka_unit_test(test_wechatpay_refuses_a_repeated_signature_header_with_400),
	        cmocka_unit_test(test_wechatpay_rejects_stale_and_future_timestamps),
	        cmocka_unit_test(test_wechatpay_rejects_a_resource_encrypted_with_another_key),
	        cmocka_unit_test(test_wechatpay_rejects_another_merchants_notification),
	        cmocka_unit_test(
	                test_wechatpay_fingerprint_covers_the_plaintext_not_the_ciphertext),
	        cmocka_unit_test(test_wechatpay_answers_204_and_fail_json),
	        cmocka_unit_test(test_wechatpay_refuses_incomplete_configuration),
	        cmocka_unit_test(test_wechatpay_maps_refund_abnormal_and_closed_to_a_failed_refund),
	        cmocka_unit_test(test_wechatpay_partner_mode_takes_sp_mchid_and_sub_mchid),
	        cmocka_unit_test(test_wechatpay_refuses_mixing_direct_and_partner_merchant_ids),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
