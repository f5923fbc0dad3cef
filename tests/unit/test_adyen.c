/* test_adyen.c: unit tests for the Adyen profile: the published item HMAC
 * vector, whole-batch refusal on one bad item, per-item keys and kinds,
 * HTTP Basic auth, key rotation and the answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "crypto.h"
#include "provider_test.h"

extern const struct provider provider_adyen;

/* Published vector: @adyen/api-library src/__tests__/hmacValidator.spec.ts. */
#define VEC_KEY "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
#define VEC_SIG "xhpHvYq2u2Np0rstbZ6QjLGu7JWhvf7Iwaa6EviJSX0="
#define KEY_2 "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
#define NOW 1733130100

static void make_instance(struct pt_instance *pi, const char *const *extra)
{
	const char *kv[2 * PT_MAX_KV + 1];
	size_t n = 0;

	kv[n++] = "hmac_key";
	kv[n++] = VEC_KEY;
	while (extra != NULL && *extra != NULL) {
		kv[n++] = *extra++;
	}
	kv[n] = NULL;
	assert_int_equal(pt_instance_create(pi, &provider_adyen, kv), 0);
}

struct item {
	const char *psp;
	const char *orig;
	const char *account;
	const char *ref;
	long long value;
	const char *currency;
	const char *code;
	const char *success;
};

/* base64 HMAC of the item's 8 fields with a hex key, computed independently. */
static char *item_sig(const char *hex_key, const struct item *it)
{
	unsigned char *key = NULL;
	size_t key_len = 0;
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	char *b64 = NULL;
	struct buf b;

	assert_int_equal(crypto_hex_decode(hex_key, strlen(hex_key), &key, &key_len), 0);
	buf_init(&b, 0);
	buf_printf(&b, "%s:%s:%s:%s:%lld:%s:%s:%s", it->psp, it->orig, it->account, it->ref,
	           it->value, it->currency, it->code, it->success);
	assert_int_equal(crypto_hmac(CRYPTO_SHA256, key, key_len, b.buf_data, b.buf_len, mac, &n),
	                 0);
	assert_int_equal(crypto_base64_encode(mac, n, &b64, NULL), 0);
	buf_finish(&b);
	free(key);
	return b64;
}

static void item_json(struct buf *b, const struct item *it, const char *sig)
{
	buf_printf(b,
	           "{\"NotificationRequestItem\":{\"additionalData\":{\"hmacSignature\":\"%s\","
	           "\"authCode\":\"1234\"},"
	           "\"amount\":{\"currency\":\"%s\",\"value\":%lld},\"eventCode\":\"%s\","
	           "\"eventDate\":"
	           "\"2024-12-02T10:00:00+01:00\",\"merchantAccountCode\":\"%s\","
	           "\"merchantReference\":\"%s\","
	           "\"originalReference\":\"%s\",\"paymentMethod\":\"visa\",\"pspReference\":\"%"
	           "s\",\"reason\":\"\","
	           "\"success\":\"%s\"}}",
	           sig, it->currency, it->value, it->code, it->account, it->ref, it->orig, it->psp,
	           it->success);
}

/* A batch of n items, each signed with keys[i] (NULL: a forged signature). */
static char *batch(const struct item *items, const char *const *keys, size_t n)
{
	struct buf b;
	size_t i;

	buf_init(&b, 0);
	buf_puts(&b, "{\"live\":\"false\",\"notificationItems\":[");
	for (i = 0; i < n; i++) {
		char *sig = keys[i] != NULL
		                    ? item_sig(keys[i], &items[i])
		                    : strdup("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");

		if (i > 0) {
			buf_puts(&b, ",");
		}
		item_json(&b, &items[i], sig);
		free(sig);
	}
	buf_puts(&b, "]}");
	return buf_take(&b, NULL);
}

static int receive(struct pt_instance *pi, const char *body, const char *auth,
                   struct event_batch *b, struct provider_verdict *v)
{
	struct pt_request r;
	int rc;

	pt_request_init(&r, body, strlen(body));
	if (auth != NULL) {
		pt_request_header(&r, "Authorization", auth);
	}
	rc = pt_receive(pi, &r, NOW, b, v);
	pt_request_finish(&r);
	return rc;
}

static const struct item vec_item = {
        "pspReference", "originalReference", "merchantAccount", "reference", 1000, "EUR", "CAPTURE",
        "true"};

static void test_adyen_item_hmac_matches_the_published_vector(void **state)
{
	char *sig = item_sig(VEC_KEY, &vec_item);
	struct buf b;
	struct pt_instance pi;
	struct event_batch eb;
	struct provider_verdict v;

	(void)state;
	assert_string_equal(sig, VEC_SIG);
	free(sig);
	buf_init(&b, 0);
	buf_puts(&b, "{\"live\":\"false\",\"notificationItems\":[");
	item_json(&b, &vec_item, VEC_SIG);
	buf_puts(&b, "]}");
	make_instance(&pi, NULL);
	assert_int_equal(receive(&pi, b.buf_data, NULL, &eb, &v), 0);
	assert_int_equal(eb.eb_n, 1);
	assert_string_equal(eb.eb_events[0].ev_key, "pspReference:CAPTURE");
	assert_int_equal(eb.eb_events[0].ev_kind, EVENT_OTHER);
	event_batch_finish(&eb);
	pt_instance_destroy(&pi);
	buf_finish(&b);
}

static void test_adyen_gives_one_event_per_item_with_its_own_key(void **state)
{
	const struct item items[] = {
	        {"8535296650153317", "", "ShopCOM", "ord_a1", 1999, "EUR", "AUTHORISATION", "true"},
	        {"8535296650153318", "8535296650153317", "ShopCOM", "ord_a1", 500, "EUR", "REFUND",
	         "true"},
	        {"8535296650153319", "", "ShopCOM", "ord_a2", 700, "JPY", "AUTHORISATION", "false"},
	};
	const char *keys[] = {VEC_KEY, VEC_KEY, VEC_KEY};
	char *body = batch(items, keys, 3);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const struct event *ev;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(receive(&pi, body, NULL, &b, &v), 0);
	assert_int_equal(b.eb_n, 3);
	ev = &b.eb_events[0];
	assert_string_equal(ev->ev_key, "8535296650153317:AUTHORISATION");
	assert_int_equal(ev->ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(ev->ev_order_ref, "ord_a1");
	assert_string_equal(ev->ev_payment_ref, "8535296650153317");
	assert_int_equal(ev->ev_amount, 1999);
	assert_string_equal(ev->ev_currency, "EUR");
	ev = &b.eb_events[1];
	assert_string_equal(ev->ev_key, "8535296650153318:REFUND");
	assert_int_equal(ev->ev_kind, EVENT_REFUNDED);
	assert_int_equal(ev->ev_refund_cumulative, 0);
	assert_string_equal(ev->ev_refund_ref, "8535296650153318");
	assert_string_equal(ev->ev_payment_ref, "8535296650153317");
	assert_int_equal(ev->ev_amount, 500);
	ev = &b.eb_events[2];
	assert_int_equal(ev->ev_kind, EVENT_OTHER);
	assert_string_equal(ev->ev_currency, "JPY");
	assert_memory_not_equal(b.eb_events[0].ev_fingerprint, b.eb_events[1].ev_fingerprint,
	                        EVENT_FINGERPRINT_LEN);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_adyen_refuses_the_whole_batch_when_one_item_is_forged(void **state)
{
	const struct item items[] = {
	        {"1001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true"},
	        {"1002", "", "ShopCOM", "ord_2", 100, "EUR", "AUTHORISATION", "true"},
	        {"1003", "", "ShopCOM", "ord_3", 100, "EUR", "AUTHORISATION", "true"},
	};
	const char *keys[] = {VEC_KEY, NULL, VEC_KEY};
	const char *wrong_key[] = {VEC_KEY, VEC_KEY, KEY_2};
	char *body = batch(items, keys, 3);
	char *body2 = batch(items, wrong_key, 3);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(receive(&pi, body, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	assert_int_equal(b.eb_n, 0);
	assert_int_equal(receive(&pi, body2, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
	free(body);
	free(body2);
}

static void test_adyen_refuses_an_item_changed_after_signing(void **state)
{
	const struct item items[] = {
	        {"2001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true"}};
	const char *keys[] = {VEC_KEY};
	char *body = batch(items, keys, 1);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	strstr(body, "\"value\":100")[9] = '9';
	assert_int_equal(receive(&pi, body, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_adyen_refuses_an_item_without_hmac_signature(void **state)
{
	const char *body =
	        "{\"live\":\"false\",\"notificationItems\":[{\"NotificationRequestItem\":{"
	        "\"amount\":{\"currency\":\"EUR\",\"value\":100},\"eventCode\":\"AUTHORISATION\","
	        "\"merchantAccountCode\":\"ShopCOM\",\"merchantReference\":\"o\",\"pspReference\":"
	        "\"1\","
	        "\"success\":\"true\"}}]}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(receive(&pi, body, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	pt_instance_destroy(&pi);
}

static void test_adyen_accepts_items_signed_with_a_rotated_key(void **state)
{
	const char *extra[] = {"hmac_key", KEY_2, NULL};
	const struct item items[] = {
	        {"3001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true"},
	        {"3002", "", "ShopCOM", "ord_2", 100, "EUR", "AUTHORISATION", "true"},
	};
	const char *keys[] = {VEC_KEY, KEY_2};
	const char *keys_new[] = {KEY_2, KEY_2};
	char *body = batch(items, keys, 2);
	char *body_new = batch(items, keys_new, 2);
	unsigned char fp[EVENT_FINGERPRINT_LEN];
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, extra);
	assert_int_equal(receive(&pi, body, NULL, &b, &v), 0);
	assert_int_equal(b.eb_n, 2);
	memcpy(fp, b.eb_events[0].ev_fingerprint, sizeof(fp));
	event_batch_finish(&b);
	/* The same item under the new key: another signature, the same facts. */
	assert_int_equal(receive(&pi, body_new, NULL, &b, &v), 0);
	assert_memory_equal(fp, b.eb_events[0].ev_fingerprint, sizeof(fp));
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
	free(body_new);
}

static void test_adyen_checks_http_basic_auth_when_configured(void **state)
{
	/* "adyen:s3cret" in base64 is YWR5ZW46czNjcmV0. */
	const char *extra[] = {"basic_user", "adyen", "basic_password", "s3cret", NULL};
	const struct item items[] = {
	        {"4001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true"}};
	const char *keys[] = {VEC_KEY};
	char *body = batch(items, keys, 1);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, extra);
	assert_int_equal(receive(&pi, body, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_credentials");
	assert_int_equal(receive(&pi, body, "Basic YWR5ZW46d3Jvbmc=", &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_int_equal(receive(&pi, body, "Basic YWR5ZW46czNjcmV0", &b, &v), 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_adyen_marks_items_of_another_merchant_account_refused(void **state)
{
	const char *extra[] = {"merchant_account", "ShopCOM", NULL};
	const struct item items[] = {
	        {"5001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true"},
	        {"5002", "", "OtherCOM", "ord_2", 100, "EUR", "AUTHORISATION", "true"},
	};
	const char *keys[] = {VEC_KEY, VEC_KEY};
	char *body = batch(items, keys, 2);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, extra);
	assert_int_equal(receive(&pi, body, NULL, &b, &v), 0);
	assert_int_equal(b.eb_n, 2);
	assert_int_equal(b.eb_events[0].ev_refused, 0);
	assert_int_equal(b.eb_events[1].ev_refused, 1);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_adyen_rejects_malformed_batches(void **state)
{
	const char *bodies[] = {"not json", "{}", "{\"notificationItems\":[]}",
	                        "{\"notificationItems\":{}}",
	                        "{\"notificationItems\":[{\"Other\":{}}]}"};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	make_instance(&pi, NULL);
	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		assert_int_equal(receive(&pi, bodies[i], NULL, &b, &v), -1);
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, "malformed_body");
	}
	pt_instance_destroy(&pi);
}

static void test_adyen_answers_accepted(void **state)
{
	struct event ev;
	struct event_outcome out = {1, "unknown_order", NULL, NULL};
	struct reply r;

	(void)state;
	memset(&ev, 0, sizeof(ev));
	reply_init(&r);
	assert_int_equal(provider_adyen.p_ack(NULL, &ev, &out, &r), 0);
	assert_int_equal(r.reply_status, 200);
	assert_string_equal(r.reply_body, "[accepted]");
	reply_finish(&r);
}

static void test_adyen_refuses_bad_configuration(void **state)
{
	const char *no_key[] = {"basic_user", "u", NULL};
	const char *bad_hex[] = {"hmac_key", "XYZ", NULL};
	const char *half_basic[] = {"hmac_key", VEC_KEY, "basic_user", "u", NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_adyen, no_key), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_adyen, bad_hex), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_adyen, half_basic), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_adyen_item_hmac_matches_the_published_vector),
	        cmocka_unit_test(test_adyen_gives_one_event_per_item_with_its_own_key),
	        cmocka_unit_test(test_adyen_refuses_the_whole_batch_when_one_item_is_forged),
	        cmocka_unit_test(test_adyen_refuses_an_item_changed_after_signing),
	        cmocka_unit_test(test_adyen_refuses_an_item_without_hmac_signature),
	        cmocka_unit_test(test_adyen_accepts_items_signed_with_a_rotated_key),
	        cmocka_unit_test(test_adyen_checks_http_basic_auth_when_configured),
	        cmocka_unit_test(test_adyen_marks_items_of_another_merchant_account_refused),
	        cmocka_unit_test(test_adyen_rejects_malformed_batches),
	        cmocka_unit_test(test_adyen_answers_accepted),
	        cmocka_unit_test(test_adyen_refuses_bad_configuration),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
