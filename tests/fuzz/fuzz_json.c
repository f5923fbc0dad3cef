/* fuzz_json.c: the strict JSON reader. What it accepts must print and read
 * back to the same tree, and cJSON's own parser must read it the same way:
 * the strict reader may refuse more, never read differently. */
#include <cjson/cJSON.h>

#include "fuzz.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* cJSON copies a number into 64 bytes before strtod, so it misreads longer
 * ones: it is no reference for texts that hold such a run. */
static int fuzz_long_number(const uint8_t *data, size_t size)
{
	size_t run = 0;
	size_t i;

	for (i = 0; i < size; i++) {
		run = strchr("0123456789+-.eE", data[i]) != NULL && data[i] != '\0' ? run + 1 : 0;
		if (run >= 60) {
			return 1;
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;
	cJSON *strict = json_parse_strict(data, size, &why);
	cJSON *again;
	cJSON *lenient;
	char *text;

	if (strict == NULL) {
		FUZZ_CHECK(why != NULL);
		return 0;
	}
	text = cJSON_PrintUnformatted(strict);
	FUZZ_CHECK(text != NULL);
	again = json_parse_strict(text, strlen(text), &why);
	FUZZ_CHECK(again != NULL);
	FUZZ_CHECK(cJSON_Compare(strict, again, 1));
	if (!fuzz_long_number(data, size)) {
		lenient = cJSON_ParseWithLength((const char *)data, size);
		FUZZ_CHECK(lenient != NULL);
		FUZZ_CHECK(cJSON_Compare(strict, lenient, 1));
		cJSON_Delete(lenient);
	}
	cJSON_Delete(again);
	cJSON_free(text);
	cJSON_Delete(strict);
	return 0;
}
