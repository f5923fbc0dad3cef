/* test_wechatpay_e2e.c: WeChat Pay API v3 notifications over real HTTP against
 * the real daemon, signed with an RSA key generated at test time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "buf.h"
#include "crypto.h"
#include "fixtures.h"
#include "provider_e2e.h"
#include "rawhttp.h"
#include "wechatpay_fixture.h"

#define WX_SERIAL "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
/* The same serial as the merchant platform may show it, in lower case. */
#define WX_SERIAL_LOWER "5157f09efdc096de15ebe81a47057a7232f1b8e1"
#define WX_APIV3 "abcdefghijklmnopqrstuvwxyz012345"

#define WX_INI                                                                                     \
	"[provider wechatpay]\ntype = wechatpay\nplatform_key = " WX_SERIAL                        \
	" env:IDEMHOOK_E2E_WX_PUB\n"                                                               \
	"apiv3_key = " WX_APIV3 "\nmchid = 1900000001\n\n"                                         \
	"[provider wechatpay-partner]\ntype = wechatpay\nplatform_key = " WX_SERIAL                \
	" env:IDEMHOOK_E2E_WX_PUB\napiv3_key = " WX_APIV3 "\nsp_mchid = 1900000100\n"              \
	"sub_mchid = 1900000108, 1900000109\n\n"                                                   \
	"[provider wechatpay-lower]\ntype = wechatpay\nplatform_key = " WX_SERIAL_LOWER            \
	" env:IDEMHOOK_E2E_WX_PUB\napiv3_key = " WX_APIV3 "\nmchid = 1900000001\n\n"               \
	"[points]\nrate = 1/100\n"

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

	fx_order(d, 1999, "cny", id);
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

	fx_order(d, 1000, "cny", id);
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

static void test_wechatpay_probe_is_refused_with_fail_json_and_counted_apart(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres r;
	char url[128];
	char id[64];
	char *plain;
	char *body;

	fx_order(d, 100, "cny", id);
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
	/* Counted apart from real verification failures, which page
	 * (IdemhookSignatureFailures): a wrong signature that is no probe. */
	wx_sign(&m, body, "d3Jvbmcgc2lnbmF0dXJl");
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
	snprintf(url, sizeof(url), "%s/metrics", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_non_null(strstr(r.hs_body, "idemhook_rejected_total{provider=\"wechatpay\","
	                                  "reason=\"probe_signature\"} 1\n"));
	assert_non_null(strstr(r.hs_body, "idemhook_rejected_total{provider=\"wechatpay\","
	                                  "reason=\"bad_signature\"} 1\n"));
	hres_finish(&r);
	free(plain);
	free(body);
}

/* What the listener and the route refuse at its path is in WeChat Pay's
 * format too: its callbacks take no other (it would log the problem+json as
 * an unreadable answer). The 413 is still logged and counted as before. */
static void test_wechatpay_listener_and_method_refusals_answer_fail_json(void **state)
{
	struct daemon *d = *state;
	struct e2e_refusals r;

	e2e_refusals(d, "wechatpay", &r);
	e2e_expect_answer(&r.er_too_large, 413, "application/json",
	                  "{\"code\":\"FAIL\",\"message\":\"The body is larger than this server "
	                  "accepts.\"}",
	                  NULL);
	e2e_expect_answer(&r.er_head, 431, "application/json",
	                  "{\"code\":\"FAIL\",\"message\":\"The request line and header fields are "
	                  "larger than 8192 bytes.\"}",
	                  NULL);
	e2e_expect_answer(&r.er_get, 405, "application/json",
	                  "{\"code\":\"FAIL\",\"message\":\"Callbacks are POSTed\"}",
	                  "Allow: POST");
	e2e_refusals_finish(&r);
	assert_int_equal(daemon_log_wait(d,
	                                 "hook path=\"/hooks/wechatpay\" outcome=rejected "
	                                 "reason=body_too_large status=413",
	                                 10000),
	                 0);
}

/* A body that does not come is cut with 408 by the sweeper (after the
 * body's grace, [server] body_min_rate): at WeChat Pay's path in WeChat
 * Pay's format, elsewhere as the problem. */
static void test_wechatpay_a_body_too_slow_gets_its_408_in_fail_json(void **state)
{
	struct daemon *d = *state;
	const char wx[] = "POST /hooks/wechatpay HTTP/1.1\r\nHost: x\r\n"
	                  "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
	const char api[] = "POST /api/orders HTTP/1.1\r\nHost: x\r\n"
	                   "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
	struct rh_response r;
	char *ct;
	int a = rh_connect(NULL, d->dm_port);
	int b = rh_connect(NULL, d->dm_port);

	assert_true(a >= 0 && b >= 0);
	assert_int_equal(rh_send(a, wx, sizeof(wx) - 1), 0);
	assert_int_equal(rh_send(b, api, sizeof(api) - 1), 0);
	assert_int_equal(rh_read_response(a, 30000, &r), 1);
	assert_int_equal(r.rr_status, 408);
	assert_true(r.rr_close);
	ct = rh_header(&r, "Content-Type");
	assert_non_null(ct);
	assert_string_equal(ct, "application/json");
	free(ct);
	assert_string_equal(r.rr_body, "{\"code\":\"FAIL\",\"message\":\"The request head did not "
	                               "arrive in time, or the body came too slowly.\"}");
	rh_response_finish(&r);
	assert_int_equal(rh_read_response(b, 30000, &r), 1);
	assert_int_equal(r.rr_status, 408);
	assert_non_null(strstr(r.rr_body, "\"type\":\"urn:idemhook:problem:request_timeout\""));
	rh_response_finish(&r);
	close(a);
	close(b);
}

static void wx_send(int fd, const char *text)
{
	assert_int_equal(rh_send(fd, text, strlen(text)), 0);
}

/* Reads the 408 a connection gets when its head stops coming, and checks
 * its content type (and, when want_body is not NULL, its body). */
static void wx_expect_408(int fd, const char *want_type, const char *want_body)
{
	struct rh_response r;
	char *ct;

	assert_int_equal(rh_read_response(fd, 10000, &r), 1);
	assert_int_equal(r.rr_status, 408);
	assert_true(r.rr_close);
	ct = rh_header(&r, "Content-Type");
	assert_non_null(ct);
	assert_string_equal(ct, want_type);
	free(ct);
	if (want_body != NULL) {
		assert_string_equal(r.rr_body, want_body);
	} else {
		assert_non_null(
		        strstr(r.rr_body, "\"type\":\"urn:idemhook:problem:request_timeout\""));
	}
	rh_response_finish(&r);
}

/* A head that stops after its request line is cut at [server] head_timeout
 * with 408; the request line names the path, so at WeChat Pay's path (also
 * spelled with an escape) the 408 is in WeChat Pay's format, elsewhere the
 * problem. On a kept-alive connection the next request's head is the
 * problem's until its own request line names a path. */
static void test_wechatpay_a_head_too_slow_gets_its_408_in_fail_json(void **state)
{
	static const char fail[] = "{\"code\":\"FAIL\",\"message\":\"The request head did not "
	                           "arrive in time, or the body came too slowly.\"}";
	static const char get[] = "GET /hooks/wechatpay HTTP/1.1\r\nHost: x\r\n\r\n";
	struct daemon d;
	struct rh_response r;
	int wx;
	int escaped;
	int api;
	int kept;

	(void)state;
	fx_daemon_start(&d, WX_INI "\n[server]\nhead_timeout = 1s\n");
	kept = rh_connect(NULL, d.dm_port);
	assert_true(kept >= 0);
	/* One whole request (405 in WeChat Pay's format), then the start of
	 * the next whose path never comes. */
	wx_send(kept, get);
	assert_int_equal(rh_read_response(kept, 10000, &r), 1);
	assert_int_equal(r.rr_status, 405);
	assert_false(r.rr_close);
	rh_response_finish(&r);
	/* The listener sees the next request begin on an idle connection
	 * by bytes arriving after it first looked (HTTP_IDLE_PROBE_MS). */
	usleep(1000 * 1000);
	wx_send(kept, "POST /hooks/wec");
	/* Heads whose deadline runs from their connection. */
	wx = rh_connect(NULL, d.dm_port);
	escaped = rh_connect(NULL, d.dm_port);
	api = rh_connect(NULL, d.dm_port);
	assert_true(wx >= 0 && escaped >= 0 && api >= 0);
	wx_send(wx, "POST /hooks/wechatpay HTTP/1.1\r\n");
	wx_send(escaped, "POST /hooks/wechat%70ay HTTP/1.1\r\nHost: x\r\n");
	wx_send(api, "POST /api/orders HTTP/1.1\r\n");
	wx_expect_408(wx, "application/json", fail);
	wx_expect_408(escaped, "application/json", fail);
	wx_expect_408(api, "application/problem+json", NULL);
	wx_expect_408(kept, "application/problem+json", NULL);
	close(wx);
	close(escaped);
	close(api);
	close(kept);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

/* A signed notification made ambiguous: a second Wechatpay-Signature line,
 * a path with an encoded slash, a header folded onto two lines. Each is
 * refused with 400 in WeChat Pay's format and stores nothing; the same
 * notification sent plainly then pays the order. */
static void test_wechatpay_ambiguous_requests_answer_fail_json_and_consume_no_key(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	const char *twice[8];
	struct rh_response raw;
	struct hres r;
	struct buf b;
	char url[256];
	char id[64];
	char *before;
	char *after;
	char *plain;
	char *body;
	size_t i;

	fx_order(d, 100, "cny", id);
	plain = paid_plain(id, 100);
	body = wx_body("EV-e2e-ambiguous", "TRANSACTION.SUCCESS", plain, "ffffffffffff");
	wx_sign(&m, body, NULL);
	before = hn_db_snapshot(d->dm_db);
	assert_non_null(before);

	for (i = 0; m.wm_headers[i] != NULL; i++) {
		twice[i] = m.wm_headers[i];
	}
	twice[i++] = "Wechatpay-Signature: d3Jvbmcgc2lnbmF0dXJl";
	twice[i] = NULL;
	assert_int_equal(e2e_post(d, "wechatpay", twice, body, &r), 0);
	e2e_expect_answer(&r, 400, "application/json",
	                  "{\"code\":\"FAIL\",\"message\":\"A signature, timestamp or id header "
	                  "field comes more than once.\"}",
	                  NULL);
	hres_finish(&r);

	snprintf(url, sizeof(url), "%s/hooks%%2Fwechatpay", d->dm_base);
	assert_int_equal(hn_http("POST", url, m.wm_headers, body, strlen(body), &r), 0);
	e2e_expect_answer(&r, 400, "application/json",
	                  "{\"code\":\"FAIL\",\"message\":\"The path contains an encoded slash "
	                  "(%2F); send / as itself.\"}",
	                  NULL);
	hres_finish(&r);

	/* The serial folded onto a second line. */
	buf_init(&b, 0);
	buf_printf(&b, "POST /hooks/wechatpay HTTP/1.1\r\nHost: 127.0.0.1\r\n");
	for (i = 0; i < 5; i++) {
		if (strncmp(m.wm_headers[i], "Wechatpay-Serial: ", 18) == 0) {
			buf_printf(&b, "Wechatpay-Serial:\r\n %s\r\n", m.wm_headers[i] + 18);
		} else {
			buf_printf(&b, "%s\r\n", m.wm_headers[i]);
		}
	}
	buf_printf(&b, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
	           strlen(body), body);
	assert_int_equal(rh_exchange(d->dm_port, b.buf_data, b.buf_len, 10000, &raw), 1);
	assert_int_equal(raw.rr_status, 400);
	assert_non_null(strstr(raw.rr_body, "{\"code\":\"FAIL\",\"message\":\"A header field is "
	                                    "continued on a line"));
	rh_response_finish(&raw);
	buf_finish(&b);

	/* HTTP/1.1 without a Host field (RFC 9112 3.2). */
	buf_init(&b, 0);
	buf_printf(&b, "POST /hooks/wechatpay HTTP/1.1\r\n");
	for (i = 0; m.wm_headers[i] != NULL; i++) {
		buf_printf(&b, "%s\r\n", m.wm_headers[i]);
	}
	buf_printf(&b, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
	assert_int_equal(rh_exchange(d->dm_port, b.buf_data, b.buf_len, 10000, &raw), 1);
	assert_int_equal(raw.rr_status, 400);
	assert_string_equal(raw.rr_body, "{\"code\":\"FAIL\",\"message\":\"An HTTP/1.1 request "
	                                 "must have a Host header field.\"}");
	rh_response_finish(&raw);
	buf_finish(&b);

	after = hn_db_snapshot(d->dm_db);
	assert_non_null(after);
	assert_string_equal(before, after);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_false(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	free(before);
	free(after);
	free(plain);
	free(body);
}

/* ---- the lifecycle: failed refunds and partner mode, in order and in reverse ---- */

struct wx_step {
	const char *ws_type;  /* event_type */
	const char *ws_plain; /* the resource; '@' stands for the order id */
};

#define WX_DIRECT "\"mchid\":\"1900000001\""
#define WX_PARTNER                                                                                 \
	"\"sp_appid\":\"wx8888888888888888\",\"sp_mchid\":\"1900000100\","                         \
	"\"sub_appid\":\"wxd678efh567hg6999\",\"sub_mchid\":\"1900000109\""
#define WX_PAID(merchant)                                                                          \
	{                                                                                          \
		"TRANSACTION.SUCCESS",                                                             \
		        "{" merchant                                                               \
		        ",\"out_trade_no\":\"@\",\"transaction_id\":\"42000@\",\"trade_type\":"    \
		        "\"JSAPI\",\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":1000,"        \
		        "\"payer_total\":1000,"                                                    \
		        "\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}"                        \
	}
#define WX_REFUND(merchant, type, status)                                                          \
	{                                                                                          \
		type, "{" merchant ",\"out_trade_no\":\"@\",\"transaction_id\":\"42000@\","        \
		      "\"out_refund_no\":\"r-@\",\"refund_id\":\"50000@\",\"refund_status\":"      \
		      "\"" status                                                                  \
		      "\",\"amount\":{\"total\":1000,\"refund\":1000,\"payer_total\":1000,"        \
		      "\"payer_refund\":1000}}"                                                    \
	}

static const struct wx_step refund_abnormal[] = {
        WX_PAID(WX_DIRECT),
        WX_REFUND(WX_DIRECT, "REFUND.SUCCESS", "SUCCESS"),
        WX_REFUND(WX_DIRECT, "REFUND.ABNORMAL", "ABNORMAL"),
};

static const struct wx_step partner_refund_closed[] = {
        WX_PAID(WX_PARTNER),
        WX_REFUND(WX_PARTNER, "REFUND.SUCCESS", "SUCCESS"),
        WX_REFUND(WX_PARTNER, "REFUND.CLOSED", "CLOSED"),
};

static const struct wx_step partner_refunded[] = {
        WX_PAID(WX_PARTNER),
        WX_REFUND(WX_PARTNER, "REFUND.SUCCESS", "SUCCESS"),
};

/* Step i for order id, delivered twice (the retry re-encrypted) with 204. */
static void wx_deliver_twice(struct daemon *d, const char *provider, const struct wx_step *st,
                             size_t i, const char *id)
{
	char *plain = e2e_expand(st[i].ws_plain, id);
	char event_id[96];
	struct wx_msg m;
	struct hres r;
	char *body;
	int round;

	snprintf(event_id, sizeof(event_id), "EV-%zu-%s", i, id);
	for (round = 0; round < 2; round++) {
		body = wx_body(event_id, st[i].ws_type, plain,
		               round == 0 ? "eeeeeeeeeeee" : "ffffffffffff");
		wx_sign(&m, body, NULL);
		assert_int_equal(e2e_post(d, provider, m.wm_headers, body, &r), 0);
		assert_int_equal(r.hs_status, 204);
		assert_int_equal(e2e_replayed(&r), round == 1);
		hres_finish(&r);
		free(body);
	}
	free(plain);
}

/* Runs the steps on a fresh order in order, and on another in reverse. */
static void wx_run(struct daemon *d, const char *provider, const struct wx_step *st, size_t n,
                   const char *status, int64_t points)
{
	char a[64];
	char b[64];
	size_t i;

	fx_order(d, 1000, "cny", a);
	fx_order(d, 1000, "cny", b);
	for (i = 0; i < n; i++) {
		wx_deliver_twice(d, provider, st, i, a);
	}
	for (i = n; i-- > 0;) {
		wx_deliver_twice(d, provider, st, i, b);
	}
	assert_int_equal(
	        e2e_db_int(d,
	                   "SELECT COUNT(*) FROM orders WHERE id IN ('%s', '%s') AND status = '%s'",
	                   a, b, status),
	        2);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE "
	                            "order_id IN ('%s', '%s')",
	                            a, b),
	                 2 * points);
	assert_int_equal(e2e_failed_events(d, a) + e2e_failed_events(d, b), 0);
}

static void test_wechatpay_refund_then_refund_abnormal_leaves_the_order_paid(void **state)
{
	wx_run(*state, "wechatpay", refund_abnormal, 3, "paid", 10);
}

static void test_wechatpay_partner_mode_pays_refunds_and_closes_refunds(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres r;
	char id[64];
	char *plain;
	char *body;

	wx_run(d, "wechatpay-partner", partner_refunded, 2, "refunded", 0);
	wx_run(d, "wechatpay-partner", partner_refund_closed, 3, "paid", 10);
	/* A direct merchant's notification is not for the partner instance,
	 * nor a partner's for the direct one. */
	fx_order(d, 1000, "cny", id);
	plain = e2e_expand(refund_abnormal[0].ws_plain, id);
	body = wx_body("EV-wrong-1", "TRANSACTION.SUCCESS", plain, "gggggggggggg");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay-partner", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 403);
	hres_finish(&r);
	free(plain);
	free(body);
	plain = e2e_expand(partner_refunded[0].ws_plain, id);
	body = wx_body("EV-wrong-2", "TRANSACTION.SUCCESS", plain, "hhhhhhhhhhhh");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 403);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);
	free(plain);
	free(body);
}

/* Signed notifications two JSON parsers could read differently, in the body
 * or in the decrypted resource, are refused before any claim; the real
 * delivery still applies afterwards. */
static void test_wechatpay_bodies_parsers_disagree_on_consume_no_key(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres r;
	char id[64];
	char ref[96];
	char cut[112];
	char *plain;
	char *odd_plain;
	char *good;
	char *bad[6];
	size_t i;

	fx_order(d, 880, "cny", id);
	plain = paid_plain(id, 880);
	good = wx_body("EV-strict", "TRANSACTION.SUCCESS", plain, "cccccccccccc");
	bad[0] = e2e_replace(good, "{\"id\":\"EV-strict\"", "{\"id\":\"EV-other\",\"id\":\"EV-strict\"");
	bad[1] = e2e_replace(good, "\"EV-strict\"", "\"EV-strict\\u0000x\"");
	bad[2] = e2e_append(good, "{}");
	odd_plain = e2e_replace(plain, "\"amount\":{\"total\":", "\"amount\":{\"total\":1,\"total\":");
	bad[3] = wx_body("EV-strict", "TRANSACTION.SUCCESS", odd_plain, "cccccccccccc");
	free(odd_plain);
	snprintf(ref, sizeof(ref), "\"out_trade_no\":\"%s\"", id);
	snprintf(cut, sizeof(cut), "\"out_trade_no\":\"%s\\u0000x\"", id);
	odd_plain = e2e_replace(plain, ref, cut);
	bad[4] = wx_body("EV-strict", "TRANSACTION.SUCCESS", odd_plain, "cccccccccccc");
	free(odd_plain);
	odd_plain = e2e_append(plain, "{\"mchid\":\"1900000002\"}");
	bad[5] = wx_body("EV-strict", "TRANSACTION.SUCCESS", odd_plain, "cccccccccccc");
	free(odd_plain);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		wx_sign(&m, bad[i], NULL);
		e2e_expect_unchanged(d, "wechatpay", m.wm_headers, bad[i], 400);
		free(bad[i]);
	}
	wx_sign(&m, good, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, good, &r), 0);
	assert_int_equal(r.hs_status, 204);
	assert_false(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	free(plain);
	free(good);
}

/* Serials are hex: one configured in lower case (as some tools print it)
 * names the key WeChat Pay's upper-case Wechatpay-Serial names. */
static void test_wechatpay_a_serial_configured_in_lower_case_matches_the_header(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres r;
	char id[64];
	char *plain;
	char *body;

	fx_order(d, 1500, "cny", id);
	plain = paid_plain(id, 1500);
	body = wx_body("EV-e2e-lower-1", "TRANSACTION.SUCCESS", plain, "llllllllllll");
	wx_sign(&m, body, NULL);
	assert_string_equal(m.wm_h[3], "Wechatpay-Serial: " WX_SERIAL);
	assert_int_equal(e2e_post(d, "wechatpay-lower", m.wm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 204);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	free(plain);
	free(body);
}

/* Posts plain as a notification of event_type to instance provider, signed,
 * and returns the status of the answer. */
static long wx_post(struct daemon *d, const char *provider, const char *event_id,
                    const char *event_type, const char *plain)
{
	char *body = wx_body(event_id, event_type, plain, "mmmmmmmmmmmm");
	struct wx_msg m;
	struct hres r;
	long status;

	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, provider, m.wm_headers, body, &r), 0);
	status = r.hs_status;
	hres_finish(&r);
	free(body);
	return status;
}

/* With mchid set, notifications of types the shop does not apply name the
 * merchant elsewhere (a transfer's mch_id, a combined payment's
 * combine_mchid when none of its sub-orders is ours) or nowhere (a
 * complaint): they
 * are acknowledged and recorded with no effect, not refused for WeChat Pay
 * to retry for a day. One that names another merchant is refused, and a
 * payment that would be applied must name ours where payments do. */
static void test_wechatpay_events_the_shop_does_not_apply_are_recorded_not_refused(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	char id[64];
	char *plain;
	char *body;
	char *nameless;

	fx_order(d, 1000, "cny", id);
	assert_int_equal(
	        wx_post(d, "wechatpay", "EV-transfer-1", "MCHTRANSFER.BILL.FINISHED",
	                "{\"mch_id\":\"1900000001\",\"out_bill_no\":\"plfk2020042013\","
	                "\"transfer_bill_no\":\"1330000071100999991182020050700019480001\","
	                "\"state\":\"SUCCESS\",\"transfer_amount\":400000,\"openid\":\"o1\","
	                "\"create_time\":\"2025-01-01T13:29:35+08:00\"}"),
	        204);
	/* A combined payment this merchant started whose sub-orders are all
	 * other merchants' (the order named is even one of the shop's). */
	plain = e2e_expand("{\"combine_appid\":\"wxd678efh567hg6787\",\"combine_mchid\":"
	                   "\"1900000001\",\"combine_out_trade_no\":\"C-@\",\"sub_orders\":[{"
	                   "\"mchid\":\"1900000777\",\"trade_type\":\"JSAPI\",\"trade_state\":"
	                   "\"SUCCESS\",\"transaction_id\":\"42000@\",\"out_trade_no\":\"@\","
	                   "\"amount\":{\"total_amount\":1000,\"currency\":\"CNY\"}}],"
	                   "\"combine_payer_info\":{\"openid\":\"o1\"}}",
	                   id);
	assert_int_equal(wx_post(d, "wechatpay", "EV-combine-1", "TRANSACTION.SUCCESS", plain),
	                 204);
	free(plain);
	assert_int_equal(wx_post(d, "wechatpay", "EV-complaint-1", "COMPLAINT.CREATE",
	                         "{\"complaint_id\":\"200201820200101080076610000\","
	                         "\"action_type\":\"CREATE_COMPLAINT\"}"),
	                 204);
	assert_int_equal(
	        e2e_db_int(d,
	                   "SELECT COUNT(*) FROM events WHERE idem_key IN ('EV-transfer-1', "
	                   "'EV-combine-1', 'EV-complaint-1') AND outcome = 'done' AND "
	                   "effect = 'recorded' AND kind = '%s'",
	                   "other"),
	        3);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);

	/* Another merchant's, wherever it is named: refused, nothing stored. */
	body = wx_body("EV-transfer-2", "MCHTRANSFER.BILL.FINISHED",
	               "{\"mch_id\":\"1900000002\",\"out_bill_no\":\"plfk2020042014\","
	               "\"state\":\"SUCCESS\",\"transfer_amount\":100}",
	               "nnnnnnnnnnnn");
	wx_sign(&m, body, NULL);
	e2e_expect_unchanged(d, "wechatpay", m.wm_headers, body, 403);
	free(body);
	plain = e2e_expand("{\"combine_mchid\":\"1900000002\",\"combine_out_trade_no\":\"C2-@\","
	                   "\"sub_orders\":[{\"mchid\":\"1900000002\",\"out_trade_no\":\"@\","
	                   "\"trade_state\":\"SUCCESS\"}]}",
	                   id);
	body = wx_body("EV-combine-2", "TRANSACTION.SUCCESS", plain, "oooooooooooo");
	wx_sign(&m, body, NULL);
	e2e_expect_unchanged(d, "wechatpay", m.wm_headers, body, 403);
	free(body);
	free(plain);
	/* A payment that names no merchant is not applied to an order. */
	plain = paid_plain(id, 1000);
	nameless = e2e_replace(plain, "\"mchid\":\"1900000001\",", "");
	body = wx_body("EV-nameless-1", "TRANSACTION.SUCCESS", nameless, "pppppppppppp");
	wx_sign(&m, body, NULL);
	e2e_expect_unchanged(d, "wechatpay", m.wm_headers, body, 403);
	free(body);
	free(nameless);
	free(plain);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);
}

/* One sub-order of a combined payment (合单支付) as WeChat Pay writes it. */
static void wx_sub_order(struct buf *b, const char *mchid, const char *sub_mchid, const char *order,
                         int64_t total, const char *state)
{
	buf_printf(b,
	           "%s{\"mchid\":\"%s\",%s%s%s\"trade_type\":\"JSAPI\",\"trade_state\":\"%s\","
	           "\"bank_type\":\"OTHERS\",\"attach\":\"\",\"success_time\":"
	           "\"2024-12-02T10:00:00+08:00\",\"transaction_id\":\"42001%s\","
	           "\"out_trade_no\":\"%s\",\"amount\":{\"total_amount\":%lld,"
	           "\"payer_amount\":%lld,\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}",
	           b->buf_len > 0 && b->buf_data[b->buf_len - 1] == '}' ? "," : "", mchid,
	           sub_mchid != NULL ? "\"sub_mchid\":\"" : "", sub_mchid != NULL ? sub_mchid : "",
	           sub_mchid != NULL ? "\"," : "", state, order, order, (long long)total,
	           (long long)total);
}

/* The decrypted resource of a combined payment around sub-orders subs. */
static char *wx_combine_plain(const char *combine_mchid, const char *subs)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"combine_appid\":\"wxd678efh567hg6787\",\"combine_mchid\":\"%s\","
	           "\"combine_out_trade_no\":\"C20241202001\",\"scene_info\":{\"device_id\":"
	           "\"POS1:1\"},\"sub_orders\":[%s],\"combine_payer_info\":{\"openid\":"
	           "\"o1\"}}",
	           combine_mchid, subs);
	return buf_take(&b, NULL);
}

/* A combined payment pays each sub-order of this merchant's that names one
 * of the shop's orders, once, in the notification's one transaction, each
 * under its own key "<id>:<out_trade_no>"; a sub-order of another merchant
 * changes nothing, even one naming a shop's order. Redeliveries (WeChat
 * Pay encrypts each anew) and concurrent copies are replayed. */
static void test_wechatpay_a_combined_payment_pays_each_of_our_sub_orders_once(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct hres first;
	struct hres again;
	struct buf subs;
	int classes[3];
	char a[64];
	char b[64];
	char c[64];
	char *plain;
	char *body;

	fx_order(d, 1000, "cny", a);
	fx_order(d, 2500, "cny", b);
	fx_order(d, 700, "cny", c);
	buf_init(&subs, 0);
	wx_sub_order(&subs, "1900000001", NULL, a, 1000, "SUCCESS");
	wx_sub_order(&subs, "1900000777", NULL, c, 700, "SUCCESS");
	wx_sub_order(&subs, "1900000001", NULL, b, 2500, "SUCCESS");
	plain = wx_combine_plain("1900000001", subs.buf_data);
	body = wx_body("EV-combine-pay-1", "TRANSACTION.SUCCESS", plain, "cccccccccccc");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &first), 0);
	assert_int_equal(first.hs_status, 204);
	assert_int_equal(first.hs_body_len, 0);
	assert_false(e2e_replayed(&first));
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", a), 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", b), 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", c),
	                 1);
	assert_int_equal(
	        e2e_db_int(d,
	                   "SELECT SUM(points) FROM points_ledger WHERE order_id IN ('%s', '%s')",
	                   a, b),
	        35);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COUNT(*) FROM events WHERE idem_key IN "
	                            "('EV-combine-pay-1:%s', 'EV-combine-pay-1:%s') AND outcome = "
	                            "'done' AND effect = 'paid' AND kind = 'payment_succeeded'",
	                            a, b),
	                 2);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COUNT(*) FROM events WHERE idem_key = "
	                            "'EV-combine-pay-1:%s' AND order_ref = '%s' AND amount = 2500 "
	                            "AND payment_ref = '42001%s'",
	                            b, b, b),
	                 1);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COUNT(*) FROM idempotency_records WHERE idem_key LIKE "
	                            "'EV-combine-pay-1%%'"),
	                 2);

	/* WeChat Pay's retry, encrypted anew: every sub-order replayed. */
	free(body);
	body = wx_body("EV-combine-pay-1", "TRANSACTION.SUCCESS", plain, "dddddddddddd");
	wx_sign(&m, body, NULL);
	assert_int_equal(e2e_post(d, "wechatpay", m.wm_headers, body, &again), 0);
	assert_int_equal(again.hs_status, 204);
	assert_true(e2e_replayed(&again));
	assert_int_equal(e2e_storm_classes(d, "wechatpay", m.wm_headers, body, classes), 0);
	assert_int_equal(classes[0], E2E_STORM);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id IN ('%s', '%s')",
	                   a, b),
	        2);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COUNT(*) FROM idempotency_records WHERE idem_key LIKE "
	                            "'EV-combine-pay-1%%'"),
	                 2);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", c),
	                 1);
	hres_finish(&first);
	hres_finish(&again);
	buf_finish(&subs);
	free(plain);
	free(body);
}

/* A sub-order of ours that cannot be applied (an order the shop does not
 * know, an amount that is not the order's) is acknowledged and stored as a
 * failed event, which alerts and waits for an operator, while the others
 * apply; one that names no order is refused, nothing stored. */
static void test_wechatpay_a_combined_sub_order_not_applied_is_a_failed_event(void **state)
{
	struct daemon *d = *state;
	struct wx_msg m;
	struct buf subs;
	char a[64];
	char b[64];
	char *plain;
	char *body;
	char *nameless;

	fx_order(d, 1000, "cny", a);
	fx_order(d, 2000, "cny", b);
	buf_init(&subs, 0);
	wx_sub_order(&subs, "1900000001", NULL, "ord_nosuchorder0000000000001", 300, "SUCCESS");
	wx_sub_order(&subs, "1900000001", NULL, a, 999, "SUCCESS");
	wx_sub_order(&subs, "1900000001", NULL, b, 2000, "SUCCESS");
	plain = wx_combine_plain("1900000001", subs.buf_data);
	assert_int_equal(wx_post(d, "wechatpay", "EV-combine-fail-1", "TRANSACTION.SUCCESS", plain),
	                 204);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM events WHERE idem_key = "
	                               "'EV-combine-fail-1:ord_nosuchorder0000000000001' AND "
	                               "outcome = 'failed' AND reason = 'unknown_order'"),
	                 1);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COUNT(*) FROM events WHERE idem_key = "
	                            "'EV-combine-fail-1:%s' AND outcome = 'failed' AND "
	                            "reason = 'amount_mismatch'",
	                            a),
	                 1);
	assert_int_equal(e2e_failed_events(d, a), 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", a),
	                 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", b), 1);
	free(plain);

	/* A sub-order of ours without out_trade_no: refused, nothing stored. */
	plain = wx_combine_plain("1900000001", subs.buf_data);
	nameless = e2e_replace(plain, "\"out_trade_no\":\"ord_nosuchorder0000000000001\",", "");
	body = wx_body("EV-combine-fail-2", "TRANSACTION.SUCCESS", nameless, "qqqqqqqqqqqq");
	wx_sign(&m, body, NULL);
	e2e_expect_unchanged(d, "wechatpay", m.wm_headers, body, 400);
	free(body);
	free(nameless);
	free(plain);
	buf_finish(&subs);
}

/* In partner mode a sub-order is ours when its mchid is sp_mchid and its
 * sub_mchid an accepted one; another sub-merchant's changes nothing. */
static void test_wechatpay_partner_mode_pays_its_sub_merchants_combined_sub_orders(void **state)
{
	struct daemon *d = *state;
	struct buf subs;
	char a[64];
	char b[64];
	char *plain;

	fx_order(d, 1200, "cny", a);
	fx_order(d, 1300, "cny", b);
	buf_init(&subs, 0);
	wx_sub_order(&subs, "1900000100", "1900000109", a, 1200, "SUCCESS");
	wx_sub_order(&subs, "1900000100", "1900000555", b, 1300, "SUCCESS");
	plain = wx_combine_plain("1900000100", subs.buf_data);
	assert_int_equal(
	        wx_post(d, "wechatpay-partner", "EV-combine-sp-1", "TRANSACTION.SUCCESS", plain),
	        204);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", a), 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", b),
	                 1);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM events WHERE idem_key LIKE "
	                               "'EV-combine-sp-1%%'"),
	                 1);
	free(plain);
	buf_finish(&subs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_wechatpay_payment_pays_once_and_answers_204),
	        cmocka_unit_test(test_wechatpay_refund_applies_once),
	        cmocka_unit_test(test_wechatpay_probe_is_refused_with_fail_json_and_counted_apart),
	        cmocka_unit_test(test_wechatpay_listener_and_method_refusals_answer_fail_json),
	        cmocka_unit_test(test_wechatpay_a_body_too_slow_gets_its_408_in_fail_json),
	        cmocka_unit_test(test_wechatpay_a_head_too_slow_gets_its_408_in_fail_json),
	        cmocka_unit_test(
	                test_wechatpay_ambiguous_requests_answer_fail_json_and_consume_no_key),
	        cmocka_unit_test(test_wechatpay_refund_then_refund_abnormal_leaves_the_order_paid),
	        cmocka_unit_test(test_wechatpay_partner_mode_pays_refunds_and_closes_refunds),
	        cmocka_unit_test(test_wechatpay_bodies_parsers_disagree_on_consume_no_key),
	        cmocka_unit_test(
	                test_wechatpay_a_serial_configured_in_lower_case_matches_the_header),
	        cmocka_unit_test(
	                test_wechatpay_events_the_shop_does_not_apply_are_recorded_not_refused),
	        cmocka_unit_test(
	                test_wechatpay_a_combined_payment_pays_each_of_our_sub_orders_once),
	        cmocka_unit_test(test_wechatpay_a_combined_sub_order_not_applied_is_a_failed_event),
	        cmocka_unit_test(
	                test_wechatpay_partner_mode_pays_its_sub_merchants_combined_sub_orders),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
