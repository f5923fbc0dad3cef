/* buf.h: a growable byte buffer with a hard cap, for untrusted and built data. */
#ifndef IDEMHOOK_BUF_H
#define IDEMHOOK_BUF_H

#include <stddef.h>

struct buf {
	char *buf_data; /* always NUL-terminated when buf_len > 0 or after buf_take */
	size_t buf_len;
	size_t buf_cap;
	size_t buf_max; /* 0 = unlimited */
	int buf_overflow; /* set once an append would pass buf_max; data freed */
};

/* init/finish work on caller-owned memory; max 0 means no cap. */
void buf_init(struct buf *b, size_t max);
void buf_finish(struct buf *b);

/* Append bytes; -1 on allocation failure or when the cap is passed (then the
 * buffer frees its data and stays in overflow state). */
int buf_append(struct buf *b, const void *data, size_t len);
/* Makes room for len more bytes at once (a length announced in advance),
 * so appends up to it do not reallocate. -1 when out of memory or when len
 * would pass the cap; the buffer is unchanged then. */
int buf_expect(struct buf *b, size_t len);
int buf_puts(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal, quotes included. */
int buf_json_string(struct buf *b, const char *s);

/* Hands the NUL-terminated data over to the caller (free()); the buffer is
 * empty afterwards. Never NULL unless allocation fails. */
char *buf_take(struct buf *b, size_t *ret_len);

#endif
