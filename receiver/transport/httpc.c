/* httpc.c: the one HTTP client, on libcurl: blocking exchanges and a multi
 * set of concurrent transfers, sharing one way to set up and read a transfer. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "httpc.h"
#include "log.h"

#define HTTPC_BODY_MAX_DEFAULT (64 * 1024) /* bytes kept when hcq_response_max is 0 */
#define HTTPC_TIMEOUT_DEFAULT_MS 30000     /* when hcq_timeout_ms is 0 */
#define HTTPC_LINE_MAX 8192                /* bytes of one request header line we send */

struct httpc_xfer {
	CURL *hx_easy;
	struct curl_slist *hx_list;
	struct buf hx_body;
	size_t hx_body_max;
	int hx_truncated;
	struct httpc_headers hx_headers; /* of the answer being read */
	size_t hx_head_bytes;
	const char *hx_head_error; /* static: why the answer's head was refused */
	void *hx_arg;
	/* The first bytes the peer sent in a TLS handshake, as libcurl's
	 * debug callback hands them over (before the TLS library judges
	 * them): "HTTP/" when a plain HTTP server answered the ClientHello. */
	char hx_tls_first[8];
	size_t hx_tls_first_len;
	int hx_tls_seen;
	int hx_tls_sent;            /* the handshake began: TLS data went out */
	char *hx_ca_file;           /* the request's hcq_ca_file (a copy), or NULL */
	struct httpc_xfer *hx_next; /* in the multi's list */
	char hx_errbuf[CURL_ERROR_SIZE];
};

struct httpc_multi {
	CURLM *hm_multi;
	struct httpc_xfer *hm_xfers; /* running */
};

static pthread_once_t httpc_once = PTHREAD_ONCE_INIT;
static int httpc_global_rc;

static void httpc_global_init(void)
{
	CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);

	if (rc != CURLE_OK) {
		log_err("httpc: curl_global_init: %s", curl_easy_strerror(rc));
		httpc_global_rc = -1;
	}
}

static int httpc_global(void)
{
	pthread_once(&httpc_once, httpc_global_init);
	return httpc_global_rc;
}

static void httpc_err(char *err, size_t err_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

size_t httpc_utf8_prefix(const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strnlen(s, max);
	size_t back = 0;

	if (len < max) {
		return len; /* all of it fits */
	}
	/* The byte after the cut continues a sequence: cut before its first
	 * byte (at most 3 back; bytes that are not UTF-8 are cut anywhere). */
	while (back < 3 && len - back > 0 && (u[len - back] & 0xC0) == 0x80) {
		back++;
	}
	if (back > 0 && (u[len - back] & 0xC0) == 0xC0) {
		return len - back;
	}
	return len;
}

/* Formats into err; a message longer than err_size is cut before the
 * UTF-8 sequence the cut would split (a path or a peer's text may hold
 * any), so what is kept (a row's error, a log line) stays well-formed. */
static void httpc_err(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;
	char *full = NULL;
	int n;

	if (err == NULL || err_size == 0) {
		return;
	}
	va_start(ap, fmt);
	n = vasprintf(&full, fmt, ap);
	va_end(ap);
	if (n < 0) {
		snprintf(err, err_size, "out of memory");
		return;
	}
	snprintf(err, err_size, "%.*s", (int)httpc_utf8_prefix(full, err_size - 1), full);
	free(full);
}

/* ---- header lists ---- */

void httpc_headers_init(struct httpc_headers *h)
{
	memset(h, 0, sizeof(*h));
}

void httpc_headers_finish(struct httpc_headers *h)
{
	size_t i;

	for (i = 0; i < h->hch_n; i++) {
		free((char *)h->hch_v[i].hh_name);
		free((char *)h->hch_v[i].hh_value);
	}
	httpc_headers_init(h);
}

/* Appends copies of the counted name and value. Returns 0 or -1 (full, or
 * out of memory). */
static int httpc_headers_put(struct httpc_headers *h, const char *name, size_t name_len,
                             const char *value, size_t value_len)
{
	char *n;
	char *v;

	if (h->hch_n == HTTPC_HEADERS_MAX) {
		return -1;
	}
	n = strndup(name, name_len);
	v = strndup(value, value_len);
	if (n == NULL || v == NULL) {
		free(n);
		free(v);
		return -1;
	}
	h->hch_v[h->hch_n].hh_name = n;
	h->hch_v[h->hch_n].hh_value = v;
	h->hch_n++;
	return 0;
}

void httpc_headers_add(void *arg, const char *name, const char *value)
{
	struct httpc_headers *h = arg;

	if (name[0] == '\0' || strpbrk(name, "\r\n: \t") != NULL ||
	    strpbrk(value, "\r\n") != NULL ||
	    httpc_headers_put(h, name, strlen(name), value, strlen(value)) < 0) {
		h->hch_overflow = 1;
	}
}

const char *httpc_headers_get(const struct httpc_headers *h, const char *name)
{
	size_t i;

	for (i = 0; i < h->hch_n; i++) {
		if (strcasecmp(h->hch_v[i].hh_name, name) == 0) {
			return h->hch_v[i].hh_value;
		}
	}
	return NULL;
}

int httpc_url_ok(const char *url)
{
	const char *host;

	if (strncasecmp(url, "http://", 7) == 0) {
		host = url + 7;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		host = url + 8;
	} else {
		return 0;
	}
	return host[0] != '\0' && host[0] != '/' && host[0] != ':' &&
	       strpbrk(url, " \t\r\n") == NULL;
}

/* ---- URLs parsed by libcurl ---- */

/* 1 when host (as CURLU gives it: IPv6 in brackets) is a loopback host. */
static int httpc_host_loopback(const char *host)
{
	unsigned char addr[16];
	char h[64];
	size_t len = strlen(host);

	if (strcasecmp(host, "localhost") == 0) {
		return 1;
	}
	if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
		static const unsigned char one[16] = {0, 0, 0, 0, 0, 0, 0, 0,
		                                      0, 0, 0, 0, 0, 0, 0, 1};

		if (len - 2 >= sizeof(h)) {
			return 0;
		}
		memcpy(h, host + 1, len - 2);
		h[len - 2] = '\0';
		return inet_pton(AF_INET6, h, addr) == 1 && memcmp(addr, one, sizeof(one)) == 0;
	}
	return inet_pton(AF_INET, host, addr) == 1 && addr[0] == 127;
}

/* 1 when part of u is present (non-empty). */
static int httpc_url_has(CURLU *u, CURLUPart part)
{
	char *v = NULL;
	int has;

	has = curl_url_get(u, part, &v, 0) == CURLUE_OK && v != NULL && v[0] != '\0';
	curl_free(v);
	return has;
}

/* Parses url into a new handle and checks what every URL we send to must
 * be. Returns the handle, or NULL with err set. */
static CURLU *httpc_url_parse(const char *url, char *err, size_t err_size)
{
	CURLU *u;
	CURLUcode rc;
	char *scheme = NULL;

	if (httpc_global() < 0) {
		httpc_err(err, err_size, "the HTTP client cannot start");
		return NULL;
	}
	if (strpbrk(url, " \t\r\n") != NULL) {
		httpc_err(err, err_size, "a URL holds no white space");
		return NULL;
	}
	u = curl_url();
	if (u == NULL) {
		httpc_err(err, err_size, "out of memory");
		return NULL;
	}
	rc = curl_url_set(u, CURLUPART_URL, url, 0);
	if (rc != CURLUE_OK) {
		httpc_err(err, err_size, "not a URL: %s", curl_url_strerror(rc));
		goto fail;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
		httpc_err(err, err_size, "not an http:// or https:// URL");
		goto fail;
	}
	/* libcurl reads "http:///x" as host "x": a typo, not a host. */
	if (!httpc_url_has(u, CURLUPART_HOST) || strncmp(url + strcspn(url, ":"), ":///", 4) == 0) {
		httpc_err(err, err_size, "the URL names no host");
		goto fail;
	}
	if (httpc_url_has(u, CURLUPART_USER) || httpc_url_has(u, CURLUPART_PASSWORD) ||
	    httpc_url_has(u, CURLUPART_OPTIONS)) {
		/* libcurl connects to what follows the '@': what precedes it
		 * only looks like a host to a reader. */
		httpc_err(err, err_size, "a URL with a user name or password ('@') is refused");
		goto fail;
	}
	curl_free(scheme);
	return u;
fail:
	curl_free(scheme);
	curl_url_cleanup(u);
	return NULL;
}

int httpc_url_check(const char *url, int credential, char *err, size_t err_size)
{
	CURLU *u = httpc_url_parse(url, err, err_size);
	char *scheme = NULL;
	char *host = NULL;
	int rc = -1;

	if (u == NULL) {
		return -1;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		httpc_err(err, err_size, "out of memory");
		goto out;
	}
	if (credential && strcmp(scheme, "http") == 0 && !httpc_host_loopback(host)) {
		httpc_err(err, err_size,
		          "http:// only to a loopback address; the key would cross the network "
		          "in clear: use https://");
		goto out;
	}
	rc = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return rc;
}

/* 1 when target is an origin-form request target (RFC 9112 3.2.1): "/",
 * then visible ASCII other than '#', and not "//" (which a URL reads as an
 * authority). */
static int httpc_origin_form(const char *target)
{
	const unsigned char *p;

	if (target[0] != '/' || target[1] == '/') {
		return 0;
	}
	for (p = (const unsigned char *)target; *p != '\0'; p++) {
		if (*p <= 0x20 || *p >= 0x7f || *p == '#' || *p == '\\') {
			return 0;
		}
	}
	return 1;
}

int httpc_url_join(const char *base, const char *target, char **ret, char *err, size_t err_size)
{
	CURLU *u = NULL;
	char *prefix = NULL;
	char *out = NULL;
	struct buf path;
	const char *query;
	int rc = -1;

	*ret = NULL;
	buf_init(&path, 0);
	if (!httpc_origin_form(target)) {
		httpc_err(err, err_size,
		          "the request target is not an origin-form path (\"/...\")");
		goto out;
	}
	u = httpc_url_parse(base, err, err_size);
	if (u == NULL) {
		goto out;
	}
	if (httpc_url_has(u, CURLUPART_QUERY) || httpc_url_has(u, CURLUPART_FRAGMENT)) {
		httpc_err(err, err_size, "the base URL has a query or a fragment");
		goto out;
	}
	if (curl_url_get(u, CURLUPART_PATH, &prefix, 0) != CURLUE_OK) {
		httpc_err(err, err_size, "out of memory");
		goto out;
	}
	query = strchr(target, '?');
	{
		size_t plen = strlen(prefix);

		while (plen > 0 && prefix[plen - 1] == '/') {
			plen--;
		}
		if (buf_append(&path, prefix, plen) < 0 ||
		    buf_append(&path, target,
		               query != NULL ? (size_t)(query - target) : strlen(target)) < 0) {
			httpc_err(err, err_size, "out of memory");
			goto out;
		}
	}
	if (curl_url_set(u, CURLUPART_PATH, path.buf_data, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_QUERY, query != NULL && query[1] != '\0' ? query + 1 : NULL,
	                 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK) {
		httpc_err(err, err_size, "cannot build the URL");
		goto out;
	}
	*ret = strdup(out);
	if (*ret == NULL) {
		httpc_err(err, err_size, "out of memory");
		goto out;
	}
	rc = 0;
out:
	curl_free(out);
	curl_free(prefix);
	curl_url_cleanup(u);
	buf_finish(&path);
	return rc;
}

/* ---- one transfer ---- */

/* Keeps the body up to the cap; past it, ends the transfer (the status line
 * has arrived and is what counts). */
static size_t httpc_on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct httpc_xfer *x = arg;
	size_t n = size * nmemb;
	size_t room = x->hx_body_max - x->hx_body.buf_len;

	if (n > room) {
		if (room > 0 && buf_append(&x->hx_body, data, room) < 0) {
			return 0;
		}
		x->hx_truncated = 1;
		return 0;
	}
	if (n > 0 && buf_append(&x->hx_body, data, n) < 0) {
		return 0;
	}
	return n;
}

/* One line of the answer's head at a time; a new status line (after a 1xx)
 * starts the list again. */
static size_t httpc_on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct httpc_xfer *x = arg;
	size_t n = size * nmemb;
	size_t len = n;
	const char *colon;
	size_t name_len;
	size_t v;

	if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
		httpc_headers_finish(&x->hx_headers);
		x->hx_head_bytes = 0;
		return n;
	}
	x->hx_head_bytes += n;
	if (x->hx_head_bytes > HTTPC_HEAD_MAX) {
		x->hx_head_error = "the answer's header fields are too large";
		return 0;
	}
	while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == '\n')) {
		len--;
	}
	/* The blank line, a folded continuation line (obsolete), or no field. */
	if (len == 0 || data[0] == ' ' || data[0] == '\t') {
		return n;
	}
	colon = memchr(data, ':', len);
	if (colon == NULL) {
		return n;
	}
	name_len = (size_t)(colon - data);
	v = name_len + 1;
	while (v < len && (data[v] == ' ' || data[v] == '\t')) {
		v++;
	}
	while (len > v && (data[len - 1] == ' ' || data[len - 1] == '\t')) {
		len--;
	}
	if (httpc_headers_put(&x->hx_headers, data, name_len, data + v, len - v) < 0) {
		x->hx_head_error = "the answer has too many header fields";
		return 0;
	}
	return n;
}

static void httpc_xfer_destroy(struct httpc_xfer *x)
{
	if (x == NULL) {
		return;
	}
	if (x->hx_easy != NULL) {
		curl_easy_cleanup(x->hx_easy);
	}
	curl_slist_free_all(x->hx_list);
	buf_finish(&x->hx_body);
	httpc_headers_finish(&x->hx_headers);
	free(x->hx_ca_file);
	free(x);
}

/* Framing, hop-by-hop and routing fields are the client's to write. */
static int httpc_skip_header(const char *name)
{
	static const char *const skip[] = {
	        "Host", "Content-Length", "Connection", "Transfer-Encoding", "Expect", "Keep-Alive",
	        "TE",   "Trailer",        "Upgrade",    "Proxy-Connection",
	};
	size_t i;

	for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
		if (strcasecmp(name, skip[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

static int httpc_list_add(struct httpc_xfer *x, const char *line)
{
	struct curl_slist *l = curl_slist_append(x->hx_list, line);

	if (l == NULL) {
		return -1;
	}
	x->hx_list = l;
	return 0;
}

/* The request's header lines. "Name:" with nothing after it makes curl
 * drop a field of its own, so an empty value is sent as "Name;". */
static int httpc_list_build(struct httpc_xfer *x, const struct httpc_request *req, int with_body)
{
	const struct httpc_headers *h = req->hcq_headers;
	struct buf line;
	size_t i;
	int rc = -1;

	buf_init(&line, HTTPC_LINE_MAX);
	for (i = 0; h != NULL && i < h->hch_n; i++) {
		const struct http_header *f = &h->hch_v[i];

		if (httpc_skip_header(f->hh_name)) {
			continue;
		}
		line.buf_len = 0;
		if ((f->hh_value[0] == '\0'
		             ? buf_printf(&line, "%s;", f->hh_name)
		             : buf_printf(&line, "%s: %s", f->hh_name, f->hh_value)) < 0 ||
		    httpc_list_add(x, line.buf_data) < 0) {
			goto done;
		}
	}
	/* No fields the caller did not ask for: curl's own Accept, its form
	 * Content-Type on a body, and the 100-continue wait. */
	if ((h == NULL || httpc_headers_get(h, "Accept") == NULL) &&
	    httpc_list_add(x, "Accept:") < 0) {
		goto done;
	}
	if (with_body && (h == NULL || httpc_headers_get(h, "Content-Type") == NULL) &&
	    httpc_list_add(x, "Content-Type:") < 0) {
		goto done;
	}
	if (httpc_list_add(x, "Expect:") < 0) {
		goto done;
	}
	rc = 0;
done:
	buf_finish(&line);
	return rc;
}

/* Typed wrappers: curl_easy_setopt is variadic, so each value type gets its
 * own. Each returns 0, or -1 with curl's message logged. */
static int httpc_opt_check(CURLcode rc, CURLoption opt)
{
	if (rc != CURLE_OK) {
		log_err("httpc: curl_easy_setopt(%d): %s", (int)opt, curl_easy_strerror(rc));
		return -1;
	}
	return 0;
}

static int httpc_opt_long(CURL *easy, CURLoption opt, long v)
{
	return httpc_opt_check(curl_easy_setopt(easy, opt, v), opt);
}

static int httpc_opt_ptr(CURL *easy, CURLoption opt, const void *v)
{
	return httpc_opt_check(curl_easy_setopt(easy, opt, v), opt);
}

static int httpc_opt_off(CURL *easy, CURLoption opt, curl_off_t v)
{
	return httpc_opt_check(curl_easy_setopt(easy, opt, v), opt);
}

static int httpc_opt_fn(CURL *easy, CURLoption opt, curl_write_callback fn)
{
	return httpc_opt_check(curl_easy_setopt(easy, opt, fn), opt);
}

/* CURLOPT_DEBUGFUNCTION: keeps the first bytes of the TLS data received
 * (CURLINFO_SSL_DATA_IN: the record header the peer sent first, handed
 * over before it is checked) and ignores the rest, which may hold
 * secrets (the request's Authorization among the header lines out). */
static int httpc_on_debug(CURL *easy, curl_infotype type, char *data, size_t size, void *arg)
{
	struct httpc_xfer *x = arg;
	size_t n = size < sizeof(x->hx_tls_first) ? size : sizeof(x->hx_tls_first);

	(void)easy;
	if (type == CURLINFO_SSL_DATA_OUT) {
		x->hx_tls_sent = 1;
	}
	if (type != CURLINFO_SSL_DATA_IN || x->hx_tls_seen) {
		return 0;
	}
	x->hx_tls_seen = 1;
	memcpy(x->hx_tls_first, data, n);
	x->hx_tls_first_len = n;
	return 0;
}

/* For https:// URLs only: libcurl calls a debug function only in verbose
 * mode, and the rest of what verbose mode makes goes to httpc_on_debug,
 * which drops it. */
static int httpc_opt_tls_trace(CURL *easy, const char *url, struct httpc_xfer *x)
{
	if (strncasecmp(url, "https://", 8) != 0) {
		return 0;
	}
	if (httpc_opt_check(curl_easy_setopt(easy, CURLOPT_DEBUGFUNCTION, httpc_on_debug),
	                    CURLOPT_DEBUGFUNCTION) < 0 ||
	    httpc_opt_ptr(easy, CURLOPT_DEBUGDATA, x) < 0) {
		return -1;
	}
	return httpc_opt_long(easy, CURLOPT_VERBOSE, 1L);
}

static int httpc_opt_method(CURL *easy, const char *method, const struct httpc_request *req)
{
	if (strcmp(method, "GET") == 0) {
		return httpc_opt_long(easy, CURLOPT_HTTPGET, 1L);
	}
	if (strcmp(method, "HEAD") == 0) {
		return httpc_opt_long(easy, CURLOPT_NOBODY, 1L);
	}
	/* The body is copied: a multi transfer outlives the caller's request. */
	if (httpc_opt_long(easy, CURLOPT_POST, 1L) < 0 ||
	    httpc_opt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->hcq_body_len) < 0 ||
	    httpc_opt_ptr(easy, CURLOPT_COPYPOSTFIELDS,
	                  req->hcq_body != NULL ? req->hcq_body : (const void *)"") < 0) {
		return -1;
	}
	if (strcmp(method, "POST") != 0) {
		return httpc_opt_ptr(easy, CURLOPT_CUSTOMREQUEST, method);
	}
	return 0;
}

/* A transfer set up for req, not started. NULL with err set on failure. */
static struct httpc_xfer *httpc_xfer_create(const struct httpc_request *req, char *err,
                                            size_t err_size)
{
	const char *method = req->hcq_method != NULL ? req->hcq_method : "POST";
	int with_body = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
	unsigned timeout =
	        req->hcq_timeout_ms != 0 ? req->hcq_timeout_ms : HTTPC_TIMEOUT_DEFAULT_MS;
	unsigned connect = req->hcq_connect_timeout_ms != 0 ? req->hcq_connect_timeout_ms : timeout;
	struct httpc_xfer *x;
	CURL *e;

	if (req->hcq_url == NULL || !httpc_url_ok(req->hcq_url)) {
		httpc_err(err, err_size, "not an http:// or https:// URL");
		return NULL;
	}
	if (httpc_global() < 0) {
		httpc_err(err, err_size, "libcurl did not initialize");
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (x == NULL) {
		httpc_err(err, err_size, "out of memory");
		return NULL;
	}
	buf_init(&x->hx_body, 0);
	x->hx_body_max =
	        req->hcq_response_max != 0 ? req->hcq_response_max : HTTPC_BODY_MAX_DEFAULT;
	x->hx_easy = curl_easy_init();
	if (x->hx_easy == NULL || httpc_list_build(x, req, with_body) < 0) {
		httpc_err(err, err_size, "out of memory");
		goto fail;
	}
	if (req->hcq_ca_file != NULL && (x->hx_ca_file = strdup(req->hcq_ca_file)) == NULL) {
		httpc_err(err, err_size, "out of memory");
		goto fail;
	}
	e = x->hx_easy;
	if (httpc_opt_ptr(e, CURLOPT_URL, req->hcq_url) < 0 ||
	    httpc_opt_ptr(e, CURLOPT_PROTOCOLS_STR, "http,https") < 0 ||
	    httpc_opt_long(e, CURLOPT_NOSIGNAL, 1L) < 0 || httpc_opt_method(e, method, req) < 0 ||
	    httpc_opt_ptr(e, CURLOPT_HTTPHEADER, x->hx_list) < 0 ||
	    httpc_opt_long(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect) < 0 ||
	    httpc_opt_long(e, CURLOPT_TIMEOUT_MS, (long)timeout) < 0 ||
	    httpc_opt_long(e, CURLOPT_SSL_VERIFYPEER, req->hcq_pinned_key == NULL ? 1L : 0L) < 0 ||
	    httpc_opt_long(e, CURLOPT_SSL_VERIFYHOST, req->hcq_pinned_key == NULL ? 2L : 0L) < 0 ||
	    (req->hcq_ca_file != NULL && httpc_opt_ptr(e, CURLOPT_CAINFO, req->hcq_ca_file) < 0) ||
	    /* libcurl checks a pin whether or not it verifies the chain. */
	    (req->hcq_pinned_key != NULL &&
	     httpc_opt_ptr(e, CURLOPT_PINNEDPUBLICKEY, req->hcq_pinned_key) < 0) ||
	    httpc_opt_fn(e, CURLOPT_WRITEFUNCTION, httpc_on_body) < 0 ||
	    httpc_opt_ptr(e, CURLOPT_WRITEDATA, x) < 0 ||
	    httpc_opt_fn(e, CURLOPT_HEADERFUNCTION, httpc_on_header) < 0 ||
	    httpc_opt_ptr(e, CURLOPT_HEADERDATA, x) < 0 ||
	    httpc_opt_ptr(e, CURLOPT_ERRORBUFFER, x->hx_errbuf) < 0 ||
	    httpc_opt_ptr(e, CURLOPT_PRIVATE, x) < 0 ||
	    httpc_opt_tls_trace(e, req->hcq_url, x) < 0) {
		httpc_err(err, err_size, "cannot set up the transfer");
		goto fail;
	}
	/* A CA file is the only trust: a libcurl built with a CA directory
	 * (Debian's: /etc/ssl/certs) would otherwise verify against both, and
	 * a peer that the file does not vouch for but a public CA does would
	 * pass, which is not what ca_file says. A TLS backend without CA
	 * directories has none to set aside (CURLE_NOT_BUILT_IN). */
	if (req->hcq_ca_file != NULL) {
		CURLcode cc = curl_easy_setopt(e, CURLOPT_CAPATH, NULL);

		if (cc != CURLE_OK && cc != CURLE_NOT_BUILT_IN) {
			httpc_err(err, err_size, "cannot set up the transfer");
			goto fail;
		}
	}
#if LIBCURL_VERSION_NUM >= 0x075700 /* 7.87.0 */
	/* libcurl keeps the CA store it built from a file (per multi handle,
	 * keyed on the file's name, 24 h by default): the outbound worker
	 * would go on verifying with the store of a file the operator has
	 * since replaced under the same name. Off, every new TLS connection
	 * reads the CA file as it is then, as before 7.87 (a connection kept
	 * alive keeps the peer it verified). An older libcurl at run time
	 * refuses it and has no cache. */
	(void)curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 0L);
	/* A transfer that ends while its name is being resolved (the timeout,
	 * a stop) otherwise waits in its cleanup for getaddrinfo to give up,
	 * which a DNS server that does not answer makes take many seconds:
	 * the outbound worker's one thread, every other transfer and the
	 * stop's grace time with it. Set, the resolver thread is left to end
	 * on its own and frees what it holds. A libcurl older at run time than
	 * at build time refuses it (CURLE_UNKNOWN_OPTION): then the cleanup
	 * waits, as before. */
	(void)curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
#endif
	return x;
fail:
	httpc_xfer_destroy(x);
	return NULL;
}

/* The failure kind of transfer x that ended with rc. A handshake answered
 * by a plain HTTP server ends as any failed handshake
 * (CURLE_SSL_CONNECT_ERROR), and the TLS library's message for it is its
 * own wording (OpenSSL: "wrong version number", for any bytes that are not
 * a TLS record): what tells it is what came first, a status line where a
 * TLS record header belongs. Only an HTTP status line: a port answering
 * with another protocol's greeting is no case for http://. Without a TLS
 * trace (a libcurl built without verbose strings) the failure is
 * HTTPC_FAILURE_OTHER. */
static enum httpc_failure httpc_failure_of(CURLcode rc, const struct httpc_xfer *x)
{
	static const char status_line[] = "HTTP/";

	switch (rc) {
	case CURLE_SSL_CONNECT_ERROR:
		if (x->hx_tls_first_len >= sizeof(status_line) - 1 &&
		    memcmp(x->hx_tls_first, status_line, sizeof(status_line) - 1) == 0) {
			return HTTPC_FAILURE_TLS_PLAIN;
		}
		return HTTPC_FAILURE_OTHER;
	case CURLE_SSL_CACERT_BADFILE:
		return HTTPC_FAILURE_TLS_CA_FILE;
	case CURLE_PEER_FAILED_VERIFICATION: /* chain, host name, dates */
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		return HTTPC_FAILURE_TLS_VERIFY;
	default:
		return HTTPC_FAILURE_OTHER;
	}
}

/* libcurl's message why, for a CA file at path it could not load, without
 * the path (its OpenSSL back end says "error setting certificate file:
 * PATH"), into out: the caller names the file once, before it. Each
 * occurrence goes with the ": " or " " before it. */
static void httpc_ca_said(const char *why, const char *path, char *out, size_t out_size)
{
	size_t path_len = strlen(path);
	size_t o = 0;
	const char *at;

	while (path_len > 0 && (at = strstr(why, path)) != NULL && o < out_size) {
		size_t keep = (size_t)(at - why);

		if (keep >= 2 && at[-2] == ':' && at[-1] == ' ') {
			keep -= 2;
		} else if (keep >= 1 && at[-1] == ' ') {
			keep -= 1;
		}
		if (keep > out_size - 1 - o) {
			keep = out_size - 1 - o;
		}
		memcpy(out + o, why, keep);
		o += keep;
		why = at + path_len;
	}
	snprintf(out + o, out_size - o, "%s", why);
}

/* Words the error of transfer x that ended with rc, of failure kind f,
 * into err: libcurl's message, and before it what it means where libcurl's
 * own words do not say (a CA file it could not load reads as one more
 * certificate problem; a peer that closed during the handshake, as the
 * TLS library's error code). */
static void httpc_xfer_error(const struct httpc_xfer *x, CURLcode rc, enum httpc_failure f,
                             char *err, size_t err_size)
{
	const char *why = x->hx_errbuf[0] != '\0' ? x->hx_errbuf : curl_easy_strerror(rc);

	if (f == HTTPC_FAILURE_TLS_CA_FILE) {
		if (x->hx_ca_file != NULL) {
			char said[CURL_ERROR_SIZE];

			httpc_ca_said(why, x->hx_ca_file, said, sizeof(said));
			httpc_err(err, err_size, "the CA file %s cannot be used: %s", x->hx_ca_file,
			          said);
		} else {
			httpc_err(err, err_size, "the system's CA certificates cannot be used: %s",
			          why);
		}
		return;
	}
	/* A server that closes (or resets) after the ClientHello without a
	 * byte back: a plain HTTP server may (libmicrohttpd does so for some
	 * ClientHellos, as their random bytes fall), so may a TLS server that
	 * refuses the handshake. Not sure enough to stop retrying. */
	if (rc == CURLE_SSL_CONNECT_ERROR && x->hx_tls_sent && !x->hx_tls_seen) {
		httpc_err(err, err_size,
		          "the server closed the connection during the TLS handshake; if this port "
		          "speaks plain HTTP, use http:// (%s)",
		          why);
		return;
	}
	httpc_err(err, err_size, "%s", why);
}

/* Hands the finished transfer's answer over to ret. Returns 0, or -1 with
 * err set and ret zeroed but for hcr_failure when no usable answer came
 * back. */
static int httpc_xfer_result(struct httpc_xfer *x, CURLcode rc, struct httpc_response *ret,
                             char *err, size_t err_size)
{
	long code = 0;

	memset(ret, 0, sizeof(*ret));
	curl_easy_getinfo(x->hx_easy, CURLINFO_RESPONSE_CODE, &code);
	if (x->hx_head_error != NULL) {
		httpc_err(err, err_size, "%s", x->hx_head_error);
		return -1;
	}
	/* A write error is ours when the body passed the cap: the answer came. */
	if (rc != CURLE_OK && !(x->hx_truncated && rc == CURLE_WRITE_ERROR && code != 0)) {
		ret->hcr_failure = httpc_failure_of(rc, x);
		httpc_xfer_error(x, rc, ret->hcr_failure, err, err_size);
		return -1;
	}
	if (code == 0) {
		httpc_err(err, err_size, "no HTTP answer");
		return -1;
	}
	ret->hcr_body = buf_take(&x->hx_body, &ret->hcr_body_len);
	if (ret->hcr_body == NULL) {
		httpc_err(err, err_size, "out of memory");
		return -1;
	}
	ret->hcr_status = code;
	ret->hcr_headers = x->hx_headers;
	httpc_headers_init(&x->hx_headers);
	ret->hcr_truncated = x->hx_truncated;
	return 0;
}

int httpc_exchange(const struct httpc_request *req, struct httpc_response *ret, char *err,
                   size_t err_size)
{
	struct httpc_xfer *x = httpc_xfer_create(req, err, err_size);
	CURLcode rc;
	int result;

	memset(ret, 0, sizeof(*ret));
	if (x == NULL) {
		return -1;
	}
	rc = curl_easy_perform(x->hx_easy);
	result = httpc_xfer_result(x, rc, ret, err, err_size);
	httpc_xfer_destroy(x);
	return result;
}

const char *httpc_response_header(const struct httpc_response *r, const char *name)
{
	return httpc_headers_get(&r->hcr_headers, name);
}

void httpc_response_finish(struct httpc_response *r)
{
	httpc_headers_finish(&r->hcr_headers);
	free(r->hcr_body);
	memset(r, 0, sizeof(*r));
}

/* ---- concurrent transfers ---- */

struct httpc_multi *httpc_multi_create(void)
{
	struct httpc_multi *m;

	if (httpc_global() < 0) {
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		log_err("httpc: out of memory");
		return NULL;
	}
	m->hm_multi = curl_multi_init();
	if (m->hm_multi == NULL) {
		log_err("httpc: curl_multi_init failed");
		free(m);
		return NULL;
	}
	return m;
}

static void httpc_multi_unlink(struct httpc_multi *m, struct httpc_xfer *x)
{
	struct httpc_xfer **p;

	for (p = &m->hm_xfers; *p != NULL; p = &(*p)->hx_next) {
		if (*p == x) {
			*p = x->hx_next;
			break;
		}
	}
	curl_multi_remove_handle(m->hm_multi, x->hx_easy);
}

void httpc_multi_destroy(struct httpc_multi *m)
{
	if (m == NULL) {
		return;
	}
	while (m->hm_xfers != NULL) {
		struct httpc_xfer *x = m->hm_xfers;

		httpc_multi_unlink(m, x);
		httpc_xfer_destroy(x);
	}
	curl_multi_cleanup(m->hm_multi);
	free(m);
}

int httpc_multi_add(struct httpc_multi *m, const struct httpc_request *req, void *arg)
{
	char err[HTTPC_ERR_MAX];
	struct httpc_xfer *x = httpc_xfer_create(req, err, sizeof(err));
	CURLMcode mc;

	if (x == NULL) {
		log_err("httpc: %s", err);
		return -1;
	}
	x->hx_arg = arg;
	mc = curl_multi_add_handle(m->hm_multi, x->hx_easy);
	if (mc != CURLM_OK) {
		log_err("httpc: curl_multi_add_handle: %s", curl_multi_strerror(mc));
		httpc_xfer_destroy(x);
		return -1;
	}
	x->hx_next = m->hm_xfers;
	m->hm_xfers = x;
	return 0;
}

int httpc_multi_perform(struct httpc_multi *m)
{
	int running = 0;
	CURLMcode mc = curl_multi_perform(m->hm_multi, &running);

	if (mc != CURLM_OK) {
		log_err("httpc: curl_multi_perform: %s", curl_multi_strerror(mc));
		return -1;
	}
	return 0;
}

int httpc_multi_done(struct httpc_multi *m, void **ret_arg, struct httpc_response *ret, char *err,
                     size_t err_size)
{
	for (;;) {
		struct httpc_xfer *x;
		char *priv = NULL;
		CURLMsg *msg;
		CURLcode rc;
		int left = 0;

		msg = curl_multi_info_read(m->hm_multi, &left);
		if (msg == NULL) {
			return 0;
		}
		if (msg->msg != CURLMSG_DONE) {
			continue;
		}
		rc = msg->data.result;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		x = (struct httpc_xfer *)priv;
		if (err != NULL && err_size > 0) {
			err[0] = '\0';
		}
		/* On failure ret stays zeroed: status 0 means no answer. */
		httpc_xfer_result(x, rc, ret, err, err_size);
		*ret_arg = x->hx_arg;
		httpc_multi_unlink(m, x);
		httpc_xfer_destroy(x);
		return 1;
	}
}

int httpc_multi_poll(struct httpc_multi *m, int wait_ms)
{
	CURLMcode mc = curl_multi_poll(m->hm_multi, NULL, 0, wait_ms < 0 ? 0 : wait_ms, NULL);

	if (mc != CURLM_OK) {
		log_err("httpc: curl_multi_poll: %s", curl_multi_strerror(mc));
		return -1;
	}
	return 0;
}

void httpc_multi_wakeup(struct httpc_multi *m)
{
	curl_multi_wakeup(m->hm_multi);
}
