/* test_api.c: the order API's pure parts: Idempotency-Key parsing and the
 * canonical JSON fingerprint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api.h"
#include "money.h"

static int key_ok(const char *value, const char *want)
{
	char key[API_KEY_MAX + 1];

	memset(key, 'x', sizeof(key));
	if (api_idempotency_key_parse(value, key) < 0) {
		return 0;
	}
	return strcmp(key, want) == 0;
}

static int key_bad(const char *value)
{
	char key[API_KEY_MAX + 1] = "untouched";

	return api_idempotency_key_parse(value, key) < 0 && strcmp(key, "untouched") == 0;
}

static void test_key_accepts_a_quoted_structured_field_string(void **state)
{
	assert_true(key_ok("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
			   "8e03978e-40d5-43e8-bc93-6894a57f9324"));
	assert_true(key_ok("\"a key with spaces\"", "a key with spaces"));
}

static void test_key_accepts_a_bare_token(void **state)
{
	assert_true(key_ok("8e03978e-40d5-43e8-bc93-6894a57f9324",
			   "8e03978e-40d5-43e8-bc93-6894a57f9324"));
	assert_true(key_ok("order:42/retry_1", "order:42/retry_1"));
}

static void test_key_ignores_surrounding_whitespace(void **state)
{
	assert_true(key_ok("  abc\t", "abc"));
	assert_true(key_ok(" \"abc\" ", "abc"));
}

static void test_key_unescapes_quote_and_backslash_in_strings(void **state)
{
	assert_true(key_ok("\"a\\\"b\\\\c\"", "a\"b\\c"));
}

static void test_key_refuses_other_escapes_in_strings(void **state)
{
	assert_true(key_bad("\"a\\nb\""));
	assert_true(key_bad("\"a\\"));
}

static void test_key_refuses_empty_values(void **state)
{
	assert_true(key_bad(""));
	assert_true(key_bad("   "));
	assert_true(key_bad("\"\""));
	assert_true(key_bad(NULL));
}

static void test_key_refuses_an_unterminated_string(void **state)
{
	assert_true(key_bad("\"abc"));
}

static void test_key_refuses_several_keys_in_one_field(void **state)
{
	assert_true(key_bad("\"a\", \"b\""));
	assert_true(key_bad("a, b"));
	assert_true(key_bad("a,b"));
}

static void test_key_refuses_parameters_and_trailing_bytes(void **state)
{
	assert_true(key_bad("\"abc\";p=1"));
	assert_true(key_bad("\"abc\" x"));
	assert_true(key_bad("abc def"));
}

static void test_key_refuses_control_and_non_ascii_characters(void **state)
{
	assert_true(key_bad("\"a\tb\""));
	assert_true(key_bad("\"a\x7f\""));
	assert_true(key_bad("\"caf\xc3\xa9\""));
	assert_true(key_bad("caf\xc3\xa9"));
	assert_true(key_bad("a\"b"));
}

static void test_key_of_255_characters_is_accepted_and_256_refused(void **state)
{
	char v[300];
	char want[300];

	memset(want, 'k', 255);
	want[255] = '\0';
	assert_true(key_ok(want, want));
	v[0] = '"';
	memcpy(v + 1, want, 255);
	v[256] = '"';
	v[257] = '\0';
	assert_true(key_ok(v, want));

	memset(v, 'k', 256);
	v[256] = '\0';
	assert_true(key_bad(v));
	v[0] = '"';
	memset(v + 1, 'k', 256);
	v[257] = '"';
	v[258] = '\0';
	assert_true(key_bad(v));
}

static char *canon(const char *json)
{
	char *out = NULL;
	size_t len = 0;

	if (api_canonical_json(json, strlen(json), &out, &len) < 0) {
		return NULL;
	}
	assert_int_equal(len, strlen(out));
	return out;
}

static void assert_canon(const char *json, const char *want)
{
	char *got = canon(json);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void assert_same_fingerprint(const char *a, const char *b, int same)
{
	unsigned char fa[32];
	unsigned char fb[32];

	assert_int_equal(api_fingerprint(a, strlen(a), fa), 0);
	assert_int_equal(api_fingerprint(b, strlen(b), fb), 0);
	if (same) {
		assert_memory_equal(fa, fb, 32);
	} else {
		assert_memory_not_equal(fa, fb, 32);
	}
}

static void test_canonical_json_sorts_keys_and_drops_whitespace(void **state)
{
	assert_canon("{ \"currency\" : \"eur\",\n\t\"amount\": 1999 }",
		     "{\"amount\":1999,\"currency\":\"eur\"}");
	assert_canon("{\"b\":{\"z\":1,\"a\":[3, 2, {\"y\":null,\"x\":true}]},\"a\":false}",
		     "{\"a\":false,\"b\":{\"a\":[3,2,{\"x\":true,\"y\":null}],\"z\":1}}");
}

static void test_canonical_json_spells_numbers_once(void **state)
{
	assert_canon("[1, 1.0, 1e0, 10E-1, -0, 0.5, 1999]", "[1,1,1,1,0,0.5,1999]");
}

static void test_canonical_json_spells_strings_once(void **state)
{
	assert_canon("[\"\\u0041\\/\", \"A/\"]", "[\"A/\",\"A/\"]");
	assert_canon("[\"a\\\"b\\\\\\n\"]", "[\"a\\\"b\\\\\\u000a\"]");
}

static void test_fingerprint_ignores_key_order_and_whitespace(void **state)
{
	assert_same_fingerprint(
		"{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"c1\"}",
		"{\n  \"customer_ref\": \"c1\",\n  \"currency\": \"eur\",\n  \"amount\": 1999\n}\n",
		1);
}

static void test_fingerprint_changes_when_a_value_changes(void **state)
{
	assert_same_fingerprint("{\"amount\":1999,\"currency\":\"eur\"}",
				"{\"amount\":2000,\"currency\":\"eur\"}", 0);
	assert_same_fingerprint("{\"amount\":1999,\"currency\":\"eur\"}",
				"{\"amount\":1999,\"currency\":\"usd\"}", 0);
	assert_same_fingerprint("{\"a\":\"1\"}", "{\"a\":1}", 0);
	assert_same_fingerprint("{\"a\":[1,2]}", "{\"a\":[2,1]}", 0);
	assert_same_fingerprint("{\"a\":1}", "{\"a\":1,\"b\":null}", 0);
}

static void test_canonical_json_refuses_duplicate_keys(void **state)
{
	assert_null(canon("{\"amount\":1,\"amount\":2}"));
	assert_null(canon("{\"x\":{\"k\":1,\"k\":1}}"));
}

static void test_canonical_json_refuses_malformed_text(void **state)
{
	assert_null(canon(""));
	assert_null(canon("{"));
	assert_null(canon("{\"a\":1} x"));
	assert_null(canon("{\"a\":1}{}"));
	assert_null(canon("{'a':1}"));
}

static void test_canonical_json_accepts_trailing_whitespace(void **state)
{
	assert_canon("{\"a\":1} \r\n", "{\"a\":1}");
}

static void test_canonical_json_refuses_nesting_past_sixteen_levels(void **state)
{
	assert_canon("[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]", "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]");
	assert_null(canon("[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]"));
}

static void test_order_body_is_parsed_with_its_fingerprint(void **state)
{
	const char *body = "{\"currency\":\"eur\",\"amount\":1999,\"customer_ref\":\"c-1\"}";
	struct api_order_body ob;
	unsigned char fp[32];
	const char *slug = NULL;
	char detail[API_DETAIL_MAX];

	assert_int_equal(api_order_body_parse(body, strlen(body), &ob, &slug, detail), 0);
	assert_int_equal(ob.ob_amount, 1999);
	assert_string_equal(ob.ob_currency, "EUR");
	assert_true(ob.ob_has_customer_ref);
	assert_string_equal(ob.ob_customer_ref, "c-1");
	assert_int_equal(api_fingerprint(body, strlen(body), fp), 0);
	assert_memory_equal(ob.ob_fingerprint, fp, sizeof(fp));
}

static void test_order_body_refusals_say_which_kind(void **state)
{
	static const char *const malformed[] = {
		"{\"amount\":1999,\"currency\":\"eur\",\"customer_ref\":\"a\\u0000b\"}",
		"{\"amount\":1999,\"currency\":\"eur\"}{}",
		"{\"amount\":1,\"amount\":1999,\"currency\":\"eur\"}",
	};
	const char *invalid = "{\"amount\":1999,\"currency\":\"eur\",\"line_items\":[{\"sku\":"
			      "\"a\",\"quantity\":1,\"unit_amount\":1}]}";
	struct api_order_body ob;
	const char *slug = NULL;
	char detail[API_DETAIL_MAX];
	size_t i;

	for (i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		assert_int_equal(api_order_body_parse(malformed[i], strlen(malformed[i]), &ob,
		                                      &slug, detail),
		                 -1);
		assert_string_equal(slug, "malformed_json");
	}
	assert_int_equal(api_order_body_parse(invalid, strlen(invalid), &ob, &slug, detail), -1);
	assert_string_equal(slug, "invalid_order");
	assert_non_null(strstr(detail, "sum"));
}

/* A refusal says what is wrong with the body, as the client can act on it:
 * the JSON reader's reason, the nesting limit, an unknown field's name
 * (cut short, at a character boundary, when it is long). */
static void test_order_body_refusals_name_what_is_wrong(void **state)
{
	static const struct {
		const char *body;
		const char *slug;
		const char *part;
	} cases[] = {
	        {"{\"amount\":1e400,\"currency\":\"eur\"}", "malformed_json",
	         "number out of range"},
	        {"{\"amount\":1,\"amount\":1999,\"currency\":\"eur\"}", "malformed_json",
	         "duplicate key"},
	        {"{\"amount\":1999,\"currency\":\"eur\"} x", "malformed_json",
	         "bytes after the JSON value"},
	        {"{\"a\":[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}", "malformed_json", "deeper than 16"},
	        {"{\"amount\":1999,\"currency\":\"eur\",\"note\":\"x\"}", "invalid_order",
	         "Unknown field \"note\"; allowed: amount, currency"},
	        {"{\"amount\":1,\"currency\":\"eur\",\"line_items\":[{\"sku\":\"a\",\"quantity\":1,"
	         "\"unit_amount\":1,\"colour\":\"red\"}]}",
	         "invalid_order", "Unknown field \"colour\"; a line item has sku"},
	};
	/* 63 ASCII bytes, then e-acute (2 bytes) straddling the 64-byte cut. */
	const char *long_name =
	        "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\u00e9zzz\":1}";
	struct api_order_body ob;
	const char *slug = NULL;
	char detail[API_DETAIL_MAX];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(api_order_body_parse(cases[i].body, strlen(cases[i].body), &ob,
		                                      &slug, detail),
		                 -1);
		assert_string_equal(slug, cases[i].slug);
		if (strstr(detail, cases[i].part) == NULL) {
			fail_msg("%s: detail \"%s\" does not say \"%s\"", cases[i].body, detail,
			         cases[i].part);
		}
	}
	assert_int_equal(api_order_body_parse(long_name, strlen(long_name), &ob, &slug, detail),
	                 -1);
	assert_string_equal(slug, "invalid_order");
	assert_non_null(strstr(detail, "aaa\"...; allowed"));
	assert_null(strstr(detail, "\xc3"));
}

/* A control character reaches the order only as a JSON escape (raw ones
 * and bytes that are not UTF-8 are malformed JSON): C1 ones too. */
static void test_order_body_refuses_control_characters_in_texts(void **state)
{
	static const char *const invalid[] = {
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"a\\u0085b\"}",
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"a\\u009bb\"}",
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"a\\u001bb\"}",
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"\"}",
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":42}",
	        ("{\"amount\":100,\"currency\":\"eur\",\"line_items\":[{\"sku\":\"a\\u0085\","
	         "\"quantity\":1,\"unit_amount\":100}]}"),
	};
	const char *bad_utf8 = "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"a\xff\"}";
	const char *ok =
	        "{\"amount\":100,\"currency\":\"eur\",\"customer_ref\":\"Zo\\u00ebs\\u00a0\"}";
	struct api_order_body ob;
	const char *slug = NULL;
	char detail[API_DETAIL_MAX];
	size_t i;

	for (i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		assert_int_equal(
		        api_order_body_parse(invalid[i], strlen(invalid[i]), &ob, &slug, detail),
		        -1);
		assert_string_equal(slug, "invalid_order");
	}
	assert_int_equal(api_order_body_parse(bad_utf8, strlen(bad_utf8), &ob, &slug, detail), -1);
	assert_string_equal(slug, "malformed_json");
	assert_int_equal(api_order_body_parse(ok, strlen(ok), &ob, &slug, detail), 0);
	assert_string_equal(ob.ob_customer_ref, "Zo\xc3\xabs\xc2\xa0");
}

/* The rules the CLI's order create shares with the API, field by field. */
static void test_order_fields_check_applies_the_api_rules(void **state)
{
	char big[200];
	char cur[4] = "---";
	const char *detail = NULL;

	assert_int_equal(api_order_fields_check(1999, "eur", NULL, cur, &detail), 0);
	assert_string_equal(cur, "EUR");
	assert_int_equal(api_order_fields_check(1, "JPY", "cust_42", cur, &detail), 0);
	assert_int_equal(api_order_fields_check(0, "eur", NULL, cur, &detail), -1);
	assert_non_null(strstr(detail, "amount"));
	assert_int_equal(api_order_fields_check(-5, "eur", NULL, cur, &detail), -1);
	assert_int_equal(api_order_fields_check(MONEY_MAX_MINOR + 1, "eur", NULL, cur, &detail),
	                 -1);
	assert_int_equal(api_order_fields_check(5, "qqq", NULL, cur, &detail), -1);
	assert_non_null(strstr(detail, "currency"));
	assert_int_equal(api_order_fields_check(5, NULL, NULL, cur, &detail), -1);
	assert_int_equal(api_order_fields_check(5, "eur", "", cur, &detail), -1);
	assert_non_null(strstr(detail, "customer_ref"));
	assert_int_equal(api_order_fields_check(5, "eur", "x\n\x1b[31mRED", cur, &detail), -1);
	assert_int_equal(api_order_fields_check(5, "eur", "a\xc2\x85", cur, &detail), -1);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(api_order_fields_check(5, "eur", big, cur, &detail), -1);
	big[API_TEXT_MAX] = '\0';
	assert_int_equal(api_order_fields_check(5, "eur", big, cur, &detail), 0);
}

static void test_order_ids_are_checked_for_shape(void **state)
{
	assert_true(api_order_id_valid("ord_abcdefghij0123456789"));     /* before time-ordered ids */
	assert_true(api_order_id_valid("ord_2345abcdef0123456789abcdef")); /* ORDERS_ID_LEN */
	assert_false(api_order_id_valid("ord_"));
	assert_false(api_order_id_valid("ord_ABC"));
	assert_false(api_order_id_valid("ord_../../etc"));
	assert_false(api_order_id_valid("xyz_abc"));
	assert_false(api_order_id_valid("ord_2345abcdef0123456789abcdefg"));
}

static void test_times_are_formatted_as_rfc3339_utc(void **state)
{
	char t[32];

	api_format_time(1764670812345LL, t);
	assert_string_equal(t, "2025-12-02T10:20:12.345Z");
	api_format_time(0, t);
	assert_string_equal(t, "1970-01-01T00:00:00.000Z");
}

/* ---- Accept ---- */

/* The weight Accept lines (NULL-terminated, none when NULL) give type,
 * and its rank in *rank. */
static int accept_q(const char *const *lines, const char *type, int *rank)
{
	struct http_header h[4];
	struct http_request req;
	size_t n = 0;

	memset(&req, 0, sizeof(req));
	while (lines != NULL && lines[n] != NULL && n < 3) {
		h[n].hh_name = n % 2 == 0 ? "Accept" : "accept";
		h[n].hh_value = lines[n];
		n++;
	}
	h[n].hh_name = "User-Agent";
	h[n].hh_value = "text/html;q=0"; /* not an Accept line: not read */
	req.hr_headers = h;
	req.hr_n_headers = n + 1;
	return api_accept_quality(&req, type, rank);
}

static void assert_accept(const char *line, const char *type, int want_q, int want_rank)
{
	const char *lines[] = {line, NULL};
	int rank = -1;
	int q = accept_q(lines, type, &rank);

	if (q != want_q || rank != want_rank) {
		fail_msg("Accept: %s gives %s q=%d rank %d, wanted q=%d rank %d", line, type, q,
		         rank, want_q, want_rank);
	}
}

static void test_accept_without_the_field_takes_any_type(void **state)
{
	int rank = -1;

	assert_int_equal(accept_q(NULL, "text/html", &rank), 1000);
	assert_int_equal(rank, 0);
}

static void test_accept_reads_q_values_as_rfc_9110_writes_them(void **state)
{
	assert_accept("application/json;q=0, text/html", "application/json", 0, 3);
	assert_accept("application/json;q=0, text/html", "text/html", 1000, 3);
	assert_accept("text/html;q=0.5, application/json", "text/html", 500, 3);
	assert_accept("application/json;q=0.25,text/html;q=0.125", "application/json", 250, 3);
	assert_accept("application/json;q=0.25,text/html;q=0.125", "text/html", 125, 3);
	assert_accept("text/html ; Q=0.7", "text/html", 700, 3);
	assert_accept("text/html;q=1.000", "text/html", 1000, 3);
	assert_accept("text/html;q=0.", "text/html", 0, 3);
	assert_accept("TEXT/HTML", "text/html", 1000, 3);
}

static void test_accept_takes_the_most_specific_range(void **state)
{
	/* text/html is not q=0.9 here: text/ with any subtype is more specific. */
	assert_accept("text/*;q=0.3, */*;q=0.9", "text/html", 300, 2);
	assert_accept("text/*;q=0.3, */*;q=0.9", "application/json", 900, 1);
	assert_accept("*/*;q=0, text/html", "text/html", 1000, 3);
	assert_accept("text/plain", "text/html", 0, 0);
	assert_accept("", "text/html", 0, 0);
	/* Chrome's and Firefox's page load, fetch()'s default, axios. */
	assert_accept("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
	              "image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
	              "application/json", 800, 1);
	assert_accept("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
	              "text/html", 1000, 3);
	assert_accept("*/*", "application/json", 1000, 1);
	assert_accept("application/json, text/plain, */*", "application/json", 1000, 3);
	assert_accept("application/json, text/plain, */*", "text/html", 1000, 1);
}

static void test_accept_skips_elements_it_cannot_read(void **state)
{
	/* A weight RFC 9110 does not allow, a range without a subtype, a
	 * parameter without a value: each counts for nothing. */
	assert_accept("application/json;q=1.5", "application/json", 0, 0);
	assert_accept("application/json;q=0.1234", "application/json", 0, 0);
	assert_accept("application/json;q=", "application/json", 0, 0);
	assert_accept("application/json;q=-1, */*;q=0.1", "application/json", 100, 1);
	assert_accept("json, text/html;q=0.2", "text/html", 200, 3);
	assert_accept("text/html;level, */*;q=0.3", "text/html", 300, 1);
	assert_accept("text/html;x=\"unclosed, */*;q=0.3", "text/html", 0, 0);
}

static void test_accept_steps_over_quoted_parameters(void **state)
{
	assert_accept("text/html;x=\"a,b;q=0\";q=0.2, application/json", "text/html", 200, 3);
	assert_accept("text/html;x=\"a\\\"b,c\";q=0.3", "text/html", 300, 3);
	assert_accept("text/html;x=\"a,b;q=0\";q=0.2, application/json", "application/json", 1000,
	              3);
	/* The first q is the weight. */
	assert_accept("text/html;q=0.4;q=0.9", "text/html", 400, 3);
}

static void test_accept_reads_every_accept_line(void **state)
{
	const char *lines[] = {"text/html;q=0.1", "application/json", NULL};
	int rank = -1;

	assert_int_equal(accept_q(lines, "text/html", &rank), 100);
	assert_int_equal(rank, 3);
	assert_int_equal(accept_q(lines, "application/json", &rank), 1000);
	assert_int_equal(rank, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_key_accepts_a_quoted_structured_field_string),
	        cmocka_unit_test(test_key_accepts_a_bare_token),
	        cmocka_unit_test(test_key_ignores_surrounding_whitespace),
	        cmocka_unit_test(test_key_unescapes_quote_and_backslash_in_strings),
	        cmocka_unit_test(test_key_refuses_other_escapes_in_strings),
	        cmocka_unit_test(test_key_refuses_empty_values),
	        cmocka_unit_test(test_key_refuses_an_unterminated_string),
	        cmocka_unit_test(test_key_refuses_several_keys_in_one_field),
	        cmocka_unit_test(test_key_refuses_parameters_and_trailing_bytes),
	        cmocka_unit_test(test_key_refuses_control_and_non_ascii_characters),
	        cmocka_unit_test(test_key_of_255_characters_is_accepted_and_256_refused),
	        cmocka_unit_test(test_canonical_json_sorts_keys_and_drops_whitespace),
	        cmocka_unit_test(test_canonical_json_spells_numbers_once),
	        cmocka_unit_test(test_canonical_json_spells_strings_once),
	        cmocka_unit_test(test_fingerprint_ignores_key_order_and_whitespace),
	        cmocka_unit_test(test_fingerprint_changes_when_a_value_changes),
	        cmocka_unit_test(test_canonical_json_refuses_duplicate_keys),
	        cmocka_unit_test(test_canonical_json_refuses_malformed_text),
	        cmocka_unit_test(test_canonical_json_accepts_trailing_whitespace),
	        cmocka_unit_test(test_canonical_json_refuses_nesting_past_sixteen_levels),
	        cmocka_unit_test(test_order_body_is_parsed_with_its_fingerprint),
	        cmocka_unit_test(test_order_body_refusals_say_which_kind),
	        cmocka_unit_test(test_order_body_refusals_name_what_is_wrong),
	        cmocka_unit_test(test_order_body_refuses_control_characters_in_texts),
	        cmocka_unit_test(test_order_fields_check_applies_the_api_rules),
	        cmocka_unit_test(test_order_ids_are_checked_for_shape),
	        cmocka_unit_test(test_times_are_formatted_as_rfc3339_utc),
	        cmocka_unit_test(test_accept_without_the_field_takes_any_type),
	        cmocka_unit_test(test_accept_reads_q_values_as_rfc_9110_writes_them),
	        cmocka_unit_test(test_accept_takes_the_most_specific_range),
	        cmocka_unit_test(test_accept_skips_elements_it_cannot_read),
	        cmocka_unit_test(test_accept_steps_over_quoted_parameters),
	        cmocka_unit_test(test_accept_reads_every_accept_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
