/* fuzz_config.c: the configuration reader: the INI text (through a memfd),
 * the known-keys check, the typed core and provider sections, and the
 * sections other modules read ([gc], [outbound], [api]). */
#include <sys/mman.h>
#include <unistd.h>

#include "api.h"
#include "config.h"
#include "fuzz.h"
#include "gc.h"
#include "outbox.h"
#include "provider.h"

static int fuzz_fd = -1;
static char fuzz_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	fuzz_fd = memfd_create("idemhook-fuzz-config", MFD_CLOEXEC);
	FUZZ_CHECK(fuzz_fd >= 0);
	snprintf(fuzz_path, sizeof(fuzz_path), "/proc/self/fd/%d", fuzz_fd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outbox_conf oc;
	struct config *cf;
	int64_t retry_after = 0;

	FUZZ_CHECK(ftruncate(fuzz_fd, 0) == 0);
	FUZZ_CHECK(size == 0 || pwrite(fuzz_fd, data, size, 0) == (ssize_t)size);
	cf = provider_config_load(fuzz_path);
	if (cf == NULL) {
		return 0;
	}
	FUZZ_CHECK(cf->cf_listen_host != NULL && cf->cf_db_path != NULL);
	FUZZ_CHECK(cf->cf_points_den > 0 && cf->cf_batch_max > 0);
	gc_check_config(cf);
	if (outbox_conf_load(cf, 0, &oc) >= 0) {
		outbox_conf_finish(&oc);
	}
	api_rate_allow(cf, "192.0.2.1", 1733130100000, &retry_after);
	config_destroy(cf);
	return 0;
}
