/* cmd_order.c: `idemhook order create|show|list`: orders from the command line. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cli.h"
#include "config.h"
#include "money.h"
#include "orders.h"
#include "store.h"

struct cmd_order_new {
	int64_t co_amount;
	const char *co_currency;
	const char *co_customer;
	char co_id[ORDERS_ID_LEN + 1];
};

static int cmd_order_create_unit(struct store_tx *tx, void *arg)
{
	struct cmd_order_new *co = arg;

	return orders_create(tx, co->co_amount, co->co_currency, co->co_customer, co->co_id);
}

static void cmd_order_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] order create --amount MINOR --currency CODE [--customer "
	        "REF]\n"
	        "       idemhook [-c FILE] order show ID [--json]\n"
	        "       idemhook [-c FILE] order list [--status STATUS] [--provider NAME]\n"
	        "                          [--since WHEN] [--until WHEN] [--limit N] [--json]\n\n"
	        "create makes a pending order and prints its id; MINOR is the amount in minor\n"
	        "units (1999 = 19.99 USD), 1 or more. REF is 1 to 128 bytes of UTF-8 without\n"
	        "control characters, as POST /api/orders takes customer_ref. Payment\n"
	        "callbacks name the order in metadata.order_id.\n"
	        "show prints one order: status, amounts, points, fulfillment, references.\n"
	        "list shows orders, newest first (default limit 50). STATUS is one of pending,\n"
	        "authorized, paid, partially_refunded, refunded, disputed, cancelled, expired;\n"
	        "--provider keeps the orders a [provider NAME] instance paid or referenced;\n"
	        "WHEN is a date (2026-11-01), a UTC time (2026-11-01T08:00:00Z) or a duration\n"
	        "ago (3d), on the order's creation time (--since inclusive, --until exclusive).\n\n"
	        "Exit status: 0 done, 64 usage (an unknown provider too), 66 no such order,\n"
	        "69 database unavailable, 75 database busy or failing.\n");
}

/* ---- show and list: one row's fields, in the table or as JSON ---- */

#define CMD_ORDER_COLUMNS                                                                          \
	"o.id, o.status, o.amount, o.currency, o.refunded_amount, "                                \
	"COALESCE((SELECT SUM(points) FROM points_ledger l WHERE l.order_id = o.id), 0), "         \
	"o.fulfillment_status, o.customer_ref, o.provider, o.payment_ref, o.created_at, "          \
	"o.paid_at, o.refunded_at, o.needs_operator"

struct cmd_order_out {
	int oo_json;
	int64_t oo_n;
};

static void cmd_order_json(const struct store_row *row)
{
	printf("{\"id\": ");
	cli_json_string(stdout, store_row_text(row, 0));
	printf(", \"status\": ");
	cli_json_string(stdout, store_row_text(row, 1));
	printf(", \"amount\": %" PRId64 ", \"currency\": ", store_row_int(row, 2));
	cli_json_string(stdout, store_row_text(row, 3));
	printf(", \"refunded\": %" PRId64 ", \"points\": %" PRId64 ", \"fulfillment\": ",
	       store_row_int(row, 4), store_row_int(row, 5));
	cli_json_string(stdout, store_row_text(row, 6));
	printf(", \"customer_ref\": ");
	cli_json_string(stdout, store_row_text(row, 7));
	printf(", \"provider\": ");
	cli_json_string(stdout, store_row_text(row, 8));
	printf(", \"payment_ref\": ");
	cli_json_string(stdout, store_row_text(row, 9));
	printf(", \"created\": ");
	cli_json_time(stdout, store_row_int(row, 10));
	printf(", \"paid\": ");
	cli_json_time(stdout, store_row_int(row, 11));
	printf(", \"refunded_at\": ");
	cli_json_time(stdout, store_row_int(row, 12));
	printf(", \"needs_operator\": %s}", store_row_int(row, 13) ? "true" : "false");
}

static int cmd_order_print(void *arg, const struct store_row *row)
{
	struct cmd_order_out *oo = arg;
	char created[32];
	char paid[32];

	oo->oo_n++;
	if (oo->oo_json) {
		cmd_order_json(row);
		printf("\n");
		return 1;
	}
	cli_format_time(store_row_int(row, 10), created);
	cli_format_time(store_row_int(row, 11), paid);
	cli_line(stdout, "id:                 ", store_row_text(row, 0));
	cli_line(stdout, "status:             ", store_row_text(row, 1));
	printf("amount:             %lld ", (long long)store_row_int(row, 2));
	cli_text(stdout, store_row_text(row, 3));
	printf("\nrefunded:           %lld\n"
	       "points:             %lld\n"
	       "fulfillment:        ",
	       (long long)store_row_int(row, 4), (long long)store_row_int(row, 5));
	cli_text(stdout, store_row_text(row, 6));
	printf("%s\n", store_row_int(row, 13) ? " (needs operator)" : "");
	cli_line(stdout, "customer ref:       ", store_row_text(row, 7));
	cli_line(stdout, "provider:           ", store_row_text(row, 8));
	cli_line(stdout, "payment ref:        ", store_row_text(row, 9));
	printf("created:            %s\n"
	       "paid:               %s\n",
	       created, paid);
	return 1;
}

struct cmd_order_show {
	const char *os_id;
	struct cmd_order_out os_out;
};

static int cmd_order_show_unit(struct store_tx *tx, void *arg)
{
	struct cmd_order_show *os = arg;
	struct store_value p[1] = {store_text(os->os_id)};

	if (store_query_each(tx, "SELECT " CMD_ORDER_COLUMNS " FROM orders o WHERE o.id = ?", p, 1,
	                     cmd_order_print, &os->os_out) < 0) {
		return -1;
	}
	return os->os_out.oo_n > 0;
}

struct cmd_order_list {
	const char *ol_status;
	const char *ol_provider;
	int64_t ol_since_ms; /* 0: any */
	int64_t ol_until_ms; /* 0: any */
	int64_t ol_limit;
	struct cmd_order_out ol_out;
};

static int cmd_order_list_row(void *arg, const struct store_row *row)
{
	struct cmd_order_list *ol = arg;
	char created[32];
	char amount[48];

	if (ol->ol_out.oo_json) {
		printf("%s\n    ", ol->ol_out.oo_n == 0 ? "" : ",");
		cmd_order_json(row);
		ol->ol_out.oo_n++;
		return 0;
	}
	if (ol->ol_out.oo_n == 0) {
		printf("%-*s %-18s %-16s %-20s %-10s %-12s %s\n", ORDERS_ID_LEN, "ID", "STATUS",
		       "AMOUNT", "CREATED", "PROVIDER", "FULFILLMENT", "CUSTOMER REF");
	}
	ol->ol_out.oo_n++;
	cli_format_time(store_row_int(row, 10), created);
	snprintf(amount, sizeof(amount), "%" PRId64 " %s", store_row_int(row, 2),
	         store_row_text(row, 3) != NULL ? store_row_text(row, 3) : "-");
	cli_cell(stdout, store_row_text(row, 0), ORDERS_ID_LEN);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 1), 18);
	fputc(' ', stdout);
	cli_cell(stdout, amount, 16);
	printf(" %-20s ", created);
	cli_cell(stdout, store_row_text(row, 8), 10);
	fputc(' ', stdout);
	cli_cell(stdout, store_row_text(row, 6), 12);
	fputc(' ', stdout);
	cli_text(stdout, store_row_text(row, 7));
	printf("%s\n", store_row_int(row, 13) ? " (needs operator)" : "");
	return 0;
}

static int cmd_order_list_unit(struct store_tx *tx, void *arg)
{
	struct cmd_order_list *ol = arg;
	struct store_value p[] = {
	        store_text(ol->ol_status),   store_text(ol->ol_status),
	        store_text(ol->ol_provider), store_text(ol->ol_provider),
	        store_text(ol->ol_provider), store_int(ol->ol_since_ms),
	        store_int(ol->ol_until_ms),  store_int(ol->ol_until_ms),
	        store_int(ol->ol_limit),
	};

	/* An order belongs to a provider by the payment that named it
	 * (orders.provider) or by any reference the provider gave it. No index
	 * holds order_refs by order (a random page per payment that only this
	 * reads), so the provider's orders are listed once, in one pass over
	 * the table ("|| ''" keeps SQLite from walking the (provider, ref)
	 * index and looking up every row), not searched once per order. */
	return store_query_each(tx,
	                        "SELECT " CMD_ORDER_COLUMNS " FROM orders o"
	                        " WHERE (? IS NULL OR o.status = ?)"
	                        " AND (? IS NULL OR o.provider = ? OR o.id IN (SELECT r.order_id"
	                        " FROM order_refs r WHERE r.provider || '' = ?))"
	                        " AND o.created_at >= ? AND (? = 0 OR o.created_at < ?)"
	                        " ORDER BY o.created_at DESC, o.id DESC LIMIT ?",
	                        p, sizeof(p) / sizeof(p[0]), cmd_order_list_row, ol);
}

static const char *const cmd_order_statuses[] = {
        "pending",   "authorized", "paid", "partially_refunded", "refunded", "disputed",
        "cancelled", "expired",    NULL,
};

static int cmd_order_list(int argc, char **argv, const struct config *cf)
{
	static const struct option opts[] = {
	        {"status", required_argument, NULL, 's'},
	        {"provider", required_argument, NULL, 'p'},
	        {"since", required_argument, NULL, 'S'},
	        {"until", required_argument, NULL, 'U'},
	        {"limit", required_argument, NULL, 'n'},
	        {"json", no_argument, NULL, 'j'},
	        {NULL, 0, NULL, 0},
	};
	struct cmd_order_list ol;
	struct store *st = NULL;
	size_t i;
	int c;
	int rc;

	memset(&ol, 0, sizeof(ol));
	ol.ol_limit = CLI_LIMIT_DEFAULT;
	optind = 1;
	while ((c = cli_getopt(argc, argv, "", opts)) != -1) {
		switch (c) {
		case 's':
			for (i = 0; cmd_order_statuses[i] != NULL; i++) {
				if (strcmp(cmd_order_statuses[i], optarg) == 0) {
					break;
				}
			}
			if (cmd_order_statuses[i] == NULL) {
				fprintf(stderr, "idemhook order list: --status is one of pending, "
				                "authorized, paid, partially_refunded, refunded, "
				                "disputed, cancelled, expired\n");
				return EX_USAGE;
			}
			ol.ol_status = optarg;
			break;
		case 'p':
			ol.ol_provider = optarg;
			break;
		case 'S':
		case 'U':
			if (cli_parse_when(optarg, c == 'S' ? &ol.ol_since_ms : &ol.ol_until_ms) <
			    0) {
				fprintf(stderr,
				        "idemhook order list: --%s wants a date (2026-11-01), a "
				        "UTC "
				        "time (2026-11-01T08:00:00Z) or a duration ago (3d)\n",
				        c == 'S' ? "since" : "until");
				return EX_USAGE;
			}
			break;
		case 'n':
			if (cli_parse_limit("order list", optarg, &ol.ol_limit) < 0) {
				return EX_USAGE;
			}
			break;
		case 'j':
			ol.ol_out.oo_json = 1;
			break;
		default:
			cmd_order_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		cmd_order_usage(stderr);
		return EX_USAGE;
	}
	if (ol.ol_provider != NULL && config_provider(cf, ol.ol_provider) == NULL) {
		fprintf(stderr,
		        "idemhook order list: unknown provider '%s'; configured:", ol.ol_provider);
		for (i = 0; i < cf->cf_n_providers; i++) {
			fprintf(stderr, " %s", cf->cf_providers[i].pc_name);
		}
		fprintf(stderr, "%s\n", cf->cf_n_providers == 0 ? " none" : "");
		return EX_USAGE;
	}
	rc = cli_open_store(cf, 1, &st);
	if (rc != EX_OK) {
		return rc;
	}
	if (ol.ol_out.oo_json) {
		printf("{\"orders\": [");
	}
	rc = store_read(st, cli_now_ms(), cmd_order_list_unit, &ol) < 0 ? EX_TEMPFAIL : EX_OK;
	store_destroy(st);
	if (ol.ol_out.oo_json) {
		printf("%s]}\n", ol.ol_out.oo_n > 0 ? "\n  " : "");
	} else if (rc == EX_OK && ol.ol_out.oo_n == 0) {
		printf("no orders\n");
	}
	return rc;
}

static int cmd_order_create(int argc, char **argv, const struct config *cf)
{
	static const struct option opts[] = {
	        {"amount", required_argument, NULL, 'a'},
	        {"currency", required_argument, NULL, 'C'},
	        {"customer", required_argument, NULL, 'u'},
	        {NULL, 0, NULL, 0},
	};
	struct cmd_order_new co;
	struct store *st = NULL;
	const char *detail = NULL;
	char currency[4];
	int c;
	int rc;

	memset(&co, 0, sizeof(co));
	co.co_amount = -1;
	optind = 1;
	while ((c = cli_getopt(argc, argv, "", opts)) != -1) {
		switch (c) {
		case 'a':
			if (money_parse_minor(optarg, &co.co_amount) < 0) {
				fprintf(stderr, "idemhook order create: --amount takes minor "
				                "units, e.g. 1999\n");
				return EX_USAGE;
			}
			break;
		case 'C':
			co.co_currency = optarg;
			break;
		case 'u':
			co.co_customer = optarg;
			break;
		default:
			cmd_order_usage(stderr);
			return EX_USAGE;
		}
	}
	if (co.co_amount < 0 || co.co_currency == NULL || optind != argc) {
		cmd_order_usage(stderr);
		return EX_USAGE;
	}
	/* The order API's own rules, so that no way in stores an order the
	 * API would have refused. */
	if (api_order_fields_check(co.co_amount, co.co_currency, co.co_customer, currency,
	                           &detail) < 0) {
		fprintf(stderr, "idemhook order create: %s\n", detail);
		return EX_USAGE;
	}
	co.co_currency = currency;
	rc = cli_open_store(cf, 0, &st);
	if (rc != EX_OK) {
		return rc;
	}
	if (store_write(st, cli_now_ms(), cmd_order_create_unit, &co) < 0) {
		store_destroy(st);
		return cli_tempfail("order create", "no order was created");
	}
	store_destroy(st);
	printf("%s\n", co.co_id);
	return EX_OK;
}

static int cmd_order_show(int argc, char **argv, const struct config *cf)
{
	struct cmd_order_show os;
	struct store *st = NULL;
	int rc;

	memset(&os, 0, sizeof(os));
	os.os_out.oo_json = cli_take_flag(&argc, argv, "--json");
	if (argc != 2) {
		cmd_order_usage(stderr);
		return EX_USAGE;
	}
	os.os_id = argv[1];
	rc = cli_open_store(cf, 1, &st);
	if (rc != EX_OK) {
		return rc;
	}
	rc = store_read(st, cli_now_ms(), cmd_order_show_unit, &os);
	store_destroy(st);
	if (rc < 0) {
		return EX_TEMPFAIL;
	}
	if (rc == 0) {
		fprintf(stderr, "idemhook order show: no order %s\n", os.os_id);
		return CLI_EX_NOT_FOUND;
	}
	return EX_OK;
}

static int cmd_order_run(int argc, char **argv, const char *config_path)
{
	struct config *cf = NULL;
	int rc;

	if (argc < 2 || cli_wants_help(argc, argv)) {
		cmd_order_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EX_USAGE : EX_OK;
	}
	if (strcmp(argv[1], "create") != 0 && strcmp(argv[1], "show") != 0 &&
	    strcmp(argv[1], "list") != 0) {
		fprintf(stderr, "idemhook order: unknown subcommand '%s'\n", argv[1]);
		cmd_order_usage(stderr);
		return EX_USAGE;
	}
	rc = cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	if (strcmp(argv[1], "create") == 0) {
		rc = cmd_order_create(argc - 1, argv + 1, cf);
	} else if (strcmp(argv[1], "list") == 0) {
		rc = cmd_order_list(argc - 1, argv + 1, cf);
	} else {
		rc = cmd_order_show(argc - 1, argv + 1, cf);
	}
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_order = {
        .cc_name = "order",
        .cc_summary = "create, show or list orders",
        .cc_run = cmd_order_run,
};
