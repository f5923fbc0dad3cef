/* rawhttp.h: HTTP/1.1 as raw bytes over a socket, for tests that need exact
 * bytes on the wire, keep-alive connections they control, or clients that
 * send slowly. */
#ifndef IDEMHOOK_RAWHTTP_H
#define IDEMHOOK_RAWHTTP_H

#include <stddef.h>

/* Connects to 127.0.0.1:port, from the loopback address source (such as
 * "127.0.0.2") or NULL for any. Returns the socket, or -1. */
int rh_connect(const char *source, unsigned port);

/* Sends all of data; 0 or -1. */
int rh_send(int fd, const void *data, size_t len);

struct rh_response {
	int rr_status;
	char *rr_head; /* status line and header fields, NUL-terminated */
	char *rr_body;
	size_t rr_body_len;
	int rr_close; /* the answer said Connection: close */
};

/* Reads one response (its head and its Content-Length body) within
 * timeout_ms. Returns 1 with ret filled; 0 when the connection ended before
 * a byte of it came; -1 on a timeout, an error or a partial answer. */
int rh_read_response(int fd, int timeout_ms, struct rh_response *ret);
void rh_response_finish(struct rh_response *r);

/* The value of header name in r's head (malloc'd), or NULL. */
char *rh_header(const struct rh_response *r, const char *name);

/* Sends data on a new connection and reads one response (as
 * rh_read_response), then closes. */
int rh_exchange(unsigned port, const void *data, size_t len, int timeout_ms,
                struct rh_response *ret);

/* 1 when the peer closed fd (end of stream or reset) within timeout_ms,
 * reading and dropping what comes first; 0 if not. */
int rh_wait_closed(int fd, int timeout_ms);

/* How the peer ended fd within timeout_ms, reading and dropping what
 * comes first: 1 closed cleanly (end of stream), -1 reset (or another
 * error), 0 not within the time. */
int rh_wait_end(int fd, int timeout_ms);

/* 1 when the peer closed fd already (a check before reusing a kept-alive
 * connection, as careful clients do); 0 if it looks open. */
int rh_closed_now(int fd);

/* A plain HTTP server that answers whatever a connection sends first (a
 * TLS ClientHello too) with "HTTP/1.1 400 Bad Request", then closes the
 * way careful servers do: it shuts its side and reads until the client
 * closes, so no reset can overtake its answer. (libmicrohttpd, the peer's
 * server, closes some connections silently, as the random bytes of a
 * ClientHello happen to fall.) Connections are served one at a time. */
struct rh_plain;

/* Listens on 127.0.0.1 at a port of its own; NULL on failure. */
struct rh_plain *rh_plain_start(void);
/* A server as rh_plain's that reads what a connection sends first and
 * closes without a byte (as libmicrohttpd does with some ClientHellos);
 * stopped, counted and addressed as rh_plain's. NULL on failure. */
struct rh_plain *rh_silent_start(void);
unsigned rh_plain_port(const struct rh_plain *s);
/* The connections accepted so far. */
unsigned rh_plain_count(struct rh_plain *s);
void rh_plain_stop(struct rh_plain *s);

#endif
