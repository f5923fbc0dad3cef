/* buf.c: a growable byte buffer with a hard cap. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void buf_init(struct buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->buf_max = max;
}

void buf_finish(struct buf *b)
{
	free(b->buf_data);
	b->buf_data = NULL;
	b->buf_len = 0;
	b->buf_cap = 0;
}

static int buf_reserve(struct buf *b, size_t extra)
{
	size_t need;
	size_t cap;
	char *p;

	if (b->buf_overflow) {
		return -1;
	}
	need = b->buf_len + extra + 1;
	if (need < b->buf_len || (b->buf_max != 0 && b->buf_len + extra > b->buf_max)) {
		b->buf_overflow = 1;
		buf_finish(b);
		return -1;
	}
	if (need <= b->buf_cap) {
		return 0;
	}
	cap = b->buf_cap != 0 ? b->buf_cap : 256;
	while (cap < need) {
		cap *= 2;
	}
	p = realloc(b->buf_data, cap);
	if (p == NULL) {
		return -1;
	}
	b->buf_data = p;
	b->buf_cap = cap;
	return 0;
}

int buf_expect(struct buf *b, size_t len)
{
	if (b->buf_overflow || (b->buf_max != 0 && (len > b->buf_max || b->buf_len > b->buf_max - len))) {
		return -1;
	}
	return buf_reserve(b, len);
}

int buf_append(struct buf *b, const void *data, size_t len)
{
	if (buf_reserve(b, len) < 0) {
		return -1;
	}
	if (len > 0) {
		memcpy(b->buf_data + b->buf_len, data, len);
	}
	b->buf_len += len;
	b->buf_data[b->buf_len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0) {
		return -1;
	}
	va_start(ap, fmt);
	vsnprintf(b->buf_data + b->buf_len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->buf_len += (size_t)n;
	return 0;
}

int buf_json_string(struct buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (buf_puts(b, "\"") < 0) {
		return -1;
	}
	while (*p != '\0') {
		const unsigned char *run = p;
		int rc;

		/* A run of bytes that need no escape goes in with one append. */
		while (*p != '\0' && *p != '"' && *p != '\\' && *p >= 0x20) {
			p++;
		}
		if (p > run && buf_append(b, run, (size_t)(p - run)) < 0) {
			return -1;
		}
		if (*p == '\0') {
			break;
		}
		if (*p == '"' || *p == '\\') {
			char esc[2] = {'\\', (char)*p};
			rc = buf_append(b, esc, 2);
		} else {
			rc = buf_printf(b, "\\u%04x", *p);
		}
		if (rc < 0) {
			return -1;
		}
		p++;
	}
	return buf_puts(b, "\"");
}

char *buf_take(struct buf *b, size_t *ret_len)
{
	char *p;

	if (b->buf_data == NULL && buf_reserve(b, 0) < 0) {
		return NULL;
	}
	b->buf_data[b->buf_len] = '\0';
	p = b->buf_data;
	if (ret_len != NULL) {
		*ret_len = b->buf_len;
	}
	b->buf_data = NULL;
	b->buf_len = 0;
	b->buf_cap = 0;
	return p;
}
