/* test_reconcile.c: unit tests for the profiles' reconciliation: the
 * requests they build (signed as each provider checks) and how they read
 * answers (signed as each provider signs, with keys generated at test time;
 * wrongly signed ones refused). No network here: test_reconcile_e2e.c
 * sends them to provider fakes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "config.h"
#include "crypto.h"
#include "httpc.h"
#include "provider_test.h"
#include "reconcile.h"
#include "text.h"

extern const struct provider provider_adyen;
extern const struct provider provider_alipay;
extern const struct provider provider_hmac;
extern const struct provider provider_standard_webhooks;
extern const struct provider provider_stripe;
extern const struct provider provider_wechatpay;

#define T_NOW 1764680400 /* 2025-12-02T13:00:00Z */
#define T_APP_ID "2021001144680325"
#define T_MCHID "1900000001"
#define T_PLATFORM_SERIAL "PUB_KEY_ID_0114232134912410000000000000"
#define T_MERCHANT_SERIAL "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
#define T_APIV3 "0123456789abcdef0123456789abcdef"
#define T_WHSEC "whsec_reconcile_unit_secret"

/* Two key pairs: the provider's (signs answers) and ours (signs requests). */
static char *provider_priv;
static char *provider_pub;
static char *our_priv;
static char *our_pub;

static int setup(void **state)
{
	(void)state;
	if (crypto_rsa_generate(2048, &provider_priv, &provider_pub) < 0 ||
	    crypto_rsa_generate(2048, &our_priv, &our_pub) < 0) {
		return -1;
	}
	setenv("T_PROVIDER_PUB", provider_pub, 1);
	setenv("T_OUR_PRIV", our_priv, 1);
	setenv("T_OUR_PUB", our_pub, 1);
	setenv("T_APIV3", T_APIV3, 1);
	setenv("T_STRIPE_KEY", "rk_test_reconcile", 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(provider_priv);
	free(provider_pub);
	free(our_priv);
	free(our_pub);
	return 0;
}

/* base64 SHA256withRSA of text with the PEM private key. */
static char *sign_b64(const char *priv_pem, const char *text, size_t len)
{
	struct crypto_privkey *k = crypto_privkey_load(priv_pem, strlen(priv_pem));
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char *b64 = NULL;

	assert_non_null(k);
	assert_int_equal(crypto_rsa_sha256_sign(k, text, len, &sig, &sig_len), 0);
	assert_int_equal(crypto_base64_encode(sig, sig_len, &b64, NULL), 0);
	free(sig);
	crypto_privkey_destroy(k);
	return b64;
}

/* 1 when sig_b64 is pub_pem's signature of text. */
static int verifies(const char *pub_pem, const char *text, size_t len, const char *sig_b64)
{
	struct crypto_pubkey *k = crypto_pubkey_load(pub_pem, strlen(pub_pem));
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	int ok;

	assert_non_null(k);
	assert_int_equal(crypto_base64_decode(sig_b64, strlen(sig_b64), &sig, &sig_len), 0);
	ok = crypto_rsa_sha256_verify(k, text, len, sig, sig_len) == 1;
	free(sig);
	crypto_pubkey_destroy(k);
	return ok;
}

static void answer_of(struct httpc_response *r, long status, const char *body)
{
	memset(r, 0, sizeof(*r));
	r->hcr_status = status;
	r->hcr_body = strdup(body);
	r->hcr_body_len = strlen(body);
	httpc_headers_init(&r->hcr_headers);
}

static int ask(struct pt_instance *pi, const char *order, const struct httpc_response *resp,
               struct provider_answer *a)
{
	struct provider_query q;

	memset(&q, 0, sizeof(q));
	q.pq_order_id = order;
	provider_answer_init(a);
	return pi->pi_conf.pc_provider->p_reconcile_answer(&pi->pi_conf, &q, resp, T_NOW, a);
}

/* ---- who can be asked ---- */

static void test_adyen_and_generic_profiles_say_they_cannot_be_asked_and_what_to_do(void **state)
{
	const struct provider *none[] = {&provider_adyen, &provider_hmac,
	                                 &provider_standard_webhooks};
	struct provider_conf pc;
	const char *why = NULL;
	size_t i;

	(void)state;
	memset(&pc, 0, sizeof(pc));
	pc.pc_name = (char *)"x";
	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		pc.pc_provider = none[i];
		assert_non_null(none[i]->p_reconcile_mode);
		assert_int_equal(none[i]->p_reconcile_mode(&pc, &why), PROVIDER_RECONCILE_NONE);
		assert_non_null(why);
		assert_true(strlen(why) > 40);
	}
	pc.pc_provider = &provider_adyen;
	provider_adyen.p_reconcile_mode(&pc, &why);
	assert_non_null(strstr(why, "Customer Area"));
}

static void test_stripe_without_an_api_key_is_not_asked(void **state)
{
	const char *kv[] = {"secret", T_WHSEC, NULL};
	struct pt_instance pi;
	const char *why = NULL;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, kv), 0);
	assert_int_equal(provider_stripe.p_reconcile_mode(&pi.pi_conf, &why),
	                 PROVIDER_RECONCILE_NONE);
	assert_non_null(strstr(why, "api_key"));
	pt_instance_destroy(&pi);
}

static void test_api_base_urls_are_https_or_loopback_only(void **state)
{
	const char *clear[] = {"secret",
	                       T_WHSEC,
	                       "api_key",
	                       "env:T_STRIPE_KEY",
	                       "api_base_url",
	                       "http://api.example.com",
	                       NULL};
	const char *local[] = {"secret",
	                       T_WHSEC,
	                       "api_key",
	                       "env:T_STRIPE_KEY",
	                       "api_base_url",
	                       "http://127.0.0.1:8999/",
	                       NULL};
	const char *tls[] = {"secret",
	                     T_WHSEC,
	                     "api_key",
	                     "env:T_STRIPE_KEY",
	                     "api_base_url",
	                     "https://stripe.internal.example/proxy",
	                     NULL};
	struct pt_instance pi;

	(void)state;
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, clear), -1);
	pt_instance_destroy(&pi);
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, local), 0);
	pt_instance_destroy(&pi);
	assert_int_equal(pt_instance_create(&pi, &provider_stripe, tls), 0);
	pt_instance_destroy(&pi);
}

/* ---- Stripe: its own list of events ---- */

static void stripe_instance(struct pt_instance *pi, int undelivered_only)
{
	const char *kv[] = {"secret",
	                    T_WHSEC,
	                    "api_key",
	                    "env:T_STRIPE_KEY",
	                    "api_base_url",
	                    "http://127.0.0.1:1",
	                    "reconcile_undelivered_only",
	                    undelivered_only ? "yes" : "no",
	                    NULL};

	assert_int_equal(pt_instance_create(pi, &provider_stripe, kv), 0);
}

static void
test_stripe_lists_the_events_it_reads_in_the_window_with_the_restricted_key(void **state)
{
	struct pt_instance pi;
	struct provider_request req;
	struct provider_query q;
	const char *why = NULL;
	const char *url;

	(void)state;
	stripe_instance(&pi, 1);
	assert_int_equal(provider_stripe.p_reconcile_mode(&pi.pi_conf, &why),
	                 PROVIDER_RECONCILE_EVENTS);
	memset(&q, 0, sizeof(q));
	q.pq_since_s = 1764000000;
	q.pq_until_s = 1764600000;
	q.pq_cursor = "evt_last_of_page_1";
	provider_request_init(&req);
	assert_int_equal(provider_stripe.p_reconcile_request(&pi.pi_conf, &q, T_NOW, &req), 0);
	url = req.prq_url.buf_data;
	assert_string_equal(req.prq_method, "GET");
	assert_non_null(strstr(url, "http://127.0.0.1:1/v1/events?limit=100&"));
	assert_non_null(strstr(url, "created%5Bgte%5D=1764000000&created%5Blte%5D=1764600000"));
	assert_non_null(strstr(url, "types%5B%5D=payment_intent.succeeded&"));
	assert_non_null(strstr(url, "types%5B%5D=charge.refunded&"));
	assert_non_null(strstr(url, "&delivery_success=false"));
	assert_non_null(strstr(url, "&starting_after=evt_last_of_page_1"));
	assert_string_equal(httpc_headers_get(&req.prq_headers, "Authorization"),
	                    "Bearer rk_test_reconcile");
	provider_request_finish(&req);
	pt_instance_destroy(&pi);

	stripe_instance(&pi, 0);
	provider_request_init(&req);
	q.pq_cursor = NULL;
	assert_int_equal(provider_stripe.p_reconcile_request(&pi.pi_conf, &q, T_NOW, &req), 0);
	assert_null(strstr(req.prq_url.buf_data, "delivery_success"));
	assert_null(strstr(req.prq_url.buf_data, "starting_after"));
	provider_request_finish(&req);
	pt_instance_destroy(&pi);
}

#define T_STRIPE_PAID                                                                              \
	"{\"id\":\"evt_rec_paid\",\"object\":\"event\",\"created\":1764600000,\"type\":"           \
	"\"payment_intent.succeeded\",\"pending_webhooks\":0,\"data\":{\"object\":{\"id\":"        \
	"\"pi_rec\",\"object\":\"payment_intent\",\"amount\":1999,\"amount_received\":1999,"       \
	"\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"ord_rec\"}}}}"
#define T_STRIPE_REFUND                                                                            \
	"{\"id\":\"evt_rec_refund\",\"object\":\"event\",\"created\":1764600100,\"type\":"         \
	"\"charge.refunded\",\"data\":{\"object\":{\"id\":\"ch_rec\",\"object\":\"charge\","       \
	"\"amount\":1999,\"amount_refunded\":500,\"currency\":\"usd\",\"payment_intent\":"         \
	"\"pi_rec\",\"refunds\":{\"data\":[{\"id\":\"re_rec\"}]}}}}"

static void test_stripe_reads_a_listed_event_as_its_webhook_same_key_and_fingerprint(void **state)
{
	/* What Stripe delivered, with webhook-only noise that is no fact. */
	const char *delivered =
	        "{\"id\":\"evt_rec_paid\",\"object\":\"event\",\"created\":1764600000,\"type\":"
	        "\"payment_intent.succeeded\",\"pending_webhooks\":2,\"request\":{\"id\":null},"
	        "\"data\":{\"object\":{\"id\":\"pi_rec\",\"object\":\"payment_intent\",\"amount\":"
	        "1999,\"amount_received\":1999,\"currency\":\"usd\",\"status\":\"succeeded\","
	        "\"metadata\":{\"order_id\":\"ord_rec\"}}}}";
	struct pt_instance pi;
	struct pt_request r;
	struct event_batch hook;
	struct provider_verdict v;
	struct httpc_response resp;
	struct provider_answer a;
	char header[200];
	unsigned char mac[CRYPTO_HMAC_MAX];
	char hex[2 * CRYPTO_SHA256_LEN + 1];
	size_t mac_len = 0;
	struct buf signed_text;
	const struct event *ev;

	(void)state;
	stripe_instance(&pi, 0);
	buf_init(&signed_text, 0);
	buf_printf(&signed_text, "%d.%s", T_NOW, delivered);
	assert_int_equal(crypto_hmac(CRYPTO_SHA256, T_WHSEC, strlen(T_WHSEC), signed_text.buf_data,
	                             signed_text.buf_len, mac, &mac_len),
	                 0);
	crypto_hex_encode(mac, mac_len, hex);
	buf_finish(&signed_text);
	snprintf(header, sizeof(header), "t=%d,v1=%s", T_NOW, hex);
	pt_request_init(&r, delivered, strlen(delivered));
	pt_request_header(&r, "Stripe-Signature", header);
	assert_int_equal(pt_receive(&pi, &r, T_NOW, &hook, &v), 0);

	answer_of(&resp, 200,
	          "{\"object\":\"list\",\"url\":\"/v1/events\",\"has_more\":true,\"data\":"
	          "[" T_STRIPE_REFUND "," T_STRIPE_PAID "]}");
	assert_int_equal(ask(&pi, NULL, &resp, &a), 0);
	assert_int_equal(a.pa_verdict, PROVIDER_ANSWER_OK);
	assert_int_equal(a.pa_events.eb_n, 2);
	ev = &a.pa_events.eb_events[1];
	assert_string_equal(ev->ev_key, hook.eb_events[0].ev_key);
	assert_memory_equal(ev->ev_fingerprint, hook.eb_events[0].ev_fingerprint,
	                    EVENT_FINGERPRINT_LEN);
	assert_int_equal(ev->ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(ev->ev_order_ref, "ord_rec");
	assert_int_equal(ev->ev_amount, 1999);
	assert_int_equal(ev->ev_occurred_ms, 1764600000000LL);
	ev = &a.pa_events.eb_events[0];
	assert_int_equal(ev->ev_kind, EVENT_REFUNDED);
	assert_string_equal(ev->ev_refund_ref, "re_rec");
	/* has_more: the next page starts after the page's last (oldest) id. */
	assert_string_equal(a.pa_cursor, "evt_rec_paid");

	provider_answer_finish(&a);
	httpc_response_finish(&resp);
	event_batch_finish(&hook);
	pt_request_finish(&r);
	pt_instance_destroy(&pi);
}

static void test_stripe_answers_a_refused_key_and_skips_an_unreadable_event(void **state)
{
	struct pt_instance pi;
	struct httpc_response resp;
	struct provider_answer a;

	(void)state;
	stripe_instance(&pi, 0);
	answer_of(&resp, 401,
	          "{\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Invalid API Key "
	          "provided\"}}");
	assert_int_equal(ask(&pi, NULL, &resp, &a), -1);
	assert_int_equal(a.pa_verdict, PROVIDER_ANSWER_FAILED);
	assert_string_equal(a.pa_reason, "unauthorized");
	assert_non_null(strstr(a.pa_detail, "Invalid API Key"));
	provider_answer_finish(&a);
	httpc_response_finish(&resp);

	answer_of(&resp, 200,
	          "{\"object\":\"list\",\"has_more\":false,\"data\":[{\"id\":\"evt_bad\",\"type\":"
	          "\"payment_intent.succeeded\",\"data\":{\"object\":{\"id\":\"pi_x\",\"amount\":"
	          "12,\"currency\":\"zzz\"}}}," T_STRIPE_PAID "]}");
	assert_int_equal(ask(&pi, NULL, &resp, &a), 0);
	assert_int_equal(a.pa_events.eb_n, 1);
	assert_string_equal(a.pa_events.eb_events[0].ev_key, "evt_rec_paid");
	assert_non_null(strstr(a.pa_note, "evt_bad"));
	assert_null(a.pa_cursor);
	provider_answer_finish(&a);
	httpc_response_finish(&resp);

	answer_of(&resp, 200, "{\"object\":\"event\"}");
	assert_int_equal(ask(&pi, NULL, &resp, &a), -1);
	assert_string_equal(a.pa_reason, "malformed_answer");
	provider_answer_finish(&a);
	httpc_response_finish(&resp);
	pt_instance_destroy(&pi);
}

/* ---- Alipay: alipay.trade.query ---- */

static void alipay_instance(struct pt_instance *pi)
{
	const char *kv[] = {"app_id",
	                    T_APP_ID,
	                    "public_key",
	                    "env:T_PROVIDER_PUB",
	                    "app_private_key",
	                    "env:T_OUR_PRIV",
	                    "gateway_url",
	                    "http://127.0.0.1:1/gateway.do",
	                    NULL};

	assert_int_equal(pt_instance_create(pi, &provider_alipay, kv), 0);
}

struct form_field {
	char *ff_k;
	char *ff_v;
};

static int form_field_cmp(const void *a, const void *b)
{
	return strcmp(((const struct form_field *)a)->ff_k, ((const struct form_field *)b)->ff_k);
}

/* Verifies a request form as Alipay's gateway does: every parameter but
 * sign, sorted, k=v joined with '&', RSA2 with the app's public key. Puts
 * the value of want (decoded) into *ret_want. */
static int alipay_request_verifies(const char *body, const char *want, char **ret_want)
{
	struct form_field f[32];
	size_t n = 0;
	char *sign = NULL;
	const char *p = body;
	struct buf text;
	size_t i;
	int ok;

	while (*p != '\0' && n < 32) {
		const char *amp = strchr(p, '&');
		size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		char *k;
		char *v;

		assert_non_null(eq);
		k = text_form_decode(p, (size_t)(eq - p));
		v = text_form_decode(eq + 1, len - (size_t)(eq - p) - 1);
		if (strcmp(k, "sign") == 0) {
			sign = v;
			free(k);
		} else {
			f[n].ff_k = k;
			f[n].ff_v = v;
			n++;
		}
		p += len + (amp != NULL);
	}
	qsort(f, n, sizeof(f[0]), form_field_cmp);
	buf_init(&text, 0);
	for (i = 0; i < n; i++) {
		buf_printf(&text, "%s%s=%s", i > 0 ? "&" : "", f[i].ff_k, f[i].ff_v);
		if (want != NULL && strcmp(f[i].ff_k, want) == 0) {
			*ret_want = strdup(f[i].ff_v);
		}
	}
	ok = sign != NULL && verifies(our_pub, text.buf_data, text.buf_len, sign);
	for (i = 0; i < n; i++) {
		free(f[i].ff_k);
		free(f[i].ff_v);
	}
	free(sign);
	buf_finish(&text);
	return ok;
}

static void test_alipay_signs_the_query_as_the_gateway_verifies_it_sign_type_included(void **state)
{
	struct pt_instance pi;
	struct provider_request req;
	struct provider_query q;
	const char *why = NULL;
	char *biz = NULL;
	char *sign_type = NULL;
	char *all;

	(void)state;
	alipay_instance(&pi);
	assert_int_equal(provider_alipay.p_reconcile_mode(&pi.pi_conf, &why),
	                 PROVIDER_RECONCILE_ORDERS);
	memset(&q, 0, sizeof(q));
	q.pq_order_id = "ord_alipay_q1";
	provider_request_init(&req);
	assert_int_equal(provider_alipay.p_reconcile_request(&pi.pi_conf, &q, T_NOW, &req), 0);
	assert_string_equal(req.prq_method, "POST");
	/* As Alipay's SDKs send it: the common parameters in the query string,
	 * biz_content in the form body; the signature covers them all. */
	assert_int_equal(strncmp(req.prq_url.buf_data, "http://127.0.0.1:1/gateway.do?app_id=", 37),
	                 0);
	assert_int_equal(strncmp(req.prq_body.buf_data, "biz_content=", 12), 0);
	all = malloc(req.prq_url.buf_len + req.prq_body.buf_len + 2);
	sprintf(all, "%s&%s", strchr(req.prq_url.buf_data, '?') + 1, req.prq_body.buf_data);
	assert_true(alipay_request_verifies(all, "biz_content", &biz));
	assert_string_equal(biz, "{\"out_trade_no\":\"ord_alipay_q1\"}");
	assert_true(alipay_request_verifies(all, "sign_type", &sign_type));
	assert_string_equal(sign_type, "RSA2");
	assert_non_null(strstr(req.prq_url.buf_data, "&method=alipay.trade.query&"));
	/* Beijing time: 2025-12-02 13:00:00 UTC is 21:00:00 there. */
	assert_non_null(strstr(req.prq_url.buf_data, "&timestamp=2025-12-02%2021%3A00%3A00&"));
	free(all);
	free(biz);
	free(sign_type);
	provider_request_finish(&req);
	pt_instance_destroy(&pi);
}

/* {"alipay_trade_query_response":INNER,"sign":SIG}: signed over INNER's
 * exact text by the provider's key (wrong: by ours). */
static char *alipay_answer(const char *inner, int wrong)
{
	char *sig = sign_b64(wrong ? our_priv : provider_priv, inner, strlen(inner));
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b, "{\"alipay_trade_query_response\":%s,\"sign\":\"%s\"}", inner, sig);
	free(sig);
	return buf_take(&b, NULL);
}

static void alipay_ask(struct pt_instance *pi, const char *order, const char *inner, int wrong,
                       int want_rc, struct provider_answer *a)
{
	struct httpc_response resp;
	char *body = alipay_answer(inner, wrong);

	answer_of(&resp, 200, body);
	assert_int_equal(ask(pi, order, &resp, a), want_rc);
	httpc_response_finish(&resp);
	free(body);
}

static void test_alipay_reads_paid_unpaid_closed_and_refunded_trades(void **state)
{
	struct pt_instance pi;
	struct provider_answer a;

	(void)state;
	alipay_instance(&pi);
	/* Escaped quotes and braces inside strings are part of the signed text. */
	alipay_ask(&pi, "ord_a1",
	           "{\"code\":\"10000\",\"msg\":\"Success\",\"buyer_logon_id\":\"a\\\"}{b\","
	           "\"out_trade_no\":\"ord_a1\",\"trade_no\":\"2025120222001400001\","
	           "\"trade_status\":\"TRADE_SUCCESS\",\"total_amount\":\"19.99\","
	           "\"send_pay_date\":\"2025-12-02 20:00:00\"}",
	           0, 0, &a);
	assert_string_equal(a.pa_state, "TRADE_SUCCESS");
	assert_int_equal(a.pa_events.eb_n, 1);
	assert_int_equal(a.pa_events.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(a.pa_events.eb_events[0].ev_key, "reconcile:2025120222001400001:paid");
	assert_string_equal(a.pa_events.eb_events[0].ev_order_ref, "ord_a1");
	assert_string_equal(a.pa_events.eb_events[0].ev_payment_ref, "2025120222001400001");
	assert_int_equal(a.pa_events.eb_events[0].ev_amount, 1999);
	assert_string_equal(a.pa_events.eb_events[0].ev_currency, "CNY");
	provider_answer_finish(&a);

	alipay_ask(&pi, "ord_a2",
	           "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"ord_a2\","
	           "\"trade_status\":\"WAIT_BUYER_PAY\",\"total_amount\":\"5.00\"}",
	           0, 0, &a);
	assert_string_equal(a.pa_state, "WAIT_BUYER_PAY");
	assert_int_equal(a.pa_events.eb_n, 0);
	provider_answer_finish(&a);

	alipay_ask(&pi, "ord_a3",
	           "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"ord_a3\","
	           "\"trade_no\":\"2025120222001400003\",\"trade_status\":\"TRADE_CLOSED\","
	           "\"total_amount\":\"5.00\"}",
	           0, 0, &a);
	assert_int_equal(a.pa_events.eb_n, 1);
	assert_int_equal(a.pa_events.eb_events[0].ev_kind, EVENT_PAYMENT_CANCELLED);
	provider_answer_finish(&a);

	/* Closed after payment: paid, then the whole amount refunded. */
	alipay_ask(&pi, "ord_a4",
	           "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"ord_a4\","
	           "\"trade_no\":\"2025120222001400004\",\"trade_status\":\"TRADE_CLOSED\","
	           "\"total_amount\":\"8.00\",\"send_pay_date\":\"2025-12-02 19:00:00\"}",
	           0, 0, &a);
	assert_int_equal(a.pa_events.eb_n, 2);
	assert_int_equal(a.pa_events.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_int_equal(a.pa_events.eb_events[1].ev_kind, EVENT_REFUNDED);
	assert_int_equal(a.pa_events.eb_events[1].ev_refund_cumulative, 1);
	assert_int_equal(a.pa_events.eb_events[1].ev_amount, 800);
	assert_string_equal(a.pa_events.eb_events[1].ev_key,
	                    "reconcile:2025120222001400004:refunded");
	provider_answer_finish(&a);

	alipay_ask(&pi, "ord_a5",
	           "{\"code\":\"40004\",\"msg\":\"Business Failed\",\"sub_code\":"
	           "\"ACQ.TRADE_NOT_EXIST\",\"sub_msg\":\"trade not exist\"}",
	           0, 0, &a);
	assert_string_equal(a.pa_state, "TRADE_NOT_EXIST");
	assert_int_equal(a.pa_events.eb_n, 0);
	provider_answer_finish(&a);
	pt_instance_destroy(&pi);
}

static void
test_alipay_refuses_a_wrongly_signed_or_foreign_answer_and_retries_a_busy_one(void **state)
{
	const char *paid =
	        "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"ord_b1\","
	        "\"trade_no\":\"2025120222001400009\",\"trade_status\":\"TRADE_SUCCESS\","
	        "\"total_amount\":\"1.00\"}";
	struct pt_instance pi;
	struct provider_answer a;
	struct httpc_response resp;
	char *body;

	(void)state;
	alipay_instance(&pi);
	alipay_ask(&pi, "ord_b1", paid, 1, -1, &a);
	assert_string_equal(a.pa_reason, "bad_signature");
	assert_int_equal(a.pa_events.eb_n, 0);
	provider_answer_finish(&a);

	/* One byte of the signed text changed after signing. */
	body = alipay_answer(paid, 0);
	*strstr(body, "1.00") = '9';
	answer_of(&resp, 200, body);
	assert_int_equal(ask(&pi, "ord_b1", &resp, &a), -1);
	assert_string_equal(a.pa_reason, "bad_signature");
	provider_answer_finish(&a);
	httpc_response_finish(&resp);
	free(body);

	/* Unsigned. */
	answer_of(&resp, 200, "{\"alipay_trade_query_response\":{\"code\":\"10000\"}}");
	assert_int_equal(ask(&pi, "ord_b1", &resp, &a), -1);
	assert_string_equal(a.pa_reason, "bad_signature");
	provider_answer_finish(&a);
	httpc_response_finish(&resp);

	alipay_ask(&pi, "ord_other", paid, 0, -1, &a);
	assert_string_equal(a.pa_reason, "mismatched_answer");
	provider_answer_finish(&a);

	alipay_ask(&pi, "ord_b1",
	           "{\"code\":\"20000\",\"msg\":\"Service Currently Unavailable\",\"sub_code\":"
	           "\"isp.unknow-error\"}",
	           0, -1, &a);
	assert_int_equal(a.pa_verdict, PROVIDER_ANSWER_RETRY);
	provider_answer_finish(&a);
	pt_instance_destroy(&pi);
}

/* ---- WeChat Pay: query by out_trade_no ---- */

static void wechatpay_instance(struct pt_instance *pi)
{
	const char *kv[] = {"platform_key",
	                    T_PLATFORM_SERIAL " env:T_PROVIDER_PUB",
	                    "apiv3_key",
	                    "env:T_APIV3",
	                    "mchid",
	                    T_MCHID,
	                    "merchant_key",
	                    "env:T_OUR_PRIV",
	                    "merchant_serial",
	                    T_MERCHANT_SERIAL,
	                    "api_base_url",
	                    "http://127.0.0.1:1",
	                    NULL};

	assert_int_equal(pt_instance_create(pi, &provider_wechatpay, kv), 0);
}

/* The value of name="..." in an Authorization header (malloc'd). */
static char *auth_param(const char *auth, const char *name)
{
	char pat[64];
	const char *p;
	const char *end;

	snprintf(pat, sizeof(pat), "%s=\"", name);
	p = strstr(auth, pat);
	assert_non_null(p);
	p += strlen(pat);
	end = strchr(p, '"');
	assert_non_null(end);
	return strndup(p, (size_t)(end - p));
}

static void
test_wechatpay_signs_the_query_with_the_merchant_key_as_the_platform_checks(void **state)
{
	struct pt_instance pi;
	struct provider_request req;
	struct provider_query q;
	const char *auth;
	char *nonce;
	char *sig;
	char *ts;
	struct buf text;

	(void)state;
	wechatpay_instance(&pi);
	memset(&q, 0, sizeof(q));
	q.pq_order_id = "ord_wx_q1";
	provider_request_init(&req);
	assert_int_equal(provider_wechatpay.p_reconcile_request(&pi.pi_conf, &q, T_NOW, &req), 0);
	assert_string_equal(req.prq_method, "GET");
	assert_string_equal(req.prq_url.buf_data, "http://127.0.0.1:1/v3/pay/transactions/"
	                                          "out-trade-no/ord_wx_q1?mchid=" T_MCHID);
	auth = httpc_headers_get(&req.prq_headers, "Authorization");
	assert_non_null(auth);
	assert_int_equal(strncmp(auth, "WECHATPAY2-SHA256-RSA2048 ", 26), 0);
	nonce = auth_param(auth, "nonce_str");
	sig = auth_param(auth, "signature");
	ts = auth_param(auth, "timestamp");
	assert_string_equal(ts, "1764680400");
	free(auth_param(auth, "mchid"));
	assert_non_null(strstr(auth, "serial_no=\"" T_MERCHANT_SERIAL "\""));
	buf_init(&text, 0);
	buf_printf(&text, "GET\n/v3/pay/transactions/out-trade-no/ord_wx_q1?mchid=%s\n%s\n%s\n\n",
	           T_MCHID, ts, nonce);
	assert_true(verifies(our_pub, text.buf_data, text.buf_len, sig));
	buf_finish(&text);
	free(nonce);
	free(sig);
	free(ts);
	provider_request_finish(&req);
	pt_instance_destroy(&pi);
}

static void wechatpay_ask(struct pt_instance *pi, const char *order, long status, const char *body,
                          int wrong, int want_rc, struct provider_answer *a)
{
	struct httpc_response resp;
	struct buf text;
	char *sig;
	char ts[24];

	snprintf(ts, sizeof(ts), "%d", T_NOW);
	buf_init(&text, 0);
	buf_printf(&text, "%s\n%s\n%s\n", ts, "a1b2c3d4e5f6", body);
	sig = sign_b64(wrong ? our_priv : provider_priv, text.buf_data, text.buf_len);
	buf_finish(&text);
	answer_of(&resp, status, body);
	httpc_headers_add(&resp.hcr_headers, "Wechatpay-Timestamp", ts);
	httpc_headers_add(&resp.hcr_headers, "Wechatpay-Nonce", "a1b2c3d4e5f6");
	httpc_headers_add(&resp.hcr_headers, "Wechatpay-Signature", sig);
	httpc_headers_add(&resp.hcr_headers, "Wechatpay-Serial", T_PLATFORM_SERIAL);
	assert_int_equal(ask(pi, order, &resp, a), want_rc);
	httpc_response_finish(&resp);
	free(sig);
}

#define T_WX_TX(order, state)                                                                      \
	"{\"appid\":\"wxd678efh567hg6787\",\"mchid\":\"" T_MCHID "\",\"out_trade_no\":\"" order    \
	"\",\"transaction_id\":\"4200002000202512020000000001\",\"trade_type\":\"NATIVE\","        \
	"\"trade_state\":\"" state "\",\"trade_state_desc\":\"x\",\"success_time\":"               \
	"\"2025-12-02T20:00:00+08:00\",\"amount\":{\"total\":1999,\"payer_total\":1999,"           \
	"\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}"

static void test_wechatpay_reads_paid_unpaid_closed_and_refunded_transactions(void **state)
{
	struct pt_instance pi;
	struct provider_answer a;

	(void)state;
	wechatpay_instance(&pi);
	wechatpay_ask(&pi, "ord_w1", 200, T_WX_TX("ord_w1", "SUCCESS"), 0, 0, &a);
	assert_int_equal(a.pa_events.eb_n, 1);
	assert_int_equal(a.pa_events.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_string_equal(a.pa_events.eb_events[0].ev_key,
	                    "reconcile:4200002000202512020000000001:paid");
	assert_int_equal(a.pa_events.eb_events[0].ev_amount, 1999);
	assert_string_equal(a.pa_events.eb_events[0].ev_order_ref, "ord_w1");
	provider_answer_finish(&a);

	wechatpay_ask(&pi, "ord_w2", 200, T_WX_TX("ord_w2", "NOTPAY"), 0, 0, &a);
	assert_string_equal(a.pa_state, "NOTPAY");
	assert_int_equal(a.pa_events.eb_n, 0);
	provider_answer_finish(&a);

	wechatpay_ask(&pi, "ord_w3", 200, T_WX_TX("ord_w3", "CLOSED"), 0, 0, &a);
	assert_int_equal(a.pa_events.eb_n, 1);
	assert_int_equal(a.pa_events.eb_events[0].ev_kind, EVENT_PAYMENT_CANCELLED);
	provider_answer_finish(&a);

	/* Refunded: the payment is a fact, the refund's amount is not given. */
	wechatpay_ask(&pi, "ord_w4", 200, T_WX_TX("ord_w4", "REFUND"), 0, 0, &a);
	assert_int_equal(a.pa_events.eb_n, 1);
	assert_int_equal(a.pa_events.eb_events[0].ev_kind, EVENT_PAYMENT_SUCCEEDED);
	assert_non_null(strstr(a.pa_note, "REFUND"));
	provider_answer_finish(&a);

	wechatpay_ask(&pi, "ord_w5", 404,
	              "{\"code\":\"ORDER_NOT_EXIST\",\"message\":\"order not exist\"}", 0, 0, &a);
	assert_string_equal(a.pa_state, "ORDER_NOT_EXIST");
	assert_int_equal(a.pa_events.eb_n, 0);
	provider_answer_finish(&a);
	pt_instance_destroy(&pi);
}

static void test_wechatpay_refuses_a_wrongly_signed_or_foreign_answer(void **state)
{
	struct pt_instance pi;
	struct provider_answer a;

	(void)state;
	wechatpay_instance(&pi);
	wechatpay_ask(&pi, "ord_w1", 200, T_WX_TX("ord_w1", "SUCCESS"), 1, -1, &a);
	assert_string_equal(a.pa_reason, "bad_signature");
	assert_int_equal(a.pa_events.eb_n, 0);
	provider_answer_finish(&a);

	wechatpay_ask(&pi, "ord_w9", 200, T_WX_TX("ord_w1", "SUCCESS"), 0, -1, &a);
	assert_string_equal(a.pa_reason, "mismatched_answer");
	provider_answer_finish(&a);

	wechatpay_ask(&pi, "ord_w1", 401,
	              "{\"code\":\"SIGN_ERROR\",\"message\":\"signature mismatch\"}", 0, -1, &a);
	assert_string_equal(a.pa_reason, "unauthorized");
	assert_non_null(strstr(a.pa_detail, "merchant_key"));
	provider_answer_finish(&a);
	pt_instance_destroy(&pi);
}

static void test_alipay_private_key_loads_from_the_key_tools_base64_line(void **state)
{
	const char *begin = "-----BEGIN PRIVATE KEY-----";
	const char *end = "-----END PRIVATE KEY-----";
	const char *from = strstr(our_priv, begin);
	const char *to = strstr(our_priv, end);
	struct crypto_privkey *k;
	struct buf line;
	const char *p;

	(void)state;
	assert_non_null(from);
	assert_non_null(to);
	buf_init(&line, 0);
	for (p = from + strlen(begin); p < to; p++) {
		if (*p != '\n' && *p != '\r') {
			buf_append(&line, p, 1);
		}
	}
	buf_puts(&line, "\n");
	k = crypto_privkey_load(line.buf_data, line.buf_len);
	assert_non_null(k);
	crypto_privkey_destroy(k);
	assert_null(crypto_privkey_load("bm90IGEga2V5", 12));
	buf_finish(&line);
}

/* [reconcile] of an ini text, through the configuration loader. Returns
 * reconcile_conf_load's result, or -2 when the file itself is refused. */
static int conf_of(const char *ini, struct reconcile_conf *ret)
{
	char path[] = "/tmp/test-reconcile-XXXXXX";
	struct config *cf;
	int fd = mkstemp(path);
	int rc;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, ini, strlen(ini)), (ssize_t)strlen(ini));
	close(fd);
	cf = provider_config_load(path);
	unlink(path);
	if (cf == NULL) {
		return -2;
	}
	rc = reconcile_conf_load(cf, ret);
	config_destroy(cf);
	return rc;
}

static void test_reconcile_section_defaults_and_refusals(void **state)
{
	struct reconcile_conf rc;

	(void)state;
	assert_int_equal(conf_of("[store]\npath = /tmp/unused.db\n", &rc), 0);
	assert_int_equal(rc.rc_interval_s, 0);
	assert_int_equal(rc.rc_older_than_s, 15 * 60);
	assert_int_equal(rc.rc_lookback_s, 3 * 24 * 3600);
	assert_int_equal(rc.rc_timeout_ms, 10000);
	assert_int_equal(rc.rc_retries, 3);
	assert_int_equal(rc.rc_retry_base_ms, 1000);
	assert_int_equal(rc.rc_max_orders, 500);
	assert_int_equal(conf_of("[reconcile]\ninterval = 15m\ntimeout = 500ms\nretry_base = 0\n"
	                         "retries = 0\nolder_than = 0\nlookback = 30d\nmax_orders = 9\n",
	                         &rc),
	                 0);
	assert_int_equal(rc.rc_interval_s, 900);
	assert_int_equal(rc.rc_timeout_ms, 500);
	assert_int_equal(rc.rc_retry_base_ms, 0);
	assert_int_equal(rc.rc_max_orders, 9);
	assert_int_equal(conf_of("[reconcile]\ntimeout = 0\n", &rc), -1);
	assert_int_equal(conf_of("[reconcile]\ntimeout = 1h\n", &rc), -1);
	assert_int_equal(conf_of("[reconcile]\nretries = 11\n", &rc), -1);
	assert_int_equal(conf_of("[reconcile]\nretry_base = 1m\n", &rc), -1);
	assert_int_equal(conf_of("[reconcile]\nlookback = 0\n", &rc), -1);
	assert_int_equal(conf_of("[reconcile]\nmax_orders = 0\n", &rc), -1);
	assert_int_equal(conf_of("[reconcile]\nintervall = 15m\n", &rc), -2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_adyen_and_generic_profiles_say_they_cannot_be_asked_and_what_to_do),
	        cmocka_unit_test(test_stripe_without_an_api_key_is_not_asked),
	        cmocka_unit_test(test_api_base_urls_are_https_or_loopback_only),
	        cmocka_unit_test(
	                test_stripe_lists_the_events_it_reads_in_the_window_with_the_restricted_key),
	        cmocka_unit_test(
	                test_stripe_reads_a_listed_event_as_its_webhook_same_key_and_fingerprint),
	        cmocka_unit_test(test_stripe_answers_a_refused_key_and_skips_an_unreadable_event),
	        cmocka_unit_test(
	                test_alipay_signs_the_query_as_the_gateway_verifies_it_sign_type_included),
	        cmocka_unit_test(test_alipay_reads_paid_unpaid_closed_and_refunded_trades),
	        cmocka_unit_test(
	                test_alipay_refuses_a_wrongly_signed_or_foreign_answer_and_retries_a_busy_one),
	        cmocka_unit_test(
	                test_wechatpay_signs_the_query_with_the_merchant_key_as_the_platform_checks),
	        cmocka_unit_test(test_wechatpay_reads_paid_unpaid_closed_and_refunded_transactions),
	        cmocka_unit_test(test_wechatpay_refuses_a_wrongly_signed_or_foreign_answer),
	        cmocka_unit_test(test_alipay_private_key_loads_from_the_key_tools_base64_line),
	        cmocka_unit_test(test_reconcile_section_defaults_and_refusals),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
