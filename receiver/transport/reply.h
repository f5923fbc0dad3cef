/* reply.h: an HTTP reply as the store keeps and replays it, byte for byte. */
#ifndef IDEMHOOK_REPLY_H
#define IDEMHOOK_REPLY_H

#include <stddef.h>

struct reply {
	int reply_status; /* HTTP status code */
	char *reply_content_type; /* NULL when there is no body */
	char *reply_headers; /* extra headers as "Name: value\n" lines, or NULL */
	char *reply_body; /* may hold any bytes; NUL-terminated for convenience */
	size_t reply_body_len;
};

/* init/finish work on caller-owned memory; finish frees what the reply owns
 * and leaves it initialized again. */
void reply_init(struct reply *r);
void reply_finish(struct reply *r);

/* Replaces status, content type and body with copies; -1 on allocation
 * failure (reply unchanged). content_type may be NULL for an empty body. */
int reply_set(struct reply *r, int status, const char *content_type, const void *body, size_t len);

/* Takes ownership of body (malloc'd, NUL-terminated) instead of copying. */
int reply_set_take(struct reply *r, int status, const char *content_type, char *body, size_t len);

/* Appends one header line; name and value must hold no CR/LF. */
int reply_add_header(struct reply *r, const char *name, const char *value);

/* Calls fn for each stored extra header, in order. */
void reply_each_header(const struct reply *r, void (*fn)(void *arg, const char *name, const char *value),
		       void *arg);

/* Deep copy; -1 on allocation failure (dst untouched). */
int reply_copy(struct reply *dst, const struct reply *src);

/* RFC 9457 problem details: status, "type" as "urn:idemhook:problem:<slug>",
 * title and optional detail, content type application/problem+json. */
int reply_problem(struct reply *r, int status, const char *slug, const char *title, const char *detail);

#endif
