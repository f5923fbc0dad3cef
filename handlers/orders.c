/* orders.c: the business handler: order payments, refunds and the points ledger. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "log.h"
#include "money.h"
#include "orders.h"

#define ORDERS_ID_PREFIX "ord_"
#define ORDERS_ID_RANDOM 20   /* base32 characters after the prefix */
#define ORDERS_CREATE_TRIES 3 /* fresh ids to try should one collide */
#define ORDERS_QUOTE_LEN 80   /* room for one quoted id in a log line */

/* What one order looks like when an event is applied to it. */
struct orders_state {
	const char *os_id; /* borrowed: the event's reference, which matched exactly */
	int64_t os_amount;
	char os_currency[8];
	int64_t os_refunded;
};

static const char orders_base32[] = "abcdefghijklmnopqrstuvwxyz234567";

static const char ORDERS_SQL_LOAD[] =
        "SELECT amount, currency, refunded_amount FROM orders WHERE id = ?";

static const char ORDERS_SQL_POINTS_SUM[] =
        "SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE order_id = ? AND reason = ?";

/* The only way into 'paid'. */
static const char ORDERS_SQL_PAY[] =
        "UPDATE orders SET status = 'paid', paid_at = ?, provider = ?, payment_ref = ?, "
        "updated_at = ? WHERE id = ? AND status = 'pending'";

static const char ORDERS_SQL_LEDGER_ADD[] =
        "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (order_id, reason, ref) DO NOTHING";

static const char ORDERS_SQL_REFUND_ADD[] =
        "INSERT INTO refunds (order_id, provider, refund_ref, amount, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (order_id, provider, refund_ref) DO NOTHING";

/* The refunded total only grows and the status only moves forward, to
 * partially_refunded or refunded; the guard on the total read before makes it
 * a compare-and-set. */
static const char ORDERS_SQL_REFUND_APPLY[] =
        "UPDATE orders SET refunded_amount = refunded_amount + ?, "
        "status = CASE WHEN refunded_amount + ? >= amount THEN 'refunded' "
        "ELSE 'partially_refunded' END, refunded_at = ?, updated_at = ? "
        "WHERE id = ? AND refunded_amount = ? AND status <> 'refunded' "
        "AND refunded_amount + ? <= amount";

static const char ORDERS_SQL_CREATE[] =
        "INSERT INTO orders (id, amount, currency, status, customer_ref, created_at, updated_at) "
        "VALUES (?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (id) DO NOTHING";

/* floor(a * b / c) for a, b >= 0 and c > 0, saturating at INT64_MAX. The
 * product is formed in two 64-bit halves and divided bit by bit, so no
 * intermediate overflows and no 128-bit type is needed (32-bit targets). */
static int64_t orders_muldiv(int64_t a, int64_t b, int64_t c)
{
	uint64_t a_lo, a_hi, b_lo, b_hi, ll, lh, hl, hh, mid;
	uint64_t hi, lo, rem, q, d;
	int i;

	if (a <= 0 || b <= 0 || c <= 0) {
		return 0;
	}
	a_lo = (uint64_t)a & 0xffffffffu;
	a_hi = (uint64_t)a >> 32;
	b_lo = (uint64_t)b & 0xffffffffu;
	b_hi = (uint64_t)b >> 32;
	ll = a_lo * b_lo;
	lh = a_lo * b_hi;
	hl = a_hi * b_lo;
	hh = a_hi * b_hi;
	mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
	lo = (ll & 0xffffffffu) | (mid << 32);
	hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
	d = (uint64_t)c;
	if (hi >= d) {
		return INT64_MAX; /* the quotient needs more than 64 bits */
	}
	/* Long division of hi:lo by d; rem < d holds before each step. */
	rem = hi;
	q = 0;
	for (i = 63; i >= 0; i--) {
		uint64_t carry = rem >> 63;

		rem = (rem << 1) | ((lo >> i) & 1u);
		q <<= 1;
		/* With carry set the true remainder is 2^64 + rem >= d, and the
		 * wrapping subtraction below yields it minus d exactly. */
		if (carry != 0 || rem >= d) {
			rem -= d;
			q |= 1u;
		}
	}
	if (q > (uint64_t)INT64_MAX) {
		return INT64_MAX;
	}
	return (int64_t)q;
}

/* Loads the order named id. Returns 1 when found (ret filled), 0 when not, -1 on a store error. */
static int orders_load(struct store_tx *tx, const char *id, struct orders_state *ret)
{
	struct store_value p[] = {store_text(id)};
	struct store_row row;
	const char *currency;
	int rc;

	rc = store_query(tx, ORDERS_SQL_LOAD, p, 1, &row);
	if (rc != 1) {
		return rc;
	}
	memset(ret, 0, sizeof(*ret));
	ret->os_id = id;
	ret->os_amount = store_row_int(&row, 0);
	currency = store_row_text(&row, 1);
	snprintf(ret->os_currency, sizeof(ret->os_currency), "%s",
	         currency != NULL ? currency : "");
	ret->os_refunded = store_row_int(&row, 2);
	store_row_finish(&row);
	return 1;
}

/* Fills a refusal and logs it, once, at warning level. */
static void orders_refuse(const char *provider, const struct event *ev, const char *reason,
                          struct orders_result *ret)
{
	char qprov[ORDERS_QUOTE_LEN];
	char qkey[ORDERS_QUOTE_LEN];
	char qref[ORDERS_QUOTE_LEN];

	ret->or_refused = 1;
	snprintf(ret->or_reason, sizeof(ret->or_reason), "%s", reason);
	ret->or_effect = "noop";
	log_warn("orders: refused %s event \"%s\" from \"%s\" for order \"%s\": %s",
	         event_kind_name(ev->ev_kind), log_quote(qkey, sizeof(qkey), ev->ev_key),
	         log_quote(qprov, sizeof(qprov), provider),
	         log_quote(qref, sizeof(qref), ev->ev_order_ref), reason);
}

/* Sum of an order's ledger rows of one reason. Returns 0 or -1. */
static int orders_points_sum(struct store_tx *tx, const char *order_id, const char *reason,
                             int64_t *ret_sum)
{
	struct store_value p[] = {store_text(order_id), store_text(reason)};
	struct store_row row;
	int rc;

	rc = store_query(tx, ORDERS_SQL_POINTS_SUM, p, 2, &row);
	if (rc < 0) {
		return -1;
	}
	*ret_sum = 0;
	if (rc == 1) {
		*ret_sum = store_row_int(&row, 0);
		store_row_finish(&row);
	}
	return 0;
}

/* Adds one ledger row unless (order, reason, ref) is already there. Returns 0 or -1. */
static int orders_ledger_add(struct store_tx *tx, const char *order_id, const char *reason,
                             const char *ref, int64_t points)
{
	struct store_value p[] = {
	        store_text(order_id), store_text(reason),          store_text(ref),
	        store_int(points),    store_int(store_tx_now(tx)),
	};

	return store_exec(tx, ORDERS_SQL_LEDGER_ADD, p, 5, NULL);
}

static int orders_apply_payment(struct store_tx *tx, const struct orders_conf *conf,
                                const char *provider, const struct event *ev,
                                const struct orders_state *os, struct orders_result *ret)
{
	int64_t now = store_tx_now(tx);
	struct store_value p[] = {
	        store_int(now), store_text(provider),  store_text(ev->ev_payment_ref),
	        store_int(now), store_text(os->os_id),
	};
	int64_t changes = 0;
	int64_t points = 0;

	if (store_exec(tx, ORDERS_SQL_PAY, p, 5, &changes) < 0) {
		goto fail;
	}
	if (changes != 1) {
		/* Already paid, or refunded before this payment event arrived: the
		 * conditional update refused it, and no points go with it. */
		ret->or_effect = "noop";
		return 0;
	}
	ret->or_effect = "paid";
	if (conf != NULL) {
		points = orders_muldiv(os->os_amount, conf->oc_points_num, conf->oc_points_den);
	}
	/* ref = the order id: one award per order, whichever event pays it. */
	if (points > 0 && orders_ledger_add(tx, os->os_id, "award", os->os_id, points) < 0) {
		goto fail;
	}
	return 0;
fail:
	return -1;
}

/* Claws back points so that the clawed total becomes floor(awarded * refunded / amount),
 * all of it once the order is fully refunded, recorded under the refund's id. Taking
 * the difference to what is already clawed keeps rounding from leaving points behind. */
static int orders_clawback(struct store_tx *tx, const struct orders_state *os,
                           const char *refund_ref, int64_t refunded)
{
	int64_t awarded;
	int64_t clawed;
	int64_t target;

	if (orders_points_sum(tx, os->os_id, "award", &awarded) < 0) {
		goto fail;
	}
	if (awarded <= 0) {
		return 0;
	}
	if (orders_points_sum(tx, os->os_id, "clawback", &clawed) < 0) {
		goto fail;
	}
	clawed = -clawed; /* clawback rows hold negative points */
	if (refunded >= os->os_amount) {
		target = awarded;
	} else {
		target = orders_muldiv(awarded, refunded, os->os_amount);
	}
	if (target > clawed &&
	    orders_ledger_add(tx, os->os_id, "clawback", refund_ref, -(target - clawed)) < 0) {
		goto fail;
	}
	return 0;
fail:
	return -1;
}

/* The part of a refund event not yet counted, capped at what is left of the order. */
static int64_t orders_refund_delta(const struct event *ev, const struct orders_state *os,
                                   const char *refund_ref)
{
	int64_t left = os->os_amount - os->os_refunded;
	int64_t delta;

	if (ev->ev_refund_cumulative) {
		/* A running total: an older, smaller one gives delta <= 0. */
		delta = ev->ev_amount - os->os_refunded;
	} else {
		delta = ev->ev_amount;
	}
	if (delta > left) {
		char qref[ORDERS_QUOTE_LEN];
		char qid[ORDERS_QUOTE_LEN];

		if (left > 0) {
			log_warn("orders: refund \"%s\" of order \"%s\" exceeds what is left; "
			         "counting %lld",
			         log_quote(qref, sizeof(qref), refund_ref),
			         log_quote(qid, sizeof(qid), os->os_id), (long long)left);
		}
		delta = left;
	}
	return delta;
}

/* Records one provider refund unless (order, provider, ref) is already there.
 * Returns 1 when recorded, 0 when it was already there, -1 on a store error. */
static int orders_refund_add(struct store_tx *tx, const char *provider,
                             const struct orders_state *os, const char *ref, int64_t delta)
{
	struct store_value p[] = {
	        store_text(os->os_id), store_text(provider),        store_text(ref),
	        store_int(delta),      store_int(store_tx_now(tx)),
	};
	int64_t changes = 0;

	if (store_exec(tx, ORDERS_SQL_REFUND_ADD, p, 5, &changes) < 0) {
		return -1;
	}
	return changes == 1 ? 1 : 0;
}

/* "<ref>@<total>", malloc'd, or NULL when out of memory. */
static char *orders_ref_at_total(const char *ref, int64_t total)
{
	size_t len = strlen(ref) + 32;
	char *s = malloc(len);

	if (s != NULL) {
		snprintf(s, len, "%s@%lld", ref, (long long)total);
	}
	return s;
}

static int orders_apply_refund(struct store_tx *tx, const char *provider, const struct event *ev,
                               const struct orders_state *os, struct orders_result *ret)
{
	/* Without a refund id, the event id is the best key there is. */
	const char *refund_ref = ev->ev_refund_ref != NULL ? ev->ev_refund_ref : ev->ev_key;
	int64_t now = store_tx_now(tx);
	int64_t changes = 0;
	char *ref_at_total = NULL;
	int64_t delta;
	int64_t refunded;
	int added;

	if (ev->ev_amount < 0) {
		orders_refuse(provider, ev, "invalid_amount", ret);
		return 0;
	}
	if (ev->ev_currency[0] != '\0' && strcmp(ev->ev_currency, os->os_currency) != 0) {
		orders_refuse(provider, ev, "currency_mismatch", ret);
		return 0;
	}
	if (refund_ref == NULL) {
		orders_refuse(provider, ev, "missing_refund_ref", ret);
		return 0;
	}
	delta = orders_refund_delta(ev, os, refund_ref);
	if (delta <= 0) {
		ret->or_effect = "noop";
		return 0;
	}
	added = orders_refund_add(tx, provider, os, refund_ref, delta);
	if (added == 0 && ev->ev_refund_cumulative) {
		/* The running total grew under an id that was already counted: the
		 * provider names the charge, not each refund (Stripe's
		 * charge.refunded without its refunds list). Totals only grow, so
		 * the id and the total together name this refund. */
		ref_at_total = orders_ref_at_total(refund_ref, ev->ev_amount);
		if (ref_at_total == NULL) {
			log_err("orders: out of memory");
			goto fail;
		}
		refund_ref = ref_at_total;
		added = orders_refund_add(tx, provider, os, refund_ref, delta);
	}
	if (added < 0) {
		goto fail;
	}
	if (added == 0) {
		/* This provider refund was already counted. */
		ret->or_effect = "noop";
		goto done;
	}
	{
		struct store_value p[] = {
		        store_int(delta), store_int(delta),      store_int(now),
		        store_int(now),   store_text(os->os_id), store_int(os->os_refunded),
		        store_int(delta),
		};

		if (store_exec(tx, ORDERS_SQL_REFUND_APPLY, p, 7, &changes) < 0) {
			goto fail;
		}
	}
	if (changes != 1) {
		/* Another writer moved the order between our read and this update
		 * (only possible with a shared database): transient, retry later. */
		char qid[ORDERS_QUOTE_LEN];

		log_warn("orders: order \"%s\" changed during a refund; retrying",
		         log_quote(qid, sizeof(qid), os->os_id));
		goto fail;
	}
	refunded = os->os_refunded + delta;
	ret->or_effect = refunded >= os->os_amount ? "refunded" : "partially_refunded";
	if (orders_clawback(tx, os, refund_ref, refunded) < 0) {
		goto fail;
	}
done:
	free(ref_at_total);
	return 0;
fail:
	free(ref_at_total);
	return -1;
}

int orders_apply_event(struct store_tx *tx, const struct orders_conf *conf, const char *provider,
                       const struct event *ev, struct orders_result *ret)
{
	struct orders_result res;
	struct orders_state os;
	int found = 0;

	memset(&res, 0, sizeof(res));
	res.or_effect = "noop";
	if (ev->ev_order_ref != NULL && ev->ev_order_ref[0] != '\0') {
		found = orders_load(tx, ev->ev_order_ref, &os);
		if (found < 0) {
			goto fail;
		}
	}
	if (found) {
		snprintf(res.or_order_id, sizeof(res.or_order_id), "%s", os.os_id);
	}
	if (ev->ev_kind != EVENT_PAYMENT_SUCCEEDED && ev->ev_kind != EVENT_REFUNDED) {
		res.or_effect = "recorded";
	} else if (!found) {
		orders_refuse(provider, ev, "unknown_order", &res);
	} else if (ev->ev_kind == EVENT_REFUNDED) {
		if (orders_apply_refund(tx, provider, ev, &os, &res) < 0) {
			goto fail;
		}
	} else if (strcmp(ev->ev_currency, os.os_currency) != 0) {
		orders_refuse(provider, ev, "currency_mismatch", &res);
	} else if (ev->ev_amount != os.os_amount) {
		orders_refuse(provider, ev, "amount_mismatch", &res);
	} else if (orders_apply_payment(tx, conf, provider, ev, &os, &res) < 0) {
		goto fail;
	}
	*ret = res;
	return 0;
fail:
	return -1;
}

int orders_new_id(char out[ORDERS_ID_LEN + 1])
{
	unsigned char rnd[ORDERS_ID_RANDOM];
	char id[ORDERS_ID_LEN + 1];
	size_t plen = strlen(ORDERS_ID_PREFIX);
	size_t i;

	if (crypto_random(rnd, sizeof(rnd)) < 0) {
		goto fail;
	}
	memcpy(id, ORDERS_ID_PREFIX, plen);
	/* 32 divides 256, so the low five bits of a random byte are uniform. */
	for (i = 0; i < ORDERS_ID_RANDOM; i++) {
		id[plen + i] = orders_base32[rnd[i] & 31];
	}
	id[plen + ORDERS_ID_RANDOM] = '\0';
	memcpy(out, id, sizeof(id));
	return 0;
fail:
	return -1;
}

int orders_create(struct store_tx *tx, int64_t amount, const char *currency,
                  const char *customer_ref, char ret_id[ORDERS_ID_LEN + 1])
{
	char id[ORDERS_ID_LEN + 1];
	char cur[4];
	int64_t now = store_tx_now(tx);
	int64_t changes = 0;
	int i;

	if (amount < 0 || amount > MONEY_MAX_MINOR) {
		log_warn("orders: refusing to create an order of %lld minor units",
		         (long long)amount);
		goto fail;
	}
	if (money_currency_normalize(currency, cur) < 0) {
		char q[ORDERS_QUOTE_LEN];

		log_warn("orders: refusing to create an order in currency \"%s\"",
		         log_quote(q, sizeof(q), currency));
		goto fail;
	}
	/* 100 random bits make a collision all but impossible; should one
	 * happen, the insert changes nothing and a new id is drawn. */
	for (i = 0; i < ORDERS_CREATE_TRIES && changes == 0; i++) {
		struct store_value p[6];

		if (orders_new_id(id) < 0) {
			goto fail;
		}
		p[0] = store_text(id);
		p[1] = store_int(amount);
		p[2] = store_text(cur);
		p[3] = store_text(customer_ref);
		p[4] = store_int(now);
		p[5] = store_int(now);
		if (store_exec(tx, ORDERS_SQL_CREATE, p, 6, &changes) < 0) {
			goto fail;
		}
	}
	if (changes != 1) {
		log_err("orders: no free order id after %d tries", ORDERS_CREATE_TRIES);
		goto fail;
	}
	memcpy(ret_id, id, sizeof(id));
	return 0;
fail:
	return -1;
}
