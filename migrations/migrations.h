/* migrations.h: the numbered SQL migrations embedded at build time. */
#ifndef IDEMHOOK_MIGRATIONS_H
#define IDEMHOOK_MIGRATIONS_H

#include <stddef.h>

struct migration {
	int mg_version; /* NNNN of the file name; user_version after applying */
	const char *mg_name;
	const char *mg_sql;
};

extern const struct migration migrations[];
extern const size_t migrations_count;

/* The same versions for PostgreSQL (migrations/postgresql/). */
extern const struct migration migrations_pg[];
extern const size_t migrations_pg_count;

#endif
