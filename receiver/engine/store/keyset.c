/* keyset.c: a Bloom filter of idempotency keys, blocked on 64-bit words
 * (keyset.h). A key sets KEYSET_PROBES bits of one word, so an add is one
 * atomic OR and a lookup one load: a claim pays tens of nanoseconds, not a
 * read of the database. With KEYSET_BITS_PER_KEY bits per key the false
 * "maybe" rate at capacity is about 1 %. */
#include <stdatomic.h>
#include <stdlib.h>

#include "keyset.h"

#define KEYSET_BITS_PER_KEY 12
#define KEYSET_PROBES 6 /* bits set per key, each 6 bits of the second hash */

struct keyset {
	size_t ks_words;
	size_t ks_capacity;
	atomic_size_t ks_count;
	_Atomic uint64_t ks_bits[];
};

/* splitmix64's finaliser: spreads every input bit over the output. */
static uint64_t keyset_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

uint64_t keyset_hash(const char *scope, const char *key)
{
	uint64_t h = 14695981039346656037ULL; /* FNV-1a over scope, a NUL, key */
	const unsigned char *p;

	for (p = (const unsigned char *)(scope != NULL ? scope : ""); *p != '\0'; p++) {
		h = (h ^ *p) * 1099511628211ULL;
	}
	h *= 1099511628211ULL;
	for (p = (const unsigned char *)(key != NULL ? key : ""); *p != '\0'; p++) {
		h = (h ^ *p) * 1099511628211ULL;
	}
	return keyset_mix(h);
}

struct keyset *keyset_new(size_t capacity)
{
	struct keyset *ks;
	size_t words;
	size_t i;

	if (capacity == 0) {
		capacity = 1;
	}
	if (capacity > (SIZE_MAX / 2) / KEYSET_BITS_PER_KEY) {
		return NULL;
	}
	words = (capacity * KEYSET_BITS_PER_KEY + 63) / 64;
	ks = malloc(sizeof(*ks) + words * sizeof(ks->ks_bits[0]));
	if (ks == NULL) {
		return NULL;
	}
	ks->ks_words = words;
	ks->ks_capacity = capacity;
	atomic_init(&ks->ks_count, 0);
	for (i = 0; i < words; i++) {
		atomic_init(&ks->ks_bits[i], 0);
	}
	return ks;
}

void keyset_free(struct keyset *ks)
{
	free(ks);
}

/* The word a hash falls in, and the bits it sets there. */
static size_t keyset_word(const struct keyset *ks, uint64_t hash, uint64_t *ret_mask)
{
	uint64_t second = keyset_mix(hash ^ 0x9e3779b97f4a7c15ULL);
	uint64_t mask = 0;
	int i;

	for (i = 0; i < KEYSET_PROBES; i++) {
		mask |= 1ULL << ((second >> (6 * i)) & 63);
	}
	*ret_mask = mask;
	return (size_t)(((unsigned __int128)hash * ks->ks_words) >> 64);
}

int keyset_add(struct keyset *ks, uint64_t hash)
{
	uint64_t mask;
	size_t w = keyset_word(ks, hash, &mask);
	uint64_t before;

	if ((atomic_load_explicit(&ks->ks_bits[w], memory_order_relaxed) & mask) == mask) {
		return 0;
	}
	before = atomic_fetch_or_explicit(&ks->ks_bits[w], mask, memory_order_relaxed);
	if ((before & mask) == mask) {
		return 0;
	}
	atomic_fetch_add_explicit(&ks->ks_count, 1, memory_order_relaxed);
	return 1;
}

int keyset_maybe(const struct keyset *ks, uint64_t hash)
{
	uint64_t mask;
	size_t w = keyset_word(ks, hash, &mask);

	return (atomic_load_explicit(&ks->ks_bits[w], memory_order_relaxed) & mask) == mask;
}

size_t keyset_count(const struct keyset *ks)
{
	return atomic_load_explicit(&ks->ks_count, memory_order_relaxed);
}

size_t keyset_capacity(const struct keyset *ks)
{
	return ks->ks_capacity;
}

size_t keyset_bytes(const struct keyset *ks)
{
	return sizeof(*ks) + ks->ks_words * sizeof(ks->ks_bits[0]);
}
