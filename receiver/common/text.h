/* text.h: small decoders for untrusted text shared by several modules. */
#ifndef IDEMHOOK_TEXT_H
#define IDEMHOOK_TEXT_H

#include <stddef.h>

/* The value of one hex digit (either case), or -1. */
int text_hex_value(int c);

/* Decodes one application/x-www-form-urlencoded component s[0..len): '+' is
 * a space, %XX a byte. Returns a malloc'd NUL-terminated string (at most len
 * bytes), or NULL when an escape is truncated or not hex, when it decodes to
 * a NUL byte, or when allocation fails. */
char *text_form_decode(const char *s, size_t len);

#endif
