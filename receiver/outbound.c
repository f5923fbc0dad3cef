/* outbound.c: the outbox delivery worker: one thread driving libcurl's multi interface. */
#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "app.h"
#include "buf.h"
#include "build_config.h"
#include "crypto.h"
#include "log.h"
#include "orders.h"
#include "outbound.h"
#include "outbox.h"

#define OUTBOUND_USER_AGENT "idemhook/" IDEMHOOK_VERSION
#define OUTBOUND_HEADER_MAX 4096    /* bytes of one request header line we build */
#define OUTBOUND_RETRY_AFTER_MAX 64 /* bytes of a Retry-After value we look at */
#define OUTBOUND_STOP_TICK_MS 50    /* poll interval while draining at shutdown */

struct outbound_xfer {
	struct outbound *ox_ob;
	CURL *ox_easy;
	struct curl_slist *ox_headers;
	struct outbox_row ox_row;
	struct buf ox_resp;
	int ox_capped; /* the response passed oc_response_max: transfer ended */
	int64_t ox_retry_after_ms;
	char ox_errbuf[CURL_ERROR_SIZE];
};

struct outbound {
	struct store *ob_store;
	struct outbox_conf ob_conf;
	struct orders_conf ob_orders;
	struct outbound_clock ob_clock;
	CURLM *ob_multi;
	pthread_t ob_thread;
	int ob_thread_started;
	pthread_mutex_t ob_lock;
	int ob_stop;
	int ob_kicked;
	int64_t ob_grace_ms;
	struct outbound_xfer **ob_xfers; /* oc_concurrency slots */
	size_t ob_n_xfers;
	struct outbox_row *ob_lease_rows;   /* scratch for outbox_lease */
	struct outbox_attempt *ob_attempts; /* scratch for outbound_harvest */
	struct outbound_xfer **ob_done;
};

static pthread_once_t outbound_global_once = PTHREAD_ONCE_INIT;
static int outbound_global_rc;

static void outbound_global_init(void)
{
	CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);

	if (rc != CURLE_OK) {
		log_err("outbound: curl_global_init: %s", curl_easy_strerror(rc));
		outbound_global_rc = -1;
	}
}

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
	if (x->ox_easy != NULL) {
		curl_multi_remove_handle(x->ox_ob->ob_multi, x->ox_easy);
		curl_easy_cleanup(x->ox_easy);
	}
	curl_slist_free_all(x->ox_headers);
	buf_finish(&x->ox_resp);
	outbox_row_finish(&x->ox_row);
	free(x);
}

/* Keeps the response up to the cap; past it, ends the transfer (the status
 * line has arrived and is what counts). */
static size_t outbound_on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct outbound_xfer *x = arg;
	size_t n = size * nmemb;
	size_t room = x->ox_resp.buf_max - x->ox_resp.buf_len;

	if (n > room) {
		if (room > 0) {
			buf_append(&x->ox_resp, data, room);
		}
		x->ox_capped = 1;
		return 0;
	}
	if (n > 0 && buf_append(&x->ox_resp, data, n) < 0) {
		return 0;
	}
	return n;
}

static size_t outbound_on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct outbound_xfer *x = arg;
	size_t n = size * nmemb;
	static const char name[] = "retry-after:";
	size_t name_len = sizeof(name) - 1;
	char value[OUTBOUND_RETRY_AFTER_MAX];
	size_t len;
	int64_t ms;

	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		x->ox_retry_after_ms = -1; /* a new response (after 100 Continue) */
		return n;
	}
	if (n <= name_len || strncasecmp(data, name, name_len) != 0) {
		return n;
	}
	len = n - name_len;
	while (len > 0 && (data[name_len + len - 1] == '\r' || data[name_len + len - 1] == '\n')) {
		len--;
	}
	if (len >= sizeof(value)) {
		return n;
	}
	memcpy(value, data + name_len, len);
	value[len] = '\0';
	if (outbox_retry_after_ms(value, outbound_now(x->ox_ob), &ms) == 0) {
		x->ox_retry_after_ms = ms;
	}
	return n;
}

static int outbound_add_header(struct outbound_xfer *x, const char *name, const char *value)
{
	struct curl_slist *l;
	struct buf line;

	buf_init(&line, OUTBOUND_HEADER_MAX);
	if (buf_printf(&line, "%s: %s", name, value) < 0) {
		buf_finish(&line);
		return -1;
	}
	l = curl_slist_append(x->ox_headers, line.buf_data);
	buf_finish(&line);
	if (l == NULL) {
		return -1;
	}
	x->ox_headers = l;
	return 0;
}

static int outbound_headers(struct outbound *ob, struct outbound_xfer *x)
{
	const struct outbox_row *r = &x->ox_row;

	if (outbound_add_header(x, "Content-Type", r->or_content_type) < 0 ||
	    outbound_add_header(x, "Idempotency-Key", r->or_idem_key) < 0 ||
	    outbound_add_header(x, "User-Agent", OUTBOUND_USER_AGENT) < 0) {
		return -1;
	}
	/* An empty value makes curl leave the header out: no 100-continue wait. */
	x->ox_headers = curl_slist_append(x->ox_headers, "Expect:");
	if (x->ox_headers == NULL) {
		return -1;
	}
	if (strcmp(r->or_call_type, OUTBOX_REFUND_CALL) == 0) {
		struct buf auth;
		int rc;

		if (ob->ob_conf.oc_refund_key == NULL) {
			return 0; /* the provider will answer 401: the row dies, an operator is
			             flagged */
		}
		buf_init(&auth, OUTBOUND_HEADER_MAX);
		rc = buf_printf(&auth, "Bearer %s", ob->ob_conf.oc_refund_key);
		if (rc == 0) {
			rc = outbound_add_header(x, "Authorization", auth.buf_data);
		}
		memset(auth.buf_data, 0, auth.buf_len);
		buf_finish(&auth);
		return rc;
	}
	if (ob->ob_conf.oc_signing_key != NULL) {
		int64_t ts = outbound_now(ob) / 1000;
		char ts_text[24];
		char *sig = NULL;
		int rc;

		if (outbox_sign(ob->ob_conf.oc_signing_key, ob->ob_conf.oc_signing_key_len,
		                r->or_idem_key, ts, r->or_body, r->or_body_len, &sig) < 0) {
			return -1;
		}
		snprintf(ts_text, sizeof(ts_text), "%" PRId64, ts);
		rc = outbound_add_header(x, "webhook-id", r->or_idem_key);
		if (rc == 0) {
			rc = outbound_add_header(x, "webhook-timestamp", ts_text);
		}
		if (rc == 0) {
			rc = outbound_add_header(x, "webhook-signature", sig);
		}
		free(sig);
		return rc;
	}
	return 0;
}

/* Typed wrappers: curl_easy_setopt is variadic, so each value type gets its
 * own. Each returns 0, or -1 with curl's message logged. */
static int outbound_opt_check(CURLcode rc, CURLoption opt)
{
	if (rc != CURLE_OK) {
		log_err("outbound: curl_easy_setopt(%d): %s", (int)opt, curl_easy_strerror(rc));
		return -1;
	}
	return 0;
}

static int outbound_opt_long(CURL *easy, CURLoption opt, long v)
{
	return outbound_opt_check(curl_easy_setopt(easy, opt, v), opt);
}

static int outbound_opt_ptr(CURL *easy, CURLoption opt, const void *v)
{
	return outbound_opt_check(curl_easy_setopt(easy, opt, v), opt);
}

static int outbound_opt_off(CURL *easy, CURLoption opt, curl_off_t v)
{
	return outbound_opt_check(curl_easy_setopt(easy, opt, v), opt);
}

static int outbound_opt_write_fn(CURL *easy, CURLoption opt, curl_write_callback fn)
{
	return outbound_opt_check(curl_easy_setopt(easy, opt, fn), opt);
}

/* Starts the transfer of a leased row; takes the row over (also on failure). */
static int outbound_begin(struct outbound *ob, struct outbox_row *row)
{
	struct outbound_xfer *x = calloc(1, sizeof(*x));
	const struct outbox_conf *oc = &ob->ob_conf;
	CURL *easy;
	CURLMcode mc;

	if (x == NULL) {
		outbox_row_finish(row);
		return -1;
	}
	x->ox_ob = ob;
	x->ox_row = *row;
	memset(row, 0, sizeof(*row));
	x->ox_retry_after_ms = -1;
	buf_init(&x->ox_resp, oc->oc_response_max);
	x->ox_easy = curl_easy_init();
	if (x->ox_easy == NULL) {
		log_err("outbound: curl_easy_init failed");
		goto fail;
	}
	if (outbound_headers(ob, x) < 0) {
		goto fail;
	}
	easy = x->ox_easy;
	if (outbound_opt_ptr(easy, CURLOPT_URL, x->ox_row.or_url) < 0 ||
	    outbound_opt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https") < 0 ||
	    outbound_opt_long(easy, CURLOPT_NOSIGNAL, 1L) < 0 ||
	    outbound_opt_long(easy, CURLOPT_POST, 1L) < 0 ||
	    outbound_opt_ptr(easy, CURLOPT_POSTFIELDS, x->ox_row.or_body) < 0 ||
	    outbound_opt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->ox_row.or_body_len) <
	            0 ||
	    outbound_opt_ptr(easy, CURLOPT_HTTPHEADER, x->ox_headers) < 0 ||
	    outbound_opt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)oc->oc_connect_timeout_ms) <
	            0 ||
	    outbound_opt_long(easy, CURLOPT_TIMEOUT_MS, (long)oc->oc_timeout_ms) < 0 ||
	    outbound_opt_long(easy, CURLOPT_SSL_VERIFYPEER, 1L) < 0 ||
	    outbound_opt_long(easy, CURLOPT_SSL_VERIFYHOST, 2L) < 0 ||
	    (oc->oc_ca_file != NULL &&
	     outbound_opt_ptr(easy, CURLOPT_CAINFO, oc->oc_ca_file) < 0) ||
	    outbound_opt_write_fn(easy, CURLOPT_WRITEFUNCTION, outbound_on_body) < 0 ||
	    outbound_opt_ptr(easy, CURLOPT_WRITEDATA, x) < 0 ||
	    outbound_opt_write_fn(easy, CURLOPT_HEADERFUNCTION, outbound_on_header) < 0 ||
	    outbound_opt_ptr(easy, CURLOPT_HEADERDATA, x) < 0 ||
	    outbound_opt_ptr(easy, CURLOPT_ERRORBUFFER, x->ox_errbuf) < 0 ||
	    outbound_opt_ptr(easy, CURLOPT_PRIVATE, x) < 0) {
		goto fail;
	}
	mc = curl_multi_add_handle(ob->ob_multi, x->ox_easy);
	if (mc != CURLM_OK) {
		log_err("outbound: curl_multi_add_handle: %s", curl_multi_strerror(mc));
		goto fail;
	}
	ob->ob_xfers[ob->ob_n_xfers++] = x;
	log_debug("outbound: row %" PRId64 " attempt %u started", x->ox_row.or_id,
	          x->ox_row.or_attempts);
	return 0;
fail:
	/* Not sent: the lease is given back so the row is not stuck until it expires. */
	outbox_release(ob->ob_store, &x->ox_row, outbound_now(ob));
	if (x->ox_easy != NULL) {
		curl_easy_cleanup(x->ox_easy);
		x->ox_easy = NULL;
	}
	outbound_xfer_destroy(x);
	return -1;
}

static void outbound_forget(struct outbound *ob, struct outbound_xfer *x)
{
	size_t i;

	for (i = 0; i < ob->ob_n_xfers; i++) {
		if (ob->ob_xfers[i] == x) {
			ob->ob_xfers[i] = ob->ob_xfers[--ob->ob_n_xfers];
			break;
		}
	}
	outbound_xfer_destroy(x);
}

/* Records every finished transfer, all in one unit of work. Returns how
 * many finished. */
static size_t outbound_harvest(struct outbound *ob)
{
	struct outbox_attempt *done = ob->ob_attempts;
	struct outbound_xfer **xs = ob->ob_done;
	size_t n = 0;
	size_t i;

	while (n < ob->ob_conf.oc_concurrency) {
		struct outbox_result *res = &done[n].oa_res;
		struct outbound_xfer *x;
		char *priv = NULL;
		CURLMsg *msg;
		CURLcode rc;
		long code = 0;
		int left = 0;

		msg = curl_multi_info_read(ob->ob_multi, &left);
		if (msg == NULL) {
			break;
		}
		if (msg->msg != CURLMSG_DONE) {
			continue;
		}
		rc = msg->data.result;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		x = (struct outbound_xfer *)priv;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
		memset(res, 0, sizeof(*res));
		res->ors_retry_after_ms = x->ox_retry_after_ms;
		if (rc == CURLE_OK || (x->ox_capped && rc == CURLE_WRITE_ERROR && code != 0)) {
			res->ors_http_status = code;
		} else {
			/* Also when a status line came but the rest did not: the
			 * answer is incomplete, and a repeat is deduplicated. */
			res->ors_http_status = 0;
			res->ors_error =
			        x->ox_errbuf[0] != '\0' ? x->ox_errbuf : curl_easy_strerror(rc);
		}
		res->ors_body = x->ox_resp.buf_data;
		res->ors_body_len = x->ox_resp.buf_len;
		if (x->ox_capped) {
			log_notice("outbound: row %" PRId64 ": response cut at %zu bytes",
			           x->ox_row.or_id, ob->ob_conf.oc_response_max);
		}
		done[n].oa_row = &x->ox_row;
		done[n].oa_rnd = ob->ob_clock.ock_random(ob->ob_clock.ock_arg);
		xs[n++] = x;
	}
	if (n > 0) {
		outbox_complete_many(ob->ob_store, &ob->ob_conf, &ob->ob_orders, done, n,
		                     outbound_now(ob));
	}
	for (i = 0; i < n; i++) {
		outbound_forget(ob, xs[i]);
	}
	return n;
}

/* Leases due rows into free slots. Returns the time to look again. */
static int64_t outbound_fill(struct outbound *ob, int64_t now)
{
	size_t free_slots = ob->ob_conf.oc_concurrency - ob->ob_n_xfers;
	int64_t next = now + ob->ob_conf.oc_poll_ms;
	int64_t due = 0;
	size_t n = 0;
	size_t i;
	int rc;

	rc = outbox_next_due(ob->ob_store, now, &due);
	if (rc <= 0) {
		return next;
	}
	if (due > now) {
		return due < next ? due : next;
	}
	if (outbox_lease(ob->ob_store, now, ob->ob_conf.oc_lease_ms, free_slots, ob->ob_lease_rows,
	                 &n) < 0 ||
	    n == 0) {
		return next;
	}
	for (i = 0; i < n; i++) {
		outbound_begin(ob, &ob->ob_lease_rows[i]);
	}
	/* Look again at once: outbox_next_due then says when the next row is due. */
	return now;
}

static void *outbound_main(void *arg)
{
	struct outbound *ob = arg;
	int64_t next_check = 0;
	int64_t deadline = -1;
	size_t i;

	for (;;) {
		int64_t now = outbound_now(ob);
		int64_t wait;
		int running = 0;
		int stop;
		int kicked;
		CURLMcode mc;

		pthread_mutex_lock(&ob->ob_lock);
		stop = ob->ob_stop;
		kicked = ob->ob_kicked;
		ob->ob_kicked = 0;
		if (stop && deadline < 0) {
			deadline = now + ob->ob_grace_ms;
		}
		pthread_mutex_unlock(&ob->ob_lock);
		if (stop && (ob->ob_n_xfers == 0 || now >= deadline)) {
			break;
		}
		if (!stop && ob->ob_n_xfers < ob->ob_conf.oc_concurrency &&
		    (kicked || now >= next_check)) {
			next_check = outbound_fill(ob, now);
		}
		mc = curl_multi_perform(ob->ob_multi, &running);
		if (mc != CURLM_OK) {
			log_err("outbound: curl_multi_perform: %s", curl_multi_strerror(mc));
		}
		if (outbound_harvest(ob) > 0) {
			next_check = now; /* a slot is free */
		}
		now = outbound_now(ob);
		if (stop) {
			wait = deadline - now < OUTBOUND_STOP_TICK_MS ? deadline - now
			                                              : OUTBOUND_STOP_TICK_MS;
		} else if (ob->ob_n_xfers >= ob->ob_conf.oc_concurrency) {
			wait = ob->ob_conf.oc_poll_ms;
		} else {
			wait = next_check - now;
		}
		if (wait < 0) {
			wait = 0;
		}
		if (wait > ob->ob_conf.oc_poll_ms) {
			wait = ob->ob_conf.oc_poll_ms;
		}
		mc = curl_multi_poll(ob->ob_multi, NULL, 0, (int)wait, NULL);
		if (mc != CURLM_OK) {
			log_err("outbound: curl_multi_poll: %s", curl_multi_strerror(mc));
		}
	}
	if (ob->ob_n_xfers > 0) {
		log_notice("outbound: %zu transfer(s) still running at shutdown; released for the "
		           "next start",
		           ob->ob_n_xfers);
	}
	for (i = 0; i < ob->ob_n_xfers; i++) {
		outbox_release(ob->ob_store, &ob->ob_xfers[i]->ox_row, outbound_now(ob));
		outbound_xfer_destroy(ob->ob_xfers[i]);
	}
	ob->ob_n_xfers = 0;
	return NULL;
}

static void outbound_destroy(struct outbound *ob)
{
	if (ob == NULL) {
		return;
	}
	if (ob->ob_multi != NULL) {
		curl_multi_cleanup(ob->ob_multi);
	}
	free(ob->ob_xfers);
	free(ob->ob_lease_rows);
	free(ob->ob_attempts);
	free(ob->ob_done);
	outbox_conf_finish(&ob->ob_conf);
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
	pthread_once(&outbound_global_once, outbound_global_init);
	if (outbound_global_rc < 0) {
		goto fail;
	}
	ob->ob_xfers = calloc(ob->ob_conf.oc_concurrency, sizeof(*ob->ob_xfers));
	ob->ob_lease_rows = calloc(ob->ob_conf.oc_concurrency, sizeof(*ob->ob_lease_rows));
	ob->ob_attempts = calloc(ob->ob_conf.oc_concurrency, sizeof(*ob->ob_attempts));
	ob->ob_done = calloc(ob->ob_conf.oc_concurrency, sizeof(*ob->ob_done));
	ob->ob_multi = curl_multi_init();
	if (ob->ob_xfers == NULL || ob->ob_lease_rows == NULL || ob->ob_attempts == NULL ||
	    ob->ob_done == NULL || ob->ob_multi == NULL) {
		log_err("outbound: out of memory");
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

struct outbound *outbound_start(struct app *app, int *ret_err)
{
	struct outbox_conf oc;
	struct orders_conf orc;
	struct config *cf;
	struct outbound *ob;
	int rc;

	*ret_err = 0;
	cf = app_config_acquire(app);
	rc = outbox_conf_load(cf, 1, &oc);
	orc.oc_points_num = cf->cf_points_num;
	orc.oc_points_den = cf->cf_points_den;
	app_config_release(app, cf);
	if (rc < 0) {
		*ret_err = 1;
		return NULL;
	}
	if (rc == 0) {
		outbox_conf_finish(&oc);
		return NULL;
	}
	ob = outbound_create(app->app_store, &oc, &orc, NULL);
	if (ob == NULL) {
		*ret_err = 1;
	}
	return ob;
}

void outbound_kick(struct outbound *ob)
{
	if (ob == NULL) {
		return;
	}
	pthread_mutex_lock(&ob->ob_lock);
	ob->ob_kicked = 1;
	pthread_mutex_unlock(&ob->ob_lock);
	curl_multi_wakeup(ob->ob_multi);
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
		curl_multi_wakeup(ob->ob_multi);
		pthread_join(ob->ob_thread, NULL);
	}
	outbound_destroy(ob);
}
