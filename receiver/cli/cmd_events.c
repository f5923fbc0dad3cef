/* cmd_events.c: `idemhook events list|show|reprocess`: processed callbacks
 * as the events table keeps them, and running a failed one again. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "ingest.h"
#include "config.h"
#include "event.h"
#include "json.h"
#include "orders.h"
#include "outbox.h"
#include "provider.h"
#include "reply.h"
#include "store.h"

#define CMD_EVENTS_LIMIT_DEFAULT 50
#define CMD_EVENTS_LIMIT_MAX 100000
/* A thin event waiting for its full event is done with effect to_fetch
 * (ingest.h): listed as fetching. */
#define CMD_EVENTS_STATUS                                                                          \
	"(CASE WHEN outcome = 'done' AND effect = '" INGEST_EFFECT_TO_FETCH "' THEN 'fetching' "     \
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
	        "                                  [--provider NAME] [--source callback|reconcile]\n"
	        "                                  [--order ORDER_ID] [--limit N] [--json]\n"
	        "       idemhook [-c FILE] events show ID [--json]\n"
	        "       idemhook [-c FILE] events reprocess ID\n\n"
	        "list shows processed callbacks, newest first (default limit 50); SOURCE says\n"
	        "whether the provider sent the event (callback) or reconciliation asked for it\n"
	        "(reconcile, see idemhook reconcile). --failed is --status failed: the events\n"
	        "acknowledged but not applied (idemhook_events_unapplied_total); fetching:\n"
	        "thin events acknowledged and waiting for their full event. --order shows\n"
	        "the events of one order. A value too long for its column ends in an ellipsis;\n"
	        "--json prints every value whole.\n"
	        "show prints one event with its stored semantic payload.\n"
	        "reprocess runs a failed event through the business handler again (for\n"
	        "example after its missing order was created): the order still moves only\n"
	        "through conditional updates, the event row and the idempotency record get\n"
	        "the new outcome and reply, and a second reprocess of a done event is refused.\n\n"
	        "Exit status: 0 done, 64 usage (an unknown provider too), 65 refused,\n"
	        "66 no such event, 69 database unavailable, 75 database busy or failing.\n");
}

/* ---- list ---- */

struct cmd_events_list {
	const char *el_status;
	const char *el_provider;
	const char *el_source;
	const char *el_order;
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
		printf(", \"reprocessed\": %" PRId64 "}", store_row_int(row, 8));
		el->el_n++;
		return 0;
	}
	if (el->el_n == 0) {
		printf("%-8s %-20s %-16s %-9s %-32s %-17s %-26s %-8s %s\n", "ID", "RECEIVED",
		       "PROVIDER", "SOURCE", "KEY", "KIND", "ORDER", "OUTCOME", "DETAIL");
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
	cli_cell(stdout, store_row_text(row, 5), 26);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 6), 8);
	printf(" %s%s\n", cli_or_dash(store_row_text(row, 7)),
	       store_row_int(row, 8) > 0 ? " (reprocessed)" : "");
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
	        " CASE outcome WHEN 'failed' THEN reason ELSE effect END, reprocessed, source"
	        " FROM events WHERE (? IS NULL OR " CMD_EVENTS_STATUS " = ?) AND (? IS NULL OR scope = ?)"
	        " AND (? IS NULL OR source = ?) AND (? IS NULL OR order_ref = ?)"
	        " ORDER BY id DESC LIMIT ?",
	        p, 9, cmd_events_list_row, el);
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
static int cmd_events_provider_known(const struct config *cf, struct store *st, const char *name)
{
	size_t i;
	int rc;

	if (config_provider(cf, name) != NULL) {
		return 0;
	}
	rc = store_read(st, cli_now_ms(), cmd_events_scope_known_unit, (void *)name);
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

static int cmd_events_list(int argc, char **argv, const struct config *cf, struct store *st)
{
	static const struct option opts[] = {
	        {"status", required_argument, NULL, 's'},
	        {"provider", required_argument, NULL, 'p'},
	        {"source", required_argument, NULL, 'o'},
	        {"order", required_argument, NULL, 'O'},
	        {"limit", required_argument, NULL, 'n'},
	        {"failed", no_argument, NULL, 'f'},
	        {"json", no_argument, NULL, 'j'},
	        {NULL, 0, NULL, 0},
	};
	struct cmd_events_list el;
	int c;
	int rc;

	memset(&el, 0, sizeof(el));
	el.el_limit = CLI_LIMIT_DEFAULT;
	optind = 0;
	for (;;) {
		c = getopt_long(argc, argv, "s:p:o:n:fj", opts, NULL);
		if (c == -1) {
			break;
		}
		if (c == 's') {
			if (strcmp(optarg, "done") != 0 && strcmp(optarg, "failed") != 0 &&
			    strcmp(optarg, "fetching") != 0) {
				fprintf(stderr, "idemhook events: --status is done, failed or fetching\n");
				return EX_USAGE;
			}
			if (el.el_status != NULL && strcmp(el.el_status, optarg) != 0) {
				fprintf(stderr, "idemhook events: --failed is --status failed; "
				                "give one status\n");
				return EX_USAGE;
			}
			el.el_status = optarg;
		} else if (c == 'f') {
			if (el.el_status != NULL && strcmp(el.el_status, "failed") != 0) {
				fprintf(stderr, "idemhook events: --failed is --status failed; "
				                "give one status\n");
				return EX_USAGE;
			}
			el.el_status = "failed";
		} else if (c == 'p') {
			el.el_provider = optarg;
		} else if (c == 'o') {
			if (strcmp(optarg, "callback") != 0 && strcmp(optarg, "reconcile") != 0) {
				fprintf(stderr, "idemhook events: --source is callback or reconcile\n");
				return EX_USAGE;
			}
			el.el_source = optarg;
		} else if (c == 'O') {
			el.el_order = optarg;
		} else if (c == 'n') {
			if (cli_parse_limit("events", optarg, &el.el_limit) < 0) {
				return EX_USAGE;
			}
		} else if (c == 'j') {
			el.el_json = 1;
		} else {
			cmd_events_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		cmd_events_usage(stderr);
		return EX_USAGE;
	}
	if (el.el_provider != NULL) {
		rc = cmd_events_provider_known(cf, st, el.el_provider);
		if (rc != 0) {
			return rc;
		}
	}
	if (el.el_json) {
		printf("{\"events\": [");
	}
	if (store_read(st, cli_now_ms(), cmd_events_list_unit, &el) < 0) {
		if (el.el_json) {
			printf("]}\n");
		}
		return EX_TEMPFAIL;
	}
	if (el.el_json) {
		printf("%s]}\n", el.el_n > 0 ? "\n  " : "");
	} else if (el.el_n == 0) {
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
	        {"provider", 1}, {"key", 2},     {"type", 3},    {"kind", 4},
	        {"order", 5},    {"payment_ref", 6}, {"refund_ref", 7}, {"currency", 9},
	        {"source", 18},  {"outcome", 12}, {"effect", 13}, {"reason", 14},
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
	printf(", \"received\": ");
	cli_json_time(stdout, store_row_int(row, 15));
	printf(", \"processed\": ");
	cli_json_time(stdout, store_row_int(row, 16));
	printf(", \"reprocessed\": %" PRId64 ", \"payload\": ", store_row_int(row, 17));
	/* The stored payload as JSON when it is JSON (what most profiles
	 * keep), else as a string: the output stays one JSON document. */
	if (store_row_is_null(row, 11) || row->sr_cols[11].sv_len == 0) {
		printf("null");
	} else {
		cJSON *j = json_parse_strict(row->sr_cols[11].sv_text, row->sr_cols[11].sv_len, NULL);

		if (j != NULL) {
			fwrite(row->sr_cols[11].sv_text, 1, row->sr_cols[11].sv_len, stdout);
		} else {
			char *text = strndup(row->sr_cols[11].sv_text, row->sr_cols[11].sv_len);

			cli_json_string(stdout, text != NULL ? text : "");
			free(text);
		}
		cJSON_Delete(j);
	}
	printf("}\n");
}

static int cmd_events_show_row(void *arg, const struct store_row *row)
{
	struct cmd_events_one *one = arg;
	char received[32];
	char processed[32];

	one->eo_found = 1;
	if (one->eo_json) {
		cmd_events_show_json(row);
		return 1;
	}
	cli_format_time(store_row_int(row, 15), received);
	cli_format_time(store_row_int(row, 16), processed);
	printf("id:              %" PRId64 "\n"
	       "provider:        %s\n"
	       "key:             %s\n"
	       "type:            %s\n"
	       "kind:            %s\n"
	       "order:           %s\n"
	       "payment ref:     %s\n"
	       "refund ref:      %s\n",
	       store_row_int(row, 0), cli_or_dash(store_row_text(row, 1)),
	       cli_or_dash(store_row_text(row, 2)),
	       cli_or_dash(store_row_text(row, 3)),
	       cli_or_dash(store_row_text(row, 4)),
	       cli_or_dash(store_row_text(row, 5)),
	       cli_or_dash(store_row_text(row, 6)),
	       cli_or_dash(store_row_text(row, 7)));
	if (store_row_is_null(row, 8)) {
		printf("amount:          -\n");
	} else {
		printf("amount:          %" PRId64 " %s%s\n", store_row_int(row, 8),
		       cli_or_dash(store_row_text(row, 9)),
		       store_row_int(row, 10) ? " (refunded total so far)" : "");
	}
	printf("source:          %s\n"
	       "outcome:         %s\n"
	       "effect:          %s\n"
	       "reason:          %s\n"
	       "received:        %s\n"
	       "processed:       %s\n"
	       "reprocessed:     %" PRId64 " time(s)\n"
	       "payload:\n",
	       cli_or_dash(store_row_text(row, 18)), cli_or_dash(store_row_text(row, 12)),
	       cli_or_dash(store_row_text(row, 13)),
	       cli_or_dash(store_row_text(row, 14)), received, processed,
	       store_row_int(row, 17));
	if (!store_row_is_null(row, 11)) {
		fwrite(row->sr_cols[11].sv_text, 1, row->sr_cols[11].sv_len, stdout);
	}
	printf("\n");
	return 1;
}

#define CMD_EVENTS_COLUMNS                                                                         \
	"id, scope, idem_key, type, kind, order_ref, payment_ref, refund_ref, amount, currency,"   \
	" refund_cumulative, payload, outcome, effect, reason, received_at, processed_at, "        \
	"reprocessed, source"


static int cmd_events_show_unit(struct store_tx *tx, void *arg)
{
	struct cmd_events_one *one = arg;
	struct store_value p[1] = {store_int(one->eo_id)};

	return store_query_each(tx, "SELECT " CMD_EVENTS_COLUMNS " FROM events WHERE id = ?", p, 1,
	                        cmd_events_show_row, one);
}

/* ---- reprocess ---- */

enum cmd_events_rp_state {
	CMD_EVENTS_RP_DONE = 0,
	CMD_EVENTS_RP_UNKNOWN,
	CMD_EVENTS_RP_NOT_FAILED,
	CMD_EVENTS_RP_PROVIDER_REFUSED,
};

struct cmd_events_rp {
	int64_t rp_id;
	const struct config *rp_cf;
	enum cmd_events_rp_state rp_state;
	struct orders_result rp_res;
	int rp_reply_updated;
	int64_t rp_records_updated;
};

static char *cmd_events_dup(const struct store_row *row, size_t i)
{
	const char *s = store_row_text(row, i);

	return s != NULL ? strdup(s) : NULL;
}

/* The struct event as the ingest path built it, from the stored row. */
static int cmd_events_rebuild(const struct store_row *row, struct event *ev)
{
	const char *kind = store_row_text(row, 4);
	const char *currency = store_row_text(row, 9);
	const struct store_value *payload = &row->sr_cols[11];

	memset(ev, 0, sizeof(*ev));
	ev->ev_amount = -1;
	ev->ev_key = cmd_events_dup(row, 2);
	ev->ev_type = cmd_events_dup(row, 3);
	ev->ev_order_ref = cmd_events_dup(row, 5);
	ev->ev_payment_ref = cmd_events_dup(row, 6);
	ev->ev_refund_ref = cmd_events_dup(row, 7);
	if (ev->ev_key == NULL) {
		return -1;
	}
	ev->ev_kind = event_kind_from_name(kind);
	if (!store_row_is_null(row, 8)) {
		ev->ev_amount = store_row_int(row, 8);
	}
	if (currency != NULL && strlen(currency) < sizeof(ev->ev_currency)) {
		memcpy(ev->ev_currency, currency, strlen(currency) + 1);
	}
	ev->ev_refund_cumulative = store_row_int(row, 10) != 0;
	if (payload->sv_type == STORE_TEXT || payload->sv_type == STORE_BLOB) {
		ev->ev_payload = malloc(payload->sv_len + 1);
		if (ev->ev_payload == NULL) {
			return -1;
		}
		memcpy(ev->ev_payload, payload->sv_text, payload->sv_len);
		ev->ev_payload[payload->sv_len] = '\0';
		ev->ev_payload_len = payload->sv_len;
		event_fingerprint(ev, ev->ev_payload, ev->ev_payload_len);
	}
	return 0;
}

static int cmd_events_reprocess_unit(struct store_tx *tx, void *arg)
{
	struct cmd_events_rp *rp = arg;
	const struct config *cf = rp->rp_cf;
	const struct provider_conf *pc;
	struct store_value p[9];
	struct event_outcome out;
	struct orders_conf oc;
	struct store_row row;
	struct reply reply;
	struct event ev;
	const char *scope;
	const char *reason;
	int rc;

	reply_init(&reply);
	memset(&ev, 0, sizeof(ev));
	memset(&rp->rp_res, 0, sizeof(rp->rp_res));
	p[0] = store_int(rp->rp_id);
	rc = store_query(tx, "SELECT " CMD_EVENTS_COLUMNS " FROM events WHERE id = ?", p, 1, &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 0) {
		rp->rp_state = CMD_EVENTS_RP_UNKNOWN;
		return 0;
	}
	/* Read and decided inside the writer's transaction: a concurrent
	 * reprocess of the same event sees the outcome this one leaves. */
	reason = store_row_text(&row, 14);
	if (store_row_text(&row, 12) == NULL || strcmp(store_row_text(&row, 12), "failed") != 0) {
		rp->rp_state = CMD_EVENTS_RP_NOT_FAILED;
		rc = 0;
		goto out;
	}
	if (reason != NULL && strcmp(reason, "refused_by_provider_rules") == 0) {
		rp->rp_state = CMD_EVENTS_RP_PROVIDER_REFUSED;
		rc = 0;
		goto out;
	}
	rc = -1;
	if (cmd_events_rebuild(&row, &ev) < 0) {
		fprintf(stderr, "idemhook events: out of memory\n");
		goto out;
	}
	scope = store_row_text(&row, 1);
	oc.oc_points_num = cf->cf_points_num;
	oc.oc_points_den = cf->cf_points_den;
	if (orders_apply_event(tx, &oc, scope, &ev, &rp->rp_res) < 0) {
		goto out;
	}
	if (!rp->rp_res.or_refused && rp->rp_res.or_order_id[0] != '\0') {
		size_t i;

		for (i = 0; i < rp->rp_res.or_n_effects; i++) {
			if (outbox_on_effect(tx, cf, scope, rp->rp_res.or_order_id,
			                     rp->rp_res.or_effects[i]) < 0) {
				goto out;
			}
		}
	}
	p[0] = store_text(rp->rp_res.or_refused ? "failed" : "done");
	p[1] = store_text(rp->rp_res.or_effect);
	p[2] = store_text(rp->rp_res.or_refused ? rp->rp_res.or_reason : NULL);
	p[3] = store_int(store_tx_now(tx));
	p[4] = store_int(rp->rp_id);
	if (store_exec(tx,
	               "UPDATE events SET outcome = ?, effect = ?, reason = ?, processed_at = ?,"
	               " reprocessed = reprocessed + 1 WHERE id = ? AND outcome = 'failed'",
	               p, 5, NULL) < 0) {
		goto out;
	}
	/* The stored reply follows the new outcome, so a later redelivery of
	 * the callback replays the answer a first delivery would get now. */
	pc = config_provider(cf, scope);
	memset(&out, 0, sizeof(out));
	out.eo_refused = rp->rp_res.or_refused;
	out.eo_reason = rp->rp_res.or_refused ? rp->rp_res.or_reason : NULL;
	out.eo_order_id = rp->rp_res.or_order_id[0] != '\0' ? rp->rp_res.or_order_id : NULL;
	out.eo_effect = rp->rp_res.or_effect;
	if (pc != NULL && pc->pc_provider->p_ack(pc, &ev, &out, &reply) == 0) {
		rp->rp_reply_updated = 1;
		p[0] = store_text(rp->rp_res.or_refused ? "failed" : "done");
		p[1] = store_int(reply.reply_status);
		p[2] = store_text(reply.reply_content_type);
		p[3] = store_text(reply.reply_headers);
		p[4] = store_blob(reply.reply_body != NULL ? reply.reply_body : "",
		                  reply.reply_body_len);
		p[5] = store_int(store_tx_now(tx));
		p[6] = store_text(scope);
		p[7] = store_text(ev.ev_key);
		rc = store_exec(tx,
		                "UPDATE idempotency_records SET status = ?, reply_status = ?, "
		                "reply_content_type = ?,"
		                " reply_headers = ?, reply_body = ?, updated_at = ?"
		                " WHERE scope = ? AND idem_key = ? AND status = 'failed'",
		                p, 8, &rp->rp_records_updated);
	} else {
		p[0] = store_text(rp->rp_res.or_refused ? "failed" : "done");
		p[1] = store_int(store_tx_now(tx));
		p[2] = store_text(scope);
		p[3] = store_text(ev.ev_key);
		rc = store_exec(tx,
		                "UPDATE idempotency_records SET status = ?, updated_at = ?"
		                " WHERE scope = ? AND idem_key = ? AND status = 'failed'",
		                p, 4, &rp->rp_records_updated);
	}
	if (rc < 0) {
		goto out;
	}
	rp->rp_state = CMD_EVENTS_RP_DONE;
	rc = 0;
out:
	reply_finish(&reply);
	event_finish(&ev);
	store_row_finish(&row);
	return rc;
}

static int cmd_events_reprocess(int64_t id, const struct config *cf, struct store *st)
{
	struct cmd_events_rp rp;

	memset(&rp, 0, sizeof(rp));
	rp.rp_id = id;
	rp.rp_cf = cf;
	if (store_write(st, cli_now_ms(), cmd_events_reprocess_unit, &rp) < 0) {
		fprintf(stderr,
		        "idemhook events: reprocessing event %" PRId64 " failed; nothing changed\n",
		        id);
		return EX_TEMPFAIL;
	}
	switch (rp.rp_state) {
	case CMD_EVENTS_RP_UNKNOWN:
		fprintf(stderr, "idemhook events: no event %" PRId64 "\n", id);
		return CLI_EX_NOT_FOUND;
	case CMD_EVENTS_RP_NOT_FAILED:
		fprintf(stderr,
		        "idemhook events: event %" PRId64 " is not failed; nothing to reprocess\n",
		        id);
		return EX_DATAERR;
	case CMD_EVENTS_RP_PROVIDER_REFUSED:
		fprintf(stderr,
		        "idemhook events: event %" PRId64
		        " was refused by the provider's own rules\n",
		        id);
		return EX_DATAERR;
	case CMD_EVENTS_RP_DONE:
		break;
	}
	if (rp.rp_res.or_refused) {
		printf("event %" PRId64 ": still failed (%s)\n", id, rp.rp_res.or_reason);
		return EX_DATAERR;
	}
	printf("event %" PRId64 ": done, order %s %s%s\n", id,
	       rp.rp_res.or_order_id[0] != '\0' ? rp.rp_res.or_order_id : "-",
	       rp.rp_res.or_effect != NULL ? rp.rp_res.or_effect : "-",
	       rp.rp_reply_updated ? "" : " (provider not configured: stored reply kept)");
	return EX_OK;
}

static int cmd_events_run(int argc, char **argv, const char *config_path)
{
	struct cmd_events_one one;
	struct config *cf = NULL;
	struct store *st = NULL;
	const char *sub;
	int64_t id = 0;
	int json;
	int rc;

	if (argc < 2 || cli_wants_help(argc, argv)) {
		cmd_events_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EX_USAGE : EX_OK;
	}
	sub = argv[1];
	if (strcmp(sub, "list") != 0 && strcmp(sub, "show") != 0 && strcmp(sub, "reprocess") != 0) {
		cmd_events_usage(stderr);
		return EX_USAGE;
	}
	json = strcmp(sub, "show") == 0 ? cli_take_flag(&argc, argv, "--json") : 0;
	if (strcmp(sub, "list") != 0 && (argc != 3 || cli_parse_id(argv[2], &id) < 0)) {
		fprintf(stderr, "idemhook events %s: wants one event ID (a positive number)\n",
		        sub);
		return EX_USAGE;
	}
	/* reprocess stores the provider's acknowledgement anew, which the
	 * instance's state makes: the one subcommand that reads secrets. */
	rc = strcmp(sub, "reprocess") == 0 ? cli_load_config_secrets(config_path, &cf)
	                                   : cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	rc = cli_open_store(cf, strcmp(sub, "reprocess") != 0, &st);
	if (rc != EX_OK) {
		goto fail;
	}
	if (strcmp(sub, "list") == 0) {
		rc = cmd_events_list(argc - 1, argv + 1, cf, st);
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
		rc = cmd_events_reprocess(id, cf, st);
	}
fail:
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_events = {
        .cc_name = "events",
        .cc_summary = "list, show and reprocess processed callbacks",
        .cc_run = cmd_events_run,
};
