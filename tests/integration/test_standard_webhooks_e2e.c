/* test_standard_webhooks_e2e.c: Standard Webhooks callbacks over real HTTP
 * against the real daemon: paid once, refunded once, duplicates replayed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "buf.h"
#include "crypto.h"
#include "fixtures.h"
#include "provider_e2e.h"

#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

#define SW_INI                                                                                     \
	"[provider billing]\ntype = standard-webhooks\nsecret = " SW_SECRET "\n"                   \
	"paid_types = payment.succeeded\nrefunded_types = payment.refunded\n\n[points]\nrate = "   \
	"1/100\n"

struct sw_msg {
	char sm_id[64];
	char sm_ts[32];
	char sm_sig[128];
	const char *sm_headers[5];
	char sm_h_id[96];
	char sm_h_ts[64];
	char sm_h_sig[160];
};

/* Signs body as a Standard Webhooks sender would, now. */
static void sw_sign(struct sw_msg *m, const char *id, const char *body)
{
	unsigned char *key = NULL;
	size_t key_len = 0;
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	char *b64 = NULL;
	struct buf b;
	const char *secret_b64 = &SW_SECRET[6]; /* after "whsec_" */

	snprintf(m->sm_id, sizeof(m->sm_id), "%s", id);
	snprintf(m->sm_ts, sizeof(m->sm_ts), "%lld", (long long)hn_now_s());
	assert_int_equal(crypto_base64_decode(secret_b64, strlen(secret_b64), &key, &key_len), 0);
	buf_init(&b, 0);
	buf_printf(&b, "%s.%s.%s", m->sm_id, m->sm_ts, body);
	assert_int_equal(crypto_hmac(CRYPTO_SHA256, key, key_len, b.buf_data, b.buf_len, mac, &n),
	                 0);
	assert_int_equal(crypto_base64_encode(mac, n, &b64, NULL), 0);
	snprintf(m->sm_sig, sizeof(m->sm_sig), "v1,%s", b64);
	snprintf(m->sm_h_id, sizeof(m->sm_h_id), "webhook-id: %s", m->sm_id);
	snprintf(m->sm_h_ts, sizeof(m->sm_h_ts), "webhook-timestamp: %s", m->sm_ts);
	snprintf(m->sm_h_sig, sizeof(m->sm_h_sig), "webhook-signature: %s", m->sm_sig);
	m->sm_headers[0] = m->sm_h_id;
	m->sm_headers[1] = m->sm_h_ts;
	m->sm_headers[2] = m->sm_h_sig;
	m->sm_headers[3] = "Content-Type: application/json";
	m->sm_headers[4] = NULL;
	free(b64);
	free(key);
	buf_finish(&b);
}

static char *sw_body(const char *type, const char *order, int64_t amount)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"type\":\"%s\",\"timestamp\":\"2024-12-02T10:00:00Z\",\"data\":{\"order_id\":"
	           "\"%s\","
	           "\"payment_id\":\"pay_%s\",\"amount\":%lld,\"currency\":\"usd\"}}",
	           type, order, order, (long long)amount);
	return buf_take(&b, NULL);
}

static int setup(void **state)
{
	return daemon_setup(state, SW_INI);
}


static void test_standard_webhooks_payment_pays_once_and_duplicates_replay(void **state)
{
	struct daemon *d = *state;
	struct sw_msg m;
	struct hres first;
	struct hres again;
	char id[64];
	char *body;

	fx_order(d, 1999, "usd", id);
	body = sw_body("payment.succeeded", id, 1999);
	sw_sign(&m, "msg_pay_once", body);
	assert_int_equal(e2e_post(d, "billing", m.sm_headers, body, &first), 0);
	assert_int_equal(first.hs_status, 200);
	assert_non_null(strstr(first.hs_body, "\"received\":true"));
	assert_non_null(strstr(first.hs_body, id));
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id),
	        19);

	assert_int_equal(e2e_post(d, "billing", m.sm_headers, body, &again), 0);
	assert_int_equal(again.hs_status, 200);
	assert_int_equal(again.hs_body_len, first.hs_body_len);
	assert_memory_equal(again.hs_body, first.hs_body, first.hs_body_len);
	assert_true(e2e_replayed(&again));

	assert_int_equal(e2e_storm(d, "billing", m.sm_headers, body, 200, &first), E2E_STORM);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(
	                d,
	                "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = 'msg_pay_once'"),
	        1);
	hres_finish(&first);
	hres_finish(&again);
	free(body);
}

static void test_standard_webhooks_concurrent_first_deliveries_pay_once(void **state)
{
	struct daemon *d = *state;
	struct sw_msg m;
	struct hres one;
	int classes[3];
	char id[64];
	char *body;

	fx_order(d, 500, "usd", id);
	body = sw_body("payment.succeeded", id, 500);
	sw_sign(&m, "msg_storm", body);
	/* Nobody has seen this message yet: every copy races for the claim. */
	assert_int_equal(e2e_storm_classes(d, "billing", m.sm_headers, body, classes), 0);
	assert_true(classes[0] >= 1);
	assert_int_equal(classes[2], 0);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(e2e_post(d, "billing", m.sm_headers, body, &one), 0);
	assert_int_equal(one.hs_status, 200);
	assert_true(e2e_replayed(&one));
	hres_finish(&one);
	free(body);
}

static void test_standard_webhooks_refund_applies_once(void **state)
{
	struct daemon *d = *state;
	struct sw_msg pay;
	struct sw_msg refund;
	struct hres r;
	char id[64];
	char *pay_body;
	char *refund_body;

	fx_order(d, 3000, "usd", id);
	pay_body = sw_body("payment.succeeded", id, 3000);
	refund_body = sw_body("payment.refunded", id, 3000);
	sw_sign(&pay, "msg_r_pay", pay_body);
	sw_sign(&refund, "msg_r_refund", refund_body);
	assert_int_equal(e2e_post(d, "billing", pay.sm_headers, pay_body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(e2e_post(d, "billing", refund.sm_headers, refund_body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id),
	        0);
	assert_int_equal(e2e_post(d, "billing", refund.sm_headers, refund_body, &r), 0);
	assert_true(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 2);
	assert_int_equal(e2e_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id),
	                 3000);
	free(pay_body);
	free(refund_body);
}

static void test_standard_webhooks_bad_signature_is_refused_and_consumes_no_key(void **state)
{
	struct daemon *d = *state;
	struct sw_msg m;
	struct hres r;
	char id[64];
	char *body;

	fx_order(d, 700, "usd", id);
	body = sw_body("payment.succeeded", id, 700);
	sw_sign(&m, "msg_forged", body);
	body[strlen(body) - 3] = 'X';
	assert_int_equal(e2e_post(d, "billing", m.sm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(
	                d,
	                "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = 'msg_forged'"),
	        0);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);
	free(body);
}

/* Signed bodies two JSON parsers could read differently are refused before
 * any claim; the message's real delivery still applies afterwards. */
static void test_standard_webhooks_bodies_parsers_disagree_on_consume_no_key(void **state)
{
	struct daemon *d = *state;
	struct sw_msg m;
	struct hres r;
	char id[64];
	char *good;
	char *bad[4];
	struct buf b;
	size_t i;

	fx_order(d, 700, "usd", id);
	good = sw_body("payment.succeeded", id, 700);
	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"type\":\"payment.succeeded\",\"data\":{\"order_id\":\"%s\","
	           "\"amount\":1,\"amount\":700,\"currency\":\"usd\"}}",
	           id);
	bad[0] = buf_take(&b, NULL);
	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"type\":\"payment.succeeded\",\"data\":{\"order_id\":\"%s\\u0000x\","
	           "\"amount\":700,\"currency\":\"usd\"}}",
	           id);
	bad[1] = buf_take(&b, NULL);
	bad[2] = e2e_append(good, "{\"type\":\"payment.refunded\"}");
	bad[3] = e2e_append(good, "\n]");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sw_sign(&m, "msg_strict", bad[i]);
		e2e_expect_unchanged(d, "billing", m.sm_headers, bad[i], 400);
		free(bad[i]);
	}
	sw_sign(&m, "msg_strict", good);
	assert_int_equal(e2e_post(d, "billing", m.sm_headers, good, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_false(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	free(good);
}

/* m's headers under the svix- names (what Svix sends by default). */
static void sw_svix(struct sw_msg *m)
{
	snprintf(m->sm_h_id, sizeof(m->sm_h_id), "svix-id: %s", m->sm_id);
	snprintf(m->sm_h_ts, sizeof(m->sm_h_ts), "svix-timestamp: %s", m->sm_ts);
	snprintf(m->sm_h_sig, sizeof(m->sm_h_sig), "svix-signature: %s", m->sm_sig);
}

/* webhook-id: A and svix-id: B, each with its own valid signature: the
 * idempotency key would be whichever name the receiver prefers, so the
 * request is refused and claims neither key; the same message with both
 * names carrying the same values is taken once. */
static void test_standard_webhooks_webhook_and_svix_ids_that_differ_are_refused(void **state)
{
	struct daemon *d = *state;
	struct sw_msg a;
	struct sw_msg b;
	struct hres r;
	const char *both[8];
	char id[64];
	char *body;

	fx_order(d, 900, "usd", id);
	body = sw_body("payment.succeeded", id, 900);
	sw_sign(&a, "msg_twin_a", body);
	sw_sign(&b, "msg_twin_b", body);
	sw_svix(&b);
	both[0] = a.sm_h_id;
	both[1] = a.sm_h_ts;
	both[2] = a.sm_h_sig;
	both[3] = b.sm_h_id;
	both[4] = b.sm_h_ts;
	both[5] = b.sm_h_sig;
	both[6] = "Content-Type: application/json";
	both[7] = NULL;
	assert_int_equal(e2e_post(d, "billing", both, body, &r), 0);
	assert_int_equal(r.hs_status, 400);
	assert_non_null(strstr(r.hs_body, "repeated_header"));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key IN "
	                               "('msg_twin_a', 'msg_twin_b')"),
	                 0);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);

	/* The same values under both names: one message. */
	b = a;
	sw_svix(&b);
	assert_int_equal(e2e_post(d, "billing", both, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	free(body);
}

/* webhook-id with svix-timestamp and svix-signature, validly signed: a set
 * neither Svix's libraries nor the spec's receiver would take, refused
 * with 400 mixed_headers and nothing claimed; the same message under one
 * family of names pays the order. */
static void test_standard_webhooks_a_mixed_header_set_is_refused(void **state)
{
	struct daemon *d = *state;
	struct sw_msg m;
	struct sw_msg svix;
	struct hres r;
	const char *mixed[5];
	char id[64];
	char *before;
	char *after;
	char *body;

	fx_order(d, 700, "usd", id);
	body = sw_body("payment.succeeded", id, 700);
	sw_sign(&m, "msg_mixed", body);
	svix = m;
	sw_svix(&svix);
	mixed[0] = m.sm_h_id;
	mixed[1] = svix.sm_h_ts;
	mixed[2] = svix.sm_h_sig;
	mixed[3] = "Content-Type: application/json";
	mixed[4] = NULL;
	before = hn_db_snapshot(d->dm_db);
	assert_non_null(before);
	assert_int_equal(e2e_post(d, "billing", mixed, body, &r), 0);
	assert_int_equal(r.hs_status, 400);
	assert_non_null(strstr(r.hs_body, "urn:idemhook:problem:mixed_headers"));
	assert_non_null(strstr(r.hs_body, "mixed"));
	hres_finish(&r);
	after = hn_db_snapshot(d->dm_db);
	assert_non_null(after);
	assert_string_equal(before, after);

	assert_int_equal(e2e_post(d, "billing", m.sm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	free(before);
	free(after);
	free(body);
}

static int64_t sw_field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	assert_true(cJSON_IsNumber(v));
	return (int64_t)v->valuedouble;
}

/* A capture of a message Svix sent under its svix- names, replayed with
 * --to the daemon that took it: signed again under its own id, so it is a
 * duplicate there, never a new message with a made-up id. */
static void test_standard_webhooks_replay_of_a_svix_capture_keeps_its_id(void **state)
{
	struct daemon o;
	struct sw_msg m;
	struct hres r;
	char spool[600];
	const char *args[] = {"replay", "--json", "--to", NULL, spool, NULL};
	char *out = NULL;
	char *body;
	cJSON *s;

	(void)state;
	assert_int_equal(daemon_init(&o, SW_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", o.dm_dir);
	fx_append_config(&o, "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_start(&o), 0);
	body = strdup("{\"type\":\"customer.created\",\"data\":{\"id\":\"cus_1\"}}");
	assert_non_null(body);
	sw_sign(&m, "msg_svix_replay", body);
	sw_svix(&m);
	assert_int_equal(e2e_post(&o, "billing", m.sm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);

	args[3] = o.dm_base;
	assert_int_equal(daemon_cli(&o, 1, args, &out), 0);
	assert_non_null(out);
	s = cJSON_Parse(out);
	if (s == NULL) {
		fail_msg("replay printed no JSON summary: \"%s\"", out);
	}
	assert_int_equal(sw_field(s, "duplicate"), 1);
	assert_int_equal(sw_field(s, "new"), 0);
	cJSON_Delete(s);
	free(out);
	assert_int_equal(e2e_db_int(&o, "SELECT COUNT(*) FROM idempotency_records"), 1);
	assert_int_equal(daemon_term(&o, 20), 0);
	daemon_finish(&o);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_standard_webhooks_payment_pays_once_and_duplicates_replay),
	        cmocka_unit_test(test_standard_webhooks_concurrent_first_deliveries_pay_once),
	        cmocka_unit_test(test_standard_webhooks_refund_applies_once),
	        cmocka_unit_test(
	                test_standard_webhooks_bad_signature_is_refused_and_consumes_no_key),
	        cmocka_unit_test(test_standard_webhooks_bodies_parsers_disagree_on_consume_no_key),
	        cmocka_unit_test(
	                test_standard_webhooks_webhook_and_svix_ids_that_differ_are_refused),
	        cmocka_unit_test(test_standard_webhooks_a_mixed_header_set_is_refused),
	        cmocka_unit_test(test_standard_webhooks_replay_of_a_svix_capture_keeps_its_id),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
