/* test_stripe.c: unit tests for the Stripe profile: Stripe-Signature, rotation,
 * tolerance, normalization and the semantic fingerprint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "provider_test.h"
#include "providers.h"

extern const struct provider provider_stripe;

#define NOW 1733130100
#define SECRET_A "whsec_test_secret_a"
#define SECRET_B "whsec_test_secret_b"

static char *read_fixture(const char *name, size_t *ret_len)
{
	const char *dir = getenv("IDEMHOOK_TESTDATA");
	char path[1024];
	char *data;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/stripe/%s", dir != NULL ? dir : "tests/data", name);
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	data = malloc((size_t)n + 1);
	assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
	data[n] = '\0';
	fclose(f);
	*ret_len = (size_t)n;
	return data;
}

/* The v1 value for body at t with secret, computed with the bare primitive. */
static void v1_for(const char *secret, int64_t t, const char *body, char out[65])
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b, "%lld.%s", (long long)t, body);
	assert_int_equal(
	        crypto_hmac(CRYPTO_SHA256, secret, strlen(secret), b.buf_data, b.buf_len, mac, &n),
	        0);
	crypto_hex_encode(mac, n, out);
	buf_finish(&b);
}

static void make_instance(struct pt_instance *pi)
{
	const char *kv[] = {"type", "stripe", "secret", SECRET_A, "secret", SECRET_B, NULL};

	assert_int_equal(pt_instance_create(pi, &provider_stripe, kv), 0);
}

static int receive_with_header(struct pt_instance *pi, const char *body, const char *header,
                               int64_t now, struct event_batch *b, struct provider_verdict *v)
{
	struct pt_request r;
	int rc;

	pt_request_init(&r, body, strlen(body));
	if (header != NULL) {
		pt_request_header(&r, "Stripe-Signature", header);
	}
	rc = pt_receive(pi, &r, now, b, v);
	pt_request_finish(&r);
	return rc;
}

static int receive_signed(struct pt_instance *pi, const char *body, const char *secret, int64_t t,
                          int64_t now, struct event_batch *b, struct provider_verdict *v)
{
	char v1[65];
	char header[128];

	v1_for(secret, t, body, v1);
	snprintf(header, sizeof(header), "t=%lld,v1=%s", (long long)t, v1);
	return receive_with_header(pi, body, header, now, b, v);
}

static void test_stripe_accepts_a_signed_payment_intent_succeeded(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t len;
	char *body = read_fixture("payment_intent_succeeded.json", &len);
	const struct event *ev;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_signed(&pi, body, SECRET_A, NOW, NOW, &b, &v), 0);
	assert_int_equal(b.eb_n, 1);
	ev = &b.eb_events[0];
	assert_string_equal(ev->ev_key, "evt_3PpiSucceeded0001");
	assert_string_equal(ev->ev_type, "payment_intent.succeeded");
	assert_int_equal(ev->ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(ev->ev_order_ref, "ord_0001");
	assert_string_equal(ev->ev_payment_ref, "pi_3PpiSucceeded0001");
	assert_null(ev->ev_refund_ref);
	assert_int_equal(ev->ev_amount, 1999);
	assert_string_equal(ev->ev_currency, "USD");
	assert_int_equal(ev->ev_payload_len, len);
	assert_memory_equal(ev->ev_payload, body, len);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

static void test_stripe_accepts_a_second_secret_during_rotation(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const char *body = "{\"id\":\"evt_1\",\"type\":\"customer.created\",\"data\":{\"object\":{"
	                   "\"id\":\"cus_1\"}}}";

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_signed(&pi, body, SECRET_B, NOW, NOW, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_OTHER);
	event_batch_finish(&b);
	assert_int_equal(receive_signed(&pi, body, "whsec_retired", NOW, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
}

static void test_stripe_accepts_any_matching_v1_and_ignores_v0(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const char *body = "{\"id\":\"evt_2\",\"type\":\"x\",\"data\":{\"object\":{}}}";
	char good[65];
	char header[512];

	(void)state;
	make_instance(&pi);
	v1_for(SECRET_A, NOW, body, good);
	snprintf(header, sizeof(header), "t=%d, v1=%064d, v0=%s, v1=%s", NOW, 0, good, good);
	assert_int_equal(receive_with_header(&pi, body, header, NOW, &b, &v), 0);
	event_batch_finish(&b);
	/* The right MAC under v0 alone is not a v1 signature. */
	snprintf(header, sizeof(header), "t=%d,v0=%s,v1=%064d", NOW, good, 0);
	assert_int_equal(receive_with_header(&pi, body, header, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	pt_instance_destroy(&pi);
}

static void test_stripe_rejects_timestamp_older_than_tolerance(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const char *body = "{\"id\":\"evt_3\",\"type\":\"x\",\"data\":{\"object\":{}}}";

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_signed(&pi, body, SECRET_A, NOW - 301, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(receive_signed(&pi, body, SECRET_A, NOW - 300, NOW, &b, &v), 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_stripe_rejects_timestamp_further_in_the_future_than_tolerance(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const char *body = "{\"id\":\"evt_4\",\"type\":\"x\",\"data\":{\"object\":{}}}";

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_signed(&pi, body, SECRET_A, NOW + 301, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "stale_timestamp");
	assert_int_equal(receive_signed(&pi, body, SECRET_A, NOW + 300, NOW, &b, &v), 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_stripe_rejects_missing_and_malformed_headers_with_400(void **state)
{
	const char *bad[] = {"",
	                     "garbage",
	                     "t=1733130100",
	                     "v1=abc",
	                     "t=abc,v1=00",
	                     "t=1,t=2,v1=00",
	                     "t=-5,v1=00",
	                     "t=17331301000000,v1=00"};
	const char *body = "{\"id\":\"evt_5\",\"type\":\"x\",\"data\":{\"object\":{}}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_with_header(&pi, body, NULL, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "missing_signature");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(receive_with_header(&pi, body, bad[i], NOW, &b, &v), -1);
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, "malformed_signature");
		assert_int_equal(b.eb_n, 0);
	}
	pt_instance_destroy(&pi);
}

static void test_stripe_rejects_a_body_changed_by_one_byte(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	char body[] = "{\"id\":\"evt_6\",\"type\":\"x\",\"data\":{\"object\":{\"amount\":100}}}";
	char v1[65];
	char header[128];

	(void)state;
	make_instance(&pi);
	v1_for(SECRET_A, NOW, body, v1);
	snprintf(header, sizeof(header), "t=%d,v1=%s", NOW, v1);
	strstr(body, "100")[0] = '9';
	assert_int_equal(receive_with_header(&pi, body, header, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	pt_instance_destroy(&pi);
}

/* Each of the n signed bodies is refused with 400 and its reason
 * (reasons NULL: malformed_body), no event taken. */
static void assert_bodies_refused(const char *const *bodies, const char *const *reasons, size_t n)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	make_instance(&pi);
	for (i = 0; i < n; i++) {
		memset(&b, 0, sizeof(b));
		memset(&v, 0, sizeof(v));
		if (receive_signed(&pi, bodies[i], SECRET_A, NOW, NOW, &b, &v) != -1) {
			fail_msg("body %zu taken: amount %lld", i,
			         b.eb_n > 0 ? (long long)b.eb_events[0].ev_amount : -1LL);
		}
		assert_int_equal(v.pv_status, 400);
		assert_string_equal(v.pv_reason, reasons != NULL ? reasons[i] : "malformed_body");
		assert_int_equal(b.eb_n, 0);
	}
	pt_instance_destroy(&pi);
}

static void test_stripe_rejects_signed_bodies_that_are_not_events(void **state)
{
	const char *bodies[] = {"not json",
	                        "[]",
	                        "{\"type\":\"x\",\"data\":{\"object\":{}}}",
	                        "{\"id\":\"evt_7\",\"type\":\"x\"}",
	                        "{\"id\":\"evt_7\",\"data\":{\"object\":{}}}",
	                        "{\"id\":\"evt_7\",\"type\":\"payment_intent.succeeded\",\"data\":{"
	                        "\"object\":{\"amount\":1.5}}}",
	                        "{\"id\":\"evt_7\",\"type\":\"x\",\"data\":{\"object\":{"
	                        "\"currency\":\"dollars\"}}}"};
	const char *reasons[] = {"malformed_body", "malformed_body", "missing_key",
	                         "malformed_body", "malformed_body", "malformed_body",
	                         "malformed_body"};

	(void)state;
	assert_bodies_refused(bodies, reasons, sizeof(bodies) / sizeof(bodies[0]));
}

static void test_stripe_maps_checkout_session_completed_only_when_paid(void **state)
{
	const char *paid =
	        "{\"id\":\"evt_8\",\"type\":\"checkout.session.completed\",\"data\":{\"object\":{"
	        "\"id\":\"cs_1\",\"payment_status\":\"paid\",\"client_reference_id\":\"ord_8\","
	        "\"amount_total\":5000,\"currency\":\"jpy\",\"payment_intent\":\"pi_8\"}}}";
	const char *unpaid =
	        "{\"id\":\"evt_9\",\"type\":\"checkout.session.completed\",\"data\":{\"object\":{"
	        "\"id\":\"cs_2\",\"payment_status\":\"unpaid\",\"client_reference_id\":\"ord_9\","
	        "\"amount_total\":5000,\"currency\":\"jpy\",\"payment_intent\":null}}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_signed(&pi, paid, SECRET_A, NOW, NOW, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(b.eb_events[0].ev_order_ref, "ord_8");
	assert_string_equal(b.eb_events[0].ev_payment_ref, "pi_8");
	assert_int_equal(b.eb_events[0].ev_amount, 5000);
	assert_string_equal(b.eb_events[0].ev_currency, "JPY");
	event_batch_finish(&b);
	assert_int_equal(receive_signed(&pi, unpaid, SECRET_A, NOW, NOW, &b, &v), 0);
	assert_int_equal(b.eb_events[0].ev_kind, EVENT_OTHER);
	assert_null(b.eb_events[0].ev_payment_ref);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

static void test_stripe_maps_charge_refunded_to_a_cumulative_refund(void **state)
{
	const char *no_list =
	        "{\"id\":\"evt_10\",\"type\":\"charge.refunded\",\"data\":{\"object\":{"
	        "\"id\":\"ch_10\",\"amount_refunded\":1999,\"currency\":\"usd\","
	        "\"metadata\":{\"order_id\":\"ord_10\"}}}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t len;
	char *body = read_fixture("charge_refunded.json", &len);
	const struct event *ev;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_signed(&pi, body, SECRET_A, NOW, NOW, &b, &v), 0);
	ev = &b.eb_events[0];
	assert_int_equal(ev->ev_kind, EVENT_REFUNDED);
	assert_int_equal(ev->ev_refund_cumulative, 1);
	assert_int_equal(ev->ev_amount, 500);
	assert_string_equal(ev->ev_currency, "EUR");
	assert_string_equal(ev->ev_refund_ref, "re_second");
	assert_string_equal(ev->ev_payment_ref, "pi_3PpiSucceeded0001");
	assert_string_equal(ev->ev_order_ref, "ord_0001");
	event_batch_finish(&b);
	assert_int_equal(receive_signed(&pi, no_list, SECRET_A, NOW, NOW, &b, &v), 0);
	assert_string_equal(b.eb_events[0].ev_refund_ref, "evt_10");
	assert_string_equal(b.eb_events[0].ev_payment_ref, "ch_10");
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
	free(body);
}

/* ---- the lifecycle: every event type that touches money ---- */

struct stripe_row {
	const char *sr_type;
	const char *sr_object; /* data.object */
	enum event_kind sr_kind;
	const char *sr_order;
	const char *sr_payment;
	const char *sr_charge;
	const char *sr_ref;
	int64_t sr_amount;
};

/* Receives one event of type with data.object obj; the batch is the caller's. */
static void receive_object(struct pt_instance *pi, const char *type, const char *obj,
                           struct event_batch *b)
{
	struct provider_verdict v;
	char body[2048];

	snprintf(body, sizeof(body),
	         "{\"id\":\"evt_row\",\"object\":\"event\",\"created\":1733130000,\"type\":\"%s\","
	         "\"data\":{\"object\":%s}}",
	         type, obj);
	assert_int_equal(receive_signed(pi, body, SECRET_A, NOW, NOW, b, &v), 0);
	assert_int_equal(b->eb_n, 1);
}

static void assert_ref(const char *got, const char *want)
{
	if (want == NULL) {
		assert_null(got);
	} else {
		assert_non_null(got);
		assert_string_equal(got, want);
	}
}

#define PI_OBJ(extra)                                                                              \
	"{\"id\":\"pi_1\",\"object\":\"payment_intent\",\"amount\":1999,\"currency\":\"usd\","     \
	"\"latest_charge\":\"ch_1\",\"metadata\":{\"order_id\":\"ord_1\"}" extra "}"
#define REFUND_OBJ(status)                                                                         \
	"{\"id\":\"re_1\",\"object\":\"refund\",\"amount\":500,\"currency\":\"usd\","              \
	"\"charge\":\"ch_1\",\"payment_intent\":\"pi_1\",\"metadata\":{},\"status\":\"" status     \
	"\"}"
#define DISPUTE_OBJ(status)                                                                        \
	"{\"id\":\"dp_1\",\"object\":\"dispute\",\"amount\":1999,\"currency\":\"usd\","            \
	"\"charge\":\"ch_1\",\"payment_intent\":\"pi_1\",\"metadata\":{},\"status\":\"" status     \
	"\"}"
#define SESSION_OBJ(extra)                                                                         \
	"{\"id\":\"cs_1\",\"object\":\"checkout.session\",\"amount_total\":1999,"                  \
	"\"currency\":\"usd\",\"client_reference_id\":\"ord_1\",\"payment_intent\":\"pi_1\","      \
	"\"metadata\":{}" extra "}"

static const struct stripe_row stripe_rows[] = {
        {"payment_intent.succeeded", PI_OBJ(",\"amount_received\":1999"), EVENT_PAYMENT_SUCCEEDED,
         "ord_1", "pi_1", "ch_1", NULL, 1999},
        {"payment_intent.amount_capturable_updated", PI_OBJ(",\"amount_capturable\":1999"),
         EVENT_PAYMENT_AUTHORIZED, "ord_1", "pi_1", "ch_1", NULL, 1999},
        {"payment_intent.canceled", PI_OBJ(""), EVENT_PAYMENT_CANCELLED, "ord_1", "pi_1", "ch_1",
         NULL, 1999},
        {"payment_intent.payment_failed", PI_OBJ(""), EVENT_OTHER, "ord_1", "pi_1", "ch_1", NULL,
         1999},
        {"checkout.session.completed", SESSION_OBJ(",\"payment_status\":\"paid\""),
         EVENT_PAYMENT_SUCCEEDED, "ord_1", "pi_1", NULL, NULL, 1999},
        {"checkout.session.async_payment_succeeded", SESSION_OBJ(",\"payment_status\":\"paid\""),
         EVENT_PAYMENT_SUCCEEDED, "ord_1", "pi_1", NULL, NULL, 1999},
        {"checkout.session.async_payment_failed", SESSION_OBJ(",\"payment_status\":\"unpaid\""),
         EVENT_OTHER, "ord_1", "pi_1", NULL, NULL, 1999},
        {"checkout.session.expired", SESSION_OBJ(",\"payment_status\":\"unpaid\""),
         EVENT_PAYMENT_EXPIRED, "ord_1", "pi_1", NULL, NULL, 1999},
        /* Checkout: the charge carries no order id, only its PaymentIntent. */
        {"charge.refunded",
         "{\"id\":\"ch_1\",\"object\":\"charge\",\"amount\":1999,\"amount_refunded\":500,"
         "\"currency\":\"usd\",\"payment_intent\":\"pi_1\",\"metadata\":{}}",
         EVENT_REFUNDED, NULL, "pi_1", "ch_1", "evt_row", 500},
        {"charge.refund.updated", REFUND_OBJ("failed"), EVENT_REFUND_FAILED, NULL, "pi_1", "ch_1",
         "re_1", 500},
        {"charge.refund.updated", REFUND_OBJ("succeeded"), EVENT_OTHER, NULL, "pi_1", "ch_1", NULL,
         500},
        {"refund.updated", REFUND_OBJ("canceled"), EVENT_REFUND_FAILED, NULL, "pi_1", "ch_1",
         "re_1", 500},
        {"refund.failed", REFUND_OBJ("failed"), EVENT_REFUND_FAILED, NULL, "pi_1", "ch_1", "re_1",
         500},
        {"refund.created", REFUND_OBJ("succeeded"), EVENT_OTHER, NULL, "pi_1", "ch_1", NULL, 500},
        {"charge.dispute.created", DISPUTE_OBJ("needs_response"), EVENT_DISPUTE_OPENED, NULL,
         "pi_1", "ch_1", "dp_1", 1999},
        {"charge.dispute.created", DISPUTE_OBJ("warning_needs_response"), EVENT_OTHER, NULL, "pi_1",
         "ch_1", NULL, 1999},
        {"charge.dispute.funds_withdrawn", DISPUTE_OBJ("needs_response"), EVENT_DISPUTE_OPENED,
         NULL, "pi_1", "ch_1", "dp_1", 1999},
        {"charge.dispute.updated", DISPUTE_OBJ("under_review"), EVENT_OTHER, NULL, "pi_1", "ch_1",
         NULL, 1999},
        {"charge.dispute.funds_reinstated", DISPUTE_OBJ("won"), EVENT_DISPUTE_WON, NULL, "pi_1",
         "ch_1", "dp_1", 1999},
        {"charge.dispute.closed", DISPUTE_OBJ("won"), EVENT_DISPUTE_WON, NULL, "pi_1", "ch_1",
         "dp_1", 1999},
        {"charge.dispute.closed", DISPUTE_OBJ("lost"), EVENT_DISPUTE_LOST, NULL, "pi_1", "ch_1",
         "dp_1", 1999},
        {"charge.dispute.closed", DISPUTE_OBJ("warning_closed"), EVENT_OTHER, NULL, "pi_1", "ch_1",
         NULL, 1999},
};

static void test_stripe_maps_every_event_type_that_touches_money(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	size_t i;

	(void)state;
	make_instance(&pi);
	for (i = 0; i < sizeof(stripe_rows) / sizeof(stripe_rows[0]); i++) {
		const struct stripe_row *r = &stripe_rows[i];
		const struct event *ev;

		receive_object(&pi, r->sr_type, r->sr_object, &b);
		ev = &b.eb_events[0];
		print_message("%s %s\n", r->sr_type, event_kind_name(r->sr_kind));
		assert_int_equal(ev->ev_kind, r->sr_kind);
		assert_ref(ev->ev_order_ref, r->sr_order);
		assert_ref(ev->ev_payment_ref, r->sr_payment);
		assert_ref(ev->ev_charge_ref, r->sr_charge);
		assert_ref(ev->ev_refund_ref, r->sr_ref);
		assert_int_equal(ev->ev_amount, r->sr_amount);
		assert_string_equal(ev->ev_currency, "USD");
		assert_int_equal(ev->ev_occurred_ms, 1733130000000LL);
		event_batch_finish(&b);
	}
	pt_instance_destroy(&pi);
}

static void test_stripe_counts_isk_in_hundredths_and_other_currencies_as_iso(void **state)
{
	static const struct {
		const char *currency;
		int64_t stripe;
		int64_t iso; /* -1: refused */
	} cases[] = {
	        {"isk", 50000, 500},   {"isk", 50050, -1},  {"huf", 199950, 199950},
	        {"twd", 12345, 12345}, {"ugx", 5000, 5000}, {"jpy", 500, 500},
	        {"kwd", 1230, 1230},   {"usd", 1999, 1999},
	};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	size_t i;

	(void)state;
	make_instance(&pi);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char body[512];
		int rc;

		snprintf(body, sizeof(body),
		         "{\"id\":\"evt_m\",\"type\":\"payment_intent.succeeded\",\"data\":{"
		         "\"object\":{"
		         "\"id\":\"pi_m\",\"amount_received\":%lld,\"currency\":\"%s\"}}}",
		         (long long)cases[i].stripe, cases[i].currency);
		rc = receive_signed(&pi, body, SECRET_A, NOW, NOW, &b, &v);
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

static void test_stripe_refuses_a_currency_iso_4217_does_not_list(void **state)
{
	const char *body = "{\"id\":\"evt_q\",\"type\":\"payment_intent.succeeded\",\"data\":{"
	                   "\"object\":{\"id\":\"pi_q\",\"amount\":100,\"currency\":\"qqq\"}}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	assert_int_equal(receive_signed(&pi, body, SECRET_A, NOW, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 400);
	assert_string_equal(v.pv_reason, "malformed_body");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
}

/* Stripe sends every amount as a JSON integer: one given as a string of
 * digits is malformed, whichever amount the event type reads. */
static void test_stripe_refuses_an_amount_given_as_a_string(void **state)
{
	static const char *const bodies[] = {
	        "{\"id\":\"evt_s1\",\"type\":\"payment_intent.succeeded\",\"data\":{\"object\":{"
	        "\"id\":\"pi_s1\",\"amount\":\"1999\",\"currency\":\"usd\"}}}",
	        "{\"id\":\"evt_s2\",\"type\":\"payment_intent.succeeded\",\"data\":{\"object\":{"
	        "\"id\":\"pi_s2\",\"amount\":1999,\"amount_received\":\"1999\",\"currency\":"
	        "\"usd\"}}}",
	        "{\"id\":\"evt_s3\",\"type\":\"checkout.session.completed\",\"data\":{\"object\":{"
	        "\"id\":\"cs_s3\",\"object\":\"checkout.session\",\"payment_status\":\"paid\","
	        "\"amount_total\":\"1999\",\"currency\":\"usd\"}}}",
	        "{\"id\":\"evt_s4\",\"type\":\"charge.refunded\",\"data\":{\"object\":{"
	        "\"id\":\"ch_s4\",\"object\":\"charge\",\"amount\":1999,\"amount_refunded\":"
	        "\"500\",\"currency\":\"usd\"}}}",
	};

	(void)state;
	assert_bodies_refused(bodies, NULL, sizeof(bodies) / sizeof(bodies[0]));
}

static void fingerprint_of(struct pt_instance *pi, const char *body,
                           unsigned char out[EVENT_FINGERPRINT_LEN])
{
	struct event_batch b;
	struct provider_verdict v;

	assert_int_equal(receive_signed(pi, body, SECRET_A, NOW, NOW, &b, &v), 0);
	memcpy(out, b.eb_events[0].ev_fingerprint, EVENT_FINGERPRINT_LEN);
	event_batch_finish(&b);
}

static void test_stripe_fingerprint_ignores_pending_webhooks_and_request(void **state)
{
	const char *first =
	        "{\"id\":\"evt_11\",\"type\":\"payment_intent.succeeded\",\"pending_webhooks\":1,"
	        "\"request\":{\"id\":\"req_1\"},\"data\":{\"object\":{\"id\":\"pi_1\",\"amount\":"
	        "100,"
	        "\"currency\":\"usd\",\"metadata\":{\"order_id\":\"o\",\"note\":\"n\"}}}}";
	/* A retry: volatile fields differ, keys come in another order and spacing. */
	const char *retry =
	        "{ \"request\": {\"id\": null, \"idempotency_key\": null}, \"pending_webhooks\": 3,"
	        "\"data\": {\"object\": {\"metadata\": {\"note\": \"n\", \"order_id\": \"o\"},"
	        "\"currency\": \"usd\", \"amount\": 100, \"id\": \"pi_1\"}},"
	        "\"type\": \"payment_intent.succeeded\", \"id\": \"evt_11\"}";
	const char *changed =
	        "{\"id\":\"evt_11\",\"type\":\"payment_intent.succeeded\",\"pending_webhooks\":1,"
	        "\"request\":{\"id\":\"req_1\"},\"data\":{\"object\":{\"id\":\"pi_1\",\"amount\":"
	        "101,"
	        "\"currency\":\"usd\",\"metadata\":{\"order_id\":\"o\",\"note\":\"n\"}}}}";
	unsigned char a[EVENT_FINGERPRINT_LEN];
	unsigned char b[EVENT_FINGERPRINT_LEN];
	unsigned char c[EVENT_FINGERPRINT_LEN];
	struct pt_instance pi;

	(void)state;
	make_instance(&pi);
	fingerprint_of(&pi, first, a);
	fingerprint_of(&pi, retry, b);
	fingerprint_of(&pi, changed, c);
	assert_memory_equal(a, b, EVENT_FINGERPRINT_LEN);
	assert_memory_not_equal(a, c, EVENT_FINGERPRINT_LEN);
	pt_instance_destroy(&pi);
}

static void test_stripe_sign_produces_a_header_the_profile_accepts(void **state)
{
	const char *body = "{\"id\":\"evt_12\",\"type\":\"x\",\"data\":{\"object\":{}}}";
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;
	char expect[160];
	char v1[65];

	(void)state;
	make_instance(&pi);
	pt_request_init(&r, body, strlen(body));
	assert_int_equal(provider_stripe.p_sign(&pi.pi_conf, body, strlen(body), NOW, "evt_12",
	                                        pt_add_header, &r, &pt_sign_why),
	                 0);
	assert_int_equal(r.pr_req.hr_n_headers, 1);
	assert_string_equal(r.pr_headers[0].hh_name, "Stripe-Signature");
	v1_for(SECRET_A, NOW, body, v1);
	snprintf(expect, sizeof(expect), "t=%d,v1=%s", NOW, v1);
	assert_string_equal(r.pr_headers[0].hh_value, expect);
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), 0);
	event_batch_finish(&b);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

/* Two Stripe-Signature fields, even a valid one first: which one Stripe
 * sent is unknown (RFC 9110 5.3), so neither is taken. */
static void test_stripe_refuses_a_repeated_stripe_signature_with_400(void **state)
{
	const char *body = "{\"id\":\"evt_13\",\"type\":\"x\",\"data\":{\"object\":{}}}";
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi);
	pt_request_init(&r, body, strlen(body));
	assert_int_equal(provider_stripe.p_sign(&pi.pi_conf, body, strlen(body), NOW, "evt_13",
	                                        pt_add_header, &r, &pt_sign_why),
	                 0);
	assert_int_equal(pt_receive(&pi, &r, NOW, &b, &v), 0);
	event_batch_finish(&b);
	assert_int_equal(pt_repeats_not_refused(&pi, &r, NOW), 0);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

static void test_stripe_ack_says_accepted_with_the_order_id(void **state)
{
	struct event ev;
	struct event_outcome out = {0, NULL, "ord_1", "paid"};
	struct event_outcome refused = {1, "unknown_order", NULL, NULL};
	struct provider_conf pc = {.pc_provider = &provider_stripe};
	struct reply r;

	(void)state;
	memset(&ev, 0, sizeof(ev));
	reply_init(&r);
	assert_int_equal(provider_stripe.p_ack(NULL, &ev, &out, &r), 0);
	assert_int_equal(r.reply_status, 200);
	assert_string_equal(r.reply_content_type, "application/json");
	assert_string_equal(r.reply_body,
	                    "{\"received\":true,\"order_id\":\"ord_1\",\"outcome\":\"paid\"}\n");
	reply_finish(&r);
	assert_int_equal(provider_stripe.p_ack(NULL, &ev, &refused, &r), 0);
	assert_string_equal(r.reply_body, "{\"received\":true,\"order_id\":null,\"outcome\":"
	                                  "\"refused\",\"reason\":\"unknown_order\"}\n");
	reply_finish(&r);
	/* No format of its own: a problem titled by its status. */
	assert_null(provider_stripe.p_error);
	assert_int_equal(provider_error(&pc, 401, "bad_signature", "x", &r), 0);
	assert_int_equal(r.reply_status, 401);
	assert_string_equal(r.reply_content_type, "application/problem+json");
	assert_non_null(strstr(r.reply_body, "\"Callback authentication failed\""));
	reply_finish(&r);
}

static void test_stripe_refuses_a_config_without_secret(void **state)
{
	const char *kv[] = {"type", "stripe", NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, kv), -1);
}

static void test_stripe_reads_secrets_from_env_specs(void **state)
{
	const char *kv[] = {"secret", "env:IDEMHOOK_TEST_STRIPE_SECRET", NULL};
	const char *body = "{\"id\":\"evt_13\",\"type\":\"x\",\"data\":{\"object\":{}}}";
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	setenv("IDEMHOOK_TEST_STRIPE_SECRET", "whsec_from_env", 1);
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, kv), 0);
	assert_int_equal(receive_signed(&pi, body, "whsec_from_env", NOW, NOW, &b, &v), 0);
	event_batch_finish(&b);
	pt_instance_destroy(&pi);
}

/* ---- thin events (event destinations) ---- */

#define THIN_BODY                                                                                  \
	"{\"id\":\"evt_thin_1\",\"object\":\"v2.core.event\",\"type\":\"v1.payment_intent.succeeded\","  \
	"\"created\":\"2024-12-02T09:01:40.000Z\",\"livemode\":false,\"context\":null,"                 \
	"\"related_object\":{\"id\":\"pi_thin_1\",\"type\":\"payment_intent\","                         \
	"\"url\":\"/v1/payment_intents/pi_thin_1\"}}"

static void test_stripe_takes_a_thin_event_as_one_to_fetch_keyed_by_its_id(void **state)
{
	const char *kv[] = {"type", "stripe", "secret", SECRET_A, "api_key", "rk_test_thin", NULL};
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;
	const struct event *ev;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, kv), 0);
	assert_int_equal(receive_signed(&pi, THIN_BODY, SECRET_A, NOW, NOW, &b, &v), 0);
	assert_int_equal(b.eb_n, 1);
	ev = &b.eb_events[0];
	assert_int_equal(ev->ev_fetch, 1);
	assert_string_equal(ev->ev_key, "evt_thin_1");
	assert_string_equal(ev->ev_type, "v1.payment_intent.succeeded");
	assert_int_equal(ev->ev_kind, EVENT_OTHER);
	assert_string_equal(ev->ev_payment_ref, "pi_thin_1");
	assert_null(ev->ev_order_ref);
	assert_int_equal(ev->ev_amount, -1);
	event_batch_finish(&b);
	/* The same scheme as a snapshot: a wrong secret is refused. */
	assert_int_equal(receive_signed(&pi, THIN_BODY, "whsec_wrong", NOW, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 401);
	assert_string_equal(v.pv_reason, "bad_signature");
	pt_instance_destroy(&pi);
}

static void test_stripe_refuses_a_thin_event_it_could_not_fetch_with_503(void **state)
{
	struct pt_instance pi;
	struct event_batch b;
	struct provider_verdict v;

	(void)state;
	make_instance(&pi); /* no api_key */
	assert_int_equal(receive_signed(&pi, THIN_BODY, SECRET_A, NOW, NOW, &b, &v), -1);
	assert_int_equal(v.pv_status, 503);
	assert_string_equal(v.pv_reason, "fetch_unconfigured");
	assert_int_equal(b.eb_n, 0);
	pt_instance_destroy(&pi);
}

static int fetch_answer(struct pt_instance *pi, long status, const char *body, struct provider_answer *a)
{
	struct provider_query q;
	struct httpc_response resp;

	memset(&q, 0, sizeof(q));
	q.pq_event_id = "evt_thin_1";
	memset(&resp, 0, sizeof(resp));
	resp.hcr_status = status;
	resp.hcr_body = (char *)body;
	resp.hcr_body_len = strlen(body);
	provider_answer_init(a);
	return pi->pi_conf.pc_provider->p_reconcile_answer(&pi->pi_conf, &q, &resp, NOW, a);
}

static void test_stripe_reads_a_fetched_thin_event_as_its_snapshot_would_be(void **state)
{
	const char *kv[] = {"type", "stripe", "secret", SECRET_A, "api_key", "rk_test_thin",
	                    "api_base_url", "http://127.0.0.1:9", NULL};
	const char *full =
	        "{\"id\":\"evt_thin_1\",\"object\":\"v2.core.event\",\"type\":"
	        "\"v1.payment_intent.succeeded\",\"created\":\"2024-12-02T09:01:40.000Z\","
	        "\"data\":{\"object\":{\"id\":\"pi_thin_1\",\"object\":\"payment_intent\",\"amount\":1999,"
	        "\"amount_received\":1999,\"currency\":\"usd\",\"status\":\"succeeded\","
	        "\"metadata\":{\"order_id\":\"ord_0001\"}}}}";
	const char *other = "{\"id\":\"evt_other\",\"object\":\"v2.core.event\",\"type\":\"x\",\"data\":{}}";
	struct pt_instance pi;
	struct provider_request req;
	struct provider_query q;
	struct provider_answer a;
	const struct event *ev;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, kv), 0);
	memset(&q, 0, sizeof(q));
	q.pq_event_id = "evt_thin_1";
	provider_request_init(&req);
	assert_int_equal(provider_stripe.p_reconcile_request(&pi.pi_conf, &q, NOW, &req), 0);
	assert_string_equal(req.prq_method, "GET");
	assert_string_equal(req.prq_url.buf_data, "http://127.0.0.1:9/v2/core/events/evt_thin_1");
	provider_request_finish(&req);
	assert_int_equal(fetch_answer(&pi, 200, full, &a), 0);
	assert_int_equal(a.pa_events.eb_n, 1);
	ev = &a.pa_events.eb_events[0];
	assert_int_equal(ev->ev_fetch, 0);
	assert_string_equal(ev->ev_key, "evt_thin_1");
	assert_int_equal(ev->ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(ev->ev_order_ref, "ord_0001");
	assert_string_equal(ev->ev_payment_ref, "pi_thin_1");
	assert_int_equal(ev->ev_amount, 1999);
	assert_int_equal(ev->ev_occurred_ms, (int64_t)NOW * 1000);
	provider_answer_finish(&a);
	/* Another event than the one asked for, or none: nothing to apply. */
	assert_int_equal(fetch_answer(&pi, 200, other, &a), -1);
	assert_string_equal(a.pa_reason, "malformed_answer");
	assert_int_equal(a.pa_events.eb_n, 0);
	provider_answer_finish(&a);
	assert_int_equal(fetch_answer(&pi, 404, "{\"error\":{\"message\":\"No such event\"}}", &a), -1);
	assert_string_equal(a.pa_reason, "not_found");
	provider_answer_finish(&a);
	pt_instance_destroy(&pi);
}

/* ---- the canonical JSON of the fingerprint ---- */

/* The canonical JSON as it was built before (numbers by
 * cJSON_PrintUnformatted, members sorted in a heap array): the reference
 * the fingerprints stored so far were made with. */
struct ref_member {
	const cJSON *rm_item;
	size_t rm_index;
};

static int ref_member_cmp(const void *a, const void *b)
{
	const struct ref_member *x = a;
	const struct ref_member *y = b;
	int c = strcmp(x->rm_item->string, y->rm_item->string);

	return c != 0 ? c : x->rm_index < y->rm_index ? -1 : 1;
}

static void ref_canonical(const cJSON *item, struct buf *b)
{
	const cJSON *c;
	struct ref_member *m;
	size_t n = 0;
	size_t i;
	char *text;

	if (cJSON_IsObject(item)) {
		for (c = item->child; c != NULL; c = c->next) {
			n++;
		}
		m = calloc(n + 1, sizeof(*m));
		assert_non_null(m);
		n = 0;
		for (c = item->child; c != NULL; c = c->next) {
			m[n].rm_item = c;
			m[n].rm_index = n;
			n++;
		}
		qsort(m, n, sizeof(*m), ref_member_cmp);
		buf_puts(b, "{");
		for (i = 0; i < n; i++) {
			if (i > 0) {
				buf_puts(b, ",");
			}
			buf_json_string(b, m[i].rm_item->string);
			buf_puts(b, ":");
			ref_canonical(m[i].rm_item, b);
		}
		buf_puts(b, "}");
		free(m);
	} else if (cJSON_IsArray(item)) {
		buf_puts(b, "[");
		for (c = item->child; c != NULL; c = c->next) {
			if (c != item->child) {
				buf_puts(b, ",");
			}
			ref_canonical(c, b);
		}
		buf_puts(b, "]");
	} else if (cJSON_IsString(item)) {
		buf_json_string(b, item->valuestring);
	} else if (cJSON_IsNumber(item)) {
		text = cJSON_PrintUnformatted(item);
		assert_non_null(text);
		buf_puts(b, text);
		cJSON_free(text);
	} else if (cJSON_IsTrue(item)) {
		buf_puts(b, "true");
	} else if (cJSON_IsFalse(item)) {
		buf_puts(b, "false");
	} else {
		buf_puts(b, "null");
	}
}

static void assert_canonical_as_before(const cJSON *item)
{
	struct buf now;
	struct buf ref;

	buf_init(&now, 0);
	buf_init(&ref, 0);
	assert_int_equal(provider_json_canonical(item, &now), 0);
	ref_canonical(item, &ref);
	if (now.buf_len != ref.buf_len || memcmp(now.buf_data, ref.buf_data, now.buf_len) != 0) {
		fail_msg("canonical JSON differs: %.*s against %.*s", (int)now.buf_len,
		         now.buf_data, (int)ref.buf_len, ref.buf_data);
	}
	buf_finish(&now);
	buf_finish(&ref);
}

/* Numbers are printed without cJSON's printer now, and objects sorted on
 * the stack: the bytes (stored fingerprints depend on them) are those of
 * before, for edge cases and 200,000 random numbers. */
static void test_json_canonical_numbers_print_as_cjson_prints_them(void **state)
{
	static const char *const texts[] = {"0",
	                                    "-0",
	                                    "1",
	                                    "-1",
	                                    "2147483647",
	                                    "2147483648",
	                                    "-2147483648",
	                                    "-2147483649",
	                                    "1700000000000",
	                                    "999999999999999",
	                                    "1000000000000000",
	                                    "-999999999999999",
	                                    "-1000000000000000",
	                                    "9007199254740993",
	                                    "12345678901234567890",
	                                    "1e15",
	                                    "1e16",
	                                    "0.1",
	                                    "1.5",
	                                    "-2.25",
	                                    "1e300",
	                                    "-1e-300",
	                                    "3.141592653589793",
	                                    "0.30000000000000004",
	                                    "123456.789",
	                                    "1E+2",
	                                    "5e-324",
	                                    "1.7976931348623157e308",
	                                    "100.0",
	                                    "4.35",
	                                    "19.99",
	                                    "0.000001",
	                                    "1e-7",
	                                    "123456789012345.6",
	                                    "2.5e-5"};
	unsigned seed = 24;
	cJSON *n;
	size_t i;
	uint64_t bits;
	double d;

	(void)state;
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		n = cJSON_Parse(texts[i]);
		assert_non_null(n);
		assert_canonical_as_before(n);
		cJSON_Delete(n);
	}
	for (i = 0; i < 200000; i++) {
		switch (i % 4) {
		case 0: /* any bits */
			bits = (uint64_t)rand_r(&seed) << 33 ^ (uint64_t)rand_r(&seed) << 11 ^
			       (uint64_t)rand_r(&seed);
			memcpy(&d, &bits, sizeof(d));
			break;
		case 1: /* whole numbers of every size */
			d = floor((double)rand_r(&seed) * pow(10, rand_r(&seed) % 12));
			break;
		case 2: /* cents and the like */
			d = (double)(rand_r(&seed) % 1000000) / pow(10, rand_r(&seed) % 7);
			break;
		default: /* negative, scaled */
			d = -(double)rand_r(&seed) * pow(10, rand_r(&seed) % 40 - 20);
			break;
		}
		n = cJSON_CreateNumber(d);
		assert_non_null(n);
		assert_canonical_as_before(n);
		cJSON_Delete(n);
	}
}

/* Nested objects and arrays, unicode and escapes, duplicate names, an
 * object larger than the members sorted on the stack. */
static void test_json_canonical_of_nested_documents_is_as_before(void **state)
{
	static const char *const docs[] = {
	        "{}",
	        "[]",
	        "{\"b\":1,\"a\":[1.5,{\"z\":1700000000000,\"a\":\"\\u00e9\\u2603\"}],"
	        "\"\":null,\"c\":true,\"d\":false}",
	        "{\"a\":1,\"a\":2,\"A\":3,\"\\u0000x\":\"\\\"\\\\\\n\\t\\u001f\"}",
	        "[[[[{\"k\":[-0.0,1e-7,\"\\ud83d\\ude00\"]}]]]]",
	        "{\"amount\":1999,\"created\":1733130100,\"metadata\":{\"order_id\":\"ord_1\"},"
	        "\"rate\":0.0725,\"big\":12345678901234567890}"};
	struct buf big;
	cJSON *doc;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		doc = cJSON_Parse(docs[i]);
		assert_non_null(doc);
		assert_canonical_as_before(doc);
		cJSON_Delete(doc);
	}
	buf_init(&big, 0);
	buf_puts(&big, "{");
	for (i = 0; i < 100; i++) {
		buf_printf(&big, "%s\"k%03zu\":%zu.5", i > 0 ? "," : "", (i * 37) % 100, i);
	}
	buf_puts(&big, "}");
	doc = cJSON_ParseWithLength(big.buf_data, big.buf_len);
	assert_non_null(doc);
	assert_canonical_as_before(doc);
	cJSON_Delete(doc);
	buf_finish(&big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_stripe_accepts_a_signed_payment_intent_succeeded),
	        cmocka_unit_test(test_stripe_takes_a_thin_event_as_one_to_fetch_keyed_by_its_id),
	        cmocka_unit_test(test_stripe_refuses_a_thin_event_it_could_not_fetch_with_503),
	        cmocka_unit_test(test_stripe_reads_a_fetched_thin_event_as_its_snapshot_would_be),
	        cmocka_unit_test(test_stripe_accepts_a_second_secret_during_rotation),
	        cmocka_unit_test(test_stripe_accepts_any_matching_v1_and_ignores_v0),
	        cmocka_unit_test(test_stripe_rejects_timestamp_older_than_tolerance),
	        cmocka_unit_test(
	                test_stripe_rejects_timestamp_further_in_the_future_than_tolerance),
	        cmocka_unit_test(test_stripe_rejects_missing_and_malformed_headers_with_400),
	        cmocka_unit_test(test_stripe_rejects_a_body_changed_by_one_byte),
	        cmocka_unit_test(test_stripe_rejects_signed_bodies_that_are_not_events),
	        cmocka_unit_test(test_stripe_maps_checkout_session_completed_only_when_paid),
	        cmocka_unit_test(test_stripe_maps_charge_refunded_to_a_cumulative_refund),
	        cmocka_unit_test(test_stripe_fingerprint_ignores_pending_webhooks_and_request),
	        cmocka_unit_test(test_stripe_sign_produces_a_header_the_profile_accepts),
	        cmocka_unit_test(test_stripe_refuses_a_repeated_stripe_signature_with_400),
	        cmocka_unit_test(test_stripe_maps_every_event_type_that_touches_money),
	        cmocka_unit_test(test_stripe_counts_isk_in_hundredths_and_other_currencies_as_iso),
	        cmocka_unit_test(test_stripe_refuses_a_currency_iso_4217_does_not_list),
	        cmocka_unit_test(test_stripe_refuses_an_amount_given_as_a_string),
	        cmocka_unit_test(test_stripe_ack_says_accepted_with_the_order_id),
	        cmocka_unit_test(test_stripe_refuses_a_config_without_secret),
	        cmocka_unit_test(test_stripe_reads_secrets_from_env_specs),
	        cmocka_unit_test(test_json_canonical_numbers_print_as_cjson_prints_them),
	        cmocka_unit_test(test_json_canonical_of_nested_documents_is_as_before),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
