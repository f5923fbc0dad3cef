/* money.c: exact decimal and minor-unit amounts with ISO 4217 exponents. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iso4217.h"
#include "money.h"

/* Upper-cases three ASCII letters into out[4]; -1 for anything else. */
static int money_code(const char *in, char out[4])
{
	size_t i;

	if (in == NULL) {
		return -1;
	}
	for (i = 0; i < 3; i++) {
		char c = in[i];

		if (c >= 'a' && c <= 'z') {
			c = (char)(c - 'a' + 'A');
		}
		if (c < 'A' || c > 'Z') {
			return -1;
		}
		out[i] = c;
	}
	if (in[3] != '\0') {
		return -1;
	}
	out[3] = '\0';
	return 0;
}

static int money_code_cmp(const void *key, const void *elem)
{
	const struct iso4217_currency *c = elem;

	return strcmp(key, c->ic_code);
}

/* The table entry of a code, or NULL. */
static const struct iso4217_currency *money_lookup(const char *currency)
{
	char code[4];

	if (money_code(currency, code) < 0) {
		return NULL;
	}
	return bsearch(code, iso4217_currencies, iso4217_count, sizeof(iso4217_currencies[0]),
	               money_code_cmp);
}

int money_currency_normalize(const char *in, char out[4])
{
	const struct iso4217_currency *c = money_lookup(in);

	if (c == NULL) {
		return -1;
	}
	memcpy(out, c->ic_code, 4);
	return 0;
}

int money_exponent(const char *currency)
{
	const struct iso4217_currency *c = money_lookup(currency);

	return c != NULL ? c->ic_exponent : -1;
}

int money_rescale(int64_t amount, int from_exp, int to_exp, int64_t *ret)
{
	int64_t v = amount;
	int e;

	if (amount < 0 || amount > MONEY_MAX_MINOR) {
		return -1;
	}
	for (e = from_exp; e > to_exp; e--) {
		if (v % 10 != 0) {
			return -1;
		}
		v /= 10;
	}
	for (e = from_exp; e < to_exp; e++) {
		if (v > MONEY_MAX_MINOR / 10) {
			return -1;
		}
		v *= 10;
	}
	*ret = v;
	return 0;
}

/* Accumulates one decimal digit; -1 past MONEY_MAX_MINOR. */
static int money_push_digit(int64_t *v, char c)
{
	if (*v > (MONEY_MAX_MINOR - (c - '0')) / 10) {
		return -1;
	}
	*v = *v * 10 + (c - '0');
	return 0;
}

int money_parse_minor(const char *s, int64_t *ret_minor)
{
	int64_t v = 0;
	size_t i;

	if (s == NULL || s[0] == '\0') {
		return -1;
	}
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9' || money_push_digit(&v, s[i]) != 0) {
			return -1;
		}
	}
	*ret_minor = v;
	return 0;
}

int money_parse_decimal(const char *s, const char *currency, int64_t *ret_minor)
{
	int exponent = money_exponent(currency);
	int64_t v = 0;
	int frac = 0;
	size_t i = 0;

	if (exponent < 0 || s == NULL) {
		return -1;
	}
	if (s[0] < '0' || s[0] > '9') {
		return -1;
	}
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		if (money_push_digit(&v, s[i]) != 0) {
			return -1;
		}
	}
	if (s[i] == '.') {
		i++;
		/* "12." is not a number anyone sends on purpose. */
		if (s[i] < '0' || s[i] > '9') {
			return -1;
		}
		for (; s[i] >= '0' && s[i] <= '9'; i++) {
			if (++frac > exponent || money_push_digit(&v, s[i]) != 0) {
				return -1;
			}
		}
	}
	if (s[i] != '\0') {
		return -1;
	}
	for (; frac < exponent; frac++) {
		if (money_push_digit(&v, '0') != 0) {
			return -1;
		}
	}
	*ret_minor = v;
	return 0;
}

void money_format(int64_t minor, const char *currency, char out[32])
{
	int exponent = money_exponent(currency);
	char tmp[32];
	size_t t = sizeof(tmp);
	size_t o = 0;
	uint64_t u;
	int digits = 0;

	if (exponent < 0) {
		exponent = 2;
	}
	u = minor < 0 ? (uint64_t)0 - (uint64_t)minor : (uint64_t)minor;
	/* Digits right to left; at least one before the point. */
	tmp[--t] = '\0';
	do {
		if (digits == exponent && exponent > 0) {
			tmp[--t] = '.';
		}
		tmp[--t] = (char)('0' + u % 10);
		u /= 10;
		digits++;
	} while (u > 0 || digits <= exponent);
	if (minor < 0) {
		out[o++] = '-';
	}
	memcpy(out + o, tmp + t, sizeof(tmp) - t);
}
