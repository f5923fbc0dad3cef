/* money.c: exact decimal and minor-unit amounts with ISO 4217 exponents. */
#include <stdint.h>
#include <string.h>

#include "money.h"

struct money_exp {
	const char *me_code;
	int me_exponent;
};

/* ISO 4217 codes whose minor unit is not the usual 2 digits. */
static const struct money_exp money_exceptions[] = {
        {"BHD", 3}, {"BIF", 0}, {"CLF", 4}, {"CLP", 0}, {"DJF", 0}, {"GNF", 0}, {"IQD", 3},
        {"ISK", 0}, {"JOD", 3}, {"JPY", 0}, {"KMF", 0}, {"KRW", 0}, {"KWD", 3}, {"LYD", 3},
        {"OMR", 3}, {"PYG", 0}, {"RWF", 0}, {"TND", 3}, {"UGX", 0}, {"UYI", 0}, {"UYW", 4},
        {"VND", 0}, {"VUV", 0}, {"XAF", 0}, {"XOF", 0}, {"XPF", 0},
};

int money_currency_normalize(const char *in, char out[4])
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

int money_exponent(const char *currency)
{
	char code[4];
	size_t i;

	if (money_currency_normalize(currency, code) != 0) {
		return -1;
	}
	for (i = 0; i < sizeof(money_exceptions) / sizeof(money_exceptions[0]); i++) {
		if (strcmp(money_exceptions[i].me_code, code) == 0) {
			return money_exceptions[i].me_exponent;
		}
	}
	return 2;
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
