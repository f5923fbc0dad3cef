/* dupcount.c: duplicates answered per idempotency key, in a fixed table in
 * memory (dupcount.h). Direct-mapped on a 64-bit hash of scope and key:
 * no allocation, no growth, one lock held for a few instructions. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "dupcount.h"

struct dupcount_slot {
	uint64_t ds_hash; /* 0: empty */
	uint32_t ds_count;
	int64_t ds_last_ms;
};

static struct dupcount_slot dupcount_table[DUPCOUNT_SLOTS];
static pthread_mutex_t dupcount_lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a over scope, a NUL, then key; never 0 (the empty mark). */
static uint64_t dupcount_hash(const char *scope, const char *key)
{
	uint64_t h = 14695981039346656037ULL;
	const unsigned char *p;

	for (p = (const unsigned char *)(scope != NULL ? scope : ""); *p != '\0'; p++) {
		h = (h ^ *p) * 1099511628211ULL;
	}
	h = (h ^ 0u) * 1099511628211ULL;
	for (p = (const unsigned char *)(key != NULL ? key : ""); *p != '\0'; p++) {
		h = (h ^ *p) * 1099511628211ULL;
	}
	return h != 0 ? h : 1;
}

static int64_t dupcount_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dupcount_add(const char *scope, const char *key)
{
	uint64_t h = dupcount_hash(scope, key);
	struct dupcount_slot *s = &dupcount_table[h % DUPCOUNT_SLOTS];
	int64_t now = dupcount_now_ms();

	pthread_mutex_lock(&dupcount_lock);
	if (s->ds_hash != h) {
		s->ds_hash = h;
		s->ds_count = 0;
	}
	if (s->ds_count < UINT32_MAX) {
		s->ds_count++;
	}
	s->ds_last_ms = now;
	pthread_mutex_unlock(&dupcount_lock);
}

int dupcount_get(const char *scope, const char *key, uint32_t *ret_count, int64_t *ret_last_ms)
{
	uint64_t h = dupcount_hash(scope, key);
	const struct dupcount_slot *s = &dupcount_table[h % DUPCOUNT_SLOTS];
	int found = 0;

	pthread_mutex_lock(&dupcount_lock);
	if (s->ds_hash == h && s->ds_count > 0) {
		*ret_count = s->ds_count;
		*ret_last_ms = s->ds_last_ms;
		found = 1;
	}
	pthread_mutex_unlock(&dupcount_lock);
	return found;
}

void dupcount_reset(void)
{
	pthread_mutex_lock(&dupcount_lock);
	memset(dupcount_table, 0, sizeof(dupcount_table));
	pthread_mutex_unlock(&dupcount_lock);
}
