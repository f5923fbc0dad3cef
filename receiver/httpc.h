/* httpc.h: a small blocking HTTP/1.1 client over plain TCP (libcurl stays in outbound.c). */
#ifndef IDEMHOOK_HTTPC_H
#define IDEMHOOK_HTTPC_H

#include <stddef.h>

#include "http.h"

#define HTTPC_HEAD_MAX (64 * 1024) /* bytes of an answer's status line and headers */
#define HTTPC_HEADERS_MAX 128      /* fields per list or answer: a whole captured request fits */
#define HTTPC_ERR_MAX 256          /* bytes of an error message, NUL included */

/* Header fields to send, owned (copies). */
struct httpc_headers {
	struct http_header hch_v[HTTPC_HEADERS_MAX];
	size_t hch_n;
	int hch_overflow; /* an add failed: too many, CR/LF or ':' in a name, no memory */
};

struct httpc_request {
	const char *hcq_method;
	/* Numeric address without brackets, also sent as Host. A name is looked
	 * up by the system resolver, which the timeout does not bound. */
	const char *hcq_host;
	unsigned hcq_port;
	const char *hcq_target;                  /* path and query, sent as they are */
	const struct httpc_headers *hcq_headers; /* may be NULL */
	const void *hcq_body;
	size_t hcq_body_len;
	size_t hcq_answer_max;   /* bytes of the answer's body as sent (chunk framing included) */
	unsigned hcq_timeout_ms; /* for the connect, for sending, for the whole answer: each */
};

struct httpc_response {
	int hcr_status;
	struct http_header *hcr_headers; /* arrival order; point into hcr_raw */
	size_t hcr_n_headers;
	char *hcr_body; /* into hcr_raw; NUL-terminated, may hold any bytes */
	size_t hcr_body_len;
	char *hcr_raw; /* the whole answer, owned */
};

/* init/finish work on caller-owned memory; finish frees the copies and
 * leaves the list empty. */
void httpc_headers_init(struct httpc_headers *h);
void httpc_headers_finish(struct httpc_headers *h);

/* Appends copies of name and value to the httpc_headers at arg (shaped for
 * provider p_sign's add_header). On failure sets hch_overflow instead. */
void httpc_headers_add(void *arg, const char *name, const char *value);

/* The value of the first field called name (case-insensitive), or NULL. */
const char *httpc_headers_get(const struct httpc_headers *h, const char *name);

/* Connects to req's address, sends the request with Host, Content-Length
 * and "Connection: close" of its own (framing and hop-by-hop fields in
 * hcq_headers are left out), and reads the whole answer. Returns 0 with ret
 * filled (finish it with httpc_response_finish), or -1 with err set and ret
 * untouched: no connection, a timeout, an answer over the cap or not HTTP. */
int httpc_exchange(const struct httpc_request *req, struct httpc_response *ret, char *err,
                   size_t err_size);

/* The value of the answer's first field called name (case-insensitive), or
 * NULL. */
const char *httpc_response_header(const struct httpc_response *r, const char *name);

/* Frees what the answer owns and zeroes it; a zeroed struct is a no-op. */
void httpc_response_finish(struct httpc_response *r);

#endif
