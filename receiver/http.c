/* http.c: the HTTP listener on libmicrohttpd; the only file that includes microhttpd.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "buf.h"
#include "http.h"
#include "log.h"

#define HTTP_URL_MAX 8192 /* bytes in a request target */
#define HTTP_DRAIN_MAX_MS 10000 /* how long http_destroy waits for requests in flight */
#define HTTP_DISCARD_MAX (8 * 1024 * 1024) /* bytes of an over-cap chunked body dropped before closing */
/* Bytes of libmicrohttpd's per-connection pool: the request head (up to
 * HTTP_HEADERS_MAX fields and HTTP_URL_MAX of target), read and write
 * buffers; bodies are copied out as they arrive. libmicrohttpd clears the
 * whole pool before every request on a connection, and every connection
 * holds one (a suspended one too): the size is paid per request and per
 * connection, so it is no bigger than a request head needs. */
#define HTTP_CONN_MEMORY (16 * 1024)

/* One libmicrohttpd daemon and the settings it serves with. A reload starts
 * a new generation on a dup of the same listening socket before the old one
 * stops, so settings never change under a request in flight. */
struct http_gen {
	struct http_server *hg_srv;
	struct MHD_Daemon *hg_daemon;
	int hg_fd; /* this generation's descriptor of the listening socket */
	size_t hg_body_max;
	char **hg_proxies; /* trusted proxy CIDRs, NULL-terminated, or NULL */
	atomic_int hg_in_flight; /* requests begun and not completed */
	atomic_int hg_fresh; /* connections accepted whose first request has not begun (TLS handshakes) */
	atomic_int hg_suspended; /* deferred requests whose answer is not queued yet */
	atomic_int hg_draining; /* stopping: answers close their connection */
	atomic_int hg_stopping; /* the daemon is about to stop: no more suspensions */
	atomic_int hg_started; /* MHD_start_daemon returned */
	atomic_llong hg_log_ms; /* when the last loud libmicrohttpd message was logged */
};

/* Per-connection state: whether it still counts in hg_fresh. */
struct http_sock {
	atomic_int hk_fresh;
};

struct http_server {
	struct http_gen *hs_gen;
	char *hs_host;
	unsigned hs_port;
	http_route_fn hs_route;
	void *hs_arg;
	char *hs_name;
};

/* Where a deferred request is. The route's thread and the thread that calls
 * http_resume race; each step is one atomic transition, so exactly one of
 * them resumes the connection and exactly one runs the finish function. */
enum http_defer_state {
	HTTP_DEFER_NONE = 0,
	HTTP_DEFER_WAITING, /* deferred; not suspended yet, answer not ready */
	HTTP_DEFER_SUSPENDED, /* suspended, waiting for http_resume */
	HTTP_DEFER_READY, /* http_resume came: the answer may be built */
	HTTP_DEFER_ORPHANED, /* the connection ended first: http_resume frees */
	HTTP_DEFER_FINISHED, /* the finish function ran */
};

struct http_deferred {
	atomic_int hd_state; /* enum http_defer_state */
	http_finish_fn hd_fn;
	void *hd_arg;
	struct MHD_Connection *hd_con;
	struct http_conn *hd_hc;
	int hd_counted; /* counted in hg_suspended (server thread only) */
};

struct http_header_list;

/* Per-request state, created when the request line arrives. */
struct http_conn {
	struct http_gen *hc_gen;
	struct MHD_Connection *hc_con;
	char *hc_url; /* the raw request target */
	struct buf hc_body;
	int hc_head_seen; /* the access handler has seen the request head */
	int hc_refused; /* a response was queued before the body was read */
	int hc_too_large; /* an unannounced body went over the cap */
	size_t hc_discarded; /* bytes dropped since */
	int64_t hc_received_ms;
	/* The request as routed, kept until it completes: a deferred answer
	 * is built from it after the connection is resumed. */
	struct http_header_list *hc_headers;
	char *hc_path;
	char hc_peer[INET6_ADDRSTRLEN + 1];
	char hc_client[INET6_ADDRSTRLEN + 1];
	struct http_request hc_req;
	struct http_deferred hc_defer;
};

struct http_header_list {
	struct http_header hl_items[HTTP_HEADERS_MAX];
	size_t hl_n;
	int hl_overflow;
};

static int64_t http_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *http_header_get(const struct http_request *req, const char *name)
{
	size_t i;

	for (i = 0; i < req->hr_n_headers; i++) {
		if (strcasecmp(req->hr_headers[i].hh_name, name) == 0) {
			return req->hr_headers[i].hh_value;
		}
	}
	return NULL;
}

size_t http_header_count(const struct http_request *req, const char *name)
{
	size_t i;
	size_t n = 0;

	for (i = 0; i < req->hr_n_headers; i++) {
		if (strcasecmp(req->hr_headers[i].hh_name, name) == 0) {
			n++;
		}
	}
	return n;
}

char *http_query_get(const struct http_request *req, const char *name)
{
	const char *q = strchr(req->hr_url, '?');
	size_t nlen = strlen(name);

	if (q == NULL) {
		return NULL;
	}
	q++;
	while (*q != '\0') {
		const char *amp = strchr(q, '&');
		size_t len = amp != NULL ? (size_t)(amp - q) : strlen(q);

		if (len > nlen && strncmp(q, name, nlen) == 0 && q[nlen] == '=') {
			return strndup(q + nlen + 1, len - nlen - 1);
		}
		if (len == nlen && strncmp(q, name, nlen) == 0) {
			return strdup("");
		}
		q += len;
		if (*q == '&') {
			q++;
		}
	}
	return NULL;
}

/* ---- CIDR matching ---- */

static int http_parse_addr(const char *s, unsigned char out[16], int *ret_family)
{
	struct in_addr a4;

	if (inet_pton(AF_INET, s, &a4) == 1) {
		/* IPv4 as an IPv4-mapped IPv6 address, so both families compare alike. */
		memset(out, 0, 10);
		out[10] = 0xff;
		out[11] = 0xff;
		memcpy(out + 12, &a4, 4);
		*ret_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, out) == 1) {
		*ret_family = AF_INET6;
		return 0;
	}
	return -1;
}

int http_cidr_match(const char *cidr, const char *addr)
{
	unsigned char net[16];
	unsigned char a[16];
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(cidr, '/');
	size_t hlen = slash != NULL ? (size_t)(slash - cidr) : strlen(cidr);
	int fam_net;
	int fam_a;
	long bits;
	long i;

	if (hlen == 0 || hlen >= sizeof(host)) {
		return -1;
	}
	memcpy(host, cidr, hlen);
	host[hlen] = '\0';
	if (http_parse_addr(host, net, &fam_net) < 0 || http_parse_addr(addr, a, &fam_a) < 0) {
		return -1;
	}
	if (slash != NULL) {
		char *end;

		errno = 0;
		bits = strtol(slash + 1, &end, 10);
		if (errno != 0 || *end != '\0' || end == slash + 1 || bits < 0 ||
		    bits > (fam_net == AF_INET ? 32 : 128)) {
			return -1;
		}
	} else {
		bits = fam_net == AF_INET ? 32 : 128;
	}
	if (fam_net == AF_INET) {
		bits += 96;
	}
	for (i = 0; i < bits; i++) {
		int m = 0x80 >> (i % 8);

		if ((net[i / 8] & m) != (a[i / 8] & m)) {
			return 0;
		}
	}
	return 1;
}

/* ---- MHD callbacks ---- */

static void *http_uri_logger(void *cls, const char *uri, struct MHD_Connection *con)
{
	struct http_gen *gen = cls;
	struct http_conn *hc = calloc(1, sizeof(*hc));

	if (hc == NULL) {
		return NULL;
	}
	hc->hc_gen = gen;
	hc->hc_con = con;
	{
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		struct http_sock *hk = ci != NULL ? ci->socket_context : NULL;

		if (hk != NULL && atomic_exchange(&hk->hk_fresh, 0) == 1) {
			atomic_fetch_sub(&gen->hg_fresh, 1);
		}
	}
	hc->hc_url = strndup(uri, HTTP_URL_MAX);
	buf_init(&hc->hc_body, gen->hg_body_max);
	hc->hc_received_ms = http_now_ms();
	atomic_init(&hc->hc_defer.hd_state, HTTP_DEFER_NONE);
	atomic_fetch_add(&gen->hg_in_flight, 1);
	return hc;
}

static void http_conn_free(struct http_conn *hc)
{
	buf_finish(&hc->hc_body);
	free(hc->hc_url);
	free(hc->hc_headers);
	free(hc->hc_path);
	free(hc);
}

/* Takes a deferred request out of hg_suspended (on a server thread). */
static void http_defer_uncount(struct http_conn *hc)
{
	if (hc->hc_defer.hd_counted) {
		hc->hc_defer.hd_counted = 0;
		atomic_fetch_sub(&hc->hc_gen->hg_suspended, 1);
	}
}

/* The request ended with its deferral unfinished. Returns 1 when hc must
 * stay allocated (http_resume is still to come and frees it), else 0. */
static int http_defer_abandon(struct http_conn *hc)
{
	struct http_deferred *d = &hc->hc_defer;
	int state = atomic_load(&d->hd_state);

	http_defer_uncount(hc);
	while (state == HTTP_DEFER_WAITING || state == HTTP_DEFER_SUSPENDED) {
		if (atomic_compare_exchange_strong(&d->hd_state, &state, HTTP_DEFER_ORPHANED)) {
			/* libmicrohttpd never ends a suspended connection unless
			 * stopped with one, which http_gen_destroy prevents. */
			log_err("http %s: a deferred request ended before its answer was ready",
				hc->hc_gen->hg_srv->hs_name);
			return 1;
		}
	}
	if (state == HTTP_DEFER_READY) {
		/* Resumed, but the client went away before the answer was built. */
		d->hd_fn(d->hd_arg, NULL, NULL);
		atomic_store(&d->hd_state, HTTP_DEFER_FINISHED);
	}
	return 0;
}

static void http_completed(void *cls, struct MHD_Connection *con, void **con_cls,
			   enum MHD_RequestTerminationCode toe)
{
	struct http_conn *hc = *con_cls;

	if (hc == NULL) {
		return;
	}
	*con_cls = NULL;
	atomic_fetch_sub(&hc->hc_gen->hg_in_flight, 1);
	if (hc->hc_defer.hd_fn != NULL && http_defer_abandon(hc)) {
		return;
	}
	http_conn_free(hc);
}

static void http_connection_notify(void *cls, struct MHD_Connection *con, void **socket_context,
				   enum MHD_ConnectionNotificationCode toe)
{
	struct http_gen *gen = cls;
	struct http_sock *hk = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		hk = calloc(1, sizeof(*hk));
		if (hk != NULL) {
			atomic_init(&hk->hk_fresh, 1);
			atomic_fetch_add(&gen->hg_fresh, 1);
		}
		*socket_context = hk;
		return;
	}
	if (hk != NULL) {
		if (atomic_exchange(&hk->hk_fresh, 0) == 1) {
			atomic_fetch_sub(&gen->hg_fresh, 1);
		}
		free(hk);
		*socket_context = NULL;
	}
}

static enum MHD_Result http_collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
					   const char *value)
{
	struct http_header_list *hl = cls;

	if (hl->hl_n == HTTP_HEADERS_MAX) {
		hl->hl_overflow = 1;
		return MHD_NO;
	}
	hl->hl_items[hl->hl_n].hh_name = key;
	hl->hl_items[hl->hl_n].hh_value = value != NULL ? value : "";
	hl->hl_n++;
	return MHD_YES;
}

struct http_header_ctx {
	struct MHD_Response *hx_resp;
};

static void http_add_reply_header(void *arg, const char *name, const char *value)
{
	struct http_header_ctx *hx = arg;

	MHD_add_response_header(hx->hx_resp, name, value);
}

/* Queues r; its body is handed over to libmicrohttpd (r keeps the rest). */
static enum MHD_Result http_send(struct MHD_Connection *con, struct reply *r, int close_after)
{
	static char empty[] = "";
	struct MHD_Response *resp;
	struct http_header_ctx hx;
	enum MHD_Result rc;

	if (r->reply_body != NULL && r->reply_body_len > 0) {
		resp = MHD_create_response_from_buffer_with_free_callback(r->reply_body_len, r->reply_body, free);
		if (resp != NULL) {
			r->reply_body = NULL;
			r->reply_body_len = 0;
		}
	} else {
		resp = MHD_create_response_from_buffer(0, empty, MHD_RESPMEM_PERSISTENT);
	}
	if (resp == NULL) {
		log_err("http: cannot create a response");
		return MHD_NO;
	}
	if (r->reply_content_type != NULL) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->reply_content_type);
	}
	hx.hx_resp = resp;
	reply_each_header(r, http_add_reply_header, &hx);
	if (close_after) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	}
	rc = MHD_queue_response(con, (unsigned)r->reply_status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static enum MHD_Result http_refuse(struct MHD_Connection *con, struct http_conn *hc, int status, const char *slug,
				   const char *title, const char *detail)
{
	struct reply r;
	enum MHD_Result rc;

	reply_init(&r);
	if (reply_problem(&r, status, slug, title, detail) < 0) {
		return MHD_NO;
	}
	hc->hc_refused = 1;
	rc = http_send(con, &r, 1);
	reply_finish(&r);
	return rc;
}

static void http_client_address(const struct http_gen *gen, const struct http_header_list *hl, const char *peer,
				char *out, size_t out_size)
{
	const char *xff = NULL;
	char *copy;
	char *p;
	size_t i;
	int trusted = 0;

	snprintf(out, out_size, "%s", peer);
	if (gen->hg_proxies == NULL) {
		return;
	}
	for (i = 0; gen->hg_proxies[i] != NULL; i++) {
		if (http_cidr_match(gen->hg_proxies[i], peer) == 1) {
			trusted = 1;
			break;
		}
	}
	if (!trusted) {
		return;
	}
	for (i = 0; i < hl->hl_n; i++) {
		if (strcasecmp(hl->hl_items[i].hh_name, "X-Forwarded-For") == 0) {
			xff = hl->hl_items[i].hh_value; /* the last one: appended by our proxy */
		}
	}
	if (xff == NULL) {
		return;
	}
	copy = strdup(xff);
	if (copy == NULL) {
		return;
	}
	/* Walk from the right: the first address that is not a trusted proxy is
	 * the client; anything left of it could have been forged. */
	for (;;) {
		char *comma = strrchr(copy, ',');
		char *addr = comma != NULL ? comma + 1 : copy;
		int is_proxy = 0;
		unsigned char tmp[16];
		int fam;

		while (*addr == ' ') {
			addr++;
		}
		for (p = addr + strlen(addr); p > addr && p[-1] == ' '; p--) {
			p[-1] = '\0';
		}
		if (http_parse_addr(addr, tmp, &fam) < 0) {
			break;
		}
		for (i = 0; gen->hg_proxies[i] != NULL; i++) {
			if (http_cidr_match(gen->hg_proxies[i], addr) == 1) {
				is_proxy = 1;
				break;
			}
		}
		if (!is_proxy || comma == NULL) {
			snprintf(out, out_size, "%s", addr);
			if (!is_proxy) {
				break;
			}
		}
		if (comma == NULL) {
			break;
		}
		*comma = '\0';
	}
	free(copy);
}

static void http_peer_address(struct MHD_Connection *con, char *out, size_t out_size)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

	snprintf(out, out_size, "unknown");
	if (sa == NULL) {
		return;
	}
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)out_size);
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			inet_ntop(AF_INET, &a6->s6_addr[12], out, (socklen_t)out_size);
		} else {
			inet_ntop(AF_INET6, a6, out, (socklen_t)out_size);
		}
	}
}

static char *http_path_of(const char *url)
{
	const char *q = strchr(url, '?');
	size_t len = q != NULL ? (size_t)(q - url) : strlen(url);
	char *path = strndup(url, len);

	if (path != NULL) {
		MHD_http_unescape(path);
	}
	return path;
}

/* ---- deferred answers ---- */

struct http_deferred *http_defer(const struct http_request *req, http_finish_fn fn, void *arg)
{
	struct http_conn *hc = req->hr_conn;
	struct http_deferred *d = &hc->hc_defer;

	d->hd_fn = fn;
	d->hd_arg = arg;
	d->hd_con = hc->hc_con;
	d->hd_hc = hc;
	atomic_store(&d->hd_state, HTTP_DEFER_WAITING);
	return d;
}

void http_resume(struct http_deferred *d)
{
	/* Read before the exchange: once it is READY, d may be freed by the
	 * server thread unless the connection was suspended. */
	struct MHD_Connection *con = d->hd_con;
	int prev = atomic_exchange(&d->hd_state, HTTP_DEFER_READY);

	if (prev == HTTP_DEFER_SUSPENDED) {
		MHD_resume_connection(con);
	} else if (prev == HTTP_DEFER_ORPHANED) {
		d->hd_fn(d->hd_arg, NULL, NULL);
		http_conn_free(d->hd_hc);
	}
	/* WAITING: the route's thread has not suspended yet and will see READY. */
}

/* Builds the deferred answer and queues it (server thread, state READY). */
static enum MHD_Result http_defer_finish(struct MHD_Connection *con, struct http_conn *hc)
{
	struct http_deferred *d = &hc->hc_defer;
	struct reply r;
	enum MHD_Result rc;

	reply_init(&r);
	d->hd_fn(d->hd_arg, &hc->hc_req, &r);
	atomic_store(&d->hd_state, HTTP_DEFER_FINISHED);
	if (r.reply_status == 0) {
		reply_problem(&r, 500, "internal", "Internal error", NULL);
	}
	rc = http_send(con, &r, atomic_load(&hc->hc_gen->hg_draining));
	reply_finish(&r);
	/* Counted until now, so a drain waits until the answer is queued. */
	http_defer_uncount(hc);
	return rc;
}

/* Right after a route deferred: suspends the connection, unless the answer
 * is ready already (a duplicate answered from a read connection). */
static enum MHD_Result http_defer_suspend(struct MHD_Connection *con, struct http_conn *hc)
{
	struct http_deferred *d = &hc->hc_defer;
	struct http_gen *gen = hc->hc_gen;
	struct timespec pause = {0, 1000 * 1000};
	int expected = HTTP_DEFER_WAITING;

	if (atomic_load(&d->hd_state) == HTTP_DEFER_READY) {
		return http_defer_finish(con, hc);
	}
	/* Counted before stopping is read, as http_gen_destroy sets stopping
	 * before it reads the count: either it waits for this request, or this
	 * request sees it stopping and does not suspend. */
	atomic_fetch_add(&gen->hg_suspended, 1);
	d->hd_counted = 1;
	if (atomic_load(&gen->hg_stopping)) {
		/* A daemon may not stop with a suspended connection: wait on this
		 * thread instead, for a commit already under way. */
		while (atomic_load(&d->hd_state) != HTTP_DEFER_READY) {
			nanosleep(&pause, NULL);
		}
		return http_defer_finish(con, hc);
	}
	MHD_suspend_connection(con);
	if (!atomic_compare_exchange_strong(&d->hd_state, &expected, HTTP_DEFER_SUSPENDED)) {
		/* http_resume came in between and left the resuming to us. */
		MHD_resume_connection(con);
	}
	return MHD_YES;
}

static enum MHD_Result http_access(void *cls, struct MHD_Connection *con, const char *url, const char *method,
				   const char *version, const char *upload_data, size_t *upload_data_size,
				   void **con_cls)
{
	struct http_gen *gen = cls;
	struct http_server *srv = gen->hg_srv;
	struct http_conn *hc = *con_cls;
	struct http_request *req;
	struct reply r;
	enum MHD_Result rc;

	if (hc == NULL) {
		return MHD_NO; /* out of memory in the URI logger */
	}
	if (hc->hc_defer.hd_fn != NULL) {
		/* Called again after a resume. */
		if (atomic_load(&hc->hc_defer.hd_state) != HTTP_DEFER_READY) {
			return MHD_YES;
		}
		return http_defer_finish(con, hc);
	}
	if (hc->hc_refused) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (hc->hc_too_large) {
			/* A body of unannounced length went over the cap: drop the
			 * rest so the client can read the 413, up to a bound. */
			hc->hc_discarded += n;
			if (hc->hc_discarded > HTTP_DISCARD_MAX) {
				return http_refuse(con, hc, 413, "body-too-large", "Request body too large",
						   "The body is larger than this endpoint accepts.");
			}
			return MHD_YES;
		}
		if (buf_append(&hc->hc_body, upload_data, n) < 0) {
			hc->hc_too_large = 1;
		}
		return MHD_YES;
	}
	if (hc->hc_too_large) {
		return http_refuse(con, hc, 413, "body-too-large", "Request body too large",
				   "The body is larger than this endpoint accepts.");
	}
	if (!hc->hc_head_seen) {
		/* First call: the head is in. Refuse an announced oversized body
		 * before reading any of it. */
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

		hc->hc_head_seen = 1;
		if (cl != NULL) {
			char *end;
			unsigned long long n;

			errno = 0;
			n = strtoull(cl, &end, 10);
			if (errno != 0 || end == cl || *end != '\0' || n > gen->hg_body_max) {
				return http_refuse(con, hc, 413, "body-too-large", "Request body too large",
						   "The body is larger than this endpoint accepts.");
			}
		}
		return MHD_YES;
	}
	/* The whole request is in: build it and route it. It lives in hc, so
	 * that a deferred answer can still read it after a resume. */
	hc->hc_headers = calloc(1, sizeof(*hc->hc_headers));
	if (hc->hc_headers == NULL) {
		return MHD_NO;
	}
	MHD_get_connection_values(con, MHD_HEADER_KIND, http_collect_header, hc->hc_headers);
	if (hc->hc_headers->hl_overflow) {
		return http_refuse(con, hc, 431, "too-many-headers", "Too many header fields", NULL);
	}
	hc->hc_path = http_path_of(hc->hc_url != NULL ? hc->hc_url : url);
	if (hc->hc_path == NULL) {
		return MHD_NO;
	}
	http_peer_address(con, hc->hc_peer, sizeof(hc->hc_peer));
	http_client_address(gen, hc->hc_headers, hc->hc_peer, hc->hc_client, sizeof(hc->hc_client));
	req = &hc->hc_req;
	req->hr_method = method;
	req->hr_url = hc->hc_url != NULL ? hc->hc_url : url;
	req->hr_path = hc->hc_path;
	req->hr_version = version;
	req->hr_headers = hc->hc_headers->hl_items;
	req->hr_n_headers = hc->hc_headers->hl_n;
	req->hr_body = (const unsigned char *)(hc->hc_body.buf_data != NULL ? hc->hc_body.buf_data : "");
	req->hr_body_len = hc->hc_body.buf_len;
	req->hr_peer = hc->hc_peer;
	req->hr_client = hc->hc_client;
	req->hr_received_ms = hc->hc_received_ms;
	req->hr_conn = hc;
	reply_init(&r);
	srv->hs_route(srv->hs_arg, req, &r);
	if (hc->hc_defer.hd_fn != NULL) {
		reply_finish(&r);
		return http_defer_suspend(con, hc);
	}
	if (r.reply_status == 0) {
		reply_problem(&r, 500, "internal", "Internal error", NULL);
	}
	rc = http_send(con, &r, atomic_load(&gen->hg_draining));
	reply_finish(&r);
	return rc;
}

/* Messages of libmicrohttpd that mean it is short of something (memory,
 * descriptors, threads) or refused connections; everything else it says at
 * run time is about one client's connection (a reset, a malformed request). */
static const char *const http_mhd_loud[] = {
	"limit", "memory", "thread", "epoll", "inter-thread", "listen", "socket descriptor",
};

#define HTTP_MHD_LOUD_EVERY_MS 1000 /* at most one loud message a second */

static enum log_level http_mhd_level(struct http_gen *gen, const char *line)
{
	int64_t now = http_now_ms();
	long long last;
	size_t i;

	if (!atomic_load(&gen->hg_started)) {
		return LOG_LEVEL_WARNING; /* why the listener did not start */
	}
	for (i = 0; i < sizeof(http_mhd_loud) / sizeof(http_mhd_loud[0]); i++) {
		if (strcasestr(line, http_mhd_loud[i]) == NULL) {
			continue;
		}
		/* Under a flood, one a second is enough to say what happens. */
		last = atomic_load(&gen->hg_log_ms);
		if (now - last >= HTTP_MHD_LOUD_EVERY_MS &&
		    atomic_compare_exchange_strong(&gen->hg_log_ms, &last, now)) {
			return LOG_LEVEL_WARNING;
		}
		return LOG_LEVEL_DEBUG;
	}
	return LOG_LEVEL_DEBUG;
}

static void http_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_gen *gen = cls;
	char line[512];
	char quoted[600];
	size_t len;

	vsnprintf(line, sizeof(line), fmt, ap);
	len = strlen(line);
	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
		line[--len] = '\0';
	}
	log_msg(http_mhd_level(gen, line), "http %s: libmicrohttpd: %s", gen->hg_srv->hs_name,
		log_quote(quoted, sizeof(quoted), line));
}

static int http_listen(const char *host, unsigned port, int *ret_fd, unsigned *ret_port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;
	int fd = -1;

	memset(&ss, 0, sizeof(ss));
	if (strchr(host, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1) {
			goto bad;
		}
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) {
			goto bad;
		}
		len = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_err("http: socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		log_err("http: cannot bind %s:%u: %s", host, port, strerror(errno));
		goto fail;
	}
	if (listen(fd, 1024) < 0) {
		log_err("http: listen: %s", strerror(errno));
		goto fail;
	}
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		log_err("http: getsockname: %s", strerror(errno));
		goto fail;
	}
	*ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	*ret_fd = fd;
	return 0;
bad:
	log_err("http: listen address \"%s\" is not a numeric IPv4 or IPv6 address", host);
	return -1;
fail:
	close(fd);
	return -1;
}

static void http_free_list(char **list)
{
	size_t i;

	if (list == NULL) {
		return;
	}
	for (i = 0; list[i] != NULL; i++) {
		free(list[i]);
	}
	free(list);
}

/* Stops accepting, lets requests in flight finish, stops and frees. A
 * deferred request is always waited for, however long its commit takes:
 * libmicrohttpd may not stop with a suspended connection, and its answer
 * says that what it sent is on disk. Other requests (a slow upload) get
 * HTTP_DRAIN_MAX_MS. */
static void http_gen_destroy(struct http_gen *gen)
{
	struct timespec pause = {0, 10 * 1000 * 1000};
	int waited = 0;
	int busy;
	MHD_socket fd;

	if (gen == NULL) {
		return;
	}
	if (gen->hg_daemon != NULL) {
		fd = MHD_quiesce_daemon(gen->hg_daemon);
		/* Answers from now on close their connection, so a keep-alive
		 * client cannot keep the drain going with new requests. */
		atomic_store(&gen->hg_draining, 1);
		/* Requests in flight finish, and so do connections accepted but
		 * not yet at their first request (a TLS handshake under way). */
		for (;;) {
			busy = atomic_load(&gen->hg_in_flight) > 0 || atomic_load(&gen->hg_fresh) > 0;
			if (atomic_load(&gen->hg_suspended) == 0 && (!busy || waited >= HTTP_DRAIN_MAX_MS)) {
				break;
			}
			if (waited > 0 && waited % 5000 == 0 && atomic_load(&gen->hg_suspended) > 0) {
				log_notice("http %s: waiting for %d deferred answers", gen->hg_srv->hs_name,
					   atomic_load(&gen->hg_suspended));
			}
			nanosleep(&pause, NULL);
			waited += 10;
		}
		/* From here no request suspends; one that deferred meanwhile is
		 * counted, and waited for, or waits on its own thread. */
		atomic_store(&gen->hg_stopping, 1);
		while (atomic_load(&gen->hg_suspended) > 0) {
			nanosleep(&pause, NULL);
		}
		MHD_stop_daemon(gen->hg_daemon);
		/* A quiesced daemon hands the socket back; otherwise it closed it. */
		gen->hg_fd = fd != MHD_INVALID_SOCKET ? fd : -1;
	}
	if (gen->hg_fd >= 0) {
		close(gen->hg_fd);
	}
	http_free_list(gen->hg_proxies);
	free(gen);
}

/* Starts a daemon with opt on fd (taken over, closed on failure). */
static struct http_gen *http_gen_create(struct http_server *srv, const struct http_options *opt, int fd)
{
	struct http_gen *gen = calloc(1, sizeof(*gen));
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_AUTO | MHD_USE_ITC |
			 MHD_ALLOW_SUSPEND_RESUME;
	struct MHD_OptionItem more[4];
	unsigned threads = opt->ho_threads;
	size_t n_more = 0;
	size_t i;
	size_t n = 0;

	if (gen == NULL) {
		close(fd);
		return NULL;
	}
	gen->hg_srv = srv;
	gen->hg_fd = fd;
	gen->hg_body_max = opt->ho_body_max != 0 ? opt->ho_body_max : HTTP_BODY_MAX_DEFAULT;
	atomic_init(&gen->hg_in_flight, 0);
	atomic_init(&gen->hg_fresh, 0);
	atomic_init(&gen->hg_suspended, 0);
	atomic_init(&gen->hg_draining, 0);
	atomic_init(&gen->hg_stopping, 0);
	atomic_init(&gen->hg_started, 0);
	atomic_init(&gen->hg_log_ms, 0);
	if (opt->ho_trusted_proxies != NULL) {
		while (opt->ho_trusted_proxies[n] != NULL) {
			n++;
		}
		gen->hg_proxies = calloc(n + 1, sizeof(char *));
		if (gen->hg_proxies == NULL) {
			goto fail;
		}
		for (i = 0; i < n; i++) {
			gen->hg_proxies[i] = strdup(opt->ho_trusted_proxies[i]);
			if (gen->hg_proxies[i] == NULL) {
				goto fail;
			}
		}
	}
	if (threads == 0) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);

		threads = cores > 0 ? (unsigned)cores : 2;
	}
	/* A pool of one is no pool: libmicrohttpd wants the option left out
	 * then rather than given 0 or 1. */
	if (threads > 1) {
		more[n_more++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
	}
	if (opt->ho_tls_cert_pem != NULL) {
		flags |= MHD_USE_TLS;
		more[n_more++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)opt->ho_tls_cert_pem};
		more[n_more++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)opt->ho_tls_key_pem};
	}
	more[n_more] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	/* The logger comes first, so that libmicrohttpd says nothing on its
	 * own stderr even while it reads the options that follow. */
	gen->hg_daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, http_access, gen, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, gen,
		MHD_OPTION_LISTEN_SOCKET, gen->hg_fd, MHD_OPTION_CONNECTION_TIMEOUT, opt->ho_conn_timeout_s,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, opt->ho_per_ip_limit, MHD_OPTION_URI_LOG_CALLBACK,
		http_uri_logger, gen, MHD_OPTION_NOTIFY_COMPLETED, http_completed, gen,
		MHD_OPTION_NOTIFY_CONNECTION, http_connection_notify, gen, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		(size_t)HTTP_CONN_MEMORY, MHD_OPTION_ARRAY, more, MHD_OPTION_END);
	if (gen->hg_daemon == NULL) {
		log_err("http %s: libmicrohttpd refused to start on %s:%u%s", srv->hs_name, srv->hs_host,
			srv->hs_port, opt->ho_tls_cert_pem != NULL ? " (check the TLS certificate and key)" : "");
		goto fail;
	}
	atomic_store(&gen->hg_started, 1);
	return gen;
fail:
	http_gen_destroy(gen);
	return NULL;
}

static void http_free(struct http_server *srv)
{
	free(srv->hs_host);
	free(srv->hs_name);
	free(srv);
}

struct http_server *http_create(const struct http_options *opt, http_route_fn route, void *arg)
{
	struct http_server *srv = calloc(1, sizeof(*srv));
	int fd;

	if (srv == NULL) {
		return NULL;
	}
	srv->hs_route = route;
	srv->hs_arg = arg;
	srv->hs_name = strdup(opt->ho_name != NULL ? opt->ho_name : "http");
	srv->hs_host = strdup(opt->ho_host);
	if (srv->hs_name == NULL || srv->hs_host == NULL) {
		goto fail;
	}
	if (http_listen(opt->ho_host, opt->ho_port, &fd, &srv->hs_port) < 0) {
		goto fail;
	}
	srv->hs_gen = http_gen_create(srv, opt, fd);
	if (srv->hs_gen == NULL) {
		goto fail;
	}
	return srv;
fail:
	http_free(srv);
	return NULL;
}

int http_reload(struct http_server *srv, const struct http_options *opt)
{
	struct http_gen *gen;
	struct http_gen *old;
	int fd;

	if (strcmp(opt->ho_host, srv->hs_host) != 0 || (opt->ho_port != 0 && opt->ho_port != srv->hs_port)) {
		log_warn("http %s: a new listen address takes effect at the next start", srv->hs_name);
		return 1;
	}
	fd = dup(srv->hs_gen->hg_fd);
	if (fd < 0) {
		log_err("http %s: dup: %s", srv->hs_name, strerror(errno));
		return -1;
	}
	gen = http_gen_create(srv, opt, fd);
	if (gen == NULL) {
		return -1;
	}
	/* Both accept on the socket for a moment; then the old one drains. */
	old = srv->hs_gen;
	srv->hs_gen = gen;
	http_gen_destroy(old);
	return 0;
}

unsigned http_port(const struct http_server *srv)
{
	return srv->hs_port;
}

void http_destroy(struct http_server *srv)
{
	if (srv == NULL) {
		return;
	}
	http_gen_destroy(srv->hs_gen);
	http_free(srv);
}
