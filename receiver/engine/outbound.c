/* outbound.c: the outbox delivery worker: one thread driving the HTTP client's concurrent
 * transfers (httpc multi). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "env.h"
#include "buf.h"
#include "build_config.h"
#include "crypto.h"
#include "httpc.h"
#include "log.h"
#include "metrics.h"
#include "orders.h"
#include "outbound.h"
#include "outbox.h"

#define OUTBOUND_USER_AGENT "idemhook/" IDEMHOOK_VERSION
#define OUTBOUND_HEADER_MAX 4096 /* bytes of one request header line we build */
#define OUTBOUND_STOP_TICK_MS 50 /* poll interval while draining at shutdown */
#define OUTBOUND_RECORD_RETRY_MS 500      /* between tries to record an outcome the store refused */
#define OUTBOUND_RECORD_MARGIN_MS 5000    /* given up that long before the lease runs out */
#define OUTBOUND_UNRECORDED_ERROR_MAX 400 /* bytes of the history line of an outcome given up */

struct outbound_xfer {
	struct outbox_row ox_row;
	int64_t ox_started_ms; /* when the transfer began: the attempt's latency */
	struct outbound_xfer *ox_next; /* running, in ob_xfers; or in ob_unrecorded */
	/* An outcome the store refused to record, kept (with its own copies
	 * of the answer) to be written again: the peer's answer is not lost
	 * to a full disk or a lock held a while. */
	struct outbox_result ox_res;
	char *ox_res_body;
	char *ox_res_error;
	char *ox_res_location;
	uint64_t ox_rnd;
	int64_t ox_give_up_ms; /* then released instead, before its lease runs out */
	int64_t ox_kept_ms;    /* when the store first refused the outcome */
	unsigned ox_tries;
	unsigned ox_backs_refused; /* give-backs the store refused too: later ones log at debug */
};

struct outbound {
	struct store *ob_store;
	struct outbox_conf ob_conf;
	struct orders_conf ob_orders;
	struct outbound_clock ob_clock;
	struct httpc_multi *ob_multi;
	pthread_t ob_thread;
	int ob_thread_started;
	pthread_mutex_t ob_lock; /* ob_stop, ob_kicked, ob_next_*; ob_conf's swap */
	int ob_stop;
	int ob_kicked;
	int ob_has_next;                 /* a reload handed over ob_next_conf */
	struct outbox_conf ob_next_conf; /* taken by the worker between transfers */
	struct orders_conf ob_next_orders;
	int64_t ob_grace_ms;
	struct outbound_xfer *ob_xfers; /* running transfers */
	size_t ob_n_xfers;
	struct outbound_xfer *ob_unrecorded; /* ended, their outcome not written yet */
	size_t ob_n_unrecorded;
	int64_t ob_record_next_ms; /* when to try writing them again */
	/* What ob_unrecorded holds, for other threads (the console), under
	 * ob_lock: the worker alone walks ob_unrecorded. */
	struct outbound_kept *ob_kept;
	size_t ob_n_kept;
	size_t ob_cap; /* entries of the scratch arrays below: the largest concurrency yet */
	struct outbox_row *ob_lease_rows;   /* scratch for outbox_lease */
	struct outbox_attempt *ob_attempts; /* scratch for outbound_harvest */
	struct outbound_xfer **ob_done;
	struct httpc_response *ob_resps; /* answers of ob_done */
	char (*ob_errs)[HTTPC_ERR_MAX];  /* and their errors */
	/* The outbound_tls_kinds warned about since the configuration was
	 * taken, one bit per enum httpc_failure. */
	unsigned ob_tls_warned;
};

static int64_t outbound_real_now(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t outbound_real_random(void *arg)
{
	uint64_t v = 0;

	(void)arg;
	if (crypto_random(&v, sizeof(v)) < 0) {
		v = (uint64_t)outbound_real_now(NULL) * 6364136223846793005ULL;
	}
	return v;
}

static int64_t outbound_now(const struct outbound *ob)
{
	return ob->ob_clock.ock_now_ms(ob->ob_clock.ock_arg);
}

static void outbound_xfer_destroy(struct outbound_xfer *x)
{
	if (x == NULL) {
		return;
	}
	outbox_row_finish(&x->ox_row);
	free(x->ox_res_body);
	free(x->ox_res_error);
	free(x->ox_res_location);
	free(x);
}

/* The request headers of a row's attempt. */
static int outbound_headers(struct outbound *ob, const struct outbox_row *r,
                            struct httpc_headers *h)
{
	httpc_headers_add(h, "Content-Type", r->or_content_type);
	httpc_headers_add(h, "Idempotency-Key", r->or_idem_key);
	httpc_headers_add(h, "User-Agent", OUTBOUND_USER_AGENT);
	if (strcmp(r->or_call_type, OUTBOX_REFUND_CALL) == 0) {
		struct buf auth;
		int rc;

		if (ob->ob_conf.oc_refund_key == NULL) {
			return h->hch_overflow ? -1 : 0; /* the provider will answer 401: the row
			                                    dies, an operator is flagged */
		}
		buf_init(&auth, OUTBOUND_HEADER_MAX);
		rc = buf_printf(&auth, "Bearer %s", ob->ob_conf.oc_refund_key);
		if (rc == 0) {
			httpc_headers_add(h, "Authorization", auth.buf_data);
		}
		memset(auth.buf_data, 0, auth.buf_len);
		buf_finish(&auth);
		return rc < 0 || h->hch_overflow ? -1 : 0;
	}
	if (ob->ob_conf.oc_signing_key != NULL) {
		int64_t ts = outbound_now(ob) / 1000;
		char ts_text[24];
		char *sig = NULL;

		if (outbox_sign(ob->ob_conf.oc_signing_key, ob->ob_conf.oc_signing_key_len,
		                r->or_idem_key, ts, r->or_body, r->or_body_len, &sig) < 0) {
			return -1;
		}
		snprintf(ts_text, sizeof(ts_text), "%" PRId64, ts);
		httpc_headers_add(h, "webhook-id", r->or_idem_key);
		httpc_headers_add(h, "webhook-timestamp", ts_text);
		httpc_headers_add(h, "webhook-signature", sig);
		free(sig);
	}
	return h->hch_overflow ? -1 : 0;
}

/* Wipes the header values (an Authorization may be among them), then frees. */
static void outbound_headers_finish(struct httpc_headers *h)
{
	size_t i;

	for (i = 0; i < h->hch_n; i++) {
		char *v = (char *)h->hch_v[i].hh_value;

		memset(v, 0, strlen(v));
	}
	httpc_headers_finish(h);
}

/* Starts the transfer of a leased row; takes the row over (also on failure). */
static int outbound_begin(struct outbound *ob, struct outbox_row *row)
{
	struct outbound_xfer *x = calloc(1, sizeof(*x));
	const struct outbox_conf *oc = &ob->ob_conf;
	struct httpc_request req;
	struct httpc_headers h;
	int rc;

	if (x == NULL) {
		outbox_row_finish(row);
		return -1;
	}
	x->ox_row = *row;
	x->ox_started_ms = outbound_now(ob);
	memset(row, 0, sizeof(*row));
	httpc_headers_init(&h);
	memset(&req, 0, sizeof(req));
	req.hcq_method = "POST";
	req.hcq_url = x->ox_row.or_url;
	req.hcq_headers = &h;
	req.hcq_body = x->ox_row.or_body;
	req.hcq_body_len = x->ox_row.or_body_len;
	req.hcq_response_max = oc->oc_response_max;
	req.hcq_connect_timeout_ms = (unsigned)oc->oc_connect_timeout_ms;
	req.hcq_timeout_ms = (unsigned)oc->oc_timeout_ms;
	req.hcq_ca_file = oc->oc_ca_file;
	rc = outbound_headers(ob, &x->ox_row, &h);
	if (rc == 0) {
		rc = httpc_multi_add(ob->ob_multi, &req, x);
	}
	outbound_headers_finish(&h);
	if (rc < 0) {
		/* Not sent: the lease is given back so the row is not stuck until it expires. */
		outbox_release(ob->ob_store, &x->ox_row, NULL, outbound_now(ob));
		outbound_xfer_destroy(x);
		return -1;
	}
	x->ox_next = ob->ob_xfers;
	ob->ob_xfers = x;
	ob->ob_n_xfers++;
	log_debug("outbound: row %" PRId64 " attempt %u started", x->ox_row.or_id,
	          x->ox_row.or_attempts);
	return 0;
}

static void outbound_forget(struct outbound *ob, struct outbound_xfer *x)
{
	struct outbound_xfer **p;

	for (p = &ob->ob_xfers; *p != NULL; p = &(*p)->ox_next) {
		if (*p == x) {
			*p = x->ox_next;
			ob->ob_n_xfers--;
			break;
		}
	}
	outbound_xfer_destroy(x);
}

/* The outcomes kept in memory, for /metrics and outbound_outcome_kept:
 * their rows show 'delivering' meanwhile, as if the call were still in
 * flight. Out of memory, the console is told of fewer. */
static void outbound_unrecorded_count(struct outbound *ob)
{
	const struct outbound_xfer *x;
	struct outbound_kept *k = NULL;
	size_t n = 0;

	metrics_set_outbox_unrecorded((int64_t)ob->ob_n_unrecorded);
	if (ob->ob_n_unrecorded > 0) {
		k = calloc(ob->ob_n_unrecorded, sizeof(*k));
	}
	for (x = ob->ob_unrecorded; k != NULL && x != NULL && n < ob->ob_n_unrecorded;
	     x = x->ox_next) {
		k[n].okp_id = x->ox_row.or_id;
		k[n].okp_attempt = x->ox_row.or_attempts;
		k[n].okp_http_status = x->ox_res.ors_http_status;
		n++;
	}
	pthread_mutex_lock(&ob->ob_lock);
	free(ob->ob_kept);
	ob->ob_kept = k;
	ob->ob_n_kept = n;
	pthread_mutex_unlock(&ob->ob_lock);
}

int outbound_outcome_kept(struct outbound *ob, int64_t row_id, struct outbound_kept *ret)
{
	int found = 0;
	size_t i;

	if (ob == NULL) {
		return 0;
	}
	pthread_mutex_lock(&ob->ob_lock);
	for (i = 0; i < ob->ob_n_kept && !found; i++) {
		if (ob->ob_kept[i].okp_id == row_id) {
			*ret = ob->ob_kept[i];
			found = 1;
		}
	}
	pthread_mutex_unlock(&ob->ob_lock);
	return found;
}

static char *outbound_copy(const char *s, size_t len)
{
	char *c = malloc(len + 1);

	if (c != NULL) {
		memcpy(c, s, len);
		c[len] = '\0';
	}
	return c;
}

/* The warning of an outcome kept at its first refusal: when the row is
 * given back instead, if the store still refuses it. That is the next try
 * when the give-back time (the lease less its margin) has passed already:
 * a lease shorter than the margin, or a write that waited long for the
 * lock. */
static void outbound_keep_warn(struct outbound *ob, const struct outbound_xfer *x)
{
	int64_t now = outbound_now(ob);
	char when[96];

	if (x->ox_give_up_ms > now + OUTBOUND_RECORD_RETRY_MS) {
		snprintf(when, sizeof(when), "in %" PRId64 " s",
		         (x->ox_give_up_ms - now + 999) / 1000);
	} else {
		snprintf(when, sizeof(when),
		         "at the next try, in %d ms (its lease leaves no time to wait longer),",
		         OUTBOUND_RECORD_RETRY_MS);
	}
	log_warn("outbound: row %" PRId64 ": the outcome of attempt %u (%s %ld) could not be "
	         "recorded; kept, written again every %d ms (the row shows delivering "
	         "meanwhile; idemhook_outbox_outcomes_unrecorded counts it); if the database "
	         "still refuses it %s or when the daemon stops, the row is given back, not "
	         "counted, and the call sent again with the same key",
	         x->ox_row.or_id, x->ox_row.or_attempts,
	         x->ox_res.ors_http_status != 0 ? "HTTP" : "status", x->ox_res.ors_http_status,
	         OUTBOUND_RECORD_RETRY_MS, when);
}

/* Moves running transfer x, whose outcome a (borrowing the response) the
 * store refused to record, to ob_unrecorded, with its own copy of the
 * outcome. Out of memory, the answer's body and texts are left out. */
static void outbound_keep(struct outbound *ob, struct outbound_xfer *x,
                          const struct outbox_attempt *a)
{
	const struct outbox_result *res = &a->oa_res;
	struct outbound_xfer **p;

	for (p = &ob->ob_xfers; *p != NULL; p = &(*p)->ox_next) {
		if (*p == x) {
			*p = x->ox_next;
			ob->ob_n_xfers--;
			break;
		}
	}
	x->ox_res = *res;
	x->ox_res.ors_body = NULL;
	x->ox_res.ors_body_len = 0;
	x->ox_res.ors_error = NULL;
	x->ox_res.ors_location = NULL;
	if (res->ors_body != NULL) {
		x->ox_res_body = outbound_copy(res->ors_body, res->ors_body_len);
		x->ox_res.ors_body = x->ox_res_body;
		x->ox_res.ors_body_len = x->ox_res_body != NULL ? res->ors_body_len : 0;
	}
	if (res->ors_error != NULL) {
		x->ox_res_error = outbound_copy(res->ors_error, strlen(res->ors_error));
		x->ox_res.ors_error = x->ox_res_error;
	}
	if (res->ors_location != NULL) {
		x->ox_res_location = outbound_copy(res->ors_location, strlen(res->ors_location));
		x->ox_res.ors_location = x->ox_res_location;
	}
	x->ox_rnd = a->oa_rnd;
	x->ox_tries = 1;
	x->ox_kept_ms = outbound_now(ob);
	/* The lease began about when the transfer did: a take-over after it
	 * would send the call again while its outcome waits here. */
	x->ox_give_up_ms = x->ox_started_ms + ob->ob_conf.oc_lease_ms - OUTBOUND_RECORD_MARGIN_MS;
	outbound_keep_warn(ob, x);
	x->ox_next = ob->ob_unrecorded;
	ob->ob_unrecorded = x;
	ob->ob_n_unrecorded++;
	ob->ob_record_next_ms = outbound_now(ob) + OUTBOUND_RECORD_RETRY_MS;
	outbound_unrecorded_count(ob);
}

/* Row x's outcome res found the row's lease moved on: its lease ran out
 * and another holder took the row over (another receiver on the same
 * database, or an operator's outbox retry), so nothing of it was written.
 * Said as a warning: the row's history shows the call as interrupted,
 * not with this answer, and the new holder calls the peer again with the
 * same key. */
static void outbound_overtaken(const struct outbound_xfer *x, const struct outbox_result *res)
{
	log_warn("outbound: row %" PRId64 ": the outcome of attempt %u (%s %ld) was not recorded: "
	         "the row's lease ran out and it was taken over (by another receiver, or an "
	         "operator's retry); its history shows this call as interrupted, and the row's "
	         "holder now calls again with the same key",
	         x->ox_row.or_id, x->ox_row.or_attempts,
	         res->ors_http_status != 0 ? "HTTP" : "status", res->ors_http_status);
}

/* Gives the row of kept outcome x back (not counted), its attempt in the
 * history as an answer that came but could not be recorded, so that the
 * call is sent again with the same key. Returns 0, or -1 when the store
 * refused that too: at the stop (last) the outcome is lost, said in the
 * log; while running the caller keeps it and tries again. */
static int outbound_give_up(struct outbound *ob, struct outbound_xfer *x, const char *when,
                            int last)
{
	char line[OUTBOUND_UNRECORDED_ERROR_MAX];
	struct outbox_result res = x->ox_res;
	enum log_level level;
	int rc;

	if (x->ox_res.ors_http_status != 0) {
		snprintf(line, sizeof(line),
		         "outcome not recorded: the peer answered HTTP %ld, but the database "
		         "refused "
		         "to record it %s (see the log); sent again " OUTBOX_UNCOUNTED_MARK,
		         x->ox_res.ors_http_status, when);
	} else {
		snprintf(line, sizeof(line),
		         "outcome not recorded: %s; the database refused to record it %s (see the "
		         "log); sent again " OUTBOX_UNCOUNTED_MARK,
		         x->ox_res.ors_error != NULL ? x->ox_res.ors_error : "no answer", when);
	}
	res.ors_http_status = 0;
	res.ors_error = line;
	res.ors_location = NULL;
	/* Said before the write, which may wait for the lock as long as the
	 * store's busy timeout: the log tells what is being done meanwhile.
	 * In a long outage this repeats every OUTBOUND_RECORD_RETRY_MS: only
	 * the first time is a warning (the stop's last try always is). */
	level = x->ox_backs_refused > 0 && !last ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARNING;
	log_msg(level,
	        "outbound: row %" PRId64 ": the outcome of attempt %u (%s %ld) still could not "
	        "be recorded %s (%u tries); giving the row back, not counted, so that the call "
	        "is sent again with the same key",
	        x->ox_row.or_id, x->ox_row.or_attempts,
	        x->ox_res.ors_http_status != 0 ? "HTTP" : "status", x->ox_res.ors_http_status, when,
	        x->ox_tries);
	rc = outbox_release(ob->ob_store, &x->ox_row, &res, outbound_now(ob));
	if (rc == 1) {
		outbound_overtaken(x, &x->ox_res);
	}
	if (rc < 0) {
		if (!last) {
			/* Kept as at the first refusal: the next try records the
			 * outcome, or gives the row back, whichever the store takes
			 * first; a row taken over meanwhile refuses both (its lease
			 * token moved on), and is not touched. */
			log_msg(level,
			        "outbound: row %" PRId64 ": the outcome of attempt %u (%s %ld) "
			        "could not be given back either; kept, tried again in %d ms%s",
			        x->ox_row.or_id, x->ox_row.or_attempts,
			        x->ox_res.ors_http_status != 0 ? "HTTP" : "status",
			        x->ox_res.ors_http_status, OUTBOUND_RECORD_RETRY_MS,
			        x->ox_backs_refused == 0
			                ? " (the tries after this one are logged at debug level; a "
			                  "notice says when the outcome is recorded or the row "
			                  "given "
			                  "back)"
			                : "");
			x->ox_backs_refused++;
			return -1;
		}
		log_err("outbound: row %" PRId64 ": the outcome of attempt %u (%s %ld) is lost: "
		        "the database refused it %u time(s); the row is sent again with the same "
		        "key once its lease runs out or at the next start",
		        x->ox_row.or_id, x->ox_row.or_attempts,
		        x->ox_res.ors_http_status != 0 ? "HTTP" : "status",
		        x->ox_res.ors_http_status, x->ox_tries);
		return -1;
	}
	log_notice("outbound: row %" PRId64 ": given back, its history says the outcome of "
	           "attempt %u was not recorded (try %u, %" PRId64 " ms after the store first "
	           "refused it)",
	           x->ox_row.or_id, x->ox_row.or_attempts, x->ox_tries,
	           outbound_now(ob) - x->ox_kept_ms);
	return 0;
}

/* Writes the kept outcomes again (all when force, else when due); those
 * still refused stay, unless their lease is about to run out (or force
 * and last: the stop), then they are given back. */
static void outbound_record_kept(struct outbound *ob, int64_t now, int last)
{
	struct outbox_attempt *done = ob->ob_attempts;
	struct outbound_xfer *keep = NULL;
	struct outbound_xfer *x;
	size_t n = 0;
	size_t i;

	if (ob->ob_unrecorded == NULL || (!last && now < ob->ob_record_next_ms)) {
		return;
	}
	/* ob_attempts holds ob_cap entries: the rest wait for the next round. */
	for (x = ob->ob_unrecorded; x != NULL && n < ob->ob_cap; x = x->ox_next) {
		memset(&done[n], 0, sizeof(done[n]));
		done[n].oa_row = &x->ox_row;
		done[n].oa_res = x->ox_res;
		done[n].oa_rnd = x->ox_rnd;
		ob->ob_done[n] = x;
		n++;
	}
	outbox_complete_many(ob->ob_store, &ob->ob_conf, &ob->ob_orders, done, n, now);
	for (i = 0; i < n; i++) {
		x = ob->ob_done[i];
		x->ox_tries++;
		if (done[i].oa_unrecorded && !last && now < x->ox_give_up_ms) {
			continue;
		}
		if (done[i].oa_unrecorded &&
		    outbound_give_up(ob, x, last ? "before the stop" : "before its lease ran out",
		                     last) < 0 &&
		    !last) {
			continue;
		}
		if (done[i].oa_overtaken) {
			outbound_overtaken(x, &done[i].oa_res);
		} else if (!done[i].oa_unrecorded) {
			log_notice("outbound: row %" PRId64
			           ": the outcome of attempt %u recorded at "
			           "try %u, %" PRId64 " ms after the store first refused it",
			           x->ox_row.or_id, x->ox_row.or_attempts, x->ox_tries,
			           now - x->ox_kept_ms);
		}
		x->ox_tries = 0; /* marks it done below */
	}
	while (ob->ob_unrecorded != NULL) {
		x = ob->ob_unrecorded;
		ob->ob_unrecorded = x->ox_next;
		if (x->ox_tries == 0) {
			ob->ob_n_unrecorded--;
			outbound_xfer_destroy(x);
		} else {
			x->ox_next = keep;
			keep = x;
		}
	}
	ob->ob_unrecorded = keep;
	ob->ob_record_next_ms = now + OUTBOUND_RECORD_RETRY_MS;
	outbound_unrecorded_count(ob);
}

/* The TLS failures that are a configuration matter, not an outage:
 * libcurl's message alone does not say so, nor what to do. Each row's
 * error is rewritten to say it (libcurl's message after it, in
 * parentheses), and each kind is warned once per configuration (each
 * attempt's line follows at info level). The row keeps its retry
 * schedule: a reload that fixes the cause applies at its next lease,
 * without an operator's retry (and a peer may fix its certificate). */
struct outbound_tls {
	enum httpc_failure ot_failure;
	const char *ot_row;      /* the row's error, before libcurl's message */
	const char *ot_headline; /* the warning: what happened, then libcurl's message */
	const char *ot_advice;   /* and what to do */
};

static const struct outbound_tls outbound_tls_kinds[] = {
        {HTTPC_FAILURE_TLS_PLAIN, "the server does not speak TLS: use http://",
         /* The URL is not logged: it may carry a token in its query. */
         "its https:// URL points at a port that answers in plain HTTP, not TLS",
         "a configuration error; use http:// (or the TLS port) in [outbound] and reload"},
        {HTTPC_FAILURE_TLS_VERIFY,
         "the peer's certificate is not trusted: set [outbound] ca_file to the CA that issued "
         "it, or fix the peer",
         "the peer's certificate is not trusted",
         "a configuration matter, not an outage; set ca_file in [outbound] (or [client]) to a "
         "PEM file of the CA that issued it and reload, or have the peer fix its certificate "
         "(its host name, its dates)"},
        {HTTPC_FAILURE_TLS_CA_FILE,
         "the CA file cannot be used: fix it, or set [outbound] ca_file to a PEM file of CAs, "
         "and reload",
         "the CA file to verify peers with cannot be used",
         "a configuration error, not an outage, and not the peer's: the file is missing, "
         "unreadable or holds no PEM certificate; fix it, or set ca_file in [outbound] (or "
         "[client]) to a PEM file of CAs, and reload"},
};

/* Row r's call failed with failure f: when f is one of outbound_tls_kinds,
 * rewrites err and warns as that kind says. */
static void outbound_tls_failure(struct outbound *ob, const struct outbox_row *r,
                                 enum httpc_failure f, char err[HTTPC_ERR_MAX])
{
	const struct outbound_tls *k = NULL;
	char why[HTTPC_ERR_MAX];
	size_t i;

	for (i = 0; i < sizeof(outbound_tls_kinds) / sizeof(outbound_tls_kinds[0]); i++) {
		if (outbound_tls_kinds[i].ot_failure == f) {
			k = &outbound_tls_kinds[i];
		}
	}
	if (k == NULL) {
		return;
	}
	snprintf(why, sizeof(why), "%s", err);
	/* within the row's error, cut where no UTF-8 sequence is split */
	snprintf(err, HTTPC_ERR_MAX, "%s (%.*s)", k->ot_row, (int)httpc_utf8_prefix(why, 120), why);
	if (ob->ob_tls_warned & (1u << f)) {
		return;
	}
	ob->ob_tls_warned |= 1u << f;
	log_warn("outbound: row %" PRId64 " (%s): %s (%s): %s; the row is retried with backoff "
	         "meanwhile (said once until a reload)",
	         r->or_id, r->or_call_type, k->ot_headline, why, k->ot_advice);
}

/* Records every finished transfer, all in one unit of work. Returns how
 * many finished. */
static size_t outbound_harvest(struct outbound *ob)
{
	struct outbox_attempt *done = ob->ob_attempts;
	struct outbound_xfer **xs = ob->ob_done;
	size_t n = 0;
	size_t i;

	while (n < ob->ob_cap) {
		struct outbox_result *res = &done[n].oa_res;
		struct httpc_response *resp = &ob->ob_resps[n];
		const char *retry_after;
		void *arg = NULL;
		int64_t ms;

		if (httpc_multi_done(ob->ob_multi, &arg, resp, ob->ob_errs[n], HTTPC_ERR_MAX) ==
		    0) {
			break;
		}
		xs[n] = arg;
		memset(res, 0, sizeof(*res));
		res->ors_retry_after_ms = -1;
		/* Status 0 also when a status line came but the rest did not: the
		 * answer is incomplete, and a repeat is deduplicated. */
		res->ors_http_status = resp->hcr_status;
		if (resp->hcr_status == 0) {
			outbound_tls_failure(ob, &xs[n]->ox_row, resp->hcr_failure, ob->ob_errs[n]);
			res->ors_error = ob->ob_errs[n];
		}
		if (resp->hcr_status >= 300 && resp->hcr_status < 400) {
			res->ors_location = httpc_response_header(resp, "Location");
		}
		retry_after = httpc_response_header(resp, "Retry-After");
		if (retry_after != NULL &&
		    outbox_retry_after_ms(retry_after, outbound_now(ob), &ms) == 0) {
			res->ors_retry_after_ms = ms;
		}
		res->ors_body = resp->hcr_body;
		res->ors_body_len = resp->hcr_body_len;
		res->ors_latency_ms = outbound_now(ob) - xs[n]->ox_started_ms;
		if (resp->hcr_truncated) {
			log_notice("outbound: row %" PRId64 ": response cut at %zu bytes",
			           xs[n]->ox_row.or_id, ob->ob_conf.oc_response_max);
		}
		done[n].oa_row = &xs[n]->ox_row;
		done[n].oa_rnd = ob->ob_clock.ock_random(ob->ob_clock.ock_arg);
		n++;
	}
	if (n > 0) {
		outbox_complete_many(ob->ob_store, &ob->ob_conf, &ob->ob_orders, done, n,
		                     outbound_now(ob));
	}
	for (i = 0; i < n; i++) {
		if (done[i].oa_unrecorded) {
			outbound_keep(ob, xs[i], &done[i]);
		}
		if (done[i].oa_overtaken) {
			outbound_overtaken(xs[i], &done[i].oa_res);
		}
		httpc_response_finish(&ob->ob_resps[i]);
		if (!done[i].oa_unrecorded) {
			outbound_forget(ob, xs[i]);
		}
	}
	return n;
}

/* The ids of the rows this worker holds (running, or their outcome kept),
 * into *ret (malloc'd, NULL when none). 0 or -1. */
static int outbound_held(const struct outbound *ob, int64_t **ret, size_t *ret_n)
{
	const struct outbound_xfer *lists[] = {ob->ob_xfers, ob->ob_unrecorded};
	const struct outbound_xfer *x;
	size_t total = ob->ob_n_xfers + ob->ob_n_unrecorded;
	int64_t *ids;
	size_t n = 0;
	size_t i;

	*ret = NULL;
	*ret_n = 0;
	if (total == 0) {
		return 0;
	}
	ids = calloc(total, sizeof(*ids));
	if (ids == NULL) {
		return -1;
	}
	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		for (x = lists[i]; x != NULL && n < total; x = x->ox_next) {
			ids[n++] = x->ox_row.or_id;
		}
	}
	*ret = ids;
	*ret_n = n;
	return 0;
}

/* Leases due rows into free slots. Returns the time to look again. */
static int64_t outbound_fill(struct outbound *ob, int64_t now)
{
	size_t free_slots = ob->ob_conf.oc_concurrency - ob->ob_n_xfers;
	int64_t next = now + ob->ob_conf.oc_poll_ms;
	int64_t *held = NULL;
	size_t n_held = 0;
	int64_t due = 0;
	size_t n = 0;
	size_t i;
	int rc;

	/* A row whose outcome is kept here may be past its lease (the store
	 * refused every write for longer): it is ours still, neither due nor
	 * to be taken over and sent again. Out of memory, nothing is leased
	 * this time. */
	if (outbound_held(ob, &held, &n_held) < 0) {
		return next;
	}
	rc = outbox_next_due(ob->ob_store, now, held, n_held, &due);
	if (rc <= 0 || due > now) {
		free(held);
		return rc <= 0 || due >= next ? next : due;
	}
	log_debug("outbound: leasing up to %zu due row(s) (%zu held here)", free_slots, n_held);
	rc = outbox_lease_current(ob->ob_store, &ob->ob_conf, now, free_slots, held, n_held,
	                          ob->ob_lease_rows, &n);
	free(held);
	if (rc < 0 || n == 0) {
		return next;
	}
	for (i = 0; i < n; i++) {
		outbound_begin(ob, &ob->ob_lease_rows[i]);
	}
	/* Look again at once: outbox_next_due then says when the next row is due. */
	return now;
}

/* Makes the scratch arrays hold n entries (they never shrink: transfers
 * begun under a larger concurrency are harvested into them). 0 or -1. */
static int outbound_grow(struct outbound *ob, size_t n)
{
	size_t old = ob->ob_cap;
	void *p;

	if (n <= old) {
		return 0;
	}
	/* Each array keeps its entries when a later one cannot grow; ob_cap
	 * moves only when all did. */
	if ((p = realloc(ob->ob_lease_rows, n * sizeof(*ob->ob_lease_rows))) == NULL) {
		return -1;
	}
	ob->ob_lease_rows = p;
	memset(ob->ob_lease_rows + old, 0, (n - old) * sizeof(*ob->ob_lease_rows));
	if ((p = realloc(ob->ob_attempts, n * sizeof(*ob->ob_attempts))) == NULL) {
		return -1;
	}
	ob->ob_attempts = p;
	memset(ob->ob_attempts + old, 0, (n - old) * sizeof(*ob->ob_attempts));
	if ((p = realloc(ob->ob_done, n * sizeof(*ob->ob_done))) == NULL) {
		return -1;
	}
	ob->ob_done = p;
	memset(ob->ob_done + old, 0, (n - old) * sizeof(*ob->ob_done));
	if ((p = realloc(ob->ob_resps, n * sizeof(*ob->ob_resps))) == NULL) {
		return -1;
	}
	ob->ob_resps = p;
	memset(ob->ob_resps + old, 0, (n - old) * sizeof(*ob->ob_resps));
	if ((p = realloc(ob->ob_errs, n * sizeof(*ob->ob_errs))) == NULL) {
		return -1;
	}
	ob->ob_errs = p;
	memset(ob->ob_errs + old, 0, (n - old) * sizeof(*ob->ob_errs));
	ob->ob_cap = n;
	return 0;
}

/* Takes the settings a reload handed over (caller holds ob_lock). Transfers
 * in flight keep what they began with (URL, headers, timeouts: curl has
 * its own copies); their outcome is recorded under the new settings. */
static void outbound_take_conf(struct outbound *ob)
{
	struct outbox_conf old;

	if (!ob->ob_has_next) {
		return;
	}
	ob->ob_has_next = 0;
	if (outbound_grow(ob, ob->ob_next_conf.oc_concurrency) < 0) {
		log_err("outbound: out of memory; the worker keeps its [outbound] settings");
		outbox_conf_finish(&ob->ob_next_conf);
		return;
	}
	old = ob->ob_conf;
	ob->ob_tls_warned = 0;
	ob->ob_conf = ob->ob_next_conf;
	ob->ob_orders = ob->ob_next_orders;
	memset(&ob->ob_next_conf, 0, sizeof(ob->ob_next_conf));
	outbox_conf_finish(&old);
	if (ob->ob_conf.oc_n_calls == 0) {
		log_info("outbound: no call type configured any more: no row is leased until one "
		         "is; "
		         "%zu transfer(s) in flight finish as they began and are recorded",
		         ob->ob_n_xfers);
		return;
	}
	log_info("outbound: new [outbound] settings taken (%zu call type(s), concurrency %u); "
	         "%zu transfer(s) in flight finish as they began",
	         ob->ob_conf.oc_n_calls, ob->ob_conf.oc_concurrency, ob->ob_n_xfers);
}

static void *outbound_main(void *arg)
{
	struct outbound *ob = arg;
	int64_t next_check = 0;
	int64_t deadline = -1;

	pthread_setname_np(pthread_self(), "outbound"); /* top -H, perf */

	for (;;) {
		int64_t now = outbound_now(ob);
		int64_t wait;
		int stop;
		int kicked;
		int idle;

		pthread_mutex_lock(&ob->ob_lock);
		stop = ob->ob_stop;
		kicked = ob->ob_kicked;
		ob->ob_kicked = 0;
		if (ob->ob_has_next) {
			outbound_take_conf(ob);
			kicked = 1; /* a new concurrency or URL may let rows start now */
		}
		if (stop && deadline < 0) {
			deadline = now + ob->ob_grace_ms;
		}
		pthread_mutex_unlock(&ob->ob_lock);
		if (stop &&
		    ((ob->ob_n_xfers == 0 && ob->ob_unrecorded == NULL) || now >= deadline)) {
			break;
		}
		/* Kept outcomes first: written as soon as the store takes them. */
		outbound_record_kept(ob, now, 0);
		/* A reload removed every call type: nothing is leased until one
		 * comes back, and what is in flight finishes and is recorded. */
		idle = ob->ob_conf.oc_n_calls == 0;
		if (!stop && !idle && ob->ob_n_xfers < ob->ob_conf.oc_concurrency &&
		    (kicked || now >= next_check)) {
			next_check = outbound_fill(ob, now);
		}
		httpc_multi_perform(ob->ob_multi);
		if (outbound_harvest(ob) > 0) {
			next_check = now; /* a slot is free */
		}
		now = outbound_now(ob);
		if (stop) {
			wait = deadline - now < OUTBOUND_STOP_TICK_MS ? deadline - now
			                                              : OUTBOUND_STOP_TICK_MS;
		} else if (idle || ob->ob_n_xfers >= ob->ob_conf.oc_concurrency) {
			wait = ob->ob_conf.oc_poll_ms;
		} else {
			wait = next_check - now;
		}
		if (wait < 0) {
			wait = 0;
		}
		if (ob->ob_unrecorded != NULL && wait > ob->ob_record_next_ms - now) {
			wait = ob->ob_record_next_ms - now;
		}
		if (wait < 0) {
			wait = 0;
		}
		if (wait > ob->ob_conf.oc_poll_ms) {
			wait = ob->ob_conf.oc_poll_ms;
		}
		httpc_multi_poll(ob->ob_multi, (int)wait);
	}
	if (ob->ob_n_xfers > 0) {
		log_notice("outbound: %zu transfer(s) still running at shutdown; released for the "
		           "next start",
		           ob->ob_n_xfers);
	}
	/* Outcomes the store still refuses: one last try, else the rows are
	 * given back with what happened in their history. */
	while (ob->ob_unrecorded != NULL) {
		outbound_record_kept(ob, outbound_now(ob), 1);
	}
	while (ob->ob_xfers != NULL) {
		struct outbox_result res;
		int64_t now = outbound_now(ob);

		memset(&res, 0, sizeof(res));
		res.ors_error = "released at shutdown: no answer within the stop's grace "
		                "time " OUTBOX_UNCOUNTED_MARK;
		res.ors_retry_after_ms = -1;
		res.ors_latency_ms = now - ob->ob_xfers->ox_started_ms;
		outbox_release(ob->ob_store, &ob->ob_xfers->ox_row, &res, now);
		outbound_forget(ob, ob->ob_xfers);
	}
	return NULL;
}

static void outbound_destroy(struct outbound *ob)
{
	if (ob == NULL) {
		return;
	}
	/* Transfers still in the set belong to rows already released. */
	httpc_multi_destroy(ob->ob_multi);
	while (ob->ob_unrecorded != NULL) {
		struct outbound_xfer *x = ob->ob_unrecorded;

		ob->ob_unrecorded = x->ox_next;
		outbound_xfer_destroy(x);
	}
	if (ob->ob_n_unrecorded > 0) {
		ob->ob_n_unrecorded = 0;
		outbound_unrecorded_count(ob);
	}
	free(ob->ob_kept);
	free(ob->ob_lease_rows);
	free(ob->ob_attempts);
	free(ob->ob_done);
	free(ob->ob_resps);
	free(ob->ob_errs);
	outbox_conf_finish(&ob->ob_conf);
	outbox_conf_finish(&ob->ob_next_conf);
	pthread_mutex_destroy(&ob->ob_lock);
	free(ob);
}

struct outbound *outbound_create(struct store *st, struct outbox_conf *conf,
                                 const struct orders_conf *orc, const struct outbound_clock *clock)
{
	struct outbound *ob = calloc(1, sizeof(*ob));
	int rc;

	if (ob == NULL) {
		outbox_conf_finish(conf);
		return NULL;
	}
	ob->ob_conf = *conf;
	memset(conf, 0, sizeof(*conf));
	pthread_mutex_init(&ob->ob_lock, NULL);
	ob->ob_store = st;
	ob->ob_orders = *orc;
	if (clock != NULL) {
		ob->ob_clock = *clock;
	} else {
		ob->ob_clock.ock_now_ms = outbound_real_now;
		ob->ob_clock.ock_random = outbound_real_random;
	}
	if (outbound_grow(ob, ob->ob_conf.oc_concurrency) < 0) {
		log_err("outbound: out of memory");
		goto fail;
	}
	ob->ob_multi = httpc_multi_create();
	if (ob->ob_multi == NULL) {
		goto fail;
	}
	if (outbox_release_all(st, outbound_now(ob), NULL) < 0) {
		goto fail;
	}
	rc = pthread_create(&ob->ob_thread, NULL, outbound_main, ob);
	if (rc != 0) {
		log_err("outbound: pthread_create: %s", strerror(rc));
		goto fail;
	}
	ob->ob_thread_started = 1;
	log_info("outbound: worker started (%zu call type(s), concurrency %u)",
	         ob->ob_conf.oc_n_calls, ob->ob_conf.oc_concurrency);
	return ob;
fail:
	outbound_destroy(ob);
	return NULL;
}

/* The [outbound] section (secrets read) and [points] of env's current
 * configuration: as outbox_conf_load. */
static int outbound_load(const struct env *env, struct outbox_conf *ret_oc,
                         struct orders_conf *ret_orc)
{
	struct config *cf;
	int rc;

	cf = env_config_acquire(env);
	rc = outbox_conf_load(cf, 1, ret_oc);
	ret_orc->oc_points_num = cf->cf_points_num;
	ret_orc->oc_points_den = cf->cf_points_den;
	env_config_release(env, cf);
	return rc;
}

struct outbound *outbound_start(const struct env *env, int *ret_err)
{
	struct outbox_conf oc;
	struct orders_conf orc;
	struct outbound *ob;
	int rc;

	*ret_err = 0;
	rc = outbound_load(env, &oc, &orc);
	if (rc < 0) {
		*ret_err = 1;
		return NULL;
	}
	if (rc == 0) {
		outbox_conf_finish(&oc);
		/* No worker will lease them: rows a crash left 'delivering' are
		 * queued again all the same, or lists show them delivering for
		 * ever. A failure leaves them so (the store's line says why),
		 * the rest starts. */
		if (outbox_release_all(env->env_store, env_now_ms(env), NULL) < 0) {
			log_notice("outbound: calls a previous run left delivering stay so for now "
			           "(the line above says why); with no [outbound] nothing delivers "
			           "them, and the next start queues them again");
		}
		return NULL;
	}
	ob = outbound_create(env->env_store, &oc, &orc, NULL);
	if (ob == NULL) {
		*ret_err = 1;
	}
	return ob;
}

int outbound_conf_changed(struct outbound *ob, const struct config *cf)
{
	const struct outbox_conf *cur;
	const struct orders_conf *orc;
	struct outbox_conf oc;
	int rc;

	rc = outbox_conf_load(cf, 1, &oc);
	if (rc < 0) {
		return -1;
	}
	if (ob == NULL) {
		outbox_conf_finish(&oc);
		return rc;
	}
	/* Against what the worker was last given: it may not have taken it yet. */
	pthread_mutex_lock(&ob->ob_lock);
	cur = ob->ob_has_next ? &ob->ob_next_conf : &ob->ob_conf;
	orc = ob->ob_has_next ? &ob->ob_next_orders : &ob->ob_orders;
	rc = !outbox_conf_equal(cur, &oc) || orc->oc_points_num != cf->cf_points_num ||
	     orc->oc_points_den != cf->cf_points_den;
	pthread_mutex_unlock(&ob->ob_lock);
	outbox_conf_finish(&oc);
	return rc;
}

int outbound_reload(struct outbound *ob, const struct env *env)
{
	struct outbox_conf oc;
	struct orders_conf orc;
	int rc;

	rc = outbound_load(env, &oc, &orc);
	if (rc < 0) {
		return -1;
	}
	pthread_mutex_lock(&ob->ob_lock);
	if (ob->ob_has_next) {
		outbox_conf_finish(&ob->ob_next_conf);
	}
	ob->ob_next_conf = oc;
	ob->ob_next_orders = orc;
	ob->ob_has_next = 1;
	pthread_mutex_unlock(&ob->ob_lock);
	httpc_multi_wakeup(ob->ob_multi);
	return rc == 0 ? 1 : 0;
}

void outbound_kick(struct outbound *ob)
{
	if (ob == NULL) {
		return;
	}
	pthread_mutex_lock(&ob->ob_lock);
	ob->ob_kicked = 1;
	pthread_mutex_unlock(&ob->ob_lock);
	httpc_multi_wakeup(ob->ob_multi);
}

void outbound_stop(struct outbound *ob, int grace_ms)
{
	if (ob == NULL) {
		return;
	}
	if (ob->ob_thread_started) {
		pthread_mutex_lock(&ob->ob_lock);
		ob->ob_stop = 1;
		ob->ob_grace_ms = grace_ms > 0 ? grace_ms : 0;
		pthread_mutex_unlock(&ob->ob_lock);
		httpc_multi_wakeup(ob->ob_multi);
		pthread_join(ob->ob_thread, NULL);
	}
	outbound_destroy(ob);
}
