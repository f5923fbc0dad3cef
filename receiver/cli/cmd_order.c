/* cmd_order.c: `idemhook order create|show`: orders from the command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int cmd_order_print(void *arg, const struct store_row *row)
{
	printf("id:                 %s\n"
	       "status:             %s\n"
	       "amount:             %lld %s\n"
	       "refunded:           %lld\n"
	       "points:             %lld\n"
	       "fulfillment:        %s\n",
	       store_row_text(row, 0), store_row_text(row, 1), (long long)store_row_int(row, 2),
	       store_row_text(row, 3), (long long)store_row_int(row, 4), (long long)store_row_int(row, 5),
	       store_row_text(row, 6));
	*(int *)arg = 1;
	return 1;
}

static int cmd_order_show_unit(struct store_tx *tx, void *arg)
{
	const char *id = *(const char **)arg;
	struct store_value p[1] = {store_text(id)};
	int found = 0;

	if (store_query_each(tx,
			     "SELECT o.id, o.status, o.amount, o.currency, o.refunded_amount, "
			     "COALESCE((SELECT SUM(points) FROM points_ledger l WHERE l.order_id = o.id), 0), "
			     "o.fulfillment_status FROM orders o WHERE o.id = ?",
			     p, 1, cmd_order_print, &found) < 0) {
		return -1;
	}
	return found;
}

static void cmd_order_usage(FILE *out)
{
	fprintf(out, "usage: idemhook [-c FILE] order create --amount MINOR --currency CODE [--customer REF]\n"
		     "       idemhook [-c FILE] order show ID\n\n"
		     "create makes a pending order and prints its id; MINOR is the amount in minor\n"
		     "units (1999 = 19.99 USD). Payment callbacks name it in metadata.order_id.\n");
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
	int c;
	int rc;

	memset(&co, 0, sizeof(co));
	co.co_amount = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (money_parse_minor(optarg, &co.co_amount) < 0) {
				fprintf(stderr, "idemhook order create: --amount takes minor units, e.g. 1999\n");
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
	if (money_exponent(co.co_currency) < 0) {
		fprintf(stderr, "idemhook order create: --currency takes a three-letter ISO 4217 code\n");
		return EX_USAGE;
	}
	rc = cli_open_store(cf, 0, &st);
	if (rc != EX_OK) {
		return rc;
	}
	if (store_write(st, cli_now_ms(), cmd_order_create_unit, &co) < 0) {
		store_destroy(st);
		return EX_TEMPFAIL;
	}
	store_destroy(st);
	printf("%s\n", co.co_id);
	return EX_OK;
}

static int cmd_order_show(int argc, char **argv, const struct config *cf)
{
	struct store *st = NULL;
	const char *id;
	int rc;

	if (argc != 2) {
		cmd_order_usage(stderr);
		return EX_USAGE;
	}
	id = argv[1];
	rc = cli_open_store(cf, 1, &st);
	if (rc != EX_OK) {
		return rc;
	}
	rc = store_read(st, 0, cmd_order_show_unit, &id);
	store_destroy(st);
	if (rc < 0) {
		return EX_TEMPFAIL;
	}
	if (rc == 0) {
		fprintf(stderr, "idemhook order show: no order %s\n", id);
		return EX_DATAERR;
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
	if (strcmp(argv[1], "create") != 0 && strcmp(argv[1], "show") != 0) {
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
	} else {
		rc = cmd_order_show(argc - 1, argv + 1, cf);
	}
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_order = {
	.cc_name = "order",
	.cc_summary = "create or show an order",
	.cc_run = cmd_order_run,
};
