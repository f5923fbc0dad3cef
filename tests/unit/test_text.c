/* test_text.c: the shared hex and form-urlencoded decoders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "text.h"

static void test_hex_digits_decode_in_either_case_and_others_are_refused(void **state)
{
	assert_int_equal(text_hex_value('0'), 0);
	assert_int_equal(text_hex_value('9'), 9);
	assert_int_equal(text_hex_value('a'), 10);
	assert_int_equal(text_hex_value('F'), 15);
	assert_int_equal(text_hex_value('g'), -1);
	assert_int_equal(text_hex_value('/'), -1);
	assert_int_equal(text_hex_value(0xff), -1);
}

static void test_form_component_decodes_plus_and_percent_escapes(void **state)
{
	char *s = text_form_decode("a+b%3D%e4%B8%ad", 15);

	assert_non_null(s);
	assert_string_equal(s, "a b=\xe4\xb8\xad");
	free(s);
	s = text_form_decode("", 0);
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
	/* Only len bytes are read. */
	s = text_form_decode("ab%41", 2);
	assert_string_equal(s, "ab");
	free(s);
}

static void test_malformed_form_escapes_are_refused(void **state)
{
	assert_null(text_form_decode("%4", 2));
	assert_null(text_form_decode("100%", 4));
	assert_null(text_form_decode("%zz", 3));
	assert_null(text_form_decode("a%00b", 5));
	assert_null(text_form_decode("ab%41", 4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hex_digits_decode_in_either_case_and_others_are_refused),
		cmocka_unit_test(test_form_component_decodes_plus_and_percent_escapes),
		cmocka_unit_test(test_malformed_form_escapes_are_refused),
	};

	return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
