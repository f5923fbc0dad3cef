/* test_money.c: unit tests for exact amount parsing and formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

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
	assert_int_equal(money_exponent("XYZ"), 2);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_money_exponents_follow_iso_4217),
	        cmocka_unit_test(test_money_parse_decimal_is_exact_in_minor_units),
	        cmocka_unit_test(test_money_parse_decimal_rejects_malformed_amounts),
	        cmocka_unit_test(test_money_parse_minor_takes_only_plain_digits),
	        cmocka_unit_test(test_money_format_uses_the_currency_exponent),
	        cmocka_unit_test(test_money_currency_normalize_upper_cases_three_letters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
