/* cmd_audit.c: `idemhook audit list`: the operators' actions (CLI and
 * console) as the audit log keeps them, newest first; and the name the
 * CLI records its own actions under. */
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "console_db.h"
#include "store.h"

void cli_actor(char *out, size_t size)
{
	const char *sudo = getenv("SUDO_USER");
	const struct passwd *pw;

	/* The person behind sudo, not root; else the account running it. */
	if (sudo != NULL && sudo[0] != '\0' && geteuid() == 0) {
		snprintf(out, size, "cli:%s", sudo);
		return;
	}
	pw = getpwuid(geteuid());
	if (pw != NULL && pw->pw_name != NULL) {
		snprintf(out, size, "cli:%s", pw->pw_name);
	} else {
		snprintf(out, size, "cli:uid %u", (unsigned)geteuid());
	}
}

/* Every action the audit log records (console_db.c and console.c write
 * them), alphabetized: --action names one of them, so a misspelt action is
 * a usage error rather than an empty list. */
static const char *const cmd_audit_actions[] = {
        "console.login", "events.dismiss",    "events.reprocess", "order.reconcile",
        "outbox.cancel", "outbox.compensate", "outbox.retry",     "outbox.retry_all",
};

static int cmd_audit_action_known(const char *action)
{
	size_t i;

	for (i = 0; i < sizeof(cmd_audit_actions) / sizeof(cmd_audit_actions[0]); i++) {
		if (strcmp(action, cmd_audit_actions[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

static void cmd_audit_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] audit list [--limit N] [--actor WHO] [--action WHAT]\n"
	        "                                 [--before ID] [--json]\n\n"
	        "Lists what operators did (idemhook events dismiss and reprocess, outbox\n"
	        "retry, cancel and compensate, the console's actions), newest first: when,\n"
	        "who (cli:USER or console:TOKEN), what, on which target, why, and the\n"
	        "result. --action is one of console.login, events.dismiss,\n"
	        "events.reprocess, order.reconcile, outbox.cancel, outbox.compensate,\n"
	        "outbox.retry, outbox.retry_all (another is a usage error). --before ID\n"
	        "pages on. A value too long for its column ends in an ellipsis; --json\n"
	        "prints every value whole.\n\n"
	        "Exit status: 0 done, 64 usage, 69 database unavailable, 75 database busy\n"
	        "or failing.\n");
}

struct cmd_audit_list {
	int64_t al_n;
	int al_json;
};

static int cmd_audit_row(void *arg, const struct console_db_audit_row *r)
{
	struct cmd_audit_list *al = arg;
	char when[32];

	if (al->al_json) {
		printf("%s\n    {\"id\": %" PRId64 ", \"at\": ", al->al_n == 0 ? "" : ",",
		       r->ar_id);
		cli_json_time(stdout, r->ar_at);
		printf(", \"actor\": ");
		cli_json_string(stdout, r->ar_actor);
		printf(", \"action\": ");
		cli_json_string(stdout, r->ar_action);
		printf(", \"target\": ");
		cli_json_string(stdout, r->ar_target);
		printf(", \"result\": ");
		cli_json_string(stdout, r->ar_result);
		printf(", \"reason\": ");
		cli_json_string(stdout, r->ar_reason);
		printf("}");
		al->al_n++;
		return 0;
	}
	if (al->al_n++ == 0) {
		printf("%-8s %-20s %-24s %-20s %-16s %-32s %s\n", "ID", "AT", "ACTOR", "ACTION",
		       "TARGET", "RESULT", "REASON");
	}
	cli_format_time(r->ar_at, when);
	printf("%-8" PRId64 " %-20s ", r->ar_id, when);
	cli_cell(stdout, r->ar_actor, 24);
	fputc(' ', stdout);
	cli_cell(stdout, r->ar_action, 20);
	fputc(' ', stdout);
	cli_cell(stdout, r->ar_target, 16);
	fputc(' ', stdout);
	cli_cell(stdout, r->ar_result, 32);
	fputc(' ', stdout);
	cli_line(stdout, "", r->ar_reason);
	return 0;
}

static int cmd_audit_run(int argc, char **argv, const char *config_path)
{
	static const struct option opts[] = {
	        {"limit", required_argument, NULL, 'n'},  {"actor", required_argument, NULL, 'a'},
	        {"action", required_argument, NULL, 'w'}, {"before", required_argument, NULL, 'b'},
	        {"json", no_argument, NULL, 'j'},         {NULL, 0, NULL, 0},
	};
	struct cmd_audit_list al = {0};
	const char *actor = NULL;
	const char *action = NULL;
	int64_t limit = CLI_LIMIT_DEFAULT;
	int64_t before = 0;
	struct config *cf = NULL;
	struct store *st = NULL;
	int rc;
	int c;

	if (argc < 2 || cli_wants_help(argc, argv)) {
		cmd_audit_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EX_USAGE : EX_OK;
	}
	if (strcmp(argv[1], "list") != 0) {
		fprintf(stderr, "idemhook audit: \"%s\" is no subcommand (list is the one)\n",
		        argv[1]);
		cmd_audit_usage(stderr);
		return EX_USAGE;
	}
	optind = 0;
	for (;;) {
		c = cli_getopt(argc - 1, argv + 1, "n:a:w:b:j", opts);
		if (c == -1) {
			break;
		}
		if (c == 'n') {
			if (cli_parse_limit("audit list", optarg, &limit) < 0) {
				return EX_USAGE;
			}
		} else if (c == 'a') {
			actor = optarg;
		} else if (c == 'w') {
			if (!cmd_audit_action_known(optarg)) {
				size_t i;

				fprintf(stderr,
				        "idemhook audit list: --action \"%s\" is no action; "
				        "the actions:",
				        optarg);
				for (i = 0;
				     i < sizeof(cmd_audit_actions) / sizeof(cmd_audit_actions[0]);
				     i++) {
					fprintf(stderr, " %s", cmd_audit_actions[i]);
				}
				fprintf(stderr, "\n");
				return EX_USAGE;
			}
			action = optarg;
		} else if (c == 'j') {
			al.al_json = 1;
		} else if (c == 'b') {
			if (cli_parse_id(optarg, &before) < 0) {
				fprintf(stderr,
				        "idemhook audit list: --before \"%s\" is not an audit row "
				        "ID "
				        "(the ID column gives one)\n",
				        optarg);
				return EX_USAGE;
			}
		} else {
			cmd_audit_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc - 1) {
		cmd_audit_usage(stderr);
		return EX_USAGE;
	}
	rc = cli_open(config_path, 1, &cf, &st);
	if (rc != EX_OK) {
		return rc;
	}
	if (al.al_json) {
		printf("{\"audit\": [");
	}
	if (console_db_audit_list(st, cli_now_ms(), actor, action, before, limit, cmd_audit_row,
	                          &al) < 0) {
		if (al.al_json) {
			printf("]}\n");
		}
		fprintf(stderr, "idemhook audit list: reading the audit log failed\n");
		rc = EX_TEMPFAIL;
		goto out;
	}
	if (al.al_json) {
		printf("%s]}\n", al.al_n > 0 ? "\n  " : "");
	} else if (al.al_n == 0) {
		/* Filters that match nothing are named: a misspelt action must
		 * not read as an empty log. */
		printf("no audit entries");
		if (actor != NULL) {
			printf(" by actor \"");
			cli_text(stdout, actor);
			printf("\"");
		}
		if (action != NULL) {
			printf("%s action \"", actor != NULL ? " and" : " with");
			cli_text(stdout, action);
			printf("\"");
		}
		if (before > 0) {
			printf(" before ID %" PRId64, before);
		}
		printf("\n");
	}
	rc = EX_OK;
out:
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_audit = {
        .cc_name = "audit",
        .cc_summary = "list what operators did (CLI and console)",
        .cc_run = cmd_audit_run,
};
