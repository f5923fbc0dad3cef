/* cmd_migrate.c: `idemhook migrate`: apply pending schema migrations. */
#include <stdio.h>

#include "cli.h"
#include "config.h"
#include "store.h"

static int cmd_migrate_run(int argc, char **argv, const char *config_path)
{
	struct config *cf = NULL;
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
	if (store_migrate(cf->cf_db_path, &from, &to) < 0) {
		config_destroy(cf);
		return EX_DATAERR;
	}
	if (from == to) {
		printf("%s: schema version %d, up to date\n", cf->cf_db_path, to);
	} else {
		printf("%s: migrated from schema version %d to %d\n", cf->cf_db_path, from, to);
	}
	config_destroy(cf);
	return EX_OK;
}

const struct cli_command cli_cmd_migrate = {
	.cc_name = "migrate",
	.cc_summary = "apply pending database migrations",
	.cc_run = cmd_migrate_run,
};
