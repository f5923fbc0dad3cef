/* test_text.c: the shared hex and form-urlencoded decoders, and the byte buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
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

/* An announced length is room made at once: appends up to it keep the
 * same memory; past the cap it is refused and the buffer is as it was. */
static void test_buf_expect_makes_room_once_and_respects_the_cap(void **state)
{
	char chunk[100];
	struct buf b;
	const char *data;
	int i;

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	buf_init(&b, 1000);
	assert_int_equal(buf_append(&b, "ab", 2), 0);
	assert_int_equal(buf_expect(&b, 999), -1); /* 2 + 999 > 1000 */
	assert_int_equal(b.buf_overflow, 0);
	assert_string_equal(b.buf_data, "ab");
	assert_int_equal(buf_expect(&b, 998), 0);
	assert_true(b.buf_cap >= 1001);
	data = b.buf_data;
	for (i = 0; i < 9; i++) {
		assert_int_equal(buf_append(&b, chunk, sizeof(chunk)), 0);
	}
	assert_int_equal(buf_append(&b, chunk, 98), 0);
	assert_ptr_equal(b.buf_data, data);
	assert_int_equal(b.buf_len, 1000);
	assert_int_equal(buf_append(&b, "y", 1), -1); /* the cap, as before */
	assert_int_equal(b.buf_overflow, 1);
	assert_int_equal(buf_expect(&b, 1), -1);
	buf_finish(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hex_digits_decode_in_either_case_and_others_are_refused),
		cmocka_unit_test(test_form_component_decodes_plus_and_percent_escapes),
		cmocka_unit_test(test_malformed_form_escapes_are_refused),
		cmocka_unit_test(test_buf_expect_makes_room_once_and_respects_the_cap),
	};

	return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
