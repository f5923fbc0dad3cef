/* dupcount.c: duplicates answered per idempotency key, in a fixed table in
 * memory (dupcount.h). Direct-mapped on a 64-bit hash of scope and key:
 * no allocation, no growth, a lock per stripe of slots held for a few
 * instructions. */
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

/* Slot i is guarded by dupcount_locks[i % DUPCOUNT_LOCKS]. One lock for
 * the table was a cache line that every server thread wrote for every
 * duplicate (issue 24); each lock has its line, so two threads counting
 * different keys share none. */
#define DUPCOUNT_LOCKS 64

struct dupcount_lock {
	_Alignas(64) pthread_mutex_t dl_mutex;
};

static struct dupcount_slot dupcount_table[DUPCOUNT_SLOTS];
static struct dupcount_lock dupcount_locks[DUPCOUNT_LOCKS];
static pthread_once_t dupcount_once = PTHREAD_ONCE_INIT;

static void dupcount_init(void)
{
	size_t i;

	for (i = 0; i < DUPCOUNT_LOCKS; i++) {
		pthread_mutex_init(&dupcount_locks[i].dl_mutex, NULL);
	}
}

static pthread_mutex_t *dupcount_lock_of(uint64_t h)
{
	pthread_once(&dupcount_once, dupcount_init);
	return &dupcount_locks[(h % DUPCOUNT_SLOTS) % DUPCOUNT_LOCKS].dl_mutex;
}

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
	pthread_mutex_t *lock = dupcount_lock_of(h);

	pthread_mutex_lock(lock);
	if (s->ds_hash != h) {
		s->ds_hash = h;
		s->ds_count = 0;
	}
	if (s->ds_count < UINT32_MAX) {
		s->ds_count++;
	}
	s->ds_last_ms = now;
	pthread_mutex_unlock(lock);
}

int dupcount_get(const char *scope, const char *key, uint32_t *ret_count, int64_t *ret_last_ms)
{
	uint64_t h = dupcount_hash(scope, key);
	const struct dupcount_slot *s = &dupcount_table[h % DUPCOUNT_SLOTS];
	pthread_mutex_t *lock = dupcount_lock_of(h);
	int found = 0;

	pthread_mutex_lock(lock);
	if (s->ds_hash == h && s->ds_count > 0) {
		*ret_count = s->ds_count;
		*ret_last_ms = s->ds_last_ms;
		found = 1;
	}
	pthread_mutex_unlock(lock);
	return found;
}

void dupcount_reset(void)
{
	size_t i;

	pthread_once(&dupcount_once, dupcount_init);
	for (i = 0; i < DUPCOUNT_LOCKS; i++) {
		pthread_mutex_lock(&dupcount_locks[i].dl_mutex);
	}
	memset(dupcount_table, 0, sizeof(dupcount_table));
	for (i = DUPCOUNT_LOCKS; i > 0; i--) {
		pthread_mutex_unlock(&dupcount_locks[i - 1].dl_mutex);
	}
}
