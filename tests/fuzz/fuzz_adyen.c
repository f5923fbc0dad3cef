/* fuzz_adyen.c: the Adyen profile behind valid item signatures. An input
 * that is JSON has every NotificationRequestItem signed as Adyen signs it
 * (HMAC-SHA256 over the eight ':'-joined fields) before it is sent, so the
 * batch and item handling are reached; any other input is sent as it is. */
#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "fuzz.h"
#include "json.h"

extern const struct provider provider_adyen;

#define FUZZ_ADYEN_KEY_HEX "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"

static struct pt_instance fuzz_pi;
static unsigned char *fuzz_key;
static size_t fuzz_key_len;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const kv[] = {"hmac_key", FUZZ_ADYEN_KEY_HEX, "merchant_account",
	                                 "ShopCOM", NULL};

	fuzz_quiet();
	fuzz_instance(&fuzz_pi, &provider_adyen, kv);
	FUZZ_CHECK(crypto_hex_decode(FUZZ_ADYEN_KEY_HEX, strlen(FUZZ_ADYEN_KEY_HEX), &fuzz_key,
	                             &fuzz_key_len) == 0);
	return 0;
}

/* One field as the sender puts it in the signed string; -1 when it cannot
 * (the profile then refuses the item, which is fine to reach too). */
static int fuzz_field(const cJSON *item, const char *a, const char *b, struct buf *out)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(item, a);

	if (b != NULL) {
		it = cJSON_GetObjectItemCaseSensitive(it, b);
	}
	if (it == NULL || cJSON_IsNull(it)) {
		return 0;
	}
	if (cJSON_IsString(it)) {
		return buf_puts(out, it->valuestring);
	}
	if (cJSON_IsBool(it)) {
		return buf_puts(out, cJSON_IsTrue(it) ? "true" : "false");
	}
	if (cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble < 1e15 &&
	    it->valuedouble == (double)(long long)it->valuedouble) {
		return buf_printf(out, "%lld", (long long)it->valuedouble);
	}
	return -1;
}

static void fuzz_sign_item(cJSON *item)
{
	static const char *const fields[][2] = {
	        {"pspReference", NULL},      {"originalReference", NULL}, {"merchantAccountCode", NULL},
	        {"merchantReference", NULL}, {"amount", "value"},         {"amount", "currency"},
	        {"eventCode", NULL},         {"success", NULL}};
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t mac_len = 0;
	char *b64 = NULL;
	cJSON *additional;
	struct buf b;
	size_t i;

	buf_init(&b, 0);
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if ((i > 0 && buf_puts(&b, ":") < 0) ||
		    fuzz_field(item, fields[i][0], fields[i][1], &b) < 0) {
			buf_finish(&b);
			return;
		}
	}
	buf_puts(&b, "");
	if (crypto_hmac(CRYPTO_SHA256, fuzz_key, fuzz_key_len, b.buf_data, b.buf_len, mac,
	                &mac_len) == 0 &&
	    crypto_base64_encode(mac, mac_len, &b64, NULL) == 0) {
		additional = cJSON_GetObjectItemCaseSensitive(item, "additionalData");
		if (!cJSON_IsObject(additional)) {
			cJSON_DeleteItemFromObjectCaseSensitive(item, "additionalData");
			additional = cJSON_AddObjectToObject(item, "additionalData");
		}
		if (additional != NULL) {
			cJSON_DeleteItemFromObjectCaseSensitive(additional, "hmacSignature");
			cJSON_AddStringToObject(additional, "hmacSignature", b64);
		}
	}
	free(b64);
	buf_finish(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *root = json_parse_strict(data, size, NULL);
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "notificationItems");
	const cJSON *it;
	struct pt_request r;
	char *text = NULL;

	cJSON_ArrayForEach(it, items)
	{
		cJSON *item = cJSON_GetObjectItemCaseSensitive(it, "NotificationRequestItem");

		if (cJSON_IsObject(item)) {
			fuzz_sign_item(item);
		}
	}
	if (root != NULL) {
		text = cJSON_PrintUnformatted(root);
	}
	if (text != NULL) {
		pt_request_init(&r, text, strlen(text));
	} else {
		pt_request_init(&r, data, size);
	}
	pt_request_header(&r, "Content-Type", "application/json");
	fuzz_receive(&fuzz_pi, &r);
	pt_request_finish(&r);
	cJSON_free(text);
	cJSON_Delete(root);
	return 0;
}
