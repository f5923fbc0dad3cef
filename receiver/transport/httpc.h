/* httpc.h: the one HTTP client (libcurl; only httpc.c includes curl.h): a
 * blocking exchange for the CLI and the demo, and a set of concurrent
 * transfers for the outbox worker. http:// and https:// only; TLS peers are
 * always verified, against the system CAs, a given CA file, or a pinned
 * public key. */
#ifndef IDEMHOOK_HTTPC_H
#define IDEMHOOK_HTTPC_H

#include <stddef.h>

#include "http.h"

#define HTTPC_HEAD_MAX (64 * 1024) /* bytes of an answer's header fields */
#define HTTPC_HEADERS_MAX 128      /* fields per list or answer: a whole captured request fits */
#define HTTPC_ERR_MAX 256          /* bytes of an error message, NUL included */

/* Header fields, owned (copies). */
struct httpc_headers {
	struct http_header hch_v[HTTPC_HEADERS_MAX];
	size_t hch_n;
	int hch_overflow; /* an add failed: too many, CR/LF or ':' in a name, no memory */
};

struct httpc_request {
	const char *hcq_method; /* "POST" when NULL; "GET" and "HEAD" send no body */
	const char *hcq_url;    /* http:// or https:// */
	/* May be NULL. Host, framing and hop-by-hop fields are left out: the
	 * client writes its own. No Content-Type is added when none is given. */
	const struct httpc_headers *hcq_headers;
	const void *hcq_body;
	size_t hcq_body_len;
	size_t hcq_response_max; /* bytes of the answer's body kept; past it the transfer ends */
	unsigned hcq_connect_timeout_ms; /* 0: hcq_timeout_ms */
	unsigned hcq_timeout_ms;         /* the whole exchange */
	const char *hcq_ca_file;         /* PEM CA certificates to verify TLS peers with, or NULL */
	/* Optional: the one public key a TLS peer must hold, as
	 * crypto_pubkey_pin makes it; that key alone then authenticates the
	 * peer (neither the CA chain nor the host name is checked). For a
	 * call to our own listener over loopback, whose certificate names the
	 * public host. */
	const char *hcq_pinned_key;
};

/* Why no answer came back, where a caller acts on the kind. */
enum httpc_failure {
	HTTPC_FAILURE_OTHER = 0, /* an answer came; or no connection, a timeout, a reset... */
	/* TLS verification refused the peer (unknown CA, a certificate for
	 * another host name, expired, not the pinned key): another attempt
	 * fails alike. */
	HTTPC_FAILURE_TLS_VERIFY,
	/* An https:// address whose port answered the TLS handshake with
	 * something that is not TLS (a plain HTTP server): another attempt
	 * gets the same answer. */
	HTTPC_FAILURE_TLS_PLAIN,
	/* The CA file to verify TLS peers with (hcq_ca_file, else the
	 * system's) is missing, unreadable or holds no PEM certificate: the
	 * file is the problem, not the peer; err names it. */
	HTTPC_FAILURE_TLS_CA_FILE,
};

struct httpc_response {
	long hcr_status;                  /* the final answer's status (after any 1xx) */
	struct httpc_headers hcr_headers; /* the final answer's fields, in arrival order */
	char *hcr_body;                   /* NUL-terminated, may hold any bytes; owned */
	size_t hcr_body_len;
	int hcr_truncated; /* the body passed hcq_response_max: the rest was not read */
	enum httpc_failure hcr_failure; /* set when no answer came back, else HTTPC_FAILURE_OTHER */
};

/* init/finish work on caller-owned memory; finish frees the copies and
 * leaves the list empty. */
void httpc_headers_init(struct httpc_headers *h);
void httpc_headers_finish(struct httpc_headers *h);

/* Appends copies of name and value to the httpc_headers at arg (shaped for
 * provider p_sign's add_header). On failure sets hch_overflow instead. */
void httpc_headers_add(void *arg, const char *name, const char *value);

/* The length of s's longest prefix within max bytes that does not end
 * inside a UTF-8 sequence: where to cut a message (a row's error, a log
 * line) that must stay well-formed. */
size_t httpc_utf8_prefix(const char *s, size_t max);

/* The value of the first field called name (case-insensitive), or NULL. */
const char *httpc_headers_get(const struct httpc_headers *h, const char *name);

/* 1 when url is an http:// or https:// URL with a host, else 0. */
int httpc_url_ok(const char *url);

/* Checks a configured URL with libcurl's URL parser: http:// or https://,
 * a host, no userinfo (user, password or login options: libcurl would
 * connect to the host after the '@'), no white space. With credential != 0
 * (the requests to it carry a key), plain http:// is allowed only to a
 * loopback host (localhost, 127.0.0.0/8, ::1). Returns 0, or -1 with one
 * sentence in err. */
int httpc_url_check(const char *url, int credential, char *err, size_t err_size);

/* Joins base (an http:// or https:// URL: scheme, host, port and an
 * optional path prefix, no userinfo, query or fragment) and target (an
 * origin-form request target: "/path" with an optional "?query") into a
 * URL built part by part with libcurl's URL API, so that nothing in target
 * can change the scheme, host or port. Returns 0 with *ret malloc'd, or
 * -1 with one sentence in err (a target that is not origin-form, a bad
 * base, no memory). */
int httpc_url_join(const char *base, const char *target, char **ret, char *err, size_t err_size);

/* Sends req and waits for the answer. Returns 0 with ret filled (finish it
 * with httpc_response_finish) when an answer came back, whole or cut at the
 * cap (hcr_truncated); -1 with one sentence in err and ret zeroed but for
 * hcr_failure when none did: no connection, TLS verification failed, a
 * timeout, a malformed or oversized head. */
int httpc_exchange(const struct httpc_request *req, struct httpc_response *ret, char *err,
                   size_t err_size);

/* The value of the answer's first field called name (case-insensitive), or
 * NULL. */
const char *httpc_response_header(const struct httpc_response *r, const char *name);

/* Frees what the answer owns and zeroes it; a zeroed struct is a no-op. */
void httpc_response_finish(struct httpc_response *r);

/* ---- concurrent transfers, driven by one thread ---- */

struct httpc_multi;

/* NULL on failure (logged). */
struct httpc_multi *httpc_multi_create(void);

/* Ends the transfers still running (their answers are dropped) and frees.
 * NULL is a no-op. */
void httpc_multi_destroy(struct httpc_multi *m);

/* Starts req, copied whole (the caller may free it at once); arg comes back
 * with the result from httpc_multi_done. Returns 0, or -1 (logged). */
int httpc_multi_add(struct httpc_multi *m, const struct httpc_request *req, void *arg);

/* Moves the running transfers on without blocking. Returns 0 or -1 (logged). */
int httpc_multi_perform(struct httpc_multi *m);

/* Takes one finished transfer: returns 1 with its arg and its answer in ret
 * (as httpc_exchange: hcr_status 0, hcr_failure and err set when no answer
 * came back), or
 * 0 when none has finished. */
int httpc_multi_done(struct httpc_multi *m, void **ret_arg, struct httpc_response *ret, char *err,
                     size_t err_size);

/* Waits up to wait_ms for activity on the transfers or a wakeup. Returns 0
 * or -1 (logged). */
int httpc_multi_poll(struct httpc_multi *m, int wait_ms);

/* Ends a httpc_multi_poll early; callable from any thread. */
void httpc_multi_wakeup(struct httpc_multi *m);

#endif
