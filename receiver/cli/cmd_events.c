/* cmd_events.c: `idemhook events list|show|reprocess|dismiss`: processed
 * callbacks as the events table keeps them, running a failed one again, and
 * closing one that can never apply. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "cli.h"
#include "ingest.h"
#include "config.h"
#include "console_db.h"
#include "event.h"
#include "json.h"
#include "orders.h"
#include "outbox.h"
#include "provider.h"
#include "reply.h"
#include "store.h"
#include "text.h"

#define CMD_EVENTS_LIMIT_DEFAULT 50
#define CMD_EVENTS_LIMIT_MAX 100000
/* A thin event waiting for its full event is done with effect to_fetch
 * (ingest.h): listed as fetching. */
#define CMD_EVENTS_STATUS                                                                          \
	"(CASE WHEN outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH "' THEN 'fetching' "   \
	"ELSE outcome END)"
struct cmd_events_one {
	int64_t eo_id;
	int eo_found;
	int eo_json;
};

static void cmd_events_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] events list [--status done|failed|fetching | --failed]\n"
	        "                                  [--provider NAME] [--source "
	        "callback|reconcile]\n"
	        "                                  [--order ORDER_ID] [--limit N] [--json]\n"
	        "       idemhook [-c FILE] events list --status processing [--older-than "
	        "DURATION]\n"
	        "                                  [--provider NAME] [--limit N] [--json]\n"
	        "       idemhook [-c FILE] events show ID [--json]\n"
	        "       idemhook [-c FILE] events reprocess ID...\n"
	        "       idemhook [-c FILE] events dismiss ID... --reason TEXT\n"
	        "       idemhook [-c FILE] events dismiss --reason TEXT [--status "
	        "failed|fetching]\n"
	        "                [--provider NAME] [--failed-reason SLUG] [--source S]\n"
	        "                [--order ID] [--key-prefix P] [--test-mode | --live]\n"
	        "                [--confirm N]\n\n"
	        "list shows processed callbacks, newest first (default limit 50); SOURCE says\n"
	        "whether the provider sent the event (callback) or reconciliation asked for it\n"
	        "(reconcile, see idemhook reconcile). --failed is --status failed: the events\n"
	        "acknowledged but not applied (idemhook_events_unapplied_total); fetching:\n"
	        "thin events acknowledged and waiting for their full event. --order shows\n"
	        "the events of one order. A value too long for its column ends in an ellipsis;\n"
	        "--json prints every value whole.\n"
	        "--status processing lists the claims taken and not completed yet (callbacks\n"
	        "and order-API keys alike), oldest first, with their lease; --older-than 60s\n"
	        "lists the ones idemhook_processing_stuck counts (durations like 90s, 5m, 1h).\n"
	        "show prints one event with its stored semantic payload, and who dismissed\n"
	        "it, when and why.\n"
	        "reprocess runs failed events through the business handler again (for\n"
	        "example after a missing order was created), each in turn: the order still\n"
	        "moves only through conditional updates, the event row and the idempotency\n"
	        "record get the new outcome and reply, and a second reprocess of a done\n"
	        "event is refused. It exits 0 when every event was applied, 1 when each ran\n"
	        "but one is still failed (its new reason printed, the run audited and\n"
	        "counted), 65 or 66 when one was refused or is not there (nothing done\n"
	        "for it; the first such decides), 75 when the store failed (it stops there).\n"
	        "dismiss closes failed events that can never apply (a test payment, a payment\n"
	        "made outside the shop) with a reason: they stay failed but leave\n"
	        "idemhook_events_failed_open and its alert. By ID it also closes a thin event\n"
	        "waiting for its full event that the provider no longer has (Stripe keeps\n"
	        "events 30 days): never applied, it is no longer fetched, counted as waiting\n"
	        "or kept by gc past its retention. By filter, it first prints how many\n"
	        "events match: failed ones not dismissed (--status failed, the default), or\n"
	        "thin events waiting (--status fetching), live ones unless --test-mode; run\n"
	        "it again with --confirm N to dismiss exactly those N (none matching: it says\n"
	        "there is nothing to dismiss, and exits 0). Each dismissal is in the audit\n"
	        "log (idemhook audit list).\n\n"
	        "Exit status: 0 done, 1 reprocessed but still failed, 64 usage (an unknown\n"
	        "provider too), 65 refused, 66 no such event, 69 database unavailable,\n"
	        "75 database busy or failing.\n");
}

/* ---- list ---- */

struct cmd_events_list {
	const char *el_status;
	const char *el_provider;
	const char *el_source;
	const char *el_order;
	int64_t el_older_than_s; /* --status processing: -1 when not given */
	int64_t el_limit;
	int64_t el_n;
	int el_json;
};

static int cmd_events_list_row(void *arg, const struct store_row *row)
{
	struct cmd_events_list *el = arg;
	char when[32];

	cli_format_time(store_row_int(row, 1), when);
	if (el->el_json) {
		printf("%s\n    {\"id\": %" PRId64 ", \"received\": ", el->el_n == 0 ? "" : ",",
		       store_row_int(row, 0));
		cli_json_time(stdout, store_row_int(row, 1));
		printf(", \"provider\": ");
		cli_json_string(stdout, store_row_text(row, 2));
		printf(", \"source\": ");
		cli_json_string(stdout, store_row_text(row, 9));
		printf(", \"key\": ");
		cli_json_string(stdout, store_row_text(row, 3));
		printf(", \"kind\": ");
		cli_json_string(stdout, store_row_text(row, 4));
		printf(", \"order\": ");
		cli_json_string(stdout, store_row_text(row, 5));
		printf(", \"outcome\": ");
		cli_json_string(stdout, store_row_text(row, 6));
		printf(", \"detail\": ");
		cli_json_string(stdout, store_row_text(row, 7));
		printf(", \"reprocessed\": %" PRId64 ", \"dismissed\": ", store_row_int(row, 8));
		cli_json_time(stdout, store_row_int(row, 10));
		printf(", \"dismissed_by\": ");
		cli_json_string(stdout, store_row_text(row, 11));
		printf(", \"dismiss_reason\": ");
		cli_json_string(stdout, store_row_text(row, 12));
		printf("}");
		el->el_n++;
		return 0;
	}
	if (el->el_n == 0) {
		printf("%-8s %-20s %-16s %-9s %-32s %-17s %-*s %-8s %s\n", "ID", "RECEIVED",
		       "PROVIDER", "SOURCE", "KEY", "KIND", ORDERS_ID_LEN, "ORDER", "OUTCOME",
		       "DETAIL");
	}
	el->el_n++;
	printf("%-8" PRId64 " %-20s ", store_row_int(row, 0), when);
	cli_cell(stdout, store_row_text(row, 2), 16);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 9), 9);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 3), 32);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 4), 17);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 5), ORDERS_ID_LEN);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 6), 8);
	fputc(' ', stdout);
	cli_text(stdout, store_row_text(row, 7));
	printf("%s%s\n", store_row_int(row, 8) > 0 ? " (reprocessed)" : "",
	       store_row_is_null(row, 10) ? "" : " (dismissed)");
	return 0;
}

static int cmd_events_list_unit(struct store_tx *tx, void *arg)
{
	struct cmd_events_list *el = arg;
	struct store_value p[9] = {
	        store_text(el->el_status),   store_text(el->el_status), store_text(el->el_provider),
	        store_text(el->el_provider), store_text(el->el_source), store_text(el->el_source),
	        store_text(el->el_order),    store_text(el->el_order),  store_int(el->el_limit),
	};

	return store_query_each(
	        tx,
	        "SELECT id, received_at, scope, idem_key, kind, order_ref, " CMD_EVENTS_STATUS ","
	        " CASE outcome WHEN 'failed' THEN reason ELSE effect END, reprocessed, source,"
	        " dismissed_at, dismissed_by, dismiss_reason"
	        " FROM events WHERE (? IS NULL OR " CMD_EVENTS_STATUS
	        " = ?) AND (? IS NULL OR scope = ?)"
	        " AND (? IS NULL OR source = ?) AND (? IS NULL OR order_ref = ?)"
	        " ORDER BY id DESC LIMIT ?",
	        p, 9, cmd_events_list_row, el);
}

/* --status processing: one claim as idempotency_records keeps it. */
static int cmd_events_claim_row(void *arg, const struct store_row *row)
{
	struct cmd_events_list *el = arg;
	int64_t lease = store_row_is_null(row, 3) ? 0 : store_row_int(row, 3);
	int expired = lease <= cli_now_ms();
	char claimed[32];
	char updated[32];
	char until[32];

	if (el->el_json) {
		printf("%s\n    {\"id\": %" PRId64 ", \"claimed\": ", el->el_n == 0 ? "" : ",",
		       store_row_int(row, 0));
		cli_json_time(stdout, store_row_int(row, 1));
		printf(", \"updated\": ");
		cli_json_time(stdout, store_row_int(row, 2));
		printf(", \"lease_until\": ");
		cli_json_time(stdout, lease);
		printf(", \"lease_expired\": %s, \"fence_token\": %" PRId64 ", \"provider\": ",
		       expired ? "true" : "false", store_row_int(row, 4));
		cli_json_string(stdout, store_row_text(row, 5));
		printf(", \"key\": ");
		cli_json_string(stdout, store_row_text(row, 6));
		printf(", \"outcome\": \"processing\"}");
		el->el_n++;
		return 0;
	}
	if (el->el_n == 0) {
		printf("%-8s %-20s %-20s %-28s %-24s %s\n", "ID", "CLAIMED", "UPDATED",
		       "LEASE UNTIL", "PROVIDER", "KEY");
	}
	el->el_n++;
	cli_format_time(store_row_int(row, 1), claimed);
	cli_format_time(store_row_int(row, 2), updated);
	cli_format_time(lease, until);
	printf("%-8" PRId64 " %-20s %-20s %-20s%-8s ", store_row_int(row, 0), claimed, updated,
	       until, expired ? " expired" : "");
	cli_cell(stdout, store_row_text(row, 5), 24);
	fputc(' ', stdout);
	cli_line(stdout, "", store_row_text(row, 6));
	return 0;
}

static int cmd_events_claims_unit(struct store_tx *tx, void *arg)
{
	struct cmd_events_list *el = arg;
	/* not given: every claim (no NULL integer, which PostgreSQL would
	 * have to guess a type for) */
	int64_t cutoff =
	        el->el_older_than_s < 0 ? INT64_MAX : cli_now_ms() - el->el_older_than_s * 1000;
	struct store_value p[4] = {
	        store_int(cutoff),
	        store_text(el->el_provider),
	        store_text(el->el_provider),
	        store_int(el->el_limit),
	};

	/* The partial index idempotency_records_processing (updated_at)
	 * serves it, as it serves idemhook_processing_stuck. */
	return store_query_each(
	        tx,
	        "SELECT id, created_at, updated_at, lease_until, fence_token, scope,"
	        " idem_key FROM idempotency_records WHERE status = 'processing'"
	        " AND updated_at < ? AND (? IS NULL OR scope = ?)"
	        " ORDER BY updated_at, id LIMIT ?",
	        p, 4, cmd_events_claim_row, el);
}

/* 1 when idempotency_records holds a row of scope: a claim's scope may be
 * an order-API one (api:orders:SHOP), which no provider section names. */
static int cmd_events_claim_scope_known_unit(struct store_tx *tx, void *arg)
{
	const char *scope = arg;
	struct store_value p[1] = {store_text(scope)};
	struct store_row row;
	int rc;

	rc = store_query(tx, "SELECT 1 FROM idempotency_records WHERE scope = ? LIMIT 1", p, 1,
	                 &row);
	if (rc > 0) {
		store_row_finish(&row);
	}
	return rc;
}

/* 1 when the events table holds a row of scope (a provider instance since
 * removed from the file still has its history). */
static int cmd_events_scope_known_unit(struct store_tx *tx, void *arg)
{
	const char *scope = arg;
	struct store_value p[1] = {store_text(scope)};
	struct store_row row;
	int rc;

	rc = store_query(tx, "SELECT 1 FROM events WHERE scope = ? LIMIT 1", p, 1, &row);
	if (rc > 0) {
		store_row_finish(&row);
	}
	return rc;
}

/* An instance that is neither configured nor in the events table is a
 * typo, said as such rather than listed as "no events". */
static int cmd_events_provider_known(const struct config *cf, struct store *st, const char *name,
                                     int claims)
{
	size_t i;
	int rc;

	if (config_provider(cf, name) != NULL) {
		return 0;
	}
	rc = store_read(st, cli_now_ms(),
	                claims ? cmd_events_claim_scope_known_unit : cmd_events_scope_known_unit,
	                (void *)name);
	if (rc < 0) {
		return EX_TEMPFAIL;
	}
	if (rc > 0) {
		return 0;
	}
	fprintf(stderr, "idemhook events: unknown provider '%s'; configured:", name);
	for (i = 0; i < cf->cf_n_providers; i++) {
		fprintf(stderr, " %s", cf->cf_providers[i].pc_name);
	}
	fprintf(stderr, "%s\n", cf->cf_n_providers == 0 ? " none" : "");
	return EX_USAGE;
}

/* Parses events list's options into el. Returns EX_OK, or EX_USAGE (said):
 * before the store is opened, so a wrong flag is a usage error whatever
 * state the database is in. */
static int cmd_events_list_parse(int argc, char **argv, struct cmd_events_list *el)
{
	static const struct option opts[] = {
	        {"status", required_argument, NULL, 's'},
	        {"provider", required_argument, NULL, 'p'},
	        {"source", required_argument, NULL, 'o'},
	        {"order", required_argument, NULL, 'O'},
	        {"limit", required_argument, NULL, 'n'},
	        {"failed", no_argument, NULL, 'f'},
	        {"json", no_argument, NULL, 'j'},
	        {"older-than", required_argument, NULL, 'a'},
	        {NULL, 0, NULL, 0},
	};
	int c;

	memset(el, 0, sizeof(*el));
	el->el_limit = CLI_LIMIT_DEFAULT;
	el->el_older_than_s = -1;
	optind = 0;
	for (;;) {
		c = cli_getopt(argc, argv, "s:p:o:n:fja:", opts);
		if (c == -1) {
			break;
		}
		if (c == 's') {
			if (strcmp(optarg, "done") != 0 && strcmp(optarg, "failed") != 0 &&
			    strcmp(optarg, "fetching") != 0 && strcmp(optarg, "processing") != 0) {
				fprintf(stderr,
				        "idemhook events: --status is done, failed, fetching "
				        "or processing\n");
				return EX_USAGE;
			}
			if (el->el_status != NULL && strcmp(el->el_status, optarg) != 0) {
				fprintf(stderr, "idemhook events: --failed is --status failed; "
				                "give one status\n");
				return EX_USAGE;
			}
			el->el_status = optarg;
		} else if (c == 'f') {
			if (el->el_status != NULL && strcmp(el->el_status, "failed") != 0) {
				fprintf(stderr, "idemhook events: --failed is --status failed; "
				                "give one status\n");
				return EX_USAGE;
			}
			el->el_status = "failed";
		} else if (c == 'p') {
			el->el_provider = optarg;
		} else if (c == 'o') {
			if (strcmp(optarg, "callback") != 0 && strcmp(optarg, "reconcile") != 0) {
				fprintf(stderr,
				        "idemhook events: --source is callback or reconcile\n");
				return EX_USAGE;
			}
			el->el_source = optarg;
		} else if (c == 'O') {
			el->el_order = optarg;
		} else if (c == 'n') {
			if (cli_parse_limit("events", optarg, &el->el_limit) < 0) {
				return EX_USAGE;
			}
		} else if (c == 'j') {
			el->el_json = 1;
		} else if (c == 'a') {
			if (config_parse_duration(optarg, &el->el_older_than_s) < 0 ||
			    el->el_older_than_s < 0) {
				fprintf(stderr,
				        "idemhook events list: --older-than wants a duration "
				        "such as 60s or 5m\n");
				return EX_USAGE;
			}
		} else {
			cmd_events_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		cmd_events_usage(stderr);
		return EX_USAGE;
	}
	if (el->el_status != NULL && strcmp(el->el_status, "processing") == 0) {
		if (el->el_source != NULL || el->el_order != NULL) {
			fprintf(stderr, "idemhook events list: a claim in processing has no "
			                "source or order yet; --status processing takes "
			                "--older-than, --provider, --limit and --json\n");
			return EX_USAGE;
		}
	} else if (el->el_older_than_s >= 0) {
		fprintf(stderr, "idemhook events list: --older-than goes with --status "
		                "processing\n");
		return EX_USAGE;
	}
	return EX_OK;
}

static int cmd_events_list(struct cmd_events_list *el, const struct config *cf, struct store *st)
{
	int claims = el->el_status != NULL && strcmp(el->el_status, "processing") == 0;
	int rc;

	if (el->el_provider != NULL) {
		rc = cmd_events_provider_known(cf, st, el->el_provider, claims);
		if (rc != 0) {
			return rc;
		}
	}
	if (el->el_json) {
		printf("{\"events\": [");
	}
	if (store_read(st, cli_now_ms(), claims ? cmd_events_claims_unit : cmd_events_list_unit,
	               el) < 0) {
		if (el->el_json) {
			printf("]}\n");
		}
		return EX_TEMPFAIL;
	}
	if (el->el_json) {
		printf("%s]}\n", el->el_n > 0 ? "\n  " : "");
	} else if (el->el_n == 0 && claims) {
		printf("no claims in processing");
		if (el->el_older_than_s >= 0) {
			printf(" older than %" PRId64 " s", el->el_older_than_s);
		}
		printf("\n");
	} else if (el->el_n == 0) {
		printf("no events\n");
	}
	return EX_OK;
}

/* ---- show ---- */

static void cmd_events_show_json(const struct store_row *row)
{
	static const struct {
		const char *name;
		size_t col;
	} texts[] = {
	        {"provider", 1}, {"key", 2},         {"type", 3},       {"kind", 4},
	        {"order", 5},    {"payment_ref", 6}, {"refund_ref", 7}, {"currency", 9},
	        {"source", 18},  {"outcome", 12},    {"effect", 13},    {"reason", 14},
	        {"context", 23},
	};
	size_t i;

	printf("{\"id\": %" PRId64, store_row_int(row, 0));
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		printf(", \"%s\": ", texts[i].name);
		cli_json_string(stdout, store_row_text(row, texts[i].col));
	}
	if (store_row_is_null(row, 8)) {
		printf(", \"amount\": null");
	} else {
		printf(", \"amount\": %" PRId64, store_row_int(row, 8));
	}
	printf(", \"refund_cumulative\": %s", store_row_int(row, 10) ? "true" : "false");
	printf(", \"test_mode\": %s", store_row_int(row, 22) ? "true" : "false");
	printf(", \"received\": ");
	cli_json_time(stdout, store_row_int(row, 15));
	printf(", \"processed\": ");
	cli_json_time(stdout, store_row_int(row, 16));
	printf(", \"reprocessed\": %" PRId64 ", \"dismissed\": ", store_row_int(row, 17));
	cli_json_time(stdout, store_row_is_null(row, 19) ? 0 : store_row_int(row, 19));
	printf(", \"dismissed_by\": ");
	cli_json_string(stdout, store_row_text(row, 20));
	printf(", \"dismiss_reason\": ");
	cli_json_string(stdout, store_row_text(row, 21));
	printf(", \"payload\": ");
	/* The stored payload as JSON when it is JSON (what most profiles
	 * keep), else as a string: the output stays one JSON document. */
	if (store_row_is_null(row, 11) || row->sr_cols[11].sv_len == 0) {
		printf("null");
	} else {
		cJSON *j =
		        json_parse_strict(row->sr_cols[11].sv_text, row->sr_cols[11].sv_len, NULL);

		if (j != NULL) {
			cli_json_text(stdout, row->sr_cols[11].sv_text, row->sr_cols[11].sv_len);
		} else {
			char *text = strndup(row->sr_cols[11].sv_text, row->sr_cols[11].sv_len);

			cli_json_string(stdout, text != NULL ? text : "");
			free(text);
		}
		cJSON_Delete(j);
	}
	printf("}\n");
}

/* The payload as received, lines and all, with what a terminal would obey
 * (escape sequences, C1 controls, bytes that are not UTF-8) escaped. */
static void cmd_events_payload(const void *data, size_t len)
{
	struct buf b;

	buf_init(&b, 0);
	if (text_printable(&b, data, len, 1) < 0) {
		printf("(out of memory)");
	} else {
		fwrite(b.buf_data, 1, b.buf_len, stdout);
	}
	buf_finish(&b);
}

static int cmd_events_show_row(void *arg, const struct store_row *row)
{
	struct cmd_events_one *one = arg;
	char received[32];
	char processed[32];
	char dismissed[32];

	one->eo_found = 1;
	if (one->eo_json) {
		cmd_events_show_json(row);
		return 1;
	}
	cli_format_time(store_row_int(row, 15), received);
	cli_format_time(store_row_int(row, 16), processed);
	printf("id:              %" PRId64 "\n", store_row_int(row, 0));
	cli_line(stdout, "provider:        ", store_row_text(row, 1));
	cli_line(stdout, "key:             ", store_row_text(row, 2));
	cli_line(stdout, "type:            ", store_row_text(row, 3));
	cli_line(stdout, "kind:            ", store_row_text(row, 4));
	cli_line(stdout, "order:           ", store_row_text(row, 5));
	cli_line(stdout, "payment ref:     ", store_row_text(row, 6));
	cli_line(stdout, "refund ref:      ", store_row_text(row, 7));
	if (store_row_is_null(row, 8)) {
		printf("amount:          -\n");
	} else {
		printf("amount:          %" PRId64 " ", store_row_int(row, 8));
		cli_text(stdout, store_row_text(row, 9));
		printf("%s\n", store_row_int(row, 10) ? " (refunded total so far)" : "");
	}
	cli_line(stdout, "source:          ", store_row_text(row, 18));
	/* as the console's event page says it */
	printf("test mode:       %s\n", store_row_int(row, 22) ? "yes (never alerts)" : "no");
	cli_line(stdout, "outcome:         ", store_row_text(row, 12));
	cli_line(stdout, "effect:          ", store_row_text(row, 13));
	/* A thin event's account, which its fetch names (Stripe-Context). */
	if (store_row_text(row, 23) != NULL) {
		cli_line(stdout, "context:         ", store_row_text(row, 23));
	}
	cli_line(stdout, "reason:          ", store_row_text(row, 14));
	printf("received:        %s\n"
	       "processed:       %s\n"
	       "reprocessed:     %" PRId64 " time(s)\n",
	       received, processed, store_row_int(row, 17));
	/* Who closed it and why, as the console's event page shows. */
	if (store_row_is_null(row, 19)) {
		printf("dismissed:       no\n");
	} else {
		cli_format_time(store_row_int(row, 19), dismissed);
		printf("dismissed:       %s by ", dismissed);
		cli_text(stdout, store_row_text(row, 20));
		printf("\n");
		cli_line(stdout, "dismiss reason:  ", store_row_text(row, 21));
	}
	printf("payload:\n");
	if (!store_row_is_null(row, 11)) {
		cmd_events_payload(row->sr_cols[11].sv_text, row->sr_cols[11].sv_len);
	}
	printf("\n");
	return 1;
}

#define CMD_EVENTS_COLUMNS                                                                         \
	"id, scope, idem_key, type, kind, order_ref, payment_ref, refund_ref, amount, currency,"   \
	" refund_cumulative, payload, " CMD_EVENTS_STATUS ", effect, reason, received_at, "        \
	"processed_at, "                                                                           \
	"reprocessed, source, dismissed_at, dismissed_by, dismiss_reason, test_mode, context"

static int cmd_events_show_unit(struct store_tx *tx, void *arg)
{
	struct cmd_events_one *one = arg;
	struct store_value p[1] = {store_int(one->eo_id)};

	return store_query_each(tx, "SELECT " CMD_EVENTS_COLUMNS " FROM events WHERE id = ?", p, 1,
	                        cmd_events_show_row, one);
}

/* ---- dismiss ---- */

/* Dismisses each of the n event IDs ids (checked by the parser) in turn,
 * each in its own unit of work. */
static int cmd_events_dismiss_ids(int n, char *const *ids, const char *reason, struct store *st)
{
	char actor[CONSOLE_DB_ACTOR_MAX];
	char msg[CONSOLE_DB_MSG_MAX];
	int rc = EX_OK;
	int64_t id;
	int i;
	int r;

	cli_actor(actor, sizeof(actor));
	for (i = 0; i < n; i++) {
		cli_parse_id(ids[i], &id);
		r = console_db_dismiss(st, cli_now_ms(), actor, id, reason, msg, sizeof(msg));
		if (r < 0) {
			return cli_tempfail("events dismiss", "event %" PRId64 "%s unchanged", id,
			                    i + 1 < n ? " and the ones after it are" : " is");
		}
		if (r == CONSOLE_DB_OK) {
			printf("%s\n", msg);
		} else {
			fprintf(stderr, "idemhook events: %s\n", msg);
			/* The first failure decides: not found 66, refused 65. */
			if (rc == EX_OK) {
				rc = r == CONSOLE_DB_UNKNOWN ? CLI_EX_NOT_FOUND : EX_DATAERR;
			}
		}
	}
	return rc;
}

/* events dismiss's command line, parsed before the store is opened. */
struct cmd_events_dismiss_args {
	struct console_db_filter da_f;
	const char *da_reason;
	int64_t da_confirm; /* -1: not given */
	int da_by_filter;
	char **da_ids; /* by ID: the IDs (checked), else NULL */
	int da_n_ids;
};

/* Parses events dismiss's options into da. Returns EX_OK, or EX_USAGE
 * (said): before the store is opened, so a wrong flag is a usage error
 * whatever state the database is in. */
static int cmd_events_dismiss_parse(int argc, char **argv, struct cmd_events_dismiss_args *da)
{
	static const struct option opts[] = {
	        {"reason", required_argument, NULL, 'r'},
	        {"provider", required_argument, NULL, 'p'},
	        {"failed-reason", required_argument, NULL, 'f'},
	        {"source", required_argument, NULL, 'o'},
	        {"order", required_argument, NULL, 'O'},
	        {"key-prefix", required_argument, NULL, 'k'},
	        {"test-mode", no_argument, NULL, 't'},
	        {"live", no_argument, NULL, 'l'},
	        {"confirm", required_argument, NULL, 'y'},
	        {"status", required_argument, NULL, 's'},
	        {NULL, 0, NULL, 0},
	};
	struct console_db_filter *f = &da->da_f;
	int64_t id;
	int c;
	int i;

	memset(da, 0, sizeof(*da));
	console_db_filter_init(f);
	da->da_confirm = -1;
	optind = 0;
	for (;;) {
		c = cli_getopt(argc, argv, "r:p:f:o:O:k:tly:s:", opts);
		if (c == -1) {
			break;
		}
		if (c == 'r') {
			da->da_reason = optarg;
		} else if (c == 'p') {
			f->ef_provider = optarg;
		} else if (c == 'f') {
			f->ef_reason = optarg;
		} else if (c == 'o') {
			f->ef_source = optarg;
		} else if (c == 'O') {
			f->ef_order = optarg;
		} else if (c == 'k') {
			f->ef_key_prefix = optarg;
		} else if (c == 's') {
			if (strcmp(optarg, "failed") != 0 && strcmp(optarg, "fetching") != 0) {
				fprintf(stderr, "idemhook events dismiss: --status is failed or "
				                "fetching (a done event was applied: nothing to "
				                "dismiss)\n");
				return EX_USAGE;
			}
			f->ef_outcome = optarg;
		} else if (c == 't' || c == 'l') {
			f->ef_test_mode = c == 't';
		} else if (c == 'y') {
			if (strcmp(optarg, "0") == 0) {
				da->da_confirm = 0;
			} else if (cli_parse_id(optarg, &da->da_confirm) < 0) {
				fprintf(stderr,
				        "idemhook events dismiss: --confirm wants the count "
				        "printed before\n");
				return EX_USAGE;
			}
		} else {
			cmd_events_usage(stderr);
			return EX_USAGE;
		}
		if (c != 'r' && c != 'y') {
			da->da_by_filter = 1;
		}
	}
	if (!console_db_reason_ok(da->da_reason)) {
		fprintf(stderr,
		        "idemhook events dismiss: --reason TEXT is required (1 to %d characters)\n",
		        CONSOLE_DB_REASON_MAX);
		return EX_USAGE;
	}
	if (da->da_by_filter && optind < argc) {
		fprintf(stderr, "idemhook events dismiss: give event IDs or a filter "
		                "(--provider, --failed-reason, ...), not both\n");
		return EX_USAGE;
	}
	if (!da->da_by_filter && optind == argc) {
		fprintf(stderr, "idemhook events dismiss: which events? give their IDs or a "
		                "filter (--provider, --failed-reason, ...)\n");
		return EX_USAGE;
	}
	if (!da->da_by_filter) {
		if (da->da_confirm >= 0) {
			fprintf(stderr, "idemhook events dismiss: --confirm goes with a filter\n");
			return EX_USAGE;
		}
		for (i = optind; i < argc; i++) {
			if (cli_parse_id(argv[i], &id) < 0) {
				fprintf(stderr,
				        "idemhook events dismiss: \"%s\" is not an event ID\n",
				        argv[i]);
				return EX_USAGE;
			}
		}
		da->da_ids = argv + optind;
		da->da_n_ids = argc - optind;
		return EX_OK;
	}
	if (f->ef_outcome != NULL && strcmp(f->ef_outcome, "fetching") == 0 &&
	    f->ef_reason != NULL) {
		fprintf(stderr, "idemhook events dismiss: --failed-reason selects failed events; "
		                "a thin event waiting (--status fetching) has no failure reason\n");
		return EX_USAGE;
	}
	return EX_OK;
}

static int cmd_events_dismiss(const struct cmd_events_dismiss_args *da, const struct config *cf,
                              struct store *st)
{
	const struct console_db_filter *f = &da->da_f;
	int64_t confirm = da->da_confirm;
	const char *what;
	char actor[CONSOLE_DB_ACTOR_MAX];
	int64_t count = 0;
	int fetching;
	int r;
	int rc;

	if (!da->da_by_filter) {
		return cmd_events_dismiss_ids(da->da_n_ids, da->da_ids, da->da_reason, st);
	}
	fetching = f->ef_outcome != NULL && strcmp(f->ef_outcome, "fetching") == 0;
	/* The set counted, named as the operator knows it: open failed
	 * events are the alert's (live). */
	if (fetching) {
		what = f->ef_test_mode == 1 ? "test-mode thin event(s) waiting for their full event"
		                            : "thin event(s) waiting for their full event";
	} else {
		what = f->ef_test_mode == 1 ? "failed test-mode event(s)" : "open failed event(s)";
	}
	/* A misspelt provider would match nothing and read as "0 match":
	 * refused as events list refuses it. */
	if (f->ef_provider != NULL) {
		rc = cmd_events_provider_known(cf, st, f->ef_provider, 0);
		if (rc != 0) {
			return rc;
		}
	}
	cli_actor(actor, sizeof(actor));
	r = console_db_dismiss_filter(st, cli_now_ms(), actor, f, da->da_reason, confirm, &count);
	if (r < 0) {
		return cli_tempfail("events dismiss", "nothing was dismissed");
	}
	/* Nothing matching is nothing to do, not a count to confirm: 0
	 * confirmed would dismiss nothing either. */
	if (count == 0 && confirm <= 0) {
		printf("no %s match: nothing to dismiss\n", what);
		return EX_OK;
	}
	if (confirm < 0) {
		printf("%" PRId64 " %s match; to dismiss them run the same command with "
		       "--confirm %" PRId64 "\n",
		       count, what, count);
		return EX_OK;
	}
	if (r == 1) {
		fprintf(stderr,
		        "idemhook events: %" PRId64 " %s match now, not %" PRId64
		        "; nothing dismissed (look again, then confirm the new count)\n",
		        count, what, confirm);
		return EX_DATAERR;
	}
	printf("%" PRId64 " event(s) dismissed\n", count);
	return EX_OK;
}

/* ---- reprocess ---- */

/* One event: EX_OK applied, CLI_EX_STILL_FAILED ran and still failed, or
 * the exit code of a refusal (nothing done) or a store failure (more: the
 * events after it, which a failure leaves alone too). */
static int cmd_events_reprocess_one(int64_t id, int more, const struct config *cf, struct store *st)
{
	struct console_db_reprocess rp;
	char actor[CONSOLE_DB_ACTOR_MAX];

	cli_actor(actor, sizeof(actor));
	if (console_db_reprocess(st, cf, cli_now_ms(), actor, id, &rp) < 0) {
		return cli_tempfail("events reprocess", "event %" PRId64 "%s unchanged", id,
		                    more ? " and the ones after it are" : " is");
	}
	switch (rp.rp_state) {
	case CONSOLE_DB_RP_UNKNOWN:
		fprintf(stderr, "idemhook events: no event %" PRId64 "\n", id);
		return CLI_EX_NOT_FOUND;
	case CONSOLE_DB_RP_NOT_FAILED:
		fprintf(stderr,
		        "idemhook events: event %" PRId64 " is not failed; nothing to reprocess\n",
		        id);
		return EX_DATAERR;
	case CONSOLE_DB_RP_PROVIDER_REFUSED:
		fprintf(stderr,
		        "idemhook events: event %" PRId64
		        " was refused by the provider's own rules\n",
		        id);
		return EX_DATAERR;
	case CONSOLE_DB_RP_DONE:
		break;
	}
	if (rp.rp_res.or_refused) {
		/* It ran: the new outcome is stored and audited, and reprocessed
		 * counts it. Not 65, which says nothing was done. */
		printf("event %" PRId64 ": still failed (%s)\n", id, rp.rp_res.or_reason);
		return CLI_EX_STILL_FAILED;
	}
	printf("event %" PRId64 ": done, order %s %s%s\n", id,
	       rp.rp_res.or_order_id[0] != '\0' ? rp.rp_res.or_order_id : "-",
	       rp.rp_res.or_effect != NULL ? rp.rp_res.or_effect : "-",
	       rp.rp_reply_updated ? "" : " (provider not configured: stored reply kept)");
	return EX_OK;
}

/* Each of argv[first..] in turn, each in its own unit of work. The status:
 * the first refusal's (65, 66 no such event) when any was refused, else 1
 * when any is still failed, else 0; a store failure stops there (75), the
 * events before it keeping their new outcome. */
static int cmd_events_reprocess(int argc, char **argv, int first, const struct config *cf,
                                struct store *st)
{
	int refused = EX_OK;
	int still = 0;
	int64_t id;
	int i;
	int r;

	for (i = first; i < argc; i++) {
		cli_parse_id(argv[i], &id);
		r = cmd_events_reprocess_one(id, i + 1 < argc, cf, st);
		if (r == EX_TEMPFAIL) {
			return r;
		}
		if (r == CLI_EX_STILL_FAILED) {
			still = 1;
		} else if (r != EX_OK && refused == EX_OK) {
			refused = r;
		}
	}
	if (refused != EX_OK) {
		return refused;
	}
	return still ? CLI_EX_STILL_FAILED : EX_OK;
}

/* events dismiss: parsed and run in cmd_events_dismiss, on a writer store. */
static int cmd_events_dismiss_run(int argc, char **argv, const char *config_path)
{
	struct cmd_events_dismiss_args da;
	struct config *cf = NULL;
	struct store *st = NULL;
	int rc;

	rc = cmd_events_dismiss_parse(argc - 1, argv + 1, &da);
	if (rc != EX_OK) {
		return rc;
	}
	rc = cli_open(config_path, CLI_STORE_EXISTING, &cf, &st);
	if (rc != EX_OK) {
		return rc;
	}
	rc = cmd_events_dismiss(&da, cf, st);
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

static int cmd_events_run(int argc, char **argv, const char *config_path)
{
	struct cmd_events_list el;
	struct cmd_events_one one;
	struct config *cf = NULL;
	struct store *st = NULL;
	const char *sub;
	int64_t id = 0;
	int json;
	int rc;
	int i;

	if (argc < 2 || cli_wants_help(argc, argv)) {
		cmd_events_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EX_USAGE : EX_OK;
	}
	sub = argv[1];
	if (strcmp(sub, "dismiss") == 0) {
		return cmd_events_dismiss_run(argc, argv, config_path);
	}
	if (strcmp(sub, "list") != 0 && strcmp(sub, "show") != 0 && strcmp(sub, "reprocess") != 0) {
		cmd_events_usage(stderr);
		return EX_USAGE;
	}
	json = strcmp(sub, "show") == 0 ? cli_take_flag(&argc, argv, "--json") : 0;
	if (strcmp(sub, "show") == 0 && (argc != 3 || cli_parse_id(argv[2], &id) < 0)) {
		fprintf(stderr, "idemhook events show: wants one event ID (a positive number)\n");
		return EX_USAGE;
	}
	if (strcmp(sub, "list") == 0) {
		rc = cmd_events_list_parse(argc - 1, argv + 1, &el);
		if (rc != EX_OK) {
			return rc;
		}
	}
	if (strcmp(sub, "reprocess") == 0) {
		for (i = 2; i < argc; i++) {
			if (cli_parse_id(argv[i], &id) < 0) {
				break;
			}
		}
		if (argc < 3 || i < argc) {
			fprintf(stderr, "idemhook events reprocess: wants event IDs (positive "
			                "numbers)\n");
			return EX_USAGE;
		}
	}
	/* reprocess stores the provider's acknowledgement anew, which the
	 * instance's state makes: the one subcommand that reads secrets. */
	rc = strcmp(sub, "reprocess") == 0 ? cli_load_config_secrets(config_path, &cf)
	                                   : cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	rc = cli_open_store(cf, strcmp(sub, "reprocess") != 0 ? 1 : CLI_STORE_EXISTING, &st);
	if (rc != EX_OK) {
		goto fail;
	}
	if (strcmp(sub, "list") == 0) {
		rc = cmd_events_list(&el, cf, st);
	} else if (strcmp(sub, "show") == 0) {
		memset(&one, 0, sizeof(one));
		one.eo_id = id;
		one.eo_json = json;
		rc = EX_OK;
		if (store_read(st, cli_now_ms(), cmd_events_show_unit, &one) < 0) {
			rc = EX_TEMPFAIL;
		} else if (!one.eo_found) {
			fprintf(stderr, "idemhook events: no event %" PRId64 "\n", id);
			rc = CLI_EX_NOT_FOUND;
		}
	} else {
		rc = cmd_events_reprocess(argc, argv, 2, cf, st);
	}
fail:
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_events = {
        .cc_name = "events",
        .cc_summary = "list, show, reprocess and dismiss processed callbacks",
        .cc_run = cmd_events_run,
};
