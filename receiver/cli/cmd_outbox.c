/* cmd_outbox.c: `idemhook outbox list|show|retry|cancel|compensate`: the outbound
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
#include "console_db.h"
#include "orders.h"
#include "outbox.h"
#include "store.h"

#define CMD_OUTBOX_MSG_MAX 256

static void cmd_outbox_usage(FILE *out)
{
	fprintf(out, "usage: idemhook [-c FILE] outbox list [--status STATUS] [--order ORDER_ID]\n"
	             "                                      [--limit N] [--json]\n"
	             "       idemhook [-c FILE] outbox show ID [--json]\n"
	             "       idemhook [-c FILE] outbox retry ID\n"
	             "       idemhook [-c FILE] outbox cancel ID\n"
	             "       idemhook [-c FILE] outbox compensate ID\n\n"
	             "list shows outbound rows, oldest first (default limit 50); STATUS is one of\n"
	             "pending, delivering, retry_wait, succeeded, dead, cancelled. Orders flagged\n"
	             "for an operator show \"needs operator\".\n"
	             "show prints one row: where it goes, its Idempotency-Key, its compensation,\n"
	             "and its attempts (how many, the last one's answer or error, the next one).\n"
	             "retry queues a dead, cancelled or retry_wait row again, due now, with its\n"
	             "attempts and age window reset (and the same Idempotency-Key).\n"
	             "cancel stops a pending or retry_wait row; no compensation runs.\n"
	             "compensate runs the compensation of a dead or cancelled row now (its call\n"
	             "type's, or manual); on a row whose order is flagged for an operator it\n"
	             "records that the operator has handled it.\n"
	             "retry, cancel and compensate are recorded in the audit log (idemhook\n"
	             "audit list), refusals too.\n\n"
	             "Exit status: 0 done, 64 usage, 65 transition not allowed, 66 no such row,\n"
	             "69 database unavailable, 75 database busy or failing.\n");
}

/* ---- list ---- */

struct cmd_outbox_list {
	const char *ol_status;
	const char *ol_order;
	int64_t ol_n;
	int64_t ol_limit;
	int ol_json;
};

static void cmd_outbox_list_json(const struct outbox_info *i)
{
	printf("{\"id\": %" PRId64 ", \"status\": ", i->oi_id);
	cli_json_string(stdout, i->oi_status);
	printf(", \"call\": ");
	cli_json_string(stdout, i->oi_call_type);
	printf(", \"order\": ");
	cli_json_string(stdout, i->oi_order_id);
	printf(", \"effect\": ");
	cli_json_string(stdout, i->oi_effect);
	printf(", \"attempts\": %" PRId64 ", \"next_attempt\": ", i->oi_attempts);
	if (strcmp(i->oi_status, "pending") == 0 || strcmp(i->oi_status, "retry_wait") == 0) {
		cli_json_time(stdout, i->oi_next_attempt_at);
	} else {
		printf("null");
	}
	if (i->oi_last_status > 0) {
		printf(", \"last_status\": %" PRId64, i->oi_last_status);
	} else {
		printf(", \"last_status\": null");
	}
	printf(", \"last_error\": ");
	cli_json_string(stdout, i->oi_last_error);
	printf(", \"compensation\": ");
	cli_json_string(stdout, i->oi_compensation);
	printf(", \"compensation_state\": ");
	cli_json_string(stdout, i->oi_comp_state);
	printf(", \"fulfillment\": ");
	cli_json_string(stdout, i->oi_fulfillment);
	printf(", \"needs_operator\": %s, \"parent\": ", i->oi_needs_operator ? "true" : "false");
	if (i->oi_parent_id > 0) {
		printf("%" PRId64, i->oi_parent_id);
	} else {
		printf("null");
	}
	printf(", \"idempotency_key\": ");
	cli_json_string(stdout, i->oi_idem_key);
	printf(", \"created\": ");
	cli_json_time(stdout, i->oi_created_at);
	printf("}");
}

static int cmd_outbox_list_row(void *arg, const struct outbox_info *i)
{
	struct cmd_outbox_list *ol = arg;
	char next[32];
	char last[24];
	char comp[48];

	if (ol->ol_n >= ol->ol_limit) {
		return 1;
	}
	if (ol->ol_json) {
		printf("%s\n    ", ol->ol_n == 0 ? "" : ",");
		cmd_outbox_list_json(i);
		ol->ol_n++;
		return 0;
	}
	if (ol->ol_n == 0) {
		printf("%-6s %-10s %-9s %-*s %-18s %-3s %-20s %-4s %-17s %-11s %s\n", "ID",
		       "STATUS", "CALL", ORDERS_ID_LEN, "ORDER", "EFFECT", "TRY", "NEXT", "LAST",
		       "COMPENSATION", "FULFILLMENT", "NOTE");
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
	printf("%-6" PRId64 " %-10s ", i->oi_id, i->oi_status);
	cli_cell(stdout, i->oi_call_type, 9);
	fputc(' ', stdout);
	cli_cell(stdout, i->oi_order_id, ORDERS_ID_LEN);
	fputc(' ', stdout);
	cli_cell(stdout, i->oi_effect, 18);
	printf(" %-3" PRId64 " %-20s %-4s %-17s ", i->oi_attempts, next, last, comp);
	cli_cell(stdout, i->oi_fulfillment, 11);
	printf(" %s%s", i->oi_needs_operator ? "needs operator" : "",
	       i->oi_needs_operator && i->oi_last_error != NULL ? "; " : "");
	if (i->oi_last_error != NULL) {
		cli_text(stdout, i->oi_last_error);
	}
	if (i->oi_parent_id > 0) {
		printf(" (compensates row %" PRId64 ")", i->oi_parent_id);
	}
	printf("\n");
	return 0;
}

/* Parses outbox list's options into ol. Returns EX_OK, or EX_USAGE (said):
 * before the store is opened, so a wrong flag is a usage error whatever
 * state the database is in. */
static int cmd_outbox_list_parse(int argc, char **argv, struct cmd_outbox_list *ol)
{
	static const struct option opts[] = {
	        {"status", required_argument, NULL, 's'},
	        {"order", required_argument, NULL, 'o'},
	        {"limit", required_argument, NULL, 'n'},
	        {"json", no_argument, NULL, 'j'},
	        {NULL, 0, NULL, 0},
	};
	memset(ol, 0, sizeof(*ol));
	ol->ol_limit = CLI_LIMIT_DEFAULT;
	optind = 0;
	for (;;) {
		int c = cli_getopt(argc, argv, "s:o:n:j", opts);

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
			ol->ol_status = optarg;
		} else if (c == 'o') {
			ol->ol_order = optarg;
		} else if (c == 'n') {
			if (cli_parse_limit("outbox", optarg, &ol->ol_limit) < 0) {
				return EX_USAGE;
			}
		} else if (c == 'j') {
			ol->ol_json = 1;
		} else {
			cmd_outbox_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		cmd_outbox_usage(stderr);
		return EX_USAGE;
	}
	return EX_OK;
}

static int cmd_outbox_list(struct cmd_outbox_list *ol, struct store *st)
{
	int rc;

	if (ol->ol_json) {
		printf("{\"outbox\": [");
	}
	rc = outbox_list(st, ol->ol_status, ol->ol_order, cmd_outbox_list_row, ol) < 0 ? EX_TEMPFAIL
	                                                                               : EX_OK;
	if (ol->ol_json) {
		printf("%s]}\n", ol->ol_n > 0 ? "\n  " : "");
	} else if (rc == EX_OK && ol->ol_n == 0) {
		printf("no outbox rows\n");
	}
	return rc;
}

/* ---- show ---- */

#define CMD_OUTBOX_SHOW_COLUMNS                                                                    \
	"o.id, o.order_id, o.call_type, o.effect, o.provider, o.url, o.content_type, "             \
	"length(o.body), o.idem_key, o.compensation, o.comp_state, o.parent_id, o.status, "        \
	"o.attempts, o.window_start, o.next_attempt_at, o.lease_until, o.last_status, "            \
	"o.last_error, o.created_at, o.updated_at, o.delivered_at, d.fulfillment_status, "         \
	"d.needs_operator"

enum {
	CMD_OUTBOX_C_ID,
	CMD_OUTBOX_C_ORDER,
	CMD_OUTBOX_C_CALL,
	CMD_OUTBOX_C_EFFECT,
	CMD_OUTBOX_C_PROVIDER,
	CMD_OUTBOX_C_URL,
	CMD_OUTBOX_C_CONTENT_TYPE,
	CMD_OUTBOX_C_BODY_LEN,
	CMD_OUTBOX_C_KEY,
	CMD_OUTBOX_C_COMPENSATION,
	CMD_OUTBOX_C_COMP_STATE,
	CMD_OUTBOX_C_PARENT,
	CMD_OUTBOX_C_STATUS,
	CMD_OUTBOX_C_ATTEMPTS,
	CMD_OUTBOX_C_WINDOW_START,
	CMD_OUTBOX_C_NEXT,
	CMD_OUTBOX_C_LEASE,
	CMD_OUTBOX_C_LAST_STATUS,
	CMD_OUTBOX_C_LAST_ERROR,
	CMD_OUTBOX_C_CREATED,
	CMD_OUTBOX_C_UPDATED,
	CMD_OUTBOX_C_DELIVERED,
	CMD_OUTBOX_C_FULFILLMENT,
	CMD_OUTBOX_C_NEEDS_OPERATOR,
};

struct cmd_outbox_one {
	int64_t oo_id;
	int oo_json;
	int oo_found;
};

/* A row's attempts, as the outbox row keeps them: how many, the last one's
 * answer or error, the next one due. The one place they are rendered, in
 * the text and the JSON form. */
static void cmd_outbox_print_attempts(const struct store_row *row, int json)
{
	const char *status = store_row_text(row, CMD_OUTBOX_C_STATUS);
	int waiting = status != NULL &&
	              (strcmp(status, "pending") == 0 || strcmp(status, "retry_wait") == 0);
	int64_t last_status = store_row_int(row, CMD_OUTBOX_C_LAST_STATUS);
	char t[32];

	if (json) {
		printf("\"attempts\": {\"count\": %" PRId64 ", \"last_status\": ",
		       store_row_int(row, CMD_OUTBOX_C_ATTEMPTS));
		if (last_status > 0) {
			printf("%" PRId64, last_status);
		} else {
			printf("null");
		}
		printf(", \"last_error\": ");
		cli_json_string(stdout, store_row_text(row, CMD_OUTBOX_C_LAST_ERROR));
		printf(", \"next\": ");
		if (waiting) {
			cli_json_time(stdout, store_row_int(row, CMD_OUTBOX_C_NEXT));
		} else {
			printf("null");
		}
		printf(", \"window_start\": ");
		cli_json_time(stdout, store_row_int(row, CMD_OUTBOX_C_WINDOW_START));
		printf(", \"delivered\": ");
		cli_json_time(stdout, store_row_int(row, CMD_OUTBOX_C_DELIVERED));
		printf("}");
		return;
	}
	printf("attempts:\n");
	printf("  count:         %" PRId64 "\n", store_row_int(row, CMD_OUTBOX_C_ATTEMPTS));
	if (last_status > 0) {
		printf("  last answer:   HTTP %" PRId64 "\n", last_status);
	} else {
		printf("  last answer:   -\n");
	}
	cli_line(stdout, "  last error:    ", store_row_text(row, CMD_OUTBOX_C_LAST_ERROR));
	cli_format_time(store_row_int(row, CMD_OUTBOX_C_NEXT), t);
	printf("  next:          %s\n", waiting ? t : "-");
	cli_format_time(store_row_int(row, CMD_OUTBOX_C_WINDOW_START), t);
	printf("  window since:  %s\n", t);
	cli_format_time(store_row_int(row, CMD_OUTBOX_C_DELIVERED), t);
	printf("  delivered:     %s\n", t);
}

static int cmd_outbox_show_row(void *arg, const struct store_row *row)
{
	struct cmd_outbox_one *one = arg;
	static const struct {
		const char *name;
		int col;
	} texts[] = {
	        {"status", CMD_OUTBOX_C_STATUS},
	        {"call", CMD_OUTBOX_C_CALL},
	        {"order", CMD_OUTBOX_C_ORDER},
	        {"effect", CMD_OUTBOX_C_EFFECT},
	        {"provider", CMD_OUTBOX_C_PROVIDER},
	        {"url", CMD_OUTBOX_C_URL},
	        {"content_type", CMD_OUTBOX_C_CONTENT_TYPE},
	        {"idempotency_key", CMD_OUTBOX_C_KEY},
	        {"compensation", CMD_OUTBOX_C_COMPENSATION},
	        {"compensation_state", CMD_OUTBOX_C_COMP_STATE},
	        {"fulfillment", CMD_OUTBOX_C_FULFILLMENT},
	};
	char created[32];
	char updated[32];
	size_t i;

	one->oo_found = 1;
	if (one->oo_json) {
		printf("{\"id\": %" PRId64, store_row_int(row, CMD_OUTBOX_C_ID));
		for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
			printf(", \"%s\": ", texts[i].name);
			cli_json_string(stdout, store_row_text(row, (size_t)texts[i].col));
		}
		printf(", \"body_bytes\": %" PRId64 ", \"parent\": ",
		       store_row_int(row, CMD_OUTBOX_C_BODY_LEN));
		if (store_row_int(row, CMD_OUTBOX_C_PARENT) > 0) {
			printf("%" PRId64, store_row_int(row, CMD_OUTBOX_C_PARENT));
		} else {
			printf("null");
		}
		printf(", \"needs_operator\": %s, \"created\": ",
		       store_row_int(row, CMD_OUTBOX_C_NEEDS_OPERATOR) ? "true" : "false");
		cli_json_time(stdout, store_row_int(row, CMD_OUTBOX_C_CREATED));
		printf(", \"updated\": ");
		cli_json_time(stdout, store_row_int(row, CMD_OUTBOX_C_UPDATED));
		printf(", ");
		cmd_outbox_print_attempts(row, 1);
		return 1; /* the history and the closing brace follow */
	}
	cli_format_time(store_row_int(row, CMD_OUTBOX_C_CREATED), created);
	cli_format_time(store_row_int(row, CMD_OUTBOX_C_UPDATED), updated);
	printf("id:              %" PRId64 "\n", store_row_int(row, CMD_OUTBOX_C_ID));
	cli_line(stdout, "status:          ", store_row_text(row, CMD_OUTBOX_C_STATUS));
	cli_line(stdout, "call:            ", store_row_text(row, CMD_OUTBOX_C_CALL));
	fputs("order:           ", stdout);
	cli_text(stdout, store_row_text(row, CMD_OUTBOX_C_ORDER));
	printf("%s\n", store_row_int(row, CMD_OUTBOX_C_NEEDS_OPERATOR) ? " (needs operator)" : "");
	cli_line(stdout, "effect:          ", store_row_text(row, CMD_OUTBOX_C_EFFECT));
	cli_line(stdout, "provider:        ", store_row_text(row, CMD_OUTBOX_C_PROVIDER));
	cli_line(stdout, "url:             ", store_row_text(row, CMD_OUTBOX_C_URL));
	printf("body:            %" PRId64 " bytes, ", store_row_int(row, CMD_OUTBOX_C_BODY_LEN));
	cli_line(stdout, "", store_row_text(row, CMD_OUTBOX_C_CONTENT_TYPE));
	cli_line(stdout, "idempotency key: ", store_row_text(row, CMD_OUTBOX_C_KEY));
	fputs("compensation:    ", stdout);
	cli_text(stdout, store_row_text(row, CMD_OUTBOX_C_COMPENSATION));
	fputs(" (", stdout);
	cli_text(stdout, store_row_text(row, CMD_OUTBOX_C_COMP_STATE));
	fputs(")\n", stdout);
	if (store_row_int(row, CMD_OUTBOX_C_PARENT) > 0) {
		printf("compensates:     row %" PRId64 "\n",
		       store_row_int(row, CMD_OUTBOX_C_PARENT));
	}
	cli_line(stdout, "fulfillment:     ", store_row_text(row, CMD_OUTBOX_C_FULFILLMENT));
	printf("created:         %s\n", created);
	printf("updated:         %s\n", updated);
	cmd_outbox_print_attempts(row, 0);
	return 1;
}

struct cmd_outbox_history {
	int oh_json;
	size_t oh_n;
};

/* One line of the row's attempt history (console_db_outbox_attempts's
 * columns), as the console shows it: its own ordinal first, since a call
 * given back (not counted) and the call that repeated it carry the same
 * attempt number. */
static int cmd_outbox_history_line(void *arg, const struct store_row *row)
{
	struct cmd_outbox_history *h = arg;
	int has_status = !store_row_is_null(row, 3);
	int has_latency = !store_row_is_null(row, 5);
	const char *error = store_row_text(row, 4);
	int counted = outbox_attempt_counted(has_status ? (long)store_row_int(row, 3) : 0, error);
	char label[OUTBOX_LABEL_MAX];
	char at[32];
	char answer[32];
	char latency[32];

	outbox_attempt_label(label, sizeof(label), store_row_int(row, 1), store_row_int(row, 7),
	                     counted);
	if (h->oh_json) {
		printf("%s\n    {\"n\": \"%s\", \"attempt\": %" PRId64
		       ", \"counted\": %s, \"at\": ",
		       h->oh_n > 0 ? "," : "", label, store_row_int(row, 1),
		       counted ? "true" : "false");
		cli_json_time(stdout, store_row_int(row, 2));
		printf(", \"http_status\": ");
		if (has_status) {
			printf("%" PRId64, store_row_int(row, 3));
		} else {
			printf("null");
		}
		printf(", \"latency_ms\": ");
		if (has_latency) {
			printf("%" PRId64, store_row_int(row, 5));
		} else {
			printf("null");
		}
		printf(", \"error\": ");
		cli_json_string(stdout, error);
		printf("}");
		h->oh_n++;
		return 0;
	}
	if (h->oh_n == 0) {
		printf("history:         newest first; # is the attempt number, N.K the K-th call "
		       "given back (not counted) and repeated under attempt N\n");
		printf("  %-4s %-7s %-12s %-20s %-9s %-8s %s\n", "#", "attempt", "", "at", "answer",
		       "latency", "error");
	}
	cli_format_time(store_row_int(row, 2), at);
	if (has_status) {
		snprintf(answer, sizeof(answer), "HTTP %" PRId64, store_row_int(row, 3));
	} else {
		snprintf(answer, sizeof(answer), "-");
	}
	if (has_latency) {
		snprintf(latency, sizeof(latency), "%" PRId64 " ms", store_row_int(row, 5));
	} else {
		snprintf(latency, sizeof(latency), "-");
	}
	printf("  %-4s %-7" PRId64 " %-12s %-20s %-9s %-8s ", label, store_row_int(row, 1),
	       counted ? "" : "not counted", at, answer, latency);
	cli_line(stdout, "", error);
	h->oh_n++;
	return 0;
}

/* The row's attempt history after the row (the JSON object closed after it). */
static int cmd_outbox_show_history(struct store *st, int64_t id, int json)
{
	struct cmd_outbox_history h = {.oh_json = json, .oh_n = 0};
	int rc;

	if (json) {
		printf(", \"history\": [");
	}
	rc = console_db_outbox_attempts(st, cli_now_ms(), id, cmd_outbox_history_line, &h);
	if (json) {
		printf("%s]}\n", h.oh_n > 0 ? "\n  " : "");
	} else if (h.oh_n == 0) {
		printf("history:         -\n");
	}
	return rc;
}

static int cmd_outbox_show_unit(struct store_tx *tx, void *arg)
{
	struct cmd_outbox_one *one = arg;
	struct store_value p[1] = {store_int(one->oo_id)};

	return store_query_each(tx,
	                        "SELECT " CMD_OUTBOX_SHOW_COLUMNS " FROM outbox AS o LEFT JOIN "
	                        "orders AS d ON d.id = o.order_id WHERE o.id = ?",
	                        p, 1, cmd_outbox_show_row, one);
}

static int cmd_outbox_show(int64_t id, int json, struct store *st)
{
	struct cmd_outbox_one one;

	memset(&one, 0, sizeof(one));
	one.oo_id = id;
	one.oo_json = json;
	if (store_read(st, cli_now_ms(), cmd_outbox_show_unit, &one) < 0) {
		return EX_TEMPFAIL;
	}
	if (!one.oo_found) {
		fprintf(stderr, "idemhook outbox show: no outbox row %" PRId64 "\n", id);
		return CLI_EX_NOT_FOUND;
	}
	return cmd_outbox_show_history(st, id, json) < 0 ? EX_TEMPFAIL : EX_OK;
}

/* ---- transitions ---- */

/* Each transition goes into the audit log as the console's do
 * (console_db_outbox_admin: one path for both). */
static int cmd_outbox_transition(const char *sub, int64_t id, const struct config *cf,
                                 struct store *st)
{
	char actor[CONSOLE_DB_ACTOR_MAX];
	char msg[CMD_OUTBOX_MSG_MAX];
	struct outbox_conf oc;
	int have_oc = 0;
	int rc;

	/* The refund's URL comes from the config; its key is read by the
	 * worker when it sends the refund. */
	if (strcmp(sub, "compensate") == 0) {
		if (outbox_conf_load(cf, 0, &oc) < 0) {
			return EX_CONFIG;
		}
		have_oc = 1;
	}
	cli_actor(actor, sizeof(actor));
	rc = console_db_outbox_admin(st, have_oc ? &oc : NULL, cli_now_ms(), actor, sub, id, NULL,
	                             msg, sizeof(msg));
	if (have_oc) {
		outbox_conf_finish(&oc);
	}
	switch (rc) {
	case OUTBOX_ADMIN_OK:
		printf("%s\n", msg);
		return EX_OK;
	case OUTBOX_ADMIN_UNKNOWN:
		fprintf(stderr, "idemhook outbox %s: %s\n", sub, msg);
		return CLI_EX_NOT_FOUND;
	case OUTBOX_ADMIN_ILLEGAL:
		fprintf(stderr, "idemhook outbox %s: %s\n", sub, msg);
		return EX_DATAERR;
	default:
		break;
	}
	snprintf(msg, sizeof(msg), "outbox %s", sub);
	return cli_tempfail(msg, "row %" PRId64 " is unchanged", id);
}

static int cmd_outbox_run(int argc, char **argv, const char *config_path)
{
	struct cmd_outbox_list ol;
	struct config *cf = NULL;
	struct store *st = NULL;
	const char *sub;
	int64_t id = 0;
	int list;
	int show;
	int json;
	int rc;

	if (argc < 2 || cli_wants_help(argc, argv)) {
		cmd_outbox_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EX_USAGE : EX_OK;
	}
	sub = argv[1];
	list = strcmp(sub, "list") == 0;
	show = strcmp(sub, "show") == 0;
	json = show ? cli_take_flag(&argc, argv, "--json") : 0;
	if (!list && !show && strcmp(sub, "retry") != 0 && strcmp(sub, "cancel") != 0 &&
	    strcmp(sub, "compensate") != 0) {
		cmd_outbox_usage(stderr);
		return EX_USAGE;
	}
	if (!list && (argc != 3 || cli_parse_id(argv[2], &id) < 0)) {
		fprintf(stderr, "idemhook outbox %s: wants one row ID (a positive number)\n", sub);
		return EX_USAGE;
	}
	if (list) {
		rc = cmd_outbox_list_parse(argc - 1, argv + 1, &ol);
		if (rc != EX_OK) {
			return rc;
		}
	}
	rc = cli_open(config_path, list || show ? 1 : CLI_STORE_EXISTING, &cf, &st);
	if (rc != EX_OK) {
		return rc;
	}
	if (list) {
		rc = cmd_outbox_list(&ol, st);
	} else if (show) {
		rc = cmd_outbox_show(id, json, st);
	} else {
		rc = cmd_outbox_transition(sub, id, cf, st);
	}
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_outbox = {
        .cc_name = "outbox",
        .cc_summary = "list or show outbound calls; retry, cancel or compensate one",
        .cc_run = cmd_outbox_run,
};
