/* ingest.c: the path of one provider callback: verify, claim, handle, reply. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dupcount.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "orders.h"
#include "outbox.h"
#include "provider.h"
#include "store.h"

#define INGEST_EVENT_COLS 20 /* ingest_event_cols */

/* What one claim's apply callback needs, and what the handler made of its
 * event (written on the writer thread, read after the completion). */
struct ingest_unit {
	const struct config *iu_cf;
	const struct provider_conf *iu_pc;
	const struct event *iu_ev;
	int64_t iu_received_ms;
	const char *iu_source; /* events.source: "callback" or "reconcile" */
	const char *iu_effect; /* static, NULL until the handler ran */
	char iu_reason[32];
	char iu_order_id[ORDERS_REF_MAX];
	struct store_claim *iu_claim; /* the claim it runs in; NULL for a fetched event */
	/* The event's columns. Only as many as a claim borrows: the unit is one
	 * allocation per callback, kept under the 1 KiB at which malloc takes a
	 * request as large and first consolidates its fast bins. */
	struct store_value iu_vals[INGEST_EVENT_COLS];
};

_Static_assert(sizeof(struct ingest_unit) < 1024, "an ingest_unit outgrows a small allocation");

const char *ingest_result_name(enum ingest_result r)
{
	switch (r) {
	case INGEST_NEW:
		return "new";
	case INGEST_DUPLICATE:
		return "replayed";
	case INGEST_MISMATCH:
		return "mismatch";
	case INGEST_FAILED:
		return "failed";
	case INGEST_REJECTED:
		return "rejected";
	case INGEST_IN_PROGRESS:
		return "in_progress";
	case INGEST_TRANSIENT:
		break;
	}
	return "transient";
}

static int64_t ingest_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The event's columns of its key's row (migration 0012: one row per
 * claimed key; the view `events` shows them). */
static const char *const ingest_event_cols[INGEST_EVENT_COLS] = {
        "type",      "kind",         "order_ref",         "payment_ref",    "refund_ref",
        "amount",    "currency",     "refund_cumulative", "payload",        "outcome",
        "effect",    "reason",       "received_at",       "processed_at",   "source",
        "test_mode", "dismissed_at", "dismissed_by",      "dismiss_reason", "context",
};

/* The same columns, for an event whose row exists already (a fetched thin
 * event: its row was written when it was "to fetch"). */
static const char INGEST_SQL_EVENT_UPDATE[] =
        "UPDATE idempotency_records SET type = ?, kind = ?, order_ref = ?, payment_ref = ?, "
        "refund_ref = ?, amount = ?, currency = ?, refund_cumulative = ?, payload = ?, outcome = "
        "?, "
        "effect = ?, reason = ?, received_at = ?, processed_at = ?, source = ?, test_mode = ?, "
        "dismissed_at = ?, dismissed_by = ?, dismiss_reason = ?, context = ? WHERE scope = ? AND "
        "idem_key = ?";

/* Records the event on its key's row. In a claim (iu_claim set) its columns
 * go to the claim, which writes them with the reply in its one row write;
 * otherwise the existing row is updated. iu's values must stay valid until
 * the claim is decided: they point into the event and into iu. */
static int ingest_record_event(struct store_tx *tx, struct ingest_unit *iu, const struct orders_result *res)
{
	const struct event *ev = iu->iu_ev;
	struct store_value *p = iu->iu_vals;

	p[0] = store_text(ev->ev_type);
	p[1] = store_text(event_kind_name(ev->ev_kind));
	p[2] = store_text(ev->ev_order_ref);
	p[3] = store_text(ev->ev_payment_ref);
	p[4] = store_text(ev->ev_refund_ref);
	p[5] = ev->ev_amount >= 0 ? store_int(ev->ev_amount) : store_null();
	p[6] = store_text(ev->ev_currency[0] != '\0' ? ev->ev_currency : NULL);
	p[7] = store_int(ev->ev_refund_cumulative);
	p[8] = ev->ev_payload != NULL ? store_blob(ev->ev_payload, ev->ev_payload_len) : store_null();
	p[9] = store_text(res->or_refused ? "failed" : "done");
	p[10] = store_text(res->or_effect);
	p[11] = store_text(res->or_refused ? iu->iu_reason : NULL);
	p[12] = store_int(iu->iu_received_ms);
	p[13] = store_int(store_tx_now(tx));
	p[14] = store_text(iu->iu_source);
	p[15] = store_int(ev->ev_test_mode);
	p[16] = store_null();
	p[17] = store_null();
	p[18] = store_null();
	p[19] = store_text(ev->ev_context);
	if (iu->iu_claim != NULL) {
		iu->iu_claim->sc_cols = ingest_event_cols;
		iu->iu_claim->sc_vals = iu->iu_vals;
		iu->iu_claim->sc_n_cols = INGEST_EVENT_COLS;
		return 0;
	}
	{
		struct store_value all[INGEST_EVENT_COLS + 2]; /* the columns, then the key */

		memcpy(all, p, sizeof(iu->iu_vals));
		all[INGEST_EVENT_COLS] = store_text(iu->iu_pc->pc_name);
		all[INGEST_EVENT_COLS + 1] = store_text(ev->ev_key);
		return store_exec(tx, INGEST_SQL_EVENT_UPDATE, all, INGEST_EVENT_COLS + 2, NULL);
	}
}

/* The business part of one unit: the handler, the outbox rows of its
 * effects and the event's row; a thin notification (ev_fetch) only
 * records itself as fetching. Fills res and iu's outcome. Returns 0, or
 * STORE_APPLY_TRANSIENT. */
static int ingest_apply_effects(struct store_tx *tx, struct ingest_unit *iu, struct orders_result *res)
{
	const struct event *ev = iu->iu_ev;
	struct orders_conf oc;

	memset(res, 0, sizeof(*res));
	oc.oc_points_num = iu->iu_cf->cf_points_num;
	oc.oc_points_den = iu->iu_cf->cf_points_den;
	if (ev->ev_fetch) {
		res->or_effect = INGEST_EFFECT_TO_FETCH;
	} else if (ev->ev_refused) {
		res->or_refused = 1;
		snprintf(res->or_reason, sizeof(res->or_reason), "%s",
		         INGEST_REASON_PROVIDER_RULES);
		res->or_effect = "recorded";
	} else if (orders_apply_event(tx, &oc, iu->iu_pc->pc_name, ev, res) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	/* Every effect of the unit (this event's, then those of events parked
	 * until it arrived); the outbox queues the calls configured for each. */
	if (!res->or_refused && res->or_order_id[0] != '\0') {
		size_t i;

		for (i = 0; i < res->or_n_effects; i++) {
			if (outbox_on_effect(tx, iu->iu_cf, iu->iu_pc->pc_name, res->or_order_id,
					     res->or_effects[i]) < 0) {
				return STORE_APPLY_TRANSIENT;
			}
		}
	}
	/* Counted as unapplied once committed (ingest_committed): this
	 * transaction may still roll back, and run again. */
	iu->iu_effect = res->or_effect;
	snprintf(iu->iu_reason, sizeof(iu->iu_reason), "%s", res->or_refused ? res->or_reason : "");
	snprintf(iu->iu_order_id, sizeof(iu->iu_order_id), "%s", res->or_order_id);
	if (ingest_record_event(tx, iu, res) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	return 0;
}

static int ingest_apply(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct ingest_unit *iu = arg;
	const struct event *ev = iu->iu_ev;
	struct orders_result res;
	struct event_outcome out;

	if (ingest_apply_effects(tx, iu, &res) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	memset(&out, 0, sizeof(out));
	out.eo_refused = res.or_refused;
	out.eo_reason = res.or_refused ? res.or_reason : NULL;
	out.eo_order_id = res.or_order_id[0] != '\0' ? res.or_order_id : NULL;
	out.eo_effect = res.or_effect;
	if (iu->iu_pc->pc_provider->p_ack(iu->iu_pc, ev, &out, ret_reply) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	return res.or_refused ? STORE_APPLY_FAILED : STORE_APPLY_DONE;
}

static int ingest_error(const struct provider_conf *pc, int status, const char *reason, const char *detail,
			int64_t retry_after_s, struct reply *ret)
{
	char v[32];

	if (provider_error(pc, status, reason, detail, ret) < 0) {
		return -1;
	}
	if (retry_after_s > 0) {
		snprintf(v, sizeof(v), "%lld", (long long)retry_after_s);
		return reply_add_header(ret, "Retry-After", v);
	}
	return 0;
}

/* The request's classification from its items' outcomes: the worst wins. */
static void ingest_classify(struct store_claim *claims, size_t n, const struct provider_conf *pc,
			    struct ingest_report *rep, int64_t *ret_retry_after)
{
	size_t i;
	int transient = 0;
	int in_progress = 0;
	int mismatch = 0;

	*ret_retry_after = 0;
	for (i = 0; i < n; i++) {
		struct store_claim *c = &claims[i];
		char q[160];

		switch (c->sc_outcome) {
		case STORE_NEW:
		case STORE_CLAIMED:
			if (c->sc_status == STORE_STATUS_FAILED) {
				rep->ir_n_failed++;
			} else {
				rep->ir_n_new++;
			}
			break;
		case STORE_MISMATCH:
			mismatch = 1;
			metrics_mismatch(pc->pc_name);
			log_warn("provider=%s key=%s: a duplicate delivery carries another payload than the first; "
				 "the first delivery's reply is returned",
				 pc->pc_name, log_quote(q, sizeof(q), c->sc_key));
			/* fall through */
		case STORE_REPLAYED:
			rep->ir_n_duplicate++;
			metrics_duplicate(pc->pc_name);
			dupcount_add(pc->pc_name, c->sc_key);
			break;
		case STORE_IN_PROGRESS:
			in_progress = 1;
			break;
		case STORE_TRANSIENT:
			transient = 1;
			break;
		}
		if (c->sc_retry_after_s > *ret_retry_after) {
			*ret_retry_after = c->sc_retry_after_s;
		}
	}
	if (transient) {
		rep->ir_result = INGEST_TRANSIENT;
	} else if (in_progress) {
		rep->ir_result = INGEST_IN_PROGRESS;
	} else if (rep->ir_n_new > 0) {
		rep->ir_result = INGEST_NEW;
	} else if (rep->ir_n_failed > 0) {
		rep->ir_result = INGEST_FAILED;
		rep->ir_reason = "refused_by_business_rules";
	} else if (mismatch) {
		rep->ir_result = INGEST_MISMATCH;
	} else {
		rep->ir_result = INGEST_DUPLICATE;
	}
}

/* Every answer says what became of the callback (INGEST_OUTCOME_HEADER). */
static int ingest_outcome_header(int rc, struct reply *ret, const struct ingest_report *rep)
{
	if (rc < 0) {
		return -1;
	}
	return reply_add_header(ret, INGEST_OUTCOME_HEADER, ingest_result_name(rep->ir_result));
}

struct ingest_job {
	const struct config *ij_cf;
	const struct provider_conf *ij_pc;
	struct event_batch ij_batch;
	struct store_claim *ij_claims;
	struct ingest_unit *ij_units;
	void (*ij_done)(void *arg);
	void *ij_done_arg;
};

static void ingest_report_key(struct ingest_report *rep, const struct event_batch *b)
{
	size_t n = sizeof(rep->ir_first_key);

	if (b->eb_n > 0 && b->eb_events[0].ev_key != NULL) {
		snprintf(rep->ir_first_key, n, "%s", b->eb_events[0].ev_key);
		/* A key cut for the log line says so. */
		if (strlen(b->eb_events[0].ev_key) >= n) {
			memcpy(rep->ir_first_key + n - 4, "...", 4);
		}
	}
}

void ingest_job_destroy(struct ingest_job *job)
{
	size_t i;

	if (job == NULL) {
		return;
	}
	if (job->ij_claims != NULL) {
		for (i = 0; i < job->ij_batch.eb_n; i++) {
			store_claim_finish(&job->ij_claims[i]);
		}
	}
	free(job->ij_claims);
	free(job->ij_units);
	event_batch_finish(&job->ij_batch);
	free(job);
}

/* A job for the events of batch (taken over: left empty, also on failure),
 * one claim per event. NULL when out of memory. */
static struct ingest_job *ingest_job_create(const struct config *cf, const struct provider_conf *pc,
					    struct event_batch *batch, int64_t now_ms, int64_t received_ms,
					    const char *source)
{
	struct ingest_job *job = calloc(1, sizeof(*job));
	size_t i;

	if (job == NULL) {
		event_batch_finish(batch);
		return NULL;
	}
	job->ij_cf = cf;
	job->ij_pc = pc;
	job->ij_batch = *batch;
	memset(batch, 0, sizeof(*batch));
	job->ij_claims = calloc(job->ij_batch.eb_n, sizeof(*job->ij_claims));
	job->ij_units = calloc(job->ij_batch.eb_n, sizeof(*job->ij_units));
	if (job->ij_claims == NULL || job->ij_units == NULL) {
		ingest_job_destroy(job);
		return NULL;
	}
	for (i = 0; i < job->ij_batch.eb_n; i++) {
		const struct event *ev = &job->ij_batch.eb_events[i];
		struct store_claim *c = &job->ij_claims[i];

		job->ij_units[i].iu_cf = cf;
		job->ij_units[i].iu_pc = pc;
		job->ij_units[i].iu_ev = ev;
		job->ij_units[i].iu_received_ms = received_ms;
		job->ij_units[i].iu_source = source != NULL ? source : INGEST_SOURCE_CALLBACK;
		c->sc_scope = pc->pc_name;
		c->sc_key = ev->ev_key;
		memcpy(c->sc_fingerprint, ev->ev_fingerprint, EVENT_FINGERPRINT_LEN);
		c->sc_now_ms = now_ms;
		c->sc_retention_ms = pc->pc_retention_s * 1000;
		c->sc_lease_ms = cf->cf_lease_s * 1000;
		c->sc_apply = ingest_apply;
		c->sc_arg = &job->ij_units[i];
		job->ij_units[i].iu_claim = c;
		reply_init(&c->sc_reply);
	}
	return job;
}

int ingest_prepare(struct store *st, const struct config *cf, const struct provider_conf *pc,
		   const struct http_request *req, const struct ingest_options *opt, struct ingest_job **ret_job,
		   struct reply *ret, struct ingest_report *ret_report)
{
	struct event_batch batch = {0};
	struct provider_verdict verdict = {0};
	struct ingest_job *job = NULL;
	int64_t now_ms = opt != NULL && opt->io_now_ms != 0 ? opt->io_now_ms : ingest_now_ms();
	int64_t verify_s = opt != NULL && opt->io_verify_s != 0 ? opt->io_verify_s : now_ms / 1000;
	int rc;

	*ret_job = NULL;
	memset(ret_report, 0, sizeof(*ret_report));
	if (pc->pc_provider->p_receive(pc, req, verify_s, &batch, &verdict) < 0 || batch.eb_n == 0) {
		if (verdict.pv_status == 0) {
			verdict.pv_status = 400;
			verdict.pv_reason = "no_events";
			verdict.pv_detail = "The callback holds no event.";
		}
		ingest_report_key(ret_report, &batch);
		event_batch_finish(&batch);
		ret_report->ir_result = INGEST_REJECTED;
		ret_report->ir_reason = verdict.pv_reason;
		ret_report->ir_has_skew = verdict.pv_has_skew;
		ret_report->ir_skew_s = verdict.pv_skew_s;
		ret_report->ir_tolerance_s = verdict.pv_tolerance_s;
		metrics_rejected(pc->pc_name, verdict.pv_reason != NULL ? verdict.pv_reason : "unknown");
		rc = ingest_error(pc, verdict.pv_status, verdict.pv_reason, verdict.pv_detail, 0, ret);
		return ingest_outcome_header(rc, ret, ret_report);
	}
	ret_report->ir_n_events = batch.eb_n;
	ingest_report_key(ret_report, &batch);
	if (batch.eb_n > INGEST_BATCH_MAX) {
		event_batch_finish(&batch);
		ret_report->ir_result = INGEST_REJECTED;
		ret_report->ir_reason = "batch_too_large";
		metrics_rejected(pc->pc_name, "batch_too_large");
		rc = ingest_error(pc, 413, "batch_too_large", "Too many items in one request.", 0, ret);
		return ingest_outcome_header(rc, ret, ret_report);
	}
	job = ingest_job_create(cf, pc, &batch, now_ms,
				req->hr_received_ms != 0 ? req->hr_received_ms : now_ms,
				opt != NULL ? opt->io_source : NULL);
	if (job == NULL) {
		return -1;
	}
	*ret_job = job;
	return 0;
}

int ingest_prepare_events(const struct config *cf, const struct provider_conf *pc, struct event_batch *batch,
			  const struct ingest_options *opt, struct ingest_job **ret_job)
{
	int64_t now_ms = opt != NULL && opt->io_now_ms != 0 ? opt->io_now_ms : ingest_now_ms();
	struct ingest_job *job;

	*ret_job = NULL;
	if (batch->eb_n == 0 || batch->eb_n > INGEST_BATCH_MAX) {
		event_batch_finish(batch);
		return -1;
	}
	job = ingest_job_create(cf, pc, batch, now_ms, now_ms, opt != NULL ? opt->io_source : NULL);
	if (job == NULL) {
		return -1;
	}
	*ret_job = job;
	return 0;
}

static void ingest_committed(void *arg, int result)
{
	struct ingest_job *job = arg;
	size_t i;

	(void)result; /* every claim has its outcome, transient when refused */
	/* A unit that ran the handler here and is stored as failed committed:
	 * acknowledged, not applied. A rolled-back one is transient instead. */
	for (i = 0; i < job->ij_batch.eb_n; i++) {
		const struct store_claim *c = &job->ij_claims[i];

		if ((c->sc_outcome == STORE_NEW || c->sc_outcome == STORE_CLAIMED) &&
		    c->sc_status == STORE_STATUS_FAILED && job->ij_units[i].iu_reason[0] != '\0') {
			metrics_unapplied(job->ij_pc->pc_name, job->ij_units[i].iu_reason);
		}
	}
	job->ij_done(job->ij_done_arg);
}

void ingest_submit(struct store *st, struct ingest_job *job, void (*done)(void *arg), void *arg)
{
	job->ij_done = done;
	job->ij_done_arg = arg;
	/* Every item of a batch commits in one transaction before any answer. */
	store_submit_async(st, job->ij_claims, job->ij_batch.eb_n, ingest_committed, job);
}

/* The first failed item's own refusal, so the log says unknown_order
 * where the request's slug says refused_by_business_rules. */
static void ingest_report_failure(const struct ingest_job *job, struct ingest_report *rep)
{
	size_t i;

	for (i = 0; i < job->ij_batch.eb_n; i++) {
		const struct store_claim *c = &job->ij_claims[i];

		if ((c->sc_outcome == STORE_NEW || c->sc_outcome == STORE_CLAIMED) &&
		    c->sc_status == STORE_STATUS_FAILED && job->ij_units[i].iu_reason[0] != '\0') {
			snprintf(rep->ir_failure, sizeof(rep->ir_failure), "%s",
				 job->ij_units[i].iu_reason);
			return;
		}
	}
}

int ingest_finish(struct ingest_job *job, struct reply *ret, struct ingest_report *ret_report)
{
	const struct provider_conf *pc = job->ij_pc;
	int64_t retry_after;
	size_t i;
	int rc;

	memset(ret_report, 0, sizeof(*ret_report));
	ret_report->ir_n_events = job->ij_batch.eb_n;
	ingest_report_key(ret_report, &job->ij_batch);
	ingest_classify(job->ij_claims, job->ij_batch.eb_n, pc, ret_report, &retry_after);
	for (i = 0; i < job->ij_batch.eb_n; i++) {
		if (job->ij_batch.eb_events[i].ev_fetch && job->ij_claims[i].sc_outcome == STORE_NEW) {
			ret_report->ir_n_fetch++;
		}
	}
	ingest_report_failure(job, ret_report);
	switch (ret_report->ir_result) {
	case INGEST_TRANSIENT:
		ret_report->ir_reason = "store_unavailable";
		rc = ingest_error(pc, 503, "store_unavailable", "Try again later.", retry_after > 0 ? retry_after : 1,
				  ret);
		break;
	case INGEST_IN_PROGRESS:
		ret_report->ir_reason = "in_progress";
		rc = ingest_error(pc, 409, "in_progress", "This event is being processed.",
				  retry_after > 0 ? retry_after : 1, ret);
		break;
	default:
		/* Every item's acknowledgement is the same; the first answers,
		 * handed over rather than copied (submitting again resets it). */
		reply_finish(ret);
		*ret = job->ij_claims[0].sc_reply;
		reply_init(&job->ij_claims[0].sc_reply);
		rc = 0;
		if (ret_report->ir_result == INGEST_DUPLICATE || ret_report->ir_result == INGEST_MISMATCH) {
			rc = reply_add_header(ret, "Idempotent-Replayed", "true");
		}
		break;
	}
	return ingest_outcome_header(rc, ret, ret_report);
}

/* For ingest_submit_wait: one waiter. */
struct ingest_wait {
	pthread_mutex_t iw_mutex;
	pthread_cond_t iw_cond;
	int iw_done;
};

static void ingest_wait_done(void *arg)
{
	struct ingest_wait *iw = arg;

	pthread_mutex_lock(&iw->iw_mutex);
	iw->iw_done = 1;
	pthread_cond_signal(&iw->iw_cond);
	pthread_mutex_unlock(&iw->iw_mutex);
}

void ingest_submit_wait(struct store *st, struct ingest_job *job)
{
	struct ingest_wait iw = {.iw_mutex = PTHREAD_MUTEX_INITIALIZER, .iw_cond = PTHREAD_COND_INITIALIZER};

	ingest_submit(st, job, ingest_wait_done, &iw);
	pthread_mutex_lock(&iw.iw_mutex);
	while (!iw.iw_done) {
		pthread_cond_wait(&iw.iw_cond, &iw.iw_mutex);
	}
	pthread_mutex_unlock(&iw.iw_mutex);
	pthread_cond_destroy(&iw.iw_cond);
	pthread_mutex_destroy(&iw.iw_mutex);
}

size_t ingest_job_count(const struct ingest_job *job)
{
	return job->ij_batch.eb_n;
}

void ingest_job_item(const struct ingest_job *job, size_t i, struct ingest_item *ret)
{
	const struct store_claim *c = &job->ij_claims[i];
	const struct ingest_unit *iu = &job->ij_units[i];

	memset(ret, 0, sizeof(*ret));
	ret->ii_event = &job->ij_batch.eb_events[i];
	switch (c->sc_outcome) {
	case STORE_NEW:
	case STORE_CLAIMED:
		ret->ii_result = c->sc_status == STORE_STATUS_FAILED ? INGEST_FAILED : INGEST_NEW;
		ret->ii_effect = iu->iu_effect;
		ret->ii_reason = iu->iu_reason[0] != '\0' ? iu->iu_reason : NULL;
		ret->ii_order_id = iu->iu_order_id[0] != '\0' ? iu->iu_order_id : NULL;
		break;
	case STORE_REPLAYED:
		ret->ii_result = INGEST_DUPLICATE;
		break;
	case STORE_MISMATCH:
		ret->ii_result = INGEST_MISMATCH;
		break;
	case STORE_IN_PROGRESS:
		ret->ii_result = INGEST_IN_PROGRESS;
		break;
	case STORE_TRANSIENT:
		ret->ii_result = INGEST_TRANSIENT;
		break;
	}
}

int ingest_hook(struct store *st, const struct config *cf, const struct provider_conf *pc,
		const struct http_request *req, const struct ingest_options *opt, struct reply *ret,
		struct ingest_report *ret_report)
{
	struct ingest_job *job = NULL;
	int rc;

	if (ingest_prepare(st, cf, pc, req, opt, &job, ret, ret_report) < 0) {
		return -1;
	}
	if (job == NULL) {
		return 0;
	}
	ingest_submit_wait(st, job);
	rc = ingest_finish(job, ret, ret_report);
	ingest_job_destroy(job);
	return rc;
}

/* ---- thin notifications: the fetched event (fetch.h) ---- */

struct ingest_fetched {
	struct ingest_unit if_unit;
	int if_taken; /* 1: this unit took the fetching row and applied the event */
};

/* Takes the event's row from "to fetch" (conditionally, so one unit of
 * work alone applies it) and applies the event in the same savepoint. */
static int ingest_fetched_unit(struct store_tx *tx, void *arg)
{
	struct ingest_fetched *f = arg;
	struct ingest_unit *iu = &f->if_unit;
	struct store_value p[3];
	struct store_row row;
	struct orders_result res;
	int rc;

	p[0] = store_int(store_tx_now(tx));
	p[1] = store_text(iu->iu_pc->pc_name);
	p[2] = store_text(iu->iu_ev->ev_key);
	rc = store_query(
	        tx,
	        "UPDATE idempotency_records SET effect = NULL, processed_at = ? WHERE scope = ? "
	        "AND idem_key = ? AND outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH
	        "' AND dismissed_at IS NULL RETURNING received_at",
	        p, 3, &row);
	if (rc <= 0) {
		return rc; /* 0: applied before, dismissed meanwhile, or gone */
	}
	iu->iu_received_ms = store_row_int(&row, 0);
	store_row_finish(&row);
	if (ingest_apply_effects(tx, iu, &res) < 0) {
		return -1;
	}
	f->if_taken = 1;
	return 1;
}

int ingest_apply_fetched(struct store *st, const struct config *cf, const struct provider_conf *pc,
			 const struct event *ev, struct ingest_item *ret)
{
	struct ingest_fetched *f = calloc(1, sizeof(*f));
	int rc;

	memset(ret, 0, sizeof(*ret));
	ret->ii_event = ev;
	if (f == NULL) {
		ret->ii_result = INGEST_TRANSIENT;
		return -1;
	}
	f->if_unit.iu_cf = cf;
	f->if_unit.iu_pc = pc;
	f->if_unit.iu_ev = ev;
	f->if_unit.iu_source = INGEST_SOURCE_CALLBACK;
	rc = store_write(st, ingest_now_ms(), ingest_fetched_unit, f);
	if (rc < 0) {
		ret->ii_result = INGEST_TRANSIENT;
	} else if (rc == 0 || !f->if_taken) {
		ret->ii_result = INGEST_DUPLICATE;
	} else {
		ret->ii_result = f->if_unit.iu_reason[0] != '\0' ? INGEST_FAILED : INGEST_NEW;
		ret->ii_effect = f->if_unit.iu_effect;
		if (ret->ii_result == INGEST_FAILED) {
			metrics_unapplied(pc->pc_name, f->if_unit.iu_reason);
		}
	}
	free(f);
	return rc < 0 ? -1 : 0;
}

struct ingest_pending {
	int (*ip_fn)(void *arg, const struct ingest_waiting *w);
	void *ip_arg;
	int64_t ip_since_ms;
	const char *ip_after_scope;
	const char *ip_after_key;
	int64_t ip_limit;
};

static int ingest_pending_row(void *arg, const struct store_row *row)
{
	struct ingest_pending *ip = arg;
	struct ingest_waiting w = {
	        .iw_scope = store_row_text(row, 0),
	        .iw_key = store_row_text(row, 1),
	        .iw_received_ms = store_row_int(row, 2),
	        .iw_type = store_row_text(row, 3),
	        .iw_related = store_row_text(row, 4),
	        .iw_context = store_row_text(row, 5),
	};

	return ip->ip_fn(ip->ip_arg, &w);
}

static int ingest_pending_read(struct store_tx *tx, void *arg)
{
	struct ingest_pending *ip = arg;
	struct store_value p[6];

	p[0] = store_int(ip->ip_since_ms);
	p[1] = store_int(ip->ip_since_ms);
	p[2] = store_text(ip->ip_after_scope);
	p[3] = store_text(ip->ip_after_scope);
	p[4] = store_text(ip->ip_after_key);
	p[5] = store_int(ip->ip_limit);
	return store_query_each(tx, INGEST_SQL_FETCH_PENDING, p, 6, ingest_pending_row, ip);
}

int ingest_fetch_pending(struct store *st, int64_t since_ms, const char *after_scope,
                         const char *after_key, int64_t limit,
                         int (*fn)(void *arg, const struct ingest_waiting *w), void *arg)
{
	struct ingest_pending ip = {.ip_fn = fn,
	                            .ip_arg = arg,
	                            .ip_since_ms = since_ms,
	                            .ip_after_scope = after_scope != NULL ? after_scope : "",
	                            .ip_after_key = after_key != NULL ? after_key : "",
	                            .ip_limit = limit};

	return store_read(st, ingest_now_ms(), ingest_pending_read, &ip);
}
