/* cmd_outbox.c: `idemhook outbox list|retry|cancel|compensate`: the outbound
 * rows, and the operator's transitions on them. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "config.h"
#include "outbox.h"
#include "store.h"

#define CMD_OUTBOX_MSG_MAX 256

static void cmd_outbox_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] outbox list [--status STATUS] [--order ORDER_ID]\n"
	        "       idemhook [-c FILE] outbox retry ID\n"
	        "       idemhook [-c FILE] outbox cancel ID\n"
	        "       idemhook [-c FILE] outbox compensate ID\n\n"
	        "list shows outbound rows, oldest first; STATUS is one of pending, delivering,\n"
	        "retry_wait, succeeded, dead, cancelled. Orders flagged for an operator show\n"
	        "\"needs operator\".\n"
	        "retry queues a dead, cancelled or retry_wait row again, due now, with its\n"
	        "attempts and age window reset (and the same Idempotency-Key).\n"
	        "cancel stops a pending or retry_wait row; no compensation runs.\n"
	        "compensate runs the compensation of a dead or cancelled row now (its call\n"
	        "type's, or manual); on a row whose order is flagged for an operator it\n"
	        "records that the operator has handled it.\n\n"
	        "Exit codes: 0 done, 64 usage, 65 transition not allowed, 66 no such row,\n"
	        "69 database unavailable, 75 database busy or failing.\n");
}

/* ---- list ---- */

struct cmd_outbox_list {
	size_t ol_n;
};

static int cmd_outbox_list_row(void *arg, const struct outbox_info *i)
{
	struct cmd_outbox_list *ol = arg;
	char next[32];
	char last[24];
	char comp[48];

	if (ol->ol_n == 0) {
		printf("%-6s %-10s %-9s %-24s %-18s %-3s %-20s %-4s %-17s %-11s %s\n", "ID",
		       "STATUS", "CALL", "ORDER", "EFFECT", "TRY", "NEXT", "LAST", "COMPENSATION",
		       "FULFILLMENT", "NOTE");
	}
	ol->ol_n++;
	if (strcmp(i->oi_status, "pending") == 0 || strcmp(i->oi_status, "retry_wait") == 0) {
		cli_format_time(i->oi_next_attempt_at, next);
	} else {
		snprintf(next, sizeof(next), "-");
	}
	if (i->oi_last_status > 0) {
		snprintf(last, sizeof(last), "%" PRId64, i->oi_last_status);
	} else {
		snprintf(last, sizeof(last), "-");
	}
	if (strcmp(i->oi_comp_state, "none") == 0) {
		snprintf(comp, sizeof(comp), "%s", i->oi_compensation);
	} else {
		snprintf(comp, sizeof(comp), "%s:%s", i->oi_compensation, i->oi_comp_state);
	}
	printf("%-6" PRId64 " %-10s %-9.9s %-24.24s %-18.18s %-3" PRId64
	       " %-20s %-4s %-17s %-11s %s%s%s",
	       i->oi_id, i->oi_status, i->oi_call_type, cli_or_dash(i->oi_order_id),
	       i->oi_effect, i->oi_attempts, next, last, comp,
	       cli_or_dash(i->oi_fulfillment), i->oi_needs_operator ? "needs operator" : "",
	       i->oi_needs_operator && i->oi_last_error != NULL ? "; " : "",
	       i->oi_last_error != NULL ? i->oi_last_error : "");
	if (i->oi_parent_id > 0) {
		printf(" (compensates row %" PRId64 ")", i->oi_parent_id);
	}
	printf("\n");
	return 0;
}

static int cmd_outbox_list(int argc, char **argv, struct store *st)
{
	static const struct option opts[] = {
	        {"status", required_argument, NULL, 's'},
	        {"order", required_argument, NULL, 'o'},
	        {NULL, 0, NULL, 0},
	};
	struct cmd_outbox_list ol;
	const char *status = NULL;
	const char *order = NULL;

	optind = 0;
	for (;;) {
		int c = getopt_long(argc, argv, "s:o:", opts, NULL);

		if (c == -1) {
			break;
		}
		if (c == 's') {
			if (!outbox_status_valid(optarg)) {
				fprintf(stderr, "idemhook outbox: --status is one of pending, "
				                "delivering, retry_wait, "
				                "succeeded, dead, cancelled\n");
				return EX_USAGE;
			}
			status = optarg;
		} else if (c == 'o') {
			order = optarg;
		} else {
			cmd_outbox_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		cmd_outbox_usage(stderr);
		return EX_USAGE;
	}
	memset(&ol, 0, sizeof(ol));
	if (outbox_list(st, status, order, cmd_outbox_list_row, &ol) < 0) {
		return EX_TEMPFAIL;
	}
	if (ol.ol_n == 0) {
		printf("no outbox rows\n");
	}
	return EX_OK;
}

/* ---- transitions ---- */

static int cmd_outbox_transition(const char *sub, int64_t id, const struct config *cf,
                                 struct store *st)
{
	char msg[CMD_OUTBOX_MSG_MAX];
	struct outbox_conf oc;
	int rc;

	if (strcmp(sub, "retry") == 0) {
		rc = outbox_admin_retry(st, id, cli_now_ms(), msg, sizeof(msg));
	} else if (strcmp(sub, "cancel") == 0) {
		rc = outbox_admin_cancel(st, id, cli_now_ms(), msg, sizeof(msg));
	} else {
		/* The refund's URL comes from the config; its key is read by the
		 * worker when it sends the refund. */
		if (outbox_conf_load(cf, 0, &oc) < 0) {
			return EX_CONFIG;
		}
		rc = outbox_admin_compensate(st, &oc, id, cli_now_ms(), msg, sizeof(msg));
		outbox_conf_finish(&oc);
	}
	switch (rc) {
	case OUTBOX_ADMIN_OK:
		printf("%s\n", msg);
		return EX_OK;
	case OUTBOX_ADMIN_UNKNOWN:
		fprintf(stderr, "idemhook outbox %s: %s\n", sub, msg);
		return EX_NOINPUT;
	case OUTBOX_ADMIN_ILLEGAL:
		fprintf(stderr, "idemhook outbox %s: %s\n", sub, msg);
		return EX_DATAERR;
	default:
		break;
	}
	fprintf(stderr,
	        "idemhook outbox %s: row %" PRId64 " could not be changed; nothing changed\n", sub,
	        id);
	return EX_TEMPFAIL;
}

static int cmd_outbox_run(int argc, char **argv, const char *config_path)
{
	struct config *cf = NULL;
	struct store *st = NULL;
	const char *sub;
	int64_t id = 0;
	int list;
	int rc;

	if (argc < 2 || cli_wants_help(argc, argv)) {
		cmd_outbox_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EX_USAGE : EX_OK;
	}
	sub = argv[1];
	list = strcmp(sub, "list") == 0;
	if (!list && strcmp(sub, "retry") != 0 && strcmp(sub, "cancel") != 0 &&
	    strcmp(sub, "compensate") != 0) {
		cmd_outbox_usage(stderr);
		return EX_USAGE;
	}
	if (!list && (argc != 3 || cli_parse_id(argv[2], &id) < 0)) {
		fprintf(stderr, "idemhook outbox %s: wants one row ID (a positive number)\n", sub);
		return EX_USAGE;
	}
	rc = cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	rc = cli_open_store(cf, list, &st);
	if (rc != EX_OK) {
		goto fail;
	}
	if (list) {
		rc = cmd_outbox_list(argc - 1, argv + 1, st);
	} else {
		rc = cmd_outbox_transition(sub, id, cf, st);
	}
fail:
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_outbox = {
        .cc_name = "outbox",
        .cc_summary = "list outbound calls; retry, cancel or compensate one",
        .cc_run = cmd_outbox_run,
};
