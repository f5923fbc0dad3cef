/* test_money.c: unit tests for exact amount parsing and formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "iso4217.h"
#include "money.h"

static void test_money_exponents_follow_iso_4217(void **state)
{
	(void)state;
	assert_int_equal(money_exponent("JPY"), 0);
	assert_int_equal(money_exponent("jpy"), 0);
	assert_int_equal(money_exponent("USD"), 2);
	assert_int_equal(money_exponent("EUR"), 2);
	assert_int_equal(money_exponent("CNY"), 2);
	assert_int_equal(money_exponent("KWD"), 3);
	assert_int_equal(money_exponent("BHD"), 3);
	assert_int_equal(money_exponent("ISK"), 0);
	assert_int_equal(money_exponent("UGX"), 0);
	assert_int_equal(money_exponent("HUF"), 2);
	assert_int_equal(money_exponent("CLF"), 4);
	assert_int_equal(money_exponent("XCG"), 2);
	/* Not ISO 4217 codes: unknown, not a guess. */
	assert_int_equal(money_exponent("XYZ"), -1);
	assert_int_equal(money_exponent("QQQ"), -1);
	assert_int_equal(money_exponent("XAU"), -1);
	assert_int_equal(money_exponent("US"), -1);
	assert_int_equal(money_exponent("USDX"), -1);
	assert_int_equal(money_exponent("U$D"), -1);
}

static void test_money_parse_decimal_is_exact_in_minor_units(void **state)
{
	int64_t v = -1;

	(void)state;
	assert_int_equal(money_parse_decimal("0.10", "CNY", &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(money_parse_decimal("0.1", "CNY", &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(money_parse_decimal("12", "USD", &v), 0);
	assert_int_equal(v, 1200);
	assert_int_equal(money_parse_decimal("1999.5", "EUR", &v), 0);
	assert_int_equal(v, 199950);
	assert_int_equal(money_parse_decimal("1999", "JPY", &v), 0);
	assert_int_equal(v, 1999);
	assert_int_equal(money_parse_decimal("1.234", "KWD", &v), 0);
	assert_int_equal(v, 1234);
	/* 0.29 is not representable in binary floating point; here it stays 29. */
	assert_int_equal(money_parse_decimal("0.29", "USD", &v), 0);
	assert_int_equal(v, 29);
	assert_int_equal(money_parse_decimal("10000000000000.00", "USD", &v), 0);
	assert_int_equal(v, MONEY_MAX_MINOR);
}

static void test_money_parse_decimal_rejects_malformed_amounts(void **state)
{
	const char *bad[] = {"",
	                     "-1",
	                     "+1",
	                     "1.",
	                     ".5",
	                     "1.234",
	                     "1e3",
	                     " 1",
	                     "1 ",
	                     "1,00",
	                     "1.2.3",
	                     "0x10",
	                     "10000000000000.01",
	                     "99999999999999999999"};
	int64_t v = 7;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(money_parse_decimal(bad[i], "USD", &v), -1);
	}
	assert_int_equal(money_parse_decimal("1.5", "JPY", &v), -1);
	assert_int_equal(money_parse_decimal("1.00", "US", &v), -1);
	assert_int_equal(v, 7);
}

static void test_money_parse_minor_takes_only_plain_digits(void **state)
{
	int64_t v = -1;

	(void)state;
	assert_int_equal(money_parse_minor("1999", &v), 0);
	assert_int_equal(v, 1999);
	assert_int_equal(money_parse_minor("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(money_parse_minor("", &v), -1);
	assert_int_equal(money_parse_minor("-5", &v), -1);
	assert_int_equal(money_parse_minor("1.0", &v), -1);
	assert_int_equal(money_parse_minor("1000000000000001", &v), -1);
}

static void test_money_format_uses_the_currency_exponent(void **state)
{
	char out[32];

	(void)state;
	money_format(1999, "USD", out);
	assert_string_equal(out, "19.99");
	money_format(5, "CNY", out);
	assert_string_equal(out, "0.05");
	money_format(1999, "JPY", out);
	assert_string_equal(out, "1999");
	money_format(1234, "KWD", out);
	assert_string_equal(out, "1.234");
	money_format(-150, "EUR", out);
	assert_string_equal(out, "-1.50");
}

static void test_money_currency_normalize_upper_cases_three_letters(void **state)
{
	char out[4];

	(void)state;
	assert_int_equal(money_currency_normalize("usd", out), 0);
	assert_string_equal(out, "USD");
	assert_int_equal(money_currency_normalize("us", out), -1);
	assert_int_equal(money_currency_normalize("usdd", out), -1);
	assert_int_equal(money_currency_normalize("u1d", out), -1);
}

static void test_money_currency_normalize_refuses_codes_iso_4217_does_not_list(void **state)
{
	char out[4] = "";

	(void)state;
	assert_int_equal(money_currency_normalize("QQQ", out), -1);
	assert_int_equal(money_currency_normalize("abc", out), -1);
	assert_int_equal(money_currency_normalize("HRK", out), -1); /* withdrawn in 2023 */
	assert_string_equal(out, "");
	assert_int_equal(money_currency_normalize("jpy", out), 0);
	assert_string_equal(out, "JPY");
	assert_int_equal(money_currency_normalize("Zwg", out), 0);
	assert_string_equal(out, "ZWG");
	assert_int_equal(money_currency_normalize(NULL, out), -1);
}

static void test_money_rescale_converts_exactly_between_exponents(void **state)
{
	int64_t v = -1;

	(void)state;
	assert_int_equal(money_rescale(50000, 2, 0, &v), 0);
	assert_int_equal(v, 500);
	assert_int_equal(money_rescale(500, 0, 2, &v), 0);
	assert_int_equal(v, 50000);
	assert_int_equal(money_rescale(1999, 2, 2, &v), 0);
	assert_int_equal(v, 1999);
	v = 7;
	assert_int_equal(money_rescale(50050, 2, 0, &v), -1); /* would lose the 50 */
	assert_int_equal(money_rescale(-100, 2, 0, &v), -1);
	assert_int_equal(money_rescale(MONEY_MAX_MINOR, 0, 2, &v), -1);
	assert_int_equal(v, 7);
}

static void test_money_table_is_sorted_and_every_code_normalizes(void **state)
{
	char out[4];
	char lower[4];
	size_t i;

	(void)state;
	assert_true(iso4217_count > 150);
	for (i = 0; i < iso4217_count; i++) {
		const struct iso4217_currency *c = &iso4217_currencies[i];

		/* bsearch needs strictly ascending codes. */
		if (i > 0) {
			assert_true(strcmp(iso4217_currencies[i - 1].ic_code, c->ic_code) < 0);
		}
		assert_in_range(c->ic_exponent, 0, 4);
		lower[0] = (char)(c->ic_code[0] - 'A' + 'a');
		lower[1] = (char)(c->ic_code[1] - 'A' + 'a');
		lower[2] = (char)(c->ic_code[2] - 'A' + 'a');
		lower[3] = '\0';
		assert_int_equal(money_currency_normalize(lower, out), 0);
		assert_string_equal(out, c->ic_code);
		assert_int_equal(money_exponent(c->ic_code), c->ic_exponent);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_money_exponents_follow_iso_4217),
	        cmocka_unit_test(test_money_parse_decimal_is_exact_in_minor_units),
	        cmocka_unit_test(test_money_parse_decimal_rejects_malformed_amounts),
	        cmocka_unit_test(test_money_parse_minor_takes_only_plain_digits),
	        cmocka_unit_test(test_money_format_uses_the_currency_exponent),
	        cmocka_unit_test(test_money_currency_normalize_upper_cases_three_letters),
	        cmocka_unit_test(
	                test_money_currency_normalize_refuses_codes_iso_4217_does_not_list),
	        cmocka_unit_test(test_money_rescale_converts_exactly_between_exponents),
	        cmocka_unit_test(test_money_table_is_sorted_and_every_code_normalizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
