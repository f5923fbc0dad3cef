/* test_json.c: the strict JSON reader every outside text goes through. */
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

/* Parses a literal; the length excludes the terminating NUL only. */
static cJSON *parse(const char *text, const char **why)
{
	return json_parse_strict(text, strlen(text), why);
}

static void refused(const char *text, const char *why_part)
{
	const char *why = NULL;
	cJSON *root = parse(text, &why);

	if (root != NULL) {
		fail_msg("accepted: %s", text);
	}
	assert_non_null(why);
	if (why_part != NULL && strstr(why, why_part) == NULL) {
		fail_msg("%s: refused with \"%s\", expected \"%s\"", text, why, why_part);
	}
}

static void test_a_callback_shaped_object_parses_with_its_values(void **state)
{
	const char *text = " {\"id\":\"evt_1\",\"data\":{\"object\":{\"amount\":1999,\"ok\":true,"
	                   "\"none\":null,\"list\":[1,-2.5e2,\"x\",false,{}],\"t\":\"a\\\"\\\\\\/"
	                   "\\b\\f\\n\\r\\t\"}}}\r\n";
	cJSON *root = parse(text, NULL);
	const cJSON *obj;
	const cJSON *list;

	assert_non_null(root);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(root, "id")->valuestring, "evt_1");
	obj = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "data"),
	                                       "object");
	assert_true(cJSON_IsObject(obj));
	assert_true(cJSON_GetObjectItemCaseSensitive(obj, "amount")->valuedouble == 1999.0);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "ok")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(obj, "none")));
	list = cJSON_GetObjectItemCaseSensitive(obj, "list");
	assert_int_equal(cJSON_GetArraySize(list), 5);
	assert_true(cJSON_GetArrayItem(list, 1)->valuedouble == -250.0);
	assert_true(cJSON_IsObject(cJSON_GetArrayItem(list, 4)));
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(obj, "t")->valuestring,
	                    "a\"\\/\b\f\n\r\t");
	cJSON_Delete(root);
}

static void test_scalars_stand_alone_as_the_whole_text(void **state)
{
	cJSON *v;

	v = parse("\"x\"", NULL);
	assert_true(cJSON_IsString(v));
	cJSON_Delete(v);
	v = parse("-0", NULL);
	assert_true(cJSON_IsNumber(v));
	cJSON_Delete(v);
	v = parse(" null ", NULL);
	assert_true(cJSON_IsNull(v));
	cJSON_Delete(v);
}

static void test_a_repeated_key_is_refused_at_any_depth(void **state)
{
	refused("{\"amount_received\":1,\"amount_received\":1999}", "duplicate key");
	refused("{\"a\":{\"b\":[{\"c\":1,\"d\":2,\"c\":3}]}}", "duplicate key");
	/* The same key spelt two ways is still the same key. */
	refused("{\"id\":\"x\",\"\\u0069d\":\"y\"}", "duplicate key");
}

static void test_the_same_key_in_different_objects_is_fine(void **state)
{
	cJSON *root = parse("{\"a\":{\"id\":1},\"b\":{\"id\":2},\"id\":3,\"A\":4}", NULL);

	assert_non_null(root);
	cJSON_Delete(root);
}

static void test_bytes_after_the_value_are_refused(void **state)
{
	refused("{\"id\":\"evt_a\"}{\"id\":\"evt_b\"}", "after the JSON value");
	refused("{\"id\":\"evt_a\"}\n{\"id\":\"evt_b\"}\n", "after the JSON value");
	refused("{\"id\":\"evt_a\"} x", "after the JSON value");
	refused("[1] ]", "after the JSON value");
	refused("1 2", "after the JSON value");
}

static void test_a_nul_is_refused_in_keys_values_and_raw_bytes(void **state)
{
	static const char raw[] = "{\"id\":\"evt_a\0x\"}";
	static const char after[] = "{\"id\":\"evt_a\"}\0";
	const char *why = NULL;

	refused("{\"id\":\"evt_a\\u0000x\"}", "NUL");
	refused("{\"i\\u0000d\":\"evt_a\"}", "NUL");
	assert_null(json_parse_strict(raw, sizeof(raw) - 1, &why));
	assert_non_null(strstr(why, "NUL"));
	assert_null(json_parse_strict(after, sizeof(after) - 1, &why));
	assert_non_null(strstr(why, "after the JSON value"));
}

static void test_invalid_utf8_and_lone_surrogates_are_refused(void **state)
{
	refused("{\"a\":\"\xc0\x80\"}", "UTF-8");         /* overlong NUL */
	refused("{\"a\":\"\xe0\x80\xaf\"}", "UTF-8");     /* overlong '/' */
	refused("{\"a\":\"\xed\xa0\x80\"}", "UTF-8");     /* encoded surrogate */
	refused("{\"a\":\"\xf4\x90\x80\x80\"}", "UTF-8"); /* past U+10FFFF */
	refused("{\"a\":\"\xff\"}", "UTF-8");
	refused("{\"a\":\"\xe2\x82\"}", "UTF-8"); /* cut short */
	refused("{\"\x80\":1}", "UTF-8");
	refused("{\"a\":\"\\ud800\"}", "surrogate");
	refused("{\"a\":\"\\udc00\\ud800\"}", "surrogate");
	refused("{\"a\":\"\\ud800\\u0041\"}", "surrogate");
}

static void test_utf8_text_and_escapes_decode_to_the_same_bytes(void **state)
{
	cJSON *raw = parse("[\"caf\xc3\xa9 \xe6\x94\xaf \xf0\x9f\x98\x80\"]", NULL);
	cJSON *esc = parse("[\"caf\\u00e9 \\u652F \\ud83d\\ude00\"]", NULL);

	assert_non_null(raw);
	assert_non_null(esc);
	assert_string_equal(cJSON_GetArrayItem(raw, 0)->valuestring,
	                    cJSON_GetArrayItem(esc, 0)->valuestring);
	cJSON_Delete(raw);
	cJSON_Delete(esc);
}

static void test_raw_control_characters_and_bad_escapes_are_refused(void **state)
{
	refused("[\"a\nb\"]", "control character");
	refused("[\"a\tb\"]", "control character");
	refused("[\"\\x41\"]", "escape");
	refused("[\"\\u12G4\"]", "escape");
	refused("[\"abc", "unterminated");
	refused("[\"abc\\", "unterminated");
}

static void test_nesting_is_refused_past_the_depth_limit(void **state)
{
	char deep[2 * JSON_DEPTH_MAX + 8];
	cJSON *root;
	int i;

	for (i = 0; i < JSON_DEPTH_MAX; i++) {
		deep[i] = '[';
		deep[JSON_DEPTH_MAX + i] = ']';
	}
	deep[2 * JSON_DEPTH_MAX] = '\0';
	root = parse(deep, NULL);
	assert_non_null(root);
	cJSON_Delete(root);
	for (i = 0; i <= JSON_DEPTH_MAX; i++) {
		deep[i] = '[';
		deep[JSON_DEPTH_MAX + 1 + i] = ']';
	}
	deep[2 * JSON_DEPTH_MAX + 2] = '\0';
	refused(deep, "deeply");
}

static void test_numbers_follow_the_rfc_grammar_and_fit_a_double(void **state)
{
	cJSON *v;

	refused("[01]", NULL);
	refused("[1.]", "number");
	refused("[.5]", NULL);
	refused("[+1]", NULL);
	refused("[-]", "number");
	refused("[1e]", "number");
	refused("[0x10]", NULL);
	refused("[NaN]", NULL);
	refused("[Infinity]", NULL);
	refused("[1e999]", "out of range");
	v = parse("[1.5e3, 0.25, -0, 9007199254740993, 1e-999]", NULL);
	assert_non_null(v);
	assert_true(cJSON_GetArrayItem(v, 0)->valuedouble == 1500.0);
	assert_true(cJSON_GetArrayItem(v, 1)->valuedouble == 0.25);
	cJSON_Delete(v);
}

static void test_literals_empty_text_and_a_byte_order_mark_are_checked(void **state)
{
	refused("", "empty");
	refused("   ", "end of input");
	refused("[tru]", NULL);
	refused("[nul]", NULL);
	refused("[True]", NULL);
	refused("\xef\xbb\xbf{}", NULL);
	refused("{\"a\":1,}", NULL);
	refused("[1,]", NULL);
	refused("{\"a\" 1}", "':'");
	refused("{a:1}", "key");
	refused("{\"a\":1", "unterminated");
}

static void test_a_wide_object_is_checked_for_duplicates_quickly(void **state)
{
	struct buf b;
	cJSON *root;
	int i;

	buf_init(&b, 0);
	buf_puts(&b, "{");
	for (i = 0; i < 50000; i++) {
		buf_printf(&b, "%s\"k%d\":%d", i > 0 ? "," : "", i, i);
	}
	buf_puts(&b, "}");
	root = json_parse_strict(b.buf_data, b.buf_len, NULL);
	assert_non_null(root);
	assert_int_equal(cJSON_GetArraySize(root), 50000);
	cJSON_Delete(root);
	b.buf_data[b.buf_len - 1] = ',';
	buf_puts(&b, "\"k123\":0}");
	assert_null(json_parse_strict(b.buf_data, b.buf_len, NULL));
	buf_finish(&b);
}

/* Objects of every width up to past the pairwise check: a repeated key is
 * refused wherever the pair sits, and a tree whose names and strings the
 * reader handed over prints back as the text (cJSON frees them itself). */
static void test_duplicates_are_refused_at_every_width_and_names_print_back(void **state)
{
	struct buf b;
	cJSON *root;
	char *text;
	int n;
	int i;
	int j;

	(void)state;
	for (n = 2; n <= 20; n++) {
		buf_init(&b, 0);
		buf_puts(&b, "{");
		for (i = 0; i < n; i++) {
			buf_printf(&b, "%s\"key_%d\":\"value_%d\"", i > 0 ? "," : "", i, i);
		}
		buf_puts(&b, "}");
		root = json_parse_strict(b.buf_data, b.buf_len, NULL);
		assert_non_null(root);
		assert_int_equal(cJSON_GetArraySize(root), n);
		text = cJSON_PrintUnformatted(root);
		assert_string_equal(text, b.buf_data);
		cJSON_free(text);
		cJSON_Delete(root);
		buf_finish(&b);
		/* The same object with member j named as member i. */
		for (i = 0; i < n; i++) {
			for (j = i + 1; j < n; j++) {
				int k;

				buf_init(&b, 0);
				buf_puts(&b, "{");
				for (k = 0; k < n; k++) {
					buf_printf(&b, "%s\"key_%d\":%d", k > 0 ? "," : "", k == j ? i : k, k);
				}
				buf_puts(&b, "}");
				root = json_parse_strict(b.buf_data, b.buf_len, NULL);
				if (root != NULL) {
					fail_msg("accepted: %s", b.buf_data);
				}
				buf_finish(&b);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_a_callback_shaped_object_parses_with_its_values),
	        cmocka_unit_test(test_scalars_stand_alone_as_the_whole_text),
	        cmocka_unit_test(test_a_repeated_key_is_refused_at_any_depth),
	        cmocka_unit_test(test_the_same_key_in_different_objects_is_fine),
	        cmocka_unit_test(test_bytes_after_the_value_are_refused),
	        cmocka_unit_test(test_a_nul_is_refused_in_keys_values_and_raw_bytes),
	        cmocka_unit_test(test_invalid_utf8_and_lone_surrogates_are_refused),
	        cmocka_unit_test(test_utf8_text_and_escapes_decode_to_the_same_bytes),
	        cmocka_unit_test(test_raw_control_characters_and_bad_escapes_are_refused),
	        cmocka_unit_test(test_nesting_is_refused_past_the_depth_limit),
	        cmocka_unit_test(test_numbers_follow_the_rfc_grammar_and_fit_a_double),
	        cmocka_unit_test(test_literals_empty_text_and_a_byte_order_mark_are_checked),
	        cmocka_unit_test(test_a_wide_object_is_checked_for_duplicates_quickly),
	        cmocka_unit_test(test_duplicates_are_refused_at_every_width_and_names_print_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
