/* text.c: small decoders and checks for untrusted text shared by several
 * modules. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "text.h"

int text_hex_value(int c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

char *text_form_decode(const char *s, size_t len)
{
	char *out = malloc(len + 1);
	size_t o = 0;
	size_t i;

	if (out == NULL) {
		return NULL;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			int hi;
			int lo;

			if (i + 2 >= len) {
				goto fail;
			}
			hi = text_hex_value((unsigned char)s[i + 1]);
			lo = text_hex_value((unsigned char)s[i + 2]);
			if (hi < 0 || lo < 0) {
				goto fail;
			}
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '\0') {
			goto fail;
		}
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

size_t text_utf8_len(const unsigned char *p, const unsigned char *end)
{
	size_t avail = (size_t)(end - p);
	unsigned char lo = 0x80;
	unsigned char hi = 0xbf;
	size_t n;
	size_t i;

	if (p[0] < 0x80) {
		return 1;
	}
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		lo = p[0] == 0xe0 ? 0xa0 : 0x80;
		hi = p[0] == 0xed ? 0x9f : 0xbf;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		lo = p[0] == 0xf0 ? 0x90 : 0x80;
		hi = p[0] == 0xf4 ? 0x8f : 0xbf;
	} else {
		return 0;
	}
	if (avail < n || p[1] < lo || p[1] > hi) {
		return 0;
	}
	for (i = 2; i < n; i++) {
		if (p[i] < 0x80 || p[i] > 0xbf) {
			return 0;
		}
	}
	return n;
}

/* 1 when the well-formed sequence p[0..n) is a C0 or C1 control or DEL. */
static int text_is_control(const unsigned char *p, size_t n)
{
	if (n == 1) {
		return p[0] < 0x20 || p[0] == 0x7f;
	}
	/* U+0080-U+009F: C2 80 to C2 9F. */
	return n == 2 && p[0] == 0xc2 && p[1] <= 0x9f;
}

int text_field_ok(const char *s, size_t max_bytes)
{
	const unsigned char *p = (const unsigned char *)s;
	const unsigned char *end;
	size_t len = strlen(s);

	if (len == 0 || len > max_bytes) {
		return 0;
	}
	end = p + len;
	while (p < end) {
		size_t n = text_utf8_len(p, end);

		if (n == 0 || text_is_control(p, n)) {
			return 0;
		}
		p += n;
	}
	return 1;
}

/* Whether the well-formed sequence p[0..n) goes in as it is, and the escape
 * of one that does not (n 0: a byte that is not UTF-8), for text_escape;
 * opt is the caller's option (text_printable's as_received). */
typedef int (*text_keep_fn)(const unsigned char *p, size_t n, int opt);
typedef int (*text_esc_fn)(struct buf *b, const unsigned char *p, size_t n, int opt);

/* Appends s[0..len) to b: each run that keep passes with one append, every
 * other sequence through esc. Returns 0, or -1 when out of memory. */
static int text_escape(struct buf *b, const void *s, size_t len, text_keep_fn keep, text_esc_fn esc,
                       int opt)
{
	const unsigned char *p = s;
	const unsigned char *end = p + len;

	while (p < end) {
		const unsigned char *run = p;
		size_t n = 0;

		while (p < end && (n = text_utf8_len(p, end)) > 0 && keep(p, n, opt)) {
			p += n;
		}
		if (p > run && buf_append(b, run, (size_t)(p - run)) < 0) {
			return -1;
		}
		if (p >= end) {
			break;
		}
		if (esc(b, p, n, opt) < 0) {
			return -1;
		}
		p += n > 0 ? n : 1;
	}
	return 0;
}

/* The escapes both grammars share: a C1 control, newline, return, tab.
 * Returns 1 when p is none of them (nothing appended). */
static int text_esc_shared(struct buf *b, const unsigned char *p, size_t n)
{
	if (n == 2) {
		return buf_printf(b, "\\u00%02x", p[1]) < 0 ? -1 : 0;
	}
	switch (p[0]) {
	case '\n':
		return buf_puts(b, "\\n");
	case '\r':
		return buf_puts(b, "\\r");
	case '\t':
		return buf_puts(b, "\\t");
	default:
		return 1;
	}
}

static int text_printable_keep(const unsigned char *p, size_t n, int as_received)
{
	return !text_is_control(p, n) && (p[0] != '\\' || as_received);
}

static int text_printable_esc(struct buf *b, const unsigned char *p, size_t n, int as_received)
{
	int rc;

	if (n == 0) {
		return buf_printf(b, "\\x%02x", p[0]) < 0 ? -1 : 0;
	}
	if (as_received && (p[0] == '\n' || p[0] == '\t')) {
		return buf_append(b, p, 1);
	}
	if (p[0] == '\\') {
		return buf_puts(b, "\\\\");
	}
	rc = text_esc_shared(b, p, n);
	return rc <= 0 ? rc : (buf_printf(b, "\\x%02x", p[0]) < 0 ? -1 : 0);
}

int text_printable(struct buf *b, const void *s, size_t len, int as_received)
{
	return text_escape(b, s, len, text_printable_keep, text_printable_esc, as_received);
}

static int text_json_keep(const unsigned char *p, size_t n, int opt)
{
	(void)opt;
	return !text_is_control(p, n) && p[0] != '"' && p[0] != '\\';
}

static int text_json_esc(struct buf *b, const unsigned char *p, size_t n, int opt)
{
	int rc;

	(void)opt;
	if (n == 0) {
		return buf_puts(b, "\\ufffd");
	}
	if (p[0] == '"' || p[0] == '\\') {
		char esc[2] = {'\\', (char)p[0]};

		return buf_append(b, esc, 2);
	}
	rc = text_esc_shared(b, p, n);
	return rc <= 0 ? rc : (buf_printf(b, "\\u%04x", p[0]) < 0 ? -1 : 0);
}

int text_json_string(struct buf *b, const void *s, size_t len)
{
	if (buf_puts(b, "\"") < 0 || text_escape(b, s, len, text_json_keep, text_json_esc, 0) < 0) {
		return -1;
	}
	return buf_puts(b, "\"");
}

/* Only what a JSON text may hold raw and a terminal would act on. */
static int text_clean_keep(const unsigned char *p, size_t n, int opt)
{
	(void)opt;
	return p[0] != 0x7f && !(n == 2 && text_is_control(p, n));
}

static int text_clean_esc(struct buf *b, const unsigned char *p, size_t n, int opt)
{
	(void)opt;
	if (n == 0) {
		return buf_puts(b, "\\ufffd");
	}
	if (n == 2) {
		return buf_printf(b, "\\u00%02x", p[1]) < 0 ? -1 : 0;
	}
	return buf_puts(b, "\\u007f");
}

int text_json_clean(struct buf *b, const void *s, size_t len)
{
	return text_escape(b, s, len, text_clean_keep, text_clean_esc, 0);
}
