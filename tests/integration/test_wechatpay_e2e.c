/* test_wechatpay_e2e.c: WeChat Pay API v3 notifications over real HTTP against
 * the real daemon, signed with an RSA key generated at test time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "buf.h"
#include "crypto.h"
#include "provider_e2e.h"
#include "wechatpay_fixture.h"

#define WX_SERIAL "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
#define WX_APIV3 "abcdefghijklmnopqrstuvwxyz012345"

#define WX_INI                                                                                     \
	"[provider wechatpay]\ntype = wechatpay\nplatform_key = " WX_SERIAL                        \
	" env:IDEMHOOK_E2E_WX_PUB\n"                                                               \
	"apiv3_key = " WX_APIV3 "\nmchid = 1900000001\n\n[points]\nrate = 1/100\n"

static EVP_PKEY *wx_key;

struct wx_msg {
	const char *wm_headers[7];
	char wm_h[5][1024];
};

static char *wx_body(const char *id, const char *event_type, const char *plaintext,
                     const char *nonce)
{
	return wx_fixture_body(id, event_type, plaintext, WX_APIV3, nonce);
}

/* Signs body now; sig_override replaces the signature (probes). */
static void wx_sign(struct wx_msg *m, const char *body, const char *sig_override)
{
	char *b64;
	char ts[32];

	snprintf(ts, sizeof(ts), "%lld", (long long)hn_now_s());
	b64 = wx_fixture_sign(wx_key, ts, "nonce-e2e", body);
	snprintf(m->wm_h[0], sizeof(m->wm_h[0]), "Wechatpay-Timestamp: %s", ts);
	snprintf(m->wm_h[1], sizeof(m->wm_h[1]), "Wechatpay-Nonce: nonce-e2e");
	snprintf(m->wm_h[2], sizeof(m->wm_h[2]), "Wechatpay-Signature: %s",
	         sig_override != NULL ? sig_override : b64);
	snprintf(m->wm_h[3], sizeof(m->wm_h[3]), "Wechatpay-Serial: %s", WX_SERIAL);
	snprintf(m->wm_h[4], sizeof(m->wm_h[4]),
	         "Wechatpay-Signature-Type: WECHATPAY2-SHA256-RSA2048");
	m->wm_headers[0] = m->wm_h[0];
	m->wm_headers[1] = m->wm_h[1];
	m->wm_headers[2] = m->wm_h[2];
	m->wm_headers[3] = m->wm_h[3];
	m->wm_headers[4] = m->wm_h[4];
	m->wm_headers[5] = "Content-Type: application/json";
	m->wm_headers[6] = NULL;
	free(b64);
}

static char *paid_plain(const char *order, int64_t total)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"mchid\":\"1900000001\",\"appid\":\"wxd678efh567hg6787\",\"out_trade_no\":\"%"
	           "s\","
	           "\"transaction_id\":\"42000%s\",\"trade_type\":\"JSAPI\",\"trade_state\":"
	           "\"SUCCESS\","
	           "\"success_time\":\"2024-12-02T10:00:00+08:00\",\"payer\":{\"openid\":\"o1\"},"
	           "\"amount\":{\"total\":%lld,\"payer_total\":%lld,\"currency\":\"CNY\",\"payer_"
	           "currency\":\"CNY\"}}",
	           order, order, (long long)total, (long long)total);
	return buf_take(&b, NULL);
}

static char *refund_plain(const char *order, int64_t total, int64_t refund, const char *refund_id)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(
	        &b,
	        "{\"mchid\":\"1900000001\",\"out_trade_no\":\"%s\",\"transaction_id\":\"42000%s\","
	        "\"out_refund_no\":\"r-%s\",\"refund_id\":\"%s\",\"refund_status\":\"SUCCESS\","
	        "\"amount\":{\"total\":%lld,\"refund\":%lld,\"payer_total\":%lld,\"payer_refund\":%"
	        "lld}}",
	        order, order, refund_id, refund_id, (long long)total, (long long)refund,
	        (long long)total, (long long)refund);
	return buf_take(&b, NULL);
}

static int setup(void **state)
{
	struct daemon *d = calloc(1, sizeof(*d));
	BIO *bio = BIO_new(BIO_s_mem());
	char *pem = NULL;
	char *copy;
	long n;

	wx_key = EVP_RSA_gen(2048);
	if (d == NULL || wx_key == NULL || bio == NULL || PEM_write_bio_PUBKEY(bio, wx_key) != 1) {
		return -1;
	}
	n = BIO_get_mem_data(bio, &pem);
	copy = strndup(pem, (size_t)n);
	BIO_free(bio);
	if (copy == NULL) {
		return -1;
	}
	/* The daemon inherits the environment: env: keeps the PEM off the config. */
	setenv("IDEMHOOK_E2E_WX_PUB", copy, 1);
	free(copy);
	if (daemon_init(d, WX_INI) < 0 || daemon_start(d) < 0) {
		return -1;
	}
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct daemon *d = *state;

	daemon_finish(d);
	free(d);
	EVP_PKEY_free(wx_key);
	return 0;
}

static void test_wechatpay_payment_pays_once_and_answers_204(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres first;
	struct hres again;
	int classes[3];
	char id[64];
	char *plain;
	char *body;

	assert_int_equal(hn_order_create(d, 1999, "cny", id), 0);
	plain = paid_plain(id, 1999);
	body = wx_body("EV-e2e-pay-1", "TRANSACTION.SUCCESS", plain, "aaaaaaaaaaaa");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &first), 0);
	assert_int_equal(first.hs_status, 204);
	assert_int_equal(first.hs_body_len, 0);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id),
	        19);

	/* WeChat Pay's retry re-encrypts with a new nonce: same event, same effect. */
	free(body);
	body = wx_body("EV-e2e-pay-1", "TRANSACTION.SUCCESS", plain, "bbbbbbbbbbbb");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &again), 0);
	assert_int_equal(again.hs_status, 204);
	assert_true(e2e_replayed(&again));
	assert_int_equal(e2e_storm_classes(d, "wechatpay", m.wm_headers, body, classes), 0);
	assert_int_equal(classes[0], E2E_STORM);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(
	                d,
	                "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = 'EV-e2e-pay-1'"),
	        1);
	hres_finish(&first);
	hres_finish(&again);
	free(plain);
	free(body);
}

static void test_wechatpay_refund_applies_once(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres r;
	char id[64];
	char *plain;
	char *body;

	assert_int_equal(hn_order_create(d, 1000, "cny", id), 0);
	plain = paid_plain(id, 1000);
	body = wx_body("EV-e2e-pay-2", "TRANSACTION.SUCCESS", plain, "cccccccccccc");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 204);
	hres_finish(&r);
	free(plain);
	free(body);

	plain = refund_plain(id, 1000, 1000, "50000000382019052709732678859");
	body = wx_body("EV-e2e-refund-2", "REFUND.SUCCESS", plain, "dddddddddddd");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 204);
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id),
	        0);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_true(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 2);
	free(plain);
	free(body);
}

static void test_wechatpay_probe_is_refused_with_fail_json(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres r;
	char id[64];
	char *plain;
	char *body;

	assert_int_equal(hn_order_create(d, 100, "cny", id), 0);
	plain = paid_plain(id, 100);
	body = wx_body("EV-e2e-probe", "TRANSACTION.SUCCESS", plain, "eeeeeeeeeeee");
	wx_sign(&m, body, "WECHATPAY/SIGNTEST/9U3hMQoNxhp3gR5A");
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	assert_non_null(strstr(r.hs_body, "\"code\":\"FAIL\""));
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(
	                d,
	                "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = 'EV-e2e-probe'"),
	        0);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);
	free(plain);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_wechatpay_payment_pays_once_and_answers_204),
	        cmocka_unit_test(test_wechatpay_refund_applies_once),
	        cmocka_unit_test(test_wechatpay_probe_is_refused_with_fail_json),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
