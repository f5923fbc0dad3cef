/* iso4217.h: the ISO 4217 table of iso4217.txt, embedded at build time. */
#ifndef IDEMHOOK_ISO4217_H
#define IDEMHOOK_ISO4217_H

#include <stddef.h>

struct iso4217_currency {
	char ic_code[4]; /* upper case */
	int ic_exponent; /* digits of the minor unit, 0..4 */
};

/* Sorted by code (byte order), no duplicates. */
extern const struct iso4217_currency iso4217_currencies[];
extern const size_t iso4217_count;

#endif
