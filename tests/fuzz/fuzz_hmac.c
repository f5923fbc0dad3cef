/* fuzz_hmac.c: the generic HMAC profile behind a valid signature over
 * "{id}.{timestamp}.{body}". Inputs of even length go to an instance with
 * the key in the signed header and minor-unit amounts, odd ones to one with
 * the key at a body path and decimal amounts. */
#include "fuzz.h"

extern const struct provider provider_hmac;

static struct pt_instance fuzz_header_keyed;
static struct pt_instance fuzz_body_keyed;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const header_keyed[] = {"secret",
	                                           "fuzz-hmac-secret",
	                                           "header",
	                                           "X-Signature",
	                                           "prefix",
	                                           "sha256=",
	                                           "key_header",
	                                           "X-Delivery",
	                                           "timestamp_header",
	                                           "X-Timestamp",
	                                           "signed_content",
	                                           "{id}.{timestamp}.{body}",
	                                           "type_path",
	                                           "action",
	                                           "paid_types",
	                                           "paid",
	                                           "refunded_types",
	                                           "refunded",
	                                           "order_path",
	                                           "order.id",
	                                           "amount_path",
	                                           "order.amount",
	                                           "currency_path",
	                                           "order.currency",
	                                           NULL};
	static const char *const body_keyed[] = {"secret",
	                                          "fuzz-hmac-secret",
	                                          "algorithm",
	                                          "sha512",
	                                          "encoding",
	                                          "base64",
	                                          "key_path",
	                                          "event.id",
	                                          "type_path",
	                                          "event.type",
	                                          "paid_types",
	                                          "paid",
	                                          "refunded_types",
	                                          "refunded",
	                                          "order_path",
	                                          "order.id",
	                                          "amount_path",
	                                          "order.total",
	                                          "amount_format",
	                                          "decimal",
	                                          "currency_path",
	                                          "order.currency",
	                                          "refund_path",
	                                          "refund.id",
	                                          "refund_cumulative",
	                                          "yes",
	                                          NULL};

	fuzz_quiet();
	fuzz_instance(&fuzz_header_keyed, &provider_hmac, header_keyed);
	fuzz_instance(&fuzz_body_keyed, &provider_hmac, body_keyed);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size % 2 == 0) {
		fuzz_signed(&fuzz_header_keyed, data, size, "delivery-fuzz");
	} else {
		fuzz_signed(&fuzz_body_keyed, data, size, NULL);
	}
	return 0;
}
