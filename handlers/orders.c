/* orders.c: the business handler: the payment lifecycle of orders (payments,
 * authorisations, captures, refunds and their failures, disputes,
 * cancellations), the references orders are known under, and the points ledger. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "log.h"
#include "money.h"
#include "orders.h"

#define ORDERS_ID_PREFIX "ord_"
#define ORDERS_ID_TIME 10     /* base32 characters of the creation time (ms, 50 bits) */
#define ORDERS_ID_RANDOM 16   /* base32 characters drawn at random (80 bits) */
#define ORDERS_CREATE_TRIES 3 /* fresh ids to try should one collide */
#define ORDERS_QUOTE_LEN 80   /* room for one quoted id in a log line */
#define ORDERS_STATUS_MAX 24
#define ORDERS_RELEASE_REFS_MAX                                                                    \
	16 /* newly bound references whose parked events one unit applies                          \
	    */

/* One order as an event is applied to it: loaded, changed in memory, then
 * saved by one compare-and-set on its revision. Times are ms, 0 for none. */
struct orders_state {
	char os_id[ORDERS_REF_MAX];
	int64_t os_amount;
	char os_currency[8];
	char os_status[ORDERS_STATUS_MAX];
	int64_t os_refunded;
	int64_t os_disputed;   /* held by open disputes */
	int64_t os_chargeback; /* lost to decided disputes */
	int64_t os_open_disputes;
	int64_t os_disputes; /* any, open or decided */
	char os_provider[ORDERS_REF_MAX];
	char os_payment_ref[ORDERS_REF_MAX];
	int64_t os_paid_at;
	int64_t os_refunded_at;
	int64_t os_authorized_at;
	int64_t os_closed_at;
	int64_t os_captured_at;       /* provider time of the newest capture */
	int64_t os_capture_failed_at; /* provider time of the newest capture failure */
	int64_t os_revision;
	int os_dirty; /* something above changed: the row must be saved */
};

/* One call of orders_apply_event: references it newly bound to an order,
 * whose parked events are applied before it returns. */
struct orders_unit {
	struct store_tx *ou_tx;
	const struct orders_conf *ou_conf;
	const char *ou_provider;
	char *ou_refs[ORDERS_RELEASE_REFS_MAX];
	size_t ou_n_refs;
};

/* Base32 digits in ascending byte order, so ids sort as their times do. */
static const char orders_base32[] = "234567abcdefghijklmnopqrstuvwxyz";

/* The order's row and its disputes' sums in one statement: one step of the
 * writer instead of two for every event applied (issue 24, sixth round).
 * No row when the order does not exist; the LEFT JOIN gives an order
 * without disputes one row of NULLs, counted as 0. */
static const char ORDERS_SQL_LOAD[] =
        "SELECT o.id, o.amount, o.currency, o.status, o.refunded_amount, o.provider, "
        "o.payment_ref, o.paid_at, o.refunded_at, o.authorized_at, o.closed_at, o.captured_at, "
        "o.capture_failed_at, o.revision, "
        "COALESCE(SUM(CASE WHEN d.status = 'open' THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN d.status = 'open' THEN d.amount ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN d.status = 'lost' THEN d.amount ELSE 0 END), 0), COUNT(d.id) "
        "FROM orders o LEFT JOIN disputes d ON d.order_id = o.id WHERE o.id = ? GROUP BY o.id";

/* The only write of an order's lifecycle: a compare-and-set on its revision. */
static const char ORDERS_SQL_SAVE[] =
        "UPDATE orders SET status = ?, refunded_amount = ?, disputed_amount = ?, "
        "chargeback_amount = ?, provider = ?, payment_ref = ?, paid_at = ?, refunded_at = ?, "
        "authorized_at = ?, closed_at = ?, captured_at = ?, capture_failed_at = ?, "
        "updated_at = ?, revision = revision + 1 WHERE id = ? AND revision = ?";

static const char ORDERS_SQL_REF_FIND[] =
        "SELECT order_id FROM order_refs WHERE provider = ? AND ref = ?";

static const char ORDERS_SQL_REF_BIND[] =
        "INSERT INTO order_refs (provider, ref, order_id, kind, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (provider, ref) DO NOTHING";

/* The three sums points settle on, in one statement (on PostgreSQL each
 * statement of a claim is a round trip of its batch). Each CASE already
 * picks its reason: a filter `reason IN (...)` beside them would change no
 * sum, and SQLite builds a temporary b-tree for an IN list of three
 * constants every time the statement runs (issue 24, docs/benchmarks.md). */
static const char ORDERS_SQL_POINTS_SUMS[] =
        "SELECT COALESCE(SUM(CASE WHEN reason = 'award' THEN points ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN reason = 'clawback' THEN points ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN reason = 'restore' THEN points ELSE 0 END), 0) "
        "FROM points_ledger WHERE order_id = ?";

static const char ORDERS_SQL_LEDGER_ADD[] =
        "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (order_id, reason, ref) DO NOTHING";

static const char ORDERS_SQL_REFUND_ADD[] =
        "INSERT INTO refunds (order_id, provider, refund_ref, amount, created_at, status, "
        "cumulative, reversed, failed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (order_id, provider, refund_ref) DO NOTHING";

static const char ORDERS_SQL_REFUND_FIND[] =
        "SELECT id, amount, status FROM refunds WHERE order_id = ? AND provider = ? "
        "AND refund_ref = ?";

static const char ORDERS_SQL_REFUND_FAIL[] =
        "UPDATE refunds SET status = 'failed', failed_at = ? WHERE id = ? AND status = 'applied'";

static const char ORDERS_SQL_REFUND_FAILED_SUM[] =
        "SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ? AND provider = ? "
        "AND status = 'failed'";

/* What running totals counted that no failure has given back yet. */
static const char ORDERS_SQL_REFUND_POOL[] =
        "SELECT COALESCE(SUM(CASE WHEN status = 'applied' AND cumulative = 1 THEN amount "
        "WHEN status = 'failed' AND reversed = 1 THEN -amount ELSE 0 END), 0) "
        "FROM refunds WHERE order_id = ? AND provider = ?";

static const char ORDERS_SQL_STEP_ADD[] =
        "INSERT INTO dispute_steps (provider, dispute_ref, step_key, outcome, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (provider, dispute_ref, step_key) DO NOTHING";

static const char ORDERS_SQL_DISPUTE_STATUS[] =
        "SELECT status FROM disputes WHERE order_id = ? AND provider = ? AND dispute_ref = ?";

static const char ORDERS_SQL_DISPUTE_ADD[] =
        "INSERT INTO disputes (order_id, provider, dispute_ref, amount, status, created_at, "
        "updated_at) VALUES (?, ?, ?, ?, 'open', ?, ?) "
        "ON CONFLICT (order_id, provider, dispute_ref) DO NOTHING";

/* A dispute is decided by the count of its decisions: issuers may reverse a
 * win (Adyen's SECOND_CHARGEBACK after CHARGEBACK_REVERSED) and arbitration
 * may reverse that again, each step its own event; the later step always
 * makes its side's count reach or pass the other's, and a tie is lost
 * because a loss only ever follows a win. Counts commute, so the order the
 * steps arrive in does not matter. */
static const char ORDERS_SQL_DISPUTE_STEP[] =
        "UPDATE disputes SET won_steps = won_steps + ?, lost_steps = lost_steps + ?, "
        "amount = CASE WHEN amount < ? THEN ? ELSE amount END, "
        "status = CASE WHEN lost_steps + ? > 0 AND lost_steps + ? >= won_steps + ? THEN 'lost' "
        "WHEN won_steps + ? > 0 THEN 'won' ELSE 'open' END, updated_at = ? "
        "WHERE order_id = ? AND provider = ? AND dispute_ref = ?";

static const char ORDERS_SQL_PARK[] =
        "INSERT INTO order_parked (provider, ref, idem_key, type, kind, order_ref, payment_ref, "
        "charge_ref, refund_ref, amount, currency, refund_cumulative, occurred_at, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (provider, idem_key) DO NOTHING";

static const char ORDERS_SQL_PARKED_NEXT[] =
        "SELECT id, idem_key, type, kind, order_ref, payment_ref, charge_ref, refund_ref, amount, "
        "currency, refund_cumulative, occurred_at FROM order_parked "
        "WHERE provider = ? AND ref = ? AND applied_at IS NULL ORDER BY id LIMIT 1";

static const char ORDERS_SQL_PARKED_DONE[] = "UPDATE order_parked SET applied_at = ? WHERE id = ?";

static const char ORDERS_SQL_PARKED_DONE_KEY[] =
        "UPDATE order_parked SET applied_at = ? WHERE provider = ? AND idem_key = ? "
        "AND applied_at IS NULL";

/* A parked event that has been applied now gets the outcome its first
 * delivery could not (the row ingest wrote when it was parked). */
static const char ORDERS_SQL_EVENT_RELEASED[] =
        "UPDATE idempotency_records SET outcome = ?, effect = ?, reason = ?, processed_at = ?, "
        "reprocessed = reprocessed + 1 WHERE scope = ? AND idem_key = ? AND outcome = 'failed'";

static const char ORDERS_SQL_CREATE[] =
        "INSERT INTO orders (id, amount, currency, status, customer_ref, created_at, updated_at, "
        "owner) VALUES (?, ?, ?, 'pending', ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING";

static int orders_apply_one(struct orders_unit *u, const struct event *ev,
                            struct orders_result *res);

/* ---- loading and saving an order ---- */

static void orders_copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src != NULL ? src : "");
}

static int64_t orders_row_time(const struct store_row *row, size_t i)
{
	return store_row_is_null(row, i) ? 0 : store_row_int(row, i);
}

/* Loads the order named id with its dispute totals. Returns 1 when found
 * (ret filled), 0 when not, -1 on a store error. */
static int orders_load(struct store_tx *tx, const char *id, struct orders_state *ret)
{
	struct store_value p[] = {store_text(id)};
	struct store_row row;
	int rc;

	rc = store_query(tx, ORDERS_SQL_LOAD, p, 1, &row);
	if (rc != 1) {
		return rc;
	}
	memset(ret, 0, sizeof(*ret));
	orders_copy(ret->os_id, sizeof(ret->os_id), store_row_text(&row, 0));
	ret->os_amount = store_row_int(&row, 1);
	orders_copy(ret->os_currency, sizeof(ret->os_currency), store_row_text(&row, 2));
	orders_copy(ret->os_status, sizeof(ret->os_status), store_row_text(&row, 3));
	ret->os_refunded = store_row_int(&row, 4);
	orders_copy(ret->os_provider, sizeof(ret->os_provider), store_row_text(&row, 5));
	orders_copy(ret->os_payment_ref, sizeof(ret->os_payment_ref), store_row_text(&row, 6));
	ret->os_paid_at = orders_row_time(&row, 7);
	ret->os_refunded_at = orders_row_time(&row, 8);
	ret->os_authorized_at = orders_row_time(&row, 9);
	ret->os_closed_at = orders_row_time(&row, 10);
	ret->os_captured_at = orders_row_time(&row, 11);
	ret->os_capture_failed_at = orders_row_time(&row, 12);
	ret->os_revision = store_row_int(&row, 13);
	ret->os_open_disputes = store_row_int(&row, 14);
	ret->os_disputed = store_row_int(&row, 15);
	ret->os_chargeback = store_row_int(&row, 16);
	ret->os_disputes = store_row_int(&row, 17);
	store_row_finish(&row);
	return 1;
}

/* NULL for 0: times and references the order does not have. */
static struct store_value orders_time_value(int64_t t)
{
	return t != 0 ? store_int(t) : store_null();
}

static struct store_value orders_text_value(const char *s)
{
	return s[0] != '\0' ? store_text(s) : store_null();
}

/* Saves os when it changed. Returns 0, or -1 on a store error or when the
 * order changed since it was loaded (only possible with a shared database:
 * transient, the provider's retry runs it again). Only the count is read:
 * on PostgreSQL's lanes the write is held back (store_exec_held), and an
 * order another claim of the batch moved dooms the pass, which then runs
 * one unit at a time and gets here the real count. */
static int orders_save(struct store_tx *tx, struct orders_state *os)
{
	int64_t changes = 0;
	struct store_value p[] = {
	        store_text(os->os_status),
	        store_int(os->os_refunded),
	        store_int(os->os_disputed),
	        store_int(os->os_chargeback),
	        orders_text_value(os->os_provider),
	        orders_text_value(os->os_payment_ref),
	        orders_time_value(os->os_paid_at),
	        orders_time_value(os->os_refunded_at),
	        orders_time_value(os->os_authorized_at),
	        orders_time_value(os->os_closed_at),
	        store_int(os->os_captured_at),
	        orders_time_value(os->os_capture_failed_at),
	        store_int(store_tx_now(tx)),
	        store_text(os->os_id),
	        store_int(os->os_revision),
	};

	if (!os->os_dirty) {
		return 0;
	}
	if (store_exec_held(tx, ORDERS_SQL_SAVE, p, sizeof(p) / sizeof(p[0]), &changes) < 0) {
		return -1;
	}
	if (changes != 1) {
		char qid[ORDERS_QUOTE_LEN];

		log_warn("orders: order \"%s\" changed while an event was applied; retrying",
		         log_quote(qid, sizeof(qid), os->os_id));
		return -1;
	}
	os->os_revision++;
	os->os_dirty = 0;
	return 0;
}

/* Finds the order ev is about: the order id it names, else the order one of
 * its payment references was seen under. Returns 1 (ret filled), 0, or -1. */
static int orders_find(struct store_tx *tx, const char *provider, const struct event *ev,
                       struct orders_state *ret)
{
	const char *refs[] = {ev->ev_payment_ref, ev->ev_charge_ref};
	size_t i;
	int rc;

	if (ev->ev_order_ref != NULL && ev->ev_order_ref[0] != '\0') {
		rc = orders_load(tx, ev->ev_order_ref, ret);
		if (rc != 0) {
			return rc;
		}
	}
	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		struct store_value p[] = {store_text(provider), store_text(refs[i])};
		struct store_row row;
		char id[ORDERS_REF_MAX];

		if (refs[i] == NULL || refs[i][0] == '\0') {
			continue;
		}
		rc = store_query(tx, ORDERS_SQL_REF_FIND, p, 2, &row);
		if (rc < 0) {
			return -1;
		}
		if (rc == 0) {
			continue;
		}
		orders_copy(id, sizeof(id), store_row_text(&row, 0));
		store_row_finish(&row);
		return orders_load(tx, id, ret);
	}
	return 0;
}

/* ---- status ---- */

/* Money has moved on this order: a payment, or a refund or dispute that
 * could only follow one (they may arrive before the payment's own event). */
static int orders_paid_like(const struct orders_state *os)
{
	return os->os_paid_at != 0 || os->os_refunded > 0 || os->os_chargeback > 0 ||
	       os->os_disputes > 0;
}

static int orders_capture_failed(const struct orders_state *os)
{
	return os->os_capture_failed_at != 0 && os->os_capture_failed_at >= os->os_captured_at;
}

/* Refunds and lost disputes, at most the order amount. */
static int64_t orders_reversed(const struct orders_state *os)
{
	int64_t r = os->os_refunded + os->os_chargeback;

	return r > os->os_amount ? os->os_amount : r;
}

/* The status the facts give. Before any money moved the status is whatever
 * pending, authorisation, cancellation or expiry made it. */
static const char *orders_derive_status(const struct orders_state *os)
{
	int64_t reversed = orders_reversed(os);

	if (!orders_paid_like(os)) {
		return os->os_status;
	}
	if (os->os_open_disputes > 0) {
		return "disputed";
	}
	if (reversed > 0 && reversed >= os->os_amount) {
		return "refunded";
	}
	if (reversed > 0) {
		return "partially_refunded";
	}
	if (orders_capture_failed(os)) {
		return "authorized";
	}
	return "paid";
}

static int orders_status_is(const struct orders_state *os, const char *status)
{
	return strcmp(os->os_status, status) == 0;
}

static void orders_set_status(struct orders_state *os, const char *status)
{
	if (!orders_status_is(os, status)) {
		orders_copy(os->os_status, sizeof(os->os_status), status);
		os->os_dirty = 1;
	}
}

/* ---- points ---- */

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

/* An order's ledger sums: points awarded, clawed back (negative) and
 * restored. Returns 0 or -1. */
static int orders_points_sums(struct store_tx *tx, const char *order_id, int64_t *ret_award,
                              int64_t *ret_clawback, int64_t *ret_restore)
{
	struct store_value p[] = {store_text(order_id)};
	struct store_row row;
	int rc;

	rc = store_query(tx, ORDERS_SQL_POINTS_SUMS, p, 1, &row);
	if (rc < 0) {
		return -1;
	}
	*ret_award = 0;
	*ret_clawback = 0;
	*ret_restore = 0;
	if (rc == 1) {
		*ret_award = store_row_int(&row, 0);
		*ret_clawback = store_row_int(&row, 1);
		*ret_restore = store_row_int(&row, 2);
		store_row_finish(&row);
	}
	return 0;
}

/* Adds one ledger row unless (order, reason, ref) is there. Returns 1 when
 * added, 0 when it was there, -1 on error. held: the write may be held back
 * (store_exec_held: 1 then means "added, or the pass is doomed"), for a row
 * that is there only in cases where the pass fails anyway. */
static int orders_ledger_add(struct store_tx *tx, const char *order_id, const char *reason,
                             const char *ref, int64_t points, int held)
{
	struct store_value p[] = {
	        store_text(order_id), store_text(reason),          store_text(ref),
	        store_int(points),    store_int(store_tx_now(tx)),
	};
	int64_t changes = 0;

	if ((held ? store_exec_held(tx, ORDERS_SQL_LEDGER_ADD, p, 5, &changes)
	          : store_exec(tx, ORDERS_SQL_LEDGER_ADD, p, 5, &changes)) < 0) {
		return -1;
	}
	return changes == 1 ? 1 : 0;
}

/* Records an adjustment under ref, or under "<ref>/<key>" when ref already
 * carries one of this reason (a dispute lost, won, then lost again). */
static int orders_ledger_adjust(struct store_tx *tx, const char *order_id, const char *reason,
                                const char *ref, const char *key, int64_t points)
{
	char alt[2 * ORDERS_REF_MAX + 2];
	int rc;

	rc = orders_ledger_add(tx, order_id, reason, ref, points, 0);
	if (rc != 0) {
		return rc < 0 ? -1 : 0;
	}
	snprintf(alt, sizeof(alt), "%s/%s", ref, key != NULL ? key : "");
	rc = orders_ledger_add(tx, order_id, reason, alt, points, 0);
	if (rc == 0) {
		char q[ORDERS_QUOTE_LEN];

		log_warn("orders: points of order \"%s\" already adjusted under \"%s\"",
		         log_quote(q, sizeof(q), order_id), alt);
	}
	return rc < 0 ? -1 : 0;
}

/* Brings the points taken back to floor(awarded * reversed / amount): all of
 * them once refunds and lost disputes reach the amount, or while the capture
 * has failed; fewer again after a refund failed or a dispute was won (a
 * restore row). Taking the difference to what is already taken keeps
 * rounding from leaving points behind. */
/* first_award: NULL to read the ledger's sums; else the award the order's
 * first payment has just added (0 for none), its ledger's only row: one
 * statement fewer per payment (issue 24, sixth round). */
static int orders_points_settle(struct store_tx *tx, const struct orders_state *os, const char *ref,
                                const char *key, const int64_t *first_award)
{
	int64_t reversed = orders_reversed(os);
	int64_t awarded = 0;
	int64_t clawback = 0;
	int64_t restore = 0;
	int64_t taken;
	int64_t target;

	if (first_award != NULL) {
		awarded = *first_award;
	} else if (orders_points_sums(tx, os->os_id, &awarded, &clawback, &restore) < 0) {
		return -1;
	}
	if (awarded <= 0) {
		return 0;
	}
	taken = -(clawback + restore); /* clawback rows are negative, restore rows positive */
	if (orders_capture_failed(os) || (reversed > 0 && reversed >= os->os_amount)) {
		target = awarded;
	} else {
		target = orders_muldiv(awarded, reversed, os->os_amount);
	}
	if (target > taken) {
		return orders_ledger_adjust(tx, os->os_id, "clawback", ref, key, -(target - taken));
	}
	if (target < taken) {
		return orders_ledger_adjust(tx, os->os_id, "restore", ref, key, taken - target);
	}
	return 0;
}

/* Derives the status, saves the order and settles its points under ref
 * (first_award as orders_points_settle's). */
static int orders_settle_award(struct store_tx *tx, struct orders_state *os, const char *ref,
                               const char *key, const int64_t *first_award)
{
	orders_set_status(os, orders_derive_status(os));
	if (orders_save(tx, os) < 0) {
		return -1;
	}
	return orders_points_settle(tx, os, ref, key, first_award);
}

static int orders_settle(struct store_tx *tx, struct orders_state *os, const char *ref,
                         const char *key)
{
	return orders_settle_award(tx, os, ref, key, NULL);
}

/* ---- results ---- */

const char *const orders_refusal_reasons[] = {
        "amount_mismatch",
        "currency_mismatch",
        "invalid_amount",
        "missing_dispute_ref",
        "missing_refund_ref",
        "unknown_order",
        NULL,
};

/* Fills a refusal and logs it, once, at warning level. reason is one of
 * orders_refusal_reasons. */
static void orders_refuse(const char *provider, const struct event *ev, const char *reason,
                          struct orders_result *ret)
{
	char qprov[ORDERS_QUOTE_LEN];
	char qkey[ORDERS_QUOTE_LEN];
	char qref[ORDERS_QUOTE_LEN];

	ret->or_refused = 1;
	snprintf(ret->or_reason, sizeof(ret->or_reason), "%s", reason);
	ret->or_effect = "noop";
	/* An event that names no order is named by its payment, said as such:
	 * a PaymentIntent id is not an order id. */
	if (ev->ev_order_ref != NULL) {
		log_warn("orders: refused %s event \"%s\" from \"%s\" for order \"%s\": %s",
		         event_kind_name(ev->ev_kind), log_quote(qkey, sizeof(qkey), ev->ev_key),
		         log_quote(qprov, sizeof(qprov), provider),
		         log_quote(qref, sizeof(qref), ev->ev_order_ref), reason);
	} else if (ev->ev_payment_ref != NULL) {
		log_warn("orders: refused %s event \"%s\" from \"%s\" for payment \"%s\" "
		         "(the event names no order): %s",
		         event_kind_name(ev->ev_kind), log_quote(qkey, sizeof(qkey), ev->ev_key),
		         log_quote(qprov, sizeof(qprov), provider),
		         log_quote(qref, sizeof(qref), ev->ev_payment_ref), reason);
	} else {
		log_warn("orders: refused %s event \"%s\" from \"%s\" (the event names no order "
		         "and no payment): %s",
		         event_kind_name(ev->ev_kind), log_quote(qkey, sizeof(qkey), ev->ev_key),
		         log_quote(qprov, sizeof(qprov), provider), reason);
	}
}

/* 1 when ev carries a currency other than the order's (and refuses it). */
static int orders_currency_refused(const char *provider, const struct event *ev,
                                   const struct orders_state *os, int required,
                                   struct orders_result *res)
{
	if ((required || ev->ev_currency[0] != '\0') &&
	    strcmp(ev->ev_currency, os->os_currency) != 0) {
		orders_refuse(provider, ev, "currency_mismatch", res);
		return 1;
	}
	return 0;
}

/* The reference points of this event are adjusted under. */
static const char *orders_event_ref(const struct event *ev)
{
	return ev->ev_refund_ref != NULL && ev->ev_refund_ref[0] != '\0' ? ev->ev_refund_ref
	                                                                 : ev->ev_key;
}

/* ---- payments ---- */

/* A payment or a capture: money taken. */
static int orders_do_pay(struct orders_unit *u, const struct event *ev, struct orders_state *os,
                         struct orders_result *res)
{
	struct store_tx *tx = u->ou_tx;
	int was_paid = orders_status_is(os, "paid");
	int64_t points = 0;
	int64_t award = 0;
	int award_known = 0;
	int rc;

	if (orders_currency_refused(u->ou_provider, ev, os, 1, res)) {
		return 0;
	}
	if (ev->ev_amount != os->os_amount) {
		orders_refuse(u->ou_provider, ev, "amount_mismatch", res);
		return 0;
	}
	if (ev->ev_occurred_ms > os->os_captured_at) {
		os->os_captured_at = ev->ev_occurred_ms;
		os->os_dirty = 1;
	}
	/* The first payment event records the payment and its award, even when
	 * a refund or dispute overtook it: the points settled below come out
	 * as if the events had arrived in order. */
	if (os->os_paid_at == 0) {
		if (orders_status_is(os, "cancelled") || orders_status_is(os, "expired")) {
			char q[ORDERS_QUOTE_LEN];

			log_warn("orders: order \"%s\" was %s but is paid now",
			         log_quote(q, sizeof(q), os->os_id), os->os_status);
		}
		os->os_paid_at = store_tx_now(tx);
		orders_copy(os->os_provider, sizeof(os->os_provider), u->ou_provider);
		orders_copy(os->os_payment_ref, sizeof(os->os_payment_ref), ev->ev_payment_ref);
		os->os_dirty = 1;
		if (u->ou_conf != NULL) {
			points = orders_muldiv(os->os_amount, u->ou_conf->oc_points_num,
			                       u->ou_conf->oc_points_den);
		}
		/* ref = the order id: one award per order, whichever event pays it.
		 * Only this first payment writes an award, and clawbacks and
		 * restores follow an award, so the ledger held nothing before it:
		 * once it adds its award (or has none to add), its sums are known
		 * without reading them. An award already there (another receiver's,
		 * on a shared database) leaves them to be read.
		 * The insert is held back on PostgreSQL's lanes (taken as added):
		 * an award is only written with the first payment's save, in one
		 * transaction, so one that is there means another payment of this
		 * order committed or ran earlier in this batch after this unit
		 * loaded the order, and moved its revision: orders_save below then
		 * changes no row and dooms the pass anyway, and the batch's rerun,
		 * one unit at a time, reads the real count here. */
		rc = points > 0 ? orders_ledger_add(tx, os->os_id, "award", os->os_id, points, 1)
		                : 1;
		if (rc < 0) {
			return -1;
		}
		award = points > 0 ? points : 0;
		award_known = rc == 1;
	}
	if (orders_settle_award(tx, os, orders_event_ref(ev), ev->ev_key,
	                        award_known ? &award : NULL) < 0) {
		return -1;
	}
	res->or_effect = !was_paid && orders_status_is(os, "paid") ? "paid" : "noop";
	return 0;
}

/* Funds reserved: a pending order becomes authorized until its capture. */
static int orders_do_authorize(struct orders_unit *u, const struct event *ev,
                               struct orders_state *os, struct orders_result *res)
{
	if (orders_currency_refused(u->ou_provider, ev, os, 1, res)) {
		return 0;
	}
	if (ev->ev_amount != os->os_amount) {
		orders_refuse(u->ou_provider, ev, "amount_mismatch", res);
		return 0;
	}
	res->or_effect = "noop";
	if (!orders_paid_like(os) && orders_status_is(os, "pending")) {
		orders_set_status(os, "authorized");
		os->os_authorized_at = store_tx_now(u->ou_tx);
		orders_copy(os->os_provider, sizeof(os->os_provider), u->ou_provider);
		orders_copy(os->os_payment_ref, sizeof(os->os_payment_ref), ev->ev_payment_ref);
		res->or_effect = "authorized";
	}
	return orders_save(u->ou_tx, os);
}

/* A capture rejected after it was reported: the money was not taken after
 * all, until a later capture (by the provider's clock) succeeds. */
static int orders_do_capture_failed(struct orders_unit *u, const struct event *ev,
                                    struct orders_state *os, struct orders_result *res)
{
	int64_t t = ev->ev_occurred_ms != 0 ? ev->ev_occurred_ms : store_tx_now(u->ou_tx);
	int was_failed = orders_capture_failed(os) && orders_paid_like(os);

	if (t > os->os_capture_failed_at) {
		os->os_capture_failed_at = t;
		os->os_dirty = 1;
	}
	if (orders_settle(u->ou_tx, os, orders_event_ref(ev), ev->ev_key) < 0) {
		return -1;
	}
	res->or_effect = !was_failed && orders_paid_like(os) && orders_capture_failed(os)
	                         ? "capture_failed"
	                         : "noop";
	return 0;
}

/* Cancelled or expired: only an order no money has moved on closes. */
static int orders_do_close(struct orders_unit *u, const char *status, struct orders_state *os,
                           struct orders_result *res)
{
	res->or_effect = "noop";
	if (orders_paid_like(os) ||
	    (!orders_status_is(os, "pending") && !orders_status_is(os, "authorized"))) {
		return 0;
	}
	orders_set_status(os, status);
	os->os_closed_at = store_tx_now(u->ou_tx);
	res->or_effect = status;
	return orders_save(u->ou_tx, os);
}

/* ---- refunds ---- */

/* The one-column sum sql gives over the refunds of (order, provider). Returns 0 or -1. */
static int orders_refund_sum(struct store_tx *tx, const char *sql, const char *provider,
                             const struct orders_state *os, int64_t *ret)
{
	struct store_value p[] = {store_text(os->os_id), store_text(provider)};
	struct store_row row;
	int rc;

	rc = store_query(tx, sql, p, 2, &row);
	if (rc < 0) {
		return -1;
	}
	*ret = 0;
	if (rc == 1) {
		*ret = store_row_int(&row, 0);
		store_row_finish(&row);
	}
	return 0;
}

/* The part of a refund event not yet counted, capped at what is left of the
 * order. Returns 0 with *ret_delta, or -1. */
static int orders_refund_delta(struct store_tx *tx, const char *provider, const struct event *ev,
                               const struct orders_state *os, const char *refund_ref,
                               int64_t *ret_delta)
{
	int64_t left = os->os_amount - orders_reversed(os);
	int64_t failed = 0;
	int64_t delta;

	if (ev->ev_refund_cumulative) {
		/* A running total: an older, smaller one gives delta <= 0. The
		 * provider's total still counts refunds that failed later. */
		if (orders_refund_sum(tx, ORDERS_SQL_REFUND_FAILED_SUM, provider, os, &failed) <
		    0) {
			return -1;
		}
		delta = ev->ev_amount - os->os_refunded - failed;
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
	*ret_delta = delta;
	return 0;
}

/* Records one provider refund row unless (order, provider, ref) is there.
 * Returns 1 when recorded, 0 when it was there, -1 on a store error. */
static int orders_refund_add(struct store_tx *tx, const char *provider,
                             const struct orders_state *os, const char *ref, int64_t amount,
                             const char *status, int cumulative, int reversed)
{
	int64_t now = store_tx_now(tx);
	int failed = strcmp(status, "failed") == 0;
	struct store_value p[] = {
	        store_text(os->os_id), store_text(provider), store_text(ref),
	        store_int(amount),     store_int(now),       store_text(status),
	        store_int(cumulative), store_int(reversed),  failed ? store_int(now) : store_null(),
	};
	int64_t changes = 0;

	if (store_exec(tx, ORDERS_SQL_REFUND_ADD, p, 9, &changes) < 0) {
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

/* Counts amount (or, with amount < 0, what ev says) as refund ref. */
static int orders_do_refund(struct orders_unit *u, const struct event *ev, struct orders_state *os,
                            int64_t amount, struct orders_result *res)
{
	struct store_tx *tx = u->ou_tx;
	const char *refund_ref = orders_event_ref(ev);
	char *ref_at_total = NULL;
	int64_t delta = amount;
	int added;

	if (amount < 0 && ev->ev_amount < 0) {
		orders_refuse(u->ou_provider, ev, "invalid_amount", res);
		return 0;
	}
	if (orders_currency_refused(u->ou_provider, ev, os, 0, res)) {
		return 0;
	}
	if (amount < 0) {
		if (refund_ref == NULL) {
			orders_refuse(u->ou_provider, ev, "missing_refund_ref", res);
			return 0;
		}
		if (orders_refund_delta(tx, u->ou_provider, ev, os, refund_ref, &delta) < 0) {
			return -1;
		}
	}
	res->or_effect = "noop";
	if (delta <= 0) {
		return 0;
	}
	added = orders_refund_add(tx, u->ou_provider, os, refund_ref, delta, "applied",
	                          ev->ev_refund_cumulative, 0);
	if (added == 0 && ev->ev_refund_cumulative) {
		/* The running total grew under an id that was already counted: the
		 * provider names the charge, not each refund (Stripe's
		 * charge.refunded without its refunds list). Totals only grow, so
		 * the id and the total together name this refund. */
		ref_at_total = orders_ref_at_total(refund_ref, ev->ev_amount);
		if (ref_at_total == NULL) {
			log_err("orders: out of memory");
			return -1;
		}
		refund_ref = ref_at_total;
		added = orders_refund_add(tx, u->ou_provider, os, refund_ref, delta, "applied", 1,
		                          0);
	}
	if (added <= 0) {
		/* This provider refund was already counted (or a store error). */
		free(ref_at_total);
		return added;
	}
	os->os_refunded += delta;
	os->os_refunded_at = store_tx_now(tx);
	os->os_dirty = 1;
	if (orders_settle(tx, os, refund_ref, ev->ev_key) < 0) {
		free(ref_at_total);
		return -1;
	}
	res->or_effect = orders_reversed(os) >= os->os_amount ? "refunded" : "partially_refunded";
	free(ref_at_total);
	return 0;
}

/* A refund that did not go through gives back exactly what it counted, once.
 * Before its refund arrives it is kept as a failed row, so the refund then
 * counts nothing; a refund only running totals counted (no id of its own)
 * is given back from what they counted. */
static int orders_do_refund_failed(struct orders_unit *u, const struct event *ev,
                                   struct orders_state *os, struct orders_result *res)
{
	struct store_tx *tx = u->ou_tx;
	const char *ref = ev->ev_refund_ref;
	struct store_value p[] = {store_text(os->os_id), store_text(u->ou_provider),
	                          store_text(ref)};
	struct store_row row;
	int64_t given_back = 0;
	int rc;

	res->or_effect = "noop";
	if (ref == NULL || ref[0] == '\0') {
		orders_refuse(u->ou_provider, ev, "missing_refund_ref", res);
		return 0;
	}
	if (orders_currency_refused(u->ou_provider, ev, os, 0, res)) {
		return 0;
	}
	rc = store_query(tx, ORDERS_SQL_REFUND_FIND, p, 3, &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 1) {
		int64_t id = store_row_int(&row, 0);
		int64_t amount = store_row_int(&row, 1);
		int applied = strcmp(store_row_text(&row, 2), "applied") == 0;
		struct store_value q[] = {store_int(store_tx_now(tx)), store_int(id)};
		int64_t changes = 0;

		store_row_finish(&row);
		if (!applied) {
			return 0;
		}
		if (store_exec(tx, ORDERS_SQL_REFUND_FAIL, q, 2, &changes) < 0) {
			return -1;
		}
		given_back = changes == 1 ? amount : 0;
	} else {
		int64_t pool = 0;
		int reversed;

		if (ev->ev_amount <= 0) {
			orders_refuse(u->ou_provider, ev, "invalid_amount", res);
			return 0;
		}
		if (orders_refund_sum(tx, ORDERS_SQL_REFUND_POOL, u->ou_provider, os, &pool) < 0) {
			return -1;
		}
		reversed = pool >= ev->ev_amount && os->os_refunded >= ev->ev_amount;
		rc = orders_refund_add(tx, u->ou_provider, os, ref, ev->ev_amount, "failed", 0,
		                       reversed);
		if (rc < 0) {
			return -1;
		}
		given_back = rc == 1 && reversed ? ev->ev_amount : 0;
	}
	if (given_back <= 0) {
		return 0;
	}
	os->os_refunded -= given_back < os->os_refunded ? given_back : os->os_refunded;
	os->os_dirty = 1;
	if (orders_settle(tx, os, ref, ev->ev_key) < 0) {
		return -1;
	}
	res->or_effect = "refund_failed";
	return 0;
}

/* ---- disputes ---- */

/* Loads the dispute's status into out ("" when there is none). */
static int orders_dispute_status(struct store_tx *tx, const char *provider,
                                 const struct orders_state *os, const char *ref,
                                 char out[ORDERS_STATUS_MAX])
{
	struct store_value p[] = {store_text(os->os_id), store_text(provider), store_text(ref)};
	struct store_row row;
	int rc;

	out[0] = '\0';
	rc = store_query(tx, ORDERS_SQL_DISPUTE_STATUS, p, 3, &row);
	if (rc == 1) {
		orders_copy(out, ORDERS_STATUS_MAX, store_row_text(&row, 0));
		store_row_finish(&row);
	}
	return rc < 0 ? -1 : 0;
}

/* One step of a dispute: opened (funds withheld), won or lost. Each
 * provider event counts once; the dispute's status follows its steps. */
static int orders_do_dispute(struct orders_unit *u, const struct event *ev, struct orders_state *os,
                             struct orders_result *res)
{
	struct store_tx *tx = u->ou_tx;
	const char *ref = ev->ev_refund_ref;
	const char *outcome = ev->ev_kind == EVENT_DISPUTE_WON    ? "won"
	                      : ev->ev_kind == EVENT_DISPUTE_LOST ? "lost"
	                                                          : "opened";
	int64_t won = ev->ev_kind == EVENT_DISPUTE_WON;
	int64_t lost = ev->ev_kind == EVENT_DISPUTE_LOST;
	int64_t amount = ev->ev_amount >= 0 ? ev->ev_amount : os->os_amount;
	int64_t now = store_tx_now(tx);
	char before[ORDERS_STATUS_MAX];
	char after[ORDERS_STATUS_MAX];
	int64_t changes = 0;

	res->or_effect = "noop";
	if (ref == NULL || ref[0] == '\0') {
		orders_refuse(u->ou_provider, ev, "missing_dispute_ref", res);
		return 0;
	}
	if (orders_currency_refused(u->ou_provider, ev, os, 0, res)) {
		return 0;
	}
	{
		struct store_value p[] = {store_text(u->ou_provider), store_text(ref),
		                          store_text(ev->ev_key), store_text(outcome),
		                          store_int(now)};

		if (store_exec(tx, ORDERS_SQL_STEP_ADD, p, 5, &changes) < 0) {
			return -1;
		}
	}
	if (changes != 1) {
		return 0; /* this step was counted */
	}
	if (orders_dispute_status(tx, u->ou_provider, os, ref, before) < 0) {
		return -1;
	}
	{
		struct store_value p[] = {store_text(os->os_id), store_text(u->ou_provider),
		                          store_text(ref),       store_int(amount),
		                          store_int(now),        store_int(now)};

		if (store_exec_held(tx, ORDERS_SQL_DISPUTE_ADD, p, 6, NULL) < 0) {
			return -1;
		}
	}
	{
		struct store_value p[] = {
		        store_int(won),
		        store_int(lost),
		        store_int(amount),
		        store_int(amount),
		        store_int(lost),
		        store_int(lost),
		        store_int(won),
		        store_int(won),
		        store_int(now),
		        store_text(os->os_id),
		        store_text(u->ou_provider),
		        store_text(ref),
		};

		if (store_exec_held(tx, ORDERS_SQL_DISPUTE_STEP, p, 12, NULL) < 0) {
			return -1;
		}
	}
	if (orders_dispute_status(tx, u->ou_provider, os, ref, after) < 0) {
		return -1;
	}
	{
		/* Reload the totals the dispute rows now give. */
		int64_t revision = os->os_revision;
		struct orders_state fresh;

		if (orders_load(tx, os->os_id, &fresh) != 1) {
			return -1;
		}
		fresh.os_revision = revision;
		if (fresh.os_open_disputes != os->os_open_disputes ||
		    fresh.os_disputed != os->os_disputed ||
		    fresh.os_chargeback != os->os_chargeback) {
			os->os_dirty = 1;
		}
		os->os_open_disputes = fresh.os_open_disputes;
		os->os_disputed = fresh.os_disputed;
		os->os_chargeback = fresh.os_chargeback;
		os->os_disputes = fresh.os_disputes;
	}
	if (orders_settle(tx, os, ref, ev->ev_key) < 0) {
		return -1;
	}
	if (strcmp(before, after) == 0) {
		return 0;
	}
	if (strcmp(after, "open") == 0) {
		res->or_effect = "disputed";
	} else if (strcmp(after, "won") == 0) {
		res->or_effect = "dispute_won";
	} else {
		res->or_effect = "dispute_lost";
	}
	return 0;
}

/* ---- references and parked events ---- */

/* Records that ref (of kind) belongs to os; a reference newly bound is
 * queued so that events parked under it are applied. */
static int orders_bind(struct orders_unit *u, const char *ref, const char *kind,
                       const struct orders_state *os)
{
	struct store_value p[] = {store_text(u->ou_provider), store_text(ref),
	                          store_text(os->os_id), store_text(kind),
	                          store_int(store_tx_now(u->ou_tx))};
	int64_t changes = 0;

	if (ref == NULL || ref[0] == '\0') {
		return 0;
	}
	if (store_exec(u->ou_tx, ORDERS_SQL_REF_BIND, p, 5, &changes) < 0) {
		return -1;
	}
	if (changes != 1) {
		return 0;
	}
	if (u->ou_n_refs >= ORDERS_RELEASE_REFS_MAX) {
		char qref[ORDERS_QUOTE_LEN];
		char qid[ORDERS_QUOTE_LEN];

		log_warn("orders: events parked under \"%s\" wait; more than %d references bound "
		         "at once to order \"%s\"",
		         log_quote(qref, sizeof(qref), ref), ORDERS_RELEASE_REFS_MAX,
		         log_quote(qid, sizeof(qid), os->os_id));
		return 0;
	}
	u->ou_refs[u->ou_n_refs] = strdup(ref);
	if (u->ou_refs[u->ou_n_refs] == NULL) {
		log_err("orders: out of memory");
		return -1;
	}
	u->ou_n_refs++;
	return 0;
}

/* Keeps ev until an order is known under one of its payment references. */
static int orders_park(struct orders_unit *u, const struct event *ev)
{
	const char *ref = ev->ev_payment_ref != NULL && ev->ev_payment_ref[0] != '\0'
	                          ? ev->ev_payment_ref
	                          : ev->ev_charge_ref;
	struct store_value p[] = {
	        store_text(u->ou_provider),
	        store_text(ref),
	        store_text(ev->ev_key),
	        store_text(ev->ev_type),
	        store_text(event_kind_name(ev->ev_kind)),
	        store_text(ev->ev_order_ref),
	        store_text(ev->ev_payment_ref),
	        store_text(ev->ev_charge_ref),
	        store_text(ev->ev_refund_ref),
	        ev->ev_amount >= 0 ? store_int(ev->ev_amount) : store_null(),
	        store_text(ev->ev_currency[0] != '\0' ? ev->ev_currency : NULL),
	        store_int(ev->ev_refund_cumulative),
	        store_int(ev->ev_occurred_ms),
	        store_int(store_tx_now(u->ou_tx)),
	};

	if (ref == NULL || ref[0] == '\0' || ev->ev_key == NULL) {
		return 0;
	}
	return store_exec_held(u->ou_tx, ORDERS_SQL_PARK, p, sizeof(p) / sizeof(p[0]), NULL);
}

static char *orders_dup_col(const struct store_row *row, size_t i)
{
	const char *s = store_row_text(row, i);

	return s != NULL ? strdup(s) : NULL;
}

/* The parked event of row, as it was normalized. Returns 0 or -1. */
static int orders_parked_event(const struct store_row *row, struct event *ev)
{
	const char *currency = store_row_text(row, 9);

	memset(ev, 0, sizeof(*ev));
	ev->ev_amount = store_row_is_null(row, 8) ? -1 : store_row_int(row, 8);
	ev->ev_key = orders_dup_col(row, 1);
	ev->ev_type = orders_dup_col(row, 2);
	ev->ev_kind = event_kind_from_name(store_row_text(row, 3));
	ev->ev_order_ref = orders_dup_col(row, 4);
	ev->ev_payment_ref = orders_dup_col(row, 5);
	ev->ev_charge_ref = orders_dup_col(row, 6);
	ev->ev_refund_ref = orders_dup_col(row, 7);
	if (currency != NULL && strlen(currency) < sizeof(ev->ev_currency)) {
		memcpy(ev->ev_currency, currency, strlen(currency) + 1);
	}
	ev->ev_refund_cumulative = store_row_int(row, 10) != 0;
	ev->ev_occurred_ms = store_row_int(row, 11);
	return ev->ev_key != NULL ? 0 : -1;
}

static void orders_effect_add(struct orders_result *res, const char *effect)
{
	if (res->or_n_effects < ORDERS_EFFECTS_MAX) {
		res->or_effects[res->or_n_effects++] = effect;
	} else {
		log_warn("orders: more than %d effects in one unit; \"%s\" is not reported",
		         ORDERS_EFFECTS_MAX, effect);
	}
}

/* Applies the events parked under the references this unit bound, and
 * under those they bind in turn. */
static int orders_release(struct orders_unit *u, struct orders_result *res)
{
	struct store_tx *tx = u->ou_tx;

	while (u->ou_n_refs > 0) {
		char *ref = u->ou_refs[--u->ou_n_refs];
		int rc = 0;

		for (;;) {
			struct store_value p[] = {store_text(u->ou_provider), store_text(ref)};
			struct orders_result sub;
			struct store_row row;
			struct event ev;
			int64_t id;

			rc = store_query(tx, ORDERS_SQL_PARKED_NEXT, p, 2, &row);
			if (rc <= 0) {
				break;
			}
			id = store_row_int(&row, 0);
			rc = orders_parked_event(&row, &ev);
			store_row_finish(&row);
			memset(&sub, 0, sizeof(sub));
			if (rc == 0) {
				rc = orders_apply_one(u, &ev, &sub);
			}
			if (rc == 0) {
				struct store_value d[] = {store_int(store_tx_now(tx)),
				                          store_int(id)};
				struct store_value e[] = {
				        store_text(sub.or_refused ? "failed" : "done"),
				        store_text(sub.or_effect),
				        store_text(sub.or_refused ? sub.or_reason : NULL),
				        store_int(store_tx_now(tx)),
				        store_text(u->ou_provider),
				        store_text(ev.ev_key),
				};

				rc = store_exec_held(tx, ORDERS_SQL_PARKED_DONE, d, 2, NULL);
				if (rc == 0) {
					rc = store_exec_held(tx, ORDERS_SQL_EVENT_RELEASED, e, 6,
					                     NULL);
				}
				if (rc == 0 && !sub.or_refused) {
					char qkey[ORDERS_QUOTE_LEN];
					char qid[ORDERS_QUOTE_LEN];

					log_info("orders: parked %s event \"%s\" applied to order "
					         "\"%s\": %s",
					         event_kind_name(ev.ev_kind),
					         log_quote(qkey, sizeof(qkey), ev.ev_key),
					         log_quote(qid, sizeof(qid), sub.or_order_id),
					         sub.or_effect);
					orders_effect_add(res, sub.or_effect);
				}
			}
			event_finish(&ev);
			if (rc < 0) {
				break;
			}
		}
		free(ref);
		if (rc < 0) {
			return -1;
		}
	}
	return 0;
}

/* ---- applying one event ---- */

static int orders_dispatch(struct orders_unit *u, const struct event *ev, struct orders_state *os,
                           struct orders_result *res)
{
	switch (ev->ev_kind) {
	case EVENT_PAYMENT_SUCCEEDED:
	case EVENT_PAYMENT_CAPTURED:
		return orders_do_pay(u, ev, os, res);
	case EVENT_PAYMENT_AUTHORIZED:
		return orders_do_authorize(u, ev, os, res);
	case EVENT_CAPTURE_FAILED:
		return orders_do_capture_failed(u, ev, os, res);
	case EVENT_PAYMENT_CANCELLED:
		return orders_do_close(u, "cancelled", os, res);
	case EVENT_PAYMENT_EXPIRED:
		return orders_do_close(u, "expired", os, res);
	case EVENT_CANCEL_OR_REFUND:
		if (!orders_paid_like(os)) {
			return orders_do_close(u, "cancelled", os, res);
		}
		/* Whatever is left of the payment goes back, as one refund. */
		return orders_do_refund(u, ev, os, os->os_amount - orders_reversed(os), res);
	case EVENT_REFUNDED:
		return orders_do_refund(u, ev, os, -1, res);
	case EVENT_REFUND_FAILED:
		return orders_do_refund_failed(u, ev, os, res);
	case EVENT_DISPUTE_OPENED:
	case EVENT_DISPUTE_WON:
	case EVENT_DISPUTE_LOST:
		return orders_do_dispute(u, ev, os, res);
	case EVENT_OTHER:
		break;
	}
	res->or_effect = "recorded";
	return 0;
}

/* Payments name their order; what follows a payment may name only the
 * payment, so it can wait for it. */
static int orders_kind_parks(enum event_kind kind)
{
	return kind != EVENT_OTHER && kind != EVENT_PAYMENT_SUCCEEDED &&
	       kind != EVENT_PAYMENT_AUTHORIZED;
}

static int orders_apply_one(struct orders_unit *u, const struct event *ev,
                            struct orders_result *res)
{
	struct orders_state os;
	int found;

	res->or_effect = "noop";
	found = orders_find(u->ou_tx, u->ou_provider, ev, &os);
	if (found < 0) {
		return -1;
	}
	if (found) {
		snprintf(res->or_order_id, sizeof(res->or_order_id), "%s", os.os_id);
	}
	if (ev->ev_kind == EVENT_OTHER) {
		res->or_effect = "recorded";
		return 0;
	}
	if (!found) {
		if (orders_kind_parks(ev->ev_kind) && orders_park(u, ev) < 0) {
			return -1;
		}
		orders_refuse(u->ou_provider, ev, "unknown_order", res);
		return 0;
	}
	if (orders_dispatch(u, ev, &os, res) < 0) {
		return -1;
	}
	if (res->or_refused) {
		return 0;
	}
	/* A reprocessed event that was parked is settled now. */
	{
		struct store_value p[] = {store_int(store_tx_now(u->ou_tx)),
		                          store_text(u->ou_provider), store_text(ev->ev_key)};

		if (ev->ev_key != NULL && orders_kind_parks(ev->ev_kind) &&
		    store_exec_held(u->ou_tx, ORDERS_SQL_PARKED_DONE_KEY, p, 3, NULL) < 0) {
			return -1;
		}
	}
	if (orders_bind(u, ev->ev_payment_ref, "payment", &os) < 0 ||
	    orders_bind(u, ev->ev_charge_ref, "charge", &os) < 0) {
		return -1;
	}
	return 0;
}

int orders_apply_event(struct store_tx *tx, const struct orders_conf *conf, const char *provider,
                       const struct event *ev, struct orders_result *ret)
{
	struct orders_unit u;
	struct orders_result res;
	int rc;

	memset(&u, 0, sizeof(u));
	u.ou_tx = tx;
	u.ou_conf = conf;
	u.ou_provider = provider;
	memset(&res, 0, sizeof(res));
	rc = orders_apply_one(&u, ev, &res);
	if (rc == 0) {
		orders_effect_add(&res, res.or_effect);
		rc = orders_release(&u, &res);
	}
	while (u.ou_n_refs > 0) {
		free(u.ou_refs[--u.ou_n_refs]);
	}
	if (rc < 0) {
		return -1;
	}
	*ret = res;
	return 0;
}

int orders_new_id(int64_t now_ms, char out[ORDERS_ID_LEN + 1])
{
	unsigned char rnd[ORDERS_ID_RANDOM];
	char id[ORDERS_ID_LEN + 1];
	size_t plen = strlen(ORDERS_ID_PREFIX);
	uint64_t t = now_ms > 0 ? (uint64_t)now_ms : 0;
	size_t i;

	if (crypto_random(rnd, sizeof(rnd)) < 0) {
		goto fail;
	}
	memcpy(id, ORDERS_ID_PREFIX, plen);
	/* The time first, most significant digit first, then the random part. */
	for (i = 0; i < ORDERS_ID_TIME; i++) {
		id[plen + ORDERS_ID_TIME - 1 - i] = orders_base32[t & 31];
		t >>= 5;
	}
	/* 32 divides 256, so the low five bits of a random byte are uniform. */
	for (i = 0; i < ORDERS_ID_RANDOM; i++) {
		id[plen + ORDERS_ID_TIME + i] = orders_base32[rnd[i] & 31];
	}
	id[ORDERS_ID_LEN] = '\0';
	memcpy(out, id, sizeof(id));
	return 0;
fail:
	return -1;
}

int orders_create(struct store_tx *tx, int64_t amount, const char *currency,
                  const char *customer_ref, char ret_id[ORDERS_ID_LEN + 1])
{
	return orders_create_owned(tx, NULL, amount, currency, customer_ref, ret_id);
}

int orders_create_owned(struct store_tx *tx, const char *owner, int64_t amount,
                        const char *currency, const char *customer_ref,
                        char ret_id[ORDERS_ID_LEN + 1])
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
	/* 80 random bits per millisecond make a collision all but impossible;
	 * should one happen, the insert changes nothing and a new id is drawn. */
	for (i = 0; i < ORDERS_CREATE_TRIES && changes == 0; i++) {
		struct store_value p[7];

		if (orders_new_id(now, id) < 0) {
			goto fail;
		}
		p[0] = store_text(id);
		p[1] = store_int(amount);
		p[2] = store_text(cur);
		p[3] = store_text(customer_ref);
		p[4] = store_int(now);
		p[5] = store_int(now);
		p[6] = store_text(owner);
		if (store_exec(tx, ORDERS_SQL_CREATE, p, 7, &changes) < 0) {
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
