/* json.c: the strict JSON reader: a recursive-descent parser for RFC 8259
 * that builds cJSON trees, so cJSON's own lenient parser never sees bytes
 * from outside. */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "text.h"

#define JSON_NUMBER_INLINE 64 /* number texts up to this long are copied on the stack */
#define JSON_PAIRWISE_MAX 16 /* objects up to this wide check duplicate keys pair by pair */

struct json_reader {
	const unsigned char *jr_p;
	const unsigned char *jr_end;
	const char *jr_why; /* the first refusal, static */
};

static pthread_once_t json_locale_once = PTHREAD_ONCE_INIT;
static locale_t json_c_locale;

/* Numbers are read in the C locale whatever the process's locale says. */
static void json_locale_init(void)
{
	json_c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

static void *json_refuse(struct json_reader *jr, const char *why)
{
	if (jr->jr_why == NULL) {
		jr->jr_why = why;
	}
	return NULL;
}

static void json_skip_ws(struct json_reader *jr)
{
	while (jr->jr_p < jr->jr_end &&
	       (*jr->jr_p == ' ' || *jr->jr_p == '\t' || *jr->jr_p == '\n' || *jr->jr_p == '\r')) {
		jr->jr_p++;
	}
}

static int json_hex4(const unsigned char *p, const unsigned char *end, unsigned *ret)
{
	unsigned v = 0;
	int i;

	if (end - p < 4) {
		return -1;
	}
	for (i = 0; i < 4; i++) {
		unsigned c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9') {
			v |= c - '0';
		} else if (c >= 'a' && c <= 'f') {
			v |= c - 'a' + 10;
		} else if (c >= 'A' && c <= 'F') {
			v |= c - 'A' + 10;
		} else {
			return -1;
		}
	}
	*ret = v;
	return 0;
}

static size_t json_put_utf8(unsigned cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* One \u escape (p after the 'u'), a surrogate pair taking both; writes the
 * UTF-8 to out. Returns the bytes written, or 0 with the refusal set. */
static size_t json_unicode_escape(struct json_reader *jr, char *out)
{
	const unsigned char *p = jr->jr_p;
	unsigned cp;
	unsigned lo;

	if (json_hex4(p, jr->jr_end, &cp) < 0) {
		json_refuse(jr, "malformed \\u escape");
		return 0;
	}
	p += 4;
	if (cp == 0) {
		json_refuse(jr, "NUL (\\u0000) in a string");
		return 0;
	}
	if (cp >= 0xdc00 && cp <= 0xdfff) {
		json_refuse(jr, "unpaired surrogate escape");
		return 0;
	}
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (jr->jr_end - p < 6 || p[0] != '\\' || p[1] != 'u' ||
		    json_hex4(p + 2, jr->jr_end, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff) {
			json_refuse(jr, "unpaired surrogate escape");
			return 0;
		}
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		p += 6;
	}
	jr->jr_p = p;
	return json_put_utf8(cp, out);
}

/* A string literal at jr_p (on its opening quote), decoded, malloc'd. */
static char *json_string(struct json_reader *jr)
{
	const unsigned char *q = jr->jr_p + 1;
	char *out;
	size_t n = 0;

	/* Find the closing quote first: the decoded text is never longer. */
	while (q < jr->jr_end && *q != '"') {
		if (*q == '\\' && jr->jr_end - q < 2) {
			break;
		}
		q += *q == '\\' ? 2 : 1;
	}
	if (q >= jr->jr_end || *q != '"') {
		return json_refuse(jr, "unterminated string");
	}
	out = malloc((size_t)(q - jr->jr_p));
	if (out == NULL) {
		return json_refuse(jr, "out of memory");
	}
	jr->jr_p++;
	while (*jr->jr_p != '"') {
		unsigned char c = *jr->jr_p;
		size_t len;

		if (c < 0x20) {
			json_refuse(jr, c == 0 ? "NUL byte in a string"
			                       : "control character in a string");
			goto fail;
		}
		if (c != '\\') {
			len = text_utf8_len(jr->jr_p, q);
			if (len == 0) {
				json_refuse(jr, "invalid UTF-8 in a string");
				goto fail;
			}
			memcpy(out + n, jr->jr_p, len);
			n += len;
			jr->jr_p += len;
			continue;
		}
		c = jr->jr_p[1];
		jr->jr_p += 2;
		switch (c) {
		case '"':
		case '\\':
		case '/':
			out[n++] = (char)c;
			break;
		case 'b':
			out[n++] = '\b';
			break;
		case 'f':
			out[n++] = '\f';
			break;
		case 'n':
			out[n++] = '\n';
			break;
		case 'r':
			out[n++] = '\r';
			break;
		case 't':
			out[n++] = '\t';
			break;
		case 'u':
			len = json_unicode_escape(jr, out + n);
			if (len == 0) {
				goto fail;
			}
			n += len;
			break;
		default:
			json_refuse(jr, "invalid escape in a string");
			goto fail;
		}
	}
	out[n] = '\0';
	jr->jr_p++;
	return out;
fail:
	free(out);
	return NULL;
}

static int json_is_digit(const struct json_reader *jr, const unsigned char *p)
{
	return p < jr->jr_end && *p >= '0' && *p <= '9';
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static cJSON *json_number(struct json_reader *jr)
{
	const unsigned char *start = jr->jr_p;
	const unsigned char *p = start;
	char inline_text[JSON_NUMBER_INLINE];
	char *text = inline_text;
	cJSON *item = NULL;
	size_t len;
	double d;

	if (p < jr->jr_end && *p == '-') {
		p++;
	}
	if (!json_is_digit(jr, p)) {
		return json_refuse(jr, "malformed number");
	}
	if (*p == '0') {
		p++;
	} else {
		while (json_is_digit(jr, p)) {
			p++;
		}
	}
	if (p < jr->jr_end && *p == '.') {
		p++;
		if (!json_is_digit(jr, p)) {
			return json_refuse(jr, "malformed number");
		}
		while (json_is_digit(jr, p)) {
			p++;
		}
	}
	if (p < jr->jr_end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < jr->jr_end && (*p == '+' || *p == '-')) {
			p++;
		}
		if (!json_is_digit(jr, p)) {
			return json_refuse(jr, "malformed number");
		}
		while (json_is_digit(jr, p)) {
			p++;
		}
	}
	len = (size_t)(p - start);
	pthread_once(&json_locale_once, json_locale_init);
	if (json_c_locale == (locale_t)0) {
		return json_refuse(jr, "out of memory");
	}
	if (len >= sizeof(inline_text)) {
		text = malloc(len + 1);
		if (text == NULL) {
			return json_refuse(jr, "out of memory");
		}
	}
	memcpy(text, start, len);
	text[len] = '\0';
	d = strtod_l(text, NULL, json_c_locale);
	if (isinf(d)) {
		json_refuse(jr, "number out of range");
	} else {
		item = cJSON_CreateNumber(d);
		if (item == NULL) {
			json_refuse(jr, "out of memory");
		}
	}
	if (text != inline_text) {
		free(text);
	}
	jr->jr_p = p;
	return item;
}

static cJSON *json_literal(struct json_reader *jr)
{
	size_t avail = (size_t)(jr->jr_end - jr->jr_p);
	cJSON *item = NULL;
	size_t n = 0;

	if (avail >= 4 && memcmp(jr->jr_p, "true", 4) == 0) {
		item = cJSON_CreateTrue();
		n = 4;
	} else if (avail >= 5 && memcmp(jr->jr_p, "false", 5) == 0) {
		item = cJSON_CreateFalse();
		n = 5;
	} else if (avail >= 4 && memcmp(jr->jr_p, "null", 4) == 0) {
		item = cJSON_CreateNull();
		n = 4;
	} else {
		return json_refuse(jr, "unexpected character");
	}
	if (item == NULL) {
		return json_refuse(jr, "out of memory");
	}
	jr->jr_p += n;
	return item;
}

static cJSON *json_value(struct json_reader *jr, int depth);

static int json_key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 when two members of obj have the same key, 0 when none do, -1 on
 * allocation failure. Sorting keeps a wide object from costing n^2; a
 * narrow one (most of them) compares its pairs without an allocation. */
static int json_has_duplicate(const cJSON *obj, size_t n)
{
	const char **keys;
	const cJSON *c;
	const cJSON *d;
	size_t i = 0;
	int dup = 0;

	if (n < 2) {
		return 0;
	}
	if (n <= JSON_PAIRWISE_MAX) {
		for (c = obj->child; c != NULL; c = c->next) {
			for (d = c->next; d != NULL; d = d->next) {
				if (strcmp(c->string, d->string) == 0) {
					return 1;
				}
			}
		}
		return 0;
	}
	keys = malloc(n * sizeof(*keys));
	if (keys == NULL) {
		return -1;
	}
	for (c = obj->child; c != NULL; c = c->next) {
		keys[i++] = c->string;
	}
	qsort(keys, n, sizeof(*keys), json_key_cmp);
	for (i = 1; i < n && !dup; i++) {
		dup = strcmp(keys[i - 1], keys[i]) == 0;
	}
	free(keys);
	return dup;
}

static cJSON *json_object(struct json_reader *jr, int depth)
{
	cJSON *obj = cJSON_CreateObject();
	size_t n = 0;
	int dup;

	if (obj == NULL) {
		return json_refuse(jr, "out of memory");
	}
	jr->jr_p++;
	json_skip_ws(jr);
	if (jr->jr_p < jr->jr_end && *jr->jr_p == '}') {
		jr->jr_p++;
		return obj;
	}
	for (;;) {
		cJSON *item;
		char *key;
		int added;

		if (jr->jr_p >= jr->jr_end || *jr->jr_p != '"') {
			json_refuse(jr, jr->jr_p >= jr->jr_end ? "unterminated object"
			                                       : "object key is not a string");
			goto fail;
		}
		key = json_string(jr);
		if (key == NULL) {
			goto fail;
		}
		json_skip_ws(jr);
		if (jr->jr_p >= jr->jr_end || *jr->jr_p != ':') {
			free(key);
			json_refuse(jr, "missing ':' after an object key");
			goto fail;
		}
		jr->jr_p++;
		item = json_value(jr, depth);
		if (item == NULL) {
			free(key);
			goto fail;
		}
		/* The key is handed over rather than copied: cJSON_Delete frees a
		 * member's name with free(), as it frees everything it allocated
		 * (no cJSON_InitHooks in this program). */
		item->string = key;
		added = cJSON_AddItemToArray(obj, item);
		if (!added) {
			cJSON_Delete(item);
			json_refuse(jr, "out of memory");
			goto fail;
		}
		n++;
		json_skip_ws(jr);
		if (jr->jr_p < jr->jr_end && *jr->jr_p == ',') {
			jr->jr_p++;
			json_skip_ws(jr);
			continue;
		}
		if (jr->jr_p < jr->jr_end && *jr->jr_p == '}') {
			jr->jr_p++;
			break;
		}
		json_refuse(jr, jr->jr_p >= jr->jr_end ? "unterminated object"
		                                       : "expected ',' or '}' in an object");
		goto fail;
	}
	dup = json_has_duplicate(obj, n);
	if (dup != 0) {
		json_refuse(jr, dup > 0 ? "duplicate key in an object" : "out of memory");
		goto fail;
	}
	return obj;
fail:
	cJSON_Delete(obj);
	return NULL;
}

static cJSON *json_array(struct json_reader *jr, int depth)
{
	cJSON *arr = cJSON_CreateArray();

	if (arr == NULL) {
		return json_refuse(jr, "out of memory");
	}
	jr->jr_p++;
	json_skip_ws(jr);
	if (jr->jr_p < jr->jr_end && *jr->jr_p == ']') {
		jr->jr_p++;
		return arr;
	}
	for (;;) {
		cJSON *item = json_value(jr, depth);

		if (item == NULL) {
			goto fail;
		}
		if (!cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			json_refuse(jr, "out of memory");
			goto fail;
		}
		json_skip_ws(jr);
		if (jr->jr_p < jr->jr_end && *jr->jr_p == ',') {
			jr->jr_p++;
			continue;
		}
		if (jr->jr_p < jr->jr_end && *jr->jr_p == ']') {
			jr->jr_p++;
			break;
		}
		json_refuse(jr, jr->jr_p >= jr->jr_end ? "unterminated array"
		                                       : "expected ',' or ']' in an array");
		goto fail;
	}
	return arr;
fail:
	cJSON_Delete(arr);
	return NULL;
}

/* One value after optional whitespace; depth counts the containers around it. */
static cJSON *json_value(struct json_reader *jr, int depth)
{
	cJSON *item;
	char *s;

	json_skip_ws(jr);
	if (jr->jr_p >= jr->jr_end) {
		return json_refuse(jr, "unexpected end of input");
	}
	switch (*jr->jr_p) {
	case '{':
	case '[':
		if (depth >= JSON_DEPTH_MAX) {
			return json_refuse(jr, "nested too deeply");
		}
		return *jr->jr_p == '{' ? json_object(jr, depth + 1) : json_array(jr, depth + 1);
	case '"':
		s = json_string(jr);
		if (s == NULL) {
			return NULL;
		}
		/* Handed over as the value, like a key (json_object). */
		item = cJSON_CreateNull();
		if (item == NULL) {
			free(s);
			return json_refuse(jr, "out of memory");
		}
		item->type = cJSON_String;
		item->valuestring = s;
		return item;
	case '-':
	case '0':
	case '1':
	case '2':
	case '3':
	case '4':
	case '5':
	case '6':
	case '7':
	case '8':
	case '9':
		return json_number(jr);
	default:
		return json_literal(jr);
	}
}

struct cJSON *json_parse_strict(const void *data, size_t len, const char **ret_why)
{
	struct json_reader jr;
	cJSON *root;

	memset(&jr, 0, sizeof(jr));
	if (data == NULL || len == 0) {
		if (ret_why != NULL) {
			*ret_why = "empty input";
		}
		return NULL;
	}
	jr.jr_p = data;
	jr.jr_end = jr.jr_p + len;
	root = json_value(&jr, 0);
	if (root != NULL) {
		json_skip_ws(&jr);
		if (jr.jr_p != jr.jr_end) {
			json_refuse(&jr, "bytes after the JSON value");
			cJSON_Delete(root);
			root = NULL;
		}
	}
	if (root == NULL && ret_why != NULL) {
		*ret_why = jr.jr_why != NULL ? jr.jr_why : "malformed JSON";
	}
	return root;
}
