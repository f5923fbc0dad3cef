/* keyset.h: a filter of the idempotency keys a database may hold, kept in
 * memory so that a claim whose key was never stored skips the read that
 * looks for a stored reply and goes straight to the writer (issue 24: that
 * read was some 15 us of a unique callback's CPU). A Bloom filter blocked
 * on 64-bit words: "absent" is certain for every key added, "maybe" may be
 * wrong for about one key in a hundred at its capacity, more past it. It
 * decides nothing about a key: the writer's unique index does; a wrong
 * answer only costs time. Lock-free: adds and lookups from any thread. */
#ifndef IDEMHOOK_KEYSET_H
#define IDEMHOOK_KEYSET_H

#include <stddef.h>
#include <stdint.h>

struct keyset;

/* The hash of a scope and a key, as keyset_add and keyset_maybe take it. */
uint64_t keyset_hash(const char *scope, const char *key);

/* A filter sized for capacity keys (at least one). NULL when out of memory. */
struct keyset *keyset_new(size_t capacity);
void keyset_free(struct keyset *ks);

/* Adds a key's hash. Returns 1 when it was not there before (the count of
 * keys grew), 0 when it may have been. */
int keyset_add(struct keyset *ks, uint64_t hash);

/* 0 when the key was certainly never added, 1 when it may have been. */
int keyset_maybe(const struct keyset *ks, uint64_t hash);

/* Keys added (those keyset_add counted), and the capacity it was made for. */
size_t keyset_count(const struct keyset *ks);
size_t keyset_capacity(const struct keyset *ks);
/* Bytes of memory it holds. */
size_t keyset_bytes(const struct keyset *ks);

#endif
