/* http.h: the HTTP server seam; only http.c includes microhttpd.h.
 *
 * A request reaches the route function complete: headers in arrival order and
 * the whole raw body (capped). The route fills a response; http.c sends it. */
#ifndef IDEMHOOK_HTTP_H
#define IDEMHOOK_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h" /* the listener's defaults: HTTP_*_DEFAULT */
#include "reply.h"

#define HTTP_HEADERS_MAX 100 /* header fields per request: 431 beyond */
#define HTTP_HEAD_MAX 8192 /* bytes of request line and header fields: 431 beyond */
#define HTTP_URL_MAX 4096 /* bytes of a request target: 414 beyond */
#define HTTP_QUERY_PARAMS_MAX 100 /* query parameters: 414 beyond */

struct http_conn;
struct http_deferred;

struct http_header {
	const char *hh_name;
	const char *hh_value;
};

struct http_request {
	const char *hr_method;
	const char *hr_url; /* the request target exactly as received (path and query) */
	const char *hr_path; /* decoded path without the query */
	const char *hr_version; /* "HTTP/1.1" */
	const struct http_header *hr_headers; /* arrival order */
	size_t hr_n_headers;
	const unsigned char *hr_body; /* raw bytes; NUL-terminated for convenience */
	size_t hr_body_len;
	const char *hr_peer; /* peer address, text */
	const char *hr_client; /* client address: X-Forwarded-For from a trusted proxy, else the peer */
	int64_t hr_received_ms; /* when the request head arrived */
	struct http_conn *hr_conn; /* opaque: what http_defer needs */
};

/* First header called name (case-insensitive), or NULL. */
const char *http_header_get(const struct http_request *req, const char *name);
/* How many headers are called name. */
size_t http_header_count(const struct http_request *req, const char *name);
/* The value of the one header called name: 1 with *ret_value set; 0 when
 * there is none and -1 when several lines carry it, both with *ret_value
 * NULL. For a field that is not a list, which a sender may not repeat
 * (RFC 9110 5.3): which of two lines counts is anybody's guess. */
int http_header_one(const struct http_request *req, const char *name, const char **ret_value);
/* The raw query parameter value for name (not percent-decoded), copied into
 * a malloc'd string, or NULL. */
char *http_query_get(const struct http_request *req, const char *name);

/* Route: fill ret (status, content type, body, extra headers), or defer. */
typedef void (*http_route_fn)(void *arg, const struct http_request *req, struct reply *ret);

/* An answer http.c makes itself once a request head is in, before routing
 * (400, 413, 414, 431, 501, 503): the problem it sends unless the route
 * layer answers otherwise. Static strings. */
struct http_refusal {
	int hf_status;
	const char *hf_slug;   /* the problem's slug: "body_too_large", ... */
	const char *hf_title;  /* its title */
	const char *hf_detail; /* one sentence, or NULL */
};

/* Decorates or replaces ret, the problem for the refusal why (already
 * filled in), for req (which has no body). Never defers. */
typedef void (*http_refused_fn)(void *arg, const struct http_request *req,
                                const struct http_refusal *why, struct reply *ret);

/* Finishes a deferred request on a server thread once it was resumed: fills
 * ret from req (the same request the route saw). Called exactly once per
 * deferral; with req and ret NULL when the request ended without an answer
 * (the client went away while suspended): then only release what arg holds. */
typedef void (*http_finish_fn)(void *arg, const struct http_request *req, struct reply *ret);

/* From inside a route: the answer comes later. The route returns with ret
 * untouched; the connection is suspended until http_resume(d), then fn
 * builds the answer. Cheap, and right even when http_resume is called
 * before the route returns (the answer then goes out without suspending).
 * Returns the handle (never NULL). Only once per request. */
struct http_deferred *http_defer(const struct http_request *req, http_finish_fn fn, void *arg);

/* From any thread, exactly once per handle: the answer can be built now. */
void http_resume(struct http_deferred *d);

/* What the sweeper answers a client too slow (408): the problem+json's
 * title and sentence, and, for a path whose refusals have a format of
 * their own, the answer there (http_options.ho_timeouts). */
#define HTTP_TIMEOUT_TITLE "Request timeout"
#define HTTP_TIMEOUT_DETAIL "The request head did not arrive in time, or the body came too slowly."
/* The problem of a head over HTTP_HEAD_MAX (431), whoever notices it. */
#define HTTP_HEAD_STR_(x) #x
#define HTTP_HEAD_STR(x) HTTP_HEAD_STR_(x)
#define HTTP_HEAD_SLUG "headers_too_large"
#define HTTP_HEAD_TITLE "Request header fields too large"
#define HTTP_HEAD_MAX_TEXT HTTP_HEAD_STR(HTTP_HEAD_MAX)
#define HTTP_HEAD_DETAIL                                                                           \
	"The request line and header fields are larger than " HTTP_HEAD_MAX_TEXT " bytes."

struct http_timeout_reply {
	const char *htr_path;          /* the decoded path, exactly ("/hooks/wechatpay") */
	int htr_under;                 /* and every path below it (htr_path + "/...") */
	const struct reply *htr_reply; /* its 408: content type, headers and body */
};

/* Limits and timeouts: 0 takes the default. */
struct http_options {
	const char *ho_host; /* listen address (numeric IPv4/IPv6) */
	unsigned ho_port; /* 0 = ephemeral */
	unsigned ho_threads; /* thread pool size, 0 = number of cores */
	unsigned ho_conn_timeout_s;   /* a connection idle this long is closed */
	unsigned ho_per_ip_limit;     /* connections per client address; 0 = none */
	unsigned ho_max_connections;  /* 0 = what the file limit (RLIMIT_NOFILE) allows */
	unsigned ho_head_timeout_ms;  /* the whole request head within this, or 408 and closed */
	size_t ho_body_min_rate;      /* bytes/s a body averages after a grace, or 408 and closed */
	unsigned ho_drain_timeout_ms; /* how long a drain waits for connections */
	size_t ho_body_max; /* 413 beyond this, without reading the rest */
	const char *ho_tls_cert_pem; /* PEM text, or NULL for plain HTTP */
	const char *ho_tls_key_pem;
	const char *const *ho_trusted_proxies; /* NULL-terminated CIDR list, or NULL */
	const char *ho_name; /* for logs: "public", "admin" */
	/* Optional: called (with the route's arg) on every answer http.c
	 * makes itself once a request head is in (400, 413, 414, 431, 501,
	 * 503): ret holds the problem for why; it may add headers (CORS) or
	 * replace it (a provider's own format), never defer. */
	http_refused_fn ho_refused;
	/* Optional: the paths whose 408 is not the listener's plain
	 * problem+json (a provider's own format, or the order API's CORS
	 * headers). The sweeper sends that answer without the route, for a
	 * head too slow once its request line is in, and for a body too
	 * slow; a head whose request line is not in yet has no path and
	 * gets the plain problem. The first entry that matches counts.
	 * Copied by http_create and http_reload. */
	const struct http_timeout_reply *ho_timeouts;
	size_t ho_n_timeouts;
	/* Optional: adds headers (CORS) to the 408 a request would get for a
	 * body too slow, at a path without an exact answer of its own (one
	 * under a ho_timeouts entry with htr_under is still asked). Called with
	 * the route's arg and why the 408, once the head of a request with a
	 * body and an Origin field is in, on plain HTTP only: the request
	 * may well complete, so it must do nothing but add headers. */
	http_refused_fn ho_timeout_headers;
};

struct http_server;

/* Binds and starts serving; NULL on failure (logged). */
struct http_server *http_create(const struct http_options *opt, http_route_fn route, void *arg);

/* Restarts serving with opt (TLS certificate and key, limits, timeouts,
 * trusted proxies) on the same listening socket: the new daemon accepts
 * before the old one stops accepting, so no connection is refused. The old
 * one drains in the background: each of its connections gets its current
 * request answered with Connection: close, and it stops once they are all
 * closed (idle ones by the idle timeout) or at its drain timeout. The
 * address cannot change this way (returns 1, nothing changed). Returns 0, 1,
 * or -1 with the old settings still serving. Not thread-safe against
 * http_destroy. */
int http_reload(struct http_server *srv, const struct http_options *opt);

/* The bound port (useful with ho_port 0). */
unsigned http_port(const struct http_server *srv);

/* 1 while the listener serves HTTPS (a reload may turn it on or off). */
int http_tls(struct http_server *srv);

/* 1 when the listener's threads serve: one of them took a loopback
 * connection to the listener within timeout_ms (or every connection is
 * busy and requests keep completing); else 0 with the reason in err. Blocks
 * up to timeout_ms. Any thread, never during or after http_destroy. */
int http_alive(struct http_server *srv, int timeout_ms, char *err, size_t err_size);

/* Drains and frees: closes the listening socket (new connections are
 * refused at once), answers the current request of every connection with
 * Connection: close, closes idle ones, and waits for them all up to the
 * drain timeout, then cuts what is left but never a deferred request (each
 * is resumed and answered first: nothing acknowledged or committed goes
 * unanswered). Logs its progress. NULL is a no-op. */
void http_destroy(struct http_server *srv);

#endif
