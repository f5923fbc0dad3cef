/* test_stripe_e2e.c: Stripe callbacks over real HTTP against the real daemon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "stripe_common.h"

static int setup(void **state)
{
	return daemon_setup(state, TEST_STRIPE_INI);
}


static void post_ok(struct daemon *d, const char *body, struct hres *r)
{
	assert_int_equal(hn_post_stripe(d, "stripe", TEST_STRIPE_SECRET, body, r), 0);
	assert_int_equal(r->hs_status, 200);
}

static void test_payment_marks_order_paid_and_awards_points_once(void **state)
{
	struct daemon *d = *state;
	struct hres first;
	struct hres again;
	char id[64];
	char *body;
	char *replayed;

	assert_int_equal(hn_order_create(d, 1999, "usd", id), 0);
	body = test_pi_succeeded("evt_pay_once", id, 1999, "usd");
	post_ok(d, body, &first);
	assert_non_null(strstr(first.hs_body, id));
	assert_null(hres_header(&first, "Idempotent-Replayed"));
	assert_int_equal(test_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 19);

	/* The duplicate gets the stored reply byte for byte, marked replayed. */
	post_ok(d, body, &again);
	assert_int_equal(again.hs_body_len, first.hs_body_len);
	assert_memory_equal(again.hs_body, first.hs_body, first.hs_body_len);
	replayed = hres_header(&again, "Idempotent-Replayed");
	assert_non_null(replayed);
	assert_string_equal(replayed, "true");
	assert_int_equal(test_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM idempotency_records"), 1);
	free(replayed);
	free(body);
	hres_finish(&first);
	hres_finish(&again);
}

static void test_full_refund_after_payment_claws_back_all_points(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *pay;
	char *refund;

	assert_int_equal(hn_order_create(d, 5000, "eur", id), 0);
	pay = test_pi_succeeded("evt_pay_r1", id, 5000, "eur");
	refund = test_charge_refunded("evt_ref_r1", id, 5000, 5000, "re_full_1", "eur");
	post_ok(d, pay, &r);
	hres_finish(&r);
	post_ok(d, refund, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id), 5000);
	assert_int_equal(test_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 0);
	/* The refund delivered again changes nothing. */
	post_ok(d, refund, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 2);
	free(pay);
	free(refund);
}

static void test_partial_refunds_accumulate_until_the_order_is_refunded(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *pay;
	char *part;
	char *rest;

	assert_int_equal(hn_order_create(d, 10000, "usd", id), 0);
	pay = test_pi_succeeded("evt_pay_p", id, 10000, "usd");
	part = test_charge_refunded("evt_ref_p1", id, 10000, 3000, "re_p1", "usd");
	rest = test_charge_refunded("evt_ref_p2", id, 10000, 10000, "re_p2", "usd");
	post_ok(d, pay, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 100);
	post_ok(d, part, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'partially_refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id), 3000);
	assert_int_equal(test_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 70);
	post_ok(d, rest, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id), 10000);
	assert_int_equal(test_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 0);
	/* The older, smaller running total arriving late moves nothing back. */
	post_ok(d, part, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	free(pay);
	free(part);
	free(rest);
}

static void test_refund_delivered_before_its_payment_wins_and_awards_no_points(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *pay;
	char *refund;

	assert_int_equal(hn_order_create(d, 2500, "usd", id), 0);
	pay = test_pi_succeeded("evt_pay_late", id, 2500, "usd");
	refund = test_charge_refunded("evt_ref_early", id, 2500, 2500, "re_early", "usd");
	post_ok(d, refund, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	post_ok(d, pay, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s' AND points > 0", id),
			 0);
	free(pay);
	free(refund);
}

static void test_session_and_intent_events_for_one_payment_pay_once(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *session;
	char *intent;

	assert_int_equal(hn_order_create(d, 1200, "usd", id), 0);
	session = test_session_completed("evt_cs_1", id, 1200, "usd");
	intent = test_pi_succeeded("evt_pi_1", id, 1200, "usd");
	post_ok(d, session, &r);
	hres_finish(&r);
	post_ok(d, intent, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(test_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 12);
	free(session);
	free(intent);
}

static void test_unknown_order_is_acknowledged_and_recorded_as_failed(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char *body = test_pi_succeeded("evt_unknown", "ord_doesnotexist0000000", 100, "usd");

	post_ok(d, body, &r);
	hres_finish(&r);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
					     "'evt_unknown' AND status = 'failed'"),
			 1);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_unknown' AND "
					     "outcome = 'failed' AND reason = 'unknown_order'"),
			 1);
	free(body);
}

static void test_amount_mismatch_leaves_the_order_pending(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *body;

	assert_int_equal(hn_order_create(d, 1999, "usd", id), 0);
	body = test_pi_succeeded("evt_mismatch", id, 1, "usd");
	post_ok(d, body, &r);
	hres_finish(&r);
	assert_int_equal(test_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
					     "'evt_mismatch' AND status = 'failed'"),
			 1);
	free(body);
}

static void test_other_event_types_are_acknowledged_without_effect(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char *body = hn_stripe_event("evt_other", "customer.created", "{\"id\":\"cus_1\",\"object\":\"customer\"}");

	post_ok(d, body, &r);
	hres_finish(&r);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_other' AND "
					     "kind = 'other' AND outcome = 'done'"),
			 1);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_payment_marks_order_paid_and_awards_points_once, setup, daemon_teardown),
		cmocka_unit_test_setup_teardown(test_full_refund_after_payment_claws_back_all_points, setup, daemon_teardown),
		cmocka_unit_test_setup_teardown(test_partial_refunds_accumulate_until_the_order_is_refunded, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_refund_delivered_before_its_payment_wins_and_awards_no_points, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_session_and_intent_events_for_one_payment_pay_once, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_unknown_order_is_acknowledged_and_recorded_as_failed, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_amount_mismatch_leaves_the_order_pending, setup, daemon_teardown),
		cmocka_unit_test_setup_teardown(test_other_event_types_are_acknowledged_without_effect, setup, daemon_teardown),
	};

	return cmocka_run_group_tests_name("stripe end to end", tests, NULL, NULL);
}
