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
	const char *extra; /* more additionalData members, or NULL */
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

#define DATE "2024-12-02T10:00:00+01:00"
#define DATE_MS 1733130000000LL

static void item_json_dated(struct buf *b, const struct item *it, const char *sig, const char *date)
{
	buf_printf(b,
	           "{\"NotificationRequestItem\":{\"additionalData\":{\"hmacSignature\":\"%s\","
	           "\"authCode\":\"1234\"%s%s},"
	           "\"amount\":{\"currency\":\"%s\",\"value\":%lld},\"eventCode\":\"%s\","
	           "\"eventDate\":\"%s\",\"merchantAccountCode\":\"%s\","
	           "\"merchantReference\":\"%s\","
	           "\"originalReference\":\"%s\",\"paymentMethod\":\"visa\",\"pspReference\":\"%"
	           "s\",\"reason\":\"\","
	           "\"success\":\"%s\"}}",
	           sig, it->extra != NULL ? "," : "", it->extra != NULL ? it->extra : "",
	           it->currency, it->value, it->code, date, it->account, it->ref, it->orig, it->psp,
	           it->success);
}

static void item_json(struct buf *b, const struct item *it, const char *sig)
{
	item_json_dated(b, it, sig, DATE);
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

static const struct item vec_item = {"pspReference",
                                     "originalReference",
                                     "merchantAccount",
                                     "reference",
                                     1000,
                                     "EUR",
                                     "CAPTURE",
                                     "true",
                                     NULL};

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
	/* Without HTTP Basic credentials the key is signed fields only. */
	assert_string_equal(eb.eb_events[0].ev_key, "pspReference:CAPTURE");
	assert_int_equal(eb.eb_events[0].ev_kind, EVENT_PAYMENT_CAPTURED);
	assert_string_equal(eb.eb_events[0].ev_payment_ref, "originalReference");
	assert_string_equal(eb.eb_events[0].ev_refund_ref, "pspReference");
	assert_int_equal(eb.eb_events[0].ev_occurred_ms, 0);
	event_batch_finish(&eb);
	pt_instance_destroy(&pi);
	buf_finish(&b);
}

static void test_adyen_gives_one_event_per_item_with_its_own_key(void **state)
{
	const struct item items[] = {
	        {"8535296650153317", "", "ShopCOM", "ord_a1", 1999, "EUR", "AUTHORISATION", "true",
	         NULL},
	        {"8535296650153318", "8535296650153317", "ShopCOM", "ord_a1", 500, "EUR", "REFUND",
	         "true", NULL},
	        {"8535296650153319", "", "ShopCOM", "ord_a2", 700, "JPY", "AUTHORISATION", "false",
	         NULL},
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

/* "psp::Shop:EU:..." is one signed string whether read as psp "P", account
 * "Shop:EU" or as psp "P:", original "Shop", account "EU": the second
 * reading would be another refund under the same signature. */
static void test_adyen_refuses_a_colon_that_would_shift_the_signed_fields(void **state)
{
	const struct item original[] = {
	        {"8535296650153320", "", "Shop:EU", "ord_a1", 500, "EUR", "REFUND", "true", NULL}};
	const struct item shifted[] = {
	        {"8535296650153320:", "Shop", "EU", "ord_a1", 500, "EUR", "REFUND", "true", NULL}};
	const char *keys[] = {VEC_KEY};
	char *body = batch(original, keys, 1);
	char *forged = batch(shifted, keys, 1);
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(receive(&pi, body, NULL, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_key, "8535296650153320:REFUND");
	event_batch_finish(&b);
	assert_int_equal(receive(&pi, forged, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_body");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
	free(body);
	free(forged);
}

static void test_adyen_refuses_the_whole_batch_when_one_item_is_forged(void **state)
{
	const struct item items[] = {
	        {"1001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true", NULL},
	        {"1002", "", "ShopCOM", "ord_2", 100, "EUR", "AUTHORISATION", "true", NULL},
	        {"1003", "", "ShopCOM", "ord_3", 100, "EUR", "AUTHORISATION", "true", NULL},
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
	        {"2001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true", NULL}};
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
	        {"3001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true", NULL},
	        {"3002", "", "ShopCOM", "ord_2", 100, "EUR", "AUTHORISATION", "true", NULL},
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
	        {"4001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true", NULL}};
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

/* Two Authorization fields: not one set of credentials (RFC 9110 5.3). */
static void test_adyen_refuses_repeated_basic_credentials_with_400(void **state)
{
	const char *extra[] = {"basic_user", "adyen", "basic_password", "s3cret", NULL};
	const struct item items[] = {
	        {"4002", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true", NULL}};
	const char *keys[] = {VEC_KEY};
	char *body = batch(items, keys, 1);
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, extra);
	pt_request_init(&r, body, strlen(body));
	pt_request_header(&r, "Authorization", "Basic YWR5ZW46czNjcmV0");
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), 0);
	event_batch_finish(&b);
	assert_int_equal(pt_repeats_not_refused(&pi, &r, NOW), 0);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_adyen_marks_items_of_another_merchant_account_refused(void **state)
{
	const char *extra[] = {"merchant_account", "ShopCOM", NULL};
	const struct item items[] = {
	        {"5001", "", "ShopCOM", "ord_1", 100, "EUR", "AUTHORISATION", "true", NULL},
	        {"5002", "", "OtherCOM", "ord_2", 100, "EUR", "AUTHORISATION", "true", NULL},
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

/* ---- the lifecycle: every eventCode that touches money ---- */

/* Receives one signed item; the batch is the caller's. */
static void receive_item(struct pt_instance *pi, const struct item *it, struct event_batch *b)
{
	const char *keys[] = {VEC_KEY};
	struct provider_verdict v;
	char *body = batch(it, keys, 1);

	assert_int_equal(receive(pi, body, NULL, b, &v), 0);
	assert_int_equal(b->eb_n, 1);
	free(body);
}

struct adyen_row {
	struct item ar_item;
	enum event_kind ar_kind;
	const char *ar_payment;
	const char *ar_ref; /* ev_refund_ref */
};

#define PAY "8835296650153300"
#define MOD "8835296650153399"

static const struct adyen_row adyen_rows[] = {
        {{PAY, "", "ShopCOM", "ord_1", 1999, "EUR", "AUTHORISATION", "true", NULL},
         EVENT_PAYMENT_SUCCEEDED,
         PAY,
         NULL},
        {{PAY, "", "ShopCOM", "ord_1", 1999, "EUR", "AUTHORISATION", "false", NULL},
         EVENT_OTHER,
         PAY,
         NULL},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CAPTURE", "true", NULL},
         EVENT_PAYMENT_CAPTURED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CAPTURE", "false", NULL},
         EVENT_OTHER,
         PAY,
         NULL},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CAPTURE_FAILED", "true", NULL},
         EVENT_CAPTURE_FAILED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CANCELLATION", "true", NULL},
         EVENT_PAYMENT_CANCELLED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CANCELLATION", "false", NULL},
         EVENT_OTHER,
         PAY,
         NULL},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "TECHNICAL_CANCEL", "true", NULL},
         EVENT_PAYMENT_CANCELLED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CANCEL_OR_REFUND", "true", NULL},
         EVENT_CANCEL_OR_REFUND,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CANCEL_OR_REFUND", "true",
          "\"modification.action\":\"cancel\""},
         EVENT_PAYMENT_CANCELLED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CANCEL_OR_REFUND", "true",
          "\"modification.action\":\"refund\""},
         EVENT_REFUNDED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "EXPIRE", "true", NULL},
         EVENT_PAYMENT_EXPIRED,
         PAY,
         MOD},
        {{PAY, "", "ShopCOM", "ord_1", 1999, "EUR", "OFFER_CLOSED", "true", NULL},
         EVENT_PAYMENT_EXPIRED,
         PAY,
         NULL},
        /* The refund's own reference in merchantReference, not the order's. */
        {{MOD, PAY, "ShopCOM", "refund-7", 500, "EUR", "REFUND", "true", NULL},
         EVENT_REFUNDED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "refund-7", 500, "EUR", "REFUND", "false", NULL},
         EVENT_OTHER,
         PAY,
         NULL},
        {{MOD, PAY, "ShopCOM", "refund-7", 500, "EUR", "REFUND_FAILED", "true", NULL},
         EVENT_REFUND_FAILED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 500, "EUR", "REFUNDED_REVERSED", "true", NULL},
         EVENT_OTHER,
         PAY,
         NULL},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "NOTIFICATION_OF_CHARGEBACK", "true", NULL},
         EVENT_OTHER,
         PAY,
         NULL},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "REQUEST_FOR_INFORMATION", "true", NULL},
         EVENT_OTHER,
         PAY,
         NULL},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CHARGEBACK", "true", NULL},
         EVENT_DISPUTE_OPENED,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CHARGEBACK", "true",
          "\"disputeStatus\":\"Accepted\""},
         EVENT_DISPUTE_LOST,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "CHARGEBACK_REVERSED", "true", NULL},
         EVENT_DISPUTE_WON,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "SECOND_CHARGEBACK", "true", NULL},
         EVENT_DISPUTE_LOST,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "PREARBITRATION_WON", "true", NULL},
         EVENT_DISPUTE_WON,
         PAY,
         MOD},
        {{MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", "PREARBITRATION_LOST", "true", NULL},
         EVENT_DISPUTE_LOST,
         PAY,
         MOD},
};

static void test_adyen_maps_every_event_code_that_touches_money(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	size_t i;

	(void)state;
	make_instance(&pi, NULL);
	for (i = 0; i < sizeof(adyen_rows) / sizeof(adyen_rows[0]); i++) {
		const struct adyen_row *r = &adyen_rows[i];
		const struct event *ev;

		receive_item(&pi, &r->ar_item, &b);
		ev = &b.eb_events[0];
		print_message("%s success=%s %s\n", r->ar_item.code, r->ar_item.success,
		              event_kind_name(r->ar_kind));
		assert_int_equal(ev->ev_kind, r->ar_kind);
		assert_string_equal(ev->ev_payment_ref, r->ar_payment);
		if (r->ar_ref == NULL) {
			assert_null(ev->ev_refund_ref);
		} else {
			assert_string_equal(ev->ev_refund_ref, r->ar_ref);
		}
		assert_string_equal(ev->ev_order_ref, r->ar_item.ref);
		assert_int_equal(ev->ev_amount, r->ar_item.value);
		assert_int_equal(ev->ev_occurred_ms, 0);
		event_batch_finish(&b);
	}
	pt_instance_destroy(&pi);
}

/* eventDate is outside the item HMAC. With HTTP Basic credentials (the
 * request is Adyen's) it tells a re-capture from the first capture and
 * dates it; without them anyone holding one signed capture item could send
 * it again under a new date, so its key is signed fields only and its time
 * unknown. */
static void test_adyen_dates_captures_only_with_basic_credentials(void **state)
{
	const char *basic[] = {"basic_user", "adyen", "basic_password", "s3cret", NULL};
	const char *auth = "Basic YWR5ZW46czNjcmV0";
	static const char *const dates[] = {DATE, "2024-12-05T10:00:00+01:00"};
	static const char *const codes[] = {"CAPTURE", "CAPTURE_FAILED"};
	struct item it = {MOD, PAY, "ShopCOM", "ord_1", 1999, "EUR", NULL, "true", NULL};
	size_t c;
	size_t d;
	int with_basic;

	(void)state;
	for (with_basic = 0; with_basic <= 1; with_basic++) {
		struct pt_instance pi;

		make_instance(&pi, with_basic ? basic : NULL);
		for (c = 0; c < 2; c++) {
			it.code = codes[c];
			for (d = 0; d < 2; d++) {
				char *sig = item_sig(VEC_KEY, &it);
				char want[128];
				struct event_batch b;
				struct provider_verdict v;
				struct buf body;

				buf_init(&body, 0);
				buf_puts(&body, "{\"live\":\"false\",\"notificationItems\":[");
				item_json_dated(&body, &it, sig, dates[d]);
				buf_puts(&body, "]}");
				assert_int_equal(receive(&pi, body.buf_data,
				                         with_basic ? auth : NULL, &b, &v),
				                 0);
				print_message("basic=%d %s %s\n", with_basic, it.code, dates[d]);
				if (with_basic) {
					snprintf(want, sizeof(want), MOD ":%s@%s", it.code,
					         dates[d]);
					assert_int_equal(b.eb_events[0].ev_occurred_ms,
					                 DATE_MS + (int64_t)d * 3 * 86400 * 1000);
				} else {
					/* The same key whatever the date: a duplicate. */
					snprintf(want, sizeof(want), MOD ":%s", it.code);
					assert_int_equal(b.eb_events[0].ev_occurred_ms, 0);
				}
				assert_string_equal(b.eb_events[0].ev_key, want);
				event_batch_finish(&b);
				buf_finish(&body);
				free(sig);
			}
		}
		pt_instance_destroy(&pi);
	}
}

static void test_adyen_authorisation_refused_then_granted_are_two_events(void **state)
{
	const struct item refused = {PAY,     "",  "ShopCOM", "ord_1", 1999, "EUR", "AUTHORISATION",
	                             "false", NULL};
	const struct item granted = {PAY,    "",  "ShopCOM", "ord_1", 1999, "EUR", "AUTHORISATION",
	                             "true", NULL};
	struct pt_instance pi;
	struct event_batch b;
	char *first;

	(void)state;
	make_instance(&pi, NULL);
	receive_item(&pi, &refused, &b);
	first = strdup(b.eb_events[0].ev_key);
	event_batch_finish(&b);
	receive_item(&pi, &granted, &b);
	/* Adyen retries an item unchanged; these two differ in success. */
	assert_string_equal(first, PAY ":AUTHORISATION:false");
	assert_string_equal(b.eb_events[0].ev_key, PAY ":AUTHORISATION");
	event_batch_finish(&b);
	free(first);
	pt_instance_destroy(&pi);
}

static void test_adyen_manual_capture_makes_authorisation_only_authorized(void **state)
{
	const struct item auth = {PAY,    "",  "ShopCOM", "ord_1", 1999, "EUR", "AUTHORISATION",
	                          "true", NULL};
	struct pt_instance pi;
	struct event_batch b;

	(void)state;
	make_instance(&pi, NULL);
	pi.pi_conf.pc_capture_manual = 1;
	receive_item(&pi, &auth, &b);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_PAYMENT_AUTHORIZED);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_adyen_counts_clp_cve_idr_and_isk_with_its_own_decimals(void **state)
{
	static const struct {
		const char *currency;
		long long adyen;
		int64_t iso; /* -1: refused */
	} cases[] = {
	        {"CLP", 150000, 1500},   {"CLP", 150050, -1}, {"CVE", 1500, 150000},
	        {"IDR", 10000, 1000000}, {"ISK", 50000, 500}, {"ISK", 50001, -1},
	        {"JPY", 500, 500},       {"EUR", 1999, 1999}, {"KWD", 1234, 1234},
	};
	struct pt_instance pi;
	struct event_batch b;
	size_t i;

	(void)state;
	make_instance(&pi, NULL);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct item it = {PAY,
		                  "",
		                  "ShopCOM",
		                  "ord_1",
		                  cases[i].adyen,
		                  cases[i].currency,
		                  "AUTHORISATION",
		                  "true",
		                  NULL};
		const char *keys[] = {VEC_KEY};
		char *body = batch(&it, keys, 1);
		struct provider_verdict v;
		int rc = receive(&pi, body, NULL, &b, &v);

		free(body);
		if (cases[i].iso < 0) {
			assert_int_equal(rc, -1);
			assert_int_equal(v.pv_status, 400);
			assert_string_equal(v.pv_reason, "malformed_body");
			continue;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(b.eb_events[0].ev_amount, cases[i].iso);
		event_batch_finish(&b);
	}
	pt_instance_destroy(&pi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_adyen_item_hmac_matches_the_published_vector),
	        cmocka_unit_test(test_adyen_gives_one_event_per_item_with_its_own_key),
	        cmocka_unit_test(test_adyen_refuses_a_colon_that_would_shift_the_signed_fields),
	        cmocka_unit_test(test_adyen_refuses_the_whole_batch_when_one_item_is_forged),
	        cmocka_unit_test(test_adyen_refuses_an_item_changed_after_signing),
	        cmocka_unit_test(test_adyen_refuses_an_item_without_hmac_signature),
	        cmocka_unit_test(test_adyen_accepts_items_signed_with_a_rotated_key),
	        cmocka_unit_test(test_adyen_checks_http_basic_auth_when_configured),
	        cmocka_unit_test(test_adyen_refuses_repeated_basic_credentials_with_400),
	        cmocka_unit_test(test_adyen_marks_items_of_another_merchant_account_refused),
	        cmocka_unit_test(test_adyen_rejects_malformed_batches),
	        cmocka_unit_test(test_adyen_answers_accepted),
	        cmocka_unit_test(test_adyen_refuses_bad_configuration),
	        cmocka_unit_test(test_adyen_maps_every_event_code_that_touches_money),
	        cmocka_unit_test(test_adyen_dates_captures_only_with_basic_credentials),
	        cmocka_unit_test(test_adyen_authorisation_refused_then_granted_are_two_events),
	        cmocka_unit_test(test_adyen_manual_capture_makes_authorisation_only_authorized),
	        cmocka_unit_test(test_adyen_counts_clp_cve_idr_and_isk_with_its_own_decimals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
