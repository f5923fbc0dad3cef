/* cmd_migrate.c: `idemhook migrate`: apply pending schema migrations. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "store.h"

/* A lock held elsewhere stopped the migrations: each is applied whole in
 * its own transaction, so the schema is at a version it names, never
 * between two. from and to: the version found and the one reached (-1
 * when not known). */
static int cmd_migrate_busy(int from, int to)
{
	if (from < 0) {
		return cli_tempfail("migrate", "no migration was applied");
	}
	if (to < 0) {
		/* The connection went, and no new one could read the
		 * version a migration may have committed before. */
		return cli_tempfail(
		        "migrate",
		        "the schema is at version %d or a later one, never between two "
		        "(each migration is applied whole in its own transaction, or not "
		        "at all)",
		        from);
	}
	if (to == from) {
		return cli_tempfail("migrate",
		                    "schema version %d is unchanged (each migration is applied "
		                    "whole in its own transaction, or not at all)",
		                    from);
	}
	return cli_tempfail("migrate",
	                    "it went from schema version %d to %d, and the migrations after %d "
	                    "are not applied (each is applied whole in its own transaction, or "
	                    "not at all)",
	                    from, to, to);
}

static int cmd_migrate_run(int argc, char **argv, const char *config_path)
{
	struct store_options so;
	struct config *cf = NULL;
	const char *name;
	int from;
	int to;
	int rc;

	if (cli_wants_help(argc, argv)) {
		printf("usage: idemhook [-c FILE] migrate\n\n"
		       "Applies the schema migrations this binary brings to the configured database,\n"
		       "each in its own transaction. A database from a newer idemhook is refused.\n");
		return EX_OK;
	}
	if (argc != 1) {
		fprintf(stderr, "idemhook migrate: takes no arguments\n");
		return EX_USAGE;
	}
	rc = cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	memset(&so, 0, sizeof(so));
	so.so_backend = (enum store_backend)cf->cf_backend;
	so.so_path = cf->cf_db_path;
	so.so_conninfo = cf->cf_conninfo;
	so.so_busy_timeout_ms = cf->cf_busy_timeout_ms;
	/* The connection string may hold a password: never printed. */
	name = so.so_backend == STORE_BACKEND_POSTGRESQL ? "postgresql" : cf->cf_db_path;
	if (store_migrate_options(&so, &from, &to) < 0) {
		config_destroy(cf);
		if (store_open_error() == STORE_OPEN_BUSY) {
			return cmd_migrate_busy(from, to);
		}
		/* Permissions (logged with their fix) and a server out of
		 * reach are no fault of the database's; a schema it refuses is. */
		switch (store_open_error()) {
		case STORE_OPEN_DENIED:
			return EX_NOPERM;
		case STORE_OPEN_UNREACHABLE:
			return EX_UNAVAILABLE;
		default:
			return EX_DATAERR;
		}
	}
	if (from == to) {
		printf("%s: schema version %d, up to date\n", name, to);
	} else {
		printf("%s: migrated from schema version %d to %d\n", name, from, to);
	}
	config_destroy(cf);
	return EX_OK;
}

const struct cli_command cli_cmd_migrate = {
	.cc_name = "migrate",
	.cc_summary = "apply pending database migrations",
	.cc_run = cmd_migrate_run,
};
