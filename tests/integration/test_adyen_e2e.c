/* test_adyen_e2e.c: Adyen notification batches over real HTTP against the real
 * daemon: one key per item, a forged item refuses the whole batch, business
 * refusals stay per item, a resent batch replays every item. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "crypto.h"
#include "provider_e2e.h"

#define ADYEN_KEY "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"

#define ADYEN_INI                                                                                  \
	"[provider adyen]\ntype = adyen\nhmac_key = " ADYEN_KEY "\nbasic_user = adyen\n"           \
	"basic_password = s3cret\n\n[points]\nrate = 1/100\n"

/* "adyen:s3cret" */
static const char *const adyen_headers[] = {"Authorization: Basic YWR5ZW46czNjcmV0",
                                            "Content-Type: application/json", NULL};

struct item {
	const char *psp;
	const char *orig;
	const char *ref;
	long long value;
	const char *code;
	int forged;
};

static void item_json(struct buf *b, const struct item *it)
{
	unsigned char *key = NULL;
	size_t key_len = 0;
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	char *sig = NULL;
	struct buf data;

	assert_int_equal(crypto_hex_decode(ADYEN_KEY, strlen(ADYEN_KEY), &key, &key_len), 0);
	buf_init(&data, 0);
	buf_printf(&data, "%s:%s:ShopCOM:%s:%lld:EUR:%s:true", it->psp, it->orig, it->ref,
	           it->value, it->code);
	assert_int_equal(
	        crypto_hmac(CRYPTO_SHA256, key, key_len, data.buf_data, data.buf_len, mac, &n), 0);
	if (it->forged) {
		mac[0] ^= 1;
	}
	assert_int_equal(crypto_base64_encode(mac, n, &sig, NULL), 0);
	buf_printf(
	        b,
	        "{\"NotificationRequestItem\":{\"additionalData\":{\"hmacSignature\":\"%s\"},"
	        "\"amount\":{\"currency\":\"EUR\",\"value\":%lld},\"eventCode\":\"%s\","
	        "\"eventDate\":\"2024-12-02T10:00:00+01:00\",\"merchantAccountCode\":\"ShopCOM\","
	        "\"merchantReference\":\"%s\",\"originalReference\":\"%s\",\"pspReference\":\"%s\","
	        "\"reason\":\"\",\"success\":\"true\"}}",
	        sig, it->value, it->code, it->ref, it->orig, it->psp);
	free(sig);
	free(key);
	buf_finish(&data);
}

static char *batch(const struct item *items, size_t n)
{
	struct buf b;
	size_t i;

	buf_init(&b, 0);
	buf_puts(&b, "{\"live\":\"false\",\"notificationItems\":[");
	for (i = 0; i < n; i++) {
		if (i > 0) {
			buf_puts(&b, ",");
		}
		item_json(&b, &items[i]);
	}
	buf_puts(&b, "]}");
	return buf_take(&b, NULL);
}

static int setup(void **state)
{
	return daemon_setup(state, ADYEN_INI);
}


static void post_accepted(struct daemon *d, const char *body, struct hres *r)
{
	assert_int_equal(e2e_post(d, "adyen", adyen_headers, body, r), 0);
	assert_int_equal(r->hs_status, 200);
	assert_int_equal(r->hs_body_len, 10);
	assert_memory_equal(r->hs_body, "[accepted]", 10);
}

static void test_adyen_batch_pays_each_order_once_and_a_resent_batch_replays(void **state)
{
	struct daemon *d = *state;
	struct hres first;
	struct hres again;
	char a[64];
	char b[64];
	char *body;

	assert_int_equal(hn_order_create(d, 1999, "eur", a), 0);
	assert_int_equal(hn_order_create(d, 500, "eur", b), 0);
	{
		const struct item items[] = {{"psp-e2e-a", "", a, 1999, "AUTHORISATION", 0},
		                             {"psp-e2e-b", "", b, 500, "AUTHORISATION", 0}};

		body = batch(items, 2);
	}
	post_accepted(d, body, &first);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", a), 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", b), 1);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key IN "
	                               "('psp-e2e-a:AUTHORISATION', 'psp-e2e-b:AUTHORISATION')"),
	                 2);

	post_accepted(d, body, &again);
	assert_true(e2e_replayed(&again));
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id IN ('%s', '%s')",
	                   a, b),
	        2);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", a),
	        19);
	hres_finish(&first);
	hres_finish(&again);
	free(body);
}

static void test_adyen_one_forged_item_refuses_the_whole_batch(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char a[64];
	char b[64];
	char *body;

	assert_int_equal(hn_order_create(d, 100, "eur", a), 0);
	assert_int_equal(hn_order_create(d, 200, "eur", b), 0);
	{
		const struct item items[] = {{"psp-e2e-f1", "", a, 100, "AUTHORISATION", 0},
		                             {"psp-e2e-f2", "", b, 200, "AUTHORISATION", 1}};

		body = batch(items, 2);
	}
	assert_int_equal(e2e_post(d, "adyen", adyen_headers, body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key "
	                               "LIKE 'psp-e2e-f%%'"),
	                 0);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", a),
	                 1);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", b),
	                 1);
	free(body);
}

static void test_adyen_business_refusal_of_one_item_keeps_the_others(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char a[64];
	char *body;

	assert_int_equal(hn_order_create(d, 300, "eur", a), 0);
	{
		const struct item items[] = {
		        {"psp-e2e-u1", "", a, 300, "AUTHORISATION", 0},
		        {"psp-e2e-u2", "", "ord_doesnotexist0000000", 300, "AUTHORISATION", 0}};

		body = batch(items, 2);
	}
	post_accepted(d, body, &r);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", a), 1);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
	                               "'psp-e2e-u1:AUTHORISATION' AND status = 'done'"),
	                 1);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
	                               "'psp-e2e-u2:AUTHORISATION' AND status = 'failed'"),
	                 1);
	post_accepted(d, body, &r);
	hres_finish(&r);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", a), 1);
	free(body);
}

static void test_adyen_refund_item_applies_once(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char a[64];
	char *pay;
	char *refund;
	int classes[3];

	assert_int_equal(hn_order_create(d, 800, "eur", a), 0);
	{
		const struct item p[] = {{"psp-e2e-r", "", a, 800, "AUTHORISATION", 0}};
		const struct item f[] = {{"psp-e2e-r-refund", "psp-e2e-r", a, 800, "REFUND", 0}};

		pay = batch(p, 1);
		refund = batch(f, 1);
	}
	post_accepted(d, pay, &r);
	hres_finish(&r);
	post_accepted(d, refund, &r);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", a),
	                 1);
	assert_int_equal(e2e_storm_classes(d, "adyen", adyen_headers, refund, classes), 0);
	assert_int_equal(classes[0], E2E_STORM);
	assert_int_equal(
	        e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", a), 2);
	assert_int_equal(
	        e2e_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", a), 0);
	free(pay);
	free(refund);
}

static void test_adyen_wrong_basic_credentials_are_refused(void **state)
{
	static const char *const wrong[] = {"Authorization: Basic YWR5ZW46d3Jvbmc=", NULL};
	struct daemon *d = *state;
	struct hres r;
	char a[64];
	char *body;

	assert_int_equal(hn_order_create(d, 100, "eur", a), 0);
	{
		const struct item items[] = {{"psp-e2e-auth", "", a, 100, "AUTHORISATION", 0}};

		body = batch(items, 1);
	}
	assert_int_equal(e2e_post(d, "adyen", wrong, body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", a),
	                 1);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_adyen_batch_pays_each_order_once_and_a_resent_batch_replays),
	        cmocka_unit_test(test_adyen_one_forged_item_refuses_the_whole_batch),
	        cmocka_unit_test(test_adyen_business_refusal_of_one_item_keeps_the_others),
	        cmocka_unit_test(test_adyen_refund_item_applies_once),
	        cmocka_unit_test(test_adyen_wrong_basic_credentials_are_refused),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
