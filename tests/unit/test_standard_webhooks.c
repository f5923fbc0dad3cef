/* test_standard_webhooks.c: unit tests for the Standard Webhooks profile:
 * published v1 vector, svix aliases, v1a Ed25519, rotation, tolerance,
 * malformed headers and the configurable type mapping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>

#include "buf.h"
#include "crypto.h"
#include "provider_test.h"
#include "providers.h"

extern const struct provider provider_standard_webhooks;

/* Published vector: standard-webhooks JavaScript library, test "sign function
 * works" (also in Svix's documentation with svix-* headers). */
#define VEC_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define VEC_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define VEC_TS 1614265330
#define VEC_TS_TEXT "1614265330"
#define VEC_BODY "{\"test\": 2432232314}"
#define VEC_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static void make_instance(struct pt_instance *pi, const char *const *extra)
{
	const char *kv[2 * PT_MAX_KV + 1];
	size_t n = 0;

	kv[n++] = "secret";
	kv[n++] = VEC_SECRET;
	while (extra != NULL && *extra != NULL) {
		kv[n++] = *extra++;
	}
	kv[n] = NULL;
	assert_int_equal(pt_instance_create(pi, &provider_standard_webhooks, kv), 0);
}

static int receive(struct pt_instance *pi, const char *prefix, const char *id, const char *ts,
                   const char *sig, const char *body, int64_t now, struct event_batch *b,
                   struct provider_verdict *v)
{
	struct pt_request r;
	int rc;

	pt_request_init(&r, body, strlen(body));
	if (strcmp(prefix, "svix") == 0) {
		if (id != NULL) {
			pt_request_header(&r, "svix-id", id);
		}
		if (ts != NULL) {
			pt_request_header(&r, "svix-timestamp", ts);
		}
		if (sig != NULL) {
			pt_request_header(&r, "svix-signature", sig);
		}
	} else {
		if (id != NULL) {
			pt_request_header(&r, "Webhook-Id", id);
		}
		if (ts != NULL) {
			pt_request_header(&r, "Webhook-Timestamp", ts);
		}
		if (sig != NULL) {
			pt_request_header(&r, "Webhook-Signature", sig);
		}
	}
	rc = pt_receive(pi, &r, now, b, v);
	pt_request_finish(&r);
	return rc;
}

/* A v1 signature computed with the bare primitive. */
static void v1_for(const char *whsec, const char *id, int64_t ts, const char *body, char *out,
                   size_t out_size)
{
	unsigned char *key = NULL;
	size_t key_len = 0;
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	char *b64 = NULL;
	struct buf b;

	assert_int_equal(crypto_base64_decode(whsec + 6, strlen(whsec + 6), &key, &key_len), 0);
	buf_init(&b, 0);
	buf_printf(&b, "%s.%lld.%s", id, (long long)ts, body);
	assert_int_equal(crypto_hmac(CRYPTO_SHA256, key, key_len, b.buf_data, b.buf_len, mac, &n),
	                 0);
	assert_int_equal(crypto_base64_encode(mac, n, &b64, NULL), 0);
	snprintf(out, out_size, "v1,%s", b64);
	free(b64);
	free(key);
	buf_finish(&b);
}

static void test_standard_webhooks_accepts_the_published_v1_vector(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(
	        receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, VEC_SIG, VEC_BODY, VEC_TS, &b, &v), 0);
	assert_int_equal(b.eb_n, 1);
	assert_string_equal(b.eb_events[0].ev_key, VEC_ID);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_OTHER);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_accepts_svix_header_aliases(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(
	        receive(&pi, "svix", VEC_ID, VEC_TS_TEXT, VEC_SIG, VEC_BODY, VEC_TS, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_key, VEC_ID);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

/* webhook-id, -timestamp or -signature (or their svix- aliases) twice:
 * refused, as which line counts is unknown (RFC 9110 5.3). */
static void test_standard_webhooks_refuses_each_repeated_header_with_400(void **state)
{
	static const char *const names[2][3] = {
	        {"webhook-id", "webhook-timestamp", "webhook-signature"},
	        {"svix-id", "svix-timestamp", "svix-signature"},
	};
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	make_instance(&pi, NULL);
	for (i = 0; i < 2; i++) {
		pt_request_init(&r, VEC_BODY, strlen(VEC_BODY));
		pt_request_header(&r, names[i][0], VEC_ID);
		pt_request_header(&r, names[i][1], VEC_TS_TEXT);
		pt_request_header(&r, names[i][2], VEC_SIG);
		assert_int_equal(pt_receive(&pi, &r, VEC_TS, &b, &v), 0);
		event_batch_finish(&b);
		assert_int_equal(pt_repeats_not_refused(&pi, &r, VEC_TS), 0);
		pt_request_finish(&r);
	}
	pt_instance_destroy(&pi);
}

/* Both names, the same values: what a sender moving to the spec's names
 * sends; taken. */
static void test_standard_webhooks_accepts_identical_webhook_and_svix_headers(void **state)
{
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	pt_request_init(&r, VEC_BODY, strlen(VEC_BODY));
	pt_request_header(&r, "webhook-id", VEC_ID);
	pt_request_header(&r, "webhook-timestamp", VEC_TS_TEXT);
	pt_request_header(&r, "webhook-signature", VEC_SIG);
	pt_request_header(&r, "svix-id", VEC_ID);
	pt_request_header(&r, "svix-timestamp", VEC_TS_TEXT);
	pt_request_header(&r, "svix-signature", VEC_SIG);
	assert_int_equal(pt_receive(&pi, &r, VEC_TS, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_key, VEC_ID);
	event_batch_finish(&b);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

/* The three headers under names of both families, validly signed
 * (webhook-id with svix-timestamp and svix-signature, and every other
 * mix): neither Svix's libraries nor the spec's receiver take such a set,
 * so it is refused (400 mixed_headers); one family alone is taken. A
 * whole set with a stray twin of the other family is a mix too. */
static void test_standard_webhooks_refuses_a_set_that_mixes_webhook_and_svix_names(void **state)
{
	static const char *const names[2][3] = {
	        {"webhook-id", "webhook-timestamp", "webhook-signature"},
	        {"svix-id", "svix-timestamp", "svix-signature"},
	};
	static const char *const value[3] = {VEC_ID, VEC_TS_TEXT, VEC_SIG};
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;
	unsigned mask;
	size_t i;

	(void)state;
	make_instance(&pi, NULL);
	/* Bit i set: header i under its svix- name. */
	for (mask = 0; mask < 8; mask++) {
		pt_request_init(&r, VEC_BODY, strlen(VEC_BODY));
		for (i = 0; i < 3; i++) {
			pt_request_header(&r, names[(mask >> i) & 1][i], value[i]);
		}
		memset(&v, 0, sizeof(v));
		if (mask == 0 || mask == 7) {
			assert_int_equal(pt_receive(&pi, &r, VEC_TS, &b, &v), 0);
			assert_string_equal(b.eb_events[0].ev_key, VEC_ID);
			event_batch_finish(&b);
		} else {
			assert_int_equal(pt_receive(&pi, &r, VEC_TS, &b, &v), -1);
			assert_int_equal(v.pv_status, 400);
			assert_string_equal(v.pv_reason, "mixed_headers");
			assert_non_null(strstr(v.pv_detail, "mixed"));
			assert_int_equal(b.eb_n, 0);
		}
		pt_request_finish(&r);
	}
	/* A whole webhook- set, and svix-id with the same value. */
	pt_request_init(&r, VEC_BODY, strlen(VEC_BODY));
	pt_request_header(&r, "webhook-id", VEC_ID);
	pt_request_header(&r, "webhook-timestamp", VEC_TS_TEXT);
	pt_request_header(&r, "webhook-signature", VEC_SIG);
	pt_request_header(&r, "svix-id", VEC_ID);
	memset(&v, 0, sizeof(v));
	assert_int_equal(pt_receive(&pi, &r, VEC_TS, &b, &v), -1);
	assert_string_equal(v.pv_reason, "mixed_headers");
	assert_int_equal(b.eb_n, 0);
	pt_request_finish(&r);
	/* One family, incomplete: missing, as before. */
	pt_request_init(&r, VEC_BODY, strlen(VEC_BODY));
	pt_request_header(&r, "svix-id", VEC_ID);
	pt_request_header(&r, "svix-signature", VEC_SIG);
	memset(&v, 0, sizeof(v));
	assert_int_equal(pt_receive(&pi, &r, VEC_TS, &b, &v), -1);
	assert_string_equal(v.pv_reason, "missing_signature");
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

/* webhook-id: A with svix-id: B, each validly signed: which one is the
 * idempotency key depends on the receiver's preference, so the request is
 * refused (400 repeated_header), whichever of the three differs. */
static void test_standard_webhooks_refuses_webhook_and_svix_headers_that_differ(void **state)
{
	static const char *const what[3] = {"id", "timestamp", "signature"};
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;
	char sig_a[128];
	char sig_b[128];
	char sig_both[260];
	char ts_b[24];
	size_t i;

	(void)state;
	make_instance(&pi, NULL);
	v1_for(VEC_SECRET, "msg_a", VEC_TS, VEC_BODY, sig_a, sizeof(sig_a));
	for (i = 0; i < 3; i++) {
		const char *id_b = i == 0 ? "msg_b" : "msg_a";
		int64_t ts = i == 1 ? VEC_TS + 1 : VEC_TS;

		snprintf(ts_b, sizeof(ts_b), "%lld", (long long)ts);
		v1_for(VEC_SECRET, id_b, ts, VEC_BODY, sig_b, sizeof(sig_b));
		/* Same id and time: a signature header with one more entry. */
		snprintf(sig_both, sizeof(sig_both), "%s %s", sig_b, sig_a);
		pt_request_init(&r, VEC_BODY, strlen(VEC_BODY));
		pt_request_header(&r, "webhook-id", "msg_a");
		pt_request_header(&r, "webhook-timestamp", VEC_TS_TEXT);
		pt_request_header(&r, "webhook-signature", sig_a);
		pt_request_header(&r, "svix-id", id_b);
		pt_request_header(&r, "svix-timestamp", ts_b);
		pt_request_header(&r, "svix-signature", i == 2 ? sig_both : sig_b);
		memset(&v, 0, sizeof(v));
		assert_int_equal(pt_receive(&pi, &r, VEC_TS, &b, &v), -1);
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, "repeated_header");
		assert_non_null(strstr(v.pv_detail, what[i]));
		assert_int_equal(b.eb_n, 0);
		pt_request_finish(&r);
	}
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_sign_reproduces_the_published_signature(void **state)
{
	struct pt_instance pi;
	struct pt_request r;

	(void)state;
	make_instance(&pi, NULL);
	pt_request_init(&r, VEC_BODY, strlen(VEC_BODY));
	assert_int_equal(provider_standard_webhooks.p_sign(&pi.pi_conf, VEC_BODY, strlen(VEC_BODY),
	                                                   VEC_TS, VEC_ID, pt_add_header, &r,
	                                                   &pt_sign_why),
	                 0);
	assert_string_equal(http_header_get(&r.pr_req, "webhook-id"), VEC_ID);
	assert_string_equal(http_header_get(&r.pr_req, "webhook-timestamp"), VEC_TS_TEXT);
	assert_string_equal(http_header_get(&r.pr_req, "webhook-signature"), VEC_SIG);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_accepts_one_valid_among_several_signatures(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const char *sig =
	        "v2,abc v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= " VEC_SIG " v1a,AAAA";

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(
	        receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, sig, VEC_BODY, VEC_TS, &b, &v), 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_accepts_a_rotated_secret(void **state)
{
	const char *extra[] = {"secret", "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24=", NULL};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char sig[128];

	(void)state;
	make_instance(&pi, extra);
	v1_for("whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24=", "msg_2", 1700000000, VEC_BODY, sig,
	       sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_2", "1700000000", sig, VEC_BODY, 1700000000, &b, &v),
	        0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_rejects_stale_and_future_timestamps(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, VEC_SIG, VEC_BODY,
	                         VEC_TS + 301, &b, &v),
	                 -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, VEC_SIG, VEC_BODY,
	                         VEC_TS - 301, &b, &v),
	                 -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, VEC_SIG, VEC_BODY,
	                         VEC_TS - 300, &b, &v),
	                 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_rejects_missing_and_malformed_headers(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(
	        receive(&pi, "webhook", NULL, VEC_TS_TEXT, VEC_SIG, VEC_BODY, VEC_TS, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_signature");
	assert_int_equal(receive(&pi, "webhook", VEC_ID, NULL, VEC_SIG, VEC_BODY, VEC_TS, &b, &v),
	                 -1);
	assert_int_equal(v.pv_status, 400);
	assert_int_equal(
	        receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, NULL, VEC_BODY, VEC_TS, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_int_equal(
	        receive(&pi, "webhook", VEC_ID, "16142653x0", VEC_SIG, VEC_BODY, VEC_TS, &b, &v),
	        -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_signature");
	assert_int_equal(
	        receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, "g0hM9SsE", VEC_BODY, VEC_TS, &b, &v),
	        -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_signature");
	assert_int_equal(
	        receive(&pi, "webhook", "", VEC_TS_TEXT, VEC_SIG, VEC_BODY, VEC_TS, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_key");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
}

/* A signed webhook-id the key cannot take (a control byte, too long) is the
 * sender's mistake, answered 400 missing_key: never 503 out_of_memory, which
 * the sender would retry for a day and which reads as the receiver failing. */
static void test_standard_webhooks_refuses_an_unusable_signed_id_with_400(void **state)
{
	static const char *const ids[] = {"msg_\177del", "msg_\ttab", "msg_\001x", NULL};
	char long_id[PROVIDER_REF_MAX + 2];
	char sig[128];
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	make_instance(&pi, NULL);
	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		const char *id = ids[i] != NULL ? ids[i] : long_id;

		v1_for(VEC_SECRET, id, VEC_TS, VEC_BODY, sig, sizeof(sig));
		print_message("webhook-id #%zu\n", i);
		assert_int_equal(
		        receive(&pi, "webhook", id, VEC_TS_TEXT, sig, VEC_BODY, VEC_TS, &b, &v),
		        -1);
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, "missing_key");
		assert_int_equal(b.eb_n, 0);
	}
	/* The same request with a usable id is taken. */
	v1_for(VEC_SECRET, "msg_del", VEC_TS, VEC_BODY, sig, sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_del", VEC_TS_TEXT, sig, VEC_BODY, VEC_TS, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_key, "msg_del");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_rejects_a_changed_body_or_id(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi, NULL);
	assert_int_equal(receive(&pi, "webhook", VEC_ID, VEC_TS_TEXT, VEC_SIG,
	                         "{\"test\": 2432232315}", VEC_TS, &b, &v),
	                 -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	assert_int_equal(receive(&pi, "webhook", "msg_other", VEC_TS_TEXT, VEC_SIG, VEC_BODY,
	                         VEC_TS, &b, &v),
	                 -1);
	assert_int_equal(v.pv_status, 401);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_verifies_v1a_ed25519_signatures(void **state)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	EVP_PKEY *other = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	unsigned char pub[32];
	size_t pub_len = sizeof(pub);
	unsigned char sig[64];
	size_t sig_len = sizeof(sig);
	char *pub_b64 = NULL;
	char *sig_b64 = NULL;
	char whpk[80];
	char header[128];
	const char *content = "msg_ed.1700000000.{\"type\":\"x\"}";
	const char *body = "{\"type\":\"x\"}";
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const char *kv[] = {"public_key", whpk, NULL};

	(void)state;
	assert_non_null(k);
	assert_int_equal(EVP_PKEY_get_raw_public_key(k, pub, &pub_len), 1);
	assert_int_equal(crypto_base64_encode(pub, pub_len, &pub_b64, NULL), 0);
	snprintf(whpk, sizeof(whpk), "whpk_%s", pub_b64);
	assert_int_equal(EVP_DigestSignInit(ctx, NULL, NULL, NULL, k), 1);
	assert_int_equal(
	        EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)content, strlen(content)),
	        1);
	assert_int_equal(crypto_base64_encode(sig, sig_len, &sig_b64, NULL), 0);
	snprintf(header, sizeof(header), "v1a,%s", sig_b64);

	assert_int_equal(pt_instance_create(&pi, &provider_standard_webhooks, kv), 0);
	assert_int_equal(
	        receive(&pi, "webhook", "msg_ed", "1700000000", header, body, 1700000000, &b, &v),
	        0);
	event_batch_finish(&b);
	assert_int_equal(receive(&pi, "webhook", "msg_ed", "1700000000", header, "{\"type\":\"y\"}",
	                         1700000000, &b, &v),
	                 -1);
	assert_int_equal(v.pv_status, 401);
	pt_instance_destroy(&pi);

	/* The same signature checked against another key. */
	pub_len = sizeof(pub);
	free(pub_b64);
	assert_int_equal(EVP_PKEY_get_raw_public_key(other, pub, &pub_len), 1);
	assert_int_equal(crypto_base64_encode(pub, pub_len, &pub_b64, NULL), 0);
	snprintf(whpk, sizeof(whpk), "whpk_%s", pub_b64);
	assert_int_equal(pt_instance_create(&pi, &provider_standard_webhooks, kv), 0);
	assert_int_equal(
	        receive(&pi, "webhook", "msg_ed", "1700000000", header, body, 1700000000, &b, &v),
	        -1);
	assert_int_equal(v.pv_status, 401);

	/* Public keys verify; they cannot sign the request again. */
	{
		struct pt_request r;

		pt_request_init(&r, body, strlen(body));
		pt_sign_why = NULL;
		assert_int_equal(provider_standard_webhooks.p_sign(&pi.pi_conf, body, strlen(body),
		                                                   1700000000, "msg_ed",
		                                                   pt_add_header, &r, &pt_sign_why),
		                 -1);
		assert_non_null(pt_sign_why);
		assert_non_null(strstr(pt_sign_why, "public_key"));
		assert_int_equal(r.pr_req.hr_n_headers, 0);
		pt_request_finish(&r);
	}
	pt_instance_destroy(&pi);

	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
	EVP_PKEY_free(other);
	free(pub_b64);
	free(sig_b64);
}

static void test_standard_webhooks_maps_configured_types_to_kinds(void **state)
{
	const char *extra[] = {"paid_types",
	                       "payment.succeeded, invoice.paid",
	                       "refunded_types",
	                       "payment.refunded",
	                       "order_path",
	                       "data.metadata.order",
	                       NULL};
	const char *paid =
	        "{\"type\":\"invoice.paid\",\"data\":{\"payment_id\":\"pay_1\",\"amount\":2500,"
	        "\"currency\":\"eur\",\"metadata\":{\"order\":\"ord_1\"}}}";
	const char *refunded =
	        "{\"type\":\"payment.refunded\",\"data\":{\"payment_id\":\"pay_1\",\"amount\":500,"
	        "\"currency\":\"EUR\",\"metadata\":{\"order\":\"ord_1\"}}}";
	const char *other = "{\"type\":\"customer.created\",\"data\":{}}";
	const char *bad_amount =
	        "{\"type\":\"invoice.paid\",\"data\":{\"amount\":25.5,\"currency\":\"eur\"}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char sig[128];

	(void)state;
	make_instance(&pi, extra);
	v1_for(VEC_SECRET, "msg_p", 1700000000, paid, sig, sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_p", "1700000000", sig, paid, 1700000000, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(b.eb_events[0].ev_type, "invoice.paid");
	assert_string_equal(b.eb_events[0].ev_order_ref, "ord_1");
	assert_string_equal(b.eb_events[0].ev_payment_ref, "pay_1");
	assert_int_equal(b.eb_events[0].ev_amount, 2500);
	assert_string_equal(b.eb_events[0].ev_currency, "EUR");
	event_batch_finish(&b);

	v1_for(VEC_SECRET, "msg_r", 1700000000, refunded, sig, sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_r", "1700000000", sig, refunded, 1700000000, &b, &v),
	        0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_REFUNDED);
	assert_string_equal(b.eb_events[0].ev_refund_ref, "msg_r");
	assert_int_equal(b.eb_events[0].ev_refund_cumulative, 0);
	event_batch_finish(&b);

	v1_for(VEC_SECRET, "msg_o", 1700000000, other, sig, sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_o", "1700000000", sig, other, 1700000000, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_OTHER);
	assert_null(b.eb_events[0].ev_order_ref);
	assert_int_equal(b.eb_events[0].ev_amount, -1);
	event_batch_finish(&b);

	v1_for(VEC_SECRET, "msg_b", 1700000000, bad_amount, sig, sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_b", "1700000000", sig, bad_amount, 1700000000, &b, &v),
	        -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_body");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_parses_decimal_amounts_exactly(void **state)
{
	const char *extra[] = {"paid_types", "paid", "amount_format", "decimal", NULL};
	const char *body = "{\"type\":\"paid\",\"data\":{\"order_id\":\"o\",\"amount\":\"1.005\","
	                   "\"currency\":\"kwd\"}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char sig[128];

	(void)state;
	make_instance(&pi, extra);
	v1_for(VEC_SECRET, "msg_d", 1700000000, body, sig, sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_d", "1700000000", sig, body, 1700000000, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_amount, 1005);
	assert_string_equal(b.eb_events[0].ev_currency, "KWD");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_rejects_a_body_that_is_not_json(void **state)
{
	const char *body = "not json";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char sig[128];

	(void)state;
	make_instance(&pi, NULL);
	v1_for(VEC_SECRET, "msg_n", 1700000000, body, sig, sizeof(sig));
	assert_int_equal(
	        receive(&pi, "webhook", "msg_n", "1700000000", sig, body, 1700000000, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_body");
	pt_instance_destroy(&pi);
}

static void test_standard_webhooks_refuses_bad_key_configuration(void **state)
{
	const char *none[] = {"paid_types", "x", NULL};
	const char *bad_secret[] = {"secret", "whsec_!!!", NULL};
	const char *short_pk[] = {"public_key", "whpk_AAAA", NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_standard_webhooks, none), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_standard_webhooks, bad_secret), -1);
	assert_int_equal(pt_instance_create(&pi, &provider_standard_webhooks, short_pk), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_standard_webhooks_accepts_the_published_v1_vector),
	        cmocka_unit_test(test_standard_webhooks_accepts_svix_header_aliases),
	        cmocka_unit_test(test_standard_webhooks_refuses_each_repeated_header_with_400),
	        cmocka_unit_test(test_standard_webhooks_accepts_identical_webhook_and_svix_headers),
	        cmocka_unit_test(
	                test_standard_webhooks_refuses_a_set_that_mixes_webhook_and_svix_names),
	        cmocka_unit_test(
	                test_standard_webhooks_refuses_webhook_and_svix_headers_that_differ),
	        cmocka_unit_test(test_standard_webhooks_sign_reproduces_the_published_signature),
	        cmocka_unit_test(test_standard_webhooks_accepts_one_valid_among_several_signatures),
	        cmocka_unit_test(test_standard_webhooks_accepts_a_rotated_secret),
	        cmocka_unit_test(test_standard_webhooks_rejects_stale_and_future_timestamps),
	        cmocka_unit_test(test_standard_webhooks_rejects_missing_and_malformed_headers),
	        cmocka_unit_test(test_standard_webhooks_refuses_an_unusable_signed_id_with_400),
	        cmocka_unit_test(test_standard_webhooks_rejects_a_changed_body_or_id),
	        cmocka_unit_test(test_standard_webhooks_verifies_v1a_ed25519_signatures),
	        cmocka_unit_test(test_standard_webhooks_maps_configured_types_to_kinds),
	        cmocka_unit_test(test_standard_webhooks_parses_decimal_amounts_exactly),
	        cmocka_unit_test(test_standard_webhooks_rejects_a_body_that_is_not_json),
	        cmocka_unit_test(test_standard_webhooks_refuses_bad_key_configuration),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
