/* main.c: the idemhook command line: global options and the command table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "build_config.h"
#include "cli.h"
#include "confcheck.h"
#include "config.h"
#include "console.h"
#include "crypto.h"
#include "log.h"
#include "provider.h"
#include "store.h"

/* Alphabetized; one line per command file. */
static const struct cli_command *const cli_commands[] = {
	&cli_cmd_audit,
	&cli_cmd_events,
	&cli_cmd_gc,
	&cli_cmd_ips,
	&cli_cmd_migrate,
	&cli_cmd_order,
	&cli_cmd_outbox,
	&cli_cmd_reconcile,
	&cli_cmd_replay,
	&cli_cmd_serve,
	&cli_cmd_simulate,
	&cli_cmd_stats,
	&cli_cmd_store,
};

#define CLI_N_COMMANDS (sizeof(cli_commands) / sizeof(cli_commands[0]))

/* The exit status of every command: one meaning per code (docs/cli.md and
 * the man page's EXIT STATUS say the same). */
static const struct {
	int ce_code;
	const char *ce_meaning;
} cli_exit_codes[] = {
        {EX_OK, "success"},
        {CLI_EX_STILL_FAILED, "ran, but the event is still failed (events reprocess)"},
        {EX_USAGE, "usage error: a bad command line, an unknown provider"},
        {EX_DATAERR, "refused: a transition not allowed, an answer rejected"},
        {CLI_EX_NOT_FOUND, "not found: no such event, outbox row or order"},
        {EX_UNAVAILABLE, "unavailable: no database, or no answer came"},
        {EX_SOFTWARE, "internal error"},
        {EX_OSERR, "operating system error (out of memory)"},
        {EX_CANTCREAT, "cannot create a file (port file, key pair)"},
        {EX_TEMPFAIL, "temporary failure (database busy, provider failing): try again"},
        {EX_NOPERM, "permission denied: this user may not read or write the database's files"},
        {EX_CONFIG, "configuration error"},
};

#define CLI_N_EXIT_CODES (sizeof(cli_exit_codes) / sizeof(cli_exit_codes[0]))

static void cli_usage(FILE *out)
{
	int width = (int)strlen("help");
	size_t i;

	for (i = 0; i < CLI_N_COMMANDS; i++) {
		int n = (int)strlen(cli_commands[i]->cc_name);

		width = n > width ? n : width;
	}
	fprintf(out,
	        "usage: idemhook [-c FILE] [-v|-q] COMMAND [ARGS...]\n"
	        "       idemhook help [COMMAND] | --help | --version\n\n"
	        "A payment-callback receiver that applies each callback exactly once.\n\n"
	        "Options:\n"
	        "  -c, --config FILE  configuration file (default: $IDEMHOOK_CONFIG, else\n"
	        "                     " IDEMHOOK_DEFAULT_CONFIG " if it exists, else the demo)\n"
	        "  -v, --verbose      log informational and debug lines too\n"
	        "  -q, --quiet        log warnings and errors only\n\n"
	        "Commands:\n");
	for (i = 0; i < CLI_N_COMMANDS; i++) {
		fprintf(out, "  %-*s  %s\n", width, cli_commands[i]->cc_name, cli_commands[i]->cc_summary);
	}
	fprintf(out, "  %-*s  %s\n", width, "help", "this text, or a command's own options");
	fprintf(out, "\nExit status (every command):\n");
	for (i = 0; i < CLI_N_EXIT_CODES; i++) {
		fprintf(out, "  %2d  %s\n", cli_exit_codes[i].ce_code, cli_exit_codes[i].ce_meaning);
	}
	fprintf(out, "\nRun 'idemhook help COMMAND' for a command's options.\n");
}

static const struct cli_command *cli_find(const char *name)
{
	size_t c;

	for (c = 0; c < CLI_N_COMMANDS; c++) {
		if (strcmp(cli_commands[c]->cc_name, name) == 0) {
			return cli_commands[c];
		}
	}
	return NULL;
}

/* idemhook help [COMMAND]: the overview, or the command's own --help. */
static int cli_help(int argc, char **argv)
{
	const struct cli_command *cmd;
	char *help_argv[3];

	if (argc < 2) {
		cli_usage(stdout);
		return EX_OK;
	}
	cmd = cli_find(argv[1]);
	if (argc > 2 || cmd == NULL) {
		fprintf(stderr, "idemhook help: unknown command '%s'\n", argv[1]);
		cli_usage(stderr);
		return EX_USAGE;
	}
	help_argv[0] = argv[1];
	help_argv[1] = "--help";
	help_argv[2] = NULL;
	return cmd->cc_run(2, help_argv, NULL);
}

int cli_wants_help(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			return 1;
		}
	}
	return 0;
}

int64_t cli_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_parse_id(const char *s, int64_t *ret)
{
	char *end = NULL;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v <= 0) {
		return -1;
	}
	*ret = v;
	return 0;
}

void cli_format_time(int64_t ms, char out[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms <= 0 || gmtime_r(&t, &tm) == NULL || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
		snprintf(out, 32, "-");
	}
}

#define CLI_DEMO_DB "./var/idemhook.db" /* the demo's database (config.c) */

int cli_config_path(const char *config_path, int demo_ok, const char **ret_path)
{
	const char *path = config_path;
	struct stat st;

	if (path == NULL) {
		path = getenv("IDEMHOOK_CONFIG");
		if (path != NULL && path[0] == '\0') {
			path = NULL;
		}
	}
	if (path == NULL && access(IDEMHOOK_DEFAULT_CONFIG, F_OK) == 0) {
		path = IDEMHOOK_DEFAULT_CONFIG;
	}
	/* The demo serves without a file; a command finds it by its database
	 * (serve made it), never by opening a database that is not there. */
	if (path == NULL && !demo_ok && stat(CLI_DEMO_DB, &st) < 0) {
		fprintf(stderr,
		        "idemhook: no configuration given: use -c FILE or $IDEMHOOK_CONFIG (%s, "
		        "the installed one, does not exist, and neither does the demo's database "
		        "%s)\n",
		        IDEMHOOK_DEFAULT_CONFIG, CLI_DEMO_DB);
		return -1;
	}
	*ret_path = path;
	return 0;
}

static int cli_load(const char *config_path, int secrets, struct config **ret)
{
	struct console_conf cc;
	const char *path;
	struct config *cf;
	int rc;

	if (cli_config_path(config_path, 0, &path) < 0) {
		return EX_CONFIG;
	}
	cf = provider_config_load_opts(path,
	                               (secrets ? CONFIG_LOAD_SECRETS : 0) | CONFIG_LOAD_PROBLEMS);
	if (cf == NULL) {
		return EX_CONFIG;
	}
	/* The other sections are checked even when the load found problems:
	 * one run names them all; [console] too (its shape: the tokens'
	 * secrets are serve's to read), so a section serve refuses is
	 * refused here first, not at the next start or reload. */
	rc = confcheck_run(cf, 0);
	if (console_conf_load(cf, 0, &cc) < 0) {
		rc = -1;
	} else {
		console_conf_finish(&cc);
	}
	if (rc < 0 || cf->cf_problems > 0) {
		config_destroy(cf);
		return EX_CONFIG;
	}
	*ret = cf;
	return EX_OK;
}

int cli_load_config(const char *config_path, struct config **ret)
{
	return cli_load(config_path, 0, ret);
}

int cli_load_config_secrets(const char *config_path, struct config **ret)
{
	return cli_load(config_path, 1, ret);
}

int cli_check_client_ca_file(const struct config *cf)
{
	const char *path = config_client_ca_file(cf);
	char why[128];
	FILE *f;

	if (path == NULL) {
		return EX_OK;
	}
	f = fopen(path, "r");
	if (f == NULL) {
		config_refuse(cf, "client", "ca_file", "cannot read %s: %s", path, strerror(errno));
		return EX_CONFIG;
	}
	fclose(f);
	if (crypto_ca_file_check(path, why, sizeof(why)) < 0) {
		config_refuse(cf, "client", "ca_file", "the CA file %s cannot be used: %s", path,
		              why);
		return EX_CONFIG;
	}
	return EX_OK;
}

int cli_open_store(const struct config *cf, int read_only, struct store **ret)
{
	return cli_open_store_exclusive(cf, read_only, 0, ret);
}

int cli_open(const char *config_path, int read_only, struct config **ret_cf,
             struct store **ret_st)
{
	struct config *cf = NULL;
	struct store *st = NULL;
	int rc;

	rc = cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	rc = cli_open_store(cf, read_only, &st);
	if (rc != EX_OK) {
		config_destroy(cf);
		return rc;
	}
	*ret_cf = cf;
	*ret_st = st;
	return EX_OK;
}

int cli_open_store_exclusive(const struct config *cf, int read_only, int exclusive,
                             struct store **ret)
{
	struct store_options so;
	struct store *st;

	memset(&so, 0, sizeof(so));
	so.so_backend = (enum store_backend)cf->cf_backend;
	so.so_path = cf->cf_db_path;
	so.so_conninfo = cf->cf_conninfo;
	so.so_pool_size = cf->cf_pool_size;
	/* Only serve runs batches enough to use several writers. */
	so.so_pg_writers = exclusive ? cf->cf_pg_writers : 1;
	so.so_statement_timeout_ms = cf->cf_statement_timeout_ms;
	so.so_sync = (enum store_sync)cf->cf_sync;
	so.so_batch_max = cf->cf_batch_max;
	/* serve's writer runs ahead of its server threads; a command's
	 * writes are too few to matter, and need no privilege. */
	so.so_writer_nice = exclusive ? cf->cf_writer_nice : 0;
	so.so_busy_timeout_ms = cf->cf_busy_timeout_ms;
	so.so_read_only = read_only == 1;
	so.so_no_migrate = read_only == CLI_STORE_NO_MIGRATE;
	so.so_must_exist = read_only == CLI_STORE_EXISTING;
	so.so_exclusive = exclusive;
	/* serve's claims skip the read for keys never stored. */
	so.so_key_filter = exclusive && !so.so_read_only;
	st = store_create(&so);
	if (st == NULL) {
		if (store_full_count() > 0) {
			/* A file the open creates or grows (-wal, -shm, a
			 * migration) found no room: it passes once there is. */
			return cli_tempfail(NULL,
			                    "the database was not opened, and nothing changed");
		}
		switch (store_open_error()) {
		case STORE_OPEN_DENIED:
			return EX_NOPERM;
		case STORE_OPEN_BUSY:
			return EX_TEMPFAIL; /* a lock held elsewhere: a new try may pass */
		default:
			return EX_UNAVAILABLE;
		}
	}
	*ret = st;
	return EX_OK;
}

int main(int argc, char **argv)
{
	const char *config_path = NULL;
	char **args;
	const struct cli_command *cmd;
	int level_given = 0;
	int n = 0;
	int i;
	int rc;

	args = calloc((size_t)argc + 1, sizeof(char *));
	if (args == NULL) {
		return EX_OSERR;
	}
	/* Global options may stand before or after the command; -c is taken
	 * out wherever it is, the rest is the command's. */
	for (i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc) {
			config_path = argv[++i];
		} else if (strncmp(argv[i], "--config=", 9) == 0) {
			config_path = argv[i] + 9;
		} else if (n == 0 && (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0)) {
			log_set_level(LOG_LEVEL_DEBUG);
			level_given = 1;
		} else if (n == 0 && (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)) {
			log_set_level(LOG_LEVEL_WARNING);
			level_given = 1;
		} else if (n == 0 && strcmp(argv[i], "--version") == 0) {
			printf("idemhook %s\n", IDEMHOOK_VERSION);
			free(args);
			return EX_OK;
		} else if (n == 0 && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
			cli_usage(stdout);
			free(args);
			return EX_OK;
		} else if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) {
			/* the last word: -c without its file, said as such (not an
			 * unknown option) before or after the command */
			fprintf(stderr, "idemhook: %s needs a file name\n", argv[i]);
			free(args);
			return EX_USAGE;
		} else if (n == 0 && argv[i][0] == '-') {
			fprintf(stderr, "idemhook: unknown option %s\n", argv[i]);
			cli_usage(stderr);
			free(args);
			return EX_USAGE;
		} else {
			args[n++] = argv[i];
		}
	}
	if (n == 0) {
		cli_usage(stderr);
		free(args);
		return EX_USAGE;
	}
	if (strcmp(args[0], "help") == 0) {
		rc = cli_help(n, args);
		free(args);
		return rc;
	}
	cmd = cli_find(args[0]);
	if (cmd != NULL) {
		/* Informational lines are the daemon's; a command run by hand
		 * says them only when asked (-v). */
		if (!level_given && strcmp(cmd->cc_name, "serve") != 0) {
			log_set_level(LOG_LEVEL_NOTICE);
		}
		cli_command_set(cmd->cc_name);
		rc = cmd->cc_run(n, args, config_path);
		free(args);
		return rc;
	}
	fprintf(stderr, "idemhook: unknown command '%s'\n", args[0]);
	cli_usage(stderr);
	free(args);
	return EX_USAGE;
}
