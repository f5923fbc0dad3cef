/* fuzz_stripe.c: the Stripe profile behind a valid Stripe-Signature: every
 * input is a body signed as Stripe signs it, so the event parser is reached. */
#include "fuzz.h"

extern const struct provider provider_stripe;

static struct pt_instance fuzz_pi;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const kv[] = {"secret", "whsec_fuzz_stripe", NULL};

	fuzz_quiet();
	fuzz_instance(&fuzz_pi, &provider_stripe, kv);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_signed(&fuzz_pi, data, size, NULL);
	return 0;
}
