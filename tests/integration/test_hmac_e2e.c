/* test_hmac_e2e.c: generic HMAC (GitHub-style) callbacks over real HTTP
 * against the real daemon: paid once, refunded once, no key refused, and a
 * captured callback replayed under fresh unsigned headers changes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "buf.h"
#include "crypto.h"
#include "fixtures.h"
#include "provider_e2e.h"

#define HMAC_SECRET "It's a Secret to Everybody"

#define HMAC_INI                                                                                   \
	"[provider shop-backend]\ntype = hmac\nsecret = " HMAC_SECRET                              \
	"\nheader = X-Hub-Signature-256\n"                                                         \
	"prefix = sha256=\nkey_header = X-Delivery\nsigned_content = {id}.{body}\n"               \
	"type_path = action\npaid_types = paid\n"                                                 \
	"refunded_types = refunded\norder_path = order.id\namount_path = order.amount\n"           \
	"currency_path = order.currency\n\n"                                                      \
	"[provider shop-body]\ntype = hmac\nsecret = " HMAC_SECRET                                  \
	"\nheader = X-Hub-Signature-256\nprefix = sha256=\nkey_path = event_id\n"                  \
	"type_path = action\npaid_types = paid\n"                                                 \
	"refunded_types = refunded\norder_path = order.id\namount_path = order.amount\n"           \
	"currency_path = order.currency\n\n[points]\nrate = 1/100\n"

/* The example the docs used to give: the key from a header GitHub does not sign. */
#define HMAC_UNSIGNED_KEY_INI                                                                      \
	"[provider github]\ntype = hmac\nsecret = " HMAC_SECRET                                     \
	"\nheader = X-Hub-Signature-256\nprefix = sha256=\nkey_header = X-GitHub-Delivery\n"

struct hmac_msg {
	char hm_sig[2 * CRYPTO_HMAC_MAX + 64];
	char hm_id[96];
	const char *hm_headers[5];
};

/* Signs content (what the instance's signed_content renders to) into m. */
static void hmac_sign_content(struct hmac_msg *m, const char *content, const char *delivery)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	char hex[2 * CRYPTO_HMAC_MAX + 1];
	size_t n = 0;

	assert_int_equal(crypto_hmac(CRYPTO_SHA256, HMAC_SECRET, strlen(HMAC_SECRET), content,
	                             strlen(content), mac, &n),
	                 0);
	crypto_hex_encode(mac, n, hex);
	snprintf(m->hm_sig, sizeof(m->hm_sig), "X-Hub-Signature-256: sha256=%s", hex);
	memset(m->hm_headers, 0, sizeof(m->hm_headers));
	m->hm_headers[0] = m->hm_sig;
	m->hm_headers[1] = "Content-Type: application/json";
	if (delivery != NULL) {
		snprintf(m->hm_id, sizeof(m->hm_id), "X-Delivery: %s", delivery);
		m->hm_headers[2] = m->hm_id;
	}
}

/* As shop-backend signs: "{id}.{body}", the delivery id under the signature. */
static void hmac_sign(struct hmac_msg *m, const char *delivery, const char *body)
{
	struct buf content;

	buf_init(&content, 0);
	buf_printf(&content, "%s.%s", delivery != NULL ? delivery : "", body);
	hmac_sign_content(m, content.buf_data, delivery);
	buf_finish(&content);
}

static char *hmac_body(const char *action, const char *order, int64_t amount)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"action\":\"%s\",\"order\":{\"id\":\"%s\",\"amount\":%lld,\"currency\":"
	           "\"usd\"}}",
	           action, order, (long long)amount);
	return buf_take(&b, NULL);
}

static int setup(void **state)
{
	return daemon_setup(state, HMAC_INI);
}


static void test_hmac_payment_pays_once_and_duplicates_replay(void **state)
{
	struct daemon *d = *state;
	struct hmac_msg m;
	struct hres first;
	struct hres again;
	int classes[3];
	char id[64];
	char *body;

	fx_order(d, 4200, "usd", id);
	body = hmac_body("paid", id, 4200);
	hmac_sign(&m, "delivery-e2e-1", body);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, body, &first), 0);
	assert_int_equal(first.hs_status, 200);
	assert_non_null(strstr(first.hs_body, id));
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	                 1);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, body, &again), 0);
	assert_int_equal(again.hs_body_len, first.hs_body_len);
	assert_memory_equal(again.hs_body, first.hs_body, first.hs_body_len);
	assert_true(e2e_replayed(&again));
	assert_int_equal(e2e_storm_classes(d, "shop-backend", m.hm_headers, body, classes), 0);
	assert_int_equal(classes[0], E2E_STORM);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id),
	        42);
	hres_finish(&first);
	hres_finish(&again);
	free(body);
}

static void test_hmac_refund_applies_once(void **state)
{
	struct daemon *d = *state;
	struct hmac_msg m;
	struct hres r;
	char id[64];
	char *pay;
	char *refund;

	fx_order(d, 1000, "usd", id);
	pay = hmac_body("paid", id, 1000);
	refund = hmac_body("refunded", id, 1000);
	hmac_sign(&m, "delivery-e2e-2", pay);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, pay, &r), 0);
	hres_finish(&r);
	hmac_sign(&m, "delivery-e2e-2-refund", refund);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, refund, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, refund, &r), 0);
	assert_true(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 2);
	free(pay);
	free(refund);
}

static void test_hmac_callback_without_key_is_refused(void **state)
{
	struct daemon *d = *state;
	struct hmac_msg m;
	struct hres r;
	char id[64];
	char *body;

	fx_order(d, 100, "usd", id);
	body = hmac_body("paid", id, 100);
	hmac_sign(&m, NULL, body);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 400);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);
	free(body);
}

static void test_hmac_key_header_outside_the_signature_refuses_to_start(void **state)
{
	struct daemon d;

	(void)state;
	assert_int_equal(daemon_init(&d, HMAC_UNSIGNED_KEY_INI), 0);
	assert_int_equal(daemon_start(&d), -1);
	assert_int_equal(daemon_log_wait(&d, "key_header X-GitHub-Delivery is not covered by the "
	                                     "signature", 0),
	                 0);
	daemon_finish(&d);
}

/* One captured partial refund, replayed under fresh delivery ids and other
 * unsigned headers, refunds once, whether the key is signed in the header
 * ({id}) or taken from the signed body (key_path). */
static void test_hmac_a_captured_refund_replayed_under_fresh_unsigned_headers_refunds_once(
        void **state)
{
	struct daemon *d = *state;
	char header_id[64];
	char body_id[64];
	char extra[64];
	char delivery[64];
	struct hmac_msg m;
	struct hres r;
	char *pay;
	char *refund;
	struct buf b;
	int i;

	fx_order(d, 1000, "usd", header_id);
	fx_order(d, 1000, "usd", body_id);
	pay = hmac_body("paid", header_id, 1000);
	hmac_sign(&m, "replay-pay", pay);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, pay, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	free(pay);
	refund = hmac_body("refunded", header_id, 400);
	hmac_sign(&m, "replay-refund", refund);
	assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, refund, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	for (i = 0; i < 3; i++) {
		snprintf(delivery, sizeof(delivery), "X-Delivery: replay-refund-%d", i);
		snprintf(extra, sizeof(extra), "X-Request-Id: %d", i);
		m.hm_headers[2] = delivery;
		m.hm_headers[3] = extra;
		assert_int_equal(e2e_post(d, "shop-backend", m.hm_headers, refund, &r), 0);
		assert_int_equal(r.hs_status, 401);
		hres_finish(&r);
	}
	assert_int_equal(
	        e2e_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", header_id), 400);
	free(refund);

	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"event_id\":\"evt-pay-%s\",\"action\":\"paid\",\"order\":{\"id\":\"%s\","
	           "\"amount\":1000,\"currency\":\"usd\"}}",
	           body_id, body_id);
	hmac_sign_content(&m, b.buf_data, NULL);
	assert_int_equal(e2e_post(d, "shop-body", m.hm_headers, b.buf_data, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	buf_finish(&b);
	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"event_id\":\"evt-refund-%s\",\"action\":\"refunded\",\"order\":{\"id\":"
	           "\"%s\",\"amount\":400,\"currency\":\"usd\"}}",
	           body_id, body_id);
	hmac_sign_content(&m, b.buf_data, NULL);
	for (i = 0; i < 3; i++) {
		snprintf(delivery, sizeof(delivery), "X-Delivery: replay-body-%d", i);
		snprintf(extra, sizeof(extra), "X-Request-Id: %d", i);
		m.hm_headers[2] = delivery;
		m.hm_headers[3] = extra;
		assert_int_equal(e2e_post(d, "shop-body", m.hm_headers, b.buf_data, &r), 0);
		assert_int_equal(r.hs_status, 200);
		assert_int_equal(e2e_replayed(&r), i > 0);
		hres_finish(&r);
	}
	buf_finish(&b);
	assert_int_equal(
	        e2e_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", body_id), 400);
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = 'partially_refunded' FROM orders WHERE id = '%s'",
	                   body_id),
	        1);
}

/* A sender that signs "{id}.{timestamp}.{body}", with a short tolerance so
 * that a capture a few seconds old is stale as captured. */
#define HMAC_TS_INI                                                                                \
	"[provider shop-ts]\ntype = hmac\nsecret = " HMAC_SECRET "\nheader = X-Signature\n"        \
	"key_header = X-Delivery\ntimestamp_header = X-Timestamp\n"                                \
	"signed_content = {id}.{timestamp}.{body}\ntolerance = 1\n"

static int64_t hmac_field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	assert_true(cJSON_IsNumber(v));
	return (int64_t)v->valuedouble;
}

/* replay --to signs a capture again, now, for the target's clock: on an
 * instance whose key comes from key_header it keeps that header's value as
 * the id it signs, so the capture is new at a second receiver and a
 * duplicate the second time, never sent stale as captured. */
static void test_hmac_replay_to_another_receiver_signs_again_under_the_delivery_id(void **state)
{
	struct daemon o;
	struct daemon t;
	struct hres r;
	struct buf content;
	struct buf body;
	char ts[32];
	char sig[2 * CRYPTO_HMAC_MAX + 32];
	char hex[2 * CRYPTO_HMAC_MAX + 1];
	char h_ts[64];
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	char spool[600];
	const char *headers[5];
	const char *args[] = {"replay", "--json", "--to", NULL, spool, NULL};
	char *out = NULL;
	cJSON *s;

	(void)state;
	assert_int_equal(daemon_init(&o, HMAC_TS_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", o.dm_dir);
	fx_append_config(&o, "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_start(&o), 0);
	fx_daemon_start(&t, HMAC_TS_INI);

	buf_init(&body, 0);
	buf_puts(&body, "{\"action\":\"created\",\"order\":{\"id\":\"x\"}}");
	snprintf(ts, sizeof(ts), "%lld", (long long)hn_now_s());
	buf_init(&content, 0);
	buf_printf(&content, "dlv-replay-1.%s.%s", ts, body.buf_data);
	assert_int_equal(crypto_hmac(CRYPTO_SHA256, HMAC_SECRET, strlen(HMAC_SECRET),
	                             content.buf_data, content.buf_len, mac, &n),
	                 0);
	crypto_hex_encode(mac, n, hex);
	snprintf(sig, sizeof(sig), "X-Signature: %s", hex);
	snprintf(h_ts, sizeof(h_ts), "X-Timestamp: %s", ts);
	headers[0] = sig;
	headers[1] = h_ts;
	headers[2] = "X-Delivery: dlv-replay-1";
	headers[3] = "Content-Type: application/json";
	headers[4] = NULL;
	assert_int_equal(e2e_post(&o, "shop-ts", headers, body.buf_data, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	assert_int_equal(daemon_term(&o, 20), 0);
	/* Past the tolerance: the captured signature is stale now. */
	usleep(2500 * 1000);

	args[3] = t.dm_base;
	assert_int_equal(daemon_cli(&o, 1, args, &out), 0);
	assert_non_null(out);
	s = cJSON_Parse(out);
	if (s == NULL) {
		fail_msg("replay printed no JSON summary: \"%s\"", out);
	}
	assert_int_equal(hmac_field(s, "new"), 1);
	assert_int_equal(hmac_field(s, "rejected"), 0);
	cJSON_Delete(s);
	free(out);
	out = NULL;
	assert_int_equal(e2e_db_int(&t, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
	                                "'dlv-replay-1'"),
	                 1);
	/* Again: the same delivery, a duplicate there. */
	assert_int_equal(daemon_cli(&o, 1, args, &out), 0);
	s = cJSON_Parse(out);
	assert_non_null(s);
	assert_int_equal(hmac_field(s, "duplicate"), 1);
	cJSON_Delete(s);
	free(out);
	assert_int_equal(e2e_db_int(&t, "SELECT COUNT(*) FROM idempotency_records"), 1);
	assert_int_equal(daemon_term(&t, 20), 0);
	daemon_finish(&t);
	daemon_finish(&o);
	buf_finish(&content);
	buf_finish(&body);
}

/* Signed bodies two JSON parsers could read differently are refused before
 * any claim; the event's real delivery still applies afterwards. */
static void test_hmac_bodies_parsers_disagree_on_consume_no_key(void **state)
{
	struct daemon *d = *state;
	struct hmac_msg m;
	struct hres r;
	char id[64];
	char *good;
	char *bad[4];
	struct buf b;
	size_t i;

	fx_order(d, 900, "usd", id);
	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"event_id\":\"evt-strict\",\"action\":\"paid\",\"order\":{\"id\":\"%s\","
	           "\"amount\":900,\"currency\":\"usd\"}}",
	           id);
	good = buf_take(&b, NULL);
	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"event_id\":\"evt-strict\",\"action\":\"paid\",\"order\":{\"id\":\"%s\","
	           "\"amount\":1,\"currency\":\"usd\",\"amount\":900}}",
	           id);
	bad[0] = buf_take(&b, NULL);
	buf_init(&b, 0);
	buf_printf(&b,
	           "{\"event_id\":\"evt-strict\\u0000x\",\"action\":\"paid\",\"order\":{\"id\":"
	           "\"%s\",\"amount\":900,\"currency\":\"usd\"}}",
	           id);
	bad[1] = buf_take(&b, NULL);
	bad[2] = e2e_append(good, "{\"event_id\":\"evt-other\"}");
	bad[3] = e2e_append(good, " 0");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hmac_sign_content(&m, bad[i], NULL);
		e2e_expect_unchanged(d, "shop-body", m.hm_headers, bad[i], 400);
		free(bad[i]);
	}
	hmac_sign_content(&m, good, NULL);
	assert_int_equal(e2e_post(d, "shop-body", m.hm_headers, good, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_false(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	free(good);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_hmac_payment_pays_once_and_duplicates_replay),
	        cmocka_unit_test(test_hmac_refund_applies_once),
	        cmocka_unit_test(test_hmac_callback_without_key_is_refused),
	        cmocka_unit_test(test_hmac_bodies_parsers_disagree_on_consume_no_key),
	        cmocka_unit_test(test_hmac_key_header_outside_the_signature_refuses_to_start),
	        cmocka_unit_test(
	                test_hmac_a_captured_refund_replayed_under_fresh_unsigned_headers_refunds_once),
	        cmocka_unit_test(
	                test_hmac_replay_to_another_receiver_signs_again_under_the_delivery_id),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
