/* cli.h: the idemhook command line: one file per command (cmd_<name>.c),
 * registered in the alphabetized table in main.c. Exit codes follow
 * sysexits(3). */
#ifndef IDEMHOOK_CLI_H
#define IDEMHOOK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sysexits.h>

struct config;
struct store;

struct cli_command {
	const char *cc_name; /* "serve", "outbox", ... */
	const char *cc_summary; /* one line for idemhook --help */
	/* argv[0] is the command name; -c/--config has been removed from argv
	 * and is passed as config_path (NULL when not given). Returns an exit code. */
	int (*cc_run)(int argc, char **argv, const char *config_path);
};

/* Loads the config (NULL path: $IDEMHOOK_CONFIG if set, else the demo).
 * Returns EX_OK with *ret set, or EX_CONFIG (logged). */
int cli_load_config(const char *config_path, struct config **ret);

/* Opens the store named by cf for a command: read_only commands do not run
 * migrations nor start a writer. Returns EX_OK with *ret set, or an exit code. */
int cli_open_store(const struct config *cf, int read_only, struct store **ret);

/* cli_open_store, and with exclusive the SQLite receiver lock held for the
 * store's life (serve): a second one on the same file is refused.
 * read_only may be CLI_STORE_NO_MIGRATE: a writer that refuses a database
 * with migrations pending instead of applying them. */
#define CLI_STORE_NO_MIGRATE 2
int cli_open_store_exclusive(const struct config *cf, int read_only, int exclusive,
                             struct store **ret);

/* 1 when argv holds -h or --help. */
int cli_wants_help(int argc, char **argv);

/* The wall clock in ms since the epoch. */
int64_t cli_now_ms(void);

/* Parses a positive decimal row id. Returns 0 or -1. */
int cli_parse_id(const char *s, int64_t *ret);

/* ms since the epoch as "YYYY-MM-DDTHH:MM:SSZ" (UTC); "-" for ms <= 0. */
void cli_format_time(int64_t ms, char out[32]);

/* s, or "-" when s is NULL or empty. */
const char *cli_or_dash(const char *s);

/* The name the CLI records its actions under in the audit log:
 * "cli:USER" ($SUDO_USER under sudo). */
void cli_actor(char *out, size_t size);

extern const struct cli_command cli_cmd_audit;
extern const struct cli_command cli_cmd_events;
extern const struct cli_command cli_cmd_gc;
extern const struct cli_command cli_cmd_migrate;
extern const struct cli_command cli_cmd_order;
extern const struct cli_command cli_cmd_outbox;
extern const struct cli_command cli_cmd_reconcile;
extern const struct cli_command cli_cmd_replay;
extern const struct cli_command cli_cmd_serve;
extern const struct cli_command cli_cmd_simulate;
extern const struct cli_command cli_cmd_stats;
extern const struct cli_command cli_cmd_store;

#endif
