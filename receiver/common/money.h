/* money.h: exact amounts in integer minor units; never floating point. */
#ifndef IDEMHOOK_MONEY_H
#define IDEMHOOK_MONEY_H

#include <stddef.h>
#include <stdint.h>

#define MONEY_MAX_MINOR 1000000000000000LL /* 10^15 minor units: far past any payment */

/* Minor-unit exponent of an ISO 4217 code (case-insensitive) from the
 * embedded table (iso4217.txt): JPY 0, USD/EUR/CNY 2, KWD/BHD 3, CLF 4; -1
 * for anything the table does not list ("QQQ", "US"). */
int money_exponent(const char *currency);

/* Converts an amount counted with from_exp fraction digits to to_exp digits
 * exactly: 50000 from 2 to 0 is 500; 500 from 0 to 2 is 50000. Returns 0, or
 * -1 when the amount is negative, would lose digits (50050 from 2 to 0) or
 * pass MONEY_MAX_MINOR. */
int money_rescale(int64_t amount, int from_exp, int to_exp, int64_t *ret);

/* Parses a decimal string ("0.10", "12", "1999.5") into minor units of
 * currency: at most the currency's exponent of fraction digits, no sign, no
 * exponent, no spaces, at most MONEY_MAX_MINOR. Returns 0 or -1. */
int money_parse_decimal(const char *s, const char *currency, int64_t *ret_minor);

/* Parses a non-negative integer string of minor units. Returns 0 or -1. */
int money_parse_minor(const char *s, int64_t *ret_minor);

/* Formats minor units as a decimal string with the currency's exponent into
 * out (32 bytes room). */
void money_format(int64_t minor, const char *currency, char out[32]);

/* Upper-cases a currency code into out[4]. Returns 0 when it is an ISO 4217
 * code of the embedded table ("usd" gives "USD"), or -1 ("QQQ", "abc", "US"). */
int money_currency_normalize(const char *in, char out[4]);

#endif
