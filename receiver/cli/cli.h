/* cli.h: the idemhook command line: one file per command (cmd_<name>.c),
 * registered in the alphabetized table in main.c. Exit codes follow
 * sysexits(3), one meaning per code (cli_exit_codes in main.c). */
#ifndef IDEMHOOK_CLI_H
#define IDEMHOOK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sysexits.h>

struct config;
struct store;

/* "No such ID" (event, outbox row, order, earlier callback), the same code
 * for every command; the whole table is in main.c (idemhook --help). */
#define CLI_EX_NOT_FOUND EX_NOINPUT

/* `events reprocess`: the handler ran (the new outcome stored, audited and
 * counted as reprocessed) and the event is still failed. Not EX_DATAERR,
 * which says nothing was done; 1 as grep and diff use it, the command
 * worked and the answer is no (sysexits(3) leaves codes below 64 to the
 * program). */
#define CLI_EX_STILL_FAILED 1

struct cli_command {
	const char *cc_name;    /* "serve", "outbox", ... */
	const char *cc_summary; /* one line for idemhook --help */
	/* argv[0] is the command name; -c/--config has been removed from argv
	 * and is passed as config_path (NULL when not given). Returns an exit code. */
	int (*cc_run)(int argc, char **argv, const char *config_path);
};

/* The configuration file a command reads: config_path (-c), else
 * $IDEMHOOK_CONFIG, else IDEMHOOK_DEFAULT_CONFIG (the installed unit's)
 * when it exists, else NULL, the demo: for a command other than serve
 * (demo_ok 0) only while the demo's database exists. Returns 0 with
 * *ret_path set, or -1 ("no configuration given", printed). */
int cli_config_path(const char *config_path, int demo_ok, const char **ret_path);

/* Loads the config (the file cli_config_path names) and checks it whole
 * (confcheck.h), with its shape only: no provider secret is read, so the
 * commands that verify and sign nothing run without them. Returns EX_OK
 * with *ret set, or EX_CONFIG (logged). */
int cli_load_config(const char *config_path, struct config **ret);

/* cli_load_config, reading every provider's secrets: for the commands
 * that verify or sign (simulate, replay, reconcile). */
int cli_load_config_secrets(const char *config_path, struct config **ret);

/* For the commands that make outbound calls by hand (reconcile, simulate,
 * replay --to, ips fetch): [client] ca_file, when set, must be a file TLS
 * can load, as serve requires. Else every call would fail, reading as the
 * peer's fault. Returns EX_OK, or EX_CONFIG with the file named (logged). */
int cli_check_client_ca_file(const struct config *cf);

/* Opens the store named by cf for a command: read_only commands do not run
 * migrations nor start a writer; read_only CLI_STORE_EXISTING is a writer
 * on a database that must exist. Only serve, migrate, order create, replay
 * and store copy's target create a missing SQLite database; a reader and
 * a command that only changes or cleans up what is stored (gc, events
 * dismiss and reprocess, outbox retry, cancel and compensate, reconcile)
 * refuse it with 69, creating nothing. Returns EX_OK with *ret set, or an
 * exit code. */
#define CLI_STORE_EXISTING 3
int cli_open_store(const struct config *cf, int read_only, struct store **ret);

/* cli_load_config and cli_open_store in one (read_only as there): the
 * commands that read or change the store and sign nothing. Returns EX_OK with *ret_cf and *ret_st
 * set (the caller destroys both), or an exit code with neither set. */
int cli_open(const char *config_path, int read_only, struct config **ret_cf, struct store **ret_st);

/* cli_open_store, and with exclusive the SQLite receiver lock held for the
 * store's life (serve): a second one on the same file is refused.
 * read_only may be CLI_STORE_NO_MIGRATE: a writer that refuses a database
 * with migrations pending instead of applying them. */
#define CLI_STORE_NO_MIGRATE 2
int cli_open_store_exclusive(const struct config *cf, int read_only, int exclusive,
                             struct store **ret);

/* The closing line of a command that writes, when the store failed for a
 * moment (busy, locked, a connection lost; the store's own line above
 * says which): "idemhook CMD: the database is busy or failing; WHAT
 * (printf-formatted: what is unchanged). Run the same command again.",
 * on stderr; when a statement of this process failed for a full disk
 * (store_full_count), "the disk of the database is full; WHAT. Free space
 * ... first, then run the same command again." cmd NULL is the command
 * main runs. Returns EX_TEMPFAIL, the command's exit code. */
int cli_tempfail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Names the command main runs ("events"), for cli_getopt's messages. */
void cli_command_set(const char *name);

/* getopt_long(3), whose messages name the whole command ("idemhook events
 * dismiss: unrecognized option '--bogus'") rather than argv[0] alone
 * ("dismiss: ..."): argv[0] is the command main ran or one of its
 * subcommands. */
struct option;
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/* 1 when argv holds -h or --help. */
int cli_wants_help(int argc, char **argv);

/* The wall clock in ms since the epoch. */
int64_t cli_now_ms(void);

/* Parses a positive decimal row id. Returns 0 or -1. */
int cli_parse_id(const char *s, int64_t *ret);

/* ms since the epoch as "YYYY-MM-DDTHH:MM:SSZ" (UTC); "-" for ms <= 0. */
void cli_format_time(int64_t ms, char out[32]);

/* ---- shared by the commands (cli.c) ---- */

/* Listings show this many rows unless --limit says otherwise (1..CLI_LIMIT_MAX). */
#define CLI_LIMIT_DEFAULT 50
#define CLI_LIMIT_MAX 100000

/* Prints s ("-" when NULL or empty) for a person to read: stored text
 * (customer references, provider ids, errors) came from outside, so its
 * control characters and bytes that are not UTF-8 are shown escaped
 * (text_printable), never sent to the terminal. JSON output escapes with
 * cli_json_string instead. */
void cli_text(FILE *out, const char *s);

/* label (its padding included), cli_text(s) and a newline: one line of a
 * `show` command. */
void cli_line(FILE *out, const char *label, const char *s);

/* cli_text(s) in a column of width characters, padded; a longer value is
 * cut to width-1 characters and an ellipsis, never silently. */
void cli_cell(FILE *out, const char *s, int width);

/* s as a JSON string (text_json_string: valid JSON and safe on a terminal
 * whatever is stored), or null for NULL. */
void cli_json_string(FILE *out, const char *s);

/* JSON text built elsewhere (a stored payload, a report) as
 * text_json_clean leaves it: C1 escaped, a byte not UTF-8 as \ufffd. */
void cli_json_text(FILE *out, const char *json, size_t len);

/* ms as a JSON string "YYYY-MM-DDTHH:MM:SSZ", or null for ms <= 0. */
void cli_json_time(FILE *out, int64_t ms);

/* "2026-11-01", "2026-11-01T08:00:00Z" (UTC), or a duration ago ("3d",
 * "90m"). Returns 0 with ms since the epoch, or -1. */
int cli_parse_when(const char *s, int64_t *ret_ms);

/* A progress line on stderr while a long command runs, as replay draws
 * its bar: only on a terminal (never into a pipe, a file or the journal). */
struct cli_progress {
	int cp_on;
	int64_t cp_start_ms; /* monotonic */
	int64_t cp_drawn_ms;
};

/* Starts the clock; the line is drawn when stderr is a terminal and not quiet. */
void cli_progress_init(struct cli_progress *p, int quiet);

/* Redraws the line (at most every 100 ms; always when final, which ends
 * it with a newline) with the text and the seconds so far. */
void cli_progress_draw(struct cli_progress *p, int final, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Seconds since cli_progress_init, for the summary. */
double cli_progress_seconds(const struct cli_progress *p);

/* Takes every flag (e.g. "--json") out of argv[1..] (argv[0] stays),
 * shortening *argc. Returns 1 when it was there, else 0. */
int cli_take_flag(int *argc, char **argv, const char *flag);

/* Parses --limit's argument for cmd into *ret; says what it wants and
 * returns -1 when it is not 1..CLI_LIMIT_MAX. */
int cli_parse_limit(const char *cmd, const char *arg, int64_t *ret);

/* The name the CLI records its actions under in the audit log:
 * "cli:USER" ($SUDO_USER under sudo). */
void cli_actor(char *out, size_t size);

/* ---- the files a command writes (every one 0600, every directory 0700,
 * whatever the umask: docs/operations.md) ---- */

/* Makes dir, mode exactly 0700, when it is missing; run as root, owned
 * like the directory above it (the service's user beside its database).
 * cmd prefixes the message on failure. Returns 0 or -1 (told). */
int cli_mkdir_private(const char *cmd, const char *dir);

/* Writes data to path through path.new, fsync and a rename (a reader sees
 * the old file or the new one whole), mode exactly 0600; run as root, owned
 * like the directory it is in. Returns 0 or -1 (told, nothing replaced). */
int cli_write_private(const char *cmd, const char *path, const void *data, size_t len);

extern const struct cli_command cli_cmd_audit;
extern const struct cli_command cli_cmd_events;
extern const struct cli_command cli_cmd_gc;
extern const struct cli_command cli_cmd_ips;
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
