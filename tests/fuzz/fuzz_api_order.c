/* fuzz_api_order.c: the order API's body parser (POST /api/orders): what it
 * accepts is an order idemhook can store. */
#include "api.h"
#include "fuzz.h"
#include "money.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_order_body ob;
	unsigned char fp[32];
	const char *slug = NULL;
	char detail[API_DETAIL_MAX];

	if (api_order_body_parse(data, size, &ob, &slug, detail) < 0) {
		FUZZ_CHECK(slug != NULL && detail[0] != '\0');
		FUZZ_CHECK(strcmp(slug, "malformed_json") == 0 || strcmp(slug, "invalid_order") == 0);
		return 0;
	}
	FUZZ_CHECK(ob.ob_amount >= 1 && ob.ob_amount <= MONEY_MAX_MINOR);
	FUZZ_CHECK(strlen(ob.ob_currency) == 3);
	FUZZ_CHECK(!ob.ob_has_customer_ref ||
	           (ob.ob_customer_ref[0] != '\0' && strlen(ob.ob_customer_ref) <= API_TEXT_MAX));
	/* The stored fingerprint is the one a retry of the same body gets. */
	FUZZ_CHECK(api_fingerprint(data, size, fp) == 0);
	FUZZ_CHECK(memcmp(fp, ob.ob_fingerprint, sizeof(fp)) == 0);
	return 0;
}
