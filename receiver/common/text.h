/* text.h: small decoders and checks for untrusted text shared by several
 * modules. */
#ifndef IDEMHOOK_TEXT_H
#define IDEMHOOK_TEXT_H

#include <stddef.h>

struct buf;

/* The value of one hex digit (either case), or -1. */
int text_hex_value(int c);

/* Decodes one application/x-www-form-urlencoded component s[0..len): '+' is
 * a space, %XX a byte. Returns a malloc'd NUL-terminated string (at most len
 * bytes), or NULL when an escape is truncated or not hex, when it decodes to
 * a NUL byte, or when allocation fails. */
char *text_form_decode(const char *s, size_t len);

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF; p < end), or 0. */
size_t text_utf8_len(const unsigned char *p, const unsigned char *end);

/* 1 when s is a short text a person gave (an order's customer_ref, a line
 * item's sku or name): 1 to max_bytes bytes of well-formed UTF-8 without
 * control characters (U+0000-U+001F, U+007F-U+009F); else 0. The order
 * API, the checkout page and the CLI all check with this one rule. */
int text_field_ok(const char *s, size_t max_bytes);

/* Appends s[0..len) to b as a terminal may show it: well-formed UTF-8 as
 * it is; a backslash doubled; newline, CR and tab as \n \r \t; any other
 * C0 control, DEL and a byte that is not UTF-8 as \xNN; a C1 control as
 * \u00NN. So stored text can neither move the cursor, colour the screen
 * nor forge a line. as_received (a payload): newlines, tabs and
 * backslashes stay, so the text reads as it came (JSON stays JSON).
 * Returns 0 or -1 (buf_append failed). */
int text_printable(struct buf *b, const void *s, size_t len, int as_received);

/* Appends s[0..len) to b as a JSON string literal, quotes included, that
 * is valid JSON and safe on a terminal whatever s holds (the CLI's --json
 * output of stored text): well-formed UTF-8 as it is; '"' and backslash
 * escaped; newline, CR and tab as \n \r \t; any other C0 control and DEL
 * as \u00NN; a C1 control (U+0080-U+009F) as \u0080-\u009f; each byte
 * that is not part of well-formed UTF-8 as \ufffd (the replacement
 * character: JSON has no way to carry the byte itself). buf_json_string,
 * whose bytes stored replies keep, is not this. Returns 0 or -1
 * (buf_append failed). */
int text_json_string(struct buf *b, const void *s, size_t len);

/* Copies the JSON text s[0..len) (what a JSON printer made, or what
 * json_parse_strict accepts) to b with each C1 control and DEL as its \u
 * escape and each byte that is not part of well-formed UTF-8 as \ufffd.
 * Outside its strings JSON text is ASCII, so these occur only inside
 * strings: the result is the same document, valid JSON and safe on a
 * terminal whatever its strings held. Returns 0 or -1 (buf_append
 * failed). */
int text_json_clean(struct buf *b, const void *s, size_t len);

#endif
