/* test_orders.c: unit tests for the orders handler on the real store. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api.h"
#include "event.h"
#include "log.h"
#include "money.h"
#include "orders.h"
#include "pg_fixture.h"
#include "reply.h"
#include "store.h"

#define T_NOW 1764670000000LL   /* when orders are created */
#define T_LATER (T_NOW + 60000) /* when events are applied */
#define T_PROVIDER "stripe"

/* One point per whole currency unit. */
static const struct orders_conf t_conf = {.oc_points_num = 1, .oc_points_den = 100};

struct fixture {
	char fx_dir[64];
	char fx_path[128];
	struct store *fx_st;
};

/* Set for the second run of every test, on PostgreSQL. */
static int t_pg;
static char t_pg_conninfo[PG_FIXTURE_CONNINFO_MAX];
#define T_PG_SCHEMA "idemhook_test_orders"

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct store_options opt;

	if (fx == NULL) {
		return -1;
	}
	snprintf(fx->fx_dir, sizeof(fx->fx_dir), "/tmp/test_orders.XXXXXX");
	if (mkdtemp(fx->fx_dir) == NULL) {
		free(fx);
		return -1;
	}
	snprintf(fx->fx_path, sizeof(fx->fx_path), "%s/idemhook.db", fx->fx_dir);
	memset(&opt, 0, sizeof(opt));
	opt.so_path = fx->fx_path;
	opt.so_sync = STORE_SYNC_OFF; /* durability is the store's tests' business */
	if (t_pg) {
		opt.so_backend = STORE_BACKEND_POSTGRESQL;
		opt.so_conninfo = t_pg_conninfo;
		/* One writer connection: the tests that count a batch's round
		 * trips find its statements prepared where an earlier batch ran. */
		opt.so_pg_writers = 1;
		if (pg_fixture_reset(T_PG_SCHEMA) < 0) {
			rmdir(fx->fx_dir);
			free(fx);
			return -1;
		}
	}
	fx->fx_st = store_create(&opt);
	if (fx->fx_st == NULL) {
		rmdir(fx->fx_dir);
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	struct dirent *de;
	DIR *d;

	store_destroy(fx->fx_st);
	d = opendir(fx->fx_dir);
	if (d != NULL) {
		while ((de = readdir(d)) != NULL) {
			char p[400];

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
				continue;
			}
			snprintf(p, sizeof(p), "%s/%s", fx->fx_dir, de->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(fx->fx_dir);
	free(fx);
	return 0;
}

/* ---- writing through orders_* inside a unit of work ---- */

struct create_job {
	int64_t cj_amount;
	const char *cj_currency;
	const char *cj_customer;
	char cj_id[ORDERS_ID_LEN + 1];
};

static int create_fn(struct store_tx *tx, void *arg)
{
	struct create_job *cj = arg;

	return orders_create(tx, cj->cj_amount, cj->cj_currency, cj->cj_customer, cj->cj_id);
}

/* Runs orders_create in its own unit of work; returns what store_write returned. */
static int try_create(struct fixture *fx, int64_t amount, const char *currency,
                      char ret_id[ORDERS_ID_LEN + 1])
{
	struct create_job cj;
	int rc;

	memset(&cj, 0, sizeof(cj));
	cj.cj_amount = amount;
	cj.cj_currency = currency;
	cj.cj_customer = "cust_42";
	rc = store_write(fx->fx_st, T_NOW, create_fn, &cj);
	if (rc == 0 && ret_id != NULL) {
		memcpy(ret_id, cj.cj_id, sizeof(cj.cj_id));
	}
	return rc;
}

/* The log lines of warning level and above written between log_take_begin
 * and log_take_end, in a file of the fixture's directory that only the
 * descriptor names. */
struct log_take {
	int lt_fd;
	int lt_saved;
	enum log_level lt_level;
};

static void log_take_begin(struct fixture *fx, struct log_take *lt)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/log.txt", fx->fx_dir);
	lt->lt_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(lt->lt_fd >= 0);
	unlink(path);
	fflush(stderr);
	lt->lt_saved = dup(STDERR_FILENO);
	assert_true(lt->lt_saved >= 0);
	assert_true(dup2(lt->lt_fd, STDERR_FILENO) >= 0);
	lt->lt_level = log_get_level();
	log_set_level(LOG_LEVEL_WARNING);
}

/* What was logged (malloc'd), stderr back as it was. */
static char *log_take_end(struct log_take *lt)
{
	off_t len;
	char *text;

	log_flush();
	fflush(stderr);
	log_set_level(lt->lt_level);
	assert_true(dup2(lt->lt_saved, STDERR_FILENO) >= 0);
	close(lt->lt_saved);
	len = lseek(lt->lt_fd, 0, SEEK_END);
	assert_true(len >= 0);
	text = calloc(1, (size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(pread(lt->lt_fd, text, (size_t)len, 0), len);
	close(lt->lt_fd);
	return text;
}

/* A held write that changed no row is the lanes' expected way to find two
 * claims of a batch on one order: on PostgreSQL it is said as a warning,
 * whether the write was held back or, at a statement's first use, ran at
 * once; never as an error with the server's message. */
static void assert_held_miss_warned(const char *log)
{
	if (strstr(log, "invalid input syntax") != NULL || strstr(log, "changed no row") != NULL) {
		fail_msg("a held write's miss logged as an error:\n%s", log);
	}
	if (t_pg && strstr(log, "a write held back changed another number of rows than one; the "
	                        "batch runs again one unit at a time") == NULL) {
		fail_msg("no warning of a held write's miss:\n%s", log);
	}
}

static void create(struct fixture *fx, int64_t amount, const char *currency,
                   char ret_id[ORDERS_ID_LEN + 1])
{
	assert_int_equal(try_create(fx, amount, currency, ret_id), 0);
}

struct apply_job {
	const struct orders_conf *aj_conf;
	const char *aj_provider;
	const struct event *aj_ev;
	struct orders_result aj_res;
};

static int apply_fn(struct store_tx *tx, void *arg)
{
	struct apply_job *aj = arg;

	return orders_apply_event(tx, aj->aj_conf, aj->aj_provider, aj->aj_ev, &aj->aj_res);
}

static char *dup_or_null(const char *s)
{
	char *d;

	if (s == NULL) {
		return NULL;
	}
	d = strdup(s);
	assert_non_null(d);
	return d;
}

struct t_event {
	enum event_kind te_kind;
	const char *te_key;
	const char *te_order;
	const char *te_payment_ref;
	const char *te_refund_ref;
	int64_t te_amount;
	const char *te_currency;
	int te_cumulative;
	const char *te_charge_ref;
	int64_t te_occurred_ms;
	const char *te_provider; /* T_PROVIDER when NULL */
};

/* Applies one event with conf in its own unit of work; the unit must succeed. */
static void apply_conf(struct fixture *fx, const struct orders_conf *conf, const struct t_event *te,
                       struct orders_result *ret)
{
	struct apply_job aj;
	struct event ev;

	memset(&ev, 0, sizeof(ev));
	ev.ev_kind = te->te_kind;
	ev.ev_key = dup_or_null(te->te_key);
	ev.ev_order_ref = dup_or_null(te->te_order);
	ev.ev_payment_ref = dup_or_null(te->te_payment_ref);
	ev.ev_refund_ref = dup_or_null(te->te_refund_ref);
	ev.ev_amount = te->te_amount;
	snprintf(ev.ev_currency, sizeof(ev.ev_currency), "%s",
	         te->te_currency != NULL ? te->te_currency : "");
	ev.ev_refund_cumulative = te->te_cumulative;
	ev.ev_charge_ref = dup_or_null(te->te_charge_ref);
	ev.ev_occurred_ms = te->te_occurred_ms;
	memset(&aj, 0, sizeof(aj));
	aj.aj_conf = conf;
	aj.aj_provider = te->te_provider != NULL ? te->te_provider : T_PROVIDER;
	aj.aj_ev = &ev;
	assert_int_equal(store_write(fx->fx_st, T_LATER, apply_fn, &aj), 0);
	free(ev.ev_key);
	free(ev.ev_order_ref);
	free(ev.ev_payment_ref);
	free(ev.ev_charge_ref);
	free(ev.ev_refund_ref);
	*ret = aj.aj_res;
}

static void pay_conf(struct fixture *fx, const struct orders_conf *conf, const char *key,
                     const char *order, int64_t amount, const char *currency,
                     const char *payment_ref, struct orders_result *ret)
{
	struct t_event te = {
	        .te_kind = EVENT_PAYMENT_SUCCEEDED,
	        .te_key = key,
	        .te_order = order,
	        .te_payment_ref = payment_ref,
	        .te_amount = amount,
	        .te_currency = currency,
	};

	apply_conf(fx, conf, &te, ret);
}

static void pay(struct fixture *fx, const char *key, const char *order, int64_t amount,
                const char *currency, const char *payment_ref, struct orders_result *ret)
{
	pay_conf(fx, &t_conf, key, order, amount, currency, payment_ref, ret);
}

static void refund_conf(struct fixture *fx, const struct orders_conf *conf, const char *key,
                        const char *order, const char *refund_ref, int64_t amount, int cumulative,
                        struct orders_result *ret)
{
	struct t_event te = {
	        .te_kind = EVENT_REFUNDED,
	        .te_key = key,
	        .te_order = order,
	        .te_payment_ref = "pi_1",
	        .te_refund_ref = refund_ref,
	        .te_amount = amount,
	        .te_currency = "USD",
	        .te_cumulative = cumulative,
	};

	apply_conf(fx, conf, &te, ret);
}

static void refund(struct fixture *fx, const char *key, const char *order, const char *refund_ref,
                   int64_t amount, int cumulative, struct orders_result *ret)
{
	refund_conf(fx, &t_conf, key, order, refund_ref, amount, cumulative, ret);
}

/* ---- reading rows back on a read connection ---- */

#define QUERY_ARGS 3

struct query_job {
	const char *qj_sql;
	const char *qj_args[QUERY_ARGS]; /* text parameters; the first NULL ends them */
	struct store_row qj_row;
	int qj_found;
};

static int query_fn(struct store_tx *tx, void *arg)
{
	struct query_job *qj = arg;
	struct store_value p[QUERY_ARGS];
	size_t n = 0;

	while (n < QUERY_ARGS && qj->qj_args[n] != NULL) {
		p[n] = store_text(qj->qj_args[n]);
		n++;
	}
	qj->qj_found = store_query(tx, qj->qj_sql, p, n, &qj->qj_row);
	return qj->qj_found < 0 ? -1 : 0;
}

/* The first row of sql with up to three text parameters; the row must exist. */
static void query_row(struct fixture *fx, const char *sql, const char *a0, const char *a1,
                      const char *a2, struct store_row *ret)
{
	struct query_job qj;

	memset(&qj, 0, sizeof(qj));
	qj.qj_sql = sql;
	qj.qj_args[0] = a0;
	qj.qj_args[1] = a1;
	qj.qj_args[2] = a2;
	assert_int_equal(store_read(fx->fx_st, T_NOW, query_fn, &qj), 0);
	assert_int_equal(qj.qj_found, 1);
	*ret = qj.qj_row;
}

static int64_t query_int(struct fixture *fx, const char *sql, const char *a0, const char *a1,
                         const char *a2)
{
	struct store_row row;
	int64_t v;

	query_row(fx, sql, a0, a1, a2, &row);
	v = store_row_int(&row, 0);
	store_row_finish(&row);
	return v;
}

/* Column 0 of the first row of sql (with one parameter) equals want; NULL wants SQL NULL. */
static void assert_text(struct fixture *fx, const char *sql, const char *a0, const char *want)
{
	struct store_row row;

	query_row(fx, sql, a0, NULL, NULL, &row);
	if (want == NULL) {
		assert_true(store_row_is_null(&row, 0));
	} else {
		assert_non_null(store_row_text(&row, 0));
		assert_string_equal(store_row_text(&row, 0), want);
	}
	store_row_finish(&row);
}

static void assert_status(struct fixture *fx, const char *id, const char *want)
{
	assert_text(fx, "SELECT status FROM orders WHERE id = ?", id, want);
}

static int64_t refunded_amount(struct fixture *fx, const char *id)
{
	return query_int(fx, "SELECT refunded_amount FROM orders WHERE id = ?", id, NULL, NULL);
}

static int64_t points_total(struct fixture *fx, const char *id)
{
	return query_int(fx,
	                 "SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE order_id = ?",
	                 id, NULL, NULL);
}

static int64_t ledger_rows(struct fixture *fx, const char *id, const char *reason)
{
	return query_int(fx, "SELECT COUNT(*) FROM points_ledger WHERE order_id = ? AND reason = ?",
	                 id, reason, NULL);
}

/* Points of the ledger row (order, reason, ref), which must exist. */
static int64_t ledger_points(struct fixture *fx, const char *id, const char *reason,
                             const char *ref)
{
	return query_int(
	        fx,
	        "SELECT points FROM points_ledger WHERE order_id = ? AND reason = ? AND ref = ?",
	        id, reason, ref);
}

static int64_t refund_rows(struct fixture *fx, const char *id)
{
	return query_int(fx, "SELECT COUNT(*) FROM refunds WHERE order_id = ?", id, NULL, NULL);
}

static int64_t order_count(struct fixture *fx)
{
	return query_int(fx, "SELECT COUNT(*) FROM orders", NULL, NULL, NULL);
}

static void assert_effect(const struct orders_result *res, const char *effect)
{
	assert_int_equal(res->or_refused, 0);
	assert_non_null(res->or_effect);
	assert_string_equal(res->or_effect, effect);
}

static void assert_refused(const struct orders_result *res, const char *reason)
{
	assert_int_equal(res->or_refused, 1);
	assert_string_equal(res->or_reason, reason);
}

/* ---- creating orders ---- */

static void test_create_makes_a_pending_order_with_an_upper_case_currency(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];

	create(fx, 1999, "usd", id);
	assert_int_equal(strlen(id), ORDERS_ID_LEN);
	assert_memory_equal(id, "ord_", 4);
	assert_status(fx, id, "pending");
	assert_text(fx, "SELECT currency FROM orders WHERE id = ?", id, "USD");
	assert_text(fx, "SELECT customer_ref FROM orders WHERE id = ?", id, "cust_42");
	assert_int_equal(query_int(fx, "SELECT amount FROM orders WHERE id = ?", id, NULL, NULL),
	                 1999);
	assert_int_equal(
	        query_int(fx, "SELECT created_at FROM orders WHERE id = ?", id, NULL, NULL), T_NOW);
	assert_int_equal(refunded_amount(fx, id), 0);
	assert_text(fx, "SELECT paid_at FROM orders WHERE id = ?", id, NULL);
}

static void test_create_accepts_a_zero_amount(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];

	create(fx, 0, "JPY", id);
	assert_status(fx, id, "pending");
}

static void test_create_rejects_negative_amounts_and_malformed_currencies(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];

	assert_int_equal(try_create(fx, -1, "USD", id), -1);
	assert_int_equal(try_create(fx, MONEY_MAX_MINOR + 1, "USD", id), -1);
	assert_int_equal(try_create(fx, 100, "US", id), -1);
	assert_int_equal(try_create(fx, 100, "USDD", id), -1);
	assert_int_equal(try_create(fx, 100, "U1D", id), -1);
	assert_int_equal(try_create(fx, 100, "", id), -1);
	assert_int_equal(try_create(fx, 100, NULL, id), -1);
	assert_int_equal(order_count(fx), 0);
}

static void test_new_ids_are_well_formed_and_distinct(void **state)
{
	static const char alphabet[] = "234567abcdefghijklmnopqrstuvwxyz";
	char ids[64][ORDERS_ID_LEN + 1];
	size_t i;
	size_t j;

	(void)state;
	for (i = 0; i < 64; i++) {
		assert_int_equal(orders_new_id(T_NOW, ids[i]), 0);
		assert_int_equal(strlen(ids[i]), ORDERS_ID_LEN);
		assert_memory_equal(ids[i], "ord_", 4);
		assert_true(api_order_id_valid(ids[i]));
		for (j = 4; j < ORDERS_ID_LEN; j++) {
			assert_non_null(memchr(alphabet, ids[i][j], sizeof(alphabet) - 1));
		}
		for (j = 0; j < i; j++) {
			assert_string_not_equal(ids[i], ids[j]);
			/* the same millisecond: the same time digits */
			assert_memory_equal(ids[i], ids[j], 4 + 10);
		}
	}
}

/* Ids sort as their times do (the b-trees keyed by them grow at one end),
 * and the time digits are the milliseconds, most significant first. */
static void test_new_ids_sort_by_their_time(void **state)
{
	static const char alphabet[] = "234567abcdefghijklmnopqrstuvwxyz";
	/* around now, a digit's carry, a day later, years later */
	static const int64_t times[] = {1796428800000LL, 1796428800001LL, 1796428800031LL,
	                                1796428800032LL, 1796515200000LL, 2500000000000LL};
	char prev[ORDERS_ID_LEN + 1];
	char id[ORDERS_ID_LEN + 1];
	size_t i;
	size_t j;

	(void)state;
	for (i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		int64_t decoded = 0;

		assert_int_equal(orders_new_id(times[i], id), 0);
		for (j = 4; j < 14; j++) {
			decoded = decoded * 32 + (strchr(alphabet, id[j]) - alphabet);
		}
		assert_int_equal(decoded, times[i]);
		if (i > 0) {
			assert_true(strcmp(prev, id) < 0);
		}
		memcpy(prev, id, sizeof(id));
	}
}

/* ---- payments ---- */

static void test_payment_marks_the_order_paid_and_awards_points_once(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1999, "USD", id);
	pay(fx, "evt_1", id, 1999, "USD", "pi_1", &res);
	assert_effect(&res, "paid");
	assert_string_equal(res.or_order_id, id);
	assert_status(fx, id, "paid");
	assert_text(fx, "SELECT provider FROM orders WHERE id = ?", id, T_PROVIDER);
	assert_text(fx, "SELECT payment_ref FROM orders WHERE id = ?", id, "pi_1");
	assert_int_equal(query_int(fx, "SELECT paid_at FROM orders WHERE id = ?", id, NULL, NULL),
	                 T_LATER);
	assert_int_equal(ledger_rows(fx, id, "award"), 1);
	assert_int_equal(ledger_points(fx, id, "award", id), 19);

	/* The same event again (say its idempotency record expired) changes nothing. */
	pay(fx, "evt_1", id, 1999, "USD", "pi_1", &res);
	assert_effect(&res, "noop");
	assert_string_equal(res.or_order_id, id);
	assert_int_equal(ledger_rows(fx, id, "award"), 1);
	assert_int_equal(points_total(fx, id), 19);
}

static void test_two_payment_events_for_one_payment_pay_once(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 5000, "EUR", id);
	/* checkout.session.completed, then payment_intent.succeeded */
	pay(fx, "evt_cs", id, 5000, "EUR", "cs_1", &res);
	assert_effect(&res, "paid");
	pay(fx, "evt_pi", id, 5000, "EUR", "pi_1", &res);
	assert_effect(&res, "noop");
	assert_string_equal(res.or_order_id, id);
	assert_status(fx, id, "paid");
	assert_text(fx, "SELECT payment_ref FROM orders WHERE id = ?", id, "cs_1");
	assert_int_equal(ledger_rows(fx, id, "award"), 1);
	assert_int_equal(points_total(fx, id), 50);
}

static void test_payment_for_an_unknown_order_is_refused(void **state)
{
	struct fixture *fx = *state;
	struct orders_result res;

	pay(fx, "evt_1", "ord_doesnotexist000000", 1999, "USD", "pi_1", &res);
	assert_refused(&res, "unknown_order");
	assert_string_equal(res.or_order_id, "");
	pay(fx, "evt_2", NULL, 1999, "USD", "pi_1", &res);
	assert_refused(&res, "unknown_order");
	refund(fx, "evt_3", "ord_doesnotexist000000", "re_1", 100, 0, &res);
	assert_refused(&res, "unknown_order");
	assert_int_equal(order_count(fx), 0);
	assert_int_equal(query_int(fx, "SELECT COUNT(*) FROM refunds", NULL, NULL, NULL), 0);
	assert_int_equal(query_int(fx, "SELECT COUNT(*) FROM points_ledger", NULL, NULL, NULL), 0);
}

static void test_payment_with_a_different_amount_is_refused(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1999, "USD", id);
	pay(fx, "evt_1", id, 1998, "USD", "pi_1", &res);
	assert_refused(&res, "amount_mismatch");
	assert_string_equal(res.or_order_id, id);
	pay(fx, "evt_2", id, -1, "USD", "pi_1", &res);
	assert_refused(&res, "amount_mismatch");
	assert_status(fx, id, "pending");
	assert_int_equal(ledger_rows(fx, id, "award"), 0);
}

static void test_payment_in_a_different_currency_is_refused(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1999, "USD", id);
	pay(fx, "evt_1", id, 1999, "EUR", "pi_1", &res);
	assert_refused(&res, "currency_mismatch");
	assert_string_equal(res.or_order_id, id);
	pay(fx, "evt_2", id, 1999, "", "pi_1", &res);
	assert_refused(&res, "currency_mismatch");
	assert_status(fx, id, "pending");
	assert_int_equal(ledger_rows(fx, id, "award"), 0);
}

static void test_a_zero_points_rate_pays_without_ledger_rows(void **state)
{
	static const struct orders_conf none = {.oc_points_num = 0, .oc_points_den = 1};
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay_conf(fx, &none, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_effect(&res, "paid");
	refund_conf(fx, &none, "evt_2", id, "re_1", 1000, 0, &res);
	assert_effect(&res, "refunded");
	assert_int_equal(query_int(fx, "SELECT COUNT(*) FROM points_ledger", NULL, NULL, NULL), 0);
}

static void test_other_events_are_recorded_without_changes(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;
	struct t_event te = {
	        .te_kind = EVENT_OTHER,
	        .te_key = "evt_1",
	        .te_amount = -1,
	};

	create(fx, 1999, "USD", id);
	te.te_order = id;
	apply_conf(fx, &t_conf, &te, &res);
	assert_effect(&res, "recorded");
	assert_string_equal(res.or_order_id, id);
	te.te_order = "ord_doesnotexist000000";
	apply_conf(fx, &t_conf, &te, &res);
	assert_effect(&res, "recorded");
	assert_string_equal(res.or_order_id, "");
	te.te_order = NULL;
	apply_conf(fx, &t_conf, &te, &res);
	assert_effect(&res, "recorded");
	assert_status(fx, id, "pending");
	assert_int_equal(
	        query_int(fx, "SELECT updated_at FROM orders WHERE id = ?", id, NULL, NULL), T_NOW);
}

/* ---- refunds ---- */

static void test_full_refund_after_payment_refunds_the_order_and_claws_back_all_points(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1999, "USD", id);
	pay(fx, "evt_1", id, 1999, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, "re_1", 1999, 0, &res);
	assert_effect(&res, "refunded");
	assert_string_equal(res.or_order_id, id);
	assert_status(fx, id, "refunded");
	assert_int_equal(refunded_amount(fx, id), 1999);
	assert_int_equal(
	        query_int(fx, "SELECT refunded_at FROM orders WHERE id = ?", id, NULL, NULL),
	        T_LATER);
	assert_int_equal(refund_rows(fx, id), 1);
	assert_int_equal(ledger_points(fx, id, "clawback", "re_1"), -19);
	assert_int_equal(points_total(fx, id), 0);

	/* A payment event arriving now cannot move the order back. */
	pay(fx, "evt_3", id, 1999, "USD", "pi_1", &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "refunded");
	assert_int_equal(ledger_rows(fx, id, "award"), 1);
	assert_int_equal(points_total(fx, id), 0);
}

static void test_partial_refunds_accumulate_until_the_order_is_fully_refunded(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 10000, "USD", id);
	pay(fx, "evt_1", id, 10000, "USD", "pi_1", &res);
	assert_int_equal(points_total(fx, id), 100);

	refund(fx, "evt_2", id, "re_1", 2500, 0, &res);
	assert_effect(&res, "partially_refunded");
	assert_status(fx, id, "partially_refunded");
	assert_int_equal(refunded_amount(fx, id), 2500);
	assert_int_equal(points_total(fx, id), 75);

	refund(fx, "evt_3", id, "re_2", 2500, 0, &res);
	assert_effect(&res, "partially_refunded");
	assert_int_equal(refunded_amount(fx, id), 5000);
	assert_int_equal(points_total(fx, id), 50);

	refund(fx, "evt_4", id, "re_3", 5000, 0, &res);
	assert_effect(&res, "refunded");
	assert_status(fx, id, "refunded");
	assert_int_equal(refunded_amount(fx, id), 10000);
	assert_int_equal(refund_rows(fx, id), 3);
	assert_int_equal(ledger_rows(fx, id, "clawback"), 3);
	assert_int_equal(points_total(fx, id), 0);

	/* Nothing is left to refund: a further refund changes nothing. */
	refund(fx, "evt_5", id, "re_4", 1, 0, &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "refunded");
	assert_int_equal(refund_rows(fx, id), 3);
}

static void test_the_same_refund_id_twice_counts_once(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 10000, "USD", id);
	pay(fx, "evt_1", id, 10000, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, "re_1", 1000, 0, &res);
	assert_effect(&res, "partially_refunded");
	/* Another event (say refund.updated) naming the same provider refund. */
	refund(fx, "evt_3", id, "re_1", 1000, 0, &res);
	assert_effect(&res, "noop");
	assert_string_equal(res.or_order_id, id);
	assert_int_equal(refunded_amount(fx, id), 1000);
	assert_int_equal(refund_rows(fx, id), 1);
	assert_int_equal(ledger_rows(fx, id, "clawback"), 1);
	assert_int_equal(points_total(fx, id), 90);
}

static void test_cumulative_refund_totals_arriving_out_of_order_count_once(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 10000, "USD", id);
	pay(fx, "evt_1", id, 10000, "USD", "pi_1", &res);
	/* The second refund's event (running total 5000) arrives first. */
	refund(fx, "evt_3", id, "re_2", 5000, 1, &res);
	assert_effect(&res, "partially_refunded");
	assert_int_equal(refunded_amount(fx, id), 5000);
	/* The first refund's event carries the smaller total 3000: already counted. */
	refund(fx, "evt_2", id, "re_1", 3000, 1, &res);
	assert_effect(&res, "noop");
	assert_int_equal(refunded_amount(fx, id), 5000);
	assert_int_equal(refund_rows(fx, id), 1);
	assert_int_equal(points_total(fx, id), 50);
	/* A third refund brings the total to the whole amount. */
	refund(fx, "evt_4", id, "re_3", 10000, 1, &res);
	assert_effect(&res, "refunded");
	assert_status(fx, id, "refunded");
	assert_int_equal(refunded_amount(fx, id), 10000);
	assert_int_equal(query_int(fx, "SELECT amount FROM refunds WHERE refund_ref = ?", "re_3",
	                           NULL, NULL),
	                 5000);
	assert_int_equal(points_total(fx, id), 0);
}

static void test_cumulative_totals_under_one_charge_id_count_each_increase(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	/* Stripe's charge.refunded without its refunds list names only the charge. */
	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "ch_1", &res);
	refund(fx, "evt_2", id, "ch_1", 300, 1, &res);
	assert_effect(&res, "partially_refunded");
	refund(fx, "evt_3", id, "ch_1", 500, 1, &res);
	assert_effect(&res, "partially_refunded");
	assert_int_equal(refunded_amount(fx, id), 500);
	assert_int_equal(ledger_points(fx, id, "clawback", "ch_1"), -3);
	assert_int_equal(ledger_points(fx, id, "clawback", "ch_1@500"), -2);
	/* The same total again, by a redelivery or another event, is no refund. */
	refund(fx, "evt_3", id, "ch_1", 500, 1, &res);
	assert_effect(&res, "noop");
	refund(fx, "evt_4", id, "ch_1", 300, 1, &res);
	assert_effect(&res, "noop");
	refund(fx, "evt_5", id, "ch_1", 1000, 1, &res);
	assert_effect(&res, "refunded");
	assert_int_equal(refunded_amount(fx, id), 1000);
	assert_int_equal(refund_rows(fx, id), 3);
	assert_int_equal(points_total(fx, id), 0);
}

static void test_a_refund_larger_than_what_is_left_is_capped_at_the_order_amount(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, "re_1", 600, 0, &res);
	assert_effect(&res, "partially_refunded");
	refund(fx, "evt_3", id, "re_2", 600, 0, &res);
	assert_effect(&res, "refunded");
	assert_int_equal(refunded_amount(fx, id), 1000);
	assert_int_equal(query_int(fx, "SELECT amount FROM refunds WHERE refund_ref = ?", "re_2",
	                           NULL, NULL),
	                 400);
	refund(fx, "evt_4", id, "re_3", 5000, 1, &res);
	assert_effect(&res, "noop");
	assert_int_equal(refunded_amount(fx, id), 1000);
	assert_int_equal(points_total(fx, id), 0);
}

static void test_refund_in_a_different_currency_is_refused(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;
	struct t_event te = {
	        .te_kind = EVENT_REFUNDED,
	        .te_key = "evt_2",
	        .te_refund_ref = "re_1",
	        .te_amount = 100,
	        .te_currency = "EUR",
	};

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	te.te_order = id;
	apply_conf(fx, &t_conf, &te, &res);
	assert_refused(&res, "currency_mismatch");
	assert_string_equal(res.or_order_id, id);
	assert_status(fx, id, "paid");
	assert_int_equal(refunded_amount(fx, id), 0);
	assert_int_equal(refund_rows(fx, id), 0);
}

static void test_refund_without_an_amount_is_refused(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, "re_1", -1, 0, &res);
	assert_refused(&res, "invalid_amount");
	assert_string_equal(res.or_order_id, id);
	assert_status(fx, id, "paid");
	assert_int_equal(refund_rows(fx, id), 0);
}

static void test_refund_without_a_refund_id_counts_once_per_event(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, NULL, 300, 0, &res);
	assert_effect(&res, "partially_refunded");
	refund(fx, "evt_2", id, NULL, 300, 0, &res);
	assert_effect(&res, "noop");
	assert_int_equal(refunded_amount(fx, id), 300);
	assert_int_equal(ledger_points(fx, id, "clawback", "evt_2"), -3);
}

static void test_a_refund_before_its_payment_ends_as_if_it_came_after(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1999, "USD", id);
	refund(fx, "evt_2", id, "re_1", 1999, 0, &res);
	assert_effect(&res, "refunded");
	assert_status(fx, id, "refunded");
	assert_int_equal(refunded_amount(fx, id), 1999);
	assert_int_equal(query_int(fx, "SELECT COUNT(*) FROM points_ledger", NULL, NULL, NULL), 0);

	/* The late payment is recorded and its points are taken back at once:
	 * the order stays refunded and is not reported paid again. */
	pay(fx, "evt_1", id, 1999, "USD", "pi_1", &res);
	assert_effect(&res, "noop");
	assert_string_equal(res.or_order_id, id);
	assert_status(fx, id, "refunded");
	assert_text(fx, "SELECT payment_ref FROM orders WHERE id = ?", id, "pi_1");
	assert_int_equal(ledger_points(fx, id, "award", id), 19);
	assert_int_equal(points_total(fx, id), 0);
	pay(fx, "evt_1", id, 1999, "USD", "pi_1", &res);
	assert_effect(&res, "noop");
	assert_int_equal(ledger_rows(fx, id, "award"), 1);
	assert_int_equal(points_total(fx, id), 0);
}

static void test_a_late_payment_after_a_partial_refund_earns_the_points_left(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	refund(fx, "evt_2", id, "re_1", 400, 0, &res);
	assert_effect(&res, "partially_refunded");
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "partially_refunded");
	/* As if in order: 10 awarded, 4 taken back for the 40% refunded. */
	assert_int_equal(points_total(fx, id), 6);
	/* The rest of the refund takes the rest back. */
	refund(fx, "evt_3", id, "re_2", 600, 0, &res);
	assert_effect(&res, "refunded");
	assert_int_equal(points_total(fx, id), 0);
}

/* An award row the order's first payment did not write (another receiver's,
 * on a shared database; here put in by hand). */
static int foreign_award_fn(struct store_tx *tx, void *arg)
{
	struct store_value p[] = {store_text(arg), store_text(arg), store_int(50),
	                          store_int(store_tx_now(tx))};

	return store_exec(tx,
	                  "INSERT INTO points_ledger (order_id, reason, ref, points, created_at) "
	                  "VALUES (?, 'award', ?, ?, ?)",
	                  p, 4, NULL);
}

/* The first payment settles its points on the ledger's sums it wrote itself
 * without reading them; when its award was already there, it reads them. */
static void test_a_first_payment_whose_award_is_there_settles_on_the_ledger(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	assert_int_equal(store_write(fx->fx_st, T_NOW, foreign_award_fn, id), 0);
	/* 40% refunded: 20 of the 50 points taken back. */
	refund(fx, "evt_2", id, "re_1", 400, 0, &res);
	assert_effect(&res, "partially_refunded");
	assert_int_equal(points_total(fx, id), 30);
	/* The payment's award (10) is refused by the one already there: the 20
	 * taken already are what 40% of 50 asks, so nothing changes. */
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "partially_refunded");
	assert_int_equal(ledger_rows(fx, id, "award"), 1);
	assert_int_equal(ledger_points(fx, id, "award", id), 50);
	assert_int_equal(ledger_rows(fx, id, "clawback"), 1);
	assert_int_equal(points_total(fx, id), 30);
}

/* ---- payments claimed together: one batch, on PostgreSQL its lanes ---- */

#define T_CLAIMS_MAX 8

struct t_claims {
	struct store_claim tc_claim[T_CLAIMS_MAX];
	struct apply_job tc_job[T_CLAIMS_MAX];
	struct event tc_ev[T_CLAIMS_MAX];
	char tc_key[T_CLAIMS_MAX][32];
	size_t tc_n;
};

/* A claim's handler: the event applied as the receiver applies it, its
 * effect as the reply. */
static int claim_apply_fn(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct apply_job *aj = arg;

	memset(&aj->aj_res, 0, sizeof(aj->aj_res));
	if (orders_apply_event(tx, aj->aj_conf, aj->aj_provider, aj->aj_ev, &aj->aj_res) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	if (reply_set(ret_reply, 200, "text/plain", aj->aj_res.or_effect,
	              strlen(aj->aj_res.or_effect)) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	return STORE_APPLY_DONE;
}

/* Adds a claim of a payment of order (1,000 USD) under key. */
static void claims_add_payment(struct t_claims *tc, const char *key, const char *order,
                               const char *payment_ref)
{
	size_t i = tc->tc_n++;
	struct event *ev = &tc->tc_ev[i];
	struct store_claim *c = &tc->tc_claim[i];

	assert_true(i < T_CLAIMS_MAX);
	memset(ev, 0, sizeof(*ev));
	ev->ev_kind = EVENT_PAYMENT_SUCCEEDED;
	ev->ev_key = dup_or_null(key);
	ev->ev_order_ref = dup_or_null(order);
	ev->ev_payment_ref = dup_or_null(payment_ref);
	ev->ev_amount = 1000;
	snprintf(ev->ev_currency, sizeof(ev->ev_currency), "USD");
	tc->tc_job[i].aj_conf = &t_conf;
	tc->tc_job[i].aj_provider = T_PROVIDER;
	tc->tc_job[i].aj_ev = ev;
	snprintf(tc->tc_key[i], sizeof(tc->tc_key[i]), "%s", key);
	memset(c, 0, sizeof(*c));
	c->sc_scope = T_PROVIDER;
	c->sc_key = tc->tc_key[i];
	memset(c->sc_fingerprint, 7, sizeof(c->sc_fingerprint));
	c->sc_now_ms = T_LATER;
	c->sc_retention_ms = (int64_t)86400 * 1000;
	c->sc_lease_ms = 60000;
	c->sc_apply = claim_apply_fn;
	c->sc_arg = &tc->tc_job[i];
}

/* Submits the claims together (one batch); each must be new. Returns the
 * writer's round trips for it (0 on SQLite). */
static uint64_t claims_submit(struct fixture *fx, struct t_claims *tc)
{
	struct store_stats before;
	struct store_stats after;
	size_t i;

	store_get_stats(fx->fx_st, &before);
	assert_int_equal(store_submit(fx->fx_st, tc->tc_claim, tc->tc_n), 0);
	store_get_stats(fx->fx_st, &after);
	assert_int_equal(after.ss_batches - before.ss_batches, 1);
	for (i = 0; i < tc->tc_n; i++) {
		assert_int_equal(tc->tc_claim[i].sc_outcome, STORE_NEW);
	}
	return after.ss_round_trips - before.ss_round_trips;
}

/* The effect claim i answered with. */
static void claims_assert_reply(const struct t_claims *tc, size_t i, const char *effect)
{
	const struct reply *r = &tc->tc_claim[i].sc_reply;

	assert_int_equal(r->reply_status, 200);
	assert_int_equal(r->reply_body_len, strlen(effect));
	assert_memory_equal(r->reply_body, effect, strlen(effect));
}

static void claims_finish(struct t_claims *tc)
{
	size_t i;

	for (i = 0; i < tc->tc_n; i++) {
		store_claim_finish(&tc->tc_claim[i]);
		event_finish(&tc->tc_ev[i]);
	}
	tc->tc_n = 0;
}

/* Two payment events of one order in one batch (and one of another order):
 * on PostgreSQL's lanes both load the order at one revision, the second's
 * held save changes no row and dooms the pass, and the batch runs again
 * one unit at a time: each order is paid once, with one award, and the
 * answers are those savepoints in sequence give (the second payment is a
 * no-op), as on SQLite. */
static void test_two_payments_of_one_order_in_one_batch_pay_it_once(void **state)
{
	struct fixture *fx = *state;
	char a[ORDERS_ID_LEN + 1];
	char b[ORDERS_ID_LEN + 1];
	struct t_claims *tc = calloc(1, sizeof(*tc));
	int round;

	assert_non_null(tc);
	/* The second round runs with every statement prepared: the writes
	 * are held there. */
	for (round = 0; round < 2; round++) {
		struct log_take lt;
		char k[3][32];
		char *log;

		create(fx, 1000, "USD", a);
		create(fx, 1000, "USD", b);
		snprintf(k[0], sizeof(k[0]), "evt_batch_%d_1", round);
		snprintf(k[1], sizeof(k[1]), "evt_batch_%d_2", round);
		snprintf(k[2], sizeof(k[2]), "evt_batch_%d_3", round);
		claims_add_payment(tc, k[0], a, "pi_batch_a");
		claims_add_payment(tc, k[1], a, "pi_batch_a");
		claims_add_payment(tc, k[2], b, "pi_batch_b");
		log_take_begin(fx, &lt);
		claims_submit(fx, tc);
		log = log_take_end(&lt);
		assert_held_miss_warned(log);
		free(log);
		claims_assert_reply(tc, 0, "paid");
		claims_assert_reply(tc, 1, "noop");
		claims_assert_reply(tc, 2, "paid");
		claims_finish(tc);
		assert_status(fx, a, "paid");
		assert_status(fx, b, "paid");
		assert_int_equal(ledger_rows(fx, a, "award"), 1);
		assert_int_equal(ledger_rows(fx, b, "award"), 1);
		assert_int_equal(points_total(fx, a), 10);
		assert_int_equal(points_total(fx, b), 10);
		assert_int_equal(
		        query_int(fx, "SELECT revision FROM orders WHERE id = ?", a, NULL, NULL),
		        1);
	}
	free(tc);
}

/* A first payment whose award is already there (put in by hand): on the
 * lanes its held award insert changes no row and dooms the pass; the rerun
 * reads the real count and settles on the ledger, and the other payment of
 * the batch is applied once. */
static void test_a_held_award_that_is_there_settles_on_the_ledger_in_a_batch(void **state)
{
	struct fixture *fx = *state;
	char a[ORDERS_ID_LEN + 1];
	char b[ORDERS_ID_LEN + 1];
	struct t_claims *tc = calloc(1, sizeof(*tc));
	struct log_take lt;
	char *log;

	assert_non_null(tc);
	/* Prepares the statements of a payment. */
	create(fx, 1000, "USD", a);
	claims_add_payment(tc, "evt_award_warm", a, "pi_award_warm");
	claims_submit(fx, tc);
	claims_finish(tc);

	create(fx, 1000, "USD", a);
	create(fx, 1000, "USD", b);
	assert_int_equal(store_write(fx->fx_st, T_NOW, foreign_award_fn, a), 0);
	claims_add_payment(tc, "evt_award_1", a, "pi_award_a");
	claims_add_payment(tc, "evt_award_2", b, "pi_award_b");
	log_take_begin(fx, &lt);
	claims_submit(fx, tc);
	log = log_take_end(&lt);
	assert_held_miss_warned(log);
	free(log);
	claims_assert_reply(tc, 0, "paid");
	claims_assert_reply(tc, 1, "paid");
	claims_finish(tc);
	assert_int_equal(ledger_rows(fx, a, "award"), 1);
	assert_int_equal(ledger_points(fx, a, "award", a), 50);
	assert_int_equal(points_total(fx, a), 50);
	assert_int_equal(ledger_rows(fx, b, "award"), 1);
	assert_int_equal(points_total(fx, b), 10);
	free(tc);
}

/* On PostgreSQL a batch of new payments costs a round trip per statement a
 * payment waits for: the claim's insert, the order's load, the reference's
 * bind (with the award and the order's save held ahead of it), the parked
 * events' lookup, and the record's write with COMMIT: five, where each
 * write waited for its own (seven) before. */
static void test_a_batch_of_new_payments_costs_five_round_trips(void **state)
{
	struct fixture *fx = *state;
	struct t_claims *tc = calloc(1, sizeof(*tc));
	uint64_t rt = 0;
	int round;
	size_t i;

	assert_non_null(tc);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < T_CLAIMS_MAX; i++) {
			char id[ORDERS_ID_LEN + 1];
			char key[32];
			char ref[32];

			create(fx, 1000, "USD", id);
			snprintf(key, sizeof(key), "evt_rt_%d_%zu", round, i);
			snprintf(ref, sizeof(ref), "pi_rt_%d_%zu", round, i);
			claims_add_payment(tc, key, id, ref);
		}
		rt = claims_submit(fx, tc);
		for (i = 0; i < T_CLAIMS_MAX; i++) {
			claims_assert_reply(tc, i, "paid");
		}
		claims_finish(tc);
		if (t_pg) {
			print_message("round trips for %d new payments (%s): %llu\n", T_CLAIMS_MAX,
			              round == 0 ? "first" : "prepared", (unsigned long long)rt);
		}
	}
	if (t_pg) {
		assert_true(rt <= 5);
	} else {
		assert_int_equal(rt, 0);
	}
	assert_int_equal(query_int(fx, "SELECT COUNT(*) FROM orders WHERE status = 'paid'", NULL,
	                           NULL, NULL),
	                 2 * T_CLAIMS_MAX);
	assert_int_equal(query_int(fx, "SELECT COUNT(*) FROM points_ledger WHERE reason = 'award'",
	                           NULL, NULL, NULL),
	                 2 * T_CLAIMS_MAX);
	free(tc);
}

/* ---- the lifecycle: references, parked events, failures, disputes ---- */

/* Applies an event of kind about a payment (and, when order is not NULL, the
 * order): the shape every lifecycle event has. */
static void lc(struct fixture *fx, enum event_kind kind, const char *key, const char *order,
               const char *payment_ref, const char *ref, int64_t amount, struct orders_result *ret)
{
	struct t_event te = {
	        .te_kind = kind,
	        .te_key = key,
	        .te_order = order,
	        .te_payment_ref = payment_ref,
	        .te_refund_ref = ref,
	        .te_amount = amount,
	        .te_currency = "USD",
	};

	apply_conf(fx, &t_conf, &te, ret);
}

/* A capture (or its failure) at the provider's time t. */
static void capture_at(struct fixture *fx, enum event_kind kind, const char *key, const char *order,
                       int64_t t, struct orders_result *ret)
{
	struct t_event te = {
	        .te_kind = kind,
	        .te_key = key,
	        .te_order = order,
	        .te_payment_ref = "psp_pay",
	        .te_refund_ref = "psp_cap",
	        .te_amount = 1000,
	        .te_currency = "USD",
	        .te_occurred_ms = t,
	};

	apply_conf(fx, &t_conf, &te, ret);
}

static int64_t chargeback_amount(struct fixture *fx, const char *id)
{
	return query_int(fx, "SELECT chargeback_amount FROM orders WHERE id = ?", id, NULL, NULL);
}

static int64_t parked_open(struct fixture *fx)
{
	return query_int(fx, "SELECT COUNT(*) FROM order_parked WHERE applied_at IS NULL", NULL,
	                 NULL, NULL);
}

static void test_a_refund_naming_only_the_payment_finds_its_order(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;
	struct t_event by_charge = {
	        .te_kind = EVENT_REFUNDED,
	        .te_key = "evt_3",
	        .te_charge_ref = "ch_1",
	        .te_refund_ref = "re_2",
	        .te_amount = 100,
	        .te_currency = "USD",
	};
	struct t_event paid = {
	        .te_kind = EVENT_PAYMENT_SUCCEEDED,
	        .te_key = "evt_1",
	        .te_payment_ref = "pi_1",
	        .te_charge_ref = "ch_1",
	        .te_amount = 1000,
	        .te_currency = "USD",
	};

	create(fx, 1000, "USD", id);
	paid.te_order = id;
	apply_conf(fx, &t_conf, &paid, &res);
	assert_effect(&res, "paid");
	/* Stripe Checkout: the refund's metadata is empty, its PaymentIntent
	 * is the payment's. */
	lc(fx, EVENT_REFUNDED, "evt_2", NULL, "pi_1", "re_1", 400, &res);
	assert_effect(&res, "partially_refunded");
	assert_string_equal(res.or_order_id, id);
	/* A reference the order was seen under, the charge, finds it as well. */
	apply_conf(fx, &t_conf, &by_charge, &res);
	assert_effect(&res, "partially_refunded");
	assert_string_equal(res.or_order_id, id);
	assert_int_equal(refunded_amount(fx, id), 500);
	/* A reference under another provider instance is another payment. */
	by_charge.te_key = "evt_4";
	by_charge.te_refund_ref = "re_3";
	by_charge.te_provider = "stripe-eu";
	apply_conf(fx, &t_conf, &by_charge, &res);
	assert_refused(&res, "unknown_order");
	assert_int_equal(refunded_amount(fx, id), 500);
	assert_int_equal(
	        query_int(fx, "SELECT COUNT(*) FROM order_refs WHERE order_id = ?", id, NULL, NULL),
	        2);
}

static void test_a_refund_before_the_payment_it_names_waits_for_the_payment(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	lc(fx, EVENT_REFUNDED, "evt_2", NULL, "pi_1", "re_1", 1000, &res);
	assert_refused(&res, "unknown_order");
	assert_status(fx, id, "pending");
	assert_int_equal(parked_open(fx), 1);
	/* The same callback again parks nothing more. */
	lc(fx, EVENT_REFUNDED, "evt_2", NULL, "pi_1", "re_1", 1000, &res);
	assert_int_equal(parked_open(fx), 1);

	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_effect(&res, "paid");
	assert_int_equal(res.or_n_effects, 2);
	assert_string_equal(res.or_effects[0], "paid");
	assert_string_equal(res.or_effects[1], "refunded");
	assert_status(fx, id, "refunded");
	assert_int_equal(refunded_amount(fx, id), 1000);
	assert_int_equal(points_total(fx, id), 0);
	assert_int_equal(parked_open(fx), 0);
	/* Redelivered now, the refund finds its order and counts nothing. */
	lc(fx, EVENT_REFUNDED, "evt_2", NULL, "pi_1", "re_1", 1000, &res);
	assert_effect(&res, "noop");
	assert_int_equal(refund_rows(fx, id), 1);
}

static void test_a_dispute_before_its_payment_waits_for_it(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	lc(fx, EVENT_DISPUTE_OPENED, "evt_d1", NULL, "pi_1", "dp_1", 1000, &res);
	assert_refused(&res, "unknown_order");
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_effect(&res, "paid");
	assert_int_equal(res.or_n_effects, 2);
	assert_string_equal(res.or_effects[1], "disputed");
	assert_status(fx, id, "disputed");
	assert_int_equal(
	        query_int(fx, "SELECT disputed_amount FROM orders WHERE id = ?", id, NULL, NULL),
	        1000);
	/* Points stay while the dispute is open: the funds are only withheld. */
	assert_int_equal(points_total(fx, id), 10);
}

static void test_dispute_opened_then_lost_claws_back_points_once(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_int_equal(points_total(fx, id), 10);
	lc(fx, EVENT_DISPUTE_OPENED, "evt_d1", NULL, "pi_1", "dp_1", 1000, &res);
	assert_effect(&res, "disputed");
	assert_status(fx, id, "disputed");
	assert_int_equal(points_total(fx, id), 10);
	lc(fx, EVENT_DISPUTE_LOST, "evt_d2", NULL, "pi_1", "dp_1", 1000, &res);
	assert_effect(&res, "dispute_lost");
	assert_status(fx, id, "refunded");
	assert_int_equal(chargeback_amount(fx, id), 1000);
	assert_int_equal(points_total(fx, id), 0);
	assert_int_equal(ledger_points(fx, id, "clawback", "dp_1"), -10);
	/* Delivered twice, and a second notice of the same loss: nothing more. */
	lc(fx, EVENT_DISPUTE_LOST, "evt_d2", NULL, "pi_1", "dp_1", 1000, &res);
	assert_effect(&res, "noop");
	lc(fx, EVENT_DISPUTE_OPENED, "evt_d1", NULL, "pi_1", "dp_1", 1000, &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "refunded");
	assert_int_equal(ledger_rows(fx, id, "clawback"), 1);
	assert_int_equal(points_total(fx, id), 0);
}

static void test_dispute_lost_before_it_opened_ends_the_same(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	lc(fx, EVENT_DISPUTE_LOST, "evt_d2", NULL, "pi_1", "dp_1", 600, &res);
	assert_effect(&res, "dispute_lost");
	lc(fx, EVENT_DISPUTE_OPENED, "evt_d1", NULL, "pi_1", "dp_1", 600, &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "partially_refunded");
	assert_int_equal(chargeback_amount(fx, id), 600);
	assert_int_equal(points_total(fx, id), 4);
	assert_int_equal(ledger_rows(fx, id, "clawback"), 1);
}

static void test_dispute_opened_then_won_restores_the_state_before(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, "re_1", 300, 0, &res);
	assert_status(fx, id, "partially_refunded");
	assert_int_equal(points_total(fx, id), 7);
	lc(fx, EVENT_DISPUTE_OPENED, "evt_d1", NULL, "pi_1", "dp_1", 700, &res);
	assert_effect(&res, "disputed");
	assert_status(fx, id, "disputed");
	lc(fx, EVENT_DISPUTE_WON, "evt_d2", NULL, "pi_1", "dp_1", 700, &res);
	assert_effect(&res, "dispute_won");
	assert_status(fx, id, "partially_refunded");
	assert_int_equal(refunded_amount(fx, id), 300);
	assert_int_equal(chargeback_amount(fx, id), 0);
	assert_int_equal(points_total(fx, id), 7);
	/* Twice, and in reverse: still back where it was. */
	lc(fx, EVENT_DISPUTE_WON, "evt_d2", NULL, "pi_1", "dp_1", 700, &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "partially_refunded");
}

static void test_dispute_won_before_it_opened_leaves_the_order_paid(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	lc(fx, EVENT_DISPUTE_WON, "evt_d2", NULL, "pi_1", "dp_1", 1000, &res);
	assert_effect(&res, "dispute_won");
	lc(fx, EVENT_DISPUTE_OPENED, "evt_d1", NULL, "pi_1", "dp_1", 1000, &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "paid");
	assert_int_equal(points_total(fx, id), 10);
}

static void test_a_decision_the_issuer_reverses_follows_the_last_step(void **state)
{
	/* Adyen: CHARGEBACK, CHARGEBACK_REVERSED (won), SECOND_CHARGEBACK
	 * (lost), PREARBITRATION_WON; in order, then in reverse. */
	static const struct {
		enum event_kind kind;
		const char *key;
		const char *status;
		int64_t points;
	} steps[] = {
	        {EVENT_DISPUTE_OPENED, "d:CHARGEBACK", "disputed", 10},
	        {EVENT_DISPUTE_WON, "d:CHARGEBACK_REVERSED", "paid", 10},
	        {EVENT_DISPUTE_LOST, "d:SECOND_CHARGEBACK", "refunded", 0},
	        {EVENT_DISPUTE_WON, "d:PREARBITRATION_WON", "paid", 10},
	};
	struct fixture *fx = *state;
	char a[ORDERS_ID_LEN + 1];
	char b[ORDERS_ID_LEN + 1];
	struct orders_result res;
	size_t i;

	create(fx, 1000, "USD", a);
	create(fx, 1000, "USD", b);
	pay(fx, "evt_a", a, 1000, "USD", "psp_a", &res);
	pay(fx, "evt_b", b, 1000, "USD", "psp_b", &res);
	for (i = 0; i < 4; i++) {
		lc(fx, steps[i].kind, steps[i].key, NULL, "psp_a", "dispute_a", 1000, &res);
		assert_status(fx, a, steps[i].status);
		assert_int_equal(points_total(fx, a), steps[i].points);
	}
	assert_int_equal(ledger_points(fx, a, "clawback", "dispute_a"), -10);
	assert_int_equal(ledger_points(fx, a, "restore", "dispute_a"), 10);
	for (i = 4; i-- > 0;) {
		lc(fx, steps[i].kind, steps[i].key, NULL, "psp_b", "dispute_b", 1000, &res);
	}
	assert_status(fx, b, "paid");
	assert_int_equal(points_total(fx, b), 10);
}

static void test_a_failed_refund_gives_back_exactly_that_refund_once(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, "re_1", 300, 0, &res);
	refund(fx, "evt_3", id, "re_2", 200, 0, &res);
	assert_int_equal(points_total(fx, id), 5);
	lc(fx, EVENT_REFUND_FAILED, "evt_4", NULL, "pi_1", "re_1", 300, &res);
	assert_effect(&res, "refund_failed");
	assert_status(fx, id, "partially_refunded");
	assert_int_equal(refunded_amount(fx, id), 200);
	assert_int_equal(points_total(fx, id), 8);
	assert_int_equal(ledger_points(fx, id, "restore", "re_1"), 3);
	/* Twice, under its own key and under another: once. */
	lc(fx, EVENT_REFUND_FAILED, "evt_4", NULL, "pi_1", "re_1", 300, &res);
	assert_effect(&res, "noop");
	lc(fx, EVENT_REFUND_FAILED, "evt_5", NULL, "pi_1", "re_1", 300, &res);
	assert_effect(&res, "noop");
	/* And a late copy of the refund counts nothing. */
	refund(fx, "evt_2", id, "re_1", 300, 0, &res);
	assert_effect(&res, "noop");
	assert_int_equal(refunded_amount(fx, id), 200);
	/* The whole refund failing brings the order back to paid. */
	lc(fx, EVENT_REFUND_FAILED, "evt_6", NULL, "pi_1", "re_2", 200, &res);
	assert_effect(&res, "refund_failed");
	assert_status(fx, id, "paid");
	assert_int_equal(points_total(fx, id), 10);
}

static void test_a_refund_failure_before_its_refund_leaves_the_refund_uncounted(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	lc(fx, EVENT_REFUND_FAILED, "evt_4", NULL, "pi_1", "re_1", 1000, &res);
	assert_effect(&res, "noop");
	refund(fx, "evt_2", id, "re_1", 1000, 0, &res);
	assert_effect(&res, "noop");
	lc(fx, EVENT_REFUND_FAILED, "evt_4", NULL, "pi_1", "re_1", 1000, &res);
	assert_effect(&res, "noop");
	assert_status(fx, id, "paid");
	assert_int_equal(refunded_amount(fx, id), 0);
	assert_int_equal(points_total(fx, id), 10);
}

static void test_a_failed_refund_counted_only_in_running_totals_is_given_back(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	char id2[ORDERS_ID_LEN + 1];
	struct orders_result res;

	/* Stripe's charge.refunded without its refunds list: running totals
	 * under the charge; the failure names a refund never seen by id. */
	create(fx, 1000, "USD", id);
	pay(fx, "evt_1", id, 1000, "USD", "pi_1", &res);
	refund(fx, "evt_2", id, "ch_1", 200, 1, &res);
	refund(fx, "evt_3", id, "ch_1", 500, 1, &res);
	assert_int_equal(refunded_amount(fx, id), 500);
	lc(fx, EVENT_REFUND_FAILED, "evt_4", NULL, "pi_1", "re_2", 300, &res);
	assert_effect(&res, "refund_failed");
	assert_int_equal(refunded_amount(fx, id), 200);
	/* The provider's total keeps counting the failed refund. */
	refund(fx, "evt_3b", id, "ch_1", 500, 1, &res);
	assert_effect(&res, "noop");
	refund(fx, "evt_5", id, "ch_1", 800, 1, &res);
	assert_effect(&res, "partially_refunded");
	assert_int_equal(refunded_amount(fx, id), 500);

	/* The failure first: the totals that follow come out the same. */
	create(fx, 1000, "USD", id2);
	pay(fx, "evt_6", id2, 1000, "USD", "pi_2", &res);
	lc(fx, EVENT_REFUND_FAILED, "evt_9", NULL, "pi_2", "re_2", 300, &res);
	assert_effect(&res, "noop");
	refund(fx, "evt_8", id2, "ch_2", 500, 1, &res);
	refund(fx, "evt_7", id2, "ch_2", 200, 1, &res);
	assert_int_equal(refunded_amount(fx, id2), 200);
	assert_status(fx, id2, "partially_refunded");
}

static void test_manual_capture_authorizes_then_pays_on_capture(void **state)
{
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	lc(fx, EVENT_PAYMENT_AUTHORIZED, "psp_pay:AUTHORISATION", id, "psp_pay", NULL, 1000, &res);
	assert_effect(&res, "authorized");
	assert_status(fx, id, "authorized");
	assert_int_equal(points_total(fx, id), 0);
	lc(fx, EVENT_PAYMENT_AUTHORIZED, "psp_pay:AUTHORISATION", id, "psp_pay", NULL, 1000, &res);
	assert_effect(&res, "noop");
	lc(fx, EVENT_PAYMENT_AUTHORIZED, "psp_x:AUTHORISATION", id, "psp_x", NULL, 999, &res);
	assert_refused(&res, "amount_mismatch");
	capture_at(fx, EVENT_PAYMENT_CAPTURED, "psp_cap:CAPTURE@1", NULL, 1000, &res);
	assert_effect(&res, "paid");
	assert_string_equal(res.or_order_id, id);
	assert_status(fx, id, "paid");
	assert_int_equal(points_total(fx, id), 10);
}

static void test_a_failed_capture_unpays_the_order_until_a_later_capture(void **state)
{
	struct fixture *fx = *state;
	char a[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", a);
	lc(fx, EVENT_PAYMENT_AUTHORIZED, "k1", a, "psp_pay", NULL, 1000, &res);
	capture_at(fx, EVENT_PAYMENT_CAPTURED, "k2", a, 1000, &res);
	assert_effect(&res, "paid");
	capture_at(fx, EVENT_CAPTURE_FAILED, "k3", a, 2000, &res);
	assert_effect(&res, "capture_failed");
	assert_status(fx, a, "authorized");
	assert_int_equal(points_total(fx, a), 0);
	capture_at(fx, EVENT_CAPTURE_FAILED, "k3", a, 2000, &res);
	assert_effect(&res, "noop");
	/* The provider re-captures. */
	capture_at(fx, EVENT_PAYMENT_CAPTURED, "k4", a, 3000, &res);
	assert_effect(&res, "paid");
	assert_status(fx, a, "paid");
	assert_int_equal(points_total(fx, a), 10);
	assert_int_equal(ledger_rows(fx, a, "award"), 1);
}

static void test_a_capture_failure_before_its_capture_keeps_the_order_unpaid(void **state)
{
	struct fixture *fx = *state;
	char a[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", a);
	lc(fx, EVENT_PAYMENT_AUTHORIZED, "k1", a, "psp_pay", NULL, 1000, &res);
	capture_at(fx, EVENT_CAPTURE_FAILED, "k3", a, 2000, &res);
	assert_effect(&res, "noop");
	capture_at(fx, EVENT_PAYMENT_CAPTURED, "k2", a, 1000, &res);
	assert_effect(&res, "noop");
	assert_status(fx, a, "authorized");
	assert_int_equal(points_total(fx, a), 0);
	capture_at(fx, EVENT_PAYMENT_CAPTURED, "k4", a, 3000, &res);
	assert_effect(&res, "paid");
	assert_int_equal(points_total(fx, a), 10);
}

static void test_cancellation_and_expiry_close_only_unpaid_orders(void **state)
{
	struct fixture *fx = *state;
	char a[ORDERS_ID_LEN + 1];
	char b[ORDERS_ID_LEN + 1];
	char c[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", a);
	create(fx, 1000, "USD", b);
	create(fx, 1000, "USD", c);
	lc(fx, EVENT_PAYMENT_CANCELLED, "x1", a, "pa", NULL, -1, &res);
	assert_effect(&res, "cancelled");
	assert_status(fx, a, "cancelled");
	lc(fx, EVENT_PAYMENT_CANCELLED, "x1", a, "pa", NULL, -1, &res);
	assert_effect(&res, "noop");
	lc(fx, EVENT_PAYMENT_AUTHORIZED, "x2", b, "pb", NULL, 1000, &res);
	lc(fx, EVENT_PAYMENT_EXPIRED, "x3", NULL, "pb", NULL, -1, &res);
	assert_effect(&res, "expired");
	assert_status(fx, b, "expired");
	pay(fx, "x4", c, 1000, "USD", "pc", &res);
	lc(fx, EVENT_PAYMENT_CANCELLED, "x5", c, "pc", NULL, -1, &res);
	assert_effect(&res, "noop");
	lc(fx, EVENT_PAYMENT_EXPIRED, "x6", c, "pc", NULL, -1, &res);
	assert_effect(&res, "noop");
	assert_status(fx, c, "paid");
	/* Money taken after all: the payment wins over the cancellation. */
	pay(fx, "x7", a, 1000, "USD", "pa", &res);
	assert_effect(&res, "paid");
	assert_status(fx, a, "paid");
}

static void test_cancel_or_refund_cancels_unpaid_and_refunds_the_rest_of_paid(void **state)
{
	struct fixture *fx = *state;
	char a[ORDERS_ID_LEN + 1];
	char b[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", a);
	create(fx, 1000, "USD", b);
	lc(fx, EVENT_PAYMENT_AUTHORIZED, "y1", a, "pa", NULL, 1000, &res);
	lc(fx, EVENT_CANCEL_OR_REFUND, "y2", NULL, "pa", "mod_a", 1000, &res);
	assert_effect(&res, "cancelled");
	assert_status(fx, a, "cancelled");
	pay(fx, "y3", b, 1000, "USD", "pb", &res);
	refund(fx, "y4", b, "re_1", 300, 0, &res);
	lc(fx, EVENT_CANCEL_OR_REFUND, "y5", NULL, "pb", "mod_b", 1000, &res);
	assert_effect(&res, "refunded");
	assert_status(fx, b, "refunded");
	assert_int_equal(query_int(fx, "SELECT amount FROM refunds WHERE refund_ref = ?", "mod_b",
	                           NULL, NULL),
	                 700);
	lc(fx, EVENT_CANCEL_OR_REFUND, "y5", NULL, "pb", "mod_b", 1000, &res);
	assert_effect(&res, "noop");
	assert_int_equal(points_total(fx, b), 0);
}

/* ---- points ---- */

static void test_clawback_is_proportional_and_exact_at_the_end(void **state)
{
	static const struct orders_conf third = {.oc_points_num = 1, .oc_points_den = 3};
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay_conf(fx, &third, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_int_equal(ledger_points(fx, id, "award", id), 333);

	/* 10% refunded: floor(333 * 100 / 1000) = 33 */
	refund_conf(fx, &third, "evt_2", id, "re_1", 100, 0, &res);
	assert_int_equal(ledger_points(fx, id, "clawback", "re_1"), -33);
	/* 35% refunded: floor(333 * 350 / 1000) = 116, so 83 more */
	refund_conf(fx, &third, "evt_3", id, "re_2", 250, 0, &res);
	assert_int_equal(ledger_points(fx, id, "clawback", "re_2"), -83);
	/* the rest: everything left, 217, whatever the rounding before */
	refund_conf(fx, &third, "evt_4", id, "re_3", 650, 0, &res);
	assert_effect(&res, "refunded");
	assert_int_equal(ledger_points(fx, id, "clawback", "re_3"), -217);
	assert_int_equal(points_total(fx, id), 0);
}

static void test_points_are_computed_without_overflow_for_large_amounts(void **state)
{
	/* amount * num is about 1.2e20, past INT64_MAX; the result is not. */
	static const struct orders_conf big = {.oc_points_num = 123456, .oc_points_den = 100000};
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, MONEY_MAX_MINOR, "USD", id);
	pay_conf(fx, &big, "evt_1", id, MONEY_MAX_MINOR, "USD", "pi_1", &res);
	assert_effect(&res, "paid");
	assert_int_equal(ledger_points(fx, id, "award", id), 1234560000000000LL);
	/* awarded * refunded is about 6e29 */
	refund_conf(fx, &big, "evt_2", id, "re_1", MONEY_MAX_MINOR / 2, 0, &res);
	assert_int_equal(ledger_points(fx, id, "clawback", "re_1"), -617280000000000LL);
	refund_conf(fx, &big, "evt_3", id, "re_2", MONEY_MAX_MINOR / 2, 0, &res);
	assert_effect(&res, "refunded");
	assert_int_equal(points_total(fx, id), 0);
}

static void test_points_past_the_int64_range_saturate_instead_of_wrapping(void **state)
{
	static const struct orders_conf huge = {.oc_points_num = INT64_MAX, .oc_points_den = 1};
	struct fixture *fx = *state;
	char id[ORDERS_ID_LEN + 1];
	struct orders_result res;

	create(fx, 1000, "USD", id);
	pay_conf(fx, &huge, "evt_1", id, 1000, "USD", "pi_1", &res);
	assert_int_equal(ledger_points(fx, id, "award", id), INT64_MAX);
	refund_conf(fx, &huge, "evt_2", id, "re_1", 1000, 0, &res);
	assert_int_equal(ledger_points(fx, id, "clawback", "re_1"), -INT64_MAX);
}

int main(void)
{
	int failed;
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(
	                test_create_makes_a_pending_order_with_an_upper_case_currency, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_create_accepts_a_zero_amount, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_create_rejects_negative_amounts_and_malformed_currencies, setup,
	                teardown),
	        cmocka_unit_test(test_new_ids_are_well_formed_and_distinct),
	        cmocka_unit_test(test_new_ids_sort_by_their_time),
	        cmocka_unit_test_setup_teardown(
	                test_payment_marks_the_order_paid_and_awards_points_once, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_two_payment_events_for_one_payment_pay_once,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_payment_for_an_unknown_order_is_refused, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_payment_with_a_different_amount_is_refused,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_payment_in_a_different_currency_is_refused,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_a_zero_points_rate_pays_without_ledger_rows,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_other_events_are_recorded_without_changes,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_full_refund_after_payment_refunds_the_order_and_claws_back_all_points,
	                setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_partial_refunds_accumulate_until_the_order_is_fully_refunded, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_the_same_refund_id_twice_counts_once, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(
	                test_cumulative_refund_totals_arriving_out_of_order_count_once, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_refund_larger_than_what_is_left_is_capped_at_the_order_amount, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_cumulative_totals_under_one_charge_id_count_each_increase, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_refund_without_an_amount_is_refused, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(
	                test_refund_without_a_refund_id_counts_once_per_event, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_refund_in_a_different_currency_is_refused,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_refund_before_its_payment_ends_as_if_it_came_after, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_late_payment_after_a_partial_refund_earns_the_points_left, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_first_payment_whose_award_is_there_settles_on_the_ledger, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_refund_naming_only_the_payment_finds_its_order, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_refund_before_the_payment_it_names_waits_for_the_payment, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_a_dispute_before_its_payment_waits_for_it,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dispute_opened_then_lost_claws_back_points_once, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_dispute_lost_before_it_opened_ends_the_same,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dispute_opened_then_won_restores_the_state_before, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_dispute_won_before_it_opened_leaves_the_order_paid, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_decision_the_issuer_reverses_follows_the_last_step, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_failed_refund_gives_back_exactly_that_refund_once, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_refund_failure_before_its_refund_leaves_the_refund_uncounted, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_failed_refund_counted_only_in_running_totals_is_given_back, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_manual_capture_authorizes_then_pays_on_capture,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_failed_capture_unpays_the_order_until_a_later_capture, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_capture_failure_before_its_capture_keeps_the_order_unpaid, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_cancellation_and_expiry_close_only_unpaid_orders, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_cancel_or_refund_cancels_unpaid_and_refunds_the_rest_of_paid, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_clawback_is_proportional_and_exact_at_the_end,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_points_are_computed_without_overflow_for_large_amounts, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_points_past_the_int64_range_saturate_instead_of_wrapping, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(
	                test_two_payments_of_one_order_in_one_batch_pay_it_once, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_a_held_award_that_is_there_settles_on_the_ledger_in_a_batch, setup,
	                teardown),
	        cmocka_unit_test_setup_teardown(test_a_batch_of_new_payments_costs_five_round_trips,
	                                        setup, teardown),
	};

	/* Refusals log warnings by design; keep the test output to errors. */
	log_set_level(LOG_LEVEL_ERR);
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	if (pg_fixture_conninfo(T_PG_SCHEMA, t_pg_conninfo, sizeof(t_pg_conninfo)) < 0) {
		return failed;
	}
	/* The same handler flows on PostgreSQL. */
	t_pg = 1;
	return failed + cmocka_run_group_tests_name("postgresql", tests, NULL, NULL);
}
