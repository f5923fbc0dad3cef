/* test_text.c: the shared hex and form-urlencoded decoders, the rule for
 * short texts people give, the escaping for terminals, and the byte buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "json.h"
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

/* One rule for customer_ref and line item texts, wherever they come in:
 * 1 to max bytes of UTF-8 without a C0 control, DEL or a C1 control. */
static void test_field_text_is_utf8_without_controls_within_its_length(void **state)
{
	char long_text[130];

	(void)state;
	assert_true(text_field_ok("cust_42", 128));
	assert_true(text_field_ok("Zo\xc3\xab <b>&", 128));              /* ë, markup is text */
	assert_true(text_field_ok("\xe4\xb8\xad\xf0\x9f\x98\x80", 128)); /* 中, an emoji */
	assert_true(text_field_ok("\xc2\xa0nbsp", 128)); /* U+00A0: past the C1 block */
	assert_false(text_field_ok("", 128));
	assert_false(text_field_ok("a\nb", 128));
	assert_false(text_field_ok("a\tb", 128));
	assert_false(text_field_ok("\x1b[31mRED", 128));
	assert_false(text_field_ok("a\x7f", 128));
	assert_false(text_field_ok("a\302\205b", 128));   /* U+0085 NEL (octal escapes) */
	assert_false(text_field_ok("a\xc2\x80", 128));    /* U+0080 */
	assert_false(text_field_ok("\302\23331m", 128));  /* U+009B CSI */
	assert_false(text_field_ok("a\xff", 128));        /* not UTF-8 */
	assert_false(text_field_ok("\x85", 128));         /* a lone C1 byte */
	assert_false(text_field_ok("\xc0\xaf", 128));     /* overlong */
	assert_false(text_field_ok("\xed\xa0\x80", 128)); /* a surrogate */
	assert_false(text_field_ok("\xe4\xb8", 128));     /* cut short */
	memset(long_text, 'x', sizeof(long_text));
	long_text[128] = '\0';
	assert_true(text_field_ok(long_text, 128));
	long_text[128] = 'x';
	long_text[129] = '\0';
	assert_false(text_field_ok(long_text, 128));
	assert_false(text_field_ok("\xe4\xb8\xad\xe4\xb8\xad", 5)); /* bytes, not characters */
}

static char *printable(const char *s, size_t len, int as_received)
{
	struct buf b;
	char *out;

	buf_init(&b, 0);
	assert_int_equal(text_printable(&b, s, len, as_received), 0);
	assert_int_equal(buf_append(&b, "", 1), 0);
	out = buf_take(&b, NULL);
	assert_non_null(out);
	return out;
}

/* What a terminal would obey is shown escaped; text is shown as it is. */
static void test_printable_escapes_controls_and_bytes_that_are_not_utf8(void **state)
{
	static const char raw[] = "x\n\x1b[31mRED\r\t\\ \xc2\x85\xc2\x9b\xff\x7f Zo\xc3\xab\0z";
	char *s;

	(void)state;
	s = printable(raw, sizeof(raw) - 1, 0);
	assert_string_equal(s,
	                    "x\\n\\x1b[31mRED\\r\\t\\\\ \\u0085\\u009b\\xff\\x7f Zo\xc3\xab\\x00z");
	free(s);
	/* A payload keeps its lines, tabs and backslashes; the rest as above. */
	s = printable(raw, sizeof(raw) - 1, 1);
	assert_string_equal(s, "x\n\\x1b[31mRED\\r\t\\ \\u0085\\u009b\\xff\\x7f Zo\xc3\xab\\x00z");
	free(s);
	s = printable("{\"a\":\"\\u00e9\"}", strlen("{\"a\":\"\\u00e9\"}"), 1);
	assert_string_equal(s, "{\"a\":\"\\u00e9\"}");
	free(s);
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

/* The escaping as it was written first, one byte at a time: the
 * fingerprints of stored callbacks were made with it, so every string must
 * still escape to the same bytes. */
static void json_string_reference(struct buf *b, const char *s)
{
	const unsigned char *p;

	buf_puts(b, "\"");
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\') {
			char esc[2] = {'\\', (char)*p};
			buf_append(b, esc, 2);
		} else if (*p < 0x20) {
			buf_printf(b, "\\u%04x", *p);
		} else {
			buf_append(b, p, 1);
		}
	}
	buf_puts(b, "\"");
}

/* buf_json_string(text) gives the reference's bytes. */
static void json_string_as_reference(const char *text)
{
	struct buf got;
	struct buf want;

	buf_init(&got, 0);
	buf_init(&want, 0);
	assert_int_equal(buf_json_string(&got, text), 0);
	json_string_reference(&want, text);
	assert_int_equal(got.buf_len, want.buf_len);
	assert_memory_equal(got.buf_data, want.buf_data, want.buf_len);
	buf_finish(&got);
	buf_finish(&want);
}

static void test_buf_json_string_escapes_as_before(void **state)
{
	char text[64];
	struct buf got;
	unsigned seed = 24;
	int round;
	int c;

	(void)state;
	/* Every byte value alone, at the start, middle and end of a run. */
	for (c = 1; c < 256; c++) {
		snprintf(text, sizeof(text), "%cab%ccd%c", c, c, c);
		json_string_as_reference(text);
	}
	/* Random strings, most of them with quotes, backslashes and controls. */
	for (round = 0; round < 20000; round++) {
		int n = (int)(rand_r(&seed) % (sizeof(text) - 1));
		int i;

		for (i = 0; i < n; i++) {
			int pick = (int)(rand_r(&seed) % 8);

			text[i] = pick == 0   ? '"'
			          : pick == 1 ? '\\'
			          : pick == 2 ? (char)(1 + rand_r(&seed) % 31)
			                      : (char)(1 + rand_r(&seed) % 255);
		}
		text[n] = '\0';
		json_string_as_reference(text);
	}
	buf_init(&got, 0);
	assert_int_equal(buf_json_string(&got, ""), 0);
	assert_string_equal(got.buf_data, "\"\"");
	buf_finish(&got);
}

/* s (len bytes) through text_json_string, NUL-terminated (malloc'd). */
static char *json_cli(const char *s, size_t len)
{
	struct buf b;
	char *out;

	buf_init(&b, 0);
	assert_int_equal(text_json_string(&b, s, len), 0);
	out = buf_take(&b, NULL);
	assert_non_null(out);
	return out;
}

/* The CLI's JSON strings: valid JSON whatever is stored, nothing a
 * terminal obeys (C1 escaped), a byte that is not UTF-8 as U+FFFD. */
static void test_cli_json_string_escapes_c1_and_replaces_bytes_not_utf8(void **state)
{
	static const char raw[] = "x\n\x1b[31m\"RED\"\r\t\\ \xc2\x85\xc2\x9b\xc2\xa0\xff\x7f "
	                          "Zo\xc3\xab \xe2\x82 \xed\xa0\x80 \xf0\x9f\x98\x80";
	char text[64];
	unsigned seed = 77;
	cJSON *j;
	char *s;
	int round;

	(void)state;
	s = json_cli(raw, sizeof(raw) - 1);
	assert_string_equal(s,
	                    "\"x\\n\\u001b[31m\\\"RED\\\"\\r\\t\\\\ \\u0085\\u009b\xc2\xa0\\ufffd"
	                    "\\u007f Zo\xc3\xab \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd "
	                    "\xf0\x9f\x98\x80\"");
	j = json_parse_strict(s, strlen(s), NULL);
	assert_non_null(j);
	assert_true(cJSON_IsString(j));
	assert_string_equal(j->valuestring,
	                    "x\n\x1b[31m\"RED\"\r\t\\ \xc2\x85\xc2\x9b\xc2\xa0"
	                    "\xef\xbf\xbd\x7f Zo\xc3\xab \xef\xbf\xbd\xef\xbf\xbd "
	                    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xf0\x9f\x98\x80");
	cJSON_Delete(j);
	free(s);
	s = json_cli("", 0);
	assert_string_equal(s, "\"\"");
	free(s);
	/* Any bytes at all: the strict reader takes what comes out, and no
	 * C1 control or byte outside UTF-8 is left in it. */
	for (round = 0; round < 20000; round++) {
		size_t n = (size_t)(rand_r(&seed) % sizeof(text));
		const unsigned char *p;
		size_t i;

		for (i = 0; i < n; i++) {
			text[i] = (char)(rand_r(&seed) % 4 == 0 ? 0x80 + rand_r(&seed) % 0x20
			                                        : 1 + rand_r(&seed) % 255);
		}
		s = json_cli(text, n);
		j = json_parse_strict(s, strlen(s), NULL);
		assert_non_null(j);
		cJSON_Delete(j);
		for (p = (const unsigned char *)s; *p != '\0'; p += i) {
			i = text_utf8_len(p, (const unsigned char *)s + strlen(s));
			assert_true(i > 0);
			assert_false(i == 2 && p[0] == 0xc2 && p[1] <= 0x9f);
		}
		free(s);
	}
}

/* JSON text made elsewhere keeps its structure and meaning; only what is
 * inside its strings is escaped. */
static void test_json_text_clean_escapes_inside_strings_only(void **state)
{
	static const char doc[] = "{\"a\": \"\xc2\x9b"
	                          "31m\", \"b\": [1, \"\xff\x7f\"],\n"
	                          " \"c\": \"Zo\xc3\xab\"}";
	struct buf b;
	cJSON *j;

	(void)state;
	buf_init(&b, 0);
	assert_int_equal(text_json_clean(&b, doc, sizeof(doc) - 1), 0);
	assert_int_equal(buf_append(&b, "", 1), 0);
	assert_string_equal(b.buf_data, "{\"a\": \"\\u009b31m\", \"b\": [1, \"\\ufffd\\u007f\"],\n"
	                                " \"c\": \"Zo\xc3\xab\"}");
	j = json_parse_strict(b.buf_data, strlen(b.buf_data), NULL);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "a")->valuestring, "\xc2\x9b"
	                                                                           "31m");
	cJSON_Delete(j);
	buf_finish(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_hex_digits_decode_in_either_case_and_others_are_refused),
	        cmocka_unit_test(test_form_component_decodes_plus_and_percent_escapes),
	        cmocka_unit_test(test_malformed_form_escapes_are_refused),
	        cmocka_unit_test(test_field_text_is_utf8_without_controls_within_its_length),
	        cmocka_unit_test(test_printable_escapes_controls_and_bytes_that_are_not_utf8),
	        cmocka_unit_test(test_buf_expect_makes_room_once_and_respects_the_cap),
	        cmocka_unit_test(test_buf_json_string_escapes_as_before),
	        cmocka_unit_test(test_cli_json_string_escapes_c1_and_replaces_bytes_not_utf8),
	        cmocka_unit_test(test_json_text_clean_escapes_inside_strings_only),
	};

	return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
