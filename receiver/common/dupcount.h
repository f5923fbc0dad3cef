/* dupcount.h: how many duplicate deliveries this receiver answered, per
 * idempotency key, counted in memory as they are answered: the console's
 * event page shows it. The store answers a duplicate from a read, without
 * a write, and this keeps it so: the count is this process's own since it
 * started (a restart or another receiver starts from zero), for up to
 * DUPCOUNT_SLOTS keys at once (a key whose slot a later key's duplicate
 * took reads as none). The total per provider is the metric
 * idemhook_duplicates_absorbed_total. Thread-safe. */
#ifndef IDEMHOOK_DUPCOUNT_H
#define IDEMHOOK_DUPCOUNT_H

#include <stdint.h>

#define DUPCOUNT_SLOTS 8192

/* Counts one duplicate of (scope, key) answered now. */
void dupcount_add(const char *scope, const char *key);

/* The count of (scope, key) and when the last one was answered (ms since
 * the epoch). Returns 1 with both set, or 0 when none is counted. */
int dupcount_get(const char *scope, const char *key, uint32_t *ret_count, int64_t *ret_last_ms);

/* Forgets every count (tests). */
void dupcount_reset(void);

#endif
