/* rejects.h: the last callbacks refused before any claim (bad signature,
 * stale timestamp, source not allowed, body too large), in a bounded ring in
 * memory, for the console's "Rejected requests" page: an operator who
 * rotated a secret wrongly sees it at once. Process-wide, as the metric
 * counters are; thread-safe. */
#ifndef IDEMHOOK_REJECTS_H
#define IDEMHOOK_REJECTS_H

#include <stddef.h>
#include <stdint.h>

#define REJECTS_RING 256 /* refusals kept, the oldest dropped first */

struct rejects_entry {
	int64_t re_at_ms;
	int re_status;
	char re_provider[64]; /* instance name, or the path's last part */
	char re_reason[48];
	char re_client[64];
};

/* Records one refusal (strings are cut to fit; NULL as ""). */
void rejects_add(int64_t at_ms, const char *provider, const char *reason, int status,
                 const char *client);

/* Copies up to max entries, newest first, into out. Returns how many, and
 * ret_total (may be NULL) gets every refusal recorded since start. */
size_t rejects_snapshot(struct rejects_entry *out, size_t max, uint64_t *ret_total);

/* Refusals recorded at or after since_ms for provider (NULL: any), of those
 * still in the ring. */
size_t rejects_count_since(int64_t since_ms, const char *provider);

/* Empties the ring (tests). */
void rejects_reset(void);

#endif
