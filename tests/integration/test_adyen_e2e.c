/* test_adyen_e2e.c: Adyen notification batches over real HTTP against the real
 * daemon: one key per item, a forged item refuses the whole batch, business
 * refusals stay per item, a resent batch replays every item. */
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
#include "fixtures.h"
#include "provider_e2e.h"

#define ADYEN_KEY "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"

#define ADYEN_INI                                                                                  \
	"[provider adyen]\ntype = adyen\nhmac_key = " ADYEN_KEY "\nbasic_user = adyen\n"           \
	"basic_password = s3cret\nretention = 31d\n\n"                                             \
	"[provider adyen-manual]\ntype = adyen\nhmac_key = " ADYEN_KEY "\nbasic_user = adyen\n"    \
	"basic_password = s3cret\nretention = 31d\ncapture = manual\n\n"                           \
	"[provider adyen-nobasic]\ntype = adyen\nhmac_key = " ADYEN_KEY "\nretention = 31d\n"      \
	"capture = manual\n\n[points]\nrate = 1/100\n"

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

	fx_order(d, 1999, "eur", a);
	fx_order(d, 500, "eur", b);
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

	fx_order(d, 100, "eur", a);
	fx_order(d, 200, "eur", b);
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

	fx_order(d, 300, "eur", a);
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

	fx_order(d, 800, "eur", a);
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

	fx_order(d, 100, "eur", a);
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

/* ---- the lifecycle: each scenario in order and in reverse, every batch twice ---- */

struct life_item {
	const char *li_psp; /* '@' stands for the order id */
	const char *li_orig;
	const char *li_ref; /* merchantReference */
	long long li_value;
	const char *li_code;
	const char *li_success;
	const char *li_date;
	const char *li_extra; /* more additionalData members, or NULL */
};

/* One item signed as Adyen signs it, with the order id put in for '@'. */
static void life_item_json(struct buf *b, const struct life_item *it, const char *id)
{
	char *psp = e2e_expand(it->li_psp, id);
	char *orig = e2e_expand(it->li_orig, id);
	char *ref = e2e_expand(it->li_ref, id);
	unsigned char *key = NULL;
	size_t key_len = 0;
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;
	char *sig = NULL;
	struct buf data;

	assert_int_equal(crypto_hex_decode(ADYEN_KEY, strlen(ADYEN_KEY), &key, &key_len), 0);
	buf_init(&data, 0);
	buf_printf(&data, "%s:%s:ShopCOM:%s:%lld:EUR:%s:%s", psp, orig, ref, it->li_value,
	           it->li_code, it->li_success);
	assert_int_equal(
	        crypto_hmac(CRYPTO_SHA256, key, key_len, data.buf_data, data.buf_len, mac, &n), 0);
	assert_int_equal(crypto_base64_encode(mac, n, &sig, NULL), 0);
	buf_printf(b,
	           "{\"NotificationRequestItem\":{\"additionalData\":{\"hmacSignature\":\"%s\"%s%s},"
	           "\"amount\":{\"currency\":\"EUR\",\"value\":%lld},\"eventCode\":\"%s\","
	           "\"eventDate\":\"%s\",\"merchantAccountCode\":\"ShopCOM\","
	           "\"merchantReference\":\"%s\",\"originalReference\":\"%s\",\"pspReference\":\"%s\","
	           "\"reason\":\"\",\"success\":\"%s\"}}",
	           sig, it->li_extra != NULL ? "," : "", it->li_extra != NULL ? it->li_extra : "",
	           it->li_value, it->li_code,
	           it->li_date != NULL ? it->li_date : "2024-12-02T10:00:00+01:00", ref, orig, psp,
	           it->li_success);
	free(sig);
	free(key);
	buf_finish(&data);
	free(psp);
	free(orig);
	free(ref);
}

static char *life_batch(const struct life_item *it, const char *id)
{
	struct buf b;

	buf_init(&b, 0);
	buf_puts(&b, "{\"live\":\"false\",\"notificationItems\":[");
	life_item_json(&b, it, id);
	buf_puts(&b, "]}");
	return buf_take(&b, NULL);
}

struct life_scenario {
	const char *ls_provider;
	const struct life_item *ls_items;
	size_t ls_n;
	const char *ls_status; /* final status, whatever the delivery order */
	int64_t ls_refunded;
	int64_t ls_chargeback;
	int64_t ls_points;
};

static void life_deliver_twice(struct daemon *d, const struct life_scenario *sc, size_t i,
                               const char *id)
{
	char *body = life_batch(&sc->ls_items[i], id);
	struct hres first;
	struct hres again;

	assert_int_equal(e2e_post(d, sc->ls_provider, adyen_headers, body, &first), 0);
	assert_int_equal(first.hs_status, 200);
	assert_memory_equal(first.hs_body, "[accepted]", 10);
	assert_int_equal(e2e_post(d, sc->ls_provider, adyen_headers, body, &again), 0);
	assert_int_equal(again.hs_status, 200);
	assert_true(e2e_replayed(&again));
	hres_finish(&first);
	hres_finish(&again);
	free(body);
}

static void life_assert_end(struct daemon *d, const struct life_scenario *sc, const char *id)
{
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = '%s' FROM orders WHERE id = '%s'", sc->ls_status, id),
	        1);
	assert_int_equal(e2e_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id),
	                 sc->ls_refunded);
	assert_int_equal(e2e_db_int(d, "SELECT chargeback_amount FROM orders WHERE id = '%s'", id),
	                 sc->ls_chargeback);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE "
	                            "order_id = '%s'",
	                            id),
	                 sc->ls_points);
	assert_int_equal(e2e_failed_events(d, id), 0);
}

/* Runs sc on a fresh order in order, and on another in reverse. */
static void life_run(struct daemon *d, const struct life_scenario *sc)
{
	char a[64];
	char b[64];
	size_t i;

	fx_order(d, 2000, "eur", a);
	fx_order(d, 2000, "eur", b);
	for (i = 0; i < sc->ls_n; i++) {
		life_deliver_twice(d, sc, i, a);
	}
	life_assert_end(d, sc, a);
	for (i = sc->ls_n; i-- > 0;) {
		life_deliver_twice(d, sc, i, b);
	}
	life_assert_end(d, sc, b);
}

#define LIFE(provider, items) provider, items, sizeof(items) / sizeof(items[0])
#define AUTH(success) {"pay-@", "", "@", 2000, "AUTHORISATION", success, NULL, NULL}

/* A refund names the payment in originalReference and itself in
 * merchantReference: the order is found by the payment's pspReference. */
static const struct life_item refund_then_failed[] = {
        AUTH("true"),
        {"refund-@", "pay-@", "refund-ref-@", 2000, "REFUND", "true", NULL, NULL},
        {"refund-@", "pay-@", "refund-ref-@", 2000, "REFUND_FAILED", "true", NULL, NULL},
};

static const struct life_item refund_only[] = {
        AUTH("true"),
        {"refund-@", "pay-@", "refund-ref-@", 500, "REFUND", "true", NULL, NULL},
};

static const struct life_item refused_then_granted[] = {AUTH("false"), AUTH("true")};

static const struct life_item cancel_or_refund_paid[] = {
        AUTH("true"),
        {"cor-@", "pay-@", "@", 2000, "CANCEL_OR_REFUND", "true", NULL,
         "\"modification.action\":\"refund\""},
};

static const struct life_item chargeback_lost[] = {
        AUTH("true"),
        {"dispute-@", "pay-@", "@", 2000, "NOTIFICATION_OF_CHARGEBACK", "true", NULL, NULL},
        {"dispute-@", "pay-@", "@", 2000, "CHARGEBACK", "true", NULL, NULL},
        {"dispute-@", "pay-@", "@", 2000, "CHARGEBACK_REVERSED", "true", NULL, NULL},
        {"dispute-@", "pay-@", "@", 2000, "SECOND_CHARGEBACK", "true", NULL, NULL},
};

static const struct life_item chargeback_won[] = {
        AUTH("true"),
        {"dispute-@", "pay-@", "@", 2000, "CHARGEBACK", "true", NULL, NULL},
        {"dispute-@", "pay-@", "@", 2000, "CHARGEBACK_REVERSED", "true", NULL, NULL},
};

/* capture = manual: authorised, captured, the capture rejected, captured again. */
static const struct life_item manual_capture[] = {
        AUTH("true"),
        {"capture-@", "pay-@", "@", 2000, "CAPTURE", "true", "2024-12-02T11:00:00+01:00", NULL},
        {"capture-@", "pay-@", "@", 2000, "CAPTURE_FAILED", "true", "2024-12-03T11:00:00+01:00",
         NULL},
        {"capture-@", "pay-@", "@", 2000, "CAPTURE", "true", "2024-12-04T11:00:00+01:00", NULL},
};

static const struct life_item manual_cancelled[] = {
        AUTH("true"),
        {"cancel-@", "pay-@", "@", 2000, "CANCELLATION", "true", NULL, NULL},
};

static const struct life_item manual_expired[] = {
        AUTH("true"),
        {"expire-@", "pay-@", "@", 2000, "EXPIRE", "true", NULL, NULL},
};

static void test_adyen_refund_by_original_reference_then_refund_failed(void **state)
{
	const struct life_scenario failed = {LIFE("adyen", refund_then_failed), "paid", 0, 0, 20};
	const struct life_scenario refunded = {LIFE("adyen", refund_only), "partially_refunded", 500,
	                                       0, 15};

	life_run(*state, &refunded);
	life_run(*state, &failed);
}

static void test_adyen_authorisation_refused_then_granted_pays_the_order(void **state)
{
	const struct life_scenario sc = {LIFE("adyen", refused_then_granted), "paid", 0, 0, 20};

	life_run(*state, &sc);
}

static void test_adyen_cancel_or_refund_of_a_paid_order_refunds_it(void **state)
{
	const struct life_scenario sc = {LIFE("adyen", cancel_or_refund_paid), "refunded", 2000, 0,
	                                 0};

	life_run(*state, &sc);
}

static void test_adyen_chargeback_lost_claws_back_once_and_won_restores(void **state)
{
	const struct life_scenario lost = {LIFE("adyen", chargeback_lost), "refunded", 0, 2000, 0};
	const struct life_scenario won = {LIFE("adyen", chargeback_won), "paid", 0, 0, 20};
	struct daemon *d = *state;

	life_run(d, &lost);
	life_run(d, &won);
	/* Each order lost its points once, whichever event came last. */
	assert_int_equal(e2e_db_int(d, "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM points_ledger"
	                               " WHERE reason = 'clawback' GROUP BY order_id) AS per_order"),
	                 1);
}

static void test_adyen_manual_capture_authorizes_then_captures(void **state)
{
	const struct life_scenario captured = {LIFE("adyen-manual", manual_capture), "paid", 0, 0,
	                                       20};
	const struct life_scenario cancelled = {LIFE("adyen-manual", manual_cancelled), "cancelled",
	                                        0, 0, 0};
	const struct life_scenario expired = {LIFE("adyen-manual", manual_expired), "expired", 0, 0,
	                                      0};
	struct daemon *d = *state;
	char id[64];
	char *body;
	struct hres r;

	life_run(d, &captured);
	life_run(d, &cancelled);
	life_run(d, &expired);
	/* Between authorisation and capture the order is authorised, no points. */
	fx_order(d, 2000, "eur", id);
	body = life_batch(&manual_capture[0], id);
	assert_int_equal(e2e_post(d, "adyen-manual", adyen_headers, body, &r), 0);
	hres_finish(&r);
	free(body);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'authorized' FROM orders WHERE id = '%s'", id),
	                 1);
	assert_int_equal(e2e_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id),
	                 0);
}

/* Posts one item of the "adyen-nobasic" instance (no HTTP Basic credentials)
 * under date; 1 when it was a duplicate (Idempotent-Replayed). */
static int nobasic_post(struct daemon *d, const struct life_item *it, const char *date,
                        const char *id)
{
	static const char *const headers[] = {"Content-Type: application/json", NULL};
	struct life_item dated = *it;
	struct hres r;
	char *body;
	int replayed;

	dated.li_date = date;
	body = life_batch(&dated, id);
	assert_int_equal(e2e_post(d, "adyen-nobasic", headers, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_memory_equal(r.hs_body, "[accepted]", 10);
	replayed = e2e_replayed(&r);
	hres_finish(&r);
	free(body);
	return replayed;
}

static void nobasic_assert(struct daemon *d, const char *id, const char *status, int64_t points)
{
	assert_int_equal(
	        e2e_db_int(d, "SELECT status = '%s' FROM orders WHERE id = '%s'", status, id), 1);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE "
	                            "order_id = '%s'",
	                            id),
	                 points);
}

/* eventDate is outside the item HMAC. Without HTTP Basic credentials anyone
 * holding one signed CAPTURE or CAPTURE_FAILED item could send it again
 * under a later date: each is a duplicate of the first delivery, and the
 * order keeps its state and its points. The dates decide nothing either:
 * a capture failure stands (the re-capture case, docs/providers.md). */
static void test_adyen_without_basic_credentials_a_redated_capture_is_a_duplicate(void **state)
{
	static const struct life_item capture = {"capture-@", "pay-@", "@",  2000,
	                                         "CAPTURE",   "true",  NULL, NULL};
	static const struct life_item failed = {"capture-@",      "pay-@", "@",  2000,
	                                        "CAPTURE_FAILED", "true",  NULL, NULL};
	static const struct life_item auth = AUTH("true");
	struct daemon *d = *state;
	char a[64];
	char b[64];

	/* The start says what running without the credentials gives up. */
	assert_int_equal(daemon_log_wait(d,
	                                 "provider adyen-nobasic: no basic_user and "
	                                 "basic_password",
	                                 0),
	                 0);
	fx_order(d, 2000, "eur", a);
	assert_false(nobasic_post(d, &auth, NULL, a));
	nobasic_assert(d, a, "authorized", 0);
	assert_false(nobasic_post(d, &capture, "2024-12-02T11:00:00+01:00", a));
	nobasic_assert(d, a, "paid", 20);
	/* The paid order's capture again, re-dated: a duplicate, still paid. */
	assert_true(nobasic_post(d, &capture, "2024-12-06T11:00:00+01:00", a));
	nobasic_assert(d, a, "paid", 20);
	assert_false(nobasic_post(d, &failed, "2024-12-03T11:00:00+01:00", a));
	nobasic_assert(d, a, "authorized", 0);
	/* Neither a re-dated failure nor a capture dated after the failure
	 * (it used to pay the order again) changes anything. */
	assert_true(nobasic_post(d, &failed, "2024-12-07T11:00:00+01:00", a));
	nobasic_assert(d, a, "authorized", 0);
	assert_true(nobasic_post(d, &capture, "2024-12-08T11:00:00+01:00", a));
	nobasic_assert(d, a, "authorized", 0);
	assert_int_equal(e2e_db_int(d,
	                            "SELECT COUNT(*) FROM idempotency_records WHERE idem_key IN "
	                            "('capture-%s:CAPTURE', 'capture-%s:CAPTURE_FAILED')",
	                            a, a),
	                 2);

	/* The audit's order: a failure, a later-dated capture, the failure
	 * re-dated. Unsigned dates do not let the capture outweigh the failure,
	 * and the re-dated failure is a duplicate. */
	fx_order(d, 2000, "eur", b);
	assert_false(nobasic_post(d, &auth, NULL, b));
	assert_false(nobasic_post(d, &failed, "2024-12-06T11:00:00+01:00", b));
	assert_false(nobasic_post(d, &capture, "2024-12-06T12:00:00+01:00", b));
	nobasic_assert(d, b, "authorized", 0);
	assert_true(nobasic_post(d, &failed, "2024-12-06T13:00:00+01:00", b));
	nobasic_assert(d, b, "authorized", 0);
	assert_int_equal(e2e_failed_events(d, a) + e2e_failed_events(d, b), 0);
}

/* Signed batches two JSON parsers could read differently are refused before
 * any claim; the batch's real delivery still applies afterwards. */
static void test_adyen_bodies_parsers_disagree_on_consume_no_key(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char ref[96];
	char cut[112];
	struct item it = {"8835296650159001", "", NULL, 1500, "AUTHORISATION", 0};
	struct hres r;
	char *good;
	char *bad[4];
	size_t i;

	fx_order(d, 1500, "EUR", id);
	it.ref = id;
	good = batch(&it, 1);
	/* a second amount after the signed one */
	bad[0] = e2e_replace(good, "\"eventCode\"",
	                     "\"amount\":{\"currency\":\"EUR\",\"value\":1},\"eventCode\"");
	/* the signature is over the reference cut at the NUL */
	snprintf(ref, sizeof(ref), "\"merchantReference\":\"%s\"", id);
	snprintf(cut, sizeof(cut), "\"merchantReference\":\"%s\\u0000x\"", id);
	bad[1] = e2e_replace(good, ref, cut);
	bad[2] = e2e_append(good, "{\"live\":\"false\"}");
	bad[3] = e2e_append(good, "]");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e2e_expect_unchanged(d, "adyen", adyen_headers, bad[i], 400);
		free(bad[i]);
	}
	post_accepted(d, good, &r);
	assert_false(e2e_replayed(&r));
	hres_finish(&r);
	assert_int_equal(e2e_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	free(good);
}

/* The replay summary's count called name, from `replay --json`'s output. */
static long long replay_count(const char *out, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\":", name);
	p = out != NULL ? strstr(out, key) : NULL;
	assert_non_null(p);
	return strtoll(p + strlen(key), NULL, 10);
}

/* A capture keeps no credential of ours: the Basic password Adyen sends
 * is written as idemhook-redacted. A replay of a capture the instance
 * accepted puts the instance's own credentials back, in-process and over
 * HTTP; one refused for its credentials stays refused. */
static void test_a_capture_keeps_no_basic_password_and_replay_restores_the_instances(void **state)
{
	static const char *const wrong[] = {
	        "Authorization: Basic YWR5ZW46d3Jvbmc=", "Content-Type: application/json", NULL};
	const char *in_process[] = {"replay", "--json", NULL, NULL};
	const char *over_http[] = {"replay", "--json", "--to", NULL, NULL, NULL};
	struct daemon a;
	struct daemon b;
	struct hres r;
	char spool[700];
	char snapshot[700];
	char cmd[2400];
	char order[64];
	char *out = NULL;
	char *body;
	char ini[800];

	(void)state;
	if (hn_backend_is_postgresql()) {
		skip(); /* the databases are copied as files */
	}
	assert_int_equal(daemon_init(&a, ADYEN_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", a.dm_dir);
	snprintf(ini, sizeof(ini), "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_append_config(&a, ini), 0);
	assert_int_equal(hn_order_create(&a, 1999, "eur", order), 0);
	snprintf(snapshot, sizeof(snapshot), "%s/snapshot.db", a.dm_dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", a.dm_db, snapshot);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(daemon_start(&a), 0);
	{
		const struct item items[] = {{"psp-cap-a", "", order, 1999, "AUTHORISATION", 0}};

		body = batch(items, 1);
	}
	post_accepted(&a, body, &r);
	hres_finish(&r);
	assert_int_equal(e2e_post(&a, "adyen", wrong, body, &r), 0);
	assert_int_equal(r.hs_status, 401);
	hres_finish(&r);
	free(body);
	assert_int_equal(daemon_term(&a, 20), 0);
	/* Both captures hold the marker; none holds the password. */
	snprintf(cmd, sizeof(cmd),
	         "test \"$(grep -rl 'Authorization: idemhook-redacted' '%s' | wc -l)\" = 2 && "
	         "! grep -rq -e 'YWR5ZW46czNjcmV0' -e 'YWR5ZW46d3Jvbmc=' '%s'",
	         spool, spool);
	assert_int_equal(system(cmd), 0);

	/* In-process, into the database as it was before the callbacks. */
	assert_int_equal(daemon_init(&b, ADYEN_INI), 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", snapshot, b.dm_db);
	assert_int_equal(system(cmd), 0);
	in_process[2] = spool;
	assert_int_equal(daemon_cli(&b, 1, in_process, &out), 65);
	assert_int_equal(replay_count(out, "new"), 1);
	assert_int_equal(replay_count(out, "rejected"), 1);
	free(out);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	                 1);
	daemon_finish(&b);

	/* Over HTTP, to a daemon that checks the credentials. */
	assert_int_equal(daemon_init(&b, ADYEN_INI), 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", snapshot, b.dm_db);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(daemon_start(&b), 0);
	over_http[3] = b.dm_base;
	over_http[4] = spool;
	out = NULL;
	assert_int_equal(daemon_cli(&b, 1, over_http, &out), 65);
	assert_int_equal(replay_count(out, "new"), 1);
	assert_int_equal(replay_count(out, "rejected"), 1);
	free(out);
	assert_int_equal(daemon_term(&b, 20), 0);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	                 1);
	daemon_finish(&b);
	daemon_finish(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_adyen_bodies_parsers_disagree_on_consume_no_key),
	        cmocka_unit_test(test_adyen_batch_pays_each_order_once_and_a_resent_batch_replays),
	        cmocka_unit_test(test_adyen_one_forged_item_refuses_the_whole_batch),
	        cmocka_unit_test(test_adyen_business_refusal_of_one_item_keeps_the_others),
	        cmocka_unit_test(test_adyen_refund_item_applies_once),
	        cmocka_unit_test(test_adyen_wrong_basic_credentials_are_refused),
	        cmocka_unit_test(test_adyen_refund_by_original_reference_then_refund_failed),
	        cmocka_unit_test(test_adyen_authorisation_refused_then_granted_pays_the_order),
	        cmocka_unit_test(test_adyen_cancel_or_refund_of_a_paid_order_refunds_it),
	        cmocka_unit_test(test_adyen_chargeback_lost_claws_back_once_and_won_restores),
	        cmocka_unit_test(test_adyen_manual_capture_authorizes_then_captures),
	        cmocka_unit_test(
	                test_adyen_without_basic_credentials_a_redated_capture_is_a_duplicate),
	        cmocka_unit_test(
	                test_a_capture_keeps_no_basic_password_and_replay_restores_the_instances),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
