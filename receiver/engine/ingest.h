/* ingest.h: the path of one provider callback: verify, claim, handle, reply.
 * Used by the HTTP route and by in-process replay alike; in three steps
 * (prepare, submit, finish) so that no thread has to wait for the COMMIT. */
#ifndef IDEMHOOK_INGEST_H
#define IDEMHOOK_INGEST_H

#include <stdint.h>

#include "config.h"
#include "http.h"
#include "reply.h"

struct event;
struct event_batch;
struct store;

enum ingest_result {
	INGEST_NEW = 0, /* processed now (applied or recorded) */
	INGEST_DUPLICATE, /* replayed the stored reply */
	INGEST_MISMATCH, /* duplicate key with another payload: stored reply, counted */
	INGEST_FAILED, /* processed now, refused by business rules (key ends failed) */
	INGEST_REJECTED, /* refused before any claim: signature, timestamp, body */
	INGEST_IN_PROGRESS, /* 409 */
	INGEST_TRANSIENT, /* 503, nothing kept */
};

/* The reason of an event the provider itself marked refused (ev_refused):
 * recorded, not applied. */
#define INGEST_REASON_PROVIDER_RULES "refused_by_provider_rules"

/* The answer to every callback carries ingest_result_name() of it in this
 * header, so a client such as `replay --to` counts it as in-process replay
 * does (a business refusal is acknowledged 2xx like a new event). */
#define INGEST_OUTCOME_HEADER "Idemhook-Outcome"

/* Where an event came from (events.source). */
#define INGEST_SOURCE_CALLBACK "callback" /* the provider sent it */
#define INGEST_SOURCE_RECONCILE "reconcile" /* reconciliation asked the provider */

/* events.effect of a thin notification whose full event is still to be
 * fetched (event.h ev_fetch, fetch.h): acknowledged and recorded (outcome
 * done), nothing applied yet. `events list --status fetching` lists them. */
#define INGEST_EFFECT_TO_FETCH "to_fetch"

struct ingest_options {
	int64_t io_now_ms; /* the clock for records; 0 = now */
	int64_t io_verify_s; /* time to check signature timestamps against; 0 = io_now_ms */
	const char *io_source; /* INGEST_SOURCE_*; NULL = INGEST_SOURCE_CALLBACK */
};

#define INGEST_BATCH_MAX 500 /* items in one provider request (Adyen sends ≤ 100) */

#define INGEST_KEY_LOG_MAX 128 /* bytes of the first key kept for the log line */

struct ingest_report {
	enum ingest_result ir_result; /* the whole request (worst item for batches) */
	const char *ir_reason; /* rejection/failure slug (static), or NULL */
	size_t ir_n_events;
	size_t ir_n_new, ir_n_duplicate, ir_n_failed; /* per item */
	size_t ir_n_fetch; /* new items that are thin notifications, to fetch (fetch.h) */
	char ir_first_key[INGEST_KEY_LOG_MAX]; /* the first item's key (truncated), "" when none */
	/* What the operator's log line needs beyond the slug: */
	char ir_failure[32]; /* failed: the first failed item's refusal ("unknown_order"), else "" */
	int ir_has_skew; /* stale_timestamp: the signed time minus ours, and the tolerance */
	int64_t ir_skew_s;
	int64_t ir_tolerance_s;
};

/* A verified request on its way through the store: its events and claims. */
struct ingest_job;

/* Everything that can happen before the transaction: verifies req's
 * signature, normalises its events (fingerprints, payloads) and builds one
 * claim per event. Sets *ret_job, or leaves it NULL when the request is
 * answered already (rejected): ret and ret_report are then filled. cf and pc are borrowed until ingest_job_destroy; req only for the
 * call. Returns 0, or -1 when no answer could be built (out of memory). */
int ingest_prepare(struct store *st, const struct config *cf, const struct provider_conf *pc,
		   const struct http_request *req, const struct ingest_options *opt, struct ingest_job **ret_job,
		   struct reply *ret, struct ingest_report *ret_report);

/* Like ingest_prepare, for events that did not arrive as a request: a
 * provider's answers to reconciliation (docs/reconcile.md), verified and
 * normalised by its profile already, given the same claims, handlers and
 * outbox as a callback's. Takes batch over (left empty, also on failure).
 * Returns 0 with *ret_job set, or -1 (no events, too many, out of memory). */
int ingest_prepare_events(const struct config *cf, const struct provider_conf *pc, struct event_batch *batch,
			  const struct ingest_options *opt, struct ingest_job **ret_job);

/* Queues the job's claims in one transaction without waiting; done(arg)
 * runs once they committed (or failed), as for store_submit_async, maybe
 * before this returns. Then call ingest_finish. */
void ingest_submit(struct store *st, struct ingest_job *job, void (*done)(void *arg), void *arg);

/* After done: classifies the outcomes (counting duplicates and mismatches in
 * the metrics) and builds the provider's answer in ret, with its
 * INGEST_OUTCOME_HEADER (so does ingest_prepare when it answers). Returns 0, or -1
 * when no answer could be built (out of memory). */
int ingest_finish(struct ingest_job *job, struct reply *ret, struct ingest_report *ret_report);

/* ingest_submit, waiting for its completion. Never call it from one. */
void ingest_submit_wait(struct store *st, struct ingest_job *job);

/* What became of one event of a job, once its claims completed. Unlike
 * ingest_finish, it counts nothing in the metrics (reconciliation meets
 * known events on purpose: they are not duplicate deliveries). */
struct ingest_item {
	const struct event *ii_event; /* borrowed from the job */
	enum ingest_result ii_result; /* new, failed (refused by business rules), replayed,
					 mismatch, in_progress or transient */
	const char *ii_effect; /* new and failed: what the handler did ("paid", "noop", ...), static */
	const char *ii_reason; /* failed: the refusal slug ("unknown_order"), borrowed */
	const char *ii_order_id; /* new and failed: the order the event is about, or NULL; borrowed */
};

size_t ingest_job_count(const struct ingest_job *job);
void ingest_job_item(const struct ingest_job *job, size_t i, struct ingest_item *ret);

/* NULL is a no-op. */
void ingest_job_destroy(struct ingest_job *job);

/* Runs req through provider instance pc: ingest_prepare, ingest_submit,
 * waiting, ingest_finish. Fills ret with the answer to send and ret_report
 * with the classification. Returns 0, or -1 when no answer could be built
 * at all (out of memory). */
int ingest_hook(struct store *st, const struct config *cf, const struct provider_conf *pc,
		const struct http_request *req, const struct ingest_options *opt, struct reply *ret,
		struct ingest_report *ret_report);

const char *ingest_result_name(enum ingest_result r);

/* ---- thin notifications (fetch.h) ---- */

/* Applies ev, the full event fetched for the thin notification of the same
 * key at pc, exactly once: in one unit of work, its event row is taken from
 * INGEST_EFFECT_TO_FETCH and the handlers and outbox run as for a callback; the stored
 * acknowledgement stays the thin one's. An event an operator dismissed is
 * not taken. ret gets new or failed (applied now), replayed (applied
 * before, or no longer waiting: dismissed, or gone) or transient (nothing
 * kept). Returns 0, or -1 when the store failed. */
int ingest_apply_fetched(struct store *st, const struct config *cf, const struct provider_conf *pc,
			 const struct event *ev, struct ingest_item *ret);

/* The thin events waiting for their full event, received since a mark, in
 * order: a range of the partial index events_to_fetch (migrations 0016,
 * 0017), which holds only those rows; one an operator dismissed (`events
 * dismiss`) waits no longer and leaves it. Through the index of every
 * event's time the list read each event after the mark, and a list from
 * the beginning held one read transaction open for a minute on 10,000,000
 * stored callbacks, keeping every checkpoint from copying the WAL
 * (docs/benchmarks.md). Its conditions are the index's own, so the planner
 * may take it. */
#define INGEST_SQL_FETCH_PENDING                                                                   \
	"SELECT scope, idem_key, received_at, type, payment_ref, context FROM events WHERE "       \
	"received_at >= ? AND outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH              \
	"' AND dismissed_at IS "                                                                   \
	"NULL AND (received_at > ? OR scope > ? OR (scope = ? AND idem_key > ?)) ORDER BY "        \
	"received_at, scope, idem_key LIMIT ?"

/* One thin event waiting (strings borrowed for the call): what its signed
 * notification said, which the fetched event must match. */
struct ingest_waiting {
	const char *iw_scope;
	const char *iw_key;
	int64_t iw_received_ms;
	const char *iw_type;    /* the notification's type ("v1.payment_intent.succeeded") */
	const char *iw_related; /* the id of the object it is about, or NULL */
	const char *iw_context; /* the account it is in (event.h ev_context), or NULL */
};

/* Calls fn for up to limit events that wait to be fetched, oldest first,
 * from since_ms on and after the event (since_ms, after_scope, after_key)
 * in that order (after_scope "" for every one received at since_ms), so a
 * caller walks them all a batch at a time however many wait and however
 * many share one received time (strings borrowed for the call; fn returns
 * 0 to go on, 1 to stop, -1 to fail). Returns 0, or -1. */
int ingest_fetch_pending(struct store *st, int64_t since_ms, const char *after_scope,
                         const char *after_key, int64_t limit,
                         int (*fn)(void *arg, const struct ingest_waiting *w), void *arg);

#endif
