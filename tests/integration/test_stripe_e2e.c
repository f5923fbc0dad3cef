/* test_stripe_e2e.c: Stripe callbacks over real HTTP against the real daemon. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "provider_e2e.h"
#include "fixtures.h"

static int setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI);
}


static void post_ok(struct daemon *d, const char *body, struct hres *r)
{
	assert_int_equal(hn_post_stripe(d, "stripe", FX_STRIPE_SECRET, body, r), 0);
	assert_int_equal(r->hs_status, 200);
	/* Our own JSON acknowledgement ends its line, for people reading it in a terminal. */
	assert_true(r->hs_body_len > 0 && r->hs_body[r->hs_body_len - 1] == '\n');
}

static void test_payment_marks_order_paid_and_awards_points_once(void **state)
{
	struct daemon *d = *state;
	struct hres first;
	struct hres again;
	char id[64];
	char *body;
	char *replayed;

	fx_order(d, 1999, "usd", id);
	body = fx_stripe_payment("evt_pay_once", id, 1999, "usd");
	post_ok(d, body, &first);
	assert_non_null(strstr(first.hs_body, id));
	assert_null(hres_header(&first, "Idempotent-Replayed"));
	assert_int_equal(fx_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 19);

	/* The duplicate gets the stored reply byte for byte, marked replayed. */
	post_ok(d, body, &again);
	assert_int_equal(again.hs_body_len, first.hs_body_len);
	assert_memory_equal(again.hs_body, first.hs_body, first.hs_body_len);
	replayed = hres_header(&again, "Idempotent-Replayed");
	assert_non_null(replayed);
	assert_string_equal(replayed, "true");
	assert_int_equal(fx_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM idempotency_records"), 1);
	free(replayed);
	free(body);
	hres_finish(&first);
	hres_finish(&again);
}

static void test_full_refund_after_payment_claws_back_all_points(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char *pay;
	char *refund;

	fx_order(d, 5000, "eur", id);
	pay = fx_stripe_payment("evt_pay_r1", id, 5000, "eur");
	refund = fx_stripe_refund("evt_ref_r1", id, 5000, 5000, "re_full_1", "eur");
	assert_int_equal(fx_stripe_send(d, pay, NULL), 200);
	assert_int_equal(fx_stripe_send(d, refund, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id), 5000);
	assert_int_equal(fx_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 0);
	/* The refund delivered again changes nothing. */
	assert_int_equal(fx_stripe_send(d, refund, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 2);
	free(pay);
	free(refund);
}

static void test_partial_refunds_accumulate_until_the_order_is_refunded(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char *pay;
	char *part;
	char *rest;

	fx_order(d, 10000, "usd", id);
	pay = fx_stripe_payment("evt_pay_p", id, 10000, "usd");
	part = fx_stripe_refund("evt_ref_p1", id, 10000, 3000, "re_p1", "usd");
	rest = fx_stripe_refund("evt_ref_p2", id, 10000, 10000, "re_p2", "usd");
	assert_int_equal(fx_stripe_send(d, pay, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 100);
	assert_int_equal(fx_stripe_send(d, part, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'partially_refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id), 3000);
	assert_int_equal(fx_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 70);
	assert_int_equal(fx_stripe_send(d, rest, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id), 10000);
	assert_int_equal(fx_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 0);
	/* The older, smaller running total arriving late moves nothing back. */
	assert_int_equal(fx_stripe_send(d, part, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	free(pay);
	free(part);
	free(rest);
}

static void test_refund_delivered_before_its_payment_wins_and_leaves_no_points(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char *pay;
	char *refund;

	fx_order(d, 2500, "usd", id);
	pay = fx_stripe_payment("evt_pay_late", id, 2500, "usd");
	refund = fx_stripe_refund("evt_ref_early", id, 2500, 2500, "re_early", "usd");
	assert_int_equal(fx_stripe_send(d, refund, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(fx_stripe_send(d, pay, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'refunded' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 0);
	free(pay);
	free(refund);
}

static void test_session_and_intent_events_for_one_payment_pay_once(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char *session;
	char *intent;

	fx_order(d, 1200, "usd", id);
	session = fx_stripe_session("evt_cs_1", id, 1200, "usd");
	intent = fx_stripe_payment("evt_pi_1", id, 1200, "usd");
	assert_int_equal(fx_stripe_send(d, session, NULL), 200);
	assert_int_equal(fx_stripe_send(d, intent, NULL), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id), 1);
	assert_int_equal(fx_db_int(d, "SELECT SUM(points) FROM points_ledger WHERE order_id = '%s'", id), 12);
	free(session);
	free(intent);
}

static void test_unknown_order_is_acknowledged_and_recorded_as_failed(void **state)
{
	struct daemon *d = *state;

	assert_int_equal(fx_stripe_pay(d, "evt_unknown", "ord_doesnotexist0000000", 100, "usd"), 200);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
					     "'evt_unknown' AND status = 'failed'"),
			 1);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_unknown' AND "
					     "outcome = 'failed' AND reason = 'unknown_order'"),
			 1);
}

static void test_amount_mismatch_leaves_the_order_pending(void **state)
{
	struct daemon *d = *state;
	char id[64];

	fx_order(d, 1999, "usd", id);
	assert_int_equal(fx_stripe_pay(d, "evt_mismatch", id, 1, "usd"), 200);
	assert_int_equal(fx_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id), 1);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = "
					     "'evt_mismatch' AND status = 'failed'"),
			 1);
}

static void test_other_event_types_are_acknowledged_without_effect(void **state)
{
	struct daemon *d = *state;
	char *body = hn_stripe_event("evt_other", "customer.created", "{\"id\":\"cus_1\",\"object\":\"customer\"}");

	assert_int_equal(fx_stripe_send(d, body, NULL), 200);
	assert_int_equal(hn_db_int(d->dm_db, "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_other' AND "
					     "kind = 'other' AND outcome = 'done'"),
			 1);
	free(body);
}

/* Stripe sends amounts as JSON integers: a signed event whose amount is a
 * string of digits is malformed, refused before any claim, like any other
 * body the profile cannot read. */
static void test_a_string_amount_is_malformed_and_stores_nothing(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char *pay;
	char *body;
	char *before;
	char *after;
	struct hres r;

	fx_order(d, 1999, "usd", id);
	pay = fx_stripe_payment("evt_string_amount", id, 1999, "usd");
	body = e2e_replace(pay, "\"amount_received\":1999", "\"amount_received\":\"1999\"");
	before = hn_db_snapshot(d->dm_db);
	assert_non_null(before);
	assert_int_equal(fx_stripe_send(d, body, &r), 400);
	assert_non_null(strstr(r.hs_body, "\"type\":\"urn:idemhook:problem:malformed_body\""));
	hres_finish(&r);
	after = hn_db_snapshot(d->dm_db);
	assert_non_null(after);
	assert_string_equal(before, after);
	assert_int_equal(fx_db_int(d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", id),
	                 1);
	free(before);
	free(after);
	free(body);
	free(pay);
}

/* Stripe keeps the problems the listener and the route have always
 * answered, byte for byte: provider_error would title them by status. */
static void test_listener_and_method_refusals_stay_the_same_problems(void **state)
{
	struct daemon *d = *state;
	struct e2e_refusals r;

	e2e_refusals(d, "stripe", &r);
	e2e_expect_answer(
	        &r.er_too_large, 413, "application/problem+json",
	        "{\"type\":\"urn:idemhook:problem:body_too_large\",\"title\":\"Request body too "
	        "large\",\"status\":413,\"detail\":\"The body is larger than this server "
	        "accepts.\"}\n",
	        NULL);
	e2e_expect_answer(
	        &r.er_head, 431, "application/problem+json",
	        "{\"type\":\"urn:idemhook:problem:headers_too_large\",\"title\":\"Request header "
	        "fields too large\",\"status\":431,\"detail\":\"The request line and header "
	        "fields are larger than 8192 bytes.\"}\n",
	        NULL);
	e2e_expect_answer(
	        &r.er_get, 405, "application/problem+json",
	        "{\"type\":\"urn:idemhook:problem:method_not_allowed\",\"title\":\"Callbacks are "
	        "POSTed\",\"status\":405}\n",
	        "Allow: POST");
	e2e_refusals_finish(&r);
}

/* ---- the lifecycle: each scenario in order and in reverse, every event twice ---- */

struct stripe_step {
	const char *ss_type;
	const char *ss_object; /* data.object; '@' stands for the order id */
};

struct stripe_scenario {
	const struct stripe_step *sc_steps;
	size_t sc_n;
	const char *sc_status; /* final status, whatever the delivery order */
	int64_t sc_refunded;
	int64_t sc_chargeback;
	int64_t sc_points;
};

#define PI_PAID                                                                                    \
	{"payment_intent.succeeded",                                                               \
	 "{\"id\":\"pi_@\",\"object\":\"payment_intent\",\"amount\":2000,\"amount_received\":2000," \
	 "\"currency\":\"usd\",\"latest_charge\":\"ch_@\",\"metadata\":{\"order_id\":\"@\"}}"}
#define DISPUTE(type, status)                                                                      \
	{type, "{\"id\":\"dp_@\",\"object\":\"dispute\",\"amount\":2000,\"currency\":\"usd\","     \
	       "\"charge\":\"ch_@\",\"payment_intent\":\"pi_@\",\"metadata\":{},\"status\":\"" status \
	       "\"}"}

/* Stripe Checkout: the order is named in client_reference_id, which the
 * charge does not carry; its refund has empty metadata. */
static const struct stripe_step checkout_refund[] = {
        {"checkout.session.completed",
         "{\"id\":\"cs_@\",\"object\":\"checkout.session\",\"amount_total\":2000,"
         "\"currency\":\"usd\",\"payment_status\":\"paid\",\"client_reference_id\":\"@\","
         "\"payment_intent\":\"pi_@\",\"metadata\":{}}"},
        {"charge.refunded",
         "{\"id\":\"ch_@\",\"object\":\"charge\",\"amount\":2000,\"amount_refunded\":2000,"
         "\"currency\":\"usd\",\"payment_intent\":\"pi_@\",\"refunded\":true,\"metadata\":{}}"},
};

static const struct stripe_step dispute_lost[] = {
        PI_PAID,
        DISPUTE("charge.dispute.created", "needs_response"),
        DISPUTE("charge.dispute.funds_withdrawn", "needs_response"),
        DISPUTE("charge.dispute.closed", "lost"),
};

static const struct stripe_step dispute_won[] = {
        PI_PAID,
        DISPUTE("charge.dispute.created", "needs_response"),
        DISPUTE("charge.dispute.closed", "won"),
        DISPUTE("charge.dispute.funds_reinstated", "won"),
};

/* The refund named in the charge's refunds list, then its failure. */
static const struct stripe_step refund_failed[] = {
        PI_PAID,
        {"charge.refunded",
         "{\"id\":\"ch_@\",\"object\":\"charge\",\"amount\":2000,\"amount_refunded\":800,"
         "\"currency\":\"usd\",\"payment_intent\":\"pi_@\",\"metadata\":{},\"refunds\":{"
         "\"object\":\"list\",\"data\":[{\"id\":\"re_@\",\"object\":\"refund\",\"amount\":800}]}}"},
        {"charge.refund.updated",
         "{\"id\":\"re_@\",\"object\":\"refund\",\"amount\":800,\"currency\":\"usd\",\"charge\":"
         "\"ch_@\",\"payment_intent\":\"pi_@\",\"metadata\":{},\"status\":\"failed\","
         "\"failure_reason\":\"expired_or_canceled_card\"}"},
};

/* The same without the refunds list (API versions since 2022-11-15): the
 * refund is counted from the charge's running total. */
static const struct stripe_step refund_failed_total_only[] = {
        PI_PAID,
        {"charge.refunded",
         "{\"id\":\"ch_@\",\"object\":\"charge\",\"amount\":2000,\"amount_refunded\":800,"
         "\"currency\":\"usd\",\"payment_intent\":\"pi_@\",\"metadata\":{}}"},
        {"charge.refund.updated",
         "{\"id\":\"re_@\",\"object\":\"refund\",\"amount\":800,\"currency\":\"usd\",\"charge\":"
         "\"ch_@\",\"payment_intent\":\"pi_@\",\"metadata\":{},\"status\":\"failed\"}"},
};

/* Delivers step i of sc for order id twice; the second is a replay. */
static void deliver_twice(struct daemon *d, const struct stripe_scenario *sc, size_t i,
                          const char *id)
{
	char event_id[96];
	struct hres first;
	struct hres again;
	char *obj = e2e_expand(sc->sc_steps[i].ss_object, id);
	char *body;

	snprintf(event_id, sizeof(event_id), "evt_%zu_%s", i, id);
	body = hn_stripe_event(event_id, sc->sc_steps[i].ss_type, obj);
	post_ok(d, body, &first);
	post_ok(d, body, &again);
	assert_true(e2e_replayed(&again));
	assert_int_equal(again.hs_body_len, first.hs_body_len);
	hres_finish(&first);
	hres_finish(&again);
	free(body);
	free(obj);
}

static void assert_scenario_end(struct daemon *d, const struct stripe_scenario *sc,
                                const char *id)
{
	char status[64];

	snprintf(status, sizeof(status), "%s", sc->sc_status);
	assert_int_equal(fx_db_int(d, "SELECT status = '%s' FROM orders WHERE id = '%s'", status,
	                             id),
	                 1);
	assert_int_equal(fx_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id),
	                 sc->sc_refunded);
	assert_int_equal(fx_db_int(d, "SELECT chargeback_amount FROM orders WHERE id = '%s'", id),
	                 sc->sc_chargeback);
	assert_int_equal(fx_db_int(d,
	                             "SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE "
	                             "order_id = '%s'",
	                             id),
	                 sc->sc_points);
	/* Events that waited for the payment were applied when it came. */
	assert_int_equal(e2e_failed_events(d, id), 0);
	assert_int_equal(fx_db_int(d, "SELECT COUNT(*) FROM order_parked WHERE applied_at IS NULL"),
	                 0);
}

/* Runs sc on a fresh order in order, and on another in reverse. */
static void run_scenario(struct daemon *d, const struct stripe_scenario *sc)
{
	char a[64];
	char b[64];
	size_t i;

	fx_order(d, 2000, "usd", a);
	fx_order(d, 2000, "usd", b);
	for (i = 0; i < sc->sc_n; i++) {
		deliver_twice(d, sc, i, a);
	}
	assert_scenario_end(d, sc, a);
	for (i = sc->sc_n; i-- > 0;) {
		deliver_twice(d, sc, i, b);
	}
	assert_scenario_end(d, sc, b);
}

#define SCENARIO(steps) steps, sizeof(steps) / sizeof(steps[0])

static void test_checkout_refund_with_empty_metadata_finds_its_order_by_payment_intent(
        void **state)
{
	const struct stripe_scenario sc = {SCENARIO(checkout_refund), "refunded", 2000, 0, 0};

	run_scenario(*state, &sc);
}

static void test_dispute_created_then_lost_claws_points_back_once(void **state)
{
	const struct stripe_scenario sc = {SCENARIO(dispute_lost), "refunded", 0, 2000, 0};
	struct daemon *d = *state;

	run_scenario(d, &sc);
	assert_int_equal(fx_db_int(d, "SELECT COUNT(*) FROM points_ledger WHERE reason = "
	                                "'clawback' AND ref = 'dp_' || order_id"),
	                 2);
}

static void test_dispute_created_then_won_restores_the_order(void **state)
{
	const struct stripe_scenario sc = {SCENARIO(dispute_won), "paid", 0, 0, 20};

	run_scenario(*state, &sc);
}

static void test_refund_then_its_failure_leaves_the_order_paid(void **state)
{
	const struct stripe_scenario named = {SCENARIO(refund_failed), "paid", 0, 0, 20};
	const struct stripe_scenario total = {SCENARIO(refund_failed_total_only), "paid", 0, 0, 20};
	struct daemon *d = *state;

	run_scenario(d, &named);
	run_scenario(d, &total);
}

static void test_a_dispute_open_then_the_ack_says_disputed(void **state)
{
	struct daemon *d = *state;
	struct hres r;
	char id[64];
	char *obj;
	char *body;
	char *pay;

	fx_order(d, 2000, "usd", id);
	obj = e2e_expand(dispute_lost[0].ss_object, id);
	pay = hn_stripe_event("evt_ack_pay", "payment_intent.succeeded", obj);
	free(obj);
	assert_int_equal(fx_stripe_send(d, pay, NULL), 200);
	obj = e2e_expand(dispute_lost[1].ss_object, id);
	body = hn_stripe_event("evt_ack_dispute", "charge.dispute.created", obj);
	post_ok(d, body, &r);
	assert_non_null(strstr(r.hs_body, "\"outcome\":\"disputed\""));
	assert_non_null(strstr(r.hs_body, id));
	hres_finish(&r);
	assert_int_equal(fx_db_int(d, "SELECT status = 'disputed' FROM orders WHERE id = '%s'", id),
	                 1);
	free(obj);
	free(body);
	free(pay);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_payment_marks_order_paid_and_awards_points_once, setup, daemon_teardown),
		cmocka_unit_test_setup_teardown(test_full_refund_after_payment_claws_back_all_points, setup, daemon_teardown),
		cmocka_unit_test_setup_teardown(test_partial_refunds_accumulate_until_the_order_is_refunded, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_refund_delivered_before_its_payment_wins_and_leaves_no_points, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_session_and_intent_events_for_one_payment_pay_once, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_unknown_order_is_acknowledged_and_recorded_as_failed, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_amount_mismatch_leaves_the_order_pending, setup, daemon_teardown),
		cmocka_unit_test_setup_teardown(test_other_event_types_are_acknowledged_without_effect, setup, daemon_teardown),
		cmocka_unit_test_setup_teardown(test_a_string_amount_is_malformed_and_stores_nothing, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_listener_and_method_refusals_stay_the_same_problems, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(
			test_checkout_refund_with_empty_metadata_finds_its_order_by_payment_intent, setup,
			daemon_teardown),
		cmocka_unit_test_setup_teardown(test_dispute_created_then_lost_claws_points_back_once, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_dispute_created_then_won_restores_the_order, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_refund_then_its_failure_leaves_the_order_paid, setup,
						daemon_teardown),
		cmocka_unit_test_setup_teardown(test_a_dispute_open_then_the_ack_says_disputed, setup,
						daemon_teardown),
	};

	return cmocka_run_group_tests_name("stripe end to end", tests, NULL, NULL);
}
