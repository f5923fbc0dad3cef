/* text.c: small decoders for untrusted text shared by several modules. */
#include <stdlib.h>

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
