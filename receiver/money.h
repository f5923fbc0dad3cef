/* money.h: exact amounts in integer minor units; never floating point. */
#ifndef IDEMHOOK_MONEY_H
#define IDEMHOOK_MONEY_H

#include <stddef.h>
#include <stdint.h>

#define MONEY_MAX_MINOR 1000000000000000LL /* 10^15 minor units: far past any payment */

/* Minor-unit exponent of an ISO 4217 code (case-insensitive): JPY 0,
 * USD/EUR/CNY 2, KWD/BHD 3, ...; -1 for a code that is not three letters.
 * Unknown well-formed codes default to 2. */
int money_exponent(const char *currency);

/* Parses a decimal string ("0.10", "12", "1999.5") into minor units of
 * currency: at most the currency's exponent of fraction digits, no sign, no
 * exponent, no spaces, at most MONEY_MAX_MINOR. Returns 0 or -1. */
int money_parse_decimal(const char *s, const char *currency, int64_t *ret_minor);

/* Parses a non-negative integer string of minor units. Returns 0 or -1. */
int money_parse_minor(const char *s, int64_t *ret_minor);

/* Formats minor units as a decimal string with the currency's exponent into
 * out (32 bytes room). */
void money_format(int64_t minor, const char *currency, char out[32]);

/* Upper-cases a 3-letter currency code into out[4]. Returns 0 or -1. */
int money_currency_normalize(const char *in, char out[4]);

#endif
