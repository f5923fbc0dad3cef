/* peer.h: a real HTTP test peer (libmicrohttpd) on an ephemeral loopback
 * port: answers each request as scripted (200, any status, 429 with
 * Retry-After, hang, close, drip, oversized body), or as a handler computes
 * from the request (a provider's API fake), and records what it got. */
#ifndef IDEMHOOK_PEER_H
#define IDEMHOOK_PEER_H

#include <stddef.h>
#include <stdint.h>

#define PEER_HEADERS_MAX 8 /* extra answer header fields */

enum peer_action {
	PEER_REPLY = 0,   /* pb_status (default 200) with pb_body */
	PEER_RETRY_AFTER, /* 429 with Retry-After: pb_retry_after */
	PEER_HANG,        /* say nothing for pb_ms (or until peer_destroy), then close */
	PEER_CLOSE,       /* close the connection without an answer */
	PEER_DRIP,        /* 200, then pb_size bytes one per pb_ms */
	PEER_HUGE,        /* pb_status (default 200) with a body of pb_size bytes */
};

struct peer_behaviour {
	enum peer_action pb_action;
	int pb_status;
	const char *pb_body;        /* copied; NULL = "{}" */
	const char *pb_retry_after; /* header value, e.g. "2" or an HTTP-date */
	unsigned pb_ms;
	size_t pb_size;
	const char
	        *pb_headers[PEER_HEADERS_MAX]; /* more "Name: value" fields (copied), NULL-ended */
};

/* One request as received (owned by the peer; copy what you keep). */
struct peer_request {
	char *pq_method;
	char *pq_path;
	char *pq_query;    /* what followed '?' in the request line, as sent; "" when nothing */
	char *pq_idem_key; /* Idempotency-Key, or NULL */
	char *pq_content_type;
	char *pq_authorization;
	char *pq_webhook_id;
	char *pq_webhook_timestamp;
	char *pq_webhook_signature;
	char *pq_stripe_context; /* Stripe-Context, or NULL */
	char *pq_body; /* NUL-terminated */
	size_t pq_body_len;
	int64_t pq_at_ms;           /* when the body was complete */
	enum peer_action pq_action; /* what the peer did with it */
};

struct peer;

/* Starts listening on 127.0.0.1 with an ephemeral port; NULL on failure. */
struct peer *peer_create(void);

/* The same on a given port (0: ephemeral), for a target that comes back
 * where it was; NULL on failure (the port is taken). */
struct peer *peer_create_on(unsigned port);

/* The same over TLS, on an ephemeral port: a self-signed certificate for
 * 127.0.0.1 made in dir (openssl), which no system CA trusts; peer_base
 * says "https://127.0.0.1:PORT". NULL on failure. */
struct peer *peer_create_tls(const char *dir);

/* peer_create_tls: the file of the peer's certificate, the CA a client
 * must trust; "" for a plain peer. */
const char *peer_ca(const struct peer *p);

/* Stops (hanging requests are released) and frees. NULL is a no-op. */
void peer_destroy(struct peer *p);

/* "http://127.0.0.1:PORT" ("https://" from peer_create_tls) */
const char *peer_base(const struct peer *p);

/* The behaviour for requests to path (NULL: any path) once its script is used up. */
int peer_default(struct peer *p, const char *path, const struct peer_behaviour *b);

/* Appends b to the script of path (NULL: any path); each request takes the
 * first scripted behaviour whose path matches, else the default. */
int peer_script(struct peer *p, const char *path, const struct peer_behaviour *b);

/* A fake's answer to one request: fn fills ret (zeroed, pb_action
 * PEER_REPLY) from req; the peer copies what ret points to at once, then
 * calls done(arg, ret) (may be NULL) so fn's strings can be freed. Runs on
 * the peer's connection threads, one call per request. */
typedef void (*peer_handler_fn)(void *arg, const struct peer_request *req,
                                struct peer_behaviour *ret);

/* Requests whose path starts with prefix that no script step takes are
 * answered by fn. Returns 0, or -1 when the table is full. */
int peer_handler(struct peer *p, const char *prefix, peer_handler_fn fn,
                 void (*done)(void *arg, struct peer_behaviour *ret), void *arg);

/* How many requests have been received so far. */
size_t peer_count(struct peer *p);

/* Waits until at least n requests were received or timeout_ms passed;
 * returns the count. */
size_t peer_wait(struct peer *p, size_t n, int timeout_ms);

/* Copies request i (0 = first) into ret (free with peer_request_finish).
 * Returns 0, or -1 when there is no such request. */
int peer_request(struct peer *p, size_t i, struct peer_request *ret);
void peer_request_finish(struct peer_request *r);

/* Convenience behaviours. */
struct peer_behaviour peer_reply(int status, const char *body);

#endif
