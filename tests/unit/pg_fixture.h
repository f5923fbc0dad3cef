/* pg_fixture.h: unit tests that also run against PostgreSQL when
 * IDEMHOOK_TEST_PG_CONNINFO names a throwaway database: each test program
 * works in a schema of its own (dropped and made again per test), so
 * programs run in parallel do not meet. Header-only, static helpers. */
#ifndef IDEMHOOK_PG_FIXTURE_H
#define IDEMHOOK_PG_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

#define PG_FIXTURE_CONNINFO_MAX 1024

/* The database the PostgreSQL variants use, or NULL to skip them. */
static inline const char *pg_fixture_base(void)
{
	const char *s = getenv("IDEMHOOK_TEST_PG_CONNINFO");

	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* base with search_path set to schema, into out. Returns 0 or -1. */
static inline int pg_fixture_conninfo(const char *schema, char *out, size_t size)
{
	const char *base = pg_fixture_base();
	int n;

	if (base == NULL) {
		return -1;
	}
	if (strncmp(base, "postgres://", 11) == 0 || strncmp(base, "postgresql://", 13) == 0) {
		n = snprintf(out, size, "%s%soptions=-csearch_path%%3D%s", base,
		             strchr(base, '?') != NULL ? "&" : "?", schema);
	} else {
		n = snprintf(out, size, "%s options='-csearch_path=%s'", base, schema);
	}
	return n > 0 && (size_t)n < size ? 0 : -1;
}

static int pg_fixture_reset_tx(struct store_tx *tx, void *arg)
{
	const char *schema = arg;
	char sql[256];

	snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", schema);
	if (store_exec(tx, sql, NULL, 0, NULL) < 0) {
		return -1;
	}
	snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", schema);
	return store_exec(tx, sql, NULL, 0, NULL);
}

/* Drops and makes again the schema, through a store on the base database
 * (whose own schema is migrated on the way). Returns 0 or -1. */
static inline int pg_fixture_reset(const char *schema)
{
	struct store_options so;
	struct store *st;
	int r;

	memset(&so, 0, sizeof(so));
	so.so_backend = STORE_BACKEND_POSTGRESQL;
	so.so_conninfo = pg_fixture_base();
	if (so.so_conninfo == NULL) {
		return -1;
	}
	st = store_create(&so);
	if (st == NULL) {
		return -1;
	}
	r = store_write(st, 0, pg_fixture_reset_tx, (void *)schema);
	store_destroy(st);
	return r < 0 ? -1 : 0;
}

#endif
