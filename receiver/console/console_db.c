/* console_db.c: the operator side's SQL: event filters, dismissing and
 * reprocessing failed events, the audit log, and the console's reads. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "config.h"
#include "console_db.h"
#include "event.h"
#include "ingest.h"
#include "log.h"
#include "outbox.h"
#include "orders.h"
#include "outbox.h"
#include "provider.h"
#include "reply.h"
#include "store.h"

#define CONSOLE_DB_SQL_MAX 4096
#define CONSOLE_DB_FILTER_PARAMS 16

/* The outcome an operator reads: a thin event acknowledged and waiting for
 * its full event (done, effect to_fetch: ingest.h) is "fetching", as in
 * idemhook events list. */
#define CONSOLE_DB_OUTCOME                                                                         \
	"(CASE WHEN outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH "' THEN 'fetching' "   \
	"ELSE outcome END)"

/* Events parked (order_parked) until their payment arrives, not applied
 * yet: refunds, disputes and the like that named a payment no order was
 * known under. Read from the parked rows through their partial index, then
 * the events by key, whatever the events' number. */
#define CONSOLE_DB_PARKED                                                                          \
	" AND id IN (SELECT r.id FROM order_parked AS p JOIN idempotency_records AS r"             \
	" ON r.scope = p.provider AND r.idem_key = p.idem_key WHERE p.applied_at IS NULL)"

static int console_db_read(struct store *st, int64_t now_ms, unsigned wait_ms, const char *sql,
                           const struct store_value *p, size_t n, console_db_row_fn fn, void *arg);

void console_db_filter_init(struct console_db_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->ef_dismissed = -1;
	f->ef_test_mode = -1;
}

/* Appends f's conditions (" AND ...") to sql, as the backend's SQL, and
 * their parameters to p from *n on. Returns 0, or -1 when the statement
 * would not fit. */
static int console_db_filter_sql(const struct console_db_filter *f, enum store_backend backend,
                                 struct buf *sql, struct store_value *p, size_t *n)
{
	size_t i = *n;

	/* scope || '' keeps the planner off the (scope, idem_key) index: a
	 * provider holds a large share of the events, and walking the ids
	 * newest first (LIMIT) beats reading all of one provider's to sort
	 * them. Portable: SQLite and PostgreSQL both concatenate. */
	if (f->ef_provider != NULL) {
		buf_puts(sql, " AND scope || '' = ?");
		p[i++] = store_text(f->ef_provider);
	}
	if (f->ef_open) {
		buf_puts(sql, " AND outcome = 'failed' AND dismissed_at IS NULL AND test_mode = 0");
	}
	if (f->ef_parked) {
		buf_puts(sql, CONSOLE_DB_PARKED);
	}
	/* Literal, not a parameter: then the planner may use the partial
	 * index of failed events (events_failed) and read only those. */
	if (f->ef_outcome != NULL && strcmp(f->ef_outcome, "failed") == 0) {
		buf_puts(sql, " AND outcome = 'failed'");
	} else if (f->ef_outcome != NULL && strcmp(f->ef_outcome, "done") == 0) {
		buf_puts(
		        sql,
		        " AND outcome = 'done' AND COALESCE(effect, '') <> '" INGEST_EFFECT_TO_FETCH
		        "'");
	} else if (f->ef_outcome != NULL && strcmp(f->ef_outcome, "fetching") == 0) {
		buf_puts(sql, " AND outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH "'");
	} else if (f->ef_outcome != NULL) {
		buf_puts(sql, " AND outcome = ?");
		p[i++] = store_text(f->ef_outcome);
	}
	if (f->ef_reason != NULL) {
		buf_puts(sql, " AND (reason = ? OR (outcome = 'done' AND effect = ?))");
		p[i++] = store_text(f->ef_reason);
		p[i++] = store_text(f->ef_reason);
	}
	if (f->ef_source != NULL) {
		buf_puts(sql, " AND source = ?");
		p[i++] = store_text(f->ef_source);
	}
	if (f->ef_order != NULL) {
		buf_puts(sql, " AND order_ref = ?");
		p[i++] = store_text(f->ef_order);
	}
	/* The prefix's bytes: substr on text counts characters, so a prefix
	 * that is not ASCII would be compared with too long a start. Both
	 * backends compare the key's first bytes as binary: SQLite a BLOB,
	 * PostgreSQL a bytea (the key's UTF-8, what the client wrote). No
	 * index serves it either way; the list walks the ids. */
	if (f->ef_key_prefix != NULL && f->ef_key_prefix[0] != '\0') {
		buf_puts(sql, backend == STORE_BACKEND_POSTGRESQL
		                      ? " AND substr(convert_to(idem_key, 'UTF8'), 1, CAST(? AS "
		                        "INTEGER)) = ?"
		                      : " AND substr(CAST(idem_key AS BLOB), 1, ?) = ?");
		p[i++] = store_int((int64_t)strlen(f->ef_key_prefix));
		p[i++] = store_blob(f->ef_key_prefix, strlen(f->ef_key_prefix));
	}
	if (f->ef_since_ms > 0) {
		buf_puts(sql, " AND received_at >= ?");
		p[i++] = store_int(f->ef_since_ms);
	}
	if (f->ef_until_ms > 0) {
		buf_puts(sql, " AND received_at < ?");
		p[i++] = store_int(f->ef_until_ms);
	}
	if (f->ef_dismissed == 0) {
		buf_puts(sql, " AND dismissed_at IS NULL");
	} else if (f->ef_dismissed == 1) {
		buf_puts(sql, " AND dismissed_at IS NOT NULL");
	}
	if (f->ef_test_mode == 0) {
		buf_puts(sql, " AND test_mode = 0");
	} else if (f->ef_test_mode == 1) {
		buf_puts(sql, " AND test_mode <> 0");
	}
	*n = i;
	return sql->buf_overflow ? -1 : 0;
}

/* ---- the audit log ---- */

#define CONSOLE_DB_REFUSED_PREFIX "refused: "

/* The reason an audit row keeps: the operator's, or for a refusal that
 * came with none, why it was refused (the column a reader looks at, which
 * `audit list` prints whole where it cuts the result). */
static const char *console_db_audit_reason(const char *reason, const char *result)
{
	size_t n = strlen(CONSOLE_DB_REFUSED_PREFIX);

	if ((reason == NULL || reason[0] == '\0') && result != NULL &&
	    strncmp(result, CONSOLE_DB_REFUSED_PREFIX, n) == 0 && result[n] != '\0') {
		return result + n;
	}
	return reason;
}

int console_db_audit_tx(struct store_tx *tx, const char *actor, const char *action,
                        const char *target, const char *reason, const char *result)
{
	struct store_value p[] = {store_int(store_tx_now(tx)),
	                          store_text(actor),
	                          store_text(action),
	                          store_text(target),
	                          store_text(console_db_audit_reason(reason, result)),
	                          store_text(result)};

	return store_exec(tx,
	                  "INSERT INTO audit_log (at, actor, action, target, reason, result)"
	                  " VALUES (?, ?, ?, ?, ?, ?)",
	                  p, 6, NULL);
}

struct console_db_audit_one {
	const char *ao_actor;
	const char *ao_action;
	const char *ao_target;
	const char *ao_reason;
	const char *ao_result;
};

static int console_db_audit_unit(struct store_tx *tx, void *arg)
{
	const struct console_db_audit_one *a = arg;

	return console_db_audit_tx(tx, a->ao_actor, a->ao_action, a->ao_target, a->ao_reason,
	                           a->ao_result);
}

int console_db_audit(struct store *st, int64_t now_ms, const char *actor, const char *action,
                     const char *target, const char *reason, const char *result)
{
	struct console_db_audit_one a = {actor, action, target, reason, result};

	return store_write(st, now_ms, console_db_audit_unit, &a);
}

int console_db_outbox_admin(struct store *st, const struct outbox_conf *oc, int64_t now_ms,
                            const char *actor, const char *op, int64_t id, const char *reason,
                            char *ret_msg, size_t msg_size)
{
	char action[40];
	char target[40];
	char result[CONSOLE_DB_MSG_MAX + 320];
	int rc;

	if (strcmp(op, "retry") == 0) {
		rc = outbox_admin_retry(st, id, now_ms, ret_msg, msg_size);
	} else if (strcmp(op, "cancel") == 0) {
		rc = outbox_admin_cancel(st, id, now_ms, ret_msg, msg_size);
	} else if (strcmp(op, "compensate") == 0 && oc != NULL) {
		rc = outbox_admin_compensate(st, oc, id, now_ms, ret_msg, msg_size);
	} else {
		snprintf(ret_msg, msg_size, "no outbox transition %s", op);
		return -1;
	}
	if (rc == OUTBOX_ADMIN_UNKNOWN) {
		return rc;
	}
	if (rc < 0) {
		snprintf(result, sizeof(result), "error");
	} else {
		snprintf(result, sizeof(result), "%s: %s", rc == OUTBOX_ADMIN_OK ? "ok" : "refused",
		         ret_msg);
	}
	snprintf(action, sizeof(action), "outbox.%s", op);
	snprintf(target, sizeof(target), "outbox:%" PRId64, id);
	if (console_db_audit(st, now_ms, actor, action, target, reason, result) < 0) {
		log_err("audit: %s by %s on %s not recorded in the audit log", action, actor,
		        target);
	}
	return rc;
}

struct console_db_audit_q {
	const char *aq_actor;
	const char *aq_action;
	int64_t aq_before;
	int64_t aq_limit;
	int (*aq_fn)(void *arg, const struct console_db_audit_row *row);
	void *aq_arg;
};

static int console_db_audit_row(void *arg, const struct store_row *row)
{
	struct console_db_audit_q *q = arg;
	struct console_db_audit_row r;

	r.ar_id = store_row_int(row, 0);
	r.ar_at = store_row_int(row, 1);
	r.ar_actor = store_row_text(row, 2);
	r.ar_action = store_row_text(row, 3);
	r.ar_target = store_row_text(row, 4);
	r.ar_reason = store_row_text(row, 5);
	r.ar_result = store_row_text(row, 6);
	return q->aq_fn(q->aq_arg, &r);
}

int console_db_audit_list_within(struct store *st, int64_t now_ms, unsigned wait_ms,
                                 const char *actor, const char *action, int64_t before_id,
                                 int64_t limit,
                                 int (*fn)(void *arg, const struct console_db_audit_row *row),
                                 void *arg)
{
	struct console_db_audit_q q = {actor, action, before_id, limit, fn, arg};
	struct store_value p[] = {
	        store_int(before_id > 0 ? before_id : INT64_MAX),
	        store_text(actor),
	        store_text(actor),
	        store_text(action),
	        store_text(action),
	        store_int(limit),
	};

	return console_db_read(st, now_ms, wait_ms,
	                       "SELECT id, at, actor, action, target, reason, result FROM audit_log"
	                       " WHERE id < ? AND (? IS NULL OR actor = ?)"
	                       " AND (? IS NULL OR action = ?) ORDER BY id DESC LIMIT ?",
	                       p, 6, console_db_audit_row, &q);
}

int console_db_audit_list(struct store *st, int64_t now_ms, const char *actor, const char *action,
                          int64_t before_id, int64_t limit,
                          int (*fn)(void *arg, const struct console_db_audit_row *row), void *arg)
{
	return console_db_audit_list_within(st, now_ms, 0, actor, action, before_id, limit, fn,
	                                    arg);
}

/* ---- dismissing ---- */

struct console_db_dismiss_ctx {
	const char *dc_actor;
	int64_t dc_id;
	const char *dc_reason;
	char *dc_msg;
	size_t dc_size;
};

static int console_db_dismiss_unit(struct store_tx *tx, void *arg)
{
	struct console_db_dismiss_ctx *d = arg;
	struct store_value p[5];
	struct store_row row;
	char target[40];
	char result[CONSOLE_DB_MSG_MAX + 16];
	int64_t changed = 0;
	int state;
	int rc;

	snprintf(target, sizeof(target), "event:%" PRId64, d->dc_id);
	p[0] = store_int(store_tx_now(tx));
	p[1] = store_text(d->dc_actor);
	p[2] = store_text(d->dc_reason);
	p[3] = store_int(d->dc_id);
	/* A failed event, or a thin event waiting for its full event: both
	 * were acknowledged and never applied, and both may be closed. A thin
	 * event dismissed leaves the fetch worker's list (ingest.h,
	 * INGEST_SQL_FETCH_PENDING), and can no longer be applied. */
	if (store_exec(tx,
	               "UPDATE idempotency_records SET dismissed_at = ?, dismissed_by = ?, "
	               "dismiss_reason = ?"
	               " WHERE id = ? AND received_at IS NOT NULL AND (outcome = 'failed' OR "
	               "(outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH
	               "')) AND dismissed_at IS NULL",
	               p, 4, &changed) < 0) {
		return -1;
	}
	if (changed == 1) {
		snprintf(d->dc_msg, d->dc_size, "event %" PRId64 " dismissed", d->dc_id);
		state = CONSOLE_DB_OK;
		snprintf(result, sizeof(result), "ok");
	} else {
		p[0] = store_int(d->dc_id);
		rc = store_query(
		        tx, "SELECT " CONSOLE_DB_OUTCOME ", dismissed_by FROM events WHERE id = ?",
		        p, 1, &row);
		if (rc < 0) {
			return -1;
		}
		if (rc == 0) {
			snprintf(d->dc_msg, d->dc_size, "no event %" PRId64, d->dc_id);
			state = CONSOLE_DB_UNKNOWN;
		} else {
			if (!store_row_is_null(&row, 1)) {
				snprintf(d->dc_msg, d->dc_size,
				         "event %" PRId64 " was dismissed already (by %s)",
				         d->dc_id, store_row_text(&row, 1));
			} else {
				snprintf(d->dc_msg, d->dc_size,
				         "event %" PRId64 " is %s, neither failed nor fetching; "
				         "nothing to dismiss",
				         d->dc_id, store_row_text(&row, 0));
			}
			store_row_finish(&row);
			state = CONSOLE_DB_REFUSED;
		}
		snprintf(result, sizeof(result), "refused: %s", d->dc_msg);
	}
	if (console_db_audit_tx(tx, d->dc_actor, "events.dismiss", target, d->dc_reason, result) <
	    0) {
		return -1;
	}
	return state;
}

int console_db_reason_ok(const char *reason)
{
	const unsigned char *s = (const unsigned char *)reason;
	size_t chars = 0;

	if (reason == NULL || reason[0] == '\0') {
		return 0;
	}
	while (*s != '\0') {
		size_t len = *s >= 0xc2 && *s <= 0xdf   ? 2
		             : *s >= 0xe0 && *s <= 0xef ? 3
		             : *s >= 0xf0 && *s <= 0xf4 ? 4
		                                        : 1;
		size_t i;

		for (i = 1; i < len; i++) {
			if ((s[i] & 0xc0) != 0x80) {
				len = 1; /* not a whole sequence: its first byte alone */
				break;
			}
		}
		s += len;
		if (++chars > CONSOLE_DB_REASON_MAX) {
			return 0;
		}
	}
	return 1;
}

int console_db_dismiss(struct store *st, int64_t now_ms, const char *actor, int64_t id,
                       const char *reason, char *ret_msg, size_t msg_size)
{
	struct console_db_dismiss_ctx d = {actor, id, reason, ret_msg, msg_size};

	ret_msg[0] = '\0';
	if (!console_db_reason_ok(reason)) {
		snprintf(ret_msg, msg_size, "a reason of 1 to %d characters is required",
		         CONSOLE_DB_REASON_MAX);
		return CONSOLE_DB_REFUSED;
	}
	return store_write(st, now_ms, console_db_dismiss_unit, &d);
}

struct console_db_dismiss_many {
	enum store_backend dm_backend;
	const char *dm_actor;
	const struct console_db_filter *dm_filter;
	const char *dm_reason;
	int64_t dm_expect;
	int64_t dm_count;
	int64_t *dm_ids;
	size_t dm_n;
	size_t dm_cap;
};

static int console_db_dismiss_id(void *arg, const struct store_row *row)
{
	struct console_db_dismiss_many *dm = arg;

	if (dm->dm_n == dm->dm_cap) {
		size_t cap = dm->dm_cap == 0 ? 64 : 2 * dm->dm_cap;
		int64_t *ids = realloc(dm->dm_ids, cap * sizeof(*ids));

		if (ids == NULL) {
			return -1;
		}
		dm->dm_ids = ids;
		dm->dm_cap = cap;
	}
	dm->dm_ids[dm->dm_n++] = store_row_int(row, 0);
	return 0;
}

/* The outcome a dismissal by filter selects: failed (f's NULL too) or
 * fetching; NULL for any other, which no dismissal selects. */
static const char *console_db_dismiss_outcome(const struct console_db_filter *f)
{
	if (f->ef_outcome == NULL || strcmp(f->ef_outcome, "failed") == 0) {
		return "failed";
	}
	if (strcmp(f->ef_outcome, "fetching") == 0) {
		return "fetching";
	}
	return NULL;
}

/* The ids of the events a dismissal by filter takes: sql (initialised by
 * the caller) with p[0..*n). Returns 0 or -1. */
static int console_db_dismiss_sql(const struct console_db_filter *in, enum store_backend backend,
                                  struct buf *sql, struct store_value *p, size_t *n)
{
	struct console_db_filter f = *in;

	/* What a dismissal by id accepts, not dismissed yet, and live unless
	 * the caller asks for test mode: the rows gc keeps forever. Not
	 * ef_open, which is live by definition and so matched no test-mode
	 * event whatever ef_test_mode said. */
	f.ef_outcome = console_db_dismiss_outcome(&f);
	f.ef_open = 0;
	f.ef_dismissed = 0;
	if (f.ef_test_mode < 0) {
		f.ef_test_mode = 0;
	}
	buf_puts(sql, "SELECT id FROM events WHERE 1 = 1");
	if (console_db_filter_sql(&f, backend, sql, p, n) < 0) {
		return -1;
	}
	buf_puts(sql, " ORDER BY id");
	return sql->buf_overflow ? -1 : 0;
}

static int console_db_dismiss_many_unit(struct store_tx *tx, void *arg)
{
	struct console_db_dismiss_many *dm = arg;
	struct store_value p[CONSOLE_DB_FILTER_PARAMS];
	struct buf sql;
	size_t n = 0;
	size_t i;
	int rc = -1;

	buf_init(&sql, CONSOLE_DB_SQL_MAX);
	if (console_db_dismiss_sql(dm->dm_filter, dm->dm_backend, &sql, p, &n) < 0) {
		goto out;
	}
	dm->dm_n = 0;
	/* Read in the writer's transaction: what is counted is what is changed. */
	if (store_query_each(tx, sql.buf_data, p, n, console_db_dismiss_id, dm) < 0) {
		goto out;
	}
	dm->dm_count = (int64_t)dm->dm_n;
	if (dm->dm_expect < 0 || dm->dm_count != dm->dm_expect) {
		rc = 0;
		goto out;
	}
	for (i = 0; i < dm->dm_n; i++) {
		struct store_value q[] = {store_int(store_tx_now(tx)), store_text(dm->dm_actor),
		                          store_text(dm->dm_reason), store_int(dm->dm_ids[i])};
		char target[40];

		snprintf(target, sizeof(target), "event:%" PRId64, dm->dm_ids[i]);
		if (store_exec(
		            tx,
		            "UPDATE idempotency_records SET dismissed_at = ?, dismissed_by = ?, "
		            "dismiss_reason = ?"
		            " WHERE id = ? AND received_at IS NOT NULL AND (outcome = 'failed' OR "
		            "(outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH
		            "')) AND dismissed_at IS NULL",
		            q, 4, NULL) < 0 ||
		    console_db_audit_tx(tx, dm->dm_actor, "events.dismiss", target, dm->dm_reason,
		                        "ok") < 0) {
			goto out;
		}
	}
	rc = 0;
out:
	buf_finish(&sql);
	return rc;
}

int console_db_dismiss_filter(struct store *st, int64_t now_ms, const char *actor,
                              const struct console_db_filter *f, const char *reason, int64_t expect,
                              int64_t *ret_count)
{
	struct console_db_dismiss_many dm;
	int rc;

	if (console_db_dismiss_outcome(f) == NULL) {
		log_err("console: dismissing events by filter: outcome \"%s\" is neither failed "
		        "nor fetching",
		        f->ef_outcome);
		return -1;
	}
	memset(&dm, 0, sizeof(dm));
	dm.dm_backend = store_backend_of(st);
	dm.dm_actor = actor;
	dm.dm_filter = f;
	dm.dm_reason = reason;
	dm.dm_expect = expect;
	rc = expect < 0 ? store_read(st, now_ms, console_db_dismiss_many_unit, &dm)
	                : store_write(st, now_ms, console_db_dismiss_many_unit, &dm);
	free(dm.dm_ids);
	if (rc < 0) {
		return -1;
	}
	*ret_count = dm.dm_count;
	return expect >= 0 && dm.dm_count != expect ? 1 : 0;
}

static int console_db_count_row(void *arg, const struct store_row *row)
{
	int64_t *count = arg;

	(void)row;
	(*count)++;
	return 0;
}

int console_db_dismiss_count_within(struct store *st, int64_t now_ms, unsigned wait_ms,
                                    const struct console_db_filter *f, int64_t *ret_count)
{
	struct store_value p[CONSOLE_DB_FILTER_PARAMS];
	int64_t count = 0;
	struct buf sql;
	size_t n = 0;
	int rc = -1;

	if (console_db_dismiss_outcome(f) == NULL) {
		log_err("console: dismissing events by filter: outcome \"%s\" is neither failed "
		        "nor fetching",
		        f->ef_outcome);
		return -1;
	}
	buf_init(&sql, CONSOLE_DB_SQL_MAX);
	if (console_db_dismiss_sql(f, store_backend_of(st), &sql, p, &n) < 0) {
		goto out;
	}
	rc = console_db_read(st, now_ms, wait_ms, sql.buf_data, p, n, console_db_count_row, &count);
	if (rc == 0) {
		*ret_count = count;
	}
out:
	buf_finish(&sql);
	return rc;
}

/* ---- reprocessing ---- */

#define CONSOLE_DB_EVENT_COLUMNS                                                                   \
	"id, scope, idem_key, type, kind, order_ref, payment_ref, refund_ref, amount, currency,"   \
	" refund_cumulative, payload, outcome, effect, reason, received_at, processed_at, "        \
	"reprocessed, source"

struct console_db_rp_ctx {
	int64_t rc_id;
	const struct config *rc_cf;
	const char *rc_actor;
	struct console_db_reprocess *rc_ret;
};

static char *console_db_dup(const struct store_row *row, size_t i)
{
	const char *s = store_row_text(row, i);

	return s != NULL ? strdup(s) : NULL;
}

/* The struct event as the ingest path built it, from the stored row. */
static int console_db_rebuild(const struct store_row *row, struct event *ev)
{
	const char *kind = store_row_text(row, 4);
	const char *currency = store_row_text(row, 9);
	const struct store_value *payload = &row->sr_cols[11];

	memset(ev, 0, sizeof(*ev));
	ev->ev_amount = -1;
	ev->ev_key = console_db_dup(row, 2);
	ev->ev_type = console_db_dup(row, 3);
	ev->ev_order_ref = console_db_dup(row, 5);
	ev->ev_payment_ref = console_db_dup(row, 6);
	ev->ev_refund_ref = console_db_dup(row, 7);
	if (ev->ev_key == NULL) {
		return -1;
	}
	ev->ev_kind = event_kind_from_name(kind);
	if (!store_row_is_null(row, 8)) {
		ev->ev_amount = store_row_int(row, 8);
	}
	if (currency != NULL && strlen(currency) < sizeof(ev->ev_currency)) {
		memcpy(ev->ev_currency, currency, strlen(currency) + 1);
	}
	ev->ev_refund_cumulative = store_row_int(row, 10) != 0;
	if (payload->sv_type == STORE_TEXT || payload->sv_type == STORE_BLOB) {
		ev->ev_payload = malloc(payload->sv_len + 1);
		if (ev->ev_payload == NULL) {
			return -1;
		}
		memcpy(ev->ev_payload, payload->sv_text, payload->sv_len);
		ev->ev_payload[payload->sv_len] = '\0';
		ev->ev_payload_len = payload->sv_len;
		event_fingerprint(ev, ev->ev_payload, ev->ev_payload_len);
	}
	return 0;
}

/* The new outcome onto the event row and its idempotency record. */
static int console_db_rp_store(struct store_tx *tx, struct console_db_rp_ctx *c, const char *scope,
                               const struct event *ev)
{
	struct console_db_reprocess *rp = c->rc_ret;
	const struct provider_conf *pc;
	struct event_outcome out;
	struct store_value p[8];
	struct reply reply;
	int rc = -1;

	reply_init(&reply);
	p[0] = store_text(rp->rp_res.or_refused ? "failed" : "done");
	p[1] = store_text(rp->rp_res.or_effect);
	p[2] = store_text(rp->rp_res.or_refused ? rp->rp_res.or_reason : NULL);
	p[3] = store_int(store_tx_now(tx));
	p[4] = store_int(c->rc_id);
	if (store_exec(tx,
	               "UPDATE idempotency_records SET outcome = ?, effect = ?, reason = ?,"
	               " processed_at = ?, reprocessed = reprocessed + 1"
	               " WHERE id = ? AND outcome = 'failed'",
	               p, 5, NULL) < 0) {
		goto out;
	}
	/* The stored reply follows the new outcome, so a later redelivery of
	 * the callback replays the answer a first delivery would get now. */
	pc = config_provider(c->rc_cf, scope);
	memset(&out, 0, sizeof(out));
	out.eo_refused = rp->rp_res.or_refused;
	out.eo_reason = rp->rp_res.or_refused ? rp->rp_res.or_reason : NULL;
	out.eo_order_id = rp->rp_res.or_order_id[0] != '\0' ? rp->rp_res.or_order_id : NULL;
	out.eo_effect = rp->rp_res.or_effect;
	if (pc != NULL && pc->pc_provider->p_ack(pc, ev, &out, &reply) == 0) {
		rp->rp_reply_updated = 1;
		p[0] = store_text(rp->rp_res.or_refused ? "failed" : "done");
		p[1] = store_int(reply.reply_status);
		p[2] = store_text(reply.reply_content_type);
		p[3] = store_text(reply.reply_headers);
		p[4] = store_blob(reply.reply_body != NULL ? reply.reply_body : "",
		                  reply.reply_body_len);
		p[5] = store_int(store_tx_now(tx));
		p[6] = store_text(scope);
		p[7] = store_text(ev->ev_key);
		rc = store_exec(
		        tx,
		        "UPDATE idempotency_records SET status = ?, reply_status = ?, "
		        "reply_content_type = ?, reply_headers = ?, reply_body = ?, "
		        "updated_at = ? WHERE scope = ? AND idem_key = ? AND status = 'failed'",
		        p, 8, NULL);
	} else {
		p[0] = store_text(rp->rp_res.or_refused ? "failed" : "done");
		p[1] = store_int(store_tx_now(tx));
		p[2] = store_text(scope);
		p[3] = store_text(ev->ev_key);
		rc = store_exec(tx,
		                "UPDATE idempotency_records SET status = ?, updated_at = ?"
		                " WHERE scope = ? AND idem_key = ? AND status = 'failed'",
		                p, 4, NULL);
	}
out:
	reply_finish(&reply);
	return rc;
}

static int console_db_reprocess_unit(struct store_tx *tx, void *arg)
{
	struct console_db_rp_ctx *c = arg;
	struct console_db_reprocess *rp = c->rc_ret;
	const struct config *cf = c->rc_cf;
	char result[CONSOLE_DB_MSG_MAX + ORDERS_REF_MAX];
	struct store_value p[1];
	struct orders_conf oc;
	struct store_row row;
	struct event ev;
	const char *scope;
	const char *reason;
	char target[40];
	int rc;

	memset(&ev, 0, sizeof(ev));
	memset(rp, 0, sizeof(*rp));
	snprintf(target, sizeof(target), "event:%" PRId64, c->rc_id);
	p[0] = store_int(c->rc_id);
	rc = store_query(tx, "SELECT " CONSOLE_DB_EVENT_COLUMNS " FROM events WHERE id = ?", p, 1,
	                 &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 0) {
		rp->rp_state = CONSOLE_DB_RP_UNKNOWN;
		return console_db_audit_tx(tx, c->rc_actor, "events.reprocess", target, NULL,
		                           "refused: no such event");
	}
	/* Read and decided inside the writer's transaction: a concurrent
	 * reprocess of the same event sees the outcome this one leaves. */
	reason = store_row_text(&row, 14);
	rc = 0;
	if (store_row_text(&row, 12) == NULL || strcmp(store_row_text(&row, 12), "failed") != 0) {
		rp->rp_state = CONSOLE_DB_RP_NOT_FAILED;
		snprintf(result, sizeof(result), "refused: not failed");
		goto out;
	}
	if (reason != NULL && strcmp(reason, "refused_by_provider_rules") == 0) {
		rp->rp_state = CONSOLE_DB_RP_PROVIDER_REFUSED;
		snprintf(result, sizeof(result), "refused: refused by the provider's own rules");
		goto out;
	}
	rc = -1;
	if (console_db_rebuild(&row, &ev) < 0) {
		log_err("console: out of memory");
		goto fail;
	}
	scope = store_row_text(&row, 1);
	oc.oc_points_num = cf->cf_points_num;
	oc.oc_points_den = cf->cf_points_den;
	if (orders_apply_event(tx, &oc, scope, &ev, &rp->rp_res) < 0) {
		goto fail;
	}
	if (!rp->rp_res.or_refused && rp->rp_res.or_order_id[0] != '\0') {
		size_t i;

		for (i = 0; i < rp->rp_res.or_n_effects; i++) {
			if (outbox_on_effect(tx, cf, scope, rp->rp_res.or_order_id,
			                     rp->rp_res.or_effects[i]) < 0) {
				goto fail;
			}
		}
	}
	if (console_db_rp_store(tx, c, scope, &ev) < 0) {
		goto fail;
	}
	rp->rp_state = CONSOLE_DB_RP_DONE;
	if (rp->rp_res.or_refused) {
		snprintf(result, sizeof(result), "ok: still failed (%s)", rp->rp_res.or_reason);
	} else {
		snprintf(result, sizeof(result), "ok: done, order %s %s",
		         rp->rp_res.or_order_id[0] != '\0' ? rp->rp_res.or_order_id : "-",
		         rp->rp_res.or_effect != NULL ? rp->rp_res.or_effect : "-");
	}
	rc = 0;
out:
	if (console_db_audit_tx(tx, c->rc_actor, "events.reprocess", target, NULL, result) < 0) {
		rc = -1;
	}
fail:
	event_finish(&ev);
	store_row_finish(&row);
	return rc;
}

int console_db_reprocess(struct store *st, const struct config *cf, int64_t now_ms,
                         const char *actor, int64_t id, struct console_db_reprocess *ret)
{
	struct console_db_rp_ctx c = {id, cf, actor, ret};

	return store_write(st, now_ms, console_db_reprocess_unit, &c);
}

/* ---- the console's reads ---- */

struct console_db_q {
	const char *q_sql;
	const struct store_value *q_params;
	size_t q_n;
	console_db_row_fn q_fn;
	void *q_arg;
};

static int console_db_q_unit(struct store_tx *tx, void *arg)
{
	struct console_db_q *q = arg;

	return store_query_each(tx, q->q_sql, q->q_params, q->q_n, q->q_fn, q->q_arg);
}

/* ---- reads the console waits for a bounded time ----
 * A page must answer whatever the database does (a hung server would hold
 * it, and its server thread, for good). Such a read runs on the store's own
 * thread (store_call_owned) as a job of its own: copies of its SQL and
 * parameters, and the rows it collects, handed to fn on the caller's thread
 * once the read ended in time. A read that outlives its wait ends later on
 * its own, and the store's thread frees its job then. */

struct console_db_job {
	int64_t j_now_ms;
	char *j_sql;
	struct store_value j_params[CONSOLE_DB_FILTER_PARAMS];
	size_t j_n;
	struct store_row *j_rows; /* collected on the store's thread */
	size_t j_n_rows;
	size_t j_cap;
	size_t j_bytes;
	int j_rc;
};

static void console_db_job_free(void *arg)
{
	struct console_db_job *j = arg;
	size_t i;

	if (j == NULL) {
		return;
	}
	for (i = 0; i < j->j_n; i++) {
		if (j->j_params[i].sv_type == STORE_TEXT || j->j_params[i].sv_type == STORE_BLOB) {
			free((char *)j->j_params[i].sv_text);
		}
	}
	for (i = 0; i < j->j_n_rows; i++) {
		store_row_finish(&j->j_rows[i]);
	}
	free(j->j_rows);
	free(j->j_sql);
	free(j);
}

/* A row's copy, kept past the read (its bytes are the row's own). */
static int console_db_job_row(void *arg, const struct store_row *row)
{
	struct console_db_job *j = arg;
	struct store_row *r;
	size_t i;

	if (j->j_n_rows == j->j_cap) {
		size_t cap = j->j_cap == 0 ? 16 : 2 * j->j_cap;
		struct store_row *rows = realloc(j->j_rows, cap * sizeof(*rows));

		if (rows == NULL) {
			return -1;
		}
		j->j_rows = rows;
		j->j_cap = cap;
	}
	r = &j->j_rows[j->j_n_rows];
	memset(r, 0, sizeof(*r));
	for (i = 0; i < row->sr_n && i < STORE_ROW_MAX; i++) {
		const struct store_value *v = &row->sr_cols[i];

		r->sr_cols[i] = *v;
		if (v->sv_type == STORE_TEXT || v->sv_type == STORE_BLOB) {
			char *copy = malloc(v->sv_len + 1);

			if (copy == NULL) {
				r->sr_cols[i].sv_type = STORE_NULL;
				r->sr_n = i;
				store_row_finish(r);
				return -1;
			}
			memcpy(copy, v->sv_text != NULL ? v->sv_text : "", v->sv_len);
			copy[v->sv_len] = '\0';
			r->sr_cols[i].sv_text = copy;
			j->j_bytes += v->sv_len;
		}
		r->sr_n = i + 1;
	}
	j->j_n_rows++;
	if (j->j_bytes > CONSOLE_DB_ROWS_MAX) {
		log_err("console: a read of more than %d bytes", CONSOLE_DB_ROWS_MAX);
		return -1;
	}
	return 0;
}

/* On the store's own thread: job arg's read. */
static int console_db_job_run(struct store *st, void *arg)
{
	struct console_db_job *j = arg;
	struct console_db_q q;

	q.q_sql = j->j_sql;
	q.q_params = j->j_params;
	q.q_n = j->j_n;
	q.q_fn = console_db_job_row;
	q.q_arg = j;
	j->j_rc = store_read(st, j->j_now_ms, console_db_q_unit, &q);
	return 0;
}

/* A job for sql with p[0..n), copied; NULL when out of memory. */
static struct console_db_job *console_db_job_create(int64_t now_ms, const char *sql,
                                                    const struct store_value *p, size_t n)
{
	struct console_db_job *j = calloc(1, sizeof(*j));
	size_t i;

	if (j == NULL || n > CONSOLE_DB_FILTER_PARAMS) {
		goto fail;
	}
	j->j_now_ms = now_ms;
	j->j_sql = strdup(sql);
	if (j->j_sql == NULL) {
		goto fail;
	}
	for (i = 0; i < n; i++) {
		j->j_params[i] = p[i];
		if (p[i].sv_type == STORE_TEXT || p[i].sv_type == STORE_BLOB) {
			size_t len = p[i].sv_type == STORE_TEXT && p[i].sv_len == 0
			                     ? strlen(p[i].sv_text)
			                     : p[i].sv_len;
			char *copy = malloc(len + 1);

			if (copy == NULL) {
				j->j_params[i].sv_type = STORE_NULL;
				j->j_n = i;
				goto fail;
			}
			memcpy(copy, p[i].sv_text, len);
			copy[len] = '\0';
			j->j_params[i].sv_text = copy;
			j->j_params[i].sv_len = len;
		}
		j->j_n = i + 1;
	}
	return j;
fail:
	log_err("console: out of memory");
	console_db_job_free(j);
	return NULL;
}

/* The read below, run aside and waited for at most wait_ms. */
static int console_db_read_within(struct store *st, int64_t now_ms, unsigned wait_ms,
                                  const char *sql, const struct store_value *p, size_t n,
                                  console_db_row_fn fn, void *arg)
{
	struct console_db_job *j = console_db_job_create(now_ms, sql, p, n);
	size_t i;
	int rc;

	if (j == NULL) {
		return -1;
	}
	rc = store_call_owned(st, wait_ms, console_db_job_run, j, console_db_job_free);
	if (rc == STORE_CALL_LATE) {
		return CONSOLE_DB_LATE; /* the store's thread frees j */
	}
	if (rc < -1) {
		console_db_job_free(j);
		return CONSOLE_DB_LATE;
	}
	rc = j->j_rc < 0 ? j->j_rc : 0;
	/* fn sees the rows as a read would have shown them, and may stop. */
	for (i = 0; rc == 0 && i < j->j_n_rows; i++) {
		int r = fn(arg, &j->j_rows[i]);

		if (r < 0) {
			rc = -1;
		} else if (r > 0) {
			break;
		}
	}
	console_db_job_free(j);
	return rc;
}

/* One read of the console: sql with p[0..n), fn for each row; waited for
 * at most wait_ms (0: as long as it takes). */
static int console_db_read(struct store *st, int64_t now_ms, unsigned wait_ms, const char *sql,
                           const struct store_value *p, size_t n, console_db_row_fn fn, void *arg)
{
	struct console_db_q q = {sql, p, n, fn, arg};

	if (wait_ms == CONSOLE_DB_WAIT_SPENT) {
		return CONSOLE_DB_LATE;
	}
	if (wait_ms > 0) {
		return console_db_read_within(st, now_ms, wait_ms, sql, p, n, fn, arg);
	}
	return store_read(st, now_ms, console_db_q_unit, &q);
}

/* A list page's read: sql (its WHERE built, p[0..n) its parameters, room
 * for one more) newest first, at most limit rows. */
static int console_db_read_newest(struct store *st, int64_t now_ms, unsigned wait_ms,
                                  struct buf *sql, struct store_value *p, size_t n, int64_t limit,
                                  console_db_row_fn fn, void *arg)
{
	buf_puts(sql, " ORDER BY id DESC LIMIT ?");
	p[n++] = store_int(limit);
	if (sql->buf_overflow) {
		return -1;
	}
	return console_db_read(st, now_ms, wait_ms, sql->buf_data, p, n, fn, arg);
}

int console_db_events(struct store *st, int64_t now_ms, unsigned wait_ms,
                      const struct console_db_filter *f, int64_t before_id, int64_t limit,
                      console_db_row_fn fn, void *arg)
{
	struct store_value p[CONSOLE_DB_FILTER_PARAMS];
	struct buf sql;
	size_t n = 0;
	int rc = -1;

	buf_init(&sql, CONSOLE_DB_SQL_MAX);
	buf_puts(&sql,
	         "SELECT id, received_at, scope, idem_key, kind, order_ref, " CONSOLE_DB_OUTCOME ","
	         " CASE outcome WHEN 'failed' THEN reason ELSE effect END, source, test_mode,"
	         " dismissed_at, reprocessed FROM events WHERE id < ?");
	p[n++] = store_int(before_id > 0 ? before_id : INT64_MAX);
	if (console_db_filter_sql(f, store_backend_of(st), &sql, p, &n) < 0) {
		goto out;
	}
	rc = console_db_read_newest(st, now_ms, wait_ms, &sql, p, n, limit, fn, arg);
out:
	buf_finish(&sql);
	return rc;
}

static int console_db_found(void *arg, const struct store_row *row)
{
	int *found = arg;

	(void)row;
	*found = 1;
	return 1;
}

int console_db_scope_known(struct store *st, int64_t now_ms, unsigned wait_ms, const char *scope)
{
	struct store_value p[] = {store_text(scope)};
	int found = 0;

	if (console_db_read(st, now_ms, wait_ms, "SELECT 1 FROM events WHERE scope = ? LIMIT 1", p,
	                    1, console_db_found, &found) < 0) {
		return -1;
	}
	return found;
}

int console_db_event(struct store *st, int64_t now_ms, unsigned wait_ms, int64_t id,
                     console_db_row_fn fn, void *arg)
{
	struct store_value p[] = {store_int(id)};

	return console_db_read(
	        st, now_ms, wait_ms,
	        "SELECT e.id, e.scope, e.idem_key, e.type, e.kind, e.order_ref, e.payment_ref,"
	        " e.refund_ref, e.amount, e.currency, e.refund_cumulative, e.payload,"
	        " CASE WHEN e.outcome = 'done' AND e.effect = '" INGEST_EFFECT_TO_FETCH "'"
	        " THEN 'fetching' ELSE e.outcome END,"
	        " e.effect, e.reason, e.received_at, e.processed_at, e.reprocessed, e.source,"
	        " e.test_mode, e.dismissed_at, e.dismissed_by, e.dismiss_reason, r.status,"
	        " r.reply_status, r.reply_content_type, r.reply_headers, r.reply_body, "
	        "r.updated_at,"
	        " e.context"
	        " FROM events AS e LEFT JOIN idempotency_records AS r"
	        " ON r.scope = e.scope AND r.idem_key = e.idem_key AND r.created_at > 0"
	        " WHERE e.id = ?",
	        p, 1, fn, arg);
}

struct console_db_audit_t {
	int (*at_fn)(void *arg, const struct console_db_audit_row *row);
	void *at_arg;
};

static int console_db_audit_t_row(void *arg, const struct store_row *row)
{
	struct console_db_audit_t *t = arg;
	struct console_db_audit_q q = {.aq_fn = t->at_fn, .aq_arg = t->at_arg};

	return console_db_audit_row(&q, row);
}

int console_db_audit_for(struct store *st, int64_t now_ms, unsigned wait_ms, const char *target,
                         int64_t limit,
                         int (*fn)(void *arg, const struct console_db_audit_row *row), void *arg)
{
	struct store_value p[] = {store_text(target), store_int(limit)};
	struct console_db_audit_t t = {fn, arg};

	/* Few rows per target; the audit log is small beside the events. */
	return console_db_read(st, now_ms, wait_ms,
	                       "SELECT id, at, actor, action, target, reason, result FROM audit_log"
	                       " WHERE target = ? ORDER BY id DESC LIMIT ?",
	                       p, 2, console_db_audit_t_row, &t);
}

int console_db_order(struct store *st, int64_t now_ms, unsigned wait_ms, const char *id,
                     console_db_row_fn fn, void *arg)
{
	struct store_value p[] = {store_text(id)};

	return console_db_read(st, now_ms, wait_ms,
	                       "SELECT o.id, o.amount, o.currency, o.status, o.refunded_amount,"
	                       " o.customer_ref, o.provider, o.payment_ref, o.fulfillment_status,"
	                       " o.needs_operator, o.created_at, o.paid_at, o.refunded_at,"
	                       " o.updated_at, o.disputed_amount, o.chargeback_amount, o.owner,"
	                       " COALESCE((SELECT SUM(l.points) FROM points_ledger AS l"
	                       " WHERE l.order_id = o.id), 0) FROM orders AS o WHERE o.id = ?",
	                       p, 1, fn, arg);
}

int console_db_order_timeline(struct store *st, int64_t now_ms, unsigned wait_ms, const char *id,
                              console_db_row_fn fn, void *arg)
{
	struct store_value p[] = {store_text(id), store_text(id), store_text(id),
	                          store_text(id), store_text(id), store_text(id)};

	/* Every part is found through an index on the order (events_order_ref,
	 * the refunds/disputes/points unique keys, order_refs_order,
	 * outbox_order); parked events through the order's references. */
	return console_db_read(
	        st, now_ms, wait_ms,
	        "SELECT at, what, rid, title, detail FROM ("
	        " SELECT received_at AS at, 'event' AS what, id AS rid,"
	        "  scope || ' ' || kind || ' (' || idem_key || ')' AS title,"
	        "  " CONSOLE_DB_OUTCOME
	        " || ': ' || COALESCE(CASE outcome WHEN 'failed' THEN reason"
	        " ELSE effect END, '-') || CASE source WHEN 'reconcile' THEN ' (reconcile)' ELSE "
	        "'' END AS detail"
	        "  FROM events WHERE order_ref = ?"
	        " UNION ALL SELECT created_at, 'refund', id, provider || ' refund ' || refund_ref,"
	        "  status || ' ' || CAST(amount AS TEXT) FROM refunds WHERE order_id = ?"
	        " UNION ALL SELECT created_at, 'dispute', id, provider || ' dispute ' || "
	        "dispute_ref,"
	        "  status || ' ' || CAST(amount AS TEXT) FROM disputes WHERE order_id = ?"
	        " UNION ALL SELECT created_at, 'points', id, reason || ' ' || ref,"
	        "  CAST(points AS TEXT) FROM points_ledger WHERE order_id = ?"
	        " UNION ALL SELECT p.created_at, 'parked', p.id, p.provider || ' ' || p.kind || ' "
	        "('"
	        "  || p.idem_key || ')', CASE WHEN p.applied_at IS NULL THEN 'waiting for its "
	        "payment'"
	        "  ELSE 'applied' END FROM order_parked AS p JOIN order_refs AS r"
	        "  ON r.provider = p.provider AND r.ref = p.ref WHERE r.order_id = ?"
	        " UNION ALL SELECT created_at, 'outbox', id, call_type || ' (' || effect || ')',"
	        "  status || ', ' || CAST(attempts AS TEXT) || ' attempt(s)'"
	        "  FROM outbox WHERE order_id = ?"
	        ") AS t ORDER BY at, what, rid LIMIT 1000",
	        p, 6, fn, arg);
}

#define CONSOLE_DB_OUTBOX_COLUMNS                                                                  \
	"id, order_id, call_type, effect, status, attempts, next_attempt_at, last_status,"         \
	" last_error, comp_state, created_at, updated_at"

int console_db_outbox(struct store *st, int64_t now_ms, unsigned wait_ms, const char *status,
                      int64_t before_id, int64_t limit, console_db_row_fn fn, void *arg)
{
	struct store_value p[CONSOLE_DB_STATUSES_MAX + 2];
	char *list = status != NULL ? strdup(status) : NULL;
	char *s = list;
	struct buf sql;
	size_t n = 0;
	int rc = -1;

	buf_init(&sql, CONSOLE_DB_SQL_MAX);
	if (status != NULL && list == NULL) {
		goto out;
	}
	buf_puts(&sql, "SELECT " CONSOLE_DB_OUTBOX_COLUMNS " FROM outbox WHERE id < ?");
	p[n++] = store_int(before_id > 0 ? before_id : INT64_MAX);
	/* One status or a list of them: the overview's backlog is three. */
	while (s != NULL) {
		char *comma = strchr(s, ',');

		if (comma != NULL) {
			*comma = '\0';
		}
		if (n - 1 == CONSOLE_DB_STATUSES_MAX) {
			goto out;
		}
		buf_puts(&sql, n == 1 ? " AND status IN (?" : ", ?");
		p[n++] = store_text(s);
		s = comma != NULL ? comma + 1 : NULL;
	}
	if (n > 1) {
		buf_puts(&sql, ")");
	}
	rc = console_db_read_newest(st, now_ms, wait_ms, &sql, p, n, limit, fn, arg);
out:
	buf_finish(&sql);
	free(list);
	return rc;
}

int console_db_outbox_of_order(struct store *st, int64_t now_ms, unsigned wait_ms,
                               const char *order_id, console_db_row_fn fn, void *arg)
{
	struct store_value p[] = {store_text(order_id)};

	return console_db_read(st, now_ms, wait_ms,
	                       "SELECT " CONSOLE_DB_OUTBOX_COLUMNS
	                       " FROM outbox WHERE order_id = ? ORDER BY id LIMIT 1000",
	                       p, 1, fn, arg);
}

int console_db_outbox_row(struct store *st, int64_t now_ms, unsigned wait_ms, int64_t id,
                          console_db_row_fn fn, void *arg)
{
	struct store_value p[] = {store_int(id)};

	return console_db_read(
	        st, now_ms, wait_ms,
	        "SELECT id, order_id, call_type, effect, provider, url, content_type,"
	        " body, idem_key, compensation, comp_state, parent_id, status,"
	        " attempts, window_start, next_attempt_at, last_status, last_error,"
	        " created_at, updated_at, delivered_at FROM outbox WHERE id = ?",
	        p, 1, fn, arg);
}

int console_db_outbox_attempts_within(struct store *st, int64_t now_ms, unsigned wait_ms,
                                      int64_t id, console_db_row_fn fn, void *arg)
{
	struct store_value p[] = {store_text("%" OUTBOX_UNCOUNTED_MARK), store_int(id)};

	return console_db_read(st, now_ms, wait_ms,
	                       "SELECT id, attempt, at, http_status, error, latency_ms, excerpt,"
	                       " (SELECT count(*) FROM outbox_attempts k WHERE k.outbox_id ="
	                       " outbox_attempts.outbox_id AND k.attempt = outbox_attempts.attempt"
	                       " AND k.id <= outbox_attempts.id AND k.http_status IS NULL"
	                       " AND k.error LIKE ?)"
	                       " FROM outbox_attempts WHERE outbox_id = ? ORDER BY id DESC",
	                       p, 2, fn, arg);
}

int console_db_outbox_attempts(struct store *st, int64_t now_ms, int64_t id, console_db_row_fn fn,
                               void *arg)
{
	return console_db_outbox_attempts_within(st, now_ms, 0, id, fn, arg);
}

int console_db_outbox_ids(struct store *st, int64_t now_ms, unsigned wait_ms, const char *status,
                          int64_t limit, console_db_row_fn fn, void *arg)
{
	struct store_value p[] = {store_text(status), store_int(limit)};

	return console_db_read(st, now_ms, wait_ms,
	                       "SELECT id FROM outbox WHERE status = ? ORDER BY id LIMIT ?", p, 2,
	                       fn, arg);
}

static int console_db_overview_unit(struct store_tx *tx, void *arg)
{
	struct console_db_overview *ov = arg;
	struct store_row row;
	int rc;

	memset(ov, 0, sizeof(*ov));
	/* The events the card's list (?parked=1) shows, counted by the same
	 * condition: a parked row whose event gc removed has nothing to show. */
	rc = store_query(tx, "SELECT count(*) FROM events WHERE 1 = 1" CONSOLE_DB_PARKED, NULL, 0,
	                 &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 1) {
		ov->ov_parked = store_row_int(&row, 0);
		store_row_finish(&row);
	}
	rc = store_query(tx, "SELECT at FROM audit_log ORDER BY id DESC LIMIT 1", NULL, 0, &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 1) {
		ov->ov_audit_last_at = store_row_int(&row, 0);
		store_row_finish(&row);
	}
	return 0;
}

int console_db_overview(struct store *st, int64_t now_ms, struct console_db_overview *ret)
{
	return store_read(st, now_ms, console_db_overview_unit, ret);
}
