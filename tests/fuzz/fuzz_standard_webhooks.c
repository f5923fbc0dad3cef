/* fuzz_standard_webhooks.c: the Standard Webhooks profile behind a valid v1
 * signature over "id.timestamp.body", with a field mapping configured so
 * the mapped paths, amounts and references are reached. */
#include "fuzz.h"

extern const struct provider provider_standard_webhooks;

static struct pt_instance fuzz_pi;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const kv[] = {"secret",
	                                 "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	                                 "paid_types",
	                                 "payment.succeeded, invoice.paid",
	                                 "refunded_types",
	                                 "payment.refunded",
	                                 "order_path",
	                                 "data.metadata.order_id",
	                                 "refund_path",
	                                 "data.refunds.0.id",
	                                 NULL};

	fuzz_quiet();
	fuzz_instance(&fuzz_pi, &provider_standard_webhooks, kv);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_signed(&fuzz_pi, data, size, "msg_fuzz");
	return 0;
}
