/* reconcile.c: reconciliation: asking the providers what became of payments
 * whose callbacks never arrived, each answer through the callback's pipeline. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "env.h"
#include "build_config.h"
#include "buf.h"
#include "config.h"
#include "crypto.h"
#include "httpc.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "outbox.h"
#include "reconcile.h"
#include "store.h"

#define RECONCILE_OLDER_THAN_DEFAULT_S (15 * 60)
#define RECONCILE_LOOKBACK_DEFAULT_S (3 * 24 * 3600)
#define RECONCILE_TIMEOUT_DEFAULT_MS 10000
#define RECONCILE_TIMEOUT_MAX_MS (5 * 60 * 1000)
#define RECONCILE_RETRIES_DEFAULT 3
#define RECONCILE_RETRIES_MAX 10
#define RECONCILE_RETRY_BASE_DEFAULT_MS 1000
#define RECONCILE_RETRY_CAP_MS 30000 /* largest backoff window */
/* A Retry-After longer than this ends the instance's run (the next run
 * asks again) rather than holding it. */
#define RECONCILE_RETRY_AFTER_MAX_MS (120 * 1000)
#define RECONCILE_MAX_ORDERS_DEFAULT 500
#define RECONCILE_MAX_ORDERS_MAX 100000
#define RECONCILE_RESPONSE_MAX (8 * 1024 * 1024) /* bytes of one answer kept */
#define RECONCILE_PAGES_DEFAULT 1000 /* [reconcile] max_pages: 100 000 events at 100 a page */
#define RECONCILE_PAGES_MAX 100000   /* the largest max_pages */
#define RECONCILE_BYTES_DEFAULT ((size_t)256 * 1024 * 1024) /* [reconcile] max_bytes */
/* Each listing starts this far before where the last one ended, for
 * events the provider makes visible a little late. */
#define RECONCILE_MARK_OVERLAP_S 300
#define RECONCILE_DETAIL_MAX 320
#define RECONCILE_USER_AGENT "idemhook/" IDEMHOOK_VERSION " (reconcile)"

/* ---- configuration ---- */

int reconcile_conf_load(const struct config *cf, struct reconcile_conf *ret)
{
	const char *v;
	unsigned retries = 0;
	int rc = 0;

	/* Every key checked whatever the others hold, each problem logged. */
	memset(ret, 0, sizeof(*ret));
	if (config_get_duration(cf, RECONCILE_SECTION, "interval", 0, &ret->rc_interval_s) < 0) {
		rc = -1;
	}
	if (config_get_duration(cf, RECONCILE_SECTION, "older_than", RECONCILE_OLDER_THAN_DEFAULT_S,
	                        &ret->rc_older_than_s) < 0) {
		rc = -1;
	}
	if (config_get_duration(cf, RECONCILE_SECTION, "lookback", RECONCILE_LOOKBACK_DEFAULT_S,
	                        &ret->rc_lookback_s) < 0) {
		rc = -1;
	} else if (ret->rc_lookback_s <= 0) {
		rc = config_refuse(cf, RECONCILE_SECTION, "lookback", "more than 0");
	}
	if (config_get_uint(cf, RECONCILE_SECTION, "retries", RECONCILE_RETRIES_DEFAULT, &retries) <
	    0) {
		rc = -1;
	} else if (retries > RECONCILE_RETRIES_MAX) {
		rc = config_refuse(cf, RECONCILE_SECTION, "retries", "at most %d",
		                   RECONCILE_RETRIES_MAX);
	}
	ret->rc_retries = retries;
	if (config_get_uint(cf, RECONCILE_SECTION, "max_orders", RECONCILE_MAX_ORDERS_DEFAULT,
	                    &ret->rc_max_orders) < 0) {
		rc = -1;
	} else if (ret->rc_max_orders == 0 || ret->rc_max_orders > RECONCILE_MAX_ORDERS_MAX) {
		rc = config_refuse(cf, RECONCILE_SECTION, "max_orders", "1 to %d",
		                   RECONCILE_MAX_ORDERS_MAX);
	}
	if (config_get_uint(cf, RECONCILE_SECTION, "max_pages", RECONCILE_PAGES_DEFAULT,
	                    &ret->rc_max_pages) < 0) {
		rc = -1;
	} else if (ret->rc_max_pages == 0 || ret->rc_max_pages > RECONCILE_PAGES_MAX) {
		rc = config_refuse(cf, RECONCILE_SECTION, "max_pages", "1 to %d",
		                   RECONCILE_PAGES_MAX);
	}
	if (config_get_size(cf, RECONCILE_SECTION, "max_bytes", RECONCILE_BYTES_DEFAULT,
	                    &ret->rc_max_bytes) < 0) {
		rc = -1;
	} else if (ret->rc_max_bytes == 0) {
		rc = config_refuse(cf, RECONCILE_SECTION, "max_bytes", "above 0");
	}
	ret->rc_timeout_ms = RECONCILE_TIMEOUT_DEFAULT_MS;
	ret->rc_retry_base_ms = RECONCILE_RETRY_BASE_DEFAULT_MS;
	v = config_get(cf, RECONCILE_SECTION, "timeout");
	if (v != NULL && (outbox_parse_ms(v, &ret->rc_timeout_ms) < 0 || ret->rc_timeout_ms <= 0 ||
	                  ret->rc_timeout_ms > RECONCILE_TIMEOUT_MAX_MS)) {
		rc = config_refuse(cf, RECONCILE_SECTION, "timeout",
		                   "expected a duration above 0, at most 5m (\"10s\", \"500ms\")");
	}
	v = config_get(cf, RECONCILE_SECTION, "retry_base");
	if (v != NULL && (outbox_parse_ms(v, &ret->rc_retry_base_ms) < 0 ||
	                  ret->rc_retry_base_ms > RECONCILE_RETRY_CAP_MS)) {
		rc = config_refuse(cf, RECONCILE_SECTION, "retry_base",
		                   "expected a duration, at most 30s (\"1s\", \"200ms\", \"0\")");
	}
	return rc;
}

/* ---- the report ---- */

const char *reconcile_result_name(enum reconcile_result r)
{
	switch (r) {
	case RECONCILE_APPLIED:
		return "applied";
	case RECONCILE_KNOWN:
		return "already_known";
	case RECONCILE_REFUSED:
		return "refused";
	case RECONCILE_WOULD_APPLY:
		return "would_apply";
	case RECONCILE_FAILED:
		return "failed";
	case RECONCILE_NOTE:
		break;
	}
	return "note";
}

static char *reconcile_dup(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

static void reconcile_item_finish(struct reconcile_item *it)
{
	free(it->ri_order);
	free(it->ri_key);
	free(it->ri_type);
	free(it->ri_detail);
	memset(it, 0, sizeof(*it));
}

/* Counts r for the instance and keeps a line for it (known events are
 * counted only: a listing meets thousands). Returns 0 or -1. */
static int reconcile_note(struct reconcile_instance *in, enum reconcile_result r, const char *order,
                          const struct event *ev, const char *type, const char *effect,
                          const char *detail)
{
	struct reconcile_item *grown;
	struct reconcile_item *it;

	switch (r) {
	case RECONCILE_APPLIED:
		in->rn_applied++;
		break;
	case RECONCILE_KNOWN:
		in->rn_known++;
		return 0;
	case RECONCILE_REFUSED:
		in->rn_refused++;
		break;
	case RECONCILE_WOULD_APPLY:
		in->rn_would_apply++;
		break;
	case RECONCILE_FAILED:
		in->rn_failed++;
		break;
	case RECONCILE_NOTE:
		break;
	}
	if (in->rn_n_items >= RECONCILE_ITEMS_MAX) {
		in->rn_items_dropped++;
		return 0;
	}
	grown = realloc(in->rn_items, (in->rn_n_items + 1) * sizeof(*grown));
	if (grown == NULL) {
		return -1;
	}
	in->rn_items = grown;
	it = &in->rn_items[in->rn_n_items++];
	memset(it, 0, sizeof(*it));
	it->ri_result = r;
	it->ri_order = reconcile_dup(order != NULL ? order : ev != NULL ? ev->ev_order_ref : NULL);
	it->ri_key = reconcile_dup(ev != NULL ? ev->ev_key : NULL);
	it->ri_type = reconcile_dup(type != NULL ? type : ev != NULL ? ev->ev_type : NULL);
	it->ri_kind = ev != NULL ? event_kind_name(ev->ev_kind) : NULL;
	it->ri_effect = effect;
	it->ri_detail = reconcile_dup(detail);
	return 0;
}

void reconcile_report_finish(struct reconcile_report *r)
{
	size_t i;
	size_t j;

	for (i = 0; i < r->rr_n; i++) {
		struct reconcile_instance *in = &r->rr_instances[i];

		for (j = 0; j < in->rn_n_items; j++) {
			reconcile_item_finish(&in->rn_items[j]);
		}
		free(in->rn_items);
		free(in->rn_name);
	}
	free(r->rr_instances);
	memset(r, 0, sizeof(*r));
}

/* ---- one run ---- */

struct reconcile_ctx {
	struct store *rx_st;
	const struct config *rx_cf;
	const struct reconcile_options *rx_opt;
	struct reconcile_conf rx_conf;
	int64_t rx_since_ms; /* the window: created at or after ... */
	int64_t rx_until_ms; /* ... and at or before */
	int rx_stopping;     /* ro_sleep said so: the run ends */
};

static int64_t reconcile_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits ms; returns 1 when the run must end. */
static int reconcile_sleep(struct reconcile_ctx *x, int64_t ms)
{
	struct timespec ts;

	if (x->rx_opt->ro_sleep != NULL) {
		if (x->rx_opt->ro_sleep(x->rx_opt->ro_sleep_arg, ms)) {
			x->rx_stopping = 1;
		}
		return x->rx_stopping;
	}
	if (ms <= 0) {
		return 0;
	}
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
	return 0;
}

/* 1 when the run must end (the daemon is stopping): asked between
 * questions, so a stop waits for one request at most. */
static int reconcile_stopping(struct reconcile_ctx *x)
{
	return x->rx_stopping || reconcile_sleep(x, 0);
}

/* The delay before attempt number attempt + 1 (full jitter). */
static int64_t reconcile_backoff_ms(const struct reconcile_ctx *x, unsigned attempt)
{
	struct outbox_policy p;
	uint64_t rnd = 0;

	memset(&p, 0, sizeof(p));
	p.op_base_ms = x->rx_conf.rc_retry_base_ms;
	p.op_cap_ms = RECONCILE_RETRY_CAP_MS;
	if (crypto_random(&rnd, sizeof(rnd)) < 0) {
		rnd = (uint64_t)reconcile_now_ms();
	}
	return outbox_backoff_ms(&p, attempt, rnd);
}

/* Asks q of pc: builds the request, sends it through httpc, retries
 * transient failures (no answer, 408, 429, 5xx, or the provider asking)
 * with backoff or its Retry-After, and reads the answer. Returns 0 with an
 * OK answer in ret, or -1 with ret's verdict FAILED and its reason and
 * detail set (initialised either way; finish it). */
static int reconcile_ask(struct reconcile_ctx *x, const struct provider_conf *pc,
                         struct reconcile_instance *in, const struct provider_query *q,
                         struct provider_answer *ret)
{
	const char *ca = config_client_ca_file(x->rx_cf);
	char last[RECONCILE_DETAIL_MAX] = "";
	const char *last_reason = "unreachable";
	unsigned attempt;

	provider_answer_init(ret);
	for (attempt = 0;; attempt++) {
		struct provider_request req;
		struct httpc_request hreq;
		struct httpc_response resp;
		char err[HTTPC_ERR_MAX];
		int64_t retry_after = -1;
		int64_t delay;
		int rc;

		provider_request_init(&req);
		memset(&resp, 0, sizeof(resp));
		if (pc->pc_provider->p_reconcile_request(pc, q, reconcile_now_ms() / 1000, &req) <
		    0) {
			provider_request_finish(&req);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "request_failed",
			                           "the request could not be built");
		}
		httpc_headers_add(&req.prq_headers, "User-Agent", RECONCILE_USER_AGENT);
		memset(&hreq, 0, sizeof(hreq));
		hreq.hcq_method = req.prq_method;
		hreq.hcq_url = req.prq_url.buf_data;
		hreq.hcq_headers = &req.prq_headers;
		hreq.hcq_body = req.prq_body.buf_len > 0 ? req.prq_body.buf_data : NULL;
		hreq.hcq_body_len = req.prq_body.buf_len;
		hreq.hcq_response_max = RECONCILE_RESPONSE_MAX;
		hreq.hcq_timeout_ms = (unsigned)x->rx_conf.rc_timeout_ms;
		hreq.hcq_ca_file = ca;
		rc = httpc_exchange(&hreq, &resp, err, sizeof(err));
		provider_request_finish(&req);
		in->rn_requests++;
		if (rc < 0 && resp.hcr_failure == HTTPC_FAILURE_TLS_PLAIN) {
			/* A configuration error: every retry would meet it alike. */
			httpc_response_finish(&resp);
			provider_answer_finish(ret);
			provider_answer_init(ret);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "not_tls",
			                           "the server does not speak TLS: use http:// "
			                           "for this instance's API address, or its TLS "
			                           "port (%s)",
			                           err);
		} else if (rc < 0 && resp.hcr_failure == HTTPC_FAILURE_TLS_VERIFY) {
			/* Nor does a certificate refused now pass in a second. */
			httpc_response_finish(&resp);
			provider_answer_finish(ret);
			provider_answer_init(ret);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "tls_verify",
			                           "the provider API's certificate is not trusted "
			                           "(%s): set [client] ca_file to the CA that "
			                           "issued it, or fix this instance's API address "
			                           "(a name its certificate holds)",
			                           err);
		} else if (rc < 0 && resp.hcr_failure == HTTPC_FAILURE_TLS_CA_FILE) {
			/* The file is wrong, not the provider: fixed in a second
			 * by no one. */
			httpc_response_finish(&resp);
			provider_answer_finish(ret);
			provider_answer_init(ret);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "ca_file",
			                           "%s: set [client] ca_file to a PEM file of the "
			                           "CAs to trust, or fix the file",
			                           err);
		} else if (rc < 0) {
			last_reason = "unreachable";
			snprintf(last, sizeof(last), "no answer: %s", err);
		} else if (resp.hcr_status == 408 || resp.hcr_status == 429 ||
		           resp.hcr_status >= 500) {
			const char *ra = httpc_response_header(&resp, "Retry-After");

			last_reason =
			        resp.hcr_status == 429 ? "rate_limited" : "provider_unavailable";
			snprintf(last, sizeof(last), "HTTP %ld%s%.40s", resp.hcr_status,
			         ra != NULL ? ", Retry-After: " : "", ra != NULL ? ra : "");
			if (ra != NULL &&
			    outbox_retry_after_ms(ra, reconcile_now_ms(), &retry_after) < 0) {
				retry_after = -1;
			}
		} else {
			size_t body_len = resp.hcr_body_len;

			provider_answer_finish(ret);
			provider_answer_init(ret);
			rc = pc->pc_provider->p_reconcile_answer(pc, q, &resp,
			                                         reconcile_now_ms() / 1000, ret);
			httpc_response_finish(&resp);
			/* bytes (and max_bytes) measure the answers the run is
			 * made of, a listing's pages; an error's body, retried, is
			 * one more of requests, not listing read. */
			if (rc == 0 && ret->pa_verdict == PROVIDER_ANSWER_OK) {
				in->rn_bytes += (int64_t)body_len;
			}
			if (ret->pa_verdict != PROVIDER_ANSWER_RETRY) {
				return rc;
			}
			last_reason = ret->pa_reason != NULL ? ret->pa_reason : "provider_busy";
			snprintf(last, sizeof(last), "%s", ret->pa_detail);
		}
		httpc_response_finish(&resp);
		if (attempt >= x->rx_conf.rc_retries) {
			provider_answer_finish(ret);
			provider_answer_init(ret);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, last_reason,
			                           "gave up after %u attempts: %s", attempt + 1,
			                           last);
		}
		if (retry_after > RECONCILE_RETRY_AFTER_MAX_MS) {
			provider_answer_finish(ret);
			provider_answer_init(ret);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, last_reason,
			                           "%s: the provider asks to wait %" PRId64
			                           " s; the next run asks again",
			                           last, retry_after / 1000);
		}
		delay = reconcile_backoff_ms(x, attempt + 1);
		if (retry_after > delay) {
			delay = retry_after;
		}
		if (reconcile_sleep(x, delay)) {
			provider_answer_finish(ret);
			provider_answer_init(ret);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "stopping",
			                           "stopped while waiting to retry: %s", last);
		}
	}
}

int reconcile_fetch(const struct config *cf, const struct provider_conf *pc, const char *event_id,
                    const char *type, const char *related, const char *context,
                    int (*sleep_fn)(void *arg, int64_t ms), void *sleep_arg,
                    struct provider_answer *ret)
{
	struct reconcile_options opt;
	struct reconcile_instance in;
	struct reconcile_ctx x;
	struct provider_query q;

	memset(&opt, 0, sizeof(opt));
	memset(&in, 0, sizeof(in));
	memset(&x, 0, sizeof(x));
	memset(&q, 0, sizeof(q));
	opt.ro_sleep = sleep_fn;
	opt.ro_sleep_arg = sleep_arg;
	x.rx_cf = cf;
	x.rx_opt = &opt;
	q.pq_event_id = event_id;
	q.pq_event_type = type;
	q.pq_event_related = related;
	q.pq_event_context = context;
	if (reconcile_conf_load(cf, &x.rx_conf) < 0 ||
	    pc->pc_provider->p_reconcile_request == NULL) {
		provider_answer_init(ret);
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "request_failed",
		                           "the instance cannot be asked");
	}
	return reconcile_ask(&x, pc, &in, &q, ret);
}

/* Logs and reports a failed question. */
static int reconcile_failed(struct reconcile_instance *in, const char *order,
                            const struct provider_answer *a)
{
	char qname[80];
	char qorder[80];
	char detail[RECONCILE_DETAIL_MAX + 40];

	snprintf(detail, sizeof(detail), "%s: %s", a->pa_reason != NULL ? a->pa_reason : "failed",
	         a->pa_detail);
	log_warn("reconcile provider=\"%s\"%s%s%s failed: %s; nothing applied",
	         log_quote(qname, sizeof(qname), in->rn_name), order != NULL ? " order=\"" : "",
	         order != NULL ? log_quote(qorder, sizeof(qorder), order) : "",
	         order != NULL ? "\"" : "", detail);
	return reconcile_note(in, RECONCILE_FAILED, order, NULL, NULL, NULL, detail);
}

/* The dry run's look at each event: known when its key is recorded. */
static int reconcile_peek(struct reconcile_ctx *x, const struct provider_conf *pc,
                          struct reconcile_instance *in, struct event_batch *b, const char *order)
{
	size_t i;

	for (i = 0; i < b->eb_n; i++) {
		const struct event *ev = &b->eb_events[i];
		enum store_status status;
		unsigned char fp[EVENT_FINGERPRINT_LEN];
		int rc = store_peek(x->rx_st, pc->pc_name, ev->ev_key, reconcile_now_ms(),
		                    pc->pc_retention_s * 1000, &status, fp);

		if (rc < 0) {
			if (reconcile_note(in, RECONCILE_FAILED, order, ev, NULL, NULL,
			                   "store: the key could not be looked up") < 0) {
				return -1;
			}
		} else if (reconcile_note(in, rc == 1 ? RECONCILE_KNOWN : RECONCILE_WOULD_APPLY,
		                          order, ev, NULL, NULL, NULL) < 0) {
			return -1;
		}
	}
	event_batch_finish(b);
	return 0;
}

/* Feeds the events of one answer (taken over) through the callback's
 * pipeline as one job: one transaction, each event in its own savepoint,
 * so nothing of it is half-applied. Returns 0, or -1 out of memory. */
static int reconcile_ingest(struct reconcile_ctx *x, const struct provider_conf *pc,
                            struct reconcile_instance *in, struct event_batch *b, const char *order)
{
	struct ingest_options io;
	struct ingest_job *job = NULL;
	size_t n = b->eb_n;
	size_t i;
	int rc = 0;

	if (n == 0) {
		return 0;
	}
	in->rn_events_found += (int64_t)n;
	if (x->rx_opt->ro_dry_run) {
		return reconcile_peek(x, pc, in, b, order);
	}
	memset(&io, 0, sizeof(io));
	io.io_source = INGEST_SOURCE_RECONCILE;
	if (ingest_prepare_events(x->rx_cf, pc, b, &io, &job) < 0) {
		return reconcile_note(in, RECONCILE_FAILED, order, NULL, NULL, NULL,
		                      "the events could not be queued") < 0
		               ? -1
		               : 0;
	}
	ingest_submit_wait(x->rx_st, job);
	for (i = 0; i < ingest_job_count(job) && rc == 0; i++) {
		struct ingest_item it;
		const struct event *ev;
		const char *who;
		char qname[80];
		char qkey[INGEST_KEY_LOG_MAX + 8];
		char qorder[80];

		ingest_job_item(job, i, &it);
		ev = it.ii_event;
		who = it.ii_order_id != NULL ? it.ii_order_id : order;
		switch (it.ii_result) {
		case INGEST_NEW:
			if (it.ii_effect != NULL && strcmp(it.ii_effect, "noop") != 0 &&
			    strcmp(it.ii_effect, "recorded") != 0) {
				log_notice(
				        "reconcile provider=\"%s\" key=\"%s\" order=\"%s\" kind=%s "
				        "effect=%s source=reconcile",
				        log_quote(qname, sizeof(qname), pc->pc_name),
				        log_quote(qkey, sizeof(qkey), ev->ev_key),
				        log_quote(qorder, sizeof(qorder), who != NULL ? who : ""),
				        event_kind_name(ev->ev_kind), it.ii_effect);
				rc = reconcile_note(in, RECONCILE_APPLIED, who, ev, NULL,
				                    it.ii_effect, NULL);
			} else {
				rc = reconcile_note(in, RECONCILE_KNOWN, who, ev, NULL,
				                    it.ii_effect, NULL);
			}
			break;
		case INGEST_FAILED:
			rc = reconcile_note(in, RECONCILE_REFUSED, who, ev, NULL, it.ii_effect,
			                    it.ii_reason);
			break;
		case INGEST_MISMATCH:
			log_warn("reconcile provider=\"%s\" key=\"%s\": recorded before with "
			         "another "
			         "payload; the first is kept",
			         log_quote(qname, sizeof(qname), pc->pc_name),
			         log_quote(qkey, sizeof(qkey), ev->ev_key));
			/* fall through */
		case INGEST_DUPLICATE:
			rc = reconcile_note(in, RECONCILE_KNOWN, who, ev, NULL, NULL, NULL);
			break;
		case INGEST_IN_PROGRESS:
		case INGEST_TRANSIENT:
		case INGEST_REJECTED:
			log_warn(
			        "reconcile provider=\"%s\" key=\"%s\": the store could not take it "
			        "now; the next run tries again",
			        log_quote(qname, sizeof(qname), pc->pc_name),
			        log_quote(qkey, sizeof(qkey), ev->ev_key));
			rc = reconcile_note(
			        in, RECONCILE_FAILED, who, ev, NULL, NULL,
			        "store_unavailable: nothing of it applied; the next run "
			        "tries again");
			break;
		}
	}
	ingest_job_destroy(job);
	return rc;
}

/* ---- a provider's own list of events ---- */

static int64_t reconcile_mark_get(const struct reconcile_marks *m, const char *name)
{
	size_t i;

	for (i = 0; m != NULL && i < m->rm_n; i++) {
		if (strcmp(m->rm_items[i].rm_name, name) == 0) {
			return m->rm_items[i].rm_through_s;
		}
	}
	return 0;
}

static void reconcile_mark_set(struct reconcile_marks *m, const char *name, int64_t through_s)
{
	size_t i;

	if (m == NULL || strlen(name) >= sizeof(m->rm_items[0].rm_name)) {
		return;
	}
	for (i = 0; i < m->rm_n; i++) {
		if (strcmp(m->rm_items[i].rm_name, name) == 0) {
			m->rm_items[i].rm_through_s = through_s;
			return;
		}
	}
	if (m->rm_n < RECONCILE_MARKS_MAX) {
		snprintf(m->rm_items[m->rm_n].rm_name, sizeof(m->rm_items[0].rm_name), "%s", name);
		m->rm_items[m->rm_n].rm_through_s = through_s;
		m->rm_n++;
	}
}

static int reconcile_event_cmp(const void *a, const void *b)
{
	const struct event *x = a;
	const struct event *y = b;

	return x->ev_occurred_ms < y->ev_occurred_ms ? -1 : x->ev_occurred_ms > y->ev_occurred_ms;
}

/* One page's events through the pipeline, oldest first (as they
 * happened), taken out of page as they go. Returns 0 when all were taken,
 * 1 when the run is stopping, -1 on failure. */
/* 1 when ev is for the run's one order (ro_order), or the run is not for
 * one order. */
static int reconcile_of_order(const struct reconcile_options *opt, const struct event *ev)
{
	if (opt->ro_order == NULL) {
		return 1;
	}
	if (ev->ev_order_ref != NULL && strcmp(ev->ev_order_ref, opt->ro_order) == 0) {
		return 1;
	}
	return opt->ro_payment_ref != NULL && ev->ev_payment_ref != NULL &&
	       strcmp(ev->ev_payment_ref, opt->ro_payment_ref) == 0;
}

static int reconcile_page(struct reconcile_ctx *x, const struct provider_conf *pc,
                          struct reconcile_instance *in, struct event_batch *page)
{
	size_t i;
	int rc = 0;

	if ((int64_t)page->eb_n > in->rn_held_max) {
		in->rn_held_max = (int64_t)page->eb_n;
	}
	if (page->eb_n > 1) {
		qsort(page->eb_events, page->eb_n, sizeof(*page->eb_events), reconcile_event_cmp);
	}
	for (i = 0; i < page->eb_n && rc == 0; i++) {
		struct event_batch one = {0};
		struct event *ev;

		if (reconcile_stopping(x)) {
			return 1;
		}
		if (!reconcile_of_order(x->rx_opt, &page->eb_events[i])) {
			continue; /* left in the page, freed with it */
		}
		ev = event_batch_add(&one);
		if (ev == NULL) {
			return -1;
		}
		*ev = page->eb_events[i];
		memset(&page->eb_events[i], 0, sizeof(page->eb_events[i]));
		rc = reconcile_ingest(x, pc, in, &one, NULL);
		event_batch_finish(&one);
	}
	return rc < 0 ? -1 : 0;
}

/* Every page of the instance's events in the window, each page's events
 * through the pipeline before the next page is asked for, so that memory
 * holds one page whatever the listing's length; the listing is bounded per
 * run by [reconcile] max_pages and max_bytes. */
static int reconcile_events(struct reconcile_ctx *x, const struct provider_conf *pc,
                            struct reconcile_instance *in)
{
	struct provider_query q;
	char *cursor = NULL;
	int64_t mark = reconcile_mark_get(x->rx_opt->ro_marks, pc->pc_name);
	int64_t failed_before = in->rn_failed;
	int complete = 0;
	int rc = 0;

	memset(&q, 0, sizeof(q));
	q.pq_since_s = x->rx_since_ms / 1000;
	if (mark > 0 && mark - RECONCILE_MARK_OVERLAP_S > q.pq_since_s) {
		q.pq_since_s = mark - RECONCILE_MARK_OVERLAP_S;
	}
	q.pq_until_s = x->rx_until_ms / 1000;
	while (!reconcile_stopping(x)) {
		struct provider_answer a;
		char cut[RECONCILE_DETAIL_MAX];
		int taken;

		if (in->rn_pages >= (int64_t)x->rx_conf.rc_max_pages ||
		    in->rn_bytes >= (int64_t)x->rx_conf.rc_max_bytes) {
			snprintf(cut, sizeof(cut),
			         "too_many_pages: the listing was cut after %" PRId64
			         " pages, %" PRId64 " bytes ([reconcile] max_pages %u, "
			         "max_bytes %zu); narrow the window (--since)",
			         in->rn_pages, in->rn_bytes, x->rx_conf.rc_max_pages,
			         x->rx_conf.rc_max_bytes);
			rc = reconcile_note(in, RECONCILE_FAILED, NULL, NULL, NULL, NULL, cut);
			break;
		}
		q.pq_cursor = cursor;
		if (reconcile_ask(x, pc, in, &q, &a) < 0) {
			rc = reconcile_failed(in, NULL, &a);
			provider_answer_finish(&a);
			break;
		}
		in->rn_pages++;
		if (a.pa_note[0] != '\0') {
			rc = reconcile_note(in, RECONCILE_NOTE, NULL, NULL, NULL, NULL, a.pa_note);
		}
		taken = rc == 0 ? reconcile_page(x, pc, in, &a.pa_events) : -1;
		free(cursor);
		cursor = a.pa_cursor;
		a.pa_cursor = NULL;
		provider_answer_finish(&a);
		if (taken != 0) {
			rc = taken < 0 ? -1 : rc;
			break;
		}
		if (cursor == NULL) {
			complete = 1;
			break;
		}
	}
	free(cursor);
	/* The next pass of the worker starts where a whole listing ended, every
	 * event of it taken: one the store could not take is listed again. */
	if (rc == 0 && complete && in->rn_failed == failed_before && !x->rx_opt->ro_dry_run) {
		reconcile_mark_set(x->rx_opt->ro_marks, pc->pc_name, q.pq_until_s);
	}
	return rc;
}

/* ---- orders asked about one by one ---- */

struct reconcile_orders {
	char **ro_ids;
	size_t ro_n;
	const char *ro_scope;
	const char *ro_order; /* or NULL: every waiting order of the window */
	int64_t ro_from_ms;
	int64_t ro_until_ms;
	int64_t ro_limit;
};

static int reconcile_orders_row(void *arg, const struct store_row *row)
{
	struct reconcile_orders *o = arg;
	char **grown = realloc(o->ro_ids, (o->ro_n + 1) * sizeof(*grown));

	if (grown == NULL) {
		return -1;
	}
	o->ro_ids = grown;
	o->ro_ids[o->ro_n] = reconcile_dup(store_row_text(row, 0));
	if (o->ro_ids[o->ro_n] == NULL) {
		return -1;
	}
	o->ro_n++;
	return 0;
}

/* Orders still waiting for their payment (pending, or authorised through
 * this instance) created in the window, oldest first. */
static int reconcile_orders_unit(struct store_tx *tx, void *arg)
{
	struct reconcile_orders *o = arg;
	struct store_value p[] = {store_int(o->ro_from_ms), store_int(o->ro_until_ms),
	                          store_text(o->ro_scope), store_int(o->ro_limit)};
	struct store_value one[] = {store_text(o->ro_order), store_text(o->ro_scope)};

	if (o->ro_order != NULL) {
		return store_query_each(tx,
		                        "SELECT id FROM orders WHERE id = ?"
		                        " AND (provider IS NULL OR provider = ?)",
		                        one, 2, reconcile_orders_row, o);
	}
	return store_query_each(tx,
	                        "SELECT id FROM orders WHERE status IN ('pending', 'authorized')"
	                        " AND created_at >= ? AND created_at <= ?"
	                        " AND (provider IS NULL OR provider = ?)"
	                        " ORDER BY created_at, id LIMIT ?",
	                        p, 4, reconcile_orders_row, o);
}

static void reconcile_orders_finish(struct reconcile_orders *o)
{
	size_t i;

	for (i = 0; i < o->ro_n; i++) {
		free(o->ro_ids[i]);
	}
	free(o->ro_ids);
	memset(o, 0, sizeof(*o));
}

static int reconcile_orders(struct reconcile_ctx *x, const struct provider_conf *pc,
                            struct reconcile_instance *in)
{
	struct reconcile_orders o;
	size_t i;
	int rc = 0;

	memset(&o, 0, sizeof(o));
	o.ro_scope = pc->pc_name;
	o.ro_order = x->rx_opt->ro_order;
	o.ro_from_ms = x->rx_since_ms;
	o.ro_until_ms = x->rx_until_ms;
	o.ro_limit = x->rx_conf.rc_max_orders;
	if (store_read(x->rx_st, reconcile_now_ms(), reconcile_orders_unit, &o) < 0) {
		reconcile_orders_finish(&o);
		return reconcile_note(in, RECONCILE_FAILED, NULL, NULL, NULL, NULL,
		                      "store: the waiting orders could not be read");
	}
	for (i = 0; i < o.ro_n && rc == 0 && !reconcile_stopping(x); i++) {
		struct provider_query q;
		struct provider_answer a;

		memset(&q, 0, sizeof(q));
		q.pq_order_id = o.ro_ids[i];
		in->rn_orders_checked++;
		if (reconcile_ask(x, pc, in, &q, &a) < 0) {
			rc = reconcile_failed(in, o.ro_ids[i], &a);
		} else {
			if (a.pa_note[0] != '\0') {
				rc = reconcile_note(in, RECONCILE_NOTE, o.ro_ids[i], NULL,
				                    a.pa_state, NULL, a.pa_note);
			}
			if (rc == 0) {
				rc = reconcile_ingest(x, pc, in, &a.pa_events, o.ro_ids[i]);
			}
		}
		provider_answer_finish(&a);
	}
	if (o.ro_n == x->rx_conf.rc_max_orders && rc == 0) {
		char detail[160];

		snprintf(detail, sizeof(detail),
		         "max_orders: %u orders asked about; newer ones wait for the next run",
		         x->rx_conf.rc_max_orders);
		rc = reconcile_note(in, RECONCILE_NOTE, NULL, NULL, NULL, NULL, detail);
	}
	reconcile_orders_finish(&o);
	return rc;
}

/* ---- the run ---- */

static void reconcile_sum(struct reconcile_report *r)
{
	size_t i;

	for (i = 0; i < r->rr_n; i++) {
		const struct reconcile_instance *in = &r->rr_instances[i];

		r->rr_orders_checked += in->rn_orders_checked;
		r->rr_events_found += in->rn_events_found;
		r->rr_applied += in->rn_applied;
		r->rr_known += in->rn_known;
		r->rr_refused += in->rn_refused;
		r->rr_would_apply += in->rn_would_apply;
		r->rr_failed += in->rn_failed;
	}
}

static int reconcile_instance_run(struct reconcile_ctx *x, const struct provider_conf *pc,
                                  struct reconcile_instance *in)
{
	const struct provider *p = pc->pc_provider;
	struct metrics_reconcile m;
	int rc = 0;

	in->rn_name = strdup(pc->pc_name);
	if (in->rn_name == NULL) {
		return -1;
	}
	in->rn_type = p->p_name;
	in->rn_mode = PROVIDER_RECONCILE_NONE;
	in->rn_why = "the profile has no query API idemhook knows";
	if (p->p_reconcile_mode != NULL) {
		in->rn_mode = p->p_reconcile_mode(pc, &in->rn_why);
	}
	if (in->rn_mode != PROVIDER_RECONCILE_NONE &&
	    (p->p_reconcile_request == NULL || p->p_reconcile_answer == NULL)) {
		in->rn_mode = PROVIDER_RECONCILE_NONE;
	}
	if (in->rn_mode != PROVIDER_RECONCILE_NONE &&
	    reconcile_now_ms() - x->rx_since_ms > pc->pc_retention_s * 1000) {
		char qname[80];

		/* Keys older than the retention are forgotten: such an event runs
		 * again, and only the order's own guards keep it from changing
		 * anything twice (docs/reconcile.md). */
		log_warn("reconcile provider=\"%s\": looking back further than its retention "
		         "(%" PRId64
		         " s); events whose keys expired are run again and kept single by the "
		         "orders' guards alone",
		         log_quote(qname, sizeof(qname), pc->pc_name), pc->pc_retention_s);
	}
	if (in->rn_mode == PROVIDER_RECONCILE_EVENTS) {
		rc = reconcile_events(x, pc, in);
	} else if (in->rn_mode == PROVIDER_RECONCILE_ORDERS) {
		rc = reconcile_orders(x, pc, in);
	}
	if (in->rn_mode != PROVIDER_RECONCILE_NONE && !x->rx_opt->ro_dry_run) {
		memset(&m, 0, sizeof(m));
		m.mr_orders_checked = in->rn_orders_checked;
		m.mr_applied = in->rn_applied;
		m.mr_known = in->rn_known;
		m.mr_refused = in->rn_refused;
		m.mr_failed = in->rn_failed;
		metrics_reconcile_instance(pc->pc_name, &m);
	}
	return rc;
}

/* What a run for one order reads of it. */
struct reconcile_order_refs {
	const char *rf_id;
	int rf_found;
	char *rf_provider;
	char *rf_payment_ref;
	int64_t rf_created_ms;
};

static int reconcile_order_refs_unit(struct store_tx *tx, void *arg)
{
	struct reconcile_order_refs *rf = arg;
	struct store_value p[] = {store_text(rf->rf_id)};
	struct store_row row;
	int rc;

	rc = store_query(tx, "SELECT provider, payment_ref, created_at FROM orders WHERE id = ?", p,
	                 1, &row);
	if (rc <= 0) {
		return rc;
	}
	rf->rf_found = 1;
	rf->rf_provider = reconcile_dup(store_row_text(&row, 0));
	rf->rf_payment_ref = reconcile_dup(store_row_text(&row, 1));
	rf->rf_created_ms = store_row_int(&row, 2);
	store_row_finish(&row);
	return 1;
}

static int reconcile_run_opts(struct store *st, const struct config *cf,
                              const struct reconcile_options *opt, struct reconcile_report *ret);

int reconcile_run(struct store *st, const struct config *cf, const struct reconcile_options *opt,
                  struct reconcile_report *ret)
{
	struct reconcile_order_refs rf;
	struct reconcile_options one;
	char qorder[80];
	int rc;

	if (opt->ro_order == NULL) {
		return reconcile_run_opts(st, cf, opt, ret);
	}
	memset(&rf, 0, sizeof(rf));
	rf.rf_id = opt->ro_order;
	if (store_read(st, reconcile_now_ms(), reconcile_order_refs_unit, &rf) < 0) {
		memset(ret, 0, sizeof(*ret));
		log_err("reconcile: the order could not be read");
		rc = -1;
		goto out;
	}
	if (!rf.rf_found) {
		memset(ret, 0, sizeof(*ret));
		ret->rr_order_unknown = 1;
		log_err("reconcile: no order \"%s\"",
		        log_quote(qorder, sizeof(qorder), opt->ro_order));
		rc = -1;
		goto out;
	}
	one = *opt;
	if (one.ro_provider == NULL && rf.rf_provider != NULL &&
	    config_provider(cf, rf.rf_provider) != NULL) {
		one.ro_provider = rf.rf_provider;
	}
	one.ro_payment_ref = rf.rf_payment_ref;
	if (one.ro_since_ms == 0) {
		one.ro_since_ms = rf.rf_created_ms > 60000 ? rf.rf_created_ms - 60000 : 1;
	}
	if (one.ro_older_than_s < 0) {
		one.ro_older_than_s = 0;
	}
	rc = reconcile_run_opts(st, cf, &one, ret);
out:
	free(rf.rf_provider);
	free(rf.rf_payment_ref);
	return rc;
}

static int reconcile_run_opts(struct store *st, const struct config *cf,
                              const struct reconcile_options *opt, struct reconcile_report *ret)
{
	struct reconcile_ctx x;
	int64_t now_ms = reconcile_now_ms();
	int64_t older;
	size_t i;
	char qname[80];

	memset(ret, 0, sizeof(*ret));
	memset(&x, 0, sizeof(x));
	x.rx_st = st;
	x.rx_cf = cf;
	x.rx_opt = opt;
	if (reconcile_conf_load(cf, &x.rx_conf) < 0) {
		return -1;
	}
	if (opt->ro_provider != NULL && config_provider(cf, opt->ro_provider) == NULL) {
		log_err("reconcile: no provider instance \"%s\" is configured",
		        log_quote(qname, sizeof(qname), opt->ro_provider));
		return -1;
	}
	older = opt->ro_older_than_s >= 0 ? opt->ro_older_than_s : x.rx_conf.rc_older_than_s;
	x.rx_until_ms = now_ms - older * 1000;
	x.rx_since_ms =
	        opt->ro_since_ms != 0 ? opt->ro_since_ms : now_ms - x.rx_conf.rc_lookback_s * 1000;
	ret->rr_dry_run = opt->ro_dry_run;
	ret->rr_since_ms = x.rx_since_ms;
	ret->rr_until_ms = x.rx_until_ms;
	if (opt->ro_since_ms != 0 && x.rx_since_ms >= x.rx_until_ms) {
		/* Asked for a window that holds nothing: not a run that found
		 * nothing. */
		ret->rr_window_empty = 1;
		return -1;
	}
	ret->rr_instances =
	        calloc(cf->cf_n_providers > 0 ? cf->cf_n_providers : 1, sizeof(*ret->rr_instances));
	if (ret->rr_instances == NULL) {
		return -1;
	}
	for (i = 0; i < cf->cf_n_providers && !reconcile_stopping(&x); i++) {
		const struct provider_conf *pc = &cf->cf_providers[i];

		if (opt->ro_provider != NULL && strcmp(pc->pc_name, opt->ro_provider) != 0) {
			continue;
		}
		if (reconcile_instance_run(&x, pc, &ret->rr_instances[ret->rr_n++]) < 0) {
			log_err("reconcile: out of memory");
			reconcile_report_finish(ret);
			return -1;
		}
	}
	reconcile_sum(ret);
	if (!opt->ro_dry_run) {
		metrics_reconcile_run(ret->rr_failed == 0);
	}
	log_info("reconcile%s: orders checked %" PRId64 ", events found %" PRId64 ", %s %" PRId64
	         ", already known %" PRId64 ", refused %" PRId64 ", failed %" PRId64,
	         opt->ro_dry_run ? " (dry run)" : "", ret->rr_orders_checked, ret->rr_events_found,
	         opt->ro_dry_run ? "would apply" : "applied",
	         opt->ro_dry_run ? ret->rr_would_apply : ret->rr_applied, ret->rr_known,
	         ret->rr_refused, ret->rr_failed);
	return 0;
}

/* ---- formats ---- */

static const char *reconcile_mode_name(enum provider_reconcile_mode m)
{
	switch (m) {
	case PROVIDER_RECONCILE_ORDERS:
		return "orders";
	case PROVIDER_RECONCILE_EVENTS:
		return "events";
	case PROVIDER_RECONCILE_NONE:
		break;
	}
	return "none";
}

static void reconcile_time(int64_t ms, char out[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
		snprintf(out, 32, "-");
	}
}

static const char *reconcile_or_dash(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : "-";
}

static int reconcile_format_counts(struct buf *out, int dry_run, int64_t found, int64_t applied,
                                   int64_t would, int64_t known, int64_t refused, int64_t failed)
{
	return buf_printf(out,
	                  "%" PRId64 " events found: %" PRId64 " %s, %" PRId64
	                  " already known, %" PRId64 " refused; %" PRId64 " failed\n",
	                  found, dry_run ? would : applied, dry_run ? "would apply" : "applied",
	                  known, refused, failed);
}

int reconcile_format_text(const struct reconcile_report *r, struct buf *out)
{
	char since[32];
	char until[32];
	size_t i;
	size_t j;

	reconcile_time(r->rr_since_ms, since);
	reconcile_time(r->rr_until_ms, until);
	if (buf_printf(out, "reconcile%s: created %s .. %s\n",
	               r->rr_dry_run ? " (dry run: nothing changed)" : "", since, until) < 0) {
		return -1;
	}
	for (i = 0; i < r->rr_n; i++) {
		const struct reconcile_instance *in = &r->rr_instances[i];

		if (buf_printf(out, "%s (%s): ", in->rn_name, in->rn_type) < 0) {
			return -1;
		}
		if (in->rn_mode == PROVIDER_RECONCILE_NONE) {
			if (buf_printf(out, "not asked: %s\n", in->rn_why) < 0) {
				return -1;
			}
			continue;
		}
		if ((in->rn_mode == PROVIDER_RECONCILE_ORDERS
		             ? buf_printf(out, "%" PRId64 " orders checked, ",
		                          in->rn_orders_checked)
		             : buf_printf(out, "%" PRId64 " pages listed, ", in->rn_pages)) < 0 ||
		    reconcile_format_counts(out, r->rr_dry_run, in->rn_events_found, in->rn_applied,
		                            in->rn_would_apply, in->rn_known, in->rn_refused,
		                            in->rn_failed) < 0) {
			return -1;
		}
		for (j = 0; j < in->rn_n_items; j++) {
			const struct reconcile_item *it = &in->rn_items[j];

			if (buf_printf(out, "  %-12s %-30s %-20s %s%s%s\n",
			               reconcile_result_name(it->ri_result),
			               reconcile_or_dash(it->ri_order),
			               reconcile_or_dash(it->ri_type),
			               it->ri_key != NULL ? it->ri_key : "",
			               it->ri_key != NULL && (it->ri_effect != NULL ||
			                                      it->ri_detail != NULL)
			                       ? " "
			                       : "",
			               it->ri_effect != NULL   ? it->ri_effect
			               : it->ri_detail != NULL ? it->ri_detail
			                                       : "") < 0) {
				return -1;
			}
		}
		if (in->rn_items_dropped > 0 &&
		    buf_printf(out, "  ... and %zu more lines\n", in->rn_items_dropped) < 0) {
			return -1;
		}
	}
	if (buf_printf(out, "total: %" PRId64 " orders checked, ", r->rr_orders_checked) < 0) {
		return -1;
	}
	return reconcile_format_counts(out, r->rr_dry_run, r->rr_events_found, r->rr_applied,
	                               r->rr_would_apply, r->rr_known, r->rr_refused, r->rr_failed);
}

static int reconcile_json_counts(cJSON *o, int64_t checked, int64_t found, int64_t applied,
                                 int64_t would, int64_t known, int64_t refused, int64_t failed)
{
	return cJSON_AddNumberToObject(o, "orders_checked", (double)checked) == NULL ||
	                       cJSON_AddNumberToObject(o, "events_found", (double)found) == NULL ||
	                       cJSON_AddNumberToObject(o, "applied", (double)applied) == NULL ||
	                       cJSON_AddNumberToObject(o, "would_apply", (double)would) == NULL ||
	                       cJSON_AddNumberToObject(o, "already_known", (double)known) == NULL ||
	                       cJSON_AddNumberToObject(o, "refused", (double)refused) == NULL ||
	                       cJSON_AddNumberToObject(o, "failed", (double)failed) == NULL
	               ? -1
	               : 0;
}

/* Adds key: s, or null for NULL. */
static int reconcile_json_string(cJSON *o, const char *key, const char *s)
{
	return (s != NULL ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)) ==
	                       NULL
	               ? -1
	               : 0;
}

static cJSON *reconcile_json_instance(const struct reconcile_instance *in)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *items;
	size_t j;

	if (o == NULL || reconcile_json_string(o, "provider", in->rn_name) < 0 ||
	    reconcile_json_string(o, "type", in->rn_type) < 0 ||
	    reconcile_json_string(o, "mode", reconcile_mode_name(in->rn_mode)) < 0 ||
	    reconcile_json_string(o, "not_asked",
	                          in->rn_mode == PROVIDER_RECONCILE_NONE ? in->rn_why : NULL) < 0 ||
	    reconcile_json_counts(o, in->rn_orders_checked, in->rn_events_found, in->rn_applied,
	                          in->rn_would_apply, in->rn_known, in->rn_refused,
	                          in->rn_failed) < 0 ||
	    cJSON_AddNumberToObject(o, "requests", (double)in->rn_requests) == NULL ||
	    cJSON_AddNumberToObject(o, "pages", (double)in->rn_pages) == NULL ||
	    cJSON_AddNumberToObject(o, "bytes", (double)in->rn_bytes) == NULL ||
	    cJSON_AddNumberToObject(o, "events_held_max", (double)in->rn_held_max) == NULL ||
	    cJSON_AddNumberToObject(o, "items_dropped", (double)in->rn_items_dropped) == NULL) {
		goto fail;
	}
	items = cJSON_AddArrayToObject(o, "items");
	if (items == NULL) {
		goto fail;
	}
	for (j = 0; j < in->rn_n_items; j++) {
		const struct reconcile_item *it = &in->rn_items[j];
		cJSON *e = cJSON_CreateObject();

		if (e == NULL || !cJSON_AddItemToArray(items, e) ||
		    reconcile_json_string(e, "result", reconcile_result_name(it->ri_result)) < 0 ||
		    reconcile_json_string(e, "order", it->ri_order) < 0 ||
		    reconcile_json_string(e, "key", it->ri_key) < 0 ||
		    reconcile_json_string(e, "type", it->ri_type) < 0 ||
		    reconcile_json_string(e, "kind", it->ri_kind) < 0 ||
		    reconcile_json_string(e, "effect", it->ri_effect) < 0 ||
		    reconcile_json_string(e, "detail", it->ri_detail) < 0) {
			goto fail;
		}
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

int reconcile_format_json(const struct reconcile_report *r, struct buf *out)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *list;
	cJSON *total;
	char since[32];
	char until[32];
	char *text = NULL;
	size_t i;
	int rc = -1;

	reconcile_time(r->rr_since_ms, since);
	reconcile_time(r->rr_until_ms, until);
	if (root == NULL || cJSON_AddBoolToObject(root, "dry_run", r->rr_dry_run) == NULL ||
	    cJSON_AddStringToObject(root, "since", since) == NULL ||
	    cJSON_AddStringToObject(root, "until", until) == NULL) {
		goto done;
	}
	list = cJSON_AddArrayToObject(root, "providers");
	if (list == NULL) {
		goto done;
	}
	for (i = 0; i < r->rr_n; i++) {
		cJSON *o = reconcile_json_instance(&r->rr_instances[i]);

		if (o == NULL || !cJSON_AddItemToArray(list, o)) {
			cJSON_Delete(o);
			goto done;
		}
	}
	total = cJSON_AddObjectToObject(root, "total");
	if (total == NULL || reconcile_json_counts(total, r->rr_orders_checked, r->rr_events_found,
	                                           r->rr_applied, r->rr_would_apply, r->rr_known,
	                                           r->rr_refused, r->rr_failed) < 0) {
		goto done;
	}
	text = cJSON_Print(root);
	if (text == NULL || buf_puts(out, text) < 0 || buf_puts(out, "\n") < 0) {
		goto done;
	}
	rc = 0;
done:
	free(text);
	cJSON_Delete(root);
	return rc;
}

/* ---- the daemon's worker ---- */

struct reconcile_worker {
	const struct env *rw_env;
	pthread_t rw_thread;
	pthread_mutex_t rw_lock;
	pthread_cond_t rw_cond;          /* CLOCK_MONOTONIC */
	struct reconcile_marks rw_marks; /* the worker thread's own */
	/* under rw_lock */
	int rw_stop;
	int rw_kick;           /* the interval changed: look again */
	int64_t rw_interval_s; /* [reconcile] interval of the current config; 0 = off */
};

static int64_t reconcile_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until the monotonic deadline_ms (< 0: none), a stop or, with
 * kickable, a changed interval. Returns 1 when stopping. */
static int reconcile_wait(struct reconcile_worker *w, int64_t deadline_ms, int kickable)
{
	struct timespec ts;
	int stop;

	ts.tv_sec = (time_t)(deadline_ms / 1000);
	ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
	pthread_mutex_lock(&w->rw_lock);
	while (!w->rw_stop && !(kickable && w->rw_kick)) {
		if (deadline_ms < 0) {
			pthread_cond_wait(&w->rw_cond, &w->rw_lock);
		} else if (pthread_cond_timedwait(&w->rw_cond, &w->rw_lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	if (kickable) {
		w->rw_kick = 0;
	}
	stop = w->rw_stop;
	pthread_mutex_unlock(&w->rw_lock);
	return stop;
}

/* ro_sleep: backoff inside a run, cut short by a stop (not by a reload). */
static int reconcile_worker_sleep(void *arg, int64_t ms)
{
	struct reconcile_worker *w = arg;

	return reconcile_wait(w, reconcile_monotonic_ms() + ms, 0);
}

static void reconcile_worker_pass(struct reconcile_worker *w)
{
	const struct env *env = w->rw_env;
	struct reconcile_options opt;
	struct reconcile_report rep;
	struct config *cf;
	int locked;

	memset(&opt, 0, sizeof(opt));
	opt.ro_older_than_s = -1;
	opt.ro_sleep = reconcile_worker_sleep;
	opt.ro_sleep_arg = w;
	opt.ro_marks = &w->rw_marks;
	/* Receivers sharing a database ask the providers one at a time. */
	locked = store_try_lock(env->env_store, "reconcile");
	if (locked == 0) {
		log_debug("reconcile: another receiver is reconciling; this pass is skipped");
		return;
	}
	/* A server without advisory locks (-1): the pass runs anyway; what it
	 * finds is claimed like a callback, so several at once only repeat
	 * questions. */
	/* The config is held for the run: its providers' keys are in it. A
	 * reload swaps in a new one meanwhile; this run finishes on its own. */
	cf = env_config_acquire(env);
	if (reconcile_run(env->env_store, cf, &opt, &rep) == 0) {
		if (rep.rr_applied > 0) {
			env_outbox_kick(env);
		}
		reconcile_report_finish(&rep);
	} else {
		metrics_reconcile_run(0);
	}
	env_config_release(env, cf);
	if (locked > 0) {
		store_unlock(env->env_store, "reconcile");
	}
}

static int64_t reconcile_interval_of(const struct config *cf)
{
	struct reconcile_conf rc;

	return reconcile_conf_load(cf, &rc) == 0 ? rc.rc_interval_s : 0;
}

static void reconcile_log_interval(int64_t interval)
{
	if (interval == 0) {
		log_info("reconcile: periodic reconciliation off ([reconcile] interval = 0)");
	} else {
		log_info("reconcile: asking the providers every %" PRId64 " s", interval);
	}
}

static void *reconcile_worker_main(void *arg)
{
	struct reconcile_worker *w = arg;
	int64_t last = reconcile_monotonic_ms();
	int64_t interval;

	pthread_setname_np(pthread_self(), "reconcile"); /* top -H, perf */

	for (;;) {
		pthread_mutex_lock(&w->rw_lock);
		interval = w->rw_interval_s;
		pthread_mutex_unlock(&w->rw_lock);
		if (interval > 0 && reconcile_monotonic_ms() >= last + interval * 1000) {
			reconcile_worker_pass(w);
			last = reconcile_monotonic_ms();
			continue;
		}
		if (reconcile_wait(w, interval > 0 ? last + interval * 1000 : -1, 1)) {
			break;
		}
	}
	return NULL;
}

struct reconcile_worker *reconcile_worker_start(const struct env *env)
{
	struct reconcile_worker *w;
	struct reconcile_conf conf;
	pthread_condattr_t ca;
	struct config *cf;
	int rc;

	cf = env_config_acquire(env);
	rc = reconcile_conf_load(cf, &conf);
	env_config_release(env, cf);
	if (rc < 0) {
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		log_err("reconcile: out of memory");
		return NULL;
	}
	w->rw_env = env;
	w->rw_interval_s = conf.rc_interval_s;
	pthread_mutex_init(&w->rw_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->rw_cond, &ca);
	pthread_condattr_destroy(&ca);
	/* The thread runs even while the interval is 0, so a reload can turn
	 * reconciliation on. */
	rc = pthread_create(&w->rw_thread, NULL, reconcile_worker_main, w);
	if (rc != 0) {
		log_err("reconcile: cannot start the worker thread: %s", strerror(rc));
		pthread_cond_destroy(&w->rw_cond);
		pthread_mutex_destroy(&w->rw_lock);
		free(w);
		return NULL;
	}
	reconcile_log_interval(conf.rc_interval_s);
	return w;
}

void reconcile_worker_reload(struct reconcile_worker *w)
{
	struct config *cf;
	int64_t interval;
	int changed;

	if (w == NULL) {
		return;
	}
	cf = env_config_acquire(w->rw_env);
	interval = reconcile_interval_of(cf);
	env_config_release(w->rw_env, cf);
	pthread_mutex_lock(&w->rw_lock);
	changed = interval != w->rw_interval_s;
	w->rw_interval_s = interval;
	w->rw_kick = 1;
	pthread_cond_broadcast(&w->rw_cond);
	pthread_mutex_unlock(&w->rw_lock);
	if (changed) {
		reconcile_log_interval(interval);
	}
}

void reconcile_worker_stop(struct reconcile_worker *w)
{
	if (w == NULL) {
		return;
	}
	pthread_mutex_lock(&w->rw_lock);
	w->rw_stop = 1;
	pthread_cond_broadcast(&w->rw_cond);
	pthread_mutex_unlock(&w->rw_lock);
	pthread_join(w->rw_thread, NULL);
	pthread_cond_destroy(&w->rw_cond);
	pthread_mutex_destroy(&w->rw_lock);
	free(w);
}
