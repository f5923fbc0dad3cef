/* test_hmac.c: unit tests for the generic HMAC profile: GitHub-style prefixed
 * hex, sha512/base64, signed timestamps, key from header or JSON path, kinds. */
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

extern const struct provider provider_hmac;

#define NOW 1733130100

/* GitHub's documented example ("Validating webhook deliveries"): secret
 * "It's a Secret to Everybody", payload "Hello, World!". */
#define GH_SECRET "It's a Secret to Everybody"
#define GH_BODY "Hello, World!"
#define GH_SIG "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

/* GitHub signs the body only: its X-GitHub-Delivery header is not covered,
 * so the key comes from the body. */
static const char *const github[] = {
        "secret",      GH_SECRET,     "header",        "X-Hub-Signature-256",
        "prefix",      "sha256=",     "type_path",     "action",
        "paid_types",  "paid",        "order_path",    "order.id",
        "amount_path", "order.total", "currency_path", "order.currency",
        NULL};

/* A sender that signs its delivery id along with the body. */
static const char *const delivery[] = {
        "secret",         GH_SECRET,     "header",        "X-Hub-Signature-256",
        "prefix",         "sha256=",     "key_header",    "X-Delivery",
        "signed_content", "{id}.{body}", "type_path",     "action",
        "paid_types",     "paid",        "refunded_types", "refunded",
        "order_path",     "order.id",    "amount_path",    "order.total",
        "currency_path",  "order.currency", NULL};

static int receive(struct pt_instance *pi, const char *body, const char *const *headers,
                   int64_t now, struct event_batch *b, struct provider_verdict *v)
{
	struct pt_request r;
	int rc;

	pt_request_init(&r, body, strlen(body));
	while (headers != NULL && headers[0] != NULL) {
		pt_request_header(&r, headers[0], headers[1]);
		headers += 2;
	}
	rc = pt_receive(pi, &r, now, b, v);
	pt_request_finish(&r);
	return rc;
}

/* Signs with the profile's own p_sign and receives the result. */
static int roundtrip(struct pt_instance *pi, const char *body, int64_t sign_at, int64_t now,
                     const char *id, struct event_batch *b, struct provider_verdict *v)
{
	struct pt_request r;
	int rc;

	pt_request_init(&r, body, strlen(body));
	assert_int_equal(provider_hmac.p_sign(&pi->pi_conf, body, strlen(body), sign_at, id,
	                                      pt_add_header, &r, &pt_sign_why),
	                 0);
	rc = pt_receive(pi, &r, now, b, v);
	pt_request_finish(&r);
	return rc;
}

static void test_hmac_reproduces_githubs_documented_signature(void **state)
{
	const char *headers[] = {"X-Hub-Signature-256", GH_SIG, "X-GitHub-Delivery", "d-1", NULL};
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, github), 0);
	pt_request_init(&r, GH_BODY, strlen(GH_BODY));
	assert_int_equal(provider_hmac.p_sign(&pi.pi_conf, GH_BODY, strlen(GH_BODY), NOW, NULL,
	                                      pt_add_header, &r, &pt_sign_why),
	                 0);
	assert_string_equal(http_header_get(&r.pr_req, "X-Hub-Signature-256"), GH_SIG);
	pt_request_finish(&r);
	/* The signature is accepted; the body is not JSON, so it stops there. */
	assert_int_equal(receive(&pi, GH_BODY, headers, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_body");
	pt_instance_destroy(&pi);
}

static void test_hmac_maps_a_github_style_callback(void **state)
{
	const char *body = "{\"action\":\"paid\",\"order\":{\"id\":\"ord_h1\",\"total\":4200,"
	                   "\"currency\":\"usd\"}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const struct event *ev;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, delivery), 0);
	assert_int_equal(
	        roundtrip(&pi, body, NOW, NOW, "72d3162e-cc78-11e3-81ab-4c9367dc0958", &b, &v), 0);
	ev = &b.eb_events[0];
	assert_string_equal(ev->ev_key, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
	assert_string_equal(ev->ev_type, "paid");
	assert_int_equal(ev->ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(ev->ev_order_ref, "ord_h1");
	assert_int_equal(ev->ev_amount, 4200);
	assert_string_equal(ev->ev_currency, "USD");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_hmac_accepts_upper_case_hex_and_refuses_a_wrong_prefix(void **state)
{
	const char *upper[] = {
	        "X-Hub-Signature-256",
	        "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17",
	        "X-GitHub-Delivery", "d-2", NULL};
	const char *wrong_prefix[] = {
	        "X-Hub-Signature-256",
	        "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
	        "X-GitHub-Delivery", "d-2", NULL};
	const char *wrong_sig[] = {
	        "X-Hub-Signature-256",
	        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18",
	        "X-GitHub-Delivery", "d-2", NULL};
	const char *missing[] = {"X-GitHub-Delivery", "d-2", NULL};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, github), 0);
	assert_int_equal(receive(&pi, GH_BODY, upper, NOW, &b, &v), -1);
	assert_string_equal(v.pv_reason, "malformed_body");
	assert_int_equal(receive(&pi, GH_BODY, wrong_prefix, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_signature");
	assert_int_equal(receive(&pi, GH_BODY, wrong_sig, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	assert_int_equal(receive(&pi, GH_BODY, missing, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_signature");
	pt_instance_destroy(&pi);
}

static void test_hmac_rejects_a_callback_without_key(void **state)
{
	const char *kv[] = {"secret", "s1", NULL};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, kv), 0);
	assert_int_equal(roundtrip(&pi, "{\"type\":\"x\"}", NOW, NOW, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_key");
	assert_int_equal(b.eb_n, 0);
	assert_int_equal(roundtrip(&pi, "{\"id\":\"\"}", NOW, NOW, NULL, &b, &v), -1);
	assert_string_equal(v.pv_reason, "missing_key");
	/* The default key path is "id"; integral ids work too. */
	assert_int_equal(roundtrip(&pi, "{\"id\":12345}", NOW, NOW, NULL, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_key, "12345");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_hmac_supports_sha512_base64_and_rotation(void **state)
{
	const char *kv[] = {"secret",   "old-secret", "secret", "new-secret", "algorithm",
	                    "sha512",   "encoding",   "base64", "header",     "X-Signature",
	                    "key_path", "event.id",   NULL};
	const char *body = "{\"event\":{\"id\":\"e-512\"}}";
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	char *b64 = NULL;
	const char *headers[] = {"X-Signature", NULL, NULL};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, kv), 0);
	assert_int_equal(crypto_hmac(CRYPTO_SHA512, "new-secret", 10, body, strlen(body), mac, &n),
	                 0);
	assert_int_equal(n, 64);
	assert_int_equal(crypto_base64_encode(mac, n, &b64, NULL), 0);
	headers[1] = b64;
	assert_int_equal(receive(&pi, body, headers, NOW, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_key, "e-512");
	event_batch_finish(&b);
	free(b64);
	pt_instance_destroy(&pi);
}

static void test_hmac_refuses_stale_and_future_signed_timestamps(void **state)
{
	const char *kv[] = {"secret",
	                    "s1",
	                    "timestamp_header",
	                    "X-Timestamp",
	                    "signed_content",
	                    "v0:{timestamp}:{body}",
	                    NULL};
	const char *body = "{\"id\":\"t-1\"}";
	const char *no_ts[] = {"X-Signature", "00", NULL};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, kv), 0);
	assert_int_equal(roundtrip(&pi, body, NOW, NOW + 300, NULL, &b, &v), 0);
	event_batch_finish(&b);
	assert_int_equal(roundtrip(&pi, body, NOW, NOW + 301, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(roundtrip(&pi, body, NOW + 301, NOW, NULL, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(receive(&pi, body, no_ts, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_signature");
	pt_instance_destroy(&pi);
}

static void test_hmac_signed_timestamp_is_part_of_the_signed_content(void **state)
{
	const char *kv[] = {"secret", "s1", "timestamp_header", "X-Timestamp", NULL};
	const char *body = "{\"id\":\"t-2\"}";
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, kv), 0);
	pt_request_init(&r, body, strlen(body));
	assert_int_equal(provider_hmac.p_sign(&pi.pi_conf, body, strlen(body), NOW, NULL,
	                                      pt_add_header, &r, &pt_sign_why),
	                 0);
	/* Move the timestamp without re-signing. */
	free(r.pr_owned[1]);
	r.pr_owned[1] = strdup("1733130101");
	r.pr_headers[1].hh_value = r.pr_owned[1];
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

static void test_hmac_refuses_bad_configuration(void **state)
{
	const char *no_secret[] = {"header", "X-Sig", NULL};
	const char *bad_alg[] = {"secret", "s", "algorithm", "md5", NULL};
	const char *bad_enc[] = {"secret", "s", "encoding", "base32", NULL};
	const char *ts_without_header[] = {"secret", "s", "signed_content", "{timestamp}.{body}",
	                                   NULL};
	const char *unknown_placeholder[] = {"secret", "s", "signed_content", "{url}{body}", NULL};
	const char *no_body[] = {"secret", "s", "key_header", "X-Id", "signed_content", "{id}", NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, no_secret), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, bad_alg), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, bad_enc), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, ts_without_header), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, unknown_placeholder), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, no_body), -1);
}

/* The docs' old example: the key from a header the signature does not cover,
 * so one captured callback replays under any fresh key. */
static void test_hmac_refuses_a_key_header_the_signature_does_not_cover(void **state)
{
	const char *body_only[] = {"secret", "s", "key_header", "X-GitHub-Delivery", NULL};
	const char *ts_only[] = {"secret",           "s",           "key_header", "X-Delivery",
	                         "timestamp_header", "X-Timestamp", NULL};
	const char *ts_unsigned[] = {"secret", "s", "timestamp_header", "X-Timestamp",
	                             "signed_content", "{body}", NULL};
	const char *id_glued[] = {"secret",           "s",           "key_header",
	                          "X-Delivery",       "timestamp_header", "X-Timestamp",
	                          "signed_content",   "{id}{timestamp}.{body}", NULL};
	const char *signed_id[] = {"secret",           "s",           "key_header",
	                           "X-Delivery",       "timestamp_header", "X-Timestamp",
	                           "signed_content",   "{id}.{timestamp}.{body}", NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, body_only), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, ts_only), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, ts_unsigned), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, id_glued), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, signed_id), 0);
	pt_instance_destroy(&pi);
}

/* The configured signature, timestamp and key headers may each come
 * once (RFC 9110 5.3). */
static void test_hmac_refuses_a_repeated_signature_timestamp_or_key_header_with_400(void **state)
{
	static const char *const timed[] = {"secret",
	                                    GH_SECRET,
	                                    "header",
	                                    "X-Hub-Signature-256",
	                                    "prefix",
	                                    "sha256=",
	                                    "key_header",
	                                    "X-Delivery",
	                                    "timestamp_header",
	                                    "X-Timestamp",
	                                    "signed_content",
	                                    "{timestamp}.{id}.{body}",
	                                    "type_path",
	                                    "action",
	                                    "paid_types",
	                                    "paid",
	                                    "order_path",
	                                    "order.id",
	                                    "amount_path",
	                                    "order.total",
	                                    "currency_path",
	                                    "order.currency",
	                                    NULL};
	const char *body = "{\"action\":\"paid\",\"order\":{\"id\":\"ord_h3\",\"total\":500,"
	                   "\"currency\":\"usd\"}}";
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, timed), 0);
	pt_request_init(&r, body, strlen(body));
	assert_int_equal(provider_hmac.p_sign(&pi.pi_conf, body, strlen(body), NOW, "d-9",
	                                      pt_add_header, &r, &pt_sign_why),
	                 0);
	assert_int_equal(r.pr_req.hr_n_headers, 3);
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), 0);
	event_batch_finish(&b);
	assert_int_equal(pt_repeats_not_refused(&pi, &r, NOW), 0);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

/* replay --to signs a capture again under the id it was keyed on: the key
 * header's value, or none when the key is in the body. */
static void test_hmac_gives_the_key_headers_value_to_sign_again(void **state)
{
	const char *body = "{\"id\":\"evt_1\",\"action\":\"paid\"}";
	struct pt_instance pi;
	struct pt_instance gh;
	struct pt_request r;
	struct pt_request again;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, delivery), 0);
	assert_int_equal(pt_instance_create(&gh, &provider_hmac, github), 0);
	pt_request_init(&r, body, strlen(body));
	assert_int_equal(provider_hmac.p_sign(&pi.pi_conf, body, strlen(body), NOW, "d-5",
	                                      pt_add_header, &r, &pt_sign_why),
	                 0);
	assert_non_null(provider_hmac.p_sign_id);
	assert_string_equal(provider_hmac.p_sign_id(&pi.pi_conf, &r.pr_req), "d-5");
	assert_null(provider_hmac.p_sign_id(&gh.pi_conf, &r.pr_req));
	/* Signed again with it, the request carries the same id. */
	pt_request_init(&again, body, strlen(body));
	assert_int_equal(provider_hmac.p_sign(&pi.pi_conf, body, strlen(body), NOW + 60,
	                                      provider_hmac.p_sign_id(&pi.pi_conf, &r.pr_req),
	                                      pt_add_header, &again, &pt_sign_why),
	                 0);
	assert_string_equal(provider_hmac.p_sign_id(&pi.pi_conf, &again.pr_req), "d-5");
	pt_request_finish(&again);
	pt_request_finish(&r);
	pt_instance_destroy(&gh);
	pt_instance_destroy(&pi);
}

/* A request without the key header cannot be signed again as it was
 * signed: p_sign says so (replay --to counts it failed, never sends it
 * with its old signature). */
static void test_hmac_cannot_sign_without_the_id_its_key_header_signs(void **state)
{
	const char *body = "{\"id\":\"evt_1\",\"action\":\"paid\"}";
	struct pt_instance pi;
	struct pt_request r;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, delivery), 0);
	pt_request_init(&r, body, strlen(body));
	pt_sign_why = NULL;
	assert_int_equal(provider_hmac.p_sign(&pi.pi_conf, body, strlen(body), NOW, NULL,
	                                      pt_add_header, &r, &pt_sign_why),
	                 -1);
	assert_non_null(pt_sign_why);
	assert_non_null(strstr(pt_sign_why, "key_header"));
	assert_int_equal(r.pr_req.hr_n_headers, 0);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

static void test_hmac_a_changed_key_header_no_longer_verifies(void **state)
{
	const char *body = "{\"action\":\"refunded\",\"order\":{\"id\":\"ord_h2\",\"total\":500,"
	                   "\"currency\":\"usd\"}}";
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_hmac, delivery), 0);
	pt_request_init(&r, body, strlen(body));
	assert_int_equal(provider_hmac.p_sign(&pi.pi_conf, body, strlen(body), NOW, "d-7",
	                                      pt_add_header, &r, &pt_sign_why),
	                 0);
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_key, "d-7");
	/* Without refund_path the refund id is the key, which is signed. */
	assert_string_equal(b.eb_events[0].ev_refund_ref, "d-7");
	event_batch_finish(&b);
	free(r.pr_owned[1]);
	r.pr_owned[1] = strdup("d-8");
	r.pr_headers[1].hh_value = r.pr_owned[1];
	assert_string_equal(r.pr_headers[1].hh_name, "X-Delivery");
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	assert_int_equal(b.eb_n, 0);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_hmac_reproduces_githubs_documented_signature),
	        cmocka_unit_test(test_hmac_maps_a_github_style_callback),
	        cmocka_unit_test(test_hmac_accepts_upper_case_hex_and_refuses_a_wrong_prefix),
	        cmocka_unit_test(test_hmac_rejects_a_callback_without_key),
	        cmocka_unit_test(test_hmac_supports_sha512_base64_and_rotation),
	        cmocka_unit_test(test_hmac_refuses_stale_and_future_signed_timestamps),
	        cmocka_unit_test(test_hmac_signed_timestamp_is_part_of_the_signed_content),
	        cmocka_unit_test(
	                test_hmac_refuses_a_repeated_signature_timestamp_or_key_header_with_400),
	        cmocka_unit_test(test_hmac_refuses_bad_configuration),
	        cmocka_unit_test(test_hmac_refuses_a_key_header_the_signature_does_not_cover),
	        cmocka_unit_test(test_hmac_a_changed_key_header_no_longer_verifies),
	        cmocka_unit_test(test_hmac_gives_the_key_headers_value_to_sign_again),
	        cmocka_unit_test(test_hmac_cannot_sign_without_the_id_its_key_header_signs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
